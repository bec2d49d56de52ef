//! SQL for webhook delivery (on the event outbox), the attempt log and the e-mail outbox.

use rusqlite::{named_params, Row};

use super::Conn;
use crate::config::Environment;
use crate::delivery::{DeliveryState, WebhookAttempt};
use crate::error::Result;
use crate::mail::{Email, EmailState};
use crate::time::Timestamp;

/// An event leased to this worker for one attempt.
pub(crate) struct ClaimedEvent {
    pub event_id: String,
    pub payload: String,
    /// Attempts including this one.
    pub attempt: i64,
    pub order_webhook_url: Option<String>,
    pub key_id: String,
}

/// What to write back after an attempt.
pub(crate) struct AttemptResult<'a> {
    pub event_id: &'a str,
    pub lease_token: &'a str,
    pub state: DeliveryState,
    pub next_attempt_at: Timestamp,
    pub finished_at: Timestamp,
    pub last_error: Option<&'a str>,
    /// `None` when no request was made (no target).
    pub log: Option<&'a WebhookAttempt>,
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
const EMAIL_COLUMNS: &str = "email_id, order_id, recipient, subject, text_body, html_body, state, attempts, \
                             next_attempt_at, last_error, sent_at, created_at";

fn email_row(row: &Row<'_>) -> rusqlite::Result<Email> {
    let state: String = row.get(6)?;
    Ok(Email {
        email_id: row.get(0)?,
        order_id: row.get(1)?,
        recipient: row.get(2)?,
        subject: row.get(3)?,
        text_body: row.get(4)?,
        html_body: row.get(5)?,
        state: EmailState::parse(&state).unwrap_or(EmailState::Pending),
        attempts: row.get(7)?,
        next_attempt_at: Timestamp(row.get(8)?),
        last_error: row.get(9)?,
        sent_at: row.get::<_, Option<i64>>(10)?.map(Timestamp),
        created_at: Timestamp(row.get(11)?),
    })
}

impl Conn<'_> {
    /// Leases up to `limit` due events. An event whose order has an earlier event not yet
    /// attempted, or leased right now (its attempt may still be in flight in another
    /// worker or process), waits, so each order's events are first attempted in
    /// `sequence` order however many deliverers run.
    pub(crate) fn claim_due_events(
        &self,
        environment: Environment,
        now: Timestamp,
        lease_until: Timestamp,
        lease_token: &str,
        limit: i64,
    ) -> Result<Vec<ClaimedEvent>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT e.event_id, e.payload, e.attempts + 1, o.webhook_url, o.key_id
             FROM events e JOIN orders o ON o.order_id = e.order_id
             WHERE e.environment = :environment AND e.delivery_state = 'pending'
               AND e.next_attempt_at <= :now AND e.lease_until <= :now
               AND (e.attempts > 0 OR NOT EXISTS (
                    SELECT 1 FROM events p WHERE p.order_id = e.order_id AND p.sequence < e.sequence
                      AND p.delivery_state = 'pending' AND (p.attempts = 0 OR p.lease_until > :now)))
             ORDER BY e.next_attempt_at, e.created_at, e.sequence LIMIT :limit",
        )?;
        let rows = stmt.query_map(
            named_params! {":environment": environment.as_str(), ":now": now.as_millis(), ":limit": limit},
            |row| {
                Ok(ClaimedEvent {
                    event_id: row.get(0)?,
                    payload: row.get(1)?,
                    attempt: row.get(2)?,
                    order_webhook_url: row.get(3)?,
                    key_id: row.get(4)?,
                })
            },
        )?;
        let mut claimed = Vec::new();
        for row in rows {
            claimed.push(row?);
        }
        let mut lease = self.0.prepare_cached(
            "UPDATE events SET lease_until = :lease_until, lease_token = :token, attempts = attempts + 1
             WHERE event_id = :event_id",
        )?;
        for event in &claimed {
            lease.execute(named_params! {
                ":lease_until": lease_until.as_millis(),
                ":token": lease_token,
                ":event_id": event.event_id,
            })?;
        }
        Ok(claimed)
    }

    /// Records an attempt's outcome, if this worker still holds the lease.
    pub(crate) fn finish_event_attempt(&self, result: &AttemptResult<'_>) -> Result<bool> {
        let changed = self
            .0
            .prepare_cached(
                "UPDATE events SET delivery_state = :state, next_attempt_at = :next, lease_until = 0,
                        lease_token = NULL, last_error = :error,
                        delivered_at = CASE WHEN :state = 'delivered' THEN :finished ELSE delivered_at END
                 WHERE event_id = :event_id AND lease_token = :token",
            )?
            .execute(named_params! {
                ":state": result.state.as_str(),
                ":next": result.next_attempt_at.as_millis(),
                ":error": result.last_error,
                ":finished": result.finished_at.as_millis(),
                ":event_id": result.event_id,
                ":token": result.lease_token,
            })?;
        if let Some(log) = result.log {
            self.0
                .prepare_cached(
                    "INSERT INTO webhook_attempts (event_id, attempt, url, started_at, status, latency_ms,
                                                   response_excerpt, error)
                     VALUES (:event_id, :attempt, :url, :started_at, :status, :latency_ms, :excerpt, :error)",
                )?
                .execute(named_params! {
                    ":event_id": result.event_id,
                    ":attempt": log.attempt,
                    ":url": log.url,
                    ":started_at": log.started_at.as_millis(),
                    ":status": log.status.map(i64::from),
                    ":latency_ms": log.latency_ms,
                    ":excerpt": log.response_excerpt,
                    ":error": log.error,
                })?;
        }
        Ok(changed == 1)
    }

    pub(crate) fn delivery_rows(&self, order_id: &str) -> Result<Vec<DeliveryRow>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT event_id, delivery_state, attempts, next_attempt_at, delivered_at, last_error
             FROM events WHERE order_id = :order_id ORDER BY sequence",
        )?;
        let rows = stmt.query_map(named_params! {":order_id": order_id}, |row| {
            let state: String = row.get(1)?;
            Ok(DeliveryRow {
                event_id: row.get(0)?,
                state: DeliveryState::parse(&state).unwrap_or(DeliveryState::Pending),
                attempts: row.get(2)?,
                next_attempt_at: Timestamp(row.get(3)?),
                delivered_at: row.get::<_, Option<i64>>(4)?.map(Timestamp),
                last_error: row.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn attempts_for_event(&self, event_id: &str) -> Result<Vec<WebhookAttempt>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT attempt, url, started_at, status, latency_ms, response_excerpt, error
             FROM webhook_attempts WHERE event_id = :event_id ORDER BY id",
        )?;
        let rows = stmt.query_map(named_params! {":event_id": event_id}, attempt_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Orders of `environment` that have events, newest event first.
    pub(crate) fn orders_with_events(&self, environment: Environment, limit: i64) -> Result<Vec<String>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT order_id FROM events WHERE environment = :environment
             GROUP BY order_id ORDER BY MAX(created_at) DESC LIMIT :limit",
        )?;
        let rows =
            stmt.query_map(named_params! {":environment": environment.as_str(), ":limit": limit}, |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Puts an event back in the queue, due now, with a fresh schedule. A lease held
    /// right now is kept: the attempt in flight finishes before anyone sends it again.
    pub(crate) fn requeue_event(&self, event_id: &str, now: Timestamp) -> Result<bool> {
        let changed = self
            .0
            .prepare_cached(
                "UPDATE events SET delivery_state = 'pending', attempts = 0, next_attempt_at = :now
                 WHERE event_id = :event_id",
            )?
            .execute(named_params! {":now": now.as_millis(), ":event_id": event_id})?;
        Ok(changed == 1)
    }

    pub(crate) fn insert_email(&self, environment: Environment, email: &Email) -> Result<()> {
        self.0
            .prepare_cached(
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

    pub(crate) fn emails(&self, environment: Environment, order_id: Option<&str>, limit: i64) -> Result<Vec<Email>> {
        let filter = if order_id.is_some() { "AND order_id = :order_id" } else { "" };
        let sql = format!(
            "SELECT {EMAIL_COLUMNS} FROM emails WHERE environment = :environment {filter}
             ORDER BY created_at DESC, email_id DESC LIMIT :limit"
        );
        let mut stmt = self.0.prepare_cached(&sql)?;
        let env = environment.as_str();
        let rows = match order_id {
            Some(order_id) => {
                stmt.query_map(named_params! {":environment": env, ":order_id": order_id, ":limit": limit}, email_row)?
            }
            None => stmt.query_map(named_params! {":environment": env, ":limit": limit}, email_row)?,
        };
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn claim_due_emails(
        &self,
        environment: Environment,
        now: Timestamp,
        lease_until: Timestamp,
        lease_token: &str,
        limit: i64,
    ) -> Result<Vec<Email>> {
        let sql = format!(
            "SELECT {EMAIL_COLUMNS} FROM emails
             WHERE environment = :environment AND state = 'pending' AND next_attempt_at <= :now
               AND lease_until <= :now
             ORDER BY next_attempt_at, created_at LIMIT :limit"
        );
        let mut stmt = self.0.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            named_params! {":environment": environment.as_str(), ":now": now.as_millis(), ":limit": limit},
            email_row,
        )?;
        let mut claimed = Vec::new();
        for row in rows {
            claimed.push(row?);
        }
        let mut lease = self.0.prepare_cached(
            "UPDATE emails SET lease_until = :lease_until, lease_token = :token, attempts = attempts + 1
             WHERE email_id = :email_id",
        )?;
        for email in &mut claimed {
            lease.execute(named_params! {
                ":lease_until": lease_until.as_millis(),
                ":token": lease_token,
                ":email_id": email.email_id,
            })?;
            email.attempts += 1;
        }
        Ok(claimed)
    }

    pub(crate) fn finish_email_attempt(
        &self,
        email_id: &str,
        lease_token: &str,
        state: EmailState,
        next_attempt_at: Timestamp,
        at: Timestamp,
        error: Option<&str>,
    ) -> Result<bool> {
        let changed = self
            .0
            .prepare_cached(
                "UPDATE emails SET state = :state, next_attempt_at = :next, lease_until = 0, lease_token = NULL,
                        last_error = :error, sent_at = CASE WHEN :state = 'sent' THEN :at ELSE sent_at END
                 WHERE email_id = :email_id AND lease_token = :token",
            )?
            .execute(named_params! {
                ":state": state.as_str(),
                ":next": next_attempt_at.as_millis(),
                ":error": error,
                ":at": at.as_millis(),
                ":email_id": email_id,
                ":token": lease_token,
            })?;
        Ok(changed == 1)
    }
}
