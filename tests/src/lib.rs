//! Test harness: starts the real Argos stack (`argosctl up`, the real daemons) in a
//! temporary root, with distinct uids when the tests run as root, and always tears it down.
//!
//! ```no_run
//! let stack = argos_tests::StackBuilder::new().start();
//! let sock = stack.socket("execd");
//! // ... talk to it ...
//! stack.stop(); // asserts a clean stop: exit 0, no process and no socket left behind
//! ```
#![forbid(unsafe_code)]

pub mod mcp_client;
pub mod mcp_peer;
pub mod measure;
pub mod readme;
pub mod runs;
pub mod web;

/// The password [`Stack::admin`] gives the first admin.
pub const ADMIN_PASSWORD: &str = "correct horse battery";

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The daemons, in start order.
pub const DAEMONS: [&str; 4] = argos_common::grpc::Daemon::NAMES;

/// Ids `argosctl up` uses when root (its default `--id-base`).
pub const ID_BASE: u32 = 64200;
pub const SOCKET_GID: u32 = ID_BASE;
pub const GATEWAY_UID: u32 = ID_BASE + 1;
pub const MCP_UID: u32 = ID_BASE + 2;
pub const JOB_UID: u32 = ID_BASE + 3;

/// Directory holding the workspace's built binaries (`target/<profile>`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test-binary>, or target/<profile>/<bench-binary>
    let here = exe.parent().expect("exe dir");
    let dir = if here.join("argosctl").exists() {
        here.to_path_buf()
    } else {
        here.parent().expect("target dir").to_path_buf()
    };
    let ctl = dir.join("argosctl");
    assert!(
        ctl.exists(),
        "{} is missing: build the workspace before the tests (`cargo build --workspace`)",
        ctl.display()
    );
    dir
}

/// Path of one workspace binary, checked to exist.
pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --workspace` first",
        p.display()
    );
    p
}

/// A command for one workspace binary, with inherited `ARGOS_*` variables removed.
pub fn command(name: &str) -> Command {
    let mut cmd = Command::new(reachable_bin_dir().join(name));
    sanitize_env(&mut cmd);
    cmd
}

/// True when the tests run as root (CI does): privilege separation is then real.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Panics with a clear message unless running as root.
pub fn require_root(what: &str) {
    assert!(
        is_root(),
        "{what} needs root (distinct uids, setuid clients); CI runs as root. Run the suite as root."
    );
}

/// Removes any `ARGOS_*` variable the test process inherited, so that the daemons under
/// test read exactly the config the test wrote.
pub fn sanitize_env(cmd: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("ARGOS_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// A free loopback port for a server a test starts (checked free, then released).
///
/// Taken from 20000..32000, below the kernel's ephemeral range (32768 and up), one after
/// another within a test process: a port released here is never handed out again by
/// this function in the same process, nor by the kernel to a `bind(0)` or an outgoing
/// connection, while the server that is to bind it is still starting. (Asking the kernel
/// for port 0 and releasing it lets a parallel test's server take it in between.)
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const BAND: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    // Each process starts at its own place in the band.
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id() % BAND,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..BAND {
        let port = (FIRST + NEXT.fetch_add(1, Ordering::Relaxed) % BAND) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FIRST}..{}", FIRST + BAND);
}

/// The benchmarks' and the probe's command lines: `--help` (or `-h`) prints `usage` and
/// exits 0.
pub fn answer_help(usage: &str) {
    if std::env::args().skip(1).any(|a| a == "--help" || a == "-h") {
        println!("{usage}");
        std::process::exit(0);
    }
}

/// An argument a benchmark does not take: named, with the usage, exit 2 (no panic).
pub fn bad_argument(usage: &str, arg: &str) -> ! {
    eprintln!("unknown argument {arg:?}\n{usage}");
    std::process::exit(2)
}

/// A temp dir every uid can traverse.
pub fn open_tempdir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("argos-test-")
        .tempdir()
        .expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Whom tests trust to serve a socket: root, the test's own uid and the dev stack's
/// daemon uids.
pub fn servers() -> argos_common::connect::ServerUids {
    argos_common::connect::ServerUids::of([
        0,
        nix::unistd::geteuid().as_raw(),
        GATEWAY_UID,
        MCP_UID,
        JOB_UID,
    ])
}

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .to_path_buf()
}

/// A gRPC channel to a test stack's socket.
pub fn channel(socket: &Path) -> tonic::transport::Channel {
    argos_common::connect::unix_channel(socket, servers())
}

/// Configures a stack before starting it.
#[derive(Debug, Default)]
pub struct StackBuilder {
    listen_port: Option<u16>,
    run_as: Option<u32>,
    env: Vec<(String, String)>,
}

impl StackBuilder {
    pub fn new() -> StackBuilder {
        StackBuilder::default()
    }

    pub fn listen_port(mut self, port: u16) -> Self {
        self.listen_port = Some(port);
        self
    }

    /// Sets an environment variable for the launcher and so for every daemon, e.g. an
    /// `ARGOS_*` config override.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Runs `argosctl up` as this (non-root) uid, with the same gid: the one-user
    /// development mode, where every daemon shares that uid.
    pub fn run_as(mut self, uid: u32) -> Self {
        self.run_as = Some(uid);
        self
    }

    /// Starts `argosctl up` and waits until it reports all four daemons SERVING.
    pub fn start(self) -> Stack {
        let root = open_tempdir();
        if let Some(uid) = self.run_as {
            std::os::unix::fs::chown(root.path(), Some(uid), Some(uid)).expect("chown stack root");
        }
        let listen = SocketAddr::from(([127, 0, 0, 1], self.listen_port.unwrap_or_else(free_port)));
        let mut stack = Stack {
            root,
            child: None,
            listen,
            log: Arc::new(Mutex::new(String::new())),
            ready_line: String::new(),
            builder: self,
            seen: Vec::new(),
        };
        stack.launch();
        stack
    }
}

impl Stack {
    /// Runs `argosctl up` on this stack's root and address and waits until it is ready.
    fn launch(&mut self) {
        if let Err(why) = self.try_launch() {
            panic!("{why}");
        }
    }

    /// Runs `argosctl up` and waits until it is ready, or says why it is not.
    fn try_launch(&mut self) -> Result<(), String> {
        let mut child = command("argosctl")
            .arg("up")
            .arg("--root")
            .arg(self.root.path())
            .arg("--listen")
            .arg(self.listen.to_string())
            .arg("--bin-dir")
            .arg(reachable_bin_dir())
            .uid_gid(self.builder.run_as)
            // Its "current stack" pointer stays in its own tree.
            .env("XDG_STATE_HOME", self.root.path().join("xdg-state"))
            .envs(self.builder.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning argosctl up");
        let log = self.log.clone();
        let stderr = child.stderr.take().unwrap();
        let err_log = log.clone();
        std::thread::spawn(move || drain(stderr, err_log));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let out_log = log.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            let mut up_line = String::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                out_log.lock().unwrap().push_str(&format!("{line}\n"));
                if line.starts_with("Argos is up") {
                    up_line = line.clone();
                }
                // The banner's last line: everything before it has been logged.
                if line.starts_with("Ctrl-C stops the stack")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(up_line.clone());
                }
            }
        });
        self.child = Some(child);
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                self.ready_line = line;
                self.remember_processes();
                Ok(())
            }
            Err(_) => {
                let status = self.child.as_mut().unwrap().try_wait();
                Err(format!(
                    "argosctl up did not become ready (status {status:?}); its output:\n{}",
                    self.log()
                ))
            }
        }
    }

    /// Stops the stack cleanly, runs `between` with nothing of it running (to change its
    /// files as an attacker with the disk would), and starts it again on the same root.
    pub fn restart_with(&mut self, between: impl FnOnce(&Path)) {
        let status = self.terminate();
        assert!(status.success(), "argosctl up exited with {status}");
        self.child = None;
        self.assert_nothing_left();
        between(self.root.path());
        self.launch();
    }

    /// As [`Stack::restart_with`], for a change the stack must refuse to start on: its
    /// start fails, leaving nothing running, and its output is returned.
    pub fn restart_refused_with(&mut self, between: impl FnOnce(&Path)) -> String {
        let status = self.terminate();
        assert!(status.success(), "argosctl up exited with {status}");
        self.child = None;
        self.assert_nothing_left();
        between(self.root.path());
        if self.try_launch().is_ok() {
            panic!("the stack started; its output:\n{}", self.log());
        }
        let mut child = self.child.take().expect("argosctl up was started");
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "argosctl up did not end");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(!status.success(), "argosctl up exited with {status}");
        self.assert_nothing_left();
        self.log()
    }
}

fn drain(mut r: impl Read, log: Arc<Mutex<String>>) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        log.lock()
            .unwrap()
            .push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// A running stack. Call [`Stack::stop`] to assert a clean stop; dropping kills it.
pub struct Stack {
    root: tempfile::TempDir,
    child: Option<Child>,
    pub listen: SocketAddr,
    log: Arc<Mutex<String>>,
    /// The "Argos is up ..." line `argosctl up` printed.
    pub ready_line: String,
    builder: StackBuilder,
    /// Every process seen under `argosctl up` (when it was ready, and before each stop):
    /// none may outlive the stack.
    seen: Vec<Known>,
}

impl Stack {
    /// The gateway's address.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    pub fn socket(&self, daemon: &str) -> PathBuf {
        argos_common::connect::socket_path(&self.root.path().join("run"), daemon)
    }

    pub fn config_path(&self) -> PathBuf {
        self.root.path().join("argos.toml")
    }

    /// `argosctl`, for a command about this stack, run hermetically: in the stack's root,
    /// with the stack's own state dir (where its `up` keeps the pointer to it), so that
    /// nothing of the real user's (`~/.local/state`, a `./.argos`) is read or written.
    pub fn argosctl(&self) -> Command {
        let mut cmd = command("argosctl");
        cmd.current_dir(self.root.path())
            .env("XDG_STATE_HOME", self.root.path().join("xdg-state"));
        cmd
    }

    /// A client of this stack's execd (the library every Argos daemon uses).
    pub fn exec(&self) -> argos_exec_client::ExecClient {
        argos_exec_client::ExecClient::connect_socket(&self.socket("execd"), self.server_uids())
    }

    /// The uids this stack's daemons run as: whom a test trusts to serve its sockets.
    pub fn server_uids(&self) -> argos_common::connect::ServerUids {
        argos_common::connect::ServerUids::of(
            [0, GATEWAY_UID, MCP_UID, JOB_UID]
                .into_iter()
                .chain(self.builder.run_as),
        )
    }

    /// Everything `argosctl up` and the daemons have printed so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The one-time setup link's secret the gateway logs on its first start.
    pub fn setup_secret(&self) -> String {
        self.wait_log("/setup#", 1);
        let log = self.log();
        let at = log.find("/setup#").expect("logged") + "/setup#".len();
        log[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect()
    }

    /// Creates the first admin (`root-admin`) through the setup link; returns its
    /// logged-in client.
    pub fn admin(&self) -> web::Web {
        let mut admin = web::Web::new(self.listen);
        let r = admin.post(
            "/api/setup",
            serde_json::json!({"token": self.setup_secret(), "name": "root-admin",
                "password": ADMIN_PASSWORD}),
        );
        assert_eq!(r.status, 200, "{r:?}");
        admin
    }

    /// The first admin `root-admin` and a user `bob`, both logged in.
    pub fn admin_and_user(&self) -> (web::Web, web::Web) {
        let mut admin = self.admin();
        let r = admin.post(
            "/api/users",
            serde_json::json!({"name": "bob", "password": ADMIN_PASSWORD, "role": "user"}),
        );
        assert_eq!(r.status, 201, "{r:?}");
        let mut bob = web::Web::new(self.listen);
        let r = bob.post(
            "/api/login",
            serde_json::json!({"name": "bob", "password": ADMIN_PASSWORD}),
        );
        assert_eq!(r.status, 200, "{r:?}");
        (admin, bob)
    }

    /// Waits until the output contains `needle` at least `count` times (output is relayed
    /// asynchronously); panics with the output after 10 s.
    pub fn wait_log(&self, needle: &str, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.log().matches(needle).count() < count {
            assert!(
                Instant::now() < deadline,
                "output never showed {needle:?} {count} times:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Pid of the `argosctl up` process.
    pub fn launcher_pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// Pids of the processes still running from this stack (launcher excluded).
    pub fn daemon_pids(&self) -> Vec<(i32, String)> {
        processes_mentioning(self.root.path())
            .into_iter()
            .filter(|(pid, _)| *pid != self.launcher_pid())
            .collect()
    }

    /// The pid of the running `argos-<daemon>`.
    pub fn daemon_pid(&self, daemon: &str) -> i32 {
        let running = self.daemon_pids();
        let name = format!("argos-{daemon}");
        running
            .iter()
            .find(|(_, cmd)| {
                cmd.split(' ')
                    .next()
                    .is_some_and(|exe| exe.rsplit('/').next() == Some(name.as_str()))
            })
            .unwrap_or_else(|| panic!("no running argos-{daemon}: {running:?}"))
            .0
    }

    /// Kills one daemon with SIGKILL (`argosctl up` then stops the others and exits) and
    /// starts the stack again on the same root, as a supervisor would after a crash.
    /// What the killed daemon left (its launches, for execd) is left for the next start.
    pub fn crash_and_restart(&mut self, daemon: &str) {
        self.crash_all_and_restart(&[daemon]);
    }

    /// Kills several daemons with SIGKILL at once (none hears of the others' end), then
    /// starts the stack again on the same root.
    pub fn crash_all_and_restart(&mut self, daemons: &[&str]) {
        self.crash_all_and_restart_with(daemons, |_| {});
    }

    /// As [`Stack::crash_all_and_restart`], with `between` run on the stack's root while
    /// they are down (someone with the disk, or what the crash left behind).
    pub fn crash_all_and_restart_with(&mut self, daemons: &[&str], between: impl FnOnce(&Path)) {
        let pids: Vec<i32> = daemons.iter().map(|d| self.daemon_pid(d)).collect();
        let all: Vec<i32> = ["execd", "gatewayd", "mcpd", "jobd"]
            .map(|d| self.daemon_pid(d))
            .into();
        for pid in &pids {
            kill(Pid::from_raw(*pid), Signal::SIGKILL).expect("SIGKILL");
        }
        // `argosctl up` would start them again, as systemd would: it goes too (before it
        // can), and the daemons left hear of its end (PR_SET_PDEATHSIG: SIGTERM) and
        // stop as for a restart — execd leaves its launches for the next start.
        kill(Pid::from_raw(self.launcher_pid()), Signal::SIGKILL).expect("SIGKILL");
        let _ = self.wait_exit(Duration::from_secs(30));
        self.child = None;
        let deadline = Instant::now() + Duration::from_secs(20);
        while all
            .iter()
            .any(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        {
            assert!(
                Instant::now() < deadline,
                "the stack's daemons did not end with their launcher"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        between(self.root.path());
        self.launch();
        let now = self.daemon_pids();
        for pid in pids {
            assert!(now.iter().all(|(p, _)| *p != pid), "{pid} is still running");
        }
    }

    /// Sends SIGTERM to `argosctl up` and waits for it to exit.
    pub fn terminate(&mut self) -> ExitStatus {
        self.remember_processes();
        let pid = self.launcher_pid();
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        self.wait_exit(Duration::from_secs(20))
    }

    /// Waits for `argosctl up` to exit on its own.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let child = self.child.as_mut().unwrap();
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "argosctl up did not exit within {limit:?}; output:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Adds every process now under `argosctl up` (daemons, warm shims, launches' shims,
    /// their inits and workloads) to those that must not outlive the stack.
    fn remember_processes(&mut self) {
        if let Some(child) = &self.child {
            for k in descendants(child.id() as i32) {
                if !self.seen.contains(&k) {
                    self.seen.push(k);
                }
            }
        }
    }

    /// What of this stack still runs: a process mentioning its root, any process seen
    /// under its `argosctl up`, the shim and init of any launch its receipts name (a launch
    /// re-adopted after a crash is no one's child), and everything below those.
    pub fn leftovers(&self) -> Vec<(i32, String)> {
        let mut known: Vec<Known> = self.seen.clone();
        known.extend(launch_receipts(
            &self.root.path().join("state/execd/launches"),
        ));
        leftovers(self.root.path(), &known)
    }

    /// Asserts nothing of this stack is left: no process of it (see [`Stack::leftovers`];
    /// warm shims end a moment after execd, so it waits up to 5 s), no socket.
    pub fn assert_nothing_left(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut left = self.leftovers();
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            left = self.leftovers();
        }
        assert!(
            left.is_empty(),
            "processes left behind: {left:?}\noutput:\n{}",
            self.log()
        );
        for d in DAEMONS {
            let s = self.socket(d);
            assert!(!s.exists(), "socket left behind: {}", s.display());
        }
    }

    /// Stops the stack with SIGTERM and asserts a clean stop: nothing of it left, and
    /// each daemon's database whole in its file (its write-ahead log checkpointed away).
    pub fn stop(self) {
        self.stop_and(|| {});
    }

    /// As [`Stack::stop`], then `then` before the stack's files go (a file system the
    /// test mounted over a daemon's state taken off).
    pub fn stop_and(mut self, then: impl FnOnce()) {
        let status = self.terminate();
        assert!(
            status.success(),
            "argosctl up exited with {status}; output:\n{}",
            self.log()
        );
        self.assert_nothing_left();
        self.child = None;
        for (dir, db) in [
            ("execd", "execd.db"),
            ("gatewayd", "gateway.db"),
            ("jobd", "jobd.db"),
            ("mcpd", "mcpd.db"),
        ] {
            let wal = self.root().join(format!("state/{dir}/{db}-wal"));
            let left = std::fs::metadata(&wal).map_or(0, |m| m.len());
            assert_eq!(
                left,
                0,
                "{} holds {left} bytes after a clean stop: rows only in the log",
                wal.display()
            );
        }
        then();
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.remember_processes();
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            // Its stop gives execd 10 s to end every launch.
            let deadline = Instant::now() + Duration::from_secs(20);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        // The daemons die with the launcher (PR_SET_PDEATHSIG), and its stop ends every
        // launch; kill whatever of the stack is left anyway (a launch a crash left too).
        for (pid, _) in self.leftovers() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// A process known by its pid and start time (a pid the kernel hands out again is not it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub pid: i32,
    /// Field 22 of `/proc/<pid>/stat`: clock ticks after boot.
    pub start: u64,
}

/// A process's state, parent and start time, from `/proc/<pid>/stat` (its command's name
/// may hold spaces and parentheses: the fields are counted after the last `)`).
fn proc_stat(pid: i32) -> Option<(char, i32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    Some((
        rest.first()?.chars().next()?,
        rest.get(1)?.parse().ok()?,
        rest.get(19)?.parse().ok()?,
    ))
}

/// Every pid in /proc.
fn pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Every live process below `root` (by parent pids), `root` excluded.
pub fn descendants(root: i32) -> Vec<Known> {
    let table: Vec<(i32, i32, u64)> = pids()
        .into_iter()
        .filter_map(|pid| {
            let (state, ppid, start) = proc_stat(pid)?;
            (state != 'Z').then_some((pid, ppid, start))
        })
        .collect();
    let mut out: Vec<Known> = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for (pid, ppid, start) in &table {
            if *ppid == parent && !out.iter().any(|k| k.pid == *pid) {
                out.push(Known {
                    pid: *pid,
                    start: *start,
                });
                parents.push(*pid);
            }
        }
    }
    out
}

/// The shim and init every launch receipt (`<launches>/<id>/spec.json`) names: execd
/// records them when it hands a launch over.
pub fn launch_receipts(launches: &Path) -> Vec<Known> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(launches).into_iter().flatten().flatten() {
        let Ok(text) = std::fs::read(e.path().join("spec.json")) else {
            continue;
        };
        let Ok(spec) = serde_json::from_slice::<serde_json::Value>(&text) else {
            continue;
        };
        for who in ["shim", "init"] {
            let id = &spec[who];
            if let (Some(pid), Some(start)) = (id["pid"].as_i64(), id["start_time"].as_u64()) {
                out.push(Known {
                    pid: pid as i32,
                    start,
                });
            }
        }
    }
    out
}

/// Which of `known` still run (a zombie does not: it is its parent's to reap, and that
/// parent, if it is ours, is here itself), with everything below them, and every process
/// whose command line mentions `root`; each with its command line.
pub fn leftovers(root: &Path, known: &[Known]) -> Vec<(i32, String)> {
    let mut out = processes_mentioning(root);
    let alive = known.iter().filter(|k| {
        proc_stat(k.pid).is_some_and(|(state, _, start)| start == k.start && state != 'Z')
    });
    for k in alive {
        for pid in std::iter::once(k.pid).chain(descendants(k.pid).into_iter().map(|d| d.pid)) {
            if !out.iter().any(|(p, _)| *p == pid) {
                out.push((pid, describe(pid)));
            }
        }
    }
    out
}

/// A process as `ps` would name it: its command line, or `[comm]` without one.
fn describe(pid: i32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    let cmd = cmd.trim();
    if cmd.is_empty() {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        format!("[{}]", comm.trim())
    } else {
        cmd.to_string()
    }
}

/// Processes whose command line mentions `needle` (each daemon's `--config` lies under
/// its stack's root, so this finds every process a stack started).
/// Waits up to `limit` for no process to mention `needle`; returns those still left.
/// (Warm shims end on their own when execd's end of their pipe closes, a moment after
/// execd.)
pub fn processes_mentioning_after(needle: &Path, limit: Duration) -> Vec<(i32, String)> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left = processes_mentioning(needle);
        if left.is_empty() || std::time::Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn processes_mentioning(needle: &Path) -> Vec<(i32, String)> {
    let needle = needle.to_string_lossy().to_string();
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
        if cmd.contains(&needle) {
            // A zombie has an empty cmdline, so anything here is alive.
            out.push((pid, cmd.trim().to_string()));
        }
    }
    out
}

/// One daemon run on its own (no launcher), for tests that kill and restart it.
pub struct Standalone {
    pub name: &'static str,
    pub root: tempfile::TempDir,
    child: Option<Child>,
}

impl Standalone {
    /// Starts `argos-<name>` as the current user with runtime and state under a new temp
    /// root, and waits for its socket to answer.
    pub fn start(name: &'static str) -> Standalone {
        Self::start_with(name, "")
    }

    /// Like [`Standalone::start`], with extra keys for the config's `[exec]` table.
    pub fn start_with(name: &'static str, extra: &str) -> Standalone {
        let root = open_tempdir();
        let cfg = root.path().join("argos.toml");
        std::fs::write(
            &cfg,
            format!(
                "runtime_dir = \"{0}/run\"\nstate_dir = \"{0}/state\"\n[gateway]\nlisten = \"127.0.0.1:0\"\n[exec]\nwork_dir = \"{0}/work\"\n{extra}",
                root.path().display()
            ),
        )
        .unwrap();
        let mut s = Standalone {
            name,
            root,
            child: None,
        };
        s.restart();
        s
    }

    pub fn socket(&self) -> PathBuf {
        argos_common::connect::socket_path(&self.root.path().join("run"), self.name)
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap_or(0)
    }

    /// (Re)starts the daemon on the same root and waits until it serves.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = command(&format!("argos-{}", self.name))
            .arg("--config")
            .arg(self.root.path().join("argos.toml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while probe(&self.socket(), None, None).json["ok"] != true {
            assert!(
                Instant::now() < deadline,
                "argos-{} did not come up",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// kill -9: no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGTERM);
            let _ = c.wait();
        }
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        self.kill9();
        // kill -9 leaves its launches running (as a crash does): end them too.
        let launches = self.root.path().join("state/execd/launches");
        for (pid, _) in leftovers(self.root.path(), &launch_receipts(&launches)) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// Result of running the probe client.
#[derive(Debug)]
pub struct ProbeResult {
    pub status: ExitStatus,
    pub json: serde_json::Value,
    pub stderr: String,
}

/// Runs `argos-probe SOCKET ARGS…` as `uid` (in the socket group) and answers the JSON
/// it printed: a launch, a stdio MCP server's registration or start, as that peer would.
pub fn probe_as(socket: &Path, uid: u32, args: &[&str]) -> serde_json::Value {
    use std::os::unix::process::CommandExt as _;
    let out = command("argos-probe")
        .arg(socket)
        .args(args)
        .uid(uid)
        .gid(SOCKET_GID)
        .output()
        .expect("running argos-probe");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// Runs `argos-probe` (a minimal gRPC client) against a socket, optionally as another
/// uid/gid (std drops supplementary groups when root sets a uid).
pub fn probe(socket: &Path, as_ids: Option<(u32, u32)>, principal: Option<&str>) -> ProbeResult {
    let mut cmd = Command::new(reachable_probe());
    cmd.arg(socket);
    if let Some(p) = principal {
        cmd.arg("--principal").arg(p);
    }
    if let Some((uid, gid)) = as_ids {
        cmd.uid(uid).gid(gid);
    }
    let out = cmd.output().expect("running argos-probe");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "probe printed non-JSON ({e}): {stdout:?}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    ProbeResult {
        status: out.status,
        json,
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}

use std::os::unix::process::CommandExt as _;

trait UidGid {
    fn uid_gid(&mut self, ids: Option<u32>) -> &mut Self;
}

impl UidGid for Command {
    fn uid_gid(&mut self, ids: Option<u32>) -> &mut Self {
        if let Some(id) = ids {
            self.uid(id).gid(id);
        }
        self
    }
}

/// The build dir when every uid can reach it; otherwise a shared copy of the binaries
/// (argosctl would copy them itself, but a non-root launcher must reach argosctl first).
pub fn reachable_bin_dir() -> PathBuf {
    static COPY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    COPY.get_or_init(|| {
        let dir = bin_dir();
        if argos_common::paths::reachable_by_others(&dir.join("argosctl")) {
            return dir;
        }
        // One shared place per build dir, refreshed by each test process.
        let hash = argos_common::paths::stable_hash(dir.as_os_str().as_encoded_bytes());
        let to = std::env::temp_dir().join(format!("argos-test-bin-{hash:016x}"));
        std::fs::create_dir_all(&to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
        for name in [
            "argosctl",
            "argos-execd",
            "argos-shim",
            "argos-mcpd",
            "argos-jobd",
            "argos-gatewayd",
            "argos-probe",
        ] {
            let tmp = to.join(format!(".{name}.{}.tmp", std::process::id()));
            // A hard link is enough (reachability is about the directories).
            if std::fs::hard_link(dir.join(name), &tmp).is_err() {
                std::fs::copy(dir.join(name), &tmp).unwrap();
            }
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::rename(&tmp, to.join(name)).unwrap();
        }
        to
    })
    .clone()
}

/// The probe binary, somewhere every uid can exec it.
fn reachable_probe() -> PathBuf {
    reachable_bin_dir().join("argos-probe")
}
