//! What one caller may hold: bounded request fields, pages that end by bytes, each
//! user's quota of launches, terminals, pending approvals and event streams, and the MCP
//! sessions of one token and one user at `/mcp`.

use std::time::{Duration, Instant};

use argos_tests::StackBuilder;
use argos_tests::measure::pss_kib;
use argos_tests::web::{Reply, Web};
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
    let admins_true = r.json()["execution"]["id"].as_str().unwrap().to_string();
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

    // Terminals: one open at a time. (The admin's `true` above is answered when it
    // starts; it must have ended, or it holds one of the admin's two launches.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while admin.get(&format!("/api/executions/{admins_true}")).json()["execution"]["status"]
        == "running"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the admin's `true` never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let r = admin.post("/api/terminals", json!({"rows": 24, "cols": 80}));
    assert_eq!(r.status, 201, "{r:?}");
    let r = admin.post("/api/terminals", json!({"rows": 24, "cols": 80}));
    assert_eq!(r.status, 429, "{r:?}");
    assert!(r.message().contains("quota.terminals = 1"), "{r:?}");
    stack.stop();
}

const ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");

/// A 2025-11-25 `initialize` at `/mcp`.
fn initialize(agent: &mut Web) -> Reply {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "flood", "version": "1"}}});
    agent.call("POST", "/mcp", Some(&init), &[ACCEPT])
}

/// An `initialize` that opened a session: its id.
fn open_session(agent: &mut Web) -> String {
    let r = initialize(agent);
    assert_eq!(r.status, 200, "{r:?}");
    r.header("mcp-session-id")
        .expect("a session id")
        .to_string()
}

/// The headers of a request in session `id`.
fn in_session(id: &str) -> [(&str, &str); 3] {
    [
        ACCEPT,
        ("mcp-session-id", id),
        ("mcp-protocol-version", "2025-11-25"),
    ]
}

/// Whether session `id` still answers a `ping` (200), or is gone (404).
fn alive(agent: &mut Web, id: &str) -> bool {
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let r = agent.call("POST", "/mcp", Some(&ping), &in_session(id));
    match r.status {
        200 => true,
        404 => false,
        _ => panic!("ping in {id}: {r:?}"),
    }
}

/// The sessions open at `/mcp`, as `/metrics` says.
fn sessions_open(scraper: &mut Web) -> u64 {
    let r = scraper.get("/metrics");
    assert_eq!(r.status, 200, "{r:?}");
    r.text
        .lines()
        .find_map(|l| l.strip_prefix("argos_mcp_sessions_open "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no argos_mcp_sessions_open in:\n{}", r.text))
}

/// A plain user's token opened 10,000 MCP sessions and the gateway's memory grew by
/// 600 MB, none of it given back. Sessions are bounded now: 2,000 `initialize`s of one
/// token leave only its newest `gateway.mcp_sessions_per_token` open (each newer one ends
/// the least recently used idle one) and the gateway's PSS about where it was; a DELETE
/// ends a session at once; a second token of the user is held to the user's bound; when
/// every session of a token is busy (its stream open) one more is refused with 429 naming
/// the setting, busy sessions outlive the idle time, and once idle they end and a new one
/// opens.
#[test]
fn mcp_sessions_are_bounded_per_token_and_user_and_end_when_idle() {
    const PER_TOKEN: usize = 8;
    const PER_USER: usize = 12;
    const IDLE: Duration = Duration::from_secs(5);
    let stack = StackBuilder::new()
        .env(
            "ARGOS_GATEWAY__MCP_SESSIONS_PER_TOKEN",
            &PER_TOKEN.to_string(),
        )
        .env(
            "ARGOS_GATEWAY__MCP_SESSIONS_PER_USER",
            &PER_USER.to_string(),
        )
        .env(
            "ARGOS_GATEWAY__MCP_SESSION_IDLE_S",
            &IDLE.as_secs().to_string(),
        )
        // Sessions, not the request rate, are bounded here.
        .env("ARGOS_GATEWAY__MCP_REQUESTS_PER_S", "0")
        .env("ARGOS_GATEWAY__MCP_REQUESTS_PER_USER_S", "0")
        .start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let mut scraper = admin.token(&["metrics"]);
    let mut agent = bob.token(&["mcp"]);
    let gatewayd = stack.daemon_pid("gatewayd");

    // Warmed up (the runtime's threads, the allocator's arenas), then 2,000 more.
    for _ in 0..200 {
        open_session(&mut agent);
    }
    let before = pss_kib(gatewayd);
    assert!(before > 0, "no PSS read for gatewayd ({gatewayd})");
    let started = Instant::now();
    let ids: Vec<String> = (0..2_000).map(|_| open_session(&mut agent)).collect();
    let after = pss_kib(gatewayd);
    let grew_mib = after.saturating_sub(before) as f64 / 1024.0;
    eprintln!(
        "2000 sessions opened in {:?}; gatewayd PSS {before} KiB -> {after} KiB (+{grew_mib:.1} MiB)",
        started.elapsed()
    );
    assert!(
        grew_mib < 20.0,
        "gatewayd's PSS grew by {grew_mib:.1} MiB over 2,000 sessions of one token"
    );
    assert_eq!(sessions_open(&mut scraper), PER_TOKEN as u64);
    let (older, newest) = ids.split_at(ids.len() - PER_TOKEN);
    for id in newest {
        assert!(alive(&mut agent, id), "{id}, among the newest, was ended");
    }
    for id in older.iter().step_by(50) {
        assert!(
            !alive(&mut agent, id),
            "{id} outlived {PER_TOKEN} newer ones"
        );
    }

    // A DELETE ends a session at once.
    let r = agent.call("DELETE", "/mcp", None, &in_session(&newest[0]));
    assert_eq!(r.status, 202, "{r:?}");
    assert!(!alive(&mut agent, &newest[0]));
    assert_eq!(sessions_open(&mut scraper), PER_TOKEN as u64 - 1);

    // The user's bound over both tokens: the second token's sessions end the first's
    // least recently used ones past it.
    let mut other = bob.token(&["mcp"]);
    let others: Vec<String> = (0..PER_TOKEN).map(|_| open_session(&mut other)).collect();
    assert_eq!(sessions_open(&mut scraper), PER_USER as u64);
    let agents_left = newest[1..]
        .iter()
        .filter(|id| alive(&mut agent, id))
        .count();
    assert_eq!(agents_left, PER_USER - PER_TOKEN);
    for id in &others {
        assert!(alive(&mut other, id), "{id} was ended");
    }

    // Every session of the second token busy, its stream open: one more is refused.
    let streams: Vec<_> = others
        .iter()
        .map(|id| {
            let s = other.sse_get("/mcp", &in_session(id)[1..]);
            assert_eq!(s.status, 200, "GET in {id}: {}", s.error_text);
            s
        })
        .collect();
    let r = initialize(&mut other);
    assert_eq!((r.status, r.code().as_str()), (429, "quota"), "{r:?}");
    assert!(
        r.message()
            .contains(&format!("gateway.mcp_sessions_per_token = {PER_TOKEN}")),
        "{r:?}"
    );
    // Past the idle time the idle ones have ended; the busy ones have not.
    std::thread::sleep(IDLE + Duration::from_secs(2));
    assert_eq!(sessions_open(&mut scraper), PER_TOKEN as u64);
    assert_eq!(initialize(&mut other).status, 429);

    // The streams closed, the sessions are idle, and end; then a new one opens.
    drop(streams);
    let deadline = Instant::now() + IDLE + Duration::from_secs(10);
    while sessions_open(&mut scraper) > 0 {
        assert!(Instant::now() < deadline, "idle sessions never ended");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(!alive(&mut other, &others[0]));
    let id = open_session(&mut other);
    assert!(alive(&mut other, &id));
    assert_eq!(sessions_open(&mut scraper), 1);
    stack.stop();
}

/// One token could send requests at /mcp as fast as it liked, and rmcp kept each answered
/// request's messages for a minute: the gateway held whatever one agent made it hold.
/// Each token now has a rate (`gateway.mcp_requests_per_s`, bursts of twice that): past
/// it a request is refused with 429 and `Retry-After`, naming the setting; another token
/// is not held back, and the first gets in again once it waited.
#[test]
fn mcp_requests_are_rate_limited_per_token() {
    const RATE: u64 = 5;
    let stack = StackBuilder::new()
        .env("ARGOS_GATEWAY__MCP_REQUESTS_PER_S", &RATE.to_string())
        .start();
    let (_admin, mut bob) = stack.admin_and_user();
    let mut agent = bob.token(&["mcp"]);
    let mut other = bob.token(&["mcp"]);
    let id = open_session(&mut agent);
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let started = Instant::now();
    let replies: Vec<Reply> = (0..4 * RATE)
        .map(|_| agent.call("POST", "/mcp", Some(&ping), &in_session(&id)))
        .collect();
    let took = started.elapsed().as_secs_f64();
    let answered = replies.iter().filter(|r| r.status == 200).count() as u64;
    let refused: Vec<&Reply> = replies.iter().filter(|r| r.status == 429).collect();
    assert_eq!(answered + refused.len() as u64, 4 * RATE, "{replies:?}");
    // The burst (the `initialize` took one of it) and RATE a second over the time the
    // requests really took.
    let bound = 2 * RATE - 1 + (RATE as f64 * took).ceil() as u64;
    assert!(
        (2 * RATE - 1..=bound).contains(&answered) && !refused.is_empty(),
        "{answered} of {} answered at {RATE}/s with bursts of {} in {took:.2} s (at most {bound})",
        4 * RATE,
        2 * RATE
    );
    for r in &refused {
        assert_eq!(r.code(), "rate", "{r:?}");
        assert!(
            r.message()
                .contains(&format!("gateway.mcp_requests_per_s = {RATE}")),
            "{r:?}"
        );
        let wait: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=2).contains(&wait), "{r:?}");
    }
    // Another token of the same user has its own budget.
    open_session(&mut other);
    // Waited for, the rate lets the first one in again.
    std::thread::sleep(Duration::from_millis(1_100));
    assert!(alive(&mut agent, &id));
    stack.stop();
}

/// A user who makes many tokens does not multiply the rate: their tokens share
/// `gateway.mcp_requests_per_user_s`, and another user is not held by it.
#[test]
fn mcp_requests_are_rate_limited_per_user_over_all_their_tokens() {
    const RATE: u64 = 5;
    let stack = StackBuilder::new()
        .env("ARGOS_GATEWAY__MCP_REQUESTS_PER_S", "0")
        .env("ARGOS_GATEWAY__MCP_REQUESTS_PER_USER_S", &RATE.to_string())
        .start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    // Six tokens, made first; then each opens a session and pings, and the sessions ping
    // on in turn until the user's budget runs out however many tokens share it. The
    // limiter lets through its burst (2 × RATE) and RATE a second after it: the bound is
    // taken over the time the requests really took, so a slow machine proves it too.
    let mut agents: Vec<Web> = (0..6).map(|_| bob.token(&["mcp"])).collect();
    let refused = |r: &Reply| {
        assert_eq!(r.code(), "rate", "{r:?}");
        assert!(
            r.message()
                .contains(&format!("gateway.mcp_requests_per_user_s = {RATE}")),
            "{r:?}"
        );
    };
    let started = Instant::now();
    let mut statuses = Vec::new();
    let mut sessions = Vec::new();
    'asking: for round in 0..8 {
        for (i, agent) in agents.iter_mut().enumerate() {
            if round == 0 {
                let r = initialize(agent);
                statuses.push(r.status);
                if r.status == 429 {
                    refused(&r);
                    break 'asking;
                }
                sessions.push(r.header("mcp-session-id").unwrap().to_string());
            }
            let r = agent.call("POST", "/mcp", Some(&ping), &in_session(&sessions[i]));
            statuses.push(r.status);
            if r.status == 429 {
                refused(&r);
                break 'asking;
            }
        }
    }
    let took = started.elapsed().as_secs_f64();
    let answered = statuses.iter().filter(|s| **s == 200).count() as u64;
    let bound = 2 * RATE + (RATE as f64 * took).ceil() as u64;
    assert!(
        statuses.contains(&429) && answered <= bound,
        "{answered} requests of one user's 6 tokens answered at {RATE}/s in {took:.2} s (at most {bound}): {statuses:?}"
    );
    // Another user's token has its own budget.
    let mut other = admin.token(&["mcp"]);
    open_session(&mut other);
    stack.stop();
}
