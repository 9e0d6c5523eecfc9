//! Per-launch cgroups, where the host delegates them: a memory, a pids and a CPU limit for
//! the whole tree (rlimits are per process or per uid), and the cgroup v2 `cgroup.kill`
//! for teardown. Detected, never assumed: cgroup v2 (unified, pure or hybrid) and the v1
//! `memory`, `pids` and `cpu` hierarchies are each used when present and writable.

use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup";

/// The cgroups of one launch.
#[derive(Debug, Default)]
pub struct Cgroups {
    /// Every directory created (removed at the end).
    dirs: Vec<PathBuf>,
    /// The v2 group, for `cgroup.kill`.
    v2: Option<PathBuf>,
    /// What was limited, for the report.
    pub limited: Vec<String>,
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("{}: {e}", path.display()))
}

/// Creates `<base>/argos/<id>`, remembering it for removal.
fn make(
    dirs: &mut Vec<PathBuf>,
    notes: &mut Vec<String>,
    base: &Path,
    id: &str,
) -> Option<PathBuf> {
    let dir = base.join("argos").join(id);
    match std::fs::create_dir_all(&dir) {
        Ok(()) => {
            dirs.push(dir.clone());
            Some(dir)
        }
        Err(e) => {
            notes.push(format!("resources: cgroup {}: {e}", dir.display()));
            None
        }
    }
}

/// The limits asked of a launch's cgroups.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub memory_bytes: Option<u64>,
    pub pids: Option<u64>,
    /// In percent of one CPU (100: one CPU's worth of time, whatever the thread count).
    pub cpu_percent: Option<u64>,
}

impl Limits {
    pub fn any(&self) -> bool {
        self.memory_bytes.is_some() || self.pids.is_some() || self.cpu_percent.is_some()
    }
}

/// The CFS period the CPU limit is expressed in, in microseconds.
const CPU_PERIOD_US: u64 = 100_000;

/// The v2 mount: `/sys/fs/cgroup` itself (pure v2) or `/sys/fs/cgroup/unified` (hybrid).
fn v2_root() -> Option<PathBuf> {
    [PathBuf::from(ROOT), PathBuf::from(ROOT).join("unified")]
        .into_iter()
        .find(|p| p.join("cgroup.procs").exists() && p.join("cgroup.controllers").exists())
}

impl Cgroups {
    /// Creates `argos/<id>` in each usable hierarchy and sets the limits it supports.
    /// Returns notes on whatever could not be done (the launch goes on without it).
    pub fn create(id: &str, limits: Limits) -> (Cgroups, Vec<String>) {
        let mut cg = Cgroups::default();
        let mut notes = Vec::new();
        let mut v2_has = Vec::new();
        let cpu_quota = limits
            .cpu_percent
            .map(|p| (p * CPU_PERIOD_US / 100).max(1000));
        let cpu_shown = |p: u64, v: &str| format!("CPU {p}% of one CPU (cgroup {v})");
        if let Some(root) = v2_root()
            && let Some(dir) = make(&mut cg.dirs, &mut notes, &root, id)
        {
            let controllers =
                std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            for c in ["memory", "pids", "cpu"] {
                if controllers.split_whitespace().any(|x| x == c) {
                    let _ = write(&root.join("cgroup.subtree_control"), &format!("+{c}"));
                    let _ = write(
                        &root.join("argos").join("cgroup.subtree_control"),
                        &format!("+{c}"),
                    );
                }
            }
            // Only what the kernel says is enabled for our groups counts (enabling can
            // fail: a controller another process holds in the root group, say).
            let enabled =
                std::fs::read_to_string(root.join("argos").join("cgroup.subtree_control"))
                    .unwrap_or_default();
            for c in ["memory", "pids", "cpu"] {
                if enabled.split_whitespace().any(|x| x == c) {
                    v2_has.push(c);
                }
            }
            if let (Some(m), true) = (limits.memory_bytes, v2_has.contains(&"memory")) {
                match write(&dir.join("memory.max"), &m.to_string()) {
                    Ok(()) => cg
                        .limited
                        .push(format!("memory {} MiB (cgroup v2)", m / (1024 * 1024))),
                    Err(e) => notes.push(format!("resources: {e}")),
                }
            }
            if let (Some(p), true) = (limits.pids, v2_has.contains(&"pids")) {
                match write(&dir.join("pids.max"), &p.to_string()) {
                    Ok(()) => cg.limited.push(format!("{p} processes (cgroup v2)")),
                    Err(e) => notes.push(format!("resources: {e}")),
                }
            }
            if let (Some(q), Some(p), true) =
                (cpu_quota, limits.cpu_percent, v2_has.contains(&"cpu"))
            {
                match write(&dir.join("cpu.max"), &format!("{q} {CPU_PERIOD_US}")) {
                    Ok(()) => cg.limited.push(cpu_shown(p, "v2")),
                    Err(e) => notes.push(format!("resources: {e}")),
                }
            }
            cg.v2 = Some(dir);
        }
        // v1 hierarchies for what v2 does not control here.
        let v1 = |name: &str| Path::new(ROOT).join(name);
        if let Some(m) = limits.memory_bytes
            && !v2_has.contains(&"memory")
            && v1("memory").join("cgroup.procs").exists()
            && let Some(dir) = make(&mut cg.dirs, &mut notes, &v1("memory"), id)
        {
            match write(&dir.join("memory.limit_in_bytes"), &m.to_string()) {
                Ok(()) => cg
                    .limited
                    .push(format!("memory {} MiB (cgroup v1)", m / (1024 * 1024))),
                Err(e) => notes.push(format!("resources: {e}")),
            }
        }
        if let Some(p) = limits.pids
            && !v2_has.contains(&"pids")
            && v1("pids").join("cgroup.procs").exists()
            && let Some(dir) = make(&mut cg.dirs, &mut notes, &v1("pids"), id)
        {
            match write(&dir.join("pids.max"), &p.to_string()) {
                Ok(()) => cg.limited.push(format!("{p} processes (cgroup v1)")),
                Err(e) => notes.push(format!("resources: {e}")),
            }
        }
        if let (Some(q), Some(p)) = (cpu_quota, limits.cpu_percent)
            && !v2_has.contains(&"cpu")
            && v1("cpu").join("cgroup.procs").exists()
            && let Some(dir) = make(&mut cg.dirs, &mut notes, &v1("cpu"), id)
        {
            let set = write(&dir.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())
                .and_then(|()| write(&dir.join("cpu.cfs_quota_us"), &q.to_string()));
            match set {
                Ok(()) => cg.limited.push(cpu_shown(p, "v1")),
                Err(e) => notes.push(format!("resources: {e}")),
            }
        }
        (cg, notes)
    }

    /// Moves a process (and so its future children) into every group.
    pub fn add(&self, pid: i32) -> Vec<String> {
        self.dirs
            .iter()
            .filter_map(|d| write(&d.join("cgroup.procs"), &pid.to_string()).err())
            .map(|e| format!("resources: {e}"))
            .collect()
    }

    /// Whether any limit is in place (the workload then checks it is inside the groups).
    pub fn limits_anything(&self) -> bool {
        !self.limited.is_empty()
    }

    /// Whether the launch has a group of its own (to know its whole tree by).
    pub fn tracks(&self) -> bool {
        !self.dirs.is_empty()
    }

    /// Kills everything in the v2 group (kernel ≥ 5.14), whatever its process tree.
    pub fn kill(&self) -> bool {
        self.v2.as_ref().is_some_and(|d| {
            d.join("cgroup.kill").exists() && write(&d.join("cgroup.kill"), "1").is_ok()
        })
    }

    /// Pids still in any group (empty once the tree is gone).
    pub fn members(&self) -> Vec<i32> {
        let mut out: Vec<i32> = self
            .dirs
            .iter()
            .filter_map(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|s| {
                s.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Removes the groups (they must be empty); retries briefly while the last members exit.
    pub fn remove(&self) {
        for d in &self.dirs {
            for _ in 0..50 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }

    /// Removes the groups of shims that are gone: a shim removes its own at its end, one
    /// killed (or a host restart of execd's shims) leaves them. `argos/shim-<pid>-<start>`
    /// in every hierarchy, whose shim no longer runs; `rmdir` refuses one that still has
    /// members. Returns how many went.
    pub fn sweep() -> usize {
        let mut roots: Vec<PathBuf> = v2_root().into_iter().collect();
        roots.extend(["memory", "pids", "cpu"].map(|h| Path::new(ROOT).join(h)));
        let mut removed = 0;
        for root in roots {
            let Ok(entries) = std::fs::read_dir(root.join("argos")) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some((pid, start)) = shim_of(&name) else {
                    continue;
                };
                let alive = crate::sys::proc::identity(pid).is_ok_and(|i| i.start_time == start);
                if !alive && std::fs::remove_dir(e.path()).is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }
}

/// The shim a group is named for (`shim-<pid>-<start time>`).
fn shim_of(name: &str) -> Option<(i32, u64)> {
    let (pid, start) = name.strip_prefix("shim-")?.split_once('-')?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group whose shim is gone is removed; one whose shim runs, or that is not a
    /// shim's, stays.
    #[test]
    fn the_groups_of_shims_that_are_gone_are_swept() {
        let root = v2_root().expect("cgroup v2 (the tests run where execd would)");
        let parent = root.join("argos");
        std::fs::create_dir_all(&parent).expect("a delegated cgroup tree (root)");
        let me = std::process::id() as i32;
        let start = crate::sys::proc::identity(me).unwrap().start_time;
        let gone = parent.join(format!("shim-{}-{}", i32::MAX - 7, 1));
        let alive = parent.join(format!("shim-{me}-{start}"));
        let other = parent.join("not-a-shim-test");
        for d in [&gone, &alive, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        let swept = Cgroups::sweep();
        let (gone_left, alive_left, other_left) = (gone.exists(), alive.exists(), other.exists());
        for d in [&gone, &alive, &other] {
            let _ = std::fs::remove_dir(d);
        }
        assert!(swept >= 1);
        assert!(!gone_left, "the group of a shim that is gone was left");
        assert!(alive_left, "the group of a running shim was removed");
        assert!(other_left, "a group that is no shim's was removed");
    }
}
