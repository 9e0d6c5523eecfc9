//! Qualified tool names: `mcp__{server}__{tool}`, at most 64 characters of
//! `[A-Za-z0-9_-]`, the same for the same pair on every start, and never the same for two
//! different pairs. A tool name that is too long or has other characters keeps a readable
//! prefix and ends with a short hash of the whole upstream name.

use sha2::{Digest, Sha256};

/// The longest qualified name (what MCP clients and model APIs accept for a tool name).
pub const MAX: usize = 64;
const PREFIX: &str = "mcp__";
const SEP: &str = "__";
/// Hex characters of the hash that ends a cut name.
const HASH: usize = 10;

fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The qualified name of `tool` on `server` (a server id is already a slug of at most 32).
pub fn qualified(server: &str, tool: &str) -> String {
    let whole = format!("{PREFIX}{server}{SEP}{tool}");
    if whole.len() <= MAX && tool.chars().all(plain) && !tool.is_empty() {
        return whole;
    }
    let hash: String = Sha256::digest(tool.as_bytes())[..HASH / 2]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let room = MAX - PREFIX.len() - server.len() - SEP.len() - 1 - HASH;
    let kept: String = tool
        .chars()
        .map(|c| if plain(c) { c } else { '_' })
        .take(room)
        .collect();
    format!("{PREFIX}{server}{SEP}{kept}_{hash}")
}

/// The server a qualified name names (its id), if it has the form.
pub fn server_of(qualified: &str) -> Option<&str> {
    let rest = qualified.strip_prefix(PREFIX)?;
    let (server, _) = rest.split_once(SEP)?;
    (!server.is_empty()).then_some(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_read_as_they_are() {
        assert_eq!(
            qualified("time", "get_current_time"),
            "mcp__time__get_current_time"
        );
        assert_eq!(server_of("mcp__time__get_current_time"), Some("time"));
        assert_eq!(server_of("mcp__a-b__x__y"), Some("a-b"));
        assert_eq!(server_of("time__x"), None);
        assert_eq!(server_of("mcp____x"), None);
    }

    #[test]
    fn long_or_odd_names_are_cut_with_a_hash_and_never_collide() {
        let server = "a-server-id-of-thirty-two-chars";
        let long = "x".repeat(100);
        let longer = "x".repeat(101);
        let (a, b) = (qualified(server, &long), qualified(server, &longer));
        assert!(a.len() <= MAX && b.len() <= MAX, "{a} {b}");
        assert_ne!(a, b);
        assert_eq!(a, qualified(server, &long), "stable");
        // Characters a client would refuse are replaced, and the hash keeps them apart.
        let (c, d) = (qualified("s", "get.time"), qualified("s", "get_time"));
        assert_ne!(c, d);
        assert!(c.starts_with("mcp__s__get_time_"), "{c}");
        assert!(c.chars().all(plain), "{c}");
        assert_eq!(server_of(&c), Some("s"));
        let e = qualified("s", "");
        assert!(e.starts_with("mcp__s___") && e.len() <= MAX, "{e}");
        // Multibyte names are cut on characters, not bytes.
        let f = qualified(server, &"é".repeat(80));
        assert!(f.len() <= MAX && f.chars().all(plain), "{f}");
    }
}
