//! Fetches the web UI's third-party code (xterm.js and its fit add-on, pinned with their
//! integrity hashes in `ui/deps/package-lock.json`) from the npm registry with `npm ci`,
//! and puts the files the gateway serves into OUT_DIR, where `http.rs` includes them. No
//! copy of their source is kept in the repository; no browser loads anything from
//! elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;

/// (file in node_modules, name in OUT_DIR)
const ASSETS: &[(&str, &str)] = &[
    ("@xterm/xterm/lib/xterm.js", "xterm.js"),
    ("@xterm/xterm/css/xterm.css", "xterm.css"),
    ("@xterm/xterm/LICENSE", "xterm-LICENSE.txt"),
    ("@xterm/addon-fit/lib/addon-fit.js", "addon-fit.js"),
];

fn main() {
    let deps = Path::new("ui/deps");
    for f in ["package.json", "package-lock.json"] {
        println!("cargo:rerun-if-changed={}", deps.join(f).display());
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let dir = out.join("ui-deps");
    std::fs::create_dir_all(&dir).expect("creating the UI deps dir");
    for f in ["package.json", "package-lock.json"] {
        std::fs::copy(deps.join(f), dir.join(f)).expect("copying the UI's package files");
    }
    let status = Command::new("npm")
        .args([
            "ci",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ])
        .current_dir(&dir)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "`npm ci` for the web UI's xterm.js failed ({s}): the npm registry must be reachable on the first build"
        ),
        Err(e) => panic!(
            "building the gateway needs npm, to fetch xterm.js for its web terminal ({e}); scripts/up and scripts/test install it (Debian: apt-get install npm)"
        ),
    }
    for (from, to) in ASSETS {
        std::fs::copy(dir.join("node_modules").join(from), out.join(to))
            .unwrap_or_else(|e| panic!("{from} is missing from the npm package: {e}"));
    }
}
