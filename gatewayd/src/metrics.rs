//! Prometheus metrics at `GET /metrics` (OpenMetrics text, by the `prometheus-client`
//! crate): an admin's view of the stack for a scraper (a token with the `metrics` scope,
//! which opens nothing else, or `read`).
//!
//! - `argos_http_request_duration_seconds{method,route,code}`: every request the gateway
//!   answered, by its route's template (never the raw path: ids stay out of labels), until
//!   its response head (a stream's or WebSocket's life is not counted in it);
//! - `argos_launches{status,profile}`: execd's ledger, by status and profile;
//! - `argos_approvals{state}`: approvals by state;
//! - `argos_terminals_running` (execd) and `argos_terminal_sockets_open` (the gateway's
//!   WebSocket bridges to them);
//! - `argos_event_streams_open` (`/api/events`) and `argos_mcp_streams_open` (`/mcp`
//!   subscriptions);
//! - `argos_mcp_sessions_open`: `/mcp`'s 2025-11-25 sessions;
//! - `argos_up{daemon}`: 1 when the daemon answered `Status` at this scrape, else 0.
//!
//! execd's counts and each daemon's state are read at each scrape (one `Stats` and one
//! `Status` call each, 2 s at most); a scrape while execd is away says so by `argos_up`
//! and leaves its counts out rather than report stale ones.

use std::sync::atomic::AtomicI64;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::api::Shared;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    route: String,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LaunchLabels {
    status: String,
    profile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DaemonLabels {
    daemon: String,
}

type Requests = Family<RequestLabels, Histogram, fn() -> Histogram>;

/// The gateway's metrics, registered once.
pub struct Metrics {
    registry: Registry,
    requests: Requests,
    launches: Family<LaunchLabels, Gauge>,
    approvals: Family<StateLabels, Gauge>,
    up: Family<DaemonLabels, Gauge>,
    terminals_running: Gauge,
    terminal_sockets: Gauge<i64, AtomicI64>,
    event_streams: Gauge,
    mcp_streams: Gauge,
    mcp_sessions: Gauge,
    /// One scrape at a time: each fills the gauges, then encodes them.
    scrape: tokio::sync::Mutex<()>,
}

fn latency() -> Histogram {
    // 1 ms to about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut registry = Registry::with_prefix("argos");
        let requests: Requests = Family::new_with_constructor(latency);
        registry.register(
            "http_request_duration_seconds",
            "Requests the gateway answered, by method, route template and status code, until the response head",
            requests.clone(),
        );
        let launches = Family::<LaunchLabels, Gauge>::default();
        registry.register(
            "launches",
            "Executions in execd's ledger, by status and profile",
            launches.clone(),
        );
        let approvals = Family::<StateLabels, Gauge>::default();
        registry.register("approvals", "Approvals by state", approvals.clone());
        let up = Family::<DaemonLabels, Gauge>::default();
        registry.register(
            "up",
            "1 when the daemon answered Status at this scrape, else 0",
            up.clone(),
        );
        let terminals_running = Gauge::default();
        registry.register(
            "terminals_running",
            "Web terminals execd runs",
            terminals_running.clone(),
        );
        let terminal_sockets = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "terminal_sockets_open",
            "WebSocket connections the gateway bridges to a terminal",
            terminal_sockets.clone(),
        );
        let event_streams = Gauge::default();
        registry.register(
            "event_streams_open",
            "Server-sent event streams open at /api/events",
            event_streams.clone(),
        );
        let mcp_streams = Gauge::default();
        registry.register(
            "mcp_streams_open",
            "Subscriptions open at /mcp",
            mcp_streams.clone(),
        );
        let mcp_sessions = Gauge::default();
        registry.register(
            "mcp_sessions_open",
            "Sessions open at /mcp (2025-11-25)",
            mcp_sessions.clone(),
        );
        Metrics {
            registry,
            requests,
            launches,
            approvals,
            up,
            terminals_running,
            terminal_sockets,
            event_streams,
            mcp_streams,
            mcp_sessions,
            scrape: tokio::sync::Mutex::new(()),
        }
    }
}

/// One terminal WebSocket bridged, counted until dropped.
pub struct TerminalSocket(Gauge<i64, AtomicI64>);

impl Drop for TerminalSocket {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Metrics {
    pub fn terminal_socket(&self) -> TerminalSocket {
        self.terminal_sockets.inc();
        TerminalSocket(self.terminal_sockets.clone())
    }
}

/// A method as a label: the ones HTTP defines, anything else `other` (a client picks the
/// method: it must not pick the label set's size).
fn method_label(m: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Middleware: times every request to its response head, by its route's template.
pub async fn record(
    State(api): State<Shared>,
    matched: Option<MatchedPath>,
    req: Request,
    next: Next,
) -> Response {
    let method = method_label(req.method());
    let route = matched.map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let start = Instant::now();
    let resp = next.run(req).await;
    api.metrics
        .requests
        .get_or_create(&RequestLabels {
            method,
            route,
            code: resp.status().as_u16(),
        })
        .observe(start.elapsed().as_secs_f64());
    resp
}

/// A proto enum value as the API's word for it (`EXECUTION_STATUS_TIMED_OUT` →
/// `timed_out`); a value this gateway does not know is `unknown`.
fn word<E>(name: Result<&str, E>, prefix: &str) -> String {
    name.map_or_else(
        |_| "unknown".into(),
        |n| n.trim_start_matches(prefix).to_ascii_lowercase(),
    )
}

/// `GET /metrics`'s description (the route itself is `scrape`, which needs both the API's
/// and the stack's state).
#[utoipa::path(get, path = "/metrics", tag = "status",
    description = "Prometheus metrics (OpenMetrics text): request latency by route, executions by status and profile, approvals by state, terminals and streams open, each daemon's up state. Admins; tokens need `metrics` (which opens nothing else) or `read`.",
    responses((status = 200, description = "OpenMetrics text", content_type = "application/openmetrics-text", body = String),
              (status = 401, description = "not logged in", body = crate::api::ErrorBody),
              (status = 403, description = "not an admin, or a token without `metrics` or `read`", body = crate::api::ErrorBody)))]
#[allow(dead_code)]
pub async fn metrics_doc() {}

/// `GET /metrics`.
pub async fn scrape(api: Shared, stack: crate::http::State) -> Response {
    let m = &api.metrics;
    let _one = m.scrape.lock().await;
    let (daemons, stats) = tokio::join!(crate::http::stack(&stack), async {
        tokio::time::timeout(std::time::Duration::from_secs(2), api.exec.stats()).await
    });
    m.up.clear();
    for (daemon, healthy) in daemons.health() {
        m.up.get_or_create(&DaemonLabels { daemon })
            .set(i64::from(healthy));
    }
    m.launches.clear();
    m.approvals.clear();
    if let Ok(Ok(s)) = stats {
        use argos_proto::exec::v1 as pb;
        for e in s.executions {
            let status = word(
                pb::ExecutionStatus::try_from(e.status).map(|s| s.as_str_name()),
                "EXECUTION_STATUS_",
            );
            m.launches
                .get_or_create(&LaunchLabels {
                    status,
                    profile: e.profile,
                })
                .set(e.count as i64);
        }
        for a in s.approvals {
            let state = word(
                pb::ApprovalState::try_from(a.state).map(|s| s.as_str_name()),
                "APPROVAL_STATE_",
            );
            m.approvals
                .get_or_create(&StateLabels { state })
                .set(a.count as i64);
        }
        m.terminals_running.set(s.terminals_running as i64);
    }
    m.event_streams.set(api.event_streams.open() as i64);
    m.mcp_streams.set(api.mcp_streams.open() as i64);
    m.mcp_sessions.set(api.mcp_sessions.open() as i64);
    let mut text = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &m.registry) {
        tracing::error!(error = %e, "encoding the metrics");
        return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
