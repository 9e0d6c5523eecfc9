//! The risk classifier: what a command may do to the host, with the reasons, from its
//! text alone (pure: no I/O, no lookup of files or programs).
//!
//! Classes, in order: `read_only` < `reversible_low` < `config_mutation` < `destructive`.
//!
//! - A shell command is read as bash reads it (words, quoting, operators, substitutions,
//!   here-documents) by a lexer and word scanner of our own, linear in the text. Anything
//!   compound or indirect — lists, `&&`/`||`, pipes, `$(…)`, backticks, redirections,
//!   here-documents, subshells, function definitions, variable assignments, `eval`, `exec`,
//!   `sudo`/`su`/`doas`, `sh -c` — is never `read_only`, and every command inside it
//!   (including those in substitutions and `sh -c` scripts) is classified too: the class is
//!   the highest found.
//! - A command is `read_only` only when it is on the allow-list and its arguments pass that
//!   command's rule (`find` without `-delete`/`-exec`, `sed` without `-i` or `w`/`e`,
//!   `systemctl status`, `git log`, …); known destructive forms (recursive or forced `rm`,
//!   `dd`, `mkfs*`, `git push --force`, `DROP TABLE`, a download piped into a shell, a
//!   fork bomb, writes to block devices, …) are `destructive`; anything unknown is
//!   `config_mutation`.
//! - A declared risk can only raise the class, never lower it.
//! - `judge` reads a whole request: its environment and standard input can raise the class
//!   too (`request.rs`), so a read run with `PATH` or `LD_PRELOAD` set, or a shell given a
//!   script on its input, is judged for what it really runs.
#![forbid(unsafe_code)]

mod lex;
mod request;
mod rules;
mod shell;
mod word;

pub use request::Request;
pub use rules::models::{options_of, reviewed_script, runs_of};

use serde::{Deserialize, Serialize};

/// How much a command may change the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Reads only: runs at once.
    ReadOnly,
    /// Changes little, and that is easily undone (start a service, make a directory).
    ReversibleLow,
    /// Changes configuration or state; anything unknown.
    ConfigMutation,
    /// Destroys data or takes the host down: needs a typed confirmation.
    Destructive,
}

impl Class {
    pub const ALL: [Class; 4] = [
        Class::ReadOnly,
        Class::ReversibleLow,
        Class::ConfigMutation,
        Class::Destructive,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::ReadOnly => "read_only",
            Class::ReversibleLow => "reversible_low",
            Class::ConfigMutation => "config_mutation",
            Class::Destructive => "destructive",
        }
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Class {
    type Err = String;
    fn from_str(s: &str) -> Result<Class, String> {
        Class::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                format!("unknown risk class {s:?} (read_only, reversible_low, config_mutation or destructive)")
            })
    }
}

/// One finding: the class it implies and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub class: Class,
    pub why: String,
}

/// The class of a command and every reason found, highest class first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub class: Class,
    pub reasons: Vec<Reason>,
    /// Every program the command runs, as written (`ps`, `/usr/bin/git`), wrappers' inner
    /// commands included: for a `read_only` verdict, the only programs it was judged on
    /// (execd lets an `inspect` launch execute these and no other).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<String>,
    /// For a `read_only` shell command that is one simple command of literal words with
    /// nothing for the shell to expand (no variables, globs, tildes or braces) and no
    /// shell builtin to run: its words, to run without a shell (which then need not be
    /// executable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
}

/// A command as execd receives it.
#[derive(Debug, Clone, Copy)]
pub enum Command<'a> {
    /// A string run by `/bin/sh -c`.
    Shell(&'a str),
    /// A program and its arguments, run without a shell.
    Argv(&'a [String]),
}

/// Longest command text classified; a longer one is held as `destructive`, unread.
pub const MAX_LEN: usize = 64 * 1024;
/// How deep commands nested in commands (`$(…)`, `sh -c`, `eval`) are followed.
pub(crate) const MAX_DEPTH: u32 = 8;

/// Classifies a command; `declared` (the caller's own estimate) can only raise the class.
pub fn classify(command: Command<'_>, declared: Option<Class>) -> Verdict {
    word::new_budget();
    let mut acc = Acc::default();
    judge_command(command, &mut acc);
    acc.finish(declared)
}

/// Judges a whole request — its command, environment and standard input (`request.rs`);
/// `declared` can only raise the class. Without environment or input this is `classify`.
pub fn judge(request: Request<'_>, declared: Option<Class>) -> Verdict {
    word::new_budget();
    let mut acc = Acc::default();
    judge_command(request.command, &mut acc);
    request::environment(request.env, &mut acc);
    request::input(request.stdin, &mut acc);
    acc.finish(declared)
}

fn judge_command(command: Command<'_>, acc: &mut Acc) {
    match command {
        Command::Shell(s) if s.len() > MAX_LEN => {
            acc.unread(format!("longer than {MAX_LEN} bytes"))
        }
        Command::Shell(s) if s.trim().is_empty() => {
            acc.raise(Class::ConfigMutation, "an empty command")
        }
        Command::Shell(s) => {
            shell::script(s, acc);
        }
        Command::Argv([]) => acc.raise(Class::ConfigMutation, "an empty command"),
        Command::Argv(argv) if argv.iter().map(String::len).sum::<usize>() > MAX_LEN => {
            acc.unread(format!("longer than {MAX_LEN} bytes"))
        }
        Command::Argv(argv) => {
            let words: Vec<shell::Word> = argv.iter().map(|a| shell::Word::literal(a)).collect();
            rules::simple(&words, &shell::Place::default(), &[], acc);
        }
    }
}

/// The words of a lone simple command when a shell adds nothing to running them.
fn plain_argv(top: &[Vec<shell::Word>]) -> Option<Vec<String>> {
    let [words] = top else { return None };
    let first = words.first()?;
    if rules::SHELL_ONLY.contains(&first.lit.as_str())
        || rules::RESERVED.contains(&first.lit.as_str())
    {
        return None;
    }
    words
        .iter()
        .map(|w| {
            let special = w.dynamic || w.lit.contains(['*', '?', '[', ']', '{', '}', '~']);
            (!special).then(|| w.lit.clone())
        })
        .collect()
}

/// A file's name without its directories (and a download's query), if it names one.
fn file_name(path: &str) -> Option<String> {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let name = path.trim_end_matches('/').rsplit('/').next()?;
    (!name.is_empty() && !matches!(name, "." | ".." | "-")).then(|| name.to_string())
}

/// Whether the shell pattern `pattern` may match the file name `name`: `*` any run,
/// `?` and a bracket expression one character, a brace expansion any run (so it says yes
/// more often than the shell would, never less).
pub(crate) fn may_match(pattern: &str, name: &str) -> bool {
    matches_from(pattern, name, false)
}

/// Whether the shell pattern `pattern` may match a name that starts with `prefix`
/// (`/???/watchdog` may name a file under `/dev/`), as [`may_match`] says yes.
pub(crate) fn may_start_with(pattern: &str, prefix: &str) -> bool {
    matches_from(pattern, prefix, true)
}

/// [`may_match`]; with `prefix`, whether the pattern's first tokens match all of `name`
/// (the rest of it can always match something more).
fn matches_from(pattern: &str, name: &str, prefix: bool) -> bool {
    // The pattern as tokens: any run (`*`, a brace expansion), one character (`?`, a
    // bracket expression), or itself; matched over the name in one pass per token, so
    // the time is the product of their lengths whatever the stars (a backtracking
    // matcher takes exponential time on `*********…`).
    enum Token {
        Run,
        One,
        Char(char),
    }
    let p: Vec<char> = pattern.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < p.len() {
        let (token, close) = match p[i] {
            '*' => (Token::Run, None),
            '{' => (Token::Run, Some('}')),
            '?' => (Token::One, None),
            '[' => (Token::One, Some(']')),
            c => (Token::Char(c), None),
        };
        i = match close {
            // A bracket expression ends at the first `]` that is not its first member
            // (after `!` or `^`) and not inside a class (`[:alpha:]`, `[.a.]`, `[=a=]`).
            Some(']') => {
                let mut j = i + 1;
                if matches!(p.get(j), Some('!' | '^')) {
                    j += 1;
                }
                if p.get(j) == Some(&']') {
                    j += 1;
                }
                while j < p.len() && p[j] != ']' {
                    if p[j] == '['
                        && let Some(&kind) = p.get(j + 1).filter(|k| matches!(k, ':' | '.' | '='))
                        && let Some(end) = (j + 2..p.len().saturating_sub(1))
                            .find(|&k| p[k] == kind && p[k + 1] == ']')
                    {
                        j = end + 2;
                    } else {
                        j += 1;
                    }
                }
                (j + 1).min(p.len())
            }
            Some(c) => p[i + 1..]
                .iter()
                .position(|x| *x == c)
                .map_or(p.len(), |at| i + 1 + at + 1),
            None => i + 1,
        };
        tokens.push(token);
    }
    let n: Vec<char> = name.chars().collect();
    // matched[j]: the tokens so far match the name's first j characters.
    let mut matched = vec![false; n.len() + 1];
    matched[0] = true;
    for token in tokens {
        if prefix && matched[n.len()] {
            return true;
        }
        let mut next = vec![false; n.len() + 1];
        match token {
            Token::Run => {
                let mut any = false;
                for j in 0..=n.len() {
                    any |= matched[j];
                    next[j] = any;
                }
            }
            Token::One => next[1..].copy_from_slice(&matched[..n.len()]),
            Token::Char(c) => {
                for j in 1..=n.len() {
                    next[j] = matched[j - 1] && n[j - 1] == c;
                }
            }
        }
        matched = next;
    }
    matched[n.len()]
}

/// What classification has found so far.
#[derive(Debug, Default)]
pub(crate) struct Acc {
    reasons: Vec<Reason>,
    /// Somewhere, a program that fetches from the network…
    downloads: bool,
    /// …and, somewhere, a program that runs code it reads (a shell, an interpreter).
    interprets: bool,
    /// Somewhere, a shell that reads its script from its input…
    shell_input: bool,
    /// …or another interpreter that reads its program from its input.
    code_input: bool,
    /// The command being judged reads its input from a pipe (while it is judged).
    piped_in: bool,
    /// The command is compound or indirect (never `read_only`).
    compound: bool,
    /// Every program run, as written.
    programs: Vec<String>,
    /// How many findings were raised (repeats included), and how many of them said
    /// `read_only`.
    raised: u64,
    reads_raised: u64,
    /// The simple commands at the top level of a shell command (or the argv given).
    top: Vec<Vec<shell::Word>>,
    /// Somewhere, text that destroys data when a database client runs it (`DROP TABLE`)…
    sql: Option<String>,
    /// …and, somewhere, a database client.
    database: bool,
    /// The names of files the command writes (redirections, `tee`, `cp`, downloads)…
    written: Vec<String>,
    /// …and of the files it runs (programs, scripts given to a shell or interpreter,
    /// command files): one of them written too is code made at run time.
    ran: Vec<String>,
    /// It writes a file not named where it is read (sed's `w`).
    written_unnamed: bool,
    /// It runs a Python module (looked for in the current directory first).
    module: bool,
    /// It writes under `/etc/profile.d/` (or `/etc/bash*`), or under a `.git/`.
    wrote_profile_d: bool,
    wrote_git_dir: bool,
    /// …under `.ssh/` (a `ProxyCommand`), or where the system runs things later (cron,
    /// systemd units, init scripts).
    wrote_ssh: bool,
    wrote_later: bool,
    /// It evaluates arithmetic (`$((…))`, `((…))`, `let`, `[[ … -eq … ]]`)…
    arith: bool,
    /// …and decodes text at run time (`base64 -d`): a variable may hold a command in an
    /// array subscript, which arithmetic runs.
    decodes: bool,
    /// …or takes a value from outside the text (`read x < f`, `x=$(cat f)`): it may hold
    /// one.
    foreign: bool,
    /// …or builds a value that may be one in pieces (`x=a[; x+='$(…)]'`) or writes one
    /// out (`echo 'a[$(…)]' > f`).
    pieced: bool,
    /// It changed into, or linked to, a directory of descriptors (`cd /dev/fd`,
    /// `ln -s /proc/self/fd d`): a relative path it runs may be one.
    descriptor_dirs: bool,
    /// The shell's descriptors as `exec` left them (in any script it runs itself: `eval`,
    /// a group), those not listed as it got them.
    fds: Vec<(u32, shell::Source)>,
    depth: u32,
}

/// The file (or directory) `path` writes that the host needs to boot or to let anyone log
/// in, if it is one: accounts, sudo, PAM, mounts, the boot partition, the loader's preload.
fn vital(path: &str) -> Option<&'static str> {
    const VITAL: &[&str] = &[
        "/etc/passwd",
        "/etc/shadow",
        "/etc/group",
        "/etc/gshadow",
        "/etc/sudoers",
        "/etc/sudoers.d/",
        "/etc/pam.d/",
        "/etc/security/",
        "/etc/nsswitch.conf",
        "/etc/fstab",
        "/etc/crypttab",
        "/etc/ld.so.preload",
        "/boot/",
    ];
    // `/etc//passwd`, `/etc/./passwd` name it too.
    let mut p = path.replace("/./", "/");
    while p.contains("//") {
        p = p.replace("//", "/");
    }
    VITAL
        .iter()
        .find(|v| p == **v || (v.ends_with('/') && (p.starts_with(**v) || p == v[..v.len() - 1])))
        .copied()
}

impl Acc {
    pub(crate) fn raise(&mut self, class: Class, why: impl Into<String>) {
        self.raised += 1;
        if class == Class::ReadOnly {
            self.reads_raised += 1;
        }
        let why = why.into();
        if !self
            .reasons
            .iter()
            .any(|r| r.class == class && r.why == why)
        {
            self.reasons.push(Reason { class, why });
        }
    }

    /// Text the classifier could not read whole (too long, nested too deep, not complete):
    /// whatever the unread part does is unknown, so it is held as destructive — approved
    /// only on the Approvals page with its short id typed, never in an agent's client.
    pub(crate) fn unread(&mut self, why: impl std::fmt::Display) {
        self.raise(
            Class::Destructive,
            format!("{why}: not read whole, held as destructive"),
        );
    }

    /// Notes a file the command writes, by its name: whatever directory it is written in,
    /// the shell may have changed to it before the file is run.
    pub(crate) fn wrote(&mut self, path: &str) {
        self.wrote_profile_d |= path.contains("profile.d/") || path.contains("/etc/bash");
        self.wrote_git_dir |= path.contains(".git/") || path.ends_with(".gitconfig");
        self.wrote_ssh |= path.contains(".ssh/") || path.contains("/etc/ssh/");
        self.wrote_later |= [
            "/etc/cron",
            "/var/spool/cron",
            "/etc/anacrontab",
            "/etc/systemd/",
            "/lib/systemd/",
            ".config/systemd/",
            "/etc/init.d/",
            "/etc/rc.local",
        ]
        .iter()
        .any(|d| path.contains(d));
        if let Some(vital) = vital(path) {
            self.raise(
                Class::Destructive,
                format!("writes to {vital}, which the host needs to boot or to let anyone log in"),
            );
        }
        if let Some(name) = file_name(path) {
            self.written.push(name);
        }
    }

    /// Notes a file the command runs as a program or as code, by its name.
    pub(crate) fn runs_file(&mut self, path: &str) {
        if let Some(name) = file_name(path) {
            self.ran.push(name);
        }
    }

    /// Notes that the command writes a file it does not name where it is read (sed's
    /// `w`): any file it runs may be that one.
    pub(crate) fn wrote_unnamed(&mut self) {
        self.written_unnamed = true;
    }

    /// Notes that the command evaluates arithmetic.
    pub(crate) fn arithmetic(&mut self) {
        self.arith = true;
    }

    /// Notes that the command decodes text at run time.
    pub(crate) fn decodes(&mut self) {
        self.decodes = true;
    }

    /// Notes that the command takes a variable's value from outside its text.
    pub(crate) fn foreign(&mut self) {
        self.foreign = true;
    }

    /// Notes that the command builds a value in pieces, or holds a subscript's text.
    pub(crate) fn pieced(&mut self) {
        self.pieced = true;
    }

    /// Notes that the command runs a Python module, which Python looks for in the
    /// current directory first: a file the command writes may be that module.
    pub(crate) fn runs_module(&mut self) {
        self.module = true;
    }

    /// Takes in what `inner` found in text the request carries (its input), each reason
    /// prefixed with where it was found. Its findings pair among themselves, and what it
    /// writes and runs with what the command does (`sh; sh f` with `echo … > f` as input).
    pub(crate) fn absorb(&mut self, mut inner: Acc, prefix: &str) {
        inner.pairings();
        for r in inner.reasons {
            self.raise(r.class, format!("{prefix}{}", r.why));
        }
        self.compound |= inner.compound;
        self.written.append(&mut inner.written);
        self.ran.append(&mut inner.ran);
        self.written_unnamed |= inner.written_unnamed;
        self.module |= inner.module;
        self.descriptor_dirs |= inner.descriptor_dirs;
        self.arith |= inner.arith;
        self.wrote_profile_d |= inner.wrote_profile_d;
        self.wrote_git_dir |= inner.wrote_git_dir;
        self.wrote_ssh |= inner.wrote_ssh;
        self.wrote_later |= inner.wrote_later;
        self.decodes |= inner.decodes;
        self.pieced |= inner.pieced;
    }

    /// As [`Acc::absorb`], with only the reasons `self` did not find already (`inner`
    /// judged the same text another way), and the programs it found.
    pub(crate) fn absorb_new(&mut self, mut inner: Acc, prefix: &str) {
        inner.pairings();
        for r in std::mem::take(&mut inner.reasons) {
            if !self
                .reasons
                .iter()
                .any(|s| s.class == r.class && s.why == r.why)
            {
                self.raise(r.class, format!("{prefix}{}", r.why));
            }
        }
        for p in std::mem::take(&mut inner.programs) {
            if !self.programs.contains(&p) {
                self.programs.push(p);
            }
        }
        self.compound |= inner.compound;
    }

    /// What two findings mean together: a download and an interpreter, destructive SQL
    /// and a database client.
    fn pairings(&mut self) {
        if self.downloads && self.interprets {
            self.raise(
                Class::Destructive,
                "runs code fetched from the network (a download fed to a shell or interpreter)",
            );
            // The most telling reason of all: it leads.
            if let Some(at) = self
                .reasons
                .iter()
                .position(|r| r.why.contains("fetched from the network"))
            {
                let r = self.reasons.remove(at);
                self.reasons.insert(0, r);
            }
        }
        if let (Some(sql), true) = (self.sql.take(), self.database) {
            self.raise(Class::Destructive, format!("{sql} for a database client"));
        }
        // `echo '…' > f; sh f`: what runs is what the command wrote, not what was read.
        if let Some(name) = self.ran.iter().find(|r| self.written.contains(r)).cloned() {
            self.unread(format!(
                "runs `{name}`, a file the same command writes (its content is made at run time)"
            ));
        }
        // `sh ./s*`, `sh [s]` or `sh {s,}`: a pattern that may name a file it writes.
        if let Some(name) = self
            .ran
            .iter()
            .filter(|r| r.contains(['*', '?', '[', '{']))
            .find(|r| self.written_unnamed || self.written.iter().any(|w| may_match(r, w)))
            .cloned()
        {
            self.unread(format!(
                "runs `{name}`, a pattern that may match a file the same command writes"
            ));
        }
        // A file it runs (not a program it names, found in PATH, as `sed` itself).
        if self.written_unnamed
            && let Some(name) = self
                .ran
                .iter()
                .find(|r| !self.programs.contains(r))
                .cloned()
        {
            self.unread(format!(
                "runs `{name}`, which may be the file the same command writes (sed's w)"
            ));
        }
        if self.arith && self.decodes {
            self.unread(
                "evaluates arithmetic in a command that decodes text at run time: a value holding an array subscript with a command in it (`a[$(…)]`) runs that command",
            );
        }
        if self.arith && self.foreign {
            self.unread(
                "evaluates arithmetic in a command that takes a value from outside its text (a file, input, a program's output): a value holding an array subscript with a command in it (`a[$(…)]`) runs that command",
            );
        }
        if self.arith && self.pieced {
            self.unread(
                "evaluates arithmetic in a command that builds a value in pieces or holds a subscript's text: a value holding an array subscript with a command in it (`a[$(…)]`) runs that command",
            );
        }
        // Files a program reads as code of its own: a shell's start-up files (any shell),
        // a makefile (make), a repository's configuration and hooks (git).
        const STARTUP: &[&str] = &[
            ".bashrc",
            ".bash_profile",
            ".bash_login",
            ".bash_logout",
            ".profile",
            "bash.bashrc",
            "profile",
            ".zshrc",
            ".zshenv",
            ".zprofile",
            ".zlogin",
            ".zlogout",
            ".kshrc",
            ".mkshrc",
            "environment",
            ".inputrc",
        ];
        let runs = |what: &dyn Fn(&str) -> bool| {
            self.programs
                .iter()
                .any(|p| what(p.rsplit('/').next().unwrap_or(p)))
        };
        let shell = runs(&|p| rules::code_reader(p) == Some(true));
        let make = runs(&|p| matches!(p, "make" | "gmake"));
        let git = runs(&|p| p == "git");
        let ssh = runs(&|p| matches!(p, "ssh" | "scp" | "sftp" | "rsync" | "git"));
        let later = runs(&|p| matches!(p, "systemctl" | "crontab" | "service" | "run-parts"));
        let found = self.written.iter().find(|w| {
            (shell && (STARTUP.contains(&w.as_str()) || self.wrote_profile_d))
                || (make && matches!(w.as_str(), "Makefile" | "makefile" | "GNUmakefile"))
                || (git && (self.wrote_git_dir || w.as_str() == "config"))
                || (ssh && self.wrote_ssh)
                || (self.wrote_later && (later || self.decodes))
        });
        if let Some(file) = found.cloned() {
            self.unread(format!(
                "writes `{file}`, which a program it runs reads as code (a shell's start-up file, a makefile, a repository's configuration)"
            ));
        }
        // A name Python may import: a module or package of the same name.
        let importable = |w: &String| {
            [".py", ".pyc", ".pyw", ".so", ".pth"]
                .iter()
                .any(|x| w.ends_with(x))
                || !w.contains('.')
        };
        if self.module && (self.written_unnamed || self.written.iter().any(importable)) {
            self.unread(
                "runs a Python module while writing a file, which Python may import first (it looks in the current directory)",
            );
        }
    }

    fn finish(mut self, declared: Option<Class>) -> Verdict {
        self.pairings();
        if let Some(d) = declared {
            self.raise(d, format!("declared {d} by the caller"));
        }
        let mut class = self
            .reasons
            .iter()
            .map(|r| r.class)
            .max()
            .unwrap_or(Class::ConfigMutation);
        if self.compound && class == Class::ReadOnly {
            class = Class::ReversibleLow;
        }
        if self.reasons.is_empty() {
            self.raise(Class::ConfigMutation, "nothing recognised");
        }
        // Highest first; within a class, in the order found.
        self.reasons.sort_by_key(|r| std::cmp::Reverse(r.class));
        let argv = (class == Class::ReadOnly)
            .then(|| plain_argv(&self.top))
            .flatten();
        Verdict {
            class,
            reasons: self.reasons,
            programs: self.programs,
            argv,
        }
    }
}

#[cfg(test)]
mod tests;
