//! A command string as the shell will see it: tokens from `lex`, cut into simple commands
//! at every control operator; each word read by `word` (its literal text, whether it
//! depends on an expansion, and the commands nested in it, which are classified in turn).
//!
//! No syntax tree is built: the classifier judges every command it can find, in or out of
//! a valid program (the shell runs none of an invalid one). Reading is linear in the text
//! at each level of nesting, and nesting is bounded (`MAX_DEPTH`). (The first version used
//! brush-parser; its grammars backtrack exponentially and its tokenizer loops on some
//! inputs the fuzzer found in minutes.)

use super::lex::{self, Token};
use super::{Acc, Class, rules, word};

/// A word of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The word with its quoting removed; expansions stay as written.
    pub lit: String,
    /// Whether the word's value depends on an expansion (`$X`, `$(…)`, arithmetic).
    pub dynamic: bool,
}

impl Word {
    pub fn literal(s: &str) -> Word {
        Word {
            lit: s.to_string(),
            dynamic: false,
        }
    }
}

/// Where a simple command sits: what joins it to the commands beside it.
#[derive(Debug, Default, Clone)]
pub struct Place {
    /// Reads from or writes to a pipe (`|`, `|&`).
    pub piped: bool,
    /// The command piping into this one, by name.
    pub from: Option<String>,
}

/// Classifies a shell script into `acc`.
pub fn script(src: &str, acc: &mut Acc) {
    if acc.depth > super::MAX_DEPTH {
        acc.unread("commands nested too deep to inspect");
        return;
    }
    acc.depth += 1;
    walk(src, acc);
    acc.depth -= 1;
}

fn walk(src: &str, acc: &mut Acc) {
    let tokens = match lex::lex(src) {
        Ok(t) => t,
        // The shell runs every line before the one it cannot read: unread, not refused.
        Err(e) => {
            acc.unread(format!("not a complete shell command ({e})"));
            return;
        }
    };
    if let Some(why) = unbalanced(&tokens) {
        // The shell runs none of it; whatever it holds is still judged below.
        acc.raise(
            Class::ConfigMutation,
            format!("not a complete shell command ({why})"),
        );
    }
    let mut cmd = Command::default();
    let mut place = Place::default();
    let mut shell = Shell::default();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Word(w, _) => {
                cmd.words.push(word::word(w, acc));
                i += 1;
            }
            Token::Body(_) => i += 1, // read with its `<<`
            &Token::Op(op, at) => {
                match op {
                    "<" | ">" | ">>" | ">|" | "<>" | "&>" | "&>>" | ">&" | "<&" | "<<" | "<<-"
                    | "<<<" => {
                        // An fd number written against the operator belongs to it.
                        let mut fd = None;
                        if let (Some(prev), Some(Token::Word(pw, pat))) =
                            (cmd.words.last(), i.checked_sub(1).map(|p| &tokens[p]))
                            && pat + pw.len() == at
                            && !pw.is_empty()
                            && pw.bytes().all(|b| b.is_ascii_digit())
                            && prev.lit == *pw
                        {
                            fd = Some(pw.parse().unwrap_or(u32::MAX));
                            cmd.words.pop();
                        }
                        i += 1;
                        if (op == "<" || op == ">")
                            && let Some(Token::Op("(", _)) = tokens.get(i)
                        {
                            {
                                acc.raise(Class::ReversibleLow, "process substitution");
                                if runs_what_it_reads(&cmd.words) {
                                    // `bash <(… | base64 -d)`: its script is printed at run time.
                                    acc.unread("a script read from a process substitution");
                                }
                                acc.compound = true;
                                // The commands inside are cut out like any others.
                                flush(&mut cmd, std::mem::take(&mut place), &mut shell, acc);
                                continue;
                            }
                        }
                        i = redirect(op, fd, &tokens, i, &mut cmd.redirs, acc);
                    }
                    _ => {
                        // A function definition: `name ( )`.
                        if op == "("
                            && let Some(Token::Op(")", _)) = tokens.get(i + 1)
                            && !cmd.words.is_empty()
                            && cmd.words[..cmd.words.len() - 1]
                                .iter()
                                .all(|w| !w.dynamic && rules::RESERVED.contains(&w.lit.as_str()))
                        {
                            let name = cmd.words.pop().expect("one word").lit;
                            acc.raise(Class::ReversibleLow, format!("defines function `{name}`"));
                            shell.functions.push(name);
                            acc.compound = true;
                            i += 2;
                            continue;
                        }
                        let piped = matches!(op, "|" | "|&");
                        let mut here = std::mem::take(&mut place);
                        here.piped |= piped;
                        let name = flush(&mut cmd, here, &mut shell, acc);
                        place = Place {
                            piped,
                            from: name.filter(|_| piped),
                        };
                        let what = match op {
                            "|" | "|&" => "pipeline",
                            "&&" | "||" => "conditional list",
                            "&" => "runs in the background",
                            "(" | ")" => "subshell",
                            _ => "command list",
                        };
                        acc.raise(Class::ReversibleLow, what);
                        acc.compound = true;
                        i += 1;
                    }
                }
            }
        }
    }
    flush(&mut cmd, place, &mut shell, acc);
}

/// The simple command being read: its words, and its redirections in the order written
/// (decided once the whole command is known: `< s sh` feeds `s` to the shell as surely as
/// `sh < s` does).
#[derive(Default)]
struct Command {
    words: Vec<Word>,
    redirs: Vec<(u32, Source)>,
}

/// What the script has shown so far of the shell running it.
#[derive(Default)]
struct Shell {
    /// Its descriptors as `exec` left them (those not listed are as the script got them).
    fds: Vec<(u32, Source)>,
    /// The functions it defined.
    functions: Vec<String>,
    /// The strongest code reader among the commands read so far: the one a redirection of
    /// a group (`{ sh; } < s`, `(sh) < s`, `done < s`) or a function call may feed.
    reader: Option<bool>,
}

/// What a descriptor reads from, as far as the script shows.
#[derive(Debug, Clone)]
enum Source {
    /// What the script itself was given (execd's input, or a pipe: judged by the rules).
    Given,
    /// Closed (`<&-`): nothing is read.
    Closed,
    /// A file, by name.
    File(Word),
    /// A here-document or here-string: its text, whether expansions build it at run time,
    /// and which of the two it is.
    Text(String, bool, &'static str),
    /// A copy of another descriptor (`<&3`), looked up when the redirection is made.
    Copy(u32),
    /// A descriptor the script did not open, or one named at run time (`<&$fd`).
    Unknown,
}

impl Shell {
    fn fd(fds: &[(u32, Source)], n: u32) -> Source {
        match fds.iter().rev().find(|(fd, _)| *fd == n) {
            Some((_, s)) => s.clone(),
            None if n <= 2 => Source::Given,
            None => Source::Unknown,
        }
    }

    /// `fds` with `redirs` made in order.
    fn redirected(fds: &[(u32, Source)], redirs: Vec<(u32, Source)>) -> Vec<(u32, Source)> {
        let mut out = fds.to_vec();
        for (fd, to) in redirs {
            let to = match to {
                Source::Copy(n) => Shell::fd(&out, n),
                other => other,
            };
            out.retain(|(f, _)| *f != fd);
            out.push((fd, to));
        }
        out
    }
}

/// Whether the simple command in `words` is a shell, an interpreter or `source`, maybe
/// behind a wrapper (`sudo bash`): a file operand it is given is its program.
pub(crate) fn runs_what_it_reads(words: &[Word]) -> bool {
    reads_program(words).is_some()
}

/// The kind of code reader the simple command in `words` is, maybe behind a wrapper
/// (`sudo bash`): `Some(true)` a shell, `Some(false)` another interpreter.
fn reads_program(words: &[Word]) -> Option<bool> {
    const WRAPPERS: &[&str] = &[
        "sudo", "doas", "env", "exec", "command", "builtin", "nice", "nohup", "timeout", "time",
        "setsid", "stdbuf", "ionice", "chrt", "taskset", "busybox",
    ];
    let mut programs = words
        .iter()
        .filter(|w| {
            !w.dynamic && !w.lit.contains('=') && !rules::RESERVED.contains(&w.lit.as_str())
        })
        .map(|w| w.lit.rsplit('/').next().unwrap_or(&w.lit));
    match programs.next() {
        Some(first) if rules::runs_code(first) => rules::code_reader(first),
        Some(first) if WRAPPERS.contains(&first) => programs.find_map(rules::code_reader),
        _ => None,
    }
}

/// Whether `path` names the standard input (what another command writes into it), spelled
/// any way: `-`, `/dev/stdin`, `//dev/./stdin`, `/proc/thread-self/fd/0`.
pub(crate) fn is_stdin_path(path: &str) -> bool {
    path == "-" || descriptor(path) == Some(0)
}

/// The descriptor a path opens, if it names one, however it is spelled: `/dev/stdin` (0),
/// `/dev/fd/N`, `/proc/<any>/fd/N` (`self`, `thread-self`, a pid, `task/<tid>`), with any
/// `//`, `.` or `..` in it. Read by the last components, so a directory changed to first
/// (`cd /dev; . ./stdin`) or reached another way (`/proc/self/root/dev/stdin`) is no way
/// around it.
pub(crate) fn descriptor(path: &str) -> Option<u32> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    match parts[..] {
        [.., "stdin"] => Some(0),
        [.., "stdout"] => Some(1),
        [.., "stderr"] => Some(2),
        [.., "fd", n] if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            Some(n.parse().unwrap_or(u32::MAX))
        }
        _ => None,
    }
}

/// Why the subshells in `tokens` do not pair up, if they do not (a `)` ending a `case`
/// pattern pairs with its `case`).
fn unbalanced(tokens: &[Token]) -> Option<&'static str> {
    let (mut depth, mut cases) = (0u32, 0u32);
    for t in tokens {
        match t {
            Token::Word("case", _) => cases += 1,
            Token::Word("esac", _) => cases = cases.saturating_sub(1),
            Token::Op("(", _) => depth += 1,
            Token::Op(")", _) => {
                if depth > 0 {
                    depth -= 1;
                } else if cases == 0 {
                    return Some("a `)` that closes nothing");
                }
            }
            _ => {}
        }
    }
    (depth > 0).then_some("a `(` that is never closed")
}

/// Handles a redirection whose target starts at `tokens[i]`; returns the next index. What it
/// feeds a descriptor is noted in `redirs`, to be decided with the whole command.
fn redirect(
    op: &str,
    fd: Option<u32>,
    tokens: &[Token],
    mut i: usize,
    redirs: &mut Vec<(u32, Source)>,
    acc: &mut Acc,
) -> usize {
    acc.compound = true;
    let target = match tokens.get(i) {
        Some(Token::Word(w, _)) => *w,
        _ => {
            // Nothing to redirect to: bash refuses the command.
            acc.raise(
                Class::ConfigMutation,
                format!("not a complete shell command (`{op}` without a target)"),
            );
            return i;
        }
    };
    i += 1;
    let input = fd.unwrap_or(0);
    match op {
        "<<" | "<<-" => {
            // The delimiter, then the body.
            let quoted = target.contains(['\'', '"', '\\']);
            if let Some(Token::Body(body)) = tokens.get(i) {
                rules::sql_text(body, acc);
                if !quoted {
                    word::heredoc(body, acc);
                }
                let built = !quoted && body.contains(['$', '`']);
                redirs.push((input, Source::Text(body.clone(), built, "here-document")));
                i += 1;
            }
            acc.raise(Class::ReversibleLow, "here-document");
        }
        "<<<" => {
            let w = word::word(target, acc);
            rules::sql_text(&w.lit, acc);
            redirs.push((input, Source::Text(w.lit, w.dynamic, "here-string")));
            acc.raise(Class::ReversibleLow, "here-string");
        }
        "<" => {
            let w = word::word(target, acc);
            redirs.push((input, Source::File(w)));
            acc.raise(Class::ReversibleLow, "input redirection");
        }
        ">&" | "<&"
            if target == "-"
                || descriptor_number(target).is_some()
                || (op == "<&" && target.contains('$')) =>
        {
            // `>&"$f"` writes to a file when `$f` is not a number: judged as a write below.
            let to = match descriptor_number(target) {
                Some(n) => Source::Copy(n),
                None if target == "-" => Source::Closed,
                None => Source::Unknown,
            };
            redirs.push((fd.unwrap_or(if op == "<&" { 0 } else { 1 }), to));
            acc.raise(Class::ReversibleLow, "file descriptor redirection");
        }
        "<>" => {
            // Opened for reading and writing: made if missing, and read as input.
            let w = word::word(target, acc);
            rules::write_target(&w, acc);
            redirs.push((input, Source::File(w)));
        }
        _ => {
            let w = word::word(target, acc);
            rules::write_target(&w, acc);
            // `&>`, `>f`: no input is read from them.
            let out = fd.unwrap_or(1);
            redirs.push((out, Source::Closed));
            if op.starts_with('&') || (op == ">&" && fd.is_none()) {
                redirs.push((2, Source::Closed));
            }
        }
    }
    i
}

/// The descriptor a `<&`/`>&` target names: `3`, or `3-` (moved).
fn descriptor_number(target: &str) -> Option<u32> {
    let digits = target.strip_suffix('-').unwrap_or(target);
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().unwrap_or(u32::MAX))
}

/// What a code reader gets on its standard input, judged: a file it runs (paired with what
/// the command writes), a here-document's script, or something not read.
fn feed(input: Source, shell: bool, acc: &mut Acc) {
    match input {
        Source::Given | Source::Closed => {}
        Source::File(w) => {
            if w.dynamic || descriptor(&w.lit).is_some() {
                acc.unread(
                    "a shell or interpreter reads its program from a file named at run time",
                );
            }
            // `sh < f`: f is the program (paired with what the command writes).
            acc.runs_file(&w.lit);
        }
        Source::Text(text, built, what) => match (shell, built) {
            (true, false) => script(&text, acc),
            (true, true) => acc.unread(format!(
                "a shell's script in a {what} built by expansions at run time"
            )),
            (false, _) => acc.unread(format!(
                "an interpreter's program in a {what}, in a language not read"
            )),
        },
        Source::Copy(_) | Source::Unknown => {
            acc.unread("a shell or interpreter reads its program from a descriptor not read")
        }
    }
}

/// Classifies the simple command in `cmd` (if any) with its redirections, and clears it;
/// returns the name of the command it runs.
fn flush(cmd: &mut Command, place: Place, shell: &mut Shell, acc: &mut Acc) -> Option<String> {
    let words = std::mem::take(&mut cmd.words);
    let redirs = std::mem::take(&mut cmd.redirs);
    let mut reader = reads_program(&words);
    let name = if words.is_empty() {
        None
    } else {
        if acc.depth == 1 {
            acc.top.push(words.clone());
        }
        rules::simple(&words, &place, &shell.functions, acc)
    };
    let plain = |w: &Word| !w.dynamic;
    // A group's redirection (`} < s`, `) < s`, `done < s`) or a function's call feeds every
    // command in it: any code reader read so far may be among them.
    let group = words
        .iter()
        .all(|w| plain(w) && rules::RESERVED.contains(&w.lit.as_str()))
        || words
            .first()
            .is_some_and(|w| plain(w) && shell.functions.contains(&w.lit));
    if group {
        reader = reader.max(shell.reader);
    }
    if let [only] = &words[..]
        && plain(only)
        && only.lit == "exec"
    {
        // `exec < s`, `exec 3< s`: the shell's own descriptors, for every command after.
        shell.fds = Shell::redirected(&shell.fds, redirs);
        return name;
    }
    if let Some(is_shell) = reader {
        let fds = Shell::redirected(&shell.fds, redirs);
        feed(Shell::fd(&fds, 0), is_shell, acc);
    }
    shell.reader = shell.reader.max(reader);
    name
}
