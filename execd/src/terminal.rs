//! `Attach`: a client on a launch that takes input — a terminal, or a launch started with
//! its stdin open. The input lives in the launch's shim; execd relays its output (with
//! offsets) to the client and the client's input, resizes and end of input to the shim,
//! over the shim's follow socket (`crate::protocol`). The shim admits one writer at a
//! time; viewers are many. Nothing here outlives the call: attaching again, after a
//! disconnect or an execd restart, is a new call.

use std::sync::Arc;

use argos_proto::exec::v1 as pb;
use tokio::io::AsyncWriteExt;
use tonic::{Status, Streaming};

use crate::edge;
use crate::manager::Manager;
use crate::output::{read_frame, shim_connect};
use crate::protocol::{
    From, Input, KIND_ERROR, KIND_LIVE, KIND_STDERR, KIND_STDOUT, MAX_INPUT, Request,
};
use crate::wire;

type Tx = tokio::sync::mpsc::Sender<Result<pb::AttachEvent, Status>>;

/// Relays one attached client until the launch ends, the client goes, or the shim cuts it
/// off (another writer holds the input; it fell too far behind).
pub async fn relay(
    manager: Arc<Manager>,
    open: pb::AttachOpen,
    tty: bool,
    mut inbound: Streaming<pb::AttachRequest>,
    tx: Tx,
) {
    let id = open.id.clone();
    let request = Request {
        stdout: if open.scrollback {
            From::Tail
        } else {
            From::Offset(open.offset)
        },
        stderr: open.stderr_offset,
        write: open.write,
    };
    let Some((mut rd, mut wr)) = shim_connect(&manager, &id, &request).await else {
        // The shim is gone: the launch has ended (or is ending).
        exit(&manager, &id, &tx).await;
        return;
    };
    let output = async {
        // Until the shim closes: the launch is complete.
        while let Some((kind, at, data)) = read_frame(&mut rd).await? {
            if kind == KIND_ERROR {
                return Err(edge::conflict(String::from_utf8_lossy(&data).into_owned()));
            }
            let stream = match kind {
                KIND_LIVE => {
                    let ev = pb::AttachEvent {
                        event: Some(pb::attach_event::Event::ReplayedTo(at)),
                    };
                    if tx.send(Ok(ev)).await.is_err() {
                        return Err(edge::gone());
                    }
                    continue;
                }
                KIND_STDOUT => pb::OutputStream::Stdout,
                KIND_STDERR => pb::OutputStream::Stderr,
                _ => continue,
            };
            let event = pb::attach_event::Event::Output(pb::OutputChunk {
                stream: stream as i32,
                offset: at,
                data: data.into(),
            });
            let ev = pb::AttachEvent { event: Some(event) };
            if tx.send(Ok(ev)).await.is_err() {
                return Err(edge::gone());
            }
        }
        Ok(())
    };
    let input = async {
        loop {
            let msg = match inbound.message().await {
                Ok(Some(m)) => m,
                // The client stopped sending (a half-close): its output goes on.
                Ok(None) => return std::future::pending::<Result<(), Status>>().await,
                // The client is gone: detach.
                Err(_) => return Err(edge::gone()),
            };
            let input = match msg.msg {
                Some(pb::attach_request::Msg::Input(b)) if open.write => {
                    if b.len() > MAX_INPUT {
                        return Err(edge::invalid(format!(
                            "input: at most {MAX_INPUT} bytes per message"
                        )));
                    }
                    Input::Bytes(b)
                }
                Some(pb::attach_request::Msg::Resize(_)) if open.write && !tty => {
                    return Err(edge::invalid("resize: only a terminal has a size"));
                }
                Some(pb::attach_request::Msg::CloseInput(_)) if open.write && tty => {
                    return Err(edge::invalid(
                        "close_input: a terminal's input has no end of its own (type ^D)",
                    ));
                }
                Some(pb::attach_request::Msg::Resize(s)) if open.write => {
                    let ok = |v: u32| (1..=1000).contains(&v);
                    if !ok(s.rows) || !ok(s.cols) {
                        return Err(edge::invalid("resize: rows and cols between 1 and 1000"));
                    }
                    Input::Resize(s.rows as u16, s.cols as u16)
                }
                Some(pb::attach_request::Msg::CloseInput(_)) if open.write => Input::Close,
                Some(
                    pb::attach_request::Msg::Input(_)
                    | pb::attach_request::Msg::Resize(_)
                    | pb::attach_request::Msg::CloseInput(_),
                ) => {
                    return Err(edge::conflict(
                        "attached as a viewer: open with write to send input",
                    ));
                }
                Some(pb::attach_request::Msg::Open(_)) => {
                    return Err(edge::invalid("open: only the first message"));
                }
                None => continue,
            };
            let frame = input.encode();
            if wr.write_all(&frame).await.is_err() {
                return Ok(()); // the shim closed: the output side says how it ended
            }
        }
    };
    let ended = tokio::select! {
        r = output => r,
        r = input => r,
        // The client dropped its end of the output: detach (the terminal goes on).
        () = tx.closed() => Err(edge::gone()),
    };
    match ended {
        Ok(()) => exit(&manager, &id, &tx).await,
        Err(s) if edge::is_gone(&s) => {}
        Err(s) => {
            let _ = tx.send(Err(s)).await;
        }
    }
}

/// The launch's end, once it is recorded.
async fn exit(manager: &Manager, id: &str, tx: &Tx) {
    let ev = match manager.wait(id).await {
        Some(rec) => Ok(pb::AttachEvent {
            event: Some(pb::attach_event::Event::Exit(wire::execution(&rec))),
        }),
        None => Err(edge::vanished()),
    };
    let _ = tx.send(ev).await;
}
