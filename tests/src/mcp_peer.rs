//! The npm MCP reference server `server-everything` (installed by
//! `scripts/install-test-tools` into `target/tools/mcp`), run as a real peer; and the
//! tests' own servers written with the Python SDK (`tests/mcp/*.py`, PyPI `mcp` in
//! `target/tools/mcp-py`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server's entry point.
pub fn entry() -> PathBuf {
    let p = crate::workspace_root().join(
        "target/tools/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        p.is_file(),
        "{} is missing: scripts/install-test-tools installs it",
        p.display()
    );
    p
}

/// `server-everything` serving Streamable HTTP (or the legacy HTTP+SSE transport) on a
/// free port; killed when dropped.
pub struct Everything {
    child: Child,
    pub port: u16,
    sse: bool,
}

impl Everything {
    pub fn start() -> Everything {
        Self::start_as("streamableHttp")
    }

    /// Started and brokered by the stack as server `everything` (marked local), added by
    /// `admin` through the API; answered once mcpd is connected to it.
    pub fn brokered(admin: &mut crate::web::Web) -> Everything {
        let everything = Everything::start();
        let r = admin.post(
            "/api/mcp/servers",
            serde_json::json!({"id": "everything", "name": "Everything", "local": true,
                               "streamable_http": {"url": everything.url()}}),
        );
        assert_eq!(r.status, 201, "{r:?}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while admin.get("/api/mcp/servers/everything").json()["server"]["state"] != "connected" {
            assert!(Instant::now() < deadline, "everything never connected");
            std::thread::sleep(Duration::from_millis(100));
        }
        everything
    }

    /// The legacy HTTP+SSE transport (`/sse`, then POSTs to the endpoint it names).
    pub fn start_sse() -> Everything {
        Self::start_as("sse")
    }

    fn start_as(mode: &str) -> Everything {
        let port = crate::free_port();
        let child = Command::new("node")
            .arg(entry())
            .arg(mode)
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("node");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "server-everything did not listen"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Everything {
            child,
            port,
            sse: mode == "sse",
        }
    }

    pub fn url(&self) -> String {
        let path = if self.sse { "sse" } else { "mcp" };
        format!("http://127.0.0.1:{}/{path}", self.port)
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Python MCP server of the tests': killed and reaped when dropped, so a test that
/// fails leaves none behind (it derefs to its process, to be killed earlier by hand).
pub struct Python(Child);

impl std::ops::Deref for Python {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Python {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `tests/mcp/{script}` with the Python SDK's interpreter, `PORT` and `env` set,
/// and waits until it listens on 127.0.0.1:`port`; it ends when the answer is dropped.
pub fn python(script: &str, port: u16, env: &[(&str, &str)]) -> Python {
    let root = crate::workspace_root();
    let python = root.join("target/tools/mcp-py/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: scripts/install-test-tools installs it",
        python.display()
    );
    let child = Command::new(python)
        .arg(root.join("tests/mcp").join(script))
        .env("PORT", port.to_string())
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting a Python MCP server");
    // Held from here: one that never listens is killed with the failing test.
    let server = Python(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "tests/mcp/{script} did not listen"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    server
}

/// The text pieces of a tool's result, joined.
pub fn texts(r: &argos_proto::mcp::v1::CallToolResponse) -> String {
    use argos_proto::mcp::v1 as pb;
    r.content
        .iter()
        .filter_map(|c| match &c.kind {
            Some(pb::content::Kind::Text(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// Every file under `dir` (a stack's state, searched for what must not be in it).
pub fn files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// A copy of `dir`'s contents where a contained launch can read them (its /tmp is its
/// own, /root and /home are hidden); gone with the answer.
pub fn readable_copy(dir: &std::path::Path) -> tempfile::TempDir {
    let place = tempfile::Builder::new()
        .prefix("argos-mcp-test-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(
        place.path(),
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let copied = Command::new("cp")
        .arg("-a")
        .arg(dir)
        .arg(place.path())
        .status()
        .unwrap();
    assert!(copied.success(), "copying {}", dir.display());
    place
}

/// The reference server, copied for a contained launch: the copy and its entry point.
pub fn everything_copy() -> (tempfile::TempDir, String) {
    let place = readable_copy(&crate::workspace_root().join("target/tools/mcp/node_modules"));
    let entry = place
        .path()
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let entry = entry.to_str().unwrap().to_string();
    (place, entry)
}
