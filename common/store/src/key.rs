//! A daemon's secret key: 32 random bytes in a file of its private state dir (mode 0600),
//! made at its first start and kept across restarts. What the daemon must later recognise
//! as its own is tagged with HMAC-SHA256 under it — its audit rows, the gateway's device
//! cookies — each use in a domain of its own, so a tag made for one is worth nothing in
//! another. Whoever can rewrite the daemon's database but not read this file cannot make
//! a tag the daemon accepts. Secrets a daemon keeps in its database (mcpd's upstream
//! headers and environment values) are sealed under it with XChaCha20-Poly1305, a key per
//! domain derived from it, a random nonce each time: the database file alone reveals none.

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

use hmac::{Hmac, Mac as _};
use sha2::Sha256;

const LEN: usize = 32;

/// A daemon's secret key.
pub struct Key {
    bytes: [u8; LEN],
    /// Made by this process (the file did not exist): nothing can have been tagged with it.
    new: bool,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(…)")
    }
}

/// Why a key file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("key file {path}: {why}")]
    Unusable { path: String, why: String },
}

impl Key {
    /// Reads the key at `path`, or makes one there (0600, written whole before it is
    /// used). A file open to group or others, owned by another uid, or not 32 bytes
    /// long is refused, not replaced: a key that may have leaked or been swapped is
    /// not trusted.
    pub fn load_or_create(path: &Path) -> Result<Key, KeyError> {
        let shown = path.display().to_string();
        let io = |source| KeyError::Io {
            path: shown.clone(),
            source,
        };
        let unusable = |why: String| KeyError::Unusable {
            path: shown.clone(),
            why,
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(mut f) => {
                let mut k = [0u8; LEN];
                getrandom::fill(&mut k).map_err(|e| unusable(format!("random source: {e}")))?;
                f.write_all(&k).map_err(io)?;
                f.sync_all().map_err(io)?;
                return Ok(Key {
                    bytes: k,
                    new: true,
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
        let meta = std::fs::symlink_metadata(path).map_err(io)?;
        if !meta.is_file() {
            return Err(unusable("not a regular file".into()));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(unusable(format!(
                "mode {:o} is open to group or others (want 600)",
                meta.mode() & 0o777
            )));
        }
        let me = nix::unistd::geteuid().as_raw();
        if meta.uid() != me {
            return Err(unusable(format!(
                "owned by uid {}, not this daemon's {me}",
                meta.uid()
            )));
        }
        let bytes = std::fs::read(path).map_err(io)?;
        let k: [u8; LEN] = bytes
            .try_into()
            .map_err(|b: Vec<u8>| unusable(format!("{} bytes, want {LEN}", b.len())))?;
        Ok(Key {
            bytes: k,
            new: false,
        })
    }

    /// A key from its bytes (as a tool that read the file would have it).
    pub fn from_bytes(bytes: [u8; LEN]) -> Key {
        Key { bytes, new: false }
    }

    /// Whether this process made the key (its file did not exist before).
    pub fn is_new(&self) -> bool {
        self.new
    }

    fn hmac(&self, domain: &str, data: &[u8]) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.bytes).expect("HMAC takes any key length");
        m.update(domain.as_bytes());
        m.update(&[0]);
        m.update(data);
        m
    }

    /// The tag of `data` in `domain`, as lowercase hex.
    pub fn tag(&self, domain: &str, data: &[u8]) -> String {
        hex::encode(self.hmac(domain, data).finalize().into_bytes())
    }

    /// The AEAD key of `domain`: HMAC of the domain under this key, so no two uses share
    /// one and none is the raw key.
    fn aead(&self, domain: &str) -> chacha20poly1305::XChaCha20Poly1305 {
        use chacha20poly1305::KeyInit as _;
        let k = self
            .hmac(&format!("aead:{domain}"), b"")
            .finalize()
            .into_bytes();
        chacha20poly1305::XChaCha20Poly1305::new(&k)
    }

    /// `plaintext` sealed in `domain`: base64 of a random 24-byte nonce and the ciphertext
    /// with its tag. `aad` binds it to where it is kept (a record's id and field), so a
    /// sealed value moved elsewhere does not open.
    pub fn seal(&self, domain: &str, aad: &[u8], plaintext: &[u8]) -> String {
        use base64::Engine as _;
        use chacha20poly1305::aead::{Aead as _, Payload};
        let mut nonce = [0u8; 24];
        getrandom::fill(&mut nonce).expect("the kernel's random numbers");
        let sealed = self
            .aead(domain)
            .encrypt(
                (&nonce).into(),
                Payload {
                    msg: plaintext,
                    aad,
                },
            )
            .expect("sealing cannot fail for inputs this size");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        base64::engine::general_purpose::STANDARD.encode(out)
    }

    /// What `seal` sealed with the same domain and `aad`; `None` if it was altered, made
    /// under another key, domain or `aad`, or is not a sealed value at all.
    pub fn open(&self, domain: &str, aad: &[u8], sealed: &str) -> Option<Vec<u8>> {
        use base64::Engine as _;
        use chacha20poly1305::aead::{Aead as _, Payload};
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .ok()?;
        if bytes.len() < 24 + 16 {
            return None;
        }
        let (nonce, ct) = bytes.split_at(24);
        self.aead(domain)
            .decrypt(nonce.into(), Payload { msg: ct, aad })
            .ok()
    }

    /// Whether `tag` (hex) is the tag of `data` in `domain`; compared in constant time.
    pub fn verify(&self, domain: &str, data: &[u8], tag: &str) -> bool {
        let Ok(bytes) = hex::decode(tag) else {
            return false;
        };
        self.hmac(domain, data).verify_slice(&bytes).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn sealed_values_open_only_with_their_key_domain_and_place() {
        let k = Key::from_bytes([7; LEN]);
        let other = Key::from_bytes([8; LEN]);
        let s = k.seal(
            "mcp-secret",
            b"server:a/header:Authorization",
            b"Bearer s3cret",
        );
        assert!(!s.contains("s3cret"));
        assert_eq!(
            k.open("mcp-secret", b"server:a/header:Authorization", &s)
                .as_deref(),
            Some(&b"Bearer s3cret"[..])
        );
        // A fresh nonce each time: the same secret never seals the same.
        assert_ne!(
            s,
            k.seal(
                "mcp-secret",
                b"server:a/header:Authorization",
                b"Bearer s3cret"
            )
        );
        assert_eq!(
            other.open("mcp-secret", b"server:a/header:Authorization", &s),
            None
        );
        assert_eq!(k.open("audit", b"server:a/header:Authorization", &s), None);
        assert_eq!(
            k.open("mcp-secret", b"server:b/header:Authorization", &s),
            None
        );
        let mut bytes = s.into_bytes();
        bytes[40] ^= 1;
        let altered = String::from_utf8(bytes).unwrap();
        assert_eq!(
            k.open("mcp-secret", b"server:a/header:Authorization", &altered),
            None
        );
        assert_eq!(k.open("mcp-secret", b"", "not base64!"), None);
        assert_eq!(k.open("mcp-secret", b"", "AAAA"), None);
    }

    #[test]
    fn made_once_kept_and_refused_when_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.key");
        let k = Key::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = Key::load_or_create(&path).unwrap();
        let t = k.tag("audit", b"row");
        assert_eq!(
            t,
            again.tag("audit", b"row"),
            "the same key after a restart"
        );
        assert!(again.verify("audit", b"row", &t));
        assert!(!again.verify("device", b"row", &t), "domains are apart");
        assert!(!again.verify("audit", b"rox", &t));
        assert!(!again.verify("audit", b"row", "zz"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = Key::load_or_create(&path).unwrap_err().to_string();
        assert!(e.contains("open to group or others"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, b"short").unwrap();
        let e = Key::load_or_create(&path).unwrap_err().to_string();
        assert!(e.contains("5 bytes, want 32"), "{e}");
    }
}
