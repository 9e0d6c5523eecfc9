//! The gateway's half of audit anchoring: it exchanges audit heads with execd at
//! intervals, so that each trail's newest row is kept in the other's and a trail cut short
//! or recomputed fails `audit verify`, naming the row (`argos_store::audit`).
//!
//! One exchange: (1) execd confirms that its trail still holds the anchor the gateway has
//! of it and answers its head and its anchor of the gateway's trail; (2) the gateway
//! confirms that its own trail still holds that anchor; (3) it records execd's head when
//! it moved on; (4) it asks execd to record the gateway's head when that moved on, and
//! shows execd the anchor it now holds when it recorded one (execd waits for that, not
//! for its answer in (1), before a launch as root). So an
//! anchor is only ever recorded after the one before it was confirmed: the newest one
//! vouches for every row up to it. A contradiction is logged as an error and nothing more
//! is recorded of either trail until an operator looks.

use std::time::Duration;

use argos_exec_client::ErrorKind;
use argos_proto::exec::v1 as pb;
use argos_store::audit::{Anchor, AnchorRefused};

use crate::api::Shared;

/// The peer whose trail the gateway anchors, as its anchor rows name it.
pub const EXECD: &str = "execd";

/// What one exchange did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Exchanged {
    /// execd's head was recorded in the gateway's trail.
    pub recorded_execd: bool,
    /// The gateway's head was recorded in execd's trail.
    pub recorded_gateway: bool,
}

fn wire(a: &Anchor) -> pb::AuditAnchor {
    pb::AuditAnchor {
        seq: a.seq,
        hash: a.hash.clone(),
        at_ms: a.at_ms,
        by: a.by.clone(),
    }
}

/// Why an exchange did not happen.
#[derive(Debug)]
pub enum AnchorError {
    /// execd is not there now.
    Away,
    /// A trail does not hold what the other recorded of it.
    Broken(String),
    /// A trail could not be read or written (a full disk among the causes): nothing is
    /// said of either trail's integrity, and the next exchange tries again.
    Storage(String),
}

impl From<String> for AnchorError {
    fn from(s: String) -> AnchorError {
        AnchorError::Broken(s)
    }
}

impl From<argos_exec_client::ExecError> for AnchorError {
    fn from(e: argos_exec_client::ExecError) -> AnchorError {
        match e.kind {
            // execd answered that its disk is at fault.
            ErrorKind::Unavailable if argos_store::Fault::said(&e.message, "execd") => {
                AnchorError::Storage(format!("execd: {}", e.message))
            }
            ErrorKind::Unavailable | ErrorKind::Cancelled => AnchorError::Away,
            ErrorKind::DataLoss => AnchorError::Broken(e.message),
            _ => AnchorError::Storage(format!("execd: {}", e.message)),
        }
    }
}

impl From<AnchorRefused> for AnchorError {
    fn from(e: AnchorRefused) -> AnchorError {
        match e {
            AnchorRefused::Contradicts(why) => AnchorError::Broken(why),
            AnchorRefused::Store(e) => {
                AnchorError::Storage(format!("the gateway's audit trail: {e}"))
            }
        }
    }
}

/// One exchange of heads with execd; an error says which trail contradicts its anchor.
pub async fn exchange(api: &Shared) -> Result<Exchanged, AnchorError> {
    let store = |e: sqlx::Error| AnchorError::Storage(format!("the gateway's audit trail: {e}"));
    let held = api.audit.anchor_of(EXECD).await.map_err(store)?;
    let peer = api
        .exec
        .anchor_audit(pb::AnchorAuditRequest {
            head: None,
            held: held.as_ref().map(wire),
            record: false,
        })
        .await?;
    if let Some(mine) = &peer.held {
        let mine = Anchor {
            by: EXECD.into(),
            seq: mine.seq,
            hash: mine.hash.clone(),
            at_ms: mine.at_ms,
        };
        if let Some(why) = api.audit.confirm(&mine).await.map_err(store)? {
            return Err(AnchorError::Broken(format!(
                "the gateway's audit trail: {why}"
            )));
        }
    }
    let mut done = Exchanged::default();
    if let Some(head) = &peer.head {
        done.recorded_execd = api.audit.record_anchor(EXECD, head.seq, &head.hash).await?;
    }
    let (seq, hash) = api.audit.content_head().await.map_err(store)?;
    let moved = seq > peer.held.as_ref().map_or(0, |h| h.seq);
    if moved || done.recorded_execd {
        let held = api.audit.anchor_of(EXECD).await.map_err(store)?;
        done.recorded_gateway = api
            .exec
            .anchor_audit(pb::AnchorAuditRequest {
                head: Some(pb::AuditAnchor {
                    seq,
                    hash,
                    at_ms: 0,
                    by: String::new(),
                }),
                held: held.as_ref().map(wire),
                record: moved,
            })
            .await?
            .recorded;
    }
    Ok(done)
}

/// The least time between two exchanges another event asked for: a burst of records (a
/// login attempt each) is anchored together, not one exchange each.
const SETTLE: Duration = Duration::from_millis(200);

/// Exchanges heads every `every` from the start, soon after each record the gateway
/// writes (`Api::anchor_now`) and at once each time execd asks (`Api::anchor_asked`), so the rows not yet anchored are
/// only those of the last moment; an error is logged once until it changes (execd being
/// away is not one).
pub async fn run(api: Shared, every: Duration) {
    let mut last_error = String::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = api.anchor_asked.notified() => {}
            _ = api.anchor_now.notified() => tokio::time::sleep(SETTLE).await,
        }
        match exchange(&api).await {
            Ok(done) => {
                if done != Exchanged::default() {
                    tracing::debug!(?done, "audit heads exchanged with execd");
                }
                last_error.clear();
            }
            Err(AnchorError::Away) => {}
            Err(AnchorError::Broken(e)) => {
                if e != last_error {
                    tracing::error!(error = %e, "audit anchoring with execd stopped: a trail does not hold what the other recorded of it");
                    last_error = e;
                }
            }
            Err(AnchorError::Storage(e)) => {
                if e != last_error {
                    tracing::warn!(error = %e, "audit anchoring with execd waits: a trail cannot be read or written (no word of tampering)");
                    last_error = e;
                }
            }
        }
    }
}

/// The last exchange, as the gateway stops: what it recorded up to its end is anchored in
/// execd's trail, and execd's in its own. Bounded, so a stop is never held up by execd.
pub async fn at_stop(api: Shared) {
    match tokio::time::timeout(Duration::from_secs(1), exchange(&api)).await {
        Ok(Ok(_)) => tracing::debug!("audit heads exchanged with execd at stop"),
        Ok(Err(AnchorError::Away)) => {
            tracing::warn!("execd is away: the newest audit rows are not anchored at this stop")
        }
        Ok(Err(AnchorError::Broken(e))) => {
            tracing::error!(error = %e, "audit anchoring at stop: a trail does not hold what the other recorded of it")
        }
        Ok(Err(AnchorError::Storage(e))) => tracing::warn!(
            error = %e,
            "the newest audit rows are not anchored at this stop: a trail cannot be read or written"
        ),
        Err(_) => tracing::warn!(
            "execd did not answer in time: the newest audit rows are not anchored at this stop"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use argos_exec_client::ExecError;

    /// A full disk at either end is said as a storage fault, never as a trail that does
    /// not hold what the other recorded (the alarm an operator acts on as tampering).
    #[test]
    fn a_full_disk_is_no_word_of_tampering() {
        let full = ExecError::new(
            ErrorKind::Unavailable,
            argos_store::Fault::Full.say("execd"),
        );
        assert!(matches!(AnchorError::from(full), AnchorError::Storage(_)));
        let gone = ExecError::new(ErrorKind::Unavailable, "transport error");
        assert!(matches!(AnchorError::from(gone), AnchorError::Away));
        let cut = ExecError::new(ErrorKind::DataLoss, "execd's audit trail: row 3 is missing");
        assert!(matches!(AnchorError::from(cut), AnchorError::Broken(_)));
        let here = AnchorRefused::Store(sqlx::Error::Io(std::io::Error::from_raw_os_error(
            nix::libc::ENOSPC,
        )));
        assert!(matches!(AnchorError::from(here), AnchorError::Storage(_)));
        let rewritten = AnchorRefused::Contradicts("execd's trail was cut off or rewritten".into());
        assert!(matches!(
            AnchorError::from(rewritten),
            AnchorError::Broken(_)
        ));
    }
}
