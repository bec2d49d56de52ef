//! JSON rendering of the Get Order and Get Orders bodies, as `handle` writes them
//! (`render::get_response_json`: straight from the typed order into text), against
//! serde_json's own serializer writing the same document from a `Value` built once
//! outside the timing (the baseline: serialization alone, no conversion). On real orders
//! read back from a service. Interleaved rounds; prints medians and the spread of the
//! per-round ratios. Run with `cargo bench --bench render`.

use std::time::Instant;

#[path = "support/mod.rs"]
mod support;

use coinorder::{render, ListOrders};
use support::Shop;

/// Nanoseconds per call of `work`, over `calls` calls.
fn per_call(calls: u32, mut work: impl FnMut() -> usize) -> f64 {
    let started = Instant::now();
    let mut bytes = 0;
    for _ in 0..calls {
        bytes += work();
    }
    std::hint::black_box(bytes);
    started.elapsed().as_nanos() as f64 / f64::from(calls)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let Shop { service, merchant, order: request, .. } = Shop::open(dir.path())?;
    let mut last = String::new();
    for _ in 0..60 {
        last = service.create_order(&merchant, &request)?.order.order.order_id;
    }
    let order = service.get_order(&merchant, &last)?;
    let page = service.list_orders(&merchant, &ListOrders { limit: 50, ..Default::default() })?;
    let (order_value, page_value) = (render::get_response(&order), render::list_response(&page));
    assert_eq!(order_value.to_string(), render::get_response_json(&order));
    assert_eq!(page_value.to_string(), render::list_response_json(&page));

    for (what, calls, baseline, ours) in [
        (
            "Get Order body",
            20_000,
            &(|| order_value.to_string().len()) as &dyn Fn() -> usize,
            &(|| render::get_response_json(&order).len()) as &dyn Fn() -> usize,
        ),
        (
            "Get Orders body, 50 orders",
            1_000,
            &(|| page_value.to_string().len()) as &dyn Fn() -> usize,
            &(|| render::list_response_json(&page).len()) as &dyn Fn() -> usize,
        ),
    ] {
        let (mut serde_json_ns, mut coinorder_ns, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..9 {
            let o = per_call(calls, baseline);
            let n = per_call(calls, ours);
            serde_json_ns.push(o);
            coinorder_ns.push(n);
            ratios.push(o / n);
        }
        let (min, max) = ratios.iter().fold((f64::MAX, 0.0_f64), |(a, b), r| (a.min(*r), b.max(*r)));
        println!(
            "{what:<28} serde_json {:>9.0} ns   coinorder {:>9.0} ns   speed-up {:.2}× (rounds {min:.2}–{max:.2})",
            median(&mut serde_json_ns),
            median(&mut coinorder_ns),
            median(&mut ratios)
        );
    }
    Ok(())
}
