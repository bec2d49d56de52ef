//! Storage: every line of SQL in the crate lives under this module.
//!
//! One interface, two backends. The rest of the crate sees only [`Store`] and the typed
//! methods of [`Conn`]; business rules never write SQL. What both backends share is
//! written once here: the target and options, the records the queries return
//! (`records.rs`), the column lists and row decoders (`rows.rs`), the outbox tables
//! (`outbox.rs`) and the one dispatch of every method of [`Conn`] to its backend.
//! Each backend has its own folder with the same files: `sqlite/` (a SQLite file) and
//! `postgres/` (a PostgreSQL server, feature `postgres`), each holding its statements in
//! `orders.rs`, `keys.rs`, `payments.rs` and `delivery.rs` and its connection handling
//! in `mod.rs`.
//!
//! State names in statements come from the enums that own them (bound as parameters or
//! built into the statement from `as_str()`), so renaming a state is one change in its
//! enum; the migrations' CHECK constraints are held to the same names by a test below.

mod outbox;
#[cfg(feature = "postgres")]
mod postgres;
mod records;
mod rows;
mod sqlite;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::delivery::{Outbox, WebhookAttempt};
use crate::environment::Environment;
use crate::error::Result;
#[cfg(not(feature = "postgres"))]
use crate::error::{Error, ErrorKind};
use crate::keys::{ApiKey, KeyStatus};
use crate::mail::Email;
use crate::orders::{Order, OrderStatus, OrderWithInvoice};
use crate::payments::{Event, Payment, PaymentState, Rate};
use crate::time::Timestamp;

pub(crate) use records::{
    AttemptResult, ClaimedEvent, DeliveryRow, KeyCredential, KeyRow, PriorCreate, SigningKey, WalletRow, WatchedInvoice,
};
pub use sqlite::{Checkpoint, SCHEMA_VERSION};

/// Runs `work`, which may block, from a drop: in place, except on a thread that drives
/// async tasks, where it runs on a short-lived thread of its own and is waited for (in
/// place if no thread can be started). The `postgres` crate blocks on a runtime of its own
/// for every call and to close a connection, which panics inside a tokio runtime, and a
/// host may drop the service anywhere, its async code included. A panic of `work` is
/// contained either way, so a drop calling this never panics itself.
///
/// In place otherwise, not always on a thread: a scoped thread gives the calling thread
/// std's thread handle, which outlives the call, and a C or Python host's main thread never
/// frees it (valgrind counts it as possibly lost at exit).
pub(crate) fn off_async_threads(work: impl FnOnce() + Send) {
    if !on_async_runtime() {
        let _contained = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        return;
    }
    // Kept here rather than moved into the thread, so that it can still run in place.
    let work = std::sync::Mutex::new(Some(work));
    let run = || {
        if let Some(work) = work.lock().unwrap_or_else(|p| p.into_inner()).take() {
            work();
        }
    };
    std::thread::scope(|scope| {
        match std::thread::Builder::new().name("coinorder-closing".into()).spawn_scoped(scope, run) {
            Ok(thread) => {
                let _ended = thread.join();
            }
            Err(_) => {
                let _contained = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
            }
        }
    });
}

/// True on a thread inside a tokio runtime, where blocking on another runtime panics.
/// Only the `postgres` crate does that, so without the `postgres` feature nothing here
/// needs to leave the thread it runs on.
#[cfg(feature = "postgres")]
fn on_async_runtime() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

/// See the `postgres` build of this function.
#[cfg(not(feature = "postgres"))]
fn on_async_runtime() -> bool {
    false
}

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
    /// Refuses a SQLite target that is not a file: an empty path, or SQLite's in-memory
    /// and URI names (`:memory:`, `file:...`). SQLite would open each of those as a
    /// database of one connection's own, so the writer and every reader would each see an
    /// empty database of their own (and an empty path a temporary one, lost at close).
    pub(crate) fn check(&self) -> Result<()> {
        let path = match self {
            StoreTarget::Sqlite(path) => path,
            #[cfg(feature = "postgres")]
            StoreTarget::Postgres(_) => return Ok(()),
            // Said first, before what else a PostgreSQL target would need (its key file).
            #[cfg(not(feature = "postgres"))]
            StoreTarget::Postgres(_) => return Err(no_postgres_support()),
        };
        let text = path.to_string_lossy();
        let rule = if text.trim().is_empty() {
            "must be a SQLite file path or a postgres:// URL, not empty"
        } else if text == ":memory:" || text.starts_with("file:") {
            "must be a SQLite file path or a postgres:// URL: an in-memory or URI database cannot be \
             shared by the service's connections (for a throwaway store, use a file in a temporary directory)"
        } else {
            return Ok(());
        };
        Err(crate::error::Error::invalid("target", rule))
    }

    /// True for a database server (a URL), false for a file.
    pub fn is_server(&self) -> bool {
        !matches!(self, StoreTarget::Sqlite(_))
    }
}

/// A PostgreSQL target in a build without the `postgres` feature.
#[cfg(not(feature = "postgres"))]
fn no_postgres_support() -> Error {
    Error::new(ErrorKind::Config(
        "this build of coinorder has no PostgreSQL support (cargo feature `postgres`); use a SQLite file path".into(),
    ))
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

/// Options for opening the database.
#[derive(Debug, Clone)]
pub(crate) struct StoreOptions {
    /// What only a SQLite file uses: durability, memory map and page cache.
    pub sqlite: crate::config::SqliteOptions,
    /// How long a write waits for another writer (SQLite's lock; PostgreSQL's lock
    /// timeout and retries).
    pub busy_timeout: Duration,
}

/// The database, on either backend.
#[derive(Debug)]
pub(crate) enum Store {
    /// A SQLite file.
    Sqlite(sqlite::OpenSqlite),
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

impl Store {
    /// Opens (creating and migrating if needed) the database at `target`.
    pub(crate) fn open(target: &StoreTarget, options: StoreOptions) -> Result<Store> {
        match target {
            StoreTarget::Sqlite(path) => {
                let background = options.sqlite.background_checkpoints;
                let store = sqlite::SqliteStore::open(path, options)?;
                Ok(Store::Sqlite(sqlite::OpenSqlite::new(store, background)?))
            }
            #[cfg(feature = "postgres")]
            StoreTarget::Postgres(url) => Ok(Store::Postgres(postgres::PgStore::open(url, &options)?)),
            #[cfg(not(feature = "postgres"))]
            StoreTarget::Postgres(_) => Err(no_postgres_support()),
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
    /// `SERIALIZABLE` a delivery's finish, which touches many events while orders keep
    /// writing new ones, was cancelled as a conflict again and again under load, and its
    /// results lost. On SQLite (one writer) it is [`Store::write`].
    pub(crate) fn write_outbox<T>(&self, work: impl FnMut(&Conn<'_>) -> Result<T>) -> Result<T> {
        match self {
            Store::Sqlite(store) => store.write(work),
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.write_with("BEGIN ISOLATION LEVEL READ COMMITTED", work),
        }
    }

    /// True while another write of this process waits for SQLite's one writer. Long
    /// background work (the expiry of a backlog) checks it between items and ends its
    /// transaction early, so API writes wait for one item rather than for a whole batch.
    /// Always false on PostgreSQL, where writes to different rows do not wait for each
    /// other.
    pub(crate) fn writer_wanted(&self) -> bool {
        match self {
            Store::Sqlite(store) => store.writer_wanted(),
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => false,
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

    /// A background checkpoint of SQLite's write-ahead log; `None` on PostgreSQL, whose
    /// server checkpoints by itself.
    pub(crate) fn checkpoint(&self) -> Result<Option<Checkpoint>> {
        match self {
            Store::Sqlite(store) => store.checkpoint().map(Some),
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => Ok(None),
        }
    }

    /// Runs `work` on a consistent read-only snapshot.
    pub(crate) fn read<T>(&self, work: impl FnOnce(&Conn<'_>) -> Result<T>) -> Result<T> {
        #[cfg(test)]
        READS_ON_THIS_THREAD.with(|reads| reads.set(reads.get() + 1));
        match self {
            Store::Sqlite(store) => store.read(work),
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => store.read(work),
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Read transactions this thread opened: lets a test count what one request costs.
    pub(crate) static READS_ON_THIS_THREAD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A connection (or an open transaction) with the crate's typed queries on it.
pub(crate) enum Conn<'a> {
    /// A SQLite connection or transaction.
    Sqlite(sqlite::SqliteConn<'a>),
    /// A PostgreSQL transaction.
    #[cfg(feature = "postgres")]
    Postgres(&'a postgres::PgConn),
}

/// A database crate's result as the crate's own: how each backend turns its errors into
/// a [`crate::error::StorageError`] without a `From` impl on [`crate::Error`], which
/// would make `rusqlite` and `postgres` part of the public API. Each backend implements
/// it for its crate's `Result` (`sqlite/mod.rs`, `postgres/mod.rs`).
trait DbResult<T> {
    /// The same result, its error converted (and classified busy or not) by the backend.
    fn db(self) -> Result<T>;
}

/// Writes each typed method of [`Conn`] as one hand-over to the method of the same name
/// and arguments on the backend's connection (`sqlite::SqliteConn`, `postgres::PgConn`).
/// The interface is declared once, here, with its documentation; a backend that lacks a
/// method, or has it with other types, fails to compile.
macro_rules! dispatch {
    ($($(#[$meta:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        impl Conn<'_> {
            $(
                $(#[$meta])*
                pub(crate) fn $name(&self $(, $arg: $ty)*) -> $ret {
                    match self {
                        Conn::Sqlite(conn) => conn.$name($($arg),*),
                        #[cfg(feature = "postgres")]
                        Conn::Postgres(conn) => conn.$name($($arg),*),
                    }
                }
            )*
        }
    };
}

dispatch! {
    // Orders and invoices (`orders.rs`).

    /// What an earlier Create Order with the same merchant reference stored, if any.
    fn prior_create(user_id: i64, environment: Environment, merchant_order_id: &str) -> Result<Option<PriorCreate>>;
    /// Inserts a new order and its invoice, with what idempotent replays of its create need.
    fn insert_order_with_invoice(created: &OrderWithInvoice, request_hash: &[u8], create_response: &str) -> Result<()>;
    /// The order with its invoice, only if it belongs to this merchant and environment.
    fn order_with_invoice(user_id: i64, environment: Environment, order_id: &str) -> Result<Option<OrderWithInvoice>>;
    /// The order with its invoice in `environment`, whoever owns it (host-level calls).
    /// In a write transaction on PostgreSQL it locks both rows: the read before a change.
    fn order_in_environment(environment: Environment, order_id: &str) -> Result<Option<OrderWithInvoice>>;
    /// Writes the state and received amounts of an order and its invoice.
    fn update_order_state(current: &OrderWithInvoice) -> Result<()>;
    /// Moves the quote deadline of every open (NEW, PENDING) invoice of `environment`
    /// `by_ms` earlier; how many moved.
    fn advance_open_deadlines(environment: Environment, by_ms: i64) -> Result<usize>;
    /// Orders of `environment` whose quote expired by `now` and that expiry would move:
    /// NEW ones, and PENDING ones with no counted payment still waiting to confirm.
    fn orders_due_for_expiry(environment: Environment, now: i64, limit: i64) -> Result<Vec<String>>;
    /// Whether any order of `environment` is due for expiry at `now` (as
    /// [`Conn::orders_due_for_expiry`] would find one), by one look at the expiry index:
    /// what every list asks first.
    fn any_order_due_for_expiry(environment: Environment, now: i64) -> Result<bool>;
    /// A page of the merchant's orders, newest first (created_at, then order_id, DESC).
    fn list_orders(user_id: i64, environment: Environment, status: Option<OrderStatus>, limit: i64, offset: i64) -> Result<Vec<Order>>;
    /// Orders of `environment` for the host, of any merchant or of `user_id`'s, in
    /// `status` if given, created at or after `since_ms`; newest first, at most `limit`.
    fn host_orders(environment: Environment, user_id: Option<i64>, status: Option<OrderStatus>, since_ms: i64, limit: i64) -> Result<Vec<Order>>;

    // API keys (`keys.rs`).

    /// Stores a new key.
    fn insert_key(row: &KeyRow) -> Result<()>;
    /// The key with that id, if any.
    fn key_by_id(id: &str) -> Result<Option<KeyRow>>;
    /// What authentication checks of the key whose secret hashes to `key_hash`, if any:
    /// how a request's key is found. On a pooled SQLite reader inside a read, the key is
    /// also remembered for [`Conn::cached_key`].
    fn key_by_hash(key_hash: &[u8]) -> Result<Option<KeyCredential>>;
    /// The key a pooled SQLite reader looked up by this hash before, without a statement,
    /// unchecked: only [`Conn::key_cache_current`] tells whether it still holds. `None` on
    /// other connections and on PostgreSQL.
    fn cached_key(key_hash: &[u8]) -> Option<KeyCredential>;
    /// True when this read's snapshot has started and no commit, from any connection or
    /// process, came between it and the snapshots the cached keys were read in: then
    /// every key [`Conn::cached_key`] returns is what a lookup would return now.
    fn key_cache_current() -> Result<bool>;
    /// Every key, oldest first (ties by id, in byte order).
    fn all_keys() -> Result<Vec<ApiKey>>;
    /// Returns false when no key has that id.
    fn set_key_status(id: &str, status: KeyStatus) -> Result<bool>;
    /// Returns false when no key has that id.
    fn set_key_webhook_url(id: &str, url: Option<&str>) -> Result<bool>;
    /// Sets or clears the key's display name; false when there is no such key.
    fn set_key_display_name(id: &str, name: Option<&str>) -> Result<bool>;
    /// Gives the key a new sealed secret; the one it replaces goes on signing until
    /// `keep_previous_until` (epoch ms), or stops at once for `None`, and any older one is
    /// dropped. Returns false when no key has that id.
    fn set_key_webhook_secret(id: &str, sealed: &str, keep_previous_until: Option<i64>) -> Result<bool>;
    /// Stamps the key's last use.
    fn touch_key(id: &str, now: Timestamp) -> Result<()>;
    /// Deletes the key, keeping only what signing its orders' pending webhooks needs.
    /// Returns false when no key has that id.
    fn delete_key(id: &str, now: Timestamp) -> Result<bool>;
    /// The webhook URL and sealed signing secrets of a live or deleted key.
    fn signing_key(id: &str) -> Result<Option<SigningKey>>;
    /// Up to `limit` sealed signing secrets of live or deleted keys: what tells at open
    /// whether the key file is the one they were sealed with.
    fn sealed_secrets(limit: i64) -> Result<Vec<String>>;

    // Payments, events and rates (`payments.rs`).

    /// The payment with that transaction id in `environment`, if any.
    fn payment_by_txid(environment: Environment, txid: &str) -> Result<Option<Payment>>;
    /// The order's payments, first seen first (ties by txid, in byte order).
    fn payments_for_order(order_id: &str) -> Result<Vec<Payment>>;
    /// Stores a newly seen payment.
    fn insert_payment(environment: Environment, payment: &Payment) -> Result<()>;
    /// Moves a payment to its final state.
    fn settle_payment(environment: Environment, txid: &str, state: PaymentState, at: Timestamp) -> Result<()>;
    /// Takes the order's next event number (1, 2, 3...): a write, so call it once per
    /// event, in the transaction that inserts that event.
    ///
    /// A counter on the order row rather than `MAX(sequence) + 1` over its events: with
    /// several writers two transactions could read the same maximum, while this UPDATE
    /// makes the second wait for the first's row lock and then see its number.
    fn take_event_sequence(order_id: &str) -> Result<i64>;
    /// Adds an event to the outbox (pending delivery).
    fn insert_event(event: &Event) -> Result<()>;
    /// The order's events in sequence order.
    fn events_for_order(order_id: &str) -> Result<Vec<Event>>;
    /// Events of `environment` created at or after `since_ms`, oldest first (then by
    /// id), at most `limit`.
    fn events_since(environment: Environment, since_ms: i64, limit: i64) -> Result<Vec<Event>>;
    /// The event with that id, if any.
    fn event_by_id(event_id: &str) -> Result<Option<Event>>;
    /// Sets a host rate, replacing the one for the same pair.
    fn upsert_rate(rate: &Rate) -> Result<()>;
    /// The host rate for the pair, if set.
    fn rate(environment: Environment, crypto: &str, fiat: &str) -> Result<Option<Rate>>;
    /// Every host rate of `environment`, by crypto, then fiat (byte order).
    fn rates(environment: Environment) -> Result<Vec<Rate>>;
    /// Returns false when there was no such rate.
    fn delete_rate(environment: Environment, crypto: &str, fiat: &str) -> Result<bool>;

    // The two outboxes, the webhook attempt log and the e-mails (`delivery.rs`).

    /// Leases up to `limit` due messages of `outbox` to `lease_token` until
    /// `lease_until`, counts the attempt, and returns their ids, earliest due first.
    ///
    /// In an ordered outbox (webhooks), a message whose order has an earlier one not yet
    /// attempted, or leased right now (its attempt may still be in flight in another
    /// worker or process), waits, so each order's messages are first attempted in
    /// sequence order however many deliverers run.
    ///
    /// Call it inside `Store::write` from a closure that does nothing but database work
    /// and returns what it found: a busy database makes `Store::write` run the closure
    /// again, and anything it did outside the transaction (counting, logging, sending)
    /// would then happen twice, while the first run's lease was rolled back.
    fn claim_due(outbox: Outbox, environment: Environment, now: Timestamp, lease_until: Timestamp, lease_token: &str, limit: i64) -> Result<Vec<String>>;
    /// When the earliest message of the outbox waiting for an attempt later than `now`
    /// comes due, if any: how long a delivery worker may sleep without being late.
    fn next_due_after(outbox: Outbox, environment: Environment, now: Timestamp) -> Result<Option<Timestamp>>;
    /// Records an attempt's outcome and releases the lease, if the attempt's lease token
    /// still holds it (a lease that ran out may have passed to another deliverer, whose
    /// record then stands). Returns whether it did.
    fn finish_attempt(result: &AttemptResult<'_>) -> Result<bool>;
    /// Moves the due times later than `now` of the outbox's waiting messages back by
    /// `by_ms`: the clock was set back by as much.
    fn move_outbox_times_back(outbox: Outbox, environment: Environment, now: Timestamp, by_ms: i64) -> Result<()>;
    /// Gives back the lease `lease_token` holds on a message whose attempt was never
    /// made, uncounting that attempt. Returns whether the token still held it.
    fn release_unattempted(outbox: Outbox, message_id: &str, lease_token: &str) -> Result<bool>;
    /// Puts a message back in its outbox, due now, with a fresh schedule. A lease held
    /// right now is kept: the attempt in flight finishes before anyone sends it again,
    /// and its finish then leaves the message pending and due as requeued.
    fn requeue(outbox: Outbox, message_id: &str, now: Timestamp) -> Result<bool>;
    /// A claimed event with what sending it needs: its payload and its order's webhook
    /// URL and key.
    fn claimed_event(event_id: &str) -> Result<ClaimedEvent>;
    /// Logs one webhook request (an attempt that found no target made none).
    fn log_webhook_attempt(event_id: &str, log: &WebhookAttempt) -> Result<()>;
    /// The delivery columns of the order's events, in sequence order.
    fn delivery_rows(order_id: &str) -> Result<Vec<DeliveryRow>>;
    /// The logged requests of one event's webhook, oldest first.
    fn attempts_for_event(event_id: &str) -> Result<Vec<WebhookAttempt>>;
    /// Orders of `environment` that have events, newest event first.
    fn orders_with_events(environment: Environment, limit: i64) -> Result<Vec<String>>;
    /// Adds a payment-link e-mail to the outbox, pending and due at its creation.
    fn insert_email(environment: Environment, email: &Email) -> Result<()>;
    /// One e-mail by id (a claimed one: its `attempts` counts the attempt just leased).
    fn email(email_id: &str) -> Result<Email>;
    /// The newest e-mails of `environment`, of one order or of all.
    fn emails(environment: Environment, order_id: Option<&str>, limit: i64) -> Result<Vec<Email>>;

    // Watch-only wallets and the chain watcher's bookkeeping (`wallets.rs`).

    /// Sets (or replaces) the wallet of `coin`, and makes sure its key has an index counter.
    fn upsert_wallet(environment: Environment, coin: &str, descriptor: &str, account_id: &str, now: Timestamp) -> Result<()>;
    /// Every wallet of `environment`, by coin.
    fn wallets(environment: Environment) -> Result<Vec<WalletRow>>;
    /// The account ids of every key counter of `environment`, also of keys no wallet uses
    /// any more.
    fn wallet_account_ids(environment: Environment) -> Result<Vec<String>>;
    /// The wallet of `coin`, if set.
    fn wallet(environment: Environment, coin: &str) -> Result<Option<WalletRow>>;
    /// Removes the wallet of `coin` (its key's counter stays); false when there was none.
    fn delete_wallet(environment: Environment, coin: &str) -> Result<bool>;
    /// Takes the key's next derivation index: a write on the counter's row, so call it in
    /// the transaction that stores the invoice. Concurrent creates wait for each other's
    /// row lock (or SQLite's one writer), so indexes are never reused, and a rolled-back
    /// create gives its index back, so none is skipped.
    fn take_derivation_index(environment: Environment, account_id: &str) -> Result<i64>;
    /// Invoices with a derived address that may still be paid: NEW and PENDING ones, and
    /// any whose quote ended at or after `late_since_ms` (a payment then is recorded for
    /// the merchant to see); oldest quote first, all of them.
    fn watched_invoices(environment: Environment, late_since_ms: i64) -> Result<Vec<WatchedInvoice>>;
    /// Unconfirmed payments toward invoices with a derived address, first seen first
    /// (then by id, in byte order), all of them.
    fn watched_unconfirmed_payments(environment: Environment) -> Result<Vec<Payment>>;
    /// Marks a rejected payment as rejected by the chain watcher because it vanished from
    /// the chain (nothing for one in another state).
    fn mark_payment_vanished(environment: Environment, txid: &str) -> Result<()>;
    /// Whether the payment is one [`Conn::mark_payment_vanished`] marked.
    fn payment_vanished(environment: Environment, txid: &str) -> Result<bool>;
    /// The next block the watcher of `chain` scans, if it has run before.
    fn chain_cursor(environment: Environment, chain: &str) -> Result<Option<i64>>;
    /// Stores the next block the watcher of `chain` scans.
    fn set_chain_cursor(environment: Environment, chain: &str, next_block: i64) -> Result<()>;
}

#[cfg(test)]
impl Conn<'_> {
    /// The SQLite connection, for tests that write raw SQL.
    pub(crate) fn sqlite_for_test(&self) -> &rusqlite::Connection {
        match self {
            Conn::Sqlite(conn) => conn.connection(),
            #[cfg(feature = "postgres")]
            Conn::Postgres(_) => panic!("a SQLite test got a PostgreSQL connection"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::delivery::DeliveryState;
    use crate::environment::Environment;
    use crate::keys::KeyStatus;
    use crate::mail::EmailState;
    use crate::payments::PaymentState;

    /// Every name of an enum, from a match that lists every variant: a new variant fails
    /// to compile here until it is added, so the check below cannot miss it.
    macro_rules! names {
        ($enum:ident: $($variant:ident),+) => {{
            fn exhaustive(value: $enum) {
                match value {
                    $($enum::$variant)|+ => {}
                }
            }
            let _ = exhaustive;
            vec![$($enum::$variant.as_str()),+]
        }};
    }

    /// The quoted names of every `CHECK (column IN (...))` in `sql`, by `table.column`,
    /// whether the column came with its `CREATE TABLE` or a later `ALTER TABLE`.
    fn check_constraints(sql: &str) -> BTreeMap<String, Vec<String>> {
        let code: String = sql.lines().map(|line| line.split("--").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
        let mut found = BTreeMap::new();
        for statement in code.split(';') {
            let words: Vec<&str> = statement.split_whitespace().collect();
            let table = match words.as_slice() {
                ["CREATE", "TABLE", table, ..] | ["ALTER", "TABLE", table, ..] => table.to_string(),
                _ => continue,
            };
            let mut rest = statement;
            while let Some(at) = rest.find("CHECK (") {
                rest = &rest[at + "CHECK (".len()..];
                // Only `CHECK (column IN (...))`; other checks (none today) name no states.
                let Some((column, list)) = rest.split_once(" IN (") else { continue };
                if !column.trim().chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    continue;
                }
                let list = list.split(')').next().unwrap_or("");
                let names = list.split(',').map(|name| name.trim().trim_matches('\'').to_string()).collect();
                found.insert(format!("{table}.{}", column.trim()), names);
            }
        }
        found
    }

    #[test]
    fn every_state_name_is_in_the_check_constraints_of_both_backends() {
        let environments = names!(Environment: Sandbox, Live);
        let expected: Vec<(&str, Vec<&str>)> = vec![
            ("api_keys.status", names!(KeyStatus: Active, Inactive)),
            ("payments.state", names!(PaymentState: Unconfirmed, Confirmed, Rejected)),
            ("events.delivery_state", names!(DeliveryState: Pending, Delivered, Failed, NoTarget)),
            ("emails.state", names!(EmailState: Pending, Sent, Failed)),
            ("api_keys.environment", environments.clone()),
            ("orders.environment", environments.clone()),
            ("payments.environment", environments.clone()),
            ("events.environment", environments.clone()),
            ("rates.environment", environments.clone()),
            ("emails.environment", environments.clone()),
            ("retired_keys.environment", environments.clone()),
            ("wallets.environment", environments.clone()),
            ("wallet_accounts.environment", environments.clone()),
            ("chain_cursors.environment", environments),
        ];
        let backends = [
            ("sqlite", super::sqlite::MIGRATIONS.concat()),
            #[cfg(feature = "postgres")]
            ("postgres", super::postgres::MIGRATIONS.concat()),
        ];
        for (backend, sql) in &backends {
            let checks = check_constraints(sql);
            for (column, names) in &expected {
                let mut want: Vec<&str> = names.clone();
                let mut have: Vec<&str> =
                    checks.get(*column).map(|v| v.iter().map(String::as_str).collect()).unwrap_or_default();
                want.sort_unstable();
                have.sort_unstable();
                assert_eq!(have, want, "{backend}: CHECK of {column}");
            }
            // Every constrained column is one the enums above speak for: a new CHECK
            // gets its enum listed here.
            for column in checks.keys() {
                assert!(expected.iter().any(|(name, _)| name == column), "{backend}: {column} has no enum above");
            }
        }
    }
}
