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
    let mut words: Vec<Word> = Vec::new();
    let mut place = Place::default();
    let mut functions: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Word(w, _) => {
                words.push(word::word(w, acc));
                i += 1;
            }
            Token::Body(_) => i += 1, // read with its `<<`
            &Token::Op(op, at) => {
                match op {
                    "<" | ">" | ">>" | ">|" | "<>" | "&>" | "&>>" | ">&" | "<&" | "<<" | "<<-"
                    | "<<<" => {
                        // An fd number written against the operator belongs to it.
                        if let (Some(prev), Some(Token::Word(pw, pat))) =
                            (words.last(), i.checked_sub(1).map(|p| &tokens[p]))
                            && pat + pw.len() == at
                            && !pw.is_empty()
                            && pw.bytes().all(|b| b.is_ascii_digit())
                            && prev.lit == *pw
                        {
                            words.pop();
                        }
                        i += 1;
                        if (op == "<" || op == ">")
                            && let Some(Token::Op("(", _)) = tokens.get(i)
                        {
                            {
                                acc.raise(Class::ReversibleLow, "process substitution");
                                if runs_what_it_reads(&words) {
                                    // `bash <(… | base64 -d)`: its script is printed at run time.
                                    acc.unread("a script read from a process substitution");
                                }
                                acc.compound = true;
                                // The commands inside are cut out like any others.
                                flush(&mut words, std::mem::take(&mut place), &functions, acc);
                                continue;
                            }
                        }
                        i = redirect(op, &tokens, i, reads_program(&words), acc);
                    }
                    _ => {
                        // A function definition: `name ( )`.
                        if op == "("
                            && let Some(Token::Op(")", _)) = tokens.get(i + 1)
                            && !words.is_empty()
                            && words[..words.len() - 1]
                                .iter()
                                .all(|w| !w.dynamic && rules::RESERVED.contains(&w.lit.as_str()))
                        {
                            let name = words.pop().expect("one word").lit;
                            acc.raise(Class::ReversibleLow, format!("defines function `{name}`"));
                            functions.push(name);
                            acc.compound = true;
                            i += 2;
                            continue;
                        }
                        let piped = matches!(op, "|" | "|&");
                        let mut here = std::mem::take(&mut place);
                        here.piped |= piped;
                        let name = flush(&mut words, here, &functions, acc);
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
    flush(&mut words, place, &functions, acc);
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

/// Whether `path` names the standard input (what another command writes into it).
pub(crate) fn is_stdin_path(path: &str) -> bool {
    matches!(path, "-" | "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0")
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

/// Handles a redirection whose target starts at `tokens[i]`; returns the next index.
fn redirect(
    op: &str,
    tokens: &[Token],
    mut i: usize,
    reader: Option<bool>,
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
    match op {
        "<<" | "<<-" => {
            // The delimiter, then the body.
            let quoted = target.contains(['\'', '"', '\\']);
            if let Some(Token::Body(body)) = tokens.get(i) {
                rules::sql_text(body, acc);
                if !quoted {
                    word::heredoc(body, acc);
                }
                // Given to a shell, the body is its script: judged, unless expansions
                // build it at run time; to another interpreter, code not read.
                match reader {
                    Some(true) if quoted || !body.contains(['$', '`']) => script(body, acc),
                    Some(true) => {
                        acc.unread("a shell's script in a here-document built by expansions")
                    }
                    Some(false) => acc.unread(
                        "an interpreter's program in a here-document, in a language not read",
                    ),
                    None => {}
                }
                i += 1;
            }
            acc.raise(Class::ReversibleLow, "here-document");
        }
        "<<<" => {
            let w = word::word(target, acc);
            rules::sql_text(&w.lit, acc);
            match reader {
                Some(true) if !w.dynamic => script(&w.lit, acc),
                Some(true) => acc.unread("a shell's script in a here-string built at run time"),
                Some(false) => {
                    acc.unread("an interpreter's program in a here-string, in a language not read")
                }
                None => {}
            }
            acc.raise(Class::ReversibleLow, "here-string");
        }
        "<" => {
            let w = word::word(target, acc);
            if reader.is_some() && (w.dynamic || is_stdin_path(&w.lit)) {
                acc.unread(
                    "a shell or interpreter reads its program from a file named at run time",
                );
            }
            if reader.is_some() {
                // `sh < f`: f is the program (paired with what the command writes).
                acc.runs_file(&w.lit);
            }
            acc.raise(Class::ReversibleLow, "input redirection");
        }
        ">&" | "<&" if target == "-" || target.bytes().all(|b| b.is_ascii_digit()) => {
            acc.raise(Class::ReversibleLow, "file descriptor redirection");
        }
        _ => {
            let w = word::word(target, acc);
            rules::write_target(&w, acc);
        }
    }
    i
}

/// Classifies the simple command in `words` (if any) and clears it; returns the name of
/// the command it runs.
fn flush(
    words: &mut Vec<Word>,
    place: Place,
    functions: &[String],
    acc: &mut Acc,
) -> Option<String> {
    if words.is_empty() {
        return None;
    }
    let ws = std::mem::take(words);
    if acc.depth == 1 {
        acc.top.push(ws.clone());
    }
    rules::simple(&ws, &place, functions, acc)
}
