//! Acceptance tests for authentication, rate limiting, merchant and environment
//! isolation, routing (404) and internal errors (500) through `Service::handle`
//! (DESIGN §3, §5).

mod common;

use std::sync::Arc;

use coinorder::{Environment, ManualClock, RateLimit, Service, WireRequest};
use common::*;
use serde_json::json;

fn order_id_of(created: &serde_json::Value) -> String {
    string(&created["data"], "order_id").to_string()
}

// ---------------------------------------------------------------- authentication

#[test]
fn missing_or_empty_key_is_authentication_failed() {
    let h = harness();
    let body = serde_json::to_vec(&minimal_order()).expect("json");
    let no_header =
        WireRequest::new("POST", "/v1/orders").header("content-type", "application/json").body(body.clone());
    assert_error(&h.svc.handle(&no_header), 400, "AUTHENTICATION_FAILED");
    assert_error(&post_raw(&h.svc, "", body), 400, "AUTHENTICATION_FAILED");
    assert_error(&h.svc.handle(&WireRequest::new("GET", "/v1/orders")), 400, "AUTHENTICATION_FAILED");
    assert_error(&get(&h.svc, "", "/v1/orders"), 400, "AUTHENTICATION_FAILED");
    assert_error(
        &h.svc.handle(&WireRequest::new("GET", "/v1/orders/00000000-0000-4000-8000-000000000000")),
        400,
        "AUTHENTICATION_FAILED",
    );
    assert!(list_all(&h.svc, &h.key).is_empty(), "nothing was created");
}

#[test]
fn authentication_comes_before_body_validation() {
    let h = harness();
    let req =
        WireRequest::new("POST", "/v1/orders").header("content-type", "application/json").body(b"not json".to_vec());
    assert_error(&h.svc.handle(&req), 400, "AUTHENTICATION_FAILED");
    let unknown = format!("test_{}", "A".repeat(40));
    assert_error(&post_raw(&h.svc, &unknown, b"not json".to_vec()), 401, "Unauthorized");
}

#[test]
fn header_name_is_case_insensitive() {
    let h = harness();
    let req = WireRequest::new("GET", "/v1/orders").header("X-API-Key", &h.key);
    let resp = h.svc.handle(&req);
    assert_eq!(resp.status, 200, "{}", text(&resp));
}

#[test]
fn two_keys_in_one_request_are_refused_whichever_comes_first() {
    let h = harness();
    let other = "test_0000000000000000000000000000000000000000";
    for (first, second) in [(h.key.as_str(), other), (other, h.key.as_str()), (h.key.as_str(), h.key.as_str())] {
        let req = WireRequest::new("GET", "/v1/orders").header("x-api-key", first).header("X-Api-Key", second);
        let resp = h.svc.handle(&req);
        assert_eq!(resp.status, 400, "{}", text(&resp));
        assert_eq!(resp.json()["error_code"], "PARAMETERS_MISSING");
        assert_eq!(resp.json()["error"], "x-api-key: sent more than once");
    }
}

#[test]
fn unknown_malformed_or_other_environment_keys_are_401() {
    let h = harness();
    let (live_key, _) = h.new_key(h.user_id, Environment::Live);
    assert!(live_key.starts_with("prod_"));
    let unknown = format!("test_{}", "Z".repeat(40));
    let cases = [
        ("unknown well-formed sandbox key", unknown.clone()),
        ("garbage", "garbage".to_string()),
        ("prefix only", "test_".to_string()),
        ("too short", h.key[..h.key.len() - 1].to_string()),
        ("too long", format!("{}x", h.key)),
        ("wrong case prefix", h.key.replacen("test_", "TEST_", 1)),
        ("key with spaces", format!(" {} x", h.key)),
        ("padded with a no-break space", format!("\u{a0}{}", h.key)),
        ("padded with an ideographic space", format!("{}\u{3000}", h.key)),
        ("non-ASCII", format!("{}é", h.key)),
        ("other environment", live_key.clone()),
    ];
    for (case, key) in cases {
        let resp = get(&h.svc, &key, "/v1/orders");
        let msg = assert_error(&resp, 401, "Unauthorized");
        assert!(!msg.contains(&h.key), "{case}: message must not echo keys");
        let resp = post_json(&h.svc, &key, &minimal_order());
        assert_error(&resp, 401, "Unauthorized");
    }
    assert!(list_all(&h.svc, &h.key).is_empty());
}

#[test]
fn ascii_white_space_around_a_key_is_ignored() {
    let h = harness();
    for padded in [format!(" {}\t", h.key), format!("{}\r\n", h.key)] {
        let resp = get(&h.svc, &padded, "/v1/orders");
        assert_eq!(resp.status, 200, "{padded:?}: {}", text(&resp));
    }
}

#[test]
fn deleted_key_is_401_and_other_keys_keep_working() {
    let h = harness();
    let (other, _) = h.new_key(h.user_id, Environment::Sandbox);
    let created = h.create(&minimal_order());
    h.svc.delete_key(&h.key_id).expect("delete key");
    assert_error(&h.get("/v1/orders"), 401, "Unauthorized");
    assert_error(&h.post(&minimal_order()), 401, "Unauthorized");
    assert_error(&h.get(&format!("/v1/orders/{}", order_id_of(&created))), 401, "Unauthorized");
    // The merchant's orders survive the key; another key of the merchant sees them.
    assert_eq!(ids(&list_all(&h.svc, &other)), vec![order_id_of(&created)]);
}

#[test]
fn inactive_key_is_authentication_failed_and_reactivation_restores_it() {
    let h = harness();
    let created = h.create(&minimal_order());
    let path = format!("/v1/orders/{}", order_id_of(&created));

    h.svc.deactivate_key(&h.key_id).expect("deactivate");
    assert_error(&h.post(&minimal_order()), 400, "AUTHENTICATION_FAILED");
    assert_error(&h.get("/v1/orders"), 400, "AUTHENTICATION_FAILED");
    assert_error(&h.get(&path), 400, "AUTHENTICATION_FAILED");

    h.svc.activate_key(&h.key_id).expect("activate");
    assert_eq!(h.get(&path).status, 200);
    h.create(&minimal_order());
    assert_eq!(list_all(&h.svc, &h.key).len(), 2, "only active requests created orders");
}

#[test]
fn a_key_deactivated_through_another_service_instance_is_rejected() {
    // Two services on the same file (e.g. the CLI and a running server): a change made
    // through one must take effect in the other.
    let h = harness();
    assert_eq!(h.get("/v1/orders").status, 200);
    let clock = Arc::new(ManualClock::new(T0_MS));
    let admin = Service::open(h.db(), config(Environment::Sandbox, &clock)).expect("open");
    admin.deactivate_key(&h.key_id).expect("deactivate");
    assert_error(&h.get("/v1/orders"), 400, "AUTHENTICATION_FAILED");
    admin.activate_key(&h.key_id).expect("activate");
    assert_eq!(h.get("/v1/orders").status, 200);
    admin.delete_key(&h.key_id).expect("delete");
    assert_error(&h.get("/v1/orders"), 401, "Unauthorized");
}

#[test]
fn a_key_changed_in_the_database_by_another_program_is_seen_by_the_next_request() {
    // Readers keep the credentials they looked up while nothing else commits to the
    // database; a change from outside the library must still count at once.
    let h = harness();
    for _ in 0..3 {
        assert_eq!(h.get("/v1/orders").status, 200);
    }
    RawDb::open(&h.db()).batch("UPDATE api_keys SET status = 'inactive'");
    assert_error(&h.get("/v1/orders"), 400, "AUTHENTICATION_FAILED");
    RawDb::open(&h.db()).batch("UPDATE api_keys SET status = 'active'");
    assert_eq!(h.get("/v1/orders").status, 200);
    RawDb::open(&h.db()).batch("DELETE FROM api_keys");
    assert_error(&h.get("/v1/orders"), 401, "Unauthorized");
}

#[test]
fn a_read_with_a_key_moved_to_another_merchant_since_its_last_use_reads_that_merchants_orders() {
    // A reader admits a key it looked up before and reads at once, confirming the key
    // after the read: a key that changed meanwhile must not get the read it ran with.
    let h = harness();
    let created = h.create(&minimal_order());
    let path = format!("/v1/orders/{}", order_id_of(&created));
    for _ in 0..3 {
        assert_eq!(h.get(&path).status, 200);
        assert_eq!(list_all(&h.svc, &h.key).len(), 1);
    }
    RawDb::open(&h.db()).batch("UPDATE api_keys SET user_id = 7");
    assert!(list_all(&h.svc, &h.key).is_empty(), "user 7 has no orders");
    assert_error(&h.get(&path), 400, "ORDER_NOT_VALID");
    RawDb::open(&h.db()).batch(&format!("UPDATE api_keys SET user_id = {}", h.user_id));
    assert_eq!(h.get(&path).status, 200);
}

#[test]
fn a_create_with_a_key_changed_since_it_was_last_admitted_is_judged_on_the_stored_key() {
    // A create admits a key it admitted before from memory and confirms it inside its
    // own write; a change made since, by another program or another service, decides.
    let h = harness();
    let order = json!({"currency": "USD", "amount": 10});
    let stored = |h: &Harness| RawDb::open(&h.db()).strings("SELECT order_id FROM orders").len();
    for _ in 0..3 {
        assert_eq!(h.post(&order).status, 201);
    }
    RawDb::open(&h.db()).batch("UPDATE api_keys SET status = 'inactive'");
    assert_error(&h.post(&order), 400, "AUTHENTICATION_FAILED");
    RawDb::open(&h.db()).batch("UPDATE api_keys SET status = 'active'");
    assert_eq!(h.post(&order).status, 201);
    assert_eq!(stored(&h), 4, "nothing was written for the refused create");

    // Moved to another merchant: the order is that merchant's.
    RawDb::open(&h.db()).batch("UPDATE api_keys SET user_id = 7");
    let moved = h.create(&order);
    assert_eq!(moved["data"]["user_id"], json!(7), "{moved}");

    // Deactivated through another service on the same database, then deleted.
    let other = Service::open(h.db(), config(Environment::Sandbox, &h.clock)).expect("open another service");
    other.deactivate_key(&h.key_id).expect("deactivate elsewhere");
    assert_error(&h.post(&order), 400, "AUTHENTICATION_FAILED");
    other.activate_key(&h.key_id).expect("activate elsewhere");
    assert_eq!(h.post(&order).status, 201);
    other.delete_key(&h.key_id).expect("delete elsewhere");
    assert_error(&h.post(&order), 401, "Unauthorized");
    assert_eq!(stored(&h), 6);
}

// ---------------------------------------------------------------- rate limit

#[test]
fn rate_limit_trips_and_recovers_on_the_clock() {
    let h = harness_with(Environment::Sandbox, |c| {
        c.rate_limit = RateLimit { per_second: 1, burst: 3 };
    });
    let (other, _) = h.new_key(h.user_id, Environment::Sandbox);
    for i in 0..3 {
        let resp = h.post(&json!({"currency": "USD", "amount": i + 1}));
        assert_eq!(resp.status, 201, "request {i} within the burst: {}", text(&resp));
    }
    let limited = h.post(&json!({"currency": "USD", "amount": 99}));
    assert_error(&limited, 400, "API_LIMIT_EXCEEDED");
    assert_error(&h.get("/v1/orders"), 400, "API_LIMIT_EXCEEDED");

    // The bucket is per key.
    assert_eq!(get(&h.svc, &other, "/v1/orders").status, 200);

    // Not refilled before a full second.
    h.clock.advance_ms(500);
    assert_error(&h.get("/v1/orders"), 400, "API_LIMIT_EXCEEDED");
    // One token back after more than a second in total.
    h.clock.advance_ms(501);
    assert_eq!(h.get("/v1/orders").status, 200, "recovered after >1 s");
    assert_error(&h.get("/v1/orders"), 400, "API_LIMIT_EXCEEDED");

    // A long pause refills only up to the burst.
    h.clock.advance_ms(60_000);
    for _ in 0..3 {
        assert_eq!(h.get("/v1/orders").status, 200);
    }
    assert_error(&h.get("/v1/orders"), 400, "API_LIMIT_EXCEEDED");

    assert_eq!(list_all(&h.svc, &other).len(), 3, "the rate-limited create stored nothing");
}

#[test]
fn default_rate_limit_is_100_per_second_with_burst_100() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(T0_MS));
    let mut cfg = coinorder::Config::new(Environment::Sandbox);
    cfg.clock = clock.clone();
    cfg.secret_key_path = common::shared_key_file();
    assert_eq!(cfg.rate_limit, RateLimit { per_second: 100, burst: 100 });
    let svc = Service::open(db_path(&dir), cfg).expect("open");
    let (key, _) = new_key(&svc, 1, Environment::Sandbox);
    for i in 0..100 {
        let resp = get(&svc, &key, "/v1/orders");
        assert_eq!(resp.status, 200, "request {i}: {}", text(&resp));
    }
    assert_error(&get(&svc, &key, "/v1/orders"), 400, "API_LIMIT_EXCEEDED");
    clock.advance_ms(20);
    assert_eq!(get(&svc, &key, "/v1/orders").status, 200, "100/s refills one per 10 ms");
}

#[test]
fn rate_limit_off_never_trips() {
    let h = harness(); // RateLimit::OFF
    for _ in 0..300 {
        assert_eq!(h.get("/v1/orders").status, 200);
    }
}

// ---------------------------------------------------------------- isolation

#[test]
fn merchants_cannot_see_each_others_orders() {
    let h = harness();
    let (key_b, _) = h.new_key(7, Environment::Sandbox);
    let a1 = h.create(&json!({"currency": "USD", "amount": 1, "merchant_order_id": "a-1"}));
    let b1 = create_ok(&h.svc, &key_b, &json!({"currency": "USD", "amount": 2}));

    let resp = get(&h.svc, &key_b, &format!("/v1/orders/{}", order_id_of(&a1)));
    assert_error(&resp, 400, "ORDER_NOT_VALID");
    let resp = h.get(&format!("/v1/orders/{}", order_id_of(&b1)));
    assert_error(&resp, 400, "ORDER_NOT_VALID");

    assert_eq!(ids(&list_all(&h.svc, &h.key)), vec![order_id_of(&a1)]);
    assert_eq!(ids(&list_all(&h.svc, &key_b)), vec![order_id_of(&b1)]);
    for o in list_all(&h.svc, &key_b) {
        assert_eq!(int(&o, "user_id"), 7);
    }
    // B may reuse A's merchant_order_id; it is not a duplicate across merchants.
    create_ok(&h.svc, &key_b, &json!({"currency": "USD", "amount": 3, "merchant_order_id": "a-1"}));
}

#[test]
fn sandbox_and_live_on_one_file_do_not_see_each_other() {
    let h = harness();
    let live = Service::open(h.db(), config(Environment::Live, &h.clock)).expect("open live");
    assert_eq!(live.environment(), Environment::Live);
    let (live_key, _) = new_key(&live, h.user_id, Environment::Live);
    let sandbox_order = h.create(&json!({"currency": "USD", "amount": 1, "merchant_order_id": "env-ref"}));

    // Keys only work in their own environment.
    assert_error(&get(&live, &h.key, "/v1/orders"), 401, "Unauthorized");
    assert_error(&get(&h.svc, &live_key, "/v1/orders"), 401, "Unauthorized");

    // The live merchant (same user id) sees none of the sandbox orders.
    let resp = get(&live, &live_key, "/v1/orders");
    assert_eq!(resp.status, 200, "{}", text(&resp));
    assert!(resp.json()["orders"].as_array().is_some_and(Vec::is_empty), "{}", text(&resp));
    let resp = get(&live, &live_key, &format!("/v1/orders/{}", order_id_of(&sandbox_order)));
    assert_error(&resp, 400, "ORDER_NOT_VALID");

    // Sandbox still sees exactly its own order.
    assert_eq!(ids(&list_all(&h.svc, &h.key)), vec![order_id_of(&sandbox_order)]);
}

// ---------------------------------------------------------------- routing

#[test]
fn unknown_paths_and_methods_are_404() {
    let h = harness();
    let created = h.create(&minimal_order());
    let id = order_id_of(&created);
    let cases = [
        ("GET", "/".to_string()),
        ("GET", "/v1".to_string()),
        ("GET", "/v1/order".to_string()),
        ("GET", "/v2/orders".to_string()),
        ("GET", "/V1/ORDERS".to_string()),
        ("GET", "/v1/orders/x/y/z".to_string()),
        ("GET", "/v1/ordersX".to_string()),
        ("POST", "/v1/keys".to_string()),
        ("DELETE", "/v1/orders".to_string()),
        ("PUT", "/v1/orders".to_string()),
        ("PATCH", "/v1/orders".to_string()),
        ("DELETE", format!("/v1/orders/{id}")),
        ("PUT", format!("/v1/orders/{id}")),
        ("POST", format!("/v1/orders/{id}")),
        ("BREW", "/v1/orders".to_string()),
    ];
    for (method, path) in cases {
        let req = WireRequest::new(method, &path)
            .header("x-api-key", &h.key)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&minimal_order()).expect("json"));
        let resp = h.svc.handle(&req);
        assert_eq!(resp.status, 404, "{method} {path}: {}", text(&resp));
        assert_error(&resp, 404, "Not Found");
    }
    // None of them touched the order.
    let all = list_all(&h.svc, &h.key);
    assert_eq!(ids(&all), vec![id.clone()]);
    assert_eq!(h.get(&format!("/v1/orders/{id}")).status, 200);
}

#[test]
fn query_string_does_not_change_routing() {
    let h = harness();
    let created = h.create(&minimal_order());
    let id = order_id_of(&created);
    let resp = h.get(&format!("/v1/orders/{id}?foo=bar"));
    assert_eq!(resp.status, 200, "{}", text(&resp));
    assert_eq!(string(&resp.json()["order"], "order_id"), id);
    let resp = h
        .svc
        .handle(&post_request(&h.key, serde_json::to_vec(&minimal_order()).expect("json")).header("x-ignored", "1"));
    assert_eq!(resp.status, 201);
}

// ---------------------------------------------------------------- 500

#[test]
fn storage_failure_is_500_without_internals() {
    let h = harness();
    h.create(&minimal_order());
    // Break the storage under the service: drop every order/invoice table.
    {
        let mut db = common::RawDb::open(&h.db());
        let tables = db.tables();
        let doomed: Vec<&String> = tables.iter().filter(|t| t.contains("order") || t.contains("invoice")).collect();
        assert!(!doomed.is_empty(), "no order tables found in {tables:?}");
        if !common::on_postgres() {
            db.batch("PRAGMA foreign_keys = OFF");
        }
        for table in doomed {
            let cascade = if common::on_postgres() { " CASCADE" } else { "" };
            db.batch(&format!("DROP TABLE IF EXISTS \"{table}\"{cascade}"));
        }
    }
    for resp in [h.get("/v1/orders"), h.post(&minimal_order())] {
        let msg = assert_error(&resp, 500, "InternalServerError");
        let lower = msg.to_lowercase();
        for leak in
            ["sqlite", "table", "sql", "rusqlite", "postgres", "relation", "no such", "/tmp", ".db", "127.0.0.1"]
        {
            assert!(!lower.contains(leak), "500 leaks internals ({leak}): {msg}");
        }
    }
}

// ---------------------------------------------------------------- failed authentications per address

fn from(client: &str, key: &str) -> WireRequest {
    WireRequest::new("GET", "/v1/orders").header("x-api-key", key).client(client.parse().expect("ip"))
}

#[test]
fn an_address_that_keeps_failing_to_authenticate_must_wait() {
    let h = harness_with(Environment::Sandbox, |config| {
        config.rate_limit = RateLimit::OFF;
        config.failed_auth_limit = RateLimit { per_second: 1, burst: 3 };
    });
    let wrong = format!("test_{}", "A".repeat(40));
    for _ in 0..3 {
        assert_error(&h.svc.handle(&from("203.0.113.7", &wrong)), 401, "Unauthorized");
    }
    // The budget is spent: even the right key is refused from there, before any lookup.
    for key in [wrong.as_str(), h.key.as_str()] {
        let refused = h.svc.handle(&from("203.0.113.7", key));
        assert_error(&refused, 400, "API_LIMIT_EXCEEDED");
        assert_eq!(refused.header_value("retry-after"), Some("1"));
    }
    // Another address, and a caller that names none, are not affected.
    assert_eq!(h.svc.handle(&from("203.0.113.8", &h.key)).status, 200);
    assert_eq!(get(&h.svc, &h.key, "/v1/orders").status, 200);
    // Successes cost nothing; one second later one more try is allowed.
    h.clock.advance_ms(1000);
    assert_eq!(h.svc.handle(&from("203.0.113.7", &h.key)).status, 200);
    assert_eq!(h.svc.handle(&from("203.0.113.7", &h.key)).status, 200);
    assert_error(&h.svc.handle(&from("203.0.113.7", &wrong)), 401, "Unauthorized");
    assert_error(&h.svc.handle(&from("203.0.113.7", &wrong)), 400, "API_LIMIT_EXCEEDED");
}

#[test]
fn missing_keys_count_as_failures_and_the_limit_can_be_turned_off() {
    let h = harness_with(Environment::Sandbox, |config| {
        config.failed_auth_limit = RateLimit { per_second: 1, burst: 2 };
    });
    let bare = || WireRequest::new("GET", "/v1/orders").client("198.51.100.1".parse().expect("ip"));
    assert_error(&h.svc.handle(&bare()), 400, "AUTHENTICATION_FAILED");
    assert_error(&h.svc.handle(&bare()), 400, "AUTHENTICATION_FAILED");
    assert_error(&h.svc.handle(&bare()), 400, "API_LIMIT_EXCEEDED");

    let open = harness_with(Environment::Sandbox, |config| config.failed_auth_limit = RateLimit::OFF);
    let wrong = format!("test_{}", "B".repeat(40));
    for _ in 0..50 {
        assert_error(&open.svc.handle(&from("198.51.100.2", &wrong)), 401, "Unauthorized");
    }
}

#[test]
fn behind_a_proxy_on_this_host_the_forwarded_address_is_counted() {
    let h = harness_with(Environment::Sandbox, |config| {
        config.rate_limit = RateLimit::OFF;
        config.failed_auth_limit = RateLimit { per_second: 1, burst: 2 };
    });
    let wrong = format!("test_{}", "C".repeat(40));
    let via_proxy = |forwarded: Option<&str>, key: &str| {
        let request = from("127.0.0.1", key);
        match forwarded {
            Some(addresses) => request.header("X-Forwarded-For", addresses),
            None => request,
        }
    };
    // The proxy itself, naming no one (a process on this host): never counted.
    for _ in 0..5 {
        assert_error(&h.svc.handle(&via_proxy(None, &wrong)), 401, "Unauthorized");
    }
    // Counted under the last address the proxy names (the one it saw), not the proxy's.
    for _ in 0..2 {
        assert_error(&h.svc.handle(&via_proxy(Some("10.0.0.1, 203.0.113.9"), &wrong)), 401, "Unauthorized");
    }
    assert_error(&h.svc.handle(&via_proxy(Some("203.0.113.9"), &wrong)), 400, "API_LIMIT_EXCEEDED");
    // Other customers behind the same proxy are not held back.
    assert_eq!(h.svc.handle(&via_proxy(Some("203.0.113.10"), &h.key)).status, 200);
    assert_eq!(h.svc.handle(&via_proxy(None, &h.key)).status, 200);
    // A dual-stack listener's view of the same proxy is the same proxy.
    let mapped = |forwarded: &str| {
        WireRequest::new("GET", "/v1/orders")
            .header("x-api-key", &wrong)
            .header("X-Forwarded-For", forwarded)
            .client("::ffff:127.0.0.1".parse().expect("ip"))
    };
    assert_error(&h.svc.handle(&mapped("203.0.113.12")), 401, "Unauthorized");
    assert_error(&h.svc.handle(&mapped("203.0.113.12")), 401, "Unauthorized");
    assert_error(&h.svc.handle(&mapped("203.0.113.12")), 400, "API_LIMIT_EXCEEDED");
    // A second proxy on this host is passed over; an item that is not an address ends
    // the reading, so what the client wrote to its left is never believed.
    for _ in 0..2 {
        assert_error(&h.svc.handle(&via_proxy(Some("203.0.113.13, 127.0.0.1"), &wrong)), 401, "Unauthorized");
    }
    assert_error(&h.svc.handle(&via_proxy(Some("203.0.113.13"), &wrong)), 400, "API_LIMIT_EXCEEDED");
    for spoofed in ["203.0.113.9, unknown", "203.0.113.9, "] {
        for _ in 0..4 {
            assert_error(&h.svc.handle(&via_proxy(Some(spoofed), &wrong)), 401, "Unauthorized");
        }
    }
    // A peer that is not on this host cannot name someone else.
    let direct = from("198.51.100.3", &wrong).header("X-Forwarded-For", "203.0.113.11");
    assert_error(&h.svc.handle(&direct), 401, "Unauthorized");
    assert_error(&h.svc.handle(&direct), 401, "Unauthorized");
    assert_error(&h.svc.handle(&direct), 400, "API_LIMIT_EXCEEDED");
    assert_eq!(h.svc.handle(&via_proxy(Some("203.0.113.11"), &h.key)).status, 200);
}

#[test]
fn client_addresses_as_host_servers_give_them() {
    use coinorder::client_address;
    let ip = |text: &str| text.parse::<std::net::IpAddr>().ok();
    assert_eq!(client_address(" 203.0.113.7 "), ip("203.0.113.7"));
    assert_eq!(client_address("203.0.113.7:5000"), ip("203.0.113.7"));
    assert_eq!(client_address("[2001:db8::1]:443"), ip("2001:db8::1"));
    assert_eq!(client_address("fe80::1%eth0"), ip("fe80::1"));
    // What a dual-stack listener sees of an IPv4 peer is that peer.
    assert_eq!(client_address("::ffff:127.0.0.1"), ip("127.0.0.1"));
    // A unix socket's peer (gunicorn's empty REMOTE_ADDR) is on this host.
    assert_eq!(client_address(""), ip("127.0.0.1"));
    for unknown in ["testclient", "b''", "unix:/run/app.sock", "203.0.113.300"] {
        assert_eq!(client_address(unknown), None, "{unknown:?}");
    }
}
