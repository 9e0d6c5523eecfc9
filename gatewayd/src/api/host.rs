//! `GET /api/host`: this host at a glance — its name, uptime, load, CPU use, memory and
//! disks — read from `/proc` and `statvfs`, which an unprivileged process may read; and
//! its recent past (CPU, memory, load every 5 s over the last 10 minutes), sampled by
//! `sample_host` for the dashboard's charts.

use super::*;

/// Filesystems worth showing: real storage, not the kernel's own.
const REAL: &[&str] = &[
    "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "vfat", "exfat", "ntfs3", "jfs",
    "reiserfs", "bcachefs", "overlay", "nfs", "nfs4", "cifs", "fuseblk",
];

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `(busy, total)` jiffies of all CPUs from `/proc/stat`.
fn cpu_times() -> (u64, u64) {
    let stat = read("/proc/stat");
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return (0, 0);
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    // idle and iowait are not busy.
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

fn meminfo() -> std::collections::HashMap<String, u64> {
    read("/proc/meminfo")
        .lines()
        .filter_map(|l| {
            let (k, rest) = l.split_once(':')?;
            let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
            Some((k.to_string(), kb * 1024))
        })
        .collect()
}

fn disks() -> Vec<serde_json::Value> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for line in read("/proc/self/mounts").lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(dev), Some(mount), Some(fs)) = (f.first(), f.get(1), f.get(2)) else {
            continue;
        };
        // Mount points escape spaces as \040.
        let mount = mount.replace("\\040", " ");
        if !REAL.contains(fs) || !seen.insert(dev.to_string()) || out.len() >= 32 {
            continue;
        }
        let Ok(s) = nix::sys::statvfs::statvfs(mount.as_str()) else {
            continue;
        };
        let frag = s.fragment_size();
        let size = s.blocks().saturating_mul(frag);
        let free = s.blocks_available().saturating_mul(frag);
        if size == 0 {
            continue;
        }
        out.push(json!({"mount": mount, "device": dev, "fs": fs,
                        "size_bytes": size, "available_bytes": free}));
    }
    out
}

/// An address from `/proc/net/{tcp,udp}[6]`: hex, each 32-bit word in host byte order.
fn proc_addr(hex: &str) -> Option<std::net::IpAddr> {
    let words: Vec<u32> = (0..hex.len() / 8)
        .map(|i| u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect::<Option<_>>()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    match bytes.len() {
        4 => Some(std::net::IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => {
            let v6 = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?);
            Some(v6.to_ipv4_mapped().map_or(v6.into(), Into::into))
        }
        _ => None,
    }
}

/// Sockets waiting for connections (TCP in LISTEN) or datagrams (UDP unconnected), with
/// the user that owns each, from `/proc/net` (this network namespace: the host's). Which
/// process holds one is not readable without privilege, so it is not said.
fn listeners() -> Vec<serde_json::Value> {
    let mut seen = std::collections::BTreeSet::new();
    for (file, proto, state) in [
        ("/proc/net/tcp", "tcp", "0A"),
        ("/proc/net/tcp6", "tcp", "0A"),
        ("/proc/net/udp", "udp", "07"),
        ("/proc/net/udp6", "udp", "07"),
    ] {
        for line in read(file).lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(remote), Some(st), Some(uid)) =
                (f.get(1), f.get(2), f.get(3), f.get(7))
            else {
                continue;
            };
            // A UDP socket connected to a peer is not waiting for anyone.
            if *st != state || (proto == "udp" && !remote.ends_with(":0000")) {
                continue;
            }
            let Some((addr, port)) = local.split_once(':') else {
                continue;
            };
            let (Some(addr), Ok(port), Ok(uid)) = (
                proc_addr(addr),
                u16::from_str_radix(port, 16),
                uid.parse::<u32>(),
            ) else {
                continue;
            };
            seen.insert((port, proto, addr, uid));
        }
    }
    seen.into_iter()
        .take(256)
        .map(|(port, proto, addr, uid)| {
            let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                .ok()
                .flatten()
                .map_or_else(|| uid.to_string(), |u| u.name);
            json!({"proto": proto, "address": addr.to_string(), "port": port, "user": user})
        })
        .collect()
}

/// How often the host is sampled, and how many samples are kept (10 minutes).
const EVERY: std::time::Duration = std::time::Duration::from_secs(5);
const KEPT: usize = 120;

/// One sample of the host's recent past.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    pub at_ms: i64,
    pub cpu_busy_percent: f64,
    pub memory_used_bytes: u64,
    pub load1: f64,
}

/// The last `KEPT` samples, oldest first.
#[derive(Debug, Default)]
pub struct HostHistory(std::sync::Mutex<std::collections::VecDeque<Sample>>);

impl HostHistory {
    fn push(&self, s: Sample) {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() == KEPT {
            q.pop_front();
        }
        q.push_back(s);
    }

    fn all(&self) -> Vec<Sample> {
        let q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        q.iter().copied().collect()
    }
}

/// Busy share of the CPU time between two `cpu_times` readings, in percent (one decimal).
fn busy_percent(before: (u64, u64), after: (u64, u64)) -> f64 {
    let (busy, total) = (
        after.0.saturating_sub(before.0),
        after.1.saturating_sub(before.1),
    );
    (busy * 1000)
        .checked_div(total)
        .map_or(0.0, |v| v as f64 / 10.0)
}

fn load() -> Vec<f64> {
    read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse().ok())
        .collect()
}

/// Samples the host every 5 s for the life of the gateway (two small `/proc` reads).
pub async fn sample_host(api: Shared) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut before = cpu_times();
    tick.tick().await;
    loop {
        tick.tick().await;
        let after = cpu_times();
        let m = meminfo();
        let get = |k: &str| m.get(k).copied().unwrap_or(0);
        api.host_history.push(Sample {
            at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            cpu_busy_percent: busy_percent(before, after),
            memory_used_bytes: get("MemTotal").saturating_sub(get("MemAvailable")),
            load1: load().first().copied().unwrap_or(0.0),
        });
        before = after;
    }
}

#[utoipa::path(get, path = "/api/host", tag = "status", description = "This host at a glance: its name, uptime, load averages, CPUs and their use over a quarter second, memory and swap, each real filesystem's size and free space, the sockets waiting for connections or datagrams (protocol, address, port, owning user; admins only, empty for others), and the last 10 minutes sampled every 5 s (CPU, memory in use, 1-minute load; oldest first) (any logged-in caller; tokens need `read`).", responses((status = 200, description = "`{\"hostname\", \"uptime_s\", \"load\": [1, 5, 15 min], \"cpus\", \"cpu_busy_percent\", \"memory\": {\"total_bytes\", \"available_bytes\"}, \"swap\": {…}, \"disks\": [{\"mount\", \"device\", \"fs\", \"size_bytes\", \"available_bytes\"}], \"listeners\": [{\"proto\", \"address\", \"port\", \"user\"}], \"history\": [{\"at_ms\", \"cpu_busy_percent\", \"memory_used_bytes\", \"load1\"}]}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn host(State(api): State<Shared>, caller: Caller) -> Json<serde_json::Value> {
    let before = cpu_times();
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    let busy_percent = busy_percent(before, cpu_times());
    let load = load();
    let uptime: f64 = read("/proc/uptime")
        .split_whitespace()
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0.0);
    let m = meminfo();
    let get = |k: &str| m.get(k).copied().unwrap_or(0);
    Json(json!({
        "hostname": nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default(),
        "uptime_s": uptime as u64,
        "load": load,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "cpu_busy_percent": busy_percent,
        "memory": {"total_bytes": get("MemTotal"), "available_bytes": get("MemAvailable")},
        "swap": {"total_bytes": get("SwapTotal"), "available_bytes": get("SwapFree")},
        "disks": disks(),
        // Which services this host runs and where: for admins only.
        "listeners": if caller.is_admin() { listeners() } else { Vec::new() },
        "history": api.host_history.all(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_keeps_the_last_ten_minutes_oldest_first() {
        let h = HostHistory::default();
        for i in 0..(KEPT as i64 + 7) {
            h.push(Sample {
                at_ms: i,
                cpu_busy_percent: 0.0,
                memory_used_bytes: 0,
                load1: 0.0,
            });
        }
        let all = h.all();
        assert_eq!(all.len(), KEPT);
        assert_eq!(all[0].at_ms, 7);
        assert_eq!(all[KEPT - 1].at_ms, KEPT as i64 + 6);
        assert_eq!(KEPT as u64 * EVERY.as_secs(), 600);
    }

    #[test]
    fn proc_net_addresses_read_as_the_kernel_wrote_them() {
        // 127.0.0.1 as /proc/net/tcp shows it on a little-endian host.
        let lo = if cfg!(target_endian = "little") {
            "0100007F"
        } else {
            "7F000001"
        };
        assert_eq!(proc_addr(lo), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(proc_addr("00000000"), Some("0.0.0.0".parse().unwrap()));
        assert_eq!(proc_addr(&"0".repeat(32)), Some("::".parse().unwrap()));
        assert_eq!(proc_addr("zz"), None);
        assert_eq!(proc_addr("0100"), None);
    }

    #[test]
    fn this_process_listening_socket_is_listed_with_its_user() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let all = listeners();
        let me = all
            .iter()
            .find(|x| x["port"] == port && x["address"] == "127.0.0.1")
            .unwrap_or_else(|| panic!("{port} not in {all:?}"));
        assert_eq!(me["proto"], "tcp");
        let uid = nix::unistd::getuid();
        let name = nix::unistd::User::from_uid(uid)
            .unwrap()
            .map_or(uid.to_string(), |u| u.name);
        assert_eq!(me["user"], name.as_str());
    }

    #[test]
    fn busy_share_is_a_percent_with_one_decimal_and_never_divides_by_zero() {
        assert_eq!(busy_percent((100, 1000), (150, 1100)), 50.0);
        assert_eq!(busy_percent((0, 0), (1, 3)), 33.3);
        assert_eq!(busy_percent((5, 5), (5, 5)), 0.0);
        // A counter that went backwards (a reading torn by a CPU going offline).
        assert_eq!(busy_percent((10, 10), (5, 5)), 0.0);
    }
}
