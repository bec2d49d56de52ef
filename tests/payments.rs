//! Acceptance tests of payments (DESIGN §6, issue 3): partial, exact, over- and late
//! payments, confirmation after expiry, idempotency by txid, rejection, `mark_paid`, and
//! `receive_amount`/`receive_currency` as payments arrive. Get Order is checked against
//! the events after every step (`lifecycle_common::step`).

mod common;
mod lifecycle_common;

use coinorder::{OrderStatus, PaymentState, Timestamp};
use common::*;
use lifecycle_common::*;
use serde_json::json;

fn expire_now(h: &Harness) -> coinorder::ExpiryReport {
    h.svc.expire_due(Timestamp(now_ms(h))).expect("expire_due")
}

#[test]
fn partial_then_rest_goes_pending_then_paid() {
    let h = harness();
    let mut o = create_usd10(&h);
    assert_eq!(invoice_amount(&h, &o.id), dec("10"));
    tick(&h);
    let first = pay(&h, &o.id, "tx-1", "4", true);
    assert_eq!(first.payment.state, PaymentState::Confirmed);
    assert!(first.payment.counts);
    assert_eq!(first.payment.currency, "USDT", "payments are in the invoice's crypto currency");
    step(&h, &mut o, Expect::received("PENDING", "4", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    let rest = pay(&h, &o.id, "tx-2", "6", true);
    assert_eq!(rest.events.len(), 1);
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "PENDING")]);
    assert_eq!(h.svc.order_payments(&o.id).expect("payments").len(), 2);
}

#[test]
fn partial_unconfirmed_then_rest_waits_for_every_confirmation() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-1", "4", false);
    step(&h, &mut o, Expect::received("PENDING", "4", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    // The rest arrives confirmed, but the first part is not final yet: still PENDING.
    let rest = pay(&h, &o.id, "tx-2", "6", true);
    assert!(rest.events.is_empty(), "no transition yet: {:?}", rest.events);
    assert_eq!(status_of(&h, &o.id), OrderStatus::Pending);
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[]);
    tick(&h);
    h.svc.confirm_payment("tx-1").expect("confirm");
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "PENDING")]);
}

#[test]
fn overpayment_is_paid_with_the_excess_received() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-over", "12.5", true);
    let body = step(&h, &mut o, Expect::received("PAID", "12.5", "USD"), &[("order.paid", "NEW")]);
    assert_eq!(num_text(&body["order"]["price_amount"]), "10");
    assert_eq!(num_text(&body["invoice"]["amount"]), "10");

    // Over in two parts, in BTC priced in EUR (sandbox: 9000 EUR per BTC).
    let mut b = create_tracked(&h, &json!({"currency": "EUR", "amount": 100, "pay_currency": "BTC"}));
    assert_eq!(invoice_amount(&h, &b.id), dec("0.01111112"), "100 / 9000 rounded up to 8 decimals");
    tick(&h);
    pay(&h, &b.id, "tx-b1", "0.005", true);
    step(&h, &mut b, Expect::received("PENDING", "45", "EUR"), &[("order.pending", "NEW")]);
    tick(&h);
    pay(&h, &b.id, "tx-b2", "0.007", true);
    // 0.012 BTC × 9000 = 108 EUR.
    step(&h, &mut b, Expect::received("PAID", "108", "EUR"), &[("order.paid", "PENDING")]);
}

#[test]
fn receive_amount_is_the_fiat_value_rounded_down_to_the_minor_unit() {
    let h = harness();
    // 1000 JPY at 150 JPY per USDT: 6.666667 USDT (rounded up).
    let mut o = create_tracked(&h, &json!({"currency": "JPY", "amount": 1000, "pay_currency": "USDT"}));
    assert_eq!(invoice_amount(&h, &o.id), dec("6.666667"));
    tick(&h);
    pay(&h, &o.id, "tx-1", "1.000001", true);
    // 150.00015 JPY → 150 (JPY has no minor unit).
    step(&h, &mut o, Expect::received("PENDING", "150", "JPY"), &[("order.pending", "NEW")]);
    tick(&h);
    pay(&h, &o.id, "tx-2", "5.666666", true);
    // 6.666667 USDT × 150 = 1000.00005 → 1000, and exactly the invoice amount: PAID.
    step(&h, &mut o, Expect::received("PAID", "1000", "JPY"), &[("order.paid", "PENDING")]);

    // A rate with many places: 9 wei is worth 0.009999999999999999999999999999 USD,
    // more places than a Decimal product keeps; it must show 0.00, not a rounded 0.01.
    h.svc.set_rate("ETH", "USD", dec("1111111111111111.111111111111"), None).expect("rate");
    let mut fine = create_tracked(&h, &json!({"currency": "USD", "amount": "0.01", "pay_currency": "ETH"}));
    assert_eq!(invoice_amount(&h, &fine.id), dec("0.00000000000000001"), "10 wei");
    tick(&h);
    pay(&h, &fine.id, "tx-wei", "0.000000000000000009", true);
    step(&h, &mut fine, Expect::received("PENDING", "0", "USD"), &[("order.pending", "NEW")]);
}

#[test]
fn late_payment_after_expiry_is_paid_late_then_mark_paid() {
    let h = harness();
    let mut o = create_usd10(&h);
    past_expiry(&h, &o);
    assert_eq!(expire_now(&h).expired, 1);
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.expired", "NEW")]);

    tick(&h);
    let late = pay(&h, &o.id, "tx-late", "10", true);
    assert!(!late.payment.counts, "a payment first seen after expiry does not count automatically");
    assert_eq!(late.events.len(), 1);
    assert_eq!(late.events[0].event_type.as_str(), "order.paid_late");
    assert_eq!(late.events[0].previous_status, OrderStatus::Expired);
    assert_eq!(late.events[0].status, OrderStatus::Expired);
    // DESIGN §6: it changes nothing until mark_paid, the received amounts included.
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.paid_late", "EXPIRED")]);

    // Nothing else moves it: not expiry, not confirming again.
    tick(&h);
    assert_eq!(expire_now(&h), coinorder::ExpiryReport::default());
    assert!(h.svc.confirm_payment("tx-late").expect("confirm again").duplicate);
    step(&h, &mut o, Expect::status("EXPIRED"), &[]);

    tick(&h);
    let paid = h.svc.mark_paid(&o.id).expect("mark_paid");
    assert!(paid.order.marked_paid);
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "EXPIRED")]);
    let events = h.svc.order_events(&o.id).expect("events");
    let payload: serde_json::Value = serde_json::from_str(&events[2].payload).expect("payload");
    assert_eq!(payload["data"]["marked_paid"], json!(true), "{payload}");
    // Only the hand-marked event says so.
    for event in &events[..2] {
        assert!(!event.payload.contains("marked_paid"), "{}", event.payload);
    }
    // Marking twice is refused: PAID is terminal.
    assert_refused(&h, &o.id, "mark_paid twice", || h.svc.mark_paid(&o.id));
}

#[test]
fn a_late_payments_confirmation_or_rejection_is_announced_too() {
    // The merchant heard of an unconfirmed late payment (order.paid_late) and may accept
    // it with mark_paid: what becomes of that money is news of the same kind.
    let h = harness();
    let mut o = create_usd10(&h);
    past_expiry(&h, &o);
    tick(&h);
    let late = pay(&h, &o.id, "tx-late-1", "10", false);
    assert_eq!(
        late.events.iter().map(|e| e.event_type.as_str()).collect::<Vec<_>>(),
        ["order.expired", "order.paid_late"]
    );
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.expired", "NEW"), ("order.paid_late", "EXPIRED")]);
    tick(&h);
    let confirmed = h.svc.confirm_payment("tx-late-1").expect("confirm");
    assert_eq!(confirmed.events.len(), 1);
    let payload: serde_json::Value = serde_json::from_str(&confirmed.events[0].payload).expect("payload");
    assert_eq!(payload["type"], json!("order.paid_late"));
    assert_eq!(payload["data"]["payment"]["txid"], json!("tx-late-1"));
    assert_eq!(payload["data"]["payment"]["state"], json!("confirmed"));
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.paid_late", "EXPIRED")]);

    // Accepted by hand while unconfirmed, then rejected: the merchant must hear of it.
    tick(&h);
    pay(&h, &o.id, "tx-late-2", "10", false);
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.paid_late", "EXPIRED")]);
    tick(&h);
    h.svc.mark_paid(&o.id).expect("mark_paid");
    tick(&h);
    let rejected = h.svc.reject_payment("tx-late-2").expect("reject");
    assert_eq!(rejected.events.len(), 1);
    let payload: serde_json::Value = serde_json::from_str(&rejected.events[0].payload).expect("payload");
    assert_eq!(
        (payload["type"].clone(), payload["data"]["payment"]["state"].clone()),
        (json!("order.paid_late"), json!("rejected"))
    );
    assert_eq!(rejected.order.order.status, OrderStatus::Paid, "news only: nothing moves by itself");
    // A duplicate settle says nothing again.
    assert!(h.svc.reject_payment("tx-late-2").expect("again").events.is_empty());
    // A payment first seen on the order once PAID is excess, announced by nothing, and
    // so is its confirmation.
    tick(&h);
    assert!(pay(&h, &o.id, "tx-excess", "1", false).events.is_empty());
    assert!(h.svc.confirm_payment("tx-excess").expect("confirm").events.is_empty());
}

#[test]
fn late_payment_on_a_new_order_whose_quote_ran_out_expires_it_first() {
    let h = harness();
    let mut o = create_usd10(&h);
    past_expiry(&h, &o);
    // expire_due has not run yet: the payment itself finds the quote gone.
    let late = pay(&h, &o.id, "tx-late", "10", true);
    assert!(!late.payment.counts);
    let kinds: Vec<&str> = late.events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(kinds, ["order.expired", "order.paid_late"]);
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.expired", "NEW"), ("order.paid_late", "EXPIRED")]);
    tick(&h);
    h.svc.mark_paid(&o.id).expect("mark_paid");
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "EXPIRED")]);
}

#[test]
fn a_payment_at_the_exact_expiry_instant_is_late() {
    let h = harness();
    let mut o = create_usd10(&h);
    h.clock.set_ms(o.expired_ms);
    let late = pay(&h, &o.id, "tx-edge", "10", true);
    assert!(!late.payment.counts, "the quote is open while now < expired_at");
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.expired", "NEW"), ("order.paid_late", "EXPIRED")]);

    let mut p = create_usd10(&h);
    h.clock.set_ms(p.expired_ms - 1);
    let in_time = pay(&h, &p.id, "tx-edge-2", "10", true);
    assert!(in_time.payment.counts);
    step(&h, &mut p, Expect::received("PAID", "10", "USD"), &[("order.paid", "NEW")]);
}

#[test]
fn a_top_up_after_expiry_fails_the_short_order_and_is_paid_late() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-1", "4", true);
    step(&h, &mut o, Expect::received("PENDING", "4", "USD"), &[("order.pending", "NEW")]);
    past_expiry(&h, &o);
    let late = pay(&h, &o.id, "tx-2", "6", true);
    assert!(!late.payment.counts);
    step(
        &h,
        &mut o,
        Expect::received("FAILED", "4", "USD"),
        &[("order.failed", "PENDING"), ("order.paid_late", "FAILED")],
    );
    tick(&h);
    h.svc.mark_paid(&o.id).expect("mark_paid");
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "FAILED")]);
}

#[test]
fn late_payment_on_a_failed_order_then_mark_paid() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-1", "10", false);
    h.svc.reject_payment("tx-1").expect("reject");
    step(&h, &mut o, Expect::received("FAILED", "0", "USD"), &[("order.pending", "NEW"), ("order.failed", "PENDING")]);
    tick(&h);
    let late = pay(&h, &o.id, "tx-2", "10", true);
    assert!(!late.payment.counts);
    step(&h, &mut o, Expect::received("FAILED", "0", "USD"), &[("order.paid_late", "FAILED")]);
    tick(&h);
    h.svc.mark_paid(&o.id).expect("mark_paid");
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "FAILED")]);
}

#[test]
fn a_payment_on_a_cancelled_order_is_paid_late_and_cannot_be_marked_paid() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    h.svc.customer_cancel(&o.id).expect("cancel");
    step(&h, &mut o, Expect::status("CANCELLED"), &[("order.cancelled", "NEW")]);
    tick(&h);
    let late = pay(&h, &o.id, "tx-1", "10", true);
    assert!(!late.payment.counts);
    step(&h, &mut o, Expect::status("CANCELLED"), &[("order.paid_late", "CANCELLED")]);
    assert_refused(&h, &o.id, "mark_paid on a CANCELLED order", || h.svc.mark_paid(&o.id));
}

#[test]
fn payment_seen_before_expiry_and_confirmed_after_is_paid() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    let seen = pay(&h, &o.id, "tx-1", "10", false);
    assert!(seen.payment.counts);
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);

    // The quote passes while the payment awaits confirmation: expiry leaves it alone.
    past_expiry(&h, &o);
    assert_eq!(expire_now(&h), coinorder::ExpiryReport::default());
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[]);
    h.clock.advance_ms(3_600_000);
    assert_eq!(expire_now(&h), coinorder::ExpiryReport::default());
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[]);

    let confirmed = h.svc.confirm_payment("tx-1").expect("confirm");
    assert_eq!(confirmed.payment.state, PaymentState::Confirmed);
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "PENDING")]);
}

#[test]
fn payment_seen_before_expiry_confirmed_after_without_an_expiry_run() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-1", "10", false);
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);
    past_expiry(&h, &o);
    // Confirmed by recording it again with confirmed = true.
    let again = pay(&h, &o.id, "tx-1", "10", true);
    assert!(!again.duplicate, "a repeat that confirms is not a no-op");
    assert_eq!(again.payment.state, PaymentState::Confirmed);
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "PENDING")]);
}

#[test]
fn a_short_payment_confirmed_after_expiry_fails_the_order() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-1", "4", false);
    step(&h, &mut o, Expect::received("PENDING", "4", "USD"), &[("order.pending", "NEW")]);
    past_expiry(&h, &o);
    assert_eq!(expire_now(&h), coinorder::ExpiryReport::default());
    h.svc.confirm_payment("tx-1").expect("confirm");
    step(&h, &mut o, Expect::received("FAILED", "4", "USD"), &[("order.failed", "PENDING")]);
}

#[test]
fn a_payment_seen_before_expiry_and_rejected_after_fails_the_order() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-1", "10", false);
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);
    past_expiry(&h, &o);
    h.svc.reject_payment("tx-1").expect("reject");
    step(&h, &mut o, Expect::received("FAILED", "0", "USD"), &[("order.failed", "PENDING")]);
}

#[test]
fn duplicate_txid_is_a_no_op() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-1", "4", true);
    step(&h, &mut o, Expect::received("PENDING", "4", "USD"), &[("order.pending", "NEW")]);

    tick(&h);
    let before = snapshot(&h, &o.id);
    let again = pay(&h, &o.id, "tx-1", "4", true);
    assert!(again.duplicate);
    assert!(again.events.is_empty());
    // A repeat with a different amount is a conflicting report: refused, the first record stands.
    let conflict = h.svc.record_payment(&o.id, "tx-1", dec("9"), false).expect_err("conflicting amount");
    assert_eq!(conflict.error_code(), "PARAMETERS_MISSING");
    assert!(conflict.to_string().starts_with("amount:"), "{conflict}");
    let unconfirmed_repeat = h.svc.record_payment(&o.id, "tx-1", dec("4"), false).expect("repeat");
    assert!(unconfirmed_repeat.duplicate);
    assert_eq!(unconfirmed_repeat.payment.state, PaymentState::Confirmed);
    // Surrounding whitespace does not make a new txid.
    assert!(h.svc.record_payment(&o.id, " tx-1 ", dec("4"), true).expect("repeat").duplicate);
    assert_eq!(snapshot(&h, &o.id), before, "a duplicate changes nothing");
    step(&h, &mut o, Expect::received("PENDING", "4", "USD"), &[]);

    // Confirming or rejecting twice is a no-op too.
    pay(&h, &o.id, "tx-2", "1", false);
    step(&h, &mut o, Expect::received("PENDING", "5", "USD"), &[]);
    tick(&h);
    let rejected = h.svc.reject_payment("tx-2").expect("reject");
    assert!(!rejected.duplicate);
    step(&h, &mut o, Expect::received("FAILED", "4", "USD"), &[("order.failed", "PENDING")]);
    tick(&h);
    let before = snapshot(&h, &o.id);
    let twice = h.svc.reject_payment("tx-2").expect("reject twice");
    assert!(twice.duplicate && twice.events.is_empty());
    let confirm_twice = h.svc.confirm_payment("tx-1").expect("confirm a confirmed payment");
    assert!(confirm_twice.duplicate && confirm_twice.events.is_empty());
    assert_eq!(snapshot(&h, &o.id), before);
}

#[test]
fn the_same_txid_for_another_order_is_an_error() {
    let h = harness();
    let mut a = create_usd10(&h);
    let mut b = create_usd10(&h);
    tick(&h);
    pay(&h, &a.id, "tx-shared", "4", true);
    step(&h, &mut a, Expect::received("PENDING", "4", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    let (before_a, before_b) = (snapshot(&h, &a.id), snapshot(&h, &b.id));
    let err = assert_code(
        h.svc.record_payment(&b.id, "tx-shared", dec("10"), true),
        "PARAMETERS_MISSING",
        "same txid for another order",
    );
    assert!(err.to_string().starts_with("txid: "), "names the txid: {err}");
    assert_eq!(snapshot(&h, &a.id), before_a);
    assert_eq!(snapshot(&h, &b.id), before_b);
    step(&h, &mut b, Expect::status("NEW"), &[]);
}

#[test]
fn reject_after_pending_fails_and_keeps_what_was_confirmed() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-1", "4", true);
    step(&h, &mut o, Expect::received("PENDING", "4", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    pay(&h, &o.id, "tx-2", "6", false);
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[]);
    tick(&h);
    let outcome = h.svc.reject_payment("tx-2").expect("reject");
    assert_eq!(outcome.events.len(), 1);
    step(&h, &mut o, Expect::received("FAILED", "4", "USD"), &[("order.failed", "PENDING")]);
    let states: Vec<PaymentState> = h.svc.order_payments(&o.id).expect("payments").iter().map(|p| p.state).collect();
    assert_eq!(states, [PaymentState::Confirmed, PaymentState::Rejected]);
}

#[test]
fn a_payment_seen_in_time_that_confirms_after_the_order_failed_is_paid_late() {
    // The customer's wallet replaced its transaction: the first is rejected (FAILED), the
    // replacement, seen before expiry, confirms afterwards. The merchant must hear of it.
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-first", "10", false);
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    pay(&h, &o.id, "tx-replacement", "10", false);
    step(&h, &mut o, Expect::received("PENDING", "20", "USD"), &[]);
    tick(&h);
    h.svc.reject_payment("tx-first").expect("reject");
    step(&h, &mut o, Expect::received("FAILED", "10", "USD"), &[("order.failed", "PENDING")]);
    tick(&h);
    let outcome = h.svc.confirm_payment("tx-replacement").expect("confirm");
    assert_eq!(outcome.events.iter().map(|e| e.event_type.as_str()).collect::<Vec<_>>(), ["order.paid_late"]);
    step(&h, &mut o, Expect::received("FAILED", "10", "USD"), &[("order.paid_late", "FAILED")]);
    assert!(h.svc.confirm_payment("tx-replacement").expect("again").events.is_empty(), "told once");
    tick(&h);
    h.svc.mark_paid(&o.id).expect("mark paid");
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "FAILED")]);
}

#[test]
fn a_payment_after_paid_is_recorded_without_a_transition() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-1", "10", true);
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "NEW")]);
    tick(&h);
    let extra = pay(&h, &o.id, "tx-2", "1", true);
    assert!(!extra.payment.counts);
    assert!(extra.events.is_empty(), "PAID is terminal: {:?}", extra.events);
    let body = step(&h, &mut o, Expect::received("PAID", "11", "USD"), &[]);
    assert_eq!(string(&body["order"], "updated_at"), iso_from_ms(now_ms(&h)), "the amounts changed: updated_at moves");
    // Late too: still excess, not `order.paid_late` (there is nothing for the merchant to accept).
    past_expiry(&h, &o);
    let late = pay(&h, &o.id, "tx-3", "2", true);
    assert!(late.events.is_empty(), "{:?}", late.events);
    step(&h, &mut o, Expect::received("PAID", "13", "USD"), &[]);
    assert_eq!(status_of(&h, &o.id), OrderStatus::Paid);
}

#[test]
fn record_payment_validates_its_input() {
    let h = harness();
    let o = create_usd10(&h);
    let before = snapshot(&h, &o.id);
    let cases: &[(&str, &str, &str)] = &[
        ("tx", "0", "amount"),
        ("tx", "-1", "amount"),
        ("tx", "0.0000001", "amount"), // USDT has 6 decimals
        ("", "1", "txid"),
        ("   ", "1", "txid"),
        ("tx\u{7}bell", "1", "txid"),
    ];
    for (txid, amount, field) in cases {
        let err = assert_code(
            h.svc.record_payment(&o.id, txid, dec(amount), true),
            "PARAMETERS_MISSING",
            &format!("record_payment({txid:?}, {amount})"),
        );
        assert!(err.to_string().starts_with(&format!("{field}: ")), "names {field}: {err}");
    }
    let long = "x".repeat(257);
    assert_code(h.svc.record_payment(&o.id, &long, dec("1"), true), "PARAMETERS_MISSING", "257-char txid");
    assert_eq!(snapshot(&h, &o.id), before, "invalid payments change nothing");
    // 256 characters is fine, and a payment's decimals follow the coin (BTC: 8).
    pay(&h, &o.id, &"y".repeat(256), "1", true);
    let btc = create_tracked(&h, &json!({"currency": "USD", "amount": 10, "pay_currency": "BTC"}));
    assert_code(
        h.svc.record_payment(&btc.id, "tx-btc", dec("0.000000001"), true),
        "PARAMETERS_MISSING",
        "9 decimals of BTC",
    );
    pay(&h, &btc.id, "tx-btc", "0.00000001", true);
}

#[test]
fn payments_are_isolated_by_environment() {
    let h = harness();
    let sandbox_order = create_usd10(&h);
    let live = coinorder::Service::open(h.db(), config(coinorder::Environment::Live, &h.clock))
        .expect("open live on the same database");
    assert_code(
        live.record_payment(&sandbox_order.id, "tx-1", dec("10"), true),
        "ORDER_NOT_VALID",
        "a live service cannot pay a sandbox order",
    );
    pay(&h, &sandbox_order.id, "tx-1", "10", true);
    assert_code(live.confirm_payment("tx-1"), "PAYMENT_NOT_FOUND", "sandbox txid from live");
    assert_eq!(status_of(&h, &sandbox_order.id), OrderStatus::Paid);
}

#[test]
fn concurrent_repeats_of_one_txid_record_it_once() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    let outcomes: Vec<coinorder::PaymentOutcome> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| h.svc.record_payment(&o.id, "tx-race", dec("10"), true).expect("record")))
            .collect();
        handles.into_iter().map(|t| t.join().expect("thread")).collect()
    });
    assert_eq!(outcomes.iter().filter(|x| !x.duplicate).count(), 1, "exactly one call records it");
    assert_eq!(outcomes.iter().map(|x| x.events.len()).sum::<usize>(), 1);
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "NEW")]);
}

#[test]
fn concurrent_partial_payments_add_up_with_one_event_each_transition() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    std::thread::scope(|s| {
        for i in 0..10 {
            let (h, id) = (&h, o.id.clone());
            s.spawn(move || h.svc.record_payment(&id, &format!("tx-{i}"), dec("1"), true).expect("record"));
        }
    });
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.pending", "NEW"), ("order.paid", "PENDING")]);
}

#[test]
fn a_late_payment_while_an_in_time_one_awaits_confirmation_is_paid_late() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    pay(&h, &o.id, "tx-in-time", "4", false);
    step(&h, &mut o, Expect::received("PENDING", "4", "USD"), &[("order.pending", "NEW")]);
    past_expiry(&h, &o);
    // The quote has passed: this one does not count, the order waits for the first.
    let late = pay(&h, &o.id, "tx-late", "6", true);
    assert!(!late.payment.counts);
    step(&h, &mut o, Expect::received("PENDING", "4", "USD"), &[("order.paid_late", "PENDING")]);
    tick(&h);
    // The in-time payment confirms, short on its own: FAILED; the merchant may accept it.
    h.svc.confirm_payment("tx-in-time").expect("confirm");
    step(&h, &mut o, Expect::received("FAILED", "4", "USD"), &[("order.failed", "PENDING")]);
    tick(&h);
    h.svc.mark_paid(&o.id).expect("mark_paid");
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "FAILED")]);
}

/// Runs `f`, failing the test (instead of aborting it) if it panics.
fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| panic!("{what} panicked"))
}

#[test]
fn huge_payment_amounts_never_panic() {
    // Decimal holds at most ~7.9e28: two payments of 4e28 overflow any plain sum.
    let h = harness();
    let o = create_usd10(&h);
    let big = dec("40000000000000000000000000000");
    for txid in ["big-1", "big-2"] {
        let result =
            no_panic(&format!("record_payment({txid}, 4e28)"), || h.svc.record_payment(&o.id, txid, big, false));
        if let Err(err) = result {
            assert_eq!(err.error_code(), "PARAMETERS_MISSING", "{err}");
        }
    }
    let body = get_order(&h, &o.id);
    assert_eq!(body["order"]["status"], body["invoice"]["status"]);

    // The same through the sandbox simulate endpoint: an answer, never a panic.
    let p = create_usd10(&h);
    for _ in 0..2 {
        let resp = no_panic("simulate pay 4e28", || {
            simulate(
                &h.svc,
                Some(&h.key),
                &p.id,
                &json!({"action": "pay", "amount": "40000000000000000000000000000", "confirmed": false}),
            )
        });
        assert!(resp.status == 200 || resp.status == 400, "{} {}", resp.status, text(&resp));
    }
}

#[test]
fn a_cancel_after_the_quote_ran_out_records_the_expiry_and_is_refused() {
    let h = harness();
    let o = create_usd10(&h);
    past_expiry(&h, &o);
    let err = h.svc.cancel_order(&merchant(&h), &o.id).expect_err("the quote ran out");
    assert_eq!(err.error_code(), "ORDER_STATE_INVALID");
    assert_eq!(status_of(&h, &o.id), OrderStatus::Expired);
    let events = h.svc.order_events(&o.id).expect("events");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].event_type.as_str(), "order.expired");
    // The page's cancel answers the same way.
    let page_cancel = page(&h.svc, "POST", &format!("/pay/cancel?id={}", o.id));
    assert_eq!(page_cancel.status, 400);
    assert_eq!(page_cancel.json()["error_code"], "ORDER_STATE_INVALID");
}
