//! Builds the web UI (`ui/`: TypeScript and Preact, with uPlot and xterm.js) into the
//! gateway's binary. Its npm packages are pinned with their integrity hashes in
//! `ui/package-lock.json` and installed by `npm ci` into OUT_DIR (never into the source
//! tree, and no copy of them is kept in the repository); `tsc` checks the types, Vite
//! bundles the page; `ui_assets.rs` in OUT_DIR then lists every built file for `http.rs`
//! to serve. No browser loads anything from elsewhere.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The UI's sources, copied into OUT_DIR to be built there.
const SOURCES: &[&str] = &[
    "package.json",
    "package-lock.json",
    "tsconfig.json",
    "vite.config.ts",
    "index.html",
    "src",
];

/// The packages whose code ships in the bundle: their licences are served beside it.
const SHIPPED: &[&str] = &["preact", "uplot", "@xterm/xterm", "@xterm/addon-fit"];

fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).expect("creating a UI source dir");
        for entry in std::fs::read_dir(from).expect("reading a UI source dir") {
            let entry = entry.expect("reading a UI source dir");
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("copying {}: {e}", from.display()));
    }
}

/// Runs a step of the UI's build, failing the gateway's build with its output.
fn run(dir: &Path, program: &str, args: &[&str], envs: &[(&str, &Path)], what: &str) {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(dir);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    match cmd.output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "{what}: cannot run {program} ({e}); building the gateway needs Node.js and npm for its web UI; scripts/up and scripts/test install them (Debian: apt-get install nodejs npm)"
        ),
    }
}

fn mime(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("html") => "text/html; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("woff2") => "font/woff2",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn main() {
    let ui = Path::new("ui");
    for f in SOURCES {
        println!("cargo:rerun-if-changed={}", ui.join(f).display());
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let src = out.join("ui-src");
    let dist = out.join("ui-dist");
    // Sources afresh each time (a file removed from `src` must not linger); node_modules
    // is kept while the lock file is the one it was installed from.
    let _ = std::fs::remove_dir_all(src.join("src"));
    std::fs::create_dir_all(&src).expect("creating the UI build dir");
    for f in SOURCES {
        copy_tree(&ui.join(f), &src.join(f));
    }
    let lock = std::fs::read(ui.join("package-lock.json")).expect("reading ui/package-lock.json");
    let installed = src.join("node_modules/.argos-installed-lock");
    if std::fs::read(&installed).ok().as_deref() != Some(&lock[..]) {
        run(
            &src,
            "npm",
            &[
                "ci",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ],
            &[],
            "`npm ci` for the web UI (the npm registry must be reachable on the first build)",
        );
        std::fs::write(&installed, &lock).expect("recording the installed lock file");
    }
    run(
        &src,
        "node",
        &["node_modules/typescript/bin/tsc", "-p", "."],
        &[],
        "type-checking the web UI (tsc)",
    );
    run(
        &src,
        "node",
        &[
            "node_modules/vite/bin/vite.js",
            "build",
            "--logLevel",
            "warn",
        ],
        &[("ARGOS_UI_OUT", &dist)],
        "building the web UI (vite build)",
    );

    // The shipped packages' licences, served as /assets/LICENSES.txt.
    let mut licenses = String::new();
    for pkg in SHIPPED {
        let dir = src.join("node_modules").join(pkg);
        let file = ["LICENSE", "LICENSE.md", "LICENSE.txt"]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{pkg} ships no LICENSE file"));
        let text = std::fs::read_to_string(&file).expect("reading a licence");
        let _ = write!(licenses, "==== {pkg} ====\n\n{text}\n\n");
    }
    std::fs::write(dist.join("assets/LICENSES.txt"), licenses).expect("writing LICENSES.txt");

    // ui_assets.rs: the page, and every file under /assets/ with its type.
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dist.join("assets")).expect("reading the built assets") {
        let p = entry.expect("reading the built assets").path();
        files.push(p);
    }
    files.sort();
    let mut rs = String::from("/// The built page (its scripts and styles are under /assets/).\n");
    let _ = writeln!(
        rs,
        "pub const INDEX_HTML: &str = include_str!({:?});",
        dist.join("index.html")
    );
    rs.push_str("/// `(path, content type, bytes)` of every built asset.\npub const ASSETS: &[(&str, &str, &[u8])] = &[\n");
    for p in &files {
        let name = p.file_name().and_then(|n| n.to_str()).expect("asset name");
        let _ = writeln!(
            rs,
            "    (\"/assets/{name}\", {:?}, include_bytes!({:?})),",
            mime(p),
            p
        );
    }
    rs.push_str("];\n");
    std::fs::write(out.join("ui_assets.rs"), rs).expect("writing ui_assets.rs");
}
