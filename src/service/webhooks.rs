//! The service's webhook sender: [`Service::deliver_due`] and the attempt log, over the
//! outbox engine of [`crate::delivery`].

use crate::error::{Error, ErrorKind, Result};
use crate::keys;
use crate::signature;
use crate::storage::{AttemptResult, ClaimedEvent, SigningKey};
use std::collections::VecDeque;
use std::io::Read;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Condvar, Mutex};

use crate::config::Clock;
use std::time::{Duration, Instant};

use super::Service;
use crate::delivery::*;

/// A leased event, ready to send.
struct Job {
    claimed: ClaimedEvent,
    /// The URL and signing secrets (the current one first); `Ok(None)` when there is no
    /// URL, `Err` when they could not be read.
    target: std::result::Result<Option<(String, Vec<crate::SecretString>)>, String>,
}

impl Service {
    /// Sends up to `limit` due webhooks (in parallel, bounded by
    /// `Config::delivery_concurrency`) and records the outcome of each. Call it from a
    /// loop, a timer or the background worker.
    ///
    /// Each sender takes the next due event as soon as it is free: events are leased only
    /// for senders about to send them (at most one waiting per sender, leased for two
    /// timeouts plus 30 s), and each outcome is recorded as it comes in, with its retry
    /// timed from when that attempt ended. So one receiver that is slow to answer holds up
    /// only the sender waiting on it, not the other events; meanwhile the free senders
    /// also pick up events that come due. Returns once nothing is due or in flight, or
    /// `limit` were attempted. Should recording fail, the attempts not yet recorded stay
    /// leased until their lease runs out and are then sent again (delivery is at least
    /// once).
    pub fn deliver_due(&self, limit: usize) -> Result<DeliveryReport> {
        self.deliver_due_unless(limit, &|| false)
    }

    /// [`Service::deliver_due`] that takes no more events once `stopped()` says so (the
    /// background worker's stop), and returns when those in flight are recorded.
    pub(crate) fn deliver_due_unless(&self, limit: usize, stopped: &dyn Fn() -> bool) -> Result<DeliveryReport> {
        self.follow_clock_set_back(Outbox::Webhooks)?;
        let sender = WebhookSender { http: self.http.clone(), clock: Arc::clone(&self.config().clock) };
        // The pool's threads end when it is dropped, on every path out of here.
        let mut pool = SenderPool::start(self.config().delivery_concurrency.clamp(1, limit.max(1)), sender);
        let token = keys::random_id(24);
        let mut report = DeliveryReport::default();
        let (mut claimed, mut in_flight) = (0, 0);
        loop {
            // As many events as senders, plus one more each waiting behind them, so no
            // sender idles while this thread records what came back.
            let free = (2 * pool.size()).saturating_sub(in_flight);
            if free > 0 && claimed < limit && !stopped() {
                let jobs = self.claim_jobs(free.min(limit - claimed), &token)?;
                claimed += jobs.len();
                in_flight += jobs.len();
                pool.submit(jobs, in_flight);
            }
            if stopped() {
                // Stopping: the events no sender has taken yet are given back now, not
                // left leased (unsent, and counted as attempted) until the lease runs out.
                let withdrawn = pool.withdraw_waiting();
                in_flight -= withdrawn.len();
                self.release_unattempted(&token, &withdrawn);
            }
            if in_flight == 0 {
                // Nothing was due (or the limit or a stop was reached) and nothing is out.
                return Ok(report);
            }
            let finished = pool.wait_finished(IN_FLIGHT_POLL);
            in_flight -= finished.len();
            if !finished.is_empty() {
                self.record_attempts(&token, finished, &mut report)?;
            }
        }
    }

    /// Gives back the leases of `jobs`, whose attempts were never made. A lease that
    /// cannot be given back (the database busy) runs out by itself, as before.
    fn release_unattempted(&self, token: &str, jobs: &[Job]) {
        if jobs.is_empty() {
            return;
        }
        let _ = self.store.write_outbox(|db| {
            for job in jobs {
                db.release_unattempted(Outbox::Webhooks, &job.claimed.event_id, token)?;
            }
            Ok(())
        });
    }

    /// Leases up to `size` due events (each sent by the next free sender: at most one
    /// waits per sender) and works out where each goes.
    fn claim_jobs(&self, size: usize, token: &str) -> Result<Vec<Job>> {
        let now = self.now();
        let lease_until = now.plus_ms(Outbox::Webhooks.lease_ms(self.config().webhook_timeout));
        let claimed = self.store.write_outbox(|db| {
            let ids = db.claim_due(Outbox::Webhooks, self.environment(), now, lease_until, token, size as i64)?;
            ids.iter().map(|id| db.claimed_event(id)).collect::<Result<Vec<_>>>()
        })?;
        // One event whose target cannot be worked out (its sealed secret unreadable, a
        // read failing) is retried on its own schedule; it never holds up the others.
        // The requests then go out outside any transaction: the lease keeps every other
        // deliverer off these events until it runs out, which outlasts the send, and the
        // outcomes are written only where `token` still holds the lease.
        Ok(claimed
            .into_iter()
            .map(|claimed| {
                let target = self.webhook_target(&claimed).map_err(|e| format!("no target: {e}"));
                Job { claimed, target }
            })
            .collect())
    }

    /// Records the outcomes of finished attempts in one transaction, and counts and
    /// reports them.
    fn record_attempts(&self, token: &str, finished: Vec<Finished>, report: &mut DeliveryReport) -> Result<()> {
        let (sent, attempted): (Vec<(Job, crate::Timestamp)>, Vec<Attempted>) =
            finished.into_iter().map(|done| ((done.job, done.at), done.attempted)).unzip();
        let settled: Vec<(AttemptResult<'_>, Option<WebhookAttempt>)> = sent
            .iter()
            .zip(attempted)
            .map(|((job, at), (outcome, log))| {
                let claimed = &job.claimed;
                (self.settle_attempt(Outbox::Webhooks, &claimed.event_id, token, claimed.attempt, outcome, *at), log)
            })
            .collect();
        // Everything is settled (jitter drawn) before the write, and counted after it:
        // `Store::write` may run this closure more than once.
        let recorded = self.store.write_outbox(|db| {
            for (result, log) in &settled {
                db.finish_attempt(result)?;
                if let Some(log) = log {
                    db.log_webhook_attempt(result.id, log)?;
                }
            }
            Ok(())
        });
        // The attempts were made whether or not their outcomes could be written (a full
        // disk): the host's log hears of each either way.
        for (result, log) in &settled {
            if let (Some(observer), Some(log)) = (&self.config().observer, log) {
                let outcome = match (&recorded, &result.settled) {
                    (Err(_), _) => "unrecorded",
                    (Ok(()), Settled::Done) => "delivered",
                    (Ok(()), Settled::Retry { .. }) => "retrying",
                    (Ok(()), Settled::Failed(_)) => "failed",
                    (Ok(()), Settled::NoTarget) => "no_target",
                };
                observer.webhook_attempted(result.id, log, outcome);
            }
        }
        recorded?;
        report.attempted += settled.len();
        for (result, _) in &settled {
            report.count(&result.settled);
        }
        Ok(())
    }

    /// Applies the retry schedule to how an attempt at message `id` (number `attempt` of
    /// its schedule) ended at `finished_at`: what its outbox is to record. Both outboxes follow the
    /// schedule of [`crate::Config::retry_schedule`].
    pub(crate) fn settle_attempt<'a>(
        &self,
        outbox: Outbox,
        id: &'a str,
        lease_token: &'a str,
        attempt: i64,
        outcome: Outcome,
        finished_at: crate::Timestamp,
    ) -> AttemptResult<'a> {
        let settled = match outcome {
            Outcome::Sent => Settled::Done,
            Outcome::GiveUp(error) => Settled::Failed(storable_text(&error)),
            Outcome::NoTarget => Settled::NoTarget,
            Outcome::Retry { error, retry_after } => match self.retry_delay(attempt, retry_after) {
                Some(delay) => Settled::Retry { at: finished_at.plus_ms(delay), error: storable_text(&error) },
                None => Settled::Failed(storable_text(&format!("gave up: {error}"))),
            },
        };
        AttemptResult { outbox, id, lease_token, settled, finished_at }
    }

    /// The order's webhook URL, else its key's (read now, at dispatch), with the key's
    /// signing secrets; a deleted key's last URL and secret still serve its orders.
    /// `None` when there is no URL.
    fn webhook_target(&self, claimed: &ClaimedEvent) -> Result<Option<(String, Vec<crate::SecretString>)>> {
        let Some(key) = self.store.read(|db| db.signing_key(&claimed.key_id))? else {
            return Ok(None);
        };
        let Some(url) = claimed.order_webhook_url.clone().or_else(|| key.webhook_url.clone()) else {
            return Ok(None);
        };
        Ok(Some((url, self.signing_secrets(&key)?)))
    }

    /// What a key's webhooks are signed with now: its current secret, then the one a
    /// rotation replaced while that one still signs too
    /// ([`Service::rotate_key_webhook_secret_keeping_old`]).
    fn signing_secrets(&self, key: &SigningKey) -> Result<Vec<crate::SecretString>> {
        let mut secrets = vec![self.secrets.open(&key.sealed_secret)?];
        if let Some((sealed, until_ms)) = &key.previous {
            if self.now().as_millis() < *until_ms {
                secrets.push(self.secrets.open(sealed)?);
            }
        }
        Ok(secrets)
    }

    /// Milliseconds to wait after failed attempt number `attempt` (jittered, unless a
    /// longer `Retry-After` the endpoint sent wins), or `None` when the schedule is
    /// exhausted.
    fn retry_delay(&self, attempt: i64, retry_after: Option<Duration>) -> Option<i64> {
        let schedule = &self.config().retry_schedule;
        let base = *schedule.get(usize::try_from(attempt - 1).ok()?)?;
        let scheduled =
            base.mul_f64(crate::random::with_generator(|generator| rand::Rng::random_range(generator, 0.8..=1.2)));
        // Retry-After may push the next attempt later, never earlier: a busy endpoint
        // asking for a second must not burn through a schedule meant to span a day.
        let delay = match retry_after {
            Some(wait) if wait.min(MAX_RETRY_AFTER) > scheduled => wait.min(MAX_RETRY_AFTER),
            _ => scheduled,
        };
        i64::try_from(delay.as_millis()).ok()
    }

    /// Every event of an order with its delivery state and attempt log, by sequence.
    pub fn event_deliveries(&self, order_id: &str) -> Result<Vec<EventDelivery>> {
        let events = self.order_events(order_id)?;
        let Some(order_id) = events.first().map(|event| event.order_id.clone()) else { return Ok(Vec::new()) };
        let rows = self.store.read(|db| db.delivery_rows(&order_id))?;
        let mut out = Vec::with_capacity(events.len());
        for (event, row) in events.into_iter().zip(rows) {
            let log = self.store.read(|db| db.attempts_for_event(&row.event_id))?;
            // An event is written due at once (0 in the outbox, the oldest time there is):
            // shown as due since it was made, not since 1970.
            let next_attempt_at = row.next_attempt_at.max(event.created_at);
            out.push(EventDelivery {
                event,
                state: row.state,
                attempts: row.attempts,
                next_attempt_at,
                delivered_at: row.delivered_at,
                last_error: row.last_error,
                log,
            });
        }
        Ok(out)
    }

    /// The deliveries of the `limit` orders with the most recent events.
    pub fn recent_event_deliveries(&self, limit: usize) -> Result<Vec<EventDelivery>> {
        let orders = self.store.read(|db| db.orders_with_events(self.environment(), limit as i64))?;
        let mut out = Vec::new();
        for order_id in orders {
            out.extend(self.event_deliveries(&order_id)?);
        }
        Ok(out)
    }

    /// Queues an event for delivery again, due now, with a fresh retry schedule (same
    /// `webhook-id` and body). An attempt already in flight (in this process or another)
    /// finishes first, whatever its outcome; the event is then sent again.
    pub fn redeliver(&self, event_id: &str) -> Result<()> {
        self.event(event_id)?;
        let now = self.now();
        if self.store.write_outbox(|db| db.requeue(Outbox::Webhooks, event_id, now))? {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::EventNotFound(event_id.to_string())))
        }
    }
}

/// How far behind the latest time a delivery run of an outbox saw the clock must be to
/// count as set back.
const CLOCK_SET_BACK_MS: i64 = 2_000;

impl Service {
    /// At the start of a delivery run of `outbox`: when the clock reads more than
    /// [`CLOCK_SET_BACK_MS`] before what an earlier run of this service saw (an NTP step
    /// back), the due times of the outbox's waiting messages move back by as much, so a
    /// retry due 5 s after its attempt goes out 5 s after it, not once the clock has
    /// caught up with the step. Each process does this for itself (two on one database
    /// move them twice), and a retry written meanwhile moves too: a retry may go out
    /// early, never late. Leases are not moved (see `clock_set_back_sql`).
    pub(crate) fn follow_clock_set_back(&self, outbox: Outbox) -> Result<()> {
        let seen = &self.outbox_clock_ms[match outbox {
            Outbox::Webhooks => 0,
            Outbox::Emails => 1,
        }];
        let now = self.now();
        let latest = seen.fetch_max(now.as_millis(), SeqCst);
        let by_ms = latest.saturating_sub(now.as_millis());
        // Only the run that takes the step moves the times, once.
        if by_ms < CLOCK_SET_BACK_MS || seen.compare_exchange(latest, now.as_millis(), SeqCst, SeqCst).is_err() {
            return Ok(());
        }
        let environment = self.environment();
        self.store.write_outbox(|db| db.move_outbox_times_back(outbox, environment, now, by_ms))
    }
}

/// How far back each [`EventFollower::poll`] looks again: an event's `created_at` is taken
/// before its transaction commits, so one that commits late can appear behind events
/// already read. Transactions end well within this (writes give up after the busy
/// timeout).
const FOLLOW_LOOKBACK_MS: i64 = 10_000;

/// Events read per query while following.
const FOLLOW_PAGE: i64 = 500;

/// A webhook request for an event, as [`Service::deliver_due`] sends it: the Standard
/// Webhooks headers and the exact body, signed with the webhook secret of the key that
/// owns the order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedWebhook {
    /// The `webhook-id` header: the event's id.
    pub webhook_id: String,
    /// The `webhook-timestamp` header: Unix seconds of the signing.
    pub timestamp: i64,
    /// The `webhook-signature` header (`v1,<base64>`).
    pub signature: String,
    /// The body, byte for byte as signed.
    pub body: String,
}

/// Follows the events of one environment as they are written: each
/// [`EventFollower::poll`] returns those not returned before, oldest first. What
/// `coinorder events tail` and `serve`'s event log are made of.
#[derive(Debug, Clone)]
pub struct EventFollower {
    /// Events created before this are never returned.
    from_ms: i64,
    /// The newest `created_at` seen so far.
    newest_ms: i64,
    /// The service's clock at the last poll (at the follower's making before the first).
    polled_at_ms: i64,
    /// Ids returned within the look-back window, with their `created_at`.
    seen: std::collections::HashMap<String, i64>,
}

impl EventFollower {
    /// The events written since the last poll (since `from`, the first time), oldest
    /// first.
    pub fn poll(&mut self, service: &Service) -> Result<Vec<crate::Event>> {
        let environment = service.environment();
        // Events written since the last poll were made after its clock reading, so the
        // look-back starts from there, or from the newest event seen if earlier. After
        // the clock was set back (an NTP step) new events carry earlier times than both,
        // even than `from`: the clock now is the start then, or they would never be
        // returned. (Events made just before `from` may then come once.)
        let now = service.now().as_millis();
        if now < self.polled_at_ms {
            self.from_ms = self.from_ms.min(now.saturating_sub(FOLLOW_LOOKBACK_MS));
        }
        let reference = self.newest_ms.min(self.polled_at_ms).min(now);
        let mut since = self.from_ms.max(reference.saturating_sub(FOLLOW_LOOKBACK_MS));
        let mut fresh = Vec::new();
        loop {
            let page = service.store.read(|db| db.events_since(environment, since, FOLLOW_PAGE))?;
            let full = i64::try_from(page.len()).is_ok_and(|n| n == FOLLOW_PAGE);
            let last = page.last().map(|event| event.created_at.as_millis());
            for event in page {
                let created = event.created_at.as_millis();
                if self.seen.insert(event.event_id.clone(), created).is_none() {
                    self.newest_ms = self.newest_ms.max(created);
                    fresh.push(event);
                }
            }
            // A full page ending later than it began: read on from there (a millisecond
            // with more events than a page would repeat, so it stops).
            match last {
                Some(last) if full && last > since => since = last,
                _ => break,
            }
        }
        self.polled_at_ms = now;
        let horizon = reference.saturating_sub(FOLLOW_LOOKBACK_MS);
        self.seen.retain(|_, created| *created >= horizon);
        fresh.sort_by(|a, b| (a.created_at, &a.event_id).cmp(&(b.created_at, &b.event_id)));
        Ok(fresh)
    }
}

impl Service {
    /// A follower of this environment's events written from `from` on (see
    /// [`EventFollower`]).
    pub fn follow_events(&self, from: crate::Timestamp) -> EventFollower {
        let from = from.as_millis();
        EventFollower { from_ms: from, newest_ms: from, polled_at_ms: self.now().as_millis(), seen: Default::default() }
    }

    /// `event` as the webhook request delivery sends, signed now with the current
    /// webhook secret of the key that owns its order: for relaying an event elsewhere
    /// (`coinorder events tail --forward-to`). An error when that key is gone.
    pub fn signed_webhook(&self, event: &crate::Event) -> Result<SignedWebhook> {
        let key_id = self.order(&event.order_id)?.order.key_id;
        let Some(key) = self.store.read(|db| db.signing_key(&key_id))? else {
            return Err(Error::new(ErrorKind::Config(format!(
                "the key {key_id} of order {} is deleted: nothing to sign its events with",
                event.order_id
            ))));
        };
        let secrets = self.signing_secrets(&key)?;
        let secrets: Vec<&str> = secrets.iter().map(crate::SecretString::expose).collect();
        let timestamp = self.now().as_millis().div_euclid(1000);
        let signature = signature::sign_with_each(&secrets, &event.event_id, timestamp, event.payload.as_bytes())
            .map_err(|e| Error::new(ErrorKind::Internal(format!("cannot sign: {e}"))))?;
        Ok(SignedWebhook { webhook_id: event.event_id.clone(), timestamp, signature, body: event.payload.clone() })
    }
}

/// What sending a webhook needs, owned, so that the senders can run on threads of their
/// own without borrowing the service.
#[derive(Clone)]
struct WebhookSender {
    /// The service's keep-alive agent (a clone shares its connections).
    http: ureq::Agent,
    /// The service's clock.
    clock: Arc<dyn Clock>,
}

impl WebhookSender {
    fn now(&self) -> crate::time::Timestamp {
        crate::time::Timestamp(self.clock.now_ms())
    }

    /// Sends one webhook.
    fn attempt(&self, job: &Job) -> Attempted {
        let (url, secrets) = match &job.target {
            Ok(Some(target)) => target,
            Ok(None) => return (Outcome::NoTarget, None),
            Err(error) => return (Outcome::Retry { error: error.clone(), retry_after: None }, None),
        };
        let started_at = self.now();
        let started = Instant::now();
        let mut log = WebhookAttempt {
            attempt: job.claimed.attempt,
            // The log is shown by every surface (serve's log, the CLI, both bindings):
            // never with the URL's credentials.
            url: crate::redact_url(url),
            started_at,
            status: None,
            latency_ms: 0,
            response_excerpt: None,
            error: None,
        };
        let outcome = self.send(url, secrets, &job.claimed, &mut log);
        log.latency_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        if let Outcome::Retry { error, .. } | Outcome::GiveUp(error) = &outcome {
            log.error = Some(storable_text(error));
        }
        (outcome, Some(log))
    }

    fn send(
        &self,
        url: &str,
        secrets: &[crate::SecretString],
        claimed: &ClaimedEvent,
        log: &mut WebhookAttempt,
    ) -> Outcome {
        // A live service's agent checks every address it connects to (PublicOnlyResolver):
        // a target refused there is given up at once, while a lookup that fails (a DNS
        // outage) is retried on the schedule like any other connection failure.
        let timestamp = self.now().as_millis().div_euclid(1000);
        let body = claimed.payload.as_bytes();
        let secrets: Vec<&str> = secrets.iter().map(crate::SecretString::expose).collect();
        let signature = match signature::sign_with_each(&secrets, &claimed.event_id, timestamp, body) {
            Ok(signature) => signature,
            Err(e) => return Outcome::GiveUp(format!("cannot sign: {e}")),
        };
        let response = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", &claimed.event_id)
            .header("webhook-timestamp", &timestamp.to_string())
            .header("webhook-signature", &signature)
            .send(body);
        let mut response = match response {
            Ok(response) => response,
            Err(error @ ureq::Error::BadUri(_)) if error.to_string().contains(REFUSED_IN_LIVE) => {
                return Outcome::GiveUp(transport_error(&error))
            }
            Err(error) => return Outcome::Retry { error: transport_error(&error), retry_after: None },
        };
        let status = response.status().as_u16();
        log.status = Some(status);
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, self.now()));
        let mut excerpt = Vec::new();
        let _ = response.body_mut().as_reader().take(RESPONSE_READ_LIMIT).read_to_end(&mut excerpt);
        excerpt.truncate(RESPONSE_EXCERPT_BYTES);
        log.response_excerpt = Some(storable_text(&String::from_utf8_lossy(&excerpt)));
        match status {
            200..=299 => Outcome::Sent,
            410 => Outcome::GiveUp("410 Gone: the endpoint asked to stop".into()),
            300..=399 => Outcome::Retry { error: format!("{status}: redirects are not followed"), retry_after: None },
            429 | 503 => Outcome::Retry { error: format!("HTTP {status}"), retry_after },
            _ => Outcome::Retry { error: format!("HTTP {status}"), retry_after: None },
        }
    }
}

/// How long [`Service::deliver_due`] waits for an attempt in flight before it looks again
/// for events come due that a free sender could take meanwhile.
const IN_FLIGHT_POLL: Duration = Duration::from_millis(200);

/// An attempt a sender finished.
struct Finished {
    job: Job,
    attempted: Attempted,
    /// When the attempt ended: its retry is timed from then.
    at: crate::Timestamp,
}

/// What the senders and the caller of [`Service::deliver_due`] share.
#[derive(Default)]
struct PoolState {
    /// Leased events no sender has taken yet (at most one per sender).
    queue: VecDeque<Job>,
    /// Attempts finished and not yet recorded.
    finished: Vec<Finished>,
    /// Set when the pool is dropped: senders end after their attempt in flight.
    closed: bool,
}

struct PoolShared {
    state: Mutex<PoolState>,
    /// Wakes senders for a job or the close.
    work: Condvar,
    /// Wakes the caller for a finished attempt.
    finished: Condvar,
}

/// The webhook senders of one [`Service::deliver_due`] call: threads of their own,
/// joined when the pool is dropped, rather than `std::thread::scope`. A scope, or a
/// blocking channel, gives the calling thread std's thread handle, which outlives the
/// call, and a C host's main thread never frees it (valgrind counts it as possibly lost
/// at exit); a `Condvar` leaves none.
struct SenderPool {
    shared: Arc<PoolShared>,
    threads: Vec<std::thread::JoinHandle<()>>,
    size: usize,
    /// Sends from the caller's thread when no thread could be started.
    inline: WebhookSender,
}

impl SenderPool {
    /// A pool of up to `size` senders, started as events come (none while nothing is due).
    fn start(size: usize, sender: WebhookSender) -> Self {
        let shared = Arc::new(PoolShared {
            state: Mutex::new(PoolState::default()),
            work: Condvar::new(),
            finished: Condvar::new(),
        });
        SenderPool { shared, threads: Vec::new(), size, inline: sender }
    }

    /// How many events can be in flight at once.
    fn size(&self) -> usize {
        self.size
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands leased events to the senders (at most one waiting per sender is leased),
    /// starting senders until there is one per event in flight. Should no
    /// thread start at all, the caller sends them itself (see `wait_finished`).
    fn submit(&mut self, jobs: Vec<Job>, in_flight: usize) {
        if jobs.is_empty() {
            return;
        }
        self.lock().queue.extend(jobs);
        while self.threads.len() < in_flight.min(self.size) {
            let (shared, sender) = (Arc::clone(&self.shared), self.inline.clone());
            let spawned =
                std::thread::Builder::new().name("coinorder-webhook".into()).spawn(move || send_jobs(&shared, &sender));
            match spawned {
                Ok(thread) => self.threads.push(thread),
                Err(_) => break,
            }
        }
        self.shared.work.notify_all();
    }

    /// Takes back the leased events no sender has taken yet.
    fn withdraw_waiting(&self) -> Vec<Job> {
        self.lock().queue.drain(..).collect()
    }

    /// The attempts finished since the last call; waits up to `patience` for one.
    fn wait_finished(&self, patience: Duration) -> Vec<Finished> {
        if self.threads.is_empty() {
            let jobs: Vec<Job> = self.lock().queue.drain(..).collect();
            return jobs.into_iter().map(|job| attempt_one(&self.inline, job)).collect();
        }
        let mut state = self.lock();
        if state.finished.is_empty() {
            state = match self.shared.finished.wait_timeout(state, patience) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        std::mem::take(&mut state.finished)
    }
}

impl Drop for SenderPool {
    fn drop(&mut self) {
        {
            let mut state = self.lock();
            state.closed = true;
            // Events no sender took stay leased until their lease runs out, then are sent.
            state.queue.clear();
        }
        self.shared.work.notify_all();
        for thread in self.threads.drain(..) {
            let _ended = thread.join();
        }
    }
}

/// A sender thread: takes jobs until the pool closes.
fn send_jobs(shared: &PoolShared, sender: &WebhookSender) {
    loop {
        let job = {
            let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(job) = state.queue.pop_front() {
                    break job;
                }
                if state.closed {
                    return;
                }
                state = shared.work.wait(state).unwrap_or_else(|p| p.into_inner());
            }
        };
        let finished = attempt_one(sender, job);
        shared.state.lock().unwrap_or_else(|p| p.into_inner()).finished.push(finished);
        shared.finished.notify_one();
    }
}

/// Sends one job; a panic while sending is an attempt to retry, so the caller, which
/// waits for every event it leased, is never left waiting.
fn attempt_one(sender: &WebhookSender, job: Job) -> Finished {
    let attempted =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sender.attempt(&job))).unwrap_or_else(|_| {
            (Outcome::Retry { error: "the sender stopped unexpectedly".into(), retry_after: None }, None)
        });
    Finished { job, attempted, at: sender.now() }
}

/// Text another party wrote (a receiver's answer, a server's error), made fit for every
/// store: PostgreSQL's TEXT cannot hold U+0000, so each one becomes U+FFFD, the mark for
/// a character that could not be kept. Without it, an answer holding a NUL byte would
/// fail the write that records its attempt, on PostgreSQL alone.
fn storable_text(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}
