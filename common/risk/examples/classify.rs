//! Classifies shell commands as execd would judge them with no environment or input:
//! one per line on standard input ("⏎" stands for a newline, as in the corpus), or each
//! argument. Prints the class, then every reason.
//!
//! `cargo run -q -p argos-risk --example classify -- 'echo hi > f; sh < f'`

use std::io::BufRead;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let lines: Vec<String> = if args.is_empty() {
        std::io::stdin()
            .lock()
            .lines()
            .map_while(Result::ok)
            .collect()
    } else {
        args
    };
    for line in lines {
        let command = line.replace('⏎', "\n");
        let verdict = argos_risk::classify(argos_risk::Command::Shell(&command), None);
        println!("{}\t{line}", verdict.class);
        for r in &verdict.reasons {
            println!("\t{}: {}", r.class, r.why);
        }
    }
}
