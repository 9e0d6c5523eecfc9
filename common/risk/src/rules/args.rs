//! Reading a command's arguments: options (alone, clustered, long), operands, what a
//! wrapper's options take, and arguments that come from expansions.

use crate::shell::Word;
use crate::{Acc, Class};

use Class::ConfigMutation as Config;

/// The arguments' literal texts.
pub(super) fn lits(args: &[Word]) -> Vec<&str> {
    args.iter().map(|a| a.lit.as_str()).collect()
}

/// Whether an option is given: `-x` alone or in a cluster (`-rf`), or a long form
/// (`--force`, `--force=…`, or any abbreviation of it, as GNU's getopt takes one:
/// `--outp=/x` is `--output=/x`).
pub(super) fn flag(args: &[Word], short: &[char], long: &[&str]) -> bool {
    args.iter()
        .map(|a| a.lit.as_str())
        .take_while(|a| *a != "--")
        .any(|a| {
            if let Some(l) = a.strip_prefix("--") {
                let l = l.split('=').next().unwrap_or(l);
                !l.is_empty() && long.iter().any(|name| name.starts_with(l))
            } else if let Some(s) = a.strip_prefix('-') {
                !s.is_empty() && s.chars().any(|c| short.contains(&c))
            } else {
                false
            }
        })
}

/// Arguments that are not options (after `--`, everything).
pub(super) fn operands(args: &[Word]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut ended = false;
    for a in args {
        if !ended && a.lit == "--" {
            ended = true;
        } else if ended || !a.lit.starts_with('-') || a.lit == "-" {
            out.push(a.lit.as_str());
        }
    }
    out
}

/// Skips options (and the values of those in `valued`) to the first operand, as getopt
/// reads them: a value attached (`-uX`, `--user=X`) or the next word (`-u X`,
/// `--user X`, an abbreviation of a long name: `--kill 5` is `--kill-after 5`), and a
/// cluster whose letters are flags until one takes a value, the rest of the cluster or
/// the next word (`-iu postgres`, `-vs KILL`).
pub(super) fn after_options<'a>(args: &'a [Word], valued: &[&str]) -> &'a [Word] {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].lit.as_str();
        if a == "--" {
            return &args[i + 1..];
        }
        if !a.starts_with('-') || a == "-" {
            break;
        }
        i += if valued.contains(&a) {
            2
        } else if let Some(long) = a.strip_prefix("--") {
            let takes = !long.contains('=')
                && valued
                    .iter()
                    .filter_map(|v| v.strip_prefix("--"))
                    .any(|v| v.starts_with(long));
            if takes { 2 } else { 1 }
        } else {
            // A cluster: the first letter that takes a value ends it.
            let cluster = &a[1..];
            match cluster
                .char_indices()
                .find(|(_, c)| valued.iter().any(|v| v.len() == 2 && v.ends_with(*c)))
            {
                Some((at, c)) if at + c.len_utf8() == cluster.len() => 2,
                _ => 1,
            }
        };
    }
    &args[i.min(args.len())..]
}

pub(super) fn dynamic(args: &[Word], name: &str, acc: &mut Acc) -> bool {
    if args.iter().any(|a| a.dynamic) {
        acc.raise(
            Config,
            format!("`{name}` arguments come from expansions: cannot be checked"),
        );
        true
    } else {
        false
    }
}

/// The values given to an option, as a program with GNU-style options reads them: `-xV`,
/// `-x V`, at the end of a cluster (`-avx V`: the letters before it taken for flags),
/// `--name=V`, `--name V`, or an abbreviation of `--name`. An attached value is from an
/// expansion when its word is.
pub(super) fn values(args: &[Word], short: &[char], long: &[&str]) -> Vec<Word> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].lit.as_str();
        let dynamic = args[i].dynamic;
        i += 1;
        if a == "--" {
            break;
        }
        let attached = if let Some(l) = a.strip_prefix("--") {
            let (n, v) = l.split_once('=').map_or((l, None), |(n, v)| (n, Some(v)));
            if n.is_empty() || !long.iter().any(|name| name.starts_with(n)) {
                continue;
            }
            v
        } else if let Some(s) = a.strip_prefix('-') {
            let Some(at) = s.find(|c: char| short.contains(&c)) else {
                continue;
            };
            let rest = &s[at + 1..];
            (!rest.is_empty()).then_some(rest)
        } else {
            continue;
        };
        match attached {
            Some(v) => out.push(Word {
                lit: v.to_string(),
                dynamic,
                ..Word::default()
            }),
            None => {
                if let Some(w) = args.get(i) {
                    out.push(w.clone());
                    i += 1;
                }
            }
        }
    }
    out
}
