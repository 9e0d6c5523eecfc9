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
    // journald stamps every line itself; a second timestamp is noise there.
    let under_journald = std::env::var_os("JOURNAL_STREAM").is_some();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
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
