//! argos-execd: the only privileged daemon: contained execution, process identity,
//! approvals and the executions ledger.
#![deny(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use argos_common::config::{Config, ExecConfig};
use argos_common::daemon::{self, Privilege, Serve, Spec};
use argos_execd::gate;
use argos_execd::launch::{Launcher, OutputLimits};
use argos_execd::ledger::Ledger;
use argos_execd::manager::Manager;
use argos_execd::profile::{HostPaths, Profiles};
use argos_execd::service::{self, ExecService};
use argos_execd::spec::Dimension;
use argos_store::audit::Audit;

/// SIGUSR2 is a stop of the service, not a restart: the unit's `KillSignal=SIGUSR2`
/// (`RestartKillSignal=SIGTERM`). Every running launch is ended first, with its end
/// recorded, then execd stops as on SIGTERM. A SIGTERM alone (a restart, or any other
/// supervisor's stop) leaves the launches running for the next execd to re-adopt.
/// `usr2` is handled from the start of execd's setup, so a stop while it starts does not
/// kill it by SIGUSR2's default action; the launches are ended once the manager exists.
fn stop_ends_launches(manager: &Arc<Manager>, mut usr2: tokio::signal::unix::Signal) {
    let manager = manager.clone();
    tokio::spawn(async move {
        if usr2.recv().await.is_some() {
            tracing::info!("SIGUSR2: the service stops; ending every running launch first");
            let n = manager.end_all().await;
            tracing::info!(launches = n, "every launch ended; stopping");
            // Their ends, and everything before, held by the gateway before execd goes.
            let _ = manager
                .anchor_trail("the service stops", std::time::Duration::from_secs(1))
                .await;
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM);
        }
    });
}

/// execd's own checks of the config, all reported together before anything is bound.
fn validate(c: &Config) -> Vec<String> {
    let e = &c.exec;
    let mut problems = Vec::new();
    if launch_uid_range(e).is_none() {
        problems.push(format!(
            "exec.launch_uid_base/launch_uid_count ({}, {}) must describe a non-empty range above 65535 and below 4294967295",
            e.launch_uid_base, e.launch_uid_count
        ));
    }
    if e.warm_shims > MAX_WARM_SHIMS {
        problems.push(format!(
            "exec.warm_shims is {}; at most {MAX_WARM_SHIMS} shims per profile may wait",
            e.warm_shims
        ));
    }
    if e.approval_ttl_s == 0 {
        problems
            .push("exec.approval_ttl_s is 0; an approval must have time to be decided".to_string());
    }
    problems
}

const MAX_WARM_SHIMS: u64 = 64;

/// The reserved uid range: it must fit below the invalid uid (u32::MAX).
fn launch_uid_range(c: &ExecConfig) -> Option<(u32, u32)> {
    let end = c.launch_uid_base.checked_add(c.launch_uid_count)?;
    (c.launch_uid_count > 0 && end < u64::from(u32::MAX) && c.launch_uid_base > 65535)
        .then_some((c.launch_uid_base as u32, c.launch_uid_count as u32))
}

fn main() -> ExitCode {
    argos_alloc::keep_large_buffers();
    let spec = Spec::new("execd", Privilege::MayBeRoot).validate(validate);
    daemon::run(spec, |ctx| async move {
        let usr2 = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined2())
            .context("handling SIGUSR2")?;
        let profiles = Profiles::builtin().map_err(anyhow::Error::msg)?;
        let exe = std::env::current_exe().context("locating argos-execd")?;
        let shim = exe.with_file_name("argos-shim");
        anyhow::ensure!(
            shim.exists(),
            "{} is missing (it is built with argos-execd)",
            shim.display()
        );
        let launcher = Launcher {
            state_dir: ctx.state_dir.clone(),
            work_root: ctx.config.exec.work_dir.clone(),
            shim,
            profiles,
            host: HostPaths {
                state_dir: ctx.config.state_dir.clone(),
                runtime_dir: ctx.config.runtime_dir.clone(),
                extra_homes: ctx.config.exec.extra_homes.clone(),
            },
            disabled: ctx
                .config
                .exec
                .disabled_dimensions
                .iter()
                .filter_map(|d| Dimension::parse(d))
                .collect(),
            output: OutputLimits {
                log_cap_bytes: ctx
                    .config
                    .exec
                    .output_log_cap_mb
                    .saturating_mul(1024 * 1024),
                ..OutputLimits::default()
            },
            grace_ms: 2000,
            terminal_detach_ttl_ms: ctx.config.exec.terminal_detach_ttl_s.saturating_mul(1000),
            launch_uids: launch_uid_range(&ctx.config.exec).context("exec.launch_uid_base")?,
        };
        launcher.check_work_root().map_err(anyhow::Error::msg)?;
        launcher.ensure_dirs()?;
        let warm_shims = ctx.config.exec.warm_shims;
        let key = Arc::new(
            argos_store::key::Key::load_or_create(&ctx.state_dir.join("execd.key"))
                .context("execd's key")?,
        );
        let path = ctx.state_dir.join("execd.db");
        argos_store::check(&path, "execd").await.map_err(|e| {
            let lasting = e.lasting();
            daemon::refusal(e, lasting)
        })?;
        let ledger = Ledger::open(&path).await?;
        let db = ledger.pool().clone();
        let audit = Arc::new(
            Audit::open(ledger.pool().clone(), key, "execd")
                .await
                .context("opening the audit trail")?,
        );
        let approval_ttl_s = ctx.config.exec.approval_ttl_s;
        let q = &ctx.config.quota;
        let quota = argos_execd::quota::Quota {
            launches: q.launches,
            terminals: q.terminals,
            pending_approvals: q.pending_approvals,
            daemon_launches: q.daemon_launches,
            daemon_pending_approvals: q.daemon_pending_approvals,
        };
        let manager = Manager::new(
            launcher,
            ledger,
            audit,
            warm_shims as usize,
            approval_ttl_s,
            quota,
            argos_execd::approval::Rules {
                owner_may_decide: !ctx.config.approvals.require_other_admin,
            },
        );
        manager
            .reconcile()
            .await
            .context("reconciling launches after start")?;
        gate::resume(&manager)
            .await
            .context("resuming approvals after start")?;
        manager.pool.fill();
        stop_ends_launches(&manager, usr2);
        let svc = ExecService {
            manager: manager.clone(),
            mcp_starts: Default::default(),
        };
        let mut serve = Serve::new(service::server(svc), argos_execd::access::policy());
        let retention_s = ctx.config.exec.retention_s;
        if retention_s > 0 {
            // Finished launches' files go after the retention: checked at start, then
            // every half retention (between 1 s and 10 min).
            let retention = Duration::from_secs(retention_s);
            let every = (retention / 2).clamp(Duration::from_secs(1), Duration::from_secs(600));
            let m = manager.clone();
            serve = serve.with_task(ctx.every("retention sweep", every, move || {
                let m = m.clone();
                async move {
                    m.sweep(retention).await;
                    Ok(())
                }
            }));
        }
        // The cgroups a killed shim left behind go (a shim removes its own at its end).
        serve = serve.with_task(
            ctx.every("cgroup sweep", Duration::from_secs(60), || async {
                let removed = tokio::task::spawn_blocking(argos_execd::cgroup::Cgroups::sweep)
                    .await
                    .unwrap_or(0);
                if removed > 0 {
                    tracing::info!(removed, "removed the cgroups of shims that are gone");
                }
                Ok(())
            }),
        );
        // Approvals past their time expire (their executions are rejected) within 5 s.
        let m = manager.clone();
        serve = serve.with_task(
            ctx.every("approval expiry", Duration::from_secs(5), move || {
                let m = m.clone();
                async move {
                    gate::sweep(&m)
                        .await
                        .map(drop)
                        .context("expiring approvals")
                }
            }),
        );
        // On stop, the warm shims end with execd rather than a moment after it.
        let storage = db.clone();
        Ok(serve
            .with_task(ctx.on_shutdown(move || async move { manager.pool.drain().await }))
            .with_task(ctx.watch("storage", move || {
                argos_store::degraded(storage.clone(), "execd")
            }))
            .at_last(Box::pin(async move {
                argos_store::close(&db)
                    .await
                    .context("closing execd's database")
            })))
    })
}
