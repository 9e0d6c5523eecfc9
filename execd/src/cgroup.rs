//! Per-launch cgroups, where the host delegates them: a memory and a pids limit for the
//! whole tree (rlimits are per process or per uid), and the cgroup v2 `cgroup.kill` for
//! teardown. Detected, never assumed: cgroup v2 (unified, pure or hybrid) and the v1
//! `memory` and `pids` hierarchies are each used when present and writable.

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

/// The v2 mount: `/sys/fs/cgroup` itself (pure v2) or `/sys/fs/cgroup/unified` (hybrid).
fn v2_root() -> Option<PathBuf> {
    [PathBuf::from(ROOT), PathBuf::from(ROOT).join("unified")]
        .into_iter()
        .find(|p| p.join("cgroup.procs").exists() && p.join("cgroup.controllers").exists())
}

impl Cgroups {
    /// Creates `argos/<id>` in each usable hierarchy and sets the limits it supports.
    /// Returns notes on whatever could not be done (the launch goes on without it).
    pub fn create(
        id: &str,
        memory_max: Option<u64>,
        pids_max: Option<u64>,
    ) -> (Cgroups, Vec<String>) {
        let mut cg = Cgroups::default();
        let mut notes = Vec::new();
        let mut v2_has = Vec::new();
        if let Some(root) = v2_root()
            && let Some(dir) = make(&mut cg.dirs, &mut notes, &root, id)
        {
            let controllers =
                std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            for c in ["memory", "pids"] {
                if controllers.split_whitespace().any(|x| x == c) {
                    let _ = write(&root.join("cgroup.subtree_control"), &format!("+{c}"));
                    let _ = write(
                        &root.join("argos").join("cgroup.subtree_control"),
                        &format!("+{c}"),
                    );
                    v2_has.push(c);
                }
            }
            if let (Some(m), true) = (memory_max, v2_has.contains(&"memory")) {
                match write(&dir.join("memory.max"), &m.to_string()) {
                    Ok(()) => cg
                        .limited
                        .push(format!("memory {} MiB (cgroup v2)", m / (1024 * 1024))),
                    Err(e) => notes.push(format!("resources: {e}")),
                }
            }
            if let (Some(p), true) = (pids_max, v2_has.contains(&"pids")) {
                match write(&dir.join("pids.max"), &p.to_string()) {
                    Ok(()) => cg.limited.push(format!("{p} processes (cgroup v2)")),
                    Err(e) => notes.push(format!("resources: {e}")),
                }
            }
            cg.v2 = Some(dir);
        }
        // v1 hierarchies for what v2 does not control here.
        if let Some(m) = memory_max
            && !v2_has.contains(&"memory")
            && Path::new(ROOT).join("memory/cgroup.procs").exists()
            && let Some(dir) = make(
                &mut cg.dirs,
                &mut notes,
                &Path::new(ROOT).join("memory"),
                id,
            )
        {
            match write(&dir.join("memory.limit_in_bytes"), &m.to_string()) {
                Ok(()) => cg
                    .limited
                    .push(format!("memory {} MiB (cgroup v1)", m / (1024 * 1024))),
                Err(e) => notes.push(format!("resources: {e}")),
            }
        }
        if let Some(p) = pids_max
            && !v2_has.contains(&"pids")
            && Path::new(ROOT).join("pids/cgroup.procs").exists()
            && let Some(dir) = make(&mut cg.dirs, &mut notes, &Path::new(ROOT).join("pids"), id)
        {
            match write(&dir.join("pids.max"), &p.to_string()) {
                Ok(()) => cg.limited.push(format!("{p} processes (cgroup v1)")),
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
}
