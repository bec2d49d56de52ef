//! The background [`Worker`] and the expiry worker, with real threads.
//!
//! Time on the service side is a [`ManualClock`]; the only real waiting is for the
//! worker thread to notice, polled in steps of a few milliseconds with a 5 s bound.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use coinorder::money::Decimal;
use coinorder::{CreateOrder, Environment, EventType, ManualClock, OrderStatus, Service, Worker};

use common::{config, db_path, new_key, T0_MS, THIRTY_MIN_MS};

/// Upper bound for a worker thread to get something done.
const BOUND: Duration = Duration::from_secs(5);
/// What "promptly" means for stopping a worker: far below the hour-long intervals the
/// sleeping workers below would otherwise wait out, and far above what a join takes on
/// a machine loaded by the tests running beside these.
const PROMPT: Duration = Duration::from_secs(2);

/// Polls `done` every 2 ms until it holds or [`BOUND`] passes; returns its last value.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + BOUND;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        thread::sleep(Duration::from_millis(2));
    }
    done()
}

/// Sets its flag when dropped: moved into a task, it tells when the worker thread ended.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    svc: Arc<Service>,
    merchant: coinorder::Merchant,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(T0_MS));
    let svc = Arc::new(Service::open(db_path(&dir), config(Environment::Sandbox, &clock)).expect("open"));
    let (key, _) = new_key(&svc, 42, Environment::Sandbox);
    let merchant = svc.authenticate(Some(&key)).expect("authenticate");
    Setup { _dir: dir, clock, svc, merchant }
}

fn new_order(s: &Setup) -> String {
    let request = CreateOrder { currency: "USD".into(), amount: Decimal::from(10), ..Default::default() };
    s.svc.create_order(&s.merchant, &request).expect("create order").order.order.order_id
}

fn status(s: &Setup, order_id: &str) -> OrderStatus {
    s.svc.order(order_id).expect("order").order.status
}

#[test]
fn expiry_worker_moves_orders_once_their_quote_runs_out() {
    let s = setup();
    let unpaid = new_order(&s);
    let short = new_order(&s);
    s.svc.record_payment(&short, "tx_short", Decimal::from(4), true).expect("partial payment");
    assert_eq!(status(&s, &short), OrderStatus::Pending);

    let mut worker = s.svc.start_expiry_worker(Duration::from_millis(5)).expect("start");
    assert_eq!(worker.name(), "coinorder-expiry");
    // It runs, but the clock has not moved: nothing is due yet.
    assert!(eventually(|| worker.runs() >= 3), "{worker:?}");
    assert_eq!(status(&s, &unpaid), OrderStatus::New);
    assert_eq!(status(&s, &short), OrderStatus::Pending);

    s.clock.advance_ms(THIRTY_MIN_MS);
    assert!(
        eventually(|| status(&s, &unpaid) == OrderStatus::Expired && status(&s, &short) == OrderStatus::Failed),
        "worker did not expire the orders within {BOUND:?}: {worker:?}"
    );
    let events = s.svc.order_events(&unpaid).expect("events");
    assert_eq!(events.iter().map(|e| e.event_type).collect::<Vec<_>>(), [EventType::Expired]);
    assert_eq!(events[0].created_at.as_millis(), T0_MS + THIRTY_MIN_MS, "stamped with the service clock");
    let events = s.svc.order_events(&short).expect("events");
    assert_eq!(events.iter().map(|e| e.event_type).collect::<Vec<_>>(), [EventType::Pending, EventType::Failed]);
    assert_eq!(worker.failures(), 0, "{:?}", worker.last_error());
    assert_eq!(worker.last_error(), None);

    // Later ticks find nothing more to do and emit nothing twice.
    let runs = worker.runs();
    assert!(eventually(|| worker.runs() >= runs + 3));
    assert_eq!(s.svc.order_events(&unpaid).expect("events").len(), 1);

    let started = Instant::now();
    worker.stop();
    assert!(started.elapsed() < PROMPT, "stop took {:?}", started.elapsed());
    assert!(!worker.is_running());
    // Stopped for good (the thread is joined): a newly due order stays as it is.
    let runs = worker.runs();
    new_order(&s);
    s.clock.advance_ms(THIRTY_MIN_MS);
    // (Read now, it would be moved by the read itself; the sweep finding it due shows the
    // worker did not move it.)
    let due = s.svc.expire_due(coinorder::Timestamp(coinorder::Clock::now_ms(&*s.clock))).expect("expire_due");
    assert_eq!((due.expired, due.failed), (1, 0));
    assert_eq!(worker.runs(), runs);
}

#[test]
fn stop_wakes_a_sleeping_worker_and_joins_its_thread() {
    let ended = Arc::new(AtomicBool::new(false));
    let guard = DropFlag(Arc::clone(&ended));
    let mut worker = Worker::spawn("test-sleeper", Duration::from_secs(3600), move || {
        let _keep = &guard;
        Ok::<(), String>(())
    })
    .expect("spawn");
    assert!(eventually(|| worker.runs() == 1), "runs once at start");
    assert!(worker.is_running());

    let started = Instant::now();
    worker.stop();
    assert!(started.elapsed() < PROMPT, "stop took {:?} with an hour-long interval", started.elapsed());
    // Joined: the thread is gone and has dropped the task by the time stop returns.
    assert!(ended.load(Ordering::SeqCst));
    assert!(!worker.is_running());
    assert_eq!(worker.runs(), 1);
    worker.stop(); // a second stop does nothing
}

#[test]
fn dropping_a_worker_stops_and_joins_it() {
    let ended = Arc::new(AtomicBool::new(false));
    let guard = DropFlag(Arc::clone(&ended));
    let worker = Worker::spawn("test-dropped", Duration::MAX, move || {
        let _keep = &guard;
        Ok::<(), String>(())
    })
    .expect("spawn");
    assert!(eventually(|| worker.runs() == 1));
    let started = Instant::now();
    drop(worker);
    assert!(started.elapsed() < PROMPT);
    assert!(ended.load(Ordering::SeqCst));
}

#[test]
fn failures_are_counted_and_the_worker_carries_on() {
    let calls = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&calls);
    let mut worker =
        Worker::spawn("test-failing", Duration::from_millis(1), move || match seen.fetch_add(1, Ordering::SeqCst) {
            0 => Err("database is busy".to_string()),
            1 => panic!("task bug"),
            _ => Ok(()),
        })
        .expect("spawn");
    assert!(eventually(|| worker.runs() >= 4), "{worker:?}");
    assert_eq!(worker.failures(), 2);
    assert_eq!(worker.last_error().as_deref(), Some("panicked: task bug"));
    assert!(worker.is_running(), "a failing or panicking run does not end the worker");
    worker.stop();
    assert!(calls.load(Ordering::SeqCst) >= 4);
}

#[test]
fn wake_runs_the_task_before_the_interval_ends() {
    let worker = Worker::spawn("test-wake", Duration::from_secs(3600), || Ok::<(), String>(())).expect("spawn");
    assert!(eventually(|| worker.runs() == 1));
    worker.wake();
    assert!(eventually(|| worker.runs() == 2), "{worker:?}");
    worker.wake();
    assert!(eventually(|| worker.runs() == 3), "{worker:?}");
}
