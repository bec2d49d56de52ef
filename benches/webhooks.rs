//! Webhook delivery throughput and latency against a local keep-alive receiver. Prints
//! numbers; asserts nothing. Run with `cargo bench --bench webhooks`.
//!
//! 1. Deliveries per second: N paid orders (one `order.paid` event each), then
//!    `deliver_due` in a loop until nothing is due, at `delivery_concurrency` 1, 8 and 32.
//! 2. Event-to-delivery latency with a background worker calling `deliver_due` every
//!    10 or 50 ms: from just before the `simulate` call that changes the order's state to
//!    the receiver holding the whole request with that event's `webhook-id`.

#[path = "../tests/crash_support/receiver.rs"]
mod receiver;

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use coinorder::{Config, CreateOrder, Environment, Merchant, NewApiKey, RateLimit, Service, SimulateAction, Worker};
use receiver::{Mode, Receiver};

/// Events delivered per concurrency level.
const EVENTS: usize = 2_000;
/// Events timed per worker interval.
const LATENCY_EVENTS: usize = 400;
/// Pause between two state changes while the worker runs (≈ 200 events/s).
const LATENCY_PACE: Duration = Duration::from_millis(5);
/// Timed runs per concurrency level.
const REPEATS: usize = 3;
/// `deliver_due(limit)` in every loop.
const LIMIT: usize = 256;

fn config(concurrency: usize) -> Config {
    let mut config = Config::new(Environment::Sandbox);
    config.rate_limit = RateLimit::OFF;
    config.delivery_concurrency = concurrency;
    config
}

fn create_orders(
    service: &Service,
    merchant: &Merchant,
    url: &str,
    count: usize,
) -> Result<Vec<String>, Box<dyn Error>> {
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let request = CreateOrder {
            currency: "USD".into(),
            amount: "19.99".parse()?,
            webhook_url: Some(url.to_string()),
            ..Default::default()
        };
        ids.push(service.create_order(merchant, &request)?.order.order.order_id);
    }
    Ok(ids)
}

fn pay() -> SimulateAction {
    SimulateAction::Pay { amount: None, confirmed: true }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() -> Result<(), Box<dyn Error>> {
    let receiver = Receiver::start(Mode::Accept)?;
    let url = receiver.url("/bench");
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("webhooks.db");

    // Setup writes with synchronous=NORMAL (only the setup); deliveries run with the
    // default FULL.
    let mut setup_config = config(8);
    setup_config.sqlite.synchronous_full = false;
    let setup = Service::open(&db, setup_config)?;
    let key = setup.create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None })?;
    let merchant = setup.authenticate(Some(key.plain_key.expose()))?;

    let started = Instant::now();
    let orders = create_orders(&setup, &merchant, &url, EVENTS)?;
    let mut event_ids = Vec::with_capacity(EVENTS);
    for id in &orders {
        setup.simulate(id, &pay())?;
        event_ids.extend(setup.order_events(id)?.into_iter().map(|e| e.event_id));
    }
    println!(
        "setup: {} orders paid, {} events to deliver to {url} ({:.1?})",
        orders.len(),
        event_ids.len(),
        started.elapsed()
    );

    println!(
        "\n== deliveries per second (deliver_due({LIMIT}) in a loop until nothing is due; synchronous=FULL; \
         {REPEATS} runs each, median first)"
    );
    let mut first = true;
    for concurrency in [1usize, 8, 32] {
        let service = Service::open(&db, config(concurrency))?;
        let mut rates = Vec::new();
        let mut last = String::new();
        for _ in 0..REPEATS {
            if !first {
                for id in &event_ids {
                    setup.redeliver(id)?;
                }
            }
            first = false;
            let (requests_before, connections_before) = (receiver.requests(), receiver.connections());
            let started = Instant::now();
            let (mut delivered, mut other, mut calls) = (0, 0, 0);
            loop {
                let report = service.deliver_due(LIMIT)?;
                calls += 1;
                delivered += report.delivered;
                other += report.retrying + report.failed + report.no_target;
                if report.attempted == 0 {
                    break;
                }
            }
            let elapsed = started.elapsed();
            let requests = receiver.requests() - requests_before;
            let connections = receiver.connections() - connections_before;
            rates.push(delivered as f64 / elapsed.as_secs_f64());
            last = format!(
                "{delivered} delivered ({other} not) in {elapsed:.2?}, {calls} deliver_due calls, {requests} requests \
                 over {connections} new TCP connections"
            );
        }
        let runs: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
        rates.sort_by(f64::total_cmp);
        println!(
            "concurrency {concurrency:>2}: {:>6.0} deliveries/s (runs: {}); last run: {last}",
            rates[rates.len() / 2],
            runs.join(", ")
        );
    }

    println!(
        "\n== event-to-delivery latency (state change -> receiver has the request), worker running, \
         {LATENCY_EVENTS} events, one every {LATENCY_PACE:?}"
    );
    for interval in [Duration::from_millis(10), Duration::from_millis(50)] {
        let service = Arc::new(Service::open(&db, config(8))?);
        let orders = create_orders(&service, &merchant, &url, LATENCY_EVENTS)?;
        receiver.clear();
        let mut worker = {
            let service = Arc::clone(&service);
            Worker::spawn("bench-deliver", interval, move || service.deliver_due(LIMIT).map(|_| ()))?
        };
        let mut changed = Vec::with_capacity(orders.len());
        for id in &orders {
            let before = Instant::now();
            service.simulate(id, &pay())?;
            changed.push((id, before));
            std::thread::sleep(LATENCY_PACE);
        }
        let mut pending = Vec::with_capacity(changed.len());
        for (id, before) in changed {
            for event in service.order_events(id)? {
                pending.push((event.event_id, before));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        let arrivals = loop {
            let arrivals = receiver.first_arrivals();
            if pending.iter().all(|(id, _)| arrivals.contains_key(id)) || Instant::now() > deadline {
                break arrivals;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        worker.stop();
        let mut latencies: Vec<Duration> = pending
            .iter()
            .filter_map(|(id, before)| arrivals.get(id).map(|at| at.saturating_duration_since(*before)))
            .collect();
        latencies.sort();
        println!(
            "worker every {:>2} ms: {} of {} delivered; p50 {}, p95 {}, max {} ({} worker runs)",
            interval.as_millis(),
            latencies.len(),
            pending.len(),
            ms(percentile(&latencies, 50.0)),
            ms(percentile(&latencies, 95.0)),
            ms(latencies.last().copied().unwrap_or_default()),
            worker.runs(),
        );
    }
    Ok(())
}
