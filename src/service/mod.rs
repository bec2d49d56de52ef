//! [`Service`]: the typed API of the order service over one SQLite file.

mod admitted;
mod chain;
mod emails;
mod payments;
mod quotes;
mod wallets;
mod webhooks;
pub use chain::{ChainWatchReport, MISSING_FOR, MISSING_PASSES};
pub use webhooks::{EventFollower, SignedWebhook};

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use crate::addresses::{self, DepositAddress};
use crate::config::Config;
use crate::environment::Environment;
use crate::error::{Error, ErrorKind, Result, StorageError};
use crate::ids::time_ordered_id;
use crate::keys::{self, ApiKey, CreatedApiKey, KeyStatus, Merchant, NewApiKey, SecretString, DISPLAY_NAME_MAX_CHARS};
use crate::mail;
use crate::money;
use crate::orders::{
    self, CreateOrder, CreatedOrder, Invoice, ListOrders, Order, OrderPage, OrderStatus, OrderWithInvoice,
};
use crate::rate_limit::RateLimiter;
use crate::render;
use crate::secrets::SecretBox;
use crate::storage::{Conn, KeyCredential, KeyRow, PriorCreate, Store, StoreOptions, StoreTarget};
use crate::time::Timestamp;

/// How often a key's `last_used_at` is written at most: often enough to tell an unused
/// key, rarely enough that reads stay reads.
const LAST_USED_RESOLUTION_MS: i64 = 60_000;

/// Digits of the time prefix of [`generated_merchant_order_id`], in ASCII order so that
/// the text sorts as the number does.
const ORDERED_BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A `merchant_order_id` for a create that brought none (DESIGN §4: `ord_` + 24 base62):
/// the creation time in milliseconds as 8 base62 digits (enough until the year 8900),
/// then 16 random ones (95 bits). Like order ids ([`time_ordered_id`]), later ids sort
/// later, so each lands at the right edge of the `(user_id, environment,
/// merchant_order_id)` unique index instead of on a random page of it, which at a million
/// orders is a page read from the file and written to the log per create.
fn generated_merchant_order_id(now: Timestamp) -> String {
    let mut ms = u64::try_from(now.as_millis()).unwrap_or(0);
    let mut stamp = [b'0'; 8];
    for digit in stamp.iter_mut().rev() {
        *digit = ORDERED_BASE62[(ms % 62) as usize];
        ms /= 62;
    }
    let mut id = String::with_capacity(28);
    id.push_str("ord_");
    id.extend(stamp.iter().map(|&digit| char::from(digit)));
    id.push_str(&keys::random_id(16));
    id
}

/// Whether the stored key is still exactly `key` (when there is one to confirm), read in
/// the caller's transaction.
fn key_unchanged(db: &Conn<'_>, key: Option<&KeyCredential>) -> Result<bool> {
    match key {
        Some(key) => Ok(db.key_by_hash(&key.key_hash)?.as_ref() == Some(key)),
        None => Ok(true),
    }
}

/// Writes each key's last use, in the caller's transaction.
fn touch_keys(db: &Conn<'_>, uses: &HashMap<String, Timestamp>) -> Result<()> {
    for (key_id, at) in uses {
        db.touch_key(key_id, *at)?;
    }
    Ok(())
}

/// The order service for one environment, over one SQLite file.
///
/// `Service` is `Send + Sync`: open it once and share it (`&Service` or `Arc<Service>`)
/// across threads. Several processes may open the same file at once.
#[derive(Debug)]
pub struct Service {
    config: Config,
    pub(crate) store: Store,
    pub(crate) secrets: SecretBox,
    /// One keep-alive HTTP agent for every webhook.
    pub(crate) http: ureq::Agent,
    /// The path of `payment_page_url` where the page is served besides `/pay`, worked
    /// out once at open rather than on every request.
    pub(crate) page_path: Option<String>,
    /// `payment_page_url` parsed once at open: every create builds a payment URL from it.
    payment_page: Option<url::Url>,
    rate_limiter: RateLimiter,
    /// Failed authentications per client address.
    auth_failures: RateLimiter<std::net::IpAddr>,
    /// Last `last_used_at` written per key id, to keep authentication read-only.
    last_used_written: Mutex<HashMap<String, i64>>,
    /// Key uses a request could not write because the writer was busy, latest per key,
    /// until a later write takes them ([`Service::record_key_uses`]).
    unwritten_key_uses: Mutex<HashMap<String, Timestamp>>,
    /// Watch-only wallets parsed once per process.
    wallets: wallets::WalletCache,
    /// The rate table's rows as this service last read them, for quotes.
    rate_memo: quotes::RateMemo,
    /// Keys admitted before, for creates that confirm them in their own write.
    admitted_keys: admitted::AdmittedKeys,
    /// The chain watcher's backoff and missing-transaction counts.
    chain_state: chain::WatchState,
    /// The latest clock reading each outbox's delivery runs saw (webhooks, e-mails):
    /// what tells that the clock was set back ([`Service::follow_clock_set_back`]).
    outbox_clock_ms: [std::sync::atomic::AtomicI64; 2],
}

/// An order id in the form it is stored in (lower-case hyphenated UUID), whatever form
/// of the same UUID the caller sent; anything else is an unknown order.
pub(crate) fn canonical_order_id(order_id: &str) -> Result<String> {
    uuid::Uuid::parse_str(order_id.trim())
        .map(|id| id.hyphenated().to_string())
        .map_err(|_| Error::new(ErrorKind::OrderNotFound))
}

/// How many times a create quotes when the rate table keeps changing under it.
const QUOTE_ATTEMPTS: u32 = 4;

/// How a create's write transaction ended.
enum Attempt {
    /// The order was stored; with the invoice as a wallet completed it, if one did.
    Stored(Option<Box<CreatedOrder>>),
    /// An order with this `merchant_order_id` exists: nothing was written.
    Prior(PriorCreate),
    /// The rate table no longer gives the quoted rate: nothing was written.
    RateMoved,
    /// The key to confirm is no longer the stored one: nothing was written.
    KeyChanged,
}

/// The environment variable naming the secret key file when a PostgreSQL service's
/// config does not (DESIGN §11).
pub const SECRET_KEY_FILE_VARIABLE: &str = "COINORDER_SECRET_KEY_FILE";

/// Dropping the service writes the key uses that requests could not write because the
/// writer was busy ([`Service::record_key_uses`]), so a host that closes it (a Rust drop,
/// Python's `close()`, C's `coinorder_service_close`) loses none. It waits for the writer as any
/// write does, up to `busy_timeout`; a failure cannot be reported from here, so a host
/// that wants to know calls `record_key_uses` first.
///
/// The write runs on a thread of its own (`storage::off_async_threads`): a host may drop
/// the service anywhere, a tokio task included.
impl Drop for Service {
    fn drop(&mut self) {
        let kept = !self.unwritten_key_uses.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
        if kept {
            crate::storage::off_async_threads(|| {
                let _unreportable = self.record_key_uses();
            });
        }
    }
}

impl Service {
    /// Opens (creating and migrating if needed) the database at `target` and serves
    /// `config.environment` from it.
    ///
    /// `target` is a SQLite file path, or a PostgreSQL URL (`postgres://user@host/db`,
    /// `postgresql://...`, with `sslmode` in the URL; cargo feature `postgres`) for several
    /// processes and hosts on one database (DESIGN §11).
    ///
    /// Webhook signing secrets are encrypted with a key kept in `config.secret_key_path`:
    /// on SQLite by default `<path>.key`, created on first use; on PostgreSQL the file must
    /// be given (in the config, or else in the environment variable
    /// `COINORDER_SECRET_KEY_FILE`, so that the same deployment setting serves the CLI and
    /// every binding) and must exist, since every host has to use the same key (create it
    /// once with `head -c 32 /dev/urandom | base64 > FILE`).
    pub fn open(target: impl AsRef<Path>, config: Config) -> Result<Service> {
        config.validate()?;
        let target = StoreTarget::parse(target.as_ref());
        target.check()?;
        let from_environment = match (&target, &config.secret_key_path) {
            (StoreTarget::Postgres(_), None) => std::env::var_os(SECRET_KEY_FILE_VARIABLE)
                .filter(|value| !value.is_empty())
                .map(std::path::PathBuf::from),
            _ => None,
        };
        let key_path = match (&target, config.secret_key_path.as_ref().or(from_environment.as_ref())) {
            (StoreTarget::Sqlite(path), _) => config.secret_key_path_for(path),
            // The host left out a setting a PostgreSQL target needs: named like any other
            // missing parameter, not a server error.
            (StoreTarget::Postgres(_), None) => {
                return Err(Error::invalid(
                    "secret_key_file",
                    "a PostgreSQL database needs the secret key file every host shares: set it (or \
                     COINORDER_SECRET_KEY_FILE, --secret-key-file); create it once with \
                     `head -c 32 /dev/urandom | base64 > FILE`",
                ))
            }
            (StoreTarget::Postgres(_), Some(path)) if !path.exists() => {
                return Err(Error::invalid(
                    "secret_key_file",
                    format!(
                        "{} does not exist: with PostgreSQL every host must use the same one, so coinorder \
                         never creates it; create it once with `head -c 32 /dev/urandom | base64 > {}`",
                        path.display(),
                        path.display()
                    ),
                ))
            }
            (StoreTarget::Postgres(_), Some(path)) => path.clone(),
        };
        let store = Store::open(&target, StoreOptions { sqlite: config.sqlite, busy_timeout: config.busy_timeout })?;
        let secrets = Self::open_key_file(&store, &key_path)?;
        Ok(Service {
            http: crate::delivery::http_agent(
                config.webhook_timeout,
                config.delivery_concurrency,
                config.environment == Environment::Live && !config.allow_private_webhook_targets,
            ),
            page_path: crate::config::configured_page_path(&config.payment_page_url),
            payment_page: url::Url::parse(&config.payment_page_url).ok(),
            rate_limiter: RateLimiter::new(config.rate_limit),
            auth_failures: RateLimiter::new(config.failed_auth_limit),
            config,
            store,
            secrets,
            last_used_written: Mutex::new(HashMap::new()),
            unwritten_key_uses: Mutex::new(HashMap::new()),
            wallets: wallets::WalletCache::default(),
            rate_memo: quotes::RateMemo::default(),
            admitted_keys: admitted::AdmittedKeys::default(),
            chain_state: chain::WatchState::default(),
            outbox_clock_ms: Default::default(),
        })
    }

    /// The key file that opens `store`'s webhook secrets: created when missing only while
    /// the database holds none. A new key could not read the secrets already sealed, so
    /// every webhook of their keys would fail at its first attempt, long after the open
    /// that could have said why: a missing or another database's key file is refused here.
    fn open_key_file(store: &Store, path: &Path) -> Result<SecretBox> {
        /// Secrets tried at open: enough for any store's keys, cheap to decrypt.
        const CHECKED: i64 = 1_000;
        let sealed = store.read(|db| db.sealed_secrets(CHECKED))?;
        if !sealed.is_empty() && !path.exists() {
            return Err(Error::new(ErrorKind::SecretStore(format!(
                "the key file {} is missing, but this database holds webhook secrets sealed with one: \
                 restore the key file backed up with the database, or name it (secret_key_file, \
                 --secret-key-file); a new key could not read them",
                path.display()
            ))));
        }
        let secrets = SecretBox::open_or_create(path)?;
        if !sealed.is_empty() && !sealed.iter().any(|one| secrets.open(one).is_ok()) {
            return Err(Error::new(ErrorKind::SecretStore(format!(
                "the key file {} opens none of this database's webhook secrets: it belongs to another \
                 database or was replaced; use the key file made with this database",
                path.display()
            ))));
        }
        Ok(secrets)
    }

    /// The configuration the service runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// True when a read never waits on a lock or the network (a SQLite file in WAL
    /// mode): such reads may run on a thread that must not block, as the HTTP server's
    /// runtime threads do. A PostgreSQL read is a round trip to the server.
    pub fn reads_are_local(&self) -> bool {
        self.store.is_local()
    }

    /// Copies SQLite's write-ahead log back into the database file, mostly without
    /// holding up any request (passive checkpoints; the last few pages are copied between
    /// two write transactions, a millisecond or so), so that the next write starts the log
    /// over. A SQLite service already runs this on a thread of its own, every 500 ms and
    /// whenever a commit leaves 4,000 pages of log
    /// ([`crate::SqliteOptions::background_checkpoints`]); call it yourself only with that
    /// turned off. Without any checkpoints, every thousandth page or so a committing write
    /// does this itself, and pays for it in latency. The first call hands checkpoints to
    /// the caller for good (a commit then checkpoints only past 16,384 pages of log,
    /// 32 MiB on a new file), so call it every second or so from then on, or run
    /// [`Service::start_checkpoint_worker`].
    /// `None` on PostgreSQL.
    pub fn checkpoint(&self) -> Result<Option<crate::Checkpoint>> {
        self.store.checkpoint()
    }

    /// The environment this service serves.
    pub fn environment(&self) -> Environment {
        self.config.environment
    }

    /// The current time on the service's clock ([`Config::clock`]).
    pub fn now(&self) -> Timestamp {
        Timestamp(self.config.clock.now_ms())
    }

    // ----- API keys (the spec's Merchant Portal) -----

    /// Creates a key for `new.user_id` in `new.environment` (any environment, whatever
    /// the service's own). The plain key and signing secret are returned only here.
    pub fn create_key(&self, new: NewApiKey) -> Result<CreatedApiKey> {
        if new.user_id < 0 {
            return Err(keys::user_id_refused(false));
        }
        let webhook_url = orders::check_url("webhook_url", new.webhook_url.as_deref())?;
        if let Some(url) = &webhook_url {
            self.check_webhook_target(new.environment, url)?;
        }
        let plain_key = keys::generate_key(new.environment);
        let webhook_secret = keys::generate_webhook_secret();
        let key = ApiKey {
            id: keys::generate_key_id(),
            user_id: new.user_id,
            environment: new.environment,
            status: KeyStatus::Active,
            webhook_url,
            key_hint: keys::key_hint(plain_key.expose()),
            created_at_ms: self.now(),
            last_used_at_ms: None,
            display_name: None,
        };
        let row = KeyRow {
            key: key.clone(),
            key_hash: keys::hash_key(plain_key.expose()).to_vec(),
            webhook_secret_enc: self.secrets.seal(&webhook_secret)?,
        };
        self.store.write(|db| db.insert_key(&row))?;
        Ok(CreatedApiKey { key, plain_key, webhook_secret })
    }

    /// Every key of every environment, oldest first. Never includes plain keys or secrets.
    pub fn list_keys(&self) -> Result<Vec<ApiKey>> {
        self.store.read(|db| db.all_keys())
    }

    /// One key by id.
    pub fn get_key(&self, id: &str) -> Result<ApiKey> {
        self.store.read(|db| db.key_by_id(id))?.map(|row| row.key).ok_or_else(|| keys::key_not_found(id))
    }

    fn update_key(&self, id: &str, change: impl Fn(&crate::storage::Conn<'_>) -> Result<bool>) -> Result<ApiKey> {
        if !self.store.write(|db| change(db))? {
            return Err(keys::key_not_found(id));
        }
        self.get_key(id)
    }

    /// Makes the key valid for requests again.
    pub fn activate_key(&self, id: &str) -> Result<ApiKey> {
        self.update_key(id, |db| db.set_key_status(id, KeyStatus::Active))
    }

    /// Disables the key: every request with it is rejected with `AUTHENTICATION_FAILED`.
    pub fn deactivate_key(&self, id: &str) -> Result<ApiKey> {
        self.update_key(id, |db| db.set_key_status(id, KeyStatus::Inactive))
    }

    /// Sets (`Some`) or clears (`None`) the key's default webhook URL.
    pub fn set_key_webhook_url(&self, id: &str, url: Option<&str>) -> Result<ApiKey> {
        let url = orders::check_url("webhook_url", url)?;
        if let Some(url) = &url {
            self.check_webhook_target(self.get_key(id)?.environment, url)?;
        }
        self.update_key(id, |db| db.set_key_webhook_url(id, url.as_deref()))
    }

    /// Sets the merchant's name the payment page shows above the titles of this key's
    /// orders (1 to [`DISPLAY_NAME_MAX_CHARS`] characters, no control characters), or
    /// clears it with `None`.
    pub fn set_key_display_name(&self, id: &str, name: Option<&str>) -> Result<ApiKey> {
        let name = match name.map(str::trim) {
            None => None,
            Some("") => return Err(Error::invalid("display_name", "must not be empty (clear it instead)")),
            Some(name) if name.chars().count() > DISPLAY_NAME_MAX_CHARS => {
                return Err(Error::invalid("display_name", format!("at most {DISPLAY_NAME_MAX_CHARS} characters")))
            }
            Some(name) if name.chars().any(char::is_control) => {
                return Err(Error::invalid("display_name", "must not contain control characters"))
            }
            Some(name) => Some(name.to_string()),
        };
        self.update_key(id, |db| db.set_key_display_name(id, name.as_deref()))
    }

    /// Live webhooks may not target loopback, private or link-local addresses (DESIGN §7)
    /// unless the configuration allows them: refused up front, not only at dispatch.
    fn check_webhook_target(&self, environment: Environment, url: &str) -> Result<()> {
        if environment != Environment::Live || self.config.allow_private_webhook_targets {
            return Ok(());
        }
        match crate::delivery::private_target_reason(url) {
            Some(reason) => Err(Error::invalid("webhook_url", reason)),
            None => Ok(()),
        }
    }

    /// Deletes the key for good: requests with it fail with 401 at once. Events of its
    /// orders are still signed with its last secret and delivered (to the order's
    /// webhook URL, else the key's last one).
    pub fn delete_key(&self, id: &str) -> Result<()> {
        let now = self.now();
        if self.store.write(|db| db.delete_key(id, now))? {
            Ok(())
        } else {
            Err(keys::key_not_found(id))
        }
    }

    /// The key's current webhook signing secret (`whsec_...`).
    pub fn key_webhook_secret(&self, id: &str) -> Result<SecretString> {
        let row = self.store.read(|db| db.key_by_id(id))?.ok_or_else(|| keys::key_not_found(id))?;
        self.secrets.open(&row.webhook_secret_enc)
    }

    /// Replaces the key's webhook signing secret and returns the new one.
    pub fn rotate_key_webhook_secret(&self, id: &str) -> Result<SecretString> {
        Ok(self.rotate_key_webhook_secret_keeping_old(id, std::time::Duration::ZERO)?.secret)
    }

    /// Gives a key a new webhook signing secret, as
    /// [`Service::rotate_key_webhook_secret`], while the replaced one goes on signing
    /// for `keep_old_for` (at most [`keys::MAX_SECRET_OVERLAP`]): until then every
    /// delivery, retries of earlier events too, carries two signatures
    /// (`webhook-signature: v1,<new> v1,<old>`), so a receiver still checking with the old
    /// secret accepts them, and one switched to the new secret does as well. A zero
    /// `keep_old_for` is the hard cut. Another rotation ends the overlap of the one
    /// before (only the secret it replaces can go on signing), and deleting the key
    /// ends it too.
    pub fn rotate_key_webhook_secret_keeping_old(
        &self,
        id: &str,
        keep_old_for: std::time::Duration,
    ) -> Result<keys::RotatedSecret> {
        if keep_old_for > keys::MAX_SECRET_OVERLAP {
            return Err(Error::invalid(
                "keep_old_for",
                format!("at most {} seconds (30 days)", keys::MAX_SECRET_OVERLAP.as_secs()),
            ));
        }
        let keep_ms = i64::try_from(keep_old_for.as_millis()).unwrap_or(i64::MAX);
        let until = (!keep_old_for.is_zero()).then(|| self.now().plus_ms(keep_ms));
        let secret = keys::generate_webhook_secret();
        let sealed = self.secrets.seal(&secret)?;
        let until_ms = until.map(Timestamp::as_millis);
        if self.store.write(|db| db.set_key_webhook_secret(id, &sealed, until_ms))? {
            Ok(keys::RotatedSecret { secret, old_secret_signs_until: until })
        } else {
            Err(keys::key_not_found(id))
        }
    }

    /// Checks an `x-api-key` value (spec §5, DESIGN §3) and the key's rate limit.
    ///
    /// Missing, empty or inactive → `AUTHENTICATION_FAILED`; unknown, deleted, malformed
    /// or of the other environment → `Unauthorized`; over the rate → `API_LIMIT_EXCEEDED`.
    pub fn authenticate(&self, api_key: Option<&str>) -> Result<Merchant> {
        self.authenticate_client(None, api_key)
    }

    /// [`Service::authenticate`] for a request from `client`: an address whose failed
    /// authentications used up [`Config::failed_auth_limit`] is refused before its key is
    /// looked at. `None` (a caller that does not know the address) skips the limit.
    pub fn authenticate_client(&self, client: Option<std::net::IpAddr>, api_key: Option<&str>) -> Result<Merchant> {
        self.read_as(client, api_key, |_| Ok(())).map(|(merchant, ())| merchant)
    }

    /// Authenticates `api_key` (as [`Service::authenticate_client`]) and runs `work` on the
    /// merchant's data in the same read snapshot: one transaction for the key and the
    /// read, the way the wire layer answers `GET /v1/orders...`.
    pub(crate) fn read_as<T>(
        &self,
        client: Option<std::net::IpAddr>,
        api_key: Option<&str>,
        work: impl Fn(&MerchantReads<'_, '_>) -> Result<T>,
    ) -> Result<(Merchant, T)> {
        let now = self.now();
        self.failed_auths_allow(client, now)?;
        let outcome = self.presented_key_hash(api_key).and_then(|hash| {
            self.store.read(|db| {
                // A key this reader looked up before is admitted as it was then, and the
                // read runs at once; the key is confirmed after it, in the same snapshot:
                // by the data version when no commit came since (no statement), else by a
                // lookup. A refusal, or a key that changed, is decided by a fresh lookup
                // (the one just made, when there was one).
                let mut looked_up = None;
                if let Some(cached) = db.cached_key(&hash) {
                    if let Ok(merchant) = self.admit_key(Some(cached.clone()), &hash, now) {
                        let value = work(&MerchantReads { merchant: &merchant, db });
                        if db.key_cache_current()? {
                            return Ok((merchant, value?));
                        }
                        let stored = db.key_by_hash(&hash)?;
                        if stored.as_ref() == Some(&cached) {
                            return Ok((merchant, value?));
                        }
                        looked_up = Some(stored);
                    }
                }
                let stored = match looked_up {
                    Some(stored) => stored,
                    None => db.key_by_hash(&hash)?,
                };
                let merchant = self.admit_key(stored, &hash, now)?;
                let value = work(&MerchantReads { merchant: &merchant, db })?;
                Ok((merchant, value))
            })
        });
        match &outcome {
            Ok((merchant, _)) => self.note_key_used(&merchant.key_id, now)?,
            Err(error) if matches!(error.kind(), ErrorKind::AuthenticationFailed(_) | ErrorKind::Unauthorized) => {
                if let Some(address) = &client {
                    // Charged after the fact: only failures spend the address's budget.
                    let _ = self.auth_failures.try_acquire(address, now.as_millis());
                }
            }
            Err(_) => {}
        }
        outcome
    }

    /// Refuses a client whose failed authentications used up [`Config::failed_auth_limit`].
    fn failed_auths_allow(&self, client: Option<std::net::IpAddr>, now: Timestamp) -> Result<()> {
        match &client {
            Some(address) => self.auth_failures.check(address, now.as_millis()).map_err(|wait_ms| {
                Error::new(ErrorKind::RateLimited { retry_after_secs: wait_ms.div_ceil(1000).max(1) })
            }),
            None => Ok(()),
        }
    }

    /// The hash to look a presented key up by, or why it cannot be one of this service's.
    fn presented_key_hash(&self, api_key: Option<&str>) -> Result<[u8; 32]> {
        // ASCII white space only (a key read from a file keeps its newline; HTTP trims
        // spaces and tabs): a key padded with other characters is malformed.
        let presented = api_key.map(str::trim_ascii).unwrap_or("");
        if presented.is_empty() {
            return Err(Error::new(ErrorKind::AuthenticationFailed("Authentication token is not set or expired")));
        }
        if keys::key_environment(presented) != Some(self.environment()) {
            return Err(Error::new(ErrorKind::Unauthorized));
        }
        Ok(keys::hash_key(presented))
    }

    /// The merchant behind a stored key found by `hash`, once the key is active, of this
    /// environment and within its rate.
    fn admit_key(&self, row: Option<KeyCredential>, hash: &[u8], now: Timestamp) -> Result<Merchant> {
        let row = row.ok_or_else(|| Error::new(ErrorKind::Unauthorized))?;
        if !keys::hashes_match(&row.key_hash, hash) || row.environment != self.environment() {
            return Err(Error::new(ErrorKind::Unauthorized));
        }
        if row.status != KeyStatus::Active {
            return Err(Error::new(ErrorKind::AuthenticationFailed("API key is inactive")));
        }
        if let Err(wait_ms) = self.rate_limiter.try_acquire(row.id.as_str(), now.as_millis()) {
            // Retry-After speaks in whole seconds: round up, so a client that waits that
            // long is not refused again.
            let retry_after_secs = wait_ms.div_ceil(1000).max(1);
            return Err(Error::new(ErrorKind::RateLimited { retry_after_secs }));
        }
        Ok(Merchant { key_id: row.id, user_id: row.user_id, environment: row.environment })
    }

    fn note_key_used(&self, key_id: &str, now: Timestamp) -> Result<()> {
        {
            let mut written = self.last_used_written.lock().unwrap_or_else(|p| p.into_inner());
            match written.get(key_id) {
                Some(at) if now.as_millis() - at < LAST_USED_RESOLUTION_MS => return Ok(()),
                _ => written.insert(key_id.to_string(), now.as_millis()),
            };
        }
        // Bookkeeping, not the request's work: a read must never wait for the write lock
        // (another process may hold it for seconds). When the lock is taken, the use is
        // kept to be written with the next one, or by `record_key_uses`.
        let mut uses = std::mem::take(&mut *self.unwritten_key_uses.lock().unwrap_or_else(|p| p.into_inner()));
        uses.insert(key_id.to_string(), now);
        let written = self.store.try_write(|db| touch_keys(db, &uses));
        if !matches!(written, Ok(Some(()))) {
            self.last_used_written.lock().unwrap_or_else(|p| p.into_inner()).remove(key_id);
            self.keep_unwritten_key_uses(uses);
        }
        written.map(|_| ())
    }

    /// Puts key uses not yet written back with those noted since, keeping the latest
    /// time per key.
    fn keep_unwritten_key_uses(&self, uses: HashMap<String, Timestamp>) {
        let mut unwritten = self.unwritten_key_uses.lock().unwrap_or_else(|p| p.into_inner());
        for (key, at) in uses {
            let latest = unwritten.entry(key).or_insert(at);
            *latest = (*latest).max(at);
        }
    }

    /// Writes the keys' last-use times (`last_used_at`) that requests could not write
    /// because the writer was busy at the time; it waits for the writer as any write
    /// does. The checkpoint worker ([`Service::start_checkpoint_worker`]) calls it on
    /// every run, `coinorder serve` once more when it stops (to log a failure), and
    /// dropping the service does too; otherwise the next request that finds the writer
    /// free writes them.
    pub fn record_key_uses(&self) -> Result<()> {
        let uses = std::mem::take(&mut *self.unwritten_key_uses.lock().unwrap_or_else(|p| p.into_inner()));
        if uses.is_empty() {
            return Ok(());
        }
        let written = self.store.write(|db| touch_keys(db, &uses));
        if written.is_err() {
            self.keep_unwritten_key_uses(uses);
        }
        written
    }

    // ----- Orders -----

    /// Creates an order with its invoice (spec §4.1).
    ///
    /// An identical retry with the same `merchant_order_id` returns the original result
    /// (`replayed: true`); a different request reusing it fails with `ORDER_DUPLICATE`.
    /// The invoice is quoted at the rate the rate table gives when the order is written:
    /// a rate changed meanwhile by another service or program makes the create quote
    /// again (see `service/quotes.rs`).
    pub fn create_order(&self, merchant: &Merchant, request: &CreateOrder) -> Result<CreatedOrder> {
        // With no key to confirm, the create always ends in an order or an error.
        self.create_order_confirming(merchant, request, None)?.ok_or_else(|| Error::new(ErrorKind::Unauthorized))
    }

    /// [`Service::create_order`], which first confirms inside its write transaction that
    /// the stored key is still exactly `key`, if given; `None` when it is not (nothing
    /// was written).
    pub(crate) fn create_order_confirming(
        &self,
        merchant: &Merchant,
        request: &CreateOrder,
        key: Option<&KeyCredential>,
    ) -> Result<Option<CreatedOrder>> {
        self.check_merchant(merchant)?;
        let checked = request.validate(&self.config).and_then(|valid| match &valid.webhook_url {
            Some(url) => self.check_webhook_target(merchant.environment, url).map(|()| valid),
            None => Ok(valid),
        });
        let valid = match checked {
            Ok(valid) => valid,
            Err(refused) => return self.replay_accepted_before(merchant, request, key, refused),
        };
        let request_hash = valid.fingerprint();
        let now = self.now();
        let chose_coin = request.pay_currency.is_some();
        let (mut rate, crypto_amount) =
            self.quote(valid.amount, &valid.currency, &valid.pay_currency, chose_coin, now)?;

        let order_id = time_ordered_id(now);
        let merchant_order_id = valid.merchant_order_id.clone().unwrap_or_else(|| generated_merchant_order_id(now));
        let ttl_ms = i64::try_from(self.config.invoice_ttl.as_millis()).unwrap_or(i64::MAX);
        let order = Order {
            order_id: order_id.clone(),
            user_id: merchant.user_id,
            environment: merchant.environment,
            key_id: merchant.key_id.clone(),
            merchant_order_id: merchant_order_id.clone(),
            title: valid.title,
            description: valid.description,
            callback_url: valid.callback_url,
            webhook_url: valid.webhook_url,
            success_url: valid.success_url,
            cancel_url: valid.cancel_url,
            customer_email: valid.customer_email,
            amount: valid.amount,
            currency: valid.currency,
            receive_currency: String::new(),
            status: OrderStatus::New,
            created_at: now,
            updated_at: now,
            deleted: false,
            marked_paid: false,
        };
        // A retry of a create that already happened must not cost the host's address
        // source an address: look for it before asking. (Two copies racing both ask; the
        // loser's address is then never shown. The check inside the write below decides,
        // and is all the other address kinds need: a watch-only wallet's index is taken
        // after it, and sandbox addresses cost nothing, so they skip this read snapshot.)
        let host_addresses = self.config.address_source.is_some();
        if let (Some(merchant_order_id), true) = (&valid.merchant_order_id, host_addresses) {
            let Some(prior) = self.prior_create(merchant, merchant_order_id, key)? else {
                return Ok(None); // the key changed
            };
            if let Some(prior) = prior {
                return self
                    .settle_prior(merchant, &request_hash, prior.request_hash, prior.create_response, merchant_order_id)
                    .map(Some);
            }
        }
        let invoice = Invoice {
            invoice_id: time_ordered_id(now),
            order_id: order_id.clone(),
            merchant_order_id,
            amount: crypto_amount,
            currency: valid.pay_currency,
            rate: rate.rate,
            status: OrderStatus::New,
            receive_amount: rust_decimal::Decimal::ZERO,
            receive_currency: String::new(),
            created_at: now,
            expired_at: now.plus_ms(ttl_ms),
            updated_at: now,
            address: String::new(),
            payment_uri: String::new(),
            derivation_index: None,
        };
        let mut created = CreatedOrder {
            order: OrderWithInvoice { order, invoice },
            payment_url: self.payment_url(&order_id),
            replayed: false,
            response_body: String::new(),
        };

        // A host's address source gives every address; without one, the coin's
        // watch-only wallet does, its next index taken in this very transaction.
        let from_wallets = !host_addresses;
        let mut attempt = 1;
        loop {
            let invoice = &mut created.order.invoice;
            let deposit = self.deposit_address(&order_id, &invoice.invoice_id, &invoice.currency, invoice.amount)?;
            invoice.address = deposit.address;
            invoice.payment_uri = deposit.payment_uri.unwrap_or_default();
            created.response_body = render::create_response_json(&created);
            let (order, invoice) = (&created.order.order, &created.order.invoice);
            let outcome = self.store.write(|db| {
                if !key_unchanged(db, key)? {
                    return Ok(Attempt::KeyChanged);
                }
                if valid.merchant_order_id.is_some() {
                    let existing = db.prior_create(merchant.user_id, merchant.environment, &order.merchant_order_id)?;
                    if let Some(prior) = existing {
                        return Ok(Attempt::Prior(prior));
                    }
                }
                if !self.quote_holds(db, &invoice.currency, &order.currency, &rate, now)? {
                    return Ok(Attempt::RateMoved);
                }
                let derived = if from_wallets { self.with_derived_address(db, &created)? } else { None };
                let stored = derived.as_ref().unwrap_or(&created);
                let kept_body = replayable_body(valid.merchant_order_id.as_deref(), &stored.response_body);
                db.insert_order_with_invoice(&stored.order, &request_hash, kept_body)?;
                if let Some(recipient) = &stored.order.order.customer_email {
                    let email = mail::payment_link_email(&stored.order.order, recipient, &stored.payment_url);
                    db.insert_email(merchant.environment, &email)?;
                }
                Ok(Attempt::Stored(derived.map(Box::new)))
            })?;
            match outcome {
                Attempt::Stored(None) => return Ok(Some(created)),
                Attempt::Stored(Some(derived)) => return Ok(Some(*derived)),
                Attempt::KeyChanged => return Ok(None),
                Attempt::Prior(prior) => {
                    let merchant_order_id = created.order.order.merchant_order_id;
                    return self
                        .settle_prior(
                            merchant,
                            &request_hash,
                            prior.request_hash,
                            prior.create_response,
                            &merchant_order_id,
                        )
                        .map(Some);
                }
                Attempt::RateMoved if attempt < QUOTE_ATTEMPTS => {
                    // Another service or program changed the rate since this one last
                    // read it: quote again at the row the write just read.
                    attempt += 1;
                    let (order, invoice) = (&created.order.order, &mut created.order.invoice);
                    let (new_rate, amount) =
                        self.quote(order.amount, &order.currency, &invoice.currency, chose_coin, now)?;
                    (rate, invoice.rate, invoice.amount) = (new_rate.clone(), new_rate.rate, amount);
                }
                Attempt::RateMoved => {
                    return Err(Error::new(ErrorKind::Storage(StorageError::new(
                        true,
                        std::io::Error::other("the exchange rate kept changing while the order was quoted"),
                    ))))
                }
            }
        }
    }

    /// The quote for `amount` of `fiat` in `coin` at `now`: the rate, and the coin amount.
    /// A missing rate names the field the merchant chose: the fiat currency unless they
    /// picked the coin (`chose_coin`).
    fn quote(
        &self,
        amount: rust_decimal::Decimal,
        fiat: &str,
        coin: &str,
        chose_coin: bool,
        now: Timestamp,
    ) -> Result<(quotes::QuotedRate, rust_decimal::Decimal)> {
        let rate = self.quoted_rate(coin, fiat, now).map_err(|error| match (error.kind(), chose_coin) {
            (ErrorKind::InvalidParameter { rule, .. }, false) => Error::invalid("currency", rule.clone()),
            _ => error,
        })?;
        let decimals =
            money::coin_decimals(coin).ok_or_else(|| Error::invalid("pay_currency", format!("unknown coin {coin}")))?;
        let crypto_amount = money::crypto_amount(amount, rate.rate, decimals).ok_or_else(|| {
            Error::invalid(
                "amount",
                format!(
                    "is too large to pay in {coin} at the current rate: an invoice must stay below {} {coin} \
                     ({coin} has {decimals} decimal places and an exact amount at most {} digits)",
                    money::largest_quotable_coins(decimals),
                    money::QUOTE_DIGITS
                ),
            )
        })?;
        Ok((rate, crypto_amount))
    }

    /// The create stored under `merchant_order_id`, if any, read in one snapshot with the
    /// check that the stored key is still exactly `key`; `None` when it is not.
    fn prior_create(
        &self,
        merchant: &Merchant,
        merchant_order_id: &str,
        key: Option<&KeyCredential>,
    ) -> Result<Option<Option<crate::storage::PriorCreate>>> {
        self.store.read(|db| {
            if !key_unchanged(db, key)? {
                return Ok(None);
            }
            Ok(Some(db.prior_create(merchant.user_id, merchant.environment, merchant_order_id)?))
        })
    }

    /// A create that today's rules refuse (`refused`) may still be the identical retry of
    /// one that was accepted: by an older version with looser rules (a quoted
    /// `customer_email`, a webhook host in a range refused since), or under a config that
    /// allowed it (`allow_private_webhook_targets`, a coin no longer offered). DESIGN §5
    /// says an identical request replays the original 201, and a merchant retrying after an
    /// upgrade must not be told that an order which exists failed; so such a retry
    /// replays. Anything else gets the refusal. `Ok(None)` when `key` changed.
    fn replay_accepted_before(
        &self,
        merchant: &Merchant,
        request: &CreateOrder,
        key: Option<&KeyCredential>,
        refused: Error,
    ) -> Result<Option<CreatedOrder>> {
        let Some(merchant_order_id) = request.merchant_order_id.as_deref() else {
            return Err(refused);
        };
        match self.prior_create(merchant, merchant_order_id, key)? {
            None => Ok(None),
            Some(Some(prior)) if prior.request_hash == request.as_sent(&self.config).fingerprint() => {
                self.replay(merchant, prior.create_response).map(Some)
            }
            Some(_) => Err(refused),
        }
    }

    /// A create whose `merchant_order_id` is taken: the same request replays the first
    /// answer (DESIGN §5), a different one is `ORDER_DUPLICATE`.
    fn settle_prior(
        &self,
        merchant: &Merchant,
        request_hash: &[u8],
        prior_hash: Vec<u8>,
        prior_response: String,
        merchant_order_id: &str,
    ) -> Result<CreatedOrder> {
        if prior_hash == request_hash {
            self.replay(merchant, prior_response)
        } else {
            Err(Error::new(ErrorKind::DuplicateOrder(merchant_order_id.to_string())))
        }
    }

    /// Rebuilds the result of an earlier identical Create Order from its stored response
    /// (kept for every create a replay can find: see [`replayable_body`]).
    fn replay(&self, merchant: &Merchant, response_body: String) -> Result<CreatedOrder> {
        let stored: serde_json::Value = serde_json::from_str(&response_body)
            .map_err(|e| Error::new(ErrorKind::Corrupt(format!("stored create response unreadable: {e}"))))?;
        let order_id = stored["data"]["order_id"].as_str().unwrap_or_default().to_string();
        let payment_url = stored["payment_url"].as_str().unwrap_or_default().to_string();
        let order = self.get_order(merchant, &order_id)?;
        Ok(CreatedOrder { order, payment_url, replayed: true, response_body })
    }

    /// The deposit address for a new invoice: from the host's address source, else the
    /// sandbox's fake one; live without a source leaves it empty.
    fn deposit_address(
        &self,
        order_id: &str,
        invoice_id: &str,
        currency: &str,
        amount: rust_decimal::Decimal,
    ) -> Result<DepositAddress> {
        let address = match &self.config.address_source {
            Some(source) => source
                .deposit_address(order_id, currency, amount)
                .map_err(|e| Error::new(ErrorKind::HostCallback(format!("address source failed: {e}"))))?,
            None => match addresses::default_address(self.environment(), invoice_id, currency) {
                Some(address) => DepositAddress { address, payment_uri: None },
                None => return Ok(DepositAddress { address: String::new(), payment_uri: Some(String::new()) }),
            },
        };
        let uri = address
            .payment_uri
            .clone()
            .unwrap_or_else(|| addresses::payment_uri_for(self.environment(), currency, &address.address, amount));
        Ok(DepositAddress { payment_uri: Some(uri), ..address })
    }

    /// The hosted payment page address for an order.
    pub fn payment_url(&self, order_id: &str) -> String {
        match &self.payment_page {
            Some(page) => {
                let mut url = page.clone();
                url.query_pairs_mut().append_pair("id", order_id);
                url.into()
            }
            None => format!("{}?id={order_id}", self.config.payment_page_url),
        }
    }

    /// One order with its invoice (spec §4.2). Orders of other merchants or of the other
    /// environment are reported as not found (`ORDER_NOT_VALID`).
    ///
    /// An open order whose quote ran out is moved (to EXPIRED or FAILED, with its event)
    /// before it is returned, if no expiry sweep has moved it yet and the writer is free
    /// (a read never waits for a write: busy, it returns the order as stored).
    pub fn get_order(&self, merchant: &Merchant, order_id: &str) -> Result<OrderWithInvoice> {
        self.check_merchant(merchant)?;
        let read = self.store.read(|db| MerchantReads { merchant, db }.get_order(order_id))?;
        self.as_it_stands(read, self.now())
    }

    /// A page of the merchant's orders, newest first (spec §4.3).
    ///
    /// When an open order is past its deadline and no sweep has moved it yet, one batch
    /// of the sweep runs first if the writer is free (a read never waits for a write), so
    /// the page shows every order as it stands.
    pub fn list_orders(&self, merchant: &Merchant, query: &ListOrders) -> Result<OrderPage> {
        self.check_merchant(merchant)?;
        let now = self.now();
        self.page_as_it_stands(now, self.list_read(merchant, query, now)?, || {
            Ok(self.list_read(merchant, query, now)?.0)
        })
    }

    /// One snapshot's page of [`MerchantReads::list_orders`], for a merchant already
    /// checked (the re-read of [`Service::page_as_it_stands`]).
    pub(crate) fn list_read(
        &self,
        merchant: &Merchant,
        query: &ListOrders,
        now: Timestamp,
    ) -> Result<(OrderPage, bool)> {
        self.store.read(|db| MerchantReads { merchant, db }.list_orders(query, now))
    }

    fn check_merchant(&self, merchant: &Merchant) -> Result<()> {
        if merchant.environment == self.environment() {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::Unauthorized))
        }
    }
}

/// A merchant's reads inside one read snapshot: what [`Service::get_order`] and
/// [`Service::list_orders`] do, for callers that already hold the snapshot (the wire
/// layer authenticates and reads in one, [`Service::read_as`]).
pub(crate) struct MerchantReads<'s, 'c> {
    merchant: &'s Merchant,
    db: &'s Conn<'c>,
}

impl MerchantReads<'_, '_> {
    /// The order `order_id` of this merchant with its invoice, or `ORDER_NOT_VALID`.
    pub(crate) fn get_order(&self, order_id: &str) -> Result<OrderWithInvoice> {
        let order_id = canonical_order_id(order_id)?;
        self.db
            .order_with_invoice(self.merchant.user_id, self.merchant.environment, &order_id)?
            .ok_or_else(|| Error::new(ErrorKind::OrderNotFound))
    }

    /// A page of this merchant's orders, newest first (spec §4.3), and whether an open
    /// order of the environment is past its deadline at `now` (see
    /// [`Service::page_as_it_stands`]).
    pub(crate) fn list_orders(&self, query: &ListOrders, now: Timestamp) -> Result<(OrderPage, bool)> {
        query.validate()?;
        let offset = i64::try_from(query.offset).unwrap_or(i64::MAX);
        let merchant = self.merchant;
        let mut orders = self.db.list_orders(
            merchant.user_id,
            merchant.environment,
            query.status,
            i64::from(query.limit) + 1,
            offset,
        )?;
        let has_more = orders.len() > query.limit as usize;
        orders.truncate(query.limit as usize);
        // Expiry moves NEW and PENDING orders to EXPIRED and FAILED: a filter on one of
        // those four can be out of date; without a filter the page holds the same orders
        // whatever their states, and only an open one on it can be shown out of date.
        let could_be_stale = match query.status {
            Some(OrderStatus::Paid | OrderStatus::Cancelled) => false,
            Some(_) => true,
            None => orders.iter().any(|order| !order.status.is_terminal()),
        };
        let overdue = could_be_stale && self.db.any_order_due_for_expiry(merchant.environment, now.as_millis())?;
        Ok((OrderPage { orders, limit: query.limit, offset: query.offset, has_more }, overdue))
    }
}

/// What a create stores of its 201 body for replays: the whole body when the request
/// carried a `merchant_order_id`, nothing (`""`) when it did not.
///
/// Only a request with the same `merchant_order_id` finds an order's row, and it is
/// replayed only when its fingerprint matches the stored one. A request that sent no
/// `merchant_order_id` has an empty one in its fingerprint, and every request that names
/// the generated id has that id in its own: no replay can ever match, and the body, about
/// half of a stored order's bytes, would be written and carried for nothing.
fn replayable_body<'a>(sent_merchant_order_id: Option<&str>, body: &'a str) -> &'a str {
    match sent_merchant_order_id {
        Some(_) => body,
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pooled_reader_confirms_its_cached_key_by_the_data_version_until_a_commit() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let mut config = Config::new(crate::Environment::Sandbox);
        config.sqlite.background_checkpoints = false;
        let service = Service::open(dir.path().join("keys.db"), config)?;
        let new_key = || NewApiKey { user_id: 1, environment: crate::Environment::Sandbox, webhook_url: None };
        let key = service.create_key(new_key())?;
        let hash = keys::hash_key(key.plain_key.expose());
        let start_snapshot = |db: &Conn<'_>| {
            db.sqlite_for_test()
                .query_row("SELECT count(*) FROM api_keys", [], |row| row.get::<_, i64>(0))
                .map_err(|e| Error::new(ErrorKind::Config(e.to_string())))
        };
        // The first read finds nothing cached; its lookup (which starts the snapshot)
        // caches the key under the snapshot's data version.
        service.store.read(|db| {
            assert!(db.cached_key(&hash).is_none());
            assert!(!db.key_cache_current()?);
            assert!(db.key_by_hash(&hash)?.is_some());
            assert!(db.key_cache_current()?);
            Ok(())
        })?;
        // The next read (one thread: the same pooled reader) has it without a statement,
        // current only once its snapshot has started and nothing committed since.
        service.store.read(|db| {
            assert_eq!(db.cached_key(&hash).map(|cached| cached.id), Some(key.key.id.clone()));
            assert!(!db.key_cache_current()?, "no snapshot yet: the version may be old");
            start_snapshot(db)?;
            assert!(db.key_cache_current()?);
            Ok(())
        })?;
        // Any commit, here another key, makes the next snapshot's version another one.
        service.create_key(new_key())?;
        service.store.read(|db| {
            assert!(db.cached_key(&hash).is_some(), "kept until a lookup sees the new version");
            start_snapshot(db)?;
            assert!(!db.key_cache_current()?, "a commit came since the key was cached");
            assert!(db.key_by_hash(&hash)?.is_some());
            assert!(db.key_cache_current()?, "looked up again under the new version");
            Ok(())
        })?;
        Ok(())
    }

    #[test]
    fn generated_merchant_order_ids_are_ord_and_24_base62_and_sort_by_creation_time() {
        let times = [0, 1, 61, 62, 1_764_000_000_000, 1_764_000_000_001, 1_764_000_060_000, 218_340_105_584_895];
        let ids: Vec<String> = times.iter().map(|&ms| generated_merchant_order_id(Timestamp(ms))).collect();
        for id in &ids {
            let digits = id.strip_prefix("ord_").unwrap_or_default();
            assert_eq!(digits.len(), 24, "{id}");
            assert!(digits.bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
        }
        assert_eq!(&ids[0][4..12], "00000000");
        assert_eq!(&ids[3][4..12], "00000010");
        assert_eq!(&ids[7][4..12], "zzzzzzzz", "the largest time 8 digits hold");
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids, "later ids sort later");
        // The rest is random: two ids of the same millisecond differ.
        assert_ne!(generated_merchant_order_id(Timestamp(5)), generated_merchant_order_id(Timestamp(5)));
    }

    #[test]
    fn an_api_read_authenticates_and_reads_in_one_transaction() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::new(Environment::Sandbox);
        config.rate_limit = crate::RateLimit::OFF;
        let service = Service::open(dir.path().join("one-read.db"), config).expect("open");
        let created = service
            .create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None })
            .expect("key");
        let key = created.plain_key.expose();
        let merchant = service.authenticate(Some(key)).expect("authenticate");
        let request =
            CreateOrder { currency: "USD".into(), amount: rust_decimal::Decimal::from(10), ..Default::default() };
        let order_id = service.create_order(&merchant, &request).expect("order").order.order.order_id;
        for path in [format!("/v1/orders/{order_id}"), "/v1/orders?limit=5".to_string()] {
            let before = crate::storage::READS_ON_THIS_THREAD.with(std::cell::Cell::get);
            let response = service.handle(&crate::WireRequest::new("GET", &path).header("x-api-key", key));
            assert_eq!(response.status, 200, "{path}");
            let reads = crate::storage::READS_ON_THIS_THREAD.with(std::cell::Cell::get) - before;
            assert_eq!(reads, 1, "{path}: the key lookup and the read share one snapshot");
        }
    }

    #[test]
    fn a_target_that_is_not_a_file_is_refused_naming_it() {
        for target in ["", "  ", ":memory:", "file:shop.db?mode=memory"] {
            let refused = Service::open(target, Config::new(Environment::Sandbox)).err();
            let message = refused.as_ref().map(ToString::to_string).unwrap_or_default();
            assert_eq!(refused.map(|e| e.error_code()), Some("PARAMETERS_MISSING"), "{target:?}: {message}");
            assert!(message.starts_with("target: must be a SQLite file path or a postgres:// URL"), "{message}");
        }
    }

    #[test]
    #[cfg(not(feature = "postgres"))]
    fn a_postgres_url_in_a_build_without_postgres_says_so_first() {
        let err = Service::open("postgres://shop@localhost/shop", Config::new(Environment::Sandbox)).expect_err("no");
        assert!(err.to_string().contains("no PostgreSQL support (cargo feature `postgres`)"), "{err}");
        assert!(!Path::new("postgres:").exists());
    }

    #[test]
    #[cfg(feature = "postgres")]
    fn a_postgres_url_without_the_shared_key_file_is_refused_clearly_and_creates_nothing() {
        for target in ["postgres://shop@localhost/shop", "postgresql://shop@localhost/shop"] {
            let err = Service::open(target, Config::new(Environment::Sandbox)).expect_err("refused");
            assert_eq!(err.error_code(), "PARAMETERS_MISSING");
            assert!(
                err.to_string()
                    .starts_with("secret_key_file: a PostgreSQL database needs the secret key file every host shares"),
                "{err}"
            );
            let mut config = Config::new(Environment::Sandbox);
            config.secret_key_path = Some("no-such-coinorder.key".into());
            let err = Service::open(target, config).expect_err("refused");
            assert!(err.to_string().contains("does not exist"), "{err}");
        }
        assert!(!Path::new("postgres:").exists() && !Path::new("postgresql:").exists());
        assert!(!Path::new("no-such-coinorder.key").exists());
    }
}
