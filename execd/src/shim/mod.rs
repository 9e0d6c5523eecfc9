//! The per-launch shim: a freshly exec'd, single-threaded process (no async runtime) that
//! sets up containment, runs the workload, keeps its output and writes its result. It is
//! its own session, so it outlives an execd restart; execd re-reads its launch dir. It
//! sets up its tree before its launch exists (execd keeps a few standing, `pool.rs`) and
//! runs exactly one launch.
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
//! sets up the standing tree and takes the launch; `tree` runs inside the launch (init, workload); `supervise` keeps
//! the output, the clock and the result.

use std::fs::File;
use std::io::BufRead;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::sys::signal::{SigSet, Signal, kill};
use nix::unistd::{ForkResult, Pid};
use serde::{Deserialize, Serialize};

pub mod follow;
mod mirror;
mod supervise;
mod tree;

use crate::cgroup::Cgroups;
use crate::contain::{self, Namespaces};
use crate::credentials;
use crate::protocol::{ACCEPTED, ShimReady, ShimSetup};
use crate::spec::{
    DimReport, DimState, Dimension, LaunchResult, LaunchSpec, LaunchStatus, Need, Plan,
    StreamTotals, Teardown, files, now_ms, write_atomic, write_json_atomic,
};
use crate::sys::ns::{self, Namespace};
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

/// Entry point of `argos-shim --pool`. Exit code: 0 when a result was written or when no
/// launch was ever assigned.
///
/// The shim sets up its tree before any launch exists, so a launch handed to a waiting
/// shim pays none of it: the control steps of `crate::protocol` — a [`ShimSetup`] line,
/// a [`ShimReady`] answer once the tree stands, then the launch id (EOF instead: execd
/// stopped or drained its pool, and the tree and the shim end), answered [`ACCEPTED`].
#[allow(unsafe_code)]
pub fn main() -> i32 {
    // Sanitise first: nothing inherited from execd beyond stdio, default signal actions.
    // SAFETY: first thing in main: no Rust object owns an fd yet but stdio (0-2).
    let _ = unsafe { raw::close_fds_from(3) };
    raw::reset_signal_dispositions();
    argos_alloc::keep_large_buffers();
    let _ = SigSet::all().thread_unblock();
    let usage = "usage: argos-shim --pool  (setup and launch id on stdin; run by argos-execd)";
    match std::env::args_os().nth(1) {
        Some(a) if a == "--pool" => {}
        Some(a) if a == "--help" || a == "-h" => {
            println!("{usage}");
            return 0;
        }
        _ => {
            eprintln!("{usage}");
            return 2;
        }
    }
    // Own session: execd's process group and terminal signals no longer reach us.
    let _ = ns::new_session();
    // Set up on idle CPU time only: a launch in progress keeps the CPU. Back to normal
    // when the launch comes (init and the workload do the same for themselves).
    let _ = raw::set_sched_idle(true);
    let mut control = std::io::stdin().lock();
    let mut line = String::new();
    let setup: ShimSetup = match control
        .read_line(&mut line)
        .map_err(|e| e.to_string())
        .and_then(|_| serde_json::from_str(&line).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => return answer(&format!("error: bad setup line: {e}")),
    };
    let tree = match Tree::start(&setup) {
        Ok(t) => t,
        Err(e) => return answer(&format!("error: {e}")),
    };
    // A write to execd or a follower that went away must fail, not kill the shim (init,
    // already forked, keeps the default for the workload).
    let _ = raw::ignore_sigpipe();
    let (Ok(shim), Ok(init)) = (
        proc::identity(std::process::id() as i32),
        proc::identity(tree.init.as_raw()),
    ) else {
        tree.end();
        return answer("error: cannot read the shim's or init's identity");
    };
    let ready = serde_json::to_string(&ShimReady { shim, init }).unwrap_or_default();
    if answer(&ready) != 0 {
        tree.end();
        return 1;
    }
    line.clear();
    let id = match control.read_line(&mut line) {
        Ok(n) if n > 0 => {
            let _ = raw::set_sched_idle(false);
            line.trim().to_string()
        }
        // No launch for us: the pool was drained or execd is gone.
        _ => {
            tree.end();
            return 0;
        }
    };
    drop(control);
    // execd's control pipe is done with. Our stdout stays open until the exit marker is
    // written: its EOF tells execd the launch is over.
    let null = File::options().read(true).write(true).open("/dev/null");
    if let Ok(null) = &null {
        let _ = nix::unistd::dup2_stdin(null);
    }
    if id.is_empty() || id.contains('/') || id.starts_with('.') {
        tree.end();
        return 2;
    }
    let dir = setup.launches_dir.join(&id);
    let started = now_ms();
    // Listening before execd hears "ok": a Follow right after Start finds the shim.
    let followers = follow::Followers::listen(&id);
    // execd may be gone already: the launch runs regardless (it is recorded).
    let _ = answer(ACCEPTED);
    let mut cleanup = (Cgroups::default(), None);
    let result = match std::fs::read(dir.join(files::SPEC))
        .map_err(|e| format!("reading the spec: {e}"))
        .and_then(|b| {
            serde_json::from_slice::<LaunchSpec>(&b).map_err(|e| format!("parsing the spec: {e}"))
        }) {
        Ok(spec) if spec.id == id && setup.fits(&spec.plan) => {
            let (result, cgroups, init) = tree.run(&dir, &spec, started, followers);
            cleanup = (cgroups, Some(init));
            result
        }
        Ok(spec) => {
            tree.end();
            failed_before_start(
                &spec,
                started,
                LaunchStatus::Failed,
                "the launch's plan is not the one its shim was set up for".into(),
            )
        }
        Err(e) => {
            tree.end();
            LaunchResult::lost(e)
        }
    };
    if let Err(e) = write_json_atomic(&dir.join(files::RESULT), &result) {
        note(&dir, &format!("writing the result: {e}"));
        return 1;
    }
    // The exit marker comes only after the result is complete.
    if let Err(e) = write_atomic(&dir.join(files::EXIT), b"") {
        note(&dir, &format!("writing the exit marker: {e}"));
        return 1;
    }
    if let Ok(null) = &null {
        let _ = nix::unistd::dup2_stdout(null);
    }
    // Housekeeping after the answer: reap init (the tree below it is already gone), and
    // remove the cgroups (removal can wait milliseconds for the kernel to take them
    // offline; their emptiness was already checked).
    if let Some(init) = cleanup.1 {
        let _ = nix::sys::wait::waitpid(init, None);
    }
    cleanup.0.remove();
    0
}

/// One line to execd on stdout; non-zero if it cannot be delivered.
fn answer(line: &str) -> i32 {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// Something the shim could not do once execd may be gone: kept in the launch dir.
fn note(dir: &Path, msg: &str) {
    use std::io::Write;
    if let Ok(mut f) = File::options()
        .create(true)
        .append(true)
        .open(dir.join("shim.log"))
    {
        let _ = writeln!(f, "argos-shim: {msg}");
    }
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
    /// The launch, from shim to init: one [`Go`] message on a socket pair (a terminal
    /// launch's slave side comes with it, as `SCM_RIGHTS`).
    go_r: OwnedFd,
    go_w: OwnedFd,
    /// Where the writer's input goes once the launch is handed over: a terminal
    /// launch's master side, or the write end of an open-stdin launch's stdin pipe.
    input: Option<OwnedFd>,
}

fn pipes() -> Result<Pipes, String> {
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
    let (go_r, go_w) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| format!("socketpair: {e}"))?;
    Ok(Pipes {
        out_r,
        out_w,
        err_r,
        err_w,
        setup_r,
        setup_w,
        status_r,
        status_w,
        go_r,
        go_w,
        input: None,
    })
}

/// The launch, as the shim hands it to init once execd assigned it.
#[derive(Debug, Serialize, Deserialize)]
struct Go {
    id: String,
    /// `/argos/<id>` when the launch has cgroup limits: the workload checks it is inside.
    cgroup_marker: Option<String>,
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
        started_at_ms: Some(started),
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
            ended: Vec::new(),
        },
        error: Some(error),
    }
}

/// What init keeps from the setup for every launch (computed before fork: nothing is
/// done between fork and exec that could be done before). The denied paths are not among
/// them: what they name is found when the launch is taken ([`denied_now`]).
struct Base {
    host_ns: Namespaces,
    filters: Option<Vec<seccompiler::BpfProgram>>,
    pidns: bool,
}

/// The name of the shim's cgroups (`argos/<name>` in each hierarchy): unique to this
/// process, even across pid reuse.
fn cgroup_name() -> String {
    let me = std::process::id();
    let start = proc::identity(me as i32).map_or(0, |i| i.start_time);
    format!("shim-{me}-{start}")
}

/// A shim's standing tree: init forked (PID 1 of its namespace where that dimension is
/// on), its namespaces and mounts made, waiting for a launch.
struct Tree {
    init: Pid,
    pipes: Pipes,
    /// The whole-tree limits, joined by init at once (moving a process between cgroups
    /// can wait for an RCU grace period, milliseconds: that wait happens here, not when a
    /// launch arrives). Named after the shim: cgroup v2 cannot rename a group.
    cgroups: Cgroups,
    cgroup_notes: Vec<String>,
}

impl Tree {
    #[allow(unsafe_code)]
    fn start(setup: &ShimSetup) -> Result<Tree, String> {
        let plan = &setup.plan;
        let filters = if plan.wants(Dimension::Syscalls) {
            Some(
                contain::seccomp_filters(contain::FilterRules::of(plan))
                    .map_err(|e| format!("seccomp: {e}"))?,
            )
        } else {
            None
        };
        let mut base = Base {
            host_ns: Namespaces::of("self"),
            filters,
            pidns: false,
        };
        let pipes = pipes()?;
        // A PID namespace applies to children: unshare here, and the next fork is its init.
        let mut notes = Vec::new();
        if plan.wants(Dimension::ProcessTree) {
            match ns::unshare(Namespace::Pid) {
                Ok(()) => base.pidns = true,
                Err(e) => notes.push(format!("process_tree: {e}")),
            }
        }
        let limits = if plan.wants(Dimension::Resources) {
            crate::cgroup::Limits {
                memory_bytes: plan.cgroup_memory_bytes,
                pids: plan.cgroup_pids,
                cpu_percent: plan.cgroup_cpu_percent,
            }
        } else {
            crate::cgroup::Limits::default()
        };
        // Every launch has a cgroup of its own where the host delegates one, limits or not:
        // the whole tree is known by it (a process that daemonized included), and the end
        // is verified against it. Without limits, a missing cgroup is no containment fault.
        let (cgroups, mut cgroup_notes) = Cgroups::create(&cgroup_name(), limits);
        if !limits.any() {
            cgroup_notes.clear();
        }
        // SAFETY: the shim is single-threaded: no async runtime, no thread ever spawned.
        match unsafe { raw::fork_single_threaded() } {
            Ok(ForkResult::Child) => {
                notes.extend(cgroups.add(0));
                tree::init(setup, &base, pipes, notes)
            }
            Ok(ForkResult::Parent { child }) => Ok(Tree {
                init: child,
                pipes,
                cgroups,
                cgroup_notes,
            }),
            Err(e) => {
                cgroups.remove();
                Err(format!("fork: {e}"))
            }
        }
    }

    /// Ends a tree that will run nothing (its namespace dies with init).
    fn end(self) {
        let _ = kill(self.init, Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(self.init, None);
        self.cgroups.remove();
    }

    /// Runs one launch in the standing tree and returns its result, and its cgroups for
    /// removal (empty by then, or the result names the survivors).
    fn run(
        self,
        dir: &Path,
        spec: &LaunchSpec,
        started: i64,
        followers: follow::Followers,
    ) -> (LaunchResult, Cgroups, Pid) {
        let Tree {
            init,
            mut pipes,
            cgroups,
            cgroup_notes,
        } = self;
        let go = Go {
            id: spec.id.clone(),
            cgroup_marker: cgroups
                .limits_anything()
                .then(|| format!("/argos/{}", cgroup_name())),
        };
        // A launch that takes input: the shim keeps the writing side (a terminal's master,
        // or an open stdin's pipe), the workload gets the other (the slave, or the pipe's
        // read end), handed to init with the launch.
        let handed = match &spec.tty {
            None if spec.open_stdin => nix::unistd::pipe2(OFlag::O_CLOEXEC)
                .map(|(read, write)| Some((write, read)))
                .map_err(|e| format!("opening the stdin pipe: {e}")),
            None => Ok(None),
            Some(t) => ns::open_pty(t.rows, t.cols)
                .map(Some)
                .map_err(|e| format!("opening a terminal: {e}")),
        };
        let handed = match handed {
            Ok(h) => h,
            Err(error) => return (abandon(init, spec, started, error), cgroups, init),
        };
        let line = serde_json::to_vec(&go).unwrap_or_default();
        let sent = {
            use std::os::fd::AsFd;
            raw::send_with_fd(
                &pipes.go_w,
                &line,
                handed.as_ref().map(|(_, theirs)| theirs.as_fd()),
            )
        };
        // Only the workload holds its side now: its last close ends the terminal (or, for
        // a pipe, the shim's writes fail once the workload has closed its stdin).
        let ours = handed.map(|(ours, _)| ours);
        if let Err(e) = sent {
            let error = format!("handing the launch to init: {e}");
            return (abandon(init, spec, started, error), cgroups, init);
        }
        pipes.input = ours;
        let mut result =
            supervise::supervise(dir, spec, started, init, pipes, cgroup_notes, followers);
        // The tree is gone (init reaped it, or died with its PID namespace); the cgroup
        // proves it, or names who is not. init itself may still be on its way out.
        let others = || -> Vec<i32> {
            let mut m = cgroups.members();
            m.retain(|p| *p != init.as_raw());
            m
        };
        if cgroups.limits_anything() || !others().is_empty() {
            let deadline = Instant::now() + Duration::from_secs(2);
            let mut left = others();
            while !left.is_empty() && Instant::now() < deadline {
                cgroups.kill();
                for pid in &left {
                    let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
                }
                std::thread::sleep(Duration::from_millis(5));
                left = others();
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
        if cgroups.tracks()
            && let Some(r) = result
                .report
                .iter_mut()
                .find(|r| r.dimension == Dimension::ProcessTree)
        {
            r.detail = format!("{}; the tree is tracked by its own cgroup", r.detail);
        }
        (result, cgroups, init)
    }
}

/// Ends a standing tree whose launch cannot be handed over, and says why.
fn abandon(init: Pid, spec: &LaunchSpec, started: i64, error: String) -> LaunchResult {
    let _ = kill(init, Signal::SIGKILL);
    let _ = nix::sys::wait::waitpid(init, None);
    failed_before_start(spec, started, LaunchStatus::Failed, error)
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

/// The paths a launch must not see, as the host holds them now: called by init when the
/// launch is taken, not when the tree was set up, so a secret made, or replaced (a new
/// `~/.ssh`, an `/etc/shadow` renamed over by `passwd`), since the tree stood is found.
/// The plan's denied paths (each `*` expanded) and, where the profile masks credentials,
/// every credential store each home holds, resolved through symlinks, outermost only.
fn denied_now(plan: &Plan) -> Vec<PathBuf> {
    let passwd = if plan.credential_homes.is_empty() {
        String::new()
    } else {
        std::fs::read_to_string("/etc/passwd").unwrap_or_default()
    };
    denied_with(plan, &passwd)
}

/// [`denied_now`] with the text of `/etc/passwd` given.
fn denied_with(plan: &Plan, passwd: &str) -> Vec<PathBuf> {
    let mut denied = outermost(plan.denied.iter().flat_map(|p| expand(p)).collect());
    for home in homes_with(plan, passwd, &denied) {
        denied.extend(credentials::stores_in(&home));
    }
    outermost(denied)
}

/// The homes whose credential stores a launch must not see (none where the profile masks
/// none); a home already hidden whole (`/home` and `/root` for agents) needs no look
/// inside.
fn homes_with(plan: &Plan, passwd: &str, denied: &[PathBuf]) -> Vec<PathBuf> {
    if plan.credential_homes.is_empty() {
        return Vec::new();
    }
    let candidates = plan
        .credential_homes
        .iter()
        .flat_map(|p| expand(p))
        .chain(credentials::passwd_homes(passwd));
    credentials::homes(candidates)
        .into_iter()
        .filter(|h| !denied.iter().any(|d| h.starts_with(d)))
        .collect()
}

/// What landlock carves out of the readable view when the launch is taken: the denied
/// paths found ([`denied_now`]), and the places where one may appear while the launch
/// runs — each denied entry as written (a `*` left in: its directory is carved), each
/// credential store of every home whether it exists yet or not — so the directories on
/// the way grant only the entries they hold now. Landlock's rules hold for inodes, not
/// names: a secret renamed over a masked one, or made after the launch was taken, is on
/// no rule, and stays unreadable (the masks are mounts, which such a rename detaches).
fn carved_now(plan: &Plan, denied: &[PathBuf]) -> Vec<PathBuf> {
    let passwd = if plan.credential_homes.is_empty() {
        String::new()
    } else {
        std::fs::read_to_string("/etc/passwd").unwrap_or_default()
    };
    let mut out: Vec<PathBuf> = denied.to_vec();
    out.extend(plan.denied.iter().map(|p| resolved(p)));
    for home in homes_with(plan, &passwd, denied) {
        out.extend(
            credentials::STORES
                .iter()
                .map(|(rel, _)| resolved(&home.join(rel))),
        );
    }
    out.sort();
    out.dedup();
    out
}

/// `path` with its longest existing head resolved through symlinks (landlock judges the
/// file a path resolves to), the rest as written.
fn resolved(path: &Path) -> PathBuf {
    let mut head = path.to_path_buf();
    let mut rest = Vec::new();
    while let Some(name) = head.file_name().map(|n| n.to_os_string()) {
        if let Ok(real) = std::fs::canonicalize(&head) {
            return rest
                .iter()
                .rev()
                .fold(real, |p, n: &std::ffi::OsString| p.join(n));
        }
        rest.push(name);
        head.pop();
    }
    path.to_path_buf()
}

/// The plan's socket directories (resolved, outermost) and the sockets in them it leaves
/// reachable, as the host holds them when the launch is taken.
fn socket_view(plan: &Plan) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let reachable = plan
        .sockets_reachable
        .iter()
        .flat_map(|p| expand(p))
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    let roots = outermost(plan.socket_dirs.iter().flat_map(|p| expand(p)).collect());
    (roots, reachable)
}

/// Where an `execute_listed_only` launch may still run files or map them executable, every
/// other mount being `noexec`: the programs' and the libraries' directories (each `*`
/// expanded), resolved, outermost. None where the plan names no library directories:
/// nothing is remounted `noexec` then.
fn executable_dirs(plan: &Plan) -> Vec<PathBuf> {
    if !plan.execute_listed_only || plan.library_dirs.is_empty() {
        return Vec::new();
    }
    outermost(
        plan.program_dirs
            .iter()
            .chain(&plan.library_dirs)
            .flat_map(|p| expand(p))
            .collect(),
    )
}

/// How many entries of the library directories are looked at for programs: past it, the
/// rest is named in the launch's notes (and a program there is not masked).
const LIBRARY_SCAN_LIMIT: usize = 200_000;

/// The programs among the libraries: regular files under the plan's library directories
/// with an execute bit and a name that is not a shared object's (`*.so`, `*.so.N`), found
/// without following symlinks; and how many entries were past [`LIBRARY_SCAN_LIMIT`].
/// Masked, since those directories stay executable: a loader run as a program would map
/// them. Libraries run that way (`libc.so.6` prints its version) are not programs a
/// package installs to be run.
fn programs_among_libraries(plan: &Plan) -> (Vec<PathBuf>, usize) {
    let mut todo = outermost(plan.library_dirs.iter().flat_map(|p| expand(p)).collect());
    let mut found = Vec::new();
    let (mut seen, mut past) = (0usize, 0usize);
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > LIBRARY_SCAN_LIMIT {
                past += 1;
                continue;
            }
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                todo.push(e.path());
            } else if t.is_file() && !is_shared_object(&e.file_name().to_string_lossy()) {
                use std::os::unix::fs::PermissionsExt;
                if e.metadata()
                    .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
                {
                    found.push(e.path());
                }
            }
        }
    }
    found.sort();
    (found, past)
}

/// Whether a file's name is a shared object's: `lib.so`, `lib.so.6`, `lib.so.1.2.3`.
fn is_shared_object(name: &str) -> bool {
    name.ends_with(".so")
        || name.split_once(".so.").is_some_and(|(_, v)| {
            !v.is_empty() && v.split('.').all(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// The paths a denied entry names: itself, or, with `*` in a component, every existing
/// match of that component (`/home/*`, `/etc/ssh/ssh_host_*_key`).
fn expand(pattern: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::from("/")];
    for part in pattern.components().skip(1) {
        let part = part.as_os_str().to_string_lossy().into_owned();
        found = if part.contains('*') {
            found
                .iter()
                .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
                .filter(|e| matches_stars(&part, &e.file_name().to_string_lossy()))
                .map(|e| e.path())
                .collect()
        } else {
            found.into_iter().map(|d| d.join(&part)).collect()
        };
    }
    found
}

/// Whether `name` matches `pattern`, in which each `*` stands for any run of characters.
fn matches_stars(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let mut parts: Vec<&str> = parts.collect();
    let Some(last) = parts.pop() else {
        return rest.is_empty();
    };
    for part in parts {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Resolves paths through symlinks (`/var/run` → `/run`; a distribution's `/home` →
/// `/var/home`), drops missing ones and those inside another.
fn outermost(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = paths
        .into_iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    out.sort();
    out.dedup();
    let all = out.clone();
    out.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `*` stands for any run of characters, as often as it is written.
    #[test]
    fn stars_match_any_run() {
        for (pattern, name, yes) in [
            ("*-linux-gnu*", "x86_64-linux-gnu", true),
            ("*-linux-gnu*", "arm-linux-gnueabihf", true),
            ("*-linux-gnu*", "python3", false),
            ("ssh_host_*_key", "ssh_host_ed25519_key", true),
            ("ssh_host_*_key", "ssh_host_ed25519_key.pub", false),
            ("python3*", "python3.11", true),
            ("a*b*a", "aba", true),
            ("a*a", "a", false),
            ("plain", "plain", true),
            ("plain", "plainer", false),
        ] {
            assert_eq!(matches_stars(pattern, name), yes, "{pattern} {name}");
        }
    }

    /// A library's name is a shared object's; a program's, or a script's, is not.
    #[test]
    fn a_shared_object_is_named_so() {
        for lib in [
            "libc.so.6",
            "ld-linux-x86-64.so.2",
            "libfoo.so",
            "libssl.so.3.0.1",
            "_ssl.cpython-311-x86_64-linux-gnu.so",
        ] {
            assert!(is_shared_object(lib), "{lib}");
        }
        for prog in ["utempter", "gst-ptp-helper", "x.so.sh", "a.so.", "run.so.d"] {
            assert!(!is_shared_object(prog), "{prog}");
        }
    }

    /// The programs among the libraries are found (an executable file not named as a
    /// shared object, however deep), the libraries and plain files are not, and a
    /// symlink is not followed.
    #[test]
    fn programs_among_the_libraries_are_found() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let put = |rel: &str, mode: u32| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"x").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        put("lib/libc.so.6", 0o755);
        put("lib/libz.so.1.3", 0o644);
        put("lib/helper/deep/prog", 0o755);
        put("lib/group-only", 0o010);
        put("lib/data.txt", 0o644);
        std::os::unix::fs::symlink("/usr/bin/true", root.join("lib/link")).unwrap();
        let profiles = crate::profile::Profiles::builtin().unwrap();
        let host = crate::profile::HostPaths {
            state_dir: root.join("state"),
            runtime_dir: root.join("run"),
            extra_homes: Vec::new(),
        };
        let mut plan = crate::profile::plan(
            "inspect",
            profiles.get("inspect").unwrap(),
            &root.join("work/1"),
            &host,
            &[],
            1,
        );
        plan.program_dirs = vec![root.join("bin")];
        plan.library_dirs = vec![root.join("l*")];
        let (found, past) = programs_among_libraries(&plan);
        assert_eq!(
            found,
            vec![
                root.join("lib/group-only"),
                root.join("lib/helper/deep/prog")
            ]
        );
        assert_eq!(past, 0);
        // Only what exists.
        assert_eq!(executable_dirs(&plan), vec![root.join("lib")]);
        plan.library_dirs.clear();
        assert!(executable_dirs(&plan).is_empty());
    }

    /// What a launch must not see is found when it is taken: a credential store made, or
    /// replaced, after an earlier look (a warm shim's setup) is found by the next, in the
    /// homes the plan names and those `/etc/passwd` gives; a home hidden whole is not
    /// looked into.
    #[test]
    fn denied_paths_are_found_as_the_host_holds_them_now() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        for d in ["state", "homes/alice", "people/carol", "hidden/dave/.ssh"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let profiles = crate::profile::Profiles::builtin().unwrap();
        let host = crate::profile::HostPaths {
            state_dir: root.join("state"),
            runtime_dir: root.join("run"),
            extra_homes: Vec::new(),
        };
        let mut plan = crate::profile::plan(
            "inspect",
            profiles.get("inspect").unwrap(),
            &root.join("work/1"),
            &host,
            &[],
            1,
        );
        assert!(
            !plan.credential_homes.is_empty(),
            "inspect masks credentials"
        );
        // Only the test's own paths: the host's homes are none of its business.
        plan.denied = vec![root.join("state"), root.join("hidden")];
        plan.credential_homes = vec![root.join("homes/*"), root.join("hidden/*")];
        let passwd = format!(
            "carol:x:1000:1000::{}:/bin/sh\nsvc:x:999:999::{}:/bin/sh\n",
            root.join("people/carol").display(),
            root.join("people").display()
        );
        std::fs::create_dir_all(root.join("people/.ssh")).unwrap();
        let before = denied_with(&plan, &passwd);
        assert_eq!(before, [root.join("hidden"), root.join("state")]);
        for d in [
            "homes/alice/.ssh",
            "homes/alice/.aws",
            "homes/bob/.config/gh",
            "people/carol/.kube",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("homes/bob/.netrc"), "machine m").unwrap();
        let now = denied_with(&plan, &passwd);
        for d in [
            "homes/alice/.ssh",
            "homes/alice/.aws",
            "homes/bob/.config/gh",
            "homes/bob/.netrc",
            "people/carol/.kube",
        ] {
            assert!(now.contains(&root.join(d)), "{d}: {now:?}");
        }
        // A system account's home is not looked in; one inside a hidden path needs no look.
        assert!(!now.contains(&root.join("people/.ssh")), "{now:?}");
        assert!(
            !now.iter().any(|p| p.starts_with(root.join("hidden/dave"))),
            "{now:?}"
        );
        // Replaced: the same name, a new directory, found again.
        std::fs::remove_dir_all(root.join("homes/alice/.ssh")).unwrap();
        assert!(!denied_with(&plan, &passwd).contains(&root.join("homes/alice/.ssh")));
        std::fs::create_dir_all(root.join("homes/alice/.ssh")).unwrap();
        assert!(denied_with(&plan, &passwd).contains(&root.join("homes/alice/.ssh")));
        // A profile that masks no credentials looks in no home.
        plan.credential_homes.clear();
        assert_eq!(
            denied_with(&plan, &passwd),
            [root.join("hidden"), root.join("state")]
        );
    }
}
