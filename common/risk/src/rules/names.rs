//! The lists of programs the rules know by name.

/// Shell builtins with no program of the same name: run only by a shell.
pub const SHELL_ONLY: &[&str] = &[
    "cd", "pushd", "popd", "history", "jobs", "wait", "exit", "return", "read", "type", ":", "[[",
    "command", "builtin", "dirs", "hash", "help", "local", "shopt", "umask", "ulimit", "times",
];

/// Programs that fetch from the network.
pub(super) const DOWNLOADERS: &[&str] = &[
    "curl", "wget", "fetch", "aria2c", "axel", "lftp", "http", "xh",
];

/// Programs that run code they are given (a shell, an interpreter).
pub(super) const INTERPRETERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox", "python",
    "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "tclsh", "pwsh", "deno",
    "bun",
];

/// `name` without a version suffix when it is an interpreter's (`python3.11`, `perl5.36`).
pub(super) fn interpreter(name: &str) -> Option<&'static str> {
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS
        .iter()
        .find(|i| **i == name || **i == base)
        .copied()
}

/// Database clients: `DROP TABLE` given to one is destructive.
pub(super) const DATABASES: &[&str] = &[
    "psql",
    "mysql",
    "mariadb",
    "sqlite3",
    "sqlcmd",
    "clickhouse-client",
    "clickhouse",
    "cqlsh",
    "mongo",
    "mongosh",
    "redis-cli",
    "valkey-cli",
    "duckdb",
    "cockroach",
];

/// Directories whose programs may be named by their full path and still be judged by name.
pub(super) const BIN_DIRS: &[&str] = &[
    "/bin",
    "/usr/bin",
    "/sbin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
];

/// Top-level system directories: recursive changes to these are destructive.
pub(super) const SYSTEM_ROOTS: &[&str] = &[
    "/", "/*", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt",
    "/proc", "/root", "/sbin", "/srv", "/sys", "/usr", "/var", "~", "~/", "/.", "/..",
];
