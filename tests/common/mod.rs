//! Shared helpers for the wire-level acceptance tests: a service over a real SQLite file
//! in a temporary directory, a manual clock, request builders and shape checkers.
//!
//! With `COINORDER_TEST_POSTGRES` set to a PostgreSQL server's URL (`scripts/test` starts
//! one), the same tests run on PostgreSQL instead: every harness gets a fresh database
//! on that server, and the services share one secret key file.

#![allow(dead_code)]

pub mod backend;
pub mod scripted_node;
pub mod wallets;

use std::path::PathBuf;
use std::sync::Arc;

#[allow(unused_imports)]
pub use backend::{on_postgres, postgres_server, shared_key_file, RawDb};

use coinorder::{Config, Environment, ManualClock, NewApiKey, RateLimit, Service, WireRequest, WireResponse};
use serde_json::{json, Value};

/// 2026-11-22T05:51:22.123Z as Unix epoch milliseconds.
pub const T0_MS: i64 = 1_795_326_682_123;
/// The ISO 8601 form of [`T0_MS`].
pub const T0_ISO: &str = "2026-11-22T05:51:22.123Z";
/// Thirty minutes in milliseconds (the default invoice TTL).
pub const THIRTY_MIN_MS: i64 = 30 * 60 * 1000;

/// A sandbox or live service over a fresh database file, with a manual clock and one
/// active key.
pub struct Harness {
    /// Keeps the temporary directory alive for the test's duration.
    pub dir: tempfile::TempDir,
    /// The service's clock.
    pub clock: Arc<ManualClock>,
    /// The service under test.
    pub svc: Service,
    /// A plain, active API key of `user_id`.
    pub key: String,
    /// The id of `key`.
    pub key_id: String,
    /// The merchant account `key` belongs to.
    pub user_id: i64,
}

impl Harness {
    /// The database file path.
    pub fn db(&self) -> PathBuf {
        db_path(&self.dir)
    }

    /// POSTs `body` to /v1/orders with the harness key.
    pub fn post(&self, body: &Value) -> WireResponse {
        post_json(&self.svc, &self.key, body)
    }

    /// POSTs raw bytes to /v1/orders with the harness key.
    pub fn post_raw(&self, body: impl Into<Vec<u8>>) -> WireResponse {
        post_raw(&self.svc, &self.key, body)
    }

    /// GETs `path` with the harness key.
    pub fn get(&self, path: &str) -> WireResponse {
        get(&self.svc, &self.key, path)
    }

    /// Creates an order and returns the whole 201 body.
    pub fn create(&self, body: &Value) -> Value {
        create_ok(&self.svc, &self.key, body)
    }

    /// Creates a key for another merchant (or the same one) in `environment`.
    pub fn new_key(&self, user_id: i64, environment: Environment) -> (String, String) {
        new_key(&self.svc, user_id, environment)
    }
}

/// The database of the test owning `dir` (a SQLite file, or a PostgreSQL database of
/// its own when the suite runs there: see [`backend`]).
pub fn db_path(dir: &tempfile::TempDir) -> PathBuf {
    backend::db_in(dir.path())
}

/// A config for `environment` on `clock`, with the rate limit off (and on PostgreSQL the
/// shared secret key file).
pub fn config(environment: Environment, clock: &Arc<ManualClock>) -> Config {
    let mut config = Config::new(environment);
    config.clock = clock.clone();
    config.rate_limit = RateLimit::OFF;
    config.secret_key_path = shared_key_file();
    config
}

/// A sandbox harness, user 42, clock at [`T0_MS`], rate limit off.
pub fn harness() -> Harness {
    harness_with(Environment::Sandbox, |_| {})
}

/// A harness for `environment` whose config `adjust` may change before opening.
pub fn harness_with(environment: Environment, adjust: impl FnOnce(&mut Config)) -> Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(T0_MS));
    let mut cfg = config(environment, &clock);
    adjust(&mut cfg);
    let svc = Service::open(db_path(&dir), cfg).expect("open service");
    let user_id = 42;
    let (key, key_id) = new_key(&svc, user_id, environment);
    Harness { dir, clock, svc, key, key_id, user_id }
}

/// Creates an active key; returns (plain key, key id).
pub fn new_key(svc: &Service, user_id: i64, environment: Environment) -> (String, String) {
    let created = svc.create_key(NewApiKey { user_id, environment, webhook_url: None }).expect("create key");
    (created.plain_key.expose().to_string(), created.key.id.clone())
}

/// A POST /v1/orders request with `key` and a JSON content type.
pub fn post_request(key: &str, body: impl Into<Vec<u8>>) -> WireRequest {
    WireRequest::new("POST", "/v1/orders")
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .body(body)
}

/// POSTs raw bytes to /v1/orders.
pub fn post_raw(svc: &Service, key: &str, body: impl Into<Vec<u8>>) -> WireResponse {
    svc.handle(&post_request(key, body))
}

/// POSTs a JSON value to /v1/orders.
pub fn post_json(svc: &Service, key: &str, body: &Value) -> WireResponse {
    post_raw(svc, key, serde_json::to_vec(body).expect("serialize"))
}

/// GETs `path` with `key`.
pub fn get(svc: &Service, key: &str, path: &str) -> WireResponse {
    svc.handle(&WireRequest::new("GET", path).header("x-api-key", key))
}

/// The response body as text (for diagnostics and raw-byte checks).
pub fn text(resp: &WireResponse) -> String {
    String::from_utf8_lossy(&resp.body).into_owned()
}

/// Creates an order, asserting 201, and returns the whole body.
pub fn create_ok(svc: &Service, key: &str, body: &Value) -> Value {
    let resp = post_json(svc, key, body);
    assert_eq!(resp.status, 201, "create {body} -> {}", text(&resp));
    assert_json_content_type(&resp);
    resp.json()
}

/// A minimal valid create body.
pub fn minimal_order() -> Value {
    json!({"currency": "USD", "amount": 10})
}

/// The value of header `name` (case-insensitive).
pub fn header<'a>(resp: &'a WireResponse, name: &str) -> Option<&'a str> {
    resp.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// Asserts the response declares a JSON body and the body parses as JSON.
pub fn assert_json_content_type(resp: &WireResponse) {
    let ct = header(resp, "content-type").unwrap_or("");
    assert!(ct.starts_with("application/json"), "content-type {ct:?} for {}", text(resp));
    serde_json::from_slice::<Value>(&resp.body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", text(resp)));
}

/// Asserts an error response: HTTP `status`, body exactly
/// `{"status":<status>,"error_code":<code>,"error":<text>}` (plus `eror` for
/// ORDER_NOT_VALID, with the same text). Returns the `error` text.
pub fn assert_error(resp: &WireResponse, status: u16, code: &str) -> String {
    assert_eq!(resp.status, status, "HTTP status; body {}", text(resp));
    assert_json_content_type(resp);
    let v = resp.json();
    let obj = v.as_object().unwrap_or_else(|| panic!("error body not an object: {v}"));
    assert_eq!(v["status"].as_i64(), Some(i64::from(status)), "body status must be the integer HTTP status: {v}");
    assert_eq!(v["error_code"].as_str(), Some(code), "error_code: {v}");
    let message = v["error"].as_str().unwrap_or_else(|| panic!("error must be a string: {v}")).to_string();
    assert!(!message.is_empty(), "empty error message: {v}");
    let mut expected_keys = vec!["error", "error_code", "status"];
    if code == "ORDER_NOT_VALID" {
        assert_eq!(
            v["eror"].as_str(),
            Some(message.as_str()),
            "ORDER_NOT_VALID must carry `eror` with the same text: {v}"
        );
        expected_keys.push("eror");
    }
    expected_keys.sort_unstable();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, expected_keys, "error body members: {v}");
    message
}

/// Asserts a 400 with `code` whose message has the form `<field>: <rule>`.
pub fn assert_field_error(resp: &WireResponse, code: &str, field: &str) -> String {
    let message = assert_error(resp, 400, code);
    let prefix = format!("{field}: ");
    assert!(
        message.starts_with(&prefix) && message.len() > prefix.len(),
        "message must be `{field}: <rule>`, got {message:?}"
    );
    message
}

/// A 400 PARAMETERS_MISSING naming `field`.
pub fn assert_invalid(resp: &WireResponse, field: &str) -> String {
    assert_field_error(resp, "PARAMETERS_MISSING", field)
}

/// The sorted member names of a JSON object.
pub fn keys_of(v: &Value) -> Vec<String> {
    let mut keys: Vec<String> = v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().cloned().collect();
    keys.sort_unstable();
    keys
}

/// `names` sorted, as owned strings, for comparison with [`keys_of`].
pub fn sorted(names: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    names.sort_unstable();
    names
}

/// ISO 8601 UTC with milliseconds for `ms`, computed independently of the library
/// (days-from-civil inverse, H. Hinnant).
pub fn iso_from_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let mut year = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    if month <= 2 {
        year += 1;
    }
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", sod / 3600, (sod % 3600) / 60, sod % 60)
}

/// True for `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn is_iso_ms(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            23 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// True for a lower- or upper-case 8-4-4-4-12 hex UUID.
pub fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts.iter().zip([8, 4, 4, 4, 12]).all(|(p, n)| p.len() == n && p.bytes().all(|c| c.is_ascii_hexdigit()))
}

/// True when every byte is `[0-9A-Za-z]`.
pub fn is_base62(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric())
}

/// The integer value of a JSON member that must be an integer (not a float, bool or string).
pub fn int(v: &Value, name: &str) -> i64 {
    let member = &v[name];
    assert!(member.is_number(), "{name} must be a JSON number: {v}");
    member.as_i64().unwrap_or_else(|| panic!("{name} must be an integer: {member}"))
}

/// The string value of a JSON member that must be a string.
pub fn string<'a>(v: &'a Value, name: &str) -> &'a str {
    v[name].as_str().unwrap_or_else(|| panic!("{name} must be a string: {v}"))
}

/// Every order of the harness key's merchant, paging with limit 50.
pub fn list_all(svc: &Service, key: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut offset = 0;
    loop {
        let resp = get(svc, key, &format!("/v1/orders?limit=50&offset={offset}"));
        assert_eq!(resp.status, 200, "list: {}", text(&resp));
        let page = resp.json()["orders"]
            .as_array()
            .unwrap_or_else(|| panic!("orders must be an array: {}", text(&resp)))
            .clone();
        let n = page.len();
        assert!(n <= 50, "page larger than the limit: {n}");
        all.extend(page);
        if n < 50 {
            return all;
        }
        offset += 50;
    }
}

/// The order ids of a list of orders, in order.
pub fn ids(orders: &[Value]) -> Vec<String> {
    orders.iter().map(|o| string(o, "order_id").to_string()).collect()
}
