//! Programs with command languages of their own, given in their arguments: a debugger's
//! (`gdb -ex 'shell …'`, `python …`), an editor's (`vim -c '!…'`) and a pager's
//! (`less '+!…'`). The classifier does not read those languages: a command in one is
//! code not read, unless it is among the few known only to show things.

use super::args::operands;
use crate::shell::{self, Word};
use crate::{Acc, Class};

use Class::ConfigMutation as Config;

/// What a gdb option gives: commands to run, or a file of them.
enum Given {
    Commands,
    File,
}

/// The meaning of gdb's option word `w` (gdb takes long options with one dash or two, by
/// any unique prefix), with a value attached to it.
fn gdb_option(w: &str) -> Option<(Given, Option<&str>)> {
    let body = w.strip_prefix('-')?;
    let long = body.strip_prefix('-');
    let body = long.unwrap_or(body);
    let (name, value) = body
        .split_once('=')
        .map_or((body, None), |(n, v)| (n, Some(v)));
    let prefix = |of: &str, least: usize| name.len() >= least && of.starts_with(name);
    if name == "ex" || name == "iex" || prefix("eval-command", 2) || prefix("init-eval-command", 6)
    {
        return Some((Given::Commands, value));
    }
    if name == "x"
        || name == "ix"
        || name == "P"
        || prefix("command", 3)
        || prefix("init-command", 6)
        || prefix("python", 2)
    {
        return Some((Given::File, value));
    }
    // `-xFILE`: the short option with its value attached.
    match body.strip_prefix('x') {
        Some(file) if long.is_none() && !file.is_empty() => Some((Given::File, Some(file))),
        _ => None,
    }
}

/// gdb commands that only show the program's state: backtraces, `info` of names (no
/// expression that could call a function), moving between frames, display settings.
fn shows_only(command: &str) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    let plain = |w: &&str| {
        w.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    };
    let backtrace = |rest: &[&str]| {
        rest.iter()
            .all(|w| matches!(*w, "full" | "-full") || w.parse::<i64>().is_ok())
    };
    match words.as_slice() {
        ["bt" | "backtrace" | "where", rest @ ..] => backtrace(rest),
        ["thread", "apply", "all", "bt" | "backtrace", rest @ ..] => backtrace(rest),
        ["info" | "i", rest @ ..] => !rest.is_empty() && rest.iter().all(plain),
        ["thread" | "frame" | "f" | "up" | "down", rest @ ..] => {
            rest.iter().all(|w| w.parse::<u64>().is_ok())
        }
        ["set", "pagination" | "confirm", "on" | "off"]
        | ["set", "print", "pretty", "on" | "off"]
        | ["quit" | "q" | "detach"] => true,
        ["set", "height" | "width", n] => n.parse::<u64>().is_ok(),
        _ => false,
    }
}

/// `gdb`: commands given with `-ex`/`-iex`/`--eval-command` are gdb's language, which runs
/// shell commands (`shell`, `!`, `pipe`), Python and functions of the program: not read,
/// unless they only show its state. Command files (`-x`) are judged as script files are.
pub(super) fn gdb(args: &[Word], acc: &mut Acc) {
    acc.raise(Config, "`gdb` runs and changes programs");
    let mut batch = false;
    let mut i = 0;
    while i < args.len() {
        let w = &args[i];
        i += 1;
        if matches!(w.lit.as_str(), "-batch" | "--batch") {
            batch = true;
        }
        // After `--args`, the first operand is the program and the rest are its own.
        if w.lit == "--args" || w.lit == "-args" {
            break;
        }
        let Some((given, attached)) = gdb_option(&w.lit) else {
            continue;
        };
        let value = match attached {
            Some(v) => Word {
                lit: v.to_string(),
                dynamic: w.dynamic,
                ..Word::default()
            },
            None => match args.get(i) {
                Some(v) => {
                    i += 1;
                    v.clone()
                }
                None => continue,
            },
        };
        match given {
            Given::Commands if value.dynamic || !shows_only(&value.lit) => acc.unread(
                "`gdb` runs commands given in its arguments (shell, Python, calls into the program), in a language not read",
            ),
            Given::Commands => {}
            Given::File => command_file("gdb", &value, acc),
        }
    }
    if !batch {
        // Without `-batch`, gdb reads its commands from its input when that is no terminal.
        reads_commands_from_input("gdb", acc);
    }
}

/// A file of commands in a program's own language: judged as a script file is (the
/// classifier does not open files), unless it is the input or named at run time.
fn command_file(name: &str, file: &Word, acc: &mut Acc) {
    if file.dynamic || file.lit == "-" || shell::descriptor(&file.lit).is_some() {
        acc.unread(format!(
            "`{name}` runs commands from a file made at run time (its input, an expansion)"
        ));
    } else {
        acc.runs_file(&file.lit);
        acc.raise(Config, format!("`{name}` runs the commands in a file"));
    }
}

/// A program that takes its commands from its input when it is not a terminal.
pub(super) fn reads_commands_from_input(name: &str, acc: &mut Acc) {
    acc.code_input = true;
    if acc.piped_in {
        acc.unread(format!(
            "`{name}` runs commands another command prints into its input"
        ));
    }
}

/// vi and its kin, by the names Debian and others install them under.
pub(super) fn is_vim(name: &str) -> bool {
    matches!(
        name,
        "vi" | "vim"
            | "nvim"
            | "view"
            | "ex"
            | "vimdiff"
            | "nvimdiff"
            | "rvim"
            | "rview"
            | "gvim"
            | "gview"
            | "gvimdiff"
            | "evim"
            | "eview"
            | "vimx"
            | "nvi"
    ) || name.starts_with("vim.")
}

/// `vim -c CMD`, `+CMD` and `--cmd CMD` run ex commands (`:!…` runs a shell command, `:lua`
/// and `:py` run code): not read, but for `+` and `+N` (go to a line). Files of commands
/// (`-S`, `-s`, `-u`) are judged as script files; keys sent to another vim, not read.
pub(super) fn vim(name: &str, args: &[Word], acc: &mut Acc) {
    acc.raise(
        Config,
        format!("`{name}` edits files and runs editor commands"),
    );
    let mut i = 0;
    let mut ended = false;
    while i < args.len() {
        let w = &args[i];
        i += 1;
        let a = w.lit.as_str();
        if ended {
            continue;
        }
        if a == "--" {
            ended = true;
        } else if let Some(cmd) = a.strip_prefix('+') {
            if w.dynamic || !cmd.bytes().all(|b| b.is_ascii_digit()) {
                acc.unread(format!(
                    "`{name} +…` runs an editor command, in a language not read"
                ));
            }
        } else if matches!(a, "-c" | "--cmd" | "--remote-send" | "--remote-expr")
            || (a.starts_with("-c") && !a.starts_with("--"))
        {
            acc.unread(format!(
                "`{name} {a}` runs editor commands, in a language not read"
            ));
            if !a.starts_with("-c") || a == "-c" {
                i += 1;
            }
        } else if matches!(a, "-S" | "-s" | "-u" | "-U")
            && let Some(file) = args.get(i)
        {
            i += 1;
            if !matches!(file.lit.as_str(), "NONE" | "NORC" | "DEFAULTS") {
                command_file(name, file, acc);
            }
        }
    }
    // With no file read from its input, vi takes its keys (and commands) from it.
    if !operands(args).contains(&"-") {
        reads_commands_from_input(name, acc);
    }
}

/// `less +CMD` runs a less command first: `!…` and `|…` run shell commands, `v` an editor,
/// `s` saves a file. Going to a line, following, and searching (a pattern on one line)
/// only show; any other command is not read.
pub(super) fn less(args: &[Word], acc: &mut Acc) {
    acc.raise(Config, "`less` is not known to be harmless");
    for w in args.iter().take_while(|w| w.lit != "--") {
        if w.lit.starts_with('+') && (w.dynamic || !less_shows(&w.lit)) {
            acc.unread("`less +…` runs a less command (`!`, `|` and `v` run others), not read");
        }
    }
}

/// Whether `less` option word `+CMD` (or `++CMD`, for every file) only moves or searches.
pub(super) fn less_shows(word: &str) -> bool {
    let cmd = word.strip_prefix('+').unwrap_or(word);
    let cmd = cmd.strip_prefix('+').unwrap_or(cmd);
    let moves = cmd.trim_start_matches(|c: char| c.is_ascii_digit());
    matches!(moves, "" | "g" | "G" | "F" | "%" | "p" | "P")
        || (moves.starts_with(['/', '?', '&']) && !moves.contains(['\n', '\r']))
}
