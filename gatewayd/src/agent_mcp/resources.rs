//! Executions as MCP resources, so an agent can wait without polling: each execution a
//! caller may read is `argos://executions/{id}` (its status, exit code, the approval's
//! state and the output's head and tail, as `get_execution_status` answers). An agent
//! subscribes the way its era offers — `resources/subscribe` in 2025-11-25, a
//! `subscriptions/listen` stream in 2026-07-28 — and is sent
//! `notifications/resources/updated` each time the execution changes (its approval
//! decided, it started, it ended). Changes come from execd's `Watch` (the gateway's
//! `changes` broadcast); nothing is polled.

use rmcp::ErrorData;
use rmcp::model::{ReadResourceResult, ResourceContents};
use serde_json::json;

/// The URI scheme and path of an execution resource.
pub const PREFIX: &str = "argos://executions/";

/// The URI of an execution.
pub fn uri(id: &str) -> String {
    format!("{PREFIX}{id}")
}

/// The execution a URI names: a UUID, as execd makes them.
pub fn execution_id(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix(PREFIX)?;
    let ok = id.len() == 36
        && id.char_indices().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    ok.then_some(id)
}

/// The answer to a URI that names no resource this caller may read (SEP-2164: invalid
/// params, the URI in the data; never an empty contents list).
pub fn not_found(uri: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no resource {uri}"), Some(json!({"uri": uri})))
}

/// A read's result: the execution's facts as JSON, never cached (it changes).
pub fn contents(uri: &str, facts: &serde_json::Value) -> ReadResourceResult {
    let mut r = ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
        uri: uri.to_string(),
        mime_type: Some("application/json".into()),
        text: facts.to_string(),
        meta: None,
    }]);
    r.ttl_ms = Some(0);
    r.cache_scope = Some(rmcp::model::CacheScope::Private);
    r
}

/// Whether an execution status is final (no further change will come).
pub fn is_final(status: &str) -> bool {
    !matches!(status, "running" | "pending_approval" | "unspecified")
}

/// Waits for the next change of execution `id` (its own, its approval's, or changes
/// missed); `Some(true)` when it has ended (no further change will come), `None` when the
/// changes have stopped.
pub(super) async fn next_change(
    changes: &mut tokio::sync::broadcast::Receiver<crate::api::Change>,
    id: &str,
) -> Option<bool> {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match changes.recv().await {
            Ok(crate::api::Change::Execution(x)) if x.id == id => {
                return Some(is_final(crate::views::status_word(x.status)));
            }
            Ok(crate::api::Change::Approval(a)) if a.execution_id == id => return Some(false),
            Ok(crate::api::Change::Missed(_)) | Err(RecvError::Lagged(_)) => return Some(false),
            Err(RecvError::Closed) => return None,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_execution_uuid_names_a_resource() {
        let id = "0193a5b2-7c1d-7e2f-8a3b-4c5d6e7f8091";
        assert_eq!(execution_id(&uri(id)), Some(id));
        for bad in [
            "argos://executions/",
            "argos://executions/../../etc/passwd",
            "argos://executions/0193a5b2-7c1d-7e2f-8a3b-4c5d6e7f80912",
            "argos://executions/0193a5b2x7c1d-7e2f-8a3b-4c5d6e7f8091",
            "file:///etc/passwd",
            "argos://jobs/0193a5b2-7c1d-7e2f-8a3b-4c5d6e7f8091",
        ] {
            assert_eq!(execution_id(bad), None, "{bad}");
        }
    }
}
