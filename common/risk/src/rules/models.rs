//! Option models: for each program that can be read-only, the options it accepts and
//! whether each takes a value, as data (`models.txt`), and one parser that reads a
//! command's arguments by the rules the programs themselves apply — GNU unique-prefix
//! abbreviation of long options, values attached (`-n5`, `--lines=5`) or separate,
//! clustered short options (`-tzf x`), `--`, options before and after the operands, and
//! subcommands with options of their own (`git log`, `systemctl status`). Any option the
//! model does not list makes the command not read-only: a model lists only what cannot
//! write or run anything.
//!
//! The data is parsed once, on first use, and checked by a unit test.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use crate::shell::{Glob, Word};

const DATA: &str = include_str!("models.txt");

static MODELS: LazyLock<BTreeMap<String, Model>> =
    LazyLock::new(|| parse(DATA).unwrap_or_else(|e| panic!("rules/models.txt: {e}")));

/// Whether an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    /// `-v`, `--verbose`.
    Flag,
    /// `-n 5`, `-n5`, `--lines 5`, `--lines=5`.
    Value,
    /// `--color`, `--color=always` (attached only).
    Optional,
}

/// The options of one program or subcommand.
#[derive(Debug, Default, Clone)]
struct Opts {
    short: BTreeMap<char, Arity>,
    long: BTreeMap<String, Arity>,
    /// Single-dash words that are options as a whole (`find -name`, `ip -brief`).
    words: BTreeMap<String, Arity>,
}

/// A program, or one of its subcommands.
#[derive(Debug, Default, Clone)]
pub struct Model {
    opts: Opts,
    subs: Vec<(Vec<String>, Model)>,
    /// Arguments are not options: nothing they say can write or run (`echo`, `test`).
    any: bool,
    /// No operands.
    none: bool,
    /// Options end at the first operand (what follows is another command's, or data).
    posix: bool,
    /// `-NUM` is an option (`head -5`).
    number: bool,
    /// The first word may be a cluster of short options without its dash (`tar tzf`).
    oldstyle: bool,
    /// A subcommand is optional (`systemctl` alone lists units).
    bare: bool,
    /// The parents' options are not accepted after this subcommand (`git -C x log`).
    globals_first: bool,
    /// Long options only by their whole name (programs that take no abbreviations).
    exact: bool,
    /// Not given --help and --version (a program that answers them on the console).
    nohelp: bool,
    /// At least one of these options must be given (`tar -t`, `crontab -l`).
    need: Vec<String>,
    /// The program's rule in the classifier also judges what its operands say.
    pub rule: bool,
    /// Programs it runs itself to do its reading (`tar` runs `gzip`, `egrep` is `grep`).
    pub runs: Vec<String>,
    /// A shell script read for this model: it evaluates none of its arguments.
    pub script: bool,
    /// Every option the program has only reads (not only those listed): a pattern that
    /// expands to one is harmless (`ls *`, `du -sh *`).
    globs: bool,
    /// Its operands' places mean different things (`uniq IN OUT` writes the second,
    /// `sysctl KEY=VALUE` sets): a pattern that expands to several is refused.
    fixed: bool,
    /// Options refused wherever they stand, after a subcommand too (`apt list -o …`,
    /// `kubectl get --kubeconfig=…`: the program takes its global options anywhere), and
    /// `;`: an argument holding a `;` or a newline (the program runs commands so cut).
    deny: Vec<String>,
}

/// The model of a program, by name.
pub fn get(name: &str) -> Option<&'static Model> {
    MODELS.get(name)
}

/// The options a program's model lists at its top level, as written in the data (`-n=`
/// takes a value, `--color[=]` an attached one); None without a model. For the outside
/// judge, which runs each of them and watches what the program does.
pub fn options_of(name: &str) -> Option<Vec<String>> {
    let m = MODELS.get(name)?;
    let spell = |n: String, a: &Arity| match a {
        Arity::Flag => n,
        Arity::Value => format!("{n}="),
        Arity::Optional => format!("{n}[=]"),
    };
    let mut out: Vec<String> = Vec::new();
    out.extend(m.opts.short.iter().map(|(c, a)| spell(format!("-{c}"), a)));
    out.extend(m.opts.long.iter().map(|(n, a)| spell(format!("--{n}"), a)));
    out.extend(m.opts.words.iter().map(|(n, a)| spell(n.clone(), a)));
    Some(out)
}

/// Whether a program may be a script and still be a reader: its model says the script was
/// read (`@script`). Any other reader found to be a script on a host is none there.
pub fn reviewed_script(name: &str) -> bool {
    MODELS.get(name).is_some_and(|m| m.script)
}

/// The programs a program's model says it runs itself.
pub fn runs_of(name: &str) -> Vec<String> {
    MODELS.get(name).map(|m| m.runs.clone()).unwrap_or_default()
}

/// What the parser found in arguments the model accepts.
#[derive(Debug, Default)]
pub struct Accepted {
    /// The program and its subcommands (`git log`).
    pub path: String,
    /// Options as the model names them (`--lines`, `-n`, `-name`), with their values.
    pub options: Vec<(String, Option<String>)>,
    pub operands: Vec<String>,
}

impl Accepted {
    /// The values given to any of `names`.
    pub fn values<'a>(&'a self, names: &'a [&str]) -> impl Iterator<Item = &'a str> + 'a {
        self.options
            .iter()
            .filter(move |(n, _)| names.contains(&n.as_str()))
            .filter_map(|(_, v)| v.as_deref())
    }

    pub fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|(n, _)| names.contains(&n.as_str()))
    }
}

/// Why `args` hold what `model` refuses anywhere (`@deny`), if they do: a denied option
/// (short, in a cluster or with its value attached; long, whole, with `=…` or, unless
/// `@exact`, abbreviated), an argument from an expansion that could be one, or a `;`.
fn denied(name: &str, model: &Model, args: &[Word]) -> Option<String> {
    if model.deny.is_empty() {
        return None;
    }
    for w in args {
        let a = w.lit.as_str();
        if w.dynamic && expands_to_option(a) {
            return Some(format!(
                "`{name}`: an argument from an expansion ({a}) could be one of its options that run or write"
            ));
        }
        let hit = model.deny.iter().find(|d| {
            if d.as_str() == ";" {
                return a.contains([';', '\n']);
            }
            if d.as_str() == "@" {
                return a.contains('@');
            }
            if let Some(long) = d.strip_prefix("--") {
                let given = a
                    .strip_prefix("--")
                    .map(|g| g.split_once('=').map_or(g, |(n, _)| n));
                return given.is_some_and(|g| {
                    g == long || (!model.exact && !g.is_empty() && long.starts_with(g))
                });
            }
            // `-o`, `-oVALUE`, or among a cluster of flags (`-qqo`).
            let short = d.trim_start_matches('-');
            !a.starts_with("--")
                && a.starts_with('-')
                && (a[1..].starts_with(short)
                    || (!a.contains('=')
                        && a[1..].bytes().all(|b| b.is_ascii_alphabetic())
                        && a[1..].contains(short)))
        });
        if let Some(d) = hit {
            return Some(if d == ";" {
                format!("`{name}` with an argument holding `;`: it runs each command so cut")
            } else if d == "@" {
                format!(
                    "`{name}` with an argument holding `@` ({a}): options read from a file, unseen, or a host looked up"
                )
            } else {
                format!("`{name}` with `{d}`: it chooses what the program runs or where it writes")
            });
        }
    }
    None
}

/// Reads `args` by `name`'s model: what it accepted, or why the command is not known to
/// only read.
pub fn check(name: &str, model: &Model, args: &[Word]) -> Result<Accepted, String> {
    let mut node = model;
    let mut sets: Vec<&Opts> = vec![&model.opts];
    let mut out = Accepted {
        path: name.to_string(),
        ..Default::default()
    };
    let mut chose_sub = false;
    let mut ended = false;
    let mut i = 0;
    let not_known =
        |path: &str, what: &str| format!("`{path}` with {what}: not known to only read");
    if let Some(why) = denied(name, model, args) {
        return Err(why);
    }
    for w in args {
        if w.glob == Glob::Options && !model.globs {
            return Err(format!(
                "`{name}` with `{}`: a pattern that may expand to a file named like one of its options (`-delete`, `--output=…`)",
                w.lit
            ));
        }
        if w.glob != Glob::None && model.fixed {
            return Err(format!(
                "`{name}` with `{}`: a pattern that may expand to several operands, the later ones written or set",
                w.lit
            ));
        }
    }
    // (A program that only prints what it is given takes them all alike.)
    let prints = matches!(
        name,
        "echo" | "true" | "false" | ":" | "sleep" | "seq" | "yes" | "cal" | "ncal" | "factor"
    );
    if let Some(w) = args
        .iter()
        .find(|w| !prints && w.dynamic && brace_expanded(&w.lit))
    {
        // `{,-o/etc/passwd}`, `in{,.out}`: several arguments, options among them perhaps.
        return Err(format!(
            "`{name}`: a brace expansion ({}) makes several arguments, options perhaps",
            w.lit
        ));
    }
    while i < args.len() {
        if node.any {
            return Ok(out);
        }
        let w = &args[i];
        let a = w.lit.as_str();
        i += 1;
        let oldstyle = model.oldstyle && i == 1 && !a.starts_with('-') && !a.is_empty();
        if !oldstyle && (ended || a == "-" || !a.starts_with('-')) {
            if !chose_sub && !node.subs.is_empty() {
                let Some((_, sub)) = node
                    .subs
                    .iter()
                    .find(|(names, _)| !w.dynamic && names.iter().any(|n| n == a))
                else {
                    return Err(format!(
                        "`{} {a}`: not a subcommand known to only read",
                        out.path
                    ));
                };
                node = sub;
                out.path = format!("{} {a}", out.path);
                if node.globals_first {
                    sets.clear();
                }
                sets.push(&node.opts);
                chose_sub = node.subs.is_empty();
                continue;
            }
            if node.any {
                return Ok(out);
            }
            if w.dynamic && expands_to_option(&w.lit) {
                return Err(format!(
                    "`{}`: an argument from an expansion ({a}) could be an option",
                    out.path
                ));
            }
            if node.none {
                return Err(not_known(&out.path, &format!("an operand ({a})")));
            }
            if node.posix {
                ended = true;
            }
            out.operands.push(a.to_string());
            continue;
        }
        if w.dynamic {
            return Err(format!(
                "`{}`: an option from an expansion ({a}) cannot be checked",
                out.path
            ));
        }
        if a == "--" {
            ended = true;
            continue;
        }
        let mut take_next = |out: &mut Accepted, name: String| {
            let v = args.get(i).map(|w| w.lit.clone());
            if args.get(i).is_some_and(|w| w.dynamic) {
                return Err(format!(
                    "`{}`: the value of {name} comes from an expansion",
                    out.path
                ));
            }
            if let Some(v) = v.as_deref().filter(|v| {
                v.starts_with('-')
                    && v[1..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '-')
            }) {
                // A program that takes this value only attached, or not always, reads the
                // word as its next option (`zstdcat -T -o f`, `git log -U --output=f`).
                return Err(format!(
                    "`{}`: the value of {name} looks like an option ({v}): the program may read it as one",
                    out.path
                ));
            }
            i += 1;
            out.options.push((name, v));
            Ok(())
        };
        if let Some(long) = a.strip_prefix("--") {
            let (given, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let (canon, arity) = find_long(&sets, given, model.exact)
                .map_err(|why| not_known(&out.path, &format!("--{given} ({why})")))?;
            let name = format!("--{canon}");
            match (arity, value) {
                (Arity::Flag, Some(_)) => {
                    return Err(not_known(&out.path, &format!("a value given to {name}")));
                }
                (Arity::Value, None) => take_next(&mut out, name)?,
                (_, v) => out.options.push((name, v)),
            }
            continue;
        }
        // One dash: a whole-word option, a number, or a cluster of short options.
        let (head, attached) = match a.split_once('=') {
            Some((h, v)) => (h, Some(v.to_string())),
            None => (a, None),
        };
        if let Some(arity) = sets.iter().rev().find_map(|s| s.words.get(head)) {
            match (arity, attached) {
                (Arity::Value, None) => take_next(&mut out, head.to_string())?,
                (Arity::Flag, Some(_)) => {
                    return Err(not_known(&out.path, &format!("a value given to {head}")));
                }
                (_, v) => out.options.push((head.to_string(), v)),
            }
            continue;
        }
        let body = if oldstyle { a } else { &a[1..] };
        if (model.number || node.number)
            && !body.is_empty()
            && body.bytes().all(|b| b.is_ascii_digit())
        {
            out.options.push(("-NUM".into(), Some(body.to_string())));
            continue;
        }
        let mut deferred = Vec::new();
        for (at, c) in body.char_indices() {
            let Some(arity) = sets.iter().rev().find_map(|s| s.short.get(&c)) else {
                return Err(not_known(&out.path, &format!("-{c}")));
            };
            let name = format!("-{c}");
            let rest = &body[at + c.len_utf8()..];
            match arity {
                Arity::Flag => out.options.push((name, None)),
                // Old style (`tar tzf archive`): each option that takes a value takes the
                // next word, in order.
                Arity::Value if oldstyle => deferred.push(name),
                Arity::Value | Arity::Optional if !rest.is_empty() => {
                    out.options.push((name, Some(rest.to_string())));
                    break;
                }
                Arity::Value => {
                    take_next(&mut out, name)?;
                    break;
                }
                Arity::Optional => out.options.push((name, None)),
            }
        }
        for name in deferred {
            take_next(&mut out, name)?;
        }
    }
    if !chose_sub && !node.subs.is_empty() && !node.bare {
        return Err(format!(
            "`{}` without a subcommand known to only read",
            out.path
        ));
    }
    if !node.need.is_empty() && !out.has(&node.need.iter().map(String::as_str).collect::<Vec<_>>())
    {
        return Err(format!(
            "`{}` only reads with one of {}",
            out.path,
            node.need.join(", ")
        ));
    }
    Ok(out)
}

/// Whether an expansion's value could begin with `-` (it begins with the expansion,
/// except `$HOME`, which execd sets and the classifier judges when a request sets it).
/// Whether a word's text holds a brace expansion (`{a,b}`, `{1..3}`, nested too).
fn brace_expanded(lit: &str) -> bool {
    lit.find('{').is_some_and(|at| {
        let rest = &lit[at..];
        (rest.contains(',') || rest.contains("..")) && rest.contains('}')
    })
}

fn expands_to_option(lit: &str) -> bool {
    let safe = ["$HOME/", "${HOME}/"];
    ((lit.starts_with('$') || lit.starts_with('`')) && !safe.iter().any(|s| lit.starts_with(s)))
        || brace_expanded(lit)
}

/// A long option by its name or, as GNU's getopt takes it, a unique prefix of one. A
/// prefix of several is refused (the program may know still others).
fn find_long(sets: &[&Opts], given: &str, exact: bool) -> Result<(String, Arity), &'static str> {
    if given.is_empty() {
        return Err("empty");
    }
    for s in sets.iter().rev() {
        if let Some(a) = s.long.get(given) {
            return Ok((given.to_string(), *a));
        }
    }
    if exact {
        return Err("not an option it is known to only read with");
    }
    let mut found: Vec<(&String, Arity)> = sets
        .iter()
        .flat_map(|s| s.long.iter())
        .filter(|(n, _)| n.starts_with(given))
        .map(|(n, a)| (n, *a))
        .collect();
    found.dedup_by(|x, y| x.0 == y.0);
    match found.as_slice() {
        [(n, a)] => Ok(((*n).clone(), *a)),
        [] => Err("not an option it is known to only read with"),
        _ => Err("an abbreviation of more than one option"),
    }
}

/// Parses `models.txt`.
fn parse(text: &str) -> Result<BTreeMap<String, Model>, String> {
    let mut sets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut models: BTreeMap<String, Model> = BTreeMap::new();
    // Continuation lines (starting with whitespace) belong to the line before.
    let mut lines: Vec<(usize, String)> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split(" #").next().unwrap_or(raw);
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            let Some(last) = lines.last_mut() else {
                return Err(format!("line {}: continuation of nothing", n + 1));
            };
            last.1.push(' ');
            last.1.push_str(line.trim());
        } else {
            lines.push((n + 1, line.trim().to_string()));
        }
    }
    for (n, line) in lines {
        let err = |m: String| format!("line {n}: {m}");
        // The first `:` followed by white space or the end (the program may be `:`).
        let b = line.as_bytes();
        let colon = (0..b.len())
            .find(|&i| b[i] == b':' && b.get(i + 1).is_none_or(|c| c.is_ascii_whitespace()))
            .ok_or_else(|| err("no `:` after the program".into()))?;
        let (key, body) = (&line[..colon], &line[colon + 1..]);
        let mut tokens: Vec<String> = Vec::new();
        for t in body.split_whitespace() {
            match t.strip_prefix('%') {
                Some(set) => tokens.extend(
                    sets.get(set)
                        .ok_or_else(|| err(format!("unknown set %{set}")))?
                        .iter()
                        .cloned(),
                ),
                None => tokens.push(t.to_string()),
            }
        }
        if let Some(set) = key.strip_prefix('%') {
            sets.insert(set.to_string(), tokens);
            continue;
        }
        let path: Vec<&str> = key.split_whitespace().collect();
        let Some((program, subs)) = path.split_first() else {
            return Err(err("no program".into()));
        };
        let mut node = models.entry(program.to_string()).or_default();
        for sub in subs {
            let names: Vec<String> = sub.split('|').map(str::to_string).collect();
            let at = match node.subs.iter().position(|(n, _)| *n == names) {
                Some(at) => at,
                None => {
                    node.subs.push((names, Model::default()));
                    node.subs.len() - 1
                }
            };
            node = &mut node.subs[at].1;
        }
        for t in &tokens {
            token(node, t).map_err(|m| err(format!("{t}: {m}")))?;
        }
    }
    // (A program with subcommands may answer --help with its manual, through man.)
    for m in models
        .values_mut()
        .filter(|m| m.subs.is_empty() && !m.nohelp)
    {
        for o in ["help", "version"] {
            m.opts.long.entry(o.to_string()).or_insert(Arity::Flag);
        }
    }
    Ok(models)
}

/// Applies one token of a model line.
fn token(m: &mut Model, t: &str) -> Result<(), String> {
    if let Some(flag) = t.strip_prefix('@') {
        let (flag, list) = match flag.split_once(':') {
            Some((f, l)) => (f, l.split(',').map(str::to_string).collect()),
            None => (flag, Vec::new()),
        };
        match flag {
            "any" => m.any = true,
            "none" => m.none = true,
            "posix" => m.posix = true,
            "number" => m.number = true,
            "oldstyle" => m.oldstyle = true,
            "bare" => m.bare = true,
            "globals-first" => m.globals_first = true,
            "exact" => m.exact = true,
            "nohelp" => m.nohelp = true,
            "rule" => m.rule = true,
            "script" => m.script = true,
            "globs" => m.globs = true,
            "fixed" => m.fixed = true,
            "need" if !list.is_empty() => m.need = list,
            "deny" if !list.is_empty() => m.deny = list,
            "runs" if !list.is_empty() => m.runs = list,
            _ => return Err("unknown marker".into()),
        }
        return Ok(());
    }
    let (name, arity) = if let Some(n) = t.strip_suffix("[=]") {
        (n, Arity::Optional)
    } else if let Some(n) = t.strip_suffix('=') {
        (n, Arity::Value)
    } else {
        (t, Arity::Flag)
    };
    if let Some(long) = name.strip_prefix("--") {
        if long.is_empty() || long.contains('=') {
            return Err("not a long option".into());
        }
        m.opts.long.insert(long.to_string(), arity);
    } else if let Some(short) = name.strip_prefix('-') {
        let mut chars = short.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => {
                m.opts.short.insert(c, arity);
            }
            (Some(_), Some(_)) => {
                m.opts.words.insert(name.to_string(), arity);
            }
            _ => return Err("an empty option".into()),
        }
    } else {
        return Err("an option starts with `-`, a marker with `@`".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<Word> {
        s.iter().map(|a| Word::literal(a)).collect()
    }

    fn ok(name: &str, a: &[&str]) -> Accepted {
        let m = get(name).unwrap_or_else(|| panic!("no model for {name}"));
        check(name, m, &args(a)).unwrap_or_else(|e| panic!("{name} {a:?}: {e}"))
    }

    fn refused(name: &str, a: &[&str]) -> String {
        let m = get(name).unwrap_or_else(|| panic!("no model for {name}"));
        match check(name, m, &args(a)) {
            Ok(x) => panic!("{name} {a:?} accepted: {x:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn the_data_parses() {
        assert!(MODELS.len() > 100, "{}", MODELS.len());
        for (name, m) in MODELS.iter() {
            assert!(!name.is_empty());
            for r in &m.runs {
                assert!(!r.contains('/'), "{name} runs {r}: a name, not a path");
            }
        }
    }

    #[test]
    fn gnu_rules_apply() {
        // Abbreviations: unique prefixes are the option; an unknown one is refused.
        let a = ok("head", &["--li=5", "f"]);
        assert_eq!(a.options, [("--lines".to_string(), Some("5".to_string()))]);
        assert!(refused("sort", &["--outp=/x", "f"]).contains("--outp"));
        assert!(refused("sort", &["--compress-program=sh", "f"]).contains("compress"));
        // Clusters, attached and separate values.
        let a = ok("head", &["-qn5", "f"]);
        assert_eq!(a.options.len(), 2);
        let a = ok("tail", &["-n", "5", "-f", "x"]);
        assert_eq!(a.operands, ["x"]);
        // A value never counts as an operand; `--` ends options.
        let a = ok("grep", &["-e", "x", "--", "-v", "f"]);
        assert_eq!(a.operands, ["-v", "f"]);
        // A value taken from the next word that looks like an option is not taken for a
        // value: a program that takes it only attached reads it as an option
        // (`zstdcat -T -o f`); a negative number is a value.
        assert!(refused("grep", &["-e", "-x", "f"]).contains("looks like an option"));
        assert!(refused("zstdcat", &["-T", "-o", "/x", "f"]).contains("looks like an option"));
        ok("find", &[".", "-mtime", "-1"]);
        // Options after operands count (GNU permutes).
        assert!(refused("sort", &["f", "-o", "/etc/x"]).contains("-o"));
        // Numbers where the program takes them.
        ok("head", &["-20", "f"]);
        // Old-style clusters.
        let a = ok("tar", &["tzf", "a.tgz"]);
        assert_eq!(a.values(&["-f"]).collect::<Vec<_>>(), ["a.tgz"]);
        assert!(refused("tar", &["xzf", "a.tgz"]).contains("-x"));
        assert!(
            refused("tar", &["-tf", "a", "--checkpoint-action=exec=sh"]).contains("checkpoint")
        );
        assert!(refused("tar", &["-f", "a"]).contains("one of"));
    }

    #[test]
    fn subcommands_are_found_past_global_options() {
        assert_eq!(
            ok("systemctl", &["--no-pager", "status", "x"]).path,
            "systemctl status"
        );
        ok("systemctl", &["-n", "5", "status", "x"]);
        // A global option that takes a value the model does not know: not read-only,
        // rather than a guess at which word is the subcommand.
        assert!(refused("systemctl", &["--message", "status", "poweroff"]).contains("--message"));
        assert!(refused("systemctl", &["poweroff"]).contains("poweroff"));
        ok("systemctl", &[]);
        // git's global options come first; -c never.
        ok("git", &["-C", "/srv", "log", "--oneline", "-20"]);
        assert!(refused("git", &["-c", "core.pager=sh", "log"]).contains("-c"));
        assert!(refused("git", &["grep", "-Ocat", "x"]).contains("-O"));
        assert!(refused("git", &["ls-remote", "--upload-pack=x", "r"]).contains("upload-pack"));
        assert_eq!(ok("git", &["remote", "-v"]).path, "git remote");
        assert_eq!(ok("git", &["stash", "list"]).path, "git stash list");
    }

    /// Abbreviations are safe only when no option the program has (and the model does not
    /// list) is a prefix of one the model lists: the program would take it by its whole
    /// name where the model saw an abbreviation (`rg --pre` is not `--pretty`). Checked
    /// against what each installed program's `--help` says it takes.
    #[test]
    fn no_option_of_a_program_hides_behind_an_abbreviation() {
        let mut checked = Vec::new();
        let mut hidden = Vec::new();
        for (name, m) in MODELS.iter() {
            if m.exact || m.any || m.opts.long.is_empty() {
                continue;
            }
            let Some(help) = help_of(name) else { continue };
            for real in long_options(&help) {
                if m.opts.long.contains_key(&real) {
                    continue;
                }
                hidden.extend(
                    m.opts
                        .long
                        .keys()
                        .filter(|listed| listed.starts_with(&real))
                        .map(|listed| format!("{name}: --{real} would be read as --{listed}")),
                );
            }
            checked.push(name.as_str());
        }
        assert!(
            hidden.is_empty(),
            "options the models would misread:\n{}",
            hidden.join("\n")
        );
        assert!(
            checked.len() >= 40,
            "only {} programs checked: {checked:?}",
            checked.len()
        );
    }

    /// A program's `--help` text, when it is installed and answers within seconds.
    fn help_of(name: &str) -> Option<String> {
        let path = [
            "/usr/local/sbin",
            "/usr/local/bin",
            "/usr/sbin",
            "/usr/bin",
            "/sbin",
            "/bin",
        ]
        .iter()
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())?;
        let mut child = std::process::Command::new(path)
            .arg("--help")
            .env("LC_ALL", "C")
            .env("PAGER", "cat")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .ok()?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while child.try_wait().ok()?.is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let out = child.wait_with_output().ok()?;
        Some(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }

    /// Every `--name` a help text mentions.
    fn long_options(help: &str) -> std::collections::BTreeSet<String> {
        let b = help.as_bytes();
        let mut out = std::collections::BTreeSet::new();
        let mut i = 0;
        while i + 2 < b.len() {
            if &b[i..i + 2] == b"--" && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
                let start = i + 2;
                let mut end = start;
                while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'-') {
                    end += 1;
                }
                let name = help[start..end].trim_end_matches('-');
                if name.len() > 1 && b[start].is_ascii_alphabetic() {
                    out.insert(name.to_string());
                }
                i = end;
            } else {
                i += 1;
            }
        }
        out
    }

    #[test]
    fn expansions_that_could_be_options_are_refused() {
        let m = get("sort").unwrap();
        let w = vec![Word {
            lit: "$X".into(),
            dynamic: true,
            ..Word::default()
        }];
        assert!(check("sort", m, &w).is_err());
        let w = vec![Word {
            lit: "$HOME/f".into(),
            dynamic: true,
            ..Word::default()
        }];
        assert!(check("sort", m, &w).is_ok());
    }
}
