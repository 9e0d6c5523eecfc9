//! Log setup: one line per event on stderr, plain (fit for journald, no colour, no
//! timestamp when journald adds its own) or JSON.

use crate::config::{LogConfig, LogFormat};

/// Installs the global subscriber. An invalid filter directive falls back to `info`
/// and says so (config parsing has already validated everything else).
pub fn init(log: &LogConfig, daemon: &'static str) {
    let (filter, bad) = match tracing_subscriber::EnvFilter::try_new(&log.level) {
        Ok(f) => (f, None),
        Err(e) => (
            tracing_subscriber::EnvFilter::new("info"),
            Some(e.to_string()),
        ),
    };
    // rmcp's OAuth client logs authorization codes and token responses at debug: never
    // below info, whatever the configured level.
    let filter = match "rmcp::transport::auth=info".parse() {
        Ok(d) => filter.add_directive(d),
        Err(_) => filter,
    };
    // journald stamps every line itself; a second timestamp is noise there.
    let under_journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| OneLine(std::io::stderr()))
        .with_ansi(false)
        .with_target(true);
    let result = match (log.format, under_journald) {
        (LogFormat::Json, _) => builder.json().flatten_event(true).try_init(),
        (LogFormat::Plain, true) => builder.without_time().try_init(),
        (LogFormat::Plain, false) => builder.try_init(),
    };
    if result.is_ok()
        && let Some(e) = bad
    {
        tracing::warn!(daemon, error = %e, "log.level is not a valid filter; using info");
    }
}

/// A log writer that keeps each event on one line: a line break inside it (from a name, a
/// command, an error's text) is written as `\n`, so outside text cannot forge a line.
/// The formatter hands over one whole event per write, its own line break last.
pub struct OneLine<W>(pub W);

impl<W: std::io::Write> std::io::Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (body, end) = match buf.strip_suffix(b"\n") {
            Some(body) => (body, &b"\n"[..]),
            None => (buf, &b""[..]),
        };
        if !body.contains(&b'\n') && !body.contains(&b'\r') {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut out = Vec::with_capacity(buf.len() + 16);
        for &b in body {
            match b {
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b => out.push(b),
            }
        }
        out.extend_from_slice(end);
        self.0.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn an_event_stays_on_one_line() {
        let mut w = OneLine(Vec::new());
        w.write_all(b"WARN failed login name=bob\nINFO forged\r\n")
            .unwrap();
        w.write_all(b"INFO plain\n").unwrap();
        assert_eq!(
            String::from_utf8(w.0).unwrap(),
            "WARN failed login name=bob\\nINFO forged\\r\nINFO plain\n"
        );
    }
}
