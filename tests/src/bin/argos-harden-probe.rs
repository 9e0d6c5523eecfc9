//! argos-harden-probe DIR: applies to itself what gatewayd, mcpd and jobd apply at start
//! (`argos_common::harden::apply`, DIR writable), then tries what a compromised daemon
//! would, and prints what each attempt came to as one JSON object.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

fn main() -> ExitCode {
    argos_tests::answer_help(
        "usage: argos-harden-probe DIR\n  harden this process as the unprivileged daemons do (DIR writable), try to escape, print what happened as JSON",
    );
    let Some(dir) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: argos-harden-probe DIR");
        return ExitCode::from(2);
    };
    let applied = match argos_common::harden::apply(std::slice::from_ref(&dir)) {
        Ok(a) => a,
        Err(e) => {
            println!("{}", json!({"applied": null, "error": e}));
            return ExitCode::from(3);
        }
    };
    let outcome = |r: std::io::Result<()>| match r {
        Ok(()) => "ok".to_string(),
        Err(e) => e.raw_os_error().map_or(e.to_string(), |n| {
            nix::errno::Errno::from_raw(n).to_string()
        }),
    };
    let exec = outcome(std::process::Command::new("/bin/true").status().map(|_| ()));
    let write_inside = outcome(std::fs::write(dir.join("inside"), b"x"));
    let write_outside = outcome(std::fs::write(
        std::env::temp_dir().join(format!("argos-harden-{}", std::process::id())),
        b"x",
    ));
    let read_etc = outcome(std::fs::read("/etc/hostname").map(|_| ()));
    let userns = outcome(
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER).map_err(std::io::Error::from),
    );
    // Reading another process's memory (as ptrace would): one byte of pid 1's.
    let mut byte = [0u8; 1];
    let peek = outcome(
        nix::sys::uio::process_vm_readv(
            nix::unistd::Pid::from_raw(1),
            &mut [std::io::IoSliceMut::new(&mut byte)],
            &[nix::sys::uio::RemoteIoVec {
                base: 0x1000,
                len: 1,
            }],
        )
        .map(|_| ())
        .map_err(std::io::Error::from),
    );
    // A call on no list: outside the allow list (`@resources`), so ENOSYS.
    let mut cpus = nix::sched::CpuSet::new();
    let _ = cpus.set(0);
    let affinity = outcome(
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &cpus)
            .map_err(std::io::Error::from),
    );
    // A socket in a family the daemons never use (the kernel's crypto API).
    let alg = outcome(
        nix::sys::socket::socket(
            nix::sys::socket::AddressFamily::Alg,
            nix::sys::socket::SockType::SeqPacket,
            nix::sys::socket::SockFlag::empty(),
            None,
        )
        .map(drop)
        .map_err(std::io::Error::from),
    );
    let tcp = outcome(std::net::TcpListener::bind("127.0.0.1:0").map(drop));
    let thread = outcome(
        std::thread::spawn(|| ())
            .join()
            .map_err(|_| std::io::Error::other("the thread panicked")),
    );
    println!(
        "{}",
        json!({"applied": applied, "exec": exec, "write_inside": write_inside,
               "write_outside": write_outside, "read_etc": read_etc, "userns": userns,
               "peek": peek, "thread": thread, "affinity": affinity,
               "alg_socket": alg, "tcp": tcp})
    );
    ExitCode::SUCCESS
}
