//! Background jobs through the gateway and jobd, with the real execd behind them: the
//! risk gate by place, approvals, cancels (a verified kill, a withdrawal), limits, who
//! sees what, the output after the end and live, events; and kill -9 of jobd, of execd
//! and of both while jobs are queued, waiting for approval, running and ending — every
//! job reaches its true end with its output, and none runs twice.

use std::time::{Duration, Instant};

use argos_tests::StackBuilder;
use argos_tests::web::Web;
use serde_json::{Value, json};

/// `GET /api/jobs/{id}` until `done` says so (within `secs`).
fn wait_job(web: &mut Web, id: &str, secs: u64, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let r = web.get(&format!("/api/jobs/{id}"));
        assert_eq!(r.status, 200, "{r:?}");
        let v = r.json();
        if done(&v["job"]) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "job {id} never got there: {}",
            v["job"]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn state_is(s: &'static str) -> impl Fn(&Value) -> bool {
    move |j| j["state"] == s
}

fn start(web: &mut Web, body: Value) -> Value {
    let r = web.post("/api/jobs", body);
    assert_eq!(r.status, 201, "{r:?}");
    r.json()["job"].clone()
}

fn id(j: &Value) -> String {
    j["id"].as_str().unwrap().to_string()
}

/// Executions execd has for `principal` (the admin's view of the ledger).
fn executions_of(admin: &mut Web, principal: &str) -> Vec<Value> {
    let r = admin.get("/api/executions?limit=500");
    assert_eq!(r.status, 200, "{r:?}");
    r.json()["executions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["principal"] == principal)
        .cloned()
        .collect()
}

fn approve(admin: &mut Web, approval: &str) {
    let r = admin.post(
        &format!("/api/approvals/{approval}/decision"),
        json!({"decision": "approve"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn jobs_run_through_the_gate_and_are_followed_to_their_end() {
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let mut events = bob.sse_get("/api/events", &[]);
    assert_eq!(events.next_event().unwrap().event, "ready");

    // A sandbox job runs at once and ends with its output kept.
    let j = start(
        &mut bob,
        json!({"command": "echo first; sleep 1; echo second >&2; exit 3", "place": "sandbox", "name": "two lines"}),
    );
    assert_eq!(j["owner"], "bob");
    assert_eq!(j["name"], "two lines");
    assert_eq!(j["via"], "api");
    assert!(
        matches!(
            j["state"].as_str(),
            Some("running" | "succeeded" | "failed")
        ),
        "{j}"
    );
    let done = wait_job(&mut bob, &id(&j), 30, |j| j["state"] == "failed");
    assert_eq!(done["job"]["exit_code"], 3, "{done}");
    assert_eq!(done["stdout"]["text"], "first\n", "{done}");
    assert_eq!(done["stderr"]["text"], "second\n", "{done}");
    assert!(done["job"]["ended_at_ms"].as_i64().unwrap() > 0);
    // Its output, after the end, as events; the stream leaves it alone.
    let mut out = bob.sse_get(&format!("/api/jobs/{}/output", id(&j)), &[]);
    let mut seen = (String::new(), String::new());
    loop {
        let e = out.next_event().expect("an event");
        match e.event.as_str() {
            "started" => {}
            "stdout" => seen.0 += e.json()["text"].as_str().unwrap(),
            "stderr" => seen.1 += e.json()["text"].as_str().unwrap(),
            "exit" => break,
            other => panic!("{other}: {}", e.data),
        }
    }
    assert_eq!(seen, ("first\n".into(), "second\n".into()));
    // bob's event stream told him of it, to its end.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let e = events.next_event().expect("an event");
        if e.event == "job"
            && e.json()["job"]["id"] == id(&j).as_str()
            && e.json()["job"]["state"] == "failed"
        {
            break;
        }
        assert!(Instant::now() < deadline, "no job event for its end");
    }

    // A change to the host waits for an admin, runs once approved, and is on the host.
    let marker = format!("/tmp/argos-job-{}", std::process::id());
    let _ = std::fs::remove_file(&marker);
    let j = start(
        &mut bob,
        json!({"command": format!("touch {marker}"), "purpose": "mark it"}),
    );
    assert_eq!(j["state"], "awaiting_approval", "{j}");
    assert_eq!(j["place"], "host", "{j}");
    let approval = j["approval_id"].as_str().unwrap().to_string();
    assert!(!approval.is_empty());
    approve(&mut admin, &approval);
    wait_job(&mut bob, &id(&j), 30, state_is("succeeded"));
    assert!(
        std::fs::metadata(&marker).is_ok(),
        "the change reached the host"
    );
    let _ = std::fs::remove_file(&marker);

    // Denied: rejected, nothing ran.
    let j = start(
        &mut bob,
        json!({"command": format!("touch {marker}-denied")}),
    );
    let r = admin.post(
        &format!(
            "/api/approvals/{}/decision",
            j["approval_id"].as_str().unwrap()
        ),
        json!({"decision": "deny"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let v = wait_job(&mut bob, &id(&j), 10, state_is("rejected"));
    assert!(
        v["job"]["reason"].as_str().unwrap().contains("nothing ran"),
        "{v}"
    );
    assert!(std::fs::metadata(format!("{marker}-denied")).is_err());

    // Cancelled while waiting: withdrawn at execd (its approval revoked).
    let j = start(
        &mut bob,
        json!({"command": format!("touch {marker}-withdrawn")}),
    );
    let approval = j["approval_id"].as_str().unwrap().to_string();
    let r = bob.post(&format!("/api/jobs/{}/cancel", id(&j)), json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    let v = wait_job(&mut bob, &id(&j), 10, state_is("cancelled"));
    assert!(
        v["job"]["reason"].as_str().unwrap().contains("withdrawn"),
        "{v}"
    );
    let a = admin.get(&format!("/api/approvals/{approval}")).json();
    assert_eq!(a["approval"]["state"], "revoked", "{a}");
    // …and an approval that comes too late runs nothing.
    let r = admin.post(
        &format!("/api/approvals/{approval}/decision"),
        json!({"decision": "approve"}),
    );
    assert_eq!(r.status, 409, "{r:?}");

    // Cancelled while running: execd's verified kill.
    let j = start(
        &mut bob,
        json!({"command": "sleep 300", "place": "sandbox"}),
    );
    assert_eq!(j["state"], "running", "{j}");
    let r = bob.post(&format!("/api/jobs/{}/cancel", id(&j)), json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    let v = wait_job(&mut bob, &id(&j), 20, state_is("cancelled"));
    assert!(v["job"]["cancel_requested"].as_bool().unwrap());
    let e = admin
        .get(&format!(
            "/api/executions/{}",
            v["job"]["execution_id"].as_str().unwrap()
        ))
        .json();
    assert_eq!(e["execution"]["status"], "killed", "{e}");
    // Cancelling what ended changes nothing.
    let r = bob.post(&format!("/api/jobs/{}/cancel", id(&j)), json!({}));
    assert_eq!(
        (r.status, r.json()["job"]["state"].clone()),
        (200, json!("cancelled"))
    );

    // Its max runtime ends it.
    let j = start(
        &mut bob,
        json!({"command": "sleep 30", "place": "sandbox", "max_runtime_s": 1}),
    );
    let v = wait_job(&mut bob, &id(&j), 20, state_is("timed_out"));
    assert_eq!(v["job"]["max_runtime_ms"], 1000);

    // Refused outright: a 400 naming why, and no job kept.
    let before = bob.get("/api/jobs?limit=500").json()["jobs"]
        .as_array()
        .unwrap()
        .len();
    for (body, field) in [
        (json!({"command": "ls", "cwd": "relative"}), "cwd"),
        (
            json!({"command": "touch /tmp/x", "place": "inspect"}),
            "place",
        ),
        (
            json!({"command": "ls", "env": {"LD_PRELOAD": "/x.so"}}),
            "env",
        ),
        (json!({"command": "ls", "place": "nowhere"}), "place"),
        (
            json!({"command": "ls", "max_runtime_s": 0}),
            "max_runtime_s",
        ),
        (json!({"argv": []}), "command"),
        (json!({"command": "ls", "name": "two\nlines"}), "name"),
    ] {
        let r = bob.post("/api/jobs", body.clone());
        assert_eq!(r.status, 400, "{body}: {r:?}");
        assert!(r.message().starts_with(field), "{body}: {r:?}");
    }
    let after = bob.get("/api/jobs?limit=500").json()["jobs"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(before, after, "a refused job is not kept");

    // Who sees what: bob his own; another user none of his; admins all.
    let r = admin.post(
        "/api/users",
        json!({"name": "carol", "password": argos_tests::ADMIN_PASSWORD, "role": "user"}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let mut carol = Web::new(stack.listen);
    let r = carol.post(
        "/api/login",
        json!({"name": "carol", "password": argos_tests::ADMIN_PASSWORD}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let bobs = id(&j);
    for path in [
        format!("/api/jobs/{bobs}"),
        format!("/api/jobs/{bobs}/output"),
    ] {
        assert_eq!(carol.get(&path).status, 404, "{path}");
    }
    let r = carol.post(&format!("/api/jobs/{bobs}/cancel"), json!({}));
    assert_eq!(r.status, 404, "{r:?}");
    let r = carol.get("/api/jobs?owner=bob");
    assert_eq!(
        r.json()["jobs"],
        json!([]),
        "a user's owner filter is ignored: {r:?}"
    );
    let all = admin.get("/api/jobs?owner=bob&limit=500").json();
    assert_eq!(all["jobs"].as_array().unwrap().len(), after, "{all}");
    let failed = admin.get("/api/jobs?owner=bob&state=failed").json();
    assert_eq!(failed["jobs"].as_array().unwrap().len(), 1, "{failed}");
    assert_eq!(admin.get("/api/jobs?state=done").status, 400);
    // A read-only token reads jobs and starts none.
    let mut reader = bob.token(&["read"]);
    assert_eq!(reader.get(&format!("/api/jobs/{bobs}")).status, 200);
    let r = reader.post("/api/jobs", json!({"command": "ls"}));
    assert_eq!(r.status, 403, "{r:?}");

    // Every job ran at most once: one execution each at execd.
    let jobs = admin.get("/api/jobs?owner=bob&limit=500").json()["jobs"]
        .as_array()
        .unwrap()
        .clone();
    let execs = executions_of(&mut admin, "bob");
    for j in &jobs {
        let n = execs
            .iter()
            .filter(|e| e["id"] == j["execution_id"])
            .count();
        assert_eq!(n, 1, "{j}");
    }
    assert_eq!(execs.len(), jobs.len(), "no execution without its job");
    stack.stop();
}

/// A user's running launches are bounded (quota.launches): the jobs past it wait, queued,
/// and start as the others end; jobs.active_per_user refuses more than that many at all.
#[test]
fn jobs_past_the_launch_quota_wait_queued_and_start_in_turn() {
    let stack = StackBuilder::new()
        .env("ARGOS_QUOTA__LAUNCHES", "2")
        .env("ARGOS_JOBS__ACTIVE_PER_USER", "5")
        .start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let jobs: Vec<Value> = (0..5)
        .map(|i| {
            start(
                &mut bob,
                json!({"command": format!("sleep 1; echo {i}"), "place": "sandbox"}),
            )
        })
        .collect();
    let states: Vec<&str> = jobs.iter().map(|j| j["state"].as_str().unwrap()).collect();
    assert_eq!(&states[..2], ["running", "running"], "{jobs:?}");
    assert_eq!(&states[2..], ["queued", "queued", "queued"], "{jobs:?}");
    assert!(
        jobs[2]["reason"]
            .as_str()
            .unwrap()
            .contains("quota.launches"),
        "{}",
        jobs[2]
    );
    let r = bob.post("/api/jobs", json!({"command": "true", "place": "sandbox"}));
    assert_eq!(r.status, 429, "{r:?}");
    assert!(r.message().contains("jobs.active_per_user"), "{r:?}");
    for (i, j) in jobs.iter().enumerate() {
        let v = wait_job(&mut bob, &id(j), 30, state_is("succeeded"));
        assert_eq!(v["stdout"]["text"], format!("{i}\n"), "{v}");
    }
    assert_eq!(executions_of(&mut admin, "bob").len(), 5);
    stack.stop();
}

/// kill -9 of jobd, of execd, and of both, with jobs queued, waiting for an approval,
/// running, and ending while jobd is down: every job reaches its true end with its output
/// and exit code, each ran exactly once, and nothing was signalled on a guess.
#[test]
fn jobs_survive_kill_9_of_jobd_of_execd_and_of_both() {
    let mut stack = StackBuilder::new()
        .env("ARGOS_QUOTA__LAUNCHES", "3")
        .start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let login = |stack: &argos_tests::Stack, name: &str| {
        let mut w = Web::new(stack.listen);
        let r = w.post(
            "/api/login",
            json!({"name": name, "password": argos_tests::ADMIN_PASSWORD}),
        );
        assert_eq!(r.status, 200, "{r:?}");
        w
    };
    let marker = format!("/tmp/argos-job-crash-{}", std::process::id());
    let _ = std::fs::remove_file(&marker);
    // Running long enough to span the crashes; ending while jobd is down; waiting for an
    // approval; queued behind the quota.
    let long = start(
        &mut bob,
        json!({"command": "sleep 6; echo long done", "place": "sandbox"}),
    );
    let short = start(
        &mut bob,
        json!({"command": "sleep 1; echo short done; exit 7", "place": "sandbox"}),
    );
    let third = start(
        &mut bob,
        json!({"command": "sleep 2; echo third", "place": "sandbox"}),
    );
    let queued = start(
        &mut bob,
        json!({"command": "echo queued ran", "place": "sandbox"}),
    );
    let gated = start(
        &mut bob,
        json!({"command": format!("echo once >> {marker}"), "purpose": "append"}),
    );
    assert_eq!(
        [&long, &short, &third, &queued, &gated].map(|j| j["state"].as_str().unwrap()),
        [
            "running",
            "running",
            "running",
            "queued",
            "awaiting_approval"
        ]
    );

    // jobd dies; `short` and `third` end while it is down.
    stack.crash_and_restart("jobd");
    std::thread::sleep(Duration::from_secs(2));
    let mut bob = login(&stack, "bob");
    let mut admin2 = login(&stack, "root-admin");
    let v = wait_job(&mut bob, &id(&short), 30, |j| j["state"] == "failed");
    assert_eq!(
        (v["job"]["exit_code"].clone(), v["stdout"]["text"].clone()),
        (json!(7), json!("short done\n"))
    );
    let v = wait_job(&mut bob, &id(&third), 30, state_is("succeeded"));
    assert_eq!(v["stdout"]["text"], "third\n");
    // The queued one got its turn once the others ended.
    let v = wait_job(&mut bob, &id(&queued), 30, state_is("succeeded"));
    assert_eq!(v["stdout"]["text"], "queued ran\n");

    // execd dies while `long` runs: its shim lives on and is adopted again.
    stack.crash_and_restart("execd");
    let mut bob = login(&stack, "bob");
    let mut admin3 = login(&stack, "root-admin");
    let v = wait_job(&mut bob, &id(&long), 30, |j| j["state"] != "running");
    assert_eq!(v["job"]["state"], "succeeded", "{v}");
    assert_eq!(v["stdout"]["text"], "long done\n");

    // Both die while the gated job waits: approved afterwards, it runs once.
    let again = start(
        &mut bob,
        json!({"command": "sleep 4; echo survived", "place": "sandbox"}),
    );
    stack.crash_all_and_restart(&["jobd", "execd"]);
    let mut bob = login(&stack, "bob");
    let mut admin4 = login(&stack, "root-admin");
    let v = wait_job(&mut bob, &id(&gated), 30, |j| j["state"] != "starting");
    assert_eq!(v["job"]["state"], "awaiting_approval", "{v}");
    approve(&mut admin4, v["job"]["approval_id"].as_str().unwrap());
    wait_job(&mut bob, &id(&gated), 30, state_is("succeeded"));
    let v = wait_job(&mut bob, &id(&again), 30, |j| j["state"] != "running");
    assert_eq!(v["job"]["state"], "succeeded", "{v}");
    assert_eq!(v["stdout"]["text"], "survived\n");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "once\n",
        "the approved change ran exactly once"
    );
    let _ = std::fs::remove_file(&marker);

    // One execution per job, no more.
    let jobs = admin4.get("/api/jobs?owner=bob&limit=500").json()["jobs"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(jobs.len(), 6);
    let execs = executions_of(&mut admin4, "bob");
    assert_eq!(execs.len(), 6, "{execs:?}");
    for j in &jobs {
        assert_eq!(j["generation"], 1);
        assert_eq!(
            execs
                .iter()
                .filter(|e| e["id"] == j["execution_id"])
                .count(),
            1,
            "{j}"
        );
    }
    let _ = (&mut admin, &mut admin2, &mut admin3);
    stack.stop();
}

/// What a compromised jobd or mcpd can do with execution ids it chooses: asking again
/// answers the same execution and never runs a second (whatever the command says the
/// second time); another requester's id, an id not of now, or not a UUID v7 is refused;
/// and neither can see, withdraw or kill what the other's role asked for.
#[test]
fn a_chosen_execution_id_runs_once_and_only_for_its_requester() {
    use argos_tests::{JOB_UID, MCP_UID, probe_as};
    let stack = StackBuilder::new().start();
    let execd = stack.socket("execd");
    let as_jobd = |principal: &str, args: &[&str]| {
        let mut a = vec!["--principal", principal];
        a.extend_from_slice(args);
        probe_as(&execd, JOB_UID, &a)
    };
    let id = uuid::Uuid::now_v7().to_string();
    let first = as_jobd("bob", &["--request-run", "sandbox", &id, "sleep 2"]);
    assert_eq!(
        (first["ok"].clone(), first["id"].clone()),
        (json!(true), json!(id)),
        "{first}"
    );
    assert_eq!(first["deduplicated"], false, "{first}");
    for command in ["sleep 2", "echo something else"] {
        let again = as_jobd("bob", &["--request-run", "sandbox", &id, command]);
        assert_eq!(again["id"], id.as_str(), "{again}");
        assert_eq!(again["deduplicated"], true, "{again}");
    }
    // Not the same requester: another principal through jobd, or mcpd.
    let r = as_jobd("alice", &["--request-run", "sandbox", &id, "id"]);
    assert_eq!(r["code"], "InvalidArgument", "{r}");
    assert!(
        r["message"].as_str().unwrap().contains("another requester"),
        "{r}"
    );
    let r = probe_as(
        &execd,
        MCP_UID,
        &["--principal", "bob", "--request-run", "sandbox", &id, "id"],
    );
    assert_eq!(r["code"], "InvalidArgument", "{r}");
    // Ids that place themselves elsewhere in time, or are not v7.
    // A UUID v7 whose time is three days ago: its first 48 bits are that time in ms.
    let then_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        - 3 * 24 * 3600 * 1000;
    let hex = format!("{then_ms:012x}");
    let old = format!(
        "{}-{}{}",
        &hex[..8],
        &hex[8..12],
        &uuid::Uuid::now_v7().to_string()[13..]
    );
    for bad in [
        old,
        "0b5e9c3e-94c4-4a5e-8f2b-0c6c8e1d9a10".into(),
        "x".into(),
    ] {
        let r = as_jobd("bob", &["--request-run", "sandbox", &bad, "id"]);
        assert_eq!(r["code"], "InvalidArgument", "{bad}: {r}");
        assert!(
            r["message"].as_str().unwrap().starts_with("execution_id"),
            "{r}"
        );
    }
    // A change waits for its approval, once, however often it is asked.
    let gated = uuid::Uuid::now_v7().to_string();
    let a = as_jobd(
        "bob",
        &["--request-run", "host", &gated, "touch /etc/argos-never"],
    );
    let b = as_jobd(
        "bob",
        &["--request-run", "host", &gated, "touch /etc/argos-never"],
    );
    assert!(a["approval"].is_string(), "{a}");
    assert_eq!(a["approval"], b["approval"], "{a} {b}");
    // A different id with the same command is its own approval (a job is not merged
    // into another's).
    let other = uuid::Uuid::now_v7().to_string();
    let c = as_jobd(
        "bob",
        &["--request-run", "host", &other, "touch /etc/argos-never"],
    );
    assert!(c["approval"].is_string(), "{c}");
    assert_ne!(a["approval"], c["approval"], "{a} {c}");
    // mcpd can neither withdraw nor kill what jobd asked for; jobd withdraws its own.
    let r = probe_as(&execd, MCP_UID, &["--kill", &gated, "x"]);
    assert_eq!(r["code"], "NotFound", "{r}");
    let r = probe_as(&execd, MCP_UID, &["--kill", &id, "x"]);
    assert_eq!(r["code"], "NotFound", "{r}");
    let r = as_jobd("bob", &["--kill", &gated, "x"]);
    assert_eq!(r["ok"], true, "{r}");
    let rejected = argos_proto::exec::v1::ExecutionStatus::Rejected as i32;
    assert_eq!(r["status"], rejected, "{r}");
    // Exactly one execution per id in the ledger, and the first command is what ran.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let exec = stack.exec();
        let e = exec.get(&id, false).await.unwrap().execution.unwrap();
        assert!(e.argv.join(" ").contains("sleep 2"), "{e:?}");
        let all = exec
            .list(argos_proto::exec::v1::ListRequest {
                principal: "bob".into(),
                page_size: 500,
                ..Default::default()
            })
            .await
            .unwrap()
            .executions;
        assert_eq!(all.len(), 3, "{all:?}");
    });
    assert!(std::fs::metadata("/etc/argos-never").is_err());
    stack.stop();
}

/// `argosctl jobs` and `argosctl tasks` at the console, with an API token.
#[test]
fn argosctl_starts_shows_lists_and_cancels_jobs_and_runs_tasks() {
    let stack = StackBuilder::new().start();
    let mut admin = stack.admin();
    let url = format!("http://{}", stack.listen);
    let r = admin.post(
        "/api/tokens",
        json!({"name": "console", "scopes": ["read", "exec", "approve"]}),
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
    let (code, out, err) = ctl(&["jobs", "list"]);
    assert_eq!((code, out.trim()), (Some(0), "no jobs"), "{err}");
    let (code, out, err) = ctl(&[
        "jobs",
        "start",
        "echo from the console",
        "--place",
        "sandbox",
        "--name",
        "console job",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let id = out.split_whitespace().next().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    let shown = loop {
        let (code, out, err) = ctl(&["jobs", "show", &id]);
        if code == Some(0) {
            break out;
        }
        assert_eq!(code, Some(3), "not ended yet, or: {out}{err}");
        assert!(Instant::now() < deadline, "{out}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        shown.contains("succeeded") && shown.contains("from the console"),
        "{shown}"
    );
    let (_, out, _) = ctl(&["jobs", "start", "sleep 300", "--place", "sandbox"]);
    let long = out.split_whitespace().next().unwrap().to_string();
    let (code, out, err) = ctl(&["jobs", "list", "--active"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&long) && !out.contains(&id), "{out}");
    let (code, out, err) = ctl(&["jobs", "cancel", &long]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&long), "{out}");
    // Launched again: generation 2 of the same job; one not ended is refused.
    let (code, out, err) = ctl(&["jobs", "relaunch", &long]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&long) && out.contains("generation 2"), "{out}");
    let (code, _, err) = ctl(&["jobs", "relaunch", &long]);
    assert_eq!(code, Some(2), "not ended yet, said why: {err}");
    assert!(err.contains("not ended"), "{err}");
    let (code, _, err) = ctl(&["jobs", "cancel", &long]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = ctl(&["jobs", "start", "touch /x", "--place", "inspect"]);
    assert_eq!(code, Some(2), "refused, said why: {err}");
    assert!(err.contains("place"), "{err}");
    // Tasks: listed, run now.
    let r = admin.post(
        "/api/tasks",
        json!({"name": "console task", "command": "true", "place": "sandbox"}),
    );
    let task = r.json()["task"]["id"].as_str().unwrap().to_string();
    let (code, out, err) = ctl(&["tasks", "list"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("console task") && out.contains("approved"),
        "{out}"
    );
    let (code, out, err) = ctl(&["tasks", "run", &task]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.split_whitespace().count() >= 2, "{out}");
    let (code, _, err) = ctl(&["tasks", "approve", &task]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--version"), "{err}");
    stack.stop();
}
