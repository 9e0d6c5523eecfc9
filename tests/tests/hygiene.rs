//! Structural rules that keep the trust boundaries honest.

use std::process::Command;

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// The privileged daemon links no web stack, MCP or HTTP client: less code running as root.
#[test]
fn execd_dependency_tree_has_no_web_stack() {
    let out = Command::new(cargo())
        .args([
            "tree",
            "--locked",
            "-p",
            "argos-execd",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("argos-execd"), "{tree}");
    for banned in [
        "axum",
        "tower-http",
        "rmcp",
        "reqwest",
        "hyper-rustls",
        "argon2",
    ] {
        let hit: Vec<&str> = tree
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(banned))
            .collect();
        assert!(hit.is_empty(), "argos-execd depends on {banned}: {hit:?}");
    }
}

/// Every crate but execd forbids unsafe code outright.
#[test]
fn unsafe_is_forbidden_outside_execd() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for krate in [
        "proto/src/lib.rs",
        "common/src/lib.rs",
        "gatewayd/src/main.rs",
        "mcpd/src/main.rs",
        "jobd/src/main.rs",
        "ctl/src/main.rs",
        "tests/src/lib.rs",
    ] {
        let text = std::fs::read_to_string(root.join(krate)).unwrap();
        assert!(
            text.contains("#![forbid(unsafe_code)]"),
            "{krate} must forbid unsafe code"
        );
    }
}
