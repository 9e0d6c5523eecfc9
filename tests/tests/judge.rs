//! An outside judge for the classifier: every command the corpus labels `read_only`, and
//! commands generated from them (re-optioned with each option their model lists, wrapped)
//! that the classifier calls `read_only`, run under `strace -f` in a scratch sandbox
//! (bubblewrap: the host read-only, its own /tmp, no network, nobody's uid, working in
//! `/`). None may execute a program it was not judged on, open a file of the host's for
//! writing, or change anything of the host's (unlink, rename, mkdir, chmod, chown,
//! truncate, times, mount, signals to processes not its own). Its own /tmp (which is also
//! its HOME) is its to use, as an `inspect` launch's private /tmp and workspace are: a
//! spill file of `sort`, `top`'s settings directory. Joined commands are generated too:
//! the classifier must never call them `read_only`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use argos_risk::{Class, Command as Cmd, classify};

const CORPUS: &str = include_str!("../../common/risk/src/corpus.tsv");

/// How long one command may run (followers such as `tail -f` are stopped then).
const LIMIT: Duration = Duration::from_secs(3);

/// Syscalls that change something, whatever their arguments.
const CHANGING: &[&str] = &[
    "unlink",
    "unlinkat",
    "rename",
    "renameat",
    "renameat2",
    "mkdir",
    "mkdirat",
    "rmdir",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "chmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "lchown",
    "fchownat",
    "truncate",
    "mknod",
    "mknodat",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "setxattr",
    "lsetxattr",
    "removexattr",
    "lremovexattr",
    "mount",
    "umount2",
    "pivot_root",
    "swapon",
    "swapoff",
    "reboot",
    "sethostname",
    "setdomainname",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "init_module",
    "finit_module",
    "delete_module",
];

/// Syscalls the judge reads the arguments of.
const WATCHED: &[&str] = &[
    "execve", "execveat", "open", "openat", "openat2", "creat", "kill", "tkill", "tgkill",
];

fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ]
    .iter()
    .map(|d| Path::new(d).join(name))
    .find(|p| p.is_file())
}

/// One observed command: what it broke, if anything.
struct Observed {
    /// The command's program was seen to start.
    started: bool,
    violations: Vec<String>,
}

/// Runs `argv` under strace in the scratch sandbox and judges the trace.
fn observe(argv: &[String], allowed: &BTreeSet<String>, out: &Path) -> Observed {
    let trace = out.join("trace");
    let _ = std::fs::remove_file(&trace);
    let calls: Vec<&str> = WATCHED.iter().chain(CHANGING).copied().collect();
    let mut cmd = Command::new("bwrap");
    cmd.args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args(["--tmpfs", "/tmp", "--bind"])
        .arg(out)
        .arg("/tmp/.judge")
        .args([
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ])
        .args(["--unshare-all", "--die-with-parent", "--new-session"])
        .args(["--uid", "65534", "--gid", "65534", "--chdir", "/"])
        .args(["--setenv", "HOME", "/tmp", "--setenv", "LC_ALL", "C.UTF-8"])
        .args(["--setenv", "PAGER", "cat", "--setenv", "GIT_PAGER", "cat"])
        .args([
            "--",
            "strace",
            "-f",
            "-qq",
            "-s",
            "256",
            "-o",
            "/tmp/.judge/trace",
            "-e",
        ])
        // `?`: a call this strace does not know is not an error (`fchmodat2` is newer
        // than some).
        .arg(format!(
            "trace={}",
            calls
                .iter()
                .map(|c| format!("?{c}"))
                .collect::<Vec<_>>()
                .join(",")
        ))
        .arg("--")
        .args(argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let mut child = cmd
        .spawn()
        .expect("bwrap (installed by scripts/install-test-tools)");
    let deadline = Instant::now() + LIMIT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    Observed {
        started: text
            .lines()
            .next()
            .is_some_and(|l| l.contains("execve(") && l.ends_with("= 0")),
        violations: judge_trace(&text, allowed),
    }
}

/// What a trace shows the command did that a read-only command must not.
fn judge_trace(text: &str, allowed: &BTreeSet<String>) -> Vec<String> {
    let mut pids: BTreeSet<i64> = BTreeSet::new();
    for line in text.lines() {
        if let Some(pid) = line.split_whitespace().next().and_then(|p| p.parse().ok()) {
            pids.insert(pid);
        }
    }
    let mut bad = Vec::new();
    for line in text.lines() {
        let Some((_, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        let Some((call, args)) = rest.split_once('(') else {
            continue;
        };
        let first_string = || args.split('"').nth(1).unwrap_or("");
        // The command's own /tmp (and HOME), as a launch's private /tmp and workspace.
        let own = |p: &str| p == "/tmp" || (p.starts_with("/tmp/") && !p.contains(".."));
        match call {
            "execve" | "execveat" => {
                let path = first_string();
                let base = path.rsplit('/').next().unwrap_or(path);
                if !allowed.contains(base) {
                    bad.push(format!("runs {path}: {line}"));
                }
            }
            "open" | "openat" | "openat2" | "creat" => {
                let path = first_string();
                let writes = call == "creat"
                    || ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"]
                        .iter()
                        .any(|f| args.contains(f));
                let harmless = matches!(path, "/dev/null" | "/dev/tty" | "/dev/ptmx")
                    || path.starts_with("/dev/pts/");
                if writes && !harmless && !own(path) {
                    bad.push(format!("writes {path}: {line}"));
                }
            }
            "kill" | "tkill" | "tgkill" => {
                let target: Option<i64> = args
                    .split([',', ')'])
                    .next()
                    .and_then(|p| p.trim().parse().ok());
                if target.is_none_or(|t| !pids.contains(&t.abs())) {
                    bad.push(format!("signals a process not its own: {line}"));
                }
            }
            c if CHANGING.contains(&c) => {
                // Every string argument must be the command's own (`renameat` has two).
                let paths: Vec<&str> = args.split('"').skip(1).step_by(2).collect();
                if paths.is_empty() || !paths.iter().all(|p| own(p)) {
                    bad.push(format!("changes something: {line}"));
                }
            }
            _ => {}
        }
    }
    bad
}

/// The corpus's commands with a label.
fn corpus(label: &str) -> Vec<String> {
    CORPUS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_once('\t'))
        .filter(|(k, _)| *k == label)
        .map(|(_, c)| c.replace('⏎', "\n"))
        .collect()
}

/// What the judge may see executed for a verdict: the programs it names, what they run
/// themselves, and the shell that starts them when one is needed.
fn allowed_for(programs: &[String], shell: bool) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = BTreeSet::new();
    for p in programs {
        let base = p.rsplit('/').next().unwrap_or(p).to_string();
        out.extend(argos_risk::runs_of(&base));
        // What the name really is (`egrep` may be a link to `grep`).
        if let Some(real) = which(&base).and_then(|p| std::fs::canonicalize(p).ok())
            && let Some(n) = real.file_name()
        {
            out.insert(n.to_string_lossy().into_owned());
        }
        out.insert(base);
    }
    if shell {
        out.extend(["sh".to_string(), "dash".to_string(), "bash".to_string()]);
    }
    out
}

/// Every program is installed here (so there is something to observe); what a program
/// runs itself (`tar`'s `lzop`) need not be.
fn installed(programs: &[String]) -> bool {
    let base = |p: &String| p.rsplit('/').next().unwrap_or(p).to_string();
    let helpers: BTreeSet<String> = programs
        .iter()
        .flat_map(|p| argos_risk::runs_of(&base(p)))
        .collect();
    programs
        .iter()
        .filter(|p| !helpers.contains(*p))
        .all(|p| which(&base(p)).is_some() || argos_risk_shell_only(p))
}

/// Builtins have nothing to install.
fn argos_risk_shell_only(p: &str) -> bool {
    matches!(
        p,
        "cd" | "pushd"
            | "popd"
            | "history"
            | "jobs"
            | "wait"
            | "exit"
            | "return"
            | "read"
            | "type"
            | ":"
            | "[["
            | "command"
            | "builtin"
    )
}

/// Whether a read-only command's programs are installed here (something to observe).
fn observable(cmd: &str) -> bool {
    let v = classify(Cmd::Shell(cmd), None);
    assert_eq!(v.class, Class::ReadOnly, "{cmd}: {v:?}");
    installed(&v.programs)
}

/// Observes one command the classifier calls read-only.
fn judge_one(cmd: &str, out: &Path, failures: &mut Vec<String>) {
    let v = classify(Cmd::Shell(cmd), None);
    let (argv, shell) = match &v.argv {
        Some(a) => (a.clone(), false),
        None => (
            vec!["/bin/sh".to_string(), "-c".to_string(), cmd.to_string()],
            true,
        ),
    };
    let allowed = allowed_for(&v.programs, shell);
    let o = observe(&argv, &allowed, out);
    if !o.started {
        failures.push(format!("{cmd}\n    was not seen to start (no trace)"));
    }
    for v in o.violations {
        failures.push(format!("{cmd}\n    {v}"));
    }
}

#[test]
fn every_read_only_command_is_seen_to_only_read() {
    argos_tests::require_root("the classifier's judge (bubblewrap sandboxes)");
    let dir = tempfile::Builder::new()
        .prefix("argos-judge-")
        .tempdir()
        .unwrap();
    let out = dir.path();
    std::fs::set_permissions(out, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    // The judge sees what it must: a write, a second program, a change.
    let controls: [(&[&str], &[&str], &str); 3] = [
        (
            &["sh", "-c", "echo x > /etc/argos-judge"],
            &["sh"],
            "writes /etc/argos-judge",
        ),
        (&["sh", "-c", "ls /; true"], &["sh"], "runs /usr/bin/ls"),
        (
            &["mkdir", "/var/argos-judge"],
            &["mkdir"],
            "changes something",
        ),
    ];
    for (argv, allowed, want) in controls {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let allowed = allowed_for(
            &allowed.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            false,
        );
        let o = observe(&argv, &allowed, out);
        assert!(o.started, "{argv:?} was not traced");
        assert!(
            o.violations.iter().any(|v| v.contains(want)),
            "{argv:?}: want {want:?} in {:?}",
            o.violations
        );
    }
    let mut absent = BTreeSet::new();
    let reads = corpus("read_only");
    let mut todo: Vec<String> = Vec::new();
    for cmd in &reads {
        if observable(cmd) {
            todo.push(cmd.clone());
        } else {
            absent.insert(cmd.split_whitespace().next().unwrap_or("").to_string());
        }
    }
    let observed = todo.len();
    // Generated: each corpus read re-optioned with every option its model lists (a value
    // of `1` where one is taken), and wrapped; those still read-only are observed too.
    let mut generated = 0usize;
    let mut seen_programs = BTreeSet::new();
    for cmd in &reads {
        let v = classify(Cmd::Shell(cmd), None);
        let Some(argv) = v.argv else { continue };
        let program = argv[0].rsplit('/').next().unwrap_or(&argv[0]).to_string();
        if !seen_programs.insert(program.clone()) {
            continue;
        }
        let mut variants: Vec<String> = Vec::new();
        for opt in argos_risk::options_of(&program).unwrap_or_default() {
            let opt = if let Some(o) = opt.strip_suffix("[=]") {
                o.to_string()
            } else if let Some(o) = opt.strip_suffix('=') {
                if o.starts_with("--") {
                    format!("{o}=1")
                } else {
                    format!("{o} 1")
                }
            } else {
                opt
            };
            let rest: Vec<String> = argv[1..].iter().map(|a| shell_quote(a)).collect();
            variants.push(format!("{} {opt} {}", argv[0], rest.join(" ")));
        }
        for wrap in ["timeout 10", "nice", "env", "command"] {
            variants.push(format!("{wrap} {cmd}"));
        }
        for variant in variants {
            if classify(Cmd::Shell(&variant), None).class == Class::ReadOnly && observable(&variant)
            {
                todo.push(variant);
                generated += 1;
            }
        }
    }
    // Joined: never a read, whatever the parts.
    for pair in reads.windows(2) {
        for join in [" | ", " && ", "; ", " || "] {
            let joined = format!("{}{join}{}", pair[0], pair[1]);
            let v = classify(Cmd::Shell(&joined), None);
            assert_ne!(v.class, Class::ReadOnly, "{joined}: {v:?}");
        }
    }
    // Three sandboxes at a time: each spends most of its time starting.
    let failures = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for worker in 0..3 {
            let (todo, failures, next) = (&todo, &failures, &next);
            let dir = out.join(format!("w{worker}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
                .unwrap();
            s.spawn(move || {
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(cmd) = todo.get(i) else { break };
                    judge_one(cmd, &dir, &mut mine);
                }
                failures.lock().unwrap().extend(mine);
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    eprintln!(
        "judge: {observed} corpus reads and {generated} generated reads observed under strace; \
         not installed here: {absent:?}"
    );
    assert!(
        failures.is_empty(),
        "{} read-only commands did more than read:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(observed >= 120, "only {observed} corpus reads observed");
    assert!(
        generated >= 500,
        "only {generated} generated reads observed"
    );
}

fn shell_quote(a: &str) -> String {
    if a.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+%@".contains(&b))
    {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}
