//! `/api/mcp/…`: the MCP servers mcpd brokers, their tools and calls to them (admins).
//!
//! Adding or changing a stdio server is where the gateway does more than relay: the
//! admin's exact launch (command, args, env names, cwd, network) is registered with execd
//! first, in the admin's name, and only then configured in mcpd; execd starts nothing for
//! mcpd that does not match a registered launch's digest, so a compromised mcpd can run
//! nothing an admin did not add here. The two change together, one server at a time
//! (`Api::mcp_config`), and a failure in mcpd undoes the registration.
//!
//! The bodies' fields are checked here against the patterns the OpenAPI document states
//! (the same constants), so what the document calls valid is what is accepted; mcpd and
//! execd check them again.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use argos_proto::mcp::v1 as mpb;
use base64::Engine as _;

use super::*;

/// A server id.
pub const SERVER_ID: &str = "^[a-z][a-z0-9-]{0,31}$";
/// A name for people: 1 to 100 characters, no control character, not blank.
pub const SERVER_NAME: &str =
    "^[^\\x00-\\x1f\\x7f-\\x9f]*[^\\s\\x00-\\x1f\\x7f-\\x9f][^\\x00-\\x1f\\x7f-\\x9f]*$";
pub const SERVER_NAME_MAX: usize = 100;
/// A program, an argument or a cwd: no NUL, at most [`TEXT_MAX`] characters.
pub const NO_NUL: &str = "^[^\\x00]*$";
pub const TEXT_MAX: usize = 1024;
/// An absolute path without `..` (or empty: the launch's own workspace).
pub const CWD: &str = "^$|^/([^/\\x00.][^/\\x00]*/?|\\.[^/.\\x00][^/\\x00]*/?)*$";
/// An environment variable's name.
pub const ENV_NAME: &str = "^[A-Za-z_][A-Za-z0-9_]{0,127}$";
/// An environment value: no NUL, at most [`ENV_VALUE_MAX`] characters.
pub const ENV_VALUE_MAX: usize = 2048;
/// An http(s) URL: a host name (its last label starting with a letter) or an IPv4
/// address, an optional port, path and query; no credentials, no fragment.
pub const URL: &str = concat!(
    "^[Hh][Tt][Tt][Pp][Ss]?://",
    "((25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}",
    "|([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)*[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)",
    "(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?",
    "(/[A-Za-z0-9._~%!$&'()*+,;=:@/-]*)?",
    "(\\?[A-Za-z0-9._~%!$&'()*+,;=:@/?-]*)?$"
);
pub const URL_MAX: usize = 2048;
/// A request header's name (an HTTP token).
pub const HEADER_NAME: &str = "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$";
/// A header's value: printable ASCII and tabs.
pub const HEADER_VALUE: &str = "^[\\t\\x20-\\x7e]{0,8192}$";
/// An upstream tool's name, as a disabled list gives it.
pub const TOOL_NAME: &str = "^[\\x21-\\x7e]{1,128}$";
/// A qualified tool name, `mcp__{server}__{tool}`: mcpd makes them of `[A-Za-z0-9_-]`,
/// at most [`QUALIFIED_MAX`] characters.
pub const QUALIFIED: &str = "^mcp__[a-z][a-z0-9-]{0,31}__[A-Za-z0-9_-]{1,57}$";
pub const QUALIFIED_MAX: usize = 64;
pub const MAX_ARGS: usize = 256;
pub const MAX_ENV: usize = 64;
pub const MAX_HEADERS: usize = 32;
pub const MAX_DISABLED: usize = 1024;

/// `^(?:A|B)$`, each letter matched in either case.
fn any_case(words: &[&str], whole: bool) -> String {
    let alts: Vec<String> = words
        .iter()
        .map(|w| {
            w.chars()
                .map(|c| {
                    if c.is_ascii_alphabetic() {
                        format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
                    } else {
                        regex::escape(&c.to_string())
                    }
                })
                .collect()
        })
        .collect();
    format!("^(?:{}){}", alts.join("|"), if whole { "$" } else { "" })
}

/// Environment names a stdio server may not be given (they steer what runs).
pub fn steering_names() -> String {
    format!(
        "{}|{}",
        any_case(argos_common::names::STEERING_NAMES, true),
        any_case(argos_common::names::STEERING_PREFIXES, false)
    )
}

/// Header names Argos sets itself.
pub fn reserved_headers() -> String {
    any_case(argos_common::names::MCP_RESERVED_HEADERS, true)
}

struct Patterns {
    id: regex::Regex,
    name: regex::Regex,
    no_nul: regex::Regex,
    cwd: regex::Regex,
    env_name: regex::Regex,
    steering: regex::Regex,
    url: regex::Regex,
    header_name: regex::Regex,
    reserved: regex::Regex,
    header_value: regex::Regex,
    tool: regex::Regex,
    qualified: regex::Regex,
}

static PATTERNS: LazyLock<Patterns> = LazyLock::new(|| {
    let re = |p: &str| regex::Regex::new(p).expect("a pattern of the API");
    Patterns {
        id: re(SERVER_ID),
        name: re(SERVER_NAME),
        no_nul: re(NO_NUL),
        cwd: re(CWD),
        env_name: re(ENV_NAME),
        steering: re(&steering_names()),
        url: re(URL),
        header_name: re(HEADER_NAME),
        reserved: re(&reserved_headers()),
        header_value: re(HEADER_VALUE),
        tool: re(TOOL_NAME),
        qualified: re(QUALIFIED),
    }
});

/// An environment value or a header's value.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpValue {
    /// In an update, a secret sent empty keeps the value stored.
    value: String,
    /// Stored encrypted, never shown again.
    #[serde(default)]
    secret: bool,
}

/// A server started as a process speaking MCP on its standard input and output,
/// contained by execd (`mcp-server`, or `mcp-server-offline` without network).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpStdio {
    /// The program: absolute, or looked up on PATH.
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, McpValue>,
    /// Absolute, without `..`; empty: the launch's own workspace.
    #[serde(default)]
    cwd: String,
    /// The host's network, or none.
    #[serde(default)]
    network: bool,
}

/// A server reached over HTTP.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpRemote {
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, McpValue>,
}

fn yes() -> bool {
    true
}

/// A server to add: exactly one of `stdio`, `streamable_http` and `sse`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMcpServer {
    /// Part of every tool's qualified name (`mcp__{id}__{tool}`): it never changes.
    id: String,
    name: String,
    #[serde(default)]
    stdio: Option<McpStdio>,
    #[serde(default)]
    streamable_http: Option<McpRemote>,
    #[serde(default)]
    sse: Option<McpRemote>,
    /// Connect it now (default true).
    #[serde(default = "yes")]
    enabled: bool,
    /// Upstream tool names refused and hidden.
    #[serde(default)]
    disabled_tools: Vec<String>,
    /// 0 or absent: 20000.
    #[serde(default, deserialize_with = "whole")]
    connect_timeout_ms: Option<u32>,
    /// 0 or absent: 60000.
    #[serde(default, deserialize_with = "whole")]
    call_timeout_ms: Option<u32>,
    /// On this host or its network: loopback and private addresses allowed.
    #[serde(default)]
    local: bool,
}

/// A server's new configuration (its id is the path's).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerBody {
    name: String,
    #[serde(default)]
    stdio: Option<McpStdio>,
    #[serde(default)]
    streamable_http: Option<McpRemote>,
    #[serde(default)]
    sse: Option<McpRemote>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    disabled_tools: Vec<String>,
    #[serde(default, deserialize_with = "whole")]
    connect_timeout_ms: Option<u32>,
    #[serde(default, deserialize_with = "whole")]
    call_timeout_ms: Option<u32>,
    #[serde(default)]
    local: bool,
}

impl From<(String, McpServerBody)> for NewMcpServer {
    fn from((id, b): (String, McpServerBody)) -> NewMcpServer {
        NewMcpServer {
            id,
            name: b.name,
            stdio: b.stdio,
            streamable_http: b.streamable_http,
            sse: b.sse,
            enabled: b.enabled,
            disabled_tools: b.disabled_tools,
            connect_timeout_ms: b.connect_timeout_ms,
            call_timeout_ms: b.call_timeout_ms,
            local: b.local,
        }
    }
}

/// A server's disabled tools, replaced whole.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DisabledToolsBody {
    tools: Vec<String>,
}

/// A tool call's arguments.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallBody {
    /// A JSON object (absent: none).
    #[serde(default)]
    #[schema(value_type = Object)]
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
}

fn check_len(field: &str, s: &str, max: usize) -> Result<(), ApiError> {
    if s.chars().count() > max {
        return Err(invalid(format!("{field}: longer than {max} characters")));
    }
    Ok(())
}

fn check_values(
    field: &str,
    values: &BTreeMap<String, McpValue>,
    name_ok: impl Fn(&str) -> Result<(), String>,
    value_ok: impl Fn(&str) -> bool,
    value_rule: &str,
) -> Result<(), ApiError> {
    for (k, v) in values {
        name_ok(k).map_err(|why| invalid(format!("{field}: {k:?} {why}")))?;
        if !value_ok(&v.value) {
            return Err(invalid(format!("{field}.{k}: {value_rule}")));
        }
    }
    Ok(())
}

/// The body's fields against the document's patterns; the first that fails is named.
fn check(b: &NewMcpServer) -> Result<(), ApiError> {
    let p = &*PATTERNS;
    if !p.id.is_match(&b.id) {
        return Err(invalid(format!(
            "id: {:?} is not an id: {}",
            b.id,
            argos_common::names::SERVER_ID_RULE
        )));
    }
    check_len("name", &b.name, SERVER_NAME_MAX)?;
    if !p.name.is_match(&b.name) {
        return Err(invalid(
            "name: not blank, without control characters (at most 100)",
        ));
    }
    let transports = [
        b.stdio.is_some(),
        b.streamable_http.is_some(),
        b.sse.is_some(),
    ];
    if transports.iter().filter(|t| **t).count() != 1 {
        return Err(invalid(
            "transport: give exactly one of stdio, streamable_http and sse",
        ));
    }
    if let Some(s) = &b.stdio {
        if s.command.is_empty() {
            return Err(invalid("stdio.command: empty"));
        }
        for (field, text) in std::iter::once(("stdio.command".to_string(), &s.command)).chain(
            s.args
                .iter()
                .enumerate()
                .map(|(i, a)| (format!("stdio.args[{i}]"), a)),
        ) {
            check_len(&field, text, TEXT_MAX)?;
            if !p.no_nul.is_match(text) {
                return Err(invalid(format!("{field}: contains a NUL byte")));
            }
        }
        if s.args.len() > MAX_ARGS {
            return Err(invalid(format!("stdio.args: more than {MAX_ARGS}")));
        }
        check_len("stdio.cwd", &s.cwd, TEXT_MAX)?;
        if !p.cwd.is_match(&s.cwd) {
            return Err(invalid("stdio.cwd: absolute, without '..'"));
        }
        if s.env.len() > MAX_ENV {
            return Err(invalid(format!("stdio.env: more than {MAX_ENV} variables")));
        }
        check_values(
            "stdio.env",
            &s.env,
            |k| {
                if !p.env_name.is_match(k) {
                    Err("is not a variable name (letters, digits, '_'; not a digit first)".into())
                } else if p.steering.is_match(k) {
                    Err("chooses what the server runs or loads, so it is not configurable".into())
                } else {
                    Ok(())
                }
            },
            |v| v.chars().count() <= ENV_VALUE_MAX && p.no_nul.is_match(v),
            "no NUL byte, at most 2048 characters",
        )?;
    }
    for (which, r) in [("streamable_http", &b.streamable_http), ("sse", &b.sse)] {
        let Some(r) = r else { continue };
        if r.url.len() > URL_MAX || !p.url.is_match(&r.url) {
            return Err(invalid(format!(
                "{which}.url: {:?} is not an http(s) URL of a host name or IPv4 address (with a port, path and query if wanted; no credentials, no fragment; at most {URL_MAX})",
                r.url
            )));
        }
        if r.headers.len() > MAX_HEADERS {
            return Err(invalid(format!(
                "{which}.headers: more than {MAX_HEADERS} headers"
            )));
        }
        check_values(
            &format!("{which}.headers"),
            &r.headers,
            |k| {
                if !p.header_name.is_match(k) {
                    Err("is not a header name".into())
                } else if p.reserved.is_match(k) {
                    Err("is set by Argos, not by configuration".into())
                } else {
                    Ok(())
                }
            },
            |v| p.header_value.is_match(v),
            "printable ASCII, at most 8192 bytes",
        )?;
    }
    if b.disabled_tools.len() > MAX_DISABLED {
        return Err(invalid(format!("disabled_tools: more than {MAX_DISABLED}")));
    }
    check_tools("disabled_tools", &b.disabled_tools)?;
    for (field, v, max) in [
        ("connect_timeout_ms", b.connect_timeout_ms, 300_000),
        ("call_timeout_ms", b.call_timeout_ms, 3_600_000),
    ] {
        if let Some(v) = v
            && v != 0
            && !(1_000..=max).contains(&v)
        {
            return Err(invalid(format!(
                "{field}: 0 (the default) or 1000 to {max}"
            )));
        }
    }
    Ok(())
}

fn check_tools(field: &str, tools: &[String]) -> Result<(), ApiError> {
    if let Some(t) = tools.iter().find(|t| !PATTERNS.tool.is_match(t)) {
        return Err(invalid(format!(
            "{field}: {t:?} is not a tool name (1 to 128 printable ASCII characters, no space)"
        )));
    }
    Ok(())
}

fn values(m: BTreeMap<String, McpValue>) -> std::collections::HashMap<String, mpb::Value> {
    m.into_iter()
        .map(|(k, v)| {
            (
                k,
                mpb::Value {
                    value: v.value,
                    secret: v.secret,
                },
            )
        })
        .collect()
}

fn config(b: NewMcpServer) -> mpb::ServerConfig {
    use mpb::server_config::Transport;
    let transport = if let Some(s) = b.stdio {
        Transport::Stdio(mpb::Stdio {
            command: s.command,
            args: s.args,
            env: values(s.env),
            cwd: s.cwd,
            network: s.network,
        })
    } else if let Some(r) = b.streamable_http {
        Transport::StreamableHttp(mpb::Remote {
            url: r.url,
            headers: values(r.headers),
        })
    } else {
        let r = b.sse.unwrap_or(McpRemote {
            url: String::new(),
            headers: BTreeMap::new(),
        });
        Transport::Sse(mpb::Remote {
            url: r.url,
            headers: values(r.headers),
        })
    };
    mpb::ServerConfig {
        id: b.id,
        name: b.name,
        transport: Some(transport),
        enabled: b.enabled,
        disabled_tools: b.disabled_tools,
        connect_timeout_ms: b.connect_timeout_ms.unwrap_or(0),
        call_timeout_ms: b.call_timeout_ms.unwrap_or(0),
        local: b.local,
    }
}

/// A stdio server's launch as execd registers it: the values of its environment stay
/// with mcpd, only their names are bound.
fn launch(c: &mpb::ServerConfig) -> Option<pb::McpLaunch> {
    match c.transport.as_ref()? {
        mpb::server_config::Transport::Stdio(s) => {
            let mut env_keys: Vec<String> = s.env.keys().cloned().collect();
            env_keys.sort();
            Some(pb::McpLaunch {
                command: s.command.clone(),
                args: s.args.clone(),
                env_keys,
                cwd: s.cwd.clone(),
                network: s.network,
            })
        }
        _ => None,
    }
}

/// mcpd's refusals as the API says them.
pub(crate) fn from_mcp(s: tonic::Status) -> ApiError {
    use tonic::Code;
    if std::error::Error::source(&s).is_some()
        && matches!(s.code(), Code::Unknown | Code::Internal | Code::Unavailable)
    {
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "mcpd is not answering; try again shortly",
        );
    }
    let (status, code) = match s.code() {
        Code::InvalidArgument | Code::OutOfRange => (StatusCode::BAD_REQUEST, "invalid_argument"),
        Code::NotFound => (StatusCode::NOT_FOUND, "not_found"),
        Code::AlreadyExists | Code::FailedPrecondition | Code::Aborted => {
            (StatusCode::CONFLICT, "conflict")
        }
        Code::PermissionDenied | Code::Unauthenticated => (StatusCode::FORBIDDEN, "forbidden"),
        Code::ResourceExhausted => (StatusCode::TOO_MANY_REQUESTS, "resource_exhausted"),
        Code::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        // A tool call: the upstream server failed, or took too long.
        Code::DeadlineExceeded => (StatusCode::GATEWAY_TIMEOUT, "upstream_timeout"),
        Code::Unknown => (StatusCode::BAD_GATEWAY, "upstream"),
        _ => return ApiError::internal(format!("mcpd: {s}")),
    };
    ApiError::new(status, code, s.message())
}

fn state_word(s: i32) -> &'static str {
    match mpb::ServerState::try_from(s).unwrap_or(mpb::ServerState::Unspecified) {
        mpb::ServerState::Connecting => "connecting",
        mpb::ServerState::Connected => "connected",
        mpb::ServerState::NeedsAuth => "needs_auth",
        mpb::ServerState::Timeout => "timeout",
        mpb::ServerState::Error => "error",
        mpb::ServerState::Disabled => "disabled",
        mpb::ServerState::Reconnecting => "reconnecting",
        mpb::ServerState::Unspecified => "",
    }
}

fn values_view(m: &std::collections::HashMap<String, mpb::Value>) -> serde_json::Value {
    let sorted: BTreeMap<&String, serde_json::Value> = m
        .iter()
        .map(|(k, v)| (k, json!({"value": v.value, "secret": v.secret})))
        .collect();
    json!(sorted)
}

/// A server as the API shows it (secrets' values are never in mcpd's answers), with its
/// registration at execd when it has one.
pub fn server_view(
    s: &mpb::Server,
    registration: Option<&pb::McpRegistration>,
) -> serde_json::Value {
    let c = s.config.clone().unwrap_or_default();
    let mut v = json!({
        "id": c.id,
        "name": c.name,
        "enabled": c.enabled,
        "disabled_tools": c.disabled_tools,
        "connect_timeout_ms": c.connect_timeout_ms,
        "call_timeout_ms": c.call_timeout_ms,
        "local": c.local,
        "state": state_word(s.state),
        "error": s.error,
        "state_since_ms": s.state_since_unix_ms,
        "connected_at_ms": s.connected_at_unix_ms,
        "server_name": s.server_name,
        "server_version": s.server_version,
        "protocol_version": s.protocol_version,
        "tools": s.tools,
        "tools_changed": s.tools_changed,
        "era": s.era,
    });
    match c.transport {
        Some(mpb::server_config::Transport::Stdio(st)) => {
            v["transport"] = json!("stdio");
            v["stdio"] = json!({"command": st.command, "args": st.args, "env": values_view(&st.env),
                                "cwd": st.cwd, "network": st.network});
        }
        Some(mpb::server_config::Transport::StreamableHttp(r)) => {
            v["transport"] = json!("streamable_http");
            v["streamable_http"] = json!({"url": r.url, "headers": values_view(&r.headers)});
        }
        Some(mpb::server_config::Transport::Sse(r)) => {
            v["transport"] = json!("sse");
            v["sse"] = json!({"url": r.url, "headers": values_view(&r.headers)});
        }
        None => {}
    }
    if let Some(r) = registration {
        v["registration"] = json!({"digest": r.digest, "registered_by": r.registered_by,
                                   "registered_at_ms": r.registered_at_unix_ms});
    }
    v
}

fn tool_view(t: &mpb::Tool) -> serde_json::Value {
    let schema = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap_or(json!(null));
    let a = t.annotations.unwrap_or_default();
    let state = match mpb::ToolState::try_from(t.state).unwrap_or(mpb::ToolState::Unspecified) {
        mpb::ToolState::Enabled => "enabled",
        mpb::ToolState::Disabled => "disabled",
        mpb::ToolState::Changed => "changed",
        mpb::ToolState::Unspecified => "",
    };
    let mut v = json!({
        "qualified_name": t.qualified_name,
        "server": t.server,
        "name": t.name,
        "title": t.title,
        "description": t.description,
        "input_schema": schema(&t.input_schema_json),
        "annotations": {"read_only": a.read_only, "destructive": a.destructive,
                        "idempotent": a.idempotent, "open_world": a.open_world},
        "state": state,
        "pinned_sha256": t.pinned_sha256,
    });
    if state == "changed" {
        v["offered_description"] = json!(t.offered_description);
        v["offered_input_schema"] = schema(&t.offered_input_schema_json);
        // Empty: never reviewed (first offered after its server's first listing).
        v["pinned_description"] = json!(t.pinned_description);
        v["pinned_input_schema"] = schema(&t.pinned_input_schema_json);
    }
    v
}

fn result_view(r: mpb::CallToolResponse) -> serde_json::Value {
    let content: Vec<serde_json::Value> = r
        .content
        .into_iter()
        .filter_map(|c| {
            Some(match c.kind? {
                mpb::content::Kind::Text(t) => json!({"type": "text", "text": t}),
                mpb::content::Kind::Image(i) => json!({"type": "image", "mime_type": i.mime_type,
                    "data": base64::engine::general_purpose::STANDARD.encode(&i.data)}),
                mpb::content::Kind::ResourceJson(j) => json!({"type": "resource",
                    "resource": serde_json::from_str::<serde_json::Value>(&j).unwrap_or(json!(j))}),
            })
        })
        .collect();
    let structured = (!r.structured_json.is_empty())
        .then(|| serde_json::from_str::<serde_json::Value>(&r.structured_json).ok())
        .flatten();
    json!({"server": r.server, "is_error": r.is_error, "truncated": r.truncated,
           "untrusted": r.untrusted, "content": content, "structured": structured})
}

/// What the audit trail keeps of a configuration: everything but secrets' values.
fn audit_detail(c: &mpb::ServerConfig) -> serde_json::Value {
    let shown = mpb::Server {
        config: Some(c.clone()),
        ..Default::default()
    };
    let mut v = server_view(&shown, None);
    for which in ["stdio", "streamable_http", "sse"] {
        for part in ["env", "headers"] {
            if let Some(m) = v
                .get_mut(which)
                .and_then(|t| t.get_mut(part))
                .and_then(serde_json::Value::as_object_mut)
            {
                for val in m.values_mut() {
                    if val["secret"] == json!(true) {
                        val["value"] = json!("");
                    }
                }
            }
        }
    }
    for k in [
        "state",
        "error",
        "state_since_ms",
        "connected_at_ms",
        "server_name",
        "server_version",
        "protocol_version",
        "tools",
        "tools_changed",
        "era",
    ] {
        v.as_object_mut().map(|o| o.remove(k));
    }
    v
}

fn path_server(id: &str) -> Result<(), ApiError> {
    if PATTERNS.id.is_match(id) {
        Ok(())
    } else {
        Err(invalid(format!(
            "server: {id:?} is not an id: {}",
            argos_common::names::SERVER_ID_RULE
        )))
    }
}

fn path_tool(name: &str) -> Result<(), ApiError> {
    if name.len() <= QUALIFIED_MAX && PATTERNS.qualified.is_match(name) {
        Ok(())
    } else {
        Err(invalid(format!(
            "tool: {name:?} is not a qualified tool name (mcp__{{server}}__{{tool}})"
        )))
    }
}

async fn registrations(api: &Api) -> BTreeMap<String, pb::McpRegistration> {
    match api.exec.list_mcp_servers().await {
        Ok(list) => list.into_iter().map(|r| (r.server_id.clone(), r)).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "listing execd's MCP registrations");
            BTreeMap::new()
        }
    }
}

#[utoipa::path(get, path = "/api/mcp/servers", tag = "mcp", description = "The MCP servers mcpd brokers (admins), each with its connection state, its tools' count and, for a stdio server, its registration at execd. Secrets' values are never shown.", responses((status = 200, description = "`{\"servers\": [...]}`"), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn mcp_servers(State(api): State<Shared>) -> Result<Json<serde_json::Value>, ApiError> {
    let list = api
        .mcp
        .clone()
        .list_servers(mpb::ListServersRequest {})
        .await
        .map_err(from_mcp)?
        .into_inner()
        .servers;
    let regs = registrations(&api).await;
    let servers: Vec<_> = list
        .iter()
        .map(|s| {
            let id = s.config.as_ref().map(|c| c.id.as_str()).unwrap_or_default();
            server_view(s, regs.get(id))
        })
        .collect();
    Ok(Json(json!({"servers": servers})))
}

#[utoipa::path(get, path = "/api/mcp/servers/{server}", tag = "mcp", description = "One MCP server (admins).", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn mcp_server(
    State(api): State<Shared>,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    let s = api
        .mcp
        .clone()
        .get_server(mpb::GetServerRequest { id: server.clone() })
        .await
        .map_err(from_mcp)?
        .into_inner();
    let regs = registrations(&api).await;
    Ok(Json(json!({"server": server_view(&s, regs.get(&server))})))
}

/// Adds (`update` false) or replaces a server's configuration: checked by mcpd first, a
/// stdio launch registered with execd in the admin's name, then kept by mcpd; a refusal
/// by mcpd at that point puts execd's registration back as execd had it.
async fn configure(
    api: &Api,
    caller: &Caller,
    c: mpb::ServerConfig,
    update: bool,
) -> Result<mpb::Server, ApiError> {
    let _one = api.mcp_config.lock().await;
    let add = |c: mpb::ServerConfig, validate_only: bool| {
        let mut mcp = api.mcp.clone();
        async move {
            if update {
                mcp.update_server(mpb::UpdateServerRequest {
                    config: Some(c),
                    validate_only,
                })
                .await
            } else {
                mcp.add_server(mpb::AddServerRequest {
                    config: Some(c),
                    validate_only,
                })
                .await
            }
            .map(tonic::Response::into_inner)
            .map_err(from_mcp)
        }
    };
    add(c.clone(), true).await?;
    let exec = execd(api, caller);
    // What execd has registered for this id now: put back as it was if mcpd then
    // refuses. Taken from execd, never from mcpd's answers (a compromised mcpd must not
    // choose what the gateway registers in an admin's name).
    let before: Option<pb::McpLaunch> = exec
        .list_mcp_servers()
        .await
        .map_err(from_exec)?
        .into_iter()
        .find(|r| r.server_id == c.id)
        .and_then(|r| r.launch);
    let registered = match launch(&c) {
        Some(l) => {
            exec.register_mcp_server(pb::RegisterMcpServerRequest {
                server_id: c.id.clone(),
                launch: Some(l),
            })
            .await
            .map_err(|e| from_exec(e.rename_field("launch.env_keys", "stdio.env")))?;
            true
        }
        None => false,
    };
    match add(c.clone(), false).await {
        Ok(s) => {
            // A server that was stdio and is no longer: its registration goes.
            if !registered
                && before.is_some()
                && let Err(e) = exec.forget_mcp_server(&c.id).await
            {
                tracing::warn!(server = %c.id, error = %e, "forgetting a stdio registration");
            }
            Ok(s)
        }
        Err(e) => {
            if registered {
                let undo = match before {
                    Some(l) => exec
                        .register_mcp_server(pb::RegisterMcpServerRequest {
                            server_id: c.id.clone(),
                            launch: Some(l),
                        })
                        .await
                        .map(|_| ()),
                    None => exec.forget_mcp_server(&c.id).await,
                };
                if let Err(u) = undo {
                    tracing::error!(server = %c.id, error = %u, "undoing a stdio registration");
                }
            }
            Err(e)
        }
    }
}

#[utoipa::path(post, path = "/api/mcp/servers", tag = "mcp", description = "Adds an MCP server (admins). A stdio server's exact launch (command, args, env names, cwd, network) is registered with execd in the caller's name first: execd starts nothing else for mcpd. Secrets are stored encrypted.", request_body = NewMcpServer, responses((status = 201, description = "`{\"server\": ...}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 409, description = "a server with this id exists", body = ErrorBody), (status = 503, description = "mcpd or execd is not answering", body = ErrorBody)))]
pub async fn add_mcp_server(
    State(api): State<Shared>,
    caller: Caller,
    Body(b): Body<NewMcpServer>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    check(&b)?;
    let c = config(b);
    let s = audited(
        &api,
        "mcp.server.add",
        &caller.user.name,
        &c.id,
        audit_detail(&c),
        configure(&api, &caller, c.clone(), false),
    )
    .await?;
    let regs = registrations(&api).await;
    Ok((
        StatusCode::CREATED,
        Json(json!({"server": server_view(&s, regs.get(&c.id))})),
    ))
}

#[utoipa::path(put, path = "/api/mcp/servers/{server}", tag = "mcp", description = "Replaces an MCP server's configuration (admins) and reconnects it; a secret sent empty keeps its stored value. A stdio launch is registered again with execd first.", params(("server" = String, Path, description = "the server's id")), request_body = McpServerBody, responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd or execd is not answering", body = ErrorBody)))]
pub async fn update_mcp_server(
    State(api): State<Shared>,
    caller: Caller,
    Path(server): Path<String>,
    Body(b): Body<McpServerBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    let b = NewMcpServer::from((server, b));
    check(&b)?;
    let c = config(b);
    let s = audited(
        &api,
        "mcp.server.update",
        &caller.user.name,
        &c.id,
        audit_detail(&c),
        configure(&api, &caller, c.clone(), true),
    )
    .await?;
    let regs = registrations(&api).await;
    Ok(Json(json!({"server": server_view(&s, regs.get(&c.id))})))
}

#[utoipa::path(delete, path = "/api/mcp/servers/{server}", tag = "mcp", description = "Disconnects and forgets an MCP server, its pins and its registration at execd (admins).", params(("server" = String, Path, description = "the server's id")), responses((status = 204, description = "removed"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd or execd is not answering", body = ErrorBody)))]
pub async fn remove_mcp_server(
    State(api): State<Shared>,
    caller: Caller,
    Path(server): Path<String>,
) -> Result<StatusCode, ApiError> {
    path_server(&server)?;
    audited(
        &api,
        "mcp.server.remove",
        &caller.user.name,
        &server,
        json!({}),
        async {
            let _one = api.mcp_config.lock().await;
            api.mcp
                .clone()
                .remove_server(mpb::RemoveServerRequest { id: server.clone() })
                .await
                .map_err(from_mcp)?;
            // Registered or not (a remote server has none), nothing of it stays at execd.
            match execd(&api, &caller).forget_mcp_server(&server).await {
                Ok(()) => Ok(()),
                Err(e) if e.kind == argos_exec_client::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(from_exec(e)),
            }
        },
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn set_enabled(
    api: Shared,
    caller: Caller,
    server: String,
    enabled: bool,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    let kind = if enabled {
        "mcp.server.enable"
    } else {
        "mcp.server.disable"
    };
    let s = audited(&api, kind, &caller.user.name, &server, json!({}), async {
        api.mcp
            .clone()
            .set_enabled(mpb::SetEnabledRequest {
                id: server.clone(),
                enabled,
            })
            .await
            .map_err(from_mcp)
            .map(tonic::Response::into_inner)
    })
    .await?;
    Ok(Json(json!({"server": server_view(&s, None)})))
}

#[utoipa::path(post, path = "/api/mcp/servers/{server}/enable", tag = "mcp", description = "Enables (connects) an MCP server (admins).", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn enable_mcp_server(
    State(api): State<Shared>,
    caller: Caller,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    set_enabled(api, caller, server, true).await
}

#[utoipa::path(post, path = "/api/mcp/servers/{server}/disable", tag = "mcp", description = "Disables (disconnects) an MCP server (admins); its tools are refused.", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn disable_mcp_server(
    State(api): State<Shared>,
    caller: Caller,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    set_enabled(api, caller, server, false).await
}

#[utoipa::path(post, path = "/api/mcp/servers/{server}/reconnect", tag = "mcp", description = "Drops an MCP server's connection and connects it again (admins).", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 409, description = "the server is disabled", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn reconnect_mcp_server(
    State(api): State<Shared>,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    let s = api
        .mcp
        .clone()
        .reconnect(mpb::ReconnectRequest { id: server })
        .await
        .map_err(from_mcp)?
        .into_inner();
    Ok(Json(json!({"server": server_view(&s, None)})))
}

#[utoipa::path(get, path = "/api/mcp/servers/{server}/log", tag = "mcp", description = "A stdio server's standard error, the last 64 KiB across its restarts (admins). What a server writes there is its own text: shown, never interpreted.", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"log\": text}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn mcp_server_log(
    State(api): State<Shared>,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    let r = api
        .mcp
        .clone()
        .server_log(mpb::GetServerRequest { id: server })
        .await
        .map_err(from_mcp)?
        .into_inner();
    Ok(Json(json!({"log": r.text})))
}

#[utoipa::path(put, path = "/api/mcp/servers/{server}/disabled_tools", tag = "mcp", description = "Replaces the list of a server's refused tools, by their upstream names (admins). A disabled tool is hidden from callers and refused when called.", params(("server" = String, Path, description = "the server's id")), request_body = DisabledToolsBody, responses((status = 200, description = "`{\"server\": ...}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn set_disabled_tools(
    State(api): State<Shared>,
    caller: Caller,
    Path(server): Path<String>,
    Body(b): Body<DisabledToolsBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    if b.tools.len() > MAX_DISABLED {
        return Err(invalid(format!("tools: more than {MAX_DISABLED}")));
    }
    check_tools("tools", &b.tools)?;
    let s = audited(
        &api,
        "mcp.server.disabled_tools",
        &caller.user.name,
        &server,
        json!({"tools": b.tools}),
        async {
            api.mcp
                .clone()
                .set_disabled_tools(mpb::SetDisabledToolsRequest {
                    id: server.clone(),
                    disabled_tools: b.tools.clone(),
                })
                .await
                .map_err(from_mcp)
                .map(tonic::Response::into_inner)
        },
    )
    .await?;
    Ok(Json(json!({"server": server_view(&s, None)})))
}

#[utoipa::path(post, path = "/api/mcp/servers/{server}/authorize", tag = "mcp", description = "Starts authorizing a Streamable HTTP server that asks for OAuth 2.1 (admins): answers the authorization server's URL to open in this browser. It comes back to `/api/mcp/oauth/callback`, and the server connects with its tokens (kept encrypted by mcpd, refreshed as they expire).", params(("server" = String, Path, description = "the server's id")), responses((status = 200, description = "`{\"url\": …}`"), (status = 400, description = "not a server id", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such server", body = ErrorBody), (status = 409, description = "the server cannot be authorized (not Streamable HTTP, or its authorization server could not be used): see the message", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn authorize_mcp_server(
    State(api): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    caller: Caller,
    headers: HeaderMap,
    Path(server): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_server(&server)?;
    // Back to this gateway, as the browser reaches it (its Host was checked on entry).
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(|| invalid("host: the request names no host"))?;
    let scheme = if is_https(&headers, &api.web, peer.ip()) {
        "https"
    } else {
        "http"
    };
    let redirect_uri = format!("{scheme}://{host}/api/mcp/oauth/callback");
    let url = audited(
        &api,
        "mcp.server.authorize",
        &caller.user.name,
        &server,
        json!({"redirect_uri": redirect_uri}),
        async {
            api.mcp
                .clone()
                .authorize(mpb::AuthorizeRequest {
                    id: server.clone(),
                    redirect_uri: redirect_uri.clone(),
                })
                .await
                .map_err(from_mcp)
                .map(|r| r.into_inner().url)
        },
    )
    .await?;
    Ok(Json(json!({"url": url})))
}

/// What an authorization server's redirect brings.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CallbackQuery {
    /// The authorization code (absent when `error` says why there is none).
    #[serde(default)]
    code: Option<String>,
    /// The authorization's state, as `authorize` made it.
    state: String,
    /// The issuer (RFC 9207), when the authorization server sends it.
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

#[utoipa::path(get, path = "/api/mcp/oauth/callback", tag = "mcp", description = "Where an authorization server sends the browser back (no session needed: the `state`, random and single use, names the authorization an admin started): the code is exchanged and the server connects; answers a redirect to its page.", params(CallbackQuery), responses((status = 303, description = "authorized: to the server's page"), (status = 400, description = "the query is not a redirect's (no code, no state)", body = ErrorBody), (status = 404, description = "no authorization waits with this state (finished, replaced, expired or never started)", body = ErrorBody), (status = 409, description = "no authorization: the authorization server refused (its `error`), or the code could not be exchanged; see the message", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn mcp_oauth_callback(
    State(api): State<Shared>,
    Query(q): Query<CallbackQuery>,
) -> Result<Response, ApiError> {
    if let Some(e) = &q.error {
        let why = q.error_description.as_deref().unwrap_or_default();
        let text: String = format!("{e} {why}")
            .chars()
            .filter(|c| !c.is_control())
            .take(300)
            .collect();
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_authorized",
            format!(
                "error: the authorization server gave no code: {}",
                text.trim()
            ),
        ));
    }
    let Some(code) = q.code.filter(|c| !c.is_empty()) else {
        return Err(invalid("code: missing"));
    };
    let done = api
        .mcp
        .clone()
        .finish_authorization(mpb::FinishAuthorizationRequest {
            state: q.state,
            code,
            iss: q.iss.unwrap_or_default(),
        })
        .await
        .map_err(from_mcp);
    // Recorded once mcpd knew the state: an exchange that failed as well as one that
    // worked. (A state mcpd does not know is answered, not recorded: anyone may send one,
    // and the trail is no place for their noise.)
    let s = match done {
        Ok(s) => s.into_inner(),
        Err(e) => {
            if e.status == StatusCode::CONFLICT {
                record(
                    &api,
                    "mcp.server.authorize.failed",
                    "(oauth redirect)",
                    "",
                    json!({"message": e.message}),
                )
                .await?;
            }
            return Err(e);
        }
    };
    let id = s.config.map(|c| c.id).unwrap_or_default();
    record(
        &api,
        "mcp.server.authorized",
        "(oauth redirect)",
        &id,
        json!({}),
    )
    .await?;
    Ok((
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("/#/mcp/{id}"))],
    )
        .into_response())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ToolsQuery {
    /// One server's tools (its id); absent: every server's.
    #[serde(default)]
    server: Option<String>,
    /// Every tool with its state (`enabled`, `disabled`, `changed`); otherwise only those
    /// that may be called.
    #[serde(default)]
    all: Option<bool>,
}

#[utoipa::path(get, path = "/api/mcp/tools", tag = "mcp", description = "Tools of the brokered MCP servers under their qualified names (admins); with `all`, disabled and changed tools too, a changed one with the definition it now offers.", params(ToolsQuery), responses((status = 200, description = "`{\"tools\": [...]}`"), (status = 400, description = "a bad query parameter", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn mcp_tools(
    State(api): State<Shared>,
    Query(q): Query<ToolsQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if let Some(server) = &q.server {
        path_server(server)?;
    }
    let server = q.server.unwrap_or_default();
    let tools = api
        .mcp
        .clone()
        .list_tools(mpb::ListToolsRequest {
            server,
            all: q.all.unwrap_or(false),
        })
        .await
        .map_err(from_mcp)?
        .into_inner()
        .tools;
    Ok(Json(
        json!({"tools": tools.iter().map(tool_view).collect::<Vec<_>>()}),
    ))
}

#[utoipa::path(post, path = "/api/mcp/tools/{tool}/accept", tag = "mcp", description = "Accepts a tool's changed definition (admins): it is pinned anew and may be called again.", params(("tool" = String, Path, description = "the qualified name, mcp__{server}__{tool}")), responses((status = 200, description = "`{\"tool\": ...}`"), (status = 400, description = "not a qualified tool name", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such tool", body = ErrorBody), (status = 409, description = "the tool has not changed", body = ErrorBody), (status = 503, description = "mcpd is not answering", body = ErrorBody)))]
pub async fn accept_mcp_tool(
    State(api): State<Shared>,
    caller: Caller,
    Path(tool): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_tool(&tool)?;
    let t = audited(
        &api,
        "mcp.tool.accept",
        &caller.user.name,
        &tool,
        json!({}),
        async {
            api.mcp
                .clone()
                .accept_tool(mpb::AcceptToolRequest {
                    qualified_name: tool.clone(),
                })
                .await
                .map_err(from_mcp)
                .map(tonic::Response::into_inner)
        },
    )
    .await?;
    Ok(Json(json!({"tool": tool_view(&t)})))
}

#[utoipa::path(post, path = "/api/mcp/tools/{tool}/call", tag = "mcp", description = "Calls a brokered tool (admins). The result is capped and marked `untrusted`: it is the upstream server's data, never instructions. A disabled or changed tool is refused (409); the upstream's failure is a 502, its timeout a 504.", params(("tool" = String, Path, description = "the qualified name, mcp__{server}__{tool}")), request_body = ToolCallBody, responses((status = 200, description = "`{\"result\": {server, is_error, truncated, untrusted, content, structured}}`"), (status = 400, description = "bad field (named)", body = ErrorBody), (status = 401, description = "not logged in", body = ErrorBody), (status = 403, description = "not allowed (role, scope or cross-site)", body = ErrorBody), (status = 404, description = "no such tool", body = ErrorBody), (status = 409, description = "the tool is disabled or changed", body = ErrorBody), (status = 502, description = "the upstream server failed", body = ErrorBody), (status = 503, description = "mcpd is not answering, or the server is not connected", body = ErrorBody), (status = 504, description = "the upstream server took too long", body = ErrorBody)))]
pub async fn call_mcp_tool(
    State(api): State<Shared>,
    caller: Caller,
    Path(tool): Path<String>,
    Body(b): Body<ToolCallBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    path_tool(&tool)?;
    let arguments = b.arguments.map(serde_json::Value::Object);
    let text = arguments
        .as_ref()
        .map(serde_json::Value::to_string)
        .unwrap_or_default();
    let r = audited(
        &api,
        "mcp.tool.call",
        &caller.user.name,
        &tool,
        json!({"arguments_sha256": argos_store::audit::sha256_hex(text.as_bytes()),
               "arguments_bytes": text.len()}),
        async {
            api.mcp
                .clone()
                .call_tool(mpb::CallToolRequest {
                    qualified_name: tool.clone(),
                    arguments_json: text.clone(),
                })
                .await
                .map_err(from_mcp)
                .map(tonic::Response::into_inner)
        },
    )
    .await?;
    Ok(Json(json!({"result": result_view(r)})))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: serde_json::Value) -> NewMcpServer {
        serde_json::from_value(v).unwrap()
    }

    fn refused(v: serde_json::Value) -> String {
        check(&body(v)).unwrap_err().message
    }

    #[test]
    fn urls_the_pattern_takes_parse_and_those_it_refuses_are_named() {
        let p = &*PATTERNS;
        for ok in [
            "http://localhost:8080/mcp",
            "https://mcp.example.com/v1/mcp?team=ops",
            "http://127.0.0.1:65535/",
            "HTTPS://A.B",
        ] {
            assert!(p.url.is_match(ok), "{ok}");
            assert!(url::Url::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ftp://x/",
            "http:x",
            "http://u:p@x/",
            "http://x/#f",
            "http://1.2.3/",
            "http://999.1.1.1/",
            "http://x:65536/",
            "http://x y/",
            "http://[::1]/",
        ] {
            assert!(!p.url.is_match(bad), "{bad}");
        }
    }

    #[test]
    fn every_bad_field_is_named_before_anything_is_asked() {
        let base =
            json!({"id": "files", "name": "Files", "stdio": {"command": "/usr/bin/files-mcp"}});
        assert!(check(&body(base.clone())).is_ok());
        let with = |k: &str, v: serde_json::Value| {
            let mut b = base.clone();
            b[k] = v;
            b
        };
        assert!(refused(with("id", json!("Files"))).starts_with("id:"));
        assert!(refused(with("name", json!(" \t"))).starts_with("name:"));
        assert!(refused(with("name", json!("a\u{7}b"))).starts_with("name:"));
        assert!(refused(with("sse", json!({"url": "https://x/"}))).starts_with("transport:"));
        assert!(
            refused(with(
                "stdio",
                json!({"command": "x", "env": {"LD_PRELOAD": {"value": "/x.so"}}})
            ))
            .starts_with("stdio.env: \"LD_PRELOAD\"")
        );
        assert!(
            refused(with(
                "stdio",
                json!({"command": "x", "env": {"node_options": {"value": "-r x"}}})
            ))
            .starts_with("stdio.env:")
        );
        assert!(
            refused(with("stdio", json!({"command": "x", "cwd": "/a/../b"})))
                .starts_with("stdio.cwd:")
        );
        assert!(refused(with("stdio", json!({"command": ""}))).starts_with("stdio.command:"));
        assert!(refused(with("connect_timeout_ms", json!(10))).starts_with("connect_timeout_ms:"));
        let remote = json!({"id": "r", "name": "R", "streamable_http": {"url": "https://x/mcp",
                            "headers": {"Mcp-Session-Id": {"value": "1"}}}});
        assert!(refused(remote).starts_with("streamable_http.headers: \"Mcp-Session-Id\""));
        let remote = json!({"id": "r", "name": "R", "sse": {"url": "https://x/sse",
                            "headers": {"X-Key": {"value": "a\nb", "secret": true}}}});
        assert!(refused(remote).starts_with("sse.headers.X-Key:"));
    }

    #[test]
    fn a_stdio_launch_binds_env_names_not_values() {
        let b = body(
            json!({"id": "t", "name": "T", "stdio": {"command": "uvx", "args": ["mcp-server-time"],
            "env": {"TZ_NAME": {"value": "Europe/Paris"}, "API_KEY": {"value": "s3cret", "secret": true}},
            "network": true}}),
        );
        let c = config(b);
        let l = launch(&c).unwrap();
        assert_eq!(l.env_keys, ["API_KEY", "TZ_NAME"]);
        assert!(l.network);
        assert_eq!(l.args, ["mcp-server-time"]);
        let d = audit_detail(&c);
        assert_eq!(d["stdio"]["env"]["API_KEY"]["value"], "");
        assert_eq!(d["stdio"]["env"]["TZ_NAME"]["value"], "Europe/Paris");
        assert!(d.get("state").is_none());
    }
}
