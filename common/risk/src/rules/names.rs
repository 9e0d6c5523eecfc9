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
    "sh", "bash", "rbash", "dash", "zsh", "ksh", "mksh", "lksh", "posh", "yash", "ash", "fish",
    "csh", "tcsh", "busybox", "pypy", "pypy3", "python", "python2", "python3", "perl", "ruby",
    "node", "nodejs", "php", "lua", "luajit", "tclsh", "wish", "expect", "pwsh", "deno", "bun",
    "Rscript", "julia", "guile", "racket",
];

/// The interpreter `name` is, a version and build suffix left off (`python3.11`,
/// `perl5.36-x86_64-linux-gnu`): an interpreter's name followed by a digit.
pub(super) fn interpreter(name: &str) -> Option<&'static str> {
    INTERPRETERS
        .iter()
        .filter(|i| {
            name.strip_prefix(**i).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_digit())
            })
        })
        .max_by_key(|i| i.len())
        .copied()
}

/// Whether interpreter `kind` (as [`interpreter`] names it) is a shell.
pub(super) fn is_shell(kind: &str) -> bool {
    !matches!(
        kind,
        "python"
            | "python2"
            | "python3"
            | "pypy"
            | "pypy3"
            | "perl"
            | "ruby"
            | "node"
            | "nodejs"
            | "php"
            | "lua"
            | "luajit"
            | "tclsh"
            | "wish"
            | "expect"
            | "Rscript"
            | "julia"
            | "guile"
            | "racket"
            | "pwsh"
            | "deno"
            | "bun"
    )
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

/// What a variable in a command's environment makes programs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Variable {
    /// Its value is a command some program runs (a pager, an editor, a remote shell).
    Command,
    /// It makes programs load code (a library, a startup script, options that load
    /// modules): what that code does is not read.
    Code(&'static str),
    /// A prompt the shell expands, running the commands it holds.
    Expanded,
    /// Options for less, which may hold a command for it to run first (`+!…`).
    LessOptions,
}

/// What variable `name` makes programs run, if anything.
pub(super) fn variable(name: &str) -> Option<Variable> {
    use Variable::{Code, Command, Expanded, LessOptions};
    let code = match name {
        "PS0" | "PS1" | "PS2" | "PS4" => return Some(Expanded),
        "LESS" => return Some(LessOptions),
        "PAGER" | "MANPAGER" | "EDITOR" | "VISUAL" | "BROWSER" | "PROMPT_COMMAND" | "GIT_SSH"
        | "GIT_SSH_COMMAND" | "GIT_PROXY_COMMAND" | "GIT_EXTERNAL_DIFF" | "RSYNC_RSH"
        | "LESSOPEN" | "LESSCLOSE" => return Some(Command),
        _ if name.ends_with("_PAGER") || name.ends_with("_EDITOR") || name.ends_with("ASKPASS") => {
            return Some(Command);
        }
        "LD_PRELOAD" | "LD_AUDIT" | "LD_LIBRARY_PATH" | "GCONV_PATH" => "libraries",
        "BASH_ENV" | "ENV" => "a startup script",
        "PYTHONSTARTUP" | "PYTHONPATH" | "PYTHONHOME" => "Python code",
        "PERL5OPT" | "PERL5LIB" | "PERLLIB" | "PERL5DB" => "Perl code",
        "RUBYOPT" | "RUBYLIB" => "Ruby code",
        "NODE_OPTIONS" | "NODE_PATH" => "JavaScript code",
        "JAVA_TOOL_OPTIONS" | "_JAVA_OPTIONS" | "JDK_JAVA_OPTIONS" => "Java agents",
        "GIT_EXEC_PATH" => "git's programs",
        // A repository named outright: git does not check who owns it, and runs the
        // commands its configuration names.
        "GIT_DIR" | "GIT_WORK_TREE" | "GIT_COMMON_DIR" => "a repository's configuration",
        _ if name.starts_with("BASH_FUNC_") => "shell functions",
        _ if name.starts_with("GIT_CONFIG") => "git configuration (pagers, hooks, aliases)",
        _ => return None,
    };
    Some(Code(code))
}

/// Variables whose value the shell runs or loads later (`PS4` under `set -x`,
/// `PROMPT_COMMAND`, `BASH_ENV` in the shells it starts) or that make a name run another
/// program (`BASH_CMDS[ls]=/bin/rm`, `BASH_ALIASES`).
pub(crate) fn runs_later(name: &str) -> bool {
    matches!(
        name,
        "PS0"
            | "PS1"
            | "PS2"
            | "PS4"
            | "PROMPT_COMMAND"
            | "BASH_ENV"
            | "ENV"
            | "BASH_CMDS"
            | "BASH_ALIASES"
    )
}
