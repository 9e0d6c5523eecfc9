//! One connection to an upstream MCP server, through rmcp: connecting (the URL's addresses
//! checked and pinned first), its tools, and a call. rmcp's types stop here: tools and
//! results leave this module as JSON and `caps::Piece`s.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient, RunningService};
use serde_json::Value as Json;

use crate::caps::Piece;
use crate::server::{ServerConfig, Transport};

/// Why a server could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{0}")]
    Refused(String),
    #[error("the server asks for authorization ({0})")]
    NeedsAuth(String),
    #[error("{0}")]
    Failed(String),
}

/// Why a call failed (the server's own error, or the way to it).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("the server did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the connection to the server is closed")]
    Closed,
    #[error("the server refused the call: {0}")]
    Server(String),
    #[error("{0}")]
    Other(String),
}

/// A connected server.
pub struct Upstream {
    pub service: RunningService<RoleClient, ()>,
    /// What carries its bytes (a stdio server's launch, a legacy SSE stream): stopped, and
    /// the launch killed, when dropped.
    _launch: Option<Launch>,
}

/// What a connection needs besides its configuration.
#[derive(Clone)]
pub struct Context {
    /// execd, which starts stdio servers.
    pub exec: argos_exec_client::ExecClient,
    /// mcpd's store: the OAuth credentials of servers an admin authorized.
    pub store: crate::store::Store,
    /// Tool calls one server may have in flight at once (`mcp.calls_per_server`): the
    /// broker admits no more, and each transport lets as many out together, so every
    /// call admitted is sent at once.
    pub calls_per_server: usize,
    /// …of which one caller (a user, or a task's owner) may hold this many
    /// (`mcp.calls_per_caller`): one user's slow calls leave the others room.
    pub calls_per_caller: usize,
}

/// A stdio server's standard error, the last 64 KiB of it, for an admin to read.
#[derive(Debug, Default)]
pub struct StderrLog(std::sync::Mutex<std::collections::VecDeque<u8>>);

/// The most of a server's standard error kept.
pub const STDERR_KEPT: usize = 64 * 1024;

impl StderrLog {
    pub fn push(&self, bytes: &[u8]) {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        q.extend(bytes);
        let over = q.len().saturating_sub(STDERR_KEPT);
        q.drain(..over);
    }

    pub fn text(&self) -> String {
        let q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&q.iter().copied().collect::<Vec<u8>>()).into_owned()
    }
}

/// The longest line (one JSON-RPC message) a stdio server may send: a longer one stops it
/// rather than growing mcpd's memory without bound.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// The tasks carrying a connection's bytes, and a stdio server's launch in execd (killed
/// with it).
struct Launch {
    exec: Option<argos_exec_client::ExecClient>,
    id: String,
    pumps: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Launch {
    fn drop(&mut self) {
        for p in &self.pumps {
            p.abort();
        }
        // The launch goes with its connection (a verified kill by execd), asked again while
        // execd is away (restarting) for up to about a minute; execd also ends a server's
        // previous launch when it starts the next.
        if let Some(exec) = self.exec.clone()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let id = self.id.clone();
            rt.spawn(async move {
                let mut wait = std::time::Duration::from_millis(250);
                for _ in 0..16 {
                    match exec.kill(&id).await {
                        Ok(_) => return,
                        Err(e) if e.kind == argos_exec_client::ErrorKind::Unavailable => {
                            tokio::time::sleep(wait).await;
                            wait = (wait * 2).min(std::time::Duration::from_secs(8));
                        }
                        Err(e) => {
                            tracing::debug!(launch = %id, error = %e, "killing a stdio server's launch");
                            return;
                        }
                    }
                }
                tracing::warn!(launch = %id, "execd did not come back to kill a stdio server's launch");
            });
        }
    }
}

/// Starts a registered stdio server through execd and carries its stdio over `Attach`:
/// its stdout into rmcp, rmcp's output into its stdin, its stderr into `log`.
async fn stdio(
    c: &ServerConfig,
    ctx: &Context,
    log: std::sync::Arc<StderrLog>,
) -> Result<(tokio::io::DuplexStream, Launch), ConnectError> {
    use argos_proto::exec::v1 as pb;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let Transport::Stdio {
        command,
        args,
        env,
        cwd,
        network,
    } = &c.transport
    else {
        return Err(ConnectError::Failed("not a stdio server".into()));
    };
    let started = ctx
        .exec
        .start_mcp_server(pb::StartMcpServerRequest {
            server_id: c.id.clone(),
            launch: Some(pb::McpLaunch {
                command: command.clone(),
                args: args.clone(),
                env_keys: env.keys().cloned().collect(),
                cwd: cwd.clone(),
                network: *network,
            }),
            env: env
                .iter()
                .map(|(k, v)| (k.clone(), v.value.clone()))
                .collect(),
        })
        .await
        .map_err(|e| match e.kind {
            argos_exec_client::ErrorKind::Unavailable => {
                ConnectError::Failed(format!("execd: {}", e.message))
            }
            _ => ConnectError::Refused(format!("execd refused to start it: {}", e.message)),
        })?;
    let id = started.id;
    let mut launch = Launch {
        exec: Some(ctx.exec.clone()),
        id: id.clone(),
        pumps: Vec::new(),
    };
    let (input, requests) = tokio::sync::mpsc::channel::<pb::AttachRequest>(16);
    let _ = input
        .send(pb::AttachRequest {
            msg: Some(pb::attach_request::Msg::Open(pb::AttachOpen {
                id: id.clone(),
                write: true,
                ..Default::default()
            })),
        })
        .await;
    let mut events = ctx
        .exec
        .attach(tokio_stream::wrappers::ReceiverStream::new(requests))
        .await
        .map_err(|e| ConnectError::Failed(format!("attaching to its stdio: {}", e.message)))?;
    let (ours, theirs) = tokio::io::duplex(256 * 1024);
    let (mut from_rmcp, mut to_rmcp) = tokio::io::split(ours);
    let server = c.id.clone();
    let exec = ctx.exec.clone();
    launch.pumps.push(tokio::spawn(async move {
        let mut line = 0usize;
        // Standard error seen live; what a quick exit left unsent is read from the ledger.
        let mut stderr_seen = 0u64;
        while let Ok(Some(ev)) = events.message().await {
            match ev.event {
                Some(pb::attach_event::Event::Output(chunk)) => {
                    if chunk.stream == pb::OutputStream::Stderr as i32 {
                        stderr_seen = chunk.offset + chunk.data.len() as u64;
                        log.push(&chunk.data);
                        continue;
                    }
                    line = match memchr_last_newline(&chunk.data) {
                        Some(i) => chunk.data.len() - i - 1,
                        None => line + chunk.data.len(),
                    };
                    if line > MAX_LINE {
                        tracing::warn!(server = %server, "a line over 16 MiB: the server is stopped");
                        log.push(b"\n[Argos: a message over 16 MiB; the server was stopped]\n");
                        break;
                    }
                    if to_rmcp.write_all(&chunk.data).await.is_err() {
                        break;
                    }
                }
                Some(pb::attach_event::Event::Exit(e)) => {
                    if let Ok(r) = exec.get(&e.id, true).await
                        && let Some(err) = r.stderr
                        && err.total_bytes > stderr_seen
                        && !err.truncated
                    {
                        let from = usize::try_from(stderr_seen).unwrap_or(usize::MAX);
                        log.push(err.head.get(from..).unwrap_or_default());
                    }
                    log.push(
                        format!("\n[Argos: the server exited: status {}, exit code {:?}]\n", e.status, e.exit_code)
                            .as_bytes(),
                    );
                    break;
                }
                _ => {}
            }
        }
        // Its end reaches rmcp as the end of its stdout.
        let _ = to_rmcp.shutdown().await;
    }));
    launch.pumps.push(tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from_rmcp.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    let _ = input
                        .send(pb::AttachRequest {
                            msg: Some(pb::attach_request::Msg::CloseInput(pb::CloseInput {})),
                        })
                        .await;
                    return;
                }
                Ok(n) => n,
            };
            let msg = pb::AttachRequest {
                msg: Some(pb::attach_request::Msg::Input(buf[..n].to_vec())),
            };
            if input.send(msg).await.is_err() {
                return;
            }
        }
    }));
    Ok((theirs, launch))
}

fn memchr_last_newline(b: &[u8]) -> Option<usize> {
    b.iter().rposition(|&c| c == b'\n')
}

/// Which of the two lifecycles in use a server speaks: MCP 2025-11-25 (`initialize`, a
/// session) or 2026-07-28 (no `initialize`: `server/discover`, each request carrying its
/// own metadata, the `Mcp-Method` headers over HTTP). Found on the first connection (a
/// `server/discover` probe, falling back to `initialize`), kept, and used from then on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Era {
    #[default]
    Unknown,
    Legacy,
    Modern,
}

impl Era {
    /// The protocol version that names it ("" while unknown).
    pub fn word(self) -> &'static str {
        match self {
            Era::Unknown => "",
            Era::Legacy => "2025-11-25",
            Era::Modern => "2026-07-28",
        }
    }

    pub fn parse(s: &str) -> Era {
        match s {
            "" => Era::Unknown,
            v => Era::of(v),
        }
    }

    /// The era of a negotiated protocol version (dates compare as text).
    pub fn of(protocol_version: &str) -> Era {
        if protocol_version >= rmcp::model::ProtocolVersion::NO_INITIALIZE.as_str() {
            Era::Modern
        } else {
            Era::Legacy
        }
    }

    fn lifecycle(self) -> rmcp::service::ClientLifecycleMode {
        use rmcp::model::ProtocolVersion;
        use rmcp::service::ClientLifecycleMode;
        match self {
            Era::Modern => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
            Era::Legacy => ClientLifecycleMode::Initialize,
            Era::Unknown => ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
        }
    }
}

/// What the server said about itself.
#[derive(Debug, Clone, Default)]
pub struct Info {
    pub name: String,
    pub version: String,
    pub protocol_version: String,
}

/// Resolves a URL's host and checks every address it has (the shared SSRF guard);
/// answers the addresses to pin.
pub async fn resolve(url: &url::Url, local: bool) -> Result<Vec<SocketAddr>, ConnectError> {
    argos_net::resolve(url, local, "mark the server local to allow it")
        .await
        .map_err(net_error)
}

fn net_error(e: argos_net::NetError) -> ConnectError {
    match e {
        argos_net::NetError::Refused(m) => ConnectError::Refused(m),
        argos_net::NetError::Failed(m) => ConnectError::Failed(m),
    }
}

pub(crate) fn headers(
    which: &BTreeValues,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, ConnectError> {
    which
        .iter()
        .map(|(k, v)| {
            let name = http::HeaderName::try_from(k.as_str())
                .map_err(|e| ConnectError::Refused(format!("header {k}: {e}")))?;
            let mut value = http::HeaderValue::try_from(v.value.as_str())
                .map_err(|e| ConnectError::Refused(format!("header {k}: {e}")))?;
            value.set_sensitive(v.secret);
            Ok((name, value))
        })
        .collect()
}

pub(crate) type BTreeValues = std::collections::BTreeMap<String, crate::server::Value>;

/// An HTTP client for a server's URL: its addresses resolved and checked, the connection
/// pinned to them (never to a second lookup's), no redirect followed (it could lead
/// anywhere), no proxy.
pub(crate) async fn pinned_client(
    c: &ServerConfig,
    url: &str,
) -> Result<(url::Url, reqwest::Client), ConnectError> {
    let u =
        crate::server::check_url("url", url).map_err(|e| ConnectError::Refused(e.to_string()))?;
    let addrs = resolve(&u, c.local).await?;
    let http = argos_net::pinned_client(
        u.host_str().unwrap_or_default(),
        &addrs,
        c.connect_timeout(),
    )
    .map_err(net_error)?;
    Ok((u, http))
}

/// Connects to a server and completes MCP's handshake in the lifecycle of its `era`
/// (found by probing while unknown: [`Upstream::era`] tells which it was).
pub async fn connect(
    c: &ServerConfig,
    ctx: &Context,
    log: std::sync::Arc<StderrLog>,
    era: Era,
) -> Result<Upstream, ConnectError> {
    use rmcp::service::ClientServiceExt as _;
    match &c.transport {
        Transport::StreamableHttp { url, headers: h } => {
            let (_, http) = pinned_client(c, url).await?;
            let mut cfg =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    url.as_str(),
                )
                .custom_headers(headers(h)?)
                // rmcp's client runs 16 POSTs at once by default and queues the rest,
                // their deadlines running: as many as the broker admits instead.
                .max_concurrent_requests(ctx.calls_per_server);
            // A dropped event stream ends the connection; the broker reconnects it with
            // its own back-off and says so in the server's state.
            cfg.retry_config = std::sync::Arc::new(
                rmcp::transport::common::client_side_sse::NeverRetry::default(),
            );
            // A server an admin authorized: each request carries its bearer token,
            // refreshed as it nears its end.
            let authorized = crate::oauth::authorized(&ctx.store, c)
                .await
                .map_err(|e| ConnectError::NeedsAuth(format!("its OAuth credentials: {e}")))?;
            let service = match authorized {
                Some(m) => {
                    handshake(rmcp::transport::AuthClient::new(http, m), cfg, era, &c.id).await?
                }
                None => handshake(http, cfg, era, &c.id).await?,
            };
            Ok(Upstream {
                service,
                _launch: None,
            })
        }
        Transport::Sse { url, headers: h } => {
            let (io, pumps) = crate::sse::connect(c, url, h, ctx.calls_per_server).await?;
            let carrier = Launch {
                exec: None,
                id: String::new(),
                pumps,
            };
            // The HTTP+SSE transport predates 2026-07-28: `initialize` it is.
            let service = ()
                .serve(io)
                .await
                .map_err(|e| ConnectError::Failed(format!("the MCP handshake over SSE: {e}")))?;
            Ok(Upstream {
                service,
                _launch: Some(carrier),
            })
        }
        Transport::Stdio { .. } => {
            let (io, launch) = stdio(c, ctx, log).await?;
            // If the handshake fails, `launch` is dropped here: its process is killed.
            // While unknown, rmcp probes with `server/discover` and falls back to
            // `initialize` on the same stream when the server answers as an older one.
            let service =
                ().serve_with_lifecycle(io, era.lifecycle())
                    .await
                    .map_err(|e| {
                        ConnectError::Failed(format!("the MCP handshake over its stdio: {e}"))
                    })?;
            Ok(Upstream {
                service,
                _launch: Some(launch),
            })
        }
    }
}

/// MCP's handshake over Streamable HTTP in the lifecycle of `era`.
async fn handshake<C>(
    client: C,
    cfg: rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig,
    era: Era,
    id: &str,
) -> Result<RunningService<RoleClient, ()>, ConnectError>
where
    C: rmcp::transport::streamable_http_client::StreamableHttpClient + Sync,
{
    use rmcp::service::ClientServiceExt as _;
    let transport = |client: C| {
        rmcp::transport::StreamableHttpClientTransport::with_client(client, cfg.clone())
    };
    let failed = |e: rmcp::service::ClientInitializeError| {
        if e.is_authorization_required() {
            tracing::debug!(server = %id, error = %e, "the server asks for authorization");
            ConnectError::NeedsAuth("HTTP 401: an admin authorizes it with OAuth".into())
        } else {
            ConnectError::Failed(e.to_string())
        }
    };
    match era {
        Era::Legacy | Era::Modern => {
            ().serve_with_lifecycle(transport(client), era.lifecycle())
                .await
                .map_err(failed)
        }
        // A server of the older era may answer `server/discover` with an HTTP error
        // rather than a JSON-RPC one: probe on one connection and, unless it asks for
        // authorization, begin again on a fresh one with `initialize`.
        Era::Unknown => {
            match ().serve_with_lifecycle(transport(client.clone()), Era::Modern.lifecycle()).await
            {
                Ok(service) => Ok(service),
                Err(e) if e.is_authorization_required() => Err(failed(e)),
                Err(probe) => {
                    tracing::debug!(server = %id, error = %probe, "server/discover refused: trying initialize");
                    ().serve_with_lifecycle(transport(client), Era::Legacy.lifecycle())
                        .await
                        .map_err(failed)
                }
            }
        }
    }
}

impl Upstream {
    pub fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    /// The era this connection speaks.
    pub fn era(&self) -> Era {
        Era::of(&self.info().protocol_version)
    }

    pub fn info(&self) -> Info {
        let Some(p) = self.service.peer_info() else {
            return Info::default();
        };
        let (name, version) = p
            .server_info
            .as_ref()
            .map(|i| (i.name.clone(), i.version.clone()))
            .unwrap_or_default();
        Info {
            name,
            version,
            protocol_version: p.protocol_version.to_string(),
        }
    }
}

/// A tool as the server describes it (as JSON, whatever rmcp's types become).
#[derive(Debug, Clone, PartialEq)]
pub struct RawTool {
    pub name: String,
    pub title: String,
    pub description: String,
    pub input_schema: Json,
    pub annotations: Json,
}

/// Pages of a tool listing read at most: a server that pages forever is cut off here,
/// not when mcpd's memory runs out.
const MAX_PAGES: usize = 32;

/// The tools the server offers, page by page, stopping at `max` tools or `MAX_PAGES`.
pub async fn tools(peer: &Peer<RoleClient>, max: usize) -> Result<Vec<RawTool>, CallError> {
    let mut all = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = peer
            .list_tools(
                cursor
                    .take()
                    .map(|c| rmcp::model::PaginatedRequestParams::default().with_cursor(Some(c))),
            )
            .await
            .map_err(service_error)?;
        all.extend(page.tools);
        if all.len() >= max {
            all.truncate(max);
            break;
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    Ok(all
        .into_iter()
        .filter_map(|t| serde_json::to_value(&t).ok())
        .map(|v| RawTool {
            name: v["name"].as_str().unwrap_or_default().to_string(),
            title: v["title"]
                .as_str()
                .or_else(|| v["annotations"]["title"].as_str())
                .unwrap_or_default()
                .to_string(),
            description: v["description"].as_str().unwrap_or_default().to_string(),
            input_schema: v
                .get("inputSchema")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            annotations: v.get("annotations").cloned().unwrap_or(Json::Null),
        })
        .collect())
}

fn service_error(e: rmcp::ServiceError) -> CallError {
    match e {
        rmcp::ServiceError::McpError(d) => CallError::Server(d.message.to_string()),
        rmcp::ServiceError::TransportClosed => CallError::Closed,
        rmcp::ServiceError::Timeout { timeout } => CallError::Timeout(timeout),
        other => CallError::Other(other.to_string()),
    }
}

/// What a call answered: its pieces, structured content (JSON text), and whether the tool
/// reported an error.
pub struct Answer {
    pub pieces: Vec<Piece>,
    pub structured: Option<String>,
    pub is_error: bool,
}

/// Calls `tool` with `arguments` (a JSON object) within `timeout`; a call that runs out
/// of time is cancelled at the server.
pub async fn call(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: Option<serde_json::Map<String, Json>>,
    timeout: Duration,
) -> Result<Answer, CallError> {
    let mut params = CallToolRequestParams::new(tool.to_string());
    if let Some(a) = arguments {
        params = params.with_arguments(a);
    }
    // Dropping the request on the deadline sends the server its cancellation.
    let r = tokio::time::timeout(timeout, peer.call_tool(params))
        .await
        .map_err(|_| CallError::Timeout(timeout))?
        .map_err(service_error)?;
    let v = serde_json::to_value(&r).map_err(|e| CallError::Other(e.to_string()))?;
    let pieces = v["content"]
        .as_array()
        .map(|a| a.iter().map(piece).collect())
        .unwrap_or_default();
    let structured = v
        .get("structuredContent")
        .filter(|s| !s.is_null())
        .map(Json::to_string);
    Ok(Answer {
        pieces,
        structured,
        is_error: v["isError"].as_bool().unwrap_or(false),
    })
}

/// One content block as a piece: text as text, images (and audio) as bytes, anything else
/// as its JSON.
fn piece(block: &Json) -> Piece {
    match block["type"].as_str() {
        Some("text") => Piece::Text(block["text"].as_str().unwrap_or_default().to_string()),
        Some("image") | Some("audio") => {
            let data = base64::engine::general_purpose::STANDARD
                .decode(block["data"].as_str().unwrap_or_default())
                .unwrap_or_default();
            Piece::Image {
                data,
                mime: block["mimeType"].as_str().unwrap_or_default().to_string(),
            }
        }
        _ => Piece::Resource(block.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_url_whose_host_is_private_is_refused_unless_local() {
        let u = url::Url::parse("http://127.0.0.1:9/mcp").unwrap();
        let e = resolve(&u, false).await.unwrap_err().to_string();
        assert!(e.contains("loopback"), "{e}");
        assert_eq!(resolve(&u, true).await.unwrap()[0].port(), 9);
        let m = url::Url::parse("http://169.254.169.254/latest/meta-data").unwrap();
        let e = resolve(&m, true).await.unwrap_err().to_string();
        assert!(e.contains("metadata"), "{e}");
        let v6 = url::Url::parse("http://[::1]:8/").unwrap();
        assert!(resolve(&v6, false).await.is_err());
        assert!(resolve(&v6, true).await.is_ok());
    }

    /// A legacy SSE server on loopback that answers the stream's GET with `body`.
    async fn sse_server(body: &'static str) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/sse", l.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(body.as_bytes()).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        url
    }

    fn sse(url: &str) -> ServerConfig {
        ServerConfig {
            id: "legacy".into(),
            name: "legacy".into(),
            transport: Transport::Sse {
                url: url.into(),
                headers: Default::default(),
            },
            enabled: true,
            disabled_tools: vec![],
            connect_timeout_ms: 2_000,
            call_timeout_ms: 0,
            local: true,
        }
    }

    #[tokio::test]
    async fn a_legacy_sse_endpoint_on_another_origin_is_refused() {
        // A server naming a metadata address (or any other origin) as where to POST.
        let url =
            sse_server(": hi\n\nevent: endpoint\ndata: http://169.254.169.254/latest\n\n").await;
        let c = sse(&url);
        let e = crate::sse::connect(&c, &url, &Default::default(), 4)
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("not on the server's own origin"),
            "{e}"
        );
        // The same origin, relative or absolute, is taken (CRLF line ends too).
        let url = sse_server("event: endpoint\r\ndata: /message?sessionId=1\r\n\r\n").await;
        assert!(
            crate::sse::connect(&sse(&url), &url, &Default::default(), 4)
                .await
                .is_ok()
        );
    }

    /// What the fake server heard: a call it holds (`held`) or a cancellation, and the
    /// request's id.
    type Heard = tokio::sync::mpsc::UnboundedReceiver<(String, Json)>;

    /// A server on a byte stream, as a stdio server is over execd's `Attach`: it answers
    /// `initialize`, a call of `fast` at once, any other call never (it says it holds
    /// it), and reports each cancellation.
    fn fake_server(io: tokio::io::DuplexStream) -> Heard {
        use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let (read, mut write) = tokio::io::split(io);
            let mut lines = tokio::io::BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let m: Json = serde_json::from_str(&line).unwrap();
                let result = match m["method"].as_str().unwrap_or_default() {
                    "initialize" => serde_json::json!({
                        "protocolVersion": m["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "fake", "version": "1"},
                    }),
                    "tools/call" if m["params"]["name"] == "fast" => serde_json::json!({
                        "content": [{"type": "text", "text": "fast answered"}],
                    }),
                    "tools/call" => {
                        let _ = tx.send(("held".to_string(), m["id"].clone()));
                        continue;
                    }
                    "notifications/cancelled" => {
                        let _ =
                            tx.send(("cancelled".to_string(), m["params"]["requestId"].clone()));
                        continue;
                    }
                    _ => continue,
                };
                let answer = serde_json::json!({"jsonrpc": "2.0", "id": m["id"], "result": result});
                let mut bytes = answer.to_string().into_bytes();
                bytes.push(b'\n');
                if write.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        });
        rx
    }

    async fn heard(h: &mut Heard) -> (String, Json) {
        tokio::time::timeout(Duration::from_secs(2), h.recv())
            .await
            .expect("the server heard it in time")
            .expect("the server runs")
    }

    /// Calls to one server go out on its one connection side by side: a fast call
    /// answers while a slow one is still open, and a call out of time is cancelled at the
    /// server (its own id) while the connection and the other call go on.
    #[tokio::test]
    async fn a_slow_call_holds_up_no_other_call_on_the_same_connection() {
        use rmcp::service::ClientServiceExt as _;
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let mut server = fake_server(theirs);
        let service = ().serve_with_lifecycle(ours, Era::Legacy.lifecycle()).await.unwrap();
        let peer = service.peer().clone();
        let slow = {
            let peer = peer.clone();
            tokio::spawn(async move { call(&peer, "slow", None, Duration::from_secs(10)).await })
        };
        let (what, slow_id) = heard(&mut server).await;
        assert_eq!(what, "held");
        let t = std::time::Instant::now();
        let a = call(&peer, "fast", None, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        assert_eq!(a.pieces, vec![Piece::Text("fast answered".into())]);
        assert!(!slow.is_finished(), "the slow call is still open");
        // Its own deadline: cancelled at the server, by its id only.
        let e = call(&peer, "late", None, Duration::from_millis(300))
            .await
            .err()
            .expect("no answer in time");
        assert!(matches!(e, CallError::Timeout(_)), "{e}");
        let (what, late_id) = heard(&mut server).await;
        assert_eq!(what, "held");
        assert_ne!(late_id, slow_id);
        assert_eq!(heard(&mut server).await, ("cancelled".to_string(), late_id));
        assert!(!slow.is_finished());
        assert!(
            call(&peer, "fast", None, Duration::from_secs(5))
                .await
                .is_ok()
        );
        // A call its caller drops is cancelled at the server too.
        slow.abort();
        assert_eq!(heard(&mut server).await, ("cancelled".to_string(), slow_id));
    }

    #[test]
    fn content_blocks_become_pieces() {
        use serde_json::json;
        assert_eq!(
            piece(&json!({"type": "text", "text": "hi"})),
            Piece::Text("hi".into())
        );
        assert_eq!(
            piece(&json!({"type": "image", "data": "AAEC", "mimeType": "image/png"})),
            Piece::Image {
                data: vec![0, 1, 2],
                mime: "image/png".into()
            }
        );
        let r = json!({"type": "resource", "resource": {"uri": "file:///x", "text": "t"}});
        assert_eq!(piece(&r), Piece::Resource(r.to_string()));
    }
}
