//! Approvals over HTTP and at the console: live events for admins, the decision's rules,
//! who may decide (the owner of an agent's token, or another admin), and `argosctl
//! approvals`.

use argos_tests::StackBuilder;
use argos_tests::web::Web;
use serde_json::json;

/// Agents' runs through the gate over HTTP: live approval events for admins only, the
/// decision's rules as HTTP errors, an approve-scoped token, and both audit trails merged.
#[test]
fn approvals_over_http_with_events_rules_and_the_merged_audit_trail() {
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let own = format!("http://{}", stack.listen);
    let mut events = admin.sse_get("/api/events", &[("origin", own.as_str())]);
    assert_eq!(events.next_event().unwrap().event, "ready");
    let mut bobs = bob.sse_get("/api/events", &[]);
    assert_eq!(bobs.next_event().unwrap().event, "ready");
    let (tx, bob_saw) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        while let Some(e) = bobs.next_event() {
            if tx.send(e).is_err() {
                return;
            }
        }
    });
    // bob's agent, by token: read-only runs at once; the rest waits.
    let mut agent = bob.token(&["agent"]);
    let r = agent.post("/api/agent/run", json!({"command": "uname -a"}));
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.json()["approval"].is_null(), "{r:?}");
    let r = agent.post("/api/shell/exec", json!({"command": "uname -a"}));
    assert_eq!(r.status, 403, "an agent token cannot run directly: {r:?}");
    let r = agent.post(
        "/api/agent/run",
        json!({"command": "dd if=/dev/zero of=/tmp/argos-dd bs=1 count=1", "purpose": "zero it", "risk": "harmless"}),
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("risk:"),
        "{r:?}"
    );
    let r = agent.post(
        "/api/agent/run",
        json!({"command": "dd if=/dev/zero of=/tmp/argos-dd bs=1 count=1", "purpose": "zero it"}),
    );
    let pending = r.json();
    let a = &pending["approval"];
    assert_eq!(
        (a["state"].as_str(), a["risk_class"].as_str()),
        (Some("pending"), Some("destructive")),
        "{pending}"
    );
    assert_eq!(a["requester_principal"], "bob");
    let id = a["id"].as_str().unwrap().to_string();
    let short = a["short_id"].as_str().unwrap().to_string();
    // The admin's stream shows it; bob's does not.
    loop {
        let e = events.next_event().unwrap();
        if e.event == "approval" && e.json()["approval"]["id"] == id.as_str() {
            assert_eq!(e.json()["approval"]["state"], "pending");
            break;
        }
    }
    // The decision's rules, as HTTP answers.
    let decide = |web: &mut Web, body: serde_json::Value| {
        web.post(&format!("/api/approvals/{id}/decision"), body)
    };
    let r = decide(&mut admin, json!({"decision": "approve"}));
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "invalid_argument"),
        "{r:?}"
    );
    let r = decide(
        &mut admin,
        json!({"decision": "approve", "confirm": "nope1234"}),
    );
    assert_eq!(r.status, 400, "{r:?}");
    let r = decide(&mut admin, json!({"decision": "maybe"}));
    assert_eq!(r.status, 400, "{r:?}");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("decision:")
    );
    // An admin token needs the `approve` scope; with it, it decides.
    let r = admin.post(
        "/api/tokens",
        json!({"name": "console", "scopes": ["approve"]}),
    );
    let mut console = Web::with_bearer(stack.listen, r.json()["token"].as_str().unwrap());
    let r = decide(
        &mut console,
        json!({"decision": "approve", "confirm": short}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let v = r.json();
    assert_eq!(v["approval"]["state"], "consumed", "{v}");
    assert_eq!(v["approval"]["decided_by"], "gateway:root-admin");
    let r = decide(
        &mut console,
        json!({"decision": "approve", "confirm": short}),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (409, "conflict"),
        "used once: {r:?}"
    );
    // One left waiting: the listing's state filter finds it.
    let r = admin.post("/api/agent/run", json!({"command": "mkdir /tmp/argos-own"}));
    let own_id = r.json()["approval"]["id"].as_str().unwrap().to_string();
    let r = admin.get("/api/approvals?state=pending");
    let listed = r.json();
    assert_eq!(listed["approvals"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["approvals"][0]["id"], own_id.as_str());
    let r = admin.get("/api/approvals?state=whatever");
    assert_eq!(r.status, 400, "{r:?}");
    // bob never saw an approval go by.
    while let Ok(e) = bob_saw.recv_timeout(std::time::Duration::from_millis(300)) {
        assert_ne!(e.event, "approval", "a user saw an approval: {e:?}");
    }
    // Both trails, merged and verified.
    let v = admin.get("/api/audit/verify").json();
    assert_eq!(
        (v["execd"]["ok"].as_bool(), v["gateway"]["ok"].as_bool()),
        (Some(true), Some(true)),
        "{v}"
    );
    let trail = admin.get(&format!("/api/audit?subject={id}")).json();
    let kinds: Vec<(String, String)> = trail["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["source"].as_str().unwrap().into(),
                r["kind"].as_str().unwrap().into(),
            )
        })
        .collect();
    for want in [
        ("execd", "approval.requested"),
        ("execd", "approval.refused"),
        ("execd", "approval.decided"),
        ("execd", "launch.intent"),
        ("gateway", "approval.decide"),
        ("gateway", "approval.decide.outcome"),
    ] {
        assert!(
            kinds.iter().any(|(s, k)| s == want.0 && k == want.1),
            "{want:?} missing from {kinds:?}"
        );
    }
    let logins = admin.get("/api/audit?kind=login.").json();
    assert!(
        logins["records"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["actor"] == "bob"),
        "{logins}"
    );
    stack.stop();
}

/// `argosctl approvals` and `argosctl audit verify` at the console, with an admin's token.
#[test]
fn argosctl_lists_and_decides_approvals_with_an_api_token() {
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let url = format!("http://{}", stack.listen);
    let r = admin.post(
        "/api/tokens",
        json!({"name": "console", "scopes": ["read", "approve"]}),
    );
    let token = r.json()["token"].as_str().unwrap().to_string();
    let ctl = |args: &[&str]| {
        let out = stack
            .argosctl()
            .args(args)
            .args(["--url", &url])
            .env("ARGOS_TOKEN", &token)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, out, _) = ctl(&["approvals", "list"]);
    assert_eq!((code, out.trim()), (Some(0), "no pending approvals"));
    let ask = |bob: &mut Web, command: &str| {
        let r = bob.post(
            "/api/agent/run",
            json!({"command": command, "purpose": "console test"}),
        );
        r.json()["approval"].clone()
    };
    let wipe = ask(
        &mut bob,
        "shred -u /tmp/argos-console-test || echo shredded",
    );
    let note = ask(&mut bob, "echo from-the-console > /dev/null; echo done");
    let (code, out, err) = ctl(&["approvals", "list"]);
    assert_eq!(code, Some(0), "{err}");
    for want in [
        wipe["short_id"].as_str().unwrap(),
        "destructive",
        "bob",
        "purpose: console test",
        "echo from-the-console",
    ] {
        assert!(out.contains(want), "{want} missing from:\n{out}");
    }
    // A destructive one needs its short id.
    let id = wipe["id"].as_str().unwrap();
    let (code, _, err) = ctl(&["approvals", "approve", id]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("400") && err.contains("short id"), "{err}");
    let short = wipe["short_id"].as_str().unwrap();
    let (code, out, err) = ctl(&["approvals", "approve", id, "--confirm", short]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with(&format!("consumed {short}")), "{out}");
    assert!(
        out.contains("shredded") && out.contains("succeeded"),
        "{out}"
    );
    let (code, out, _) = ctl(&[
        "approvals",
        "deny",
        note["id"].as_str().unwrap(),
        "--note",
        "no",
    ]);
    assert_eq!(code, Some(0));
    assert!(out.contains("denied") && out.contains("rejected"), "{out}");
    let (code, out, _) = ctl(&["approvals", "list", "--state", "all"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("consumed") && out.contains("denied"), "{out}");
    let (code, out, _) = ctl(&["audit", "verify"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("execd:") && out.contains("gateway:") && out.contains("verifies"),
        "{out}"
    );
    // Without a token it says what to do.
    let out = stack
        .argosctl()
        .args(["approvals", "list", "--url", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ARGOS_TOKEN"));
    stack.stop();
}

/// A listener on a loopback port as `uid`, which counts what each connection sent it
/// (`conn N` per connection on its output, after `ready`).
struct Listener {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Listener {
    fn start(port: u16, uid: u32) -> Listener {
        use std::io::BufRead as _;
        use std::os::unix::process::CommandExt as _;
        let script = format!(
            r#"
import socket
s = socket.socket(); s.bind(("127.0.0.1", {port})); s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept(); c.settimeout(3)
    got = 0
    try:
        while True:
            b = c.recv(65536)
            if not b: break
            got += len(b)
    except OSError:
        pass
    c.close()
    print("conn", got, flush=True)
"#
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &script])
            .uid(uid)
            .gid(uid)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(out.next().unwrap().unwrap(), "ready");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in out.map_while(Result::ok) {
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        Listener { child, lines }
    }

    /// Stops it and answers the connections it had.
    fn stop(mut self) -> Vec<String> {
        // What a refused connection would have reached it as is counted first.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.lines.iter().collect()
    }
}

/// While a stack is stopped, or none is recorded, the gateway's port is anyone's to bind.
/// argosctl asks the kernel who listens there before it sends ARGOS_TOKEN: a listener of
/// another uid is not even connected to, and the refusal names the port, the uid found and
/// the uids expected (the stopped stack's gateway uid from its config; root and the caller
/// with no stack). A root listener, as systemd's socket activation makes, gets the request.
#[test]
fn argosctl_sends_no_token_to_a_port_another_user_listens_on() {
    argos_tests::require_root("listening as another uid (nobody, 65534)");
    const NOBODY: u32 = 65534;
    let token = "argos_never_for_strangers";
    let mut stack = StackBuilder::new().start();
    let port = stack.listen.port();
    let url = format!("http://127.0.0.1:{port}");
    stack.restart_with(|root| {
        let ctl = |cwd: &std::path::Path, args: &[&str]| {
            let out = argos_tests::command("argosctl")
                .args(args)
                .current_dir(cwd)
                .env("XDG_STATE_HOME", cwd.join("xdg-state"))
                .env("ARGOS_TOKEN", token)
                .output()
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            )
        };
        let stranger = Listener::start(port, NOBODY);
        // The stopped stack's own tree: its config names the gateway's uid.
        let tree = root.display().to_string();
        let (code, _, err) = ctl(root, &["approvals", "list", "--root", &tree, "--url", &url]);
        assert_eq!(code, Some(2), "{err}");
        for want in [
            "ARGOS_TOKEN not sent".to_string(),
            format!("port {port}"),
            format!("uid {NOBODY}"),
            argos_tests::GATEWAY_UID.to_string(),
        ] {
            assert!(err.contains(&want), "{want}: {err}");
        }
        // No stack at all (nothing in the working or the state dir): root and the caller.
        let nowhere = tempfile::tempdir().unwrap();
        for args in [
            &["approvals", "list"][..],
            &["jobs", "list"],
            &["tasks", "list"],
            &["audit", "verify"],
        ] {
            let args: Vec<&str> = args.iter().copied().chain(["--url", &url]).collect();
            let (code, out, err) = ctl(nowhere.path(), &args);
            assert_eq!(code, Some(2), "{args:?}: {out}{err}");
            assert!(
                err.contains(&format!("uid {NOBODY}, not by the gateway (uid 0")),
                "{args:?}: {err}"
            );
        }
        assert_eq!(stranger.stop(), Vec::<String>::new(), "the stranger was connected to");

        // Root listening (what PID 1 is under socket activation): the request is sent.
        let root_port = argos_tests::free_port();
        let ours = std::net::TcpListener::bind(("127.0.0.1", root_port)).unwrap();
        let served = std::thread::spawn(move || {
            use std::io::{Read as _, Write as _};
            let (mut c, _) = ours.accept().unwrap();
            let mut got: Vec<u8> = Vec::new();
            let mut buf = [0u8; 4096];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            let body = r#"{"approvals": []}"#;
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            String::from_utf8_lossy(&got).to_lowercase()
        });
        let root_url = format!("http://127.0.0.1:{root_port}");
        let (code, out, err) = ctl(nowhere.path(), &["approvals", "list", "--url", &root_url]);
        assert_eq!((code, out.trim()), (Some(0), "no pending approvals"), "{err}");
        let request = served.join().unwrap();
        assert!(
            request.starts_with("get /api/approvals")
                && request.contains(&format!("authorization: bearer {token}")),
            "{request}"
        );
    });
    stack.stop();
}

/// The requester is the agent, not the human who owns its token: the owner may approve
/// their own agent's request from a session (a one-admin host works with one account),
/// never with an agent-scoped token — the requesting one or any other; with
/// `approvals.require_other_admin` only another admin may. The audit trail says which
/// rule applied.
#[test]
fn the_owner_approves_their_agents_request_and_the_agent_never_does() {
    for four_eyes in [false, true] {
        let mut builder = StackBuilder::new();
        if four_eyes {
            builder = builder.env("ARGOS_APPROVALS__REQUIRE_OTHER_ADMIN", "true");
        }
        let stack = builder.start();
        let mut admin = stack.admin();
        let mut agent = admin.token(&["agent"]);
        let mut both = admin.token(&["agent", "approve"]);
        let r = agent.post(
            "/api/agent/run",
            json!({"command": "echo owner-approved; true", "purpose": "mine"}),
        );
        let id = r.json()["approval"]["id"].as_str().unwrap().to_string();
        let decide = |w: &mut Web| {
            w.post(
                &format!("/api/approvals/{id}/decision"),
                json!({"decision": "approve"}),
            )
        };
        // The requesting token lacks the approve scope; one that has it next to agent is
        // still an agent's.
        let r = decide(&mut agent);
        assert_eq!(r.status, 403, "{r:?}");
        let r = decide(&mut both);
        assert_eq!(r.status, 403, "{r:?}");
        assert!(r.message().contains("agent scope"), "{r:?}");
        let r = decide(&mut admin);
        let rule = |admin: &mut Web| {
            admin
                .get(&format!("/api/audit?subject={id}&kind=approval.decided"))
                .json()["records"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["source"] == "execd")
                .map(|r| r["detail"]["rule"].as_str().unwrap_or("").to_string())
                .unwrap_or_default()
        };
        if !four_eyes {
            assert_eq!(r.status, 200, "the owner approves from a session: {r:?}");
            assert!(
                rule(&mut admin).starts_with("the owner decided"),
                "{}",
                rule(&mut admin)
            );
        } else {
            assert_eq!(r.status, 403, "{r:?}");
            assert!(r.message().contains("own request"), "{r:?}");
            let r = admin.post(
                "/api/users",
                json!({"name": "carol", "password": argos_tests::ADMIN_PASSWORD, "role": "admin"}),
            );
            assert_eq!(r.status, 201, "{r:?}");
            let mut carol = Web::new(stack.listen);
            let r = carol.post(
                "/api/login",
                json!({"name": "carol", "password": argos_tests::ADMIN_PASSWORD}),
            );
            assert_eq!(r.status, 200, "{r:?}");
            let r = decide(&mut carol);
            assert_eq!(r.status, 200, "another admin approves: {r:?}");
            assert!(
                rule(&mut admin).contains("approvals.require_other_admin"),
                "{}",
                rule(&mut admin)
            );
        }
        stack.stop();
    }
}
