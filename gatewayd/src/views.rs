//! execd's messages as the HTTP API shows them: enums as lowercase words, bytes as text.

use argos_proto::exec::v1 as pb;
use serde_json::{Value, json};

pub fn status_word(s: i32) -> &'static str {
    match pb::ExecutionStatus::try_from(s).unwrap_or(pb::ExecutionStatus::Unspecified) {
        pb::ExecutionStatus::Unspecified => "unspecified",
        pb::ExecutionStatus::Running => "running",
        pb::ExecutionStatus::Succeeded => "succeeded",
        pb::ExecutionStatus::Failed => "failed",
        pb::ExecutionStatus::TimedOut => "timed_out",
        pb::ExecutionStatus::Killed => "killed",
        pb::ExecutionStatus::ContainmentUnavailable => "containment_unavailable",
        pb::ExecutionStatus::TeardownFailed => "teardown_failed",
        pb::ExecutionStatus::Lost => "lost",
        pb::ExecutionStatus::PendingApproval => "pending_approval",
        pb::ExecutionStatus::Rejected => "rejected",
    }
}

/// The proto value of a status word (for filters).
pub fn parse_status(word: &str) -> Option<i32> {
    (1..=10).find(|s| status_word(*s) == word)
}

/// The API's word for a proto enum value: its proto name without the type's prefix,
/// lowercased (`APPROVAL_STATE_PENDING` → `pending`); empty when unspecified or unknown.
fn word(proto_name: Option<&str>, prefix: &str) -> String {
    match proto_name.and_then(|n| n.strip_prefix(prefix)) {
        Some("UNSPECIFIED") | None => String::new(),
        Some(w) => w.to_ascii_lowercase(),
    }
}

/// The proto name of an API word (`pending` → `APPROVAL_STATE_PENDING`).
fn proto_name(prefix: &str, word: &str) -> Option<String> {
    (!word.is_empty() && word.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .then(|| format!("{prefix}{}", word.to_ascii_uppercase()))
}

pub fn risk_class(v: i32) -> String {
    word(
        pb::RiskClass::try_from(v).ok().map(|c| c.as_str_name()),
        "RISK_CLASS_",
    )
}

pub fn parse_risk_class(w: &str) -> Option<pb::RiskClass> {
    pb::RiskClass::from_str_name(&proto_name("RISK_CLASS_", w)?)
        .filter(|c| *c != pb::RiskClass::Unspecified)
}

pub fn approval_state(v: i32) -> String {
    word(
        pb::ApprovalState::try_from(v).ok().map(|c| c.as_str_name()),
        "APPROVAL_STATE_",
    )
}

pub fn parse_approval_state(w: &str) -> Option<pb::ApprovalState> {
    pb::ApprovalState::from_str_name(&proto_name("APPROVAL_STATE_", w)?)
        .filter(|c| *c != pb::ApprovalState::Unspecified)
}

pub fn job_state(v: i32) -> String {
    use argos_proto::job::v1::JobState;
    word(
        JobState::try_from(v).ok().map(|c| c.as_str_name()),
        "JOB_STATE_",
    )
}

pub fn parse_job_state(w: &str) -> Option<argos_proto::job::v1::JobState> {
    use argos_proto::job::v1::JobState;
    JobState::from_str_name(&proto_name("JOB_STATE_", w)?).filter(|c| *c != JobState::Unspecified)
}

/// A job as the API shows it.
pub fn job(j: &argos_proto::job::v1::JobInfo) -> Value {
    let env: std::collections::BTreeMap<_, _> = j.env.iter().collect();
    json!({
        "id": j.id,
        "owner": j.owner,
        "name": j.name,
        "state": job_state(j.state),
        "command": j.command,
        "argv": j.argv,
        "cwd": j.cwd,
        "env": env,
        "place": place(j.place),
        "max_runtime_ms": j.max_runtime_ms,
        "purpose": j.purpose,
        "via": j.via,
        "generation": j.generation,
        "execution_id": j.execution_id,
        "approval_id": j.approval_id,
        "exit_code": j.exit_code,
        "reason": j.reason,
        "cancel_requested": j.cancel_requested,
        "created_at_ms": j.created_at_unix_ms,
        "started_at_ms": j.started_at_unix_ms,
        "ended_at_ms": j.ended_at_unix_ms,
        "task_id": j.task_id,
        "task_version": j.task_version,
        "follow_ups": j.follow_ups.as_ref().map(|f| json!({"webhook": f.webhook, "then": f.then})),
        "chained_from": j.chained_from,
        "tool": j.tool.as_ref().map(|t| json!({"name": t.name, "arguments": tool_arguments(&t.arguments_json)})),
        "trigger": j.trigger,
        "scheduled_for_ms": j.scheduled_for_unix_ms,
    })
}

/// A task as the API shows it.
pub fn task(t: &argos_proto::job::v1::Task) -> Value {
    let env: std::collections::BTreeMap<_, _> = t.env.iter().collect();
    json!({
        "id": t.id,
        "owner": t.owner,
        "name": t.name,
        "version": t.version,
        "command": t.command,
        "argv": t.argv,
        "cwd": t.cwd,
        "env": env,
        "place": place(t.place),
        "max_runtime_ms": t.max_runtime_ms,
        "purpose": t.purpose,
        "schedule": t.schedule.as_ref().map(|s| json!({
            "cron": s.cron, "timezone": if s.timezone.is_empty() { "UTC" } else { &s.timezone },
            "overlap": s.overlap, "catch_up": s.catch_up,
        })),
        "paused": t.paused,
        "approved": t.approved_version != 0 && t.approved_version == t.version,
        "approved_version": t.approved_version,
        "approved_by": t.approved_by,
        "approved_at_ms": t.approved_at_unix_ms,
        "standing_approval_id": t.standing_approval_id,
        "next_run_at_ms": t.next_run_at_unix_ms,
        "follow_ups": t.follow_ups.as_ref().map(|f| json!({"webhook": f.webhook, "then": f.then})),
        "tool": t.tool.as_ref().map(|t| json!({"name": t.name, "arguments": tool_arguments(&t.arguments_json)})),
        "webhook": (!t.webhook_mode.is_empty()).then(|| json!({
            "mode": t.webhook_mode, "url": format!("/hooks/{}", t.id),
            "set_at_ms": t.webhook_set_at_unix_ms,
        })),
        "created_at_ms": t.created_at_unix_ms,
        "updated_at_ms": t.updated_at_unix_ms,
    })
}

/// A tool call's arguments as JSON (kept as a JSON object's text; empty: none).
fn tool_arguments(text: &str) -> Value {
    if text.is_empty() {
        json!({})
    } else {
        serde_json::from_str(text).unwrap_or(Value::String(text.to_string()))
    }
}

pub fn place(v: i32) -> String {
    word(
        pb::Place::try_from(v).ok().map(|c| c.as_str_name()),
        "PLACE_",
    )
}

pub fn parse_place(w: &str) -> Option<pb::Place> {
    pb::Place::from_str_name(&proto_name("PLACE_", w)?).filter(|c| *c != pb::Place::Unspecified)
}

pub fn parse_decision(w: &str) -> Option<pb::Decision> {
    pb::Decision::from_str_name(&proto_name("DECISION_", w)?)
        .filter(|c| *c != pb::Decision::Unspecified)
}

pub fn kill_outcome(v: i32) -> String {
    word(
        pb::KillOutcome::try_from(v).ok().map(|c| c.as_str_name()),
        "KILL_OUTCOME_",
    )
}

fn dim_state(s: i32) -> &'static str {
    match pb::DimensionState::try_from(s).unwrap_or(pb::DimensionState::Unspecified) {
        pb::DimensionState::Enforced => "enforced",
        pb::DimensionState::Unavailable => "unavailable",
        pb::DimensionState::NotRequested => "not_requested",
        pb::DimensionState::Unspecified => "unspecified",
    }
}

pub fn execution(e: &pb::Execution) -> Value {
    json!({
        "id": e.id,
        "status": status_word(e.status),
        "exit_code": e.exit_code,
        "signal": e.signal,
        "started_at_ms": e.started_at_unix_ms,
        "ended_at_ms": e.ended_at_unix_ms,
        "duration_ms": e.duration_ms,
        "profile": e.profile,
        "argv": e.argv,
        "cwd": e.cwd,
        "containment": e.containment.iter().map(|d| json!({
            "dimension": d.name, "state": dim_state(d.state), "detail": d.detail,
        })).collect::<Vec<_>>(),
        "teardown_complete": e.teardown_complete,
        "survivors": e.survivors,
        "ended_by_teardown": e.ended_by_teardown,
        "timeout_ms": e.timeout_ms,
        "error": e.error,
        "requested_by_role": e.requested_by_role,
        "principal": e.principal,
    })
}

pub fn approval(a: &pb::Approval) -> Value {
    json!({
        "id": a.id,
        "short_id": a.short_id,
        "state": approval_state(a.state),
        "risk_class": risk_class(a.risk_class),
        "reasons": a.reasons.iter().map(|r| json!({"risk_class": risk_class(r.risk_class), "why": r.why})).collect::<Vec<_>>(),
        "needs_confirmation": a.needs_confirmation,
        "purpose": a.purpose,
        "target": a.target,
        "place": place(a.place),
        "run_as": a.run_as,
        "command": a.command,
        "argv": a.argv,
        "cwd": a.cwd,
        "profile": a.profile,
        "env": a.env,
        "stdin": {"head": a.stdin_head, "bytes": a.stdin_bytes},
        "timeout_ms": a.timeout_ms,
        "digest": a.digest,
        "requester_role": a.requester_role,
        "requester_principal": a.requester_principal,
        "created_at_ms": a.created_at_unix_ms,
        "expires_at_ms": a.expires_at_unix_ms,
        "decided_by": a.decided_by,
        "decided_at_ms": a.decided_at_unix_ms,
        "note": a.note,
        "execution_id": a.execution_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_words_round_trip_and_junk_is_none() {
        assert_eq!(approval_state(pb::ApprovalState::Pending as i32), "pending");
        assert_eq!(risk_class(pb::RiskClass::ReadOnly as i32), "read_only");
        assert_eq!(
            kill_outcome(pb::KillOutcome::AlreadyGone as i32),
            "already_gone"
        );
        assert_eq!(risk_class(0), "");
        assert_eq!(risk_class(99), "");
        for w in [
            "read_only",
            "reversible_low",
            "config_mutation",
            "destructive",
        ] {
            assert_eq!(risk_class(parse_risk_class(w).unwrap() as i32), w);
        }
        assert_eq!(parse_decision("approve"), Some(pb::Decision::Approve));
        for junk in ["", "APPROVE", "unspecified", "maybe", "pend ing"] {
            assert_eq!(parse_decision(junk), None, "{junk:?}");
            assert_eq!(parse_approval_state(junk), None, "{junk:?}");
        }
    }
}

/// mcpd's messages as the API shows them (`/api/mcp/…`, `/api/events`).
pub mod mcp {
    use argos_proto::exec::v1 as pb;
    use argos_proto::mcp::v1 as mpb;
    use base64::Engine as _;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn state_word(s: i32) -> &'static str {
        match mpb::ServerState::try_from(s).unwrap_or(mpb::ServerState::Unspecified) {
            mpb::ServerState::Connecting => "connecting",
            mpb::ServerState::Connected => "connected",
            mpb::ServerState::NeedsAuth => "needs_auth",
            mpb::ServerState::Timeout => "timeout",
            mpb::ServerState::Error => "error",
            mpb::ServerState::Disabled => "disabled",
            mpb::ServerState::Reconnecting => "reconnecting",
            mpb::ServerState::Unspecified => "",
        }
    }

    fn values_view(m: &std::collections::HashMap<String, mpb::Value>) -> serde_json::Value {
        let sorted: BTreeMap<&String, serde_json::Value> = m
            .iter()
            .map(|(k, v)| (k, json!({"value": v.value, "secret": v.secret})))
            .collect();
        json!(sorted)
    }

    /// A server as the API shows it (secrets' values are never in mcpd's answers), with its
    /// registration at execd when it has one.
    pub fn server(
        s: &mpb::Server,
        registration: Option<&pb::McpRegistration>,
    ) -> serde_json::Value {
        let c = s.config.clone().unwrap_or_default();
        let mut v = json!({
            "id": c.id,
            "name": c.name,
            "enabled": c.enabled,
            "disabled_tools": c.disabled_tools,
            "connect_timeout_ms": c.connect_timeout_ms,
            "call_timeout_ms": c.call_timeout_ms,
            "local": c.local,
            "state": state_word(s.state),
            "error": s.error,
            "state_since_ms": s.state_since_unix_ms,
            "connected_at_ms": s.connected_at_unix_ms,
            "server_name": s.server_name,
            "server_version": s.server_version,
            "protocol_version": s.protocol_version,
            "tools": s.tools,
            "tools_changed": s.tools_changed,
            "era": s.era,
        });
        match c.transport {
            Some(mpb::server_config::Transport::Stdio(st)) => {
                v["transport"] = json!("stdio");
                v["stdio"] = json!({"command": st.command, "args": st.args, "env": values_view(&st.env),
                                    "cwd": st.cwd, "network": st.network});
            }
            Some(mpb::server_config::Transport::StreamableHttp(r)) => {
                v["transport"] = json!("streamable_http");
                v["streamable_http"] = json!({"url": r.url, "headers": values_view(&r.headers)});
            }
            Some(mpb::server_config::Transport::Sse(r)) => {
                v["transport"] = json!("sse");
                v["sse"] = json!({"url": r.url, "headers": values_view(&r.headers)});
            }
            None => {}
        }
        if let Some(r) = registration {
            v["registration"] = json!({"digest": r.digest, "registered_by": r.registered_by,
                                       "registered_at_ms": r.registered_at_unix_ms});
        }
        v
    }

    pub fn tool(t: &mpb::Tool) -> serde_json::Value {
        let schema = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap_or(json!(null));
        let a = t.annotations.unwrap_or_default();
        let state = match mpb::ToolState::try_from(t.state).unwrap_or(mpb::ToolState::Unspecified) {
            mpb::ToolState::Enabled => "enabled",
            mpb::ToolState::Disabled => "disabled",
            mpb::ToolState::Changed => "changed",
            mpb::ToolState::Unspecified => "",
        };
        let mut v = json!({
            "qualified_name": t.qualified_name,
            "server": t.server,
            "name": t.name,
            "title": t.title,
            "description": t.description,
            "input_schema": schema(&t.input_schema_json),
            "annotations": {"read_only": a.read_only, "destructive": a.destructive,
                            "idempotent": a.idempotent, "open_world": a.open_world},
            "state": state,
            "pinned_sha256": t.pinned_sha256,
        });
        if state == "changed" {
            v["offered_description"] = json!(t.offered_description);
            v["offered_input_schema"] = schema(&t.offered_input_schema_json);
            // Empty: never reviewed (first offered after its server's first listing).
            v["pinned_description"] = json!(t.pinned_description);
            v["pinned_input_schema"] = schema(&t.pinned_input_schema_json);
        }
        v
    }

    pub fn result(r: mpb::CallToolResponse) -> serde_json::Value {
        let content: Vec<serde_json::Value> = r
            .content
            .into_iter()
            .filter_map(|c| {
                Some(match c.kind? {
                    mpb::content::Kind::Text(t) => json!({"type": "text", "text": t}),
                    mpb::content::Kind::Image(i) => json!({"type": "image", "mime_type": i.mime_type,
                        "data": base64::engine::general_purpose::STANDARD.encode(&i.data)}),
                    mpb::content::Kind::ResourceJson(j) => json!({"type": "resource",
                        "resource": serde_json::from_str::<serde_json::Value>(&j).unwrap_or(json!(j))}),
                })
            })
            .collect();
        let structured = (!r.structured_json.is_empty())
            .then(|| serde_json::from_str::<serde_json::Value>(&r.structured_json).ok())
            .flatten();
        json!({"server": r.server, "is_error": r.is_error, "truncated": r.truncated,
               "untrusted": r.untrusted, "content": content, "structured": structured})
    }
}
