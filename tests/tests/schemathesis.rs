//! The gateway's OpenAPI document against the gateway it describes, judged by Schemathesis
//! (PyPI, installed by `scripts/install-test-tools`): every operation, as an admin's API
//! token, with every check — no request the document calls valid may be refused, none it
//! calls invalid accepted, and no answer may be one the document does not declare.

use argos_tests::{StackBuilder, require_root};

#[test]
fn the_openapi_document_holds_against_schemathesis() {
    require_root("the Schemathesis run (the stack runs privilege-separated)");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let st = root.join("target/tools/venv/bin/schemathesis");
    assert!(
        st.exists(),
        "Schemathesis is missing: run scripts/install-test-tools"
    );
    // The jobs and tasks the fuzzer itself makes (an admin's save approves a schedule that
    // may fire every second) are held to a few at a time, so they cannot load the host
    // under the requests being judged.
    let stack = StackBuilder::new()
        .env("ARGOS_JOBS__ACTIVE_PER_USER", "4")
        .start();
    let mut admin = stack.admin();
    let r = admin.post(
        "/api/tokens",
        serde_json::json!({"name": "schemathesis", "scopes": ["exec", "read", "approve"]}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let token = r.json()["token"].as_str().unwrap().to_string();
    let out = std::process::Command::new(&st)
        .arg("--config-file")
        .arg(root.join("tests/schemathesis.toml"))
        .arg("run")
        .arg(format!("http://{}/api/openapi.json", stack.listen_addr()))
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "all", "--max-examples", "20", "--seed", "1"])
        .env("NO_COLOR", "1")
        // Its cache of found failures stays in the build tree, not the sources.
        .current_dir(root.join("target"))
        .output()
        .expect("schemathesis");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "Schemathesis found failures:\n{text}");
    assert!(text.contains("passed"), "{text}");
    stack.stop();
}
