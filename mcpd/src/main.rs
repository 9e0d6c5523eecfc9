//! argos-mcpd: the MCP broker. It keeps the upstream MCP servers an admin configured
//! connected, each on its own (its own timeout, its own back-off), offers their tools under
//! qualified names (`mcp__{server}__{tool}`), decides in one place which may be called,
//! pins each tool's definition on first sight, and caps what a server can return. It
//! spawns no process: a stdio server is started by execd, as the launch an admin
//! registered for it, and its stdio carried over execd's `Attach`. See ARCHITECTURE.md.
#![forbid(unsafe_code)]

mod broker;
mod caps;
mod names;
mod oauth;
mod pin;
mod server;
mod service;
mod sse;
mod store;
mod upstream;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use argos_common::connect::ServerUids;
use argos_common::daemon::{self, Privilege, Serve, Spec};
use argos_common::grpc::Daemon;
use argos_proto::mcp::v1::mcp_server::McpServer;

fn main() -> ExitCode {
    daemon::run(
        Spec::new("mcpd", Privilege::Unprivileged),
        |ctx| async move {
            let key = Arc::new(
                argos_store::key::Key::load_or_create(&ctx.state_dir.join("mcpd.key"))
                    .context("mcpd's key")?,
            );
            let path = ctx.state_dir.join("mcpd.db");
            argos_store::check(&path, "mcpd").await.map_err(|e| {
                let lasting = e.lasting();
                daemon::refusal(e, lasting)
            })?;
            let store = store::Store::open(&path, key)
                .await
                .context("mcpd's database")?;
            let db = store.pool().clone();
            let storage = ctx.watch("storage", {
                let db = db.clone();
                move || argos_store::degraded(db.clone(), "mcpd")
            });
            // execd starts the stdio servers (its socket must be served by root, or by
            // the uid the peer table gives execd).
            let exec = argos_exec_client::ExecClient::connect_socket(
                &ctx.config.socket_path(Daemon::Execd.name()),
                ServerUids::for_daemon(&ctx.peers, Daemon::Execd),
            );
            let m = &ctx.config.mcp;
            let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
            let limits = caps::Limits {
                result_text: size(m.result_text_bytes),
                result_image: size(m.result_image_bytes),
                result_total: size(m.result_total_bytes),
                description: size(m.description_chars),
                schema_bytes: size(m.schema_bytes),
                schema_depth: size(m.schema_depth),
                tools_per_server: size(m.tools_per_server),
            };
            let ctx = upstream::Context {
                exec,
                store: store.clone(),
                calls_per_server: size(m.calls_per_server).max(1),
                calls_per_caller: size(m.calls_per_caller).max(1),
            };
            let broker = broker::Broker::start(store, limits, ctx)
                .await
                .context("loading the configured servers")?;
            Ok(Serve::new(
                McpServer::new(service::McpService { broker }),
                service::policy(),
            )
            .with_task(storage)
            .at_last(Box::pin(async move {
                argos_store::close(&db)
                    .await
                    .context("closing mcpd's database")
            })))
        },
    )
}
