//! The legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp no longer speaks: a small
//! client of our own, through the same pinned HTTP client as Streamable HTTP, handing rmcp
//! a byte stream.

use std::future::Future;

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
/// the same origin, or refused); the server's messages come as `message` events. rmcp's
/// messages are POSTed as [`forward`] says, at most `calls` requests at once.
pub async fn connect(
    c: &ServerConfig,
    url: &str,
    h: &BTreeValues,
    calls: usize,
) -> Result<(tokio::io::DuplexStream, Vec<tokio::task::JoinHandle<()>>), ConnectError> {
    use tokio::io::AsyncWriteExt as _;
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
    let post = move |line: String| {
        // A POST that never answers ends the connection (and so its reconnection)
        // rather than holding its place for good.
        let sent = http
            .post(post_to.clone())
            .headers(headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .timeout(post_timeout)
            .body(line)
            .send();
        async move {
            match sent.await {
                Ok(r) if r.status().is_success() => Ok(()),
                Ok(r) => Err(format!("the server refused a message: HTTP {}", r.status())),
                Err(e) => Err(format!("posting a message: {e}")),
            }
        }
    };
    let writer = tokio::spawn(async move {
        let lines = tokio::io::BufReader::new(from_rmcp);
        if let Err(why) = forward(lines, calls, post).await {
            tracing::warn!(%why, "a legacy SSE server's connection ends");
        }
    });
    Ok((theirs, vec![reader, writer]))
}

/// Forwards rmcp's messages (one a line) by `post` until rmcp closes its side (`Ok`) or a
/// POST fails (`Err`, why: the connection ends with it). Requests and responses are
/// posted side by side, at most `at_once` together, so a server that answers a POST
/// only once it has handled the message holds up no other call; a notification is
/// posted before anything after it is (`notifications/initialized` before the first
/// request, as a server may insist), without waiting on the POSTs before it (a call's
/// cancellation goes out while a slow call's POST is still open).
async fn forward<R, P, F>(input: R, at_once: usize, post: P) -> Result<(), String>
where
    R: tokio::io::AsyncBufRead + Unpin,
    P: Fn(String) -> F,
    F: Future<Output = Result<(), String>> + Send + 'static,
{
    use tokio::io::AsyncBufReadExt as _;
    let at_once = at_once.max(1);
    let mut lines = input.lines();
    let mut posts = tokio::task::JoinSet::new();
    loop {
        let line = tokio::select! {
            // Cancel-safe: a line half read is kept for the next call.
            line = lines.next_line() => match line {
                Ok(Some(line)) => line,
                Ok(None) | Err(_) => return Ok(()),
            },
            Some(done) = posts.join_next() => {
                posted(done)?;
                continue;
            }
        };
        if is_notification(&line) {
            post(line).await?;
            continue;
        }
        while posts.len() >= at_once {
            match posts.join_next().await {
                Some(done) => posted(done)?,
                None => break,
            }
        }
        posts.spawn(post(line));
    }
}

/// A finished POST's outcome (a POST task that panicked is a failure too).
fn posted(done: Result<Result<(), String>, tokio::task::JoinError>) -> Result<(), String> {
    done.map_err(|e| format!("posting a message: {e}"))?
}

/// Whether a JSON-RPC message is a notification (a method, no id).
fn is_notification(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line)
        .is_ok_and(|m| m.get("method").is_some() && m.get("id").is_none())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::future::BoxFuture;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt as _;
    use tokio::sync::mpsc;

    /// What the fake POST saw: ("start" or "end", the message's method).
    type Seen = mpsc::UnboundedReceiver<(&'static str, String)>;

    /// A POST that reports its start and end; `slow` ends only when `release` is sent,
    /// `note` takes a moment, `fail` is refused.
    fn fake_post(
        release: std::sync::Arc<tokio::sync::Notify>,
    ) -> (
        impl Fn(String) -> BoxFuture<'static, Result<(), String>>,
        Seen,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let post = move |line: String| -> BoxFuture<'static, Result<(), String>> {
            let (tx, release) = (tx.clone(), release.clone());
            let method = serde_json::from_str::<serde_json::Value>(&line).unwrap()["method"]
                .as_str()
                .unwrap()
                .to_string();
            Box::pin(async move {
                tx.send(("start", method.clone())).unwrap();
                match method.as_str() {
                    "slow" => release.notified().await,
                    "note" => tokio::time::sleep(Duration::from_millis(100)).await,
                    "fail" => return Err("refused".to_string()),
                    _ => {}
                }
                tx.send(("end", method)).unwrap();
                Ok(())
            })
        };
        (post, rx)
    }

    async fn next(seen: &mut Seen) -> (&'static str, String) {
        tokio::time::timeout(Duration::from_secs(2), seen.recv())
            .await
            .expect("a POST in time")
            .expect("the forwarder is running")
    }

    fn request(id: u32, method: &str) -> String {
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\"}}\n")
    }

    fn notification(method: &str) -> String {
        format!("{{\"jsonrpc\":\"2.0\",\"method\":\"{method}\"}}\n")
    }

    #[tokio::test]
    async fn a_slow_post_holds_up_no_other_message() {
        let release = std::sync::Arc::new(tokio::sync::Notify::new());
        let (post, mut seen) = fake_post(release.clone());
        let (mut rmcp, ours) = tokio::io::duplex(4096);
        let forwarding = tokio::spawn(forward(tokio::io::BufReader::new(ours), 4, post));
        rmcp.write_all(request(1, "slow").as_bytes()).await.unwrap();
        assert_eq!(next(&mut seen).await, ("start", "slow".into()));
        // A request after it is posted and answered while the slow one is still open.
        rmcp.write_all(request(2, "fast").as_bytes()).await.unwrap();
        assert_eq!(next(&mut seen).await, ("start", "fast".into()));
        assert_eq!(next(&mut seen).await, ("end", "fast".into()));
        // A notification goes out at once too, and what follows it only once it is posted.
        rmcp.write_all(notification("note").as_bytes())
            .await
            .unwrap();
        rmcp.write_all(request(3, "after").as_bytes())
            .await
            .unwrap();
        assert_eq!(next(&mut seen).await, ("start", "note".into()));
        assert_eq!(next(&mut seen).await, ("end", "note".into()));
        assert_eq!(next(&mut seen).await, ("start", "after".into()));
        assert_eq!(next(&mut seen).await, ("end", "after".into()));
        release.notify_one();
        assert_eq!(next(&mut seen).await, ("end", "slow".into()));
        // A refused POST ends the forwarding, saying why.
        rmcp.write_all(request(4, "fail").as_bytes()).await.unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(2), forwarding)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ended, Err("refused".to_string()));
    }

    #[tokio::test]
    async fn no_more_requests_than_allowed_are_posted_at_once() {
        let release = std::sync::Arc::new(tokio::sync::Notify::new());
        let (post, mut seen) = fake_post(release.clone());
        let (mut rmcp, ours) = tokio::io::duplex(4096);
        let forwarding = tokio::spawn(forward(tokio::io::BufReader::new(ours), 1, post));
        rmcp.write_all(request(1, "slow").as_bytes()).await.unwrap();
        rmcp.write_all(request(2, "fast").as_bytes()).await.unwrap();
        assert_eq!(next(&mut seen).await, ("start", "slow".into()));
        assert!(
            tokio::time::timeout(Duration::from_millis(300), seen.recv())
                .await
                .is_err(),
            "a second POST started beside the one allowed"
        );
        release.notify_one();
        assert_eq!(next(&mut seen).await, ("end", "slow".into()));
        assert_eq!(next(&mut seen).await, ("start", "fast".into()));
        assert_eq!(next(&mut seen).await, ("end", "fast".into()));
        // rmcp closing its side ends the forwarding quietly.
        drop(rmcp);
        let ended = tokio::time::timeout(Duration::from_secs(2), forwarding)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ended, Ok(()));
    }
}
