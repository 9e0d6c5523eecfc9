//! argos-bench-terminal: the web terminal's figures beside their anchors, in one run.
//!
//! - P4: output through a web terminal — the PTY in the launch's shim, execd's `Attach`,
//!   the gateway's WebSocket, a client acknowledging every frame — vs a raw PTY read on
//!   the same machine (this process holds the master, `sh` writes into the slave). The
//!   same 256 MiB of `yes` lines both ways, medians of 3. Goal ≥ 0.8×.
//! - Idle: N terminals (default 1000) open, each with a WebSocket attached and idle: the
//!   RSS of execd, of the shims with their trees, and of the gateway.
//!
//! Needs root (execd's containment). Run with `scripts/bench`.
#![forbid(unsafe_code)]

use std::io::Read;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use argos_tests::measure::{median, rss_kib};
use argos_tests::web::Web;
use argos_tests::{Stack, StackBuilder};
use serde_json::json;
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message, WebSocket};

const MIB: f64 = 1024.0 * 1024.0;
const FLOOD_BYTES: u64 = 256 * 1024 * 1024;

fn flood() -> String {
    format!(
        "yes abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c {FLOOD_BYTES}"
    )
}

/// MiB/s of the flood read raw from a PTY master (the slave is the writer's stdout).
fn raw_pty() -> f64 {
    let p = nix::pty::openpty(None, None).expect("openpty");
    let out = std::process::Stdio::from(p.slave.as_fd().try_clone_to_owned().unwrap());
    let err = std::process::Stdio::from(p.slave);
    let t = Instant::now();
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(flood())
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("sh");
    let mut master = std::fs::File::from(p.master);
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    // EIO once the last writer closes the slave.
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        got += n as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    let _ = child.wait();
    assert!(got >= FLOOD_BYTES, "raw pty read {got} bytes");
    got as f64 / MIB / secs
}

fn ws(stack: &Stack, path: &str, token: &str) -> WebSocket<TcpStream> {
    let mut req = format!("ws://{}{path}", stack.listen)
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let tcp = TcpStream::connect(stack.listen).unwrap();
    tcp.set_nodelay(true).unwrap();
    tungstenite::client::client(req, tcp).expect("websocket").0
}

fn open(web: &mut Web, argv: &[&str]) -> String {
    let r = web.post(
        "/api/terminals",
        json!({"argv": argv, "rows": 50, "cols": 200}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    r.json()["terminal"]["id"].as_str().unwrap().to_string()
}

fn attach(stack: &Stack, web: &mut Web, token: &str, id: &str) -> WebSocket<TcpStream> {
    let r = web.post(&format!("/api/terminals/{id}/ticket"), json!({}));
    assert_eq!(r.status, 200, "{r:?}");
    ws(stack, r.json()["ws"].as_str().unwrap(), token)
}

/// MiB/s of the flood through a web terminal, acknowledging every frame.
fn web_terminal(stack: &Stack, web: &mut Web, token: &str) -> f64 {
    let cmd = format!("read go; {}", flood());
    let id = open(web, &["sh", "-c", &cmd]);
    let mut socket = attach(stack, web, token, &id);
    // Past the replay, start the flood and count.
    loop {
        if let Message::Binary(b) = socket.read().unwrap()
            && b[0] == 0x84
        {
            break;
        }
    }
    socket
        .send(Message::Binary(vec![0x01, b'\n'].into()))
        .unwrap();
    let t = Instant::now();
    let mut got = 0u64;
    loop {
        let msg = match socket.read() {
            Ok(m) => m,
            Err(e) => panic!("reading the terminal after {got} bytes: {e}"),
        };
        match msg {
            Message::Binary(b) if b[0] == 0x81 => {
                let n = (b.len() - 1) as u32;
                got += u64::from(n);
                let mut ack = vec![0x03];
                ack.extend_from_slice(&n.to_be_bytes());
                // After the exit the gateway closes: a late ack may find it gone.
                let _ = socket.send(Message::Binary(ack.into()));
            }
            Message::Binary(b) if b[0] == 0x82 => break,
            _ => {}
        }
    }
    let secs = t.elapsed().as_secs_f64();
    assert!(got >= FLOOD_BYTES, "the web terminal carried {got} bytes");
    got as f64 / MIB / secs
}

/// Every process below `pid`.
fn tree(pid: i32) -> Vec<i32> {
    let mut all = vec![];
    let mut next = argos_tests::measure::children(pid);
    while let Some(p) = next.pop() {
        next.extend(argos_tests::measure::children(p));
        all.push(p);
    }
    all
}

fn main() {
    argos_tests::answer_help(
        "usage: argos-bench-terminal [--sessions N]\n  web terminal keystroke latency and memory per session beside their anchors",
    );
    let mut sessions = 1000usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--sessions" => {
                sessions = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--sessions N")
            }
            other => argos_tests::bad_argument("usage: argos-bench-terminal [--sessions N]", other),
        }
    }
    let stack = StackBuilder::new().start();
    let mut admin = stack.admin();
    let r = admin.post(
        "/api/tokens",
        json!({"name": "bench", "scopes": ["exec", "read"]}),
    );
    let token = r.json()["token"].as_str().unwrap().to_string();
    let mut web = Web::with_bearer(stack.listen, &token);

    println!("Argos web terminal benchmark");
    let mut raw = Vec::new();
    let mut term = Vec::new();
    for _ in 0..3 {
        raw.push(raw_pty());
        term.push(web_terminal(&stack, &mut web, &token));
    }
    let (raw, term) = (median(&mut raw), median(&mut term));
    println!("P4 256 MiB of output through a terminal (medians of 3)");
    println!("  web terminal (shim PTY -> execd -> WebSocket, acked)  {term:>7.0} MiB/s");
    println!("  raw PTY read                                         {raw:>7.0} MiB/s");
    println!(
        "  web terminal / raw PTY                               {:>7.2}x   (goal >= 0.8x)",
        term / raw
    );

    let pids = stack.daemon_pids();
    let pid_of = |name: &str| {
        pids.iter()
            .find(|(_, cmd)| cmd.contains(&format!("argos-{name}")))
            .map(|(p, _)| *p)
            .unwrap()
    };
    let (gw, execd) = (pid_of("gatewayd"), pid_of("execd"));
    let t = Instant::now();
    let mut open_ids = Vec::with_capacity(sessions);
    let mut sockets = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        let id = open(&mut web, &["/bin/sh", "-i"]);
        sockets.push(attach(&stack, &mut web, &token, &id));
        open_ids.push(id);
    }
    let opened = t.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    let shims: u64 = tree(execd).into_iter().map(rss_kib).sum();
    let (e, g) = (rss_kib(execd), rss_kib(gw));
    println!(
        "Idle: {sessions} terminals open, each with a WebSocket attached ({:.1} s to open)",
        opened.as_secs_f64()
    );
    println!("  execd                                     {:>9} KiB", e);
    println!(
        "  shims and their trees (init, sh)          {:>9} KiB",
        shims
    );
    println!("  gateway                                   {:>9} KiB", g);
    println!(
        "  total / per terminal                      {:>9} KiB / {} KiB",
        e + shims + g,
        (e + shims + g) / sessions as u64
    );
    drop(sockets);
    for id in open_ids {
        let _ = web.call("DELETE", &format!("/api/terminals/{id}"), None, &[]);
    }
    stack.stop();
}
