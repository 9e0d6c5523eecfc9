//! Small helpers the benchmarks and tests share: medians, resident and proportional size,
//! a process's children, and reading a command's output from a raw pipe (the streaming anchor).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Instant;

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Resident set size of a process in KiB (0 if it is gone).
pub fn rss_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Proportional set size of a process in KiB (`Pss` of `/proc/<pid>/smaps_rollup`: its
/// private pages and its share of those it shares; 0 if it is gone).
pub fn pss_kib(pid: i32) -> u64 {
    rollup_kib(pid, "Pss:")
}

/// The anonymous part of [`pss_kib`] (`Pss_Anon`: heaps and stacks, not the program's
/// own pages read from its file).
pub fn pss_anon_kib(pid: i32) -> u64 {
    rollup_kib(pid, "Pss_Anon:")
}

fn rollup_kib(pid: i32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The pids of a process's children, over all its threads.
pub fn children(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
                .flat_map(|c| {
                    c.split_whitespace()
                        .filter_map(|p| p.parse().ok())
                        .collect::<Vec<i32>>()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Seconds to read everything `sh -c cmd` prints through a raw pipe; checks it is `bytes`.
pub fn pipe_seconds(cmd: &str, bytes: u64) -> f64 {
    let t = Instant::now();
    let mut child = Command::new("sh")
        .args(["-c", cmd])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut raw = 0u64;
    loop {
        let n = pipe.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        raw += n as u64;
    }
    child.wait().unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(raw, bytes);
    secs
}
