//! A small HTTP client for the gateway's API in tests (ureq, plain HTTP): JSON in and
//! out, one session cookie and one device cookie kept per client, any header added by
//! hand.

use std::net::SocketAddr;

pub struct Web {
    base: String,
    agent: ureq::Agent,
    /// `name=value` of the session cookie, once one was set.
    pub cookie: Option<String>,
    /// `name=value` of the device cookie (sent to `/api/login` only), once one was set.
    pub device: Option<String>,
    /// A bearer token to send instead.
    pub bearer: Option<String>,
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.text).unwrap_or(serde_json::Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The message of an error reply.
    pub fn message(&self) -> String {
        self.json()["error"]["message"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// The error code of an error reply.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
}

impl Web {
    pub fn new(addr: SocketAddr) -> Web {
        Web::new_at(format!("http://{addr}"))
    }

    fn new_at(base: String) -> Web {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .into();
        Web {
            base,
            agent,
            cookie: None,
            device: None,
            bearer: None,
        }
    }

    pub fn with_bearer(addr: SocketAddr, token: &str) -> Web {
        let mut w = Web::new(addr);
        w.bearer = Some(token.to_string());
        w
    }

    /// A client of a new API token of this caller's, with `scopes`.
    pub fn token(&mut self, scopes: &[&str]) -> Web {
        let r = self.post(
            "/api/tokens",
            serde_json::json!({"name": "t", "scopes": scopes}),
        );
        assert_eq!(r.status, 201, "{r:?}");
        let mut w = Web::new_at(self.base.clone());
        w.bearer = Some(r.json()["token"].as_str().unwrap().to_string());
        w
    }

    /// `GET /api/executions/{id}` once it no longer answers `running` (within 20 s).
    pub fn ended(&mut self, id: &str) -> Reply {
        let path = format!("/api/executions/{id}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let r = self.get(&path);
            if r.status != 200 || r.json()["execution"]["status"] != "running" {
                return r;
            }
            assert!(std::time::Instant::now() < deadline, "{id} never ended");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Adds the cookies this client holds for `path` and its bearer token.
    fn credentials(
        &self,
        mut b: ureq::http::request::Builder,
        path: &str,
    ) -> ureq::http::request::Builder {
        let cookies: Vec<&str> = self
            .cookie
            .iter()
            .chain(self.device.iter().filter(|_| path == "/api/login"))
            .map(String::as_str)
            .collect();
        if !cookies.is_empty() {
            b = b.header("cookie", cookies.join("; "));
        }
        if let Some(t) = &self.bearer {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        b
    }

    /// Sends a request; `body` as JSON when given. Keeps a session cookie it is handed.
    pub fn call(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        extra: &[(&str, &str)],
    ) -> Reply {
        let bytes = body.map(|b| serde_json::to_vec(b).unwrap());
        self.raw(method, path, bytes, body.is_some(), extra)
    }

    pub fn raw(
        &mut self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        json: bool,
        extra: &[(&str, &str)],
    ) -> Reply {
        let mut b = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if json {
            b = b.header("content-type", "application/json");
        }
        b = self.credentials(b, path);
        for (k, v) in extra {
            b = b.header(*k, *v);
        }
        let req = b.body(body.unwrap_or_default()).unwrap();
        let mut resp = self.send(req);
        let headers: Vec<(String, String)> = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        let reply = Reply {
            status,
            headers,
            text,
        };
        for (k, set) in &reply.headers {
            if !k.eq_ignore_ascii_case("set-cookie") {
                continue;
            }
            let pair = set.split(';').next().unwrap_or("").to_string();
            let kept = pair
                .split_once('=')
                .filter(|(_, v)| !v.is_empty())
                .map(|_| pair.clone());
            if pair.contains("argos_device=") {
                self.device = kept;
            } else {
                self.cookie = kept;
            }
        }
        reply
    }

    /// Sends once more on a fresh connection if a pooled one turns out closed (a server
    /// may close after answering a request whose body it did not read), as browsers do.
    fn send(&self, req: ureq::http::Request<Vec<u8>>) -> ureq::http::Response<ureq::Body> {
        let again = req.clone();
        match self.agent.run(req) {
            Ok(r) => r,
            Err(ureq::Error::Io(_)) => self.agent.run(again).expect("the gateway answers"),
            Err(e) => panic!("the gateway answers: {e}"),
        }
    }

    pub fn get(&mut self, path: &str) -> Reply {
        self.call("GET", path, None, &[])
    }

    pub fn post(&mut self, path: &str, body: serde_json::Value) -> Reply {
        self.call("POST", path, Some(&body), &[])
    }
}

/// One server-sent event.
#[derive(Debug, Clone, Default)]
pub struct SseEvent {
    pub event: String,
    pub id: Option<String>,
    pub data: String,
}

impl SseEvent {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.data).unwrap_or(serde_json::Value::Null)
    }
}

/// An open event stream; dropping it closes the connection.
pub struct Sse {
    pub status: u16,
    lines: Option<std::io::BufReader<Box<dyn std::io::Read + Send>>>,
    pub error_text: String,
}

impl Sse {
    /// The next event, or None at the end of the stream.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        use std::io::BufRead;
        let lines = self.lines.as_mut()?;
        let mut ev = SseEvent::default();
        let mut any = false;
        loop {
            let mut line = String::new();
            if lines.read_line(&mut line).ok()? == 0 {
                return any.then_some(ev);
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if any && !ev.event.is_empty() {
                    return Some(ev);
                }
                continue;
            }
            if line.starts_with(':') {
                continue; // keep-alive comment
            }
            let (k, v) = line.split_once(':').unwrap_or((line, ""));
            let v = v.strip_prefix(' ').unwrap_or(v);
            any = true;
            match k {
                "event" => ev.event = v.to_string(),
                "id" => ev.id = Some(v.to_string()),
                "data" => {
                    if !ev.data.is_empty() {
                        ev.data.push('\n');
                    }
                    ev.data.push_str(v);
                }
                _ => {}
            }
        }
    }
}

impl Web {
    /// POSTs `body` and opens the reply as an event stream.
    pub fn sse(&mut self, path: &str, body: &serde_json::Value, extra: &[(&str, &str)]) -> Sse {
        self.open_sse("POST", path, Some(body), extra)
    }

    /// GETs `path` as an event stream.
    pub fn sse_get(&mut self, path: &str, extra: &[(&str, &str)]) -> Sse {
        self.open_sse("GET", path, None, extra)
    }

    fn open_sse(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        extra: &[(&str, &str)],
    ) -> Sse {
        let mut b = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .header("accept", "text/event-stream");
        b = self.credentials(b, path);
        for (k, v) in extra {
            b = b.header(*k, *v);
        }
        let req = b
            .body(
                body.map(|b| serde_json::to_vec(b).unwrap())
                    .unwrap_or_default(),
            )
            .unwrap();
        let resp = self.send(req);
        let status = resp.status().as_u16();
        if status != 200 {
            let text = resp.into_body().read_to_string().unwrap_or_default();
            return Sse {
                status,
                lines: None,
                error_text: text,
            };
        }
        let reader: Box<dyn std::io::Read + Send> = Box::new(resp.into_body().into_reader());
        Sse {
            status,
            lines: Some(std::io::BufReader::new(reader)),
            error_text: String::new(),
        }
    }
}

/// Connects a WebSocket to `path` on the gateway at `addr` (tungstenite, a client of its
/// own): the socket, or the HTTP status of the refusal.
pub fn ws_connect(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<tungstenite::WebSocket<std::net::TcpStream>, u16> {
    use tungstenite::client::IntoClientRequest;
    let mut req = format!("ws://{addr}{path}").into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(
            tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            tungstenite::http::HeaderValue::from_str(v).unwrap(),
        );
    }
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    match tungstenite::client::client(req, tcp) {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => {
            Err(r.status().as_u16())
        }
        Err(e) => panic!("handshake: {e}"),
    }
}
