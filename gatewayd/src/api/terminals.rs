//! Web terminals: REST to open, list and close them, and the WebSocket bridge to execd's
//! `Attach` (`/api/terminals/{id}/ws`), opened with a short-lived single-use ticket.
//!
//! WebSocket frames are binary, the first byte an opcode:
//! - client → gateway: `0x01` input bytes; `0x02` resize (rows u16 BE, cols u16 BE);
//!   `0x03` ack (u32 BE: output bytes consumed since the last ack); `0x04` detach.
//! - gateway → client: `0x81` output bytes; `0x82` state (JSON: `{"state": "exited",
//!   "execution"}` or `{"state": "error", "message"}`, then the close); `0x83` replay
//!   begin, `0x84` replay end (the scrollback the shim kept comes between them).
//!
//! Flow control by credit: the gateway stops taking output from execd while more than
//! [`HIGH_WATER`] bytes are unacknowledged and resumes below [`LOW_WATER`]; execd and the
//! shim then hold back in turn, and the terminal's program waits, as on any slow terminal.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use futures_util::{SinkExt, StreamExt};

use super::*;

pub const OP_INPUT: u8 = 0x01;
pub const OP_RESIZE: u8 = 0x02;
pub const OP_ACK: u8 = 0x03;
pub const OP_DETACH: u8 = 0x04;
pub const OP_OUTPUT: u8 = 0x81;
pub const OP_STATE: u8 = 0x82;
pub const OP_REPLAY_BEGIN: u8 = 0x83;
pub const OP_REPLAY_END: u8 = 0x84;
/// Unacknowledged output above which the gateway stops reading the terminal.
pub const HIGH_WATER: u64 = 2 * 1024 * 1024;
/// Below this it reads again.
pub const LOW_WATER: u64 = 512 * 1024;
/// A ping this often; a client silent for three of them is gone.
const PING_EVERY: Duration = Duration::from_secs(20);

/// A minted ticket: for one terminal, one caller's credential, one origin, once.
struct Ticket {
    terminal: String,
    /// SHA-256 of the session cookie's or the token's secret that minted it.
    credential: String,
    origin: Option<String>,
    expires: Instant,
}

/// Tickets not yet used (by the SHA-256 of their secret).
#[derive(Default)]
pub struct Tickets(Mutex<HashMap<String, Ticket>>);

impl Tickets {
    fn mint(&self, t: Ticket) -> String {
        let secret = crate::accounts::new_secret();
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        map.retain(|_, t| t.expires > now);
        map.insert(argos_store::audit::sha256_hex(secret.as_bytes()), t);
        secret
    }

    /// Takes a ticket (whatever the outcome, it cannot be used again).
    fn take(&self, secret: &str) -> Option<Ticket> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(&argos_store::audit::sha256_hex(secret.as_bytes()))
    }
}

/// What identifies the caller's credential, for binding a ticket to it.
fn credential(caller: &Caller, headers: &HeaderMap) -> String {
    let secret = match &caller.via {
        Via::Cookie(s) => s.clone(),
        Via::Bearer(_) => bearer(headers).unwrap_or_default().to_string(),
    };
    argos_store::audit::sha256_hex(secret.as_bytes())
}

/// A terminal to open.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalBody {
    /// A shell command; empty (with no argv): an interactive bash.
    #[serde(default)]
    command: String,
    #[serde(default)]
    argv: Vec<String>,
    #[serde(default)]
    cwd: String,
    /// agent (default: the sandbox) or host (admins: root on this host).
    #[serde(default)]
    profile: String,
    #[serde(default, deserialize_with = "whole")]
    rows: Option<u32>,
    #[serde(default, deserialize_with = "whole")]
    cols: Option<u32>,
    /// TERM (default xterm-256color).
    #[serde(default)]
    term: String,
    /// Milliseconds; absent or 0: the profile's maximum (a terminal has no short clock).
    #[serde(default, deserialize_with = "whole")]
    timeout_ms: Option<u64>,
}

#[utoipa::path(post, path = "/api/terminals", tag = "terminals", description = "Opens a web terminal (admins): a command, or an interactive bash, on a PTY its launch's shim holds. Attach with a ticket (`POST /api/terminals/{id}/ticket`) and a WebSocket.", request_body = TerminalBody, responses((status = 201, description = "`{\"terminal\": execution}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn open_terminal(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<TerminalBody>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let argv = if b.command.is_empty() && b.argv.is_empty() {
        vec!["/bin/bash".into(), "-i".into()]
    } else {
        b.argv
    };
    let r = execd(&api, &caller)
        .start(pb::RunRequest {
            argv,
            command: b.command,
            cwd: b.cwd,
            env: Default::default(),
            profile: b.profile,
            timeout_ms: b.timeout_ms,
            stdin: Vec::new(),
            tty: Some(pb::Tty {
                rows: b.rows.unwrap_or(24),
                cols: b.cols.unwrap_or(80),
                term: b.term,
            }),
            open_stdin: false,
            executables: Vec::new(),
            client_ref: String::new(),
            end_unfollowed_ms: 0,
        })
        .await
        .map_err(from_exec)?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"terminal": crate::views::execution(&r)})),
    ))
}

#[utoipa::path(get, path = "/api/terminals", tag = "terminals", description = "The running web terminals (admins).", responses((status = 200, description = "`{\"terminals\": [...]}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn terminals(
    State(api): State<Shared>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    let r = execd(&api, &caller)
        .list(pb::ListRequest {
            status: pb::ExecutionStatus::Running as i32,
            terminals: true,
            page_size: 500,
            ..Default::default()
        })
        .await
        .map_err(from_exec)?;
    Ok(Json(json!({
        "terminals": r.executions.iter().map(crate::views::execution).collect::<Vec<_>>(),
    })))
}

#[utoipa::path(delete, path = "/api/terminals/{id}", tag = "terminals", description = "Closes a web terminal: its whole process tree is torn down (verified).", params(("id" = String, Path, description = "terminal (execution) id")), responses((status = 200, description = "`{\"outcome\", \"execution\"}`"), (status = 404, description = "no such terminal", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn close_terminal(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    kill_for(&api, &caller, id).await
}

#[utoipa::path(post, path = "/api/terminals/{id}/ticket", tag = "terminals", description = "Mints a single-use WebSocket ticket for this terminal, bound to the caller's session (or token) and the request's origin; valid for `gateway.terminal_ticket_ttl_s`.", params(("id" = String, Path, description = "terminal (execution) id")), responses((status = 200, description = "`{\"ticket\", \"expires_in_s\", \"ws\"}`"), (status = 404, description = "no such terminal", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn ticket(
    State(api): State<Shared>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    // The terminal must exist and run (and the caller see it).
    let e = execd(&api, &caller)
        .get(&id, false)
        .await
        .map_err(from_exec)?
        .execution
        .unwrap_or_default();
    // Only a running terminal: an ended one has nobody to type to (and its name is
    // anyone's to bind).
    if !e.tty || e.status != pb::ExecutionStatus::Running as i32 {
        return Err(ApiError::not_found(format!("no running terminal {id}")));
    }
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let secret = api.tickets.mint(Ticket {
        terminal: id.clone(),
        credential: credential(&caller, &headers),
        origin,
        expires: Instant::now() + api.ticket_ttl,
    });
    Ok(Json(json!({
        "ticket": secret,
        "expires_in_s": api.ticket_ttl.as_secs(),
        "ws": format!("/api/terminals/{id}/ws?ticket={secret}"),
    })))
}

#[derive(Deserialize)]
pub struct WsQuery {
    ticket: String,
}

/// The WebSocket upgrade (not in the OpenAPI document: it is no JSON route).
pub async fn terminal_ws(
    State(api): State<Shared>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<WsQuery>,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let refused = |why: &str| ApiError::forbidden(format!("ticket: {why}"));
    let t = api
        .tickets
        .take(&q.ticket)
        .ok_or_else(|| refused("unknown or already used"))?;
    if t.expires <= Instant::now() {
        return Err(refused("expired"));
    }
    if t.terminal != id {
        return Err(refused("minted for another terminal"));
    }
    if t.credential != credential(&caller, &headers) {
        return Err(refused("minted for another session"));
    }
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    if t.origin.is_some() && t.origin.as_deref() != origin {
        return Err(refused("minted for another origin"));
    }
    Ok(ws
        .max_message_size(1024 * 1024)
        .on_upgrade(move |socket| bridge(socket, api, caller, id)))
}

fn frame(op: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(1 + data.len());
    v.push(op);
    v.extend_from_slice(data);
    Message::Binary(v.into())
}

fn state(v: serde_json::Value) -> Message {
    frame(OP_STATE, v.to_string().as_bytes())
}

/// Relays one WebSocket to execd's `Attach` until either side ends.
async fn bridge(socket: WebSocket, api: Shared, caller: Caller, id: String) {
    let _counted = api.metrics.terminal_socket();
    let (mut out, mut inp) = socket.split();
    let (req_tx, req_rx) = tokio::sync::mpsc::channel::<pb::AttachRequest>(16);
    let open = pb::AttachRequest {
        msg: Some(pb::attach_request::Msg::Open(pb::AttachOpen {
            id: id.clone(),
            offset: 0,
            scrollback: true,
            write: true,
            stderr_offset: 0,
        })),
    };
    let _ = req_tx.send(open).await;
    let events = execd(&api, &caller)
        .attach(tokio_stream::wrappers::ReceiverStream::new(req_rx))
        .await;
    let mut events = match events {
        Ok(events) => events,
        Err(e) => {
            let _ = out
                .send(state(json!({"state": "error", "message": e.message})))
                .await;
            let _ = out.close().await;
            return;
        }
    };
    tracing::info!(terminal = %id, user = %caller.user.name, "terminal attached");
    // Output sent and not yet acknowledged; reading from execd pauses above HIGH_WATER
    // until it falls below LOW_WATER.
    let (mut unacked, mut paused) = (0u64, false);
    let mut replay_to: Option<u64> = None;
    let mut heard = Instant::now();
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    // A logout, a password change, a revoked token or a deleted account ends the
    // terminal's socket too (the terminal itself stays, for its owner to attach again).
    let signed_out = caller.signed_out(&api);
    tokio::pin!(signed_out);
    loop {
        tokio::select! {
            () = &mut signed_out => {
                let _ = out.send(state(json!({"state": "error", "message": "signed out: the credential that opened this socket no longer lets it in"}))).await;
                break;
            }
            msg = inp.next() => {
                let Some(Ok(msg)) = msg else { break };
                heard = Instant::now();
                let b = match msg {
                    Message::Binary(b) => b,
                    Message::Close(_) => break,
                    Message::Ping(_) | Message::Pong(_) => continue,
                    Message::Text(_) => {
                        let _ = out.send(state(json!({"state": "error", "message": "binary frames only"}))).await;
                        break;
                    }
                };
                let request = match (b.first(), &b[1.min(b.len())..]) {
                    (Some(&OP_INPUT), data) if !data.is_empty() => {
                        pb::attach_request::Msg::Input(data.to_vec())
                    }
                    (Some(&OP_RESIZE), [r0, r1, c0, c1]) => {
                        pb::attach_request::Msg::Resize(pb::TerminalSize {
                            rows: u32::from(u16::from_be_bytes([*r0, *r1])),
                            cols: u32::from(u16::from_be_bytes([*c0, *c1])),
                        })
                    }
                    (Some(&OP_ACK), [a, b, c, d]) => {
                        unacked = unacked.saturating_sub(u64::from(u32::from_be_bytes([*a, *b, *c, *d])));
                        if paused && unacked < LOW_WATER {
                            paused = false;
                        }
                        continue;
                    }
                    (Some(&OP_DETACH), _) => break,
                    _ => {
                        let _ = out.send(state(json!({"state": "error", "message": "unknown frame"}))).await;
                        break;
                    }
                };
                if req_tx.send(pb::AttachRequest { msg: Some(request) }).await.is_err() {
                    break;
                }
            }
            ev = events.message(), if !paused => {
                let ev = match ev {
                    Ok(Some(ev)) => ev,
                    Ok(None) => break,
                    Err(s) => {
                        let _ = out.send(state(json!({"state": "error", "message": s.message()}))).await;
                        break;
                    }
                };
                let sent = match ev.event {
                    Some(pb::attach_event::Event::Output(o)) => {
                        let end = o.offset + o.data.len() as u64;
                        unacked += o.data.len() as u64;
                        if unacked > HIGH_WATER {
                            paused = true;
                        }
                        let mut r = out.send(frame(OP_OUTPUT, &o.data)).await;
                        if r.is_ok() && replay_to.is_some_and(|to| end >= to) {
                            replay_to = None;
                            r = out.send(frame(OP_REPLAY_END, &[])).await;
                        }
                        r
                    }
                    Some(pb::attach_event::Event::ReplayedTo(to)) => {
                        let r = out.send(frame(OP_REPLAY_BEGIN, &[])).await;
                        if to == 0 {
                            out.send(frame(OP_REPLAY_END, &[])).await
                        } else {
                            replay_to = Some(to);
                            r
                        }
                    }
                    Some(pb::attach_event::Event::Exit(e)) => {
                        let _ = out.send(state(json!({"state": "exited", "execution": crate::views::execution(&e)}))).await;
                        break;
                    }
                    None => Ok(()),
                };
                if sent.is_err() {
                    break;
                }
            }
            _ = ping.tick() => {
                if heard.elapsed() > PING_EVERY * 3 || out.send(Message::Ping(Vec::new().into())).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = out.close().await;
    tracing::info!(terminal = %id, user = %caller.user.name, "terminal detached");
}
