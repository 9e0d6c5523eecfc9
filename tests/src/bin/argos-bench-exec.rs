//! argos-bench-exec: execd's figures beside their anchors, in one run.
//!
//! - P1: a contained `/bin/true` through execd's gRPC `Run` (agent profile, every
//!   dimension enforced; and the inspect profile, the host's read-only view) vs bubblewrap
//!   (`bwrap --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev
//!   /bin/true`) vs a bare fork/exec. Goal: ≤ 0.4× bwrap.
//! - Streaming: 1 GiB of output through `Follow` vs the same bytes read from a raw pipe.
//!   Goal: ≥ 0.5× the pipe.
//!
//! Needs root (execd's containment) and bwrap (Debian `bubblewrap`). Run with
//! `scripts/bench`.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use argos_proto::exec::v1::exec_client::ExecClient;
use argos_proto::exec::v1::follow_event::Event;
use argos_proto::exec::v1::{DimensionState, ExecutionStatus, FollowRequest, RunRequest};
use argos_tests::measure::{median, pipe_seconds};

const GIB: u64 = 1024 * 1024 * 1024;

fn time_n(n: usize, mut f: impl FnMut()) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect()
}

/// One execd with its state (launch dirs, ledger, workspaces) under `root`.
struct Execd {
    child: std::process::Child,
    client: ExecClient<tonic::transport::Channel>,
}

impl Execd {
    async fn start(bin_dir: &std::path::Path, root: &std::path::Path) -> Execd {
        std::fs::write(
            root.join("argos.toml"),
            format!(
                "runtime_dir = \"{0}/run\"\nstate_dir = \"{0}/state\"\n[log]\nlevel = \"warn\"\n[exec]\nwork_dir = \"{0}/work\"\n",
                root.display()
            ),
        )
        .unwrap();
        let child = Command::new(bin_dir.join("argos-execd"))
            .arg("--config")
            .arg(root.join("argos.toml"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let socket = argos_common::connect::socket_path(&root.join("run"), "execd");
        let mut client = ExecClient::new(argos_tests::channel(&socket));
        let deadline = Instant::now() + Duration::from_secs(30);
        while client
            .profiles(argos_proto::exec::v1::ProfilesRequest {})
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "execd did not come up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Execd { child, client }
    }

    fn stop(mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }

    /// Medians of `runs` contained /bin/true launches: paced (each finds the warm pool
    /// refilled, as an interactive caller would) and back to back (the refill competes
    /// with the next launch).
    async fn p1(&mut self, runs: usize, profile: &str) -> (f64, f64) {
        let req = || RunRequest {
            argv: vec!["/bin/true".into()],
            profile: profile.into(),
            timeout_ms: Some(10_000),
            ..Default::default()
        };
        let first = self
            .client
            .run(req())
            .await
            .unwrap()
            .into_inner()
            .execution
            .unwrap();
        assert_eq!(first.status, ExecutionStatus::Succeeded as i32, "{first:?}");
        assert!(
            first
                .containment
                .iter()
                .all(|d| d.state == DimensionState::Enforced as i32
                    || (profile == "inspect" && d.name == "process_tree")),
            "every dimension the profile asks for must be enforced for the figure to mean anything: {first:?}"
        );
        let mut paced = Vec::new();
        let mut b2b = Vec::new();
        for pace in [true, false] {
            for _ in 0..runs {
                if pace {
                    tokio::time::sleep(Duration::from_millis(40)).await;
                }
                let t = Instant::now();
                let r = self.client.run(req()).await.unwrap().into_inner();
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                if pace { &mut paced } else { &mut b2b }.push(ms);
                assert_eq!(
                    r.execution.unwrap().status,
                    ExecutionStatus::Succeeded as i32
                );
            }
        }
        (median(&mut paced), median(&mut b2b))
    }
}

/// Seconds to receive 1 GiB of a launch's output through Start + Follow (default log cap:
/// most of it beyond what the log keeps, so live from the shim).
async fn stream_follow(c: &mut ExecClient<tonic::transport::Channel>) -> f64 {
    let started = c
        .start(RunRequest {
            command: format!("head -c {GIB} /dev/zero"),
            timeout_ms: Some(600_000),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .execution
        .unwrap();
    let t = Instant::now();
    let mut stream = c
        .follow(FollowRequest {
            id: started.id,
            stdout_offset: 0,
            stderr_offset: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let mut got = 0u64;
    while let Some(ev) = stream.message().await.unwrap() {
        match ev.event.unwrap() {
            Event::Chunk(ch) => got += ch.data.len() as u64,
            Event::Exit(e) => {
                assert_eq!(e.status, ExecutionStatus::Succeeded as i32);
                break;
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(got, GIB, "Follow must deliver every byte");
    secs
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    const USAGE: &str = "usage: argos-bench-exec [--bin-dir DIR] [--runs N]\n  contained /bin/true (agent, inspect) beside bubblewrap and fork/exec; 1 GiB through Follow beside a pipe (as root)";
    argos_tests::answer_help(USAGE);
    let mut args = std::env::args().skip(1);
    let mut bin_dir: Option<PathBuf> = None;
    let mut runs = 200usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bin-dir" => bin_dir = args.next().map(PathBuf::from),
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            other => argos_tests::bad_argument(USAGE, other),
        }
    }
    assert!(
        nix::unistd::geteuid().is_root(),
        "execd's containment needs root"
    );
    // Start from a quiet disk: writeback of an earlier run's gigabyte would be measured too.
    nix::unistd::sync();
    let bin_dir = bin_dir.unwrap_or_else(|| {
        std::env::current_exe()
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf()
    });
    // P1 twice: execd's state on the disk the temp dir is on, and on a tmpfs (/dev/shm),
    // which shows what the launch files cost on this disk.
    let shm = tempfile::Builder::new()
        .prefix("argos-bench-")
        .tempdir_in("/dev/shm")
        .ok();
    let (t_paced, t_b2b) = match &shm {
        Some(dir) => {
            let mut e = Execd::start(&bin_dir, dir.path()).await;
            let r = e.p1(runs, "agent").await;
            e.stop();
            (Some(r.0), Some(r.1))
        }
        None => (None, None),
    };
    drop(shm);
    let root = argos_tests::open_tempdir();
    let mut execd = Execd::start(&bin_dir, root.path()).await;
    let (a, a2) = execd.p1(runs, "agent").await;
    let (inspect, _) = execd.p1(runs, "inspect").await;
    let mut bwrap = time_n(runs, || {
        let s = Command::new("bwrap")
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
                "/bin/true",
            ])
            .status()
            .expect("bwrap (Debian package bubblewrap)");
        assert!(s.success());
    });
    let mut bare = time_n(runs, || {
        assert!(Command::new("/bin/true").status().unwrap().success());
    });
    let (b, f) = (median(&mut bwrap), median(&mut bare));
    let c = &mut execd.client;
    // Streaming 1 GiB, three rounds of each (alternating), medians.
    let mut follow_runs = Vec::new();
    let mut pipe_runs = Vec::new();
    for _ in 0..3 {
        follow_runs.push(stream_follow(c).await);
        pipe_runs.push(pipe_seconds(&format!("head -c {GIB} /dev/zero"), GIB));
    }
    let (follow_s, pipe_s) = (median(&mut follow_runs), median(&mut pipe_runs));
    execd.stop();

    let mibs = |secs: f64| GIB as f64 / (1024.0 * 1024.0) / secs;
    println!("Argos execd benchmark ({runs} runs each; medians)");
    println!("P1 contained /bin/true (agent profile, all 7 dimensions enforced)");
    println!(
        "  {:<44} {:>9.2} ms",
        "Argos execd Run over gRPC (warm pool)", a
    );
    println!("  {:<44} {:>9.2} ms", "Argos execd Run, back to back", a2);
    if let (Some(tp), Some(tb)) = (t_paced, t_b2b) {
        println!(
            "  {:<44} {:>9.2} ms",
            "Argos, launch files on tmpfs (warm pool)", tp
        );
        println!(
            "  {:<44} {:>9.2} ms",
            "Argos, launch files on tmpfs, back to back", tb
        );
    }
    println!(
        "  {:<44} {:>9.2} ms",
        "bwrap --unshare-all ... /bin/true", b
    );
    println!("  {:<44} {:>9.2} ms", "bare fork/exec", f);
    println!(
        "  {:<44} {:>9.2} ms",
        "Argos execd Run, inspect profile (warm pool)", inspect
    );
    println!("  {:<44} {:>9.2}x   (goal <= 0.4x)", "Argos / bwrap", a / b);
    println!("  {:<44} {:>9.2}x", "Argos inspect / bwrap", inspect / b);
    println!(
        "  {:<44} {:>9.2}x",
        "Argos inspect / Argos agent",
        inspect / a
    );
    println!("  {:<44} {:>9.2}x", "Argos back to back / bwrap", a2 / b);
    if let Some(tp) = t_paced {
        println!("  {:<44} {:>9.2}x", "Argos, files on tmpfs / bwrap", tp / b);
    }
    println!("  {:<44} {:>9.2}x", "Argos / bare fork/exec", a / f);
    println!("Stream 1 GiB of output (medians of 3)");
    println!(
        "  {:<44} {:>9.0} MiB/s",
        "Argos Start + Follow",
        mibs(follow_s)
    );
    println!("  {:<44} {:>9.0} MiB/s", "raw pipe", mibs(pipe_s));
    println!(
        "  {:<44} {:>9.2}x   (goal >= 0.5x)",
        "Argos / raw pipe",
        pipe_s / follow_s
    );
}
