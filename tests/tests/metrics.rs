//! The gateway's Prometheus metrics (`/metrics`), read by the Prometheus project's own
//! parser (PyPI `prometheus-client`, its strict OpenMetrics parser): for admins only (a
//! token with `metrics`, which opens nothing else, or `read`); launches by status and profile, approvals by state, request
//! latency by route template, streams and terminals open, each daemon's up state — and
//! a daemon that does not answer is reported down, not left out.

use std::process::{Command, Stdio};
use std::time::Duration;

use argos_tests::web::Web;
use argos_tests::{StackBuilder, workspace_root};
use serde_json::{Value, json};

/// The samples of an OpenMetrics text, as the Prometheus client's parser reads them.
fn parse(text: &str) -> Vec<Value> {
    let python = workspace_root().join("target/tools/venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: scripts/install-test-tools installs it",
        python.display()
    );
    let mut child = Command::new(python)
        .arg(workspace_root().join("tests/metrics/parse.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Prometheus parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The value of the sample `name` whose labels include every pair of `labels`.
fn value(samples: &[Value], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| s["name"] == name && labels.iter().all(|(k, v)| s["labels"][*k] == *v))
        .map(|s| s["value"].as_f64().unwrap())
}

fn scrape(web: &mut Web) -> Vec<Value> {
    let r = web.get("/metrics");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.starts_with("application/openmetrics-text")),
        "{r:?}"
    );
    parse(&r.text)
}

#[test]
fn metrics_are_for_admins_and_say_what_the_stack_does() {
    argos_tests::require_root("the metrics test (the stack runs privilege-separated)");
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let mut scraper = admin.token(&["metrics"]);
    let mut agent = admin.token(&["agent"]);

    // Who may read them.
    assert_eq!(Web::new(stack.listen).get("/metrics").status, 401);
    assert_eq!(bob.token(&["read"]).get("/metrics").status, 403);
    assert_eq!(admin.token(&["exec"]).get("/metrics").status, 403);
    assert_eq!(admin.get("/metrics").status, 200, "an admin's session too");
    assert_eq!(admin.token(&["read"]).get("/metrics").status, 200);
    assert_eq!(bob.token(&["metrics"]).get("/metrics").status, 403);
    // A scraper's token opens nothing else.
    for path in [
        "/api/executions",
        "/api/audit",
        "/api/status",
        "/api/events",
    ] {
        assert_eq!(scraper.get(path).status, 403, "{path}");
    }

    // Some work: a command that ran in the sandbox, one waiting for an approval.
    let r = agent.post(
        "/api/agent/run",
        json!({"command": "echo hi", "place": "sandbox"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let id = r.json()["execution"]["id"].as_str().unwrap().to_string();
    assert_eq!(agent.ended(&id).json()["execution"]["status"], "succeeded");
    let r = agent.post(
        "/api/agent/run",
        json!({"command": "systemctl restart nginx", "purpose": "a change, to wait"}),
    );
    assert_eq!(r.json()["approval"]["state"], "pending", "{r:?}");
    // An event stream and a terminal's WebSocket, held open while scraping.
    let events = admin.sse_get("/api/events", &[]);
    assert_eq!(events.status, 200);
    let mut term = admin.token(&["exec", "read"]);
    let r = term.post("/api/terminals", json!({"rows": 24, "cols": 80}));
    assert_eq!(r.status, 201, "{r:?}");
    let tid = r.json()["terminal"]["id"].as_str().unwrap().to_string();
    let r = term.post(&format!("/api/terminals/{tid}/ticket"), json!({}));
    let ticket = r.json()["ticket"].as_str().unwrap().to_string();
    let bearer = format!("Bearer {}", term.bearer.clone().unwrap());
    let ws = argos_tests::web::ws_connect(
        stack.listen,
        &format!("/api/terminals/{tid}/ws?ticket={ticket}"),
        &[("authorization", bearer.as_str())],
    )
    .unwrap();

    let s = scrape(&mut scraper);
    for d in ["execd", "gatewayd", "mcpd", "jobd"] {
        assert_eq!(value(&s, "argos_up", &[("daemon", d)]), Some(1.0), "{d}");
    }
    assert!(
        value(
            &s,
            "argos_launches",
            &[("status", "succeeded"), ("profile", "agent")]
        )
        .is_some_and(|n| n >= 1.0),
        "{s:?}"
    );
    assert_eq!(
        value(
            &s,
            "argos_launches",
            &[("status", "pending_approval"), ("profile", "host")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&s, "argos_approvals", &[("state", "pending")]),
        Some(1.0)
    );
    assert_eq!(value(&s, "argos_terminals_running", &[]), Some(1.0));
    assert_eq!(value(&s, "argos_terminal_sockets_open", &[]), Some(1.0));
    assert_eq!(value(&s, "argos_event_streams_open", &[]), Some(1.0));
    // Latency by route template: the run's POSTs counted under the route, not the path.
    let runs = value(
        &s,
        "argos_http_request_duration_seconds_count",
        &[
            ("method", "POST"),
            ("route", "/api/agent/run"),
            ("code", "200"),
        ],
    );
    assert_eq!(runs, Some(2.0), "{s:?}");
    let polled = value(
        &s,
        "argos_http_request_duration_seconds_count",
        &[
            ("method", "GET"),
            ("route", "/api/executions/{id}"),
            ("code", "200"),
        ],
    );
    assert!(polled.is_some_and(|n| n >= 1.0), "{s:?}");
    // No id in any label: the label sets are bounded by the routes, not the requests.
    for sample in &s {
        let labels = sample["labels"].to_string();
        assert!(!labels.contains(&id) && !labels.contains(&tid), "{labels}");
    }
    let unknown = Web::new(stack.listen).get(&format!("/nowhere/{id}"));
    assert_eq!(unknown.status, 404);
    let s = scrape(&mut scraper);
    assert!(
        value(
            &s,
            "argos_http_request_duration_seconds_count",
            &[("route", "unmatched"), ("code", "404")]
        )
        .is_some(),
        "{s:?}"
    );

    // What ends is no longer counted open.
    drop(ws);
    drop(events);
    let r = term.call("DELETE", &format!("/api/terminals/{tid}"), None, &[]);
    assert_eq!(r.status, 200, "{r:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let s = scrape(&mut scraper);
        let open = |n: &str| value(&s, n, &[]);
        if open("argos_terminal_sockets_open") == Some(0.0)
            && open("argos_event_streams_open") == Some(0.0)
            && open("argos_terminals_running") == Some(0.0)
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still open: {s:?}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // A daemon that does not answer is down, and the scrape still answers.
    let pid = nix::unistd::Pid::from_raw(stack.daemon_pid("mcpd"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let s = scrape(&mut scraper);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert_eq!(value(&s, "argos_up", &[("daemon", "mcpd")]), Some(0.0));
    assert_eq!(value(&s, "argos_up", &[("daemon", "execd")]), Some(1.0));
    stack.stop();
}
