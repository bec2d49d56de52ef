//! Crash safety of the event outbox and of webhook delivery (issue 4, DESIGN §7).
//!
//! The parent test re-runs this test binary as a child process (the ignored test
//! `crash_child`) that creates orders and pays, confirms, rejects, cancels and expires
//! them in a loop over a shared database (a SQLite file, or PostgreSQL: `tests/common/backend.rs`), while a second thread keeps delivering
//! webhooks to a receiver that fails every request. The parent kills the child with
//! SIGKILL at random points, many times, then checks that every committed state change
//! has exactly one event (per-order `sequence` 1..n, each event's `previous_status` the
//! state the previous event left, the last one the order's state), and finally lets the
//! receiver accept and delivers until nothing is pending: every event arrives, each copy
//! of a `webhook-id` with the same body and a valid signature.

// A test: a failed unwrap is a failed check.
#![allow(clippy::unwrap_used)]

#[path = "common/backend.rs"]
mod backend;
#[path = "crash_support/receiver.rs"]
mod receiver;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use coinorder::{
    Config, CreateOrder, DeliveryState, Environment, ErrorKind, EventType, ListOrders, ManualClock, Merchant,
    NewApiKey, OrderStatus, PaymentState, RateLimit, Service, SimulateAction, TRANSITIONS,
};
use receiver::{Mode, Receiver};
use rust_decimal::Decimal;

const ENV_DB: &str = "COINORDER_CRASH_DB";
const ENV_KEY: &str = "COINORDER_CRASH_KEY";
const ENV_HOOK: &str = "COINORDER_CRASH_HOOK";

/// Kill rounds; more are added (up to twice as many) if none landed inside a write.
const ROUNDS: usize = 30;
/// A child that was never killed ends itself after this long.
const CHILD_MAX_LIFE: Duration = Duration::from_secs(30);
/// The child's invoice TTL: short, so later lives see expired quotes (late payments,
/// expiry) as well as open ones.
const CHILD_INVOICE_TTL: Duration = Duration::from_millis(1500);

/// Prefix of the child's progress lines on stdout.
const TAG: &str = "CRASH";

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{TAG} {line}");
    let _ = out.flush();
}

fn child_config() -> Config {
    let mut config = Config::new(Environment::Sandbox);
    config.rate_limit = RateLimit::OFF;
    config.invoice_ttl = CHILD_INVOICE_TTL;
    config.webhook_timeout = Duration::from_secs(2);
    // Short, so that many events reach `failed` inside the child and must be redelivered.
    config.retry_schedule = [20, 40].into_iter().map(Duration::from_millis).collect();
    config.delivery_concurrency = 8;
    config.secret_key_path = backend::shared_key_file();
    config
}

/// Errors the child's random operations are expected to hit (refused transitions and
/// the like). Anything else (storage, secrets) is a failure.
fn expected(error: &coinorder::Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::InvalidTransition { .. }
            | ErrorKind::InvalidParameter { .. }
            | ErrorKind::PaymentSettled { .. }
            | ErrorKind::PaymentNotFound(_)
    )
}

fn check<T>(what: &str, result: coinorder::Result<T>) {
    if let Err(e) = result {
        assert!(expected(&e), "child: {what} failed unexpectedly: {e} ({:?})", e.kind());
    }
}

fn random_amount() -> Decimal {
    Decimal::new(rand::random_range(100..50_000), 2)
}

/// One random operation of the child's main loop.
fn step(service: &Service, merchant: &Merchant, orders: &mut Vec<String>, hook: &str, created: &mut u64) {
    if orders.is_empty() || rand::random_bool(0.25) {
        *created += 1;
        let request = CreateOrder {
            currency: "USD".into(),
            amount: random_amount(),
            pay_currency: Some(["USDT", "BTC", "ETH"][rand::random_range(0..3)].to_string()),
            // Some orders name their own target, the rest use the key's (read at dispatch).
            webhook_url: rand::random_bool(0.7).then(|| format!("{hook}/order/{created}")),
            title: Some(format!("crash order {created}")),
            ..Default::default()
        };
        let order = service.create_order(merchant, &request).expect("child: create_order");
        orders.push(order.order.order.order_id);
        if orders.len() > 200 {
            orders.remove(0);
        }
        return;
    }
    let order_id = orders[rand::random_range(0..orders.len())].clone();
    let id = order_id.as_str();
    match rand::random_range(0..100) {
        0..=17 => check("pay", service.simulate(id, &SimulateAction::Pay { amount: None, confirmed: true })),
        18..=31 => {
            check("pay unconfirmed", service.simulate(id, &SimulateAction::Pay { amount: None, confirmed: false }))
        }
        32..=41 => check("partial", service.simulate(id, &SimulateAction::Partial { amount: None, confirmed: true })),
        42..=53 => check("confirm", service.simulate(id, &SimulateAction::Confirm)),
        54..=61 => check("reject", service.simulate(id, &SimulateAction::Reject)),
        62..=67 => check("cancel", service.simulate(id, &SimulateAction::Cancel)),
        68..=71 => check("merchant cancel", service.cancel_order(merchant, id)),
        72..=77 => check("expire", service.simulate(id, &SimulateAction::Expire)),
        78..=83 => check("mark_paid", service.mark_paid(id)),
        84..=91 => {
            let txid = format!("crash_tx_{}", rand::random::<u64>());
            check("record_payment", service.record_payment(id, &txid, Decimal::new(12_345, 4), rand::random_bool(0.5)));
        }
        92..=95 => {
            if let Ok(payments) = service.order_payments(id) {
                if let Some(p) = payments.iter().find(|p| p.state == PaymentState::Unconfirmed) {
                    if rand::random_bool(0.5) {
                        check("confirm_payment", service.confirm_payment(&p.txid));
                    } else {
                        check("reject_payment", service.reject_payment(&p.txid));
                    }
                }
            }
        }
        _ => {
            let now = coinorder::Timestamp(chrono::Utc::now().timestamp_millis());
            check("expire_due", service.expire_due(now));
        }
    }
}

/// The child process: runs until killed (or `CHILD_MAX_LIFE`). Does nothing unless
/// started by the parent test with the database in its environment.
#[test]
#[ignore = "child process of sigkill_at_random_points_loses_no_event_and_delivers_every_one; started by it"]
fn crash_child() {
    let Ok(db) = std::env::var(ENV_DB) else { return };
    let key = std::env::var(ENV_KEY).expect("child: key");
    let hook = std::env::var(ENV_HOOK).expect("child: hook url");
    let deadline = Instant::now() + CHILD_MAX_LIFE;

    let service = Arc::new(Service::open(&db, child_config()).expect("child: open"));
    let merchant = service.authenticate(Some(&key)).expect("child: authenticate");
    let mut orders: Vec<String> = service
        .list_orders(&merchant, &ListOrders { limit: 50, ..Default::default() })
        .expect("child: list")
        .orders
        .into_iter()
        .map(|o| o.order_id)
        .collect();
    say("open");

    let deliverer = {
        let service = Arc::clone(&service);
        thread::spawn(move || {
            while Instant::now() < deadline {
                say("d begin");
                let report = service.deliver_due(64).expect("child: deliver_due");
                say(&format!("d end {}", report.attempted));
                thread::sleep(Duration::from_millis(rand::random_range(1..5)));
            }
        })
    };
    let mut created = rand::random::<u32>() as u64 * 1000;
    while Instant::now() < deadline {
        say("s begin");
        step(&service, &merchant, &mut orders, &hook, &mut created);
        say("s end");
    }
    deliverer.join().expect("child: deliverer");
}

/// What the parent learned from one child life.
#[derive(Debug, Default)]
struct Life {
    opened: bool,
    /// Killed between "s begin" and "s end": inside a state-changing call.
    mid_state_change: bool,
    /// Killed between "d begin" and "d end": inside `deliver_due`.
    mid_delivery: bool,
    state_ops: usize,
    deliveries: usize,
}

fn read_life(stdout: &str) -> Life {
    let mut life = Life::default();
    let (mut state_open, mut delivery_open) = (false, false);
    for line in stdout.lines() {
        // libtest prints "test crash_child ... " without a newline before the test runs.
        let Some(at) = line.find(&format!("{TAG} ")) else { continue };
        let rest = line[at + TAG.len()..].trim();
        match rest.split(' ').take(2).collect::<Vec<_>>().as_slice() {
            ["open"] => life.opened = true,
            ["s", "begin"] => state_open = true,
            ["s", "end"] => {
                state_open = false;
                life.state_ops += 1;
            }
            ["d", "begin"] => delivery_open = true,
            ["d", "end"] => {
                delivery_open = false;
                life.deliveries += 1;
            }
            _ => {}
        }
    }
    life.mid_state_change = state_open;
    life.mid_delivery = delivery_open;
    life
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        if let Some(pipe) = pipe {
            let mut reader = BufReader::new(pipe);
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                text.push_str(&line);
                line.clear();
            }
        }
        text
    })
}

fn spawn_child(db: &Path, key: &str, hook: &str) -> Child {
    Command::new(std::env::current_exe().expect("current_exe"))
        .args(["crash_child", "--exact", "--nocapture", "--ignored", "--test-threads=1"])
        .env(ENV_DB, db)
        .env(ENV_KEY, key)
        .env(ENV_HOOK, hook)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child")
}

/// Runs one child life and SIGKILLs it after a random 20–300 ms.
fn one_life(db: &Path, key: &str, hook: &str) -> Life {
    let mut child = spawn_child(db, key, hook);
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    thread::sleep(Duration::from_millis(rand::random_range(20..=300)));
    if let Some(status) = child.try_wait().expect("try_wait") {
        let err = stderr.join().unwrap_or_default();
        let out = stdout.join().unwrap_or_default();
        panic!("the child ended by itself ({status}) before it was killed\nstdout tail: {}\nstderr: {err}", tail(&out));
    }
    child.kill().expect("SIGKILL the child");
    let status = child.wait().expect("wait for the child");
    assert!(!status.success(), "killed child reported success");
    let out = stdout.join().expect("stdout reader");
    let _ = stderr.join();
    read_life(&out)
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

fn all_orders(service: &Service, merchant: &Merchant) -> Vec<String> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let page = service.list_orders(merchant, &ListOrders { limit: 50, offset, ..Default::default() }).unwrap();
        offset += page.orders.len() as u64;
        out.extend(page.orders.into_iter().map(|o| o.order_id));
        if !page.has_more {
            return out;
        }
    }
}

fn status_of(event_type: EventType) -> Option<OrderStatus> {
    match event_type {
        EventType::Pending => Some(OrderStatus::Pending),
        EventType::Paid => Some(OrderStatus::Paid),
        EventType::Failed => Some(OrderStatus::Failed),
        EventType::Cancelled => Some(OrderStatus::Cancelled),
        EventType::Expired => Some(OrderStatus::Expired),
        EventType::PaidLate => None,
    }
}

/// Every invariant of one order's events and payments; returns a description of each
/// violation.
fn order_violations(service: &Service, order_id: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let current = service.order(order_id).unwrap();
    let events = service.order_events(order_id).unwrap();
    let payments = service.order_payments(order_id).unwrap();
    let status = current.order.status;
    if current.invoice.status != status {
        bad.push(format!("invoice {} but order {status}", current.invoice.status));
    }
    if events.is_empty() {
        if status != OrderStatus::New {
            bad.push(format!("{status} without any event"));
        }
    } else if events[0].previous_status != OrderStatus::New {
        bad.push(format!("first event's previous_status is {}", events[0].previous_status));
    }
    let mut state = OrderStatus::New;
    for (i, event) in events.iter().enumerate() {
        let at = format!("event {} ({} #{})", event.event_id, event.event_type, event.sequence);
        if event.sequence != i as i64 + 1 {
            bad.push(format!("{at}: sequence {} at position {}", event.sequence, i + 1));
        }
        if event.previous_status != state {
            bad.push(format!("{at}: previous_status {} but the order was {state}", event.previous_status));
        }
        match status_of(event.event_type) {
            None => {
                if event.status != event.previous_status {
                    bad.push(format!("{at}: paid_late changed {} -> {}", event.previous_status, event.status));
                }
            }
            Some(to) => {
                let allowed = TRANSITIONS
                    .iter()
                    .any(|(f, _, t, e)| *f == event.previous_status && *t == event.status && *e == event.event_type);
                if event.status != to || !allowed {
                    bad.push(format!("{at}: {} -> {} is not a transition", event.previous_status, event.status));
                }
            }
        }
        let payload: serde_json::Value = serde_json::from_str(&event.payload).unwrap();
        if payload["type"] != event.event_type.as_str()
            || payload["data"]["sequence"] != event.sequence
            || payload["data"]["previous_status"] != event.previous_status.as_str()
            || payload["data"]["invoice"]["status"] != event.status.as_str()
        {
            bad.push(format!("{at}: payload disagrees with the event row: {}", event.payload));
        }
        state = event.status;
    }
    if state != status {
        bad.push(format!("order is {status} but its events end at {state}"));
    }

    // The payments committed with the state changes agree with the state.
    let counting: Vec<_> = payments.iter().filter(|p| p.counts && p.state != PaymentState::Rejected).collect();
    // order.paid_late: a payment first seen after the quote (and again when it later
    // confirms or is rejected), or one seen in time that confirmed after the order failed.
    let late: usize = payments
        .iter()
        .map(|p| match (p.counts, p.state) {
            (false, PaymentState::Unconfirmed) => 1,
            (false, _) => 2,
            (true, PaymentState::Confirmed) => 1,
            (true, _) => 0,
        })
        .sum();
    let paid_late_events = events.iter().filter(|e| e.event_type == EventType::PaidLate).count();
    if status == OrderStatus::New && !payments.is_empty() {
        bad.push(format!("NEW with {} payment(s)", payments.len()));
    }
    if status == OrderStatus::Pending && counting.is_empty() {
        bad.push("PENDING without a counting payment".into());
    }
    if status == OrderStatus::Paid && !current.order.marked_paid {
        let confirmed: Decimal = counting.iter().filter(|p| p.state == PaymentState::Confirmed).map(|p| p.amount).sum();
        if confirmed < current.invoice.amount {
            bad.push(format!("PAID with confirmed {confirmed} < {}", current.invoice.amount));
        }
    }
    if paid_late_events > late {
        bad.push(format!("{paid_late_events} order.paid_late events but {late} late or confirmed payment(s)"));
    }
    bad.into_iter().map(|b| format!("order {order_id}: {b}")).collect()
}

/// What the database itself says after the kills.
struct FileCheck {
    orders: i64,
    events: i64,
    /// Events still leased by a killed child (informative; `None` if the column moved).
    leased: Option<i64>,
}

/// Counts straight from the database; on SQLite, also its own `integrity_check`.
fn database_check(db: &Path) -> FileCheck {
    let mut raw = backend::RawDb::open(db);
    if !backend::on_postgres() {
        assert_eq!(raw.strings("PRAGMA integrity_check"), ["ok"], "SQLite integrity_check after the kills");
    }
    let count = |raw: &mut backend::RawDb, sql: &str| -> i64 { raw.strings(sql)[0].parse().unwrap() };
    let orders = count(&mut raw, "SELECT count(*) FROM orders");
    let events = count(&mut raw, "SELECT count(*) FROM events");
    let now = chrono::Utc::now().timestamp_millis();
    let leased = Some(count(&mut raw, &format!("SELECT count(*) FROM events WHERE lease_until > {now}")));
    FileCheck { orders, events, leased }
}

/// Shows the checks are not vacuous: once the run is over, losing an order's last
/// state-changing event, or the first of several, is reported.
fn checks_catch_lost_events(db: &Path, events: &[coinorder::Event]) {
    let mut last: HashMap<&str, &coinorder::Event> = HashMap::new();
    for event in events {
        last.insert(event.order_id.as_str(), event);
    }
    let lose_last = last.values().find(|e| e.event_type != EventType::PaidLate).unwrap();
    let lose_first = events
        .iter()
        .find(|e| e.sequence == 1 && last[e.order_id.as_str()].sequence > 1 && e.order_id != lose_last.order_id)
        .unwrap();
    let mut raw = backend::RawDb::open(db);
    for event in [lose_last, lose_first] {
        raw.execute("DELETE FROM webhook_attempts WHERE event_id = ?1", &[&event.event_id]);
        raw.execute("DELETE FROM events WHERE event_id = ?1", &[&event.event_id]);
    }
    drop(raw);
    let mutated = Service::open(db, child_config()).unwrap();
    for event in [lose_last, lose_first] {
        assert!(
            !order_violations(&mutated, &event.order_id).is_empty(),
            "losing event {} ({} #{}) went unnoticed",
            event.event_id,
            event.event_type,
            event.sequence
        );
    }
}

#[test]
fn sigkill_at_random_points_loses_no_event_and_delivers_every_one() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let db: PathBuf = backend::db_in(dir.path());
    // Bound before the first child starts, so the URLs the children write are right.
    // While the children run it fails every request (500 or a dropped connection).
    let receiver = Receiver::start(Mode::Fail).unwrap();
    let hook = receiver.url("/hook");

    let key = {
        let setup = Service::open(&db, child_config()).unwrap();
        setup
            .create_key(NewApiKey {
                user_id: 7,
                environment: Environment::Sandbox,
                webhook_url: Some(receiver.url("/key-hook")),
            })
            .unwrap()
    };
    let plain_key = key.plain_key.expose().to_string();
    let secret = key.webhook_secret.expose().to_string();

    // ----- kill the child at random points, many times -----
    let mut lives = Vec::new();
    while lives.len() < ROUNDS
        || (lives.len() < 2 * ROUNDS && !lives.iter().any(|l: &Life| l.mid_state_change || l.mid_delivery))
    {
        lives.push(one_life(&db, &plain_key, &hook));
    }
    let kill_phase = started.elapsed();
    let opened = lives.iter().filter(|l| l.opened).count();
    let mid_state = lives.iter().filter(|l| l.mid_state_change).count();
    let mid_delivery = lives.iter().filter(|l| l.mid_delivery).count();
    let state_ops: usize = lives.iter().map(|l| l.state_ops).sum();
    let delivery_runs: usize = lives.iter().map(|l| l.deliveries).sum();
    assert!(mid_state + mid_delivery > 0, "no kill landed inside a write in {} rounds: {lives:?}", lives.len());
    let child_requests = receiver.requests();

    // ----- every committed state change has exactly one event -----
    // The file as the kills left it must pass SQLite's checks before anything opens it.
    database_check(&db);
    let clock = Arc::new(ManualClock::new(chrono::Utc::now().timestamp_millis() + 2 * 24 * 3600 * 1000));
    let mut config = child_config();
    config.clock = clock.clone();
    config.retry_schedule = vec![Duration::from_secs(1)];
    let service = Service::open(&db, config).unwrap();
    // Every open order is past its deadline by now, and a read would move it first (with
    // its event): the sweep moves them all before the file's events are counted again.
    service.expire_due(coinorder::Timestamp(coinorder::Clock::now_ms(&*clock))).unwrap();
    let file = database_check(&db);
    let merchant = service.authenticate(Some(&plain_key)).unwrap();
    let order_ids = all_orders(&service, &merchant);
    assert_eq!(order_ids.len() as i64, file.orders, "list_orders misses orders");
    let mut violations = Vec::new();
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_type: BTreeMap<String, usize> = BTreeMap::new();
    let mut payments = 0;
    let mut events = Vec::new();
    for id in &order_ids {
        violations.extend(order_violations(&service, id));
        *by_status.entry(service.order(id).unwrap().order.status.to_string()).or_default() += 1;
        payments += service.order_payments(id).unwrap().len();
        for event in service.order_events(id).unwrap() {
            *by_type.entry(event.event_type.to_string()).or_default() += 1;
            events.push(event);
        }
    }
    assert!(violations.is_empty(), "{} violation(s):\n{}", violations.len(), violations.join("\n"));
    assert_eq!(events.len() as i64, file.events, "events not reachable from their orders");
    let unique: HashSet<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(unique.len(), events.len(), "duplicate event ids");
    assert!(!events.is_empty(), "the children produced no event");

    // ----- deliver everything to a receiver that now accepts -----
    let mut states_before: BTreeMap<String, usize> = BTreeMap::new();
    let mut redelivered = 0;
    for id in &order_ids {
        for delivery in service.event_deliveries(id).unwrap() {
            *states_before.entry(delivery.state.to_string()).or_default() += 1;
            if delivery.state == DeliveryState::Failed {
                service.redeliver(&delivery.event.event_id).unwrap();
                redelivered += 1;
            }
        }
    }
    receiver.set_mode(Mode::Accept);
    let mut loops = 0;
    loop {
        loops += 1;
        assert!(loops < 200, "deliver_due never ran dry");
        let report = service.deliver_due(500).unwrap();
        assert_eq!(report.no_target + report.failed, 0, "{report:?}");
        if report.attempted == 0 {
            break;
        }
    }
    for id in &order_ids {
        for delivery in service.event_deliveries(id).unwrap() {
            assert_eq!(
                delivery.state,
                DeliveryState::Delivered,
                "event {} of order {id}: {:?}",
                delivery.event.event_id,
                delivery.last_error
            );
        }
    }

    let hits = receiver.hits();
    let payload_of: HashMap<&str, &str> = events.iter().map(|e| (e.event_id.as_str(), e.payload.as_str())).collect();
    let mut copies: HashMap<&str, usize> = HashMap::new();
    let mut accepted: HashSet<&str> = HashSet::new();
    for hit in &hits {
        let Some(payload) = payload_of.get(hit.id.as_str()) else {
            panic!("the receiver got an unknown webhook-id {:?} at {}", hit.id, hit.path);
        };
        assert_eq!(
            hit.body,
            payload.as_bytes(),
            "webhook-id {} arrived with a body other than the stored payload",
            hit.id
        );
        let ts: i64 = hit.timestamp.parse().unwrap();
        coinorder::signature::verify(&secret, Some(&hit.id), Some(&hit.timestamp), Some(&hit.signature), &hit.body, ts)
            .unwrap_or_else(|e| panic!("signature of {} does not verify: {e:?}", hit.id));
        *copies.entry(hit.id.as_str()).or_default() += 1;
        if hit.accepted {
            accepted.insert(hit.id.as_str());
        }
    }
    let missing: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).filter(|id| !accepted.contains(id)).collect();
    assert!(missing.is_empty(), "{} event(s) never accepted by the receiver: {missing:?}", missing.len());
    let own_url = order_ids.iter().filter(|id| service.order(id).unwrap().order.webhook_url.is_some()).count();
    let key_url_hits = hits.iter().filter(|h| h.path == "/key-hook" && h.accepted).count();
    assert!(own_url < order_ids.len() && key_url_hits > 0, "the key's webhook URL was never used");
    let accepted_copies = hits.iter().filter(|h| h.accepted).count();
    let several = copies.values().filter(|n| **n > 1).count();
    let most = copies.values().max().copied().unwrap_or(0);

    println!(
        "crash test: {} lives ({opened} opened the database) in {:.1?}; killed inside a state change {mid_state} \
         times, inside deliver_due {mid_delivery} times; {state_ops} state operations and {delivery_runs} \
         delivery runs completed",
        lives.len(),
        kill_phase
    );
    println!(
        "produced {} orders {by_status:?}, {payments} payments, {} events {by_type:?}",
        order_ids.len(),
        events.len()
    );
    println!(
        "child-phase requests (all failed): {child_requests}; after the kills: delivery states {states_before:?}, \
         {} event(s) still leased by a killed child; redelivered {redelivered} failed; {loops} deliver_due calls \
         delivered {accepted_copies} for {} events; {} requests in all, {several} webhook-ids received more than \
         once (at most {most} copies), every copy with the same body; total {:.1?}",
        file.leased.map_or("?".to_string(), |n| n.to_string()),
        events.len(),
        hits.len(),
        started.elapsed()
    );
    drop(service);
    drop(receiver);
    checks_catch_lost_events(&db, &events);
}
