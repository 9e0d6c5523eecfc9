//! The only `unsafe` in Argos: raw syscalls without a safe wrapper in nix, and `fork`.
//! Each block states why it is sound.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use super::{SysError, SysResult};

/// `fork(2)` for the shim and its init.
///
/// # Safety
///
/// The calling process must be single-threaded (the shim: no async runtime, no thread
/// ever spawned), so that the child is an exact copy in which no lock can be held by a
/// thread that does not exist there. In a multi-threaded process only async-signal-safe
/// calls may follow in the child, which the shim's code does not restrict itself to.
pub unsafe fn fork_single_threaded() -> SysResult<nix::unistd::ForkResult> {
    // SAFETY: the caller guarantees this process is single-threaded (see above).
    unsafe { nix::unistd::fork() }.map_err(|e| SysError::new("fork", e))
}

/// `pidfd_open(2)`: a handle that names one process for as long as the fd lives, so a
/// signal sent through it can never reach a process that reused the pid.
pub fn pidfd_open(pid: i32) -> SysResult<OwnedFd> {
    // SAFETY: plain syscall with integer arguments; on success the kernel returns a new fd
    // that we own and wrap at once.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(SysError::on(
            "pidfd_open",
            pid,
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: `fd` is a fresh, valid fd returned by the kernel and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `pidfd_send_signal(2)`.
pub fn pidfd_send_signal(fd: &OwnedFd, signal: i32) -> SysResult<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `fd` is a valid pidfd we own; null siginfo is allowed; flags 0.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 {
        return Err(SysError::on(
            "pidfd_send_signal",
            signal,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Closes every fd from `first` up (`close_range(2)`): a freshly exec'd shim must not
/// hold anything execd happened to have open.
///
/// # Safety
///
/// No live Rust object (an `OwnedFd`, a `File`, a socket) may own an fd numbered `first`
/// or above: it would close it under that owner, whose later use or drop would then act
/// on whatever reuses the number. The shim calls it first thing in `main`.
pub unsafe fn close_fds_from(first: u32) -> SysResult<()> {
    // SAFETY: plain syscall with integer arguments; that no owner of these fds is left
    // alive is the caller's promise (see above).
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0) };
    if r < 0 {
        return Err(SysError::new(
            "close_range",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Resets every catchable signal to its default action (ignored signals survive exec).
pub fn reset_signal_dispositions() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let dfl = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    for sig in Signal::iterator() {
        if matches!(sig, Signal::SIGKILL | Signal::SIGSTOP) {
            continue;
        }
        // SAFETY: installing SIG_DFL runs no Rust code in signal context.
        let _ = unsafe { sigaction(sig, &dfl) };
    }
}

/// Ignores SIGPIPE in the calling process: a write to a closed pipe or socket then fails
/// with EPIPE instead of killing it.
pub fn ignore_sigpipe() -> SysResult<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let ign = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    // SAFETY: installing SIG_IGN runs no Rust code in signal context.
    unsafe { sigaction(Signal::SIGPIPE, &ign) }
        .map(|_| ())
        .map_err(|e| SysError::new("sigaction(SIGPIPE)", e))
}

/// Brings the loopback interface up in the current network namespace.
pub fn loopback_up() -> SysResult<()> {
    // SAFETY: socket(2) with constant arguments; the fd is wrapped at once.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(SysError::new(
            "socket for SIOCSIFFLAGS",
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: `s` is a fresh fd we own.
    let sock = unsafe { OwnedFd::from_raw_fd(s) };
    use std::os::fd::AsRawFd;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads into `req`, a valid ifreq with a NUL-terminated name.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(SysError::new(
            "SIOCGIFFLAGS lo",
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: the flags member of the union is the one SIOCGIFFLAGS filled in.
    unsafe {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads `req`, which is valid and initialised above.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(SysError::new(
            "SIOCSIFFLAGS lo",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// `_exit(2)`: leave a forked child without running the parent's atexit handlers or
/// flushing its stdio buffers twice.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no Rust state.
    unsafe { libc::_exit(code) }
}

/// Sets the calling thread's scheduling policy: `SCHED_IDLE` (runs only on a CPU nothing
/// else wants) or back to `SCHED_OTHER`. A warm shim sets itself up idle, so it never
/// takes the CPU from a launch in progress, and returns to normal when its launch comes.
pub fn set_sched_idle(idle: bool) -> SysResult<()> {
    let policy = if idle {
        libc::SCHED_IDLE
    } else {
        libc::SCHED_OTHER
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid, initialised sched_param
    // that outlives the call.
    let r = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if r < 0 {
        return Err(SysError::on(
            "sched_setscheduler",
            policy,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Makes the terminal on `fd` the controlling terminal of the calling process, a session
/// leader without one (`TIOCSCTTY`): its line discipline then sends the foreground job
/// SIGINT on Ctrl-C, SIGWINCH on a resize, SIGHUP when the terminal goes.
pub fn set_controlling_tty(fd: RawFd) -> SysResult<()> {
    // SAFETY: ioctl(TIOCSCTTY) takes an integer argument (0: do not steal from another
    // session); `fd` is an fd of this process; no memory is passed.
    let r = unsafe { libc::ioctl(fd, libc::TIOCSCTTY, 0) };
    if r < 0 {
        return Err(SysError::on(
            "ioctl(TIOCSCTTY)",
            fd,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Sets a terminal's window size (`TIOCSWINSZ` on its master); the foreground job gets
/// SIGWINCH.
pub fn set_window_size(fd: &impl std::os::fd::AsRawFd, rows: u16, cols: u16) -> SysResult<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: `ws` is an initialised winsize that outlives the call; the kernel only reads
    // it; the fd is one this process holds.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
    if r < 0 {
        return Err(SysError::on(
            "ioctl(TIOCSWINSZ)",
            rows,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Sends one message on a `SOCK_SEQPACKET` socket, with `fd` passed along
/// (`SCM_RIGHTS`) when there is one.
pub fn send_with_fd(
    sock: &OwnedFd,
    msg: &[u8],
    fd: Option<std::os::fd::BorrowedFd<'_>>,
) -> SysResult<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use std::os::fd::AsRawFd;
    let fds: Vec<RawFd> = fd.iter().map(|f| f.as_raw_fd()).collect();
    let cmsg = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(
        sock.as_raw_fd(),
        &[std::io::IoSlice::new(msg)],
        if fds.is_empty() { &[] } else { &cmsg },
        MsgFlags::empty(),
        None,
    )
    .map(drop)
    .map_err(|e| SysError::new("sendmsg", e))
}

/// Receives one message (at most `max` bytes) from a `SOCK_SEQPACKET` socket, and the
/// first fd passed with it (any other is closed). `None` at EOF.
pub fn recv_with_fd(sock: &OwnedFd, max: usize) -> SysResult<Option<(Vec<u8>, Option<OwnedFd>)>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::AsRawFd;
    let mut buf = vec![0u8; max];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    loop {
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let msg = match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(SysError::new("recvmsg", e)),
            Ok(msg) => msg,
        };
        let mut fd = None;
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmRights(fds) = c {
                    for raw_fd in fds {
                        // SAFETY: `raw_fd` was installed in this process by the recvmsg
                        // just above and nothing else refers to it: it gets exactly one
                        // owner here (the first is kept, any other closed on drop).
                        let owned = unsafe { OwnedFd::from_raw_fd(raw_fd) };
                        fd.get_or_insert(owned);
                    }
                }
            }
        }
        let n = msg.bytes;
        if n == 0 {
            return Ok(None);
        }
        buf.truncate(n);
        return Ok(Some((buf, fd)));
    }
}

/// A syscall made only to learn how the seccomp filters answer it (the read-back), with
/// arguments that change nothing whatever the answer, or that undo what they made.
#[derive(Debug, Clone, Copy)]
pub enum Probe {
    /// `memfd_create`: a descriptor made is closed at once.
    MemfdCreate,
    /// `execveat(-1, "", NULL, NULL, AT_EMPTY_PATH)`: no descriptor, so nothing runs.
    ExecveatNothing,
    /// `msgsnd` of an empty message (type 1) to queue `id`, not waiting.
    MsgSnd { id: i32 },
    /// `msgctl(id, cmd, NULL)`: a command that would copy a buffer finds none (EFAULT).
    MsgCtl { id: i32, cmd: i32 },
    /// `msgget(key, flags)`: the queue's id. A queue made is the caller's to remove.
    MsgGet { key: i32, flags: i32 },
    /// `shmat(id, NULL, flags)`: a segment attached is detached at once.
    ShmAt { id: i32, flags: i32 },
    /// `flock(-1, LOCK_EX)`: no descriptor, so nothing is locked.
    FlockNothing,
    /// `fcntl(-1, cmd, NULL)`: no descriptor, so nothing is locked.
    FcntlNothing { cmd: i32 },
}

/// Makes the probe's call: its return value, or the errno it failed with.
pub fn probe(call: Probe) -> Result<i64, nix::errno::Errno> {
    use libc::{c_long, syscall};
    let msg: [c_long; 2] = [1, 0];
    let (none, zero): (c_long, c_long) = (-1, 0);
    // SAFETY: every call gets integer arguments, null pointers the kernel checks (EFAULT
    // at worst: no memory of ours is written), a NUL-terminated name, or a pointer to
    // `msg`, which outlives the call and is only read (size 0: just its type). What a
    // call makes is undone below: the memfd is closed, the segment detached (mapped at an
    // address the kernel chose, which no Rust object occupies).
    let r = unsafe {
        match call {
            Probe::MemfdCreate => syscall(
                libc::SYS_memfd_create,
                c"argos-probe".as_ptr(),
                libc::MFD_CLOEXEC as c_long,
            ),
            Probe::ExecveatNothing => syscall(
                libc::SYS_execveat,
                none,
                c"".as_ptr(),
                std::ptr::null::<*const libc::c_char>(),
                std::ptr::null::<*const libc::c_char>(),
                libc::AT_EMPTY_PATH as c_long,
            ),
            Probe::MsgSnd { id } => syscall(
                libc::SYS_msgsnd,
                id as c_long,
                msg.as_ptr(),
                zero,
                libc::IPC_NOWAIT as c_long,
            ),
            Probe::MsgCtl { id, cmd } => syscall(
                libc::SYS_msgctl,
                id as c_long,
                cmd as c_long,
                std::ptr::null::<libc::c_void>(),
            ),
            Probe::MsgGet { key, flags } => {
                syscall(libc::SYS_msgget, key as c_long, flags as c_long)
            }
            Probe::ShmAt { id, flags } => syscall(
                libc::SYS_shmat,
                id as c_long,
                std::ptr::null::<libc::c_void>(),
                flags as c_long,
            ),
            Probe::FlockNothing => syscall(libc::SYS_flock, none, libc::LOCK_EX as c_long),
            Probe::FcntlNothing { cmd } => syscall(
                libc::SYS_fcntl,
                none,
                cmd as c_long,
                std::ptr::null::<libc::c_void>(),
            ),
        }
    };
    if r == -1 {
        return Err(nix::errno::Errno::last());
    }
    match call {
        // SAFETY: `r` is the fresh descriptor memfd_create returned, owned by nobody else.
        Probe::MemfdCreate => drop(unsafe { OwnedFd::from_raw_fd(r as RawFd) }),
        Probe::ShmAt { .. } => {
            // SAFETY: `r` is the address shmat just attached; nothing refers to it.
            let _ = unsafe { libc::shmdt(r as *const libc::c_void) };
        }
        _ => {}
    }
    Ok(r)
}
