//! Storage faults through the real daemon: its state on a small file system of its own,
//! filled until writes fail (ENOSPC), then freed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use argos_exec_client::ExecClient;
use argos_proto::exec::v1::{ExecutionStatus, ListAuditRequest, ListRequest, RunRequest};
use argos_tests::{Standalone, require_root};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A small tmpfs mounted over a daemon's state dir (holding what the dir held), taken
/// off again when dropped, whatever the test did.
struct SmallDisk {
    at: PathBuf,
}

impl SmallDisk {
    fn over(dir: &Path, size_kib: u32) -> SmallDisk {
        use std::os::unix::fs::MetadataExt as _;
        // The mount's root is the daemon's own, as the dir was (an unprivileged daemon's).
        let meta = std::fs::metadata(dir).unwrap();
        let aside = dir.with_extension("aside");
        std::fs::rename(dir, &aside).unwrap();
        std::fs::create_dir(dir).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            dir,
            Some("tmpfs"),
            nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
            Some(
                format!(
                    "size={size_kib}k,mode={:o},uid={},gid={}",
                    meta.mode() & 0o7777,
                    meta.uid(),
                    meta.gid()
                )
                .as_str(),
            ),
        )
        .unwrap();
        let disk = SmallDisk { at: dir.into() };
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", aside.display()))
            .arg(dir)
            .status()
            .unwrap();
        assert!(copied.success(), "copying the state onto the small disk");
        std::fs::remove_dir_all(&aside).unwrap();
        disk
    }

    /// Fills what is left of it; returns the filler's path.
    fn fill(&self) -> PathBuf {
        use std::io::Write as _;
        let path = self.at.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let block = vec![0u8; 4096];
        loop {
            match f.write_all(&block).and_then(|()| f.flush()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => return path,
                Err(e) => panic!("filling: {e}"),
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.at, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Whether another connection can take the database's write lock now.
async fn write_lock_free(db: &Path) -> Result<(), String> {
    use sqlx::{ConnectOptions as _, Executor as _};
    let mut c = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .busy_timeout(Duration::from_millis(200))
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    c.execute("BEGIN IMMEDIATE; ROLLBACK;")
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The review: once execd's disk had been full, a pooled connection kept the write lock
/// after space came back (execd wedged until restarted), and commands ran whose ledger
/// row and `launch.intent` were never committed. Now a launch whose record cannot be
/// committed does not run, every command that ran has its record, and execd takes
/// launches again as soon as there is room, without a restart.
#[test]
fn a_full_disk_runs_nothing_unrecorded_and_execd_recovers_by_itself() {
    require_root("mounting a small file system over execd's state");
    let mut s = Standalone::start("execd");
    s.stop();
    let disk = SmallDisk::over(&s.root.path().join("state/execd"), 4096);
    s.restart();
    let evidence = s.root.path().join("evidence");
    std::fs::create_dir(&evidence).unwrap();
    let db = s.root.path().join("state/execd/execd.db");
    let socket = s.socket();
    rt().block_on(async {
        let c = ExecClient::connect_socket(&socket, argos_tests::servers());
        let launch = |tag: String| {
            let c = c.clone();
            let evidence = evidence.clone();
            async move {
                c.run(RunRequest {
                    command: format!("touch {}/{tag}", evidence.display()),
                    profile: "host".into(),
                    timeout_ms: Some(20_000),
                    ..Default::default()
                })
                .await
            }
        };
        // A launch while there is room.
        let before = launch("before".into()).await.expect("a launch with room");
        assert_eq!(
            before.execution.unwrap().status,
            ExecutionStatus::Succeeded as i32
        );
        // A launch that will end while there is no room.
        let long = c
            .start(RunRequest {
                command: format!("sleep 2; touch {}/long", evidence.display()),
                profile: "host".into(),
                timeout_ms: Some(20_000),
                ..Default::default()
            })
            .await
            .expect("a launch with room");
        // No room: launches are refused, none runs unrecorded.
        let filler = disk.fill();
        let mut refused = Vec::new();
        for i in 0..40 {
            if let Err(e) = launch(format!("full-{i}")).await {
                refused.push(e);
            }
        }
        assert!(
            !refused.is_empty(),
            "with the disk full every launch was recorded?"
        );
        // Said as what it is, to a caller who can act on it: a launch refused before
        // anything was recorded (UNAVAILABLE, try again once there is room).
        assert!(
            refused.iter().any(|e| e
                .message
                .starts_with("the disk holding execd's state is full")),
            "{refused:#?}"
        );
        // execd says so in its status while it cannot write: reads still work.
        let status = || async {
            argos_common::grpc::daemon_status(
                argos_common::connect::unix_channel(&socket, argos_tests::servers()),
                tonic::Request::new(argos_proto::common::v1::StatusRequest {}),
            )
            .await
            .expect("execd answers its status with the disk full")
            .degraded
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let degraded = status().await;
            if degraded
                .iter()
                .any(|d| d.starts_with("storage: the disk holding execd's state is full"))
            {
                break;
            }
            assert!(Instant::now() < deadline, "not said degraded: {degraded:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Room again: execd takes launches without a restart, and no connection of its
        // pool holds the write lock.
        // The long launch ends meanwhile, with no room to record its end.
        let ended_by = long.started_at_unix_ms + 3_000;
        let now_ms = || {
            i64::try_from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis(),
            )
            .unwrap()
        };
        while now_ms() < ended_by {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        std::fs::remove_file(&filler).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match launch("after".into()).await {
                Ok(r) => {
                    assert_eq!(
                        r.execution.unwrap().status,
                        ExecutionStatus::Succeeded as i32
                    );
                    break;
                }
                Err(e) => assert!(
                    Instant::now() < deadline,
                    "execd did not recover once there was room: {e:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        write_lock_free(&db)
            .await
            .expect("execd's connections hold no write lock once there is room");
        // …and its status no longer says degraded.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let degraded = status().await;
            if degraded.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "still said degraded: {degraded:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The launch that ended while there was no room has its end recorded now that
        // there is, without a restart.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let e = c.get(&long.id, false).await.unwrap().execution.unwrap();
            if e.status != ExecutionStatus::Running as i32 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the end of a launch that ended while the disk was full is not recorded: {e:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    // What the file holds after a restart is what was committed: every command that ran
    // has its record, and the trail verifies.
    s.stop();
    s.restart();
    rt().block_on(async {
        let c = ExecClient::connect_socket(&s.socket(), argos_tests::servers());
        let listed = c
            .list(ListRequest {
                page_size: 500,
                ..Default::default()
            })
            .await
            .unwrap()
            .executions;
        let ran: Vec<String> = std::fs::read_dir(&evidence)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            ["before", "after", "long"]
                .iter()
                .all(|t| ran.iter().any(|r| r == t)),
            "{ran:?}"
        );
        for tag in &ran {
            let recorded = listed.iter().find(|e| {
                e.argv
                    .iter()
                    .any(|a| a.ends_with(&format!("/evidence/{tag}")))
            });
            let recorded =
                recorded.unwrap_or_else(|| panic!("{tag} ran with no record: {listed:#?}"));
            // (The one that ended with no room could not leave its result: it is
            // recorded as it could be told.)
            if tag != "long" {
                assert_eq!(
                    recorded.status,
                    ExecutionStatus::Succeeded as i32,
                    "{tag}: {recorded:?}"
                );
            }
        }
        let v = c.verify_audit(None).await.unwrap();
        assert!(v.ok, "{v:?}");
        let intents = c
            .list_audit(ListAuditRequest {
                kind_prefix: "launch.intent".into(),
                page_size: 500,
                ..Default::default()
            })
            .await
            .unwrap()
            .records
            .into_iter()
            .filter(|r| {
                ran.iter()
                    .any(|t| r.detail.contains(&format!("/evidence/{t}")))
            })
            .count();
        assert_eq!(intents, ran.len(), "one launch.intent per command that ran");
    });
    drop(s);
    drop(disk);
}

/// The review: the gateway's `-wal` deleted while it was stopped (all its rows were only
/// there) started it with no accounts, offering a new first-admin link to whoever opened
/// it first. A database that lost everything while its daemon has run before is refused
/// (its key is older than the file), and no link is made; so for every daemon.
#[test]
fn a_database_that_lost_everything_is_refused_and_no_first_admin_link_is_offered() {
    for (daemon, db) in [
        ("gatewayd", "gateway.db"),
        ("execd", "execd.db"),
        ("jobd", "jobd.db"),
        ("mcpd", "mcpd.db"),
    ] {
        let mut stack = argos_tests::StackBuilder::new().start();
        let link = stack.root().join("state/gatewayd/setup-link");
        let link_before = std::fs::read(&link).ok();
        let log = stack.restart_refused_with(|root| {
            let dir = root.join("state").join(daemon);
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(dir.join(format!("{db}{suffix}")));
            }
        });
        let named = if daemon == "gatewayd" {
            "gateway"
        } else {
            daemon
        };
        assert!(
            log.contains(&format!("holds nothing of what {named} recorded")),
            "{daemon}: {log}"
        );
        if daemon == "gatewayd" {
            assert_eq!(
                std::fs::read(&link).ok(),
                link_before,
                "no new first-admin link: {log}"
            );
        }
        assert!(
            !stack.root().join("state").join(daemon).join(db).exists(),
            "{daemon} made no new database"
        );
    }
}

/// The review: a database with a damaged page served until the damaged table was read, an
/// immutable one left the gateway reporting healthy while every request failed, and a
/// read-only one was silently made writable again. Each is now refused at start, the file
/// and the cause named, with exit status 2 (which the units do not restart in a loop) —
/// each daemon meeting one of the faults, all through the same check.
#[test]
fn a_damaged_read_only_or_immutable_database_is_refused_at_start_with_its_cause() {
    require_root("making a database immutable");
    let damage = |db: &Path| {
        // Its second page (a table's root) overwritten, as a disk's bad sector would.
        use std::io::{Seek as _, SeekFrom, Write as _};
        let mut f = std::fs::OpenOptions::new().write(true).open(db).unwrap();
        f.seek(SeekFrom::Start(4096)).unwrap();
        f.write_all(&[0xa5; 4096]).unwrap();
        f.sync_all().unwrap();
    };
    let read_only = |db: &Path| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(db, std::fs::Permissions::from_mode(0o400)).unwrap();
    };
    let immutable = |db: &Path| {
        let ok = std::process::Command::new("chattr")
            .arg("+i")
            .arg(db)
            .status()
            .unwrap();
        assert!(ok.success(), "chattr +i");
    };
    type Fault<'a> = (&'a str, &'a str, &'a dyn Fn(&Path), &'a str);
    let faults: [Fault; 4] = [
        ("gatewayd", "gateway.db", &damage, "is damaged"),
        ("execd", "execd.db", &immutable, "cannot be written"),
        (
            "jobd",
            "jobd.db",
            &read_only,
            "cannot be written (its mode is 0400)",
        ),
        ("mcpd", "mcpd.db", &damage, "is damaged"),
    ];
    for (daemon, db, fault, said) in faults {
        let mut stack = argos_tests::StackBuilder::new().start();
        let path = stack.root().join("state").join(daemon).join(db);
        let log = stack.restart_refused_with(|_| fault(&path));
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&path)
            .status();
        assert!(
            log.contains(&format!("{} {said}", path.display())),
            "{daemon}: {log}"
        );
        assert!(
            log.contains(&format!(
                "argos-{daemon} exited during start-up (exit status: 2)"
            )),
            "{daemon}: {log}"
        );
        if said.contains("0400") {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o400, "the file was left as it was made");
        }
    }
}

/// The review: the gateway's rows lost since its last checkpoint (its `-wal` lost or
/// damaged after a crash) started it with no accounts, offering a new first-admin link to
/// whoever opened it first. Once it has had accounts, one with none is refused, and no
/// link is made.
#[test]
fn a_gateway_that_lost_its_accounts_is_refused_and_offers_no_first_admin_link() {
    let mut stack = argos_tests::StackBuilder::new().start();
    drop(stack.admin());
    let link = stack.root().join("state/gatewayd/setup-link");
    let db = stack.root().join("state/gatewayd/gateway.db");
    let link_before = std::fs::read(&link).ok();
    let log = stack.restart_refused_with(|_| {
        rt().block_on(async {
            use sqlx::{ConnectOptions as _, Executor as _};
            let mut c = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&db)
                .foreign_keys(false)
                .connect()
                .await
                .unwrap();
            // What a lost log leaves: the accounts gone, the rest of the file sound.
            c.execute("DELETE FROM users").await.unwrap();
        });
    });
    assert!(
        log.contains(&format!(
            "{} holds no accounts, though gateway recorded some before",
            db.display()
        )),
        "{log}"
    );
    assert!(
        log.contains("argos-gatewayd exited during start-up (exit status: 2)"),
        "{log}"
    );
    assert_eq!(
        std::fs::read(&link).ok(),
        link_before,
        "no new first-admin link: {log}"
    );
    let mut links: Vec<&str> = log
        .split("/setup#")
        .skip(1)
        .map(|rest| rest.split_whitespace().next().unwrap_or(""))
        .collect();
    links.dedup();
    assert_eq!(links.len(), 1, "only the first start's link: {log}");
}

/// The review: the gateway stayed wedged once its disk had been full (a pooled connection
/// kept the write lock), and every failure read as 500 "internal". Now, with the disk
/// holding the gateway's and jobd's state full, a login and a job are refused as what
/// they are (503, the disk named), nothing is half-done, and both take them again as
/// soon as there is room, without a restart.
#[test]
fn a_full_disk_under_the_gateway_and_jobd_refuses_logins_and_jobs_and_both_recover() {
    require_root("mounting small file systems over the gateway's and jobd's state");
    let mut stack = argos_tests::StackBuilder::new().start();
    let (mut admin, _) = stack.admin_and_user();
    let mut disks = Vec::new();
    stack.restart_with(|root| {
        for d in ["gatewayd", "jobd"] {
            disks.push(SmallDisk::over(&root.join("state").join(d), 8192));
        }
    });
    let login = || {
        let mut bob = argos_tests::web::Web::new(stack.listen_addr());
        bob.post(
            "/api/login",
            serde_json::json!({"name": "bob", "password": argos_tests::ADMIN_PASSWORD}),
        )
    };
    assert_eq!(login().status, 200, "a login with room");
    let job = |admin: &mut argos_tests::web::Web| {
        admin.post("/api/jobs", serde_json::json!({"command": "echo job"}))
    };
    let r = job(&mut admin);
    assert_eq!(r.status, 201, "a job with room: {r:?}");
    let fillers: Vec<PathBuf> = disks.iter().map(SmallDisk::fill).collect();
    // No room: said as what it is, and nothing half-done.
    let r = login();
    assert_eq!(r.status, 503, "{r:?}");
    assert!(
        r.message()
            .starts_with("the disk holding the gateway's state is full"),
        "{r:?}"
    );
    let r = job(&mut admin);
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.message().contains("state is full"), "{r:?}");
    // Room again: both take requests without a restart.
    for f in &fillers {
        std::fs::remove_file(f).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (l, j) = (login(), job(&mut admin));
        if l.status == 200 && j.status == 201 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not recovered once there was room: {l:?} {j:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    rt().block_on(async {
        for (d, db) in [("gatewayd", "gateway.db"), ("jobd", "jobd.db")] {
            write_lock_free(&stack.root().join("state").join(d).join(db))
                .await
                .unwrap_or_else(|e| panic!("{d}'s connections hold the write lock: {e}"));
        }
    });
    stack.stop_and(|| drop(disks));
}
