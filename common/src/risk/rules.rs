//! What each simple command may do: the read-only allow-list with its argument rules, the
//! destructive deny-list, and the wrappers (`sudo`, `env`, `xargs`, `sh -c`, …) whose inner
//! command is classified in turn.

use super::shell::{self, Place, Word};
use super::{Acc, Class};

use Class::{ConfigMutation as Config, Destructive, ReadOnly, ReversibleLow as Low};

/// Programs that only read, whatever their arguments.
const READERS: &[&str] = &[
    "cat",
    "tac",
    "head",
    "tail",
    "wc",
    "ls",
    "dir",
    "vdir",
    "stat",
    "file",
    "du",
    "df",
    "free",
    "uptime",
    "uname",
    "whoami",
    "id",
    "groups",
    "pwd",
    "echo",
    "printf",
    "true",
    "false",
    ":",
    "which",
    "whereis",
    "type",
    "printenv",
    "ps",
    "pgrep",
    "pidof",
    "lsblk",
    "lscpu",
    "lsmod",
    "lspci",
    "lsusb",
    "lsof",
    "lsns",
    "lsattr",
    "lsipc",
    "lslocks",
    "lslogins",
    "getfacl",
    "getent",
    "findmnt",
    "vmstat",
    "iostat",
    "mpstat",
    "pidstat",
    "nproc",
    "locale",
    "w",
    "who",
    "last",
    "lastb",
    "lastlog",
    "users",
    "netstat",
    "grep",
    "egrep",
    "fgrep",
    "zgrep",
    "cut",
    "tr",
    "column",
    "nl",
    "rev",
    "fold",
    "fmt",
    "paste",
    "join",
    "expand",
    "unexpand",
    "strings",
    "od",
    "hexdump",
    "md5sum",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "sum",
    "base64",
    "base32",
    "cmp",
    "diff",
    "comm",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "test",
    "[",
    "[[",
    "seq",
    "sleep",
    "jq",
    "zcat",
    "xzcat",
    "bzcat",
    "zstdcat",
    "dig",
    "nslookup",
    "host",
    "ping",
    "ping6",
    "traceroute",
    "tracepath",
    "cd",
    "pushd",
    "popd",
    "history",
    "jobs",
    "wait",
    "exit",
    "return",
    "read",
    "tty",
    "arch",
    "getconf",
    "env_info",
    "lvs",
    "vgs",
    "pvs",
    "lvdisplay",
    "vgdisplay",
    "pvdisplay",
    "iptables-save",
    "ip6tables-save",
    "nft-list",
    "pstree",
    "top",
    "htop",
    "uptime",
    "dmidecode",
    "sensors",
    "mokutil",
    "numfmt",
    "factor",
    "cal",
    "tsort",
    "yes",
    "ldd",
    "nm",
    "objdump",
    "readelf",
    "size",
    "wget-version",
    "namei",
    "stty",
    "fuser",
    "iotop",
    "ncdu-version",
];

/// Programs that fetch from the network.
const DOWNLOADERS: &[&str] = &[
    "curl", "wget", "fetch", "aria2c", "axel", "lftp", "http", "xh",
];

/// Programs that run code they are given (a shell, an interpreter).
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox", "python",
    "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "tclsh", "pwsh", "deno",
    "bun",
];

/// Database clients: `DROP TABLE` given to one is destructive.
const DATABASES: &[&str] = &[
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
const BIN_DIRS: &[&str] = &[
    "/bin",
    "/usr/bin",
    "/sbin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
];

/// Top-level system directories: recursive changes to these are destructive.
const SYSTEM_ROOTS: &[&str] = &[
    "/", "/*", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt",
    "/proc", "/root", "/sbin", "/srv", "/sys", "/usr", "/var", "~", "~/", "/.", "/..",
];

/// Shell words that open or close a construct; the command comes after them.
pub const RESERVED: &[&str] = &[
    "!", "{", "}", "then", "else", "do", "time", "if", "elif", "while", "until", "done", "fi",
    "esac",
];

/// Classifies one simple command; returns the name of the program it runs.
pub fn simple(
    words: &[Word],
    place: &Place,
    functions: &[String],
    acc: &mut Acc,
) -> Option<String> {
    let mut rest = words;
    // Reserved words, then headers of loops and cases (their words were already parsed).
    while let Some(w) = rest.first() {
        if w.dynamic || !RESERVED.contains(&w.lit.as_str()) {
            break;
        }
        rest = &rest[1..];
    }
    match rest.first().map(|w| w.lit.as_str()) {
        None => return None,
        Some("for" | "select" | "case" | "function" | "coproc") if !rest[0].dynamic => {
            acc.compound = true;
            return None;
        }
        _ => {}
    }
    // Leading assignments: `NAME=value cmd` (the value may hold commands, already judged).
    let mut assigned = false;
    while let Some(w) = rest.first() {
        if !is_assignment(&w.lit) {
            break;
        }
        assigned = true;
        rest = &rest[1..];
    }
    if assigned {
        acc.compound = true;
        if rest.is_empty() {
            acc.raise(Low, "sets a shell variable");
            return None;
        }
        acc.raise(
            Config,
            "sets variables for the command it runs (PATH, LD_PRELOAD and the like change what runs)",
        );
    }
    let (first, args) = rest.split_first()?;
    if first.dynamic {
        acc.raise(Config, "the program to run comes from an expansion");
        return None;
    }
    let name = program(&first.lit, acc);
    if functions.contains(&name) {
        acc.raise(Low, format!("calls shell function `{name}`"));
        if place.from.as_deref() == Some(name.as_str()) {
            acc.raise(
                Destructive,
                format!("fork bomb: function `{name}` pipes into itself"),
            );
        }
        return Some(name);
    }
    if place.piped && INTERPRETERS.contains(&name.as_str()) {
        acc.interprets = true;
    }
    command(&name, args, acc);
    sql_words(args, acc);
    Some(name)
}

/// `NAME=…`, `NAME+=…` or `NAME[i]=…`.
fn is_assignment(w: &str) -> bool {
    let Some(eq) = w.find('=') else {
        return false;
    };
    let name = w[..eq].trim_end_matches('+');
    let name = name.split('[').next().unwrap_or(name);
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The program's name; a path outside the system's bin directories is noted.
fn program(word: &str, acc: &mut Acc) -> String {
    match word.rsplit_once('/') {
        None => word.to_string(),
        Some((dir, base)) => {
            if !BIN_DIRS.contains(&dir) {
                acc.raise(
                    Config,
                    format!("runs `{word}`, a program outside the system's bin directories"),
                );
            }
            base.to_string()
        }
    }
}

/// The arguments' literal texts.
fn lits(args: &[Word]) -> Vec<&str> {
    args.iter().map(|a| a.lit.as_str()).collect()
}

/// Whether an option is given: `-x` alone or in a cluster (`-rf`), or a long form
/// (`--force`, `--force=…`).
fn flag(args: &[Word], short: &[char], long: &[&str]) -> bool {
    args.iter()
        .map(|a| a.lit.as_str())
        .take_while(|a| *a != "--")
        .any(|a| {
            if let Some(l) = a.strip_prefix("--") {
                let l = l.split('=').next().unwrap_or(l);
                long.contains(&l)
            } else if let Some(s) = a.strip_prefix('-') {
                !s.is_empty() && s.chars().any(|c| short.contains(&c))
            } else {
                false
            }
        })
}

/// Arguments that are not options (after `--`, everything).
fn operands(args: &[Word]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut ended = false;
    for a in args {
        if !ended && a.lit == "--" {
            ended = true;
        } else if ended || !a.lit.starts_with('-') || a.lit == "-" {
            out.push(a.lit.as_str());
        }
    }
    out
}

/// Skips options (and the values of those in `valued`) to the first operand.
fn after_options<'a>(args: &'a [Word], valued: &[&str]) -> &'a [Word] {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].lit.as_str();
        if a == "--" {
            return &args[i + 1..];
        }
        if !a.starts_with('-') || a == "-" {
            break;
        }
        i += if valued.contains(&a) { 2 } else { 1 };
    }
    &args[i.min(args.len())..]
}

fn dynamic(args: &[Word], name: &str, acc: &mut Acc) -> bool {
    if args.iter().any(|a| a.dynamic) {
        acc.raise(
            Config,
            format!("`{name}` arguments come from expansions: cannot be checked"),
        );
        true
    } else {
        false
    }
}

/// Judges a program by name and arguments.
fn command(name: &str, args: &[Word], acc: &mut Acc) {
    let a = lits(args);
    let sub = operands(args).first().copied().unwrap_or("");
    if DOWNLOADERS.contains(&name) {
        acc.downloads = true;
        acc.raise(
            Config,
            format!("`{name}` makes network requests and may write files"),
        );
        return;
    }
    if DATABASES.contains(&name) {
        acc.database = true;
        acc.raise(Config, format!("`{name}` runs database statements"));
        return;
    }
    if READERS.contains(&name) {
        acc.raise(ReadOnly, format!("`{name}` only reads"));
        return;
    }
    if name.starts_with("mkfs") {
        acc.raise(
            Destructive,
            format!("`{name}` makes a new filesystem (erases a device)"),
        );
        return;
    }
    match name {
        // Wrappers: the command they run is judged in turn.
        "sudo" | "doas" => {
            acc.compound = true;
            acc.raise(Config, format!("`{name}` runs a command as another user"));
            let inner = after_options(
                args,
                &["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"],
            );
            inner_command(inner, acc);
        }
        "su" | "runuser" => {
            acc.compound = true;
            acc.raise(Config, format!("`{name}` switches user"));
            if let Some(i) = a.iter().position(|x| *x == "-c" || *x == "--command")
                && let Some(script) = args.get(i + 1)
            {
                inner_script(script, acc);
            }
        }
        "env" => {
            let rest = after_options(
                args,
                &["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
            );
            if flag(args, &['S'], &["split-string"]) {
                acc.raise(Config, "`env -S` splits a string into a command");
            }
            let assigns = rest.iter().take_while(|w| is_assignment(&w.lit)).count();
            if assigns == rest.len() {
                acc.raise(ReadOnly, "`env` prints the environment");
            } else {
                if assigns > 0 || flag(args, &['i', 'u'], &["ignore-environment", "unset"]) {
                    acc.compound = true;
                    acc.raise(Config, "runs a command with a changed environment");
                }
                inner_command(&rest[assigns..], acc);
            }
        }
        "nice" | "ionice" | "timeout" | "stdbuf" | "time" | "chrt" | "taskset" | "flock"
        | "setsid" | "busybox" => {
            let valued: &[&str] = match name {
                "nice" => &["-n", "--adjustment"],
                "ionice" => &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
                "timeout" => &["-s", "--signal", "-k", "--kill-after"],
                "stdbuf" => &["-i", "-o", "-e"],
                "flock" => &[
                    "-w",
                    "--timeout",
                    "-E",
                    "--conflict-exit-code",
                    "-c",
                    "--command",
                ],
                _ => &[],
            };
            let mut inner = after_options(args, valued);
            // Positional arguments before the command.
            let skip = match name {
                "timeout" | "flock" => 1, // duration; lock file
                "chrt" => 1,              // priority
                "taskset" => 1,           // mask
                _ => 0,
            };
            inner = &inner[skip.min(inner.len())..];
            if name == "flock" && flag(args, &['c'], &["command"]) {
                if let Some(i) = a.iter().position(|x| *x == "-c" || *x == "--command")
                    && let Some(s) = args.get(i + 1)
                {
                    inner_script(s, acc);
                }
                return;
            }
            if inner.is_empty() {
                acc.raise(Config, format!("`{name}` with no command to run"));
            } else {
                inner_command(inner, acc);
            }
        }
        "nohup" => {
            acc.raise(Low, "`nohup` writes nohup.out");
            inner_command(args, acc);
        }
        "command" | "builtin" => {
            if flag(args, &['v', 'V'], &[]) {
                acc.raise(ReadOnly, format!("`{name} -v` looks a command up"));
            } else {
                inner_command(after_options(args, &[]), acc);
            }
        }
        "exec" => {
            acc.compound = true;
            acc.raise(Config, "`exec` replaces the shell");
            inner_command(after_options(args, &["-a"]), acc);
        }
        "eval" => {
            acc.compound = true;
            acc.raise(Config, "`eval` runs its arguments as shell code");
            let script = a.join(" ");
            shell::script(&script, acc);
        }
        "watch" => {
            acc.raise(Low, "`watch` runs a command repeatedly");
            let rest = after_options(args, &["-n", "--interval", "-d", "-q", "--equexit"]);
            if !rest.is_empty() {
                let script = lits(rest).join(" ");
                shell::script(&script, acc);
            }
        }
        "xargs" | "parallel" => {
            acc.compound = true;
            acc.raise(
                Config,
                format!("`{name}` runs a command on arguments read from input"),
            );
            let inner = after_options(
                args,
                &[
                    "-a",
                    "-d",
                    "-E",
                    "-I",
                    "-L",
                    "-n",
                    "-P",
                    "-s",
                    "--arg-file",
                    "--delimiter",
                    "--max-args",
                    "--max-procs",
                    "--max-lines",
                    "--max-chars",
                    "-j",
                    "--jobs",
                ],
            );
            if !inner.is_empty() {
                inner_command(inner, acc);
            }
        }
        "chroot" | "unshare" | "nsenter" | "systemd-run" | "firejail" | "bwrap" | "setpriv"
        | "capsh" | "sg" | "newgrp" => {
            acc.compound = true;
            acc.raise(
                Config,
                format!("`{name}` runs a command in a changed context"),
            );
            let rest = operands(args);
            if name == "chroot" && rest.len() > 1 {
                inner_command(&args[args.len() - (rest.len() - 1)..], acc);
            }
        }
        "ssh" => {
            acc.raise(Config, "`ssh` runs commands on another host");
            let rest = after_options(
                args,
                &[
                    "-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R", "-D", "-b", "-c", "-E", "-e",
                    "-I", "-m", "-O", "-Q", "-S", "-W", "-w", "-B",
                ],
            );
            if rest.len() > 1 {
                let script = lits(&rest[1..]).join(" ");
                shell::script(&script, acc);
            }
        }
        n if INTERPRETERS.contains(&n) => interpreter(n, args, acc),
        "source" | "." => {
            acc.interprets = true;
            acc.raise(Config, format!("`{name}` runs a script file in the shell"));
        }
        "export" | "unset" | "set" | "alias" | "unalias" | "shopt" | "umask" | "ulimit"
        | "trap" | "readonly" | "declare" | "typeset" | "local" | "hash" | "shift" => {
            acc.compound = true;
            acc.raise(Low, format!("`{name}` changes the shell's own state"));
        }

        // Files.
        "rm" => {
            if flag(
                args,
                &['r', 'R', 'f'],
                &["recursive", "force", "no-preserve-root"],
            ) {
                acc.raise(
                    Destructive,
                    "`rm` recursive or forced: deletes without asking",
                );
            } else {
                acc.raise(Config, "`rm` deletes files");
            }
            if operands(args).iter().any(|o| SYSTEM_ROOTS.contains(o)) {
                acc.raise(Destructive, "`rm` of a system directory");
            }
        }
        "rmdir" => acc.raise(Low, "`rmdir` removes empty directories"),
        "mkdir" | "touch" | "mktemp" => {
            acc.raise(Low, format!("`{name}` creates files or directories"))
        }
        "ln" => {
            if flag(args, &['f'], &["force"]) {
                acc.raise(Config, "`ln -f` replaces files");
            } else {
                acc.raise(Low, "`ln` creates links");
            }
        }
        "cp" | "mv" | "install" | "rsync" | "scp" | "rename" => {
            acc.raise(Config, format!("`{name}` writes or replaces files"));
            let ops = operands(args);
            if ops.iter().any(|o| block_device(o)) {
                acc.raise(Destructive, format!("`{name}` writes to a block device"));
            }
            if name == "mv"
                && ops.len() > 1
                && ops[..ops.len() - 1]
                    .iter()
                    .any(|o| SYSTEM_ROOTS.contains(o))
            {
                acc.raise(Destructive, "`mv` of a system directory");
            }
            if name == "rsync"
                && a.iter()
                    .any(|x| x.starts_with("--delete") || *x == "--remove-source-files")
            {
                acc.raise(
                    Destructive,
                    "`rsync --delete` deletes files at the destination",
                );
            }
        }
        "chmod" | "chown" | "chgrp" | "setfacl" | "chattr" | "chcon" => {
            let recursive = flag(args, &['R'], &["recursive"]);
            let ops = operands(args);
            if recursive && ops.iter().any(|o| SYSTEM_ROOTS.contains(o)) {
                acc.raise(Destructive, format!("`{name} -R` on a system directory"));
            } else {
                acc.raise(Config, format!("`{name}` changes ownership or permissions"));
            }
        }
        "tee" => {
            let ops = operands(args);
            if ops.iter().any(|o| block_device(o)) {
                acc.raise(Destructive, "`tee` writes to a block device");
            } else if ops.iter().all(|o| harmless_sink(o)) {
                acc.raise(ReadOnly, "`tee` to standard output only");
            } else {
                acc.raise(Config, "`tee` writes files");
            }
        }
        "truncate" | "fallocate" => acc.raise(Config, format!("`{name}` resizes files")),
        "dd" => acc.raise(Destructive, "`dd` writes raw blocks"),
        "shred" | "wipefs" | "blkdiscard" | "mkswap" | "mke2fs" | "fdisk" | "sfdisk" | "cfdisk"
        | "gdisk" | "sgdisk" | "cgdisk" | "parted" | "partx" | "sgdisk2" | "zerofree" => acc.raise(
            Destructive,
            format!("`{name}` erases or repartitions a disk"),
        ),
        "find" => find(args, acc),
        "sed" => sed(args, acc),
        "sort" => reader_unless(
            name,
            flag(args, &['o'], &["output"]),
            "writes its output to a file",
            acc,
        ),
        "uniq" => reader_unless(
            name,
            operands(args).len() > 1,
            "writes its output to a file",
            acc,
        ),
        "tree" => reader_unless(
            name,
            flag(args, &['o'], &[]),
            "writes its output to a file",
            acc,
        ),
        "xxd" => reader_unless(
            name,
            flag(args, &['r'], &["revert"]) || operands(args).len() > 1,
            "writes a file",
            acc,
        ),
        "rg" => reader_unless(
            name,
            flag(args, &[], &["pre"]),
            "runs a preprocessor command",
            acc,
        ),
        "awk" | "gawk" | "mawk" | "nawk" => {
            acc.raise(Config, format!("`{name}` can run commands and write files"))
        }
        "tar" => {
            let list = flag(args, &['t'], &["list"])
                || a.first().is_some_and(|f| {
                    !f.starts_with('-') && f.contains('t') && !f.contains(['c', 'x', 'r', 'u'])
                });
            if list
                && !flag(
                    args,
                    &['x', 'c', 'r', 'u'],
                    &["extract", "get", "create", "append", "update", "delete"],
                )
            {
                acc.raise(ReadOnly, "`tar` lists an archive");
            } else {
                acc.raise(Config, "`tar` creates or extracts files");
            }
        }
        "unzip" => reader_unless(
            name,
            !flag(args, &['l', 'v', 't', 'Z'], &[]),
            "extracts files",
            acc,
        ),

        // Processes.
        "kill" => kill(args, acc),
        "pkill" | "killall" | "skill" | "renice" => {
            acc.raise(Low, format!("`{name}` signals or reprioritises processes"))
        }
        "killall5" => acc.raise(Destructive, "`killall5` signals every process"),

        // Power and the system.
        "reboot" | "poweroff" | "halt" => {
            acc.raise(Destructive, format!("`{name}` takes the host down"))
        }
        "shutdown" => {
            if flag(args, &['c'], &[]) {
                acc.raise(Low, "`shutdown -c` cancels a pending shutdown");
            } else {
                acc.raise(Destructive, "`shutdown` takes the host down");
            }
        }
        "init" | "telinit" => {
            if matches!(sub, "0" | "6" | "1" | "s" | "S" | "single") {
                acc.raise(
                    Destructive,
                    format!("`{name} {sub}` halts, reboots or isolates the host"),
                );
            } else {
                acc.raise(Config, format!("`{name}` changes the run level"));
            }
        }
        "systemctl" => systemctl(args, acc),
        "service" => {
            let ops = operands(args);
            match ops
                .get(1)
                .copied()
                .unwrap_or(ops.first().copied().unwrap_or(""))
            {
                "status" | "--status-all" => acc.raise(ReadOnly, "`service … status` only reads"),
                "start" | "restart" | "reload" | "force-reload" | "try-restart" => {
                    acc.raise(Low, "`service` starts or restarts a service")
                }
                _ if flag(args, &[], &["status-all"]) => {
                    acc.raise(ReadOnly, "`service --status-all` only reads")
                }
                _ => acc.raise(Config, "`service` changes a service"),
            }
        }
        "journalctl" => reader_unless(
            name,
            flag(
                args,
                &[],
                &[
                    "vacuum-size",
                    "vacuum-time",
                    "vacuum-files",
                    "rotate",
                    "flush",
                    "sync",
                    "relinquish-var",
                    "smart-relinquish-var",
                    "setup-keys",
                    "update-catalog",
                ],
            ),
            "rotates, flushes or deletes journal files",
            acc,
        ),
        "dmesg" => reader_unless(
            name,
            flag(
                args,
                &['c', 'C', 'D', 'E', 'n'],
                &[
                    "clear",
                    "read-clear",
                    "console-off",
                    "console-on",
                    "console-level",
                ],
            ),
            "clears or reconfigures the kernel log",
            acc,
        ),
        "date" => reader_unless(name, flag(args, &['s'], &["set"]), "sets the clock", acc),
        "hwclock" => reader_unless(
            name,
            !flag(args, &['r'], &["show", "get"]),
            "sets a clock",
            acc,
        ),
        "hostname" => reader_unless(
            name,
            !operands(args).is_empty() || flag(args, &['F', 'b'], &["file", "boot"]),
            "sets the host name",
            acc,
        ),
        "hostnamectl" | "timedatectl" | "localectl" | "loginctl" | "networkctl" | "resolvectl"
        | "busctl" => {
            let read = sub.is_empty()
                || matches!(
                    sub,
                    "status"
                        | "show"
                        | "list"
                        | "query"
                        | "statistics"
                        | "dns"
                        | "domain"
                        | "tree"
                        | "introspect"
                        | "monitor"
                )
                || sub.starts_with("list-")
                || sub.starts_with("show-")
                || sub.ends_with("-status");
            reader_unless(name, !read, "changes system settings", acc);
        }
        "sysctl" => reader_unless(
            name,
            flag(args, &['w', 'p'], &["write", "load", "system"])
                || a.iter().any(|x| x.contains('=')),
            "sets kernel parameters",
            acc,
        ),
        "mount" => {
            let rest = after_options(args, &["-t", "--types", "-O", "--test-opts"]);
            let lists = rest.is_empty()
                && !flag(
                    args,
                    &['a', 'o', 'B', 'M', 'R'],
                    &["all", "bind", "move", "rbind", "options"],
                );
            reader_unless(name, !lists, "mounts a filesystem", acc);
        }
        "umount" | "swapoff" | "swapon" | "losetup" | "cryptsetup" | "modprobe" | "insmod"
        | "rmmod" => acc.raise(
            Config,
            format!("`{name}` changes devices, mounts or modules"),
        ),
        "crontab" => {
            if flag(args, &['r'], &["remove"]) {
                acc.raise(Destructive, "`crontab -r` deletes the crontab");
            } else if flag(args, &['l'], &["list"]) {
                acc.raise(ReadOnly, "`crontab -l` lists");
            } else {
                acc.raise(Config, "`crontab` replaces or edits the crontab");
            }
        }

        // Users.
        "userdel" | "deluser" | "groupdel" | "delgroup" => {
            acc.raise(Destructive, format!("`{name}` deletes an account"))
        }
        "useradd" | "adduser" | "usermod" | "groupadd" | "addgroup" | "groupmod" | "passwd"
        | "chpasswd" | "chage" | "gpasswd" | "visudo" => {
            acc.raise(Config, format!("`{name}` changes accounts"))
        }

        // Network and firewall.
        "ip" => ip(args, acc),
        "ss" => reader_unless(name, flag(args, &['K'], &["kill"]), "closes sockets", acc),
        "route" => reader_unless(
            name,
            !operands(args).is_empty() && !matches!(sub, "-n"),
            "changes routes",
            acc,
        ),
        "iptables" | "ip6tables" | "ebtables" | "arptables" | "iptables-legacy"
        | "iptables-nft" => firewall(name, args, acc),
        "nft" => {
            if sub == "flush" {
                acc.raise(Destructive, "`nft flush` drops firewall rules");
            } else if sub == "list" || (sub == "-a" && a.get(1) == Some(&"list")) {
                acc.raise(ReadOnly, "`nft list` only reads");
            } else {
                acc.raise(Config, "`nft` changes firewall rules");
            }
        }
        "ufw" => match sub {
            "status" | "show" => acc.raise(ReadOnly, "`ufw status` only reads"),
            "reset" => acc.raise(Destructive, "`ufw reset` drops every firewall rule"),
            _ => acc.raise(Config, "`ufw` changes firewall rules"),
        },
        "iptables-restore" | "ip6tables-restore" | "firewall-cmd" => {
            acc.raise(Config, format!("`{name}` changes firewall rules"))
        }

        // Tools with subcommands.
        "git" => git(args, acc),
        "docker" | "podman" | "nerdctl" => containers(name, args, acc),
        "kubectl" | "oc" => kubectl(name, args, acc),
        "apt" | "apt-get" | "aptitude" | "dnf" | "yum" | "zypper" | "pacman" | "apk" | "snap"
        | "flatpak" => packages(name, args, acc),
        "apt-cache" | "apt-file" | "apt-mark"
            if name != "apt-mark" || matches!(sub, "showhold" | "showauto" | "showmanual") =>
        {
            acc.raise(ReadOnly, format!("`{name}` queries packages"))
        }
        "dpkg" | "dpkg-query" => reader_unless(
            name,
            name == "dpkg"
                && !flag(
                    args,
                    &['l', 'L', 's', 'S', 'p', 'c', 'I'],
                    &[
                        "list",
                        "listfiles",
                        "status",
                        "search",
                        "print-avail",
                        "contents",
                        "info",
                        "print-architecture",
                        "get-selections",
                        "audit",
                        "verify",
                    ],
                ),
            "installs or removes packages",
            acc,
        ),
        "rpm" => reader_unless(
            name,
            !a.first()
                .is_some_and(|x| x.starts_with("-q") || *x == "--query"),
            "installs or removes packages",
            acc,
        ),
        "pct" | "qm" => match sub {
            "destroy" => acc.raise(
                Destructive,
                format!("`{name} destroy` deletes a guest and its disks"),
            ),
            "list" | "status" | "config" | "pending" | "listsnapshot" => {
                acc.raise(ReadOnly, format!("`{name} {sub}` only reads"))
            }
            _ => acc.raise(Config, format!("`{name}` changes a guest")),
        },
        "virsh" => match sub {
            "undefine" | "destroy" | "vol-delete" | "pool-delete" | "snapshot-delete" => acc.raise(
                Destructive,
                format!("`virsh {sub}` destroys a guest or its storage"),
            ),
            "list" | "dominfo" | "dumpxml" | "domstate" | "domblklist" | "domiflist"
            | "nodeinfo" | "version" | "vol-list" | "pool-list" | "net-list" | "snapshot-list"
            | "capabilities" => acc.raise(ReadOnly, format!("`virsh {sub}` only reads")),
            _ => acc.raise(Config, "`virsh` changes a guest"),
        },
        "zfs" | "zpool" => match sub {
            "destroy" => acc.raise(
                Destructive,
                format!("`{name} destroy` deletes datasets or a pool"),
            ),
            "list" | "get" | "status" | "iostat" | "history" | "version" => {
                acc.raise(ReadOnly, format!("`{name} {sub}` only reads"))
            }
            _ => acc.raise(Config, format!("`{name}` changes storage")),
        },
        "lvremove" | "vgremove" | "pvremove" | "lvreduce" => {
            acc.raise(Destructive, format!("`{name}` deletes or shrinks volumes"))
        }
        "dropdb" | "dropuser" => {
            acc.raise(Destructive, format!("`{name}` deletes a database or role"))
        }
        _ => acc.raise(Config, format!("`{name}` is not known to be harmless")),
    }
}

/// `kill [-s SIG | -SIG] PID…`: every process (-1) or init (1) is destructive; pids from an
/// expansion could be either.
fn kill(args: &[Word], acc: &mut Acc) {
    if args
        .iter()
        .any(|a| matches!(a.lit.as_str(), "-l" | "-L" | "--list" | "--table"))
    {
        acc.raise(ReadOnly, "`kill -l` lists signals");
        return;
    }
    if dynamic(args, "kill", acc) {
        return;
    }
    let mut pids = Vec::new();
    let mut i = 0;
    let mut signal_given = false;
    while i < args.len() {
        let a = args[i].lit.as_str();
        match a {
            "-s" | "-n" | "--signal" => i += 2,
            "--" => {
                pids.extend(args[i + 1..].iter().map(|w| w.lit.as_str()));
                break;
            }
            _ if a.starts_with('-') && !signal_given && i == 0 => {
                signal_given = true;
                i += 1;
            }
            _ => {
                pids.push(a);
                i += 1;
            }
        }
    }
    if pids.iter().any(|p| *p == "-1" || *p == "1") {
        acc.raise(Destructive, "`kill` of every process (-1) or of init (1)");
    } else {
        acc.raise(Low, "`kill` signals processes");
    }
}

/// `name` only reads unless `writes`.
fn reader_unless(name: &str, writes: bool, what: &str, acc: &mut Acc) {
    if writes {
        acc.raise(Config, format!("`{name}` {what}"));
    } else {
        acc.raise(ReadOnly, format!("`{name}` only reads"));
    }
}

fn inner_command(words: &[Word], acc: &mut Acc) {
    if words.is_empty() {
        return;
    }
    if acc.depth > super::MAX_DEPTH {
        acc.raise(Config, "commands nested too deep to inspect");
        return;
    }
    acc.depth += 1;
    simple(words, &Place::default(), &[], acc);
    acc.depth -= 1;
}

fn inner_script(w: &Word, acc: &mut Acc) {
    if w.dynamic {
        // `sh -c "$(curl …)"` runs whatever the expansion printed.
        acc.interprets = true;
        acc.raise(Config, "a script that comes from an expansion");
    }
    shell::script(&w.lit, acc);
}

/// `sh -c '…'` and the like; a script file or standard input is not inspected.
fn interpreter(name: &str, args: &[Word], acc: &mut Acc) {
    acc.compound = true;
    let shells = !matches!(
        name,
        "python"
            | "python2"
            | "python3"
            | "perl"
            | "ruby"
            | "node"
            | "nodejs"
            | "php"
            | "lua"
            | "tclsh"
            | "pwsh"
            | "deno"
            | "bun"
    );
    if name == "busybox"
        && let Some((first, rest)) = args.split_first()
        && !INTERPRETERS.contains(&first.lit.as_str())
    {
        command(&first.lit, rest, acc);
        return;
    }
    let c = args.iter().position(|a| {
        a.lit == "-c"
            || (shells && a.lit.starts_with('-') && !a.lit.starts_with("--") && a.lit.contains('c'))
    });
    match c {
        Some(i) if shells => {
            acc.raise(Config, format!("`{name} -c` runs a shell script"));
            if let Some(script) = args.get(i + 1) {
                inner_script(script, acc);
            }
        }
        _ if operands(args).iter().all(|o| *o == "-") => {
            acc.interprets = true;
            acc.raise(Config, format!("`{name}` runs code from its input"));
        }
        _ => acc.raise(
            Config,
            format!("`{name}` runs a program that is not inspected"),
        ),
    }
}

fn find(args: &[Word], acc: &mut Acc) {
    let mut i = 0;
    let mut read = true;
    while i < args.len() {
        match args[i].lit.as_str() {
            "-delete" => {
                acc.raise(Destructive, "`find -delete` deletes every match");
                read = false;
            }
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                acc.compound = true;
                read = false;
                acc.raise(Config, "`find -exec` runs a command for each match");
                let end = args[i + 1..]
                    .iter()
                    .position(|w| w.lit == ";" || w.lit == "+")
                    .map_or(args.len(), |e| i + 1 + e);
                inner_command(&args[i + 1..end], acc);
                i = end;
            }
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                acc.raise(Config, "`find` writes its output to a file");
                read = false;
            }
            _ => {}
        }
        i += 1;
    }
    if read && !dynamic(args, "find", acc) {
        acc.raise(ReadOnly, "`find` only reads");
    }
}

/// `sed` reads unless it edits in place, reads its script from a file, or the script
/// writes (`w`, `W`, `s///w`) or runs (`e`, `s///e`) anything.
fn sed(args: &[Word], acc: &mut Acc) {
    if flag(args, &['i'], &["in-place"]) {
        acc.raise(Config, "`sed -i` edits files in place");
        return;
    }
    if flag(args, &['f'], &["file"]) {
        acc.raise(Config, "`sed -f` runs a script from a file");
        return;
    }
    if dynamic(args, "sed", acc) {
        return;
    }
    let mut scripts: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].lit.as_str();
        if a == "-e" || a == "--expression" {
            if let Some(s) = args.get(i + 1) {
                scripts.push(&s.lit);
            }
            i += 2;
            continue;
        }
        if let Some(s) = a.strip_prefix("--expression=") {
            scripts.push(s);
        }
        i += 1;
    }
    if scripts.is_empty()
        && let Some(first) = operands(args).first()
    {
        scripts.push(first);
    }
    if scripts.iter().any(|s| sed_script_acts(s)) {
        acc.raise(
            Config,
            "`sed` script writes files or runs commands (w, W, e)",
        );
    } else {
        acc.raise(ReadOnly, "`sed` only reads");
    }
}

/// Whether a sed script holds a command that writes a file or runs one.
fn sed_script_acts(script: &str) -> bool {
    let b: Vec<char> = script.chars().collect();
    let mut i = 0;
    // Skips a delimited part starting at `i` (the delimiter); returns the index after it.
    let delimited = |mut i: usize, d: char| {
        i += 1;
        while i < b.len() && b[i] != d {
            if b[i] == '\\' {
                i += 1;
            }
            i += 1;
        }
        i + 1
    };
    while i < b.len() {
        match b[i] {
            '/' | '\\' => {
                // An address regex (`\cREc` uses any delimiter).
                let d = if b[i] == '\\' {
                    i += 1;
                    b.get(i).copied().unwrap_or('/')
                } else {
                    '/'
                };
                i = delimited(i, d);
            }
            's' | 'y' => {
                let Some(&d) = b.get(i + 1) else {
                    return false;
                };
                i = delimited(i + 1, d);
                i = delimited(i - 1, d);
                if b[i.min(b.len())..]
                    .iter()
                    .take_while(|c| !matches!(c, ';' | '\n' | '}'))
                    .any(|c| matches!(c, 'w' | 'W' | 'e'))
                {
                    return true;
                }
            }
            'w' | 'W' | 'e' => return true,
            'a' | 'i' | 'c' | 'r' | 'R' | 'b' | 't' | 'T' | ':' => {
                // Text or a label or file name to the end of the command.
                while i < b.len() && b[i] != '\n' && b[i] != ';' {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    false
}

fn systemctl(args: &[Word], acc: &mut Acc) {
    let rest = after_options(
        args,
        &[
            "-t",
            "--type",
            "-p",
            "--property",
            "-n",
            "--lines",
            "-o",
            "--output",
            "-H",
            "--host",
            "-M",
            "--machine",
            "--state",
            "--signal",
            "-s",
            "--kill-whom",
        ],
    );
    let sub = rest.first().map_or("", |w| w.lit.as_str());
    match sub {
        "" | "status" | "show" | "is-active" | "is-enabled" | "is-failed" | "is-system-running"
        | "list-units" | "list-unit-files" | "list-timers" | "list-sockets" | "list-jobs"
        | "list-dependencies" | "list-machines" | "list-automounts" | "list-paths" | "cat"
        | "get-default" | "help" | "show-environment" => {
            acc.raise(ReadOnly, format!("`systemctl {sub}` only reads"))
        }
        "start"
        | "restart"
        | "reload"
        | "try-restart"
        | "reload-or-restart"
        | "try-reload-or-restart"
        | "condrestart"
        | "force-reload" => acc.raise(Low, format!("`systemctl {sub}` starts or restarts units")),
        "reboot"
        | "poweroff"
        | "halt"
        | "kexec"
        | "rescue"
        | "emergency"
        | "soft-reboot"
        | "suspend"
        | "hibernate"
        | "hybrid-sleep"
        | "suspend-then-hibernate" => acc.raise(
            Destructive,
            format!("`systemctl {sub}` takes the host down or out of service"),
        ),
        "isolate" => acc.raise(Config, "`systemctl isolate` changes the running target"),
        _ => acc.raise(Config, format!("`systemctl {sub}` changes units")),
    }
}

fn ip(args: &[Word], acc: &mut Acc) {
    if args
        .iter()
        .any(|w| matches!(w.lit.as_str(), "-b" | "-batch" | "--batch" | "-force"))
    {
        acc.raise(Config, "`ip -batch` runs commands from a file");
        return;
    }
    let rest = after_options(
        args,
        &[
            "-n", "-netns", "-f", "-family", "-rc", "-rcvbuf", "-l", "-loops",
        ],
    );
    let object = rest.first().map_or("", |w| w.lit.as_str());
    let verb = rest.get(1).map_or("", |w| w.lit.as_str());
    if object == "netns" && verb == "exec" {
        acc.compound = true;
        acc.raise(
            Config,
            "`ip netns exec` runs a command in a network namespace",
        );
        inner_command(rest.get(3..).unwrap_or(&[]), acc);
        return;
    }
    let reading = matches!(
        verb,
        "" | "show" | "sh" | "s" | "list" | "ls" | "lst" | "l" | "get" | "monitor" | "help"
    ) || verb.starts_with("dev") && object.starts_with('l')
        || object == "-br";
    if verb == "flush" {
        acc.raise(
            Destructive,
            format!("`ip {object} flush` drops every address or route (may cut the host off)"),
        );
    } else if reading {
        acc.raise(ReadOnly, format!("`ip {object}` only reads"));
    } else {
        acc.raise(Config, format!("`ip {object} {verb}` changes the network"));
    }
}

fn firewall(name: &str, args: &[Word], acc: &mut Acc) {
    let a = lits(args);
    let has = |o: &[&str]| a.iter().any(|x| o.contains(x));
    if has(&["-F", "--flush", "-X", "--delete-chain"])
        || a.iter()
            .any(|x| x.starts_with("-F") && x.len() > 2 && !x.starts_with("--"))
    {
        acc.raise(Destructive, format!("`{name}` flushes firewall rules"));
    } else if let Some(p) = a.iter().position(|x| *x == "-P" || *x == "--policy")
        && a.get(p + 2)
            .is_some_and(|t| matches!(*t, "DROP" | "REJECT"))
    {
        acc.raise(
            Destructive,
            format!("`{name} -P … DROP` can lock everyone out"),
        );
    } else if has(&[
        "-A",
        "--append",
        "-I",
        "--insert",
        "-D",
        "--delete",
        "-R",
        "--replace",
        "-N",
        "--new-chain",
        "-E",
        "--rename-chain",
        "-P",
        "--policy",
        "-Z",
        "--zero",
    ]) {
        acc.raise(Config, format!("`{name}` changes firewall rules"));
    } else if has(&["-L", "--list", "-S", "--list-rules", "-C", "--check"]) {
        acc.raise(ReadOnly, format!("`{name}` lists rules"));
    } else {
        acc.raise(Config, format!("`{name}` is not known to be harmless"));
    }
}

fn git(args: &[Word], acc: &mut Acc) {
    // Global options before the subcommand.
    let mut i = 0;
    while i < args.len() {
        let a = args[i].lit.as_str();
        match a {
            "-C" | "--namespace" | "--git-dir" | "--work-tree" => i += 2,
            "-c" | "--config-env" => {
                acc.raise(
                    Config,
                    "`git -c` sets configuration (which can run commands)",
                );
                i += 2;
            }
            _ if a.starts_with('-') => i += 1,
            _ => break,
        }
    }
    let rest = &args[i.min(args.len())..];
    let Some((sub, sargs)) = rest.split_first() else {
        acc.raise(ReadOnly, "`git` with no subcommand prints help");
        return;
    };
    let sub = sub.lit.as_str();
    let ops = operands(sargs);
    let sa = lits(sargs);
    let g = |what: &str| format!("`git {sub}` {what}");
    match sub {
        "status" | "log" | "diff" | "show" | "blame" | "annotate" | "shortlog" | "describe"
        | "rev-parse" | "rev-list" | "ls-files" | "ls-tree" | "ls-remote" | "cat-file" | "grep"
        | "whatchanged" | "show-ref" | "count-objects" | "version" | "help" | "show-branch"
        | "merge-base" | "name-rev" | "for-each-ref" | "cherry" | "range-diff" | "var"
        | "check-ignore" | "verify-commit" | "verify-tag" => {
            if sub == "diff" && flag(sargs, &[], &["output", "ext-diff"]) {
                acc.raise(Config, g("writes a file or runs an external diff"));
            } else {
                acc.raise(ReadOnly, g("only reads"));
            }
        }
        "branch" => {
            if flag(sargs, &['D'], &[])
                || sa
                    .iter()
                    .any(|x| *x == "-d" && flag(sargs, &['f'], &["force"]))
            {
                acc.raise(Destructive, g("-D deletes unmerged branches"));
            } else if flag(
                sargs,
                &['d', 'm', 'M', 'c', 'C', 'f', 'u'],
                &[
                    "delete",
                    "move",
                    "copy",
                    "force",
                    "set-upstream-to",
                    "unset-upstream",
                    "edit-description",
                ],
            ) {
                acc.raise(Config, g("changes branches"));
            } else if ops.is_empty()
                || flag(
                    sargs,
                    &['l'],
                    &["list", "contains", "merged", "no-merged", "points-at"],
                )
            {
                acc.raise(ReadOnly, g("lists branches"));
            } else {
                acc.raise(Low, g("creates a branch"));
            }
        }
        "tag" => {
            if flag(sargs, &['d'], &["delete"]) {
                acc.raise(Config, g("deletes tags"));
            } else if ops.is_empty()
                || flag(sargs, &['l'], &["list", "contains", "points-at", "merged"])
            {
                acc.raise(ReadOnly, g("lists tags"));
            } else {
                acc.raise(Low, g("creates a tag"));
            }
        }
        "remote" => match ops.first().copied().unwrap_or("") {
            "" | "show" | "get-url" => acc.raise(ReadOnly, g("lists remotes")),
            _ => acc.raise(Config, g("changes remotes")),
        },
        "config" => {
            if flag(
                sargs,
                &['l'],
                &[
                    "get",
                    "get-all",
                    "get-regexp",
                    "list",
                    "get-urlmatch",
                    "show-origin",
                ],
            ) || matches!(ops.first().copied(), Some("get" | "list"))
            {
                acc.raise(ReadOnly, g("reads configuration"));
            } else {
                acc.raise(Config, g("changes configuration"));
            }
        }
        "stash" => match ops.first().copied().unwrap_or("push") {
            "list" | "show" => acc.raise(ReadOnly, g("lists stashes")),
            "drop" | "clear" => acc.raise(Destructive, g("drops stashed changes")),
            _ => acc.raise(Low, g("stashes changes")),
        },
        "worktree" | "submodule" | "notes" | "reflog" => match ops.first().copied().unwrap_or("") {
            "" | "list" | "status" | "show" | "summary" => acc.raise(ReadOnly, g("only reads")),
            "expire" | "delete" | "remove" | "prune" | "deinit" => {
                acc.raise(Destructive, g("deletes history or work trees"))
            }
            _ => acc.raise(Config, g("changes the repository")),
        },
        "fetch" | "pull" | "add" | "commit" | "switch" | "merge" | "cherry-pick" | "revert"
        | "init" | "clone" | "gc" | "fsck" | "prune" | "repack" | "mv" | "restore"
            if sub != "gc" || !sa.iter().any(|x| x.starts_with("--prune=now")) =>
        {
            if sub == "restore"
                || (sub == "switch" && flag(sargs, &['f'], &["discard-changes", "force"]))
            {
                acc.raise(Config, g("discards working-tree changes"));
            } else if sub == "fsck" {
                acc.raise(ReadOnly, g("only reads"));
            } else {
                acc.raise(Low, g("records or fetches changes"));
            }
        }
        "push" => {
            if flag(
                sargs,
                &['f', 'd'],
                &[
                    "force",
                    "force-with-lease",
                    "force-if-includes",
                    "mirror",
                    "delete",
                    "prune",
                ],
            ) || ops
                .iter()
                .skip(1)
                .any(|r| r.starts_with('+') || r.starts_with(':'))
            {
                acc.raise(Destructive, g("rewrites or deletes remote history"));
            } else {
                acc.raise(Config, g("publishes commits"));
            }
        }
        "reset" => {
            if flag(sargs, &[], &["hard", "merge", "keep"]) {
                acc.raise(Destructive, g("--hard discards uncommitted work"));
            } else {
                acc.raise(Config, g("moves the branch"));
            }
        }
        "clean" => {
            if flag(sargs, &['n'], &["dry-run"]) {
                acc.raise(ReadOnly, g("-n only lists"));
            } else {
                acc.raise(Destructive, g("deletes untracked files"));
            }
        }
        "checkout" => {
            if ops.contains(&".") || sa.contains(&"--") || flag(sargs, &['f'], &["force"]) {
                acc.raise(Destructive, g("discards working-tree changes"));
            } else {
                acc.raise(Low, g("switches branches"));
            }
        }
        "filter-branch" | "filter-repo" | "update-ref" | "replace" | "gc" => {
            acc.raise(Destructive, g("rewrites or prunes history"))
        }
        _ => acc.raise(Config, g("is not known to be harmless")),
    }
}

fn containers(name: &str, args: &[Word], acc: &mut Acc) {
    let rest = after_options(
        args,
        &[
            "-H",
            "--host",
            "-c",
            "--context",
            "--config",
            "-l",
            "--log-level",
        ],
    );
    let mut words = lits(rest);
    let mut sub = words.first().copied().unwrap_or("");
    // `docker container ls` is `docker ps`; `docker compose …` and `docker image …` likewise.
    let group = sub;
    if matches!(
        group,
        "container"
            | "image"
            | "volume"
            | "network"
            | "system"
            | "compose"
            | "builder"
            | "context"
            | "node"
            | "service"
            | "stack"
            | "secret"
            | "config"
            | "plugin"
            | "buildx"
    ) {
        words.remove(0);
        sub = words
            .iter()
            .copied()
            .find(|w| !w.starts_with('-'))
            .unwrap_or("");
    }
    let d = |what: &str| {
        format!(
            "`{name} {group}{}{sub}` {what}",
            if group != sub { " " } else { "" }
        )
    };
    let read = matches!(
        sub,
        "ps" | "ls"
            | "list"
            | "inspect"
            | "logs"
            | "images"
            | "version"
            | "info"
            | "top"
            | "port"
            | "diff"
            | "history"
            | "stats"
            | "events"
            | "df"
            | "config"
            | "search"
    ) || (sub.is_empty() && group.is_empty());
    let destructive = match group {
        "volume" => matches!(sub, "rm" | "remove" | "prune"),
        "system" => sub == "prune",
        "compose" => sub == "down" && words.iter().any(|w| matches!(*w, "-v" | "--volumes")),
        _ => sub == "rm" && words.iter().any(|w| matches!(*w, "-v" | "--volumes")),
    };
    if destructive {
        acc.raise(Destructive, d("deletes volumes or data"));
    } else if read && !(sub == "config" && group != "compose") {
        acc.raise(ReadOnly, d("only reads"));
    } else if matches!(sub, "start" | "restart" | "pull" | "unpause") {
        acc.raise(Low, d("starts or fetches"));
    } else {
        acc.raise(Config, d("changes containers"));
    }
}

fn kubectl(name: &str, args: &[Word], acc: &mut Acc) {
    let rest = after_options(
        args,
        &[
            "-n",
            "--namespace",
            "--context",
            "--kubeconfig",
            "-s",
            "--server",
            "--cluster",
            "--user",
        ],
    );
    let words = lits(rest);
    let sub = words.first().copied().unwrap_or("");
    let next = words.get(1).copied().unwrap_or("");
    match sub {
        "get" | "describe" | "logs" | "top" | "version" | "explain" | "api-resources"
        | "api-versions" | "cluster-info" | "events" | "diff" => {
            acc.raise(ReadOnly, format!("`{name} {sub}` only reads"))
        }
        "config"
            if matches!(
                next,
                "view" | "get-contexts" | "current-context" | "get-clusters" | "get-users"
            ) =>
        {
            acc.raise(ReadOnly, format!("`{name} config {next}` only reads"))
        }
        "auth" if next == "can-i" || next == "whoami" => {
            acc.raise(ReadOnly, format!("`{name} auth {next}` only reads"))
        }
        "delete" | "drain" => acc.raise(
            Destructive,
            format!("`{name} {sub}` deletes or evicts workloads"),
        ),
        "rollout" if next == "restart" || next == "status" || next == "history" => acc.raise(
            if next == "restart" { Low } else { ReadOnly },
            format!("`{name} rollout {next}`"),
        ),
        _ => acc.raise(Config, format!("`{name} {sub}` changes the cluster")),
    }
}

fn packages(name: &str, args: &[Word], acc: &mut Acc) {
    let sub = operands(args).first().copied().unwrap_or("");
    match sub {
        "list" | "show" | "search" | "policy" | "depends" | "rdepends" | "info" | "repolist"
        | "check-update" | "query" | "changelog" | "provides" | "whatprovides" | "-Q" | "-Qi"
        | "-Ss" | "-Si" => acc.raise(ReadOnly, format!("`{name} {sub}` only reads")),
        "update" | "makecache" | "refresh"
            if !matches!(name, "dnf" | "yum" | "zypper") || sub != "update" =>
        {
            acc.raise(Low, format!("`{name} {sub}` refreshes package lists"))
        }
        _ if name == "pacman"
            && flag(args, &['Q'], &["query"])
            && !flag(args, &['R', 'S', 'U'], &[]) =>
        {
            acc.raise(ReadOnly, "`pacman -Q` only reads")
        }
        _ => acc.raise(
            Config,
            format!("`{name} {sub}` installs, removes or upgrades packages"),
        ),
    }
}

/// A redirection that writes to `target`.
pub fn write_target(target: &Word, acc: &mut Acc) {
    if target.dynamic {
        acc.raise(Config, "writes to a file named by an expansion");
    } else if block_device(&target.lit) {
        acc.raise(
            Destructive,
            format!("writes to block device {}", target.lit),
        );
    } else if matches!(
        target.lit.as_str(),
        "/proc/sysrq-trigger" | "/dev/mem" | "/dev/kmem" | "/dev/port"
    ) {
        acc.raise(Destructive, format!("writes to {}", target.lit));
    } else if harmless_sink(&target.lit) {
        acc.raise(Low, format!("redirection to {}", target.lit));
    } else {
        acc.raise(Config, format!("writes to {}", target.lit));
    }
}

fn harmless_sink(p: &str) -> bool {
    matches!(
        p,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "-"
    ) || p.starts_with("/dev/fd/")
}

/// A disk, partition or volume device node.
fn block_device(p: &str) -> bool {
    let Some(dev) = p.strip_prefix("/dev/") else {
        return false;
    };
    const PREFIXES: &[&str] = &[
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "dm-", "md", "mapper/", "disk/", "loop", "nbd",
        "zd", "rbd", "sr", "pmem", "bcache", "drbd", "zvol/",
    ];
    PREFIXES.iter().any(|x| dev.starts_with(x))
}

/// Notes destructive SQL (or a key-value store's flush) in a command's words.
fn sql_words(args: &[Word], acc: &mut Acc) {
    for a in args {
        sql_text(&a.lit, acc);
    }
    if args.len() > 1 {
        sql_text(&lits(args).join(" "), acc);
    }
}

/// Notes destructive SQL in `text`: `DROP TABLE|DATABASE|SCHEMA`, `TRUNCATE`, `DELETE FROM`
/// without `WHERE`, `FLUSHALL`/`FLUSHDB`, `dropDatabase()`.
pub fn sql_text(text: &str, acc: &mut Acc) {
    if acc.sql.is_some() || text.len() < 7 {
        return;
    }
    let lower = text.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ';' || c == '(' || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let found = words.windows(2).find_map(|w| match (w[0], w[1]) {
        ("drop", "table" | "database" | "schema" | "owned") => {
            Some(format!("SQL `DROP {}`", w[1].to_uppercase()))
        }
        ("truncate", t) if !t.starts_with('-') => Some("SQL `TRUNCATE`".to_string()),
        ("delete", "from") if !words.contains(&"where") => {
            Some("SQL `DELETE FROM` without `WHERE`".to_string())
        }
        _ => None,
    });
    let found = found.or_else(|| {
        words
            .iter()
            .find(|w| matches!(**w, "flushall" | "flushdb") || w.contains("dropdatabase"))
            .map(|w| format!("`{w}`"))
    });
    if let Some(f) = found {
        acc.sql = Some(f);
    }
}
