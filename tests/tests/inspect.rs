//! The `inspect` profile through the real stack: what an agent sees of the host (its
//! processes, listeners, interfaces, host name, disks), compared with the host itself, and
//! what it cannot do there (read secrets, change files, signal, mount, talk over IP).

use argos_proto::exec::v1::{DimensionState, ExecutionStatus, RunRequest};
use std::os::unix::fs::PermissionsExt;

use argos_tests::runs::{ran, rt, run};
use argos_tests::{StackBuilder, require_root};

/// The `inspect` profile: the host as it is — its processes, listeners, interfaces, host
/// name and disks — through a view in which nothing can be changed, read in secret, or
/// reached over the network.
#[test]
fn an_inspect_launch_sees_the_host_and_changes_nothing() {
    require_root("the inspect profile test");
    let stack = StackBuilder::new().start();
    // A process and a listener of the host's own, started outside Argos.
    let mut outside = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sh_host = |cmd: &str| {
        let out = std::process::Command::new("sh")
            .args(["-c", cmd])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let inspect = |cmd: &str| {
        ran(run(
            &stack,
            RunRequest {
                command: cmd.into(),
                profile: "inspect".into(),
                timeout_ms: Some(20_000),
                ..Default::default()
            },
        )
        .expect("Run"))
    };
    let r = inspect("ps -e -o pid=");
    assert_eq!(
        r.status,
        ExecutionStatus::Succeeded,
        "{} {}",
        r.error,
        r.err
    );
    let pids: Vec<u32> = r
        .out
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    assert!(pids.contains(&1), "the host's PID 1: {pids:?}");
    assert!(pids.contains(&outside.id()), "the host's own process");
    for (d, (state, detail)) in &r.containment {
        assert_ne!(*state, DimensionState::Unavailable, "{d}: {detail}");
    }
    let (_, net) = &r.containment["network"];
    assert!(net.contains("refused"), "{net}");
    let (_, fs) = &r.containment["filesystem"];
    assert!(
        !fs.contains("masking") && !fs.contains("remounting"),
        "{fs}"
    );
    let r = inspect("ss -tlnH");
    assert!(
        r.out.contains(&format!("127.0.0.1:{port}")),
        "{}{}",
        r.out,
        r.err
    );
    let r = inspect("ip -o link | cut -d: -f2");
    assert_eq!(r.out, sh_host("ip -o link | cut -d: -f2"), "{}", r.err);
    let r = inspect("cat /etc/hostname; df -P / | tail -1 | cut -d' ' -f1");
    assert_eq!(
        r.out,
        sh_host("cat /etc/hostname; df -P / | tail -1 | cut -d' ' -f1"),
        "{}",
        r.err
    );

    // Nothing secret, nothing changed, nothing sent.
    let state = stack.root().join("state/execd/execd.db");
    let checks = [
        ("cat /etc/shadow", "shadow"),
        (&format!("cat {}", state.display()), "execd's database"),
        ("ls /root", "/root"),
        ("touch /etc/argos-inspect", "a file under /etc"),
        ("touch /var/tmp/argos-inspect", "a file under /var/tmp"),
        (&format!("kill -0 {}", outside.id()), "a host process"),
        ("unshare -r true", "a user namespace"),
        ("mount -t tmpfs none /mnt", "a mount"),
        (
            &format!(
                "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'"
            ),
            "a TCP connection to the host's listener",
        ),
        (
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"x\", (\"127.0.0.1\", 9))'",
            "a UDP datagram",
        ),
    ];
    for (cmd, what) in checks {
        let r = inspect(cmd);
        assert_ne!(r.exit, Some(0), "{what} was allowed: {cmd}: {}", r.out);
    }
    for key in std::fs::read_dir("/etc/ssh")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = key.file_name().to_string_lossy().to_string();
        if name.starts_with("ssh_host_") && name.ends_with("_key") {
            let r = inspect(&format!("cat /etc/ssh/{name}"));
            assert!(r.out.is_empty() && r.exit != Some(0), "{name} was read");
        }
    }
    assert!(!std::path::Path::new("/etc/argos-inspect").exists());
    assert!(!std::path::Path::new("/var/tmp/argos-inspect").exists());
    // The host name is the host's (its own UTS namespace would say "argos").
    let r = inspect("hostname");
    assert_eq!(r.out, sh_host("hostname"));
    // Another launch's workspace: a private tmpfs in that launch's own mounts.
    let other = rt()
        .block_on(async {
            stack
                .exec()
                .start(RunRequest {
                    command: "echo secret-of-another > ./mine; sleep 30".into(),
                    ..Default::default()
                })
                .await
        })
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let theirs = stack.root().join("work").join(&other.id).join("mine");
    let r = inspect(&format!("cat {}", theirs.display()));
    assert!(
        !r.out.contains("secret-of-another") && r.exit != Some(0),
        "read another launch's workspace: {}",
        r.out
    );
    let r = inspect("nsenter -t 1 -m true");
    assert_ne!(r.exit, Some(0), "nsenter: {}", r.err);
    rt().block_on(async { stack.exec().kill(&other.id).await })
        .unwrap();

    // Through an agent's token, place inspect: what it shows beside the host's own view.
    let mut admin = stack.admin();
    let mut agent = admin.token(&["agent"]);
    let mut agent_run = |cmd: &str| -> String {
        let r = agent.post(
            "/api/agent/run",
            serde_json::json!({"command": cmd, "place": "inspect", "purpose": "look"}),
        );
        assert_eq!(r.status, 200, "{cmd}: {r:?}");
        assert_eq!(r.json()["place"], "inspect", "{cmd}: {r:?}");
        let id = r.json()["execution"]["id"].as_str().unwrap().to_string();
        agent.ended(&id);
        let done = agent.get(&format!("/api/executions/{id}?output=true"));
        assert_eq!(
            done.json()["execution"]["status"],
            "succeeded",
            "{cmd}: {done:?}"
        );
        done.json()["stdout"]["text"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let mut table = vec![
        "| command (agent token, place inspect) | inspect shows | the host shows |".to_string(),
        "|---|---|---|".to_string(),
    ];
    let out = agent_run("ps -e -o pid=");
    let pids: Vec<u32> = out
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    assert!(pids.contains(&1) && pids.contains(&outside.id()), "{out}");
    let host_count = sh_host("ps -e -o pid=").lines().count();
    table.push(format!(
        "| `ps -e -o pid=` | {} processes, PID 1 and the test's own `sleep` among them | {host_count} processes |",
        pids.len()
    ));
    let out = agent_run("ss -tlnH");
    assert!(out.contains(&format!("127.0.0.1:{port}")), "{out}");
    table.push(format!(
        "| `ss -tlnH` | {} listeners, the test's 127.0.0.1:{port} among them | {} listeners |",
        out.lines().count(),
        sh_host("ss -tlnH").lines().count()
    ));
    for cmd in ["ip -o link", "cat /etc/hostname", "df -P /"] {
        let out = agent_run(cmd);
        let host = sh_host(cmd);
        // df: the same filesystem and size (its free space moves between two reads).
        let key = |t: &str| -> Vec<String> {
            t.lines()
                .map(|l| {
                    l.split_whitespace()
                        .take(if cmd.starts_with("df") { 2 } else { 99 })
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect()
        };
        assert_eq!(key(&out), key(&host), "{cmd}");
        let first = |t: &str| {
            t.lines()
                .last()
                .unwrap_or("")
                .split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
        };
        table.push(format!(
            "| `{cmd}` | {} lines, `{}` … | the same |",
            out.lines().count(),
            first(&out)
        ));
    }
    eprintln!("{}", table.join("\n"));
    let _ = outside.kill();
    let _ = outside.wait();
    stack.stop();
}

/// Writes `text` at `home`/`rel`, every directory on the way and the file readable by
/// anyone: only a mask stands between a launch and it.
fn plant(home: &std::path::Path, rel: &str, text: &str) {
    let path = home.join(rel);
    let mut dir = home.to_path_buf();
    for c in std::path::Path::new(rel).parent().unwrap().components() {
        dir.push(c);
        let _ = std::fs::create_dir(&dir);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// A home of the test's own, open to every uid, removed with the guard.
fn test_home(under: &str, prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(under)
        .unwrap_or_else(|e| panic!("a test home under {under}: {e}"));
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Credential stores are hidden as the homes hold them when a launch is taken, not as
/// they were when its warm shim was set up: a `~/.ssh` and `~/.aws/credentials` made
/// after the shims stood, and a `~/.ssh` removed and made again, cannot be read in
/// `inspect` nor in the sandbox (`agent`), while the rest of each home can. Two homes are
/// under `/home` (which `inspect` shows and agents do not see at all), one elsewhere, named
/// by `exec.extra_homes`, which both show. Each home is the test's own, removed after.
#[test]
fn credential_stores_made_after_the_shims_stood_are_masked() {
    require_root("the credential masks test");
    let fresh = test_home("/home", "argos-test-home-");
    let replaced = test_home("/home", "argos-test-home-");
    // Outside /tmp, which is private in a launch.
    let elsewhere = test_home("/var/tmp", "argos-test-homes-");
    let carol = elsewhere.path().join("carol");
    std::fs::create_dir(&carol).unwrap();
    std::fs::set_permissions(&carol, std::fs::Permissions::from_mode(0o755)).unwrap();
    plant(fresh.path(), "notes.txt", "visible-fresh\n");
    plant(replaced.path(), "notes.txt", "visible-replaced\n");
    plant(replaced.path(), ".ssh/id_x", "secret-ssh-before\n");
    plant(&carol, "notes.txt", "visible-carol\n");
    let stack = StackBuilder::new()
        .env(
            "ARGOS_EXEC__EXTRA_HOMES",
            &format!("{}/*", elsewhere.path().display()),
        )
        .start();
    let cat = |profile: &str, home: &std::path::Path, rels: &[&str]| {
        let mut argv = vec!["cat".to_string()];
        argv.extend(rels.iter().map(|r| home.join(r).display().to_string()));
        ran(run(
            &stack,
            RunRequest {
                argv,
                profile: profile.into(),
                timeout_ms: Some(20_000),
                ..Default::default()
            },
        )
        .expect("Run"))
    };
    // One launch in each profile, then time for the pools to stand again: every shim the
    // checks below take was set up before the stores existed.
    for profile in ["inspect", "agent"] {
        let r = cat(profile, &carol, &["notes.txt"]);
        assert_eq!(
            r.status,
            ExecutionStatus::Succeeded,
            "{profile}: {} {}",
            r.error,
            r.err
        );
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));

    plant(fresh.path(), ".ssh/id_x", "secret-ssh-made\n");
    plant(fresh.path(), ".aws/credentials", "secret-aws-made\n");
    std::fs::remove_dir_all(replaced.path().join(".ssh")).unwrap();
    plant(replaced.path(), ".ssh/id_x", "secret-ssh-replaced\n");
    let stores = [
        ".ssh/id_x",
        ".aws/credentials",
        ".config/gh/hosts.yml",
        ".docker/config.json",
        ".kube/config",
        ".netrc",
        ".git-credentials",
        ".pgpass",
    ];
    for rel in stores {
        plant(&carol, rel, &format!("secret-carol {rel}\n"));
    }
    let mut with_notes = vec!["notes.txt"];
    with_notes.extend(stores);
    let homes = [
        (fresh.path(), "visible-fresh"),
        (replaced.path(), "visible-replaced"),
        (carol.as_path(), "visible-carol"),
    ];
    for profile in ["inspect", "agent"] {
        for (home, visible) in homes {
            let r = cat(profile, home, &with_notes);
            assert!(
                !r.out.contains("secret"),
                "{profile} read a credential store in {}: {}",
                home.display(),
                r.out
            );
            assert_ne!(r.exit, Some(0), "{profile}: {}", r.out);
            // The rest of the home is there, where the profile shows homes at all.
            if profile == "inspect" || home == carol.as_path() {
                assert!(
                    r.out.contains(visible),
                    "{profile}: {} is not shown: {} {}",
                    home.display(),
                    r.out,
                    r.err
                );
            }
            let (_, fs) = &r.containment["filesystem"];
            assert!(!fs.contains("masking"), "{profile}: {fs}");
        }
    }
    stack.stop();
}

/// `argv` run in `inspect`, allowed to execute its program and `executables`.
fn argv_in_inspect(
    stack: &argos_tests::Stack,
    argv: &[&str],
    executables: &[&str],
) -> argos_tests::runs::Ran {
    ran(run(
        stack,
        RunRequest {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            profile: "inspect".into(),
            executables: executables.iter().map(|s| s.to_string()).collect(),
            timeout_ms: Some(20_000),
            ..Default::default()
        },
    )
    .expect("Run"))
}

/// The classifier's verdict held by the kernel: an `inspect` launch executes only the
/// programs it was judged on. Each class of classifier miss the outside review found is run
/// twice in `inspect`, as if the classifier had called it read-only: once with the program
/// it starts listed too (the payload runs: the attack is real) and once with only the
/// programs the classifier saw (the kernel refuses the second program: nothing runs).
#[test]
fn a_classifier_miss_costs_nothing_in_inspect() {
    require_root("the inspect execute-limit test");
    let stack = StackBuilder::new().start();
    // A git repository and a tar archive every launch uid can read, outside /tmp (which
    // is private in a launch).
    let dir = tempfile::Builder::new()
        .prefix("argos-miss-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = dir.path().display().to_string();
    let setup = format!(
        "cd {d} && git init -q repo && echo needle > repo/hay && git -C repo add hay \
         && git -C repo -c user.name=t -c user.email=t@t commit -qm one \
         && tar -cf a.tar -C repo hay && chmod -R a+rX {d}"
    );
    let ok = std::process::Command::new("sh")
        .args(["-c", &setup])
        .status()
        .unwrap();
    assert!(ok.success(), "setting up the repository and archive");
    let run_in_inspect =
        |argv: &[&str], executables: &[&str]| argv_in_inspect(&stack, argv, executables);
    let repo = format!("{d}/repo");
    let archive = format!("{d}/a.tar");
    // (what, argv, the programs judged, the program it starts)
    let cases: Vec<(&str, Vec<&str>, Vec<&str>, &str)> = vec![
        (
            "git grep -O runs a pager command",
            vec![
                "git",
                "-c",
                "safe.directory=*",
                "-C",
                &repo,
                "grep",
                "-Oecho PW''NED",
                "needle",
            ],
            vec!["git"],
            "sh",
        ),
        (
            "git ls-remote --upload-pack runs a command",
            vec![
                "git",
                "-c",
                "safe.directory=*",
                "ls-remote",
                "--upload-pack=echo PW''NED >&2; false",
                &repo,
            ],
            vec!["git"],
            "sh",
        ),
        (
            "tar --checkpoint-action=exec runs a command",
            vec![
                "tar",
                "-t",
                "-f",
                &archive,
                "--checkpoint=1",
                "--checkpoint-action=exec=echo PW''NED",
            ],
            vec!["tar"],
            "sh",
        ),
        (
            "sed's e command runs a command",
            vec!["sed", "-n", "1e echo PW''NED", "/etc/hostname"],
            vec!["sed"],
            "sh",
        ),
        (
            "env picks the program",
            vec!["env", "sh", "-c", "echo PW''NED"],
            vec!["env"],
            "sh",
        ),
        (
            "find -exec runs a program",
            vec![
                "find",
                "/etc/hostname",
                "-exec",
                "sh",
                "-c",
                "echo PW''NED",
                ";",
            ],
            vec!["find"],
            "sh",
        ),
        (
            "a builtin wrapper's shell starts a program",
            vec!["sh", "-c", "command sh -vc '/usr/bin/printf PW\"\"NED'"],
            vec!["command"],
            "printf",
        ),
    ];
    for (what, argv, judged, starts) in cases {
        let mut with = judged.clone();
        with.push(starts);
        let real = run_in_inspect(&argv, &with);
        assert!(
            real.out.contains("PWNED") || real.err.contains("PWNED"),
            "{what}: the payload did not run even when allowed: {} {} {}",
            real.error,
            real.out,
            real.err
        );
        let held = run_in_inspect(&argv, &judged);
        assert!(
            !held.out.contains("PWNED") && !held.err.contains("PWNED"),
            "{what}: the kernel let {starts} run: {} {}",
            held.out,
            held.err
        );
        let (_, fs) = &held.containment["filesystem"];
        assert!(fs.contains("executable: only"), "{what}: {fs}");
    }
    // A long option abbreviated past the classifier writes nothing on the host either.
    let r = run_in_inspect(
        &["sort", "--outp=/etc/argos-miss", "/etc/hostname"],
        &["sort"],
    );
    assert_ne!(r.exit, Some(0));
    assert!(!std::path::Path::new("/etc/argos-miss").exists());

    // Through the gate: each class of miss is refused from the fast path (the classifier
    // finds an option no model lists, or a wrapper's command), naming the place to ask.
    rt().block_on(async {
        let c = stack.exec();
        for cmd in [
            "git grep -O'echo PWNED' needle",
            "git ls-remote --upload-pack='echo PWNED' /srv",
            "tar -t -f a.tar --checkpoint=1 --checkpoint-action=exec='echo PWNED'",
            "sort --compress-program=sh /etc/hostname",
            "sort --outp=/etc/argos-miss /etc/hostname",
            "sed -n -e1p -e'e id' /etc/hostname",
            "env sh -c 'echo PWNED'",
            "command sh -vc 'echo PWNED'",
            "find /etc/hostname -exec sh -c 'echo PWNED' ';'",
            "systemctl --message status poweroff",
            "fuser -k 80/tcp",
            "file -C -m /etc/magic",
        ] {
            let e = c
                .request_run(argos_proto::exec::v1::RequestRunRequest {
                    run: Some(RunRequest {
                        command: cmd.into(),
                        ..Default::default()
                    }),
                    purpose: "look".into(),
                    place: argos_proto::exec::v1::Place::Inspect as i32,
                    ..Default::default()
                })
                .await
                .expect_err(cmd);
            assert!(
                e.message.contains("inspect runs only what is read-only"),
                "{cmd}: {e:?}"
            );
        }
    });
    // Through the gate: a read-only command runs in inspect without a shell, allowed to
    // execute only what it was judged on.
    rt().block_on(async {
        let c = stack.exec();
        let r = c
            .request_run(argos_proto::exec::v1::RequestRunRequest {
                run: Some(RunRequest {
                    command: "ps -e -o pid=".into(),
                    ..Default::default()
                }),
                purpose: "look".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let e = r.execution.unwrap();
        assert_eq!(e.argv, ["ps", "-e", "-o", "pid="], "no shell in between");
        assert_eq!(e.profile, "inspect");
        let done = loop {
            let g = c.get(&e.id, true).await.unwrap();
            let x = g.execution.unwrap();
            if x.status != ExecutionStatus::Running as i32 {
                break x;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert_eq!(
            done.status,
            ExecutionStatus::Succeeded as i32,
            "{}",
            done.error
        );
        let fs = done
            .containment
            .iter()
            .find(|d| d.name == "filesystem")
            .unwrap();
        assert!(fs.detail.contains("executable: only"), "{}", fs.detail);
    });
    stack.stop();
}

/// The escape suite's cases that apply to a view of the host: kernel-attack and escape
/// syscalls (ptrace and process_vm_readv of a sibling, mounts, modules, user namespaces,
/// terminal injection, io_uring, bpf, keyrings, setuid, vsock), the host's abstract UNIX
/// sockets (its network namespace is the host's: landlock scopes them), a setuid binary,
/// and signalling execd — each refused in `inspect` as in `agent`.
#[test]
fn the_escape_suite_holds_in_inspect() {
    require_root("the inspect escape suite");
    let stack = StackBuilder::new().start();
    let inspect = |argv: &[&str], executables: &[&str]| argv_in_inspect(&stack, argv, executables);
    let code = r#"
import ctypes, os, subprocess, json
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return ctypes.get_errno() if r == -1 else 0
sib = subprocess.Popen(["sleep", "5"])
buf = ctypes.create_string_buffer(8)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
out = {
  "ptrace": sc(101, 16, sib.pid, 0, 0),
  "process_vm_readv": sc(310, sib.pid, ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0),
  "process_vm_writev": sc(311, sib.pid, ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0),
  "mount": sc(165, 0, 0, 0, 0, 0),
  "init_module": sc(175, 0, 0, 0),
  "finit_module": sc(313, 0, 0, 0),
  "unshare_user": sc(272, 0x10000000),
  "unshare_mount": sc(272, 0x00020000),
  "setns": sc(308, 0, 0),
  "tiocsti": sc(16, 0, 0x5412, 0),
  "io_uring_setup": sc(425, 1, 0),
  "bpf": sc(321, 0, 0, 0),
  "keyctl": sc(250, 0, 0, 0, 0),
  "setuid0": sc(105, 0),
  "vsock": sc(41, 40, 1, 0),
  "inet": sc(41, 2, 1, 0),
  "inet6": sc(41, 10, 2, 0),
  "packet": sc(41, 17, 3, 0),
  "netlink": sc(41, 16, 3, 0) == 0 or sc(41, 16, 3, 0),
}
sib.kill()
print(json.dumps(out))
"#;
    let r = inspect(&["/usr/bin/python3", "-c", code], &["sleep"]);
    let v: serde_json::Value =
        serde_json::from_str(r.out.trim()).unwrap_or_else(|e| panic!("{e}: {} {}", r.out, r.err));
    for call in [
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "mount",
        "init_module",
        "finit_module",
        "unshare_user",
        "unshare_mount",
        "setns",
        "tiocsti",
        "io_uring_setup",
        "bpf",
        "keyctl",
        "setuid0",
        "vsock",
        "inet",
        "inet6",
        "packet",
    ] {
        assert_eq!(
            v[call], 1,
            "{call} was not refused with EPERM in inspect: {v}"
        );
    }
    // Netlink stays: `ip` and `ss` need it.
    assert_eq!(v["netlink"], true, "{v}");

    // The host's abstract UNIX sockets (D-Bus and X11 listen on them).
    let name = format!("argos-inspect-escape-{}", std::process::id());
    let host = std::os::unix::net::UnixListener::bind_addr(
        &<std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name.as_bytes()).unwrap(),
    )
    .unwrap();
    let r = inspect(
        &[
            "/usr/bin/python3",
            "-c",
            &format!(
                "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('\\0{name}'); print('connected')\nexcept OSError as e: print('refused', e.errno)"
            ),
        ],
        &[],
    );
    assert_eq!(r.out.trim(), "refused 1", "{} {}", r.out, r.err);
    host.set_nonblocking(true).unwrap();
    assert!(host.accept().is_err(), "a connection arrived");

    // A setuid binary grants nothing (no_new_privs), and a user namespace is refused.
    let r = inspect(&["su", "-c", "id -u", "root"], &["id"]);
    assert!(
        !r.out.lines().any(|l| l.trim() == "0"),
        "became root: {}",
        r.out
    );
    let r = inspect(&["unshare", "-U", "true"], &["true"]);
    assert_ne!(r.exit, Some(0), "made a user namespace: {}", r.err);

    // execd, a host process of another uid, cannot be signalled.
    let execd_pid = argos_tests::probe(&stack.socket("execd"), None, None).json["pid"]
        .as_u64()
        .unwrap();
    let r = inspect(&["kill", "-0", &execd_pid.to_string()], &[]);
    assert_ne!(r.exit, Some(0), "signalled execd: {}", r.out);
    stack.stop();
}

/// A reader that is a script can run whatever its arguments say: Debian's zgrep
/// evaluates them (the review ran `id` and python from a crafted `--label=`). zgrep is no
/// reader now, and any reader found to be a script on the host that Argos has not read
/// (`@script` in its model) is none there: the gate refuses it in `inspect`.
#[test]
fn a_reader_that_is_a_script_is_no_reader() {
    use std::os::unix::fs::PermissionsExt;
    let stack = StackBuilder::new().start();
    let mut admin = stack.admin();
    let mut agent = admin.token(&["agent"]);
    let mut ask = |cmd: &str| {
        agent.post(
            "/api/agent/run",
            serde_json::json!({"command": cmd, "place": "inspect", "purpose": "look"}),
        )
    };
    let r = ask("zgrep --label='x$(id>&2)' -e root /etc/hostname");
    assert_eq!(r.status, 400, "{r:?}");
    // A modelled reader shadowed by a script earlier in the launch's PATH (as root may
    // install one), here `tree` in /usr/local/bin, removed whatever the outcome.
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let shadow = Remove(std::path::PathBuf::from("/usr/local/bin/tree"));
    assert!(
        !shadow.0.exists(),
        "/usr/local/bin/tree exists on this machine"
    );
    std::fs::write(&shadow.0, "#!/bin/sh\neval \"$2\"\n").unwrap();
    std::fs::set_permissions(&shadow.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = ask("tree -L 1 /etc");
    assert_eq!(r.status, 400, "{r:?}");
    let why = r.json()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(why.contains("`tree` is a script"), "{why}");
    drop(shadow);
    // A script Argos has read stays a reader.
    let r = ask("which sh");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["place"], "inspect", "{r:?}");
    stack.stop();
}

/// `inspect` shares the host's view, and a read-only mount does not stop `connect()`: a
/// host socket open to all (mode 0777) was connected and written to from it. Every UNIX
/// socket under /run, /var/tmp and /dev/shm is masked when the launch is taken, made
/// after the shims stood included, but the read queries the profile names; the listener
/// hears nothing.
#[test]
fn no_host_unix_socket_but_the_named_read_queries_is_reached_from_inspect() {
    use std::os::unix::fs::PermissionsExt;
    require_root("the inspect socket test");
    let stack = StackBuilder::new().start();
    // The shims stand; then the sockets appear.
    let r = argv_in_inspect(&stack, &["/bin/true"], &[]);
    assert_eq!(r.exit, Some(0), "{}", r.err);
    let mut listeners = Vec::new();
    let mut dirs = Vec::new();
    for under in ["/run", "/var/tmp", "/dev/shm"] {
        let dir = tempfile::Builder::new()
            .prefix("argos-sock-")
            .tempdir_in(under)
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("service.sock");
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        l.set_nonblocking(true).unwrap();
        listeners.push((path, l));
        dirs.push(dir);
    }
    for (path, l) in &listeners {
        let code = format!(
            r#"
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect({p:?})
    s.sendall(b"change something")
    print("connected")
except OSError as e:
    print("refused", e.errno)
"#,
            p = path.display().to_string()
        );
        let r = argv_in_inspect(&stack, &["/usr/bin/python3", "-c", &code], &[]);
        assert!(
            r.out.starts_with("refused"),
            "{}: {} {}",
            path.display(),
            r.out,
            r.err
        );
        match l.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("{}: the listener heard {other:?}", path.display()),
        }
    }
    stack.stop();
}

/// This host's dynamic loader (the interpreter of its ELF programs).
fn the_loader() -> &'static str {
    ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("a dynamic loader")
}

/// Nothing runs in `inspect` that was not judged, by the ways the outside review found
/// around landlock's execute right: the loader (listed as the judged programs'
/// interpreter) run as a program to map one that was not, the loader mapping a copy the
/// launch wrote into `/tmp` or its workspace, and a judged python executing a program
/// from a memfd or a descriptor. Judged programs still run, and the programs' directories
/// can still be listed.
#[test]
fn nothing_unjudged_runs_through_the_loader_or_a_descriptor_in_inspect() {
    require_root("the inspect loader test");
    let stack = StackBuilder::new().start();
    let loader = the_loader();
    // The loader run as a program, only it and cat judged: python does not start.
    let r = argv_in_inspect(
        &stack,
        &[loader, "/usr/bin/python3", "-c", "print('PW' + 'NED')"],
        &["cat"],
    );
    assert!(
        !r.out.contains("PWNED") && r.exit != Some(0),
        "the loader ran python: {} {}",
        r.out,
        r.err
    );
    let (_, fs) = &r.containment["filesystem"];
    assert!(
        fs.contains("only the listed files readable") && fs.contains("noexec"),
        "{fs}"
    );
    let (_, sys) = &r.containment["syscalls"];
    assert!(
        sys.contains("programs from files only (memfd_create and execveat refused)"),
        "{sys}"
    );
    // What was judged runs, through the same loader; the directory is still listed.
    let r = argv_in_inspect(&stack, &["cat", "/etc/hostname"], &[]);
    assert_eq!(
        r.status,
        ExecutionStatus::Succeeded,
        "{} {} {:?}",
        r.error,
        r.err,
        r.containment
    );
    let r = argv_in_inspect(&stack, &["ls", "/usr/bin/python3", "/usr/bin"], &[]);
    assert_eq!(r.exit, Some(0), "{} {}", r.out, r.err);
    assert!(r.out.contains("python3"), "{}", r.out);

    // A judged python copies a judged program into /tmp and the workspace and runs each
    // copy through the loader: neither is mapped executable.
    let copies = format!(
        r#"
import os, shutil, subprocess
with open("/tmp/m", "w") as f:
    f.write("PW" + "NED\n")
for where in ("/tmp", os.getcwd()):
    p = os.path.join(where, "c")
    shutil.copy("/usr/bin/cat", p)
    r = subprocess.run(["{loader}", p, "/tmp/m"], capture_output=True)
    print(where == "/tmp" and "tmp" or "workspace", r.returncode, r.stdout.decode().strip() or "-")
"#
    );
    let r = argv_in_inspect(&stack, &["/usr/bin/python3", "-c", &copies], &["cat"]);
    assert_eq!(r.exit, Some(0), "{} {}", r.out, r.err);
    assert!(
        r.out.contains("tmp ") && r.out.contains("workspace ") && !r.out.contains("PWNED"),
        "a copy the launch wrote ran: {} {}",
        r.out,
        r.err
    );

    // A judged python: a memfd is not made, and a descriptor is not executed (fexecve is
    // execveat), not even one of a judged program.
    let memory = r#"
import os
with open("/tmp/m", "w") as f:
    f.write("PW" + "NED\n")
try:
    fd = os.memfd_create("x")
    with open("/usr/bin/cat", "rb") as f:
        os.write(fd, f.read())
    try:
        os.execve(fd, ["cat", "/tmp/m"], {})
    except OSError as e:
        print("fexecve memfd", e.errno)
except OSError as e:
    print("memfd_create", e.errno)
fd = os.open("/usr/bin/cat", os.O_RDONLY)
try:
    os.execve(fd, ["cat", "/tmp/m"], {})
except OSError as e:
    print("fexecve", e.errno)
"#;
    let r = argv_in_inspect(&stack, &["/usr/bin/python3", "-c", memory], &["cat"]);
    assert!(
        !r.out.contains("PWNED") && r.out.contains("memfd_create 1") && r.out.contains("fexecve 1"),
        "a program ran from memory or a descriptor: {} {}",
        r.out,
        r.err
    );
    stack.stop();
}

/// A copy of `cat` planted as a program under `parent` (in a directory of its own, open
/// to every launch uid, removed when dropped), with a marker file beside it.
fn plant_program(parent: &str) -> (tempfile::TempDir, String, String) {
    let dir = tempfile::Builder::new()
        .prefix("argos-elf-")
        .tempdir_in(parent)
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let prog = dir.path().join("prog");
    std::fs::copy("/usr/bin/cat", &prog).unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let marker = dir.path().join("m");
    std::fs::write(&marker, "PW".to_string() + "NED\n").unwrap();
    std::fs::set_permissions(&marker, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (prog, marker) = (prog.display().to_string(), marker.display().to_string());
    (dir, prog, marker)
}

/// The loader maps no ELF program the launch was not judged on, wherever on the host it
/// lies: outside the programs' directories every mount is `noexec` but the libraries'
/// (an unjudged program elsewhere, `/opt/x/prog` say, is not mapped executable), and a
/// program among the libraries (a helper such as `utempter`) is masked. A judged program
/// elsewhere still runs, and the interpreters' compiled modules still load.
#[test]
fn the_loader_maps_no_unjudged_program_anywhere_in_inspect() {
    require_root("the inspect loader test");
    std::fs::create_dir_all("/usr/local/lib").unwrap();
    let (_elsewhere, prog, marker) = plant_program("/var/cache");
    let (_among_libraries, helper, _) = plant_program("/usr/local/lib");
    let stack = StackBuilder::new().start();
    let loader = the_loader();
    for unjudged in [&prog, &helper] {
        let r = argv_in_inspect(&stack, &[loader, unjudged, &marker], &["cat"]);
        assert!(
            !r.out.contains("PWNED") && r.exit != Some(0),
            "the loader ran {unjudged}: {} {}",
            r.out,
            r.err
        );
        let (_, fs) = &r.containment["filesystem"];
        assert!(fs.contains("other mounts noexec"), "{fs}");
    }
    // Judged, the same program runs where it lies.
    let r = argv_in_inspect(&stack, &[&prog, &marker], &[]);
    assert!(
        r.exit == Some(0) && r.out.contains("PWNED"),
        "a judged program outside the programs' directories: {:?} {} {} {}",
        r.status,
        r.error,
        r.out,
        r.err
    );
    // A judged python loads its compiled modules (lib-dynload) and the C library's.
    let r = argv_in_inspect(
        &stack,
        &[
            "/usr/bin/python3",
            "-c",
            "import bz2, ctypes.util, json; print('loaded', bz2.compress(b'x')[:3])",
        ],
        &[],
    );
    assert!(
        r.exit == Some(0) && r.out.contains("loaded b'BZh'"),
        "{} {}",
        r.out,
        r.err
    );
    stack.stop();
}

/// A System V object of the host's, removed when dropped.
struct HostIpc {
    kind: &'static str,
    id: i32,
}

impl HostIpc {
    /// `ipcmk` with `args` (the object open to everyone).
    fn make(kind: &'static str, args: &[&str]) -> HostIpc {
        let out = std::process::Command::new("ipcmk")
            .args(args)
            .args(["-p", "0666"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let id = text
            .split_whitespace()
            .last()
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("ipcmk {args:?}: {text}"));
        HostIpc { kind, id }
    }
}

impl Drop for HostIpc {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ipcrm")
            .args([self.kind, &self.id.to_string()])
            .status();
    }
}

/// How many messages the host's queue `id` holds, from /proc/sysvipc/msg.
fn messages_in(id: i32) -> u64 {
    let table = std::fs::read_to_string("/proc/sysvipc/msg").unwrap();
    let id = id.to_string();
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) == Some(&id.as_str()) {
            return fields[4].parse().unwrap();
        }
    }
    panic!("queue {id} is gone: {table}")
}

/// `inspect` shares the host's IPC namespace (so that `ipcs` shows its objects) and its
/// files, and changes neither: no message lands in or leaves a host queue, no object is
/// made, removed or attached writable, and no lock of any kind is taken on a host file
/// while a host process wants it. Looking still works: `ipcs`, /proc/sysvipc, a queue's
/// status, a read-only attach.
#[test]
fn inspect_changes_no_host_ipc_object_and_takes_no_lock() {
    require_root("the inspect IPC and locks test");
    let stack = StackBuilder::new().start();
    let queue = HostIpc::make("-q", &["-Q"]);
    let segment = HostIpc::make("-m", &["-M", "4096"]);
    let code = format!(
        r#"
import ctypes, json, struct
libc = ctypes.CDLL(None, use_errno=True)
q, m = {q}, {m}
libc.msgsnd.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.msgrcv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long, ctypes.c_int]
libc.msgrcv.restype = ctypes.c_ssize_t
libc.msgctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmat.restype = ctypes.c_void_p
libc.shmdt.argtypes = [ctypes.c_void_p]
def err(r):
    return ctypes.get_errno() if r == -1 else 0
def made(r):
    return -ctypes.get_errno() if r == -1 else r
def attach(flags):
    a = libc.shmat(m, None, flags)
    if a is None or a == ctypes.c_void_p(-1).value:
        return ctypes.get_errno()
    libc.shmdt(a)
    return 0
buf = ctypes.create_string_buffer(struct.pack("l", 1) + b"PWNED", 64)
stat = ctypes.create_string_buffer(512)
print(json.dumps(dict(
    msgsnd=err(libc.msgsnd(q, buf, 5, 0o4000)),
    msgrcv=err(libc.msgrcv(q, buf, 5, 0, 0o4000)),
    msgctl_stat=err(libc.msgctl(q, 2, stat)),
    msgget_private=made(libc.msgget(0, 0o666)),
    semget_create=made(libc.semget(0x4172676f, 1, 0o1000 | 0o666)),
    shmat=attach(0),
    shmat_rdonly=attach(0o10000),
)))
"#,
        q = queue.id,
        m = segment.id
    );
    let r = argv_in_inspect(&stack, &["/usr/bin/python3", "-c", &code], &[]);
    let v: serde_json::Value =
        serde_json::from_str(r.out.trim()).unwrap_or_else(|e| panic!("{e}: {} {}", r.out, r.err));
    // Whatever was made despite the rules is removed before anything is judged.
    for (key, kind) in [("msgget_private", "-q"), ("semget_create", "-s")] {
        if let Some(id) = v[key].as_i64().filter(|id| *id >= 0) {
            drop(HostIpc {
                kind,
                id: id as i32,
            });
        }
    }
    let messages = messages_in(queue.id);
    assert_eq!(messages, 0, "a message landed in the host's queue: {v}");
    for (call, want) in [
        ("msgsnd", 1),
        ("msgrcv", 1),
        ("msgctl_stat", 0),
        ("msgget_private", -1),
        ("semget_create", -1),
        ("shmat", 1),
        ("shmat_rdonly", 0),
    ] {
        assert_eq!(v[call], want, "{call}: {v}");
    }
    let (_, sys) = &r.containment["syscalls"];
    assert!(
        sys.contains("IPC read-only") && sys.contains("file locks: none"),
        "{sys}"
    );
    // Looking: ipcs and /proc/sysvipc show the host's queue.
    for argv in [&["ipcs", "-q"][..], &["cat", "/proc/sysvipc/msg"][..]] {
        let r = argv_in_inspect(&stack, argv, &[]);
        assert_eq!(r.exit, Some(0), "{argv:?}: {} {}", r.out, r.err);
        assert!(
            r.out
                .lines()
                .any(|l| l.split_whitespace().nth(1) == Some(&queue.id.to_string())),
            "{argv:?}: {}",
            r.out
        );
    }

    // Locks on a world-readable host file, while the host's own process wants it.
    let dir = tempfile::Builder::new()
        .prefix("argos-locks-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = dir.path().join("shared");
    std::fs::write(&file, "x\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let path = file.display().to_string();
    let cases = [
        ("flock LOCK_EX", "fcntl.flock(f, fcntl.LOCK_EX)", "flock"),
        ("fcntl F_SETLK", "fcntl.lockf(f, fcntl.LOCK_SH)", "lockf"),
        (
            "fcntl F_OFD_SETLK",
            "fcntl.fcntl(f, fcntl.F_OFD_SETLK, struct.pack('hhqqi4x', fcntl.F_RDLCK, 0, 0, 0, 0))",
            "lockf",
        ),
    ];
    for (what, lock, host_lock) in cases {
        let inside = format!(
            "import fcntl, struct, time\nf = open('{path}')\ntry:\n    {lock}\n    print('locked', flush=True)\n    time.sleep(4)\nexcept OSError as e:\n    print('refused', e.errno)\n"
        );
        // The host's process tries for an exclusive lock, without waiting, all along.
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let checker = {
            let (done, path) = (done.clone(), path.clone());
            std::thread::spawn(move || {
                let script = format!(
                    "import fcntl, sys\nf = open(sys.argv[1], 'r+')\nfcntl.{host_lock}(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
                );
                let mut blocked = false;
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let ok = std::process::Command::new("/usr/bin/python3")
                        .args(["-c", &script, &path])
                        .status()
                        .unwrap()
                        .success();
                    blocked |= !ok;
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                blocked
            })
        };
        let r = argv_in_inspect(&stack, &["/usr/bin/python3", "-c", &inside], &[]);
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let blocked = checker.join().unwrap();
        assert!(
            !blocked,
            "{what}: the host's process was blocked: {}",
            r.out
        );
        assert_eq!(
            r.out.trim(),
            format!("refused {}", nix::errno::Errno::ENOLCK as i32),
            "{what}: {}",
            r.err
        );
    }
    drop((queue, segment));
    stack.stop();
}

/// Waits until a process of the host's has `marker` in its command line: the launch that
/// carries it has started (past its masks and landlock).
fn wait_for_launch(marker: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        let found = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        });
        if found {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no launch with {marker} started");
}

/// A running `inspect` launch cannot read a secret the host puts where a masked one was:
/// a new `.netrc` renamed over the masked file (as `passwd` replaces `/etc/shadow`), and
/// a `.docker` removed and made again with a new `config.json` in it (a rename or removal
/// detaches the mask made in the launch's namespace). Nor one made while it runs where
/// none was. The launch waits for the host's changes, then reads.
#[test]
fn a_secret_renamed_over_a_mask_while_inspect_runs_is_not_read() {
    require_root("the inspect rename test");
    let home = test_home("/home", "argos-test-home-");
    let h = home.path();
    plant(h, "notes.txt", "visible-notes\n");
    plant(h, ".netrc", "secret-netrc-before\n");
    plant(h, ".docker/config.json", "secret-docker-before\n");
    let stack = StackBuilder::new().start();
    let marker = format!("argos-rename-{}", std::process::id());
    let script = format!(
        "m={marker}; while [ ! -e {h}/go ]; do sleep 0.1; done; \
         cat {h}/notes.txt {h}/.netrc {h}/.docker/config.json {h}/.pgpass; true",
        h = h.display()
    );
    std::thread::scope(|s| {
        let launch =
            s.spawn(|| argv_in_inspect(&stack, &["/bin/sh", "-c", &script], &["cat", "sleep"]));
        wait_for_launch(&marker);
        std::fs::write(h.join(".netrc.new"), "secret-netrc-renamed\n").unwrap();
        std::fs::set_permissions(h.join(".netrc.new"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        std::fs::rename(h.join(".netrc.new"), h.join(".netrc")).unwrap();
        std::fs::remove_dir_all(h.join(".docker")).unwrap();
        plant(h, ".docker.new/config.json", "secret-docker-renamed\n");
        std::fs::rename(h.join(".docker.new"), h.join(".docker")).unwrap();
        plant(h, ".pgpass", "secret-pgpass-made\n");
        plant(h, "go", "");
        let r = launch.join().unwrap();
        assert!(r.out.contains("visible-notes"), "{} {}", r.out, r.err);
        assert!(!r.out.contains("secret"), "a secret was read: {}", r.out);
    });
    stack.stop();
}

/// A host service's socket that appears while an `inspect` launch runs cannot be reached
/// from it: a new listener under `/run` made after the launch started, and a socket the
/// launch saw at its start that the service unlinks and binds anew (which detached a
/// mask). The listeners hear nothing.
#[test]
fn a_socket_made_or_bound_anew_while_inspect_runs_is_not_reached() {
    require_root("the inspect late socket test");
    let stack = StackBuilder::new().start();
    let flags = test_home("/home", "argos-test-flag-");
    let dir = tempfile::Builder::new()
        .prefix("argos-sock-")
        .tempdir_in("/run")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let early = dir.path().join("early.sock");
    let late = dir.path().join("late.sock");
    let first = std::os::unix::net::UnixListener::bind(&early).unwrap();
    std::fs::set_permissions(&early, std::fs::Permissions::from_mode(0o777)).unwrap();
    let marker = format!("argos-late-socket-{}", std::process::id());
    let code = format!(
        r#"
import os, socket, time
m = {marker:?}
while not os.path.exists({go:?}):
    time.sleep(0.1)
for p in ({early:?}, {late:?}):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p)
        s.sendall(b"change something")
        print("connected", p)
    except OSError as e:
        print("refused", e.errno)
"#,
        go = flags.path().join("go").display().to_string(),
        early = early.display().to_string(),
        late = late.display().to_string(),
    );
    let listeners = std::thread::scope(|s| {
        let launch = s.spawn(|| argv_in_inspect(&stack, &["/usr/bin/python3", "-c", &code], &[]));
        wait_for_launch(&marker);
        drop(first);
        std::fs::remove_file(&early).unwrap();
        let mut listeners = Vec::new();
        for path in [&early, &late] {
            let l = std::os::unix::net::UnixListener::bind(path).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
            l.set_nonblocking(true).unwrap();
            listeners.push(l);
        }
        plant(flags.path(), "go", "");
        let r = launch.join().unwrap();
        assert!(
            !r.out.contains("connected") && r.out.matches("refused").count() == 2,
            "{} {}",
            r.out,
            r.err
        );
        listeners
    });
    for l in &listeners {
        match l.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("a listener heard {other:?}"),
        }
    }
    stack.stop();
}

/// A device opened in `inspect` or the sandbox acts on the host whatever its reader
/// means (a watchdog arms, a terminal's reader takes its keystrokes), and the name may
/// reach the reader where no judge sees it: a pattern (`cat /???/watchdog`) or data
/// (`… | md5sum -c`). The kernel holds it: of /dev's files only the plain devices and
/// the profile's few others open; its entries are still listed. The probe is a device
/// node open to all (a copy of /dev/null, mode 0666) made for the test and removed
/// whatever the outcome.
#[test]
fn no_device_but_the_plain_ones_opens_in_inspect_or_the_sandbox() {
    require_root("the device test");
    struct Remove(String);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let probe = Remove(format!("/dev/argos-probe-{}", std::process::id()));
    let made = std::process::Command::new("mknod")
        .args(["-m", "0666", &probe.0, "c", "1", "3"])
        .status()
        .unwrap();
    assert!(made.success(), "mknod {}", probe.0);
    let name = probe.0.trim_start_matches("/dev/").to_string();
    // The list of names `wc --files0-from` reads, where every launch uid can read it.
    let dir = tempfile::Builder::new()
        .prefix("argos-devices-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let list = dir.path().join("names").display().to_string();
    std::fs::write(&list, format!("{}\0", probe.0)).unwrap();
    std::fs::set_permissions(&list, std::fs::Permissions::from_mode(0o644)).unwrap();
    let stack = StackBuilder::new().start();
    let mut admin = stack.admin();
    let mut agent = admin.token(&["agent"]);
    // What the gate answered (its refusal's message), or how the launch ended and what
    // it printed.
    fn agent_run(
        agent: &mut argos_tests::web::Web,
        cmd: &str,
        place: &str,
        cwd: &str,
    ) -> Result<(String, String, String), String> {
        let r = agent.post(
            "/api/agent/run",
            serde_json::json!({"command": cmd, "place": place, "cwd": cwd, "purpose": "look"}),
        );
        if r.status == 400 {
            return Err(r.json()["error"]["message"]
                .as_str()
                .unwrap_or("")
                .to_string());
        }
        assert_eq!(r.status, 200, "{cmd}: {r:?}");
        let id = r.json()["execution"]["id"].as_str().unwrap().to_string();
        agent.ended(&id);
        let done = agent.get(&format!("/api/executions/{id}?output=true"));
        let text = |k: &str| done.json()[k]["text"].as_str().unwrap_or("").to_string();
        Ok((
            done.json()["execution"]["status"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            text("stdout"),
            text("stderr"),
        ))
    }
    for place in ["inspect", "sandbox"] {
        // By a pattern (the gate refuses it for inspect: the sandbox runs anything), and
        // by a name carried in data, which no judge sees.
        let pattern = format!("cat /???/{name}");
        let data = format!("wc -c --files0-from={list}");
        for cmd in [&pattern, &data] {
            match agent_run(&mut agent, cmd, place, "") {
                Err(why) => assert!(
                    place == "inspect"
                        && cmd == &pattern
                        && why.contains("a pattern that may name a device"),
                    "{place}: {cmd}: {why}"
                ),
                Ok((status, _, err)) => {
                    assert_eq!(status, "failed", "{place}: {cmd}: {err}");
                    assert!(err.contains("Permission denied"), "{place}: {cmd}: {err}");
                }
            }
        }
        // The plain devices open; /dev's entries are listed.
        let (status, out, err) = agent_run(&mut agent, "md5sum /dev/null", place, "").unwrap();
        assert_eq!(status, "succeeded", "{place}: {err}");
        assert!(
            out.starts_with("d41d8cd98f00b204e9800998ecf8427e "),
            "{place}: {out}"
        );
        let (status, out, err) = agent_run(&mut agent, "ls /dev", place, "").unwrap();
        assert_eq!(status, "succeeded", "{place}: {err}");
        assert!(out.lines().any(|l| l == name), "{place}: {out}");
    }
    // A relative name in /dev, /proc or /sys (the request's working directory): the gate
    // knows where it runs and refuses it for inspect.
    for cwd in ["/dev", "/proc/self/..", "/sys/kernel"] {
        let why = agent_run(&mut agent, &format!("cat {name}"), "inspect", cwd).unwrap_err();
        assert!(
            why.contains("where a relative name may be a device"),
            "{cwd}: {why}"
        );
    }
    // Named plainly, the classifier refuses it for inspect; run there anyway, as a
    // classifier miss would, the kernel refuses it too.
    let r = argv_in_inspect(&stack, &["head", "-c", "1", &probe.0], &[]);
    assert_eq!(r.status, ExecutionStatus::Failed, "{}", r.err);
    assert!(r.err.contains("Permission denied"), "{}", r.err);
    let r = argv_in_inspect(&stack, &["sh", "-c", &format!("cat /???/{name}")], &["cat"]);
    assert_eq!(r.status, ExecutionStatus::Failed, "{}", r.err);
    assert!(r.err.contains("Permission denied"), "{}", r.err);
    // The kernel's log stays for dmesg in inspect: what refuses it, if anything, is the
    // host's own dmesg_restrict (EPERM), not the profile (EACCES).
    let r = argv_in_inspect(&stack, &["dmesg", "--notime"], &[]);
    assert!(!r.err.contains("Permission denied"), "{}", r.err);
    drop(probe);
    stack.stop();
}

/// A name lookup that a daemon answers for the command goes off the host with a name the
/// command chose (nscd asks DNS, sssd a directory server, resolved its upstream servers):
/// a message sent where inspect sends none. Listeners stand where nscd and sssd keep
/// their sockets; `getent hosts` and `getent passwd` through the gate reach neither, and
/// `resolvectl query` is not judged a read. Each listener's place is made for the test
/// and removed whatever the outcome; a machine where nscd or sssd run fails the test.
#[test]
fn no_name_service_carries_a_chosen_name_off_the_host_from_inspect() {
    require_root("the name service test");
    struct Remove(Vec<std::path::PathBuf>);
    impl Drop for Remove {
        fn drop(&mut self) {
            for p in self.0.iter().rev() {
                let _ = std::fs::remove_file(p);
                let _ = std::fs::remove_dir(p);
            }
        }
    }
    let mut made = Remove(Vec::new());
    let mut listeners = Vec::new();
    for (dir, sock) in [("/run/nscd", "socket"), ("/var/lib/sss/pipes", "nss")] {
        let dir = std::path::Path::new(dir);
        let path = dir.join(sock);
        assert!(
            !path.exists(),
            "{} exists: a name service daemon runs on this machine",
            path.display()
        );
        let mut missing = Vec::new();
        let mut d = dir;
        while !d.exists() {
            missing.push(d.to_path_buf());
            d = d.parent().unwrap();
        }
        for m in missing.iter().rev() {
            std::fs::create_dir(m).unwrap();
            std::fs::set_permissions(m, std::fs::Permissions::from_mode(0o755)).unwrap();
            made.0.push(m.clone());
        }
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        made.0.push(path.clone());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        // The host's own processes (the daemons) look names up too: each caller is
        // answered at once by the connection's end (glibc then reads the files) and its
        // uid kept; a launch's uid is in execd's range.
        let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u32>::new()));
        let into = heard.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let cred =
                    nix::sys::socket::getsockopt(&c, nix::sys::socket::sockopt::PeerCredentials);
                into.lock()
                    .unwrap()
                    .push(cred.map_or(u32::MAX, |c| c.uid()));
            }
        });
        listeners.push((path, heard));
    }
    let stack = StackBuilder::new().start();
    let mut admin = stack.admin();
    let mut agent = admin.token(&["agent"]);
    for cmd in [
        "getent hosts leak.argos-test.invalid",
        "getent passwd leak-argos-test",
    ] {
        let r = agent.post(
            "/api/agent/run",
            serde_json::json!({"command": cmd, "place": "inspect", "purpose": "look"}),
        );
        assert_eq!(r.status, 200, "{cmd}: {r:?}");
        let id = r.json()["execution"]["id"].as_str().unwrap().to_string();
        agent.ended(&id);
    }
    const LAUNCH_UIDS: std::ops::Range<u32> = 1_900_000_000..1_900_065_536;
    for (path, heard) in &listeners {
        let heard = heard.lock().unwrap().clone();
        assert!(
            !heard
                .iter()
                .any(|u| LAUNCH_UIDS.contains(u) || *u == u32::MAX),
            "{}: a launch was heard (uids {heard:?})",
            path.display()
        );
    }
    let r = agent.post(
        "/api/agent/run",
        serde_json::json!({"command": "resolvectl query leak.argos-test.invalid", "place": "inspect", "purpose": "look"}),
    );
    assert_eq!(r.status, 400, "{r:?}");
    drop(made);
    stack.stop();
}
