//! JSON rendering of the Get Order and Get Orders bodies: the `Value` tree stringified
//! (`render::get_response(..).to_string()`, the path `handle` took before) against the
//! bodies written in place (`render::get_response_json`, the path it takes now), on real
//! orders read back from a service. Interleaved rounds; prints medians and the spread of
//! the per-round ratios. Run with `cargo bench --bench render`.

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
    assert_eq!(render::get_response(&order).to_string(), render::get_response_json(&order));
    assert_eq!(render::list_response(&page).to_string(), render::list_response_json(&page));

    for (what, calls, old, new) in [
        (
            "Get Order body",
            20_000,
            &(|| render::get_response(&order).to_string().len()) as &dyn Fn() -> usize,
            &(|| render::get_response_json(&order).len()) as &dyn Fn() -> usize,
        ),
        (
            "Get Orders body, 50 orders",
            1_000,
            &(|| render::list_response(&page).to_string().len()) as &dyn Fn() -> usize,
            &(|| render::list_response_json(&page).len()) as &dyn Fn() -> usize,
        ),
    ] {
        let (mut olds, mut news, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..9 {
            let o = per_call(calls, old);
            let n = per_call(calls, new);
            olds.push(o);
            news.push(n);
            ratios.push(o / n);
        }
        let (min, max) = ratios.iter().fold((f64::MAX, 0.0_f64), |(a, b), r| (a.min(*r), b.max(*r)));
        println!(
            "{what:<28} Value tree {:>9.0} ns   in place {:>9.0} ns   speed-up {:.2}× (rounds {min:.2}–{max:.2})",
            median(&mut olds),
            median(&mut news),
            median(&mut ratios)
        );
    }
    Ok(())
}
