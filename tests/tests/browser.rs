//! The web UI in a real browser: headless Debian Chromium driven by playwright-core
//! (installed by `scripts/install-test-tools`). The script is `tests/browser/ui.mjs`.

use argos_tests::StackBuilder;

#[test]
fn the_web_ui_works_in_chromium() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let modules = root.join("target/tools/node/node_modules");
    assert!(
        modules.join("playwright-core").exists()
            && std::path::Path::new("/usr/bin/chromium").exists(),
        "playwright-core or Chromium is missing: run scripts/install-test-tools"
    );
    let stack = StackBuilder::new().start();
    // The npm MCP reference server over Streamable HTTP, for the MCP page.
    let everything = argos_tests::mcp_peer::Everything::start();
    // And one that asks for OAuth (the Python SDK's, with its own authorization server).
    let port = argos_tests::free_port();
    let mut oauth = argos_tests::mcp_peer::python("oauth.py", port, &[]);
    let url = format!("http://{}/setup#{}", stack.listen, stack.setup_secret());
    let out = std::process::Command::new("node")
        .arg(root.join("tests/browser/ui.mjs"))
        .arg(&url)
        .arg(everything.url())
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .env("ARGOS_NODE_TOOLS", root.join("target/tools/node"))
        .env("ARGOS_SCREENS", root.join("target/ui-screens"))
        .current_dir(root.join("target/tools/node"))
        .output()
        .expect("node");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the browser run failed:\n{text}\n{}",
        stack.log()
    );
    let _ = oauth.kill();
    let _ = oauth.wait();
    assert!(text.contains("ok: "), "{text}");
    stack.stop();
}
