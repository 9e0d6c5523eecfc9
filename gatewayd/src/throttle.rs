//! Login throttling, per account and per client address: the first few failures are
//! free, then each one doubles a lock-out (1 s, 2 s, 4 s … up to 15 min). Kept in memory:
//! a restart forgives, which costs an attacker a gateway restart per few guesses.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures allowed before any lock-out.
const FREE: u32 = 5;
const MAX_LOCK: Duration = Duration::from_secs(15 * 60);
/// A key with no failure for this long is forgotten.
const FORGET: Duration = Duration::from_secs(60 * 60);

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    locked_until: Option<Instant>,
    last: Instant,
}

#[derive(Debug, Default)]
pub struct Throttle {
    keys: Mutex<HashMap<String, Entry>>,
}

impl Throttle {
    /// How long until any of `keys` may try again (None: now).
    pub fn wait(&self, keys: &[String]) -> Option<Duration> {
        let now = Instant::now();
        let map = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.iter()
            .filter_map(|k| map.get(k)?.locked_until)
            .filter(|u| *u > now)
            .map(|u| u - now)
            .max()
    }

    pub fn failed(&self, keys: &[String]) {
        let now = Instant::now();
        let mut map = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() > 100_000 {
            map.retain(|_, e| now.duration_since(e.last) < FORGET);
        }
        for k in keys {
            let e = map.entry(k.clone()).or_insert(Entry {
                failures: 0,
                locked_until: None,
                last: now,
            });
            if now.duration_since(e.last) >= FORGET {
                e.failures = 0;
            }
            e.failures += 1;
            e.last = now;
            if e.failures > FREE {
                let lock = Duration::from_secs(1u64 << (e.failures - FREE - 1).min(20));
                e.locked_until = Some(now + lock.min(MAX_LOCK));
            }
        }
    }

    pub fn succeeded(&self, key: &str) {
        self.keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_free_failures_then_a_doubling_lock() {
        let t = Throttle::default();
        let k = vec!["user:alice".to_string()];
        for _ in 0..FREE {
            t.failed(&k);
            assert_eq!(t.wait(&k), None);
        }
        t.failed(&k);
        let first = t.wait(&k).unwrap();
        assert!(first <= Duration::from_secs(1) && first > Duration::from_millis(900));
        t.failed(&k);
        assert!(t.wait(&k).unwrap() > Duration::from_millis(1900));
        t.succeeded("user:alice");
        assert_eq!(t.wait(&k), None);
    }
}
