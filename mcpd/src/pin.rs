//! A tool's definition pinned on first sight: the SHA-256 of its name, description, input
//! schema and annotations in a canonical JSON form (keys sorted at every level), so that a
//! server that changes a tool under an agent (a "rug pull") is noticed, whatever order it
//! writes its keys in. `listing` turns a server's tools into what mcpd keeps of them:
//! capped, named (each qualified name one tool's: [`names::unique`]), and each with its pin
//! and the definition the pin was taken of.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::broker::ToolEntry;
use crate::caps::{self, Limits};
use crate::names;
use crate::server::ServerConfig;
use crate::store::{Store, StoreError};
use crate::upstream::RawTool;

/// The pin of a tool first seen after its server's first listing: no definition hashes to
/// it, so the tool is held until an admin accepts it.
pub const UNREVIEWED: &str = "unreviewed";

/// The pin of a definition, as hex: every field offered to a caller is in it.
pub fn digest(
    name: &str,
    title: &str,
    description: &str,
    schema: &Value,
    annotations: &Value,
) -> String {
    // The audit trail's canonical form: keys sorted at every level.
    let text = argos_store::audit::canonical(&serde_json::json!({
        "name": name, "title": title, "description": description,
        "input_schema": schema, "annotations": annotations,
    }));
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A server's listing as mcpd keeps it: each tool's definition capped and compared with
/// its pin (pinned on first sight). A server offering more tools than the cap keeps the first ones.
pub async fn listing(
    store: &Store,
    limits: &Limits,
    config: &ServerConfig,
    mut raw: Vec<RawTool>,
) -> Result<Vec<ToolEntry>, StoreError> {
    if raw.len() > limits.tools_per_server {
        tracing::warn!(server = %config.id, offered = raw.len(), kept = limits.tools_per_server,
            "the server offers more tools than the cap");
        raw.truncate(limits.tools_per_server);
    }
    // A name an admin could not name to disable it (the MCP spec's 1 to 128 of
    // letters, digits, '_', '-', '.') is not offered at all.
    raw.retain(|t| {
        let ok = (1..=128).contains(&t.name.len())
            && t.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b));
        if !ok {
            tracing::warn!(server = %config.id, "a tool with a name outside the MCP charset is not offered");
        }
        ok
    });
    // Each qualified name names one tool: tools sharing one (a name listed twice, or
    // two names whose short hashes meet) are not offered, so a call never reaches a
    // tool other than the one whose definition was listed.
    let qualified = {
        let upstream: Vec<&str> = raw.iter().map(|t| t.name.as_str()).collect();
        names::unique(&config.id, &upstream)
    };
    let raw: Vec<(String, RawTool)> = raw
        .into_iter()
        .zip(qualified)
        .filter_map(|(t, q)| {
            if q.is_none() {
                tracing::warn!(server = %config.id, tool = %t.name,
                    "a tool sharing its qualified name with another of the server's tools is not offered");
            }
            Some((q?, t))
        })
        .collect();
    // Tools pinned before this listing: a tool first seen after the server's first
    // listing is held like a changed one (a server must not add an unreviewed tool by
    // reconnecting).
    let seen_before = store.has_pins(&config.id).await?;
    let mut out = Vec::with_capacity(raw.len());
    for (qualified, t) in raw {
        let offered = digest(
            &t.name,
            &t.title,
            &t.description,
            &t.input_schema,
            &t.annotations,
        );
        let first_sight = if seen_before {
            UNREVIEWED.to_string()
        } else {
            offered.clone()
        };
        let (description, input_schema, _) =
            caps::definition(&t.description, &t.input_schema, limits);
        let mut entry = ToolEntry {
            server: config.id.clone(),
            qualified,
            name: t.name,
            title: caps::title(&t.title),
            description,
            input_schema,
            annotations: caps::annotations(t.annotations),
            pinned: String::new(),
            offered,
            pinned_definition: String::new(),
        };
        // A tool never reviewed keeps no definition: there is nothing to compare with.
        let definition = if seen_before {
            String::new()
        } else {
            entry.definition()
        };
        (entry.pinned, entry.pinned_definition) = store
            .pin_first(&config.id, &entry.name, &first_sight, &definition)
            .await?;
        out.push(entry);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(name: &str, read_only: bool) -> RawTool {
        RawTool {
            name: name.into(),
            title: String::new(),
            description: format!("{name} here"),
            input_schema: json!({"type": "object"}),
            annotations: json!({"readOnlyHint": read_only}),
        }
    }

    /// The review's case through the listing mcpd keeps: `get.time` and the name its
    /// changed form once had each get a qualified name of their own, with their own
    /// definitions and pins; a name offered twice is not offered (nor pinned) at all.
    #[tokio::test]
    async fn a_listing_names_each_tool_once_and_withholds_shared_names() {
        let dir = tempfile::tempdir().unwrap();
        let key = std::sync::Arc::new(argos_store::key::Key::from_bytes([5; 32]));
        let store = Store::open(&dir.path().join("mcpd.db"), key).await.unwrap();
        let config = ServerConfig {
            id: "s".into(),
            name: "s".into(),
            transport: crate::server::Transport::StreamableHttp {
                url: "https://x/mcp".into(),
                headers: Default::default(),
            },
            enabled: true,
            disabled_tools: vec![],
            connect_timeout_ms: 0,
            call_timeout_ms: 0,
            local: false,
        };
        store.add(&config).await.unwrap();
        let changed = names::qualified("s", "get.time");
        let imitation = changed.strip_prefix("mcp__s__").unwrap().to_string();
        let tools = listing(
            &store,
            &Limits::default(),
            &config,
            vec![
                raw("get.time", true),
                raw(&imitation, false),
                raw("echo", true),
                raw("echo", false),
            ],
        )
        .await
        .unwrap();
        let got: Vec<(&str, &str, bool)> = tools
            .iter()
            .map(|t| {
                let ro = t.annotations["readOnlyHint"].as_bool().unwrap();
                (t.qualified.as_str(), t.name.as_str(), ro)
            })
            .collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], (changed.as_str(), "get.time", true));
        assert_eq!(got[1].1, imitation);
        assert!(!got[1].2);
        assert_ne!(got[1].0, changed);
        for t in &tools {
            assert_eq!(t.pinned, t.offered, "{}", t.name);
        }
        let mut pinned: Vec<String> = store
            .pins("s")
            .await
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        pinned.sort();
        assert_eq!(pinned, ["get.time".to_string(), imitation]);
    }

    #[test]
    fn key_order_does_not_matter_and_every_part_does() {
        let a: Value =
            serde_json::from_str(r#"{"type":"object","properties":{"x":{},"y":{}}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"properties":{"y":{},"x":{}},"type":"object"}"#).unwrap();
        let ann = json!({"readOnlyHint": true});
        let base = digest("t", "T", "d", &a, &ann);
        assert_eq!(base, digest("t", "T", "d", &b, &ann));
        assert_eq!(base.len(), 64);
        assert_ne!(base, digest("t2", "T", "d", &a, &ann));
        assert_ne!(base, digest("t", "T2", "d", &a, &ann));
        assert_ne!(base, digest("t", "T", "d ", &a, &ann));
        assert_ne!(
            base,
            digest("t", "T", "d", &json!({"type": "object"}), &ann)
        );
        assert_ne!(
            base,
            digest("t", "T", "d", &a, &json!({"readOnlyHint": false}))
        );
        assert_ne!(base, UNREVIEWED);
    }
}
