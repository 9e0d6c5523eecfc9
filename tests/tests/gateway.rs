//! The gateway's HTTP API as a whole: the authorization matrix (every route, every kind of
//! caller), bad input, cross-site and foreign-host refusal, the OpenAPI document, the host
//! overview and reading an execution. Logins, sessions and cookies are in logins.rs.

use argos_tests::StackBuilder;
use argos_tests::web::{Reply, Web};
use serde_json::json;

const PASSWORD: &str = argos_tests::ADMIN_PASSWORD;

/// Every route the gateway documents × {anonymous, user, admin by cookie, admin by a
/// token with `exec` and `read`, another site's page}. What each may do is not written
/// here: the test reads each operation's `x-argos-access` (the gateway's one rule table)
/// from the OpenAPI document and checks the gateway does exactly that. Every documented
/// route needs a fixture below, so a new route cannot go untested.
#[test]
fn authorization_matrix() {
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let r = admin.post(
        "/api/tokens",
        json!({"name": "ci", "scopes": ["exec", "read"]}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let token = r.json()["token"].as_str().unwrap().to_string();
    let token_scopes = ["exec", "read"];
    let mut bearer = Web::with_bearer(stack.listen, &token);
    let mut anon = Web::new(stack.listen);
    let login = |name: &str| {
        let mut w = Web::new(stack.listen);
        let r = w.post("/api/login", json!({"name": name, "password": PASSWORD}));
        assert_eq!(r.status, 200, "{r:?}");
        w
    };

    // A real execution to address.
    let r = admin.post("/api/shell/exec", json!({"command": "echo hello"}));
    assert_eq!(r.status, 200, "{r:?}");
    let v = r.json();
    assert_eq!(v["stdout"]["text"], "hello\n", "{v}");
    assert_eq!(v["execution"]["status"], "succeeded", "{v}");
    assert_eq!(v["execution"]["principal"], "root-admin", "{v}");
    let id = v["execution"]["id"].as_str().unwrap().to_string();

    // A real approval to address: bob's own request through the risk gate.
    let r = bob.post(
        "/api/agent/run",
        json!({"command": "touch /tmp/argos-matrix", "purpose": "matrix"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let v = r.json();
    assert_eq!(v["approval"]["state"], "pending", "{v}");
    assert_eq!(v["execution"]["status"], "pending_approval", "{v}");
    let aid = v["approval"]["id"].as_str().unwrap().to_string();

    let exec_body = json!({"command": "true"});
    // Per documented operation: the concrete path and body. Success is not the point
    // (a 404 or 409 past the rule is fine); who gets past the rule is.
    let fixture = |key: &str| -> Option<(String, Option<serde_json::Value>)> {
        let (path, body) = match key {
            "GET /api/setup" => ("/api/setup".into(), None),
            "POST /api/setup" => (
                "/api/setup".into(),
                Some(json!({"token": "not-a-link", "name": "x", "password": PASSWORD})),
            ),
            "POST /api/login" => (
                "/api/login".into(),
                Some(json!({"name": "bob", "password": PASSWORD})),
            ),
            "POST /api/logout" => ("/api/logout".into(), None),
            "GET /api/me" => ("/api/me".into(), None),
            "POST /api/me/password" => (
                "/api/me/password".into(),
                Some(json!({"current_password": "wrong one!!", "new_password": PASSWORD})),
            ),
            "GET /api/status" => ("/api/status".into(), None),
            "GET /metrics" => ("/metrics".into(), None),
            "GET /api/host" => ("/api/host".into(), None),
            "GET /api/users" => ("/api/users".into(), None),
            "POST /api/users" => (
                "/api/users".into(),
                Some(json!({"name": "carol", "password": PASSWORD, "role": "user"})),
            ),
            "DELETE /api/users/{name}" => ("/api/users/nobody".into(), None),
            "GET /api/tokens" => ("/api/tokens".into(), None),
            "POST /api/tokens" => (
                "/api/tokens".into(),
                Some(json!({"name": "t", "scopes": ["read"]})),
            ),
            "DELETE /api/tokens/{id}" => ("/api/tokens/999999".into(), None),
            "POST /api/shell/exec" => ("/api/shell/exec".into(), Some(exec_body.clone())),
            "POST /api/shell/stream" => ("/api/shell/stream".into(), Some(exec_body.clone())),
            "GET /api/events" => ("/api/events".into(), None),
            "GET /api/executions" => ("/api/executions".into(), None),
            "GET /api/executions/{id}" => (format!("/api/executions/{id}"), None),
            "POST /api/executions/{id}/kill" => {
                (format!("/api/executions/{id}/kill"), Some(json!({})))
            }
            "POST /api/classify" => ("/api/classify".into(), Some(json!({"command": "ls -la"}))),
            "POST /api/agent/run" => (
                "/api/agent/run".into(),
                Some(json!({"command": "ls /", "purpose": "look"})),
            ),
            "GET /api/approvals" => ("/api/approvals".into(), None),
            "GET /api/approvals/{id}" => (format!("/api/approvals/{aid}"), None),
            "POST /api/approvals/{id}/decision" => (
                format!("/api/approvals/{aid}/decision"),
                Some(json!({"decision": "deny", "note": "not now"})),
            ),
            "GET /api/audit" => ("/api/audit".into(), None),
            "GET /api/audit/verify" => ("/api/audit/verify".into(), None),
            "GET /api/terminals" => ("/api/terminals".into(), None),
            // A bad size: nothing is opened, but the caller got past the rule.
            "POST /api/terminals" => ("/api/terminals".into(), Some(json!({"rows": 0}))),
            "DELETE /api/terminals/{id}" => (format!("/api/terminals/{id}"), None),
            "POST /api/terminals/{id}/ticket" => {
                (format!("/api/terminals/{id}/ticket"), Some(json!({})))
            }
            // MCP: a server that does not exist (404 past the rule), a body with a bad
            // field (400 past the rule): nothing is configured or called.
            "GET /api/mcp/servers" => ("/api/mcp/servers".into(), None),
            "POST /api/mcp/servers" => (
                "/api/mcp/servers".into(),
                Some(json!({"id": "matrix", "name": "M", "stdio": {"command": ""}})),
            ),
            "GET /api/mcp/servers/{server}" => ("/api/mcp/servers/nosuch".into(), None),
            "PUT /api/mcp/servers/{server}" => (
                "/api/mcp/servers/nosuch".into(),
                Some(
                    json!({"name": "N", "streamable_http": {"url": "https://mcp.example.com/mcp"}}),
                ),
            ),
            "DELETE /api/mcp/servers/{server}" => ("/api/mcp/servers/nosuch".into(), None),
            "POST /api/mcp/servers/{server}/enable" => {
                ("/api/mcp/servers/nosuch/enable".into(), None)
            }
            "POST /api/mcp/servers/{server}/disable" => {
                ("/api/mcp/servers/nosuch/disable".into(), None)
            }
            "POST /api/mcp/servers/{server}/reconnect" => {
                ("/api/mcp/servers/nosuch/reconnect".into(), None)
            }
            "GET /api/mcp/servers/{server}/log" => ("/api/mcp/servers/nosuch/log".into(), None),
            "PUT /api/mcp/servers/{server}/disabled_tools" => (
                "/api/mcp/servers/nosuch/disabled_tools".into(),
                Some(json!({"tools": ["x"]})),
            ),
            "POST /api/mcp/servers/{server}/authorize" => {
                ("/api/mcp/servers/nosuch/authorize".into(), None)
            }
            // Anyone may come back from an authorization server; a forged state is a 404.
            "GET /api/mcp/oauth/callback" => {
                ("/api/mcp/oauth/callback?code=x&state=forged".into(), None)
            }
            "GET /api/mcp/tools" => ("/api/mcp/tools".into(), None),
            "POST /api/mcp/tools/{tool}/accept" => {
                ("/api/mcp/tools/mcp__nosuch__x/accept".into(), None)
            }
            "POST /api/mcp/tools/{tool}/call" => (
                "/api/mcp/tools/mcp__nosuch__x/call".into(),
                Some(json!({"arguments": {}})),
            ),
            // Agents' access: a role or user that does not exist (404 past the rule).
            "GET /api/mcp/access" => ("/api/mcp/access".into(), None),
            "PUT /api/mcp/access/roles/{role}" => (
                "/api/mcp/access/roles/nosuch".into(),
                Some(json!({"run_places": [], "brokered": "none", "http_get": false})),
            ),
            "PUT /api/mcp/access/users/{name}" => (
                "/api/mcp/access/users/nosuch".into(),
                Some(json!({"run_places": [], "brokered": "none", "http_get": false})),
            ),
            "DELETE /api/mcp/access/users/{name}" => ("/api/mcp/access/users/nosuch".into(), None),
            "GET /api/mcp/activity" => ("/api/mcp/activity".into(), None),
            // Jobs: a bad field (400 past the rule), a job that does not exist (404).
            "POST /api/jobs" => (
                "/api/jobs".into(),
                Some(json!({"command": "ls", "cwd": "relative"})),
            ),
            "GET /api/jobs" => ("/api/jobs".into(), None),
            "GET /api/jobs/{id}" => (format!("/api/jobs/{id}"), None),
            "POST /api/jobs/{id}/cancel" => (format!("/api/jobs/{id}/cancel"), Some(json!({}))),
            "POST /api/jobs/{id}/relaunch" => (
                format!("/api/jobs/{id}/relaunch"),
                Some(json!({"generation": 1})),
            ),
            "GET /api/jobs/{id}/output" => (format!("/api/jobs/{id}/output"), None),
            // Tasks: a bad field (400 past the rule), a task that does not exist (404).
            "POST /api/tasks" => (
                "/api/tasks".into(),
                Some(json!({"name": "", "command": "ls"})),
            ),
            "GET /api/tasks" => ("/api/tasks".into(), None),
            "GET /api/tasks/preview" => ("/api/tasks/preview?cron=0%203%20*%20*%20*".into(), None),
            "GET /api/tasks/{id}" => (format!("/api/tasks/{id}"), None),
            "PUT /api/tasks/{id}" => (
                format!("/api/tasks/{id}"),
                Some(json!({"name": "x", "command": "ls"})),
            ),
            "DELETE /api/tasks/{id}" => (format!("/api/tasks/{id}"), None),
            "POST /api/tasks/{id}/run" => (format!("/api/tasks/{id}/run"), Some(json!({}))),
            "POST /api/tasks/{id}/pause" => (format!("/api/tasks/{id}/pause"), Some(json!({}))),
            "POST /api/tasks/{id}/resume" => (format!("/api/tasks/{id}/resume"), Some(json!({}))),
            "POST /api/tasks/{id}/approve" => (
                format!("/api/tasks/{id}/approve"),
                Some(json!({"version": 1})),
            ),
            "POST /api/tasks/{id}/webhook" => (
                format!("/api/tasks/{id}/webhook"),
                Some(json!({"mode": "token"})),
            ),
            "DELETE /api/tasks/{id}/webhook" => (format!("/api/tasks/{id}/webhook"), None),
            // Deliveries: listing, one that does not exist (404); the secret is made.
            "POST /api/deliveries/secret" => ("/api/deliveries/secret".into(), Some(json!({}))),
            "GET /api/deliveries" => ("/api/deliveries".into(), None),
            "GET /api/deliveries/{id}" => (format!("/api/deliveries/{id}"), None),
            "POST /api/deliveries/{id}/redeliver" => {
                (format!("/api/deliveries/{id}/redeliver"), Some(json!({})))
            }
            _ => return None,
        };
        Some((path, body))
    };
    // One request: (status, error code, text). The event stream never ends by itself:
    // only its head is read.
    let send = |client: &mut Web,
                method: &str,
                url: &str,
                body: Option<&serde_json::Value>,
                extra: &[(&str, &str)]|
     -> (u16, String, String) {
        if url == "/api/events" {
            let sse = client.sse_get(url, extra);
            let code = serde_json::from_str::<serde_json::Value>(&sse.error_text)
                .ok()
                .and_then(|v| v["error"]["code"].as_str().map(str::to_string))
                .unwrap_or_default();
            return (sse.status, code, sse.error_text.clone());
        }
        let r: Reply = client.call(method, url, body, extra);
        (r.status, r.code(), r.text.chars().take(200).collect())
    };
    let denied = |(status, code, _): &(u16, String, String)| {
        *status == 401 || matches!(code.as_str(), "forbidden" | "cross_site")
    };
    let doc = anon.get("/api/openapi.json").json();
    let mut failures = Vec::new();
    let mut routes = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let method = method.to_uppercase();
            let key = format!("{method} {path}");
            let access = &op["x-argos-access"];
            assert!(access.is_object(), "{key} has no rule: {op}");
            let Some((url, body)) = fixture(&key) else {
                panic!("{key}: add a fixture to the authorization matrix");
            };
            routes += 1;
            let who = access["who"].as_str().unwrap();
            let scopes: Vec<&str> = access["scopes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap())
                .collect();
            let session_only = access["session_only"].as_bool().unwrap();
            let same_origin = access["same_origin"].as_bool().unwrap();
            let admin_only = who == "admin";
            // What the rule says each caller may do.
            let expect = [
                ("anonymous", who == "anyone"),
                ("user", who == "anyone" || !admin_only),
                ("admin cookie", true),
                (
                    "admin bearer",
                    who == "anyone"
                        || (!session_only
                            && (scopes.is_empty()
                                || scopes.iter().any(|s| token_scopes.contains(s)))),
                ),
            ];
            // Logging in or out replaces or ends the session it is sent with: fresh
            // clients for those.
            let sessions_change = matches!(key.as_str(), "POST /api/login" | "POST /api/logout");
            let (mut fresh_anon, mut fresh_bob, mut fresh_admin);
            let clients: [&mut Web; 4] = if sessions_change {
                fresh_anon = Web::new(stack.listen);
                fresh_bob = login("bob");
                fresh_admin = login("root-admin");
                [
                    &mut fresh_anon,
                    &mut fresh_bob,
                    &mut fresh_admin,
                    &mut bearer,
                ]
            } else {
                [&mut anon, &mut bob, &mut admin, &mut bearer]
            };
            for ((name, allowed), client) in expect.into_iter().zip(clients) {
                let got = send(client, &method, &url, body.as_ref(), &[]);
                if denied(&got) == allowed {
                    failures.push(format!(
                        "{key} as {name}: {} {} (the rule says {})",
                        got.0,
                        got.2,
                        if allowed { "allowed" } else { "denied" }
                    ));
                }
                if got.0 >= 400 {
                    assert!(!got.1.is_empty(), "errors are JSON with a code: {got:?}");
                }
            }
            // Another site's page, with the admin's cookie: refused wherever the rule
            // says same origin; a bearer token is no ambient credential: exempt.
            for hdr in [
                ("origin", "http://evil.example"),
                ("sec-fetch-site", "cross-site"),
            ] {
                let got = send(&mut admin, &method, &url, body.as_ref(), &[hdr]);
                let refused = got.0 == 403 && got.1 == "cross_site";
                if refused != same_origin {
                    failures.push(format!("{key} cross-site ({}): {} {}", hdr.0, got.0, got.2));
                }
            }
            let got = send(
                &mut bearer,
                &method,
                &url,
                body.as_ref(),
                &[("origin", "http://evil.example")],
            );
            if got.1 == "cross_site" {
                failures.push(format!("{key}: a bearer token was refused as cross-site"));
            }
        }
    }
    assert!(routes >= 30, "only {routes} routes documented");
    assert!(
        failures.is_empty(),
        "authorization matrix:\n{}",
        failures.join("\n")
    );
    // The same origin is fine.
    let own = format!("http://{}", stack.listen);
    let r = admin.call(
        "POST",
        "/api/shell/exec",
        Some(&exec_body),
        &[("origin", own.as_str())],
    );
    assert_eq!(r.status, 200, "{r:?}");
    // A token lacking a scope is refused that scope.
    let r = admin.post("/api/tokens", json!({"name": "ro", "scopes": ["read"]}));
    let mut ro = Web::with_bearer(stack.listen, r.json()["token"].as_str().unwrap());
    assert_eq!(ro.get("/api/executions").status, 200);
    let r = ro.post("/api/shell/exec", exec_body.clone());
    assert_eq!(r.status, 403, "{r:?}");
    // A revoked token stops working.
    let tokens = admin.get("/api/tokens").json();
    let ro_id = tokens["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ro")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    assert_eq!(
        admin
            .call("DELETE", &format!("/api/tokens/{ro_id}"), None, &[])
            .status,
        204
    );
    assert_eq!(ro.get("/api/executions").status, 401);
    stack.stop();
}

#[test]
fn bad_input_gets_a_clear_error() {
    let stack = StackBuilder::new().start();
    let (mut admin, _) = stack.admin_and_user();
    let r = admin.raw(
        "POST",
        "/api/shell/exec",
        Some(b"{not json".to_vec()),
        true,
        &[],
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "invalid_argument"),
        "{r:?}"
    );
    let r = admin.raw("POST", "/api/shell/exec", Some(b"{}".to_vec()), false, &[]);
    assert_eq!(r.status, 415, "{r:?}");
    // An oversized body is refused from its declared length, before it is read.
    {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(stack.listen).unwrap();
        write!(
            s,
            "POST /api/shell/exec HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{{\"command\": \"",
            stack.listen,
            admin.cookie.as_deref().unwrap(),
            3 * 1024 * 1024
        )
        .unwrap();
        // The answer comes without the body being sent (read what arrives in 5 s).
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let mut out = String::new();
        while !out.contains("too_large") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
        assert!(out.starts_with("HTTP/1.1 413"), "{out}");
        assert!(out.contains("too_large"), "{out}");
    }
    let r = admin.post(
        "/api/shell/exec",
        json!({"command": "true", "cwd": "relative"}),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "invalid_argument"),
        "{r:?}"
    );
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("cwd:"),
        "{r:?}"
    );
    let r = admin.post("/api/shell/exec", json!({"command": "true", "bogus": 1}));
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "invalid_argument"),
        "{r:?}"
    );
    let r = admin.post(
        "/api/users",
        json!({"name": "Bad Name", "password": PASSWORD, "role": "user"}),
    );
    assert!(r.status == 400 && r.text.contains("name:"), "{r:?}");
    let r = admin.post(
        "/api/users",
        json!({"name": "bob", "password": PASSWORD, "role": "user"}),
    );
    assert_eq!((r.status, r.code().as_str()), (409, "conflict"), "{r:?}");
    assert_eq!(admin.get("/api/no/such/route").status, 404);
    stack.stop();
}

/// DNS rebinding: a name the attacker points at the gateway's address makes their page
/// same-origin with it (`Host` and `Origin` agree), and every cookie route let it through.
/// Only IP addresses, `localhost` and configured names are answered now. And the event
/// stream's cross-site check holds whatever the `Accept` header says.
#[test]
fn a_foreign_host_is_refused_and_events_are_same_origin_without_accept() {
    let stack = StackBuilder::new()
        .env("ARGOS_GATEWAY__ALLOWED_HOSTS", "argos.test")
        .start();
    let mut admin = stack.admin();
    let port = stack.listen.port();
    let evil_host = format!("evil.example:{port}");
    let evil_origin = format!("http://{evil_host}");
    let body = json!({"command": "echo rebound"});
    let r = admin.call(
        "POST",
        "/api/shell/exec",
        Some(&body),
        &[("host", &evil_host), ("origin", &evil_origin)],
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (421, "unknown_host"),
        "{r:?}"
    );
    let r = admin.call("GET", "/", None, &[("host", &evil_host)]);
    assert_eq!(r.status, 421, "the page too: {r:?}");
    // A configured name is answered.
    let named = format!("argos.test:{port}");
    let r = admin.call(
        "POST",
        "/api/shell/exec",
        Some(&body),
        &[("host", &named), ("origin", &format!("http://{named}"))],
    );
    assert_eq!(r.status, 200, "{r:?}");
    // The event stream: refused from another site even without `Accept`.
    let r = admin.call(
        "GET",
        "/api/events",
        None,
        &[("origin", "http://evil.example")],
    );
    assert_eq!((r.status, r.code().as_str()), (403, "cross_site"), "{r:?}");
    stack.stop();
}

/// `/api/openapi.json` describes every route the API serves (and nothing it does not).
#[test]
fn the_openapi_document_covers_every_route() {
    let stack = StackBuilder::new().start();
    let mut anon = Web::new(stack.listen);
    let r = anon.get("/api/openapi.json");
    assert_eq!(r.status, 200, "{r:?}");
    let doc = r.json();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{doc}");
    let mut documented: Vec<String> = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            documented.push(format!("{} {path}", method.to_uppercase()));
        }
    }
    documented.sort();
    let mut served = vec![
        "GET /api/setup",
        "POST /api/setup",
        "POST /api/login",
        "POST /api/logout",
        "GET /api/me",
        "POST /api/me/password",
        "GET /api/users",
        "POST /api/users",
        "DELETE /api/users/{name}",
        "GET /api/tokens",
        "POST /api/tokens",
        "DELETE /api/tokens/{id}",
        "POST /api/shell/exec",
        "POST /api/shell/stream",
        "GET /api/executions",
        "GET /api/executions/{id}",
        "POST /api/executions/{id}/kill",
        "POST /api/classify",
        "GET /api/events",
        "GET /api/status",
        "GET /metrics",
        "GET /api/host",
        "POST /api/agent/run",
        "GET /api/approvals",
        "GET /api/approvals/{id}",
        "POST /api/approvals/{id}/decision",
        "GET /api/audit",
        "GET /api/audit/verify",
        "POST /api/terminals",
        "GET /api/terminals",
        "DELETE /api/terminals/{id}",
        "POST /api/terminals/{id}/ticket",
        "GET /api/mcp/servers",
        "POST /api/mcp/servers",
        "GET /api/mcp/servers/{server}",
        "PUT /api/mcp/servers/{server}",
        "DELETE /api/mcp/servers/{server}",
        "POST /api/mcp/servers/{server}/enable",
        "POST /api/mcp/servers/{server}/disable",
        "POST /api/mcp/servers/{server}/reconnect",
        "GET /api/mcp/servers/{server}/log",
        "PUT /api/mcp/servers/{server}/disabled_tools",
        "POST /api/mcp/servers/{server}/authorize",
        "GET /api/mcp/oauth/callback",
        "GET /api/mcp/tools",
        "POST /api/mcp/tools/{tool}/accept",
        "POST /api/mcp/tools/{tool}/call",
        "GET /api/mcp/access",
        "PUT /api/mcp/access/roles/{role}",
        "PUT /api/mcp/access/users/{name}",
        "DELETE /api/mcp/access/users/{name}",
        "GET /api/mcp/activity",
        "POST /api/jobs",
        "GET /api/jobs",
        "GET /api/jobs/{id}",
        "POST /api/jobs/{id}/cancel",
        "POST /api/jobs/{id}/relaunch",
        "GET /api/jobs/{id}/output",
        "POST /api/tasks",
        "GET /api/tasks",
        "GET /api/tasks/preview",
        "GET /api/tasks/{id}",
        "PUT /api/tasks/{id}",
        "DELETE /api/tasks/{id}",
        "POST /api/tasks/{id}/run",
        "POST /api/tasks/{id}/pause",
        "POST /api/tasks/{id}/resume",
        "POST /api/tasks/{id}/approve",
        "POST /api/tasks/{id}/webhook",
        "DELETE /api/tasks/{id}/webhook",
        "POST /api/deliveries/secret",
        "GET /api/deliveries",
        "GET /api/deliveries/{id}",
        "POST /api/deliveries/{id}/redeliver",
    ];
    served.sort();
    assert_eq!(documented, served);
    for p in doc["paths"]["/api/executions"]["get"]["parameters"]
        .as_array()
        .unwrap()
    {
        assert_eq!(p["in"], "query", "{p}");
        assert_eq!(p["required"], false, "{p}");
    }
    // Each documented route exists: anonymously it is refused or answered, never 404/405.
    for op in &documented {
        let (method, path) = op.split_once(' ').unwrap();
        let path = path
            .replace("{name}", "nobody")
            .replace("{id}", "1")
            .replace("{server}", "nosuch")
            .replace("{tool}", "mcp__nosuch__x");
        let body = matches!(method, "POST" | "PUT").then(|| json!({}));
        let got = anon.call(method, &path, body.as_ref(), &[]);
        assert!(got.status != 404 && got.status != 405, "{op}: {got:?}");
    }
    stack.stop();
}

/// `GET /api/host`: this host at a glance, as the host itself reports it.
#[test]
fn the_host_overview_reports_this_host() {
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let h = admin.get("/api/host");
    assert_eq!(h.status, 200, "{h:?}");
    let h = h.json();
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(h["hostname"], hostname.trim(), "{h}");
    let total_kb: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert_eq!(h["memory"]["total_bytes"], total_kb * 1024, "{h}");
    let available = h["memory"]["available_bytes"].as_u64().unwrap();
    assert!(available > 0 && available <= total_kb * 1024, "{h}");
    assert!(h["cpus"].as_u64().unwrap() >= 1, "{h}");
    let busy = h["cpu_busy_percent"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&busy), "{h}");
    assert_eq!(h["load"].as_array().unwrap().len(), 3, "{h}");
    assert!(h["uptime_s"].as_u64().unwrap() > 0, "{h}");
    let disks = h["disks"].as_array().unwrap();
    assert!(!disks.is_empty(), "{h}");
    for d in disks {
        let (size, free) = (
            d["size_bytes"].as_u64().unwrap(),
            d["available_bytes"].as_u64().unwrap(),
        );
        assert!(size > 0 && free <= size, "{d}");
    }
    // The gateway's own listening socket, owned by the gateway's user.
    let port = stack.listen_addr().port();
    let listeners = h["listeners"].as_array().unwrap();
    let gw = listeners
        .iter()
        .find(|l| l["port"] == port && l["proto"] == "tcp")
        .unwrap_or_else(|| panic!("{port} not listed: {listeners:?}"));
    let status = admin.get("/api/status").json();
    let gw_uid = status["daemons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["daemon"] == "gatewayd")
        .unwrap()["uid"]
        .as_u64()
        .unwrap() as u32;
    let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(gw_uid))
        .unwrap()
        .map_or(gw_uid.to_string(), |u| u.name);
    assert_eq!(gw["user"], name.as_str(), "{gw}");
    // The last minutes, sampled every 5 s, oldest first: the first sample within 5 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(12);
    let history = loop {
        let h = admin.get("/api/host").json();
        let history = h["history"].as_array().unwrap().clone();
        if !history.is_empty() || std::time::Instant::now() > deadline {
            break history;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert!(!history.is_empty(), "no sample after 12 s");
    for s in &history {
        let busy = s["cpu_busy_percent"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&busy), "{s}");
        assert!(
            s["memory_used_bytes"].as_u64().unwrap() <= total_kb * 1024,
            "{s}"
        );
        assert!(s["load1"].as_f64().unwrap() >= 0.0, "{s}");
        assert!(s["at_ms"].as_i64().unwrap() > 0, "{s}");
    }
    // A plain user sees the host's resources, not which services it runs.
    let h = bob.get("/api/host").json();
    assert!(h["disks"].as_array().is_some_and(|d| !d.is_empty()), "{h}");
    assert_eq!(h["listeners"], json!([]), "{h}");
    // Logged out: nothing.
    let mut anon = Web::new(stack.listen);
    assert_eq!(anon.get("/api/host").status, 401);
    stack.stop();
}

#[test]
fn reading_an_execution_can_wait_for_its_end() {
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let mut agent = admin.token(&["agent"]);
    let r = agent.post(
        "/api/agent/run",
        json!({"command": "sleep 1; echo waited", "place": "sandbox"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let id = r.json()["execution"]["id"].as_str().unwrap().to_string();
    let at_once = agent.get(&format!("/api/executions/{id}"));
    assert_eq!(
        at_once.json()["execution"]["status"],
        "running",
        "{at_once:?}"
    );
    // Someone else's execution is not theirs to wait on: refused at once.
    let t = std::time::Instant::now();
    let r = bob.get(&format!("/api/executions/{id}?wait_ms=10000"));
    assert!(r.status == 404 || r.status == 403, "{r:?}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        t.elapsed()
    );
    // Waiting answers when it ends, not at the deadline.
    let t = std::time::Instant::now();
    let r = agent.get(&format!("/api/executions/{id}?wait_ms=20000"));
    let waited = t.elapsed();
    let v = r.json();
    assert_eq!(v["execution"]["status"], "succeeded", "{v}");
    assert_eq!(v["stdout"]["text"], "waited\n", "{v}");
    assert!(
        waited < std::time::Duration::from_secs(10),
        "answered after {waited:?}"
    );
    // An ended one answers at once; a wait above the bound is a clear 400.
    let t = std::time::Instant::now();
    assert_eq!(
        agent
            .get(&format!("/api/executions/{id}?wait_ms=20000"))
            .status,
        200
    );
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
    let r = agent.get(&format!("/api/executions/{id}?wait_ms=30001"));
    assert_eq!(r.status, 400, "{r:?}");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("wait_ms"),
        "{r:?}"
    );
    stack.stop();
}
