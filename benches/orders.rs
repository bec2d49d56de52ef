//! Throughput of the core operations on a real SQLite file. Prints numbers; asserts
//! nothing. Run with `cargo bench --bench orders`.

use std::time::{Duration, Instant};

use coinorder::{Config, CreateOrder, Environment, ListOrders, NewApiKey, RateLimit, Service, WireRequest};

fn rate(count: usize, elapsed: Duration) -> String {
    format!("{:>9.0}/s", count as f64 / elapsed.as_secs_f64())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for synchronous_full in [true, false] {
        let dir = tempfile::tempdir()?;
        let mut config = Config::new(Environment::Sandbox);
        config.rate_limit = RateLimit::OFF;
        config.sqlite.synchronous_full = synchronous_full;
        let service = Service::open(dir.path().join("bench.db"), config)?;
        let key = service.create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None })?;
        let merchant = service.authenticate(Some(key.plain_key.expose()))?;
        let sync = if synchronous_full { "FULL" } else { "NORMAL" };

        let creates = 3_000;
        let request = CreateOrder { currency: "USD".into(), amount: "19.99".parse()?, ..Default::default() };
        let started = Instant::now();
        let mut ids = Vec::with_capacity(creates);
        for _ in 0..creates {
            ids.push(service.create_order(&merchant, &request)?.order.order.order_id);
        }
        println!("create_order        (synchronous={sync:<6}) {}", rate(creates, started.elapsed()));

        let gets = 30_000;
        let started = Instant::now();
        for i in 0..gets {
            service.get_order(&merchant, &ids[i % ids.len()])?;
        }
        println!("get_order           (synchronous={sync:<6}) {}", rate(gets, started.elapsed()));

        let pages = 5_000;
        let query = ListOrders { limit: 50, ..Default::default() };
        let started = Instant::now();
        for _ in 0..pages {
            service.list_orders(&merchant, &query)?;
        }
        println!("list_orders, 50/page (synchronous={sync:<6}) {}", rate(pages, started.elapsed()));

        let requests = 20_000;
        let started = Instant::now();
        for i in 0..requests {
            let request = WireRequest::new("GET", &format!("/v1/orders/{}", ids[i % ids.len()]))
                .header("x-api-key", key.plain_key.expose());
            let response = service.handle(&request);
            if response.status != 200 {
                return Err(format!("unexpected status {}", response.status).into());
            }
        }
        println!("handle GET order    (synchronous={sync:<6}) {}", rate(requests, started.elapsed()));
    }
    Ok(())
}
