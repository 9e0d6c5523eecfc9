//! Wrappers: programs that run another command (`sudo`, `env`, `nice`, `xargs`, `ssh`,
//! `eval`, `sh -c`, an interpreter's script, …). The command they run is judged in turn,
//! as deep as `MAX_DEPTH`.

use super::args::{after_options, flag, lits, operands, values};
use super::names;
use super::{command, is_assignment, simple};
use crate::shell::{self, Place, Word};
use crate::{Acc, Class};

use Class::{ConfigMutation as Config, ReadOnly, ReversibleLow as Low};

/// Judges `name` when it is a wrapper; false when it is not one.
pub(super) fn wrapper(name: &str, args: &[Word], acc: &mut Acc) -> bool {
    let a = lits(args);
    match name {
        "sudo" | "doas" => {
            acc.compound = true;
            acc.raise(Config, format!("`{name}` runs a command as another user"));
            let inner = after_options(
                args,
                &[
                    "-u",
                    "-g",
                    "-h",
                    "-p",
                    "-C",
                    "-D",
                    "-r",
                    "-t",
                    "-U",
                    "-T",
                    "-R",
                    "--user",
                    "--group",
                    "--host",
                    "--prompt",
                    "--close-from",
                    "--chdir",
                    "--role",
                    "--type",
                    "--other-user",
                    "--command-timeout",
                    "--chroot",
                ],
            );
            if inner.is_empty() && flag(args, &['s', 'i'], &["shell", "login"]) && acc.piped_in {
                acc.unread(format!(
                    "`{name}` runs a shell on what another command prints into it"
                ));
            }
            inner_command(inner, acc);
        }
        "su" | "runuser" => {
            acc.compound = true;
            acc.raise(Config, format!("`{name}` switches user"));
            let scripts = values(args, &['c'], &["command", "session-command"]);
            if !scripts.is_empty() {
                for script in &scripts {
                    inner_script(script, acc);
                }
            } else if name == "runuser" && !values(args, &['u'], &["user"]).is_empty() {
                inner_command(
                    after_options(
                        args,
                        &[
                            "-u",
                            "--user",
                            "-g",
                            "--group",
                            "-G",
                            "--supp-group",
                            "-w",
                            "--whitelist-environment",
                        ],
                    ),
                    acc,
                );
            } else if acc.piped_in {
                // Its shell reads its commands from its input.
                acc.unread(format!(
                    "`{name}` runs a shell on what another command prints into it"
                ));
            }
        }
        "env" => {
            let valued = [
                "-u",
                "--unset",
                "-C",
                "--chdir",
                "-S",
                "--split-string",
                "-a",
                "--argv0",
            ];
            let mut rest = after_options(args, &valued);
            // A lone `-` is `-i` to GNU env; options may follow it.
            while rest.first().is_some_and(|w| w.lit == "-" && !w.dynamic) {
                rest = after_options(&rest[1..], &valued);
            }
            // `env -C /dev cat watchdog`: as after `cd /dev`.
            if values(args, &['C'], &["chdir"]).iter().any(|d| {
                let to = super::reached(&d.lit);
                d.dynamic || ["/dev", "/proc", "/sys"].iter().any(|p| to.starts_with(p))
            }) {
                acc.descriptor_dirs = true;
            }
            if flag(args, &['S'], &["split-string"]) {
                acc.raise(Config, "`env -S` splits a string into a command");
                // The string is the command (and its arguments), split as the shell would:
                // every one given, attached, clustered (`-vS'…'`) or the next word.
                for w in values(args, &['S'], &["split-string"]) {
                    if w.dynamic {
                        acc.unread("`env -S` of an expansion runs a command built at run time");
                    } else {
                        shell::script(&w.lit, acc);
                    }
                }
            }
            let assigns = rest.iter().take_while(|w| is_assignment(&w.lit)).count();
            if assigns == rest.len() {
                acc.raise(ReadOnly, "`env` prints the environment");
            } else {
                if assigns > 0 || flag(args, &['i', 'u'], &["ignore-environment", "unset"]) {
                    acc.compound = true;
                    acc.raise(Config, "runs a command with a changed environment");
                }
                for w in &rest[..assigns] {
                    super::assignment(w, acc);
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
                "time" => &["-f", "--format", "-o", "--output"],
                "stdbuf" => &["-i", "-o", "-e", "--input", "--output", "--error"],
                "chrt" => &[
                    "-T",
                    "-P",
                    "-D",
                    "--sched-runtime",
                    "--sched-period",
                    "--sched-deadline",
                ],
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
            if args[..args.len() - inner.len()].iter().any(|w| w.dynamic) {
                // An expansion may be several words (`timeout {9,find} …`, `$T` split):
                // the command may start inside it.
                acc.raise(
                    Config,
                    format!("`{name}`: an argument before its command comes from an expansion"),
                );
            }
            if name == "flock" && flag(args, &['c'], &["command"]) {
                if let Some(i) = a.iter().position(|x| *x == "-c" || *x == "--command")
                    && let Some(s) = args.get(i + 1)
                {
                    inner_script(s, acc);
                }
                return true;
            }
            if inner.is_empty() {
                acc.raise(Config, format!("`{name}` with no command to run"));
            } else {
                inner_command(inner, acc);
            }
        }
        "toybox" | "eatmydata" | "fakeroot" | "unbuffer" | "pkexec" | "setarch" | "linux32"
        | "linux64" | "prlimit" | "strace" | "ltrace" | "ssh-agent" | "dbus-run-session"
        | "xvfb-run" | "screen" | "ifne" | "chpst" | "chronic" | "numactl" | "cgexec"
        | "runcon" | "faketime" => {
            acc.compound = true;
            let valued: &[&str] = match name {
                "fakeroot" => &["-l", "--lib", "--faked", "-s", "-i"],
                "pkexec" => &["--user"],
                "prlimit" => &["-p", "--pid", "-o", "--output"],
                "strace" | "ltrace" => &[
                    "-e",
                    "-o",
                    "-p",
                    "-s",
                    "-u",
                    "-a",
                    "-b",
                    "-E",
                    "-I",
                    "-O",
                    "-P",
                    "-S",
                    "-X",
                    "-U",
                    "-n",
                    "-A",
                    "--output",
                    "--trace",
                    "--attach",
                    "--string-limit",
                    "--user",
                    "--env",
                    "--signal",
                    "--columns",
                ],
                "ssh-agent" => &["-a", "-E", "-t", "-P", "-O"],
                "xvfb-run" => &[
                    "-n",
                    "-s",
                    "-f",
                    "-e",
                    "-p",
                    "-l",
                    "--server-num",
                    "--server-args",
                    "--auth-file",
                    "--error-file",
                    "--xauth-protocol",
                ],
                "screen" => &["-S", "-c", "-e", "-h", "-p", "-T", "-t", "-Logfile"],
                "chpst" => &[
                    "-u", "-U", "-e", "-/", "-n", "-l", "-L", "-m", "-d", "-o", "-p", "-f", "-c",
                ],
                "numactl" => &[
                    "-C",
                    "-N",
                    "-m",
                    "-p",
                    "-i",
                    "--physcpubind",
                    "--cpunodebind",
                    "--membind",
                    "--preferred",
                    "--interleave",
                    "--localalloc",
                ],
                "cgexec" => &["-g"],
                "runcon" => &["-u", "-r", "-t", "-l"],
                _ => &[],
            };
            if name == "screen" && flag(args, &['X', 'x', 'r', 'R'], &[]) {
                acc.unread("`screen` sends commands to, or types into, a session: not read");
                return true;
            }
            let mut inner = after_options(args, valued);
            if matches!(name, "setarch" | "faketime") && !inner.is_empty() {
                // Its architecture, then its own options again.
                inner = after_options(&inner[1..], &["--uname-2.6"]);
            }
            acc.raise(Config, format!("`{name}` runs a command"));
            if inner.is_empty() {
                acc.raise(Config, format!("`{name}` with no command to run"));
            } else {
                inner_command(inner, acc);
            }
        }
        "tmux" => {
            acc.compound = true;
            acc.raise(Config, "`tmux` runs commands in its sessions");
            let rest = after_options(args, &["-L", "-S", "-f", "-c", "-T"]);
            let Some((sub, sargs)) = rest.split_first() else {
                return true;
            };
            match sub.lit.as_str() {
                // The shell command these run is their last operand.
                "new" | "new-session" | "new-window" | "neww" | "split-window" | "splitw"
                | "respawn-pane" | "respawnp" | "respawn-window" | "respawnw" | "run-shell"
                | "run" | "display-popup" | "popup" | "pipe-pane" | "pipep" => {
                    let popup = matches!(
                        sub.lit.as_str(),
                        "run-shell" | "run" | "display-popup" | "popup"
                    );
                    let valued: &[&str] = if popup {
                        &[
                            "-c", "-d", "-e", "-h", "-s", "-S", "-t", "-T", "-w", "-x", "-y", "-b",
                        ]
                    } else {
                        &[
                            "-c", "-e", "-f", "-F", "-n", "-s", "-t", "-x", "-y", "-l", "-o",
                        ]
                    };
                    let ops = after_options(sargs, valued);
                    if ops.iter().any(|w| w.dynamic) {
                        acc.unread("`tmux` runs a command built at run time");
                    } else if !ops.is_empty() {
                        shell::script(&lits(ops).join(" "), acc);
                    }
                }
                "send-keys" | "send" | "if-shell" | "if" | "source-file" | "source" => {
                    acc.unread("`tmux` types into a pane or runs its own commands: not read")
                }
                _ => {}
            }
        }
        "script" => {
            acc.compound = true;
            acc.raise(Config, "`script` runs a shell and records it");
            if let Some(i) = a.iter().position(|x| {
                *x == "--command"
                    || (x.starts_with('-') && !x.starts_with("--") && x.ends_with('c'))
            }) {
                if let Some(cmd) = args.get(i + 1) {
                    inner_script(cmd, acc);
                }
            } else if let Some(cmd) = a.iter().find_map(|x| x.strip_prefix("--command=")) {
                shell::script(cmd, acc);
            } else {
                acc.shell_input = true;
                acc.interprets = true;
                if acc.piped_in {
                    acc.unread("`script` runs a shell on what another command prints into it");
                }
            }
        }
        "at" | "batch" => {
            acc.raise(Config, format!("`{name}` runs commands later"));
            if !flag(args, &['f'], &[]) {
                acc.shell_input = true;
                acc.interprets = true;
                if acc.piped_in {
                    acc.unread(format!("`{name}` runs what another command prints into it"));
                }
            }
        }
        "pee" => {
            acc.raise(
                Config,
                "`pee` runs each of its arguments as a shell command on its input",
            );
            for w in args {
                inner_script(w, acc);
                if shell::reads_input(&w.lit) {
                    acc.unread("`pee` feeds its input to a shell or interpreter");
                }
            }
        }
        n if n.starts_with("ld-linux") || n.starts_with("ld-musl") || n == "ld.so" => {
            // The loader runs the program it is given, as that program would run.
            acc.raise(Config, "the dynamic loader runs a program");
            inner_command(
                after_options(args, &["--library-path", "--preload", "--argv0", "--audit"]),
                acc,
            );
        }
        "mapfile" | "readarray" => {
            acc.raise(Low, format!("`{name}` reads lines into a variable"));
            // `-C CALLBACK`: shell code run for the lines it reads.
            if let Some(i) = a.iter().position(|x| *x == "-C")
                && let Some(cb) = args.get(i + 1)
            {
                acc.unread(format!("`{name} -C` runs code on the lines it reads"));
                inner_script(cb, acc);
            }
        }
        "fc" if !flag(args, &['l'], &[]) => {
            acc.unread("`fc` runs commands from the shell's history, not read here");
        }
        "valgrind" => {
            acc.raise(Config, "`valgrind` runs a command");
            let inner = after_options(args, &[]);
            inner_command(inner, acc);
        }
        "nohup" => {
            acc.raise(Low, "`nohup` writes nohup.out");
            let args = args
                .strip_prefix(&[Word::literal("--")][..])
                .unwrap_or(args);
            inner_command(args, acc);
        }
        "command" | "builtin" => {
            // `-v` only where `command` reads it: before the command it runs.
            let lookup = super::models::get("command")
                .and_then(|m| super::models::check("command", m, args).ok())
                .is_some_and(|p| p.has(&["-v", "-V"]));
            if lookup {
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
            if args.iter().any(|w| w.dynamic) {
                acc.unread("`eval` of an expansion runs code built at run time");
            }
            let script = a.join(" ");
            shell::script(&script, acc);
        }
        "watch" => {
            acc.raise(Low, "`watch` runs a command repeatedly");
            let rest = after_options(args, &["-n", "--interval", "-q", "--equexit"]);
            if rest.iter().any(|w| w.dynamic) {
                acc.unread("`watch` of an expansion runs code built at run time");
            }
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
                    "--process-slot-var",
                    "--eof",
                    "--replace",
                    "-j",
                    "--jobs",
                ],
            );
            if shell::runs_what_it_reads(inner) {
                // `… | xargs sh -c '…{}…'`: what it reads becomes code.
                acc.unread(format!(
                    "`{name}` gives what it reads to a shell or interpreter: code built at run time"
                ));
            }
            if name == "parallel" && (inner.is_empty() || inner[0].lit == ":::") {
                // With no command, GNU parallel runs each line it reads (or each argument
                // after `:::`) as a command.
                acc.unread("`parallel` runs what it reads as commands");
            }
            if super::deletes(inner) {
                acc.raise(
                    Class::Destructive,
                    format!("`{name}` deletes every item it reads"),
                );
            }
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
            if name == "chroot" {
                // Its new root, then the command.
                let inner = after_options(args, &["--userspec", "--groups"]);
                if inner.len() > 1 {
                    inner_command(&inner[1..], acc);
                }
            } else if !rest.is_empty() {
                // Their options differ one from another: the command they run is not
                // found among them for certain, so it is not read.
                acc.unread(format!("the command `{name}` runs is not read"));
            }
        }
        "ssh" => {
            acc.raise(Config, "`ssh` runs commands on another host");
            let local = ["proxycommand", "localcommand", "knownhostscommand"];
            if a.iter().any(|x| {
                let x = x.to_ascii_lowercase();
                local.iter().any(|k| x.contains(k))
            }) {
                acc.unread("`ssh` runs a local command given in its options");
            }
            let rest = after_options(
                args,
                &[
                    "-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R", "-D", "-b", "-c", "-E", "-e",
                    "-I", "-m", "-O", "-Q", "-S", "-W", "-w", "-B",
                ],
            );
            if rest.iter().skip(1).any(|w| w.dynamic) {
                acc.unread("`ssh` of an expansion runs code built at run time");
            }
            if rest.len() > 1 {
                let script = lits(&rest[1..]).join(" ");
                shell::script(&script, acc);
            }
        }
        n if names::interpreter(n).is_some() => interpreter(n, args, acc),
        "source" | "." => {
            acc.interprets = true;
            acc.raise(Config, format!("`{name}` runs a script file in the shell"));
            if let Some(file) = operands_words(args).first() {
                if crate::shell::is_stdin_path(&file.lit) {
                    // `… | base64 -d | . /dev/stdin`: the shell runs what it is fed, as
                    // `sh` reading its input does.
                    acc.shell_input = true;
                    if acc.piped_in {
                        acc.unread(format!(
                            "`{name}` runs code another command prints into its input"
                        ));
                    }
                }
                from_descriptor(name, &file.lit, acc);
                acc.runs_file(&file.lit);
            }
            if args.first().is_some_and(|w| w.dynamic) {
                acc.unread(format!("`{name}` of a file named by an expansion"));
            }
        }
        "export" | "unset" | "set" | "alias" | "unalias" | "shopt" | "umask" | "ulimit"
        | "trap" | "readonly" | "declare" | "typeset" | "local" | "hash" | "shift" => {
            acc.compound = true;
            acc.raise(Low, format!("`{name}` changes the shell's own state"));
            // What a variable is given is what the programs after it read: `export
            // GIT_DIR=…` or `declare -x PAGER=…` as a `VAR=value` prefix would be; a
            // variable that chooses code exported by name was set before, unseen.
            if matches!(name, "declare" | "typeset" | "local")
                && flag(args, &['n'], &[])
                && args.iter().any(|w| {
                    w.lit.split_once('=').is_some_and(|(_, v)| {
                        super::names::runs_later(v.split('[').next().unwrap_or(v))
                    })
                })
            {
                acc.unread(format!("`{name} -n` names a variable the shell runs later"));
            }
            // A reference whose target is not a plain name written here: the target, set
            // from an expansion (or by the first assignment to a reference declared
            // without one), may hold a subscript, evaluated when the reference is used
            // (`declare -n r="$x"; echo "$r"` with `x='a[$(…)]'` runs the command).
            if matches!(name, "declare" | "typeset" | "local")
                && flag(args, &['n'], &[])
                && operands_words(args).iter().any(|w| {
                    w.dynamic
                        || w.lit.split_once('=').is_none_or(|(_, target)| {
                            target.is_empty()
                                || !target
                                    .chars()
                                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
                        })
                })
            {
                acc.unread(format!(
                    "`{name} -n` refers to a variable named at run time, whose subscript may run a command"
                ));
            }
            if matches!(name, "declare" | "typeset" | "local") && flag(args, &['n'], &[]) {
                // `typeset -n r=HOME; r=-delete`: assigning the reference assigns HOME.
                for w in args {
                    if let Some((_, v)) = w.lit.split_once('=') {
                        super::steering(v.split('[').next().unwrap_or(v), acc);
                    }
                }
            }
            // What it hands the programs it runs: every name `export` or `declare -x`
            // exports (`-n` only takes the export away), and everything set after `set -a`.
            let exports = (name == "export" && !flag(args, &['n'], &[]))
                || (matches!(name, "declare" | "typeset" | "local") && flag(args, &['x'], &[]));
            if exports {
                if flag(args, &['f'], &[]) {
                    acc.raise(
                        Config,
                        format!("`{name} -f` exports shell functions, which the bash scripts it runs call instead of programs"),
                    );
                }
                for w in operands_words(args) {
                    crate::request::exported(
                        w.lit.split(['=', '+', '[']).next().unwrap_or(""),
                        acc,
                    );
                }
            }
            if name == "set"
                && (args.iter().any(|w| {
                    !w.lit.starts_with("--") && w.lit.starts_with('-') && w.lit.contains('a')
                }) || args
                    .windows(2)
                    .any(|p| p[0].lit == "-o" && p[1].lit == "allexport"))
            {
                acc.raise(
                    Config,
                    "`set -a` exports every variable set after it to the programs it runs",
                );
            }
            if matches!(
                name,
                "export" | "readonly" | "declare" | "typeset" | "local"
            ) {
                for w in operands_words(args) {
                    if w.lit.contains('=') {
                        super::assignment(w, acc);
                    } else if name == "export" && super::names::variable(&w.lit).is_some() {
                        acc.unread(format!(
                            "`export {}` hands programs a variable that chooses what they run, its value set out of sight",
                            w.lit
                        ));
                    }
                }
            }
            // What `trap` and `alias` are given runs later: it is judged as a script now.
            let bodies: Vec<&Word> = match name {
                "trap" => operands_words(args).into_iter().take(1).collect(),
                "alias" => args.iter().filter(|w| w.lit.contains('=')).collect(),
                _ => Vec::new(),
            };
            for w in bodies {
                let body = if name == "alias" {
                    w.lit.split_once('=').map_or("", |(_, v)| v)
                } else {
                    &w.lit
                };
                if w.dynamic {
                    acc.unread(format!(
                        "`{name}` of an expansion: commands built at run time"
                    ));
                } else {
                    acc.compound = true;
                    shell::script(body, acc);
                    if shell::reads_input(body) {
                        // It runs later, on whatever the input is then (`exec < f`, a pipe).
                        acc.unread(format!(
                            "`{name}` runs a shell or interpreter later, on whatever its input is then"
                        ));
                    }
                }
            }
        }

        _ => return false,
    }
    true
}

pub(super) fn inner_command(words: &[Word], acc: &mut Acc) {
    if words.is_empty() {
        return;
    }
    if acc.depth > crate::MAX_DEPTH {
        acc.unread("commands nested too deep to inspect");
        return;
    }
    acc.depth += 1;
    simple(words, &Place::default(), &[], acc);
    acc.depth -= 1;
}

fn inner_script(w: &Word, acc: &mut Acc) {
    if w.dynamic {
        // `sh -c "$(… | base64 -d)"` runs whatever the expansion printed: no one read it.
        acc.interprets = true;
        acc.unread("a script that comes from an expansion (built at run time)");
    }
    shell::script(&w.lit, acc);
}

/// A program file that is a descriptor other than the input (`sh /dev/fd/3` after `3<&0`
/// or `3<s`), a pattern that may name one (`/dev/std[i]n`), or a relative path after the
/// command changed into or linked to a directory of them (`cd /dev/fd; sh 3`): what it
/// holds is not read.
fn from_descriptor(name: &str, path: &str, acc: &mut Acc) {
    let pattern = path.contains(['*', '?', '[', '{'])
        && ["dev", "proc", "fd", "std"]
            .iter()
            .any(|d| path.contains(d));
    if crate::shell::descriptor(path).is_some_and(|fd| fd != 0)
        || pattern
        || (acc.descriptor_dirs && !path.starts_with('/'))
    {
        acc.unread(format!("`{name}` runs a program read from a descriptor"));
    }
}

/// Whether an interpreter without `-c` takes its program from its standard input: no
/// script operand (the values of a shell's `-o`/`-O` not counted), `-s`, or a script
/// named `-`, `/dev/stdin` or fd 0's path.
pub(crate) fn reads_script_from_input(args: &[Word], shell: bool) -> bool {
    let mut rest = args.iter().map(|a| a.lit.as_str());
    while let Some(a) = rest.next() {
        if a == "--" {
            return rest.next().is_none_or(crate::shell::is_stdin_path);
        }
        if shell && matches!(a, "-o" | "+o" | "-O" | "+O") {
            rest.next();
            continue;
        }
        if shell && a.starts_with('-') && !a.starts_with("--") && a.contains('s') {
            return true;
        }
        if a.starts_with('-') || a.starts_with('+') {
            if a == "-" {
                return true;
            }
            continue;
        }
        return crate::shell::is_stdin_path(a);
    }
    true
}

/// `sh -c '…'` and the like; a script file or standard input is not inspected.
fn interpreter(name: &str, args: &[Word], acc: &mut Acc) {
    acc.compound = true;
    // `python3.11` is judged as `python`.
    let kind = names::interpreter(name).unwrap_or(name);
    let shells = names::is_shell(kind);
    if name == "busybox"
        && let Some((first, rest)) = args.split_first()
        && names::interpreter(&first.lit).is_none()
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
        _ if !shells && let Some(what) = inline_code(kind, args) => {
            // The classifier reads shell, not Python or Perl: `exec(b64decode(…))` hides
            // anything from the human who would say yes.
            acc.unread(format!("`{name}` {what}"));
        }
        _ if reads_script_from_input(args, shells) => {
            acc.interprets = true;
            acc.shell_input |= shells;
            acc.code_input |= !shells;
            if acc.piped_in {
                acc.unread(format!(
                    "`{name}` runs code another command prints into its input"
                ));
            }
            acc.raise(Config, format!("`{name}` runs code from its input"));
        }
        _ => {
            if let Some(script) = script_operand(args, shells) {
                from_descriptor(name, script, acc);
                acc.runs_file(script);
            }
            if !shells
                && args.iter().any(|a| {
                    a.lit.starts_with("-m")
                        || (a.lit.starts_with('-')
                            && !a.lit.starts_with("--")
                            && a.lit.ends_with('m'))
                })
            {
                acc.runs_module();
            }
            if args.iter().any(|w| w.dynamic) {
                // `bash "$F"`: which program it runs is known only at run time.
                acc.unread(format!("`{name}` runs a program named by an expansion"));
            }
            acc.raise(
                Config,
                format!("`{name}` runs a program that is not inspected"),
            )
        }
    }
}

/// The script file an interpreter runs: its first operand, the values of the options
/// that take one passed over (`bash -o posix f`, `python3 -W error f.py`).
fn script_operand(args: &[Word], shell: bool) -> Option<&str> {
    let valued: &[&str] = if shell {
        &["-o", "+o", "-O", "+O"]
    } else {
        &[
            "-W", "-X", "-Q", "-I", "-M", "-m", "-r", "-C", "-E", "-F", "-x",
        ]
    };
    let mut rest = args.iter().map(|a| a.lit.as_str());
    while let Some(a) = rest.next() {
        if a == "--" {
            return rest.next();
        }
        if !shell && a.starts_with("-m") {
            return None; // a module is run, not a file
        }
        if valued.contains(&a) {
            rest.next();
        } else if !a.starts_with(['-', '+']) {
            return Some(a);
        }
    }
    None
}

/// Why a (non-shell) interpreter's arguments hold code the classifier does not read, if
/// they do: its program given inline (`python3 -c`, `perl -lne`, `node --eval=…`,
/// `deno eval`) before its script operand, or a module run that is not known to only
/// read. An operand right after an option that may take a value (`-W`, `--title`) is
/// taken for that value, so a flag after it is still found: when unsure, the program is
/// held to be inline.
fn inline_code(name: &str, args: &[Word]) -> Option<String> {
    let inline = Some("runs code given inline, in a language not read".to_string());
    // Letters that give code, letters whose value is the rest of the word.
    let (code, valued): (&str, &str) = match name {
        "python" | "python2" | "python3" | "pypy" | "pypy3" => ("c", "WXQm"),
        "perl" => ("eE", "iIxMmdDVC"),
        "ruby" => ("e", "IrCEFKTWx"),
        "lua" => ("e", "l"),
        "php" => ("rRBE", "cdfztS"),
        "node" | "nodejs" | "bun" => ("ep", "rC"),
        // `deno eval …`, or `deno run -` (its input): wherever the word is.
        "deno" => return inline.filter(|_| args.iter().any(|a| a.lit == "eval" || a.lit == "-")),
        "pwsh" => {
            return inline.filter(|_| {
                args.iter().any(|a| {
                    let l = a.lit.to_ascii_lowercase();
                    (l.starts_with("-c") || l.starts_with("-e")) && !l.starts_with("-ex")
                })
            });
        }
        _ => return None,
    };
    let long = [
        "--eval",
        "--print",
        "--run",
        "--process-code",
        "--process-begin",
        // node: modules loaded first, a `data:` URL among them.
        "--import",
        "--require",
        "--loader",
        "--experimental-loader",
    ];
    let mut may_take_value = false;
    for w in args {
        let a = w.lit.as_str();
        if a == "--" {
            return None;
        }
        if !a.starts_with('-') || a == "-" {
            if !may_take_value {
                return None; // the script
            }
            may_take_value = false;
            continue;
        }
        if let Some(l) = a.strip_prefix("--") {
            if long.contains(&a.split('=').next().unwrap_or(a)) {
                return inline;
            }
            may_take_value = !l.contains('=');
            continue;
        }
        may_take_value = a.len() == 2;
        for c in a[1..].chars() {
            if code.contains(c) {
                return inline;
            }
            if valued.contains(c) {
                if (name.starts_with("python") || name.starts_with("pypy")) && c == 'm' {
                    // A module runs: most run code or programs they are given or find.
                    let module = &a[a.find('m').unwrap_or(0) + 1..];
                    let attached = Some((module, w.dynamic)).filter(|(m, _)| !m.is_empty());
                    return module_not_read(attached, args);
                }
                if name == "perl" && matches!(c, 'M' | 'm') && a.contains([';', '(', '{', '\'']) {
                    return inline; // `-M` text is inserted as code
                }
                if name.starts_with("node") && c == 'r' {
                    return inline; // a module loaded first
                }
                break;
            }
        }
    }
    None
}

/// Whether a Python interpreter's arguments run one of the quiet modules (`-m json.tool`):
/// it reads its input as data, not as code.
pub(super) fn quiet_module(args: &[Word]) -> bool {
    let a: Vec<&str> = args.iter().map(|w| w.lit.as_str()).collect();
    a.iter()
        .position(|x| *x == "-m")
        .and_then(|i| a.get(i + 1))
        .or_else(|| {
            a.iter()
                .find_map(|x| x.strip_prefix("-m").filter(|m| !m.is_empty()).map(|_| x))
        })
        .is_some_and(|m| QUIET_MODULES.contains(&m.trim_start_matches("-m")))
}

/// Modules `python -m` runs that neither run code or programs given to them (`timeit`,
/// `pdb`, `runpy`, `unittest`, `webbrowser`, `http.server`'s CGI, `pip`'s builds) nor
/// read code from their input (`code`, `asyncio`): they read, convert or pack files.
const QUIET_MODULES: &[&str] = &[
    "json",
    "json.tool",
    "base64",
    "quopri",
    "calendar",
    "platform",
    "sysconfig",
    "locale",
    "mimetypes",
    "uuid",
    "random",
    "tokenize",
    "ast",
    "dis",
    "pickletools",
    "py_compile",
    "compileall",
    "gzip",
    "zipfile",
    "tarfile",
    "filecmp",
    "this",
];

/// Why the module `python -m` runs (given attached, or else the word after `-m`) is code
/// not read, unless it is one known not to run what it is given.
fn module_not_read(attached: Option<(&str, bool)>, args: &[Word]) -> Option<String> {
    let word = attached.or_else(|| {
        args.iter()
            .position(|w| w.lit == "-m")
            .and_then(|i| args.get(i + 1))
            .map(|w| (w.lit.as_str(), w.dynamic))
    });
    match word {
        Some((m, false)) if QUIET_MODULES.contains(&m) => None,
        Some((m, _)) => Some(format!(
            "runs module `{m}`, not known to only read: what it runs is not read"
        )),
        None => None,
    }
}

/// The words that are not options (after a `--`, all of them).
fn operands_words(args: &[Word]) -> Vec<&Word> {
    let mut out = Vec::new();
    let mut options = true;
    for w in args {
        if options && w.lit == "--" {
            options = false;
        } else if !options || !w.lit.starts_with('-') || w.lit == "-" {
            out.push(w);
        }
    }
    out
}
