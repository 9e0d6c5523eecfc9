//! Qualified tool names: `mcp__{server}__{tool}`, at most 64 characters of
//! `[A-Za-z0-9_-]`, the same for the same pair on every start; a name offered is never
//! another tool's, of the same server or of another.
//!
//! A tool name kept as it is must be plain (`[A-Za-z0-9_-]`), fit, and not end as a
//! changed name does. Any other name is changed: its characters outside the plain set
//! replaced by `_`, cut to fit, and ended with `_` and a short hash of the whole upstream
//! name. So a name kept as it is never equals a changed one, and two changed names meet
//! only where their short hashes do — which a server choosing its own tool names can
//! search for: [`unique`] withholds every tool of a listing whose qualified name is not its
//! own. Across servers, a server id has no `_` (`argos_common::names::is_server_id`), so
//! the first `__` after `mcp__` always ends it and [`server_of`] reads it back.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

/// The longest qualified name (what MCP clients and model APIs accept for a tool name).
pub const MAX: usize = 64;
const PREFIX: &str = "mcp__";
const SEP: &str = "__";
/// Hex characters of the hash that ends a changed name.
const HASH: usize = 10;

fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether a name ends as every changed name does: `_` and [`HASH`] lowercase hex digits.
fn looks_changed(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() > HASH
        && b[b.len() - HASH - 1] == b'_'
        && b[b.len() - HASH..]
            .iter()
            .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `tool` stands as it is in its qualified name on `server`.
fn kept_as_is(server: &str, tool: &str) -> bool {
    PREFIX.len() + server.len() + SEP.len() + tool.len() <= MAX
        && !tool.is_empty()
        && tool.chars().all(plain)
        && !looks_changed(tool)
}

/// The qualified name of `tool` on `server` (a server id is already a slug of at most 32).
pub fn qualified(server: &str, tool: &str) -> String {
    if kept_as_is(server, tool) {
        return format!("{PREFIX}{server}{SEP}{tool}");
    }
    let hash = hex::encode(&Sha256::digest(tool.as_bytes())[..HASH / 2]);
    let room = MAX - PREFIX.len() - server.len() - SEP.len() - 1 - HASH;
    let kept: String = tool
        .chars()
        .map(|c| if plain(c) { c } else { '_' })
        .take(room)
        .collect();
    format!("{PREFIX}{server}{SEP}{kept}_{hash}")
}

/// The qualified names of one server's tools, in the order given: each tool's own, or
/// `None` for every tool whose qualified name another tool of the same listing shares (a
/// name listed twice, or two names whose short hashes meet). Such a name would no longer
/// say which tool it calls, so none of the tools sharing it is offered.
pub fn unique(server: &str, tools: &[&str]) -> Vec<Option<String>> {
    withhold_shared(tools.iter().map(|t| qualified(server, t)).collect())
}

/// Each name, or `None` where it appears more than once.
fn withhold_shared(names: Vec<String>) -> Vec<Option<String>> {
    let mut count: HashMap<String, usize> = HashMap::new();
    for n in &names {
        *count.entry(n.clone()).or_default() += 1;
    }
    names
        .into_iter()
        .map(|n| (count.get(&n) == Some(&1)).then_some(n))
        .collect()
}

/// The server a qualified name names (its id), if it has the form.
pub fn server_of(qualified: &str) -> Option<&str> {
    let rest = qualified.strip_prefix(PREFIX)?;
    let (server, _) = rest.split_once(SEP)?;
    argos_common::names::is_server_id(server).then_some(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash_of(tool: &str) -> String {
        let q = qualified("s", tool);
        q[q.len() - HASH..].to_string()
    }

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
        // Not a server id: no server is named by it.
        assert_eq!(server_of("mcp__a_b__c"), None);
        assert_eq!(server_of("mcp__Time__x"), None);
        // A name that only looks a little like a changed one stands as it is.
        for tool in ["get_time_0123", "x_0123456789abcdef0", "y-0123456789", "_"] {
            assert_eq!(qualified("s", tool), format!("mcp__s__{tool}"));
        }
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

    /// The review's case: a server offering `get.time` and a tool named exactly as
    /// `get.time`'s changed name once was. Each has its own qualified name.
    #[test]
    fn a_plain_name_never_takes_a_changed_ones_place() {
        let changed = qualified("s", "get.time");
        let imitation = format!("get_time_{}", hash_of("get.time"));
        assert_eq!(changed, format!("mcp__s__{imitation}"));
        let other = qualified("s", &imitation);
        assert_ne!(other, changed);
        // The imitation is changed itself: its own hash, never one it chose.
        assert_eq!(
            other,
            format!("mcp__s__{imitation}_{}", hash_of(&imitation))
        );
        assert_eq!(
            unique("s", &["get.time", imitation.as_str()]),
            [Some(changed), Some(other)]
        );
        // Every changed name ends as a changed one does, so no name kept as it is can be
        // one; and every name read back names its server.
        let long = "z".repeat(90);
        for tool in [
            "get.time",
            imitation.as_str(),
            "a/b",
            long.as_str(),
            "",
            "_x",
        ] {
            let q = qualified("s", tool);
            assert!(kept_as_is("s", tool) || looks_changed(&q), "{tool}: {q}");
            assert_eq!(server_of(&q), Some("s"), "{q}");
        }
    }

    /// A name listed twice, or two names meeting on one qualified name (their short
    /// hashes equal, which a server can search for): none of them is offered, and the
    /// others keep their names.
    #[test]
    fn tools_sharing_a_qualified_name_are_withheld() {
        assert_eq!(
            unique("s", &["echo", "get.time", "echo", "peek"]),
            [
                None,
                Some(qualified("s", "get.time")),
                None,
                Some("mcp__s__peek".into())
            ]
        );
        // What two distinct tools whose hashes met would map to: both withheld.
        let met = "mcp__s__get_time_0123456789".to_string();
        assert_eq!(
            withhold_shared(vec![met.clone(), "mcp__s__peek".into(), met]),
            [None, Some("mcp__s__peek".into()), None]
        );
    }

    #[test]
    fn servers_never_share_a_qualified_name() {
        // `mcp__a__b_c` and `mcp__a_b__c` would need an id with '_', which none has.
        assert!(!argos_common::names::is_server_id("a_b"));
        let pairs = [
            ("a", "b_c"),
            ("a", "_b__c"),
            ("a-b", "c"),
            ("a", "b-c"),
            ("a", "-b__c"),
            ("ab", "c"),
        ];
        let names: Vec<String> = pairs.iter().map(|(s, t)| qualified(s, t)).collect();
        for (i, (s, _)) in pairs.iter().enumerate() {
            assert_eq!(server_of(&names[i]), Some(*s), "{}", names[i]);
            assert!(!names[..i].contains(&names[i]), "{}", names[i]);
        }
    }
}
