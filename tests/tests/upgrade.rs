//! What a release before wrote opens with today's code: each daemon's database and key
//! from `tests/fixtures/upgrade/<release>/` (made by that release's `argos-make-fixture`)
//! put in place of a new stack's, migrated forward on start (migrations only ever add),
//! and serving what they held: accounts and tokens, a job and its run, a task with its
//! schedule, a decided approval, an MCP server, both audit trails whole.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _, chown};
use std::time::{Duration, Instant};

use argos_tests::web::Web;
use argos_tests::{ADMIN_PASSWORD, StackBuilder, workspace_root};
use serde_json::{Value, json};

fn login(stack: &argos_tests::Stack, name: &str) -> Web {
    let mut w = Web::new(stack.listen);
    let r = w.post(
        "/api/login",
        json!({"name": name, "password": ADMIN_PASSWORD}),
    );
    assert_eq!(r.status, 200, "{name}: {r:?}");
    w
}

fn named<'a>(list: &'a Value, key: &str, name: &str) -> &'a Value {
    list[key]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == name)
        .unwrap_or_else(|| panic!("no {name:?} in {list}"))
}

#[test]
fn the_databases_release_0_1_0_wrote_open_migrate_and_serve() {
    let fixture = workspace_root().join("tests/fixtures/upgrade/0.1.0");
    let mut stack = StackBuilder::new().start();
    stack.restart_with(|root| {
        for daemon in ["execd", "gatewayd", "mcpd", "jobd"] {
            let dir = root.join("state").join(daemon);
            let owner = std::fs::metadata(&dir).unwrap();
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if [".db", ".db-wal", ".db-shm", ".key"]
                    .iter()
                    .any(|x| name.ends_with(x))
                {
                    std::fs::remove_file(e.path()).unwrap();
                }
            }
            for e in std::fs::read_dir(fixture.join(daemon)).unwrap().flatten() {
                let to = dir.join(e.file_name());
                std::fs::copy(e.path(), &to).unwrap();
                chown(&to, Some(owner.uid()), Some(owner.gid())).unwrap();
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
            }
        }
    });
    let mut admin = login(&stack, "root-admin");
    let mut bob = login(&stack, "bob");

    let jobs = bob.get("/api/jobs").json();
    let job = named(&jobs, "jobs", "kept job");
    assert_eq!(job["state"], "succeeded", "{job}");
    let tasks = admin.get("/api/tasks").json();
    let task = named(&tasks, "tasks", "kept task");
    assert_eq!(
        (
            task["approved"].clone(),
            task["schedule"]["timezone"].clone()
        ),
        (json!(true), json!("Europe/Berlin")),
        "{task}"
    );
    let tokens = admin.get("/api/tokens").json();
    named(&tokens, "tokens", "kept");
    let denied = admin.get("/api/approvals?state=denied").json();
    assert_eq!(denied["approvals"].as_array().unwrap().len(), 1, "{denied}");
    let servers = admin.get("/api/mcp/servers").json();
    assert!(
        servers["servers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == "kept"),
        "{servers}"
    );
    let v = admin.get("/api/audit/verify").json();
    assert_eq!(
        (v["execd"]["ok"].clone(), v["gateway"]["ok"].clone()),
        (json!(true), json!(true)),
        "{v}"
    );
    // And new work on the old records.
    let r = bob.post(
        "/api/jobs",
        json!({"command": "echo after the upgrade", "place": "sandbox"}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let id = r.json()["job"]["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = bob.get(&format!("/api/jobs/{id}")).json();
        if v["job"]["state"] == "succeeded" {
            assert_eq!(v["stdout"]["text"], "after the upgrade\n", "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "{v}");
        std::thread::sleep(Duration::from_millis(100));
    }
    stack.stop();
}
