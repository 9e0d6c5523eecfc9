//! Every syscall execd and its shim make, behind small safe functions with typed errors.
//! `raw` is the only module with `unsafe`; each block there carries a `// SAFETY:` note.

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
