//! `GET /api/host`: this host at a glance — its name, uptime, load, CPU use, memory and
//! disks — read from `/proc` and `statvfs`, which an unprivileged process may read.

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

#[utoipa::path(get, path = "/api/host", tag = "status", description = "This host at a glance: its name, uptime, load averages, CPUs and their use over a quarter second, memory and swap, and each real filesystem's size and free space (any logged-in caller; tokens need `read`).", responses((status = 200, description = "`{\"hostname\", \"uptime_s\", \"load\": [1, 5, 15 min], \"cpus\", \"cpu_busy_percent\", \"memory\": {\"total_bytes\", \"available_bytes\"}, \"swap\": {…}, \"disks\": [{\"mount\", \"device\", \"fs\", \"size_bytes\", \"available_bytes\"}]}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn host(_caller: Caller) -> Json<serde_json::Value> {
    let before = cpu_times();
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    let after = cpu_times();
    let (busy, total) = (
        after.0.saturating_sub(before.0),
        after.1.saturating_sub(before.1),
    );
    let busy_percent = (busy * 1000)
        .checked_div(total)
        .map_or(0.0, |v| v as f64 / 10.0);
    let load: Vec<f64> = read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse().ok())
        .collect();
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
    }))
}
