//! Structural rules that keep the trust boundaries honest.

use std::process::Command;

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// The crates `package` links in normal builds, one name per line (`cargo tree`).
fn normal_deps(package: &str) -> Vec<String> {
    let out = Command::new(cargo())
        .args([
            "tree", "--locked", "-p", package, "-e", "normal", "--prefix", "none", "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    let names: Vec<String> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    assert!(names.iter().any(|n| n == package), "{tree}");
    names
}

fn assert_links_none(package: &str, banned: &[&str]) {
    let deps = normal_deps(package);
    for b in banned {
        assert!(
            !deps.iter().any(|d| d == b),
            "{package} depends on {b}: {deps:?}"
        );
    }
}

/// The privileged daemon links no web stack, MCP or HTTP client: less code running as root.
#[test]
fn execd_dependency_tree_has_no_web_stack() {
    assert_links_none(
        "argos-execd",
        &[
            "axum",
            "tower-http",
            "rmcp",
            "reqwest",
            "hyper-rustls",
            "argon2",
        ],
    );
}

/// The risk classifier is pure: the fuzz target and anything else that classifies link no
/// runtime, transport or database. The shared plumbing holds no storage, and each daemon
/// links only the parts it uses.
#[test]
fn each_crate_links_only_what_it_uses() {
    assert_links_none(
        "argos-risk",
        &[
            "tokio",
            "tonic",
            "prost",
            "sqlx",
            "argos-proto",
            "argos-common",
        ],
    );
    assert_links_none("argos-store", &["tonic", "argos-proto", "argos-common"]);
    assert_links_none("argos-common", &["sqlx", "argos-risk", "argos-store"]);
    // (landlock and seccompiler come in through argos-common's `harden`: what gatewayd,
    // mcpd and jobd apply to themselves, not containment of anything they launch.)
    assert_links_none("argos-gatewayd", &["argos-risk", "caps"]);
    // mcpd keeps its own database (servers, pins), speaks MCP and HTTP as a client, and
    // holds no capability code: it spawns nothing (execd does).
    assert_links_none("argos-mcpd", &["argos-risk", "caps", "aws-lc-rs"]);
    // jobd keeps its own database (jobs) and runs everything through execd's gate: no
    // classifier, no capability code, no HTTP server.
    assert_links_none("argos-jobd", &["argos-risk", "caps", "axum"]);
    assert_links_none("argos-ctl", &["argos-risk", "argos-store", "sqlx"]);
}

/// Every crate but execd and the allocator policy forbids unsafe code outright; the
/// allocator policy's is its two allocator calls.
#[test]
fn unsafe_is_forbidden_outside_execd() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let alloc = std::fs::read_to_string(root.join("common/alloc/src/lib.rs")).unwrap();
    let blocks: Vec<&str> = alloc.split("unsafe {").skip(1).collect();
    assert_eq!(blocks.len(), 2, "argos-alloc: its two allocator calls only");
    for (b, call) in blocks.iter().zip(["libc::mallopt(", "libc::malloc_trim("]) {
        let body = &b[..b.find('}').unwrap()];
        assert!(
            body.trim_start().starts_with(call),
            "argos-alloc: an unsafe block other than {call}…: {body}"
        );
    }
    assert_eq!(alloc.matches("// SAFETY:").count(), 2);
    for krate in [
        "proto/src/lib.rs",
        "common/src/lib.rs",
        "common/risk/src/lib.rs",
        "common/store/src/lib.rs",
        "common/net/src/lib.rs",
        "common/exec-client/src/lib.rs",
        "gatewayd/src/main.rs",
        "mcpd/src/main.rs",
        "jobd/src/main.rs",
        "ctl/src/main.rs",
        "tests/src/lib.rs",
    ] {
        let text = std::fs::read_to_string(root.join(krate)).unwrap();
        assert!(
            text.contains("#![forbid(unsafe_code)]"),
            "{krate} must forbid unsafe code"
        );
    }
}

/// In execd, `unsafe` lives in `sys/raw.rs`, and beyond it only at the calls of raw's
/// `unsafe fn`s whose soundness the caller vouches for (the audit map is this list).
#[test]
fn execd_unsafe_is_confined_to_sys_raw_and_its_vouched_calls() {
    // File → the unsafe calls it may make (None: any: the raw module itself).
    let allowed: [(&str, Option<&[&str]>); 3] = [
        ("sys/raw.rs", None),
        (
            "shim/mod.rs",
            Some(&["raw::close_fds_from(3)", "raw::fork_single_threaded()"]),
        ),
        ("shim/tree.rs", Some(&["raw::fork_single_threaded()"])),
    ];
    for_each_execd_source(|rel, text| {
        let rule = allowed.iter().find(|(f, _)| *f == rel).map(|(_, r)| *r);
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let code = l.split("//").next().unwrap_or("");
            let block = code.contains("unsafe {");
            let other = code.contains("unsafe fn") || code.contains("unsafe impl");
            match rule {
                None if block || other || code.contains("allow(unsafe_code)") => {
                    panic!("unsafe outside the audit map: {rel}:{}", i + 1)
                }
                Some(Some(calls)) if block => {
                    assert!(
                        calls
                            .iter()
                            .any(|c| code.contains(&format!("unsafe {{ {c} }}"))),
                        "{rel}:{}: an unsafe block that is not a vouched call: {l}",
                        i + 1
                    );
                    assert!(
                        i > 0 && lines[i - 1].trim_start().starts_with("// SAFETY:"),
                        "{rel}:{}: no SAFETY note right above",
                        i + 1
                    );
                }
                Some(Some(_)) if other => {
                    panic!("{rel}:{}: unsafe fn outside sys/raw.rs", i + 1)
                }
                _ => {}
            }
        }
    });
}

/// execd answers errors from one edge (`edge.rs`): no other module builds a gRPC status.
#[test]
fn execd_builds_statuses_only_in_its_edge() {
    const MAKERS: [&str; 17] = [
        "Status::new(",
        "Status::ok(",
        "Status::cancelled(",
        "Status::unknown(",
        "Status::invalid_argument(",
        "Status::deadline_exceeded(",
        "Status::not_found(",
        "Status::already_exists(",
        "Status::permission_denied(",
        "Status::resource_exhausted(",
        "Status::failed_precondition(",
        "Status::aborted(",
        "Status::out_of_range(",
        "Status::unimplemented(",
        "Status::internal(",
        "Status::unavailable(",
        "Status::data_loss(",
    ];
    let mut found = Vec::new();
    for_each_execd_source(|rel, text| {
        if rel == "edge.rs" {
            return;
        }
        for (n, line) in text.lines().enumerate() {
            if MAKERS.iter().any(|m| line.contains(m)) {
                found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    });
    assert!(
        found.is_empty(),
        "statuses built outside edge.rs:\n{}",
        found.join("\n")
    );
}

/// Calls `f` with each execd source file's path (relative to `execd/src`) and text.
fn for_each_execd_source(mut f: impl FnMut(&str, &str)) {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../execd/src");
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let rel = p.strip_prefix(&src).unwrap().display().to_string();
            f(&rel, &text);
        }
    }
}

/// Every binary Argos builds answers `--help` with its usage and exit 0 — no panic, no
/// backtrace, nothing started — and `argosctl` also per subcommand.
#[test]
fn every_binary_answers_help() {
    let bins = [
        "argos-execd",
        "argos-shim",
        "argos-gatewayd",
        "argos-mcpd",
        "argos-jobd",
        "argosctl",
        "argos-bench",
        "argos-bench-exec",
        "argos-bench-gateway",
        "argos-bench-risk",
        "argos-bench-terminal",
        "argos-bench-mcp",
        "argos-probe",
    ];
    let mut runs: Vec<(String, Vec<&str>)> = bins
        .iter()
        .map(|b| (b.to_string(), vec!["--help"]))
        .collect();
    for sub in [
        "up",
        "status",
        "run",
        "approvals",
        "audit",
        "jobs",
        "tasks",
        "config-reference",
        "completions",
    ] {
        runs.push(("argosctl".into(), vec![sub, "--help"]));
    }
    for (bin, args) in runs {
        let out = Command::new(argos_tests::bin(&bin))
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{bin}: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{bin} {args:?}: {:?}\n{stdout}{stderr}",
            out.status
        );
        // clap (argosctl) says "Usage:", the others "usage:".
        assert!(
            stdout.to_lowercase().contains("usage:") && !stderr.contains("panicked"),
            "{bin} {args:?}:\n{stdout}{stderr}"
        );
    }
}
