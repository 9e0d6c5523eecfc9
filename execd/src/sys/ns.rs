//! The containment setup's namespace, mount, host-name and terminal calls, typed: what
//! the shim and its init do to build a launch's view of the host. Each returns a
//! [`SysError`] naming the operation and its target.

use std::os::fd::OwnedFd;
use std::path::Path;

use nix::mount::{MsFlags, mount};
use nix::sched::CloneFlags;

use super::{SysError, SysResult};

/// A namespace a process can move its future (or, for PID, its children's) view into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    /// Applies to the children forked after it: the next one is PID 1 of the new namespace.
    Pid,
    Mount,
    Network,
    Ipc,
    Uts,
}

impl Namespace {
    pub fn as_str(self) -> &'static str {
        match self {
            Namespace::Pid => "pid",
            Namespace::Mount => "mount",
            Namespace::Network => "network",
            Namespace::Ipc => "ipc",
            Namespace::Uts => "uts",
        }
    }

    fn flag(self) -> CloneFlags {
        match self {
            Namespace::Pid => CloneFlags::CLONE_NEWPID,
            Namespace::Mount => CloneFlags::CLONE_NEWNS,
            Namespace::Network => CloneFlags::CLONE_NEWNET,
            Namespace::Ipc => CloneFlags::CLONE_NEWIPC,
            Namespace::Uts => CloneFlags::CLONE_NEWUTS,
        }
    }
}

/// `unshare(2)` one namespace.
pub fn unshare(ns: Namespace) -> SysResult<()> {
    nix::sched::unshare(ns.flag()).map_err(|e| SysError::on("unshare", ns.as_str(), e))
}

const NONE: Option<&str> = None;

/// Stops mount events propagating between this mount namespace and the host's.
pub fn make_mounts_private() -> SysResult<()> {
    mount(NONE, "/", NONE, MsFlags::MS_REC | MsFlags::MS_PRIVATE, NONE)
        .map_err(|e| SysError::on("mount --make-rprivate", "/", e))
}

/// A fresh `/proc` for a new PID namespace (no setuid, devices or exec).
pub fn mount_proc() -> SysResult<()> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), "/proc", Some("proc"), flags, NONE)
        .map_err(|e| SysError::on("mount proc", "/proc", e))
}

/// A tmpfs at `target` (no setuid, no devices; with `noexec` nothing on it can be
/// executed or mapped executable) with these mount options.
fn tmpfs(target: &Path, options: &str, noexec: bool, what: &'static str) -> SysResult<()> {
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if noexec {
        flags |= MsFlags::MS_NOEXEC;
    }
    mount(Some("tmpfs"), target, Some("tmpfs"), flags, Some(options))
        .map_err(|e| SysError::on(what, target.display(), e))
}

/// A private, world-writable (sticky) tmpfs of `size_bytes` at `target`; `noexec` where
/// the launch may execute only listed files.
pub fn mount_private_tmp(target: &Path, size_bytes: u64, noexec: bool) -> SysResult<()> {
    tmpfs(
        target,
        &format!("mode=1777,size={size_bytes}"),
        noexec,
        "mount tmpfs",
    )
}

/// The launch's workspace as a tmpfs bounded in size and inode count, owned by the
/// workload (`uid`, `gid`), mode 0700, at `target` (in the launch's own mount namespace);
/// `noexec` where the launch may execute only listed files.
pub fn mount_workspace(
    target: &Path,
    bytes: u64,
    inodes: u64,
    owner: (u32, u32),
    noexec: bool,
) -> SysResult<()> {
    let options = format!(
        "mode=0700,size={bytes},nr_inodes={inodes},uid={},gid={}",
        owner.0, owner.1
    );
    tmpfs(target, &options, noexec, "mount workspace tmpfs")
}

/// The automount points (`autofs`) in `mountinfo`, deepest last as listed.
pub fn automount_points(mountinfo: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (own, fs) = line.split_once(" - ")?;
            (fs.split(' ').next()? == "autofs")
                .then(|| own.split(' ').nth(4).map(unescape_mount_path))
                .flatten()
        })
        .collect()
}

/// Detaches every automount point of this mount namespace, with what is mounted below
/// it: a path looked up under one asks the host's automount daemon to act (resolve the
/// name, reach the server it names, mount), whoever looks, from whichever namespace.
/// Answers the points that could not be detached.
pub fn detach_automounts() -> Vec<(String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut failed = Vec::new();
    for point in automount_points(&info).into_iter().rev() {
        match nix::mount::umount2(point.as_str(), nix::mount::MntFlags::MNT_DETACH) {
            // Gone with an automount point above it.
            Ok(()) | Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => {}
            Err(e) => failed.push((point, e.to_string())),
        }
    }
    failed
}

/// Remounts every mount of this (private) mount namespace read-only, as a bind remount
/// that keeps its other flags, and `noexec` too where `noexec` is asked (nothing on it can
/// then be run or mapped executable, by the kernel or by a loader); returns the mounts
/// that would not, with why. Mount points come from /proc/self/mountinfo (its escapes
/// undone), parents before children.
pub fn remount_all_read_only(noexec: bool) -> Vec<(String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut failed = Vec::new();
    for line in info.lines() {
        let mut fields = line.split(' ');
        let (Some(point), Some(options)) = (fields.nth(4), fields.next()) else {
            continue;
        };
        let point = unescape_mount_path(point);
        let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
        if noexec {
            flags |= MsFlags::MS_NOEXEC;
        }
        // The mount's own flags, kept, as mountinfo lists them: asking the mount point
        // (statvfs) would set off an automount there, and hang on a server that is down.
        for (have, keep) in [
            ("nosuid", MsFlags::MS_NOSUID),
            ("nodev", MsFlags::MS_NODEV),
            ("noexec", MsFlags::MS_NOEXEC),
        ] {
            if options.split(',').any(|o| o == have) {
                flags |= keep;
            }
        }
        if let Err(e) = mount(NONE, point.as_str(), NONE, flags, NONE) {
            failed.push((point, e.to_string()));
        }
    }
    failed
}

/// Binds `path` (a directory with what is mounted below it, or one file) over itself,
/// read-only, nosuid and nodev but executable: after [`remount_all_read_only`] with
/// `noexec`, what may still be run or mapped executable.
pub fn bind_executable(path: &Path) -> SysResult<()> {
    mount(
        Some(path),
        path,
        NONE,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        NONE,
    )
    .map_err(|e| SysError::on("bind mount", path.display(), e))?;
    let flags = MsFlags::MS_BIND
        | MsFlags::MS_REMOUNT
        | MsFlags::MS_RDONLY
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NODEV;
    mount(NONE, path, NONE, flags, NONE)
        .map_err(|e| SysError::on("remount executable", path.display(), e))
}

/// A mount point as /proc/self/mountinfo writes it: space, tab, newline and backslash
/// as octal escapes.
/// The id (as /proc/self/mountinfo gives it) of the mount that `path` reaches now, with
/// no symlink on the way; None when that cannot be told. A mount listed in mountinfo
/// whose point reaches another one is covered: no path leads into it.
pub fn mount_id_at(path: &Path) -> Option<String> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
    use std::os::fd::AsRawFd;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    let fd = nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how).ok()?;
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .map(|id| id.trim().to_string())
}

pub fn unescape_mount_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
        {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Binds `source` over `target`.
pub fn bind(source: &Path, target: &Path) -> SysResult<()> {
    mount(Some(source), target, NONE, MsFlags::MS_BIND, NONE)
        .map_err(|e| SysError::on("bind mount", target.display(), e))
}

/// Hides a directory: an empty, read-only, mode-000 tmpfs over it.
pub fn mask_dir(target: &Path) -> SysResult<()> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY;
    mount(
        Some("tmpfs"),
        target,
        Some("tmpfs"),
        flags,
        Some("mode=000,size=4k"),
    )
    .map_err(|e| SysError::on("mask", target.display(), e))
}

/// Hides a file: `empty` (an empty mode-000 file) bound over it, read-only.
pub fn mask_file(empty: &Path, target: &Path) -> SysResult<()> {
    bind_read_only(empty, target)
}

/// A directory's mirror: a small tmpfs over `target` with the directory's owner and mode,
/// filled by the caller and then sealed ([`seal_read_only`]).
pub fn mount_mirror(target: &Path, mode: u32, owner: (u32, u32), inodes: u64) -> SysResult<()> {
    let options = format!(
        "mode={:o},uid={},gid={},size=8m,nr_inodes={inodes}",
        mode & 0o7777,
        owner.0,
        owner.1
    );
    tmpfs(target, &options, true, "mount mirror tmpfs")
}

/// What a sealed mount is: read-only, no setuid, no devices, nothing executable.
const SEALED: MsFlags = MsFlags::MS_RDONLY
    .union(MsFlags::MS_NOSUID)
    .union(MsFlags::MS_NODEV)
    .union(MsFlags::MS_NOEXEC);

/// Remounts the mount at `target` read-only, nosuid, nodev and noexec.
pub fn seal_read_only(target: &Path) -> SysResult<()> {
    mount(NONE, target, NONE, MsFlags::MS_REMOUNT | SEALED, NONE)
        .map_err(|e| SysError::on("remount read-only", target.display(), e))
}

/// Remounts the bind mount at `target` read-only, nosuid, nodev and noexec.
pub fn seal_bind(target: &Path) -> SysResult<()> {
    let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | SEALED;
    mount(NONE, target, NONE, flags, NONE)
        .map_err(|e| SysError::on("remount read-only", target.display(), e))
}

/// Binds `source` over `target`, read-only, nosuid, nodev and noexec.
pub fn bind_read_only(source: &Path, target: &Path) -> SysResult<()> {
    bind(source, target)?;
    seal_bind(target)
}

/// A new session with this process as its leader (no controlling terminal).
pub fn new_session() -> SysResult<()> {
    nix::unistd::setsid()
        .map(drop)
        .map_err(|e| SysError::new("setsid", e))
}

/// A new terminal of `rows` × `cols`: (master, slave).
pub fn open_pty(rows: u16, cols: u16) -> SysResult<(OwnedFd, OwnedFd)> {
    let size = nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    nix::pty::openpty(Some(&size), None)
        .map(|p| (p.master, p.slave))
        .map_err(|e| SysError::new("openpty", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automount_points_are_found_by_their_file_system() {
        let info = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    40 22 0:35 / /net rw,relatime shared:20 - autofs -hosts rw,fd=7\n\
                    41 22 0:36 / /home/a\\040b rw shared:21 - autofs systemd-1 rw,fd=9\n\
                    42 40 0:50 / /net/srv rw shared:22 - nfs4 srv:/ rw\n";
        assert_eq!(automount_points(info), ["/net", "/home/a b"]);
    }
}
