//! execd's `Run` through the real stack: the escape suite from inside the `agent`
//! profile, its resource bounds (bombs, floods, one CPU, a bounded workspace), bad input,
//! peer roles' launch rights, and the mechanism-unavailable matrix. CI runs as root, so every
//! mechanism is real here.

use std::sync::Mutex;
use std::time::Duration;

use argos_proto::exec::v1::{DimensionState, ExecutionStatus, RunRequest};
use argos_tests::runs::{Ran, ran, rt, run};
use argos_tests::{Stack, StackBuilder, require_root};

/// Workloads run as uid 65534, whose process count is one kernel-wide rlimit: the fork
/// bomb must not starve a neighbour, so the tests of this file take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn sh(command: &str) -> RunRequest {
    RunRequest {
        command: command.into(),
        timeout_ms: Some(20_000),
        ..Default::default()
    }
}

fn agent(stack: &Stack, command: &str) -> Ran {
    ran(run(stack, sh(command)).expect("Run"))
}

/// Runs a Python snippet inside the sandbox (python3 from the host, read-only).
fn py(stack: &Stack, code: &str) -> Ran {
    ran(run(
        stack,
        RunRequest {
            argv: vec!["/usr/bin/python3".into(), "-c".into(), code.into()],
            timeout_ms: Some(20_000),
            ..Default::default()
        },
    )
    .expect("Run"))
}

#[test]
fn an_agent_run_is_contained_in_every_dimension() {
    require_root("the containment suite");
    let _s = serial();
    let stack = StackBuilder::new().start();
    let r = agent(&stack, "echo hello; id -u; echo err >&2");
    assert_eq!(r.status, ExecutionStatus::Succeeded, "{}", r.error);
    assert_eq!(r.exit, Some(0));
    let mut lines = r.out.lines();
    assert_eq!(lines.next(), Some("hello"));
    let uid: u32 = lines.next().unwrap().parse().unwrap();
    assert!(
        uid >= 1_900_000_000,
        "agents run as a per-launch uid from the reserved range, got {uid}"
    );
    assert_eq!(r.err, "err\n");
    // The launch uid has a name (the requester's, or argos without one) and the host's
    // name is the host's: a shell's prompt reads like one.
    let named = agent(&stack, "whoami; id -gn; hostname");
    let host = std::process::Command::new("hostname").output().unwrap();
    assert_eq!(
        named.out,
        format!("argos\nargos\n{}", String::from_utf8_lossy(&host.stdout)),
        "{}",
        named.err
    );
    let named = ran(run(
        &stack,
        RunRequest {
            command: "whoami".into(),
            profile: "inspect".into(),
            ..Default::default()
        },
    )
    .unwrap());
    assert_eq!(named.out, "argos\n", "{}", named.err);
    for d in [
        "filesystem",
        "process_tree",
        "wall_clock",
        "network",
        "syscalls",
        "privileges",
        "resources",
    ] {
        let (state, detail) = &r.containment[d];
        assert_eq!(*state, DimensionState::Enforced, "{d}: {detail}");
    }
    // Where the host delegates cgroups (CI's does: v1 pids and memory), the whole tree is
    // bounded there too, and the workload was seen inside its group.
    let (_, res) = &r.containment["resources"];
    if std::path::Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists() {
        assert!(
            res.contains("inside the launch's cgroup") && res.contains("512 processes"),
            "{res}"
        );
    }
    // Denied paths are masked in the mount namespace, not carved out rule by rule.
    let (_, fs) = &r.containment["filesystem"];
    assert!(
        !fs.contains("masking"),
        "a denied path could not be masked: {fs}"
    );
    stack.stop();
}

#[test]
fn escape_suite_every_attempt_is_blocked() {
    require_root("the escape suite");
    let _s = serial();
    let stack = StackBuilder::new().start();

    // Write outside the workspace (the host is read-only), inside it works.
    let marker = format!("/var/tmp/argos-escape-{}", std::process::id());
    let r = agent(
        &stack,
        &format!("touch {marker}; echo x > /etc/argos-escape; touch ./inside && echo inside-ok"),
    );
    assert!(
        !std::path::Path::new(&marker).exists(),
        "wrote outside the workspace"
    );
    assert!(!std::path::Path::new("/etc/argos-escape").exists());
    assert!(
        r.out.contains("inside-ok"),
        "the workspace is writable: {}",
        r.err
    );

    // /run's UNIX sockets (D-Bus, systemd, the resolver) are hidden from agents.
    let r = agent(&stack, "ls /run /var/run && echo listed");
    assert!(!r.out.contains("listed"), "{} {}", r.out, r.err);

    // Read /etc/shadow, root's home, or Argos's state (the launch records).
    let launches = stack.root().join("state/execd/launches");
    let r = agent(
        &stack,
        &format!(
            "cat /etc/shadow; ls /root; ls {} && echo listed",
            launches.display()
        ),
    );
    assert!(!r.out.contains("root:"), "read /etc/shadow: {}", r.out);
    assert_eq!(r.err.matches("Permission denied").count(), 2, "{}", r.err);
    assert!(
        !r.out.contains("listed"),
        "listed execd's launches: {}",
        r.out
    );

    // See or signal a host process.
    let execd_pid = argos_tests::probe(&stack.socket("execd"), None, None).json["pid"]
        .as_u64()
        .unwrap();
    let r = agent(
        &stack,
        &format!("ps -e -o pid= | wc -l; kill -0 {execd_pid} && echo signalled"),
    );
    let visible: usize = r.out.lines().next().unwrap().trim().parse().unwrap();
    assert!(
        visible <= 5,
        "the workload sees {visible} processes: {}",
        r.out
    );
    assert!(!r.out.contains("signalled"), "signalled execd");

    // Connect to a TCP listener on the host's loopback.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let r = agent(
        &stack,
        &format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo connected"),
    );
    assert!(
        !r.out.contains("connected"),
        "reached the host loopback: {}",
        r.err
    );
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "a connection arrived");

    // Syscalls that escape or attack the kernel: ptrace a sibling, mount, load a module,
    // create a user namespace, inject terminal input, io_uring, bpf, 16-bit segments, an
    // odd persona, a vsock socket (not namespaced: it reaches a VM's host). Each must be EPERM
    // (or ENOSYS for clone3): the filter answers before the kernel looks at arguments.
    let r = py(
        &stack,
        r#"
import ctypes, os, subprocess, json
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return ctypes.get_errno() if r == -1 else 0
sib = subprocess.Popen(["sleep", "5"])
out = {
  "ptrace": sc(101, 16, sib.pid, 0, 0),
  "mount": sc(165, 0, 0, 0, 0, 0),
  "init_module": sc(175, 0, 0, 0),
  "finit_module": sc(313, 0, 0, 0),
  "unshare_user": sc(272, 0x10000000),
  "tiocsti": sc(16, 0, 0x5412, 0),
  "io_uring_setup": sc(425, 1, 0),
  "bpf": sc(321, 0, 0, 0),
  "keyctl": sc(250, 0, 0, 0, 0),
  "clone3": sc(435, 0, 0),
  "setuid0": sc(105, 0),
  "x32_unshare": sc(0x40000000 | 272, 0x10000000),
  "modify_ldt": sc(154, 0, 0, 0),
  "personality_linux32": sc(135, 0x0008),
  "personality_read_implies_exec": sc(135, 0x0400000),
  "personality_default": sc(135, 0),
  "personality_query": sc(135, 0xffffffff),
  "vsock": sc(41, 40, 1, 0),
}
sib.kill()
print(json.dumps(out))
"#,
    );
    let v: serde_json::Value =
        serde_json::from_str(r.out.trim()).unwrap_or_else(|e| panic!("{e}: {} {}", r.out, r.err));
    let eperm = 1;
    for call in [
        "ptrace",
        "mount",
        "init_module",
        "finit_module",
        "unshare_user",
        "tiocsti",
        "io_uring_setup",
        "bpf",
        "keyctl",
        "setuid0",
        "x32_unshare",
        "modify_ldt",
        "personality_linux32",
        "personality_read_implies_exec",
        "vsock",
    ] {
        assert_eq!(v[call], eperm, "{call} was not refused with EPERM: {v}");
    }
    assert_eq!(
        v["clone3"], 38,
        "clone3 must be ENOSYS so libc falls back to clone: {v}"
    );
    // The default persona and the query stay: programs ask.
    assert_eq!(v["personality_default"], 0, "{v}");
    assert_eq!(v["personality_query"], 0, "{v}");

    // A host-network profile still cannot reach the host's abstract UNIX sockets (the
    // kind D-Bus and X11 listen on): it makes no UNIX socket at all (EAFNOSUPPORT), and
    // landlock scopes abstract ones to the sandbox besides.
    let name = format!("argos-escape-{}", std::process::id());
    let host = std::os::unix::net::UnixListener::bind_addr(
        &<std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name.as_bytes()).unwrap(),
    )
    .unwrap();
    let r = ran(run(
        &stack,
        RunRequest {
            argv: vec![
                "/usr/bin/python3".into(),
                "-c".into(),
                format!(
                    "import socket\ntry:\n    s = socket.socket(socket.AF_UNIX); s.connect('\\0{name}'); print('connected')\nexcept OSError as e: print('refused', e.errno)"
                ),
            ],
            profile: "mcp-server".into(),
            timeout_ms: Some(20_000),
            ..Default::default()
        },
    )
    .unwrap());
    assert_eq!(r.out.trim(), "refused 97", "{} {}", r.out, r.err);
    host.set_nonblocking(true).unwrap();
    assert!(host.accept().is_err(), "a connection arrived");

    // Gain privileges through a setuid binary: no_new_privs makes su powerless.
    let r = agent(&stack, "su -c 'id -u' root </dev/null; echo done");
    assert!(
        !r.out.lines().any(|l| l.trim() == "0"),
        "became root: {}",
        r.out
    );
    let r = agent(&stack, "unshare -U true && echo made-userns");
    assert!(!r.out.contains("made-userns"), "{}", r.err);
    stack.stop();
}

/// Pathname UNIX sockets are in no network namespace, file modes let anyone connect to
/// one made 0777, and a read-only mount does not stop connect(): a listener the host
/// opened for all (here the test's own, as root, outside /run) would be a way out of the
/// sandbox and of a stdio MCP server without network. In `agent`, `mcp-server-offline`
/// and `mcp-server` no UNIX socket can be made (EAFNOSUPPORT), so nothing connects or
/// sends, and the listener hears nothing; a socketpair still works; the containment
/// report says which.
#[test]
fn no_host_unix_socket_is_reached_from_the_sandbox_or_an_mcp_server() {
    use std::os::unix::fs::PermissionsExt;
    require_root("the host UNIX socket test");
    let _s = serial();
    let stack = StackBuilder::new().start();
    // A listener every uid may connect to, in a directory every uid may enter, outside
    // /tmp (private in a launch) and /run (hidden from agents).
    let dir = tempfile::Builder::new()
        .prefix("argos-unix-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("service.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let reach = format!(
        r#"
import socket
for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
    try:
        s = socket.socket(socket.AF_UNIX, kind)
        try:
            s.connect({path:?}); s.send(b"escaped")
        except OSError:
            s.sendto(b"escaped", {path:?})
        print("reached")
    except OSError as e:
        print("refused", e.errno)
a, b = socket.socketpair()
a.send(b"pair")
print("socketpair", b.recv(4).decode())
"#,
        path = path.display().to_string()
    );
    for profile in ["agent", "mcp-server-offline", "mcp-server"] {
        let r = ran(run(
            &stack,
            RunRequest {
                argv: vec!["/usr/bin/python3".into(), "-c".into(), reach.clone()],
                profile: profile.into(),
                timeout_ms: Some(20_000),
                ..Default::default()
            },
        )
        .unwrap());
        assert_eq!(
            r.out, "refused 97\nrefused 97\nsocketpair pair\n",
            "{profile}: {} {}",
            r.out, r.err
        );
        let (state, detail) = &r.containment["syscalls"];
        assert_eq!(*state, DimensionState::Enforced, "{profile}: {detail}");
        assert!(
            detail.contains("UNIX sockets: pairs only (socket(AF_UNIX) refused, socketpair works)"),
            "{profile}: {detail}"
        );
    }
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(e) => panic!("accept: {e}"),
        Ok((mut conn, _)) => {
            use std::io::Read;
            let mut got = Vec::new();
            let _ = conn.read_to_end(&mut got);
            panic!("a launch connected to the host's socket and sent {got:?}");
        }
    }
    stack.stop();
}

#[test]
fn bombs_floods_and_timeouts_are_bounded() {
    require_root("the bounds suite");
    let _s = serial();
    let stack = StackBuilder::new().start();

    // Fork bomb: bounded by the process limit, ended by the clock, nothing left behind.
    let tag = format!("bomb{}", std::process::id());
    let r = ran(run(
        &stack,
        RunRequest {
            argv: vec![
                "bash".into(),
                "-c".into(),
                format!("{tag}() {{ {tag} | {tag} & }}; {tag}; sleep 30"),
            ],
            timeout_ms: Some(3000),
            ..Default::default()
        },
    )
    .unwrap());
    assert_eq!(r.status, ExecutionStatus::TimedOut);
    assert_eq!(r.exit, Some(124));
    assert!(
        argos_tests::processes_mentioning(std::path::Path::new(&tag)).is_empty(),
        "fork bomb survived"
    );

    // Kernel objects: every process the launch may have opens eventfds until refused.
    // The host's open files are one count (fs.file-max) for everyone; one launch held
    // 216,650 before its rlimits bounded nproc × nofile.
    let r = py(
        &stack,
        r#"
import os, time
r, w = os.pipe()
kids = 0
while kids < 1000:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.close(r)
        n = 0
        try:
            while True:
                os.eventfd(0)
                n += 1
        except OSError:
            pass
        os.write(w, b"%d\n" % n)
        time.sleep(3)
        os._exit(0)
    kids += 1
os.close(w)
held = sum(int(l) for l in os.fdopen(r).read().split())
print(kids, held)
"#,
    );
    let (kids, held): (u64, u64) = r
        .out
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect::<Vec<_>>()
        .try_into()
        .map(|[k, h]: [u64; 2]| (k, h))
        .unwrap_or_else(|_| panic!("{} {}", r.out, r.err));
    assert!(kids > 8, "hardly any process: {kids}");
    assert!(
        held <= 65_536,
        "one launch held {held} open files in {kids} processes"
    );

    // Memory bomb: the address-space limit refuses it.
    let r = py(&stack, "x = bytearray(6 * 1024**3)\nprint('allocated')");
    assert_eq!(r.status, ExecutionStatus::Failed);
    assert!(
        r.err.contains("MemoryError") && !r.out.contains("allocated"),
        "{} {}",
        r.out,
        r.err
    );

    // Output flood: capped head + tail; execd's memory stays flat.
    let execd_pid = argos_tests::probe(&stack.socket("execd"), None, None).json["pid"]
        .as_u64()
        .unwrap();
    let rss = || -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{execd_pid}/status")).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let before = rss();
    let r = ran(run(
        &stack,
        RunRequest {
            command: "head -c 200000000 /dev/zero | tr '\\0' y".into(),
            timeout_ms: Some(60_000),
            ..Default::default()
        },
    )
    .unwrap());
    let after = rss();
    assert_eq!(r.status, ExecutionStatus::Succeeded, "{}", r.error);
    assert_eq!(r.total_out, 200_000_000);
    assert!(r.truncated);
    assert_eq!(r.out.len(), 64 * 1024);
    assert!(
        after < before + 16 * 1024,
        "execd grew from {before} kB to {after} kB"
    );

    // A workload that closes its output and keeps running is still timed out.
    let r = ran(run(
        &stack,
        RunRequest {
            command: "exec >/dev/null 2>&1; sleep 97.5".into(),
            timeout_ms: Some(1000),
            ..Default::default()
        },
    )
    .unwrap());
    assert_eq!(r.status, ExecutionStatus::TimedOut);
    // So is an operator's command that ignores SIGTERM, without a PID namespace.
    let r = ran(run(
        &stack,
        RunRequest {
            command: "trap '' TERM; exec >/dev/null 2>&1; sleep 98.5".into(),
            profile: "host".into(),
            timeout_ms: Some(1000),
            ..Default::default()
        },
    )
    .unwrap());
    assert_eq!(r.status, ExecutionStatus::TimedOut, "{}", r.error);
    assert!(
        argos_tests::processes_mentioning(std::path::Path::new("sleep 98.5")).is_empty(),
        "the operator's sleeper survived"
    );
    assert!(argos_tests::processes_mentioning(std::path::Path::new("sleep 97.5")).is_empty());
    // The host profile, by its old name too, runs in a cgroup of its own (no limits: for
    // tracking the tree and verifying its end).
    let r = ran(run(
        &stack,
        RunRequest {
            command: "cat /proc/self/cgroup".into(),
            profile: "operator".into(),
            ..Default::default()
        },
    )
    .unwrap());
    assert_eq!(r.status, ExecutionStatus::Succeeded, "{}", r.error);
    assert!(
        r.out.contains("/argos/"),
        "not in a launch cgroup: {}",
        r.out
    );
    let tree = &r.containment["process_tree"].1;
    assert!(tree.contains("cgroup"), "{tree}");

    // Sleep past the timeout, with a setsid-detached grandchild: exit 124, all dead.
    let tag = format!("{}.{}", 100 + std::process::id() % 100, std::process::id());
    let r = ran(run(
        &stack,
        RunRequest {
            command: format!("setsid sleep {tag} & sleep {tag}"),
            timeout_ms: Some(1000),
            ..Default::default()
        },
    )
    .unwrap());
    assert_eq!(r.status, ExecutionStatus::TimedOut);
    assert_eq!(r.exit, Some(124));
    std::thread::sleep(Duration::from_millis(100));
    let left: Vec<_> =
        argos_tests::processes_mentioning(std::path::Path::new(&format!("sleep {tag}")));
    assert!(left.is_empty(), "survivors: {left:?}");
    stack.stop();
}

/// A command that leaves something running (a service restarted with `nohup … &`) is told
/// so: teardown ends it, and the result names what it ended — in the sandbox (its own PID
/// namespace) and on the host (a daemonized process found as the subreaper's child).
#[test]
fn what_a_command_left_running_is_named_when_teardown_ends_it() {
    require_root("the teardown report test");
    let _s = serial();
    let stack = StackBuilder::new().start();
    for (profile, cmd) in [
        // (A moment for the background process to exec, so it is named `sleep`.)
        (
            "agent",
            "nohup sleep 96.5 >/dev/null 2>&1 & sleep 0.3; echo started",
        ),
        (
            "host",
            "setsid sleep 96.6 </dev/null >/dev/null 2>&1 & sleep 0.3; echo started",
        ),
    ] {
        let r = ran(run(
            &stack,
            RunRequest {
                command: cmd.into(),
                profile: profile.into(),
                timeout_ms: Some(20_000),
                ..Default::default()
            },
        )
        .unwrap());
        assert_eq!(
            r.status,
            ExecutionStatus::Succeeded,
            "{profile}: {}",
            r.error
        );
        assert_eq!(r.out.trim(), "started");
        assert!(
            r.ended_by_teardown
                .iter()
                .any(|p| p.starts_with("sleep (pid ")),
            "{profile}: {:?}",
            r.ended_by_teardown
        );
    }
    assert!(argos_tests::processes_mentioning(std::path::Path::new("sleep 96.")).is_empty());
    // A command that leaves nothing behind says so: an empty list.
    let r = agent(&stack, "true");
    assert!(r.ended_by_teardown.is_empty(), "{:?}", r.ended_by_teardown);
    stack.stop();
}

#[test]
fn bad_input_is_invalid_argument_naming_the_field_and_spawns_nothing() {
    require_root("the bad-input test");
    let _s = serial();
    let stack = StackBuilder::new().start();
    let cases: Vec<(RunRequest, &str)> = vec![
        (RunRequest::default(), "command"),
        (sh(" "), "command"),
        (
            RunRequest {
                argv: vec!["echo".into()],
                command: "echo".into(),
                ..Default::default()
            },
            "command",
        ),
        (
            RunRequest {
                argv: vec!["ec\0ho".into()],
                ..Default::default()
            },
            "argv",
        ),
        (
            RunRequest {
                cwd: "relative/dir".into(),
                ..sh("true")
            },
            "cwd",
        ),
        (
            RunRequest {
                cwd: "/tmp/../etc".into(),
                ..sh("true")
            },
            "cwd",
        ),
        (
            RunRequest {
                profile: "root-please".into(),
                ..sh("true")
            },
            "profile",
        ),
        (
            RunRequest {
                env: [("LD_PRELOAD".to_string(), "/x.so".to_string())].into(),
                ..sh("true")
            },
            "env",
        ),
        (
            RunRequest {
                timeout_ms: Some(365 * 24 * 3600 * 1000),
                ..sh("true")
            },
            "timeout_ms",
        ),
        (
            RunRequest {
                stdin: vec![b'x'; 2 * 1024 * 1024],
                ..sh("cat")
            },
            "stdin",
        ),
    ];
    let launches = stack.root().join("state/execd/launches");
    let count = || std::fs::read_dir(&launches).map(|d| d.count()).unwrap_or(0);
    let before = count();
    for (req, field) in cases {
        let err = run(&stack, req.clone()).expect_err(&format!("{req:?} must be refused"));
        assert_eq!(
            err.kind,
            argos_exec_client::ErrorKind::InvalidArgument,
            "{req:?}: {err:?}"
        );
        assert!(
            err.message.starts_with(&format!("{field}:")),
            "{req:?} should name {field}: {}",
            err.message
        );
    }
    assert_eq!(
        count(),
        before,
        "nothing may be created for a refused request"
    );
    // Valid stdin reaches the command.
    let r = ran(run(
        &stack,
        RunRequest {
            stdin: b"fed through stdin".to_vec(),
            ..sh("cat")
        },
    )
    .unwrap());
    assert_eq!(r.out, "fed through stdin");
    stack.stop();
}

#[test]
fn an_unavailable_required_dimension_refuses_before_any_code_runs() {
    require_root("the mechanism-unavailable matrix");
    let _s = serial();
    for d in [
        "filesystem",
        "process_tree",
        "network",
        "syscalls",
        "privileges",
        "resources",
        "wall_clock",
    ] {
        let stack = StackBuilder::new()
            .env("ARGOS_EXEC__DISABLED_DIMENSIONS", d)
            .start();
        let r = agent(&stack, "echo ran-user-code");
        assert_eq!(
            r.status,
            ExecutionStatus::ContainmentUnavailable,
            "{d}: {}",
            r.error
        );
        assert_eq!(r.exit, None, "{d}");
        assert!(r.out.is_empty(), "{d}: user code ran: {}", r.out);
        assert!(
            r.error.contains(d),
            "{d}: the refusal names it: {}",
            r.error
        );
        assert_eq!(r.containment[d].0, DimensionState::Unavailable, "{d}");
        // Optional in mcp-server: the launch runs and says the truth.
        if d == "wall_clock" {
            let r = ran(run(
                &stack,
                RunRequest {
                    profile: "mcp-server".into(),
                    timeout_ms: Some(10_000),
                    ..sh("echo ran")
                },
            )
            .unwrap());
            assert_eq!(r.status, ExecutionStatus::Succeeded, "{}", r.error);
            assert_eq!(r.containment["wall_clock"].0, DimensionState::Unavailable);
            assert_eq!(r.containment["network"].0, DimensionState::NotRequested);
        }
        stack.stop();
    }
}

#[test]
fn profiles_report_what_this_host_enforces() {
    require_root("the profiles test");
    let _s = serial();
    let stack = StackBuilder::new().start();
    let resp = rt()
        .block_on(async { stack.exec().profiles().await })
        .unwrap();
    let names: Vec<&str> = resp.profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "agent",
            "host",
            "inspect",
            "mcp-server",
            "mcp-server-offline"
        ]
    );
    let by_name = |n: &str| resp.profiles.iter().find(|p| p.name == n).unwrap();
    // A stdio MCP server registered without network gets none, as enforced as an agent's.
    let offline = by_name("mcp-server-offline");
    for d in &offline.dimensions {
        if d.name != "wall_clock" {
            assert_eq!(
                d.would_be,
                DimensionState::Enforced as i32,
                "offline {}",
                d.name
            );
        }
    }
    let agent = by_name("agent");
    for d in &agent.dimensions {
        assert_eq!(d.need, "required");
        assert!(!d.reason.is_empty());
        assert_eq!(d.would_be, DimensionState::Enforced as i32, "{}", d.name);
    }
    // inspect: the host's process view on purpose, everything else required.
    let inspect = by_name("inspect");
    for d in &inspect.dimensions {
        let want = if d.name == "process_tree" {
            DimensionState::NotRequested
        } else {
            DimensionState::Enforced
        };
        assert_eq!(d.would_be, want as i32, "inspect {}", d.name);
    }
    let host = by_name("host");
    let fs = host
        .dimensions
        .iter()
        .find(|d| d.name == "filesystem")
        .unwrap();
    assert_eq!(fs.would_be, DimensionState::NotRequested as i32);
    stack.stop();
}

fn launch_as(
    stack: &Stack,
    uid: u32,
    principal: Option<&str>,
    verb: &str,
    profile: &str,
    cmd: &str,
) -> serde_json::Value {
    let mut args = Vec::new();
    if let Some(p) = principal {
        args.extend(["--principal", p]);
    }
    args.extend([verb, profile, cmd]);
    argos_tests::probe_as(&stack.socket("execd"), uid, &args)
}

#[test]
fn each_peer_role_gets_exactly_its_launch_rights() {
    require_root("the peer-role test");
    let _s = serial();
    let stack = StackBuilder::new().start();
    use argos_tests::{GATEWAY_UID, JOB_UID, MCP_UID};
    // mcp: nothing directly, not even in mcp-server (host network): a compromised mcpd
    // used to Run or Start any command there unapproved. Its stdio servers will be
    // started by naming a server an admin configured.
    for (verb, profile) in [
        ("--run", "agent"),
        ("--run", "mcp-server"),
        ("--start", "mcp-server"),
    ] {
        let r = launch_as(
            &stack,
            MCP_UID,
            Some("alice"),
            verb,
            profile,
            "touch /tmp/unapproved",
        );
        assert_eq!(r["code"], "PermissionDenied", "mcp {verb} {profile}: {r}");
    }
    // job: nothing directly, even for a stored owner — a job's command goes through the
    // risk gate (RequestRun), where anything but a read waits for an approval. (A
    // compromised jobd used to Start any command in the agent profile unapproved.)
    let r = launch_as(
        &stack,
        JOB_UID,
        Some("bob"),
        "--start",
        "agent",
        "touch /tmp/unapproved",
    );
    assert_eq!(r["code"], "PermissionDenied", "job started directly: {r}");
    let r = launch_as(&stack, JOB_UID, Some("bob"), "--start", "host", "id -u");
    assert_eq!(
        r["code"], "PermissionDenied",
        "job may not start a root profile: {r}"
    );
    let r = launch_as(&stack, MCP_UID, None, "--start", "host", "id -u");
    assert_eq!(
        r["code"], "PermissionDenied",
        "mcp may not start a root profile: {r}"
    );
    let r = launch_as(&stack, JOB_UID, Some("bob"), "--run", "agent", "true");
    assert_eq!(r["code"], "PermissionDenied", "job may not Run: {r}");
    // gateway: any profile, for the user it names.
    let r = launch_as(
        &stack,
        GATEWAY_UID,
        Some("alice"),
        "--run",
        "agent",
        "id -u",
    );
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["principal"], "alice");
    assert_eq!(r["status"], ExecutionStatus::Succeeded as i32);
    stack.stop();
}

/// A launch's CPU and workspace were bounded only per process (RLIMIT_CPU, RLIMIT_FSIZE):
/// two busy processes used two CPUs, and files filled the host's disk under the work dir.
/// Now the tree gets one CPU's worth of time (cgroup), and the workspace is a tmpfs of
/// 1 GiB and 65536 inodes in the launch's own mounts, both read back in the containment
/// report; nothing of it lands on the host's disk.
#[test]
fn a_launch_is_held_to_one_cpu_and_a_bounded_workspace() {
    require_root("the resource bounds test");
    let _s = serial();
    let stack = StackBuilder::new().start();
    // Two busy processes for two seconds of wall time: at most one CPU between them.
    let r = py(
        &stack,
        "import os, time\n\
         kids = []\n\
         for _ in range(2):\n\
         \x20   pid = os.fork()\n\
         \x20   if pid == 0:\n\
         \x20       end = time.time() + 2.0\n\
         \x20       while time.time() < end: pass\n\
         \x20       os._exit(0)\n\
         \x20   kids.append(pid)\n\
         for k in kids: os.waitpid(k, 0)\n\
         t = os.times()\n\
         print(round(t.children_user + t.children_system, 2))",
    );
    assert_eq!(
        r.status,
        ExecutionStatus::Succeeded,
        "{} {}",
        r.error,
        r.err
    );
    let cpu: f64 = r.out.trim().parse().unwrap();
    eprintln!("two busy processes for 2 s of wall time used {cpu} s of CPU");
    assert!(
        cpu < 2.6,
        "two busy processes used {cpu} s of CPU in 2 s: more than one CPU"
    );
    let (state, res) = &r.containment["resources"];
    assert_eq!(*state, DimensionState::Enforced, "{res}");
    assert!(res.contains("CPU 100% of one CPU"), "{res}");
    assert!(
        res.contains("workspace a tmpfs of 1024 MiB and 65536 inodes"),
        "{res}"
    );

    // Files: three of 400 MiB (each under RLIMIT_FSIZE) fill the 1 GiB and no more;
    // inodes: the 65536th file is the last.
    let r = py(
        &stack,
        "import errno, os\n\
         written = 0\n\
         block = b'x' * (1 << 20)\n\
         try:\n\
         \x20   for i in range(3):\n\
         \x20       with open(f'big{i}', 'wb') as f:\n\
         \x20           for _ in range(400):\n\
         \x20               f.write(block); written += 1\n\
         except OSError as e:\n\
         \x20   print('space', written, errno.errorcode[e.errno])\n\
         for i in range(3):\n\
         \x20   os.remove(f'big{i}')\n\
         made = 0\n\
         try:\n\
         \x20   for i in range(70000):\n\
         \x20       open(f'f{i}', 'w').close(); made += 1\n\
         except OSError as e:\n\
         \x20   print('inodes', made, errno.errorcode[e.errno])\n\
         print(os.getcwd())",
    );
    assert_eq!(
        r.status,
        ExecutionStatus::Succeeded,
        "{} {}",
        r.error,
        r.err
    );
    let mut lines = r.out.lines();
    let space: Vec<&str> = lines.next().unwrap().split(' ').collect();
    assert_eq!((space[0], space[2]), ("space", "ENOSPC"), "{}", r.out);
    let mib: u64 = space[1].parse().unwrap();
    assert!((1000..=1024).contains(&mib), "{mib} MiB written");
    let inodes: Vec<&str> = lines.next().unwrap().split(' ').collect();
    assert_eq!((inodes[0], inodes[2]), ("inodes", "ENOSPC"), "{}", r.out);
    let made: u64 = inodes[1].parse().unwrap();
    assert!((65000..65536).contains(&made), "{made} files made");
    // Nothing of it on the host's disk: the workspace there is empty.
    let workspace = lines.next().unwrap();
    let left = std::fs::read_dir(workspace).map_or(0, |d| d.count());
    assert_eq!(left, 0, "files left in {workspace} on the host");
    stack.stop();
}
