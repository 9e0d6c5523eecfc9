//! Execution routes through execd: run, stream (SSE, with kill on disconnect and
//! resume), list, get and kill.

use super::*;

/// execd, for this caller: every call carries the user's name as principal.
pub(crate) fn execd(api: &Api, caller: &Caller) -> ExecClient {
    api.exec.as_user(&caller.user.name)
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecBody {
    #[serde(default)]
    command: String,
    #[serde(default)]
    argv: Vec<String>,
    #[serde(default)]
    cwd: String,
    #[serde(default)]
    profile: String,
    /// Milliseconds; 0: no limit of the caller's own (a profile that requires a clock
    /// applies its maximum).
    #[serde(default, deserialize_with = "whole")]
    timeout_ms: Option<u64>,
    #[serde(default)]
    stdin: String,
    #[serde(default)]
    env: std::collections::HashMap<String, String>,
    /// `POST /api/shell/stream` only: resume following this execution (with
    /// `Last-Event-ID`) instead of starting one.
    resume: Option<String>,
}

impl ExecBody {
    pub(crate) fn run_request(self) -> pb::RunRequest {
        pb::RunRequest {
            argv: self.argv,
            command: self.command,
            cwd: self.cwd,
            env: self.env,
            profile: self.profile,
            timeout_ms: self.timeout_ms,
            stdin: self.stdin.into_bytes(),
            tty: None,
            open_stdin: false,
            executables: Vec::new(),
            client_ref: String::new(),
            end_unfollowed_ms: 0,
        }
    }
}

#[derive(Serialize)]
pub struct Stream {
    text: String,
    /// Only when truncated: the last bytes.
    tail: Option<String>,
    total_bytes: u64,
    truncated: bool,
}

pub(crate) fn stream(o: Option<pb::Output>) -> Stream {
    let o = o.unwrap_or_default();
    Stream {
        text: String::from_utf8_lossy(&o.head).into_owned(),
        tail: o
            .truncated
            .then(|| String::from_utf8_lossy(&o.tail).into_owned()),
        total_bytes: o.total_bytes,
        truncated: o.truncated,
    }
}

/// An execution with its captured output, as the API shows it.
pub(crate) fn with_output(
    e: Option<pb::Execution>,
    stdout: Option<pb::Output>,
    stderr: Option<pb::Output>,
) -> serde_json::Value {
    json!({
        "execution": e.as_ref().map(crate::views::execution),
        "stdout": stream(stdout),
        "stderr": stream(stderr),
    })
}

#[utoipa::path(post, path = "/api/shell/exec", tag = "executions", description = "Runs a command through execd and answers with its result and capped output (admins; tokens need `exec`).", request_body = ExecBody,  responses((status = 200, description = "`{\"execution\", \"stdout\", \"stderr\"}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 413, description = "body too large", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn shell_exec(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<ExecBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    // (An empty `resume` is no resume.)
    if b.resume.as_deref().is_some_and(|r| !r.is_empty()) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "resume: only POST /api/shell/stream resumes",
        ));
    }
    let r = execd(&api, &caller)
        .run(b.run_request())
        .await
        .map_err(from_exec)?;
    Ok(Json(with_output(r.execution, r.stdout, r.stderr)))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    status: Option<String>,
    page_token: Option<String>,
    limit: Option<u32>,
}

#[utoipa::path(get, path = "/api/executions", tag = "executions", description = "The executions ledger, newest first (admins; tokens need `read`).",  params(ListQuery), responses((status = 200, description = "`{\"executions\": [...], \"next_page_token\"}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn executions(
    State(api): State<Shared>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let status = match q.status.as_deref() {
        None | Some("") => 0,
        Some(s) => crate::views::parse_status(s).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                format!("status: unknown status {s:?}"),
            )
        })?,
    };
    let r = execd(&api, &caller)
        .list(pb::ListRequest {
            status,
            page_token: q.page_token.unwrap_or_default(),
            page_size: q.limit.unwrap_or(50),
            ..Default::default()
        })
        .await
        .map_err(from_exec)?;
    Ok(Json(json!({
        "executions": r.executions.iter().map(crate::views::execution).collect::<Vec<_>>(),
        "next_page_token": r.next_page_token,
    })))
}

/// The longest `wait_ms` a read of one execution takes.
pub const MAX_WAIT_MS: u32 = 30_000;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GetQuery {
    /// Wait up to this many milliseconds (at most 30000) for a running execution, or one
    /// waiting for its approval, to end before answering; 0 or absent: answer at once.
    wait_ms: Option<u32>,
}

#[utoipa::path(get, path = "/api/executions/{id}", tag = "executions", description = "One execution with its captured output and containment report, at once or, with `wait_ms`, once it ends (whichever comes first): admins see every one (by session, or a token with `read`); anyone else sees what they requested (an agent's run: tokens with `read` or `agent`).",  params(("id" = String, Path, description = "execution id (UUID v7)"), GetQuery), responses((status = 200, description = "`{\"execution\", \"stdout\", \"stderr\"}`"), (status = 404, description = "no such execution", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn execution(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<GetQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let wait = q.wait_ms.unwrap_or(0);
    if wait > MAX_WAIT_MS {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            format!("wait_ms: at most {MAX_WAIT_MS}"),
        ));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(u64::from(wait));
    // Subscribed before the first read, so an end between the two is not missed.
    let mut changes = api.changes.subscribe();
    loop {
        let r = execd(&api, &caller)
            .get(&id, true)
            .await
            .map_err(from_exec)
            .map_err(hide_missing("execution", &id))?;
        owned(&caller, "read", &id, r.execution.as_ref())?;
        let open = r.execution.as_ref().is_some_and(|e| {
            e.status == pb::ExecutionStatus::Running as i32
                || e.status == pb::ExecutionStatus::PendingApproval as i32
        });
        if !open || tokio::time::Instant::now() >= deadline {
            return Ok(Json(with_output(r.execution, r.stdout, r.stderr)));
        }
        // Until this execution changes (or changes were dropped), or the deadline.
        loop {
            match tokio::time::timeout_at(deadline, changes.recv()).await {
                Ok(Ok(Change::Execution(e))) if e.id != id => continue,
                Ok(Ok(
                    Change::Approval(_)
                    | Change::McpServer(_)
                    | Change::McpRemoved(_)
                    | Change::Job(_),
                )) => {
                    continue;
                }
                _ => break,
            }
        }
    }
}

/// Admins see and kill every execution (by session, or with a token carrying `scope`);
/// anyone else — an admin's agent token too — only what they requested. Another's is
/// answered as one that does not exist ([`unknown`]), never "forbidden": its existence is
/// not told.
fn owned(
    caller: &Caller,
    scope: &str,
    id: &str,
    e: Option<&pb::Execution>,
) -> Result<(), ApiError> {
    if sees_all(caller, scope) || e.is_some_and(|e| e.principal == caller.user.name) {
        Ok(())
    } else {
        Err(unknown("execution", id))
    }
}

#[utoipa::path(post, path = "/api/executions/{id}/kill", tag = "executions", description = "Kills a running execution (verified identity; TERM, grace, KILL): admins any (by session, or a token with `exec`); anyone else what they requested (tokens with `exec` or `agent`).",  params(("id" = String, Path, description = "execution id (UUID v7)")), responses((status = 200, description = "`{\"outcome\", \"execution\"}`"), (status = 404, description = "no such execution", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn kill(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let e = execd(&api, &caller)
        .get(&id, false)
        .await
        .map_err(from_exec)
        .map_err(hide_missing("execution", &id))?
        .execution;
    owned(&caller, "exec", &id, e.as_ref())?;
    kill_for(&api, &caller, id).await
}

/// Kills an execution for an admin caller (a terminal's close too).
pub(crate) async fn kill_for(
    api: &Api,
    caller: &Caller,
    id: String,
) -> Result<Json<serde_json::Value>, ApiError> {
    let r = execd(api, caller).kill(&id).await.map_err(from_exec)?;
    Ok(Json(json!({
        "outcome": crate::views::kill_outcome(r.outcome),
        "execution": r.execution.as_ref().map(crate::views::execution),
    })))
}

// ---- streaming ---------------------------------------------------------------------

/// Live streams of executions started by `POST /api/shell/stream`: when a stream's client
/// goes away, its workload is killed unless a client resumes within the grace period.
/// Each is also a row of `shell_streams` until it ends, so a restarted gateway keeps the
/// promise ([`kill_orphans`]).
pub struct Streams {
    /// Per execution: how many times a client attached (a resume bumps it).
    attached: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    db: sqlx::SqlitePool,
}

impl Streams {
    pub fn new(db: sqlx::SqlitePool) -> Streams {
        Streams {
            attached: Default::default(),
            db,
        }
    }

    /// Kept in the database: a stream's command, until it ends or is killed.
    async fn keep(&self, id: &str) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT OR IGNORE INTO shell_streams (execution_id, started_at_ms) VALUES (?, ?)",
        )
        .bind(id)
        .bind(crate::accounts::now_ms())
        .execute(&self.db)
        .await
        .map(|_| ())
    }

    /// Before a stream's command is started: its reference kept, so that a gateway that
    /// dies before it keeps the command's id leaves the next one a way to find it.
    async fn starting(&self) -> Result<String, sqlx::Error> {
        let reference = format!("stream-{}", crate::accounts::new_secret());
        sqlx::query("INSERT INTO shell_stream_starts (client_ref, started_at_ms) VALUES (?, ?)")
            .bind(&reference)
            .bind(crate::accounts::now_ms())
            .execute(&self.db)
            .await?;
        Ok(reference)
    }

    /// The start is over: kept as its command (or refused, nothing to keep).
    async fn started(&self, reference: &str) {
        if let Err(e) = sqlx::query("DELETE FROM shell_stream_starts WHERE client_ref = ?")
            .bind(reference)
            .execute(&self.db)
            .await
        {
            tracing::warn!(reference, error = %e, "forgetting a stream's start");
        }
    }

    /// The command ended, or was killed: nothing more to keep.
    async fn done(&self, id: &str) {
        if let Err(e) = sqlx::query("DELETE FROM shell_streams WHERE execution_id = ?")
            .bind(id)
            .execute(&self.db)
            .await
        {
            tracing::warn!(id, error = %e, "forgetting a stream's command");
        }
    }

    pub(crate) fn attach(&self, id: &str) -> u64 {
        let mut m = self.attached.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(id.to_string()).or_insert(0);
        *n += 1;
        *n
    }

    pub(crate) fn still(&self, id: &str, generation: u64) -> bool {
        self.attached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            == Some(&generation)
    }

    pub(crate) fn forget(&self, id: &str) {
        self.attached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
}

/// `Last-Event-ID` as this API writes it: `<stdout offset>:<stderr offset>`.
pub(crate) fn offsets(headers: &HeaderMap) -> Result<[u64; 2], ApiError> {
    let Some(v) = headers.get("last-event-id") else {
        return Ok([0, 0]);
    };
    let bad = || {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            "Last-Event-ID: expected `<stdout offset>:<stderr offset>`",
        )
    };
    let s = v.to_str().map_err(|_| bad())?;
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    Ok([a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?])
}

pub(crate) type SseStream = crate::sse::Stream;

/// Runs a command (or resumes one) and streams its output as server-sent events:
/// `started` (the execution), `stdout` / `stderr` (`{"offset","text"}`, with the event id
/// `<stdout offset>:<stderr offset>` after it), then `exit` (the execution) or `error`.
#[utoipa::path(post, path = "/api/shell/stream", tag = "executions", description = "Runs a command (or resumes one, with `resume` and Last-Event-ID) as server-sent events: started, stdout, stderr (id `<stdout offset>:<stderr offset>`), exit. A client that leaves has the command killed after `gateway.stream_resume_s`.", request_body = ExecBody,  responses((status = 200, description = "text/event-stream"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn shell_stream(
    State(api): State<Shared>,
    caller: Caller,
    headers: HeaderMap,
    Body(b): Body<ExecBody>,
) -> Result<SseStream, ApiError> {
    let execd = execd(&api, &caller);
    let (id, from, started) = match b.resume.clone().filter(|r| !r.is_empty()) {
        Some(id) => {
            let at = offsets(&headers)?;
            let e = execd.get(&id, false).await.map_err(from_exec)?.execution;
            (id, at, e)
        }
        None => {
            // Its reference is kept before it starts: a gateway that dies before its id
            // is kept below leaves the next one the way to find and end it.
            let reference = api.streams.starting().await.map_err(ApiError::internal)?;
            let mut req = b.run_request();
            req.client_ref = reference.clone();
            // execd ends it on its own once nobody follows it for longer than a client
            // may take to resume and the follow to find execd again: a gateway that dies
            // leaves no command running unsupervised, even if it never comes back.
            req.end_unfollowed_ms =
                u64::try_from((api.resume_grace + argos_exec_client::RESUME_WINDOW).as_millis())
                    .unwrap_or(u64::MAX);
            let started = execd.start(req).await;
            let e = match started {
                Ok(e) => e,
                Err(e) => {
                    // A start whose answer was lost (a dropped connection) may have
                    // started: found by its reference, it is ended now; while execd
                    // cannot say, the reference stays for the next sweep to end it.
                    let listed = by_reference(&api, &reference).await;
                    if let Ok(l) = listed {
                        for x in l.executions {
                            tracing::warn!(id = %x.id, "ending a command whose start answered an error");
                            let _ = api.exec.kill(&x.id).await;
                        }
                        api.streams.started(&reference).await;
                    }
                    return Err(from_exec(e));
                }
            };
            let kept = api.streams.keep(&e.id).await;
            api.streams.started(&reference).await;
            if let Err(why) = kept {
                // Not kept, it could outlive a gateway restart with nobody reading: end
                // it now.
                let _ = api.exec.kill(&e.id).await;
                return Err(ApiError::internal(why));
            }
            (e.id.clone(), [0, 0], Some(e))
        }
    };
    let generation = api.streams.attach(&id);
    if let Err(e) = api.streams.keep(&id).await {
        // Not kept, it could outlive a gateway restart with nobody reading: end it now.
        let _ = api.exec.kill(&id).await;
        return Err(ApiError::internal(e));
    }
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let follow = execd.follow(&id, from);
    tokio::spawn(relay(api.clone(), Some(generation), started, follow, tx));
    Ok(crate::sse::Stream::new(rx, caller.signed_out(&api)))
}

/// How much of `b` to send now: all of it, unless it ends inside a UTF-8 sequence that may
/// complete with the next chunk (at most 3 bytes wait). Invalid bytes elsewhere go as
/// U+FFFD.
pub(crate) fn complete_utf8(b: &[u8]) -> usize {
    match std::str::from_utf8(b) {
        Ok(_) => b.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => {
            // Invalid somewhere: still hold back an incomplete tail.
            let tail = b.len().saturating_sub(3);
            (tail..b.len())
                .find(|&i| {
                    b[i] >= 0xC0
                        && std::str::from_utf8(&b[i..]).is_err_and(|e| e.error_len().is_none())
                })
                .unwrap_or(b.len())
        }
    }
}

/// The text of `b` that can go now and how many bytes it took (see `complete_utf8`), in
/// one pass over valid UTF-8.
pub(crate) fn whole_text(b: &[u8]) -> (std::borrow::Cow<'_, str>, usize) {
    match std::str::from_utf8(b) {
        Ok(t) => (std::borrow::Cow::Borrowed(t), b.len()),
        Err(_) => {
            let n = complete_utf8(b);
            (String::from_utf8_lossy(&b[..n]), n)
        }
    }
}

/// Follows the execution into the client's event stream (the client library follows
/// again across an execd restart); with a stream `generation` (a command the stream
/// started), if the client goes away before the end, kills the workload after the grace
/// period unless a client resumed it.
pub(crate) async fn relay(
    api: Shared,
    generation: Option<u64>,
    started: Option<pb::Execution>,
    mut follow: argos_exec_client::Follow,
    tx: crate::sse::Sender,
) {
    use crate::sse;
    use argos_exec_client::FollowItem;
    const NAMES: [&str; 2] = ["stdout", "stderr"];
    let id = follow.id().to_string();
    let mut at = follow.position();
    // The last bytes of a chunk that end mid-character wait for the next chunk, so a
    // character split between chunks arrives whole (ids stay on character boundaries).
    let mut carry: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut ended = false;
    let mut gone = tx
        .send(sse::event(
            "started",
            &json!({"execution": started.as_ref().map(crate::views::execution)}),
        ))
        .await
        .is_err();
    while !gone {
        let next = tokio::select! {
            n = follow.next() => n,
            () = tx.closed() => { gone = true; break; }
        };
        let event = match next {
            Some(Ok(FollowItem::Output {
                stream,
                offset,
                data,
            })) => {
                let i = usize::from(stream == pb::OutputStream::Stderr);
                let start = offset - carry[i].len() as u64;
                let bytes = if carry[i].is_empty() {
                    data
                } else {
                    let mut b = std::mem::take(&mut carry[i]);
                    b.extend_from_slice(&data);
                    b.into()
                };
                let (text, whole) = whole_text(&bytes);
                carry[i] = bytes[whole..].to_vec();
                if whole == 0 {
                    continue;
                }
                at[i] = start + whole as u64;
                let id = format!("{}:{}", at[0], at[1]);
                sse::output(NAMES[i], &id, start, &text)
            }
            Some(Ok(FollowItem::Exit(e))) => {
                ended = true;
                // Bytes still waiting for the rest of a character never get it.
                for i in 0..2 {
                    if carry[i].is_empty() {
                        continue;
                    }
                    let rest = std::mem::take(&mut carry[i]);
                    let start = at[i];
                    at[i] += rest.len() as u64;
                    let id = format!("{}:{}", at[0], at[1]);
                    let ev = sse::output(NAMES[i], &id, start, &String::from_utf8_lossy(&rest));
                    if tx.send(ev).await.is_err() {
                        break;
                    }
                }
                sse::event("exit", &json!({"execution": crate::views::execution(&e)}))
            }
            None => {
                ended = true;
                break;
            }
            Some(Err(e)) => {
                ended = true;
                let e = from_exec(e);
                sse::event("error", &json!({"code": e.code, "message": e.message}))
            }
        };
        if tx.send(event).await.is_err() {
            gone = !ended;
            break;
        }
        if ended {
            break;
        }
    }
    let Some(generation) = generation else {
        return; // a job's output: it runs on without its reader
    };
    if !gone || ended {
        if api.streams.still(&id, generation) {
            api.streams.forget(&id);
            api.streams.done(&id).await;
        }
        return;
    }
    // The client left mid-run: give it a moment to come back, then end the workload.
    kill_unless_resumed(&api, &id, generation).await;
}

/// The launches execd started with this reference of the gateway's (`client_ref`).
async fn by_reference(
    api: &Shared,
    reference: &str,
) -> Result<pb::ListResponse, argos_exec_client::ExecError> {
    api.exec
        .list(pb::ListRequest {
            client_ref: reference.to_string(),
            page_size: 10,
            ..Default::default()
        })
        .await
}

/// The commands of the starts a previous gateway made and did not keep (it died
/// between its Start and keeping the id), found in execd by their references, each
/// kept as a stream now; a reference execd has no launch for is forgotten. execd away
/// is waited for (a minute at most; the rows stay for the next start then).
async fn unkept_starts(api: &Shared) -> Vec<String> {
    let refs: Vec<String> = match sqlx::query_scalar("SELECT client_ref FROM shell_stream_starts")
        .fetch_all(&api.streams.db)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "reading the streams a previous gateway was starting");
            return Vec::new();
        }
    };
    let mut ids = Vec::new();
    // One minute for them all: with execd away, the rest wait for the next start.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    for reference in refs {
        let found = loop {
            let listed = by_reference(api, &reference).await;
            match listed {
                Ok(l) => break Some(l.executions),
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(reference, error = %e, "finding a stream's command");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
                Err(e) => {
                    tracing::warn!(reference, error = %e, "finding a stream's command");
                    break None;
                }
            }
        };
        let Some(found) = found else { continue };
        let mut kept = true;
        for e in found {
            tracing::info!(id = %e.id, "a stream's command whose start was not kept");
            kept &= api.streams.keep(&e.id).await.is_ok();
            ids.push(e.id);
        }
        if kept {
            api.streams.started(&reference).await;
        }
    }
    ids
}

/// After the grace period, kills the stream's command unless a client resumed it.
async fn kill_unless_resumed(api: &Shared, id: &str, generation: u64) {
    tokio::time::sleep(api.resume_grace).await;
    if !api.streams.still(id, generation) {
        return; // resumed (or another stream took over)
    }
    api.streams.forget(id);
    match api.exec.kill(id).await {
        Ok(r) => {
            tracing::info!(id, outcome = %crate::views::kill_outcome(r.outcome), "stream client gone: workload killed");
            api.streams.done(id).await;
        }
        // Ended before (or unknown): nothing left to kill.
        Err(e)
            if matches!(
                e.kind,
                argos_exec_client::ErrorKind::NotFound | argos_exec_client::ErrorKind::Conflict
            ) =>
        {
            api.streams.done(id).await
        }
        // execd away: the row stays, for the next start to try again.
        Err(e) => tracing::warn!(id, error = %e, "stream client gone: kill failed"),
    }
}

/// At start: every stream the last gateway had open lost its client with it, and so
/// did a command it was starting when it died (found by its reference). Each is given
/// the grace period to be resumed, then its command is killed, as if its client had just
/// left.
pub async fn kill_orphans(api: Shared) {
    let mut ids: Vec<String> = match sqlx::query_scalar("SELECT execution_id FROM shell_streams")
        .fetch_all(&api.streams.db)
        .await
    {
        Ok(ids) => ids,
        Err(e) => {
            tracing::error!(error = %e, "reading the streams a previous gateway left");
            return;
        }
    };
    ids.extend(unkept_starts(&api).await);
    ids.sort();
    ids.dedup();
    for id in ids {
        let generation = api.streams.attach(&id);
        let api = api.clone();
        tokio::spawn(async move { kill_unless_resumed(&api, &id, generation).await });
    }
}
