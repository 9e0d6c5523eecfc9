//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, run with
//! Node 22 from npm's `node@22`) against the gateway's `/mcp`: every server scenario the
//! 2025-11-25 and the 2026-07-28 revisions require. The checks that cannot apply to Argos
//! (they call the suite's own fixture tools, or features the endpoint does not offer) are
//! in `tests/mcp/conformance-baseline.yml`, each with why; any other failure fails, and so
//! does a baseline entry that starts passing.

use std::process::{Child, Command, Stdio};

use argos_tests::{StackBuilder, require_root};
use serde_json::json;

struct Proxy(Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tests/mcp/bearer_proxy.py`: the suite has no way to send a token.
fn proxy(port: u16, upstream: std::net::SocketAddr, token: &str) -> Proxy {
    use std::io::BufRead as _;
    let root = argos_tests::workspace_root();
    let mut child = Command::new("/usr/bin/python3")
        .arg(root.join("tests/mcp/bearer_proxy.py"))
        .arg(port.to_string())
        .arg(upstream.to_string())
        .arg(token)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    Proxy(child)
}

/// Each check that did not pass, from the suite's `checks.json` files: `scenario:check
/// STATUS message`.
fn not_passed(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        // `server-{scenario}-{timestamp}`
        let scenario = name
            .strip_prefix("server-")
            .and_then(|n| n.rsplit_once("-20").map(|(s, _)| s))
            .unwrap_or(&name)
            .to_string();
        let Ok(text) = std::fs::read_to_string(entry.path().join("checks.json")) else {
            continue;
        };
        let checks: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        for c in checks.as_array().into_iter().flatten() {
            let status = c["status"].as_str().unwrap_or_default();
            if status == "FAILURE" || status == "WARNING" {
                found.push(format!(
                    "{scenario}:{} {status} {}",
                    c["id"].as_str().unwrap_or_default(),
                    c["errorMessage"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn the_mcp_conformance_suite_passes_its_server_scenarios() {
    require_root("the stack runs privilege-separated");
    let stack = StackBuilder::new().start();
    let mut admin = stack.admin();
    let r = admin.post(
        "/api/tokens",
        json!({"name": "conformance", "scopes": ["mcp"]}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let token = r.json()["token"].as_str().unwrap().to_string();
    let port = argos_tests::free_port();
    let _proxy = proxy(port, stack.listen, &token);
    let root = argos_tests::workspace_root();
    let tools = root.join("target/tools/conformance/node_modules/.bin");
    let mut failed = Vec::new();
    for version in ["2025-11-25", "2026-07-28"] {
        let out_dir = stack.root().join(format!("conformance-{version}"));
        let out = Command::new(tools.join("node"))
            .arg(tools.join("conformance"))
            .args(["server", "--url", &format!("http://127.0.0.1:{port}/mcp")])
            .args(["--requirements", version, "--expected-failures"])
            .arg(root.join("tests/mcp/conformance-baseline.yml"))
            .arg("-o")
            .arg(&out_dir)
            .output()
            .expect("the conformance suite (scripts/install-test-tools installs it)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        // The summary: one line per scenario, then the totals and the baseline's verdict.
        let summary: Vec<&str> = stdout
            .lines()
            .filter(|l| {
                l.starts_with('✓')
                    || l.starts_with('✗')
                    || l.starts_with("Total")
                    || l.contains("xpected")
                    || l.contains("tale")
            })
            .collect();
        println!("{version}:\n{}", summary.join("\n"));
        assert!(
            summary.iter().any(|l| l.starts_with("✓ tools-list")),
            "{version}: tools-list did not pass:\n{stdout}"
        );
        if !out.status.success() {
            failed.push(format!(
                "{version}: {}\n{}\n{}\nchecks not passed:\n{}",
                out.status,
                summary.join("\n"),
                String::from_utf8_lossy(&out.stderr),
                not_passed(&out_dir).join("\n")
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    stack.stop();
}
