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
    // Each script alone and all joined as sed joins them (a `a\` may run on into the
    // next), with bracket expressions in a regex read as GNU sed reads them (`/[/]/`) and
    // as older seds did: what any reading finds is judged.
    let joined = scripts.join("\n");
    let mut commands = Vec::new();
    let acts = scripts
        .iter()
        .chain((scripts.len() > 1).then_some(&joined))
        .flat_map(|s| [true, false].map(|brackets| sed_script_acts(s, brackets, &mut commands)))
        .max();
    commands.sort();
    commands.dedup();
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

/// Whether a sed script holds a command that writes a file or runs one, read as GNU sed
/// reads it (a regex, a replacement and a command's text end at a newline that is not
/// escaped; `;` does not end `a`, `i`, `c` text nor a file name); `brackets`: a bracket
/// expression in a regex holds its delimiter (`/[/]/`), as GNU sed's since 4.3.
/// The commands written after `e` go to `commands`.
pub(super) fn sed_script_acts(script: &str, brackets: bool, commands: &mut Vec<String>) -> Acts {
    let mut acts = Acts::Nothing;
    let b: Vec<char> = script.chars().collect();
    let mut i = 0;
    // The index of the first unescaped newline at or after `i` (or the end).
    let line_end = |mut i: usize| {
        while i < b.len() && b[i] != '\n' {
            if b[i] == '\\' {
                i += 1;
            }
            i += 1;
        }
        i.min(b.len())
    };
    while i < b.len() {
        match b[i] {
            // A comment ends at the newline, escaped or not.
            '#' => {
                i = b[i..]
                    .iter()
                    .position(|c| *c == '\n')
                    .map_or(b.len(), |p| i + p)
            }
            '/' => i = sed_delimited(&b, i + 1, '/', brackets),
            '\\' => {
                // `\cREc`: an address regex with any delimiter.
                let d = b.get(i + 1).copied().unwrap_or('/');
                i = sed_delimited(&b, i + 2, d, brackets);
            }
            's' | 'y' => {
                let Some(&d) = b.get(i + 1) else {
                    return acts;
                };
                if d == '\n' || d == '\\' {
                    return acts.max(Acts::Changes); // sed refuses it; not read
                }
                i = sed_delimited(&b, i + 2, d, brackets && b[i] == 's');
                i = sed_delimited(&b, i, d, false);
                // Its flags; `w` takes the rest of the line as a file name.
                while i < b.len() && !matches!(b[i], ';' | '\n' | '}' | '#') {
                    match b[i] {
                        'e' => return Acts::RunsEdited,
                        'w' | 'W' => {
                            acts = acts.max(Acts::Changes);
                            i = line_end(i);
                            break;
                        }
                        _ => i += 1,
                    }
                }
            }
            'e' => {
                // `e command` runs the command written there; `e` alone, the pattern space.
                // (It takes the rest of the line, `;` included.)
                let end = line_end(i + 1);
                let rest: String = b[i + 1..end].iter().collect();
                if rest.trim().is_empty() || rest.trim_start().starts_with(['}', ';']) {
                    return Acts::RunsEdited;
                }
                commands.push(rest);
                acts = acts.max(Acts::Changes);
                i = end;
            }
            'w' | 'W' => {
                // The file name runs to the end of the line.
                acts = acts.max(Acts::Changes);
                i = line_end(i);
            }
            'a' | 'i' | 'c' => {
                // Text to the end of the line; an escaped newline goes on with it
                // (`a\` and its lines).
                i = line_end(i + 1);
            }
            'r' | 'R' => {
                // A file name: to the end of the line (GNU sed), or of the command for a
                // sed that ends it there (the other reading). A device's opening acts.
                let start = i + 1;
                while i < b.len() && b[i] != '\n' && (brackets || b[i] != ';') {
                    i += 1;
                }
                let name: String = b[start.min(i)..i].iter().collect();
                if super::acting_read(name.trim()).is_some() {
                    acts = acts.max(Acts::Changes);
                }
            }
            'b' | 't' | 'T' | ':' | 'v' => {
                // A label (or a version): GNU sed ends it at a blank too (`:a e cmd`).
                i += 1;
                while i < b.len() && matches!(b[i], ' ' | '\t') {
                    i += 1;
                }
                while i < b.len() && !matches!(b[i], '\n' | ';' | ' ' | '\t') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    acts
}

/// The index after the delimiter `d` ending a regex or a replacement that starts at `i`;
/// at an unescaped newline (sed refuses it) or the end if none.
fn sed_delimited(b: &[char], mut i: usize, d: char, brackets: bool) -> usize {
    while i < b.len() && b[i] != '\n' {
        match b[i] {
            '\\' => i += 2,
            c if c == d => return i + 1,
            '[' if brackets => {
                // A bracket expression: `]` first is a member; `[:…:]`, `[=…=]`, `[.….]`
                // are inside it; a backslash is a plain character.
                i += 1;
                if b.get(i) == Some(&'^') {
                    i += 1;
                }
                if b.get(i) == Some(&']') {
                    i += 1;
                }
                while i < b.len() && b[i] != ']' && b[i] != '\n' {
                    if b[i] == '['
                        && let Some(&k @ (':' | '=' | '.')) = b.get(i + 1)
                    {
                        i += 2;
                        while i + 1 < b.len() && !(b[i] == k && b[i + 1] == ']') && b[i] != '\n' {
                            i += 1;
                        }
                        i += 2;
                    } else {
                        i += 1;
                    }
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    i.min(b.len())
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
            .find(|w| {
                matches!(**w, "flushall" | "flushdb")
                    || w.contains("dropdatabase")
                    || w.contains(".deletemany")
                    || w.contains(".drop")
                    || w.contains(".remove")
            })
            .map(|w| format!("`{w}`"))
    });
    if let Some(f) = found {
        acc.sql = Some(f);
    }
}
