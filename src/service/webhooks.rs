//! The service's webhook sender: [`Service::deliver_due`] and the attempt log, over the
//! outbox engine of [`crate::delivery`].

use crate::error::{Error, ErrorKind, Result};
use crate::keys;
use crate::signature;
use crate::storage::{AttemptResult, ClaimedEvent};
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::Clock;
use std::time::{Duration, Instant};

use super::Service;
use crate::delivery::*;

/// A leased event, ready to send.
struct Job {
    claimed: ClaimedEvent,
    /// The URL and signing secret; `Ok(None)` when there is no URL, `Err` when they could
    /// not be read.
    target: std::result::Result<Option<(String, crate::SecretString)>, String>,
}

impl Service {
    /// Sends up to `limit` due webhooks (in parallel, bounded by
    /// `Config::delivery_concurrency`) and records the outcome of each. Call it from a
    /// loop, a timer or the background worker.
    ///
    /// Works in waves of [`WAVE_ROUNDS`] × `delivery_concurrency` events: each wave is
    /// leased for as long as sending it can take (`WAVE_ROUNDS` timeouts plus 30 s), sent,
    /// and recorded before the next is claimed, so a lease always covers the attempts it
    /// guards, however large `limit` is.
    pub fn deliver_due(&self, limit: usize) -> Result<DeliveryReport> {
        self.deliver_due_unless(limit, &|| false)
    }

    /// [`Service::deliver_due`] that stops between waves once `stopped()` says so (the
    /// background worker's stop).
    pub(crate) fn deliver_due_unless(&self, limit: usize, stopped: &dyn Fn() -> bool) -> Result<DeliveryReport> {
        let wave_size = self.config().delivery_concurrency.max(1) * WAVE_ROUNDS;
        let mut report = DeliveryReport::default();
        while report.attempted < limit && !stopped() {
            let wave = self.deliver_wave(wave_size.min(limit - report.attempted))?;
            report.attempted += wave.attempted;
            report.delivered += wave.delivered;
            report.retrying += wave.retrying;
            report.failed += wave.failed;
            report.no_target += wave.no_target;
            if wave.attempted < wave_size {
                break;
            }
        }
        Ok(report)
    }

    /// Leases up to `size` due events, sends them `delivery_concurrency` at a time, and
    /// records every outcome in one transaction.
    fn deliver_wave(&self, size: usize) -> Result<DeliveryReport> {
        let now = self.now();
        let token = keys::random_id(24);
        let lease_until = now.plus_ms(Outbox::Webhooks.lease_ms(self.config().webhook_timeout));
        let claimed = self.store.write_outbox(|db| {
            let ids = db.claim_due(Outbox::Webhooks, self.environment(), now, lease_until, &token, size as i64)?;
            ids.iter().map(|id| db.claimed_event(id)).collect::<Result<Vec<_>>>()
        })?;
        let mut jobs = Vec::with_capacity(claimed.len());
        for claimed in claimed {
            // One event whose target cannot be worked out (its sealed secret unreadable, a
            // read failing) is retried on its own schedule; it never holds up the others.
            let target = self.webhook_target(&claimed).map_err(|e| format!("no target: {e}"));
            jobs.push(Job { claimed, target });
        }

        // The requests go out here, outside any transaction: the lease taken above keeps
        // every other deliverer off these events until `lease_until`, which outlasts the
        // wave, and the outcomes below are written only where this wave's token still
        // holds the lease.
        let jobs = Arc::new(jobs);
        let slots: Arc<Vec<Mutex<Option<Attempted>>>> = Arc::new(jobs.iter().map(|_| Mutex::new(None)).collect());
        let senders = self.config().delivery_concurrency.clamp(1, jobs.len().max(1));
        let send_next = {
            let (jobs, slots, next) = (Arc::clone(&jobs), Arc::clone(&slots), Arc::new(AtomicUsize::new(0)));
            let sender = WebhookSender { http: self.http.clone(), clock: Arc::clone(&self.config().clock) };
            move || {
                while let (Some(job), Some(slot)) = {
                    let index = next.fetch_add(1, Ordering::SeqCst);
                    (jobs.get(index), slots.get(index))
                } {
                    let attempted = sender.attempt(job);
                    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(attempted);
                }
            }
        };
        // Threads of their own, joined, rather than `std::thread::scope`: a scope gives the
        // calling thread std's thread handle, which outlives the call, and a C host's main
        // thread never frees it (valgrind counts it as possibly lost at exit).
        let threads: Vec<_> = (0..senders)
            .filter_map(|_| std::thread::Builder::new().name("coinorder-webhook".into()).spawn(send_next.clone()).ok())
            .collect();
        if threads.is_empty() {
            // No thread could be started: send from here, one at a time.
            send_next();
        }
        for thread in threads {
            // A sender that panicked leaves its event's slot empty: retried below.
            let _ended = thread.join();
        }
        let finished: Vec<(AttemptResult<'_>, Option<WebhookAttempt>)> = jobs
            .iter()
            .zip(slots.iter())
            .map(|(job, slot)| {
                let (outcome, log) = slot.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_else(|| {
                    (Outcome::Retry { error: "the sender stopped unexpectedly".into(), retry_after: None }, None)
                });
                (
                    self.settle_attempt(Outbox::Webhooks, &job.claimed.event_id, &token, job.claimed.attempt, outcome),
                    log,
                )
            })
            .collect();

        // Everything is settled (times read, jitter drawn) before the write, and counted
        // after it: `Store::write` may run this closure more than once.
        self.store.write_outbox(|db| {
            for (result, log) in &finished {
                db.finish_attempt(result)?;
                if let Some(log) = log {
                    db.log_webhook_attempt(result.id, log)?;
                }
            }
            Ok(())
        })?;
        let mut report = DeliveryReport { attempted: jobs.len(), ..DeliveryReport::default() };
        for (result, log) in &finished {
            report.count(&result.settled);
            if let (Some(observer), Some(log)) = (&self.config().observer, log) {
                let outcome = match result.settled {
                    Settled::Done => "delivered",
                    Settled::Retry { .. } => "retrying",
                    Settled::Failed(_) => "failed",
                    Settled::NoTarget => "no_target",
                };
                observer.webhook_attempted(result.id, log, outcome);
            }
        }
        Ok(report)
    }

    /// Applies the retry schedule to how an attempt at message `id` (number `attempt` of
    /// its schedule) ended, now: what its outbox is to record. Both outboxes follow the
    /// schedule of [`crate::Config::retry_schedule`].
    pub(crate) fn settle_attempt<'a>(
        &self,
        outbox: Outbox,
        id: &'a str,
        lease_token: &'a str,
        attempt: i64,
        outcome: Outcome,
    ) -> AttemptResult<'a> {
        let finished_at = self.now();
        let settled = match outcome {
            Outcome::Sent => Settled::Done,
            Outcome::GiveUp(error) => Settled::Failed(error),
            Outcome::NoTarget => Settled::NoTarget,
            Outcome::Retry { error, retry_after } => match self.retry_delay(attempt, retry_after) {
                Some(delay) => Settled::Retry { at: finished_at.plus_ms(delay), error },
                None => Settled::Failed(format!("gave up: {error}")),
            },
        };
        AttemptResult { outbox, id, lease_token, settled, finished_at }
    }

    /// The order's webhook URL, else its key's (read now, at dispatch), with the key's
    /// signing secret; a deleted key's last URL and secret still serve its orders.
    /// `None` when there is no URL.
    fn webhook_target(&self, claimed: &ClaimedEvent) -> Result<Option<(String, crate::SecretString)>> {
        let Some((key_url, sealed_secret)) = self.store.read(|db| db.signing_key(&claimed.key_id))? else {
            return Ok(None);
        };
        let Some(url) = claimed.order_webhook_url.clone().or(key_url) else {
            return Ok(None);
        };
        let secret = self.secrets.open(&sealed_secret)?;
        Ok(Some((url, secret)))
    }

    /// Milliseconds to wait after failed attempt number `attempt` (jittered, unless a
    /// longer `Retry-After` the endpoint sent wins), or `None` when the schedule is
    /// exhausted.
    fn retry_delay(&self, attempt: i64, retry_after: Option<Duration>) -> Option<i64> {
        let schedule = &self.config().retry_schedule;
        let base = *schedule.get(usize::try_from(attempt - 1).ok()?)?;
        let scheduled = base.mul_f64(rand::random_range(0.8..=1.2));
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
            out.push(EventDelivery {
                event,
                state: row.state,
                attempts: row.attempts,
                next_attempt_at: row.next_attempt_at,
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
    /// Ids returned within the look-back window, with their `created_at`.
    seen: std::collections::HashMap<String, i64>,
}

impl EventFollower {
    /// The events written since the last poll (since `from`, the first time), oldest
    /// first.
    pub fn poll(&mut self, service: &Service) -> Result<Vec<crate::Event>> {
        let environment = service.environment();
        let mut since = self.from_ms.max(self.newest_ms.saturating_sub(FOLLOW_LOOKBACK_MS));
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
        let horizon = self.newest_ms.saturating_sub(FOLLOW_LOOKBACK_MS);
        self.seen.retain(|_, created| *created >= horizon);
        fresh.sort_by(|a, b| (a.created_at, &a.event_id).cmp(&(b.created_at, &b.event_id)));
        Ok(fresh)
    }
}

impl Service {
    /// A follower of this environment's events written from `from` on (see
    /// [`EventFollower`]).
    pub fn follow_events(&self, from: crate::Timestamp) -> EventFollower {
        EventFollower { from_ms: from.as_millis(), newest_ms: from.as_millis(), seen: Default::default() }
    }

    /// `event` as the webhook request delivery sends, signed now with the current
    /// webhook secret of the key that owns its order: for relaying an event elsewhere
    /// (`coinorder events tail --forward-to`). An error when that key is gone.
    pub fn signed_webhook(&self, event: &crate::Event) -> Result<SignedWebhook> {
        let key_id = self.order(&event.order_id)?.order.key_id;
        let Some((_, sealed_secret)) = self.store.read(|db| db.signing_key(&key_id))? else {
            return Err(Error::new(ErrorKind::Config(format!(
                "the key {key_id} of order {} is deleted: nothing to sign its events with",
                event.order_id
            ))));
        };
        let secret = self.secrets.open(&sealed_secret)?;
        let timestamp = self.now().as_millis().div_euclid(1000);
        let signature = signature::sign(secret.expose(), &event.event_id, timestamp, event.payload.as_bytes())
            .map_err(|e| Error::new(ErrorKind::Internal(format!("cannot sign: {e}"))))?;
        Ok(SignedWebhook { webhook_id: event.event_id.clone(), timestamp, signature, body: event.payload.clone() })
    }
}

/// What sending a webhook needs, owned, so that the senders of a wave can run on threads
/// of their own without borrowing the service.
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
        let (url, secret) = match &job.target {
            Ok(Some(target)) => target,
            Ok(None) => return (Outcome::NoTarget, None),
            Err(error) => return (Outcome::Retry { error: error.clone(), retry_after: None }, None),
        };
        let started_at = self.now();
        let started = Instant::now();
        let mut log = WebhookAttempt {
            attempt: job.claimed.attempt,
            url: url.clone(),
            started_at,
            status: None,
            latency_ms: 0,
            response_excerpt: None,
            error: None,
        };
        let outcome = self.send(url, secret, &job.claimed, &mut log);
        log.latency_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        if let Outcome::Retry { error, .. } | Outcome::GiveUp(error) = &outcome {
            log.error = Some(error.clone());
        }
        (outcome, Some(log))
    }

    fn send(
        &self,
        url: &str,
        secret: &crate::SecretString,
        claimed: &ClaimedEvent,
        log: &mut WebhookAttempt,
    ) -> Outcome {
        // A live service's agent checks every address it connects to (PublicOnlyResolver):
        // a target refused there is given up at once, while a lookup that fails (a DNS
        // outage) is retried on the schedule like any other connection failure.
        let timestamp = self.now().as_millis().div_euclid(1000);
        let body = claimed.payload.as_bytes();
        let signature = match signature::sign(secret.expose(), &claimed.event_id, timestamp, body) {
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
        log.response_excerpt = Some(String::from_utf8_lossy(&excerpt).into_owned());
        match status {
            200..=299 => Outcome::Sent,
            410 => Outcome::GiveUp("410 Gone: the endpoint asked to stop".into()),
            300..=399 => Outcome::Retry { error: format!("{status}: redirects are not followed"), retry_after: None },
            429 | 503 => Outcome::Retry { error: format!("HTTP {status}"), retry_after },
            _ => Outcome::Retry { error: format!("HTTP {status}"), retry_after: None },
        }
    }
}
