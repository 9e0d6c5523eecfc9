//! argos-bench-jobs: background jobs' figures beside their anchors, in one run.
//!
//! - P7: 1000 `sleep` jobs started at once through `POST /api/jobs` (16 clients, the
//!   sandbox): the time until all run, jobd's and execd's CPU seconds for it and their
//!   memory then (PSS), and each job's cost on the host (the drop of MemAvailable / 1000);
//!   beside 1000 `bwrap --unshare-all … sleep` started from here, the same way (time until
//!   each runs its sleep, MemAvailable per sandbox). Then all 1000 are cancelled.
//! - Listing: with 10 000 ended jobs (every tenth failed), the p50 of `GET /api/jobs`'s
//!   first page and of a filtered page (`state=failed`), beside the executions ledger's
//!   same pages (`GET /api/executions`, `status=failed`) over the same 10 000 runs.
//!
//! Needs root (the stack runs privilege-separated) and bwrap (Debian `bubblewrap`). Run
//! with `scripts/bench`.
#![forbid(unsafe_code)]

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use argos_proto::job::v1 as jpb;
use argos_tests::StackBuilder;
use argos_tests::measure::{children, median, pss_kib};
use argos_tests::web::Web;
use serde_json::json;

const CLIENTS: usize = 16;

fn mem_available_kib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPU seconds (user + system) a process has used.
fn cpu_s(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = after
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // Fields 14 and 15 (utime, stime), counted from after the command's name.
    let ticks = f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0);
    ticks as f64 / 100.0
}

fn pid_of(stack: &argos_tests::Stack, name: &str) -> i32 {
    stack
        .daemon_pids()
        .into_iter()
        .find(|(_, cmd)| {
            cmd.split(' ')
                .next()
                .is_some_and(|exe| exe.rsplit('/').next() == Some(name))
        })
        .unwrap_or_else(|| panic!("no {name}"))
        .0
}

/// Starts `n` jobs with `body(i)` from `CLIENTS` threads; answers their ids.
fn start_jobs(
    stack: &argos_tests::Stack,
    token: &str,
    n: usize,
    body: impl Fn(usize) -> serde_json::Value + Send + Sync + 'static,
) -> Vec<String> {
    let next = Arc::new(AtomicUsize::new(0));
    let body = Arc::new(body);
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (next, body, addr, token) =
                (next.clone(), body.clone(), stack.listen, token.to_string());
            std::thread::spawn(move || {
                let mut web = Web::with_bearer(addr, &token);
                let mut ids = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return ids;
                    }
                    let r = web.post("/api/jobs", body(i));
                    assert_eq!(r.status, 201, "{r:?}");
                    ids.push(r.json()["job"]["id"].as_str().unwrap().to_string());
                }
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

/// How many jobs are in `state`, from jobd's own socket (as an operator).
async fn count(
    c: &mut jpb::job_client::JobClient<tonic::transport::Channel>,
    state: jpb::JobState,
) -> usize {
    let mut n = 0;
    let mut token = String::new();
    loop {
        let r = c
            .list_jobs(jpb::ListJobsRequest {
                state: state as i32,
                page_size: 500,
                page_token: token.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        n += r.jobs.len();
        if r.next_page_token.is_empty() {
            return n;
        }
        token = r.next_page_token;
    }
}

/// Whether `sleep` runs at most `depth` generations under `pid`.
fn runs_sleep(pid: i32, depth: u32) -> bool {
    depth > 0
        && children(pid).into_iter().any(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "sleep")
                || runs_sleep(c, depth - 1)
        })
}

fn p50_ms(web: &mut Web, path: &str, rounds: usize) -> f64 {
    let mut v: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            let r = web.get(path);
            assert_eq!(r.status, 200, "{path}: {r:?}");
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    median(&mut v)
}

fn main() {
    argos_tests::answer_help(
        "usage: argos-bench-jobs [--running N] [--ended N]\n  1000 running jobs: start time, daemons' CPU and memory, per-job host cost (vs bwrap); listing 10 000 ended jobs (vs the executions ledger)",
    );
    let (mut running, mut ended) = (1000usize, 10_000usize);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next().and_then(|n| n.parse().ok())) {
            ("--running", Some(n)) => running = n,
            ("--ended", Some(n)) => ended = n,
            _ => {
                eprintln!("usage: argos-bench-jobs [--running N] [--ended N]");
                std::process::exit(2);
            }
        }
    }
    argos_tests::require_root("the jobs benchmark");
    let stack = StackBuilder::new()
        .env("ARGOS_QUOTA__LAUNCHES", "0")
        .env("ARGOS_QUOTA__DAEMON_LAUNCHES", "0")
        .env("ARGOS_JOBS__ACTIVE_PER_USER", "0")
        .env("ARGOS_LOG__LEVEL", "warn")
        .start();
    let mut admin = stack.admin();
    let r = admin.post(
        "/api/tokens",
        json!({"name": "bench", "scopes": ["read", "exec"]}),
    );
    assert_eq!(r.status, 201, "{r:?}");
    let token = r.json()["token"].as_str().unwrap().to_string();
    let (jobd, execd) = (pid_of(&stack, "argos-jobd"), pid_of(&stack, "argos-execd"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut jobs = rt.block_on(async {
        jpb::job_client::JobClient::new(argos_tests::channel(&stack.socket("jobd")))
    });

    // P7: Argos.
    std::thread::sleep(Duration::from_secs(2));
    let mem0 = mem_available_kib();
    let cpu0 = (cpu_s(jobd), cpu_s(execd));
    let t = Instant::now();
    let ids = start_jobs(
        &stack,
        &token,
        running,
        |_| json!({"command": "sleep 600", "place": "sandbox"}),
    );
    let created = t.elapsed().as_secs_f64();
    while rt.block_on(count(&mut jobs, jpb::JobState::Running)) < running {
        std::thread::sleep(Duration::from_millis(50));
    }
    let all_running = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(2));
    let argos_kib = mem0.saturating_sub(mem_available_kib()) as f64 / running as f64;
    let cpu = (cpu_s(jobd) - cpu0.0, cpu_s(execd) - cpu0.1);
    let (jobd_pss, execd_pss) = (pss_kib(jobd), pss_kib(execd));
    // Cancelled, all of them.
    let t = Instant::now();
    {
        let next = Arc::new(AtomicUsize::new(0));
        let ids = Arc::new(ids);
        let threads: Vec<_> = (0..CLIENTS)
            .map(|_| {
                let (next, ids, addr, token) =
                    (next.clone(), ids.clone(), stack.listen, token.clone());
                std::thread::spawn(move || {
                    let mut web = Web::with_bearer(addr, &token);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(id) = ids.get(i) else { return };
                        let r = web.post(&format!("/api/jobs/{id}/cancel"), json!({}));
                        assert_eq!(r.status, 200, "{r:?}");
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
    }
    while rt.block_on(count(&mut jobs, jpb::JobState::Cancelled)) < running {
        std::thread::sleep(Duration::from_millis(50));
    }
    let cancelled = t.elapsed().as_secs_f64();

    // P7: the anchor, 1000 bubblewrap sandboxes started the same way.
    std::thread::sleep(Duration::from_secs(3));
    let mem0 = mem_available_kib();
    let t = Instant::now();
    let mut sandboxes: Vec<std::process::Child> = (0..running)
        .map(|_| {
            Command::new("bwrap")
                .args([
                    "--unshare-all",
                    "--die-with-parent",
                    "--ro-bind",
                    "/",
                    "/",
                    "--proc",
                    "/proc",
                    "--dev",
                    "/dev",
                    "sleep",
                    "600",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("bwrap (Debian package bubblewrap)")
        })
        .collect();
    // Running: each bwrap has its sleep among its descendants.
    while sandboxes.iter().any(|c| !runs_sleep(c.id() as i32, 3)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let bwrap_running = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(2));
    let bwrap_kib = mem0.saturating_sub(mem_available_kib()) as f64 / running as f64;
    for c in &mut sandboxes {
        let _ = c.kill();
    }
    for c in &mut sandboxes {
        let _ = c.wait();
    }

    // Listing ended jobs, beside the executions ledger.
    let t = Instant::now();
    start_jobs(
        &stack,
        &token,
        ended,
        |i| json!({"command": if i % 10 == 0 { "false" } else { "true" }, "place": "sandbox"}),
    );
    let want = ended + running;
    loop {
        let active = rt.block_on(async {
            let mut n = 0;
            for s in [
                jpb::JobState::Queued,
                jpb::JobState::Starting,
                jpb::JobState::Running,
            ] {
                n += count(&mut jobs, s).await;
            }
            n
        });
        if active == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let fill = t.elapsed().as_secs_f64();
    let mut web = Web::with_bearer(stack.listen, &token);
    let rounds = 200;
    let jobs_first = p50_ms(&mut web, "/api/jobs?limit=50", rounds);
    let execs_first = p50_ms(&mut web, "/api/executions?limit=50", rounds);
    let jobs_failed = p50_ms(&mut web, "/api/jobs?state=failed&limit=50", rounds);
    let execs_failed = p50_ms(&mut web, "/api/executions?status=failed&limit=50", rounds);

    println!("argos-bench-jobs: background jobs (this machine, one run each)");
    println!();
    println!("P7: {running} `sleep` jobs started at once ({CLIENTS} clients, the sandbox)");
    println!("  created (201 each):          {created:>8.2} s");
    println!(
        "  all running:                 {all_running:>8.2} s   bwrap, the same {running}: {bwrap_running:.2} s   ratio {:.2}x",
        all_running / bwrap_running
    );
    println!(
        "  per job on the host:         {:>8.0} KiB  bwrap: {:.0} KiB   ratio {:.2}x   (MemAvailable drop / {running})",
        argos_kib,
        bwrap_kib,
        argos_kib / bwrap_kib.max(1.0)
    );
    println!(
        "  CPU to start them:           jobd {:.2} s, execd {:.2} s",
        cpu.0, cpu.1
    );
    println!(
        "  memory with {running} running (PSS): jobd {:.1} MiB, execd {:.1} MiB",
        jobd_pss as f64 / 1024.0,
        execd_pss as f64 / 1024.0
    );
    println!("  all cancelled (verified kills): {cancelled:.2} s");
    println!();
    println!(
        "Listing with {want} ended jobs ({ended} run in {fill:.1} s, {:.0} jobs/s; p50 of {rounds} reads)",
        ended as f64 / fill
    );
    println!(
        "  first page, 50:              {jobs_first:>8.2} ms  executions ledger: {execs_first:.2} ms   ratio {:.2}x",
        jobs_first / execs_first
    );
    println!(
        "  filtered (failed), 50:       {jobs_failed:>8.2} ms  executions ledger: {execs_failed:.2} ms   ratio {:.2}x",
        jobs_failed / execs_failed
    );
    stack.stop();
}
