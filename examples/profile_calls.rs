//! One kind of call repeated COUNT times on a fresh sandbox service (500 orders stored,
//! synchronous=NORMAL, rate limiting off), for `scripts/count-instructions` to run under
//! valgrind's callgrind: instructions, unlike seconds, do not depend on what else the
//! machine is doing, so two builds can be compared call by call on a noisy machine.
//!
//! ```sh
//! cargo run --release --example profile_calls -- MODE COUNT
//! ```
//!
//! MODE is one of `get` (typed `get_order`), `handle-get` (`Service::handle`
//! `GET /v1/orders/<id>`), `list` (typed `list_orders`, 50), `handle-list`
//! (`GET /v1/orders?limit=50`), `create` (typed
//! `create_order`) or `handle-post` (`POST /v1/orders`). Prints the bytes the calls
//! returned, so nothing is optimized away.

use std::error::Error;

#[path = "../benches/support/mod.rs"]
mod support;

use coinorder::WireRequest;
use support::Shop;

const USAGE: &str = "usage: profile_calls get|handle-get|list|handle-list|create|handle-post COUNT";

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, count] = args.as_slice() else {
        return Err(USAGE.into());
    };
    let count: usize = count.parse().map_err(|_| USAGE)?;

    let dir = tempfile::tempdir()?;
    let Shop { service, merchant, key, order } = Shop::open(dir.path())?;
    let mut ids = Vec::new();
    for _ in 0..500 {
        ids.push(service.create_order(&merchant, &order)?.order.order.order_id);
    }
    let request = |method: &str, path: String, body: &[u8]| WireRequest {
        method: method.into(),
        path,
        headers: vec![("x-api-key".into(), key.clone()), ("content-type".into(), "application/json".into())],
        body: body.to_vec(),
        client: Some(std::net::IpAddr::from([127, 0, 0, 1])),
    };

    let list_50 = coinorder::ListOrders { limit: 50, ..Default::default() };
    let mut bytes = 0;
    for i in 0..count {
        let id = &ids[i % ids.len()];
        bytes += match mode.as_str() {
            "get" => service.get_order(&merchant, id)?.order.order_id.len(),
            "handle-get" => service.handle(&request("GET", format!("/v1/orders/{id}"), b"")).body.len(),
            "list" => service.list_orders(&merchant, &list_50)?.orders.len(),
            "handle-list" => service.handle(&request("GET", "/v1/orders?limit=50".into(), b"")).body.len(),
            "create" => service.create_order(&merchant, &order)?.response_body.len(),
            "handle-post" => {
                let body = br#"{"currency":"USD","amount":"10.00"}"#;
                service.handle(&request("POST", "/v1/orders".into(), body)).body.len()
            }
            _ => return Err(USAGE.into()),
        };
    }
    println!("{bytes}");
    Ok(())
}
