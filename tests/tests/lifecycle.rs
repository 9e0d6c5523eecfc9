//! Detached launches: Start, Follow by offset, Kill, Get, List, and an execd restart in
//! the middle of a streaming launch.

use std::time::Duration;

use argos_exec_client::{ErrorKind, ExecClient, FollowItem};
use argos_proto::exec::v1::follow_event::Event;
use argos_proto::exec::v1::{
    ApprovalState, Decision, ExecutionStatus, FollowRequest, KillOutcome, ListRequest,
    OutputStream, RunRequest,
};
use argos_tests::{Standalone, require_root};

fn client(s: &Standalone) -> ExecClient {
    ExecClient::connect_socket(&s.socket(), argos_tests::servers())
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Follows from offsets until `stop` says enough (or the end); returns stdout bytes read,
/// the new stdout offset, and the final execution if the stream ended.
async fn follow(
    c: &ExecClient,
    id: &str,
    offset: u64,
    stop: impl Fn(&[u8]) -> bool,
) -> (Vec<u8>, u64, Option<argos_proto::exec::v1::Execution>) {
    let mut f = c.follow(id, [offset, 0]);
    let mut out = Vec::new();
    let mut at = offset;
    while let Some(item) = f.next().await {
        match item.unwrap_or_else(|e| panic!("follow {id} from {offset}: {e:?}")) {
            FollowItem::Output {
                stream: OutputStream::Stdout,
                offset,
                data,
            } => {
                assert_eq!(offset, at, "a gap or a repeat in the stream");
                at += data.len() as u64;
                out.extend_from_slice(&data);
                if stop(&out) {
                    return (out, at, None);
                }
            }
            FollowItem::Output { .. } => {}
            FollowItem::Exit(e) => return (out, at, Some(*e)),
        }
    }
    panic!("the stream ended without an exit event");
}

/// Starts a shell command detached; returns its execution as Start reported it.
async fn start(c: &ExecClient, command: &str, timeout_ms: u64) -> argos_proto::exec::v1::Execution {
    c.start(RunRequest {
        command: command.into(),
        timeout_ms: Some(timeout_ms),
        ..Default::default()
    })
    .await
    .unwrap()
}

fn lines(n: u32) -> String {
    (1..=n).map(|i| format!("line{i}\n")).collect()
}

#[test]
fn start_follow_get_list_and_kill() {
    require_root("the lifecycle test");
    let s = Standalone::start("execd");
    rt().block_on(async {
        let c = client(&s);
        let started = start(
            &c,
            "for i in $(seq 1 20); do echo line$i; sleep 0.01; done",
            30_000,
        )
        .await;
        assert_eq!(started.status, ExecutionStatus::Running as i32);
        let (out, _, end) = follow(&c, &started.id, 0, |_| false).await;
        assert_eq!(String::from_utf8(out).unwrap(), lines(20));
        let end = end.unwrap();
        assert_eq!(end.status, ExecutionStatus::Succeeded as i32);
        // Following again from the middle replays exactly the rest.
        let (rest, _, _) = follow(&c, &started.id, 6 * 9, |_| false).await;
        assert_eq!(String::from_utf8(rest).unwrap(), lines(20)[54..]);

        let got = c.get(&started.id, true).await.unwrap();
        assert_eq!(got.stdout.unwrap().head, lines(20).into_bytes());

        // Kill: the end is observed, the status says so, the tree is gone.
        let sleeper = start(&c, "setsid sleep 300 & sleep 301", 60_000).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let killed = c.kill(&sleeper.id).await.unwrap();
        assert_eq!(killed.outcome, KillOutcome::Killed as i32);
        let e = killed.execution.unwrap();
        assert_eq!(e.status, ExecutionStatus::Killed as i32, "{e:?}");
        assert_eq!(e.exit_code, Some(128 + 15));
        // Killed means SIGKILLed with the namespace gone; the last of them may still be
        // leaving the process table for a moment.
        let left = argos_tests::processes_mentioning_after(
            std::path::Path::new("sleep 30"),
            Duration::from_secs(2),
        );
        assert!(left.is_empty(), "left after the kill: {left:?}");
        let again = c.kill(&sleeper.id).await.unwrap();
        assert_eq!(again.outcome, KillOutcome::AlreadyGone as i32);

        let list = c
            .list(ListRequest {
                page_size: 1,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(list.executions[0].id, sleeper.id, "newest first");
        let next = c
            .list(ListRequest {
                page_size: 1,
                page_token: list.next_page_token,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(next.executions[0].id, started.id);
        let killed_only = c
            .list(ListRequest {
                status: ExecutionStatus::Killed as i32,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(killed_only.executions.len(), 1);

        let missing = c.get(&uuid_like(), false).await.unwrap_err();
        assert_eq!(missing.kind, ErrorKind::NotFound);
        let bad = c.get("../../etc", false).await.unwrap_err();
        assert_eq!(bad.kind, ErrorKind::InvalidArgument);
    });
}

#[test]
fn concurrent_agent_launches_get_distinct_uids_and_lose_their_workspace_after() {
    require_root("the per-launch uid test");
    let s = Standalone::start("execd");
    rt().block_on(async {
        let c = client(&s);
        let a = start(&c, "id -u; sleep 1", 30_000).await;
        let b = start(&c, "id -u; sleep 1", 30_000).await;
        let (ua, _, _) = follow(&c, &a.id, 0, |_| false).await;
        let (ub, _, _) = follow(&c, &b.id, 0, |_| false).await;
        let (ua, ub) = (
            String::from_utf8(ua).unwrap(),
            String::from_utf8(ub).unwrap(),
        );
        assert_ne!(ua, ub, "two running launches shared a uid");
        // Once a launch ends, its workspace no longer belongs to its uid.
        let ws = std::path::PathBuf::from(&a.cwd);
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(&ws).unwrap().uid(),
            0,
            "{} still owned by the launch's uid",
            ws.display()
        );
    });
}

/// What a launch leaves in its workspace is no other launch's to read: the hand-back used
/// to re-own only the top directory and keep the mode the workload gave it, so a later
/// launch (another uid) read the files a previous one left.
#[test]
fn a_later_launch_cannot_read_what_an_earlier_one_left() {
    require_root("the workspace hand-back test");
    let s = Standalone::start("execd");
    rt().block_on(async {
        let c = client(&s);
        let a = start(
            &c,
            "echo secret > left; chmod 644 left; chmod 755 .; echo done",
            30_000,
        )
        .await;
        let (out, _, end) = follow(&c, &a.id, 0, |_| false).await;
        assert_eq!(out, b"done\n");
        assert_eq!(end.unwrap().status, ExecutionStatus::Succeeded as i32);
        let left = std::path::Path::new(&a.cwd).join("left");
        let b = start(
            &c,
            &format!("cat {} 2>&1 && echo READ", left.display()),
            30_000,
        )
        .await;
        let (out, _, _) = follow(&c, &b.id, 0, |_| false).await;
        let out = String::from_utf8(out).unwrap();
        assert!(
            !out.contains("READ"),
            "a later launch read {}: {out}",
            left.display()
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&a.cwd).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the handed-back workspace is root's alone");
    });
}

fn uuid_like() -> String {
    "01900000-0000-7000-8000-000000000000".into()
}

#[test]
fn a_launch_survives_kill_9_of_execd_and_a_follower_resumes_without_gap_or_repeat() {
    require_root("the restart test");
    let mut s = Standalone::start("execd");
    let runtime = rt();
    let (id, first, offset, doomed) = runtime.block_on(async {
        let c = client(&s);
        let id = start(
            &c,
            "for i in $(seq 1 60); do echo line$i; sleep 0.03; done",
            60_000,
        )
        .await
        .id;
        let doomed = start(&c, "sleep 120", 200_000).await.id;
        let (first, offset, _) = follow(&c, &id, 0, |o| o.ends_with(b"line10\n")).await;
        (id, first, offset, doomed)
    });
    // Every shim execd started: the two running launches' and the warm ones waiting.
    let execd_pid = s.pid();
    let spawned = argos_tests::measure::children(execd_pid);
    // execd dies mid-stream. The shims do not.
    s.kill9();
    let launches = s.root.path().join("state/execd/launches");
    let shim_pid = |id: &str| -> i32 {
        // The receipt names the shim that runs the launch.
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(launches.join(id).join("spec.json")).unwrap())
                .unwrap();
        v["shim"]["pid"].as_i64().unwrap() as i32
    };
    assert!(
        std::path::Path::new(&format!("/proc/{}", shim_pid(&id))).exists(),
        "the shim died with execd"
    );
    // While execd is down, the second launch's shim is killed: it leaves no result.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(shim_pid(&doomed)),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // A warm shim holds no launch: it ends with execd (its pipe closes). Only the running
    // launch's shim is left of all execd had started.
    let alive: Vec<i32> = spawned
        .iter()
        .copied()
        .filter(|p| {
            // A zombie is gone but for its parent's wait.
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|st| st.rsplit_once(") ").map(|(_, r)| !r.starts_with('Z')))
                .unwrap_or(false)
        })
        .collect();
    assert!(
        spawned.len() >= 3,
        "execd should have had warm shims: {spawned:?}"
    );
    assert_eq!(
        alive,
        vec![shim_pid(&id)],
        "warm shims outlived execd (started {spawned:?})"
    );
    s.restart();
    runtime.block_on(async {
        let c = client(&s);
        let (rest, _, end) = follow(&c, &id, offset, |_| false).await;
        let mut all = first.clone();
        all.extend_from_slice(&rest);
        assert_eq!(
            String::from_utf8(all).unwrap(),
            lines(60),
            "output lost or repeated across the restart"
        );
        let end = end.unwrap();
        assert_eq!(end.status, ExecutionStatus::Succeeded as i32, "{end:?}");
        let got = c.get(&doomed, false).await.unwrap();
        let e = got.execution.unwrap();
        assert_eq!(e.status, ExecutionStatus::Lost as i32, "{e:?}");
        assert!(e.error.contains("nothing was signalled"), "{}", e.error);
        // Retired without a result, it keeps the start execd recorded (it was 0, and
        // its duration 56 years): both are of this test's minutes.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        assert!(
            (now - 600_000..now).contains(&e.started_at_unix_ms),
            "{e:?}"
        );
        assert!(e.ended_at_unix_ms >= e.started_at_unix_ms, "{e:?}");
        assert!(e.duration_ms < 600_000, "{e:?}");
    });
    s.stop();
}

/// A stream's command whose reader died with its client (a gateway killed, never started
/// again) ran on unsupervised until it ended. A launch started with `end_unfollowed_ms`
/// is ended by its shim once nobody followed its output that long, whether nobody ever
/// did or its follower left; one followed throughout runs to its end.
#[test]
fn a_launch_nobody_follows_any_more_is_ended_after_its_window() {
    require_root("launches in the agent profile");
    let mut s = Standalone::start("execd");
    rt().block_on(async {
        let c = client(&s);
        let start = |command: &str| {
            let c = c.clone();
            let command = command.to_string();
            async move {
                c.start(RunRequest {
                    command,
                    timeout_ms: Some(120_000),
                    end_unfollowed_ms: 1_500,
                    ..Default::default()
                })
                .await
                .unwrap()
                .id
            }
        };
        let never = start("sleep 120").await;
        let left = start("while :; do echo tick; sleep 0.1; done").await;
        let followed = start("for i in $(seq 1 40); do echo line$i; sleep 0.1; done").await;
        // The one that is left is followed for a moment first.
        let (seen, _, _) = follow(&c, &left, 0, |o| o.ends_with(b"tick\n")).await;
        assert!(!seen.is_empty());
        // The followed one, to its end (4 s: past the window of the others).
        let (out, _, end) = follow(&c, &followed, 0, |_| false).await;
        assert_eq!(String::from_utf8(out).unwrap(), lines(40));
        let end = end.unwrap();
        assert_eq!(end.status, ExecutionStatus::Succeeded as i32, "{end:?}");
        for id in [&never, &left] {
            let deadline = std::time::Instant::now() + Duration::from_secs(15);
            let e = loop {
                let e = c.get(id, false).await.unwrap().execution.unwrap();
                if e.status != ExecutionStatus::Running as i32
                    || std::time::Instant::now() > deadline
                {
                    break e;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            };
            assert_eq!(e.status, ExecutionStatus::Killed as i32, "{e:?}");
            assert!(e.error.contains("nobody followed its output"), "{e:?}");
            assert!(e.teardown_complete, "{e:?}");
        }
        // A terminal keeps its own detach limit: the field is refused with it.
        let refused = c
            .start(RunRequest {
                command: "true".into(),
                tty: Some(argos_proto::exec::v1::Tty {
                    rows: 24,
                    cols: 80,
                    term: String::new(),
                }),
                end_unfollowed_ms: 1_000,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(refused.kind, ErrorKind::InvalidArgument, "{refused:?}");
        assert!(
            refused.message.starts_with("end_unfollowed_ms"),
            "{refused:?}"
        );
    });
    s.stop();
}

/// The client library's follower needs nothing from its caller across a kill -9 and
/// restart of execd: it follows again from the last byte it handed out, and the output
/// arrives whole, once.
#[test]
fn the_client_follows_on_by_itself_across_an_execd_restart() {
    require_root("the client resume test");
    let mut s = Standalone::start("execd");
    let runtime = rt();
    let id = runtime.block_on(async {
        start(
            &client(&s),
            "for i in $(seq 1 80); do echo line$i; sleep 0.03; done",
            60_000,
        )
        .await
        .id
    });
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let socket = s.socket();
    let follower = std::thread::spawn(move || {
        rt().block_on(async {
            let c = ExecClient::connect_socket(&socket, argos_tests::servers());
            let mut f = c.follow(&id, [0, 0]);
            let mut out = Vec::new();
            let mut told = false;
            loop {
                match f.next().await.expect("an exit before the end") {
                    Ok(FollowItem::Output { data, .. }) => {
                        out.extend_from_slice(&data);
                        if !told && out.ends_with(b"line10\n") {
                            told = true;
                            seen_tx.send(()).unwrap();
                        }
                    }
                    Ok(FollowItem::Exit(e)) => return (out, *e, f.position()),
                    Err(e) => panic!("the follower gave up: {e:?} at {:?}", f.position()),
                }
            }
        })
    });
    seen_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    s.kill9();
    std::thread::sleep(Duration::from_millis(500));
    s.restart();
    let (out, end, at) = follower.join().unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        lines(80),
        "output lost or repeated across the restart"
    );
    assert_eq!(end.status, ExecutionStatus::Succeeded as i32, "{end:?}");
    assert_eq!(at, [lines(80).len() as u64, 0]);
    s.stop();
}

#[test]
fn finished_launches_lose_their_files_after_the_retention_period_but_keep_their_record() {
    require_root("the retention test");
    let s = Standalone::start_with("execd", "retention_s = 2\n");
    rt().block_on(async {
        let c = client(&s);
        let e = start(&c, "echo gone-with-the-launch > ./file; echo out", 30_000).await;
        let (out, _, end) = follow(&c, &e.id, 0, |_| false).await;
        assert_eq!(out, b"out\n");
        assert_eq!(end.unwrap().status, ExecutionStatus::Succeeded as i32);
        let dir = s.root.path().join("state/execd/launches").join(&e.id);
        let ws = std::path::PathBuf::from(&e.cwd);
        // The launch dir stays for the retention period; the workspace's files lived in
        // the launch's own tmpfs and went with it (its directory stays, empty).
        assert!(dir.exists());
        assert!(ws.exists() && !ws.join("file").exists());
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while (dir.exists() || ws.exists()) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            !dir.exists() && !ws.exists(),
            "files outlived the retention period"
        );
        let got = c.get(&e.id, false).await.unwrap();
        assert_eq!(
            got.execution.unwrap().status,
            ExecutionStatus::Succeeded as i32,
            "the record stays"
        );
    });
}

/// With no warm shims, each launch sets up its own: the same containment, the same result,
/// and no shim is left waiting.
#[test]
fn without_warm_shims_each_launch_sets_up_its_own() {
    require_root("the cold-start test");
    let s = Standalone::start_with("execd", "warm_shims = 0\n");
    rt().block_on(async {
        let c = client(&s);
        for i in 0..2 {
            let e = start(&c, &format!("echo cold{i}"), 30_000).await;
            let (out, _, end) = follow(&c, &e.id, 0, |_| false).await;
            assert_eq!(out, format!("cold{i}\n").as_bytes());
            let end = end.unwrap();
            assert_eq!(end.status, ExecutionStatus::Succeeded as i32, "{end:?}");
            assert!(
                end.containment
                    .iter()
                    .all(|d| d.state == argos_proto::exec::v1::DimensionState::Enforced as i32),
                "{end:?}"
            );
        }
    });
    // Nothing waits: execd's only children would be shims, and every launch is over.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let children = || argos_tests::measure::children(s.pid());
    while !children().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(children(), Vec::<i32>::new(), "a shim is waiting");
}

/// Follow is not limited to what the log keeps: a follower connected while the launch
/// runs receives every byte, live, past the log's cap (the workload waits for it rather
/// than lose its output); the log on disk stops at the cap.
#[test]
fn a_live_follower_gets_every_byte_past_the_log_cap() {
    require_root("the live follow test");
    let s = Standalone::start_with("execd", "output_log_cap_mb = 1\n");
    rt().block_on(async {
        let c = client(&s);
        let n = 3_000_000u32;
        // The output starts after the follower is in place: with nobody following, the
        // shim keeps only the log and the last 8 MiB, and `seq` writes 20 MB in a blink
        // (under load the follower's connection came too late).
        let e = start(&c, &format!("sleep 1; seq 1 {n}"), 120_000).await;
        let (out, at, end) = follow(&c, &e.id, 0, |_| false).await;
        let want: String = (1..=n).map(|i| format!("{i}\n")).collect();
        assert_eq!(at as usize, want.len());
        assert!(out == want.as_bytes(), "the followed output differs");
        let end = end.unwrap();
        assert_eq!(end.status, ExecutionStatus::Succeeded as i32, "{end:?}");
        let log = s
            .root
            .path()
            .join("state/execd/launches")
            .join(&e.id)
            .join("stdout.log");
        assert_eq!(std::fs::metadata(log).unwrap().len(), 1024 * 1024);
    });
}

/// A follower that stops reading holds the workload back only so long: after five
/// seconds it loses its place (DATA_LOSS, naming what it missed) and the launch runs on to
/// the end.
#[test]
fn a_stalled_follower_is_cut_off_and_the_launch_runs_on() {
    require_root("the stalled follower test");
    let s = Standalone::start_with("execd", "output_log_cap_mb = 1\n");
    rt().block_on(async {
        let c = client(&s);
        // The output starts after the follower is in place (a later follower could only
        // replay the log and the last few MiB).
        let e = start(&c, "sleep 0.5; head -c 300000000 /dev/zero", 120_000).await;
        // The raw stream: this follower must stop reading, not be followed again.
        let mut stream =
            argos_proto::exec::v1::exec_client::ExecClient::new(argos_tests::channel(&s.socket()))
                .follow(FollowRequest {
                    id: e.id.clone(),
                    stdout_offset: 0,
                    stderr_offset: 0,
                })
                .await
                .unwrap()
                .into_inner();
        let first = stream.message().await.unwrap().unwrap();
        assert!(matches!(first.event, Some(Event::Chunk(_))));
        // Stop reading. The launch must still end, on its own.
        let t = std::time::Instant::now();
        let c2 = client(&s);
        let end = loop {
            let got = c2.get(&e.id, false).await.unwrap().execution.unwrap();
            if got.status != ExecutionStatus::Running as i32 {
                break got;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "a stalled follower held the launch"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(end.status, ExecutionStatus::Succeeded as i32, "{end:?}");
        assert!(
            t.elapsed() >= Duration::from_secs(4),
            "the follower was cut off before its grace"
        );
        // Reading again: what was buffered, then the loss, named.
        let err = loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("the stream ended without reporting the loss"),
                Err(e) => break e,
            }
        };
        assert_eq!(err.code(), tonic::Code::DataLoss, "{err:?}");
        assert!(err.message().contains("cut off"), "{}", err.message());
    });
}

#[test]
fn approvals_survive_kill_9_of_execd_and_a_tampered_audit_row_is_named() {
    use argos_proto::exec::v1::{DecideApprovalRequest, RequestRunRequest};
    require_root("the approvals restart test");
    // root is the gateway here too, to decide (a dev setup, said to be insecure).
    let mut s = Standalone::start_with(
        "execd",
        "approval_ttl_s = 4\n[peers]\ngateway_uids = [0]\ninsecure_shared_uid = true\n",
    );
    let runtime = rt();
    let ask = |command: &str| RequestRunRequest {
        run: Some(RunRequest {
            command: command.into(),
            ..Default::default()
        }),
        purpose: "restart test".into(),
        ..Default::default()
    };
    let (kept, lapsing) = runtime.block_on(async {
        let c = client(&s);
        let bot = c.as_user("agent-bot");
        let kept = bot
            .request_run(ask("echo approved-after-restart; true"))
            .await
            .unwrap();
        let lapsing = bot
            .request_run(ask("rm -rf /tmp/argos-lapsing"))
            .await
            .unwrap();
        (kept.approval.unwrap(), lapsing.approval.unwrap())
    });
    assert_eq!(
        kept.state,
        ApprovalState::Pending as i32,
        "a command list is never read-only"
    );
    s.kill9();
    s.restart();
    runtime.block_on(async {
        let c = client(&s);
        let a = c.get_approval(&kept.id).await.unwrap();
        assert_eq!(a.state, ApprovalState::Pending as i32, "{a:?}");
        let e = c
            .get(&kept.execution_id, false)
            .await
            .unwrap()
            .execution
            .unwrap();
        assert_eq!(e.status, ExecutionStatus::PendingApproval as i32);
        let decided = c
            .as_user("alice")
            .decide_approval(DecideApprovalRequest {
                id: kept.id.clone(),
                decision: Decision::Approve as i32,
                confirm: String::new(),
                note: String::new(),
            })
            .await
            .unwrap();
        assert_eq!(
            decided.approval.unwrap().state,
            ApprovalState::Consumed as i32
        );
        let (out, _, end) = follow(&c, &kept.execution_id, 0, |_| false).await;
        assert_eq!(out, b"approved-after-restart\n");
        assert_eq!(end.unwrap().status, ExecutionStatus::Succeeded as i32);
    });
    // The other one lapses while execd is down: the restart expires it.
    s.kill9();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let wait = lapsing.expires_at_unix_ms - now;
    std::thread::sleep(Duration::from_millis(wait.max(0) as u64 + 100));
    s.restart();
    let head = runtime.block_on(async {
        let c = client(&s);
        let a = c.get_approval(&lapsing.id).await.unwrap();
        assert_eq!(a.state, ApprovalState::Expired as i32, "{a:?}");
        let e = c
            .get(&lapsing.execution_id, false)
            .await
            .unwrap()
            .execution
            .unwrap();
        assert_eq!(e.status, ExecutionStatus::Rejected as i32, "{e:?}");
        let v = c.verify_audit(None).await.unwrap();
        assert!(v.ok && v.broken_seq == 0, "{v:?}");
        v.head_seq
    });
    assert!(
        head >= 6,
        "requested ×2, decided, intent, outcome, expired: {head}"
    );
    // Someone with the database file rewrites history while execd is down.
    s.stop();
    runtime.block_on(async {
        use sqlx::ConnectOptions;
        let db = s.root.path().join("state/execd/execd.db");
        let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&db)
            .connect()
            .await
            .unwrap();
        let refused = sqlx::query("UPDATE audit SET actor = 'nobody' WHERE seq = 3")
            .execute(&mut conn)
            .await;
        assert!(refused.is_err(), "the trigger keeps the trail append-only");
        sqlx::query("DROP TRIGGER audit_no_update")
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query("UPDATE audit SET actor = 'nobody' WHERE seq = 3")
            .execute(&mut conn)
            .await
            .unwrap();
    });
    s.restart();
    runtime.block_on(async {
        let v = client(&s).verify_audit(None).await.unwrap();
        assert!(!v.ok, "{v:?}");
        assert_eq!(v.broken_seq, 3, "{v:?}");
        assert!(v.broken_reason.contains("changed"), "{v:?}");
    });
}
