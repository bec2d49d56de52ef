//! Background workers: a task run periodically on its own thread until stopped.
//!
//! [`Worker`] is the one reusable piece. [`Service::start_expiry_worker`] runs
//! [`Service::expire_due`] on it and [`Service::start_delivery_worker`] sends due
//! webhooks and payment-link e-mails ([`Service::deliver_due`],
//! [`Service::send_due_emails`]); `coinorder serve` runs both while it serves.

use std::cell::Cell;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::delivery::Outbox;
use crate::service::Service;

/// The shortest pause between two runs; a zero interval would spin.
const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// What the owner asks of the worker thread.
#[derive(Debug, Default)]
struct Control {
    /// Set once by [`Worker::stop`]: finish the current run and end.
    stop: bool,
    /// Set by [`Worker::wake`]: run again now rather than at the end of the interval.
    wake: bool,
}

/// What the worker thread reports back.
#[derive(Debug, Default, Clone)]
struct Stats {
    runs: u64,
    failures: u64,
    /// When the most recent failed run ended, and its message.
    last_failure: Option<(Instant, String)>,
}

#[derive(Debug, Default)]
struct Shared {
    control: Mutex<Control>,
    signal: Condvar,
    stats: Mutex<Stats>,
}

/// Locks a mutex, also after a panic elsewhere poisoned it (the data stays consistent:
/// every critical section here only assigns plain values).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Seen by a running task: whether its worker has been asked to stop.
struct StopRequested(Arc<Shared>);

impl StopRequested {
    fn get(&self) -> bool {
        lock(&self.0.control).stop
    }
}

/// How often the chain watcher is asked to look (`serve`, and the bindings' workers):
/// each look queries the configured Esplora or JSON-RPC endpoint for every open invoice,
/// and new blocks come minutes apart.
pub const CHAIN_WATCH_INTERVAL: Duration = Duration::from_secs(15);

/// The longest interval the bindings' `start_workers` takes: an hour.
pub const MAX_WORKER_INTERVAL: Duration = Duration::from_secs(3600);

/// The largest batch the bindings' `start_workers` takes.
pub const MAX_WORKER_BATCH: usize = 10_000;

thread_local! {
    /// On a worker's thread, the address of its [`Shared`] state; 0 elsewhere.
    static RUNNING_WORKER: Cell<usize> = const { Cell::new(0) };
}

/// A task run periodically on its own named thread until [`Worker::stop`] (or drop).
///
/// The task runs once at start, then again `interval` after each run ends (a slow run
/// never makes runs pile up). A run that returns `Err` or panics is counted in
/// [`Worker::failures`], its message kept as [`Worker::last_error`], and the worker
/// carries on at the next tick. Stopping wakes the thread at once (no polling): it ends
/// as soon as the run in progress, if any, returns, and is joined.
///
/// ```no_run
/// use std::time::Duration;
/// use coinorder::Worker;
///
/// # fn main() -> std::io::Result<()> {
/// let mut worker = Worker::spawn("heartbeat", Duration::from_secs(1), || -> Result<(), String> {
///     println!("tick");
///     Ok(())
/// })?;
/// // ... later:
/// worker.stop();
/// # Ok(()) }
/// ```
#[must_use = "the worker stops when this is dropped"]
pub struct Worker {
    name: String,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// A second thread started, woken, stopped and counted with this one (the delivery
    /// worker's e-mails, so that a slow mail server never holds up a webhook).
    companion: Option<Box<Worker>>,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("name", &self.name)
            .field("running", &self.is_running())
            .field("stats", &*lock(&self.shared.stats))
            .field("companion", &self.companion)
            .finish()
    }
}

impl Worker {
    /// Starts a thread named `name` that runs `task` now and then every `interval`
    /// (measured from the end of one run to the start of the next; at least 1 ms).
    ///
    /// Fails only when the operating system cannot start a thread.
    pub fn spawn<F, E>(name: impl Into<String>, interval: Duration, task: F) -> std::io::Result<Worker>
    where
        F: FnMut() -> Result<(), E> + Send + 'static,
        E: fmt::Display,
    {
        let mut task = task;
        Worker::spawn_with_stop(name.into(), interval, |_| move || task().map(|()| None))
    }

    /// Like [`Worker::spawn`], for a task that may loop within one run: `make` receives
    /// a [`StopRequested`] the task checks between steps, so stopping never waits for
    /// more than the step in progress. A run that returns `Ok(Some(pause))` is followed by
    /// the next one after `pause` if that is shorter than `interval` (work it knows comes
    /// due sooner).
    fn spawn_with_stop<F, E>(
        name: String,
        interval: Duration,
        make: impl FnOnce(StopRequested) -> F,
    ) -> std::io::Result<Worker>
    where
        F: FnMut() -> Result<Option<Duration>, E> + Send + 'static,
        E: fmt::Display,
    {
        let shared = Arc::new(Shared::default());
        let task = make(StopRequested(Arc::clone(&shared)));
        let thread = {
            let shared = Arc::clone(&shared);
            let interval = interval.max(MIN_INTERVAL);
            let me = Arc::as_ptr(&shared) as usize;
            thread::Builder::new().name(name.clone()).spawn(move || {
                RUNNING_WORKER.with(|running| running.set(me));
                run(&shared, interval, task)
            })?
        };
        Ok(Worker { name, shared, thread: Some(thread), companion: None })
    }

    /// The thread's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs the task again as soon as the run in progress (if any) ends, without waiting
    /// for the rest of the interval. Does nothing once stopped.
    pub fn wake(&self) {
        lock(&self.shared.control).wake = true;
        self.shared.signal.notify_all();
        if let Some(companion) = &self.companion {
            companion.wake();
        }
    }

    /// Stops the worker: the thread ends as soon as the run in progress (if any) returns,
    /// and is joined before this returns. Calling it again does nothing.
    pub fn stop(&mut self) {
        // Every thread hears of it before any is waited for: one finishing its run must
        // not keep another starting new work meanwhile.
        self.ask_to_stop();
        self.join();
    }

    /// Tells this worker's threads to stop, without waiting for them.
    fn ask_to_stop(&self) {
        lock(&self.shared.control).stop = true;
        self.shared.signal.notify_all();
        if let Some(companion) = &self.companion {
            companion.ask_to_stop();
        }
    }

    /// Waits for this worker's threads to end (after [`Worker::ask_to_stop`]).
    fn join(&mut self) {
        if let Some(thread) = self.thread.take() {
            // A task that somehow stops its own worker must not wait for itself. (Asked
            // of a thread-local number: `thread::current()` would leave a handle behind
            // on a C host's thread, which valgrind reports as lost.)
            if RUNNING_WORKER.with(Cell::get) != Arc::as_ptr(&self.shared) as usize {
                // Panics inside the task are caught in the thread, so join only fails if
                // the worker loop itself panicked; there is nothing left to clean up then.
                let _ = thread.join();
            }
        }
        if let Some(companion) = &mut self.companion {
            companion.join();
        }
    }

    /// True until the worker is stopped (or its thread ended).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|thread| !thread.is_finished())
            || self.companion.as_ref().is_some_and(|companion| companion.is_running())
    }

    /// How many runs have finished, successful or not (on both threads of a worker that
    /// has two).
    pub fn runs(&self) -> u64 {
        lock(&self.shared.stats).runs + self.companion.as_ref().map_or(0, |companion| companion.runs())
    }

    /// How many runs returned an error or panicked.
    pub fn failures(&self) -> u64 {
        lock(&self.shared.stats).failures + self.companion.as_ref().map_or(0, |companion| companion.failures())
    }

    /// The message of the most recent failed run, if any run failed.
    pub fn last_error(&self) -> Option<String> {
        self.last_failure().map(|(_, message)| message)
    }

    /// The most recent failed run of this worker or its companion: when, and its message.
    fn last_failure(&self) -> Option<(Instant, String)> {
        let own = lock(&self.shared.stats).last_failure.clone();
        let companion = self.companion.as_ref().and_then(|companion| companion.last_failure());
        match (own, companion) {
            (Some(own), Some(companion)) => Some(if companion.0 > own.0 { companion } else { own }),
            (own, companion) => own.or(companion),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The worker thread's loop.
fn run<F, E>(shared: &Shared, interval: Duration, mut task: F)
where
    F: FnMut() -> Result<Option<Duration>, E>,
    E: fmt::Display,
{
    loop {
        if lock(&shared.control).stop {
            return;
        }
        let (failure, sooner) = match catch_unwind(AssertUnwindSafe(&mut task)) {
            Ok(Ok(sooner)) => (None, sooner),
            Ok(Err(error)) => (Some(error.to_string()), None),
            Err(panic) => (Some(panic_message(panic.as_ref())), None),
        };
        {
            let mut stats = lock(&shared.stats);
            stats.runs += 1;
            if let Some(message) = failure {
                stats.failures += 1;
                stats.last_failure = Some((Instant::now(), message));
            }
        }
        if !wait(shared, sooner.map_or(interval, |pause| pause.clamp(MIN_INTERVAL, interval))) {
            return;
        }
    }
}

/// Waits for the next run: returns false when told to stop, true when the interval has
/// passed or the worker was woken.
fn wait(shared: &Shared, interval: Duration) -> bool {
    let deadline = Instant::now().checked_add(interval);
    let mut control = lock(&shared.control);
    loop {
        if control.stop {
            return false;
        }
        if control.wake {
            control.wake = false;
            return true;
        }
        control = match deadline {
            // An interval too long to represent: wait for stop or wake only.
            None => shared.signal.wait(control).unwrap_or_else(PoisonError::into_inner),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return true;
                }
                shared.signal.wait_timeout(control, deadline - now).unwrap_or_else(PoisonError::into_inner).0
            }
        };
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".to_string());
    format!("panicked: {text}")
}

/// The background work `coinorder serve` runs, started together by
/// [`Service::start_workers`] for a host that wants it in the background (the Python and
/// C bindings' `start_workers`): the expiry sweep, webhooks and e-mails, and the chain
/// watcher when one is configured. Stopped by [`ServiceWorkers::stop`] or on drop.
///
/// Fork-aware: in a child process forked after the start, where none of the threads
/// exist, it reports nothing running and stopping it does nothing (joining threads of
/// another process would fail).
#[derive(Debug)]
#[must_use = "the workers stop when this is dropped"]
pub struct ServiceWorkers {
    started_by: u32,
    workers: Vec<Worker>,
}

impl ServiceWorkers {
    /// True while any of the workers runs (in the process that started them).
    pub fn is_running(&self) -> bool {
        self.started_by == std::process::id() && self.workers.iter().any(Worker::is_running)
    }

    /// Stops every worker, waiting for the webhooks and the e-mail already on their way
    /// ([`Worker::stop`]). Calling it again does nothing.
    pub fn stop(&mut self) {
        let mut workers = std::mem::take(&mut self.workers);
        if self.started_by == std::process::id() {
            for worker in &workers {
                worker.ask_to_stop();
            }
            for worker in &mut workers {
                worker.join();
            }
        } else {
            // A forked child: the threads were never here, and their handles cannot be
            // joined or even dropped safely.
            std::mem::forget(workers);
        }
    }
}

impl Drop for ServiceWorkers {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Service {
    /// Starts [`ServiceWorkers`]: [`Service::start_expiry_worker`] every `interval`,
    /// [`Service::start_delivery_worker`] every `interval` with `batch`, and, when a
    /// chain is configured, [`Service::start_chain_worker`] every
    /// [`CHAIN_WATCH_INTERVAL`], as `coinorder serve` runs them.
    pub fn start_workers(self: &Arc<Self>, interval: Duration, batch: usize) -> std::io::Result<ServiceWorkers> {
        let mut started = ServiceWorkers { started_by: std::process::id(), workers: Vec::new() };
        started.workers.push(self.start_expiry_worker(interval)?);
        started.workers.push(self.start_delivery_worker(interval, batch)?);
        if self.config().bitcoin_watch.is_some() || self.config().ethereum_watch.is_some() {
            started.workers.push(self.start_chain_worker(CHAIN_WATCH_INTERVAL)?);
        }
        Ok(started)
    }

    /// Starts a background [`Worker`] (thread `coinorder-expiry`) that calls
    /// [`Service::expire_due`] with the configured clock's time now and then every
    /// `interval`. Failed runs (e.g. the database busy past its timeout) are counted on
    /// the worker and retried at the next tick; they never stop it.
    ///
    /// The worker holds the service until it is stopped or dropped.
    pub fn start_expiry_worker(self: &Arc<Self>, interval: Duration) -> std::io::Result<Worker> {
        let service = Arc::clone(self);
        Worker::spawn("coinorder-expiry", interval, move || service.expire_due(service.now()).map(|_| ()))
    }

    /// Starts a background [`Worker`] (thread `coinorder-chain`) that runs
    /// [`Service::watch_chain_due`] now and then every `interval`, so live payments to
    /// invoices' derived addresses are recorded, confirmed and rejected without host code.
    /// A run's endpoint errors are its [`Worker::last_error`]; the chain backs off by
    /// itself.
    pub fn start_chain_worker(self: &Arc<Self>, interval: Duration) -> std::io::Result<Worker> {
        let service = Arc::clone(self);
        Worker::spawn("coinorder-chain", interval, move || match service.watch_chain_due() {
            Ok(report) if report.errors.is_empty() => Ok(()),
            Ok(report) => Err(report.errors.join("; ")),
            Err(error) => Err(error.to_string()),
        })
    }

    /// Starts a background [`Worker`] (thread `coinorder-checkpoint`) that runs
    /// [`Service::checkpoint`] now and then every `interval`, so that committing writes
    /// never copy the write-ahead log themselves. Each run first writes the key uses
    /// requests could not ([`Service::record_key_uses`]). A SQLite service checkpoints on
    /// a thread of its own unless [`crate::SqliteOptions::background_checkpoints`] is off;
    /// `coinorder serve` runs this worker anyway, for the key uses (a second checkpoint
    /// right after the first finds almost nothing to copy).
    pub fn start_checkpoint_worker(self: &Arc<Self>, interval: Duration) -> std::io::Result<Worker> {
        let service = Arc::clone(self);
        Worker::spawn("coinorder-checkpoint", interval, move || {
            service.record_key_uses()?;
            service.checkpoint().map(|_| ())
        })
    }

    /// Starts a background [`Worker`] that sends what is due from the outbox, on two
    /// threads: `coinorder-delivery` calls [`Service::deliver_due`]`(batch)` and, when
    /// [`crate::Config::smtp`] is set, `coinorder-email` [`Service::send_due_emails`]`(batch)`, so that a mail server
    /// slow to answer never holds up a webhook, nor a receiver an e-mail. Each repeats at
    /// once while it came back with a full batch (a backlog drains without waiting
    /// `interval` between batches); then it waits `interval` (measured from the end of
    /// the run) before looking again. The two are started, woken, stopped and counted
    /// together as the one worker returned. `coinorder serve` runs it every second with
    /// a batch of 100.
    ///
    /// Without [`crate::Config::smtp`] e-mails stay pending and only webhooks go out.
    /// Retries follow [`crate::Config::retry_schedule`]; an attempt that fails is not
    /// picked up again before its next attempt is due, so a receiver that is down is not
    /// hammered, and when that is sooner than `interval` the worker wakes for it then, so
    /// a retry due 5 s after a failure goes out at 5 s rather than up to an interval
    /// later. A run that fails (e.g. the database busy past its timeout) is counted on
    /// the worker ([`Worker::failures`], [`Worker::last_error`], naming `webhooks` or
    /// `e-mails`) and retried at the next tick; it never stops the worker.
    /// [`Worker::stop`] tells both threads at once and waits only for the webhooks being
    /// sent (one per sender) and the e-mail in progress, not for the rest of a backlog:
    /// for receivers that hang, at most one webhook timeout. Events leased to wait
    /// behind them are given back at once, neither sent nor counted. A receiver slow
    /// to answer holds up only the sender waiting on it: the other
    /// [`crate::Config::delivery_concurrency`] senders go on with the events behind it
    /// (while it has fewer events in flight than there are senders). A `batch` of 0
    /// counts as 1.
    ///
    /// Several workers, in one process or several, may run over the same database: events
    /// and e-mails are leased, so no attempt is made twice at once.
    ///
    /// The worker holds the service until it is stopped or dropped.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use coinorder::{Config, Environment, Service, SmtpConfig};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut config = Config::new(Environment::Live);
    /// config.smtp = Some(SmtpConfig {
    ///     url: "smtp://127.0.0.1:2525".into(),
    ///     from: "Shop <pay@shop.example>".into(),
    /// });
    /// let service = Arc::new(Service::open("coinorder.db", config)?);
    /// let mut delivery = service.start_delivery_worker(Duration::from_secs(1), 100)?;
    /// // ... serve requests; events and e-mails go out in the background ...
    /// delivery.stop();
    /// # Ok(()) }
    /// ```
    pub fn start_delivery_worker(self: &Arc<Self>, interval: Duration, batch: usize) -> std::io::Result<Worker> {
        let batch = batch.max(1);
        let start = |name: &str, outbox: Outbox| {
            let service = Arc::clone(self);
            Worker::spawn_with_stop(name.to_string(), interval, move |stop| {
                move || service.drain_outbox(outbox, batch, &stop)
            })
        };
        // Without SMTP no e-mail is ever sent here: no thread for them (a host that forks
        // is better off with fewer threads, each of which may hold a lock at the fork).
        let emails = match self.config().smtp {
            Some(_) => Some(Box::new(start("coinorder-email", Outbox::Emails)?)),
            None => None,
        };
        let mut webhooks = start("coinorder-delivery", Outbox::Webhooks)?;
        webhooks.companion = emails;
        Ok(webhooks)
    }

    /// One run of a delivery thread: sends what is due from `outbox`, repeated while a
    /// full batch went out, until it is drained or the worker is stopped. Returns how
    /// soon its next message comes due, if sooner than the worker's interval: a retry
    /// scheduled 5 s after a failure then goes out at 5 s, not up to an interval later.
    fn drain_outbox(&self, outbox: Outbox, batch: usize, stop: &StopRequested) -> Result<Option<Duration>, String> {
        let stopped = || stop.get();
        while !stop.get() {
            let attempted = match outbox {
                Outbox::Webhooks => self.deliver_due_unless(batch, &stopped).map(|report| report.attempted),
                Outbox::Emails => self.send_due_emails_unless(batch, &stopped).map(|report| report.attempted),
            };
            match attempted {
                Ok(attempted) if attempted >= batch => {}
                Ok(_) => break,
                Err(error) => {
                    let what = if outbox == Outbox::Webhooks { "webhooks" } else { "e-mails" };
                    return Err(format!("{what}: {error}"));
                }
            }
        }
        Ok(self.until_next_due(outbox))
    }

    /// How long until the earliest message of `outbox` waiting for a later attempt comes
    /// due; `None` when none waits (or the read failed: the worker's interval then holds).
    fn until_next_due(&self, outbox: Outbox) -> Option<Duration> {
        let now = self.now();
        let next = self.store.read(|db| db.next_due_after(outbox, self.environment(), now)).ok()??;
        u64::try_from(next.as_millis() - now.as_millis()).ok().map(Duration::from_millis)
    }
}
