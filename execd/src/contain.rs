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

use crate::spec::{
    Dimension, ExecSources, FileLocks, Ipc, NetworkMode, Plan, Rlimits, UnixSockets, WorkspaceLimit,
};
use crate::sys::proc::{SelfStatus, namespace, self_status};
use crate::sys::raw::{Probe, probe};

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

/// What a launch's filters refuse beyond the deny list, as its plan says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilterRules {
    /// No IP or packet sockets (the host's network namespace, to look at only).
    pub no_inet: bool,
    pub unix: UnixSockets,
    pub exec: ExecSources,
    pub ipc: Ipc,
    pub locks: FileLocks,
}

impl FilterRules {
    pub fn of(plan: &Plan) -> FilterRules {
        FilterRules {
            no_inet: plan.network_mode == NetworkMode::HostLocal,
            unix: plan.unix_sockets,
            exec: plan.exec_sources,
            ipc: plan.ipc,
            locks: plan.file_locks,
        }
    }
}

/// What a lock refused by [`FileLocks::None`] answers: "no locks available", what a file
/// system without locks (NFS mounted `nolock`) answers and flock(2), fcntl(2) and
/// lockf(3) document, so a program that locks takes it as locks being unavailable there
/// (sqlite: the database is busy) rather than as a permission fault of its own.
pub const NO_LOCKS: i32 = libc::ENOLCK;

/// The kernel clears this flag from a System V `*ctl` command before reading it (the
/// 64-bit layout of the buffer), so a rule compares the command without it.
const IPC_64: u64 = 0x100;

/// Compiles the syscall filters: the deny list (EPERM), argument rules (new user
/// namespaces, TIOCSTI/TIOCLINUX, a persona other than the default, vsock sockets), and clone3 → ENOSYS so libc falls back to clone, whose
/// flags a filter can see; with `no_inet` no IP or packet sockets, with `unix` pairs
/// only no `socket(AF_UNIX)` ([`NO_UNIX_SOCKET`]), with files-only exec no `execveat` or
/// `memfd_create`, with read-only IPC no use or change of an IPC object (EPERM), with no
/// locks no file lock ([`NO_LOCKS`]). Built before fork; loaded last, just before exec.
/// (A 32-bit call — the `ipc` multiplexer among them — fails the filters' architecture
/// check and kills the process; an x32 one is EPERM.)
pub fn seccomp_filters(rules: FilterRules) -> Result<Vec<BpfProgram>, String> {
    let FilterRules {
        no_inet,
        unix,
        exec,
        ipc,
        locks,
    } = rules;
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
    let cond = |arg: u8, op: SeccompCmpOp, v: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, v).map_err(err)
    };
    let rule = |conds: Vec<SeccompCondition>| SeccompRule::new(conds).map_err(err);
    // Reason: a memfd is on an internal mount no landlock rule can name (landlock lets
    // every access to such a file through), and execveat runs a descriptor, however it
    // was opened: the execute right is only judged on a path.
    if exec == ExecSources::FilesOnly {
        deny.insert(libc::SYS_execveat, Vec::new());
        deny.insert(libc::SYS_memfd_create, Vec::new());
    }
    // Reason: the IPC namespace may be the host's (inspect's, so that ipcs shows its
    // objects): a message sent or received, a semaphore moved, shared memory written, an
    // object made, removed or changed is a change of the host's. Looking stays: the stat
    // and info commands, GETVAL and the like, a read-only attach.
    if ipc == Ipc::ReadOnly {
        for nr in [
            libc::SYS_msgsnd,
            libc::SYS_msgrcv,
            libc::SYS_semop,
            libc::SYS_semtimedop,
            libc::SYS_mq_timedsend,
            libc::SYS_mq_timedreceive,
            libc::SYS_mq_notify,
            libc::SYS_mq_unlink,
        ] {
            deny.insert(nr, Vec::new());
        }
        deny.insert(
            libc::SYS_shmat,
            vec![rule(vec![cond(
                2,
                SeccompCmpOp::MaskedEq(libc::SHM_RDONLY as u64),
                0,
            )?])?],
        );
        // A new object: IPC_CREAT in the flags, or the key IPC_PRIVATE (always new).
        let creates = |flags_arg: u8| -> Result<Vec<SeccompRule>, String> {
            let creat = libc::IPC_CREAT as u64;
            Ok(vec![
                rule(vec![cond(0, SeccompCmpOp::Eq, libc::IPC_PRIVATE as u64)?])?,
                rule(vec![cond(flags_arg, SeccompCmpOp::MaskedEq(creat), creat)?])?,
            ])
        };
        deny.insert(libc::SYS_msgget, creates(1)?);
        deny.insert(libc::SYS_semget, creates(2)?);
        deny.insert(libc::SYS_shmget, creates(2)?);
        let o_creat = libc::O_CREAT as u64;
        deny.insert(
            libc::SYS_mq_open,
            vec![rule(vec![cond(
                1,
                SeccompCmpOp::MaskedEq(o_creat),
                o_creat,
            )?])?],
        );
        // The commands that change an object, each call's own (their numbers overlap:
        // SHM_LOCK is MSG_STAT's), compared without IPC_64.
        let changes = |cmd_arg: u8, cmds: &[i32]| -> Result<Vec<SeccompRule>, String> {
            let mask = 0xffff_ffff & !IPC_64;
            cmds.iter()
                .map(|c| {
                    rule(vec![cond(
                        cmd_arg,
                        SeccompCmpOp::MaskedEq(mask),
                        *c as u64,
                    )?])
                })
                .collect()
        };
        deny.insert(
            libc::SYS_msgctl,
            changes(1, &[libc::IPC_RMID, libc::IPC_SET])?,
        );
        deny.insert(
            libc::SYS_semctl,
            changes(
                2,
                &[libc::IPC_RMID, libc::IPC_SET, libc::SETVAL, libc::SETALL],
            )?,
        );
        deny.insert(
            libc::SYS_shmctl,
            changes(
                1,
                &[
                    libc::IPC_RMID,
                    libc::IPC_SET,
                    libc::SHM_LOCK,
                    libc::SHM_UNLOCK,
                ],
            )?,
        );
    }
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
    // Reason: a lock needs only a descriptor open for reading, so a lock on a file the
    // host's processes lock too (a world-readable one) blocks them: a change of the
    // host's. Asking whether a file is locked (F_GETLK, /proc/locks) stays.
    if locks == FileLocks::None {
        let set = [
            libc::F_SETLK,
            libc::F_SETLKW,
            libc::F_OFD_SETLK,
            libc::F_OFD_SETLKW,
            libc::F_SETLEASE,
        ];
        let no_locks = SeccompFilter::new(
            BTreeMap::from([
                (libc::SYS_flock, Vec::new()),
                (
                    libc::SYS_fcntl,
                    set.iter()
                        .map(|c| rule(vec![cond(1, SeccompCmpOp::Eq, *c as u64)?]))
                        .collect::<Result<_, _>>()?,
                ),
            ]),
            SeccompAction::Allow,
            SeccompAction::Errno(NO_LOCKS as u32),
            ARCH,
        )
        .map_err(err)?;
        filters.push(no_locks.try_into().map_err(err)?);
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
    carve(vec![PathBuf::from("/")], denied).0
}

/// [`readable_roots`] and the directories split on the way, which keep no right of their
/// own but listing (an entry made in one later is on no rule: unreadable).
pub fn readable_view(denied: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    carve(vec![PathBuf::from("/")], denied)
}

/// Removes each denied path from the trees in `allowed`, keeping everything else, and
/// returns the directories split to do so. A denied path that does not exist (yet) is
/// carved down to its deepest existing directory, whose entries are granted one by one:
/// one made there later, the denied one included, is not.
fn carve(mut allowed: Vec<PathBuf>, denied: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut split = Vec::new();
    for deny in denied {
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
            let Ok(entries) = std::fs::read_dir(&cur) else {
                // Not a directory (nothing can be under it) or gone: as it was.
                allowed.push(cur);
                break;
            };
            // A symlink is left out: a rule on it would grant its target (which may
            // be what is carved out); landlock judges the path it resolves to, which
            // is granted, or not, as itself.
            for e in entries.flatten() {
                if e.path() != next && !e.file_type().is_ok_and(|t| t.is_symlink()) {
                    allowed.push(e.path());
                }
            }
            split.push(cur);
            if std::fs::symlink_metadata(&next).is_err() {
                break;
            }
            cur = next;
        }
    }
    // What a later denied path's siblings granted inside an earlier one.
    allowed.retain(|a| !denied.iter().any(|d| a.starts_with(d)));
    split.retain(|a| !denied.iter().any(|d| a.starts_with(d)));
    split.sort();
    split.dedup();
    (allowed, split)
}

/// The readable trees without the files of the programs' directories (`dirs`, resolved
/// through symlinks, those that exist), and those directories, whose entries may still be
/// listed: a file there is readable only where a rule for the executable files grants
/// it.
pub fn without_program_files(
    readable: Vec<PathBuf>,
    dirs: &[PathBuf],
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut real: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .filter(|d| d.is_dir())
        .collect();
    real.sort();
    real.dedup();
    (carve(readable, &real).0, real)
}

/// The readable trees without `/dev`'s files but `kept` (the trees of those that exist,
/// less what `denied` carves out of them), and the directories whose entries may still
/// be listed: `/dev`'s whole tree and those split on the way to it. The plain
/// [`DEVICES`] keep their own rule.
pub fn without_device_files(
    readable: Vec<PathBuf>,
    mut listable: Vec<PathBuf>,
    kept: &[PathBuf],
    denied: &[PathBuf],
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let dev = PathBuf::from("/dev");
    let (mut readable, split) = carve(readable, std::slice::from_ref(&dev));
    let kept: Vec<PathBuf> = kept
        .iter()
        .filter(|k| k.starts_with(&dev) && *k != &dev && k.exists())
        .cloned()
        .collect();
    let (kept, kept_split) = carve(kept, denied);
    readable.extend(kept);
    listable.extend(split);
    listable.extend(kept_split);
    listable.push(dev);
    listable.sort();
    listable.dedup();
    (readable, listable)
}

/// Device files every program expects to read and write.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// Applies the filesystem policy: read (and execute) the host minus denied paths, list
/// the entries of `listable` directories and the `program_dirs` (their files unreadable
/// but where granted), write
/// only the writable paths. With `executable`, only those files may be executed (and
/// read: the readable and writable trees are then not executable). Returns what the
/// kernel enforces.
pub fn apply_landlock(
    readable: &[PathBuf],
    listable: &[PathBuf],
    program_dirs: &[PathBuf],
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
        .add_rules(path_beneath_rules(existing(listable), AccessFs::ReadDir))
        .map_err(e)?
        .add_rules(path_beneath_rules(
            existing(program_dirs),
            AccessFs::ReadDir,
        ))
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
        program_dirs: (executable.is_some() && !program_dirs.is_empty())
            .then_some(program_dirs.len() as u32),
    })
}

/// The mounts in `mountinfo` (the text of /proc/self/mountinfo) that are not `noexec`,
/// but those at or under one of `places` and those reached by no path: covered by a
/// mount over their root (the host stacks some, `/dev/pts` twice), or below a mount
/// that is (what a container's manager mounted in `/proc` or `/run`, under the launch's
/// own `/proc` and mirror), as `reaches` tells: the id of the mount a path leads to now
/// — at most four named.
fn executable_mounts_but(
    mountinfo: &str,
    places: &[PathBuf],
    reaches: impl Fn(&Path) -> Option<String>,
) -> Vec<String> {
    let mounts: Vec<(&str, &str, PathBuf, &str)> = mountinfo
        .lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let (id, parent) = (f.next()?, f.next()?);
            let point = f.nth(2)?;
            let point = PathBuf::from(crate::sys::ns::unescape_mount_path(point));
            Some((id, parent, point, f.next()?))
        })
        .collect();
    let covered = |id: &str, point: &Path| {
        mounts
            .iter()
            .any(|(_, parent, p, _)| *parent == id && p == point)
    };
    mounts
        .iter()
        .filter(|(id, _, point, options)| {
            !places.iter().any(|p| point.starts_with(p))
                && !options.split(',').any(|o| o == "noexec")
                && !covered(id, point)
                // Unknown (a symlink now on its way): counted, never assumed covered.
                && reaches(point).is_none_or(|at| at == *id)
        })
        .map(|(_, _, point, _)| point.display().to_string())
        .take(4)
        .collect()
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
    /// Where the programs' directories keep only their listed files readable: how many
    /// directories.
    #[serde(default)]
    pub program_dirs: Option<u32>,
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
    /// Whether `memfd_create` and `execveat` are refused with EPERM (tried after seccomp).
    #[serde(default)]
    pub exec_files_only: bool,
    /// Whether sending a message and removing a queue are refused with EPERM while a
    /// queue's status may still be asked (tried after seccomp, on no queue).
    #[serde(default)]
    pub ipc_read_only: bool,
    /// Whether `flock` and `fcntl(F_SETLK)` answer [`NO_LOCKS`] while `fcntl(F_GETLK)`
    /// is let through (tried after seccomp, on no descriptor).
    #[serde(default)]
    pub no_locks: bool,
    /// Where written files must not be executable: whether every writable path is on a
    /// `noexec` mount (None: not asked by the plan).
    #[serde(default)]
    pub writable_noexec: Option<bool>,
    /// Where only listed files may run and nothing else be mapped executable: the mounts
    /// outside the places left executable that are not `noexec`, at most a few (None:
    /// not asked by the plan).
    #[serde(default)]
    pub exec_elsewhere: Option<Vec<String>>,
}

impl Readback {
    pub fn take(
        landlock_status: LandlockStatus,
        rlimits: Option<&Rlimits>,
        cgroup_marker: Option<&str>,
        workspace: Option<&WorkspaceLimit>,
        noexec: Option<&[PathBuf]>,
        executable_places: Option<&[PathBuf]>,
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
            exec_files_only: exec_files_only(),
            ipc_read_only: ipc_read_only(),
            no_locks: no_locks(),
            writable_noexec: noexec.map(|paths| {
                paths.iter().all(|p| {
                    nix::sys::statvfs::statvfs(p)
                        .is_ok_and(|v| v.flags().contains(nix::sys::statvfs::FsFlags::ST_NOEXEC))
                })
            }),
            exec_elsewhere: executable_places.map(|places| {
                let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
                executable_mounts_but(&info, places, crate::sys::ns::mount_id_at)
            }),
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
                self.landlock.fs_enforced
                    && self.namespaces.mnt != host.mnt
                    && (!plan.execute_listed_only || self.writable_noexec == Some(true))
                    && (plan.program_dirs.is_empty() || self.landlock.program_dirs.is_some())
                    && (plan.library_dirs.is_empty()
                        || self.exec_elsewhere.as_ref().is_some_and(Vec::is_empty)),
                format!(
                    "landlock fully enforced: {}; private mounts: {}; abstract sockets and signals scoped: {}{}{}{}{}",
                    self.landlock.fs_enforced,
                    self.namespaces.mnt != host.mnt,
                    self.landlock.scoped,
                    match self.landlock.executables {
                        Some(n) => format!("; executable: only {n} listed files"),
                        None => String::new(),
                    },
                    match self.landlock.program_dirs {
                        Some(n) =>
                            format!("; programs' directories ({n}): only the listed files readable"),
                        None if !plan.program_dirs.is_empty() => {
                            "; programs' directories NOT kept from a loader".to_string()
                        }
                        None => String::new(),
                    },
                    match self.writable_noexec {
                        Some(true) => "; written files not executable (noexec)",
                        Some(false) => "; written files NOT kept from being executable",
                        None => "",
                    },
                    match &self.exec_elsewhere {
                        Some(m) if m.is_empty() =>
                            "; nothing mapped executable but from the programs' and libraries' directories and the listed files (other mounts noexec)".to_string(),
                        Some(m) => format!(
                            "; files outside the programs' and libraries' directories NOT kept from a loader (executable: {})",
                            m.join(", ")
                        ),
                        None if !plan.library_dirs.is_empty() =>
                            "; files outside the programs' and libraries' directories NOT kept from a loader (no mount namespace)".to_string(),
                        None => String::new(),
                    }
                ),
            ),
            Dimension::ProcessTree => (
                !self.namespaces.pid.is_empty() && self.namespaces.pid != host.pid,
                "own PID namespace with a reaping init".into(),
            ),
            // The host's network namespace holds its abstract UNIX sockets too (a bus,
            // a display, a runtime's): only landlock's scope (ABI 6, Linux 6.12) keeps a
            // launch from connecting to them, so without it the view is not read-only.
            Dimension::Network if plan.network_mode == NetworkMode::HostLocal => (
                self.no_inet && self.landlock.scoped,
                format!(
                    "host network namespace, to look at only: sockets of AF_INET, AF_INET6 and AF_PACKET {}; the host's abstract UNIX sockets {}",
                    if self.no_inet {
                        "refused"
                    } else {
                        "NOT refused"
                    },
                    if self.landlock.scoped {
                        "out of reach (landlock scope)"
                    } else {
                        "NOT out of reach (landlock without scopes: Linux before 6.12)"
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
                let refused = |ok: bool| if ok { "refused" } else { "NOT refused" };
                let mut holds = s.seccomp == 2;
                let mut detail = format!("seccomp filter mode {}", s.seccomp);
                if plan.unix_sockets == UnixSockets::PairsOnly {
                    holds &= self.no_unix;
                    detail.push_str(&format!(
                        "; UNIX sockets: pairs only (socket(AF_UNIX) {}, socketpair {})",
                        refused(self.no_unix),
                        if self.socketpair { "works" } else { "fails" }
                    ));
                }
                if plan.exec_sources == ExecSources::FilesOnly {
                    holds &= self.exec_files_only;
                    detail.push_str(&format!(
                        "; programs from files only (memfd_create and execveat {})",
                        refused(self.exec_files_only)
                    ));
                }
                if plan.ipc == Ipc::ReadOnly {
                    holds &= self.ipc_read_only;
                    detail.push_str(&format!(
                        "; IPC read-only (sending, receiving, attaching writable, creating, removing, changing {})",
                        refused(self.ipc_read_only)
                    ));
                }
                if plan.file_locks == FileLocks::None {
                    holds &= self.no_locks;
                    detail.push_str(&format!(
                        "; file locks: none (flock, fcntl's locks and leases {})",
                        refused(self.no_locks)
                    ));
                }
                (holds, detail)
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

/// Whether `memfd_create` and `execveat` are refused with EPERM (the seccomp rules of
/// files-only exec; unfiltered, the first makes a memfd, closed at once, and the second
/// finds no descriptor).
fn exec_files_only() -> bool {
    use nix::errno::Errno;
    probe(Probe::MemfdCreate) == Err(Errno::EPERM)
        && probe(Probe::ExecveatNothing) == Err(Errno::EPERM)
}

/// Whether the rules of read-only IPC hold, tried on no queue (id -1): sending and
/// removing are refused with EPERM, asking for a queue's status reaches the kernel
/// (EINVAL: there is none).
fn ipc_read_only() -> bool {
    use nix::errno::Errno;
    probe(Probe::MsgSnd { id: -1 }) == Err(Errno::EPERM)
        && probe(Probe::MsgCtl {
            id: -1,
            cmd: libc::IPC_RMID | IPC_64 as i32,
        }) == Err(Errno::EPERM)
        && probe(Probe::MsgCtl {
            id: -1,
            cmd: libc::IPC_STAT,
        }) == Err(Errno::EINVAL)
}

/// Whether locks answer [`NO_LOCKS`], tried on no descriptor, while asking about one
/// reaches the kernel (EBADF).
fn no_locks() -> bool {
    use nix::errno::Errno;
    let no_locks = Errno::from_raw(NO_LOCKS);
    probe(Probe::FlockNothing) == Err(no_locks)
        && probe(Probe::FcntlNothing { cmd: libc::F_SETLK }) == Err(no_locks)
        && probe(Probe::FcntlNothing { cmd: libc::F_GETLK }) == Err(Errno::EBADF)
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
        assert_eq!(seccomp_filters(FilterRules::default()).unwrap().len(), base);
        let pairs = FilterRules {
            no_inet: true,
            unix: UnixSockets::PairsOnly,
            ..FilterRules::default()
        };
        assert_eq!(seccomp_filters(pairs).unwrap().len(), base + 1);
        let inspect = FilterRules {
            no_inet: true,
            exec: ExecSources::FilesOnly,
            ipc: Ipc::ReadOnly,
            locks: FileLocks::None,
            ..FilterRules::default()
        };
        assert_eq!(seccomp_filters(inspect).unwrap().len(), base + 1);
    }

    /// The filters of a pairs-only profile, loaded on a thread of its own (seccomp and
    /// no_new_privs hold per thread): `socket(AF_UNIX)` is refused as a missing family,
    /// a socket pair and an IP socket (the agent's network namespace has nothing to reach)
    /// still work, and the read-back says so. Without the rule, the same thread makes the
    /// socket.
    #[test]
    fn pairs_only_refuses_unix_sockets_but_not_socket_pairs() {
        let probe = |unix: UnixSockets| {
            let filters = seccomp_filters(FilterRules {
                unix,
                ..FilterRules::default()
            })
            .unwrap();
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

    /// The filters of inspect, loaded on a thread of their own: no memfd and no execveat;
    /// the IPC objects looked at but not used, made, removed or changed (IPC_64 or not);
    /// no lock taken, while asking about one works. Without the settings, the same calls
    /// reach the kernel. Every call names no object, or one this test made and removes.
    #[test]
    fn inspect_filters_refuse_memory_exec_ipc_changes_and_locks() {
        use nix::errno::Errno;
        type Answer = Result<i64, Errno>;
        type Answers = Vec<(&'static str, Answer)>;
        let key = 0x4172_0000 | (std::process::id() as i32 & 0xffff);
        let probe_all = |rules: FilterRules| -> Answers {
            let filters = seccomp_filters(rules).unwrap();
            std::thread::spawn(move || {
                set_no_new_privs().unwrap();
                load_seccomp(&filters).unwrap();
                let mut out: Answers = vec![
                    ("memfd_create", probe(Probe::MemfdCreate)),
                    ("execveat", probe(Probe::ExecveatNothing)),
                    ("msgsnd", probe(Probe::MsgSnd { id: -1 })),
                    (
                        "msgctl IPC_RMID",
                        probe(Probe::MsgCtl {
                            id: -1,
                            cmd: libc::IPC_RMID,
                        }),
                    ),
                    (
                        "msgctl IPC_SET|IPC_64",
                        probe(Probe::MsgCtl {
                            id: -1,
                            cmd: libc::IPC_SET | IPC_64 as i32,
                        }),
                    ),
                    (
                        "msgctl IPC_STAT|IPC_64",
                        probe(Probe::MsgCtl {
                            id: -1,
                            cmd: libc::IPC_STAT | IPC_64 as i32,
                        }),
                    ),
                    (
                        "msgctl MSG_STAT",
                        probe(Probe::MsgCtl {
                            id: -1,
                            cmd: libc::MSG_STAT,
                        }),
                    ),
                    ("msgget", probe(Probe::MsgGet { key, flags: 0 })),
                    (
                        "msgget IPC_CREAT",
                        probe(Probe::MsgGet {
                            key,
                            flags: libc::IPC_CREAT | libc::IPC_EXCL | 0o600,
                        }),
                    ),
                    (
                        "msgget IPC_PRIVATE",
                        probe(Probe::MsgGet {
                            key: libc::IPC_PRIVATE,
                            flags: 0o600,
                        }),
                    ),
                    ("shmat", probe(Probe::ShmAt { id: -1, flags: 0 })),
                    (
                        "shmat SHM_RDONLY",
                        probe(Probe::ShmAt {
                            id: -1,
                            flags: libc::SHM_RDONLY,
                        }),
                    ),
                    ("flock", probe(Probe::FlockNothing)),
                ];
                for (name, cmd) in [
                    ("F_SETLK", libc::F_SETLK),
                    ("F_SETLKW", libc::F_SETLKW),
                    ("F_OFD_SETLK", libc::F_OFD_SETLK),
                    ("F_OFD_SETLKW", libc::F_OFD_SETLKW),
                    ("F_SETLEASE", libc::F_SETLEASE),
                    ("F_GETLK", libc::F_GETLK),
                ] {
                    out.push((name, probe(Probe::FcntlNothing { cmd })));
                }
                out
            })
            .join()
            .unwrap()
        };
        // Whatever a call made despite its rule is removed here, unfiltered.
        let tidy = |answers: &Answers| {
            for (name, r) in answers {
                if name.starts_with("msgget I")
                    && let Ok(id) = r
                {
                    let _ = probe(Probe::MsgCtl {
                        id: *id as i32,
                        cmd: libc::IPC_RMID,
                    });
                }
            }
        };
        let inspect = FilterRules {
            exec: ExecSources::FilesOnly,
            ipc: Ipc::ReadOnly,
            locks: FileLocks::None,
            ..FilterRules::default()
        };
        let held = probe_all(inspect);
        tidy(&held);
        let open = probe_all(FilterRules::default());
        tidy(&open);
        let eperm = Err(Errno::EPERM);
        let enolck = Err(Errno::ENOLCK);
        let want: &[(&str, Answer, Option<Answer>)] = &[
            // (call, under inspect's rules, unfiltered where it is known)
            ("memfd_create", eperm, None),
            ("execveat", eperm, Some(Err(Errno::EBADF))),
            ("msgsnd", eperm, Some(Err(Errno::EINVAL))),
            ("msgctl IPC_RMID", eperm, Some(Err(Errno::EINVAL))),
            ("msgctl IPC_SET|IPC_64", eperm, Some(Err(Errno::EINVAL))),
            (
                "msgctl IPC_STAT|IPC_64",
                Err(Errno::EINVAL),
                Some(Err(Errno::EINVAL)),
            ),
            (
                "msgctl MSG_STAT",
                Err(Errno::EINVAL),
                Some(Err(Errno::EINVAL)),
            ),
            ("msgget", Err(Errno::ENOENT), Some(Err(Errno::ENOENT))),
            ("msgget IPC_CREAT", eperm, None),
            ("msgget IPC_PRIVATE", eperm, None),
            ("shmat", eperm, Some(Err(Errno::EINVAL))),
            (
                "shmat SHM_RDONLY",
                Err(Errno::EINVAL),
                Some(Err(Errno::EINVAL)),
            ),
            ("flock", enolck, Some(Err(Errno::EBADF))),
            ("F_SETLK", enolck, Some(Err(Errno::EBADF))),
            ("F_SETLKW", enolck, Some(Err(Errno::EBADF))),
            ("F_OFD_SETLK", enolck, Some(Err(Errno::EBADF))),
            ("F_OFD_SETLKW", enolck, Some(Err(Errno::EBADF))),
            ("F_SETLEASE", enolck, Some(Err(Errno::EBADF))),
            ("F_GETLK", Err(Errno::EBADF), Some(Err(Errno::EBADF))),
        ];
        for (call, under_inspect, unfiltered) in want {
            let got = |answers: &Answers| answers.iter().find(|(n, _)| n == call).unwrap().1;
            assert_eq!(got(&held), *under_inspect, "{call} under inspect's rules");
            if let Some(u) = unfiltered {
                assert_eq!(got(&open), *u, "{call} unfiltered");
            } else {
                assert_ne!(got(&open), eperm, "{call} unfiltered");
            }
        }
        // The read-back holds the dimension to it.
        let profiles = crate::profile::Profiles::builtin().unwrap();
        let host = crate::profile::HostPaths {
            state_dir: "/s".into(),
            runtime_dir: "/r".into(),
            extra_homes: Vec::new(),
        };
        let plan = crate::profile::plan(
            "inspect",
            profiles.get("inspect").unwrap(),
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
            exec_files_only: true,
            ipc_read_only: true,
            ..Readback::default()
        };
        let (holds, detail) = rb.holds(Dimension::Syscalls, &plan, &Namespaces::default());
        assert!(!holds, "{detail}");
        assert!(
            detail.contains("file locks: none (flock, fcntl's locks and leases NOT refused)"),
            "{detail}"
        );
        rb.no_locks = true;
        let (holds, detail) = rb.holds(Dimension::Syscalls, &plan, &Namespaces::default());
        assert!(holds, "{detail}");
        assert!(
            detail.contains("programs from files only (memfd_create and execveat refused)"),
            "{detail}"
        );
        // And the filesystem to written files not being executable, and the programs'
        // directories kept from a loader.
        rb.landlock = LandlockStatus {
            fs_enforced: true,
            scoped: true,
            executables: Some(3),
            program_dirs: Some(5),
        };
        rb.namespaces.mnt = "mnt:[1]".into();
        rb.writable_noexec = Some(false);
        let (holds, detail) = rb.holds(Dimension::Filesystem, &plan, &Namespaces::default());
        assert!(!holds, "{detail}");
        assert!(
            detail.contains("written files NOT kept from being executable"),
            "{detail}"
        );
        rb.writable_noexec = Some(true);
        // A loader could still map a program outside the programs' directories.
        let (holds, detail) = rb.holds(Dimension::Filesystem, &plan, &Namespaces::default());
        assert!(!holds, "{detail}");
        assert!(detail.contains("NOT kept from a loader (no mount namespace)"));
        rb.exec_elsewhere = Some(vec!["/opt".into()]);
        let (holds, detail) = rb.holds(Dimension::Filesystem, &plan, &Namespaces::default());
        assert!(
            !holds && detail.contains("NOT kept from a loader (executable: /opt)"),
            "{detail}"
        );
        rb.exec_elsewhere = Some(Vec::new());
        let (holds, detail) = rb.holds(Dimension::Filesystem, &plan, &Namespaces::default());
        assert!(holds, "{detail}");
        assert!(
            detail.contains("programs' directories (5): only the listed files readable")
                && detail.contains("written files not executable (noexec)")
                && detail.contains("other mounts noexec"),
            "{detail}"
        );
        // The host's network, to look at only: no IP or packet socket, and none of the
        // host's abstract sockets reached (a kernel without landlock's scope cannot say so).
        rb.no_inet = true;
        let (holds, detail) = rb.holds(Dimension::Network, &plan, &Namespaces::default());
        assert!(holds, "{detail}");
        rb.landlock.scoped = false;
        let (holds, detail) = rb.holds(Dimension::Network, &plan, &Namespaces::default());
        assert!(
            !holds && detail.contains("abstract UNIX sockets NOT out of reach"),
            "{detail}"
        );
    }

    /// Every mount but the places left executable must be noexec for the view to hold.
    #[test]
    fn only_the_places_left_executable_are_not_noexec() {
        let info = "\
22 1 0:21 / / ro,noexec,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:22 / /usr/bin ro,nosuid,nodev,relatime - ext4 /dev/sda1 rw
24 22 0:23 / /usr/lib/x86_64-linux-gnu ro,nosuid,nodev,relatime - ext4 /dev/sda1 rw
25 24 0:23 / /usr/lib/x86_64-linux-gnu/utempter/utempter ro,nosuid,nodev,noexec - tmpfs x rw
26 22 0:24 / /tmp rw,nosuid,nodev,noexec - tmpfs tmpfs rw
27 22 0:25 / /var/cache/tool\\040one/prog ro,nosuid,nodev - ext4 /dev/sda1 rw
28 22 0:26 / /dev/pts rw,relatime - devpts devpts rw
29 28 0:27 / /dev/pts rw,noexec,relatime - devpts devpts rw
";
        let places: Vec<PathBuf> = ["/usr/bin", "/usr/lib/x86_64-linux-gnu"]
            .iter()
            .map(PathBuf::from)
            .collect();
        // Each path reaches its own mount (none is hidden below another).
        let own = |p: &Path| {
            info.lines()
                .find(|l| {
                    l.split(' ').nth(4).map(crate::sys::ns::unescape_mount_path)
                        == Some(p.display().to_string())
                })
                .and_then(|l| l.split(' ').next())
                .map(str::to_string)
        };
        assert_eq!(
            executable_mounts_but(info, &places, own),
            ["/var/cache/tool one/prog"]
        );
        let mut with_file = places.clone();
        with_file.push(PathBuf::from("/var/cache/tool one/prog"));
        assert!(executable_mounts_but(info, &with_file, own).is_empty());
        let root_exec = info.replacen("ro,noexec,relatime shared:1", "ro,relatime", 1);
        assert_eq!(executable_mounts_but(&root_exec, &with_file, own), ["/"]);
        // Under a container's manager (systemd-nspawn): what it mounted in /proc and /run
        // lies below the launch's own /proc and the /run mirror, reached by no path (each
        // path leads to the launch's mount there). Those are not counted; one that a path
        // still leads to, or whose path cannot be told, is.
        let nspawn = format!(
            "{info}\
40 22 0:30 / /run rw,nosuid,nodev - tmpfs tmpfs rw
41 40 0:31 /os-release /run/host/os-release ro,nosuid,nodev - ext4 /dev/sda1 rw
42 22 0:32 / /proc rw,nosuid,nodev - proc proc rw
43 42 0:32 /sys/kernel/random/boot_id /proc/sys/kernel/random/boot_id ro,nosuid,nodev - tmpfs t rw
50 40 0:40 / /run ro,nosuid,nodev,noexec - tmpfs mirror rw
51 42 0:41 / /proc rw,nosuid,nodev,noexec - proc proc rw
"
        );
        let reaches = |hidden: bool| {
            move |p: &Path| match p.to_str() {
                Some("/run/host/os-release") if hidden => Some("50".to_string()),
                Some("/proc/sys/kernel/random/boot_id") if hidden => Some("51".to_string()),
                Some("/run/host/os-release") => Some("41".to_string()),
                Some("/run") => Some("50".to_string()),
                Some("/proc") => Some("51".to_string()),
                Some("/proc/sys/kernel/random/boot_id") => None,
                _ => own(p),
            }
        };
        assert!(
            executable_mounts_but(&nspawn, &with_file, reaches(true)).is_empty(),
            "{:?}",
            executable_mounts_but(&nspawn, &with_file, reaches(true))
        );
        assert_eq!(
            executable_mounts_but(&nspawn, &with_file, reaches(false)),
            ["/run/host/os-release", "/proc/sys/kernel/random/boot_id"]
        );
    }

    /// The programs' directories keep their entries but not their files; a symlink is
    /// never a rule (it would grant its target).
    #[test]
    fn program_files_are_carved_out_and_symlinks_grant_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(tmp.path()).unwrap();
        let root = real.as_path();
        for p in ["usr/bin", "usr/lib/x", "usr/share", "etc"] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
        std::os::unix::fs::symlink("../bin", root.join("usr/lib/progs")).unwrap();
        let (readable, listable) = without_program_files(
            vec![root.to_path_buf()],
            &[root.join("bin"), root.join("usr/bin"), root.join("absent")],
        );
        assert_eq!(listable, vec![root.join("usr/bin")]);
        assert!(!readable.iter().any(|r| r.ends_with("bin")), "{readable:?}");
        assert!(
            !readable.iter().any(|r| r.ends_with("progs")),
            "{readable:?}"
        );
        for kept in ["etc", "usr/lib", "usr/share"] {
            assert!(
                readable.iter().any(|r| r.ends_with(kept)),
                "{kept}: {readable:?}"
            );
        }
    }

    #[test]
    fn denied_paths_are_carved_out_of_the_readable_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for p in ["a/secret", "a/ok", "b"] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        let deny = root.join("a/secret");
        let (allowed, split) = carve(
            vec![root.to_path_buf()],
            &[deny.clone(), root.join("missing")],
        );
        assert!(allowed.contains(&root.join("b")));
        assert!(allowed.contains(&root.join("a/ok")));
        assert!(!allowed.iter().any(|a| deny.starts_with(a)), "{allowed:?}");
        assert_eq!(allowed.len(), 2, "{allowed:?}");
        assert_eq!(split, [root.to_path_buf(), root.join("a")]);
    }

    /// A denied path that does not exist yet carves its deepest existing directory, so
    /// what is made there later (the secret itself, or anything else) is on no rule; a
    /// path inside one denied earlier is not granted back by a later carve.
    #[test]
    fn a_denied_path_yet_to_be_made_leaves_its_directory_granted_entry_by_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for p in ["home/u/notes", "home/u/.ssh/k", "home/v", "etc"] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        let (allowed, split) = carve(
            vec![root.to_path_buf()],
            &[
                root.join("home/u/.docker/config.json"),
                root.join("home/u/.ssh/k"),
                root.join("home/u/.ssh"),
            ],
        );
        assert_eq!(
            split,
            [root.to_path_buf(), root.join("home"), root.join("home/u")]
        );
        let mut allowed = allowed;
        allowed.sort();
        assert_eq!(
            allowed,
            [
                root.join("etc"),
                root.join("home/u/notes"),
                root.join("home/v")
            ]
        );
    }
}
