//! The gateway's HTTP API: first-admin setup, sessions, tokens, the authorization matrix,
//! cross-site refusal, cookie flags, throttling and bad input.

use argos_tests::web::{Reply, Web};
use argos_tests::{Stack, StackBuilder};
use serde_json::json;

const PASSWORD: &str = argos_tests::ADMIN_PASSWORD;

fn setup_secret(stack: &Stack) -> String {
    stack.setup_secret()
}

#[test]
fn first_admin_setup_is_one_time_and_sets_a_strict_cookie() {
    let stack = StackBuilder::new().start();
    let mut web = Web::new(stack.listen);
    assert_eq!(web.get("/api/setup").json()["needed"], true);
    let secret = setup_secret(&stack);
    let r = web.post(
        "/api/setup",
        json!({"token": "not-the-link", "name": "root-admin", "password": PASSWORD}),
    );
    assert_eq!((r.status, r.code().as_str()), (403, "setup_link"), "{r:?}");
    let r = web.post(
        "/api/setup",
        json!({"token": secret, "name": "root-admin", "password": "short"}),
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("password:")
    );
    let r = web.post(
        "/api/setup",
        json!({"token": secret, "name": "root-admin", "password": PASSWORD}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let cookie = r.header("set-cookie").unwrap().to_string();
    assert!(cookie.starts_with("argos_session="), "{cookie}");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(flag), "{cookie} lacks {flag}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP: no Secure flag: {cookie}"
    );
    assert_eq!(web.get("/api/me").json()["user"]["role"], "admin");
    assert_eq!(web.get("/api/setup").json()["needed"], false);
    // Used once, gone.
    let mut other = Web::new(stack.listen);
    let r = other.post(
        "/api/setup",
        json!({"token": secret, "name": "second", "password": PASSWORD}),
    );
    assert_eq!((r.status, r.code().as_str()), (403, "setup_link"), "{r:?}");
    // Logout revokes the session server-side: the old cookie no longer works.
    let old = web.cookie.clone();
    assert_eq!(web.call("POST", "/api/logout", None, &[]).status, 204);
    let mut replay = Web::new(stack.listen);
    replay.cookie = old;
    assert_eq!(replay.get("/api/me").status, 401);
    stack.stop();
}

/// Every route × {anonymous, user, admin by cookie, admin by bearer, cross-site}.
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
    let mut bearer = Web::with_bearer(stack.listen, &token);
    let mut anon = Web::new(stack.listen);

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

    struct Route {
        method: &'static str,
        path: String,
        body: Option<serde_json::Value>,
        /// Expected status: anonymous, user, admin cookie, admin bearer.
        expect: [u16; 4],
    }
    let exec_body = json!({"command": "true"});
    let routes = vec![
        Route {
            method: "GET",
            path: "/api/me".into(),
            body: None,
            expect: [401, 200, 200, 200],
        },
        Route {
            method: "GET",
            path: "/api/status".into(),
            body: None,
            expect: [401, 200, 200, 200],
        },
        Route {
            method: "GET",
            path: "/api/users".into(),
            body: None,
            expect: [401, 403, 200, 403],
        },
        Route {
            method: "POST",
            path: "/api/users".into(),
            body: Some(json!({"name": "carol", "password": PASSWORD, "role": "user"})),
            expect: [401, 403, 201, 403],
        },
        Route {
            method: "GET",
            path: "/api/tokens".into(),
            body: None,
            expect: [401, 200, 200, 403],
        },
        Route {
            method: "POST",
            path: "/api/tokens".into(),
            body: Some(json!({"name": "t", "scopes": ["read"]})),
            expect: [401, 201, 201, 403],
        },
        Route {
            method: "POST",
            path: "/api/shell/exec".into(),
            body: Some(exec_body.clone()),
            expect: [401, 403, 200, 200],
        },
        Route {
            method: "POST",
            path: "/api/shell/stream".into(),
            body: Some(exec_body.clone()),
            expect: [401, 403, 200, 200],
        },
        Route {
            method: "GET",
            path: "/api/executions".into(),
            body: None,
            expect: [401, 403, 200, 200],
        },
        Route {
            method: "GET",
            path: format!("/api/executions/{id}"),
            body: None,
            expect: [401, 403, 200, 200],
        },
        Route {
            method: "POST",
            path: format!("/api/executions/{id}/kill"),
            body: Some(json!({})),
            expect: [401, 403, 200, 200],
        },
        Route {
            method: "POST",
            path: "/api/classify".into(),
            body: Some(json!({"command": "ls -la"})),
            expect: [401, 200, 200, 200],
        },
        Route {
            method: "POST",
            path: "/api/agent/run".into(),
            body: Some(json!({"command": "ls /", "purpose": "look"})),
            expect: [401, 200, 200, 403],
        },
        Route {
            method: "GET",
            path: "/api/approvals".into(),
            body: None,
            expect: [401, 403, 200, 200],
        },
        Route {
            method: "GET",
            path: format!("/api/approvals/{aid}"),
            body: None,
            expect: [401, 403, 200, 200],
        },
        Route {
            method: "POST",
            path: format!("/api/approvals/{aid}/decision"),
            body: Some(json!({"decision": "deny", "note": "not now"})),
            expect: [401, 403, 200, 403],
        },
        Route {
            method: "GET",
            path: "/api/audit".into(),
            body: None,
            expect: [401, 403, 200, 200],
        },
        Route {
            method: "GET",
            path: "/api/audit/verify".into(),
            body: None,
            expect: [401, 403, 200, 200],
        },
        Route {
            method: "GET",
            path: "/api/terminals".into(),
            body: None,
            expect: [401, 403, 200, 200],
        },
        Route {
            // A bad size: nothing is opened, but the caller got as far as execd.
            method: "POST",
            path: "/api/terminals".into(),
            body: Some(json!({"rows": 0})),
            expect: [401, 403, 400, 400],
        },
        Route {
            method: "POST",
            path: "/api/me/password".into(),
            body: Some(json!({"current_password": "wrong one!!", "new_password": PASSWORD})),
            expect: [401, 403, 403, 403],
        },
    ];
    let mut failures = Vec::new();
    for r in &routes {
        for (who, client) in [
            ("anonymous", &mut anon),
            ("user", &mut bob),
            ("admin cookie", &mut admin),
            ("admin bearer", &mut bearer),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, (n, c))| ((i, n), c))
        {
            let got = client.call(r.method, &r.path, r.body.as_ref(), &[]);
            if got.status != r.expect[who.0] {
                failures.push(format!(
                    "{} {} as {}: {} (expected {}) {}",
                    r.method, r.path, who.1, got.status, r.expect[who.0], got.text
                ));
            }
            if got.status >= 400 {
                assert!(
                    !got.code().is_empty(),
                    "errors are JSON with a code: {got:?}"
                );
            }
        }
        // Cross-site: the admin's cookie, sent by another site's page.
        if r.method != "GET" {
            for hdr in [
                ("origin", "http://evil.example"),
                ("sec-fetch-site", "cross-site"),
            ] {
                let got = admin.call(r.method, &r.path, r.body.as_ref(), &[hdr]);
                if got.status != 403 || got.code() != "cross_site" {
                    failures.push(format!(
                        "{} {} cross-site ({}): {} {}",
                        r.method, r.path, hdr.0, got.status, got.text
                    ));
                }
            }
            // A bearer token is no ambient credential: exempt.
            let got = bearer.call(
                r.method,
                &r.path,
                r.body.as_ref(),
                &[("origin", "http://evil.example")],
            );
            if got.code() == "cross_site" {
                failures.push(format!(
                    "{} {} bearer was refused as cross-site",
                    r.method, r.path
                ));
            }
        }
    }
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

#[test]
fn failed_logins_are_throttled_per_account_with_retry_after() {
    let stack = StackBuilder::new().start();
    let _ = stack.admin_and_user();
    let mut web = Web::new(stack.listen);
    let wrong = json!({"name": "bob", "password": "not the password"});
    for _ in 0..5 {
        let r: Reply = web.post("/api/login", wrong.clone());
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "bad_credentials"),
            "{r:?}"
        );
    }
    let r = web.post("/api/login", wrong.clone());
    assert_eq!(r.status, 401, "{r:?}");
    // Now locked: even the right password waits.
    let r = web.post("/api/login", json!({"name": "bob", "password": PASSWORD}));
    assert_eq!((r.status, r.code().as_str()), (429, "throttled"), "{r:?}");
    assert!(r.header("retry-after").is_some(), "{r:?}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let r = web.post("/api/login", json!({"name": "bob", "password": PASSWORD}));
    assert_eq!(r.status, 200, "{r:?}");
    stack.stop();
}

#[test]
fn secure_cookies_follow_config_and_only_trusted_proxies() {
    // Untrusted peer claiming HTTPS: not believed.
    let stack = StackBuilder::new().start();
    let (mut admin, _) = stack.admin_and_user();
    admin.cookie = None;
    let r = admin.call(
        "POST",
        "/api/login",
        Some(&json!({"name": "root-admin", "password": PASSWORD})),
        &[("x-forwarded-proto", "https")],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let c = r.header("set-cookie").unwrap();
    assert!(
        c.starts_with("argos_session=") && !c.contains("Secure"),
        "{c}"
    );
    stack.stop();

    // Trusted proxy: the first hop decides.
    let stack = StackBuilder::new()
        .env("ARGOS_GATEWAY__TRUSTED_PROXIES", "127.0.0.1")
        .start();
    let (mut admin, _) = stack.admin_and_user();
    for (xfp, secure) in [
        ("https", true),
        ("http, https", false),
        ("https, http", true),
    ] {
        admin.cookie = None;
        let r = admin.call(
            "POST",
            "/api/login",
            Some(&json!({"name": "root-admin", "password": PASSWORD})),
            &[("x-forwarded-proto", xfp), ("origin", "https://127.0.0.1")],
        );
        let _ = r;
        let r = admin.call(
            "POST",
            "/api/login",
            Some(&json!({"name": "root-admin", "password": PASSWORD})),
            &[("x-forwarded-proto", xfp)],
        );
        assert_eq!(r.status, 200, "{xfp}: {r:?}");
        let c = r.header("set-cookie").unwrap();
        assert_eq!(c.starts_with("__Host-argos_session="), secure, "{xfp}: {c}");
        assert_eq!(c.contains("; Secure"), secure, "{xfp}: {c}");
    }
    stack.stop();

    // Explicit config wins over the request.
    let stack = StackBuilder::new()
        .env("ARGOS_GATEWAY__COOKIE_SECURE", "true")
        .start();
    let (mut admin, _) = stack.admin_and_user();
    admin.cookie = None;
    let r = admin.post(
        "/api/login",
        json!({"name": "root-admin", "password": PASSWORD}),
    );
    let c = r.header("set-cookie").unwrap();
    assert!(
        c.starts_with("__Host-argos_session=") && c.contains("; Secure"),
        "{c}"
    );
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
        let path = path.replace("{name}", "nobody").replace("{id}", "1");
        let body = (method == "POST").then(|| json!({}));
        let got = anon.call(method, &path, body.as_ref(), &[]);
        assert!(got.status != 404 && got.status != 405, "{op}: {got:?}");
    }
    stack.stop();
}
