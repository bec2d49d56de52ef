//! SQLite statements for the two outboxes (webhooks on the event table, payment-link
//! e-mails), the webhook attempt log and the e-mail rows; the outbox tables they work
//! on are described once for both backends in `storage/outbox.rs`.

use rusqlite::named_params;

use super::SqliteConn;
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

/// The SQLite side of the outbox methods of [`crate::storage::Conn`] (same names,
/// arguments and results).
impl SqliteConn<'_> {
    pub(crate) fn claim_due(
        &self,
        outbox: Outbox,
        environment: Environment,
        now: Timestamp,
        lease_until: Timestamp,
        lease_token: &str,
        limit: i64,
    ) -> Result<Vec<String>> {
        let sql = claim_sql(outbox);
        let Table { name, id, .. } = table(outbox);
        let claimed = self.query(
            &sql,
            named_params! {":environment": environment.as_str(), ":now": now.as_millis(), ":limit": limit},
            rows::id,
        )?;
        // Selecting and then leasing is one step only because the caller holds SQLite's
        // single write lock; where writers run side by side the SELECT must lock what it
        // picks (PostgreSQL: FOR UPDATE SKIP LOCKED), or two could lease the same message.
        let lease = format!(
            "UPDATE {name} SET lease_until = :lease_until, lease_token = :token, attempts = attempts + 1
             WHERE {id} = :id"
        );
        for message in &claimed {
            self.execute(
                &lease,
                named_params! {
                    ":lease_until": lease_until.as_millis(),
                    ":token": lease_token,
                    ":id": message,
                },
            )?;
        }
        Ok(claimed)
    }

    pub(crate) fn finish_attempt(&self, result: &AttemptResult<'_>) -> Result<bool> {
        let t = table(result.outbox);
        let (state, next, done_at) = settled_columns(t, result)?;
        let changed = self.execute(
            &format!(
                "UPDATE {name} SET {assignments} WHERE {id} = :id AND lease_token = :token",
                name = t.name,
                assignments = finished_attempt_assignments(t, ":state", ":next", ":error", ":done_at"),
                id = t.id,
            ),
            named_params! {
                ":state": state,
                ":next": next.as_millis(),
                ":error": result.settled.error(),
                ":done_at": done_at,
                ":id": result.id,
                ":token": result.lease_token,
            },
        )?;
        Ok(changed == 1)
    }

    pub(crate) fn next_due_after(
        &self,
        outbox: Outbox,
        environment: Environment,
        now: Timestamp,
    ) -> Result<Option<Timestamp>> {
        self.query_one(
            &next_due_sql(outbox, ":environment", ":now"),
            named_params! {":environment": environment.as_str(), ":now": now.as_millis()},
            |row| Ok(row.opt_int(0)?.map(Timestamp)),
        )
    }

    pub(crate) fn move_outbox_times_back(
        &self,
        outbox: Outbox,
        environment: Environment,
        now: Timestamp,
        by_ms: i64,
    ) -> Result<()> {
        self.execute(
            &clock_set_back_sql(table(outbox), ":environment", ":now", ":by"),
            named_params! {":environment": environment.as_str(), ":now": now.as_millis(), ":by": by_ms},
        )?;
        Ok(())
    }

    pub(crate) fn release_unattempted(&self, outbox: Outbox, message_id: &str, lease_token: &str) -> Result<bool> {
        let sql = release_unattempted_sql(table(outbox), ":id", ":token");
        Ok(self.execute(&sql, named_params! {":id": message_id, ":token": lease_token})? == 1)
    }

    pub(crate) fn requeue(&self, outbox: Outbox, message_id: &str, now: Timestamp) -> Result<bool> {
        let Table { name, id, state, pending, .. } = table(outbox);
        let changed = self.execute(
            &format!("UPDATE {name} SET {state} = '{pending}', attempts = 0, next_attempt_at = :now WHERE {id} = :id"),
            named_params! {":now": now.as_millis(), ":id": message_id},
        )?;
        Ok(changed == 1)
    }

    pub(crate) fn claimed_event(&self, event_id: &str) -> Result<ClaimedEvent> {
        self.query_one(
            &format!(
                "SELECT {CLAIMED_EVENT_COLUMNS}
                 FROM events e JOIN orders o ON o.order_id = e.order_id WHERE e.event_id = :event_id"
            ),
            named_params! {":event_id": event_id},
            rows::claimed_event,
        )
    }

    pub(crate) fn log_webhook_attempt(&self, event_id: &str, log: &WebhookAttempt) -> Result<()> {
        self.execute(
            "INSERT INTO webhook_attempts (event_id, attempt, url, started_at, status, latency_ms,
                                               response_excerpt, error)
                 VALUES (:event_id, :attempt, :url, :started_at, :status, :latency_ms, :excerpt, :error)",
            named_params! {
                ":event_id": event_id,
                ":attempt": log.attempt,
                ":url": log.url,
                ":started_at": log.started_at.as_millis(),
                ":status": log.status.map(i64::from),
                ":latency_ms": log.latency_ms,
                ":excerpt": log.response_excerpt,
                ":error": log.error,
            },
        )?;
        Ok(())
    }

    pub(crate) fn delivery_rows(&self, order_id: &str) -> Result<Vec<DeliveryRow>> {
        self.query(
            &format!("SELECT {DELIVERY_COLUMNS} FROM events WHERE order_id = :order_id ORDER BY sequence"),
            named_params! {":order_id": order_id},
            rows::delivery,
        )
    }

    pub(crate) fn attempts_for_event(&self, event_id: &str) -> Result<Vec<WebhookAttempt>> {
        self.query(
            &format!("SELECT {ATTEMPT_COLUMNS} FROM webhook_attempts WHERE event_id = :event_id ORDER BY id"),
            named_params! {":event_id": event_id},
            rows::attempt,
        )
    }

    pub(crate) fn orders_with_events(&self, environment: Environment, limit: i64) -> Result<Vec<String>> {
        self.query(
            "SELECT order_id FROM events WHERE environment = :environment
             GROUP BY order_id ORDER BY MAX(created_at) DESC LIMIT :limit",
            named_params! {":environment": environment.as_str(), ":limit": limit},
            rows::id,
        )
    }

    pub(crate) fn insert_email(&self, environment: Environment, email: &Email) -> Result<()> {
        self.execute(
            "INSERT INTO emails (email_id, order_id, environment, recipient, subject, text_body, html_body,
                                     state, attempts, next_attempt_at, created_at)
                 VALUES (:email_id, :order_id, :environment, :recipient, :subject, :text_body, :html_body,
                         :pending, 0, :created_at, :created_at)",
            named_params! {
                ":email_id": email.email_id,
                ":order_id": email.order_id,
                ":environment": environment.as_str(),
                ":recipient": email.recipient,
                ":subject": email.subject,
                ":text_body": email.text_body,
                ":html_body": email.html_body,
                ":pending": EmailState::Pending.as_str(),
                ":created_at": email.created_at.as_millis(),
            },
        )?;
        Ok(())
    }

    pub(crate) fn email(&self, email_id: &str) -> Result<Email> {
        self.query_one(
            &format!("SELECT {EMAIL_COLUMNS} FROM emails WHERE email_id = :email_id"),
            named_params! {":email_id": email_id},
            rows::email,
        )
    }

    pub(crate) fn emails(&self, environment: Environment, order_id: Option<&str>, limit: i64) -> Result<Vec<Email>> {
        let filter = if order_id.is_some() { "AND order_id = :order_id" } else { "" };
        let sql = format!(
            "SELECT {EMAIL_COLUMNS} FROM emails WHERE environment = :environment {filter}
             ORDER BY created_at DESC, email_id DESC LIMIT :limit"
        );
        let env = environment.as_str();
        match order_id {
            Some(order_id) => self.query(
                &sql,
                named_params! {":environment": env, ":order_id": order_id, ":limit": limit},
                rows::email,
            ),
            None => self.query(&sql, named_params! {":environment": env, ":limit": limit}, rows::email),
        }
    }
}

/// The SELECT of [`SqliteConn::claim_due`] for `outbox`: due, unleased messages (an
/// order's webhooks in `sequence` order), oldest first. The `*_due` index of migration
/// 0006 holds the whole ORDER BY, so SQLite stops after `:limit` rows instead of sorting
/// the backlog.
fn claim_sql(outbox: Outbox) -> String {
    let Table { name, id, state, pending, sequence, .. } = table(outbox);
    let (in_order, tie_break) = match sequence {
        Some(sequence) => (
            format!(
                "AND (m.attempts > 0 OR NOT EXISTS (
                    SELECT 1 FROM {name} p WHERE p.order_id = m.order_id AND p.{sequence} < m.{sequence}
                      AND p.{state} = '{pending}' AND (p.attempts = 0 OR NOT ({}))))",
                lease_expired("p", ":now")
            ),
            format!(", m.{sequence}"),
        ),
        None => (String::new(), String::new()),
    };
    format!(
        "SELECT m.{id} FROM {name} m
         WHERE m.environment = :environment AND m.{state} = '{pending}' AND m.next_attempt_at <= :now
           AND {} {in_order}
         ORDER BY m.next_attempt_at, m.created_at{tie_break} LIMIT :limit",
        lease_expired("m", ":now")
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::delivery::Settled;
    use crate::error::{Error, ErrorKind, StorageError};
    use crate::storage::{DbResult, Store, StoreOptions, StoreTarget};

    const NOW: Timestamp = Timestamp(1_000_000);

    #[test]
    fn a_claim_reads_the_due_index_in_order_and_never_sorts_the_backlog() -> Result<()> {
        let (_dir, store) = store()?;
        for outbox in [Outbox::Webhooks, Outbox::Emails] {
            let plan = store.read(|db| {
                let conn = db.sqlite_for_test();
                let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {}", claim_sql(outbox))).db()?;
                let details = statement
                    .query_map(
                        rusqlite::named_params! {":environment": "sandbox", ":now": 0_i64, ":limit": 10_i64},
                        |row| row.get::<_, String>(3),
                    )
                    .db()?
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .db()?;
                Ok(details.join("; "))
            })?;
            assert!(plan.contains("_due"), "{outbox:?}: the claim must use the due index: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{outbox:?}: the claim sorts its rows: {plan}");
        }
        Ok(())
    }

    fn store() -> Result<(tempfile::TempDir, Store)> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let options = StoreOptions {
            sqlite: crate::config::SqliteOptions { synchronous_full: false, ..Default::default() },
            busy_timeout: Duration::from_secs(5),
        };
        let store = Store::open(&StoreTarget::Sqlite(dir.path().join("t.db")), options)?;
        store.write(|db| {
            db.sqlite_for_test()
                .execute(
                    "INSERT INTO orders (order_id, environment, user_id, key_id, merchant_order_id, amount, currency,
                                     status, request_hash, create_response, created_at, updated_at)
                 VALUES ('o1', 'sandbox', 7, 'key_x', 'm1', '10', 'USD', 'NEW', x'00', '{}', 0, 0)",
                    [],
                )
                .db()?;
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
