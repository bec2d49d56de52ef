//! Helpers for the webhook acceptance tests (issue 4): a service over a real SQLite file
//! with one key, order and payment shortcuts that write events, a scriptable local HTTP
//! receiver ([`receiver`]) and signature checks with our verifier and with the public
//! `standardwebhooks` Python package.
//!
//! Test files include it with `mod support;`.

#![allow(dead_code)]

#[path = "../common/backend.rs"]
pub mod backend;
pub mod receiver;

#[allow(unused_imports)]
pub use backend::{on_postgres, RawDb};

use std::io::Write;
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use coinorder::money::Decimal;
use coinorder::{
    Config, CreateOrder, CreatedApiKey, Environment, Event, EventDelivery, ManualClock, Merchant, NewApiKey, RateLimit,
    Service, SystemClock,
};
use serde_json::json;

pub use receiver::{Receiver, Recorded, Reply};

/// 2026-11-22T05:51:22.123Z as Unix epoch milliseconds: where manual clocks start.
pub const T0_MS: i64 = 1_795_326_682_123;

/// One second, five seconds and five minutes in ms.
pub const SEC_MS: i64 = 1_000;
/// The first retry delay of the default schedule.
pub const FIVE_S_MS: i64 = 5_000;
/// The second retry delay of the default schedule.
pub const FIVE_MIN_MS: i64 = 5 * 60_000;
/// The third retry delay of the default schedule.
pub const THIRTY_MIN_MS: i64 = 30 * 60_000;

/// Generous bound on any wait for the receiver.
pub const WAIT: Duration = Duration::from_secs(10);

/// A service over a fresh database file with one active key (no webhook URL).
pub struct Env {
    /// Keeps the temporary directory alive for the test's duration.
    pub dir: tempfile::TempDir,
    /// The manual clock, when the service runs on one (`None`: real time).
    pub clock: Option<Arc<ManualClock>>,
    /// The service under test.
    pub svc: Service,
    /// The key (with its plain key and first signing secret).
    pub key: CreatedApiKey,
    /// The merchant behind `key`.
    pub merchant: Merchant,
}

/// A sandbox service on a manual clock standing at [`T0_MS`].
pub fn manual(adjust: impl FnOnce(&mut Config)) -> Env {
    open(Environment::Sandbox, true, adjust)
}

/// A sandbox service on the real clock (for the Python verifier, which checks the
/// timestamp against real time).
pub fn real(adjust: impl FnOnce(&mut Config)) -> Env {
    open(Environment::Sandbox, false, adjust)
}

/// A service for `environment`, on a manual clock or the real one; `adjust` tweaks the
/// config before opening.
pub fn open(environment: Environment, manual_clock: bool, adjust: impl FnOnce(&mut Config)) -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = manual_clock.then(|| Arc::new(ManualClock::new(T0_MS)));
    let mut config = Config::new(environment);
    config.rate_limit = RateLimit::OFF;
    config.clock = match &clock {
        Some(clock) => clock.clone(),
        None => Arc::new(SystemClock),
    };
    config.secret_key_path = backend::shared_key_file();
    adjust(&mut config);
    let svc = Service::open(backend::db_in(dir.path()), config).expect("open service");
    let key = svc.create_key(NewApiKey { user_id: 7, environment, webhook_url: None }).expect("create key");
    let merchant = svc.authenticate(Some(key.plain_key.expose())).expect("authenticate");
    if environment == Environment::Live {
        svc.set_rate("USDT", "USD", Decimal::ONE, None).expect("set live rate");
    }
    Env { dir, clock, svc, key, merchant }
}

static TXIDS: AtomicUsize = AtomicUsize::new(0);

/// An exact decimal from its text.
pub fn dec(text: &str) -> Decimal {
    Decimal::from_str(text).unwrap_or_else(|e| panic!("bad decimal {text:?}: {e}"))
}

impl Env {
    /// The database: the SQLite file, or this test's PostgreSQL database (see [`backend`]).
    pub fn db_path(&self) -> std::path::PathBuf {
        backend::db_in(self.dir.path())
    }

    /// The service's current time in ms.
    pub fn now_ms(&self) -> i64 {
        self.svc.config().clock.now_ms()
    }

    /// The service's current time in Unix seconds.
    pub fn now_secs(&self) -> i64 {
        self.now_ms().div_euclid(1000)
    }

    /// The manual clock (panics on a real-time service).
    pub fn clock(&self) -> &ManualClock {
        self.clock.as_deref().expect("this test needs a manual clock")
    }

    /// Moves the manual clock on by `ms`.
    pub fn advance(&self, ms: i64) {
        self.clock().advance_ms(ms);
    }

    /// Sets the manual clock to `ms`.
    pub fn set_time(&self, ms: i64) {
        self.clock().set_ms(ms);
    }

    /// The key's id.
    pub fn key_id(&self) -> &str {
        &self.key.key.id
    }

    /// The key's current signing secret.
    pub fn secret(&self) -> String {
        self.svc.key_webhook_secret(self.key_id()).expect("key secret").expose().to_string()
    }

    /// Creates a USD 10 order paid in USDT (exactly 10 USDT) with an optional webhook URL.
    pub fn order(&self, webhook_url: Option<&str>) -> String {
        let request = CreateOrder {
            currency: "USD".into(),
            amount: Decimal::TEN,
            pay_currency: Some("USDT".into()),
            webhook_url: webhook_url.map(str::to_string),
            ..CreateOrder::default()
        };
        let created = self.svc.create_order(&self.merchant, &request).expect("create order");
        created.order.order.order_id
    }

    /// Records a confirmed payment of `amount` USDT; returns the events it wrote.
    pub fn pay(&self, order_id: &str, amount: &str) -> Vec<Event> {
        let txid = format!("tx_{}_{}", std::process::id(), TXIDS.fetch_add(1, Ordering::SeqCst));
        self.svc.record_payment(order_id, &txid, dec(amount), true).expect("record payment").events
    }

    /// An order paid in full at once: exactly one event, `order.paid`.
    pub fn paid_order(&self, webhook_url: Option<&str>) -> (String, Event) {
        let order_id = self.order(webhook_url);
        let mut events = self.pay(&order_id, "10");
        assert_eq!(events.len(), 1, "paying in full writes one event: {events:?}");
        (order_id, events.remove(0))
    }

    /// Every event of the order with its delivery state, by sequence.
    pub fn deliveries(&self, order_id: &str) -> Vec<EventDelivery> {
        self.svc.event_deliveries(order_id).expect("event deliveries")
    }

    /// The delivery state of one event.
    pub fn delivery(&self, event: &Event) -> EventDelivery {
        self.deliveries(&event.order_id)
            .into_iter()
            .find(|d| d.event.event_id == event.event_id)
            .unwrap_or_else(|| panic!("event {} not listed for its order", event.event_id))
    }

    /// One `deliver_due` round of up to 100 events.
    pub fn deliver(&self) -> coinorder::DeliveryReport {
        self.svc.deliver_due(100).expect("deliver_due")
    }
}

/// Checks a received request with our own verifier at `now_secs`.
pub fn our_verify(secret: &str, request: &Recorded, now_secs: i64) -> Result<(), coinorder::signature::VerifyError> {
    coinorder::signature::verify(
        secret,
        request.header("webhook-id"),
        request.header("webhook-timestamp"),
        request.header("webhook-signature"),
        &request.body,
        now_secs,
    )
}

/// Checks a received request with the public `standardwebhooks` Python package (which
/// compares the timestamp with real time). `Err` carries the script's message.
pub fn python_verify(secret: &str, request: &Recorded) -> Result<(), String> {
    python_verify_parts(secret, &request.headers, &request.body)
}

/// Like [`python_verify`], with the headers and body given separately (to tamper).
pub fn python_verify_parts(secret: &str, headers: &[(String, String)], body: &[u8]) -> Result<(), String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/verify_standardwebhooks.py");
    let header_map: serde_json::Map<String, serde_json::Value> =
        headers.iter().map(|(n, v)| (n.clone(), json!(v))).collect();
    let input = json!({
        "secret": secret,
        "headers": header_map,
        "body_b64": base64::engine::general_purpose::STANDARD.encode(body),
    });
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
    let mut child = Command::new(&python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python} (needed for the standardwebhooks check): {e}"));
    child.stdin.take().expect("stdin").write_all(input.to_string().as_bytes()).expect("write to python");
    let output = child.wait_with_output().expect("python output");
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    match output.status.code() {
        Some(0) => Ok(()),
        Some(1) => Err(stderr),
        other => panic!("the standardwebhooks verifier could not run (exit {other:?}): {stderr}"),
    }
}

/// `actual` lies within ±20 % of `base` (a jittered schedule entry), both in ms.
pub fn assert_jittered(actual: i64, base: i64, what: &str) {
    let low = base * 8 / 10;
    let high = base * 12 / 10;
    assert!((low..=high).contains(&actual), "{what}: delay {actual} ms is not within ±20 % of {base} ms");
}
