//! The main job end to end on the embedded default: open a SQLite file, issue a sandbox
//! API key, create an order over the spec's HTTP API (`Service::handle`), read it back
//! with its invoice, have the (simulated) customer pay it, and see the events that the
//! merchant's webhook receives.
//!
//! Run with `cargo run --example quickstart`.

use coinorder::{Config, Environment, NewApiKey, Service, WireRequest};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("coinorder-quickstart-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("coinorder.db");
    let service = Service::open(&db, Config::new(Environment::Sandbox))?;
    println!("database: {}", db.display());

    // The merchant portal's "Generate Key": the plain key is shown once.
    let key = service.create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None })?;
    println!("api key {} ({})", key.key.id, key.key.key_hint);
    let api_key = key.plain_key.expose();

    // POST /v1/orders, exactly as a merchant backend would send it.
    let body = r#"{"merchant_order_id":"cart-1001","currency":"NGN","amount":15000.50,
                   "title":"Two coffees","pay_currency":"USDT",
                   "callback_url":"https://shop.example/thanks"}"#;
    let created = service.handle(
        &WireRequest::new("POST", "/v1/orders")
            .header("x-api-key", api_key)
            .header("content-type", "application/json")
            .body(body),
    );
    println!("\nPOST /v1/orders -> {}\n{}", created.status, pretty(&created.json()));
    let order_id = created.json()["data"]["order_id"].as_str().unwrap_or_default().to_string();

    // The same request again is an idempotent replay, not a second order.
    let replay = service.handle(&WireRequest::new("POST", "/v1/orders").header("x-api-key", api_key).body(body));
    println!("\nretry of the same request -> {} (same order: {})", replay.status, replay.body == created.body);

    let got = service.handle(&WireRequest::new("GET", &format!("/v1/orders/{order_id}")).header("x-api-key", api_key));
    println!("\nGET /v1/orders/{order_id} -> {}\n{}", got.status, pretty(&got.json()));

    // The customer pays half, then the rest (sandbox simulation; live payments come from
    // the host's chain watcher through Service::record_payment).
    for action in [r#"{"action":"partial"}"#, r#"{"action":"pay"}"#] {
        let paid = service.handle(
            &WireRequest::new("POST", &format!("/v1/orders/{order_id}/simulate"))
                .header("x-api-key", api_key)
                .body(action),
        );
        let body = paid.json();
        println!(
            "\nsimulate {action} -> {}: order {}, received {} {}",
            paid.status,
            body["order"]["status"],
            body["invoice"]["receive_amount"],
            body["invoice"]["receive_currency"]
        );
    }
    for event in service.order_events(&order_id)? {
        println!(
            "event #{} {}: {} -> {} (webhook-id {})",
            event.sequence, event.event_type, event.previous_status, event.status, event.event_id
        );
    }

    let listed = service.handle(&WireRequest::new("GET", "/v1/orders?limit=5").header("x-api-key", api_key));
    println!(
        "\nGET /v1/orders?limit=5 -> {} ({} order)",
        listed.status,
        listed.json()["orders"].as_array().map_or(0, Vec::len)
    );

    let bad = service.handle(
        &WireRequest::new("POST", "/v1/orders")
            .header("x-api-key", api_key)
            .body(r#"{"currency":"USD","amount":1.999}"#),
    );
    println!("\nan amount with too many decimals -> {}\n{}", bad.status, pretty(&bad.json()));

    let unauthorized = service.handle(&WireRequest::new("GET", "/v1/orders"));
    println!("\nno x-api-key -> {} {}", unauthorized.status, unauthorized.json()["error_code"]);

    drop(service);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}
