//! A 2025-11-25 session belongs to the token that opened it. rmcp keeps sessions by their
//! id alone; here each id is bound to its token when `initialize` answers with it, and a
//! request naming a session another token opened is answered as if there were no such
//! session — so a session id seen elsewhere (a log, a proxy) gives no other agent its
//! stream, its pending questions or its watches.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Sessions idle this long are forgotten (rmcp ends them after 5 minutes).
const IDLE: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Default)]
pub struct Sessions(Mutex<HashMap<String, (i64, Instant)>>);

impl Sessions {
    /// Whether a request of `token` may name session `id` (one not known here is left to
    /// rmcp, which knows no more of it).
    pub fn may_use(&self, id: &str, token: i64) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match m.get_mut(id) {
            Some((owner, seen)) if *owner == token => {
                *seen = Instant::now();
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// Binds a session `initialize` just opened to its token.
    pub fn opened(&self, id: &str, token: i64) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= 1024 {
            m.retain(|_, (_, seen)| seen.elapsed() < IDLE);
        }
        m.insert(id.to_string(), (token, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_serves_only_the_token_that_opened_it() {
        let s = Sessions::default();
        assert!(s.may_use("abc", 1), "unknown: rmcp decides");
        s.opened("abc", 1);
        assert!(s.may_use("abc", 1));
        assert!(!s.may_use("abc", 2));
    }
}
