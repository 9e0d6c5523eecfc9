//! The README's `sh` blocks, for the tests that run them as printed: `readme.rs` against a
//! started stack, `package.rs` (the section on installing on a host) in a container where
//! the package is installed.

/// The README.
pub const README: &str = include_str!("../../README.md");

/// One `sh` block: its first line number, the `##` section it is in, and its logical lines
/// (continuations joined).
pub struct Block {
    pub first: usize,
    pub section: String,
    pub lines: Vec<String>,
}

/// Every `sh` block of the README, in order.
pub fn sh_blocks() -> Vec<Block> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut current: Option<Block> = None;
    let mut pending = String::new();
    for (n, line) in README.lines().enumerate() {
        match (&mut current, line.trim_end()) {
            (None, "```sh") => {
                current = Some(Block {
                    first: n + 2,
                    section: section.clone(),
                    lines: Vec::new(),
                })
            }
            (None, l) if l.starts_with("## ") => section = l[3..].to_string(),
            (Some(_), "```") => {
                out.push(current.take().unwrap());
                pending.clear();
            }
            (Some(b), l) => {
                if let Some(cont) = l.strip_suffix('\\') {
                    pending.push_str(cont);
                    pending.push(' ');
                } else {
                    pending.push_str(l);
                    b.lines.push(std::mem::take(&mut pending));
                }
            }
            (None, _) => {}
        }
    }
    out
}

/// A line's code, without its trailing comment.
pub fn code(line: &str) -> &str {
    let b = line.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &c) in b.iter().enumerate() {
        match (quote, c) {
            (None, b'\'' | b'"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, b'#') if i == 0 || b[i - 1].is_ascii_whitespace() => return &line[..i],
            _ => {}
        }
    }
    line
}

/// The section of the README on installing the package on a host.
pub const INSTALL_SECTION: &str = "Install on a host";
