//! Containment profiles, loaded from `profiles.toml` (compiled in): policy as data, each
//! rule with its reason. A profile plus a request resolves to a [`Plan`] for the shim.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use argos_common::peer::{PeerRole, RoleSet};

use crate::spec::{
    Dimension, ExecSources, FileLocks, Ipc, Need, NetworkMode, Plan, Rlimits, UnixSockets,
    WorkspaceLimit,
};

/// The profiles file, compiled into execd.
pub const PROFILES_TOML: &str = include_str!("../profiles.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsRule {
    pub need: Need,
    pub reason: String,
    /// Paths hidden from the launch; `*` in a name matches within one directory level
    /// (`/etc/ssh/ssh_host_*_key`), expanded when the launch is taken.
    pub denied: Vec<String>,
    /// Hide every credential store `credentials::STORES` lists in every home (root's,
    /// each under `/home`, those `/etc/passwd` gives people's accounts, and
    /// `exec.extra_homes`), as the homes hold them when the launch is taken.
    #[serde(default)]
    pub mask_credentials: bool,
    /// Remount every host mount read-only in the launch's mount namespace.
    #[serde(default)]
    pub read_only_mounts: bool,
    /// Where the host's services and users keep UNIX sockets (`/run`, `/var/tmp`,
    /// `/dev/shm`): each is a mirror taken when the launch is taken (`shim/mirror.rs`),
    /// which holds no socket but those `sockets_reachable` names. A read-only mount does not stop `connect()`
    /// and a socket's file mode is the only other guard, so a socket a profile with the
    /// host's view could reach is one of these, named with its reason.
    #[serde(default)]
    pub socket_dirs: Vec<String>,
    /// The sockets under `socket_dirs` left reachable (`*` matches within one level).
    #[serde(default)]
    pub sockets_reachable: Vec<String>,
    /// Landlock's execute right only for the programs a launch names (its program and
    /// the launch's `executables`, with their interpreters), not for every readable file.
    #[serde(default)]
    pub execute_listed_only: bool,
    /// With `execute_listed_only`: directories of programs whose files are readable only
    /// where they are executable (listed), so a dynamic loader run as a program (which
    /// maps what it can read, unseen by landlock's execute right) finds none of the rest.
    /// Their entries may still be listed.
    #[serde(default)]
    pub program_dirs: Vec<String>,
    /// With `execute_listed_only`: the directories of shared libraries and of the
    /// interpreters' compiled modules (`*` matches within one level). With the programs'
    /// directories and each listed file, they are the only places a file can be run or
    /// mapped executable: every other mount is remounted `noexec`, so a loader run as a
    /// program maps no ELF program elsewhere. A program in them (a file with an execute
    /// bit not named as a library, `*.so` or `*.so.N`) is masked.
    #[serde(default)]
    pub library_dirs: Vec<String>,
    /// When set, `/dev`'s entries may be listed but only these of its files (trees) be
    /// opened, with the plain devices every program expects (`contain::DEVICES`):
    /// opening a device may act on it (a watchdog arms, a terminal's reader takes its
    /// keystrokes), and the name a reader opens may come from a pattern or from data
    /// that no judge of the command sees.
    #[serde(default)]
    pub devices_readable: Option<Vec<String>>,
}

/// The seccomp filters, and what they leave of the socket families.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyscallRule {
    pub need: Need,
    pub reason: String,
    /// `"pairs_only"`: no `socket(AF_UNIX)`, only `socketpair` (a pathname UNIX socket is
    /// in no network namespace: file modes alone would guard the host's). Default `"any"`.
    #[serde(default)]
    pub unix_sockets: UnixSockets,
    /// `"files_only"`: no `execveat` (so no `fexecve`) and no `memfd_create`, so a
    /// program runs only from a file reached by path, which landlock judges. Default
    /// `"any"`.
    #[serde(default)]
    pub exec_sources: ExecSources,
    /// `"read_only"`: the IPC namespace's System V objects and POSIX message queues may be
    /// looked at, never used or changed. Default `"any"`.
    #[serde(default)]
    pub ipc: Ipc,
    /// `"none"`: no file lock of any kind (ENOLCK). Default `"any"`.
    #[serde(default)]
    pub file_locks: FileLocks,
}

impl SyscallRule {
    /// The settings beyond the deny list that this rule asks of the filters, by name.
    fn extras(&self) -> Vec<&'static str> {
        let mut on = Vec::new();
        if self.unix_sockets != UnixSockets::Any {
            on.push("unix_sockets");
        }
        if self.exec_sources != ExecSources::Any {
            on.push("exec_sources");
        }
        if self.ipc != Ipc::Any {
            on.push("ipc");
        }
        if self.file_locks != FileLocks::Any {
            on.push("file_locks");
        }
        on
    }
}

/// The process tree: its own PID namespace, or the host's view.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeRule {
    pub need: Need,
    pub reason: String,
    /// Keep the host's IPC and UTS namespaces too (its host name).
    #[serde(default)]
    pub host_ipc_uts: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockRule {
    pub need: Need,
    pub reason: String,
    /// 0: no limit unless the request gives one.
    pub default_timeout_s: u64,
    pub max_timeout_s: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetRule {
    pub need: Need,
    pub reason: String,
    pub mode: NetworkMode,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrivRule {
    pub need: Need,
    pub reason: String,
    /// `"launch"` (a uid of its own per launch, from execd's reserved range), `"uid:gid"`,
    /// or absent (root; capabilities still dropped when the dimension is on).
    pub run_as: Option<String>,
    /// Supplementary groups by name, kept where they exist on the host (log readers).
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResRule {
    pub need: Need,
    pub reason: String,
    /// Each 0 means unlimited. `memory_mb` and `pids` bound the whole tree (cgroup).
    pub memory_mb: u64,
    pub pids: u64,
    pub nofile: u64,
    pub nproc: u64,
    pub address_space_mb: u64,
    pub file_size_mb: u64,
    pub cpu_seconds: u64,
    /// CPU time for the whole tree, in percent of one CPU (cgroup `cpu.max`).
    pub cpu_percent: u64,
    /// The workspace: a tmpfs of this size and inode count in the launch's own mounts.
    pub workspace_mb: u64,
    pub workspace_inodes: u64,
}

/// Who besides admins may launch in a profile (the gateway and operators may launch in
/// every profile).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launchers {
    /// Unprivileged peer roles: `job`, `mcp`.
    pub roles: Vec<String>,
    pub reason: String,
}

/// The peer roles a profile's `launchers` may name: the unprivileged daemons.
const UNPRIVILEGED_ROLES: [PeerRole; 2] = [PeerRole::Job, PeerRole::Mcp];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub reason: String,
    /// Other names a launch may give for this profile (an old name kept working); the
    /// ledger records the profile's own name.
    #[serde(default)]
    pub aliases: Vec<String>,
    pub launchers: Launchers,
    pub filesystem: FsRule,
    pub process_tree: TreeRule,
    pub wall_clock: ClockRule,
    pub network: NetRule,
    pub syscalls: SyscallRule,
    pub privileges: PrivRule,
    pub resources: ResRule,
}

impl Profile {
    /// `(need, reason)` of each dimension, in report order.
    pub fn rules(&self) -> Vec<(Dimension, Need, &str)> {
        vec![
            (
                Dimension::Filesystem,
                self.filesystem.need,
                self.filesystem.reason.as_str(),
            ),
            (
                Dimension::ProcessTree,
                self.process_tree.need,
                self.process_tree.reason.as_str(),
            ),
            (
                Dimension::WallClock,
                self.wall_clock.need,
                self.wall_clock.reason.as_str(),
            ),
            (
                Dimension::Network,
                if matches!(self.network.mode, NetworkMode::Host) {
                    Need::Off
                } else {
                    self.network.need
                },
                self.network.reason.as_str(),
            ),
            (
                Dimension::Syscalls,
                self.syscalls.need,
                self.syscalls.reason.as_str(),
            ),
            (
                Dimension::Privileges,
                self.privileges.need,
                self.privileges.reason.as_str(),
            ),
            (
                Dimension::Resources,
                self.resources.need,
                self.resources.reason.as_str(),
            ),
        ]
    }

    pub fn run_as(&self) -> Result<RunAs, String> {
        match self.privileges.run_as.as_deref() {
            None => Ok(RunAs::Root),
            Some("launch") => Ok(RunAs::PerLaunch),
            Some(s) => {
                let (u, g) = s
                    .split_once(':')
                    .ok_or("run_as must be \"launch\" or \"uid:gid\"")?;
                match (u.parse(), g.parse()) {
                    (Ok(u), Ok(g)) => Ok(RunAs::Fixed(u, g)),
                    _ => Err("run_as must be \"launch\" or \"uid:gid\"".into()),
                }
            }
        }
    }
}

/// Whom a profile's workloads run as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    Root,
    Fixed(u32, u32),
    /// A uid (and same-numbered gid) no other running launch has: launches cannot read
    /// each other's workspaces or share a per-uid process limit.
    PerLaunch,
}

/// Most open files one launch of an unprivileged profile may hold: every open file is
/// counted against the host's `fs.file-max` whoever holds it, and Linux has no per-uid or
/// per-cgroup count. A launch's processes are at most `nproc` (its uid is its own, so
/// RLIMIT_NPROC counts exactly its tasks) and each holds at most `nofile` (descriptors
/// in flight over a socket pair count against it too), so `nproc × nofile` bounds the
/// files one launch can hold.
pub const MAX_FILES_PER_LAUNCH: u64 = 65_536;

/// Why a launch's rlimits do not bound its open files within [`MAX_FILES_PER_LAUNCH`].
fn file_budget(r: &ResRule) -> Option<String> {
    if r.nofile == 0 || r.nproc == 0 {
        return Some(
            "nofile and nproc must both be set: together they bound the launch's open files".into(),
        );
    }
    let files = r.nofile.saturating_mul(r.nproc);
    (files > MAX_FILES_PER_LAUNCH).then(|| {
        format!(
            "nproc × nofile is {files} open files, above the {MAX_FILES_PER_LAUNCH} one launch may hold"
        )
    })
}

/// All profiles by name.
#[derive(Debug, Clone)]
pub struct Profiles(pub BTreeMap<String, Profile>);

impl Profiles {
    /// Parses and checks the compiled-in profiles.
    pub fn builtin() -> Result<Profiles, String> {
        Self::parse(PROFILES_TOML)
    }

    pub fn parse(text: &str) -> Result<Profiles, String> {
        let map: BTreeMap<String, Profile> =
            toml::from_str(text).map_err(|e| format!("profiles.toml: {e}"))?;
        for (name, p) in &map {
            for (d, _, reason) in p.rules() {
                if reason.trim().is_empty() {
                    return Err(format!("profile {name}: {} has no reason", d.as_str()));
                }
            }
            if let Err(e) = p.run_as() {
                return Err(format!("profile {name}: {e}"));
            }
            for alias in &p.aliases {
                if map.contains_key(alias)
                    || map
                        .iter()
                        .any(|(n, o)| n != name && o.aliases.contains(alias))
                {
                    return Err(format!(
                        "profile {name}: alias {alias:?} names another profile too"
                    ));
                }
            }
            if let (Some(setting), Need::Off) = (p.syscalls.extras().first(), p.syscalls.need) {
                return Err(format!(
                    "profile {name}: syscalls: {setting} is held by the seccomp filters, which are off"
                ));
            }
            if let Some(d) = p
                .filesystem
                .devices_readable
                .iter()
                .flatten()
                .find(|d| !d.starts_with("/dev/"))
            {
                return Err(format!(
                    "profile {name}: filesystem: devices_readable: {d:?} is not under /dev"
                ));
            }
            for (setting, dirs) in [
                ("program_dirs", &p.filesystem.program_dirs),
                ("library_dirs", &p.filesystem.library_dirs),
            ] {
                if let Some(d) = dirs.iter().find(|d| !d.starts_with('/')) {
                    return Err(format!(
                        "profile {name}: filesystem: {setting}: {d:?} is not an absolute path"
                    ));
                }
                if !dirs.is_empty() && !p.filesystem.execute_listed_only {
                    return Err(format!(
                        "profile {name}: filesystem: {setting} keeps programs from a loader only where execute_listed_only names what may run"
                    ));
                }
            }
            if !p.filesystem.library_dirs.is_empty() && !p.filesystem.read_only_mounts {
                return Err(format!(
                    "profile {name}: filesystem: library_dirs: the other mounts are made noexec as they are remounted read-only, which needs read_only_mounts"
                ));
            }
            if matches!(p.run_as(), Ok(RunAs::PerLaunch))
                && p.resources.need != Need::Off
                && let Some(why) = file_budget(&p.resources)
            {
                return Err(format!("profile {name}: resources: {why}"));
            }
            if p.wall_clock.default_timeout_s > p.wall_clock.max_timeout_s {
                return Err(format!("profile {name}: default timeout above the maximum"));
            }
            let l = &p.launchers;
            if l.reason.trim().is_empty() {
                return Err(format!("profile {name}: launchers has no reason"));
            }
            for role in &l.roles {
                if !UNPRIVILEGED_ROLES.iter().any(|r| r.as_str() == role) {
                    return Err(format!(
                        "profile {name}: launchers: {role:?} is not job or mcp (admins may launch in every profile)"
                    ));
                }
            }
            if !l.roles.is_empty() && matches!(p.run_as(), Ok(RunAs::Root)) {
                return Err(format!(
                    "profile {name}: runs as root, so no unprivileged daemon may launch in it"
                ));
            }
        }
        Ok(Profiles(map))
    }

    /// A profile by its name or one of its aliases.
    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.named(name).map(|(_, p)| p)
    }

    /// A profile and its own name, by its name or one of its aliases.
    pub fn named(&self, name: &str) -> Option<(&str, &Profile)> {
        self.0
            .get_key_value(name)
            .or_else(|| {
                self.0
                    .iter()
                    .find(|(_, p)| p.aliases.iter().any(|a| a == name))
            })
            .map(|(n, p)| (n.as_str(), p))
    }

    /// The profiles a caller with `roles` may launch in, when it is no admin.
    pub fn launchable_by(&self, roles: RoleSet) -> Vec<String> {
        self.0
            .iter()
            .filter(|(_, p)| {
                p.launchers
                    .roles
                    .iter()
                    .any(|r| roles.iter().any(|have| have.as_str() == r))
            })
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// Where Argos keeps things a workload must not touch, and where this host's people keep
/// theirs.
#[derive(Debug, Clone)]
pub struct HostPaths {
    pub state_dir: PathBuf,
    pub runtime_dir: PathBuf,
    /// Home directories beyond `credentials::HOMES` and `/etc/passwd`'s (`exec.extra_homes`).
    pub extra_homes: Vec<PathBuf>,
}

/// Resolves a profile for one launch: the workspace becomes writable, `$STATE_DIR` and
/// `$RUNTIME_DIR` are substituted, the homes to mask credentials in are named, limits
/// turn into numbers.
pub fn plan(
    name: &str,
    p: &Profile,
    workspace: &Path,
    host: &HostPaths,
    disabled: &[Dimension],
    launch_uid: u32,
) -> Plan {
    let mb = |v: u64| {
        if v == 0 {
            u64::MAX
        } else {
            v.saturating_mul(1024 * 1024)
        }
    };
    let n = |v: u64| if v == 0 { u64::MAX } else { v };
    let mut denied: Vec<PathBuf> = p
        .filesystem
        .denied
        .iter()
        .map(|d| match d.as_str() {
            "$STATE_DIR" => host.state_dir.clone(),
            "$RUNTIME_DIR" => host.runtime_dir.clone(),
            other => PathBuf::from(other),
        })
        .collect();
    denied.sort();
    denied.dedup();
    Plan {
        profile: name.to_string(),
        filesystem: p.filesystem.need,
        writable: vec![workspace.to_path_buf()],
        denied,
        socket_dirs: p.filesystem.socket_dirs.iter().map(PathBuf::from).collect(),
        sockets_reachable: p
            .filesystem
            .sockets_reachable
            .iter()
            .map(PathBuf::from)
            .collect(),
        credential_homes: if p.filesystem.mask_credentials {
            crate::credentials::HOMES
                .iter()
                .map(PathBuf::from)
                .chain(host.extra_homes.iter().cloned())
                .collect()
        } else {
            Vec::new()
        },
        process_tree: p.process_tree.need,
        wall_clock: p.wall_clock.need,
        network: p.network.need,
        network_mode: p.network.mode,
        syscalls: p.syscalls.need,
        unix_sockets: p.syscalls.unix_sockets,
        exec_sources: p.syscalls.exec_sources,
        ipc: p.syscalls.ipc,
        file_locks: p.syscalls.file_locks,
        privileges: p.privileges.need,
        run_as: match (p.privileges.need, p.run_as()) {
            (Need::Off, _) | (_, Ok(RunAs::Root)) | (_, Err(_)) => None,
            (_, Ok(RunAs::Fixed(u, g))) => Some((u, g)),
            (_, Ok(RunAs::PerLaunch)) => Some((launch_uid, launch_uid)),
        },
        resources: p.resources.need,
        rlimits: Rlimits {
            nofile: n(p.resources.nofile),
            nproc: n(p.resources.nproc),
            address_space_bytes: mb(p.resources.address_space_mb),
            file_size_bytes: mb(p.resources.file_size_mb),
            cpu_seconds: n(p.resources.cpu_seconds),
        },
        cgroup_memory_bytes: (p.resources.memory_mb > 0).then(|| mb(p.resources.memory_mb)),
        cgroup_pids: (p.resources.pids > 0).then_some(p.resources.pids),
        cgroup_cpu_percent: (p.resources.cpu_percent > 0).then_some(p.resources.cpu_percent),
        workspace_limit: (p.resources.workspace_mb > 0 && p.resources.workspace_inodes > 0).then(
            || WorkspaceLimit {
                path: workspace.to_path_buf(),
                bytes: mb(p.resources.workspace_mb),
                inodes: p.resources.workspace_inodes,
            },
        ),
        read_only_mounts: p.filesystem.read_only_mounts,
        execute_listed_only: p.filesystem.execute_listed_only,
        program_dirs: p
            .filesystem
            .program_dirs
            .iter()
            .map(PathBuf::from)
            .collect(),
        library_dirs: p
            .filesystem
            .library_dirs
            .iter()
            .map(PathBuf::from)
            .collect(),
        devices_readable: p
            .filesystem
            .devices_readable
            .as_ref()
            .map(|d| d.iter().map(PathBuf::from).collect()),
        host_ipc_uts: p.process_tree.host_ipc_uts,
        groups: p
            .privileges
            .groups
            .iter()
            .filter_map(|g| nix::unistd::Group::from_name(g).ok().flatten())
            .map(|g| g.gid.as_raw())
            .collect(),
        disabled: disabled.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_profiles_parse_with_a_reason_for_every_rule() {
        let p = Profiles::builtin().unwrap();
        for name in ["agent", "inspect", "host", "operator", "mcp-server"] {
            assert!(p.get(name).is_some(), "{name}");
        }
        // The old name of the host profile is an alias: the profile keeps its own name.
        assert_eq!(p.named("operator").map(|(n, _)| n), Some("host"));
        assert!(p.named("root").is_none());
        let agent = p.get("agent").unwrap();
        assert!(
            agent
                .rules()
                .iter()
                .all(|(_, need, _)| *need == Need::Required),
            "agent requires everything"
        );
        assert_eq!(agent.run_as(), Ok(RunAs::PerLaunch));
        // Every contained profile hides the credential stores of every home.
        for (name, profile) in &p.0 {
            if profile.filesystem.need == Need::Required {
                assert!(profile.filesystem.mask_credentials, "{name}");
            }
        }
    }

    /// Who may launch where is data: no unprivileged daemon reaches a root profile, and
    /// a table that would let one is refused.
    #[test]
    fn launchers_are_data_and_never_reach_root() {
        let p = Profiles::builtin().unwrap();
        let job = RoleSet::of(&[PeerRole::Job]);
        let mcp = RoleSet::of(&[PeerRole::Mcp]);
        assert!(p.launchable_by(job).is_empty(), "job goes through the gate");
        assert!(
            p.launchable_by(mcp).is_empty(),
            "mcp names configured servers"
        );
        assert!(
            p.launchable_by(RoleSet::of(&[PeerRole::Job, PeerRole::Mcp]))
                .is_empty()
        );
        assert!(p.launchable_by(RoleSet::default()).is_empty());
        for (name, profile) in &p.0 {
            if profile.run_as() == Ok(RunAs::Root) {
                assert!(profile.launchers.roles.is_empty(), "{name}");
            }
        }
        let rooted = PROFILES_TOML.replacen(
            "[host.launchers]\nroles = []",
            "[host.launchers]\nroles = [\"job\"]",
            1,
        );
        assert_ne!(rooted, PROFILES_TOML);
        assert!(
            Profiles::parse(&rooted)
                .unwrap_err()
                .contains("runs as root")
        );
        let twice = PROFILES_TOML.replacen("aliases = [\"operator\"]", "aliases = [\"agent\"]", 1);
        assert_ne!(twice, PROFILES_TOML);
        assert!(
            Profiles::parse(&twice)
                .unwrap_err()
                .contains("names another profile")
        );
        let admin = PROFILES_TOML.replacen(
            "[mcp-server.launchers]\nroles = []",
            "[mcp-server.launchers]\nroles = [\"gateway\"]",
            1,
        );
        assert_ne!(admin, PROFILES_TOML);
        assert!(
            Profiles::parse(&admin)
                .unwrap_err()
                .contains("not job or mcp")
        );
    }

    #[test]
    fn plan_substitutes_host_paths_and_limits() {
        let p = Profiles::builtin().unwrap();
        let host = HostPaths {
            state_dir: "/srv/argos/state".into(),
            runtime_dir: "/srv/argos/run".into(),
            extra_homes: vec!["/export/home/*".into()],
        };
        let plan = plan(
            "agent",
            p.get("agent").unwrap(),
            Path::new("/w/1"),
            &host,
            &[Dimension::Network],
            1_900_000_007,
        );
        assert_eq!(plan.run_as, Some((1_900_000_007, 1_900_000_007)));
        assert!(plan.denied.contains(&PathBuf::from("/srv/argos/state")));
        assert!(plan.denied.contains(&PathBuf::from("/srv/argos/run")));
        assert_eq!(plan.writable, vec![PathBuf::from("/w/1")]);
        assert_eq!(plan.rlimits.address_space_bytes, 4096 * 1024 * 1024);
        assert!(!plan.wants(Dimension::Network));
        // Credential stores are looked for in root's home, every one under /home and the
        // configured ones (when the launch is taken: the plan names where, not what).
        assert_eq!(
            plan.credential_homes,
            [
                PathBuf::from("/root"),
                PathBuf::from("/home/*"),
                PathBuf::from("/export/home/*")
            ]
        );
        let op = super::plan(
            "host",
            p.get("host").unwrap(),
            Path::new("/w/2"),
            &host,
            &[],
            5,
        );
        assert_eq!(op.run_as, None, "the host profile runs as root");
        assert!(
            op.credential_homes.is_empty(),
            "the host profile hides nothing"
        );
        assert_eq!(op.rlimits.nofile, u64::MAX);
        assert_eq!(op.need(Dimension::Network), Need::Off);
    }

    /// A warm shim set up for one profile takes any launch of that profile (only the
    /// workspace and uid differ) and no launch of another.
    #[test]
    fn a_shim_setup_fits_its_profiles_launches_only() {
        let p = Profiles::builtin().unwrap();
        let host = HostPaths {
            state_dir: "/s".into(),
            runtime_dir: "/r".into(),
            extra_homes: Vec::new(),
        };
        let mk = |name: &str, ws: &str, uid: u32, disabled: &[Dimension]| {
            plan(
                name,
                p.get(name).unwrap(),
                Path::new(ws),
                &host,
                disabled,
                uid,
            )
        };
        let setup = crate::protocol::ShimSetup {
            plan: mk("agent", "/w/pool", 100_000, &[]),
            launches_dir: "/s/launches".into(),
            work_root: "/w".into(),
            mask_file: "/s/masked".into(),
        };
        assert!(setup.fits(&mk("agent", "/w/7", 100_007, &[])));
        assert!(!setup.fits(&mk("mcp-server", "/w/7", 100_007, &[])));
        assert!(!setup.fits(&mk("host", "/w/7", 0, &[])));
        assert!(
            !setup.fits(&mk("agent", "/w/7", 100_007, &[Dimension::Network])),
            "a shim with a network namespace must not run a launch planned without one"
        );
    }

    /// The sandbox and the MCP server profiles reach no UNIX socket of the host's: they
    /// make pairs only, and say so as data; a profile without seccomp cannot claim it.
    #[test]
    fn unix_sockets_are_pairs_only_where_a_host_socket_would_be_a_way_out() {
        let p = Profiles::builtin().unwrap();
        for name in ["agent", "mcp-server", "mcp-server-offline"] {
            assert_eq!(
                p.get(name).unwrap().syscalls.unix_sockets,
                UnixSockets::PairsOnly,
                "{name}"
            );
        }
        // inspect's status queries (D-Bus, systemd) need them; the host's are its own.
        for name in ["inspect", "host"] {
            assert_eq!(
                p.get(name).unwrap().syscalls.unix_sockets,
                UnixSockets::Any,
                "{name}"
            );
        }
        let host = HostPaths {
            state_dir: "/s".into(),
            runtime_dir: "/r".into(),
            extra_homes: Vec::new(),
        };
        let agent = plan(
            "agent",
            p.get("agent").unwrap(),
            Path::new("/w/1"),
            &host,
            &[],
            7,
        );
        assert_eq!(agent.unix_sockets, UnixSockets::PairsOnly);
        let unfiltered = PROFILES_TOML.replacen(
            "[host.syscalls]\nneed = \"off\"\n",
            "[host.syscalls]\nneed = \"off\"\nunix_sockets = \"pairs_only\"\n",
            1,
        );
        assert_ne!(unfiltered, PROFILES_TOML);
        assert!(
            Profiles::parse(&unfiltered)
                .unwrap_err()
                .contains("seccomp filters, which are off")
        );
    }

    /// inspect runs on the host's IPC namespace and files: it may look at the IPC objects
    /// and locks there but use or change none, executes nothing from a descriptor or from
    /// memory, and hides unlisted programs from a loader; the settings are data, and a
    /// profile whose filters are off cannot claim them.
    #[test]
    fn inspect_changes_nothing_of_the_host_and_runs_only_listed_files() {
        let p = Profiles::builtin().unwrap();
        let inspect = p.get("inspect").unwrap();
        assert_eq!(inspect.syscalls.exec_sources, ExecSources::FilesOnly);
        assert_eq!(inspect.syscalls.ipc, Ipc::ReadOnly);
        assert_eq!(inspect.syscalls.file_locks, FileLocks::None);
        for dir in [
            "/usr/bin",
            "/usr/sbin",
            "/bin",
            "/usr/local/bin",
            "/usr/libexec",
        ] {
            assert!(
                inspect.filesystem.program_dirs.iter().any(|d| d == dir),
                "{dir}"
            );
        }
        let host = HostPaths {
            state_dir: "/s".into(),
            runtime_dir: "/r".into(),
            extra_homes: Vec::new(),
        };
        let planned = plan("inspect", inspect, Path::new("/w/1"), &host, &[], 7);
        assert_eq!(planned.exec_sources, ExecSources::FilesOnly);
        assert_eq!(planned.ipc, Ipc::ReadOnly);
        assert_eq!(planned.file_locks, FileLocks::None);
        assert!(planned.program_dirs.contains(&PathBuf::from("/usr/bin")));
        assert!(
            planned
                .library_dirs
                .contains(&PathBuf::from("/usr/lib/*-linux-gnu*"))
        );
        // The sandbox locks its own files and runs what it builds.
        let agent = p.get("agent").unwrap();
        assert_eq!(agent.syscalls.file_locks, FileLocks::Any);
        assert!(agent.filesystem.program_dirs.is_empty());
        assert!(agent.filesystem.library_dirs.is_empty());
        for setting in [
            "exec_sources = \"files_only\"",
            "ipc = \"read_only\"",
            "file_locks = \"none\"",
        ] {
            let unfiltered = PROFILES_TOML.replacen(
                "[host.syscalls]\nneed = \"off\"\n",
                &format!("[host.syscalls]\nneed = \"off\"\n{setting}\n"),
                1,
            );
            assert_ne!(unfiltered, PROFILES_TOML);
            assert!(
                Profiles::parse(&unfiltered)
                    .unwrap_err()
                    .contains("seccomp filters, which are off"),
                "{setting}"
            );
        }
        let unlisted = PROFILES_TOML.replacen(
            "[host.filesystem]\nneed = \"off\"\n",
            "[host.filesystem]\nneed = \"off\"\nprogram_dirs = [\"/usr/bin\"]\n",
            1,
        );
        assert_ne!(unlisted, PROFILES_TOML);
        assert!(
            Profiles::parse(&unlisted)
                .unwrap_err()
                .contains("execute_listed_only")
        );
        let unlisted = PROFILES_TOML.replacen(
            "[host.filesystem]\nneed = \"off\"\n",
            "[host.filesystem]\nneed = \"off\"\nlibrary_dirs = [\"/usr/lib\"]\n",
            1,
        );
        assert!(
            Profiles::parse(&unlisted)
                .unwrap_err()
                .contains("library_dirs keeps programs from a loader only where")
        );
    }

    #[test]
    fn a_rule_without_reason_is_rejected() {
        let text = PROFILES_TOML.replacen(
            "reason = \"No network: an agent's command cannot reach the host's loopback services or the internet.\"",
            "reason = \" \"",
            1,
        );
        assert!(
            Profiles::parse(&text)
                .unwrap_err()
                .contains("network has no reason")
        );
    }

    /// One agent launch held 216,650 eventfds (nproc 256 × nofile 1024 allowed 262,144):
    /// about eleven reached the host's file-max. Every unprivileged profile's rlimits now
    /// bound its open files, and a profile that does not is refused.
    #[test]
    fn every_unprivileged_launch_holds_a_bounded_number_of_files() {
        let p = Profiles::builtin().unwrap();
        for (name, prof) in &p.0 {
            if matches!(prof.run_as(), Ok(RunAs::PerLaunch)) {
                let r = &prof.resources;
                assert!(
                    r.nofile > 0 && r.nproc > 0 && r.nofile * r.nproc <= MAX_FILES_PER_LAUNCH,
                    "{name}: nofile {} × nproc {}",
                    r.nofile,
                    r.nproc
                );
            }
        }
        let wide =
            PROFILES_TOML.replacen("nofile = 512\nnproc = 128", "nofile = 1024\nnproc = 256", 1);
        assert_ne!(wide, PROFILES_TOML);
        assert!(
            Profiles::parse(&wide)
                .unwrap_err()
                .contains("above the 65536")
        );
        let unbounded = PROFILES_TOML.replacen("nofile = 512\n", "nofile = 0\n", 1);
        assert!(
            Profiles::parse(&unbounded)
                .unwrap_err()
                .contains("must both be set")
        );
    }
}
