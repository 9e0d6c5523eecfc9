//! Each daemon's own SQLite database (WAL, embedded migrations) in its private state dir,
//! and the audit trail kept in it ([`audit`]). No daemon opens another's: data crosses
//! boundaries only through gRPC.
#![forbid(unsafe_code)]

pub mod audit;
pub mod key;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::str::FromStr;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

/// Errors opening a daemon database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("opening database {path}")]
    Open {
        path: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("migrating database {path}")]
    Migrate {
        path: String,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
}

/// Opens (creating if needed) `path` in WAL mode and applies `migrator`. The file is
/// made 0600: only the daemon reads it.
pub async fn open(
    path: &Path,
    migrator: &sqlx::migrate::Migrator,
) -> Result<SqlitePool, StoreError> {
    let shown = path.display().to_string();
    let opts = SqliteConnectOptions::from_str(&format!("sqlite://{shown}"))
        .map_err(|source| StoreError::Open {
            path: shown.clone(),
            source,
        })?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        .busy_timeout(std::time::Duration::from_secs(5));
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(opts)
        .await
        .map_err(|source| StoreError::Open {
            path: shown.clone(),
            source,
        })?;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    migrator
        .run(&pool)
        .await
        .map_err(|source| StoreError::Migrate {
            path: shown,
            source,
        })?;
    Ok(pool)
}
