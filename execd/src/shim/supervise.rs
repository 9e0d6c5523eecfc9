//! The shim's watch over a running launch: output into capped logs and tails, the wall
//! clock (TERM, grace, KILL), waiting for init, and the result.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::follow::{Followers, Source};
use super::{EXIT_EXEC, Pipes, SetupMsg};
use crate::protocol::Input;
use crate::spec::{
    DimReport, Dimension, LaunchResult, LaunchSpec, LaunchStatus, StreamTotals, Teardown, files,
    now_ms, write_atomic,
};
use crate::sys::proc;

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

/// The launch's wall clock: TERM to init at the deadline (init forwards it to the tree),
/// then KILL to the whole tree once the grace period is over.
struct Clock {
    deadline: Option<Instant>,
    grace: Duration,
    kill_at: Option<Instant>,
    timed_out: bool,
}

impl Clock {
    fn start(spec: &LaunchSpec) -> Clock {
        let on = spec.timeout_ms > 0 && spec.plan.wants(Dimension::WallClock);
        Clock {
            deadline: on.then(|| Instant::now() + Duration::from_millis(spec.timeout_ms)),
            grace: Duration::from_millis(spec.grace_ms),
            kill_at: None,
            timed_out: false,
        }
    }

    /// Does whatever is due at `now`.
    fn tick(&mut self, init: Pid, now: Instant) {
        if let Some(d) = self.deadline
            && !self.timed_out
            && now >= d
        {
            self.timed_out = true;
            let _ = kill(init, Signal::SIGTERM);
            self.kill_at = Some(now + self.grace);
        }
        if let Some(k) = self.kill_at
            && now >= k
        {
            kill_tree(init);
            self.kill_at = None;
        }
    }

    /// Hangs up: SIGHUP to init (it forwards it to the tree), then KILL to the whole tree
    /// once the grace period is over.
    fn hang_up(&mut self, init: Pid, now: Instant) {
        let _ = kill(init, Signal::SIGHUP);
        self.kill_at = Some(now + self.grace);
    }

    /// When something is next due, if anything is.
    fn next(&self) -> Option<Instant> {
        [self.deadline.filter(|_| !self.timed_out), self.kill_at]
            .into_iter()
            .flatten()
            .min()
    }
}

/// One output stream: a capped log file (created with the first byte: a quiet launch
/// leaves none) plus an in-memory tail.
struct Stream {
    fd: Option<OwnedFd>,
    path: PathBuf,
    log: Option<File>,
    total: u64,
    logged: u64,
    cap: u64,
    tail: std::collections::VecDeque<u8>,
    tail_cap: usize,
}

impl Stream {
    fn new(fd: OwnedFd, path: PathBuf, cap: u64, tail_cap: u64) -> Stream {
        Stream {
            fd: Some(fd),
            path,
            log: None,
            total: 0,
            logged: 0,
            cap,
            tail: Default::default(),
            tail_cap: tail_cap as usize,
        }
    }

    /// Reads what is there: the number of new bytes (now at the end of `buf[..n]`), or
    /// `None` at EOF.
    fn pump(&mut self, buf: &mut [u8]) -> Option<usize> {
        let fd = self.fd.as_ref()?;
        match nix::unistd::read(fd, buf) {
            Ok(0) => {
                self.fd = None;
                None
            }
            Ok(n) => {
                let chunk = &buf[..n];
                self.total += n as u64;
                let room = self.cap.saturating_sub(self.logged) as usize;
                if room > 0 {
                    if self.log.is_none() {
                        // Readable too: live followers catch up from it.
                        self.log = File::options()
                            .read(true)
                            .write(true)
                            .create(true)
                            .truncate(true)
                            .open(&self.path)
                            .ok();
                    }
                    let keep = &chunk[..room.min(n)];
                    if let Some(log) = &mut self.log
                        && log.write_all(keep).is_ok()
                    {
                        self.logged += keep.len() as u64;
                    }
                }
                let skip = n.saturating_sub(self.tail_cap);
                self.tail.extend(&chunk[skip..]);
                let excess = self.tail.len().saturating_sub(self.tail_cap);
                self.tail.drain(..excess);
                Some(n)
            }
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => Some(0),
            Err(_) => {
                self.fd = None;
                None
            }
        }
    }
}

/// Where the writer's input goes: a terminal's master side (which also carries its
/// output), or the write end of an open stdin's pipe. Input goes in as the workload takes
/// it; what waits is counted against the writer's high-water mark.
struct Sink {
    fd: Option<OwnedFd>,
    tty: bool,
    pending: std::collections::VecDeque<u8>,
    /// The writer ended the input: close the pipe once what waits is written.
    closing: bool,
}

impl Sink {
    /// Takes the writer's input and writes what the workload takes now; resizes at once.
    /// `open`: a terminal still has a reader (its output has not ended).
    fn input(&mut self, followers: &mut Followers, open: bool) {
        for i in followers.take_input(self.pending.len()) {
            match i {
                Input::Bytes(b) if !self.closing => self.pending.extend(b),
                Input::Resize(rows, cols) if self.tty => {
                    if let Some(fd) = &self.fd {
                        let _ = crate::sys::raw::set_window_size(fd, rows, cols);
                    }
                }
                Input::Close if !self.tty => self.closing = true,
                // execd refuses these before they reach the shim; a shim ignores them.
                _ => {}
            }
        }
        if !open || self.fd.is_none() {
            self.pending.clear();
            return;
        }
        while !self.pending.is_empty() {
            let Some(fd) = &self.fd else { break };
            let (a, _) = self.pending.as_slices();
            match nix::unistd::write(fd, a) {
                Ok(n) => {
                    self.pending.drain(..n);
                }
                Err(nix::errno::Errno::EINTR) => {}
                // Full: try again after the next poll.
                Err(nix::errno::Errno::EAGAIN) => break,
                // The workload closed its stdin (EPIPE), or the terminal is gone.
                Err(_) if !self.tty => {
                    self.fd = None;
                    self.pending.clear();
                }
                Err(_) => break,
            }
        }
        if self.closing && self.pending.is_empty() {
            // The workload reads EOF.
            self.fd = None;
        }
    }

    /// The fd to poll for room, while input waits.
    fn waiting(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.fd
            .as_ref()
            .filter(|_| !self.pending.is_empty())
            .map(|fd| fd.as_fd())
    }
}

fn nonblocking(fd: &OwnedFd) -> Option<()> {
    let flags = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFL).ok()?;
    let flags = nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(flags)).ok()?;
    Some(())
}

fn sources(streams: &[Stream; 2]) -> [Source<'_>; 2] {
    [0, 1].map(|i| Source {
        total: streams[i].total,
        logged: streams[i].logged,
        log: streams[i].log.as_ref(),
    })
}

pub(super) fn supervise(
    dir: &Path,
    spec: &LaunchSpec,
    started: i64,
    init_pid: Pid,
    p: Pipes,
    mut init_notes: Vec<String>,
    mut followers: Followers,
) -> LaunchResult {
    drop((p.out_w, p.err_w, p.setup_w, p.status_w, p.go_r, p.go_w));
    // A launch that takes input: the writer's input goes to the sink. A terminal's output
    // is the terminal's (read from a copy of the master side); its pipes carry nothing.
    let tty = spec.tty.is_some();
    let mut tty_reader = None;
    let mut sink = p.input.and_then(|fd| {
        if tty {
            tty_reader = Some(fd.try_clone().ok()?);
        }
        nonblocking(&fd)?;
        Some(Sink {
            fd: Some(fd),
            tty,
            pending: std::collections::VecDeque::new(),
            closing: false,
        })
    });
    if sink.is_some() {
        followers.accept_writer();
    }
    if let Some(t) = &spec.tty {
        followers.keep(t.scrollback_bytes as usize);
    }
    // Setup: read the channel to EOF (exec closed it) or to the workload's refusal.
    let mut setup_error = None;
    let mut report: Vec<DimReport> = Vec::new();
    let mut missing = Vec::new();
    for line in BufReader::new(File::from(p.setup_r)).lines() {
        let Ok(line) = line else { break };
        match serde_json::from_str::<SetupMsg>(&line) {
            Ok(SetupMsg::Init { notes }) => init_notes.extend(notes),
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
    let out = match tty_reader {
        Some(reader) => {
            drop(p.out_r);
            reader
        }
        None => p.out_r,
    };
    let mut streams = [
        Stream::new(
            out,
            dir.join(files::STDOUT_LOG),
            spec.log_cap_bytes,
            spec.tail_bytes,
        ),
        Stream::new(
            p.err_r,
            dir.join(files::STDERR_LOG),
            spec.log_cap_bytes,
            spec.tail_bytes,
        ),
    ];
    let mut clock = Clock::start(spec);
    let mut buf = vec![0u8; 1024 * 1024];
    // A terminal nobody is attached to is torn down after its TTL; a launch asked to end
    // once nobody follows it (a stream's), after its own.
    let ttl_ms = spec
        .tty
        .as_ref()
        .map_or(spec.end_unfollowed_ms, |t| t.detach_ttl_ms);
    let detach_ttl = (ttl_ms > 0).then(|| Duration::from_millis(ttl_ms));
    let mut unattached_since = Instant::now();
    let mut hung_up = false;
    while streams.iter().any(|s| s.fd.is_some()) {
        let now = Instant::now();
        clock.tick(init_pid, now);
        let mut detach_due = None;
        if let Some(ttl) = detach_ttl {
            if followers.attached() {
                unattached_since = now;
            } else if !hung_up && now >= unattached_since + ttl {
                hung_up = true;
                clock.hang_up(init_pid, now);
            } else if !hung_up {
                detach_due = Some(unattached_since + ttl);
            }
        }
        let timeout_ms = clock
            .next()
            .into_iter()
            .chain(detach_due)
            .min()
            .map(|w| w.saturating_duration_since(now).as_millis().min(60_000) as u16 as i32)
            .unwrap_or(1000);
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut fds = Vec::new();
        let mut which = Vec::new();
        let held = [0, 1].map(|i| followers.holds(i, &sources(&streams)[i], buf.len()));
        for (i, s) in streams.iter().enumerate() {
            if let Some(fd) = &s.fd
                && !held[i]
            {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
                which.push(i);
            }
        }
        // Input waiting for room in the terminal or the stdin pipe.
        let open = !tty || streams[0].fd.is_some();
        if let Some(fd) = sink.as_ref().and_then(Sink::waiting)
            && open
        {
            fds.push(PollFd::new(fd, PollFlags::POLLOUT));
        }
        let src = sources(&streams);
        for (fd, out) in followers.poll_fds(&src) {
            let flags = if out {
                PollFlags::POLLIN | PollFlags::POLLOUT
            } else {
                PollFlags::POLLIN
            };
            fds.push(PollFd::new(fd, flags));
        }
        // While a follower holds a stream back, look again soon: it may stall for good.
        let timeout_ms = if held.contains(&true) {
            timeout_ms.min(250)
        } else {
            timeout_ms
        };
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
                    let at = streams[i].total;
                    // A terminal hands out at most a few KiB per read: take what it has
                    // (its master is non-blocking) and pass it on as one chunk.
                    let mut filled = 0;
                    while let Some(n) = streams[i].pump(&mut buf[filled..]) {
                        filled += n;
                        if n == 0 || !tty || filled + 4096 > buf.len() {
                            break;
                        }
                    }
                    if filled > 0 {
                        followers.record(i, at, &buf[..filled], streams[i].logged);
                    }
                }
            }
        }
        followers.serve(&sources(&streams));
        if let Some(sink) = &mut sink {
            sink.input(&mut followers, !tty || streams[0].fd.is_some());
        }
    }
    // Followers get the rest before anything else (a slow one gets two seconds).
    followers.finish(&sources(&streams), Duration::from_secs(2));
    // Both streams closed: the tree is normally gone or closing. init writes the
    // workload's status once it has reaped every process of the tree (nothing left to
    // wait for: in a PID namespace every orphan is init's), then exits; EOF without a word
    // means init itself died (killed at the timeout), and the namespace with it. The
    // clock still runs: a workload that closed its output and kept running is timed out
    // like any other.
    let mut status_line = String::new();
    let status = File::from(p.status_r);
    loop {
        let now = Instant::now();
        clock.tick(init_pid, now);
        let ms = clock.next().map_or(60_000, |w| {
            w.saturating_duration_since(now)
                .as_millis()
                .clamp(1, 60_000) as i32
        });
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut fds = [PollFd::new(status.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {
                // One write of a short line (atomic on a pipe), or EOF.
                let mut word = [0u8; 4096];
                if let Ok(n) = nix::unistd::read(&status, &mut word) {
                    status_line = String::from_utf8_lossy(&word[..n]).into_owned();
                }
                break;
            }
            Err(_) => break,
        }
    }
    let (mut exit_code, mut signal) = parse_status(&status_line);
    // Without init's word, only its own end proves the tree's.
    let init_status = if exit_code.is_none() && signal.is_none() {
        let ws = loop {
            match waitpid(init_pid, None) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => break other.ok(),
            }
        };
        // init itself was killed (timeout escalation): the whole namespace died with it.
        if let Some(WaitStatus::Signaled(_, sig, _)) = ws {
            signal = Some(sig as i32);
        }
        ws
    } else {
        Some(WaitStatus::StillAlive)
    };
    let kill_requested = dir.join(files::KILL_REQUESTED).exists() || hung_up;
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
    } else if clock.timed_out {
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
    if hung_up && error.is_none() {
        let after = detach_ttl.map_or(0, |t| t.as_secs());
        error = Some(if tty {
            format!("no client attached for {after} s: the terminal was torn down")
        } else {
            format!("nobody followed its output for {after} s (its reader gone): ended")
        });
    }
    let [out, err] = streams;
    // The tail is only needed where the head does not already hold everything.
    for (s, name) in [(&out, files::STDOUT_TAIL), (&err, files::STDERR_TAIL)] {
        if s.total > spec.head_bytes + spec.tail_bytes {
            let (a, b) = s.tail.as_slices();
            let _ = write_atomic(&dir.join(name), &[a, b].concat());
        }
    }
    LaunchResult {
        status,
        exit_code,
        signal,
        started_at_ms: Some(started),
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
            ended: left_running(&status_line),
        },
        error,
    }
}

/// The processes init found still running when the command ended (`left PID COMM` lines
/// after its status), as `comm (pid N)`.
fn left_running(msg: &str) -> Vec<String> {
    msg.lines()
        .filter_map(|l| l.strip_prefix("left "))
        .filter_map(|l| l.split_once(' '))
        .map(|(pid, comm)| format!("{comm} (pid {pid})"))
        .collect()
}

fn parse_status(line: &str) -> (Option<i32>, Option<i32>) {
    let mut it = line.split_whitespace();
    match (it.next(), it.next().and_then(|v| v.parse().ok())) {
        (Some("exit"), Some(c)) => (Some(c), None),
        (Some("signal"), Some(s)) => (None, Some(s)),
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream keeps its log up to the cap and its last bytes in the tail, and counts
    /// everything: no root, a pipe and a temp dir.
    #[test]
    fn a_stream_caps_its_log_keeps_its_tail_and_counts_everything() {
        let dir = tempfile::tempdir().unwrap();
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let data: Vec<u8> = (0..100u8).collect();
        nix::unistd::write(&w, &data).unwrap();
        drop(w);
        let mut s = Stream::new(r, dir.path().join("out.log"), 40, 10);
        let mut buf = vec![0u8; 64];
        let mut read = 0;
        while let Some(n) = s.pump(&mut buf) {
            read += n;
        }
        assert_eq!((read, s.total, s.logged), (100, 100, 40));
        assert_eq!(
            std::fs::read(dir.path().join("out.log")).unwrap(),
            &data[..40]
        );
        assert_eq!(s.tail.iter().copied().collect::<Vec<_>>(), &data[90..]);
        assert!(s.fd.is_none(), "EOF closes the stream");
    }

    /// The writer's input reaches an open stdin's pipe as the pipe takes it; closing the
    /// input is the reader's EOF, and input after it is dropped.
    #[test]
    fn a_pipe_sink_writes_what_the_pipe_takes_and_closes_on_request() {
        use std::io::{Read, Write};
        use std::os::linux::net::SocketAddrExt;
        let id = format!("test-sink-{}", std::process::id());
        let mut followers = Followers::listen(&id);
        followers.accept_writer();
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        nonblocking(&w).unwrap();
        let mut sink = Sink {
            fd: Some(w),
            tty: false,
            pending: Default::default(),
            closing: false,
        };
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(
            crate::protocol::socket_name(&id).as_bytes(),
        )
        .unwrap();
        let mut client = std::os::unix::net::UnixStream::connect_addr(&addr).unwrap();
        let request = crate::protocol::Request {
            stdout: crate::protocol::From::Offset(0),
            stderr: 0,
            write: true,
        };
        client.write_all(request.line().as_bytes()).unwrap();
        for i in [
            Input::Bytes(b"hello ".to_vec()),
            Input::Bytes(b"world".to_vec()),
            Input::Close,
            Input::Bytes(b"late".to_vec()),
        ] {
            client.write_all(&i.encode()).unwrap();
        }
        let sources = [0, 1].map(|_| Source {
            total: 0,
            logged: 0,
            log: None,
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while sink.fd.is_some() {
            assert!(Instant::now() < deadline, "the sink never closed");
            followers.serve(&sources);
            sink.input(&mut followers, true);
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut got = String::new();
        File::from(r).read_to_string(&mut got).unwrap();
        assert_eq!(got, "hello world", "everything before the close, then EOF");
    }
}
