//! Service configuration and the injectable clock.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::environment::Environment;
use crate::error::{Error, Result};

/// A source of the current time, in Unix epoch milliseconds.
///
/// Injectable so that expiry, rate limits and retries can be tested without sleeping.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
}

/// A clock that only moves when told to; for tests and simulations.
#[derive(Debug)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    /// A clock standing at `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        ManualClock { now_ms: AtomicI64::new(now_ms) }
    }

    /// Moves the clock forward (or back, with a negative value) by `ms` milliseconds.
    pub fn advance_ms(&self, ms: i64) {
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock to `now_ms`.
    pub fn set_ms(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

/// Per-key request rate limit: a token bucket refilled at `per_second`, holding `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Tokens added per second; 0 turns the limit off.
    pub per_second: u32,
    /// Most tokens the bucket holds (the largest burst allowed). The clock counts
    /// milliseconds, so a burst below one millisecond's refill (`per_second / 1000`,
    /// rounded up) counts as that many.
    pub burst: u32,
}

impl RateLimit {
    /// No limit at all.
    pub const OFF: RateLimit = RateLimit { per_second: 0, burst: 0 };
}

impl Default for RateLimit {
    /// DESIGN §3: 100 requests per second with a burst of 100.
    fn default() -> Self {
        RateLimit { per_second: 100, burst: 100 }
    }
}

/// The SMTP server payment-link e-mails are sent through.
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpConfig {
    /// `smtp://host:port` (unencrypted: for a local relay only),
    /// `smtp://host:port?tls=opportunistic` (STARTTLS when offered), `smtp://...?tls=required`
    /// (STARTTLS required) or `smtps://host:port` (TLS from the start); credentials may be
    /// given as `smtp://user:password@host` (use them only with TLS).
    pub url: String,
    /// The sender address, e.g. `Shop <pay@shop.example>`.
    pub from: String,
}

impl SmtpConfig {
    /// The sender used when none is configured.
    pub const DEFAULT_FROM: &'static str = "coinorder <noreply@localhost>";

    /// Refuses settings the mailer could not use: a scheme other than `smtp`/`smtps`, a
    /// `tls=` mode other than `required` or `opportunistic`, anything lettre rejects, or
    /// a sender that is not an address. Messages never repeat the URL (it may hold a
    /// password).
    pub fn check(&self) -> Result<()> {
        match self.problem() {
            None => Ok(()),
            Some(("smtp_from", rule)) => Err(Error::new(crate::ErrorKind::Config(format!("smtp from: {rule}")))),
            Some((_, rule)) => Err(Error::new(crate::ErrorKind::Config(format!("smtp url: {rule}")))),
        }
    }

    /// What [`SmtpConfig::check`] refuses, as the option at fault (`smtp_url` or
    /// `smtp_from`) and the rule it breaks.
    fn problem(&self) -> Option<(&'static str, String)> {
        let bad = |why: String| Some(("smtp_url", why));
        let parsed = match url::Url::parse(&self.url) {
            Ok(parsed) => parsed,
            Err(e) => return bad(format!("not a URL ({e})")),
        };
        if !matches!(parsed.scheme(), "smtp" | "smtps") {
            return bad(format!("must start with smtp:// or smtps://, not {}://", parsed.scheme()));
        }
        if let Some((_, tls)) = parsed.query_pairs().find(|(name, _)| name == "tls") {
            if parsed.scheme() == "smtp" && !matches!(tls.as_ref(), "required" | "opportunistic") {
                return bad(format!("tls must be required or opportunistic, got {tls:?}"));
            }
        }
        if let Err(e) = lettre::SmtpTransport::from_url(&self.url) {
            return bad(format!("not usable ({e})"));
        }
        if self.from.parse::<lettre::message::Mailbox>().is_err() {
            return Some((
                "smtp_from",
                format!("{:?} is not an e-mail address (e.g. `Shop <pay@shop.example>`)", self.from),
            ));
        }
        None
    }
}

impl fmt::Debug for SmtpConfig {
    // The URL may carry a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpConfig").field("url", &crate::redact_url(&self.url)).field("from", &self.from).finish()
    }
}

/// How the service runs. Build one with [`Config::new`] and adjust the public fields.
#[derive(Debug, Clone)]
pub struct Config {
    /// The environment this service serves.
    pub environment: Environment,
    /// Base address of the hosted payment page; `payment_url` is this plus `?id=<order_id>`.
    pub payment_page_url: String,
    /// Per-key rate limit.
    pub rate_limit: RateLimit,
    /// Failed authentications allowed per client address ([`crate::WireRequest::client`]),
    /// as a token bucket: by default a burst of 20, then one a second. Once it is spent,
    /// requests from that address get `API_LIMIT_EXCEEDED` with `Retry-After` before their
    /// key is even looked at, so guessing keys is slow. [`RateLimit::OFF`] turns it off.
    pub failed_auth_limit: RateLimit,
    /// How long an invoice's quote stays valid (DESIGN §6: 30 minutes); more than 0 and at
    /// most [`MAX_INVOICE_TTL_SECS`].
    pub invoice_ttl: Duration,
    /// Crypto currencies customers may pay in (`pay_currency`), upper case.
    pub pay_currencies: Vec<String>,
    /// The `pay_currency` used when a request names none.
    pub default_pay_currency: String,
    /// Settings that only mean something for a SQLite file (ignored on PostgreSQL).
    pub sqlite: SqliteOptions,
    /// How long a write waits for another connection or process to finish (SQLite's
    /// busy timeout; on PostgreSQL how long a write waits for a row lock and retries
    /// conflicts). After it, the write fails as busy (HTTP 503).
    pub busy_timeout: Duration,
    /// Where the key that encrypts webhook secrets at rest lives. `None`: beside the
    /// database, at `<database path>.key`.
    pub secret_key_path: Option<std::path::PathBuf>,
    /// The clock used for timestamps, expiry and rate limiting.
    pub clock: Arc<dyn Clock>,
    /// A live rate feed consulted before the rate table; `None`: table only.
    pub rate_source: Option<Arc<dyn crate::rates::RateSource>>,
    /// How long one webhook attempt may take (DESIGN §7: 15 s); more than 0 and at most
    /// 600 s.
    pub webhook_timeout: Duration,
    /// Delays before each retry of a failed webhook or e-mail (DESIGN §7: 5 s, 5 min,
    /// 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h); each is jittered by ±20 %. After the
    /// last, the message is marked failed. Each delay is at most 365 days.
    pub retry_schedule: Vec<Duration>,
    /// How many webhooks [`crate::Service::deliver_due`] sends at once, 1 to 256.
    pub delivery_concurrency: usize,
    /// Lets a live service send webhooks to loopback, private and link-local addresses
    /// (always allowed in sandbox).
    pub allow_private_webhook_targets: bool,
    /// Where payment-link e-mails go out; `None` keeps them pending in the outbox.
    pub smtp: Option<SmtpConfig>,
    /// The host's wallet handing out deposit addresses. `None`: fake testnet-style
    /// addresses in sandbox; in live, invoices have no address until one is configured.
    pub address_source: Option<Arc<dyn crate::addresses::AddressSource>>,
    /// Told what background work did as it happens (`coinorder serve` logs it); `None`:
    /// nobody.
    pub observer: Option<Arc<dyn Observer>>,
    /// Where the chain watcher ([`crate::Service::watch_chain_due`]) sees Bitcoin
    /// payments to invoices' derived addresses; `None`: BTC is not watched.
    pub bitcoin_watch: Option<BitcoinWatch>,
    /// Where the chain watcher sees ETH and ERC-20 token payments; `None`: not watched.
    pub ethereum_watch: Option<EthereumWatch>,
}

/// The Bitcoin chain watcher's source: an Esplora-compatible HTTP API (Blockstream's
/// electrs, mempool.space, or your own).
#[derive(Clone, PartialEq, Eq)]
pub struct BitcoinWatch {
    /// Base URL of the API, such as `https://blockstream.info/api`; it may carry an API
    /// key, so it is never logged, only its scheme, host and port.
    pub esplora_url: String,
    /// Blocks deep a payment must be to count as confirmed (1 = in a block).
    pub confirmations: u32,
}

impl BitcoinWatch {
    /// Two confirmations, a common merchant setting for BTC.
    pub const DEFAULT_CONFIRMATIONS: u32 = 2;
}

/// The Ethereum chain watcher's source: a JSON-RPC node, and the token contracts it
/// watches for USDT and USDC.
#[derive(Clone, PartialEq, Eq)]
pub struct EthereumWatch {
    /// The node's JSON-RPC URL; it may carry an API key, so it is never logged, only its
    /// scheme, host and port.
    pub rpc_url: String,
    /// Blocks deep a payment must be to count as confirmed (1 = in a block).
    pub confirmations: u32,
    /// ERC-20 tokens watched, as (coin, contract address): by default USDT and USDC on
    /// Ethereum mainnet in live and Circle's Sepolia USDC in the sandbox; a test chain
    /// names its own.
    pub tokens: Vec<(String, String)>,
}

impl EthereumWatch {
    /// Twelve confirmations, a common merchant setting for Ethereum.
    pub const DEFAULT_CONFIRMATIONS: u32 = 12;

    /// A watch of `rpc_url` with the default depth and `environment`'s token contracts.
    pub fn new(environment: Environment, rpc_url: impl Into<String>) -> EthereumWatch {
        EthereumWatch {
            rpc_url: rpc_url.into(),
            confirmations: Self::DEFAULT_CONFIRMATIONS,
            tokens: crate::addresses::token_contracts(environment),
        }
    }
}

impl fmt::Debug for BitcoinWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BitcoinWatch")
            .field("esplora_url", &crate::chain::endpoint_for_display(&self.esplora_url))
            .field("confirmations", &self.confirmations)
            .finish()
    }
}

impl fmt::Debug for EthereumWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EthereumWatch")
            .field("rpc_url", &crate::chain::endpoint_for_display(&self.rpc_url))
            .field("confirmations", &self.confirmations)
            .field("tokens", &self.tokens)
            .finish()
    }
}

/// Receives what the service's background work did, as it happens: for logs and
/// metrics. Every method has an empty default; they run on the working thread, so they
/// should return quickly.
pub trait Observer: Send + Sync + fmt::Debug {
    /// A webhook attempt for event `event_id` ended; `outcome` is what became of the
    /// event as recorded: `delivered`, `retrying` or `failed`; or `unrecorded` when the
    /// outcome could not be written (the database failed, say on a full disk): the event
    /// is then sent again once its lease runs out.
    fn webhook_attempted(&self, _event_id: &str, _attempt: &crate::WebhookAttempt, _outcome: &str) {}

    /// Attempt number `attempt` at payment-link e-mail `email_id` (of order `order_id`)
    /// ended; `outcome` is what became of it as recorded: `sent`, `retrying` or `failed`,
    /// with the SMTP server's or coinorder's reason in `error` when it was not sent; or
    /// `unrecorded` when the outcome could not be written (the database failed): the
    /// e-mail is then tried again once its lease runs out, and may arrive twice. The recipient's address is not passed: logs should not collect it.
    fn email_attempted(&self, _email_id: &str, _order_id: &str, _attempt: i64, _outcome: &str, _error: Option<&str>) {}
}

/// What only a SQLite file has: [`Config::sqlite`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqliteOptions {
    /// `synchronous=FULL` (true, the default: money; every commit survives a power cut)
    /// or `NORMAL` (false, faster; a power cut may lose the last commits, never corrupts).
    pub synchronous_full: bool,
    /// How much of the file each reading connection maps into memory, in MiB
    /// (`mmap_size`; default 1024, 0 turns it off). Reads then come from the operating
    /// system's page cache without a copy per page: +30 % to +55 % on Get Order at 100k
    /// to 1M orders. It reserves address space, not memory.
    pub mmap_mib: u64,
    /// Page cache of each connection, in MiB (`cache_size`; default 8). Pages beyond it
    /// come from the memory map; up to 17 connections each hold one, so raise it with care.
    pub cache_mib: u64,
    /// A thread of the service copies the write-ahead log into the database file every
    /// half second, and at once when a commit leaves 4,000 pages of log (true, the
    /// default), so that no committing write does it itself: without it, about one
    /// create in 90 waits for such a checkpoint, 10–20 ms. Turn it off only to run
    /// [`crate::Service::checkpoint`] yourself.
    pub background_checkpoints: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions { synchronous_full: true, mmap_mib: 1024, cache_mib: 8, background_checkpoints: true }
    }
}

impl Config {
    /// Defaults for `environment`: payment page at `http://127.0.0.1:8080/pay`, rate
    /// limit 100/s, invoice TTL 30 min, pay currencies USDT, USDC, BTC, ETH (USDT default).
    pub fn new(environment: Environment) -> Self {
        Config {
            environment,
            payment_page_url: "http://127.0.0.1:8080/pay".to_string(),
            rate_limit: RateLimit::default(),
            failed_auth_limit: RateLimit { per_second: 1, burst: 20 },
            invoice_ttl: Duration::from_secs(30 * 60),
            pay_currencies: ["USDT", "USDC", "BTC", "ETH"].iter().map(|c| c.to_string()).collect(),
            default_pay_currency: "USDT".to_string(),
            sqlite: SqliteOptions::default(),
            busy_timeout: Duration::from_secs(30),
            secret_key_path: None,
            clock: Arc::new(SystemClock),
            webhook_timeout: Duration::from_secs(15),
            retry_schedule: [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 14 * 3600, 20 * 3600, 24 * 3600]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
            delivery_concurrency: 8,
            allow_private_webhook_targets: false,
            smtp: None,
            rate_source: None,
            address_source: None,
            observer: None,
            bitcoin_watch: None,
            ethereum_watch: None,
        }
    }

    /// The key file a service over the database at `database` uses: [`Config::secret_key_path`],
    /// else `<database>.key` (beside the file a symbolic link points at). Hosts that check
    /// or back up the file ask here rather than repeat the rule.
    pub fn secret_key_path_for(&self, database: &std::path::Path) -> std::path::PathBuf {
        self.secret_key_path.clone().unwrap_or_else(|| {
            // Beside the file itself: a database reached through a symbolic link keeps
            // the one key file, not one per link.
            let database = match database.is_symlink() {
                true => std::fs::canonicalize(database).unwrap_or_else(|_| database.to_path_buf()),
                false => database.to_path_buf(),
            };
            let mut name = database.as_os_str().to_owned();
            name.push(".key");
            std::path::PathBuf::from(name)
        })
    }

    /// Checks that the configuration is usable: an [`ErrorKind::Config`](crate::ErrorKind::Config)
    /// error naming the setting and the rule it breaks.
    pub(crate) fn validate(&self) -> Result<()> {
        match self.problem() {
            None => Ok(()),
            Some((setting, rule)) => Err(Error::new(crate::ErrorKind::Config(format!("{setting}: {rule}")))),
        }
    }

    /// The first setting the service could not use, by the name [`Config::from_options`]
    /// knows it by, and the rule it breaks.
    fn problem(&self) -> Option<(String, String)> {
        let bad = |setting: &str, rule: String| Some((setting.to_string(), rule));
        match url::Url::parse(&self.payment_page_url) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host_str().is_some() => {}
            _ => return bad("payment_page_url", "must be an absolute http:// or https:// URL".into()),
        }
        if self.pay_currencies.is_empty() {
            return bad("pay_currencies", "must name at least one coin".into());
        }
        if let Some(code) = self.pay_currencies.iter().find(|code| crate::money::coin_decimals(code).is_none()) {
            let known: Vec<&str> = crate::money::COINS.iter().map(|(coin, _)| *coin).collect();
            return bad("pay_currencies", format!("unknown coin {code:?} (known: {})", known.join(", ")));
        }
        if !self.pay_currencies.contains(&self.default_pay_currency) {
            return bad(
                "default_pay_currency",
                format!(
                    "{:?} is not one of pay_currencies ({})",
                    self.default_pay_currency,
                    self.pay_currencies.join(", ")
                ),
            );
        }
        if let Some((setting, rule)) = self.smtp.as_ref().and_then(SmtpConfig::problem) {
            return bad(setting, rule);
        }
        self.limits_problem().or_else(|| self.watch_problem())
    }

    /// The bounds [`Config::from_options`] puts on the numbers it reads, for a host that
    /// sets the public fields itself: past them SQLite, the clock's arithmetic or the
    /// rendered timestamps would fail later, in the middle of serving.
    fn limits_problem(&self) -> Option<(String, String)> {
        let bad = |setting: &str, rule: &str| Some((setting.to_string(), rule.to_string()));
        if self.invoice_ttl.is_zero() || self.invoice_ttl > Duration::from_secs(MAX_INVOICE_TTL_SECS) {
            return bad("invoice_ttl", "must be more than 0 and at most 365 days");
        }
        if self.busy_timeout > Duration::from_millis(MAX_BUSY_TIMEOUT_MS) {
            return bad("busy_timeout_ms", "must be at most 3600000 (one hour)");
        }
        if self.webhook_timeout.is_zero() || self.webhook_timeout > Duration::from_secs(MAX_WEBHOOK_TIMEOUT_SECS) {
            return bad("webhook_timeout_secs", "must be more than 0 and at most 600 seconds");
        }
        if !(1..=MAX_DELIVERY_CONCURRENCY).contains(&self.delivery_concurrency) {
            return bad("delivery_concurrency", "must be from 1 to 256");
        }
        if self.retry_schedule.iter().any(|delay| *delay > Duration::from_secs(MAX_INVOICE_TTL_SECS)) {
            return bad("retry_schedule", "each delay must be at most 365 days");
        }
        None
    }

    /// The chain watchers' endpoints are http(s) URLs, their depths at least one block,
    /// and their token contracts addresses of tokens we quote.
    fn watch_problem(&self) -> Option<(String, String)> {
        let bad = |setting: &str, rule: &str| Some((setting.to_string(), rule.to_string()));
        let endpoint_ok = |url: &str| {
            url::Url::parse(url)
                .is_ok_and(|parsed| matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some())
        };
        if let Some(watch) = &self.bitcoin_watch {
            if !endpoint_ok(&watch.esplora_url) {
                return bad("esplora_url", "must be an http:// or https:// URL");
            }
            if watch.confirmations == 0 {
                return bad("bitcoin_confirmations", "must be at least 1");
            }
        }
        if let Some(watch) = &self.ethereum_watch {
            if !endpoint_ok(&watch.rpc_url) {
                return bad("ethereum_rpc_url", "must be an http:// or https:// URL");
            }
            if watch.confirmations == 0 {
                return bad("ethereum_confirmations", "must be at least 1");
            }
            for (coin, contract) in &watch.tokens {
                let setting = format!("ethereum_tokens.{coin}");
                if !matches!(coin.as_str(), "USDT" | "USDC") {
                    return bad(&setting, "only USDT and USDC are ERC-20 coins we quote");
                }
                let hex = contract.strip_prefix("0x").unwrap_or("");
                if hex.len() != 40 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                    return bad(&setting, "contract must be 0x and 40 hex digits");
                }
            }
        }
        None
    }
}

/// Longest invoice quote [`Config::from_options`] accepts: one year, in seconds.
pub const MAX_INVOICE_TTL_SECS: u64 = 365 * 24 * 3600;

/// The longest [`Config::busy_timeout`], in milliseconds: one hour.
const MAX_BUSY_TIMEOUT_MS: u64 = 3_600_000;

/// The longest [`Config::webhook_timeout`], in seconds.
const MAX_WEBHOOK_TIMEOUT_SECS: u64 = 600;

/// The most webhooks [`Config::delivery_concurrency`] may send at once.
const MAX_DELIVERY_CONCURRENCY: usize = 256;

impl Config {
    /// Builds a configuration from the bindings' options (the C ABI's `config_json`, the
    /// Python `Service.open(**options)`): a JSON object whose members are all optional;
    /// `null` or an empty object means the sandbox defaults of [`Config::new`].
    ///
    /// | option | value | default |
    /// |---|---|---|
    /// | `environment` | `"sandbox"` or `"live"` | `"sandbox"` |
    /// | `payment_page_url` | absolute URL of the hosted page | `http://127.0.0.1:8080/pay` |
    /// | `invoice_ttl` | seconds a quote stays valid, 1 to 31536000 | 1800 |
    /// | `rate_limit` | requests per second per key, 0 = off | 100 |
    /// | `rate_burst` | largest burst per key | the `rate_limit` value |
    /// | `synchronous` | `"full"` or `"normal"` | `"full"` |
    /// | `busy_timeout_ms` | how long a write waits for another writer | 30000 |
    /// | `background_checkpoints` | a thread copies SQLite's log into the file ([`SqliteOptions::background_checkpoints`]) | true |
    /// | `secret_key_file` | file of the key sealing webhook secrets | `<database>.key` |
    /// | `webhook_timeout_secs` | one webhook attempt, 1 to 600 | 15 |
    /// | `delivery_concurrency` | webhooks sent at once, 1 to 256 | 8 |
    /// | `allow_private_webhooks` | live may send to private addresses | false |
    /// | `pay_currencies` | array of crypto codes customers may pay in | USDT, USDC, BTC, ETH |
    /// | `default_pay_currency` | the one used when an order names none | the first of `pay_currencies` (`"USDT"`) |
    /// | `smtp_url`, `smtp_from` | where payment-link e-mails go ([`SmtpConfig`]) | none |
    /// | `esplora_url` | Esplora API the Bitcoin watcher reads ([`BitcoinWatch`]) | none: BTC not watched |
    /// | `bitcoin_confirmations` | blocks deep a BTC payment must be, 1 to 1000 | 2 |
    /// | `ethereum_rpc_url` | JSON-RPC node the Ethereum watcher reads ([`EthereumWatch`]) | none: not watched |
    /// | `ethereum_confirmations` | blocks deep an ETH or token payment must be, 1 to 1000 | 12 |
    /// | `ethereum_tokens` | object of coin → ERC-20 contract address (`{"USDT": "0x…"}`) | the environment's USDT and USDC |
    ///
    /// An unknown option, or a value of the wrong type or range or one the service
    /// cannot use (a payment page URL that is not an http(s) URL, an unknown coin), is
    /// refused with `PARAMETERS_MISSING` naming it (`config.invoice_ttl: ...`), so a typo
    /// never goes unnoticed.
    pub fn from_options(options: &serde_json::Value) -> Result<Config> {
        use serde_json::Value;
        let fields = match options {
            Value::Null => return Ok(Config::new(Environment::Sandbox)),
            Value::Object(fields) => fields,
            _ => return Err(Error::invalid("config", "must be a JSON object")),
        };
        let bad = |name: &str, rule: &str| Error::invalid(format!("config.{name}"), rule);
        let text =
            |name: &str, value: &Value| value.as_str().map(str::to_string).ok_or_else(|| bad(name, "must be a string"));
        let whole = |name: &str, value: &Value, min: u64, max: u64| -> Result<u64> {
            value
                .as_u64()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| bad(name, &format!("must be a whole number from {min} to {max}")))
        };
        let environment = match fields.get("environment") {
            None | Some(Value::Null) => Environment::Sandbox,
            Some(value) => text("environment", value)?
                .parse()
                .map_err(|_| bad("environment", "must be \"sandbox\" or \"live\""))?,
        };
        let mut config = Config::new(environment);
        let (mut rate, mut burst) = (None, None);
        let (mut smtp_url, mut smtp_from) = (None, None);
        let mut default_pay_currency = None;
        let (mut esplora_url, mut bitcoin_confirmations) = (None, None);
        let (mut ethereum_rpc_url, mut ethereum_confirmations, mut ethereum_tokens) = (None, None, None);
        for (name, value) in fields {
            if value.is_null() {
                continue;
            }
            match name.as_str() {
                "environment" => {}
                "payment_page_url" => config.payment_page_url = text(name, value)?,
                "invoice_ttl" => {
                    config.invoice_ttl = Duration::from_secs(whole(name, value, 1, MAX_INVOICE_TTL_SECS)?);
                }
                "rate_limit" => rate = Some(whole(name, value, 0, u64::from(u32::MAX))?),
                "rate_burst" => burst = Some(whole(name, value, 1, u64::from(u32::MAX))?),
                "synchronous" => {
                    config.sqlite.synchronous_full = match text(name, value)?.as_str() {
                        "full" => true,
                        "normal" => false,
                        _ => return Err(bad(name, "must be \"full\" or \"normal\"")),
                    }
                }
                "background_checkpoints" => {
                    config.sqlite.background_checkpoints =
                        value.as_bool().ok_or_else(|| bad(name, "must be true or false"))?;
                }
                "busy_timeout_ms" => {
                    config.busy_timeout = Duration::from_millis(whole(name, value, 0, MAX_BUSY_TIMEOUT_MS)?);
                }
                "secret_key_file" => config.secret_key_path = Some(text(name, value)?.into()),
                "webhook_timeout_secs" => {
                    config.webhook_timeout = Duration::from_secs(whole(name, value, 1, MAX_WEBHOOK_TIMEOUT_SECS)?)
                }
                "delivery_concurrency" => {
                    config.delivery_concurrency =
                        usize::try_from(whole(name, value, 1, MAX_DELIVERY_CONCURRENCY as u64)?).unwrap_or(8);
                }
                "allow_private_webhooks" => {
                    config.allow_private_webhook_targets =
                        value.as_bool().ok_or_else(|| bad(name, "must be true or false"))?;
                }
                "pay_currencies" => {
                    let codes = value.as_array().ok_or_else(|| bad(name, "must be an array of crypto codes"))?;
                    config.pay_currencies = codes
                        .iter()
                        .map(|code| {
                            code.as_str()
                                .map(str::to_string)
                                .ok_or_else(|| bad(name, "must be an array of crypto codes"))
                        })
                        .collect::<Result<_>>()?;
                    // As in the CLI's settings file: the first coin is the default unless
                    // `default_pay_currency` names another (set after the loop, whichever
                    // of the two came first).
                    config.default_pay_currency = config.pay_currencies.first().cloned().unwrap_or_default();
                }
                "default_pay_currency" => default_pay_currency = Some(text(name, value)?),
                "smtp_url" => smtp_url = Some(text(name, value)?),
                "smtp_from" => smtp_from = Some(text(name, value)?),
                "esplora_url" => esplora_url = Some(text(name, value)?),
                "bitcoin_confirmations" => {
                    bitcoin_confirmations = Some(u32::try_from(whole(name, value, 1, 1000)?).unwrap_or(1000));
                }
                "ethereum_rpc_url" => ethereum_rpc_url = Some(text(name, value)?),
                "ethereum_confirmations" => {
                    ethereum_confirmations = Some(u32::try_from(whole(name, value, 1, 1000)?).unwrap_or(1000));
                }
                "ethereum_tokens" => {
                    let tokens = value.as_object().ok_or_else(|| bad(name, "must be an object of coin: contract"))?;
                    ethereum_tokens = Some(
                        tokens
                            .iter()
                            .map(|(coin, contract)| Ok((coin.clone(), text(&format!("{name}.{coin}"), contract)?)))
                            .collect::<Result<Vec<_>>>()?,
                    );
                }
                _ => return Err(bad(name, "unknown option")),
            }
        }
        if let Some(per_second) = rate {
            let per_second = u32::try_from(per_second).unwrap_or(u32::MAX);
            config.rate_limit =
                if per_second == 0 { RateLimit::OFF } else { RateLimit { per_second, burst: per_second } };
        }
        if let (Some(burst), false) = (burst, config.rate_limit == RateLimit::OFF) {
            config.rate_limit.burst = u32::try_from(burst).unwrap_or(u32::MAX);
        }
        if let Some(coin) = default_pay_currency {
            config.default_pay_currency = coin;
        }
        match (smtp_url, smtp_from) {
            (Some(url), from) => {
                let from = from.unwrap_or_else(|| SmtpConfig::DEFAULT_FROM.to_string());
                config.smtp = Some(SmtpConfig { url, from });
            }
            (None, Some(_)) => return Err(bad("smtp_from", "needs smtp_url")),
            (None, None) => {}
        }
        match (esplora_url, bitcoin_confirmations) {
            (Some(esplora_url), confirmations) => {
                let confirmations = confirmations.unwrap_or(BitcoinWatch::DEFAULT_CONFIRMATIONS);
                config.bitcoin_watch = Some(BitcoinWatch { esplora_url, confirmations });
            }
            (None, Some(_)) => return Err(bad("bitcoin_confirmations", "needs esplora_url")),
            (None, None) => {}
        }
        match (ethereum_rpc_url, ethereum_confirmations, ethereum_tokens) {
            (Some(rpc_url), confirmations, tokens) => {
                let mut watch = EthereumWatch::new(environment, rpc_url);
                watch.confirmations = confirmations.unwrap_or(EthereumWatch::DEFAULT_CONFIRMATIONS);
                if let Some(tokens) = tokens {
                    watch.tokens = tokens;
                }
                config.ethereum_watch = Some(watch);
            }
            (None, Some(_), _) => return Err(bad("ethereum_confirmations", "needs ethereum_rpc_url")),
            (None, _, Some(_)) => return Err(bad("ethereum_tokens", "needs ethereum_rpc_url")),
            (None, None, None) => {}
        }
        // A value of the right type that the service cannot use is refused here too, as
        // the option's fault, rather than as the service's at open.
        match config.problem() {
            Some((setting, rule)) => Err(bad(&setting, &rule)),
            None => Ok(config),
        }
    }
}

/// Where the payment page is always served, whatever `payment_page_url` says.
pub(crate) const DEFAULT_PAGE_PATH: &str = "/pay";

/// The path the configured `payment_page_url` points at, when the page can be served
/// there too: not the root and nothing under `/v1`, which belong to the API.
pub(crate) fn configured_page_path(payment_page_url: &str) -> Option<String> {
    let path = page_path_of(payment_page_url)?;
    (!path_belongs_to_the_api(&path) && path != DEFAULT_PAGE_PATH).then_some(path)
}

/// The path of `payment_page_url` (`""` for the root) when [`crate::Service::handle`]
/// cannot answer the page there, because the path belongs to the API: the root, or
/// anything under `/v1`. Payment links of such a service work only behind a proxy that
/// sends that path to `/pay`, where the page is always answered. `None` otherwise.
pub fn unanswered_page_path(payment_page_url: &str) -> Option<String> {
    page_path_of(payment_page_url).filter(|path| path_belongs_to_the_api(path))
}

fn page_path_of(payment_page_url: &str) -> Option<String> {
    let url = url::Url::parse(payment_page_url).ok()?;
    Some(url.path().trim_end_matches('/').to_string())
}

fn path_belongs_to_the_api(path: &str) -> bool {
    path.is_empty() || path == "/v1" || path.starts_with("/v1/")
}

#[cfg(test)]
mod options_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_page_url_at_the_root_or_under_v1_is_not_answered_at_its_own_path() {
        assert_eq!(unanswered_page_path("https://pay.shop.example/").as_deref(), Some(""));
        assert_eq!(unanswered_page_path("https://pay.shop.example").as_deref(), Some(""));
        assert_eq!(unanswered_page_path("https://shop.example/v1/pay").as_deref(), Some("/v1/pay"));
        assert_eq!(unanswered_page_path("https://shop.example/checkout"), None);
        assert_eq!(unanswered_page_path("https://shop.example/pay"), None);
        assert_eq!(configured_page_path("https://shop.example/checkout/").as_deref(), Some("/checkout"));
        assert_eq!(configured_page_path("https://shop.example/"), None);
    }

    #[test]
    fn fields_set_directly_are_held_to_the_bounds_options_are() {
        let refused = |change: fn(&mut Config), expected: &str| {
            let mut config = Config::new(Environment::Sandbox);
            change(&mut config);
            let error = config.validate().expect_err(expected).to_string();
            assert!(error.contains(expected), "{error}");
        };
        refused(|c| c.invoice_ttl = Duration::ZERO, "invoice_ttl: must be more than 0");
        refused(|c| c.invoice_ttl = Duration::MAX, "invoice_ttl: must be more than 0 and at most 365 days");
        refused(|c| c.busy_timeout = Duration::from_secs(30 * 86_400), "busy_timeout_ms: must be at most");
        refused(|c| c.webhook_timeout = Duration::ZERO, "webhook_timeout_secs: must be more than 0");
        refused(|c| c.delivery_concurrency = 0, "delivery_concurrency: must be from 1 to 256");
        refused(|c| c.delivery_concurrency = usize::MAX, "delivery_concurrency: must be from 1 to 256");
        refused(|c| c.retry_schedule = vec![Duration::MAX], "retry_schedule: each delay must be at most 365 days");
        let mut at_the_bounds = Config::new(Environment::Sandbox);
        at_the_bounds.invoice_ttl = Duration::from_secs(MAX_INVOICE_TTL_SECS);
        at_the_bounds.busy_timeout = Duration::from_millis(MAX_BUSY_TIMEOUT_MS);
        at_the_bounds.webhook_timeout = Duration::from_millis(1);
        at_the_bounds.delivery_concurrency = MAX_DELIVERY_CONCURRENCY;
        at_the_bounds.retry_schedule = vec![Duration::from_secs(MAX_INVOICE_TTL_SECS)];
        assert!(at_the_bounds.validate().is_ok());
    }

    #[test]
    fn options_set_what_they_name_and_refuse_what_they_do_not_know() -> Result<()> {
        let config = Config::from_options(&json!({
            "environment": "live", "invoice_ttl": 60, "rate_limit": 0, "synchronous": "normal",
            "pay_currencies": ["BTC"], "default_pay_currency": "BTC", "webhook_timeout_secs": 2,
            "background_checkpoints": false,
        }))?;
        assert_eq!(config.environment, Environment::Live);
        assert_eq!(config.invoice_ttl, Duration::from_secs(60));
        assert_eq!(config.rate_limit.per_second, 0);
        assert!(!config.sqlite.synchronous_full);
        assert!(!config.sqlite.background_checkpoints);
        assert!(Config::new(Environment::Sandbox).sqlite.background_checkpoints, "on unless turned off");
        assert_eq!(
            (config.pay_currencies.as_slice(), config.default_pay_currency.as_str()),
            (&["BTC".to_string()][..], "BTC")
        );
        assert_eq!(Config::from_options(&serde_json::Value::Null)?.environment, Environment::Sandbox);
        // The first coin is the default unless named, whichever option comes first.
        let first = Config::from_options(&json!({"pay_currencies": ["BTC", "ETH"]}))?;
        assert_eq!(first.default_pay_currency, "BTC");
        let named = Config::from_options(&json!({"default_pay_currency": "ETH", "pay_currencies": ["BTC", "ETH"]}))?;
        assert_eq!(named.default_pay_currency, "ETH");
        for (options, field) in [
            (json!({"invoice_tll": 60}), "config.invoice_tll: unknown option"),
            (json!({"invoice_ttl": 0}), "config.invoice_ttl: must be a whole number from 1 to 31536000"),
            (json!({"environment": "prod"}), "config.environment: must be \"sandbox\" or \"live\""),
            (json!({"synchronous": true}), "config.synchronous: must be a string"),
            (json!({"background_checkpoints": "no"}), "config.background_checkpoints: must be true or false"),
            (json!([1]), "config: must be a JSON object"),
            // Values of the right type that the service cannot use are the option's fault too.
            (
                json!({"payment_page_url": "not a url"}),
                "config.payment_page_url: must be an absolute http:// or https:// URL",
            ),
            (
                json!({"payment_page_url": "ftp://shop.example/pay"}),
                "config.payment_page_url: must be an absolute http:// or https:// URL",
            ),
            (json!({"pay_currencies": []}), "config.pay_currencies: must name at least one coin"),
            (
                json!({"pay_currencies": ["DOGE"]}),
                "config.pay_currencies: unknown coin \"DOGE\" (known: USDT, USDC, BTC, ETH, LTC, TRX, SOL)",
            ),
            (
                json!({"pay_currencies": ["BTC"], "default_pay_currency": "ETH"}),
                "config.default_pay_currency: \"ETH\" is not one of pay_currencies (BTC)",
            ),
            (json!({"smtp_url": "nope"}), "config.smtp_url: not a URL (relative URL without a base)"),
            (
                json!({"smtp_url": "smtp://mail.example", "smtp_from": "me"}),
                "config.smtp_from: \"me\" is not an e-mail address (e.g. `Shop <pay@shop.example>`)",
            ),
            (json!({"esplora_url": "x"}), "config.esplora_url: must be an http:// or https:// URL"),
            (
                json!({"ethereum_rpc_url": "http://node.example", "ethereum_tokens": {"DAI": "0x"}}),
                "config.ethereum_tokens.DAI: only USDT and USDC are ERC-20 coins we quote",
            ),
        ] {
            let err = Config::from_options(&options).expect_err("refused");
            assert_eq!((err.error_code(), err.to_string()), ("PARAMETERS_MISSING", field.to_string()));
        }
        // The Rust API's own `Config` gets the same rules at open, as a configuration error.
        let mut config = Config::new(Environment::Sandbox);
        config.pay_currencies = vec!["DOGE".into()];
        let err = config.validate().expect_err("refused");
        assert!(matches!(err.kind(), crate::ErrorKind::Config(_)), "{err:?}");
        assert!(err.to_string().starts_with("invalid configuration: pay_currencies: unknown coin \"DOGE\""), "{err}");
        Ok(())
    }
}
