//! The Python module `coinorder._coinorder` (DESIGN §9.2): a thin layer over the core.
//!
//! It converts Python arguments to the core's typed requests, calls [`coinorder::Service`]
//! with the GIL released (`py.detach`), and returns immutable objects with the Rust field
//! names. Money crosses as `decimal.Decimal` (exact: never rounded), timestamps as aware UTC
//! `datetime`s. Errors become the exception classes of `coinorder._errors`, one per
//! error code, chosen by [`to_py_err`]. No business rule lives here.

use std::sync::{Arc, Mutex};

use coinorder::money::Decimal;
use coinorder::{
    Config, CreateOrder, Environment, ListOrders, Merchant as CoreMerchant, NewApiKey, OrderStatus, Service as Core,
    SimulateAction, Timestamp, WireRequest,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

/// A core error as the `coinorder` exception of its code.
fn to_py_err(py: Python<'_>, error: &coinorder::Error) -> PyErr {
    let code = error.code();
    let class = match code {
        coinorder::ErrorCode::ParametersMissing => "ParametersMissing",
        coinorder::ErrorCode::ApiLimitExceeded => "ApiLimitExceeded",
        coinorder::ErrorCode::AuthenticationFailed => "AuthenticationFailed",
        coinorder::ErrorCode::Unauthorized => "Unauthorized",
        coinorder::ErrorCode::OrderNotValid => "OrderNotValid",
        coinorder::ErrorCode::OrderDuplicate => "OrderDuplicate",
        coinorder::ErrorCode::OrderStateInvalid => "OrderStateInvalid",
        coinorder::ErrorCode::KeyNotFound => "KeyNotFound",
        coinorder::ErrorCode::PaymentNotFound => "PaymentNotFound",
        coinorder::ErrorCode::NotFound => "NotFound",
        coinorder::ErrorCode::SignatureInvalid => "WebhookVerificationError",
        coinorder::ErrorCode::ServiceUnavailable => "ServiceUnavailable",
        coinorder::ErrorCode::EventNotFound => "EventNotFound",
        _ => "InternalError",
    };
    let raised = py.import("coinorder._errors").and_then(|errors| {
        let args = (error.to_string(), code.as_str(), code.http_status(), error.retry_after_secs());
        errors.getattr(class)?.call1(args)
    });
    match raised {
        Ok(instance) => PyErr::from_value(instance),
        Err(import_failed) => import_failed,
    }
}

/// Runs `work` with the GIL released and turns a core error into its exception.
fn detached<T: Send>(py: Python<'_>, work: impl FnOnce() -> coinorder::Result<T> + Send) -> PyResult<T> {
    py.detach(work).map_err(|e| to_py_err(py, &e))
}

/// An exact amount from Python: `decimal.Decimal`, `int` or decimal text; never a float
/// (or a bool), which would have rounded the price before we ever saw it.
fn amount_arg(value: &Bound<'_, PyAny>, field: &str) -> PyResult<Decimal> {
    let type_name = value.get_type().name()?.to_string();
    if value.is_instance_of::<PyBool>() || value.is_instance_of::<PyFloat>() {
        return Err(PyTypeError::new_err(format!(
            "{field}: use decimal.Decimal (or int, or decimal text), not {type_name}: a {type_name} cannot hold money exactly"
        )));
    }
    // int, text and Decimal all go through the core's one parser of amounts (the same
    // rules as the HTTP API: a plain number, exact, never rounded to fit).
    let exact = value.is_instance_of::<PyInt>()
        || value.is_instance_of::<PyString>()
        || value.is_instance(cached(value.py())?.decimal.bind(value.py()))?;
    if exact {
        let text = value.str()?;
        return coinorder::money::parse_decimal(field, &text.to_cow()?).map_err(|e| to_py_err(value.py(), &e));
    }
    Err(PyTypeError::new_err(format!("{field}: must be a decimal.Decimal, int or decimal text, not {type_name}")))
}

/// Python objects looked up once per interpreter: what every conversion needs.
struct Cached {
    epoch: Py<PyAny>,
    timedelta: Py<PyAny>,
    decimal: Py<PyAny>,
    order_status: Py<PyAny>,
}

static CACHED: PyOnceLock<Cached> = PyOnceLock::new();

fn cached(py: Python<'_>) -> PyResult<&Cached> {
    CACHED.get_or_try_init(py, || {
        let module = py.import("datetime")?;
        let utc = module.getattr("timezone")?.getattr("utc")?;
        Ok(Cached {
            epoch: module.getattr("datetime")?.call1((1970, 1, 1, 0, 0, 0, 0, utc))?.unbind(),
            timedelta: module.getattr("timedelta")?.unbind(),
            decimal: py.import("decimal")?.getattr("Decimal")?.unbind(),
            order_status: py.import("coinorder._errors")?.getattr("OrderStatus")?.unbind(),
        })
    })
}

/// A timestamp as an aware UTC `datetime`, exact to the millisecond (epoch + timedelta,
/// no float on the way).
fn datetime(py: Python<'_>, at: Timestamp) -> PyResult<Py<PyAny>> {
    let cached = cached(py)?;
    let ms = at.as_millis();
    let delta = cached.timedelta.bind(py).call1((0, ms.div_euclid(1000), ms.rem_euclid(1000) * 1000))?;
    Ok(cached.epoch.bind(py).add(delta)?.unbind())
}

fn opt_datetime(py: Python<'_>, at: Option<Timestamp>) -> PyResult<Py<PyAny>> {
    match at {
        Some(at) => datetime(py, at),
        None => Ok(py.None()),
    }
}

/// A state as `coinorder.OrderStatus`, a `str` enum equal to the spec's text (`"PAID"`).
fn status(py: Python<'_>, status: OrderStatus) -> PyResult<Py<PyAny>> {
    Ok(cached(py)?.order_status.bind(py).getattr(status.as_str())?.unbind())
}

/// Any plain value (text, number, bool, Decimal, None) as a Python object.
fn value<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> PyResult<Py<PyAny>> {
    v.into_py_any(py)
}

/// A value for `to_dict`: a nested coinorder object as its own dict, a list item by item,
/// anything else as it is.
fn dict_value(py: Python<'_>, v: Py<PyAny>) -> PyResult<Py<PyAny>> {
    let bound = v.bind(py);
    if bound.is_instance_of::<PyList>() {
        let items = bound.try_iter()?.map(|item| dict_value(py, item?.unbind())).collect::<PyResult<Vec<_>>>()?;
        return Ok(PyList::new(py, items)?.into_any().unbind());
    }
    if !bound.is_instance_of::<PyString>() && bound.hasattr("to_dict")? {
        return Ok(bound.call_method0("to_dict")?.unbind());
    }
    Ok(v)
}

/// Value equality of two coinorder objects of one class: their `to_dict()`s are equal
/// (`NotImplemented` for any other type, so Python tries the other side).
fn equal_by_value(object: &Bound<'_, PyAny>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    let py = object.py();
    if !other.get_type().is(object.get_type()) {
        return Ok(py.NotImplemented());
    }
    let equal = object.call_method0("to_dict")?.eq(other.call_method0("to_dict")?)?;
    equal.into_py_any(py)
}

/// A hash agreeing with [`equal_by_value`]: of the `to_dict()` with every dict and list
/// turned into a tuple (every other value a coinorder object holds is hashable).
fn hash_by_value(object: &Bound<'_, PyAny>) -> PyResult<isize> {
    fn frozen<'py>(value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = value.py();
        if let Ok(dict) = value.cast::<PyDict>() {
            let items = dict
                .iter()
                .map(|(k, v)| Ok(PyTuple::new(py, [k, frozen(v)?])?.into_any()))
                .collect::<PyResult<Vec<_>>>()?;
            return Ok(PyTuple::new(py, items)?.into_any());
        }
        if let Ok(list) = value.cast::<PyList>() {
            let items = list.iter().map(frozen).collect::<PyResult<Vec<_>>>()?;
            return Ok(PyTuple::new(py, items)?.into_any());
        }
        Ok(value)
    }
    frozen(object.call_method0("to_dict")?)?.hash()
}

/// Renders the `__repr__` of an object from its `to_dict()`.
fn repr_of(object: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    let dict = object.call_method0("to_dict")?;
    let dict = dict.cast::<PyDict>()?;
    let mut parts = Vec::new();
    for (key, value) in dict.iter() {
        parts.push(format!("{}={}", key.str()?, value.repr()?));
    }
    Ok(format!("{name}({})", parts.join(", ")))
}

/// Declares an immutable Python class over a core value: each attribute is a read-only
/// property converted when it is read (so a call returning fifty orders does not build
/// fifty times twenty Python values nobody looks at), plus `to_dict()`, equality and
/// hashing by value, and a `repr` listing them. The one definition every returned object
/// uses.
macro_rules! record {
    ($(#[$meta:meta])* $name:ident($inner:ty) { $($(#[$fmeta:meta])* $field:ident => $conv:expr),* $(,)? }) => {
        $(#[$meta])*
        #[pyclass(frozen, module = "coinorder._coinorder")]
        pub struct $name {
            inner: $inner,
        }

        #[pymethods]
        impl $name {
            $(
                $(#[$fmeta])*
                #[getter]
                fn $field(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                    let convert: fn(Python<'_>, &$inner) -> PyResult<Py<PyAny>> = $conv;
                    convert(py, &self.inner)
                }
            )*

            /// The attributes as a plain `dict` (values keep their Python types; nested
            /// objects become dicts too).
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let dict = PyDict::new(py);
                $(dict.set_item(stringify!($field).trim_start_matches("r#"), dict_value(py, self.$field(py)?)?)?;)*
                Ok(dict)
            }

            fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
                repr_of(slf.as_any(), stringify!($name))
            }

            fn __eq__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
                equal_by_value(slf.as_any(), other)
            }

            fn __hash__(slf: &Bound<'_, Self>) -> PyResult<isize> {
                hash_by_value(slf.as_any())
            }
        }

        impl $name {
            /// Wraps a core value as a Python object.
            fn object(py: Python<'_>, inner: $inner) -> PyResult<Py<PyAny>> {
                Ok(Py::new(py, $name { inner })?.into_any())
            }
        }
    };
}

record! {
    /// An API key as stored: never the plain key or its webhook secret.
    ApiKey(coinorder::ApiKey) {
        /// Stable identifier (`key_...`), used to manage the key.
        id => |py, k| value(py, &k.id),
        /// The host app's merchant account id.
        user_id => |py, k| value(py, k.user_id),
        /// `"sandbox"` or `"live"`.
        environment => |py, k| value(py, k.environment.as_str()),
        /// `"active"` or `"inactive"`.
        status => |py, k| value(py, k.status.as_str()),
        /// Default webhook target of the key's orders.
        webhook_url => |py, k| value(py, &k.webhook_url),
        /// Prefix and last four characters, to tell keys apart.
        key_hint => |py, k| value(py, &k.key_hint),
        /// When it was created (aware UTC datetime).
        created_at => |py, k| datetime(py, k.created_at_ms),
        /// When it last authenticated a request, or None.
        last_used_at => |py, k| opt_datetime(py, k.last_used_at_ms),
        /// The merchant's name the payment page shows above the key's orders, or None.
        display_name => |py, k| value(py, &k.display_name),
    }
}

record! {
    /// The merchant an API key authenticates; pass it to the order calls.
    Merchant(CoreMerchant) {
        /// The key's id.
        key_id => |py, m| value(py, &m.key_id),
        /// The merchant account id.
        user_id => |py, m| value(py, m.user_id),
        /// `"sandbox"` or `"live"`.
        environment => |py, m| value(py, m.environment.as_str()),
    }
}

record! {
    /// An order (spec §2.3 plus what the host may see).
    Order(coinorder::Order) {
        /// The order id (a UUID).
        order_id => |py, o| value(py, &o.order_id),
        /// The merchant account id.
        user_id => |py, o| value(py, o.user_id),
        /// `"sandbox"` or `"live"`.
        environment => |py, o| value(py, o.environment.as_str()),
        /// The id of the key that created it.
        key_id => |py, o| value(py, &o.key_id),
        /// The merchant's own id for the order.
        merchant_order_id => |py, o| value(py, &o.merchant_order_id),
        /// Title shown to the customer.
        title => |py, o| value(py, &o.title),
        /// Description shown to the customer.
        description => |py, o| value(py, &o.description),
        /// Where the payment page sends the customer back.
        callback_url => |py, o| value(py, &o.callback_url),
        /// Where this order's webhooks go.
        webhook_url => |py, o| value(py, &o.webhook_url),
        /// Redirect after payment.
        success_url => |py, o| value(py, &o.success_url),
        /// Redirect after cancelling.
        cancel_url => |py, o| value(py, &o.cancel_url),
        /// Where the payment link is e-mailed.
        customer_email => |py, o| value(py, &o.customer_email),
        /// The fiat price (exact Decimal).
        amount => |py, o| value(py, o.amount),
        /// The fiat currency (ISO 4217).
        currency => |py, o| value(py, &o.currency),
        /// `""` until a payment is seen, then the fiat code.
        receive_currency => |py, o| value(py, &o.receive_currency),
        /// The state (`coinorder.OrderStatus`, equal to `"NEW"`, `"PAID"`...).
        status => |py, o| status(py, o.status),
        /// When it was created.
        created_at => |py, o| datetime(py, o.created_at),
        /// When it last changed.
        updated_at => |py, o| datetime(py, o.updated_at),
        /// Always False (orders are never deleted).
        deleted => |py, o| value(py, o.deleted),
        /// True when the merchant accepted a late or short payment.
        marked_paid => |py, o| value(py, o.marked_paid),
    }
}

record! {
    /// An order's invoice: the quote in crypto (spec §2.4 plus rate, address and URI).
    Invoice(coinorder::Invoice) {
        /// The invoice id.
        invoice_id => |py, i| value(py, &i.invoice_id),
        /// Its order.
        order_id => |py, i| value(py, &i.order_id),
        /// The merchant's id of the order.
        merchant_order_id => |py, i| value(py, &i.merchant_order_id),
        /// The crypto amount to pay (exact Decimal).
        amount => |py, i| value(py, i.amount),
        /// The crypto currency.
        currency => |py, i| value(py, &i.currency),
        /// Fiat per coin used for the quote.
        rate => |py, i| value(py, i.rate),
        /// The state, as the order's.
        status => |py, i| status(py, i.status),
        /// Fiat value received so far.
        receive_amount => |py, i| value(py, i.receive_amount),
        /// `""` until a payment is seen, then the fiat code.
        receive_currency => |py, i| value(py, &i.receive_currency),
        /// When it was created.
        created_at => |py, i| datetime(py, i.created_at),
        /// When the quote expires.
        expired_at => |py, i| datetime(py, i.expired_at),
        /// When it last changed.
        updated_at => |py, i| datetime(py, i.updated_at),
        /// The deposit address.
        address => |py, i| value(py, &i.address),
        /// The payment URI (BIP-21 / EIP-681).
        payment_uri => |py, i| value(py, &i.payment_uri),
        /// The index the address was derived at from the coin's watch-only wallet, or
        /// None when it was not derived (no wallet, or an address source gave it).
        derivation_index => |py, i| value(py, i.derivation_index),
    }
}

record! {
    /// A payment seen on chain.
    Payment(coinorder::Payment) {
        /// The transaction id.
        txid => |py, p| value(py, &p.txid),
        /// Its order.
        order_id => |py, p| value(py, &p.order_id),
        /// The amount in the invoice's coin (exact Decimal).
        amount => |py, p| value(py, p.amount),
        /// The coin.
        currency => |py, p| value(py, &p.currency),
        /// `"unconfirmed"`, `"confirmed"` or `"rejected"`.
        state => |py, p| value(py, p.state.as_str()),
        /// True when it counts toward the invoice (seen while the quote was open).
        counts => |py, p| value(py, p.counts),
        /// When it was first seen.
        seen_at => |py, p| datetime(py, p.seen_at),
        /// When it was confirmed or rejected, or None.
        settled_at => |py, p| opt_datetime(py, p.settled_at),
    }
}

record! {
    /// An event of the outbox (what a webhook receiver gets).
    Event(coinorder::Event) {
        /// The event id, the webhook's `webhook-id`.
        event_id => |py, e| value(py, &e.event_id),
        /// Its order.
        order_id => |py, e| value(py, &e.order_id),
        /// `"order.paid"`, `"order.pending"`...
        r#type => |py, e| value(py, e.event_type.as_str()),
        /// 1, 2, 3... per order.
        sequence => |py, e| value(py, e.sequence),
        /// The order's state before.
        previous_status => |py, e| value(py, e.previous_status.as_str()),
        /// The order's state after.
        status => |py, e| value(py, e.status.as_str()),
        /// When it happened.
        created_at => |py, e| datetime(py, e.created_at),
    }
}

record! {
    /// One attempt to deliver a webhook.
    WebhookAttempt(coinorder::WebhookAttempt) {
        /// 1 for the first attempt of the current schedule (a redelivery starts a new one).
        attempt => |py, a| value(py, a.attempt),
        /// Where it was sent, any password and query values shown as `***`.
        url => |py, a| value(py, &a.url),
        /// When it started.
        started_at => |py, a| datetime(py, a.started_at),
        /// The HTTP status, or None when no response came back.
        status => |py, a| value(py, a.status),
        /// How long it took, in milliseconds.
        latency_ms => |py, a| value(py, a.latency_ms),
        /// The first KiB of the response body, or None.
        response_excerpt => |py, a| value(py, &a.response_excerpt),
        /// What went wrong, or None.
        error => |py, a| value(py, &a.error),
    }
}

record! {
    /// An event with its webhook delivery: where it stands and every attempt.
    EventDelivery(coinorder::EventDelivery) {
        /// The event.
        event => |py, d| Event::object(py, d.event.clone()),
        /// `"pending"`, `"delivered"`, `"failed"` or `"no_target"`.
        state => |py, d| value(py, d.state.as_str()),
        /// Attempts made in the current schedule.
        attempts => |py, d| value(py, d.attempts),
        /// When the next attempt is due, while pending; else None.
        next_attempt_at => |py, d| {
            opt_datetime(py, (d.state == coinorder::DeliveryState::Pending).then_some(d.next_attempt_at))
        },
        /// When a 2xx came back, or None.
        delivered_at => |py, d| opt_datetime(py, d.delivered_at),
        /// The last failure, or None.
        last_error => |py, d| value(py, &d.last_error),
        /// Every attempt, oldest first.
        log => |py, d| objects(py, d.log.clone(), WebhookAttempt::object),
    }
}

record! {
    /// An exchange rate of the rate table.
    Rate(coinorder::Rate) {
        /// The coin.
        crypto => |py, r| value(py, &r.crypto),
        /// The fiat currency.
        fiat => |py, r| value(py, &r.fiat),
        /// Fiat per coin (exact Decimal).
        rate => |py, r| value(py, r.rate),
        /// After this it is not used; None: until replaced.
        valid_until => |py, r| opt_datetime(py, r.valid_until),
        /// When it was set.
        updated_at => |py, r| datetime(py, r.updated_at),
    }
}

record! {
    /// A watch-only wallet: the extended public key new invoices of its coin get their
    /// deposit addresses from.
    Wallet(coinorder::Wallet) {
        /// The coin: `"BTC"`, `"ETH"`, `"USDT"` or `"USDC"`.
        coin => |py, w| value(py, &w.coin),
        /// The key as stored: a descriptor with checksum (BTC) or the account xpub
        /// (ETH and the tokens). Public keys only.
        descriptor => |py, w| value(py, &w.descriptor),
        /// The index the next invoice's address is derived at.
        next_index => |py, w| value(py, w.next_index),
        /// The address at index 0: compare it with the merchant's own wallet.
        first_address => |py, w| value(py, &w.first_address),
        /// When it was first set.
        created_at => |py, w| datetime(py, w.created_at),
        /// When it was last set.
        updated_at => |py, w| datetime(py, w.updated_at),
    }
}

/// A list of core values as a list of their Python objects.
fn objects<T>(py: Python<'_>, items: Vec<T>, object: fn(Python<'_>, T) -> PyResult<Py<PyAny>>) -> PyResult<Py<PyAny>> {
    let items = items.into_iter().map(|item| object(py, item)).collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.into_any().unbind())
}

/// A key just created: the plain key and its webhook secret are shown this once.
#[pyclass(frozen, module = "coinorder._coinorder")]
pub struct CreatedKey {
    /// The plain API key (`test_...` / `prod_...`): store it, it is never shown again.
    #[pyo3(get)]
    plain_key: String,
    /// The webhook signing secret (`whsec_...`).
    #[pyo3(get)]
    webhook_secret: String,
    /// The key as stored.
    #[pyo3(get)]
    key: Py<PyAny>,
}

#[pymethods]
impl CreatedKey {
    /// The attributes as a dict (the plain key and secret included: handle with care).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("plain_key", &self.plain_key)?;
        dict.set_item("webhook_secret", &self.webhook_secret)?;
        dict.set_item("key", self.key.bind(py).call_method0("to_dict")?)?;
        Ok(dict)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        // Never the key or the secret: a repr ends up in logs.
        Ok(format!("CreatedKey(plain_key='<hidden>', webhook_secret='<hidden>', key={})", self.key.bind(py).repr()?))
    }
}

/// A list or dict attribute as a copy of its own, anything else as it is: what a caller
/// does to the list it was handed changes nothing the immutable object holds (nor its
/// hash). The items themselves are immutable objects or plain values.
fn fresh(py: Python<'_>, v: Py<PyAny>) -> PyResult<Py<PyAny>> {
    let bound = v.bind(py);
    if let Ok(list) = bound.cast::<PyList>() {
        return Ok(PyList::new(py, list.iter())?.into_any().unbind());
    }
    if let Ok(dict) = bound.cast::<PyDict>() {
        return Ok(dict.copy()?.into_any().unbind());
    }
    Ok(v)
}

/// Declares an immutable Python class of already-built attributes (objects that hold
/// other objects, and reports), with `to_dict()`, equality and hashing by value, and a
/// `repr`.
macro_rules! plain_record {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[pyclass(frozen, module = "coinorder._coinorder")]
        pub struct $name {
            $($(#[$fmeta])* $field: $ty,)*
        }

        #[pymethods]
        impl $name {
            $(
                $(#[$fmeta])*
                #[getter]
                fn $field(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                    fresh(py, value(py, &self.$field)?)
                }
            )*

            /// The attributes as a plain `dict` (nested objects become dicts too).
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let dict = PyDict::new(py);
                $(dict.set_item(stringify!($field), dict_value(py, value(py, &self.$field)?)?)?;)*
                Ok(dict)
            }

            fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
                repr_of(slf.as_any(), stringify!($name))
            }

            fn __eq__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
                equal_by_value(slf.as_any(), other)
            }

            fn __hash__(slf: &Bound<'_, Self>) -> PyResult<isize> {
                hash_by_value(slf.as_any())
            }
        }
    };
}

/// The order and invoice of a core value, as Python objects.
fn pair(py: Python<'_>, current: coinorder::OrderWithInvoice) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
    Ok((Order::object(py, current.order)?, Invoice::object(py, current.invoice)?))
}

plain_record! {
    /// An order with its invoice.
    OrderWithInvoice {
        /// The order.
        order: Py<PyAny>,
        /// Its invoice.
        invoice: Py<PyAny>,
    }
}

impl OrderWithInvoice {
    fn new(py: Python<'_>, current: coinorder::OrderWithInvoice) -> PyResult<Self> {
        let (order, invoice) = pair(py, current)?;
        Ok(OrderWithInvoice { order, invoice })
    }
}

plain_record! {
    /// What `create_order` did.
    CreatedOrder {
        /// The order.
        order: Py<PyAny>,
        /// Its invoice.
        invoice: Py<PyAny>,
        /// The hosted payment page for the customer.
        payment_url: String,
        /// True when an identical earlier request was replayed (no new order); `order`
        /// and `invoice` are then as they are now, which may be past NEW.
        replayed: bool,
    }
}

plain_record! {
    /// A page of orders, newest first.
    OrderPage {
        /// The orders (a list of `Order`).
        orders: Py<PyAny>,
        /// The page size asked for.
        limit: u32,
        /// How many were skipped.
        offset: u64,
        /// True when more orders follow.
        has_more: bool,
    }
}

plain_record! {
    /// What a payment call did.
    PaymentOutcome {
        /// The payment as stored now.
        payment: Py<PyAny>,
        /// The order after the call.
        order: Py<PyAny>,
        /// Its invoice after the call.
        invoice: Py<PyAny>,
        /// Events the call emitted (a list of `Event`).
        events: Py<PyAny>,
        /// True when the call repeated an earlier one and changed nothing.
        duplicate: bool,
    }
}

impl PaymentOutcome {
    fn new(py: Python<'_>, outcome: coinorder::PaymentOutcome) -> PyResult<Self> {
        let (order, invoice) = pair(py, outcome.order)?;
        Ok(PaymentOutcome {
            payment: Payment::object(py, outcome.payment)?,
            order,
            invoice,
            events: objects(py, outcome.events, Event::object)?,
            duplicate: outcome.duplicate,
        })
    }
}

plain_record! {
    /// What a sandbox simulation step did.
    Simulation {
        /// The order after the step.
        order: Py<PyAny>,
        /// Its invoice after the step.
        invoice: Py<PyAny>,
        /// Payments the step made or settled (a list of `Payment`).
        payments: Py<PyAny>,
        /// Events it emitted (a list of `Event`).
        events: Py<PyAny>,
    }
}

plain_record! {
    /// What `expire_due` did.
    ExpiryReport {
        /// NEW orders that became EXPIRED.
        expired: usize,
        /// PENDING orders that became FAILED.
        failed: usize,
    }
}

plain_record! {
    /// What `deliver_due` did.
    DeliveryReport {
        /// Webhook attempts made.
        attempted: usize,
        /// Answered with a 2xx.
        delivered: usize,
        /// Failed, to be retried.
        retrying: usize,
        /// Failed for good.
        failed: usize,
        /// Events with no webhook URL to send to.
        no_target: usize,
    }
}

plain_record! {
    /// What `send_due_emails` did.
    EmailReport {
        /// E-mails attempted.
        attempted: usize,
        /// Accepted by the SMTP server.
        sent: usize,
        /// Failed this time, to be retried.
        retrying: usize,
        /// Given up.
        failed: usize,
    }
}

plain_record! {
    /// What `watch_chain_due` did.
    ChainWatchReport {
        /// Payments seen for the first time and recorded (unconfirmed).
        recorded: usize,
        /// Payments deep enough that were confirmed.
        confirmed: usize,
        /// Payments gone from the chain that were rejected.
        rejected: usize,
        /// Chains skipped because their endpoint failed recently (`"bitcoin"`,
        /// `"ethereum"`), a list of str.
        backing_off: Vec<String>,
        /// What went wrong, one line each naming the chain (a list of str).
        errors: Vec<String>,
    }
}

/// An HTTP response from `Service.handle`.
#[pyclass(frozen, module = "coinorder._coinorder")]
pub struct Response {
    /// The HTTP status.
    #[pyo3(get)]
    status: u16,
    /// The response headers, handed out by the `headers` getter as a copy.
    headers: Py<PyDict>,
    /// The body bytes.
    #[pyo3(get)]
    body: Py<PyBytes>,
}

#[pymethods]
impl Response {
    /// The response headers, lower-case names to values (a new dict on each read).
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.headers.bind(py).copy()
    }

    /// The body parsed as JSON: `json.loads(body, **kwargs)`, so `json(parse_float=Decimal)`
    /// keeps amounts exact.
    #[pyo3(signature = (**kwargs))]
    fn json<'py>(&self, py: Python<'py>, kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?.call_method("loads", (self.body.bind(py),), kwargs)
    }

    /// The attributes as a plain `dict`.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("status", self.status)?;
        dict.set_item("headers", self.headers.bind(py).copy()?)?;
        dict.set_item("body", self.body.bind(py))?;
        Ok(dict)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("Response(status={}, {} bytes)", self.status, self.body.bind(py).as_bytes().len())
    }
}

/// The order service over one SQLite file. Safe to share between threads.
#[pyclass(frozen, module = "coinorder._coinorder")]
pub struct Service {
    inner: Mutex<Option<Arc<Core>>>,
    environment: Environment,
    /// The background workers `start_workers` started, stopped by `stop_workers` or
    /// `close`.
    workers: Mutex<Option<coinorder::ServiceWorkers>>,
    /// The process that opened it: a forked child finds the parent's id here, and its
    /// copies of the parent's database connections and locks, which it must not touch.
    opened_in_process: u32,
}

impl Service {
    /// True in a process forked from the one that opened this service.
    fn inherited(&self) -> bool {
        std::process::id() != self.opened_in_process
    }

    /// In a forked child, drops nothing: the copies of the parent's connections, locks and
    /// worker handles are let go of without closing, which could wait forever on a lock
    /// a parent's thread held at the fork, or write to the parent's database.
    ///
    /// Only tried: a lock a parent's thread held at the fork is never released in the
    /// child, and waiting for it would hang. What is not taken here is let go of when
    /// the service is dropped ([`Drop`] needs no lock).
    fn abandon_if_inherited(&self) -> bool {
        if !self.inherited() {
            return false;
        }
        match self.inner.try_lock() {
            Ok(mut inner) => std::mem::forget(inner.take()),
            Err(std::sync::TryLockError::Poisoned(inner)) => std::mem::forget(inner.into_inner().take()),
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        match self.workers.try_lock() {
            Ok(mut workers) => std::mem::forget(workers.take()),
            Err(std::sync::TryLockError::Poisoned(workers)) => std::mem::forget(workers.into_inner().take()),
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        true
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if self.inherited() {
            // Exclusive access: the fields are taken without their locks, which a
            // parent's thread may have held at the fork.
            let inner = self.inner.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).take();
            let workers = self.workers.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner).take();
            std::mem::forget((inner, workers));
            return;
        }
        // Dropped without close(): the interpreter holds the GIL here, and stopping waits
        // for the webhooks on their way, which may need a Python thread of this process
        // (a receiver in the same app). They stop on a thread of their own instead.
        if let Some(workers) = self.workers.get_mut().ok().and_then(Option::take) {
            let stopping = std::thread::Builder::new().name("coinorder-stopping".into());
            // Should no thread start, they stop here after all.
            let _ = stopping.spawn(move || drop(workers));
        }
    }
}

impl Service {
    /// The open core service, or `ValueError` after `close()`.
    fn core(&self) -> PyResult<Arc<Core>> {
        if self.inherited() {
            return Err(PyValueError::new_err(format!(
                "this Service was opened in process {} and this process is a fork of it: open a new \
                 Service in this process (its database connections belong to the parent)",
                self.opened_in_process
            )));
        }
        let guard = self.inner.lock().map_err(|_| PyValueError::new_err("service is closed"))?;
        guard.clone().ok_or_else(|| PyValueError::new_err("service is closed"))
    }
}

fn opt_text_arg(value: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<String>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => {
            v.extract::<String>().map(Some).map_err(|_| PyTypeError::new_err(format!("{field}: must be a str or None")))
        }
    }
}

#[pymethods]
impl Service {
    /// Opens (creating if needed) the service over `target` (a SQLite file path, as a str
    /// or any `os.PathLike` such as `pathlib.Path`, or a PostgreSQL URL
    /// `postgres://user@host:5432/db`), for
    /// `environment` (`"sandbox"` or `"live"`); `options` are those of the C ABI's
    /// `config_json` (`invoice_ttl=900`, `rate_limit=0`, `synchronous="normal"`...),
    /// the chain watchers' among them: `esplora_url`, `bitcoin_confirmations`,
    /// `ethereum_rpc_url`, `ethereum_confirmations` and `ethereum_tokens` (a dict of
    /// coin to ERC-20 contract address).
    #[staticmethod]
    #[pyo3(signature = (target, environment = "sandbox", **options))]
    fn open(
        py: Python<'_>,
        target: std::path::PathBuf,
        environment: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut config_options = serde_json::Map::new();
        config_options.insert("environment".into(), serde_json::Value::from(environment));
        if let Some(options) = options {
            for (name, value) in options.iter() {
                let name: String = name.extract()?;
                config_options.insert(name.clone(), option_value(&value, &name)?);
            }
        }
        let config = Config::from_options(&serde_json::Value::Object(config_options)).map_err(|e| to_py_err(py, &e))?;
        let environment = config.environment;
        let core = detached(py, move || Core::open(target, config))?;
        Ok(Service {
            inner: Mutex::new(Some(Arc::new(core))),
            environment,
            workers: Mutex::new(None),
            opened_in_process: std::process::id(),
        })
    }

    /// Closes the service; later calls raise `ValueError`. Calling it twice is fine. Key
    /// uses that requests could not write while the writer was busy are written first, so
    /// no `last_used_at` is lost.
    fn close(&self, py: Python<'_>) {
        if self.abandon_if_inherited() {
            return;
        }
        // Closed first, so that no `start_workers` starts any after this; then the
        // workers, which hold the service open, stop.
        let taken = self.inner.lock().ok().and_then(|mut guard| guard.take());
        self.stop_workers(py);
        // The database closes when the last call in flight on another thread finishes.
        py.detach(move || drop(taken));
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        // A closed service says so here, not at the first call inside the block.
        slf.get().core()?;
        Ok(slf)
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    /// `"sandbox"` or `"live"`.
    #[getter]
    fn environment(&self) -> &'static str {
        self.environment.as_str()
    }

    fn __repr__(&self) -> String {
        let state = if self.core().is_ok() { "open" } else { "closed" };
        format!("Service(environment='{}', {state})", self.environment.as_str())
    }

    // ----- keys -----

    /// Creates an API key for merchant `user_id` in this service's environment.
    #[pyo3(signature = (user_id, webhook_url = None))]
    fn create_key(
        &self,
        py: Python<'_>,
        user_id: &Bound<'_, PyAny>,
        webhook_url: Option<String>,
    ) -> PyResult<CreatedKey> {
        // `None` is no account at all: refused, never taken as account 0.
        if user_id.is_none() {
            return Err(to_py_err(py, &coinorder::user_id_refused(true)));
        }
        if !user_id.is_instance_of::<PyInt>() || user_id.is_instance_of::<PyBool>() {
            return Err(PyTypeError::new_err("user_id: must be an int"));
        }
        // Out of range either way round: the core's one rule and message.
        let user_id = user_id.extract::<i64>().map_err(|_| to_py_err(py, &coinorder::user_id_refused(false)))?;
        let core = self.core()?;
        let environment = self.environment;
        let created = detached(py, move || core.create_key(NewApiKey { user_id, environment, webhook_url }))?;
        Ok(CreatedKey {
            plain_key: created.plain_key.expose().to_string(),
            webhook_secret: created.webhook_secret.expose().to_string(),
            key: ApiKey::object(py, created.key)?,
        })
    }

    /// Every API key (of both environments).
    fn list_keys(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        objects(py, detached(py, move || core.list_keys())?, ApiKey::object)
    }

    /// Lets a key be used again.
    fn activate_key(&self, py: Python<'_>, id: String) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        ApiKey::object(py, detached(py, move || core.activate_key(&id))?)
    }

    /// Refuses a key's requests (`AuthenticationFailed`) until it is activated again.
    fn deactivate_key(&self, py: Python<'_>, id: String) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        ApiKey::object(py, detached(py, move || core.deactivate_key(&id))?)
    }

    /// Deletes a key for good.
    fn delete_key(&self, py: Python<'_>, id: String) -> PyResult<()> {
        let core = self.core()?;
        detached(py, move || core.delete_key(&id))
    }

    /// Sets (or, with None, clears) a key's default webhook URL.
    #[pyo3(signature = (id, url))]
    fn set_key_webhook_url(&self, py: Python<'_>, id: String, url: Option<String>) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        ApiKey::object(py, detached(py, move || core.set_key_webhook_url(&id, url.as_deref()))?)
    }

    /// One key by id; unknown: `KeyNotFound`.
    fn get_key(&self, py: Python<'_>, id: String) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        ApiKey::object(py, detached(py, move || core.get_key(&id))?)
    }

    /// Sets the merchant's name the payment page shows above the titles of this key's
    /// orders (1 to 80 characters, no control characters), or clears it with None.
    fn set_key_display_name(&self, py: Python<'_>, id: String, name: Option<String>) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        ApiKey::object(py, detached(py, move || core.set_key_display_name(&id, name.as_deref()))?)
    }

    /// Gives a key a new webhook signing secret and returns it (shown this once). With
    /// `keep_old_for` (whole seconds, at most 30 days) the old secret signs webhooks as
    /// well until then, so a receiver can switch at its own pace.
    #[pyo3(signature = (id, keep_old_for = None))]
    fn rotate_key_webhook_secret(
        &self,
        py: Python<'_>,
        id: String,
        keep_old_for: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        // The core's bound (30 days) and message decide; this only reads whole seconds.
        let seconds = whole_arg(py, keep_old_for, "keep_old_for", 0, 0, i64::MAX)?;
        let keep = std::time::Duration::from_secs(seconds.unsigned_abs());
        let core = self.core()?;
        Ok(detached(py, move || core.rotate_key_webhook_secret_keeping_old(&id, keep))?.secret.expose().to_string())
    }

    /// The merchant a plain API key stands for, checked as the `x-api-key` header is.
    #[pyo3(signature = (plain_key))]
    fn authenticate(&self, py: Python<'_>, plain_key: Option<String>) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        let merchant = detached(py, move || core.authenticate(plain_key.as_deref()))?;
        Merchant::object(py, merchant)
    }

    // ----- orders -----

    /// Creates an order priced in fiat; `amount` is a `decimal.Decimal` (or int, or
    /// decimal text), never a float.
    #[pyo3(signature = (merchant, *, currency, amount, merchant_order_id = None, title = None, description = None,
        pay_currency = None, callback_url = None, webhook_url = None, success_url = None, cancel_url = None,
        customer_email = None))]
    #[allow(clippy::too_many_arguments)]
    fn create_order(
        &self,
        py: Python<'_>,
        merchant: &Merchant,
        currency: String,
        amount: &Bound<'_, PyAny>,
        merchant_order_id: Option<&Bound<'_, PyAny>>,
        title: Option<&Bound<'_, PyAny>>,
        description: Option<&Bound<'_, PyAny>>,
        pay_currency: Option<&Bound<'_, PyAny>>,
        callback_url: Option<&Bound<'_, PyAny>>,
        webhook_url: Option<&Bound<'_, PyAny>>,
        success_url: Option<&Bound<'_, PyAny>>,
        cancel_url: Option<&Bound<'_, PyAny>>,
        customer_email: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CreatedOrder> {
        let request = CreateOrder {
            merchant_order_id: opt_text_arg(merchant_order_id, "merchant_order_id")?,
            currency,
            amount: amount_arg(amount, "amount")?,
            title: opt_text_arg(title, "title")?,
            description: opt_text_arg(description, "description")?,
            callback_url: opt_text_arg(callback_url, "callback_url")?,
            webhook_url: opt_text_arg(webhook_url, "webhook_url")?,
            success_url: opt_text_arg(success_url, "success_url")?,
            cancel_url: opt_text_arg(cancel_url, "cancel_url")?,
            customer_email: opt_text_arg(customer_email, "customer_email")?,
            pay_currency: opt_text_arg(pay_currency, "pay_currency")?,
        };
        let merchant = merchant.inner.clone();
        let core = self.core()?;
        let created = detached(py, move || core.create_order(&merchant, &request))?;
        let (order, invoice) = pair(py, created.order)?;
        Ok(CreatedOrder { order, invoice, payment_url: created.payment_url, replayed: created.replayed })
    }

    /// An order of the merchant's with its invoice (`OrderNotValid` if there is none).
    fn get_order(&self, py: Python<'_>, merchant: &Merchant, order_id: String) -> PyResult<OrderWithInvoice> {
        let merchant = merchant.inner.clone();
        let core = self.core()?;
        OrderWithInvoice::new(py, detached(py, move || core.get_order(&merchant, &order_id))?)
    }

    /// The merchant's orders, newest first; `status` filters, `limit` is 1 to 50.
    // `None` stands for the defaults in Rust, so that an int of any size reaches `int_text_arg`;
    // Python sees the real defaults.
    #[pyo3(
        signature = (merchant, status = None, limit = None, offset = None),
        text_signature = "($self, merchant, status=None, limit=10, offset=0)"
    )]
    fn list_orders(
        &self,
        py: Python<'_>,
        merchant: &Merchant,
        status: Option<&Bound<'_, PyAny>>,
        limit: Option<&Bound<'_, PyAny>>,
        offset: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<OrderPage> {
        // The query's own rules (and messages) decide: the same text the URL would carry.
        let (limit, offset) = (int_text_arg(limit, "limit", 10)?, int_text_arg(offset, "offset", 0)?);
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        query.append_pair("limit", &limit).append_pair("offset", &offset);
        if let Some(status) = opt_text_arg(status, "status")? {
            query.append_pair("status", &status);
        }
        let query: ListOrders = coinorder::parse_list_query(&query.finish()).map_err(|e| to_py_err(py, &e))?;
        let merchant = merchant.inner.clone();
        let core = self.core()?;
        let page = detached(py, move || core.list_orders(&merchant, &query))?;
        let orders = objects(py, page.orders, Order::object)?;
        Ok(OrderPage { orders, limit: page.limit, offset: page.offset, has_more: page.has_more })
    }

    /// The merchant cancels a NEW order of theirs.
    fn cancel_order(&self, py: Python<'_>, merchant: &Merchant, order_id: String) -> PyResult<OrderWithInvoice> {
        let merchant = merchant.inner.clone();
        let core = self.core()?;
        OrderWithInvoice::new(py, detached(py, move || core.cancel_order(&merchant, &order_id))?)
    }

    /// Accepts a late or short payment: EXPIRED or FAILED becomes PAID.
    fn mark_paid(&self, py: Python<'_>, order_id: String) -> PyResult<OrderWithInvoice> {
        let core = self.core()?;
        OrderWithInvoice::new(py, detached(py, move || core.mark_paid(&order_id))?)
    }

    // ----- payments -----

    /// Records a payment seen on chain (idempotent by `txid`).
    #[pyo3(signature = (order_id, txid, amount, confirmed = true))]
    fn record_payment(
        &self,
        py: Python<'_>,
        order_id: String,
        txid: String,
        amount: &Bound<'_, PyAny>,
        confirmed: bool,
    ) -> PyResult<PaymentOutcome> {
        let amount = amount_arg(amount, "amount")?;
        let core = self.core()?;
        PaymentOutcome::new(py, detached(py, move || core.record_payment(&order_id, &txid, amount, confirmed))?)
    }

    /// Marks a recorded payment final.
    fn confirm_payment(&self, py: Python<'_>, txid: String) -> PyResult<PaymentOutcome> {
        let core = self.core()?;
        PaymentOutcome::new(py, detached(py, move || core.confirm_payment(&txid))?)
    }

    /// Marks a recorded payment as never final (a double spend).
    fn reject_payment(&self, py: Python<'_>, txid: String) -> PyResult<PaymentOutcome> {
        let core = self.core()?;
        PaymentOutcome::new(py, detached(py, move || core.reject_payment(&txid))?)
    }

    /// The payments of an order.
    fn order_payments(&self, py: Python<'_>, order_id: String) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        objects(py, detached(py, move || core.order_payments(&order_id))?, Payment::object)
    }

    /// One sandbox simulation step: `action` is pay, partial, confirm, reject, cancel or
    /// expire; `amount` (pay, partial) is in the invoice's coin, what is due by default;
    /// `confirmed=False` (pay, partial) leaves the payment unconfirmed.
    #[pyo3(signature = (order_id, action, amount = None, confirmed = true))]
    fn simulate(
        &self,
        py: Python<'_>,
        order_id: String,
        action: &str,
        amount: Option<&Bound<'_, PyAny>>,
        confirmed: bool,
    ) -> PyResult<Simulation> {
        let amount = match amount {
            Some(value) if !value.is_none() => Some(amount_arg(value, "amount")?),
            _ => None,
        };
        let action = SimulateAction::from_name(action, amount, confirmed).map_err(|e| to_py_err(py, &e))?;
        let core = self.core()?;
        let done = detached(py, move || core.simulate(&order_id, &action))?;
        let (order, invoice) = pair(py, done.order)?;
        let payments = objects(py, done.payments, Payment::object)?;
        Ok(Simulation { order, invoice, payments, events: objects(py, done.events, Event::object)? })
    }

    /// Starts the background work `coinorder serve` runs, on threads of the service: the
    /// expiry sweep every `interval` seconds, webhooks and payment-link e-mails as they
    /// come due (`batch` at a time), and the chain watcher every 15 s when one is
    /// configured.
    /// `stop_workers()` (or `close()`) stops them. Raises `ValueError` when they run.
    #[pyo3(signature = (interval = None, batch = None), text_signature = "($self, interval=1.0, batch=100)")]
    fn start_workers(
        &self,
        py: Python<'_>,
        interval: Option<&Bound<'_, PyAny>>,
        batch: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let seconds = match interval.filter(|value| !value.is_none()) {
            None => 1.0,
            Some(value) if value.is_instance_of::<PyBool>() => {
                return Err(PyTypeError::new_err("interval: must be a number of seconds"))
            }
            Some(value) => {
                value.extract::<f64>().map_err(|_| PyTypeError::new_err("interval: must be a number of seconds"))?
            }
        };
        let max_seconds = coinorder::MAX_WORKER_INTERVAL.as_secs();
        if !(seconds > 0.0 && seconds <= max_seconds as f64) {
            let rule = format!("must be more than 0 and at most {max_seconds} seconds");
            return Err(to_py_err(py, &coinorder::Error::invalid("interval", rule)));
        }
        let max_batch = i64::try_from(coinorder::MAX_WORKER_BATCH).unwrap_or(i64::MAX);
        let batch = usize::try_from(whole_arg(py, batch, "batch", 100, 1, max_batch)?).unwrap_or(100);
        let core = self.core()?;
        let every = std::time::Duration::from_secs_f64(seconds);
        let (inner, workers) = (&self.inner, &self.workers);
        // The lock is only ever held with the GIL released: a thread holding it never
        // waits for the GIL, so none waiting for it with the GIL can deadlock.
        let outcome = py.detach(move || -> std::result::Result<(), String> {
            let mut workers = workers.lock().map_err(|_| "service is closed".to_string())?;
            if workers.as_ref().is_some_and(coinorder::ServiceWorkers::is_running) {
                return Err("workers are already running: stop_workers() first".into());
            }
            // `close()` may have run since `core()` above: then nothing starts.
            if inner.lock().map_or(true, |service| service.is_none()) {
                return Err("service is closed".into());
            }
            let started = core.start_workers(every, batch).map_err(|e| format!("cannot start the workers: {e}"))?;
            *workers = Some(started);
            Ok(())
        });
        outcome.map_err(PyValueError::new_err)
    }

    /// Stops the workers `start_workers` started, waiting for the webhooks and the
    /// e-mail already on their way; nothing when none run.
    fn stop_workers(&self, py: Python<'_>) {
        // A fork's copy of the parent's workers has no threads to stop.
        if self.abandon_if_inherited() {
            return;
        }
        let workers = &self.workers;
        py.detach(move || {
            let taken = workers.lock().ok().and_then(|mut workers| workers.take());
            drop(taken);
        });
    }

    /// True while the workers `start_workers` started run.
    #[getter]
    fn workers_running(&self, py: Python<'_>) -> bool {
        if self.inherited() {
            return false;
        }
        let workers = &self.workers;
        py.detach(move || {
            workers
                .lock()
                .map(|workers| workers.as_ref().is_some_and(coinorder::ServiceWorkers::is_running))
                .unwrap_or(false)
        })
    }

    /// Moves every order whose quote has run out (NEW → EXPIRED, PENDING short → FAILED).
    fn expire_due(&self, py: Python<'_>) -> PyResult<ExpiryReport> {
        let core = self.core()?;
        let report = detached(py, move || core.expire_due(core.now()))?;
        Ok(ExpiryReport { expired: report.expired, failed: report.failed })
    }

    /// Sends up to `limit` due webhooks now; payment-link e-mails go out with
    /// `send_due_emails`.
    #[pyo3(signature = (limit = None), text_signature = "($self, limit=100)")]
    fn deliver_due(&self, py: Python<'_>, limit: Option<&Bound<'_, PyAny>>) -> PyResult<DeliveryReport> {
        let limit = usize::try_from(whole_arg(py, limit, "limit", 100, 0, i64::MAX)?).unwrap_or(usize::MAX);
        let core = self.core()?;
        let report = detached(py, move || core.deliver_due(limit))?;
        Ok(DeliveryReport {
            attempted: report.attempted,
            delivered: report.delivered,
            retrying: report.retrying,
            failed: report.failed,
            no_target: report.no_target,
        })
    }

    /// Sends up to `limit` due payment-link e-mails now, over the SMTP server of the
    /// service's options (`smtp_url`, `smtp_from`); without one it sends nothing and the
    /// e-mails stay pending. Call it from the same loop or timer as `deliver_due`.
    #[pyo3(signature = (limit = None), text_signature = "($self, limit=100)")]
    fn send_due_emails(&self, py: Python<'_>, limit: Option<&Bound<'_, PyAny>>) -> PyResult<EmailReport> {
        let limit = usize::try_from(whole_arg(py, limit, "limit", 100, 0, i64::MAX)?).unwrap_or(usize::MAX);
        let core = self.core()?;
        let report = detached(py, move || core.send_due_emails(limit))?;
        Ok(EmailReport {
            attempted: report.attempted,
            sent: report.sent,
            retrying: report.retrying,
            failed: report.failed,
        })
    }

    /// An order's events with their webhook delivery (state, attempts, the attempt log),
    /// oldest first: what support looks at when a webhook did not arrive. Unknown order:
    /// `OrderNotValid`.
    fn event_deliveries(&self, py: Python<'_>, order_id: String) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        let deliveries = detached(py, move || core.event_deliveries(&order_id))?;
        objects(py, deliveries, EventDelivery::object)
    }

    /// Queues an event for delivery again, due now, with a fresh retry schedule (the same
    /// `webhook-id` and body): after a receiver was down past the retries, say. An
    /// attempt in flight finishes first; the event is then sent again. Unknown id:
    /// `EventNotFound`.
    fn redeliver(&self, py: Python<'_>, event_id: String) -> PyResult<()> {
        let core = self.core()?;
        detached(py, move || core.redeliver(&event_id))
    }

    /// One pass of the chain watchers configured (`esplora_url`, `ethereum_rpc_url`):
    /// records, confirms and rejects the payments to the invoices' derived addresses.
    /// An endpoint failing is reported in `errors`, not raised.
    fn watch_chain_due(&self, py: Python<'_>) -> PyResult<ChainWatchReport> {
        let core = self.core()?;
        let report = detached(py, move || core.watch_chain_due())?;
        Ok(ChainWatchReport {
            recorded: report.recorded,
            confirmed: report.confirmed,
            rejected: report.rejected,
            backing_off: report.backing_off,
            errors: report.errors,
        })
    }

    // ----- wallets -----

    /// Sets (or replaces) the watch-only wallet of `coin` (BTC, ETH, USDT or USDC) in
    /// this environment from `key`, an extended public key or (BTC) a `wpkh(...)`
    /// descriptor; a private key is refused. New invoices in `coin` then get the next
    /// address derived from it.
    fn set_wallet(&self, py: Python<'_>, coin: String, key: String) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        Wallet::object(py, detached(py, move || core.set_wallet(&coin, &key))?)
    }

    /// The watch-only wallets of this environment, by coin.
    fn wallets(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        objects(py, detached(py, move || core.wallets())?, Wallet::object)
    }

    /// Removes the wallet of `coin`; False when none was set. Invoices made before keep
    /// their addresses and are still watched.
    fn remove_wallet(&self, py: Python<'_>, coin: String) -> PyResult<bool> {
        let core = self.core()?;
        detached(py, move || core.remove_wallet(&coin))
    }

    /// The address of `coin`'s wallet at `index`, to check against the merchant's own
    /// wallet software.
    #[pyo3(signature = (coin, index = None), text_signature = "($self, coin, index=0)")]
    fn wallet_address(&self, py: Python<'_>, coin: String, index: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
        let index = whole_arg(py, index, "index", 0, 0, i64::from(u32::MAX))?;
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let core = self.core()?;
        detached(py, move || core.wallet_address(&coin, index))
    }

    // ----- rates -----

    /// Sets the rate of `crypto` in `fiat` (fiat per coin), optionally until `valid_until`.
    #[pyo3(signature = (crypto, fiat, rate, valid_until = None))]
    fn set_rate(
        &self,
        py: Python<'_>,
        crypto: String,
        fiat: String,
        rate: &Bound<'_, PyAny>,
        valid_until: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let rate = amount_arg(rate, "rate")?;
        let valid_until = match valid_until {
            Some(at) if !at.is_none() => Some(timestamp_arg(at, "valid_until")?),
            _ => None,
        };
        let core = self.core()?;
        Rate::object(py, detached(py, move || core.set_rate(&crypto, &fiat, rate, valid_until))?)
    }

    /// The rates the host set for this environment; a sandbox quotes pairs not set here
    /// from its fixed test rates, which are not listed.
    fn list_rates(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let core = self.core()?;
        objects(py, detached(py, move || core.list_rates())?, Rate::object)
    }

    // ----- the HTTP API -----

    /// The spec's HTTP API: mount it in any Python web framework.
    ///
    /// `client` is the address the request came from (`request.remote_addr` in Flask,
    /// `request.client.host` in Starlette): with it, failed authentications are limited
    /// per address, as `serve` limits them; without it, they are not limited.
    #[pyo3(signature = (method, path, headers = None, body = None, client = None))]
    fn handle(
        &self,
        py: Python<'_>,
        method: &str,
        path: &str,
        headers: Option<&Bound<'_, PyAny>>,
        body: Option<&Bound<'_, PyAny>>,
        client: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Response> {
        let mut request = WireRequest::new(method, path);
        for (name, value) in header_items(headers)? {
            request = request.header(&name, &value);
        }
        request = request.body(body_arg(body)?);
        if let Some(client) = client_arg(client)? {
            request = request.client(client);
        }
        let core = self.core()?;
        let response = py.detach(move || core.handle(&request));
        let headers = PyDict::new(py);
        for (name, value) in &response.headers {
            headers.set_item(name, value)?;
        }
        Ok(Response {
            status: response.status,
            headers: headers.unbind(),
            body: PyBytes::new(py, &response.body).unbind(),
        })
    }
}

/// The `(name, value)` pairs of a headers argument: a mapping of `str` to `str` (whose
/// `items()` may list a name more than once, as werkzeug's and Starlette's headers do),
/// a sequence of `(name, value)` pairs, or `None` for none. Anything else is a
/// `TypeError` naming `headers` and, for a bad entry, the entry.
fn header_items(headers: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, String)>> {
    let Some(headers) = headers.filter(|h| !h.is_none()) else {
        return Ok(Vec::new());
    };
    let not_headers = |_: PyErr| {
        PyTypeError::new_err(
            "headers: must be a mapping of header names to values, or a sequence of (name, value) pairs",
        )
    };
    let entries = match headers.call_method0("items") {
        Ok(items) => items.try_iter().map_err(not_headers)?,
        Err(no_items) if headers.is_instance_of::<PyString>() || headers.is_instance_of::<PyBytes>() => {
            return Err(not_headers(no_items));
        }
        Err(_) => headers.try_iter().map_err(not_headers)?,
    };
    entries
        .map(|entry| {
            let entry = entry?;
            entry.extract::<(String, String)>().map_err(|_| {
                let shown = entry.repr().map(|r| r.to_string()).unwrap_or_default();
                let shown: String = shown.chars().take(80).collect();
                PyTypeError::new_err(format!(
                    "headers: every name and value must be a str; got {shown} (Django's request.META holds \
                     more than headers: pass request.headers)"
                ))
            })
        })
        .collect()
}

/// The `client` argument of `handle`: an IP address as text (`"203.0.113.7"`,
/// `"2001:db8::1"`, with a port or a zone too), an `ipaddress` object, or `None`.
/// Anything else (gunicorn's `""` on a unix socket, a test client's `"testclient"`) is
/// an unknown address, as `None` is.
fn client_arg(client: Option<&Bound<'_, PyAny>>) -> PyResult<Option<std::net::IpAddr>> {
    let Some(client) = client.filter(|c| !c.is_none()) else {
        return Ok(None);
    };
    let text =
        if client.is_instance_of::<PyString>() { client.extract::<String>()? } else { client.str()?.to_string() };
    Ok(coinorder::client_address(&text))
}

fn body_arg(body: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<u8>> {
    match body {
        None => Ok(Vec::new()),
        Some(b) if b.is_none() => Ok(Vec::new()),
        Some(b) => {
            if let Ok(text) = b.cast::<PyString>() {
                return Ok(text.to_cow()?.as_bytes().to_vec());
            }
            b.extract::<Vec<u8>>().map_err(|_| PyTypeError::new_err("body: must be bytes, str or None"))
        }
    }
}

/// A whole-number argument `field`: an `int` (not a `bool`) from `min` to `max`, `default`
/// when absent. Out of range, however large, it is `ParametersMissing` naming the field:
/// pyo3's own conversion would raise a bare `OverflowError` that names nothing.
fn whole_arg(
    py: Python<'_>,
    value: Option<&Bound<'_, PyAny>>,
    field: &str,
    default: i64,
    min: i64,
    max: i64,
) -> PyResult<i64> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(default);
    };
    if !value.is_instance_of::<PyInt>() || value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!("{field}: must be an int")));
    }
    match value.extract::<i64>() {
        Ok(number) if (min..=max).contains(&number) => Ok(number),
        _ => {
            Err(to_py_err(py, &coinorder::Error::invalid(field, format!("must be a whole number from {min} to {max}"))))
        }
    }
}

/// An `int` argument as the decimal text a query string would carry, for rules the core
/// applies to the text (a `limit` too large for any integer is over the limit).
fn int_text_arg(value: Option<&Bound<'_, PyAny>>, field: &str, default: i64) -> PyResult<String> {
    match value.filter(|value| !value.is_none()) {
        None => Ok(default.to_string()),
        Some(value) if value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>() => {
            Ok(value.str()?.to_cow()?.into_owned())
        }
        Some(_) => Err(PyTypeError::new_err(format!("{field}: must be an int"))),
    }
}

/// An aware `datetime` (or Unix seconds as an int) as a timestamp.
fn timestamp_arg(value: &Bound<'_, PyAny>, field: &str) -> PyResult<Timestamp> {
    if value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>() {
        // Seconds; pyo3's own conversion of a larger int raises an OverflowError naming nothing.
        let seconds = whole_arg(value.py(), Some(value), field, 0, i64::MIN / 1000, i64::MAX / 1000)?;
        return Ok(Timestamp(seconds.saturating_mul(1000)));
    }
    if value.getattr("tzinfo").map(|tz| tz.is_none()).unwrap_or(true) {
        return Err(PyTypeError::new_err(format!("{field}: must be a timezone-aware datetime")));
    }
    let seconds: f64 = value.call_method0("timestamp")?.extract()?;
    // Milliseconds, rounded: the precision the service stores.
    Ok(Timestamp((seconds * 1000.0).round() as i64))
}

/// An option value of `Service.open` as JSON (what `Config::from_options` reads).
fn option_value(value: &Bound<'_, PyAny>, name: &str) -> PyResult<serde_json::Value> {
    if value.is_none() {
        return Ok(serde_json::Value::Null);
    }
    if value.is_instance_of::<PyBool>() {
        Ok(serde_json::Value::Bool(value.extract()?))
    } else if value.is_instance_of::<PyInt>() {
        // Any size: the option's own range check names it (`config.invoice_ttl: ...`).
        let digits = value.str()?.to_cow()?.into_owned();
        serde_json::from_str(&digits).map_err(|_| PyTypeError::new_err(format!("{name}: not a whole number")))
    } else if value.is_instance_of::<PyString>() {
        Ok(serde_json::Value::from(value.extract::<String>()?))
    } else if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items: Vec<String> =
            value.extract().map_err(|_| PyTypeError::new_err(format!("{name}: must be a list of str")))?;
        Ok(serde_json::Value::from(items))
    } else if let Ok(dict) = value.cast::<PyDict>() {
        let not_text = |_| PyTypeError::new_err(format!("{name}: must be a dict of str to str"));
        let mut members = serde_json::Map::new();
        for (key, item) in dict.iter() {
            members.insert(
                key.extract().map_err(not_text)?,
                serde_json::Value::from(item.extract::<String>().map_err(not_text)?),
            );
        }
        Ok(serde_json::Value::Object(members))
    } else {
        let other = value.get_type().name()?.to_string();
        Err(PyTypeError::new_err(format!("{name}: a {other} is not a valid option value")))
    }
}

/// Verifies a received webhook (Standard Webhooks) and returns its JSON payload, amounts
/// as `decimal.Decimal`; raises `WebhookVerificationError` when it is not authentic or
/// not fresh, or when its body is not a JSON object.
#[pyfunction]
#[pyo3(signature = (secret, headers, body, now = None))]
fn verify_webhook<'py>(
    py: Python<'py>,
    secret: &str,
    headers: &Bound<'py, PyAny>,
    body: &Bound<'py, PyAny>,
    now: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let now = match now.filter(|now| !now.is_none()) {
        Some(now) => Some(whole_arg(py, Some(now), "now", 0, i64::MIN, i64::MAX)?),
        None => None,
    };
    let mut found: [Option<String>; 3] = [None, None, None];
    // `None` has no headers, so the missing one is named below.
    for (name, value) in header_items(Some(headers))? {
        let slot = match name.to_ascii_lowercase().as_str() {
            "webhook-id" => 0,
            "webhook-timestamp" => 1,
            "webhook-signature" => 2,
            _ => continue,
        };
        found[slot] = Some(value);
    }
    if body.is_none() {
        return Err(PyTypeError::new_err("body: must be bytes or str"));
    }
    let body = body_arg(Some(body))?;
    let now = match now {
        Some(now) => now,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
    };
    let [id, timestamp, signature] = &found;
    coinorder::signature::verify(secret, id.as_deref(), timestamp.as_deref(), signature.as_deref(), &body, now)
        .map_err(|e| to_py_err(py, &coinorder::Error::new(coinorder::ErrorKind::from(e))))?;
    // Authentic, but a payload is a JSON object: anything else is refused the same way,
    // so a receiver handles one exception.
    if !matches!(serde_json::from_slice::<serde_json::Value>(&body), Ok(serde_json::Value::Object(_))) {
        let code = coinorder::ErrorCode::SignatureInvalid;
        let raised = py.import("coinorder._errors")?.getattr("WebhookVerificationError")?.call1((
            "webhook payload: the signed body is not a JSON object",
            code.as_str(),
            code.http_status(),
        ))?;
        return Err(PyErr::from_value(raised));
    }
    // Money is `decimal.Decimal` (DESIGN §9.2): a number with a point or an exponent is
    // read as one, exactly as sent; whole numbers stay `int`.
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("parse_float", py.import("decimal")?.getattr("Decimal")?)?;
    py.import("json")?.call_method("loads", (PyBytes::new(py, &body),), Some(&kwargs))
}

/// The compiled part of the `coinorder` package.
#[pymodule]
fn _coinorder(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Service>()?;
    m.add_class::<ApiKey>()?;
    m.add_class::<CreatedKey>()?;
    m.add_class::<Merchant>()?;
    m.add_class::<Order>()?;
    m.add_class::<Invoice>()?;
    m.add_class::<OrderWithInvoice>()?;
    m.add_class::<CreatedOrder>()?;
    m.add_class::<OrderPage>()?;
    m.add_class::<Payment>()?;
    m.add_class::<Event>()?;
    m.add_class::<WebhookAttempt>()?;
    m.add_class::<EventDelivery>()?;
    m.add_class::<PaymentOutcome>()?;
    m.add_class::<Simulation>()?;
    m.add_class::<ExpiryReport>()?;
    m.add_class::<DeliveryReport>()?;
    m.add_class::<EmailReport>()?;
    m.add_class::<ChainWatchReport>()?;
    m.add_class::<Wallet>()?;
    m.add_class::<Rate>()?;
    m.add_class::<Response>()?;
    m.add_function(wrap_pyfunction!(verify_webhook, m)?)?;
    Ok(())
}
