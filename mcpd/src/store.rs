//! mcpd's own database: the configured servers (their secrets sealed under mcpd's key, so
//! the file alone reveals none) and the pins of their tools.

use argos_store::now_ms;
use std::sync::Arc;

use argos_store::key::Key;
use sqlx::Row as _;
use sqlx::sqlite::SqlitePool;

use crate::server::ServerConfig;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The domain secrets are sealed in.
const SEAL: &str = "mcp-secret";
/// The domain OAuth credentials are sealed in.
const SEAL_OAUTH: &str = "mcp-oauth";

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Open(#[from] argos_store::StoreError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("server {0} already exists")]
    Exists(String),
    #[error("no server {0}")]
    NotFound(String),
    #[error("server {id}: its stored configuration cannot be read ({why})")]
    Corrupt { id: String, why: String },
}

#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
    key: Arc<Key>,
}

/// What OAuth credentials are bound to: the server, and the resource they were issued for.
fn oauth_place(server: &str, url: &str) -> String {
    format!("{server}\n{url}")
}

/// Where a secret is kept, bound into its seal.
fn place(id: &str, field: &str) -> Vec<u8> {
    format!("server:{id}/{field}").into_bytes()
}

impl Store {
    pub async fn open(path: &std::path::Path, key: Arc<Key>) -> Result<Store, StoreError> {
        // Checkpoint: its writes are mostly what it learns again from its servers
        // (pins, eras, refreshed tokens), often; an admin's change to a server is in
        // the gateway's audit trail and is made again.
        let pool = argos_store::open(path, &MIGRATOR, argos_store::Durability::Checkpoint).await?;
        Ok(Store { pool, key })
    }

    /// The database, for closing it at the stop.
    pub(crate) fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The configuration as stored: secrets sealed.
    fn seal(&self, c: &ServerConfig) -> String {
        let mut c = c.clone();
        let id = c.id.clone();
        for (k, v) in c.transport.values_mut() {
            if v.secret {
                v.value = self.key.seal(SEAL, &place(&id, k), v.value.as_bytes());
            }
        }
        serde_json::to_string(&c).expect("a configuration serializes")
    }

    fn unseal(&self, id: &str, text: &str) -> Result<ServerConfig, StoreError> {
        let corrupt = |why: String| StoreError::Corrupt {
            id: id.to_string(),
            why,
        };
        let mut c: ServerConfig = serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
        for (k, v) in c.transport.values_mut() {
            if v.secret {
                let plain = self
                    .key
                    .open(SEAL, &place(id, k), &v.value)
                    .ok_or_else(|| corrupt(format!("{k}: the sealed value does not open")))?;
                v.value = String::from_utf8(plain).map_err(|e| corrupt(e.to_string()))?;
            }
        }
        Ok(c)
    }

    pub async fn add(&self, c: &ServerConfig) -> Result<(), StoreError> {
        let now = now_ms();
        let r = sqlx::query(
            "INSERT INTO servers (id, config, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?)",
        )
        .bind(&c.id)
        .bind(self.seal(c))
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await;
        match r {
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(StoreError::Exists(c.id.clone()))
            }
            r => r.map(|_| ()).map_err(Into::into),
        }
    }

    pub async fn update(&self, c: &ServerConfig) -> Result<(), StoreError> {
        let r = sqlx::query("UPDATE servers SET config = ?, updated_at_ms = ? WHERE id = ?")
            .bind(self.seal(c))
            .bind(now_ms())
            .bind(&c.id)
            .execute(&self.pool)
            .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound(c.id.clone()));
        }
        Ok(())
    }

    pub async fn remove(&self, id: &str) -> Result<(), StoreError> {
        let r = sqlx::query("DELETE FROM servers WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await?;
        if r.rows_affected() == 0 {
            return Err(StoreError::NotFound(id.to_string()));
        }
        Ok(())
    }

    /// A server's OAuth credentials (JSON) for the resource at `url`, opened; none when
    /// it has none, or they were issued while it was at another URL (they are sealed
    /// bound to both).
    pub async fn oauth(&self, server: &str, url: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT sealed FROM oauth WHERE server = ?")
            .bind(server)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let sealed: String = row.get("sealed");
        let Some(plain) = self
            .key
            .open(SEAL_OAUTH, oauth_place(server, url).as_bytes(), &sealed)
        else {
            tracing::warn!(
                server,
                "OAuth credentials that are not for its URL are ignored"
            );
            return Ok(None);
        };
        String::from_utf8(plain)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                id: server.to_string(),
                why: e.to_string(),
            })
    }

    /// Keeps a server's OAuth credentials (JSON) for the resource at `url`, sealed.
    pub async fn set_oauth(&self, server: &str, url: &str, json: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO oauth (server, sealed, updated_at_ms) VALUES (?, ?, ?)
             ON CONFLICT (server) DO UPDATE SET sealed = excluded.sealed,
             updated_at_ms = excluded.updated_at_ms",
        )
        .bind(server)
        .bind(self.key.seal(
            SEAL_OAUTH,
            oauth_place(server, url).as_bytes(),
            json.as_bytes(),
        ))
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn clear_oauth(&self, server: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM oauth WHERE server = ?")
            .bind(server)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The era each server was found to speak (the known ones).
    pub async fn eras(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query("SELECT id, era FROM servers WHERE era != ''")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| (r.get("id"), r.get("era"))).collect())
    }

    /// Keeps the era a server was found to speak ("" forgets it).
    pub async fn set_era(&self, id: &str, era: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE servers SET era = ? WHERE id = ?")
            .bind(era)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Every server, by id.
    pub async fn all(&self) -> Result<Vec<ServerConfig>, StoreError> {
        let rows = sqlx::query("SELECT id, config FROM servers ORDER BY id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| self.unseal(&r.get::<String, _>("id"), &r.get::<String, _>("config")))
            .collect()
    }

    /// The pins of a server's tools: (upstream tool name, SHA-256 hex).
    #[cfg(test)]
    pub async fn pins(&self, server: &str) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query("SELECT tool, sha256 FROM pins WHERE server = ?")
            .bind(server)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.get("tool"), r.get("sha256")))
            .collect())
    }

    /// Writes a pin and the definition it was taken of: `replace` an existing one (an
    /// admin accepted a change), or keep it (first sight only).
    async fn write_pin(
        &self,
        server: &str,
        tool: &str,
        sha256: &str,
        definition: &str,
        replace: bool,
    ) -> Result<(), StoreError> {
        let sql = if replace {
            "INSERT INTO pins (server, tool, sha256, pinned_at_ms, definition) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (server, tool) DO UPDATE SET sha256 = excluded.sha256,
             pinned_at_ms = excluded.pinned_at_ms, definition = excluded.definition"
        } else {
            "INSERT INTO pins (server, tool, sha256, pinned_at_ms, definition) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (server, tool) DO NOTHING"
        };
        sqlx::query(sql)
            .bind(server)
            .bind(tool)
            .bind(sha256)
            .bind(now_ms())
            .bind(definition)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Whether any tool of a server has been pinned (it was listed before).
    pub async fn has_pins(&self, server: &str) -> Result<bool, StoreError> {
        let r = sqlx::query("SELECT 1 FROM pins WHERE server = ? LIMIT 1")
            .bind(server)
            .fetch_optional(&self.pool)
            .await?;
        Ok(r.is_some())
    }

    /// Pins a tool's definition anew (an admin accepted its change).
    pub async fn pin(
        &self,
        server: &str,
        tool: &str,
        sha256: &str,
        definition: &str,
    ) -> Result<(), StoreError> {
        self.write_pin(server, tool, sha256, definition, true).await
    }

    /// Pins a tool only if it has none yet; answers the pin in force and the definition
    /// it was taken of.
    pub async fn pin_first(
        &self,
        server: &str,
        tool: &str,
        sha256: &str,
        definition: &str,
    ) -> Result<(String, String), StoreError> {
        self.write_pin(server, tool, sha256, definition, false)
            .await?;
        let row = sqlx::query("SELECT sha256, definition FROM pins WHERE server = ? AND tool = ?")
            .bind(server)
            .bind(tool)
            .fetch_one(&self.pool)
            .await?;
        Ok((row.get("sha256"), row.get("definition")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{Transport, Value};

    fn config(id: &str) -> ServerConfig {
        ServerConfig {
            id: id.into(),
            name: "n".into(),
            transport: Transport::StreamableHttp {
                url: "https://x/mcp".into(),
                headers: [(
                    "Authorization".to_string(),
                    Value {
                        value: "Bearer top-s3cret-value".into(),
                        secret: true,
                    },
                )]
                .into(),
            },
            enabled: true,
            disabled_tools: vec![],
            connect_timeout_ms: 0,
            call_timeout_ms: 0,
            local: false,
        }
    }

    #[tokio::test]
    async fn servers_round_trip_with_their_secrets_sealed_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let key = Arc::new(Key::from_bytes([3; 32]));
        let db = dir.path().join("mcpd.db");
        let s = Store::open(&db, key.clone()).await.unwrap();
        s.add(&config("a")).await.unwrap();
        assert!(matches!(
            s.add(&config("a")).await,
            Err(StoreError::Exists(_))
        ));
        assert_eq!(s.all().await.unwrap(), vec![config("a")]);
        let mut c = config("a");
        c.name = "renamed".into();
        s.update(&c).await.unwrap();
        assert_eq!(s.all().await.unwrap()[0].name, "renamed");
        assert!(matches!(
            s.update(&config("zz")).await,
            Err(StoreError::NotFound(_))
        ));
        assert_eq!(
            s.pin_first("a", "echo", "h1", "d1").await.unwrap(),
            ("h1".into(), "d1".into())
        );
        assert_eq!(
            s.pin_first("a", "echo", "h2", "d2").await.unwrap(),
            ("h1".into(), "d1".into())
        );
        s.pin("a", "echo", "h2", "d2").await.unwrap();
        assert_eq!(
            s.pins("a").await.unwrap(),
            vec![("echo".into(), "h2".into())]
        );
        // Nothing of the secret is in the database's bytes (WAL included).
        drop(s);
        for f in std::fs::read_dir(dir.path()).unwrap() {
            let bytes = std::fs::read(f.unwrap().path()).unwrap();
            assert!(!bytes.windows(14).any(|w| w == b"top-s3cret-val"));
        }
        // Another key cannot read it back: refused, not shown sealed.
        let s = Store::open(&db, Arc::new(Key::from_bytes([4; 32])))
            .await
            .unwrap();
        assert!(matches!(s.all().await, Err(StoreError::Corrupt { .. })));
        let s = Store::open(&db, key).await.unwrap();
        s.remove("a").await.unwrap();
        assert!(
            s.pins("a").await.unwrap().is_empty(),
            "pins go with their server"
        );
        assert!(matches!(s.remove("a").await, Err(StoreError::NotFound(_))));
    }
}
