//! argosctl's command line, as clap parses it. Nothing here but the definition: the build
//! script includes this file too, to write the man pages and shell completions.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const WHICH_STACK: &str = "\
Which stack: --root DIR (and --url URL) when given; else the stack `argosctl up` runs in \
./.argos, else the one it last started (recorded under $XDG_STATE_HOME/argos, or \
~/.local/state/argos), else the stack the package installed (/etc/argos/argos.toml) when \
there is one, else ./.argos and http://127.0.0.1:7000.

Commands through the gateway (approvals, audit, jobs, tasks) take an API token in \
ARGOS_TOKEN, made on the web UI's Tokens page with the scopes each command names.

Exit status: 0 done, 1 a check failed or a job did not succeed, 2 bad usage or an error, \
3 a job has not ended yet.";

/// Starts the development stack and operates a running one: daemons' status, commands
/// through execd, approvals, the audit trail, background jobs and tasks.
#[derive(Debug, Parser)]
#[command(
    name = "argosctl",
    version,
    about = "Start and operate an Argos stack",
    long_about = None,
    after_long_help = WHICH_STACK,
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Which stack a command is about.
#[derive(Debug, Args, Clone, Default)]
pub struct StackArgs {
    /// The stack's tree (its argos.toml, run/ and state/), as `argosctl up --root` made it
    #[arg(long, value_name = "DIR", global = true)]
    pub root: Option<PathBuf>,
    /// The gateway's URL (default: the one the stack's `argosctl up` recorded)
    #[arg(long, value_name = "URL", global = true)]
    pub url: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the four daemons in a dev tree, wait until all are serving and print where
    /// to go; Ctrl-C or SIGTERM stops them all
    ///
    /// As root, gatewayd, mcpd and jobd get their own unprivileged uids and execd stays
    /// root, the separation the systemd units give; as a normal user every daemon shares
    /// your uid and the stack says it is insecure.
    Up {
        /// The dev tree: argos.toml, run/ (sockets) and state/ (databases, keys)
        #[arg(long, value_name = "DIR", default_value = ".argos")]
        root: PathBuf,
        /// The gateway's HTTP address
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7000")]
        listen: SocketAddr,
        /// Where the argos-* binaries are (default: next to argosctl)
        #[arg(long, value_name = "DIR")]
        bin_dir: Option<PathBuf>,
        /// As root: the socket group is N, the daemons' uids N+1..N+3
        #[arg(long, value_name = "N", default_value_t = 64200)]
        id_base: u32,
        /// At the stop (Ctrl-C, SIGTERM), leave execd's launches running for the next
        /// start to take back, as a unit's restart does (by default a stop ends them)
        #[arg(long)]
        keep_launches: bool,
    },
    /// Call Status on every daemon socket of the stack
    ///
    /// Each socket must be served by the uid the stack's config names for its daemon (or
    /// root, or you): one served by anyone else is refused before anything is sent.
    /// Exit 1 when a daemon does not answer.
    Status {
        #[command(flatten)]
        stack: StackArgs,
        /// Call the sockets in this directory instead of the stack's
        #[arg(long, value_name = "DIR")]
        runtime_dir: Option<PathBuf>,
        /// The config naming each daemon's uid (default: the stack's argos.toml)
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Run a shell command through the stack's execd and print its output, its end and
    /// the containment it ran under
    ///
    /// As an operator: root, or a member of the stack's socket group. Every word after
    /// the options is the command, joined by spaces and run by /bin/sh -c.
    Run {
        #[command(flatten)]
        stack: StackArgs,
        /// The containment profile (default: execd's own, agent)
        #[arg(long, value_enum)]
        profile: Option<Profile>,
        /// Kill the command after this long
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// The command, e.g. 'id; ps ax'
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Print the configuration reference: every key, its default and its environment name
    ConfigReference,
    /// The commands agents and tasks wait to run, and an admin's decision on them
    Approvals {
        #[command(flatten)]
        stack: StackArgs,
        #[command(subcommand)]
        command: Option<ApprovalsCommand>,
    },
    /// Walk execd's and the gateway's hash-chained audit trails
    Audit {
        #[command(flatten)]
        stack: StackArgs,
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Background jobs (token scopes: read; exec to start, cancel and relaunch)
    Jobs {
        #[command(flatten)]
        stack: StackArgs,
        #[command(subcommand)]
        command: Option<JobsCommand>,
    },
    /// Tasks: saved commands or tool calls with their triggers (token scopes: read; exec
    /// to run, pause and resume; approve to approve a version)
    Tasks {
        #[command(flatten)]
        stack: StackArgs,
        #[command(subcommand)]
        command: Option<TasksCommand>,
    },
    /// Print argosctl's completion script for a shell
    ///
    /// e.g. `argosctl completions bash > /etc/bash_completion.d/argosctl` (the package
    /// installs bash, zsh and fish completions already).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Profile {
    /// A sandbox: no network, a private view of the filesystem
    Agent,
    /// A read-only view of the host
    Inspect,
    /// The host itself (an operator's own command)
    Host,
    /// As an MCP stdio server runs
    McpServer,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Agent => "agent",
            Profile::Inspect => "inspect",
            Profile::Host => "host",
            Profile::McpServer => "mcp-server",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List approvals (the default command; token scope read)
    List {
        #[arg(long, value_enum, default_value_t = ApprovalState::Pending)]
        state: ApprovalState,
    },
    /// Approve a waiting command (token scope approve)
    Approve {
        id: String,
        /// A destructive command's short id, as `list` shows it: says you read it
        #[arg(long, value_name = "SHORT_ID")]
        confirm: Option<String>,
        /// Kept with the decision in the audit trail
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
    /// Deny a waiting command (token scope approve)
    Deny {
        id: String,
        /// Kept with the decision, and shown to whoever asked
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ApprovalState {
    Pending,
    Approved,
    Denied,
    Revoked,
    Expired,
    Consumed,
    All,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::Revoked => "revoked",
            ApprovalState::Expired => "expired",
            ApprovalState::Consumed => "consumed",
            ApprovalState::All => "all",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check both trails link up; exit 1 if either is broken (token scope read)
    Verify,
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List jobs, newest first (the default command)
    List {
        /// Only jobs in this state (queued, running, succeeded, failed, …)
        #[arg(long, value_name = "STATE")]
        state: Option<String>,
        /// Only jobs that have not ended
        #[arg(long)]
        active: bool,
        /// Only the runs of this task
        #[arg(long, value_name = "ID")]
        task: Option<String>,
    },
    /// A job's facts and, once it ended, its output (exit 0: succeeded, 1: ended
    /// otherwise, 3: not ended yet)
    Show { id: String },
    /// Start a command as a background job
    Start {
        /// The shell command
        command: String,
        /// Where it runs: auto lets the risk gate choose
        #[arg(long, default_value = "auto", value_parser = place())]
        place: Place,
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Cancel it after this long (default: the stack's jobs.max_runtime_s)
        #[arg(long, value_name = "N")]
        max_runtime_s: Option<u64>,
    },
    /// Cancel a job: a verified kill if it runs
    Cancel { id: String },
    /// Launch an ended job again, as its next generation
    Relaunch { id: String },
}

pub use argos_vocab::Place;

/// A place's word on the command line, one of the places' own words.
fn place() -> impl clap::builder::TypedValueParser<Value = Place> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(<Place as strum::VariantNames>::VARIANTS)
        .map(|w| Place::parse(&w).expect("a word the parser offered names a place"))
}

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// List tasks (the default command)
    List,
    /// A task's definition, triggers and state
    Show { id: String },
    /// Run a task now (token scope exec)
    Run { id: String },
    /// Stop its schedule and webhook from starting runs (token scope exec)
    Pause { id: String },
    /// Let its schedule and webhook start runs again (token scope exec)
    Resume { id: String },
    /// Approve the version of a task you reviewed (token scope approve, as an admin)
    Approve {
        id: String,
        /// The version you read (`tasks show` prints it): a later edit is not approved
        #[arg(long, value_name = "N")]
        version: u32,
    },
}
