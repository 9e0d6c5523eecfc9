//! argos-bench: the foundation's figures, each beside its anchor.
//!
//! - cold start: `argosctl up` spawned → all four daemons SERVING, against the floor any
//!   launcher pays: exec'ing the same four binaries (`--version`) one after another;
//! - idle RSS of each daemon two seconds after start, against a minimal process
//!   (`sleep`) on the same machine;
//! - stop: SIGTERM to `argosctl up` → every daemon gone.
//!
//! Run with `scripts/bench` (release build). Prints one table.
#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use argos_tests::measure::median;
use argos_tests::{DAEMONS, processes_mentioning};

const USAGE: &str = "usage: argos-bench [--bin-dir DIR] [--runs N]\n  the stack's start, memory and probe figures beside their anchors";

fn main() {
    argos_tests::answer_help(USAGE);
    let mut args = std::env::args().skip(1);
    let mut bin_dir: Option<PathBuf> = None;
    let mut runs = 10usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bin-dir" => bin_dir = args.next().map(PathBuf::from),
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            other => argos_tests::bad_argument(USAGE, other),
        }
    }
    let bin_dir = bin_dir.unwrap_or_else(|| {
        std::env::current_exe()
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf()
    });
    let ctl = bin_dir.join("argosctl");
    assert!(ctl.exists(), "{} missing: build first", ctl.display());

    let mut start_ms = Vec::new();
    let mut floor_ms = Vec::new();
    let mut stop_ms = Vec::new();
    let mut rss: Vec<(String, f64)> = Vec::new();
    for run in 0..runs {
        floor_ms.push(exec_floor(&bin_dir));
        let root = argos_tests::open_tempdir();
        let port = argos_tests::free_port();
        let t0 = Instant::now();
        let mut child = Command::new(&ctl)
            .args(["up", "--root"])
            .arg(root.path())
            .args(["--listen", &format!("127.0.0.1:{port}"), "--bin-dir"])
            .arg(&bin_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        loop {
            let line = lines
                .next()
                .expect("argosctl up ended before it was up")
                .unwrap();
            if line.starts_with("Argos is up") {
                break;
            }
        }
        start_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
        std::thread::spawn(move || for _ in lines {});
        if run == 0 {
            std::thread::sleep(Duration::from_secs(2));
            for (pid, cmd) in processes_mentioning(root.path()) {
                if let Some(d) = DAEMONS
                    .iter()
                    .find(|d| cmd.contains(&format!("argos-{d} ")))
                {
                    rss.push((format!("argos-{d}"), rss_mb(pid)));
                }
            }
            rss.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let t1 = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = child.wait().unwrap();
        assert!(status.success(), "argosctl up exited {status}");
        stop_ms.push(t1.elapsed().as_secs_f64() * 1000.0);
        assert!(
            processes_mentioning(root.path()).is_empty(),
            "left-over processes"
        );
    }
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let sleep_rss = rss_mb(sleeper.id() as i32);
    let _ = sleeper.kill();
    let _ = sleeper.wait();

    let (s, f, st) = (
        median(&mut start_ms),
        median(&mut floor_ms),
        median(&mut stop_ms),
    );
    println!(
        "Argos foundation benchmark ({runs} runs, binaries from {})",
        bin_dir.display()
    );
    println!(
        "{:<34} {:>12} {:>34} {:>8}",
        "figure", "Argos", "anchor", "ratio"
    );
    println!(
        "{:<34} {:>9.1} ms {:>22.1} ms (exec floor) {:>7.1}x",
        "cold start to all SERVING (median)",
        s,
        f,
        s / f
    );
    println!(
        "{:<34} {:>9.1} ms",
        "stop: SIGTERM to all gone (median)", st
    );
    for (d, mb) in &rss {
        println!(
            "{:<34} {:>9.1} MB {:>22.1} MB (sleep(1)) {:>9.1}x",
            format!("idle RSS {d}"),
            mb,
            sleep_rss,
            mb / sleep_rss
        );
    }
    println!(
        "{:<34} {:>9.1} MB",
        "idle RSS, all four",
        rss.iter().map(|(_, m)| m).sum::<f64>()
    );
}

/// Exec'ing the four daemon binaries, one after another, until each exits.
fn exec_floor(bin_dir: &Path) -> f64 {
    let t = Instant::now();
    for d in DAEMONS {
        let out = Command::new(bin_dir.join(format!("argos-{d}")))
            .arg("--version")
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    t.elapsed().as_secs_f64() * 1000.0
}

fn rss_mb(pid: i32) -> f64 {
    argos_tests::measure::rss_kib(pid) as f64 / 1024.0
}
