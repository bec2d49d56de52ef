//! Helpers for the payment-lifecycle acceptance tests (issue 3): drive an order through
//! the public API step by step and, after every step, check Get Order (through
//! `Service::handle`) against the events the step wrote (DESIGN §6, §7).
//!
//! Test files include it together with the shared wire helpers:
//! `mod common; mod lifecycle_common;`.

#![allow(dead_code)]

use std::str::FromStr;

use coinorder::money::Decimal;
use coinorder::{
    Environment, ErrorKind, Event, EventType, Merchant, OrderStatus, Payment, PaymentOutcome, Service, WireRequest,
    WireResponse, TRANSITIONS,
};
use serde_json::{json, Value};

use crate::common::*;

/// The members of Get Order's `order` object (spec §2.3) when no cancel/success URL is set.
pub const ORDER_FIELDS: &[&str] = &[
    "order_id",
    "user_id",
    "merchant_order_id",
    "title",
    "description",
    "callback_url",
    "price_amount",
    "price_currency",
    "receive_currency",
    "status",
    "created_at",
    "updated_at",
    "deleted",
];

/// The members of Get Order's `invoice` object (spec §2.4).
pub const INVOICE_FIELDS: &[&str] = &[
    "invoice_id",
    "order_id",
    "amount",
    "currency",
    "status",
    "created_at",
    "created_at_t",
    "expired_at",
    "expired_at_t",
    "merchant_order_id",
    "receive_amount",
    "receive_currency",
];

/// The members Get Order's invoice carries beyond spec §2.4 (DESIGN §5); webhooks don't.
pub const INVOICE_DEPOSIT_FIELDS: &[&str] = &["rate", "address", "payment_uri"];

/// Get Order's invoice members: spec §2.4 and [`INVOICE_DEPOSIT_FIELDS`].
pub fn get_invoice_fields() -> Vec<&'static str> {
    INVOICE_FIELDS.iter().chain(INVOICE_DEPOSIT_FIELDS).copied().collect()
}

/// An exact decimal from its text.
pub fn dec(text: &str) -> Decimal {
    Decimal::from_str(text).unwrap_or_else(|e| panic!("bad decimal {text:?}: {e}"))
}

/// The exact text of a JSON number (arbitrary precision keeps the digits).
pub fn num_text(v: &Value) -> String {
    assert!(v.is_number(), "not a JSON number: {v}");
    v.to_string()
}

/// The merchant behind the harness key.
pub fn merchant(h: &Harness) -> Merchant {
    h.svc.authenticate(Some(&h.key)).expect("authenticate harness key")
}

/// The current time of the harness clock, in ms.
pub fn now_ms(h: &Harness) -> i64 {
    use coinorder::Clock;
    h.clock.now_ms()
}

/// Moves the clock on by one second, so that a step's `updated_at` is visibly new.
pub fn tick(h: &Harness) {
    h.clock.advance_ms(1_000);
}

/// Get Order through the wire layer with the harness key; asserts 200 and the exact
/// spec §2.3/§2.4 shape. Returns the whole body.
pub fn get_order(h: &Harness, order_id: &str) -> Value {
    let resp = h.get(&format!("/v1/orders/{order_id}"));
    assert_eq!(resp.status, 200, "get {order_id}: {}", text(&resp));
    let body = resp.json();
    assert_eq!(keys_of(&body), sorted(&["status", "order", "invoice"]), "Get Order members: {body}");
    assert_eq!(body["status"], json!(200));
    check_order_shape(&body["order"]);
    assert_eq!(keys_of(&body["invoice"]), sorted(&get_invoice_fields()), "invoice members: {body}");
    body
}

/// The `order` object has the spec §2.3 members (plus cancel/success URLs when set).
pub fn check_order_shape(order: &Value) {
    let mut expected: Vec<&str> = ORDER_FIELDS.to_vec();
    for optional in ["cancel_url", "success_url"] {
        if order.get(optional).is_some() {
            expected.push(optional);
        }
    }
    assert_eq!(keys_of(order), sorted(&expected), "order members: {order}");
}

/// An order tracked through a scenario: what Get Order must keep showing.
#[derive(Debug, Clone)]
pub struct Tracked {
    /// The order id.
    pub id: String,
    /// When it was created (ms).
    pub created_ms: i64,
    /// When its quote expires (ms).
    pub expired_ms: i64,
    /// Events seen so far.
    pub events: usize,
    /// Get Order's body after the last step.
    pub last: Value,
}

/// Creates an order through the wire layer with `body`; returns it tracked, after
/// checking its initial Get Order (NEW, nothing received, no events).
pub fn create_tracked(h: &Harness, body: &Value) -> Tracked {
    let created = h.create(body);
    let id = string(&created["data"], "order_id").to_string();
    let created_ms = now_ms(h);
    let ttl = i64::try_from(h.svc.config().invoice_ttl.as_millis()).expect("ttl");
    let mut tracked = Tracked { id, created_ms, expired_ms: created_ms + ttl, events: 0, last: Value::Null };
    step(h, &mut tracked, Expect::status("NEW"), &[]);
    tracked
}

/// A USD 10 order paid in USDT (sandbox rate 1: the invoice is exactly 10 USDT).
pub fn create_usd10(h: &Harness) -> Tracked {
    create_tracked(h, &json!({"currency": "USD", "amount": 10, "pay_currency": "USDT"}))
}

/// What Get Order must show after a step.
#[derive(Debug, Clone, Copy)]
pub struct Expect<'a> {
    /// Order and invoice status.
    pub status: &'a str,
    /// `receive_amount`, exact JSON number text.
    pub receive_amount: &'a str,
    /// `receive_currency` (order and invoice).
    pub receive_currency: &'a str,
}

impl<'a> Expect<'a> {
    /// `status` with nothing received.
    pub fn status(status: &'a str) -> Self {
        Expect { status, receive_amount: "0", receive_currency: "" }
    }

    /// `status` with `amount` of `currency` received.
    pub fn received(status: &'a str, amount: &'a str, currency: &'a str) -> Self {
        Expect { status, receive_amount: amount, receive_currency: currency }
    }
}

/// The state an event of `event_type` leaves the order in (`None`: unchanged).
fn target_of(event_type: &str) -> Option<&'static str> {
    match event_type {
        "order.pending" => Some("PENDING"),
        "order.paid" => Some("PAID"),
        "order.failed" => Some("FAILED"),
        "order.cancelled" => Some("CANCELLED"),
        "order.expired" => Some("EXPIRED"),
        "order.paid_late" => None,
        other => panic!("unknown event type {other}"),
    }
}

/// Checks one event: its columns and its JSON payload
/// `{"type","timestamp","data":{"order","invoice","sequence","previous_status"}}`.
pub fn check_event(event: &Event) -> Value {
    let payload: Value = serde_json::from_str(&event.payload)
        .unwrap_or_else(|e| panic!("event payload is not JSON ({e}): {}", event.payload));
    assert_eq!(keys_of(&payload), sorted(&["type", "timestamp", "data"]), "payload members: {payload}");
    assert_eq!(payload["type"], json!(event.event_type.as_str()), "payload type: {payload}");
    let timestamp = string(&payload, "timestamp");
    assert!(is_iso_ms(timestamp), "timestamp {timestamp:?}");
    assert_eq!(timestamp, iso_from_ms(event.created_at.as_millis()), "payload timestamp vs event time");
    let data = &payload["data"];
    let mut data_keys = vec!["order", "invoice", "sequence", "previous_status"];
    if data.get("marked_paid").is_some() {
        assert_eq!(data["marked_paid"], json!(true), "marked_paid must be true when present: {payload}");
        assert_eq!(event.event_type, EventType::Paid, "only order.paid carries marked_paid: {payload}");
        data_keys.push("marked_paid");
    }
    if event.event_type == EventType::PaidLate {
        // The late money itself: which transaction, how much, in which coin.
        let payment = &data["payment"];
        assert_eq!(keys_of(payment), sorted(&["txid", "amount", "currency", "state"]), "{payload}");
        assert!(!string(payment, "txid").is_empty() && payment["amount"].is_number(), "{payload}");
        assert_eq!(payment["currency"], data["invoice"]["currency"], "{payload}");
        data_keys.push("payment");
    }
    assert_eq!(keys_of(data), sorted(&data_keys), "data members: {payload}");
    assert_eq!(int(data, "sequence"), event.sequence, "data.sequence: {payload}");
    assert_eq!(data["previous_status"], json!(event.previous_status.as_str()), "data.previous_status: {payload}");
    check_order_shape(&data["order"]);
    assert_eq!(keys_of(&data["invoice"]), sorted(INVOICE_FIELDS), "data.invoice members: {payload}");
    assert_eq!(data["order"]["status"], json!(event.status.as_str()), "data.order.status: {payload}");
    assert_eq!(data["invoice"]["status"], json!(event.status.as_str()), "data.invoice.status: {payload}");
    assert_eq!(data["order"]["order_id"], json!(event.order_id), "data.order.order_id");
    assert_eq!(data["invoice"]["order_id"], json!(event.order_id), "data.invoice.order_id");
    match target_of(event.event_type.as_str()) {
        Some(to) => {
            assert_eq!(event.status.as_str(), to, "{} must leave the order {to}", event.event_type);
            assert_ne!(event.previous_status, event.status, "a transition changes the state");
            assert!(
                TRANSITIONS.iter().any(|(from, _, to, ty)| *from == event.previous_status
                    && *to == event.status
                    && *ty == event.event_type),
                "event {} {} -> {} is not a row of TRANSITIONS",
                event.event_type,
                event.previous_status,
                event.status
            );
        }
        None => assert_eq!(event.previous_status, event.status, "order.paid_late changes nothing"),
    }
    payload
}

/// Asserts Get Order and the order's events after one step:
/// - Get Order: order status == invoice status == `expect.status`, received amounts,
///   created_at/expired_at (ISO and `_t`) consistent, `updated_at` now when the step
///   emitted events and unchanged when it did not change anything; a step that emitted
///   only `order.paid_late` leaves Get Order exactly as it was;
/// - events: exactly `new_events` (type, previous status) were added, sequences 1..n,
///   every payload well formed, and the last new event's `data.order`/`data.invoice`
///   equal what Get Order returns now.
///
/// Returns Get Order's body.
pub fn step(h: &Harness, tracked: &mut Tracked, expect: Expect<'_>, new_events: &[(&str, &str)]) -> Value {
    let body = get_order(h, &tracked.id);
    let (order, invoice) = (&body["order"], &body["invoice"]);
    let ctx = format!("order {} after step {:?} / {new_events:?}: {body}", tracked.id, expect.status);

    assert_eq!(order["status"], json!(expect.status), "order status; {ctx}");
    assert_eq!(invoice["status"], json!(expect.status), "invoice status == order status; {ctx}");
    assert_eq!(num_text(&invoice["receive_amount"]), expect.receive_amount, "receive_amount; {ctx}");
    assert_eq!(invoice["receive_currency"], json!(expect.receive_currency), "invoice receive_currency; {ctx}");
    assert_eq!(order["receive_currency"], json!(expect.receive_currency), "order receive_currency; {ctx}");
    assert_eq!(order["order_id"], json!(tracked.id));
    assert_eq!(invoice["order_id"], json!(tracked.id));
    assert_eq!(order["merchant_order_id"], invoice["merchant_order_id"], "merchant_order_id; {ctx}");

    // Timestamps: creation never moves; the quote's expiry is what was quoted.
    assert_eq!(int(invoice, "created_at_t"), tracked.created_ms, "created_at_t; {ctx}");
    assert_eq!(string(invoice, "created_at"), iso_from_ms(tracked.created_ms), "invoice created_at; {ctx}");
    assert_eq!(string(order, "created_at"), iso_from_ms(tracked.created_ms), "order created_at; {ctx}");
    assert_eq!(int(invoice, "expired_at_t"), tracked.expired_ms, "expired_at_t; {ctx}");
    assert_eq!(string(invoice, "expired_at"), iso_from_ms(tracked.expired_ms), "expired_at; {ctx}");
    let updated = string(order, "updated_at").to_string();
    assert!(is_iso_ms(&updated), "updated_at {updated:?}");
    assert!(updated.as_str() >= string(order, "created_at"), "updated_at before created_at; {ctx}");

    // Events.
    let events = h.svc.order_events(&tracked.id).expect("order events");
    assert_eq!(
        events.len(),
        tracked.events + new_events.len(),
        "events after the step; expected new {new_events:?}, have {:?}; {ctx}",
        events.iter().map(|e| (e.sequence, e.event_type.as_str())).collect::<Vec<_>>()
    );
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.sequence, i as i64 + 1, "sequence must be 1, 2, 3...; {ctx}");
        assert_eq!(event.order_id, tracked.id);
    }
    let mut last_payload = None;
    for (event, (ty, prev)) in events[tracked.events..].iter().zip(new_events) {
        assert_eq!(event.event_type.as_str(), *ty, "event type; {ctx}");
        assert_eq!(event.previous_status.as_str(), *prev, "previous_status of {ty}; {ctx}");
        last_payload = Some(check_event(event));
    }
    match last_payload {
        Some(payload) => {
            let data = &payload["data"];
            assert_eq!(data["order"], body["order"], "event data.order == Get Order's order; {ctx}");
            // The webhook's invoice is spec §2.4 exactly: Get Order's less its deposit members.
            let mut spec_invoice = body["invoice"].clone();
            if let Some(members) = spec_invoice.as_object_mut() {
                for extra in INVOICE_DEPOSIT_FIELDS {
                    members.remove(*extra);
                }
            }
            assert_eq!(data["invoice"], spec_invoice, "event data.invoice == Get Order's §2.4 invoice; {ctx}");
            if new_events.iter().all(|(ty, _)| *ty == "order.paid_late") && tracked.last.is_object() {
                // DESIGN §6: a late payment "changes nothing until the merchant calls
                // `mark_paid`": not the amounts, not updated_at.
                assert_eq!(body, tracked.last, "order.paid_late must leave Get Order as it was; {ctx}");
            } else {
                assert_eq!(updated, iso_from_ms(now_ms(h)), "updated_at must move to the step's time; {ctx}");
            }
            assert_eq!(events.last().map(|e| e.status.as_str()), Some(expect.status), "last event status; {ctx}");
        }
        None if tracked.last.is_object() && tracked.last["invoice"]["receive_amount"] == invoice["receive_amount"] => {
            assert_eq!(body, tracked.last, "a step that changed nothing must leave Get Order as it was; {ctx}");
        }
        None => {}
    }
    tracked.events = events.len();
    tracked.last = body.clone();
    body
}

/// Everything observable about an order: Get Order's body, its events and payments.
pub fn snapshot(h: &Harness, order_id: &str) -> (Value, Vec<Event>, Vec<Payment>) {
    (
        get_order(h, order_id),
        h.svc.order_events(order_id).expect("events"),
        h.svc.order_payments(order_id).expect("payments"),
    )
}

/// Asserts `result` is the refusal of a state change: ORDER_STATE_INVALID, HTTP 400.
pub fn assert_state_invalid<T: std::fmt::Debug>(result: coinorder::Result<T>, what: &str) {
    let err = result.expect_err(&format!("{what} must be refused"));
    assert_eq!(err.error_code(), "ORDER_STATE_INVALID", "{what}: {err}");
    assert_eq!(err.http_status(), 400, "{what}: {err}");
    assert!(!err.to_string().is_empty());
}

/// Runs `call`, which must be refused with ORDER_STATE_INVALID, and checks that the
/// order, its events and its payments did not change at all.
pub fn assert_refused<T: std::fmt::Debug>(
    h: &Harness,
    order_id: &str,
    what: &str,
    call: impl FnOnce() -> coinorder::Result<T>,
) {
    tick(h);
    let before = snapshot(h, order_id);
    assert_state_invalid(call(), what);
    let after = snapshot(h, order_id);
    assert_eq!(after.0, before.0, "{what}: Get Order changed after a refused call");
    assert_eq!(after.1, before.1, "{what}: events written by a refused call");
    assert_eq!(after.2, before.2, "{what}: payments changed by a refused call");
}

/// Asserts `result` failed with `code` (and returns the error).
pub fn assert_code<T: std::fmt::Debug>(result: coinorder::Result<T>, code: &str, what: &str) -> coinorder::Error {
    let err = result.expect_err(&format!("{what} must fail with {code}"));
    assert_eq!(err.error_code(), code, "{what}: {err}");
    err
}

/// Records a payment and checks the outcome's own view against Get Order.
pub fn pay(h: &Harness, order_id: &str, txid: &str, amount: &str, confirmed: bool) -> PaymentOutcome {
    let outcome = h
        .svc
        .record_payment(order_id, txid, dec(amount), confirmed)
        .unwrap_or_else(|e| panic!("record_payment({order_id}, {txid}, {amount}, {confirmed}): {e}"));
    assert_eq!(outcome.payment.txid, txid);
    assert_eq!(outcome.payment.amount, dec(amount));
    assert_eq!(outcome.order.order.status, outcome.order.invoice.status);
    assert_eq!(outcome.order, h.svc.order(order_id).expect("order"), "outcome.order is the stored order");
    outcome
}

/// The invoice amount of an order, exact.
pub fn invoice_amount(h: &Harness, order_id: &str) -> Decimal {
    h.svc.order(order_id).expect("order").invoice.amount
}

/// The status of an order as the typed API sees it.
pub fn status_of(h: &Harness, order_id: &str) -> OrderStatus {
    let order = h.svc.order(order_id).expect("order");
    assert_eq!(order.order.status, order.invoice.status);
    order.order.status
}

/// Moves the clock past the order's quote.
pub fn past_expiry(h: &Harness, tracked: &Tracked) {
    let now = now_ms(h);
    if now <= tracked.expired_ms {
        h.clock.advance_ms(tracked.expired_ms - now + 1);
    }
}

/// `POST /v1/orders/<id>/simulate` with `key` (None: no key header) and a JSON body.
pub fn simulate(svc: &Service, key: Option<&str>, order_id: &str, body: &Value) -> WireResponse {
    let mut request = WireRequest::new("POST", &format!("/v1/orders/{order_id}/simulate"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).expect("serialize"));
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    svc.handle(&request)
}

/// A key-less request to the payment page's routes (`/pay/...`).
pub fn page(svc: &Service, method: &str, path: &str) -> WireResponse {
    svc.handle(&WireRequest::new(method, path))
}

/// True when `err` is the state machine's refusal.
pub fn is_invalid_transition(err: &coinorder::Error) -> bool {
    matches!(err.kind(), ErrorKind::InvalidTransition { .. } | ErrorKind::PaymentSettled { .. })
}

/// A live harness with `rate` USD per USDT set, so orders can be created.
pub fn live_harness_with_rate(rate: &str) -> Harness {
    let h = harness_with(Environment::Live, |_| {});
    h.svc.set_rate("USDT", "USD", dec(rate), None).expect("set live rate");
    h
}
