//! PostgreSQL statements for the outboxes, the webhook attempt log and the e-mail rows:
//! those of `sqlite/delivery.rs`, with the same outbox tables (`storage/outbox.rs`),
//! column lists and row builders (`storage/rows.rs`).

use super::PgConn;
use crate::delivery::{Outbox, WebhookAttempt};
use crate::environment::Environment;
use crate::error::Result;
use crate::mail::{Email, EmailState};
use crate::storage::outbox::{
    clock_set_back_sql, finished_attempt_assignments, lease_expired, next_due_sql, release_unattempted_sql,
    settled_columns, table, Table,
};
use crate::storage::rows::{self, ATTEMPT_COLUMNS, CLAIMED_EVENT_COLUMNS, DELIVERY_COLUMNS, EMAIL_COLUMNS};
use crate::storage::{AttemptResult, ClaimedEvent, DeliveryRow};
use crate::time::Timestamp;

/// The PostgreSQL side of the outbox methods of [`crate::storage::Conn`] (same names,
/// arguments and results).
impl PgConn {
    /// [`crate::storage::Conn::claim_due`] for writers on several hosts at once: the
    /// SELECT locks the messages it picks and skips those another deliverer is leasing
    /// right now (`FOR UPDATE OF m SKIP LOCKED`), and the UPDATE leases exactly those.
    /// The per-order rule stays a `NOT EXISTS` over the earlier messages; an earlier
    /// message that another deliverer is claiming at this moment is still pending and
    /// unleased in this snapshot, so a first attempt waits for it, and a conflicting
    /// commit in between fails this SERIALIZABLE transaction, which is retried whole.
    pub(crate) fn claim_due(
        &self,
        outbox: Outbox,
        environment: Environment,
        now: Timestamp,
        lease_until: Timestamp,
        lease_token: &str,
        limit: i64,
    ) -> Result<Vec<String>> {
        let Table { name, id, state, pending, sequence, .. } = table(outbox);
        let (in_order, tie_break) = match sequence {
            Some(sequence) => (
                format!(
                    "AND (m.attempts > 0 OR NOT EXISTS (
                        SELECT 1 FROM {name} p WHERE p.order_id = m.order_id AND p.{sequence} < m.{sequence}
                          AND p.{state} = '{pending}' AND (p.attempts = 0 OR NOT ({}))))",
                    lease_expired("p", "$2")
                ),
                format!(", m.{sequence}"),
            ),
            None => (String::new(), String::new()),
        };
        let sql = format!(
            "SELECT m.{id} FROM {name} m
             WHERE m.environment = $1 AND m.{state} = '{pending}' AND m.next_attempt_at <= $2
               AND {} {in_order}
             ORDER BY m.next_attempt_at, m.created_at{tie_break} LIMIT $3
             FOR UPDATE OF m SKIP LOCKED",
            lease_expired("m", "$2")
        );
        let now_ms = now.as_millis();
        let claimed = self.query(&sql, &[&environment.as_str(), &now_ms, &limit], rows::id)?;
        if claimed.is_empty() {
            return Ok(claimed);
        }
        self.execute(
            &format!(
                "UPDATE {name} SET lease_until = $1, lease_token = $2, attempts = attempts + 1
                 WHERE {id} = ANY($3)"
            ),
            &[&lease_until.as_millis(), &lease_token, &claimed],
        )?;
        Ok(claimed)
    }

    pub(crate) fn finish_attempt(&self, result: &AttemptResult<'_>) -> Result<bool> {
        let t = table(result.outbox);
        let (state, next, done_at) = settled_columns(t, result)?;
        let changed = self.execute(
            &format!(
                "UPDATE {name} SET {assignments} WHERE {id} = $5 AND lease_token = $6",
                name = t.name,
                assignments = finished_attempt_assignments(t, "$1", "$2", "$3", "$4"),
                id = t.id,
            ),
            &[&state, &next.as_millis(), &result.settled.error(), &done_at, &result.id, &result.lease_token],
        )?;
        Ok(changed == 1)
    }

    pub(crate) fn next_due_after(
        &self,
        outbox: Outbox,
        environment: Environment,
        now: Timestamp,
    ) -> Result<Option<Timestamp>> {
        self.query_one(&next_due_sql(outbox, "$1", "$2"), &[&environment.as_str(), &now.as_millis()], |row| {
            Ok(row.opt_int(0)?.map(Timestamp))
        })
    }

    pub(crate) fn move_outbox_times_back(
        &self,
        outbox: Outbox,
        environment: Environment,
        now: Timestamp,
        by_ms: i64,
    ) -> Result<()> {
        self.execute(
            &clock_set_back_sql(table(outbox), "$1", "$2", "$3"),
            &[&environment.as_str(), &now.as_millis(), &by_ms],
        )?;
        Ok(())
    }

    pub(crate) fn release_unattempted(&self, outbox: Outbox, message_id: &str, lease_token: &str) -> Result<bool> {
        let sql = release_unattempted_sql(table(outbox), "$1", "$2");
        Ok(self.execute(&sql, &[&message_id, &lease_token])? == 1)
    }

    pub(crate) fn requeue(&self, outbox: Outbox, message_id: &str, now: Timestamp) -> Result<bool> {
        let Table { name, id, state, pending, .. } = table(outbox);
        let changed = self.execute(
            &format!("UPDATE {name} SET {state} = '{pending}', attempts = 0, next_attempt_at = $1 WHERE {id} = $2"),
            &[&now.as_millis(), &message_id],
        )?;
        Ok(changed == 1)
    }

    pub(crate) fn claimed_event(&self, event_id: &str) -> Result<ClaimedEvent> {
        self.query_one(
            &format!(
                "SELECT {CLAIMED_EVENT_COLUMNS}
                 FROM events e JOIN orders o ON o.order_id = e.order_id WHERE e.event_id = $1"
            ),
            &[&event_id],
            rows::claimed_event,
        )
    }

    pub(crate) fn log_webhook_attempt(&self, event_id: &str, log: &WebhookAttempt) -> Result<()> {
        // `id` is a BIGSERIAL: PostgreSQL numbers the attempts as SQLite's rowid does.
        self.execute(
            "INSERT INTO webhook_attempts (event_id, attempt, url, started_at, status, latency_ms,
                                           response_excerpt, error)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &event_id,
                &log.attempt,
                &log.url,
                &log.started_at.as_millis(),
                &log.status.map(i64::from),
                &log.latency_ms,
                &log.response_excerpt,
                &log.error,
            ],
        )?;
        Ok(())
    }

    pub(crate) fn delivery_rows(&self, order_id: &str) -> Result<Vec<DeliveryRow>> {
        let sql = format!("SELECT {DELIVERY_COLUMNS} FROM events WHERE order_id = $1 ORDER BY sequence");
        self.query(&sql, &[&order_id], rows::delivery)
    }

    pub(crate) fn attempts_for_event(&self, event_id: &str) -> Result<Vec<WebhookAttempt>> {
        let sql = format!("SELECT {ATTEMPT_COLUMNS} FROM webhook_attempts WHERE event_id = $1 ORDER BY id");
        self.query(&sql, &[&event_id], rows::attempt)
    }

    pub(crate) fn orders_with_events(&self, environment: Environment, limit: i64) -> Result<Vec<String>> {
        self.query(
            "SELECT order_id FROM events WHERE environment = $1
             GROUP BY order_id ORDER BY MAX(created_at) DESC LIMIT $2",
            &[&environment.as_str(), &limit],
            rows::id,
        )
    }

    pub(crate) fn insert_email(&self, environment: Environment, email: &Email) -> Result<()> {
        self.execute(
            "INSERT INTO emails (email_id, order_id, environment, recipient, subject, text_body, html_body,
                                 state, attempts, next_attempt_at, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, $9)",
            &[
                &email.email_id,
                &email.order_id,
                &environment.as_str(),
                &email.recipient,
                &email.subject,
                &email.text_body,
                &email.html_body,
                &EmailState::Pending.as_str(),
                &email.created_at.as_millis(),
            ],
        )?;
        Ok(())
    }

    pub(crate) fn email(&self, email_id: &str) -> Result<Email> {
        self.query_one(&format!("SELECT {EMAIL_COLUMNS} FROM emails WHERE email_id = $1"), &[&email_id], rows::email)
    }

    pub(crate) fn emails(&self, environment: Environment, order_id: Option<&str>, limit: i64) -> Result<Vec<Email>> {
        let env = environment.as_str();
        match order_id {
            Some(order_id) => self.query(
                &format!(
                    "SELECT {EMAIL_COLUMNS} FROM emails WHERE environment = $1 AND order_id = $2
                     ORDER BY created_at DESC, email_id DESC LIMIT $3"
                ),
                &[&env, &order_id, &limit],
                rows::email,
            ),
            None => self.query(
                &format!(
                    "SELECT {EMAIL_COLUMNS} FROM emails WHERE environment = $1
                     ORDER BY created_at DESC, email_id DESC LIMIT $2"
                ),
                &[&env, &limit],
                rows::email,
            ),
        }
    }
}
