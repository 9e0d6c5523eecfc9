//! What one caller may hold: bounded request fields, pages that end by bytes, and each
//! user's quota of launches, terminals, pending approvals and event streams.

use argos_tests::StackBuilder;
use serde_json::json;

/// A plain user's agent runs with a ~2 MB environment each made the approvals page too
/// large to answer (500 for everyone). A request's environment is bounded now (the field
/// named), and a listing's page ends by bytes as well as by count: every approval is still
/// reached, page by page.
#[test]
fn request_fields_are_bounded_and_pages_end_by_bytes() {
    // Past one page's bytes takes more pending requests than one user may hold by
    // default: no quota here.
    let stack = StackBuilder::new()
        .env("ARGOS_QUOTA__PENDING_APPROVALS", "0")
        .start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let r = bob.post(
        "/api/agent/run",
        json!({"command": "touch /tmp/argos-big", "env": {"LANG": "x".repeat(2_000_000)}}),
    );
    assert_eq!(
        r.status,
        400,
        "{}",
        r.text.chars().take(200).collect::<String>()
    );
    assert!(r.message().starts_with("env: "), "{}", r.message());
    // Many approvals near the bound: more than one page's bytes.
    let big = "x".repeat(60 * 1024);
    let n = 80;
    for i in 0..n {
        let r = bob.post(
            "/api/agent/run",
            json!({"command": format!("touch /tmp/argos-page-{i}"), "env": {"LANG": big}}),
        );
        assert_eq!(
            r.status,
            200,
            "{}",
            r.text.chars().take(200).collect::<String>()
        );
        assert_eq!(r.json()["approval"]["state"], "pending");
    }
    let mut seen = std::collections::HashSet::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let r = admin.get(&format!("/api/approvals?limit=500&page_token={token}"));
        assert_eq!(
            r.status,
            200,
            "{}",
            r.text.chars().take(200).collect::<String>()
        );
        assert!(
            r.text.len() < 8 * 1024 * 1024,
            "a page of {} bytes",
            r.text.len()
        );
        let v = r.json();
        pages += 1;
        for a in v["approvals"].as_array().unwrap() {
            assert!(
                seen.insert(a["id"].as_str().unwrap().to_string()),
                "a repeat"
            );
        }
        token = v["next_page_token"].as_str().unwrap().to_string();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen.len(), n, "every approval, once");
    assert!(pages >= 2, "the bytes ended the first page");
    stack.stop();
}

/// One user could hold any number of launches, terminals, event streams and approvals at
/// once. Each is bounded per user now (`[quota]`), refused with 429 and a message naming
/// the limit, without touching anyone else's share; what ends gives its place back.
#[test]
fn each_user_is_held_to_their_quota_and_no_one_elses() {
    let stack = StackBuilder::new()
        .env("ARGOS_QUOTA__LAUNCHES", "2")
        .env("ARGOS_QUOTA__TERMINALS", "1")
        .env("ARGOS_QUOTA__PENDING_APPROVALS", "2")
        .env("ARGOS_QUOTA__EVENT_STREAMS", "2")
        .start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let mut agent = bob.token(&["agent"]);
    let mut admins_agent = admin.token(&["agent"]);
    let long = json!({"command": "tail -f /dev/null", "timeout_ms": 60000});
    // Launches: two run; the third waits for one to end.
    let mut running = Vec::new();
    for _ in 0..2 {
        let r = agent.post("/api/agent/run", long.clone());
        assert_eq!(r.status, 200, "{r:?}");
        running.push(r.json()["execution"]["id"].as_str().unwrap().to_string());
    }
    let r = agent.post("/api/agent/run", long.clone());
    assert_eq!(
        (r.status, r.code().as_str()),
        (429, "resource_exhausted"),
        "{r:?}"
    );
    assert!(
        r.message().contains("user bob has 2 launches running")
            && r.message().contains("quota.launches = 2"),
        "{r:?}"
    );
    // Someone else's share is untouched.
    let r = admins_agent.post("/api/agent/run", json!({"command": "true"}));
    assert_eq!(r.status, 200, "{r:?}");
    let r = admin.post(&format!("/api/executions/{}/kill", running[0]), json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = agent.post("/api/agent/run", json!({"command": "true"}));
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 429, "{r:?}");
        assert!(
            std::time::Instant::now() < deadline,
            "the place never came back"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    // Requests waiting for an approval: two; asking again for one of them is the same
    // approval, not a third.
    for n in 0..2 {
        let r = agent.post(
            "/api/agent/run",
            json!({"command": format!("mkdir /tmp/q{n}")}),
        );
        assert_eq!(r.json()["approval"]["state"], "pending", "{r:?}");
    }
    let r = agent.post("/api/agent/run", json!({"command": "mkdir /tmp/q0"}));
    assert_eq!(r.json()["deduplicated"], true, "{r:?}");
    let r = agent.post("/api/agent/run", json!({"command": "mkdir /tmp/q2"}));
    assert_eq!(r.status, 429, "{r:?}");
    assert!(r.message().contains("quota.pending_approvals = 2"), "{r:?}");

    // Event streams: two open; a third is refused until one closes.
    let mut streams: Vec<_> = (0..2)
        .map(|_| {
            let mut s = bob.sse_get("/api/events", &[]);
            assert_eq!(s.next_event().unwrap().event, "ready");
            s
        })
        .collect();
    let refused = bob.sse_get("/api/events", &[]);
    assert_eq!(refused.status, 429, "{}", refused.error_text);
    assert!(
        refused.error_text.contains("quota.event_streams = 2"),
        "{}",
        refused.error_text
    );
    drop(streams.pop());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut s = bob.sse_get("/api/events", &[]);
        if s.status == 200 {
            assert_eq!(s.next_event().unwrap().event, "ready");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the stream never came back"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    // Terminals: one open at a time.
    let r = admin.post("/api/terminals", json!({"rows": 24, "cols": 80}));
    assert_eq!(r.status, 201, "{r:?}");
    let r = admin.post("/api/terminals", json!({"rows": 24, "cols": 80}));
    assert_eq!(r.status, 429, "{r:?}");
    assert!(r.message().contains("quota.terminals = 1"), "{r:?}");
    stack.stop();
}
