//! A tool's definition pinned on first sight: the SHA-256 of its name, description, input
//! schema and annotations in a canonical JSON form (keys sorted at every level), so that a
//! server that changes a tool under an agent (a "rug pull") is noticed, whatever order it
//! writes its keys in.

use serde_json::Value;
use sha2::{Digest, Sha256};

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
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
