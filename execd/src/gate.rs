//! The risk gate: where an agent's or a task's command runs, and whether it waits for an
//! operator's approval of that exact request. Three places ([`Place`]):
//!
//! - `sandbox` (the `agent` profile): runs at once whatever its class — containment is the
//!   guard; the class is recorded.
//! - `inspect` (the `inspect` profile: the host, read-only): runs at once only what the
//!   classifier finds `read_only`; anything else is refused, naming `host`.
//! - `host` (the `host` profile: root on the host): always an approval of the exact
//!   request, even a read (root reads secrets); destructive needs the typed short id.
//! - `auto` (the default): `read_only` → `inspect` at once; anything else → `host` after
//!   an approval.
//!
//! `request_run` judges and either starts the launch or records a pending approval
//! (and its execution, `pending_approval`). `decide` applies an operator's decision; an
//! approval starts its execution at once: the request is rebuilt from the approval's
//! canonical text, its digest recomputed from what is about to run, and the approval
//! consumed (with the audit intent record) before the launch is handed to a shim.
//! `sweep` expires what waited too long; `resume` finishes what a stop interrupted.

use std::sync::Arc;

use argos_risk::{self as risk, Class, Command};
use argos_store::audit::{Entry, sha256_hex};

use crate::approval::{Action, Approval, Canonical, NewApproval, Refusal, State, StoreError};
use crate::launch::{InvalidRequest, LaunchRequest};
use crate::ledger::{self, NewExecution, Record};
use crate::manager::{Intent, Manager, Requester, StartError};
use crate::spec::{Identity, LaunchStatus, now_ms};

/// Where a command runs.
pub use argos_common::vocab::Place;

/// A stored approval's place (before places existed: the sandbox); never `auto`, which
/// is decided before anything is stored.
pub fn stored_place(s: &str) -> Option<Place> {
    if s.is_empty() {
        return Some(Place::Sandbox);
    }
    Place::parse(s).filter(|p| *p != Place::Auto)
}

/// Why the gate refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Invalid(#[from] InvalidRequest),
    #[error("{0}: {1}")]
    Field(&'static str, String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("recording")]
    Db(#[from] sqlx::Error),
}

/// What a request to run became, and where it runs.
#[derive(Debug)]
pub enum Requested {
    /// Started at once (`true`: asked again, under the id its requester chose).
    Started(Record, Place, bool),
    /// Waits for an approval (`true`: an identical one was already pending).
    Pending(Box<Approval>, Record, bool, Place),
}

/// The host commands run on, as approvals name it.
fn target() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into())
}

/// The canonical form of a request run in `place`: what an approval is bound to (the
/// place and whom its profile runs as are part of it).
pub fn canonical(m: &Manager, req: &LaunchRequest, place: Place) -> Canonical {
    let run_as = m
        .launcher
        .profiles
        .get(place.profile())
        .and_then(|p| p.privileges.run_as.clone())
        .unwrap_or_else(|| "root".into());
    Canonical {
        target: target(),
        place: match place {
            Place::Sandbox => String::new(),
            other => other.as_str().into(),
        },
        command: req.command.clone(),
        argv: req.argv.clone(),
        cwd: req.cwd.clone(),
        profile: place.profile().into(),
        env: req.env.clone(),
        timeout_ms: req.timeout_ms,
        run_as,
        stdin_sha256: sha256_hex(&req.stdin),
    }
}

/// The request a canonical form (and its stdin) stands for.
fn request(c: &Canonical, stdin: Vec<u8>) -> LaunchRequest {
    LaunchRequest {
        argv: c.argv.clone(),
        command: c.command.clone(),
        cwd: c.cwd.clone(),
        env: c.env.clone(),
        profile: c.profile.clone(),
        timeout_ms: c.timeout_ms,
        stdin,
        tty: None,
        open_stdin: false,
        executables: Vec::new(),
        registered_env: false,
        client_ref: String::new(),
        end_unfollowed_ms: 0,
    }
}

fn changed(m: &Manager, a: &Approval) {
    let _ = m.approval_changes.send(a.clone());
}

async fn execution_changed(m: &Manager, id: &str) -> Result<Record, GateError> {
    let r = m
        .ledger
        .get(id)
        .await?
        .ok_or_else(|| GateError::Field("execution", format!("{id} vanished")))?;
    let _ = m.changes.send(r.clone());
    Ok(r)
}

/// What a requester asked of the gate, besides the command.
#[derive(Debug, Default)]
pub struct Asked {
    /// Why, shown to the approver.
    pub purpose: String,
    /// The requester's own estimate: raises the class, never lowers it.
    pub declared: Option<Class>,
    pub place: Option<Place>,
    /// The execution's id, chosen by the requester: asking again answers that execution.
    pub execution_id: Option<String>,
    /// A standing approval (a task's approved action) that must cover the request exactly.
    pub standing: Option<String>,
}

/// How far back a requester-chosen execution id's time may be for a new execution, and
/// how far ahead (clock skew).
const CHOSEN_ID_PAST_MS: i64 = 24 * 3600 * 1000;
const CHOSEN_ID_FUTURE_MS: i64 = 5 * 60 * 1000;

fn bad_id(why: &str) -> GateError {
    GateError::Field("execution_id", why.to_string())
}

/// A requester-chosen execution id: a UUID v7, in its hyphenated form.
fn chosen_id(id: &str) -> Result<(String, i64), GateError> {
    let u = uuid::Uuid::parse_str(id).map_err(|_| bad_id("not a UUID"))?;
    if u.get_version_num() != 7 {
        return Err(bad_id("not a UUID v7"));
    }
    let (secs, nanos) = u
        .get_timestamp()
        .map(|t| t.to_unix())
        .ok_or_else(|| bad_id("a UUID v7 without its time"))?;
    let at = i64::try_from(secs).unwrap_or(i64::MAX) * 1000 + i64::from(nanos / 1_000_000);
    Ok((u.hyphenated().to_string(), at))
}

/// A new execution's chosen id must be of now (ids are the ledger's order: a chosen one
/// may not place itself elsewhere in time); an id asked for again is answered whenever.
fn fresh(at_ms: i64) -> Result<(), GateError> {
    let now = now_ms();
    if at_ms < now - CHOSEN_ID_PAST_MS || at_ms > now + CHOSEN_ID_FUTURE_MS {
        return Err(bad_id(
            "a new execution's id must be made within the last 24 hours (and not ahead)",
        ));
    }
    Ok(())
}

/// A chosen execution id being asked for, released when the request is answered.
struct Asking<'a>(&'a Manager, String);

impl<'a> Asking<'a> {
    fn claim(m: &'a Manager, id: &str) -> Option<Asking<'a>> {
        let mut ids = m.chosen_ids.lock().unwrap_or_else(|p| p.into_inner());
        ids.insert(id.to_string())
            .then(|| Asking(m, id.to_string()))
    }
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        let mut ids = self.0.chosen_ids.lock().unwrap_or_else(|p| p.into_inner());
        ids.remove(&self.1);
    }
}

/// The execution a requester asked for before under the id it chose, as it is now.
async fn asked_before(
    m: &Manager,
    id: &str,
    who: &Requester,
) -> Result<Option<Requested>, GateError> {
    let Some(r) = m.ledger.get(id).await? else {
        return Ok(None);
    };
    if r.requested_by_role != who.role || r.principal != who.principal {
        return Err(GateError::Field(
            "execution_id",
            format!("{id} is another requester's execution"),
        ));
    }
    let approval = m.approvals.of_execution(id).await?;
    let place = match &approval {
        Some(a) => a
            .canonical()
            .and_then(|c| stored_place(&c.place))
            .ok_or(StoreError::Damaged)?,
        None => Place::of_profile(&r.profile).unwrap_or(Place::Sandbox),
    };
    Ok(Some(match approval {
        Some(a) => Requested::Pending(Box::new(a), r, true, place),
        None => Requested::Started(r, place, true),
    }))
}

/// A request as the gate judged it: where it runs, its verdict, its launch as validated
/// and the canonical form (and digest) an approval of it is bound to.
pub struct Judged {
    pub req: LaunchRequest,
    pub place: Place,
    pub verdict: risk::Verdict,
    pub spec: crate::spec::LaunchSpec,
    pub canonical: Canonical,
    pub digest: String,
}

/// Judges a request asked for `place` (the whole of it: its environment and input can
/// choose what runs), resolves `auto`, refuses what `inspect` may not run, and validates
/// the launch (as launch `id`), so nothing is refused after an operator approved it.
pub async fn judge(
    m: &Manager,
    mut req: LaunchRequest,
    place: Place,
    declared: Option<Class>,
    id: &str,
) -> Result<Judged, GateError> {
    if req.tty.is_some() {
        return Err(GateError::Field(
            "tty",
            "terminals are opened by admins, not through the gate".into(),
        ));
    }
    if req.open_stdin {
        return Err(GateError::Field(
            "open_stdin",
            "the gate runs a command with the input it was approved with".into(),
        ));
    }
    // A request that names a profile names its place (as before places: `agent`).
    let place = match (place, req.profile.as_str()) {
        (p, "") => p,
        (Place::Auto, profile) => Place::of_profile(profile).ok_or_else(|| {
            GateError::Field(
                "profile",
                format!("{profile} is no place of the gate's (agent, inspect or host)"),
            )
        })?,
        (p, profile) if Place::of_profile(profile) == Some(p) => p,
        (p, profile) => {
            return Err(GateError::Field(
                "profile",
                format!(
                    "{profile} is not where {} runs ({}): give the place only",
                    p.as_str(),
                    p.profile()
                ),
            ));
        }
    };
    // The whole request is judged: its environment and input can choose what runs.
    let verdict = {
        let (command, argv) = (req.command.clone(), req.argv.clone());
        let (env, stdin) = (req.env.clone(), req.stdin.clone());
        let cwd = req.cwd.clone();
        tokio::task::spawn_blocking(move || {
            let command = if argv.is_empty() {
                Command::Shell(&command)
            } else {
                Command::Argv(&argv)
            };
            let mut verdict = risk::judge(
                risk::Request {
                    command,
                    env: &env,
                    stdin: &stdin,
                },
                declared,
            );
            if verdict.class == Class::ReadOnly
                && let Some(why) = devices_around(&cwd)
            {
                verdict.class = Class::ConfigMutation;
                verdict.reasons.insert(
                    0,
                    risk::Reason {
                        class: Class::ConfigMutation,
                        why,
                    },
                );
            }
            if verdict.class == Class::ReadOnly
                && let Some(why) = unread_script(&verdict.programs, crate::launch::DEFAULT_PATH)
            {
                verdict.class = Class::ConfigMutation;
                verdict.reasons.insert(
                    0,
                    risk::Reason {
                        class: Class::ConfigMutation,
                        why,
                    },
                );
            }
            verdict
        })
        .await
        .map_err(|e| GateError::Field("command", format!("the classifier failed: {e}")))?
    };
    let read_only = verdict.class == Class::ReadOnly;
    let place = match place {
        Place::Auto if read_only => Place::Inspect,
        Place::Auto => Place::Host,
        Place::Inspect if !read_only => {
            return Err(GateError::Field(
                "place",
                format!(
                    "inspect runs only what is read-only, and this is {}: {}. Ask for place host and wait for an operator's approval",
                    verdict.class,
                    verdict.reasons.first().map_or("", |r| r.why.as_str())
                ),
            ));
        }
        p => p,
    };
    req.profile = place.profile().into();
    if place == Place::Inspect {
        // The kernel holds the verdict: the launch may execute only the programs it was
        // judged on, and a plain command runs without a shell (which then need not be
        // executable at all).
        req.executables = verdict.programs.clone();
        if let Some(argv) = &verdict.argv {
            req.argv = argv.clone();
            req.command.clear();
        }
    }
    // Refused here, not after an operator approved it.
    let spec = m.launcher.validate(id, &req, m.launcher.launch_uids.0)?;
    let canonical = canonical(m, &req, place);
    let (_, digest) = canonical.text_and_digest();
    Ok(Judged {
        req,
        place,
        verdict,
        spec,
        canonical,
        digest,
    })
}

/// Why a read-only verdict does not hold in the working directory `cwd`: in /dev, /proc
/// or /sys a relative name may be a device or a stream its reader consumes
/// (`cat watchdog`), which the classifier, reading names without the directory, cannot see.
pub fn devices_around(cwd: &str) -> Option<String> {
    let cwd = std::path::Path::new(cwd);
    ["/dev", "/proc", "/sys"]
        .iter()
        .any(|d| {
            let d = std::path::Path::new(d);
            cwd.starts_with(d)
                || std::fs::canonicalize(cwd).is_ok_and(|real| real.starts_with(d))
        })
        .then(|| {
            format!(
                "it runs in {}, where a relative name may be a device or a stream its reader consumes",
                cwd.display()
            )
        })
}

/// Why a read-only verdict does not hold on this host: one of its programs is a script
/// (`#!`) that its model does not say was read (`@script`). A script may evaluate what it
/// is given (Debian's `zgrep` does), so what its options look like says nothing of what
/// it runs. Names are looked up in `path` as the launch will.
pub fn unread_script(programs: &[String], path: &str) -> Option<String> {
    use std::io::Read;
    programs.iter().find_map(|name| {
        let base = name.rsplit('/').next().unwrap_or(name);
        if risk::reviewed_script(base) {
            return None;
        }
        let file = if name.contains('/') {
            Some(std::path::PathBuf::from(name))
        } else {
            path.split(':')
                .map(|d| std::path::Path::new(d).join(name))
                .find(|p| p.is_file())
        }?;
        let mut head = [0u8; 2];
        std::fs::File::open(&file).ok()?.read_exact(&mut head).ok()?;
        (&head == b"#!").then(|| {
            format!(
                "`{name}` is a script on this host ({}), which Argos has not read: not taken for a reader",
                file.display()
            )
        })
    })
}

/// Judges a command and, by its place and class, starts it, records its approval, or
/// refuses it. A request with an execution id its requester chose, asked again, answers
/// that execution as it is: it never runs twice.
pub async fn request_run(
    m: &Arc<Manager>,
    req: LaunchRequest,
    asked: Asked,
    who: &Requester,
) -> Result<Requested, GateError> {
    let Asked {
        purpose,
        declared,
        place,
        execution_id,
        standing,
    } = asked;
    let place = place.unwrap_or(Place::Auto);
    let chosen = execution_id.as_deref().map(chosen_id).transpose()?;
    // One request at a time per chosen id: a repeat racing the first is told to ask again
    // (and then finds its row). A repeat is answered however old its id; only a new
    // execution's id must be of now.
    let _asking = match &chosen {
        Some((id, at)) => {
            let asking = Asking::claim(m, id).ok_or(StoreError::Raced)?;
            if let Some(before) = asked_before(m, id, who).await? {
                return Ok(before);
            }
            fresh(*at)?;
            Some(asking)
        }
        None => None,
    };
    let chosen = chosen.map(|(id, _)| id);
    if purpose.len() > 4096 {
        return Err(GateError::Field("purpose", "longer than 4096 bytes".into()));
    }
    let id = chosen
        .clone()
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let Judged {
        req,
        place,
        verdict,
        spec,
        canonical: c,
        digest,
    } = judge(m, req, place, declared, &id).await?;
    if let Some(standing) = standing {
        let s = crate::standing::covering(m, &standing, who, place, &digest).await?;
        let detail = serde_json::json!({
            "risk_class": verdict.class.as_str(),
            "reasons": verdict.reasons,
            "place": place.as_str(),
            "digest": digest,
            "purpose": purpose,
            "standing_approval": s.id,
            "approved_by": s.approved_by,
        });
        let id = m
            .start_as(
                id,
                &req,
                who,
                Some(&[place.profile().to_string()]),
                Intent::Record(detail),
            )
            .await?;
        let r = m
            .ledger
            .get(&id)
            .await?
            .ok_or_else(|| GateError::Field("execution", format!("{id} vanished")))?;
        return Ok(Requested::Started(r, place, false));
    }
    // The sandbox runs anything at once (its containment is the guard); the host's
    // read-only view runs reads at once; the host itself, never without an approval.
    if place == Place::Sandbox || place == Place::Inspect {
        let detail = serde_json::json!({
            "risk_class": verdict.class.as_str(),
            "reasons": verdict.reasons,
            "place": place.as_str(),
            "digest": digest,
            "purpose": purpose,
        });
        let id = m
            .start_as(
                id,
                &req,
                who,
                Some(&[place.profile().to_string()]),
                Intent::Record(detail),
            )
            .await?;
        let r = m
            .ledger
            .get(&id)
            .await?
            .ok_or_else(|| GateError::Field("execution", format!("{id} vanished")))?;
        return Ok(Requested::Started(r, place, false));
    }
    let unstarted = Identity {
        pid: 0,
        start_time: 0,
        boot_id: String::new(),
    };
    let execution = NewExecution {
        id,
        requested_by_role: who.role.clone(),
        principal: who.principal.clone(),
        argv: spec.argv.clone(),
        cwd: req.cwd.clone(),
        profile: place.profile().into(),
        created_at_ms: now_ms(),
        shim: unstarted.clone(),
        init: unstarted,
        tty: false,
        timeout_ms: spec.timeout_ms,
        client_ref: String::new(),
    };
    let ttl_ms = i64::try_from(m.approval_ttl_s.saturating_mul(1000)).unwrap_or(i64::MAX);
    let (a, created) = m
        .approvals
        .create(
            NewApproval {
                class: verdict.class,
                reasons: verdict.reasons,
                purpose,
                canonical: c,
                stdin: req.stdin.clone(),
                requester_role: who.role.clone(),
                requester_principal: who.principal.clone(),
                ttl_ms,
                merge_identical: chosen.is_none(),
            },
            &execution,
            now_ms(),
        )
        .await?;
    let record = if created {
        changed(m, &a);
        execution_changed(m, &a.execution_id).await?
    } else {
        m.ledger
            .get(&a.execution_id)
            .await?
            .ok_or_else(|| GateError::Field("execution", "vanished".into()))?
    };
    tracing::info!(approval = %a.id, class = %a.class, role = %who.role,
        principal = %who.principal, deduplicated = !created, "approval requested");
    Ok(Requested::Pending(Box::new(a), record, !created, place))
}

/// Applies an operator's decision (`approve`, `deny`, `revoke`) to approval `id`.
pub async fn decide(
    m: &Arc<Manager>,
    id: &str,
    decision: &str,
    by: &Requester,
    confirm: &str,
    note: &str,
) -> Result<(Approval, Record), GateError> {
    let who = by.principal.clone();
    if who.is_empty() {
        return Err(GateError::Field(
            "principal",
            "a decision needs the deciding user".into(),
        ));
    }
    if note.len() > 4096 {
        return Err(GateError::Field("note", "longer than 4096 bytes".into()));
    }
    let action = match decision {
        "approve" => Action::Approve {
            by: who,
            confirm: confirm.to_string(),
        },
        "deny" => Action::Deny { by: who },
        "revoke" => Action::Revoke { by: who },
        other => {
            return Err(GateError::Field(
                "decision",
                format!("{other:?}: approve, deny or revoke"),
            ));
        }
    };
    let actor = ledger::actor(&by.role, &by.principal);
    let mut a = m
        .approvals
        .apply(id, &action, &actor, note, now_ms())
        .await?;
    changed(m, &a);
    tracing::info!(approval = %id, state = a.state.as_str(), by = %actor, "approval decided");
    if a.state == State::Approved {
        a = run_approved(m, a).await?;
    }
    let record = execution_changed(m, &a.execution_id).await?;
    Ok((a, record))
}

/// Runs an approved request: rebuilt from its canonical text, its digest recomputed from
/// what is about to run, the approval consumed, then the launch started.
async fn run_approved(m: &Arc<Manager>, a: Approval) -> Result<Approval, GateError> {
    let c = a.canonical().ok_or(StoreError::Damaged)?;
    let place = stored_place(&c.place).ok_or(StoreError::Damaged)?;
    let stdin = m.approvals.stdin(&a.id).await?;
    let req = request(&c, stdin);
    let (_, digest) = canonical(m, &req, place).text_and_digest();
    let consumed = m
        .approvals
        .apply(&a.id, &Action::Consume { digest }, "execd", "", now_ms())
        .await?;
    changed(m, &consumed);
    let who = Requester {
        role: consumed.requester_role.clone(),
        principal: consumed.requester_principal.clone(),
    };
    let started = m
        .start_as(
            consumed.execution_id.clone(),
            &req,
            &who,
            Some(&[place.profile().to_string()]),
            Intent::Recorded,
        )
        .await;
    if let Err(e) = started {
        fail_unstarted(m, &consumed.execution_id, &format!("could not start: {e}")).await?;
    }
    Ok(consumed)
}

/// Ends an execution whose approval was consumed but which did not start.
async fn fail_unstarted(m: &Manager, execution: &str, why: &str) -> Result<(), GateError> {
    let mut t = m.audit.begin().await?;
    if !ledger::settle_unstarted(&mut t.tx, execution, LaunchStatus::Failed, why, now_ms()).await? {
        return Ok(()); // it started, and its end is recorded as any launch's
    }
    let detail = serde_json::json!({ "status": "failed", "error": why });
    t.append(&Entry::new("launch.outcome", "execd", execution, detail))
        .await?;
    t.commit().await?;
    tracing::warn!(execution, why, "an approved execution did not start");
    execution_changed(m, execution).await?;
    Ok(())
}

/// Expires approvals past their time; their executions are rejected.
pub async fn sweep(m: &Manager) -> Result<usize, GateError> {
    let now = now_ms();
    let mut n = 0;
    for id in m.approvals.overdue(now).await? {
        match m
            .approvals
            .apply(&id, &Action::Expire, "execd", "", now)
            .await
        {
            Ok(a) => {
                n += 1;
                changed(m, &a);
                execution_changed(m, &a.execution_id).await?;
            }
            // Decided meanwhile.
            Err(StoreError::Refused(_) | StoreError::Raced) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(n)
}

/// After a start: expires what is overdue, runs what was approved but not yet run, and
/// ends as failed what was consumed but never started (nothing ran).
pub async fn resume(m: &Arc<Manager>) -> Result<(), GateError> {
    sweep(m).await?;
    for id in m.approvals.approved().await? {
        if let Some(a) = m.approvals.get(&id).await? {
            match run_approved(m, a).await {
                Ok(_) | Err(GateError::Store(StoreError::Refused(Refusal::Final(..)))) => {}
                Err(e) => {
                    tracing::error!(approval = %id, error = %e, "running an approved request after a restart")
                }
            }
        }
    }
    for execution in m.approvals.consumed_unstarted().await? {
        fail_unstarted(
            m,
            &execution,
            "execd stopped after consuming its approval and before starting it; nothing ran",
        )
        .await?;
    }
    Ok(())
}

/// Withdraws an execution still waiting for its approval (its requester, or an operator,
/// no longer wants it): the approval is revoked, the execution rejected; nothing ran.
pub async fn withdraw(m: &Manager, r: &Record, by: &Requester) -> Result<Record, GateError> {
    let a = m
        .approvals
        .of_execution(&r.id)
        .await?
        .ok_or_else(|| GateError::Field("id", format!("{} has no approval", r.id)))?;
    let actor = ledger::actor(&by.role, &by.principal);
    match m
        .approvals
        .apply(
            &a.id,
            &Action::Revoke { by: actor.clone() },
            &actor,
            "withdrawn by its requester",
            now_ms(),
        )
        .await
    {
        Ok(a) => changed(m, &a),
        // Decided meanwhile: the execution says how.
        Err(StoreError::Refused(Refusal::Final(..)) | StoreError::Raced) => {}
        Err(e) => return Err(e.into()),
    }
    execution_changed(m, &r.id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_name_in_dev_proc_or_sys_is_no_read() {
        for cwd in ["/dev", "/dev/fd", "/proc", "/proc/1/..", "/sys/class/net"] {
            assert!(devices_around(cwd).is_some(), "{cwd}");
        }
        for cwd in ["", "/", "/srv", "/devices", "/var/log"] {
            assert_eq!(devices_around(cwd), None, "{cwd}");
        }
    }

    #[test]
    fn a_reader_that_is_a_script_no_one_read_is_none() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let put = |name: &str, body: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, body).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        put("tree", b"#!/bin/sh\neval \"$1\"\n");
        put("which", b"#!/bin/sh\nexec true\n");
        put("lsblk", b"\x7fELF\x02\x01\x01");
        let path = dir.path().display().to_string();
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let why = unread_script(&names(&["lsblk", "tree"]), &path).unwrap();
        assert!(why.contains("`tree` is a script"), "{why}");
        // Read for its model, or not a script, or a builtin (not found): a reader still.
        assert_eq!(
            unread_script(&names(&["which", "lsblk", "cd"]), &path),
            None
        );
        let full = dir.path().join("tree").display().to_string();
        assert!(unread_script(&names(&[&full]), "/nonexistent").is_some());
    }
}
