//! The job tools: `start_job` (a command in the background through the risk gate, in the
//! places the principal's grant allows), `get_job`, `list_jobs` and `cancel_job`. An
//! agent sees and cancels the jobs its owner started, no one else's (an admin's agent
//! too, as with executions). A job's execution is a resource: subscribing to it tells the
//! agent when the job's approval is decided and when it ends.

use argos_proto::job::v1 as jpb;
use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, Tool};
use serde_json::json;

use super::tools::{arg, granted_place, text_result, tool};
use super::{Endpoint, access};
use crate::api::{Caller, jobd, visible_job};

pub(super) fn start_tool(grant: &access::Grant) -> Result<Tool, ErrorData> {
    tool(json!({
        "name": "start_job",
        "title": "Start a background job",
        "description": concat!(
            "Starts a shell command as a background job through Argos's risk gate, in the same ",
            "places as `run` (a change to the host waits for an operator's approval). It is ",
            "recorded before it starts and followed to its end even across restarts. Answers the ",
            "job: its id, state (queued, awaiting_approval, running, or an end) and its ",
            "execution's resource URI — subscribe to it to hear when the approval is decided and ",
            "when the job ends, rather than polling. Read it with get_job."),
        "inputSchema": {"type": "object", "required": ["command", "purpose"], "additionalProperties": false,
            "properties": {
                "command": {"type": "string", "description": "the shell command, as bash reads it"},
                "purpose": {"type": "string", "description": "why, for the operator who decides"},
                "place": {"type": "string", "enum": json!(grant.run_places)},
                "name": {"type": "string", "description": "a short name for lists"},
                "max_runtime_s": {"type": "integer", "minimum": 1, "maximum": 2_592_000,
                    "description": "seconds it may run (default: the host's jobs.max_runtime_s)"}}},
        "annotations": {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true}
    }))
}

pub(super) fn get_tool() -> Result<Tool, ErrorData> {
    tool(json!({
        "name": "get_job",
        "title": "A job's state and output",
        "description": "A job you started: its state, exit code, why it stands where it does, and once it ended the first and last bytes of its output.",
        "inputSchema": {"type": "object", "required": ["job_id"], "additionalProperties": false,
            "properties": {"job_id": {"type": "string"}}},
        "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
    }))
}

pub(super) fn list_tool() -> Result<Tool, ErrorData> {
    tool(json!({
        "name": "list_jobs",
        "title": "Your jobs",
        "description": "The jobs you started, newest first.",
        "inputSchema": {"type": "object", "additionalProperties": false,
            "properties": {
                "active": {"type": "boolean", "description": "only those not yet ended"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "at most this many (default 20)"}}},
        "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
    }))
}

pub(super) fn cancel_tool() -> Result<Tool, ErrorData> {
    tool(json!({
        "name": "cancel_job",
        "title": "Cancel a job",
        "description": "Cancels a job you started: one not yet started ends at once, one waiting for its approval is withdrawn, a running one is killed (a verified kill).",
        "inputSchema": {"type": "object", "required": ["job_id"], "additionalProperties": false,
            "properties": {"job_id": {"type": "string"}}},
        "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
    }))
}

/// A job as an agent reads it: the API's view, with its execution's resource (none for a
/// task's tool call: nothing runs at execd).
fn view(j: &jpb::JobInfo) -> serde_json::Value {
    let mut v = crate::views::job(j);
    if !j.execution_id.is_empty() && j.tool.is_none() {
        v["resource"] = json!(super::resources::uri(&j.execution_id));
    }
    v
}

impl Endpoint {
    pub(super) async fn start_job(
        &self,
        caller: &Caller,
        grant: &access::Grant,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> CallToolResponse {
        let Some(command) = arg(args, "command").filter(|c| !c.trim().is_empty()) else {
            return text_result("command: a non-empty string is required".into(), true);
        };
        let place = match granted_place(grant, args) {
            Ok(p) => p,
            Err(why) => return text_result(why, true),
        };
        let max_runtime_ms = match args.get("max_runtime_s") {
            None => 0,
            Some(v) => match v.as_u64().filter(|s| (1..=2_592_000).contains(s)) {
                Some(s) => s * 1000,
                None => {
                    return text_result(
                        "max_runtime_s: a whole number of seconds, 1 to 2592000".into(),
                        true,
                    );
                }
            },
        };
        let r = jobd(&self.api, caller)
            .create(jpb::CreateJobRequest {
                name: arg(args, "name").unwrap_or_default().to_string(),
                command: command.to_string(),
                place: place as i32,
                max_runtime_ms,
                purpose: arg(args, "purpose").unwrap_or_default().to_string(),
                via: "mcp".into(),
                ..Default::default()
            })
            .await;
        match r {
            Ok(j) => text_result(json!({"job": view(&j)}).to_string(), false),
            Err(e) => text_result(format!("refused: {}", e.message), true),
        }
    }

    /// `get_job`, `list_jobs`, `cancel_job`: the caller's own jobs only.
    pub(super) async fn job_call(
        &self,
        caller: &Caller,
        name: &str,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> CallToolResponse {
        if name == "list_jobs" {
            let limit = match args.get("limit") {
                None => 20,
                Some(v) => match v.as_u64().filter(|n| (1..=100).contains(n)) {
                    Some(n) => n as u32,
                    None => return text_result("limit: 1 to 100".into(), true),
                },
            };
            let active = args
                .get("active")
                .and_then(|v| v.as_bool())
                .unwrap_or(false);
            return match jobd(&self.api, caller)
                .list(jpb::ListJobsRequest {
                    owner: caller.user.name.clone(),
                    page_size: limit,
                    active,
                    ..Default::default()
                })
                .await
            {
                Ok(r) => text_result(
                    json!({"jobs": r.jobs.iter().map(view).collect::<Vec<_>>()}).to_string(),
                    false,
                ),
                Err(e) => text_result(e.message, true),
            };
        }
        let Some(id) = arg(args, "job_id") else {
            return text_result("job_id: a string is required".into(), true);
        };
        let r = match visible_job(&self.api, caller, false, id, name == "get_job").await {
            Ok(r) => r,
            Err(e) => return text_result(e.message, true),
        };
        if name == "get_job" {
            let j = r.job.unwrap_or_default();
            let mut v = json!({"job": view(&j)});
            if r.stdout.is_some() || r.stderr.is_some() {
                v["stdout"] = super::tools::output(r.stdout.as_ref());
                v["stderr"] = super::tools::output(r.stderr.as_ref());
            }
            // What an upstream tool answered a task's call: data, marked untrusted.
            if let Some(t) = r.tool_result {
                v["tool_result"] = json!({"text": t.text, "is_error": t.is_error,
                    "truncated": t.truncated, "server": t.server, "untrusted": true});
            }
            return text_result(v.to_string(), false);
        }
        match jobd(&self.api, caller).cancel(id).await {
            Ok(j) => text_result(json!({"job": view(&j)}).to_string(), false),
            Err(e) => text_result(e.message, true),
        }
    }
}
