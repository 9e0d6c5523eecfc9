//! The gateway's streams: a command's output as server-sent events (offsets, resume, kill
//! when the client leaves), `/api/events` and who sees what on it, and timeouts.

use argos_tests::StackBuilder;
use argos_tests::web::Web;
use serde_json::json;

/// Reads events until `stop` says so or the stream ends; returns them.
fn collect(
    sse: &mut argos_tests::web::Sse,
    stop: impl Fn(&[argos_tests::web::SseEvent]) -> bool,
) -> Vec<argos_tests::web::SseEvent> {
    let mut out = Vec::new();
    while let Some(e) = sse.next_event() {
        out.push(e);
        if stop(&out) {
            break;
        }
    }
    out
}

fn texts(events: &[argos_tests::web::SseEvent], kind: &str) -> String {
    events
        .iter()
        .filter(|e| e.event == kind)
        .map(|e| e.json()["text"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_streamed_command_sends_started_output_with_offsets_and_exit() {
    let stack = StackBuilder::new().start();
    let (mut admin, _) = stack.admin_and_user();
    let mut sse = admin.sse(
        "/api/shell/stream",
        &json!({"command": "echo a; echo b >&2; echo c", "timeout_ms": 10000}),
        &[],
    );
    assert_eq!(sse.status, 200, "{}", sse.error_text);
    let events = collect(&mut sse, |_| false);
    assert_eq!(events.first().unwrap().event, "started", "{events:?}");
    let exit = events.last().unwrap();
    assert_eq!(exit.event, "exit", "{events:?}");
    assert_eq!(exit.json()["execution"]["status"], "succeeded");
    assert_eq!(texts(&events, "stdout"), "a\nc\n");
    assert_eq!(texts(&events, "stderr"), "b\n");
    let last_id = events.iter().rev().find_map(|e| e.id.clone()).unwrap();
    assert_eq!(last_id, "4:2", "the id is <stdout offset>:<stderr offset>");
    // A character split between two reads of the output arrives whole; a stray invalid
    // byte at the end arrives as U+FFFD.
    let mut sse = admin.sse(
        "/api/shell/stream",
        &json!({"command": "printf '\\303'; sleep 0.3; printf '\\251\\n'; printf 'a\\377'", "timeout_ms": 10000}),
        &[],
    );
    let events = collect(&mut sse, |_| false);
    assert_eq!(texts(&events, "stdout"), "é\na\u{FFFD}", "{events:?}");
    // However the output was cut into chunks, no event starts inside a character, and the
    // last id counts every byte.
    for e in events.iter().filter(|e| e.event == "stdout") {
        let at = e.json()["offset"].as_u64().unwrap();
        assert!(
            [0, 3, 4].contains(&at),
            "an event starts at byte {at}: {events:?}"
        );
    }
    let last = events.iter().rev().find_map(|e| e.id.clone());
    assert_eq!(last.as_deref(), Some("5:0"), "{events:?}");
    // A user may not stream; a cross-site page may not either.
    let r = admin.call(
        "POST",
        "/api/shell/stream",
        Some(&json!({"command": "true"})),
        &[("sec-fetch-site", "cross-site")],
    );
    assert_eq!(r.status, 403, "{r:?}");
    stack.stop();
}

#[test]
fn a_stream_client_that_leaves_gets_its_workload_killed_unless_it_resumes() {
    let stack = StackBuilder::new()
        .env("ARGOS_GATEWAY__STREAM_RESUME_S", "1")
        .start();
    let (mut admin, _) = stack.admin_and_user();
    // Leave and come back within the grace: nothing lost, nothing repeated, not killed.
    let cmd = "for i in $(seq 1 30); do echo line$i; sleep 0.1; done";
    let mut sse = admin.sse(
        "/api/shell/stream",
        &json!({"command": cmd, "timeout_ms": 30000}),
        &[],
    );
    let first = collect(&mut sse, |ev| {
        ev.iter().filter(|e| e.event == "stdout").count() >= 3
    });
    let id = first[0].json()["execution"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let last_id = first.iter().rev().find_map(|e| e.id.clone()).unwrap();
    drop(sse);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut again = admin.sse(
        "/api/shell/stream",
        &json!({"resume": id}),
        &[("last-event-id", last_id.as_str())],
    );
    assert_eq!(again.status, 200, "{}", again.error_text);
    let rest = collect(&mut again, |_| false);
    let all = texts(&first, "stdout") + &texts(&rest, "stdout");
    let want: String = (1..=30).map(|i| format!("line{i}\n")).collect();
    assert_eq!(all, want, "lost or repeated across the resume");
    assert_eq!(
        rest.last().unwrap().json()["execution"]["status"],
        "succeeded"
    );

    // Leave for good: the workload is killed, and execd says so.
    let mut sse = admin.sse(
        "/api/shell/stream",
        &json!({"command": "sleep 60", "timeout_ms": 120000}),
        &[],
    );
    let started = sse.next_event().unwrap();
    let id = started.json()["execution"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    drop(sse);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let e = loop {
        let e = admin.get(&format!("/api/executions/{id}")).json()["execution"].clone();
        if e["status"] != "running" || std::time::Instant::now() > deadline {
            break e;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(e["status"], "killed", "{e}");
    assert_eq!(e["teardown_complete"], true, "{e}");
    stack.stop();
}

/// The promise to end a stream's command when its client leaves lived in the gateway's
/// memory only: the gateway gone (its clients' connections with it) before the grace
/// ran out, a host command ran to its end. Each stream is now kept in the gateway's
/// database, and a restarted gateway gives every one it finds the grace, then kills it;
/// a client that resumes in time keeps its command.
#[test]
fn a_stream_whose_client_left_is_killed_across_a_gateway_restart() {
    let mut stack = StackBuilder::new()
        .env("ARGOS_GATEWAY__STREAM_RESUME_S", "2")
        .start();
    let (mut admin, _) = stack.admin_and_user();
    let start = |admin: &mut Web, cmd: &str| -> String {
        let mut sse = admin.sse(
            "/api/shell/stream",
            &json!({"command": cmd, "timeout_ms": 300000}),
            &[],
        );
        assert_eq!(sse.status, 200, "{}", sse.error_text);
        let started = sse.next_event().unwrap();
        started.json()["execution"]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let left = start(&mut admin, "sleep 120");
    let resumed = start(&mut admin, "sleep 6; echo done");
    stack.crash_and_restart("gatewayd");
    let mut again = admin.sse("/api/shell/stream", &json!({"resume": resumed}), &[]);
    assert_eq!(again.status, 200, "{}", again.error_text);
    let rest = collect(&mut again, |_| false);
    assert_eq!(
        rest.last().unwrap().json()["execution"]["status"],
        "succeeded",
        "the resumed command was not left to finish: {rest:?}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let e = loop {
        let e = admin.get(&format!("/api/executions/{left}")).json()["execution"].clone();
        if e["status"] != "running" || std::time::Instant::now() > deadline {
            break e;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(
        e["status"], "killed",
        "the left command outlived the restart: {e}"
    );
    stack.stop();
}

/// A gateway that dies between execd's Start and keeping the command's id kept nothing
/// of it: the command outlived the promise to end it once its client left. The start's
/// reference is now kept before the start (given to execd as `client_ref`), and the next
/// gateway finds the command by it and ends it after the grace. Here the gateway dies in
/// that moment: the reference is in its database, the command runs in execd under it.
#[test]
fn a_stream_command_whose_start_was_not_kept_is_killed_by_the_next_gateway() {
    let mut stack = StackBuilder::new()
        .env("ARGOS_GATEWAY__STREAM_RESUME_S", "2")
        .start();
    let (mut admin, _) = stack.admin_and_user();
    let reference = format!("stream-test-{}", std::process::id());
    let started = argos_tests::runs::rt()
        .block_on(async {
            stack
                .exec()
                .start(argos_proto::exec::v1::RunRequest {
                    command: "sleep 120".into(),
                    timeout_ms: Some(300_000),
                    client_ref: reference.clone(),
                    ..Default::default()
                })
                .await
        })
        .unwrap();
    let bad = argos_tests::runs::rt()
        .block_on(async {
            stack
                .exec()
                .start(argos_proto::exec::v1::RunRequest {
                    command: "true".into(),
                    client_ref: "not/a ref".into(),
                    ..Default::default()
                })
                .await
        })
        .unwrap_err();
    assert!(bad.message.contains("client_ref"), "{bad:?}");
    stack.crash_all_and_restart_with(&["gatewayd"], |root| {
        let db = root.join("state/gatewayd/gateway.db");
        let owner = std::fs::metadata(&db).unwrap();
        argos_tests::runs::rt().block_on(async {
            use sqlx::{ConnectOptions, Connection};
            let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&db)
                .connect()
                .await
                .unwrap();
            sqlx::query(
                "INSERT INTO shell_stream_starts (client_ref, started_at_ms) VALUES (?, 0)",
            )
            .bind(&reference)
            .execute(&mut conn)
            .await
            .unwrap();
            conn.close().await.unwrap();
        });
        use std::os::unix::fs::MetadataExt;
        for suffix in ["", "-wal", "-shm"] {
            let p = std::path::PathBuf::from(format!("{}{suffix}", db.display()));
            if p.exists() {
                std::os::unix::fs::chown(&p, Some(owner.uid()), Some(owner.gid())).unwrap();
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let e = loop {
        let e = admin.get(&format!("/api/executions/{}", started.id)).json()["execution"].clone();
        if e["status"] != "running" || std::time::Instant::now() > deadline {
            break e;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(
        e["status"], "killed",
        "the command whose start was not kept outlived the gateway: {e}"
    );
    stack.stop();
}

/// `/api/events`: execution changes as they happen; admins see every execution, a user
/// only their own; cross-site and anonymous subscribers are refused.
#[test]
fn events_stream_execution_changes_to_those_who_may_see_them() {
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let mut anon = Web::new(stack.listen);
    assert_eq!(anon.sse_get("/api/events", &[]).status, 401);
    let own = format!("http://{}", stack.listen);
    let evil = admin.sse_get("/api/events", &[("origin", "http://evil.example")]);
    assert_eq!(evil.status, 403, "{}", evil.error_text);
    let mut events = admin.sse_get("/api/events", &[("origin", own.as_str())]);
    assert_eq!(events.status, 200, "{}", events.error_text);
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
    let r = admin.post("/api/shell/exec", json!({"command": "echo x"}));
    let id = r.json()["execution"]["id"].as_str().unwrap().to_string();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let e = events.next_event().unwrap();
        if e.event == "execution" && e.json()["execution"]["id"] == id.as_str() {
            seen.push(
                e.json()["execution"]["status"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
    }
    assert_eq!(seen, vec!["running", "succeeded"]);
    // bob is no admin: the admin's execution is not his to see.
    match bob_saw.recv_timeout(std::time::Duration::from_secs(2)) {
        Err(_) => {}
        Ok(e) => assert!(
            e.event != "execution",
            "a user saw another's execution: {e:?}"
        ),
    }
    stack.stop();
}

/// `timeout_ms: 0` means no limit of the caller's own, and works: where the profile
/// requires a wall clock (agent, host), the profile's maximum is the limit.
#[test]
fn timeout_zero_means_no_limit_of_the_callers_own() {
    let stack = StackBuilder::new().start();
    let (mut admin, _) = stack.admin_and_user();
    for (profile, max_s) in [("agent", 86_400u64), ("host", 604_800)] {
        let r = admin.post(
            "/api/shell/exec",
            json!({"command": "sleep 0.2; echo done", "timeout_ms": 0, "profile": profile}),
        );
        assert_eq!(r.status, 200, "{r:?}");
        let v = r.json();
        assert_eq!(v["stdout"]["text"], "done\n", "{v}");
        assert_eq!(v["execution"]["status"], "succeeded", "{v}");
        let id = v["execution"]["id"].as_str().unwrap();
        let receipt: serde_json::Value = serde_json::from_slice(
            &std::fs::read(
                stack
                    .root()
                    .join("state/execd/launches")
                    .join(id)
                    .join("spec.json"),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(receipt["timeout_ms"], max_s * 1000, "{profile}");
    }
    // Above the profile's maximum is still refused, naming the field.
    let r = admin.post(
        "/api/shell/exec",
        json!({"command": "true", "timeout_ms": 86_400_001u64}),
    );
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "invalid_argument"),
        "{r:?}"
    );
    assert!(r.text.contains("timeout_ms"), "{r:?}");
    stack.stop();
}
