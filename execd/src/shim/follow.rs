//! Live followers: while a launch runs, execd connects to its shim (an abstract UNIX
//! socket named after the launch, in the host's network namespace; only the shim's own
//! uid may connect) and receives output as it arrives, from any offset still kept: the
//! log file (up to its cap) or a window of recent output held in memory (the last
//! [`WINDOW`] bytes past the log's cap that not every follower has taken yet). So
//! `Follow` is not limited to what the log keeps.
//!
//! A follower behind the live edge catches up from the log or the window. Beyond the
//! log's cap, the window is the only copy: rather than drop bytes a follower still needs,
//! the shim stops reading the workload's output (the workload waits, as it would on any
//! slow pipe reader) until the follower takes them. A follower that takes nothing for
//! [`STALL`] loses its place: an error frame, and it is closed.
//!
//! The wire is `crate::protocol`'s: a request line, then frames; the shim closes a
//! follower once both streams are complete. A terminal launch's clients may ask for
//! `tail` instead of a stdout offset (the recent output the shim keeps,
//! [`Followers::keep`] bytes, whatever the log's cap). A launch that takes input (a
//! terminal, or a launch started with its stdin open) admits one writer at a time, whose
//! input frames the caller takes with [`Followers::take_input`].

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::FileExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};

use crate::protocol::{
    From, HEADER, Input, KIND_ERROR, KIND_LIVE, MAX_FRAME, MAX_REQUEST, Request, STREAM_KINDS,
    header, parse_input, socket_name,
};

/// Input read but not yet written to the workload: above this, the writer's socket is
/// left unread (its sender waits).
const INPUT_HIGH_WATER: usize = 1024 * 1024;
/// Recent output kept per stream, past the log's cap.
pub const WINDOW: usize = 8 * 1024 * 1024;
/// Send buffer asked for each follower's socket.
const SOCKET_BUFFER: usize = 4 * 1024 * 1024;
/// How long a follower may hold the workload's output back without taking any of it.
pub const STALL: std::time::Duration = std::time::Duration::from_secs(5);
/// A follower's unsent frames: above this, new output waits in the log or the window.
const HIGH_WATER: usize = 4 * 1024 * 1024;

/// What one stream offers followers: where its log ends, its total, and the log file.
pub struct Source<'a> {
    pub total: u64,
    pub logged: u64,
    pub log: Option<&'a File>,
}

struct Window {
    /// Offset of `buf[0]` in the stream.
    start: u64,
    buf: VecDeque<u8>,
}

struct Client {
    sock: UnixStream,
    request: Vec<u8>,
    /// Next offset to send, per stream (once the request line is in).
    want: Option<[u64; 2]>,
    out: Vec<u8>,
    sent: usize,
    /// An error frame is queued: close once it is out.
    closing: bool,
    /// When it last took bytes off its socket.
    progress: std::time::Instant,
    /// Since when it has been holding each stream back (None: it is not).
    holding: [Option<std::time::Instant>; 2],
    /// It holds the terminal's input; its unparsed input frames.
    writer: bool,
    inbuf: Vec<u8>,
}

impl Client {
    fn pending(&self) -> usize {
        self.out.len() - self.sent
    }

    fn frame(&mut self, kind: u8, offset: u64, payload: &[u8]) {
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        } else if self.sent > self.out.len() / 2 {
            self.out.drain(..self.sent);
            self.sent = 0;
        }
        self.out
            .extend_from_slice(&header(kind, offset, payload.len()));
        self.out.extend_from_slice(payload);
    }

    /// Sends new output: straight to the socket when nothing is queued before it (no copy
    /// into the queue), queueing only what the socket does not take.
    fn send_now(&mut self, kind: u8, mut offset: u64, data: &[u8]) {
        for part in data.chunks(MAX_FRAME) {
            let h = header(kind, offset, part.len());
            offset += part.len() as u64;
            if self.pending() > 0 {
                self.frame(kind, offset - part.len() as u64, part);
                continue;
            }
            // Errors show again at the next flush, which drops the follower.
            let n = self
                .sock
                .write_vectored(&[std::io::IoSlice::new(&h), std::io::IoSlice::new(part)])
                .unwrap_or_default();
            if n > 0 {
                self.progress = std::time::Instant::now();
            }
            self.out.clear();
            self.sent = 0;
            if n < HEADER {
                self.out.extend_from_slice(&h[n..]);
                self.out.extend_from_slice(part);
            } else {
                self.out.extend_from_slice(&part[n - HEADER..]);
            }
        }
    }

    /// Writes what the socket takes; false when the follower is gone.
    fn flush(&mut self) -> bool {
        while self.sent < self.out.len() {
            match self.sock.write(&self.out[self.sent..]) {
                Ok(0) => return false,
                Ok(n) => {
                    self.sent += n;
                    self.progress = std::time::Instant::now();
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }
}

pub struct Followers {
    listener: Option<UnixListener>,
    clients: Vec<Client>,
    windows: [Window; 2],
    /// Recent output always kept in memory, for `tail` (a terminal's scrollback).
    keep: usize,
    /// The launch takes input: one client at a time may write.
    writable: bool,
    /// Input from the writer, for the caller to write to the workload.
    input: Vec<Input>,
    /// Input bytes taken and not yet written (the caller says so).
    input_backlog: usize,
}

impl Followers {
    /// Listens for followers of launch `id`. Without a socket the launch still runs;
    /// followers then read the log files.
    pub fn listen(id: &str) -> Followers {
        let listener = SocketAddr::from_abstract_name(socket_name(id).as_bytes())
            .and_then(|a| UnixListener::bind_addr(&a))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .ok();
        Followers {
            listener,
            clients: Vec::new(),
            windows: [
                Window {
                    start: 0,
                    buf: VecDeque::new(),
                },
                Window {
                    start: 0,
                    buf: VecDeque::new(),
                },
            ],
            keep: 0,
            writable: false,
            input: Vec::new(),
            input_backlog: 0,
        }
    }

    /// Whether any client is connected (a terminal with none is detached).
    pub fn attached(&self) -> bool {
        !self.clients.is_empty()
    }

    /// Keeps the last `bytes` of output in memory for clients asking for `tail` (a
    /// terminal's scrollback).
    pub fn keep(&mut self, bytes: usize) {
        self.keep = bytes;
    }

    /// Admits one writer at a time: the launch takes input (a terminal, or open stdin).
    pub fn accept_writer(&mut self) {
        self.writable = true;
    }

    /// Input received since the last call; `backlog`: input bytes still waiting to be
    /// written to the workload (no more is read above a high-water mark).
    pub fn take_input(&mut self, backlog: usize) -> Vec<Input> {
        self.input_backlog = backlog;
        std::mem::take(&mut self.input)
    }

    /// Fds to poll: the listener, and each follower (readable: its request or its
    /// hang-up; writable when it has frames waiting or output to catch up on).
    pub fn poll_fds(&self, sources: &[Source<'_>; 2]) -> Vec<(BorrowedFd<'_>, bool)> {
        let mut v = Vec::new();
        if let Some(l) = &self.listener {
            v.push((l.as_fd(), false));
        }
        for c in &self.clients {
            let behind = !c.closing
                && c.want
                    .is_some_and(|w| w[0] < sources[0].total || w[1] < sources[1].total);
            v.push((c.sock.as_fd(), c.pending() > 0 || behind));
        }
        v
    }

    /// Accepts, reads requests, writes what is due. Call after poll.
    pub fn serve(&mut self, sources: &[Source<'_>; 2]) {
        let me = nix::unistd::geteuid().as_raw();
        if let Some(l) = &self.listener {
            while let Ok((sock, _)) = l.accept() {
                // Only execd (the shim's own uid) may follow.
                let peer =
                    nix::sys::socket::getsockopt(&sock, nix::sys::socket::sockopt::PeerCredentials);
                if peer.map(|c| c.uid()) != Ok(me) || sock.set_nonblocking(true).is_err() {
                    continue;
                }
                // A deep socket buffer: a whole chunk of output usually goes in one write,
                // with no copy into the follower's queue (root may exceed wmem_max).
                use nix::sys::socket::{setsockopt, sockopt};
                if setsockopt(&sock, sockopt::SndBufForce, &SOCKET_BUFFER).is_err() {
                    let _ = setsockopt(&sock, sockopt::SndBuf, &SOCKET_BUFFER);
                }
                self.clients.push(Client {
                    sock,
                    request: Vec::new(),
                    want: None,
                    out: Vec::new(),
                    sent: 0,
                    closing: false,
                    progress: std::time::Instant::now(),
                    holding: [None; 2],
                    writer: false,
                    inbuf: Vec::new(),
                });
            }
        }
        let windows = &self.windows;
        let (keep, writable) = (self.keep as u64, self.writable);
        let mut writer_taken = self.clients.iter().any(|c| c.writer && !c.closing);
        let (input, backlog) = (&mut self.input, self.input_backlog);
        self.clients.retain_mut(|c| {
            if c.want.is_none() {
                let mut buf = [0u8; 128];
                match c.sock.read(&mut buf) {
                    Ok(0) => return false,
                    Ok(n) => c.request.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return false,
                }
                if let Some(end) = c.request.iter().position(|b| *b == b'\n') {
                    let line = String::from_utf8_lossy(&c.request[..end]).into_owned();
                    let rest = c.request[end + 1..].to_vec();
                    let Some(r) = Request::parse(&line) else {
                        return false;
                    };
                    let out = match r.stdout {
                        From::Offset(o) => o,
                        // The recent output a terminal keeps.
                        From::Tail if keep > 0 => sources[0].total.saturating_sub(keep),
                        From::Tail => return false,
                    };
                    c.want = Some([out, r.stderr]);
                    if r.stdout == From::Tail {
                        c.frame(KIND_LIVE, sources[0].total, &[]);
                    }
                    if r.write {
                        if !writable {
                            return false;
                        } else if writer_taken {
                            let msg = "another client holds this launch's input";
                            c.frame(KIND_ERROR, 0, msg.as_bytes());
                            c.closing = true;
                        } else {
                            c.writer = true;
                            writer_taken = true;
                            c.inbuf = rest;
                        }
                    }
                } else if c.request.len() > MAX_REQUEST {
                    return false;
                }
            } else if !c.closing && (!c.writer || backlog < INPUT_HIGH_WATER) {
                // After its request: a writer's input frames; from anyone else, nothing
                // but the hang-up is expected.
                let mut buf = [0u8; 16 * 1024];
                match c.sock.read(&mut buf) {
                    Ok(0) => return false,
                    Ok(n) if c.writer => c.inbuf.extend_from_slice(&buf[..n]),
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return false,
                }
            }
            if c.writer && !c.closing {
                match parse_input(&mut c.inbuf) {
                    Ok(frames) => input.extend(frames),
                    Err(why) => {
                        c.frame(KIND_ERROR, 0, why.as_bytes());
                        c.closing = true;
                    }
                }
            }
            if !c.closing {
                catch_up(c, sources, windows);
            }
            c.flush() && !(c.closing && c.pending() == 0)
        });
    }

    /// Whether reading up to `chunk` more bytes of stream `i` could push bytes a follower
    /// still needs out of the window (past the log's cap, nothing else keeps them). A
    /// follower that has stalled for [`STALL`] is cut off instead of holding the stream.
    pub fn holds(&mut self, i: usize, source: &Source<'_>, chunk: usize) -> bool {
        let mut held = false;
        for c in &mut self.clients {
            let Some(want) = c.want else { continue };
            // What it still needs that only the window keeps: from the log's end, or from
            // where it stands if that is further.
            let need = want[i].max(source.logged);
            let span = (source.total + chunk as u64).saturating_sub(need) as usize;
            if c.closing || span <= WINDOW {
                c.holding[i] = None;
                continue;
            }
            // Stalled: no bytes taken for STALL since it began to hold (an idle follower
            // with nothing to take is not stalled).
            let since = *c.holding[i].get_or_insert_with(std::time::Instant::now);
            if since.max(c.progress).elapsed() >= STALL {
                let msg = format!(
                    "the follower took nothing for {} s while holding back the workload's output; it was cut off at {} offset {}",
                    STALL.as_secs(),
                    ["stdout", "stderr"][i],
                    want[i]
                );
                c.frame(KIND_ERROR, want[i], msg.as_bytes());
                c.closing = true;
            } else {
                held = true;
            }
        }
        held
    }

    /// New output of stream `i` (`chunk` starts at offset `at`; the log keeps the first
    /// `logged` bytes): straight to followers that are caught up, and into the window for
    /// the others, or, past the log's cap, for a follower yet to come.
    pub fn record(&mut self, i: usize, at: u64, chunk: &[u8], logged: u64) {
        let kind = STREAM_KINDS[i];
        // With nobody following, only what the log does not keep needs the window.
        let mut all_took = at + chunk.len() as u64 <= logged || !self.clients.is_empty();
        for c in &mut self.clients {
            let Some(mut want) = c.want else {
                all_took = false;
                continue;
            };
            if c.closing {
                continue;
            }
            if want[i] == at && c.pending() < HIGH_WATER {
                c.send_now(kind, at, chunk);
                want[i] += chunk.len() as u64;
                c.want = Some(want);
            } else {
                all_took = false;
            }
        }
        let w = &mut self.windows[i];
        if all_took && self.keep == 0 {
            // Nobody needs these bytes from memory: the window starts after them.
            w.buf.clear();
            w.start = at + chunk.len() as u64;
            return;
        }
        if w.start + w.buf.len() as u64 != at {
            w.buf.clear();
            w.start = at;
        }
        w.buf.extend(chunk);
        // A terminal keeps its recent output even when everyone took it.
        let limit = if all_took {
            self.keep
        } else {
            WINDOW.max(self.keep)
        };
        let excess = w.buf.len().saturating_sub(limit);
        if excess > 0 {
            w.buf.drain(..excess);
            w.start += excess as u64;
        }
    }

    /// The streams are complete: send every follower the rest (for up to `limit`), then
    /// close them all and stop listening.
    pub fn finish(&mut self, sources: &[Source<'_>; 2], limit: std::time::Duration) {
        self.listener = None;
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            self.serve(sources);
            let done = self.clients.iter().all(|c| {
                c.pending() == 0
                    && (c.closing
                        || c.want
                            .is_some_and(|w| w[0] >= sources[0].total && w[1] >= sources[1].total))
            });
            if done {
                break;
            }
            let mut fds: Vec<nix::poll::PollFd<'_>> = self
                .poll_fds(sources)
                .into_iter()
                .map(|(fd, out)| {
                    let mut f = nix::poll::PollFlags::POLLIN;
                    if out {
                        f |= nix::poll::PollFlags::POLLOUT;
                    }
                    nix::poll::PollFd::new(fd, f)
                })
                .collect();
            let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(50u8));
        }
        self.clients.clear();
    }
}

/// Queues what a follower is owed from the log or the window, up to its high-water mark;
/// an error frame if the bytes it needs are kept nowhere.
fn catch_up(c: &mut Client, sources: &[Source<'_>; 2], windows: &[Window; 2]) {
    let Some(mut want) = c.want else { return };
    for i in 0..2 {
        let kind = STREAM_KINDS[i];
        let s = &sources[i];
        while want[i] < s.total && c.pending() < HIGH_WATER {
            let from_log = want[i] < s.logged;
            let w = &windows[i];
            if from_log {
                let Some(log) = s.log else { break };
                let n = ((s.logged - want[i]) as usize).min(MAX_FRAME);
                let mut buf = vec![0u8; n];
                match log.read_at(&mut buf, want[i]) {
                    Ok(0) | Err(_) => break,
                    Ok(got) => {
                        c.frame(kind, want[i], &buf[..got]);
                        want[i] += got as u64;
                    }
                }
            } else if want[i] >= w.start && want[i] < w.start + w.buf.len() as u64 {
                let skip = (want[i] - w.start) as usize;
                let n = (w.buf.len() - skip).min(MAX_FRAME);
                let (a, b) = w.buf.as_slices();
                let mut part = Vec::with_capacity(n);
                let from_a = a.len().saturating_sub(skip).min(n);
                part.extend_from_slice(&a[skip.min(a.len())..skip.min(a.len()) + from_a]);
                let rest = n - from_a;
                let b_skip = skip.saturating_sub(a.len());
                part.extend_from_slice(&b[b_skip..b_skip + rest]);
                c.frame(kind, want[i], &part);
                want[i] += n as u64;
            } else if want[i] < w.start {
                let msg = format!(
                    "{} bytes {}..{} were not kept: beyond the log's cap ({} bytes) and the follower fell behind",
                    ["stdout", "stderr"][i],
                    want[i],
                    w.start,
                    s.logged
                );
                c.frame(KIND_ERROR, want[i], msg.as_bytes());
                c.closing = true;
                c.want = Some(want);
                return;
            } else {
                break;
            }
        }
    }
    c.want = Some(want);
}
