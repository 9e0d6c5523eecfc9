//! argos-bench-risk: the risk classifier's throughput beside its floor, in one run.
//!
//! Classifies every command of the labeled corpus (`common/risk/src/corpus.tsv`) over and
//! over on one thread and prints commands per second, beside the same commands only
//! tokenized and parsed by brush-parser (a bash parser in Rust: what reading a command
//! costs elsewhere; the classifier reads them with its own lexer and judges them too), as
//! a ratio. Also prints the slowest single command. Run with `scripts/bench`.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use argos_risk::{Command, classify};
use argos_tests::measure::median;

const CORPUS: &str = include_str!("../../../common/risk/src/corpus.tsv");

fn commands() -> Vec<String> {
    CORPUS
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('\t').map(|(_, c)| c.replace('⏎', "\n")))
        .collect()
}

/// Commands per second of `f` over the corpus, median of 5 rounds of about a second.
fn rate(cmds: &[String], mut f: impl FnMut(&str)) -> f64 {
    let mut rates = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let mut n = 0u64;
        while t.elapsed() < Duration::from_secs(1) {
            for c in cmds {
                f(c);
            }
            n += cmds.len() as u64;
        }
        rates.push(n as f64 / t.elapsed().as_secs_f64());
    }
    median(&mut rates)
}

fn main() {
    const USAGE: &str = "usage: argos-bench-risk\n  the classifier's rate beside a shell parser's, and its slowest input";
    argos_tests::answer_help(USAGE);
    if let Some(a) = std::env::args().nth(1) {
        argos_tests::bad_argument(USAGE, &a);
    }
    let cmds = commands();
    let parse_only = rate(&cmds, |c| {
        if let Ok(t) = brush_parser::uncached_tokenize_str(c, &Default::default()) {
            std::hint::black_box(brush_parser::parse_tokens(&t, &Default::default()).is_ok());
        }
    });
    let classified = rate(&cmds, |c| {
        std::hint::black_box(classify(Command::Shell(c), None));
    });
    let (slowest, worst) = cmds
        .iter()
        .map(|c| {
            let t = Instant::now();
            for _ in 0..20 {
                std::hint::black_box(classify(Command::Shell(c), None));
            }
            (t.elapsed() / 20, c)
        })
        .max()
        .expect("a corpus");
    println!(
        "Argos risk classifier ({} corpus commands, one thread, medians of 5)",
        cmds.len()
    );
    println!(
        "  {:<44} {:>12.0} commands/s",
        "classify (risk::classify)", classified
    );
    println!(
        "  {:<44} {:>12.0} commands/s",
        "brush-parser tokenize + parse only", parse_only
    );
    println!(
        "  {:<44} {:>12.2}x",
        "classify / parse only",
        classified / parse_only
    );
    println!(
        "  {:<44} {:>12.1} µs  ({worst:?})",
        "slowest command",
        slowest.as_secs_f64() * 1e6
    );
}
