//! argos-jobd: background jobs. A job is one command run for its owner through execd's
//! risk gate (or a task's MCP tool call through mcpd), recorded before it is asked for
//! and followed to its end across restarts of either daemon; it spawns no process
//! itself. See ARCHITECTURE.md.
#![forbid(unsafe_code)]

mod engine;
mod followup;
mod hooks;
mod job;
mod schedule;
mod service;
mod store;
mod task;
mod tasks;

use std::process::ExitCode;

use anyhow::Context as _;
use argos_common::connect::ServerUids;
use argos_common::daemon::{self, Privilege, Serve, Spec};
use argos_common::grpc::Daemon;
use argos_proto::job::v1::job_server::JobServer;

fn main() -> ExitCode {
    daemon::run(
        Spec::new("jobd", Privilege::Unprivileged),
        |ctx| async move {
            let key = std::sync::Arc::new(
                argos_store::key::Key::load_or_create(&ctx.state_dir.join("jobd.key"))
                    .context("jobd's key")?,
            );
            let path = ctx.state_dir.join("jobd.db");
            argos_store::check(&path, "jobd").await.map_err(|e| {
                let lasting = e.lasting();
                daemon::refusal(e, lasting)
            })?;
            let store = store::Store::open(&path).await.context("jobd's database")?;
            let db = store.pool().clone();
            let storage = db.clone();
            // Jobs run through execd's risk gate (its socket must be served by root, or by
            // the uid the peer table gives execd).
            let exec = argos_exec_client::ExecClient::connect_socket(
                &ctx.config.socket_path(Daemon::Execd.name()),
                ServerUids::for_daemon(&ctx.peers, Daemon::Execd),
            );
            // A task's tool call goes through mcpd, as its owner.
            let mcp = argos_common::connect::unix_channel(
                &ctx.config.socket_path(Daemon::Mcpd.name()),
                ServerUids::for_daemon(&ctx.peers, Daemon::Mcpd),
            );
            let j = &ctx.config.jobs;
            let engine = engine::Engine::new(
                store,
                exec,
                mcp,
                engine::Limits {
                    default_runtime_ms: j.max_runtime_s.saturating_mul(1000),
                    active_per_user: j.active_per_user,
                    retention_ms: j.retention_days.saturating_mul(24 * 3600 * 1000),
                    deliver_allow: j.deliver_allow.clone(),
                },
                key,
            );
            engine.spawn();
            Ok(Serve::new(
                JobServer::new(service::JobService { engine }),
                service::policy(),
            )
            .with_task(ctx.watch("storage", move || {
                argos_store::degraded(storage.clone(), "jobd")
            }))
            .at_last(Box::pin(async move {
                argos_store::close(&db)
                    .await
                    .context("closing jobd's database")
            })))
        },
    )
}
