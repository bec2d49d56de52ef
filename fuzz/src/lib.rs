//! Fuzzing support for coinorder's wire layer and JSON request parsing.
//!
//! - [`harness`]: the service under test, the request text format and the invariants,
//!   shared with the root crate's `tests/fuzz_regressions.rs`;
//! - [`FuzzRequest`]: the structured input of the `handle` target, derived with
//!   `arbitrary` and biased toward the API's routes, which it renders in the text format;
//! - [`fixture`]: the one service per fuzzing process;
//! - [`export`]: writes the text form of the inputs run when `COINORDER_FUZZ_EXPORT`
//!   names a directory (how `scripts/fuzz keep` turns a corpus entry or a crash artifact
//!   into a readable regression file).

#![forbid(unsafe_code)]

pub mod harness;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::OnceLock;

use arbitrary::Arbitrary;

use crate::harness::{Fixture, KEY, LIVE_KEY, ORDER, OTHER_KEY};

/// The service every input of this process runs against, opened on first use.
pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| match Fixture::new() {
        Ok(fixture) => fixture,
        Err(error) => panic!("cannot set up the fuzz fixture: {error}"),
    })
}

/// When `COINORDER_FUZZ_EXPORT` names a directory, writes `input` there as
/// `<target>-<hash>.txt` (best effort: a write error is printed, not raised).
pub fn export(target: &str, input: &[u8]) {
    let Some(dir) = std::env::var_os("COINORDER_FUZZ_EXPORT") else { return };
    let mut hasher = DefaultHasher::new();
    input.hash(&mut hasher);
    let path = PathBuf::from(dir).join(format!("{target}-{:016x}.txt", hasher.finish()));
    if let Err(error) = std::fs::write(&path, input) {
        eprintln!("cannot write {}: {error}", path.display());
    }
}

/// The bytes as a Rust-style escaped string, for panic messages.
pub fn escaped(input: &[u8]) -> String {
    input.escape_ascii().to_string()
}

/// One request to `Service::handle`, structured so that most inputs reach a route.
#[derive(Debug, Arbitrary)]
pub struct FuzzRequest {
    method: Method,
    path: Path,
    query: Query,
    key: Key,
    headers: Vec<(String, String)>,
    body: Body,
}

#[derive(Debug, Arbitrary)]
enum Method {
    Get,
    Post,
    Put,
    Delete,
    Head,
    Options,
    Lower(bool),
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Path {
    Orders,
    OrdersSlash,
    Order(Id),
    Simulate(Id),
    Pay,
    PayStatus,
    PayCancel,
    PaySimulate,
    /// `/v1/orders/` followed by anything.
    UnderOrders(String),
    /// `/pay` followed by anything.
    UnderPay(String),
    Raw(String),
}

#[derive(Debug, Arbitrary)]
enum Id {
    Existing,
    /// A well-formed id of no order.
    Unknown,
    Text(String),
}

#[derive(Debug, Arbitrary)]
enum Query {
    None,
    Pairs(Vec<(QueryName, QueryValue)>),
    Raw(String),
}

#[derive(Debug, Arbitrary)]
enum QueryName {
    Id,
    Status,
    Limit,
    Offset,
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum QueryValue {
    Order,
    Status(u8),
    Int(i64),
    Digits(u8),
    Text(String),
}

#[derive(Debug, Arbitrary)]
enum Key {
    None,
    Valid,
    Other,
    Live,
    /// The valid key with whitespace around it.
    Padded,
    /// Two `x-api-key` headers.
    Duplicate(bool),
    /// The valid key's header name in another case.
    UpperName,
    Text(String),
    /// `test_` followed by anything.
    Sandboxish(String),
}

#[derive(Debug, Arbitrary)]
enum Body {
    Empty,
    Raw(Vec<u8>),
    Create(CreateBody),
    Simulate(SimulateBody),
    /// `[` or `{"a":` nested this deep.
    Nested(u16, bool),
}

#[derive(Debug, Arbitrary)]
struct CreateBody {
    currency: Currency,
    amount: Amount,
    fields: Vec<(Field, Scalar)>,
}

#[derive(Debug, Arbitrary)]
enum Currency {
    Usd,
    Eur,
    Jpy,
    Kwd,
    Lower,
    Missing,
    Value(Scalar),
}

#[derive(Debug, Arbitrary)]
enum Amount {
    Int(i64),
    /// Digits with a decimal point `scale` places from the right.
    Fixed(i64, u8),
    Exponent(i64, i16),
    Float(f64),
    /// A number inside a JSON string.
    Quoted(i64, u8),
    /// Inserted verbatim, JSON or not.
    Raw(String),
    Missing,
    Value(Scalar),
}

#[derive(Debug, Arbitrary)]
enum Field {
    MerchantOrderId,
    Title,
    Description,
    CallbackUrl,
    WebhookUrl,
    SuccessUrl,
    CancelUrl,
    CustomerEmail,
    PayCurrency,
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Text(String),
    Url(String),
    Email(String),
    Coin(u8),
    /// A string of this many `x`.
    Long(u16),
}

#[derive(Debug, Arbitrary)]
struct SimulateBody {
    action: Action,
    amount: Option<Amount>,
    confirmed: Option<Scalar>,
}

#[derive(Debug, Arbitrary)]
enum Action {
    Pay,
    Partial,
    Confirm,
    Reject,
    Cancel,
    Expire,
    Value(Scalar),
}

const STATUSES: [&str; 8] = ["NEW", "PENDING", "PAID", "UNDERPAID", "EXPIRED", "CANCELLED", "new", "REFUNDED"];
const COINS: [&str; 9] = ["USDT", "USDC", "BTC", "ETH", "LTC", "SOL", "TRX", "usdt", "DOGE"];

/// One line of the head: no line breaks.
fn line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

fn fixed(digits: i64, scale: u8) -> String {
    let sign = if digits < 0 { "-" } else { "" };
    let digits = digits.unsigned_abs().to_string();
    let scale = usize::from(scale % 32);
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let digits = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = digits.split_at(digits.len() - scale);
    format!("{sign}{whole}.{fraction}")
}

impl Scalar {
    fn json(&self) -> String {
        match self {
            Scalar::Null => "null".to_string(),
            Scalar::Bool(value) => value.to_string(),
            Scalar::Int(value) => value.to_string(),
            Scalar::Text(text) => json_string(text),
            Scalar::Url(rest) => json_string(&format!("https://{rest}")),
            Scalar::Email(local) => json_string(&format!("{local}@example.com")),
            Scalar::Coin(index) => json_string(COINS[usize::from(*index) % COINS.len()]),
            Scalar::Long(count) => json_string(&"x".repeat(usize::from(*count) % 2048)),
        }
    }
}

impl Amount {
    /// The member's JSON text, or `None` to leave it out.
    fn json(&self) -> Option<String> {
        Some(match self {
            Amount::Int(value) => value.to_string(),
            Amount::Fixed(digits, scale) => fixed(*digits, *scale),
            Amount::Exponent(mantissa, exponent) => format!("{mantissa}e{exponent}"),
            Amount::Float(value) if value.is_finite() => format!("{value:?}"),
            Amount::Float(_) => "null".to_string(),
            Amount::Quoted(digits, scale) => json_string(&fixed(*digits, *scale)),
            Amount::Raw(text) => text.clone(),
            Amount::Missing => return None,
            Amount::Value(value) => value.json(),
        })
    }
}

impl Field {
    fn name(&self) -> &str {
        match self {
            Field::MerchantOrderId => "merchant_order_id",
            Field::Title => "title",
            Field::Description => "description",
            Field::CallbackUrl => "callback_url",
            Field::WebhookUrl => "webhook_url",
            Field::SuccessUrl => "success_url",
            Field::CancelUrl => "cancel_url",
            Field::CustomerEmail => "customer_email",
            Field::PayCurrency => "pay_currency",
            Field::Other(name) => name,
        }
    }
}

/// `{"name": json, ...}` from members already rendered as JSON text.
fn object(members: &[(&str, String)]) -> String {
    let members: Vec<String> = members.iter().map(|(name, value)| format!("{}:{value}", json_string(name))).collect();
    format!("{{{}}}", members.join(","))
}

impl Body {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Body::Empty => Vec::new(),
            Body::Raw(bytes) => bytes.clone(),
            Body::Create(create) => {
                let mut members: Vec<(&str, String)> = Vec::new();
                match &create.currency {
                    Currency::Usd => members.push(("currency", json_string("USD"))),
                    Currency::Eur => members.push(("currency", json_string("EUR"))),
                    Currency::Jpy => members.push(("currency", json_string("JPY"))),
                    Currency::Kwd => members.push(("currency", json_string("KWD"))),
                    Currency::Lower => members.push(("currency", json_string("usd"))),
                    Currency::Missing => {}
                    Currency::Value(value) => members.push(("currency", value.json())),
                }
                if let Some(amount) = create.amount.json() {
                    members.push(("amount", amount));
                }
                for (field, value) in &create.fields {
                    members.push((field.name(), value.json()));
                }
                object(&members).into_bytes()
            }
            Body::Simulate(simulate) => {
                let action = match &simulate.action {
                    Action::Pay => json_string("pay"),
                    Action::Partial => json_string("partial"),
                    Action::Confirm => json_string("confirm"),
                    Action::Reject => json_string("reject"),
                    Action::Cancel => json_string("cancel"),
                    Action::Expire => json_string("expire"),
                    Action::Value(value) => value.json(),
                };
                let mut members = vec![("action", action)];
                if let Some(amount) = simulate.amount.as_ref().and_then(Amount::json) {
                    members.push(("amount", amount));
                }
                if let Some(confirmed) = &simulate.confirmed {
                    members.push(("confirmed", confirmed.json()));
                }
                object(&members).into_bytes()
            }
            Body::Nested(depth, arrays) => {
                let depth = usize::from(*depth) % 4096;
                let (open, close) = if *arrays { ("[", "]") } else { (r#"{"a":"#, "}") };
                format!("{}1{}", open.repeat(depth), close.repeat(depth)).into_bytes()
            }
        }
    }
}

impl Id {
    fn text(&self) -> String {
        match self {
            Id::Existing => ORDER.to_string(),
            Id::Unknown => "00000000-0000-4000-8000-000000000000".to_string(),
            Id::Text(text) => text.clone(),
        }
    }
}

impl QueryValue {
    fn text(&self) -> String {
        match self {
            QueryValue::Order => ORDER.to_string(),
            QueryValue::Status(index) => STATUSES[usize::from(*index) % STATUSES.len()].to_string(),
            QueryValue::Int(value) => value.to_string(),
            QueryValue::Digits(count) => "9".repeat(usize::from(*count)),
            QueryValue::Text(text) => text.clone(),
        }
    }
}

impl FuzzRequest {
    /// The request in the harness's text format (see [`harness`]).
    pub fn encode(&self) -> Vec<u8> {
        let method = match &self.method {
            Method::Get => "GET".to_string(),
            Method::Post => "POST".to_string(),
            Method::Put => "PUT".to_string(),
            Method::Delete => "DELETE".to_string(),
            Method::Head => "HEAD".to_string(),
            Method::Options => "OPTIONS".to_string(),
            Method::Lower(post) => if *post { "post" } else { "get" }.to_string(),
            Method::Other(text) => text.clone(),
        };
        let mut path = match &self.path {
            Path::Orders => "/v1/orders".to_string(),
            Path::OrdersSlash => "/v1/orders/".to_string(),
            Path::Order(id) => format!("/v1/orders/{}", id.text()),
            Path::Simulate(id) => format!("/v1/orders/{}/simulate", id.text()),
            Path::Pay => "/pay".to_string(),
            Path::PayStatus => "/pay/status".to_string(),
            Path::PayCancel => "/pay/cancel".to_string(),
            Path::PaySimulate => "/pay/simulate".to_string(),
            Path::UnderOrders(rest) => format!("/v1/orders/{rest}"),
            Path::UnderPay(rest) => format!("/pay{rest}"),
            Path::Raw(text) => text.clone(),
        };
        match &self.query {
            Query::None => {}
            Query::Pairs(pairs) => {
                let pairs: Vec<String> = pairs
                    .iter()
                    .map(|(name, value)| {
                        let name = match name {
                            QueryName::Id => "id".to_string(),
                            QueryName::Status => "status".to_string(),
                            QueryName::Limit => "limit".to_string(),
                            QueryName::Offset => "offset".to_string(),
                            QueryName::Other(name) => name.clone(),
                        };
                        format!("{name}={}", value.text())
                    })
                    .collect();
                path = format!("{path}?{}", pairs.join("&"));
            }
            Query::Raw(query) => path = format!("{path}?{query}"),
        }
        let mut headers: Vec<(String, String)> = Vec::new();
        let mut api_key = |value: &str| headers.push(("x-api-key".to_string(), value.to_string()));
        match &self.key {
            Key::None => {}
            Key::Valid => api_key(KEY),
            Key::Other => api_key(OTHER_KEY),
            Key::Live => api_key(LIVE_KEY),
            Key::Padded => api_key(&format!(" \t{KEY} ")),
            Key::Duplicate(valid_first) => {
                let (first, second) = if *valid_first { (KEY, OTHER_KEY) } else { ("bogus", KEY) };
                api_key(first);
                api_key(second);
            }
            Key::UpperName => headers.push(("X-API-KEY".to_string(), KEY.to_string())),
            Key::Text(text) => api_key(text),
            Key::Sandboxish(rest) => api_key(&format!("test_{rest}")),
        }
        headers.extend(self.headers.iter().cloned());

        let mut out = format!("{}\n{}\n", line(&method), line(&path));
        for (name, value) in &headers {
            let name = line(name).replace(':', "-");
            // A header line must never read as the blank line that ends the head.
            let name = if name.is_empty() { "x".to_string() } else { name };
            out.push_str(&format!("{name}: {}\n", line(value)));
        }
        out.push('\n');
        let mut out = out.into_bytes();
        out.extend(self.body.bytes());
        out
    }
}
