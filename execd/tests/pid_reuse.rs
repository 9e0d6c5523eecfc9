//! PID reuse: a recorded identity whose pid now belongs to another process is FOREIGN and
//! is never signalled. The reuse is forced inside a fresh PID namespace (via
//! `ns_last_pid`), where this test controls pid allocation; it re-runs itself there.

use std::process::Command;
use std::time::Duration;

use argos_execd::sys::proc::{Verdict, identity, probe, signal_owned};

const INNER: &str = "ARGOS_PID_REUSE_INNER";

#[test]
fn a_reused_pid_is_foreign_and_never_signalled() {
    if std::env::var_os(INNER).is_some() {
        return inner();
    }
    assert!(
        nix::unistd::geteuid().is_root(),
        "the PID-reuse test needs root (CI runs as root)"
    );
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(&exe)
        .args([
            "--exact",
            "a_reused_pid_is_foreign_and_never_signalled",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(INNER, "1")
        .output()
        .expect("unshare (util-linux) is needed");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "inner run failed:\n{text}");
    assert!(
        text.contains("pid reuse verified"),
        "the inner run did not reach its checks:\n{text}"
    );
}

fn spawn_sleeper() -> std::process::Child {
    Command::new("sleep").arg("30").spawn().unwrap()
}

fn inner() {
    // This binary is PID 1 of the new namespace; its children get pids from 2 up.
    let mut first = spawn_sleeper();
    let pid = first.id() as i32;
    let recorded = identity(pid).unwrap();
    assert_eq!(probe(&recorded), Verdict::Owned);
    first.kill().unwrap();
    first.wait().unwrap();
    assert_eq!(probe(&recorded), Verdict::Gone);
    // Start times tick at 100 Hz: make sure the next process starts in a later tick.
    std::thread::sleep(Duration::from_millis(30));
    // The next pid handed out is ns_last_pid + 1: hand out the recorded pid again.
    std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
    let mut second = spawn_sleeper();
    assert_eq!(
        second.id() as i32,
        pid,
        "ns_last_pid did not force pid reuse"
    );
    assert_eq!(
        probe(&recorded),
        Verdict::Foreign,
        "a reused pid must be FOREIGN"
    );
    assert_eq!(
        signal_owned(&recorded, libc::SIGKILL),
        Err(Verdict::Foreign)
    );
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        second.try_wait().unwrap().is_none(),
        "the stranger was signalled"
    );
    second.kill().unwrap();
    second.wait().unwrap();
    println!("pid reuse verified");
}
