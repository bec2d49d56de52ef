//! Acceptance tests of the order state machine (DESIGN §6, issue 3): every row of the
//! transition table reached through the public API, with the right event, per-order
//! sequence and previous status; every other transition refused with
//! ORDER_STATE_INVALID, changing nothing and writing no event. After every step Get Order
//! (through `Service::handle`) is checked against the events (see `lifecycle_common::step`).

mod common;
mod lifecycle_common;

use coinorder::{next_state, OrderStatus, Trigger, TRANSITIONS};
use common::*;
use lifecycle_common::*;
use serde_json::{json, Value};

/// The rows of DESIGN §6 as this file drives them: (from, trigger, to, event type).
const DRIVEN_ROWS: &[(OrderStatus, Trigger, OrderStatus, &str)] = &[
    (OrderStatus::New, Trigger::PaymentSeen, OrderStatus::Pending, "order.pending"),
    (OrderStatus::New, Trigger::PaymentsCover, OrderStatus::Paid, "order.paid"),
    (OrderStatus::Pending, Trigger::PaymentsCover, OrderStatus::Paid, "order.paid"),
    (OrderStatus::New, Trigger::ExpiredUnpaid, OrderStatus::Expired, "order.expired"),
    (OrderStatus::Pending, Trigger::ExpiredShort, OrderStatus::Failed, "order.failed"),
    (OrderStatus::Pending, Trigger::PaymentRejected, OrderStatus::Failed, "order.failed"),
    (OrderStatus::New, Trigger::Cancelled, OrderStatus::Cancelled, "order.cancelled"),
    (OrderStatus::Expired, Trigger::MarkedPaid, OrderStatus::Paid, "order.paid"),
    (OrderStatus::Failed, Trigger::MarkedPaid, OrderStatus::Paid, "order.paid"),
];

#[test]
fn the_table_is_exactly_design_section_6() {
    assert_eq!(TRANSITIONS.len(), DRIVEN_ROWS.len(), "every row of TRANSITIONS needs a driven test here");
    for (from, trigger, to, event) in TRANSITIONS {
        assert!(
            DRIVEN_ROWS.iter().any(|(f, t, o, e)| f == from && t == trigger && o == to && *e == event.as_str()),
            "row {from} --{trigger:?}--> {to} ({event}) is not in DESIGN §6 as driven here"
        );
    }
    // Everything else is refused.
    for from in OrderStatus::ALL {
        for trigger in [
            Trigger::PaymentSeen,
            Trigger::PaymentsCover,
            Trigger::ExpiredUnpaid,
            Trigger::ExpiredShort,
            Trigger::PaymentRejected,
            Trigger::Cancelled,
            Trigger::MarkedPaid,
        ] {
            let row = DRIVEN_ROWS.iter().find(|(f, t, _, _)| *f == from && *t == trigger);
            assert_eq!(
                next_state(from, trigger).map(|(to, event)| (to, event.as_str())),
                row.map(|(_, _, to, event)| (*to, *event)),
                "next_state({from}, {trigger:?})"
            );
        }
    }
}

/// Looks the row up in the library's table and checks it is the one DESIGN §6 has.
fn row(from: OrderStatus, trigger: Trigger) -> (OrderStatus, &'static str) {
    let (_, _, to, event) = TRANSITIONS
        .iter()
        .find(|(f, t, _, _)| *f == from && *t == trigger)
        .unwrap_or_else(|| panic!("no row {from} --{trigger:?}--> in TRANSITIONS"));
    let expected = DRIVEN_ROWS.iter().find(|(f, t, _, _)| *f == from && *t == trigger).expect("driven row");
    assert_eq!((*to, event.as_str()), (expected.2, expected.3));
    (*to, event.as_str())
}

/// Asserts that the order's last event is the row's transition.
fn assert_last_event_is_row(h: &Harness, order_id: &str, from: OrderStatus, trigger: Trigger) {
    let (to, event_type) = row(from, trigger);
    let events = h.svc.order_events(order_id).expect("events");
    let last = events.last().expect("an event");
    assert_eq!(
        (last.previous_status, last.status, last.event_type.as_str()),
        (from, to, event_type),
        "row {from} --{trigger:?}--> {to}"
    );
    assert_eq!(status_of(h, order_id), to);
}

fn last_payload(h: &Harness, order_id: &str) -> Value {
    let events = h.svc.order_events(order_id).expect("events");
    serde_json::from_str(&events.last().expect("an event").payload).expect("payload JSON")
}

#[test]
fn row_new_to_pending_when_a_short_confirmed_payment_is_seen() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    let outcome = pay(&h, &o.id, "tx-short", "4", true);
    assert!(!outcome.duplicate);
    assert_eq!(outcome.events.len(), 1);
    assert_eq!(outcome.events[0].sequence, 1);
    step(&h, &mut o, Expect::received("PENDING", "4", "USD"), &[("order.pending", "NEW")]);
    assert_last_event_is_row(&h, &o.id, OrderStatus::New, Trigger::PaymentSeen);
}

#[test]
fn row_new_to_pending_when_a_covering_payment_is_seen_unconfirmed() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    let outcome = pay(&h, &o.id, "tx-full", "10", false);
    assert_eq!(outcome.events.len(), 1);
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);
    assert_last_event_is_row(&h, &o.id, OrderStatus::New, Trigger::PaymentSeen);
}

#[test]
fn row_new_to_paid_when_a_confirmed_payment_covers_the_invoice() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    let outcome = pay(&h, &o.id, "tx-full", "10", true);
    assert_eq!(outcome.events.len(), 1, "one event, straight to PAID: {:?}", outcome.events);
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "NEW")]);
    assert_last_event_is_row(&h, &o.id, OrderStatus::New, Trigger::PaymentsCover);
    assert!(last_payload(&h, &o.id)["data"].get("marked_paid").is_none(), "automatic PAID is not marked by hand");
}

#[test]
fn row_pending_to_paid_when_the_payment_confirms() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-full", "10", false);
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    let outcome = h.svc.confirm_payment("tx-full").expect("confirm");
    assert!(!outcome.duplicate);
    assert_eq!(outcome.events.len(), 1);
    assert_eq!(outcome.events[0].sequence, 2);
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "PENDING")]);
    assert_last_event_is_row(&h, &o.id, OrderStatus::Pending, Trigger::PaymentsCover);
}

#[test]
fn row_new_to_expired_when_the_quote_passes_unpaid() {
    let h = harness();
    let mut o = create_usd10(&h);
    past_expiry(&h, &o);
    let report = h.svc.expire_due(coinorder::Timestamp(now_ms(&h))).expect("expire_due");
    assert_eq!((report.expired, report.failed), (1, 0));
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.expired", "NEW")]);
    assert_last_event_is_row(&h, &o.id, OrderStatus::New, Trigger::ExpiredUnpaid);
}

#[test]
fn row_pending_to_failed_when_the_quote_passes_with_confirmed_payments_short() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-short", "4", true);
    step(&h, &mut o, Expect::received("PENDING", "4", "USD"), &[("order.pending", "NEW")]);
    past_expiry(&h, &o);
    let report = h.svc.expire_due(coinorder::Timestamp(now_ms(&h))).expect("expire_due");
    assert_eq!((report.expired, report.failed), (0, 1));
    step(&h, &mut o, Expect::received("FAILED", "4", "USD"), &[("order.failed", "PENDING")]);
    assert_last_event_is_row(&h, &o.id, OrderStatus::Pending, Trigger::ExpiredShort);
}

#[test]
fn row_pending_to_failed_when_a_payment_is_rejected() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-full", "10", false);
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    let outcome = h.svc.reject_payment("tx-full").expect("reject");
    assert_eq!(outcome.payment.state, coinorder::PaymentState::Rejected);
    // The rejected payment no longer counts as received; it was seen, so the currency stays.
    step(&h, &mut o, Expect::received("FAILED", "0", "USD"), &[("order.failed", "PENDING")]);
    assert_last_event_is_row(&h, &o.id, OrderStatus::Pending, Trigger::PaymentRejected);
}

#[test]
fn row_new_to_cancelled_by_the_merchant() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    let cancelled = h.svc.cancel_order(&merchant(&h), &o.id).expect("cancel");
    assert_eq!(cancelled.order.status, OrderStatus::Cancelled);
    assert_eq!(cancelled.invoice.status, OrderStatus::Cancelled);
    step(&h, &mut o, Expect::status("CANCELLED"), &[("order.cancelled", "NEW")]);
    assert_last_event_is_row(&h, &o.id, OrderStatus::New, Trigger::Cancelled);
}

#[test]
fn row_new_to_cancelled_by_the_customer() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    let cancelled = h.svc.customer_cancel(&o.id).expect("customer cancel");
    assert_eq!(cancelled.order.status, OrderStatus::Cancelled);
    step(&h, &mut o, Expect::status("CANCELLED"), &[("order.cancelled", "NEW")]);
    assert_last_event_is_row(&h, &o.id, OrderStatus::New, Trigger::Cancelled);
}

#[test]
fn row_expired_to_paid_by_mark_paid_after_a_late_payment() {
    let h = harness();
    let mut o = create_usd10(&h);
    past_expiry(&h, &o);
    h.svc.expire_due(coinorder::Timestamp(now_ms(&h))).expect("expire_due");
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.expired", "NEW")]);
    tick(&h);
    pay(&h, &o.id, "tx-late", "10", true);
    // The late money changes nothing until the merchant accepts it.
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.paid_late", "EXPIRED")]);
    tick(&h);
    let paid = h.svc.mark_paid(&o.id).expect("mark_paid");
    assert_eq!(paid.order.status, OrderStatus::Paid);
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "EXPIRED")]);
    assert_last_event_is_row(&h, &o.id, OrderStatus::Expired, Trigger::MarkedPaid);
    assert_eq!(last_payload(&h, &o.id)["data"]["marked_paid"], json!(true), "the event says it was marked by hand");
}

#[test]
fn row_failed_to_paid_by_mark_paid_after_a_short_payment() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-short", "9.5", true);
    step(&h, &mut o, Expect::received("PENDING", "9.5", "USD"), &[("order.pending", "NEW")]);
    past_expiry(&h, &o);
    h.svc.expire_due(coinorder::Timestamp(now_ms(&h))).expect("expire_due");
    step(&h, &mut o, Expect::received("FAILED", "9.5", "USD"), &[("order.failed", "PENDING")]);
    tick(&h);
    h.svc.mark_paid(&o.id).expect("mark_paid");
    step(&h, &mut o, Expect::received("PAID", "9.5", "USD"), &[("order.paid", "FAILED")]);
    assert_last_event_is_row(&h, &o.id, OrderStatus::Failed, Trigger::MarkedPaid);
    assert_eq!(last_payload(&h, &o.id)["data"]["marked_paid"], json!(true));
}

/// A fresh sandbox harness with one order brought into `state` through the public API.
/// Returns the harness, the tracked order and the txid of its payment (if any).
fn reach(state: OrderStatus) -> (Harness, Tracked, Option<&'static str>) {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    let txid = match state {
        OrderStatus::New => None,
        OrderStatus::Pending => {
            pay(&h, &o.id, "tx-p", "10", false);
            step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);
            Some("tx-p")
        }
        OrderStatus::Paid => {
            pay(&h, &o.id, "tx-p", "10", true);
            step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "NEW")]);
            Some("tx-p")
        }
        OrderStatus::Expired => {
            past_expiry(&h, &o);
            h.svc.expire_due(coinorder::Timestamp(now_ms(&h))).expect("expire_due");
            step(&h, &mut o, Expect::status("EXPIRED"), &[("order.expired", "NEW")]);
            None
        }
        OrderStatus::Failed => {
            pay(&h, &o.id, "tx-p", "10", false);
            h.svc.reject_payment("tx-p").expect("reject");
            step(
                &h,
                &mut o,
                Expect::received("FAILED", "0", "USD"),
                &[("order.pending", "NEW"), ("order.failed", "PENDING")],
            );
            Some("tx-p")
        }
        OrderStatus::Cancelled => {
            h.svc.cancel_order(&merchant(&h), &o.id).expect("cancel");
            step(&h, &mut o, Expect::status("CANCELLED"), &[("order.cancelled", "NEW")]);
            None
        }
    };
    assert_eq!(status_of(&h, &o.id), state);
    (h, o, txid)
}

#[derive(Debug, Clone, Copy)]
enum Attempt {
    MerchantCancel,
    CustomerCancel,
    MarkPaid,
}

#[test]
fn cancel_and_mark_paid_are_allowed_only_where_the_table_says() {
    for state in OrderStatus::ALL {
        for attempt in [Attempt::MerchantCancel, Attempt::CustomerCancel, Attempt::MarkPaid] {
            let (h, mut o, txid) = reach(state);
            let (allowed, trigger) = match attempt {
                Attempt::MerchantCancel | Attempt::CustomerCancel => (state == OrderStatus::New, Trigger::Cancelled),
                Attempt::MarkPaid => (matches!(state, OrderStatus::Expired | OrderStatus::Failed), Trigger::MarkedPaid),
            };
            assert_eq!(allowed, next_state(state, trigger).is_some(), "DESIGN §6 vs TRANSITIONS: {state} {attempt:?}");
            let call = || match attempt {
                Attempt::MerchantCancel => h.svc.cancel_order(&merchant(&h), &o.id),
                Attempt::CustomerCancel => h.svc.customer_cancel(&o.id),
                Attempt::MarkPaid => h.svc.mark_paid(&o.id),
            };
            if allowed {
                tick(&h);
                let after = call().unwrap_or_else(|e| panic!("{attempt:?} on {state}: {e}"));
                let (to, event_type) = row(state, trigger);
                assert_eq!(after.order.status, to, "{attempt:?} on {state}");
                // The orders reached here hold no payment that was not rejected: nothing
                // received, though the FAILED one saw (and rejected) a payment in USD.
                let expect = match txid {
                    Some(_) => Expect::received(to.as_str(), "0", "USD"),
                    None => Expect::status(to.as_str()),
                };
                step(&h, &mut o, expect, &[(event_type, state.as_str())]);
            } else {
                assert_refused(&h, &o.id, &format!("{attempt:?} on a {state} order"), call);
            }
        }
    }
}

#[test]
fn a_rejected_payment_cannot_be_confirmed() {
    let (h, o, txid) = reach(OrderStatus::Failed);
    let txid = txid.expect("txid");
    assert_refused(&h, &o.id, "confirm a rejected payment", || h.svc.confirm_payment(txid));
    let payments = h.svc.order_payments(&o.id).expect("payments");
    assert_eq!(payments[0].state, coinorder::PaymentState::Rejected);
}

#[test]
fn a_confirmed_payment_cannot_be_rejected() {
    // On a PENDING order (confirmed but short) and on a PAID one.
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-short", "3", true);
    step(&h, &mut o, Expect::received("PENDING", "3", "USD"), &[("order.pending", "NEW")]);
    assert_refused(&h, &o.id, "reject a confirmed payment (PENDING order)", || h.svc.reject_payment("tx-short"));

    let (h, o, txid) = reach(OrderStatus::Paid);
    let txid = txid.expect("txid");
    assert_refused(&h, &o.id, "reject a confirmed payment (PAID order)", || h.svc.reject_payment(txid));
    assert_eq!(h.svc.order_payments(&o.id).expect("payments")[0].state, coinorder::PaymentState::Confirmed);
}

#[test]
fn settling_an_unknown_txid_is_payment_not_found() {
    let h = harness();
    let o = create_usd10(&h);
    let before = snapshot(&h, &o.id);
    assert_code(h.svc.confirm_payment("no-such-tx"), "PAYMENT_NOT_FOUND", "confirm unknown txid");
    assert_code(h.svc.reject_payment("no-such-tx"), "PAYMENT_NOT_FOUND", "reject unknown txid");
    assert_eq!(snapshot(&h, &o.id), before);
}

#[test]
fn lifecycle_calls_on_unknown_or_foreign_orders_are_order_not_valid() {
    let h = harness();
    let o = create_usd10(&h);
    let unknown = "00000000-0000-4000-8000-000000000000";
    assert_code(h.svc.mark_paid(unknown), "ORDER_NOT_VALID", "mark_paid unknown");
    assert_code(h.svc.customer_cancel(unknown), "ORDER_NOT_VALID", "customer_cancel unknown");
    assert_code(h.svc.customer_cancel("not-a-uuid"), "ORDER_NOT_VALID", "customer_cancel malformed");
    assert_code(
        h.svc.record_payment(unknown, "tx", dec("1"), true),
        "ORDER_NOT_VALID",
        "record_payment on an unknown order",
    );
    // Another merchant cannot cancel this one, and the attempt changes nothing.
    let (other_key, _) = h.new_key(7, coinorder::Environment::Sandbox);
    let other = h.svc.authenticate(Some(&other_key)).expect("other merchant");
    let before = snapshot(&h, &o.id);
    assert_code(h.svc.cancel_order(&other, &o.id), "ORDER_NOT_VALID", "cancel another merchant's order");
    assert_eq!(snapshot(&h, &o.id), before);
}

#[test]
fn sequences_are_per_order() {
    let h = harness();
    let mut a = create_usd10(&h);
    let mut b = create_usd10(&h);
    tick(&h);
    pay(&h, &a.id, "tx-a1", "5", true);
    step(&h, &mut a, Expect::received("PENDING", "5", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    h.svc.customer_cancel(&b.id).expect("cancel b");
    step(&h, &mut b, Expect::status("CANCELLED"), &[("order.cancelled", "NEW")]);
    tick(&h);
    pay(&h, &a.id, "tx-a2", "5", true);
    step(&h, &mut a, Expect::received("PAID", "10", "USD"), &[("order.paid", "PENDING")]);
    let seq = |id: &str| h.svc.order_events(id).expect("events").iter().map(|e| e.sequence).collect::<Vec<_>>();
    assert_eq!(seq(&a.id), vec![1, 2]);
    assert_eq!(seq(&b.id), vec![1]);
    // Each event can be read back by id, unchanged.
    for event in h.svc.order_events(&a.id).expect("events") {
        assert_eq!(h.svc.event(&event.event_id).expect("event by id"), event);
    }
}
