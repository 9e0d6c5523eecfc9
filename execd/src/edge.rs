//! execd's one edge: every gRPC `Status` it answers is made here, from a domain error or
//! a refusal named by its kind. Refusals say what is wrong in the caller's terms (the
//! field first: `id: not a launch id`); execd's own failures are logged here with their
//! detail and reach the client only as what failed (`ledger unavailable`), never as
//! internal text. A test keeps `Status` construction out of every other module.

use tonic::Status;

use crate::approval::{Refusal, StoreError};
use crate::gate::GateError;
use crate::manager::StartError;

/// A stdio MCP server's registration or start refused.
pub fn mcp(e: crate::mcp::McpError) -> Status {
    use crate::mcp::McpError as E;
    match e {
        E::Invalid(..) => Status::invalid_argument(e.to_string()),
        E::NotRegistered(_) => Status::failed_precondition(e.to_string()),
        E::Mismatch(_) => Status::permission_denied(e.to_string()),
    }
}

/// A request field is wrong; the message starts with the field's name.
pub fn invalid(message: impl Into<String>) -> Status {
    Status::invalid_argument(message)
}

/// No such launch or approval, or none this caller may see (never "exists but hidden").
pub fn not_found(message: impl Into<String>) -> Status {
    Status::not_found(message)
}

/// This caller's role may not do this.
pub fn denied(message: impl Into<String>) -> Status {
    Status::permission_denied(message)
}

/// The state does not allow it now (waiting for an approval, not a terminal, a viewer).
pub fn conflict(message: impl Into<String>) -> Status {
    Status::failed_precondition(message)
}

/// Output the caller asked for is gone; the message names the range.
pub fn lost(message: impl Into<String>) -> Status {
    Status::data_loss(message)
}

/// The client went away (never sent: there is nobody to send it to).
pub fn gone() -> Status {
    Status::cancelled("the client went away")
}

/// Whether `s` is [`gone`].
pub fn is_gone(s: &Status) -> bool {
    s.code() == tonic::Code::Cancelled
}

/// execd failed at `what`: the detail goes to the log, the client hears only `what`.
pub fn internal<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Status {
    move |e| {
        tracing::error!(error = %e, "{what}");
        Status::internal(what)
    }
}

/// A launch's record is gone from under a call (it never is, short of a damaged ledger).
pub fn vanished() -> Status {
    internal("launch record vanished")("the ledger has no row for a launch it started")
}

/// The risk gate's errors.
pub fn gate(e: GateError) -> Status {
    match e {
        GateError::Invalid(i) => invalid(i.to_string()),
        GateError::Field(..) => invalid(e.to_string()),
        GateError::Store(StoreError::Refused(r)) => match r {
            Refusal::SelfDecision => denied(r.to_string()),
            Refusal::ConfirmationRequired | Refusal::WrongConfirmation => {
                invalid(format!("confirm: {r}"))
            }
            other => conflict(other.to_string()),
        },
        GateError::Store(StoreError::NotFound(id)) => not_found(format!("no approval {id}")),
        GateError::Store(StoreError::Raced) => Status::aborted(e.to_string()),
        GateError::Store(StoreError::Damaged) => lost(e.to_string()),
        GateError::Store(StoreError::Quota(q)) => Status::resource_exhausted(q.to_string()),
        GateError::Start(s) => start(s),
        other => internal("the risk gate failed")(format!("{:#}", anyhow::Error::from(other))),
    }
}

/// A launch that could not start.
pub fn start(e: StartError) -> Status {
    // Only a launch refused before anything was recorded is UNAVAILABLE (try again once
    // there is room): one whose launch dir could not be laid out was recorded, and ended.
    if let Some(f) = match &e {
        StartError::Ledger(s) => argos_store::Fault::of(s),
        _ => None,
    } {
        tracing::error!(error = %format!("{:#}", anyhow::Error::from(e)), "could not start the launch");
        return Status::unavailable(f.say("execd"));
    }
    match e {
        StartError::Invalid(i) => invalid(i.to_string()),
        StartError::ProfileNotAllowed { .. } => denied(e.to_string()),
        StartError::NoUid | StartError::Quota(_) => Status::resource_exhausted(e.to_string()),
        StartError::Stopping | StartError::Unanchored(_) => Status::unavailable(e.to_string()),
        other => {
            internal("could not start the launch")(format!("{:#}", anyhow::Error::from(other)))
        }
    }
}

/// The ledger, approvals store or audit trail failed: a fault of the disk is said as
/// what it is (UNAVAILABLE, try again once there is room), anything else only as
/// "ledger unavailable".
pub fn store<E: std::fmt::Display + 'static>(e: E) -> Status {
    let fault = (&e as &dyn std::any::Any)
        .downcast_ref::<sqlx::Error>()
        .and_then(argos_store::Fault::of);
    match fault {
        Some(f) => {
            tracing::error!(error = %e, "ledger unavailable");
            Status::unavailable(f.say("execd"))
        }
        None => internal("ledger unavailable")(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_detail_stays_in_the_log() {
        let s = internal("ledger unavailable")("disk I/O error at /var/lib/argos/execd/execd.db");
        assert_eq!(s.code(), tonic::Code::Internal);
        assert_eq!(s.message(), "ledger unavailable");
        let s = start(StartError::Ledger(sqlx::Error::Protocol(
            "/var/lib/argos/execd/execd.db: corrupt".into(),
        )));
        assert_eq!(s.message(), "could not start the launch");
        let s = start(StartError::NoUid);
        assert_eq!(s.code(), tonic::Code::ResourceExhausted);
        // The disk's faults are named: the caller can act on them.
        let full = std::io::Error::from_raw_os_error(nix::libc::ENOSPC);
        let s = start(StartError::Ledger(sqlx::Error::Io(full)));
        assert_eq!(s.code(), tonic::Code::Unavailable);
        assert!(
            s.message()
                .starts_with("the disk holding execd's state is full"),
            "{s:?}"
        );
        assert!(!s.message().contains("/var/lib"), "{s:?}");
        let s = store(sqlx::Error::Io(std::io::Error::from_raw_os_error(
            nix::libc::ENOSPC,
        )));
        assert_eq!(s.code(), tonic::Code::Unavailable);
        assert!(s.message().contains("is full"), "{s:?}");
        assert_eq!(store("x").message(), "ledger unavailable");
    }

    #[test]
    fn refusals_keep_their_kind_and_name_the_field() {
        let s = gate(GateError::Store(StoreError::Refused(Refusal::SelfDecision)));
        assert_eq!(s.code(), tonic::Code::PermissionDenied);
        let s = gate(GateError::Store(StoreError::Refused(
            Refusal::WrongConfirmation,
        )));
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        assert!(s.message().starts_with("confirm: "), "{}", s.message());
        let s = gate(GateError::Store(StoreError::NotFound("a1".into())));
        assert_eq!(
            (s.code(), s.message()),
            (tonic::Code::NotFound, "no approval a1")
        );
        assert!(is_gone(&gone()));
    }
}
