//! A tool's definition pinned on first sight: the SHA-256 of its name, description, input
//! schema and annotations in a canonical JSON form (keys sorted at every level), so that a
//! server that changes a tool under an agent (a "rug pull") is noticed, whatever order it
//! writes its keys in.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The pin of a definition, as hex.
pub fn digest(name: &str, description: &str, schema: &Value, annotations: &Value) -> String {
    // The audit trail's canonical form: keys sorted at every level.
    let text = argos_store::audit::canonical(&serde_json::json!({
        "name": name, "description": description,
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
        let base = digest("t", "d", &a, &ann);
        assert_eq!(base, digest("t", "d", &b, &ann));
        assert_eq!(base.len(), 64);
        assert_ne!(base, digest("t2", "d", &a, &ann));
        assert_ne!(base, digest("t", "d ", &a, &ann));
        assert_ne!(base, digest("t", "d", &json!({"type": "object"}), &ann));
        assert_ne!(base, digest("t", "d", &a, &json!({"readOnlyHint": false})));
    }
}
