//! Server-sent events written straight into the bytes that go on the wire: each event is
//! one buffer, built once, with output text escaped into it by a SIMD JSON escaper. An
//! output stream carries gigabytes, so no event value, no second copy and no re-scan for
//! newlines sit in between (JSON has none raw).

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};

/// Sends events to a client's stream; fails once the client has gone.
pub type Sender = tokio::sync::mpsc::Sender<Bytes>;

/// An event stream response: the frames sent on the channel, with a comment line every
/// `KEEP_ALIVE` of silence so proxies and clients keep an idle stream open, until the
/// channel closes or `until` resolves (its caller signed out).
pub struct Stream {
    frames: tokio::sync::mpsc::Receiver<Bytes>,
    until: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
}

impl Stream {
    pub fn new(
        frames: tokio::sync::mpsc::Receiver<Bytes>,
        until: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Stream {
        Stream {
            frames,
            until: Box::pin(until),
        }
    }
}

const KEEP_ALIVE: Duration = Duration::from_secs(15);

impl IntoResponse for Stream {
    fn into_response(self) -> Response {
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let state = (self.frames, ticker, self.until);
        let frames =
            futures_util::stream::unfold(state, |(mut rx, mut ticker, mut until)| async move {
                let frame = tokio::select! {
                    f = rx.recv() => {
                        ticker.reset();
                        f?
                    }
                    _ = ticker.tick() => Bytes::from_static(b":\n\n"),
                    () = &mut until => return None,
                };
                Some((Ok::<_, Infallible>(frame), (rx, ticker, until)))
            });
        (
            [
                (axum::http::header::CONTENT_TYPE, "text/event-stream"),
                (axum::http::header::CACHE_CONTROL, "no-cache"),
            ],
            axum::body::Body::from_stream(frames),
        )
            .into_response()
    }
}

/// An event whose data is a JSON value.
pub fn event(name: &str, data: &serde_json::Value) -> Bytes {
    let mut out = Vec::with_capacity(64);
    head(&mut out, name, None);
    serde_json::to_writer(&mut out, data).expect("writing to a Vec");
    out.extend_from_slice(b"\n\n");
    out.into()
}

/// An output event, `{"offset":N,"text":"…"}` with `id: <id>`.
pub fn output(name: &str, id: &str, offset: u64, text: &str) -> Bytes {
    let mut out = Vec::new();
    head(&mut out, name, Some(id));
    out.extend_from_slice(b"{\"offset\":");
    out.extend_from_slice(offset.to_string().as_bytes());
    out.extend_from_slice(b",\"text\":");
    json_escape_simd::escape_into(text, &mut out);
    out.extend_from_slice(b"}\n\n");
    // The escaper reserves six bytes per input byte; give back what it did not use.
    out.shrink_to_fit();
    out.into()
}

fn head(out: &mut Vec<u8>, name: &str, id: Option<&str>) {
    debug_assert!(!name.contains(['\n', '\r']) && !id.is_some_and(|i| i.contains(['\n', '\r'])));
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    if let Some(id) = id {
        out.extend_from_slice(b"\nid: ");
        out.extend_from_slice(id.as_bytes());
    }
    out.extend_from_slice(b"\ndata: ");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_one_event_with_escaped_json() {
        let b = output("stdout", "5:0", 3, "a\"b\\\n\u{1}é");
        let s = std::str::from_utf8(&b).unwrap();
        assert!(s.ends_with("\n\n"));
        let lines: Vec<&str> = s.trim_end().lines().collect();
        assert_eq!(lines[..2], ["event: stdout", "id: 5:0"]);
        assert_eq!(lines.len(), 3, "data is one line: {s:?}");
        let v: serde_json::Value =
            serde_json::from_str(lines[2].strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"offset": 3, "text": "a\"b\\\n\u{1}é"})
        );
    }

    #[test]
    fn event_carries_its_value() {
        let b = event("exit", &serde_json::json!({"x": "y\nz"}));
        assert_eq!(&b[..], b"event: exit\ndata: {\"x\":\"y\\nz\"}\n\n");
    }
}
