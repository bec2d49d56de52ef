//! PostgreSQL statements for payments, the event outbox and host-set rates: those of
//! `sqlite/payments.rs`, with the same column lists and row builders (`storage/rows.rs`).

use super::PgConn;
use crate::delivery::DeliveryState;
use crate::environment::Environment;
use crate::error::{Error, ErrorKind, Result};
use crate::payments::{Event, Payment, PaymentState, Rate};
use crate::storage::rows::{self, EVENT_COLUMNS, PAYMENT_COLUMNS, RATE_COLUMNS};
use crate::time::Timestamp;

/// The PostgreSQL side of the payment, event and rate methods of [`crate::storage::Conn`]
/// (same names, arguments and results).
///
/// Text keys are sorted with `COLLATE "C"`: byte order, as SQLite's default BINARY
/// collation sorts them, whatever the database's own collation.
impl PgConn {
    // No `FOR UPDATE` here, although `settle_txid` goes on to update the payment it reads:
    // every writer of a payment first locks its order (`load_for_update`), which already
    // serialises them, and locking the payment before its order here (while
    // `record_payment` locks the order, then reads the payment) would invite deadlocks.
    pub(crate) fn payment_by_txid(&self, environment: Environment, txid: &str) -> Result<Option<Payment>> {
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE environment = $1 AND txid = $2");
        self.query_opt(&sql, &[&environment.as_str(), &txid], rows::payment)
    }

    pub(crate) fn payments_for_order(&self, order_id: &str) -> Result<Vec<Payment>> {
        let sql =
            format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE order_id = $1 ORDER BY seen_at, txid COLLATE \"C\"");
        self.query(&sql, &[&order_id], rows::payment)
    }

    pub(crate) fn insert_payment(&self, environment: Environment, payment: &Payment) -> Result<()> {
        self.execute(
            "INSERT INTO payments (environment, txid, order_id, amount, currency, state, counts, seen_at, settled_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &environment.as_str(),
                &payment.txid,
                &payment.order_id,
                &payment.amount.to_string(),
                &payment.currency,
                &payment.state.as_str(),
                &i64::from(payment.counts),
                &payment.seen_at.as_millis(),
                &payment.settled_at.map(Timestamp::as_millis),
            ],
        )?;
        Ok(())
    }

    pub(crate) fn settle_payment(
        &self,
        environment: Environment,
        txid: &str,
        state: PaymentState,
        at: Timestamp,
    ) -> Result<()> {
        self.execute(
            "UPDATE payments SET state = $1, settled_at = $2 WHERE environment = $3 AND txid = $4",
            &[&state.as_str(), &at.as_millis(), &environment.as_str(), &txid],
        )?;
        Ok(())
    }

    // The UPDATE takes the order row's lock, so concurrent writers of one order's events
    // queue here and each sees the number the previous one took.
    pub(crate) fn take_event_sequence(&self, order_id: &str) -> Result<i64> {
        self.query_opt(
            "UPDATE orders SET last_event_sequence = last_event_sequence + 1 WHERE order_id = $1
             RETURNING last_event_sequence",
            &[&order_id],
            |row| row.int(0),
        )?
        .ok_or_else(|| Error::new(ErrorKind::Corrupt(format!("orders: no row {order_id:?} to number an event of"))))
    }

    // The delivery state is bound, as on SQLite: the state a new event starts in is
    // named by DeliveryState like every other.
    pub(crate) fn insert_event(&self, event: &Event) -> Result<()> {
        self.execute(
            "INSERT INTO events (event_id, order_id, environment, sequence, type, previous_status, status,
                                 payload, created_at, delivery_state)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &event.event_id,
                &event.order_id,
                &event.environment.as_str(),
                &event.sequence,
                &event.event_type.as_str(),
                &event.previous_status.as_str(),
                &event.status.as_str(),
                &event.payload,
                &event.created_at.as_millis(),
                &DeliveryState::Pending.as_str(),
            ],
        )?;
        Ok(())
    }

    pub(crate) fn events_for_order(&self, order_id: &str) -> Result<Vec<Event>> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE order_id = $1 ORDER BY sequence");
        self.query(&sql, &[&order_id], rows::event)
    }

    pub(crate) fn events_since(&self, environment: Environment, since_ms: i64, limit: i64) -> Result<Vec<Event>> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE environment = $1 AND created_at >= $2
             ORDER BY created_at, event_id LIMIT $3"
        );
        self.query(&sql, &[&environment.as_str(), &since_ms, &limit], rows::event)
    }

    pub(crate) fn event_by_id(&self, event_id: &str) -> Result<Option<Event>> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE event_id = $1");
        self.query_opt(&sql, &[&event_id], rows::event)
    }

    pub(crate) fn upsert_rate(&self, rate: &Rate) -> Result<()> {
        self.execute(
            "INSERT INTO rates (environment, crypto, fiat, rate, valid_until, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (environment, crypto, fiat) DO UPDATE SET
                rate = excluded.rate, valid_until = excluded.valid_until, updated_at = excluded.updated_at",
            &[
                &rate.environment.as_str(),
                &rate.crypto,
                &rate.fiat,
                &rate.rate.to_string(),
                &rate.valid_until.map(Timestamp::as_millis),
                &rate.updated_at.as_millis(),
            ],
        )?;
        Ok(())
    }

    pub(crate) fn rate(&self, environment: Environment, crypto: &str, fiat: &str) -> Result<Option<Rate>> {
        let sql = format!("SELECT {RATE_COLUMNS} FROM rates WHERE environment = $1 AND crypto = $2 AND fiat = $3");
        self.query_opt(&sql, &[&environment.as_str(), &crypto, &fiat], rows::rate)
    }

    pub(crate) fn rates(&self, environment: Environment) -> Result<Vec<Rate>> {
        let sql = format!(
            "SELECT {RATE_COLUMNS} FROM rates WHERE environment = $1 ORDER BY crypto COLLATE \"C\", fiat COLLATE \"C\""
        );
        self.query(&sql, &[&environment.as_str()], rows::rate)
    }

    pub(crate) fn delete_rate(&self, environment: Environment, crypto: &str, fiat: &str) -> Result<bool> {
        let changed = self.execute(
            "DELETE FROM rates WHERE environment = $1 AND crypto = $2 AND fiat = $3",
            &[&environment.as_str(), &crypto, &fiat],
        )?;
        Ok(changed == 1)
    }
}
