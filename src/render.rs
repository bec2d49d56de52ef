//! The JSON shapes of the spec (§2.2–§2.5, §4, DESIGN §5, §7): every API body and the
//! webhook payload are built here and nowhere else, and so are the host's views (order
//! with rate and address, payments, events, key creation, delivery reports) that the
//! CLI prints and the bindings return. (The payment page's public status,
//! which is not part of the spec, is built beside the page in `page.rs`.)

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::delivery::DeliveryReport;
use crate::keys::CreatedApiKey;
use crate::lifecycle::EventType;
use crate::money::to_json_number;
use crate::orders::{CreatedOrder, Invoice, Order, OrderPage, OrderStatus, OrderWithInvoice};
use crate::payments::{Event, Payment, PaymentOutcome, Rate, Simulation};
use crate::time::Timestamp;
use crate::wallets::Wallet;

/// The `data` object of Create Order (spec §2.2): exactly these fields, `null` when not sent.
pub fn order_created(order: &Order) -> Value {
    value_of(CreatedMembers(order))
}

/// The whole 201 body of Create Order (spec §4.1).
pub fn create_response(created: &CreatedOrder) -> Value {
    value_of(CreateBody(created))
}

/// [`create_response`] as JSON text, without building the `Value`: every create stores
/// this body (replays return it byte for byte).
pub fn create_response_json(created: &CreatedOrder) -> String {
    text_of(CreateBody(created), ORDER_JSON_BYTES)
}

/// The Create Order body, in place.
struct CreateBody<'a>(&'a CreatedOrder);

impl Serialize for CreateBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("status", &201)?;
        map.serialize_entry("message", "Order created successfully")?;
        map.serialize_entry("data", &CreatedMembers(&self.0.order.order))?;
        map.serialize_entry("payment_url", &self.0.payment_url)?;
        map.end()
    }
}

/// The `data` members of Create Order, in place.
struct CreatedMembers<'a>(&'a Order);

impl Serialize for CreatedMembers<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let order = self.0;
        let mut map = serializer.serialize_map(Some(12))?;
        map.serialize_entry("user_id", &order.user_id)?;
        map.serialize_entry("merchant_order_id", &order.merchant_order_id)?;
        map.serialize_entry("title", &order.title)?;
        map.serialize_entry("description", &order.description)?;
        map.serialize_entry("callback_url", &order.callback_url)?;
        map.serialize_entry("webhook_url", &order.webhook_url)?;
        map.serialize_entry("amount", &to_json_number(order.amount))?;
        map.serialize_entry("currency", &order.currency)?;
        map.serialize_entry("order_id", &order.order_id)?;
        map.serialize_entry("status", order.status.as_str())?;
        map.serialize_entry("created_at", &order.created_at)?;
        map.serialize_entry("updated_at", &order.updated_at)?;
        map.end()
    }
}

/// The order members Get Order and Get Orders share, written straight into the output
/// (no `Value` tree): the two name the fiat amount and currency differently
/// (`price_amount`/`price_currency` versus `amount`/`currency`).
struct OrderMembers<'a> {
    order: &'a Order,
    amount_name: &'static str,
    currency_name: &'static str,
}

impl Serialize for OrderMembers<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let order = self.order;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("order_id", &order.order_id)?;
        map.serialize_entry("user_id", &order.user_id)?;
        map.serialize_entry("merchant_order_id", &order.merchant_order_id)?;
        map.serialize_entry("title", &order.title)?;
        map.serialize_entry("description", &order.description)?;
        map.serialize_entry("callback_url", &order.callback_url)?;
        if let Some(url) = &order.cancel_url {
            map.serialize_entry("cancel_url", url)?;
        }
        if let Some(url) = &order.success_url {
            map.serialize_entry("success_url", url)?;
        }
        map.serialize_entry(self.amount_name, &to_json_number(order.amount))?;
        map.serialize_entry(self.currency_name, &order.currency)?;
        map.serialize_entry("receive_currency", &order.receive_currency)?;
        map.serialize_entry("status", order.status.as_str())?;
        map.serialize_entry("created_at", &order.created_at)?;
        map.serialize_entry("updated_at", &order.updated_at)?;
        map.serialize_entry("deleted", &i64::from(order.deleted))?;
        map.end()
    }
}

/// The `order` object of Get Order (spec §2.3), in place.
fn detail_members(order: &Order) -> OrderMembers<'_> {
    OrderMembers { order, amount_name: "price_amount", currency_name: "price_currency" }
}

/// One item of Get Orders (spec §2.5), in place.
fn list_item_members(order: &Order) -> OrderMembers<'_> {
    OrderMembers { order, amount_name: "amount", currency_name: "currency" }
}

/// The `invoice` object of Get Order (spec §2.4), written in place.
/// The invoice members of spec §2.4; with `deposit`, also the `rate`, `address` and
/// `payment_uri` Get Order adds beyond them (DESIGN §5), for merchants who build their own
/// checkout. Webhooks carry §2.4 exactly.
struct InvoiceMembers<'a> {
    invoice: &'a Invoice,
    deposit: bool,
}

impl<'a> Serialize for InvoiceMembers<'a> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let invoice = self.invoice;
        let mut map = serializer.serialize_map(Some(if self.deposit { 15 } else { 12 }))?;
        map.serialize_entry("invoice_id", &invoice.invoice_id)?;
        map.serialize_entry("order_id", &invoice.order_id)?;
        map.serialize_entry("amount", &to_json_number(invoice.amount))?;
        map.serialize_entry("currency", &invoice.currency)?;
        map.serialize_entry("status", invoice.status.as_str())?;
        map.serialize_entry("created_at", &invoice.created_at)?;
        map.serialize_entry("created_at_t", &invoice.created_at.as_millis())?;
        map.serialize_entry("expired_at", &invoice.expired_at)?;
        map.serialize_entry("expired_at_t", &invoice.expired_at.as_millis())?;
        map.serialize_entry("merchant_order_id", &invoice.merchant_order_id)?;
        map.serialize_entry("receive_amount", &to_json_number(invoice.receive_amount))?;
        map.serialize_entry("receive_currency", &invoice.receive_currency)?;
        if self.deposit {
            map.serialize_entry("rate", &to_json_number(invoice.rate))?;
            // `null` rather than "" when there is no address: nothing to pay to yet.
            let present = |text: &'a str| (!text.is_empty()).then_some(text);
            map.serialize_entry("address", &present(&invoice.address))?;
            map.serialize_entry("payment_uri", &present(&invoice.payment_uri))?;
        }
        map.end()
    }
}

/// The Get Order body, in place.
#[derive(Serialize)]
struct GetBody<'a> {
    status: u16,
    order: OrderMembers<'a>,
    invoice: InvoiceMembers<'a>,
}

/// The Get Orders body, in place.
struct ListBody<'a>(&'a OrderPage);

impl Serialize for ListBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let page = self.0;
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("status", &200)?;
        map.serialize_entry("orders", &ListItems(&page.orders))?;
        map.serialize_entry("limit", &page.limit)?;
        map.serialize_entry("offset", &page.offset)?;
        map.serialize_entry("has_more", &page.has_more)?;
        map.end()
    }
}

/// The `orders` array of Get Orders, in place.
struct ListItems<'a>(&'a [Order]);

impl Serialize for ListItems<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(list_item_members))
    }
}

/// A view as a `Value`, for the callers that combine or inspect it. These views only
/// write strings, numbers and maps with string keys, which `to_value` cannot refuse.
fn value_of(view: impl Serialize) -> Value {
    serde_json::to_value(view).unwrap_or(Value::Null)
}

/// A view as JSON text, written in one pass into one buffer (the API's hot path) sized
/// for the body up front (`capacity`: about what it will hold), so it is not regrown and
/// copied several times while it fills.
fn text_of(view: impl Serialize, capacity: usize) -> String {
    let mut buffer = Vec::with_capacity(capacity);
    match serde_json::to_writer(&mut buffer, &view) {
        // serde_json writes only UTF-8.
        Ok(()) => String::from_utf8(buffer).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Room for one order of Get Orders (about 400 bytes with short texts) or one Create
/// Order body; Get Order's, with its invoice, takes about 1,050.
const ORDER_JSON_BYTES: usize = 512;

/// The `order` object of Get Order (spec §2.3).
pub fn order_detail(order: &Order) -> Value {
    value_of(detail_members(order))
}

/// The `invoice` object of a webhook event: spec §2.4 exactly.
pub fn invoice(invoice: &Invoice) -> Value {
    value_of(InvoiceMembers { invoice, deposit: false })
}

/// The Get Order body (spec §4.2): `{"status":200,"order":{..},"invoice":{..}}`.
pub fn get_response(order: &OrderWithInvoice) -> Value {
    value_of(get_body(order))
}

/// [`get_response`] as JSON text, without building the `Value`.
pub fn get_response_json(order: &OrderWithInvoice) -> String {
    text_of(get_body(order), 3 * ORDER_JSON_BYTES)
}

fn get_body(order: &OrderWithInvoice) -> GetBody<'_> {
    GetBody {
        status: 200,
        order: detail_members(&order.order),
        invoice: InvoiceMembers { invoice: &order.invoice, deposit: true },
    }
}

/// The Get Orders body (spec §4.3, DESIGN §5): the page of orders with `limit`, `offset`
/// and `has_more` beside them.
pub fn list_response(page: &OrderPage) -> Value {
    value_of(ListBody(page))
}

/// [`list_response`] as JSON text, without building the `Value`.
pub fn list_response_json(page: &OrderPage) -> String {
    text_of(ListBody(page), 128 + page.orders.len() * ORDER_JSON_BYTES)
}

/// One item of Get Orders (spec §2.5). No `apiKey`: keys never leave the service.
pub fn order_list_item(order: &Order) -> Value {
    value_of(list_item_members(order))
}

/// The webhook body of an event (DESIGN §7):
/// `{"type", "timestamp", "data": {"order", "invoice", "sequence", "previous_status"}}`.
/// An order the merchant marked paid by hand carries `"marked_paid": true` in `data`.
pub fn event_payload(
    event_type: EventType,
    at: Timestamp,
    current: &OrderWithInvoice,
    sequence: i64,
    previous: OrderStatus,
) -> Value {
    let mut data = Map::new();
    data.insert("order".into(), order_detail(&current.order));
    data.insert("invoice".into(), invoice(&current.invoice));
    data.insert("sequence".into(), json!(sequence));
    data.insert("previous_status".into(), json!(previous.as_str()));
    if current.order.marked_paid && event_type == EventType::Paid {
        data.insert("marked_paid".into(), json!(true));
    }
    json!({"type": event_type.as_str(), "timestamp": at.to_iso(), "data": Value::Object(data)})
}

// ----- What the host sees: the CLI's output and the bindings' JSON -----
//
// These shapes are not part of the spec's HTTP API; they carry what only the host (never
// an API client) may see, and every surface that shows them (CLI, C, Python) uses these.

/// The payment an `order.paid_late` event is about, in its `data.payment`: `txid`, the
/// exact `amount` and its `currency` (the invoice's coin), and its `state`.
pub fn late_payment(payment: &Payment) -> Value {
    json!({
        "txid": payment.txid,
        "amount": to_json_number(payment.amount),
        "currency": payment.currency,
        "state": payment.state.as_str(),
    })
}

/// An event with its order id and its exact webhook payload (parsed), as `coinorder
/// events tail` prints it.
pub fn event_with_payload(event: &Event) -> Value {
    let mut value = self::event(event);
    value["order_id"] = Value::from(event.order_id.as_str());
    value["payload"] = serde_json::from_str(&event.payload).unwrap_or_else(|_| Value::from(event.payload.as_str()));
    value
}

/// An order as the host lists it (`coinorder orders list`): its merchant, state, price
/// and times, without the invoice.
pub fn host_order_summary(order: &Order) -> Value {
    json!({
        "order_id": order.order_id,
        "user_id": order.user_id,
        "environment": order.environment.as_str(),
        "merchant_order_id": order.merchant_order_id,
        "title": order.title,
        "price_amount": to_json_number(order.amount),
        "price_currency": order.currency,
        "receive_currency": order.receive_currency,
        "status": order.status.as_str(),
        "created_at": order.created_at.to_iso(),
        "updated_at": order.updated_at.to_iso(),
    })
}

/// An order with its invoice as the host sees it: the members of Get Order (spec §2.3,
/// §2.4) plus the environment, `marked_paid`, the quoted rate, the deposit address and
/// the watch-only wallet index it was derived at (`null` when it came from elsewhere).
pub fn host_order(current: &OrderWithInvoice) -> Value {
    let (order, invoice) = (&current.order, &current.invoice);
    json!({
        "order": {
            "order_id": order.order_id,
            "user_id": order.user_id,
            "environment": order.environment.as_str(),
            "merchant_order_id": order.merchant_order_id,
            "title": order.title,
            "description": order.description,
            "callback_url": order.callback_url,
            "price_amount": to_json_number(order.amount),
            "price_currency": order.currency,
            "receive_currency": order.receive_currency,
            "status": order.status.as_str(),
            "marked_paid": order.marked_paid,
            "created_at": order.created_at.to_iso(),
            "updated_at": order.updated_at.to_iso(),
        },
        "invoice": {
            "invoice_id": invoice.invoice_id,
            "order_id": invoice.order_id,
            "amount": to_json_number(invoice.amount),
            "currency": invoice.currency,
            "rate": to_json_number(invoice.rate),
            "status": invoice.status.as_str(),
            "address": invoice.address,
            "payment_uri": invoice.payment_uri,
            "derivation_index": invoice.derivation_index,
            "created_at": invoice.created_at.to_iso(),
            "expired_at": invoice.expired_at.to_iso(),
            "expired_at_t": invoice.expired_at.as_millis(),
            "updated_at": invoice.updated_at.to_iso(),
            "receive_amount": to_json_number(invoice.receive_amount),
            "receive_currency": invoice.receive_currency,
        },
    })
}

/// A host-set rate, as the CLI's `rates` commands and the C ABI's rate calls show it.
pub fn rate(rate: &Rate) -> Value {
    json!({
        "environment": rate.environment.as_str(),
        "crypto": rate.crypto,
        "fiat": rate.fiat,
        "rate": to_json_number(rate.rate),
        "valid_until": rate.valid_until.map(Timestamp::to_iso),
        "updated_at": rate.updated_at.to_iso(),
    })
}

/// A watch-only wallet, as the CLI's `wallets` commands and the C ABI's wallet calls
/// show it: public keys only.
pub fn wallet(wallet: &Wallet) -> Value {
    json!({
        "environment": wallet.environment.as_str(),
        "coin": wallet.coin,
        "descriptor": wallet.descriptor,
        "next_index": wallet.next_index,
        "first_address": wallet.first_address,
        "created_at": wallet.created_at.to_iso(),
        "updated_at": wallet.updated_at.to_iso(),
    })
}

/// One payment: its `txid`, exact amount and coin, state, whether it counts toward the
/// invoice, and when it was seen and settled.
pub fn payment(payment: &Payment) -> Value {
    json!({
        "txid": payment.txid,
        "amount": to_json_number(payment.amount),
        "currency": payment.currency,
        "state": payment.state.as_str(),
        "counts": payment.counts,
        "seen_at": payment.seen_at.to_iso(),
        "settled_at": payment.settled_at.map(Timestamp::to_iso),
    })
}

/// One event of the outbox (without its webhook body).
pub fn event(event: &Event) -> Value {
    json!({
        "event_id": event.event_id,
        "type": event.event_type.as_str(),
        "sequence": event.sequence,
        "previous_status": event.previous_status.as_str(),
        "status": event.status.as_str(),
        "created_at": event.created_at.to_iso(),
    })
}

/// A payment step: the `txid` first (what confirm and reject take), whether it repeated
/// an earlier step (`duplicate`), the payment, the events it emitted, and the order and
/// invoice after it ([`host_order`]).
pub fn payment_outcome(outcome: &PaymentOutcome) -> Value {
    let mut value = json!({
        "txid": outcome.payment.txid,
        "duplicate": outcome.duplicate,
        "payment": payment(&outcome.payment),
        "events": outcome.events.iter().map(event).collect::<Vec<_>>(),
    });
    let order = host_order(&outcome.order);
    value["order"] = order["order"].clone();
    value["invoice"] = order["invoice"].clone();
    value
}

/// What a sandbox simulation step did: the order and invoice after it ([`host_order`]),
/// the events it emitted and the payments it made or settled; a step that made exactly
/// one payment also shows it as `txid`/`payment`, as [`payment_outcome`] does.
pub fn simulation(done: &Simulation) -> Value {
    let mut value = host_order(&done.order);
    value["events"] = done.events.iter().map(event).collect();
    value["payments"] = done.payments.iter().map(payment).collect();
    if let [only] = done.payments.as_slice() {
        value["txid"] = Value::from(only.txid.as_str());
        value["duplicate"] = Value::from(false);
        value["payment"] = payment(only);
    }
    value
}

/// A key just created: the key as stored (its serde form, as listed) plus, this once,
/// the plain `key` and the `webhook_secret`. The only place either is ever rendered.
pub fn created_key(created: &CreatedApiKey) -> serde_json::Result<Value> {
    let mut value = serde_json::to_value(&created.key)?;
    value["key"] = Value::from(created.plain_key.expose());
    value["webhook_secret"] = Value::from(created.webhook_secret.expose());
    Ok(value)
}

/// What one webhook delivery run did, as counts.
pub fn delivery_report(report: &DeliveryReport) -> Value {
    json!({
        "attempted": report.attempted,
        "delivered": report.delivered,
        "retrying": report.retrying,
        "failed": report.failed,
        "no_target": report.no_target,
    })
}
