//! Process identity from /proc: `(pid, start time, boot id)`, and what a probe makes of a
//! recorded identity now.

use std::io;

use super::{SysError, SysResult};
use crate::spec::Identity;

/// The kernel's boot id: start times are only comparable within one boot.
pub fn boot_id() -> SysResult<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .map_err(|e| SysError::new("reading boot id", e))
}

/// Field 22 of `/proc/<pid>/stat`: start time in clock ticks since boot.
pub fn start_time(pid: i32) -> io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_start_time(&stat).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unparsable /proc/{pid}/stat"),
        )
    })
}

/// The comm field may hold spaces and parentheses: fields are counted after the last ')'.
fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ')': field 3 (state) is the first; start time is field 22.
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// The identity of a live process.
pub fn identity(pid: i32) -> SysResult<Identity> {
    Ok(Identity {
        pid,
        start_time: start_time(pid).map_err(|e| SysError::on("reading start time of", pid, e))?,
        boot_id: boot_id()?,
    })
}

/// What a recorded identity names now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The same process is alive: it may be signalled.
    Owned,
    /// It is dead (no such pid, or a zombie, or it belonged to another boot).
    Gone,
    /// The pid now belongs to another process: never signal it.
    Foreign,
    /// /proc could not tell: never signal it.
    Unverifiable,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Owned => "owned",
            Verdict::Gone => "gone",
            Verdict::Foreign => "foreign",
            Verdict::Unverifiable => "unverifiable",
        }
    }
}

/// Compares a recorded identity with what /proc says now.
pub fn probe(id: &Identity) -> Verdict {
    match boot_id() {
        Ok(boot) if boot != id.boot_id => return Verdict::Gone,
        Ok(_) => {}
        Err(_) => return Verdict::Unverifiable,
    }
    let stat = match std::fs::read_to_string(format!("/proc/{}/stat", id.pid)) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Verdict::Gone,
        Err(_) => return Verdict::Unverifiable,
    };
    let Some(start) = parse_start_time(&stat) else {
        return Verdict::Unverifiable;
    };
    if start != id.start_time {
        return Verdict::Foreign;
    }
    // A zombie is dead: it only waits to be reaped.
    let state = stat[stat.rfind(')').map_or(0, |i| i + 1)..]
        .split_whitespace()
        .next();
    if matches!(state, Some("Z") | Some("X")) {
        return Verdict::Gone;
    }
    Verdict::Owned
}

/// A pidfd for a process whose identity verifies: probe, open, probe again. The pidfd
/// pins the process, so after the second probe it names exactly the recorded one, and a
/// signal sent through it can never reach a process that reused the pid.
pub fn open_owned(id: &Identity) -> Result<std::os::fd::OwnedFd, Verdict> {
    match probe(id) {
        Verdict::Owned => {}
        other => return Err(other),
    }
    let fd = super::raw::pidfd_open(id.pid).map_err(|_| Verdict::Gone)?;
    match probe(id) {
        Verdict::Owned => Ok(fd),
        other => Err(other),
    }
}

/// Sends a signal to a recorded process only if it verifies as OWNED.
pub fn signal_owned(id: &Identity, signal: i32) -> Result<(), Verdict> {
    let fd = open_owned(id)?;
    super::raw::pidfd_send_signal(&fd, signal).map_err(|_| Verdict::Gone)
}

/// Fields of `/proc/self/status` that prove what a process holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SelfStatus {
    pub cap_eff: u64,
    pub cap_prm: u64,
    pub cap_inh: u64,
    pub cap_bnd: u64,
    pub cap_amb: u64,
    pub no_new_privs: bool,
    /// 0 off, 1 strict, 2 filter.
    pub seccomp: u8,
    pub uid: u32,
    pub gid: u32,
}

/// Reads the calling process's privileges back from the kernel.
pub fn self_status() -> SysResult<SelfStatus> {
    let text = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| SysError::new("reading /proc/self/status", e))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or("")
    };
    let hex = |name: &str| u64::from_str_radix(field(name), 16).unwrap_or(u64::MAX);
    let first = |name: &str| {
        field(name)
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(u32::MAX)
    };
    Ok(SelfStatus {
        cap_eff: hex("CapEff:"),
        cap_prm: hex("CapPrm:"),
        cap_inh: hex("CapInh:"),
        cap_bnd: hex("CapBnd:"),
        cap_amb: hex("CapAmb:"),
        no_new_privs: field("NoNewPrivs:") == "1",
        seccomp: field("Seccomp:").parse().unwrap_or(0),
        uid: first("Uid:"),
        gid: first("Gid:"),
    })
}

/// The namespace a process is in, e.g. `pid:[4026531836]`.
pub fn namespace(pid: &str, kind: &str) -> SysResult<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/{kind}"))
        .map(|p| p.display().to_string())
        .map_err(|e| SysError::on("reading namespace", format!("{pid}/{kind}"), e))
}

/// Children of a process (all its threads), from `/proc/<pid>/task/*/children`.
pub fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
        }
    }
    out
}

/// Every descendant of `pid`, breadth first, as `(pid, comm)` (at most `max`): read through
/// each task's `children`, so it works in the PID namespace `/proc` was mounted for.
pub fn descendants(pid: i32, max: usize) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    let mut queue = std::collections::VecDeque::from(children(pid));
    while let Some(p) = queue.pop_front() {
        if out.len() >= max {
            break;
        }
        let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
        out.push((p, comm.trim().to_string()));
        queue.extend(children(p));
    }
    out
}

/// A short description of a process for survivor lists: `pid (comm)`.
pub fn describe(pid: i32) -> String {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    format!("{pid} ({})", comm.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_survives_odd_comm() {
        let stat =
            "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_start_time(stat), Some(987654));
    }

    #[test]
    fn own_identity_is_owned_and_a_changed_start_is_foreign() {
        let me = identity(std::process::id() as i32).unwrap();
        assert_eq!(probe(&me), Verdict::Owned);
        let mut other = me.clone();
        other.start_time += 1;
        assert_eq!(probe(&other), Verdict::Foreign);
        let mut old_boot = me.clone();
        old_boot.boot_id = "00000000-0000-0000-0000-000000000000".into();
        assert_eq!(probe(&old_boot), Verdict::Gone);
        let gone = Identity {
            pid: i32::MAX,
            ..me
        };
        assert_eq!(probe(&gone), Verdict::Gone);
    }
}
