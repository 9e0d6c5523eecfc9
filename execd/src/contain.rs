//! The containment mechanisms, each a small function the shim calls in a fixed order
//! (see `shim/` and docs/containment.md), and the read-back that proves what holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use serde::{Deserialize, Serialize};

use crate::spec::{Dimension, NetworkMode, Plan, Rlimits, UnixSockets, WorkspaceLimit};
use crate::sys::proc::{SelfStatus, namespace, self_status};

/// The landlock ABI Argos asks for (filesystem rights up to truncate and device ioctls).
const LANDLOCK_ABI: ABI = ABI::V5;

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;

/// Each denied syscall and why (the deny list is policy: reasons live next to it).
pub const DENIED_SYSCALLS: &[(i64, &str, &str)] = &[
    (
        libc::SYS_mount,
        "mount",
        "no mounts: the filesystem view is fixed at launch",
    ),
    (
        libc::SYS_umount2,
        "umount2",
        "no unmounting what hides host paths",
    ),
    (libc::SYS_pivot_root, "pivot_root", "no root switching"),
    (
        libc::SYS_move_mount,
        "move_mount",
        "new mount API: no mounts",
    ),
    (libc::SYS_open_tree, "open_tree", "new mount API: no mounts"),
    (libc::SYS_fsopen, "fsopen", "new mount API: no mounts"),
    (libc::SYS_fsmount, "fsmount", "new mount API: no mounts"),
    (libc::SYS_fsconfig, "fsconfig", "new mount API: no mounts"),
    (libc::SYS_fspick, "fspick", "new mount API: no mounts"),
    (
        libc::SYS_mount_setattr,
        "mount_setattr",
        "new mount API: no mounts",
    ),
    (
        libc::SYS_ptrace,
        "ptrace",
        "no inspecting or steering other processes",
    ),
    (
        libc::SYS_process_vm_readv,
        "process_vm_readv",
        "no reading other processes' memory",
    ),
    (
        libc::SYS_process_vm_writev,
        "process_vm_writev",
        "no writing other processes' memory",
    ),
    (
        libc::SYS_kexec_load,
        "kexec_load",
        "no replacing the kernel",
    ),
    (
        libc::SYS_kexec_file_load,
        "kexec_file_load",
        "no replacing the kernel",
    ),
    (libc::SYS_init_module, "init_module", "no kernel modules"),
    (libc::SYS_finit_module, "finit_module", "no kernel modules"),
    (
        libc::SYS_delete_module,
        "delete_module",
        "no unloading kernel modules",
    ),
    (
        libc::SYS_bpf,
        "bpf",
        "no eBPF: a large kernel attack surface",
    ),
    (
        libc::SYS_perf_event_open,
        "perf_event_open",
        "no perf: side channels and kernel surface",
    ),
    (libc::SYS_add_key, "add_key", "keyrings are not namespaced"),
    (
        libc::SYS_request_key,
        "request_key",
        "keyrings are not namespaced",
    ),
    (libc::SYS_keyctl, "keyctl", "keyrings are not namespaced"),
    (
        libc::SYS_open_by_handle_at,
        "open_by_handle_at",
        "bypasses path-based confinement",
    ),
    (
        libc::SYS_name_to_handle_at,
        "name_to_handle_at",
        "pairs with open_by_handle_at",
    ),
    (
        libc::SYS_userfaultfd,
        "userfaultfd",
        "a classic kernel-exploit primitive",
    ),
    (
        libc::SYS_io_uring_setup,
        "io_uring_setup",
        "io_uring bypasses seccomp for its operations",
    ),
    (
        libc::SYS_io_uring_enter,
        "io_uring_enter",
        "io_uring bypasses seccomp for its operations",
    ),
    (
        libc::SYS_io_uring_register,
        "io_uring_register",
        "io_uring bypasses seccomp for its operations",
    ),
    (libc::SYS_setns, "setns", "no joining other namespaces"),
    (libc::SYS_swapon, "swapon", "host administration"),
    (libc::SYS_swapoff, "swapoff", "host administration"),
    (libc::SYS_reboot, "reboot", "host administration"),
    (libc::SYS_acct, "acct", "host administration"),
    #[cfg(target_arch = "x86_64")]
    (
        libc::SYS_modify_ldt,
        "modify_ldt",
        "16-bit segments: old kernel-exploit surface nothing contained needs",
    ),
];

/// What `socket(AF_UNIX)` answers where only pairs are allowed: the family is not there
/// (as on a kernel without it), which name lookups (nscd, nss-systemd, nss-resolve) and
/// loggers take for "not available" and go on without.
pub const NO_UNIX_SOCKET: i32 = libc::EAFNOSUPPORT;

/// Compiles the syscall filters: the deny list (EPERM), argument rules (new user
/// namespaces, TIOCSTI/TIOCLINUX, a persona other than the default, vsock sockets), and clone3 → ENOSYS so libc falls back to clone, whose
/// flags a filter can see; with `no_inet` no IP or packet sockets, and with `unix` pairs
/// only no `socket(AF_UNIX)` ([`NO_UNIX_SOCKET`]). Built before fork; loaded last, just
/// before exec.
pub fn seccomp_filters(no_inet: bool, unix: UnixSockets) -> Result<Vec<BpfProgram>, String> {
    let err = |e: seccompiler::BackendError| e.to_string();
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (nr, _, _) in DENIED_SYSCALLS {
        deny.insert(*nr, Vec::new());
    }
    // Reason: a new user namespace hands the process a full capability set inside it.
    let newuser = argos_common::harden::new_user_namespace;
    deny.insert(libc::SYS_unshare, vec![newuser()?]);
    deny.insert(libc::SYS_clone, vec![newuser()?]);
    // Reason: TIOCSTI and TIOCLINUX push keystrokes into a terminal someone else reads.
    let ioctl = |cmd: u64| {
        SeccompRule::new(vec![
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, cmd)
                .map_err(err)?,
        ])
        .map_err(err)
    };
    deny.insert(
        libc::SYS_ioctl,
        vec![ioctl(libc::TIOCSTI)?, ioctl(libc::TIOCLINUX)?],
    );
    // Reason: another persona changes how the kernel treats the process (READ_IMPLIES_EXEC,
    // ADDR_NO_RANDOMIZE, a 32-bit or 2.6 uname): only the default (0) and the query
    // (0xffffffff) are left.
    let arg0_dword = |op: SeccompCmpOp, v: u64| {
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, op, v).map_err(err)
    };
    deny.insert(
        libc::SYS_personality,
        vec![
            SeccompRule::new(vec![
                arg0_dword(SeccompCmpOp::Ne, 0)?,
                arg0_dword(SeccompCmpOp::Ne, 0xffff_ffff)?,
            ])
            .map_err(err)?,
        ],
    );
    // Reason: vsock is not namespaced: on a virtual machine it reaches the hypervisor and
    // its other guests, whatever the network namespace says.
    // With `no_inet` (the host's network namespace, to look at only): no socket that could
    // talk over it — IP of either version, or raw packets.
    let families: &[i32] = if no_inet {
        &[
            libc::AF_VSOCK,
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_PACKET,
        ]
    } else {
        &[libc::AF_VSOCK]
    };
    deny.insert(
        libc::SYS_socket,
        families
            .iter()
            .map(|f| SeccompRule::new(vec![arg0_dword(SeccompCmpOp::Eq, *f as u64)?]).map_err(err))
            .collect::<Result<_, _>>()?,
    );
    let eperm = SeccompFilter::new(
        deny,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        ARCH,
    )
    .map_err(err)?;
    let a: BpfProgram = eperm.try_into().map_err(err)?;
    let mut filters = vec![a, argos_common::harden::clone3_enosys()?];
    #[cfg(target_arch = "x86_64")]
    filters.push(argos_common::harden::no_x32());
    // Reason: a pathname UNIX socket is in no network namespace, a read-only mount does
    // not stop connect(), and file modes let anyone reach a socket made 0777 (landlock,
    // up to its ABI 7, has no right for connecting to one): no UNIX socket is made at all,
    // so nothing can connect or send to one of the host's, pathname or abstract. A
    // socketpair stays: it reaches nothing outside the launch, and child processes'
    // stdio (libuv), event loops (asyncio) and the like are built on it.
    if unix == UnixSockets::PairsOnly {
        let no_unix = SeccompFilter::new(
            BTreeMap::from([(
                libc::SYS_socket,
                vec![
                    SeccompRule::new(vec![arg0_dword(SeccompCmpOp::Eq, libc::AF_UNIX as u64)?])
                        .map_err(err)?,
                ],
            )]),
            SeccompAction::Allow,
            SeccompAction::Errno(NO_UNIX_SOCKET as u32),
            ARCH,
        )
        .map_err(err)?;
        filters.push(no_unix.try_into().map_err(err)?);
    }
    Ok(filters)
}

/// Loads compiled filters (needs no_new_privs).
pub fn load_seccomp(filters: &[BpfProgram]) -> Result<(), String> {
    for f in filters {
        seccompiler::apply_filter(f).map_err(|e| format!("loading seccomp filter: {e}"))?;
    }
    Ok(())
}

/// The read-only part of the host: every path except the denied ones. Landlock only
/// allows, so a denied path is carved out by granting its siblings at each level above it.
pub fn readable_roots(denied: &[PathBuf]) -> Vec<PathBuf> {
    carve(vec![PathBuf::from("/")], denied)
}

/// Removes each denied path from the trees in `allowed`, keeping everything else.
fn carve(mut allowed: Vec<PathBuf>, denied: &[PathBuf]) -> Vec<PathBuf> {
    for deny in denied {
        if std::fs::symlink_metadata(deny).is_err() {
            continue;
        }
        let Some(idx) = allowed.iter().position(|a| deny.starts_with(a)) else {
            continue;
        };
        let mut cur = allowed.remove(idx);
        while &cur != deny {
            let Some(step) = deny
                .strip_prefix(&cur)
                .ok()
                .and_then(|r| r.components().next())
            else {
                break;
            };
            let next = cur.join(step);
            if let Ok(entries) = std::fs::read_dir(&cur) {
                for e in entries.flatten() {
                    if e.path() != next {
                        allowed.push(e.path());
                    }
                }
            }
            cur = next;
        }
    }
    allowed
}

/// Device files every program expects to read and write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// Applies the filesystem policy: read (and execute) the host minus denied paths, write
/// only the writable paths. With `executable`, only those files may be executed (the
/// readable and writable trees are then not executable). Returns what the kernel enforces.
pub fn apply_landlock(
    readable: &[PathBuf],
    writable: &[PathBuf],
    executable: Option<&[PathBuf]>,
) -> Result<LandlockStatus, String> {
    let e = |e: landlock::RulesetError| e.to_string();
    let mut read = AccessFs::from_read(LANDLOCK_ABI);
    let mut all = AccessFs::from_all(LANDLOCK_ABI);
    if executable.is_some() {
        read &= !AccessFs::Execute;
        all &= !AccessFs::Execute;
    }
    let dev = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev;
    let run = AccessFs::Execute | AccessFs::ReadFile;
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(LANDLOCK_ABI))
        .map_err(e)?
        .create()
        .map_err(e)?
        .add_rules(path_beneath_rules(existing(readable), read))
        .map_err(e)?
        .add_rules(path_beneath_rules(existing(writable), all))
        .map_err(e)?
        .add_rules(path_beneath_rules(existing(DEVICES), dev))
        .map_err(e)?
        .add_rules(path_beneath_rules(
            existing(executable.unwrap_or_default()),
            run,
        ))
        .map_err(e)?
        .restrict_self()
        .map_err(e)?;
    let fs_enforced = status.ruleset == RulesetStatus::FullyEnforced;
    // A second layer, judged on its own (kernels before ABI 6 lack it): no connecting to
    // abstract UNIX sockets made outside the sandbox (a host-network profile would
    // otherwise reach D-Bus and the like), no signals to processes outside it.
    let scoped = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::from_all(ABI::V6))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .is_ok_and(|s| s.ruleset == RulesetStatus::FullyEnforced);
    Ok(LandlockStatus {
        fs_enforced,
        scoped,
        executables: executable.map(|x| x.len() as u32),
    })
}

/// Programs with what the kernel opens to run each: an ELF program's interpreter (the
/// dynamic loader), a script's `#!` interpreter (and that one's loader). Symlinks are
/// followed (landlock's rules hold for the file itself).
pub fn with_interpreters(programs: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut todo: Vec<PathBuf> = programs.into_iter().collect();
    // Interpreters of interpreters end quickly (the kernel allows few levels).
    let mut steps = 0;
    while let Some(p) = todo.pop() {
        steps += 1;
        let Ok(real) = std::fs::canonicalize(&p) else {
            continue;
        };
        if out.contains(&real) || steps > 64 {
            continue;
        }
        if let Some(interp) = interpreter_of(&real) {
            todo.push(interp);
        }
        out.push(real);
    }
    out
}

/// The interpreter the kernel runs a file with: ELF `PT_INTERP` or a `#!` line.
fn interpreter_of(path: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(path)
        .ok()?
        .take(64 * 1024)
        .read_to_end(&mut head)
        .ok()?;
    if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|b| *b == b'\n').next()?;
        let line = std::str::from_utf8(line).ok()?.trim_start();
        let interp = line.split([' ', '\t']).next()?;
        return (!interp.is_empty()).then(|| PathBuf::from(interp));
    }
    elf_interp(&head)
}

/// `PT_INTERP` of a 64- or 32-bit little-endian ELF file, from its first bytes.
fn elf_interp(b: &[u8]) -> Option<PathBuf> {
    if b.get(..4)? != b"\x7fELF" || *b.get(5)? != 1 {
        return None;
    }
    let wide = match *b.get(4)? {
        2 => true,
        1 => false,
        _ => return None,
    };
    let u16_at = |o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?) as usize);
    let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?) as usize);
    let u64_at =
        |o: usize| usize::try_from(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?)).ok();
    let (phoff, phentsize, phnum) = if wide {
        (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?)
    } else {
        (u32_at(0x1c)?, u16_at(0x2a)?, u16_at(0x2c)?)
    };
    for i in 0..phnum.min(256) {
        let h = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(h)? != 3 {
            continue; // not PT_INTERP
        }
        let (off, size) = if wide {
            (u64_at(h + 8)?, u64_at(h + 32)?)
        } else {
            (u32_at(h + 4)?, u32_at(h + 16)?)
        };
        let name = b.get(off..off.checked_add(size)?)?;
        let name = name.split(|c| *c == 0).next()?;
        return Some(PathBuf::from(std::str::from_utf8(name).ok()?));
    }
    None
}

/// What landlock enforces for a workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockStatus {
    /// The filesystem rules, fully.
    pub fs_enforced: bool,
    /// Abstract UNIX sockets and signals scoped to the sandbox (landlock ABI 6).
    pub scoped: bool,
    /// Where only listed files may be executed: how many are.
    #[serde(default)]
    pub executables: Option<u32>,
}

fn existing<P: AsRef<Path>>(paths: &[P]) -> Vec<&Path> {
    paths
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| p.exists())
        .collect()
}

/// Sets every rlimit (soft = hard). No core dumps at all: the host's core handler
/// (systemd-coredump, apport) runs as root outside the launch's cgroup and writes to the
/// host's disk, beyond every bound the launch has.
pub fn set_rlimits(l: &Rlimits) -> Result<(), String> {
    use nix::sys::resource::{Resource, setrlimit};
    for (res, v, name) in [
        (Resource::RLIMIT_NOFILE, l.nofile, "NOFILE"),
        (Resource::RLIMIT_NPROC, l.nproc, "NPROC"),
        (Resource::RLIMIT_AS, l.address_space_bytes, "AS"),
        (Resource::RLIMIT_FSIZE, l.file_size_bytes, "FSIZE"),
        (Resource::RLIMIT_CPU, l.cpu_seconds, "CPU"),
        (Resource::RLIMIT_CORE, 0, "CORE"),
    ] {
        setrlimit(res, v, v).map_err(|e| format!("setrlimit {name}: {e}"))?;
    }
    Ok(())
}

/// Drops every capability (bounding, ambient, then effective/permitted/inheritable) and
/// switches to `run_as` if given. Bounding first: it needs CAP_SETPCAP, which goes last.
pub fn drop_privileges(run_as: Option<(u32, u32)>, groups: &[u32]) -> Result<(), String> {
    use caps::CapSet;
    caps::clear(None, CapSet::Ambient).map_err(|e| format!("clearing ambient caps: {e}"))?;
    caps::clear(None, CapSet::Bounding).map_err(|e| format!("clearing bounding caps: {e}"))?;
    if let Some((uid, gid)) = run_as {
        use nix::unistd::{Gid, Uid, setgroups, setresgid, setresuid};
        let groups: Vec<Gid> = groups.iter().map(|g| Gid::from_raw(*g)).collect();
        setgroups(&groups).map_err(|e| format!("setgroups: {e}"))?;
        let g = Gid::from_raw(gid);
        setresgid(g, g, g).map_err(|e| format!("setresgid {gid}: {e}"))?;
        let u = Uid::from_raw(uid);
        setresuid(u, u, u).map_err(|e| format!("setresuid {uid}: {e}"))?;
    }
    for set in [CapSet::Inheritable, CapSet::Effective, CapSet::Permitted] {
        caps::clear(None, set).map_err(|e| format!("clearing {set:?} caps: {e}"))?;
    }
    Ok(())
}

/// Sets no_new_privs: exec can never grant privileges again (setuid bits, file caps).
pub fn set_no_new_privs() -> Result<(), String> {
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("PR_SET_NO_NEW_PRIVS: {e}"))
}

/// Namespaces of the current process, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespaces {
    pub pid: String,
    pub net: String,
    pub mnt: String,
}

impl Namespaces {
    pub fn of(pid: &str) -> Namespaces {
        Namespaces {
            pid: namespace(pid, "pid").unwrap_or_default(),
            net: namespace(pid, "net").unwrap_or_default(),
            mnt: namespace(pid, "mnt").unwrap_or_default(),
        }
    }
}

/// What the workload's process reads back about itself just before exec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Readback {
    pub status: SelfStatus,
    pub namespaces: Namespaces,
    pub landlock: LandlockStatus,
    pub rlimits_ok: bool,
    /// Inside the launch's cgroups, when it has any (None: no cgroup limits).
    pub in_cgroup: Option<bool>,
    /// The workspace's filesystem as read back (`statvfs`): its size in bytes and its
    /// inode count, when the plan bounds it (None: not bounded by the plan).
    #[serde(default)]
    pub workspace: Option<(u64, u64)>,
    /// Whether opening an IP or packet socket fails with EPERM (tried after seccomp).
    #[serde(default)]
    pub no_inet: bool,
    /// Whether `socket(AF_UNIX)` fails with [`NO_UNIX_SOCKET`] (tried after seccomp).
    #[serde(default)]
    pub no_unix: bool,
    /// Whether `socketpair(AF_UNIX)` works (tried after seccomp).
    #[serde(default)]
    pub socketpair: bool,
}

impl Readback {
    pub fn take(
        landlock_status: LandlockStatus,
        rlimits: Option<&Rlimits>,
        cgroup_marker: Option<&str>,
        workspace: Option<&WorkspaceLimit>,
    ) -> Readback {
        Readback {
            status: self_status().unwrap_or_default(),
            namespaces: Namespaces::of("self"),
            landlock: landlock_status,
            rlimits_ok: rlimits.is_some_and(rlimits_hold),
            in_cgroup: cgroup_marker.map(|m| {
                std::fs::read_to_string("/proc/self/cgroup")
                    .is_ok_and(|s| s.lines().any(|l| l.ends_with(m)))
            }),
            no_inet: [libc::AF_INET, libc::AF_INET6, libc::AF_PACKET]
                .into_iter()
                .all(socket_refused),
            no_unix: unix_socket_refused(),
            socketpair: socketpair_works(),
            workspace: workspace.map(|w| {
                nix::sys::statvfs::statvfs(&w.path).map_or((0, 0), |v| {
                    (v.blocks().saturating_mul(v.fragment_size()), v.files())
                })
            }),
        }
    }

    /// Whether the workspace is bounded as `plan` says (true when the plan sets no bound).
    fn workspace_holds(&self, plan: &Plan) -> bool {
        match (&plan.workspace_limit, self.workspace) {
            (None, _) => true,
            (Some(w), Some((bytes, inodes))) => {
                bytes > 0 && bytes <= w.bytes && inodes > 0 && inodes <= w.inodes
            }
            (Some(_), None) => false,
        }
    }

    /// Whether a dimension is in force, judged only from what was read back.
    pub fn holds(&self, d: Dimension, plan: &Plan, host: &Namespaces) -> (bool, String) {
        let s = &self.status;
        match d {
            Dimension::Filesystem => (
                self.landlock.fs_enforced && self.namespaces.mnt != host.mnt,
                format!(
                    "landlock fully enforced: {}; private mounts: {}; abstract sockets and signals scoped: {}{}",
                    self.landlock.fs_enforced,
                    self.namespaces.mnt != host.mnt,
                    self.landlock.scoped,
                    match self.landlock.executables {
                        Some(n) => format!("; executable: only {n} listed files"),
                        None => String::new(),
                    }
                ),
            ),
            Dimension::ProcessTree => (
                !self.namespaces.pid.is_empty() && self.namespaces.pid != host.pid,
                "own PID namespace with a reaping init".into(),
            ),
            Dimension::Network if plan.network_mode == NetworkMode::HostLocal => (
                self.no_inet,
                format!(
                    "host network namespace, to look at only: sockets of AF_INET, AF_INET6 and AF_PACKET {}",
                    if self.no_inet {
                        "refused"
                    } else {
                        "NOT refused"
                    }
                ),
            ),
            Dimension::Network => {
                let own = !self.namespaces.net.is_empty() && self.namespaces.net != host.net;
                let mode = match plan.network_mode {
                    NetworkMode::None => "no interfaces",
                    NetworkMode::Loopback => "loopback only",
                    NetworkMode::Host | NetworkMode::HostLocal => "host network",
                };
                (own, format!("own network namespace, {mode}"))
            }
            Dimension::Syscalls => {
                let filtered = s.seccomp == 2;
                match plan.unix_sockets {
                    UnixSockets::Any => (filtered, format!("seccomp filter mode {}", s.seccomp)),
                    UnixSockets::PairsOnly => (
                        filtered && self.no_unix,
                        format!(
                            "seccomp filter mode {}; UNIX sockets: pairs only (socket(AF_UNIX) {}, socketpair {})",
                            s.seccomp,
                            if self.no_unix {
                                "refused"
                            } else {
                                "NOT refused"
                            },
                            if self.socketpair { "works" } else { "fails" }
                        ),
                    ),
                }
            }
            Dimension::Privileges => {
                let caps_zero = s.cap_eff == 0
                    && s.cap_prm == 0
                    && s.cap_inh == 0
                    && s.cap_bnd == 0
                    && s.cap_amb == 0;
                let uid_ok = plan.run_as.is_none_or(|(u, g)| s.uid == u && s.gid == g);
                (
                    caps_zero && s.no_new_privs && uid_ok,
                    format!(
                        "capabilities zero: {caps_zero}; no_new_privs: {}; uid {} gid {}",
                        s.no_new_privs, s.uid, s.gid
                    ),
                )
            }
            Dimension::Resources => {
                let cgroup = match self.in_cgroup {
                    Some(true) => "inside the launch's cgroup",
                    Some(false) => "NOT inside the launch's cgroup",
                    None => "no cgroup on this host",
                };
                let workspace = match (&plan.workspace_limit, self.workspace) {
                    (None, _) => String::new(),
                    (Some(_), Some((bytes, inodes))) if self.workspace_holds(plan) => format!(
                        "; workspace a tmpfs of {} MiB and {inodes} inodes",
                        bytes / (1024 * 1024)
                    ),
                    (Some(w), _) => format!(
                        "; workspace NOT bounded to {} MiB and {} inodes",
                        w.bytes / (1024 * 1024),
                        w.inodes
                    ),
                };
                (
                    self.rlimits_ok && self.in_cgroup != Some(false) && self.workspace_holds(plan),
                    format!("rlimits NOFILE NPROC AS FSIZE CPU CORE=0; {cgroup}{workspace}"),
                )
            }
            // The shim itself keeps the deadline (when the launch has one).
            Dimension::WallClock => (true, "deadline kept by the shim".into()),
        }
    }
}

/// Whether `socket(family, SOCK_DGRAM)` is refused with EPERM (the seccomp rule), not
/// merely unsupported.
fn socket_refused(family: i32) -> bool {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
    let Some(af) = AddressFamily::from_i32(family) else {
        return false;
    };
    let kind = if family == libc::AF_PACKET {
        SockType::Raw
    } else {
        SockType::Datagram
    };
    matches!(
        socket(af, kind, SockFlag::SOCK_CLOEXEC, None),
        Err(nix::errno::Errno::EPERM)
    )
}

/// Whether `socket(AF_UNIX, SOCK_STREAM)` is refused with [`NO_UNIX_SOCKET`] (the
/// seccomp rule of a pairs-only profile).
fn unix_socket_refused() -> bool {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
    matches!(
        socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None
        ),
        Err(e) if e as i32 == NO_UNIX_SOCKET
    )
}

/// Whether a UNIX socket pair can be made (it is closed again at once).
fn socketpair_works() -> bool {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .is_ok()
}

fn rlimits_hold(l: &Rlimits) -> bool {
    use nix::sys::resource::{Resource, getrlimit};
    [
        (Resource::RLIMIT_NOFILE, l.nofile),
        (Resource::RLIMIT_NPROC, l.nproc),
        (Resource::RLIMIT_AS, l.address_space_bytes),
        (Resource::RLIMIT_FSIZE, l.file_size_bytes),
        (Resource::RLIMIT_CPU, l.cpu_seconds),
        (Resource::RLIMIT_CORE, 0),
    ]
    .into_iter()
    .all(|(r, v)| getrlimit(r).is_ok_and(|(soft, hard)| soft == v && hard == v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreters_are_found_for_elf_programs_and_scripts() {
        // A dynamically linked program brings its loader; a script its `#!` program
        // (and that one's loader).
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        let loader = interpreter_of(&sh).expect("/bin/sh is dynamically linked");
        assert!(loader.to_string_lossy().contains("ld-"), "{loader:?}");
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh -e\necho hi\n").unwrap();
        assert_eq!(interpreter_of(&script), Some(PathBuf::from("/bin/sh")));
        let all = with_interpreters([script.clone()]);
        assert!(all.contains(&std::fs::canonicalize(&script).unwrap()));
        assert!(all.contains(&sh), "{all:?}");
        assert!(
            all.contains(&std::fs::canonicalize(&loader).unwrap()),
            "{all:?}"
        );
        // Not a program: nothing to add; absent: nothing at all.
        assert_eq!(elf_interp(b"\x7fELF"), None);
        assert!(with_interpreters([PathBuf::from("/nonexistent/x")]).is_empty());
    }

    #[test]
    fn filters_compile() {
        let base = if cfg!(target_arch = "x86_64") { 3 } else { 2 };
        assert_eq!(
            seccomp_filters(false, UnixSockets::Any).unwrap().len(),
            base
        );
        assert_eq!(
            seccomp_filters(true, UnixSockets::PairsOnly).unwrap().len(),
            base + 1
        );
    }

    /// The filters of a pairs-only profile, loaded on a thread of its own (seccomp and
    /// no_new_privs hold per thread): `socket(AF_UNIX)` is refused as a missing family,
    /// a socket pair and an IP socket (the agent's network namespace has nothing to reach)
    /// still work, and the read-back says so. Without the rule, the same thread makes the
    /// socket.
    #[test]
    fn pairs_only_refuses_unix_sockets_but_not_socket_pairs() {
        let probe = |unix: UnixSockets| {
            let filters = seccomp_filters(false, unix).unwrap();
            std::thread::spawn(move || {
                set_no_new_privs().unwrap();
                load_seccomp(&filters).unwrap();
                let inet = nix::sys::socket::socket(
                    nix::sys::socket::AddressFamily::Inet,
                    nix::sys::socket::SockType::Datagram,
                    nix::sys::socket::SockFlag::SOCK_CLOEXEC,
                    None,
                )
                .is_ok();
                (unix_socket_refused(), socketpair_works(), inet)
            })
            .join()
            .unwrap()
        };
        assert_eq!(probe(UnixSockets::PairsOnly), (true, true, true));
        assert_eq!(probe(UnixSockets::Any), (false, true, true));
        // The read-back holds the dimension to it.
        let profiles = crate::profile::Profiles::builtin().unwrap();
        let host = crate::profile::HostPaths {
            state_dir: "/s".into(),
            runtime_dir: "/r".into(),
            extra_homes: Vec::new(),
        };
        let plan = crate::profile::plan(
            "agent",
            profiles.get("agent").unwrap(),
            Path::new("/w/1"),
            &host,
            &[],
            7,
        );
        let mut rb = Readback {
            status: SelfStatus {
                seccomp: 2,
                ..SelfStatus::default()
            },
            socketpair: true,
            ..Readback::default()
        };
        let (holds, detail) = rb.holds(Dimension::Syscalls, &plan, &Namespaces::default());
        assert!(!holds, "{detail}");
        assert!(detail.contains("socket(AF_UNIX) NOT refused"), "{detail}");
        rb.no_unix = true;
        let (holds, detail) = rb.holds(Dimension::Syscalls, &plan, &Namespaces::default());
        assert!(holds, "{detail}");
        assert!(
            detail.contains("UNIX sockets: pairs only (socket(AF_UNIX) refused, socketpair works)"),
            "{detail}"
        );
    }

    #[test]
    fn denied_paths_are_carved_out_of_the_readable_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for p in ["a/secret", "a/ok", "b"] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        let deny = root.join("a/secret");
        let allowed = carve(
            vec![root.to_path_buf()],
            &[deny.clone(), root.join("missing")],
        );
        assert!(allowed.contains(&root.join("b")));
        assert!(allowed.contains(&root.join("a/ok")));
        assert!(!allowed.iter().any(|a| deny.starts_with(a)), "{allowed:?}");
        assert_eq!(allowed.len(), 2, "{allowed:?}");
    }
}
