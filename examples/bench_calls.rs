//! The Rust twin of `benches/c/calls.c`: the same calls without the C ABI, for
//! `scripts/bench-c` to compare. N order creations (each a distinct `merchant_order_id`,
//! doing what `coinorder_order_create` does) and M `GET /v1/orders/<id>` through
//! `Service::handle`, on one sandbox service with rate limiting off. Prints one line:
//! `rust create_per_s=<x> handle_get_per_s=<y>`.
//!
//! Run with `cargo run --release --example bench_calls -- DBPATH ROUNDS_CREATE ROUNDS_GET`.

use std::error::Error;
use std::time::Instant;

use coinorder::{parse_create_order, Config, NewApiKey, Service, WireRequest};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, db, creates, gets] = args.as_slice() else {
        return Err("usage: bench_calls DBPATH ROUNDS_CREATE ROUNDS_GET".into());
    };
    let (creates, gets): (u32, u32) = (creates.parse()?, gets.parse()?);
    if creates == 0 || gets == 0 {
        return Err("ROUNDS_CREATE and ROUNDS_GET must be positive".into());
    }

    let config = Config::from_options(&serde_json::json!({"rate_limit": 0}))?;
    let service = Service::open(db, config)?;
    let created_key =
        service.create_key(NewApiKey { user_id: 1, environment: service.environment(), webhook_url: None })?;
    let key = created_key.plain_key.expose();

    let mut first_order = None;
    let start = Instant::now();
    for i in 0..creates {
        let body = format!(r#"{{"currency":"USD","amount":19.99,"merchant_order_id":"bench-{i}"}}"#);
        let merchant = service.authenticate(Some(key))?;
        let request = parse_create_order(body.as_bytes())?;
        let created = service.create_order(&merchant, &request)?;
        // The body `coinorder_order_create` hands over: the one the core wrote.
        std::hint::black_box(&created.response_body);
        if first_order.is_none() {
            first_order = Some(created.order.order.order_id.clone());
        }
    }
    let create_secs = start.elapsed().as_secs_f64();

    let order_id = first_order.ok_or("no order was created")?;
    let path = format!("/v1/orders/{order_id}");
    let start = Instant::now();
    for _ in 0..gets {
        let response = service.handle(&WireRequest::new("GET", &path).header("x-api-key", key));
        if response.status != 200 {
            return Err(format!("GET {path} -> {}", response.status).into());
        }
        std::hint::black_box(&response.body);
    }
    let get_secs = start.elapsed().as_secs_f64();

    println!(
        "rust create_per_s={:.1} handle_get_per_s={:.1}",
        f64::from(creates) / create_secs,
        f64::from(gets) / get_secs
    );
    Ok(())
}
