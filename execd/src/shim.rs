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
//! The setup sequence is mirrored, step by step, in docs/containment.md.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::fcntl::OFlag;
use nix::sched::CloneFlags;
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};
use serde::{Deserialize, Serialize};

use crate::cgroup::Cgroups;
use crate::contain::{self, Namespaces, Readback};
use crate::spec::{
    DimReport, DimState, Dimension, LaunchResult, LaunchSpec, LaunchStatus, Need, NetworkMode,
    StreamTotals, Teardown, files,
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
        let _ = write_json_atomic(&dir.join(files::SHIM), &me, Durability::Atomic);
    }
    let result = run(&dir, &spec);
    if let Err(e) = write_json_atomic(&dir.join(files::RESULT), &result, Durability::Atomic) {
        eprintln!("argos-shim: writing result: {e}");
        return 1;
    }
    // The exit marker comes only after the result is durable.
    if let Err(e) = write_atomic(&dir.join(files::EXIT), b"", Durability::Atomic) {
        eprintln!("argos-shim: writing exit marker: {e}");
        return 1;
    }
    0
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// How hard a file write tries to survive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Readers see all of it or nothing (write, rename). Survives any process dying.
    Atomic,
    /// Also on disk before returning (fsync of file and directory): survives power loss.
    /// Costs milliseconds per call; launches use `Atomic` (see ARCHITECTURE.md).
    Synced,
}

/// Writes a file so that readers see either nothing or all of it.
pub fn write_atomic(path: &Path, bytes: &[u8], durability: Durability) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if durability == Durability::Synced {
            f.sync_all()?;
        }
    }
    std::fs::rename(&tmp, path)?;
    if durability == Durability::Synced
        && let Some(parent) = path.parent()
        && let Ok(d) = File::open(parent)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

pub fn write_json_atomic<T: Serialize>(
    path: &Path,
    v: &T,
    durability: Durability,
) -> std::io::Result<()> {
    write_atomic(
        path,
        &serde_json::to_vec_pretty(v).map_err(std::io::Error::other)?,
        durability,
    )
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
            init(spec, &prepared, pipes, init_notes)
        }
        Ok(ForkResult::Parent { child }) => child,
        Err(e) => return failed_before_start(spec, started, LaunchStatus::Failed, e.to_string()),
    };
    let mut result = supervise(dir, spec, started, init_pid, pipes);
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

/// The launch's init: PID 1 of its namespace (when the host allows one).
fn init(spec: &LaunchSpec, prep: &Prepared, p: Pipes, mut notes: Vec<String>) -> ! {
    let plan = &spec.plan;
    drop((p.out_r, p.err_r, p.setup_r, p.status_r));
    // If the shim dies, so does the tree (and the kernel kills the namespace with us).
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    if !prep.pidns {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
    // Namespaces for everything below us: mounts, IPC, hostname, and network.
    let mut ns = vec![
        (CloneFlags::CLONE_NEWIPC, "ipc", None),
        (CloneFlags::CLONE_NEWUTS, "uts", None),
    ];
    if plan.wants(Dimension::Filesystem) {
        ns.push((
            CloneFlags::CLONE_NEWNS,
            "mount",
            Some(Dimension::Filesystem),
        ));
    }
    if plan.wants(Dimension::Network) {
        ns.push((
            CloneFlags::CLONE_NEWNET,
            "network",
            Some(Dimension::Network),
        ));
    }
    let mut mnt_ok = false;
    let mut net_ok = false;
    for (flag, name, _) in ns {
        match nix::sched::unshare(flag) {
            Ok(()) => {
                mnt_ok |= flag == CloneFlags::CLONE_NEWNS;
                net_ok |= flag == CloneFlags::CLONE_NEWNET;
            }
            Err(e) => notes.push(format!("{name} namespace: {e}")),
        }
    }
    // Hold the mask file by fd too: it lives in the launch dir, which the mounts below
    // may cover (a private /tmp, a masked state dir).
    let mask_source = File::open(&prep.masked_file)
        .map(|f| {
            use std::os::fd::AsRawFd;
            let path = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
            (f, path)
        })
        .ok();
    if mnt_ok {
        use nix::mount::{MsFlags, mount};
        let none: Option<&str> = None;
        if let Err(e) = mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none) {
            notes.push(format!("making mounts private: {e}"));
        }
        if prep.pidns
            && let Err(e) = mount(
                Some("proc"),
                "/proc",
                Some("proc"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                none,
            )
        {
            notes.push(format!("mounting /proc for the PID namespace: {e}"));
        }
        // A private /tmp. A workspace that lives under the host's /tmp stays reachable:
        // hold it by fd, mount over /tmp, and bind it back at the same path.
        let held = if spec.workspace.starts_with("/tmp") {
            File::open(&spec.workspace).ok()
        } else {
            None
        };
        if let Err(e) = mount(
            Some("tmpfs"),
            "/tmp",
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=1777,size=268435456"),
        ) {
            notes.push(format!("mounting a private /tmp: {e}"));
        } else if let Some(fd) = held {
            use std::os::fd::AsRawFd;
            let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
            let bound = std::fs::create_dir_all(&spec.workspace)
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    mount(
                        Some(source.as_str()),
                        &spec.workspace,
                        none,
                        MsFlags::MS_BIND,
                        none,
                    )
                    .map_err(|e| e.to_string())
                });
            if let Err(e) = bound {
                notes.push(format!("keeping the workspace under the private /tmp: {e}"));
            }
        }
    }
    // Denied paths disappear from the view: an empty, mode-000 tmpfs over a directory, an
    // empty mode-000 file over a file. Landlock then grants reading "/" as one rule.
    let mut masked_all = mnt_ok;
    if mnt_ok {
        for path in &prep.denied {
            let source = mask_source
                .as_ref()
                .map(|(_, p)| p.as_path())
                .unwrap_or(&prep.masked_file);
            if let Err(e) = mask(path, source) {
                masked_all = false;
                notes.push(format!("filesystem: masking {}: {e}", path.display()));
            }
        }
    }
    if net_ok
        && plan.network_mode == NetworkMode::Loopback
        && let Err(e) = raw::loopback_up()
    {
        notes.push(format!("bringing up lo: {e}"));
    }
    let _ = nix::unistd::sethostname("argos");
    send(&p.setup_w, &SetupMsg::Init { notes });
    let readable = if masked_all {
        vec![PathBuf::from("/")]
    } else {
        // No private mounts: carve the denied paths out of the landlock rules instead.
        contain::readable_roots(&prep.denied)
    };
    // Signals arrive by sigwait, never asynchronously.
    let mut mask = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        mask.add(s);
    }
    let _ = mask.thread_block();
    let workload = match raw::fork_single_threaded() {
        Ok(ForkResult::Child) => {
            workload(spec, prep, &readable, p.stdin, p.out_w, p.err_w, p.setup_w)
        }
        Ok(ForkResult::Parent { child }) => child,
        Err(e) => {
            send(
                &p.setup_w,
                &SetupMsg::Failed {
                    error: e.to_string(),
                },
            );
            raw::exit_now(EXIT_EXEC);
        }
    };
    drop((p.stdin, p.out_w, p.err_w, p.setup_w));
    let mut outcome: Option<WaitStatus> = None;
    loop {
        match mask.wait() {
            Ok(Signal::SIGCHLD) => {}
            Ok(sig) => {
                // Forward to the whole tree: inside a PID namespace -1 is "everyone but me".
                let target = if prep.pidns {
                    Pid::from_raw(-1)
                } else {
                    Pid::from_raw(-workload.as_raw())
                };
                let _ = kill(target, sig);
                continue;
            }
            Err(_) => continue,
        }
        // Reap everything that has exited.
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => break,
                Ok(ws) => {
                    if ws.pid() == Some(workload) {
                        outcome = Some(ws);
                        kill_rest(prep.pidns, workload);
                    }
                }
                Err(nix::errno::Errno::ECHILD) => {
                    let msg = match outcome {
                        Some(WaitStatus::Exited(_, code)) => format!("exit {code}\n"),
                        Some(WaitStatus::Signaled(_, sig, _)) => format!("signal {}\n", sig as i32),
                        _ => "unknown\n".into(),
                    };
                    let _ = nix::unistd::write(&p.status_w, msg.as_bytes());
                    raw::exit_now(0);
                }
                Err(_) => break,
            }
        }
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

/// Hides one denied path in the current mount namespace.
fn mask(path: &Path, masked_file: &Path) -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.to_string()),
    };
    let none: Option<&str> = None;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    if meta.is_dir() {
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            flags | MsFlags::MS_RDONLY,
            Some("mode=000,size=4k"),
        )
        .map_err(|e| e.to_string())
    } else {
        mount(Some(masked_file), path, none, MsFlags::MS_BIND, none).map_err(|e| e.to_string())?;
        mount(
            none,
            path,
            none,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | flags,
            none,
        )
        .map_err(|e| e.to_string())
    }
}

/// SIGKILL to a process and everything below it, deepest first (collected through
/// /proc children lists; with a PID namespace, killing init alone would take them all).
fn kill_tree(root: Pid) {
    let mut all = vec![root.as_raw()];
    let mut i = 0;
    while i < all.len() {
        all.extend(proc::children(all[i]));
        i += 1;
    }
    for pid in all.into_iter().rev() {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// When the workload is done, nothing it started may outlive it.
fn kill_rest(pidns: bool, workload: Pid) {
    if pidns {
        let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
        return;
    }
    // Without a PID namespace: the group, then every child we (as subreaper) inherited.
    let _ = kill(Pid::from_raw(-workload.as_raw()), Signal::SIGKILL);
    for child in proc::children(std::process::id() as i32) {
        let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
    }
}

/// The workload's last steps before exec, in the order the design fixes.
fn workload(
    spec: &LaunchSpec,
    prep: &Prepared,
    readable: &[PathBuf],
    stdin: OwnedFd,
    out: OwnedFd,
    err: OwnedFd,
    setup: OwnedFd,
) -> ! {
    let plan = &spec.plan;
    let fail = |error: String| -> ! {
        send(&setup, &SetupMsg::Failed { error });
        raw::exit_now(EXIT_EXEC);
    };
    let _ = SigSet::all().thread_unblock();
    if nix::unistd::dup2_stdin(&stdin).is_err()
        || nix::unistd::dup2_stdout(&out).is_err()
        || nix::unistd::dup2_stderr(&err).is_err()
    {
        fail("dup2 of stdio failed".into());
    }
    drop((stdin, out, err));
    let _ = nix::unistd::setsid();
    if let Err(e) = nix::unistd::chdir(&spec.cwd) {
        fail(format!("cwd {}: {e}", spec.cwd.display()));
    }
    // 1. Resources.
    let mut rlimits_set = false;
    if plan.wants(Dimension::Resources) {
        match contain::set_rlimits(&plan.rlimits) {
            Ok(()) => rlimits_set = true,
            Err(e) if plan.need(Dimension::Resources) == Need::Required => fail(e),
            Err(_) => {}
        }
    }
    // 2. Filesystem (landlock).
    let mut landlock_ok = contain::LandlockStatus::default();
    if plan.wants(Dimension::Filesystem) {
        match contain::apply_landlock(readable, &prep.writable) {
            Ok(full) => landlock_ok = full,
            Err(e) if plan.need(Dimension::Filesystem) == Need::Required => {
                fail(format!("landlock: {e}"))
            }
            Err(_) => {}
        }
    }
    // 3. Privileges: capabilities, run-as, no_new_privs (seccomp needs the latter too).
    if plan.wants(Dimension::Privileges)
        && let Err(e) = contain::drop_privileges(plan.run_as)
        && plan.need(Dimension::Privileges) == Need::Required
    {
        fail(e);
    }
    if (plan.wants(Dimension::Privileges) || plan.wants(Dimension::Syscalls))
        && let Err(e) = contain::set_no_new_privs()
    {
        fail(e);
    }
    // 4. Syscalls: last, so the setup above is not itself filtered.
    if let Some(filters) = &prep.filters
        && let Err(e) = contain::load_seccomp(filters)
        && plan.need(Dimension::Syscalls) == Need::Required
    {
        fail(e);
    }
    // 5. Prove it: read the state back from the kernel and judge each dimension.
    let rb = Readback::take(
        landlock_ok,
        rlimits_set.then_some(&plan.rlimits),
        prep.cgroup_marker.as_deref(),
    );
    let mut dims = Vec::new();
    let mut missing = Vec::new();
    for d in Dimension::ALL {
        let need = plan.need(d);
        if need == Need::Off {
            dims.push(DimReport {
                dimension: d,
                state: DimState::NotRequested,
                detail: "not requested by the profile".into(),
            });
            continue;
        }
        let (holds, detail) = if plan.disabled.contains(&d) {
            (false, "disabled on this host".to_string())
        } else {
            rb.holds(d, plan, &prep.host_ns)
        };
        if !holds && need == Need::Required {
            missing.push(d);
        }
        dims.push(DimReport {
            dimension: d,
            state: if holds {
                DimState::Enforced
            } else {
                DimState::Unavailable
            },
            detail,
        });
    }
    let refuse = !missing.is_empty();
    send(&setup, &SetupMsg::Report { dims, missing });
    if refuse {
        raw::exit_now(EXIT_CONTAINMENT);
    }
    // 6. Exec. On success the CLOEXEC setup pipe closes: the shim reads EOF.
    let e = nix::unistd::execve(&prep.program, &prep.argv, &prep.env).unwrap_err();
    fail(format!("exec {}: {e}", prep.program.to_string_lossy()));
}

/// One output stream: a capped log file plus an in-memory tail.
struct Stream {
    fd: Option<OwnedFd>,
    log: File,
    total: u64,
    logged: u64,
    cap: u64,
    tail: std::collections::VecDeque<u8>,
    tail_cap: usize,
}

impl Stream {
    fn new(fd: OwnedFd, log: File, cap: u64, tail_cap: u64) -> Stream {
        Stream {
            fd: Some(fd),
            log,
            total: 0,
            logged: 0,
            cap,
            tail: Default::default(),
            tail_cap: tail_cap as usize,
        }
    }

    /// Reads what is there; false at EOF.
    fn pump(&mut self, buf: &mut [u8]) -> bool {
        let Some(fd) = &self.fd else { return false };
        match nix::unistd::read(fd, buf) {
            Ok(0) => {
                self.fd = None;
                false
            }
            Ok(n) => {
                let chunk = &buf[..n];
                self.total += n as u64;
                let room = self.cap.saturating_sub(self.logged) as usize;
                if room > 0 {
                    let keep = &chunk[..room.min(n)];
                    if self.log.write_all(keep).is_ok() {
                        self.logged += keep.len() as u64;
                    }
                }
                let skip = n.saturating_sub(self.tail_cap);
                self.tail.extend(&chunk[skip..]);
                while self.tail.len() > self.tail_cap {
                    self.tail.pop_front();
                }
                true
            }
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => true,
            Err(_) => {
                self.fd = None;
                false
            }
        }
    }
}

fn supervise(dir: &Path, spec: &LaunchSpec, started: i64, init_pid: Pid, p: Pipes) -> LaunchResult {
    drop((p.out_w, p.err_w, p.setup_w, p.status_w, p.stdin));
    if let Ok(id) = proc::identity(init_pid.as_raw()) {
        let _ = write_json_atomic(&dir.join(files::INIT), &id, Durability::Atomic);
    }
    // Setup: read the channel to EOF (exec closed it) or to the workload's refusal.
    let mut setup_error = None;
    let mut report: Vec<DimReport> = Vec::new();
    let mut missing = Vec::new();
    let mut init_notes = Vec::new();
    for line in BufReader::new(File::from(p.setup_r)).lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<SetupMsg>(&line) {
            Ok(SetupMsg::Init { notes }) => init_notes = notes,
            Ok(SetupMsg::Report { dims, missing: m }) => {
                report = dims;
                missing = m;
            }
            Ok(SetupMsg::Failed { error }) => setup_error = Some(error),
            Err(e) => setup_error = Some(format!("bad setup message: {e}")),
        }
    }
    for note in &init_notes {
        if let Some(r) = report.iter_mut().find(|r| {
            note.starts_with(r.dimension.as_str())
                || note.contains(&format!("{} ", r.dimension.as_str()))
        }) {
            r.detail = format!("{}; {note}", r.detail);
        }
    }
    let _ = write_json_atomic(&dir.join(files::REPORT), &report, Durability::Atomic);

    let open_log = |name: &str| {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(dir.join(name))
    };
    let (Ok(out_log), Ok(err_log)) = (open_log(files::STDOUT_LOG), open_log(files::STDERR_LOG))
    else {
        let _ = kill(init_pid, Signal::SIGKILL);
        let _ = waitpid(init_pid, None);
        return failed_before_start(
            spec,
            started,
            LaunchStatus::Failed,
            "cannot create log files".into(),
        );
    };
    let mut streams = [
        Stream::new(p.out_r, out_log, spec.log_cap_bytes, spec.tail_bytes),
        Stream::new(p.err_r, err_log, spec.log_cap_bytes, spec.tail_bytes),
    ];
    let clock = spec.timeout_ms > 0 && spec.plan.wants(Dimension::WallClock);
    let deadline = clock.then(|| Instant::now() + Duration::from_millis(spec.timeout_ms));
    let mut timed_out = false;
    let mut kill_at: Option<Instant> = None;
    let mut buf = vec![0u8; 1024 * 1024];
    while streams.iter().any(|s| s.fd.is_some()) {
        let now = Instant::now();
        if let Some(d) = deadline
            && !timed_out
            && now >= d
        {
            timed_out = true;
            let _ = kill(init_pid, Signal::SIGTERM);
            kill_at = Some(now + Duration::from_millis(spec.grace_ms));
        }
        if let Some(k) = kill_at
            && now >= k
        {
            kill_tree(init_pid);
            kill_at = None;
        }
        let wake = [deadline.filter(|_| !timed_out), kill_at]
            .into_iter()
            .flatten()
            .min();
        let timeout_ms = wake
            .map(|w| w.saturating_duration_since(now).as_millis().min(60_000) as u16 as i32)
            .unwrap_or(1000);
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut fds = Vec::new();
        let mut which = Vec::new();
        for (i, s) in streams.iter().enumerate() {
            if let Some(fd) = &s.fd {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
                which.push(i);
            }
        }
        let ready = poll(
            &mut fds,
            PollTimeout::try_from(timeout_ms.max(1)).unwrap_or(PollTimeout::MAX),
        );
        let revents: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        if ready.is_ok() {
            for (k, i) in which.into_iter().enumerate() {
                if revents[k] {
                    streams[i].pump(&mut buf);
                }
            }
        }
    }
    // Both streams closed: the tree is normally gone or closing and init exits once it
    // has reaped it. The clock still runs: a workload that closed its output and kept
    // running is timed out like any other. A pidfd wakes us the moment init exits.
    let pidfd = raw::pidfd_open(init_pid.as_raw()).ok();
    let init_status = loop {
        let now = Instant::now();
        if let Some(d) = deadline
            && !timed_out
            && now >= d
        {
            timed_out = true;
            let _ = kill(init_pid, Signal::SIGTERM);
            kill_at = Some(now + Duration::from_millis(spec.grace_ms));
        }
        if let Some(k) = kill_at
            && now >= k
        {
            kill_tree(init_pid);
            kill_at = None;
        }
        match waitpid(init_pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                let wake = [deadline.filter(|_| !timed_out), kill_at]
                    .into_iter()
                    .flatten()
                    .min();
                let ms = wake.map_or(60_000, |w| {
                    w.saturating_duration_since(now)
                        .as_millis()
                        .clamp(1, 60_000) as i32
                });
                match &pidfd {
                    Some(fd) => {
                        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
                        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
                        let _ = poll(
                            &mut fds,
                            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
                        );
                    }
                    None => std::thread::sleep(Duration::from_millis(ms.min(5) as u64)),
                }
            }
            Ok(ws) => break Some(ws),
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break None,
        }
    };
    let mut status_line = String::new();
    let _ = File::from(p.status_r).read_to_string(&mut status_line);
    let (mut exit_code, mut signal) = parse_status(&status_line);
    if exit_code.is_none() && signal.is_none() {
        // init itself was killed (timeout escalation): the whole namespace died with it.
        if let Some(WaitStatus::Signaled(_, sig, _)) = init_status {
            signal = Some(sig as i32);
        }
    }
    let kill_requested = dir.join(files::KILL_REQUESTED).exists();
    let mut error = setup_error;
    let status = if !missing.is_empty() {
        exit_code = None;
        signal = None;
        let names: Vec<&str> = missing.iter().map(|d| d.as_str()).collect();
        error = Some(format!(
            "required containment unavailable: {}",
            names.join(", ")
        ));
        LaunchStatus::ContainmentUnavailable
    } else if error.is_some() {
        exit_code = Some(EXIT_EXEC);
        signal = None;
        LaunchStatus::Failed
    } else if timed_out {
        exit_code = Some(124);
        LaunchStatus::TimedOut
    } else if let Some(sig) = signal {
        exit_code = Some(128 + sig);
        if kill_requested {
            LaunchStatus::Killed
        } else {
            LaunchStatus::Failed
        }
    } else if exit_code == Some(0) {
        LaunchStatus::Succeeded
    } else {
        LaunchStatus::Failed
    };
    let [out, err] = streams;
    for (s, name) in [(&out, files::STDOUT_TAIL), (&err, files::STDERR_TAIL)] {
        let (a, b) = s.tail.as_slices();
        let _ = write_atomic(&dir.join(name), &[a, b].concat(), Durability::Atomic);
    }
    LaunchResult {
        status,
        exit_code,
        signal,
        started_at_ms: started,
        ended_at_ms: now_ms(),
        report,
        stdout: StreamTotals {
            total: out.total,
            logged: out.logged,
        },
        stderr: StreamTotals {
            total: err.total,
            logged: err.logged,
        },
        teardown: Teardown {
            complete: init_status.is_some(),
            survivors: Vec::new(),
        },
        error,
    }
}

fn parse_status(line: &str) -> (Option<i32>, Option<i32>) {
    let mut it = line.split_whitespace();
    match (it.next(), it.next().and_then(|v| v.parse().ok())) {
        (Some("exit"), Some(c)) => (Some(c), None),
        (Some("signal"), Some(s)) => (None, Some(s)),
        _ => (None, None),
    }
}
