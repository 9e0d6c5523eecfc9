//! Languages carried in arguments: sed scripts (which can write files and run commands)
//! and SQL or key-value commands that destroy data.

use super::args::{flag, lits, operands, values};
use crate::shell::Word;
use crate::{Acc, Class};

use Class::{ConfigMutation as Config, ReadOnly};

/// `sed` reads unless it edits in place, reads its script from a file, or the script
/// writes (`w`, `W`, `s///w`) or runs (`e`, `s///e`) anything.
pub(super) fn sed(args: &[Word], acc: &mut Acc) {
    let in_place = flag(args, &['i'], &["in-place"]);
    if in_place {
        acc.raise(Config, "`sed -i` edits files in place");
        for o in operands(args) {
            acc.wrote(o);
        }
    }
    if flag(args, &['f'], &["file"]) {
        for f in values(args, &['f'], &["file"]) {
            acc.runs_file(&f.lit);
        }
        if acc.piped_in
            || args
                .iter()
                .any(|w| super::super::shell::is_stdin_path(&w.lit))
        {
            acc.unread("`sed -f` runs a script another command prints");
        }
        acc.raise(Config, "`sed -f` runs a script from a file");
        return;
    }
    if args.iter().any(|w| w.dynamic) {
        // The script may be among them: what it does is known only at run time.
        acc.unread("`sed` arguments come from expansions: its script is built at run time");
        return;
    }
    // The scripts as sed reads its arguments (`-e…` attached, clustered `-ne …`,
    // `--expr=…`), by its option model. When the model refuses an option, the command is
    // not read-only anyway, but what that option takes is not known: every `-e` value
    // found, and the first operand too, is judged as a script (`sed -Q --expression='e …'`
    // runs the command all the same).
    let parsed = super::models::get("sed").and_then(|m| super::models::check("sed", m, args).ok());
    let mut scripts: Vec<String> = match &parsed {
        Some(p) => p
            .values(&["-e", "--expression"])
            .map(str::to_string)
            .collect(),
        None => values(args, &['e'], &["expression"])
            .into_iter()
            .map(|w| w.lit)
            .chain(operands(args).first().map(|s| s.to_string()))
            .collect(),
    };
    if scripts.is_empty() {
        scripts.extend(parsed.as_ref().and_then(|p| p.operands.first().cloned()));
    }
    let mut commands = Vec::new();
    let acts = scripts
        .iter()
        .map(|s| sed_script_acts(s, &mut commands))
        .max();
    for c in &commands {
        crate::shell::script(c, acc);
    }
    match acts {
        Some(Acts::RunsEdited) => {
            // `e` alone, `s///e`: runs the text sed made, a command built at run time.
            acc.unread("`sed` script runs the text it edits as a command (e)");
        }
        Some(Acts::Changes) => {
            acc.wrote_unnamed();
            acc.raise(
                Config,
                "`sed` script writes files or runs commands (w, W, e)",
            );
        }
        _ if in_place => {}
        _ => acc.raise(ReadOnly, "`sed` only reads"),
    }
}

/// What a sed script does besides printing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Acts {
    Nothing,
    /// Writes a file (`w`, `W`) or runs the command written after `e`.
    Changes,
    /// Runs its pattern space: what it read and edited (`e` alone, `s///e`).
    RunsEdited,
}

/// Whether a sed script holds a command that writes a file or runs one.
/// The commands written after `e` go to `commands`.
pub(super) fn sed_script_acts(script: &str, commands: &mut Vec<String>) -> Acts {
    let mut acts = Acts::Nothing;
    let b: Vec<char> = script.chars().collect();
    let mut i = 0;
    // Skips a delimited part starting at `i` (the delimiter); returns the index after it.
    let delimited = |mut i: usize, d: char| {
        i += 1;
        while i < b.len() && b[i] != d {
            if b[i] == '\\' {
                i += 1;
            }
            i += 1;
        }
        i + 1
    };
    while i < b.len() {
        match b[i] {
            '/' | '\\' => {
                // An address regex (`\cREc` uses any delimiter).
                let d = if b[i] == '\\' {
                    i += 1;
                    b.get(i).copied().unwrap_or('/')
                } else {
                    '/'
                };
                i = delimited(i, d);
            }
            's' | 'y' => {
                let Some(&d) = b.get(i + 1) else {
                    return acts;
                };
                i = delimited(i + 1, d);
                i = delimited(i - 1, d);
                // Its flags; `w` takes the rest of the line as a file name.
                for c in b[i.min(b.len())..]
                    .iter()
                    .take_while(|c| !matches!(c, ';' | '\n' | '}'))
                {
                    match c {
                        'e' => return Acts::RunsEdited,
                        'w' | 'W' => {
                            acts = Acts::Changes;
                            break;
                        }
                        _ => {}
                    }
                }
            }
            'e' => {
                // `e command` runs the command written there; `e` alone, the pattern space.
                // (It takes the rest of the line, `;` included.)
                let rest: String = b[i + 1..].iter().take_while(|c| **c != '\n').collect();
                if rest.trim().is_empty() {
                    return Acts::RunsEdited;
                }
                commands.push(rest);
                acts = Acts::Changes;
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
            }
            'w' | 'W' => {
                // The file name runs to the end of the line.
                acts = Acts::Changes;
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
            }
            'a' | 'i' | 'c' | 'r' | 'R' | 'b' | 't' | 'T' | ':' => {
                // Text or a label or file name to the end of the command.
                while i < b.len() && b[i] != '\n' && b[i] != ';' {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    acts
}

/// Notes destructive SQL (or a key-value store's flush) in a command's words.
pub(super) fn sql_words(args: &[Word], acc: &mut Acc) {
    for a in args {
        sql_text(&a.lit, acc);
    }
    if args.len() > 1 {
        sql_text(&lits(args).join(" "), acc);
    }
}

/// Notes destructive SQL in `text`: `DROP TABLE|DATABASE|SCHEMA`, `TRUNCATE`, `DELETE FROM`
/// without `WHERE`, `FLUSHALL`/`FLUSHDB`, `dropDatabase()`.
pub fn sql_text(text: &str, acc: &mut Acc) {
    if acc.sql.is_some() || text.len() < 7 {
        return;
    }
    let lower = text.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ';' || c == '(' || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let found = words.windows(2).find_map(|w| match (w[0], w[1]) {
        ("drop", "table" | "database" | "schema" | "owned") => {
            Some(format!("SQL `DROP {}`", w[1].to_uppercase()))
        }
        ("truncate", t) if !t.starts_with('-') => Some("SQL `TRUNCATE`".to_string()),
        ("delete", "from") if !words.contains(&"where") => {
            Some("SQL `DELETE FROM` without `WHERE`".to_string())
        }
        _ => None,
    });
    let found = found.or_else(|| {
        words
            .iter()
            .find(|w| matches!(**w, "flushall" | "flushdb") || w.contains("dropdatabase"))
            .map(|w| format!("`{w}`"))
    });
    if let Some(f) = found {
        acc.sql = Some(f);
    }
}
