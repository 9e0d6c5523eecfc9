//! Path checks shared by the launcher and the tests.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Whether a process with no matching uid or group can reach `path`: every ancestor
/// directory grants search (x) permission to others. An unprivileged daemon needs this
/// to exec its binary and reach its socket and state dir.
pub fn reachable_by_others(path: &Path) -> bool {
    // Directories that do not exist yet will be created searchable; only existing ones
    // can close the way.
    path.ancestors()
        .skip(1)
        .all(|dir| match std::fs::metadata(dir) {
            Ok(m) => m.permissions().mode() & 0o001 != 0,
            Err(_) => true,
        })
}

/// FNV-1a (64 bit) of some bytes: a stable short name for a path, the same in every build.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_hash_is_fnv1a() {
        assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn closed_ancestor_blocks() {
        let tmp = tempfile::tempdir().unwrap();
        let inner = tmp.path().join("a/b");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(reachable_by_others(&inner.join("file")));
        std::fs::set_permissions(tmp.path().join("a"), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        assert!(!reachable_by_others(&inner.join("file")));
    }
}
