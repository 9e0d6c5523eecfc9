//! `/api/events`: execd's `Watch` fanned out to subscribers.

use super::*;

/// A change the gateway relays to `/api/events` subscribers.
#[derive(Debug, Clone)]
pub enum Change {
    Execution(Arc<pb::Execution>),
    Approval(Arc<pb::Approval>),
    /// An MCP server's state or configuration (from mcpd's `WatchServers`).
    McpServer(Arc<argos_proto::mcp::v1::Server>),
    /// An MCP server was removed.
    McpRemoved(String),
    /// A job's change (from jobd's `WatchJobs`).
    Job(Arc<argos_proto::job::v1::JobInfo>),
    /// Changes were dropped (a slow subscriber, or execd's stream lagged): re-list.
    Missed(u64),
}

/// Between attempts to watch a daemon again.
fn watch_backoff() -> argos_common::backoff::Backoff {
    argos_common::backoff::Backoff::new(Duration::from_millis(200), Duration::from_secs(5))
}

/// Keeps one `Watch` stream on execd open for the life of the gateway (reconnecting with
/// back-off) and fans its changes out to every `/api/events` subscriber.
pub async fn watch_execd(api: Shared) {
    let mut backoff = watch_backoff();
    loop {
        match api.exec.watch().await {
            Ok(mut stream) => {
                backoff.reset();
                while let Ok(Some(ev)) = stream.message().await {
                    let change = match ev.event {
                        Some(pb::watch_event::Event::Execution(e)) => {
                            Change::Execution(Arc::new(e))
                        }
                        Some(pb::watch_event::Event::Approval(a)) => Change::Approval(Arc::new(a)),
                        Some(pb::watch_event::Event::Missed(n)) => Change::Missed(n),
                        // execd is about to start a root launch, or to stop: its trail's
                        // newest rows are to be anchored now.
                        Some(pb::watch_event::Event::AnchorWanted(_)) => {
                            api.anchor_asked.notify_one();
                            continue;
                        }
                        None => continue,
                    };
                    let _ = api.changes.send(change);
                }
                // The stream ended (execd restarted): subscribers may have missed changes.
                let _ = api.changes.send(Change::Missed(0));
            }
            Err(e) => tracing::debug!(error = %e, "watching execd"),
        }
        backoff.wait().await;
    }
}

/// Keeps one `WatchServers` stream on mcpd open for the life of the gateway
/// (reconnecting with back-off): MCP server states for `/api/events`.
pub async fn watch_mcpd(api: Shared) {
    let mut backoff = watch_backoff();
    loop {
        let mut c = api.mcp.clone();
        match c
            .watch_servers(argos_proto::mcp::v1::WatchServersRequest {})
            .await
        {
            Ok(stream) => {
                backoff.reset();
                let mut stream = stream.into_inner();
                while let Ok(Some(s)) = stream.message().await {
                    let change = match s.config.as_ref() {
                        // A removal comes as its id alone, with no state.
                        Some(c) if s.state == 0 => Change::McpRemoved(c.id.clone()),
                        Some(_) => Change::McpServer(Arc::new(s)),
                        None => continue,
                    };
                    let _ = api.changes.send(change);
                }
                let _ = api.changes.send(Change::Missed(0));
            }
            Err(e) => tracing::debug!(error = %e, "watching mcpd"),
        }
        backoff.wait().await;
    }
}

/// Keeps one `WatchJobs` stream on jobd open for the life of the gateway (reconnecting
/// with back-off): each job's changes for `/api/events`, to its owner and admins.
pub async fn watch_jobd(api: Shared) {
    use argos_proto::job::v1 as jpb;
    let mut backoff = watch_backoff();
    loop {
        let mut c = api.jobs.clone();
        match c.watch_jobs(jpb::WatchJobsRequest {}).await {
            Ok(stream) => {
                backoff.reset();
                let mut stream = stream.into_inner();
                while let Ok(Some(ev)) = stream.message().await {
                    let change = match ev.event {
                        Some(jpb::job_event::Event::Job(j)) => Change::Job(Arc::new(j)),
                        Some(jpb::job_event::Event::Missed(n)) => Change::Missed(n),
                        None => continue,
                    };
                    let _ = api.changes.send(change);
                }
                let _ = api.changes.send(Change::Missed(0));
            }
            Err(e) => tracing::debug!(error = %e, "watching jobd"),
        }
        backoff.wait().await;
    }
}

/// Server-sent events of the state changes this caller may see: `execution` (an
/// execution started or ended; admins see all, others their own), `approval` (created or
/// decided; admins only), `mcp_server` (an MCP server's state, or its removal; admins
/// only) and `missed` (some were dropped: re-list).
#[utoipa::path(get, path = "/api/events", tag = "events", description = "Server-sent events of execution changes the caller may see (admins all, users their own), approval changes and MCP server states (admins), and `missed` when some were dropped.",   responses((status = 200, description = "text/event-stream"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn events(State(api): State<Shared>, caller: Caller) -> Result<SseStream, ApiError> {
    // Held for as long as the stream is open (`quota.event_streams` per user).
    let held = api.event_streams.take(&caller.user.name)?;
    let mut changes = api.changes.subscribe();
    let until = caller.signed_out(&api);
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        use crate::sse::event;
        let _held = held;
        let _ = tx.send(event("ready", &json!({}))).await;
        loop {
            // A client that went away frees its stream at once, not at the next change.
            let change = tokio::select! {
                () = tx.closed() => return,
                c = changes.recv() => c,
            };
            let event = match change {
                Ok(Change::Execution(e)) => {
                    if !caller.is_admin() && e.principal != caller.user.name {
                        continue;
                    }
                    event(
                        "execution",
                        &json!({"execution": crate::views::execution(&e)}),
                    )
                }
                Ok(Change::Approval(a)) => {
                    // Approvals are decided by admins: only they see them go by.
                    if !caller.is_admin() {
                        continue;
                    }
                    event("approval", &json!({"approval": crate::views::approval(&a)}))
                }
                Ok(Change::McpServer(m)) => {
                    if !caller.is_admin() {
                        continue;
                    }
                    event(
                        "mcp_server",
                        &json!({"server": crate::views::mcp::server(&m, None)}),
                    )
                }
                Ok(Change::McpRemoved(id)) => {
                    if !caller.is_admin() {
                        continue;
                    }
                    event("mcp_server", &json!({"removed": id}))
                }
                Ok(Change::Job(j)) => {
                    if !caller.is_admin() && j.owner != caller.user.name {
                        continue;
                    }
                    event("job", &json!({"job": crate::views::job(&j)}))
                }
                Ok(Change::Missed(n)) => event("missed", &json!({"count": n})),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    event("missed", &json!({"count": n}))
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if tx.send(event).await.is_err() {
                return;
            }
        }
    });
    Ok(crate::sse::Stream::new(rx, until))
}

/// What each user holds open (streams, calls in flight), against a limit (0: unlimited).
#[derive(Debug, Default)]
pub struct PerUser {
    limit: u64,
    /// What is counted, and the setting that limits it (if any), for the refusal.
    what: &'static str,
    setting: &'static str,
    held: Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>,
}

/// One stream held; given back when dropped.
pub struct Held {
    user: String,
    held: Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>,
}

impl PerUser {
    pub fn new(limit: u64, what: &'static str, setting: &'static str) -> PerUser {
        PerUser {
            limit,
            what,
            setting,
            held: Arc::default(),
        }
    }

    /// How many are open, all users together.
    pub fn open(&self) -> u64 {
        let m = self.held.lock().unwrap_or_else(|e| e.into_inner());
        m.values().sum()
    }

    /// One more stream for `user`, or 429 when it holds the most allowed.
    pub fn take(&self, user: &str) -> Result<Held, ApiError> {
        let mut m = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(user.to_string()).or_insert(0);
        if self.limit > 0 && *n >= self.limit {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "quota",
                format!(
                    "quota: {user} has {n} {} open, the most allowed ({}{}); close one first",
                    self.what,
                    if self.setting.is_empty() {
                        String::new()
                    } else {
                        format!("{} = ", self.setting)
                    },
                    self.limit
                ),
            ));
        }
        *n += 1;
        Ok(Held {
            user: user.to_string(),
            held: self.held.clone(),
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut m = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.user);
            }
        }
    }
}
