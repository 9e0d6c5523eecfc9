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
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Word {
    /// The word with its quoting removed; expansions stay as written.
    pub lit: String,
    /// Whether the word's value depends on an expansion (`$X`, `$(…)`, arithmetic).
    pub dynamic: bool,
    /// What pathname expansion may make of it, by the names of files present when it
    /// runs.
    pub glob: Glob,
}

/// What an unquoted `*`, `?` or `[` in a word may make of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Glob {
    /// None in it: the word is itself.
    #[default]
    None,
    /// Several words, or others, each starting as the word does (`./*.txt`).
    Names,
    /// Words starting with whatever a file's name starts with, `-` too: options
    /// (`[-]delete`, `*` beside a file named `-delete`).
    Options,
}

impl Word {
    pub fn literal(s: &str) -> Word {
        Word {
            lit: s.to_string(),
            ..Word::default()
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
    if word::too_deep() {
        acc.unread(format!(
            "arithmetic nested more than {} deep",
            word::MAX_ARITH
        ));
    }
    if word::spent() {
        acc.unread("its parentheses take too long to read (each `(` of a run looked ahead from)");
    }
    // Where dash reads the text otherwise than bash (`$'…'`, `$[…]`, a `'` inside a
    // double-quoted `${…}`), it is judged as dash reads it too: every script, at every
    // depth, since any of them may be handed to `/bin/sh`.
    if !word::dash() && read_otherwise_by_dash(src) {
        let mut dash = Acc {
            depth: acc.depth,
            ..Acc::default()
        };
        word::as_dash(|| walk(src, &mut dash));
        acc.absorb_new(dash, "as dash reads it: ");
    }
    acc.depth -= 1;
}

/// Whether dash may read the text otherwise than bash: `$'…'` and `$[…]` are plain text
/// to it, `&>` a `&` and a redirection, `coproc` and `function` commands, `((` two subshells, `$((` always arithmetic (to its first `))`), and a `'`
/// inside a double-quoted `${…}` plain.
fn read_otherwise_by_dash(src: &str) -> bool {
    src.contains("$'")
        || src.contains("$[")
        || src.contains("((")
        || src.contains("&>")
        || src.contains("coproc")
        || src.contains("function")
        || (src.contains("${") && src.contains('\''))
}

fn walk(src: &str, acc: &mut Acc) {
    if src.contains("\\\n") && lex::quoted_heredoc(src) {
        acc.unread(
            "a line continuation beside a here-document with a quoted delimiter, whose body keeps it: where the document ends is read apart",
        );
    }
    let src = lex::joined(src);
    let src = src.as_ref();
    // `script` says so once the budget is spent.
    if word::spend(src.len() as u64) {
        return;
    }
    let tokens = match lex::lex(src) {
        Ok(t) => t,
        // The shell runs every line before the one it cannot read: unread, not refused.
        Err(e) => {
            acc.unread(format!("not a complete shell command ({e})"));
            return;
        }
    };
    if let Some(why) = unbalanced(&tokens) {
        if acc.depth > 1 {
            // Inside a substitution: where it ends was found otherwise than the shell
            // finds it, and the shell may run what was taken for its end's tail.
            acc.unread(format!("a substitution's text read two ways ({why})"));
        }
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
        if word::spend(1 + shell.frames.len() as u64) {
            return;
        }
        match &tokens[i] {
            Token::Word(raw, _) => {
                let w = word::word(raw, acc);
                if shell.pattern != Pattern::No {
                    // A pattern's word (its substitutions were judged); `esac` where a
                    // pattern would start ends the `case`.
                    let ends = shell.pattern == Pattern::Start && !w.dynamic && w.lit == "esac";
                    shell.pattern = if ends { Pattern::No } else { Pattern::Inside };
                    if !ends {
                        i += 1;
                        continue;
                    }
                }
                if !w.dynamic && w.lit == "in" && cmd.opens_case(&shell) {
                    // `case WORD in`: the patterns come next.
                    cmd.words.push(w);
                    shell.pattern = Pattern::Start;
                    i += 1;
                    continue;
                }
                if raw.len() >= 4 && raw.starts_with("((") && raw.ends_with("))") && cmd.at_start()
                {
                    // An arithmetic command to bash, subshells to a shell without it:
                    // judged as those too, quoted as written.
                    script(&raw[1..raw.len() - 1], acc);
                    crate::rules::arithmetic_assigns(&raw[2..raw.len() - 2], acc);
                }
                if !w.dynamic && cmd.at_start() {
                    if let Some(close) = opener(&w.lit) {
                        let defines = shell.defining.take();
                        shell.open(close, place.from.is_some(), defines);
                    } else if let Some(close) = closer(&w.lit) {
                        // The command before it (`{ sh; }`: none) ends the group's last.
                        shell.close(close);
                    }
                }
                if w.lit == "{" && !w.dynamic && cmd.names_function(true) {
                    // `function f {`: the name is the definition; the body is the group.
                    let name = cmd.words.pop().expect("a name").lit;
                    cmd.words.clear();
                    acc.raise(Class::ReversibleLow, format!("defines function `{name}`"));
                    shell.functions.push(name.clone());
                    acc.compound = true;
                    shell.open("}", place.from.is_some(), Some(name));
                }
                if let Some(f) = shell.frames.last_mut()
                    && positional(raw)
                {
                    f.positional = true;
                }
                cmd.words.push(w);
                i += 1;
            }
            Token::Body(_) => i += 1, // read with its `<<`
            &Token::Op(op, at) => {
                if shell.pattern != Pattern::No {
                    match op {
                        "(" if shell.pattern == Pattern::Start => {
                            shell.pattern = Pattern::Inside;
                            i += 1;
                            continue;
                        }
                        "|" => {
                            shell.pattern = Pattern::Inside;
                            i += 1;
                            continue;
                        }
                        "\n" if shell.pattern == Pattern::Start => {
                            i += 1;
                            continue;
                        }
                        ")" => {
                            // The pattern's commands come next (`case WORD in` is flushed
                            // at its first).
                            flush(&mut cmd, std::mem::take(&mut place), &mut shell, acc);
                            shell.pattern = Pattern::No;
                            i += 1;
                            continue;
                        }
                        // bash's syntax error: read on as commands.
                        _ => shell.pattern = Pattern::No,
                    }
                }
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
                            // A process substitution: its commands are cut out like any
                            // others, in a group whose input (`>(…)`) or output (`<(…)`)
                            // is a pipe; the command it sits in goes on after it, with a
                            // path named at run time in its place.
                            acc.raise(Class::ReversibleLow, "process substitution");
                            acc.compound = true;
                            if runs_what_it_reads(&cmd.words) {
                                // `bash <(… | base64 -d)`: its script is printed at run time.
                                acc.unread("a script read from a process substitution");
                            }
                            shell.substitute(op == ">", &mut cmd, &mut place);
                            i += 1;
                            continue;
                        }
                        i = redirect(op, fd, &tokens, i, &mut cmd, acc);
                    }
                    "(" if cmd.names_function(false)
                        && matches!(tokens.get(i + 1), Some(Token::Op(")", _))) =>
                    {
                        // A function definition: `name ( )`, `function name ( )`.
                        let name = cmd.words.pop().expect("one word").lit;
                        cmd.words.clear();
                        acc.raise(Class::ReversibleLow, format!("defines function `{name}`"));
                        shell.functions.push(name.clone());
                        shell.defining = Some(name);
                        acc.compound = true;
                        i += 2;
                    }
                    ")" if shell.closes_subshell() => {
                        flush(&mut cmd, std::mem::take(&mut place), &mut shell, acc);
                        if let Some(resume) = shell.close(")") {
                            // The end of a process substitution: back in its command.
                            let Resume {
                                cmd: outer,
                                place: at,
                                word,
                                ..
                            } = *resume;
                            cmd = outer;
                            place = at;
                            if word {
                                cmd.words.push(Word {
                                    lit: "/dev/fd/63".into(),
                                    dynamic: true,
                                    ..Word::default()
                                });
                            }
                            cmd.substituted = false;
                        }
                        acc.raise(Class::ReversibleLow, "subshell");
                        acc.compound = true;
                        i += 1;
                    }
                    _ => {
                        let piped = matches!(op, "|" | "|&");
                        let mut here = std::mem::take(&mut place);
                        here.piped |= piped;
                        // `… | ( … )`: the subshell reads the pipe.
                        let fed = here.from.is_some();
                        let name = flush(&mut cmd, here, &mut shell, acc);
                        if matches!(op, ";;" | ";&" | ";;&")
                            && shell.frames.last().is_some_and(|f| f.close == "esac")
                        {
                            shell.pattern = Pattern::Start;
                        }
                        place = Place {
                            piped,
                            from: name.filter(|_| piped),
                        };
                        if piped && place.from.is_none() {
                            // A group's output (`} |`): piped all the same.
                            place.from = Some(String::new());
                        }
                        if op == "(" {
                            let defines = shell.defining.take();
                            shell.open(")", fed, defines);
                        }
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
    /// Its last redirection's target is a process substitution (`< <(…)`).
    substituted: bool,
}

impl Command {
    /// Whether a word here starts the command (only reserved words before it: `! {`,
    /// `then if`, `do (`).
    fn at_start(&self) -> bool {
        self.words
            .iter()
            .all(|w| !w.dynamic && rules::RESERVED.contains(&w.lit.as_str()))
    }

    /// Whether the words so far are `case WORD` (after reserved words) and opened the
    /// innermost compound command: an `in` now starts its patterns.
    fn opens_case(&self, shell: &Shell) -> bool {
        let n = self.words.len();
        n >= 2
            && self.words[n - 2].lit == "case"
            && !self.words[n - 2].dynamic
            && self.words[..n - 2]
                .iter()
                .all(|w| !w.dynamic && rules::RESERVED.contains(&w.lit.as_str()))
            && shell.frames.last().is_some_and(|f| f.close == "esac")
    }

    /// Whether the words so far name a function about to be defined: `name` (with
    /// `keyword`, only `function name`), after reserved words.
    fn names_function(&self, keyword: bool) -> bool {
        let mut rest = self
            .words
            .iter()
            .skip_while(|w| !w.dynamic && rules::RESERVED.contains(&w.lit.as_str()));
        match (rest.next(), rest.next(), rest.next()) {
            (Some(n), None, None) => !keyword && !n.dynamic,
            (Some(f), Some(n), None) => !f.dynamic && f.lit == "function" && !n.dynamic,
            _ => false,
        }
    }
}

/// A compound command being read: a group, a subshell, a loop, an `if` or `case`, a
/// function's body, or a process substitution.
#[derive(Default)]
struct Frame {
    /// The word (or `)`) that ends it.
    close: &'static str,
    /// Its input is a pipe (`… | { …; }`, `>(…)`): every command in it reads that pipe.
    piped: bool,
    /// Among its commands, a code reader taking its program from the group's input:
    /// `Some(true)` a shell — what a redirection of the group (`} < s`) feeds.
    reader: Option<bool>,
    /// Among its words, a positional parameter (`$@`, `$1`): a function's body that runs
    /// what it is given.
    positional: bool,
    /// The function it is the body of.
    function: Option<String>,
    /// The commands run in it, by name.
    calls: Vec<String>,
    /// For a process substitution: where the reading goes on after it.
    resume: Option<Box<Resume>>,
}

/// The command a process substitution sits in.
struct Resume {
    cmd: Command,
    place: Place,
    /// It stands there as a word (`diff <(…) f`), not as a redirection's target.
    word: bool,
    /// The frame closed before it (`{ sh; } < <(…)`).
    closed: Option<Frame>,
}

/// A function the script defined, as its body showed it.
struct Function {
    name: String,
    reader: Option<bool>,
    positional: bool,
    /// The commands its body runs, by name (a function among them adds its readers).
    calls: Vec<String>,
}

/// What the script has shown so far of the shell running it.
#[derive(Default)]
struct Shell {
    /// The compound commands open where the reading is.
    frames: Vec<Frame>,
    /// The one that just closed: what a redirection written after it feeds.
    closed: Option<Frame>,
    /// The functions it defined (by name, for the rules).
    functions: Vec<String>,
    /// …and what their bodies do with their input and their arguments.
    bodies: Vec<Function>,
    /// A function whose body is the next group.
    defining: Option<String>,
    /// A reading `command_not_found_handle` was said.
    handler_said: bool,
    /// Where a `case`'s patterns are being read: their words are no command.
    pattern: Pattern,
    /// The aliases it defined, by name.
    aliases: Vec<String>,
}

/// Where the reading is in a `case`'s pattern list.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    /// Not in one.
    #[default]
    No,
    /// Where one starts (after `in`, `;;`, `;&`, `;;&`): a `(` opens it, `esac` ends the
    /// `case`.
    Start,
    /// Inside one: its `)` ends it.
    Inside,
}

impl Shell {
    fn open(&mut self, close: &'static str, piped: bool, function: Option<String>) {
        self.frames.push(Frame {
            close,
            piped,
            function,
            ..Frame::default()
        });
    }

    /// A process substitution opens: the command around it is kept for its end.
    fn substitute(&mut self, input: bool, cmd: &mut Command, place: &mut Place) {
        let cmd = std::mem::take(cmd);
        let word = !cmd.substituted;
        let closed = self.closed.take();
        self.frames.push(Frame {
            close: ")",
            piped: input,
            resume: Some(Box::new(Resume {
                cmd,
                place: std::mem::take(place),
                word,
                closed,
            })),
            ..Frame::default()
        });
    }

    /// Whether a `)` here ends a subshell (or a process substitution), not a `case`
    /// pattern.
    fn closes_subshell(&self) -> bool {
        self.frames
            .iter()
            .rev()
            .find(|f| matches!(f.close, ")" | "esac"))
            .is_some_and(|f| f.close == ")")
    }

    /// Ends the innermost frame `close` ends (and any left open inside it); returns a
    /// process substitution's outer command to go on with.
    fn close(&mut self, close: &'static str) -> Option<Box<Resume>> {
        let at = self.frames.iter().rposition(|f| f.close == close)?;
        let mut frame = self.frames.split_off(at).into_iter().next()?;
        if let Some(parent) = self.frames.last_mut() {
            parent.reader = parent.reader.max(frame.reader);
            parent.positional |= frame.positional;
            parent.calls.extend(frame.calls.iter().cloned());
        }
        if let Some(name) = frame.function.take() {
            self.bodies.push(Function {
                name,
                reader: frame.reader,
                positional: frame.positional,
                calls: std::mem::take(&mut frame.calls),
            });
        }
        match frame.resume.take() {
            Some(mut resume) => {
                self.closed = resume.closed.take();
                Some(resume)
            }
            None => {
                self.closed = Some(frame);
                None
            }
        }
    }

    fn body(&self, name: &str) -> Option<&Function> {
        self.bodies.iter().rev().find(|f| f.name == name)
    }

    /// What function `name` reads its program from its input with, through the functions
    /// it calls (defined before or after it).
    fn reader_of(&self, name: &str, seen: &mut Vec<String>) -> Option<bool> {
        if seen.iter().any(|s| s == name) {
            return None;
        }
        seen.push(name.to_string());
        let body = self.body(name)?;
        let calls = body.calls.clone();
        let mut reader = body.reader;
        for c in calls {
            reader = reader.max(self.reader_of(&c, seen));
        }
        reader
    }
}

/// The word that closes the compound command `word` opens, if it opens one.
fn opener(word: &str) -> Option<&'static str> {
    Some(match word {
        "{" => "}",
        "if" => "fi",
        "while" | "until" | "for" | "select" => "done",
        "case" => "esac",
        _ => return None,
    })
}

fn closer(word: &str) -> Option<&'static str> {
    Some(match word {
        "}" => "}",
        "fi" => "fi",
        "done" => "done",
        "esac" => "esac",
        _ => return None,
    })
}

/// Whether a word refers to the positional parameters (`$@`, `$*`, `$1`, `${2}`).
fn positional(lit: &str) -> bool {
    let b = lit.as_bytes();
    b.windows(2).enumerate().any(|(i, w)| {
        w[0] == b'$'
            && (matches!(w[1], b'@' | b'*' | b'1'..=b'9')
                || (w[1] == b'{' && matches!(b.get(i + 2), Some(b'@' | b'*' | b'0'..=b'9'))))
    })
}

/// What a descriptor reads from, as far as the script shows.
#[derive(Debug, Clone)]
pub(crate) enum Source {
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

/// What descriptor `n` reads from in `fds`.
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
    for (n, to) in redirs {
        let to = match to {
            Source::Copy(m) => fd(&out, m),
            other => other,
        };
        out.retain(|(f, _)| *f != n);
        out.push((n, to));
    }
    out
}

/// Whether the simple command in `words` is a shell, an interpreter or `source`, maybe
/// behind a wrapper (`sudo bash`): a file operand it is given is its program.
pub(crate) fn runs_what_it_reads(words: &[Word]) -> bool {
    reads_program(words).is_some()
}

/// The kind of code reader the simple command in `words` is, maybe behind a wrapper
/// (`sudo bash`): `Some(true)` a shell, `Some(false)` another interpreter.
fn reads_program(words: &[Word]) -> Option<bool> {
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
    // Where a command starts: `case` and `esac` are words anywhere else (`echo case`).
    let mut at_start = true;
    for t in tokens {
        let starts = at_start;
        at_start = match t {
            Token::Op(op, _) => !matches!(
                *op,
                "<" | ">" | ">>" | ">|" | "<>" | "&>" | "&>>" | ">&" | "<&" | "<<" | "<<-" | "<<<"
            ),
            Token::Word(w, _) => rules::RESERVED.contains(w) && *w != "esac",
            Token::Body(_) => at_start,
        };
        match t {
            Token::Word("case", _) if starts => cases += 1,
            Token::Word("esac", _) if starts && cases > 0 => cases -= 1,
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
    cmd: &mut Command,
    acc: &mut Acc,
) -> usize {
    acc.compound = true;
    let redirs = &mut cmd.redirs;
    let target = match tokens.get(i) {
        Some(Token::Word(w, _)) => *w,
        // `< <(…)`, `> >(…)`: a pipe from or to the commands inside, read next.
        Some(Token::Op("<" | ">", _)) if matches!(tokens.get(i + 1), Some(Token::Op("(", _))) => {
            let input = op.starts_with('<');
            redirs.push((fd.unwrap_or(if input { 0 } else { 1 }), Source::Unknown));
            cmd.substituted = true;
            return i;
        }
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
                if rules::subscript_command(body) {
                    acc.pieced();
                }
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
            if rules::subscript_command(&w.lit) {
                // `read x <<< 'a[$(…)]'`: arithmetic on it runs the command.
                acc.pieced();
            }
            redirs.push((input, Source::Text(w.lit, w.dynamic, "here-string")));
            acc.raise(Class::ReversibleLow, "here-string");
        }
        "<" => {
            let w = word::word(target, acc);
            let acts = crate::rules::acting_read(&w.lit).or_else(|| {
                (w.glob != Glob::None)
                    .then(|| crate::rules::pattern_acts(&w.lit))
                    .flatten()
            });
            if let Some(what) = acts.filter(|_| !w.dynamic) {
                acc.raise(Class::ConfigMutation, format!("reads `{}`: {what}", w.lit));
            }
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
            if w.lit.starts_with("/dev/tcp/") || w.lit.starts_with("/dev/udp/") {
                acc.unread("a shell or interpreter reads its program from the network");
            }
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
fn flush(cmd: &mut Command, mut place: Place, shell: &mut Shell, acc: &mut Acc) -> Option<String> {
    let words = std::mem::take(&mut cmd.words);
    let redirs = std::mem::take(&mut cmd.redirs);
    cmd.substituted = false;
    let closed = shell.closed.take();
    // Inside a group whose input is a pipe, every command reads that pipe.
    let piped = place.from.is_some() || shell.frames.iter().any(|f| f.piped);
    if piped && place.from.is_none() {
        place.piped = true;
        place.from = Some(String::new());
    }
    // The command's name: after reserved words (`if`, `!`, `{`) and assignments.
    if let Some(first) = words.iter().find(|w| {
        w.dynamic || !(rules::RESERVED.contains(&w.lit.as_str()) || rules::is_assignment(&w.lit))
    }) && !first.dynamic
        && shell.aliases.contains(&first.lit)
    {
        // A shell that expands aliases here (dash, bash --posix) runs its body with these
        // words after it (`alias echo=env` makes `echo rm …` run rm).
        acc.unread(format!(
            "`{}` is an alias the command defined: what it runs is its body with these words",
            first.lit
        ));
    }
    let name = if words.is_empty() {
        None
    } else {
        if acc.depth == 1 {
            acc.top.push(words.clone());
        }
        rules::simple(&words, &place, &shell.functions, acc)
    };
    // `alias cat=sh` (`command alias`, `builtin alias`): a later `cat` reads its input as
    // `sh` would.
    if let Some(at) = words
        .iter()
        .take(3)
        .position(|w| !w.dynamic && w.lit == "alias")
    {
        for w in &words[at + 1..] {
            if let Some((alias, _)) = w.lit.split_once('=') {
                shell.aliases.push(alias.to_string());
            }
            if let Some((alias, body)) = w.lit.split_once('=')
                && reads_input(body)
            {
                shell.functions.push(alias.to_string());
                shell.bodies.push(Function {
                    name: alias.to_string(),
                    reader: Some(true),
                    positional: false,
                    calls: Vec::new(),
                });
            }
        }
    }
    if let (Some(f), Some(n)) = (shell.frames.last_mut(), name.as_ref()) {
        // A function's body that calls another (defined before or after).
        f.calls.push(n.clone());
    }
    if !shell.handler_said
        && shell
            .body("command_not_found_handle")
            .is_some_and(|b| b.reader.is_some())
    {
        // Every command not found runs it, a reader of its input.
        shell.handler_said = true;
        acc.unread("`command_not_found_handle` runs a shell or interpreter on its input for any command not found");
    }
    let reserved = |w: &Word| !w.dynamic && rules::RESERVED.contains(&w.lit.as_str());
    // What reads its program from its input here: a group's redirection (`} < s`,
    // `) < s`, `done < s`) feeds the readers inside it; a function's call, those of its
    // body; any other command, itself.
    let reader = if words.iter().all(reserved) {
        closed.and_then(|f| f.reader)
    } else if let Some(body) = name.as_deref().and_then(|n| shell.body(n)) {
        if body.positional && words.len() > 1 {
            acc.unread(format!(
                "calls function `{}` with arguments, which its body runs as given (judged only there)",
                body.name
            ));
        }
        shell.reader_of(&body.name.clone(), &mut Vec::new())
    } else {
        from_input(&words)
    };
    let unreserved = words
        .iter()
        .position(|w| w.dynamic || !rules::RESERVED.contains(&w.lit.as_str()))
        .unwrap_or(words.len());
    if words
        .get(unreserved)
        .is_some_and(|w| !w.dynamic && w.lit == "coproc")
    {
        let rest = &words[unreserved + 1..];
        let rest = match rest {
            [n, g, ..] if matches!(g.lit.as_str(), "{" | "(") && !n.dynamic => &rest[1..],
            _ => rest,
        };
        if from_input(rest).is_some()
            || rest
                .first()
                .is_some_and(|w| matches!(w.lit.as_str(), "{" | "("))
        {
            // It reads what the script sends it (`>&${COPROC[1]}`).
            acc.unread("`coproc` runs a reader of what the script sends it");
        }
    }
    if is_exec(&words) {
        // `exec < s`, `exec 3< s`: the shell's own descriptors, for every command after
        // (in `eval`'s script too).
        acc.fds = redirected(&acc.fds, redirs);
        return name;
    }
    let Some(kind) = reader else { return name };
    match fd(&redirected(&acc.fds, redirs), 0) {
        Source::Given => {
            if piped {
                acc.unread(
                    "a shell or interpreter reads its program from a pipe: code another command prints",
                );
            }
            if let Some(f) = shell.frames.last_mut() {
                f.reader = f.reader.max(Some(kind));
            }
        }
        input => feed(input, kind, acc),
    }
    name
}

/// Whether `words` are `exec` with no command: it redirects the shell's own descriptors.
fn is_exec(words: &[Word]) -> bool {
    let mut rest = words.iter().skip_while(|w| {
        !w.dynamic
            && (rules::RESERVED.contains(&w.lit.as_str())
                || w.lit == "command"
                || w.lit == "builtin")
    });
    rest.next().is_some_and(|w| !w.dynamic && w.lit == "exec")
        && rest.all(|w| !w.dynamic && w.lit.starts_with('-'))
}

/// Programs that run the command in their arguments (`sudo sh`, `flock f sh`).
const WRAPPERS: &[&str] = &[
    "sudo",
    "doas",
    "env",
    "exec",
    "command",
    "builtin",
    "nice",
    "nohup",
    "timeout",
    "time",
    "setsid",
    "stdbuf",
    "ionice",
    "chrt",
    "taskset",
    "busybox",
    "toybox",
    "flock",
    "chroot",
    "runuser",
    "setarch",
    "linux32",
    "linux64",
    "eatmydata",
    "fakeroot",
    "unbuffer",
    "prlimit",
    "strace",
    "ltrace",
    "pkexec",
    "nsenter",
    "unshare",
    "setpriv",
    "sg",
    "firejail",
    "bwrap",
    "systemd-run",
    "ssh-agent",
    "dbus-run-session",
    "xvfb-run",
    "watch",
    "screen",
];

/// Whether the simple command in `words` takes its program from its standard input, and
/// what reads it: `Some(true)` a shell (`sh`, `bash -s`, `. /dev/stdin`, `su`, `sudo -s`,
/// `script`, `at`), `Some(false)` another interpreter (`python3`, `perl -`) — maybe behind
/// a wrapper.
fn from_input(words: &[Word]) -> Option<bool> {
    let words: Vec<&Word> = words
        .iter()
        .skip_while(|w| {
            !w.dynamic
                && (rules::RESERVED.contains(&w.lit.as_str()) || rules::is_assignment(&w.lit))
        })
        .collect();
    let (first, args) = words.split_first()?;
    if first.dynamic {
        return None;
    }
    let name = first.lit.rsplit('/').next().unwrap_or(&first.lit);
    let has = |flags: &[&str]| {
        args.iter().any(|a| {
            flags
                .iter()
                .any(|f| a.lit == *f || a.lit.starts_with(&format!("{f}=")))
        })
    };
    let owned: Vec<Word> = args.iter().map(|w| (*w).clone()).collect();
    let wrapped = || {
        let at = args.iter().position(|w| {
            !w.dynamic && {
                let n = w.lit.rsplit('/').next().unwrap_or(&w.lit);
                rules::code_reader(n).is_some() || matches!(n, "su" | "script" | "at" | "batch")
            }
        })?;
        from_input(&owned[at..])
    };
    match name {
        "." | "source" => args.first().filter(|w| is_stdin_path(&w.lit)).map(|_| true),
        // `sh -c sh`: the script it is given reads the input.
        n if rules::code_reader(n) == Some(true) && has(&["-c"]) => {
            let at = args.iter().position(|a| a.lit == "-c")?;
            let script = args.get(at + 1)?;
            reads_input(&script.lit).then_some(true)
        }
        // `find … -exec sh \;`: each command it runs inherits its input.
        "find" => {
            let at = args
                .iter()
                .position(|a| matches!(a.lit.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))?;
            let end = owned[at + 1..]
                .iter()
                .position(|w| matches!(w.lit.as_str(), ";" | "+"))
                .map_or(owned.len(), |e| at + 1 + e);
            from_input(&owned[at + 1..end])
        }
        "socat" => args
            .iter()
            .any(|a| {
                a.lit.to_ascii_uppercase().contains("EXEC:")
                    || a.lit.to_ascii_uppercase().contains("SYSTEM:")
            })
            .then_some(true),
        // With no command, the remote shell (this host's, for `localhost`) reads it.
        "ssh" => (args.iter().filter(|a| !a.lit.starts_with('-')).count() <= 1).then_some(true),
        "machinectl" => args
            .iter()
            .any(|a| matches!(a.lit.as_str(), "shell" | "login"))
            .then_some(true),
        // m4 runs `syscmd` and `esyscmd` from what it reads.
        "m4" => args.iter().all(|a| a.lit.starts_with('-')).then_some(true),
        "su" => (!has(&["-c", "--command", "--session-command"])).then_some(true),
        "runuser" if has(&["-u", "--user"]) => wrapped(),
        "runuser" => (!has(&["-c", "--command", "--session-command"])).then_some(true),
        "sudo" | "doas" if has(&["-s", "--shell", "-i", "--login"]) => {
            // A shell, reading its input unless a command follows its options.
            let rest = args.iter().filter(|a| !a.lit.starts_with('-')).count();
            if rest == 0 { Some(true) } else { wrapped() }
        }
        "script" => (!args.iter().any(|a| {
            a.lit == "--command"
                || a.lit.starts_with("--command=")
                || (a.lit.starts_with('-') && !a.lit.starts_with("--") && a.lit.contains('c'))
        }))
        .then_some(true),
        "at" | "batch" => (!has(&["-f"])).then_some(true),
        n if let Some(kind) = rules::code_reader(n) => {
            rules::reads_script_from_input(&owned, kind).then_some(kind)
        }
        n if WRAPPERS.contains(&n)
            || matches!(
                n,
                "valgrind"
                    | "ifne"
                    | "chpst"
                    | "chronic"
                    | "numactl"
                    | "cgexec"
                    | "runcon"
                    | "faketime"
            )
            || n.starts_with("ld-linux")
            || n.starts_with("ld-musl")
            || n == "ld.so" =>
        {
            wrapped()
        }
        // Each of its arguments is a shell command given its input.
        "pee" => args.iter().any(|a| reads_input(&a.lit)).then_some(true),
        _ => None,
    }
}

/// Whether a script (a `trap`'s, an alias's, `sh -c`'s) has a command reading its program
/// from its input.
pub(crate) fn reads_input(script: &str) -> bool {
    let Ok(tokens) = lex::lex(script) else {
        return true;
    };
    let mut words: Vec<Word> = Vec::new();
    let mut found = false;
    let mut check = |words: &mut Vec<Word>| {
        found |= from_input(words).is_some();
        words.clear();
    };
    for t in &tokens {
        match t {
            Token::Word(w, _) => words.push(Word::literal(w)),
            Token::Op(_, _) => check(&mut words),
            Token::Body(_) => {}
        }
    }
    check(&mut words);
    found
}
