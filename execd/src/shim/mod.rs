//! The per-launch shim: a freshly exec'd, single-threaded process (no async runtime) that
//! sets up containment, runs the workload, keeps its output and writes its result. It is
//! its own session, so it outlives an execd restart; execd re-reads its launch dir.
//!
//! Process tree of one launch:
//!
//! ```text
//! argos-shim (host PID ns; holds the pipes, writes the launch dir)
//!  └─ init   (PID 1 of a new PID namespace; private mounts, net, ipc, uts; reaps, forwards
//!      │      TERM/INT/HUP, and kills everything left when the workload ends)
//!      └─ workload (rlimits → landlock → capabilities dropped → no_new_privs → seccomp →
//!                   read-back → exec)
//! ```
//!
//! The setup sequence is mirrored, step by step, in docs/containment.md. This module
//! prepares and forks; `tree` runs inside the launch (init, workload); `supervise` keeps
//! the output, the clock and the result.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::sched::CloneFlags;
use nix::sys::signal::{SigSet, Signal, kill};
use nix::unistd::{ForkResult, Pid};
use serde::{Deserialize, Serialize};

mod supervise;
mod tree;

use crate::cgroup::Cgroups;
use crate::contain::{self, Namespaces};
use crate::spec::{
    DimReport, DimState, Dimension, LaunchResult, LaunchSpec, LaunchStatus, Need, StreamTotals,
    Teardown, files, now_ms, write_atomic, write_json_atomic,
};
use crate::sys::{proc, raw};

/// Exit code of a workload stopped before exec because containment did not hold.
const EXIT_CONTAINMENT: i32 = 125;
/// Exit code of a workload whose exec failed.
const EXIT_EXEC: i32 = 127;
/// One message on the setup channel (a CLOEXEC pipe: EOF means exec happened).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SetupMsg {
    /// init's notes on what it could not set up.
    Init { notes: Vec<String> },
    /// The workload's read-back verdict, sent just before exec.
    Report {
        dims: Vec<DimReport>,
        missing: Vec<Dimension>,
    },
    /// Something failed between fork and exec.
    Failed { error: String },
}

/// Entry point of `argos-shim <launch-dir>`. Exit code: 0 when a result was written.
pub fn main() -> i32 {
    // Sanitise first: nothing inherited from execd beyond stdio, default signal actions.
    let _ = raw::close_fds_from(3);
    raw::reset_signal_dispositions();
    let _ = SigSet::all().thread_unblock();
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: argos-shim LAUNCH_DIR");
        return 2;
    };
    let spec: LaunchSpec = match std::fs::read(dir.join(files::SPEC))
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "argos-shim: reading {}: {e}",
                dir.join(files::SPEC).display()
            );
            return 2;
        }
    };
    // Own session: execd's process group and terminal signals no longer reach us.
    let _ = nix::unistd::setsid();
    if let Ok(me) = proc::identity(std::process::id() as i32) {
        let _ = write_json_atomic(&dir.join(files::SHIM), &me);
    }
    let result = run(&dir, &spec);
    if let Err(e) = write_json_atomic(&dir.join(files::RESULT), &result) {
        eprintln!("argos-shim: writing result: {e}");
        return 1;
    }
    // The exit marker comes only after the result is durable.
    if let Err(e) = write_atomic(&dir.join(files::EXIT), b"") {
        eprintln!("argos-shim: writing exit marker: {e}");
        return 1;
    }
    0
}

struct Pipes {
    out_r: OwnedFd,
    out_w: OwnedFd,
    err_r: OwnedFd,
    err_w: OwnedFd,
    setup_r: OwnedFd,
    setup_w: OwnedFd,
    status_r: OwnedFd,
    status_w: OwnedFd,
    stdin: OwnedFd,
}

fn pipes(dir: &Path, spec: &LaunchSpec) -> Result<Pipes, String> {
    let p = || nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe2: {e}"));
    let (out_r, out_w) = p()?;
    let (err_r, err_w) = p()?;
    // Bigger pipes: fewer, larger writes and reads for chatty workloads (best effort: the
    // kernel caps it at /proc/sys/fs/pipe-max-size).
    for fd in [&out_w, &err_w] {
        let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(1024 * 1024));
    }
    let (setup_r, setup_w) = p()?;
    let (status_r, status_w) = p()?;
    let stdin_path = if spec.stdin {
        dir.join(files::STDIN)
    } else {
        PathBuf::from("/dev/null")
    };
    let stdin =
        File::open(&stdin_path).map_err(|e| format!("opening {}: {e}", stdin_path.display()))?;
    Ok(Pipes {
        out_r,
        out_w,
        err_r,
        err_w,
        setup_r,
        setup_w,
        status_r,
        status_w,
        stdin: stdin.into(),
    })
}

fn failed_before_start(
    spec: &LaunchSpec,
    started: i64,
    status: LaunchStatus,
    error: String,
) -> LaunchResult {
    LaunchResult {
        status,
        exit_code: None,
        signal: None,
        started_at_ms: started,
        ended_at_ms: now_ms(),
        report: Dimension::ALL
            .iter()
            .map(|d| DimReport {
                dimension: *d,
                state: if spec.plan.need(*d) == Need::Off {
                    DimState::NotRequested
                } else {
                    DimState::Unavailable
                },
                detail: "launch did not start".into(),
            })
            .collect(),
        stdout: StreamTotals::default(),
        stderr: StreamTotals::default(),
        teardown: Teardown {
            complete: true,
            survivors: Vec::new(),
        },
        error: Some(error),
    }
}

/// Everything the forked children need (computed before fork: no allocation-heavy work
/// or file scanning happens between fork and exec that could be done before).
struct Prepared {
    host_ns: Namespaces,
    filters: Option<Vec<seccompiler::BpfProgram>>,
    /// An empty mode-000 file in the launch dir, bound over denied files.
    masked_file: PathBuf,
    writable: Vec<PathBuf>,
    program: std::ffi::CString,
    argv: Vec<std::ffi::CString>,
    env: Vec<std::ffi::CString>,
    pidns: bool,
    /// `/argos/<id>` when the launch has cgroup limits: the workload checks it is inside.
    cgroup_marker: Option<String>,
    /// The denied paths as the host resolves them (symlinks followed), outermost only.
    denied: Vec<PathBuf>,
}

fn run(dir: &Path, spec: &LaunchSpec) -> LaunchResult {
    let started = now_ms();
    let plan = &spec.plan;
    let filters = if plan.wants(Dimension::Syscalls) {
        match contain::seccomp_filters() {
            Ok(f) => Some(f),
            Err(e) => {
                return failed_before_start(
                    spec,
                    started,
                    LaunchStatus::ContainmentUnavailable,
                    format!("seccomp: {e}"),
                );
            }
        }
    } else {
        None
    };
    let mut writable = plan.writable.clone();
    if plan.wants(Dimension::Filesystem) {
        writable.push(PathBuf::from("/tmp"));
    }
    let env_path = spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let program = match resolve_program(&spec.argv[0], &env_path) {
        Ok(p) => p,
        Err(e) => return failed_before_start(spec, started, LaunchStatus::Failed, e),
    };
    let cstr = |s: &str| std::ffi::CString::new(s).map_err(|_| format!("NUL byte in {s:?}"));
    let argv: Result<Vec<_>, _> = spec.argv.iter().map(|a| cstr(a)).collect();
    let env: Result<Vec<_>, _> = spec
        .env
        .iter()
        .map(|(k, v)| cstr(&format!("{k}={v}")))
        .collect();
    let (Ok(argv), Ok(env), Ok(program)) = (argv, env, cstr(&program.display().to_string())) else {
        return failed_before_start(
            spec,
            started,
            LaunchStatus::Failed,
            "NUL byte in argv or env".into(),
        );
    };
    let prepared = Prepared {
        host_ns: Namespaces::of("self"),
        filters,
        masked_file: dir.join("masked"),
        writable,
        program,
        argv,
        env,
        pidns: false,
        cgroup_marker: None,
        denied: resolve_denied(&plan.denied),
    };
    if plan.wants(Dimension::Filesystem) {
        use std::os::unix::fs::PermissionsExt;
        let made = File::create(&prepared.masked_file).and_then(|_| {
            std::fs::set_permissions(
                &prepared.masked_file,
                std::fs::Permissions::from_mode(0o000),
            )
        });
        if let Err(e) = made {
            return failed_before_start(
                spec,
                started,
                LaunchStatus::Failed,
                format!("creating the mask file: {e}"),
            );
        }
    }
    let pipes = match pipes(dir, spec) {
        Ok(p) => p,
        Err(e) => return failed_before_start(spec, started, LaunchStatus::Failed, e),
    };
    // A PID namespace applies to children: unshare here, and the next fork is its init.
    let mut prepared = prepared;
    let mut init_notes = Vec::new();
    if plan.wants(Dimension::ProcessTree) {
        match nix::sched::unshare(CloneFlags::CLONE_NEWPID) {
            Ok(()) => prepared.pidns = true,
            Err(e) => init_notes.push(format!("process_tree: unshare(CLONE_NEWPID): {e}")),
        }
    }
    // Whole-tree limits: init joins the groups first thing, so everything below it is in.
    let cgroups = if plan.wants(Dimension::Resources)
        && (plan.cgroup_memory_bytes.is_some() || plan.cgroup_pids.is_some())
    {
        let (cg, notes) = Cgroups::create(&spec.id, plan.cgroup_memory_bytes, plan.cgroup_pids);
        init_notes.extend(notes);
        cg
    } else {
        Cgroups::default()
    };
    if cgroups.limits_anything() {
        prepared.cgroup_marker = Some(format!("/argos/{}", spec.id));
    }
    let init_pid = match raw::fork_single_threaded() {
        Ok(ForkResult::Child) => {
            init_notes.extend(cgroups.add_self());
            tree::init(spec, &prepared, pipes, init_notes)
        }
        Ok(ForkResult::Parent { child }) => child,
        Err(e) => return failed_before_start(spec, started, LaunchStatus::Failed, e.to_string()),
    };
    let mut result = supervise::supervise(dir, spec, started, init_pid, pipes);
    // The tree is gone with init (PID namespace); the cgroup proves it, or names who is not.
    if cgroups.limits_anything() || !cgroups.members().is_empty() {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut left = cgroups.members();
        while !left.is_empty() && Instant::now() < deadline {
            cgroups.kill();
            for pid in &left {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(5));
            left = cgroups.members();
        }
        if !left.is_empty() {
            result.teardown.complete = false;
            result.teardown.survivors = left.iter().map(|p| proc::describe(*p)).collect();
            if result.status != LaunchStatus::ContainmentUnavailable {
                result.status = LaunchStatus::TeardownFailed;
            }
        }
        if let Some(r) = result
            .report
            .iter_mut()
            .find(|r| r.dimension == Dimension::Resources)
        {
            r.detail = format!("{}; cgroup: {}", r.detail, cgroups.limited.join(", "));
        }
    }
    cgroups.remove();
    result
}

/// Finds the program to exec the way a shell would, with the workload's PATH.
fn resolve_program(arg0: &str, path: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if arg0.contains('/') {
        return Ok(PathBuf::from(arg0));
    }
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(arg0))
        .find(|p| is_exec(p))
        .ok_or_else(|| format!("{arg0}: command not found"))
}

fn send(fd: &OwnedFd, msg: &SetupMsg) {
    if let Ok(mut line) = serde_json::to_vec(msg) {
        line.push(b'\n');
        let _ = nix::unistd::write(fd, &line);
    }
}

/// Resolves denied paths through symlinks (`/var/run` → `/run`; a distribution's `/home`
/// → `/var/home`), drops missing ones and those inside another denied path.
fn resolve_denied(denied: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = denied
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    out.sort();
    out.dedup();
    let all = out.clone();
    out.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
    out
}
