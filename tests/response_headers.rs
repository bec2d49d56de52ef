//! Headers every answer of `Service::handle` carries, whatever the route and outcome:
//! `cache-control: no-store` (orders and invoices must not be kept by a browser or proxy)
//! and `x-content-type-options: nosniff`; and `retry-after` on a rate-limited refusal.

mod common;

use coinorder::{Environment, RateLimit, WireRequest, WireResponse};
use common::*;
use serde_json::json;

/// Asserts the headers every answer needs, naming `what` on failure.
fn assert_safe_headers(resp: &WireResponse, what: &str) {
    assert_eq!(header(resp, "cache-control"), Some("no-store"), "{what}: headers {:?}", resp.headers);
    assert_eq!(header(resp, "x-content-type-options"), Some("nosniff"), "{what}: headers {:?}", resp.headers);
    // Each header once: a duplicate with another value would leave the choice to the client.
    for name in ["cache-control", "x-content-type-options", "content-type"] {
        let count = resp.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).count();
        assert_eq!(count, 1, "{what}: {name} sent {count} times: {:?}", resp.headers);
    }
    // Names are lower case, like the others (HTTP/2 requires it of servers that pass them on).
    for (name, _) in &resp.headers {
        assert_eq!(name, &name.to_ascii_lowercase(), "{what}: header name {name:?}");
    }
    assert_eq!(header(resp, "retry-after"), None, "{what}: only a rate-limited answer says when to retry");
}

#[test]
fn api_answers_of_every_status_forbid_caching_and_sniffing() {
    let h = harness();
    let created = h.post(&minimal_order());
    assert_eq!(created.status, 201, "{}", text(&created));
    assert_safe_headers(&created, "201 create");
    let order_id = string(&created.json()["data"], "order_id").to_string();

    let got = h.get(&format!("/v1/orders/{order_id}"));
    assert_eq!(got.status, 200, "{}", text(&got));
    assert_safe_headers(&got, "200 get");

    let listed = h.get("/v1/orders?limit=5");
    assert_eq!(listed.status, 200, "{}", text(&listed));
    assert_safe_headers(&listed, "200 list");

    let simulated = h.svc.handle(
        &WireRequest::new("POST", &format!("/v1/orders/{order_id}/simulate"))
            .header("x-api-key", &h.key)
            .body(r#"{"action":"cancel"}"#),
    );
    assert_eq!(simulated.status, 200, "{}", text(&simulated));
    assert_safe_headers(&simulated, "200 simulate");

    let invalid = h.post(&json!({"currency": "USD"}));
    assert_invalid(&invalid, "amount");
    assert_safe_headers(&invalid, "400 PARAMETERS_MISSING");

    let missing_order = h.get("/v1/orders/00000000-0000-4000-8000-000000000000");
    assert_error(&missing_order, 400, "ORDER_NOT_VALID");
    assert_safe_headers(&missing_order, "400 ORDER_NOT_VALID");

    let no_key = h.svc.handle(&WireRequest::new("GET", "/v1/orders"));
    assert_error(&no_key, 400, "AUTHENTICATION_FAILED");
    assert_safe_headers(&no_key, "400 AUTHENTICATION_FAILED");

    let unknown_key = get(&h.svc, "test_unknownunknownunknownunknown", "/v1/orders");
    assert_error(&unknown_key, 401, "Unauthorized");
    assert_safe_headers(&unknown_key, "401");

    for (method, path) in [("GET", "/v1/nothing"), ("DELETE", "/v1/orders"), ("GET", "/"), ("PUT", "/pay")] {
        let resp = h.svc.handle(&WireRequest::new(method, path).header("x-api-key", &h.key));
        assert_error(&resp, 404, "Not Found");
        assert_safe_headers(&resp, &format!("404 {method} {path}"));
    }
}

#[test]
fn live_simulate_404_forbids_caching_and_sniffing() {
    // The route that does not exist on a live service answers through the same path.
    let h = harness_with(Environment::Live, |_| {});
    let resp = h.svc.handle(
        &WireRequest::new("POST", "/v1/orders/00000000-0000-4000-8000-000000000000/simulate")
            .header("x-api-key", &h.key)
            .body(r#"{"action":"pay"}"#),
    );
    assert_error(&resp, 404, "Not Found");
    assert_safe_headers(&resp, "live simulate 404");
}

#[test]
fn payment_page_answers_forbid_caching_and_sniffing() {
    let h = harness();
    let order_id = string(&h.create(&minimal_order())["data"], "order_id").to_string();
    let page = |method: &str, path: &str| h.svc.handle(&WireRequest::new(method, path));

    let html = page("GET", &format!("/pay?id={order_id}"));
    assert_eq!(html.status, 200, "{}", text(&html));
    assert_eq!(header(&html, "content-type"), Some("text/html; charset=utf-8"));
    assert_safe_headers(&html, "200 page");
    // The page's own protections stay.
    assert_eq!(header(&html, "x-frame-options"), Some("DENY"));
    assert_eq!(header(&html, "referrer-policy"), Some("no-referrer"));

    let unknown = page("GET", "/pay?id=00000000-0000-4000-8000-000000000000");
    assert_eq!(unknown.status, 404, "{}", text(&unknown));
    assert_safe_headers(&unknown, "404 page");

    let status = page("GET", &format!("/pay/status?id={order_id}"));
    assert_eq!(status.status, 200, "{}", text(&status));
    assert_json_content_type(&status);
    assert_safe_headers(&status, "200 page status");

    let status_unknown = page("GET", "/pay/status?id=nope");
    assert_error(&status_unknown, 400, "ORDER_NOT_VALID");
    assert_safe_headers(&status_unknown, "400 page status");

    let cancelled = page("POST", &format!("/pay/cancel?id={order_id}"));
    assert_eq!(cancelled.status, 200, "{}", text(&cancelled));
    assert_safe_headers(&cancelled, "200 page cancel");

    let refused = page("POST", &format!("/pay/simulate?id={order_id}"));
    assert_error(&refused, 400, "ORDER_STATE_INVALID");
    assert_safe_headers(&refused, "400 page simulate");
}

#[test]
fn a_rate_limited_answer_says_when_to_retry() {
    let h = harness_with(Environment::Sandbox, |c| c.rate_limit = RateLimit { per_second: 1, burst: 1 });
    let first = h.get("/v1/orders");
    assert_eq!(first.status, 200, "{}", text(&first));
    assert_safe_headers(&first, "the request within the limit");

    let limited = h.get("/v1/orders");
    assert_error(&limited, 400, "API_LIMIT_EXCEEDED");
    assert_eq!(header(&limited, "retry-after"), Some("1"), "headers {:?}", limited.headers);
    assert_eq!(header(&limited, "cache-control"), Some("no-store"));
    assert_eq!(header(&limited, "x-content-type-options"), Some("nosniff"));
    assert_eq!(limited.headers.iter().filter(|(n, _)| n == "retry-after").count(), 1, "{:?}", limited.headers);

    // 999 ms later the token is still 1 ms away: a whole second is still the answer
    // (Retry-After has no fractions, and 0 would invite an immediate retry).
    h.clock.advance_ms(999);
    let still = h.get("/v1/orders");
    assert_error(&still, 400, "API_LIMIT_EXCEEDED");
    assert_eq!(header(&still, "retry-after"), Some("1"), "headers {:?}", still.headers);

    // Waiting as told is enough.
    h.clock.advance_ms(1);
    let again = h.get("/v1/orders");
    assert_eq!(again.status, 200, "{}", text(&again));
    assert_safe_headers(&again, "the request after waiting");

    // A size limit shares the error code but is no reason to wait.
    h.clock.advance_ms(1000);
    let too_long = h.post(&json!({"currency": "USD", "amount": 1, "title": "x".repeat(10_000)}));
    assert_field_error(&too_long, "API_LIMIT_EXCEEDED", "title");
    assert_safe_headers(&too_long, "a size limit");
}
