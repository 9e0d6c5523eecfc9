//! One daemon at a time: configuration errors, refusal of root, the insecure shared-uid
//! mode, socket hygiene and SIGTERM.

use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use argos_tests::{JOB_UID, MCP_UID, SOCKET_GID, command, open_tempdir, probe, require_root};

fn run_daemon(name: &str, config: &Path, env: &[(&str, &str)], extra: &[&str]) -> Output {
    let mut cmd = command(&format!("argos-{name}"));
    cmd.arg("--config").arg(config).args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn base_config(root: &Path) -> String {
    format!(
        "runtime_dir = \"{0}/run\"\nstate_dir = \"{0}/state\"\n[gateway]\nlisten = \"127.0.0.1:0\"\n",
        root.display()
    )
}

#[test]
fn a_bad_config_exits_non_zero_naming_every_bad_key() {
    let root = open_tempdir();
    let cfg = root.path().join("bad.toml");
    std::fs::write(
        &cfg,
        "runtime_dir = \"relative/dir\"\ncolour = \"blue\"\n[socket]\nmode = \"0999\"\n[peers]\ngateway_uids = [\"x\", -1]\ninsecure_shared_uid = \"yes\"\n",
    )
    .unwrap();
    for d in ["execd", "mcpd", "jobd", "gatewayd"] {
        let out = run_daemon(d, &cfg, &[("ARGOS_LOG__FORMAT", "xml")], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{d}: {err}");
        for key in [
            "runtime_dir",
            "colour (file",
            "socket.mode",
            "peers.gateway_uids",
            "peers.insecure_shared_uid",
            "log.format (env ARGOS_LOG__FORMAT)",
        ] {
            assert!(err.contains(key), "{d} does not name {key}:\n{err}");
        }
        assert!(
            !root.path().join("run").exists(),
            "nothing may be bound on a bad config"
        );
    }
    let missing = run_daemon("execd", &root.path().join("nope.toml"), &[], &[]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("nope.toml"));
}

/// execd's own checks (beyond the schema) are reported together, with exit 2, before
/// anything is bound — `--check-config` included.
#[test]
fn execd_reports_every_own_config_problem_before_binding() {
    let root = open_tempdir();
    let cfg = root.path().join("execd.toml");
    std::fs::write(
        &cfg,
        format!(
            "{}[exec]\nwarm_shims = 65\napproval_ttl_s = 0\nlaunch_uid_base = 100\n",
            base_config(root.path())
        ),
    )
    .unwrap();
    for extra in [&[][..], &["--check-config"][..]] {
        let out = run_daemon("execd", &cfg, &[], extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        for key in [
            "exec.warm_shims",
            "exec.approval_ttl_s",
            "exec.launch_uid_base",
        ] {
            assert!(err.contains(key), "{extra:?} does not name {key}:\n{err}");
        }
        assert!(
            !root.path().join("run").exists() && !root.path().join("state").exists(),
            "nothing may be bound or created on a bad config"
        );
    }
}

#[test]
fn print_config_shows_effective_values_and_origins() {
    let root = open_tempdir();
    let cfg = root.path().join("argos.toml");
    std::fs::write(&cfg, base_config(root.path())).unwrap();
    let out = run_daemon(
        "execd",
        &cfg,
        &[("ARGOS_SHUTDOWN__GRACE_MS", "900")],
        &["--print-config"],
    );
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("grace_ms = 900") && text.contains("from: env ARGOS_SHUTDOWN__GRACE_MS"),
        "{text}"
    );
    assert!(
        text.contains(&format!("runtime_dir = \"{}/run\"", root.path().display())),
        "{text}"
    );
    assert!(text.contains("from: default"), "{text}");
    // The printed config is itself a valid config.
    let again = root.path().join("printed.toml");
    std::fs::write(&again, text.as_bytes()).unwrap();
    let check = run_daemon("execd", &again, &[], &["--check-config"]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn unprivileged_daemons_refuse_to_run_as_root() {
    require_root("the refuse-root test");
    let root = open_tempdir();
    let cfg = root.path().join("argos.toml");
    std::fs::write(&cfg, base_config(root.path())).unwrap();
    for d in ["mcpd", "jobd", "gatewayd"] {
        let out = run_daemon(d, &cfg, &[], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{d}: {err}");
        assert!(err.contains("refusing to run as root"), "{d}: {err}");
    }
    assert!(!root.path().join("run").exists());
}

#[test]
fn a_shared_uid_is_refused_unless_declared_insecure() {
    let root = open_tempdir();
    let cfg = root.path().join("argos.toml");
    std::fs::write(
        &cfg,
        format!(
            "{}[peers]\ngateway_uids = [5000]\nmcp_uids = [5000]\n",
            base_config(root.path())
        ),
    )
    .unwrap();
    let out = run_daemon("execd", &cfg, &[], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("uid 5000 is configured as several peer roles (gateway+mcp)"),
        "{err}"
    );
    assert!(err.contains("insecure_shared_uid"), "{err}");
}

#[test]
fn an_insecure_run_says_so_on_start_and_in_status() {
    require_root("the insecure-run test (it runs jobd as another uid)");
    let root = open_tempdir();
    let state = root.path().join("state");
    let run = root.path().join("run");
    for dir in [&state, &run] {
        std::fs::create_dir(dir).unwrap();
        chown(dir, Some(JOB_UID), Some(SOCKET_GID)).unwrap();
    }
    let cfg = root.path().join("argos.toml");
    let u = JOB_UID;
    std::fs::write(
        &cfg,
        format!(
            "{}[peers]\ngateway_uids = [{u}]\nmcp_uids = [{u}]\njob_uids = [{u}]\ninsecure_shared_uid = true\n",
            base_config(root.path())
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut child = command("argos-jobd")
        .arg("--config")
        .arg(&cfg)
        .uid(u)
        .gid(SOCKET_GID)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let socket = argos_common::connect::socket_path(&run, "jobd");
    wait_for(&socket);
    let st = probe(&socket, Some((u, SOCKET_GID)), Some("alice"));
    assert_eq!(st.json["insecure_shared_uid"], true, "{:?}", st.json);
    assert_eq!(
        st.json["peer_roles"],
        serde_json::json!(["PEER_ROLE_GATEWAY", "PEER_ROLE_MCP", "PEER_ROLE_JOB"])
    );
    terminate(&mut child);
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("INSECURE RUN"), "{err}");
}

fn wait_for(socket: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn terminate(child: &mut std::process::Child) -> Duration {
    let t = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "clean exit on SIGTERM, got {status}");
    t.elapsed()
}

#[test]
fn sigterm_stops_a_daemon_within_two_seconds_even_with_a_client_connected() {
    let root = open_tempdir();
    let cfg = root.path().join("argos.toml");
    std::fs::write(&cfg, base_config(root.path())).unwrap();
    let mut child = command("argos-execd")
        .arg("--config")
        .arg(&cfg)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = argos_common::connect::socket_path(&root.path().join("run"), "execd");
    wait_for(&socket);
    // A client holding a health Watch stream open must not keep the daemon alive.
    let watcher = {
        let socket = socket.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut h = tonic_health::pb::health_client::HealthClient::new(
                    argos_tests::channel(&socket),
                );
                let mut s = h
                    .watch(tonic_health::pb::HealthCheckRequest {
                        service: String::new(),
                    })
                    .await
                    .unwrap()
                    .into_inner();
                while let Ok(Some(_)) = s.message().await {}
            })
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let took = terminate(&mut child);
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert!(!socket.exists(), "socket removed on exit");
    watcher.join().unwrap();
}

#[test]
fn socket_hygiene_stale_removed_live_and_foreign_refused() {
    require_root("the socket hygiene test (it gives the socket's directory to another uid)");
    let root = open_tempdir();
    let cfg = root.path().join("argos.toml");
    std::fs::write(&cfg, base_config(root.path())).unwrap();
    let run = root.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let socket = argos_common::connect::socket_path(&run, "execd");
    let dir = socket.parent().unwrap();
    // The socket's directory taken by another uid (a daemon that got there first), or
    // open to others for writing: refused, not used — and nothing bound in it.
    std::fs::create_dir(dir).unwrap();
    chown(dir, Some(MCP_UID), Some(SOCKET_GID)).unwrap();
    let out = run_daemon("execd", &cfg, &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("socket directory") && err.contains(&format!("owned by uid {MCP_UID}")),
        "{err}"
    );
    chown(dir, Some(0), Some(0)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run_daemon("execd", &cfg, &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("lets others create names in it"),
        "{out:?}"
    );
    assert!(!socket.exists());
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750)).unwrap();
    // A regular file where the socket goes is not ours to delete.
    std::fs::write(&socket, "precious").unwrap();
    let out = run_daemon("execd", &cfg, &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a socket"));
    assert_eq!(std::fs::read_to_string(&socket).unwrap(), "precious");
    std::fs::remove_file(&socket).unwrap();
    // A stale socket (nobody listening) is replaced.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let mut first = command("argos-execd")
        .arg("--config")
        .arg(&cfg)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while probe(&socket, None, None).json["ok"] != true {
        assert!(
            Instant::now() < deadline,
            "execd did not replace the stale socket"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777,
        0o660
    );
    // A live socket is refused: a second execd does not steal it.
    let second = run_daemon("execd", &cfg, &[], &[]);
    assert_eq!(second.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&second.stderr).contains("in use by a running process"));
    assert_eq!(
        probe(&socket, None, None).json["ok"],
        true,
        "the first execd still serves"
    );
    terminate(&mut first);
}

#[test]
fn json_logs_are_one_object_per_line() {
    let root = open_tempdir();
    let cfg = root.path().join("argos.toml");
    std::fs::write(&cfg, base_config(root.path())).unwrap();
    let mut child = command("argos-execd")
        .arg("--config")
        .arg(&cfg)
        .env("ARGOS_LOG__FORMAT", "json")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&argos_common::connect::socket_path(
        &root.path().join("run"),
        "execd",
    ));
    terminate(&mut child);
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    let events: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let serving = events
        .iter()
        .find(|e| e["message"] == "serving")
        .expect("a serving event");
    assert_eq!(serving["daemon"], "execd");
    assert_eq!(serving["level"], "INFO");
    assert!(events.iter().any(|e| e["message"] == "stopped"));
}

/// What a service manager hears from each daemon on its `NOTIFY_SOCKET` (systemd's
/// `Type=notify`): `READY=1` once its socket serves, with a `STATUS=` line naming it;
/// `WATCHDOG=1` at half the period `WATCHDOG_USEC` sets; `STOPPING=1` when it is stopped.
/// The sender of each datagram is the kernel's word (`SCM_CREDENTIALS`).
#[test]
fn each_daemon_tells_a_service_manager_ready_watchdog_and_stopping() {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, UnixAddr, recvmsg, setsockopt, sockopt};
    use std::collections::HashMap;
    use std::io::IoSliceMut;
    use std::os::fd::AsRawFd as _;
    let dir = open_tempdir();
    let path = dir.path().join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    // Every daemon's uid may write to it.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    setsockopt(&sock, sockopt::PassCred, &true).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    // (pid, text) of every datagram that came within `secs`.
    let hear = |secs: u64| -> Vec<(i32, String)> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            let mut buf = [0u8; 4096];
            let mut iov = [IoSliceMut::new(&mut buf)];
            let mut space = nix::cmsg_space!(nix::sys::socket::UnixCredentials);
            let Ok(msg) = recvmsg::<UnixAddr>(
                sock.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::empty(),
            ) else {
                continue;
            };
            let pid = msg
                .cmsgs()
                .unwrap()
                .find_map(|c| match c {
                    ControlMessageOwned::ScmCredentials(cr) => Some(cr.pid()),
                    _ => None,
                })
                .expect("the sender's credentials");
            let n = msg.bytes;
            got.push((pid, String::from_utf8_lossy(&buf[..n]).into_owned()));
        }
        got
    };
    let stack = argos_tests::StackBuilder::new()
        .env("NOTIFY_SOCKET", path.to_str().unwrap())
        .env("WATCHDOG_USEC", "400000")
        .start();
    let got = hear(2);
    let mut ready: HashMap<String, i32> = HashMap::new();
    for (pid, text) in &got {
        if text.lines().any(|l| l == "READY=1") {
            let status = text
                .lines()
                .find_map(|l| l.strip_prefix("STATUS="))
                .expect("a STATUS= line with READY=1");
            let daemon = status.split(':').next().unwrap().to_string();
            assert!(status.contains("serving on"), "{status}");
            assert!(
                ready.insert(daemon, *pid).is_none(),
                "READY=1 once each: {got:?}"
            );
        }
    }
    let mut names: Vec<&String> = ready.keys().collect();
    names.sort();
    assert_eq!(
        names,
        ["argos-execd", "argos-gatewayd", "argos-jobd", "argos-mcpd"],
        "{got:?}"
    );
    // Pings every 200 ms from each: a few in 2 s, never from an unknown process.
    for (daemon, pid) in &ready {
        let pings = got
            .iter()
            .filter(|(p, t)| p == pid && t.trim() == "WATCHDOG=1")
            .count();
        assert!(pings >= 4, "{daemon} pinged {pings} times in 2 s: {got:?}");
    }
    assert!(
        got.iter().all(|(p, _)| ready.values().any(|r| r == p)),
        "{got:?}"
    );
    stack.stop();
    let after = hear(1);
    for (daemon, pid) in &ready {
        assert!(
            after.iter().any(|(p, t)| p == pid
                && t.lines().any(|l| l == "STOPPING=1")
                && t.contains(&format!("STATUS={daemon}: stopping"))),
            "{daemon}: {after:?}"
        );
    }
}
