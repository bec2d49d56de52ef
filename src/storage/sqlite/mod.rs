//! The SQLite backend: a database file, and the typed methods of [`super::Conn`] on it
//! (`orders.rs`, `keys.rs`, `payments.rs`, `delivery.rs`, beside the PostgreSQL ones in
//! `postgres/`).
//!
//! SQLite runs in WAL mode: one writer connection (writes take the lock up front with
//! `BEGIN IMMEDIATE`; writes that queue for it share one commit, `group.rs`) and a pool
//! of read-only connections, so reads never queue behind a slow write. Other processes
//! may use the same file; their writes wait on `busy_timeout`, and a busy write is
//! retried rather than reported.

mod background;
mod delivery;
mod group;
mod keys;
mod orders;
mod payments;
mod wallets;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, Params, Row, TransactionBehavior};

pub(crate) use background::{LogBell, OpenSqlite};

use super::rows::RowValues;
use super::{Conn, DbResult, StoreOptions};
use crate::error::{Error, ErrorKind, Result, StorageError};

/// Schema migrations, applied in order; the schema version is the count applied.
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("../../../migrations/sqlite/0001_init.sql"),
    include_str!("../../../migrations/sqlite/0002_payments.sql"),
    include_str!("../../../migrations/sqlite/0003_delivery.sql"),
    include_str!("../../../migrations/sqlite/0004_retired_keys.sql"),
    include_str!("../../../migrations/sqlite/0005_event_sequence.sql"),
    include_str!("../../../migrations/sqlite/0006_lean_indexes.sql"),
    include_str!("../../../migrations/sqlite/0007_key_display_name.sql"),
    include_str!("../../../migrations/sqlite/0008_wallets.sql"),
    include_str!("../../../migrations/sqlite/0009_append_list_indexes.sql"),
    include_str!("../../../migrations/sqlite/0010_invoice_in_order_row.sql"),
    include_str!("../../../migrations/sqlite/0011_previous_webhook_secret.sql"),
    include_str!("../../../migrations/sqlite/0012_payment_vanished.sql"),
];

/// The schema version this library writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Idle read connections kept for reuse.
const MAX_IDLE_READERS: usize = 16;

/// How many times a write that found the database busy is tried again.
const BUSY_RETRIES: u32 = 20;

/// The write-ahead log's size, in pages, beyond which a committing write copies it back
/// into the database file itself (SQLite's automatic checkpoint), once background
/// checkpoints run ([`SqliteStore::checkpoint`] keeps the log far below this, so requests
/// never pay for a checkpoint; this is the cap for when it falls behind). 16,384 pages:
/// 32 MiB of a new file's 2 KiB pages ([`NEW_FILE_PAGE_BYTES`]), 64 MiB of 4 KiB ones.
const WAL_CAP_PAGES: i64 = 16_384;

/// The same while nothing runs background checkpoints: SQLite's default, so that
/// commits keep the log small. A large log slows every read (a reader looks each page up
/// in the log's index first): point reads measured 15–30 % slower with a 60 MiB log.
const WAL_INLINE_PAGES: i64 = 1_000;

/// The log's size, in pages, from which a background checkpoint makes sure the next
/// write starts it over (see [`SqliteStore::checkpoint`]), and a commit rings for one
/// ([`LogBell`]): 8 MiB of 2 KiB pages.
///
/// Starting over holds writes up for a moment (the last pages are copied, and the file
/// synced, between two write transactions), so not too often: at 1,024 pages, NORMAL
/// creates waited for it once every 110 or so, and 100,000 creates took 4.3–4.4 s
/// against 3.6–3.9 s at 4,096 pages (`examples/profile_calls create`, background
/// checkpoints on, alternating runs). And not too late: this many frames fit in the
/// first of the log index's hash tables (4,096 frames each, 34 fewer in the first), so
/// a reader looks each page up in one or two of them.
const RESTART_PAGES: i64 = 4_000;

/// New log pages a checkpoint pass may leave behind for the last, write-blocking one to
/// copy (a few milliseconds of disk writes).
const CATCH_UP_PAGES: i64 = 256;

/// Most passive passes of one checkpoint chasing the writes before the last one.
const CATCH_UP_PASSES: usize = 4;

/// How long the last checkpoint waits for readers to leave the log.
const RESTART_WAIT: Duration = Duration::from_millis(10);

/// A SQLite database: one writer connection, a pool of readers and a connection for
/// background checkpoints, over one file.
#[derive(Debug)]
pub(crate) struct SqliteStore {
    path: PathBuf,
    options: StoreOptions,
    writer: group::GroupWriter,
    readers: Mutex<Vec<Reader>>,
    checkpointer: Mutex<Option<Connection>>,
    /// Set once checkpoints were handed over ([`SqliteStore::hand_checkpoints_over`]):
    /// the writer's commits then checkpoint only past [`WAL_CAP_PAGES`], not past
    /// [`WAL_INLINE_PAGES`].
    checkpoints_in_background: std::sync::atomic::AtomicBool,
    /// Rung by commits, once checkpoints were handed over, when the log is long enough
    /// to start over: wakes the checkpoint thread, if there is one.
    log_bell: Arc<LogBell>,
}

/// A pooled read-only connection, with the key credentials it looked up.
#[derive(Debug)]
struct Reader {
    conn: Connection,
    keys: std::cell::RefCell<keys::KeyCache>,
}

/// What one run of [`SqliteStore::checkpoint_run`] did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckpointRun {
    /// The pages it copied.
    pub(crate) done: Checkpoint,
    /// A reader (or another process) kept the log from starting over.
    pub(crate) held_off: bool,
}

/// What one background checkpoint did (`PRAGMA wal_checkpoint(PASSIVE)`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Pages in the write-ahead log.
    pub log_pages: i64,
    /// Of those, pages now copied into the database file.
    pub checkpointed_pages: i64,
}

/// A connection or open transaction; the typed methods of `sqlite/*.rs` run their
/// statements on it, as `postgres/*.rs` do on a `PgConn`.
///
/// The second field, on a pooled reader, is the reader's key cache
/// ([`keys::KeyCache`]); writes and other connections have none.
#[derive(Clone, Copy)]
pub(crate) struct SqliteConn<'a>(&'a Connection, Option<&'a std::cell::RefCell<keys::KeyCache>>);

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
            writer: group::GroupWriter::new(writer),
            readers: Mutex::new(Vec::new()),
            checkpointer: Mutex::new(None),
            checkpoints_in_background: std::sync::atomic::AtomicBool::new(false),
            log_bell: Arc::default(),
        })
    }

    /// Runs `work` as one write: all of it commits, or none of it, and it has committed
    /// when this returns.
    ///
    /// Writes that arrive while another holds the writer share its transaction, each in a
    /// savepoint of its own, and one commit (group commit, `group.rs`). The transaction
    /// starts `IMMEDIATE` so it never has to upgrade a read lock (which is what makes
    /// SQLite answer BUSY without waiting); if the database is still busy after
    /// `busy_timeout`, the write is tried again.
    pub(crate) fn write<T>(&self, work: impl FnMut(&Conn<'_>) -> Result<T>) -> Result<T> {
        self.writer.write(self.options.busy_timeout, work)
    }

    /// True while a write of this process waits for the writer (see
    /// [`crate::storage::Store::writer_wanted`]).
    pub(crate) fn writer_wanted(&self) -> bool {
        self.writer.wanted()
    }

    /// Runs `work` in one write transaction if the write lock is free right now (in this
    /// process and in the file), else does nothing and returns `None`. For bookkeeping
    /// that must never make a read wait.
    pub(crate) fn try_write<T>(&self, work: impl FnOnce(&Conn<'_>) -> Result<T>) -> Result<Option<T>> {
        self.writer.try_write(self.options.busy_timeout, work)
    }

    /// Runs `work` on a read-only connection from the pool, in one transaction (a
    /// consistent snapshot).
    pub(crate) fn read<T>(&self, work: impl FnOnce(&Conn<'_>) -> Result<T>) -> Result<T> {
        let pooled = self.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let reader = match pooled {
            Some(reader) => reader,
            None => Reader { conn: self.open_reader()?, keys: Default::default() },
        };
        let conn = &reader.conn;
        // One transaction around the whole read: its statements share one snapshot (and
        // one acquisition of the WAL read lock, where each statement on its own would take
        // its own).
        conn.prepare_cached("BEGIN").db()?.execute([]).db()?;
        let result = work(&Conn::Sqlite(SqliteConn(conn, Some(&reader.keys))));
        let ended = conn.prepare_cached("COMMIT").db().and_then(|mut commit| commit.execute([]).db());
        // A connection still inside its transaction must not go back to the pool, where
        // the next read's BEGIN would fail on it: it is dropped (and closed) instead.
        if ended.is_ok() || conn.is_autocommit() {
            let mut readers = self.readers.lock().unwrap_or_else(|p| p.into_inner());
            if readers.len() < MAX_IDLE_READERS {
                readers.push(reader);
            }
        }
        let value = result?;
        ended?;
        Ok(value)
    }

    /// Copies the write-ahead log into the database file, the work SQLite would otherwise
    /// do inside a committing request, and makes sure the next write starts the log over.
    ///
    /// Passive checkpoints, on a connection of its own, copy what the log holds without
    /// holding up readers or writers. But writes go on meanwhile, and SQLite starts the log
    /// over only when a write begins with every page of it copied and no reader in it,
    /// which under steady writes never happens by itself: the log would grow to the cap,
    /// and from then on every commit would pay for a checkpoint. So once the passes have
    /// caught up to within [`CATCH_UP_PAGES`] of the writes (or after [`CATCH_UP_PASSES`]),
    /// and the log is past [`RESTART_PAGES`], a last checkpoint runs between two write
    /// transactions: it copies the few pages written since and waits up to
    /// [`RESTART_WAIT`] for readers to leave the log. Writes wait for it meanwhile.
    ///
    /// The first call also hands checkpoints over to its caller for good
    /// ([`SqliteStore::hand_checkpoints_over`]).
    pub(crate) fn checkpoint(&self) -> Result<Checkpoint> {
        self.checkpoint_run().map(|run| run.done)
    }

    /// [`SqliteStore::checkpoint`], telling also whether a reader (or another process's
    /// write) kept the log from starting over.
    pub(crate) fn checkpoint_run(&self) -> Result<CheckpointRun> {
        self.hand_checkpoints_over()?;
        let mut slot = self.checkpointer.lock().unwrap_or_else(|p| p.into_inner());
        let conn = match slot.take() {
            Some(conn) => conn,
            None => {
                let conn = Connection::open(&self.path).db()?;
                configure(&conn, &self.options)?;
                conn
            }
        };
        let mut copied = Ok(Checkpoint::default());
        for _ in 0..CATCH_UP_PASSES {
            let before = copied.as_ref().map(|c| c.log_pages).unwrap_or(0);
            copied = passive_checkpoint(&conn);
            match &copied {
                Ok(pass) if pass.log_pages - before > CATCH_UP_PAGES => continue,
                _ => break,
            }
        }
        *slot = Some(conn);
        let copied = copied?;
        if copied.log_pages < RESTART_PAGES {
            return Ok(CheckpointRun { done: copied, held_off: false });
        }
        let busy_timeout = self.options.busy_timeout;
        self.writer.between_groups(|conn| {
            conn.busy_timeout(RESTART_WAIT).db()?;
            // Busy (a reader still in the log, another process writing) is no failure:
            // the pages are copied as far as possible and the next checkpoint tries again.
            let restarted = conn
                .query_row("PRAGMA wal_checkpoint(RESTART)", [], |row| {
                    let done = Checkpoint { log_pages: row.get(1)?, checkpointed_pages: row.get(2)? };
                    Ok(CheckpointRun { done, held_off: row.get::<_, i64>(0)? != 0 })
                })
                .db();
            conn.busy_timeout(busy_timeout).db()?;
            restarted
        })
    }

    /// Hands checkpoints over from committing writes to whoever calls
    /// [`SqliteStore::checkpoint`] (the checkpoint thread, or the host's worker), once:
    /// from then on a commit checkpoints only past [`WAL_CAP_PAGES`] of log rather than
    /// SQLite's usual [`WAL_INLINE_PAGES`], and a commit past [`RESTART_PAGES`] rings
    /// the log's bell ([`LogBell`]).
    pub(crate) fn hand_checkpoints_over(&self) -> Result<()> {
        if self.checkpoints_in_background.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        let bell = Arc::clone(&self.log_bell);
        self.writer.between_groups(|conn| {
            // Replaces SQLite's automatic checkpoint, which is a log hook too.
            let hook = move |log: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
                let pages = i64::from(pages);
                if pages >= RESTART_PAGES {
                    bell.ring();
                }
                if pages >= WAL_CAP_PAGES {
                    // As SQLite's own hook: a checkpoint that fails, or cannot copy
                    // everything, leaves the write committed and the log as it was.
                    let _ = log.checkpoint();
                }
                Ok(())
            };
            conn.wal_hook(Some(hook)).db()
        })?;
        self.checkpoints_in_background.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// The bell commits ring when the log is long enough to start over.
    pub(crate) fn log_bell(&self) -> Arc<LogBell> {
        Arc::clone(&self.log_bell)
    }

    fn open_reader(&self) -> Result<Connection> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(&self.path, flags).db()?;
        configure(&conn, &self.options)?;
        conn.pragma_update(None, "query_only", true).db()?;
        Ok(conn)
    }
}

impl SqliteConn<'_> {
    /// Every row of the (cached) statement `sql`, each built by `build`.
    ///
    /// Builders see the row as a `&dyn RowValues`, as on PostgreSQL, so one builder in
    /// `storage/rows.rs` serves both backends and is passed by name: a builder generic
    /// over the row type could not be, being fixed to one row lifetime while these rows
    /// borrow from a statement that lives only inside this call.
    fn query<T>(&self, sql: &str, params: impl Params, build: impl Fn(&dyn RowValues) -> Result<T>) -> Result<Vec<T>> {
        let mut statement = self.0.prepare_cached(sql).db()?;
        let mut rows = statement.query(params).db()?;
        let mut built = Vec::new();
        while let Some(row) = rows.next().db()? {
            built.push(build(row)?);
        }
        Ok(built)
    }

    /// The first row of the (cached) statement `sql`, if any, built by `build`.
    fn query_opt<T>(
        &self,
        sql: &str,
        params: impl Params,
        build: impl FnOnce(&dyn RowValues) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut statement = self.0.prepare_cached(sql).db()?;
        let mut rows = statement.query(params).db()?;
        match rows.next().db()? {
            Some(row) => build(row).map(Some),
            None => Ok(None),
        }
    }

    /// The first row of the (cached) statement `sql`, built by `build`; no row is
    /// SQLite's `QueryReturnedNoRows` storage error.
    fn query_one<T>(
        &self,
        sql: &str,
        params: impl Params,
        build: impl FnOnce(&dyn RowValues) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, build)?.ok_or_else(|| sqlite_error(rusqlite::Error::QueryReturnedNoRows))
    }

    /// Runs the (cached) statement `sql`; the number of rows it changed.
    fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        self.0.prepare_cached(sql).db()?.execute(params).db()
    }

    /// The connection itself, for tests that write raw SQL.
    #[cfg(test)]
    pub(crate) fn connection(&self) -> &Connection {
        self.0
    }
}

/// A passive checkpoint on `conn`: copies what it can without waiting for anyone.
fn passive_checkpoint(conn: &Connection) -> Result<Checkpoint> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        Ok(Checkpoint { log_pages: row.get(1)?, checkpointed_pages: row.get(2)? })
    })
    .db()
}

/// The page size of a new database file. Every commit writes each page it changed to
/// the log whole, and a create changes a few rows of a few hundred bytes in about eight
/// B-trees: with 2 KiB pages rather than SQLite's 4 KiB default, it writes (and
/// checksums) half the bytes. Measured against 4 KiB at 100k orders (`benches/perf.rs`),
/// create ÷ raw went from 0.55 to 0.60 under NORMAL and from 0.82 to 0.86 under FULL,
/// reads and bytes per order stayed the same; 1 KiB pages made list pages 15 % slower
/// (an order row then fills most of a page).
const NEW_FILE_PAGE_BYTES: i64 = 2048;

fn open_writer(path: &Path, options: &StoreOptions) -> Result<Connection> {
    create_private(path);
    let mut writer = Connection::open(path).db()?;
    // SQLite opens a file it may not write read-only, without a word; every write
    // would then fail. Say so now, when whoever started the service can fix it.
    if writer.is_readonly(rusqlite::MAIN_DB).db()? {
        return Err(Error::new(ErrorKind::Config(format!(
            "the database file {} is read-only for this user: coinorder writes to it (give the user \
             write access to the file and its directory)",
            path.display()
        ))));
    }
    configure(&writer, options)?;
    // Takes effect only on a file without pages yet; an existing file keeps its size.
    writer.pragma_update(None, "page_size", NEW_FILE_PAGE_BYTES).db()?;
    let _mode: String = writer.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)).db()?;
    writer.pragma_update(None, "wal_autocheckpoint", WAL_INLINE_PAGES).db()?;
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
    conn.busy_timeout(options.busy_timeout).db()?;
    conn.pragma_update(None, "foreign_keys", true).db()?;
    let sync = if options.sqlite.synchronous_full { "FULL" } else { "NORMAL" };
    conn.pragma_update(None, "synchronous", sync).db()?;
    let mmap_bytes = i64::try_from(options.sqlite.mmap_mib.saturating_mul(1 << 20)).unwrap_or(i64::MAX);
    conn.pragma_update(None, "mmap_size", mmap_bytes).db()?;
    // A negative cache_size counts KiB rather than pages.
    let cache_kib = i64::try_from(options.sqlite.cache_mib.saturating_mul(1024)).unwrap_or(i64::MAX);
    conn.pragma_update(None, "cache_size", -cache_kib).db()?;
    // Keep one plan per cached statement: without this, SQLite re-prepares a statement
    // whenever a bound value might change its plan, which made point reads parse SQL on
    // every call.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).db()?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

fn is_busy(err: &Error) -> bool {
    matches!(err.kind(), ErrorKind::Storage(e) if e.is_busy())
}

/// SQLite's errors become the backend-neutral [`StorageError`], busy when another
/// connection holds the lock (a retry may cure that). A private function rather than a
/// `From` impl on [`Error`], which would put `rusqlite` into the public API.
fn sqlite_error(err: rusqlite::Error) -> Error {
    let code = match &err {
        rusqlite::Error::SqliteFailure(e, _) => Some(e.code),
        _ => None,
    };
    let busy = matches!(code, Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked));
    let storage = StorageError::new(busy, err);
    // SQLite names a failed read or write only by its extended code ("disk I/O error:
    // Error code 4874"), which sends an operator looking at the hardware; the usual cause
    // is a full disk or a file size limit.
    let storage = match code {
        Some(ErrorCode::SystemIoFailure) => {
            storage.with_hint("SQLite could not read or write its files: check the free disk space, the file size limit (ulimit -f) and the permissions")
        }
        _ => storage,
    };
    Error::new(ErrorKind::Storage(storage))
}

impl<T> DbResult<T> for rusqlite::Result<T> {
    fn db(self) -> Result<T> {
        self.map_err(sqlite_error)
    }
}

/// Values by their SQLite type; a `NULL` or another type where the schema promises this
/// one is rusqlite's storage error, as before the builders were shared.
impl RowValues for Row<'_> {
    fn text(&self, column: usize) -> Result<String> {
        self.get(column).db()
    }

    fn str(&self, column: usize) -> Result<&str> {
        self.get_ref(column).and_then(|value| value.as_str().map_err(Into::into)).db()
    }

    fn opt_text(&self, column: usize) -> Result<Option<String>> {
        self.get(column).db()
    }

    fn int(&self, column: usize) -> Result<i64> {
        self.get(column).db()
    }

    fn opt_int(&self, column: usize) -> Result<Option<i64>> {
        self.get(column).db()
    }

    fn bytes(&self, column: usize) -> Result<Vec<u8>> {
        self.get(column).db()
    }
}

/// Brings the schema up to [`SCHEMA_VERSION`], one migration per transaction, and
/// refuses a database written by a newer library.
fn migrate(conn: &mut Connection) -> Result<()> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).db()?;
        let version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0)).db()?;
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
        tx.execute_batch(sql).db()?;
        tx.pragma_update(None, "user_version", version + 1).db()?;
        tx.commit().db()?;
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn options() -> StoreOptions {
        StoreOptions {
            sqlite: crate::config::SqliteOptions { synchronous_full: true, ..Default::default() },
            busy_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn a_new_file_gets_small_pages_and_an_existing_file_keeps_its_own() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let page_size = |store: &SqliteStore| {
            store.read(|c| c.sqlite_for_test().query_row("PRAGMA page_size", [], |r| r.get::<_, i64>(0)).db())
        };
        let new = SqliteStore::open(&dir.path().join("new.db"), options())?;
        assert_eq!(page_size(&new)?, NEW_FILE_PAGE_BYTES);
        // A file an older version made, with SQLite's default 4 KiB pages.
        let old_path = dir.path().join("old.db");
        Connection::open(&old_path).db()?.execute_batch("CREATE TABLE earlier (n INTEGER)").db()?;
        let old = SqliteStore::open(&old_path, options())?;
        assert_eq!(page_size(&old)?, 4096);
        old.write(|c| c.sqlite_for_test().execute("INSERT INTO earlier VALUES (1)", []).db())?;
        Ok(())
    }

    #[test]
    fn background_checkpoints_start_the_log_over_while_writes_go_on() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let options = StoreOptions {
            sqlite: crate::config::SqliteOptions { synchronous_full: false, ..Default::default() },
            busy_timeout: Duration::from_secs(5),
        };
        let store = std::sync::Arc::new(SqliteStore::open(&dir.path().join("t.db"), options)?);
        store.write(|c| c.sqlite_for_test().execute_batch("CREATE TABLE filler (bytes BLOB)").db())?;
        use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
        let (stop, writes) = (std::sync::Arc::new(AtomicBool::new(false)), std::sync::Arc::new(AtomicI64::new(0)));
        // A page per write, and a read between writes, without a pause.
        let writing = {
            let (store, stop, writes) =
                (std::sync::Arc::clone(&store), std::sync::Arc::clone(&stop), std::sync::Arc::clone(&writes));
            std::thread::spawn(move || -> Result<()> {
                while !stop.load(Ordering::SeqCst) {
                    store
                        .write(|c| c.sqlite_for_test().execute("INSERT INTO filler SELECT zeroblob(4000)", []).db())?;
                    store.read(|c| {
                        c.sqlite_for_test().query_row("SELECT max(rowid) FROM filler", [], |r| r.get::<_, i64>(0)).db()
                    })?;
                    writes.fetch_add(1, Ordering::SeqCst);
                }
                Ok(())
            })
        };
        // Checkpoints every 20 ms while the writes go on, counting the times the log started
        // over (it shrank to less than half of what it held at the previous look; a log
        // that never starts over only grows, up to the 16,384-page cap). How many tries a
        // restart takes depends on the scheduler (a reader preempted in its snapshot holds
        // it off), so the test runs until it has seen two, or a minute, rather than for a
        // fixed number of writes: on a loaded machine it takes longer, never flakes.
        let (mut previous, mut restarts, mut largest_log) = (0, 0, 0);
        let started = std::time::Instant::now();
        while (writes.load(Ordering::SeqCst) < 8_000 || restarts < 2) && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(20));
            let log = store.checkpoint()?.log_pages;
            if previous > RESTART_PAGES && log < previous / 2 {
                restarts += 1;
            }
            (previous, largest_log) = (log, largest_log.max(log));
        }
        stop.store(true, Ordering::SeqCst);
        writing.join().map_err(|_| Error::new(ErrorKind::Internal("writer panicked".into())))??;
        let writes = writes.load(Ordering::SeqCst);
        assert!(writes >= 8_000, "enough writes to tell: {writes}");
        assert!(
            restarts >= 2,
            "the log started over {restarts} times in {writes} one-page writes (largest: {largest_log} pages)"
        );
        Ok(())
    }

    #[test]
    fn checkpoints_run_in_the_background_and_writes_only_past_the_cap() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let store = SqliteStore::open(&dir.path().join("t.db"), options())?;
        let autocheckpoint = || {
            store.write(|c| {
                c.sqlite_for_test().pragma_query_value(None, "wal_autocheckpoint", |r| r.get::<_, i64>(0)).db()
            })
        };
        assert_eq!(autocheckpoint()?, WAL_INLINE_PAGES, "with no background checkpoints, commits run them");
        store.checkpoint()?;
        // SQLite reports 0 once its automatic checkpoint gave way to another log hook.
        assert_eq!(autocheckpoint()?, 0, "from the first one on, the store's log hook replaces SQLite's");
        // 3,000 rows, about 6,000 pages of 2 KiB: past SQLite's default of 1,000, far below the cap.
        store.write(|c| c.sqlite_for_test().execute_batch("CREATE TABLE filler (bytes BLOB)").db())?;
        for _ in 0..30 {
            store.write(|c| c.sqlite_for_test().execute(&filler_rows(100), []).db())?;
        }
        let wal = dir.path().join("t.db-wal");
        let before = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        assert!(before > 3000 * 4096, "the log kept every page until the checkpoint: {before} bytes");
        let done = store.checkpoint()?;
        assert!(done.log_pages >= 3000, "{done:?}");
        assert_eq!(done.checkpointed_pages, done.log_pages, "no reader held it back: {done:?}");
        // The next write starts the log over rather than adding to it.
        store
            .read(|c| c.sqlite_for_test().query_row("SELECT count(*) FROM filler", [], |r| r.get::<_, i64>(0)).db())?;
        store.write(|c| c.sqlite_for_test().execute("INSERT INTO filler VALUES (x'00')", []).db())?;
        let after = store.checkpoint()?;
        assert!(after.log_pages < 10, "the log started over: {after:?}");

        // Past the cap, a commit copies the log itself (and nothing else does here): the
        // write after it starts the log over.
        store.write(|c| c.sqlite_for_test().execute(&filler_rows(9_000), []).db())?;
        store.write(|c| c.sqlite_for_test().execute("INSERT INTO filler VALUES (x'00')", []).db())?;
        let log = log_pages(&dir.path().join("t.db"))?;
        assert!(log < 10, "the commit past the cap copied the log, and the next one started it over: {log} pages");
        Ok(())
    }

    /// An INSERT of `rows` rows of 4,000 zero bytes into `filler`: about two log pages each.
    pub(super) fn filler_rows(rows: usize) -> String {
        format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
             INSERT INTO filler SELECT zeroblob(4000) FROM n"
        )
    }

    /// The pages in the log of the file at `path`, seen from a connection of its own
    /// without copying any (a `NOOP` checkpoint).
    pub(super) fn log_pages(path: &Path) -> Result<i64> {
        Connection::open(path).db()?.query_row("PRAGMA wal_checkpoint(NOOP)", [], |row| row.get(1)).db()
    }

    #[test]
    fn a_checkpoint_tells_when_a_reader_kept_the_log_from_starting_over() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let path = dir.path().join("t.db");
        let store = SqliteStore::open(&path, options())?;
        store.hand_checkpoints_over()?;
        store.write(|c| c.sqlite_for_test().execute_batch("CREATE TABLE filler (bytes BLOB)").db())?;
        store.write(|c| c.sqlite_for_test().execute(&filler_rows(2_500), []).db())?;
        // Another connection reads in the log, and one more page is written after it began.
        let reader = Connection::open(&path).db()?;
        reader.execute_batch("BEGIN").db()?;
        let _rows: i64 = reader.query_row("SELECT count(*) FROM filler", [], |r| r.get(0)).db()?;
        store.write(|c| c.sqlite_for_test().execute("INSERT INTO filler VALUES (x'00')", []).db())?;
        let run = store.checkpoint_run()?;
        assert!(run.done.log_pages >= RESTART_PAGES, "{run:?}");
        assert!(run.held_off, "the reader's snapshot kept the log: {run:?}");
        reader.execute_batch("COMMIT").db()?;
        let run = store.checkpoint_run()?;
        assert!(!run.held_off, "with the reader gone the log starts over: {run:?}");
        store.write(|c| c.sqlite_for_test().execute("INSERT INTO filler VALUES (x'00')", []).db())?;
        assert!(log_pages(&path)? < 10);
        Ok(())
    }

    #[test]
    fn readers_map_the_file_and_size_their_cache_as_configured() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let mut options = options();
        options.sqlite.mmap_mib = 16;
        options.sqlite.cache_mib = 4;
        let store = SqliteStore::open(&dir.path().join("t.db"), options)?;
        let (mmap, cache) = store.read(|c| {
            let conn = c.sqlite_for_test();
            let mmap: i64 = conn.pragma_query_value(None, "mmap_size", |r| r.get(0)).db()?;
            let cache: i64 = conn.pragma_query_value(None, "cache_size", |r| r.get(0)).db()?;
            Ok((mmap, cache))
        })?;
        assert_eq!((mmap, cache), (16 << 20, -4096));
        Ok(())
    }

    #[test]
    fn new_database_gets_current_schema_and_newer_is_refused() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let path = dir.path().join("t.db");
        let store = SqliteStore::open(&path, options())?;
        let version = store
            .read(|c| c.sqlite_for_test().pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0)).db())?;
        assert_eq!(version, SCHEMA_VERSION);
        drop(store);
        let conn = Connection::open(&path).db()?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).db()?;
        drop(conn);
        let err = SqliteStore::open(&path, options()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("newer than this library"), "{err}");
        Ok(())
    }

    #[test]
    fn a_version_1_database_is_migrated_with_its_data() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let path = dir.path().join("old.db");
        let conn = Connection::open(&path).db()?;
        conn.execute_batch(MIGRATIONS[0]).db()?;
        conn.pragma_update(None, "user_version", 1).db()?;
        conn.execute_batch(
            "INSERT INTO orders (order_id, environment, user_id, key_id, merchant_order_id, amount, currency,
                                 status, request_hash, create_response, created_at, updated_at)
             VALUES ('00000000-0000-4000-8000-000000000001', 'sandbox', 7, 'key_x', 'old-1', '19.99', 'USD',
                     'NEW', x'00', '{}', 1000, 1000);
             INSERT INTO invoices (invoice_id, order_id, amount, currency, rate, status, created_at, expired_at,
                                   updated_at)
             VALUES ('inv-1', '00000000-0000-4000-8000-000000000001', '19.99', 'USDT', '1', 'NEW', 1000, 2000, 1000);",
        )
        .db()?;
        drop(conn);
        let store = SqliteStore::open(&path, options())?;
        let order = store
            .read(|c| c.order_in_environment(crate::Environment::Sandbox, "00000000-0000-4000-8000-000000000001"))?;
        let order = order.ok_or_else(|| Error::new(ErrorKind::OrderNotFound))?;
        assert_eq!(order.order.amount.to_string(), "19.99");
        assert_eq!(order.invoice.address, "");
        // Schema 10 moved the invoice into the order's row, with every field.
        assert_eq!(order.invoice.invoice_id, "inv-1");
        assert_eq!(order.invoice.currency, "USDT");
        assert_eq!(order.invoice.expired_at.as_millis(), 2000);
        assert_eq!(order.invoice.status, crate::OrderStatus::New);
        assert!(!order.order.marked_paid);
        let version = store
            .read(|c| c.sqlite_for_test().pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0)).db())?;
        assert_eq!(version, SCHEMA_VERSION);
        let events = store.read(|c| c.events_for_order("00000000-0000-4000-8000-000000000001"))?;
        assert!(events.is_empty());
        Ok(())
    }

    #[test]
    fn a_negative_schema_version_is_corrupt() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let path = dir.path().join("t.db");
        Connection::open(&path).db()?.pragma_update(None, "user_version", -1).db()?;
        let err = SqliteStore::open(&path, options()).err().map(|e| e.kind().to_string()).unwrap_or_default();
        assert_eq!(err, "stored data could not be read: user_version: unknown value -1");
        Ok(())
    }

    #[test]
    fn reads_cannot_write() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let store = SqliteStore::open(&dir.path().join("t.db"), options())?;
        let result = store.read(|c| c.sqlite_for_test().execute("DELETE FROM orders", []).db());
        assert!(result.is_err());
        Ok(())
    }

    #[test]
    fn a_busy_or_locked_database_is_a_busy_storage_error_and_others_are_not() {
        use rusqlite::ffi;
        let failure = |code| rusqlite::Error::SqliteFailure(ffi::Error::new(code), None);
        for (error, busy) in [
            (failure(ffi::SQLITE_BUSY), true),
            (failure(ffi::SQLITE_LOCKED), true),
            (failure(ffi::SQLITE_CONSTRAINT), false),
            (rusqlite::Error::QueryReturnedNoRows, false),
        ] {
            let converted = Err::<(), _>(error).db();
            let storage_busy = match converted.as_ref().map_err(Error::kind) {
                Err(ErrorKind::Storage(storage)) => Some(storage.is_busy()),
                _ => None,
            };
            assert_eq!(storage_busy, Some(busy), "{converted:?}");
        }
    }

    #[test]
    fn an_io_error_says_what_to_check_and_others_do_not() {
        use rusqlite::ffi;
        // SQLITE_IOERR_SHMSIZE, as when the disk is too full for the shared-memory file.
        let io = rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_IOERR_SHMSIZE), None);
        let text = Err::<(), _>(io).db().map_err(|e| e.to_string()).err().unwrap_or_default();
        assert!(text.contains("disk I/O error") && text.contains("check the free disk space"), "{text}");
        let full = rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_FULL), None);
        let text = Err::<(), _>(full).db().map_err(|e| e.to_string()).err().unwrap_or_default();
        assert!(text.contains("full") && !text.contains("check the"), "{text}");
    }
}
