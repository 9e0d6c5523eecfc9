//! argos-make-fixture DIR: each daemon's state as this release leaves it on disk — its
//! database and key, with a little of everything in them (users, a token, a job that ran,
//! a task, an approval decided, an MCP server) — copied into DIR/<daemon>/. Kept in the
//! repository per release, so that `tests/tests/upgrade.rs` opens what a release before
//! wrote with the code of today. Run as root, from a built workspace.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use argos_tests::StackBuilder;
use serde_json::json;

fn main() {
    argos_tests::answer_help(
        "usage: argos-make-fixture DIR\n  start a stack, give it a little of everything, stop it and copy each daemon's database and key into DIR/<daemon>/",
    );
    let Some(out) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: argos-make-fixture DIR");
        std::process::exit(2);
    };
    let mut stack = StackBuilder::new().start();
    let (mut admin, mut bob) = stack.admin_and_user();
    let r = admin.post("/api/tokens", json!({"name": "kept", "scopes": ["read"]}));
    assert_eq!(r.status, 201, "{r:?}");
    let r = bob.post(
        "/api/jobs",
        json!({"name": "kept job", "command": "echo from the fixture", "place": "sandbox"}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let job = r.json()["job"]["id"].as_str().unwrap().to_string();
    let r = admin.post(
        "/api/tasks",
        json!({"name": "kept task", "command": "echo task", "place": "sandbox",
               "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Berlin"}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    // A change asked for and denied: an approval decided, in both audit trails.
    let mut agent = bob.token(&["agent"]);
    let r = agent.post(
        "/api/agent/run",
        json!({"command": "touch /etc/argos-fixture", "purpose": "fixture"}),
    );
    assert!(r.status < 300, "{r:?}");
    let approval = r.json()["approval"]["id"].as_str().unwrap().to_string();
    let r = admin.post(
        &format!("/api/approvals/{approval}/decision"),
        json!({"decision": "deny", "note": "fixture"}),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let r = admin.post(
        "/api/mcp/servers",
        json!({"id": "kept", "name": "Kept", "local": true,
               "streamable_http": {"url": "http://127.0.0.1:9/mcp"}}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while bob.get(&format!("/api/jobs/{job}")).json()["job"]["state"] != "succeeded" {
        assert!(Instant::now() < deadline, "the fixture's job never ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    stack.restart_with(|root| {
        for daemon in ["execd", "gatewayd", "mcpd", "jobd"] {
            let from = root.join("state").join(daemon);
            let to = out.join(daemon);
            std::fs::create_dir_all(&to).unwrap();
            for e in std::fs::read_dir(&from).unwrap().flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if e.path().is_file()
                    && [".db", ".db-wal", ".key"].iter().any(|x| name.ends_with(x))
                {
                    std::fs::copy(e.path(), to.join(&*name)).unwrap();
                }
            }
            // What the WAL holds goes into the database file itself: one file per store.
            for e in std::fs::read_dir(&to).unwrap().flatten() {
                if e.path().extension().is_some_and(|x| x == "db") {
                    checkpoint(&e.path());
                }
            }
            for e in std::fs::read_dir(&to).unwrap().flatten() {
                println!("{daemon}/{}", e.file_name().to_string_lossy());
            }
        }
    });
    stack.stop();
}

/// Folds `db`'s write-ahead log into it and removes the log.
fn checkpoint(db: &std::path::Path) {
    use sqlx::ConnectOptions as _;
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(db)
            .connect()
            .await
            .unwrap();
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query("PRAGMA journal_mode = DELETE")
            .execute(&mut conn)
            .await
            .unwrap();
        drop(conn);
    });
    for side in ["-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(side);
        let _ = std::fs::remove_file(p);
    }
}
