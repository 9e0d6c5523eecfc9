//! The directories where services and users keep UNIX sockets (`socket_dirs`: `/run`,
//! `/var/tmp`, `/dev/shm`), as an `inspect` launch sees them: not the host's directory,
//! whose sockets a read-only mount does not keep out of `connect()` (nor landlock before
//! its ABI 9), but a mirror taken when the launch is taken. A fresh tmpfs over each holds
//! the host's directories (owner and mode kept), its symlinks, and its regular files, each
//! bound read-only from the host's file; the only sockets in it are those the profile
//! names reachable, bound the same way. Everything is opened from the directory above it
//! by descriptor, never followed through a symlink, so a local user who swaps an entry
//! for a link while it is mirrored gains nothing.
//!
//! It fails closed: a socket made after the launch is taken is not in the mirror, a
//! socket or file that a host process renames or binds anew over a mirrored one takes the
//! host's name only (the bind goes with the old file, and the mirror's empty placeholder
//! is left), and past [`MIRROR_LIMIT`] entries the rest is simply not there.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::{AtFlags, OFlag, open, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};

use crate::sys::ns;

/// Most entries one launch's mirrors hold, all directories together: a host's `/run`
/// holds a few hundred to a few thousand; a local user who fills `/var/tmp` or `/dev/shm`
/// past it only hides the rest from the launch.
pub const MIRROR_LIMIT: usize = 10_000;

/// What mirroring one launch's socket directories left out, for the launch's notes.
#[derive(Debug, Default)]
pub struct Mirrored {
    /// Entries not mirrored because the limit was reached.
    pub over_limit: usize,
}

/// Mirrors each of `roots` (resolved through symlinks, none inside another) over itself,
/// leaving out what `denied` holds and every socket but those in `reachable` (all
/// resolved). Called in the launch's own mount namespace before anything else hides paths
/// under them.
pub fn mirror_all(
    roots: &[PathBuf],
    denied: &[PathBuf],
    reachable: &[PathBuf],
) -> Result<Mirrored, String> {
    let mut left = MIRROR_LIMIT;
    let mut out = Mirrored::default();
    for root in roots {
        mirror(root, denied, reachable, &mut left, &mut out)
            .map_err(|e| format!("mirroring {}: {e}", root.display()))?;
    }
    Ok(out)
}

fn mirror(
    root: &Path,
    denied: &[PathBuf],
    reachable: &[PathBuf],
    left: &mut usize,
    out: &mut Mirrored,
) -> Result<(), String> {
    let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    // The host's directory, held before the mirror covers it.
    let host = open(root, dir_flags, Mode::empty()).map_err(|e| e.to_string())?;
    let st = fstat(&host).map_err(|e| e.to_string())?;
    ns::mount_mirror(
        root,
        st.st_mode,
        (st.st_uid, st.st_gid),
        MIRROR_LIMIT as u64 + 16,
    )
    .map_err(|e| e.to_string())?;
    let mut todo: Vec<(OwnedFd, PathBuf)> = vec![(host, root.to_path_buf())];
    while let Some((dir, path)) = todo.pop() {
        for name in names(&dir)? {
            let at = path.join(&name);
            if denied.iter().any(|d| at.starts_with(d)) {
                continue;
            }
            let Ok(st) = fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
                continue;
            };
            let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
            let wanted = matches!(kind, SFlag::S_IFDIR | SFlag::S_IFREG | SFlag::S_IFLNK)
                || (kind == SFlag::S_IFSOCK && reachable.contains(&at));
            if !wanted {
                continue;
            }
            if *left == 0 {
                out.over_limit += 1;
                continue;
            }
            *left -= 1;
            match kind {
                SFlag::S_IFDIR => {
                    let Ok(child) = openat(&dir, name.as_os_str(), dir_flags, Mode::empty()) else {
                        continue;
                    };
                    let st = fstat(&child).map_err(|e| e.to_string())?;
                    make_dir(&at, &st)?;
                    todo.push((child, at));
                }
                SFlag::S_IFLNK => {
                    let Ok(target) = readlinkat(&dir, name.as_os_str()) else {
                        continue;
                    };
                    std::os::unix::fs::symlink(&target, &at)
                        .and_then(|()| {
                            std::os::unix::fs::lchown(&at, Some(st.st_uid), Some(st.st_gid))
                        })
                        .map_err(|e| format!("{}: {e}", at.display()))?;
                }
                _ => {
                    // A regular file or a reachable socket: the host's own, by descriptor.
                    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
                    let Ok(file) = openat(&dir, name.as_os_str(), flags, Mode::empty()) else {
                        continue;
                    };
                    let same = fstat(&file)
                        .is_ok_and(|now| now.st_mode & SFlag::S_IFMT.bits() == kind.bits());
                    if !same {
                        continue;
                    }
                    std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&at)
                        .map_err(|e| format!("{}: {e}", at.display()))?;
                    let source = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
                    ns::bind_read_only(&source, &at).map_err(|e| e.to_string())?;
                }
            }
        }
    }
    ns::seal_read_only(root).map_err(|e| e.to_string())
}

/// The names in a directory held by descriptor (read through its `/proc/self/fd` link,
/// which names that very directory).
fn names(dir: &OwnedFd) -> Result<Vec<OsString>, String> {
    let link = format!("/proc/self/fd/{}", dir.as_raw_fd());
    let entries = std::fs::read_dir(&link).map_err(|e| e.to_string())?;
    Ok(entries.flatten().map(|e| e.file_name()).collect())
}

/// A directory of the mirror with the host's owner and mode.
fn make_dir(at: &Path, st: &FileStat) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let e = |e: std::io::Error| format!("{}: {e}", at.display());
    std::fs::create_dir(at).map_err(e)?;
    std::os::unix::fs::chown(at, Some(st.st_uid), Some(st.st_gid)).map_err(e)?;
    std::fs::set_permissions(at, std::fs::Permissions::from_mode(st.st_mode & 0o7777)).map_err(e)
}
