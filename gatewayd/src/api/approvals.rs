//! The risk gate for people and agents: agents' runs (`POST /api/agent/run`), approvals
//! (list, get, decide) and the audit trails (execd's and the gateway's, merged; verified).

use argos_store::audit::Entry;

use super::*;

/// A command for the risk gate: run at once if read-only, else wait for an approval.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRunBody {
    #[serde(default)]
    command: String,
    #[serde(default)]
    argv: Vec<String>,
    #[serde(default)]
    cwd: String,
    /// Milliseconds (the agent profile's default when absent).
    #[serde(default, deserialize_with = "whole")]
    timeout_ms: Option<u64>,
    #[serde(default)]
    stdin: String,
    #[serde(default)]
    env: std::collections::HashMap<String, String>,
    /// Why, for the approver.
    #[serde(default)]
    purpose: String,
    /// The caller's own estimate: raises the class, never lowers it.
    risk: Option<String>,
    /// Where it runs: `auto` (default: read-only → inspect at once, else host after an
    /// approval), `sandbox`, `inspect` or `host`.
    place: Option<String>,
}

#[utoipa::path(post, path = "/api/agent/run", tag = "approvals", description = "Asks execd's risk gate to run a command, by place: `auto` (default) runs what is read-only at once in `inspect` (the host, read-only) and anything else in `host` (root on the host) after an admin's approval of that exact request; `sandbox` runs at once in the agent sandbox whatever it does; `inspect` refuses what is not read-only; `host` always waits for an approval. An identical pending request returns the same approval. The answer says where it runs. Follow the execution with `GET /api/executions/{id}`.", request_body = AgentRunBody, responses((status = 200, description = "`{\"place\", \"execution\", \"approval\" (null when it runs at once), \"deduplicated\"}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn agent_run(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<AgentRunBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let r = execd(&api, &caller)
        .request_run(pb::RequestRunRequest {
            run: Some(pb::RunRequest {
                argv: b.argv,
                command: b.command,
                cwd: b.cwd,
                env: b.env,
                profile: String::new(),
                timeout_ms: b.timeout_ms,
                stdin: b.stdin.into_bytes(),
                tty: None,
                open_stdin: false,
                executables: Vec::new(),
                client_ref: String::new(),
                end_unfollowed_ms: 0,
            }),
            purpose: b.purpose,
            declared_risk: declared_risk(b.risk.as_deref())?,
            place: place_field(b.place.as_deref())? as i32,
            execution_id: String::new(),
            standing_approval_id: String::new(),
        })
        .await
        .map_err(from_exec)?;
    Ok(Json(json!({
        "place": crate::views::place(r.place),
        "execution": r.execution.as_ref().map(crate::views::execution),
        "approval": r.approval.as_ref().map(crate::views::approval),
        "deduplicated": r.deduplicated,
    })))
}

#[derive(Deserialize)]
pub struct ApprovalsQuery {
    state: Option<String>,
    limit: Option<u32>,
    page_token: Option<String>,
}

#[utoipa::path(get, path = "/api/approvals", tag = "approvals", description = "Approvals, newest first (admins); `state` filters (pending, approved, denied, revoked, expired, consumed).", params(("state" = Option<String>, Query, description = "only this state"), ("limit" = Option<u32>, Query, description = "at most this many (default 50, at most 500)"), ("page_token" = Option<String>, Query, description = "from a previous page")), responses((status = 200, description = "`{\"approvals\": [...], \"next_page_token\"}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn approvals(
    State(api): State<Shared>,
    caller: Caller,
    Query(q): Query<ApprovalsQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let state = match q.state.as_deref() {
        None | Some("") => pb::ApprovalState::Unspecified,
        Some(s) => crate::views::parse_approval_state(s).ok_or_else(|| {
            invalid(format!(
                "state: {s:?} is not pending, approved, denied, revoked, expired or consumed"
            ))
        })?,
    };
    let r = execd(&api, &caller)
        .list_approvals(pb::ListApprovalsRequest {
            state: state as i32,
            page_size: q.limit.unwrap_or(0),
            page_token: q.page_token.unwrap_or_default(),
        })
        .await
        .map_err(|e| from_exec(e.rename_field("page_size", "limit")))?;
    Ok(Json(json!({
        "approvals": r.approvals.iter().map(crate::views::approval).collect::<Vec<_>>(),
        "next_page_token": r.next_page_token,
    })))
}

#[utoipa::path(get, path = "/api/approvals/{id}", tag = "approvals", description = "One approval (admins).", params(("id" = String, Path, description = "approval id")), responses((status = 200, description = "`{\"approval\"}`"), (status = 404, description = "no such approval", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn approval(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let a = execd(&api, &caller)
        .get_approval(&id)
        .await
        .map_err(from_exec)?;
    Ok(Json(json!({"approval": crate::views::approval(&a)})))
}

/// An admin's decision.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// approve, deny or revoke.
    decision: String,
    /// For a destructive command: the approval's short id, typed.
    #[serde(default)]
    confirm: String,
    #[serde(default)]
    note: String,
}

#[utoipa::path(post, path = "/api/approvals/{id}/decision", tag = "approvals", description = "Approves, denies or revokes an approval (admins, by session or a token with `approve`). Approving runs the command at once; a destructive one needs `confirm` set to the approval's short id. Nobody decides their own request.", params(("id" = String, Path, description = "approval id")), request_body = DecisionBody, responses((status = 200, description = "`{\"approval\", \"execution\"}`"), (status = 400, description = "bad field (named), or a missing or wrong confirmation", body = ErrorBody), (status = 404, description = "no such approval", body = ErrorBody), (status = 409, description = "already decided, expired or used", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope, own request or cross-site)", body = ErrorBody)))]
pub async fn decide(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
    Body(b): Body<DecisionBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    // An agent's token asks; it never decides — not its own request, not another's.
    if let Via::Bearer(scopes) = &caller.via
        && scopes
            .iter()
            .any(|s| s == "agent" || s == crate::agent_mcp::SCOPE)
    {
        return Err(ApiError::forbidden(
            "a token with the agent scope cannot decide approvals: decide from a session or with an approve-scoped token",
        ));
    }
    let decision = crate::views::parse_decision(&b.decision)
        .ok_or_else(|| invalid("decision: approve, deny or revoke"))?;
    let detail = json!({"decision": b.decision, "note": b.note});
    let r = audited(
        &api,
        "approval.decide",
        &caller.user.name,
        &id,
        detail,
        async {
            execd(&api, &caller)
                .decide_approval(pb::DecideApprovalRequest {
                    id: id.clone(),
                    decision: decision as i32,
                    confirm: b.confirm.clone(),
                    note: b.note.clone(),
                })
                .await
                .map_err(from_exec)
        },
    )
    .await?;
    Ok(Json(json!({
        "approval": r.approval.as_ref().map(crate::views::approval),
        "execution": r.execution.as_ref().map(crate::views::execution),
    })))
}

#[derive(Deserialize)]
pub struct AuditQuery {
    /// Kinds starting with this.
    kind: Option<String>,
    /// Records about this execution, approval, user or token.
    subject: Option<String>,
    limit: Option<u32>,
}

fn audit_json(source: &str, r: &argos_store::audit::Record) -> serde_json::Value {
    json!({
        "source": source,
        "seq": r.seq,
        "at_ms": r.at_ms,
        "kind": r.kind,
        "actor": r.actor,
        "subject": r.subject,
        "detail": serde_json::from_str::<serde_json::Value>(&r.detail).unwrap_or_default(),
        "hash": r.hash,
    })
}

#[utoipa::path(get, path = "/api/audit", tag = "audit", description = "The audit trails of execd (launches, approvals) and the gateway (logins, accounts, tokens, decisions), merged newest first (admins).", params(("kind" = Option<String>, Query, description = "kinds starting with this, e.g. `approval.`"), ("subject" = Option<String>, Query, description = "records about this id or name"), ("limit" = Option<u32>, Query, description = "at most this many from each trail (default 50, at most 500)")), responses((status = 200, description = "`{\"records\": [{\"source\", \"seq\", \"at_ms\", \"kind\", \"actor\", \"subject\", \"detail\", \"hash\"}]}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn audit(
    State(api): State<Shared>,
    caller: Caller,
    Query(q): Query<AuditQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let limit = match q.limit.unwrap_or(50) {
        0 => 50,
        n if n > 500 => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_argument",
                "limit: at most 500",
            ));
        }
        n => n,
    };
    let execd = execd(&api, &caller)
        .list_audit(pb::ListAuditRequest {
            kind_prefix: q.kind.clone().unwrap_or_default(),
            subject: q.subject.clone().unwrap_or_default(),
            before_seq: 0,
            page_size: limit,
        })
        .await
        .map_err(from_exec)?
        .records;
    let gateway = api
        .audit
        .list(&argos_store::audit::Filter {
            kind_prefix: q.kind,
            subject: q.subject,
            actor: None,
            before_seq: None,
            limit,
        })
        .await
        .map_err(ApiError::internal)?;
    let mut records: Vec<(i64, serde_json::Value)> = execd
        .iter()
        .map(|r| {
            let rec = argos_store::audit::Record {
                seq: r.seq,
                at_ms: r.at_unix_ms,
                kind: r.kind.clone(),
                actor: r.actor.clone(),
                subject: r.subject.clone(),
                detail: r.detail.clone(),
                prev_hash: r.prev_hash.clone(),
                hash: r.hash.clone(),
                mac: String::new(),
            };
            (r.at_unix_ms, audit_json("execd", &rec))
        })
        .chain(gateway.iter().map(|r| (r.at_ms, audit_json("gateway", r))))
        .collect();
    records.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    Ok(Json(
        json!({"records": records.into_iter().map(|(_, v)| v).collect::<Vec<_>>()}),
    ))
}

#[utoipa::path(get, path = "/api/audit/verify", tag = "audit", description = "Walks both audit trails (execd's and the gateway's) and names the first row of each that does not verify (admins): a broken chain, a MAC not made with the daemon's key, or rows missing or rewritten up to the newest anchor the other daemon holds of the trail (a trail cut short or recomputed); and execd's executions ledger against its trail (`ledger`: the first execution whose command, directory or profile is not what its launch.intent recorded, that ran with none, or whose intent names no row).", responses((status = 200, description = "`{\"execd\": {\"ok\", \"rows\", \"head_seq\", \"head_hash\", \"broken_seq\", \"broken_reason\", \"ledger\": {\"ran\", \"intents\", \"broken_execution\", \"broken_reason\"}, \"anchor\": {\"seq\", \"hash\", \"at_ms\", \"by\"} | null}, \"gateway\": {…}}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody)))]
pub async fn audit_verify(
    State(api): State<Shared>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    use crate::anchor::EXECD;
    let anchor_json = |a: Option<(i64, &str, i64, &str)>| {
        a.map(|(seq, hash, at_ms, by)| json!({"seq": seq, "hash": hash, "at_ms": at_ms, "by": by}))
    };
    // execd's trail, against the newest anchor the gateway holds of it.
    let held = api
        .audit
        .anchor_of(EXECD)
        .await
        .map_err(ApiError::internal)?;
    let e = execd(&api, &caller)
        .verify_audit(held.map(|a| pb::AuditAnchor {
            seq: a.seq,
            hash: a.hash,
            at_ms: a.at_ms,
            by: a.by,
        }))
        .await
        .map_err(from_exec)?;
    // The gateway's, against the newest anchor execd holds of it.
    let theirs = execd(&api, &caller)
        .list_audit(pb::ListAuditRequest {
            kind_prefix: argos_store::audit::ANCHOR.into(),
            subject: "gateway".into(),
            before_seq: 0,
            page_size: 1,
        })
        .await
        .map_err(from_exec)?
        .records
        .into_iter()
        .next()
        .and_then(|r| {
            let d: serde_json::Value = serde_json::from_str(&r.detail).ok()?;
            Some(argos_store::audit::Anchor {
                by: EXECD.into(),
                seq: d["seq"].as_i64()?,
                hash: d["hash"].as_str()?.to_string(),
                at_ms: r.at_unix_ms,
            })
        });
    let g = api
        .audit
        .verify(theirs.as_ref())
        .await
        .map_err(ApiError::internal)?;
    let (broken_seq, broken_reason) = g.broken.unwrap_or_default();
    Ok(Json(json!({
        "execd": {"ok": e.ok, "rows": e.rows, "head_seq": e.head_seq, "head_hash": e.head_hash,
                  "broken_seq": e.broken_seq, "broken_reason": e.broken_reason,
                  "ledger": {"ran": e.ledger_ran, "intents": e.ledger_intents,
                             "broken_execution": e.ledger_broken_execution,
                             "broken_reason": e.ledger_broken_reason},
                  "anchor": anchor_json(e.anchor.as_ref().map(|a| (a.seq, a.hash.as_str(), a.at_ms, a.by.as_str())))},
        "gateway": {"ok": broken_seq == 0, "rows": g.rows, "head_seq": g.head_seq,
                    "head_hash": g.head_hash, "broken_seq": broken_seq, "broken_reason": broken_reason,
                    "anchor": anchor_json(g.anchor.as_ref().map(|a| (a.seq, a.hash.as_str(), a.at_ms, a.by.as_str())))},
    })))
}

/// Runs `effect` between an intent record and an outcome record in the gateway's audit
/// trail; if the intent cannot be recorded, the effect does not happen.
pub(crate) async fn audited<T>(
    api: &Api,
    kind: &str,
    actor: &str,
    subject: &str,
    detail: serde_json::Value,
    effect: impl std::future::Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    api.audit
        .append(&Entry::new(kind, actor, subject, detail))
        .await
        .map_err(ApiError::internal)?;
    let r = effect.await;
    let outcome = match &r {
        Ok(_) => json!({"ok": true}),
        Err(e) => json!({"ok": false, "code": e.code, "message": e.message}),
    };
    if let Err(e) = api
        .audit
        .append(&Entry::new(
            format!("{kind}.outcome"),
            actor,
            subject,
            outcome,
        ))
        .await
    {
        tracing::error!(error = %e, kind, "recording an outcome in the audit trail");
    }
    api.anchor_now.notify_one();
    r
}

/// One record of something that already happened (a login attempt).
pub(crate) async fn record(
    api: &Api,
    kind: &str,
    actor: &str,
    subject: &str,
    detail: serde_json::Value,
) -> Result<(), ApiError> {
    let r = api
        .audit
        .append(&Entry::new(kind, actor, subject, detail))
        .await
        .map(|_| ())
        .map_err(ApiError::internal);
    api.anchor_now.notify_one();
    r
}
