//! What execd hands a shim (the launch spec) and what a shim hands back (the containment
//! report and the result). Both are JSON files in the launch dir: the spec doubles as the
//! launch's receipt, and the result survives an execd restart.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A containment dimension a profile can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    Filesystem,
    ProcessTree,
    WallClock,
    Network,
    Syscalls,
    Privileges,
    Resources,
}

impl Dimension {
    pub const ALL: [Dimension; 7] = [
        Dimension::Filesystem,
        Dimension::ProcessTree,
        Dimension::WallClock,
        Dimension::Network,
        Dimension::Syscalls,
        Dimension::Privileges,
        Dimension::Resources,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Filesystem => "filesystem",
            Dimension::ProcessTree => "process_tree",
            Dimension::WallClock => "wall_clock",
            Dimension::Network => "network",
            Dimension::Syscalls => "syscalls",
            Dimension::Privileges => "privileges",
            Dimension::Resources => "resources",
        }
    }

    pub fn parse(s: &str) -> Option<Dimension> {
        Dimension::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

/// How much a profile needs a dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Need {
    /// The launch fails (`containment_unavailable`) before any user code runs without it.
    Required,
    /// Applied when the host can; reported `unavailable` when it cannot.
    Optional,
    /// Not applied; reported `not_requested`.
    Off,
}

/// What a launch got, per dimension. Nothing is claimed that was not read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DimState {
    Enforced,
    Unavailable,
    NotRequested,
}

impl DimState {
    pub fn as_str(self) -> &'static str {
        match self {
            DimState::Enforced => "enforced",
            DimState::Unavailable => "unavailable",
            DimState::NotRequested => "not_requested",
        }
    }
}

/// One line of a containment report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DimReport {
    pub dimension: Dimension,
    pub state: DimState,
    /// What was applied or why not, in a few words.
    pub detail: String,
}

/// Network view of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// Own network namespace with no interface up.
    None,
    /// Own network namespace with only `lo` up.
    Loopback,
    /// The host's network.
    Host,
    /// The host's network namespace, to look at (interfaces, routes, sockets through
    /// netlink and UNIX sockets), with no way to talk over it: seccomp refuses `socket()`
    /// of `AF_INET`, `AF_INET6` and `AF_PACKET`.
    HostLocal,
}

/// Which UNIX domain sockets a workload may make.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnixSockets {
    /// `socket(AF_UNIX)` and `socketpair` alike: what file modes, mounts and landlock's
    /// scope for abstract sockets let through.
    #[default]
    Any,
    /// Pairs only: `socketpair` works, `socket(AF_UNIX)` is refused by seccomp
    /// (`EAFNOSUPPORT`), so nothing in the launch can connect or send to any socket
    /// outside it, pathname or abstract.
    PairsOnly,
}

/// Where a workload may execute a program from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecSources {
    /// Any file execve or execveat reaches, a memfd's included.
    #[default]
    Any,
    /// Files reached by path only: `execveat` (so `fexecve`) and `memfd_create` are
    /// refused by seccomp (EPERM), so nothing is executed from a descriptor or from a file
    /// made in memory, which landlock's execute right (a path rule) cannot see.
    FilesOnly,
}

/// What a workload may do with the System V IPC objects and POSIX message queues of its
/// IPC namespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ipc {
    /// Whatever their modes allow.
    #[default]
    Any,
    /// Look only: no message sent or received, no semaphore operation, no shared memory
    /// attached but read-only, nothing created, removed or changed (seccomp, EPERM);
    /// `ipcs`, `/proc/sysvipc` and the `*_STAT`/`*_INFO`/`GET*` commands stay.
    ReadOnly,
}

/// Whether a workload may take file locks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileLocks {
    /// `flock`, `fcntl` record and OFD locks, leases.
    #[default]
    Any,
    /// None: `flock` and `fcntl`'s F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW and
    /// F_SETLEASE answer ENOLCK (as on a file system without locks); F_GETLK stays.
    None,
}

/// Resource limits (rlimits), each a hard and soft limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimits {
    pub nofile: u64,
    pub nproc: u64,
    pub address_space_bytes: u64,
    pub file_size_bytes: u64,
    pub cpu_seconds: u64,
}

/// The concrete containment a shim must apply, resolved by execd from a profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub profile: String,
    pub filesystem: Need,
    /// Paths (and everything beneath) the workload may write.
    pub writable: Vec<PathBuf>,
    /// Paths (and everything beneath) the workload may neither read nor write; `*` in a
    /// component matches one level. Found when the launch is taken.
    pub denied: Vec<PathBuf>,
    /// Where the profile masks credential stores: the homes to look in (`*` in a component
    /// matches one level), besides those `/etc/passwd` gives people's accounts; each store
    /// `credentials::STORES` lists that a home holds when the launch is taken is denied
    /// too. Empty: none.
    #[serde(default)]
    pub credential_homes: Vec<PathBuf>,
    /// Directories the launch sees as mirrors taken when it is taken, without UNIX
    /// sockets but `sockets_reachable` (`*` in a component matches one level). Empty:
    /// none.
    #[serde(default)]
    pub socket_dirs: Vec<PathBuf>,
    #[serde(default)]
    pub sockets_reachable: Vec<PathBuf>,
    pub process_tree: Need,
    pub wall_clock: Need,
    pub network: Need,
    pub network_mode: NetworkMode,
    pub syscalls: Need,
    /// Which UNIX sockets the seccomp filters leave the workload.
    #[serde(default)]
    pub unix_sockets: UnixSockets,
    /// Where programs may be executed from (seccomp).
    #[serde(default)]
    pub exec_sources: ExecSources,
    /// What may be done with the IPC namespace's objects (seccomp).
    #[serde(default)]
    pub ipc: Ipc,
    /// Whether file locks may be taken (seccomp).
    #[serde(default)]
    pub file_locks: FileLocks,
    pub privileges: Need,
    /// `(uid, gid)` to run as; `None` keeps root (with every capability dropped).
    pub run_as: Option<(u32, u32)>,
    pub resources: Need,
    pub rlimits: Rlimits,
    /// Whole-tree limits through a cgroup, where the host delegates one.
    pub cgroup_memory_bytes: Option<u64>,
    pub cgroup_pids: Option<u64>,
    /// CPU time for the whole tree in percent of one CPU, through the cgroup.
    #[serde(default)]
    pub cgroup_cpu_percent: Option<u64>,
    /// The workspace as a bounded tmpfs in the launch's own mounts.
    #[serde(default)]
    pub workspace_limit: Option<WorkspaceLimit>,
    /// Every mount of the host remounted read-only in the launch's mount namespace (the
    /// private /tmp and the workspace are mounted after, writable).
    #[serde(default)]
    pub read_only_mounts: bool,
    /// Only the launch's program and its `executables` (and their interpreters) may be
    /// executed (landlock's execute right); every other file is read-only, not runnable.
    #[serde(default)]
    pub execute_listed_only: bool,
    /// Directories of programs whose files may only be read where they may be executed
    /// (resolved through symlinks): a dynamic loader run as a program maps any file it
    /// can read, which landlock's execute right does not cover. Their entries may still
    /// be listed.
    #[serde(default)]
    pub program_dirs: Vec<PathBuf>,
    /// Where shared libraries and interpreters' compiled modules live (`*` within one
    /// level): with `program_dirs` and each listed file, the only places left executable
    /// (every other mount `noexec`); the programs in them are masked.
    #[serde(default)]
    pub library_dirs: Vec<PathBuf>,
    /// When set, `/dev`'s files that may be opened besides the plain devices
    /// (`contain::DEVICES`); its entries may all be listed.
    #[serde(default)]
    pub devices_readable: Option<Vec<PathBuf>>,
    /// Keep the host's IPC and UTS namespaces (its host name, its System V IPC view).
    #[serde(default)]
    pub host_ipc_uts: bool,
    /// Supplementary groups of the run-as identity (log readers: `adm`,
    /// `systemd-journal`), resolved to gids where they exist on this host.
    #[serde(default)]
    pub groups: Vec<u32>,
    /// Dimensions to treat as unavailable on this host (operator config or test hook):
    /// the shim skips the mechanism and reports what that leaves.
    pub disabled: Vec<Dimension>,
}

/// A workspace bounded in size and inode count: a tmpfs mounted at `path` in the launch's
/// own mount namespace (its files live as long as the launch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceLimit {
    pub path: PathBuf,
    pub bytes: u64,
    pub inodes: u64,
}

impl NetworkMode {
    /// Whether the launch gets a network namespace of its own.
    pub fn own_namespace(self) -> bool {
        matches!(self, NetworkMode::None | NetworkMode::Loopback)
    }
}

impl Plan {
    pub fn need(&self, d: Dimension) -> Need {
        match d {
            Dimension::Filesystem => self.filesystem,
            Dimension::ProcessTree => self.process_tree,
            Dimension::WallClock => self.wall_clock,
            Dimension::Network => {
                if self.network_mode == NetworkMode::Host {
                    Need::Off
                } else {
                    self.network
                }
            }
            Dimension::Syscalls => self.syscalls,
            Dimension::Privileges => self.privileges,
            Dimension::Resources => self.resources,
        }
    }

    /// Whether the shim should try to apply a dimension.
    pub fn wants(&self, d: Dimension) -> bool {
        self.need(d) != Need::Off && !self.disabled.contains(&d)
    }
}

/// Everything a shim needs to run one launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    pub id: String,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// The launch's writable workspace (also in `plan.writable`).
    pub workspace: PathBuf,
    /// 0 means no wall-clock limit.
    pub timeout_ms: u64,
    /// After SIGTERM (timeout or kill), how long before SIGKILL.
    pub grace_ms: u64,
    /// Whether `stdin` in the launch dir feeds the workload (else /dev/null).
    pub stdin: bool,
    /// The workload's stdin is a pipe the shim holds open: one writer feeds it through
    /// the follow socket (exclusive with `stdin` and `tty`).
    #[serde(default)]
    pub open_stdin: bool,
    /// The name the launch uid has inside the launch (its requester's, when it makes a
    /// user name): `whoami` and a shell prompt say it.
    #[serde(default)]
    pub user: String,
    /// Programs the workload may start besides its own (names found on its PATH, or
    /// paths), where the profile lists what may be executed.
    #[serde(default)]
    pub executables: Vec<String>,
    pub head_bytes: u64,
    pub tail_bytes: u64,
    /// Cap of each stream's full log in the launch dir.
    pub log_cap_bytes: u64,
    pub plan: Plan,
    /// The shim that runs the launch and the root of its tree (PID-namespace init),
    /// recorded by execd when it hands the launch to that shim: the receipt that lets a
    /// restarted execd re-adopt, and a kill verify, without trusting a bare pid.
    #[serde(default)]
    pub shim: Option<Identity>,
    #[serde(default)]
    pub init: Option<Identity>,
    /// Run on a terminal the shim holds (a web terminal) instead of pipes.
    #[serde(default)]
    pub tty: Option<Tty>,
    /// Hung up once no follower was connected for this long, in ms (0: never); a
    /// terminal's `detach_ttl_ms` stands for it.
    #[serde(default)]
    pub end_unfollowed_ms: u64,
}

/// A launch's terminal: its first size and type, and how much recent output the shim keeps
/// in memory for a client that attaches again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tty {
    pub rows: u16,
    pub cols: u16,
    pub term: String,
    pub scrollback_bytes: u64,
    /// Torn down after this long with no client attached (0: never).
    #[serde(default)]
    pub detach_ttl_ms: u64,
}

/// How a launch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchStatus {
    Running,
    Succeeded,
    Failed,
    TimedOut,
    Killed,
    ContainmentUnavailable,
    TeardownFailed,
    Lost,
    /// Waits for an operator's approval; nothing has run.
    PendingApproval,
    /// Its approval was denied, revoked or expired; nothing ran.
    Rejected,
}

impl LaunchStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LaunchStatus::Running => "running",
            LaunchStatus::Succeeded => "succeeded",
            LaunchStatus::Failed => "failed",
            LaunchStatus::TimedOut => "timed_out",
            LaunchStatus::Killed => "killed",
            LaunchStatus::ContainmentUnavailable => "containment_unavailable",
            LaunchStatus::TeardownFailed => "teardown_failed",
            LaunchStatus::Lost => "lost",
            LaunchStatus::PendingApproval => "pending_approval",
            LaunchStatus::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Option<LaunchStatus> {
        [
            LaunchStatus::Running,
            LaunchStatus::Succeeded,
            LaunchStatus::Failed,
            LaunchStatus::TimedOut,
            LaunchStatus::Killed,
            LaunchStatus::ContainmentUnavailable,
            LaunchStatus::TeardownFailed,
            LaunchStatus::Lost,
            LaunchStatus::PendingApproval,
            LaunchStatus::Rejected,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }

    pub fn is_final(self) -> bool {
        !matches!(self, LaunchStatus::Running | LaunchStatus::PendingApproval)
    }
}

/// Byte counts of one output stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamTotals {
    /// Bytes the workload wrote.
    pub total: u64,
    /// Bytes kept in the stream's log file (`total` capped at `log_cap_bytes`).
    pub logged: u64,
}

/// A process as the kernel names it: pid, start time (clock ticks since boot, field 22 of
/// `/proc/<pid>/stat`) and boot id. Survives pid reuse: a new process with the same pid
/// has another start time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub pid: i32,
    pub start_time: u64,
    pub boot_id: String,
}

/// How the shim's teardown went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Teardown {
    /// Every process of the launch was seen to die.
    pub complete: bool,
    /// Processes seen alive after teardown (pid and command), if any.
    pub survivors: Vec<String>,
    /// What the command left running when it ended (a daemon it started with `nohup …
    /// &`), which teardown then ended: `comm (pid N)`.
    #[serde(default)]
    pub ended: Vec<String>,
}

pub use argos_store::now_ms;

/// What a shim writes when the launch is over (atomically, before the exit marker).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchResult {
    pub status: LaunchStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// When the workload started, as the shim saw it; `None` when no shim said (a launch
    /// retired without its result): the ledger then keeps the start it recorded.
    pub started_at_ms: Option<i64>,
    pub ended_at_ms: i64,
    pub report: Vec<DimReport>,
    pub stdout: StreamTotals,
    pub stderr: StreamTotals,
    pub teardown: Teardown,
    /// Why the launch did not run, or why containment was refused.
    pub error: Option<String>,
}

/// Writes a launch-dir file so that readers see either nothing or all of it (write, then
/// rename). Not fsynced: it survives any process dying, which is what restart-proof
/// means here (see ARCHITECTURE.md, "Launches").
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// [`write_atomic`] of a value as pretty JSON.
pub fn write_json_atomic<T: Serialize>(path: &std::path::Path, v: &T) -> std::io::Result<()> {
    write_atomic(
        path,
        &serde_json::to_vec_pretty(v).map_err(std::io::Error::other)?,
    )
}

impl LaunchResult {
    /// The result of a launch whose shim is gone without leaving one, ended now. Its start
    /// is not known here: the ledger keeps the one it recorded.
    pub fn lost(why: impl Into<String>) -> LaunchResult {
        LaunchResult {
            status: LaunchStatus::Lost,
            exit_code: None,
            signal: None,
            started_at_ms: None,
            ended_at_ms: now_ms(),
            report: Vec::new(),
            stdout: StreamTotals::default(),
            stderr: StreamTotals::default(),
            teardown: Teardown {
                complete: false,
                survivors: Vec::new(),
                ended: Vec::new(),
            },
            error: Some(why.into()),
        }
    }
}

/// File names inside a launch dir.
pub mod files {
    pub const SPEC: &str = "spec.json";
    pub const STDIN: &str = "stdin";
    pub const STDOUT_LOG: &str = "stdout.log";
    pub const STDERR_LOG: &str = "stderr.log";
    pub const STDOUT_TAIL: &str = "stdout.tail";
    pub const STDERR_TAIL: &str = "stderr.tail";
    pub const RESULT: &str = "result.json";
    /// Written after the result: the launch is over and everything is on disk.
    pub const EXIT: &str = "exit";
    /// Written by execd before it signals a launch, so the shim reports `killed`.
    pub const KILL_REQUESTED: &str = "kill-requested";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The config validates `exec.disabled_dimensions` against its own list (common cannot
    /// depend on execd): the two must name the same dimensions.
    #[test]
    fn config_knows_every_dimension() {
        let ours: Vec<&str> = Dimension::ALL.iter().map(|d| d.as_str()).collect();
        assert_eq!(ours, argos_common::config::DIMENSIONS);
    }
}
