//! Acceptance tests of expiry (DESIGN §6, issue 3): `expire_due(now)` moves every order
//! whose quote has passed — NEW → EXPIRED, PENDING with confirmed payments short and
//! nothing awaiting confirmation → FAILED — in bounded batches, leaves everything else
//! alone, is idempotent, stays inside its environment, and handles 10,000 orders in one
//! call. The clock is a `ManualClock`: no sleeping.

mod common;
mod lifecycle_common;

use std::time::Instant;

use coinorder::{CreateOrder, Environment, ExpiryReport, ListOrders, OrderStatus, Service, Timestamp, EXPIRY_BATCH};
use common::*;
use lifecycle_common::*;

fn expire_now(h: &Harness) -> ExpiryReport {
    h.svc.expire_due(Timestamp(now_ms(h))).expect("expire_due")
}

fn report(expired: usize, failed: usize) -> ExpiryReport {
    ExpiryReport { expired, failed }
}

#[test]
fn expire_due_moves_ten_thousand_orders_in_one_call() {
    const N: usize = 10_000;
    const { assert!(N > 2 * EXPIRY_BATCH, "the test must span several batches") };
    // NORMAL sync only to create the fixture quickly; expiry is the same code either way.
    let h = harness_with(Environment::Sandbox, |c| c.sqlite.synchronous_full = false);
    let m = merchant(&h);
    let request = CreateOrder { currency: "USD".into(), amount: dec("10"), ..Default::default() };
    let started = Instant::now();
    let mut ids = Vec::with_capacity(N);
    for i in 0..N {
        if i % 1_000 == 0 {
            h.clock.advance_ms(1); // several distinct expiry instants
        }
        ids.push(h.svc.create_order(&m, &request).expect("create").order.order.order_id);
    }
    eprintln!("created {N} orders in {:?}", started.elapsed());
    let last_expiry = h.svc.order(&ids[N - 1]).expect("order").invoice.expired_at.as_millis();

    // Nothing is due before the quotes pass.
    assert_eq!(expire_now(&h), report(0, 0));
    h.clock.set_ms(last_expiry);

    let started = Instant::now();
    let moved = expire_now(&h);
    eprintln!("expire_due moved {} orders in {:?}", moved.expired, started.elapsed());
    assert_eq!(moved, report(N, 0));

    for id in &ids {
        let order = h.svc.order(id).expect("order");
        assert_eq!((order.order.status, order.invoice.status), (OrderStatus::Expired, OrderStatus::Expired), "{id}");
        assert_eq!(order.order.updated_at.as_millis(), last_expiry);
        let events = h.svc.order_events(id).expect("events");
        assert_eq!(events.len(), 1, "exactly one event for {id}: {events:?}");
        let event = &events[0];
        assert_eq!(
            (event.event_type.as_str(), event.sequence, event.previous_status, event.status),
            ("order.expired", 1, OrderStatus::New, OrderStatus::Expired)
        );
    }
    // The spot check of Get Order and the payload.
    let mut first = Tracked {
        id: ids[0].clone(),
        created_ms: T0_MS + 1,
        expired_ms: T0_MS + 1 + THIRTY_MIN_MS,
        events: 0,
        last: serde_json::Value::Null,
    };
    step(&h, &mut first, Expect::status("EXPIRED"), &[("order.expired", "NEW")]);

    // The list agrees, and a second run has nothing left to do.
    let expired = h
        .svc
        .list_orders(&m, &ListOrders { status: Some(OrderStatus::Expired), limit: 50, offset: (N - 10) as u64 })
        .expect("list");
    assert_eq!(expired.orders.len(), 10);
    assert!(!expired.has_more);
    h.clock.advance_ms(1);
    assert_eq!(expire_now(&h), report(0, 0));
    assert_eq!(h.svc.order_events(&ids[N / 2]).expect("events").len(), 1);
}

#[test]
fn expire_due_moves_only_what_is_due_and_leaves_the_rest() {
    let h = harness();
    let mut unpaid = create_usd10(&h);
    let mut awaiting = create_usd10(&h);
    let mut short = create_usd10(&h);
    let mut paid = create_usd10(&h);
    let mut cancelled = create_usd10(&h);
    tick(&h);
    pay(&h, &awaiting.id, "tx-await", "10", false);
    step(&h, &mut awaiting, Expect::received("PENDING", "10", "USD"), &[("order.pending", "NEW")]);
    pay(&h, &short.id, "tx-short", "4", true);
    step(&h, &mut short, Expect::received("PENDING", "4", "USD"), &[("order.pending", "NEW")]);
    pay(&h, &paid.id, "tx-paid", "10", true);
    step(&h, &mut paid, Expect::received("PAID", "10", "USD"), &[("order.paid", "NEW")]);
    h.svc.customer_cancel(&cancelled.id).expect("cancel");
    step(&h, &mut cancelled, Expect::status("CANCELLED"), &[("order.cancelled", "NEW")]);

    // A later order whose quote is still open at the first run.
    h.clock.advance_ms(20 * 60 * 1000);
    let mut later = create_usd10(&h);

    // One millisecond before the first quotes pass: nothing is due.
    h.clock.set_ms(unpaid.expired_ms - 1);
    assert_eq!(expire_now(&h), report(0, 0));
    step(&h, &mut unpaid, Expect::status("NEW"), &[]);

    // At the expiry instant the quote has passed.
    h.clock.set_ms(unpaid.expired_ms);
    assert_eq!(expire_now(&h), report(1, 1));
    step(&h, &mut unpaid, Expect::status("EXPIRED"), &[("order.expired", "NEW")]);
    step(&h, &mut short, Expect::received("FAILED", "4", "USD"), &[("order.failed", "PENDING")]);
    step(&h, &mut awaiting, Expect::received("PENDING", "10", "USD"), &[]);
    step(&h, &mut paid, Expect::received("PAID", "10", "USD"), &[]);
    step(&h, &mut cancelled, Expect::status("CANCELLED"), &[]);
    step(&h, &mut later, Expect::status("NEW"), &[]);

    // Running again at the same time changes nothing.
    assert_eq!(expire_now(&h), report(0, 0));

    // When the later quote passes, only it moves; the awaiting payment still holds its order.
    h.clock.set_ms(later.expired_ms + 5);
    assert_eq!(expire_now(&h), report(1, 0));
    step(&h, &mut later, Expect::status("EXPIRED"), &[("order.expired", "NEW")]);
    step(&h, &mut awaiting, Expect::received("PENDING", "10", "USD"), &[]);
    for o in [&mut unpaid, &mut short, &mut paid, &mut cancelled] {
        let status = o.last["order"]["status"].as_str().unwrap_or_default().to_string();
        let amount = num_text(&o.last["invoice"]["receive_amount"]);
        let currency = o.last["invoice"]["receive_currency"].as_str().unwrap_or_default().to_string();
        step(&h, o, Expect::received(&status, &amount, &currency), &[]);
    }
}

#[test]
fn expiry_of_a_pending_order_short_of_confirmed_payments_fails_it() {
    let h = harness();
    let mut o = create_tracked(&h, &serde_json::json!({"currency": "EUR", "amount": 90, "pay_currency": "USDT"}));
    // 90 EUR at 0.9 EUR per USDT = 100 USDT.
    assert_eq!(invoice_amount(&h, &o.id), dec("100"));
    tick(&h);
    pay(&h, &o.id, "tx-1", "60", true);
    step(&h, &mut o, Expect::received("PENDING", "54", "EUR"), &[("order.pending", "NEW")]);
    tick(&h);
    // A second confirmed part that still falls short by one micro-USDT.
    pay(&h, &o.id, "tx-2", "39.999999", true);
    step(&h, &mut o, Expect::received("PENDING", "89.99", "EUR"), &[]);
    past_expiry(&h, &o);
    assert_eq!(expire_now(&h), report(0, 1));
    step(&h, &mut o, Expect::received("FAILED", "89.99", "EUR"), &[("order.failed", "PENDING")]);
}

#[test]
fn expire_due_stays_inside_its_environment() {
    let h = harness();
    let mut sandbox_order = create_usd10(&h);
    let live = Service::open(h.db(), config(Environment::Live, &h.clock)).expect("open live");
    live.set_rate("USDT", "USD", dec("1"), None).expect("live rate");
    let (live_key, _) = new_key(&live, 42, Environment::Live);
    let live_order = create_ok(&live, &live_key, &serde_json::json!({"currency": "USD", "amount": 10}));
    let live_id = string(&live_order["data"], "order_id").to_string();

    past_expiry(&h, &sandbox_order);
    // One moved: the sandbox's. (Reading the live order now would move it: see
    // `a_read_never_shows_an_order_open_past_its_deadline`.)
    assert_eq!(expire_now(&h), report(1, 0));
    step(&h, &mut sandbox_order, Expect::status("EXPIRED"), &[("order.expired", "NEW")]);

    // Still due in live: the sandbox's sweep left it alone.
    assert_eq!(live.expire_due(Timestamp(now_ms(&h))).expect("live expire"), report(1, 0));
    assert_eq!(live.order(&live_id).expect("live order").order.status, OrderStatus::Expired);
    assert_eq!(h.svc.order_events(&sandbox_order.id).expect("events").len(), 1);
}

#[test]
fn the_invoice_ttl_is_configurable() {
    let h = harness_with(Environment::Sandbox, |c| c.invoice_ttl = std::time::Duration::from_secs(60));
    let mut o = create_usd10(&h);
    assert_eq!(o.expired_ms - o.created_ms, 60_000);
    h.clock.advance_ms(59_999);
    assert_eq!(expire_now(&h), report(0, 0));
    h.clock.advance_ms(1);
    assert_eq!(expire_now(&h), report(1, 0));
    step(&h, &mut o, Expect::status("EXPIRED"), &[("order.expired", "NEW")]);
}

#[test]
fn a_read_never_shows_an_order_open_past_its_deadline() {
    // A host that runs no sweep (no worker, no `expire_due`) still never reads an order
    // as open after its deadline: every read moves it first, as the sweep would, once.
    let h = harness();
    let unpaid = create_usd10(&h);
    let short = create_usd10(&h);
    let awaiting = create_usd10(&h);
    let shown_unpaid = create_usd10(&h);
    pay(&h, &short.id, "tx-short", "4", true);
    pay(&h, &awaiting.id, "tx-awaiting", "10", false);
    past_expiry(&h, &unpaid);

    // The typed read, the wire's Get Order and the payment page's (lists: the next test).
    let m = merchant(&h);
    assert_eq!(h.svc.get_order(&m, &unpaid.id).expect("get").order.status, OrderStatus::Expired);
    assert_eq!(get_order(&h, &short.id)["order"]["status"], "FAILED");
    assert_eq!(get_order(&h, &short.id)["invoice"]["status"], "FAILED");
    let page = h.get(&format!("/pay/status?id={}", shown_unpaid.id));
    assert_eq!(page.json()["status"], "EXPIRED", "{}", text(&page));
    // Confirmation still awaited: it stays PENDING (DESIGN §6), and reading it changes nothing.
    assert_eq!(get_order(&h, &awaiting.id)["order"]["status"], "PENDING");

    // Each moved once, with one event, whatever reads it again.
    for _ in 0..2 {
        for (tracked, event) in [(&unpaid, "order.expired"), (&short, "order.failed")] {
            let events = h.svc.order_events(&tracked.id).expect("events");
            let last = events.last().expect("an event");
            assert_eq!(last.event_type.as_str(), event);
            assert_eq!(events.iter().filter(|e| e.event_type.as_str() == event).count(), 1, "{events:?}");
        }
        assert_eq!(h.svc.order_events(&awaiting.id).expect("events").len(), 1, "only its order.pending");
    }
    assert_eq!(expire_now(&h), report(0, 0), "nothing left for the sweep");
}

#[test]
fn a_list_moves_what_is_past_its_deadline_before_it_filters() {
    let h = harness();
    let m = merchant(&h);
    let first = create_usd10(&h);
    let second = create_usd10(&h);
    past_expiry(&h, &second);
    let fresh = create_usd10(&h);

    // The status filter sees the orders as they stand: nothing past its deadline is NEW.
    let new = ListOrders { status: Some(OrderStatus::New), ..ListOrders::default() };
    let listed: Vec<String> =
        h.svc.list_orders(&m, &new).expect("list").orders.into_iter().map(|o| o.order_id).collect();
    assert_eq!(listed, vec![fresh.id.clone()]);
    let expired = h.get("/v1/orders?status=EXPIRED").json();
    let ids: Vec<&str> = expired["orders"].as_array().expect("orders").iter().map(|o| string(o, "order_id")).collect();
    assert_eq!(ids, vec![second.id.as_str(), first.id.as_str()]);
    assert_eq!(h.svc.order_events(&first.id).expect("events").len(), 1);

    // The host's list (`orders list`) sees them as they stand too.
    let third = create_usd10(&h);
    past_expiry(&h, &third);
    let host_new = coinorder::HostOrderQuery { status: Some(OrderStatus::New), ..Default::default() };
    assert!(h.svc.host_orders(&host_new).expect("host list").is_empty());

    // A PENDING order short of its amount, past its deadline, is listed FAILED.
    let short = create_usd10(&h);
    pay(&h, &short.id, "tx-short", "4", true);
    past_expiry(&h, &short);
    let failed = h.get("/v1/orders?status=FAILED").json();
    let ids: Vec<&str> = failed["orders"].as_array().expect("orders").iter().map(|o| string(o, "order_id")).collect();
    assert_eq!(ids, vec![short.id.as_str()]);
}
