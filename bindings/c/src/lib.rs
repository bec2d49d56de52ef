//! The C ABI of coinorder: `libcoinorder.so` / `libcoinorder.a` and `include/coinorder.h`.
//!
//! A thin layer over the core crate (DESIGN §9.1): every function converts C arguments,
//! calls the typed API of [`coinorder::Service`] and renders the result as JSON text with
//! the core's own renderers. No business rule lives here.
//!
//! The rules every function follows, written once in [`ffi`]:
//! - every body runs inside one panic boundary ([`ffi::guard`]): a panic becomes
//!   `COINORDER_PANIC`, never unwinding into C;
//! - a NULL or non-UTF-8 argument is a status (`COINORDER_NULL_ARGUMENT`,
//!   `COINORDER_INVALID_UTF8`), never a crash ([`ffi::text`]);
//! - a failure sets `*err` (when `err` is not NULL) to an error the caller frees with
//!   [`coinorder_error_free`]; out pointers are written only on success;
//! - every string returned is owned by the caller and freed with [`coinorder_string_free`].

mod ffi;

use std::ffi::{c_char, CStr};
use std::ptr;
use std::sync::Arc;

use coinorder::{render, Config, Environment, NewApiKey, Service, Timestamp, WireRequest};
use serde_json::{json, Value};

use ffi::{
    bytes, guard, json_members, json_object, json_out, json_text_out, json_unique_object, need, opt_text, out, text,
    CallError,
};
pub use ffi::{coinorder_error, coinorder_status};

/// The version of the C ABI this library implements. It grows when a function is added
/// or changes; `coinorder_abi_version()` returns it so a host can check at run time that
/// the library it loaded matches the header it was compiled with.
pub const COINORDER_ABI_VERSION: u32 = 7;

/// NUL-terminated version of the library, e.g. `"0.1.0"`.
const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
    Ok(version) => version,
    Err(_) => panic!("the package version has no NUL byte"),
};

/// An open order service (opaque). Thread-safe: any function may be called on one
/// service from any number of threads at once. Opened with [`coinorder_service_open`],
/// closed with [`coinorder_service_close`].
#[allow(non_camel_case_types)]
pub struct coinorder_service {
    /// Started by [`coinorder_workers_start`]; declared first, so that they stop (and
    /// let go of the service) before the service itself closes.
    workers: std::sync::Mutex<Option<coinorder::ServiceWorkers>>,
    service: std::sync::Arc<Service>,
    /// The process that opened it: a forked child finds its parent's id here, and copies
    /// of the parent's database connections and locks that it must not touch.
    opened_in_process: u32,
}

impl coinorder_service {
    /// The service, unless this process is a fork of the one that opened it: there its
    /// connections may wait forever on a lock a parent's thread held at the fork.
    fn checked(&self) -> Result<&Self, CallError> {
        if std::process::id() == self.opened_in_process {
            return Ok(self);
        }
        Err(coinorder::Error::invalid(
            "service",
            format!(
                "was opened in process {}, and this process is a fork of it: open a new service in this process",
                self.opened_in_process
            ),
        )
        .into())
    }
}

/// The library version as text, e.g. `"0.1.0"`. Static: never free it.
#[no_mangle]
pub extern "C" fn coinorder_version() -> *const c_char {
    VERSION.as_ptr()
}

/// The ABI version of the library (`COINORDER_ABI_VERSION` of the header it was built with).
#[no_mangle]
pub extern "C" fn coinorder_abi_version() -> u32 {
    COINORDER_ABI_VERSION
}

/// Opens (creating if needed) the order service over `target`, as `coinorder --db` takes
/// it: a SQLite file path, or a PostgreSQL URL (`postgres://user@host:5432/db`).
///
/// `config_json` is NULL for the sandbox defaults, or a JSON object of options, e.g.
/// `{"environment":"live","invoice_ttl":900,"rate_limit":0}` (every option is listed in
/// the README). An unknown option or a bad value is a `COINORDER_ERROR` whose error code
/// is `PARAMETERS_MISSING` and whose message names it.
///
/// On success `*service_out` is a new service, to be closed with
/// [`coinorder_service_close`]. `target` and `config_json` are borrowed for the call only.
#[no_mangle]
pub unsafe extern "C" fn coinorder_service_open(
    target: *const c_char,
    config_json: *const c_char,
    service_out: *mut *mut coinorder_service,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(service_out, "service_out")?;
        let target = text(target, "target")?;
        let options = match opt_text(config_json, "config_json")? {
            Some(text) => {
                let mut options = serde_json::Map::new();
                for (name, value) in json_members(text, "config_json")? {
                    if options.insert(name.clone(), value).is_some() {
                        return Err(coinorder::Error::invalid(format!("config.{name}"), "sent more than once").into());
                    }
                }
                Value::Object(options)
            }
            None => Value::Null,
        };
        let config = Config::from_options(&options)?;
        let service = Service::open(target, config)?;
        let service = coinorder_service {
            workers: std::sync::Mutex::new(None),
            service: Arc::new(service),
            opened_in_process: std::process::id(),
        };
        out(service_out, "service_out", Box::into_raw(Box::new(service)))
    })
}

/// Closes a service and frees it. NULL is fine. No other call may use `service` during
/// or after this one: close it once every thread is done with it. Key uses that requests
/// could not write while the writer was busy are written first (waiting for the writer up
/// to `busy_timeout_ms`), so no `last_used_at` is lost.
///
/// In a process forked from the one that opened it, where every other call on it fails,
/// this lets go of it without closing or freeing anything: the database connections
/// belong to the parent.
#[no_mangle]
pub unsafe extern "C" fn coinorder_service_close(service: *mut coinorder_service) {
    if let Some(handle) = service.as_ref() {
        if handle.checked().is_err() {
            return;
        }
    }
    if !service.is_null() {
        // Dropping closes the database; a panic in a destructor must not unwind into C.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(Box::from_raw(service))));
    }
}

/// The spec's HTTP API in one call: mount the order service in any C HTTP server.
///
/// `method` (e.g. `"POST"`), `path_and_query` (e.g. `"/v1/orders?limit=5"`) and
/// `headers_json` (a JSON object of header names to string values, e.g.
/// `{"x-api-key":"test_..."}`, or NULL for none; a name sent twice is passed on twice, so
/// two `x-api-key`s are refused as over HTTP) are borrowed; `body` points at `body_len`
/// bytes (NULL is fine when `body_len` is 0).
///
/// Every HTTP answer, including the spec's 400/401/404 errors, is a success of this
/// call: `*http_status_out` gets the status and `*body_out` the body, NUL-terminated, to
/// be freed with [`coinorder_string_free`]. Only a bad argument is a failure. For the
/// response's headers too (`content-type`, `retry-after`), call
/// [`coinorder_handle_with_headers`].
#[no_mangle]
pub unsafe extern "C" fn coinorder_handle(
    service: *const coinorder_service,
    method: *const c_char,
    path_and_query: *const c_char,
    headers_json: *const c_char,
    body: *const u8,
    body_len: usize,
    http_status_out: *mut u16,
    body_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    let request = HandleArgs { service, method, path_and_query, headers_json, body, body_len };
    handle_into(request, None, http_status_out, None, body_out, err)
}

/// [`coinorder_handle`], and the response's headers: `*headers_json_out` gets them as a
/// JSON object of lower-case names to string values (`{"content-type":"application/json",
/// "cache-control":"no-store",...}`, with `retry-after` on a rate-limited or busy answer),
/// to be freed with [`coinorder_string_free`]. A host's HTTP server sends them with the
/// status and body.
#[no_mangle]
pub unsafe extern "C" fn coinorder_handle_with_headers(
    service: *const coinorder_service,
    method: *const c_char,
    path_and_query: *const c_char,
    headers_json: *const c_char,
    body: *const u8,
    body_len: usize,
    http_status_out: *mut u16,
    headers_json_out: *mut *mut c_char,
    body_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    let request = HandleArgs { service, method, path_and_query, headers_json, body, body_len };
    handle_into(request, None, http_status_out, Some(headers_json_out), body_out, err)
}

/// [`coinorder_handle_with_headers`] (`headers_json_out` is required here too) for a
/// request from `client_address`: the TCP peer's address as text (`"203.0.113.7"`,
/// `"2001:db8::1"`, with a port or zone too; empty for a unix socket's peer, which is
/// this host; NULL or anything else that is not an address: unknown). With it, failed
/// authentications are limited per address (a burst of 20, then 1 a second: `400
/// API_LIMIT_EXCEEDED` with `retry-after`), as `coinorder serve` limits them; without
/// it, they are not limited. A peer on this host (a reverse proxy) is counted under the
/// address its `X-Forwarded-For` ends with, and not at all without one; a proxy on
/// another host must pass the customer's address here instead, or one client's bad keys
/// hold back every client behind it.
#[no_mangle]
pub unsafe extern "C" fn coinorder_handle_from(
    service: *const coinorder_service,
    client_address: *const c_char,
    method: *const c_char,
    path_and_query: *const c_char,
    headers_json: *const c_char,
    body: *const u8,
    body_len: usize,
    http_status_out: *mut u16,
    headers_json_out: *mut *mut c_char,
    body_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    let request = HandleArgs { service, method, path_and_query, headers_json, body, body_len };
    handle_into(request, Some(client_address), http_status_out, Some(headers_json_out), body_out, err)
}

/// The request arguments of [`coinorder_handle`], borrowed as the caller passed them.
struct HandleArgs {
    service: *const coinorder_service,
    method: *const c_char,
    path_and_query: *const c_char,
    headers_json: *const c_char,
    body: *const u8,
    body_len: usize,
}

/// [`coinorder_handle_from`], the headers written only when `headers_json_out` is given
/// (`None` for [`coinorder_handle`]) and the client's address read only when
/// `client_address` is (`None` for the two without it).
///
/// # Safety
/// As [`coinorder_handle_from`]'s arguments.
unsafe fn handle_into(
    args: HandleArgs,
    client_address: Option<*const c_char>,
    http_status_out: *mut u16,
    headers_json_out: Option<*mut *mut c_char>,
    body_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(http_status_out, "http_status_out")?;
        if let Some(headers_json_out) = headers_json_out {
            need(headers_json_out, "headers_json_out")?;
        }
        need(body_out, "body_out")?;
        let service = service_ref(args.service)?;
        let mut request = WireRequest::new(text(args.method, "method")?, text(args.path_and_query, "path_and_query")?);
        if let Some(headers) = opt_text(args.headers_json, "headers_json")? {
            for (name, value) in json_members(headers, "headers_json")? {
                let value = value
                    .as_str()
                    .ok_or_else(|| CallError::invalid_json("headers_json", "must be a JSON object of strings"))?;
                request = request.header(&name, value);
            }
        }
        let client = client_address.map(|address| opt_text(address, "client_address")).transpose()?.flatten();
        if let Some(address) = client.and_then(coinorder::client_address) {
            request = request.client(address);
        }
        let response = service.handle(&request.body(bytes(args.body, args.body_len, "body")?));
        let headers: serde_json::Map<String, Value> =
            response.headers.iter().map(|(name, value)| (name.clone(), Value::from(value.as_str()))).collect();
        let headers = ffi::c_string(Value::Object(headers).to_string())?;
        // Every body the service renders is UTF-8 text (JSON or the payment page).
        let body = ffi::c_string(String::from_utf8_lossy(&response.body).into_owned())?;
        // Both made before either is handed out, so a failure leaves the caller nothing to free.
        if let Some(headers_json_out) = headers_json_out {
            out(headers_json_out, "headers_json_out", headers.into_raw())?;
        }
        out(body_out, "body_out", body.into_raw())?;
        *http_status_out = response.status;
        Ok(())
    })
}

/// Creates an API key. `request_json`: `{"user_id":1,"webhook_url":null}`, optionally
/// with `"environment":"sandbox"|"live"` (default: the service's).
///
/// `*key_json_out` gets the key as `coinorder keys create` prints it, including, this
/// once, the plain `key` and the `webhook_secret`: keep them, they are never shown again.
#[no_mangle]
pub unsafe extern "C" fn coinorder_key_create(
    service: *const coinorder_service,
    request_json: *const c_char,
    key_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(key_json_out, "key_json_out")?;
        let service = service_ref(service)?;
        let request = json_unique_object(text(request_json, "request_json")?, "request_json")?;
        let user_id = match request.get("user_id") {
            None | Some(Value::Null) => return Err(coinorder::user_id_refused(true).into()),
            Some(value) => value.as_i64().ok_or_else(|| coinorder::user_id_refused(false))?,
        };
        let webhook_url = match request.get("webhook_url") {
            None | Some(Value::Null) => None,
            Some(Value::String(url)) => Some(url.clone()),
            Some(_) => return Err(coinorder::Error::invalid("webhook_url", "must be a string or null").into()),
        };
        let environment = match request.get("environment") {
            None | Some(Value::Null) => service.environment(),
            Some(Value::String(name)) => name.parse::<Environment>()?,
            Some(_) => return Err(coinorder::Error::invalid("environment", "must be sandbox or live").into()),
        };
        let created = service.create_key(NewApiKey { user_id, environment, webhook_url })?;
        json_out(key_json_out, "key_json_out", &render::created_key(&created).map_err(CallError::render)?)
    })
}

/// Lists every API key (of both environments) as a JSON array; never a plain key or secret.
#[no_mangle]
pub unsafe extern "C" fn coinorder_key_list(
    service: *const coinorder_service,
    keys_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(keys_json_out, "keys_json_out")?;
        let keys = service_ref(service)?.list_keys()?;
        json_out(keys_json_out, "keys_json_out", &serde_json::to_value(keys).map_err(CallError::render)?)
    })
}

/// Activates (`active` true) or deactivates a key by its id (`key_...`); an inactive
/// key's requests fail with `AUTHENTICATION_FAILED`. `*key_json_out` gets the key as
/// stored now. An unknown id is `KEY_NOT_FOUND`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_key_set_active(
    service: *const coinorder_service,
    key_id: *const c_char,
    active: bool,
    key_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(key_json_out, "key_json_out")?;
        let service = service_ref(service)?;
        let key_id = text(key_id, "key_id")?;
        let key = if active { service.activate_key(key_id)? } else { service.deactivate_key(key_id)? };
        key_out(key_json_out, &key)
    })
}

/// Hands a key as stored (never the plain key or its secret) to the caller through
/// `key_json_out`, the one shape every key call returns.
///
/// # Safety
/// `key_json_out` is NULL or writable.
unsafe fn key_out(key_json_out: *mut *mut c_char, key: &coinorder::ApiKey) -> Result<(), CallError> {
    json_out(key_json_out, "key_json_out", &serde_json::to_value(key).map_err(CallError::render)?)
}

/// Sets a key's webhook URL, or clears it when `webhook_url` is NULL. `*key_json_out`
/// gets the key as stored now.
#[no_mangle]
pub unsafe extern "C" fn coinorder_key_set_webhook_url(
    service: *const coinorder_service,
    key_id: *const c_char,
    webhook_url: *const c_char,
    key_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(key_json_out, "key_json_out")?;
        let service = service_ref(service)?;
        let key = service.set_key_webhook_url(text(key_id, "key_id")?, opt_text(webhook_url, "webhook_url")?)?;
        key_out(key_json_out, &key)
    })
}

/// One key by id. `*key_json_out` gets the key as stored (never the plain key or its
/// secret). An unknown id is `KEY_NOT_FOUND`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_key_get(
    service: *const coinorder_service,
    key_id: *const c_char,
    key_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(key_json_out, "key_json_out")?;
        let key = service_ref(service)?.get_key(text(key_id, "key_id")?)?;
        key_out(key_json_out, &key)
    })
}

/// Sets the merchant's name the payment page shows above the titles of this key's orders
/// (1 to 80 characters, no control characters), or clears it when `display_name` is
/// NULL. `*key_json_out` gets the key as stored now. A name out of bounds is
/// `PARAMETERS_MISSING` naming `display_name`; an unknown id is `KEY_NOT_FOUND`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_key_set_display_name(
    service: *const coinorder_service,
    key_id: *const c_char,
    display_name: *const c_char,
    key_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(key_json_out, "key_json_out")?;
        let service = service_ref(service)?;
        let name = opt_text(display_name, "display_name")?;
        let key = service.set_key_display_name(text(key_id, "key_id")?, name)?;
        key_out(key_json_out, &key)
    })
}

/// Gives a key a new webhook signing secret: every delivery from now on (pending ones
/// too) is signed with it, none with the old one. `*secret_out` gets the new secret (`whsec_…`),
/// shown this once: store it where the receiver checks signatures, then free it with
/// `coinorder_string_free`. An unknown id is `KEY_NOT_FOUND`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_key_rotate_webhook_secret(
    service: *const coinorder_service,
    key_id: *const c_char,
    secret_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(secret_out, "secret_out")?;
        let secret = service_ref(service)?.rotate_key_webhook_secret(text(key_id, "key_id")?)?;
        out(secret_out, "secret_out", ffi::c_string(secret.expose().to_string())?.into_raw())
    })
}

/// Like `coinorder_key_rotate_webhook_secret`, while the old secret goes on signing for
/// `keep_old_secs` seconds (at most 2592000, 30 days; 0 is the hard cut): until then
/// every delivery carries both signatures (`webhook-signature: v1,<new> v1,<old>`), so
/// the receiver can switch secrets at its own pace. More is `PARAMETERS_MISSING`
/// ("keep_old_for: at most 2592000 seconds (30 days)").
#[no_mangle]
pub unsafe extern "C" fn coinorder_key_rotate_webhook_secret_keeping_old(
    service: *const coinorder_service,
    key_id: *const c_char,
    keep_old_secs: u64,
    secret_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(secret_out, "secret_out")?;
        let keep = std::time::Duration::from_secs(keep_old_secs);
        let rotated = service_ref(service)?.rotate_key_webhook_secret_keeping_old(text(key_id, "key_id")?, keep)?;
        out(secret_out, "secret_out", ffi::c_string(rotated.secret.expose().to_string())?.into_raw())
    })
}

/// Deletes a key for good: its requests fail with `Unauthorized` from now on.
#[no_mangle]
pub unsafe extern "C" fn coinorder_key_delete(
    service: *const coinorder_service,
    key_id: *const c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || Ok(service_ref(service)?.delete_key(text(key_id, "key_id")?)?))
}

/// Creates an order (`POST /v1/orders`, docs/api.md) for the merchant whose `api_key` is given.
/// `request_json` is the body of `POST /v1/orders`, e.g.
/// `{"currency":"USD","amount":19.99,"merchant_order_id":"cart-7"}`.
///
/// `*order_json_out` gets the 201 body: `{"status":201,"message":...,"data":{...},
/// "payment_url":...}`; repeating an identical request returns the same order. A
/// different request with a used `merchant_order_id` fails with `ORDER_DUPLICATE`, a bad
/// key with `Unauthorized` (401) or `AUTHENTICATION_FAILED`, a bad field with
/// `PARAMETERS_MISSING` or `API_LIMIT_EXCEEDED` naming the field.
#[no_mangle]
pub unsafe extern "C" fn coinorder_order_create(
    service: *const coinorder_service,
    api_key: *const c_char,
    request_json: *const c_char,
    order_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(order_json_out, "order_json_out")?;
        let (service, merchant) = authenticated(service, api_key)?;
        // A leading byte order mark is ignored, as in the HTTP body this text stands for.
        let request_text = text(request_json, "request_json")?;
        let request_text = request_text.strip_prefix('\u{FEFF}').unwrap_or(request_text);
        json_object(request_text, "request_json")?;
        let request = coinorder::parse_create_order(request_text.as_bytes())?;
        let created = service.create_order(&merchant, &request)?;
        json_text_out(order_json_out, "order_json_out", created.response_body)
    })
}

/// Reads an order with its invoice (`GET /v1/orders/{order_id}`, docs/api.md). `*order_json_out` gets the 200 body:
/// `{"status":200,"order":{...},"invoice":{...}}`. An order that does not exist, or is
/// another merchant's, fails with `ORDER_NOT_VALID` (http status 400).
#[no_mangle]
pub unsafe extern "C" fn coinorder_order_get(
    service: *const coinorder_service,
    api_key: *const c_char,
    order_id: *const c_char,
    order_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(order_json_out, "order_json_out")?;
        let (service, merchant) = authenticated(service, api_key)?;
        let order = service.get_order(&merchant, text(order_id, "order_id")?)?;
        json_text_out(order_json_out, "order_json_out", render::get_response_json(&order))
    })
}

/// Lists the merchant's orders, newest first (`GET /v1/orders`, docs/api.md). `query_json` is NULL for the
/// defaults or an object with any of `status` (e.g. `"NEW"`), `limit` (1 to 50, default
/// 10) and `offset`. `*orders_json_out` gets the 200 body:
/// `{"status":200,"orders":[...],"limit":10,"offset":0,"has_more":false}`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_order_list(
    service: *const coinorder_service,
    api_key: *const c_char,
    query_json: *const c_char,
    orders_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(orders_json_out, "orders_json_out")?;
        let (service, merchant) = authenticated(service, api_key)?;
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if let Some(query_text) = opt_text(query_json, "query_json")? {
            // Each member as sent: one sent twice is refused by the query's parser, naming
            // it, as the same query string over HTTP is.
            for (name, value) in &json_members(query_text, "query_json")? {
                match value {
                    Value::Null => {}
                    Value::String(text) => drop(query.append_pair(name, text)),
                    // Numbers keep their exact text (a fraction is refused as the URL's would be).
                    Value::Number(number) => drop(query.append_pair(name, &number.to_string())),
                    _ => return Err(coinorder::Error::invalid(name.as_str(), "must be a string or a number").into()),
                }
            }
        }
        let query = coinorder::parse_list_query(&query.finish())?;
        let page = service.list_orders(&merchant, &query)?;
        json_text_out(orders_json_out, "orders_json_out", render::list_response_json(&page))
    })
}

/// The merchant cancels a NEW order of theirs. `*order_json_out` gets
/// `{"order":{..},"invoice":{..}}`: the objects of `coinorder_order_get`, the order with
/// its `environment` and `marked_paid` too, the invoice with its `derivation_index` and
/// `updated_at`. Any other state fails with `ORDER_STATE_INVALID`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_order_cancel(
    service: *const coinorder_service,
    api_key: *const c_char,
    order_id: *const c_char,
    order_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(order_json_out, "order_json_out")?;
        let (service, merchant) = authenticated(service, api_key)?;
        let order = service.cancel_order(&merchant, text(order_id, "order_id")?)?;
        json_out(order_json_out, "order_json_out", &render::host_order(&order))
    })
}

/// The merchant accepts a late or short payment: an EXPIRED or FAILED order becomes PAID
/// (its `order.paid` event says it was marked by hand). `*order_json_out` gets the order
/// and invoice as [`coinorder_order_cancel`] gives them (`"marked_paid":true`).
#[no_mangle]
pub unsafe extern "C" fn coinorder_order_mark_paid(
    service: *const coinorder_service,
    order_id: *const c_char,
    order_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(order_json_out, "order_json_out")?;
        let order = service_ref(service)?.mark_paid(text(order_id, "order_id")?)?;
        json_out(order_json_out, "order_json_out", &render::host_order(&order))
    })
}

/// Records a payment seen on chain for an order (the host's chain watcher). `amount` is
/// exact decimal text in the invoice's coin, e.g. `"0.00052"`. Recording the same `txid`
/// again is a no-op (`"duplicate":true`). `*outcome_json_out` gets
/// `{"txid","duplicate","payment","events":[...],"order","invoice"}`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_payment_record(
    service: *const coinorder_service,
    order_id: *const c_char,
    txid: *const c_char,
    amount: *const c_char,
    confirmed: bool,
    outcome_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(outcome_json_out, "outcome_json_out")?;
        let service = service_ref(service)?;
        // The core's one parser of amounts, as Python's, the CLI's and the HTTP body's:
        // no spaces around it, so that every surface takes the same texts.
        let amount = coinorder::money::parse_decimal("amount", text(amount, "amount")?)?;
        let outcome = service.record_payment(text(order_id, "order_id")?, text(txid, "txid")?, amount, confirmed)?;
        json_out(outcome_json_out, "outcome_json_out", &render::payment_outcome(&outcome))
    })
}

/// Marks a recorded payment final; the order becomes PAID once confirmed payments cover
/// it. `*outcome_json_out` as for [`coinorder_payment_record`]. Confirming twice is a
/// no-op (`"duplicate":true`); confirming a rejected payment fails with
/// `ORDER_STATE_INVALID`, an unknown `txid` with `PAYMENT_NOT_FOUND`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_payment_confirm(
    service: *const coinorder_service,
    txid: *const c_char,
    outcome_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(outcome_json_out, "outcome_json_out")?;
        let outcome = service_ref(service)?.confirm_payment(text(txid, "txid")?)?;
        json_out(outcome_json_out, "outcome_json_out", &render::payment_outcome(&outcome))
    })
}

/// Marks a recorded payment as never final (a double spend); a PENDING order it was
/// paying fails. `*outcome_json_out` as for [`coinorder_payment_record`]. Rejecting twice
/// is a no-op (`"duplicate":true`); rejecting a confirmed payment fails with
/// `ORDER_STATE_INVALID`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_payment_reject(
    service: *const coinorder_service,
    txid: *const c_char,
    outcome_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(outcome_json_out, "outcome_json_out")?;
        let outcome = service_ref(service)?.reject_payment(text(txid, "txid")?)?;
        json_out(outcome_json_out, "outcome_json_out", &render::payment_outcome(&outcome))
    })
}

/// Every payment recorded for an order, oldest first. `*payments_json_out` gets a JSON
/// array of `{"txid","amount","currency","state","counts","seen_at","settled_at"}`
/// (`state` is `unconfirmed`, `confirmed` or `rejected`; `counts` is false for a payment
/// first seen after the quote ended, which pays nothing by itself; `settled_at` is null
/// while unconfirmed). An unknown order is `ORDER_NOT_VALID`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_order_payments(
    service: *const coinorder_service,
    order_id: *const c_char,
    payments_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(payments_json_out, "payments_json_out")?;
        let payments = service_ref(service)?.order_payments(text(order_id, "order_id")?)?;
        let rendered = payments.iter().map(render::payment).collect();
        json_out(payments_json_out, "payments_json_out", &Value::Array(rendered))
    })
}

/// Runs one sandbox simulation step on an order (a sandbox service only; on live it fails
/// with `Not Found`). `action_json` is the body of `POST /v1/orders/<id>/simulate`:
/// `{"action":"pay"}` (also `partial`, `confirm`, `reject`, `cancel`, `expire`; `pay` and
/// `partial` take an optional `"amount"` in the invoice's coin and an optional
/// `"confirmed":false`). `*simulation_json_out` gets what the step did:
/// `{"order","invoice","events":[...],"payments":[...]}` (plus `txid` and `payment` when
/// it made one payment).
#[no_mangle]
pub unsafe extern "C" fn coinorder_simulate(
    service: *const coinorder_service,
    order_id: *const c_char,
    action_json: *const c_char,
    simulation_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(simulation_json_out, "simulation_json_out")?;
        let service = service_ref(service)?;
        let action_text = text(action_json, "action_json")?;
        json_object(action_text, "action_json")?;
        let action = coinorder::parse_simulate(action_text.as_bytes())?;
        let done = service.simulate(text(order_id, "order_id")?, &action)?;
        json_out(simulation_json_out, "simulation_json_out", &render::simulation(&done))
    })
}

/// Sends up to `limit` due webhooks (in parallel, bounded) and returns when they are
/// answered; payment-link e-mails go out with [`coinorder_send_due_emails`].
/// `*report_json_out` gets the counts:
/// `{"attempted","delivered","retrying","failed","no_target"}`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_deliver_due(
    service: *const coinorder_service,
    limit: u32,
    report_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(report_json_out, "report_json_out")?;
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let report = service_ref(service)?.deliver_due(limit)?;
        json_out(report_json_out, "report_json_out", &render::delivery_report(&report))
    })
}

/// Sends up to `limit` due payment-link e-mails (orders created with a `customer_email`)
/// over the SMTP server of the service's config (`"smtp_url"`, `"smtp_from"`), one at a
/// time, and returns when they are answered; call it from the same loop or timer as
/// [`coinorder_deliver_due`]. Without SMTP configured it sends nothing and the e-mails
/// stay pending. `*report_json_out` gets the counts: `{"attempted","sent","retrying","failed"}`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_send_due_emails(
    service: *const coinorder_service,
    limit: u32,
    report_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(report_json_out, "report_json_out")?;
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let report = service_ref(service)?.send_due_emails(limit)?;
        json_out(report_json_out, "report_json_out", &render::email_report(&report))
    })
}

/// Moves every order of the service's environment whose quote has run out: NEW →
/// EXPIRED, PENDING paid short with no payment left to confirm → FAILED, each with its
/// `order.expired` / `order.failed` event. Run it every few seconds, like
/// [`coinorder_deliver_due`] (`coinorder serve` runs it every second), or let
/// [`coinorder_workers_start`] run both. A read of an order whose quote ran out moves it
/// first when the writer is free (a read never waits for a write); an order nobody reads
/// waits for a run, and so does its `order.expired` webhook. `*report_json_out` gets the
/// counts:
/// `{"expired","failed"}`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_expire_due(
    service: *const coinorder_service,
    report_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(report_json_out, "report_json_out")?;
        let service = service_ref(service)?;
        let report = service.expire_due(service.now())?;
        json_out(report_json_out, "report_json_out", &render::expiry_report(&report))
    })
}

/// Starts the background work `coinorder serve` runs, on threads of the service: the
/// expiry sweep every `interval_ms` milliseconds (1 to 3600000), webhooks and
/// payment-link e-mails as they come due (`batch` at a time, 1 to 10000), and the chain
/// watcher every 15 s when one is configured. [`coinorder_workers_stop`] stops them, and so does
/// [`coinorder_service_close`]. Workers already running are `PARAMETERS_MISSING`
/// ("workers: already running").
#[no_mangle]
pub unsafe extern "C" fn coinorder_workers_start(
    service: *const coinorder_service,
    interval_ms: u32,
    batch: u32,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        let handle = service.as_ref().ok_or_else(|| CallError::null("service"))?.checked()?;
        let max_ms = coinorder::MAX_WORKER_INTERVAL.as_millis();
        if !(1..=max_ms).contains(&u128::from(interval_ms)) {
            return Err(coinorder::Error::invalid("interval_ms", format!("must be from 1 to {max_ms}")).into());
        }
        let max_batch = coinorder::MAX_WORKER_BATCH;
        if !(1..=max_batch).contains(&(batch as usize)) {
            return Err(coinorder::Error::invalid("batch", format!("must be from 1 to {max_batch}")).into());
        }
        let mut workers = handle.workers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if workers.as_ref().is_some_and(coinorder::ServiceWorkers::is_running) {
            return Err(coinorder::Error::invalid("workers", "already running").into());
        }
        let every = std::time::Duration::from_millis(u64::from(interval_ms));
        let started = handle
            .service
            .start_workers(every, batch as usize)
            .map_err(|e| coinorder::Error::invalid("workers", format!("cannot start a thread: {e}")))?;
        *workers = Some(started);
        Ok(())
    })
}

/// Stops the workers [`coinorder_workers_start`] started, waiting for the webhooks and
/// the e-mail already on their way. NULL, or no workers running, is fine.
#[no_mangle]
pub unsafe extern "C" fn coinorder_workers_stop(service: *const coinorder_service) {
    // In a forked child the workers' threads are the parent's: there is nothing to stop.
    if let Some(handle) = service.as_ref().and_then(|handle| handle.checked().ok()) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let taken = handle.workers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
            drop(taken);
        }));
    }
}

/// Queues an event for delivery again, due now, with a fresh retry schedule (the same
/// `webhook-id` and body): after a receiver was down past the retries, say. An attempt
/// in flight finishes first; the event is then sent again by the next
/// [`coinorder_deliver_due`]. An unknown id is `EVENT_NOT_FOUND`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_redeliver(
    service: *const coinorder_service,
    event_id: *const c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || Ok(service_ref(service)?.redeliver(text(event_id, "event_id")?)?))
}

/// An order's events with their webhook delivery, oldest first: what a merchant's support
/// looks at when a webhook did not arrive. `*deliveries_json_out` gets a JSON array of the
/// events (`event_id`, `type`, `sequence`, `previous_status`, `status`, `created_at`,
/// `order_id`, `payload`: the exact body sent), each with `"delivery"`: `state`
/// (`pending`, `delivered`, `failed`, `no_target`), `attempts`, `next_attempt_at`,
/// `delivered_at`, `last_error` and `log`, every attempt with its `url`, `started_at`,
/// HTTP `status`, `latency_ms`, `response_excerpt` and `error`. An unknown order is
/// `ORDER_NOT_VALID`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_event_deliveries(
    service: *const coinorder_service,
    order_id: *const c_char,
    deliveries_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(deliveries_json_out, "deliveries_json_out")?;
        let deliveries = service_ref(service)?.event_deliveries(text(order_id, "order_id")?)?;
        let rendered = deliveries.iter().map(render::event_delivery).collect();
        json_out(deliveries_json_out, "deliveries_json_out", &Value::Array(rendered))
    })
}

/// Sets (or replaces) the exchange rate of `crypto` (e.g. `"BTC"`) priced in `fiat` (e.g.
/// `"USD"`) in the service's environment: `rate` is exact decimal text, fiat units per
/// one coin, e.g. `"64250.5"`. A live service quotes orders only in coins that have a
/// rate; the sandbox has built-in test rates. `valid_until_unix` is the Unix time in
/// seconds after which the rate is not used, or 0 for valid until replaced.
///
/// `*rate_json_out` gets the rate as stored:
/// `{"environment","crypto","fiat","rate","valid_until","updated_at"}` (`valid_until`
/// null when 0 was given). An unknown coin or fiat code, a rate not above 0, or a
/// `valid_until_unix` already past or after the year 9999, fails with
/// `PARAMETERS_MISSING` naming it.
#[no_mangle]
pub unsafe extern "C" fn coinorder_rate_set(
    service: *const coinorder_service,
    crypto: *const c_char,
    fiat: *const c_char,
    rate: *const c_char,
    valid_until_unix: i64,
    rate_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(rate_json_out, "rate_json_out")?;
        let service = service_ref(service)?;
        let (crypto, fiat) = (text(crypto, "crypto")?, text(fiat, "fiat")?);
        let rate = coinorder::money::parse_decimal("rate", text(rate, "rate")?)?;
        let valid_until = match valid_until_unix {
            0 => None,
            seconds => Some(Timestamp(seconds.saturating_mul(1000))),
        };
        let rate = service.set_rate(crypto, fiat, rate, valid_until)?;
        json_out(rate_json_out, "rate_json_out", &render::rate(&rate))
    })
}

/// Lists the exchange rates set in the service's environment (the sandbox's built-in
/// rates are not listed) as a JSON array of the objects [`coinorder_rate_set`] returns.
#[no_mangle]
pub unsafe extern "C" fn coinorder_rate_list(
    service: *const coinorder_service,
    rates_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(rates_json_out, "rates_json_out")?;
        let rates = service_ref(service)?.list_rates()?;
        json_out(rates_json_out, "rates_json_out", &Value::Array(rates.iter().map(render::rate).collect()))
    })
}

/// Sets (or replaces) the watch-only wallet of `coin` (`"BTC"`, `"ETH"`, `"USDT"` or
/// `"USDC"`) in the service's environment: from then on each new invoice in `coin` gets
/// the next address derived from it.
///
/// `key` is an extended public key, never a private one: for BTC a `zpub` or `xpub`
/// account key (BIP84 native segwit) or a `wpkh(...)` descriptor of one such key with
/// its receive path and wildcard, in the sandbox a `vpub` or `tpub`; for ETH and the
/// tokens the account `xpub` at `m/44'/60'/0'`. A private key, or a key of the other
/// network, fails with `PARAMETERS_MISSING`; the message never repeats the key.
///
/// `*wallet_json_out` gets the wallet as stored:
/// `{"environment","coin","descriptor","next_index","first_address","created_at","updated_at"}`.
/// Compare `first_address` with the first receive address the merchant's own wallet
/// shows before taking payments.
#[no_mangle]
pub unsafe extern "C" fn coinorder_wallet_set(
    service: *const coinorder_service,
    coin: *const c_char,
    key: *const c_char,
    wallet_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(wallet_json_out, "wallet_json_out")?;
        let service = service_ref(service)?;
        let wallet = service.set_wallet(text(coin, "coin")?, text(key, "key")?)?;
        json_out(wallet_json_out, "wallet_json_out", &render::wallet(&wallet))
    })
}

/// Lists the watch-only wallets of the service's environment, by coin, as a JSON array
/// of the objects [`coinorder_wallet_set`] returns.
#[no_mangle]
pub unsafe extern "C" fn coinorder_wallet_list(
    service: *const coinorder_service,
    wallets_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(wallets_json_out, "wallets_json_out")?;
        let wallets = service_ref(service)?.wallets()?;
        json_out(wallets_json_out, "wallets_json_out", &Value::Array(wallets.iter().map(render::wallet).collect()))
    })
}

/// Removes the watch-only wallet of `coin`: new invoices in it get no derived address;
/// invoices made before keep theirs and are still watched. `*removed_out` is true when a
/// wallet was removed, false when none was set.
#[no_mangle]
pub unsafe extern "C" fn coinorder_wallet_remove(
    service: *const coinorder_service,
    coin: *const c_char,
    removed_out: *mut bool,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(removed_out, "removed_out")?;
        let removed = service_ref(service)?.remove_wallet(text(coin, "coin")?)?;
        out(removed_out, "removed_out", removed)
    })
}

/// The address of `coin`'s watch-only wallet at derivation `index`, to check against
/// the merchant's own wallet software. `*address_out` gets the address as text (not
/// JSON). A coin without a wallet fails with `PARAMETERS_MISSING`.
#[no_mangle]
pub unsafe extern "C" fn coinorder_wallet_address(
    service: *const coinorder_service,
    coin: *const c_char,
    index: u32,
    address_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(address_out, "address_out")?;
        let address = service_ref(service)?.wallet_address(text(coin, "coin")?, index)?;
        out(address_out, "address_out", ffi::c_string(address)?.into_raw())
    })
}

/// One pass of the chain watchers configured in `config_json` (`esplora_url` for
/// Bitcoin, `ethereum_rpc_url` for ETH and the tokens): records new payments to the
/// invoices' derived addresses, confirms those deep enough and rejects those that
/// vanished. Run it every few seconds, like [`coinorder_deliver_due`]; with no chain
/// configured it does nothing.
///
/// `*report_json_out` gets
/// `{"recorded","confirmed","rejected","backing_off":[...],"errors":[...]}`. An endpoint
/// failing is not a failure of the call: it is a line of `errors` naming the chain (the
/// endpoint shown as scheme, host and port only), and the next passes list the chain in
/// `backing_off` and skip it for a pause that doubles up to five minutes. Only a
/// database failure is an error.
#[no_mangle]
pub unsafe extern "C" fn coinorder_watch_chain_due(
    service: *const coinorder_service,
    report_json_out: *mut *mut c_char,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        need(report_json_out, "report_json_out")?;
        let report = service_ref(service)?.watch_chain_due()?;
        let report = json!({
            "recorded": report.recorded,
            "confirmed": report.confirmed,
            "rejected": report.rejected,
            "backing_off": report.backing_off,
            "errors": report.errors,
        });
        json_out(report_json_out, "report_json_out", &report)
    })
}

/// Verifies a received webhook (Standard Webhooks): `secret` is the key's `whsec_...`
/// secret; `msg_id`, `timestamp` and `signatures` are the `webhook-id`,
/// `webhook-timestamp` and `webhook-signature` header values as received; `body` points
/// at the `body_len` bytes received. `now_unix` is the current Unix time in seconds (0:
/// the system clock), for tests.
///
/// `COINORDER_OK` means authentic and fresh. Otherwise `COINORDER_ERROR` with error code
/// `SIGNATURE_INVALID` and a message saying why (no matching signature, a timestamp more
/// than 5 minutes off, a missing header, a malformed secret).
#[no_mangle]
pub unsafe extern "C" fn coinorder_signature_verify(
    secret: *const c_char,
    msg_id: *const c_char,
    timestamp: *const c_char,
    signatures: *const c_char,
    body: *const u8,
    body_len: usize,
    now_unix: i64,
    err: *mut *mut coinorder_error,
) -> coinorder_status {
    guard(err, || {
        let secret = text(secret, "secret")?;
        let (msg_id, timestamp, signatures) =
            (opt_text(msg_id, "msg_id")?, opt_text(timestamp, "timestamp")?, opt_text(signatures, "signatures")?);
        let body = bytes(body, body_len, "body")?;
        let now = match now_unix {
            0 => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
            given => given,
        };
        coinorder::signature::verify(secret, msg_id, timestamp, signatures, &body, now)
            .map_err(|e| coinorder::Error::new(coinorder::ErrorKind::from(e)))?;
        Ok(())
    })
}

/// Frees a string returned by this library. NULL is fine.
#[no_mangle]
pub unsafe extern "C" fn coinorder_string_free(string: *mut c_char) {
    if !string.is_null() {
        drop(std::ffi::CString::from_raw(string));
    }
}

/// The error's code: the spec's `error_code` string (`"ORDER_NOT_VALID"`,
/// `"PARAMETERS_MISSING"`, `"Unauthorized"`, ...). Borrowed from `err`: valid until
/// [`coinorder_error_free`]. NULL when `err` is NULL.
#[no_mangle]
pub unsafe extern "C" fn coinorder_error_code(err: *const coinorder_error) -> *const c_char {
    err.as_ref().map_or(ptr::null(), |err| err.code.as_ptr())
}

/// The error's message, naming the field or argument at fault
/// (`"amount: must be greater than 0"`). Borrowed from `err`: valid until
/// [`coinorder_error_free`]. NULL when `err` is NULL.
#[no_mangle]
pub unsafe extern "C" fn coinorder_error_message(err: *const coinorder_error) -> *const c_char {
    err.as_ref().map_or(ptr::null(), |err| err.message.as_ptr())
}

/// The HTTP status the spec gives this error (400, 401, 404 or 500, and 503 for a
/// database another process kept locked past the busy timeout); 0 when `err` is NULL.
#[no_mangle]
pub unsafe extern "C" fn coinorder_error_http_status(err: *const coinorder_error) -> u16 {
    err.as_ref().map_or(0, |err| err.http_status)
}

/// The error's stable number, one per error code (the `COINORDER_ERROR_*` constants);
/// 0 when `err` is NULL.
#[no_mangle]
pub unsafe extern "C" fn coinorder_error_number(err: *const coinorder_error) -> u32 {
    err.as_ref().map_or(0, |err| err.number)
}

/// The status the failed call returned (`COINORDER_ERROR`, `COINORDER_NULL_ARGUMENT`,
/// ...); `COINORDER_OK` when `err` is NULL.
#[no_mangle]
pub unsafe extern "C" fn coinorder_error_status(err: *const coinorder_error) -> coinorder_status {
    err.as_ref().map_or(coinorder_status::COINORDER_OK, |err| err.status)
}

/// Frees an error. NULL is fine.
#[no_mangle]
pub unsafe extern "C" fn coinorder_error_free(err: *mut coinorder_error) {
    if !err.is_null() {
        drop(Box::from_raw(err));
    }
}

/// The service behind a C pointer, or `COINORDER_NULL_ARGUMENT`.
unsafe fn service_ref<'a>(service: *const coinorder_service) -> Result<&'a Service, CallError> {
    Ok(&service.as_ref().ok_or_else(|| CallError::null("service"))?.checked()?.service)
}

/// The service and the merchant an API key authenticates, as the `x-api-key` header would.
unsafe fn authenticated<'a>(
    service: *const coinorder_service,
    api_key: *const c_char,
) -> Result<(&'a Service, coinorder::Merchant), CallError> {
    let service = service_ref(service)?;
    let merchant = service.authenticate(Some(text(api_key, "api_key")?))?;
    Ok((service, merchant))
}

/// The stable numbers of the error codes, as the header names them. Checked against the
/// core at compile time below, so the two can never drift.
pub mod error_numbers {
    /// `PARAMETERS_MISSING`
    pub const COINORDER_ERROR_PARAMETERS_MISSING: u32 = 1;
    /// `API_LIMIT_EXCEEDED`
    pub const COINORDER_ERROR_API_LIMIT_EXCEEDED: u32 = 2;
    /// `AUTHENTICATION_FAILED`
    pub const COINORDER_ERROR_AUTHENTICATION_FAILED: u32 = 3;
    /// `Unauthorized`
    pub const COINORDER_ERROR_UNAUTHORIZED: u32 = 4;
    /// `ORDER_NOT_VALID`
    pub const COINORDER_ERROR_ORDER_NOT_VALID: u32 = 5;
    /// `ORDER_DUPLICATE`
    pub const COINORDER_ERROR_ORDER_DUPLICATE: u32 = 6;
    /// `ORDER_STATE_INVALID`
    pub const COINORDER_ERROR_ORDER_STATE_INVALID: u32 = 7;
    /// `KEY_NOT_FOUND`
    pub const COINORDER_ERROR_KEY_NOT_FOUND: u32 = 8;
    /// `PAYMENT_NOT_FOUND`
    pub const COINORDER_ERROR_PAYMENT_NOT_FOUND: u32 = 9;
    /// `Not Found`
    pub const COINORDER_ERROR_NOT_FOUND: u32 = 10;
    /// `InternalServerError`
    pub const COINORDER_ERROR_INTERNAL_SERVER_ERROR: u32 = 11;
    /// `SIGNATURE_INVALID`
    pub const COINORDER_ERROR_SIGNATURE_INVALID: u32 = 12;
    /// `ServiceUnavailable`: the database stayed locked past the busy timeout; nothing
    /// was done, try again later
    pub const COINORDER_ERROR_SERVICE_UNAVAILABLE: u32 = 13;
    /// `EVENT_NOT_FOUND`: no event with that id in this environment
    pub const COINORDER_ERROR_EVENT_NOT_FOUND: u32 = 14;
}

const _: () = {
    use coinorder::ErrorCode as C;
    use error_numbers::*;
    assert!(COINORDER_ERROR_PARAMETERS_MISSING == C::ParametersMissing as u32);
    assert!(COINORDER_ERROR_API_LIMIT_EXCEEDED == C::ApiLimitExceeded as u32);
    assert!(COINORDER_ERROR_AUTHENTICATION_FAILED == C::AuthenticationFailed as u32);
    assert!(COINORDER_ERROR_UNAUTHORIZED == C::Unauthorized as u32);
    assert!(COINORDER_ERROR_ORDER_NOT_VALID == C::OrderNotValid as u32);
    assert!(COINORDER_ERROR_ORDER_DUPLICATE == C::OrderDuplicate as u32);
    assert!(COINORDER_ERROR_ORDER_STATE_INVALID == C::OrderStateInvalid as u32);
    assert!(COINORDER_ERROR_KEY_NOT_FOUND == C::KeyNotFound as u32);
    assert!(COINORDER_ERROR_PAYMENT_NOT_FOUND == C::PaymentNotFound as u32);
    assert!(COINORDER_ERROR_NOT_FOUND == C::NotFound as u32);
    assert!(COINORDER_ERROR_INTERNAL_SERVER_ERROR == C::InternalServerError as u32);
    assert!(COINORDER_ERROR_SIGNATURE_INVALID == C::SignatureInvalid as u32);
    assert!(COINORDER_ERROR_SERVICE_UNAVAILABLE == C::ServiceUnavailable as u32);
    assert!(COINORDER_ERROR_EVENT_NOT_FOUND == C::EventNotFound as u32);
    assert!(C::ALL.len() == 14);
};

#[cfg(test)]
mod header_tests {
    // Tests: the committed `include/coinorder.h` is exactly what the pinned cbindgen generates from
    // this crate. After changing the C API, refresh it with
    // `COINORDER_BLESS=1 cargo test -p coinorder-c --lib committed_header` and commit it.

    use std::path::Path;

    #[test]
    fn committed_header_matches_the_generated_one() {
        let generated =
            std::fs::read_to_string(concat!(env!("OUT_DIR"), "/coinorder.h")).expect("build.rs wrote the header");
        let committed_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include/coinorder.h");
        if std::env::var_os("COINORDER_BLESS").is_some() {
            std::fs::write(&committed_path, &generated).expect("write include/coinorder.h");
        }
        let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
        assert!(
            committed == generated,
            "include/coinorder.h is stale: run `COINORDER_BLESS=1 cargo test -p coinorder-c --lib committed_header` and commit it"
        );
    }

    #[test]
    fn header_version_macro_matches_the_library() {
        let committed =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include/coinorder.h"))
                .expect("include/coinorder.h");
        let line = format!("#define COINORDER_ABI_VERSION {}", super::COINORDER_ABI_VERSION);
        assert!(committed.contains(&line), "header lacks `{line}`");
        assert_eq!(super::coinorder_abi_version(), super::COINORDER_ABI_VERSION);
    }
}
