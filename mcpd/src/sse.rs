//! The legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp no longer speaks: a small
//! client of our own, through the same pinned HTTP client as Streamable HTTP, handing rmcp
//! a byte stream.

use crate::server::ServerConfig;
use crate::upstream::{BTreeValues, ConnectError, headers, pinned_client};

/// The most an SSE event (one message) may hold.
const MAX_EVENT: usize = 16 * 1024 * 1024;

/// Reads server-sent events from a byte stream: (event name, data) pairs.
struct Events<S> {
    body: S,
    buf: Vec<u8>,
    /// How much of `buf` holds no event end (searched already: each byte once).
    scanned: usize,
}

impl<S> Events<S>
where
    S: futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin,
{
    async fn next(&mut self) -> Result<Option<(String, String)>, String> {
        use futures_util::StreamExt as _;
        loop {
            // An event ends at a blank line (LF or CRLF line ends); the search resumes
            // where the last one stopped.
            let from = self.scanned.saturating_sub(3);
            let tail = &self.buf[from..];
            let text_end = tail
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (from + i, 2))
                .into_iter()
                .chain(
                    tail.windows(4)
                        .position(|w| w == b"\r\n\r\n")
                        .map(|i| (from + i, 4)),
                )
                .min();
            if let Some((end, sep)) = text_end {
                self.scanned = 0;
                let block: Vec<u8> = self.buf.drain(..end + sep).collect();
                let block = String::from_utf8_lossy(&block[..end]).replace("\r\n", "\n");
                let (mut event, mut data) = ("message".to_string(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        if !data.is_empty() {
                            data.push('\n');
                        }
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if data.is_empty() && event == "message" {
                    continue; // a comment or keep-alive
                }
                return Ok(Some((event, data)));
            }
            self.scanned = self.buf.len();
            if self.buf.len() > MAX_EVENT {
                return Err("an event over 16 MiB".into());
            }
            match self.body.next().await {
                Some(Ok(b)) => self.buf.extend_from_slice(&b),
                Some(Err(e)) => return Err(e.to_string()),
                None => return Ok(None),
            }
        }
    }
}

/// The legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp no longer speaks: a GET
/// opens the event stream, whose first event names the endpoint to POST messages to (on
/// the same origin, or refused); the server's messages come as `message` events.
pub async fn connect(
    c: &ServerConfig,
    url: &str,
    h: &BTreeValues,
) -> Result<(tokio::io::DuplexStream, Vec<tokio::task::JoinHandle<()>>), ConnectError> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let (u, http) = pinned_client(c, url).await?;
    let headers: reqwest::header::HeaderMap = headers(h)?.into_iter().collect();
    let resp = http
        .get(u.clone())
        .headers(headers.clone())
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|e| ConnectError::Failed(format!("opening its event stream: {e}")))?;
    match resp.status() {
        s if s.is_success() => {}
        s @ (reqwest::StatusCode::UNAUTHORIZED | reqwest::StatusCode::FORBIDDEN) => {
            return Err(ConnectError::NeedsAuth(format!("HTTP {s}")));
        }
        s => {
            return Err(ConnectError::Failed(format!(
                "its event stream answered HTTP {s}"
            )));
        }
    }
    let mut events = Events {
        body: Box::pin(resp.bytes_stream()),
        buf: Vec::new(),
        scanned: 0,
    };
    let endpoint = loop {
        match events.next().await {
            Ok(Some((e, data))) if e == "endpoint" => break data,
            Ok(Some(_)) => continue,
            Ok(None) => {
                return Err(ConnectError::Failed(
                    "the event stream ended before naming its endpoint".into(),
                ));
            }
            Err(e) => return Err(ConnectError::Failed(format!("its event stream: {e}"))),
        }
    };
    let post_to = u
        .join(endpoint.trim())
        .map_err(|e| ConnectError::Failed(format!("its endpoint {endpoint:?}: {e}")))?;
    if post_to.origin() != u.origin() {
        return Err(ConnectError::Refused(format!(
            "its endpoint {post_to} is not on the server's own origin"
        )));
    }
    let (ours, theirs) = tokio::io::duplex(256 * 1024);
    let (from_rmcp, mut to_rmcp) = tokio::io::split(ours);
    let post_timeout = c.call_timeout();
    let reader = tokio::spawn(async move {
        while let Ok(Some((event, data))) = events.next().await {
            if event == "message"
                && (to_rmcp.write_all(data.as_bytes()).await.is_err()
                    || to_rmcp.write_all(b"\n").await.is_err())
            {
                break;
            }
        }
        let _ = to_rmcp.shutdown().await;
    });
    let writer = tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(from_rmcp).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            // A POST that never answers ends the connection (and so its reconnection)
            // rather than stalling every later message.
            let sent = http
                .post(post_to.clone())
                .headers(headers.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .timeout(post_timeout)
                .body(line)
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => {
                    tracing::warn!(status = %r.status(), "a legacy SSE server refused a message");
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "posting to a legacy SSE server");
                    break;
                }
            }
        }
    });
    Ok((theirs, vec![reader, writer]))
}
