//! The broker: every configured server, each kept connected by a task of its own (its own
//! timeout, back-off after a failure, nothing shared with the others), its tools pinned
//! and capped, and the one decision of which tool may be called.

use argos_store::now_ms;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::service::{Peer, RoleClient};
use serde_json::Value as Json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast};

use crate::caps::{self, Capped, Limits};
use crate::names;
use crate::pin;
use crate::server::{self, FieldError, ServerConfig};
use crate::store::{Store, StoreError};
use crate::upstream::{self, CallError, ConnectError, Era, Info, StderrLog};

/// How a server's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Connecting,
    Connected,
    NeedsAuth,
    Timeout,
    Error,
    Disabled,
    Reconnecting,
}

/// Whether a tool may be called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolState {
    Enabled,
    /// An admin disabled it.
    Disabled,
    /// Its definition is not the one pinned: held until an admin accepts it.
    Changed,
}

/// A tool as the broker offers it.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    pub server: String,
    pub name: String,
    pub qualified: String,
    pub title: String,
    /// Capped.
    pub description: String,
    pub input_schema: Json,
    pub annotations: Json,
    /// The pin in force, and the digest of the definition offered now.
    pub pinned: String,
    pub offered: String,
    /// The definition the pin was taken of ([`ToolEntry::definition`]; empty for a tool
    /// never reviewed), for an admin to compare with what is offered.
    pub pinned_definition: String,
}

impl ToolEntry {
    /// The definition as offered (capped), as JSON: what a pin keeps to compare with.
    pub fn definition(&self) -> String {
        serde_json::json!({
            "title": self.title,
            "description": self.description,
            "input_schema": self.input_schema,
            "annotations": self.annotations,
        })
        .to_string()
    }
}

/// The one decision: may this tool of this server be called? (Listing for callers and
/// calling both ask it.)
pub fn tool_state(config: &ServerConfig, t: &ToolEntry) -> ToolState {
    if config.disabled_tools.contains(&t.name) {
        ToolState::Disabled
    } else if t.offered != t.pinned {
        ToolState::Changed
    } else {
        ToolState::Enabled
    }
}

/// The one tool of a server's listing named `qualified`. A name no tool has is no tool;
/// one that more than one tool has (a listing never holds one: `names::unique`) is
/// refused, never resolved to a guess.
fn resolve<'a>(tools: &'a [ToolEntry], qualified: &str) -> Result<&'a ToolEntry, BrokerError> {
    let mut named = tools.iter().filter(|t| t.qualified == qualified);
    let one = named
        .next()
        .ok_or_else(|| BrokerError::NoTool(qualified.to_string()))?;
    if named.next().is_some() {
        return Err(BrokerError::Refused(format!(
            "{qualified} names more than one tool: none of them is called"
        )));
    }
    Ok(one)
}

/// A server as the broker sees it now.
#[derive(Debug, Clone)]
pub struct ServerView {
    pub config: ServerConfig,
    pub state: State,
    pub error: String,
    pub since_ms: i64,
    pub connected_ms: i64,
    pub info: Info,
    pub tools: Vec<ToolEntry>,
    /// The lifecycle it speaks, as last found (kept across restarts).
    pub era: Era,
}

/// A change for `WatchServers`.
#[derive(Debug, Clone)]
pub enum Change {
    Updated(String),
    Removed(String),
}

/// Why a broker operation failed; the gRPC edge maps each to its status.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error(transparent)]
    Invalid(#[from] FieldError),
    #[error("server {0} already exists")]
    Exists(String),
    #[error("no server {0}")]
    NoServer(String),
    #[error("no tool {0}")]
    NoTool(String),
    #[error("{0}")]
    NoAuthorization(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Unavailable(String),
    /// The server has all the calls in flight it may: this one was not sent.
    #[error("{0}")]
    Busy(String),
    #[error("tool {tool}: {error}")]
    Call { tool: String, error: CallError },
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// Aborts its task when dropped: a server's connection task never outlives its slot.
struct Task(tokio::task::JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Slot {
    config: ServerConfig,
    state: State,
    error: String,
    since_ms: i64,
    connected_ms: i64,
    info: Info,
    tools: Vec<ToolEntry>,
    peer: Option<Peer<RoleClient>>,
    /// Which run of the connection task may write this slot (a stopped one may not).
    generation: u64,
    /// A stdio server's standard error (the last 64 KiB, across reconnects).
    log: Arc<StderrLog>,
    /// Its calls in flight, bounded in all and per caller.
    calls: Arc<Calls>,
    /// Its connection task, held to be dropped with the slot (which stops it).
    task: Option<Task>,
}

pub struct Broker {
    store: Store,
    limits: Limits,
    ctx: upstream::Context,
    slots: Mutex<BTreeMap<String, Slot>>,
    changes: broadcast::Sender<Change>,
    generations: std::sync::atomic::AtomicU64,
    /// Each server's era once found: it connects in that lifecycle without probing.
    eras: Mutex<BTreeMap<String, Era>>,
    /// OAuth authorizations an admin started and has not finished.
    pending: crate::oauth::Pending,
}

/// Back-off after a failed connection: 1 s, doubling, at most a minute.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

impl Broker {
    /// Loads every configured server and starts connecting the enabled ones, all at once.
    pub async fn start(
        store: Store,
        limits: Limits,
        ctx: upstream::Context,
    ) -> Result<Arc<Broker>, StoreError> {
        let configs = store.all().await?;
        let eras = store
            .eras()
            .await?
            .into_iter()
            .map(|(id, era)| (id, Era::parse(&era)))
            .collect();
        let b = Arc::new(Broker {
            eras: Mutex::new(eras),
            pending: crate::oauth::Pending::default(),
            store,
            limits,
            ctx,
            slots: Mutex::new(BTreeMap::new()),
            changes: broadcast::channel(256).0,
            generations: std::sync::atomic::AtomicU64::new(1),
        });
        for c in configs {
            b.install(c);
        }
        Ok(b)
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn era(&self, id: &str) -> Era {
        let eras = self.eras.lock().unwrap_or_else(|e| e.into_inner());
        eras.get(id).copied().unwrap_or_default()
    }

    /// Keeps the era a server was found to speak (or forgets it: `Unknown`).
    async fn set_era(&self, id: &str, era: Era) {
        let before = {
            let mut eras = self.eras.lock().unwrap_or_else(|e| e.into_inner());
            if era == Era::Unknown {
                eras.remove(id)
            } else {
                eras.insert(id.to_string(), era)
            }
        };
        if before.unwrap_or_default() == era {
            return;
        }
        if let Err(e) = self.store.set_era(id, era.word()).await {
            tracing::warn!(server = %id, error = %e, "keeping a server's era");
        }
        if era != Era::Unknown {
            tracing::info!(server = %id, era = era.word(), "the server's era found");
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    fn changed(&self, id: &str) {
        let _ = self.changes.send(Change::Updated(id.to_string()));
    }

    /// Puts a configuration in its slot (replacing any) and starts its connection task
    /// when enabled; the old task, if any, is stopped with its connection.
    fn install(self: &Arc<Self>, config: ServerConfig) {
        let id = config.id.clone();
        let generation = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let enabled = config.enabled;
        let slot = Slot {
            config,
            state: if enabled {
                State::Connecting
            } else {
                State::Disabled
            },
            error: String::new(),
            since_ms: now_ms(),
            connected_ms: 0,
            info: Info::default(),
            tools: Vec::new(),
            peer: None,
            generation,
            log: Arc::new(StderrLog::default()),
            calls: Arc::new(Calls::new(
                self.ctx.calls_per_server,
                self.ctx.calls_per_caller,
            )),
            task: None,
        };
        // The old slot (and its task) is dropped outside the lock.
        let old = self.slots().insert(id.clone(), slot);
        drop(old);
        // Started once its slot is in place: a task that ran first would find no slot of
        // its generation and end, leaving the server `connecting` for good.
        if enabled {
            let me = self.clone();
            let for_task = id.clone();
            let task = Task(tokio::spawn(async move {
                me.supervise(for_task, generation).await
            }));
            let stale = {
                let mut slots = self.slots();
                match slots.get_mut(&id) {
                    Some(s) if s.generation == generation => s.task.replace(task),
                    // Replaced meanwhile: this task stops (dropped below, outside the lock).
                    _ => Some(task),
                }
            };
            drop(stale);
        }
        self.changed(&id);
    }

    /// Writes a slot if `generation` still owns it.
    fn write_slot(&self, id: &str, generation: u64, f: impl FnOnce(&mut Slot)) -> bool {
        let done = {
            let mut slots = self.slots();
            match slots.get_mut(id) {
                Some(s) if s.generation == generation => {
                    f(s);
                    true
                }
                _ => false,
            }
        };
        if done {
            self.changed(id);
        }
        done
    }

    fn set_state(&self, id: &str, generation: u64, state: State, error: String) -> bool {
        self.write_slot(id, generation, |s| {
            if s.state != state {
                s.since_ms = now_ms();
            }
            s.state = state;
            s.error = error;
            if state != State::Connected {
                s.peer = None;
            }
        })
    }

    /// Keeps one server connected: connect within its timeout, list and pin its tools,
    /// wait for the connection to end, back off after a failure, again.
    async fn supervise(self: Arc<Self>, id: String, generation: u64) {
        let mut backoff = argos_common::backoff::Backoff::new(BACKOFF_FIRST, BACKOFF_MAX);
        let mut first = true;
        loop {
            let Some((config, log)) = self
                .slots()
                .get(&id)
                .filter(|s| s.generation == generation)
                .map(|s| (s.config.clone(), s.log.clone()))
            else {
                return;
            };
            let state = if first {
                State::Connecting
            } else {
                State::Reconnecting
            };
            if !self.set_state(&id, generation, state, String::new()) {
                return;
            }
            let timeout = config.connect_timeout();
            let era = self.era(&id);
            let attempt = tokio::time::timeout(timeout, async {
                let up = upstream::connect(&config, &self.ctx, log, era).await?;
                let tools = upstream::tools(&up.peer(), self.limits.tools_per_server)
                    .await
                    .map_err(|e| ConnectError::Failed(format!("listing its tools: {e}")))?;
                Ok::<_, ConnectError>((up, tools))
            })
            .await;
            match attempt {
                Ok(Ok((up, raw))) => {
                    let tools = match pin::listing(&self.store, &self.limits, &config, raw).await {
                        Ok(t) => t,
                        Err(e) => {
                            self.set_state(&id, generation, State::Error, e.to_string());
                            return;
                        }
                    };
                    self.set_era(&id, up.era()).await;
                    let (peer, info) = (up.peer(), up.info());
                    let live = self.write_slot(&id, generation, |s| {
                        s.state = State::Connected;
                        s.error = String::new();
                        s.since_ms = now_ms();
                        s.connected_ms = s.since_ms;
                        s.info = info;
                        s.tools = tools;
                        s.peer = Some(peer);
                    });
                    if !live {
                        return;
                    }
                    tracing::info!(server = %id, "connected");
                    backoff.reset();
                    let reason = up.service.waiting().await;
                    tracing::warn!(server = %id, ?reason, "the connection ended");
                    self.set_state(
                        &id,
                        generation,
                        State::Reconnecting,
                        "the connection ended".into(),
                    );
                }
                // Nothing a retry would change: it waits for an admin (or Reconnect).
                Ok(Err(e @ ConnectError::Refused(_))) => {
                    self.set_state(&id, generation, State::Error, e.to_string());
                    return;
                }
                Ok(Err(e @ ConnectError::NeedsAuth(_))) => {
                    self.set_state(&id, generation, State::NeedsAuth, e.to_string());
                    return;
                }
                Ok(Err(ConnectError::Failed(why))) => {
                    tracing::warn!(server = %id, %why, "connecting failed");
                    // The server may have changed era (upgraded, or replaced): the next
                    // attempt probes again.
                    self.set_era(&id, Era::Unknown).await;
                    self.set_state(&id, generation, State::Error, why);
                }
                Err(_) => {
                    tracing::warn!(server = %id, ?timeout, "no answer in time");
                    self.set_state(
                        &id,
                        generation,
                        State::Timeout,
                        format!("no answer within {} ms", timeout.as_millis()),
                    );
                }
            }
            first = false;
            backoff.wait().await;
        }
    }

    /// A stdio server's standard error, the last 64 KiB.
    pub fn stderr(&self, id: &str) -> Option<String> {
        self.slots().get(id).map(|s| s.log.text())
    }

    pub fn view(&self, id: &str) -> Option<ServerView> {
        self.slots().get(id).map(|s| ServerView {
            config: s.config.clone(),
            state: s.state,
            error: s.error.clone(),
            since_ms: s.since_ms,
            connected_ms: s.connected_ms,
            info: s.info.clone(),
            tools: s.tools.clone(),
            era: self.era(id),
        })
    }

    pub fn views(&self) -> Vec<ServerView> {
        let ids: Vec<String> = self.slots().keys().cloned().collect();
        ids.iter().filter_map(|id| self.view(id)).collect()
    }

    /// What [`Broker::add`] would keep, or why it would refuse; nothing is kept.
    pub fn check_add(&self, config: &ServerConfig) -> Result<(), BrokerError> {
        server::validate(config)?;
        if self.slots().contains_key(&config.id) {
            return Err(BrokerError::Exists(config.id.clone()));
        }
        Ok(())
    }

    /// What [`Broker::update`] would keep (secrets sent empty filled in), or why it would
    /// refuse; nothing is kept.
    pub fn check_update(&self, mut config: ServerConfig) -> Result<ServerConfig, BrokerError> {
        server::check_id(&config.id)?;
        let old = self
            .slots()
            .get(&config.id)
            .map(|s| s.config.clone())
            .ok_or_else(|| BrokerError::NoServer(config.id.clone()))?;
        keep_secrets(&old, &mut config);
        server::validate(&config)?;
        Ok(config)
    }

    pub async fn add(self: &Arc<Self>, config: ServerConfig) -> Result<ServerView, BrokerError> {
        server::validate(&config)?;
        match self.store.add(&config).await {
            Err(StoreError::Exists(id)) => return Err(BrokerError::Exists(id)),
            r => r?,
        }
        let id = config.id.clone();
        self.install(config);
        self.view(&id).ok_or(BrokerError::NoServer(id))
    }

    /// Replaces a configuration; a secret sent empty keeps the value stored.
    pub async fn update(self: &Arc<Self>, config: ServerConfig) -> Result<ServerView, BrokerError> {
        let config = self.check_update(config)?;
        let moved = self
            .slots()
            .get(&config.id)
            .is_some_and(|s| s.config.transport != config.transport);
        self.store.update(&config).await.map_err(|e| match e {
            StoreError::NotFound(id) => BrokerError::NoServer(id),
            e => e.into(),
        })?;
        // Another server (or program) behind it: its era is found again, and credentials
        // issued for the old one are not sent to the new.
        if moved {
            self.set_era(&config.id, Era::Unknown).await;
            self.pending.forget(&config.id);
            self.store.clear_oauth(&config.id).await?;
        }
        let id = config.id.clone();
        self.install(config);
        self.view(&id).ok_or(BrokerError::NoServer(id))
    }

    pub async fn remove(&self, id: &str) -> Result<(), BrokerError> {
        self.store.remove(id).await.map_err(|e| match e {
            StoreError::NotFound(id) => BrokerError::NoServer(id),
            e => e.into(),
        })?;
        let old = self.slots().remove(id);
        drop(old);
        self.pending.forget(id);
        self.eras
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        let _ = self.changes.send(Change::Removed(id.to_string()));
        Ok(())
    }

    pub async fn set_enabled(
        self: &Arc<Self>,
        id: &str,
        enabled: bool,
    ) -> Result<ServerView, BrokerError> {
        let mut config = self
            .view(id)
            .ok_or_else(|| BrokerError::NoServer(id.to_string()))?
            .config;
        config.enabled = enabled;
        self.store.update(&config).await?;
        self.install(config);
        self.view(id)
            .ok_or_else(|| BrokerError::NoServer(id.to_string()))
    }

    /// Starts authorizing a server with OAuth: the URL an admin opens; the authorization
    /// server redirects to `redirect_uri` (http or https).
    pub async fn authorize(&self, id: &str, redirect_uri: &str) -> Result<String, BrokerError> {
        let config = self
            .view(id)
            .ok_or_else(|| BrokerError::NoServer(id.to_string()))?
            .config;
        let ok = url::Url::parse(redirect_uri)
            .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
        if !ok || redirect_uri.len() > 2048 {
            return Err(BrokerError::Invalid(crate::server::FieldError {
                field: "redirect_uri".into(),
                why: "an http(s) URL, at most 2048 bytes".into(),
            }));
        }
        self.pending
            .start(&self.store, &config, redirect_uri)
            .await
            .map_err(|e| BrokerError::Refused(format!("authorizing {id}: {e}")))
    }

    /// Finishes an authorization with the code its redirect brought: the credentials are
    /// kept (sealed) and the server connects with them.
    pub async fn finish_authorization(
        self: &Arc<Self>,
        state: &str,
        code: &str,
        iss: Option<&str>,
    ) -> Result<ServerView, BrokerError> {
        let id = self
            .pending
            .finish(state, code, iss)
            .await
            .map_err(|e| match e {
                crate::oauth::FinishError::Unknown => {
                    BrokerError::NoAuthorization(format!("state: {e}"))
                }
                e => BrokerError::Refused(e.to_string()),
            })?;
        tracing::info!(server = %id, "authorized with OAuth");
        match self.view(&id) {
            Some(v) if v.config.enabled => self.reconnect(&id),
            Some(v) => Ok(v),
            None => Err(BrokerError::NoServer(id)),
        }
    }

    pub fn reconnect(self: &Arc<Self>, id: &str) -> Result<ServerView, BrokerError> {
        let config = self
            .view(id)
            .ok_or_else(|| BrokerError::NoServer(id.to_string()))?
            .config;
        if !config.enabled {
            return Err(BrokerError::Refused(format!(
                "server {id} is disabled: enable it to connect"
            )));
        }
        self.install(config);
        self.view(id)
            .ok_or_else(|| BrokerError::NoServer(id.to_string()))
    }

    pub async fn set_disabled_tools(
        self: &Arc<Self>,
        id: &str,
        disabled: Vec<String>,
    ) -> Result<ServerView, BrokerError> {
        let mut config = self
            .view(id)
            .ok_or_else(|| BrokerError::NoServer(id.to_string()))?
            .config;
        config.disabled_tools = disabled;
        server::validate(&config)?;
        self.store.update(&config).await?;
        // No reconnect: the decision reads the configuration at each listing and call.
        let done = {
            let mut slots = self.slots();
            slots.get_mut(id).map(|s| s.config = config).is_some()
        };
        if !done {
            return Err(BrokerError::NoServer(id.to_string()));
        }
        self.changed(id);
        self.view(id)
            .ok_or_else(|| BrokerError::NoServer(id.to_string()))
    }

    /// Tools with their states: all (`all`) or only those that may be called, of one
    /// server or every one.
    pub fn tools(&self, server: &str, all: bool) -> Vec<(ToolEntry, ToolState)> {
        let slots = self.slots();
        slots
            .values()
            .filter(|s| server.is_empty() || s.config.id == server)
            .filter(|s| all || s.state == State::Connected)
            .flat_map(|s| {
                s.tools
                    .iter()
                    .map(|t| (t.clone(), tool_state(&s.config, t)))
                    .collect::<Vec<_>>()
            })
            .filter(|(_, st)| all || *st == ToolState::Enabled)
            .collect()
    }

    /// Accepts a changed tool's definition: pinned anew, callable again.
    pub async fn accept(&self, qualified: &str) -> Result<ToolEntry, BrokerError> {
        let (server, name, offered, definition) = self.find(qualified).map(|f| {
            let d = f.tool.definition();
            (f.tool.server, f.tool.name, f.tool.offered, d)
        })?;
        self.store
            .pin(&server, &name, &offered, &definition)
            .await?;
        let entry = {
            let mut slots = self.slots();
            slots.get_mut(&server).and_then(|s| {
                let t = s.tools.iter_mut().find(|t| t.name == name)?;
                t.pinned = offered.clone();
                t.pinned_definition = definition.clone();
                Some(t.clone())
            })
        };
        self.changed(&server);
        entry.ok_or_else(|| BrokerError::NoTool(qualified.to_string()))
    }

    /// The one tool a qualified name names, with its server's configuration, connection
    /// and calls in flight: the only way from a name to a tool, for calling and accepting
    /// alike.
    fn find(&self, qualified: &str) -> Result<Found, BrokerError> {
        let no_tool = || BrokerError::NoTool(qualified.to_string());
        let server = names::server_of(qualified).ok_or_else(no_tool)?;
        let slots = self.slots();
        let s = slots.get(server).ok_or_else(no_tool)?;
        let t = resolve(&s.tools, qualified)?;
        Ok(Found {
            config: s.config.clone(),
            tool: t.clone(),
            peer: s.peer.clone(),
            calls: s.calls.clone(),
        })
    }

    /// Calls a tool by its qualified name: refused unless `tool_state` says it may be
    /// called and its server is connected, and, when the caller names the pin of the
    /// definition it decided on (`pinned`, from a listing), unless that is the pin in
    /// force; and refused, unsent, when its server has `mcp.calls_per_server` calls in
    /// flight, or `caller` (a user, a task's owner) `mcp.calls_per_caller` of them.
    /// Admitted, it goes out at once beside the server's other calls, on the same
    /// connection, with its own deadline. Never retried (a second try could act twice).
    pub async fn call(
        &self,
        caller: &str,
        qualified: &str,
        pinned: &str,
        arguments_json: &str,
    ) -> Result<(String, Capped, bool), BrokerError> {
        let arguments = match arguments_json.trim() {
            "" => None,
            text => match serde_json::from_str::<Json>(text) {
                Ok(Json::Object(m)) => Some(m),
                Ok(_) => {
                    return Err(FieldError {
                        field: "arguments_json".into(),
                        why: "not a JSON object".into(),
                    }
                    .into());
                }
                Err(e) => {
                    return Err(FieldError {
                        field: "arguments_json".into(),
                        why: format!("not JSON: {e}"),
                    }
                    .into());
                }
            },
        };
        let Found {
            config,
            tool,
            peer,
            calls,
        } = self.find(qualified)?;
        match tool_state(&config, &tool) {
            ToolState::Enabled => {}
            ToolState::Disabled => {
                return Err(BrokerError::Refused(format!(
                    "tool {qualified} is disabled by an admin"
                )));
            }
            ToolState::Changed => {
                return Err(BrokerError::Refused(format!(
                    "tool {qualified} changed its definition since it was pinned: an admin must accept it first"
                )));
            }
        }
        if !pinned.is_empty() && pinned != tool.pinned {
            return Err(BrokerError::Refused(format!(
                "tool {qualified} is not the definition listed to the caller (its pin changed since): list the tools again"
            )));
        }
        let peer = peer.ok_or_else(|| {
            BrokerError::Unavailable(format!("server {} is not connected", config.id))
        })?;
        // Held until the call ends: answered, out of time, or dropped by its caller.
        let _place = calls.admit(&config.id, caller)?;
        let answer = upstream::call(&peer, &tool.name, arguments, config.call_timeout())
            .await
            .map_err(|error| BrokerError::Call {
                tool: qualified.to_string(),
                error,
            })?;
        let capped = caps::result(answer.pieces, answer.structured, &self.limits);
        Ok((config.id, capped, answer.is_error))
    }
}

/// A tool's server as `find` answers it.
struct Found {
    config: ServerConfig,
    tool: ToolEntry,
    peer: Option<Peer<RoleClient>>,
    calls: Arc<Calls>,
}

/// A server's calls in flight: at most `limit` in all, and `per_caller` of one caller.
struct Calls {
    all: Arc<Semaphore>,
    limit: usize,
    per_caller: usize,
    /// Calls in flight by caller (only callers with one).
    held: Arc<Mutex<HashMap<String, usize>>>,
}

/// A place among a server's calls in flight; given back when dropped.
#[derive(Debug)]
struct Place {
    _permit: OwnedSemaphorePermit,
    caller: String,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.caller) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.caller);
            }
        }
    }
}

impl Calls {
    fn new(limit: usize, per_caller: usize) -> Calls {
        Calls {
            all: Arc::new(Semaphore::new(limit)),
            limit,
            per_caller: per_caller.min(limit),
            held: Arc::default(),
        }
    }

    /// A place for a call of `caller` on `server`, or the refusal when the server's or the
    /// caller's places are all taken: at once and before anything is sent, so the caller
    /// knows nothing was called and may try again. Not a queue: a call waiting there would
    /// spend its deadline on nothing and hide from its caller that a bound is reached.
    fn admit(&self, server: &str, caller: &str) -> Result<Place, BrokerError> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        // The server's bound first: when it is full, that is what the caller is told.
        let permit = self.all.clone().try_acquire_owned().map_err(|_| {
            BrokerError::Busy(format!(
                "server {server} has {} tool calls in flight, the most it may (mcp.calls_per_server): this one was not sent; try again once one has answered",
                self.limit
            ))
        })?;
        let mine = held.get(caller).copied().unwrap_or(0);
        if mine >= self.per_caller {
            return Err(BrokerError::Busy(format!(
                "{caller:?} has {mine} tool calls in flight on server {server}, the most one caller may (mcp.calls_per_caller): this one was not sent; try again once one has answered"
            )));
        }
        *held.entry(caller.to_string()).or_insert(0) += 1;
        Ok(Place {
            _permit: permit,
            caller: caller.to_string(),
            held: self.held.clone(),
        })
    }
}

/// Where a configuration's secrets go: the stdio program, or the URL's origin.
fn destination(c: &ServerConfig) -> String {
    use server::Transport as T;
    match &c.transport {
        T::Stdio { command, args, .. } => format!("stdio:{command}\0{}", args.join("\0")),
        T::StreamableHttp { url, .. } | T::Sse { url, .. } => url::Url::parse(url)
            .map(|u| {
                format!(
                    "{}:{}",
                    c.transport.word(),
                    u.origin().ascii_serialization()
                )
            })
            .unwrap_or_default(),
    }
}

/// An update's secrets sent empty keep their stored values (answers never carry them) —
/// only while they still go where they went: a changed URL origin or program takes its
/// secrets anew, so a stored token is never sent somewhere else.
fn keep_secrets(old: &ServerConfig, new: &mut ServerConfig) {
    use server::Transport as T;
    if destination(old) != destination(new) {
        return;
    }
    let old_values: BTreeMap<String, server::Value> = match &old.transport {
        T::Stdio { env, .. } => env.clone(),
        T::StreamableHttp { headers, .. } | T::Sse { headers, .. } => headers.clone(),
    };
    for (k, v) in new.transport.values_mut() {
        if v.secret
            && v.value.is_empty()
            && let Some(o) = old_values.get(k).filter(|o| o.secret)
        {
            v.value = o.value.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{Transport, Value};

    fn config() -> ServerConfig {
        ServerConfig {
            id: "s".into(),
            name: "s".into(),
            transport: Transport::StreamableHttp {
                url: "https://x/".into(),
                headers: [(
                    "Authorization".to_string(),
                    Value {
                        value: "Bearer kept".into(),
                        secret: true,
                    },
                )]
                .into(),
            },
            enabled: true,
            disabled_tools: vec!["rm".into()],
            connect_timeout_ms: 0,
            call_timeout_ms: 0,
            local: false,
        }
    }

    fn tool(name: &str, pinned: &str, offered: &str) -> ToolEntry {
        ToolEntry {
            server: "s".into(),
            name: name.into(),
            qualified: names::qualified("s", name),
            title: String::new(),
            description: String::new(),
            input_schema: serde_json::json!({}),
            annotations: Json::Null,
            pinned: pinned.into(),
            offered: offered.into(),
            pinned_definition: String::new(),
        }
    }

    #[test]
    fn one_decision_for_disabled_changed_and_callable_tools() {
        let c = config();
        assert_eq!(tool_state(&c, &tool("echo", "a", "a")), ToolState::Enabled);
        assert_eq!(tool_state(&c, &tool("rm", "a", "a")), ToolState::Disabled);
        assert_eq!(tool_state(&c, &tool("echo", "a", "b")), ToolState::Changed);
        // Disabled wins over changed: an admin's refusal is the first thing said.
        assert_eq!(tool_state(&c, &tool("rm", "a", "b")), ToolState::Disabled);
    }

    /// The review's case: `get.time` (only reads) and `get_time_<its old hash>` (writes)
    /// on one server. Each name resolves to its own tool, disabling one by its upstream
    /// name leaves the other callable, and a name two entries share resolves to neither.
    #[test]
    fn each_qualified_name_resolves_to_its_own_tool_and_no_other() {
        let read = "get.time";
        let q = names::qualified("s", read);
        let write = q.strip_prefix("mcp__s__").unwrap().to_string();
        let tools = vec![tool(read, "a", "a"), tool(&write, "b", "b")];
        assert_ne!(tools[0].qualified, tools[1].qualified);
        for t in &tools {
            assert_eq!(resolve(&tools, &t.qualified).unwrap().name, t.name);
        }
        assert!(matches!(
            resolve(&tools, "mcp__s__nope"),
            Err(BrokerError::NoTool(_))
        ));
        let mut c = config();
        c.disabled_tools = vec![read.into()];
        let state = |c: &ServerConfig, n: &str| tool_state(c, resolve(&tools, n).unwrap());
        assert_eq!(state(&c, &tools[0].qualified), ToolState::Disabled);
        assert_eq!(state(&c, &tools[1].qualified), ToolState::Enabled);
        c.disabled_tools = vec![write.clone()];
        assert_eq!(state(&c, &tools[0].qualified), ToolState::Enabled);
        assert_eq!(state(&c, &tools[1].qualified), ToolState::Disabled);
        // A listing that held one name twice (as before this rule) is refused, not guessed at.
        let mut shared = tool(&write, "b", "b");
        shared.qualified = q.clone();
        let both = vec![tool(read, "a", "a"), shared];
        assert!(matches!(resolve(&both, &q), Err(BrokerError::Refused(_))));
    }

    /// A server's calls in flight are bounded: one more is refused at once, unsent, saying
    /// why; a call that ends (answered, out of time or dropped) gives its place back.
    #[test]
    fn calls_beyond_a_servers_bound_are_refused_at_once_and_places_come_back() {
        let calls = Calls::new(2, 2);
        let first = calls.admit("slow", "ann").unwrap();
        let _second = calls.admit("slow", "bob").unwrap();
        let e = calls.admit("slow", "cid").unwrap_err();
        assert!(matches!(e, BrokerError::Busy(_)), "{e:?}");
        let why = e.to_string();
        assert!(
            why.contains("server slow has 2 tool calls in flight")
                && why.contains("mcp.calls_per_server")
                && why.contains("not sent"),
            "{why}"
        );
        drop(first);
        assert!(calls.admit("slow", "cid").is_ok());
    }

    /// One caller holds at most its share of a server's places: another still gets in
    /// (the review: one user filled a server's 32 places until their deadlines ran out).
    #[test]
    fn one_caller_cannot_take_every_place_of_a_server() {
        let calls = Calls::new(4, 2);
        let mine: Vec<Place> = (0..2)
            .map(|_| calls.admit("s", "mallory").unwrap())
            .collect();
        let e = calls.admit("s", "mallory").unwrap_err();
        assert!(matches!(e, BrokerError::Busy(_)), "{e:?}");
        assert!(e.to_string().contains("mcp.calls_per_caller"), "{e}");
        let _theirs = calls.admit("s", "alice").unwrap();
        let _more = calls.admit("s", "bob").unwrap();
        drop(mine);
        assert!(calls.held.lock().unwrap().get("mallory").is_none());
        assert!(calls.admit("s", "mallory").is_ok());
    }

    #[test]
    fn an_update_keeps_secrets_sent_empty_and_takes_new_ones() {
        let old = config();
        let mut new = config();
        if let Transport::StreamableHttp { headers, .. } = &mut new.transport {
            headers.get_mut("Authorization").unwrap().value.clear();
        }
        keep_secrets(&old, &mut new);
        assert_eq!(new, old);
        let mut changed = config();
        if let Transport::StreamableHttp { headers, .. } = &mut changed.transport {
            headers.get_mut("Authorization").unwrap().value = "Bearer new".into();
        }
        let expect = changed.clone();
        keep_secrets(&old, &mut changed);
        assert_eq!(changed, expect);
        // Sent elsewhere, a stored secret is not kept: it must be given again.
        let mut moved = config();
        if let Transport::StreamableHttp { url, headers } = &mut moved.transport {
            *url = "https://elsewhere.example/mcp".into();
            headers.get_mut("Authorization").unwrap().value.clear();
        }
        keep_secrets(&old, &mut moved);
        let Transport::StreamableHttp { headers, .. } = &moved.transport else {
            panic!()
        };
        assert_eq!(headers["Authorization"].value, "");
    }
}
