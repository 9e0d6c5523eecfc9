//! Warm shims: per profile, a few shims whose tree already stands (PID namespace and
//! init, mount/net/IPC/UTS namespaces, private /proc and /tmp, compiled seccomp filters),
//! each waiting for one launch. A launch takes one, and a new one is set up in the
//! background; with none ready, the launch sets one up itself. A shim runs exactly one
//! launch and never sees another: nothing carries over between launches. What a tree
//! hides (denied paths, credential stores) is found and masked when its launch is taken,
//! not ahead: a secret made or replaced while the shim waited is hidden too.
//!
//! A waiting shim holds nothing of a user's and reads its launch id on a pipe from execd:
//! when execd goes away the pipe closes and the shim ends its tree and exits.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::launch::{LaunchError, Launcher};
use crate::profile;
use crate::protocol::{ACCEPTED, ShimReady, ShimSetup, control_line};

/// How long a shim may take to set up its tree.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a waiting shim has to exit once its pipe closes before it is killed.
const END_WAIT: Duration = Duration::from_secs(2);

/// How long a stop waits for the shims refills are still setting up (a setup takes
/// milliseconds; the stop itself has two seconds).
const REFILL_WAIT: Duration = Duration::from_secs(2);

/// How long a warm shim may wait for its launch. What its setup found of the host is as
/// old as it is (the mounts it sees, the programs among the libraries it masked), so an
/// older one is ended and passed over.
const MAX_WAIT: Duration = Duration::from_secs(300);

/// A shim whose tree stands, waiting for its launch.
pub struct Shim {
    child: Child,
    control: ChildStdin,
    out: BufReader<ChildStdout>,
    pub ready: ShimReady,
    /// When its tree stood.
    stood: std::time::Instant,
}

/// A shim running a launch, as execd sees it while it lives.
pub struct Running {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Running {
    /// Returns once the launch is over: the shim closes its stdout right after writing the
    /// exit marker (or by dying). The shim is reaped in the background.
    pub async fn ended(mut self) {
        let mut rest = Vec::new();
        let _ = self.out.read_to_end(&mut rest).await;
        tokio::spawn(async move {
            if let Err(e) = self.child.wait().await {
                tracing::warn!(error = %e, "reaping a shim");
            }
        });
    }
}

impl Shim {
    /// Ends a waiting shim: its pipe closes, it exits; killed if it has not within 2 s.
    async fn end(self) {
        let Shim {
            mut child, control, ..
        } = self;
        drop(control);
        if tokio::time::timeout(END_WAIT, child.wait()).await.is_err() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// Hands the launch to the shim (its spec is in the launch dir by now) and waits for
    /// its acceptance: from then on the launch is the shim's, and its followers' socket is
    /// up (control steps 3 and 4 of `crate::protocol`).
    pub async fn assign(mut self, id: &str) -> Result<Running, LaunchError> {
        let line = format!("{id}\n");
        let handed = async {
            self.control.write_all(line.as_bytes()).await?;
            let mut ok = String::new();
            self.out.read_line(&mut ok).await?;
            if ok.trim() == ACCEPTED {
                Ok(())
            } else {
                Err(std::io::Error::other(format!(
                    "the shim did not take the launch: {:?}",
                    ok.trim()
                )))
            }
        };
        let handed = tokio::time::timeout(SETUP_TIMEOUT, handed)
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the shim did not answer")));
        drop(self.control);
        handed.map_err(|source| LaunchError::Shim {
            path: PathBuf::from("argos-shim"),
            source,
        })?;
        Ok(Running {
            child: self.child,
            out: self.out,
        })
    }
}

/// The warm shims of every profile.
pub struct Pool {
    shim: PathBuf,
    setups: HashMap<String, ShimSetup>,
    size: usize,
    ready: Mutex<HashMap<String, VecDeque<Shim>>>,
    /// Shims being set up, per profile (so a refill does not overshoot).
    filling: Mutex<HashMap<String, usize>>,
    /// execd is stopping: no new shims; one that finishes its setup now is ended.
    closed: std::sync::atomic::AtomicBool,
    /// Told each time a refill's shim is placed or ended, so a stop can wait for them.
    settled: tokio::sync::Notify,
}

impl Pool {
    /// One setup per profile, as the launcher would plan it (the workspace and run-as uid
    /// come with each launch).
    pub fn new(launcher: &Launcher, size: usize) -> Arc<Pool> {
        let setups = launcher
            .profiles
            .0
            .iter()
            .map(|(name, p)| {
                let plan = profile::plan(
                    name,
                    p,
                    &launcher.work_root.join("pool"),
                    &launcher.host,
                    &launcher.disabled,
                    launcher.launch_uids.0,
                );
                let setup = ShimSetup {
                    plan,
                    launches_dir: launcher.launches_dir(),
                    work_root: launcher.work_root.clone(),
                    mask_file: launcher.mask_file(),
                };
                (name.clone(), setup)
            })
            .collect();
        Arc::new(Pool {
            shim: launcher.shim.clone(),
            setups,
            size,
            ready: Mutex::new(HashMap::new()),
            filling: Mutex::new(HashMap::new()),
            closed: std::sync::atomic::AtomicBool::new(false),
            settled: tokio::sync::Notify::new(),
        })
    }

    /// Ends every waiting shim and reaps it (execd is stopping): closing its end of the
    /// shim's pipe tells it to go, and it is killed if it has not within 2 s. Shims still
    /// being set up are ended as their setup finishes, and waited for (at most
    /// [`REFILL_WAIT`]), so that none outlives execd unreaped.
    pub async fn drain(&self) {
        let waiting: Vec<Shim> = {
            // Closed under the lock a refill places its shim under: a shim is either
            // placed before this (and ended here) or sees the pool closed (and ends).
            let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
            ready.drain().flat_map(|(_, q)| q).collect()
        };
        futures_util::future::join_all(waiting.into_iter().map(Shim::end)).await;
        let refills_done = async {
            loop {
                let settled = self.settled.notified();
                if self.filling_now() == 0 {
                    return;
                }
                settled.await;
            }
        };
        if tokio::time::timeout(REFILL_WAIT, refills_done)
            .await
            .is_err()
        {
            tracing::warn!(
                shims = self.filling_now(),
                "warm shims still being set up at the stop: they end when execd's pipe to them closes"
            );
        }
    }

    /// How many shims refills are setting up now.
    fn filling_now(&self) -> usize {
        let filling = self.filling.lock().unwrap_or_else(|e| e.into_inner());
        filling.values().sum()
    }

    /// Fills every profile's pool (in the background).
    pub fn fill(self: &Arc<Self>) {
        for name in self.setups.keys() {
            self.refill(name);
        }
    }

    /// A shim ready for a launch in `profile`: a warm one if there is one, else one set up
    /// now. The caller tops the pool up ([`Pool::refill`]) once its launch is handed over,
    /// so the refill does not compete with that launch's start.
    pub async fn take(self: &Arc<Self>, profile: &str) -> Result<Shim, LaunchError> {
        let warm = {
            let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
            let queue = ready.entry(profile.to_string()).or_default();
            let mut found = None;
            while let Some(mut s) = queue.pop_front() {
                // One that died while waiting (killed by hand, say) is passed over, and
                // one that waited too long is ended.
                if !matches!(s.child.try_wait(), Ok(None)) {
                    continue;
                }
                if s.stood.elapsed() > MAX_WAIT {
                    tokio::spawn(s.end());
                    continue;
                }
                found = Some(s);
                break;
            }
            found
        };
        match warm {
            Some(s) => Ok(s),
            None => self.spawn(profile).await,
        }
    }

    /// Starts shims in the background until `profile` has its number standing.
    pub fn refill(self: &Arc<Self>, profile: &str) {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let want = {
            let ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
            let mut filling = self.filling.lock().unwrap_or_else(|e| e.into_inner());
            let have = ready.get(profile).map_or(0, VecDeque::len);
            let busy = filling.entry(profile.to_string()).or_default();
            let want = self.size.saturating_sub(have + *busy);
            *busy += want;
            want
        };
        for _ in 0..want {
            let me = self.clone();
            let profile = profile.to_string();
            tokio::spawn(async move {
                let made = me.spawn(&profile).await;
                let late = {
                    let mut ready = me.ready.lock().unwrap_or_else(|e| e.into_inner());
                    match made {
                        Ok(s) if me.closed.load(std::sync::atomic::Ordering::SeqCst) => Some(s),
                        Ok(s) => {
                            ready.entry(profile.clone()).or_default().push_back(s);
                            None
                        }
                        Err(e) => {
                            tracing::warn!(profile, error = %e, "setting up a warm shim");
                            None
                        }
                    }
                };
                // Stopping: this one is ended and reaped before it counts as settled.
                if let Some(s) = late {
                    s.end().await;
                }
                {
                    let mut filling = me.filling.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(n) = filling.get_mut(&profile) {
                        *n = n.saturating_sub(1);
                    }
                }
                me.settled.notify_waiters();
            });
        }
    }

    /// Starts a shim and waits until its tree stands.
    async fn spawn(&self, profile: &str) -> Result<Shim, LaunchError> {
        let shim_err = |source: std::io::Error| LaunchError::Shim {
            path: self.shim.clone(),
            source,
        };
        let setup = self.setups.get(profile).ok_or_else(|| {
            shim_err(std::io::Error::other(format!(
                "no setup for profile {profile}"
            )))
        })?;
        let mut child = Command::new(&self.shim)
            .arg("--pool")
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(false)
            .spawn()
            .map_err(shim_err)?;
        let mut control = child.stdin.take().expect("piped stdin");
        let out = child.stdout.take().expect("piped stdout");
        let line = control_line(setup);
        let mut out = BufReader::new(out);
        let answer = async {
            control.write_all(&line).await?;
            let mut answer = String::new();
            out.read_line(&mut answer).await?;
            Ok::<_, std::io::Error>(answer)
        };
        let answer = match tokio::time::timeout(SETUP_TIMEOUT, answer).await {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => return Err(shim_err(e)),
            Err(_) => {
                let _ = child.start_kill();
                return Err(shim_err(std::io::Error::other(
                    "the shim did not finish its setup in time",
                )));
            }
        };
        match serde_json::from_str::<ShimReady>(&answer) {
            Ok(ready) => Ok(Shim {
                child,
                control,
                out,
                ready,
                stood: std::time::Instant::now(),
            }),
            Err(_) => {
                let status = child.wait().await.ok();
                Err(shim_err(std::io::Error::other(format!(
                    "the shim's setup failed: {} ({})",
                    answer.trim(),
                    status.map_or("no status".into(), |s| s.to_string())
                ))))
            }
        }
    }
}
