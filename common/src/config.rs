//! Configuration: one TOML file plus an `ARGOS_*` environment overlay, parsed once, before
//! any socket is bound, by a pure function over an injected source.
//!
//! Every setting is declared once in [`Config::read`] with its default and a one-line doc;
//! that same declaration drives parsing, `--print-config` and `docs/configuration.md`.
//! Parsing never stops at the first problem: every unknown key and every bad value is
//! collected and reported together.
//!
//! Environment keys map to dotted keys by stripping `ARGOS_`, lower-casing and turning `__`
//! into `.`: `ARGOS_PEERS__GATEWAY_UIDS=argos-gw` sets `peers.gateway_uids`. Lists in the
//! environment are comma-separated. `ARGOS_CONFIG` names the file and is not a setting.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Environment variable that names the config file when `--config` is not given.
mod values;
use values::*;

pub const CONFIG_ENV: &str = "ARGOS_CONFIG";
/// Prefix of environment variables that overlay settings.
pub const ENV_PREFIX: &str = "ARGOS_";

/// The effective configuration shared by every Argos daemon.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Directory holding each daemon's directory with its `<daemon>.sock`.
    pub runtime_dir: PathBuf,
    /// Parent of each daemon's private state directory `<state_dir>/<daemon>`.
    pub state_dir: PathBuf,
    pub log: LogConfig,
    pub socket: SocketConfig,
    pub peers: PeersConfig,
    pub shutdown: ShutdownConfig,
    pub gateway: GatewayConfig,
    pub exec: ExecConfig,
    pub quota: QuotaConfig,
    pub approvals: ApprovalsConfig,
    pub mcp: McpConfig,
    pub jobs: JobsConfig,
}

/// jobd's jobs: their default limit, how many one user may have, how long they are kept.
#[derive(Debug, Clone, PartialEq)]
pub struct JobsConfig {
    pub max_runtime_s: u64,
    pub active_per_user: u64,
    pub retention_days: u64,
    pub deliver_allow: Vec<String>,
}

/// What mcpd lets an upstream MCP server put in front of an agent.
#[derive(Debug, Clone, PartialEq)]
pub struct McpConfig {
    pub result_text_bytes: u64,
    pub result_image_bytes: u64,
    pub result_total_bytes: u64,
    pub description_chars: u64,
    pub schema_bytes: u64,
    pub schema_depth: u64,
    pub tools_per_server: u64,
    /// Tool calls one server may have in flight at once, every caller's together.
    pub calls_per_server: u64,
    /// …and of them, how many one caller (user or task owner) may hold.
    pub calls_per_caller: u64,
}

/// Who may decide an approval.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalsConfig {
    /// Another admin must decide: the owner of the requesting agent's token may not.
    pub require_other_admin: bool,
}

/// How much one user (or, for a caller without a principal, one peer role) may hold at
/// once. 0 means unlimited. Operators (root, or the operator group) are not counted.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaConfig {
    pub launches: u64,
    pub terminals: u64,
    pub pending_approvals: u64,
    pub daemon_launches: u64,
    pub daemon_pending_approvals: u64,
    pub event_streams: u64,
}

/// Containment dimensions execd knows (see execd's profiles).
pub const DIMENSIONS: &[&str] = &[
    "filesystem",
    "process_tree",
    "wall_clock",
    "network",
    "syscalls",
    "privileges",
    "resources",
];

#[derive(Debug, Clone, PartialEq)]
pub struct ExecConfig {
    /// Dimensions to treat as unavailable on this host: launches that require one fail
    /// with `containment_unavailable`; others report it `unavailable`.
    pub disabled_dimensions: Vec<String>,
    /// Cap of each output stream's log in a launch dir (MiB); output beyond it is counted
    /// but not kept (the tail is always kept).
    pub output_log_cap_mb: u64,
    /// Where launch workspaces live: outside every profile's denied paths.
    pub work_dir: PathBuf,
    /// Home directories (`*` in a component matches one level) in which the contained
    /// profiles hide credential stores, beyond root's, those under `/home` and those
    /// `/etc/passwd` gives people's accounts.
    pub extra_homes: Vec<PathBuf>,
    /// First uid of the range reserved for per-launch users.
    pub launch_uid_base: u64,
    /// How many uids the range holds (at most that many launches run at once).
    pub launch_uid_count: u64,
    /// How long a finished launch's files (logs, workspace) are kept, in seconds (0: forever).
    pub retention_s: u64,
    /// Shims kept set up and waiting, per profile (0: each launch sets up its own).
    pub warm_shims: u64,
    /// How long an approval may wait for its decision, and an approved one for its run,
    /// in seconds.
    pub approval_ttl_s: u64,
    /// How long a terminal may stay with no client attached before it is torn down, in
    /// seconds (0: never).
    pub terminal_detach_ttl_s: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A tracing `EnvFilter` directive, e.g. `info` or `info,argos_common=debug`.
    pub level: String,
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One plain line per event, no colour: fit for journald.
    Plain,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SocketConfig {
    /// Permission bits of each daemon's socket file.
    pub mode: u32,
    /// Group owning each socket file; `None` keeps the daemon's primary group.
    pub group: Option<IdSpec>,
}

/// Which uids/gids the daemons recognise, and as what. See [`crate::peer`].
#[derive(Debug, Clone, PartialEq)]
pub struct PeersConfig {
    pub gateway_uids: Vec<IdSpec>,
    pub mcp_uids: Vec<IdSpec>,
    pub job_uids: Vec<IdSpec>,
    pub operator_uids: Vec<IdSpec>,
    pub operator_gids: Vec<IdSpec>,
    /// Allow several peer roles to share one uid (a one-user development run).
    pub insecure_shared_uid: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ShutdownConfig {
    /// How long a daemon waits for open calls to finish after SIGTERM before it closes them.
    pub grace_ms: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GatewayConfig {
    /// Address of the gateway's HTTP listener.
    pub listen: SocketAddr,
    /// `auto`, `true` or `false`: whether session cookies are `Secure` (and `__Host-`).
    pub cookie_secure: String,
    /// Peers whose `X-Forwarded-Proto` (first hop) is believed.
    pub trusted_proxies: Vec<String>,
    /// Origins (`scheme://host[:port]`) besides the gateway's own that may send requests
    /// carrying a session cookie.
    pub allowed_origins: Vec<String>,
    /// Host names (`host[:port]`) the gateway answers to besides IP addresses and
    /// `localhost` (a reverse proxy's public name).
    pub allowed_hosts: Vec<String>,
    /// A session ends after this many seconds without a request…
    pub session_idle_s: u64,
    /// …and after this many in any case.
    pub session_max_s: u64,
    /// Password hashes computed at once (each takes about 19 MiB for a moment).
    pub max_concurrent_hashes: u64,
    /// Seconds a streamed command outlives its client before it is killed.
    pub stream_resume_s: u64,
    /// How long a web terminal's WebSocket ticket may wait for its upgrade, in seconds.
    pub terminal_ticket_ttl_s: u64,
    /// Seconds between exchanges of audit heads with execd.
    pub audit_anchor_s: u64,
    /// Hosts (`host[:port]`) an agent's `http_get` may reach though their addresses are
    /// not public (loopback, private, link-local). Metadata addresses stay refused.
    pub http_get_allow: Vec<String>,
    /// Whether the first-admin link is logged, or only written to `setup-link` in the
    /// gateway's state dir (the log names the file).
    pub log_setup_link: bool,
    /// `/mcp` sessions (2025-11-25) one API token holds at once…
    pub mcp_sessions_per_token: u64,
    /// …and one user over all their tokens.
    pub mcp_sessions_per_user: u64,
    /// An `/mcp` session with nothing in flight ends after this many idle seconds.
    pub mcp_session_idle_s: u64,
    /// Requests per second one API token may make at `/mcp` (bursts of twice that); 0:
    /// unlimited.
    pub mcp_requests_per_s: u64,
    /// …and one user over all their tokens.
    pub mcp_requests_per_user_s: u64,
}

/// A user or group given by number or by name; names are resolved after parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdSpec {
    Id(u32),
    Name(String),
}

impl fmt::Display for IdSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdSpec::Id(n) => write!(f, "{n}"),
            IdSpec::Name(s) => f.write_str(s),
        }
    }
}

/// Where the settings come from: an optional TOML document and the process environment.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// `(name for messages, TOML text)` of the config file, if any.
    pub file: Option<(String, String)>,
    /// Environment variables; only those starting with `ARGOS_` are read.
    pub env: BTreeMap<String, String>,
}

/// Every problem found in a configuration, in key order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration:\n{}", .problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
pub struct ConfigError {
    pub problems: Vec<String>,
}

/// One setting as `--print-config` shows it.
#[derive(Debug, Clone)]
pub struct Effective {
    pub key: &'static str,
    pub value: toml::Value,
    pub default: toml::Value,
    pub origin: String,
    pub doc: &'static str,
}

impl Config {
    /// Parses a source into a config, reporting every bad or unknown key at once.
    pub fn parse(source: &Source) -> Result<Config, ConfigError> {
        Self::parse_with_effective(source).map(|(c, _)| c)
    }

    /// Like [`Config::parse`], also returning each setting's effective value and origin.
    pub fn parse_with_effective(source: &Source) -> Result<(Config, Vec<Effective>), ConfigError> {
        let mut r = Reader::new(source);
        let config = Self::read(&mut r);
        r.finish().map(|eff| (config, eff))
    }

    /// The one place every setting is declared: key, default, doc.
    fn read(r: &mut Reader) -> Config {
        Config {
            runtime_dir: r.get(
                "runtime_dir",
                PathBuf::from("/run/argos"),
                "Directory holding each daemon's gRPC socket, `<runtime_dir>/<daemon>/<daemon>.sock`, each in a directory the daemon owns (made 0750 if missing; refused if another uid owns it or others may write in it). Only root should be able to write here, so no daemon can take another's name.",
            ),
            state_dir: r.get(
                "state_dir",
                PathBuf::from("/var/lib/argos"),
                "Parent of each daemon's private state directory `<state_dir>/<daemon>` (mode 0700).",
            ),
            log: LogConfig {
                format: r.get(
                    "log.format",
                    LogFormat::Plain,
                    "`plain` (one uncoloured line per event, fit for journald) or `json`.",
                ),
                level: r.get(
                    "log.level",
                    "info".to_string(),
                    "tracing filter directive, e.g. `info` or `info,argos_common=debug`.",
                ),
            },
            socket: SocketConfig {
                mode: r.get_with(
                    "socket.mode",
                    0o660,
                    "Permission bits of each socket file, as an octal string.",
                    Mode,
                ),
                group: r.get(
                    "socket.group",
                    None,
                    "Group (name or gid) that owns each socket file; empty keeps the daemon's own group.",
                ),
            },
            peers: PeersConfig {
                gateway_uids: r.get(
                    "peers.gateway_uids",
                    Vec::new(),
                    "Users (names or uids) recognised as argos-gatewayd.",
                ),
                mcp_uids: r.get(
                    "peers.mcp_uids",
                    Vec::new(),
                    "Users (names or uids) recognised as argos-mcpd.",
                ),
                job_uids: r.get(
                    "peers.job_uids",
                    Vec::new(),
                    "Users (names or uids) recognised as argos-jobd.",
                ),
                operator_uids: r.get(
                    "peers.operator_uids",
                    vec![IdSpec::Id(0)],
                    "Users recognised as operators (health, reflection, read-only RPCs).",
                ),
                operator_gids: r.get(
                    "peers.operator_gids",
                    Vec::new(),
                    "Groups whose members (by the connection's primary gid) are operators, e.g. `argos-operators`.",
                ),
                insecure_shared_uid: r.get(
                    "peers.insecure_shared_uid",
                    false,
                    "Allow several roles to share one uid (one-user development run). Privilege separation is then not real.",
                ),
            },
            shutdown: ShutdownConfig {
                grace_ms: r.get(
                    "shutdown.grace_ms",
                    1500u64,
                    "After SIGTERM, how long open calls may finish before they are cut (milliseconds).",
                ),
            },
            gateway: GatewayConfig {
                listen: r.get(
                    "gateway.listen",
                    SocketAddr::from(([127, 0, 0, 1], 7000)),
                    "Address of the gateway's HTTP listener.",
                ),
                cookie_secure: r.get_with(
                    "gateway.cookie_secure",
                    "auto".to_string(),
                    "Session cookies are Secure (and named __Host-argos_session): `true`, `false`, or `auto` (when the request came over HTTPS, as the first X-Forwarded-Proto hop from a trusted proxy says).",
                    Choice(&["auto", "true", "false"]),
                ),
                trusted_proxies: r.get_with(
                    "gateway.trusted_proxies",
                    Vec::new(),
                    "IP addresses of reverse proxies whose X-Forwarded-Proto and X-Forwarded-For (first hop) are believed.",
                    IpList,
                ),
                allowed_origins: r.get_with(
                    "gateway.allowed_origins",
                    Vec::new(),
                    "Origins (`https://host[:port]`) besides the gateway's own from which a browser may send state-changing requests with a session cookie.",
                    Origins,
                ),
                allowed_hosts: r.get_with(
                    "gateway.allowed_hosts",
                    Vec::new(),
                    "Host names (`host` or `host:port`) the gateway answers to besides IP addresses and `localhost`, e.g. a reverse proxy's public name. A request naming any other Host is refused (421): a DNS name that an attacker points at this address (DNS rebinding) gets nothing. The hosts of `allowed_origins` are allowed too.",
                    Hosts,
                ),
                session_idle_s: r.get(
                    "gateway.session_idle_s",
                    3600u64,
                    "A web session ends after this many seconds without a request.",
                ),
                session_max_s: r.get(
                    "gateway.session_max_s",
                    12 * 3600u64,
                    "A web session ends this many seconds after login, however busy.",
                ),
                max_concurrent_hashes: r.get(
                    "gateway.max_concurrent_hashes",
                    2u64,
                    "Password hashes (argon2id, about 19 MiB each) computed at once; more logins wait, so logins cannot exhaust memory.",
                ),
                stream_resume_s: r.get(
                    "gateway.stream_resume_s",
                    10u64,
                    "When the client of a streamed command (POST /api/shell/stream) goes away, the command is killed after this many seconds unless a client resumes the stream.",
                ),
                terminal_ticket_ttl_s: r.get(
                    "gateway.terminal_ticket_ttl_s",
                    30u64,
                    "Seconds a web terminal's single-use WebSocket ticket (minted by POST /api/terminals/{id}/ticket) stays valid.",
                ),
                audit_anchor_s: r.get(
                    "gateway.audit_anchor_s",
                    30u64,
                    "Seconds between exchanges of audit heads with execd: each daemon's newest audit row is recorded in the other's trail, so a trail cut short or recomputed fails `audit verify`, naming the row. Rows written since the last exchange are not yet anchored. At least 1.",
                ),
                log_setup_link: r.get(
                    "gateway.log_setup_link",
                    true,
                    "On a start with no account yet, the gateway writes the one-time link that creates the first admin to `setup-link` in its state dir (mode 0600) and, when this is true, logs it too. The packaged /etc/argos/argos.toml sets false: the system journal is readable by the `adm` and `systemd-journal` groups, and whoever opens the link first becomes an admin.",
                ),
                http_get_allow: r.get_with(
                    "gateway.http_get_allow",
                    Vec::new(),
                    "Hosts (`host` or `host:port`) the MCP tool `http_get` may fetch from although they resolve to loopback, private or link-local addresses (an intranet wiki, a local service). Any other URL must resolve to public addresses only; cloud metadata addresses are refused whatever this says. Redirects are checked again.",
                    Hosts,
                ),
                mcp_sessions_per_token: r.get(
                    "gateway.mcp_sessions_per_token",
                    32u64,
                    "MCP sessions (2025-11-25, `Mcp-Session-Id`) one API token may hold open at /mcp at once. An `initialize` beyond it ends the token's least recently used idle session (one with no request in flight and no stream open), so a client that restarts without closing its sessions is not locked out; when every one is busy it is refused (429, naming this setting). At least 1.",
                ),
                mcp_sessions_per_user: r.get(
                    "gateway.mcp_sessions_per_user",
                    64u64,
                    "MCP sessions one user may hold open at /mcp at once over all their tokens. An `initialize` beyond it ends the user's least recently used idle session, or is refused (429, naming this setting) when every one is busy. At least 1.",
                ),
                mcp_session_idle_s: r.get(
                    "gateway.mcp_session_idle_s",
                    300u64,
                    "An MCP session at /mcp with no request in flight and no stream open ends after this many seconds, and everything it held is freed; a DELETE of the session ends it at once. At least 1.",
                ),
                mcp_requests_per_s: r.get(
                    "gateway.mcp_requests_per_s",
                    50u64,
                    "Requests per second one API token may make at /mcp, over all its sessions, with bursts of twice that; beyond it a request is refused (429 with Retry-After, naming this setting). Bounds what one agent can make the gateway hold (each answered request is kept 2 s for a client that resumes its stream). 0: unlimited.",
                ),
                mcp_requests_per_user_s: r.get(
                    "gateway.mcp_requests_per_user_s",
                    200u64,
                    "Requests per second one user may make at /mcp over all their tokens, with bursts of twice that; beyond it a request is refused (429 with Retry-After, naming this setting), so a user who makes many tokens does not multiply what they can make the gateway hold. 0: unlimited.",
                ),
            },
            exec: ExecConfig {
                disabled_dimensions: r.get_with(
                    "exec.disabled_dimensions",
                    Vec::new(),
                    "Containment dimensions to treat as unavailable on this host (e.g. `[\"network\"]`): launches requiring one are refused.",
                    Dimensions,
                ),
                output_log_cap_mb: r.get(
                    "exec.output_log_cap_mb",
                    256u64,
                    "Each output stream of a launch keeps at most this many MiB on disk (head and tail are always kept). A follower connected while the launch runs still gets everything, live; one that comes later can replay only what was kept.",
                ),
                work_dir: r.get(
                    "exec.work_dir",
                    PathBuf::from("/var/lib/argos-work"),
                    "Parent of each launch's writable workspace. Must lie outside the paths profiles deny (state and runtime dirs, /root, /home).",
                ),
                extra_homes: r.get_with(
                    "exec.extra_homes",
                    Vec::new(),
                    "Home directories to hide credential stores in (SSH and GnuPG keys, cloud, registry and database logins, browser profiles: the list is execd's `credentials.rs`) for the contained profiles, beyond root's, each under /home and those /etc/passwd gives people's accounts (uid 1000 and up): homes elsewhere, such as a directory service's users' (`/export/home/*`: `*` matches one level) or a service account's (`/var/lib/postgresql`). Looked for when each launch is taken.",
                    PathPatterns,
                ),
                launch_uid_base: r.get(
                    "exec.launch_uid_base",
                    1_900_000_000u64,
                    "First uid of the range execd reserves for per-launch users (profiles with run_as = \"launch\"); no account may use the range.",
                ),
                launch_uid_count: r.get(
                    "exec.launch_uid_count",
                    65536u64,
                    "Size of that range: how many such launches can run at once.",
                ),
                retention_s: r.get(
                    "exec.retention_s",
                    7 * 24 * 3600u64,
                    "Seconds a finished launch's files (its launch dir with the output logs, and its workspace directory: empty where the profile bounds the workspace, whose tmpfs goes with the launch) are kept before they are removed; the ledger keeps its record. 0 keeps them forever.",
                ),
                warm_shims: r.get(
                    "exec.warm_shims",
                    2u64,
                    "Shims kept ready per profile, their namespaces, mounts and seccomp filters already set up, so a launch starts without paying for them. 0 sets up each launch's shim on demand.",
                ),
                approval_ttl_s: r.get(
                    "exec.approval_ttl_s",
                    3600u64,
                    "Seconds an agent's or a task's command waits for an operator's approval before it expires (its execution is then rejected).",
                ),
                terminal_detach_ttl_s: r.get(
                    "exec.terminal_detach_ttl_s",
                    900u64,
                    "Seconds a web terminal may stay with no client attached (its tab closed, its browser gone) before its shell and everything it started are killed. 0 keeps detached terminals until they end.",
                ),
            },
            approvals: ApprovalsConfig {
                require_other_admin: r.get(
                    "approvals.require_other_admin",
                    false,
                    "Require another admin to decide a request (four eyes). Off: the user who owns the requesting agent's token may approve or deny it — from a session or an approve-scoped token, never with an agent-scoped one — so a one-admin host works with one account. The audit trail records which rule applied.",
                ),
            },
            mcp: McpConfig {
                result_text_bytes: r.get_with(
                    "mcp.result_text_bytes",
                    64 * 1024u64,
                    "Bytes of text one tool call's result may bring back (its text, embedded resources and structured content together); the rest is cut, and the result says so. 1024 to 16777216.",
                    Between(1024, 16 << 20),
                ),
                result_image_bytes: r.get_with(
                    "mcp.result_image_bytes",
                    1024 * 1024u64,
                    "Bytes of one image in a tool call's result; a larger one is replaced by a line saying so. 0 to 67108864.",
                    Between(0, 64 << 20),
                ),
                result_total_bytes: r.get_with(
                    "mcp.result_total_bytes",
                    4 * 1024 * 1024u64,
                    "Bytes of one tool call's result, everything together. 1024 to 268435456.",
                    Between(1024, 256 << 20),
                ),
                description_chars: r.get_with(
                    "mcp.description_chars",
                    2048u64,
                    "Characters of a tool's description offered to agents; the rest is cut, and the description says so. 64 to 65536.",
                    Between(64, 65536),
                ),
                schema_bytes: r.get_with(
                    "mcp.schema_bytes",
                    16 * 1024u64,
                    "Bytes of a tool's input schema (as JSON); a larger one is left out (the tool takes any object) and its description says so. 256 to 1048576.",
                    Between(256, 1 << 20),
                ),
                schema_depth: r.get_with(
                    "mcp.schema_depth",
                    16u64,
                    "Nesting depth of a tool's input schema, as for schema_bytes. 2 to 64.",
                    Between(2, 64),
                ),
                tools_per_server: r.get_with(
                    "mcp.tools_per_server",
                    256u64,
                    "Tools one MCP server may offer; the first ones are kept. 1 to 4096.",
                    Between(1, 4096),
                ),
                calls_per_server: r.get_with(
                    "mcp.calls_per_server",
                    32u64,
                    "Tool calls one MCP server may have in flight at once, every caller's together. Each is sent at once on the server's one connection, beside the others, with its own deadline: a slow tool holds up no other call. One more is refused at once (nothing is sent, so it may be tried again), never queued to spend its deadline waiting. 1 to 1024.",
                    Between(1, 1024),
                ),
                calls_per_caller: r.get_with(
                    "mcp.calls_per_caller",
                    8u64,
                    "Of a server's calls in flight (mcp.calls_per_server), how many one caller may hold: a user (their agents' and their own calls together) or a task's owner. One more of theirs is refused at once, unsent, so one user's slow calls cannot take every place of a server from the others. 1 to 1024.",
                    Between(1, 1024),
                ),
            },
            jobs: JobsConfig {
                max_runtime_s: r.get_with(
                    "jobs.max_runtime_s",
                    3600u64,
                    "Seconds a job may run when its creator gives no limit; at its limit it is ended (timed_out). 1 to 2592000 (30 days, the most a job may ask for).",
                    Between(1, 30 * 24 * 3600),
                ),
                active_per_user: r.get(
                    "jobs.active_per_user",
                    256u64,
                    "Jobs one user may have not yet ended (queued, waiting for an approval or running) at once; more are refused (429 at the gateway). Running ones are also held to quota.launches: the rest wait, queued. 0: unlimited.",
                ),
                deliver_allow: r.get_with(
                    "jobs.deliver_allow",
                    Vec::new(),
                    "Hosts (`host` or `host:port`) a job's webhook follow-up may be delivered to although they resolve to loopback, private or link-local addresses (a receiver on this host or the intranet). Any other delivery URL must resolve to public addresses only; cloud metadata addresses are refused whatever this says.",
                    Hosts,
                ),
                retention_days: r.get(
                    "jobs.retention_days",
                    7u64,
                    "Days an ended job is kept (its record; its output lives with execd's launch, kept for exec.retention_s) before jobd prunes it. 0 keeps them forever.",
                ),
            },
            quota: QuotaConfig {
                launches: r.get(
                    "quota.launches",
                    16u64,
                    "Launches one user may have running at once (terminals included), counted per peer role acting for them (the gateway, jobd); a caller without a user is counted by its role. More are refused (RESOURCE_EXHAUSTED; 429 at the gateway) until one ends. 0: unlimited. Operators are not counted.",
                ),
                terminals: r.get(
                    "quota.terminals",
                    4u64,
                    "Terminals one user may have open at once. 0: unlimited.",
                ),
                pending_approvals: r.get(
                    "quota.pending_approvals",
                    32u64,
                    "Requests one user (or peer role) may have waiting for an approval at once; asking again for an identical pending request is not counted. 0: unlimited.",
                ),
                daemon_launches: r.get(
                    "quota.daemon_launches",
                    64u64,
                    "Launches mcpd or jobd may have running at once over all the users they act for (each user is also held to quota.launches). 0: unlimited.",
                ),
                daemon_pending_approvals: r.get(
                    "quota.daemon_pending_approvals",
                    128u64,
                    "Requests mcpd or jobd may have waiting for an approval at once over all the users they act for. 0: unlimited.",
                ),
                event_streams: r.get(
                    "quota.event_streams",
                    8u64,
                    "Event streams (GET /api/events) one user may hold open at the gateway at once; and, apart, as many MCP subscriptions at /mcp (subscriptions/listen streams and resources/subscribe watches). 0: unlimited.",
                ),
            },
        }
    }

    /// The defaults, as if nothing was configured.
    pub fn defaults() -> Config {
        Self::parse(&Source::default()).expect("defaults are valid")
    }

    /// The socket path of a daemon.
    pub fn socket_path(&self, daemon: &str) -> PathBuf {
        crate::connect::socket_path(&self.runtime_dir, daemon)
    }

    /// The private state directory of a daemon.
    pub fn daemon_state_dir(&self, daemon: &str) -> PathBuf {
        self.state_dir.join(daemon)
    }
}

/// Renders effective settings as commented TOML (what `--print-config` prints).
pub fn render_effective(effective: &[Effective]) -> String {
    let mut out = String::new();
    let mut section = "";
    for e in effective {
        let (sec, name) = e.key.rsplit_once('.').unwrap_or(("", e.key));
        if sec != section {
            out.push_str(&format!("\n[{sec}]\n"));
            section = sec;
        }
        out.push_str(&format!("# {}\n", e.doc));
        out.push_str(&format!("# default: {}; from: {}\n", e.default, e.origin));
        out.push_str(&format!("{name} = {}\n", e.value));
    }
    out.trim_start().to_string()
}

/// Renders the settings reference (`docs/configuration.md`) from the declarations.
pub fn render_reference() -> String {
    let (_, effective) = Config::parse_with_effective(&Source::default()).expect("defaults");
    let mut out = String::from(
        "# Configuration reference\n\n\
         Generated from `common/src/config.rs` (a test keeps it in step). Every daemon reads the\n\
         same file (`--config PATH` or `ARGOS_CONFIG`), then the environment: a key `a.b` is\n\
         overridden by `ARGOS_A__B` (lists comma-separated). Unknown keys are errors. Run any\n\
         daemon with `--print-config` to see the effective values and where each came from.\n\n\
         | key | environment | default | meaning |\n|---|---|---|---|\n",
    );
    for e in effective {
        out.push_str(&format!(
            "| `{}` | `{}` | `{}` | {} |\n",
            e.key,
            env_name(e.key),
            e.default,
            e.doc.replace('|', "\\|")
        ));
    }
    out
}

/// The environment variable that overrides a dotted key.
pub fn env_name(key: &str) -> String {
    format!("{ENV_PREFIX}{}", key.replace('.', "__").to_uppercase())
}

enum Raw {
    Toml(toml::Value),
    Env(String),
}

struct Reader {
    values: BTreeMap<String, (Raw, String)>,
    problems: Vec<String>,
    effective: Vec<Effective>,
}

impl Reader {
    fn new(source: &Source) -> Reader {
        let mut r = Reader {
            values: BTreeMap::new(),
            problems: Vec::new(),
            effective: Vec::new(),
        };
        if let Some((name, text)) = &source.file {
            match text.parse::<toml::Table>() {
                Ok(table) => r.flatten("", table, name),
                Err(e) => r
                    .problems
                    .push(format!("{name}: not valid TOML: {}", e.message())),
            }
        }
        for (k, v) in &source.env {
            let Some(rest) = k.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            if k == CONFIG_ENV {
                continue;
            }
            let key = rest.to_lowercase().replace("__", ".");
            r.values
                .insert(key, (Raw::Env(v.clone()), format!("env {k}")));
        }
        r
    }

    fn flatten(&mut self, prefix: &str, table: toml::Table, file: &str) {
        for (k, v) in table {
            let key = if prefix.is_empty() {
                k
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                toml::Value::Table(t) => self.flatten(&key, t, file),
                v => {
                    self.values
                        .insert(key, (Raw::Toml(v), format!("file {file}")));
                }
            }
        }
    }

    fn get<T: Setting>(&mut self, key: &'static str, default: T, doc: &'static str) -> T {
        self.get_with(key, default, doc, Plain)
    }

    fn get_with<T, C: Codec<T>>(
        &mut self,
        key: &'static str,
        default: T,
        doc: &'static str,
        codec: C,
    ) -> T {
        let default_toml = codec.show(&default);
        let (value, origin) = match self.values.remove(key) {
            None => (default, "default".to_string()),
            Some((raw, origin)) => {
                let parsed = match &raw {
                    Raw::Toml(v) => codec.read_toml(v),
                    Raw::Env(s) => codec.read_env(s),
                };
                match parsed {
                    Ok(v) => (v, origin),
                    Err(e) => {
                        self.problems.push(format!("{key} ({origin}): {e}"));
                        (default, "default".to_string())
                    }
                }
            }
        };
        self.effective.push(Effective {
            key,
            value: codec.show(&value),
            default: default_toml,
            origin,
            doc,
        });
        value
    }

    fn finish(mut self) -> Result<Vec<Effective>, ConfigError> {
        for (key, (_, origin)) in std::mem::take(&mut self.values) {
            self.problems
                .push(format!("{key} ({origin}): unknown setting"));
        }
        if self.problems.is_empty() {
            Ok(self.effective)
        } else {
            self.problems.sort();
            Err(ConfigError {
                problems: self.problems,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(file: &str, env: &[(&str, &str)]) -> Source {
        Source {
            file: Some(("test.toml".into(), file.into())),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn mcp_caps_are_read_within_their_bounds() {
        let c = Config::parse(&src(
            "[mcp]\nresult_text_bytes = 2048\n",
            &[("ARGOS_MCP__TOOLS_PER_SERVER", "10")],
        ))
        .unwrap();
        assert_eq!(
            (c.mcp.result_text_bytes, c.mcp.tools_per_server),
            (2048, 10)
        );
        assert_eq!(Config::defaults().mcp.result_text_bytes, 65536);
        let e = Config::parse(&src(
            "[mcp]\nschema_depth = 1\nresult_text_bytes = 0\n",
            &[],
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("mcp.schema_depth (file test.toml): 1 is outside 2 to 64"),
            "{e}"
        );
        assert!(e.contains("mcp.result_text_bytes"), "{e}");
    }

    #[test]
    fn extra_homes_are_absolute_paths_from_the_file_or_the_environment() {
        let c = Config::parse(&src(
            "[exec]\nextra_homes = [\"/export/home/*\", \"/var/lib/postgresql\"]\n",
            &[],
        ))
        .unwrap();
        assert_eq!(
            c.exec.extra_homes,
            [
                PathBuf::from("/export/home/*"),
                PathBuf::from("/var/lib/postgresql")
            ]
        );
        let c = Config::parse(&src("", &[("ARGOS_EXEC__EXTRA_HOMES", "/u/*, /srv/h")])).unwrap();
        assert_eq!(
            c.exec.extra_homes,
            [PathBuf::from("/u/*"), PathBuf::from("/srv/h")]
        );
        assert!(Config::defaults().exec.extra_homes.is_empty());
        let e = Config::parse(&src(
            "[exec]\nextra_homes = [\"home/*\", \"/a/../b\"]\n",
            &[],
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("exec.extra_homes"), "{e}");
    }

    #[test]
    fn defaults_are_documented_and_valid() {
        let c = Config::defaults();
        assert_eq!(c.runtime_dir, PathBuf::from("/run/argos"));
        assert_eq!(c.socket.mode, 0o660);
        assert_eq!(c.peers.operator_uids, vec![IdSpec::Id(0)]);
        assert!(!c.peers.insecure_shared_uid);
        assert_eq!(c.gateway.listen.to_string(), "127.0.0.1:7000");
    }

    #[test]
    fn file_then_env_overlay() {
        let s = src(
            "runtime_dir = \"/tmp/r\"\n[peers]\ngateway_uids = [\"argos-gw\", 1001]\n[socket]\nmode = \"0600\"\n",
            &[
                ("ARGOS_RUNTIME_DIR", "/tmp/env"),
                ("ARGOS_PEERS__MCP_UIDS", "1002, argos-mcp"),
                ("PATH", "/bin"),
            ],
        );
        let (c, eff) = Config::parse_with_effective(&s).unwrap();
        assert_eq!(c.runtime_dir, PathBuf::from("/tmp/env"));
        assert_eq!(
            c.peers.gateway_uids,
            vec![IdSpec::Name("argos-gw".into()), IdSpec::Id(1001)]
        );
        assert_eq!(
            c.peers.mcp_uids,
            vec![IdSpec::Id(1002), IdSpec::Name("argos-mcp".into())]
        );
        assert_eq!(c.socket.mode, 0o600);
        let rt = eff.iter().find(|e| e.key == "runtime_dir").unwrap();
        assert_eq!(rt.origin, "env ARGOS_RUNTIME_DIR");
        let rendered = render_effective(&eff);
        assert!(rendered.contains("mode = \"0600\""), "{rendered}");
    }

    #[test]
    fn every_bad_key_is_reported() {
        let s = src(
            "runtime_dir = \"relative\"\nbogus = 1\n[socket]\nmode = \"999\"\n[peers]\ngateway_uids = [\"ok\", -4]\n",
            &[("ARGOS_LOG__FORMAT", "xml"), ("ARGOS_NOPE", "x")],
        );
        let err = Config::parse(&s).unwrap_err();
        let keys: Vec<&str> = err
            .problems
            .iter()
            .map(|p| p.split(' ').next().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "bogus",
                "log.format",
                "nope",
                "peers.gateway_uids",
                "runtime_dir",
                "socket.mode"
            ],
            "{err}"
        );
        assert!(err.to_string().contains("env ARGOS_LOG__FORMAT"));
    }

    #[test]
    fn invalid_toml_is_an_error_not_a_default() {
        let err = Config::parse(&src("runtime_dir = ", &[])).unwrap_err();
        assert!(err.problems[0].contains("not valid TOML"), "{err}");
    }

    #[test]
    fn reference_doc_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            committed,
            render_reference(),
            "docs/configuration.md is stale: regenerate with `argosctl config-reference > docs/configuration.md`"
        );
    }
}
