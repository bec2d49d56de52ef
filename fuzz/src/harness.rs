//! The fuzz harness shared by the fuzz targets (`fuzz/fuzz_targets/`) and the regression
//! test of the root crate (`tests/fuzz_regressions.rs`, which includes this file with
//! `#[path]`): the service under test, the request text format and the invariants.
//!
//! It uses only what the root crate's tests can use too: `coinorder`, `serde_json` and
//! `tempfile`.
//!
//! # The request text format
//!
//! Every input of the `handle` target is kept (in `fuzz/regressions/handle/`,
//! `fuzz/findings/handle/`) as one HTTP-shaped request in plain text:
//!
//! ```text
//! POST                       <- line 1: the method
//! /v1/orders?limit=5         <- line 2: the path with its query
//! x-api-key: {KEY}           <- header lines `name: value`, up to a blank line
//!
//! {"currency":"USD","amount":"19.99"}   <- the rest, byte for byte, is the body
//! ```
//!
//! Lines end in `\n` (a `\r` before it is dropped). The head is decoded as UTF-8 with
//! invalid bytes replaced by U+FFFD, as an HTTP server hands over strings. In the path
//! and the header values `{KEY}` stands for the fixture's sandbox key, `{OTHER_KEY}` for
//! another merchant's sandbox key, `{LIVE_KEY}` for a live key and `{ORDER}` for the id
//! of the order that exists from the start (the body is never rewritten).

use coinorder::money::Decimal;
use coinorder::{
    parse_create_order, parse_list_query, parse_simulate, Config, CreateOrder, Environment, NewApiKey, Service,
    WireRequest, WireResponse,
};
use serde_json::{json, Map, Value};

/// Placeholder for the fixture's sandbox key (merchant [`MERCHANT`]).
pub const KEY: &str = "{KEY}";
/// Placeholder for another merchant's sandbox key (merchant [`OTHER_MERCHANT`]).
pub const OTHER_KEY: &str = "{OTHER_KEY}";
/// Placeholder for a live key, which the sandbox service must refuse.
pub const LIVE_KEY: &str = "{LIVE_KEY}";
/// Placeholder for the id of the order created at start (owned by [`MERCHANT`]).
pub const ORDER: &str = "{ORDER}";

/// The `user_id` of [`KEY`].
pub const MERCHANT: i64 = 1;
/// The `user_id` of [`OTHER_KEY`].
pub const OTHER_MERCHANT: i64 = 2;

/// The HTTP statuses the wire layer may answer with; anything else (a 500 above all) is
/// a finding.
pub const ALLOWED_STATUSES: [u16; 5] = [200, 201, 400, 401, 404];

/// A sandbox service over a SQLite file in a temporary directory, with its keys and one
/// existing order.
pub struct Fixture {
    /// The service under test.
    pub service: Service,
    /// The plain sandbox key of [`MERCHANT`].
    pub key: String,
    /// The plain sandbox key of [`OTHER_MERCHANT`].
    pub other_key: String,
    /// A plain live key (refused by the sandbox service).
    pub live_key: String,
    /// The order created at start, owned by [`MERCHANT`].
    pub order_id: String,
    // Dropped last: the database lives in it.
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// Opens the service (`synchronous = "normal"`, rate limit off) on a fresh file and
    /// creates the keys and the order.
    pub fn new() -> Result<Fixture, String> {
        let dir = tempfile::Builder::new().prefix("coinorder-fuzz-").tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let config = Config::from_options(&json!({"synchronous": "normal", "rate_limit": 0}))
            .map_err(|e| format!("config: {e}"))?;
        let service = Service::open(dir.path().join("fuzz.db"), config).map_err(|e| format!("open: {e}"))?;
        let new_key = |user_id: i64, environment: Environment| {
            service
                .create_key(NewApiKey { user_id, environment, webhook_url: None })
                .map(|created| created.plain_key.expose().to_string())
                .map_err(|e| format!("create_key: {e}"))
        };
        let key = new_key(MERCHANT, Environment::Sandbox)?;
        let other_key = new_key(OTHER_MERCHANT, Environment::Sandbox)?;
        let live_key = new_key(MERCHANT, Environment::Live)?;
        let merchant = service.authenticate(Some(&key)).map_err(|e| format!("authenticate: {e}"))?;
        let order = service
            .create_order(
                &merchant,
                &CreateOrder {
                    merchant_order_id: Some("fuzz-fixture-order".to_string()),
                    currency: "USD".to_string(),
                    amount: Decimal::new(1999, 2),
                    title: Some("Fuzz fixture".to_string()),
                    ..Default::default()
                },
            )
            .map_err(|e| format!("create_order: {e}"))?;
        let order_id = order.order.order.order_id;
        Ok(Fixture { service, key, other_key, live_key, order_id, _dir: dir })
    }

    /// Replaces the placeholders in `text` with this fixture's keys and order id.
    pub fn expand(&self, text: &str) -> String {
        if !text.contains('{') {
            return text.to_string();
        }
        text.replace(OTHER_KEY, &self.other_key)
            .replace(LIVE_KEY, &self.live_key)
            .replace(KEY, &self.key)
            .replace(ORDER, &self.order_id)
    }

    /// The merchant a request authenticates as, if its `x-api-key` is a valid sandbox key.
    fn merchant_of(&self, request: &WireRequest) -> Option<i64> {
        match request.header_value("x-api-key").map(str::trim) {
            Some(key) if key == self.key => Some(MERCHANT),
            Some(key) if key == self.other_key => Some(OTHER_MERCHANT),
            _ => None,
        }
    }
}

/// Decodes one request in the text format (see the module docs), placeholders expanded.
pub fn decode_request(fixture: &Fixture, input: &[u8]) -> WireRequest {
    let mut rest = input;
    let mut next_line = || -> Option<String> {
        if rest.is_empty() {
            return None;
        }
        let (line, after) = match rest.iter().position(|&b| b == b'\n') {
            Some(at) => (&rest[..at], &rest[at + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        rest = after;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        Some(String::from_utf8_lossy(line).into_owned())
    };
    let method = next_line().unwrap_or_default();
    let path = fixture.expand(&next_line().unwrap_or_default());
    let mut request = WireRequest::new(&method, &path);
    while let Some(line) = next_line() {
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap_or((line.as_str(), ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        request.headers.push((name.to_string(), fixture.expand(value)));
    }
    request.body = rest.to_vec();
    request
}

/// Decodes `input`, sends it through [`Service::handle`] and checks the response.
pub fn run_handle(fixture: &Fixture, input: &[u8]) -> Result<(), String> {
    let request = decode_request(fixture, input);
    let response = fixture.service.handle(&request);
    check_response(fixture, &request, &response)
}

fn header<'a>(response: &'a WireResponse, name: &str) -> Option<&'a str> {
    response.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// The invariants of every answer of the wire layer:
/// - the status is one of [`ALLOWED_STATUSES`] (500 is a finding);
/// - there is a `content-type`; a JSON one has a JSON object body, an HTML one UTF-8;
/// - under `/v1` the body is JSON whose `status` is the HTTP status;
/// - every JSON error has `status` = the HTTP status and string `error_code` and `error`;
/// - a 2xx under `/v1` was authenticated by one of the fixture's sandbox keys, and
///   every order in it belongs to that key's merchant;
/// - a 201 created an order with an amount greater than 0.
pub fn check_response(fixture: &Fixture, request: &WireRequest, response: &WireResponse) -> Result<(), String> {
    let status = response.status;
    let excerpt = || String::from_utf8_lossy(&response.body[..response.body.len().min(600)]).into_owned();
    if !ALLOWED_STATUSES.contains(&status) {
        return Err(format!("status {status} is not one of {ALLOWED_STATUSES:?}; body: {}", excerpt()));
    }
    let content_type = header(response, "content-type").ok_or("no content-type header")?;
    let path = request.path.split_once('?').map_or(request.path.as_str(), |(path, _)| path);
    let json_body = if content_type.starts_with("application/json") {
        match serde_json::from_slice::<Value>(&response.body) {
            Ok(Value::Object(body)) => Some(body),
            _ => {
                return Err(format!(
                    "{status}: content-type {content_type} but the body is no JSON object: {}",
                    excerpt()
                ))
            }
        }
    } else if content_type.starts_with("text/html") {
        std::str::from_utf8(&response.body).map_err(|e| format!("{status}: HTML body is not UTF-8: {e}"))?;
        None
    } else {
        return Err(format!("{status}: unexpected content-type {content_type:?}"));
    };
    if path.starts_with("/v1") && json_body.is_none() {
        return Err(format!("{status} under /v1 with content-type {content_type:?}"));
    }
    let Some(body) = json_body else { return Ok(()) };
    let status_member = || body.get("status").and_then(Value::as_u64);
    if status >= 400 {
        if status_member() != Some(u64::from(status)) {
            return Err(format!("{status} error body has status {:?}: {}", body.get("status"), excerpt()));
        }
        for member in ["error_code", "error"] {
            if !body.get(member).is_some_and(Value::is_string) {
                return Err(format!("{status} error body has no string {member:?}: {}", excerpt()));
            }
        }
        return Ok(());
    }
    if !path.starts_with("/v1") {
        return Ok(());
    }
    if status_member() != Some(u64::from(status)) {
        return Err(format!("{status} body has status {:?}: {}", body.get("status"), excerpt()));
    }
    let merchant =
        fixture.merchant_of(request).ok_or_else(|| format!("{status} without a valid key: {}", excerpt()))?;
    check_orders_belong_to(&body, merchant).map_err(|e| format!("{status}: {e}: {}", excerpt()))?;
    if status == 201 {
        let amount = body.get("data").and_then(|data| data.get("amount")).map(Value::to_string).unwrap_or_default();
        match amount.parse::<Decimal>() {
            Ok(amount) if amount > Decimal::ZERO => {}
            _ => return Err(format!("201 with amount {amount:?}: {}", excerpt())),
        }
    }
    Ok(())
}

/// Every order object in a 2xx body (`data`, `order`, `orders[]`) has `user_id` = `merchant`.
fn check_orders_belong_to(body: &Map<String, Value>, merchant: i64) -> Result<(), String> {
    let mut orders: Vec<&Value> = ["data", "order"].iter().filter_map(|name| body.get(*name)).collect();
    if let Some(Value::Array(list)) = body.get("orders") {
        orders.extend(list);
    }
    for order in orders {
        let owner = order.get("user_id").and_then(Value::as_i64);
        if owner != Some(merchant) {
            return Err(format!("merchant {merchant} was shown an order of user_id {owner:?}"));
        }
    }
    Ok(())
}

/// The `parse_json` target's checks on arbitrary bytes: [`parse_create_order`] and
/// [`parse_simulate`] on the bytes, [`parse_list_query`] on them as text and
/// [`Config::from_options`] on them as JSON must not panic, and
/// - an accepted Create Order body was a JSON object with a string `currency`, and its
///   amount reads back the same when rendered and parsed again (nothing is rounded);
/// - accepted options were `null` or an object.
///
/// (`parse_create_order` checks types only: a zero or negative amount parses, and
/// Create Order's validation refuses it; that is checked end to end by [`run_handle`],
/// whose 201s must carry an amount above 0.)
pub fn check_parse_json(input: &[u8]) -> Result<(), String> {
    if let Ok(create) = parse_create_order(input) {
        let currency = match serde_json::from_slice::<Value>(input) {
            Ok(Value::Object(fields)) => fields.get("currency").and_then(Value::as_str).map(str::to_string),
            _ => return Err("parse_create_order accepted a body that is no JSON object".to_string()),
        };
        if currency.as_deref() != Some(create.currency.as_str()) {
            return Err(format!("currency {:?} parsed from a body whose currency is {currency:?}", create.currency));
        }
        for again in [
            format!(r#"{{"currency":"USD","amount":"{}"}}"#, create.amount),
            format!(r#"{{"currency":"USD","amount":{}}}"#, create.amount),
        ] {
            match parse_create_order(again.as_bytes()) {
                Ok(reparsed) if reparsed.amount == create.amount => {}
                other => {
                    return Err(format!(
                        "amount {} does not read back: {again} gives {:?}",
                        create.amount,
                        other.map(|r| r.amount).map_err(|e| e.to_string())
                    ))
                }
            }
        }
    }
    let _ = parse_simulate(input);
    let _ = parse_list_query(&String::from_utf8_lossy(input));
    if let Ok(options) = serde_json::from_slice::<Value>(input) {
        if Config::from_options(&options).is_ok() && !(options.is_null() || options.is_object()) {
            return Err(format!("Config::from_options accepted {options}"));
        }
    }
    Ok(())
}
