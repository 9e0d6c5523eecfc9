//! argos-execd: the only privileged Argos daemon. It runs commands under containment
//! (one shim per launch), tracks processes by verified identity and keeps the ledger.
//!
//! `unsafe` is denied crate-wide. It is allowed in `sys::raw` (raw syscalls, `fork`), and
//! at the three calls of `sys::raw`'s `unsafe fn`s whose soundness depends on the caller
//! (`fork_single_threaded` in the shim and its init, `close_fds_from` in the shim's
//! `main`), each function marked `#[allow(unsafe_code)]` and each block carrying a
//! `// SAFETY:` note. A test keeps that list closed.
#![deny(unsafe_code)]

pub mod access;
pub mod anchoring;
pub mod approval;
pub mod cgroup;
pub mod contain;
pub mod credentials;
pub mod edge;
pub mod gate;
pub mod launch;
pub mod ledger;
pub mod manager;
pub mod mcp;
pub mod output;
pub mod pool;
pub mod profile;
pub mod protocol;
pub mod quota;
pub mod service;
pub mod shim;
pub mod spec;
pub mod standing;
pub mod sys;
pub mod terminal;
pub mod uids;
pub mod wire;
