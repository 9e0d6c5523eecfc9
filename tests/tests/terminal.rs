//! Terminal launches in execd: a real PTY held by the launch's shim, attached over gRPC
//! (`Attach`): tty and isatty inside, resizes, Ctrl-C to the foreground job, one writer
//! with any number of viewers, and the terminal with its scrollback after kill -9 of
//! execd.

use std::time::{Duration, Instant};

use argos_exec_client::ExecClient;
use argos_proto::exec::v1::{
    AttachOpen, AttachRequest, ExecutionStatus, RunRequest, TerminalSize, Tty, attach_event,
    attach_request,
};
use argos_tests::{Standalone, require_root};
fn client(s: &Standalone) -> ExecClient {
    ExecClient::connect_socket(&s.socket()).unwrap()
}

/// One attached client: what it typed goes in, what the terminal showed is in `seen`.
struct Term {
    tx: tokio::sync::mpsc::Sender<AttachRequest>,
    rx: tonic::Streaming<argos_proto::exec::v1::AttachEvent>,
    seen: String,
    exit: Option<argos_proto::exec::v1::Execution>,
    /// Where the replayed scrollback ends, when attached with it.
    replayed_to: Option<u64>,
}

impl Term {
    async fn open(c: &ExecClient, id: &str, scrollback: bool, write: bool) -> Term {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tx.send(AttachRequest {
            msg: Some(attach_request::Msg::Open(AttachOpen {
                id: id.into(),
                offset: 0,
                scrollback,
                write,
            })),
        })
        .await
        .unwrap();
        let rx = c
            .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap();
        Term {
            tx,
            rx,
            seen: String::new(),
            exit: None,
            replayed_to: None,
        }
    }

    async fn typed(&self, text: &str) {
        self.tx
            .send(AttachRequest {
                msg: Some(attach_request::Msg::Input(text.as_bytes().to_vec())),
            })
            .await
            .unwrap();
    }

    async fn resize(&self, rows: u32, cols: u32) {
        self.tx
            .send(AttachRequest {
                msg: Some(attach_request::Msg::Resize(TerminalSize { rows, cols })),
            })
            .await
            .unwrap();
    }

    /// Reads until the terminal has shown `needle` (or fails, naming what it showed).
    async fn until(&mut self, needle: &str) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !self.seen.contains(needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.rx.message()).await {
                Err(_) => return Err(format!("no {needle:?} in 15 s; saw {:?}", self.seen)),
                Ok(Err(s)) => return Err(format!("{:?}: {}", s.code(), s.message())),
                Ok(Ok(None)) => return Err(format!("ended before {needle:?}: {:?}", self.seen)),
                Ok(Ok(Some(ev))) => match ev.event {
                    Some(attach_event::Event::Output(o)) => {
                        self.seen.push_str(&String::from_utf8_lossy(&o.data))
                    }
                    Some(attach_event::Event::Exit(e)) => {
                        self.exit = Some(e);
                        if !self.seen.contains(needle) {
                            return Err(format!("exited before {needle:?}: {:?}", self.seen));
                        }
                    }
                    Some(attach_event::Event::ReplayedTo(at)) => self.replayed_to = Some(at),
                    None => {}
                },
            }
        }
        Ok(())
    }

    /// Reads to the end; the launch's final record.
    async fn end(&mut self) -> argos_proto::exec::v1::Execution {
        while self.exit.is_none() {
            match tokio::time::timeout(Duration::from_secs(15), self.rx.message()).await {
                Ok(Ok(Some(ev))) => match ev.event {
                    Some(attach_event::Event::Output(o)) => {
                        self.seen.push_str(&String::from_utf8_lossy(&o.data))
                    }
                    Some(attach_event::Event::Exit(e)) => self.exit = Some(e),
                    Some(attach_event::Event::ReplayedTo(at)) => self.replayed_to = Some(at),
                    None => {}
                },
                other => panic!("no exit: {other:?}; saw {:?}", self.seen),
            }
        }
        self.exit.clone().unwrap()
    }
}

#[test]
fn a_terminal_is_a_real_tty_that_resizes_takes_ctrl_c_and_survives_kill_9_of_execd() {
    require_root("the terminal test");
    let mut s = Standalone::start("execd");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let id = rt.block_on(async {
        let c = client(&s);
        let e = c
            .start(RunRequest {
                argv: vec![
                    "/bin/bash".into(),
                    "--norc".into(),
                    "--noprofile".into(),
                    "-i".into(),
                ],
                timeout_ms: Some(120_000),
                tty: Some(Tty {
                    rows: 24,
                    cols: 80,
                    term: String::new(),
                }),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(e.status, ExecutionStatus::Running as i32, "{e:?}");
        assert!(e.tty, "{e:?}");
        let id = e.id;
        let listed = c
            .list(argos_proto::exec::v1::ListRequest {
                terminals: true,
                ..Default::default()
            })
            .await
            .unwrap()
            .executions;
        assert_eq!(listed.len(), 1, "only the terminal: {listed:?}");
        assert_eq!(listed[0].id, id);
        let mut t = Term::open(&c, &id, false, true).await;
        // Computed markers: the terminal echoes what is typed, not what it computes.
        t.typed("echo $((6*7))-ok; tty; [ -t 0 ] && [ -t 1 ] && echo $((2*3))-isatty; stty size; echo $TERM\n")
            .await;
        t.until("6-isatty").await.unwrap();
        t.until("xterm-256color\r\n").await.unwrap();
        assert!(t.seen.contains("42-ok"), "{:?}", t.seen);
        assert!(t.seen.contains("/dev/pts/"), "tty names the terminal: {:?}", t.seen);
        assert!(t.seen.contains("24 80"), "{:?}", t.seen);

        t.resize(40, 100).await;
        t.typed("stty size\n").await;
        t.until("40 100").await.unwrap();

        // Ctrl-C stops the foreground job, not the shell.
        t.typed("sleep 30; echo $((1+1))-after\n").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        t.typed("\x03").await;
        t.typed("echo $((2+3))-next\n").await;
        t.until("5-next").await.unwrap();
        assert!(!t.seen.contains("2-after"), "the whole line ran: {:?}", t.seen);

        // One writer at a time; viewers see the recent output.
        let mut second = Term::open(&c, &id, false, true).await;
        let refused = second.until("never").await.unwrap_err();
        assert!(refused.contains("another client holds"), "{refused}");
        let mut viewer = Term::open(&c, &id, true, false).await;
        viewer.until("42-ok").await.unwrap();
        viewer.typed("echo no\n").await;
        let refused = viewer.until("never").await.unwrap_err();
        assert!(refused.contains("viewer"), "{refused}");
        id
    });
    // execd dies; the terminal lives on in its shim.
    s.kill9();
    s.restart();
    rt.block_on(async {
        let c = client(&s);
        let mut t = Term::open(&c, &id, true, true).await;
        t.until("42-ok").await.unwrap();
        assert!(
            t.replayed_to.is_some_and(|at| at > 0),
            "the replay's end is said first: {:?}",
            t.replayed_to
        );
        t.typed("echo $((7*8))-back\n").await;
        t.until("56-back").await.unwrap();
        t.typed("exit 3\n").await;
        let end = t.end().await;
        assert_eq!(end.status, ExecutionStatus::Failed as i32, "{end:?}");
        assert_eq!(end.exit_code, Some(3));
    });
}

#[test]
fn a_terminal_nobody_attaches_to_is_torn_down_after_its_ttl() {
    require_root("the terminal TTL test");
    let s = Standalone::start_with("execd", "terminal_detach_ttl_s = 1\n");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = client(&s);
        let start = |c: &ExecClient| {
            let c = c.clone();
            async move {
                c.start(RunRequest {
                    // A shell that would wait for input for a minute, and a job behind it.
                    command: "sleep 60 & read line".into(),
                    timeout_ms: Some(120_000),
                    tty: Some(Tty {
                        rows: 24,
                        cols: 80,
                        term: "vt100".into(),
                    }),
                    ..Default::default()
                })
                .await
                .unwrap()
                .id
            }
        };
        // Never attached; and attached, then left.
        let never = start(&c).await;
        let left = start(&c).await;
        let t0 = Instant::now();
        let t = Term::open(&c, &left, false, true).await;
        t.typed("x").await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            c.get(&left, false).await.unwrap().execution.unwrap().status
                == ExecutionStatus::Running as i32,
            "an attached terminal stays"
        );
        drop(t);
        for id in [never, left] {
            let end = loop {
                let e = c.get(&id, false).await.unwrap().execution.unwrap();
                if e.status != ExecutionStatus::Running as i32 {
                    break e;
                }
                assert!(t0.elapsed() < Duration::from_secs(15), "still running");
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            assert_eq!(end.status, ExecutionStatus::Killed as i32, "{end:?}");
            assert!(end.error.contains("no client attached for 1 s"), "{end:?}");
            assert!(end.teardown_complete, "{end:?}");
        }
    });
}
