//! Which dev stack a command means. `argosctl up` records the stack it runs — its tree and
//! gateway URL, with its own pid — in `<root>/stack.json`, and points the user's state
//! directory at it (`$XDG_STATE_HOME/argos/current-stack`, else
//! `~/.local/state/argos/current-stack`). A command without `--root` or `--url` uses, in
//! order: the stack recorded in `./.argos` if it runs, the stack the pointer names if it
//! runs, then the defaults (`./.argos`, `http://127.0.0.1:7000`). A record or pointer is
//! believed only if this user or root owns it and no one else may write it, and its `up`
//! runs as this user or root: a planted one must not send an API token elsewhere. Every
//! failure says which stack was meant and where that came from.
//!
//! Every place looked in — the working directory, the user's state directory, the
//! installed config — comes in a [`Places`]: the process's own in `argosctl`, a test's own
//! in the tests, so that no test reads (or writes) the real user's state or a global file.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The default tree, relative to the working directory.
pub const DEFAULT_ROOT: &str = ".argos";
/// The default gateway URL.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7000";

/// A stack `argosctl up` runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    pub root: PathBuf,
    pub url: String,
    /// The `argosctl up` that runs it.
    pub pid: u32,
}

/// The config the Debian package installs, read by the system's daemons.
pub const SYSTEM_CONFIG: &str = "/etc/argos/argos.toml";

/// Where a command looks for the stack it means.
#[derive(Debug, Clone)]
pub struct Places {
    /// The working directory (`./.argos` is relative to it).
    pub cwd: PathBuf,
    /// The user's state directory (`$XDG_STATE_HOME`, else `~/.local/state`), where the
    /// pointer to the stack `argosctl up` last started lives; `None` without either.
    pub state_home: Option<PathBuf>,
    /// The installed config ([`SYSTEM_CONFIG`]).
    pub system_config: PathBuf,
}

impl Places {
    /// This process's: its working directory, its user's state directory by its
    /// environment, the system's config.
    pub fn of_process() -> Places {
        let state_home = std::env::var_os("XDG_STATE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")));
        Places {
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            state_home,
            system_config: PathBuf::from(SYSTEM_CONFIG),
        }
    }

    /// The user's pointer to the stack `argosctl up` last started.
    pub fn pointer(&self) -> Option<PathBuf> {
        Some(
            self.state_home
                .as_ref()?
                .join("argos")
                .join("current-stack"),
        )
    }
}

/// The stack a command is about, and where that came from (for messages).
#[derive(Debug, Clone)]
pub struct Found {
    /// Where its daemons' sockets are.
    pub runtime_dir: PathBuf,
    /// Its config (which uid serves each socket).
    pub config: PathBuf,
    pub url: String,
    pub from: String,
}

/// A dev tree: `<root>/run`, `<root>/argos.toml`.
fn tree(
    root: &Path,
    url: Option<String>,
    from: String,
) -> (PathBuf, PathBuf, Option<String>, String) {
    (root.join("run"), root.join("argos.toml"), url, from)
}

/// The stack the package installed, if its config is there, root's alone, and reads.
fn system(config: &Path) -> Option<(PathBuf, PathBuf, Option<String>, String)> {
    if !trusted(config) {
        return None;
    }
    let text = std::fs::read_to_string(config).ok()?;
    let source = argos_common::config::Source {
        file: Some((config.display().to_string(), text)),
        env: Default::default(),
    };
    let c = argos_common::config::Config::parse(&source).ok()?;
    Some((
        c.runtime_dir,
        config.to_path_buf(),
        Some(format!("http://{}", c.gateway.listen)),
        format!("the system's stack ({})", config.display()),
    ))
}

fn record_file(root: &Path) -> PathBuf {
    root.join("stack.json")
}

/// Records a running stack (called by `argosctl up` once it is serving), and points the
/// user's state directory in `places` at it.
pub fn record(places: &Places, root: &Path, url: &str) -> anyhow::Result<()> {
    let r = Record {
        root: root.to_path_buf(),
        url: url.to_string(),
        pid: std::process::id(),
    };
    let file = record_file(root);
    write_atomic(&file, &serde_json::to_vec_pretty(&r)?)?;
    if let Some(p) = places.pointer() {
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
        }
        write_atomic(&p, root.display().to_string().as_bytes())?;
    }
    Ok(())
}

/// Forgets a stack that stopped: its record, and the pointer if it points at it.
pub fn forget(places: &Places, root: &Path) {
    let _ = std::fs::remove_file(record_file(root));
    if let Some(p) = places.pointer()
        && std::fs::read_to_string(&p).is_ok_and(|t| Path::new(t.trim()) == root)
    {
        let _ = std::fs::remove_file(p);
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    // Whatever the umask: a record others may write is not believed (`trusted`).
    let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o644);
    std::fs::set_permissions(&tmp, mode).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Whether a record, a tree or a pointer can be believed: owned by this user or root, not
/// a symlink, and writable by no one else. A record says where to send an API token;
/// another local user must not be able to plant one (in a shared directory, say).
fn trusted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let me = nix::unistd::geteuid().as_raw();
    std::fs::symlink_metadata(path).is_ok_and(|m| {
        !m.file_type().is_symlink() && (m.uid() == me || m.uid() == 0) && m.mode() & 0o022 == 0
    })
}

/// Whether a config can be believed as `trusted` says; the relocated dev tree's
/// `<root>/argos.toml` is a symlink into it, believed when the link is this user's or
/// root's and the file it names is trusted.
fn trusted_config(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let me = nix::unistd::geteuid().as_raw();
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            (m.uid() == me || m.uid() == 0)
                && std::fs::canonicalize(path).is_ok_and(|target| trusted(&target))
        }
        Ok(_) => trusted(path),
        Err(_) => false,
    }
}

/// The uids the stack's gateway may listen as, whom `ARGOS_TOKEN` may be sent to
/// (`listener.rs`): root (systemd's socket activation), this user, and the gateway uids
/// its config names — only a config this user or root wrote, as a planted one could name
/// anyone. Without one, root and this user.
pub fn gateway_uids(found: &Found) -> argos_common::connect::ServerUids {
    use argos_common::connect::ServerUids;
    if !trusted_config(&found.config) {
        return ServerUids::root_or_self();
    }
    let peers = std::fs::read_to_string(&found.config)
        .ok()
        .and_then(|text| {
            let source = argos_common::config::Source {
                file: Some((found.config.display().to_string(), text)),
                env: Default::default(),
            };
            argos_common::config::Config::parse(&source).ok()
        })
        .and_then(|c| {
            argos_common::peer::PeerTable::from_config(&c.peers, &argos_common::peer::SystemNames)
                .ok()
        });
    match peers {
        Some(p) => ServerUids::for_daemon(&p, argos_common::grpc::Daemon::Gatewayd),
        None => ServerUids::root_or_self(),
    }
}

/// The stack recorded under `root`, if its `argosctl up` still runs, as this user or root,
/// and the record and its tree are trusted.
fn running(root: &Path) -> Option<Record> {
    use std::os::unix::fs::MetadataExt as _;
    let file = record_file(root);
    if !trusted(root) || !trusted(&file) {
        return None;
    }
    let text = std::fs::read(&file).ok()?;
    let r: Record = serde_json::from_slice(&text).ok()?;
    let me = nix::unistd::geteuid().as_raw();
    let owner = std::fs::metadata(format!("/proc/{}", r.pid)).ok()?.uid();
    if owner != me && owner != 0 {
        return None;
    }
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", r.pid)).ok()?;
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let is_up =
        args.first().is_some_and(|a| a.ends_with(b"argosctl")) && args.get(1) == Some(&&b"up"[..]);
    (is_up && r.root == root).then_some(r)
}

/// The stack meant by `--root` and `--url` (either may be absent), looked for in `places`.
pub fn find(places: &Places, root: Option<PathBuf>, url: Option<String>) -> Found {
    let (runtime_dir, config, found_url, from) = match root {
        Some(r) => {
            let rec = running(&r);
            let from = format!("--root {}", r.display());
            tree(&r, rec.map(|x| x.url), from)
        }
        None => {
            let local = places.cwd.join(DEFAULT_ROOT);
            if let Some(r) = running(&local) {
                let from = format!(
                    "the running stack recorded in {}",
                    record_file(&local).display()
                );
                tree(&r.root, Some(r.url), from)
            } else if let Some(p) = places.pointer()
                && trusted(&p)
                && let Ok(t) = std::fs::read_to_string(&p)
                && let Some(r) = running(Path::new(t.trim()))
            {
                let from = format!("the running stack {} points to", p.display());
                tree(&r.root, Some(r.url), from)
            } else if let Some(found) = system(&places.system_config) {
                found
            } else {
                tree(
                    &local,
                    None,
                    "the default tree (no running stack recorded by argosctl up)".into(),
                )
            }
        }
    };
    let (url, from) = match url {
        Some(u) => (u, format!("{from}; --url")),
        None => (found_url.unwrap_or_else(|| DEFAULT_URL.into()), from),
    };
    Found {
        runtime_dir,
        config,
        url,
        from,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test's own places: a working directory and a state directory under `dir`, and an
    /// installed config that is not there unless the test writes it. Nothing of the real
    /// user's, nor `/etc`, is looked at.
    fn places(dir: &Path) -> Places {
        let cwd = dir.join("cwd");
        std::fs::create_dir_all(&cwd).unwrap();
        Places {
            cwd,
            state_home: Some(dir.join("state")),
            system_config: dir.join("etc-argos.toml"),
        }
    }

    /// A dev tree `running` believes whatever the umask: this user's, 0755.
    fn tree_in(dir: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let root = dir.join("tree");
        std::fs::create_dir(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        root
    }

    /// A process whose command line is `argosctl up` (what `running` looks for): bash,
    /// named so, running the script `up` that waits on its standard input.
    struct FakeUp(std::process::Child);

    impl FakeUp {
        fn start(dir: &Path) -> FakeUp {
            use std::os::unix::process::CommandExt as _;
            std::fs::write(dir.join("up"), "read -r _\n").unwrap();
            let child = std::process::Command::new("bash")
                .arg0("argosctl")
                .arg("up")
                .current_dir(dir)
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let cmdline = format!("/proc/{}/cmdline", child.id());
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::fs::read(&cmdline).unwrap_or_default() != b"argosctl\0up\0" {
                assert!(std::time::Instant::now() < deadline, "bash never ran");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            FakeUp(child)
        }
    }

    impl Drop for FakeUp {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_recorded_stack_is_found_only_while_its_up_runs() {
        let dir = tempfile::tempdir().unwrap();
        let places = places(dir.path());
        let root = tree_in(dir.path());
        // Recorded by a process that is not `argosctl up` (this test): not running.
        let mut r = Record {
            root: root.clone(),
            url: "http://127.0.0.1:7999".into(),
            pid: std::process::id(),
        };
        write_atomic(&record_file(&root), &serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(running(&root), None);
        let f = find(&places, Some(root.clone()), None);
        assert_eq!(f.url, DEFAULT_URL);
        assert!(f.from.contains("--root"), "{}", f.from);
        let f = find(&places, Some(root.clone()), Some("http://x:1".into()));
        assert_eq!(f.url, "http://x:1");
        assert_eq!(f.runtime_dir, root.join("run"));
        // Recorded by a running `argosctl up`: its URL.
        let up = FakeUp::start(dir.path());
        r.pid = up.0.id();
        write_atomic(&record_file(&root), &serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(running(&root), Some(r.clone()));
        let f = find(&places, Some(root.clone()), None);
        assert_eq!(f.url, "http://127.0.0.1:7999");
    }

    #[test]
    fn the_pointer_is_read_and_written_only_in_the_state_dir_places_names() {
        let dir = tempfile::tempdir().unwrap();
        let places = places(dir.path());
        let root = tree_in(dir.path());
        let url = "http://127.0.0.1:7998";
        record(&places, &root, url).unwrap();
        let pointer = dir.path().join("state/argos/current-stack");
        assert_eq!(places.pointer().as_deref(), Some(pointer.as_path()));
        assert_eq!(
            std::fs::read_to_string(&pointer).unwrap(),
            root.display().to_string()
        );
        // The record names this test, which is no `argosctl up`: the pointer leads nowhere.
        let f = find(&places, None, None);
        assert_eq!(f.url, DEFAULT_URL);
        assert_eq!(f.runtime_dir, places.cwd.join(DEFAULT_ROOT).join("run"));
        assert!(f.from.contains("default"), "{}", f.from);
        // Once a running `up` holds the record, the pointer in this state dir finds it.
        let up = FakeUp::start(dir.path());
        let r = Record {
            root: root.clone(),
            url: url.into(),
            pid: up.0.id(),
        };
        write_atomic(&record_file(&root), &serde_json::to_vec(&r).unwrap()).unwrap();
        let f = find(&places, None, None);
        assert_eq!(f.url, url);
        assert_eq!(f.runtime_dir, root.join("run"));
        assert!(
            f.from.contains(&pointer.display().to_string()),
            "{}",
            f.from
        );
        // Without a state dir, no pointer: the defaults.
        let none = Places {
            state_home: None,
            ..places.clone()
        };
        assert_eq!(find(&none, None, None).url, DEFAULT_URL);
        // Forgetting removes the record and the pointer that names it.
        forget(&places, &root);
        assert!(!pointer.exists() && !record_file(&root).exists());
        assert_eq!(find(&places, None, None).url, DEFAULT_URL);
    }

    #[test]
    fn the_installed_stack_is_found_by_its_config_when_no_dev_stack_runs() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let places = places(dir.path());
        let config = places.system_config.clone();
        std::fs::write(
            &config,
            "runtime_dir = \"/run/elsewhere\"\n[gateway]\nlisten = \"127.0.0.1:7123\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
        // The test's working directory has no `.argos`, its state dir no pointer.
        let f = find(&places, None, None);
        assert_eq!(f.runtime_dir, PathBuf::from("/run/elsewhere"));
        assert_eq!(f.config, config);
        assert_eq!(f.url, "http://127.0.0.1:7123");
        assert!(f.from.contains("system"), "{}", f.from);
        // --root still wins; and a config others may write is not believed.
        let f = find(&places, Some(dir.path().join("tree")), None);
        assert_eq!(f.runtime_dir, dir.path().join("tree/run"));
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o666)).unwrap();
        let f = find(&places, None, None);
        assert_eq!(f.url, DEFAULT_URL);
        assert!(f.from.contains("default"), "{}", f.from);
    }

    #[test]
    fn the_token_may_go_to_the_gateway_uids_of_a_config_only_if_it_is_trusted() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        let found = |config: PathBuf| Found {
            runtime_dir: dir.path().join("run"),
            config,
            url: DEFAULT_URL.into(),
            from: "a test".into(),
        };
        let config = dir.path().join("argos.toml");
        std::fs::write(
            &config,
            "[peers]\ngateway_uids = [64201]\nmcp_uids = [64202]\njob_uids = [64203]\n",
        )
        .unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
        let uids = gateway_uids(&found(config.clone()));
        for uid in [0, me, 64201] {
            assert!(uids.contains(uid), "{uid}: {uids}");
        }
        assert!(!uids.contains(64202) && !uids.contains(65534), "{uids}");
        // Through the relocated tree's symlink, as `up` links it.
        let link = dir.path().join("linked.toml");
        std::os::unix::fs::symlink(&config, &link).unwrap();
        assert!(gateway_uids(&found(link.clone())).contains(64201));
        // A config others may write, or none: only root and this user.
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o666)).unwrap();
        for path in [config.clone(), link, dir.path().join("missing.toml")] {
            let uids = gateway_uids(&found(path));
            assert!(!uids.contains(64201), "{uids}");
            assert!(uids.contains(0) && uids.contains(me), "{uids}");
        }
    }

    #[test]
    fn a_record_anyone_else_could_have_written_is_not_believed() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("stack.json");
        std::fs::write(&file, b"{}").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(trusted(&file));
        for mode in [0o666, 0o664, 0o646] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            assert!(!trusted(&file), "{mode:o}");
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        // A symlink to a trusted file is not the file.
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(!trusted(&link));
        // Another user's file (only root can make one to test with).
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
            assert!(!trusted(&file));
        }
        assert!(!trusted(&dir.path().join("missing")));
    }
}
