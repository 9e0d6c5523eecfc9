//! Registered stdio MCP servers: the exact launch an admin approved for each server id,
//! kept by its digest. mcpd (which talks to third-party servers and may be compromised)
//! starts a stdio server only by giving a launch whose digest is the registered one, so it
//! can run nothing an admin did not register.

use argos_store::now_ms;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sqlx::Row as _;
use sqlx::sqlite::SqlitePool;

use crate::launch::LaunchRequest;

/// A stdio server's launch, as registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpLaunch {
    pub command: String,
    pub args: Vec<String>,
    /// Sorted, without repeats (the canonical form).
    pub env_keys: Vec<String>,
    pub cwd: String,
    pub network: bool,
}

/// A registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub server_id: String,
    pub launch: McpLaunch,
    pub digest: String,
    pub registered_by: String,
    pub registered_at_ms: i64,
}

/// Why a registration or a start is refused, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("{0}: {1}")]
    Invalid(&'static str, String),
    #[error("no stdio server {0} is registered: an admin registers it first")]
    NotRegistered(String),
    #[error("launch: not the one registered for {0} (an admin registers a changed launch again)")]
    Mismatch(String),
}

/// A server id as mcpd makes them.
pub fn check_id(id: &str) -> Result<(), McpError> {
    if argos_common::names::is_server_id(id) {
        Ok(())
    } else {
        Err(McpError::Invalid(
            "server_id",
            format!("{id:?}: {}", argos_common::names::SERVER_ID_RULE),
        ))
    }
}

impl McpLaunch {
    /// The canonical form: checked, env keys sorted and unique.
    pub fn canonical(mut self) -> Result<McpLaunch, McpError> {
        if self.command.is_empty() {
            return Err(McpError::Invalid("launch.command", "empty".into()));
        }
        if self.args.len() > 256 {
            return Err(McpError::Invalid("launch.args", "more than 256".into()));
        }
        for s in std::iter::once(&self.command)
            .chain(&self.args)
            .chain(std::iter::once(&self.cwd))
        {
            if s.contains('\0') || s.len() > 4096 {
                return Err(McpError::Invalid(
                    "launch",
                    "a NUL byte, or longer than 4096 bytes".into(),
                ));
            }
        }
        if !self.cwd.is_empty()
            && (!self.cwd.starts_with('/') || self.cwd.split('/').any(|p| p == ".."))
        {
            return Err(McpError::Invalid(
                "launch.cwd",
                "absolute, without '..'".into(),
            ));
        }
        if self.env_keys.len() > 64 {
            return Err(McpError::Invalid("launch.env_keys", "more than 64".into()));
        }
        if let Some(k) = self
            .env_keys
            .iter()
            .find(|k| !argos_common::names::is_env_name(k))
        {
            return Err(McpError::Invalid(
                "launch.env_keys",
                format!("{k:?} is not a variable name"),
            ));
        }
        // mcpd gives the values: a name that decides what runs or what it loads would
        // let it run anything under the registered launch's name.
        if let Some(k) = self
            .env_keys
            .iter()
            .find(|k| argos_common::names::steers(k))
        {
            return Err(McpError::Invalid(
                "launch.env_keys",
                format!("{k}: it chooses what the server runs or loads, so mcpd may not set it"),
            ));
        }
        self.env_keys.sort();
        self.env_keys.dedup();
        Ok(self)
    }

    /// SHA-256 (hex) of the canonical form's canonical JSON.
    pub fn digest(&self) -> String {
        let text = argos_store::audit::canonical(
            &serde_json::to_value(self).unwrap_or(serde_json::Value::Null),
        );
        argos_store::audit::sha256_hex(text.as_bytes())
    }

    /// The profile it runs in.
    pub fn profile(&self) -> &'static str {
        if self.network {
            "mcp-server"
        } else {
            "mcp-server-offline"
        }
    }

    /// The launch request for a start with `env` (already checked against the keys).
    pub fn request(&self, env: BTreeMap<String, String>) -> LaunchRequest {
        LaunchRequest {
            argv: std::iter::once(self.command.clone())
                .chain(self.args.iter().cloned())
                .collect(),
            cwd: self.cwd.clone(),
            env,
            profile: self.profile().into(),
            // No clock of its own: it lives as long as mcpd needs it.
            timeout_ms: Some(0),
            open_stdin: true,
            registered_env: true,
            ..LaunchRequest::default()
        }
    }
}

/// Checks a start against its registration: the same launch, and the environment's keys
/// exactly the registered ones.
pub fn check_start(
    reg: &Registration,
    launch: McpLaunch,
    env: &BTreeMap<String, String>,
) -> Result<McpLaunch, McpError> {
    let launch = launch.canonical()?;
    if launch.digest() != reg.digest {
        return Err(McpError::Mismatch(reg.server_id.clone()));
    }
    let keys: Vec<&String> = env.keys().collect();
    if keys != launch.env_keys.iter().collect::<Vec<_>>() {
        return Err(McpError::Invalid(
            "env",
            format!(
                "the keys must be exactly the registered ones ({})",
                launch.env_keys.join(", ")
            ),
        ));
    }
    Ok(launch)
}

/// Registers (or registers again, replacing) a server's launch.
pub async fn register(
    pool: &SqlitePool,
    server_id: &str,
    launch: McpLaunch,
    by: &str,
) -> Result<Registration, sqlx::Error> {
    let digest = launch.digest();
    let text = argos_store::audit::canonical(
        &serde_json::to_value(&launch).unwrap_or(serde_json::Value::Null),
    );
    let at = now_ms();
    sqlx::query(
        "INSERT INTO mcp_servers (server_id, digest, launch, registered_by, registered_at_ms)
         VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (server_id) DO UPDATE SET digest = excluded.digest, launch = excluded.launch,
         registered_by = excluded.registered_by, registered_at_ms = excluded.registered_at_ms",
    )
    .bind(server_id)
    .bind(&digest)
    .bind(&text)
    .bind(by)
    .bind(at)
    .execute(pool)
    .await?;
    Ok(Registration {
        server_id: server_id.to_string(),
        launch,
        digest,
        registered_by: by.to_string(),
        registered_at_ms: at,
    })
}

/// The launch a server runs as now (empty: none started yet).
pub async fn current_launch(pool: &SqlitePool, server_id: &str) -> Result<String, sqlx::Error> {
    let r = sqlx::query("SELECT launch_id FROM mcp_servers WHERE server_id = ?")
        .bind(server_id)
        .fetch_optional(pool)
        .await?;
    Ok(r.map(|r| r.get("launch_id")).unwrap_or_default())
}

/// Records the launch a server now runs as.
pub async fn set_launch(
    pool: &SqlitePool,
    server_id: &str,
    launch_id: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE mcp_servers SET launch_id = ? WHERE server_id = ?")
        .bind(launch_id)
        .bind(server_id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Forgets a registration; whether there was one.
pub async fn forget(pool: &SqlitePool, server_id: &str) -> Result<bool, sqlx::Error> {
    let r = sqlx::query("DELETE FROM mcp_servers WHERE server_id = ?")
        .bind(server_id)
        .execute(pool)
        .await?;
    Ok(r.rows_affected() > 0)
}

fn row(r: &sqlx::sqlite::SqliteRow) -> Option<Registration> {
    Some(Registration {
        server_id: r.get("server_id"),
        launch: serde_json::from_str(&r.get::<String, _>("launch")).ok()?,
        digest: r.get("digest"),
        registered_by: r.get("registered_by"),
        registered_at_ms: r.get("registered_at_ms"),
    })
}

pub async fn get(pool: &SqlitePool, server_id: &str) -> Result<Option<Registration>, sqlx::Error> {
    let r = sqlx::query("SELECT * FROM mcp_servers WHERE server_id = ?")
        .bind(server_id)
        .fetch_optional(pool)
        .await?;
    Ok(r.as_ref().and_then(row))
}

pub async fn list(pool: &SqlitePool) -> Result<Vec<Registration>, sqlx::Error> {
    let rows = sqlx::query("SELECT * FROM mcp_servers ORDER BY server_id")
        .fetch_all(pool)
        .await?;
    Ok(rows.iter().filter_map(row).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> McpLaunch {
        McpLaunch {
            command: "npx".into(),
            args: vec!["-y".into(), "server".into()],
            env_keys: vec!["TOKEN".into(), "API_URL".into(), "TOKEN".into()],
            cwd: String::new(),
            network: true,
        }
    }

    fn reg() -> Registration {
        let l = launch().canonical().unwrap();
        Registration {
            server_id: "s".into(),
            digest: l.digest(),
            launch: l,
            registered_by: "admin".into(),
            registered_at_ms: 0,
        }
    }

    fn env(keys: &[&str]) -> BTreeMap<String, String> {
        keys.iter().map(|k| (k.to_string(), "v".into())).collect()
    }

    #[test]
    fn the_canonical_form_sorts_keys_and_its_digest_binds_every_part() {
        let l = launch().canonical().unwrap();
        assert_eq!(l.env_keys, ["API_URL", "TOKEN"]);
        let d = l.digest();
        for changed in [
            McpLaunch {
                command: "npm".into(),
                ..l.clone()
            },
            McpLaunch {
                args: vec!["-y".into()],
                ..l.clone()
            },
            McpLaunch {
                env_keys: vec!["API_URL".into()],
                ..l.clone()
            },
            McpLaunch {
                cwd: "/srv".into(),
                ..l.clone()
            },
            McpLaunch {
                network: false,
                ..l.clone()
            },
        ] {
            assert_ne!(changed.digest(), d, "{changed:?}");
        }
        assert_eq!(l.profile(), "mcp-server");
        let r = l.request(env(&["API_URL", "TOKEN"]));
        assert_eq!(r.argv, ["npx", "-y", "server"]);
        assert!(r.open_stdin && r.registered_env);
    }

    #[test]
    fn a_start_must_be_the_registered_launch_with_exactly_its_keys() {
        let r = reg();
        assert!(check_start(&r, launch(), &env(&["API_URL", "TOKEN"])).is_ok());
        let other = McpLaunch {
            command: "sh".into(),
            args: vec!["-c".into(), "anything".into()],
            ..launch()
        };
        assert_eq!(
            check_start(&r, other, &env(&["API_URL", "TOKEN"])),
            Err(McpError::Mismatch("s".into()))
        );
        for keys in [&["API_URL"][..], &["API_URL", "TOKEN", "LD_PRELOAD"]] {
            assert!(matches!(
                check_start(&r, launch(), &env(keys)),
                Err(McpError::Invalid("env", _))
            ));
        }
    }

    #[test]
    fn bad_launches_and_ids_are_named() {
        assert!(check_id("ok-1").is_ok());
        assert!(check_id("Bad").is_err());
        let bad = |f: fn(&mut McpLaunch)| {
            let mut l = launch();
            f(&mut l);
            l.canonical().unwrap_err()
        };
        assert!(matches!(
            bad(|l| l.command.clear()),
            McpError::Invalid("launch.command", _)
        ));
        assert!(matches!(
            bad(|l| l.cwd = "rel".into()),
            McpError::Invalid("launch.cwd", _)
        ));
        assert!(matches!(
            bad(|l| l.env_keys = vec!["A=B".into()]),
            McpError::Invalid("launch.env_keys", _)
        ));
        assert!(matches!(
            bad(|l| l.args = vec!["a\0".into()]),
            McpError::Invalid("launch", _)
        ));
        // mcpd gives the values: names that choose what runs or loads are refused.
        for steering in [
            "PATH",
            "LD_PRELOAD",
            "NODE_OPTIONS",
            "npm_config_prefix",
            "PYTHONPATH",
            "BASH_ENV",
        ] {
            let mut l = launch();
            l.env_keys = vec![steering.into()];
            assert!(
                matches!(l.canonical(), Err(McpError::Invalid("launch.env_keys", _))),
                "{steering}"
            );
        }
    }
}
