//! Names more than one daemon checks the same way: an MCP server's id (mcpd keeps it, execd
//! registers its stdio launch under it) and an environment variable's name.

/// An MCP server id: a lowercase letter, then lowercase letters, digits and '-', 32 at most.
/// (No '_': the first `__` of a qualified tool name `mcp__{id}__{tool}` ends the id.)
pub fn is_server_id(id: &str) -> bool {
    (1..=32).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// What a server id must be, for an error message.
pub const SERVER_ID_RULE: &str =
    "a lowercase letter, then lowercase letters, digits and '-', 32 at most";

/// An environment variable's name: letters, digits and '_', not a digit first, 128 at most.
pub fn is_env_name(k: &str) -> bool {
    (1..=128).contains(&k.len())
        && k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Environment names that choose a program, its loader, interpreter or start-up code
/// (compared without case), and the prefixes of such names. A stdio MCP server's
/// environment may not set them: mcpd gives the values, and one of these would let it
/// run something else under the registered launch's name.
pub const STEERING_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "SHELL",
    "ENV",
    "BASH_ENV",
    "IFS",
    "CDPATH",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "RUBYLIB",
    "RUBYOPT",
    "GEM_PATH",
    "GEM_HOME",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "GCONV_PATH",
    "LOCPATH",
    "NLSPATH",
    "TMPDIR",
    "GIT_EXEC_PATH",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "DENO_DIR",
    "BUN_INSTALL",
    "UV_PYTHON",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
];
pub const STEERING_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "NPM_CONFIG_",
    "NODE_",
    "PYTHON",
    "UV_",
    "PIP_",
];

/// Whether setting `k` would steer what runs (see [`STEERING_NAMES`]).
pub fn steers(k: &str) -> bool {
    let upper = k.to_ascii_uppercase();
    STEERING_NAMES.contains(&upper.as_str())
        || STEERING_PREFIXES.iter().any(|p| upper.starts_with(p))
}

/// Request headers an MCP client sets itself, or that would change how a request is
/// framed: a configured upstream server's headers may not name them (lowercase).
pub const MCP_RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "last-event-id",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_env_names() {
        for ok in ["a", "time", "ok-1", &"a".repeat(32)] {
            assert!(is_server_id(ok), "{ok}");
        }
        for bad in ["", "A", "1abc", "a_b", "a b", &"a".repeat(33)] {
            assert!(!is_server_id(bad), "{bad}");
        }
        for ok in ["PATH", "_x", "TZ2"] {
            assert!(is_env_name(ok), "{ok}");
        }
        for bad in ["", "2X", "A=B", "A-B", &"A".repeat(129)] {
            assert!(!is_env_name(bad), "{bad}");
        }
        for steering in [
            "PATH",
            "ld_preload",
            "NODE_OPTIONS",
            "PythonPath",
            "UV_INDEX",
        ] {
            assert!(steers(steering), "{steering}");
        }
        for plain in ["API_KEY", "TZ", "LANG", "GITHUB_TOKEN"] {
            assert!(!steers(plain), "{plain}");
        }
    }
}
