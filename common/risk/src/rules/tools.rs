//! Tools judged by their subcommand: systemctl, ip, the firewalls, git, container engines,
//! kubectl and package managers.

use super::args::{after_options, flag, lits, operands};
use super::wrappers::inner_command;
use crate::shell::Word;
use crate::{Acc, Class};

use Class::{ConfigMutation as Config, Destructive, ReadOnly, ReversibleLow as Low};

pub(super) fn systemctl(args: &[Word], acc: &mut Acc) {
    let rest = after_options(
        args,
        &[
            "-t",
            "--type",
            "-p",
            "--property",
            "-n",
            "--lines",
            "-o",
            "--output",
            "-H",
            "--host",
            "-M",
            "--machine",
            "--state",
            "--signal",
            "-s",
            "--kill-whom",
            "--kill-value",
            "-P",
            "--job-mode",
            "--what",
            "--message",
            "--when",
            "--check-inhibitors",
            "--reboot-argument",
            "--root",
            "--image",
            "--image-policy",
            "--preset-mode",
            "--timestamp",
            "--legend",
            "--boot-loader-menu",
            "--boot-loader-entry",
            "--drop-in",
            "--capsule",
            "-C",
        ],
    );
    let sub = rest.first().map_or("", |w| w.lit.as_str());
    // A unit that takes the host down, or out of service, when started.
    // The units that take the host down or out of service when started, as systemctl
    // names them (no suffix is `.service`; `runlevelN.target` are aliases).
    const DOWN: &[&str] = &[
        "poweroff.target",
        "reboot.target",
        "halt.target",
        "kexec.target",
        "soft-reboot.target",
        "rescue.target",
        "emergency.target",
        "suspend.target",
        "hibernate.target",
        "hybrid-sleep.target",
        "suspend-then-hibernate.target",
        "sleep.target",
        "ctrl-alt-del.target",
        "exit.target",
        "shutdown.target",
        "final.target",
        "umount.target",
        "runlevel0.target",
        "runlevel1.target",
        "runlevel6.target",
        "systemd-poweroff.service",
        "systemd-reboot.service",
        "systemd-halt.service",
        "systemd-kexec.service",
        "systemd-soft-reboot.service",
        "systemd-suspend.service",
        "systemd-hibernate.service",
        "systemd-hybrid-sleep.service",
        "systemd-suspend-then-hibernate.service",
        "systemd-exit.service",
        "rescue.service",
        "emergency.service",
    ];
    // The units whose stop ends every process of the host's users or services.
    // …or that cuts the host off, or the operator's way in.
    const SCOPES: &[&str] = &[
        "user.slice",
        "system.slice",
        "-.slice",
        "init.scope",
        "user@*.service",
        "user-*.slice",
        "session-*.scope",
        "sysinit.target",
        "basic.target",
        "multi-user.target",
        "network.target",
        "network-online.target",
        "networking.service",
        "systemd-networkd.service",
        "NetworkManager.service",
        "ssh.service",
        "sshd.service",
        "ssh.socket",
        "*.mount",
        "dbus.service",
        "dbus.socket",
        "systemd-logind.service",
    ];
    let named = |w: &Word, among: &[&str]| {
        let unit = if w.lit.contains('.') || w.lit.contains(['*', '?', '[']) {
            w.lit.clone()
        } else {
            format!("{}.service", w.lit)
        };
        // A pattern names every loaded unit it matches.
        w.dynamic
            || among
                .iter()
                .any(|u| crate::may_match(&unit, u) || crate::may_match(u, &unit))
    };
    let units = rest.get(1..).unwrap_or_default();
    let starts = matches!(
        sub,
        "start"
            | "restart"
            | "reload-or-restart"
            | "try-restart"
            | "try-reload-or-restart"
            | "condrestart"
            | "isolate"
            | "enqueue-marked-jobs"
    ) || (matches!(sub, "enable" | "reenable") && flag(args, &[], &["now"]))
        || matches!(sub, "set-default" | "add-wants" | "add-requires");
    if starts && units.iter().any(|w| named(w, DOWN)) {
        acc.raise(
            Destructive,
            format!("`systemctl {sub}` of a unit that takes the host down or out of service"),
        );
        return;
    }
    let stops = matches!(sub, "stop" | "kill" | "restart" | "freeze")
        || (matches!(sub, "disable" | "mask") && flag(args, &[], &["now"]));
    if stops && units.iter().any(|w| named(w, SCOPES)) {
        acc.raise(
            Destructive,
            format!(
                "`systemctl {sub}` of a slice, scope, mount or service that every other, the network or the operator's way in needs"
            ),
        );
        return;
    }
    if matches!(sub, "isolate" | "default")
        || flag(args, &[], &["job-mode"]) && args.iter().any(|w| w.lit.contains("isolate"))
    {
        acc.raise(
            Destructive,
            "isolating a target stops every unit it does not want",
        );
        return;
    }
    if sub == "clean" {
        acc.raise(
            Destructive,
            "`systemctl clean` deletes a unit's state, cache or log directories",
        );
        return;
    }
    // PID 1 answers any caller with a unit's `Environment=` and `SetCredential=` in plain
    // text, from a drop-in of mode 0600 too: `show` prints them unless the properties asked
    // for leave them out.
    if sub == "show" {
        let asked = super::args::values(args, &['p', 'P'], &["property"]);
        let secret = |p: &str| {
            let p = p.trim();
            p.is_empty()
                || p.starts_with("Environment")
                || p.starts_with("SetCredential")
                || p.starts_with("ImportCredential")
                || p.starts_with("LoadCredential")
        };
        if asked.is_empty()
            || asked
                .iter()
                .any(|w| w.dynamic || w.lit.split(',').any(secret))
        {
            acc.raise(
                Config,
                "`systemctl show` prints a unit's environment and credentials (name the properties with -p, leaving those out)",
            );
            return;
        }
    }
    match sub {
        "" | "status" | "show" | "is-active" | "is-enabled" | "is-failed" | "is-system-running"
        | "list-units" | "list-unit-files" | "list-timers" | "list-sockets" | "list-jobs"
        | "list-dependencies" | "list-machines" | "list-automounts" | "list-paths" | "cat"
        | "get-default" | "help" => acc.raise(ReadOnly, format!("`systemctl {sub}` only reads")),
        "start"
        | "restart"
        | "reload"
        | "try-restart"
        | "reload-or-restart"
        | "try-reload-or-restart"
        | "condrestart"
        | "force-reload" => acc.raise(Low, format!("`systemctl {sub}` starts or restarts units")),
        "reboot"
        | "poweroff"
        | "halt"
        | "kexec"
        | "rescue"
        | "emergency"
        | "soft-reboot"
        | "suspend"
        | "hibernate"
        | "hybrid-sleep"
        | "suspend-then-hibernate"
        | "sleep"
        | "exit" => acc.raise(
            Destructive,
            format!("`systemctl {sub}` takes the host down or out of service"),
        ),
        _ => acc.raise(Config, format!("`systemctl {sub}` changes units")),
    }
}

pub(super) fn ip(args: &[Word], acc: &mut Acc) {
    if args
        .iter()
        .any(|w| matches!(w.lit.as_str(), "-b" | "-batch" | "--batch" | "-force"))
    {
        acc.raise(Config, "`ip -batch` runs commands from a file");
        return;
    }
    // iproute2 takes any prefix of an option's name (`-fam` is `-family`, which takes
    // the next word): skipped as it reads them.
    let mut at = 0;
    while let Some(w) = args.get(at) {
        let o = w.lit.as_str();
        if w.dynamic || !o.starts_with('-') || o == "--" {
            if o == "--" {
                at += 1;
            }
            break;
        }
        let of = |name: &str| o.len() >= 2 && name.starts_with(o);
        if of("-batch") || (of("-force") && !of("-family")) {
            acc.raise(Config, "`ip -batch` runs commands from a file");
            return;
        }
        // (`-r` is `-resolve`, read before `-rcvbuf`.)
        let valued = ["-loops", "-family", "-netns"].iter().any(|n| of(n))
            || (o.len() >= 3 && "-rcvbuf".starts_with(o));
        at += if valued { 2 } else { 1 };
    }
    let rest = args.get(at..).unwrap_or(&[]);
    if rest.first().is_some_and(|w| w.dynamic) {
        acc.raise(Config, "`ip`: the object comes from an expansion");
        return;
    }
    let object = rest.first().map_or("", |w| w.lit.as_str());
    let verb = rest.get(1).map_or("", |w| w.lit.as_str());
    if object == "netns" && verb == "exec" {
        acc.compound = true;
        acc.raise(
            Config,
            "`ip netns exec` runs a command in a network namespace",
        );
        inner_command(rest.get(3..).unwrap_or(&[]), acc);
        return;
    }
    // `ip link s` is `set` (iproute2 tries it before `show`); for the other objects `s`
    // shows.
    let link = !object.is_empty() && "link".starts_with(object);
    // The objects read from the kernel's own tables. Not those reached by a generic
    // netlink family looked up by name (l2tp, macsec, fou, ila, …): the lookup loads the
    // family's module into the host's kernel, as root, for any caller. iproute2 takes the
    // first object a prefix names, in its own order (`m` is maddress, `mac` macsec).
    // iproute2's objects in its own order, each with whether it is read from a kernel table
    // (`false`: a generic netlink family).
    const OBJECTS: &[(&str, bool)] = &[
        ("address", true),
        ("addrlabel", true),
        ("maddress", true),
        ("route", true),
        ("rule", true),
        ("neighbor", true),
        ("neighbour", true),
        ("ntable", true),
        ("ntbl", true),
        ("link", true),
        ("l2tp", false),
        ("fou", false),
        ("ila", false),
        ("macsec", false),
        ("tunnel", true),
        ("tunl", true),
        ("tuntap", true),
        ("tap", true),
        ("token", true),
        ("tcpmetrics", false),
        ("tcp_metrics", false),
        ("monitor", true),
        ("xfrm", false),
        ("mroute", true),
        ("mrule", true),
        ("netns", true),
        ("netconf", true),
        ("vrf", false),
        ("sr", false),
        ("nexthop", true),
        ("mptcp", false),
        ("ioam", false),
        ("stats", true),
    ];
    let table = object == "-br"
        || OBJECTS
            .iter()
            .find(|(name, _)| !object.is_empty() && name.starts_with(object))
            .is_some_and(|(_, table)| *table);
    let reading = table
        && (matches!(
            verb,
            "" | "show" | "sh" | "list" | "ls" | "lst" | "l" | "get" | "monitor" | "help"
        ) || (verb == "s" && !link)
            || verb.starts_with("dev") && object.starts_with('l')
            || object == "-br");
    let words = lits(rest);
    // iproute2 takes any prefix of a verb (`fl`, `de`, `ch`); `s` is `set` for a link only.
    let is = |name: &str| {
        !verb.is_empty() && name.starts_with(verb) && (verb != "s" || (link && name == "set"))
    };
    let route = !object.is_empty() && ("route".starts_with(object) || object == "r");
    // A destination that is every address: a word, or zeros with a zero prefix or mask.
    let default = words.iter().any(|w| {
        matches!(*w, "default" | "all" | "any" | "0" | "::")
            || w.split_once('/').is_some_and(|(addr, len)| {
                addr.chars().all(|c| matches!(c, '0' | '.' | ':'))
                    && (len.trim_start_matches('0').is_empty()
                        || len.chars().all(|c| matches!(c, '0' | '.')))
            })
    });
    let address = !object.is_empty() && "address".starts_with(object);
    let rule = !object.is_empty() && "rule".starts_with(object) && object != "r";
    let cuts = (link
        && (is("set") || is("change"))
        && (words.contains(&"down")
            || words.contains(&"netns")
            || words
                .windows(2)
                .any(|p| p == ["carrier", "off"] || p == ["protodown", "on"])))
        || (address && is("delete"))
        || (rule
            && (is("delete")
                || words
                    .iter()
                    .any(|w| matches!(*w, "blackhole" | "prohibit" | "unreachable"))))
        || (link && is("delete"))
        || (route && (is("delete") || is("replace") || is("change")) && default);
    if is("flush") {
        acc.raise(
            Destructive,
            format!("`ip {object} flush` drops every address or route (may cut the host off)"),
        );
    } else if cuts {
        acc.raise(
            Destructive,
            format!("`ip {object} {verb}` takes an interface or the default route away (may cut the host off)"),
        );
    } else if reading {
        acc.raise(ReadOnly, format!("`ip {object}` only reads"));
    } else {
        acc.raise(Config, format!("`ip {object} {verb}` changes the network"));
    }
}

pub(super) fn firewall(name: &str, args: &[Word], acc: &mut Acc) {
    let a = lits(args);
    // Read as getopt reads them: in clusters (`-vF`), abbreviated (`--fl`), attached
    // (`-PINPUT`, `--policy=INPUT`).
    let given = |short: char, long: &str| flag(args, &[short], &[long]);
    let policy = super::args::values(args, &['P'], &["policy"]);
    let drops = |t: &&str| matches!(t.to_ascii_uppercase().as_str(), "DROP" | "REJECT");
    // The policy's target: the word after the chain (`-P INPUT DROP`), or after an
    // attached chain (`-PINPUT DROP`).
    let policy_drops = policy.iter().any(|chain| {
        a.iter()
            .position(|x| x.ends_with(&chain.lit))
            .and_then(|p| a.get(p + 1))
            .is_some_and(drops)
    });
    // A rule that drops everything: a DROP or REJECT target with nothing to match on.
    const SELECTORS: &[&str] = &[
        "-s",
        "--source",
        "-d",
        "--destination",
        "-p",
        "--protocol",
        "-i",
        "--in-interface",
        "-o",
        "--out-interface",
        "-m",
        "--match",
        "--dport",
        "--sport",
        "--dports",
        "--sports",
    ];
    let adds = given('A', "append") || given('I', "insert") || given('R', "replace");
    let drop_all = adds
        && super::args::values(args, &['j'], &["jump"])
            .iter()
            .any(|t| drops(&t.lit.as_str()))
        && !a.iter().any(|x| {
            SELECTORS
                .iter()
                .any(|s| x == s || (s.starts_with("--") && x.starts_with(&format!("{s}="))))
        });
    if given('F', "flush") || given('X', "delete-chain") {
        acc.raise(Destructive, format!("`{name}` flushes firewall rules"));
    } else if policy_drops || drop_all {
        acc.raise(
            Destructive,
            format!("`{name}` drops every packet of a chain: it can lock everyone out"),
        );
    } else if adds
        || given('D', "delete")
        || given('N', "new-chain")
        || given('E', "rename-chain")
        || !policy.is_empty()
        || given('Z', "zero")
    {
        acc.raise(Config, format!("`{name}` changes firewall rules"));
    } else if given('L', "list") || given('S', "list-rules") || given('C', "check") {
        acc.raise(ReadOnly, format!("`{name}` lists rules"));
    } else {
        acc.raise(Config, format!("`{name}` is not known to be harmless"));
    }
}

pub(super) fn git(args: &[Word], acc: &mut Acc) {
    // Global options before the subcommand.
    let mut i = 0;
    while i < args.len() {
        let a = args[i].lit.as_str();
        // A repository named outright is one git does not check the owner of
        // (`safe.directory` guards only one it finds): its configuration's commands
        // (`core.fsmonitor`, diff drivers, pagers) run, whoever planted them.
        if a == "--git-dir"
            || a.starts_with("--git-dir=")
            || a == "--work-tree"
            || a.starts_with("--work-tree=")
            || a == "--bare"
        {
            acc.raise(
                Config,
                "`git --git-dir`/`--work-tree`/`--bare` reads a named repository's configuration, whose commands git runs, without checking who owns it",
            );
        }
        match a {
            "-C" | "--namespace" | "--git-dir" | "--work-tree" => i += 2,
            "-c" | "--config-env" => {
                acc.raise(
                    Config,
                    "`git -c` sets configuration (which can run commands)",
                );
                // A command git will run: judged as the shell script it is.
                if let Some(w) = args.get(i + 1)
                    && git_runs(&w.lit.to_ascii_lowercase())
                {
                    let command = w.lit.split_once('=').map_or("", |(_, v)| v);
                    if w.dynamic {
                        acc.unread("`git -c` sets a command built at run time for git to run");
                    } else {
                        crate::shell::script(command.trim_start().trim_start_matches('!'), acc);
                    }
                }
                i += 2;
            }
            _ if a.starts_with('-') => i += 1,
            _ => break,
        }
    }
    let rest = &args[i.min(args.len())..];
    let Some((sub, sargs)) = rest.split_first() else {
        acc.raise(ReadOnly, "`git` with no subcommand prints help");
        return;
    };
    let sub = sub.lit.as_str();
    // `git rebase --exec CMD`, `-x CMD`: a shell command git runs after each commit.
    if sub == "rebase" {
        for w in super::args::values(sargs, &['x'], &["exec"]) {
            if w.dynamic {
                acc.unread("`git rebase --exec` runs a command built at run time");
            } else {
                crate::shell::script(&w.lit, acc);
            }
        }
    }

    let ops = operands(sargs);
    let sa = lits(sargs);
    let g = |what: &str| format!("`git {sub}` {what}");
    if let Some(why) = git_runs_or_configures(sub, sargs, &ops) {
        acc.raise(Config, g(why));
    }
    // Signatures shown or checked: git runs gpg (which keeps a state of its own) on a
    // temporary file it writes.
    if matches!(
        sub,
        "log"
            | "show"
            | "whatchanged"
            | "rev-list"
            | "for-each-ref"
            | "reflog"
            | "stash"
            | "tag"
            | "branch"
            | "shortlog"
    ) && sa
        .iter()
        .any(|a| a.starts_with("--show-signature") || a.contains("%G") || a.contains("%(signature"))
    {
        acc.raise(Low, g("checks signatures: git runs gpg"));
    }
    match sub {
        "status" | "log" | "diff" | "show" | "blame" | "annotate" | "shortlog" | "describe"
        | "rev-parse" | "rev-list" | "ls-files" | "ls-tree" | "ls-remote" | "cat-file" | "grep"
        | "whatchanged" | "show-ref" | "count-objects" | "version" | "help" | "show-branch"
        | "merge-base" | "name-rev" | "for-each-ref" | "cherry" | "range-diff" | "var"
        | "check-ignore" | "verify-commit" | "verify-tag" => {
            if sub == "diff" && flag(sargs, &[], &["output", "ext-diff"]) {
                acc.raise(Config, g("writes a file or runs an external diff"));
            } else {
                acc.raise(ReadOnly, g("only reads"));
            }
        }
        "branch" => {
            if flag(sargs, &['D'], &[])
                || sa
                    .iter()
                    .any(|x| *x == "-d" && flag(sargs, &['f'], &["force"]))
            {
                acc.raise(Destructive, g("-D deletes unmerged branches"));
            } else if flag(
                sargs,
                &['d', 'm', 'M', 'c', 'C', 'f', 'u'],
                &[
                    "delete",
                    "move",
                    "copy",
                    "force",
                    "set-upstream-to",
                    "unset-upstream",
                    "edit-description",
                ],
            ) {
                acc.raise(Config, g("changes branches"));
            } else if ops.is_empty()
                || flag(
                    sargs,
                    &['l'],
                    &["list", "contains", "merged", "no-merged", "points-at"],
                )
            {
                acc.raise(ReadOnly, g("lists branches"));
            } else {
                acc.raise(Low, g("creates a branch"));
            }
        }
        "tag" => {
            if flag(sargs, &['d'], &["delete"]) {
                acc.raise(Config, g("deletes tags"));
            } else if ops.is_empty()
                || flag(sargs, &['l'], &["list", "contains", "points-at", "merged"])
            {
                acc.raise(ReadOnly, g("lists tags"));
            } else {
                acc.raise(Low, g("creates a tag"));
            }
        }
        "remote" => match ops.first().copied().unwrap_or("") {
            "" | "show" | "get-url" => acc.raise(ReadOnly, g("lists remotes")),
            _ => acc.raise(Config, g("changes remotes")),
        },
        "config" => {
            if flag(
                sargs,
                &['l'],
                &[
                    "get",
                    "get-all",
                    "get-regexp",
                    "list",
                    "get-urlmatch",
                    "show-origin",
                ],
            ) || matches!(ops.first().copied(), Some("get" | "list"))
            {
                acc.raise(ReadOnly, g("reads configuration"));
            } else {
                acc.raise(Config, g("changes configuration"));
                // `git config core.fsmonitor CMD`: a command git will run, judged as the
                // shell script it is (as with `git -c`).
                let set: Vec<&Word> = sargs.iter().filter(|w| !w.lit.starts_with('-')).collect();
                if let [key, value, ..] = set[..]
                    && git_runs(&format!("{}=", key.lit.to_ascii_lowercase()))
                {
                    if key.dynamic || value.dynamic {
                        acc.unread("`git config` sets a command built at run time for git to run");
                    } else {
                        crate::shell::script(value.lit.trim_start().trim_start_matches('!'), acc);
                    }
                }
            }
        }
        "stash" => match ops.first().copied().unwrap_or("push") {
            "list" | "show" => acc.raise(ReadOnly, g("lists stashes")),
            "drop" | "clear" => acc.raise(Destructive, g("drops stashed changes")),
            _ => acc.raise(Low, g("stashes changes")),
        },
        "worktree" | "submodule" | "notes" | "reflog" => match ops.first().copied().unwrap_or("") {
            "" | "list" | "status" | "show" | "summary" => acc.raise(ReadOnly, g("only reads")),
            "expire" | "delete" | "remove" | "prune" | "deinit" => {
                acc.raise(Destructive, g("deletes history or work trees"))
            }
            _ => acc.raise(Config, g("changes the repository")),
        },
        "restore" if !flag(sargs, &['S'], &["staged"]) || flag(sargs, &['W'], &["worktree"]) => {
            acc.raise(Destructive, g("discards working-tree changes"));
        }
        "switch" if flag(sargs, &['f'], &["force", "discard-changes"]) => {
            acc.raise(Destructive, g("discards working-tree changes"));
        }
        "fetch" | "pull" | "add" | "commit" | "switch" | "merge" | "cherry-pick" | "revert"
        | "init" | "clone" | "gc" | "fsck" | "prune" | "repack" | "mv" | "restore"
            if sub != "gc" || !sa.iter().any(|x| x.starts_with("--prune=now")) =>
        {
            if sub == "restore"
                || (sub == "switch" && flag(sargs, &['f'], &["discard-changes", "force"]))
            {
                acc.raise(Config, g("discards working-tree changes"));
            } else if sub == "fsck" {
                acc.raise(ReadOnly, g("only reads"));
            } else {
                acc.raise(Low, g("records or fetches changes"));
            }
        }
        "push" => {
            if flag(
                sargs,
                &['f', 'd'],
                &[
                    "force",
                    "force-with-lease",
                    "force-if-includes",
                    "mirror",
                    "delete",
                    "prune",
                ],
            ) || ops
                .iter()
                .skip(1)
                .any(|r| r.starts_with('+') || r.starts_with(':'))
            {
                acc.raise(Destructive, g("rewrites or deletes remote history"));
            } else {
                acc.raise(Config, g("publishes commits"));
            }
        }
        "reset" => {
            if flag(sargs, &[], &["hard", "merge", "keep"]) {
                acc.raise(Destructive, g("--hard discards uncommitted work"));
            } else {
                acc.raise(Config, g("moves the branch"));
            }
        }
        "clean" => {
            if flag(sargs, &['n'], &["dry-run"]) {
                acc.raise(ReadOnly, g("-n only lists"));
            } else {
                acc.raise(Destructive, g("deletes untracked files"));
            }
        }
        "checkout" => {
            if ops.contains(&".") || sa.contains(&"--") || flag(sargs, &['f'], &["force"]) {
                acc.raise(Destructive, g("discards working-tree changes"));
            } else {
                acc.raise(Low, g("switches branches"));
            }
        }
        "filter-branch" | "filter-repo" | "update-ref" | "replace" | "gc" => {
            acc.raise(Destructive, g("rewrites or prunes history"))
        }
        _ => acc.raise(Config, g("is not known to be harmless")),
    }
}

pub(super) fn containers(name: &str, args: &[Word], acc: &mut Acc) {
    let rest = after_options(
        args,
        &[
            "-H",
            "--host",
            "-c",
            "--context",
            "--config",
            "-l",
            "--log-level",
        ],
    );
    let mut words = lits(rest);
    // `docker-compose …` is `docker compose …`.
    if name == "docker-compose" || name == "podman-compose" {
        words.insert(0, "compose");
    }
    let mut sub = words.first().copied().unwrap_or("");
    // `docker container ls` is `docker ps`; `docker compose …` and `docker image …` likewise.
    let group = sub;
    if matches!(
        group,
        "container"
            | "image"
            | "volume"
            | "network"
            | "system"
            | "compose"
            | "builder"
            | "context"
            | "node"
            | "service"
            | "stack"
            | "secret"
            | "config"
            | "plugin"
            | "buildx"
    ) {
        words.remove(0);
        sub = words
            .iter()
            .copied()
            .find(|w| !w.starts_with('-'))
            .unwrap_or("");
    }
    let d = |what: &str| {
        format!(
            "`{name} {group}{}{sub}` {what}",
            if group != sub { " " } else { "" }
        )
    };
    let read = matches!(
        sub,
        "ps" | "ls"
            | "list"
            | "inspect"
            | "logs"
            | "images"
            | "version"
            | "info"
            | "top"
            | "port"
            | "diff"
            | "history"
            | "stats"
            | "events"
            | "df"
            | "config"
            | "search"
    ) || (sub.is_empty() && group.is_empty());
    // A short option alone or in a cluster (`-fsv`), or its long form.
    let given = |short: char, long: &str| {
        words.iter().any(|w| {
            *w == long
                || w.strip_prefix('-')
                    .is_some_and(|c| !c.starts_with('-') && c.contains(short))
        })
    };
    let destructive = match group {
        "volume" => matches!(sub, "rm" | "remove" | "prune"),
        "system" => matches!(sub, "prune" | "reset"),
        "compose" => matches!(sub, "down" | "rm") && given('v', "--volumes"),
        _ => {
            matches!(sub, "rm" | "container-rm") && (given('v', "--volumes") || given('a', "--all"))
        }
    };
    if destructive {
        acc.raise(Destructive, d("deletes volumes or data"));
    } else if read && !(sub == "config" && group != "compose") {
        acc.raise(ReadOnly, d("only reads"));
    } else if matches!(sub, "start" | "restart" | "pull" | "unpause") {
        acc.raise(Low, d("starts or fetches"));
    } else {
        acc.raise(Config, d("changes containers"));
    }
}

pub(super) fn kubectl(name: &str, args: &[Word], acc: &mut Acc) {
    let rest = after_options(
        args,
        &[
            "-n",
            "--namespace",
            "--context",
            "--kubeconfig",
            "-s",
            "--server",
            "--cluster",
            "--user",
        ],
    );
    let words = lits(rest);
    let sub = words.first().copied().unwrap_or("");
    let next = words.get(1).copied().unwrap_or("");
    // `-f URL`: a manifest fetched from anywhere.
    let fetched = lits(args)
        .windows(2)
        .any(|p| matches!(p[0], "-f" | "--filename") && p[1].contains("://"))
        || lits(args).iter().any(|a| {
            (a.starts_with("--filename=") || (a.starts_with("-f") && !a.starts_with("--")))
                && a.contains("://")
        });
    if fetched {
        acc.raise(
            Config,
            format!("`{name} -f URL` fetches a manifest over the network"),
        );
    }
    match sub {
        "get" | "describe" | "logs" | "top" | "version" | "explain" | "api-resources"
        | "api-versions" | "cluster-info" | "events" | "diff" => {
            acc.raise(ReadOnly, format!("`{name} {sub}` only reads"))
        }
        "config"
            if matches!(
                next,
                "view" | "get-contexts" | "current-context" | "get-clusters" | "get-users"
            ) =>
        {
            acc.raise(ReadOnly, format!("`{name} config {next}` only reads"))
        }
        "auth" if next == "can-i" || next == "whoami" => {
            acc.raise(ReadOnly, format!("`{name} auth {next}` only reads"))
        }
        "delete" | "drain" => acc.raise(
            Destructive,
            format!("`{name} {sub}` deletes or evicts workloads"),
        ),
        "rollout" if next == "restart" || next == "status" || next == "history" => acc.raise(
            if next == "restart" { Low } else { ReadOnly },
            format!("`{name} rollout {next}`"),
        ),
        _ => acc.raise(Config, format!("`{name} {sub}` changes the cluster")),
    }
}

pub(super) fn packages(name: &str, args: &[Word], acc: &mut Acc) {
    let sub = operands(args).first().copied().unwrap_or("");
    match sub {
        "list" | "show" | "search" | "policy" | "depends" | "rdepends" | "info" | "repolist"
        | "check-update" | "query" | "changelog" | "provides" | "whatprovides" | "-Q" | "-Qi"
        | "-Ss" | "-Si" => acc.raise(ReadOnly, format!("`{name} {sub}` only reads")),
        "update" | "makecache" | "refresh"
            if !matches!(name, "dnf" | "yum" | "zypper") || sub != "update" =>
        {
            acc.raise(Low, format!("`{name} {sub}` refreshes package lists"))
        }
        _ if name == "pacman"
            && flag(args, &['Q'], &["query"])
            && !flag(args, &['R', 'S', 'U'], &[]) =>
        {
            acc.raise(ReadOnly, "`pacman -Q` only reads")
        }
        _ => acc.raise(
            Config,
            format!("`{name} {sub}` installs, removes or upgrades packages"),
        ),
    }
}

/// Why `git SUB …` runs a program an option names (`--upload-pack`, `--receive-pack`,
/// `--exec`, a clone's `-u`), takes configuration or hooks a clone does not otherwise
/// have (`-c`/`--config`, `--template`, `--separate-git-dir`), runs a transport helper a
/// remote names (`x::…` runs `git-remote-x`), or clones into a place programs read
/// configuration from (`~/.config/git`, `~/.ssh`, `/etc/…`), if it does.
fn git_runs_or_configures(sub: &str, sargs: &[Word], ops: &[&str]) -> Option<&'static str> {
    if !matches!(
        sub,
        "clone" | "fetch" | "pull" | "push" | "archive" | "ls-remote" | "submodule"
    ) {
        return None;
    }
    const NAMED: &[&str] = &[
        "upload-pack",
        "receive-pack",
        "exec",
        "config",
        "template",
        "separate-git-dir",
    ];
    for w in sargs {
        let a = w.lit.as_str();
        if a == "--" {
            break;
        }
        // Long options by any unambiguous prefix, as git takes them.
        if let Some(long) = a.strip_prefix("--") {
            let name = long.split_once('=').map_or(long, |(n, _)| n);
            if !name.is_empty() && NAMED.iter().any(|n| n.starts_with(name)) {
                return Some(
                    "with an option that names a program it runs, or configuration or hooks it takes",
                );
            }
        } else if sub == "clone"
            && a.len() > 1
            && a.starts_with('-')
            && a[1..]
                .chars()
                .take_while(|c| c.is_ascii_alphabetic())
                .any(|c| c == 'u' || c == 'c')
        {
            return Some("with `-u` (a program it runs) or `-c` (configuration it takes)");
        }
    }
    if ops.iter().any(|o| {
        o.split_once("::")
            .is_some_and(|(helper, _)| !helper.is_empty() && !helper.contains(['/', ':']))
    }) {
        return Some("names a remote helper (`x::…` runs `git-remote-x`)");
    }
    if sub == "clone" {
        let dest = match ops {
            [_, dest, ..] => dest.to_string(),
            [url] => url
                .trim_end_matches('/')
                .trim_end_matches(".git")
                .rsplit(['/', ':'])
                .next()
                .unwrap_or("")
                .to_string(),
            [] => String::new(),
        };
        if configures(&dest) {
            return Some("clones into a place programs read configuration or keys from");
        }
    }
    None
}

/// Whether a path is where programs read configuration, keys or start-up files from: the
/// system's directories, or a hidden file or directory (`~/.config/git`, `~/.ssh`).
fn configures(path: &str) -> bool {
    [
        "/etc",
        "/usr",
        "/lib",
        "/boot",
        "/var/spool",
        "/var/lib",
        "/root",
    ]
    .iter()
    .any(|d| path == *d || path.starts_with(&format!("{d}/")))
        || path
            .split('/')
            .any(|c| c.starts_with('.') && c != "." && c != "..")
}

/// Whether a `git -c key=value` makes git run a command: an alias to a shell (`!…`), or
/// a setting whose value is a command.
fn git_runs(kv: &str) -> bool {
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    (key.starts_with("alias.") && value.trim_start().starts_with('!'))
        || key.ends_with("sshcommand")
        || key.ends_with(".command")
        || key.ends_with(".textconv")
        || key.ends_with(".clean")
        || key.ends_with(".smudge")
        || key.ends_with(".process")
        || key.ends_with("editor")
        || key.ends_with("pager")
        || matches!(
            key,
            "core.fsmonitor"
                | "core.hookspath"
                | "core.askpass"
                | "diff.external"
                | "gpg.program"
                | "credential.helper"
                | "uploadpack.packobjectshook"
                | "core.gitproxy"
        )
        || key.starts_with("pager.")
}
