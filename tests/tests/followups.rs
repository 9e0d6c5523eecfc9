//! Follow-ups when a job ends, with a real receiver: webhook deliveries signed with the
//! owner's delivery secret, retried with back-off under one delivery id, redelivered on
//! demand, across kill -9 of jobd; the SSRF guard on delivery URLs; chains started once
//! per run and edge, only on success, with cycles and other owners' tasks refused.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argos_tests::StackBuilder;
use argos_tests::web::Web;
use serde_json::{Value, json};

/// One request a receiver got: its headers (lowercase names) and body.
type Got = (HashMap<String, String>, Vec<u8>);

/// A webhook receiver on loopback: answers each POST with the next status queued (then
/// 200) and keeps what it got.
struct Receiver {
    port: u16,
    got: Arc<Mutex<Vec<Got>>>,
}

impl Receiver {
    fn start(statuses: Vec<u16>) -> Receiver {
        Self::holding_first(statuses, Duration::ZERO)
    }

    /// Like `start`, but the first request is kept waiting `hold` before it is answered
    /// (it is counted as got at once).
    fn holding_first(statuses: Vec<u16>, hold: Duration) -> Receiver {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let (kept, queue) = (got.clone(), Arc::new(Mutex::new(statuses)));
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut headers = HashMap::new();
                let mut line = String::new();
                r.read_line(&mut line).unwrap_or(0);
                loop {
                    line.clear();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = line.trim_end().split_once(": ") {
                        headers.insert(k.to_ascii_lowercase(), v.to_string());
                    }
                }
                let n: usize = headers
                    .get("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; n];
                let _ = r.read_exact(&mut body);
                let status = {
                    let mut q = queue.lock().unwrap();
                    if q.is_empty() { 200 } else { q.remove(0) }
                };
                let first = {
                    let mut got = kept.lock().unwrap();
                    got.push((headers, body));
                    got.len() == 1
                };
                if first {
                    std::thread::sleep(hold);
                }
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Receiver { port, got }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    fn wait(&self, n: usize, secs: u64) -> Vec<Got> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let got = self.got.lock().unwrap().clone();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "only {} deliveries arrived",
                got.len()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn sign(secret: &str, ts: &str, body: &[u8]) -> String {
    use hmac::Mac as _;
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    m.update(ts.as_bytes());
    m.update(b".");
    m.update(body);
    format!("sha256={}", hex::encode(m.finalize().into_bytes()))
}

fn wait_delivery(web: &mut Web, id: &str, state: &str, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let d = web.get(&format!("/api/deliveries/{id}")).json()["delivery"].clone();
        if d["state"] == state {
            return d;
        }
        assert!(Instant::now() < deadline, "delivery never {state}: {d}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn login(stack: &argos_tests::Stack, name: &str) -> Web {
    let mut w = Web::new(stack.listen);
    let r = w.post(
        "/api/login",
        json!({"name": name, "password": argos_tests::ADMIN_PASSWORD}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    w
}

#[test]
fn a_webhook_follow_up_is_signed_retried_under_one_id_and_survives_kill_9() {
    let mut stack = StackBuilder::new()
        .env("ARGOS_JOBS__DELIVER_ALLOW", "127.0.0.1")
        .start();
    let (_admin, mut bob) = stack.admin_and_user();
    // Two failures, then the receiver takes it.
    let rx = Receiver::start(vec![500, 503]);
    let r = bob.post(
        "/api/jobs",
        json!({"command": "true", "place": "sandbox", "follow_ups": {"webhook": rx.url()}}),
    );
    assert_eq!(r.status, 400, "no delivery secret yet: {r:?}");
    assert!(r.message().starts_with("follow_ups.webhook"), "{r:?}");
    let r = bob.post("/api/deliveries/secret", json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    let secret = r.json()["secret"].as_str().unwrap().to_string();
    let r = bob.post(
        "/api/jobs",
        json!({"command": "echo done", "place": "sandbox", "name": "reported",
               "follow_ups": {"webhook": rx.url()}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let job = r.json()["job"]["id"].as_str().unwrap().to_string();
    let got = rx.wait(3, 30);
    let ids: Vec<&String> = got.iter().map(|(h, _)| &h["x-argos-delivery"]).collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "one delivery id: {ids:?}");
    for (h, body) in &got {
        assert_eq!(
            h["x-hub-signature-256"],
            sign(&secret, &h["x-argos-timestamp"], body),
            "signed with bob's secret"
        );
        let v: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(v["delivery_id"], ids[0].as_str());
        assert_eq!(
            (
                v["job"]["id"].as_str(),
                v["job"]["state"].as_str(),
                v["job"]["exit_code"].as_i64()
            ),
            (Some(job.as_str()), Some("succeeded"), Some(0))
        );
    }
    let d = wait_delivery(&mut bob, ids[0], "delivered", 10);
    let statuses: Vec<u64> = d["attempt_log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [500, 503, 200], "{d}");
    let list = bob.get("/api/deliveries").json();
    assert_eq!(list["deliveries"].as_array().unwrap().len(), 1, "{list}");

    // Redelivered on demand: the same id again.
    let id = ids[0].clone();
    let r = bob.post(&format!("/api/deliveries/{id}/redeliver"), json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    let got = rx.wait(4, 20);
    assert_eq!(got[3].0["x-argos-delivery"], id);

    // Ending while jobd is down: followed up once it is back, exactly once.
    let late = Receiver::start(vec![]);
    let r = bob.post(
        "/api/jobs",
        json!({"command": "sleep 2", "place": "sandbox", "follow_ups": {"webhook": late.url()}}),
    );
    assert_eq!(r.json()["job"]["state"], "running", "{r:?}");
    stack.crash_and_restart("jobd");
    let mut bob = login(&stack, "bob");
    let got = late.wait(1, 30);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(late.got.lock().unwrap().len(), 1, "delivered once: {got:?}");
    wait_delivery(&mut bob, &got[0].0["x-argos-delivery"], "delivered", 10);

    // Failing while jobd dies: the retries go on after it, under the same id, and one
    // follow-up is recorded for the job.
    let slow = Receiver::start(vec![500, 500]);
    let r = bob.post(
        "/api/jobs",
        json!({"command": "true", "place": "sandbox", "follow_ups": {"webhook": slow.url()}}),
    );
    let job2 = r.json()["job"]["id"].as_str().unwrap().to_string();
    slow.wait(1, 30);
    stack.crash_and_restart("jobd");
    let mut bob = login(&stack, "bob");
    let got = slow.wait(3, 60);
    let first = &got[0].0["x-argos-delivery"];
    assert!(got.iter().all(|(h, _)| &h["x-argos-delivery"] == first));
    wait_delivery(&mut bob, first, "delivered", 20);
    let mine: Vec<Value> = bob.get("/api/deliveries?limit=500").json()["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["job_id"] == job2.as_str())
        .cloned()
        .collect();
    assert_eq!(
        mine.len(),
        1,
        "one follow-up per job and generation: {mine:?}"
    );

    // The SSRF guard: a metadata address is never reached; the delivery is dead at once.
    let r = bob.post(
        "/api/jobs",
        json!({"command": "true", "place": "sandbox",
               "follow_ups": {"webhook": "http://169.254.169.254/latest/meta-data/"}}),
    );
    let job3 = r.json()["job"]["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    let d = loop {
        let all = bob.get("/api/deliveries?limit=500").json()["deliveries"].clone();
        if let Some(d) = all
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["job_id"] == job3.as_str() && d["state"] == "dead")
        {
            break d.clone();
        }
        assert!(Instant::now() < deadline, "{all}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        d["last_error"].as_str().unwrap().starts_with("refused"),
        "{d}"
    );
    // Another user sees none of it.
    stack.stop();
}

#[test]
fn a_chain_starts_once_per_run_only_on_success_and_refuses_cycles() {
    let stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let task = |web: &mut Web, body: Value| -> String {
        let r = web.post("/api/tasks", body);
        assert_eq!(r.status, 201, "{r:?}");
        r.json()["task"]["id"].as_str().unwrap().to_string()
    };
    let then = task(
        &mut admin,
        json!({"name": "then", "command": "echo chained", "place": "sandbox"}),
    );
    let first = task(
        &mut admin,
        json!({"name": "first", "command": "echo first", "place": "sandbox",
               "follow_ups": {"then": [then]}}),
    );
    let fails = task(
        &mut admin,
        json!({"name": "fails", "command": "false", "place": "sandbox",
               "follow_ups": {"then": [then]}}),
    );
    let runs = |web: &mut Web, t: &str| -> Vec<Value> {
        web.get(&format!("/api/jobs?task_id={t}&limit=500")).json()["jobs"]
            .as_array()
            .unwrap()
            .clone()
    };
    let r = admin.post(&format!("/api/tasks/{first}/run"), json!({}));
    let run = r.json()["job"]["id"].as_str().unwrap().to_string();
    let r = admin.post(&format!("/api/tasks/{fails}/run"), json!({}));
    assert_eq!(r.status, 201, "{r:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let chained = loop {
        let c = runs(&mut admin, &then);
        if c.iter().any(|j| j["state"] == "succeeded") {
            break c;
        }
        assert!(Instant::now() < deadline, "never chained: {c:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    std::thread::sleep(Duration::from_secs(2));
    let chained_again = runs(&mut admin, &then);
    assert_eq!(
        chained_again.len(),
        1,
        "once, and not after the failed run: {chained_again:?}"
    );
    assert_eq!(
        (
            chained[0]["trigger"].as_str(),
            chained[0]["chained_from"].as_str()
        ),
        (Some("chain"), Some(run.as_str()))
    );
    let r = admin.get(&format!("/api/jobs/{}", chained[0]["id"].as_str().unwrap()));
    assert_eq!(r.json()["stdout"]["text"], "chained\n");
    let d = admin.get("/api/deliveries?state=delivered").json();
    assert!(
        d["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["kind"] == "chain" && d["target"] == then.as_str()),
        "{d}"
    );

    // A cycle is refused when saved, and so is another owner's task.
    let r = admin.call(
        "PUT",
        &format!("/api/tasks/{then}"),
        Some(
            &json!({"name": "then", "command": "echo chained", "place": "sandbox",
                     "follow_ups": {"then": [first]}}),
        ),
        &[],
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.message().contains("cycle"), "{r:?}");
    let r = admin.call(
        "PUT",
        &format!("/api/tasks/{then}"),
        Some(
            &json!({"name": "then", "command": "echo chained", "place": "sandbox",
                     "follow_ups": {"then": [then]}}),
        ),
        &[],
    );
    assert_eq!(r.status, 400, "a task chained to itself: {r:?}");
    let r = bob.post(
        "/api/tasks",
        json!({"name": "mine", "command": "true", "place": "sandbox",
               "follow_ups": {"then": [then]}}),
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.message().starts_with("follow_ups.then"), "{r:?}");
    // Bob sees none of the admin's deliveries.
    assert_eq!(bob.get("/api/deliveries").json()["deliveries"], json!([]));
    stack.stop();
}

/// A job launched again is its next generation: the same job, a new execution through
/// the gate, and follow-ups of its own — a second delivery under a new id saying
/// generation 2, and a chain edge started again. A stale generation, a job not ended, a
/// task's run and another user's job are refused.
#[test]
fn a_job_launched_again_is_a_new_generation_with_its_own_follow_ups() {
    let stack = StackBuilder::new()
        .env("ARGOS_JOBS__DELIVER_ALLOW", "127.0.0.1")
        .start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let rx = Receiver::start(vec![]);
    let r = bob.post("/api/deliveries/secret", json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    let r = bob.post(
        "/api/jobs",
        json!({"command": "echo once; exit 3", "place": "sandbox",
               "follow_ups": {"webhook": rx.url()}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let first = r.json()["job"].clone();
    let job = first["id"].as_str().unwrap().to_string();
    let wait_ended = |web: &mut Web, generation: u64| -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let v = web.get(&format!("/api/jobs/{job}")).json();
            let j = &v["job"];
            if j["generation"] == generation
                && !matches!(j["state"].as_str(), Some("queued" | "starting" | "running"))
            {
                return v;
            }
            assert!(Instant::now() < deadline, "{v}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let v = wait_ended(&mut bob, 1);
    assert_eq!(
        (v["job"]["state"].as_str(), v["job"]["exit_code"].as_i64()),
        (Some("failed"), Some(3)),
        "{v}"
    );
    rx.wait(1, 30);

    // Only the generation that ended, by its owner (or an admin), once.
    let again = |web: &mut Web, generation: u64| {
        web.post(
            &format!("/api/jobs/{job}/relaunch"),
            json!({"generation": generation}),
        )
    };
    let r = again(&mut bob, 2);
    assert_eq!(r.status, 409, "{r:?}");
    let r = again(&mut bob, 1);
    assert_eq!(r.status, 200, "{r:?}");
    let second = r.json()["job"].clone();
    assert_eq!(second["id"], job.as_str());
    assert_eq!(second["generation"], 2, "{second}");
    assert_ne!(second["execution_id"], first["execution_id"], "{second}");
    let r = again(&mut bob, 1);
    assert_eq!(r.status, 409, "a repeated request launches it once: {r:?}");
    let v = wait_ended(&mut bob, 2);
    assert_eq!(v["job"]["exit_code"], 3, "{v}");
    assert_eq!(v["stdout"]["text"], "once\n", "its own output: {v}");

    // Each generation is followed up on its own: two deliveries, two ids.
    let got = rx.wait(2, 30);
    let bodies: Vec<Value> = got
        .iter()
        .map(|(_, b)| serde_json::from_slice(b).unwrap())
        .collect();
    assert_eq!(
        bodies
            .iter()
            .map(|b| b["job"]["generation"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2],
        "{bodies:?}"
    );
    assert_ne!(got[0].0["x-argos-delivery"], got[1].0["x-argos-delivery"]);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        rx.got.lock().unwrap().len(),
        2,
        "one delivery per generation"
    );
    let r = bob.get(&format!("/api/deliveries?job_id={job}"));
    assert_eq!(r.status, 200, "{r:?}");
    let generations: Vec<u64> = r.json()["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["generation"].as_u64().unwrap())
        .collect();
    assert_eq!(generations, [2, 1], "this job's, newest first: {r:?}");
    let r = bob.get("/api/deliveries?job_id=not-a-job");
    assert_eq!(r.status, 400, "{r:?}");

    // Not another user's job; not a task's run.
    let r = admin.post(
        "/api/tasks",
        json!({"name": "next", "command": "echo chained", "place": "sandbox"}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let task = r.json()["task"]["id"].as_str().unwrap().to_string();
    let r = admin.post(
        "/api/jobs",
        json!({"command": "true", "place": "sandbox", "follow_ups": {"then": [task]}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let admins = r.json()["job"]["id"].as_str().unwrap().to_string();
    let r = bob.post(
        &format!("/api/jobs/{admins}/relaunch"),
        json!({"generation": 1}),
    );
    assert_eq!(r.status, 404, "{r:?}");
    let chained = |web: &mut Web, n: usize| -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let runs = web.get(&format!("/api/jobs?task_id={task}")).json()["jobs"]
                .as_array()
                .unwrap()
                .clone();
            if runs.len() >= n && runs.iter().all(|j| j["state"] == "succeeded") {
                return runs;
            }
            assert!(Instant::now() < deadline, "{runs:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let runs = chained(&mut admin, 1);
    let run = runs[0]["id"].as_str().unwrap().to_string();
    let r = admin.post(
        &format!("/api/jobs/{run}/relaunch"),
        json!({"generation": 1}),
    );
    assert_eq!(r.status, 409, "{r:?}");
    assert!(r.message().contains("run the task"), "{r:?}");
    // The chain edge starts again for the new generation, once.
    let r = admin.post(
        &format!("/api/jobs/{admins}/relaunch"),
        json!({"generation": 1}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let runs = chained(&mut admin, 2);
    std::thread::sleep(Duration::from_secs(1));
    let runs_now = admin.get(&format!("/api/jobs?task_id={task}")).json()["jobs"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!((runs.len(), runs_now), (2, 2), "{runs:?}");
    assert!(runs.iter().all(|j| j["chained_from"] == admins.as_str()));
    stack.stop();
}

/// Deliveries and chains across kill -9 of jobd and execd together: a delivery in flight
/// when both die is made again under its id (at least once) and recorded once; a job with
/// a chain that ends across the crash starts its chained task once.
#[test]
fn follow_ups_survive_kill_9_of_jobd_and_execd_together() {
    let mut stack = StackBuilder::new()
        .env("ARGOS_JOBS__DELIVER_ALLOW", "127.0.0.1")
        .start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let r = bob.post("/api/deliveries/secret", json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    let rx = Receiver::holding_first(vec![], Duration::from_secs(5));
    let r = bob.post(
        "/api/jobs",
        json!({"command": "true", "place": "sandbox", "follow_ups": {"webhook": rx.url()}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let job = r.json()["job"]["id"].as_str().unwrap().to_string();
    // A task to chain, and a run that ends while both are down.
    let r = admin.post(
        "/api/tasks",
        json!({"name": "after", "command": "echo chained", "place": "sandbox"}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let task = r.json()["task"]["id"].as_str().unwrap().to_string();
    let r = admin.post(
        "/api/jobs",
        json!({"command": "sleep 3", "place": "sandbox", "follow_ups": {"then": [task]}}),
    );
    assert_eq!(r.json()["job"]["state"], "running", "{r:?}");
    let first = rx.wait(1, 30);
    stack.crash_all_and_restart(&["jobd", "execd"]);
    let mut bob = login(&stack, "bob");
    let mut admin = login(&stack, "root-admin");

    // The delivery: made again under the same id, delivered, one follow-up for the job.
    let got = rx.wait(2, 60);
    let id = &first[0].0["x-argos-delivery"];
    assert!(
        got.iter().all(|(h, _)| &h["x-argos-delivery"] == id),
        "{got:?}"
    );
    wait_delivery(&mut bob, id, "delivered", 30);
    let mine: Vec<Value> = bob.get("/api/deliveries?limit=500").json()["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["job_id"] == job.as_str())
        .cloned()
        .collect();
    assert_eq!(mine.len(), 1, "{mine:?}");

    // The chain: one run of the task, once the job ended.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let runs = admin.get(&format!("/api/jobs?task_id={task}")).json()["jobs"].clone();
        let runs = runs.as_array().unwrap();
        if runs.iter().any(|j| j["state"] == "succeeded") {
            break;
        }
        assert!(Instant::now() < deadline, "{runs:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    let runs = admin.get(&format!("/api/jobs?task_id={task}")).json()["jobs"].clone();
    assert_eq!(runs.as_array().unwrap().len(), 1, "started once: {runs}");
    stack.stop();
}
