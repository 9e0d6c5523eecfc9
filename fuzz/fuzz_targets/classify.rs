//! The risk classifier takes any text, as a shell command, as argv or as a shell's
//! standard input, and gives a verdict with a reason, in bounded time and memory;
//! declaring a class never lowers it, and a request's input never lowers its command's.
//!
//! Quiet panic hook: libFuzzer's own aborts on any panic, even a caught one, while a panic
//! escaping the classifier still reaches libFuzzer and fails the run.
#![no_main]

use argos_risk::{Class, Command, Request, classify, judge};
use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        std::panic::set_hook(Box::new(|_| {}));
    },
    |data: &[u8]| {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        let shell = classify(Command::Shell(text), None);
        assert!(!shell.reasons.is_empty());
        let declared = classify(Command::Shell(text), Some(Class::ConfigMutation));
        assert_eq!(declared.class, shell.class.max(Class::ConfigMutation));
        let argv: Vec<String> = text.split('\0').map(str::to_string).collect();
        assert!(!classify(Command::Argv(&argv), None).reasons.is_empty());
        let env = Default::default();
        let fed = judge(
            Request {
                command: Command::Shell("sh"),
                env: &env,
                stdin: data,
            },
            None,
        );
        assert!(fed.class >= shell.class.max(Class::ConfigMutation));
    }
);
