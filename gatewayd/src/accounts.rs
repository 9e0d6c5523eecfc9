//! Accounts: users with argon2id password hashes, server-side sessions, API tokens and
//! the one-time link that creates the first admin. Every secret handed out (session
//! cookie, token, setup link) is 32 random bytes, shown once and stored only as its
//! SHA-256: a copy of the database holds no usable credential, and a lookup by hash leaks
//! nothing through timing.

use std::sync::Arc;
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use base64::Engine as _;
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::Row;
use sqlx::sqlite::SqlitePool;
use tokio::sync::Semaphore;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// What an account may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Admin,
    User,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::User => "user",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "user" => Some(Role::User),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub role: Role,
    pub created_at_ms: i64,
}

/// An API token as listed (never its secret).
#[derive(Debug, Clone, Serialize)]
pub struct TokenInfo {
    pub id: i64,
    pub name: String,
    pub scopes: Vec<String>,
    /// At `/mcp`: only tools that only read (by their annotations).
    pub mcp_read_only: bool,
    /// At `/mcp`: `run` may ask the human in the agent's client to approve a
    /// non-destructive change (elicitation).
    pub mcp_elicitation: bool,
    pub created_at_ms: i64,
    pub last_used_ms: Option<i64>,
}

/// What a token's agent may do at `/mcp` besides its scopes.
#[derive(Debug, Clone, Copy, Default)]
pub struct McpOptions {
    pub read_only: bool,
    pub elicitation: bool,
}

/// What a token may be used for.
/// `read`: look; `exec`: run commands (admins); `agent`: ask to run commands through the
/// risk gate; `approve`: decide approvals (admins); `mcp`: an agent's tools at `/mcp`;
/// `metrics`: `/metrics` and nothing else (admins), for a scraper's token.
pub const SCOPES: &[&str] = &["exec", "read", "agent", "approve", "mcp", "metrics"];

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("the name {0:?} is taken")]
    NameTaken(String),
    #[error("the setup link is unknown, used or expired")]
    SetupLink,
    #[error("the current password is wrong")]
    WrongPassword,
    #[error("storage: {0}")]
    Store(#[from] sqlx::Error),
    #[error("password hashing: {0}")]
    Hash(String),
}

fn invalid(field: &'static str, message: impl Into<String>) -> AccountError {
    AccountError::Invalid {
        field,
        message: message.into(),
    }
}

pub use argos_store::now_ms;

/// 32 random bytes, URL-safe base64 without padding (43 characters).
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the kernel's random source");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

pub fn sha256(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Account names: short, lowercase, no surprises in logs or URLs.
pub fn check_name(name: &str) -> Result<(), AccountError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "name",
            "1 to 64 characters: lowercase letters, digits, '.', '_' or '-'",
        ))
    }
}

pub fn check_password(field: &'static str, password: &str) -> Result<(), AccountError> {
    let n = password.chars().count();
    if n < 10 {
        return Err(invalid(field, "at least 10 characters"));
    }
    if password.len() > 1024 {
        return Err(invalid(field, "at most 1024 bytes"));
    }
    Ok(())
}

/// Sessions end after `idle` without a request, and after `absolute` in any case.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub idle: Duration,
    pub absolute: Duration,
}

pub struct Accounts {
    pool: SqlitePool,
    /// The database's path: beside it, the mark that accounts were ever made.
    path: std::path::PathBuf,
    /// Argon2id at about 19 MiB per hash: the permits cap the memory logins can take.
    hashing: Arc<Semaphore>,
    params: argon2::Params,
    pub limits: SessionLimits,
    /// A hash of a random password, verified against when the account does not exist, so
    /// a login for an unknown name takes as long as one for a known name (made at the
    /// first such login: start-up does not wait for it).
    decoy: tokio::sync::OnceCell<String>,
    /// Live tokens recently looked up, by their secret's hash: a token's every request
    /// (an agent's calls at /mcp) need not wait for the database. An entry lives a few
    /// seconds at most, and revoking a token, changing a password or deleting a user
    /// empties the cache at once (all happen only here), so a revoked token is refused on
    /// its next request.
    live_tokens:
        std::sync::Mutex<std::collections::HashMap<Vec<u8>, (User, TokenInfo, std::time::Instant)>>,
    /// Bumped by each revocation, password change and deletion: a lookup that began before
    /// one does not cache what it read.
    token_generation: std::sync::atomic::AtomicU64,
    /// Bumped whenever a credential may have ended (a logout, a revocation, a password
    /// change, a deletion), per user: the streams that outlive their request (terminals,
    /// event streams, `/mcp` sessions) look again whether theirs still lets them in.
    ended: Endings,
}

/// What wakes the streams when a credential may have ended: one watch per user with
/// streams open (a change wakes only that user's), and one for any user (the `/mcp`
/// sessions' sweep, a single task).
#[derive(Default)]
struct Endings {
    any: tokio::sync::watch::Sender<u64>,
    users: std::sync::Mutex<std::collections::HashMap<i64, tokio::sync::watch::Sender<u64>>>,
}

impl Endings {
    fn users(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<i64, tokio::sync::watch::Sender<u64>>>
    {
        self.users.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One of `user`'s credentials may have ended. Watches nobody holds any more go.
    fn bump(&self, user: i64) {
        self.any.send_modify(|n| *n += 1);
        let mut users = self.users();
        if let Some(w) = users.get(&user) {
            w.send_modify(|n| *n += 1);
        }
        users.retain(|_, w| w.receiver_count() > 0);
    }

    fn of(&self, user: i64) -> tokio::sync::watch::Receiver<u64> {
        self.users()
            .entry(user)
            .or_insert_with(|| tokio::sync::watch::Sender::new(0))
            .subscribe()
    }
}

/// How long a looked-up token is believed without asking the database again.
const TOKEN_CACHE_TTL: Duration = Duration::from_secs(5);

impl Accounts {
    /// The gateway's database (its audit trail lives there too).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub async fn open(
        path: &std::path::Path,
        concurrent_hashes: usize,
        limits: SessionLimits,
    ) -> anyhow::Result<Accounts> {
        // Commit: accounts, tokens, sessions revoked and the audit trail of decisions
        // must not come back undone after a power cut.
        let pool = argos_store::open(path, &MIGRATOR, argos_store::Durability::Commit).await?;
        // A database that once had accounts and has none lost them: never taken for a
        // first start, which would offer a new first-admin link to whoever opens it.
        let users: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users")
            .fetch_one(&pool)
            .await?;
        argos_store::check_mark(path, "gateway", "accounts", users > 0)?;
        // OWASP's argon2id minimum: m = 19 MiB, t = 2, p = 1.
        let params = argon2::Params::new(19 * 1024, 2, 1, None)
            .map_err(|e| anyhow::anyhow!("argon2 parameters: {e}"))?;
        Ok(Accounts {
            pool,
            path: path.to_path_buf(),
            hashing: Arc::new(Semaphore::new(concurrent_hashes.max(1))),
            params,
            limits,
            decoy: tokio::sync::OnceCell::new(),
            live_tokens: Default::default(),
            token_generation: Default::default(),
            ended: Endings::default(),
        })
    }

    async fn hash(&self, password: String) -> Result<String, AccountError> {
        let _permit = self.hashing.acquire().await.expect("never closed");
        let params = self.params.clone();
        tokio::task::spawn_blocking(move || {
            let mut salt = [0u8; 16];
            getrandom::fill(&mut salt).expect("the kernel's random source");
            let salt = SaltString::encode_b64(&salt).map_err(|e| e.to_string())?;
            argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
                .hash_password(password.as_bytes(), &salt)
                .map(|h| h.to_string())
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| AccountError::Hash(e.to_string()))?
        .map_err(AccountError::Hash)
    }

    async fn verify(&self, password: String, phc: String) -> bool {
        let Ok(_permit) = self.hashing.acquire().await else {
            return false;
        };
        let params = self.params.clone();
        tokio::task::spawn_blocking(move || {
            PasswordHash::new(&phc).is_ok_and(|h| {
                argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
                    .verify_password(password.as_bytes(), &h)
                    .is_ok()
            })
        })
        .await
        .unwrap_or(false)
    }

    pub async fn user_count(&self) -> Result<i64, AccountError> {
        Ok(sqlx::query("SELECT COUNT(*) FROM users")
            .fetch_one(&self.pool)
            .await?
            .get(0))
    }

    /// A fresh one-time link to create the first admin (only while there is no user):
    /// every older link stops working.
    pub async fn new_setup_link(&self, ttl: Duration) -> Result<Option<String>, AccountError> {
        if self.user_count().await? > 0 {
            return Ok(None);
        }
        let secret = new_secret();
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM setup_links")
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO setup_links (secret_sha256, created_at_ms, expires_at_ms) VALUES (?, ?, ?)",
        )
        .bind(sha256(&secret))
        .bind(now)
        .bind(now + ttl.as_millis() as i64)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(secret))
    }

    /// Creates the first admin with a setup link (used up by this, whatever happens next).
    pub async fn setup_admin(
        &self,
        link: &str,
        name: &str,
        password: &str,
    ) -> Result<User, AccountError> {
        check_name(name)?;
        check_password("password", password)?;
        let hash = self.hash(password.to_string()).await?;
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        let used = sqlx::query(
            "UPDATE setup_links SET used_at_ms = ?1
             WHERE secret_sha256 = ?2 AND used_at_ms IS NULL AND expires_at_ms > ?1",
        )
        .bind(now)
        .bind(sha256(link))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let users: i64 = sqlx::query("SELECT COUNT(*) FROM users")
            .fetch_one(&mut *tx)
            .await?
            .get(0);
        if used != 1 || users > 0 {
            return Err(AccountError::SetupLink);
        }
        let id = sqlx::query(
            "INSERT INTO users (name, role, password_hash, created_at_ms) VALUES (?, 'admin', ?, ?)",
        )
        .bind(name)
        .bind(&hash)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .last_insert_rowid();
        tx.commit().await?;
        // From now on the database must hold accounts (checked at every start).
        if let Err(e) = argos_store::mark(&self.path, "accounts") {
            tracing::warn!(error = %e, "marking that the gateway has accounts (marked at the next start)");
        }
        Ok(User {
            id,
            name: name.to_string(),
            role: Role::Admin,
            created_at_ms: now,
        })
    }

    pub async fn create_user(
        &self,
        name: &str,
        password: &str,
        role: Role,
    ) -> Result<User, AccountError> {
        check_name(name)?;
        check_password("password", password)?;
        let hash = self.hash(password.to_string()).await?;
        let now = now_ms();
        let id = sqlx::query(
            "INSERT INTO users (name, role, password_hash, created_at_ms) VALUES (?, ?, ?, ?)",
        )
        .bind(name)
        .bind(role.as_str())
        .bind(&hash)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(|e| match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => {
                AccountError::NameTaken(name.to_string())
            }
            _ => AccountError::Store(e),
        })?
        .last_insert_rowid();
        Ok(User {
            id,
            name: name.to_string(),
            role,
            created_at_ms: now,
        })
    }

    pub async fn users(&self) -> Result<Vec<User>, AccountError> {
        let rows = sqlx::query(
            "SELECT id, name, role, created_at_ms FROM users WHERE disabled = 0 ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().filter_map(user).collect())
    }

    /// Deletes an account with its sessions and tokens. The last admin cannot go.
    pub async fn delete_user(&self, name: &str) -> Result<bool, AccountError> {
        let mut tx = self.pool.begin().await?;
        let target: Option<(i64, String)> =
            sqlx::query("SELECT id, role FROM users WHERE name = ?")
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| (r.get(0), r.get(1)));
        let Some((id, role)) = target else {
            return Ok(false);
        };
        if role == "admin" {
            let admins: i64 = sqlx::query("SELECT COUNT(*) FROM users WHERE role = 'admin'")
                .fetch_one(&mut *tx)
                .await?
                .get(0);
            if admins <= 1 {
                return Err(invalid("name", "the last admin cannot be deleted"));
            }
        }
        sqlx::query("DELETE FROM users WHERE name = ?")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        // After the commit: a lookup racing the deletion cannot cache what it read.
        self.forget_tokens(id);
        Ok(true)
    }

    /// The account if `password` is its password. Takes as long for an unknown name.
    pub async fn login(&self, name: &str, password: &str) -> Result<Option<User>, AccountError> {
        let row = sqlx::query(
            "SELECT id, name, role, created_at_ms, password_hash FROM users WHERE name = ? AND disabled = 0",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        let phc = match &row {
            Some(r) => r.get::<String, _>("password_hash"),
            None => self
                .decoy
                .get_or_try_init(|| self.hash(new_secret()))
                .await?
                .clone(),
        };
        let ok = self.verify(password.to_string(), phc).await;
        Ok(row.filter(|_| ok).as_ref().and_then(user))
    }

    /// Changes a password (the current one required). Whoever knew the old one may have
    /// left a way in: every other session of the account ends and every API token it holds
    /// is revoked (and forgotten by the token cache), in the same transaction.
    pub async fn change_password(
        &self,
        who: &User,
        current: &str,
        new: &str,
        keep_session: Option<&str>,
    ) -> Result<(), AccountError> {
        check_password("new_password", new)?;
        if self.login(&who.name, current).await?.is_none() {
            return Err(AccountError::WrongPassword);
        }
        let hash = self.hash(new.to_string()).await?;
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE users SET password_hash = ? WHERE id = ?")
            .bind(&hash)
            .bind(who.id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM sessions WHERE user_id = ? AND secret_sha256 != ?")
            .bind(who.id)
            .bind(keep_session.map(sha256).unwrap_or_default())
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE api_tokens SET revoked_at_ms = ? WHERE user_id = ? AND revoked_at_ms IS NULL",
        )
        .bind(now_ms())
        .bind(who.id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        // After the commit: a lookup racing the change cannot cache what it read.
        self.forget_tokens(who.id);
        Ok(())
    }

    /// Starts a session; returns the cookie's secret.
    pub async fn new_session(&self, user_id: i64) -> Result<String, AccountError> {
        let secret = new_secret();
        let now = now_ms();
        sqlx::query(
            "INSERT INTO sessions (secret_sha256, user_id, created_at_ms, last_seen_ms, expires_at_ms)
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(sha256(&secret))
        .bind(user_id)
        .bind(now)
        .bind(now)
        .bind(now + self.limits.absolute.as_millis() as i64)
        .execute(&self.pool)
        .await?;
        Ok(secret)
    }

    /// The user of a live session (idle and absolute expiry checked); marks it seen.
    pub async fn session(&self, secret: &str) -> Result<Option<User>, AccountError> {
        let now = now_ms();
        let idle_ms = self.limits.idle.as_millis() as i64;
        let row = sqlx::query(
            "SELECT u.id, u.name, u.role, u.created_at_ms, s.last_seen_ms FROM sessions s
             JOIN users u ON u.id = s.user_id
             WHERE s.secret_sha256 = ?1 AND s.expires_at_ms > ?2 AND s.last_seen_ms > ?2 - ?3
               AND u.disabled = 0",
        )
        .bind(sha256(secret))
        .bind(now)
        .bind(idle_ms)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        // Refresh the idle clock at most once a minute: a request is not a write.
        if now - row.get::<i64, _>("last_seen_ms") > 60_000 {
            sqlx::query("UPDATE sessions SET last_seen_ms = ? WHERE secret_sha256 = ?")
                .bind(now)
                .bind(sha256(secret))
                .execute(&self.pool)
                .await?;
        }
        Ok(user(&row))
    }

    pub async fn end_session(&self, secret: &str) -> Result<(), AccountError> {
        let ended: Option<i64> =
            sqlx::query_scalar("DELETE FROM sessions WHERE secret_sha256 = ? RETURNING user_id")
                .bind(sha256(secret))
                .fetch_optional(&self.pool)
                .await?;
        // Only a session that was there wakes its user's streams (a logout of nothing is
        // free).
        if let Some(user) = ended {
            self.ended.bump(user);
        }
        Ok(())
    }

    /// Whether session `secret` is still live for `user_id` (as [`Accounts::session`]
    /// checks, without marking it seen: a stream held open is not a request).
    pub async fn session_live(&self, secret: &str, user_id: i64) -> Result<bool, AccountError> {
        let now = now_ms();
        Ok(sqlx::query(
            "SELECT 1 FROM sessions s JOIN users u ON u.id = s.user_id
             WHERE s.secret_sha256 = ?1 AND s.user_id = ?4 AND s.expires_at_ms > ?2
               AND s.last_seen_ms > ?2 - ?3 AND u.disabled = 0",
        )
        .bind(sha256(secret))
        .bind(now)
        .bind(self.limits.idle.as_millis() as i64)
        .bind(user_id)
        .fetch_optional(&self.pool)
        .await?
        .is_some())
    }

    /// Changes each time one of `user`'s credentials may have ended
    /// ([`Accounts::session_live`] and [`Accounts::token_live`] tell which).
    pub fn endings_of(&self, user: i64) -> tokio::sync::watch::Receiver<u64> {
        self.ended.of(user)
    }

    /// Changes each time anyone's credential may have ended.
    pub fn endings(&self) -> tokio::sync::watch::Receiver<u64> {
        self.ended.any.subscribe()
    }

    /// Creates an API token; returns its id and its secret (shown once).
    pub async fn new_token(
        &self,
        user_id: i64,
        name: &str,
        scopes: &[String],
        mcp: McpOptions,
    ) -> Result<(i64, String), AccountError> {
        if name.trim().is_empty() || name.len() > 100 {
            return Err(invalid("name", "1 to 100 characters"));
        }
        if scopes.is_empty() {
            return Err(invalid(
                "scopes",
                format!("name at least one of: {}", SCOPES.join(", ")),
            ));
        }
        if let Some(bad) = scopes.iter().find(|s| !SCOPES.contains(&s.as_str())) {
            return Err(invalid(
                "scopes",
                format!("unknown scope {bad:?} (known: {})", SCOPES.join(", ")),
            ));
        }
        let secret = format!("argos_{}", new_secret());
        let id = sqlx::query(
            "INSERT INTO api_tokens (user_id, name, secret_sha256, scopes, created_at_ms, mcp_read_only, mcp_elicitation)
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(user_id)
        .bind(name)
        .bind(sha256(&secret))
        .bind(serde_json::to_string(scopes).unwrap_or_else(|_| "[]".into()))
        .bind(now_ms())
        .bind(mcp.read_only)
        .bind(mcp.elicitation)
        .execute(&self.pool)
        .await?
        .last_insert_rowid();
        Ok((id, secret))
    }

    pub async fn tokens(&self, user_id: i64) -> Result<Vec<TokenInfo>, AccountError> {
        let rows = sqlx::query(
            "SELECT id, name, scopes, mcp_read_only, mcp_elicitation, created_at_ms, last_used_ms
             FROM api_tokens WHERE user_id = ? AND revoked_at_ms IS NULL ORDER BY id",
        )
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(token_info).collect())
    }

    pub async fn revoke_token(&self, user_id: i64, id: i64) -> Result<bool, AccountError> {
        let revoked = sqlx::query(
            "UPDATE api_tokens SET revoked_at_ms = ? WHERE id = ? AND user_id = ? AND revoked_at_ms IS NULL",
        )
        .bind(now_ms())
        .bind(id)
        .bind(user_id)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1;
        // After the write: a lookup racing the revocation cannot cache what it read. A
        // revocation of nothing changes nothing: it neither empties the cache nor wakes
        // the streams (else any user could make every agent's request miss the cache).
        if revoked {
            self.forget_tokens(user_id);
        }
        Ok(revoked)
    }

    /// Whether a token is still live (not revoked, its user not deleted or disabled).
    pub async fn token_live(&self, id: i64) -> Result<bool, AccountError> {
        Ok(sqlx::query(
            "SELECT 1 FROM api_tokens t JOIN users u ON u.id = t.user_id
             WHERE t.id = ? AND t.revoked_at_ms IS NULL AND u.disabled = 0",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .is_some())
    }

    /// The user of a live token, and the token.
    pub async fn token(&self, secret: &str) -> Result<Option<(User, TokenInfo)>, AccountError> {
        let hash = sha256(secret);
        if let Some((u, t, at)) = self.cached_tokens().get(&hash)
            && at.elapsed() < TOKEN_CACHE_TTL
        {
            return Ok(Some((u.clone(), t.clone())));
        }
        let generation = self
            .token_generation
            .load(std::sync::atomic::Ordering::SeqCst);
        let found = self.token_from_db(secret).await?;
        let mut cache = self.cached_tokens();
        if cache.len() >= 10_000 {
            cache.clear();
        }
        match &found {
            Some((u, t))
                if self
                    .token_generation
                    .load(std::sync::atomic::Ordering::SeqCst)
                    == generation =>
            {
                cache.insert(hash, (u.clone(), t.clone(), std::time::Instant::now()));
            }
            _ => {
                cache.remove(&hash);
            }
        }
        Ok(found)
    }

    /// Forgets every cached token (after a revocation, a password change or a deletion of
    /// `user`'s is written) and wakes that user's streams.
    fn forget_tokens(&self, user: i64) {
        let mut cache = self.cached_tokens();
        self.token_generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        cache.clear();
        drop(cache);
        self.ended.bump(user);
    }

    fn cached_tokens(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<Vec<u8>, (User, TokenInfo, std::time::Instant)>,
    > {
        self.live_tokens.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn token_from_db(&self, secret: &str) -> Result<Option<(User, TokenInfo)>, AccountError> {
        let row = sqlx::query(
            "SELECT u.id, u.name, u.role, u.created_at_ms, t.id AS token_id, t.name AS token_name,
                    t.scopes, t.mcp_read_only, t.mcp_elicitation, t.created_at_ms AS token_created_at_ms,
                    t.last_used_ms
             FROM api_tokens t
             JOIN users u ON u.id = t.user_id
             WHERE t.secret_sha256 = ? AND t.revoked_at_ms IS NULL AND u.disabled = 0",
        )
        .bind(sha256(secret))
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let now = now_ms();
        if row
            .get::<Option<i64>, _>("last_used_ms")
            .is_none_or(|t| now - t > 60_000)
        {
            sqlx::query("UPDATE api_tokens SET last_used_ms = ? WHERE secret_sha256 = ?")
                .bind(now)
                .bind(sha256(secret))
                .execute(&self.pool)
                .await?;
        }
        let token = TokenInfo {
            id: row.get("token_id"),
            name: row.get("token_name"),
            scopes: serde_json::from_str(&row.get::<String, _>("scopes")).unwrap_or_default(),
            mcp_read_only: row.get("mcp_read_only"),
            mcp_elicitation: row.get("mcp_elicitation"),
            created_at_ms: row.get("token_created_at_ms"),
            last_used_ms: row.get("last_used_ms"),
        };
        Ok(user(&row).map(|u| (u, token)))
    }
}

fn token_info(r: &sqlx::sqlite::SqliteRow) -> TokenInfo {
    TokenInfo {
        id: r.get("id"),
        name: r.get("name"),
        scopes: serde_json::from_str(&r.get::<String, _>("scopes")).unwrap_or_default(),
        mcp_read_only: r.get("mcp_read_only"),
        mcp_elicitation: r.get("mcp_elicitation"),
        created_at_ms: r.get("created_at_ms"),
        last_used_ms: r.get("last_used_ms"),
    }
}

fn user(r: &sqlx::sqlite::SqliteRow) -> Option<User> {
    Some(User {
        id: r.get("id"),
        name: r.get("name"),
        role: Role::parse(&r.get::<String, _>("role"))?,
        created_at_ms: r.get("created_at_ms"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change to one user's credentials wakes that user's streams and the sweep of any
    /// user's, never another user's; a watch nobody holds is forgotten.
    #[test]
    fn an_ending_wakes_only_its_users_streams() {
        let e = Endings::default();
        let mut alice = e.of(1);
        let bob = e.of(2);
        let mut any = e.any.subscribe();
        e.bump(1);
        assert!(alice.has_changed().unwrap());
        assert!(!bob.has_changed().unwrap());
        assert!(any.has_changed().unwrap());
        alice.mark_unchanged();
        any.mark_unchanged();
        drop(bob);
        e.bump(3);
        assert!(!alice.has_changed().unwrap());
        assert!(any.has_changed().unwrap());
        assert_eq!(e.users().keys().copied().collect::<Vec<_>>(), vec![1]);
    }
}
