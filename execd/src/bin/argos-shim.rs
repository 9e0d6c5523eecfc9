//! argos-shim: the per-launch monitor execd starts (see `argos_execd::shim`).
#![deny(unsafe_code)]

fn main() {
    std::process::exit(argos_execd::shim::main());
}
