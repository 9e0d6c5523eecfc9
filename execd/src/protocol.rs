//! The shim protocol, both ends in one module: execd (`pool.rs`, `output.rs`,
//! `terminal.rs`) and `argos-shim` (`shim/mod.rs`, `shim/follow.rs`) read and write it
//! only through these types and functions. Every integer on the wire is little-endian.
//!
//! **Control**, over the shim's stdin and stdout, one line each:
//!
//! 1. execd → shim: a [`ShimSetup`] (JSON): the profile's plan, set up before any launch;
//! 2. shim → execd: a [`ShimReady`] (JSON: the shim's and init's identities) once the tree
//!    stands, or `error: <why>`;
//! 3. execd → shim: the launch id (its `spec.json` is in place). EOF instead: no launch,
//!    the tree ends;
//! 4. shim → execd: [`ACCEPTED`]: the launch is the shim's and its follow socket listens.
//!    The shim's stdout then stays open until the exit marker is written.
//!
//! **Follow and attach**, over the shim's abstract socket [`socket_name`] (only the
//! shim's own uid may connect): the client sends one [`Request`] line; the shim sends
//! frames `[kind u8][offset u64][len u32][payload]` ([`header`]): stdout, stderr, an
//! error (payload: the reason; the shim then closes), or, first to a client asking for a
//! terminal's `tail`, where the recorded output ends. A client that asked to write then
//! sends input frames `[kind u8][len u32][payload]` ([`Input`]): bytes, a terminal's
//! resize, or the end of input.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::spec::{Identity, Plan};

/// What execd tells a new shim before any launch exists (control step 1): the
/// containment its profile needs up front (namespaces, mounts, seccomp; the masks are
/// applied when the launch is taken), and where launches will appear.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimSetup {
    /// The profile's plan; the per-launch parts (workspace, run-as uid) come with the spec.
    pub plan: Plan,
    pub launches_dir: PathBuf,
    pub work_root: PathBuf,
    /// An empty, mode-000, root-owned file that is bound over denied files.
    pub mask_file: PathBuf,
}

impl ShimSetup {
    /// Whether a launch's plan is the one this shim set up for: equal but for the parts
    /// applied per launch.
    pub fn fits(&self, plan: &Plan) -> bool {
        let per_launch = Plan {
            writable: self.plan.writable.clone(),
            run_as: self.plan.run_as,
            // The workspace's bound is the profile's; only its path is the launch's.
            workspace_limit: plan
                .workspace_limit
                .as_ref()
                .map(|w| crate::spec::WorkspaceLimit {
                    path: self
                        .plan
                        .workspace_limit
                        .as_ref()
                        .map_or_else(|| w.path.clone(), |mine| mine.path.clone()),
                    ..w.clone()
                }),
            ..plan.clone()
        };
        per_launch == self.plan
    }
}

/// What a shim answers once its setup is done (control step 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShimReady {
    pub shim: Identity,
    pub init: Identity,
}

/// The shim's answer to a launch id (control step 4).
pub const ACCEPTED: &str = "ok";

/// One control line: `msg` as JSON, newline-terminated.
pub fn control_line<T: Serialize>(msg: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(msg).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The abstract socket name of a launch's shim.
pub fn socket_name(id: &str) -> String {
    format!("argos/launch/{id}")
}

/// Where a client's stdout starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    Offset(u64),
    /// The recent output a terminal keeps in memory (its scrollback).
    Tail,
}

/// A client's request line: where each stream starts, and whether it is the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub stdout: From,
    pub stderr: u64,
    pub write: bool,
}

/// The longest request line a shim reads.
pub const MAX_REQUEST: usize = 100;

impl Request {
    /// The line a client sends: `<stdout offset | tail> <stderr offset>[ w]\n`.
    pub fn line(&self) -> String {
        let from = match self.stdout {
            From::Offset(o) => o.to_string(),
            From::Tail => "tail".into(),
        };
        format!(
            "{from} {}{}\n",
            self.stderr,
            if self.write { " w" } else { "" }
        )
    }

    /// Reads a request line (without its newline); `None` if it is not one.
    pub fn parse(line: &str) -> Option<Request> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let stdout = match *words.first()? {
            "tail" => From::Tail,
            w => From::Offset(w.parse().ok()?),
        };
        let stderr = words.get(1)?.parse().ok()?;
        let write = match words.get(2) {
            None => false,
            Some(&"w") => true,
            Some(_) => return None,
        };
        (words.len() <= 3).then_some(Request {
            stdout,
            stderr,
            write,
        })
    }
}

pub const KIND_STDOUT: u8 = 1;
pub const KIND_STDERR: u8 = 2;
pub const KIND_ERROR: u8 = 3;
/// First frame to a client asking for a terminal's `tail`: its offset is where the output
/// recorded so far ends (what comes before it is replay).
pub const KIND_LIVE: u8 = 4;
/// Bytes of a frame's header.
pub const HEADER: usize = 13;
/// Largest payload of one frame.
pub const MAX_FRAME: usize = 1024 * 1024;

/// The frame kind of output stream `i` (0 stdout, 1 stderr).
pub const STREAM_KINDS: [u8; 2] = [KIND_STDOUT, KIND_STDERR];

/// One frame's header.
pub fn header(kind: u8, offset: u64, len: usize) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[0] = kind;
    h[1..9].copy_from_slice(&offset.to_le_bytes());
    h[9..13].copy_from_slice(&(len as u32).to_le_bytes());
    h
}

/// A frame's header read back: (kind, offset, payload length).
pub fn parse_header(h: &[u8; HEADER]) -> (u8, u64, usize) {
    let offset = u64::from_le_bytes(h[1..9].try_into().expect("8 bytes"));
    let len = u32::from_le_bytes(h[9..13].try_into().expect("4 bytes"));
    (h[0], offset, len as usize)
}

/// What the writer sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Bytes for the workload's stdin (typed, on a terminal).
    Bytes(Vec<u8>),
    /// A terminal's new size: rows, cols.
    Resize(u16, u16),
    /// The end of input: the workload's stdin is closed (a pipe only; a terminal has no
    /// end of input of its own: the writer types ^D).
    Close,
}

const INPUT_BYTES: u8 = 1;
const INPUT_RESIZE: u8 = 2;
const INPUT_CLOSE: u8 = 3;
/// Bytes of an input frame's header.
const INPUT_HEADER: usize = 5;
/// Largest input frame.
pub const MAX_INPUT: usize = 64 * 1024;

impl Input {
    /// The frame the writer sends.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, payload) = match self {
            Input::Bytes(b) => (INPUT_BYTES, b.clone()),
            Input::Resize(rows, cols) => {
                let mut p = rows.to_le_bytes().to_vec();
                p.extend_from_slice(&cols.to_le_bytes());
                (INPUT_RESIZE, p)
            }
            Input::Close => (INPUT_CLOSE, Vec::new()),
        };
        let mut f = Vec::with_capacity(INPUT_HEADER + payload.len());
        f.push(kind);
        f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        f.extend_from_slice(&payload);
        f
    }
}

/// The complete input frames at the front of `buf` (taken out of it), or why the writer
/// is to be cut off.
pub fn parse_input(buf: &mut Vec<u8>) -> Result<Vec<Input>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while buf.len() - at >= INPUT_HEADER {
        let kind = buf[at];
        let len = u32::from_le_bytes(buf[at + 1..at + 5].try_into().expect("4 bytes")) as usize;
        if len > MAX_INPUT {
            return Err(format!(
                "an input frame of {len} bytes (at most {MAX_INPUT})"
            ));
        }
        if buf.len() - at - INPUT_HEADER < len {
            break;
        }
        let payload = &buf[at + INPUT_HEADER..at + INPUT_HEADER + len];
        match (kind, len) {
            (INPUT_BYTES, _) => out.push(Input::Bytes(payload.to_vec())),
            (INPUT_RESIZE, 4) => out.push(Input::Resize(
                u16::from_le_bytes([payload[0], payload[1]]),
                u16::from_le_bytes([payload[2], payload[3]]),
            )),
            (INPUT_CLOSE, 0) => out.push(Input::Close),
            _ => return Err(format!("an unknown input frame (kind {kind}, {len} bytes)")),
        }
        at += INPUT_HEADER + len;
    }
    buf.drain(..at);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_junk_is_refused() {
        for r in [
            Request {
                stdout: From::Offset(7),
                stderr: 3,
                write: false,
            },
            Request {
                stdout: From::Tail,
                stderr: 0,
                write: true,
            },
        ] {
            let line = r.line();
            assert!(line.ends_with('\n') && line.len() <= MAX_REQUEST);
            assert_eq!(Request::parse(line.trim_end()), Some(r));
        }
        for junk in ["", "1", "x 0", "1 -1", "1 2 r", "1 2 w 4", "tail"] {
            assert_eq!(Request::parse(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn frames_and_input_round_trip_little_endian() {
        let h = header(KIND_STDERR, 0x0102_0304_0506_0708, 9);
        assert_eq!(h[1], 0x08, "little-endian offset");
        assert_eq!(parse_header(&h), (KIND_STDERR, 0x0102_0304_0506_0708, 9));
        let inputs = [
            Input::Bytes(b"ls\n".to_vec()),
            Input::Resize(50, 132),
            Input::Close,
        ];
        let mut buf: Vec<u8> = inputs.iter().flat_map(Input::encode).collect();
        // A frame cut short stays in the buffer until the rest arrives.
        let whole = buf.len();
        buf.extend_from_slice(&Input::Bytes(b"partial".to_vec()).encode()[..6]);
        assert_eq!(parse_input(&mut buf).unwrap(), inputs);
        assert_eq!(buf.len(), 6, "{whole}");
        let mut bad = vec![9, 0, 0, 0, 0];
        assert!(parse_input(&mut bad).unwrap_err().contains("unknown"));
        let mut big = Input::Bytes(vec![0; MAX_INPUT + 1]).encode();
        assert!(parse_input(&mut big).unwrap_err().contains("at most"));
    }
}
