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
    }
}
