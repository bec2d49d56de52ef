//! The PostgreSQL backend (feature `postgres`): the typed methods of [`super::Conn`], as
//! `sqlite/` has them, for several processes on several hosts writing one database at
//! once (DESIGN §11).
//!
//! Every write runs as one `SERIALIZABLE` transaction, retried whole on a serialization
//! failure (40001), a deadlock (40P01) or a lock timeout, so the guarantees that SQLite's
//! single writer gives for free (idempotent create, gapless event sequences, one
//! state change at a time per order) hold with any number of writers. Reads run in
//! `REPEATABLE READ READ ONLY` transactions: one snapshot per call, like SQLite's readers.
//! Outbox claims add `FOR UPDATE SKIP LOCKED`, so concurrent deliverers take different
//! messages instead of failing each other's transactions.
//!
//! Connections come from an r2d2 pool; TLS goes through rustls, with libpq's meanings of
//! the URL's `sslmode` and `sslrootcert` (`tls.rs`).

mod delivery;
mod keys;
mod orders;
mod payments;
mod tls;
mod wallets;

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use postgres::types::ToSql;
use postgres::Row;
use r2d2_postgres::PostgresConnectionManager;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::rows::RowValues;
use super::{Conn, DbResult, StoreOptions};
use crate::error::{Error, ErrorKind, Result, StorageError};

/// The PostgreSQL schema migrations, applied in order under an advisory lock; the schema
/// version is the count applied.
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("../../../migrations/postgres/0001_init.sql"),
    include_str!("../../../migrations/postgres/0002_claim_indexes.sql"),
    include_str!("../../../migrations/postgres/0003_key_display_name.sql"),
    include_str!("../../../migrations/postgres/0004_wallets.sql"),
    include_str!("../../../migrations/postgres/0005_append_list_indexes.sql"),
    include_str!("../../../migrations/postgres/0006_previous_webhook_secret.sql"),
    include_str!("../../../migrations/postgres/0007_payment_vanished.sql"),
];

/// The schema version this library writes on PostgreSQL.
const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Connections kept open per process.
const POOL_SIZE: u32 = 16;

/// The advisory lock key migrations run under (any constant; "coinorder" in ASCII).
const MIGRATION_LOCK: i64 = 0x636f_696e_6f72_6465;

/// The pool's connection manager: connects like `r2d2_postgres`, keeps each connection's
/// prepared statements, and turns a panic while connecting into an error.
struct Manager(PostgresConnectionManager<MakeRustlsConnect>);

/// A pooled connection and the statements prepared on it: each SQL text is parsed by the
/// server once per connection, so a call costs one round trip per statement instead of
/// two (prepare, then execute).
pub(crate) struct PooledClient {
    client: postgres::Client,
    statements: HashMap<String, postgres::Statement>,
}

impl PooledClient {
    /// The prepared statement for `sql`, prepared on first use.
    fn statement(&mut self, sql: &str) -> std::result::Result<postgres::Statement, postgres::Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.statements.insert(sql.to_string(), statement.clone());
        Ok(statement)
    }
}

/// Why the pool could not open a connection.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    /// The server or the network said no.
    #[error("{0}")]
    Postgres(#[from] postgres::Error),
    /// The `postgres` crate panicked while connecting: it unwraps the creation of each
    /// connection's runtime, which fails when the process is out of file descriptors.
    /// Caught so the pool's worker thread lives on; the pool retries later.
    #[error("connecting panicked (out of file descriptors?): {0}")]
    Panicked(String),
}

impl ConnectError {
    /// True when the server answered and said no for a reason the settings decide (a
    /// wrong password, role or database name, no right to connect): they need fixing.
    /// Anything else (a server down, full, starting or unreachable, a broken TLS
    /// handshake, no file descriptors) is the storage failing, which opening again later
    /// may cure.
    fn is_refusal(&self) -> bool {
        // Only what the settings decide: a server full (53300), starting or shutting down
        // (57P03) is there again later.
        let ConnectError::Postgres(error) = self else { return false };
        error.code().is_some_and(|code| {
            let code = code.code();
            code.starts_with("28") || code == "3D000" || code == "42501"
        })
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = PooledClient;
    type Error = ConnectError;

    fn connect(&self) -> std::result::Result<PooledClient, ConnectError> {
        let connected = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.0.connect()));
        match connected {
            Ok(client) => Ok(PooledClient { client: client?, statements: HashMap::new() }),
            Err(payload) => Err(ConnectError::Panicked(
                payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|text| (*text).to_string()))
                    .unwrap_or_default(),
            )),
        }
    }

    fn is_valid(&self, conn: &mut PooledClient) -> std::result::Result<(), ConnectError> {
        Ok(conn.client.simple_query("").map(|_| ())?)
    }

    fn has_broken(&self, conn: &mut PooledClient) -> bool {
        conn.client.is_closed()
    }
}

/// A PostgreSQL database: a pool of connections.
pub(crate) struct PgStore {
    /// `None` only while the store is being dropped (see its `Drop`).
    pool: Option<r2d2::Pool<Manager>>,
    /// Where it is, without the password: for messages.
    server: String,
    busy_timeout: Duration,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("server", &self.server).finish_non_exhaustive()
    }
}

/// One pooled connection inside a transaction; the typed methods of `postgres/*.rs`
/// run their statements on it.
pub(crate) struct PgConn {
    client: RefCell<r2d2::PooledConnection<Manager>>,
    /// True in a write transaction: reads of rows about to change take a row lock.
    writing: bool,
}

impl Drop for PgStore {
    /// Closes the connections on a thread of their own ([`super::off_async_threads`]): the
    /// last reference to the service may be dropped anywhere, a host's tokio task included.
    fn drop(&mut self) {
        let pool = self.pool.take();
        super::off_async_threads(move || drop(pool));
    }
}

impl PgStore {
    /// Connects to the server at `url` and brings its schema up to date.
    pub(crate) fn open(url: &str, options: &StoreOptions) -> Result<PgStore> {
        let target = tls::tls_target(url)?;
        let config: postgres::Config = target.url.parse().map_err(|e| {
            Error::new(ErrorKind::Config(format!("not a PostgreSQL URL (postgres://user@host:port/database): {e}")))
        })?;
        let server = describe(&config);
        let manager = Manager(PostgresConnectionManager::new(config, MakeRustlsConnect::new(target.config)));
        // One connection first, straight away: a wrong host, role or database name is
        // reported at once with the server's own reason, not after the pool's timeout.
        r2d2::ManageConnection::connect(&manager).map_err(|e| {
            if e.is_refusal() {
                let reason = crate::error::with_causes(&e);
                Error::new(ErrorKind::Config(format!("cannot connect to PostgreSQL at {server}: {reason}")))
            } else {
                Error::new(ErrorKind::Storage(StorageError::new(
                    false,
                    Unreachable { server: server.clone(), cause: e },
                )))
            }
        })?;
        let pool = r2d2::Pool::builder()
            .max_size(POOL_SIZE)
            // Every connection is opened at start (in the background) and kept: opening
            // one later needs file descriptors that a flood of clients may have taken.
            .min_idle(Some(POOL_SIZE))
            .idle_timeout(None)
            // A broken connection fails its transaction, which is retried or reported;
            // checking each one first would add a round trip to every call.
            .test_on_check_out(false)
            .connection_timeout(options.busy_timeout.clamp(Duration::from_secs(1), Duration::from_secs(30)))
            .build_unchecked(manager);
        let store = PgStore { pool: Some(pool), server, busy_timeout: options.busy_timeout };
        store.migrate()?;
        Ok(store)
    }

    fn connection(&self) -> Result<r2d2::PooledConnection<Manager>> {
        let unavailable = |reason: String| {
            Error::new(ErrorKind::Storage(StorageError::new(true, PoolError(format!("{}: {reason}", self.server)))))
        };
        let pool = self.pool.as_ref().ok_or_else(|| unavailable("the store is closing".to_string()))?;
        pool.get().map_err(|e| unavailable(e.to_string()))
    }

    /// Applies the migrations this database lacks, one process at a time: several
    /// processes starting together on an empty database migrate it once.
    fn migrate(&self) -> Result<()> {
        let mut pooled = self.connection()?;
        let mut tx = pooled.client.transaction().db()?;
        // A transaction-scoped lock: released by the commit, never left behind.
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).db()?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS coinorder_schema (version BIGINT NOT NULL)").db()?;
        let version =
            tx.query_opt("SELECT version FROM coinorder_schema", &[]).db()?.map(|row| row.int(0)).transpose()?;
        let version = match version {
            Some(version) => version,
            None => {
                tx.execute("INSERT INTO coinorder_schema (version) VALUES (0)", &[]).db()?;
                0
            }
        };
        if version > SCHEMA_VERSION {
            return Err(Error::new(ErrorKind::SchemaTooNew { found: version, supported: SCHEMA_VERSION }));
        }
        let first = usize::try_from(version).map_err(|_| {
            Error::new(ErrorKind::Corrupt(format!("coinorder_schema.version: unknown value {version}")))
        })?;
        for sql in MIGRATIONS.iter().skip(first) {
            tx.batch_execute(sql).db()?;
        }
        tx.execute("UPDATE coinorder_schema SET version = $1", &[&SCHEMA_VERSION]).db()?;
        tx.commit().db()?;
        Ok(())
    }

    /// [`super::Store::write`]: one `SERIALIZABLE` transaction, retried whole while the
    /// database answers with a conflict, for at most the busy timeout.
    pub(crate) fn write<T>(&self, work: impl FnMut(&Conn<'_>) -> Result<T>) -> Result<T> {
        self.write_with("BEGIN ISOLATION LEVEL SERIALIZABLE", work)
    }

    /// A write transaction opened by `begin`, retried whole while the database answers
    /// with a conflict, for at most the busy timeout. A lock held elsewhere is waited for
    /// only until that deadline (`lock_timeout`), so a database locked by someone else
    /// ends in a busy error, as SQLite's busy timeout does, not in a wait without end.
    pub(crate) fn write_with<T>(&self, begin: &str, mut work: impl FnMut(&Conn<'_>) -> Result<T>) -> Result<T> {
        let deadline = Instant::now() + self.busy_timeout;
        let mut attempt: u32 = 0;
        loop {
            let left_ms = deadline.saturating_duration_since(Instant::now()).as_millis().max(1);
            let begin = format!("{begin}; SET LOCAL lock_timeout = {left_ms}");
            let outcome = self.transaction(&begin, true, &mut work);
            match outcome {
                Err(error) if is_conflict(&error) && Instant::now() < deadline => {
                    attempt += 1;
                    // Spread the retries of colliding writers apart.
                    let jitter = u64::from(crate::random::random::<u8>() % 8);
                    std::thread::sleep(Duration::from_millis(u64::from(attempt.min(20)) + jitter));
                }
                other => return other,
            }
        }
    }

    /// [`super::Store::try_write`]: a write that gives up at the first lock it would wait for.
    pub(crate) fn try_write<T>(&self, work: impl FnOnce(&Conn<'_>) -> Result<T>) -> Result<Option<T>> {
        let mut once = Some(work);
        let outcome = self.transaction(
            "BEGIN ISOLATION LEVEL SERIALIZABLE; SET LOCAL lock_timeout = '10ms'",
            true,
            &mut |conn: &Conn<'_>| match once.take() {
                Some(work) => work(conn),
                None => Err(Error::new(ErrorKind::Internal("try_write ran twice".into()))),
            },
        );
        match outcome {
            Err(error) if is_conflict(&error) => Ok(None),
            other => other.map(Some),
        }
    }

    /// [`super::Store::read`]: one snapshot. A lock held elsewhere (a table locked by a
    /// migration or `VACUUM FULL`) is waited for at most the busy timeout, as a write's
    /// is, and then a busy error: reads had waited as long as the lock was held.
    pub(crate) fn read<T>(&self, work: impl FnOnce(&Conn<'_>) -> Result<T>) -> Result<T> {
        let mut once = Some(work);
        let timeout_ms = self.busy_timeout.as_millis().max(1);
        let begin = format!("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL lock_timeout = {timeout_ms}");
        self.transaction(&begin, false, &mut |conn: &Conn<'_>| match once.take() {
            Some(work) => work(conn),
            None => Err(Error::new(ErrorKind::Internal("read ran twice".into()))),
        })
    }

    /// A connection of the pool with the transaction `begin` opened on it. A pooled
    /// connection the server has closed meanwhile (a restart, `pg_terminate_backend`) is
    /// only found out by using it: one whose `BEGIN` finds it gone is dropped and the next
    /// one tried, as nothing ran on it yet, so a database back up again is not answered
    /// with errors until every dead connection has failed a request.
    fn begun(&self, begin: &str) -> Result<r2d2::PooledConnection<Manager>> {
        let mut tries = 0;
        loop {
            let mut pooled = self.connection()?;
            match pooled.client.batch_execute(begin) {
                Ok(()) => return Ok(pooled),
                Err(error) if is_connection_lost(&error) && tries <= POOL_SIZE => tries += 1,
                Err(error) => return Err(postgres_error(error)),
            }
        }
    }

    fn transaction<T>(&self, begin: &str, writing: bool, work: &mut dyn FnMut(&Conn<'_>) -> Result<T>) -> Result<T> {
        let pooled = self.begun(begin)?;
        let conn = PgConn { client: RefCell::new(pooled), writing };
        let outcome = work(&Conn::Postgres(&conn));
        let mut pooled = conn.client.into_inner();
        match outcome {
            Ok(value) => {
                // A connection lost while committing leaves the outcome unknown: not a
                // busy error (a 503 says nothing was done: send it again), and never run
                // again here, either of which could do it twice.
                // (A read wrote nothing: its lost connection is busy, as any other.)
                pooled.client.batch_execute("COMMIT").map_err(|error| match writing && is_connection_lost(&error) {
                    true => Error::new(ErrorKind::Storage(StorageError::new(false, CommitOutcomeUnknown(error)))),
                    false => postgres_error(error),
                })?;
                Ok(value)
            }
            Err(error) => {
                // A connection whose rollback fails is broken: r2d2 drops it on its
                // next health check.
                let _ = pooled.client.batch_execute("ROLLBACK");
                Err(error)
            }
        }
    }
}

impl PgConn {
    /// Runs `run` with the cached prepared statement of `sql`.
    fn with_statement<T>(
        &self,
        sql: &str,
        run: impl FnOnce(&mut postgres::Client, &postgres::Statement) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut pooled = self.client.borrow_mut();
        let statement = pooled.statement(sql).db()?;
        run(&mut pooled.client, &statement).db()
    }

    /// Every row of `sql`, each built by `build` (a builder of `storage/rows.rs`, which
    /// serves the SQLite backend too).
    fn query<T>(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        build: impl Fn(&dyn RowValues) -> Result<T>,
    ) -> Result<Vec<T>> {
        let rows = self.with_statement(sql, |client, statement| client.query(statement, params))?;
        rows.iter().map(|row| build(row)).collect()
    }

    /// The row of `sql` if there is one (more than one is the `postgres` crate's
    /// error), built by `build`.
    fn query_opt<T>(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        build: impl FnOnce(&dyn RowValues) -> Result<T>,
    ) -> Result<Option<T>> {
        let row = self.with_statement(sql, |client, statement| client.query_opt(statement, params))?;
        match row {
            Some(row) => build(&row).map(Some),
            None => Ok(None),
        }
    }

    /// The one row of `sql` (none or more is the `postgres` crate's error), built by
    /// `build`.
    fn query_one<T>(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        build: impl FnOnce(&dyn RowValues) -> Result<T>,
    ) -> Result<T> {
        let row = self.with_statement(sql, |client, statement| client.query_one(statement, params))?;
        build(&row)
    }

    /// Runs a statement; the number of rows it changed.
    fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        self.with_statement(sql, |client, statement| client.execute(statement, params))
    }

    /// `" FOR UPDATE"` inside a write transaction, `""` in a read: appended to the reads
    /// of rows the transaction is about to change, so concurrent writers queue on the row
    /// instead of failing on commit.
    fn for_update(&self) -> &'static str {
        if self.writing {
            " FOR UPDATE"
        } else {
            ""
        }
    }
}

/// The server could not be reached at open (down, wrong port, network, TLS).
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to PostgreSQL at {server}")]
struct Unreachable {
    /// Where, without the password.
    server: String,
    #[source]
    cause: ConnectError,
}

/// A failure of the pool itself (no connection within the timeout).
#[derive(Debug, thiserror::Error)]
#[error("no PostgreSQL connection available: {0}")]
struct PoolError(String);

/// A connection lost while its `COMMIT` was on the way: committed or not, no one knows.
#[derive(Debug, thiserror::Error)]
#[error("the connection to PostgreSQL was lost while committing (the outcome is unknown)")]
struct CommitOutcomeUnknown(#[source] postgres::Error);

/// Errors after which the whole transaction may simply run again: conflicts, and a
/// connection lost before the commit (the server rolled the transaction back). One lost
/// at the commit ([`CommitOutcomeUnknown`]) is not busy, so never among them.
fn is_conflict(error: &Error) -> bool {
    matches!(error.kind(), ErrorKind::Storage(storage) if storage.is_busy())
}

/// True when `error` is the connection's loss (closed by the server, reset, timed out),
/// not something the server answered.
fn is_connection_lost(error: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    match error.code() {
        // The server ended the session: `pg_terminate_backend`, a shutdown or a crash.
        Some(code) => *code == SqlState::ADMIN_SHUTDOWN || *code == SqlState::CRASH_SHUTDOWN,
        None => {
            error.is_closed() || std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>())
        }
    }
}

/// `host:port/database` of a connection configuration (never the password).
fn describe(config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}/{}", config.get_dbname().unwrap_or(""))
}

/// PostgreSQL's errors become the backend-neutral [`StorageError`]; the conflicts a
/// retry cures (serialization failure, deadlock, lock timeout) and a server or connection
/// gone for now are marked busy. A private
/// function rather than a `From` impl on [`Error`], which would put `postgres` into the
/// public API.
fn postgres_error(err: postgres::Error) -> Error {
    use postgres::error::SqlState;
    // A lost connection is the database unavailable for now: a 503 to retry, and a
    // transaction that had not committed is run again on another connection.
    let busy = is_connection_lost(&err)
        || err.code().is_some_and(|code| {
            *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::LOCK_NOT_AVAILABLE
                || *code == SqlState::CANNOT_CONNECT_NOW
        });
    Error::new(ErrorKind::Storage(StorageError::new(busy, err)))
}

impl<T> DbResult<T> for std::result::Result<T, postgres::Error> {
    fn db(self) -> Result<T> {
        self.map_err(postgres_error)
    }
}

/// Values by their PostgreSQL type (`TEXT`, `BIGINT`, `BYTEA`); a `NULL` or another type
/// where the schema promises this one is the `postgres` crate's storage error.
impl RowValues for Row {
    fn text(&self, column: usize) -> Result<String> {
        self.try_get(column).db()
    }

    fn str(&self, column: usize) -> Result<&str> {
        self.try_get(column).db()
    }

    fn opt_text(&self, column: usize) -> Result<Option<String>> {
        self.try_get(column).db()
    }

    fn int(&self, column: usize) -> Result<i64> {
        self.try_get(column).db()
    }

    fn opt_int(&self, column: usize) -> Result<Option<i64>> {
        self.try_get(column).db()
    }

    fn bytes(&self, column: usize) -> Result<Vec<u8>> {
        self.try_get(column).db()
    }
}
