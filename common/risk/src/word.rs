//! Words as the shell reads them, by a linear scanner: quote removal, whether a word's
//! value depends on an expansion, and every command inside it (`$(…)`, backticks, and
//! those nested in `${…}`, `$((…))`, `$[…]` and double quotes), each classified in turn.
//!
//! `lex` has already cut the command into words; `find_close` finds where a substitution
//! ends, for both.
//!
//! Where the end of a `$(…)` is unclear, the scanner errs towards a longer body: text it
//! judges as commands costs at most a higher class; text it wrongly took for a literal
//! could hide a command.

use super::shell::{self, Glob, Word};
use super::{Acc, Class};

/// How deep `${…}`, `$((…))` and `$[…]` nest inside one another before the scanner stops
/// looking inside (commands nested in commands have their own limit, `MAX_DEPTH`).
const MAX_NESTING: u32 = 16;

/// Reads a word of a simple command.
pub fn word(raw: &str, acc: &mut Acc) -> Word {
    let mut s = Scan::new(raw, acc, false, 0);
    s.run(Ctx::Bare);
    Word {
        lit: s.lit,
        dynamic: s.dynamic,
        glob: s.glob,
    }
}

/// Reads the body of a here-document whose delimiter is unquoted: its expansions and the
/// commands inside them.
pub fn heredoc(body: &str, acc: &mut Acc) {
    Scan::new(body, acc, true, 0).run(Ctx::HereDoc);
}

thread_local! {
    /// Whether the text is read as dash reads it (no `$'…'`, no `$[…]`, a `'` plain
    /// inside a double-quoted `${…}`), not as bash does. execd's `/bin/sh` may be either.
    static DASH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the text is being read as dash reads it.
pub(super) fn dash() -> bool {
    DASH.with(std::cell::Cell::get)
}

/// Runs `f` reading text as dash does.
pub(super) fn as_dash<T>(f: impl FnOnce() -> T) -> T {
    let was = DASH.with(|d| d.replace(true));
    let out = f();
    DASH.with(|d| d.set(was));
    out
}

/// Where the scanner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// A word, or the inside of `${…}`: quotes apply; ends with the text.
    Bare,
    /// After a `"`: ends at the closing `"`.
    Double,
    /// An unquoted here-document's body: expansions apply, quotes do not.
    HereDoc,
}

struct Scan<'a, 'c> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    /// The word's text with quoting removed and expansions as placeholders.
    lit: String,
    /// Whether `lit` is kept (not for the insides of expansions).
    quiet: bool,
    dynamic: bool,
    /// What pathname expansion may make of the word.
    glob: Glob,
    nest: u32,
    acc: &'c mut Acc,
    /// A brace expansion being read (bash, unquoted): how many `{` are open, and whether
    /// a `,` or `..` followed one; a `}` then makes the word many, built by the shell.
    brace: u32,
    brace_sep: bool,
}

impl<'a, 'c> Scan<'a, 'c> {
    fn new(s: &'a str, acc: &'c mut Acc, quiet: bool, nest: u32) -> Self {
        Scan {
            s,
            b: s.as_bytes(),
            i: 0,
            lit: String::with_capacity(if quiet { 0 } else { s.len() }),
            quiet,
            dynamic: false,
            glob: Glob::None,
            nest,
            acc,
            brace: 0,
            brace_sep: false,
        }
    }

    fn push(&mut self, t: &str) {
        if !self.quiet {
            self.lit.push_str(t);
        }
    }

    /// Pushes the character at `i` and steps over it.
    fn push_char(&mut self) {
        let len = self.s[self.i..].chars().next().map_or(1, char::len_utf8);
        let end = self.i + len;
        if !self.quiet {
            self.lit.push_str(&self.s[self.i..end]);
        }
        self.i = end;
    }

    fn run(&mut self, ctx: Ctx) {
        while self.i < self.b.len() {
            match (self.b[self.i], ctx) {
                (b'"', Ctx::Double) => {
                    self.i += 1;
                    return;
                }
                (b'"', Ctx::Bare) => {
                    self.i += 1;
                    self.run(Ctx::Double);
                }
                (b'\'', Ctx::Bare) => {
                    let end = find(self.b, self.i + 1, b'\'');
                    self.push(&self.s[self.i + 1..end]);
                    self.i = (end + 1).min(self.b.len());
                }
                (b'\\', _) => self.backslash(ctx),
                (b'$', _) => self.dollar(ctx),
                (b'`', _) => self.backtick(ctx),
                _ => {
                    // A run of ordinary text.
                    let start = self.i;
                    while self.i < self.b.len()
                        && !matches!(self.b[self.i], b'"' | b'\'' | b'\\' | b'$' | b'`')
                    {
                        self.i += 1;
                    }
                    if self.i == start {
                        self.push_char(); // a quote that does not apply here
                    } else {
                        if ctx == Ctx::Bare && !self.quiet && !dash() {
                            self.braces(start);
                        }
                        if ctx == Ctx::Bare && !self.quiet {
                            self.globs(start);
                        }
                        self.push(&self.s[start..self.i]);
                    }
                }
            }
        }
    }

    /// Notes an unquoted `*`, `?` or `[` in the text from `start`: pathname expansion
    /// may make other words of it, options too when one leads the word.
    fn globs(&mut self, start: usize) {
        let text = &self.b[start..self.i];
        if let Some(at) = text.iter().position(|c| matches!(c, b'*' | b'?' | b'[')) {
            let leads = self.lit.is_empty() && at == 0;
            self.glob = if leads || self.glob == Glob::Options {
                Glob::Options
            } else {
                Glob::Names
            };
        }
    }

    /// Follows a brace expansion (`{a,b}`, `{1..3}`) through unquoted text: the word it
    /// is in becomes several, or other words, at run time (`-name {'*',-delete}`).
    fn braces(&mut self, start: usize) {
        let text = &self.b[start..self.i];
        for (k, &c) in text.iter().enumerate() {
            match c {
                b'{' => self.brace += 1,
                b',' if self.brace > 0 => self.brace_sep = true,
                b'.' if self.brace > 0 && text.get(k + 1) == Some(&b'.') => {
                    self.brace_sep = true;
                }
                b'}' if self.brace > 0 => {
                    self.brace -= 1;
                    if self.brace_sep {
                        self.dynamic = true;
                    }
                    if self.brace == 0 {
                        self.brace_sep = false;
                    }
                }
                _ => {}
            }
        }
    }

    fn backslash(&mut self, ctx: Ctx) {
        match self.b.get(self.i + 1) {
            None => {
                self.push("\\");
                self.i += 1;
            }
            Some(b'\n') => self.i += 2, // a line continuation
            Some(&c) => {
                let escapes = match ctx {
                    Ctx::Bare => true,
                    Ctx::Double => matches!(c, b'$' | b'`' | b'"' | b'\\'),
                    Ctx::HereDoc => matches!(c, b'$' | b'`' | b'\\'),
                };
                if escapes {
                    self.i += 1;
                    self.push_char();
                } else {
                    self.push("\\");
                    self.i += 1;
                }
            }
        }
    }

    fn dollar(&mut self, ctx: Ctx) {
        let b = self.b;
        let i = self.i;
        match b.get(i + 1) {
            Some(b'(') => {
                if b.get(i + 2) == Some(&b'(')
                    && let Some(close) = arith_end(b, i + 3, ctx != Ctx::Bare)
                {
                    // `$((…))`: arithmetic, as bash tries it first (`$((ls); rm x)` is a
                    // command substitution): no quotes, no comments in it.
                    self.inside(i + 3, close - 1, "$((…))");
                    self.arithmetic(&self.s[i + 3..close - 1]);
                    self.i = (close + 1).min(b.len());
                    return;
                }
                let end = find_close(b, i + 2, Frame::cmd());
                let close = end.unwrap_or(b.len());
                {
                    self.substitution(&self.s[i + 2..close]);
                }
                self.i = (close + 1).min(b.len());
            }
            Some(b'{') => {
                let first = if ctx == Ctx::Double {
                    Frame::QuotedBrace
                } else {
                    Frame::Brace(b'}')
                };
                let close = find_close(b, i + 2, first).unwrap_or(b.len());
                let inner = &self.s[i + 2..close.max(i + 2)];
                if inner.contains('[') || inner.contains(':') || inner.starts_with('!') {
                    // A subscript or an offset: arithmetic on what it names; an indirect
                    // name (`${!x}`) may hold a subscript, evaluated.
                    self.acc.arithmetic();
                }
                let name: String = inner
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let assigns =
                    inner[name.len()..].starts_with(":=") || inner[name.len()..].starts_with('=');
                if super::rules::runs_later(&name) && assigns {
                    self.acc.unread(format!(
                        "`${{{name}:=…}}` sets `{name}`, which the shell runs later"
                    ));
                }
                if assigns {
                    super::rules::steering(&name, self.acc);
                    super::rules::loads_by_name(&name, self.acc);
                }
                if inner.contains('[') || inner.contains(':') {
                    // A subscript or an offset is arithmetic: what it assigns.
                    super::rules::arithmetic_assigns(&inner[name.len()..], self.acc);
                }
                if self.s[i + 2..close.max(i + 2)].ends_with("@P") {
                    // A prompt expansion runs the command substitutions in the value.
                    self.acc
                        .unread("`${…@P}` expands a value as a prompt, running what it holds");
                }
                self.inside(i + 2, close, "${…}");
                self.i = (close + 1).min(b.len());
            }
            Some(b'[') if !dash() => {
                let close = find_close(b, i + 2, Frame::Brace(b']')).unwrap_or(b.len());
                self.arithmetic(&self.s[i + 2..close.max(i + 2)]);
                self.inside(i + 2, close, "$((…))");
                self.i = (close + 1).min(b.len());
            }
            Some(b'\'') if ctx == Ctx::Bare && !dash() => {
                let (text, end) = ansi_c(&self.s[i + 2..]);
                self.push(&text);
                self.i = i + 2 + end;
            }
            Some(b'"') if ctx == Ctx::Bare => self.i += 1, // `$"…"`: a translated string
            Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {
                let mut j = i + 1;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                    j += 1;
                }
                self.expansion("${…}");
                self.i = j;
            }
            Some(c) if c.is_ascii_digit() || b"@*#?$!-".contains(c) => {
                self.expansion("${…}");
                self.i = i + 2;
            }
            _ => {
                self.push("$");
                self.i += 1;
            }
        }
    }

    fn expansion(&mut self, placeholder: &str) {
        self.dynamic = true;
        self.push(placeholder);
    }

    /// An expansion whose text (`s[from..to]`) may hold commands: they are judged.
    fn inside(&mut self, from: usize, to: usize, placeholder: &str) {
        self.expansion(placeholder);
        if self.nest >= MAX_NESTING {
            self.acc.unread("expansions nested too deep to inspect");
            return;
        }
        let text = &self.s[from..to.max(from)];
        if text.contains(['$', '`']) {
            // Read as a here-document's body is: quotes do not quote (inside `"${x:-'…'}"`
            // and in arithmetic, bash takes a `'` as a plain character), so every
            // substitution in it is judged.
            Scan::new(text, self.acc, true, self.nest + 1).run(Ctx::HereDoc);
        }
    }

    /// Arithmetic on `text`: what it assigns, and whether it reads a variable (a value
    /// evaluated in turn) — digits and operators alone read none.
    fn arithmetic(&mut self, text: &str) {
        if text
            .bytes()
            .any(|c| c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c == b'`')
        {
            self.acc.arithmetic();
        }
        super::rules::arithmetic_assigns(text, self.acc);
    }

    fn substitution(&mut self, body: &str) {
        self.acc.raise(Class::ReversibleLow, "command substitution");
        // A program's output is text from outside the command (a count excepted, one
        // program alone: `$(wc -l < f)`, `$(nproc)`): arithmetic on a value holding it may find an
        // array subscript with a command in it.
        let counts = matches!(
            body.trim_start().split([' ', '\t', '<']).next(),
            Some("wc" | "nproc")
        ) && !body.contains(['|', ';', '&', '\n', '`', '$', '>']);
        if !counts {
            self.acc.foreign();
        }
        self.acc.compound = true;
        shell::script(body, self.acc);
        self.expansion("$(…)");
    }

    fn backtick(&mut self, ctx: Ctx) {
        let b = self.b;
        let start = self.i + 1;
        let end = backtick_end(b, start);
        // Inside backticks, a backslash quotes only `$`, `` ` `` and itself.
        let mut body = String::with_capacity(end - start);
        let raw = &self.s[start..end];
        let mut chars = raw.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\'
                && let Some(&n) = chars.peek()
                && (matches!(n, '$' | '`' | '\\') || (n == '"' && ctx == Ctx::Double))
            {
                body.push(n);
                chars.next();
            } else {
                body.push(c);
            }
        }
        self.substitution(&body);
        self.i = (end + 1).min(b.len());
    }
}

/// The index of the first `c` in `b` at or after `from`, or the end.
pub(super) fn find(b: &[u8], from: usize, c: u8) -> usize {
    b[from.min(b.len())..]
        .iter()
        .position(|&x| x == c)
        .map_or(b.len(), |p| from + p)
}

/// The index of the `'` closing a `$'…'` whose text starts at `i` (a backslash escapes
/// the character after it), or the end.
pub(super) fn ansi_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i] != b'\'' {
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    i.min(b.len())
}

/// The index of the backtick closing one opened just before `from`, or the end.
pub(super) fn backtick_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'`' => return i,
            _ => i += 1,
        }
    }
    b.len()
}

/// `$'…'` text, from just after its opening quote: the decoded text and the length read
/// (including the closing quote).
fn ansi_c(s: &str) -> (String, usize) {
    let mut out = String::new();
    let mut it = s.char_indices().peekable();
    while let Some((at, c)) = it.next() {
        match c {
            '\'' => return (out, at + 1),
            '\\' => {
                let Some((_, e)) = it.next() else { break };
                let mut number = |radix: u32, max: usize, first: Option<char>| {
                    let mut v: u32 = first.and_then(|f| f.to_digit(radix)).unwrap_or(0);
                    for _ in 0..max {
                        match it.peek().and_then(|(_, d)| d.to_digit(radix)) {
                            Some(d) => {
                                v = v.saturating_mul(radix).saturating_add(d);
                                it.next();
                            }
                            None => break,
                        }
                    }
                    char::from_u32(v).unwrap_or('\u{fffd}')
                };
                let d = match e {
                    'a' => '\x07',
                    'b' => '\x08',
                    'e' | 'E' => '\x1b',
                    'f' => '\x0c',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'v' => '\x0b',
                    '0'..='7' => number(8, 2, Some(e)),
                    'x' => number(16, 2, None),
                    'u' => number(16, 4, None),
                    'U' => number(16, 8, None),
                    'c' => match it.next() {
                        Some((_, x)) => char::from((x as u8) & 0x1f),
                        None => break,
                    },
                    other => {
                        if !matches!(other, '\\' | '\'' | '"' | '?') {
                            out.push('\\');
                        }
                        other
                    }
                };
                out.push(d);
            }
            c => out.push(c),
        }
    }
    (out, s.len())
}

/// What the end finder is inside.
#[derive(Debug)]
pub(super) enum Frame {
    /// `$(…)`: ends at a `)` that closes no `(` and no `case` pattern.
    Cmd {
        /// The `case` commands open in it, innermost last; the first is the text itself.
        levels: Vec<Level>,
        /// Here-documents begun on this line: (delimiter, leading tabs stripped).
        heredocs: Vec<(String, bool, bool)>,
        /// Just after the last `)` that was an operator (a subshell's or a pattern's end),
        /// where a new word starts (`(:)#` is a comment, `$(x)#` is not).
        op_end: usize,
    },
    /// `$((…))` or `((…))`: ends at a `))` closing no `(`. `singles`: a `'` quotes (not
    /// to dash inside double quotes).
    Arith { parens: u32, singles: bool },
    /// `"…"`.
    Double,
    /// `${…}` (`}`) or `$[…]` (`]`).
    Brace(u8),
    /// `${…}` inside double quotes: dash takes a `'` in it as a plain character.
    QuotedBrace,
}

/// A `case` command open in a `$(…)` (or the text around them): its parentheses, and
/// where in the `case` the finder is, which decides what a `)` and the words `case` and
/// `esac` mean.
#[derive(Debug, Clone, Copy)]
pub(super) struct Level {
    parens: u32,
    at: CaseAt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CaseAt {
    /// Commands: outside any `case`, or a pattern's commands.
    Commands,
    /// Just after `case`: its word comes next.
    Subject,
    /// After the word: `in` comes next.
    In,
    /// Where a pattern list starts: a `(` is its optional opening, `esac` ends the case.
    Patterns,
    /// Inside a pattern list: its `)` ends it.
    Pattern,
}

impl Frame {
    pub(super) fn cmd() -> Frame {
        Frame::Cmd {
            levels: vec![Level {
                parens: 0,
                at: CaseAt::Commands,
            }],
            heredocs: Vec::new(),
            op_end: 0,
        }
    }
}

/// What the end finder does with a character.
enum Step {
    /// It closes the innermost frame.
    Close,
    /// It opens a frame.
    Open(Frame),
    /// It was read (with whatever it quotes): nothing else to do.
    Read,
    /// Nothing special for this frame; it may still open a substitution.
    Plain,
    /// The text is not what the first frame took it for (`$((` that is not arithmetic).
    Fail,
}

/// How deep arithmetic is looked ahead into, nested in itself; deeper, the text is not
/// read (`too_deep`).
pub(super) const MAX_ARITH: u32 = 16;

/// How many steps a judgement may take: characters scanned looking for what closes what
/// (the look ahead at `((` and `$((` scans again from every `(` of a run, each nested in
/// the last, which costs a power of the text's length), texts lexed again (`((…))` read
/// as subshells too), and tokens read inside open groups (`{ { { …`, each command
/// looking at every group around it). Past it, the text is not read (`spent`). A
/// command of `MAX_LEN` bytes read a few dozen times over is far below it.
const STEP_BUDGET: u64 = 2_000_000;

thread_local! {
    static ARITH_NEST: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    static TOO_DEEP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A new judgement: its scan starts a new budget.
pub(super) fn new_budget() {
    STEPS.with(|s| s.set(0));
}

/// Counts `n` more steps of this judgement (a text lexed again, a command read inside
/// `n` open groups); answers whether the budget is spent.
pub(super) fn spend(n: u64) -> bool {
    STEPS.with(|s| s.set(s.get().saturating_add(n)));
    spent()
}

/// Whether this judgement scanned more than `STEP_BUDGET` characters: what it read is
/// then incomplete.
pub(super) fn spent() -> bool {
    STEPS.with(|s| s.get()) > STEP_BUDGET
}

/// Whether arithmetic nested deeper than `MAX_ARITH` was met since the last call.
pub(super) fn too_deep() -> bool {
    TOO_DEEP.with(|t| t.replace(false))
}

/// The index of the character closing `first`, which opened just before `from`; `None` if
/// it never closes. One pass, no recursion: nesting is an explicit stack (but for the
/// look ahead at `$((`, bounded by `MAX_ARITH`).
pub(super) fn find_close(b: &[u8], from: usize, first: Frame) -> Option<usize> {
    if spent() {
        return None;
    }
    // The characters this scan reads, added to the judgement's count however it ends.
    struct Count(u64);
    impl Drop for Count {
        fn drop(&mut self) {
            STEPS.with(|s| s.set(s.get() + self.0));
        }
    }
    let mut count = Count(0);
    let mut stack = vec![first];
    let mut i = from;
    while i < b.len() {
        count.0 += 1;
        if count.0.is_multiple_of(1024) && STEPS.with(|s| s.get()) + count.0 > STEP_BUDGET {
            return None;
        }
        let c = b[i];
        let quoted = matches!(stack.last(), Some(Frame::Double | Frame::QuotedBrace));
        let step = match stack.last_mut().expect("a frame") {
            Frame::Double => match c {
                b'"' => Step::Close,
                b'\\' => {
                    i += 1;
                    Step::Read
                }
                _ => Step::Plain,
            },
            Frame::QuotedBrace if c == b'}' => Step::Close,
            Frame::QuotedBrace => match c {
                b'\\' => {
                    i += 1;
                    Step::Read
                }
                b'$' if !dash() && b.get(i + 1) == Some(&b'\'') => {
                    i = ansi_end(b, i + 2);
                    Step::Read
                }
                b'\'' if !dash() => {
                    i = find(b, i + 1, b'\'');
                    Step::Read
                }
                b'"' => Step::Open(Frame::Double),
                _ => Step::Plain,
            },
            Frame::Brace(close) if c == *close => Step::Close,
            Frame::Brace(close) => match c {
                b'\\' => {
                    i += 1;
                    Step::Read
                }
                // `$'…'` (bash): a backslash escapes a `'` in it.
                b'$' if !dash() && b.get(i + 1) == Some(&b'\'') => {
                    i = ansi_end(b, i + 2);
                    Step::Read
                }
                // In `$[…]` (arithmetic) a `'` is a plain character.
                b'\'' if *close == b'}' => {
                    i = find(b, i + 1, b'\'');
                    Step::Read
                }
                b'"' => Step::Open(Frame::Double),
                _ => Step::Plain,
            },
            Frame::Arith { parens, singles } => match c {
                b'(' => {
                    *parens += 1;
                    Step::Read
                }
                b')' if *parens > 0 => {
                    *parens -= 1;
                    Step::Read
                }
                b')' if b.get(i + 1) == Some(&b')') => {
                    i += 1;
                    Step::Close
                }
                // bash: not arithmetic but a command substitution (or subshells); dash
                // reads on to the first `))`.
                b')' if !dash() => Step::Fail,
                b')' => Step::Read,
                b'\\' => {
                    i += 1;
                    Step::Read
                }
                b'$' if !dash() && b.get(i + 1) == Some(&b'\'') => {
                    i = ansi_end(b, i + 2);
                    Step::Read
                }
                b'\'' if *singles => {
                    i = find(b, i + 1, b'\'');
                    Step::Read
                }
                b'"' => Step::Open(Frame::Double),
                // No comments in arithmetic: a `#` is a plain character.
                _ => Step::Plain,
            },
            Frame::Cmd {
                levels,
                heredocs,
                op_end,
            } => {
                let word_start = i == from
                    || matches!(b[i - 1], b' ' | b'\t' | b'\n' | b';' | b'|' | b'&' | b'(')
                    || (b[i - 1] == b')' && *op_end == i);
                // A word starts: where it stands in a `case` decides what it is (its first
                // character is then read as any other).
                if word_start
                    && !matches!(
                        c,
                        b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'#'
                    )
                    && !b[i..].starts_with(b"<<")
                {
                    let depth = levels.len();
                    let level = *levels.last().expect("a level");
                    let top = levels.last_mut().expect("a level");
                    match level.at {
                        CaseAt::Subject => top.at = CaseAt::In,
                        CaseAt::In => top.at = CaseAt::Patterns,
                        CaseAt::Patterns if keyword(b, i, b"esac") => {
                            levels.pop();
                        }
                        CaseAt::Patterns => top.at = CaseAt::Pattern,
                        CaseAt::Pattern => {}
                        CaseAt::Commands
                            if keyword(b, i, b"esac")
                                && depth > 1
                                && command_position(b, from, *op_end, i) =>
                        {
                            levels.pop();
                        }
                        CaseAt::Commands
                            if keyword(b, i, b"case") && command_position(b, from, *op_end, i) =>
                        {
                            levels.push(Level {
                                parens: 0,
                                at: CaseAt::Subject,
                            });
                        }
                        CaseAt::Commands => {}
                    }
                }
                let depth = levels.len();
                let level = *levels.last().expect("a level");
                let top = levels.last_mut().expect("a level");
                match c {
                    b')' if level.parens > 0 => {
                        top.parens -= 1;
                        *op_end = i + 1;
                        Step::Read
                    }
                    b')' if matches!(level.at, CaseAt::Patterns | CaseAt::Pattern) => {
                        top.at = CaseAt::Commands;
                        *op_end = i + 1;
                        Step::Read
                    }
                    // Else the end (a `)` in a pattern's commands is bash's error).
                    b')' => Step::Close,
                    b'(' if level.at == CaseAt::Patterns => {
                        top.at = CaseAt::Pattern;
                        Step::Read
                    }
                    // `((…))`, an arithmetic command to bash: its `<<` is a shift, its
                    // `#` no comment.
                    b'(' if !dash()
                        && b.get(i + 1) == Some(&b'(')
                        && level.at == CaseAt::Commands
                        && command_position(b, from, *op_end, i)
                        && let Some(end) = arith_end(b, i + 2, false) =>
                    {
                        i = end;
                        Step::Read
                    }
                    // `$'…'`: a backslash escapes a `'` in it (to bash; dash has none).
                    b'$' if !dash() && b.get(i + 1) == Some(&b'\'') => {
                        i = ansi_end(b, i + 2);
                        Step::Read
                    }
                    b'(' => {
                        top.parens += 1;
                        Step::Read
                    }
                    b'#' if word_start => {
                        // A comment, to the end of the line (the newline is read next).
                        i = find(b, i, b'\n') - 1;
                        Step::Read
                    }
                    b';' if depth > 1
                        && level.at == CaseAt::Commands
                        && matches!(b.get(i + 1), Some(b';' | b'&')) =>
                    {
                        // `;;`, `;&`, `;;&`: a pattern list comes next.
                        i += 1;
                        if b[i] == b';' && b.get(i + 1) == Some(&b'&') {
                            i += 1;
                        }
                        top.at = CaseAt::Patterns;
                        Step::Read
                    }
                    b'<' if b[i..].starts_with(b"<<<") => {
                        i += 2; // a here-string
                        Step::Read
                    }
                    b'<' if b[i..].starts_with(b"<<") => {
                        let (delimiter, strip, quoted, next) = heredoc_delimiter(b, i + 2);
                        heredocs.push((delimiter, strip, quoted));
                        i = next - 1;
                        Step::Read
                    }
                    b'\n' if !heredocs.is_empty() => {
                        for (delimiter, strip, quoted) in heredocs.drain(..) {
                            let (_, next) = super::lex::body(b, i + 1, &delimiter, strip, quoted);
                            // At the newline that ends the closing line (or the end).
                            i = next.saturating_sub(1).max(i);
                        }
                        Step::Read
                    }
                    b'\\' => {
                        i += 1;
                        Step::Read
                    }
                    b'\'' => {
                        i = find(b, i + 1, b'\'');
                        Step::Read
                    }
                    b'"' => Step::Open(Frame::Double),
                    _ => Step::Plain,
                }
            }
        };
        // Substitutions open in every frame.
        let step = match (step, c, b.get(i + 1)) {
            (Step::Plain, b'`', _) => {
                i = backtick_end(b, i + 1);
                Step::Read
            }
            (Step::Plain, b'$', Some(b'(')) => match b.get(i + 2) {
                Some(b'(') if let Some(end) = arith_end(b, i + 3, quoted) => {
                    i = end;
                    Step::Read
                }
                _ => Step::Open(Frame::cmd()),
            },
            (Step::Plain, b'$', Some(b'{')) => Step::Open(if quoted {
                Frame::QuotedBrace
            } else {
                Frame::Brace(b'}')
            }),
            (Step::Plain, b'$', Some(b'[')) if !dash() => Step::Open(Frame::Brace(b']')),
            (step, ..) => step,
        };
        match step {
            Step::Close => {
                stack.pop();
                if stack.is_empty() {
                    return Some(i);
                }
            }
            Step::Open(f) => {
                if c == b'$' {
                    i += 1;
                }
                stack.push(f);
            }
            Step::Fail => return None,
            Step::Read | Step::Plain => {}
        }
        i += 1;
    }
    None
}

/// Whether the word `k` starts at `i` (followed by a blank, an operator or the end).
fn keyword(b: &[u8], i: usize, k: &[u8]) -> bool {
    b[i..].starts_with(k)
        && b.get(i + k.len())
            .is_none_or(|c| matches!(c, b' ' | b'\t' | b'\n' | b';' | b'|' | b'&' | b')'))
}

/// The index of the second `)` of the `))` closing arithmetic that opened (`$((`, `((`)
/// just before `from`, or `None` when the parentheses do not close so (then it is a
/// command substitution or subshells, as bash decides; dash reads on to the first `))`).
/// Quotes and substitutions in it are skipped as the shell skips them; a `#` is plain.
/// `quoted`: inside double quotes, where dash takes a `'` as a plain character.
pub(super) fn arith_end(b: &[u8], from: usize, quoted: bool) -> Option<usize> {
    let nest = ARITH_NEST.with(|n| n.get());
    if nest >= MAX_ARITH {
        TOO_DEEP.with(|t| t.set(true));
        return None;
    }
    ARITH_NEST.with(|n| n.set(nest + 1));
    let end = find_close(
        b,
        from,
        Frame::Arith {
            parens: 0,
            singles: !(quoted && dash()),
        },
    );
    ARITH_NEST.with(|n| n.set(nest));
    end
}

/// Whether the word at `i` stands where a command starts (after a separator, a reserved
/// word, or an operator `)` ending at `op_end`: a pattern's), so that `case` there opens a
/// case (`echo case` does not). To bash, after `coproc [NAME]` and `function NAME` too (a
/// compound command follows); not after `time` (bash does not take `case` for a reserved
/// word there inside `$(…)`, and to dash `time` is a command).
fn command_position(b: &[u8], from: usize, op_end: usize, i: usize) -> bool {
    // The word before the one at `at`: (its start, its end), or None at a separator.
    let before = |at: usize| -> Option<(usize, usize)> {
        let mut j = at;
        while j > from && matches!(b[j - 1], b' ' | b'\t') {
            j -= 1;
        }
        if j == from || matches!(b[j - 1], b';' | b'&' | b'|' | b'(' | b'\n') || j == op_end {
            return None;
        }
        let end = j;
        while j > from && !matches!(b[j - 1], b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(') {
            j -= 1;
        }
        Some((j, end))
    };
    let mut at = i;
    // Each step goes back one word at least: bounded by the text.
    loop {
        let Some((start, end)) = before(at) else {
            return true;
        };
        let w = &b[start..end];
        let reserved = matches!(
            w,
            b"then" | b"do" | b"else" | b"elif" | b"if" | b"while" | b"until" | b"{" | b"!"
        ) || (!dash() && w == b"coproc");
        if reserved {
            at = start;
            continue;
        }
        // `coproc NAME`, `function NAME` (bash).
        if !dash()
            && let Some((s2, e2)) = before(start)
            && matches!(&b[s2..e2], b"coproc" | b"function")
        {
            at = s2;
            continue;
        }
        return false;
    }
}

/// A here-document's delimiter after `<<` at `i`: (delimiter without quotes, `<<-`,
/// quoted, index after it). One with ANSI-C escapes is kept as written: the text is read
/// again by `lex`, which holds it unread.
fn heredoc_delimiter(b: &[u8], mut i: usize) -> (String, bool, bool, usize) {
    let strip = b.get(i) == Some(&b'-');
    if strip {
        i += 1;
    }
    while i < b.len() && matches!(b[i], b' ' | b'\t') {
        i += 1;
    }
    let start = i;
    // The word as bash cuts it (`E\ F`, `'E F'` are one).
    i = super::lex::word_end(b, i).unwrap_or(b.len());
    let raw = String::from_utf8_lossy(&b[start..i]);
    let (delimiter, quoted) = super::lex::delimiter(&raw).unwrap_or((raw.to_string(), true));
    (delimiter, strip, quoted, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(raw: &str) -> (String, bool) {
        let mut acc = Acc::default();
        let w = word(raw, &mut acc);
        (w.lit, w.dynamic)
    }

    #[test]
    fn quotes_are_removed() {
        assert_eq!(lit("'a b'\"c\"d"), ("a bcd".into(), false));
        assert_eq!(lit(r#""a\"b\$c\x""#), (r#"a"b$c\x"#.into(), false));
        assert_eq!(lit(r"a\ b\'"), ("a b'".into(), false));
        assert_eq!(lit("$'\\x72m\\t\\'\\101'"), ("rm\t'A".into(), false));
        assert_eq!(lit("~root/x"), ("~root/x".into(), false));
        assert_eq!(lit("a\\\nb"), ("ab".into(), false));
        assert_eq!(lit("$"), ("$".into(), false));
        assert_eq!(lit("'unclosed"), ("unclosed".into(), false));
    }

    #[test]
    fn expansions_are_dynamic() {
        for w in [
            "$HOME", "${a:-b}", "$1", "$@", "\"$x\"", "$((1+2))", "$[1]", "`ls`", "$(ls)",
        ] {
            assert!(lit(w).1, "{w}");
        }
        assert_eq!(lit("a$(ls)b").0, "a$(…)b");
        assert_eq!(lit("x${a}y").0, "x${…}y");
    }

    #[test]
    fn substitution_ends_are_found() {
        let close = |s: &str| find_close(s.as_bytes(), 2, Frame::cmd());
        assert_eq!(close("$(ls)x"), Some(4));
        assert_eq!(close("$(echo \")\")x"), Some(10));
        assert_eq!(close("$(echo ')')x"), Some(10));
        assert_eq!(close("$(a $(b) c)x"), Some(10));
        assert_eq!(close("$(case x in a) b;; esac)x"), Some(23));
        assert_eq!(close("$(# )\n)x"), Some(6));
        assert_eq!(close("$(cat <<E\n)\nE\n)x"), Some(14));
        assert_eq!(close("$(echo ${a:-)})x"), Some(14));
        assert_eq!(close("$(wc <<< 'a')x"), Some(12));
        assert_eq!(close("$(ls"), None);
        // `esac` as a word, a pattern's `)`, a `case` after it, a comment after `)`.
        assert_eq!(close("$(case x in x) echo esac;; esac)x"), Some(31));
        assert_eq!(
            close("$(case x in x) case y in y) :;; esac;; esac)x"),
            Some(43)
        );
        assert_eq!(close("$(case x in (x) :;; esac)x"), Some(24));
        assert_eq!(close("$( (:)# )\n)x"), Some(10));
        assert_eq!(close("$(echo $(x)#b)x"), Some(13));
    }

    #[test]
    fn arithmetic_ends_where_the_shell_ends_it() {
        let end = |s: &str| arith_end(s.as_bytes(), 3, false);
        assert_eq!(end("$(( 1 + (2) ))x"), Some(13));
        assert_eq!(end("$(( $(: \"((\") 1 )); x #))"), Some(17));
        assert_eq!(end("$(( ')' ))x"), Some(9));
        assert_eq!(end("$(( # ))x"), Some(7));
        // Not arithmetic to bash: a command substitution starting with a subshell.
        assert_eq!(end("$((:) ; echo ))"), None);
        // dash reads on to the first `))`, and a `'` in double quotes is plain to it.
        assert_eq!(as_dash(|| end("$((:) ; echo ))")), Some(14));
        assert_eq!(as_dash(|| arith_end(b"$(( '))' ))", 3, true)), Some(6));
        assert_eq!(arith_end(b"$(( '))' ))", 3, true), Some(10));
    }
}
