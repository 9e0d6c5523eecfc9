//! `/api/deliveries`: the follow-ups of ended jobs — webhook deliveries (each with its
//! attempts, redeliverable with the same delivery id) and chained task starts — a user's
//! own, admins everyone's; and each user's delivery signing secret.

use argos_proto::job::v1 as jpb;

use super::jobs::{from_jobd, sees_all};
use super::*;

fn view(d: &jpb::Delivery) -> serde_json::Value {
    json!({
        "id": d.id,
        "job_id": d.job_id,
        "generation": d.generation,
        "owner": d.owner,
        "kind": d.kind,
        "target": d.target,
        "state": d.state,
        "attempts": d.attempts,
        "next_attempt_at_ms": d.next_attempt_at_unix_ms,
        "last_error": d.last_error,
        "created_at_ms": d.created_at_unix_ms,
        "delivered_at_ms": d.delivered_at_unix_ms,
        "attempt_log": d.attempt_log.iter().map(|a| json!({
            "attempt": a.attempt, "at_ms": a.at_unix_ms, "status": a.status,
            "error": a.error, "duration_ms": a.duration_ms,
        })).collect::<Vec<_>>(),
    })
}

fn req<T>(caller: &Caller, msg: T) -> tonic::Request<T> {
    argos_common::grpc::with_principal(tonic::Request::new(msg), Some(&caller.user.name), None)
}

async fn visible(
    api: &Api,
    caller: &Caller,
    scope: &str,
    id: &str,
) -> Result<jpb::Delivery, ApiError> {
    let mut c = api.jobs.clone();
    let d = c
        .get_delivery(req(caller, jpb::GetDeliveryRequest { id: id.to_string() }))
        .await
        .map_err(from_jobd)
        .map_err(hide_missing("delivery", id))?
        .into_inner();
    if sees_all(caller, scope) || d.owner == caller.user.name {
        Ok(d)
    } else {
        Err(unknown("delivery", id))
    }
}

#[utoipa::path(post, path = "/api/deliveries/secret", tag = "deliveries", description = "Makes the caller a new delivery signing secret (replacing theirs), shown this once: each webhook follow-up of their jobs is signed with it (`X-Hub-Signature-256: sha256=` the HMAC-SHA256 of `\"{X-Argos-Timestamp}.{body}\"`).", responses((status = 200, description = "`{\"secret\"}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn delivery_secret(
    State(api): State<Shared>,
    caller: Caller,
) -> Result<Json<serde_json::Value>, ApiError> {
    let mut c = api.jobs.clone();
    let r = audited(
        &api,
        "delivery.secret",
        &caller.user.name,
        &caller.user.name,
        json!({}),
        async {
            Ok(
                c.rotate_delivery_secret(req(&caller, jpb::RotateDeliverySecretRequest {}))
                    .await
                    .map_err(from_jobd)?
                    .into_inner(),
            )
        },
    )
    .await?;
    Ok(Json(json!({"secret": r.secret})))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// Only this state: pending, delivered, dead, terminal_unfollowable.
    state: Option<String>,
    /// Only this owner's (admins; a user always sees their own).
    owner: Option<String>,
    /// Only this job's (all its generations').
    job_id: Option<String>,
    /// At most this many (default 50, at most 500).
    limit: Option<u32>,
    page_token: Option<String>,
}

#[utoipa::path(get, path = "/api/deliveries", tag = "deliveries", description = "Follow-ups of ended jobs, newest first: a user's own; an admin's everyone's (or one owner's).", params(DeliveriesQuery), responses((status = 200, description = "`{\"deliveries\": [...], \"next_page_token\"}`"), (status = 400, description = "bad parameter (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope)", body = ErrorBody)))]
pub async fn deliveries(
    State(api): State<Shared>,
    caller: Caller,
    Query(q): Query<DeliveriesQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let owner = if sees_all(&caller, "read") {
        q.owner.unwrap_or_default()
    } else {
        caller.user.name.clone()
    };
    let limit = q.limit.unwrap_or(50);
    if limit > 500 {
        return Err(invalid("limit: at most 500"));
    }
    let mut c = api.jobs.clone();
    let r = c
        .list_deliveries(req(
            &caller,
            jpb::ListDeliveriesRequest {
                owner,
                state: q.state.unwrap_or_default(),
                page_size: limit,
                page_token: q.page_token.unwrap_or_default(),
                job_id: q.job_id.unwrap_or_default(),
            },
        ))
        .await
        .map_err(from_jobd)?
        .into_inner();
    Ok(Json(json!({
        "deliveries": r.deliveries.iter().map(view).collect::<Vec<_>>(),
        "next_page_token": r.next_page_token,
    })))
}

#[utoipa::path(get, path = "/api/deliveries/{id}", tag = "deliveries", description = "One follow-up with its attempts (its owner's, or any for admins).", params(("id" = String, Path, description = "delivery id (UUID v7)")), responses((status = 200, description = "`{\"delivery\"}`"), (status = 404, description = "no such delivery", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope)", body = ErrorBody)))]
pub async fn delivery(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let d = visible(&api, &caller, "read", &id).await?;
    Ok(Json(json!({"delivery": view(&d)})))
}

#[utoipa::path(post, path = "/api/deliveries/{id}/redeliver", tag = "deliveries", description = "Delivers a webhook follow-up again, with the same delivery id, whatever it came to (its owner's, or any for admins).", params(("id" = String, Path, description = "delivery id (UUID v7)")), responses((status = 200, description = "`{\"delivery\"}`"), (status = 404, description = "no such webhook delivery", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (scope or cross-site)", body = ErrorBody)))]
pub async fn redeliver(
    State(api): State<Shared>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    visible(&api, &caller, "exec", &id).await?;
    let mut c = api.jobs.clone();
    let d = audited(
        &api,
        "delivery.redeliver",
        &caller.user.name,
        &id,
        json!({}),
        async {
            Ok(
                c.redeliver(req(&caller, jpb::RedeliverRequest { id: id.clone() }))
                    .await
                    .map_err(from_jobd)?
                    .into_inner(),
            )
        },
    )
    .await?;
    Ok(Json(json!({"delivery": view(&d)})))
}
