//! Each daemon's own SQLite database (WAL, embedded migrations) in its private state dir,
//! and the audit trail kept in it ([`audit`]). No daemon opens another's: data crosses
//! boundaries only through gRPC.
#![forbid(unsafe_code)]

pub mod audit;
pub mod key;

/// The clock every record is stamped with: milliseconds since the Unix epoch (0 for a
/// clock before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

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
    #[error(
        "{path} holds nothing of what {daemon} recorded, though {daemon} made it before ({path}.kept says so): the database was replaced, or lost its write-ahead log. Refusing to start over it as if it were new (the gateway would offer a new first-admin link); restore the database, or move {daemon}'s state dir aside to start anew"
    )]
    Lost { path: String, daemon: String },
    #[error(
        "{path} is damaged ({detail}): refusing to serve from it, which would fail or answer wrong once the damaged part is read. Restore it from a copy, or move {daemon}'s state dir aside to start anew"
    )]
    Damaged {
        path: String,
        daemon: String,
        detail: String,
    },
    #[error(
        "{path} cannot be written ({why}): refusing to start a daemon whose every change would fail. Make the file (and its directory) writable by {daemon}'s user again"
    )]
    Unwritable {
        path: String,
        daemon: String,
        why: String,
    },
    #[error(
        "{path} holds no {what}, though {daemon} recorded some before ({mark} says so): the database lost rows (its write-ahead log lost or damaged before a checkpoint). Refusing to start over it as if none were ever made; restore the database, or move {daemon}'s state dir aside to start anew"
    )]
    Forgot {
        path: String,
        daemon: String,
        what: String,
        mark: String,
    },
    #[error("{path}: {}", Fault::Full.say(daemon))]
    Full { path: String, daemon: String },
}

impl StoreError {
    /// Whether a restart would meet the same refusal (the database is lost, damaged or
    /// read-only): a service manager should not start the daemon again until someone acts.
    /// A full disk is not lasting: space may come back.
    pub fn lasting(&self) -> bool {
        matches!(
            self,
            StoreError::Lost { .. }
                | StoreError::Forgot { .. }
                | StoreError::Damaged { .. }
                | StoreError::Unwritable { .. }
        )
    }
}

/// A storage fault worth naming to whoever asked: what the disk or the file did, not what
/// the daemon got wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No room left (ENOSPC, or the file's size limit).
    Full,
    /// The database cannot be written (a read-only file or file system).
    ReadOnly,
    /// The disk failed a read or a write.
    Io,
}

/// The disk's fault last met by this process's database, until a write passes again
/// ([`degraded`]). A daemon has one database.
static MET: std::sync::Mutex<Option<Fault>> = std::sync::Mutex::new(None);

fn met() -> std::sync::MutexGuard<'static, Option<Fault>> {
    MET.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What keeps the daemon from recording now, in words, if anything: once a write met one
/// of the disk's faults ([`Fault::of`]), a write of the header is tried at each call until
/// one passes (space came back). For [`argos_common`'s `Context::watch`], as `storage`.
pub async fn degraded(pool: SqlitePool, daemon: &'static str) -> Option<String> {
    let seen = (*met())?;
    let probe = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "BEGIN IMMEDIATE; PRAGMA application_id = {APPLICATION_ID}; COMMIT;"
    )))
    .execute(&pool)
    .await;
    match probe {
        Ok(_) => {
            *met() = None;
            None
        }
        Err(e) => Some(Fault::of(&e).unwrap_or(seen).say(daemon)),
    }
}

impl Fault {
    /// The fault an error shows, if it is one of the disk's: SQLite's primary result
    /// code (`SQLITE_FULL` 13, `SQLITE_READONLY` 8, `SQLITE_IOERR` 10), or an I/O
    /// error's. One found is remembered as met ([`degraded`]).
    pub fn of(e: &sqlx::Error) -> Option<Fault> {
        let fault = Fault::shown_by(e);
        if let Some(f) = fault {
            *met() = Some(f);
        }
        fault
    }

    fn shown_by(e: &sqlx::Error) -> Option<Fault> {
        match e {
            sqlx::Error::Database(d) => {
                let code: i64 = d.code()?.parse().ok()?;
                match code & 0xff {
                    13 => Some(Fault::Full),
                    8 => Some(Fault::ReadOnly),
                    10 => Some(Fault::Io),
                    _ => None,
                }
            }
            sqlx::Error::Io(io) => Fault::of_io(io),
            _ => None,
        }
    }

    /// The fault an I/O error shows, if it is one of the disk's.
    pub fn of_io(e: &std::io::Error) -> Option<Fault> {
        match e.raw_os_error() {
            Some(nix::libc::ENOSPC | nix::libc::EDQUOT | nix::libc::EFBIG) => Some(Fault::Full),
            Some(nix::libc::EROFS) => Some(Fault::ReadOnly),
            Some(nix::libc::EIO) => Some(Fault::Io),
            _ => None,
        }
    }

    /// What happened, for `daemon`'s state, in words a caller can act on.
    /// Whether `message` holds how [`Fault::say`] says a fault of `daemon`'s disk (as
    /// another daemon's answer carries it).
    pub fn said(message: &str, daemon: &str) -> bool {
        [Fault::Full, Fault::ReadOnly, Fault::Io]
            .into_iter()
            .any(|f| message.contains(&f.say(daemon)))
    }

    pub fn say(self, daemon: &str) -> String {
        match self {
            Fault::Full => format!(
                "the disk holding {daemon}'s state is full: nothing can be recorded, so nothing that needs a record is done until there is room"
            ),
            Fault::ReadOnly => format!(
                "{daemon}'s database cannot be written (a read-only file or file system): nothing that needs a record is done"
            ),
            Fault::Io => format!(
                "the disk holding {daemon}'s state failed a read or a write: nothing that needs a record is done"
            ),
        }
    }
}

/// The marker beside a database saying its daemon made it, schema and all, in the file.
fn marker(path: &Path) -> std::path::PathBuf {
    let mut m = path.as_os_str().to_owned();
    m.push(".kept");
    m.into()
}

/// Checks `path` before its daemon opens it, and refuses a database it must not serve
/// from: one that lost everything ([`check_kept`]), one damaged (`PRAGMA quick_check`
/// reads every page of every table and index), and one that cannot be written (its mode,
/// or a write that fails: an immutable file, a read-only file system) — each named with
/// its cause. A full disk is said as such. A database not made yet passes.
pub async fn check(path: &Path, daemon: &str) -> Result<(), StoreError> {
    use sqlx::ConnectOptions as _;
    check_kept(path, daemon).await?;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let shown = path.display().to_string();
    let unwritable = |why: String| StoreError::Unwritable {
        path: shown.clone(),
        daemon: daemon.to_string(),
        why,
    };
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o200 == 0 {
        // Never made writable again behind whoever made it read-only.
        return Err(unwritable(format!("its mode is {mode:04o}")));
    }
    let damaged = |e: sqlx::Error| StoreError::Damaged {
        path: shown.clone(),
        daemon: daemon.to_string(),
        detail: e.to_string(),
    };
    let mut c = SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(std::time::Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| match Fault::of(&e) {
            Some(Fault::ReadOnly) => unwritable(e.to_string()),
            _ => damaged(e),
        })?;
    let checked: sqlx::Result<Vec<String>> = sqlx::query_scalar("PRAGMA quick_check")
        .fetch_all(&mut c)
        .await;
    let found = match checked {
        Ok(rows) if rows.iter().all(|r| r == "ok") => None,
        Ok(rows) => Some(StoreError::Damaged {
            path: shown.clone(),
            daemon: daemon.to_string(),
            detail: rows.join("; "),
        }),
        Err(e) => Some(damaged(e)),
    };
    // A write of the header, in a transaction of its own: what every change will need.
    let probe = match found {
        Some(e) => Err(e),
        None => sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "BEGIN IMMEDIATE; PRAGMA application_id = {APPLICATION_ID}; COMMIT;"
        )))
        .execute(&mut c)
        .await
        .map(drop)
        .map_err(|e| match Fault::of(&e) {
            Some(Fault::Full) => StoreError::Full {
                path: shown.clone(),
                daemon: daemon.to_string(),
            },
            _ => unwritable(e.to_string()),
        }),
    };
    let _ = sqlx::Connection::close(c).await;
    probe
}

/// A durable mark beside a database at `path` that it holds some `what` (the gateway's
/// accounts): `<db>.<what>`, made (and synced, with its directory) once the first is
/// committed, kept for good. [`check_mark`] then refuses the database if it holds none.
pub fn mark(path: &Path, what: &str) -> std::io::Result<()> {
    let m = mark_path(path, what);
    if m.exists() {
        return Ok(());
    }
    std::fs::File::create(&m)?.sync_all()?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

fn mark_path(path: &Path, what: &str) -> std::path::PathBuf {
    let mut m = path.as_os_str().to_owned();
    m.push(format!(".{what}"));
    m.into()
}

/// Refuses a database that holds no `what` though `mark` says it held some; marks one
/// that holds some and is not marked yet (made before the mark was).
pub fn check_mark(path: &Path, daemon: &str, what: &str, holds: bool) -> Result<(), StoreError> {
    let m = mark_path(path, what);
    match (holds, m.exists()) {
        (false, true) => Err(StoreError::Forgot {
            path: path.display().to_string(),
            daemon: daemon.to_string(),
            what: what.to_string(),
            mark: m.display().to_string(),
        }),
        (true, false) => mark(path, what).map_err(|e| StoreError::Open {
            path: m.display().to_string(),
            source: e.into(),
        }),
        _ => Ok(()),
    }
}

/// Every Argos database says so in its header (`PRAGMA application_id`, "Args").
const APPLICATION_ID: i32 = 0x4172_6773;

/// Refuses a database that lost everything though its daemon made it here before (its
/// marker, written once the schema was in the file itself, is there): a missing file, or
/// one holding no schema (replaced, or its `-wal` deleted before a checkpoint). Checked
/// before the daemon opens it, which would make it anew — for the gateway, offering a
/// new first-admin link.
async fn check_kept(path: &Path, daemon: &str) -> Result<(), StoreError> {
    use sqlx::ConnectOptions as _;
    let shown = path.display().to_string();
    let lost = || StoreError::Lost {
        path: shown.clone(),
        daemon: daemon.to_string(),
    };
    if !marker(path).exists() {
        return Ok(());
    }
    if !path.exists() {
        return Err(lost());
    }
    let open = |source| StoreError::Open {
        path: shown.clone(),
        source,
    };
    let mut c = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .connect()
        .await
        .map_err(open)?;
    let schema: Option<i64> = sqlx::query_scalar(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_optional(&mut c)
    .await
    .map_err(open)?;
    let _ = sqlx::Connection::close(c).await;
    schema.map(drop).ok_or_else(lost)
}

/// How durable a commit is when it returns: each daemon chooses for its database, and
/// says why where it opens it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// On the disk (`synchronous = FULL`: the write-ahead log is synced at every commit):
    /// for records something is done on the strength of — a launch's intent before it
    /// runs, an approval, an account — which a power cut must not take back.
    Commit,
    /// Safe from the daemon's crash, not from a power cut until the next checkpoint
    /// (`synchronous = NORMAL`; the file stays consistent): for state that can be made
    /// again.
    Checkpoint,
}

/// Opens (creating if needed) `path` in WAL mode with `durability` and applies
/// `migrator`. The file is made 0600: only the daemon reads it.
pub async fn open(
    path: &Path,
    migrator: &sqlx::migrate::Migrator,
    durability: Durability,
) -> Result<SqlitePool, StoreError> {
    open_with(path, migrator, 4, durability).await
}

async fn open_with(
    path: &Path,
    migrator: &sqlx::migrate::Migrator,
    connections: u32,
    durability: Durability,
) -> Result<SqlitePool, StoreError> {
    let shown = path.display().to_string();
    let opts = SqliteConnectOptions::from_str(&format!("sqlite://{shown}"))
        .map_err(|source| StoreError::Open {
            path: shown.clone(),
            source,
        })?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(match durability {
            Durability::Commit => SqliteSynchronous::Full,
            Durability::Checkpoint => SqliteSynchronous::Normal,
        })
        .foreign_keys(true)
        .busy_timeout(std::time::Duration::from_secs(5))
        // 512 KiB of page cache per connection, not SQLite's 2 MB: a walk of a whole
        // table (`audit verify`) would otherwise leave each pooled connection holding
        // 2 MB for good. Little is lost: in WAL mode a connection drops its cache whenever
        // another wrote, and the kernel's page cache stands behind it.
        .pragma("cache_size", "-512");
    let pool = SqlitePoolOptions::new()
        .max_connections(connections)
        // A write that fails for want of space (SQLITE_FULL) or an I/O error rolls its
        // transaction back inside SQLite, so the ROLLBACK that follows fails and sqlx goes
        // on believing the connection is in a transaction: its next "transaction" would
        // be a SAVEPOINT, whose RELEASE commits nothing while an outer one stays open —
        // rows reported committed that never reach the file, and, once a ROLLBACK TO
        // leaves that outer transaction open, the write lock held for good. A
        // connection that comes back in a transaction is closed (SQLite rolls back
        // whatever it still held) and a fresh one is opened in its place.
        .before_acquire(|conn, _| {
            Box::pin(async move {
                use sqlx::Connection as _;
                let clean = !conn.is_in_transaction();
                if !clean {
                    tracing::warn!(
                        "a database connection came back still in a transaction (a write failed): it is closed"
                    );
                }
                Ok(clean)
            })
        })
        .connect_with(opts)
        .await
        .map_err(|source| StoreError::Open {
            path: shown.clone(),
            source,
        })?;
    // Only the daemon reads it: group and others lose any access (never is a write bit
    // given back: a read-only file was refused by [`check`]).
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700));
        }
    }
    migrator
        .run(&pool)
        .await
        .map_err(|source| StoreError::Migrate {
            path: shown.clone(),
            source,
        })?;
    // Once its schema is in the file itself, the database is marked as made: from then
    // on, one that holds nothing is refused ([`check_kept`]). A start that dies before
    // this leaves no mark, and the next one starts anew.
    let mark = marker(path);
    if !mark.exists() {
        let made = async {
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(&pool)
                .await?;
            let f = std::fs::File::create(&mark)?;
            f.sync_all()?;
            if let Some(dir) = path.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok::<_, sqlx::Error>(())
        };
        made.await.map_err(|source| StoreError::Open {
            path: shown,
            source,
        })?;
    }
    Ok(pool)
}

/// A daemon's last step at a stop: every committed row moved from the write-ahead log
/// into the database file (`wal_checkpoint(TRUNCATE)`, which leaves the `-wal` empty),
/// then every connection closed. Stopped, the `.db` alone holds all the daemon knew: a
/// copy of it, or a `-wal` lost or damaged while stopped, loses nothing.
pub async fn close(pool: &SqlitePool) -> sqlx::Result<()> {
    let checkpoint: sqlx::Result<(i64, i64, i64)> =
        sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
            .fetch_one(pool)
            .await;
    // Closed whatever the checkpoint did: what it could not move stays in the log.
    pool.close().await;
    let (busy, _, _) = checkpoint?;
    if busy != 0 {
        // Nothing is lost: what the checkpoint could not move stays in the WAL, and the
        // next start reads it from there.
        tracing::warn!(
            "the checkpoint at the stop could not finish (a connection was still at work): some rows stay in the write-ahead log"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sqlx::Connection as _;

    static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate::Migrator::DEFAULT;

    /// A write refused for want of space (`SQLITE_FULL`, here from `max_page_count`, as a
    /// full disk gives it) is rolled back by SQLite itself, and sqlx's ROLLBACK after it
    /// fails: the connection went back to the pool believed still in a transaction. Its
    /// next transactions were savepoints: one left without a commit kept SQLite's
    /// transaction open (ROLLBACK TO does not end it), and the next "committed" rows
    /// inside it that never reached the file, holding the write lock for good — the
    /// review's wedged daemon and its launches run with no record.
    #[tokio::test]
    async fn a_write_refused_for_want_of_space_leaves_no_transaction_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.db");
        // One connection: every transaction below gets the one the failure touched.
        let pool = super::open_with(&path, &MIGRATOR, 1, super::Durability::Commit)
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (v TEXT)")
            .execute(&pool)
            .await
            .unwrap();
        {
            let mut c = pool.acquire().await.unwrap();
            let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
                .fetch_one(&mut *c)
                .await
                .unwrap();
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "PRAGMA max_page_count = {}",
                pages + 1
            )))
            .execute(&mut *c)
            .await
            .unwrap();
            let mut tx = c.begin().await.unwrap();
            let mut full = None;
            for _ in 0..100 {
                if let Err(e) = sqlx::query("INSERT INTO t VALUES (?)")
                    .bind("x".repeat(1000))
                    .execute(&mut *tx)
                    .await
                {
                    full = Some(e);
                    break;
                }
            }
            let full = full.expect("the page limit refuses a write");
            assert!(full.to_string().contains("full"), "{full}");
            drop(tx);
            sqlx::query("PRAGMA max_page_count = 1000000")
                .execute(&mut *c)
                .await
                .unwrap();
        }
        // A transaction left without a commit (a refusal found inside it), then one that
        // commits a row.
        {
            let mut t = pool.begin().await.unwrap();
            sqlx::query("SELECT COUNT(*) FROM t")
                .execute(&mut *t)
                .await
                .unwrap();
        }
        let mut t = pool.begin().await.unwrap();
        sqlx::query("INSERT INTO t VALUES ('recorded')")
            .execute(&mut *t)
            .await
            .unwrap();
        t.commit().await.unwrap();
        // Another connection sees the row, and the write lock is free.
        let mut other =
            sqlx::sqlite::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
                .await
                .unwrap();
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t WHERE v = 'recorded'")
            .fetch_one(&mut other)
            .await
            .unwrap();
        assert_eq!(n, 1, "a committed row is in the file");
        sqlx::query("PRAGMA busy_timeout = 100")
            .execute(&mut other)
            .await
            .unwrap();
        sqlx::raw_sql("BEGIN IMMEDIATE; ROLLBACK;")
            .execute(&mut other)
            .await
            .expect("no connection of the pool holds the write lock");
    }
    /// A database its daemon made before (marked) that holds nothing is refused: gone,
    /// or with no schema.
    #[tokio::test]
    async fn a_database_that_lost_everything_is_refused_when_its_daemon_ran_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.db");
        // A first start: nothing to lose yet (a start that died before the mark, too).
        super::check_kept(&path, "execd").await.unwrap();
        let pool = super::open(&path, &MIGRATOR, super::Durability::Commit)
            .await
            .unwrap();
        assert!(super::marker(&path).exists());
        super::close(&pool).await.unwrap();
        super::check_kept(&path, "execd").await.unwrap();
        // Gone.
        std::fs::remove_file(&path).unwrap();
        let e = super::check_kept(&path, "execd").await.unwrap_err();
        assert!(
            e.to_string()
                .contains("holds nothing of what execd recorded"),
            "{e}"
        );
        // A file with no schema (replaced, or its log lost before a checkpoint).
        std::fs::write(&path, b"").unwrap();
        let e = super::check_kept(&path, "gateway").await.unwrap_err();
        assert!(e.to_string().contains("first-admin link"), "{e}");
    }

    /// A database damaged, read-only or immutable is refused by `check`, naming the file
    /// and the cause; a sound one, or none yet, passes.
    #[tokio::test]
    async fn a_damaged_or_unwritable_database_is_refused_with_its_cause() {
        use std::io::{Seek as _, SeekFrom, Write as _};
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.db");
        super::check(&path, "jobd").await.unwrap();
        let made = async |path: &std::path::Path| {
            let pool = super::open(path, &MIGRATOR, super::Durability::Checkpoint)
                .await
                .unwrap();
            sqlx::query("CREATE TABLE t (v TEXT)")
                .execute(&pool)
                .await
                .unwrap();
            for i in 0..500 {
                sqlx::query("INSERT INTO t VALUES (?)")
                    .bind(format!("row {i} {}", "x".repeat(100)))
                    .execute(&pool)
                    .await
                    .unwrap();
            }
            super::close(&pool).await.unwrap();
        };
        made(&path).await;
        super::check(&path, "jobd").await.unwrap();
        let app: i32 = {
            let pool = super::open(&path, &MIGRATOR, super::Durability::Commit)
                .await
                .unwrap();
            let id = sqlx::query_scalar("PRAGMA application_id")
                .fetch_one(&pool)
                .await
                .unwrap();
            super::close(&pool).await.unwrap();
            id
        };
        assert_eq!(app, super::APPLICATION_ID, "the header says Argos");
        // Read-only by its mode: refused, and left as it was.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        let e = super::check(&path, "jobd").await.unwrap_err();
        assert!(e.lasting());
        assert!(
            e.to_string()
                .contains("d.db cannot be written (its mode is 0400)"),
            "{e}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o400);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        // Immutable (root only): the write probe fails.
        if nix::unistd::geteuid().is_root() {
            let chattr = |flag: &str| {
                let ok = std::process::Command::new("chattr")
                    .arg(flag)
                    .arg(&path)
                    .status()
                    .unwrap();
                assert!(ok.success(), "chattr {flag}");
            };
            chattr("+i");
            let e = super::check(&path, "jobd").await.unwrap_err();
            chattr("-i");
            assert!(e.lasting());
            assert!(e.to_string().contains("d.db cannot be written ("), "{e}");
        }
        // A damaged page (a table's, in the middle of the file).
        {
            let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            f.seek(SeekFrom::Start(4096 * 3)).unwrap();
            f.write_all(&[0xa5; 4096]).unwrap();
        }
        let e = super::check(&path, "jobd").await.unwrap_err();
        assert!(e.lasting());
        assert!(e.to_string().contains("d.db is damaged ("), "{e}");
    }

    /// After `close`, the database file alone holds every row: the `-wal` is empty or gone.
    #[tokio::test]
    async fn a_closed_database_holds_everything_in_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.db");
        let pool = super::open(&path, &MIGRATOR, super::Durability::Commit)
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (v TEXT)")
            .execute(&pool)
            .await
            .unwrap();
        for i in 0..200 {
            sqlx::query("INSERT INTO t VALUES (?)")
                .bind(format!("row {i}"))
                .execute(&pool)
                .await
                .unwrap();
        }
        let wal = dir.path().join("d.db-wal");
        assert!(
            std::fs::metadata(&wal).unwrap().len() > 0,
            "rows are in the WAL first"
        );
        super::close(&pool).await.unwrap();
        assert!(pool.is_closed());
        assert_eq!(std::fs::metadata(&wal).map_or(0, |m| m.len()), 0);
        // The WAL lost while stopped loses nothing.
        let _ = std::fs::remove_file(&wal);
        let pool = super::open(&path, &MIGRATOR, super::Durability::Commit)
            .await
            .unwrap();
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(n, 200);
    }
}
