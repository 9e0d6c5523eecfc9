//! argosctl: starts the development stack and inspects a running one.
#![forbid(unsafe_code)]

mod approvals;
mod cli;
mod jobs;
mod listener;
mod run;
mod stack;
mod up;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use argos_proto::common::v1::{DaemonStatus, StatusRequest};
use clap::{CommandFactory as _, Parser as _};

use cli::{ApprovalsCommand, AuditCommand, Cli, Command, JobsCommand, StackArgs, TasksCommand};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and version print and exit 0; bad usage prints why and exits 2.
        Err(e) => e.exit(),
    };
    match run(cli.command) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("argosctl: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Approvals { stack, command } => {
            let gw = approvals::Gateway::new(&find(stack)?)?;
            match command.unwrap_or(ApprovalsCommand::List {
                state: cli::ApprovalState::Pending,
            }) {
                ApprovalsCommand::List { state } => approvals::list(&gw, state.as_str()),
                ApprovalsCommand::Approve { id, confirm, note } => approvals::decide(
                    &gw,
                    &id,
                    "approve",
                    &confirm.unwrap_or_default(),
                    &note.unwrap_or_default(),
                ),
                ApprovalsCommand::Deny { id, note } => {
                    approvals::decide(&gw, &id, "deny", "", &note.unwrap_or_default())
                }
            }
        }
        Command::Jobs { stack, command } => {
            let gw = approvals::Gateway::new(&find(stack)?)?;
            match command.unwrap_or(JobsCommand::List {
                state: None,
                active: false,
                task: None,
            }) {
                JobsCommand::List {
                    state,
                    active,
                    task,
                } => {
                    let mut q = String::new();
                    if let Some(s) = state {
                        q.push_str(&format!("&state={}", query_value(&s)?));
                    }
                    if let Some(t) = task {
                        q.push_str(&format!("&task_id={}", query_value(&t)?));
                    }
                    if active {
                        q.push_str("&active=true");
                    }
                    jobs::list(&gw, &q)
                }
                JobsCommand::Show { id } => jobs::show(&gw, &id),
                JobsCommand::Cancel { id } => jobs::cancel(&gw, &id),
                JobsCommand::Relaunch { id } => jobs::relaunch(&gw, &id),
                JobsCommand::Start {
                    command,
                    place,
                    name,
                    max_runtime_s,
                } => jobs::start(
                    &gw,
                    &command,
                    place.as_str(),
                    &name.unwrap_or_default(),
                    max_runtime_s,
                ),
            }
        }
        Command::Tasks { stack, command } => {
            let gw = approvals::Gateway::new(&find(stack)?)?;
            match command.unwrap_or(TasksCommand::List) {
                TasksCommand::List => jobs::tasks(&gw),
                TasksCommand::Show { id } => jobs::task(&gw, "show", &id, None),
                TasksCommand::Run { id } => jobs::task(&gw, "run", &id, None),
                TasksCommand::Pause { id } => jobs::task(&gw, "pause", &id, None),
                TasksCommand::Resume { id } => jobs::task(&gw, "resume", &id, None),
                TasksCommand::Approve { id, version } => {
                    jobs::task(&gw, "approve", &id, Some(version))
                }
            }
        }
        Command::Audit { stack, command } => {
            let gw = approvals::Gateway::new(&find(stack)?)?;
            match command {
                AuditCommand::Verify => approvals::verify(&gw),
            }
        }
        Command::Up {
            root,
            listen,
            bin_dir,
            id_base,
            keep_launches,
        } => {
            let bin_dir = match bin_dir {
                Some(d) => absolute(d)?,
                None => std::env::current_exe()?
                    .parent()
                    .context("argosctl has no parent dir")?
                    .to_path_buf(),
            };
            let opts = up::UpOptions {
                root: absolute(root)?,
                listen: listen.to_string(),
                bin_dir,
                id_base,
                ready_timeout: Duration::from_secs(30),
                keep_launches,
            };
            // One thread: PR_SET_PDEATHSIG fires when the *thread* that forked a daemon
            // exits, so every daemon is spawned from the thread that lives longest.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(up::up(opts))
        }
        Command::Status {
            stack,
            runtime_dir,
            config,
        } => {
            let (runtime_dir, found_config, from) = match runtime_dir {
                Some(d) => (absolute(d)?, None, "--runtime-dir".to_string()),
                None => {
                    let found = find(stack)?;
                    (found.runtime_dir, Some(found.config), found.from)
                }
            };
            let config = config.map(absolute).transpose()?.or(found_config);
            let peers = config.as_deref().and_then(peer_table);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(status(runtime_dir, peers, &from))
        }
        Command::Run {
            stack,
            profile,
            timeout_ms,
            command,
        } => {
            let found = find(stack)?;
            let profile = profile.map(|p| p.as_str().to_string()).unwrap_or_default();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(run::run(&found, command.join(" "), profile, timeout_ms))
        }
        Command::ConfigReference => {
            print!("{}", argos_common::config::render_reference());
            Ok(0)
        }
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "argosctl", &mut std::io::stdout());
            Ok(0)
        }
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

/// The stack `--root` and `--url` name, or the one running (`stack.rs`).
fn find(args: StackArgs) -> anyhow::Result<stack::Found> {
    let root = args.root.map(absolute).transpose()?;
    Ok(stack::find(&stack::Places::of_process(), root, args.url))
}

/// A value for the gateway's query string: the words a filter takes, nothing to escape.
fn query_value(v: &str) -> anyhow::Result<&str> {
    if v.is_empty()
        || !v
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        bail!("{v:?}: expected a state or an id (letters, digits, - and _)");
    }
    Ok(v)
}

fn absolute(p: PathBuf) -> anyhow::Result<PathBuf> {
    Ok(if p.is_absolute() {
        p
    } else {
        std::env::current_dir()?.join(p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("argosctl").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn options_go_anywhere_after_their_command_and_run_takes_the_rest_as_its_command() {
        let c = parse(&["jobs", "show", "J1", "--url", "http://h:1"]).unwrap();
        let Command::Jobs { stack, command } = c.command else {
            panic!()
        };
        assert_eq!(stack.url.as_deref(), Some("http://h:1"));
        assert!(matches!(command, Some(JobsCommand::Show { id }) if id == "J1"));
        // `jobs` alone lists.
        let c = parse(&["jobs"]).unwrap();
        assert!(matches!(c.command, Command::Jobs { command: None, .. }));
        let c = parse(&["run", "--profile", "inspect", "ls", "-l", "/"]).unwrap();
        let Command::Run {
            profile, command, ..
        } = c.command
        else {
            panic!()
        };
        assert_eq!(profile.unwrap().as_str(), "inspect");
        assert_eq!(command, ["ls", "-l", "/"]);
    }

    #[test]
    fn bad_usage_names_what_is_wrong() {
        let e = parse(&["run"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("<COMMAND>"), "{e}");
        let e = parse(&["run", "--profile", "root", "id"]).unwrap_err();
        assert!(e.to_string().contains("possible values"), "{e}");
        let e = parse(&["tasks", "approve", "T1"]).unwrap_err();
        assert!(e.to_string().contains("--version"), "{e}");
        let e = parse(&["up", "--listen", "nowhere"]).unwrap_err();
        assert!(e.to_string().contains("--listen"), "{e}");
        let e = parse(&["jobs", "start", "x", "--max-runtime-s", "soon"]).unwrap_err();
        assert!(e.to_string().contains("--max-runtime-s"), "{e}");
        let e = parse(&["frobnicate"]).unwrap_err();
        assert!(e.to_string().contains("frobnicate"), "{e}");
        assert!(query_value("failed&x=1").is_err());
        assert_eq!(query_value("failed").unwrap(), "failed");
    }
}
