//! Tasks through the gateway, jobd and execd: schedules that fire on time and as their
//! overlap policy says, pause and resume, manual runs, versions approved by an admin
//! (execd's standing approval, checked on every run), what a plain user's task waits
//! for, and what a compromised jobd can and cannot do with a standing approval.

use std::time::{Duration, Instant};

use argos_tests::web::Web;
use argos_tests::{JOB_UID, StackBuilder, probe_as};
use serde_json::{Value, json};

fn runs(web: &mut Web, task: &str) -> Vec<Value> {
    let r = web.get(&format!("/api/jobs?task_id={task}&limit=500"));
    assert_eq!(r.status, 200, "{r:?}");
    r.json()["jobs"].as_array().unwrap().clone()
}

fn wait_runs(web: &mut Web, task: &str, secs: u64, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let r = runs(web, task);
        if done(&r) {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "task {task}'s runs never got there: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn ended(r: &[Value]) -> usize {
    r.iter()
        .filter(|j| !matches!(j["state"].as_str(), Some("queued" | "starting" | "running")))
        .count()
}

#[test]
fn an_admins_task_runs_on_its_schedule_and_only_as_approved() {
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let marker = format!("/tmp/argos-task-{}", std::process::id());
    let _ = std::fs::remove_file(&marker);

    // Every 2 seconds, as root on the host: the admin's save is its approval.
    let r = admin.post(
        "/api/tasks",
        json!({"name": "tick", "command": format!("echo ran >> {marker}"), "place": "host",
               "schedule": {"cron": "*/2 * * * * *", "overlap": "allow"}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let t = r.json()["task"].clone();
    let id = t["id"].as_str().unwrap().to_string();
    assert_eq!(
        (t["version"].clone(), t["approved"].clone()),
        (json!(1), json!(true)),
        "{t}"
    );
    assert_eq!(t["approved_by"], "root-admin");
    assert!(t["next_run_at_ms"].as_i64().unwrap() > 0, "{t}");
    let standing = t["standing_approval_id"].as_str().unwrap().to_string();
    let done = wait_runs(&mut admin, &id, 20, |r| {
        r.iter().filter(|j| j["state"] == "succeeded").count() >= 2
    });
    for j in &done {
        assert_eq!(
            (j["trigger"].as_str(), j["task_version"].as_u64()),
            (Some("schedule"), Some(1)),
            "{j}"
        );
        assert_eq!(j["place"], "host", "{j}");
        assert_eq!(j["scheduled_for_ms"].as_i64().unwrap() % 2000, 0, "{j}");
    }
    let fires: std::collections::BTreeSet<i64> = done
        .iter()
        .map(|j| j["scheduled_for_ms"].as_i64().unwrap())
        .collect();
    assert_eq!(fires.len(), done.len(), "one run per fire");

    // Paused: nothing more fires; resumed: it goes on.
    let r = admin.post(&format!("/api/tasks/{id}/pause"), json!({}));
    assert_eq!(
        (r.status, r.json()["task"]["next_run_at_ms"].clone()),
        (200, json!(0)),
        "{r:?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let before = runs(&mut admin, &id).len();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(runs(&mut admin, &id).len(), before, "a paused task fired");
    let r = admin.post(&format!("/api/tasks/{id}/resume"), json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    wait_runs(&mut admin, &id, 10, |r| r.len() > before);

    // A compromised jobd cannot stretch the standing approval: another command, another
    // owner, or after its revocation, execd runs nothing.
    let execd = stack.socket("execd");
    let ask = |principal: &str, command: &str| {
        probe_as(
            &execd,
            JOB_UID,
            &[
                "--principal",
                principal,
                "--standing",
                &standing,
                "--request-run",
                "host",
                &uuid::Uuid::now_v7().to_string(),
                command,
            ],
        )
    };
    let r = ask("root-admin", "touch /etc/argos-task-evil");
    assert_eq!(r["code"], "InvalidArgument", "{r}");
    assert!(
        r["message"].as_str().unwrap().contains("does not cover"),
        "{r}"
    );
    let r = ask("bob", &format!("echo ran >> {marker}"));
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("not this requester"),
        "{r}"
    );
    // (The same command with another time limit is another request, too.)
    let r = ask("root-admin", &format!("echo ran >> {marker}"));
    assert!(
        r["message"].as_str().unwrap().contains("does not cover"),
        "{r}"
    );

    // Deleted: its standing approval is revoked; nothing more runs.
    let r = admin.call("DELETE", &format!("/api/tasks/{id}"), None, &[]);
    assert_eq!(r.status, 200, "{r:?}");
    let r = ask("root-admin", &format!("echo ran >> {marker}"));
    assert!(r["message"].as_str().unwrap().contains("revoked"), "{r}");
    std::thread::sleep(Duration::from_secs(1));
    let after = runs(&mut admin, &id);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        runs(&mut admin, &id).len(),
        after.len(),
        "a removed task fired"
    );
    let lines = std::fs::read_to_string(&marker).unwrap().lines().count();
    let succeeded = after.iter().filter(|j| j["state"] == "succeeded").count();
    assert_eq!(lines, succeeded, "each run ran once, and nothing else did");
    let _ = std::fs::remove_file(&marker);

    // A plain user's task waits for an admin; an edit needs a new approval.
    let r = bob.post(
        "/api/tasks",
        json!({"name": "mine", "command": "echo bobs", "place": "sandbox"}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let t = r.json()["task"].clone();
    let bid = t["id"].as_str().unwrap().to_string();
    assert_eq!(t["approved"], false, "{t}");
    let r = bob.post(&format!("/api/tasks/{bid}/run"), json!({}));
    assert_eq!(r.status, 409, "{r:?}");
    assert!(r.message().contains("not approved"), "{r:?}");
    let r = bob.post(&format!("/api/tasks/{bid}/approve"), json!({"version": 1}));
    assert_eq!(r.status, 403, "a user approves nothing: {r:?}");
    // An agent's token never approves, even an admin's with `approve`.
    let mut agent = admin.token(&["agent", "approve", "read"]);
    let r = agent.post(&format!("/api/tasks/{bid}/approve"), json!({"version": 1}));
    assert_eq!(r.status, 403, "{r:?}");
    let r = admin.post(&format!("/api/tasks/{bid}/approve"), json!({"version": 1}));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["task"]["approved"], true);
    let v1_standing = r.json()["task"]["standing_approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = bob.post(&format!("/api/tasks/{bid}/run"), json!({}));
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.json()["job"]["trigger"], "manual");
    wait_runs(&mut bob, &bid, 20, |r| {
        r.iter().any(|j| j["state"] == "succeeded")
    });
    let r = bob.call(
        "PUT",
        &format!("/api/tasks/{bid}"),
        Some(&json!({"name": "mine", "command": "echo changed", "place": "sandbox"})),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        (
            r.json()["task"]["version"].clone(),
            r.json()["task"]["approved"].clone()
        ),
        (json!(2), json!(false))
    );
    assert_eq!(
        bob.post(&format!("/api/tasks/{bid}/run"), json!({})).status,
        409
    );
    // The version before no longer runs even at execd: its standing approval is revoked.
    let r = probe_as(
        &execd,
        JOB_UID,
        &[
            "--principal",
            "bob",
            "--standing",
            &v1_standing,
            "--request-run",
            "sandbox",
            &uuid::Uuid::now_v7().to_string(),
            "echo bobs",
        ],
    );
    assert!(r["message"].as_str().unwrap().contains("revoked"), "{r}");
    let r = admin.post(&format!("/api/tasks/{bid}/approve"), json!({"version": 1}));
    assert_eq!(r.status, 409, "a stale version: {r:?}");
    // Admins do not edit others' tasks; other users do not see them.
    let r = admin.call(
        "PUT",
        &format!("/api/tasks/{bid}"),
        Some(&json!({"name": "x", "command": "id"})),
        &[],
    );
    assert_eq!(r.status, 403, "{r:?}");
    let r = admin.post(
        "/api/users",
        json!({"name": "carol", "password": argos_tests::ADMIN_PASSWORD, "role": "user"}),
    );
    assert_eq!(r.status, 201);
    let mut carol = Web::new(stack.listen);
    carol.post(
        "/api/login",
        json!({"name": "carol", "password": argos_tests::ADMIN_PASSWORD}),
    );
    assert_eq!(carol.get(&format!("/api/tasks/{bid}")).status, 404);
    assert_eq!(
        carol
            .post(&format!("/api/tasks/{bid}/run"), json!({}))
            .status,
        404
    );
    assert_eq!(carol.get("/api/tasks").json()["tasks"], json!([]));

    // A deleted user's tasks go with them: their webhook stops, and an account made later
    // under the name inherits no task, job or delivery.
    let r = bob.post(
        &format!("/api/tasks/{bid}/webhook"),
        json!({"mode": "token"}),
    );
    let hook_token = r.json()["secret"].as_str().unwrap().to_string();
    let r = admin.call("DELETE", "/api/users/bob", None, &[]);
    assert_eq!(r.status, 204, "{r:?}");
    let mut anyone = Web::new(stack.listen);
    let r = anyone.raw(
        "POST",
        &format!("/hooks/{bid}"),
        Some(b"{}".to_vec()),
        true,
        &[("authorization", &format!("Bearer {hook_token}"))],
    );
    assert_eq!(r.status, 401, "{r:?}");
    let r = admin.post(
        "/api/users",
        json!({"name": "bob", "password": argos_tests::ADMIN_PASSWORD, "role": "user"}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let mut new_bob = Web::new(stack.listen);
    new_bob.post(
        "/api/login",
        json!({"name": "bob", "password": argos_tests::ADMIN_PASSWORD}),
    );
    assert_eq!(new_bob.get("/api/tasks").json()["tasks"], json!([]));
    assert_eq!(new_bob.get("/api/jobs").json()["jobs"], json!([]));
    assert_eq!(
        new_bob.get("/api/deliveries").json()["deliveries"],
        json!([])
    );

    // Bad input names its field; a schedule's next fires can be previewed.
    for (body, field) in [
        (
            json!({"name": "x", "command": "id", "schedule": {"cron": "61 * * * *"}}),
            "cron",
        ),
        (
            json!({"name": "x", "command": "id", "schedule": {"cron": "0 3 * * *", "timezone": "Mars/Base"}}),
            "timezone",
        ),
        (
            json!({"name": "x", "command": "id", "schedule": {"cron": "0 3 * * *", "overlap": "sometimes"}}),
            "overlap",
        ),
        (json!({"name": "", "command": "id"}), "name"),
        (
            json!({"name": "x", "command": "touch /x", "place": "inspect"}),
            "place",
        ),
    ] {
        let r = admin.post("/api/tasks", body.clone());
        assert_eq!(r.status, 400, "{body}: {r:?}");
        assert!(r.message().starts_with(field), "{body}: {r:?}");
    }
    let r = admin.get("/api/tasks/preview?cron=30%202%20*%20*%20*&timezone=Europe/Berlin&count=3");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["at_ms"].as_array().unwrap().len(), 3);
    assert_eq!(admin.get("/api/tasks/preview?cron=nope").status, 400);
    stack.stop();
}

/// Overlap `skip` never starts a second run beside one not yet ended (a manual run then
/// is a 409); `queue` waits its turn; a jobd killed with -9 mid-schedule starts each fire
/// at most once when it comes back.
#[test]
fn overlap_policies_and_a_schedule_across_kill_9() {
    let mut stack = StackBuilder::new().start();
    let mut admin = stack.admin();
    let r = admin.post(
        "/api/tasks",
        json!({"name": "slow", "command": "sleep 3", "place": "sandbox",
               "schedule": {"cron": "* * * * * *", "overlap": "skip"}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let skip = r.json()["task"]["id"].as_str().unwrap().to_string();
    wait_runs(&mut admin, &skip, 20, |r| {
        r.iter().any(|j| j["state"] == "running")
    });
    let r = admin.post(&format!("/api/tasks/{skip}/run"), json!({}));
    assert_eq!(r.status, 409, "{r:?}");
    std::thread::sleep(Duration::from_secs(4));
    let seen = runs(&mut admin, &skip);
    assert!(
        seen.iter().filter(|j| j["state"] == "running").count() <= 1,
        "skip never runs two at once: {seen:?}"
    );
    admin.post(&format!("/api/tasks/{skip}/pause"), json!({}));

    // queue: manual runs line up behind each other.
    let r = admin.post(
        "/api/tasks",
        json!({"name": "line", "command": "sleep 1", "place": "sandbox",
               "schedule": {"cron": "0 0 1 1 *", "overlap": "queue"}}),
    );
    let queue = r.json()["task"]["id"].as_str().unwrap().to_string();
    let a = admin
        .post(&format!("/api/tasks/{queue}/run"), json!({}))
        .json()["job"]
        .clone();
    let b = admin
        .post(&format!("/api/tasks/{queue}/run"), json!({}))
        .json()["job"]
        .clone();
    assert_eq!(b["state"], "queued", "{b}");
    let done = wait_runs(&mut admin, &queue, 30, |r| r.len() == 2 && ended(r) == 2);
    let by_id = |id: &Value| done.iter().find(|j| j["id"] == *id).unwrap().clone();
    let (a, b) = (by_id(&a["id"]), by_id(&b["id"]));
    assert!(
        b["started_at_ms"].as_i64().unwrap() >= a["ended_at_ms"].as_i64().unwrap(),
        "queued behind: {a} {b}"
    );

    // Every 2 s, allow; kill -9 of jobd in the middle.
    let r = admin.post(
        "/api/tasks",
        json!({"name": "steady", "command": "true", "place": "sandbox",
               "schedule": {"cron": "*/2 * * * * *", "overlap": "allow", "catch_up": "all"}}),
    );
    let steady = r.json()["task"]["id"].as_str().unwrap().to_string();
    wait_runs(&mut admin, &steady, 20, |r| !r.is_empty());
    stack.crash_and_restart("jobd");
    let mut admin = Web::new(stack.listen);
    let r = admin.post(
        "/api/login",
        json!({"name": "root-admin", "password": argos_tests::ADMIN_PASSWORD}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let all = wait_runs(&mut admin, &steady, 30, |r| {
        r.len() >= 4 && ended(r) == r.len()
    });
    let fires: std::collections::BTreeSet<i64> = all
        .iter()
        .map(|j| j["scheduled_for_ms"].as_i64().unwrap())
        .collect();
    assert_eq!(fires.len(), all.len(), "a fire ran twice: {all:?}");
    assert!(all.iter().all(|j| j["state"] == "succeeded"), "{all:?}");
    stack.stop();
}

/// A webhook signature as a sender makes it: HMAC-SHA256 of "{timestamp}.{body}".
fn sign(secret: &str, ts: &str, body: &str) -> String {
    use hmac::Mac as _;
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    m.update(format!("{ts}.{body}").as_bytes());
    format!("sha256={}", hex::encode(m.finalize().into_bytes()))
}

/// `POST /hooks/{task}`: a token or a signature is the credential; a bad token, a bad or
/// stale signature, a replay, another task's id — refused, and nothing runs; a paused task
/// or a busy one under overlap `skip` is a 409.
#[test]
fn webhooks_run_a_task_only_with_its_secret() {
    let stack = StackBuilder::new().start();
    let mut admin = stack.admin();
    let r = admin.post(
        "/api/tasks",
        json!({"name": "hooked", "command": "sleep 2", "place": "sandbox",
               "schedule": {"cron": "0 0 1 1 *", "overlap": "skip"}}),
    );
    let id = r.json()["task"]["id"].as_str().unwrap().to_string();
    let r = admin.post(
        &format!("/api/tasks/{id}/webhook"),
        json!({"mode": "token"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let token = r.json()["secret"].as_str().unwrap().to_string();
    assert_eq!(r.json()["url"], format!("/hooks/{id}"));
    assert_eq!(r.json()["task"]["webhook"]["mode"], "token");
    assert!(
        !admin.get(&format!("/api/tasks/{id}")).text.contains(&token),
        "shown once"
    );
    let hook = format!("/hooks/{id}");
    let mut anyone = Web::new(stack.listen);
    let post = |w: &mut Web, path: &str, headers: &[(&str, &str)], body: &str| {
        w.raw("POST", path, Some(body.as_bytes().to_vec()), true, headers)
    };
    let bearer = format!("Bearer {token}");
    for (path, headers) in [
        (hook.as_str(), vec![]),
        (hook.as_str(), vec![("authorization", "Bearer nope")]),
        (
            "/hooks/01a2357f-0000-7000-8000-000000000000",
            vec![("authorization", bearer.as_str())],
        ),
        ("/hooks/not-an-id", vec![("authorization", bearer.as_str())]),
    ] {
        let r = post(&mut anyone, path, &headers, "{}");
        assert_eq!(r.status, 401, "{path} {headers:?}: {r:?}");
        assert_eq!(r.message(), "unauthorized");
    }
    assert!(
        runs(&mut admin, &id).is_empty(),
        "a refused delivery ran something"
    );
    let r = post(&mut anyone, &hook, &[("authorization", &bearer)], "{}");
    assert_eq!(r.status, 202, "{r:?}");
    let first = r.json()["job"]["id"].as_str().unwrap().to_string();
    // Busy under skip: 409, nothing more runs.
    let r = post(&mut anyone, &hook, &[("authorization", &bearer)], "{}");
    assert_eq!(r.status, 409, "{r:?}");
    let done = wait_runs(&mut admin, &id, 20, |r| ended(r) == 1);
    assert_eq!(done.len(), 1);
    assert_eq!(
        (
            done[0]["id"].as_str(),
            done[0]["trigger"].as_str(),
            done[0]["state"].as_str()
        ),
        (Some(first.as_str()), Some("webhook"), Some("succeeded"))
    );

    // Signed deliveries; the old token stops working.
    let r = admin.post(&format!("/api/tasks/{id}/webhook"), json!({"mode": "hmac"}));
    let secret = r.json()["secret"].as_str().unwrap().to_string();
    let r = post(&mut anyone, &hook, &[("authorization", &bearer)], "{}");
    assert_eq!(r.status, 401, "{r:?}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let body = r#"{"ref":"refs/heads/main"}"#;
    let ts = now.to_string();
    let sig = sign(&secret, &ts, body);
    let stale = (now - 600).to_string();
    let stale_sig = sign(&secret, &stale, body);
    for (why, ts, sig, body) in [
        ("another body", ts.as_str(), sig.as_str(), "{}"),
        (
            "another secret",
            ts.as_str(),
            &*sign("not the secret", &ts, body),
            body,
        ),
        ("stale", stale.as_str(), stale_sig.as_str(), body),
        ("no timestamp", "", sig.as_str(), body),
    ] {
        let r = post(
            &mut anyone,
            &hook,
            &[("x-argos-timestamp", ts), ("x-hub-signature-256", sig)],
            body,
        );
        assert_eq!(r.status, 401, "{why}: {r:?}");
    }
    let headers = [
        ("x-argos-timestamp", ts.as_str()),
        ("x-hub-signature-256", sig.as_str()),
    ];
    let r = post(&mut anyone, &hook, &headers, body);
    assert_eq!(r.status, 202, "{r:?}");
    let r = post(&mut anyone, &hook, &headers, body);
    assert_eq!(r.status, 409, "a replay: {r:?}");
    assert!(r.message().contains("already taken"), "{r:?}");
    wait_runs(&mut admin, &id, 20, |r| r.len() == 2 && ended(r) == 2);

    // Paused: 409, nothing runs.
    admin.post(&format!("/api/tasks/{id}/pause"), json!({}));
    let ts2 = (now + 1).to_string();
    let sig2 = sign(&secret, &ts2, body);
    let r = post(
        &mut anyone,
        &hook,
        &[("x-argos-timestamp", &ts2), ("x-hub-signature-256", &sig2)],
        body,
    );
    assert_eq!(r.status, 409, "{r:?}");
    // Removed: 401.
    let r = admin.call("DELETE", &format!("/api/tasks/{id}/webhook"), None, &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.json()["task"]["webhook"].is_null());
    let ts3 = (now + 2).to_string();
    let sig3 = sign(&secret, &ts3, body);
    let r = post(
        &mut anyone,
        &hook,
        &[("x-argos-timestamp", &ts3), ("x-hub-signature-256", &sig3)],
        body,
    );
    assert_eq!(r.status, 401, "{r:?}");
    assert_eq!(
        runs(&mut admin, &id).len(),
        2,
        "only the two good deliveries ran"
    );
    stack.stop();
}

/// A task whose action is an MCP tool call, made by jobd through mcpd as the task's owner:
/// an admin's save approves it (nothing at execd runs it: no standing approval); a plain
/// user's waits for an admin, and an edit waits again; the result is kept, marked
/// untrusted; a tool mcpd does not broker is refused with nothing called; a cancel ends a
/// call in flight; and a call in flight when jobd is killed is `lost`, never made again.
#[test]
fn a_tasks_tool_call_runs_once_through_mcpd_as_its_owner() {
    use argos_tests::mcp_peer::Everything;
    let mut stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let _everything = Everything::brokered(&mut admin);
    let wait_end = |web: &mut Web, job: &str| -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = web.get(&format!("/api/jobs/{job}"));
            assert_eq!(r.status, 200, "{r:?}");
            let v = r.json();
            if !matches!(
                v["job"]["state"].as_str(),
                Some("queued" | "starting" | "running")
            ) {
                return v;
            }
            assert!(Instant::now() < deadline, "job {job} never ended: {v}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    // A tool call is the whole action.
    let r = admin.post(
        "/api/tasks",
        json!({"name": "both", "command": "id",
               "tool": {"name": "mcp__everything__echo"}}),
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.text.contains("tool"), "{r:?}");
    let r = admin.post(
        "/api/tasks",
        json!({"name": "bad", "tool": {"name": "echo"}}),
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.text.contains("tool.name"), "{r:?}");

    // The admin's save approves it; a run answers what the tool said, untrusted.
    let r = admin.post(
        "/api/tasks",
        json!({"name": "echo", "tool": {"name": "mcp__everything__echo",
                                        "arguments": {"message": "from a task"}}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let t = r.json()["task"].clone();
    assert_eq!(t["approved"], true, "{t}");
    assert_eq!(t["standing_approval_id"], "", "{t}");
    assert_eq!(t["tool"]["arguments"]["message"], "from a task", "{t}");
    let id = t["id"].as_str().unwrap().to_string();
    let r = admin.post(&format!("/api/tasks/{id}/run"), json!({}));
    assert_eq!(r.status, 201, "{r:?}");
    let job = r.json()["job"]["id"].as_str().unwrap().to_string();
    let v = wait_end(&mut admin, &job);
    assert_eq!(v["job"]["state"], "succeeded", "{v}");
    assert_eq!(v["job"]["tool"]["name"], "mcp__everything__echo", "{v}");
    assert!(
        v["tool_result"]["text"]
            .as_str()
            .unwrap()
            .contains("from a task"),
        "{v}"
    );
    assert_eq!(
        (
            v["tool_result"]["untrusted"].clone(),
            v["tool_result"]["server"].clone()
        ),
        (json!(true), json!("everything")),
        "{v}"
    );
    let r = admin.get(&format!("/api/jobs/{job}/output"));
    assert_eq!(r.status, 409, "{r:?}");
    stack.wait_log(
        "tool called tool=mcp__everything__echo server=everything role=job principal=root-admin",
        1,
    );

    // A plain user's tool task waits for an admin; so does each edit.
    let r = bob.post(
        "/api/tasks",
        json!({"name": "sum", "tool": {"name": "mcp__everything__get-sum",
                                       "arguments": {"a": 2, "b": 3}}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let t = r.json()["task"].clone();
    assert_eq!(t["approved"], false, "{t}");
    let bobs = t["id"].as_str().unwrap().to_string();
    let r = bob.post(&format!("/api/tasks/{bobs}/run"), json!({}));
    assert_eq!(r.status, 409, "{r:?}");
    let r = admin.post(&format!("/api/tasks/{bobs}/approve"), json!({"version": 1}));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["task"]["approved"], true, "{r:?}");
    let r = bob.post(&format!("/api/tasks/{bobs}/run"), json!({}));
    assert_eq!(r.status, 201, "{r:?}");
    let run = r.json()["job"]["id"].as_str().unwrap().to_string();
    let v = wait_end(&mut bob, &run);
    assert_eq!(v["job"]["state"], "succeeded", "{v}");
    assert_eq!(v["job"]["owner"], "bob", "{v}");
    assert!(
        v["tool_result"]["text"].as_str().unwrap().contains('5'),
        "{v}"
    );
    stack.wait_log(
        "tool called tool=mcp__everything__get-sum server=everything role=job principal=bob",
        1,
    );
    let r = bob.call(
        "PUT",
        &format!("/api/tasks/{bobs}"),
        Some(
            &json!({"name": "sum", "tool": {"name": "mcp__everything__get-sum",
                                             "arguments": {"a": 2, "b": 40}}}),
        ),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["task"]["approved"], false, "{r:?}");
    let r = bob.post(&format!("/api/tasks/{bobs}/run"), json!({}));
    assert_eq!(r.status, 409, "an edit waits for its approval: {r:?}");

    // A tool mcpd does not broker: refused, nothing called.
    let r = admin.post(
        "/api/tasks",
        json!({"name": "nothing", "tool": {"name": "mcp__everything__no-such-tool"}}),
    );
    let none = r.json()["task"]["id"].as_str().unwrap().to_string();
    let r = admin.post(&format!("/api/tasks/{none}/run"), json!({}));
    let v = wait_end(&mut admin, r.json()["job"]["id"].as_str().unwrap());
    assert_eq!(v["job"]["state"], "rejected", "{v}");
    assert!(
        v["job"]["reason"]
            .as_str()
            .unwrap()
            .contains("nothing was called"),
        "{v}"
    );

    // A long call: cancelled in flight; then another, in flight when jobd is killed.
    let long_task = |duration: u32| {
        json!({"name": "long", "tool": {"name": "mcp__everything__trigger-long-running-operation",
                                        "arguments": {"duration": duration, "steps": 2}},
               "schedule": {"cron": "0 0 1 1 *", "overlap": "queue"}})
    };
    let r = admin.post("/api/tasks", long_task(20));
    assert_eq!(r.status, 201, "{r:?}");
    let long = r.json()["task"]["id"].as_str().unwrap().to_string();
    let start_long = |web: &mut Web| -> String {
        let r = web.post(&format!("/api/tasks/{long}/run"), json!({}));
        assert_eq!(r.status, 201, "{r:?}");
        let job = r.json()["job"]["id"].as_str().unwrap().to_string();
        let deadline = Instant::now() + Duration::from_secs(20);
        while web.get(&format!("/api/jobs/{job}")).json()["job"]["state"] != "running" {
            assert!(Instant::now() < deadline, "the long call never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        job
    };
    let job = start_long(&mut admin);
    // A run queued behind it (overlap queue) is of version 1: once the task is edited,
    // that run is never made (its version no longer runs).
    let r = admin.post(&format!("/api/tasks/{long}/run"), json!({}));
    assert_eq!(r.status, 201, "{r:?}");
    let behind = r.json()["job"]["id"].as_str().unwrap().to_string();
    assert_eq!(r.json()["job"]["state"], "queued", "{r:?}");
    let r = admin.call(
        "PUT",
        &format!("/api/tasks/{long}"),
        Some(&long_task(21)),
        &[],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["task"]["version"], 2, "{r:?}");
    let r = admin.post(&format!("/api/jobs/{job}/cancel"), json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["job"]["state"], "cancelled", "{r:?}");
    let v = wait_end(&mut admin, &behind);
    assert_eq!(v["job"]["state"], "rejected", "{v}");
    assert!(
        v["job"]["reason"]
            .as_str()
            .unwrap()
            .contains("no longer runs version 1"),
        "{v}"
    );
    let job = start_long(&mut admin);
    // Its call reached mcpd (logged before it goes upstream, with the job as request id)
    // and is in flight there when jobd is killed.
    let reached = |log: &str| {
        log.lines()
            .filter(|l| l.contains("tool call tool=") && l.contains(&format!("request_id={job}")))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while reached(&stack.log()) == 0 {
        assert!(Instant::now() < deadline, "the call never reached mcpd");
        std::thread::sleep(Duration::from_millis(50));
    }
    stack.crash_and_restart("jobd");
    let v = wait_end(&mut admin, &job);
    assert_eq!(v["job"]["state"], "lost", "{v}");
    assert!(
        v["job"]["reason"]
            .as_str()
            .unwrap()
            .contains("never made again"),
        "{v}"
    );
    // Never made again: mcpd saw that job's call once.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(reached(&stack.log()), 1, "the lost call was made again");
    stack.stop();
}
