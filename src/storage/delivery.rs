//! SQL for the two outboxes (webhooks on the event table, payment-link e-mails), the
//! webhook attempt log and the e-mail rows.
//!
//! Both outboxes go through one engine: [`Conn::claim_due`] leases due messages,
//! [`Conn::finish_attempt`] records how an attempt ended and [`Conn::requeue`] puts a
//! message back. The sender names the outbox ([`Outbox`]); [`table`] maps it onto the
//! columns its table has had since migration 0003, which name their id, state and
//! sent-at columns differently.

use rusqlite::{named_params, Row};

use super::Conn;
use crate::delivery::{DeliveryState, Outbox, Settled, WebhookAttempt};
use crate::environment::Environment;
use crate::error::{Error, ErrorKind, Result};
use crate::mail::{Email, EmailState};
use crate::time::Timestamp;

/// Where one outbox keeps its messages. Both tables also have `environment`,
/// `order_id`, `attempts`, `next_attempt_at`, `lease_until`, `lease_token`,
/// `last_error` and `created_at`, which the engine uses under those names.
pub(super) struct Table {
    pub(super) name: &'static str,
    pub(super) id: &'static str,
    pub(super) state: &'static str,
    /// The states of a message waiting for an attempt, sent, and given up.
    pub(super) pending: &'static str,
    pub(super) done: &'static str,
    pub(super) failed: &'static str,
    /// The column stamped with when the message went out.
    pub(super) done_at: &'static str,
    /// The state of a message with nowhere to go, in an outbox that has one.
    pub(super) no_target: Option<&'static str>,
    /// The column that orders an order's messages, in an outbox whose messages must be
    /// first attempted in that order.
    pub(super) sequence: Option<&'static str>,
}

const WEBHOOKS: Table = Table {
    name: "events",
    id: "event_id",
    state: "delivery_state",
    pending: DeliveryState::Pending.as_str(),
    done: DeliveryState::Delivered.as_str(),
    failed: DeliveryState::Failed.as_str(),
    done_at: "delivered_at",
    no_target: Some(DeliveryState::NoTarget.as_str()),
    sequence: Some("sequence"),
};

const EMAILS: Table = Table {
    name: "emails",
    id: "email_id",
    state: "state",
    pending: EmailState::Pending.as_str(),
    done: EmailState::Sent.as_str(),
    failed: EmailState::Failed.as_str(),
    done_at: "sent_at",
    no_target: None,
    sequence: None,
};

pub(super) fn table(outbox: Outbox) -> &'static Table {
    match outbox {
        Outbox::Webhooks => &WEBHOOKS,
        Outbox::Emails => &EMAILS,
    }
}

/// The one lease-expiry rule, for the row aliased `alias`: a lease has run out (or was
/// never taken, or a finished attempt released it) once `lease_until` is not after now.
/// Only such a message may be claimed, and only a message whose lease holds counts as
/// in flight.
pub(super) fn lease_expired(alias: &str) -> String {
    format!("{alias}.lease_until <= :now")
}

/// An event leased to this worker for one attempt.
pub(crate) struct ClaimedEvent {
    pub event_id: String,
    pub payload: String,
    /// Attempts including this one.
    pub attempt: i64,
    pub order_webhook_url: Option<String>,
    pub key_id: String,
}

/// How one leased attempt ended, to write back.
pub(crate) struct AttemptResult<'a> {
    pub outbox: Outbox,
    pub id: &'a str,
    pub lease_token: &'a str,
    pub settled: Settled,
    pub finished_at: Timestamp,
}

/// Delivery columns of one event, for listings.
pub(crate) struct DeliveryRow {
    pub event_id: String,
    pub state: DeliveryState,
    pub attempts: i64,
    pub next_attempt_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
    pub last_error: Option<String>,
}

fn attempt_row(row: &Row<'_>) -> rusqlite::Result<WebhookAttempt> {
    Ok(WebhookAttempt {
        attempt: row.get(0)?,
        url: row.get(1)?,
        started_at: Timestamp(row.get(2)?),
        status: row.get::<_, Option<i64>>(3)?.and_then(|s| u16::try_from(s).ok()),
        latency_ms: row.get(4)?,
        response_excerpt: row.get(5)?,
        error: row.get(6)?,
    })
}

// Read by position in email_row, in this order.
pub(super) const EMAIL_COLUMNS: &str =
    "email_id, order_id, recipient, subject, text_body, html_body, state, attempts, \
                             next_attempt_at, last_error, sent_at, created_at";

fn email_row(row: &Row<'_>) -> rusqlite::Result<Email> {
    Ok(Email {
        email_id: row.get(0)?,
        order_id: row.get(1)?,
        recipient: row.get(2)?,
        subject: row.get(3)?,
        text_body: row.get(4)?,
        html_body: row.get(5)?,
        state: super::decode(row, 6, "emails.state", EmailState::parse)?,
        attempts: row.get(7)?,
        next_attempt_at: Timestamp(row.get(8)?),
        last_error: row.get(9)?,
        sent_at: row.get::<_, Option<i64>>(10)?.map(Timestamp),
        created_at: Timestamp(row.get(11)?),
    })
}

impl Conn<'_> {
    /// Leases up to `limit` due messages of `outbox` to `lease_token` until
    /// `lease_until`, counts the attempt, and returns their ids, earliest due first.
    ///
    /// In an ordered outbox (webhooks), a message whose order has an earlier one not yet
    /// attempted, or leased right now (its attempt may still be in flight in another
    /// worker or process), waits, so each order's messages are first attempted in
    /// sequence order however many deliverers run.
    ///
    /// Call it inside `Store::write` from a closure that does nothing but database work
    /// and returns what it found: a busy database makes `Store::write` run the closure
    /// again, and anything it did outside the transaction (counting, logging, sending)
    /// would then happen twice, while the first run's lease was rolled back.
    pub(crate) fn claim_due(
        &self,
        outbox: Outbox,
        environment: Environment,
        now: Timestamp,
        lease_until: Timestamp,
        lease_token: &str,
        limit: i64,
    ) -> Result<Vec<String>> {
        let c = sqlite_or!(self, pg => pg.claim_due(outbox, environment, now, lease_until, lease_token, limit));
        let Table { name, id, state, pending, sequence, .. } = table(outbox);
        let (in_order, tie_break) = match sequence {
            Some(sequence) => (
                format!(
                    "AND (m.attempts > 0 OR NOT EXISTS (
                        SELECT 1 FROM {name} p WHERE p.order_id = m.order_id AND p.{sequence} < m.{sequence}
                          AND p.{state} = '{pending}' AND (p.attempts = 0 OR NOT ({}))))",
                    lease_expired("p")
                ),
                format!(", m.{sequence}"),
            ),
            None => (String::new(), String::new()),
        };
        let sql = format!(
            "SELECT m.{id} FROM {name} m
             WHERE m.environment = :environment AND m.{state} = '{pending}' AND m.next_attempt_at <= :now
               AND {} {in_order}
             ORDER BY m.next_attempt_at, m.created_at{tie_break} LIMIT :limit",
            lease_expired("m")
        );
        let mut stmt = c.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            named_params! {":environment": environment.as_str(), ":now": now.as_millis(), ":limit": limit},
            |row| row.get::<_, String>(0),
        )?;
        let claimed = rows.collect::<rusqlite::Result<Vec<_>>>()?;
        // Selecting and then leasing is one step only because the caller holds SQLite's
        // single write lock; where writers run side by side the SELECT must lock what it
        // picks (PostgreSQL: FOR UPDATE SKIP LOCKED), or two could lease the same message.
        let mut lease = c.prepare_cached(&format!(
            "UPDATE {name} SET lease_until = :lease_until, lease_token = :token, attempts = attempts + 1
             WHERE {id} = :id"
        ))?;
        for message in &claimed {
            lease.execute(named_params! {
                ":lease_until": lease_until.as_millis(),
                ":token": lease_token,
                ":id": message,
            })?;
        }
        Ok(claimed)
    }

    /// Records an attempt's outcome and releases the lease, if the attempt's lease token
    /// still holds it (a lease that ran out may have passed to another deliverer, whose
    /// record then stands). Returns whether it did.
    pub(crate) fn finish_attempt(&self, result: &AttemptResult<'_>) -> Result<bool> {
        let c = sqlite_or!(self, pg => pg.finish_attempt(result));
        let t = table(result.outbox);
        let (state, next, done_at) = match &result.settled {
            Settled::Done => (t.done, result.finished_at, Some(result.finished_at.as_millis())),
            Settled::Retry { at, .. } => (t.pending, *at, None),
            Settled::Failed(_) => (t.failed, result.finished_at, None),
            Settled::NoTarget => {
                let no_target = t.no_target.ok_or_else(|| {
                    Error::new(ErrorKind::Internal(format!("{} has no state for a message without a target", t.name)))
                })?;
                (no_target, result.finished_at, None)
            }
        };
        let changed = c
            .prepare_cached(&format!(
                "UPDATE {name} SET {state} = :state, next_attempt_at = :next, lease_until = 0, lease_token = NULL,
                        last_error = :error, {done_at} = COALESCE(:done_at, {done_at})
                 WHERE {id} = :id AND lease_token = :token",
                name = t.name,
                state = t.state,
                done_at = t.done_at,
                id = t.id,
            ))?
            .execute(named_params! {
                ":state": state,
                ":next": next.as_millis(),
                ":error": result.settled.error(),
                ":done_at": done_at,
                ":id": result.id,
                ":token": result.lease_token,
            })?;
        Ok(changed == 1)
    }

    /// Puts a message back in its outbox, due now, with a fresh schedule. A lease held
    /// right now is kept: the attempt in flight finishes before anyone sends it again.
    pub(crate) fn requeue(&self, outbox: Outbox, message_id: &str, now: Timestamp) -> Result<bool> {
        let c = sqlite_or!(self, pg => pg.requeue(outbox, message_id, now));
        let Table { name, id, state, pending, .. } = table(outbox);
        let changed = c
            .prepare_cached(&format!(
                "UPDATE {name} SET {state} = '{pending}', attempts = 0, next_attempt_at = :now WHERE {id} = :id"
            ))?
            .execute(named_params! {":now": now.as_millis(), ":id": message_id})?;
        Ok(changed == 1)
    }

    /// A claimed event with what sending it needs: its payload and its order's webhook
    /// URL and key.
    pub(crate) fn claimed_event(&self, event_id: &str) -> Result<ClaimedEvent> {
        let c = sqlite_or!(self, pg => pg.claimed_event(event_id));
        let event = c
            .prepare_cached(
                "SELECT e.event_id, e.payload, e.attempts, o.webhook_url, o.key_id
                 FROM events e JOIN orders o ON o.order_id = e.order_id WHERE e.event_id = :event_id",
            )?
            .query_row(named_params! {":event_id": event_id}, |row| {
                Ok(ClaimedEvent {
                    event_id: row.get(0)?,
                    payload: row.get(1)?,
                    attempt: row.get(2)?,
                    order_webhook_url: row.get(3)?,
                    key_id: row.get(4)?,
                })
            })?;
        Ok(event)
    }

    /// Logs one webhook request (an attempt that found no target made none).
    pub(crate) fn log_webhook_attempt(&self, event_id: &str, log: &WebhookAttempt) -> Result<()> {
        let c = sqlite_or!(self, pg => pg.log_webhook_attempt(event_id, log));
        c.prepare_cached(
            "INSERT INTO webhook_attempts (event_id, attempt, url, started_at, status, latency_ms,
                                               response_excerpt, error)
                 VALUES (:event_id, :attempt, :url, :started_at, :status, :latency_ms, :excerpt, :error)",
        )?
        .execute(named_params! {
            ":event_id": event_id,
            ":attempt": log.attempt,
            ":url": log.url,
            ":started_at": log.started_at.as_millis(),
            ":status": log.status.map(i64::from),
            ":latency_ms": log.latency_ms,
            ":excerpt": log.response_excerpt,
            ":error": log.error,
        })?;
        Ok(())
    }

    pub(crate) fn delivery_rows(&self, order_id: &str) -> Result<Vec<DeliveryRow>> {
        let c = sqlite_or!(self, pg => pg.delivery_rows(order_id));
        let mut stmt = c.prepare_cached(
            "SELECT event_id, delivery_state, attempts, next_attempt_at, delivered_at, last_error
             FROM events WHERE order_id = :order_id ORDER BY sequence",
        )?;
        let rows = stmt.query_map(named_params! {":order_id": order_id}, |row| {
            Ok(DeliveryRow {
                event_id: row.get(0)?,
                state: super::decode(row, 1, "events.delivery_state", DeliveryState::parse)?,
                attempts: row.get(2)?,
                next_attempt_at: Timestamp(row.get(3)?),
                delivered_at: row.get::<_, Option<i64>>(4)?.map(Timestamp),
                last_error: row.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn attempts_for_event(&self, event_id: &str) -> Result<Vec<WebhookAttempt>> {
        let c = sqlite_or!(self, pg => pg.attempts_for_event(event_id));
        let mut stmt = c.prepare_cached(
            "SELECT attempt, url, started_at, status, latency_ms, response_excerpt, error
             FROM webhook_attempts WHERE event_id = :event_id ORDER BY id",
        )?;
        let rows = stmt.query_map(named_params! {":event_id": event_id}, attempt_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Orders of `environment` that have events, newest event first.
    pub(crate) fn orders_with_events(&self, environment: Environment, limit: i64) -> Result<Vec<String>> {
        let c = sqlite_or!(self, pg => pg.orders_with_events(environment, limit));
        let mut stmt = c.prepare_cached(
            "SELECT order_id FROM events WHERE environment = :environment
             GROUP BY order_id ORDER BY MAX(created_at) DESC LIMIT :limit",
        )?;
        let rows =
            stmt.query_map(named_params! {":environment": environment.as_str(), ":limit": limit}, |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn insert_email(&self, environment: Environment, email: &Email) -> Result<()> {
        let c = sqlite_or!(self, pg => pg.insert_email(environment, email));
        c.prepare_cached(
            "INSERT INTO emails (email_id, order_id, environment, recipient, subject, text_body, html_body,
                                     state, attempts, next_attempt_at, created_at)
                 VALUES (:email_id, :order_id, :environment, :recipient, :subject, :text_body, :html_body,
                         'pending', 0, :created_at, :created_at)",
        )?
        .execute(named_params! {
            ":email_id": email.email_id,
            ":order_id": email.order_id,
            ":environment": environment.as_str(),
            ":recipient": email.recipient,
            ":subject": email.subject,
            ":text_body": email.text_body,
            ":html_body": email.html_body,
            ":created_at": email.created_at.as_millis(),
        })?;
        Ok(())
    }

    /// One e-mail by id (a claimed one: its `attempts` counts the attempt just leased).
    pub(crate) fn email(&self, email_id: &str) -> Result<Email> {
        let c = sqlite_or!(self, pg => pg.email(email_id));
        let email = c
            .prepare_cached(&format!("SELECT {EMAIL_COLUMNS} FROM emails WHERE email_id = :email_id"))?
            .query_row(named_params! {":email_id": email_id}, email_row)?;
        Ok(email)
    }

    pub(crate) fn emails(&self, environment: Environment, order_id: Option<&str>, limit: i64) -> Result<Vec<Email>> {
        let c = sqlite_or!(self, pg => pg.emails(environment, order_id, limit));
        let filter = if order_id.is_some() { "AND order_id = :order_id" } else { "" };
        let sql = format!(
            "SELECT {EMAIL_COLUMNS} FROM emails WHERE environment = :environment {filter}
             ORDER BY created_at DESC, email_id DESC LIMIT :limit"
        );
        let mut stmt = c.prepare_cached(&sql)?;
        let env = environment.as_str();
        let rows = match order_id {
            Some(order_id) => {
                stmt.query_map(named_params! {":environment": env, ":order_id": order_id, ":limit": limit}, email_row)?
            }
            None => stmt.query_map(named_params! {":environment": env, ":limit": limit}, email_row)?,
        };
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::StorageError;
    use crate::storage::{Store, StoreOptions, StoreTarget};

    const NOW: Timestamp = Timestamp(1_000_000);

    fn store() -> Result<(tempfile::TempDir, Store)> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let options = StoreOptions { synchronous_full: false, busy_timeout: Duration::from_secs(5) };
        let store = Store::open(&StoreTarget::Sqlite(dir.path().join("t.db")), options)?;
        store.write(|db| {
            db.sqlite_for_test().execute(
                "INSERT INTO orders (order_id, environment, user_id, key_id, merchant_order_id, amount, currency,
                                     status, request_hash, create_response, created_at, updated_at)
                 VALUES ('o1', 'sandbox', 7, 'key_x', 'm1', '10', 'USD', 'NEW', x'00', '{}', 0, 0)",
                [],
            )?;
            db.insert_email(
                Environment::Sandbox,
                &Email {
                    email_id: "eml_1".into(),
                    order_id: "o1".into(),
                    recipient: "a@b.example".into(),
                    subject: "s".into(),
                    text_body: "t".into(),
                    html_body: "h".into(),
                    state: EmailState::Pending,
                    attempts: 0,
                    next_attempt_at: NOW,
                    last_error: None,
                    sent_at: None,
                    created_at: NOW,
                },
            )
        })?;
        Ok((dir, store))
    }

    fn claim(store: &Store, now: Timestamp, token: &str) -> Result<Vec<String>> {
        store.write(|db| db.claim_due(Outbox::Emails, Environment::Sandbox, now, now.plus_ms(1_000), token, 10))
    }

    fn finish(store: &Store, token: &str, settled: Settled) -> Result<bool> {
        let result =
            AttemptResult { outbox: Outbox::Emails, id: "eml_1", lease_token: token, settled, finished_at: NOW };
        store.write(|db| db.finish_attempt(&result))
    }

    #[test]
    fn a_claim_run_again_by_a_busy_retry_leases_and_counts_the_attempt_once() -> Result<()> {
        let (_dir, store) = store()?;
        let mut runs = 0;
        let claimed = store.write(|db| {
            runs += 1;
            let claimed = db.claim_due(Outbox::Emails, Environment::Sandbox, NOW, NOW.plus_ms(1_000), "a", 10)?;
            if runs == 1 {
                // What SQLite (or PostgreSQL, as a serialization failure) reports mid-way.
                return Err(Error::new(ErrorKind::Storage(StorageError::new(true, std::io::Error::other("busy")))));
            }
            Ok(claimed)
        })?;
        assert_eq!((runs, claimed), (2, vec!["eml_1".to_string()]));
        assert_eq!(store.read(|db| db.email("eml_1"))?.attempts, 1, "the first run was rolled back");
        Ok(())
    }

    #[test]
    fn a_lease_runs_out_at_lease_until_and_only_its_token_finishes_the_attempt() -> Result<()> {
        let (_dir, store) = store()?;
        assert_eq!(claim(&store, NOW, "a")?, ["eml_1"]);
        assert!(claim(&store, NOW.plus_ms(999), "b")?.is_empty(), "leased until NOW + 1000");
        assert_eq!(claim(&store, NOW.plus_ms(1_000), "b")?, ["eml_1"], "the lease ran out");
        assert!(!finish(&store, "a", Settled::Failed("late".into()))?, "lease a passed on to b");
        assert!(finish(&store, "b", Settled::Done)?);
        let email = store.read(|db| db.email("eml_1"))?;
        assert_eq!(
            (email.state, email.attempts, email.sent_at, email.last_error),
            (EmailState::Sent, 2, Some(NOW), None)
        );
        Ok(())
    }

    #[test]
    fn a_retry_keeps_the_message_pending_until_its_time() -> Result<()> {
        let (_dir, store) = store()?;
        claim(&store, NOW, "a")?;
        let at = NOW.plus_ms(5_000);
        assert!(finish(&store, "a", Settled::Retry { at, error: "down".into() })?);
        assert!(claim(&store, at.plus_ms(-1), "b")?.is_empty(), "the lease is released, but not due yet");
        assert_eq!(claim(&store, at, "b")?, ["eml_1"]);
        Ok(())
    }

    #[test]
    fn an_outbox_without_a_no_target_state_refuses_one() -> Result<()> {
        let (_dir, store) = store()?;
        claim(&store, NOW, "a")?;
        let refused = finish(&store, "a", Settled::NoTarget);
        assert!(matches!(refused.as_ref().map_err(Error::kind), Err(ErrorKind::Internal(_))), "{refused:?}");
        assert_eq!(store.read(|db| db.email("eml_1"))?.state, EmailState::Pending);
        Ok(())
    }
}
