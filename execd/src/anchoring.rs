//! execd's side of keeping its newest audit rows anchored in the gateway's trail at the
//! moments that matter: before a launch that runs as root starts (its `launch.intent` and
//! the approval it consumes are then held by the gateway before anything runs as root,
//! so deleting them afterwards fails `audit verify`), and as the service stops.
//!
//! execd never calls the gateway. It asks on the gateway's `Watch` stream
//! (`anchor_wanted`), and waits — a bounded time, and only while a gateway watches —
//! until the gateway shows, in an `AnchorAudit` call's `held` (which execd confirms
//! against its own trail), that it has stored an anchor at least that new. A head only
//! handed to the gateway is not held until the gateway stored it: a gateway that dies
//! between the two would leave the rows unanchored.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{broadcast, watch};

/// How long a root launch waits for the gateway to anchor its intent.
pub const ROOT_LAUNCH_WAIT: Duration = Duration::from_secs(2);

pub struct Anchoring {
    /// Asks for an exchange, with the seq to be covered, to every gateway watcher.
    wanted: broadcast::Sender<i64>,
    /// The newest anchor of execd's trail the gateway showed it holds, confirmed.
    held: watch::Sender<i64>,
    /// Gateway `Watch` streams open now.
    watchers: AtomicUsize,
}

/// What came of asking.
#[derive(Debug, PartialEq, Eq)]
pub enum Anchored {
    /// The gateway holds an anchor at least as new.
    Yes,
    /// No gateway watches execd now: nobody to ask.
    NoGateway,
    /// A gateway watches but did not exchange within the wait.
    TimedOut,
}

/// A gateway's `Watch` stream, counted while it lives.
pub struct Watcher {
    anchoring: Arc<Anchoring>,
    pub asks: broadcast::Receiver<i64>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.anchoring.watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Anchoring {
    pub fn new() -> Arc<Anchoring> {
        Arc::new(Anchoring {
            wanted: broadcast::channel(16).0,
            held: watch::channel(0).0,
            watchers: AtomicUsize::new(0),
        })
    }

    /// A gateway's `Watch` stream starts: it hears every ask.
    pub fn watcher(self: &Arc<Self>) -> Watcher {
        self.watchers.fetch_add(1, Ordering::SeqCst);
        Watcher {
            anchoring: self.clone(),
            asks: self.wanted.subscribe(),
        }
    }

    /// The gateway showed, in an `AnchorAudit` call, an anchor of execd's trail up to
    /// `seq` that execd's trail confirmed: it stored it.
    pub fn held(&self, seq: i64) {
        self.held.send_if_modified(|h| {
            let newer = seq > *h;
            if newer {
                *h = seq;
            }
            newer
        });
    }

    /// Asks the gateway to anchor execd's trail up to `seq`, and waits up to `within`.
    pub async fn anchor(&self, seq: i64, within: Duration) -> Anchored {
        let mut held = self.held.subscribe();
        if *held.borrow() >= seq {
            return Anchored::Yes;
        }
        if self.watchers.load(Ordering::SeqCst) == 0 {
            return Anchored::NoGateway;
        }
        let _ = self.wanted.send(seq);
        match tokio::time::timeout(within, held.wait_for(|h| *h >= seq)).await {
            Ok(Ok(_)) => Anchored::Yes,
            _ => Anchored::TimedOut,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_ask_is_answered_by_an_anchor_held_at_least_as_new() {
        let a = Anchoring::new();
        // Nobody watches: nobody to ask, and no wait.
        assert_eq!(
            a.anchor(5, Duration::from_secs(5)).await,
            Anchored::NoGateway
        );
        let mut w = a.watcher();
        let b = a.clone();
        let gateway = tokio::spawn(async move {
            let seq = w.asks.recv().await.unwrap();
            // Only held counts (what `AnchorAudit` answers is not yet stored).
            b.held(seq + 1);
            w
        });
        assert_eq!(a.anchor(5, Duration::from_secs(5)).await, Anchored::Yes);
        // Already held: no ask.
        assert_eq!(a.anchor(6, Duration::from_millis(1)).await, Anchored::Yes);
        let w = gateway.await.unwrap();
        // A gateway that does not answer is waited for only so long.
        assert_eq!(
            a.anchor(7, Duration::from_millis(50)).await,
            Anchored::TimedOut
        );
        drop(w);
        assert_eq!(
            a.anchor(7, Duration::from_millis(50)).await,
            Anchored::NoGateway
        );
    }
}
