//! argos-gatewayd: the only HTTP listener. Unprivileged; it runs no process and opens
//! nothing outside its own state dir: all work goes to the other daemons over gRPC.
//!
//! Its inspection socket serves what the daemon skeleton gives every socket (`Status`,
//! health, reflection); over HTTP it serves the API, the web UI and `/api/status`, built
//! from each daemon's `Status`.
#![forbid(unsafe_code)]

mod accounts;
mod activation;
mod agent_mcp;
mod anchor;
mod api;
mod http;
mod metrics;
mod sse;
mod throttle;
mod views;

use std::process::ExitCode;

use anyhow::Context as _;
use argos_common::daemon::{self, Privilege, Serve, Spec};
use argos_common::peer::MethodPolicy;
use argos_proto::gateway::v1::gateway_server::{Gateway, GatewayServer};

struct GatewayService;

impl Gateway for GatewayService {}

fn main() -> ExitCode {
    // Before any other thread exists (see `activation`).
    let passed = activation::take_from_env();
    daemon::run(
        Spec::new("gatewayd", Privilege::Unprivileged),
        |ctx| async move {
            let listen = ctx.config.gateway.listen;
            let (listeners, socket) = activation::listeners(listen, passed?).await?;
            let mut bound = None;
            for l in &listeners {
                let at = l.local_addr().context("reading HTTP listener address")?;
                tracing::info!(url = %format!("http://{at}/"), socket, "HTTP listening");
                bound.get_or_insert(at);
            }
            let bound = bound.context("no HTTP listener")?;
            let g = &ctx.config.gateway;
            // A database that lost everything, made here before, is refused, never taken
            // for a first start (which would offer a new first-admin link to whoever
            // opens it).
            let key = std::sync::Arc::new(
                argos_store::key::Key::load_or_create(&ctx.state_dir.join("gateway.key"))
                    .context("the gateway's key")?,
            );
            let path = ctx.state_dir.join("gateway.db");
            argos_store::check(&path, "gateway").await.map_err(|e| {
                let lasting = e.lasting();
                daemon::refusal(e, lasting)
            })?;
            let accounts = accounts::Accounts::open(
                &path,
                g.max_concurrent_hashes as usize,
                accounts::SessionLimits {
                    idle: std::time::Duration::from_secs(g.session_idle_s),
                    absolute: std::time::Duration::from_secs(g.session_max_s),
                },
            )
            .await
            .map_err(|e| {
                let lasting = e
                    .downcast_ref::<argos_store::StoreError>()
                    .is_some_and(argos_store::StoreError::lasting);
                daemon::refusal(e, lasting)
            })?;
            let db = accounts.pool().clone();
            let storage = db.clone();
            // First start: a one-time link creates the first admin. It is written to a
            // file only the gateway's uid (and root) reads, and logged unless the config
            // says the log is read more widely (the packaged config does).
            let link_file = ctx.state_dir.join("setup-link");
            let _ = std::fs::remove_file(&link_file);
            if let Some(link) = accounts
                .new_setup_link(std::time::Duration::from_secs(15 * 60))
                .await?
            {
                let url = format!("http://{bound}/setup#{link}");
                write_private(&link_file, format!("{url}\n").as_bytes())
                    .with_context(|| format!("writing {}", link_file.display()))?;
                if g.log_setup_link {
                    tracing::warn!(
                        url = %url,
                        "no account yet: open this link within 15 minutes to create the first admin (it works once)"
                    );
                } else {
                    tracing::warn!(
                        file = %link_file.display(),
                        "no account yet: the link that creates the first admin (within 15 minutes, once) is in this file, readable by root"
                    );
                }
            }
            let state = http::State::new(&ctx)?;
            let web = api::WebConfig {
                cookie_secure: match g.cookie_secure.as_str() {
                    "true" => api::CookieSecure::Always,
                    "false" => api::CookieSecure::Never,
                    _ => api::CookieSecure::Auto,
                },
                trusted_proxies: g
                    .trusted_proxies
                    .iter()
                    .filter_map(|p| p.parse().ok())
                    .collect(),
                allowed_origins: g.allowed_origins.clone(),
                allowed_hosts: g
                    .allowed_hosts
                    .iter()
                    .cloned()
                    .chain(
                        g.allowed_origins
                            .iter()
                            .filter_map(|o| o.split_once("://").map(|(_, host)| host.to_string())),
                    )
                    .map(|h| h.to_ascii_lowercase())
                    .collect(),
            };
            let audit = std::sync::Arc::new(
                argos_store::audit::Audit::open(accounts.pool().clone(), key.clone(), "gateway")
                    .await
                    .context("opening the audit trail")?,
            );
            let (mcp_access, _) = agent_mcp::access::load(accounts.pool())
                .await
                .context("reading the MCP access setting")?;
            let mcp_activity = agent_mcp::activity::Log::start(accounts.pool().clone());
            let streams_db = accounts.pool().clone();
            let api = std::sync::Arc::new(api::Api {
                event_streams: api::PerUser::new(
                    ctx.config.quota.event_streams,
                    "event streams",
                    "quota.event_streams",
                ),
                mcp_streams: api::PerUser::new(
                    ctx.config.quota.event_streams,
                    "MCP subscriptions",
                    "quota.event_streams",
                ),
                http_gets: api::PerUser::new(2, "http_get calls", ""),
                mcp_sessions: agent_mcp::Sessions::new(agent_mcp::Limits::new(
                    g.mcp_sessions_per_token,
                    g.mcp_sessions_per_user,
                    g.mcp_session_idle_s,
                )),
                mcp_rate: agent_mcp::Rate::new(g.mcp_requests_per_s, g.mcp_requests_per_user_s),
                key,
                audit,
                tickets: api::Tickets::default(),
                ticket_ttl: std::time::Duration::from_secs(g.terminal_ticket_ttl_s.max(1)),
                accounts,
                throttle: throttle::Throttle::default(),
                exec: argos_exec_client::ExecClient::from_channel(state.exec_channel()),
                web,
                streams: api::Streams::new(streams_db),
                changes: tokio::sync::broadcast::channel(256).0,
                resume_grace: std::time::Duration::from_secs(g.stream_resume_s),
                host_history: api::HostHistory::default(),
                mcp: argos_proto::mcp::v1::mcp_client::McpClient::new(state.mcp_channel()),
                mcp_config: tokio::sync::Mutex::new(()),
                http_get_allow: g.http_get_allow.clone(),
                mcp_access: std::sync::RwLock::new(mcp_access),
                mcp_activity,
                jobs: argos_proto::job::v1::job_client::JobClient::new(state.job_channel()),
                metrics: metrics::Metrics::default(),
                anchor_now: tokio::sync::Notify::new(),
                anchor_asked: tokio::sync::Notify::new(),
            });
            tokio::spawn(api::watch_execd(api.clone()));
            tokio::spawn(api::kill_orphans(api.clone()));
            tokio::spawn(api::watch_mcpd(api.clone()));
            tokio::spawn(api::watch_jobd(api.clone()));
            tokio::spawn(api::sample_host(api.clone()));
            tokio::spawn({
                let api = api.clone();
                async move { api.mcp_sessions.expire().await }
            });
            tokio::spawn({
                let api = api.clone();
                async move {
                    let mut every = tokio::time::interval(std::time::Duration::from_secs(60));
                    loop {
                        every.tick().await;
                        api.mcp_rate.forget_idle();
                    }
                }
            });
            tokio::spawn({
                let api = api.clone();
                async move {
                    let mut endings = api.accounts.endings();
                    while endings.changed().await.is_ok() {
                        let accounts = &api.accounts;
                        api.mcp_sessions
                            .end_signed_out(|token| async move {
                                accounts.token_live(token).await.unwrap_or(true)
                            })
                            .await;
                    }
                }
            });
            tokio::spawn(anchor::run(
                api.clone(),
                std::time::Duration::from_secs(g.audit_anchor_s.max(1)),
            ));
            let at_stop = ctx.on_shutdown({
                let api = api.clone();
                move || anchor::at_stop(api)
            });
            let app = http::router(state, api)
                .into_make_service_with_connect_info::<std::net::SocketAddr>();
            let stop = ctx.clone();
            let server = async move {
                // Small answers (an MCP result, an event) leave at once, not after the
                // peer's delayed ACK of the previous segment.
                use axum::serve::ListenerExt as _;
                let serving = listeners.into_iter().map(|listener| {
                    let listener = listener.tap_io(|tcp| {
                        let _ = tcp.set_nodelay(true);
                    });
                    let stop = stop.clone();
                    axum::serve(listener, app.clone())
                        .with_graceful_shutdown(async move { stop.shutdown().await })
                        .into_future()
                });
                futures_util::future::try_join_all(serving)
                    .await
                    .context("HTTP server")
                    .map(drop)
            };
            Ok(
                Serve::new(GatewayServer::new(GatewayService), MethodPolicy::new())
                    .with_task(Box::pin(server))
                    .with_task(at_stop)
                    .with_task(ctx.watch("storage", move || {
                        argos_store::degraded(storage.clone(), "the gateway")
                    }))
                    .at_last(Box::pin(async move {
                        argos_store::close(&db)
                            .await
                            .context("closing the gateway's database")
                    })),
            )
        },
    )
}

/// Writes `bytes` to a new file at `path` that only this uid may read (0600).
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}
