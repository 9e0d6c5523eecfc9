//! The real stack, started by `argosctl up`: sockets, peer authorization, principals,
//! the gateway's page, and a clean stop.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use argos_tests::{
    DAEMONS, GATEWAY_UID, JOB_UID, MCP_UID, SOCKET_GID, StackBuilder, is_root, probe, require_root,
};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

fn service_of(daemon: &str) -> &'static str {
    match daemon {
        "execd" => "argos.exec.v1.Exec",
        "mcpd" => "argos.mcp.v1.Mcp",
        "jobd" => "argos.job.v1.Job",
        "gatewayd" => "argos.gateway.v1.Gateway",
        _ => unreachable!(),
    }
}

async fn list_v1(socket: &Path) -> Vec<String> {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};
    let mut client = ServerReflectionClient::new(argos_tests::channel(socket));
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = client
        .server_reflection_info(tokio_stream::iter([req]))
        .await
        .expect("reflection v1 call")
        .into_inner();
    let resp: ServerReflectionResponse = stream.message().await.unwrap().expect("one response");
    match resp.message_response {
        Some(MessageResponse::ListServicesResponse(l)) => {
            l.service.into_iter().map(|s| s.name).collect()
        }
        other => panic!("unexpected reflection answer {other:?}"),
    }
}

async fn list_v1alpha(socket: &Path) -> Vec<String> {
    use tonic_reflection::pb::v1alpha::ServerReflectionRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;
    let mut client = ServerReflectionClient::new(argos_tests::channel(socket));
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = client
        .server_reflection_info(tokio_stream::iter([req]))
        .await
        .expect("reflection v1alpha call")
        .into_inner();
    let resp = stream.message().await.unwrap().expect("one response");
    match resp.message_response {
        Some(MessageResponse::ListServicesResponse(l)) => {
            l.service.into_iter().map(|s| s.name).collect()
        }
        other => panic!("unexpected reflection answer {other:?}"),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn every_socket_lists_services_by_reflection_and_reports_serving() {
    let stack = StackBuilder::new().start();
    for d in DAEMONS {
        let socket = stack.socket(d);
        for names in [list_v1(&socket).await, list_v1alpha(&socket).await] {
            assert!(names.contains(&service_of(d).to_string()), "{d}: {names:?}");
            assert!(
                names.contains(&"grpc.health.v1.Health".to_string()),
                "{d}: {names:?}"
            );
            // Each daemon advertises its own service only.
            for other in DAEMONS.iter().filter(|o| **o != d) {
                assert!(
                    !names.contains(&service_of(other).to_string()),
                    "{d} lists {other}: {names:?}"
                );
            }
        }
        let mut health = HealthClient::new(argos_tests::channel(&socket));
        for service in ["", service_of(d)] {
            let r = health
                .check(HealthCheckRequest {
                    service: service.into(),
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(r.status, ServingStatus::Serving as i32, "{d} {service:?}");
        }
    }
    stack.stop();
}

#[test]
fn unknown_uid_is_denied_and_known_peers_succeed() {
    require_root("the peer-denial test");
    let stack = StackBuilder::new().start();
    for d in DAEMONS {
        let socket = stack.socket(d);
        // nobody, even inside the socket group, is not in the peer table.
        let denied = probe(&socket, Some((65534, SOCKET_GID)), None);
        assert_eq!(denied.json["ok"], false, "{d}: {:?}", denied.json);
        assert_eq!(
            denied.json["code"], "PermissionDenied",
            "{d}: {:?}",
            denied.json
        );
        // nobody outside the socket group cannot even connect (mode 0660).
        let closed = probe(&socket, Some((65534, 65534)), None);
        assert_eq!(closed.json["code"], "Unavailable", "{d}: {:?}", closed.json);
        // Known peers succeed, and each is told the role it was resolved to.
        for (uid, role) in [
            (GATEWAY_UID, "PEER_ROLE_GATEWAY"),
            (MCP_UID, "PEER_ROLE_MCP"),
            (JOB_UID, "PEER_ROLE_JOB"),
        ] {
            let ok = probe(&socket, Some((uid, SOCKET_GID)), None);
            assert_eq!(
                ok.json["ok"], true,
                "{d} as {uid}: {:?} {}",
                ok.json, ok.stderr
            );
            assert_eq!(ok.json["peer_roles"], serde_json::json!([role]), "{d}");
            assert_eq!(ok.json["peer_uid"], uid, "{d}");
            assert_eq!(ok.json["daemon"], d);
        }
        let root = probe(&socket, None, None);
        assert_eq!(
            root.json["peer_roles"],
            serde_json::json!(["PEER_ROLE_OPERATOR"]),
            "{d}"
        );
        assert_eq!(root.json["insecure_shared_uid"], false);
    }
    stack.wait_log(
        "peer denied method=/argos.common.v1.Daemon/Status peer=uid=65534 gid=64200 pid=",
        1,
    );
    stack.stop();
}

#[test]
fn principal_is_believed_only_from_peers_allowed_to_assert_it() {
    require_root("the principal test");
    let stack = StackBuilder::new().start();
    let socket = stack.socket("execd");
    let gw = probe(&socket, Some((GATEWAY_UID, SOCKET_GID)), Some("alice"));
    assert_eq!(gw.json["principal"], "alice", "{:?}", gw.json);
    assert_eq!(gw.json["request_id"], "probe-1");
    let job = probe(&socket, Some((JOB_UID, SOCKET_GID)), Some("bob"));
    assert_eq!(job.json["principal"], "bob", "{:?}", job.json);
    let mcp = probe(&socket, Some((MCP_UID, SOCKET_GID)), Some("alice"));
    assert_eq!(mcp.json["ok"], true);
    assert_eq!(
        mcp.json["principal"], "",
        "mcp may not assert a principal: {:?}",
        mcp.json
    );
    let op = probe(&socket, None, Some("alice"));
    assert_eq!(
        op.json["principal"], "",
        "an operator may not assert a principal: {:?}",
        op.json
    );
    let bad = probe(&socket, Some((GATEWAY_UID, SOCKET_GID)), Some("al ice"));
    assert_eq!(
        bad.json["principal"], "",
        "a malformed principal is ignored: {:?}",
        bad.json
    );
    stack.wait_log(
        "principal metadata from a peer that may not assert one: ignored",
        2,
    );
    stack.stop();
}

#[test]
fn unprivileged_daemons_run_without_root_or_capabilities() {
    require_root("the privilege-separation test");
    let stack = StackBuilder::new().start();
    for (d, uid) in [
        ("gatewayd", GATEWAY_UID),
        ("mcpd", MCP_UID),
        ("jobd", JOB_UID),
        ("execd", 0),
    ] {
        let st = probe(&stack.socket(d), None, None);
        let pid = st.json["pid"].as_u64().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap()
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert!(
            field("Uid:").iter().all(|u| u == &uid.to_string()),
            "{d}: {:?}",
            field("Uid:")
        );
        if uid != 0 {
            for caps in ["CapEff:", "CapPrm:", "CapAmb:"] {
                assert_eq!(field(caps), ["0000000000000000"], "{d} {caps}");
            }
            assert_eq!(
                field("Groups:"),
                Vec::<String>::new(),
                "{d} keeps no supplementary groups"
            );
            // Hardened by itself, not by a unit file: `argosctl up` sets none of this.
            assert_eq!(field("NoNewPrivs:"), ["1"], "{d}");
            assert_eq!(field("Seccomp:"), ["2"], "{d}");
            let said: Vec<&str> = st.json["hardening"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h.as_str().unwrap())
                .collect();
            assert_eq!(said.len(), 3, "{d}: {said:?}");
            assert_eq!(said[0], "no_new_privs", "{d}");
            assert!(
                said[1].starts_with("landlock: read-only but for "),
                "{d}: {said:?}"
            );
            assert!(said[2].starts_with("seccomp: "), "{d}: {said:?}");
        } else {
            assert_eq!(st.json["hardening"], serde_json::json!([]), "{d}");
        }
    }
    // None of them opens another's database or key.
    let state = stack.root().join("state");
    for (d, uid) in [
        ("gatewayd", GATEWAY_UID),
        ("mcpd", MCP_UID),
        ("jobd", JOB_UID),
    ] {
        for other in ["execd", "gatewayd", "mcpd", "jobd"] {
            if other == d {
                continue;
            }
            for e in std::fs::read_dir(state.join(other)).unwrap().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !(name.ends_with(".db") || name.ends_with(".key")) {
                    continue;
                }
                use std::os::unix::process::CommandExt as _;
                let read = std::process::Command::new("/bin/cat")
                    .arg(e.path())
                    .uid(uid)
                    .gid(SOCKET_GID)
                    .output()
                    .unwrap();
                assert!(
                    !read.status.success() && read.stdout.is_empty(),
                    "{d}'s uid read {other}/{name}"
                );
            }
        }
    }
    stack.stop();
}

#[test]
fn sigterm_to_argosctl_up_leaves_nothing_behind() {
    let mut stack = StackBuilder::new().start();
    let pids = stack.daemon_pids();
    assert_eq!(pids.len(), 4, "four daemons: {pids:?}");
    let status = stack.terminate();
    assert!(status.success(), "{status}\n{}", stack.log());
    stack.assert_nothing_left();
    for (pid, cmd) in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{pid} {cmd} survived"
        );
    }
    assert!(stack.log().contains("stack stopped"));
}

/// `argosctl up`'s stop is a stop (execd gets SIGUSR2, as from `systemctl stop`): a
/// running launch is ended with the stack, and nothing it ran is left — not its shim, its
/// init or its workload, which the harness now finds by the launch's receipt wherever
/// they were reparented. A crash (a daemon and its launcher killed) stops the rest as a
/// restart instead: the launch runs on and the next start adopts it.
#[test]
fn a_stop_ends_every_launch_and_a_daemons_death_keeps_them() {
    let mut stack = StackBuilder::new().start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // The client's channel is made inside the runtime.
    let _in_rt = rt.enter();
    let started = rt
        .block_on(stack.exec().start(argos_proto::exec::v1::RunRequest {
            command: "sleep 600".into(),
            timeout_ms: Some(900_000),
            ..Default::default()
        }))
        .unwrap();
    let receipt = stack
        .root()
        .join("state/execd/launches")
        .join(&started.id)
        .join("spec.json");
    let receipt: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&receipt).unwrap()).unwrap();
    let ran = ["shim", "init"].map(|who| receipt[who]["pid"].as_i64().unwrap() as i32);
    // A zombie has ended: a re-adopted shim's parent is PID 1, which may reap late.
    let alive = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
            .unwrap_or(false)
    };
    assert!(ran.iter().all(|p| alive(*p)), "{ran:?} {receipt}");

    // mcpd dies with the launcher: the rest stop as for a restart, and the launch
    // outlives them.
    stack.crash_and_restart("mcpd");
    assert!(
        ran.iter().all(|p| alive(*p)),
        "the launch ended with a restart"
    );
    let status = |stack: &argos_tests::Stack| {
        let got = rt.block_on(stack.exec().get(&started.id, false)).unwrap();
        got.execution.unwrap().status
    };
    let running = argos_proto::exec::v1::ExecutionStatus::Running as i32;
    assert_eq!(status(&stack), running, "adopted again");

    // The operator's stop ends it: stop() asserts that nothing of the stack is left.
    stack.stop();
    for pid in ran {
        assert!(!alive(pid), "{pid} outlived the stack's stop");
    }
}

/// The review: a daemon that died took the whole stack down (and execd was told to keep
/// its launches, which nothing took back). Now `argosctl up` starts it again, as systemd
/// would, naming it and its status; one that dies too often (6 times within a minute)
/// stops the stack, every launch with it.
#[test]
fn a_dead_daemon_is_started_again_until_it_dies_too_often() {
    let mut stack = StackBuilder::new().start();
    let pid_of = |stack: &argos_tests::Stack| {
        let p = probe(&stack.socket("mcpd"), None, None);
        p.status.success().then(|| p.json["pid"].as_i64()).flatten()
    };
    let mut pid = pid_of(&stack).expect("mcpd answers") as i32;
    for round in 1..=6 {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        stack.wait_log(
            "argos-mcpd exited unexpectedly (signal: 9 (SIGKILL))",
            round,
        );
        if round == 6 {
            break;
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        pid = loop {
            match pid_of(&stack) {
                Some(new) if new as i32 != pid => break new as i32,
                _ => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "mcpd was not started again: {}",
                        stack.log()
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        };
    }
    let status = stack.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "{}", stack.log());
    let log = stack.log();
    assert_eq!(log.matches("starting it again").count(), 5, "{log}");
    assert!(
        log.contains("started again 5 times within 60s; stopping the stack and every launch"),
        "{log}"
    );
    stack.assert_nothing_left();
}

#[test]
fn killing_the_launcher_takes_the_daemons_with_it() {
    let mut stack = StackBuilder::new().start();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(stack.launcher_pid()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    stack.wait_exit(Duration::from_secs(5));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !stack.daemon_pids().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        stack.daemon_pids(),
        Vec::<(i32, String)>::new(),
        "orphans after the launcher was killed"
    );
}

fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

#[test]
fn gateway_reports_every_daemon_over_grpc() {
    let stack = StackBuilder::new().start();
    // Anonymous callers get nothing; a logged-in admin sees every daemon.
    let (code, _) = http_get(stack.listen, "/api/status");
    assert_eq!(code, 401);
    let mut admin = stack.admin();
    let v = admin.get("/api/status").json();
    let daemons = v["daemons"].as_array().unwrap();
    assert_eq!(daemons.len(), 4, "{v}");
    for d in daemons {
        assert_eq!(d["healthy"], true, "{d}");
        // Every daemon resolved the gateway's connection to the gateway role.
        assert_eq!(d["sees_gateway_as"], serde_json::json!(["gateway"]), "{d}");
    }
    assert_eq!(v["insecure_shared_uid"], !is_root());
    // The web UI's page and assets are served from the binary.
    let (code, page) = http_get(stack.listen, "/");
    assert_eq!(code, 200);
    // Its script and style, by the hashed names the build gave them; their licences.
    let assets: Vec<&str> = page
        .split('"')
        .filter(|s| s.starts_with("/assets/"))
        .collect();
    assert!(
        assets.iter().any(|a| a.ends_with(".js")) && assets.iter().any(|a| a.ends_with(".css")),
        "{page}"
    );
    for asset in assets.into_iter().chain(["/assets/LICENSES.txt"]) {
        let (code, body) = http_get(stack.listen, asset);
        assert_eq!(code, 200, "{asset}");
        assert!(body.len() > 500, "{asset}: {body}");
    }
    let (code, _) = http_get(stack.listen, "/assets/nope.js");
    assert_eq!(code, 404);
    let r = admin.get("/");
    assert!(
        r.header("content-security-policy")
            .is_some_and(|c| c.contains("script-src 'self'")),
        "{r:?}"
    );
    let (code, body) = http_get(stack.listen, "/nope");
    assert_eq!(code, 404);
    assert!(body.contains("\"code\":\"not_found\""), "{body}");
    stack.stop();
}

#[test]
fn a_port_in_use_fails_the_start_with_the_reason() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let root = argos_tests::open_tempdir();
    let out = argos_tests::command("argosctl")
        .args(["up", "--root"])
        .arg(root.path())
        .args(["--listen", &format!("127.0.0.1:{port}"), "--bin-dir"])
        .arg(argos_tests::bin_dir())
        .env("XDG_STATE_HOME", root.path().join("xdg-state"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("binding HTTP listener")
            && err.contains("argos-gatewayd exited during start-up"),
        "{err}"
    );
    let left = argos_tests::processes_mentioning_after(root.path(), Duration::from_secs(5));
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_one_user_run_shares_a_uid_and_says_so_everywhere() {
    require_root("the one-user run test (it starts argosctl up as an unprivileged user)");
    let user = 64210;
    let stack = StackBuilder::new().run_as(user).start();
    stack.wait_log("INSECURE development run", 1);
    for d in DAEMONS {
        let st = probe(&stack.socket(d), Some((user, user)), None);
        assert_eq!(st.json["ok"], true, "{d}: {:?}", st.json);
        assert_eq!(st.json["uid"], user, "{d} runs as the launching user");
        assert_eq!(st.json["insecure_shared_uid"], true, "{d}");
        assert_eq!(
            st.json["peer_roles"],
            serde_json::json!([
                "PEER_ROLE_GATEWAY",
                "PEER_ROLE_MCP",
                "PEER_ROLE_JOB",
                "PEER_ROLE_OPERATOR"
            ]),
            "{d}"
        );
    }
    let (_, page) = http_get(stack.listen, "/");
    assert!(
        page.contains("INSECURE RUN"),
        "the web page says so: {page}"
    );
    stack.wait_log("INSECURE RUN: several peer roles share one uid", 4);
    stack.stop();
}

#[test]
fn a_checkout_closed_to_the_daemon_uids_still_starts_with_its_tree_linked() {
    require_root("the closed-checkout test (separate uids need root)");
    use std::io::BufRead;
    use std::os::unix::fs::MetadataExt;
    // As closed as a checkout under /root.
    let closed = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        closed.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let root = closed.path().join("checkout/.argos");
    // A local user makes the directory a tree named after --root would be, first, open to
    // all: the stack must not run from it.
    struct Planted(std::path::PathBuf);
    impl Drop for Planted {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let hash = argos_common::paths::stable_hash(root.as_os_str().as_encoded_bytes());
    let planted = std::path::PathBuf::from(format!("/var/tmp/argos-dev-{hash:016x}"));
    std::fs::create_dir(&planted).unwrap();
    let _remove_planted = Planted(planted.clone());
    let attacker = 64299;
    std::os::unix::fs::chown(&planted, Some(attacker), Some(attacker)).unwrap();
    std::fs::set_permissions(
        &planted,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let port = argos_tests::free_port();
    let mut child = argos_tests::command("argosctl")
        .args(["up", "--root"])
        .arg(&root)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--bin-dir"])
        .arg(argos_tests::bin_dir())
        // Its pointer to the stack goes in the test's dir, not the real user's.
        .env("XDG_STATE_HOME", closed.path().join("xdg-state"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut banner = String::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        banner.push_str(&line);
        banner.push('\n');
        if line.starts_with("Ctrl-C stops the stack") {
            break;
        }
    }
    // The tree is wherever --root's links lead: a name of root's choosing.
    let moved = std::fs::read_link(root.join("run"))
        .ok()
        .and_then(|run| Some(run.parent()?.to_path_buf()))
        .filter(|tree| tree.starts_with("/var/tmp") && tree != Path::new("/var/tmp"));
    let result = std::panic::catch_unwind(|| {
        assert!(banner.contains("all four daemons SERVING"), "{banner}");
        let moved = moved.as_ref().expect("--root/run links into the tree");
        assert_ne!(moved, &planted, "the planted directory is not used");
        assert!(
            moved.to_string_lossy().starts_with("/var/tmp/argos-dev-"),
            "{}",
            moved.display()
        );
        assert_eq!(std::fs::symlink_metadata(moved).unwrap().uid(), 0);
        assert_eq!(
            std::fs::read_dir(&planted).unwrap().count(),
            0,
            "nothing was put in the planted directory"
        );
        assert!(
            root.join("run").is_symlink(),
            "{} links into {}: {:?} {banner}",
            root.display(),
            moved.display(),
            std::fs::read_dir(&root).map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
        );
        // The operator's path through the link works; so does a daemon uid's.
        let op = probe(
            &argos_common::connect::socket_path(&root.join("run"), "execd"),
            None,
            None,
        );
        assert_eq!(op.json["ok"], true, "{:?}", op.json);
        let gw = probe(
            &argos_common::connect::socket_path(&moved.join("run"), "execd"),
            Some((GATEWAY_UID, SOCKET_GID)),
            None,
        );
        assert_eq!(
            gw.json["peer_roles"],
            serde_json::json!(["PEER_ROLE_GATEWAY"])
        );
        assert!(
            banner.contains(&format!("{}/run/execd/execd.sock list", root.display())),
            "{banner}"
        );
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let left = moved
        .as_ref()
        .map(|moved| argos_tests::processes_mentioning(moved))
        .unwrap_or_default();
    if let Some(moved) = &moved {
        let _ = std::fs::remove_dir_all(moved);
    }
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    assert!(status.success(), "{status}");
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn argosctl_status_reports_every_daemon_and_the_callers_role() {
    let stack = StackBuilder::new().start();
    let out = stack
        .argosctl()
        .args(["status", "--root"])
        .arg(stack.root())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for d in DAEMONS {
        let line = text
            .lines()
            .find(|l| l.starts_with(d))
            .unwrap_or_else(|| panic!("no line for {d}: {text}"));
        assert!(line.contains(env!("CARGO_PKG_VERSION")), "{line}");
        let expect = if is_root() { "serving" } else { "INSECURE" };
        assert!(line.contains(expect) && line.contains("operator"), "{line}");
    }
    stack.stop();
    let after = argos_tests::command("argosctl")
        .args(["status", "--root"])
        .arg(stack_root_gone())
        .output()
        .unwrap();
    assert_eq!(
        after.status.code(),
        Some(1),
        "a stopped stack is reported, not hidden"
    );
}

fn stack_root_gone() -> std::path::PathBuf {
    std::env::temp_dir().join("argos-no-such-stack")
}

/// Runs a Python snippet as `uid` (group `SOCKET_GID`); its standard output.
fn python_as(uid: u32, script: &str) -> String {
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .uid(uid)
        .gid(SOCKET_GID)
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The runtime dir used to be group-writable with the sticky bit: a compromised mcpd that
/// bound `execd.sock` while execd restarted received the gateway's calls — users'
/// commands, stdin, terminal input, principals. Now each socket lives in its daemon's own
/// directory under a runtime dir only root writes, and every client asks the kernel who
/// serves a socket before it sends a byte.
#[test]
fn a_daemon_cannot_take_another_daemons_socket_and_clients_check_who_serves() {
    require_root("the socket squatting test (it acts as the mcp uid)");
    let stack = StackBuilder::new().start();
    let run = stack.root().join("run");
    // As the mcp uid: no name can be bound, renamed or removed where a socket of another
    // daemon lives or will live (its live name is in use; a new one is not ours to make).
    let script = format!(
        r#"
import errno, os, socket
def bind(p):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(p); print(p, "bound")
    except OSError as e:
        print(p, errno.errorcode[e.errno])
bind("{run}/execd.sock")
bind("{run}/execd/execd.sock")
bind("{run}/execd/new.sock")
bind("{run}/gatewayd/x.sock")
try:
    os.rename("{run}/execd/execd.sock", "{run}/mcpd/stolen"); print("renamed")
except OSError as e:
    print("rename", errno.errorcode[e.errno])
try:
    os.mkdir("{run}/squat"); print("mkdir")
except OSError as e:
    print("mkdir", errno.errorcode[e.errno])
"#,
        run = run.display()
    );
    let out = python_as(MCP_UID, &script);
    assert!(!out.contains("bound") && !out.contains("renamed"), "{out}");
    assert!(!out.contains("\nmkdir\n"), "{out}");
    assert_eq!(out.matches("EACCES").count(), 5, "{out}");
    for d in DAEMONS {
        assert_eq!(probe(&stack.socket(d), None, None).json["ok"], true, "{d}");
    }

    // An impostor the mcp uid serves (in its own directory): the execd client the gateway
    // uses refuses it before the first byte, naming who serves it.
    let fake = run.join("mcpd/fake-execd.sock");
    let script = format!(
        r#"
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind("{fake}"); s.listen(4)
print("ready", flush=True)
while True:
    c, _ = s.accept(); c.settimeout(3)
    got = 0
    try:
        while True:
            b = c.recv(65536)
            if not b: break
            got += len(b)
    except OSError:
        pass
    c.close()
    print("conn", got, flush=True)
"#,
        fake = fake.display()
    );
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let mut impostor = std::process::Command::new("python3")
        .args(["-c", &script])
        .uid(MCP_UID)
        .gid(SOCKET_GID)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(impostor.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _in_rt = rt.enter();
    // As the test (root) and as the gateway would (root or the gateway's own uid).
    for servers in [
        argos_common::connect::ServerUids::root_or_self(),
        argos_common::connect::ServerUids::of([0, GATEWAY_UID]),
    ] {
        let exec = argos_exec_client::ExecClient::connect_socket(&fake, servers).as_user("alice");
        let e = rt
            .block_on(exec.run(argos_proto::exec::v1::RunRequest {
                command: "cat /etc/shadow".into(),
                stdin: b"typed password".to_vec(),
                ..Default::default()
            }))
            .unwrap_err();
        assert!(
            e.message.contains(&format!("served by uid {MCP_UID}")),
            "{e:?}"
        );
    }
    // Each refused connection reaches the impostor as one that sent nothing: wait for
    // both to be counted (it may trail the client), then stop it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let mut conns = Vec::new();
    while conns.len() < 2 {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(l) => conns.push(l),
            Err(_) => break,
        }
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(impostor.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = impostor.wait();
    conns.extend(rx.try_iter());
    assert!(
        !conns.is_empty() && conns.iter().all(|l| l == "conn 0"),
        "the impostor was never connected to, or got bytes: {conns:?}"
    );

    // A symlink left where a daemon's socket dir goes (a runtime dir from when it was
    // group-writable) is removed at the next start, never followed: its target keeps
    // its owner and mode.
    let mut stack = stack;
    let target = tempfile::tempdir().unwrap();
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    std::fs::set_permissions(target.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let planted = target.path().to_path_buf();
    stack.restart_with(|root| {
        let dir = root.join("run/mcpd");
        std::fs::remove_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&planted, &dir).unwrap();
    });
    let meta = std::fs::metadata(target.path()).unwrap();
    assert_eq!(
        (meta.uid(), meta.mode() & 0o777),
        (0, 0o700),
        "the target was touched"
    );
    let dir = std::fs::symlink_metadata(run.join("mcpd")).unwrap();
    assert!(dir.is_dir() && dir.uid() == MCP_UID, "{dir:?}");
    stack.stop();
}

/// What the unprivileged daemons apply to themselves holds against what a compromised one
/// would try (here as root, which it does not need): no program runs, no other process's
/// memory is read, no user namespace is made, nothing is written outside its own dirs;
/// it still reads, writes its own dirs and starts threads.
#[test]
fn the_daemons_own_hardening_refuses_what_a_compromised_one_would_try() {
    let dir = argos_tests::open_tempdir();
    let out = argos_tests::command("argos-harden-probe")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (what, want) in [
        ("exec", "EPERM: Operation not permitted"),
        ("peek", "EPERM: Operation not permitted"),
        ("userns", "EPERM: Operation not permitted"),
        ("write_outside", "EACCES: Permission denied"),
        ("write_inside", "ok"),
        ("read_etc", "ok"),
        ("thread", "ok"),
        ("affinity", "ENOSYS: Function not implemented"),
        ("alg_socket", "ENOSYS: Function not implemented"),
        ("tcp", "ok"),
    ] {
        assert_eq!(v[what], want, "{what}: {v}");
    }
}

/// `argosctl run` through execd, its options before the command's words; help for each
/// command from clap; completions and the man pages written at build time.
#[test]
fn argosctl_runs_a_command_through_execd_and_documents_each_command() {
    let stack = StackBuilder::new().start();
    let out = stack
        .argosctl()
        .args(["run", "--root"])
        .arg(stack.root())
        .args([
            "--profile",
            "inspect",
            "echo",
            "from-argosctl;",
            "exit",
            "3",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), "from-argosctl", "{stderr}");
    assert!(
        stderr.contains("exit 3") && stderr.contains("profile inspect"),
        "{stderr}"
    );
    // Bad usage: exit 2 and what was wrong, nothing run.
    let out = argos_tests::command("argosctl")
        .args(["run", "--profile", "root", "id"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"));
    stack.stop();

    // Help per command, exit 0.
    for (args, says) in [
        (&["jobs", "start", "--help"][..], "--max-runtime-s"),
        (&["approvals", "approve", "--help"], "--confirm"),
        (&["help", "tasks", "approve"], "--version"),
        (&["--help"], "ARGOS_TOKEN"),
    ] {
        let out = argos_tests::command("argosctl")
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(says),
            "{args:?}: {text}"
        );
    }
    // Completions, and the same from the build.
    let out = argos_tests::command("argosctl")
        .args(["completions", "bash"])
        .output()
        .unwrap();
    let bash = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && bash.contains("relaunch"), "{bash}");
    let built = argos_tests::bin_dir();
    let from_build = std::fs::read_to_string(built.join("completions/argosctl.bash")).unwrap();
    assert_eq!(from_build, bash);
    for page in ["argosctl.1", "argosctl-jobs-start.1", "argosctl-run.1"] {
        let text = std::fs::read_to_string(built.join("man").join(page)).unwrap();
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page}: {text}"
        );
    }
    // man(1) renders it (man-db is on every Debian system).
    let out = std::process::Command::new("man")
        .arg("-l")
        .arg(built.join("man/argosctl-jobs-start.1"))
        .env("MANWIDTH", "100")
        .env("MANPAGER", "cat")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Start a command as a background job"),
        "{text}"
    );
}
