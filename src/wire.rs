//! The wire layer (DESIGN §2, §5): HTTP-shaped requests in, HTTP-shaped responses out.
//!
//! It parses, authenticates, calls the typed [`Service`] API and renders. It holds no
//! business rule: every rule lives in the typed layer, so all surfaces behave alike.

use serde_json::{json, Map, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::money;
use crate::orders::{CreateOrder, ListOrders, OrderStatus, LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT};
use crate::render;
use crate::service::Service;

/// Largest request body accepted (DESIGN §4).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// An HTTP request as any server hands it over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WireRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path with its optional query string, e.g. `/v1/orders?limit=5`.
    pub path: String,
    /// Header names and values; names compare case-insensitively.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
}

impl WireRequest {
    /// A request with no headers and no body.
    pub fn new(method: &str, path: &str) -> Self {
        WireRequest { method: method.to_string(), path: path.to_string(), headers: Vec::new(), body: Vec::new() }
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
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// An HTTP response: status, headers and a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireResponse {
    /// HTTP status code.
    pub status: u16,
    /// Response headers (always includes `content-type`).
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl WireResponse {
    /// A JSON response.
    pub fn json_body(status: u16, body: String) -> Self {
        WireResponse {
            status,
            headers: vec![("content-type".to_string(), "application/json".to_string())],
            body: body.into_bytes(),
        }
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
        WireResponse::json_body(status, Value::Object(body).to_string())
    }
}

/// The operations of the HTTP API.
enum Route<'a> {
    CreateOrder,
    ListOrders,
    GetOrder(&'a str),
}

fn route<'a>(method: &str, path: &'a str) -> Option<Route<'a>> {
    let path = path.strip_suffix('/').unwrap_or(path);
    match (method, path) {
        ("POST", "/v1/orders") => Some(Route::CreateOrder),
        ("GET", "/v1/orders") => Some(Route::ListOrders),
        ("GET", rest) => {
            let id = rest.strip_prefix("/v1/orders/")?;
            (!id.is_empty() && !id.contains('/')).then_some(Route::GetOrder(id))
        }
        _ => None,
    }
}

impl Service {
    /// Answers one HTTP request of the spec's API (`/v1/orders...`), exactly as the spec
    /// and DESIGN §5 show. Mount it in any HTTP server.
    pub fn handle(&self, request: &WireRequest) -> WireResponse {
        match self.handle_inner(request) {
            Ok(response) => response,
            Err(error) => WireResponse::from_error(&error),
        }
    }

    fn handle_inner(&self, request: &WireRequest) -> Result<WireResponse> {
        let (path, query) = match request.path.split_once('?') {
            Some((path, query)) => (path, query),
            None => (request.path.as_str(), ""),
        };
        let method = request.method.to_ascii_uppercase();
        let route = route(&method, path).ok_or_else(|| Error::new(ErrorKind::NotFound))?;
        let merchant = self.authenticate(request.header_value("x-api-key"))?;
        match route {
            Route::CreateOrder => {
                let create = parse_create_order(&request.body)?;
                let created = self.create_order(&merchant, &create)?;
                Ok(WireResponse::json_body(201, created.response_body))
            }
            Route::GetOrder(order_id) => {
                let order = self.get_order(&merchant, order_id)?;
                let body = json!({
                    "status": 200,
                    "order": render::order_detail(&order.order),
                    "invoice": render::invoice(&order.invoice),
                });
                Ok(WireResponse::json_body(200, body.to_string()))
            }
            Route::ListOrders => {
                let page = self.list_orders(&merchant, &parse_list_query(query)?)?;
                let body = json!({
                    "status": 200,
                    "orders": page.orders.iter().map(render::order_list_item).collect::<Vec<_>>(),
                    "limit": page.limit,
                    "offset": page.offset,
                    "has_more": page.has_more,
                });
                Ok(WireResponse::json_body(200, body.to_string()))
            }
        }
    }
}

/// Parses the Create Order body into the typed request. Only types are checked here;
/// the rules live in [`CreateOrder`]'s validation.
pub fn parse_create_order(body: &[u8]) -> Result<CreateOrder> {
    if body.len() > MAX_BODY_BYTES {
        return Err(Error::invalid("body", format!("at most {MAX_BODY_BYTES} bytes")));
    }
    let value: Value = serde_json::from_slice(body).map_err(|_| Error::invalid("body", "must be a JSON object"))?;
    let Value::Object(fields) = value else {
        return Err(Error::invalid("body", "must be a JSON object"));
    };
    let currency = string_field(&fields, "currency")?.ok_or_else(|| Error::invalid("currency", "is required"))?;
    let amount = match fields.get("amount") {
        None | Some(Value::Null) => return Err(Error::invalid("amount", "is required")),
        Some(Value::Number(number)) => money::parse_decimal("amount", &number.to_string())?,
        Some(Value::String(text)) => money::parse_decimal("amount", text)?,
        Some(_) => return Err(Error::invalid("amount", "must be a number")),
    };
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

/// An optional string member: absent or `null` is `None`; any other type is an error.
fn string_field(fields: &Map<String, Value>, name: &str) -> Result<Option<String>> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(Error::invalid(name, "must be a string")),
    }
}

/// Parses Get Orders' query string (`status`, `limit`, `offset`).
pub fn parse_list_query(query: &str) -> Result<ListOrders> {
    let mut list = ListOrders { status: None, limit: LIST_DEFAULT_LIMIT, offset: 0 };
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match name.as_ref() {
            "status" => {
                let status = OrderStatus::parse(&value).ok_or_else(|| {
                    let names: Vec<&str> = OrderStatus::ALL.iter().map(|s| s.as_str()).collect();
                    Error::invalid("status", format!("must be one of {}", names.join(", ")))
                })?;
                list.status = Some(status);
            }
            "limit" => {
                let limit: i64 = value
                    .parse()
                    .map_err(|_| Error::invalid("limit", format!("must be an integer from 1 to {LIST_MAX_LIMIT}")))?;
                list.limit =
                    if limit > i64::from(LIST_MAX_LIMIT) { u32::MAX } else { u32::try_from(limit).unwrap_or(0) };
            }
            "offset" => {
                list.offset = value
                    .parse::<u64>()
                    .ok()
                    .filter(|offset| i64::try_from(*offset).is_ok())
                    .ok_or_else(|| Error::invalid("offset", "must be an integer >= 0"))?;
            }
            _ => {}
        }
    }
    Ok(list)
}
