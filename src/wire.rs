//! The wire layer (DESIGN §2, §5): HTTP-shaped requests in, HTTP-shaped responses out.
//!
//! It parses, authenticates, calls the typed [`Service`] API and renders. It holds no
//! business rule: every rule lives in the typed layer, so all surfaces behave alike.

use std::borrow::Cow;

use serde_json::{json, Map, Value};

use crate::config::DEFAULT_PAGE_PATH;
use crate::error::{Error, ErrorKind, Result};
use crate::money;
use crate::orders::{CreateOrder, ListOrders, OrderStatus, LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT};
use crate::page;
use crate::render;
use crate::service::Service;

/// Largest request body accepted (DESIGN §4).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// An HTTP request as any server hands it over.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct WireRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path with its optional query string, e.g. `/v1/orders?limit=5`.
    pub path: String,
    /// Header names and values; names compare case-insensitively.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
    /// The client's network address, when the server knows it: the TCP peer. Failed
    /// authentications are limited per address ([`crate::Config::failed_auth_limit`]);
    /// for a loopback peer (a reverse proxy on the same host) they count under the last
    /// address its `X-Forwarded-For` names that is not this host's, and not at all when
    /// it names none (a process on this very host). `None` skips the limit (a host that
    /// limits elsewhere).
    pub client: Option<std::net::IpAddr>,
}

/// Headers whose values are credentials, never shown by `Debug`.
const CREDENTIAL_HEADERS: [&str; 5] = ["x-api-key", "authorization", "proxy-authorization", "cookie", "set-cookie"];

impl std::fmt::Debug for WireRequest {
    // A request logged with `{:?}` must not show the API key (nor other credentials).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(name, value)| {
                let secret = CREDENTIAL_HEADERS.iter().any(|credential| name.eq_ignore_ascii_case(credential));
                (name.as_str(), if secret { "[redacted]" } else { value.as_str() })
            })
            .collect();
        f.debug_struct("WireRequest")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("headers", &headers)
            .field("body", &self.body)
            .field("client", &self.client)
            .finish()
    }
}

impl WireRequest {
    /// A request with no headers, no body and no client address.
    pub fn new(method: &str, path: &str) -> Self {
        WireRequest {
            method: method.to_string(),
            path: path.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            client: None,
        }
    }

    /// Sets the client's address.
    pub fn client(mut self, address: std::net::IpAddr) -> Self {
        self.client = Some(address);
        self
    }

    /// The address failed authentications are counted under: the peer's; for a loopback
    /// peer (a reverse proxy on the same host, as the README recommends) the last
    /// address its `X-Forwarded-For` names, so that one client's failures do not lock
    /// out everyone behind the proxy; and none for a loopback peer that names no one (a
    /// process on this very host, which is inside the trust boundary anyway). Only a
    /// loopback peer is believed: anyone else could name any address.
    ///
    /// The forwarded list is read from its end, where the proxies append: past the
    /// addresses of this host (a second proxy here), the first is the one counted. One
    /// that does not read as an address (`unknown`, an empty item) ends the reading with
    /// nothing counted: an address written further left is the client's own say.
    fn counted_client(&self) -> Option<std::net::IpAddr> {
        let peer = self.client?.to_canonical();
        if !peer.is_loopback() {
            return Some(peer);
        }
        let forwarded_from_the_end = self
            .headers
            .iter()
            .rev()
            .filter(|(name, _)| name.eq_ignore_ascii_case("x-forwarded-for"))
            .flat_map(|(_, value)| value.rsplit(','));
        for item in forwarded_from_the_end {
            if item.trim().is_empty() {
                return None;
            }
            match client_address(item) {
                Some(address) if address.is_loopback() => continue,
                found => return found,
            }
        }
        None
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        first_header(&self.headers, name)
    }
}

/// The first value of header `name` in `headers` (names compare case-insensitively),
/// for requests and responses alike.
fn first_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// An HTTP response: status, headers and a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireResponse {
    /// HTTP status code.
    pub status: u16,
    /// Response headers, names in lower case. Always `content-type`,
    /// `cache-control: no-store` and `x-content-type-options: nosniff`; `retry-after`
    /// on a rate-limited refusal and on a 503.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
    /// For an answer of the service's own failure (5xx), what went wrong, for the
    /// server's log only: the body never carries it. Never holds a secret.
    pub internal_detail: Option<String>,
}

impl WireResponse {
    /// Every response is built here, so no route can forget the headers all of them need.
    pub(crate) fn with_content_type(status: u16, content_type: &str, body: Vec<u8>) -> Self {
        WireResponse {
            status,
            headers: vec![
                ("content-type".to_string(), content_type.to_string()),
                // Every answer is about one merchant's orders (or one customer's invoice)
                // at one moment: no browser or proxy may keep a copy to serve again.
                ("cache-control".to_string(), "no-store".to_string()),
                // Browsers must not guess a type other than the declared one (a JSON body
                // echoing a title must never be run as HTML).
                ("x-content-type-options".to_string(), "nosniff".to_string()),
            ],
            body,
            internal_detail: None,
        }
    }

    /// A JSON response.
    pub fn json_body(status: u16, body: String) -> Self {
        WireResponse::with_content_type(status, "application/json", body.into_bytes())
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        first_header(&self.headers, name)
    }

    /// The body parsed as JSON (`Value::Null` if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The error response for `error` (DESIGN §5): `{"status", "error_code", "error"}`,
    /// plus `eror` for `ORDER_NOT_VALID`, and no internal detail for server errors.
    pub fn from_error(error: &Error) -> Self {
        let status = error.http_status();
        let message = error.public_message();
        let mut body = Map::new();
        body.insert("status".into(), json!(status));
        body.insert("error_code".into(), json!(error.error_code()));
        body.insert("error".into(), json!(message));
        if matches!(error.kind(), ErrorKind::OrderNotFound) {
            // The spec's sample spells the member `eror`; clients written against it read that.
            body.insert("eror".into(), json!(message));
        }
        let mut response = WireResponse::json_body(status, Value::Object(body).to_string());
        if let Some(seconds) = error.retry_after_secs() {
            // The spec's 400 says nothing about when to come back; without this, well-behaved
            // clients can only guess, and retry at once.
            response.headers.push(("retry-after".to_string(), seconds.to_string()));
        }
        if error.is_internal() {
            response.internal_detail = Some(error.to_string());
        }
        response
    }
}

/// The operations of the HTTP API.
enum Route<'a> {
    CreateOrder,
    ListOrders,
    GetOrder(&'a str),
    Simulate(&'a str),
    /// The hosted payment page and its key-less endpoints (`/pay...`), below the page's
    /// path as it matched.
    Page(PageRoute, &'a str),
}

/// The payment page's own routes; the order id travels in the `id` query parameter.
#[derive(Clone, Copy)]
enum PageRoute {
    Html,
    Status,
    Cancel,
    Simulate,
}

/// The page's routes below `base` (`/pay`, or the path of `payment_page_url`).
fn page_route(method: &str, path: &str, base: &str) -> Option<PageRoute> {
    match (method, path.strip_prefix(base)?) {
        // HEAD too: link previews and uptime checks ask a public page with it (RFC 9110
        // §9.1); the server leaves the body out.
        ("GET" | "HEAD", "") => Some(PageRoute::Html),
        ("GET", "/status") => Some(PageRoute::Status),
        ("POST", "/cancel") => Some(PageRoute::Cancel),
        ("POST", "/simulate") => Some(PageRoute::Simulate),
        _ => None,
    }
}

fn route<'a>(method: &str, path: &'a str, page_path: Option<&str>) -> Option<Route<'a>> {
    let path = path.strip_suffix('/').unwrap_or(path);
    for base in [Some(DEFAULT_PAGE_PATH), page_path].into_iter().flatten() {
        if let Some(page) = page_route(method, path, base) {
            // The path as asked for begins with `base`.
            return Some(Route::Page(page, &path[..base.len()]));
        }
    }
    match (method, path) {
        ("POST", "/v1/orders") => Some(Route::CreateOrder),
        ("GET", "/v1/orders") => Some(Route::ListOrders),
        ("GET", rest) => {
            let id = rest.strip_prefix("/v1/orders/")?;
            (!id.is_empty() && !id.contains('/')).then_some(Route::GetOrder(id))
        }
        ("POST", rest) => {
            let id = rest.strip_prefix("/v1/orders/")?.strip_suffix("/simulate")?;
            (!id.is_empty() && !id.contains('/')).then_some(Route::Simulate(id))
        }
        _ => None,
    }
}

impl Service {
    /// Answers one HTTP request of the spec's API (`/v1/orders...`), exactly as the spec
    /// and DESIGN §5 show, and of the hosted payment page (at `/pay`, and at the path of
    /// `Config::payment_page_url` when that is another one). Mount it in any HTTP server.
    ///
    /// Every answer, errors and 404s included, carries `cache-control: no-store` and
    /// `x-content-type-options: nosniff`; a rate-limited one and a 503 also `retry-after`
    /// (seconds). With [`WireRequest::client`] set, an address that keeps failing to
    /// authenticate is refused for a while (`API_LIMIT_EXCEEDED`, see
    /// [`crate::Config::failed_auth_limit`]).
    /// Pass the headers on as they are.
    pub fn handle(&self, request: &WireRequest) -> WireResponse {
        match self.handle_inner(request) {
            Ok(response) => response,
            Err(error) => WireResponse::from_error(&error),
        }
    }

    fn handle_inner(&self, request: &WireRequest) -> Result<WireResponse> {
        // A fragment is the client's own (browsers never send one); a host that passes
        // the raw target on gets the answer an HTTP server gives without it.
        let target = request.path.split_once('#').map_or(request.path.as_str(), |(target, _)| target);
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        // Upper-cased, as hosts hand over what they got; copied only when it is not
        // upper case already.
        let method = match request.method.bytes().any(|byte| byte.is_ascii_lowercase()) {
            true => Cow::Owned(request.method.to_ascii_uppercase()),
            false => Cow::Borrowed(request.method.as_str()),
        };
        let route = route(&method, path, self.page_path.as_deref()).ok_or_else(|| Error::new(ErrorKind::NotFound))?;
        if let Route::Page(page_route, base) = route {
            let form = request.header_value("content-type").is_some_and(|value| {
                value.trim_start().to_ascii_lowercase().starts_with("application/x-www-form-urlencoded")
            });
            return Ok(self.handle_page(page_route, query, base, form));
        }
        if matches!(route, Route::Simulate(_)) && self.environment() != crate::Environment::Sandbox {
            // Simulation does not exist on a live service, not even as a refusal.
            return Err(Error::new(ErrorKind::NotFound));
        }
        if request.headers.iter().filter(|(name, _)| name.eq_ignore_ascii_case("x-api-key")).nth(1).is_some() {
            // Two keys: which one is meant is anyone's guess, and guessing could pick the
            // one a proxy did not check. Refused here, so every host's server does so.
            return Err(Error::invalid("x-api-key", "sent more than once"));
        }
        let api_key = request.header_value("x-api-key");
        let client = request.counted_client();
        // Reads authenticate and read in one snapshot (one transaction per request).
        match route {
            Route::GetOrder(order_id) => {
                let (_, order) = self.read_as(client, api_key, |reads| reads.get_order(order_id))?;
                return Ok(order_response(&self.as_it_stands(order, self.now())?));
            }
            Route::ListOrders => {
                let now = self.now();
                let (merchant, read) =
                    self.read_as(client, api_key, |reads| reads.list_orders(&parse_list_query(query)?, now))?;
                let page = self.page_as_it_stands(now, read, || {
                    Ok(self.list_read(&merchant, &parse_list_query(query)?, now)?.0)
                })?;
                return Ok(WireResponse::json_body(200, render::list_response_json(&page)));
            }
            // A create confirms a key it admitted before inside its own write.
            Route::CreateOrder => {
                let created = self.create_as(client, api_key, || parse_create_order(&request.body))?;
                return Ok(WireResponse::json_body(201, created.response_body));
            }
            _ => {}
        }
        let merchant = self.authenticate_client(client, api_key)?;
        match route {
            Route::Simulate(order_id) => {
                self.get_order(&merchant, order_id)?;
                let action = parse_simulate(&request.body)?;
                Ok(order_response(&self.simulate(order_id, &action)?.order))
            }
            Route::Page(..) | Route::GetOrder(_) | Route::ListOrders | Route::CreateOrder => {
                Err(Error::new(ErrorKind::NotFound))
            }
        }
    }
}

/// The Get Order answer (spec §4.2).
fn order_response(order: &crate::OrderWithInvoice) -> WireResponse {
    WireResponse::json_body(200, render::get_response_json(order))
}

impl Service {
    /// The payment page routes: no API key (the unguessable order id is the capability),
    /// and only public fields leave. `base` is the page's path as asked for; `form` is
    /// true for a form the page posted without JavaScript, answered by a redirect back to
    /// the page (303 See Other), which shows the outcome, rather than by JSON.
    fn handle_page(&self, page_route: PageRoute, query: &str, base: &str, form: bool) -> WireResponse {
        let order_id = url::form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "id")
            .map(|(_, value)| value.into_owned())
            .unwrap_or_default();
        let outcome = match page_route {
            PageRoute::Html => {
                return match self.order(&order_id) {
                    Ok(order) => html_response(200, page::payment_page(self, &order, base)),
                    Err(error) if !error.is_internal() => html_response(404, page::not_found_page()),
                    Err(error) => page_failure(&error),
                }
            }
            PageRoute::Status => self.order(&order_id),
            PageRoute::Cancel => self.customer_cancel(&order_id),
            PageRoute::Simulate => self.customer_simulate_payment(&order_id),
        };
        if form {
            return match outcome {
                // A refused step (the order was paid or expired meanwhile) is shown by the
                // page itself, in the state the order is in now.
                Ok(_) => see_page(base, &order_id),
                Err(error) if error.is_internal() => page_failure(&error),
                Err(error) if matches!(error.kind(), ErrorKind::OrderNotFound) => {
                    html_response(404, page::not_found_page())
                }
                Err(_) => see_page(base, &order_id),
            };
        }
        match outcome {
            Ok(order) => WireResponse::json_body(200, page::public_status(self, &order).to_string()),
            Err(error) => WireResponse::from_error(&error),
        }
    }
}

/// `303 See Other` to the payment page of `order_id` at `base`: a form's answer, so that
/// reloading the page does not post the form again.
fn see_page(base: &str, order_id: &str) -> WireResponse {
    let query: String = url::form_urlencoded::Serializer::new(String::new()).append_pair("id", order_id).finish();
    let mut response = WireResponse::with_content_type(303, "text/plain; charset=utf-8", Vec::new());
    response.headers.push(("location".to_string(), format!("{base}?{query}")));
    response
}

/// The payment page's 500, with its cause kept for the server's log (as a JSON 500's
/// is), never in the page.
fn page_failure(error: &Error) -> WireResponse {
    let mut response = html_response(500, page::error_page(error));
    response.internal_detail = Some(error.to_string());
    response
}

fn html_response(status: u16, html: String) -> WireResponse {
    let mut response = WireResponse::with_content_type(status, "text/html; charset=utf-8", html.into_bytes());
    response.headers.extend([
        // No other site may frame the page (clickjacking the Cancel button); a <meta>
        // policy cannot say this.
        ("x-frame-options".to_string(), "DENY".to_string()),
        ("content-security-policy".to_string(), "frame-ancestors 'none'".to_string()),
        ("referrer-policy".to_string(), "no-referrer".to_string()),
    ]);
    response
}

/// Parses `POST /v1/orders/<id>/simulate`'s body:
/// `{"action": "pay"|"partial"|"confirm"|"reject"|"cancel"|"expire", "amount": .., "confirmed": ..}`.
pub fn parse_simulate(body: &[u8]) -> Result<crate::SimulateAction> {
    use crate::SimulateAction;
    let fields = parse_object(body)?;
    let amount = decimal_field(&fields, "amount")?;
    let confirmed = match fields.get("confirmed")? {
        None | Some(Value::Null) => true,
        Some(Value::Bool(confirmed)) => *confirmed,
        Some(_) => return Err(Error::invalid("confirmed", "must be true or false")),
    };
    let action = string_field(&fields, "action")?.ok_or_else(|| Error::invalid("action", "is required"))?;
    SimulateAction::from_name(&action, amount, confirmed)
}

/// The error of a body over [`MAX_BODY_BYTES`] (DESIGN §4), however far over it is.
pub(crate) fn body_too_large() -> Error {
    Error::invalid("body", format!("at most {MAX_BODY_BYTES} bytes"))
}

/// A request body's members, and the names sent more than once. Reading such a member
/// is an error naming it: which of its values was meant (`{"amount":1,"amount":100}`)
/// is anyone's guess, and a price must never be a guess. Members the request does not
/// read stay ignored, repeated or not.
struct Members {
    values: Map<String, Value>,
    repeated: Vec<String>,
}

impl Members {
    /// The member `name`, if sent once.
    fn get(&self, name: &str) -> Result<Option<&Value>> {
        if self.repeated.iter().any(|repeated| repeated == name) {
            return Err(Error::invalid(name, "sent more than once"));
        }
        Ok(self.values.get(name))
    }
}

impl From<JsonMembers> for Members {
    fn from(sent: JsonMembers) -> Members {
        let mut members = Members { values: Map::new(), repeated: Vec::new() };
        for (name, value) in sent.0 {
            if members.values.contains_key(&name) && !members.repeated.contains(&name) {
                members.repeated.push(name.clone());
            }
            members.values.insert(name, value);
        }
        members
    }
}

/// Every member of a JSON object in the order sent, a name sent twice kept twice: what a
/// map (which keeps a repeated name's last value, silently) cannot tell. Deserialize it
/// with `serde_json`; anything but an object is an error.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonMembers(pub Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for JsonMembers {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<JsonMembers, D::Error> {
        struct Object;
        impl<'de> serde::de::Visitor<'de> for Object {
            type Value = JsonMembers;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut access: A,
            ) -> std::result::Result<JsonMembers, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = access.next_entry::<String, Value>()? {
                    members.push(member);
                }
                Ok(JsonMembers(members))
            }
        }
        deserializer.deserialize_map(Object)
    }
}

/// A client's address as a host's HTTP server gives it: an IP address, with a port
/// (`203.0.113.7:5000`, `[2001:db8::1]:443`) or an IPv6 zone (`fe80::1%eth0`) left
/// out, and an IPv4 address mapped into IPv6 (`::ffff:127.0.0.1`, what a dual-stack
/// listener sees) as the IPv4 one. An empty value, a unix socket's peer, is this host:
/// `127.0.0.1`. `None` for anything else (a test client's name), which leaves the
/// request's failed authentications uncounted.
pub fn client_address(text: &str) -> Option<std::net::IpAddr> {
    let text = text.trim();
    if text.is_empty() {
        return Some(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    }
    let address = text
        .parse::<std::net::IpAddr>()
        .or_else(|_| text.parse::<std::net::SocketAddr>().map(|socket| socket.ip()))
        .ok()
        .or_else(|| {
            let unzoned = text.trim_start_matches('[').split(['%', ']']).next()?;
            unzoned.parse::<std::net::Ipv6Addr>().ok().map(std::net::IpAddr::V6)
        })?;
    Some(address.to_canonical())
}

/// The rule a body nested deeper than serde_json reads breaks: it reads at most 127
/// levels of arrays and objects, the body's own object included.
const JSON_TOO_DEEP: &str = "is nested too deep: at most 127 levels of arrays and objects, the body's own included";

/// A request body that must be one JSON object of at most [`MAX_BODY_BYTES`].
fn parse_object(body: &[u8]) -> Result<Members> {
    if body.len() > MAX_BODY_BYTES {
        return Err(body_too_large());
    }
    // A byte order mark some Windows tools write first: RFC 8259 §8.1 lets a parser
    // ignore it, and nothing else in the body changes meaning for it.
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    serde_json::from_slice::<JsonMembers>(body).map(Members::from).map_err(|error| {
        // JSON that is not an object is told so; text that is not JSON at all is told
        // where it stops being JSON (a lone surrogate escape, a missing quote...), naming
        // the member whose value it stopped in (`"amount": 01`).
        // A body cut short is the body's fault, whichever member it was cut in.
        let member = match error.classify() {
            serde_json::error::Category::Syntax => member_at(body, error.line(), error.column()),
            _ => None,
        };
        // serde_json's guard against a stack overflow: valid JSON, too deep to read.
        let too_deep = error.to_string().starts_with("recursion limit exceeded");
        match (error.classify(), member) {
            (_, Some(member)) if too_deep => Error::invalid(&member, JSON_TOO_DEEP),
            (_, Some(member)) => Error::invalid(&member, format!("is not valid JSON ({error})")),
            (serde_json::error::Category::Syntax | serde_json::error::Category::Eof, None) => {
                Error::invalid("body", format!("must be a JSON object (not valid JSON: {error})"))
            }
            _ => Error::invalid("body", "must be a JSON object"),
        }
    })
}

/// The name of the top-level member whose value `body` stops being JSON in, at the
/// 1-based `line` and byte `column` serde_json reports; `None` when it stops anywhere
/// else (outside an object, in a name, between members).
fn member_at(body: &[u8], line: usize, column: usize) -> Option<String> {
    let line_start = match line {
        0 | 1 => 0,
        _ => body.iter().enumerate().filter(|(_, &b)| b == b'\n').nth(line - 2)?.0 + 1,
    };
    // The column is that of the byte it stopped at, which is left out of the scan.
    let stop = (line_start + column).saturating_sub(1).min(body.len());
    // Up to where it stops, the text is JSON: a scan of strings and nesting finds the
    // member of the outer object whose value is still open there (a stop after a whole
    // value, such as a missing comma, is between members).
    let (mut depth, mut at) = (0usize, 0usize);
    let (mut name, mut last_string) = (None::<&[u8]>, None::<&[u8]>);
    let (mut in_value, mut value_done, mut in_scalar) = (false, false, false);
    while at < stop {
        match body[at] {
            b'"' => {
                let start = at;
                at += 1;
                while at < body.len() && body[at] != b'"' {
                    at += if body[at] == b'\\' { 2 } else { 1 };
                }
                last_string = body.get(start..=at);
                value_done |= depth == 1 && in_value && at < stop;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                value_done |= depth == 1 && in_value;
            }
            b':' if depth == 1 => (name, in_value, value_done) = (last_string, true, false),
            b',' if depth == 1 => (in_value, in_scalar) = (false, false),
            b' ' | b'\t' | b'\n' | b'\r' => value_done |= depth == 1 && in_scalar,
            _ => in_scalar = depth == 1 && in_value,
        }
        at += 1;
    }
    match (depth, in_value && !value_done, name) {
        // Only a name a merchant could have meant as a field is repeated in the message.
        (1.., true, Some(quoted)) => serde_json::from_slice::<String>(quoted)
            .ok()
            .filter(|name| !name.is_empty() && name.len() <= 64 && !name.chars().any(char::is_control)),
        _ => None,
    }
}

/// Parses the Create Order body into the typed request. Only types are checked here;
/// the rules live in [`CreateOrder`]'s validation.
pub fn parse_create_order(body: &[u8]) -> Result<CreateOrder> {
    let fields = parse_object(body)?;
    let currency = string_field(&fields, "currency")?.ok_or_else(|| Error::invalid("currency", "is required"))?;
    let amount = decimal_field(&fields, "amount")?.ok_or_else(|| Error::invalid("amount", "is required"))?;
    Ok(CreateOrder {
        merchant_order_id: string_field(&fields, "merchant_order_id")?,
        currency,
        amount,
        title: string_field(&fields, "title")?,
        description: string_field(&fields, "description")?,
        callback_url: string_field(&fields, "callback_url")?,
        webhook_url: string_field(&fields, "webhook_url")?,
        success_url: string_field(&fields, "success_url")?,
        cancel_url: string_field(&fields, "cancel_url")?,
        customer_email: string_field(&fields, "customer_email")?,
        pay_currency: string_field(&fields, "pay_currency")?,
    })
}

/// An optional exact decimal member: a JSON number or a numeric string.
fn decimal_field(fields: &Members, name: &str) -> Result<Option<rust_decimal::Decimal>> {
    match fields.get(name)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => money::parse_decimal(name, &number.to_string()).map(Some),
        Some(Value::String(text)) => money::parse_decimal(name, text).map(Some),
        Some(_) => Err(Error::invalid(name, "must be a number")),
    }
}

/// An optional string member: absent or `null` is `None`; any other type is an error.
fn string_field(fields: &Members, name: &str) -> Result<Option<String>> {
    match fields.get(name)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(Error::invalid(name, "must be a string")),
    }
}

/// Parses Get Orders' query string (`status`, `limit`, `offset`). Each may come once: a
/// second one is refused, as a body member sent twice is, rather than one silently winning.
/// Other parameters are ignored.
pub fn parse_list_query(query: &str) -> Result<ListOrders> {
    let mut list = ListOrders { status: None, limit: LIST_DEFAULT_LIMIT, offset: 0 };
    let mut seen = [false; 3];
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        const NAMES: [&str; 3] = ["status", "limit", "offset"];
        if let Some(slot) = NAMES.iter().position(|known| *known == name) {
            if std::mem::replace(&mut seen[slot], true) {
                return Err(Error::invalid(NAMES[slot], "sent more than once"));
            }
        }
        match name.as_ref() {
            "status" => {
                let status = OrderStatus::parse(&value).ok_or_else(|| {
                    let names: Vec<&str> = OrderStatus::ALL.iter().map(|s| s.as_str()).collect();
                    Error::invalid("status", format!("must be one of {}", names.join(", ")))
                })?;
                list.status = Some(status);
            }
            "limit" => {
                // Rust's integer parsing takes a leading `+`; the rule (and amounts) do not.
                let limit: i64 = match value.parse() {
                    Ok(_) if value.starts_with('+') => {
                        return Err(Error::invalid("limit", format!("must be an integer from 1 to {LIST_MAX_LIMIT}")))
                    }
                    Ok(limit) => limit,
                    // All digits but too long for an integer: far above 50.
                    Err(_) if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => i64::MAX,
                    Err(_) => {
                        return Err(Error::invalid("limit", format!("must be an integer from 1 to {LIST_MAX_LIMIT}")))
                    }
                };
                list.limit =
                    if limit > i64::from(LIST_MAX_LIMIT) { u32::MAX } else { u32::try_from(limit).unwrap_or(0) };
            }
            "offset" => {
                list.offset = match value.parse::<u64>() {
                    Ok(_) if value.starts_with('+') => return Err(Error::invalid("offset", "must be an integer >= 0")),
                    Ok(offset) => offset,
                    // All digits but too long for an integer: [`ListOrders::validate`]
                    // names the largest offset.
                    Err(_) if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => u64::MAX,
                    Err(_) => return Err(Error::invalid("offset", "must be an integer >= 0")),
                };
            }
            _ => {}
        }
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::member_at;

    #[test]
    fn finding_the_member_never_panics_wherever_the_stop_is() {
        let bodies: [&[u8]; 5] = [
            br#"{"a":"x\"y","b":[1,{"c":2}],"d":"\u00e9"}"#,
            b"{\n\"a\" : 1 ,\n\"b\":\"\\",
            b"\"\\",
            b"{\"\xff\":\"\xfe\"}",
            b"",
        ];
        for body in bodies {
            for line in 0..4 {
                for column in 0..body.len() + 3 {
                    let _ = member_at(body, line, column);
                }
            }
        }
        assert_eq!(member_at(br#"{"a":1,"b":[1,}"#, 1, 15).as_deref(), Some("b"));
        assert_eq!(member_at(br#"{"a":1 "b":2}"#, 1, 8), None, "between members");
    }
}
