//! Storage: every line of SQL in the crate lives under this module.
//!
//! The rest of the crate sees only [`Store`] and the typed methods of [`Conn`]; business
//! rules never write SQL. Two backends sit behind the same methods, chosen by the target
//! ([`StoreTarget`]): a SQLite file (this module and `orders.rs`, `keys.rs`,
//! `payments.rs`, `delivery.rs`, which hold the SQLite statements and, at the top of
//! each method, the hand-over to the PostgreSQL twin in `postgres/`), and PostgreSQL
//! (`postgres/`, feature `postgres`).
//!
//! SQLite runs in WAL mode: one writer connection (behind a mutex, writes take the lock
//! up front with `BEGIN IMMEDIATE`) and a pool of read-only connections, so reads never
//! queue behind a slow write. Other processes may use the same file; their writes wait on
//! `busy_timeout`, and a busy write is retried rather than reported.

/// The SQLite connection behind `conn`; on PostgreSQL, returns from the calling method
/// with `$call`, its twin in `postgres/` (same name, same arguments).
macro_rules! sqlite_or {
    ($conn:expr, $pg:ident => $call:expr) => {
        match $conn {
            Conn::Sqlite(connection) => *connection,
            #[cfg(feature = "postgres")]
            Conn::Postgres($pg) => return $call,
        }
    };
}

mod delivery;
mod keys;
mod orders;
mod payments;
#[cfg(feature = "postgres")]
mod postgres;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::types::Type;
use rusqlite::{Connection, ErrorCode, OpenFlags, Row, TransactionBehavior};

use crate::error::{Error, ErrorKind, Result, StorageError};

pub(crate) use delivery::{AttemptResult, ClaimedEvent};
pub(crate) use keys::KeyRow;

/// Where the data lives: DESIGN §11 picks the backend from the target string given to
/// [`crate::Service::open`], `--db` or `COINORDER_DB`. Displayed without any password, so
/// messages may show it.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreTarget {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL server (`postgres://` or `postgresql://` URL).
    Postgres(String),
}

impl StoreTarget {
    /// `postgres://...` and `postgresql://...` name a server; anything else is a file path.
    pub fn parse(target: &Path) -> StoreTarget {
        let text = target.to_string_lossy();
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            StoreTarget::Postgres(text.into_owned())
        } else {
            StoreTarget::Sqlite(target.to_path_buf())
        }
    }
}

impl StoreTarget {
    /// True for a database server (a URL), false for a file.
    pub fn is_server(&self) -> bool {
        !matches!(self, StoreTarget::Sqlite(_))
    }
}

impl std::fmt::Display for StoreTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreTarget::Sqlite(path) => write!(f, "{}", path.display()),
            StoreTarget::Postgres(text) => match url::Url::parse(text) {
                Ok(mut url) => {
                    if url.password().is_some() {
                        let _ = url.set_password(Some("***"));
                    }
                    write!(f, "{url}")
                }
                Err(_) => f.write_str("(unparsable PostgreSQL URL)"),
            },
        }
    }
}

/// Debug shows what Display shows: a URL may carry a password.
impl std::fmt::Debug for StoreTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreTarget({self})")
    }
}

/// The database, on either backend.
#[derive(Debug)]
pub(crate) enum Store {
    /// A SQLite file.
    Sqlite(SqliteStore),
    /// A PostgreSQL server.
    #[cfg(feature = "postgres")]
    Postgres(postgres::PgStore),
}

impl Store {
    /// True for a SQLite file: reads never wait on a lock or on the network.
    pub(crate) fn is_local(&self) -> bool {
        matches!(self, Store::Sqlite(_))
    }
}

/// A connection (or an open transaction) with the crate's typed queries on it.
pub(crate) enum Conn<'a> {
    /// A SQLite connection or transaction.
    Sqlite(&'a Connection),
    /// A PostgreSQL transaction.
    #[cfg(feature = "postgres")]
    Postgres(&'a postgres::PgConn),
}

impl Store {
    /// Opens (creating and migrating if needed) the database at `target`.
    pub(crate) fn open(target: &StoreTarget, options: StoreOptions) -> Result<Store> {
        match target {
            StoreTarget::Sqlite(path) => Ok(Store::Sqlite(SqliteStore::open(path, options)?)),
            #[cfg(feature = "postgres")]
            StoreTarget::Postgres(url) => Ok(Store::Postgres(postgres::PgStore::open(url, &options)?)),
            #[cfg(not(feature = "postgres"))]
            StoreTarget::Postgres(_) => Err(Error::new(ErrorKind::Config(
                "this build of coinorder has no PostgreSQL support (cargo feature `postgres`); \
                 use a SQLite file path"
                    .into(),
            ))),
        }
    }

    /// Runs `work` in one write transaction: all of it commits, or none of it. `work` may
    /// run more than once (a busy SQLite file, a PostgreSQL serialization failure), so it
    /// must do nothing but database work: count and report after this returns.
    pub(crate) fn write<T>(&self, work: impl FnMut(&Conn<'_>) -> Result<T>) -> Result<T> {
        match self {
            Store::Sqlite(store) => store.write(work),
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.write(work),
        }
    }

    /// [`Store::write`] for the outbox: claims, lease-guarded finishes and requeues.
    ///
    /// Their safety rests on row locks (`FOR UPDATE SKIP LOCKED`) and lease tokens, not
    /// on serializability, so on PostgreSQL they run `READ COMMITTED`: under
    /// `SERIALIZABLE` a wave's finish, which touches many events while orders keep
    /// writing new ones, was cancelled as a conflict again and again under load, and its
    /// results lost. On SQLite (one writer) it is [`Store::write`].
    pub(crate) fn write_outbox<T>(&self, work: impl FnMut(&Conn<'_>) -> Result<T>) -> Result<T> {
        match self {
            Store::Sqlite(store) => store.write(work),
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.write_with("BEGIN ISOLATION LEVEL READ COMMITTED", work),
        }
    }

    /// Runs `work` in one write transaction if that can start without waiting, else
    /// returns `None`. For bookkeeping that must never make a read wait.
    pub(crate) fn try_write<T>(&self, work: impl FnOnce(&Conn<'_>) -> Result<T>) -> Result<Option<T>> {
        match self {
            Store::Sqlite(store) => store.try_write(work),
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.try_write(work),
        }
    }

    /// Runs `work` on a consistent read-only snapshot.
    pub(crate) fn read<T>(&self, work: impl FnOnce(&Conn<'_>) -> Result<T>) -> Result<T> {
        match self {
            Store::Sqlite(store) => store.read(work),
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.read(work),
        }
    }
}

/// Schema migrations, applied in order; the schema version is the count applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/sqlite/0001_init.sql"),
    include_str!("../../migrations/sqlite/0002_payments.sql"),
    include_str!("../../migrations/sqlite/0003_delivery.sql"),
    include_str!("../../migrations/sqlite/0004_retired_keys.sql"),
    include_str!("../../migrations/sqlite/0005_event_sequence.sql"),
];

/// The schema version this library writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Idle read connections kept for reuse.
const MAX_IDLE_READERS: usize = 16;

/// How many times a write that found the database busy is tried again.
const BUSY_RETRIES: u32 = 20;

/// Options for opening the database.
#[derive(Debug, Clone)]
pub(crate) struct StoreOptions {
    /// SQLite only: `synchronous=FULL` rather than `NORMAL`.
    pub synchronous_full: bool,
    /// How long a write waits for another writer (SQLite's lock; PostgreSQL's lock
    /// timeout and retries).
    pub busy_timeout: Duration,
}

/// A SQLite database: one writer connection and a pool of readers over one file.
#[derive(Debug)]
pub(crate) struct SqliteStore {
    path: PathBuf,
    options: StoreOptions,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database at `path`.
    pub(crate) fn open(path: &Path, options: StoreOptions) -> Result<SqliteStore> {
        // Switching a new file to WAL and the first migration need locks for which SQLite
        // does not always call the busy handler (several processes opening a new file at
        // once); retry the whole opening until `busy_timeout` has passed.
        let started = std::time::Instant::now();
        let writer = loop {
            match open_writer(path, &options) {
                Err(err) if is_busy(&err) && started.elapsed() < options.busy_timeout => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => break other?,
            }
        };
        Ok(SqliteStore {
            path: path.to_path_buf(),
            options,
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
        })
    }

    /// Runs `work` in one write transaction: all of it commits, or none of it.
    ///
    /// The transaction starts `IMMEDIATE` so it never has to upgrade a read lock (which
    /// is what makes SQLite answer BUSY without waiting); if the database is still busy
    /// after `busy_timeout`, the whole transaction is tried again.
    pub(crate) fn write<T>(&self, mut work: impl FnMut(&Conn<'_>) -> Result<T>) -> Result<T> {
        let mut writer = self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Waiting is bounded by busy_timeout in all: a database held locked longer than
        // that (by something abnormal) is reported rather than waited on forever.
        let deadline = std::time::Instant::now() + self.options.busy_timeout;
        let mut attempt = 0;
        loop {
            let outcome = (|| {
                let tx = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let value = work(&Conn::Sqlite(&tx))?;
                tx.commit()?;
                Ok(value)
            })();
            match outcome {
                Err(err) if is_busy(&err) && attempt < BUSY_RETRIES && std::time::Instant::now() < deadline => {
                    attempt += 1;
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    writer.busy_timeout(left.max(Duration::from_millis(1)))?;
                }
                other => {
                    if attempt > 0 {
                        writer.busy_timeout(self.options.busy_timeout)?;
                    }
                    return other;
                }
            }
        }
    }

    /// Runs `work` in one write transaction if the write lock is free right now (in this
    /// process and in the file), else does nothing and returns `None`. For bookkeeping
    /// that must never make a read wait.
    pub(crate) fn try_write<T>(&self, work: impl FnOnce(&Conn<'_>) -> Result<T>) -> Result<Option<T>> {
        let mut writer = match self.writer.try_lock() {
            Ok(writer) => writer,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(None),
        };
        writer.busy_timeout(Duration::ZERO)?;
        let outcome = (|| {
            let tx = writer.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = work(&Conn::Sqlite(&tx))?;
            tx.commit()?;
            Ok(value)
        })();
        writer.busy_timeout(self.options.busy_timeout)?;
        match outcome {
            Err(err) if is_busy(&err) => Ok(None),
            other => other.map(Some),
        }
    }

    /// Runs `work` on a read-only connection from the pool (a consistent snapshot).
    pub(crate) fn read<T>(&self, work: impl FnOnce(&Conn<'_>) -> Result<T>) -> Result<T> {
        let pooled = self.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => self.open_reader()?,
        };
        let result = work(&Conn::Sqlite(&conn));
        let mut readers = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        if readers.len() < MAX_IDLE_READERS {
            readers.push(conn);
        }
        result
    }

    fn open_reader(&self) -> Result<Connection> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(&self.path, flags)?;
        configure(&conn, &self.options)?;
        conn.pragma_update(None, "query_only", true)?;
        Ok(conn)
    }
}

fn open_writer(path: &Path, options: &StoreOptions) -> Result<Connection> {
    create_private(path);
    let mut writer = Connection::open(path)?;
    configure(&writer, options)?;
    let _mode: String = writer.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    migrate(&mut writer)?;
    Ok(writer)
}

/// Creates a missing database file readable by its owner only (SQLite gives its -wal and
/// -shm files the same mode): it holds merchants' orders and customers' e-mail addresses.
fn create_private(path: &Path) {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    // An existing file keeps its mode; a path that cannot be created (a missing
    // directory, ...) is reported by SQLite when it opens it.
    let _ = options.open(path);
}

fn configure(conn: &Connection, options: &StoreOptions) -> Result<()> {
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    let sync = if options.synchronous_full { "FULL" } else { "NORMAL" };
    conn.pragma_update(None, "synchronous", sync)?;
    // Keep one plan per cached statement: without this, SQLite re-prepares a statement
    // whenever a bound value might change its plan, which made point reads parse SQL on
    // every call.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

fn is_busy(err: &Error) -> bool {
    matches!(err.kind(), ErrorKind::Storage(e) if e.is_busy())
}

/// How much of an unreadable stored value an error message quotes: enough to recognise
/// it, not so much that a stray blob floods the log.
const QUOTED_VALUE_CHARS: usize = 64;

/// A stored value that is not one this library knows; carried through rusqlite's row
/// mappers (which can only return `rusqlite::Error`) and turned into
/// [`ErrorKind::Corrupt`] by the `From` conversion below.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct UnknownValue(String);

/// Reads the text column `column` and decodes it with `parse`; a value `parse` refuses
/// is an [`ErrorKind::Corrupt`] error naming `what` (`table.column`), never a default.
///
/// One path for every decoder of stored enums and amounts, so that no backend (and no
/// new column) can quietly read an unknown value as some other one.
fn decode<T>(row: &Row<'_>, column: usize, what: &str, parse: impl FnOnce(&str) -> Option<T>) -> rusqlite::Result<T> {
    let text: String = row.get(column)?;
    parse(&text).ok_or_else(|| {
        let quoted: String = text.chars().take(QUOTED_VALUE_CHARS).collect();
        let message = format!("{what}: unknown value {quoted:?}");
        rusqlite::Error::FromSqlConversionFailure(column, Type::Text, Box::new(UnknownValue(message)))
    })
}

/// SQLite's errors become the backend-neutral [`StorageError`], so `rusqlite` stays out
/// of the public error type. (An implementation detail of the storage module: hidden.)
#[doc(hidden)]
impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        if let rusqlite::Error::FromSqlConversionFailure(_, _, source) = &err {
            if let Some(UnknownValue(message)) = source.downcast_ref::<UnknownValue>() {
                return Error::new(ErrorKind::Corrupt(message.clone()));
            }
        }
        let busy = matches!(
            &err,
            rusqlite::Error::SqliteFailure(e, _) if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        );
        Error::new(ErrorKind::Storage(StorageError::new(busy, err)))
    }
}

/// Brings the schema up to [`SCHEMA_VERSION`], one migration per transaction, and
/// refuses a database written by a newer library.
fn migrate(conn: &mut Connection) -> Result<()> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(Error::new(ErrorKind::SchemaTooNew { found: version, supported: SCHEMA_VERSION }));
        }
        if version == SCHEMA_VERSION {
            return Ok(());
        }
        // A negative version was never written by coinorder: refuse it rather than
        // replaying the first migration over whatever the file holds.
        let sql = usize::try_from(version)
            .ok()
            .and_then(|index| MIGRATIONS.get(index))
            .ok_or_else(|| Error::new(ErrorKind::Corrupt(format!("user_version: unknown value {version}"))))?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
}

#[cfg(test)]
impl Conn<'_> {
    /// The SQLite connection, for tests that write raw SQL.
    pub(crate) fn sqlite_for_test(&self) -> &Connection {
        match self {
            Conn::Sqlite(connection) => connection,
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => panic!("a SQLite test got a PostgreSQL connection"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> StoreOptions {
        StoreOptions { synchronous_full: true, busy_timeout: Duration::from_secs(5) }
    }

    #[test]
    fn new_database_gets_current_schema_and_newer_is_refused() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let path = dir.path().join("t.db");
        let store = SqliteStore::open(&path, options())?;
        let version = store
            .read(|c| Ok(c.sqlite_for_test().pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))?))?;
        assert_eq!(version, SCHEMA_VERSION);
        drop(store);
        let conn = Connection::open(&path)?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)?;
        drop(conn);
        let err = SqliteStore::open(&path, options()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("newer than this library"), "{err}");
        Ok(())
    }

    #[test]
    fn a_version_1_database_is_migrated_with_its_data() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let path = dir.path().join("old.db");
        let conn = Connection::open(&path)?;
        conn.execute_batch(MIGRATIONS[0])?;
        conn.pragma_update(None, "user_version", 1)?;
        conn.execute_batch(
            "INSERT INTO orders (order_id, environment, user_id, key_id, merchant_order_id, amount, currency,
                                 status, request_hash, create_response, created_at, updated_at)
             VALUES ('00000000-0000-4000-8000-000000000001', 'sandbox', 7, 'key_x', 'old-1', '19.99', 'USD',
                     'NEW', x'00', '{}', 1000, 1000);
             INSERT INTO invoices (invoice_id, order_id, amount, currency, rate, status, created_at, expired_at,
                                   updated_at)
             VALUES ('inv-1', '00000000-0000-4000-8000-000000000001', '19.99', 'USDT', '1', 'NEW', 1000, 2000, 1000);",
        )?;
        drop(conn);
        let store = SqliteStore::open(&path, options())?;
        let order = store
            .read(|c| c.order_in_environment(crate::Environment::Sandbox, "00000000-0000-4000-8000-000000000001"))?;
        let order = order.ok_or_else(|| Error::new(ErrorKind::OrderNotFound))?;
        assert_eq!(order.order.amount.to_string(), "19.99");
        assert_eq!(order.invoice.address, "");
        assert!(!order.order.marked_paid);
        let version = store
            .read(|c| Ok(c.sqlite_for_test().pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))?))?;
        assert_eq!(version, SCHEMA_VERSION);
        let events = store.read(|c| c.events_for_order("00000000-0000-4000-8000-000000000001"))?;
        assert!(events.is_empty());
        Ok(())
    }

    #[test]
    fn a_negative_schema_version_is_corrupt() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let path = dir.path().join("t.db");
        Connection::open(&path)?.pragma_update(None, "user_version", -1)?;
        let err = SqliteStore::open(&path, options()).err().map(|e| e.kind().to_string()).unwrap_or_default();
        assert_eq!(err, "stored data could not be read: user_version: unknown value -1");
        Ok(())
    }

    #[test]
    fn reads_cannot_write() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let store = SqliteStore::open(&dir.path().join("t.db"), options())?;
        let result = store.read(|c| Ok(c.sqlite_for_test().execute("DELETE FROM orders", [])?));
        assert!(result.is_err());
        Ok(())
    }
}
