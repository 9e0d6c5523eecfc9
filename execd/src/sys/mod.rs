//! The syscalls that need care, behind small functions with typed errors: `raw` holds
//! every `unsafe` one (each block with a `// SAFETY:` note; an `unsafe fn` there says in
//! its `# Safety` section what its caller vouches for), `ns` the containment setup's
//! namespaces, mounts, host name, session and terminals, `proc` process identity. Plain
//! fd, pipe, poll and socket calls use nix's safe wrappers where they happen.

pub mod ns;
pub mod proc;
pub mod raw;

/// A failed system call: which operation, on what, and the OS error.
#[derive(Debug, thiserror::Error)]
#[error("{op}{}: {source}", .what.as_ref().map(|w| format!(" {w}")).unwrap_or_default())]
pub struct SysError {
    pub op: &'static str,
    pub what: Option<String>,
    #[source]
    pub source: std::io::Error,
}

impl SysError {
    pub fn new(op: &'static str, source: impl Into<std::io::Error>) -> SysError {
        SysError {
            op,
            what: None,
            source: source.into(),
        }
    }

    pub fn on(
        op: &'static str,
        what: impl std::fmt::Display,
        source: impl Into<std::io::Error>,
    ) -> SysError {
        SysError {
            op,
            what: Some(what.to_string()),
            source: source.into(),
        }
    }
}

pub type SysResult<T> = Result<T, SysError>;
