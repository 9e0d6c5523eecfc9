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
fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn client(s: &Standalone) -> ExecClient {
    ExecClient::connect_socket(&s.socket(), argos_tests::servers())
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
                stderr_offset: 0,
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
    let rt = rt();
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
    let rt = rt();
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

/// Opens an attachment to `id` from `offset` of stdout (0 of stderr); the sender feeds it.
async fn attach(
    c: &ExecClient,
    id: &str,
    write: bool,
    offset: u64,
) -> Result<
    (
        tokio::sync::mpsc::Sender<AttachRequest>,
        tonic::Streaming<argos_proto::exec::v1::AttachEvent>,
    ),
    argos_exec_client::ExecError,
> {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tx.send(AttachRequest {
        msg: Some(attach_request::Msg::Open(AttachOpen {
            id: id.into(),
            write,
            offset,
            ..Default::default()
        })),
    })
    .await
    .unwrap();
    let events = c
        .attach(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await?;
    Ok((tx, events))
}

fn input(bytes: &[u8]) -> AttachRequest {
    AttachRequest {
        msg: Some(attach_request::Msg::Input(bytes.to_vec())),
    }
}

/// A launch started with its stdin open takes input from one writer at a time through
/// Attach: 4 MiB through `cat` come back whole and in order (the shim holds input back
/// while the pipe is full), a second writer is refused while the first holds it, a
/// writer that leaves does not end the input (the next writer goes on), and closing the
/// input is the workload's EOF. What only a terminal has (a size, a scrollback) and what
/// cannot work (Run, stdin bytes beside it, the gate, a launch without input) are
/// refused by name.
#[test]
fn open_stdin_takes_one_writer_through_attach_until_its_input_is_closed() {
    use argos_exec_client::ErrorKind;
    use argos_proto::exec::v1::{CloseInput, OutputStream, attach_event::Event};
    require_root("the open stdin test");
    let s = Standalone::start("execd");
    let rt = rt();
    rt.block_on(async {
        let c = client(&s);
        let start = |argv: &[&str]| RunRequest {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            open_stdin: true,
            timeout_ms: Some(120_000),
            ..Default::default()
        };
        let e = c
            .start(start(&["/bin/sh", "-c", "cat; echo done >&2"]))
            .await
            .unwrap();
        assert_eq!(e.status, ExecutionStatus::Running as i32, "{e:?}");
        let (tx, mut events) = attach(&c, &e.id, true, 0).await.unwrap();
        // The shim takes a writer's claim when execd's relay connects to it, a moment
        // after the call returns: let the first claim land before the second is tried
        // (under load the second could otherwise arrive first and hold the input).
        tokio::time::sleep(Duration::from_millis(300)).await;
        // While it holds the input, nobody else writes; a viewer is welcome.
        let (_tx2, mut second) = attach(&c, &e.id, true, 0).await.unwrap();
        let refused = second.message().await.unwrap_err();
        assert!(
            refused
                .message()
                .contains("another client holds this launch's input"),
            "{refused:?}"
        );
        let (_vtx, _viewer) = attach(&c, &e.id, false, 0).await.unwrap();
        let total = 64 * 64 * 1024;
        let feed = tokio::spawn({
            let tx = tx.clone();
            async move {
                let chunk = vec![b'x'; 64 * 1024];
                for _ in 0..64 {
                    tx.send(input(&chunk)).await.unwrap();
                }
            }
        });
        let mut echoed = 0usize;
        while echoed < total {
            let ev = tokio::time::timeout(Duration::from_secs(30), events.message())
                .await
                .expect("cat stopped echoing")
                .unwrap()
                .expect("the attachment ended early");
            if let Some(Event::Output(o)) = ev.event {
                assert_eq!(o.offset as usize, echoed, "in order, once");
                assert!(o.data.iter().all(|b| *b == b'x'), "only what was sent");
                echoed += o.data.len();
            }
        }
        assert_eq!(echoed, total);
        feed.await.unwrap();
        // Leaving does not end the input: the next writer goes on.
        drop(tx);
        drop(events);
        let (tx, mut events) = loop {
            // From where the first left off, so nothing comes before new output; the
            // shim frees the writer's place once it sees the old socket close.
            let (tx, mut ev) = attach(&c, &e.id, true, echoed as u64).await.unwrap();
            match tokio::time::timeout(Duration::from_millis(300), ev.message()).await {
                Err(_) => break (tx, ev),
                Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(50)).await,
                Ok(Ok(m)) => panic!("an event before any input: {}", m.is_some()),
            }
        };
        tx.send(input(b"tail")).await.unwrap();
        tx.send(AttachRequest {
            msg: Some(attach_request::Msg::CloseInput(CloseInput {})),
        })
        .await
        .unwrap();
        let (mut out, mut err, mut exit) = (String::new(), String::new(), None);
        while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), events.message())
            .await
            .expect("the launch did not end after its input was closed")
            .unwrap()
        {
            match ev.event.unwrap() {
                Event::Output(o) if o.stream == OutputStream::Stderr as i32 => {
                    err.push_str(&String::from_utf8_lossy(&o.data))
                }
                Event::Output(o) => out.push_str(&String::from_utf8_lossy(&o.data)),
                Event::Exit(e) => exit = Some(e),
                Event::ReplayedTo(_) => panic!("no replay without a scrollback"),
            }
        }
        assert_eq!(out, "tail", "the second writer's input, after the first's");
        assert_eq!(err, "done\n");
        let exit = exit.expect("an exit event");
        assert_eq!(exit.status, ExecutionStatus::Succeeded as i32, "{exit:?}");

        // Refused by name.
        let cat = c.start(start(&["/bin/cat"])).await.unwrap();
        let (tx, mut ev) = attach(&c, &cat.id, true, 0).await.unwrap();
        tx.send(AttachRequest {
            msg: Some(attach_request::Msg::Resize(TerminalSize {
                rows: 5,
                cols: 5,
            })),
        })
        .await
        .unwrap();
        let e = ev.message().await.unwrap_err();
        assert!(e.message().starts_with("resize: "), "{e:?}");
        let (stx, srx) = tokio::sync::mpsc::channel(1);
        stx.send(AttachRequest {
            msg: Some(attach_request::Msg::Open(AttachOpen {
                id: cat.id.clone(),
                scrollback: true,
                ..Default::default()
            })),
        })
        .await
        .unwrap();
        let e = c
            .attach(tokio_stream::wrappers::ReceiverStream::new(srx))
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e:?}");
        assert!(e.message.starts_with("scrollback: "), "{e:?}");
        c.kill(&cat.id).await.unwrap();
        let e = c.run(start(&["/bin/cat"])).await.unwrap_err();
        assert!(e.message.starts_with("open_stdin: "), "{e:?}");
        let mut both = start(&["/bin/cat"]);
        both.stdin = b"x".to_vec();
        let e = c.start(both).await.unwrap_err();
        assert!(e.message.starts_with("stdin: "), "{e:?}");
        let e = c
            .request_run(argos_proto::exec::v1::RequestRunRequest {
                run: Some(start(&["/bin/cat"])),
                purpose: "test".into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(e.message.starts_with("open_stdin: "), "{e:?}");
        // A launch that takes no input is no place to attach.
        let plain = c
            .start(RunRequest {
                argv: vec!["/bin/sleep".into(), "30".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        let e = attach(&c, &plain.id, false, 0).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Conflict, "{e:?}");
        c.kill(&plain.id).await.unwrap();
    });
}

/// An ended launch's follow socket name is anyone's to bind: an impostor serving forged
/// output on it used to be followed (and an admin reopening an ended terminal typed into
/// it). execd now serves an ended launch from its files only and trusts a live socket
/// only when the kernel says its server is the launch's own shim: the impostor gets no
/// connection, the follower the real output, the writer the launch's end.
#[test]
fn an_impostor_on_an_ended_launch_socket_is_never_trusted() {
    use std::os::linux::net::SocketAddrExt;
    require_root("the socket squatting test");
    let s = Standalone::start("execd");
    let rt = rt();
    rt.block_on(async {
        let c = client(&s);
        let e = c
            .start(RunRequest {
                command: "echo real".into(),
                open_stdin: true,
                timeout_ms: Some(30_000),
                ..Default::default()
            })
            .await
            .unwrap();
        // Close its input: it prints and ends.
        let (tx, mut events) = attach(&c, &e.id, true, 0).await.unwrap();
        tx.send(AttachRequest {
            msg: Some(attach_request::Msg::CloseInput(
                argos_proto::exec::v1::CloseInput {},
            )),
        })
        .await
        .unwrap();
        while events.message().await.unwrap().is_some() {}
        // The impostor binds the ended launch's name and serves forged output.
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(
            format!("argos/launch/{}", e.id).as_bytes(),
        )
        .unwrap();
        let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        listener.set_nonblocking(true).unwrap();
        let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let impostor = {
            let (served, stop) = (served.clone(), stop.clone());
            std::thread::spawn(move || {
                use std::io::Write;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((mut sock, _)) => {
                            served.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            // A stdout frame at offset 0: "forged\n".
                            let mut frame = vec![1u8];
                            frame.extend_from_slice(&0u64.to_le_bytes());
                            frame.extend_from_slice(&7u32.to_le_bytes());
                            frame.extend_from_slice(b"forged\n");
                            let _ = sock.write_all(&frame);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        // Follow from the start: the real output, from the files.
        let mut f = c.follow(&e.id, [0, 0]);
        let mut out = Vec::new();
        while let Some(item) = f.next().await {
            match item.unwrap() {
                argos_exec_client::FollowItem::Output { data, .. } => out.extend_from_slice(&data),
                argos_exec_client::FollowItem::Exit(_) => break,
            }
        }
        assert_eq!(out, b"real\n");
        // Attach as the writer: the launch's end, and nothing typed reaches anyone.
        let (tx, mut events) = attach(&c, &e.id, true, 0).await.unwrap();
        let _ = tx.send(input(b"my password\n")).await;
        let mut exit = false;
        while let Some(ev) = events.message().await.unwrap() {
            exit |= matches!(
                ev.event,
                Some(argos_proto::exec::v1::attach_event::Event::Exit(_))
            );
        }
        assert!(exit, "the ended launch's exit");
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        impostor.join().unwrap();
        assert_eq!(
            served.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "execd connected to the impostor"
        );
    });
}
