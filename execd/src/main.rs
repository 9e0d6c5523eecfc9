//! argos-execd: the only privileged daemon: contained execution, process identity,
//! approvals and the executions ledger.
#![deny(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use argos_common::daemon::{self, Privilege, Serve, Spec};
use argos_common::grpc::Routes;
use argos_execd::gate;
use argos_execd::launch::{Launcher, OutputLimits};
use argos_execd::ledger::Ledger;
use argos_execd::manager::Manager;
use argos_execd::profile::{HostPaths, Profiles};
use argos_execd::service::{self, ExecService};
use argos_execd::spec::Dimension;
use argos_store::audit::Audit;

/// The reserved uid range, checked: it must fit below the invalid uid (u32::MAX).
fn launch_uid_range(c: &argos_common::config::ExecConfig) -> anyhow::Result<(u32, u32)> {
    let end = c.launch_uid_base.checked_add(c.launch_uid_count);
    anyhow::ensure!(
        c.launch_uid_count > 0
            && end.is_some_and(|e| e < u64::from(u32::MAX))
            && c.launch_uid_base > 65535,
        "exec.launch_uid_base/launch_uid_count must describe a non-empty range above 65535 and below 4294967295"
    );
    Ok((c.launch_uid_base as u32, c.launch_uid_count as u32))
}

fn main() -> ExitCode {
    argos_execd::sys::raw::keep_large_buffers();
    let spec = Spec {
        name: "execd",
        privilege: Privilege::MayBeRoot,
    };
    daemon::run(spec, |ctx| async move {
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
            launch_uids: launch_uid_range(&ctx.config.exec)?,
        };
        launcher.check_work_root().map_err(anyhow::Error::msg)?;
        launcher.ensure_dirs()?;
        let warm_shims = ctx.config.exec.warm_shims;
        anyhow::ensure!(
            warm_shims <= 64,
            "exec.warm_shims is {warm_shims}; at most 64 shims per profile may wait"
        );
        let ledger = Ledger::open(&ctx.state_dir.join("execd.db")).await?;
        let audit = Arc::new(
            Audit::open(ledger.pool().clone())
                .await
                .context("opening the audit trail")?,
        );
        let approval_ttl_s = ctx.config.exec.approval_ttl_s;
        anyhow::ensure!(
            approval_ttl_s > 0,
            "exec.approval_ttl_s is 0; an approval must have time to be decided"
        );
        let manager = Manager::new(launcher, ledger, audit, warm_shims as usize, approval_ttl_s);
        manager
            .reconcile()
            .await
            .context("reconciling launches after start")?;
        gate::resume(&manager)
            .await
            .context("resuming approvals after start")?;
        manager.pool.fill();
        let svc = ExecService {
            identity: ctx.identity.clone(),
            manager: manager.clone(),
        };
        let sweeper = {
            let (manager, stop, retention_s) =
                (manager.clone(), ctx.clone(), ctx.config.exec.retention_s);
            async move {
                if retention_s == 0 {
                    return Ok(());
                }
                let retention = Duration::from_secs(retention_s);
                // Sweep at start, then every half retention (between 1 s and 10 min).
                let every = (retention / 2).clamp(Duration::from_secs(1), Duration::from_secs(600));
                loop {
                    manager.sweep(retention).await;
                    tokio::select! {
                        _ = tokio::time::sleep(every) => {}
                        _ = stop.shutdown() => return Ok(()),
                    }
                }
            }
        };
        // Approvals past their time expire (their executions are rejected) within 5 s.
        let expiry = {
            let (manager, stop) = (manager.clone(), ctx.clone());
            async move {
                loop {
                    if let Err(e) = gate::sweep(&manager).await {
                        tracing::error!(error = %e, "expiring approvals");
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                        _ = stop.shutdown() => return Ok(()),
                    }
                }
            }
        };
        // On stop, the warm shims end with execd rather than a moment after it.
        let drain = {
            let (manager, stop) = (manager.clone(), ctx.clone());
            async move {
                stop.shutdown().await;
                manager.pool.drain().await;
                Ok(())
            }
        };
        Ok(Serve {
            routes: Routes::new().route(service::server(svc)),
            policy: argos_execd::access::policy(),
            background: vec![Box::pin(sweeper), Box::pin(expiry), Box::pin(drain)],
        })
    })
}
