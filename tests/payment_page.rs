//! The hosted payment page and its key-less endpoints through `Service::handle`:
//! `GET /pay?id=` (self-contained HTML: escaped merchant text, amounts, address, inline
//! SVG QR code, countdown from the service clock, sandbox controls), `GET /pay/status`
//! (public fields only), `POST /pay/cancel` and `POST /pay/simulate` (sandbox only), the
//! redirect to callback_url on PAID/CANCELLED, and the not-found page; the network named
//! for each coin, the QR code of what is still due, the receipt and "Back to the shop" of
//! a PAID order, the Cancel confirmation and the hint on an EXPIRED order.
//! The real-browser flow lives in `tests/browser/` (`scripts/test-browser`).

mod common;

use std::sync::Arc;

use coinorder::{payment_uri_for, AddressSource, DepositAddress, Environment, Timestamp, WireRequest, WireResponse};
use common::*;
use rust_decimal::Decimal;
use serde_json::{json, Value};

/// The members of `/pay/status`, and nothing else.
const PUBLIC_FIELDS: &[&str] = &[
    "order_id",
    "merchant_name",
    "title",
    "description",
    "status",
    "price_amount",
    "price_currency",
    "price_text",
    "pay_amount",
    "pay_currency",
    "network",
    "due_amount",
    "due_payment_uri",
    "address",
    "payment_uri",
    "receive_amount",
    "receive_currency",
    "receive_text",
    "expired_at",
    "expired_at_t",
    "now_t",
    "sandbox",
    "redirect_url",
    "receipt",
    "return_url",
];

const CALLBACK: &str = "https://shop.example/return?ref=A-7";
const WEBHOOK: &str = "https://merchant.example/hooks/very-private-path";
const EMAIL: &str = "buyer.private@example.org";

fn html(h: &Harness, order_id: &str) -> String {
    html_at(h, &format!("/pay?id={order_id}"))
}

fn html_at(h: &Harness, path: &str) -> String {
    let resp = h.svc.handle(&WireRequest::new("GET", path));
    assert_eq!(resp.status, 200, "{}", text(&resp));
    assert_eq!(header(&resp, "content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(header(&resp, "cache-control"), Some("no-store"));
    text(&resp)
}

fn status(h: &Harness, order_id: &str) -> Value {
    let resp = h.svc.handle(&WireRequest::new("GET", &format!("/pay/status?id={order_id}")));
    assert_eq!(resp.status, 200, "{}", text(&resp));
    assert_json_content_type(&resp);
    let body = resp.json();
    assert_eq!(keys_of(&body), sorted(PUBLIC_FIELDS), "public status members: {body}");
    body
}

fn post(h: &Harness, path: &str) -> WireResponse {
    h.svc.handle(&WireRequest::new("POST", path))
}

fn create(h: &Harness, body: Value) -> String {
    h.create(&body)["data"]["order_id"].as_str().expect("order_id").to_string()
}

/// The opening tag of the element with `id`.
fn tag<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html.find(&format!(" id=\"{id}\"")).unwrap_or_else(|| panic!("no element #{id}"));
    let start = html[..at].rfind('<').expect("tag start");
    let end = at + html[at..].find('>').expect("tag end");
    &html[start..=end]
}

/// The text right after the opening tag of `id`, up to the next tag.
fn text_of<'a>(html: &'a str, id: &str) -> &'a str {
    let opening = tag(html, id);
    let from = html.find(opening).expect("tag") + opening.len();
    let to = from + html[from..].find('<').expect("next tag");
    &html[from..to]
}

fn is_hidden(html: &str, id: &str) -> bool {
    let opening = tag(html, id);
    opening.ends_with(" hidden>") || opening.contains(" hidden ")
}

fn number(v: &Value) -> Decimal {
    v.to_string().parse().unwrap_or_else(|_| panic!("not a decimal: {v}"))
}

#[test]
fn the_page_shows_the_order_with_everything_inline() {
    let h = harness();
    let id = create(
        &h,
        json!({"currency": "USD", "amount": "48.5", "title": "Northwind Coffee", "description": "2 bags, 250 g",
               "pay_currency": "BTC", "callback_url": CALLBACK}),
    );
    let body = html(&h, &id);
    let public = status(&h, &id);
    let detail = h.get(&format!("/v1/orders/{id}")).json();

    assert!(body.starts_with("<!doctype html>"), "{body}");
    assert!(body.contains("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"));
    assert_eq!(text_of(&body, "merchant-title"), "Northwind Coffee");
    assert_eq!(text_of(&body, "description"), "2 bags, 250 g");
    assert_eq!(text_of(&body, "fiat-amount"), "48.50 USD", "fiat with its minor unit");
    assert_eq!(text_of(&body, "crypto-amount"), number(&detail["invoice"]["amount"]).to_string());
    assert_eq!(text_of(&body, "pay-currency"), "BTC");
    let address = public["address"].as_str().expect("address");
    assert!(address.starts_with("tb1q"), "sandbox BTC address {address}");
    assert_eq!(text_of(&body, "address"), address);
    assert!(tag(&body, "copy-address").contains(&format!("data-copy=\"{address}\"")));
    assert!(public["payment_uri"].as_str().expect("uri").starts_with(&format!("bitcoin:{address}?amount=")));

    // The QR code is inline SVG, drawn here, with the payment URI as a wallet link.
    assert!(tag(&body, "qr-svg").starts_with("<svg "), "{}", tag(&body, "qr-svg"));
    assert!(body.contains("<path fill=\"#0f172a\" d=\"M"), "QR modules drawn as one path");
    assert!(tag(&body, "open-wallet").contains(&format!("href=\"bitcoin:{address}?amount=")));

    // Countdown from the service clock, not the browser's.
    assert_eq!(text_of(&body, "countdown"), "30:00");
    assert_eq!(public["expired_at_t"].as_i64(), Some(T0_MS + THIRTY_MIN_MS));
    assert_eq!(public["now_t"].as_i64(), Some(T0_MS));
    h.clock.advance_ms(61_000);
    let later = html(&h, &id);
    assert_eq!(text_of(&later, "countdown"), "28:59");
    assert_eq!(status(&h, &id)["now_t"].as_i64(), Some(T0_MS + 61_000));

    // State and sandbox controls.
    assert!(tag(&body, "status").contains("data-status=\"NEW\""));
    assert_eq!(text_of(&body, "status"), "Awaiting payment");
    assert!(!is_hidden(&body, "sandbox-banner"));
    assert!(body.contains("<strong>SANDBOX</strong>"));
    assert!(!is_hidden(&body, "simulate-pay") && !is_hidden(&body, "cancel"));
    assert!(!is_hidden(&body, "pay-panel") && is_hidden(&body, "result") && is_hidden(&body, "error"));
    assert_eq!(public["sandbox"], json!(true));
    assert_eq!(public["redirect_url"], Value::Null);
    assert_eq!(number(&public["due_amount"]), number(&public["pay_amount"]));
}

#[test]
fn the_page_loads_nothing_from_anywhere() {
    let h = harness();
    let id = create(&h, json!({"currency": "EUR", "amount": 20, "title": "Offline shop"}));
    let body = html(&h, &id);
    for banned in ["<link", "<img", "<iframe", "src=", "url(", "@import", "https://", "//cdn"] {
        assert!(!body.contains(banned), "external asset marker {banned:?} in the page");
    }
    // The only http:// is the SVG namespace; the only links are wallet URIs.
    assert_eq!(body.matches("http://").count(), 1);
    assert!(body.contains("xmlns=\"http://www.w3.org/2000/svg\""));
    for (at, _) in body.match_indices("href=\"") {
        assert!(body[at + 6..].starts_with("ethereum:"), "link {}", &body[at..at + 40]);
    }
    assert!(body.contains("Content-Security-Policy") && body.contains("default-src 'none'"));
    // The page's style, and the one rule that hides the scripted buttons without a script.
    assert_eq!(body.matches("<style>").count(), 2);
    assert!(body.contains("<noscript><style>.needs-script{display:none!important}</style></noscript></head>"));
    assert!(body.contains("form-action 'self'"), "forms may post to this server only");
    assert_eq!(body.matches("<script").count(), 3, "two JSON islands and the inline script");
}

#[test]
fn merchant_text_is_escaped() {
    let h = harness();
    let title = "<script>alert(\"t\")</script> & 'Co'";
    let description = "<img src=x onerror=alert(1)>";
    let id = create(&h, json!({"currency": "USD", "amount": 1, "title": title, "description": description}));
    let body = html(&h, &id);
    assert_eq!(
        text_of(&body, "merchant-title"),
        "&lt;script&gt;alert(&quot;t&quot;)&lt;/script&gt; &amp; &#39;Co&#39;"
    );
    assert_eq!(text_of(&body, "description"), "&lt;img src=x onerror=alert(1)&gt;");
    assert!(!body.contains("<script>alert"), "raw title markup in the page");
    assert!(!body.contains("<img"), "raw description markup in the page");
    assert!(!body.contains("</script> &"), "the JSON island cannot be closed by the title");
    assert!(body.contains("\\u003cscript\\u003ealert"), "the JSON island escapes <, > and &");
    // The document title is escaped too.
    assert!(body.contains("<title>&lt;script&gt;alert(&quot;t&quot;)&lt;/script&gt; &amp; &#39;Co&#39; \u{2014} "));
    // The status JSON keeps the text as sent (the page's script only sets textContent).
    assert_eq!(status(&h, &id)["title"], json!(title));
}

#[test]
fn public_fields_never_carry_merchant_or_customer_secrets() {
    let h = harness();
    let id = create(
        &h,
        json!({"currency": "USD", "amount": 10, "title": "T", "customer_email": EMAIL, "webhook_url": WEBHOOK,
               "callback_url": CALLBACK, "success_url": "https://shop.example/success-secret",
               "cancel_url": "https://shop.example/cancel-secret", "merchant_order_id": "INTERNAL-REF-991"}),
    );
    let body = html(&h, &id);
    let public = status(&h, &id).to_string();
    for secret in
        [EMAIL, WEBHOOK, h.key.as_str(), h.key_id.as_str(), "success-secret", "cancel-secret", "INTERNAL-REF-991"]
    {
        assert!(!body.contains(secret), "{secret:?} in the page");
        assert!(!public.contains(secret), "{secret:?} in /pay/status");
    }
    assert!(!public.contains("user_id") && !body.contains("user_id"));
    // Before the order is over, not even the callback_url shows.
    assert!(!body.contains("shop.example/return") && !public.contains("shop.example/return"));
}

#[test]
fn simulate_from_the_page_pays_and_redirects_to_the_callback() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 25, "callback_url": CALLBACK}));
    let resp = post(&h, &format!("/pay/simulate?id={id}"));
    assert_eq!(resp.status, 200, "{}", text(&resp));
    let body = resp.json();
    assert_eq!(keys_of(&body), sorted(PUBLIC_FIELDS));
    assert_eq!(body["status"], "PAID");
    assert_eq!(number(&body["due_amount"]), Decimal::ZERO);
    let redirect = url::Url::parse(body["redirect_url"].as_str().expect("redirect_url")).expect("url");
    assert_eq!(redirect.host_str(), Some("shop.example"));
    assert_eq!(redirect.path(), "/return");
    let query: Vec<(String, String)> = redirect.query_pairs().into_owned().collect();
    assert_eq!(
        query,
        vec![("ref".into(), "A-7".into()), ("order_id".into(), id.clone()), ("status".into(), "PAID".into())]
    );
    assert_eq!(status(&h, &id)["redirect_url"], body["redirect_url"]);

    let detail = h.get(&format!("/v1/orders/{id}")).json();
    assert_eq!(detail["order"]["status"], "PAID");
    assert_eq!(detail["invoice"]["status"], "PAID");
    assert_eq!(number(&detail["invoice"]["receive_amount"]), Decimal::from(25));

    // The page itself now shows the result; nothing is left to press.
    let page = html(&h, &id);
    assert!(!is_hidden(&page, "result") && is_hidden(&page, "pay-panel"));
    assert_eq!(text_of(&page, "result-title"), "Paid \u{2713}");
    assert!(is_hidden(&page, "simulate-pay") && is_hidden(&page, "cancel"));

    // The order is finished, so a second simulated payment from the page is refused.
    let again = post(&h, &format!("/pay/simulate?id={id}"));
    assert_error(&again, 400, "ORDER_STATE_INVALID");
}

#[test]
fn cancel_from_the_page_redirects_with_cancelled_and_only_once() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 25, "callback_url": CALLBACK}));
    let resp = post(&h, &format!("/pay/cancel?id={id}"));
    assert_eq!(resp.status, 200, "{}", text(&resp));
    let body = resp.json();
    assert_eq!(body["status"], "CANCELLED");
    let redirect = body["redirect_url"].as_str().expect("redirect_url");
    assert!(redirect.starts_with("https://shop.example/return?ref=A-7&order_id="), "{redirect}");
    assert!(redirect.ends_with("&status=CANCELLED"), "{redirect}");
    assert_eq!(h.get(&format!("/v1/orders/{id}")).json()["order"]["status"], "CANCELLED");

    assert_error(&post(&h, &format!("/pay/cancel?id={id}")), 400, "ORDER_STATE_INVALID");
    let page = html(&h, &id);
    assert_eq!(text_of(&page, "result-title"), "Cancelled");
    assert!(is_hidden(&page, "cancel") && is_hidden(&page, "simulate-pay"));
}

/// A form the page posts without JavaScript (`application/x-www-form-urlencoded`, empty).
fn post_form(h: &Harness, path: &str) -> WireResponse {
    h.svc.handle(
        &WireRequest::new("POST", path).header("Content-Type", "application/x-www-form-urlencoded").body(Vec::new()),
    )
}

/// The `<noscript>` part of the page (empty when it has none).
fn script_free_part(html: &str) -> &str {
    match html.find("<noscript><div class=\"actions\">").or_else(|| html.find("<noscript><details")) {
        Some(from) => &html[from..from + html[from..].find("</noscript>").expect("noscript end")],
        None => "",
    }
}

#[test]
fn without_javascript_the_page_cancels_by_a_form_and_shows_the_outcome() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 25, "callback_url": CALLBACK}));
    let page = html(&h, &id);
    assert!(tag(&page, "actions").contains("class=\"actions needs-script\""), "{}", tag(&page, "actions"));
    let forms = script_free_part(&page);
    assert!(forms.contains(&format!("<form method=\"post\" action=\"/pay/cancel?id={id}\">")), "{forms}");
    assert!(forms.contains(&format!("<form method=\"post\" action=\"/pay/simulate?id={id}\">")), "{forms}");
    assert!(forms.contains("<details") && forms.contains("Yes, cancel payment"), "Cancel asks first: {forms}");

    let resp = post_form(&h, &format!("/pay/cancel?id={id}"));
    assert_eq!(resp.status, 303, "{}", text(&resp));
    assert_eq!(header(&resp, "location"), Some(format!("/pay?id={id}").as_str()));
    assert_eq!(header(&resp, "cache-control"), Some("no-store"));
    assert_eq!(h.get(&format!("/v1/orders/{id}")).json()["order"]["status"], "CANCELLED");

    // The page it leads to shows the outcome and the way back, and no buttons.
    let page = html(&h, &id);
    assert_eq!(text_of(&page, "result-title"), "Cancelled");
    let back = tag(&page, "back-to-shop");
    assert!(back.contains("href=\"https://shop.example/return?ref=A-7&amp;order_id="), "{back}");
    assert_eq!(script_free_part(&page), "", "no forms on a cancelled order");

    // A second post (a reload, a second tab) changes nothing and leads to the same page.
    let again = post_form(&h, &format!("/pay/cancel?id={id}"));
    assert_eq!((again.status, header(&again, "location")), (303, Some(format!("/pay?id={id}").as_str())));
    let unknown = post_form(&h, "/pay/cancel?id=00000000-0000-7000-8000-000000000000");
    assert_eq!((unknown.status, header(&unknown, "content-type")), (404, Some("text/html; charset=utf-8")));
}

#[test]
fn without_javascript_a_sandbox_payment_is_a_form_too_at_the_configured_page_path() {
    let h = harness_with(Environment::Sandbox, |config| {
        config.payment_page_url = "https://pay.shop.example/checkout".into();
    });
    let id = create(&h, json!({"currency": "USD", "amount": 10}));
    let page = html_at(&h, &format!("/checkout?id={id}"));
    let forms = script_free_part(&page);
    assert!(forms.contains(&format!("action=\"/checkout/simulate?id={id}\"")), "{forms}");
    assert!(forms.contains(&format!("action=\"/checkout/cancel?id={id}\"")), "{forms}");

    let resp = post_form(&h, &format!("/checkout/simulate?id={id}"));
    assert_eq!((resp.status, header(&resp, "location")), (303, Some(format!("/checkout?id={id}").as_str())));
    assert_eq!(h.get(&format!("/v1/orders/{id}")).json()["order"]["status"], "PAID");
    assert_eq!(script_free_part(&html(&h, &id)), "", "no forms on a paid order");
    // The page's own script still gets JSON from the same routes.
    let id = create(&h, json!({"currency": "USD", "amount": 10}));
    let json = post(&h, &format!("/checkout/cancel?id={id}"));
    assert_eq!(json.status, 200);
    assert_eq!(json.json()["status"], "CANCELLED");
}

#[test]
fn without_a_callback_there_is_no_redirect() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 3}));
    let body = post(&h, &format!("/pay/simulate?id={id}")).json();
    assert_eq!(body["status"], "PAID");
    assert_eq!(body["redirect_url"], Value::Null);
}

#[test]
fn partial_and_unconfirmed_payments_show_what_is_due() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 10, "pay_currency": "USDT"}));
    let total = number(&status(&h, &id)["pay_amount"]);
    let partial = h.svc.handle(
        &WireRequest::new("POST", &format!("/v1/orders/{id}/simulate"))
            .header("x-api-key", &h.key)
            .body(r#"{"action":"partial"}"#),
    );
    assert_eq!(partial.status, 200, "{}", text(&partial));

    let public = status(&h, &id);
    assert_eq!(public["status"], "PENDING");
    let due = number(&public["due_amount"]);
    assert!(due > Decimal::ZERO && due < total, "due {due} of {total}");
    let body = html(&h, &id);
    assert_eq!(text_of(&body, "status"), "Partly paid");
    assert_eq!(text_of(&body, "amount-label"), "Amount still due");
    assert_eq!(text_of(&body, "crypto-amount"), due.to_string());
    assert!(tag(&body, "pay-panel").contains("class=\"pay\""), "the QR code, of what is due, is shown");
    assert!(tag(&body, "qr").contains(&format!("data-amount=\"{due}\"")));
    assert!(!is_hidden(&body, "received"));
    assert_eq!(text_of(&body, "received-amount"), "5.00 of 10.00 USD");
    assert!(is_hidden(&body, "cancel"), "a PENDING order cannot be cancelled");
    assert!(!is_hidden(&body, "simulate-pay"));

    // The rest, unconfirmed: nothing is due, the page waits for the confirmation.
    let rest = h.svc.handle(
        &WireRequest::new("POST", &format!("/v1/orders/{id}/simulate"))
            .header("x-api-key", &h.key)
            .body(r#"{"action":"pay","confirmed":false}"#),
    );
    assert_eq!(rest.status, 200, "{}", text(&rest));
    let public = status(&h, &id);
    assert_eq!((public["status"].as_str(), number(&public["due_amount"])), (Some("PENDING"), Decimal::ZERO));
    let body = html(&h, &id);
    assert!(is_hidden(&body, "pay-panel") && !is_hidden(&body, "result"));
    assert_eq!(text_of(&body, "result-title"), "Payment detected");
    assert!(is_hidden(&body, "simulate-pay"), "nothing left to simulate from the page");
}

#[test]
fn an_expired_order_shows_expired_and_no_controls() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 10, "callback_url": CALLBACK}));
    h.clock.advance_ms(THIRTY_MIN_MS + 1);
    h.svc.expire_due(Timestamp(T0_MS + THIRTY_MIN_MS + 1)).expect("expire");
    let public = status(&h, &id);
    assert_eq!(public["status"], "EXPIRED");
    assert_eq!(public["redirect_url"], Value::Null, "only PAID and CANCELLED go back to the merchant");
    let body = html(&h, &id);
    assert_eq!(text_of(&body, "result-title"), "Expired");
    assert_eq!(text_of(&body, "countdown"), "00:00");
    assert!(is_hidden(&body, "pay-panel") && is_hidden(&body, "simulate-pay") && is_hidden(&body, "cancel"));
    assert_error(&post(&h, &format!("/pay/cancel?id={id}")), 400, "ORDER_STATE_INVALID");
}

#[test]
fn an_expired_order_tells_a_customer_who_already_paid_what_to_do() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 10}));
    assert!(is_hidden(&html(&h, &id), "expired-help"), "no such hint while the order is open");
    h.clock.advance_ms(THIRTY_MIN_MS + 1);
    h.svc.expire_due(Timestamp(T0_MS + THIRTY_MIN_MS + 1)).expect("expire");
    let body = html(&h, &id);
    assert!(!is_hidden(&body, "expired-help"));
    let help = text_of(&body, "expired-help");
    for phrase in [
        "Already sent the coins?",
        "do not send them again",
        "Contact the merchant with your transaction ID (txid)",
        "still recorded, and the merchant can accept it",
    ] {
        assert!(help.contains(phrase), "{phrase:?} in {help:?}");
    }
    assert_eq!(text_of(&body, "order-id"), id, "the order number the hint refers to");
}

#[test]
fn unknown_orders_get_the_not_found_page() {
    let h = harness();
    for path in ["/pay?id=00000000-0000-4000-8000-000000000000", "/pay?id=not-a-uuid", "/pay", "/pay/?id="] {
        let resp = h.svc.handle(&WireRequest::new("GET", path));
        assert_eq!(resp.status, 404, "{path}");
        assert_eq!(header(&resp, "content-type"), Some("text/html; charset=utf-8"), "{path}");
        let body = text(&resp);
        assert!(body.contains("<h1>Payment not found</h1>") && body.contains("<style>"), "{path}: {body}");
        assert!(!body.contains("<script"), "{path}");
    }
    for (method, path) in [("GET", "/pay/status"), ("POST", "/pay/cancel"), ("POST", "/pay/simulate")] {
        let resp = h.svc.handle(&WireRequest::new(method, &format!("{path}?id=00000000-0000-4000-8000-000000000000")));
        // As Get Order answers an unknown id (spec: 400 ORDER_NOT_VALID).
        assert_error(&resp, 400, "ORDER_NOT_VALID");
    }
}

#[test]
fn orders_of_the_other_environment_are_not_found() {
    let sandbox = harness();
    let id = create(&sandbox, json!({"currency": "USD", "amount": 10}));
    let live = coinorder::Service::open(sandbox.db(), {
        let mut config = config(Environment::Live, &sandbox.clock);
        config.payment_page_url = "https://pay.example/pay".into();
        config
    })
    .expect("open live");
    let resp = live.handle(&WireRequest::new("GET", &format!("/pay?id={id}")));
    assert_eq!(resp.status, 404);
}

#[derive(Debug)]
struct Wallet;

impl AddressSource for Wallet {
    fn deposit_address(&self, order_id: &str, _currency: &str, _amount: Decimal) -> Result<DepositAddress, String> {
        Ok(DepositAddress { address: format!("bc1qlivewallet{}", &order_id[..8]), payment_uri: None })
    }
}

#[test]
fn live_pages_have_no_sandbox_controls_but_can_be_cancelled() {
    let h = harness_with(Environment::Live, |config| config.address_source = Some(Arc::new(Wallet)));
    h.svc.set_rate("BTC", "USD", Decimal::from(50_000), None).expect("rate");
    let id = create(&h, json!({"currency": "USD", "amount": 100, "pay_currency": "BTC", "callback_url": CALLBACK}));
    let body = html(&h, &id);
    assert!(!body.contains("id=\"sandbox-banner\""));
    assert!(!body.contains("SANDBOX"));
    assert!(is_hidden(&body, "simulate-pay"));
    assert!(!is_hidden(&body, "cancel"), "the customer may cancel a NEW order in live too");
    assert_eq!(text_of(&body, "crypto-amount"), "0.002");
    assert!(text_of(&body, "address").starts_with("bc1qlivewallet"));
    assert!(tag(&body, "open-wallet").contains("href=\"bitcoin:bc1qlivewallet"));
    assert_eq!(status(&h, &id)["sandbox"], json!(false));

    // Simulation does not exist in live, not even from the page, whatever the id.
    for path in [format!("/pay/simulate?id={id}"), "/pay/simulate?id=nope".to_string(), "/pay/simulate".to_string()] {
        let resp = post(&h, &path);
        assert_eq!(
            (resp.status, resp.json()["error_code"].clone()),
            (404, json!("Not Found")),
            "{path}: {}",
            text(&resp)
        );
    }
    assert_eq!(status(&h, &id)["status"], "NEW");

    let cancelled = post(&h, &format!("/pay/cancel?id={id}")).json();
    assert_eq!(cancelled["status"], "CANCELLED");
    assert!(cancelled["redirect_url"].as_str().expect("redirect").ends_with("&status=CANCELLED"));
}

#[test]
fn a_live_order_without_an_address_says_so_instead_of_a_qr_code() {
    let h = harness_with(Environment::Live, |_| {});
    h.svc.set_rate("USDT", "USD", Decimal::ONE, None).expect("rate");
    let id = create(&h, json!({"currency": "USD", "amount": 10, "pay_currency": "USDT"}));
    let body = html(&h, &id);
    assert!(body.contains("id=\"address-missing\""));
    assert!(!body.contains("<svg"), "no QR code of an empty URI");
    assert!(!body.contains("id=\"open-wallet\""));
}

#[test]
fn the_page_cannot_be_framed_and_finished_orders_cannot_be_simulated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let service =
        coinorder::Service::open(dir.path().join("t.db"), coinorder::Config::new(coinorder::Environment::Sandbox))
            .expect("open");
    let key = service
        .create_key(coinorder::NewApiKey {
            user_id: 1,
            environment: coinorder::Environment::Sandbox,
            webhook_url: None,
        })
        .expect("key");
    let created = service.handle(
        &coinorder::WireRequest::new("POST", "/v1/orders")
            .header("x-api-key", key.plain_key.expose())
            .body(r#"{"currency":"USD","amount":5}"#),
    );
    let order_id = created.json()["data"]["order_id"].as_str().expect("order id").to_string();
    let page = service.handle(&coinorder::WireRequest::new("GET", &format!("/pay?id={order_id}")));
    let header = |name: &str| page.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    assert_eq!(header("x-frame-options").as_deref(), Some("DENY"));
    assert_eq!(header("content-security-policy").as_deref(), Some("frame-ancestors 'none'"));
    let cancel = service.handle(&coinorder::WireRequest::new("POST", &format!("/pay/cancel?id={order_id}")));
    assert_eq!(cancel.status, 200);
    let simulate = service.handle(&coinorder::WireRequest::new("POST", &format!("/pay/simulate?id={order_id}")));
    assert_eq!(simulate.status, 400);
    assert_eq!(simulate.json()["error_code"], "ORDER_STATE_INVALID");
    assert!(service.order_payments(&order_id).expect("payments").is_empty());
}

#[test]
fn simulate_clicked_twice_at_once_pays_the_invoice_once() {
    // Two tabs, or a double click: each "pay what is due" is decided inside its own
    // payment's transaction, so the second finds nothing due and pays nothing.
    let h = harness();
    for round in 0..5 {
        let id = create(&h, json!({"currency": "USD", "amount": 10, "pay_currency": "USDT"}));
        let barrier = std::sync::Barrier::new(2);
        let answers: Vec<WireResponse> = std::thread::scope(|scope| {
            let clicks: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        post(&h, &format!("/pay/simulate?id={id}"))
                    })
                })
                .collect();
            clicks.into_iter().map(|click| click.join().expect("click")).collect()
        });
        let mut statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 400], "round {round}: {:?}", answers.iter().map(text).collect::<Vec<_>>());
        let payments = h.svc.order_payments(&id).expect("payments");
        assert_eq!(payments.len(), 1, "round {round}: paid once");
        assert_eq!(payments[0].amount, Decimal::TEN);
        let now = status(&h, &id);
        assert_eq!((now["status"].clone(), now["receive_amount"].clone()), (json!("PAID"), json!(10)));
    }
}

#[test]
fn the_page_is_served_at_the_path_of_the_configured_payment_page_url_too() {
    let h = harness_with(Environment::Sandbox, |config| {
        config.payment_page_url = "https://pay.shop.example/checkout/".into();
    });
    let created = h.create(&json!({"currency": "USD", "amount": 10, "callback_url": CALLBACK}));
    let id = created["data"]["order_id"].as_str().expect("order_id").to_string();
    let payment_url = created["payment_url"].as_str().expect("payment_url");
    assert!(payment_url.starts_with("https://pay.shop.example/checkout"), "{payment_url}");
    for page in [format!("/checkout?id={id}"), format!("/checkout/?id={id}"), format!("/pay?id={id}")] {
        let resp = h.svc.handle(&WireRequest::new("GET", &page));
        assert_eq!((resp.status, header(&resp, "content-type")), (200, Some("text/html; charset=utf-8")), "{page}");
    }
    let resp = h.svc.handle(&WireRequest::new("GET", &format!("/checkout/status?id={id}")));
    assert_eq!(resp.json()["status"], "NEW", "{}", text(&resp));
    let paid = post(&h, &format!("/checkout/simulate?id={id}")).json();
    assert_eq!(paid["status"], "PAID");
    assert!(paid["redirect_url"].as_str().expect("redirect").ends_with("&status=PAID"));
    assert_eq!(h.svc.handle(&WireRequest::new("GET", "/elsewhere")).status, 404);

    // A page URL that points into the API never takes an API route over.
    let h =
        harness_with(Environment::Sandbox, |config| config.payment_page_url = "http://127.0.0.1:1/v1/orders".into());
    let created = h.create(&json!({"currency": "USD", "amount": 1}));
    assert_eq!(created["status"], json!(201));
    let resp = h.svc.handle(&WireRequest::new("GET", "/v1/orders/status?id=x").header("x-api-key", &h.key));
    assert_eq!(resp.json()["error_code"], "ORDER_NOT_VALID", "{}", text(&resp));
}

#[derive(Debug)]
struct TokenWallet;

impl AddressSource for TokenWallet {
    fn deposit_address(&self, order_id: &str, currency: &str, _amount: Decimal) -> Result<DepositAddress, String> {
        let address = match currency {
            "BTC" => format!("bc1qlivewallet{}", &order_id[..8]),
            _ => "0x2222222222222222222222222222222222222222".to_string(),
        };
        Ok(DepositAddress { address, payment_uri: None })
    }
}

/// Every coin an order may be paid in (the page names the others too: see the unit tests).
#[test]
fn every_coin_names_the_network_to_send_on() {
    let h = harness();
    for (coin, network) in [
        ("BTC", "Bitcoin testnet"),
        ("ETH", "Sepolia test network"),
        ("USDT", "Sepolia test network (ERC-20)"),
        ("USDC", "Sepolia test network (ERC-20)"),
    ] {
        let id = create(&h, json!({"currency": "USD", "amount": 10, "pay_currency": coin}));
        let body = html(&h, &id);
        assert_eq!(text_of(&body, "network"), network, "{coin}");
        assert!(text_of(&body, "network-note").starts_with(&format!("Send {coin} on this network only")), "{coin}");
        assert_eq!(status(&h, &id)["network"], json!(network), "{coin}");
    }

    let live = harness_with(Environment::Live, |config| config.address_source = Some(Arc::new(TokenWallet)));
    for (coin, network) in [
        ("BTC", "Bitcoin"),
        ("ETH", "Ethereum mainnet"),
        ("USDT", "Ethereum mainnet (ERC-20)"),
        ("USDC", "Ethereum mainnet (ERC-20)"),
    ] {
        live.svc.set_rate(coin, "USD", Decimal::from(1_000), None).expect("rate");
        let id = create(&live, json!({"currency": "USD", "amount": 10, "pay_currency": coin}));
        assert_eq!(text_of(&html(&live, &id), "network"), network, "{coin}");
        assert_eq!(status(&live, &id)["network"], json!(network), "{coin}");
    }
}

fn simulate(h: &Harness, id: &str, body: &str) {
    let resp = h
        .svc
        .handle(&WireRequest::new("POST", &format!("/v1/orders/{id}/simulate")).header("x-api-key", &h.key).body(body));
    assert_eq!(resp.status, 200, "{}", text(&resp));
}

/// The `d` of the QR code's path: what it encodes, drawn.
fn qr_path(html: &str) -> &str {
    let at = html.find("<path ").expect("QR path");
    let d = at + html[at..].find(" d=\"").expect("d") + 4;
    &html[d..d + html[d..].find('"').expect("end of d")]
}

#[test]
fn after_a_partial_payment_the_qr_code_asks_for_what_is_still_due() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 10, "pay_currency": "USDT"}));
    let before = html(&h, &id);
    let invoice_uri = status(&h, &id)["payment_uri"].as_str().expect("uri").to_string();
    assert!(tag(&before, "qr").contains(&format!("data-payment-uri=\"{}\"", invoice_uri.replace('&', "&amp;"))));
    simulate(&h, &id, r#"{"action":"partial"}"#);

    let public = status(&h, &id);
    let due = number(&public["due_amount"]);
    let address = public["address"].as_str().expect("address");
    // Built by the same function as the invoice's URI, for the amount due.
    let due_uri = payment_uri_for(Environment::Sandbox, "USDT", address, due);
    assert_eq!(public["due_payment_uri"], json!(due_uri));
    assert!(due_uri.ends_with("&uint256=5000000"), "{due_uri}");
    assert_ne!(due_uri, invoice_uri);
    let body = html(&h, &id);
    let escaped = due_uri.replace('&', "&amp;");
    assert!(tag(&body, "qr").contains(&format!("data-payment-uri=\"{escaped}\"")), "{}", tag(&body, "qr"));
    assert!(tag(&body, "qr").contains("data-amount=\"5\""));
    assert!(tag(&body, "open-wallet").contains(&format!("href=\"{escaped}\"")));
    assert!(tag(&body, "copy-amount").contains("data-copy=\"5\""));
    assert_eq!(text_of(&body, "crypto-amount"), "5");
    assert!(tag(&body, "pay-panel").contains("class=\"pay\""), "the QR code is shown");
    assert_ne!(qr_path(&body), qr_path(&before), "a new QR code was drawn");
}

#[derive(Debug)]
struct LabelWallet;

impl AddressSource for LabelWallet {
    fn deposit_address(&self, _order_id: &str, _currency: &str, amount: Decimal) -> Result<DepositAddress, String> {
        Ok(DepositAddress {
            address: "bc1qlabelwallet".into(),
            payment_uri: Some(format!("bitcoin:bc1qlabelwallet?amount={amount}&label=Shop")),
        })
    }
}

#[test]
fn a_uri_the_host_wrote_is_never_shown_for_the_wrong_amount() {
    let h = harness_with(Environment::Live, |config| config.address_source = Some(Arc::new(LabelWallet)));
    h.svc.set_rate("BTC", "USD", Decimal::from(50_000), None).expect("rate");
    let id = create(&h, json!({"currency": "USD", "amount": 100, "pay_currency": "BTC"}));
    assert_eq!(status(&h, &id)["due_payment_uri"], json!("bitcoin:bc1qlabelwallet?amount=0.002&label=Shop"));
    h.svc.record_payment(&id, "tx-half", Decimal::new(1, 3), true).expect("payment");
    let public = status(&h, &id);
    assert_eq!(public["status"], "PENDING");
    assert_eq!(public["due_payment_uri"], json!(""), "coinorder cannot rewrite the host's URI");
    let body = html(&h, &id);
    assert!(tag(&body, "pay-panel").contains("class=\"pay no-qr\""), "no QR code for the full amount");
    assert!(!body.contains("id=\"open-wallet\""));
    assert_eq!(text_of(&body, "crypto-amount"), "0.001");
}

#[test]
fn a_paid_order_shows_a_receipt_of_its_confirmed_payments() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 10, "pay_currency": "USDT"}));
    let open = status(&h, &id);
    assert_eq!((open["receipt"].clone(), open["return_url"].clone()), (Value::Null, Value::Null));
    assert!(is_hidden(&html(&h, &id), "receipt"));
    h.svc.record_payment(&id, "tx-first-half", Decimal::from(4), true).expect("first");
    h.clock.advance_ms(60_000);
    h.svc.record_payment(&id, "tx-rest", Decimal::from(6), false).expect("rest, unconfirmed");
    assert_eq!(status(&h, &id)["receipt"], Value::Null, "PENDING: no receipt yet");
    h.clock.advance_ms(60_000);
    h.svc.confirm_payment("tx-rest").expect("confirm");
    let paid_at = Timestamp(T0_MS + 120_000);

    let public = status(&h, &id);
    assert_eq!(public["status"], "PAID");
    assert_eq!(
        public["receipt"],
        json!({
            "amount": "10",
            "currency": "USDT",
            "paid_at": paid_at.to_iso(),
            "paid_at_t": paid_at.as_millis(),
            "paid_at_text": "2026-11-22 05:53 UTC",
            "payments": [{"txid": "tx-first-half", "amount": "4"}, {"txid": "tx-rest", "amount": "6"}],
        })
    );
    let recorded: Vec<String> = h
        .svc
        .order_payments(&id)
        .expect("payments")
        .into_iter()
        .filter(|p| p.state == coinorder::PaymentState::Confirmed)
        .map(|p| p.txid)
        .collect();
    assert_eq!(recorded, ["tx-first-half", "tx-rest"]);

    let body = html(&h, &id);
    assert!(!is_hidden(&body, "receipt") && !is_hidden(&body, "result"));
    assert_eq!(text_of(&body, "receipt-amount"), "10");
    assert_eq!(text_of(&body, "receipt-currency"), "USDT");
    assert_eq!(text_of(&body, "receipt-time"), "2026-11-22 05:53 UTC");
    assert!(tag(&body, "receipt-time").contains(&format!("datetime=\"{}\"", paid_at.to_iso())));
    assert_eq!(text_of(&body, "receipt-txids-label"), "Transaction IDs");
    assert!(
        body.contains("<li><code class=\"txid\">tx-first-half</code></li><li><code class=\"txid\">tx-rest</code></li>")
    );
    // No shop to go back to: the link is there for the script, hidden and without a target.
    assert!(is_hidden(&body, "back-to-shop") && !tag(&body, "back-to-shop").contains("href="));
}

#[test]
fn a_late_payment_accepted_by_the_merchant_is_on_the_receipt() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 10, "pay_currency": "USDT"}));
    h.clock.advance_ms(THIRTY_MIN_MS + 1);
    h.svc.expire_due(h.svc.now()).expect("expire");
    h.svc.record_payment(&id, "tx-late", Decimal::TEN, true).expect("late payment");
    assert_eq!(status(&h, &id)["status"], "EXPIRED");
    h.clock.advance_ms(5 * 60_000);
    h.svc.mark_paid(&id).expect("mark paid");
    let public = status(&h, &id);
    let receipt = public["receipt"].clone();
    assert_eq!(receipt["payments"], json!([{"txid": "tx-late", "amount": "10"}]));
    assert_eq!(receipt["paid_at_t"], json!(T0_MS + THIRTY_MIN_MS + 1 + 5 * 60_000), "when the merchant accepted it");
    // Nothing is asked for again: the late payment does not count, but the order is PAID.
    assert_eq!(number(&public["due_amount"]), Decimal::ZERO, "{public}");
    assert_eq!(public["due_payment_uri"], "", "{public}");
    assert_eq!(h.svc.amount_due(&id).expect("due"), Decimal::ZERO);
}

#[test]
fn back_to_the_shop_prefers_the_success_url() {
    let h = harness();
    let cases = [
        (
            json!({"success_url": "https://shop.example/thanks?cart=9", "callback_url": CALLBACK}),
            Some("https://shop.example/thanks?cart=9&order_id="),
        ),
        (json!({"callback_url": CALLBACK}), Some("https://shop.example/return?ref=A-7&order_id=")),
        (json!({"cancel_url": "https://shop.example/cancelled"}), None),
    ];
    for (urls, expected) in cases {
        let mut body = json!({"currency": "USD", "amount": 3, "webhook_url": WEBHOOK, "customer_email": EMAIL});
        body.as_object_mut().expect("object").extend(urls.as_object().expect("urls").clone());
        let id = create(&h, body);
        assert_eq!(status(&h, &id)["return_url"], Value::Null, "{urls}: nothing before PAID");
        let paid = post(&h, &format!("/pay/simulate?id={id}")).json();
        let page = html(&h, &id);
        match expected {
            Some(prefix) => {
                let url = paid["return_url"].as_str().unwrap_or_else(|| panic!("{urls}: return_url in {paid}"));
                assert_eq!(url, format!("{prefix}{id}&status=PAID"), "{urls}");
                assert!(!is_hidden(&page, "back-to-shop"), "{urls}");
                assert!(tag(&page, "back-to-shop").contains(&format!("href=\"{}\"", url.replace('&', "&amp;"))));
                assert_eq!(text_of(&page, "back-to-shop"), "Back to the shop");
            }
            None => {
                assert_eq!(paid["return_url"], Value::Null, "{urls}");
                assert!(is_hidden(&page, "back-to-shop"), "{urls}");
            }
        }
        let raw = paid.to_string();
        assert!(!raw.contains(WEBHOOK) && !raw.contains(EMAIL) && !page.contains(WEBHOOK) && !page.contains(EMAIL));
    }
}

#[test]
fn cancel_only_opens_a_confirmation_in_the_page() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 10}));
    let body = html(&h, &id);
    let cancel = tag(&body, "cancel");
    assert!(
        cancel.contains("aria-controls=\"cancel-confirm\"") && cancel.contains("aria-expanded=\"false\""),
        "{cancel}"
    );
    let dialog = tag(&body, "cancel-confirm");
    assert!(dialog.contains("role=\"alertdialog\"") && dialog.contains("aria-labelledby=\"cancel-confirm-title\""));
    assert!(is_hidden(&body, "cancel-confirm"), "closed until Cancel is pressed");
    assert_eq!(text_of(&body, "cancel-confirm-title"), "Cancel this payment?");
    assert_eq!(text_of(&body, "cancel-yes"), "Yes, cancel payment");
    assert_eq!(text_of(&body, "cancel-no"), "Keep paying");
    assert!(!body.contains("confirm("), "no window.confirm");
}

#[test]
fn the_style_has_focus_rings_reduced_motion_and_a_dark_theme() {
    let h = harness();
    let body = html(&h, &create(&h, json!({"currency": "USD", "amount": 10})));
    assert!(body.contains("a:focus-visible,button:focus-visible{outline:3px solid var(--focus)"));
    assert!(body.contains("@media (prefers-reduced-motion:reduce){\n*,*::before,*::after{animation:none!important;transition:none!important"));
    assert!(body.contains("@media (prefers-color-scheme:dark){\n:root{--bg:#0b0f19;"));
    assert!(body.contains("<meta name=\"color-scheme\" content=\"light dark\">"));
}

#[test]
fn the_merchant_name_of_the_key_stands_above_the_title_escaped() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 1, "title": "Mug"}));
    let before = html(&h, &id);
    assert!(!before.contains("data-testid=\"merchant-name\""), "no name set, none shown");
    assert_eq!(status(&h, &id)["merchant_name"], json!(null));

    let name = "Acme <Coffee> & Co";
    let key = h.svc.set_key_display_name(&h.key_id, Some(name)).expect("set name");
    assert_eq!(key.display_name.as_deref(), Some(name));
    let body = html(&h, &id);
    assert!(body.contains("data-testid=\"merchant-name\"><bdi>Acme &lt;Coffee&gt; &amp; Co</bdi> "), "{body}");
    let (name_at, title_at) = (body.find("data-testid=\"merchant-name\""), body.find("data-testid=\"merchant-title\""));
    assert!(name_at < title_at && name_at.is_some(), "the name comes before the title");
    assert_eq!(status(&h, &id)["merchant_name"], json!(name));

    for bad in ["", "   ", "a\u{7}b"] {
        let error = h.svc.set_key_display_name(&h.key_id, Some(bad)).expect_err("refused");
        assert!(error.to_string().contains("display_name"), "{error}");
    }
    let too_long = "x".repeat(coinorder::DISPLAY_NAME_MAX_CHARS + 1);
    assert!(h.svc.set_key_display_name(&h.key_id, Some(&too_long)).is_err());
    h.svc.set_key_display_name(&h.key_id, None).expect("clear");
    assert_eq!(status(&h, &id)["merchant_name"], json!(null));
}

#[test]
fn direction_marks_in_merchant_text_cannot_turn_the_page_or_tab_around() {
    // U+202E turns the text after it right to left: "moc.live" would read "evil.com".
    let h = harness();
    h.svc.set_key_display_name(&h.key_id, Some("\u{202E}moc.live\u{202C} Shop")).expect("set name");
    let id = create(&h, json!({"currency": "USD", "amount": 25, "title": "Mug\u{202E}"}));
    let body = html(&h, &id);
    // In the page the name is isolated from the words after it...
    assert!(body.contains("data-testid=\"merchant-name\"><bdi>\u{202E}moc.live\u{202C} Shop</bdi> "), "{body}");
    // ...and the tab's title, which has no markup, leaves the marks out.
    let title = &body[body.find("<title>").expect("title")..body.find("</title>").expect("end")];
    assert_eq!(title, "<title>Mug \u{2014} 25 USDT");
}

#[test]
fn head_asks_for_the_page_as_get_does() {
    // Link previews and uptime checks ask with HEAD (RFC 9110 §9.1); the API stays GET only.
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 1}));
    let head = h.svc.handle(&WireRequest::new("HEAD", &format!("/pay?id={id}")));
    let get = h.svc.handle(&WireRequest::new("GET", &format!("/pay?id={id}")));
    assert_eq!((head.status, head.header_value("content-type")), (200, get.header_value("content-type")));
    assert_eq!(h.svc.handle(&WireRequest::new("HEAD", "/pay?id=00000000-0000-0000-0000-000000000000")).status, 404);
    assert_eq!(h.svc.handle(&WireRequest::new("HEAD", &format!("/v1/orders/{id}"))).status, 404);
}

#[test]
fn a_page_that_fails_keeps_its_cause_for_the_log_and_out_of_the_page() {
    let h = harness();
    let id = create(&h, json!({"currency": "USD", "amount": 5}));
    let mut raw = common::backend::RawDb::open(&h.db());
    raw.batch("ALTER TABLE orders RENAME TO orders_elsewhere");
    let page = h.svc.handle(&WireRequest::new("GET", &format!("/pay?id={id}")));
    let status = h.svc.handle(&WireRequest::new("GET", &format!("/pay/status?id={id}")));
    raw.batch("ALTER TABLE orders_elsewhere RENAME TO orders");
    for failed in [&page, &status] {
        assert_eq!(failed.status, 500, "{}", text(failed));
        let cause = failed.internal_detail.clone().unwrap_or_default();
        assert!(cause.contains("orders"), "the log's cause: {cause:?}");
        assert!(!text(failed).contains("orders_elsewhere") && !text(failed).contains("no such"), "{}", text(failed));
    }
}
