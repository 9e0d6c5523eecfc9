//! Which tools a principal's agent gets at `/mcp`: an admin setting, one grant per role
//! (defaults: admins everything; users the read-only tools and `run` in the sandbox) and
//! optionally one per user, kept in the gateway's `settings` table and in memory. A token
//! may narrow it further to the tools that only read ([`Tool::read_only`]): a brokered
//! tool counts as read-only only when its annotations say so, otherwise it fails closed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sqlx::{Row as _, SqlitePool};

use crate::accounts::{Role, now_ms};

/// Where `run` may run a command (as the risk gate's places).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RunPlace {
    Auto,
    Sandbox,
    Inspect,
    Host,
}

/// Which brokered (`mcp__…`) tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Brokered {
    All,
    /// Those annotated `readOnlyHint` and not `destructiveHint`.
    ReadOnly,
    None,
}

/// What a principal's agent may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// The places `run` may use (a set: a place named twice counts once); none: no
    /// `run` (nor `cancel_execution`).
    pub run_places: Vec<RunPlace>,
    pub brokered: Brokered,
    /// `http_get`: reading public web pages.
    pub http_get: bool,
}

impl Grant {
    fn everything() -> Grant {
        Grant {
            run_places: vec![
                RunPlace::Auto,
                RunPlace::Sandbox,
                RunPlace::Inspect,
                RunPlace::Host,
            ],
            brokered: Brokered::All,
            http_get: true,
        }
    }

    fn users_default() -> Grant {
        Grant {
            run_places: vec![RunPlace::Sandbox],
            brokered: Brokered::ReadOnly,
            http_get: true,
        }
    }

    /// The place `run` uses when the agent names none: `auto` where allowed, else the
    /// sandbox, else the first allowed.
    pub fn default_place(&self) -> Option<RunPlace> {
        [RunPlace::Auto, RunPlace::Sandbox]
            .into_iter()
            .find(|p| self.run_places.contains(p))
            .or_else(|| self.run_places.first().copied())
    }
}

/// The whole setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Access {
    /// Each role's grant.
    pub admin: Grant,
    pub user: Grant,
    /// Grants for single users, instead of their role's.
    pub users: BTreeMap<String, Grant>,
}

impl Default for Access {
    fn default() -> Access {
        Access {
            admin: Grant::everything(),
            user: Grant::users_default(),
            users: BTreeMap::new(),
        }
    }
}

impl Access {
    /// The grant that applies to a user.
    pub fn grant(&self, name: &str, role: Role) -> &Grant {
        self.users.get(name).unwrap_or(match role {
            Role::Admin => &self.admin,
            Role::User => &self.user,
        })
    }
}

/// One of the tools `/mcp` offers, as far as access is concerned.
#[derive(Debug, Clone, Copy)]
pub enum Tool<'a> {
    Run,
    Cancel,
    Status,
    Classify,
    HttpGet,
    /// `start_job`; `cancel_job`; `get_job` and `list_jobs`.
    StartJob,
    CancelJob,
    ReadJobs,
    /// A brokered tool, with its annotations.
    Brokered(Option<&'a argos_proto::mcp::v1::Annotations>),
}

impl Tool<'_> {
    /// Whether the tool only reads: ours by what they do, a brokered one only when its
    /// annotations say `readOnlyHint` and not `destructiveHint`.
    pub fn read_only(self) -> bool {
        match self {
            Tool::Status | Tool::Classify | Tool::HttpGet | Tool::ReadJobs => true,
            Tool::Run | Tool::Cancel | Tool::StartJob | Tool::CancelJob => false,
            Tool::Brokered(a) => {
                a.is_some_and(|a| a.read_only == Some(true) && a.destructive != Some(true))
            }
        }
    }

    /// Whether a principal with `grant`, through a token limited to reading or not, may
    /// see and call the tool.
    pub fn allowed(self, grant: &Grant, read_only_token: bool) -> bool {
        if read_only_token && !self.read_only() {
            return false;
        }
        match self {
            Tool::Run | Tool::Cancel | Tool::StartJob | Tool::CancelJob => {
                !grant.run_places.is_empty()
            }
            Tool::Status | Tool::Classify | Tool::ReadJobs => true,
            Tool::HttpGet => grant.http_get,
            Tool::Brokered(_) => match grant.brokered {
                Brokered::All => true,
                Brokered::ReadOnly => self.read_only(),
                Brokered::None => false,
            },
        }
    }
}

const KEY: &str = "mcp_access";

/// The setting as stored (the defaults when never set), with who set it last and when.
pub async fn load(pool: &SqlitePool) -> Result<(Access, Option<(String, i64)>), sqlx::Error> {
    let row = sqlx::query("SELECT value, updated_by, updated_at_ms FROM settings WHERE key = ?")
        .bind(KEY)
        .fetch_optional(pool)
        .await?;
    Ok(match row {
        None => (Access::default(), None),
        Some(r) => (
            // Written by `save` only, from a checked value: unreadable means a damaged
            // database. The defaults could be wider than what was set: refuse instead.
            serde_json::from_str(&r.get::<String, _>("value"))
                .map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
            Some((r.get("updated_by"), r.get("updated_at_ms"))),
        ),
    })
}

pub async fn save(pool: &SqlitePool, access: &Access, by: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO settings (key, value, updated_at_ms, updated_by) VALUES (?, ?, ?, ?)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value,
           updated_at_ms = excluded.updated_at_ms, updated_by = excluded.updated_by",
    )
    .bind(KEY)
    .bind(serde_json::to_string(access).unwrap_or_default())
    .bind(now_ms())
    .bind(by)
    .execute(pool)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use argos_proto::mcp::v1::Annotations;

    #[test]
    fn defaults_give_admins_everything_and_users_reading_and_the_sandbox() {
        let a = Access::default();
        let admin = a.grant("root", Role::Admin);
        let user = a.grant("bob", Role::User);
        assert_eq!(admin.default_place(), Some(RunPlace::Auto));
        assert_eq!(user.default_place(), Some(RunPlace::Sandbox));
        let reads = Annotations {
            read_only: Some(true),
            ..Default::default()
        };
        let reads_but_destroys = Annotations {
            read_only: Some(true),
            destructive: Some(true),
            ..Default::default()
        };
        for t in [
            Tool::Run,
            Tool::Brokered(None),
            Tool::Brokered(Some(&reads_but_destroys)),
        ] {
            assert!(t.allowed(admin, false), "{t:?}");
            assert!(!t.allowed(admin, true), "{t:?} for a read-only token");
        }
        assert!(Tool::Run.allowed(user, false));
        assert!(!Tool::Brokered(None).allowed(user, false));
        assert!(!Tool::Brokered(Some(&reads_but_destroys)).allowed(user, false));
        assert!(Tool::Brokered(Some(&reads)).allowed(user, false));
        assert!(Tool::Brokered(Some(&reads)).allowed(user, true));
        assert!(Tool::HttpGet.allowed(user, true));
        assert!(!Tool::Cancel.allowed(user, true));
    }

    #[test]
    fn a_users_grant_replaces_the_roles() {
        let mut a = Access::default();
        a.users.insert(
            "carol".into(),
            Grant {
                run_places: vec![],
                brokered: Brokered::None,
                http_get: false,
            },
        );
        let g = a.grant("carol", Role::Admin);
        assert_eq!(g.default_place(), None);
        for t in [Tool::Run, Tool::Cancel, Tool::HttpGet, Tool::Brokered(None)] {
            assert!(!t.allowed(g, false), "{t:?}");
        }
        assert!(Tool::Classify.allowed(g, false) && Tool::Status.allowed(g, false));
    }
}
