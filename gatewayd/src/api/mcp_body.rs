//! What an admin sends to `/api/mcp/…`: the bodies, each field checked against the
//! patterns the OpenAPI document states (the same constants, `constraints.rs`), so what
//! the document calls valid is what is accepted (mcpd and execd check them again); their
//! wire form for mcpd and the launch execd registers; what the audit trail keeps of them.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use argos_proto::mcp::v1 as mpb;

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
    pub(crate) tools: Vec<String>,
}

/// A tool call's arguments.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallBody {
    /// A JSON object (absent: none).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub(crate) arguments: Option<serde_json::Map<String, serde_json::Value>>,
}

pub(crate) fn check_len(field: &str, s: &str, max: usize) -> Result<(), ApiError> {
    if s.chars().count() > max {
        return Err(invalid(format!("{field}: longer than {max} characters")));
    }
    Ok(())
}

pub(crate) fn check_values(
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
pub(crate) fn check(b: &NewMcpServer) -> Result<(), ApiError> {
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

pub(crate) fn check_tools(field: &str, tools: &[String]) -> Result<(), ApiError> {
    if let Some(t) = tools.iter().find(|t| !PATTERNS.tool.is_match(t)) {
        return Err(invalid(format!(
            "{field}: {t:?} is not a tool name (1 to 128 printable ASCII characters, no space)"
        )));
    }
    Ok(())
}

pub(crate) fn values(
    m: BTreeMap<String, McpValue>,
) -> std::collections::HashMap<String, mpb::Value> {
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

pub(crate) fn config(b: NewMcpServer) -> mpb::ServerConfig {
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
pub(crate) fn launch(c: &mpb::ServerConfig) -> Option<pb::McpLaunch> {
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

pub(crate) fn path_server(id: &str) -> Result<(), ApiError> {
    if PATTERNS.id.is_match(id) {
        Ok(())
    } else {
        Err(invalid(format!(
            "server: {id:?} is not an id: {}",
            argos_common::names::SERVER_ID_RULE
        )))
    }
}

pub(crate) fn path_tool(name: &str) -> Result<(), ApiError> {
    if name.len() <= QUALIFIED_MAX && PATTERNS.qualified.is_match(name) {
        Ok(())
    } else {
        Err(invalid(format!(
            "tool: {name:?} is not a qualified tool name (mcp__{{server}}__{{tool}})"
        )))
    }
}

/// What the audit trail keeps of a configuration: everything but secrets' values.
pub(crate) fn audit_detail(c: &mpb::ServerConfig) -> serde_json::Value {
    let shown = mpb::Server {
        config: Some(c.clone()),
        ..Default::default()
    };
    let mut v = crate::views::mcp::server(&shown, None);
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
