//! Acceptance tests for Create Order and Get Order through `Service::handle`:
//! the exact wire shapes of spec §2.2/§2.3/§2.4, DESIGN §4 validation with its error
//! codes and messages, exact money, and idempotent replay (DESIGN §5).

mod common;

use coinorder::{Environment, WireRequest};
use common::*;
use serde_json::{json, Value};

const CREATE_DATA_FIELDS: &[&str] = &[
    "user_id",
    "merchant_order_id",
    "title",
    "description",
    "callback_url",
    "webhook_url",
    "amount",
    "currency",
    "order_id",
    "status",
    "created_at",
    "updated_at",
];

const GET_ORDER_FIELDS: &[&str] = &[
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

const INVOICE_FIELDS: &[&str] = &[
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

fn order_id_of(created: &Value) -> String {
    string(&created["data"], "order_id").to_string()
}

fn get_order(h: &Harness, order_id: &str) -> Value {
    let resp = h.get(&format!("/v1/orders/{order_id}"));
    assert_eq!(resp.status, 200, "get: {}", text(&resp));
    assert_json_content_type(&resp);
    resp.json()
}

fn number_as_f64(v: &Value) -> f64 {
    assert!(v.is_number(), "not a JSON number: {v}");
    v.to_string().parse::<f64>().expect("number text")
}

fn decimals_of(v: &Value) -> usize {
    let t = v.to_string();
    assert!(!t.contains(['e', 'E']), "number in exponent form: {t}");
    t.split_once('.').map_or(0, |(_, frac)| frac.len())
}

#[test]
fn helper_iso_from_ms_matches_known_values() {
    assert_eq!(iso_from_ms(T0_MS), T0_ISO);
    assert_eq!(iso_from_ms(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(iso_from_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    assert_eq!(iso_from_ms(T0_MS + THIRTY_MIN_MS), "2026-11-22T06:21:22.123Z");
    assert!(is_iso_ms(T0_ISO));
    assert!(!is_iso_ms("2026-11-22T05:51:22Z"));
    assert!(!is_iso_ms("2026-11-22T05:51:22.123+00:00"));
}

// ---------------------------------------------------------------- create: shape

#[test]
fn create_minimal_returns_exactly_the_spec_shape() {
    let h = harness();
    let resp = h.post(&minimal_order());
    assert_eq!(resp.status, 201, "{}", text(&resp));
    assert_json_content_type(&resp);
    let v = resp.json();
    assert_eq!(keys_of(&v), sorted(&["status", "message", "data", "payment_url"]));
    assert_eq!(int(&v, "status"), 201);
    assert_eq!(string(&v, "message"), "Order created successfully");

    let data = &v["data"];
    assert_eq!(keys_of(data), sorted(CREATE_DATA_FIELDS), "data must have exactly the §2.2 fields");
    assert_eq!(int(data, "user_id"), h.user_id);
    for optional in ["title", "description", "callback_url", "webhook_url"] {
        assert!(data[optional].is_null(), "{optional} not sent must be null: {data}");
    }
    assert!(data["amount"].is_number(), "amount must be a number: {data}");
    assert_eq!(data["amount"].to_string(), "10");
    assert_eq!(string(data, "currency"), "USD");
    let order_id = string(data, "order_id");
    assert!(is_uuid(order_id), "order_id not UUID-shaped: {order_id}");
    assert_eq!(string(data, "status"), "NEW");
    assert_eq!(string(data, "created_at"), T0_ISO);
    assert_eq!(string(data, "updated_at"), T0_ISO);

    let moid = string(data, "merchant_order_id");
    let random =
        moid.strip_prefix("ord_").unwrap_or_else(|| panic!("generated merchant_order_id must start with ord_: {moid}"));
    assert_eq!(random.len(), 24, "ord_ + 24 chars: {moid}");
    assert!(is_base62(random), "ord_ + base62: {moid}");

    assert_eq!(string(&v, "payment_url"), format!("http://127.0.0.1:8080/pay?id={order_id}"));
}

#[test]
fn create_with_every_field_echoes_them_and_data_keeps_the_spec_fields() {
    let h = harness();
    let body = json!({
        "merchant_order_id": "INV-2026/001",
        "currency": "USD",
        "amount": 19.99,
        "title": "Blue T-shirt",
        "description": "2 x Blue T-shirt, size M",
        "callback_url": "https://shop.example.com/return?x=1",
        "webhook_url": "https://shop.example.com/hooks/coin",
        "success_url": "https://shop.example.com/ok",
        "cancel_url": "https://shop.example.com/cancel",
        "customer_email": "buyer@example.com",
        "pay_currency": "BTC"
    });
    let v = h.create(&body);
    let data = &v["data"];
    assert_eq!(
        keys_of(data),
        sorted(CREATE_DATA_FIELDS),
        "data must have exactly the §2.2 fields even when more were sent"
    );
    for field in ["merchant_order_id", "title", "description", "callback_url", "webhook_url", "currency"] {
        assert_eq!(data[field], body[field], "{field} as sent");
    }
    assert_eq!(data["amount"].to_string(), "19.99");

    let got = get_order(&h, &order_id_of(&v));
    let order = &got["order"];
    let mut with_urls: Vec<&str> = GET_ORDER_FIELDS.to_vec();
    with_urls.extend(["cancel_url", "success_url"]);
    assert_eq!(keys_of(order), sorted(&with_urls));
    assert_eq!(string(order, "cancel_url"), "https://shop.example.com/cancel");
    assert_eq!(string(order, "success_url"), "https://shop.example.com/ok");
    for field in ["merchant_order_id", "title", "description", "callback_url"] {
        assert_eq!(order[field], body[field], "order.{field} as sent");
    }
    assert_eq!(order["price_amount"].to_string(), "19.99");
    assert_eq!(string(order, "price_currency"), "USD");
    assert_eq!(string(&got["invoice"], "currency"), "BTC");
    assert_eq!(string(&got["invoice"], "merchant_order_id"), "INV-2026/001");
}

#[test]
fn payment_url_uses_the_configured_page_base() {
    let h = harness_with(Environment::Sandbox, |c| {
        c.payment_page_url = "https://pay.example.com/checkout".to_string();
    });
    let v = h.create(&minimal_order());
    assert_eq!(string(&v, "payment_url"), format!("https://pay.example.com/checkout?id={}", order_id_of(&v)));
}

#[test]
fn generated_merchant_order_ids_and_order_ids_are_distinct() {
    let h = harness();
    let a = h.create(&minimal_order());
    let b = h.create(&minimal_order());
    assert_ne!(order_id_of(&a), order_id_of(&b));
    let ma = string(&a["data"], "merchant_order_id");
    let mb = string(&b["data"], "merchant_order_id");
    assert_ne!(ma, mb, "each generated merchant_order_id must be unique");
    for m in [ma, mb] {
        assert!(m.starts_with("ord_") && m.len() == 28 && is_base62(&m[4..]), "{m}");
    }
}

// ---------------------------------------------------------------- get: shape

#[test]
fn get_order_returns_order_and_invoice_with_spec_fields_and_types() {
    let h = harness();
    let created = h.create(&json!({"currency": "USD", "amount": 10, "title": "t"}));
    let id = order_id_of(&created);
    h.clock.advance_ms(7_000);

    let v = get_order(&h, &id);
    assert_eq!(keys_of(&v), sorted(&["status", "order", "invoice"]));
    assert_eq!(int(&v, "status"), 200);

    let order = &v["order"];
    assert_eq!(keys_of(order), sorted(GET_ORDER_FIELDS), "cancel_url/success_url must be absent when not set");
    assert_eq!(string(order, "order_id"), id);
    assert_eq!(int(order, "user_id"), h.user_id);
    assert_eq!(order["merchant_order_id"], created["data"]["merchant_order_id"]);
    assert_eq!(string(order, "title"), "t");
    assert!(order["description"].is_null(), "{order}");
    assert!(order["callback_url"].is_null(), "{order}");
    assert!(order["price_amount"].is_number());
    assert_eq!(order["price_amount"].to_string(), "10");
    assert_eq!(string(order, "price_currency"), "USD");
    assert_eq!(string(order, "receive_currency"), "", "receive_currency is empty until a payment is seen");
    assert_eq!(string(order, "status"), "NEW");
    assert_eq!(string(order, "created_at"), T0_ISO);
    assert_eq!(string(order, "updated_at"), T0_ISO);
    assert_eq!(int(order, "deleted"), 0, "deleted must be the integer 0: {order}");
    assert_eq!(order["deleted"].to_string(), "0");

    let inv = &v["invoice"];
    let mut members = INVOICE_FIELDS.to_vec();
    members.extend(["rate", "address", "payment_uri"]);
    assert_eq!(keys_of(inv), sorted(&members), "spec §2.4 and the deposit members of DESIGN §5");
    assert!(!string(inv, "invoice_id").is_empty());
    assert_eq!(string(inv, "order_id"), id);
    assert_eq!(inv["merchant_order_id"], created["data"]["merchant_order_id"]);
    assert!(inv["amount"].is_number(), "{inv}");
    assert!(number_as_f64(&inv["amount"]) > 0.0);
    assert!(decimals_of(&inv["amount"]) <= 6, "USDT has 6 decimals: {inv}");
    assert_eq!(string(inv, "currency"), "USDT", "default pay currency");
    assert_eq!(string(inv, "status"), "NEW");
    assert_eq!(string(inv, "created_at"), T0_ISO);
    assert_eq!(int(inv, "created_at_t"), T0_MS);
    assert_eq!(int(inv, "expired_at_t"), T0_MS + THIRTY_MIN_MS);
    assert_eq!(string(inv, "expired_at"), "2026-11-22T06:21:22.123Z");
    assert!(inv["receive_amount"].is_number(), "{inv}");
    assert_eq!(number_as_f64(&inv["receive_amount"]), 0.0);
    assert_eq!(string(inv, "receive_currency"), "");
    // The deposit members: the sandbox's simulated address, the URI for the amount due,
    // the quoted rate (amount = price ÷ rate, rounded up) as a JSON number.
    let address = string(inv, "address");
    assert!(!address.is_empty(), "{inv}");
    let uri = string(inv, "payment_uri");
    assert!(uri.contains(address), "the URI pays the address: {inv}");
    assert!(inv["rate"].is_number(), "{inv}");
    assert!(number_as_f64(&inv["rate"]) > 0.0, "{inv}");
}

#[test]
fn timestamps_follow_the_clock_and_epoch_fields_match_the_iso_strings() {
    let h = harness();
    h.create(&minimal_order());
    let t1 = T0_MS + 1_234;
    h.clock.set_ms(t1);
    let second = h.create(&minimal_order());
    assert_eq!(string(&second["data"], "created_at"), iso_from_ms(t1));
    assert_eq!(string(&second["data"], "updated_at"), iso_from_ms(t1));

    let v = get_order(&h, &order_id_of(&second));
    let inv = &v["invoice"];
    for (iso, epoch) in [("created_at", "created_at_t"), ("expired_at", "expired_at_t")] {
        let s = string(inv, iso);
        assert!(is_iso_ms(s), "{iso} must be ISO 8601 UTC with ms: {s}");
        assert_eq!(s, iso_from_ms(int(inv, epoch)), "{iso} vs {epoch}");
    }
    assert_eq!(int(inv, "created_at_t"), t1);
    assert_eq!(int(inv, "expired_at_t"), t1 + THIRTY_MIN_MS);
    for field in ["created_at", "updated_at"] {
        assert_eq!(string(&v["order"], field), iso_from_ms(t1));
    }
}

#[test]
fn invoice_expiry_follows_the_configured_ttl() {
    let h = harness_with(Environment::Sandbox, |c| {
        c.invoice_ttl = std::time::Duration::from_secs(600);
    });
    let v = get_order(&h, &order_id_of(&h.create(&minimal_order())));
    assert_eq!(int(&v["invoice"], "expired_at_t"), T0_MS + 600_000);
    assert_eq!(string(&v["invoice"], "expired_at"), iso_from_ms(T0_MS + 600_000));
}

#[test]
fn pay_currency_selects_the_invoice_coin() {
    let h = harness();
    for (coin, decimals) in [("BTC", 8), ("ETH", 18), ("USDC", 6), ("USDT", 6)] {
        let created = h.create(&json!({"currency": "JPY", "amount": 1, "pay_currency": coin}));
        let inv = &get_order(&h, &order_id_of(&created))["invoice"];
        assert_eq!(string(inv, "currency"), coin);
        assert!(
            number_as_f64(&inv["amount"]) > 0.0,
            "a tiny fiat amount still needs a positive crypto amount (rounded up): {inv}"
        );
        assert!(decimals_of(&inv["amount"]) <= decimals, "{coin}: {inv}");
    }
}

// ---------------------------------------------------------------- get: errors

#[test]
fn get_unknown_or_malformed_order_id_is_order_not_valid_with_eror() {
    let h = harness();
    h.create(&minimal_order());
    for id in ["00000000-0000-4000-8000-000000000000", "not-a-uuid", "ord_does_not_exist"] {
        let resp = h.get(&format!("/v1/orders/{id}"));
        assert_error(&resp, 400, "ORDER_NOT_VALID");
    }
}

// ---------------------------------------------------------------- exact money

#[test]
fn amount_19_99_round_trips_exactly() {
    let h = harness();
    let resp = h.post_raw(r#"{"currency":"USD","amount":19.99}"#);
    assert_eq!(resp.status, 201, "{}", text(&resp));
    let raw = text(&resp);
    assert!(raw.contains("19.99"), "raw body must contain 19.99: {raw}");
    assert!(!raw.contains("19.989") && !raw.contains("19.990"), "float artefact: {raw}");
    let v = resp.json();
    assert_eq!(v["data"]["amount"].to_string(), "19.99");
    let id = order_id_of(&v);

    let got = h.get(&format!("/v1/orders/{id}"));
    assert!(text(&got).contains("19.99"), "{}", text(&got));
    assert_eq!(got.json()["order"]["price_amount"].to_string(), "19.99");

    let list = h.get("/v1/orders");
    assert!(text(&list).contains("19.99"), "{}", text(&list));
    assert_eq!(list.json()["orders"][0]["amount"].to_string(), "19.99");
}

#[test]
fn numeric_string_amount_is_accepted_and_rendered_as_a_number() {
    let h = harness();
    let resp = h.post_raw(r#"{"currency":"USD","amount":"19.99"}"#);
    assert_eq!(resp.status, 201, "{}", text(&resp));
    let v = resp.json();
    assert!(v["data"]["amount"].is_number(), "amount must render as a JSON number: {v}");
    assert_eq!(v["data"]["amount"].to_string(), "19.99");
}

#[test]
fn amount_rules() {
    let h = harness();
    let bad: Vec<(&str, Value)> = vec![
        ("missing", json!({"currency": "USD"})),
        ("null", json!({"currency": "USD", "amount": null})),
        ("zero", json!({"currency": "USD", "amount": 0})),
        ("zero decimal", json!({"currency": "USD", "amount": 0.00})),
        ("negative", json!({"currency": "USD", "amount": -5})),
        ("negative small", json!({"currency": "USD", "amount": -0.01})),
        ("above 1e12", json!({"currency": "USD", "amount": 1_000_000_000_001_i64})),
        ("above 1e12 by a cent", json!({"currency": "USD", "amount": "1000000000000.01"})),
        ("non-numeric string", json!({"currency": "USD", "amount": "abc"})),
        ("empty string", json!({"currency": "USD", "amount": ""})),
        ("NaN string", json!({"currency": "USD", "amount": "NaN"})),
        ("Infinity string", json!({"currency": "USD", "amount": "Infinity"})),
        ("boolean", json!({"currency": "USD", "amount": true})),
        ("array", json!({"currency": "USD", "amount": [1]})),
        ("object", json!({"currency": "USD", "amount": {"v": 1}})),
        ("USD 3 decimals", json!({"currency": "USD", "amount": 19.999})),
        ("USD 3 decimals string", json!({"currency": "USD", "amount": "19.999"})),
        ("JPY decimals", json!({"currency": "JPY", "amount": 100.5})),
        ("KWD 4 decimals", json!({"currency": "KWD", "amount": 1.2345})),
        ("NGN 3 decimals", json!({"currency": "NGN", "amount": 1.005})),
    ];
    for (case, body) in bad {
        let resp = h.post(&body);
        assert_eq!(resp.status, 400, "{case}: {}", text(&resp));
        assert_invalid(&resp, "amount");
    }
    // A huge exponent is not an amount either.
    assert_invalid(&h.post_raw(r#"{"currency":"USD","amount":1e400}"#), "amount");

    let good: Vec<(Value, &str)> = vec![
        (json!({"currency": "USD", "amount": 1_000_000_000_000_i64}), "1000000000000"),
        (json!({"currency": "USD", "amount": 0.01}), "0.01"),
        (json!({"currency": "JPY", "amount": 100}), "100"),
        (json!({"currency": "KWD", "amount": 1.234}), "1.234"),
        (json!({"currency": "NGN", "amount": 1.05}), "1.05"),
        (json!({"currency": "EUR", "amount": "250.5"}), "250.5"),
    ];
    for (body, rendered) in good {
        let v = h.create(&body);
        assert_eq!(v["data"]["amount"].to_string(), rendered, "{body}");
        assert_eq!(v["data"]["currency"], body["currency"]);
    }
    let resp = h.post_raw(r#"{"currency":"USD","amount":1e2}"#);
    assert_eq!(resp.status, 201, "1e2 is a JSON number: {}", text(&resp));
    assert_eq!(number_as_f64(&resp.json()["data"]["amount"]), 100.0);
}

#[test]
fn currency_rules() {
    let h = harness();
    for body in [
        json!({"amount": 10}),
        json!({"currency": null, "amount": 10}),
        json!({"currency": "", "amount": 10}),
        json!({"currency": "usd", "amount": 10}),
        json!({"currency": "Usd", "amount": 10}),
        json!({"currency": "ABC", "amount": 10}),
        json!({"currency": "US", "amount": 10}),
        json!({"currency": "USDT", "amount": 10}),
        json!({"currency": 840, "amount": 10}),
    ] {
        let resp = h.post(&body);
        assert_eq!(resp.status, 400, "{body}: {}", text(&resp));
        assert_invalid(&resp, "currency");
    }
}

// ---------------------------------------------------------------- text limits

#[test]
fn title_limit_is_200_unicode_characters() {
    let h = harness();
    for unit in ["a", "é", "日", "😀"] {
        let ok = unit.repeat(200);
        let v = h.create(&json!({"currency": "USD", "amount": 1, "title": ok}));
        assert_eq!(string(&v["data"], "title"), ok, "title round-trips ({unit})");

        let resp = h.post(&json!({"currency": "USD", "amount": 1, "title": unit.repeat(201)}));
        let msg = assert_field_error(&resp, "API_LIMIT_EXCEEDED", "title");
        assert_eq!(msg, "title: at most 200 characters");
    }
}

#[test]
fn description_limit_is_800_unicode_characters() {
    let h = harness();
    for unit in ["a", "é"] {
        let ok = unit.repeat(800);
        let v = h.create(&json!({"currency": "USD", "amount": 1, "description": ok}));
        assert_eq!(string(&v["data"], "description"), ok);

        let resp = h.post(&json!({"currency": "USD", "amount": 1, "description": unit.repeat(801)}));
        let msg = assert_field_error(&resp, "API_LIMIT_EXCEEDED", "description");
        assert_eq!(msg, "description: at most 800 characters");
    }
}

#[test]
fn title_and_description_must_be_strings() {
    let h = harness();
    for field in ["title", "description"] {
        for value in [json!(5), json!(true), json!(["x"]), json!({"x": 1})] {
            let mut body = minimal_order();
            body[field] = value;
            assert_invalid(&h.post(&body), field);
        }
    }
}

#[test]
fn a_nul_character_is_refused_in_texts_and_urls_on_every_backend() {
    // PostgreSQL's TEXT cannot hold U+0000: accepted, such an order was a 201 on SQLite
    // and a 500 on PostgreSQL. Other control characters stay fine in texts.
    let h = harness();
    for field in ["title", "description"] {
        let mut body = minimal_order();
        body[field] = json!("a\u{0}b");
        let msg = assert_field_error(&h.post(&body), "PARAMETERS_MISSING", field);
        assert_eq!(msg, format!("{field}: must not contain the NUL character (U+0000)"));
        body[field] = json!("line one\nline two\ttabbed");
        assert_eq!(string(&h.create(&body)["data"], field), "line one\nline two\ttabbed");
    }
    for field in ["callback_url", "webhook_url", "success_url", "cancel_url"] {
        for url in ["https://shop.example/\u{0}", "https://shop.example/a\tb", "https://shop.example/\n"] {
            let mut body = minimal_order();
            body[field] = json!(url);
            let msg = assert_field_error(&h.post(&body), "PARAMETERS_MISSING", field);
            assert_eq!(msg, format!("{field}: must not contain control characters"), "{url:?}");
        }
    }
    let orders = h.get("/v1/orders?limit=50");
    assert_eq!(orders.json()["orders"].as_array().map(Vec::len), Some(2), "only the two good orders were stored");
}

#[test]
fn merchant_order_id_rules() {
    let h = harness();
    let ok = "m".repeat(128);
    let v = h.create(&json!({"currency": "USD", "amount": 1, "merchant_order_id": ok}));
    assert_eq!(string(&v["data"], "merchant_order_id"), ok);
    let v = h.create(&json!({"currency": "USD", "amount": 1, "merchant_order_id": "Bestellung-ü-1"}));
    assert_eq!(string(&v["data"], "merchant_order_id"), "Bestellung-ü-1");

    for value in [
        json!(""),
        json!("m".repeat(129)),
        json!("a\u{0007}b"),
        json!("a\nb"),
        json!("tab\there"),
        json!(123),
        json!(true),
    ] {
        let resp = h.post(&json!({"currency": "USD", "amount": 1, "merchant_order_id": value}));
        assert_eq!(resp.status, 400, "{value}: {}", text(&resp));
        assert_invalid(&resp, "merchant_order_id");
    }
}

// ---------------------------------------------------------------- URLs, e-mail, coin

#[test]
fn url_fields_must_be_absolute_http_urls_of_at_most_2048_chars() {
    let h = harness();
    let prefix = "https://example.com/";
    let exactly_2048 = format!("{prefix}{}", "a".repeat(2048 - prefix.len()));
    let too_long = format!("{exactly_2048}a");
    assert_eq!(exactly_2048.chars().count(), 2048);

    for field in ["callback_url", "webhook_url", "success_url", "cancel_url"] {
        let mut body = minimal_order();
        body[field] = json!(exactly_2048);
        let resp = h.post(&body);
        assert_eq!(resp.status, 201, "{field} of 2048 chars: {}", text(&resp));

        let mut body = minimal_order();
        body[field] = json!("http://example.com/x");
        assert_eq!(h.post(&body).status, 201, "{field}: plain http is allowed");

        for bad in [
            json!("ftp://example.com/file"),
            json!("javascript:alert(1)"),
            json!("mailto:shop@example.com"),
            json!("/relative/path"),
            json!("example.com/no-scheme"),
            json!("https://"),
            json!(""),
            json!(too_long),
            json!(42),
            // The parser mends these into another URL than the text reads as.
            json!("https:///shop.example/x"),
            json!("http:shop.example"),
            json!("https:\\\\evil.example"),
            json!("https://shop.example\\@evil.example/"),
            json!(" https://shop.example/"),
            json!("https://shop.example/ "),
            json!("https://shop.example/\u{a0}"),
            // Nothing listens on port 0: a message sent there could never arrive.
            json!("https://shop.example:0/hook"),
            json!("http://shop.example:00/hook"),
        ] {
            let mut body = minimal_order();
            body[field] = bad.clone();
            let resp = h.post(&body);
            assert_eq!(resp.status, 400, "{field}={bad}: {}", text(&resp));
            assert_invalid(&resp, field);
        }
    }
}

#[test]
fn a_url_the_browser_is_sent_to_carries_no_credentials() {
    // The payment page shows where it sends the customer to anyone holding its link; a
    // webhook URL, which only the service reads, may carry them.
    let h = harness();
    for field in ["callback_url", "success_url", "cancel_url"] {
        for url in ["https://user:pw@shop.example/done", "https://user@shop.example/done"] {
            let mut body = minimal_order();
            body[field] = json!(url);
            let msg = assert_field_error(&h.post(&body), "PARAMETERS_MISSING", field);
            assert_eq!(
                msg,
                format!("{field}: must not carry a user name or password (the customer's browser sees it)")
            );
        }
    }
    let mut body = minimal_order();
    body["webhook_url"] = json!("https://user:pw@shop.example/hook");
    assert_eq!(h.post(&body).status, 201);
}

#[test]
fn customer_email_rules() {
    let h = harness();
    let v = h.create(&json!({"currency": "USD", "amount": 1, "customer_email": "buyer@example.com"}));
    assert!(v["data"].get("customer_email").is_none(), "not a §2.2 field");

    let long_local = format!("{}@example.com", "a".repeat(243));
    assert_eq!(long_local.len(), 255);
    for bad in [
        json!("not-an-email"),
        json!("a@"),
        json!("@example.com"),
        json!("two@@example.com"),
        json!("Buyer <buyer@example.com>"),
        json!(long_local),
        json!(""),
        json!(7),
        // Valid RFC 5322, but the mailer cannot send to them: refused now, not retried
        // for days.
        json!("\"a b\"@example.com"),
        json!("\"a@evil.example\"@example.com"),
    ] {
        let resp = h.post(&json!({"currency": "USD", "amount": 1, "customer_email": bad}));
        assert_eq!(resp.status, 400, "{bad}: {}", text(&resp));
        assert_invalid(&resp, "customer_email");
    }
    for good in ["o'brien+shop@example.com", "first.last@mail.example.co.uk", "x@example.museum"] {
        let resp = h.post(&json!({"currency": "USD", "amount": 1, "customer_email": good}));
        assert_eq!(resp.status, 201, "{good}: {}", text(&resp));
    }
}

#[test]
fn pay_currency_must_be_a_configured_coin() {
    let h = harness();
    for bad in [json!("DOGE"), json!("USD"), json!(""), json!(1)] {
        let resp = h.post(&json!({"currency": "USD", "amount": 1, "pay_currency": bad}));
        assert_eq!(resp.status, 400, "{bad}: {}", text(&resp));
        assert_invalid(&resp, "pay_currency");
    }
    // A coin the library knows but the service was not configured for is refused too.
    let h = harness_with(Environment::Sandbox, |c| {
        c.pay_currencies = vec!["USDT".to_string()];
        c.default_pay_currency = "USDT".to_string();
    });
    let resp = h.post(&json!({"currency": "USD", "amount": 1, "pay_currency": "BTC"}));
    assert_invalid(&resp, "pay_currency");
}

// ---------------------------------------------------------------- body

#[test]
fn body_must_be_a_json_object() {
    let h = harness();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", b"".to_vec()),
        ("not JSON", b"currency=USD&amount=10".to_vec()),
        ("truncated", br#"{"currency":"USD","amount":10"#.to_vec()),
        ("array", br#"[{"currency":"USD","amount":10}]"#.to_vec()),
        ("string", br#""hello""#.to_vec()),
        ("number", b"10".to_vec()),
        ("null", b"null".to_vec()),
        ("trailing garbage", br#"{"currency":"USD","amount":10} x"#.to_vec()),
        ("a bad member name", b"{\"curr\xffency\":\"USD\",\"amount\":10}".to_vec()),
        ("an unclosed object", br#"{"currency":"USD","amount":10"#.to_vec()),
        ("a missing comma", br#"{"currency":"USD" "amount":10}"#.to_vec()),
        ("a missing comma, no space", br#"{"currency":"USD""amount":10}"#.to_vec()),
        ("a missing comma after a number", br#"{"amount":10 "currency":"USD"}"#.to_vec()),
        ("a missing comma after an object", br#"{"meta":{} "currency":"USD"}"#.to_vec()),
    ];
    for (case, body) in cases {
        let resp = h.post_raw(body);
        assert_eq!(resp.status, 400, "{case}: {}", text(&resp));
        assert_invalid(&resp, "body");
    }
    // JSON of another shape is told so; text that is not JSON, where it stops being JSON.
    let resp = h.post_raw(b"[1]".to_vec());
    assert_eq!(resp.json()["error"], "body: must be a JSON object");
    let resp = h.post_raw(br#"{"currency":"USD" "amount":10}"#.to_vec());
    let message = resp.json()["error"].as_str().unwrap_or_default().to_string();
    assert!(message.starts_with("body: must be a JSON object (not valid JSON: "), "{message}");
    // Text that stops being JSON inside a member's value names that member.
    let named = [
        (br#"{"currency":"USD","amount":10,"title":"\ud800"}"#.to_vec(), "title", "hex escape at line 1 column "),
        (br#"{"currency":"USD","amount": 01}"#.to_vec(), "amount", "invalid number at line 1 column 30"),
        (b"{\"currency\":\"USD\",\n \"amount\": .5}".to_vec(), "amount", "at line 2 column 12"),
        (br#"{"currency":"USD","amount":+1}"#.to_vec(), "amount", "line 1 column 28"),
        (b"{\"currency\":\"\xff\xfe\",\"amount\":10}".to_vec(), "currency", "invalid unicode code point"),
        (br#"{"amount":10,"meta":{"a":[1,2,}]},"currency":"USD"}"#.to_vec(), "meta", "line 1 column"),
    ];
    for (body, member, detail) in named {
        let resp = h.post_raw(body.clone());
        assert_eq!(resp.status, 400, "{}", String::from_utf8_lossy(&body));
        assert_invalid(&resp, member);
        let message = resp.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(message.starts_with(&format!("{member}: is not valid JSON (")), "{message}");
        assert!(message.contains(detail), "{message}");
    }
    // Valid JSON nested deeper than the parser reads is told so, not called invalid.
    let nested =
        |levels: usize| format!(r#"{{"currency":"USD","amount":1,"x":{}{}}}"#, "[".repeat(levels), "]".repeat(levels));
    assert_eq!(h.post_raw(nested(126).into_bytes()).status, 201);
    let resp = h.post_raw(nested(127).into_bytes());
    assert_eq!(
        resp.json()["error"],
        "x: is nested too deep: at most 127 levels of arrays and objects, the body's own included"
    );
}

/// A valid order body of exactly `len` bytes (padded with an unknown member).
fn padded_body(len: usize) -> Vec<u8> {
    let head = r#"{"currency":"USD","amount":10,"pad":""#;
    let tail = r#""}"#;
    let pad = len - head.len() - tail.len();
    let body = format!("{head}{}{tail}", "x".repeat(pad));
    assert_eq!(body.len(), len);
    body.into_bytes()
}

#[test]
fn body_is_limited_to_64_kib() {
    let h = harness();
    let resp = h.post_raw(padded_body(64 * 1024));
    assert_eq!(resp.status, 201, "a body of exactly 64 KiB is allowed: {}", text(&resp));
    let resp = h.post_raw(padded_body(64 * 1024 + 1));
    assert_invalid(&resp, "body");
    let resp = h.post_raw(padded_body(1024 * 1024));
    assert_invalid(&resp, "body");
    assert_eq!(list_all(&h.svc, &h.key).len(), 1, "oversized bodies store nothing");
}

#[test]
fn unknown_fields_are_ignored() {
    let h = harness();
    let v = h.create(&json!({
        "currency": "USD",
        "amount": 5,
        "foo": "bar",
        "metadata": {"note": 1},
        "apiKey": "whatever",
        "status": "PAID",
        "order_id": "00000000-0000-4000-8000-000000000000",
        "user_id": 999
    }));
    let data = &v["data"];
    assert_eq!(keys_of(data), sorted(CREATE_DATA_FIELDS));
    assert_eq!(string(data, "status"), "NEW", "status cannot be injected");
    assert_eq!(int(data, "user_id"), h.user_id, "user_id cannot be injected");
    assert_ne!(string(data, "order_id"), "00000000-0000-4000-8000-000000000000");
}

/// A member the request reads, sent twice, is refused naming it: which price was meant is
/// anyone's guess. Repeated members it ignores stay ignored.
#[test]
fn a_field_sent_twice_is_refused() {
    let h = harness();
    for (body, field) in [
        (r#"{"currency":"USD","amount":1,"amount":100}"#, "amount"),
        (r#"{"currency":"USD","currency":"EUR","amount":1}"#, "currency"),
        (r#"{"currency":"USD","amount":1,"merchant_order_id":"a","merchant_order_id":"a"}"#, "merchant_order_id"),
    ] {
        let resp = h.post_raw(body.as_bytes().to_vec());
        let message = assert_invalid(&resp, field);
        assert!(message.ends_with("sent more than once"), "{body}: {message}");
    }
    assert!(list_all(&h.svc, &h.key).is_empty());
    let resp = h.post_raw(br#"{"currency":"USD","amount":5,"foo":1,"foo":2}"#.to_vec());
    assert_eq!(resp.status, 201, "{}", String::from_utf8_lossy(&resp.body));
}

#[test]
fn validation_failures_store_nothing() {
    let h = harness();
    assert_eq!(h.post(&json!({"currency": "usd", "amount": 1})).status, 400);
    assert_eq!(h.post(&json!({"currency": "USD", "amount": 0})).status, 400);
    assert_eq!(h.post(&json!({"currency": "USD", "amount": 1, "title": "x".repeat(201)})).status, 400);
    assert!(list_all(&h.svc, &h.key).is_empty());
}

// ---------------------------------------------------------------- idempotency

#[test]
fn identical_retry_replays_the_original_201() {
    let h = harness();
    let body = br#"{"merchant_order_id":"cart-77","currency":"USD","amount":19.99,"title":"Cart 77"}"#;
    let first = h.post_raw(body.to_vec());
    assert_eq!(first.status, 201, "{}", text(&first));
    h.clock.advance_ms(5_000);
    let second = h.post_raw(body.to_vec());
    assert_eq!(second.status, 201, "replay: {}", text(&second));
    assert_eq!(second.json(), first.json(), "replay must return the original body");
    assert_eq!(second.body, first.body, "replay must be byte-identical");

    let all = list_all(&h.svc, &h.key);
    assert_eq!(all.len(), 1, "a replay creates nothing");
    assert_eq!(ids(&all), vec![order_id_of(&first.json())]);
}

#[test]
fn same_merchant_order_id_with_a_different_body_is_order_duplicate() {
    let h = harness();
    let original = h.create(&json!({"merchant_order_id": "cart-1", "currency": "USD", "amount": 10}));
    for body in [
        json!({"merchant_order_id": "cart-1", "currency": "USD", "amount": 11}),
        json!({"merchant_order_id": "cart-1", "currency": "EUR", "amount": 10}),
        json!({"merchant_order_id": "cart-1", "currency": "USD", "amount": 10, "title": "x"}),
    ] {
        let resp = h.post(&body);
        assert_field_error(&resp, "ORDER_DUPLICATE", "merchant_order_id");
    }
    let all = list_all(&h.svc, &h.key);
    assert_eq!(ids(&all), vec![order_id_of(&original)]);
    assert_eq!(all[0]["amount"].to_string(), "10", "original untouched");
}

#[test]
fn a_generated_merchant_order_id_sent_back_is_order_duplicate_never_a_replay() {
    // A create without merchant_order_id keeps no 201 body for replays: no retry can
    // match its fingerprint, not even one naming the id it was given.
    let h = harness();
    let body = json!({"currency": "USD", "amount": 10, "title": "t"});
    let original = h.create(&body);
    let generated = original["data"]["merchant_order_id"].clone();
    let resp = h.post(&json!({"merchant_order_id": generated, "currency": "USD", "amount": 10, "title": "t"}));
    assert_field_error(&resp, "ORDER_DUPLICATE", "merchant_order_id");
    assert_eq!(ids(&list_all(&h.svc, &h.key)), vec![order_id_of(&original)]);
}

#[test]
fn merchant_order_id_uniqueness_is_per_user_and_environment() {
    let h = harness();
    let body = json!({"merchant_order_id": "shared-ref", "currency": "USD", "amount": 10});
    let mine = h.create(&body);
    let (other_key, _) = h.new_key(7, Environment::Sandbox);
    let theirs = create_ok(&h.svc, &other_key, &body);
    assert_ne!(
        order_id_of(&mine),
        order_id_of(&theirs),
        "another merchant may use the same merchant_order_id for its own order"
    );
    assert_eq!(int(&theirs["data"], "user_id"), 7);
}

#[test]
fn another_key_of_the_same_merchant_sees_its_orders() {
    let h = harness();
    let created = h.create(&minimal_order());
    let (second_key, _) = h.new_key(h.user_id, Environment::Sandbox);
    let resp = get(&h.svc, &second_key, &format!("/v1/orders/{}", order_id_of(&created)));
    assert_eq!(resp.status, 200, "orders belong to the merchant account, not the key: {}", text(&resp));
    assert_eq!(ids(&list_all(&h.svc, &second_key)), vec![order_id_of(&created)]);
}

#[test]
fn a_pair_without_a_rate_is_parameters_missing_naming_the_field_sent() {
    // Live has no built-in rates (DESIGN §6): the message names the field the merchant
    // chose, the fiat currency unless they picked the coin.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = coinorder::Config::new(coinorder::Environment::Live);
    config.rate_limit = coinorder::RateLimit::OFF;
    let svc = coinorder::Service::open(dir.path().join("live.db"), config).expect("open");
    let key = svc
        .create_key(coinorder::NewApiKey { user_id: 1, environment: coinorder::Environment::Live, webhook_url: None })
        .expect("key");
    let post = |body: serde_json::Value| {
        svc.handle(
            &WireRequest::new("POST", "/v1/orders").header("x-api-key", key.plain_key.expose()).body(body.to_string()),
        )
    };
    let msg = assert_error(&post(json!({"currency": "MXN", "amount": 10})), 400, "PARAMETERS_MISSING");
    assert!(msg.starts_with("currency: ") && msg.contains("USDT/MXN"), "{msg}");
    let msg =
        assert_error(&post(json!({"currency": "MXN", "amount": 10, "pay_currency": "BTC"})), 400, "PARAMETERS_MISSING");
    assert!(msg.starts_with("pay_currency: ") && msg.contains("BTC/MXN"), "{msg}");
    assert!(svc.list_keys().expect("keys").len() == 1);
}

#[test]
fn an_order_id_in_another_uuid_form_finds_the_order() {
    let h = harness();
    let created = h.create(&minimal_order());
    let id = created["data"]["order_id"].as_str().expect("order_id").to_string();
    for form in [id.to_uppercase(), id.replace('-', "")] {
        let resp = h.get(&format!("/v1/orders/{form}"));
        assert_eq!(resp.status, 200, "{form}: {}", text(&resp));
        assert_eq!(resp.json()["order"]["order_id"], id.as_str(), "the canonical id is returned");
    }
}

#[test]
fn customer_email_with_an_ip_literal_domain_is_refused() {
    let h = harness();
    let mut body = minimal_order();
    body["customer_email"] = json!("a@[127.0.0.1]");
    let msg = assert_error(&h.post(&body), 400, "PARAMETERS_MISSING");
    assert!(msg.starts_with("customer_email: "), "{msg}");
}

// ---------------------------------------------------------------- another process holds the write lock

#[test]
fn reads_go_on_and_writes_answer_503_while_another_process_holds_the_write_lock_and_key_uses_wait() {
    // A read that waited for the lock would take the whole busy timeout: 2 s, far above
    // the 1 s the reads are given below however loaded the machine running the tests.
    let h = harness_with(coinorder::Environment::Sandbox, |config| {
        config.busy_timeout = std::time::Duration::from_secs(2);
    });
    let created = h.create(&minimal_order());
    let order_id = created["data"]["order_id"].as_str().expect("order id").to_string();
    // A fresh key: its first use is written down (last_used), which must not wait.
    let (key, key_id) = h.new_key(7, coinorder::Environment::Sandbox);
    let mut holder = RawDb::open(&h.db());
    holder.hold_write_lock();

    let started = std::time::Instant::now();
    assert_eq!(get(&h.svc, &key, "/v1/orders").status, 200);
    assert_eq!(h.get(&format!("/v1/orders/{order_id}")).status, 200);
    assert!(started.elapsed() < std::time::Duration::from_secs(1), "reads waited {:?}", started.elapsed());

    let refused = h.post(&minimal_order());
    assert_error(&refused, 503, "ServiceUnavailable");
    assert_eq!(refused.header_value("retry-after"), Some("1"));
    assert!(!text(&refused).contains("locked"), "no internals leak: {}", text(&refused));
    // SQLite: "database is locked"; PostgreSQL: "canceling statement due to lock timeout".
    assert!(refused.internal_detail.as_deref().unwrap_or("").contains("lock"), "{:?}", refused.internal_detail);

    holder.batch("ROLLBACK");
    // The fresh key's use could not be written while the lock was held; it was kept,
    // not lost, and is written once the writer is free.
    let last_used = |svc: &coinorder::Service| {
        let keys = svc.list_keys().expect("keys");
        keys.into_iter().find(|k| k.id == key_id).expect("the fresh key").last_used_at_ms
    };
    if !common::backend::on_postgres() {
        // SQLite's lock keeps every writer out; PostgreSQL's holder locks only `orders`,
        // so there the key's row was written at once.
        assert_eq!(last_used(&h.svc), None, "not written while the lock was held");
    }
    h.svc.record_key_uses().expect("record key uses");
    assert!(last_used(&h.svc).is_some(), "written once the writer was free");
    assert_eq!(h.post(&minimal_order()).status, 201);
}

#[test]
fn a_key_use_kept_while_the_writer_was_busy_is_written_when_the_service_is_dropped() {
    if common::backend::on_postgres() {
        // PostgreSQL's lock holder locks only `orders`: the key's use is written at once
        // there, so nothing is kept for the drop to write.
        return;
    }
    let h = harness_with(coinorder::Environment::Sandbox, |config| {
        config.busy_timeout = std::time::Duration::from_millis(300);
    });
    let (key, key_id) = h.new_key(7, coinorder::Environment::Sandbox);
    let mut holder = RawDb::open(&h.db());
    holder.hold_write_lock();
    assert_eq!(get(&h.svc, &key, "/v1/orders").status, 200);
    holder.batch("ROLLBACK");

    let common::Harness { dir, clock, svc, .. } = h;
    let kept = svc.list_keys().expect("keys").into_iter().find(|k| k.id == key_id).expect("the fresh key");
    assert_eq!(kept.last_used_at_ms, None, "not written while the lock was held");
    drop(svc);
    let reopened =
        coinorder::Service::open(common::db_path(&dir), common::config(coinorder::Environment::Sandbox, &clock))
            .expect("reopen");
    let written = reopened.list_keys().expect("keys").into_iter().find(|k| k.id == key_id).expect("the fresh key");
    assert_eq!(written.last_used_at_ms.map(|at| at.as_millis()), Some(common::T0_MS), "the drop wrote the kept use");
}

#[test]
fn a_method_in_any_case_is_the_same_method() {
    let h = harness();
    let id = order_id_of(&h.create(&json!({"currency": "USD", "amount": 10})));
    let upper = h.get(&format!("/v1/orders/{id}"));
    for method in ["get", "Get", "gEt"] {
        let request = WireRequest::new(method, &format!("/v1/orders/{id}")).header("x-api-key", &h.key);
        let response = h.svc.handle(&request);
        assert_eq!(response.status, 200, "{method}: {}", text(&response));
        assert_eq!(response.body, upper.body, "{method}");
    }
    let created = h.svc.handle(
        &WireRequest::new("post", "/v1/orders").header("x-api-key", &h.key).body(r#"{"currency":"USD","amount":1}"#),
    );
    assert_eq!(created.status, 201, "{}", text(&created));
    let refused = h.svc.handle(&WireRequest::new("delete", &format!("/v1/orders/{id}")).header("x-api-key", &h.key));
    assert_eq!(refused.status, 404, "{}", text(&refused));
}

#[test]
fn a_byte_order_mark_before_the_body_is_ignored_and_a_fragment_is_not_part_of_the_path() {
    let h = harness();
    let mut body = b"\xEF\xBB\xBF".to_vec();
    body.extend_from_slice(br#"{"currency":"USD","amount":"12.50","merchant_order_id":"bom-1"}"#);
    let resp = h.post_raw(body);
    assert_eq!(resp.status, 201, "{}", text(&resp));
    let created = resp.json();
    assert_eq!(created["data"]["amount"].to_string(), "12.5");
    // Only a leading mark: one anywhere else is not JSON.
    let resp =
        h.post_raw(br#"{"currency":"USD","amount":1}"#.iter().chain(b"\xEF\xBB\xBF").copied().collect::<Vec<u8>>());
    assert_invalid(&resp, "body");

    let order_id = order_id_of(&created);
    for path in [format!("/v1/orders/{order_id}#top"), format!("/v1/orders/{order_id}#")] {
        let resp = h.get(&path);
        assert_eq!(resp.status, 200, "{path}: {}", text(&resp));
        assert_eq!(string(&resp.json()["order"], "order_id"), order_id);
    }
    let resp = h.get("/v1/orders?limit=1#page");
    assert_eq!(resp.status, 200, "{}", text(&resp));
    assert_eq!(resp.json()["orders"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_merchant_order_id_padded_with_spaces_is_refused() {
    let h = harness();
    for id in [" ", "   ", "cart-7 ", " cart-7"] {
        let resp = h.post(&json!({"currency": "USD", "amount": 5, "merchant_order_id": id}));
        let message = assert_invalid(&resp, "merchant_order_id");
        assert_eq!(message, "merchant_order_id: must not begin or end with a space", "{id:?}");
    }
    // A space inside is part of the reference.
    let resp = h.post(&json!({"currency": "USD", "amount": 5, "merchant_order_id": "cart 7"}));
    assert_eq!(resp.status, 201, "{}", text(&resp));
}
