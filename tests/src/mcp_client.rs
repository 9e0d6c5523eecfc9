//! The PyPI `mcp` client (`tests/mcp/client.py`, the Python SDK's `Client`) as the tests
//! drive `/mcp` with it, and reading its answers.

use std::process::Command;

use serde_json::{Value, json};

use crate::web::Web;

/// Runs the client against `url` with `token` in `mode` (an era, or `legacy`), listing the
/// tools and making `calls` in turn; answers what it printed.
pub fn client(url: &str, token: &str, mode: &str, calls: &[(&str, Value)]) -> Value {
    let root = crate::workspace_root();
    let mut cmd = Command::new(root.join("target/tools/mcp-py/bin/python"));
    cmd.arg(root.join("tests/mcp/client.py"))
        .args([url, token, mode]);
    for (name, args) in calls {
        cmd.arg(name).arg(args.to_string());
    }
    let out = cmd.output().expect("the Python MCP client");
    assert!(
        out.status.success(),
        "client.py {mode}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("client.py prints JSON")
}

/// A new API token of `web`'s user.
pub fn token(web: &mut Web, name: &str, scopes: &[&str]) -> String {
    let r = web.post("/api/tokens", json!({"name": name, "scopes": scopes}));
    assert_eq!(r.status, 201, "{r:?}");
    r.json()["token"].as_str().unwrap().to_string()
}

/// The names of the tools a client run listed.
pub fn names(v: &Value) -> Vec<String> {
    v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// The first text of a call's answer.
pub fn text(call: &Value) -> String {
    call["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
