//! Standing approvals: an admin's approval of one exact request (its canonical form and
//! digest, its place and run-as identity included) that jobd may run again and again for
//! one owner — a task's action, approved once per version of the task. Every run is judged
//! afresh and its digest compared with the approved one, so a task edited in jobd (or a
//! compromised jobd asking for something else) is not covered; revoking one ends it.
//! Approving and revoking are each audited in the transaction that records them.

use argos_store::audit::Entry;
use sqlx::Row as _;

use crate::approval::{Canonical, StoreError};
use crate::gate::{GateError, Place};
use crate::manager::{Manager, Requester};
use crate::spec::now_ms;

/// One standing approval.
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    pub id: String,
    /// What it is for, in the approver's words or jobd's ("task … version …").
    pub label: String,
    /// The principal it runs for, and the peer role that may use it (`job`).
    pub owner: String,
    pub requester_role: String,
    pub place: Place,
    pub canonical: Canonical,
    pub digest: String,
    pub risk_class: String,
    pub approved_by: String,
    pub created_at_ms: i64,
    pub revoked_at_ms: i64,
    pub revoked_by: String,
}

fn row(r: &sqlx::sqlite::SqliteRow) -> Result<Standing, StoreError> {
    let request: String = r.get("request");
    let place: String = r.get("place");
    Ok(Standing {
        id: r.get("id"),
        label: r.get("label"),
        owner: r.get("owner"),
        requester_role: r.get("requester_role"),
        place: crate::gate::stored_place(&place).ok_or(StoreError::Damaged)?,
        canonical: serde_json::from_str(&request).map_err(|_| StoreError::Damaged)?,
        digest: r.get("digest"),
        risk_class: r.get("risk_class"),
        approved_by: r.get("approved_by"),
        created_at_ms: r.get("created_at_ms"),
        revoked_at_ms: r.get("revoked_at_ms"),
        revoked_by: r.get("revoked_by"),
    })
}

pub async fn get(m: &Manager, id: &str) -> Result<Option<Standing>, StoreError> {
    sqlx::query("SELECT * FROM standing_approvals WHERE id = ?")
        .bind(id)
        .fetch_optional(m.ledger.pool())
        .await?
        .as_ref()
        .map(row)
        .transpose()
}

/// Records an admin's standing approval of `judged`'s exact request for `owner`, run by
/// peer role `job`; audited as `standing.approved` by `by`.
pub async fn approve(
    m: &Manager,
    judged: &crate::gate::Judged,
    owner: &str,
    label: &str,
    by: &str,
) -> Result<Standing, GateError> {
    let id = uuid::Uuid::now_v7().to_string();
    let (request, digest) = judged.canonical.text_and_digest();
    let mut t = m.audit.begin().await?;
    sqlx::query(
        "INSERT INTO standing_approvals (id, label, owner, requester_role, place, request, digest,
           risk_class, approved_by, created_at_ms) VALUES (?, ?, ?, 'job', ?, ?, ?, ?, ?, ?)",
    )
    .bind(&id)
    .bind(label)
    .bind(owner)
    .bind(judged.place.as_str())
    .bind(&request)
    .bind(&digest)
    .bind(judged.verdict.class.as_str())
    .bind(by)
    .bind(now_ms())
    .execute(&mut *t.tx)
    .await?;
    let detail = serde_json::json!({
        "label": label,
        "owner": owner,
        "place": judged.place.as_str(),
        "digest": digest,
        "risk_class": judged.verdict.class.as_str(),
        "reasons": judged.verdict.reasons,
        "request": serde_json::from_str::<serde_json::Value>(&request).unwrap_or_default(),
    });
    t.append(&Entry::new("standing.approved", by, &id, detail))
        .await?;
    t.commit().await?;
    tracing::info!(standing = %id, owner, label, by, digest = %digest, "standing approval recorded");
    get(m, &id)
        .await?
        .ok_or_else(|| GateError::Field("standing_approval", format!("{id} vanished")))
}

/// Revokes standing approval `id` (once); audited as `standing.revoked` by `by`.
pub async fn revoke(m: &Manager, id: &str, by: &str) -> Result<Standing, GateError> {
    let mut t = m.audit.begin().await?;
    let done = sqlx::query(
        "UPDATE standing_approvals SET revoked_at_ms = ?, revoked_by = ?
         WHERE id = ? AND revoked_at_ms = 0",
    )
    .bind(now_ms())
    .bind(by)
    .bind(id)
    .execute(&mut *t.tx)
    .await?
    .rows_affected()
        == 1;
    if done {
        t.append(&Entry::new(
            "standing.revoked",
            by,
            id,
            serde_json::json!({}),
        ))
        .await?;
        t.commit().await?;
        tracing::info!(standing = %id, by, "standing approval revoked");
    }
    get(m, id)
        .await?
        .ok_or_else(|| GateError::Store(StoreError::NotFound(id.to_string())))
}

/// The standing approval `id` if it covers this request exactly: asked by peer role
/// `job` for its owner, in its place, with its digest, and not revoked.
pub async fn covering(
    m: &Manager,
    id: &str,
    who: &Requester,
    place: Place,
    digest: &str,
) -> Result<Standing, GateError> {
    let refuse = |why: String| GateError::Field("standing_approval", why);
    let s = get(m, id)
        .await?
        .ok_or_else(|| refuse(format!("{id} is no standing approval")))?;
    if !who.role.split('+').any(|r| r == s.requester_role) || who.principal != s.owner {
        return Err(refuse(format!("{id} is not this requester's")));
    }
    if s.revoked_at_ms != 0 {
        return Err(refuse(format!(
            "{id} was revoked by {}; nothing ran",
            s.revoked_by
        )));
    }
    if s.place != place || s.digest != digest {
        return Err(refuse(format!(
            "{id} does not cover this request (approved: {} with digest {}; asked: {} with digest {digest}): what was approved changed; nothing ran",
            s.place.as_str(),
            s.digest,
            place.as_str(),
        )));
    }
    Ok(s)
}
