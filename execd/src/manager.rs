//! Launch lifecycle: record, start, watch, finalize, and reconcile after a restart.
//! The ledger row exists before a launch is handed to its shim; the result comes only
//! from the shim's files; a launch whose shim cannot be verified is retired as `lost`,
//! never signalled.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use argos_store::audit::{Audit, Entry};

use crate::approval::{self, Approval};
use crate::launch::{self, Finished, InvalidRequest, KillOutcome, LaunchRequest, Launcher};
use crate::ledger::{Ledger, NewExecution, Record};
use crate::pool::Pool;
use crate::spec::{Identity, LaunchResult, LaunchSpec, LaunchStatus, files, now_ms};
use crate::sys::proc::{self, Verdict};

/// Who asked for a launch, as recorded.
#[derive(Debug, Clone, Default)]
pub struct Requester {
    pub role: String,
    pub principal: String,
}

/// Why a launch could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Invalid(#[from] InvalidRequest),
    #[error("profile {profile}: this peer role may only launch in {allowed}")]
    ProfileNotAllowed { profile: String, allowed: String },
    #[error("every per-launch uid is in use")]
    NoUid,
    #[error(transparent)]
    Quota(#[from] crate::quota::Exceeded),
    #[error("recording the launch")]
    Ledger(#[from] sqlx::Error),
    #[error(transparent)]
    Launch(#[from] launch::LaunchError),
    #[error("execd is stopping: it ends what runs and starts nothing new")]
    Stopping,
    #[error(
        "a launch as root starts only once the gateway holds its audit record, and the gateway did not anchor it within {0} s"
    )]
    Unanchored(u64),
}

/// Whether a launch's audit intent record is still to be written.
#[derive(Debug, Clone)]
pub enum Intent {
    /// Write it, with these details.
    Record(serde_json::Value),
    /// Its approval's consumption was the intent record.
    Recorded,
}

/// How a launch ended, handed from its finalizer to its waiters (so a `Run` answers from
/// memory, not from a second read of the ledger and the launch dir).
#[derive(Debug, Clone)]
pub struct Ended {
    pub record: Record,
    pub finished: Option<Finished>,
}

pub struct Manager {
    pub launcher: Launcher,
    pub ledger: Ledger,
    /// execd's audit trail: an intent record before each launch, an outcome after.
    pub audit: Arc<Audit>,
    /// Asking the gateway to anchor the trail's newest rows (before a root launch, at stop).
    pub anchoring: Arc<crate::anchoring::Anchoring>,
    pub approvals: approval::Store,
    /// Every change of an approval (created, decided, consumed, expired), for `Watch`.
    pub approval_changes: tokio::sync::broadcast::Sender<Approval>,
    /// How long an approval may wait, in seconds.
    pub approval_ttl_s: u64,
    /// Execution ids their requesters chose, while a request for one is being answered.
    pub chosen_ids: std::sync::Mutex<std::collections::HashSet<String>>,
    pub pool: Arc<Pool>,
    /// Every change of a launch's state (started, ended), for `Watch`.
    pub changes: tokio::sync::broadcast::Sender<Record>,
    done: Mutex<HashMap<String, watch::Sender<Option<Arc<Ended>>>>>,
    /// Per-launch uids in use by launches that have not ended.
    uids: crate::uids::UidPool,
    /// How much one user (or peer role) may hold at once.
    quota: crate::quota::Quota,
    /// Set when the service stops (SIGUSR2): no launch starts after it.
    stopping: std::sync::atomic::AtomicBool,
    /// Held (shared) by every start while it runs; `end_all` takes it alone, so the
    /// launches it ends include every start that got past the `stopping` check.
    starting: tokio::sync::RwLock<()>,
}

/// The name a launch uid has inside its launch: the requester's, when it is a plain user
/// name (lowercase letters, digits, `-`, `_`, `.`, starting with a letter, at most 32),
/// else `argos`.
fn user_name(principal: &str) -> String {
    let plain = (1..=32).contains(&principal.len())
        && principal.starts_with(|c: char| c.is_ascii_lowercase())
        && principal
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c));
    if plain {
        principal.into()
    } else {
        "argos".into()
    }
}

impl Manager {
    /// `warm_shims`: how many shims per profile to keep set up and waiting.
    pub fn new(
        launcher: Launcher,
        ledger: Ledger,
        audit: Arc<Audit>,
        warm_shims: usize,
        approval_ttl_s: u64,
        quota: crate::quota::Quota,
        rules: approval::Rules,
    ) -> Arc<Manager> {
        let pool = Pool::new(&launcher, warm_shims);
        let uids = crate::uids::UidPool::new(launcher.launch_uids.0, launcher.launch_uids.1);
        Arc::new(Manager {
            quota,
            approvals: approval::Store::new(ledger.pool().clone(), audit.clone(), quota, rules),
            approval_changes: tokio::sync::broadcast::channel(256).0,
            chosen_ids: Default::default(),
            approval_ttl_s,
            audit,
            anchoring: crate::anchoring::Anchoring::new(),
            launcher,
            ledger,
            pool,
            changes: tokio::sync::broadcast::channel(1024).0,
            done: Mutex::new(HashMap::new()),
            uids,
            stopping: Default::default(),
            starting: Default::default(),
        })
    }

    pub fn dir(&self, id: &str) -> PathBuf {
        self.launcher.launches_dir().join(id)
    }

    /// The spec a launch was started with (its receipt).
    pub fn spec(&self, id: &str) -> Option<LaunchSpec> {
        std::fs::read(self.dir(id).join(files::SPEC))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    fn watch(&self, id: &str) -> watch::Receiver<Option<Arc<Ended>>> {
        let mut map = self.done.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(id.to_string())
            .or_insert_with(|| watch::channel(None).0)
            .subscribe()
    }

    /// Wakes a launch's waiters, with its end when known (else they read the ledger).
    fn notify(&self, id: &str, ended: Option<Ended>) {
        if let Some(e) = &ended {
            let _ = self.changes.send(e.record.clone());
        }
        let mut map = self.done.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = map.remove(id) {
            let _ = tx.send(ended.map(Arc::new));
        }
    }

    /// Validates, records, lays out and starts a launch; a task finalizes it when its
    /// shim exits. Returns the launch id.
    pub async fn start(
        self: &Arc<Self>,
        req: &LaunchRequest,
        who: &Requester,
        allowed_profiles: Option<&[String]>,
    ) -> Result<String, StartError> {
        let id = uuid::Uuid::now_v7().to_string();
        self.start_as(
            id,
            req,
            who,
            allowed_profiles,
            Intent::Record(serde_json::json!({})),
        )
        .await
    }

    /// As [`Manager::start`], as execution `id` (one that waited for its approval, or a
    /// new one); `intent` says whether the audit intent record is still to be written.
    pub async fn start_as(
        self: &Arc<Self>,
        id: String,
        req: &LaunchRequest,
        who: &Requester,
        allowed_profiles: Option<&[String]>,
        intent: Intent,
    ) -> Result<String, StartError> {
        let _starting = self.starting.read().await;
        if self.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StartError::Stopping);
        }
        let uid = self.claim_uid(&id).ok_or(StartError::NoUid)?;
        let spec = match self.launcher.validate(&id, req, uid) {
            Ok(s) => s,
            Err(e) => {
                self.release_uid(&id);
                return Err(e.into());
            }
        };
        if let Some(allowed) = allowed_profiles
            && !allowed.contains(&spec.plan.profile)
        {
            self.release_uid(&id);
            return Err(StartError::ProfileNotAllowed {
                profile: spec.plan.profile.clone(),
                allowed: allowed.join(", "),
            });
        }
        // A first look at the quota, before a warm shim is spent on a launch that would be
        // refused (the count that decides is taken again where the row is written).
        let early = match self.ledger.pool().acquire().await {
            Ok(mut c) => self.quota.launch(&mut c, who, spec.tty.is_some()).await,
            Err(e) => Err(e),
        };
        match early {
            Ok(Ok(())) => {}
            Ok(Err(quota)) => {
                self.release_uid(&id);
                return Err(StartError::Quota(quota));
            }
            Err(e) => {
                self.release_uid(&id);
                return Err(StartError::Ledger(e));
            }
        }
        let profile = spec.plan.profile.clone();
        let shim = match self.pool.take(&profile).await {
            Ok(s) => s,
            Err(e) => {
                self.release_uid(&id);
                return Err(e.into());
            }
        };
        let record = NewExecution {
            id: id.clone(),
            requested_by_role: who.role.clone(),
            principal: who.principal.clone(),
            argv: spec.argv.clone(),
            cwd: spec.cwd.display().to_string(),
            profile: spec.plan.profile.clone(),
            created_at_ms: now_ms(),
            shim: shim.ready.shim.clone(),
            init: shim.ready.init.clone(),
            tty: spec.tty.is_some(),
            timeout_ms: spec.timeout_ms,
            client_ref: req.client_ref.clone(),
        };
        let spec = LaunchSpec {
            shim: Some(shim.ready.shim.clone()),
            init: Some(shim.ready.init.clone()),
            user: user_name(&who.principal),
            ..spec
        };
        let _rx = self.watch(&id);
        // The ledger write (on its own thread) and the launch dir overlap; the launch is
        // handed to its shim only once both are done.
        // The ledger row and the audit intent commit together, before anything runs: a
        // launch that cannot be audited does not start.
        let recorded = async {
            let mut t = self.audit.begin().await?;
            // Counted where the row is written: transactions run one at a time.
            if let Err(e) = self.quota.launch(&mut t.tx, who, record.tty).await? {
                return Ok(Err(e));
            }
            crate::ledger::insert_running(&mut t.tx, &record).await?;
            if let Intent::Record(mut detail) = intent {
                detail["argv"] = serde_json::json!(record.argv);
                detail["cwd"] = record.cwd.clone().into();
                detail["profile"] = record.profile.clone().into();
                t.append(&Entry::new(
                    "launch.intent",
                    crate::ledger::actor(&who.role, &who.principal),
                    &id,
                    detail,
                ))
                .await?;
            }
            t.commit().await.map(Ok)
        };
        let (inserted, prepared) =
            tokio::join!(recorded, async { self.launcher.prepare(spec, &req.stdin) });
        let refused = match inserted {
            Ok(Ok(())) => None,
            Ok(Err(quota)) => Some(StartError::Quota(quota)),
            Err(e) => Some(StartError::Ledger(e)),
        };
        if let Some(e) = refused {
            // Unrecorded, so it never starts: the unused shim ends its tree when its pipe
            // closes, and the launch dir goes.
            if let Ok(p) = &prepared {
                let _ = std::fs::remove_dir_all(&p.dir);
                let _ = std::fs::remove_dir(&p.spec.workspace);
            }
            self.release_uid(&id);
            self.notify(&id, None);
            return Err(e);
        }
        if prepared
            .as_ref()
            .is_ok_and(|p| p.spec.plan.run_as.is_none())
        {
            // Nothing runs as root before the gateway holds its intent (and the approval
            // it consumed): rows deleted later fail `audit verify`. A gateway that
            // watches but does not anchor in time gets the launch refused, ended
            // unstarted; with no gateway there is nobody to hold them (an operator's
            // launch while the gateway is down), and the launch goes ahead.
            if self
                .anchor_trail("a launch as root", crate::anchoring::ROOT_LAUNCH_WAIT)
                .await
                == crate::anchoring::Anchored::TimedOut
            {
                drop(shim);
                self.release_uid(&id);
                let e = StartError::Unanchored(crate::anchoring::ROOT_LAUNCH_WAIT.as_secs());
                self.end_without_result(&id, LaunchResult::lost(format!("not started: {e}")))
                    .await;
                return Err(e);
            }
        }
        let started = match prepared {
            Ok(p) => shim.assign(&id).await.map(|running| (running, p)),
            Err(e) => Err(e),
        };
        self.pool.refill(&profile);
        if started.is_ok() {
            let _ = self.changes.send(Record::running(&record));
        }
        let (running, prepared) = match started {
            Ok(v) => v,
            Err(e) => {
                self.release_uid(&id);
                self.end_without_result(&id, LaunchResult::lost(format!("could not start: {e}")))
                    .await;
                return Err(e.into());
            }
        };
        tracing::info!(id = %id, profile = %prepared.spec.plan.profile, role = %who.role,
            principal = %who.principal, argv = ?prepared.spec.argv, "launch started");
        let me = self.clone();
        let task_id = id.clone();
        tokio::spawn(async move {
            running.ended().await;
            me.finalize(&task_id).await;
        });
        Ok(id)
    }

    /// Asks the gateway to anchor every row of the trail so far, waiting up to `within`;
    /// says so in the log when it could not. A head that cannot be read counts as not
    /// anchored in time.
    pub async fn anchor_trail(&self, before: &str, within: Duration) -> crate::anchoring::Anchored {
        use crate::anchoring::Anchored;
        let seq = match self.audit.content_head().await {
            Ok((seq, _)) => seq,
            Err(e) => {
                tracing::warn!(error = %e, "reading the audit head to anchor it");
                return Anchored::TimedOut;
            }
        };
        let anchored = self.anchoring.anchor(seq, within).await;
        match anchored {
            Anchored::Yes => {}
            Anchored::NoGateway => {
                tracing::debug!(seq, before, "no gateway watches: audit rows not anchored")
            }
            Anchored::TimedOut => tracing::warn!(
                seq,
                before,
                "the gateway did not anchor execd's newest audit rows in time"
            ),
        }
        anchored
    }

    /// Picks a uid no running launch has (starting from a hash of the id).
    fn claim_uid(&self, id: &str) -> Option<u32> {
        self.uids.claim(id)
    }

    /// Marks a running launch's uid as taken (after a restart).
    fn hold_uid(&self, id: &str) {
        if let Some((uid, _)) = self.spec(id).and_then(|s| s.plan.run_as) {
            self.uids.hold(id, uid);
        }
    }

    fn release_uid(&self, id: &str) {
        self.uids.release(id);
    }

    /// Records a launch's end in the ledger (with its outcome record). A write that fails
    /// (the disk full, say) is tried again in the background, waiting longer each time
    /// (up to 30 s), until it is recorded: the end of a launch that ended while nothing
    /// could be written is recorded as soon as it can be, not left `running` until a
    /// restart (a stop leaves it to the next start, which finds its exit marker). None
    /// when it was already final, or is not recorded yet.
    async fn record_end(&self, id: &str, result: &LaunchResult) -> Option<Record> {
        let e = match self.ledger.finish(&self.audit, id, result).await {
            Ok(r) => return r,
            Err(e) => e,
        };
        if argos_store::Fault::of(&e).is_none() {
            // Not the disk's: trying again would not help (the next start reconciles it).
            tracing::error!(id, error = %e, "recording a launch's end");
            return None;
        }
        tracing::error!(id, error = %e, "recording a launch's end: tried again until it is recorded");
        let (ledger, audit, changes) = (
            self.ledger.clone(),
            self.audit.clone(),
            self.changes.clone(),
        );
        let (id, result) = (id.to_string(), result.clone());
        tokio::spawn(async move {
            let mut wait = std::time::Duration::from_millis(250);
            loop {
                tokio::time::sleep(wait).await;
                match ledger.finish(&audit, &id, &result).await {
                    Ok(r) => {
                        tracing::info!(id, "a launch's end recorded once it could be");
                        // Its waiters find it in the ledger; watchers hear it here.
                        if let Some(r) = r {
                            let _ = changes.send(r);
                        }
                        return;
                    }
                    Err(e) => {
                        wait = (wait * 2).min(std::time::Duration::from_secs(30));
                        tracing::warn!(id, error = %e, retry_in_ms = wait.as_millis() as u64,
                            "recording a launch's end");
                    }
                }
            }
        });
        None
    }

    /// Reads a launch's result into the ledger and wakes its waiters.
    pub async fn finalize(&self, id: &str) {
        let spec = self.spec(id);
        let finished = spec
            .as_ref()
            .map(|spec| launch::read_finished(&self.dir(id), spec));
        let result = finished.as_ref().map_or_else(
            || LaunchResult::lost("the launch's spec is gone"),
            |f| f.result.clone(),
        );
        let record = self.record_end(id, &result).await;
        tracing::info!(id, status = result.status.as_str(), exit = ?result.exit_code, "launch ended");
        // The uid goes back to the pool: take the workspace away from it first — root's,
        // mode 0700 whatever mode the workload gave it — so no later launch, of this uid or
        // another, can reach what this one left (nothing inside is reachable through it).
        if let Some(spec) = &spec
            && spec.plan.run_as.is_some()
            && nix::unistd::geteuid().is_root()
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::os::unix::fs::chown(&spec.workspace, Some(0), Some(0));
            let _ =
                std::fs::set_permissions(&spec.workspace, std::fs::Permissions::from_mode(0o700));
        }
        self.release_uid(id);
        self.notify(id, record.map(|record| Ended { record, finished }));
    }

    /// Records that a launch's teardown could not be verified.
    pub async fn teardown_failed(&self, id: &str, why: &str) {
        let mut r = LaunchResult::lost(why);
        r.status = LaunchStatus::TeardownFailed;
        self.end_without_result(id, r).await;
    }

    /// Records an end the shim did not report (lost, failed teardown) and wakes waiters.
    async fn end_without_result(&self, id: &str, result: LaunchResult) {
        let record = self.record_end(id, &result).await;
        self.notify(
            id,
            record.map(|record| Ended {
                record,
                finished: None,
            }),
        );
    }

    /// Waits until a launch is final in the ledger, and returns its record.
    pub async fn wait(&self, id: &str) -> Option<Record> {
        self.wait_end(id).await.map(|e| e.record)
    }

    /// Waits until a launch is final; its captured output comes along when this execd
    /// finalized it just now (else read it with [`Manager::finished`]).
    pub async fn wait_end(&self, id: &str) -> Option<Ended> {
        let mut rx = self.watch(id);
        loop {
            if let Some(ended) = rx.borrow_and_update().as_ref()
                && ended.record.status.is_final()
                && ended.record.id == id
            {
                return Some(Ended::clone(ended));
            }
            match self.ledger.get(id).await {
                Ok(Some(r)) if r.status.is_final() => {
                    self.notify_if_idle(id);
                    return Some(Ended {
                        record: r,
                        finished: None,
                    });
                }
                Ok(Some(_)) => {}
                _ => return None,
            }
            // Woken by finalize; the timeout covers a launch adopted by another path.
            if let Ok(Err(_)) = tokio::time::timeout(Duration::from_millis(500), rx.changed()).await
            {
                // Notified and gone: whatever comes next arrives on a new channel.
                rx = self.watch(id);
            }
        }
    }

    fn notify_if_idle(&self, id: &str) {
        let mut map = self.done.lock().unwrap_or_else(|e| e.into_inner());
        if map.get(id).is_some_and(|tx| tx.receiver_count() == 0) {
            map.remove(id);
        }
    }

    /// What a finished launch captured (head and tail of each stream).
    pub fn finished(&self, id: &str) -> Option<Finished> {
        let spec = self.spec(id)?;
        Some(launch::read_finished(&self.dir(id), &spec))
    }

    /// After a restart: every launch still marked running is either re-adopted (its shim
    /// verifies as ours), finalized (its result is on disk), or retired as lost. Nothing is
    /// signalled here.
    pub async fn reconcile(self: &Arc<Self>) -> anyhow::Result<()> {
        for rec in self.ledger.running().await? {
            let dir = self.dir(&rec.id);
            if dir.join(files::EXIT).exists() {
                self.finalize(&rec.id).await;
                continue;
            }
            let shim: Option<Identity> =
                self.spec(&rec.id).and_then(|s| s.shim).or(rec.shim.clone());
            let verdict = shim
                .as_ref()
                .map(proc::probe)
                .unwrap_or(Verdict::Unverifiable);
            if verdict == Verdict::Owned {
                tracing::info!(id = %rec.id, "re-adopting a live launch");
                self.hold_uid(&rec.id);
                let me = self.clone();
                let shim = shim.expect("owned implies an identity");
                tokio::spawn(async move { me.adopt(&rec.id, shim).await });
            } else if dir.join(files::RESULT).exists() {
                self.finalize(&rec.id).await;
            } else {
                tracing::warn!(id = %rec.id, verdict = verdict.as_str(), "retiring a launch whose shim cannot be verified");
                let why = format!(
                    "execd restarted and the launch's shim is {}; nothing was signalled",
                    verdict.as_str()
                );
                self.end_without_result(&rec.id, LaunchResult::lost(why))
                    .await;
            }
        }
        Ok(())
    }

    /// The service is stopped, not restarted (systemd's stop sends SIGUSR2, a restart
    /// SIGTERM): every running launch gets the same verified kill an operator's `Kill`
    /// gives, all at once, and its end is recorded. Answers how many were running.
    pub async fn end_all(self: &Arc<Self>) -> usize {
        // Nothing new starts; every start already past that check has recorded its launch
        // once this lock is ours.
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        drop(self.starting.write().await);
        let running = match self.ledger.running().await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "listing running launches to end them");
                return 0;
            }
        };
        let grace = Duration::from_millis(self.launcher.grace_ms);
        futures_util::future::join_all(running.iter().map(|rec| async move {
            let outcome = launch::kill_launch(&self.dir(&rec.id), grace).await;
            tracing::info!(id = %rec.id, ?outcome, "ended with the service");
            match outcome {
                KillOutcome::Killed | KillOutcome::AlreadyGone => {
                    self.wait(&rec.id).await;
                }
                KillOutcome::Unconfirmed => {
                    self.teardown_failed(
                        &rec.id,
                        "KILL sent through the pidfd at execd's stop; the end was not observed",
                    )
                    .await;
                }
                KillOutcome::NotOwned(_) => {}
            }
        }))
        .await;
        running.len()
    }

    /// Removes the files (launch dir, workspace) of launches that ended more than
    /// `retention` ago. The ledger keeps their record; their output is gone.
    pub async fn sweep(&self, retention: Duration) -> usize {
        let cutoff = now_ms() - i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
        let ids = match self.ledger.ended_before(cutoff).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "listing launches to sweep");
                return 0;
            }
        };
        let mut removed = 0;
        for id in ids {
            let dir = self.dir(&id);
            let workspace = self.launcher.work_root.join(&id);
            let mut any = false;
            for path in [&dir, &workspace] {
                if path.exists() {
                    any = true;
                    if let Err(e) = std::fs::remove_dir_all(path) {
                        tracing::warn!(id, path = %path.display(), error = %e, "removing an expired launch's files");
                    }
                }
            }
            if any {
                removed += 1;
            }
        }
        if removed > 0 {
            tracing::info!(removed, "removed the files of expired launches");
        }
        removed
    }

    /// Watches an adopted launch until its shim writes the exit marker (or vanishes).
    async fn adopt(&self, id: &str, shim: Identity) {
        let dir = self.dir(id);
        loop {
            if dir.join(files::EXIT).exists() {
                break;
            }
            if proc::probe(&shim) != Verdict::Owned {
                // Gone: it may have written its marker just now.
                if !dir.join(files::EXIT).exists() && !dir.join(files::RESULT).exists() {
                    self.end_without_result(
                        id,
                        LaunchResult::lost("the shim ended without a result"),
                    )
                    .await;
                    return;
                }
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.finalize(id).await;
    }
}
