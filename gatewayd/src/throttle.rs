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
    fn keys(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Begins an attempt on `keys`: refused with the wait while any of them is locked;
    /// otherwise counted as a failure at once, before the password is verified, so
    /// attempts running side by side cannot outnumber the free ones (the verify is slow:
    /// argon2). [`Throttle::succeeded`] takes a successful attempt back.
    pub fn attempt(&self, keys: &[String]) -> Result<(), Duration> {
        let now = Instant::now();
        let mut map = self.keys();
        let wait = keys
            .iter()
            .filter_map(|k| map.get(k)?.locked_until)
            .filter(|u| *u > now)
            .map(|u| u - now)
            .max();
        if let Some(wait) = wait {
            return Err(wait);
        }
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
            e.locked_until = lock_for(e.failures).map(|l| now + l);
        }
        Ok(())
    }

    /// An attempt on `keys` failed its check: the lock it earned runs from now, not from
    /// when the attempt began (the check itself takes time).
    pub fn failed(&self, keys: &[String]) {
        let now = Instant::now();
        let mut map = self.keys();
        for k in keys {
            if let Some(e) = map.get_mut(k) {
                e.last = now;
                e.locked_until = lock_for(e.failures).map(|l| now + l);
            }
        }
    }

    /// An attempt on `keys` succeeded: the account (`keys[0]`) starts afresh; the other
    /// keys (the address) take this attempt back.
    pub fn succeeded(&self, keys: &[String]) {
        let Some((account, others)) = keys.split_first() else {
            return;
        };
        self.keys().remove(account);
        self.cancel(others);
    }

    /// An attempt on `keys` that never reached a password check (a bad field): taken back.
    pub fn cancel(&self, keys: &[String]) {
        let now = Instant::now();
        let mut map = self.keys();
        for k in keys {
            if let Some(e) = map.get_mut(k) {
                e.failures = e.failures.saturating_sub(1);
                e.locked_until = lock_for(e.failures)
                    .map(|l| e.last + l)
                    .filter(|u| *u > now);
            }
        }
    }
}

/// The lock after `failures` failures: none for the free ones, then 1 s doubling.
fn lock_for(failures: u32) -> Option<Duration> {
    (failures > FREE)
        .then(|| Duration::from_secs(1u64 << (failures - FREE - 1).min(20)).min(MAX_LOCK))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_free_attempts_then_a_doubling_lock() {
        let t = Throttle::default();
        let k = vec!["user:alice".to_string(), "addr:10.0.0.1".to_string()];
        for _ in 0..FREE {
            assert_eq!(t.attempt(&k), Ok(()));
        }
        // The sixth is let through (and locks); the seventh waits about a second.
        assert_eq!(t.attempt(&k), Ok(()));
        let first = t.attempt(&k).unwrap_err();
        assert!(first <= Duration::from_secs(1) && first > Duration::from_millis(900));
        t.succeeded(&k);
        assert_eq!(t.attempt(&k[..1]), Ok(()), "the account starts afresh");
    }

    /// Attempts counted before they are verified: however many run side by side, at most
    /// the free ones and one more get to a password check.
    #[test]
    fn concurrent_attempts_cannot_outnumber_the_free_ones() {
        let t = std::sync::Arc::new(Throttle::default());
        let k = vec!["user:alice".to_string(), "addr:10.0.0.1".to_string()];
        let admitted: usize = (0..64)
            .map(|_| {
                let (t, k) = (t.clone(), k.clone());
                std::thread::spawn(move || t.attempt(&k).is_ok())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| usize::from(h.join().unwrap()))
            .sum();
        assert_eq!(admitted, FREE as usize + 1);
    }

    /// Logging in right does not count against the address.
    #[test]
    fn successes_are_taken_back() {
        let t = Throttle::default();
        let k = vec!["user:alice".to_string(), "addr:10.0.0.1".to_string()];
        for _ in 0..50 {
            t.attempt(&k).unwrap();
            t.succeeded(&k);
        }
        assert_eq!(t.attempt(&k), Ok(()));
    }
}
