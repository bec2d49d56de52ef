//! Acceptance tests for Get Orders (`GET /v1/orders`) through `Service::handle`: the
//! §2.5 item shape, limit/offset/status rules (DESIGN §4), and newest-first ordering
//! with the order_id tie-break (DESIGN §5).

mod common;

use common::*;
use serde_json::{json, Value};

const LIST_ITEM_FIELDS: &[&str] = &[
    "order_id",
    "user_id",
    "merchant_order_id",
    "title",
    "description",
    "callback_url",
    "amount",
    "currency",
    "receive_currency",
    "status",
    "created_at",
    "updated_at",
    "deleted",
];

const ALLOWED_TOP_LEVEL: &[&str] = &["status", "orders", "limit", "offset", "has_more"];

/// GETs a list page and checks the envelope; returns the orders.
fn page(h: &Harness, query: &str) -> (Value, Vec<Value>) {
    let resp = h.get(&format!("/v1/orders{query}"));
    assert_eq!(resp.status, 200, "GET /v1/orders{query}: {}", text(&resp));
    assert_json_content_type(&resp);
    let v = resp.json();
    assert_eq!(int(&v, "status"), 200);
    for key in keys_of(&v) {
        assert!(ALLOWED_TOP_LEVEL.contains(&key.as_str()), "unexpected top-level member {key}: {v}");
    }
    let orders = v["orders"].as_array().unwrap_or_else(|| panic!("orders must be an array: {v}")).clone();
    (v, orders)
}

/// Creates `n` orders one millisecond apart; returns their ids oldest first.
fn create_spaced(h: &Harness, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            h.clock.advance_ms(1);
            let v = h.create(&json!({"currency": "USD", "amount": i + 1}));
            string(&v["data"], "order_id").to_string()
        })
        .collect()
}

#[test]
fn list_items_have_exactly_the_spec_fields_and_types() {
    let h = harness();
    let plain = h.create(&json!({"currency": "USD", "amount": 19.99, "webhook_url": "https://example.com/h"}));
    h.clock.advance_ms(1);
    let with_urls = h.create(&json!({
        "currency": "EUR", "amount": 5, "title": "T", "description": "D",
        "callback_url": "https://example.com/cb",
        "success_url": "https://example.com/ok",
        "cancel_url": "https://example.com/no"
    }));
    let (_, orders) = page(&h, "");
    assert_eq!(orders.len(), 2);

    let newest = &orders[0];
    assert_eq!(newest["order_id"], with_urls["data"]["order_id"]);
    let mut fields = LIST_ITEM_FIELDS.to_vec();
    fields.extend(["cancel_url", "success_url"]);
    assert_eq!(keys_of(newest), sorted(&fields));
    assert_eq!(string(newest, "cancel_url"), "https://example.com/no");
    assert_eq!(string(newest, "success_url"), "https://example.com/ok");
    assert_eq!(string(newest, "title"), "T");
    assert_eq!(string(newest, "description"), "D");
    assert_eq!(string(newest, "callback_url"), "https://example.com/cb");
    assert_eq!(string(newest, "currency"), "EUR");
    assert_eq!(newest["amount"].to_string(), "5");
    assert_eq!(string(newest, "created_at"), iso_from_ms(T0_MS + 1));

    let oldest = &orders[1];
    assert_eq!(oldest["order_id"], plain["data"]["order_id"]);
    assert_eq!(keys_of(oldest), sorted(LIST_ITEM_FIELDS), "no apiKey, no webhook_url, cancel/success only when set");
    assert_eq!(int(oldest, "user_id"), h.user_id);
    assert_eq!(oldest["merchant_order_id"], plain["data"]["merchant_order_id"]);
    assert!(oldest["title"].is_null() && oldest["description"].is_null());
    assert!(oldest["callback_url"].is_null());
    assert!(oldest["amount"].is_number());
    assert_eq!(oldest["amount"].to_string(), "19.99");
    assert_eq!(string(oldest, "currency"), "USD");
    assert_eq!(string(oldest, "receive_currency"), "");
    assert_eq!(string(oldest, "status"), "NEW");
    assert_eq!(string(oldest, "created_at"), T0_ISO);
    assert_eq!(string(oldest, "updated_at"), T0_ISO);
    assert_eq!(int(oldest, "deleted"), 0);
    assert_eq!(oldest["deleted"].to_string(), "0");
}

#[test]
fn empty_list_for_a_new_merchant() {
    let h = harness();
    let (_, orders) = page(&h, "");
    assert!(orders.is_empty());
}

#[test]
fn limit_and_offset_paging() {
    let h = harness();
    let created = create_spaced(&h, 55);
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();

    let (v, orders) = page(&h, "");
    assert_eq!(ids(&orders), newest_first[..10], "default limit 10");
    if let Some(has_more) = v.get("has_more") {
        assert_eq!(has_more.as_bool(), Some(true));
    }

    let (_, orders) = page(&h, "?limit=1");
    assert_eq!(ids(&orders), newest_first[..1]);

    let (v, orders) = page(&h, "?limit=50");
    assert_eq!(ids(&orders), newest_first[..50]);
    if let Some(limit) = v.get("limit") {
        assert_eq!(limit.as_i64(), Some(50));
    }

    let (v, orders) = page(&h, "?limit=50&offset=50");
    assert_eq!(ids(&orders), newest_first[50..]);
    if let Some(has_more) = v.get("has_more") {
        assert_eq!(has_more.as_bool(), Some(false));
    }
    if let Some(offset) = v.get("offset") {
        assert_eq!(offset.as_i64(), Some(50));
    }

    let (_, orders) = page(&h, "?offset=3&limit=4");
    assert_eq!(ids(&orders), newest_first[3..7], "offset is the index of the first item");

    let (_, orders) = page(&h, "?offset=54");
    assert_eq!(ids(&orders), newest_first[54..]);

    for past_end in ["?offset=55", "?offset=56", "?offset=1000&limit=50"] {
        let (v, orders) = page(&h, past_end);
        assert!(orders.is_empty(), "{past_end}: {v}");
    }

    assert_eq!(ids(&list_all(&h.svc, &h.key)), newest_first);
}

#[test]
fn limit_rules() {
    let h = harness();
    create_spaced(&h, 3);
    assert_field_error(&h.get("/v1/orders?limit=51"), "API_LIMIT_EXCEEDED", "limit");
    assert_field_error(&h.get("/v1/orders?limit=1000"), "API_LIMIT_EXCEEDED", "limit");
    for bad in ["0", "-1", "abc", "1.5", "1e1", "", "%20", "10abc", "%2B5", "+5"] {
        let resp = h.get(&format!("/v1/orders?limit={bad}"));
        assert_eq!(resp.status, 400, "limit={bad}: {}", text(&resp));
        assert_invalid(&resp, "limit");
    }
}

#[test]
fn offset_rules() {
    let h = harness();
    create_spaced(&h, 3);
    for bad in ["-1", "abc", "1.5", "", "1e3", "%2B5"] {
        let resp = h.get(&format!("/v1/orders?offset={bad}"));
        assert_eq!(resp.status, 400, "offset={bad}: {}", text(&resp));
        assert_invalid(&resp, "offset");
    }
    // The largest offset SQLite takes is an empty page; past it, the error names that
    // bound rather than a rule the offset meets.
    let last = h.get("/v1/orders?offset=9223372036854775807");
    assert_eq!(last.status, 200, "{}", text(&last));
    assert!(last.json()["orders"].as_array().is_some_and(Vec::is_empty), "{}", text(&last));
    for huge in ["9223372036854775808", "18446744073709551615", "99999999999999999999999"] {
        let resp = h.get(&format!("/v1/orders?offset={huge}"));
        assert_invalid(&resp, "offset");
        assert_eq!(resp.json()["error"], "offset: must be an integer from 0 to 9223372036854775807", "{huge}");
    }
}

#[test]
fn a_parameter_sent_twice_is_refused_not_one_of_them_taken() {
    let h = harness();
    create_spaced(&h, 3);
    for (query, field) in [
        ("limit=1&limit=2", "limit"),
        ("offset=0&offset=1", "offset"),
        ("status=NEW&status=PAID", "status"),
        ("status=NEW&limit=2&status=NEW", "status"),
    ] {
        let resp = h.get(&format!("/v1/orders?{query}"));
        assert_eq!(resp.status, 400, "{query}: {}", text(&resp));
        assert_invalid(&resp, field);
        assert_eq!(resp.json()["error"], format!("{field}: sent more than once"), "{query}");
    }
    // Unknown parameters stay ignored, however often they come.
    let (_, orders) = page(&h, "?utm=a&utm=b&limit=2");
    assert_eq!(orders.len(), 2);
}

#[test]
fn status_filter() {
    let h = harness();
    let created = create_spaced(&h, 3);
    let (_, orders) = page(&h, "?status=NEW");
    assert_eq!(ids(&orders), created.iter().rev().cloned().collect::<Vec<_>>());
    let (_, orders) = page(&h, "?status=NEW&limit=1&offset=1");
    assert_eq!(ids(&orders), vec![created[1].clone()]);
    for other in ["PENDING", "PAID", "EXPIRED", "FAILED", "CANCELLED"] {
        let (v, orders) = page(&h, &format!("?status={other}"));
        assert!(orders.is_empty(), "status={other}: {v}");
    }
    for bad in ["BOGUS", "SUCCESS", "NEW,PAID"] {
        let resp = h.get(&format!("/v1/orders?status={bad}"));
        assert_eq!(resp.status, 400, "status={bad}: {}", text(&resp));
        assert_invalid(&resp, "status");
    }
}

#[test]
fn newest_first_by_created_at_then_order_id_desc() {
    let h = harness();
    let a = string(&h.create(&minimal_order())["data"], "order_id").to_string();
    h.clock.set_ms(T0_MS + 1_000);
    let b = string(&h.create(&minimal_order())["data"], "order_id").to_string();
    h.clock.set_ms(T0_MS + 2_000);
    let c = string(&h.create(&minimal_order())["data"], "order_id").to_string();
    // Created later but dated earlier: ordering is by created_at, not insertion.
    h.clock.set_ms(T0_MS - 1_000);
    let d = string(&h.create(&minimal_order())["data"], "order_id").to_string();
    // Several orders in the same millisecond: order_id DESC breaks the tie, and ids of
    // one millisecond sort as they were made, so these too come newest first.
    h.clock.set_ms(T0_MS + 5_000);
    let mut same: Vec<String> =
        (0..6).map(|_| string(&h.create(&minimal_order())["data"], "order_id").to_string()).collect();
    same.reverse();

    let mut expected = same.clone();
    expected.extend([c, b, a, d]);
    let (_, orders) = page(&h, "?limit=50");
    assert_eq!(ids(&orders), expected);

    // Paging through the tie is stable: two pages of 3 split the tied block in order.
    let (_, first) = page(&h, "?limit=3");
    let (_, second) = page(&h, "?limit=3&offset=3");
    assert_eq!(ids(&first), same[..3]);
    assert_eq!(ids(&second), same[3..]);

    // created_at strings agree with the ordering.
    let stamps: Vec<&str> = orders.iter().map(|o| string(o, "created_at")).collect();
    assert!(stamps.windows(2).all(|w| w[0] >= w[1]), "{stamps:?}");
}

#[test]
fn a_limit_too_large_for_an_integer_is_over_the_limit_not_malformed() {
    let h = harness();
    let resp = h.get("/v1/orders?limit=99999999999999999999");
    let msg = assert_error(&resp, 400, "API_LIMIT_EXCEEDED");
    assert!(msg.starts_with("limit: "), "{msg}");
}
