//! Inside the launch: the namespace's init (mounts, masks, reaping, signal forwarding)
//! and the workload's last steps before exec, in the order docs/containment.md narrates.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};

use nix::fcntl::OFlag;

use super::{Base, EXIT_CONTAINMENT, EXIT_EXEC, Go, Pipes, SetupMsg, resolve_program, send};
use crate::contain::{self, Readback};
use crate::protocol::ShimSetup;
use crate::spec::{DimReport, DimState, Dimension, LaunchSpec, Need, NetworkMode, files};
use crate::sys::ns::{self, Namespace};
use crate::sys::{proc, raw};

/// The launch's init: PID 1 of its namespace (when the host allows one). Sets up the
/// namespaces and mounts, then waits for the shim to hand it a launch.
#[allow(unsafe_code)]
pub(super) fn init(setup: &ShimSetup, base: &Base, p: Pipes, mut notes: Vec<String>) -> ! {
    let plan = &setup.plan;
    drop((p.out_r, p.err_r, p.setup_r, p.status_r, p.go_w));
    // execd's pipes (our stdin and stdout) are the shim's business, not ours.
    if let Ok(null) = File::options().read(true).write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
    }
    // If the shim dies, so does the tree (and the kernel kills the namespace with us).
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    if !base.pidns {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
    // Held by fd before any mount covers it: the launches dir (masked below: it is in
    // execd's state dir).
    let launches = match nix::fcntl::open(
        &setup.launches_dir,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(e) => {
            send(
                &p.setup_w,
                &SetupMsg::Failed {
                    error: format!("opening {}: {e}", setup.launches_dir.display()),
                },
            );
            raw::exit_now(EXIT_EXEC);
        }
    };
    // Namespaces for everything below us: mounts, IPC, hostname, and network.
    let mut spaces = Vec::new();
    if !plan.host_ipc_uts {
        spaces.extend([Namespace::Ipc, Namespace::Uts]);
    }
    if plan.wants(Dimension::Filesystem) {
        spaces.push(Namespace::Mount);
    }
    if plan.wants(Dimension::Network) && plan.network_mode.own_namespace() {
        spaces.push(Namespace::Network);
    }
    let mut mnt_ok = false;
    let mut net_ok = false;
    for n in spaces {
        match ns::unshare(n) {
            Ok(()) => {
                mnt_ok |= n == Namespace::Mount;
                net_ok |= n == Namespace::Network;
            }
            Err(e) => notes.push(format!("{} namespace: {e}", n.as_str())),
        }
    }
    // The file bound over denied files, held by fd too (it is in execd's state dir, masked
    // like the rest), opened in the new mount namespace: a bind source must be one of its
    // mounts.
    let mask_source = File::open(&setup.mask_file)
        .map(|f| {
            use std::os::fd::AsRawFd;
            let path = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
            (f, path)
        })
        .ok();
    // The directories left executable (none unless mounted anew here).
    let executable = if mnt_ok {
        super::executable_dirs(plan)
    } else {
        Vec::new()
    };
    if mnt_ok {
        if let Err(e) = ns::make_mounts_private() {
            notes.push(format!("making mounts private: {e}"));
        }
        for (point, e) in ns::detach_automounts() {
            notes.push(format!(
                "filesystem: detaching the automount point {point}: {e}"
            ));
        }
        if base.pidns
            && let Err(e) = ns::mount_proc()
        {
            notes.push(format!("mounting /proc for the PID namespace: {e}"));
        }
        // The host's files, read-only: every mount in this namespace remounted so
        // (landlock denies writing as well; the private /tmp and the workspace are
        // mounted after, writable).
        if plan.read_only_mounts {
            for (mount, e) in ns::remount_all_read_only(!executable.is_empty()) {
                notes.push(format!("filesystem: remounting {mount} read-only: {e}"));
            }
        }
        // Where only listed files may run: nothing but the programs' and the libraries'
        // directories can be mapped executable (a loader run as a program maps any file
        // it can read, which landlock's execute right does not see), and the programs
        // among the libraries are masked. The listed files elsewhere are made executable
        // when the launch is taken.
        for dir in &executable {
            if let Err(e) = ns::bind_executable(dir) {
                notes.push(format!(
                    "filesystem: keeping {} executable: {e}",
                    dir.display()
                ));
            }
        }
        if !executable.is_empty() {
            let (programs, past) = super::programs_among_libraries(plan);
            let source = mask_source
                .as_ref()
                .map(|(_, p)| p.as_path())
                .unwrap_or(&setup.mask_file);
            for path in &programs {
                if let Err(e) = mask(path, source) {
                    notes.push(format!("filesystem: masking {}: {e}", path.display()));
                }
            }
            if past > 0 {
                notes.push(format!(
                    "filesystem: {past} entries of the library directories past the {} looked at for programs",
                    super::LIBRARY_SCAN_LIMIT
                ));
            }
        }
        // A private /tmp. Workspaces that live under the host's /tmp stay reachable: hold
        // their root by fd, mount over /tmp, and bind it back at the same path.
        let held = if setup.work_root.starts_with("/tmp") {
            File::open(&setup.work_root).ok()
        } else {
            None
        };
        if let Err(e) = ns::mount_private_tmp(
            Path::new("/tmp"),
            256 * 1024 * 1024,
            plan.execute_listed_only,
        ) {
            notes.push(format!("mounting a private /tmp: {e}"));
        } else if let Some(fd) = held {
            use std::os::fd::AsRawFd;
            let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
            let bound = std::fs::create_dir_all(&setup.work_root)
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    ns::bind(Path::new(&source), &setup.work_root).map_err(|e| e.to_string())
                });
            if let Err(e) = bound {
                notes.push(format!(
                    "keeping the workspaces under the private /tmp: {e}"
                ));
            }
        }
    }
    if net_ok
        && plan.network_mode == NetworkMode::Loopback
        && let Err(e) = raw::loopback_up()
    {
        notes.push(format!("bringing up lo: {e}"));
    }
    // Standing: wait for the launch (and the workload's side of its input: a terminal's
    // slave, or an open stdin's read end). EOF means the shim ended the tree unused.
    let (go, handed) = match raw::recv_with_fd(&p.go_r, 64 * 1024) {
        Ok(Some((line, fd))) => (Some(line), fd),
        Ok(None) | Err(_) => (None, None),
    };
    drop(p.go_r);
    let go: Go = match go.map(|line| serde_json::from_slice(&line)) {
        Some(Ok(go)) => go,
        Some(Err(e)) => {
            send(
                &p.setup_w,
                &SetupMsg::Failed {
                    error: format!("bad launch hand-over: {e}"),
                },
            );
            raw::exit_now(EXIT_EXEC);
        }
        None => raw::exit_now(0),
    };
    let _ = raw::set_sched_idle(false);
    // Denied paths disappear from the view, found as the host holds them now (not when
    // the tree was set up: a `~/.ssh` made or replaced since is hidden too): an empty,
    // mode-000 tmpfs over a directory, an empty mode-000 file over a file. Before the
    // program is resolved, in the view the workload will have. The masks hide names;
    // landlock, below, is what keeps a secret unreadable when a host process renames a
    // new one over a mask (which detaches it).
    let denied = super::denied_now(plan);
    let carved = super::carved_now(plan, &denied);
    // The socket directories: a mirror without sockets but the reachable ones, first,
    // so the masks below find nothing of them left to hide.
    if mnt_ok && !plan.socket_dirs.is_empty() {
        let (roots, reachable) = super::socket_view(plan);
        match super::mirror::mirror_all(&roots, &denied, &reachable) {
            Ok(m) if m.over_limit > 0 => notes.push(format!(
                "filesystem: {} entries of the socket directories past the mirror's {} not shown",
                m.over_limit,
                super::mirror::MIRROR_LIMIT
            )),
            Ok(_) => {}
            Err(e) => {
                send(&p.setup_w, &SetupMsg::Failed { error: e });
                raw::exit_now(EXIT_EXEC);
            }
        }
    }
    if mnt_ok {
        let source = mask_source
            .as_ref()
            .map(|(_, p)| p.as_path())
            .unwrap_or(&setup.mask_file);
        for path in &denied {
            if let Err(e) = mask(path, source) {
                notes.push(format!("filesystem: masking {}: {e}", path.display()));
            }
        }
    }
    drop(mask_source);
    let (spec, mut work, stdin) = match launch(&launches, &go) {
        Ok(v) => v,
        Err(error) => {
            send(&p.setup_w, &SetupMsg::Failed { error });
            raw::exit_now(EXIT_EXEC);
        }
    };
    // The listed files outside the executable directories, executable for this launch.
    if !executable.is_empty() {
        let mut places = executable.clone();
        for file in work.executable.iter().flatten() {
            if !executable.iter().any(|d| file.starts_with(d)) {
                match ns::bind_executable(file) {
                    Ok(()) => places.push(file.clone()),
                    Err(e) => notes.push(format!(
                        "filesystem: making {} executable: {e}",
                        file.display()
                    )),
                }
            }
        }
        work.executable_places = Some(places);
    }
    drop(launches);
    // A name for the launch uid (`whoami`, a shell's prompt), in this mount namespace only.
    if let (Some((uid, gid)), true) = (spec.plan.run_as, spec.plan.wants(Dimension::Filesystem))
        && let Err(e) = name_the_uid(&spec, uid, gid)
    {
        send(&p.setup_w, &SetupMsg::Failed { error: e });
        raw::exit_now(EXIT_EXEC);
    }
    // The workspace, bounded: a tmpfs of the plan's size and inode count over it, in this
    // mount namespace only (never on the host's mounts: without one of its own, nothing
    // is mounted and the readback says the bound is missing).
    if let Some(w) = spec
        .plan
        .workspace_limit
        .as_ref()
        .filter(|_| spec.plan.wants(Dimension::Resources))
    {
        let owner = spec.plan.run_as.unwrap_or((0, 0));
        let mounted = if mnt_ok {
            ns::mount_workspace(
                &w.path,
                w.bytes,
                w.inodes,
                owner,
                spec.plan.execute_listed_only,
            )
            .map_err(|e| e.to_string())
        } else {
            Err("no mount namespace of its own".to_string())
        };
        if let Err(e) = mounted {
            notes.push(format!("resources: bounding the workspace: {e}"));
        }
    }
    send(&p.setup_w, &SetupMsg::Init { notes });
    // The denied paths carved out of landlock's rules, in the view as now mounted, with
    // where they may yet appear: the directories on the way keep only their entries'
    // listing.
    let (readable, listable) = contain::readable_view(&carved);
    // Where only some devices may be opened: /dev keeps its entries, not its files.
    let (readable, listable) = match &spec.plan.devices_readable {
        Some(kept) => contain::without_device_files(readable, listable, kept, &carved),
        None => (readable, listable),
    };
    // Where only listed files may run: the programs' directories keep their entries but
    // not their files (a loader run as a program maps whatever it can read).
    let (readable, program_dirs) = if spec.plan.execute_listed_only {
        contain::without_program_files(readable, &spec.plan.program_dirs)
    } else {
        (readable, Vec::new())
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
    // A terminal launch runs with the terminal as its stdin, stdout and stderr; the pipes
    // then carry nothing and close with init's copies. An open-stdin launch reads the
    // pipe the shim writes.
    let (tty, stdin) = match (spec.tty.is_some(), spec.open_stdin, handed) {
        (true, _, Some(slave)) => (Some(slave), stdin),
        (false, true, Some(pipe)) => (None, pipe),
        (false, false, None) => (None, stdin),
        _ => {
            send(
                &p.setup_w,
                &SetupMsg::Failed {
                    error: "the launch's input was not handed over as its spec says".into(),
                },
            );
            raw::exit_now(EXIT_EXEC);
        }
    };
    let (stdin, out, err) = match tty {
        Some(slave) => match (slave.try_clone(), slave.try_clone()) {
            (Ok(a), Ok(b)) => {
                drop(stdin);
                (slave, a, b)
            }
            _ => {
                send(
                    &p.setup_w,
                    &SetupMsg::Failed {
                        error: "dup of the terminal failed".into(),
                    },
                );
                raw::exit_now(EXIT_EXEC);
            }
        },
        None => match (p.out_w.try_clone(), p.err_w.try_clone()) {
            (Ok(a), Ok(b)) => (stdin, a, b),
            _ => {
                send(
                    &p.setup_w,
                    &SetupMsg::Failed {
                        error: "dup of the output pipes failed".into(),
                    },
                );
                raw::exit_now(EXIT_EXEC);
            }
        },
    };
    let tty = spec.tty.is_some();
    // SAFETY: init is a fork of the single-threaded shim and starts no thread either.
    let workload = match unsafe { raw::fork_single_threaded() } {
        Ok(ForkResult::Child) => workload(
            &spec,
            base,
            &work,
            [&readable, &listable, &program_dirs],
            stdin,
            out,
            err,
            p.setup_w,
            tty,
        ),
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
    drop((stdin, out, err, p.out_w, p.err_w, p.setup_w));
    let mut outcome: Option<WaitStatus> = None;
    // What the command left running when it ended, which teardown then ended.
    let mut left: Vec<(i32, String)> = Vec::new();
    loop {
        match mask.wait() {
            Ok(Signal::SIGCHLD) => {}
            Ok(sig) => {
                // Forward to the whole tree: inside a PID namespace -1 is "everyone but me".
                let target = if base.pidns {
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
                        left = proc::descendants(std::process::id() as i32, LEFT_MAX);
                        kill_rest(base.pidns, workload);
                    }
                }
                Err(nix::errno::Errno::ECHILD) => {
                    let mut msg = match outcome {
                        Some(WaitStatus::Exited(_, code)) => format!("exit {code}\n"),
                        Some(WaitStatus::Signaled(_, sig, _)) => format!("signal {}\n", sig as i32),
                        _ => "unknown\n".into(),
                    };
                    // One write of at most LEFT_MAX short lines: atomic on a pipe.
                    for (pid, comm) in &left {
                        let comm: String =
                            comm.chars().filter(|c| !c.is_control()).take(16).collect();
                        msg.push_str(&format!("left {pid} {comm}\n"));
                    }
                    let _ = nix::unistd::write(&p.status_w, msg.as_bytes());
                    raw::exit_now(0);
                }
                Err(_) => break,
            }
        }
    }
}

/// What the workload execs and may write, worked out by init for one launch (before the
/// workload's fork: it only execs what is ready).
pub(super) struct Work {
    program: std::ffi::CString,
    argv: Vec<std::ffi::CString>,
    env: Vec<std::ffi::CString>,
    writable: Vec<PathBuf>,
    /// Where the profile lists what may be executed: the files that may be.
    executable: Option<Vec<PathBuf>>,
    /// Where every other mount is `noexec`: the places left executable (the programs'
    /// and libraries' directories, the listed files elsewhere).
    executable_places: Option<Vec<PathBuf>>,
    cgroup_marker: Option<String>,
}

/// Reads the handed-over launch through the launches dir held by fd (the path itself is
/// masked in here), resolves the program in the workload's view, and opens its stdin.
fn launch(launches: &OwnedFd, go: &Go) -> Result<(LaunchSpec, Work, OwnedFd), String> {
    use std::io::Read;
    let open = |name: &str| {
        nix::fcntl::openat(
            launches,
            format!("{}/{name}", go.id).as_str(),
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| format!("opening the launch's {name}: {e}"))
    };
    let mut bytes = Vec::new();
    File::from(open(files::SPEC)?)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading the spec: {e}"))?;
    let spec: LaunchSpec =
        serde_json::from_slice(&bytes).map_err(|e| format!("parsing the spec: {e}"))?;
    let stdin = if spec.stdin {
        open(files::STDIN)?
    } else {
        File::open("/dev/null")
            .map_err(|e| format!("opening /dev/null: {e}"))?
            .into()
    };
    let mut writable = spec.plan.writable.clone();
    if spec.plan.wants(Dimension::Filesystem) {
        writable.push(PathBuf::from("/tmp"));
    }
    let path = spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or("/usr/local/bin:/usr/bin:/bin");
    let program = resolve_program(&spec.argv[0], path)?;
    // The program, the other programs the launch was judged on (those not found are shell
    // builtins or absent: nothing to allow), and the interpreters the kernel opens to run
    // them.
    let executable = spec.plan.execute_listed_only.then(|| {
        let listed = spec
            .executables
            .iter()
            .filter_map(|e| resolve_program(e, path).ok());
        contain::with_interpreters(std::iter::once(program.clone()).chain(listed))
    });
    let cstr = |s: &str| std::ffi::CString::new(s).map_err(|_| format!("NUL byte in {s:?}"));
    let work = Work {
        program: cstr(&program.display().to_string())?,
        argv: spec
            .argv
            .iter()
            .map(|a| cstr(a))
            .collect::<Result<_, _>>()?,
        env: spec
            .env
            .iter()
            .map(|(k, v)| cstr(&format!("{k}={v}")))
            .collect::<Result<_, _>>()?,
        writable,
        executable,
        executable_places: None,
        cgroup_marker: go.cgroup_marker.clone(),
    };
    Ok((spec, work, stdin))
}

/// Gives the launch uid a passwd and group entry in this mount namespace: the host's files
/// with one line more each, bound read-only over them from this launch's private /tmp.
fn name_the_uid(spec: &LaunchSpec, uid: u32, gid: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let name = if spec.user.is_empty() {
        "argos"
    } else {
        spec.user.as_str()
    };
    let entry = |path: &str, line: String, id: u32| -> Result<(), String> {
        let host = std::fs::read_to_string(path).unwrap_or_default();
        let mut out: String = host
            .lines()
            .filter(|l| {
                let mut f = l.split(':');
                let (n, i) = (f.next(), f.nth(1));
                n != Some(name) && i != Some(id.to_string().as_str())
            })
            .map(|l| format!("{l}\n"))
            .collect();
        out.push_str(&line);
        let file = Path::new("/tmp").join(format!(".argos-{}", &path[5..]));
        std::fs::write(&file, out).map_err(|e| format!("{}: {e}", file.display()))?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444))
            .map_err(|e| format!("{}: {e}", file.display()))?;
        ns::mask_file(&file, Path::new(path)).map_err(|e| e.to_string())
    };
    entry(
        "/etc/passwd",
        format!(
            "{name}:x:{uid}:{gid}:Argos launch:{}:/bin/bash\n",
            spec.workspace.display()
        ),
        uid,
    )?;
    entry("/etc/group", format!("{name}:x:{gid}:\n"), gid)
}

/// Hides one denied path in the current mount namespace. The path was found resolved;
/// it is opened again with no symlink allowed on the way, and the mask mounted on what
/// that opened (by descriptor), so a host user who swaps a component of it for a symlink
/// meanwhile cannot move the mask onto another path of the view.
fn mask(path: &Path, masked_file: &Path) -> Result<(), String> {
    let at = match open_no_symlinks(path) {
        Ok(fd) => fd,
        // Removed since it was found (a home's owner at work): nothing left to hide.
        Err(nix::errno::Errno::ENOENT) => return Ok(()),
        Err(e) => return Err(format!("opening it with no symlink on the way: {e}")),
    };
    let dir = nix::sys::stat::fstat(&at)
        .map_err(|e| e.to_string())?
        .st_mode
        & libc::S_IFMT
        == libc::S_IFDIR;
    let masked = if dir {
        ns::mask_dir(&by_fd(&at))
    } else {
        // The bind is sealed through the mount it made: the path opened again reaches
        // it (a descriptor of the file under it would not).
        ns::bind(masked_file, &by_fd(&at)).and_then(|()| match open_no_symlinks(path) {
            Ok(top) => ns::seal_bind(&by_fd(&top)),
            Err(e) => Err(crate::sys::SysError::on(
                "reopening the mask",
                path.display(),
                e,
            )),
        })
    };
    match masked {
        Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other.map_err(|e| e.to_string()),
    }
}

/// `path` opened as a location only (`O_PATH`), refused (`ELOOP`) if any component of it,
/// the last included, is a symlink.
fn open_no_symlinks(path: &Path) -> nix::Result<OwnedFd> {
    use nix::fcntl::{OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how)
}

/// The path that reaches what `fd` holds, for a mount onto it.
fn by_fd(fd: &OwnedFd) -> PathBuf {
    use std::os::fd::AsRawFd;
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// How many processes the command left running are named in its result.
const LEFT_MAX: usize = 64;

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
#[allow(clippy::too_many_arguments)]
fn workload(
    spec: &LaunchSpec,
    base: &Base,
    work: &Work,
    [readable, listable, program_dirs]: [&[PathBuf]; 3],
    stdin: OwnedFd,
    out: OwnedFd,
    err: OwnedFd,
    setup: OwnedFd,
    tty: bool,
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
    let _ = ns::new_session();
    // A terminal launch: its terminal becomes the new session's controlling terminal.
    if tty && let Err(e) = raw::set_controlling_tty(0) {
        fail(format!("terminal: {e}"));
    }
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
        match contain::apply_landlock(
            readable,
            listable,
            program_dirs,
            &work.writable,
            work.executable.as_deref(),
        ) {
            Ok(full) => landlock_ok = full,
            Err(e) if plan.need(Dimension::Filesystem) == Need::Required => {
                fail(format!("landlock: {e}"))
            }
            Err(_) => {}
        }
    }
    // 3. Privileges: capabilities, run-as, no_new_privs (seccomp needs the latter too).
    if plan.wants(Dimension::Privileges)
        && let Err(e) = contain::drop_privileges(plan.run_as, &plan.groups)
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
    if let Some(filters) = &base.filters
        && let Err(e) = contain::load_seccomp(filters)
        && plan.need(Dimension::Syscalls) == Need::Required
    {
        fail(e);
    }
    // 5. Prove it: read the state back from the kernel and judge each dimension.
    let rb = Readback::take(
        landlock_ok,
        rlimits_set.then_some(&plan.rlimits),
        work.cgroup_marker.as_deref(),
        plan.workspace_limit.as_ref(),
        plan.execute_listed_only.then_some(work.writable.as_slice()),
        work.executable_places.as_deref(),
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
            rb.holds(d, plan, &base.host_ns)
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
    let e = nix::unistd::execve(&work.program, &work.argv, &work.env).unwrap_err();
    fail(format!("exec {}: {e}", work.program.to_string_lossy()));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mask goes only where its path leads with no symlink on the way: a path one of
    /// whose directories was swapped for a symlink (to lead the mask elsewhere) is
    /// refused, the same path through real directories is opened, and a gone one is
    /// not found.
    #[test]
    fn a_mask_is_never_led_through_a_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir_all(root.join("home/alice/.ssh")).unwrap();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        assert!(open_no_symlinks(&root.join("home/alice/.ssh")).is_ok());
        std::fs::rename(root.join("home/alice"), root.join("home/alice.old")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("home/alice")).unwrap();
        std::fs::create_dir_all(root.join("elsewhere/.ssh")).unwrap();
        assert_eq!(
            open_no_symlinks(&root.join("home/alice/.ssh")).unwrap_err(),
            nix::errno::Errno::ELOOP
        );
        std::os::unix::fs::symlink(root.join("etc"), root.join("home/bob")).unwrap();
        assert_eq!(
            open_no_symlinks(&root.join("home/bob")).unwrap_err(),
            nix::errno::Errno::ELOOP
        );
        assert_eq!(
            open_no_symlinks(&root.join("home/carol/.ssh")).unwrap_err(),
            nix::errno::Errno::ENOENT
        );
    }
}
