//! The README's examples, run as printed against a started stack, so they cannot drift:
//! every `sh` block but the first (which starts a stack and runs the tests) runs in bash
//! with `set -euo pipefail`, its stack's port and tree put for the README's defaults
//! (`127.0.0.1:7000`, `.argos/`), and an API token wherever the README says `argos_…`
//! (`$TOKEN` with read, exec and approve, `$ARGOS_TOKEN` with read and approve, `$AGENT` with
//! agent, `$MCP` with mcp). Ids are taken from earlier answers by the README's own lines (`ID=$(… | jq …)`).
//! One line is left out, and said so: approving the agent's `systemctl restart nginx`,
//! which would run it as root on the machine running the tests (gate.rs approves and runs
//! a host change for real). Every other line must succeed and no answer may be an error.

use std::path::Path;
use std::process::Command;

use argos_tests::{StackBuilder, require_root};

use argos_tests::readme::{INSTALL_SECTION, code, sh_blocks};

#[test]
fn the_readme_examples_work_as_printed() {
    require_root("the README examples (the stack runs privilege-separated)");
    let stack = StackBuilder::new().start();
    let mut admin = stack.admin();
    let token = |web: &mut argos_tests::web::Web, scopes: &[&str]| -> String {
        let r = web.post(
            "/api/tokens",
            serde_json::json!({"name": format!("readme {}", scopes.join(" ")), "scopes": scopes}),
        );
        assert_eq!(r.status, 201, "{r:?}");
        r.json()["token"].as_str().unwrap().to_string()
    };
    let tokens = [
        ("TOKEN", token(&mut admin, &["read", "exec", "approve"])),
        ("AGENT", token(&mut admin, &["agent"])),
        ("ARGOS_TOKEN", token(&mut admin, &["read", "approve"])),
        ("MCP", token(&mut admin, &["mcp"])),
    ];
    let port = stack.listen_addr().port();
    let root = stack.root().display().to_string();
    let grpcurl =
        std::env::var("GRPCURL_BIN").unwrap_or_else(|_| "target/tools/venv/bin/grpcurl".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut ran = Vec::new();
    let mut left_out = Vec::new();
    let mut on_a_host = 0;
    for block in sh_blocks().into_iter().skip(1) {
        // Installing the package on a host: package.rs runs that section in a container.
        if block.section == INSTALL_SECTION {
            on_a_host += block.lines.len();
            continue;
        }
        let (first, lines) = (block.first, block.lines);
        let mut script = String::from(
            "set -euo pipefail\ntrap 'echo \"README line failed: $BASH_COMMAND\" >&2' ERR\n",
        );
        for line in &lines {
            let c = code(line).trim();
            if c.is_empty() {
                continue;
            }
            assert!(
                !(c.contains('<') && c.contains('>') && !c.contains("<<")),
                "README line {c:?} has a placeholder: take the value from an earlier answer"
            );
            if c.contains("approvals approve") {
                left_out.push(c.to_string());
                continue;
            }
            let mut c = c
                .replace("127.0.0.1:7000", &format!("127.0.0.1:{port}"))
                .replace(".argos/", &format!("{root}/"));
            if let Some(rest) = c.strip_prefix("grpcurl ") {
                c = format!("{grpcurl} {rest}");
            }
            // ARGOS_TOKEN before TOKEN, whose name ends it.
            for (var, _) in tokens.iter().rev() {
                c = c.replace(&format!("{var}=argos_…"), &format!("{var}=\"${var}\""));
            }
            script.push_str(&c);
            script.push('\n');
            ran.push(c);
        }
        let out = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .current_dir(workspace)
            .envs(tokens.iter().map(|(k, v)| (*k, v.as_str())))
            .env("XDG_STATE_HOME", stack.root().join("xdg-state"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "README block at line {first} failed:\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
        );
        assert!(
            !stdout.contains("\"error\":{") && !stderr.contains("command not found"),
            "README block at line {first} answered an error:\n{stdout}\n{stderr}"
        );
    }
    eprintln!(
        "README: {} lines ran; left out (an approval that runs a change as root here): {left_out:#?}; \
         {on_a_host} lines on installing the package run in package.rs",
        ran.len()
    );
    assert!(ran.len() >= 20, "only {} README lines ran", ran.len());
    assert_eq!(left_out.len(), 1, "{left_out:#?}");
    stack.stop();
}
