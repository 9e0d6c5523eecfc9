//! argosctl: starts the development stack and inspects a running one.
#![forbid(unsafe_code)]

mod approvals;
mod jobs;
mod run;
mod stack;
mod up;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use argos_proto::common::v1::{DaemonStatus, StatusRequest};

const USAGE: &str = "usage: argosctl <command> [options]

commands:
  up        start the four daemons (dev tree under --root), wait until all are SERVING,
            print where to go; Ctrl-C or SIGTERM stops them all
              --root DIR      dev tree (default ./.argos)
              --listen ADDR   gateway HTTP address (default 127.0.0.1:7000)
              --bin-dir DIR   where the argos-* binaries are (default: next to argosctl)
              --id-base N     as root: socket group N, daemon uids N+1..N+3 (default 64200)
  status    call Status on every daemon socket of the stack (or under --runtime-dir DIR),
            each served by the uid the stack's config (its argos.toml, or --config FILE)
            names for it, or root
  run COMMAND [--profile agent|inspect|host|mcp-server] [--timeout-ms N]
            run a shell command through the stack's execd (as root or the argos group:
            an operator) and print its output, exit code and containment report
  config-reference
            print the configuration reference (docs/configuration.md)
  approvals list [--state pending|approved|denied|revoked|expired|consumed|all]
  approvals approve ID [--confirm SHORT_ID] [--note TEXT]
  approvals deny ID [--note TEXT]
            the commands agents and tasks wait to run, and an admin's decision on them
            (a destructive one needs --confirm with its short id); through the stack's
            gateway (or --url URL) with the admin API token in ARGOS_TOKEN (scope read to
            list, approve to decide)
  audit verify
            walk execd's and the gateway's hash-chained audit trails; exit 1 if either
            is broken (same gateway and ARGOS_TOKEN)
  jobs list [--state STATE] [--active] [--task ID]
  jobs show ID       a job's facts and, once it ended, its output (exit 0: succeeded,
                     1: ended otherwise, 3: not ended yet)
  jobs start COMMAND [--place auto|sandbox|inspect|host] [--name NAME] [--max-runtime-s N]
  jobs cancel ID
  jobs relaunch ID   launch an ended job again, as its next generation
            background jobs (same gateway and ARGOS_TOKEN: read; exec to start, cancel,
            relaunch)
  tasks list
  tasks show|run|pause|resume ID
  tasks approve ID --version N
            tasks (read; exec to run, pause, resume; approve, as an admin, to approve the
            version you reviewed)

Which stack: --root DIR (and --url URL) when given; else the stack `argosctl up` runs
in ./.argos, else the one it last started (recorded under $XDG_STATE_HOME/argos, or
~/.local/state/argos), else ./.argos and http://127.0.0.1:7000.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(args) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("argosctl: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> anyhow::Result<i32> {
    let Some((cmd, rest)) = args.split_first() else {
        println!("{USAGE}");
        return Ok(2);
    };
    if rest.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(0);
    }
    if cmd == "run" {
        return run_command(rest);
    }
    // Words before the first flag: a subcommand and its operand.
    let split = rest
        .iter()
        .position(|a| a.starts_with("--"))
        .unwrap_or(rest.len());
    let (words, rest) = rest.split_at(split);
    let mut flags = Flags::parse(rest)?;
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    if !matches!(cmd.as_str(), "approvals" | "audit" | "jobs" | "tasks") && !words.is_empty() {
        bail!("unexpected argument {:?}", words[0]);
    }
    match cmd.as_str() {
        "approvals" => {
            let found = find(&mut flags)?;
            let gw = approvals::Gateway::new(&found)?;
            match words.as_slice() {
                ["list"] | [] => {
                    let state = flags.take("--state").unwrap_or_else(|| "pending".into());
                    flags.finish()?;
                    approvals::list(&gw, &state)
                }
                [decision @ ("approve" | "deny"), id] => {
                    let confirm = flags.take("--confirm").unwrap_or_default();
                    let note = flags.take("--note").unwrap_or_default();
                    flags.finish()?;
                    approvals::decide(&gw, id, decision, &confirm, &note)
                }
                other => {
                    bail!("approvals: expected list, approve ID or deny ID, not {other:?}\n{USAGE}")
                }
            }
        }
        "jobs" => {
            let found = find(&mut flags)?;
            let gw = approvals::Gateway::new(&found)?;
            match words.as_slice() {
                ["list"] | [] => {
                    let mut q = String::new();
                    if let Some(s) = flags.take("--state") {
                        q.push_str(&format!("&state={s}"));
                    }
                    if let Some(t) = flags.take("--task") {
                        q.push_str(&format!("&task_id={t}"));
                    }
                    if flags.switch("--active") {
                        q.push_str("&active=true");
                    }
                    flags.finish()?;
                    jobs::list(&gw, &q)
                }
                ["show", id] => {
                    flags.finish()?;
                    jobs::show(&gw, id)
                }
                ["cancel", id] => {
                    flags.finish()?;
                    jobs::cancel(&gw, id)
                }
                ["relaunch", id] => {
                    flags.finish()?;
                    jobs::relaunch(&gw, id)
                }
                ["start", command] => {
                    let place = flags.take("--place").unwrap_or_else(|| "auto".into());
                    let name = flags.take("--name").unwrap_or_default();
                    let max = match flags.take("--max-runtime-s") {
                        Some(n) => Some(n.parse().map_err(|_| {
                            anyhow::anyhow!("--max-runtime-s: not a number: {n:?}")
                        })?),
                        None => None,
                    };
                    flags.finish()?;
                    jobs::start(&gw, command, &place, &name, max)
                }
                other => bail!(
                    "jobs: expected list, show ID, start COMMAND or cancel ID, not {other:?}\n{USAGE}"
                ),
            }
        }
        "tasks" => {
            let found = find(&mut flags)?;
            let gw = approvals::Gateway::new(&found)?;
            match words.as_slice() {
                ["list"] | [] => {
                    flags.finish()?;
                    jobs::tasks(&gw)
                }
                [verb, id] => {
                    let version = match flags.take("--version") {
                        Some(n) => Some(
                            n.parse()
                                .map_err(|_| anyhow::anyhow!("--version: not a number: {n:?}"))?,
                        ),
                        None => None,
                    };
                    flags.finish()?;
                    jobs::task(&gw, verb, id, version)
                }
                other => bail!("tasks: expected list or VERB ID, not {other:?}\n{USAGE}"),
            }
        }
        "audit" => {
            let found = find(&mut flags)?;
            let gw = approvals::Gateway::new(&found)?;
            flags.finish()?;
            match words.as_slice() {
                ["verify"] => approvals::verify(&gw),
                other => bail!("audit: expected verify, not {other:?}"),
            }
        }
        "up" => {
            let root = absolute(flags.take("--root").unwrap_or_else(|| ".argos".into()))?;
            let listen = flags
                .take("--listen")
                .unwrap_or_else(|| "127.0.0.1:7000".into());
            listen
                .parse::<std::net::SocketAddr>()
                .with_context(|| format!("--listen: not an address: {listen:?}"))?;
            let bin_dir = match flags.take("--bin-dir") {
                Some(d) => absolute(d)?,
                None => std::env::current_exe()?
                    .parent()
                    .context("argosctl has no parent dir")?
                    .to_path_buf(),
            };
            let id_base = match flags.take("--id-base") {
                Some(n) => n
                    .parse()
                    .with_context(|| format!("--id-base: not a number: {n:?}"))?,
                None => 64200,
            };
            flags.finish()?;
            let opts = up::UpOptions {
                root,
                listen,
                bin_dir,
                id_base,
                ready_timeout: Duration::from_secs(30),
            };
            // One thread: PR_SET_PDEATHSIG fires when the *thread* that forked a daemon
            // exits, so every daemon is spawned from the thread that lives longest.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(up::up(opts))
        }
        "status" => {
            let (runtime_dir, config, from) = match flags.take("--runtime-dir") {
                Some(d) => (absolute(d)?, None, "--runtime-dir".to_string()),
                None => {
                    let found = find(&mut flags)?;
                    (found.runtime_dir(), Some(found.config()), found.from)
                }
            };
            let config = flags.take("--config").map(absolute).transpose()?.or(config);
            flags.finish()?;
            let peers = config.as_deref().and_then(peer_table);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(status(runtime_dir, peers, &from))
        }
        "config-reference" => {
            flags.finish()?;
            print!("{}", argos_common::config::render_reference());
            Ok(0)
        }
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(0)
        }
        other => bail!("unknown command {other:?}\n{USAGE}"),
    }
}

/// The peer table of the stack's config at `path`, if it reads: who each daemon runs as.
fn peer_table(path: &std::path::Path) -> Option<argos_common::peer::PeerTable> {
    let text = std::fs::read_to_string(path).ok()?;
    let source = argos_common::config::Source {
        file: Some((path.display().to_string(), text)),
        env: Default::default(),
    };
    let config = argos_common::config::Config::parse(&source).ok()?;
    argos_common::peer::PeerTable::from_config(&config.peers, &argos_common::peer::SystemNames).ok()
}

/// Calls Status on each daemon. Each socket must be served by root, by us, or by the uid
/// the stack's config names for that daemon (`peers`, when the config was found): one
/// served by anyone else is refused before anything is sent, and shown as an error.
async fn status(
    runtime_dir: PathBuf,
    peers: Option<argos_common::peer::PeerTable>,
    from: &str,
) -> anyhow::Result<i32> {
    use argos_common::connect::ServerUids;
    let mut code = 0;
    println!("stack: {} ({from})", runtime_dir.display());
    println!(
        "{:<9} {:<8} {:>8} {:>6}  {:<10} you are",
        "daemon", "version", "pid", "uid", "state"
    );
    for daemon in argos_common::grpc::Daemon::ALL {
        let d = daemon.name();
        let servers = peers.as_ref().map_or_else(ServerUids::root_or_self, |p| {
            ServerUids::for_daemon(p, daemon)
        });
        let socket = argos_common::connect::socket_path(&runtime_dir, d);
        let ch = argos_common::connect::unix_channel(&socket, servers);
        let req = tonic::Request::new(StatusRequest {});
        let fut = argos_common::grpc::daemon_status(ch, req);
        match tokio::time::timeout(Duration::from_secs(3), fut).await {
            Ok(Ok(s)) => print_status(d, &s),
            Ok(Err(s)) => {
                code = 1;
                println!(
                    "{d:<9} {:<8} {:>8} {:>6}  {:<10} ({}: {})",
                    "-",
                    "-",
                    "-",
                    "error",
                    socket.display(),
                    s.message()
                );
            }
            Err(_) => {
                code = 1;
                println!(
                    "{d:<9} {:<8} {:>8} {:>6}  {:<10} ({})",
                    "-",
                    "-",
                    "-",
                    "timeout",
                    socket.display()
                );
            }
        }
    }
    Ok(code)
}

fn print_status(d: &str, s: &DaemonStatus) {
    let roles: Vec<&str> = s
        .peer_roles
        .iter()
        .map(|r| argos_common::daemon::role_from_proto(*r).map_or("?", |r| r.as_str()))
        .collect();
    let state = if s.insecure_shared_uid {
        "INSECURE"
    } else {
        "serving"
    };
    println!(
        "{d:<9} {:<8} {:>8} {:>6}  {state:<10} {}",
        s.version,
        s.pid,
        s.uid,
        roles.join("+")
    );
}

/// `argosctl run [--profile P] [--timeout-ms N] [--root DIR] COMMAND…`: options anywhere,
/// every other word is the command (joined by spaces, run by `/bin/sh -c`).
fn run_command(args: &[String]) -> anyhow::Result<i32> {
    let mut pairs = Vec::new();
    let mut words = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if matches!(
            a.as_str(),
            "--profile" | "--timeout-ms" | "--root" | "--url"
        ) {
            let v = it.next().with_context(|| format!("{a} needs a value"))?;
            pairs.push(a.clone());
            pairs.push(v.clone());
        } else {
            words.push(a.as_str());
        }
    }
    let mut flags = Flags::parse(&pairs)?;
    let found = find(&mut flags)?;
    let profile = flags.take("--profile").unwrap_or_default();
    let timeout_ms = flags
        .take("--timeout-ms")
        .map(|t| {
            t.parse::<u64>()
                .with_context(|| format!("--timeout-ms: not a number: {t:?}"))
        })
        .transpose()?;
    if words.is_empty() {
        bail!("run: give the command, e.g. argosctl run 'id; ps ax'");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run::run(&found, words.join(" "), profile, timeout_ms))
}

/// The stack `--root` and `--url` name, or the one running (`stack.rs`).
fn find(flags: &mut Flags) -> anyhow::Result<stack::Found> {
    let root = flags.take("--root").map(absolute).transpose()?;
    Ok(stack::find(root, flags.take("--url")))
}

fn absolute(p: String) -> anyhow::Result<PathBuf> {
    let p = PathBuf::from(p);
    Ok(if p.is_absolute() {
        p
    } else {
        std::env::current_dir()?.join(p)
    })
}

/// `--flag value` pairs; every flag takes a value.
/// Options given alone, without a value.
const SWITCHES: &[&str] = &["--active"];

struct Flags(Vec<(String, String)>);

impl Flags {
    fn parse(args: &[String]) -> anyhow::Result<Flags> {
        let mut out = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if !a.starts_with("--") {
                bail!("unexpected argument {a:?}");
            }
            // Switches take no value.
            if SWITCHES.contains(&a.as_str()) {
                out.push((a.clone(), String::new()));
                continue;
            }
            let v = it.next().with_context(|| format!("{a} needs a value"))?;
            out.push((a.clone(), v.clone()));
        }
        Ok(Flags(out))
    }
    fn switch(&mut self, name: &str) -> bool {
        self.take(name).is_some()
    }
    fn take(&mut self, name: &str) -> Option<String> {
        let i = self.0.iter().position(|(k, _)| k == name)?;
        Some(self.0.remove(i).1)
    }
    fn finish(self) -> anyhow::Result<()> {
        match self.0.first() {
            None => Ok(()),
            Some((k, _)) => bail!("unknown option {k}"),
        }
    }
}
