//! execd's side of a launch: validate the request, lay out the launch dir and workspace,
//! start the shim, and read back what it wrote. execd itself does nothing between fork
//! and exec: the shim is a separate, freshly exec'd program.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Component, Path, PathBuf};

use crate::profile::{self, HostPaths, Profiles};
use crate::spec::{Dimension, LaunchResult, LaunchSpec, Need, files};

/// Limits on what a request may carry.
pub const MAX_STDIN_BYTES: usize = 1024 * 1024;
pub const MAX_ARGS: usize = 4096;
/// Most programs a launch may list as executable besides its own.
pub const MAX_EXECUTABLES: usize = 64;
pub const MAX_ARG_BYTES: usize = 128 * 1024;
/// Most bytes a request's environment may hold, keys and values together.
pub const MAX_ENV_BYTES: usize = 64 * 1024;

/// Environment keys a request may set (plus any `LC_*`).
pub const ENV_ALLOW: &[&str] = &[
    "PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "COLUMNS", "LINES",
    "NO_COLOR", "TMPDIR", "PAGER", "EDITOR",
];

pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A run request in domain terms (the proto form stays in `wire.rs`).
#[derive(Debug, Clone, Default)]
pub struct LaunchRequest {
    pub argv: Vec<String>,
    /// A shell command line (exclusive with `argv`).
    pub command: String,
    pub cwd: String,
    pub env: BTreeMap<String, String>,
    pub profile: String,
    pub timeout_ms: Option<u64>,
    pub stdin: Vec<u8>,
    /// Run on a terminal: (rows, cols, TERM). Its input then comes through `Attach`.
    pub tty: Option<(u32, u32, String)>,
    /// Keep stdin open as a pipe the shim holds; its input comes through `Attach`.
    pub open_stdin: bool,
    /// Programs the workload may start besides its own, in a profile that limits what
    /// may be executed (`inspect`): names looked up on its PATH, or absolute paths.
    pub executables: Vec<String>,
    /// The environment's keys were registered by an admin for this launch (a stdio MCP
    /// server started through `StartMcpServer`): they need not be on the allow-list.
    pub registered_env: bool,
    /// The caller's own reference for the launch, kept in the ledger (empty: none).
    pub client_ref: String,
    /// Ended once nobody followed its output for this long, in ms (0: never).
    pub end_unfollowed_ms: u64,
}

/// Recent terminal output a shim keeps for a client that attaches again.
pub const SCROLLBACK_BYTES: u64 = 1024 * 1024;

/// A request field that is not acceptable, named for the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidRequest {
    pub field: &'static str,
    pub message: String,
}

fn invalid(field: &'static str, message: impl Into<String>) -> InvalidRequest {
    InvalidRequest {
        field,
        message: message.into(),
    }
}

/// Errors starting a launch after validation.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("preparing {what} {path}")]
    Prepare {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the shim {path}")]
    Shim {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Output limits of launches.
#[derive(Debug, Clone, Copy)]
pub struct OutputLimits {
    pub head_bytes: u64,
    pub tail_bytes: u64,
    pub log_cap_bytes: u64,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            head_bytes: 64 * 1024,
            tail_bytes: 64 * 1024,
            log_cap_bytes: 256 * 1024 * 1024,
        }
    }
}

/// Starts launches.
#[derive(Debug, Clone)]
pub struct Launcher {
    /// execd's private state dir; launches live in `launches/<id>`.
    pub state_dir: PathBuf,
    /// Root of the workspaces (`<id>` each, owned by the workload's uid).
    pub work_root: PathBuf,
    pub shim: PathBuf,
    pub profiles: Profiles,
    pub host: HostPaths,
    /// Dimensions the operator (or a test) declared unavailable on this host.
    pub disabled: Vec<Dimension>,
    pub output: OutputLimits,
    pub grace_ms: u64,
    /// How long a terminal may stay with no client attached (0: never).
    pub terminal_detach_ttl_ms: u64,
    /// Reserved uids for per-launch users: `[base, base + count)`.
    pub launch_uids: (u32, u32),
}

/// A validated launch, ready to start.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub spec: LaunchSpec,
    pub dir: PathBuf,
}

fn check_path(field: &'static str, p: &str) -> Result<PathBuf, InvalidRequest> {
    if p.contains('\0') {
        return Err(invalid(field, "contains a NUL byte"));
    }
    let path = PathBuf::from(p);
    if !path.is_absolute() {
        return Err(invalid(field, format!("{p:?} is not absolute")));
    }
    if path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(invalid(field, format!("{p:?} traverses upwards (..)")));
    }
    Ok(path)
}

impl Launcher {
    pub fn launches_dir(&self) -> PathBuf {
        self.state_dir.join("launches")
    }

    /// The empty, mode-000 file shims bind over denied files.
    pub fn mask_file(&self) -> PathBuf {
        self.state_dir.join("masked")
    }

    /// Creates what every launch needs before the first one: the launches dir (0700), the
    /// workspace root (0711: a workload's uid reaches its own workspace only) and the mask
    /// file.
    pub fn ensure_dirs(&self) -> Result<(), LaunchError> {
        let prep = |what: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| LaunchError::Prepare { what, path, source }
        };
        let launches = self.launches_dir();
        std::fs::create_dir_all(&launches).map_err(prep("launches dir", &launches))?;
        std::fs::set_permissions(&launches, std::fs::Permissions::from_mode(0o700))
            .map_err(prep("launches dir", &launches))?;
        std::fs::create_dir_all(&self.work_root)
            .map_err(prep("workspace root", &self.work_root))?;
        std::fs::set_permissions(&self.work_root, std::fs::Permissions::from_mode(0o711))
            .map_err(prep("workspace root", &self.work_root))?;
        let mask = self.mask_file();
        std::fs::File::create(&mask).map_err(prep("mask file", &mask))?;
        std::fs::set_permissions(&mask, std::fs::Permissions::from_mode(0o000))
            .map_err(prep("mask file", &mask))?;
        Ok(())
    }

    /// Checks a request and turns it into a spec. Nothing is created or spawned on error.
    pub fn validate(
        &self,
        id: &str,
        req: &LaunchRequest,
        launch_uid: u32,
    ) -> Result<LaunchSpec, InvalidRequest> {
        let asked = if req.profile.is_empty() {
            "agent"
        } else {
            req.profile.as_str()
        };
        let (profile_name, profile) = self.profiles.named(asked).ok_or_else(|| {
            invalid(
                "profile",
                format!(
                    "unknown profile {asked:?} (known: {})",
                    self.profile_names()
                ),
            )
        })?;
        let argv = match (req.argv.is_empty(), req.command.is_empty()) {
            (false, false) => {
                return Err(invalid("command", "give either argv or command, not both"));
            }
            (true, true) => return Err(invalid("command", "empty: give argv or command")),
            (false, true) => req.argv.clone(),
            (true, false) => {
                if req.command.trim().is_empty() {
                    return Err(invalid("command", "empty"));
                }
                vec!["/bin/sh".into(), "-c".into(), req.command.clone()]
            }
        };
        if argv[0].is_empty() {
            return Err(invalid("argv", "argv[0] is empty"));
        }
        if req.client_ref.len() > 64
            || !req
                .client_ref
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(invalid(
                "client_ref",
                "at most 64 characters of A-Z, a-z, 0-9, '-' and '_'",
            ));
        }
        if argv.len() > MAX_ARGS {
            return Err(invalid("argv", format!("more than {MAX_ARGS} arguments")));
        }
        let field = if req.argv.is_empty() {
            "command"
        } else {
            "argv"
        };
        if argv.iter().any(|a| a.contains('\0')) {
            return Err(invalid(field, "contains a NUL byte"));
        }
        if argv.iter().map(String::len).sum::<usize>() > MAX_ARG_BYTES {
            return Err(invalid(field, format!("longer than {MAX_ARG_BYTES} bytes")));
        }
        let workspace = self.work_root.join(id);
        let cwd = if req.cwd.is_empty() {
            workspace.clone()
        } else {
            check_path("cwd", &req.cwd)?
        };
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        env.insert("PATH".into(), DEFAULT_PATH.into());
        env.insert("HOME".into(), workspace.display().to_string());
        env.insert("LANG".into(), "C.UTF-8".into());
        env.insert("TMPDIR".into(), "/tmp".into());
        let env_bytes: usize = req.env.iter().map(|(k, v)| k.len() + v.len()).sum();
        if env_bytes > MAX_ENV_BYTES {
            return Err(invalid(
                "env",
                format!("{env_bytes} bytes is above the limit of {MAX_ENV_BYTES}"),
            ));
        }
        for (k, v) in &req.env {
            if !(req.registered_env || ENV_ALLOW.contains(&k.as_str()) || k.starts_with("LC_")) {
                return Err(invalid(
                    "env",
                    format!(
                        "key {k:?} is not allowed (allowed: {}, LC_*)",
                        ENV_ALLOW.join(", ")
                    ),
                ));
            }
            if k.contains('\0') || v.contains('\0') || k.contains('=') {
                return Err(invalid("env", format!("key {k:?}: NUL byte or '=' in key")));
            }
            env.insert(k.clone(), v.clone());
        }
        let clock = &profile.wall_clock;
        let timeout_ms = match req.timeout_ms {
            // A terminal has no short default clock: someone works in it.
            None if req.tty.is_some() => clock.max_timeout_s * 1000,
            None => clock.default_timeout_s * 1000,
            // No limit of the caller's own: where the profile requires a clock, its
            // maximum still applies.
            Some(0) if clock.need == Need::Required => clock.max_timeout_s * 1000,
            Some(t) if t > clock.max_timeout_s * 1000 => {
                return Err(invalid(
                    "timeout_ms",
                    format!(
                        "{t} ms is above profile {profile_name}'s maximum of {} s",
                        clock.max_timeout_s
                    ),
                ));
            }
            Some(t) => t,
        };
        if req.open_stdin && req.tty.is_some() {
            return Err(invalid(
                "open_stdin",
                "a terminal's input is open already (Attach writes to it)",
            ));
        }
        if req.open_stdin && !req.stdin.is_empty() {
            return Err(invalid(
                "stdin",
                "a launch with open stdin takes its input through Attach",
            ));
        }
        if req.end_unfollowed_ms > 0 && req.tty.is_some() {
            return Err(invalid(
                "end_unfollowed_ms",
                "a terminal is torn down after its own detach limit: give 0",
            ));
        }
        let tty = match &req.tty {
            None => None,
            Some(_) if !req.stdin.is_empty() => {
                return Err(invalid(
                    "stdin",
                    "a terminal's input comes through Attach, not stdin",
                ));
            }
            Some((rows, cols, term)) => {
                let size = |field, v: u32| {
                    u16::try_from(v)
                        .ok()
                        .filter(|v| (1..=1000).contains(v))
                        .ok_or_else(|| invalid(field, format!("{v}: between 1 and 1000")))
                };
                let term = if term.is_empty() {
                    "xterm-256color".to_string()
                } else {
                    term.clone()
                };
                if term.len() > 64
                    || !term
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
                {
                    return Err(invalid(
                        "tty.term",
                        format!("{term:?} is not a terminal type"),
                    ));
                }
                env.insert("TERM".into(), term.clone());
                Some(crate::spec::Tty {
                    rows: size("tty.rows", *rows)?,
                    cols: size("tty.cols", *cols)?,
                    term,
                    scrollback_bytes: SCROLLBACK_BYTES,
                    detach_ttl_ms: self.terminal_detach_ttl_ms,
                })
            }
        };
        if req.stdin.len() > MAX_STDIN_BYTES {
            return Err(invalid(
                "stdin",
                format!(
                    "{} bytes is above the limit of {MAX_STDIN_BYTES}",
                    req.stdin.len()
                ),
            ));
        }
        if !req.executables.is_empty() && !profile.filesystem.execute_listed_only {
            return Err(invalid(
                "executables",
                format!("profile {profile_name} does not limit what may be executed: give no list"),
            ));
        }
        if req.executables.len() > MAX_EXECUTABLES {
            return Err(invalid(
                "executables",
                format!("more than {MAX_EXECUTABLES} programs"),
            ));
        }
        for e in &req.executables {
            let name_ok = (1..=4096).contains(&e.len())
                && !e.contains('\0')
                && (e.starts_with('/') || !e.contains('/'));
            if !name_ok {
                return Err(invalid(
                    "executables",
                    format!("{e:?}: a program's name, or its absolute path"),
                ));
            }
        }
        // Where only listed programs may run and the caller listed none: the programs the
        // command itself runs, as the classifier finds them (the gate lists the same).
        let executables = if profile.filesystem.execute_listed_only && req.executables.is_empty() {
            let command = if req.argv.is_empty() {
                argos_risk::Command::Shell(&req.command)
            } else {
                argos_risk::Command::Argv(&req.argv)
            };
            let mut found = argos_risk::classify(command, None).programs;
            found.retain(|p| p.starts_with('/') || !p.contains('/'));
            found.truncate(MAX_EXECUTABLES);
            found
        } else {
            req.executables.clone()
        };
        let plan = profile::plan(
            profile_name,
            profile,
            &workspace,
            &self.host,
            &self.disabled,
            launch_uid,
        );
        Ok(LaunchSpec {
            id: id.to_string(),
            argv,
            executables,
            user: String::new(),
            env: env.into_iter().collect(),
            cwd,
            workspace,
            timeout_ms,
            grace_ms: self.grace_ms,
            stdin: !req.stdin.is_empty(),
            open_stdin: req.open_stdin,
            head_bytes: self.output.head_bytes,
            tail_bytes: self.output.tail_bytes,
            log_cap_bytes: self
                .output
                .log_cap_bytes
                .max(self.output.head_bytes + self.output.tail_bytes),
            plan,
            shim: None,
            init: None,
            tty,
            end_unfollowed_ms: req.end_unfollowed_ms,
        })
    }

    /// Workspaces must be visible and writable inside every profile: refuse a work root
    /// that a profile denies (it would be masked from the very launch it belongs to).
    pub fn check_work_root(&self) -> Result<(), String> {
        for (name, p) in &self.profiles.0 {
            let plan = profile::plan(name, p, &self.work_root.join("x"), &self.host, &[], 0);
            if let Some(d) = plan.denied.iter().find(|d| self.work_root.starts_with(d)) {
                return Err(format!(
                    "exec.work_dir {} lies under {}, which profile {name} denies; move it elsewhere",
                    self.work_root.display(),
                    d.display()
                ));
            }
        }
        Ok(())
    }

    pub fn profile_names(&self) -> String {
        self.profiles
            .0
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Lays out the launch dir (root only, inside the 0700 launches dir) and the
    /// workspace (owned by the workload's uid), and writes the spec: the launch's receipt.
    pub fn prepare(&self, spec: LaunchSpec, stdin: &[u8]) -> Result<Prepared, LaunchError> {
        let prep = |what: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| LaunchError::Prepare { what, path, source }
        };
        let dir = self.launches_dir().join(&spec.id);
        let mut private = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut private, 0o700);
        private.create(&dir).map_err(prep("launch dir", &dir))?;
        private
            .create(&spec.workspace)
            .map_err(prep("workspace", &spec.workspace))?;
        if let Some((uid, gid)) = spec.plan.run_as
            && nix::unistd::geteuid().is_root()
        {
            chown(&spec.workspace, Some(uid), Some(gid))
                .map_err(prep("workspace", &spec.workspace))?;
        }
        if !stdin.is_empty() {
            std::fs::write(dir.join(files::STDIN), stdin).map_err(prep("stdin", &dir))?;
        }
        let spec_path = dir.join(files::SPEC);
        // Written once into a new dir, before any reader may look (no write-and-rename: a
        // spec torn by a crash does not parse, and its launch is retired as lost).
        let bytes = serde_json::to_vec_pretty(&spec).map_err(std::io::Error::other);
        bytes
            .and_then(|b| {
                use std::io::Write;
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&spec_path)?
                    .write_all(&b)
            })
            .map_err(prep("spec", &spec_path))?;
        Ok(Prepared { spec, dir })
    }
}

/// What a finished launch left in its dir.
#[derive(Debug, Clone)]
pub struct Finished {
    pub result: LaunchResult,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// One stream as a caller receives it: head, and tail when truncated.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
    pub total: u64,
    pub truncated: bool,
}

/// Reads a launch's result and capped output. A missing result means the shim died
/// without one: the launch is reported `lost`.
pub fn read_finished(dir: &Path, spec: &LaunchSpec) -> Finished {
    let result: LaunchResult = std::fs::read(dir.join(files::RESULT))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| LaunchResult::lost("the shim ended without writing a result"));
    let cap = |log: &str, tail: &str, total: u64| -> Captured {
        let keep = spec.head_bytes + spec.tail_bytes;
        let mut head = Vec::new();
        if let Ok(f) = std::fs::File::open(dir.join(log)) {
            use std::io::Read;
            let limit = if total <= keep { keep } else { spec.head_bytes };
            let _ = f.take(limit).read_to_end(&mut head);
        }
        if total <= keep {
            return Captured {
                head,
                tail: Vec::new(),
                total,
                truncated: false,
            };
        }
        Captured {
            head,
            tail: std::fs::read(dir.join(tail)).unwrap_or_default(),
            total,
            truncated: true,
        }
    };
    Finished {
        stdout: cap(files::STDOUT_LOG, files::STDOUT_TAIL, result.stdout.total),
        stderr: cap(files::STDERR_LOG, files::STDERR_TAIL, result.stderr.total),
        result,
    }
}

/// How a kill went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// The tree was signalled and its end observed.
    Killed,
    /// It had already ended.
    AlreadyGone,
    /// The recorded identity no longer verifies: nothing was signalled.
    NotOwned(crate::sys::proc::Verdict),
    /// Signalled, but its end was not observed in time.
    Unconfirmed,
}

/// Tears a launch down: TERM through a pidfd to its verified init (which forwards to the
/// tree), the grace period, re-verify, KILL, and observe the shim's exit marker. Only a
/// process whose identity verifies as OWNED is ever signalled.
pub async fn kill_launch(dir: &Path, grace: std::time::Duration) -> KillOutcome {
    use crate::sys::proc::Verdict;
    use crate::sys::raw::pidfd_send_signal;
    use std::time::{Duration, Instant};
    if dir.join(files::EXIT).exists() {
        return KillOutcome::AlreadyGone;
    }
    let init = std::fs::read(dir.join(files::SPEC))
        .ok()
        .and_then(|b| serde_json::from_slice::<LaunchSpec>(&b).ok())
        .and_then(|s| s.init);
    let Some(init) = init else {
        return KillOutcome::NotOwned(Verdict::Unverifiable);
    };
    let pidfd = match crate::sys::proc::open_owned(&init) {
        Ok(fd) => fd,
        Err(Verdict::Gone) => return KillOutcome::AlreadyGone,
        Err(other) => return KillOutcome::NotOwned(other),
    };
    // Only now, with the tree verified and pinned, is the launch ours to end: the shim
    // reports `killed` only if this marker exists.
    let _ = std::fs::write(dir.join(files::KILL_REQUESTED), b"");
    let ended = |deadline: Instant| async move {
        while Instant::now() < deadline {
            if dir.join(files::EXIT).exists() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        dir.join(files::EXIT).exists()
    };
    let _ = pidfd_send_signal(&pidfd, libc::SIGTERM);
    if ended(Instant::now() + grace).await {
        return KillOutcome::Killed;
    }
    // Through the same pidfd: if the process is gone, this fails; it never hits a stranger.
    let _ = pidfd_send_signal(&pidfd, libc::SIGKILL);
    if ended(Instant::now() + Duration::from_secs(10)).await {
        KillOutcome::Killed
    } else {
        KillOutcome::Unconfirmed
    }
}
