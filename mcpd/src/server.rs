//! A configured upstream server, as mcpd keeps it, and the checks every field passes
//! before it is kept: each failure names its field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Connecting, when the configuration says 0.
pub const DEFAULT_CONNECT_MS: u32 = 20_000;
/// A call, when the configuration says 0.
pub const DEFAULT_CALL_MS: u32 = 60_000;

/// A value of a server's environment or of a request header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Value {
    pub value: String,
    /// Stored sealed (`Key::seal`), never shown.
    #[serde(default)]
    pub secret: bool,
}

/// How mcpd reaches the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, Value>,
        cwd: String,
        network: bool,
    },
    StreamableHttp {
        url: String,
        headers: BTreeMap<String, Value>,
    },
    Sse {
        url: String,
        headers: BTreeMap<String, Value>,
    },
}

impl Transport {
    pub fn word(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::StreamableHttp { .. } => "streamable_http",
            Transport::Sse { .. } => "sse",
        }
    }

    /// Its secret values (env or headers), for sealing and redacting.
    pub fn values_mut(&mut self) -> impl Iterator<Item = (&String, &mut Value)> {
        match self {
            Transport::Stdio { env, .. } => env.iter_mut(),
            Transport::StreamableHttp { headers, .. } | Transport::Sse { headers, .. } => {
                headers.iter_mut()
            }
        }
    }
}

/// What an admin configures for one server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerConfig {
    pub id: String,
    pub name: String,
    pub transport: Transport,
    pub enabled: bool,
    pub disabled_tools: Vec<String>,
    pub connect_timeout_ms: u32,
    pub call_timeout_ms: u32,
    pub local: bool,
}

impl ServerConfig {
    pub fn connect_timeout(&self) -> std::time::Duration {
        let ms = match self.connect_timeout_ms {
            0 => DEFAULT_CONNECT_MS,
            n => n,
        };
        std::time::Duration::from_millis(u64::from(ms))
    }

    pub fn call_timeout(&self) -> std::time::Duration {
        let ms = match self.call_timeout_ms {
            0 => DEFAULT_CALL_MS,
            n => n,
        };
        std::time::Duration::from_millis(u64::from(ms))
    }
}

/// A field that fails its check, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why}")]
pub struct FieldError {
    pub field: String,
    pub why: String,
}

fn bad(field: impl Into<String>, why: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        why: why.into(),
    }
}

/// A server id: a letter, then letters, digits and '-', 32 at most.
pub fn check_id(id: &str) -> Result<(), FieldError> {
    if argos_common::names::is_server_id(id) {
        Ok(())
    } else {
        Err(bad(
            "id",
            format!(
                "{id:?} is not an id: {}",
                argos_common::names::SERVER_ID_RULE
            ),
        ))
    }
}

fn text(field: &str, s: &str, max: usize) -> Result<(), FieldError> {
    if s.len() > max {
        return Err(bad(field, format!("longer than {max} bytes")));
    }
    if s.chars().any(|c| c == '\0') {
        return Err(bad(field, "contains a NUL byte"));
    }
    Ok(())
}

fn header_name(k: &str) -> bool {
    (1..=128).contains(&k.len())
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// An upstream URL: http(s), a host, no credentials in it (they go in a header).
pub fn check_url(field: &str, url: &str) -> Result<url::Url, FieldError> {
    if url.len() > 2048 {
        return Err(bad(field, "longer than 2048 bytes"));
    }
    let u = url::Url::parse(url).map_err(|e| bad(field, format!("{url:?} is not a URL: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(bad(field, format!("{url:?}: only http and https")));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(bad(field, format!("{url:?} has no host")));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(bad(
            field,
            "credentials in the URL: put them in a header marked secret",
        ));
    }
    if u.fragment().is_some() {
        return Err(bad(
            field,
            format!("{url:?}: a fragment is not sent to a server"),
        ));
    }
    Ok(u)
}

/// Checks every field; the first that fails is named.
pub fn validate(c: &ServerConfig) -> Result<(), FieldError> {
    check_id(&c.id)?;
    if c.name.trim().is_empty() {
        return Err(bad("name", "empty"));
    }
    if c.name.chars().count() > 100 || c.name.chars().any(char::is_control) {
        return Err(bad(
            "name",
            "at most 100 characters, none of them control characters",
        ));
    }
    match &c.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
            network: _,
        } => {
            if command.is_empty() {
                return Err(bad("stdio.command", "empty"));
            }
            text("stdio.command", command, 4096)?;
            if args.len() > 256 {
                return Err(bad("stdio.args", "more than 256 arguments"));
            }
            for (i, a) in args.iter().enumerate() {
                text(&format!("stdio.args[{i}]"), a, 4096)?;
            }
            if env.len() > 64 {
                return Err(bad("stdio.env", "more than 64 variables"));
            }
            for (k, v) in env {
                if !argos_common::names::is_env_name(k) {
                    return Err(bad(
                        "stdio.env",
                        format!(
                            "{k:?} is not a variable name (letters, digits, '_'; not a digit first)"
                        ),
                    ));
                }
                if argos_common::names::steers(k) {
                    return Err(bad(
                        "stdio.env",
                        format!(
                            "{k}: it chooses what the server runs or loads, so it is not configurable"
                        ),
                    ));
                }
                text(&format!("stdio.env.{k}"), &v.value, 8192)?;
            }
            if !cwd.is_empty() && (!cwd.starts_with('/') || cwd.split('/').any(|p| p == "..")) {
                return Err(bad("stdio.cwd", "absolute, without '..'"));
            }
            text("stdio.cwd", cwd, 4096)?;
        }
        Transport::StreamableHttp { url, headers } | Transport::Sse { url, headers } => {
            let which = c.transport.word();
            check_url(&format!("{which}.url"), url)?;
            if headers.len() > 32 {
                return Err(bad(format!("{which}.headers"), "more than 32 headers"));
            }
            for (k, v) in headers {
                if !header_name(k) {
                    return Err(bad(
                        format!("{which}.headers"),
                        format!("{k:?} is not a header name"),
                    ));
                }
                if argos_common::names::MCP_RESERVED_HEADERS
                    .contains(&k.to_ascii_lowercase().as_str())
                {
                    return Err(bad(
                        format!("{which}.headers"),
                        format!("{k} is set by Argos, not by configuration"),
                    ));
                }
                if v.value.len() > 8192
                    || !v
                        .value
                        .bytes()
                        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
                {
                    return Err(bad(
                        format!("{which}.headers.{k}"),
                        "printable ASCII, at most 8192 bytes",
                    ));
                }
            }
        }
    }
    if c.disabled_tools.len() > 1024 {
        return Err(bad("disabled_tools", "more than 1024"));
    }
    for t in &c.disabled_tools {
        if t.is_empty() || t.len() > 128 {
            return Err(bad("disabled_tools", format!("{t:?}: 1 to 128 bytes")));
        }
    }
    if c.connect_timeout_ms != 0 && !(1_000..=300_000).contains(&c.connect_timeout_ms) {
        return Err(bad("connect_timeout_ms", "0 (20 s) or 1000 to 300000"));
    }
    if c.call_timeout_ms != 0 && !(1_000..=3_600_000).contains(&c.call_timeout_ms) {
        return Err(bad("call_timeout_ms", "0 (60 s) or 1000 to 3600000"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(url: &str) -> ServerConfig {
        ServerConfig {
            id: "everything".into(),
            name: "Everything".into(),
            transport: Transport::StreamableHttp {
                url: url.into(),
                headers: BTreeMap::new(),
            },
            enabled: true,
            disabled_tools: vec![],
            connect_timeout_ms: 0,
            call_timeout_ms: 0,
            local: false,
        }
    }

    fn field(c: &ServerConfig) -> String {
        validate(c).unwrap_err().field
    }

    #[test]
    fn a_good_configuration_passes_with_its_defaults() {
        let c = http("https://mcp.example.com/mcp");
        assert_eq!(validate(&c), Ok(()));
        assert_eq!(c.connect_timeout().as_millis(), 20_000);
        assert_eq!(c.call_timeout().as_millis(), 60_000);
    }

    #[test]
    fn every_bad_field_is_named() {
        let mut c = http("https://x/");
        for id in ["", "A", "1abc", "a_b", &"a".repeat(33)] {
            c.id = id.into();
            assert_eq!(field(&c), "id", "{id}");
        }
        c.id = "ok".into();
        c.name = " ".into();
        assert_eq!(field(&c), "name");
        c.name = "ok".into();
        for url in [
            "ftp://x/",
            "http://",
            "not a url",
            "https://u:p@x/",
            "https://x/#f",
        ] {
            assert_eq!(field(&http(url)), "streamable_http.url", "{url}");
        }
        let mut h = http("https://x/");
        if let Transport::StreamableHttp { headers, .. } = &mut h.transport {
            headers.insert(
                "Mcp-Session-Id".into(),
                Value {
                    value: "x".into(),
                    secret: false,
                },
            );
        }
        assert_eq!(field(&h), "streamable_http.headers");
        let mut s = http("https://x/");
        s.transport = Transport::Stdio {
            command: "npx".into(),
            args: vec!["a\0b".into()],
            env: BTreeMap::new(),
            cwd: String::new(),
            network: false,
        };
        assert_eq!(field(&s), "stdio.args[0]");
        s.transport = Transport::Stdio {
            command: "npx".into(),
            args: vec![],
            env: [(
                "1BAD".to_string(),
                Value {
                    value: String::new(),
                    secret: false,
                },
            )]
            .into(),
            cwd: String::new(),
            network: false,
        };
        assert_eq!(field(&s), "stdio.env");
        s.transport = Transport::Stdio {
            command: "npx".into(),
            args: vec![],
            env: BTreeMap::new(),
            cwd: "/a/../b".into(),
            network: false,
        };
        assert_eq!(field(&s), "stdio.cwd");
        let mut t = http("https://x/");
        t.connect_timeout_ms = 5;
        assert_eq!(field(&t), "connect_timeout_ms");
        t.connect_timeout_ms = 0;
        t.call_timeout_ms = 3_600_001;
        assert_eq!(field(&t), "call_timeout_ms");
    }
}
