//! `POST /api/classify`: execd's risk classifier, explained.

use super::*;

/// A command to classify: `command` (for /bin/sh -c) or `argv`, the environment and
/// standard input it would run with (judged too), and the caller's own estimate of its
/// risk, which can only raise the class.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassifyBody {
    pub command: Option<String>,
    pub argv: Option<Vec<String>>,
    /// read_only, reversible_low, config_mutation or destructive.
    pub risk: Option<String>,
    #[serde(default)]
    pub env: std::collections::HashMap<String, String>,
    #[serde(default)]
    pub stdin: String,
}

#[utoipa::path(post, path = "/api/classify", tag = "executions", description = "The risk class of a command, judged with the environment and standard input it would run with (read_only < reversible_low < config_mutation < destructive) with every reason found, and what running it would take: an agent's or a job's command that is not read_only waits for an operator's approval; a destructive one needs a typed confirmation. Runs nothing.", request_body = ClassifyBody, responses((status = 200, description = "`{\"class\", \"reasons\": [{\"class\", \"why\"}], \"needs_approval\", \"needs_confirmation\"}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn classify(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<ClassifyBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let r = execd(&api, &caller)
        .classify(pb::ClassifyRequest {
            command: b.command.unwrap_or_default(),
            argv: b.argv.unwrap_or_default(),
            declared_risk: declared_risk(b.risk.as_deref())?,
            env: b.env,
            stdin: b.stdin.into_bytes(),
        })
        .await
        .map_err(from_exec)?;
    use crate::views::risk_class;
    Ok(Json(json!({
        "class": risk_class(r.risk_class),
        "reasons": r.reasons.iter().map(|x| json!({"class": risk_class(x.risk_class), "why": x.why})).collect::<Vec<_>>(),
        "needs_approval": r.needs_approval,
        "needs_confirmation": r.needs_confirmation,
    })))
}
