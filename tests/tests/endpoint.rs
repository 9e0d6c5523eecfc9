//! The gateway's MCP endpoint (`/mcp`) judged by a client nobody here wrote: the PyPI
//! `mcp` client (the Python SDK's `Client`, `tests/mcp/client.py`), in both protocol eras,
//! with an API token carrying the `mcp` scope.

use std::time::{Duration, Instant};

use argos_tests::mcp_client::{client, names, text, token};
use argos_tests::mcp_peer::Everything;
use argos_tests::web::Web;
use argos_tests::{StackBuilder, require_root};
use serde_json::{Value, json};

/// Tools listed and called by the PyPI client in both eras: `classify_command` explains a
/// command and runs nothing; a brokered server-everything tool answers, marked untrusted;
/// a plain user sees only brokered tools that say they only read.
#[test]
fn the_pypi_client_lists_and_calls_tools_in_both_eras() {
    require_root("the stack runs privilege-separated");
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let _everything = Everything::brokered(&mut admin);
    let url = format!("http://{}/mcp", stack.listen);
    let admins = token(&mut admin, "agent", &["mcp"]);
    for mode in ["legacy", "2026-07-28"] {
        let v = client(
            &url,
            &admins,
            mode,
            &[
                (
                    "classify_command",
                    json!({"command": "rm -rf /var/lib/important"}),
                ),
                ("mcp__everything__echo", json!({"message": "through Argos"})),
            ],
        );
        let want = if mode == "legacy" { "2025-11-25" } else { mode };
        assert_eq!(v["protocol_version"], want, "{v}");
        let listed = names(&v);
        for t in [
            "classify_command",
            "mcp__everything__echo",
            "mcp__everything__gzip-file-as-resource",
        ] {
            assert!(listed.iter().any(|n| n == t), "{t} missing in {listed:?}");
        }
        let classified: Value = serde_json::from_str(&text(&v["calls"][0])).unwrap();
        assert_eq!(classified["class"], "destructive", "{classified}");
        assert_eq!(classified["needs_approval"], true, "{classified}");
        let echo = &v["calls"][1];
        assert!(text(echo).contains("through Argos"), "{echo}");
        assert_eq!(echo["_meta"]["argos/untrusted"], true, "{echo}");
        assert_eq!(echo["_meta"]["argos/server"], "everything", "{echo}");
    }
    // A plain user's agent: classify, and the brokered tools that only read.
    let bobs = token(&mut bob, "bob-agent", &["mcp"]);
    let v = client(
        &url,
        &bobs,
        "legacy",
        &[("mcp__everything__gzip-file-as-resource", json!({}))],
    );
    let listed = names(&v);
    assert!(
        listed.contains(&"classify_command".to_string()),
        "{listed:?}"
    );
    assert!(
        listed.contains(&"mcp__everything__echo".to_string()),
        "{listed:?}"
    );
    assert!(
        !listed
            .iter()
            .any(|n| n == "mcp__everything__gzip-file-as-resource"),
        "not read-only, so not for a user: {listed:?}"
    );
    assert_eq!(v["calls"][0]["isError"], true, "{v}");
    assert!(text(&v["calls"][0]).contains("no such tool for you"), "{v}");
    stack.stop();
}

/// `run` through the risk gate, from the PyPI client: a read-only inspection answers the
/// host's output at once; a change answers "approval required" with the approval, and once
/// an admin approves it through the API it has run on the host, as `get_execution_status`
/// says; a plain user's agent runs in the sandbox and nowhere else.
#[test]
fn run_inspects_at_once_and_a_change_waits_for_an_approval() {
    require_root("the stack runs privilege-separated; an approved change runs as root");
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let url = format!("http://{}/mcp", stack.listen);
    let agent = token(&mut admin, "agent", &["mcp"]);
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap();
    let mark = format!("/var/tmp/argos-mcp-run-{}", std::process::id());
    let _ = std::fs::remove_file(&mark);
    let v = client(
        &url,
        &agent,
        "2026-07-28",
        &[
            (
                "run",
                json!({"command": "cat /etc/hostname", "purpose": "which host is this"}),
            ),
            (
                "run",
                json!({"command": format!("touch {mark}"), "purpose": "leave a mark"}),
            ),
        ],
    );
    for t in ["run", "get_execution_status", "cancel_execution"] {
        assert!(names(&v).iter().any(|n| n == t), "{t}: {v}");
    }
    let read: Value = serde_json::from_str(&text(&v["calls"][0])).unwrap();
    assert_eq!(read["status"], "succeeded", "{read}");
    assert_eq!(read["profile"], "inspect", "{read}");
    assert_eq!(read["stdout"]["head"], hostname.as_str(), "{read}");
    let change = text(&v["calls"][1]);
    assert!(change.starts_with("approval required\n"), "{change}");
    let change: Value = serde_json::from_str(change.split_once('\n').unwrap().1).unwrap();
    assert_eq!(change["approval"]["state"], "pending", "{change}");
    assert_eq!(change["approval"]["place"], "host", "{change}");
    assert!(
        !std::path::Path::new(&mark).exists(),
        "it ran before the approval"
    );
    let approval = change["approval"]["id"].as_str().unwrap();
    let execution = change["execution_id"].as_str().unwrap();
    let r = admin.post(
        &format!("/api/approvals/{approval}/decision"),
        json!({"decision": "approve"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = client(
            &url,
            &agent,
            "legacy",
            &[("get_execution_status", json!({"execution_id": execution}))],
        );
        let status: Value = serde_json::from_str(&text(&v["calls"][0])).unwrap();
        if status["status"] == "succeeded" {
            break;
        }
        assert!(Instant::now() < deadline, "{status}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        std::path::Path::new(&mark).exists(),
        "the approved change ran on the host"
    );
    let _ = std::fs::remove_file(&mark);

    // A plain user's agent: the sandbox, at once; the host, never.
    let bobs = token(&mut bob, "bob-agent", &["mcp"]);
    let v = client(
        &url,
        &bobs,
        "legacy",
        &[
            (
                "run",
                json!({"command": "echo in the sandbox", "purpose": "try"}),
            ),
            (
                "run",
                json!({"command": "id", "purpose": "try", "place": "host"}),
            ),
            ("get_execution_status", json!({"execution_id": execution})),
        ],
    );
    let sandboxed: Value = serde_json::from_str(&text(&v["calls"][0])).unwrap();
    assert_eq!(sandboxed["profile"], "agent", "{sandboxed}");
    assert_eq!(
        sandboxed["stdout"]["head"], "in the sandbox\n",
        "{sandboxed}"
    );
    assert_eq!(v["calls"][1]["isError"], true, "{v}");
    assert!(text(&v["calls"][1]).contains("sandbox only"), "{v}");
    assert_eq!(v["calls"][2]["isError"], true, "another's execution: {v}");
    // An admin's agent reads and cancels only what it started, not a user's (as on the API).
    let bobs_run = sandboxed["execution_id"].as_str().unwrap();
    let v = client(
        &url,
        &agent,
        "legacy",
        &[
            ("get_execution_status", json!({"execution_id": bobs_run})),
            ("cancel_execution", json!({"execution_id": bobs_run})),
        ],
    );
    for c in 0..2 {
        assert_eq!(v["calls"][c]["isError"], true, "{v}");
        assert!(text(&v["calls"][c]).contains("no execution"), "{v}");
    }
    stack.stop();
}

/// Whether another user's execution existed was told by `/mcp`'s answer: "no execution X"
/// for another's, execd's "no launch X" for none. Asked for another user's real id and
/// for a made-up one, every edge answers the same bytes but for the id: the API's
/// execution and its kill, a job, its cancel, relaunch and output; at `/mcp` the status
/// and cancel tools, the job tools and the execution's resource.
#[test]
fn another_users_ids_are_answered_as_ids_that_do_not_exist() {
    require_root("the stack runs privilege-separated");
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let made_up = "01900000-0000-7000-8000-000000000000";
    // The same answer for `real` and for the made-up id, each id written as ID.
    let same = |what: &str, real_id: &str, real: String, none: String| {
        assert_eq!(
            real.replace(real_id, "ID"),
            none.replace(made_up, "ID"),
            "{what}: another's and none differ"
        );
    };
    let reply = |r: argos_tests::web::Reply| format!("{} {}", r.status, r.text);

    // A user asks the API for the admin's execution and job.
    let r = admin.post("/api/shell/exec", json!({"command": "echo mine"}));
    assert_eq!(r.status, 200, "{r:?}");
    let admins_run = r.json()["execution"]["id"].as_str().unwrap().to_string();
    let r = admin.post(
        "/api/jobs",
        json!({"command": "echo mine", "place": "sandbox"}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let admins_job = r.json()["job"]["id"].as_str().unwrap().to_string();
    for (method, path, body) in [
        ("GET", "/api/executions/{}", None),
        ("GET", "/api/executions/{}?wait_ms=1000", None),
        ("POST", "/api/executions/{}/kill", Some(json!({}))),
        ("GET", "/api/jobs/{}", None),
        ("POST", "/api/jobs/{}/cancel", Some(json!({}))),
        (
            "POST",
            "/api/jobs/{}/relaunch",
            Some(json!({"generation": 1})),
        ),
        ("GET", "/api/jobs/{}/output", None),
    ] {
        let real_id = if path.contains("/jobs/") {
            &admins_job
        } else {
            &admins_run
        };
        let real = bob.call(method, &path.replace("{}", real_id), body.as_ref(), &[]);
        assert_eq!(real.status, 404, "{method} {path}: {real:?}");
        let none = bob.call(method, &path.replace("{}", made_up), body.as_ref(), &[]);
        same(
            &format!("{method} {path}"),
            real_id,
            reply(real),
            reply(none),
        );
    }

    // The admin's agent asks `/mcp` for the user's.
    let r = bob.post(
        "/api/agent/run",
        json!({"command": "echo mine", "place": "sandbox"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let bobs_run = r.json()["execution"]["id"].as_str().unwrap().to_string();
    let r = bob.post(
        "/api/jobs",
        json!({"command": "echo mine", "place": "sandbox"}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let bobs_job = r.json()["job"]["id"].as_str().unwrap().to_string();
    let url = format!("http://{}/mcp", stack.listen);
    let agent = token(&mut admin, "nosy", &["mcp"]);
    let asks = [
        ("get_execution_status", "execution_id", &bobs_run),
        ("cancel_execution", "execution_id", &bobs_run),
        ("get_job", "job_id", &bobs_job),
        ("cancel_job", "job_id", &bobs_job),
    ];
    let calls: Vec<(&str, Value)> = asks
        .iter()
        .flat_map(|(tool, arg, real)| {
            [
                (*tool, json!({*arg: real})),
                (*tool, json!({*arg: made_up})),
            ]
        })
        .collect();
    let v = client(&url, &agent, "legacy", &calls);
    for (i, (tool, _, real_id)) in asks.iter().enumerate() {
        let (real, none) = (&v["calls"][2 * i], &v["calls"][2 * i + 1]);
        assert_eq!(real["isError"], true, "{tool}: {real}");
        same(tool, real_id, real.to_string(), none.to_string());
    }
    let read = |uri: String| {
        let out = std::process::Command::new(
            argos_tests::workspace_root().join("target/tools/mcp-py/bin/python"),
        )
        .arg("-c")
        .arg(include_str!("../mcp/read.py"))
        .args([&url, &agent, &uri])
        .output()
        .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let real = read(format!("argos://executions/{bobs_run}"));
    assert!(real.starts_with("error: "), "{real}");
    let none = read(format!("argos://executions/{made_up}"));
    same("the execution's resource", &bobs_run, real, none);
    stack.stop();
}

/// The MCP authorization spec's answers: no token → 401 with a `WWW-Authenticate` naming
/// the resource metadata (which says the scope to ask for); an unknown token → 401
/// `invalid_token`; a token without `mcp` → 403 `insufficient_scope`; a session cookie is
/// no MCP credential; another site's page → 403.
#[test]
fn the_endpoint_answers_as_the_mcp_authorization_spec_says() {
    require_root("the stack runs privilege-separated");
    let stack = StackBuilder::new().start();
    let mut admin = stack.admin();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}});
    let accept = ("accept", "application/json, text/event-stream");
    let mut anon = Web::new(stack.listen);
    let r = anon.call("POST", "/mcp", Some(&init), &[accept]);
    assert_eq!(r.status, 401, "{r:?}");
    let challenge = r.header("www-authenticate").unwrap().to_string();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    let meta = format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        stack.listen
    );
    assert!(
        challenge.contains(&format!("resource_metadata=\"{meta}\"")),
        "{challenge}"
    );
    let doc = anon.get("/.well-known/oauth-protected-resource/mcp").json();
    assert_eq!(doc["resource"], format!("http://{}/mcp", stack.listen));
    assert_eq!(doc["scopes_supported"], json!(["mcp"]));

    let mut forged = Web::with_bearer(stack.listen, "argos_not-a-token");
    let r = forged.call("POST", "/mcp", Some(&init), &[accept]);
    assert_eq!(r.status, 401, "{r:?}");
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .contains("invalid_token"),
        "{r:?}"
    );

    let read = token(&mut admin, "ro", &["read"]);
    let mut ro = Web::with_bearer(stack.listen, &read);
    let r = ro.call("POST", "/mcp", Some(&init), &[accept]);
    assert_eq!(r.status, 403, "{r:?}");
    assert!(
        r.header("www-authenticate")
            .unwrap()
            .contains("insufficient_scope"),
        "{r:?}"
    );

    // The admin's own browser session: not an MCP credential.
    let r = admin.call("POST", "/mcp", Some(&init), &[accept]);
    assert_eq!(r.status, 401, "{r:?}");

    let mcp = token(&mut admin, "agent", &["mcp"]);
    let mut agent = Web::with_bearer(stack.listen, &mcp);
    let r = agent.call(
        "POST",
        "/mcp",
        Some(&init),
        &[accept, ("origin", "http://evil.example")],
    );
    assert_eq!(r.status, 403, "{r:?}");
    let r = agent.call("POST", "/mcp", Some(&init), &[accept]);
    assert_eq!(r.status, 200, "{r:?}");
    // The session is this token's: another agent naming its id finds no such session.
    let session = r.header("mcp-session-id").unwrap().to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let other = token(&mut admin, "other-agent", &["mcp"]);
    let mut intruder = Web::with_bearer(stack.listen, &other);
    let with_session = [
        accept,
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let r = intruder.call("POST", "/mcp", Some(&initialized), &with_session);
    assert_eq!(r.status, 404, "another token used the session: {r:?}");
    let r = agent.call("POST", "/mcp", Some(&initialized), &with_session);
    assert_eq!(r.status, 202, "{r:?}");
    // Revoked, it is refused on its very next request (looked-up tokens are cached).
    let listed = admin.get("/api/tokens").json();
    let id = listed["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "agent")
        .unwrap()["id"]
        .clone();
    let r = admin.call("DELETE", &format!("/api/tokens/{id}"), None, &[]);
    assert_eq!(r.status, 204, "{r:?}");
    let r = agent.call("POST", "/mcp", Some(&init), &[accept]);
    assert_eq!(r.status, 401, "a revoked token still served: {r:?}");
    stack.stop();
}

/// A loopback HTTP server for `http_get`: `/page` is an HTML page with a script and a
/// style, `/away?to=URL` redirects there; anything else is a 404.
fn web_server() -> u16 {
    use std::io::{BufRead as _, BufReader, Write as _};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut line = String::new();
            let mut r = BufReader::new(s.try_clone().unwrap());
            if r.read_line(&mut line).is_err() {
                continue;
            }
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) <= 2 {
                    break;
                }
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            let answer = if path == "/page" {
                let body = "<html><head><title>Status</title><script>steal()</script>\
                    <style>p{}</style></head><body><h1>All systems</h1>\
                    <p>normal &amp; green</p></body></html>";
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else if let Some(to) = path.strip_prefix("/away?to=") {
                format!(
                    "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
            } else {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into()
            };
            let _ = s.write_all(answer.as_bytes());
        }
    });
    port
}

/// Waits until the activity log answers `want` entries for `query`.
fn activity(web: &mut Web, query: &str, want: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = web.get(&format!("/api/mcp/activity{query}"));
        assert_eq!(r.status, 200, "{r:?}");
        let v = r.json()["activity"].as_array().unwrap().clone();
        if v.len() >= want || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `http_get` reads an allowed page as its visible text, marked untrusted; loopback hosts
/// not on the allow list, metadata addresses and redirects to either are refused. Each
/// call is in the activity log, the refusals as errors.
#[test]
fn http_get_reads_allowed_pages_and_refuses_private_and_metadata_addresses() {
    require_root("the stack runs privilege-separated");
    let allowed = web_server();
    let other = web_server();
    let stack = StackBuilder::new()
        .env(
            "ARGOS_GATEWAY__HTTP_GET_ALLOW",
            &format!("127.0.0.1:{allowed}"),
        )
        .start();
    let mut admin = stack.admin();
    let url = format!("http://{}/mcp", stack.listen);
    let agent = token(&mut admin, "reader", &["mcp"]);
    let page = format!("http://127.0.0.1:{allowed}/page");
    let v = client(
        &url,
        &agent,
        "2026-07-28",
        &[
            ("http_get", json!({"url": page})),
            (
                "http_get",
                json!({"url": format!("http://127.0.0.1:{other}/page")}),
            ),
            (
                "http_get",
                json!({"url": "http://169.254.169.254/latest/meta-data/"}),
            ),
            (
                "http_get",
                json!({"url": format!("http://127.0.0.1:{allowed}/away?to=http://169.254.169.254/latest/")}),
            ),
            (
                "http_get",
                json!({"url": format!("http://127.0.0.1:{allowed}/away?to=http://127.0.0.1:{other}/page")}),
            ),
            ("http_get", json!({"url": "file:///etc/shadow"})),
        ],
    );
    let ok = &v["calls"][0];
    assert_ne!(ok["isError"], true, "{ok}");
    let body = text(ok);
    assert!(body.contains("All systems\nnormal & green"), "{body}");
    assert!(!body.contains("steal") && !body.contains("p{}"), "{body}");
    assert_eq!(ok["_meta"]["argos/untrusted"], true, "{ok}");
    for (i, why) in [
        (1, "loopback"),
        (2, "metadata"),
        (3, "metadata"),
        (4, "loopback"),
        (5, "scheme"),
    ] {
        let c = &v["calls"][i];
        assert_eq!(c["isError"], true, "{i}: {c}");
        assert!(text(c).starts_with("refused: "), "{i}: {c}");
        assert!(text(c).contains(why), "{i} is refused as {why}: {c}");
    }
    let log = activity(&mut admin, "?tool=http_get", 6);
    assert_eq!(log.len(), 6, "{log:?}");
    // Newest first.
    assert_eq!(log[5]["outcome"], "ok", "{log:?}");
    assert!(
        log[5]["input"].as_str().unwrap().contains("/page"),
        "{log:?}"
    );
    assert!(log[..5].iter().all(|e| e["outcome"] == "error"), "{log:?}");
    assert!(
        log.iter()
            .all(|e| e["token_name"] == "reader" && e["principal"] == "root-admin")
    );
    stack.stop();
}

/// Which tools an agent gets is the admin's setting: a role's grant, a user's own grant
/// instead, and a token limited to tools that only read. What is not granted is neither
/// listed nor callable, and the refusal is in the activity log; a user reads only their
/// own activity; a deleted user's grant is forgotten; the setting outlives a restart.
#[test]
fn an_admins_grants_decide_the_tools_and_a_read_only_token_only_reads() {
    require_root("the stack runs privilege-separated");
    let mut stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let url = format!("http://{}/mcp", stack.listen);
    let nothing = json!({"run_places": [], "brokered": "none", "http_get": false});
    let r = admin.call("PUT", "/api/mcp/access/roles/user", Some(&nothing), &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["roles"]["user"], nothing);
    assert_eq!(r.json()["updated_by"], "root-admin");
    let bobs = token(&mut bob, "bob-agent", &["mcp"]);
    let v = client(
        &url,
        &bobs,
        "legacy",
        &[("run", json!({"command": "echo hi", "purpose": "try"}))],
    );
    assert_eq!(
        names(&v),
        [
            "get_execution_status",
            "classify_command",
            "get_job",
            "list_jobs"
        ],
        "{v}"
    );
    assert_eq!(v["calls"][0]["isError"], true, "{v}");
    assert!(text(&v["calls"][0]).contains("not granted it"), "{v}");

    // Bob's own grant: the sandbox and read-only inspection of the host.
    let his =
        json!({"run_places": ["sandbox", "inspect"], "brokered": "read_only", "http_get": true});
    let r = admin.call("PUT", "/api/mcp/access/users/bob", Some(&his), &[]);
    assert_eq!(r.status, 200, "{r:?}");
    let v = client(
        &url,
        &bobs,
        "2026-07-28",
        &[
            (
                "run",
                json!({"command": "cat /etc/hostname", "purpose": "look", "place": "inspect"}),
            ),
            (
                "run",
                json!({"command": "id", "purpose": "try", "place": "host"}),
            ),
        ],
    );
    let run = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "run");
    assert!(
        run.is_some() && names(&v).contains(&"http_get".to_string()),
        "{v}"
    );
    let inspected: Value = serde_json::from_str(&text(&v["calls"][0])).unwrap();
    assert_eq!(inspected["profile"], "inspect", "{inspected}");
    assert_eq!(
        inspected["stdout"]["head"],
        std::fs::read_to_string("/etc/hostname").unwrap().as_str()
    );
    assert!(
        text(&v["calls"][1]).contains("sandbox or inspect only"),
        "{v}"
    );

    // An admin's token limited to reading: no run, no cancel, and a call is refused.
    let r = admin.post(
        "/api/tokens",
        json!({"name": "ro-agent", "scopes": ["mcp"], "mcp_read_only": true}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let ro = r.json()["token"].as_str().unwrap().to_string();
    let v = client(
        &url,
        &ro,
        "legacy",
        &[("run", json!({"command": "ls /", "purpose": "look"}))],
    );
    assert_eq!(
        names(&v),
        [
            "get_execution_status",
            "classify_command",
            "http_get",
            "get_job",
            "list_jobs"
        ],
        "{v}"
    );
    assert!(
        text(&v["calls"][0]).contains("limited to tools that only read"),
        "{v}"
    );

    // Bad settings and tokens are refused, naming the field.
    for (path, body, status) in [
        ("/api/mcp/access/roles/nosuch", &nothing, 404),
        ("/api/mcp/access/users/nosuch", &nothing, 404),
        (
            "/api/mcp/access/roles/user",
            &json!({"run_places": ["moon"], "brokered": "none", "http_get": false}),
            400,
        ),
        (
            "/api/mcp/access/roles/user",
            &json!({"run_places": ["sandbox"], "brokered": "some", "http_get": false}),
            400,
        ),
    ] {
        let r = admin.call("PUT", path, Some(body), &[]);
        assert_eq!(r.status, status, "{path} {body}: {r:?}");
    }
    let r = bob.call(
        "PUT",
        "/api/mcp/access/users/bob",
        Some(&json!({"run_places": ["host"], "brokered": "all", "http_get": true})),
        &[],
    );
    assert_eq!(r.status, 403, "a user grants themselves nothing: {r:?}");
    assert_eq!(bob.get("/api/mcp/access").status, 403);
    for (body, field) in [
        (
            json!({"name": "x", "scopes": ["mcp"], "mcp_elicitation": true}),
            "mcp_elicitation",
        ),
        (
            json!({"name": "x", "scopes": ["read"], "mcp_read_only": true}),
            "scopes",
        ),
        // An agent's token carries nothing but `mcp`: its limits would not bind the rest.
        (json!({"name": "x", "scopes": ["mcp", "read"]}), "scopes"),
        (
            json!({"name": "x", "scopes": ["mcp", "agent"], "mcp_read_only": true}),
            "scopes",
        ),
    ] {
        let r = bob.post("/api/tokens", body);
        assert_eq!(r.status, 400, "{r:?}");
        assert!(r.message().starts_with(field), "{r:?}");
    }

    // The activity log: bob's calls for bob, everyone's for the admin.
    let his = activity(&mut bob, "", 3);
    assert_eq!(his.len(), 3, "{his:?}");
    assert!(his.iter().all(|e| e["principal"] == "bob"), "{his:?}");
    assert_eq!(his[2]["outcome"], "refused", "{his:?}");
    assert_eq!(his[1]["outcome"], "ok", "{his:?}");
    assert!(activity(&mut bob, "?principal=root-admin", 0).is_empty());
    let refused = activity(&mut admin, "?principal=root-admin&tool=run", 1);
    assert_eq!(refused[0]["outcome"], "refused", "{refused:?}");
    assert_eq!(refused[0]["token_name"], "ro-agent", "{refused:?}");
    assert_eq!(admin.get("/api/mcp/activity?limit=501").status, 400);

    // The setting outlives a restart; a deleted user's grant goes with them.
    stack.crash_and_restart("gatewayd");
    let mut admin = Web::new(stack.listen);
    let r = admin.post(
        "/api/login",
        json!({"name": "root-admin", "password": argos_tests::ADMIN_PASSWORD}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let doc = admin.get("/api/mcp/access").json();
    assert_eq!(doc["roles"]["user"], nothing, "{doc}");
    assert!(doc["users"]["bob"].is_object(), "{doc}");
    let r = admin.call("DELETE", "/api/users/bob", None, &[]);
    assert_eq!(r.status, 204, "{r:?}");
    assert!(
        admin.get("/api/mcp/access").json()["users"]
            .get("bob")
            .is_none()
    );
    let r = admin.call("DELETE", "/api/mcp/access/users/bob", None, &[]);
    assert_eq!(r.status, 404, "{r:?}");
    stack.stop();
}
