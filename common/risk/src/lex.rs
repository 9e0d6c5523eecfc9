//! A command string cut into tokens as bash cuts it: words (quotes, `$(…)`, `${…}`,
//! backticks and all), operators, and here-document bodies. One pass over the text; a
//! substitution's end is found by `word::find_close`, which keeps its own stack, so nothing
//! recurses on the input and nothing backtracks.

use super::word::{Frame, arith_end, backtick_end, find, find_close};

/// A token; words are slices of the source, with their byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token<'a> {
    Word(&'a str, usize),
    Op(&'static str, usize),
    /// A here-document's body; it follows the `<<` operator and its delimiter word.
    Body(String),
}

/// Control and redirection operators, longest first.
const OPERATORS: &[&str] = &[
    ";;&", "<<<", "<<-", "&>>", "&&", "||", ";;", ";&", "|&", "&>", ">>", "<<", "<>", "<&", ">&",
    ">|", ";", "&", "|", "(", ")", "<", ">", "\n",
];

fn starts_operator(c: u8) -> bool {
    matches!(c, b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>' | b'\n')
}

/// Tokens of `src`, or why it is not a complete command (an unclosed quote or
/// substitution: the shell would run none of it).
/// `src` with its line continuations (a `\` before a newline, outside single quotes and
/// comments) removed, as the shell removes them before it reads words: `$\⏎'…'` is
/// `$'…'`, and a here-document's delimiter `\⏎E` is `E`. A comment ends at its newline,
/// a `\` before it is the comment's (`ls # \⏎rm …` runs `rm`).
pub fn joined(src: &str) -> std::borrow::Cow<'_, str> {
    if !src.contains("\\\n") {
        return std::borrow::Cow::Borrowed(src);
    }
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let (mut single, mut double) = (false, false);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            // A comment: a `#` that starts a word, outside quotes, through its newline.
            b'#' if !single
                && !double
                && out
                    .last()
                    .is_none_or(|c: &u8| c.is_ascii_whitespace() || starts_operator(*c)) =>
            {
                let end = b[i..]
                    .iter()
                    .position(|c| *c == b'\n')
                    .map_or(b.len(), |e| i + e);
                out.extend_from_slice(&b[i..end]);
                i = end;
            }
            b'\\' if !single && b.get(i + 1) == Some(&b'\n') => i += 2,
            b'\\' if !single => {
                out.extend_from_slice(&b[i..(i + 2).min(b.len())]);
                i += 2;
            }
            b'\'' if !double => {
                single = !single;
                out.push(b'\'');
                i += 1;
            }
            b'"' if !single => {
                double = !double;
                out.push(b'"');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    std::borrow::Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// Whether `src` opens a here-document whose delimiter is quoted (`<<'E'`, `<<"E"`,
/// `<<\E`): its body keeps a `\⏎` as written, where [`joined`] would take it out.
pub fn quoted_heredoc(src: &str) -> bool {
    src.match_indices("<<").any(|(at, _)| {
        let rest = &src[at + 2..];
        !rest.starts_with('<')
            && !src[..at].ends_with('<')
            && rest
                .trim_start_matches('-')
                .trim_start_matches([' ', '\t'])
                .starts_with(['\'', '"', '\\'])
    })
}

/// Whether a `[[ … =~ REGEX ]]` holds what bash reads its own way in a regex and this
/// lexer would not: a `#`, a redirection, a separator or parentheses that do not pair
/// (`[[ x =~ (#) ]]` hides the rest of the line from a comment reader).
fn regex_read_apart(src: &str) -> Option<&'static str> {
    let mut rest = src;
    while let Some(at) = rest.find("=~") {
        let after = &rest[at + 2..];
        let end = after.find("]]").unwrap_or(after.len());
        let regex = &after[..end];
        let mut depth = 0i32;
        for c in regex.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                '#' | '<' | '>' | ';' | '&' | '\n' | '`' => {
                    return Some("a `[[ … =~ … ]]` regex bash reads its own way");
                }
                _ => {}
            }
            if depth < 0 {
                break;
            }
        }
        if depth != 0 {
            return Some("a `[[ … =~ … ]]` regex bash reads its own way");
        }
        rest = after;
    }
    None
}

pub fn lex(src: &str) -> Result<Vec<Token<'_>>, String> {
    if let Some(why) = regex_read_apart(src) {
        return Err(why.into());
    }
    let b = src.as_bytes();
    let mut out = Vec::new();
    // Here-documents begun on this line: (index of the body token, delimiter, `<<-`,
    // quoted).
    let mut pending: Vec<(usize, String, bool, bool)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' => i += 1,
            b'\\' if b.get(i + 1) == Some(&b'\n') => i += 2,
            b'#' => i = find(b, i, b'\n'),
            // `(( … ))`: an arithmetic command, one word (its `<<` is a shift).
            // dash has no `((`: subshells to it.
            b'(' if b.get(i + 1) == Some(&b'(')
                && !super::word::dash()
                && arith_end(b, i + 2, false).is_some() =>
            {
                let end = arith_end(b, i + 2, false).unwrap_or(b.len()) + 1;
                out.push(Token::Word(&src[i..end], i));
                i = end;
            }
            c if starts_operator(c) => {
                // dash has no `&>`: to it, `&` then a redirection.
                let dash = super::word::dash();
                let op = OPERATORS
                    .iter()
                    .find(|o| b[i..].starts_with(o.as_bytes()) && !(dash && o.starts_with("&>")))
                    .expect("an operator starts here");
                out.push(Token::Op(op, i));
                i += op.len();
                match *op {
                    "\n" => {
                        for (at, delimiter, strip, quoted) in pending.drain(..) {
                            let (body, next) = body(b, i, &delimiter, strip, quoted);
                            out[at] = Token::Body(body);
                            i = next;
                        }
                    }
                    "<<" | "<<-" => {
                        while i < b.len() && matches!(b[i], b' ' | b'\t') {
                            i += 1;
                        }
                        if i == b.len() || starts_operator(b[i]) {
                            return Err("a here-document without a delimiter".into());
                        }
                        let end = word_end(b, i)?;
                        let raw = &src[i..end];
                        out.push(Token::Word(raw, i));
                        out.push(Token::Body(String::new()));
                        let (delimiter, quoted) = delimiter(raw).ok_or(
                            "a here-document delimiter with ANSI-C escapes (its end is not read)",
                        )?;
                        pending.push((out.len() - 1, delimiter, *op == "<<-", quoted));
                        i = end;
                    }
                    _ => {}
                }
            }
            _ => {
                let end = word_end(b, i)?;
                out.push(Token::Word(&src[i..end], i));
                i = end;
            }
        }
    }
    // A here-document cut off by the end of the text is empty (bash warns and runs it).
    Ok(out)
}

/// The end of the word starting at `i`.
pub(super) fn word_end(b: &[u8], mut i: usize) -> Result<usize, String> {
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' => return Ok(i),
            c if starts_operator(c) => return Ok(i),
            b'\\' => i += 2,
            b'\'' => {
                i = find(b, i + 1, b'\'');
                if i == b.len() {
                    return Err("an unclosed single quote".into());
                }
                i += 1;
            }
            b'"' => {
                i = find_close(b, i + 1, Frame::Double).ok_or("an unclosed double quote")? + 1;
            }
            b'`' => {
                i = backtick_end(b, i + 1);
                if i == b.len() {
                    return Err("an unclosed backquote".into());
                }
                i += 1;
            }
            b'$' => match b.get(i + 1) {
                // dash has neither `$'…'` nor `$[…]`: a plain `$`.
                Some(b'\'' | b'[') if super::word::dash() => i += 1,
                Some(b'(')
                    if b.get(i + 2) == Some(&b'(') && arith_end(b, i + 3, false).is_some() =>
                {
                    i = arith_end(b, i + 3, false).unwrap_or(b.len()) + 1;
                }
                Some(b'(') => {
                    i = find_close(b, i + 2, Frame::cmd()).ok_or("an unclosed `$(`")? + 1;
                }
                Some(b'{') => {
                    i = find_close(b, i + 2, Frame::Brace(b'}')).ok_or("an unclosed `${`")? + 1;
                }
                Some(b'[') => {
                    i = find_close(b, i + 2, Frame::Brace(b']')).ok_or("an unclosed `$[`")? + 1;
                }
                Some(b'\'') => {
                    i += 2;
                    loop {
                        match b.get(i) {
                            None => return Err("an unclosed `$'`".into()),
                            Some(b'\\') => i += 2,
                            Some(b'\'') => break,
                            Some(_) => i += 1,
                        }
                    }
                    i += 1;
                }
                _ => i += 1,
            },
            _ => i += 1,
        }
    }
    Ok(b.len().min(i))
}

/// A here-document's delimiter as bash reads it from the word after `<<`, with its quoting
/// removed (`'E'`, `"E"`, `\E`, `$'E'`, `$"E"` all end at a line `E`), and whether any of
/// it was quoted (its body is then taken as written: no expansions, no joined lines).
/// `None` when ANSI-C escapes would change it (`$'\x45'`): where it ends is not read.
pub(crate) fn delimiter(raw: &str) -> Option<(String, bool)> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut quoted = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'$' if matches!(b.get(i + 1), Some(b'\'' | b'"')) => {
                let q = b[i + 1];
                let end = find(b, i + 2, q);
                if q == b'\'' && b[i + 2..end].contains(&b'\\') {
                    return None;
                }
                out.extend_from_slice(&b[i + 2..end]);
                quoted = true;
                i = end + 1;
            }
            b'\'' | b'"' => {
                let end = find(b, i + 1, b[i]);
                out.extend_from_slice(&b[i + 1..end]);
                quoted = true;
                i = end + 1;
            }
            // A line continuation, gone before the word is read.
            b'\\' if b.get(i + 1) == Some(&b'\n') => i += 2,
            b'\\' => {
                if let Some(&c) = b.get(i + 1) {
                    out.push(c);
                }
                quoted = true;
                i += 2;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some((String::from_utf8_lossy(&out).into_owned(), quoted))
}

/// A here-document's body from `i` to its closing line: (body, index after that line). In
/// an unquoted one, a line ending in `\` goes on with the next, as bash joins them before
/// it compares a line with the delimiter (`E\` then an empty line ends one at `E`).
pub(crate) fn body(
    b: &[u8],
    mut i: usize,
    delimiter: &str,
    strip: bool,
    quoted: bool,
) -> (String, usize) {
    let mut text = String::new();
    while i < b.len() {
        let mut line = Vec::new();
        let mut next;
        loop {
            let end = find(b, i, b'\n');
            let mut part = &b[i..end];
            if strip && line.is_empty() {
                while let [b'\t', rest @ ..] = part {
                    part = rest;
                }
            }
            next = (end + 1).min(b.len());
            let trailing = part.iter().rev().take_while(|&&c| c == b'\\').count();
            if !quoted && trailing % 2 == 1 && end < b.len() {
                line.extend_from_slice(&part[..part.len() - 1]);
                i = next;
                continue;
            }
            line.extend_from_slice(part);
            break;
        }
        if line == delimiter.as_bytes() {
            return (text, next);
        }
        text.push_str(&String::from_utf8_lossy(&line));
        text.push('\n');
        i = next;
    }
    (text, b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(src: &str) -> Vec<String> {
        lex(src)
            .unwrap()
            .into_iter()
            .map(|t| match t {
                Token::Word(w, _) => w.to_string(),
                Token::Op(o, _) => format!("<{}>", o.escape_debug()),
                Token::Body(b) => format!("[{b}]"),
            })
            .collect()
    }

    #[test]
    fn words_and_operators() {
        assert_eq!(
            shown("ls -l|wc  -l&&x"),
            ["ls", "-l", "<|>", "wc", "-l", "<&&>", "x"]
        );
        assert_eq!(shown("a 2>&1 >>f"), ["a", "2", "<>&>", "1", "<>>>", "f"]);
        assert_eq!(
            shown("echo \"a b\"'c d'\\ e # x"),
            ["echo", "\"a b\"'c d'\\ e"]
        );
        assert_eq!(
            shown("echo $(a; b) ${x:-y z} `c d`"),
            ["echo", "$(a; b)", "${x:-y z}", "`c d`"]
        );
        assert_eq!(
            shown("echo $(case x in a) b;; esac)"),
            ["echo", "$(case x in a) b;; esac)"]
        );
        assert_eq!(
            shown("diff <(a) b"),
            ["diff", "<<>", "<(>", "a", "<)>", "b"]
        );
        assert_eq!(shown("a \\\n b"), ["a", "b"]);
        assert_eq!(shown("echo $'a\\'b' c"), ["echo", "$'a\\'b'", "c"]);
    }

    #[test]
    fn here_documents() {
        assert_eq!(
            shown("cat <<E; ls\nx $y\nE\nrm z"),
            [
                "cat", "<<<>", "E", "[x $y\n]", "<;>", "ls", "<\\n>", "rm", "z"
            ]
        );
        assert_eq!(
            shown("cat <<-'E'\n\tx\n\tE\n"),
            ["cat", "<<<->", "'E'", "[x\n]", "<\\n>"]
        );
        assert_eq!(
            shown("cat <<A <<B\na\nA\nb\nB\n")[..6],
            ["cat", "<<<>", "A", "[a\n]", "<<<>", "B"]
        );
        assert_eq!(
            shown("cat <<E\nunended"),
            ["cat", "<<<>", "E", "[unended\n]", "<\\n>"]
        );
    }

    /// The end line as bash finds it: quoting of every kind removed from the delimiter,
    /// and in an unquoted body a line ending in `\` joined to the next first.
    #[test]
    fn here_documents_end_where_bash_ends_them() {
        for src in [
            "cat <<$'E'\nx\nE\nls",
            "cat <<$\"E\"\nx\nE\nls",
            "cat <<\\E\nx\nE\nls",
        ] {
            assert_eq!(shown(src)[3..], ["[x\n]", "<\\n>", "ls"], "{src}");
        }
        assert_eq!(
            shown("cat <<E\nE\\\n\nls")[3..],
            ["[]", "<\\n>", "ls"],
            "a joined line ends it"
        );
        assert_eq!(
            shown("cat <<'E'\nE\\\n\nE\n")[3],
            "[E\\\n\n]",
            "not in a quoted one"
        );
        assert!(lex("cat <<$'\\x45'\nx\nE\n").is_err(), "escapes: not read");
    }

    #[test]
    fn unclosed_text_is_refused() {
        for src in [
            "echo 'a", "echo \"a", "echo $(a", "echo ${a", "echo `a", "cat <<", "echo $'a",
        ] {
            assert!(lex(src).is_err(), "{src}");
        }
    }
}
