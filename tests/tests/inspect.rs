//! The `inspect` profile through the real stack: what an agent sees of the host (its
//! processes, listeners, interfaces, host name, disks), compared with the host itself, and
//! what it cannot do there (read secrets, change files, signal, mount, talk over IP).

use argos_proto::exec::v1::{DimensionState, ExecutionStatus, RunRequest};
use argos_tests::runs::{ran, run};
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
    let _ = outside.kill();
    let _ = outside.wait();
    stack.stop();
}
