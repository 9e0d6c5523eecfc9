//! argos-bench-gateway: the gateway's figures beside their anchors, in one run.
//!
//! - P2: an HTTP exec round trip (bearer token, `POST /api/shell/exec`) of a contained
//!   `/bin/true` vs P1, the same launch through execd's gRPC `Run` directly. Goal ≤ 1.3×.
//! - P3: 1 GiB of text output (lines of digits) through the SSE stream
//!   (`POST /api/shell/stream`) vs the same bytes from a raw pipe. Goal ≥ 0.5×.
//! - Load: 200 concurrent SSE streams for 60 s: errors, and the gateway's RSS at the
//!   start and the end.
//! - Memory: 2,000 launches over HTTP, 16 at a time, and both audit trails verified
//!   (anchored at every turn); then, once the stack is quiet again, each daemon's PSS
//!   after all of the above against its PSS idle at the start. Goal ≤ 1.5×.
//!
//! Needs root (execd's containment). Run with `scripts/bench`.
#![forbid(unsafe_code)]

use std::io::{BufRead, Read};

use std::time::{Duration, Instant};

use argos_proto::exec::v1::RunRequest;
use argos_proto::exec::v1::exec_client::ExecClient;
use argos_tests::StackBuilder;
use argos_tests::measure::{median, pipe_seconds, pss_anon_kib, pss_kib, rss_kib};
use argos_tests::web::Web;
use serde_json::json;

const GIB: u64 = 1024 * 1024 * 1024;

/// Reads an SSE reply to the end; returns the bytes of `stdout` text it carried (and
/// whether it ended with success).
fn drain_sse(reader: impl Read) -> (u64, bool) {
    let mut lines = std::io::BufReader::with_capacity(1 << 20, reader);
    let mut got = 0u64;
    let mut exited = false;
    let mut event = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if lines.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(e) = line.strip_prefix(b"event: ") {
            event = e.trim_ascii().to_vec();
        } else if let Some(d) = line.strip_prefix(b"data: ") {
            if event == b"stdout" {
                // {"offset":N,"text":"…"}: digits and newlines, each newline escaped as
                // two characters.
                let d = d.trim_ascii_end();
                if let Some(at) = memchr::memmem::find(d, b"\"text\":\"") {
                    let text = &d[at + 8..d.len() - 2]; // minus the closing `"}`
                    let escapes = memchr::memchr_iter(b'\\', text).count();
                    got += (text.len() - escapes) as u64;
                }
            } else if event == b"exit" {
                exited = d.windows(11).any(|w| w == b"\"succeeded\"");
            }
        }
    }
    (got, exited)
}

fn sse_request(
    web_base: &str,
    token: &str,
    body: &serde_json::Value,
) -> ureq::http::Request<Vec<u8>> {
    ureq::http::Request::builder()
        .method("POST")
        .uri(format!("{web_base}/api/shell/stream"))
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .body(serde_json::to_vec(body).unwrap())
        .unwrap()
}

fn main() {
    argos_tests::answer_help(
        "usage: argos-bench-gateway [--runs N] [--load-seconds S] [--only p2,p3,load,memory]\n  the gateway's request latency and load figures beside their anchors",
    );
    let mut runs = 200usize;
    let mut load_s = 60u64;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            "--load-seconds" => {
                load_s = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--load-seconds S")
            }
            "--only" => only = Some(args.next().expect("--only p2,p3,load,memory")),
            "--bin-dir" => {
                let _ = args.next(); // the harness finds the binaries beside this one
            }
            other => argos_tests::bad_argument(
                "usage: argos-bench-gateway [--runs N] [--load-seconds S] [--only p2,p3,load,memory]",
                other,
            ),
        }
    }
    assert!(
        nix::unistd::geteuid().is_root(),
        "execd's containment needs root"
    );
    nix::unistd::sync();
    // One token drives every stream and launch: no per-user quota (that is the load).
    let stack = StackBuilder::new()
        .env("ARGOS_QUOTA__LAUNCHES", "0")
        .env("ARGOS_QUOTA__EVENT_STREAMS", "0")
        .start();
    let mut admin = stack.admin();
    let r = admin.post(
        "/api/tokens",
        json!({"name": "bench", "scopes": ["exec", "read"]}),
    );
    let token = r.json()["token"].as_str().unwrap().to_string();
    let base = format!("http://{}", stack.listen);
    let mut web = Web::with_bearer(stack.listen, &token);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut grpc =
        rt.block_on(async { ExecClient::new(argos_tests::channel(&stack.socket("execd"))) });
    let body = json!({"argv": ["/bin/true"], "profile": "agent", "timeout_ms": 10000});
    let req = || RunRequest {
        argv: vec!["/bin/true".into()],
        profile: "agent".into(),
        timeout_ms: Some(10_000),
        ..Default::default()
    };
    // Warm both paths, then alternate them, paced as an interactive caller would be.
    assert_eq!(web.post("/api/shell/exec", body.clone()).status, 200);
    rt.block_on(grpc.run(req())).unwrap();
    let run = |part: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|p| p == part))
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    // Each daemon's PSS idle: once each kind of work the load does was done once (its
    // code read in from the program's file), and the stack has settled.
    let daemons: Vec<(&str, i32)> = argos_tests::DAEMONS
        .iter()
        .map(|d| (*d, stack.daemon_pid(d)))
        .collect();
    let snapshot = || -> Vec<(u64, u64)> {
        daemons
            .iter()
            .map(|(_, p)| (pss_kib(*p), pss_anon_kib(*p)))
            .collect()
    };
    let idle = run("memory").then(|| {
        let warm = agent
            .run(sse_request(
                &base,
                &token,
                &json!({"command": "echo warm", "profile": "agent", "timeout_ms": 10000}),
            ))
            .unwrap();
        assert!(
            drain_sse(warm.into_body().into_reader()).1,
            "the warm-up stream"
        );
        assert_eq!(admin.get("/api/audit/verify").status, 200);
        std::thread::sleep(Duration::from_secs(6));
        snapshot()
    });
    let (mut http, mut direct) = (Vec::new(), Vec::new());
    for _ in 0..if run("p2") { runs } else { 0 } {
        std::thread::sleep(Duration::from_millis(40));
        let t = Instant::now();
        let r = web.post("/api/shell/exec", body.clone());
        http.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(r.json()["execution"]["status"], "succeeded", "{r:?}");
        std::thread::sleep(Duration::from_millis(40));
        let t = Instant::now();
        rt.block_on(grpc.run(req())).unwrap();
        direct.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let p2p1 = run("p2").then(|| (median(&mut http), median(&mut direct)));

    // P3: 1 GiB of text through the SSE stream vs a raw pipe (medians of 3).
    // Text (SSE carries JSON strings): lines of 1023 zero digits, 1 GiB in all.
    let cmd = format!("yes \"$(printf '%01023d' 0)\" | head -c {GIB}");
    let (mut sse_s, mut pipe_s) = (Vec::new(), Vec::new());
    for _ in 0..if run("p3") { 3 } else { 0 } {
        let t = Instant::now();
        let resp = agent
            .run(sse_request(
                &base,
                &token,
                &json!({"command": cmd, "profile": "agent", "timeout_ms": 600000}),
            ))
            .unwrap();
        let (got, ok) = drain_sse(resp.into_body().into_reader());
        sse_s.push(t.elapsed().as_secs_f64());
        assert!(
            ok && got == GIB,
            "the stream delivered {got} bytes (exit ok: {ok})"
        );
        // The anchor runs on a quiet machine: the stream's log written back first.
        nix::unistd::sync();
        pipe_s.push(pipe_seconds(&cmd, GIB));
    }
    let p3 = run("p3").then(|| (median(&mut sse_s), median(&mut pipe_s)));

    let load = run("load").then(|| {
        // Load: 200 streams at once, each a command printing a line a second.
        let gateway_pid = stack
            .daemon_pids()
            .into_iter()
            .find(|(_, n)| n.contains("gatewayd"))
            .map(|(p, _)| p)
            .expect("gatewayd's pid");
        let rss_start = rss_kib(gateway_pid);
        let errors = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let events = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let clients: Vec<_> = (0..200)
            .map(|_| {
                let (agent, base, token) = (agent.clone(), base.clone(), token.clone());
                let (errors, events) = (errors.clone(), events.clone());
                std::thread::spawn(move || {
                    let body = json!({"command": format!("for i in $(seq 1 {load_s}); do echo tick $i; sleep 1; done"),
                        "profile": "agent", "timeout_ms": (load_s + 60) * 1000});
                    match agent.run(sse_request(&base, &token, &body)) {
                        Ok(resp) if resp.status() == 200 => {
                            let mut lines = std::io::BufReader::new(resp.into_body().into_reader());
                            let mut line = String::new();
                            let mut exited = false;
                            while lines.read_line(&mut line).unwrap_or(0) > 0 {
                                if line.starts_with("event: stdout") {
                                    events.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                }
                                if line.starts_with("event: exit") {
                                    exited = true;
                                }
                                if line.starts_with("event: error") {
                                    errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                }
                                line.clear();
                            }
                            if !exited {
                                errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                        _ => {
                            errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(load_s / 2));
        let rss_mid = rss_kib(gateway_pid);
        for c in clients {
            let _ = c.join();
        }
        let rss_end = rss_kib(gateway_pid);
        (events.load(std::sync::atomic::Ordering::Relaxed), errors.load(std::sync::atomic::Ordering::Relaxed), rss_start, rss_mid, rss_end)
    });
    let memory = idle.map(|idle| {
        // 2,000 launches, 16 at a time: each writes its intent, its end and their audit
        // rows, and the gateway anchors execd's trail as it grows.
        let t = Instant::now();
        let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let failed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let workers: Vec<_> = (0..16)
            .map(|_| {
                let (next, failed, body) = (next.clone(), failed.clone(), body.clone());
                let mut web = Web::with_bearer(stack.listen, &token);
                std::thread::spawn(move || {
                    while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 2000 {
                        let r = web.post("/api/shell/exec", body.clone());
                        if r.status != 200 || r.json()["execution"]["status"] != "succeeded" {
                            failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let launches_s = t.elapsed().as_secs_f64();
        let peak = snapshot();
        // Both trails walked whole, a few times (an admin's `audit verify`).
        let mut rows = 0;
        for _ in 0..3 {
            let v = admin.get("/api/audit/verify");
            assert_eq!(v.status, 200, "{v:?}");
            assert_eq!(v.json()["execd"]["ok"], true, "{v:?}");
            rows = v.json()["execd"]["rows"].as_u64().unwrap_or(0);
        }
        // Quiet again: what a daemon holds now it keeps.
        std::thread::sleep(Duration::from_secs(10));
        let after = snapshot();
        (
            launches_s,
            failed.load(std::sync::atomic::Ordering::Relaxed),
            rows,
            idle,
            peak,
            after,
        )
    });
    stack.stop();

    let mibs = |secs: f64| GIB as f64 / (1024.0 * 1024.0) / secs;
    println!("Argos gateway benchmark ({runs} runs, medians)");
    if let Some((p2, p1)) = p2p1 {
        println!("P2 HTTP exec round trip, contained /bin/true (agent profile, bearer token)");
        println!("  {:<44} {:>9.2} ms", "POST /api/shell/exec", p2);
        println!("  {:<44} {:>9.2} ms", "P1: execd Run over gRPC, direct", p1);
        println!(
            "  {:<44} {:>9.2}x   (goal <= 1.3x)",
            "HTTP / direct gRPC",
            p2 / p1
        );
    }
    if let Some((sse, pipe)) = p3 {
        println!("P3 1 GiB through the SSE stream (medians of 3)");
        println!(
            "  {:<44} {:>9.0} MiB/s",
            "POST /api/shell/stream",
            mibs(sse)
        );
        println!("  {:<44} {:>9.0} MiB/s", "raw pipe", mibs(pipe));
        println!(
            "  {:<44} {:>9.2}x   (goal >= 0.5x)",
            "SSE / raw pipe",
            pipe / sse
        );
    }
    if let Some((events, errors, rss_start, rss_mid, rss_end)) = load {
        println!("Load: 200 concurrent SSE streams for {load_s} s");
        println!("  {:<44} {:>9}", "stdout events received", events);
        println!("  {:<44} {:>9}", "errors", errors);
        println!(
            "  {:<44} {:>6} KiB / {} KiB / {} KiB",
            "gateway RSS start / middle / end", rss_start, rss_mid, rss_end
        );
    }
    if let Some((secs, failed, rows, idle, peak, after)) = memory {
        let mib = |k: u64| k as f64 / 1024.0;
        println!(
            "Memory: 2000 launches over HTTP, 16 at a time ({secs:.1} s, {failed} failed), execd's trail {rows} rows verified"
        );
        println!(
            "  {:<12} {:>10} {:>10} {:>10} {:>12}   {:>16}",
            "PSS MiB", "idle", "peak", "after", "after/idle", "anon idle/after"
        );
        for (i, (name, _)) in daemons.iter().enumerate() {
            println!(
                "  {:<12} {:>10.1} {:>10.1} {:>10.1} {:>11.2}x   {:>7.1} / {:<6.1}  (goal <= 1.5x)",
                name,
                mib(idle[i].0),
                mib(peak[i].0),
                mib(after[i].0),
                after[i].0 as f64 / idle[i].0.max(1) as f64,
                mib(idle[i].1),
                mib(after[i].1),
            );
        }
    }
}
