//! What each simple command may do: the read-only allow-list with its argument rules and
//! the destructive deny-list, per program; wrappers (`sudo`, `env`, `xargs`, `sh -c`, …),
//! whose inner command is classified in turn, are in `wrappers.rs`.

mod args;
pub mod models;
mod names;
mod runners;
mod texts;
mod tools;
mod wrappers;

pub(crate) use wrappers::reads_script_from_input;

pub use names::SHELL_ONLY;
pub(crate) use names::runs_later;
pub use texts::sql_text;

use args::{after_options, dynamic, flag, lits, operands, values};
use names::{BIN_DIRS, DATABASES, DOWNLOADERS, SYSTEM_ROOTS};
use runners::{gdb, is_vim, less, vim};
use texts::{sed, sql_words};
use tools::{containers, firewall, git, ip, kubectl, packages, systemctl};
use wrappers::inner_command;

use super::shell::{Place, Word};
use super::{Acc, Class};

use Class::{ConfigMutation as Config, Destructive, ReadOnly, ReversibleLow as Low};

/// Builtins whose operands may name array elements, their subscripts evaluated.
const SUBSCRIPTED: &[&str] = &[
    "test",
    "[",
    "[[",
    "printf",
    "declare",
    "typeset",
    "local",
    "read",
    "unset",
    "let",
    "export",
    "readonly",
    "mapfile",
    "readarray",
    "wait",
    "((",
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
    // Reserved words (`time -p` too, and `coproc [NAME]` before a group), then headers of
    // loops and cases (their words were already parsed).
    loop {
        match rest {
            // `time -f …`: bash's keyword takes only `-p`, but dash (a `/bin/sh` execd
            // may run) has no such keyword and runs /usr/bin/time, whose options these
            // are: judged as that program, a wrapper.
            [w, o, ..]
                if !w.dynamic
                    && w.lit == "time"
                    && o.lit.starts_with('-')
                    && !matches!(o.lit.as_str(), "-p" | "--") =>
            {
                break;
            }
            [w, ..] if !w.dynamic && RESERVED.contains(&w.lit.as_str()) => {
                rest = &rest[1..];
                if w.lit == "time" {
                    // `time -p -- cmd`.
                    while rest
                        .first()
                        .is_some_and(|p| !p.dynamic && matches!(p.lit.as_str(), "-p" | "--"))
                    {
                        rest = &rest[1..];
                    }
                }
            }
            [c, ..] if !c.dynamic && c.lit == "coproc" => {
                acc.compound = true;
                acc.raise(Low, "`coproc` runs a command beside the shell");
                rest = &rest[1..];
                if let [n, g, ..] = rest
                    && !n.dynamic
                    && matches!(g.lit.as_str(), "{" | "(")
                {
                    rest = &rest[1..];
                }
            }
            _ => break,
        }
    }
    match rest.first().map(|w| w.lit.as_str()) {
        None => return None,
        Some("for" | "select" | "case" | "function") if !rest[0].dynamic => {
            if matches!(rest[0].lit.as_str(), "for" | "select")
                && let Some(var) = rest.get(1)
            {
                // `for HOME in -delete`: the loop assigns it.
                steering(&var.lit, acc);
                // `for x in $(cat f)`: values from outside the text.
                if rest[2..]
                    .iter()
                    .any(|w| w.lit.contains("$(") || w.lit.contains('`'))
                {
                    acc.foreign();
                }
            }
            if rest.iter().any(|w| w.lit.starts_with("((")) {
                acc.arithmetic();
            }
            acc.compound = true;
            return None;
        }
        _ => {}
    }
    // Text the shell evaluates later, where the classifier does not look: an array
    // subscript in an operand (`test -v 'a[$(…)]'`).
    let evaluates = |w: &Word| {
        w.lit
            .find('[')
            .is_some_and(|at| w.lit[at..].contains("$(") || w.lit[at..].contains('`'))
    };
    let subscripted = rest
        .first()
        .is_some_and(|first| SUBSCRIPTED.contains(&first.lit.as_str()))
        && rest[1..].iter().any(evaluates);
    if subscripted {
        acc.unread("the shell evaluates an array subscript in it, running what it holds");
    }
    if let Some(first) = rest.first()
        && matches!(
            first.lit.as_str(),
            "printf"
                | "read"
                | "declare"
                | "typeset"
                | "local"
                | "export"
                | "readonly"
                | "mapfile"
                | "readarray"
                | "for"
                | "select"
                | "getopts"
                | "unset"
                | "wait"
                | "let"
        )
    {
        // The names it assigns or unsets (`printf -v HOME`, `read PATH`, `for HOME in`,
        // `unset PATH`: a shell without PATH runs `./ls`; `wait -p PATH`, `let PATH=0`).
        for w in &rest[1..] {
            steering(
                w.lit
                    .split(['=', '+', '-', '*', '/', '['])
                    .next()
                    .unwrap_or(""),
                acc,
            );
        }
        if matches!(
            first.lit.as_str(),
            "printf" | "read" | "mapfile" | "readarray" | "for" | "select" | "getopts" | "wait"
        ) {
            for w in &rest[1..] {
                loads_by_name(w.lit.split(['=', '[']).next().unwrap_or(""), acc);
            }
        }
        if matches!(first.lit.as_str(), "read" | "mapfile" | "readarray") {
            // What it reads is outside the text: arithmetic on it may run a subscript.
            acc.foreign();
        }
    }
    if let Some(first) = rest.first()
        && SUBSCRIPTED.contains(&first.lit.as_str())
        && rest[1..].iter().any(|w| {
            w.dynamic
                && w.lit
                    .find('{')
                    .is_some_and(|at| w.lit[at..].contains(',') || w.lit[at..].contains(".."))
        })
    {
        // `printf {-v,PS4} …`: the brace expansion may give the option and the name of a
        // variable the shell runs.
        acc.unread(format!(
            "`{}` is given a brace expansion: which variable it assigns is known only at run time",
            first.lit
        ));
    }
    if let Some(first) = rest.first()
        && SUBSCRIPTED.contains(&first.lit.as_str())
        && names_built(&first.lit, &rest[1..])
    {
        // A name built at run time (`test -v "$x"`, `printf -v "$x"`, `declare "$x=1"`)
        // may be an array element, its subscript evaluated.
        acc.arithmetic();
        if matches!(
            first.lit.as_str(),
            "printf"
                | "declare"
                | "typeset"
                | "local"
                | "export"
                | "readonly"
                | "read"
                | "mapfile"
                | "readarray"
        ) && rest[1..]
            .iter()
            .any(|w| w.dynamic && built_name(w).contains(['$', '`', '{']))
        {
            // …and a variable it assigns may be one the shell runs (`PS4`,
            // `PROMPT_COMMAND`): which one is known only at run time.
            acc.unread(format!(
                "`{}` assigns a variable named at run time, perhaps one the shell runs",
                first.lit
            ));
        }
    }
    if rest.iter().any(|w| subscript_command(&w.lit)) {
        // The text of a subscript with a command (`echo 'a[$(…)]' > f`): arithmetic on
        // a value read back runs it.
        acc.pieced();
    }
    // Leading assignments: `NAME=value cmd` (the value may hold commands, already judged).
    let mut assigned = false;
    let assignments = rest;
    while let Some(w) = rest.first() {
        if !is_assignment(&w.lit) {
            break;
        }
        // Variables whose value the shell runs or expands again later.
        let name = w.lit.split(['=', '+', '[']).next().unwrap_or("");
        if w.lit.split('=').next().unwrap_or("").contains('[') {
            // `a[x]=1`: the subscript is evaluated as arithmetic.
            acc.arithmetic();
        }
        if matches!(
            name,
            "PS4" | "PS1" | "PS2" | "PS0" | "PROMPT_COMMAND" | "BASH_ENV" | "ENV"
        ) && w.lit.contains(['$', '`'])
        {
            acc.unread(format!("`{name}` holds commands the shell runs later"));
        }
        assigned = true;
        rest = &rest[1..];
    }
    if assigned {
        acc.compound = true;
        if rest.is_empty() {
            // The shell keeps it: what programs run later may read it (`set -a`,
            // `export`).
            for w in assignments {
                assignment(w, acc);
                steering(w.lit.split(['=', '+', '[']).next().unwrap_or(""), acc);
            }
            acc.raise(Low, "sets a shell variable");
            return None;
        }
        for w in &assignments[..assignments.len() - rest.len()] {
            assignment(w, acc);
        }
        acc.raise(
            Config,
            "sets variables for the command it runs (PATH, LD_PRELOAD and the like change what runs)",
        );
    }
    let (first, args) = rest.split_first()?;
    if first.dynamic {
        acc.unread("the program to run comes from an expansion (built at run time)");
        return None;
    }
    if first.lit.starts_with("((") && first.lit.ends_with("))") {
        // An arithmetic command to bash (what it runs, `$(…)` in it, was judged with its
        // word; as subshells, as dash reads it, by `shell::walk`).
        acc.arithmetic();
        acc.compound = true;
        acc.raise(Low, "arithmetic");
        return None;
    }
    if first.lit.starts_with('{') && (first.lit.contains(',') || first.lit.contains("..")) {
        acc.unread("the program to run comes from a brace expansion (`{rm,-rf,…}`)");
        return None;
    }
    // Builtins that set a variable the shell runs later, or make a name run another
    // program.
    if matches!(
        first.lit.as_str(),
        "read"
            | "mapfile"
            | "readarray"
            | "printf"
            | "getopts"
            | "declare"
            | "typeset"
            | "local"
            | "export"
            | "readonly"
    ) && let Some(v) = args
        .iter()
        .map(|w| w.lit.split(['=', '[']).next().unwrap_or(""))
        .find(|v| names::runs_later(v))
    {
        acc.unread(format!(
            "`{}` sets `{v}`, which the shell runs later",
            first.lit
        ));
    }
    if first.lit == "hash" && args.iter().any(|w| w.lit.starts_with("-p")) {
        acc.unread("`hash -p` makes a name run another program");
    }
    acc.programs.push(first.lit.clone());
    acc.runs_file(&first.lit);
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
    let interpreter = names::interpreter(&name).is_some();
    if place.piped && interpreter && !wrappers::quiet_module(args) {
        acc.interprets = true;
    }
    // An interpreter reading its program from a pipe runs what another command printed.
    let piped_in = acc.piped_in;
    acc.piped_in |= place.from.is_some();
    command(&name, args, acc);
    acc.piped_in = piped_in;
    sql_words(args, acc);
    Some(name)
}

/// Whether `word` names a shell, an interpreter or `source`: what it reads is its code.
pub(crate) fn runs_code(word: &str) -> bool {
    code_reader(word).is_some()
}

/// What reads code among `word`'s kind: `Some(true)` a shell (or `source`), `Some(false)`
/// another interpreter, `None` neither.
pub(crate) fn code_reader(word: &str) -> Option<bool> {
    let name = word.rsplit('/').next().unwrap_or(word);
    if matches!(name, "source" | ".") {
        return Some(true);
    }
    names::interpreter(name).map(names::is_shell)
}

/// Judges a variable given to the command after it (`VAR=value cmd`, `env VAR=value cmd`)
/// by what the variable makes programs run: a command in its value (`PAGER`,
/// `GIT_SSH_COMMAND`) is judged as one; code it makes them load (`LD_PRELOAD`, `BASH_ENV`,
/// `PERL5OPT`) is not read; a prompt with expansions is run by the shell.
pub(super) fn assignment(w: &Word, acc: &mut Acc) {
    let Some((name, value)) = w.lit.split_once('=') else {
        return;
    };
    let name = name.trim_end_matches('+');
    let name = name.split('[').next().unwrap_or(name);
    if names::runs_later(name) && !matches!(name, "PS1" | "PS2" | "PS0" | "PS4" | "PROMPT_COMMAND")
    {
        acc.unread(format!(
            "`{name}` makes the shell run another program or file"
        ));
    }
    if w.lit[..w.lit.find('=').unwrap_or(0)].ends_with('+')
        || (value.contains('[') && !value.starts_with('('))
    {
        // Built in pieces, or a `[` in it: with the rest, perhaps a subscript.
        acc.pieced();
    }
    if subscript_command(value) {
        acc.unread(format!(
            "`{name}` holds an array subscript with a command in it, which arithmetic runs"
        ));
    }
    // A locale named by a path (`LANGUAGE=../../tmp/x`): the message catalogue programs
    // load, their format strings, are then the caller's; a time zone named by a path is
    // a file the C library opens (`TZ=/dev/watchdog`). A value made at run time may be
    // one.
    if w.dynamic {
        loads_by_name(name, acc);
    } else if crate::request::loads_path(name, value) {
        acc.raise(
            Config,
            format!("sets `{name}` to a path: a file programs load"),
        );
    }
    match names::variable(name) {
        Some(names::Variable::Command) if w.dynamic => acc.unread(format!(
            "`{name}` holds a command programs run, built at run time"
        )),
        Some(names::Variable::Command) => {
            // LESSOPEN's `|` and `||` say its output is piped; `%s` is the file.
            let value = value.trim_start_matches(['|', '-']);
            let mut inner = Acc {
                depth: acc.depth,
                ..Acc::default()
            };
            super::shell::script(value, &mut inner);
            acc.absorb(inner, &format!("in `{name}`: "));
        }
        Some(names::Variable::Code(what)) => acc.unread(format!(
            "`{name}` makes programs load {what}, code not read"
        )),
        Some(names::Variable::Expanded) if w.lit.contains(['$', '`']) => {
            acc.unread(format!("`{name}` holds commands the shell runs later"))
        }
        // less's options: a `+CMD` among them runs CMD as `less +CMD` would.
        Some(names::Variable::LessOptions)
            if w.dynamic
                || value
                    .split_whitespace()
                    .filter_map(|o| o.find('+').map(|at| &o[at..]))
                    .any(|o| !runners::less_shows(o)) =>
        {
            acc.unread(format!(
                "`{name}` gives less a command to run first, not read"
            ))
        }
        _ => {}
    }
}

/// Whether the builtin `name` (one of `SUBSCRIPTED`) is given a variable's name built at
/// run time: after `-v` for `test`, `[`, `[[` and `printf`, any operand for the others.
fn names_built(name: &str, args: &[Word]) -> bool {
    // A name built at run time, or an array element's (`a[x]`: its subscript evaluated).
    let evaluated = |w: &Word| {
        let name = built_name(w);
        name.contains('[') || (w.dynamic && name.contains(['$', '`', '{']))
    };
    match name {
        "test" | "[" | "[[" | "printf" => args
            .windows(2)
            .any(|p| p[0].lit == "-v" && !p[0].dynamic && evaluated(&p[1])),
        _ => args
            .iter()
            .skip_while(|w| w.lit.starts_with('-'))
            .any(evaluated),
    }
}

/// A shell variable that chooses what later commands run or what their words become
/// (`PATH=/tmp/d; ls`, `HOME=-delete; find /srv ~`), or the message catalogue bash
/// translates `$"…"` from (whose translations it expands, running what they hold):
/// setting it, or unsetting it, is no low-risk change.
pub(crate) fn steering(name: &str, acc: &mut Acc) {
    if matches!(
        name,
        "PATH"
            | "HOME"
            | "PWD"
            | "OLDPWD"
            | "EXECIGNORE"
            | "CDPATH"
            | "GLOBIGNORE"
            | "IFS"
            | "TEXTDOMAIN"
            | "TEXTDOMAINDIR"
    ) {
        acc.raise(
            Config,
            format!(
                "sets `{name}`, which chooses what later commands run or what `~` and words become"
            ),
        );
    }
}

/// A locale or time-zone variable given a value made at run time (`read TZ`,
/// `printf -v LC_ALL`, `${LANGUAGE:=…}`, `export TZ=$x`): it may name a file programs load.
pub(crate) fn loads_by_name(name: &str, acc: &mut Acc) {
    if name.starts_with("LC_") || matches!(name, "LANG" | "LANGUAGE" | "TZ") {
        acc.raise(
            Config,
            format!("sets `{name}` at run time: a path there names a file programs load"),
        );
    }
}

/// The names arithmetic assigns (`PATH=0`, `PATH += 1`, `++PATH`, `PATH[0]=1`), each
/// judged as any assignment of it (`steering`).
pub(crate) fn arithmetic_assigns(text: &str, acc: &mut Acc) {
    let b = text.as_bytes();
    let name_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if !(b[i].is_ascii_alphabetic() || b[i] == b'_')
            || (i > 0 && (name_char(b[i - 1]) || b[i - 1] == b'$'))
        {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && name_char(b[i]) {
            i += 1;
        }
        let mut j = i;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if b.get(j) == Some(&b'[') {
            j += text[j..].find(']').map_or(text.len() - j, |e| e + 1);
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
        }
        let after = &text[j..];
        let before = text[..start].trim_end();
        let assigns = (after.starts_with('=') && !after.starts_with("=="))
            || [
                "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "^=", "|=", "++", "--",
            ]
            .iter()
            .any(|op| after.starts_with(op))
            || before.ends_with("++")
            || before.ends_with("--");
        if assigns {
            steering(&text[start..i], acc);
        }
    }
}

/// The variable name an operand of an assigning builtin names: all of it, or what comes
/// before its `=` (`declare NAME=value`).
fn built_name(w: &Word) -> &str {
    w.lit.split('=').next().unwrap_or("")
}

/// Whether `text` holds an array subscript with a command in it (`a[$(…)]`, ``a[`…`]``):
/// arithmetic on a variable holding it (`$((x))`, `[[ $x -eq 0 ]]`) runs the command.
pub(crate) fn subscript_command(text: &str) -> bool {
    let b = text.as_bytes();
    b.iter().enumerate().any(|(i, &c)| {
        c == b'[' && i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') && {
            let inside = &text[i + 1..];
            let end = inside.find(']').unwrap_or(inside.len());
            inside[..end].contains("$(") || inside[..end].contains('`')
        }
    })
}

/// `NAME=…`, `NAME+=…` or `NAME[i]=…`.
pub(crate) fn is_assignment(w: &str) -> bool {
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

/// Judges a program by name and arguments. A program only reads when its option model
/// (`models.txt`) accepts its arguments — and, for a program with a rule of its own, the
/// rule finds its operands harmless too; a `read_only` finding without an accepting model
/// is raised to `config_mutation`, naming the option (or the missing model).
fn command(name: &str, args: &[Word], acc: &mut Acc) {
    if matches!(name, "tr" | "rev")
        || (name == "printf"
            && args
                .iter()
                .any(|w| w.lit.contains("\\x") || w.lit.contains("\\0") || w.lit.contains("\\u")))
    {
        acc.decodes();
    }
    if name == "crontab" && (acc.piped_in || args.iter().any(|w| w.lit == "-")) {
        acc.unread("`crontab` installs what another command prints, to run later");
    }
    if name == "crontab" || (name == "at" && flag(args, &['f'], &[])) {
        for o in operands(args) {
            acc.runs_file(o);
        }
    }
    if matches!(
        name,
        "base64" | "base32" | "basenc" | "uudecode" | "openssl" | "xxd"
    ) && args
        .iter()
        .any(|w| matches!(w.lit.as_str(), "-d" | "--decode" | "-D" | "-r" | "-revert"))
        || name == "uudecode"
    {
        acc.decodes();
    }
    if matches!(name, "let" | "[[")
        && (name == "let"
            || args.iter().any(|w| {
                matches!(
                    w.lit.as_str(),
                    "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge"
                )
            }))
        || (matches!(name, "declare" | "typeset" | "local") && flag(args, &['i'], &[]))
    {
        acc.arithmetic();
    }
    if name == "unzip" && !flag(args, &['l', 'v', 't', 'Z'], &[]) {
        // What it extracts is named inside the archive.
        acc.wrote_unnamed();
    }
    if matches!(name, "cd" | "pushd")
        && args
            .iter()
            .find(|w| !w.lit.starts_with('-'))
            .is_some_and(|d| {
                let to = reached(&d.lit);
                let inside = |p: &str| ["/dev", "/proc", "/sys"].iter().any(|d| p.starts_with(d));
                !d.dynamic && (inside(&to) || inside(&d.lit))
            })
    {
        // A relative path run from there may be a descriptor (`cd /dev/fd; sh 3`).
        acc.descriptor_dirs = true;
    }
    // A reader given a device or a consumed stream acts on the host (`cat /dev/watchdog`);
    // programs that only look at a file's name or metadata open none.
    let names_only = matches!(
        name,
        "ls" | "dir"
            | "vdir"
            | "stat"
            | "readlink"
            | "realpath"
            | "test"
            | "["
            | "[["
            | "find"
            | "namei"
            | "lsof"
            | "fuser"
            | "udevadm"
            | "basename"
            | "dirname"
            | "echo"
            | "printf"
            | "lsblk"
    );
    if let Some((w, what)) = args
        .iter()
        .filter(|w| !w.dynamic && !names_only)
        .find_map(|w| {
            // The word, an option's value after `=`, or one attached (`-f/dev/…`).
            let after_eq = w.lit.split_once('=').map(|(_, v)| v);
            let attached = (w.lit.starts_with('-') && !w.lit.starts_with("--"))
                .then(|| w.lit.find(['/', '.', '~']).map(|at| &w.lit[at..]))
                .flatten();
            // Each of a list's parts too (`file -m a:/dev/…`).
            let acts = |c: &str| {
                if w.glob == crate::shell::Glob::None {
                    acting_read(c)
                } else {
                    acting_read(c).or_else(|| pattern_acts(c))
                }
            };
            [Some(w.lit.as_str()), after_eq, attached]
                .into_iter()
                .flatten()
                .flat_map(|c| std::iter::once(c).chain(c.split(':')))
                .find_map(acts)
                .map(|what| (w, what))
        })
    {
        acc.raise(Config, format!("`{name}` opens `{}`: {what}", w.lit));
    }
    // A reader that walks a tree reads every file in it: from `/`, /proc, /sys or /dev,
    // the streams and devices above among them (`grep -r x /proc` takes /proc/kmsg).
    let walks = matches!(name, "rg" | "ag" | "ack")
        || (matches!(name, "grep" | "egrep" | "fgrep" | "zgrep")
            && (flag(args, &['r', 'R'], &["recursive", "dereference-recursive"])
                || values(args, &['d'], &["directories"])
                    .iter()
                    .any(|v| v.lit.starts_with('r'))));
    if walks
        && !names_only
        && let Some(top) = operands(args).into_iter().find(|o| {
            // `.` is the working directory, whatever it is; `..` may climb to `/`. Both
            // readings of the path: where it may lead, and as written.
            let tops = |p: &str| {
                p == "/"
                    || p == "/proc"
                    || ["/dev", "/sys"]
                        .iter()
                        .any(|d| p == *d || p.starts_with(&format!("{d}/")))
            };
            let p = reached(o);
            let from_root = o.starts_with(['/', '~']) || o.split('/').any(|c| c == "..");
            ((p != "/" || from_root) && tops(&p)) || (o.starts_with('/') && tops(&normal(o)))
        })
    {
        acc.raise(
            Config,
            format!("`{name}` reads every file under `{top}`, devices or streams its reader consumes among them"),
        );
    }
    // After `cd /dev` (or /proc, /sys), a relative name may be a device (`cat watchdog`).
    if acc.descriptor_dirs
        && !names_only
        && args
            .iter()
            .any(|w| !w.lit.is_empty() && !w.lit.starts_with(['/', '-']))
    {
        acc.raise(
            Config,
            format!("`{name}` reads a relative path after a change into /dev, /proc or /sys"),
        );
    }
    let start = acc.reasons.len();
    let (raised, reads) = (acc.raised, acc.reads_raised);
    let checked = models::get(name).map(|m| (m, models::check(name, m, args)));
    let why_not = match &checked {
        Some((m, Ok(found))) => {
            acc.programs.extend(m.runs.iter().cloned());
            if !m.rule {
                acc.raise(ReadOnly, format!("`{}` only reads", found.path));
                return;
            }
            None
        }
        Some((m, Err(why))) if !m.rule => {
            acc.raise(Config, why.clone());
            return;
        }
        Some((_, Err(why))) => Some(why.clone()),
        None => Some(format!(
            "`{name}` has no option model: not known to only read"
        )),
    };
    by_rule(name, args, acc);
    if let Some(why) = why_not {
        let mut found_read = false;
        for r in &mut acc.reasons[start..] {
            if r.class == ReadOnly {
                r.class = Config;
                r.why = why.clone();
                found_read = true;
            }
        }
        // (A read this command's rule found may repeat one found before, and so not be
        // among its own reasons: counted, it still needs its model's refusal said.)
        if found_read || acc.reads_raised > reads || acc.raised == raised {
            acc.raise(Config, why);
        }
    }
}

/// What a program's own rule finds (its subcommand, its operands, its options' meaning).
fn by_rule(name: &str, args: &[Word], acc: &mut Acc) {
    let a = lits(args);
    let sub = operands(args).first().copied().unwrap_or("");
    if DOWNLOADERS.contains(&name) {
        // What it saves: the file its options name, or the URL's own name (wget; curl
        // with -O or --remote-name).
        let remote_name = name != "curl" || flag(args, &['O'], &["remote-name", "remote-name-all"]);
        for o in operands(args).into_iter().filter(|_| remote_name) {
            acc.wrote(o);
        }
        for v in values(args, &['o', 'O'], &["output", "output-document"]) {
            acc.wrote(&v.lit);
        }
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
        if args.iter().any(|w| w.dynamic) {
            acc.unread(format!(
                "`{name}` is given statements built at run time (an expansion)"
            ));
        }
        if acc.piped_in {
            // Its own commands too: `\!`, `.shell`, `system`.
            acc.unread(format!(
                "`{name}` runs what another command prints into it, shell commands included"
            ));
        }
        return;
    }
    if name.starts_with("mkfs") {
        acc.raise(
            Destructive,
            format!("`{name}` makes a new filesystem (erases a device)"),
        );
        return;
    }
    if wrappers::wrapper(name, args, acc) {
        return;
    }
    match name {
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
            } else if args
                .iter()
                .any(|w| w.glob != crate::shell::Glob::None || w.dynamic)
            {
                acc.raise(
                    Destructive,
                    "`rm` deletes every file a pattern or an expansion names",
                );
            } else {
                acc.raise(Config, "`rm` deletes files");
            }
            if operands(args).iter().any(|o| SYSTEM_ROOTS.contains(o)) {
                acc.raise(Destructive, "`rm` of a system directory");
            }
        }
        "truncate" | "shred" | "unlink" if operands(args).iter().any(|o| access_file(o)) => {
            acc.raise(
                Destructive,
                format!("`{name}` empties or deletes a file the way logins are let in"),
            )
        }
        "unlink" | "truncate" | "shred"
            if args
                .iter()
                .any(|w| w.dynamic || w.glob != crate::shell::Glob::None) =>
        {
            acc.raise(
                Destructive,
                format!("`{name}` deletes or empties every file a pattern or an expansion names"),
            )
        }
        "rmdir" => acc.raise(Low, "`rmdir` removes empty directories"),
        "mkdir" | "touch" | "mktemp" => {
            acc.raise(Low, format!("`{name}` creates files or directories"))
        }
        "ln" => {
            copies(
                &operands(args),
                flag(args, &['t'], &["target-directory"]),
                acc,
            );
            // A link and its target are one file: writing either writes both.
            for o in operands(args) {
                acc.wrote(o);
                if o.starts_with("/dev") || o.starts_with("/proc") {
                    acc.descriptor_dirs = true;
                }
            }
            if flag(args, &['f'], &["force"]) {
                acc.raise(Config, "`ln -f` replaces files");
            } else {
                acc.raise(Low, "`ln` creates links");
            }
        }
        "cp" | "mv" | "install" | "rsync" | "scp" | "rename" => {
            acc.raise(Config, format!("`{name}` writes or replaces files"));
            let ops = operands(args);
            let runs = if name == "rsync" {
                rsync_commands(args, acc)
            } else {
                Vec::new()
            };
            // (The commands rsync runs are its options' values, not its files.)
            let files: Vec<&str> = ops
                .iter()
                .copied()
                .filter(|o| !runs.iter().any(|r| r.lit == *o))
                .collect();
            copies(&files, flag(args, &['t'], &["target-directory"]), acc);
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
                    .any(|x| x.starts_with("--del") || *x == "--remove-source-files")
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
            // (GNU tee writes a file named `-`: no standard output by that name.)
            let ops: Vec<&str> = args
                .iter()
                .map(|w| w.lit.as_str())
                .filter(|a| !a.starts_with('-') || *a == "-")
                .collect();
            let harmless_sink = |o: &str| o != "-" && harmless_sink(o);
            for o in ops.iter().filter(|o| !harmless_sink(o)) {
                acc.wrote(o);
            }
            if ops.iter().any(|o| block_device(o) || kernel_trigger(o)) {
                acc.raise(
                    Destructive,
                    "`tee` writes to a block device or a kernel trigger",
                );
            } else if ops.iter().all(|o| harmless_sink(o)) {
                acc.raise(ReadOnly, "`tee` to standard output only");
            } else {
                acc.raise(Config, "`tee` writes files");
            }
        }
        "truncate" | "fallocate" => {
            for o in operands(args) {
                acc.wrote(o);
            }
            acc.raise(Config, format!("`{name}` resizes files"))
        }
        "dd" => {
            for of in a.iter().filter_map(|x| x.strip_prefix("of=")) {
                acc.wrote(of);
            }
            acc.raise(Destructive, "`dd` writes raw blocks")
        }
        "shred" | "wipefs" | "blkdiscard" | "mkswap" | "mke2fs" | "fdisk" | "sfdisk" | "cfdisk"
        | "gdisk" | "sgdisk" | "cgdisk" | "parted" | "partx" | "sgdisk2" | "zerofree"
        | "mkdosfs" | "mkntfs" | "mkexfatfs" | "mkudffs" | "pvcreate" => acc.raise(
            Destructive,
            format!("`{name}` erases or repartitions a disk"),
        ),
        "cryptsetup" | "nvme" | "mdadm" | "hdparm" | "badblocks" | "sg_format" => {
            // What erases among their subcommands and options.
            let erases = |w: &&Word| {
                matches!(
                    w.lit.as_str(),
                    "erase"
                        | "luksErase"
                        | "luksFormat"
                        | "luksKillSlot"
                        | "luksRemoveKey"
                        | "luksHeaderRestore"
                        | "reencrypt"
                        | "format"
                        | "sanitize"
                        | "write-zeroes"
                        | "--zero-superblock"
                        | "--create"
                        | "-C"
                        | "--build"
                        | "-B"
                        | "--security-erase"
                        | "--security-erase-enhanced"
                        | "--trim-sector-ranges"
                        | "--write-sector"
                        | "--make-bad-sector"
                        | "--dco-restore"
                        | "-w"
                        | "-n"
                        | "--format"
                )
            };
            if name == "sg_format" || args.iter().any(|w| erases(&w)) {
                acc.raise(Destructive, format!("`{name}` erases a disk"));
            } else {
                acc.raise(Config, format!("`{name}` changes a disk's settings"));
            }
        }
        "lvm" => match args.split_first() {
            Some((sub, rest)) if !sub.dynamic => command(&sub.lit, rest, acc),
            _ => acc.raise(Config, "`lvm` changes volumes"),
        },
        "btrfs"
            if a.iter()
                .any(|x| matches!(*x, "delete" | "del" | "remove" | "rm")) =>
        {
            acc.raise(Destructive, "`btrfs` deletes a subvolume or device")
        }
        "btrfs"
            if a.contains(&"check")
                && flag(args, &[], &["repair", "init-csum-tree", "init-extent-tree"]) =>
        {
            acc.raise(
                Destructive,
                "`btrfs check --repair` rewrites a file system's trees",
            )
        }
        "xfs_repair" if flag(args, &['L'], &[]) => acc.raise(
            Destructive,
            "`xfs_repair -L` throws away the file system's log",
        ),
        "etcdctl"
            if a.iter()
                .any(|x| matches!(*x, "del" | "delete" | "defrag" | "compact" | "compaction")) =>
        {
            acc.raise(Destructive, "`etcdctl` deletes keys or history")
        }
        "consul" if a.contains(&"kv") && a.contains(&"delete") => {
            acc.raise(Destructive, "`consul kv delete` deletes keys")
        }
        "ddrescue" | "dcfldd" => acc.raise(Destructive, format!("`{name}` writes raw blocks")),
        "kexec" if flag(args, &['e'], &["exec"]) => {
            acc.raise(Destructive, "`kexec -e` boots another kernel at once")
        }
        "rtcwake"
            if values(args, &['m'], &["mode"])
                .iter()
                .any(|m| !matches!(m.lit.as_str(), "no" | "show" | "disable")) =>
        {
            acc.raise(Destructive, "`rtcwake -m` suspends or powers off the host")
        }
        "fsfreeze" if flag(args, &['f'], &["freeze"]) => {
            acc.raise(Destructive, "`fsfreeze -f` stops every write to a file system")
        }
        "efibootmgr" if flag(args, &['B', 'o'], &["delete-bootnum", "bootorder"]) => {
            acc.raise(Destructive, "`efibootmgr` changes what the host boots: it may not boot")
        }
        "machinectl" if matches!(sub, "remove" | "clean" | "poweroff" | "terminate" | "kill") => {
            acc.raise(Destructive, format!("`machinectl {sub}` deletes or stops machines"))
        }
        "terraform" | "tofu" if a.contains(&"destroy") => {
            acc.raise(Destructive, format!("`{name} destroy` deletes what it manages"))
        }
        "helm" if matches!(sub, "uninstall" | "delete" | "del" | "un") => {
            acc.raise(Destructive, "`helm uninstall` deletes a release")
        }
        "aws" if a.iter().any(|x| matches!(*x, "rm" | "rb" | "delete-bucket" | "terminate-instances")) => {
            acc.raise(Destructive, "`aws` deletes objects, buckets or instances")
        }
        "gsutil" | "rclone" | "s3cmd"
            if a.iter().any(|x| matches!(*x, "rm" | "rb" | "purge" | "delete" | "del" | "rmdir")) =>
        {
            acc.raise(Destructive, format!("`{name}` deletes stored objects"))
        }
        "snapper" | "borg" | "restic" | "zrepl"
            if a.iter().any(|x| matches!(*x, "delete" | "rm" | "remove" | "prune" | "forget")) =>
        {
            acc.raise(Destructive, format!("`{name}` deletes snapshots or backups"))
        }
        "debugfs" if flag(args, &['w'], &[]) => acc.raise(
            Destructive,
            "`debugfs -w` writes a file system's structures directly",
        ),
        "dmsetup"
            if a.iter()
                .any(|x| matches!(*x, "remove" | "remove_all" | "wipe_table" | "clear")) =>
        {
            acc.raise(Destructive, "`dmsetup` removes or wipes a mapped device")
        }
        "mysqladmin" if a.contains(&"drop") => {
            acc.raise(Destructive, "`mysqladmin drop` deletes a database")
        }
        "ed" | "red" | "dc" => {
            acc.raise(
                Config,
                format!("`{name}` runs the commands it reads (`!` runs a shell)"),
            );
            runners::reads_commands_from_input(name, acc);
        }
        "make" | "gmake" => {
            acc.raise(Config, format!("`{name}` runs a makefile's recipes"));
            let files = values(args, &['f'], &["file", "makefile"]);
            if files
                .iter()
                .any(|f| f.dynamic || f.lit == "-" || crate::shell::descriptor(&f.lit).is_some())
            {
                acc.unread(format!(
                    "`{name}` runs recipes from a makefile made at run time"
                ));
            }
            for f in files {
                acc.runs_file(&f.lit);
            }
        }
        "find" => find(args, acc),
        "sed" => sed(args, acc),
        "gdb" | "gdb-multiarch" => gdb(args, acc),
        n if is_vim(n) => vim(n, args, acc),
        "less" => less(args, acc),
        "sort" => {
            if flag(args, &[], &["compress-program"]) {
                acc.raise(
                    Config,
                    "`sort --compress-program` runs a program on its temporary files",
                );
            }
            for p in values(args, &[], &["compress-program"]) {
                compressor(&p, acc);
            }
            for o in values(args, &['o'], &["output"]) {
                acc.wrote(&o.lit);
            }
            reader_unless(
                name,
                flag(args, &['o'], &["output"]),
                "writes its output to a file",
                acc,
            )
        }
        "split" | "csplit" => {
            // Files named from a prefix: any file the command runs may be one.
            acc.wrote_unnamed();
            acc.raise(Config, format!("`{name}` writes files"));
        }
        "uniq" => {
            if let Some(out) = operands(args).get(1) {
                acc.wrote(out);
            }
            reader_unless(
                name,
                operands(args).len() > 1,
                "writes its output to a file",
                acc,
            )
        }
        "tree" => reader_unless(
            name,
            flag(args, &['o'], &[]),
            "writes its output to a file",
            acc,
        ),
        "xxd" => {
            // xxd reads no option after its first operand: the next word, whatever it
            // looks like (`-n`), is the file it writes.
            let out = match models::get("xxd").map(|m| models::check("xxd", m, args)) {
                Some(Ok(p)) => p.operands.get(1).cloned(),
                // Options the model does not take (`-r`): the second plain word, at least.
                _ => operands(args).get(1).map(|s| s.to_string()),
            };
            if let Some(out) = &out {
                acc.wrote(out);
            }
            reader_unless(
                name,
                flag(args, &['r'], &["revert"]) || out.is_some(),
                "writes a file",
                acc,
            )
        }
        "rg" => reader_unless(
            name,
            flag(args, &[], &["pre"]),
            "runs a preprocessor command",
            acc,
        ),
        "awk" | "gawk" | "mawk" | "nawk" => {
            for f in values(args, &['f'], &["file"]) {
                acc.runs_file(&f.lit);
            }
            if a.iter().any(|x| x.contains("print") && x.contains('>')) {
                // `print … > "f"`: a file named in its program.
                acc.wrote_unnamed();
            }
            let from_input = flag(args, &['f'], &["file"])
                && (acc.piped_in || a.iter().any(|x| crate::shell::is_stdin_path(x)));
            if args.iter().any(|w| w.dynamic)
                || from_input
                || a.iter().any(|x| {
                    x.contains("system(")
                        || x.contains("system (")
                        || (x.contains('|')
                            && ["print", "getline", "close"].iter().any(|k| x.contains(k)))
                })
            {
                // `system(sprintf(…))`, `cmd | getline`: a command the program builds.
                acc.unread(format!("`{name}` runs commands its program builds"));
            }
            acc.raise(Config, format!("`{name}` can run commands and write files"))
        }
        "tar" => {
            if flag(
                args,
                &['I', 'F'],
                &[
                    "checkpoint-action",
                    "use-compress-program",
                    "to-command",
                    "rmt-command",
                    "rsh-command",
                    "info-script",
                    "new-volume-script",
                ],
            ) {
                acc.raise(Config, "`tar` runs a program given in its options");
                // `--checkpoint-action=exec=…`, `--to-command=…`: shell commands, judged
                // as such.
                for x in &a {
                    if let Some(cmd) = x.split_once("exec=").map(|(_, c)| c) {
                        crate::shell::script(cmd, acc);
                    }
                    for opt in [
                        "--to-command=",
                        "--use-compress-program=",
                        "--info-script=",
                        "--new-volume-script=",
                        "--rsh-command=",
                        "--rmt-command=",
                    ] {
                        if let Some(cmd) = x.strip_prefix(opt) {
                            crate::shell::script(cmd, acc);
                        }
                    }
                }
                for w in values(
                    args,
                    &['I', 'F'],
                    &[
                        "to-command",
                        "use-compress-program",
                        "info-script",
                        "new-volume-script",
                    ],
                ) {
                    if w.dynamic {
                        acc.unread("`tar` runs a command built at run time");
                    } else {
                        crate::shell::script(&w.lit, acc);
                    }
                }
            }
            // `-f host:file`: tar runs rsh (or ssh) to reach it, unless told the name is
            // local.
            // (Old style, `tar tf host:x`: the cluster's `f` takes a word after it.)
            let remote =
                |w: &Word| w.dynamic || w.lit.split('/').next().is_some_and(|h| h.contains(':'));
            let oldstyle_f = a
                .first()
                .is_some_and(|f| !f.starts_with('-') && f.contains('f'));
            if !flag(args, &[], &["force-local"])
                && (values(args, &['f'], &["file"]).iter().any(remote)
                    || (oldstyle_f && args[1..].iter().any(remote)))
            {
                acc.raise(
                    Config,
                    "`tar` reaches an archive on another host: it runs a remote shell",
                );
            }
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
                // What it extracts is named inside the archive.
                acc.wrote_unnamed();
                acc.raise(Config, "`tar` creates or extracts files");
            }
        }
        "cpio" | "patch" | "uudecode" | "ar" | "7z" | "7za" | "bsdtar" => {
            acc.wrote_unnamed();
            acc.raise(
                Config,
                format!("`{name}` writes files named inside its input"),
            );
        }
        "sponge" => {
            for o in operands(args) {
                acc.wrote(o);
            }
            acc.raise(Config, "`sponge` writes a file");
        }
        "gunzip" | "unxz" | "bunzip2" | "unzstd" | "unlzma" | "uncompress" | "lunzip" => {
            decompressed(args, acc);
            acc.raise(Config, format!("`{name}` writes decompressed files"));
        }
        "gzip" | "xz" | "bzip2" | "zstd" | "lzma" | "lzip" | "brotli"
            if flag(args, &['d'], &["decompress", "uncompress"]) =>
        {
            decompressed(args, acc);
            acc.raise(Config, format!("`{name} -d` writes decompressed files"));
        }
        "unzip" => reader_unless(
            name,
            !flag(args, &['l', 'v', 't', 'Z'], &[]),
            "extracts files",
            acc,
        ),

        // Processes.
        "kill" => kill(args, acc),
        "pkill" | "killall" | "skill" | "renice" => by_name(name, args, acc),
        "killall5" => acc.raise(Destructive, "`killall5` signals every process"),

        // Power and the system.
        "reboot" | "poweroff" | "halt" => {
            acc.raise(Destructive, format!("`{name}` takes the host down"))
        }
        "shutdown" => {
            // getopt: the last action given wins, so `-c` cancels only alone (with a
            // message to the users).
            let acts = flag(args, &['r', 'h', 'H', 'P', 'k'], &["reboot", "halt", "poweroff"])
                || operands(args).iter().any(|o| {
                    *o == "now" || o.starts_with('+') || o.contains(':') || o.parse::<u64>().is_ok()
                });
            if flag(args, &['c'], &[]) && !acts {
                acc.raise(Low, "`shutdown -c` cancels a pending shutdown");
            } else {
                acc.raise(Destructive, "`shutdown` takes the host down");
            }
        }
        "init" | "telinit" => {
            // Every run level isolates its target, stopping what it does not want;
            // `q` and `u` reload.
            if !matches!(sub, "q" | "Q" | "u" | "U" | "") {
                acc.raise(
                    Destructive,
                    format!("`{name} {sub}` halts, reboots or isolates the host"),
                );
            } else {
                acc.raise(Config, format!("`{name}` changes the run level"));
            }
        }
        "systemctl" | "loginctl" | "machinectl" if every_journal_field(args) => acc.raise(
            Config,
            format!(
                "`{name}` prints its log lines' every field, a crashed process's environment (COREDUMP_ENVIRON) among them"
            ),
        ),
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
        "journalctl" if flag(args, &[], &["vacuum-size", "vacuum-time", "vacuum-files"]) => {
            acc.raise(Destructive, "`journalctl --vacuum-…` deletes the host's logs")
        }
        "journalctl" if let Some(why) = journal_secret(args) => {
            acc.raise(Config, format!("`journalctl` {why}"))
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
        "date" => reader_unless(
            name,
            flag(args, &['s'], &["set"]) || operands(args).iter().any(|o| !o.starts_with('+')),
            "sets the clock",
            acc,
        ),
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
        "loginctl"
            if matches!(
                sub,
                "poweroff"
                    | "reboot"
                    | "halt"
                    | "kexec"
                    | "soft-reboot"
                    | "suspend"
                    | "hibernate"
                    | "hybrid-sleep"
                    | "suspend-then-hibernate"
            ) =>
        {
            acc.raise(
                Destructive,
                format!("`loginctl {sub}` takes the host down or out of service"),
            )
        }
        "loginctl"
            if matches!(
                sub,
                "terminate-user"
                    | "kill-user"
                    | "terminate-session"
                    | "kill-session"
                    | "terminate-seat"
            ) =>
        {
            acc.raise(
                Destructive,
                format!("`loginctl {sub}` ends a user's or a seat's processes"),
            )
        }
        "dbus-send" | "gdbus" | "qdbus" | "dbus-launch" if bus_call_ends(&a) => acc.raise(
            Destructive,
            format!("`{name}` asks a service to stop the host, a unit or a user"),
        ),
        "busctl" if matches!(sub, "call" | "set-property" | "emit") => {
            // A method of systemd's or logind's that stops the host, a unit or a user.
            if bus_call_ends(&lits(args)) {
                acc.raise(
                    Destructive,
                    format!("`busctl {sub}` asks a service to stop the host, a unit or a user"),
                );
            } else {
                acc.raise(Config, format!("`busctl {sub}` asks a service to act"));
            }
        }
        "busctl"
            if matches!(sub, "tree" | "introspect" | "get-property")
                // getopt keeps the last value given.
                && values(args, &[], &["auto-start"])
                    .last()
                    .is_none_or(|w| w.lit != "no") =>
        {
            // A call to a name not yet owned starts its service where the bus may
            // (PackageKit, fwupd, UDisks2 probe the hardware as they start; networkd and
            // resolved, enabled but stopped, would configure the network): systemd's own
            // that only answer are started by their readers anyway. `tree` takes any number of services,
            // the others one, then its paths.
            let ops = operands(args);
            let named: Vec<&str> = if sub == "tree" {
                ops.get(1..).unwrap_or_default().to_vec()
            } else {
                ops.get(1).copied().into_iter().collect()
            };
            let other = named.into_iter().find(|to| {
                !matches!(
                    *to,
                    "org.freedesktop.systemd1"
                        | "org.freedesktop.login1"
                        | "org.freedesktop.hostname1"
                        | "org.freedesktop.timedate1"
                        | "org.freedesktop.locale1"
                        | "org.freedesktop.DBus"
                )
            });
            // systemd's units' objects hold their environment and credentials as
            // properties, which introspect and get-property print.
            let unit_secrets = ops.iter().any(|o| o.contains("/org/freedesktop/systemd1/unit"))
                && (sub == "introspect"
                    || ops.iter().any(|o| {
                        o.starts_with("Environment")
                            || o.starts_with("SetCredential")
                            || o.starts_with("LoadCredential")
                            || o.starts_with("ImportCredential")
                    }));
            match other {
                _ if unit_secrets => acc.raise(
                    Config,
                    format!("`busctl {sub}` of a unit prints its environment and credentials"),
                ),
                Some(to) => acc.raise(
                    Config,
                    format!(
                        "`busctl {sub} {to}` may start the service it names: add --auto-start=no"
                    ),
                ),
                None => acc.raise(ReadOnly, format!("`busctl {sub}` only reads")),
            }
        }
        "networkctl" if matches!(sub, "down" | "forget") => acc.raise(
            Destructive,
            format!("`networkctl {sub}` takes an interface away (may cut the host off)"),
        ),
        "hostnamectl" | "timedatectl" | "localectl" | "loginctl" | "networkctl" | "resolvectl"
        | "busctl" => {
            let read = sub.is_empty()
                || matches!(
                    sub,
                    "status"
                        | "show"
                        | "list"
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
        "umount"
            if flag(args, &['a'], &["all"])
                || operands(args).iter().any(|o| {
                    matches!(
                        o.trim_end_matches('/'),
                        "" | "/usr"
                            | "/var"
                            | "/etc"
                            | "/boot"
                            | "/home"
                            | "/proc"
                            | "/sys"
                            | "/dev"
                            | "/run"
                            | "/var/lib"
                    )
                }) =>
        {
            acc.raise(
                Destructive,
                "`umount` of the root or a filesystem the system runs from",
            )
        }
        "umount" | "swapoff" | "swapon" | "losetup" | "modprobe" | "insmod" | "rmmod" => acc.raise(
            Config,
            format!("`{name}` changes devices, mounts or modules"),
        ),
        "crontab" => {
            if flag(args, &['r'], &["remove"]) {
                acc.raise(Destructive, "`crontab -r` deletes the crontab");
            } else if flag(args, &['l'], &["list"]) {
                acc.raise(ReadOnly, "`crontab -l` lists");
            } else if operands(args).iter().any(|o| normal(o) == "/dev/null") {
                acc.raise(Destructive, "`crontab /dev/null` empties the crontab");
            } else {
                acc.raise(Config, "`crontab` replaces or edits the crontab");
            }
        }

        // Users.
        "userdel" | "deluser" | "groupdel" | "delgroup" => {
            acc.raise(Destructive, format!("`{name}` deletes an account"))
        }
        // A login taken away: a shell that refuses it, a locked password, an expiry.
        "usermod"
            if flag(args, &['L', 'e'], &["lock", "expiredate"])
                || values(args, &['s'], &["shell"])
                    .iter()
                    .any(|s| s.dynamic || s.lit.ends_with("nologin") || s.lit.ends_with("false")) =>
        {
            acc.raise(Destructive, "`usermod` takes an account's login away")
        }
        "passwd" if flag(args, &['l', 'd', 'e'], &["lock", "delete", "expire"]) => {
            acc.raise(Destructive, "`passwd` locks, deletes or expires a password")
        }
        "chage" if flag(args, &['E'], &["expiredate"]) => {
            acc.raise(Destructive, "`chage -E` may expire an account now")
        }
        "useradd" | "adduser" | "usermod" | "groupadd" | "addgroup" | "groupmod" | "passwd"
        | "chpasswd" | "chage" | "gpasswd" | "visudo" => {
            acc.raise(Config, format!("`{name}` changes accounts"))
        }

        // Network and firewall.
        "ip" => ip(args, acc),
        "ss" => reader_unless(name, flag(args, &['K'], &["kill"]), "closes sockets", acc),
        "route"
            if a.iter().any(|x| matches!(*x, "del" | "delete"))
                && a.iter().any(|x| {
                    matches!(*x, "default" | "0.0.0.0" | "0/0" | "0.0.0.0/0" | "::/0" | "::")
                }) =>
        {
            acc.raise(
                Destructive,
                "`route del default` takes the default route away (may cut the host off)",
            )
        }
        "route" => reader_unless(
            name,
            !operands(args).is_empty() && !matches!(sub, "-n"),
            "changes routes",
            acc,
        ),
        "iptables" | "ip6tables" | "ebtables" | "arptables" | "iptables-legacy"
        | "iptables-nft" => firewall(name, args, acc),
        "nft" => {
            // A rule whose only statement drops (`nft add rule inet filter input drop`).
            let drop_all = matches!(sub, "add" | "insert" | "replace")
                && a.get(1) == Some(&"rule")
                && a.len() <= 6
                && a.last().is_some_and(|l| matches!(*l, "drop" | "reject"));
            if sub == "flush" || drop_all {
                acc.raise(Destructive, "`nft` drops firewall rules, or every packet of a chain");
            } else if sub == "list" || (sub == "-a" && a.get(1) == Some(&"list")) {
                acc.raise(ReadOnly, "`nft list` only reads");
            } else {
                acc.raise(Config, "`nft` changes firewall rules");
            }
        }
        "ufw" => match sub {
            "status" | "show" => acc.raise(ReadOnly, "`ufw status` only reads"),
            "reset" => acc.raise(Destructive, "`ufw reset` drops every firewall rule"),
            "default" if a.iter().any(|x| matches!(*x, "deny" | "reject")) => acc.raise(
                Destructive,
                "`ufw default deny` drops what no rule allows: it can lock everyone out",
            ),
            _ => acc.raise(Config, "`ufw` changes firewall rules"),
        },
        "firewall-cmd"
            if a.iter().any(|x| {
                let x = x.to_ascii_lowercase();
                (x.starts_with("--set-default-zone") || x.starts_with("--set-target"))
                    && (x.ends_with("drop") || x.ends_with("block") || x.ends_with("reject"))
            }) || a.windows(2).any(|p| {
                matches!(p[0], "--set-default-zone" | "--set-target")
                    && matches!(p[1].to_ascii_lowercase().as_str(), "drop" | "block" | "reject" | "%%reject%%")
            }) =>
        {
            acc.raise(
                Destructive,
                "`firewall-cmd` drops what no rule allows: it can lock everyone out",
            )
        }
        "firewall-cmd" if a.iter().any(|x| x.starts_with("--panic-on")) => acc.raise(
            Destructive,
            "`firewall-cmd --panic-on` drops every packet: it cuts the host off",
        ),
        "ifconfig" if a.contains(&"down") => acc.raise(
            Destructive,
            "`ifconfig … down` takes an interface away (may cut the host off)",
        ),
        "ifdown" => acc.raise(
            Destructive,
            "`ifdown` takes an interface away (may cut the host off)",
        ),
        // nmcli takes any prefix of its objects and verbs (`n of`, `c d`, `d dis`).
        "nmcli" if {
            let ops: Vec<&str> = operands(args);
            let object = ops.first().copied().unwrap_or("");
            let verb = ops.get(1).copied().unwrap_or("");
            let is = |w: &str, name: &str| !w.is_empty() && name.starts_with(w);
            ((is(object, "networking") || is(object, "radio"))
                && ops.iter().skip(1).any(|w| is(w, "off") && w.len() >= 2))
                || ((is(object, "connection") || is(object, "device"))
                    && (is(verb, "down") || is(verb, "disconnect") || is(verb, "delete")))
        } =>
        {
            acc.raise(
                Destructive,
                "`nmcli` takes the network or a connection away (may cut the host off)",
            )
        }
        "iptables-restore" | "ip6tables-restore" | "firewall-cmd" => {
            acc.raise(Config, format!("`{name}` changes firewall rules"))
        }

        // Tools with subcommands.
        "git" => git(args, acc),
        "docker" | "podman" | "nerdctl" | "docker-compose" | "podman-compose" => {
            containers(name, args, acc)
        }
        "kubectl" | "oc" => kubectl(name, args, acc),
        "apt" | "apt-get" | "aptitude" | "dnf" | "yum" | "zypper" | "pacman" | "apk" | "snap"
        | "flatpak" => packages(name, args, acc),
        "apt-cache" | "apt-file" | "apt-mark"
            if name != "apt-mark" || matches!(sub, "showhold" | "showauto" | "showmanual") =>
        {
            acc.raise(ReadOnly, format!("`{name}` queries packages"))
        }
        "rpm" | "dpkg"
            if a.iter().any(|x| {
                *x == "--nodeps"
                    || matches!(
                        *x,
                        "--force-depends"
                            | "--force-remove-essential"
                            | "--force-all"
                            | "--force-remove-protected"
                    )
                    || (x.starts_with("--force-") && x.contains("essential"))
            }) =>
        {
            acc.raise(
                Destructive,
                format!("`{name}` forced past what other packages depend on"),
            )
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
        "rpm" if a.iter().any(|x| x.contains("://")) => acc.raise(
            Config,
            "`rpm` given a URL fetches the package over the network",
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
            "undefine" | "destroy" | "vol-delete" | "vol-wipe" | "pool-delete"
            | "snapshot-delete" | "snapshot-revert" => acc.raise(
                Destructive,
                format!("`virsh {sub}` destroys a guest or its storage"),
            ),
            "list" | "dominfo" | "dumpxml" | "domstate" | "domblklist" | "domiflist"
            | "nodeinfo" | "version" | "vol-list" | "pool-list" | "net-list" | "snapshot-list"
            | "capabilities" => acc.raise(ReadOnly, format!("`virsh {sub}` only reads")),
            _ => acc.raise(Config, "`virsh` changes a guest"),
        },
        "zfs" | "zpool" => match sub {
            "destroy" | "labelclear" => acc.raise(
                Destructive,
                format!("`{name} {sub}` deletes datasets or a pool"),
            ),
            // Back to a snapshot, destroying what came after; a stream received over a
            // dataset with -F.
            "rollback" => acc.raise(
                Destructive,
                format!("`{name} rollback` discards what was written since the snapshot"),
            ),
            "receive" | "recv" if flag(args, &['F'], &[]) => acc.raise(
                Destructive,
                format!("`{name} {sub} -F` overwrites a dataset"),
            ),
            "list" | "get" | "status" | "iostat" | "history" | "version" => {
                acc.raise(ReadOnly, format!("`{name} {sub}` only reads"))
            }
            _ => acc.raise(Config, format!("`{name}` changes storage")),
        },
        "lvremove" | "vgremove" | "pvremove" | "lvreduce" | "lvresize" => {
            acc.raise(Destructive, format!("`{name}` deletes or shrinks volumes"))
        }
        "dropdb" | "dropuser" => {
            acc.raise(Destructive, format!("`{name}` deletes a database or role"))
        }
        _ => {
            // A program not known may run the command its arguments spell
            // (`systemd-inhibit rm -rf /srv`, `perf stat mkfs …`): from the first word
            // that names a program that destroys, it is judged as that command too.
            const DESTROYS: &[&str] = &[
                "rm", "dd", "shred", "wipefs", "mkswap", "fdisk", "sfdisk", "sgdisk", "parted",
                "blkdiscard", "poweroff", "reboot", "halt", "shutdown", "systemctl", "kill",
                "pkill", "killall", "userdel", "truncate", "find", "xargs", "zfs", "zpool",
                "lvremove", "vgremove", "cryptsetup", "iptables", "nft", "ip", "ifdown",
                "mkfs", "sh", "bash", "dash", "zsh",
            ];
            if let Some(at) = args.iter().position(|w| {
                let base = w.lit.rsplit('/').next().unwrap_or("");
                !w.dynamic && (DESTROYS.contains(&base) || base.starts_with("mkfs."))
            }) {
                inner_command(&args[at..], acc);
            }
            acc.raise(Config, format!("`{name}` is not known to be harmless"))
        }
    }
}

/// Notes what copying `files` (the sources, then the destination) writes: the
/// destination, and each source by its name when the destination is a directory (`-t`,
/// a trailing `/`, several sources, a bin directory, `.`).
fn copies(files: &[&str], into_directory: bool, acc: &mut Acc) {
    let Some((dest, sources)) = files.split_last() else {
        return;
    };
    acc.wrote(dest);
    let directory = into_directory
        || sources.len() > 1
        || dest.ends_with('/')
        || matches!(*dest, "." | "..")
        || BIN_DIRS.contains(&dest.trim_end_matches('/'));
    if directory {
        for s in sources {
            acc.wrote(s);
        }
    }
}

/// `rsync -e CMD` runs CMD to reach the other host, whose shell runs `--rsync-path`:
/// both are commands, judged as such. Returns them.
fn rsync_commands(args: &[Word], acc: &mut Acc) -> Vec<Word> {
    let commands = values(args, &['e'], &["rsh", "rsync-path"]);
    for v in &commands {
        if v.dynamic {
            acc.unread("`rsync` runs a command built at run time (-e, --rsh, --rsync-path)");
        } else {
            super::shell::script(&v.lit, acc);
        }
    }
    commands
}

/// `sort --compress-program=PROG` runs PROG with its data on PROG's input: a known
/// compressor is judged as the program it is; any other may run that data as its code
/// (`sh`, `python3`, `dc`, `ed`).
fn compressor(prog: &Word, acc: &mut Acc) {
    const COMPRESSORS: &[&str] = &[
        "gzip", "pigz", "bzip2", "pbzip2", "lbzip2", "xz", "pixz", "zstd", "pzstd", "lz4", "lzop",
        "lzip", "plzip", "lzma", "brotli", "compress",
    ];
    let base = prog.lit.rsplit('/').next().unwrap_or(&prog.lit);
    if prog.dynamic || !COMPRESSORS.contains(&base) {
        acc.unread(format!(
            "`sort --compress-program` gives its data to `{}`, not known to be a compressor",
            prog.lit
        ));
    } else {
        wrappers::inner_command(std::slice::from_ref(prog), acc);
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

/// `pkill`, `killall`, `skill`, `renice`: processes chosen by name, user, group or
/// session. Every process of a user, a group or a session, a pattern that matches any
/// name, or the daemons the host needs to be reached and to run (sshd, systemd, init,
/// dbus, journald, Argos's own) take the host down or lock its operators out.
fn by_name(name: &str, args: &[Word], acc: &mut Acc) {
    const VITAL: &[&str] = &[
        "sshd",
        "systemd",
        "init",
        "dbus-daemon",
        "dbus-broker",
        "systemd-journald",
        "systemd-logind",
        "systemd-udevd",
        "agetty",
        "argos-execd",
        "argos-gatewayd",
        "argos-shim",
    ];
    // The options that choose processes by user, group, session, parent or terminal.
    let (short, long): (&[&str], &[&str]) = match name {
        "pkill" => (
            &["-u", "-U", "-G", "-g", "-s", "-P", "-t", "-c"],
            &[
                "--euid",
                "--uid",
                "--group",
                "--pgroup",
                "--session",
                "--parent",
                "--terminal",
                "--cgroup",
            ],
        ),
        "killall" => (&["-u"], &["--user"]),
        _ => (&["-u", "-t", "-p", "-c"], &[]),
    };
    let whole = args.iter().any(|a| {
        let a = a.lit.as_str();
        short
            .iter()
            .any(|o| a.starts_with(o) && !a.starts_with("--"))
            || long
                .iter()
                .any(|o| a == *o || a.strip_prefix(o).is_some_and(|r| r.starts_with('=')))
    });
    let operands: Vec<&str> = args
        .iter()
        .map(|a| a.lit.as_str())
        .filter(|a| !a.starts_with('-'))
        .collect();
    let broad = operands.iter().any(|o| {
        matches!(*o, "." | ".*" | "^" | "$" | "" | ".+" | "^.*" | "^.*$")
            || VITAL.iter().any(|v| {
                *o == *v
                    || o.trim_start_matches('^').trim_end_matches('$') == *v
                    || o.ends_with(&format!("/{v}"))
            })
    });
    if name == "renice" {
        acc.raise(Low, "`renice` reprioritises processes");
    } else if whole || broad || args.iter().any(|a| a.dynamic) {
        acc.raise(
            Destructive,
            format!("`{name}` signals every process of a user, group or session, any name, or a daemon the host needs (sshd, systemd, Argos)"),
        );
    } else {
        acc.raise(Low, format!("`{name}` signals processes"));
    }
}

/// `name` only reads unless `writes`.
/// Whether a bus call's words (busctl's, dbus-send's, gdbus's) ask systemd or logind to
/// take the host down, to stop or start a unit that does, to end a user's processes or to
/// delete a unit's data: the method named (`org.freedesktop.login1.Manager.PowerOff`,
/// `PowerOffWithFlags`, `ScheduleShutdown`), or a unit start with a unit that takes the
/// host down (`StartUnit … poweroff.target`, a unit's path `…/unit/poweroff_2etarget`).
pub(super) fn bus_call_ends(words: &[&str]) -> bool {
    const ENDS: &[&str] = &[
        "PowerOff",
        "Reboot",
        "Halt",
        "KExec",
        "SoftReboot",
        "Suspend",
        "Hibernate",
        "HybridSleep",
        "Sleep",
        "ScheduleShutdown",
        "Kill",
        "Terminate",
        "StopUnit",
        "CleanUnit",
        "Exit",
        "Isolate",
    ];
    const DOWN: &[&str] = &[
        "poweroff",
        "reboot",
        "halt",
        "kexec",
        "soft",
        "rescue",
        "emergency",
        "suspend",
        "hibernate",
        "hybrid",
        "sleep",
        "ctrl",
        "exit",
        "shutdown",
        "final",
        "umount",
        "runlevel",
    ];
    let method = |w: &str| {
        let last = w.rsplit(['.', '/']).next().unwrap_or(w);
        ENDS.iter().any(|e| last.starts_with(e))
    };
    let starts = words.iter().any(|w| {
        let last = w.rsplit(['.', '/']).next().unwrap_or(w);
        last.starts_with("Start") || last.starts_with("Restart") || last.starts_with("Enqueue")
    });
    let down_unit = words.iter().any(|w| {
        let w = w.rsplit('/').next().unwrap_or(w).to_ascii_lowercase();
        let w = w
            .strip_prefix("systemd")
            .unwrap_or(&w)
            .trim_start_matches(['-', '_']);
        DOWN.iter().any(|d| w.starts_with(d))
    });
    words.iter().any(|w| method(w)) || (starts && down_unit)
}

/// Whether `args` ask a program that shows journal entries (journalctl, and the log lines
/// of `systemctl status`, `loginctl session-status`, `machinectl status`) for an output
/// that prints every field of an entry.
fn every_journal_field(args: &[Word]) -> bool {
    values(args, &['o'], &["output"]).iter().any(|w| {
        w.dynamic
            || !matches!(
                w.lit.as_str(),
                "short"
                    | "short-full"
                    | "short-iso"
                    | "short-iso-precise"
                    | "short-precise"
                    | "short-monotonic"
                    | "short-delta"
                    | "short-unix"
                    | "with-unit"
                    | "cat"
            )
    })
}

/// Why `journalctl` with `args` would print what the journal keeps of root-only
/// `/proc` files: systemd-coredump logs a crashed process's environment
/// (`COREDUMP_ENVIRON`, where services keep their secrets), its command line and maps, and
/// its core where the journal stores it. The output formats that print every field show
/// them; a short or `cat` output prints the message alone.
fn journal_secret(args: &[Word]) -> Option<&'static str> {
    let coredump = |field: &str| {
        field
            .trim()
            .trim_start_matches('_')
            .to_ascii_uppercase()
            .starts_with("COREDUMP")
    };
    let fields = values(args, &[], &["output-fields"]);
    if fields
        .iter()
        .chain(&values(args, &['F'], &["field"]))
        .any(|w| w.dynamic || w.lit.split(',').any(coredump))
    {
        return Some("prints a crashed process's environment or memory (COREDUMP_*)");
    }
    let every_field = every_journal_field(args);
    // An empty list is every field.
    let named = fields
        .iter()
        .any(|w| w.lit.split(',').any(|f| !f.trim().is_empty()));
    if every_field && !named {
        return Some(
            "prints every field of an entry, a crashed process's environment (COREDUMP_ENVIRON) among them: name the fields with --output-fields",
        );
    }
    operands(args)
        .iter()
        .any(|m| m.split_once('=').is_some_and(|(f, _)| coredump(f)))
        .then_some("matches on a crashed process's environment or memory (COREDUMP_*)")
}

fn reader_unless(name: &str, writes: bool, what: &str, acc: &mut Acc) {
    if writes {
        acc.raise(Config, format!("`{name}` {what}"));
    } else {
        acc.raise(ReadOnly, format!("`{name}` only reads"));
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
                if deletes(&args[i + 1..end]) {
                    acc.raise(Destructive, "`find -exec` deletes every match");
                }
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

/// Whether a command run once per item (by `find -exec`, `xargs`) deletes it: however
/// it is spelled, run over every match it is a recursive delete. Any of its words that
/// names a deleting program counts, so one behind a wrapper (`nice rm`, `sudo rm`) or in
/// a script it runs (`sh -c 'rm "$1"'`) does too.
pub(super) fn deletes(command: &[Word]) -> bool {
    command.iter().any(|w| {
        w.lit
            .split(|c: char| {
                c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')' | '\'' | '"')
            })
            .any(|word| {
                matches!(
                    word.rsplit('/').next().unwrap_or(""),
                    "rm" | "unlink" | "shred" | "srm" | "wipe" | "truncate"
                )
            })
    })
}

/// A file whose emptying or replacing takes away the operator's way in.
fn access_file(p: &str) -> bool {
    let p = normal(p);
    p.ends_with("/authorized_keys")
        || p.ends_with("/authorized_keys2")
        || matches!(
            p.as_str(),
            "/etc/passwd"
                | "/etc/shadow"
                | "/etc/pam.d/sshd"
                | "/etc/ssh/sshd_config"
                | "/etc/nologin"
        )
}

/// A redirection that writes to `target`.
pub fn write_target(target: &Word, acc: &mut Acc) {
    if target.dynamic {
        // It may be any file the command runs.
        acc.wrote_unnamed();
        acc.raise(Config, "writes to a file named by an expansion");
    } else if block_device(&target.lit) {
        acc.raise(
            Destructive,
            format!("writes to block device {}", target.lit),
        );
    } else if kernel_trigger(&target.lit) {
        acc.raise(Destructive, format!("writes to {}", target.lit));
    } else if access_file(&target.lit) {
        acc.wrote(&target.lit);
        acc.raise(
            Destructive,
            format!("writes to {}, the way logins are let in", target.lit),
        );
    } else if harmless_sink(&target.lit) {
        acc.raise(Low, format!("redirection to {}", target.lit));
    } else {
        if target.lit.contains(['*', '?', '[']) {
            // bash writes to the one file a pattern matches.
            acc.wrote_unnamed();
        }
        acc.wrote(&target.lit);
        acc.raise(Config, format!("writes to {}", target.lit));
    }
}

/// A decompressor's operands: each writes the file named without its suffix.
fn decompressed(args: &[Word], acc: &mut Acc) {
    for o in operands(args) {
        let name = [
            ".gz", ".xz", ".bz2", ".zst", ".lzma", ".Z", ".lz", ".br", ".tgz",
        ]
        .iter()
        .find_map(|x| o.strip_suffix(x))
        .unwrap_or(o);
        acc.wrote(name);
    }
}

/// `path` with `//`, `.` and `..` resolved as written (`//dev/./sda` is `/dev/sda`).
/// Where a path may lead whatever the current directory: `..` climbs to `/` from
/// anywhere, `~user/..` too, `/proc/PID/root` is `/`, and a relative `dev/…` is `/dev/…`
/// from there — the path from the last `..` on, made absolute.
fn reached(path: &str) -> String {
    let mut parts: Vec<&str> = path.split('/').collect();
    // A process's `root` or `cwd` in /proc (`/proc/1/task/1/root`, `/dev/fd/../root`):
    // what follows is from `/` (or a directory unknown, taken as `/`).
    if let Some(at) = parts.iter().rposition(|c| matches!(*c, "root" | "cwd"))
        && parts[..at].iter().any(|c| matches!(*c, "proc" | "fd"))
    {
        parts.drain(..=at);
        parts.insert(0, "");
    }
    if let Some(up) = parts.iter().rposition(|c| *c == "..") {
        parts.drain(..=up);
    } else if parts.first().is_some_and(|c| c.starts_with('~')) {
        parts.remove(0);
    }
    let mut p = normal(&format!("/{}", parts.join("/")));
    loop {
        let segs: Vec<&str> = p.splitn(5, '/').collect();
        if segs.len() >= 4 && segs[1] == "proc" && segs[3] == "root" {
            p = format!("/{}", segs.get(4).copied().unwrap_or(""));
        } else {
            return p;
        }
    }
}

fn normal(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    if path.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

/// A file whose reading acts on the host, if `p` is one: a device other than the plain
/// ones (opening `/dev/watchdog` arms the watchdog, which reboots the host; a terminal's
/// reader takes its keystrokes; `/dev/mem` reads the hardware), or a stream a reader
/// consumes (`/proc/kmsg`, a tracing `trace_pipe`), or a device's configuration space.
pub(crate) fn acting_read(p: &str) -> Option<&'static str> {
    readings(p).iter().find_map(|p| acting_at(p))
}

/// Both readings of a path: where it may lead whatever the directory it starts from
/// ([`reached`]), and as written (`/dev/disk/../watchdog` is `/dev/watchdog`).
fn readings(p: &str) -> [String; 2] {
    let lexical = normal(p);
    let lexical = if lexical.starts_with('/') {
        lexical
    } else {
        format!("/{lexical}")
    };
    [reached(p), lexical]
}

fn acting_at(p: &str) -> Option<&'static str> {
    if let Some(dev) = p.strip_prefix("/dev/") {
        let plain = dev.is_empty()
            || dev.starts_with("shm/")
            || matches!(
                dev,
                "null"
                    | "zero"
                    | "full"
                    | "random"
                    | "urandom"
                    | "stdin"
                    | "stdout"
                    | "stderr"
                    | "tty"
            )
            || dev.starts_with("fd/")
            || block_device(p);
        return (!plain).then_some("a device, which opening or reading acts on");
    }
    if p == "/dev" {
        return None;
    }
    if p == "/proc/kmsg" || p.ends_with("/trace_pipe") || p.contains("/trace_pipe_raw") {
        return Some("a stream its reader consumes, taken from whoever else reads it");
    }
    if p.starts_with("/sys/")
        && (p.ends_with("/config") || p.ends_with("/rom") || p.contains("/resource"))
    {
        return Some("a device's configuration space or memory");
    }
    None
}

/// A file whose writing acts on the kernel or its memory (`/proc/sysrq-trigger`).
/// [`acting_read`] for an unquoted pattern: whether any name it may expand to is one
/// (`/???/watchdog`, `/proc/km*`, `/sys/bus/pci/devices/*/config`). A pattern is
/// matched a directory at a time, as the shell expands one (`*` never spans a `/`); a
/// relative one is judged from `/`, as [`reached`] takes a relative name.
pub(crate) fn pattern_acts(p: &str) -> Option<&'static str> {
    readings(p).iter().find_map(|p| pattern_acts_at(p))
}

fn pattern_acts_at(p: &str) -> Option<&'static str> {
    use crate::{may_match, may_start_with};
    let parts: Vec<&str> = p.split('/').skip(1).collect();
    // Under the directory `dir` (a file in it, or deeper).
    let under = |dir: &str| parts.len() > 1 && may_match(parts[0], dir);
    let last = parts.last().copied().unwrap_or("");
    if under("dev") {
        return Some("a pattern that may name a device, which opening or reading acts on");
    }
    if (parts.len() == 2 && under("proc") && may_match(last, "kmsg"))
        || (under("sys")
            && (may_match(last, "trace_pipe") || may_start_with(last, "trace_pipe_raw")))
    {
        return Some("a pattern that may name a stream its reader consumes");
    }
    if under("sys")
        && (may_match(last, "config") || may_match(last, "rom") || may_start_with(last, "resource"))
    {
        return Some("a pattern that may name a device's configuration space or memory");
    }
    None
}

/// Also the sysfs files whose writing suspends the host or takes a device away
/// (`/sys/power/state`, a disk's `device/delete`, a device's `remove` or `unbind`).
fn kernel_trigger(p: &str) -> bool {
    let p = normal(p);
    matches!(
        p.as_str(),
        "/proc/sysrq-trigger" | "/dev/mem" | "/dev/kmem" | "/dev/port" | "/sys/power/state"
    ) || (p.starts_with("/sys/")
        && ["/delete", "/remove", "/unbind", "/device/state", "/online"]
            .iter()
            .any(|end| p.ends_with(end)))
}

fn harmless_sink(p: &str) -> bool {
    let p = normal(p);
    matches!(
        p.as_str(),
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "-"
    ) || crate::shell::descriptor(&p).is_some()
}

/// A disk, partition or volume device node.
fn block_device(p: &str) -> bool {
    let p = normal(p);
    let Some(dev) = p.strip_prefix("/dev/") else {
        return false;
    };
    const PREFIXES: &[&str] = &[
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "dm-", "md", "mapper/", "disk/", "loop", "nbd",
        "zd", "rbd", "sr", "pmem", "bcache", "drbd", "zvol/", "block/",
    ];
    dev == "root" || PREFIXES.iter().any(|x| dev.starts_with(x))
}
