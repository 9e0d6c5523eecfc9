//! A command string as the shell will see it: tokens and words from brush-parser (a bash
//! tokenizer and parser), cut into simple commands at every control operator, with each
//! word's literal text, whether it depends on an expansion, and the commands nested in it
//! (`$(…)`, backticks, here-documents) classified in turn.

use brush_parser::word::WordPiece;
use brush_parser::{ParserOptions, Token};

use super::{Acc, Class, rules};

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

/// Deepest nesting of parentheses given to the parser (its time doubles with each level
/// left open: 12 levels take about 0.1 ms, 30 would take seconds).
const MAX_NESTING: i32 = 12;

/// Deepest nesting of parentheses and braces in a word or here-document given to the word
/// parser: it backtracks exponentially on unclosed `$(` nests (`$(;(` four deep takes
/// 0.2 ms, five deep 6 ms, ten deep seconds).
const MAX_WORD_NESTING: i32 = 6;
/// Most `[` in a word given to the word parser (`${a[`, `$[`, `a[i]=`: three unclosed take
/// about 5 ms).
const MAX_SUBSCRIPTS: usize = 3;
/// Longest word or here-document body given to the word parser.
const MAX_WORD_LEN: usize = 16 * 1024;

/// Classifies a shell script into `acc`.
pub fn script(src: &str, acc: &mut Acc) {
    if acc.depth > super::MAX_DEPTH {
        acc.raise(Class::ConfigMutation, "commands nested too deep to inspect");
        return;
    }
    acc.depth += 1;
    walk(src, acc);
    acc.depth -= 1;
}

fn walk(src: &str, acc: &mut Acc) {
    if let Some(d) = odd_heredoc_delimiter(src) {
        // brush-parser 0.4's tokenizer can loop without end on unusual delimiters (the
        // fuzzer found empty and part-quoted ones).
        acc.raise(
            Class::ConfigMutation,
            format!("a here-document delimiter that is not a plain word ({d:?}): not parsed"),
        );
        return;
    }
    let options = ParserOptions::default();
    // brush-parser panics on some malformed input (the fuzzer found several): a panic in
    // it is a verdict of its own, never a crash of the caller.
    let tokens =
        std::panic::catch_unwind(|| brush_parser::uncached_tokenize_str(src, &Default::default()));
    let tokens = match tokens {
        Ok(Ok(t)) => t,
        Err(_) => {
            acc.raise(
                Class::ConfigMutation,
                "not a valid shell command (the tokenizer failed on it)",
            );
            return;
        }
        Ok(Err(e)) => {
            acc.raise(
                Class::ConfigMutation,
                format!("not a complete shell command ({e})"),
            );
            return;
        }
    };
    // Still look inside an invalid command: whatever the shell would run of it is judged
    // below.
    let nesting = tokens
        .iter()
        .scan(0i32, |depth, t| {
            match t {
                Token::Operator(o, _) if o == "(" => *depth += 1,
                Token::Operator(o, _) if o == ")" => *depth -= 1,
                _ => {}
            }
            Some(*depth)
        })
        .max()
        .unwrap_or(0);
    if nesting > MAX_NESTING {
        // The parser backtracks exponentially on deep unclosed nesting.
        acc.raise(
            Class::ConfigMutation,
            format!("subshells nested {nesting} deep: not parsed"),
        );
    } else if let Some(why) = tokens.iter().find_map(|t| match t {
        // The program parser reads words with the same backtracking grammar.
        Token::Word(w, _) => too_complex(w, true),
        Token::Operator(..) => None,
    }) {
        acc.raise(
            Class::ConfigMutation,
            format!("a word too complex to parse ({why}): not parsed"),
        );
    } else if let Some(why) = fd_out_of_range(&tokens) {
        // brush-parser 0.4 panics on these; bash refuses them.
        acc.raise(
            Class::ConfigMutation,
            format!("not a valid shell command ({why})"),
        );
    } else {
        // A panic in the parser is a verdict of its own, not a crash of the caller.
        match std::panic::catch_unwind(|| brush_parser::parse_tokens(&tokens, &options)) {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => acc.raise(
                Class::ConfigMutation,
                format!("not a valid shell command ({e})"),
            ),
            Err(_) => acc.raise(
                Class::ConfigMutation,
                "not a valid shell command (the parser failed on it)",
            ),
        }
    }
    let mut words: Vec<Word> = Vec::new();
    let mut place = Place::default();
    let mut functions: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Word(w, _) => {
                words.push(word(w, acc));
                i += 1;
            }
            Token::Operator(op, loc) => {
                let op = op.as_str();
                match op {
                    "<" | ">" | ">>" | ">|" | "<>" | "&>" | "&>>" | ">&" | "<&" | "<<" | "<<-"
                    | "<<<" => {
                        // An fd number written against the operator belongs to it.
                        if let (Some(prev), Some(Token::Word(pw, ploc))) =
                            (words.last(), i.checked_sub(1).map(|p| &tokens[p]))
                            && ploc.end.index == loc.start.index
                            && !pw.is_empty()
                            && pw.bytes().all(|b| b.is_ascii_digit())
                            && prev.lit == *pw
                        {
                            words.pop();
                        }
                        i += 1;
                        if (op == "<" || op == ">")
                            && let Some(Token::Operator(p, _)) = tokens.get(i)
                            && p == "("
                        {
                            {
                                acc.raise(Class::ReversibleLow, "process substitution");
                                acc.compound = true;
                                // The commands inside are cut out like any others.
                                flush(&mut words, std::mem::take(&mut place), &functions, acc);
                                continue;
                            }
                        }
                        i = redirect(op, &tokens, i, acc);
                    }
                    _ => {
                        // A function definition: `name ( )`.
                        if op == "("
                            && let Some(Token::Operator(close, _)) = tokens.get(i + 1)
                            && close == ")"
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

/// The first here-document delimiter that is not a plain word (`EOF`, `'EOF'`, `"EOF"`,
/// `\EOF`; letters, digits, `_`, `.`, `-`). Also inside quotes: this may only over-refuse.
fn odd_heredoc_delimiter(src: &str) -> Option<String> {
    let plain = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    };
    // Operators as the tokenizer takes them, longest first: `<<<` is a here-string.
    let mut at = 0;
    let mut starts = Vec::new();
    while let Some(i) = src[at..].find("<<").map(|i| at + i) {
        if src[i..].starts_with("<<<") {
            at = i + 3;
        } else {
            starts.push(i);
            at = i + 2;
        }
    }
    starts.into_iter().find_map(|i| {
        let rest = &src[i + 2..];
        let rest = rest.strip_prefix('-').unwrap_or(rest);
        let rest = rest.trim_start_matches([' ', '\t']);
        // The shell's blanks only: a form feed is part of the word.
        let word: String = rest
            .chars()
            .take_while(|c| !" \t\n;|&<>()".contains(*c))
            .collect();
        let bare = match word.chars().next() {
            Some(q @ ('\'' | '"')) => word
                .strip_prefix(q)
                .and_then(|w| w.strip_suffix(q))
                .unwrap_or(""),
            Some('\\') => &word[1..],
            _ => &word,
        };
        (!plain(bare)).then_some(word)
    })
}

/// A file descriptor number before a redirection that does not fit the parser's `i32`.
fn fd_out_of_range(tokens: &[Token]) -> Option<String> {
    tokens.windows(2).find_map(|w| match w {
        [Token::Word(n, nl), Token::Operator(_, ol)]
            if nl.end.index == ol.start.index
                && !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
                && n.parse::<i32>().is_err() =>
        {
            Some(format!("file descriptor {n} out of range"))
        }
        _ => None,
    })
}

/// Handles a redirection whose target starts at `tokens[i]`; returns the next index.
fn redirect(op: &str, tokens: &[Token], mut i: usize, acc: &mut Acc) -> usize {
    acc.compound = true;
    let target = match tokens.get(i) {
        Some(Token::Word(w, _)) => w.clone(),
        _ => return i, // the parser has already said what is wrong
    };
    i += 1;
    match op {
        "<<" | "<<-" => {
            // Delimiter, then the body, then the closing delimiter.
            let quoted = target.contains(['\'', '"', '\\']);
            if let Some(Token::Word(body, _)) = tokens.get(i) {
                rules::sql_text(body, acc);
                if let (false, Some(why)) = (quoted, too_complex(body, false)) {
                    acc.raise(
                        Class::ConfigMutation,
                        format!("a here-document too complex to parse ({why})"),
                    );
                    nested(body, acc);
                } else if !quoted {
                    let parsed = std::panic::catch_unwind(|| {
                        brush_parser::word::parse_heredoc(body, &ParserOptions::default())
                    });
                    match parsed.map(Result::ok) {
                        Ok(Some(pieces)) => {
                            let mut lit = String::new();
                            let mut hidden = false;
                            for p in pieces {
                                hidden |= piece(&p.piece, &mut lit, acc).hidden;
                            }
                            if hidden {
                                nested(body, acc);
                            }
                        }
                        _ => {
                            acc.raise(Class::ConfigMutation, "a here-document that does not parse")
                        }
                    }
                }
                i += 1;
            }
            if let Some(Token::Word(_, _)) = tokens.get(i) {
                i += 1;
            }
            acc.raise(Class::ReversibleLow, "here-document");
        }
        "<<<" => {
            let w = word(&target, acc);
            rules::sql_text(&w.lit, acc);
            acc.raise(Class::ReversibleLow, "here-string");
        }
        "<" => {
            word(&target, acc);
            acc.raise(Class::ReversibleLow, "input redirection");
        }
        ">&" | "<&" if target == "-" || target.bytes().all(|b| b.is_ascii_digit()) => {
            acc.raise(Class::ReversibleLow, "file descriptor redirection");
        }
        _ => {
            let w = word(&target, acc);
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
    rules::simple(&ws, &place, functions, acc)
}

/// Parses a word: its literal text, whether it is dynamic, and the commands inside it.
pub fn word(raw: &str, acc: &mut Acc) -> Word {
    let mut lit = String::with_capacity(raw.len());
    let parsed = if tilde_out_of_range(raw) {
        None // brush-parser 0.4 panics on these
    } else if let Some(why) = too_complex(raw, true) {
        // Its word parser backtracks exponentially on these; the commands inside are
        // still found.
        acc.raise(
            Class::ConfigMutation,
            format!("a word too complex to parse ({why})"),
        );
        nested(raw, acc);
        return Word {
            lit: raw.to_string(),
            dynamic: true,
        };
    } else {
        std::panic::catch_unwind(|| brush_parser::word::parse(raw, &ParserOptions::default())).ok()
    };
    let Some(parsed) = parsed else {
        acc.raise(
            Class::ConfigMutation,
            format!("a word the shell parser cannot read: {raw:?}"),
        );
        lit.push_str(raw);
        return Word { lit, dynamic: true };
    };
    let dynamic = match parsed {
        Ok(pieces) => {
            let (mut dynamic, mut hidden) = (false, false);
            for p in &pieces {
                let k = piece(&p.piece, &mut lit, acc);
                dynamic |= k.dynamic;
                hidden |= k.hidden;
            }
            if hidden {
                nested(raw, acc);
            }
            dynamic
        }
        Err(_) => {
            acc.raise(
                Class::ConfigMutation,
                format!("a word that does not parse: {raw:?}"),
            );
            lit.push_str(raw);
            true
        }
    };
    Word { lit, dynamic }
}

/// Why brush-parser's word parser should not be given `w`: its PEG grammar backtracks
/// exponentially on unclosed `$(` nests (five `$(;(` deep: 6 ms, ten: seconds) and on
/// array subscripts and `$[` in expansions (four `${a[`: 20 ms, six: seconds).
fn too_complex(w: &str, quotes: bool) -> Option<String> {
    if matches!(w, "{" | "}" | "[" | "]" | "[[" | "]]") {
        return None; // reserved words and the test command
    }
    if !balanced(w, quotes) {
        // Backtracking is at its worst on what never closes; balanced input parses at
        // once.
        return Some("unbalanced brackets".into());
    }
    let depth = paren_depth(w, quotes);
    let subscripts = w.matches('[').count();
    if depth > MAX_WORD_NESTING {
        Some(format!("nested {depth} deep"))
    } else if subscripts > MAX_SUBSCRIPTS {
        Some(format!("{subscripts} subscripts in expansions"))
    } else if w.len() > MAX_WORD_LEN {
        Some(format!("{} bytes", w.len()))
    } else {
        None
    }
}

/// The characters of `w` that can open or close an expansion: not escaped by a backslash,
/// and outside single quotes where `quotes` (a here-document's body has none).
fn structural(w: &str, quotes: bool) -> impl Iterator<Item = char> + '_ {
    let (mut quoted, mut escaped) = (false, false);
    w.chars().filter(move |&c| {
        if escaped {
            escaped = false;
            return false;
        }
        match c {
            '\'' if quotes => {
                quoted = !quoted;
                false
            }
            '\\' if !quoted => {
                escaped = true;
                false
            }
            _ => !quoted,
        }
    })
}

/// Whether every `(`, `{` and `[` in `w` closes, in order, outside single quotes.
fn balanced(w: &str, quotes: bool) -> bool {
    let mut open = Vec::new();
    for c in structural(w, quotes) {
        match c {
            '(' | '{' | '[' => open.push(c),
            ')' | '}' => {
                let want = if c == ')' { '(' } else { '{' };
                if open.pop() != Some(want) {
                    return false;
                }
            }
            ']' if open.pop() != Some('[') => return false,
            _ => {}
        }
    }
    open.is_empty()
}

/// The deepest run of open parentheses and braces in `s`, outside single quotes.
fn paren_depth(s: &str, quotes: bool) -> i32 {
    let mut depth = 0i32;
    let mut max = 0;
    for c in structural(s, quotes) {
        match c {
            '(' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | '}' => depth = (depth - 1).max(0),
            _ => {}
        }
    }
    max
}

/// `~+N` or `~-N` with N past `usize`: the word parser's directory-stack index.
fn tilde_out_of_range(raw: &str) -> bool {
    raw.match_indices('~').any(|(i, _)| {
        let after = raw[i + 1..].trim_start_matches(['+', '-']);
        after.bytes().take_while(u8::is_ascii_digit).count() >= 19
    })
}

/// What a piece of a word is.
#[derive(Default)]
struct Kind {
    /// Its value depends on an expansion.
    dynamic: bool,
    /// It is an expansion whose text may hold commands (`${X:-$(…)}`, `$(( $(…) ))`): the
    /// word's raw text is searched for them.
    hidden: bool,
}

/// Appends a piece's literal text.
fn piece(p: &WordPiece, lit: &mut String, acc: &mut Acc) -> Kind {
    match p {
        WordPiece::Text(t) | WordPiece::SingleQuotedText(t) | WordPiece::AnsiCQuotedText(t) => {
            lit.push_str(t);
            Kind::default()
        }
        WordPiece::EscapeSequence(e) => {
            lit.push_str(e.strip_prefix('\\').unwrap_or(e));
            Kind::default()
        }
        WordPiece::TildeExpansion(_) => {
            lit.push('~');
            Kind::default()
        }
        WordPiece::DoubleQuotedSequence(ps) | WordPiece::GettextDoubleQuotedSequence(ps) => {
            let mut k = Kind::default();
            for p in ps {
                let inner = piece(&p.piece, lit, acc);
                k.dynamic |= inner.dynamic;
                k.hidden |= inner.hidden;
            }
            k
        }
        WordPiece::CommandSubstitution(s) | WordPiece::BackquotedCommandSubstitution(s) => {
            acc.raise(Class::ReversibleLow, "command substitution");
            acc.compound = true;
            script(s, acc);
            lit.push_str("$(…)");
            Kind {
                dynamic: true,
                hidden: false,
            }
        }
        WordPiece::ParameterExpansion(_) => {
            lit.push_str("${…}");
            Kind {
                dynamic: true,
                hidden: true,
            }
        }
        WordPiece::ArithmeticExpression(_) => {
            lit.push_str("$((…))");
            Kind {
                dynamic: true,
                hidden: true,
            }
        }
    }
}

/// Commands written inside an expansion's text, found by their `$(`…`)` or backticks
/// (quoting inside is not followed: this can only find more, never less).
fn nested(text: &str, acc: &mut Acc) {
    if !text.contains("$(") && !text.contains('`') {
        return;
    }
    acc.raise(
        Class::ReversibleLow,
        "command substitution inside an expansion",
    );
    acc.compound = true;
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && b.get(i + 1) == Some(&b'(') {
            let start = i + 2;
            let mut depth = 1;
            let mut j = start;
            while j < b.len() && depth > 0 {
                match b[j] {
                    b'(' => depth += 1,
                    b')' => depth -= 1,
                    _ => {}
                }
                j += 1;
            }
            let end = if depth == 0 { j - 1 } else { j };
            // `$((…))` is arithmetic: its inside, `(…)`, reads as a subshell, whose words
            // are searched in turn.
            script(&text[start..end], acc);
            i = j;
        } else if b[i] == b'`' {
            let start = i + 1;
            let end = text[start..].find('`').map_or(text.len(), |e| start + e);
            script(&text[start..end], acc);
            i = end + 1;
        } else {
            i += 1;
        }
    }
}
