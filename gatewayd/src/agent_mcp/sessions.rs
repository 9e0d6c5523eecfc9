//! `/mcp`'s 2025-11-25 sessions: whose each is, how many one token and one user hold, and
//! when each ends.
//!
//! rmcp keeps sessions by their id alone, each a task of its own with its channels and
//! caches. Here each id is bound to the token that opened it (a request naming a session
//! another token opened, or one not known here, is answered as if there were no such
//! session — so an id seen elsewhere, a log or a proxy, gives no other agent its stream,
//! its pending questions or its watches), and every session rmcp holds is counted:
//!
//! - an `initialize` first takes a place among its token's sessions
//!   (`gateway.mcp_sessions_per_token`) and its user's (`gateway.mcp_sessions_per_user`).
//!   Beyond a bound, the least recently used idle session of that token (or, at the user's
//!   bound, of that user) is ended once the new one is open: a client that restarts
//!   without closing its sessions gets in again at once instead of waiting out the idle
//!   timeout, and what it left behind goes. When every one is busy the `initialize` is
//!   refused (429, naming the setting) and nothing is opened;
//! - a session is busy while a request of it is in flight or its answer (an event stream,
//!   the standalone `GET` stream) is still being sent; one idle for
//!   `gateway.mcp_session_idle_s` is ended. rmcp's own idle timer is off: it cannot see a
//!   stream that is open and quiet, and would end a session in the middle of a long call;
//! - a session ends through rmcp's session manager (its task told to stop, its entry
//!   removed), so its task, its channels and the handler with its watches are dropped;
//! - a session rmcp holds that is not known here (its `initialize` answered but never
//!   recorded) is ended after [`STRAY_GRACE`], and one rmcp ended by itself is forgotten.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// How long a session rmcp holds may go unknown here before it is ended (far longer than
/// an `initialize` takes between rmcp opening the session and this table recording it).
const STRAY_GRACE: Duration = Duration::from_secs(60);

/// The bounds on sessions (settings `gateway.mcp_sessions_per_token`,
/// `gateway.mcp_sessions_per_user`, `gateway.mcp_session_idle_s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub per_token: usize,
    pub per_user: usize,
    pub idle: Duration,
}

impl Limits {
    /// The bounds from the settings, each at least 1.
    pub fn new(per_token: u64, per_user: u64, idle_s: u64) -> Limits {
        let count = |n: u64| usize::try_from(n.max(1)).unwrap_or(usize::MAX);
        Limits {
            per_token: count(per_token),
            per_user: count(per_user),
            idle: Duration::from_secs(idle_s.max(1)),
        }
    }

    /// How often idle sessions are looked for: a quarter of the idle time, between 1 s and
    /// 30 s (a session ends at most that long after its idle time is up).
    fn sweep_every(&self) -> Duration {
        (self.idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(30))
    }
}

/// Why an `initialize` opened nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "this token holds {0} MCP sessions, the most allowed (gateway.mcp_sessions_per_token = {0}), and none is idle: end one (DELETE /mcp with its Mcp-Session-Id) first"
    )]
    Token(usize),
    #[error(
        "{user} holds {limit} MCP sessions, the most allowed (gateway.mcp_sessions_per_user = {limit}), and none is idle: end one (DELETE /mcp with its Mcp-Session-Id) first"
    )]
    User { user: String, limit: usize },
}

/// The sessions of `/mcp`, and rmcp's session manager that holds them.
pub struct Sessions {
    limits: Limits,
    table: Arc<Mutex<Table>>,
    manager: Arc<LocalSessionManager>,
}

impl Sessions {
    pub fn new(limits: Limits) -> Sessions {
        let mut manager = LocalSessionManager::default();
        // Idle sessions are ended here, where a quiet open stream and a long call are seen.
        manager.session_config.keep_alive = None;
        // An answered request's messages are kept seconds, not a minute (`rate.rs`).
        manager.session_config.completed_cache_ttl = super::rate::COMPLETED_TTL;
        Sessions {
            limits,
            table: Arc::default(),
            manager: Arc::new(manager),
        }
    }

    /// rmcp's session manager, for the service.
    pub fn manager(&self) -> Arc<LocalSessionManager> {
        self.manager.clone()
    }

    /// How many sessions are open, all tokens together.
    pub fn open(&self) -> usize {
        lock(&self.table).live.len()
    }

    /// A place for the session an `initialize` of `token` (of `user`) is about to open, or
    /// why there is none.
    pub fn reserve(&self, token: i64, user: &str) -> Result<Place, Refused> {
        let number = lock(&self.table).reserve(token, user, &self.limits)?;
        Ok(Place {
            table: self.table.clone(),
            number,
            taken: false,
        })
    }

    /// The session `id` for a request of `token`, busy until the returned guard is
    /// dropped; `None` when it is not that token's (or not known at all).
    pub fn enter(&self, id: &str, token: i64) -> Option<Busy> {
        lock(&self.table)
            .enter(id, token, Instant::now())
            .then(|| Busy {
                table: self.table.clone(),
                id: id.to_string(),
            })
    }

    /// Forgets session `id` (its DELETE ended it in rmcp).
    pub fn forget(&self, id: &str) {
        lock(&self.table).live.remove(id);
    }

    /// Ends session `id` in rmcp: its task stops, its entry goes, and what it held is
    /// dropped with them.
    pub async fn end(&self, id: &str) {
        lock(&self.table).live.remove(id);
        if let Err(e) = self.manager.close_session(&id.into()).await {
            tracing::warn!(session = id, error = %e, "ending an MCP session");
        }
    }

    /// Ends the sessions idle too long and those rmcp holds unknown here too long, and
    /// forgets those rmcp ended by itself.
    pub async fn sweep(&self) {
        let taken = Instant::now();
        let held: HashSet<String> = self
            .manager
            .sessions
            .read()
            .await
            .keys()
            .map(|id| id.to_string())
            .collect();
        let ending = {
            let mut t = lock(&self.table);
            let now = Instant::now();
            let mut ending = t.expired(now, self.limits.idle);
            ending.extend(t.reconcile(&held, taken, now));
            ending
        };
        for id in ending {
            tracing::debug!(session = %id, "MCP session ended (idle)");
            self.end(&id).await;
        }
    }

    /// Ends every session whose token no longer lets it in (`live` says which do): a
    /// revoked token, a password change or a deleted account closes its agents' sessions,
    /// their open streams and watches with them.
    pub async fn end_signed_out<F, Fut>(&self, live: F)
    where
        F: Fn(i64) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let tokens: HashSet<i64> = lock(&self.table).live.values().map(|s| s.token).collect();
        for token in tokens {
            if live(token).await {
                continue;
            }
            let ending: Vec<String> = lock(&self.table)
                .live
                .iter()
                .filter(|(_, s)| s.token == token)
                .map(|(id, _)| id.clone())
                .collect();
            for id in ending {
                tracing::info!(session = %id, token, "MCP session ended (its token no longer lets it in)");
                self.end(&id).await;
            }
        }
    }

    /// Sweeps for as long as the gateway runs.
    pub async fn expire(&self) {
        let mut every = tokio::time::interval(self.limits.sweep_every());
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            self.sweep().await;
        }
    }
}

/// A place taken for a session being opened; given back when dropped unless the session
/// was opened in it.
pub struct Place {
    table: Arc<Mutex<Table>>,
    number: u64,
    taken: bool,
}

impl Place {
    /// Session `id` was opened in this place: it is now its token's. Answers the session
    /// it displaces, to be ended ([`Sessions::end`]).
    pub fn opened(mut self, id: &str) -> Option<String> {
        self.taken = true;
        lock(&self.table).opened(self.number, id, Instant::now())
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if !self.taken {
            lock(&self.table).abandoned(self.number);
        }
    }
}

/// A session in use by one request, until its answer has been sent.
pub struct Busy {
    table: Arc<Mutex<Table>>,
    id: String,
}

impl Drop for Busy {
    fn drop(&mut self) {
        lock(&self.table).leave(&self.id, Instant::now());
    }
}

fn lock(table: &Mutex<Table>) -> MutexGuard<'_, Table> {
    table.lock().unwrap_or_else(|e| e.into_inner())
}

/// The bookkeeping, with no I/O: what each session is, and the places being opened.
#[derive(Debug, Default)]
struct Table {
    live: HashMap<String, Session>,
    opening: HashMap<u64, Opening>,
    next: u64,
    /// Sessions rmcp holds that are not known here, since when.
    strays: HashMap<String, Instant>,
}

#[derive(Debug)]
struct Session {
    token: i64,
    user: String,
    opened: Instant,
    /// When a request of it last began or its answer last ended.
    seen: Instant,
    /// Requests in flight and answers still being sent.
    busy: usize,
    /// To be ended when the session that displaces it is open.
    doomed: bool,
}

#[derive(Debug)]
struct Opening {
    token: i64,
    user: String,
    /// The session ended once this one is open.
    victim: Option<String>,
}

impl Table {
    /// Sessions held by those `of` says, counting those being opened (and not those
    /// already displaced).
    fn holding(&self, of: impl Fn(i64, &str) -> bool) -> usize {
        let live = self
            .live
            .values()
            .filter(|s| !s.doomed && of(s.token, s.user.as_str()))
            .count();
        live + self
            .opening
            .values()
            .filter(|o| of(o.token, o.user.as_str()))
            .count()
    }

    /// The least recently used idle session among those `of` says.
    fn least_recent_idle(&self, of: impl Fn(&Session) -> bool) -> Option<String> {
        self.live
            .iter()
            .filter(|(_, s)| !s.doomed && s.busy == 0 && of(s))
            .min_by_key(|(_, s)| s.seen)
            .map(|(id, _)| id.clone())
    }

    fn reserve(&mut self, token: i64, user: &str, limits: &Limits) -> Result<u64, Refused> {
        let victim = if self.holding(|t, _| t == token) >= limits.per_token {
            Some(
                self.least_recent_idle(|s| s.token == token)
                    .ok_or(Refused::Token(limits.per_token))?,
            )
        } else if self.holding(|_, u| u == user) >= limits.per_user {
            Some(
                self.least_recent_idle(|s| s.user == user)
                    .ok_or_else(|| Refused::User {
                        user: user.to_string(),
                        limit: limits.per_user,
                    })?,
            )
        } else {
            None
        };
        if let Some(s) = victim.as_ref().and_then(|v| self.live.get_mut(v)) {
            s.doomed = true;
        }
        self.next += 1;
        self.opening.insert(
            self.next,
            Opening {
                token,
                user: user.to_string(),
                victim,
            },
        );
        Ok(self.next)
    }

    fn opened(&mut self, number: u64, id: &str, now: Instant) -> Option<String> {
        let o = self.opening.remove(&number)?;
        self.live.insert(
            id.to_string(),
            Session {
                token: o.token,
                user: o.user,
                opened: now,
                seen: now,
                busy: 0,
                doomed: false,
            },
        );
        let victim = o.victim?;
        self.live.remove(&victim);
        Some(victim)
    }

    fn abandoned(&mut self, number: u64) {
        if let Some(victim) = self.opening.remove(&number).and_then(|o| o.victim)
            && let Some(s) = self.live.get_mut(&victim)
        {
            s.doomed = false;
        }
    }

    fn enter(&mut self, id: &str, token: i64, now: Instant) -> bool {
        match self.live.get_mut(id) {
            Some(s) if s.token == token && !s.doomed => {
                s.busy += 1;
                s.seen = now;
                true
            }
            _ => false,
        }
    }

    fn leave(&mut self, id: &str, now: Instant) {
        if let Some(s) = self.live.get_mut(id) {
            s.busy = s.busy.saturating_sub(1);
            s.seen = now;
        }
    }

    /// Removes and answers the sessions idle for `idle` or longer.
    fn expired(&mut self, now: Instant, idle: Duration) -> Vec<String> {
        let ids: Vec<String> = self
            .live
            .iter()
            .filter(|(_, s)| !s.doomed && s.busy == 0 && now.duration_since(s.seen) >= idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            self.live.remove(id);
        }
        ids
    }

    /// Against `held`, the sessions rmcp held at `taken`: forgets those it no longer holds
    /// (opened before `taken`: a newer one was not in the list yet), and answers those it
    /// has held unknown here for [`STRAY_GRACE`].
    fn reconcile(&mut self, held: &HashSet<String>, taken: Instant, now: Instant) -> Vec<String> {
        self.live
            .retain(|id, s| held.contains(id) || s.opened >= taken);
        self.strays
            .retain(|id, _| held.contains(id) && !self.live.contains_key(id));
        for id in held {
            if !self.live.contains_key(id) {
                self.strays.entry(id.clone()).or_insert(now);
            }
        }
        let ids: Vec<String> = self
            .strays
            .iter()
            .filter(|(_, since)| now.duration_since(**since) >= STRAY_GRACE)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            self.strays.remove(id);
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        per_token: 2,
        per_user: 3,
        idle: Duration::from_secs(10),
    };

    /// Opens session `id` for `token` of `user` at `at`; answers what it displaced.
    fn open(t: &mut Table, id: &str, token: i64, user: &str, at: Instant) -> Option<String> {
        let n = t.reserve(token, user, &LIMITS).expect("a place");
        t.opened(n, id, at)
    }

    /// An instant `n` ms after `t0`.
    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn a_session_serves_only_the_token_that_opened_it() {
        let mut t = Table::default();
        let t0 = Instant::now();
        assert!(!t.enter("abc", 1, t0), "unknown: no such session");
        open(&mut t, "abc", 1, "alice", t0);
        assert!(t.enter("abc", 1, t0));
        assert!(!t.enter("abc", 2, t0));
    }

    #[test]
    fn a_token_past_its_bound_displaces_its_least_recently_used_idle_session() {
        let mut t = Table::default();
        let t0 = Instant::now();
        assert_eq!(open(&mut t, "a", 1, "alice", t0), None);
        assert_eq!(open(&mut t, "b", 1, "alice", ms(t0, 1)), None);
        // `a` used since `b` was opened: `b` is the least recently used.
        assert!(t.enter("a", 1, ms(t0, 2)));
        t.leave("a", ms(t0, 3));
        assert_eq!(open(&mut t, "c", 1, "alice", ms(t0, 4)), Some("b".into()));
        assert_eq!(t.live.len(), 2);
        assert!(!t.enter("b", 1, ms(t0, 5)), "a displaced session is gone");
        assert!(t.enter("a", 1, ms(t0, 5)) && t.enter("c", 1, ms(t0, 5)));
    }

    #[test]
    fn a_token_whose_sessions_are_all_busy_is_refused() {
        let mut t = Table::default();
        let t0 = Instant::now();
        open(&mut t, "a", 1, "alice", t0);
        open(&mut t, "b", 1, "alice", t0);
        assert!(t.enter("a", 1, t0));
        assert!(t.enter("b", 1, t0));
        assert_eq!(t.reserve(1, "alice", &LIMITS), Err(Refused::Token(2)));
        assert!(
            Refused::Token(2)
                .to_string()
                .contains("gateway.mcp_sessions_per_token = 2")
        );
        assert!(t.opening.is_empty(), "a refusal takes no place");
        // The answer of one sent: it is idle, and gives way.
        t.leave("b", ms(t0, 1));
        let n = t.reserve(1, "alice", &LIMITS).expect("a place");
        assert_eq!(t.opened(n, "c", ms(t0, 2)), Some("b".into()));
    }

    #[test]
    fn a_user_past_their_bound_displaces_their_own_idle_session_only() {
        let mut t = Table::default();
        let t0 = Instant::now();
        open(&mut t, "b1", 3, "bob", t0);
        open(&mut t, "a1", 1, "alice", ms(t0, 1));
        open(&mut t, "a2", 1, "alice", ms(t0, 2));
        open(&mut t, "a3", 2, "alice", ms(t0, 3));
        // Token 4 holds nothing, but alice holds 3: her least recent idle one goes.
        assert_eq!(open(&mut t, "a4", 4, "alice", ms(t0, 4)), Some("a1".into()));
        assert!(
            t.live.contains_key("b1"),
            "bob's session is not alice's to end"
        );
        for id in ["a2", "a3", "a4"] {
            let token = t.live[id].token;
            assert!(t.enter(id, token, ms(t0, 5)));
        }
        assert_eq!(
            t.reserve(5, "alice", &LIMITS),
            Err(Refused::User {
                user: "alice".into(),
                limit: 3
            })
        );
        assert!(
            t.reserve(3, "bob", &LIMITS).is_ok(),
            "bob is not held back by alice"
        );
    }

    #[test]
    fn places_being_opened_count_and_each_displaces_a_different_session() {
        let mut t = Table::default();
        let t0 = Instant::now();
        open(&mut t, "a", 1, "alice", t0);
        open(&mut t, "b", 1, "alice", ms(t0, 1));
        let first = t.reserve(1, "alice", &LIMITS).expect("a place");
        let second = t.reserve(1, "alice", &LIMITS).expect("a place");
        assert_eq!(
            t.reserve(1, "alice", &LIMITS),
            Err(Refused::Token(2)),
            "two opening, none left to displace"
        );
        assert_eq!(t.opened(first, "c", ms(t0, 2)), Some("a".into()));
        assert_eq!(t.opened(second, "d", ms(t0, 3)), Some("b".into()));
        let mut ids: Vec<&String> = t.live.keys().collect();
        ids.sort();
        assert_eq!(ids, ["c", "d"]);
    }

    #[test]
    fn an_initialize_that_opened_nothing_gives_its_place_back() {
        let mut t = Table::default();
        let t0 = Instant::now();
        open(&mut t, "a", 1, "alice", t0);
        open(&mut t, "b", 1, "alice", t0);
        let n = t.reserve(1, "alice", &LIMITS).expect("a place");
        assert!(t.live.values().any(|s| s.doomed));
        t.abandoned(n);
        assert!(t.opening.is_empty());
        assert!(t.live.values().all(|s| !s.doomed), "nothing displaced");
        assert!(t.enter("a", 1, t0) && t.enter("b", 1, t0));
    }

    #[test]
    fn idle_sessions_expire_and_busy_ones_do_not() {
        let mut t = Table::default();
        let t0 = Instant::now();
        open(&mut t, "a", 1, "alice", t0);
        open(&mut t, "b", 1, "alice", t0);
        assert!(t.enter("b", 1, t0), "an open stream");
        assert!(t.expired(ms(t0, 9_999), LIMITS.idle).is_empty());
        let later = t0 + LIMITS.idle;
        assert_eq!(t.expired(later, LIMITS.idle), ["a".to_string()]);
        assert!(t.expired(later, LIMITS.idle).is_empty(), "b is busy");
        t.leave("b", later);
        assert!(t.expired(later, LIMITS.idle).is_empty(), "b was just used");
        assert_eq!(
            t.expired(later + LIMITS.idle, LIMITS.idle),
            ["b".to_string()]
        );
        assert!(t.live.is_empty());
    }

    #[test]
    fn sessions_rmcp_ended_are_forgotten_and_unknown_ones_end_after_a_grace() {
        let mut t = Table::default();
        let t0 = Instant::now();
        open(&mut t, "a", 1, "alice", t0);
        open(&mut t, "b", 1, "alice", t0);
        let taken = ms(t0, 1);
        let held: HashSet<String> = ["b", "x"].map(String::from).into();
        assert!(t.reconcile(&held, taken, taken).is_empty());
        assert!(!t.live.contains_key("a"), "rmcp ended it");
        assert!(t.live.contains_key("b"));
        // Opened after rmcp's list was taken: not in it, and kept.
        open(&mut t, "c", 2, "alice", ms(t0, 2));
        assert!(t.reconcile(&held, taken, ms(t0, 3)).is_empty());
        assert!(t.live.contains_key("c"));
        assert_eq!(
            t.reconcile(&held, taken, taken + STRAY_GRACE),
            ["x".to_string()]
        );
        assert!(t.strays.is_empty());
    }

    #[test]
    fn limits_are_at_least_one() {
        let l = Limits::new(0, 0, 0);
        assert_eq!((l.per_token, l.per_user), (1, 1));
        assert_eq!(l.idle, Duration::from_secs(1));
        assert_eq!(l.sweep_every(), Duration::from_secs(1));
        assert_eq!(
            Limits::new(32, 64, 300).sweep_every(),
            Duration::from_secs(30)
        );
    }
}
