//! argos-execd: the only privileged Argos daemon. It runs commands under containment
//! (one shim per launch), tracks processes by verified identity and keeps the ledger.
//!
//! `unsafe` is denied crate-wide and allowed in `sys::raw` only, where each block carries
//! a `// SAFETY:` note.
#![deny(unsafe_code)]

pub mod access;
pub mod approval;
pub mod cgroup;
pub mod contain;
pub mod edge;
pub mod gate;
pub mod launch;
pub mod ledger;
pub mod manager;
pub mod output;
pub mod pool;
pub mod profile;
pub mod protocol;
pub mod service;
pub mod shim;
pub mod spec;
pub mod sys;
pub mod terminal;
pub mod wire;
