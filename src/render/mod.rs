//! The JSON shapes of the spec (§2.2–§2.5, §4, DESIGN §5, §7): every API body and the
//! webhook payload are built here and nowhere else, and so are the host's views (order
//! with rate and address, payments, events, key creation, delivery reports) that the
//! CLI prints and the bindings return. (The payment page's public status,
//! which is not part of the spec, is built beside the page in `page.rs`.)

mod json_text;

use serde_json::{json, Map, Value};

use crate::delivery::{DeliveryReport, DeliveryState, EventDelivery};
use crate::keys::CreatedApiKey;
use crate::lifecycle::EventType;
use crate::mail::EmailReport;
use crate::money::to_json_number;
use crate::orders::{CreatedOrder, Invoice, Order, OrderPage, OrderStatus, OrderWithInvoice};
use crate::payments::{Event, Payment, PaymentOutcome, Rate, Simulation};
use crate::time::Timestamp;
use crate::wallets::Wallet;
use json_text::JsonObject;

// ----- The API's bodies: written once, as text (`json_text`), on every request -----
//
// Each shape below is defined once, by the function that writes it; the `Value` forms
// (for the bindings and the webhook payload, off the request path) parse that text.

/// The members of Create Order's `data` (spec §2.2): exactly these, `null` when not sent.
fn created_members(object: &mut JsonObject<'_>, order: &Order) {
    object.int("user_id", order.user_id);
    object.string("merchant_order_id", &order.merchant_order_id);
    object.opt_string("title", order.title.as_deref());
    object.opt_string("description", order.description.as_deref());
    object.opt_string("callback_url", order.callback_url.as_deref());
    object.opt_string("webhook_url", order.webhook_url.as_deref());
    object.decimal("amount", order.amount);
    object.string("currency", &order.currency);
    object.string("order_id", &order.order_id);
    object.string("status", order.status.as_str());
    object.timestamp("created_at", order.created_at);
    object.timestamp("updated_at", order.updated_at);
}

/// The whole 201 body of Create Order (spec §4.1).
fn create_body(object: &mut JsonObject<'_>, created: &CreatedOrder) {
    object.int("status", 201);
    object.string("message", "Order created successfully");
    object.object("data", |data| created_members(data, &created.order.order));
    object.string("payment_url", &created.payment_url);
}

/// The names Get Order and Get Orders give the fiat amount and currency:
/// `price_amount`/`price_currency` in Get Order (spec §2.3), `amount`/`currency` in
/// each item of Get Orders (spec §2.5).
struct PriceNames {
    amount: &'static str,
    currency: &'static str,
}

/// Get Order's names (spec §2.3).
const DETAIL_PRICE: PriceNames = PriceNames { amount: "price_amount", currency: "price_currency" };

/// Get Orders' names (spec §2.5).
const LIST_ITEM_PRICE: PriceNames = PriceNames { amount: "amount", currency: "currency" };

/// The order members Get Order and Get Orders share. No `apiKey`: keys never leave
/// the service.
fn order_members(object: &mut JsonObject<'_>, order: &Order, price: &PriceNames) {
    object.string("order_id", &order.order_id);
    object.int("user_id", order.user_id);
    object.string("merchant_order_id", &order.merchant_order_id);
    object.opt_string("title", order.title.as_deref());
    object.opt_string("description", order.description.as_deref());
    object.opt_string("callback_url", order.callback_url.as_deref());
    if let Some(url) = &order.cancel_url {
        object.string("cancel_url", url);
    }
    if let Some(url) = &order.success_url {
        object.string("success_url", url);
    }
    object.decimal(price.amount, order.amount);
    object.string(price.currency, &order.currency);
    object.string("receive_currency", &order.receive_currency);
    object.string("status", order.status.as_str());
    object.timestamp("created_at", order.created_at);
    object.timestamp("updated_at", order.updated_at);
    object.int("deleted", i64::from(order.deleted));
}

/// The invoice members of spec §2.4; with `deposit`, also the `rate`, `address` and
/// `payment_uri` Get Order adds beyond them (DESIGN §5), for merchants who build their own
/// checkout. Webhooks carry §2.4 exactly.
fn invoice_members(object: &mut JsonObject<'_>, invoice: &Invoice, deposit: bool) {
    object.string("invoice_id", &invoice.invoice_id);
    object.string("order_id", &invoice.order_id);
    object.decimal("amount", invoice.amount);
    object.string("currency", &invoice.currency);
    object.string("status", invoice.status.as_str());
    object.timestamp("created_at", invoice.created_at);
    object.int("created_at_t", invoice.created_at.as_millis());
    object.timestamp("expired_at", invoice.expired_at);
    object.int("expired_at_t", invoice.expired_at.as_millis());
    object.string("merchant_order_id", &invoice.merchant_order_id);
    object.decimal("receive_amount", invoice.receive_amount);
    object.string("receive_currency", &invoice.receive_currency);
    if deposit {
        object.decimal("rate", invoice.rate);
        // `null` rather than "" when there is no address: nothing to pay to yet.
        object.opt_string("address", present(&invoice.address));
        object.opt_string("payment_uri", present(&invoice.payment_uri));
    }
}

/// `None` for an empty text.
fn present(text: &str) -> Option<&str> {
    (!text.is_empty()).then_some(text)
}

/// The Get Order body (spec §4.2).
fn get_body(object: &mut JsonObject<'_>, order: &OrderWithInvoice) {
    object.int("status", 200);
    object.object("order", |members| order_members(members, &order.order, &DETAIL_PRICE));
    object.object("invoice", |members| invoice_members(members, &order.invoice, true));
}

/// The Get Orders body (spec §4.3, DESIGN §5).
fn list_body(object: &mut JsonObject<'_>, page: &OrderPage) {
    object.int("status", 200);
    object.objects("orders", &page.orders, |item, order| order_members(item, order, &LIST_ITEM_PRICE));
    object.uint("limit", u64::from(page.limit));
    object.uint("offset", page.offset);
    object.bool("has_more", page.has_more);
}

/// One object written as JSON text into a buffer sized for it up front (`capacity`:
/// about what it will hold), so it is not regrown and copied while it fills.
fn text_of(capacity: usize, fill: impl FnOnce(&mut JsonObject<'_>)) -> String {
    let mut out = String::with_capacity(capacity);
    JsonObject::write(&mut out, fill);
    out
}

/// Text this module wrote, as a `Value` (it is always one JSON object; numbers keep
/// their exact digits and members their order).
fn value_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// Room for one order of Get Orders (about 400 bytes with short texts) or one Create
/// Order body; Get Order's, with its invoice, takes about 1,050.
const ORDER_JSON_BYTES: usize = 512;

/// The `data` object of Create Order (spec §2.2): exactly these fields, `null` when not sent.
pub fn order_created(order: &Order) -> Value {
    value_of(&text_of(ORDER_JSON_BYTES, |object| created_members(object, order)))
}

/// The whole 201 body of Create Order (spec §4.1).
pub fn create_response(created: &CreatedOrder) -> Value {
    value_of(&create_response_json(created))
}

/// [`create_response`] as JSON text: what every create answers, and what a create that
/// carried a `merchant_order_id` stores for its replays to return byte for byte.
pub fn create_response_json(created: &CreatedOrder) -> String {
    text_of(ORDER_JSON_BYTES, |object| create_body(object, created))
}

/// The `order` object of Get Order (spec §2.3).
pub fn order_detail(order: &Order) -> Value {
    value_of(&text_of(ORDER_JSON_BYTES, |object| order_members(object, order, &DETAIL_PRICE)))
}

/// The `invoice` object of a webhook event: spec §2.4 exactly.
pub fn invoice(invoice: &Invoice) -> Value {
    value_of(&text_of(ORDER_JSON_BYTES, |object| invoice_members(object, invoice, false)))
}

/// The Get Order body (spec §4.2): `{"status":200,"order":{..},"invoice":{..}}`.
pub fn get_response(order: &OrderWithInvoice) -> Value {
    value_of(&get_response_json(order))
}

/// [`get_response`] as JSON text, as `handle` answers it.
pub fn get_response_json(order: &OrderWithInvoice) -> String {
    text_of(3 * ORDER_JSON_BYTES, |object| get_body(object, order))
}

/// The Get Orders body (spec §4.3, DESIGN §5): the page of orders with `limit`, `offset`
/// and `has_more` beside them.
pub fn list_response(page: &OrderPage) -> Value {
    value_of(&list_response_json(page))
}

/// [`list_response`] as JSON text, as `handle` answers it.
pub fn list_response_json(page: &OrderPage) -> String {
    text_of(128 + page.orders.len() * ORDER_JSON_BYTES, |object| list_body(object, page))
}

/// One item of Get Orders (spec §2.5).
pub fn order_list_item(order: &Order) -> Value {
    value_of(&text_of(ORDER_JSON_BYTES, |object| order_members(object, order, &LIST_ITEM_PRICE)))
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

/// An order with its invoice as the host sees it (the CLI, the C ABI's payment calls):
/// the `order` and `invoice` objects of Get Order (spec §2.3, §2.4, with the `rate`,
/// `address` and `payment_uri` of DESIGN §5), each with what only the host sees: the
/// order's environment and `marked_paid`, the invoice's watch-only wallet index
/// (`derivation_index`, `null` when the address came from elsewhere) and `updated_at`.
pub fn host_order(current: &OrderWithInvoice) -> Value {
    let (order, invoice) = (&current.order, &current.invoice);
    value_of(&text_of(3 * ORDER_JSON_BYTES, |object| {
        object.object("order", |members| {
            order_members(members, order, &DETAIL_PRICE);
            members.string("environment", order.environment.as_str());
            members.bool("marked_paid", order.marked_paid);
        });
        object.object("invoice", |members| {
            invoice_members(members, invoice, true);
            match invoice.derivation_index {
                Some(index) => members.uint("derivation_index", u64::from(index)),
                None => members.opt_string("derivation_index", None),
            }
            members.timestamp("updated_at", invoice.updated_at);
        });
    }))
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

/// An event with its delivery state and attempt log. The payload is the exact body
/// sent; nothing here is secret (signatures and keys are never stored in the log, nor
/// the credentials a target URL may carry).
pub fn event_delivery(delivery: &EventDelivery) -> Value {
    let mut value = event(&delivery.event);
    value["order_id"] = Value::from(delivery.event.order_id.as_str());
    let log: Vec<Value> = delivery
        .log
        .iter()
        .map(|attempt| {
            json!({
                "attempt": attempt.attempt,
                "url": attempt.url,
                "started_at": attempt.started_at.to_iso(),
                "status": attempt.status,
                "latency_ms": attempt.latency_ms,
                "response_excerpt": attempt.response_excerpt,
                "error": attempt.error,
            })
        })
        .collect();
    value["delivery"] = json!({
        "state": delivery.state.as_str(),
        "attempts": delivery.attempts,
        "next_attempt_at": (delivery.state == DeliveryState::Pending).then(|| delivery.next_attempt_at.to_iso()),
        "delivered_at": delivery.delivered_at.map(Timestamp::to_iso),
        "last_error": delivery.last_error,
        "log": log,
    });
    value["payload"] =
        serde_json::from_str(&delivery.event.payload).unwrap_or_else(|_| Value::from(delivery.event.payload.as_str()));
    value
}

/// What one expiry run did, as counts: `{"expired","failed"}`.
pub fn expiry_report(report: &crate::ExpiryReport) -> Value {
    json!({ "expired": report.expired, "failed": report.failed })
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

/// What [`Service::send_due_emails`](crate::Service::send_due_emails) did, for the C
/// binding: `{"attempted","sent","retrying","failed"}`.
pub fn email_report(report: &EmailReport) -> Value {
    json!({
        "attempted": report.attempted,
        "sent": report.sent,
        "retrying": report.retrying,
        "failed": report.failed,
    })
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use rust_decimal::Decimal;
    use serde_json::json;

    use super::*;
    use crate::Environment;

    fn sample() -> OrderWithInvoice {
        let order = Order {
            order_id: "0193a0b2-0000-7000-8000-000000000001".into(),
            user_id: 42,
            environment: Environment::Sandbox,
            key_id: "key-1".into(),
            merchant_order_id: "shop \"A\"\\1".into(),
            title: Some("Tée ✓\n\u{1}".into()),
            description: None,
            callback_url: Some("https://shop.example/back?a=1&b=2".into()),
            webhook_url: None,
            success_url: Some("https://shop.example/ok".into()),
            cancel_url: None,
            customer_email: None,
            amount: Decimal::from_str("19.990").expect("decimal"),
            currency: "USD".into(),
            receive_currency: String::new(),
            status: OrderStatus::New,
            created_at: Timestamp(1_795_326_682_123),
            updated_at: Timestamp(1_795_326_682_124),
            deleted: false,
            marked_paid: false,
        };
        let invoice = Invoice {
            invoice_id: "0193a0b2-0000-7000-8000-000000000002".into(),
            order_id: order.order_id.clone(),
            merchant_order_id: order.merchant_order_id.clone(),
            amount: Decimal::from_str("0.00020000").expect("decimal"),
            currency: "BTC".into(),
            rate: Decimal::from_str("99950.00").expect("decimal"),
            status: OrderStatus::New,
            receive_amount: Decimal::ZERO,
            receive_currency: "BTC".into(),
            created_at: Timestamp(1_795_326_682_123),
            expired_at: Timestamp(1_795_327_582_123),
            updated_at: Timestamp(1_795_326_682_123),
            address: "tb1qexample".into(),
            payment_uri: String::new(),
            derivation_index: None,
        };
        OrderWithInvoice { order, invoice }
    }

    /// What the host sees of an order (CLI, C payment calls) holds every member of Get
    /// Order's `order` and `invoice` with the same value (DESIGN §9.1: domain objects in
    /// the shapes of §5), plus the host's own.
    #[test]
    fn the_host_order_is_get_orders_objects_and_more() {
        let mut sample = sample();
        sample.invoice.derivation_index = Some(7);
        let get = get_response(&sample);
        let host = host_order(&sample);
        for part in ["order", "invoice"] {
            let (Some(spec), Some(shown)) = (get[part].as_object(), host[part].as_object()) else {
                panic!("no {part} object: {get} / {host}");
            };
            for (name, value) in spec {
                assert_eq!(shown.get(name), Some(value), "{part}.{name}: {host}");
            }
        }
        assert_eq!(host["order"]["environment"], "sandbox");
        assert_eq!(host["order"]["marked_paid"], false);
        assert_eq!(host["invoice"]["derivation_index"], 7);
        assert_eq!(host["invoice"]["updated_at"], "2026-11-22T05:51:22.123Z");
        sample.invoice.derivation_index = None;
        assert_eq!(host_order(&sample)["invoice"]["derivation_index"], Value::Null);
    }

    /// Get Order's body, written member by member, is exactly serde_json's text of the
    /// document the spec shows (written out here independently): member order, escapes,
    /// exact amounts, ISO times, `null`s and the members left out when absent.
    #[test]
    fn get_order_body_is_the_documented_json_text() {
        let expected = json!({
            "status": 200,
            "order": {
                "order_id": "0193a0b2-0000-7000-8000-000000000001",
                "user_id": 42,
                "merchant_order_id": "shop \"A\"\\1",
                "title": "Tée ✓\n\u{1}",
                "description": null,
                "callback_url": "https://shop.example/back?a=1&b=2",
                "success_url": "https://shop.example/ok",
                "price_amount": serde_json::Number::from_str("19.99").expect("number"),
                "price_currency": "USD",
                "receive_currency": "",
                "status": "NEW",
                "created_at": "2026-11-22T05:51:22.123Z",
                "updated_at": "2026-11-22T05:51:22.124Z",
                "deleted": 0,
            },
            "invoice": {
                "invoice_id": "0193a0b2-0000-7000-8000-000000000002",
                "order_id": "0193a0b2-0000-7000-8000-000000000001",
                "amount": serde_json::Number::from_str("0.0002").expect("number"),
                "currency": "BTC",
                "status": "NEW",
                "created_at": "2026-11-22T05:51:22.123Z",
                "created_at_t": 1_795_326_682_123_i64,
                "expired_at": "2026-11-22T06:06:22.123Z",
                "expired_at_t": 1_795_327_582_123_i64,
                "merchant_order_id": "shop \"A\"\\1",
                "receive_amount": 0,
                "receive_currency": "BTC",
                "rate": serde_json::Number::from_str("99950").expect("number"),
                "address": "tb1qexample",
                "payment_uri": null,
            },
        });
        let order = sample();
        assert_eq!(get_response_json(&order), expected.to_string());
        assert_eq!(get_response(&order), expected);
    }

    #[test]
    fn list_and_create_bodies_are_the_documented_json_text() {
        let current = sample();
        let page = OrderPage { orders: vec![current.order.clone()], limit: 50, offset: 7, has_more: true };
        let text = list_response_json(&page);
        let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed.to_string(), text, "one canonical text");
        let item = &parsed["orders"][0];
        assert_eq!(item["amount"].to_string(), "19.99");
        assert_eq!(item["currency"], "USD");
        assert!(item.get("price_amount").is_none());
        assert_eq!((&parsed["limit"], &parsed["offset"], &parsed["has_more"]), (&json!(50), &json!(7), &json!(true)));

        let created = CreatedOrder {
            order: current,
            payment_url: "http://127.0.0.1:8080/pay?id=x".into(),
            replayed: false,
            response_body: String::new(),
        };
        let expected = json!({
            "status": 201,
            "message": "Order created successfully",
            "data": {
                "user_id": 42,
                "merchant_order_id": "shop \"A\"\\1",
                "title": "Tée ✓\n\u{1}",
                "description": null,
                "callback_url": "https://shop.example/back?a=1&b=2",
                "webhook_url": null,
                "amount": serde_json::Number::from_str("19.99").expect("number"),
                "currency": "USD",
                "order_id": "0193a0b2-0000-7000-8000-000000000001",
                "status": "NEW",
                "created_at": "2026-11-22T05:51:22.123Z",
                "updated_at": "2026-11-22T05:51:22.124Z",
            },
            "payment_url": "http://127.0.0.1:8080/pay?id=x",
        });
        assert_eq!(create_response_json(&created), expected.to_string());
    }
}
