//! The start-up and shut-down sequence every daemon follows, in order:
//!
//! 1. parse arguments; read the config file and the `ARGOS_*` environment once, then
//!    the daemon's own checks ([`Spec::validate`]); report every problem together and
//!    exit 2 (`--print-config` / `--check-config` stop here);
//! 2. build the peer table (names resolved; shared uids refused unless insecure on purpose);
//! 3. refuse to run as root (or with any capability) when the daemon is unprivileged;
//! 4. start logging; say loudly if the run is insecure;
//! 5. prepare the private state dir (mode 0700, owned by us);
//! 6. bind `<runtime_dir>/<daemon>.sock` (stale socket removed, mode and group set);
//! 7. serve the daemon's routes + `argos.common.v1.Daemon` (its `Status`) + health +
//!    reflection behind peer authorization, and its background tasks ([`Context::every`]);
//!    tell a service manager `READY=1` with a `STATUS=` line, and ping its watchdog at
//!    half the period it set (`WATCHDOG_USEC`);
//!    a start the daemon's own checks refuse for good ([`Refused`]: a damaged, lost or
//!    read-only database) exits 2 too, any other failure 1;
//! 8. on SIGTERM/SIGINT: tell it `STOPPING=1`, report NOT_SERVING, let open calls finish
//!    within the grace period, stop background tasks, remove the socket, exit 0.

use std::ffi::OsString;
use std::future::Future;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use argos_proto::common::v1 as pb;
use futures_util::future::BoxFuture;
use sd_notify::NotifyState;
use tonic_health::ServingStatus;

use crate::config::{self, Config, IdSpec, Source};
use crate::grpc::{Routes, ShutdownSignals, bind_unix, serve_unix};
use crate::peer::{MethodPolicy, NameResolver, PeerRole, PeerTable, RoleSet, SystemNames};
use crate::principal::Caller;

/// Whether a daemon may hold root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privilege {
    /// execd: the one privileged daemon (it still runs, unprivileged, in a one-user dev run).
    MayBeRoot,
    /// gatewayd, mcpd, jobd: refuse to start as root or with any effective capability.
    Unprivileged,
}

/// What a daemon binary declares about itself.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Short name: `execd`, `mcpd`, `jobd`, `gatewayd`; names the socket and state dir.
    pub name: &'static str,
    pub privilege: Privilege,
    /// The daemon's own checks of the parsed config, beyond what the schema says: every
    /// problem, each naming its key. Run before anything is bound, with `--check-config`
    /// too; any problem is exit 2.
    pub validate: fn(&Config) -> Vec<String>,
}

impl Spec {
    /// A daemon with no checks of its own beyond the config schema.
    pub const fn new(name: &'static str, privilege: Privilege) -> Spec {
        Spec {
            name,
            privilege,
            validate: |_| Vec::new(),
        }
    }

    /// The daemon's own config checks (see [`Spec::validate`]).
    pub const fn validate(mut self, validate: fn(&Config) -> Vec<String>) -> Spec {
        self.validate = validate;
        self
    }
}

/// Who this daemon is; answers every service's `Status` RPC.
#[derive(Debug, Clone)]
pub struct DaemonIdentity {
    pub name: &'static str,
    pub pid: u32,
    pub uid: u32,
    pub started_at: SystemTime,
    pub insecure_shared_uid: bool,
    /// What it applied to itself at start (`harden::apply`).
    pub hardening: Vec<String>,
    /// What it cannot do now, by condition ([`Context::watch`]).
    pub degraded: Arc<std::sync::Mutex<std::collections::BTreeMap<&'static str, String>>>,
}

impl DaemonIdentity {
    /// The `Status` answer for one call.
    pub fn status(&self, caller: Option<&Caller>) -> pb::DaemonStatus {
        let started = self
            .started_at
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut s = pb::DaemonStatus {
            daemon: self.name.to_string(),
            version: crate::VERSION.to_string(),
            pid: self.pid,
            uid: self.uid,
            started_at_unix_ms: i64::try_from(started.as_millis()).unwrap_or(i64::MAX),
            insecure_shared_uid: self.insecure_shared_uid,
            hardening: self.hardening.clone(),
            degraded: self
                .degraded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .map(|(what, why)| format!("{what}: {why}"))
                .collect(),
            ..Default::default()
        };
        if let Some(c) = caller {
            s.peer_roles = c.roles.iter().map(|r| role_to_proto(r) as i32).collect();
            s.peer_uid = c.peer.uid;
            s.peer_gid = c.peer.gid;
            s.peer_pid = c.peer.pid.and_then(|p| u32::try_from(p).ok()).unwrap_or(0);
            s.principal = c
                .principal
                .as_ref()
                .map(|p| p.to_string())
                .unwrap_or_default();
            s.request_id = c.request_id.clone();
        }
        s
    }
}

/// The role a proto value names (`None` for unspecified or unknown values).
pub fn role_from_proto(value: i32) -> Option<PeerRole> {
    match pb::PeerRole::try_from(value).ok()? {
        pb::PeerRole::Gateway => Some(PeerRole::Gateway),
        pb::PeerRole::Mcp => Some(PeerRole::Mcp),
        pb::PeerRole::Job => Some(PeerRole::Job),
        pb::PeerRole::Operator => Some(PeerRole::Operator),
        pb::PeerRole::Unspecified => None,
    }
}

/// The proto form of a role.
pub fn role_to_proto(r: PeerRole) -> pb::PeerRole {
    match r {
        PeerRole::Gateway => pb::PeerRole::Gateway,
        PeerRole::Mcp => pb::PeerRole::Mcp,
        PeerRole::Job => pb::PeerRole::Job,
        PeerRole::Operator => pb::PeerRole::Operator,
    }
}

/// Everything a daemon's own code gets at start.
#[derive(Clone)]
pub struct Context {
    pub config: Arc<Config>,
    pub peers: Arc<PeerTable>,
    pub identity: Arc<DaemonIdentity>,
    /// The daemon's private state directory (exists, 0700, ours).
    pub state_dir: PathBuf,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

impl Context {
    /// Resolves when the daemon is shutting down.
    pub async fn shutdown(&self) {
        let mut rx = self.shutdown.clone();
        let _ = rx.wait_for(|stop| *stop).await;
    }

    /// A background task that runs `tick` at once and then every `period` until the
    /// daemon stops; a tick in progress when the stop comes finishes first. A tick that
    /// fails is logged under `what` and the next one runs on time.
    pub fn every<F, Fut>(&self, what: &'static str, period: Duration, mut tick: F) -> Task
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let ctx = self.clone();
        Box::pin(async move {
            loop {
                if let Err(e) = tick().await {
                    tracing::error!(
                        task = what,
                        error = format!("{e:#}"),
                        "periodic task failed"
                    );
                }
                tokio::select! {
                    _ = tokio::time::sleep(period) => {}
                    _ = ctx.shutdown() => return Ok(()),
                }
            }
        })
    }

    /// A background task that asks `check` every two seconds what keeps the daemon from
    /// working fully as to `what` (`storage`), and says it in the daemon's `Status`
    /// (`degraded`) until `check` answers nothing; a change is logged once.
    pub fn watch<F, Fut>(&self, what: &'static str, mut check: F) -> Task
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Option<String>> + Send + 'static,
    {
        let identity = self.identity.clone();
        self.every(what, Duration::from_secs(2), move || {
            let found = check();
            let identity = identity.clone();
            async move {
                let found = found.await;
                let mut degraded = identity
                    .degraded
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match found {
                    Some(why) => {
                        if degraded.get(what) != Some(&why) {
                            tracing::warn!(what, why, "degraded");
                            degraded.insert(what, why);
                        }
                    }
                    None => {
                        if degraded.remove(what).is_some() {
                            tracing::info!(what, "no longer degraded");
                        }
                    }
                }
                Ok(())
            }
        })
    }

    /// A background task that runs `f` once the daemon is stopping.
    pub fn on_shutdown<Fut>(&self, f: impl FnOnce() -> Fut + Send + 'static) -> Task
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        let ctx = self.clone();
        Box::pin(async move {
            ctx.shutdown().await;
            f().await;
            Ok(())
        })
    }
}

/// A background task of a daemon: it must finish soon after [`Context::shutdown`] resolves.
pub type Task = BoxFuture<'static, anyhow::Result<()>>;

/// What a daemon serves: its gRPC routes and who may call each method, plus any
/// background tasks. `argos.common.v1.Daemon` (`Status`), health and reflection are added
/// by the skeleton for every daemon.
pub struct Serve {
    pub routes: Routes,
    pub policy: MethodPolicy,
    pub background: Vec<Task>,
    /// The stop's last steps, once every call and background task has ended (closing
    /// the daemon's database).
    pub at_last: Vec<Task>,
}

impl Serve {
    /// One tonic service, with who may call each of its methods.
    pub fn new<S>(service: S, policy: MethodPolicy) -> Serve
    where
        S: tower_service::Service<
                http::Request<tonic::body::Body>,
                Response = http::Response<tonic::body::Body>,
                Error = std::convert::Infallible,
            > + tonic::server::NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        Serve {
            routes: Routes::new().route(service),
            policy,
            background: Vec::new(),
            at_last: Vec::new(),
        }
    }

    /// Adds a background task.
    pub fn with_task(mut self, task: Task) -> Serve {
        self.background.push(task);
        self
    }

    /// Adds a last step of the stop, run once no call or background task can write any
    /// more: a database closed there holds everything the daemon committed.
    pub fn at_last(mut self, step: Task) -> Serve {
        self.at_last.push(step);
        self
    }
}

/// `argos.common.v1.Daemon`: the same on every socket.
struct DaemonService {
    identity: Arc<DaemonIdentity>,
}

#[tonic::async_trait]
impl pb::daemon_server::Daemon for DaemonService {
    async fn status(
        &self,
        req: tonic::Request<pb::StatusRequest>,
    ) -> Result<tonic::Response<pb::DaemonStatus>, tonic::Status> {
        Ok(tonic::Response::new(
            self.identity.status(req.extensions().get::<Caller>()),
        ))
    }
}

/// Command-line flags every daemon accepts.
#[derive(Debug, Default, PartialEq, Eq)]
struct Args {
    config: Option<PathBuf>,
    print_config: bool,
    check_config: bool,
    parent_pid: Option<i32>,
}

const USAGE: &str =
    "usage: argos-<daemon> [--config PATH] [--print-config] [--check-config] [--parent-pid PID]

  --config PATH     config file (TOML); default: $ARGOS_CONFIG, else built-in defaults
  --print-config    print the effective config, with each value's origin, and exit
  --check-config    validate the config and exit
  --parent-pid PID  exit when that process (the launcher) dies";

fn parse_args(args: &[OsString]) -> Result<Args, String> {
    let mut out = Args::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--config") => {
                out.config = Some(it.next().ok_or("--config needs a path")?.into());
            }
            Some("--print-config") => out.print_config = true,
            Some("--check-config") => out.check_config = true,
            Some("--parent-pid") => {
                let v = it
                    .next()
                    .and_then(|v| v.to_str())
                    .ok_or("--parent-pid needs a pid")?;
                out.parent_pid = Some(
                    v.parse()
                        .map_err(|_| format!("--parent-pid: not a pid: {v:?}"))?,
                );
            }
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    Ok(out)
}

/// Reads the config source: the file named by `--config` or `$ARGOS_CONFIG` (which must
/// exist), plus every `ARGOS_*` variable.
fn read_source(args: &Args) -> Result<Source, String> {
    let mut env = std::collections::BTreeMap::new();
    for (k, v) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        if !k.starts_with(config::ENV_PREFIX) {
            continue;
        }
        let v = v
            .into_string()
            .map_err(|_| format!("{k}: value is not UTF-8"))?;
        env.insert(k.to_string(), v);
    }
    let path = args
        .config
        .clone()
        .or_else(|| env.get(config::CONFIG_ENV).map(PathBuf::from));
    let file = match path {
        None => None,
        Some(p) => {
            let text = std::fs::read_to_string(&p)
                .map_err(|e| format!("reading config file {}: {e}", p.display()))?;
            Some((p.display().to_string(), text))
        }
    };
    Ok(Source { file, env })
}

/// Runs a daemon to completion (see the module docs for the sequence).
pub fn run<F, Fut>(spec: Spec, build: F) -> ExitCode
where
    F: FnOnce(Context) -> Fut,
    Fut: Future<Output = anyhow::Result<Serve>>,
{
    let prog = format!("argos-{}", spec.name);
    let fail = |msg: &str| {
        eprintln!("{prog}: {msg}");
        ExitCode::from(2)
    };
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        println!("{}", USAGE.replace("<daemon>", spec.name));
        return ExitCode::SUCCESS;
    }
    if argv.iter().any(|a| a == "--version") {
        println!("{prog} {}", crate::VERSION);
        return ExitCode::SUCCESS;
    }
    let args = match parse_args(&argv) {
        Ok(a) => a,
        Err(e) => return fail(&format!("{e}\n{}", USAGE.replace("<daemon>", spec.name))),
    };
    // 1. Config, once, before anything is bound.
    let source = match read_source(&args) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let (config, effective) = match Config::parse_with_effective(&source) {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string()),
    };
    let problems = (spec.validate)(&config);
    if !problems.is_empty() {
        let lines: Vec<String> = problems.iter().map(|p| format!("  - {p}")).collect();
        return fail(&format!("invalid configuration:\n{}", lines.join("\n")));
    }
    if args.print_config {
        print!("{}", config::render_effective(&effective));
        return ExitCode::SUCCESS;
    }
    // 2. Peer table.
    let peers = match PeerTable::from_config(&config.peers, &SystemNames) {
        Ok(t) => t,
        Err(errs) => {
            let lines: Vec<String> = errs.iter().map(|e| format!("  - {e}")).collect();
            return fail(&format!("invalid peer table:\n{}", lines.join("\n")));
        }
    };
    let socket_group = match &config.socket.group {
        None => None,
        Some(IdSpec::Id(g)) => Some(*g),
        Some(IdSpec::Name(n)) => match SystemNames.gid(n) {
            Some(g) => Some(g),
            None => return fail(&format!("socket.group: no such group {n:?}")),
        },
    };
    // 3. Privilege.
    if spec.privilege == Privilege::Unprivileged
        && let Err(e) = check_unprivileged()
    {
        return fail(&e);
    }
    if args.check_config {
        println!("{prog}: configuration ok");
        return ExitCode::SUCCESS;
    }
    // 4. Logging.
    crate::telemetry::init(&config.log, spec.name);
    if let Some(ppid) = args.parent_pid
        && let Err(e) = die_with_parent(ppid)
    {
        return fail(&e);
    }
    let uid = nix::unistd::geteuid().as_raw();
    // An unprivileged daemon hardens itself before any other thread exists: no_new_privs,
    // landlock (its own dirs writable, nothing executable), its seccomp filter.
    let mut hardening = Vec::new();
    if spec.privilege == Privilege::Unprivileged {
        let state_dir = config.daemon_state_dir(spec.name);
        let socket = config.socket_path(spec.name);
        let socket_dir = socket.parent().map(Path::to_path_buf).unwrap_or_default();
        if let Err(e) = prepare_state_dir(&state_dir, uid)
            .and_then(|()| std::fs::create_dir_all(&socket_dir).context("the socket's dir"))
        {
            return fail(&format!("{e:#}"));
        }
        let writable = [
            state_dir,
            socket_dir,
            // SQLite's temporary files, and the null device.
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
            PathBuf::from("/dev/null"),
        ];
        match crate::harden::apply(&writable) {
            Ok(applied) => {
                tracing::info!(applied = applied.join("; "), "hardened");
                hardening = applied;
            }
            Err(e) => return fail(&format!("hardening itself: {e}")),
        }
    }
    let identity = Arc::new(DaemonIdentity {
        name: spec.name,
        pid: std::process::id(),
        uid,
        started_at: SystemTime::now(),
        insecure_shared_uid: peers.is_insecure(),
        hardening,
        degraded: Default::default(),
    });
    for (shared, roles) in peers.shared_uids() {
        tracing::warn!(
            uid = shared, %roles,
            "INSECURE RUN: several peer roles share one uid (peers.insecure_shared_uid = true); \
             privilege separation is NOT in force"
        );
    }
    if spec.privilege == Privilege::MayBeRoot && uid != 0 {
        tracing::warn!(
            uid,
            "not running as root: privileged features will be unavailable"
        );
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(&format!("starting the async runtime: {e}")),
    };
    match runtime.block_on(serve(spec, config, peers, identity, socket_group, build)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "exiting");
            eprintln!("{prog}: {e:#}");
            if e.downcast_ref::<Refused>().is_some() {
                // The units do not restart on 2 (`RestartPreventExitStatus=2`).
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// A start refused for a reason a restart would meet again (a database damaged, lost or
/// read-only): the daemon exits 2, as for a bad configuration, which the units do not
/// restart in a loop.
#[derive(Debug, thiserror::Error)]
#[error("refusing to start")]
pub struct Refused;

/// `e` as the start's failure: [`Refused`] when `lasting`, so the exit status says a
/// restart would not help.
pub fn refusal(e: impl Into<anyhow::Error>, lasting: bool) -> anyhow::Error {
    let e = e.into();
    if lasting { e.context(Refused) } else { e }
}

async fn serve<F, Fut>(
    spec: Spec,
    config: Config,
    peers: PeerTable,
    identity: Arc<DaemonIdentity>,
    socket_group: Option<u32>,
    build: F,
) -> anyhow::Result<()>
where
    F: FnOnce(Context) -> Fut,
    Fut: Future<Output = anyhow::Result<Serve>>,
{
    // Signal handlers first: from here on SIGTERM means a clean stop.
    let signals = ShutdownSignals::install().context("installing signal handlers")?;
    // 5. State dir.
    let state_dir = config.daemon_state_dir(spec.name);
    prepare_state_dir(&state_dir, identity.uid)?;
    // 6. Socket.
    let socket = config.socket_path(spec.name);
    let listener = bind_unix(&socket, config.socket.mode, socket_group)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let config = Arc::new(config);
    let peers = Arc::new(peers);
    let ctx = Context {
        config: config.clone(),
        peers: peers.clone(),
        identity: identity.clone(),
        state_dir,
        shutdown: stop_rx,
    };
    // 7. Routes, health, reflection.
    let served = match build(ctx).await {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&socket);
            return Err(e);
        }
    };
    let (health, health_svc) = tonic_health::server::health_reporter();
    let mut reflect_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(argos_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .with_service_name("grpc.health.v1.Health");
    let mut reflect_v1a = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(argos_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .with_service_name("grpc.health.v1.Health");
    for name in served.routes.names() {
        reflect_v1 = reflect_v1.with_service_name(name);
        reflect_v1a = reflect_v1a.with_service_name(name);
        health
            .set_service_status(name, ServingStatus::Serving)
            .await;
    }
    let daemon_svc = pb::daemon_server::DaemonServer::new(DaemonService {
        identity: identity.clone(),
    });
    let daemon_name =
        <pb::daemon_server::DaemonServer<DaemonService> as tonic::server::NamedService>::NAME;
    reflect_v1 = reflect_v1.with_service_name(daemon_name);
    reflect_v1a = reflect_v1a.with_service_name(daemon_name);
    health
        .set_service_status(daemon_name, ServingStatus::Serving)
        .await;
    let routes = served
        .routes
        .route(daemon_svc)
        .route(health_svc)
        .route(reflect_v1.build_v1().context("building reflection v1")?)
        .route(
            reflect_v1a
                .build_v1alpha()
                .context("building reflection v1alpha")?,
        );
    // Status, health and reflection are for every known peer; unknown peers get nothing.
    let policy = served
        .policy
        .service(daemon_name, RoleSet::all())
        .service("grpc.health.v1.Health", RoleSet::all())
        .service("grpc.reflection.v1.ServerReflection", RoleSet::all())
        .service("grpc.reflection.v1alpha.ServerReflection", RoleSet::all());
    tracing::info!(
        daemon = spec.name, version = crate::VERSION, pid = identity.pid, uid = identity.uid,
        socket = %socket.display(), "serving"
    );
    // The socket listens and every route is in place: a service manager may start what
    // needs it (systemd `Type=notify`), and hears from here on that the daemon lives.
    let prog = format!("argos-{}", spec.name);
    notify(&[
        NotifyState::Ready,
        NotifyState::Status(&format!("{prog}: serving on {}", socket.display())),
    ]);
    let watchdog = sd_notify::watchdog_enabled().map(|every| {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every / 2);
            loop {
                tick.tick().await;
                notify(&[NotifyState::Watchdog]);
            }
        })
    });
    // What a load took comes back once it is over: free pages are returned every 5 s.
    let memory_return = tokio::spawn(async {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            let _ = tokio::task::spawn_blocking(argos_alloc::return_free_memory).await;
        }
    });
    let background = futures_util::future::join_all(served.background);
    let background = tokio::spawn(background);
    let grace = Duration::from_millis(config.shutdown.grace_ms);
    let health_for_stop = health.clone();
    let names = routes.names();
    let signal = async move {
        signals.recv().await;
        notify(&[
            NotifyState::Stopping,
            NotifyState::Status(&format!("{prog}: stopping")),
        ]);
        for name in names.into_iter().chain([""]) {
            health_for_stop
                .set_service_status(name, ServingStatus::NotServing)
                .await;
        }
        let _ = stop_tx.send(true);
    };
    // 8. Serve until a signal; then drain and clean up.
    serve_unix(
        listener,
        &socket,
        routes,
        peers,
        Arc::new(policy),
        signal,
        grace,
    )
    .await?;
    if let Some(w) = watchdog {
        w.abort();
    }
    memory_return.abort();
    match tokio::time::timeout(grace, background).await {
        Ok(Ok(results)) => {
            for r in results {
                r.context("background task")?;
            }
        }
        Ok(Err(join)) => anyhow::bail!("background task panicked: {join}"),
        Err(_) => tracing::warn!("background tasks outlived the grace period"),
    }
    for step in served.at_last {
        match tokio::time::timeout(grace, step).await {
            Ok(r) => r.context("the stop's last step")?,
            Err(_) => tracing::warn!("a last step of the stop outlived the grace period"),
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// Tells the service manager that started the daemon (systemd, through `NOTIFY_SOCKET`)
/// where it stands; nothing when none asked to hear.
fn notify(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "telling the service manager");
    }
}

/// Refuses root and any effective capability: these daemons must hold no privilege.
fn check_unprivileged() -> Result<(), String> {
    if nix::unistd::geteuid().is_root() || nix::unistd::getuid().is_root() {
        return Err(
            "refusing to run as root: this daemon holds no privilege by design. \
                    Run it as its own unprivileged user (systemd/ has the units; \
                    `argosctl up` does this for development)"
                .into(),
        );
    }
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("reading /proc/self/status: {e}"))?;
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| v.trim().to_string())
        .ok_or("no CapEff line in /proc/self/status")?;
    if u64::from_str_radix(&cap_eff, 16).map_err(|_| format!("bad CapEff {cap_eff:?}"))? != 0 {
        return Err(format!(
            "refusing to run with effective capabilities (CapEff={cap_eff})"
        ));
    }
    Ok(())
}

/// Asks the kernel to SIGTERM us when the launcher dies, then checks it has not already.
fn die_with_parent(ppid: i32) -> Result<(), String> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
        .map_err(|e| format!("prctl(PR_SET_PDEATHSIG): {e}"))?;
    if nix::unistd::getppid().as_raw() != ppid {
        return Err(format!("launcher (pid {ppid}) is gone"));
    }
    Ok(())
}

/// Creates the state dir (0700) or checks that an existing one is ours and private.
fn prepare_state_dir(dir: &Path, uid: u32) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating state dir {}", dir.display()))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .with_context(|| format!("setting mode of {}", dir.display()))?;
            Ok(())
        }
        Err(e) => Err(e).with_context(|| format!("inspecting state dir {}", dir.display())),
        Ok(meta) => {
            anyhow::ensure!(
                meta.is_dir(),
                "state dir {} is not a directory",
                dir.display()
            );
            anyhow::ensure!(
                meta.uid() == uid,
                "state dir {} is owned by uid {}, not by this daemon (uid {uid})",
                dir.display(),
                meta.uid()
            );
            anyhow::ensure!(
                meta.mode() & 0o077 == 0,
                "state dir {} has mode {:04o}; it must not be readable by group or others (0700)",
                dir.display(),
                meta.mode() & 0o7777
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn args_parse_and_reject_unknown() {
        let a = parse_args(&os(&[
            "--config",
            "/etc/argos.toml",
            "--print-config",
            "--parent-pid",
            "7",
        ]))
        .unwrap();
        assert_eq!(a.config, Some(PathBuf::from("/etc/argos.toml")));
        assert!(a.print_config);
        assert_eq!(a.parent_pid, Some(7));
        assert!(
            parse_args(&os(&["--bogus"]))
                .unwrap_err()
                .contains("--bogus")
        );
        assert!(parse_args(&os(&["--config"])).is_err());
    }

    fn context() -> (Context, tokio::sync::watch::Sender<bool>) {
        let config = Config::parse(&Source::default()).unwrap();
        let peers = PeerTable::from_config(&config.peers, &SystemNames).unwrap();
        let (tx, rx) = tokio::sync::watch::channel(false);
        let ctx = Context {
            config: Arc::new(config),
            peers: Arc::new(peers),
            identity: Arc::new(DaemonIdentity {
                name: "test",
                pid: 1,
                uid: 1,
                started_at: SystemTime::now(),
                insecure_shared_uid: false,
                hardening: Vec::new(),
                degraded: Default::default(),
            }),
            state_dir: PathBuf::from("/nonexistent"),
            shutdown: rx,
        };
        (ctx, tx)
    }

    /// `every` ticks at once and then on its period, goes on after a failed tick, and
    /// ends at the stop; `on_shutdown` runs only then.
    /// A watched condition is said in the status while its check finds it, and goes when
    /// the check finds nothing.
    #[tokio::test]
    async fn a_watched_condition_is_in_the_status_while_it_holds() {
        let (ctx, stop) = context();
        let found = Arc::new(std::sync::Mutex::new(Some("the disk is full".to_string())));
        let f = found.clone();
        let task = tokio::spawn(ctx.watch("storage", move || {
            let now = f.lock().unwrap().clone();
            async move { now }
        }));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            ctx.identity.status(None).degraded,
            ["storage: the disk is full"]
        );
        *found.lock().unwrap() = None;
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(ctx.identity.status(None).degraded.is_empty());
        stop.send(true).unwrap();
        task.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn periodic_tasks_tick_survive_failures_and_stop_with_the_daemon() {
        let (ctx, stop) = context();
        let ticks = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let t = ticks.clone();
        let task = ctx.every("test", Duration::from_millis(20), move || {
            let n = t.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                anyhow::ensure!(n != 1, "the second tick fails");
                Ok(())
            }
        });
        let drained = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d = drained.clone();
        let last = ctx.on_shutdown(move || async move {
            d.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let (task, last) = (tokio::spawn(task), tokio::spawn(last));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while ticks.load(std::sync::atomic::Ordering::SeqCst) < 3 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "ticks stopped after a failure"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!drained.load(std::sync::atomic::Ordering::SeqCst));
        stop.send(true).unwrap();
        task.await.unwrap().unwrap();
        last.await.unwrap().unwrap();
        assert!(drained.load(std::sync::atomic::Ordering::SeqCst));
        let at_stop = ticks.load(std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(ticks.load(std::sync::atomic::Ordering::SeqCst), at_stop);
    }

    #[test]
    fn state_dir_must_be_private_and_ours() {
        let tmp = tempfile::tempdir().unwrap();
        let uid = nix::unistd::geteuid().as_raw();
        let d = tmp.path().join("execd");
        prepare_state_dir(&d, uid).unwrap();
        assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
        prepare_state_dir(&d, uid).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o750)).unwrap();
        assert!(
            prepare_state_dir(&d, uid)
                .unwrap_err()
                .to_string()
                .contains("0750")
        );
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(
            prepare_state_dir(&d, uid + 1)
                .unwrap_err()
                .to_string()
                .contains("owned by")
        );
    }
}
