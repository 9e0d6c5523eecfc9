//! Web terminals through the gateway: REST to open, list and close; the WebSocket bridge
//! with single-use tickets bound to session, terminal and origin; output credit (a `yes`
//! flood stays bounded in memory while the client does not acknowledge). The client is
//! tungstenite, a WebSocket implementation of its own.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use argos_tests::web::Web;
use argos_tests::{Stack, StackBuilder};
use serde_json::json;
use tungstenite::{Message, WebSocket};

const OP_INPUT: u8 = 0x01;
const OP_RESIZE: u8 = 0x02;
const OP_ACK: u8 = 0x03;
const OP_OUTPUT: u8 = 0x81;
const OP_STATE: u8 = 0x82;
const OP_REPLAY_BEGIN: u8 = 0x83;
const OP_REPLAY_END: u8 = 0x84;

/// Connects to a terminal's WebSocket: the socket, or the HTTP status of the refusal.
fn connect(
    stack: &Stack,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<WebSocket<TcpStream>, u16> {
    argos_tests::web::ws_connect(stack.listen, path, headers)
}

/// A terminal client: reads frames, collects output, acknowledges it (or not).
struct Client {
    ws: WebSocket<TcpStream>,
    seen: String,
    received: u64,
    ops: Vec<u8>,
}

impl Client {
    fn send(&mut self, op: u8, data: &[u8]) {
        let mut v = vec![op];
        v.extend_from_slice(data);
        self.ws.send(Message::Binary(v.into())).unwrap();
    }

    fn typed(&mut self, text: &str) {
        self.send(OP_INPUT, text.as_bytes());
    }

    /// One frame (None on a read timeout); output is acknowledged when `ack`.
    fn frame(&mut self, ack: bool) -> Option<(u8, Vec<u8>)> {
        match self.ws.read() {
            Ok(Message::Binary(b)) => {
                let (op, data) = (b[0], b[1..].to_vec());
                self.ops.push(op);
                if op == OP_OUTPUT {
                    self.received += data.len() as u64;
                    if self.seen.len() < 1 << 20 {
                        self.seen.push_str(&String::from_utf8_lossy(&data));
                    }
                    if ack {
                        self.send(OP_ACK, &(data.len() as u32).to_be_bytes());
                    }
                }
                Some((op, data))
            }
            Ok(_) => Some((0, Vec::new())),
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                None
            }
            Err(e) => panic!("reading the terminal: {e}; saw {:?}", self.seen),
        }
    }

    fn until(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !self.seen.contains(needle) {
            assert!(
                Instant::now() < deadline,
                "no {needle:?}; saw {:?}",
                self.seen
            );
            if let Some((OP_STATE, s)) = self.frame(true) {
                panic!(
                    "the terminal ended: {}; saw {:?}",
                    String::from_utf8_lossy(&s),
                    self.seen
                );
            }
        }
    }
}

fn ticket(web: &mut Web, id: &str, headers: &[(&str, &str)]) -> String {
    let r = web.call(
        "POST",
        &format!("/api/terminals/{id}/ticket"),
        Some(&json!({})),
        headers,
    );
    assert_eq!(r.status, 200, "{r:?}");
    r.json()["ticket"].as_str().unwrap().to_string()
}

#[test]
fn a_web_terminal_over_a_websocket_with_tickets_and_flow_control() {
    argos_tests::require_root("the web terminal test");
    let stack = StackBuilder::new()
        .env("ARGOS_GATEWAY__TERMINAL_TICKET_TTL_S", "1")
        .start();
    let mut admin = stack.admin();
    let own = format!("http://{}", stack.listen);
    let r = admin.post(
        "/api/tokens",
        json!({"name": "term", "scopes": ["exec", "read"]}),
    );
    let token = r.json()["token"].as_str().unwrap().to_string();
    let bearer_header = format!("Bearer {token}");
    let auth = [("authorization", bearer_header.as_str())];
    let mut bearer = Web::with_bearer(stack.listen, &token);
    let r = bearer.post("/api/terminals", json!({"rows": 24, "cols": 80}));
    assert_eq!(r.status, 201, "{r:?}");
    let id = r.json()["terminal"]["id"].as_str().unwrap().to_string();
    // No short clock: a terminal opened without a timeout gets the profile's maximum
    // (the sandbox's 24 h), not its 5-minute default for commands, and says so.
    assert_eq!(r.json()["terminal"]["profile"], "agent", "{r:?}");
    assert_eq!(r.json()["terminal"]["timeout_ms"], 86_400_000u64, "{r:?}");
    let listed = bearer.get("/api/terminals").json();
    assert_eq!(listed["terminals"][0]["id"], id.as_str(), "{listed}");
    let ws_path = |t: &str| format!("/api/terminals/{id}/ws?ticket={t}");

    // A ticket opens one WebSocket, once.
    let t = ticket(&mut bearer, &id, &[]);
    let mut c = Client {
        ws: connect(&stack, &ws_path(&t), &auth).unwrap(),
        seen: String::new(),
        received: 0,
        ops: Vec::new(),
    };
    assert_eq!(
        connect(&stack, &ws_path(&t), &auth).err(),
        Some(403),
        "reused"
    );
    c.typed("echo $((3*4))-ws; tty\n");
    c.until("12-ws");
    c.until("/dev/pts/");
    assert_eq!(c.ops[0], OP_REPLAY_BEGIN, "{:?}", c.ops);
    assert!(c.ops.contains(&OP_REPLAY_END), "{:?}", c.ops);
    // Detach and come back (as a reload would): the earlier output is replayed between
    // the markers, then the terminal is live again. The previous writer may take a
    // moment to let go of the input.
    c.send(0x04, &[]);
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut c = loop {
        let t = ticket(&mut bearer, &id, &[]);
        let mut c = Client {
            ws: connect(&stack, &ws_path(&t), &auth).unwrap(),
            seen: String::new(),
            received: 0,
            ops: Vec::new(),
        };
        while !c.ops.contains(&OP_REPLAY_END) && !c.ops.contains(&OP_STATE) {
            assert!(Instant::now() < deadline, "no replay: {:?}", c.ops);
            c.frame(true);
        }
        if !c.ops.contains(&OP_STATE) {
            break c;
        }
        assert!(Instant::now() < deadline, "could not attach again");
        std::thread::sleep(Duration::from_millis(100));
    };
    let end = c.ops.iter().position(|o| *o == OP_REPLAY_END).unwrap();
    assert!(
        c.ops[0] == OP_REPLAY_BEGIN && end > 1 && c.ops[1..end].iter().all(|o| *o == OP_OUTPUT),
        "replayed output between the markers: {:?}",
        c.ops
    );
    assert!(c.seen.contains("12-ws"), "the replay: {:?}", c.seen);
    let mut size = 30u16.to_be_bytes().to_vec();
    size.extend_from_slice(&90u16.to_be_bytes());
    c.send(OP_RESIZE, &size);
    c.typed("stty size\n");
    c.until("30 90");

    // Tickets are bound: to their terminal, their credential, their origin, their time.
    let t = ticket(&mut bearer, &id, &[]);
    let other = "01a22a10-0a04-776e-a13a-ef8354186cf3";
    let path = format!("/api/terminals/{other}/ws?ticket={t}");
    assert_eq!(
        connect(&stack, &path, &auth).err(),
        Some(403),
        "other terminal"
    );
    let t = ticket(&mut admin, &id, &[("origin", own.as_str())]);
    assert_eq!(
        connect(&stack, &ws_path(&t), &auth).err(),
        Some(403),
        "minted by the admin's session, used with a token"
    );
    let cookie = admin.cookie.clone().unwrap();
    let t = ticket(&mut admin, &id, &[("origin", own.as_str())]);
    assert_eq!(
        connect(
            &stack,
            &ws_path(&t),
            &[
                ("cookie", cookie.as_str()),
                ("origin", "http://evil.example")
            ]
        )
        .err(),
        Some(403),
        "cross-site upgrade"
    );
    let t = ticket(&mut admin, &id, &[("origin", own.as_str())]);
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(
        connect(
            &stack,
            &ws_path(&t),
            &[("cookie", cookie.as_str()), ("origin", own.as_str())]
        )
        .err(),
        Some(403),
        "expired"
    );
    assert_eq!(
        connect(&stack, &ws_path("forged"), &auth).err(),
        Some(403),
        "unknown"
    );

    // A flood without acknowledgements: the gateway stops at its credit, and memory
    // stays flat in the gateway and execd.
    let pids = stack.daemon_pids();
    let pid_of = |name: &str| {
        pids.iter()
            .find(|(_, cmd)| cmd.contains(&format!("argos-{name}")))
            .map(|(p, _)| *p)
            .unwrap()
    };
    let (gw, execd) = (pid_of("gatewayd"), pid_of("execd"));
    let rss = || argos_tests::measure::rss_kib(gw) + argos_tests::measure::rss_kib(execd);
    let before = rss();
    c.typed("yes\n");
    let started = c.received;
    while c.received - started < 2 * 1024 * 1024 {
        c.frame(false).expect("flood output");
    }
    // Whatever was in flight arrives; then nothing until an acknowledgement.
    c.ws.get_mut()
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    while c.frame(false).is_some() {}
    let held = c.received - started;
    assert!(
        held <= 4 * 1024 * 1024,
        "{held} bytes sent without acknowledgement"
    );
    std::thread::sleep(Duration::from_secs(2));
    let during = rss();
    assert!(
        during < before + 64 * 1024,
        "gateway + execd RSS grew from {before} to {during} KiB while the flood was held"
    );
    println!(
        "flood held: {held} bytes unacknowledged; gateway + execd RSS {before} -> {during} KiB"
    );
    // Acknowledged, it flows again.
    c.send(OP_ACK, &(held as u32).to_be_bytes());
    c.ws.get_mut()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let resumed = c.received;
    while c.received - resumed < 1024 * 1024 {
        c.frame(true).expect("output after the acknowledgement");
    }
    c.typed("\x03");
    drop(c);

    // Closed through the API: the whole tree goes.
    let r = bearer.call("DELETE", &format!("/api/terminals/{id}"), None, &[]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["execution"]["status"], "killed", "{r:?}");
    assert_eq!(
        bearer.get("/api/terminals").json()["terminals"],
        json!([]),
        "no terminal left"
    );
    stack.stop();
}
