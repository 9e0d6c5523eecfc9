//! `Follow`: a launch's output streamed to a client from any offset — live from its
//! shim's follow socket while it runs, else from the log files — then its end; and the
//! two pieces of the shim's socket protocol that `Attach` shares (connect, read a frame).

use std::sync::Arc;
use std::time::Duration;

use argos_proto::exec::v1 as pb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tonic::Status;

use crate::edge;
use crate::manager::Manager;
use crate::protocol::{
    From, HEADER, KIND_ERROR, KIND_STDERR, MAX_FRAME, Request, parse_header, socket_name,
};
use crate::spec::files;
use crate::wire;

/// How a live follow ended.
enum Live {
    /// The shim sent everything and closed: the streams are complete.
    Complete,
    /// No live shim to follow (ended, or from before a restart): read the log files.
    Unavailable,
    /// The follower left.
    Gone,
}

/// Streams a launch's output from the requested offsets, then its end: live from its
/// shim while it runs (not limited to what the logs keep), else from the log files (which
/// also serves launches started before an execd restart).
pub async fn follow(
    manager: Arc<Manager>,
    r: pb::FollowRequest,
    tx: tokio::sync::mpsc::Sender<Result<pb::FollowEvent, Status>>,
) {
    let mut offsets = [r.stdout_offset, r.stderr_offset];
    match follow_live(&manager, &r.id, &mut offsets, &tx).await {
        Ok(Live::Gone) => return,
        Ok(Live::Complete | Live::Unavailable) => {}
        Err(status) => {
            let _ = tx.send(Err(status)).await;
            return;
        }
    }
    if !follow_files(&manager, &r.id, &mut offsets, &tx).await {
        return;
    }
    let event = match manager.wait(&r.id).await {
        // Whatever this follower did not get is said, never skipped in silence.
        Some(rec) => match [rec.stdout_bytes, rec.stderr_bytes]
            .iter()
            .zip(offsets)
            .position(|(total, at)| at < *total)
        {
            Some(i) => Err(edge::lost(format!(
                "{} bytes {}..{} were not kept (past the log's cap) and this follower was cut off before it took them",
                ["stdout", "stderr"][i],
                offsets[i],
                [rec.stdout_bytes, rec.stderr_bytes][i]
            ))),
            None => Ok(pb::FollowEvent {
                event: Some(pb::follow_event::Event::Exit(wire::execution(&rec))),
            }),
        },
        None => Err(edge::vanished()),
    };
    let _ = tx.send(event).await;
}

const KINDS: [pb::OutputStream; 2] = [pb::OutputStream::Stdout, pb::OutputStream::Stderr];

async fn send_chunk(
    tx: &tokio::sync::mpsc::Sender<Result<pb::FollowEvent, Status>>,
    i: usize,
    offset: u64,
    data: Vec<u8>,
) -> bool {
    let chunk = pb::OutputChunk {
        stream: KINDS[i] as i32,
        offset,
        data: data.into(),
    };
    tx.send(Ok(pb::FollowEvent {
        event: Some(pb::follow_event::Event::Chunk(chunk)),
    }))
    .await
    .is_ok()
}

/// Follows the running shim over its socket (see `shim/follow.rs`).
async fn follow_live(
    manager: &Manager,
    id: &str,
    offsets: &mut [u64; 2],
    tx: &tokio::sync::mpsc::Sender<Result<pb::FollowEvent, Status>>,
) -> Result<Live, Status> {
    let request = Request {
        stdout: From::Offset(offsets[0]),
        stderr: offsets[1],
        write: false,
    };
    let Some((mut rd, _wr)) = shim_connect(manager, id, &request).await else {
        return Ok(Live::Unavailable);
    };
    // Closed by the shim: complete, or the shim is gone (the files tell).
    while let Some((kind, at, data)) = read_frame(&mut rd).await? {
        if kind == KIND_ERROR {
            return Err(edge::lost(String::from_utf8_lossy(&data).into_owned()));
        }
        let i = usize::from(kind == KIND_STDERR);
        // Frames start where this follower stands (the shim serves from its offsets).
        if at != offsets[i] {
            return Err(edge::internal("the launch's output could not be read")(
                format!("a shim sent offset {at} where {} was due", offsets[i]),
            ));
        }
        offsets[i] += data.len() as u64;
        if !send_chunk(tx, i, at, data).await {
            return Ok(Live::Gone);
        }
    }
    Ok(Live::Complete)
}

/// Connects to a running launch's own shim (its abstract follow socket) and sends the
/// request line; `None` when there is none to trust: the launch has ended (its files tell
/// the rest, never a socket), or whoever serves the name is not the shim recorded for the
/// launch — an abstract name is anyone's to bind once its shim is gone, so the server's
/// kernel-reported uid and pid must be execd's own uid and the receipt's shim pid before a
/// byte is read or sent.
pub async fn shim_connect(
    manager: &Manager,
    id: &str,
    request: &Request,
) -> Option<(OwnedReadHalf, OwnedWriteHalf)> {
    use std::os::linux::net::SocketAddrExt;
    match manager.ledger.get(id).await {
        Ok(Some(r)) if !r.status.is_final() => {}
        _ => return None,
    }
    let shim = manager.spec(id)?.shim?;
    let sock = std::os::unix::net::SocketAddr::from_abstract_name(socket_name(id).as_bytes())
        .and_then(|a| std::os::unix::net::UnixStream::connect_addr(&a))
        .ok()?;
    let peer =
        nix::sys::socket::getsockopt(&sock, nix::sys::socket::sockopt::PeerCredentials).ok()?;
    let me = nix::unistd::geteuid().as_raw();
    if peer.uid() != me || peer.pid() != shim.pid {
        tracing::warn!(
            id,
            peer_uid = peer.uid(),
            peer_pid = peer.pid(),
            shim_pid = shim.pid,
            "a launch's follow socket is served by another process: refused"
        );
        return None;
    }
    let sock = sock
        .set_nonblocking(true)
        .map(|()| sock)
        .and_then(tokio::net::UnixStream::from_std)
        .ok()?;
    let (rd, mut wr) = sock.into_split();
    wr.write_all(request.line().as_bytes()).await.ok()?;
    Some((rd, wr))
}

/// One frame from a shim: (kind, offset, payload); `None` once the shim has closed.
pub async fn read_frame(rd: &mut OwnedReadHalf) -> Result<Option<(u8, u64, Vec<u8>)>, Status> {
    let mut h = [0u8; HEADER];
    if rd.read_exact(&mut h).await.is_err() {
        return Ok(None);
    }
    let (kind, at, len) = parse_header(&h);
    if len > MAX_FRAME {
        return Err(edge::internal("the launch's output could not be read")(
            "a shim sent an oversized frame",
        ));
    }
    // No read buffer, and fresh capacity without zeroing: frames are large, and each
    // would cost a copy.
    let mut data = Vec::with_capacity(len);
    match rd.take(len as u64).read_to_end(&mut data).await {
        Ok(n) if n == len => Ok(Some((kind, at, data))),
        _ => Ok(None),
    }
}

/// The most one message read from a log file carries.
const FILE_CHUNK: u64 = 1024 * 1024;

/// Reads the log files from the offsets until the exit marker is seen and everything
/// after it is read. False if the follower left.
async fn follow_files(
    manager: &Manager,
    id: &str,
    offsets: &mut [u64; 2],
    tx: &tokio::sync::mpsc::Sender<Result<pb::FollowEvent, Status>>,
) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let dir = manager.dir(id);
    let names = [files::STDOUT_LOG, files::STDERR_LOG];
    let mut ended = false;
    let mut idle_rounds = 0u32;
    loop {
        let mut progressed = false;
        for i in 0..2 {
            let Ok(mut f) = std::fs::File::open(dir.join(names[i])) else {
                continue;
            };
            // What the file holds past the offset, in chunks of up to a MiB (the
            // per-message cost of gRPC dominates small ones), read into a buffer of
            // that size: a follower of a quiet launch holds a few bytes, not a MiB.
            let held = f.metadata().map_or(0, |m| m.len());
            if held <= offsets[i] || f.seek(SeekFrom::Start(offsets[i])).is_err() {
                continue;
            }
            let want = (held - offsets[i]).min(FILE_CHUNK);
            let mut chunk = Vec::with_capacity(want as usize);
            let n = f.take(want).read_to_end(&mut chunk).unwrap_or(0);
            if n == 0 {
                continue;
            }
            progressed = true;
            let at = offsets[i];
            offsets[i] += n as u64;
            if !send_chunk(tx, i, at, chunk).await {
                return false; // the follower left
            }
        }
        if progressed {
            continue;
        }
        if ended {
            return true;
        }
        // The exit marker is written after the logs are complete: one more pass after
        // seeing it drains everything.
        if dir.join(files::EXIT).exists() {
            ended = true;
            continue;
        }
        // A shim that died leaves no marker: the ledger says when the launch is over.
        idle_rounds += 1;
        if idle_rounds.is_multiple_of(50)
            && matches!(manager.ledger.get(id).await, Ok(Some(r)) if r.status.is_final())
        {
            ended = true;
            continue;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
