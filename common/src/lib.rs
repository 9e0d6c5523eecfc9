//! Plumbing every Argos daemon shares: configuration, logging, peer authorization,
//! principal metadata, and gRPC over Unix sockets. No daemon logic lives here.
#![forbid(unsafe_code)]

pub mod backoff;
pub mod config;
pub mod connect;
pub mod daemon;
pub mod grpc;
pub mod harden;
pub mod names;
pub mod paths;
pub mod peer;
pub mod principal;
mod syscalls;
pub mod telemetry;
pub use argos_vocab as vocab;

/// The Argos version every daemon reports.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
