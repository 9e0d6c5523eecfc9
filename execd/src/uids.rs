//! The launch uid pool: every `agent` and `mcp-server` launch runs as a uid of its own from
//! the range `exec.launch_uid_base`..+`exec.launch_uid_count`, so no two running launches
//! share one (workspaces stay private, and the per-uid process limit is per launch). A
//! launch claims its uid before it is recorded and gives it back when it ends, once its
//! workspace has been handed to root; a restarted execd holds again the uids of the
//! launches it re-adopts. Claims start at a point derived from the launch id, so ids
//! spread over the range instead of crowding its start.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

#[derive(Debug)]
pub struct UidPool {
    base: u32,
    count: u32,
    /// Launch id → its uid, for launches that have not ended.
    held: Mutex<HashMap<String, u32>>,
}

impl UidPool {
    /// The range `base`..`base + count`.
    pub fn new(base: u32, count: u32) -> UidPool {
        UidPool {
            base,
            count,
            held: Mutex::new(HashMap::new()),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A free uid for launch `id`, now held by it; `None` when every uid is in use.
    pub fn claim(&self, id: &str) -> Option<u32> {
        let mut held = self.held();
        if let Some(uid) = held.get(id) {
            return Some(*uid);
        }
        let used: HashSet<u32> = held.values().copied().collect();
        let count = self.count.max(1);
        let start = (argos_common::paths::stable_hash(id.as_bytes()) % u64::from(count)) as u32;
        let uid = (0..self.count)
            .map(|i| self.base + (start + i) % count)
            .find(|u| !used.contains(u))?;
        held.insert(id.to_string(), uid);
        Some(uid)
    }

    /// Marks `uid` as held by a launch that runs on (after a restart).
    pub fn hold(&self, id: &str, uid: u32) {
        self.held().insert(id.to_string(), uid);
    }

    /// Gives back the uid of a launch that ended (or never started).
    pub fn release(&self, id: &str) {
        self.held().remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_launches_never_share_a_uid_and_ended_ones_give_theirs_back() {
        let pool = UidPool::new(200_000, 3);
        let a = pool.claim("a").unwrap();
        let b = pool.claim("b").unwrap();
        let c = pool.claim("c").unwrap();
        let mut all = vec![a, b, c];
        all.sort();
        assert_eq!(all, [200_000, 200_001, 200_002], "distinct, in range");
        assert_eq!(pool.claim("a"), Some(a), "a launch keeps its uid");
        assert_eq!(pool.claim("d"), None, "the range is full");
        pool.release("b");
        assert_eq!(
            pool.claim("d"),
            Some(b),
            "an ended launch's uid is free again"
        );
        // After a restart: a re-adopted launch holds its recorded uid.
        let fresh = UidPool::new(200_000, 3);
        fresh.hold("a", a);
        for id in ["x", "y"] {
            assert_ne!(fresh.claim(id), Some(a));
        }
        assert_eq!(fresh.claim("z"), None);
    }
}
