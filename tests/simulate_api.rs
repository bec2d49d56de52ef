//! Acceptance tests of the sandbox simulation endpoint `POST /v1/orders/<id>/simulate`
//! and of the payment page's JSON endpoints (`/pay/status`, `/pay/cancel`,
//! `/pay/simulate`), all through `Service::handle` (issue 3, DESIGN §6, §7).

mod common;
mod lifecycle_common;

use coinorder::{Environment, OrderStatus, SimulateAction, WireResponse};
use common::*;
use lifecycle_common::*;
use serde_json::{json, Value};

/// A 100 EUR order paid in BTC: 0.01111112 BTC at the sandbox's 9000 EUR per BTC.
fn btc_order(h: &Harness) -> Tracked {
    let o = create_tracked(h, &json!({"currency": "EUR", "amount": 100, "pay_currency": "BTC"}));
    assert_eq!(invoice_amount(h, &o.id), dec("0.01111112"));
    o
}

/// Simulates with the harness key; asserts 200 and that the body is what Get Order
/// shows right after.
fn sim_ok(h: &Harness, order_id: &str, body: &Value) -> Value {
    let resp = simulate(&h.svc, Some(&h.key), order_id, body);
    assert_eq!(resp.status, 200, "simulate {body}: {}", text(&resp));
    assert_json_content_type(&resp);
    let returned = resp.json();
    assert_eq!(returned, get_order(h, order_id), "the response is the Get Order body");
    returned
}

#[test]
fn pay_without_an_amount_pays_what_is_due() {
    let h = harness();
    let mut o = btc_order(&h);
    tick(&h);
    let body = sim_ok(&h, &o.id, &json!({"action": "pay"}));
    assert_eq!(body["order"]["status"], json!("PAID"));
    // 0.01111112 BTC × 9000 = 100.00008 EUR, shown rounded down to cents.
    step(&h, &mut o, Expect::received("PAID", "100", "EUR"), &[("order.paid", "NEW")]);
    let payments = h.svc.order_payments(&o.id).expect("payments");
    assert_eq!(payments.len(), 1);
    assert_eq!((payments[0].amount, payments[0].currency.as_str()), (dec("0.01111112"), "BTC"));
    assert_eq!(payments[0].state, coinorder::PaymentState::Confirmed);
}

#[test]
fn partial_without_an_amount_pays_half_then_pay_pays_the_rest() {
    let h = harness();
    let mut o = btc_order(&h);
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "partial"}));
    // Half of 0.01111112 BTC = 0.00555556 BTC = 50.00004 EUR.
    step(&h, &mut o, Expect::received("PENDING", "50", "EUR"), &[("order.pending", "NEW")]);
    assert_eq!(h.svc.order_payments(&o.id).expect("payments")[0].amount, dec("0.00555556"));
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "pay"}));
    step(&h, &mut o, Expect::received("PAID", "100", "EUR"), &[("order.paid", "PENDING")]);
    let amounts: Vec<_> = h.svc.order_payments(&o.id).expect("payments").iter().map(|p| p.amount).collect();
    assert_eq!(amounts.iter().copied().sum::<coinorder::money::Decimal>(), dec("0.01111112"));
}

#[test]
fn unconfirmed_partial_waits_for_confirm_like_an_unconfirmed_pay() {
    let h = harness();
    let mut o = btc_order(&h);
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "partial", "confirmed": false}));
    step(&h, &mut o, Expect::received("PENDING", "50", "EUR"), &[("order.pending", "NEW")]);
    let payments = h.svc.order_payments(&o.id).expect("payments");
    assert_eq!(payments.len(), 1);
    assert_eq!((payments[0].amount, payments[0].state), (dec("0.00555556"), coinorder::PaymentState::Unconfirmed));
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "confirm"}));
    step(&h, &mut o, Expect::received("PENDING", "50", "EUR"), &[]);
    assert_eq!(h.svc.order_payments(&o.id).expect("payments")[0].state, coinorder::PaymentState::Confirmed);
}
#[test]
fn amounts_are_in_the_invoice_crypto_currency() {
    let h = harness();
    let mut o = btc_order(&h);
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "partial", "amount": 0.001}));
    // 0.001 BTC × 9000 = 9 EUR, not 0.001 EUR.
    step(&h, &mut o, Expect::received("PENDING", "9", "EUR"), &[("order.pending", "NEW")]);
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "pay", "amount": "0.02"}));
    // 0.021 BTC × 9000 = 189 EUR: overpaid, PAID.
    step(&h, &mut o, Expect::received("PAID", "189", "EUR"), &[("order.paid", "PENDING")]);

    // More decimals than the coin has are refused, naming `amount`.
    let other = btc_order(&h);
    let resp = simulate(&h.svc, Some(&h.key), &other.id, &json!({"action": "pay", "amount": "0.000000001"}));
    assert_invalid(&resp, "amount");
    let resp = simulate(&h.svc, Some(&h.key), &other.id, &json!({"action": "pay", "amount": "lots"}));
    assert_invalid(&resp, "amount");
    assert_eq!(status_of(&h, &other.id), OrderStatus::New);
}

#[test]
fn unconfirmed_pay_then_confirm() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "pay", "confirmed": false}));
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "confirm"}));
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "PENDING")]);
    // Nothing left to confirm.
    let resp = simulate(&h.svc, Some(&h.key), &o.id, &json!({"action": "confirm"}));
    assert_invalid(&resp, "action");
}

#[test]
fn unconfirmed_pay_then_reject() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "pay", "confirmed": false}));
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "reject"}));
    step(&h, &mut o, Expect::received("FAILED", "0", "USD"), &[("order.failed", "PENDING")]);
}

#[test]
fn cancel_a_new_order_and_not_a_paid_one() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "cancel"}));
    step(&h, &mut o, Expect::status("CANCELLED"), &[("order.cancelled", "NEW")]);

    let mut paid = create_usd10(&h);
    tick(&h);
    sim_ok(&h, &paid.id, &json!({"action": "pay"}));
    step(&h, &mut paid, Expect::received("PAID", "10", "USD"), &[("order.paid", "NEW")]);
    tick(&h);
    let resp = simulate(&h.svc, Some(&h.key), &paid.id, &json!({"action": "cancel"}));
    assert_error(&resp, 400, "ORDER_STATE_INVALID");
    step(&h, &mut paid, Expect::received("PAID", "10", "USD"), &[]);
}

#[test]
fn expire_ends_the_quote_now() {
    let h = harness();
    let mut o = create_usd10(&h);
    h.clock.advance_ms(5 * 60 * 1000);
    let body = sim_ok(&h, &o.id, &json!({"action": "expire"}));
    // The quote now ends at the moment of the simulation.
    o.expired_ms = now_ms(&h);
    assert_eq!(int(&body["invoice"], "expired_at_t"), o.expired_ms);
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.expired", "NEW")]);

    // Expiring a terminal order is refused, and changes nothing.
    tick(&h);
    let resp = simulate(&h.svc, Some(&h.key), &o.id, &json!({"action": "expire"}));
    assert_error(&resp, 400, "ORDER_STATE_INVALID");
    step(&h, &mut o, Expect::status("EXPIRED"), &[]);

    // A PENDING order short of confirmed payments fails.
    let mut short = create_usd10(&h);
    tick(&h);
    sim_ok(&h, &short.id, &json!({"action": "partial"}));
    step(&h, &mut short, Expect::received("PENDING", "5", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    sim_ok(&h, &short.id, &json!({"action": "expire"}));
    short.expired_ms = now_ms(&h);
    step(&h, &mut short, Expect::received("FAILED", "5", "USD"), &[("order.failed", "PENDING")]);
}

#[test]
fn expire_while_a_payment_awaits_confirmation_then_confirm_is_paid() {
    let h = harness();
    let mut o = create_usd10(&h);
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "pay", "confirmed": false}));
    step(&h, &mut o, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "expire"}));
    o.expired_ms = now_ms(&h);
    let after_expire = get_order(&h, &o.id);
    assert_eq!(after_expire["order"]["status"], json!("PENDING"), "a payment seen in time still awaits confirmation");
    o.last = after_expire;
    tick(&h);
    sim_ok(&h, &o.id, &json!({"action": "confirm"}));
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "PENDING")]);
}

#[test]
fn bad_or_missing_action_names_action() {
    let h = harness();
    let o = create_usd10(&h);
    for body in [json!({"action": "teleport"}), json!({}), json!({"action": 3}), json!({"amount": 1})] {
        let resp = simulate(&h.svc, Some(&h.key), &o.id, &body);
        assert_invalid(&resp, "action");
    }
    let resp = h.svc.handle(
        &coinorder::WireRequest::new("POST", &format!("/v1/orders/{}/simulate", o.id))
            .header("x-api-key", &h.key)
            .body("[1,2]"),
    );
    assert_invalid(&resp, "body");
    assert_eq!(status_of(&h, &o.id), OrderStatus::New);
    assert!(h.svc.order_events(&o.id).expect("events").is_empty());
}

#[test]
fn simulate_needs_the_orders_own_key() {
    let h = harness();
    let o = create_usd10(&h);
    let before = snapshot(&h, &o.id);

    let (other_key, _) = h.new_key(43, Environment::Sandbox);
    let resp = simulate(&h.svc, Some(&other_key), &o.id, &json!({"action": "pay"}));
    assert_error(&resp, 400, "ORDER_NOT_VALID");

    let resp = simulate(&h.svc, None, &o.id, &json!({"action": "pay"}));
    assert_error(&resp, 400, "AUTHENTICATION_FAILED");
    let resp = simulate(&h.svc, Some(""), &o.id, &json!({"action": "pay"}));
    assert_error(&resp, 400, "AUTHENTICATION_FAILED");

    let (live_key, _) = h.new_key(42, Environment::Live);
    let resp = simulate(&h.svc, Some(&live_key), &o.id, &json!({"action": "pay"}));
    assert_error(&resp, 401, "Unauthorized");

    let resp = simulate(&h.svc, Some(&h.key), "00000000-0000-4000-8000-000000000000", &json!({"action": "pay"}));
    assert_error(&resp, 400, "ORDER_NOT_VALID");

    assert_eq!(snapshot(&h, &o.id), before, "refused simulations change nothing");
}

#[test]
fn live_has_no_simulate_endpoint() {
    let h = live_harness_with_rate("1");
    let created = h.create(&json!({"currency": "USD", "amount": 10}));
    let id = string(&created["data"], "order_id").to_string();
    for key in [Some(h.key.as_str()), None] {
        let resp = simulate(&h.svc, key, &id, &json!({"action": "pay"}));
        assert_error(&resp, 404, "Not Found");
    }
    let resp = page(&h.svc, "POST", &format!("/pay/simulate?id={id}"));
    assert_error(&resp, 404, "Not Found");
    // The typed call refuses too.
    let err = h.svc.simulate(&id, &SimulateAction::Pay { amount: None, confirmed: true }).expect_err("live");
    assert_eq!((err.http_status(), err.error_code()), (404, "Not Found"));
    assert_eq!(h.svc.order(&id).expect("order").order.status, OrderStatus::New);
    assert!(h.svc.order_payments(&id).expect("payments").is_empty());
    assert!(h.svc.order_events(&id).expect("events").is_empty());
}

fn status_json(svc: &coinorder::Service, order_id: &str) -> (WireResponse, Value) {
    let resp = page(svc, "GET", &format!("/pay/status?id={order_id}"));
    let body = resp.json();
    (resp, body)
}

#[test]
fn pay_status_needs_no_key_and_shows_public_fields_only() {
    let h = harness();
    let created = h.create(&json!({
        "currency": "USD",
        "amount": 10,
        "title": "Blue mug",
        "customer_email": "buyer@example.com",
        "webhook_url": "https://hooks.example.com/secret-hook",
        "callback_url": "https://shop.example.com/return",
        "merchant_order_id": "internal-ref-7",
    }));
    let id = string(&created["data"], "order_id").to_string();
    let (resp, body) = status_json(&h.svc, &id);
    assert_eq!(resp.status, 200, "{}", text(&resp));
    assert_json_content_type(&resp);
    let order = get_order(&h, &id);
    assert_eq!(body["order_id"], json!(id));
    assert_eq!(body["status"], order["order"]["status"]);
    assert_eq!(body["title"], json!("Blue mug"));
    assert_eq!(body["pay_amount"], order["invoice"]["amount"]);
    assert_eq!(body["pay_currency"], order["invoice"]["currency"]);
    assert_eq!(body["price_amount"], order["order"]["price_amount"]);
    assert_eq!(body["expired_at_t"], order["invoice"]["expired_at_t"]);
    assert_eq!(body["redirect_url"], Value::Null, "no redirect before a terminal state");
    let address = h.svc.order(&id).expect("order").invoice.address;
    assert!(!address.is_empty());
    assert_eq!(body["address"], json!(address));

    let raw = text(&resp);
    let secret = h.svc.key_webhook_secret(&h.key_id).expect("secret");
    for hidden in [
        "buyer@example.com",
        "secret-hook",
        "hooks.example.com",
        "shop.example.com",
        h.key.as_str(),
        h.key_id.as_str(),
        secret.expose(),
        "user_id",
        "customer_email",
        "webhook_url",
    ] {
        assert!(!raw.contains(hidden), "/pay/status leaks {hidden:?}: {raw}");
    }

    // Payments show up in it.
    pay(&h, &id, "tx-1", "4", true);
    let (_, body) = status_json(&h.svc, &id);
    assert_eq!(body["status"], json!("PENDING"));
    assert_eq!(num_text(&body["receive_amount"]), "4");
    assert_eq!(body["receive_currency"], json!("USD"));

    // Unknown and other-environment ids are not found.
    let (resp, _) = status_json(&h.svc, "00000000-0000-4000-8000-000000000000");
    assert_error(&resp, 400, "ORDER_NOT_VALID");
    let (resp, _) = status_json(&h.svc, "");
    assert_error(&resp, 400, "ORDER_NOT_VALID");
    let live = coinorder::Service::open(h.db(), config(Environment::Live, &h.clock)).expect("live");
    let (resp, _) = status_json(&live, &id);
    assert_error(&resp, 400, "ORDER_NOT_VALID");
}

#[test]
fn pay_cancel_cancels_a_new_order_and_redirects_to_the_callback() {
    let h = harness();
    let mut o = create_tracked(
        &h,
        &json!({"currency": "USD", "amount": 10, "callback_url": "https://shop.example.com/return?ref=a%20b"}),
    );
    tick(&h);
    let resp = page(&h.svc, "POST", &format!("/pay/cancel?id={}", o.id));
    assert_eq!(resp.status, 200, "{}", text(&resp));
    let body = resp.json();
    assert_eq!(body["status"], json!("CANCELLED"));
    let redirect = string(&body, "redirect_url");
    let url = url::Url::parse(redirect).expect("redirect_url is a URL");
    assert_eq!(url.host_str(), Some("shop.example.com"));
    assert_eq!(url.path(), "/return");
    let query: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    assert_eq!(
        query,
        vec![
            ("ref".to_string(), "a b".to_string()),
            ("order_id".to_string(), o.id.clone()),
            ("status".to_string(), "CANCELLED".to_string()),
        ]
    );
    step(&h, &mut o, Expect::status("CANCELLED"), &[("order.cancelled", "NEW")]);

    // The status endpoint keeps giving the redirect.
    let (_, status) = status_json(&h.svc, &o.id);
    assert_eq!(status["redirect_url"], json!(redirect));

    // Cancelling again, or cancelling a paid order, is refused.
    tick(&h);
    let resp = page(&h.svc, "POST", &format!("/pay/cancel?id={}", o.id));
    assert_error(&resp, 400, "ORDER_STATE_INVALID");
    step(&h, &mut o, Expect::status("CANCELLED"), &[]);

    let mut paid = create_usd10(&h);
    tick(&h);
    pay(&h, &paid.id, "tx-1", "10", true);
    step(&h, &mut paid, Expect::received("PAID", "10", "USD"), &[("order.paid", "NEW")]);
    tick(&h);
    let resp = page(&h.svc, "POST", &format!("/pay/cancel?id={}", paid.id));
    assert_error(&resp, 400, "ORDER_STATE_INVALID");
    step(&h, &mut paid, Expect::received("PAID", "10", "USD"), &[]);

    // Without a callback_url there is nowhere to redirect.
    let plain = create_usd10(&h);
    let resp = page(&h.svc, "POST", &format!("/pay/cancel?id={}", plain.id));
    assert_eq!(resp.status, 200);
    assert_eq!(resp.json()["status"], json!("CANCELLED"));
    assert_eq!(resp.json()["redirect_url"], Value::Null);

    // Only POST cancels.
    let fresh = create_usd10(&h);
    let resp = page(&h.svc, "GET", &format!("/pay/cancel?id={}", fresh.id));
    assert_error(&resp, 404, "Not Found");
    assert_eq!(status_of(&h, &fresh.id), OrderStatus::New);
}

#[test]
fn pay_simulate_in_sandbox_pays_and_redirects_with_paid() {
    let h = harness();
    let mut o = create_tracked(
        &h,
        &json!({"currency": "EUR", "amount": 100, "pay_currency": "BTC", "callback_url": "https://shop.example.com/done"}),
    );
    tick(&h);
    let resp = page(&h.svc, "POST", &format!("/pay/simulate?id={}", o.id));
    assert_eq!(resp.status, 200, "{}", text(&resp));
    let body = resp.json();
    assert_eq!(body["status"], json!("PAID"));
    assert_eq!(body["sandbox"], json!(true));
    assert_eq!(body["redirect_url"], json!(format!("https://shop.example.com/done?order_id={}&status=PAID", o.id)));
    step(&h, &mut o, Expect::received("PAID", "100", "EUR"), &[("order.paid", "NEW")]);
}

/// `Service::simulate` reports what the step did: the payment it made or settled and the
/// events it emitted, with the order after it (what the CLI and the bindings print).
#[test]
fn simulate_reports_the_payments_and_events_of_each_step() {
    let h = harness();
    let o = btc_order(&h);
    tick(&h);
    let paid = h.svc.simulate(&o.id, &SimulateAction::Pay { amount: None, confirmed: false }).expect("pay");
    assert_eq!(paid.order.order.status, OrderStatus::Pending);
    assert_eq!(paid.payments.len(), 1);
    let txid = paid.payments[0].txid.clone();
    assert!(txid.starts_with("sandbox_tx_"), "{txid}");
    assert_eq!(
        (paid.payments[0].amount, paid.payments[0].state),
        (dec("0.01111112"), coinorder::PaymentState::Unconfirmed)
    );
    let types: Vec<&str> = paid.events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(types, ["order.pending"]);

    tick(&h);
    let confirmed = h.svc.simulate(&o.id, &SimulateAction::Confirm).expect("confirm");
    assert_eq!(confirmed.order.order.status, OrderStatus::Paid);
    assert_eq!(
        confirmed.payments.iter().map(|p| (p.txid.as_str(), p.state)).collect::<Vec<_>>(),
        [(txid.as_str(), coinorder::PaymentState::Confirmed)]
    );
    assert_eq!(confirmed.events.iter().map(|e| e.event_type.as_str()).collect::<Vec<_>>(), ["order.paid"]);

    let other = btc_order(&h);
    let cancelled = h.svc.simulate(&other.id, &SimulateAction::Cancel).expect("cancel");
    assert!(cancelled.payments.is_empty());
    assert_eq!(cancelled.events.iter().map(|e| e.event_type.as_str()).collect::<Vec<_>>(), ["order.cancelled"]);
}
