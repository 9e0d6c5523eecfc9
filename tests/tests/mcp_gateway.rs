//! MCP servers as an admin manages them through the gateway: stdio servers added over the
//! API (the launch registered with execd in the admin's name), called through the gateway
//! and mcpd's gRPC, back after kill -9 of mcpd and of execd; and a server that asks for
//! OAuth 2.1, authorized by an admin and its tokens refreshed; and two tools whose
//! qualified names once met, each listed and called under its own through `/mcp`. The
//! real peers are the npm reference server, PyPI `mcp-server-time` and the Python SDK's
//! servers (tests/mcp/).

use std::time::{Duration, Instant};

use argos_proto::mcp::v1 as pb;
use argos_proto::mcp::v1::mcp_client::McpClient;
use argos_tests::mcp_client::{client, names, text, token};
use argos_tests::mcp_peer::{everything_copy, files, readable_copy, texts};
use argos_tests::web::Web;
use argos_tests::{StackBuilder, require_root};
use serde_json::json;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Waits until the gateway reports `id` in `state`; answers the server as reported.
fn wait_web_state(
    stack: &argos_tests::Stack,
    admin: &mut Web,
    id: &str,
    state: &str,
    within: Duration,
) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let r = admin.get(&format!("/api/mcp/servers/{id}"));
        assert_eq!(r.status, 200, "{r:?}");
        let s = r.json()["server"].clone();
        if s["state"] == state {
            return s;
        }
        if Instant::now() >= deadline {
            let log = stack.log();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            panic!(
                "{id} is {} ({}), not {state}, after {within:?}; the stack's last lines:\n{}",
                s["state"],
                s["error"],
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn registrations(stack: &argos_tests::Stack) -> Vec<argos_proto::exec::v1::McpRegistration> {
    rt().block_on(async { stack.exec().list_mcp_servers().await })
        .unwrap()
}

/// The way an admin adds stdio servers: through the gateway, which registers the exact
/// launch with execd in the admin's name and then configures mcpd. The npm reference
/// server and PyPI `mcp-server-time` (Python, `python3 -m mcp_server_time`), both
/// contained; their tools listed and called through the gateway and mcpd's gRPC; a
/// refused field leaves nothing registered; a secret is in no answer and no audit line;
/// a plain user and a read-only token are refused; after kill -9 of mcpd, then of execd,
/// every enabled server is connected again; removing a server forgets its registration.
#[test]
fn stdio_servers_are_added_through_the_gateway_and_come_back_after_a_crash() {
    require_root("stdio MCP servers (execd contains them)");
    let time_dir = argos_tests::workspace_root().join("target/tools/mcp-time");
    assert!(
        time_dir.join("mcp_server_time").is_dir(),
        "mcp-server-time is missing: run scripts/install-test-tools"
    );
    let mut stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let (_everything, entry) = everything_copy();
    let time = readable_copy(&time_dir);
    let time_cwd = time.path().join("mcp-time");
    let secret = "hunter2-never-shown";

    // A field the gateway refuses: named, and nothing registered at execd.
    let r = admin.post(
        "/api/mcp/servers",
        json!({"id": "everything", "name": "Everything", "stdio": {"command": "/usr/bin/node",
               "args": [entry, "stdio"], "env": {"LD_PRELOAD": {"value": "/var/tmp/x.so"}}}}),
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.text.contains("stdio.env"), "{r:?}");
    assert!(registrations(&stack).is_empty());

    let r = admin.post(
        "/api/mcp/servers",
        json!({"id": "everything", "name": "Everything", "stdio": {"command": "/usr/bin/node",
               "args": [entry, "stdio"], "env": {"API_TOKEN": {"value": secret, "secret": true}}},
               "connect_timeout_ms": 40000}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let s = r.json()["server"].clone();
    assert_eq!(s["transport"], "stdio");
    assert_eq!(
        s["stdio"]["env"]["API_TOKEN"],
        json!({"value": "", "secret": true})
    );
    // execd names the peer it took the principal from, and the principal.
    assert_eq!(
        s["registration"]["registered_by"], "gateway:root-admin",
        "{s}"
    );
    let digest = s["registration"]["digest"].as_str().unwrap().to_string();
    assert_eq!(digest.len(), 64);
    // The same id again: a conflict, and the registration is untouched.
    let r = admin.post(
        "/api/mcp/servers",
        json!({"id": "everything", "name": "Again", "stdio": {"command": "/bin/sh"}}),
    );
    assert_eq!(r.status, 409, "{r:?}");
    let regs = registrations(&stack);
    assert_eq!(regs.len(), 1, "{regs:?}");
    assert_eq!(regs[0].digest, digest);
    assert_eq!(regs[0].launch.as_ref().unwrap().env_keys, ["API_TOKEN"]);

    let r = admin.post(
        "/api/mcp/servers",
        json!({"id": "time", "name": "Time", "stdio": {"command": "/usr/bin/python3",
               "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
               "cwd": time_cwd.to_str().unwrap()}, "connect_timeout_ms": 60000}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    for id in ["everything", "time"] {
        wait_web_state(&stack, &mut admin, id, "connected", Duration::from_secs(60));
    }

    // Tools listed and called through the gateway; the result marked untrusted.
    let tools = admin.get("/api/mcp/tools").json();
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["qualified_name"].as_str().unwrap())
        .collect();
    for want in [
        "mcp__everything__echo",
        "mcp__time__get_current_time",
        "mcp__time__convert_time",
    ] {
        assert!(names.contains(&want), "{want} missing: {names:?}");
    }
    let r = admin.post(
        "/api/mcp/tools/mcp__everything__echo/call",
        json!({"arguments": {"message": "through the gateway"}}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let result = r.json()["result"].clone();
    assert_eq!(result["untrusted"], true);
    assert_eq!(result["server"], "everything");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("through the gateway"),
        "{result}"
    );
    let r = admin.post(
        "/api/mcp/tools/mcp__time__get_current_time/call",
        json!({"arguments": {"timezone": "Europe/Paris"}}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let text = r.json()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("Europe/Paris"), "{text}");
    // And through mcpd's gRPC, as an operator at the console.
    rt().block_on(async {
        let mut c = McpClient::new(argos_tests::channel(&stack.socket("mcpd")));
        let r = c
            .call_tool(pb::CallToolRequest {
                qualified_name: "mcp__time__convert_time".into(),
                arguments_json: r#"{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}"#.into(),
                pinned_sha256: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(texts(&r).contains("Asia/Tokyo"), "{r:?}");
        assert!(r.untrusted);
    });

    // A server that dies at start: an error with its exit, the others unaffected, and no
    // launch of it left running.
    let r = admin.post(
        "/api/mcp/servers",
        json!({"id": "crash", "name": "Crash", "stdio": {"command": "/bin/sh",
               "args": ["-c", "echo about to fail >&2; exit 3"]}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let crashed = wait_web_state(
        &stack,
        &mut admin,
        "crash",
        "error",
        Duration::from_secs(30),
    );
    assert!(
        crashed["error"].as_str().unwrap().contains("handshake"),
        "{crashed}"
    );
    let log = admin.get("/api/mcp/servers/crash/log").json();
    assert!(
        log["log"].as_str().unwrap().contains("about to fail"),
        "{log}"
    );
    for id in ["everything", "time"] {
        assert_eq!(
            admin.get(&format!("/api/mcp/servers/{id}")).json()["server"]["state"],
            "connected"
        );
    }
    let r = admin.call("DELETE", "/api/mcp/servers/crash", None, &[]);
    assert_eq!(r.status, 204, "{r:?}");

    // A disabled tool: hidden from callers, refused when called, shown to the admin.
    let r = admin.call(
        "PUT",
        "/api/mcp/servers/everything/disabled_tools",
        Some(&json!({"tools": ["echo"]})),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let r = admin.post(
        "/api/mcp/tools/mcp__everything__echo/call",
        json!({"arguments": {"message": "x"}}),
    );
    assert_eq!(r.status, 409, "{r:?}");
    let callable = admin.get("/api/mcp/tools?server=everything").text;
    assert!(!callable.contains("mcp__everything__echo"), "{callable}");
    let all = admin
        .get("/api/mcp/tools?server=everything&all=true")
        .json();
    let echo = all["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap()
        .clone();
    assert_eq!(echo["state"], "disabled");

    // Not for a plain user, nor for a token without `exec`.
    assert_eq!(bob.get("/api/mcp/servers").status, 403);
    let r = admin.post("/api/tokens", json!({"name": "ro", "scopes": ["read"]}));
    let mut ro = Web::with_bearer(stack.listen, r.json()["token"].as_str().unwrap());
    assert_eq!(ro.get("/api/mcp/servers").status, 200);
    let r = ro.post(
        "/api/mcp/tools/mcp__time__get_current_time/call",
        json!({"arguments": {"timezone": "UTC"}}),
    );
    assert_eq!(r.status, 403, "{r:?}");
    let r = ro.post(
        "/api/mcp/servers",
        json!({"id": "sneaky", "name": "S", "stdio": {"command": "/bin/sh"}}),
    );
    assert_eq!(r.status, 403, "{r:?}");

    // The secret: in no answer, no audit line; the additions are audited in the admin's name.
    for path in [
        "/api/mcp/servers",
        "/api/mcp/servers/everything",
        "/api/audit?limit=500",
    ] {
        let text = admin.get(path).text;
        assert!(!text.contains(secret), "{path} shows the secret");
    }
    let audit = admin.get("/api/audit?limit=500").text;
    assert!(audit.contains("mcp.server.add"), "{audit}");

    // kill -9 of mcpd, then of execd: after each restart every enabled server is back.
    for daemon in ["mcpd", "execd"] {
        stack.crash_and_restart(daemon);
        for id in ["everything", "time"] {
            wait_web_state(&stack, &mut admin, id, "connected", Duration::from_secs(90));
        }
        let r = admin.post(
            "/api/mcp/tools/mcp__time__get_current_time/call",
            json!({"arguments": {"timezone": "UTC"}}),
        );
        assert_eq!(r.status, 200, "after kill -9 of {daemon}: {r:?}");
        let running: Vec<_> = rt()
            .block_on(async {
                stack
                    .exec()
                    .list(argos_proto::exec::v1::ListRequest {
                        status: argos_proto::exec::v1::ExecutionStatus::Running as i32,
                        ..Default::default()
                    })
                    .await
            })
            .unwrap()
            .executions
            .into_iter()
            .filter(|e| e.profile.starts_with("mcp-server"))
            .collect();
        assert_eq!(
            running.len(),
            2,
            "one launch per server after kill -9 of {daemon}: {running:?}"
        );
    }

    // Changing a server registers its new launch; removing one forgets it.
    let r = admin.call(
        "PUT",
        "/api/mcp/servers/time",
        Some(
            &json!({"name": "Time (Tokyo)", "stdio": {"command": "/usr/bin/python3",
               "args": ["-m", "mcp_server_time", "--local-timezone", "Asia/Tokyo"],
               "cwd": time_cwd.to_str().unwrap()}, "connect_timeout_ms": 60000}),
        ),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let time_reg = registrations(&stack)
        .into_iter()
        .find(|r| r.server_id == "time")
        .unwrap();
    assert!(
        time_reg
            .launch
            .unwrap()
            .args
            .contains(&"Asia/Tokyo".to_string())
    );
    wait_web_state(
        &stack,
        &mut admin,
        "time",
        "connected",
        Duration::from_secs(60),
    );
    let r = admin.call("DELETE", "/api/mcp/servers/everything", None, &[]);
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(admin.get("/api/mcp/servers/everything").status, 404);
    let left: Vec<String> = registrations(&stack)
        .into_iter()
        .map(|r| r.server_id)
        .collect();
    assert_eq!(left, ["time"]);
    stack.stop();
}

/// Whether `bytes` hold a token of tests/mcp/oauth.py (`at-` or `rt-` and 32 URL-safe
/// characters) in clear.
fn holds_a_token(bytes: &[u8]) -> bool {
    let urlsafe = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_';
    bytes
        .windows(35)
        .any(|w| (w.starts_with(b"at-") || w.starts_with(b"rt-")) && w[3..].iter().all(urlsafe))
}

/// A Streamable HTTP server that asks for OAuth 2.1 (tests/mcp/oauth.py: the Python SDK's
/// resource server and authorization server, which approves at once): it waits in
/// `needs_auth`; an admin's Authorize gives the authorization server's URL (PKCE, the
/// gateway's callback); the browser's trip there comes back to the callback with no
/// session, and the state alone (single use) finishes it; the server connects and its
/// tool answers; the access token (4 s) is refreshed when it ends; the tokens are in no
/// answer and no file in clear; after kill -9 of mcpd it connects again with the kept
/// credentials; a forged state is refused.
#[test]
fn a_server_that_asks_for_oauth_is_authorized_by_an_admin_and_its_tokens_refreshed() {
    require_root("mcpd's broker (the stack runs privilege-separated)");
    let mut stack = StackBuilder::new().start();
    let mut admin = stack.admin();
    let port = argos_tests::free_port();
    let mut server = argos_tests::mcp_peer::python("oauth.py", port, &[("OAUTH_TTL", "4")]);
    let r = admin.post(
        "/api/mcp/servers",
        json!({"id": "guarded", "name": "Guarded", "local": true,
               "streamable_http": {"url": format!("http://127.0.0.1:{port}/mcp")}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    wait_web_state(
        &stack,
        &mut admin,
        "guarded",
        "needs_auth",
        Duration::from_secs(20),
    );

    let r = admin.post("/api/mcp/servers/guarded/authorize", json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    let url = r.json()["url"].as_str().unwrap().to_string();
    let as_origin = format!("http://127.0.0.1:{port}");
    assert!(url.starts_with(&format!("{as_origin}/authorize?")), "{url}");
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    let callback = format!("http://{}/api/mcp/oauth/callback", stack.listen);
    let encoded: String = url::form_urlencoded::byte_serialize(callback.as_bytes()).collect();
    assert!(url.contains(&format!("redirect_uri={encoded}")), "{url}");

    // The browser's trip: the authorization server approves and sends it back.
    let mut browser = Web::new(([127, 0, 0, 1], port).into());
    let r = browser.get(url.strip_prefix(&as_origin).unwrap());
    assert_eq!(r.status, 302, "{r:?}");
    let back = r.header("location").unwrap().to_string();
    assert!(back.starts_with(&format!("{callback}?")), "{back}");
    let back = back
        .strip_prefix(&format!("http://{}", stack.listen))
        .unwrap();
    // No session comes with a cross-site redirect (SameSite=Strict): the state does it.
    let mut anon = Web::new(stack.listen);
    let r = anon.get(back);
    assert_eq!(r.status, 303, "{r:?}");
    assert_eq!(r.header("location"), Some("/#/mcp/guarded"));
    let r = anon.get(back);
    assert_eq!(r.status, 404, "a state is used once: {r:?}");
    let r = anon.get("/api/mcp/oauth/callback?code=x&state=forged");
    assert_eq!(r.status, 404, "{r:?}");
    let r = anon.get("/api/mcp/oauth/callback?error=access_denied&state=forged");
    assert_eq!(
        (r.status, r.code()),
        (409, "not_authorized".into()),
        "{r:?}"
    );

    wait_web_state(
        &stack,
        &mut admin,
        "guarded",
        "connected",
        Duration::from_secs(20),
    );
    let whoami = |admin: &mut Web| {
        let r = admin.post("/api/mcp/tools/mcp__guarded__whoami/call", json!({}));
        assert_eq!(r.status, 200, "{r:?}");
        r.json()["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let first = whoami(&mut admin);
    assert!(first.contains("tokens issued so far: 1"), "{first}");
    // The access token lives 4 s: the call after it carries a refreshed one.
    std::thread::sleep(Duration::from_secs(5));
    let later = whoami(&mut admin);
    assert!(later.contains("tokens issued so far: 2"), "{later}");

    // The tokens: in no answer, no log line, no file of the stack in clear.
    for path in [
        "/api/mcp/servers",
        "/api/mcp/servers/guarded",
        "/api/audit?limit=500",
    ] {
        assert!(!holds_a_token(admin.get(path).text.as_bytes()), "{path}");
    }
    assert!(!holds_a_token(stack.log().as_bytes()));
    for f in files(&stack.root().join("state")) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert!(!holds_a_token(&bytes), "{} holds a token", f.display());
    }

    // kill -9 of mcpd: the credentials were kept, no new authorization is needed.
    stack.crash_and_restart("mcpd");
    wait_web_state(
        &stack,
        &mut admin,
        "guarded",
        "connected",
        Duration::from_secs(20),
    );
    assert!(whoami(&mut admin).contains("client "));

    // Pointed at another server (one that would take any token the same authorization
    // server issued): the credentials stay behind, and it waits for its own authorization.
    let other_port = argos_tests::free_port();
    let mut other = argos_tests::mcp_peer::python("oauth.py", other_port, &[]);
    let r = admin.call(
        "PUT",
        "/api/mcp/servers/guarded",
        Some(&json!({"name": "Guarded", "local": true,
               "streamable_http": {"url": format!("http://127.0.0.1:{other_port}/mcp")}})),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    wait_web_state(
        &stack,
        &mut admin,
        "guarded",
        "needs_auth",
        Duration::from_secs(20),
    );
    let _ = other.kill();
    let _ = other.wait();
    let _ = server.kill();
    let _ = server.wait();
    stack.stop();
}

/// Two tools of one server whose qualified names once met (`tests/mcp/collide.py`):
/// `get.time`, which only reads, and a tool named exactly as `get.time`'s changed name
/// (`get_time_` and its hash), which writes. Each has a qualified name of its own; a plain
/// user's agent is offered only the one that reads and each call reaches the tool listed
/// under its name; disabling either by its upstream name leaves the other callable; and a
/// call naming a pin that is not the one in force is refused by mcpd.
#[test]
fn two_tools_of_one_server_never_share_a_qualified_name() {
    require_root("mcpd's broker (the stack runs privilege-separated)");
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let port = argos_tests::free_port();
    let mut server = argos_tests::mcp_peer::python("collide.py", port, &[]);
    let r = admin.post(
        "/api/mcp/servers",
        json!({"id": "collide", "name": "Collide", "local": true,
               "streamable_http": {"url": format!("http://127.0.0.1:{port}/mcp")}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    wait_web_state(
        &stack,
        &mut admin,
        "collide",
        "connected",
        Duration::from_secs(30),
    );
    let listed = admin.get("/api/mcp/tools?server=collide").json();
    let tools = listed["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), 2, "{listed}");
    let by_name = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    let imitation: String = {
        use sha2::Digest;
        let h = sha2::Sha256::digest(b"get.time");
        let hex = hex::encode(h);
        format!("get_time_{}", &hex[..10])
    };
    let (reader, writer) = (by_name("get.time"), by_name(&imitation));
    let reader_q = reader["qualified_name"].as_str().unwrap().to_string();
    let writer_q = writer["qualified_name"].as_str().unwrap().to_string();
    // The attack's ground: `get.time`'s name is what the other tool is called.
    assert_eq!(reader_q, format!("mcp__collide__{imitation}"));
    assert_ne!(writer_q, reader_q);
    assert!(
        writer_q.starts_with(&format!("mcp__collide__{imitation}_")),
        "{writer_q}"
    );
    assert!(writer_q.len() <= 64, "{writer_q}");

    let url = format!("http://{}/mcp", stack.listen);
    let answered = |tool: &str| format!("{tool} answered");
    // A plain user's agent: only the tool that reads, and it reaches that tool.
    let bobs = token(&mut bob, "bob-agent", &["mcp"]);
    let v = client(
        &url,
        &bobs,
        "legacy",
        &[
            (reader_q.as_str(), json!({})),
            (writer_q.as_str(), json!({})),
        ],
    );
    let listed = names(&v);
    assert!(listed.contains(&reader_q), "{listed:?}");
    assert!(!listed.contains(&writer_q), "{listed:?}");
    assert_eq!(text(&v["calls"][0]), answered("get.time"), "{v}");
    assert_eq!(v["calls"][1]["isError"], true, "{v}");
    assert!(text(&v["calls"][1]).contains("no such tool for you"), "{v}");
    // An admin's agent: both, each call to its own tool.
    let admins = token(&mut admin, "agent", &["mcp"]);
    let both = [
        (reader_q.as_str(), json!({})),
        (writer_q.as_str(), json!({})),
    ];
    let v = client(&url, &admins, "2026-07-28", &both);
    assert_eq!(text(&v["calls"][0]), answered("get.time"), "{v}");
    assert_eq!(text(&v["calls"][1]), answered(&imitation), "{v}");

    // Disabling one by its upstream name refuses that one and leaves the other callable
    // (the calls: 0 the reader, 1 the writer).
    for (disabled, shut, open, open_tool) in [
        ("get.time", 0usize, &writer_q, imitation.as_str()),
        (imitation.as_str(), 1, &reader_q, "get.time"),
    ] {
        let r = admin.call(
            "PUT",
            "/api/mcp/servers/collide/disabled_tools",
            Some(&json!({"tools": [disabled]})),
            &[],
        );
        assert_eq!(r.status, 200, "{r:?}");
        let v = client(&url, &admins, "legacy", &both);
        let (refused, called) = (&v["calls"][shut], &v["calls"][1 - shut]);
        assert_eq!(refused["isError"], true, "{disabled}: {v}");
        assert!(text(refused).contains("disabled"), "{disabled}: {v}");
        assert_eq!(text(called), answered(open_tool), "{disabled}: {v}");
        let listed = names(&v);
        let of_collide: Vec<&String> = listed
            .iter()
            .filter(|n| n.starts_with("mcp__collide__"))
            .collect();
        assert_eq!(of_collide, [open], "{disabled}");
    }

    // A call bound to a pin: the one in force calls, any other is refused.
    let r = admin.call(
        "PUT",
        "/api/mcp/servers/collide/disabled_tools",
        Some(&json!({"tools": []})),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    rt().block_on(async {
        let mut c = McpClient::new(argos_tests::channel(&stack.socket("mcpd")));
        let call = |pin: &str| pb::CallToolRequest {
            qualified_name: reader_q.clone(),
            arguments_json: String::new(),
            pinned_sha256: pin.into(),
        };
        let pin = reader["pinned_sha256"].as_str().unwrap();
        let r = c.call_tool(call(pin)).await.unwrap().into_inner();
        assert_eq!(texts(&r), answered("get.time"), "{r:?}");
        let other = writer["pinned_sha256"].as_str().unwrap();
        assert_ne!(other, pin);
        let e = c.call_tool(call(other)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains("pin"), "{e:?}");
    });
    let _ = server.kill();
    let _ = server.wait();
    stack.stop();
}
