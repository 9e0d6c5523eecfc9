//! What an unprivileged daemon (gatewayd, mcpd, jobd) does to itself before its runtime
//! starts, so that its least privilege holds under any supervisor (`argosctl up`, a shell,
//! another init), not only under its systemd unit:
//!
//! - `no_new_privs`: nothing it runs can gain privilege (and seccomp needs it);
//! - seccomp, on every thread: an allow list (`syscalls.rs`: systemd's `@system-service`
//!   set, the one their units allow too, without `@privileged`, `@resources` and io_uring;
//!   any other call is ENOSYS, as one the kernel does not know, so a C library falls back
//!   where it can); then, refused by name with EPERM, what a compromised daemon would
//!   need to escape: running a program, tracing or reading another process, mounts,
//!   namespaces (and a `clone` into a new user namespace), kernel modules, kexec,
//!   keyrings, BPF, perf, the clock, swap, reboot; and every x32 syscall, which would walk
//!   around both lists;
//! - landlock: the filesystem readable, writable only under the daemon's own state and
//!   runtime dirs, executable nowhere.
//!
//! Each daemon reports what was applied in `Status`. The whole test suite runs the
//! daemons confined so (as root, `argosctl up` separates them), so a call the allow list
//! misses fails a test, not a request in production first.

use std::collections::BTreeMap;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;

/// The syscalls an unprivileged daemon is refused.
const DENIED: &[i64] = &[
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    libc::SYS_unshare,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_userfaultfd,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_syslog,
    libc::SYS_quotactl,
    libc::SYS_open_by_handle_at,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// Applies all three to this process (landlock to this thread and the threads it starts
/// later: call it before any other thread exists). `writable`: the daemon's own dirs.
/// Answers what was applied, in words, for `Status`.
pub fn apply(writable: &[PathBuf]) -> Result<Vec<String>, String> {
    let mut applied = Vec::new();
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("no_new_privs: {e}"))?;
    applied.push("no_new_privs".to_string());
    applied.push(landlock(writable)?);
    for f in filters()? {
        seccompiler::apply_filter_all_threads(&f)
            .map_err(|e| format!("loading the seccomp filter: {e}"))?;
    }
    applied.push(format!(
        "seccomp: an allow list of {} syscalls (any other is ENOSYS); {} refused by name with EPERM (running a program, ptrace, mounts, namespaces, modules, keyrings, bpf, perf, clock, reboot); x32 refused",
        allowed().len(),
        DENIED.len()
    ));
    Ok(applied)
}

fn landlock(writable: &[PathBuf]) -> Result<String, String> {
    let e = |e: landlock::RulesetError| format!("landlock: {e}");
    let abi = ABI::V5;
    let read = AccessFs::from_read(abi) & !AccessFs::Execute;
    let write = AccessFs::from_all(abi) & !AccessFs::Execute;
    let existing: Vec<&PathBuf> = writable.iter().filter(|p| p.exists()).collect();
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(e)?
        .create()
        .map_err(e)?
        .add_rules(path_beneath_rules(["/"], read))
        .map_err(e)?
        .add_rules(path_beneath_rules(&existing, write))
        .map_err(e)?
        .restrict_self()
        .map_err(e)?;
    let dirs: Vec<String> = existing.iter().map(|p| p.display().to_string()).collect();
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => format!(
            "landlock: read-only but for {}; nothing executable",
            dirs.join(", ")
        ),
        RulesetStatus::PartiallyEnforced => format!(
            "landlock (partly, an older kernel): read-only but for {}; nothing executable",
            dirs.join(", ")
        ),
        RulesetStatus::NotEnforced => "landlock: not available on this kernel".to_string(),
    })
}

/// Every syscall of the allow list, for this architecture.
fn allowed() -> Vec<i64> {
    let mut all = crate::syscalls::ALLOWED.to_vec();
    all.extend([libc::SYS_socket, libc::SYS_socketpair]);
    #[cfg(target_arch = "x86_64")]
    all.extend_from_slice(crate::syscalls::ALLOWED_X86_64);
    all
}

fn filters() -> Result<Vec<BpfProgram>, String> {
    let err = |e: seccompiler::BackendError| format!("seccomp: {e}");
    // First the allow list (the others are loaded through `seccomp`, which it allows):
    // anything not on it is ENOSYS.
    let mut allow: BTreeMap<i64, Vec<SeccompRule>> =
        allowed().into_iter().map(|nr| (nr, Vec::new())).collect();
    allow.insert(libc::SYS_socket, families(FAMILIES)?);
    allow.insert(libc::SYS_socketpair, families(&[libc::AF_UNIX])?);
    let allow = SeccompFilter::new(
        allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        SeccompAction::Allow,
        ARCH,
    )
    .map_err(err)?;
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    // A thread is fine; a new user namespace (a full capability set inside it) is not.
    deny.insert(libc::SYS_clone, vec![new_user_namespace()?]);
    let eperm = SeccompFilter::new(
        deny,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        ARCH,
    )
    .map_err(err)?;
    // Loaded in this order; where two answer an errno, the later one's is the answer, so
    // a call refused by name is EPERM.
    let mut out: Vec<BpfProgram> = vec![
        allow.try_into().map_err(err)?,
        eperm.try_into().map_err(err)?,
        clone3_enosys()?,
    ];
    #[cfg(target_arch = "x86_64")]
    out.push(no_x32());
    Ok(out)
}

/// The address families the daemons open sockets in: Unix (the gRPC sockets), IP (the
/// gateway's listener, MCP servers, webhooks) and netlink (the C library's interface
/// queries). AF_ALG, AF_VSOCK, AF_PACKET and the rest are ENOSYS.
const FAMILIES: &[libc::c_int] = &[
    libc::AF_UNIX,
    libc::AF_INET,
    libc::AF_INET6,
    libc::AF_NETLINK,
];

/// Rules matching a `socket` or `socketpair` whose family (argument 0) is one of these.
fn families(allowed: &[libc::c_int]) -> Result<Vec<SeccompRule>, String> {
    let err = |e: seccompiler::BackendError| format!("seccomp: {e}");
    allowed
        .iter()
        .map(|f| {
            SeccompRule::new(vec![
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *f as u64)
                    .map_err(err)?,
            ])
            .map_err(err)
        })
        .collect()
}

/// The rule matching a `clone` or `unshare` whose flags (argument 0) ask for a new user
/// namespace.
pub fn new_user_namespace() -> Result<SeccompRule, String> {
    let err = |e: seccompiler::BackendError| format!("seccomp: {e}");
    let newuser = libc::CLONE_NEWUSER as u64;
    SeccompRule::new(vec![
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(newuser),
            newuser,
        )
        .map_err(err)?,
    ])
    .map_err(err)
}

/// `clone3` answered ENOSYS: its flags are behind a pointer no filter can read, so the C
/// library falls back to `clone`, whose flags a filter sees.
pub fn clone3_enosys() -> Result<BpfProgram, String> {
    let err = |e: seccompiler::BackendError| format!("seccomp: {e}");
    SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        ARCH,
    )
    .map_err(err)?
    .try_into()
    .map_err(err)
}

/// Refuses every x32 syscall (number | 0x40000000, same audit arch as x86_64): a deny
/// list names x86_64 numbers, so x32 would walk around it on kernels that enable x32.
/// Written by hand because the filter compiler matches numbers, not ranges.
#[cfg(target_arch = "x86_64")]
pub fn no_x32() -> BpfProgram {
    use seccompiler::sock_filter;
    const LD_W_ABS: u16 = 0x20; // BPF_LD (0x00) | BPF_W (0x00) | BPF_ABS (0x20)
    const JEQ_K: u16 = 0x15; // BPF_JMP (0x05) | BPF_JEQ (0x10) | BPF_K (0x00)
    const JGE_K: u16 = 0x35; // BPF_JMP (0x05) | BPF_JGE (0x30) | BPF_K (0x00)
    const RET_K: u16 = 0x06; // BPF_RET (0x06) | BPF_K (0x00)
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        op(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        op(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
        op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        op(JGE_K, 0, 1, X32_SYSCALL_BIT),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}
