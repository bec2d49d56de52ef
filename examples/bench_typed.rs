//! The Rust side of `benches/python/bench.py`: the same three typed calls the Python
//! binding makes, straight on `coinorder::Service`, for `scripts/bench-python` to compare.
//! CREATES order creations (each a distinct `merchant_order_id`, one transaction each),
//! then GETS `get_order` cycling over the created ids, then LISTS `list_orders` with a
//! limit of 50, on one sandbox service with rate limiting off. Prints one line:
//! `rust create_per_s=<x> get_per_s=<y> list50_per_s=<z>`.
//!
//! Run with `cargo run --release --example bench_typed -- DBPATH CREATES GETS LISTS`.

use std::error::Error;
use std::hint::black_box;
use std::time::Instant;

use coinorder::{Config, CreateOrder, Environment, ListOrders, NewApiKey, Service};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, db, creates, gets, lists] = args.as_slice() else {
        return Err("usage: bench_typed DBPATH CREATES GETS LISTS".into());
    };
    let (creates, gets, lists): (u32, u32, u32) = (creates.parse()?, gets.parse()?, lists.parse()?);
    if creates == 0 || gets == 0 || lists == 0 {
        return Err("CREATES, GETS and LISTS must be positive".into());
    }

    let config = Config::from_options(&serde_json::json!({"rate_limit": 0}))?;
    let service = Service::open(db, config)?;
    let key = service.create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None })?;
    let merchant = service.authenticate(Some(key.plain_key.expose()))?;

    let amount = "19.99".parse()?;
    let mut ids = Vec::with_capacity(creates as usize);
    let start = Instant::now();
    for i in 0..creates {
        let request = CreateOrder {
            merchant_order_id: Some(format!("bench-{i}")),
            currency: "USD".into(),
            amount,
            title: Some(format!("T-shirt {i}")),
            ..Default::default()
        };
        let created = service.create_order(&merchant, &request)?;
        ids.push(created.order.order.order_id.clone());
        black_box(&created);
    }
    let create_secs = start.elapsed().as_secs_f64();

    let start = Instant::now();
    for i in 0..gets as usize {
        let found = service.get_order(&merchant, &ids[i % ids.len()])?;
        black_box(&found);
    }
    let get_secs = start.elapsed().as_secs_f64();

    let query = ListOrders { limit: 50, ..Default::default() };
    let start = Instant::now();
    for _ in 0..lists {
        let page = service.list_orders(&merchant, &query)?;
        if page.orders.len() != (creates as usize).min(50) {
            return Err(format!("list_orders returned {} orders", page.orders.len()).into());
        }
        black_box(&page);
    }
    let list_secs = start.elapsed().as_secs_f64();

    println!(
        "rust create_per_s={:.1} get_per_s={:.1} list50_per_s={:.1}",
        f64::from(creates) / create_secs,
        f64::from(gets) / get_secs,
        f64::from(lists) / list_secs
    );
    Ok(())
}
