//! End-user principal and request id carried as gRPC metadata.
//!
//! `x-argos-principal` says which end user a call is for. It is believed only from peers
//! whose role may assert one (the gateway, which authenticated the user; jobd, for a task's
//! stored owner). From anyone else it is ignored and the attempt logged: a peer cannot
//! borrow a user's authority by naming them.

use std::fmt;

use crate::peer::{PeerIdentity, RoleSet};

/// Metadata key naming the end user a call is for.
pub const PRINCIPAL_HEADER: &str = "x-argos-principal";
/// Metadata key correlating one request across daemons.
pub const REQUEST_ID_HEADER: &str = "x-argos-request-id";

/// A validated end-user name: 1–128 characters of `[A-Za-z0-9._@:+-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal(String);

impl Principal {
    pub fn parse(s: &str) -> Result<Principal, String> {
        let ok = !s.is_empty()
            && s.len() <= 128
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._@:+-".contains(c));
        if ok {
            Ok(Principal(s.to_string()))
        } else {
            Err(format!(
                "invalid principal {:?}",
                s.chars().take(140).collect::<String>()
            ))
        }
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a daemon made of the principal metadata on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrincipalDecision {
    /// None was sent.
    Absent,
    /// Sent by a peer allowed to assert it, and well-formed.
    Believed(Principal),
    /// Sent by a peer that may not assert one; ignored.
    IgnoredNotAllowed,
    /// Sent by an allowed peer but malformed; ignored.
    IgnoredInvalid(String),
}

impl PrincipalDecision {
    pub fn principal(&self) -> Option<&Principal> {
        match self {
            PrincipalDecision::Believed(p) => Some(p),
            _ => None,
        }
    }
}

/// Decides whether to believe a claimed principal, given who sent it.
pub fn decide(roles: RoleSet, claimed: Option<&[u8]>) -> PrincipalDecision {
    let Some(raw) = claimed else {
        return PrincipalDecision::Absent;
    };
    if !roles.may_assert_principal() {
        return PrincipalDecision::IgnoredNotAllowed;
    }
    match std::str::from_utf8(raw)
        .map_err(|_| "principal is not UTF-8".to_string())
        .and_then(Principal::parse)
    {
        Ok(p) => PrincipalDecision::Believed(p),
        Err(e) => PrincipalDecision::IgnoredInvalid(e),
    }
}

/// Who is calling, as a handler sees it: inserted into each admitted request's extensions.
#[derive(Debug, Clone)]
pub struct Caller {
    pub peer: PeerIdentity,
    pub roles: RoleSet,
    pub principal: Option<Principal>,
    pub request_id: String,
}

/// Returns the caller's request id if it is sane (≤ 64 printable ASCII), else a new one.
pub fn request_id(claimed: Option<&[u8]>) -> String {
    match claimed.and_then(|b| std::str::from_utf8(b).ok()) {
        Some(s) if !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_graphic()) => {
            s.to_string()
        }
        _ => new_request_id(),
    }
}

fn new_request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    format!(
        "{:x}-{:x}-{:x}",
        now,
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::PeerRole;

    #[test]
    fn only_gateway_and_job_may_assert() {
        let alice = Some(&b"alice@example"[..]);
        for (role, believed) in [
            (PeerRole::Gateway, true),
            (PeerRole::Job, true),
            (PeerRole::Mcp, false),
            (PeerRole::Operator, false),
        ] {
            let d = decide(RoleSet::of(&[role]), alice);
            assert_eq!(d.principal().is_some(), believed, "{role}: {d:?}");
        }
        assert_eq!(
            decide(RoleSet::of(&[PeerRole::Mcp]), alice),
            PrincipalDecision::IgnoredNotAllowed
        );
        assert_eq!(decide(RoleSet::EMPTY, None), PrincipalDecision::Absent);
    }

    #[test]
    fn malformed_principal_is_ignored() {
        let d = decide(RoleSet::of(&[PeerRole::Gateway]), Some(b"bob\nroot"));
        assert!(matches!(d, PrincipalDecision::IgnoredInvalid(_)));
        let long = "a".repeat(129);
        assert!(Principal::parse(&long).is_err());
    }

    #[test]
    fn request_ids_are_kept_or_made() {
        assert_eq!(request_id(Some(b"abc-1")), "abc-1");
        assert_ne!(request_id(Some(b"bad id")), "bad id");
        assert_ne!(request_id(None), request_id(None));
    }
}
