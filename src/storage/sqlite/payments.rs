//! SQLite statements for payments, the event outbox and host-set rates.

use rusqlite::named_params;

use super::SqliteConn;
use crate::delivery::DeliveryState;
use crate::environment::Environment;
use crate::error::{Error, ErrorKind, Result};
use crate::payments::{Event, Payment, PaymentState, Rate};
use crate::storage::rows::{self, EVENT_COLUMNS, PAYMENT_COLUMNS, RATE_COLUMNS};
use crate::time::Timestamp;

/// The SQLite side of the payment, event and rate methods of [`crate::storage::Conn`]
/// (same names, arguments and results).
impl SqliteConn<'_> {
    pub(crate) fn payment_by_txid(&self, environment: Environment, txid: &str) -> Result<Option<Payment>> {
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE environment = :environment AND txid = :txid");
        self.query_opt(&sql, named_params! {":environment": environment.as_str(), ":txid": txid}, rows::payment)
    }

    pub(crate) fn payments_for_order(&self, order_id: &str) -> Result<Vec<Payment>> {
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE order_id = :order_id ORDER BY seen_at, txid");
        self.query(&sql, named_params! {":order_id": order_id}, rows::payment)
    }

    pub(crate) fn insert_payment(&self, environment: Environment, payment: &Payment) -> Result<()> {
        self.execute(
            "INSERT INTO payments (environment, txid, order_id, amount, currency, state, counts, seen_at, settled_at)
                 VALUES (:environment, :txid, :order_id, :amount, :currency, :state, :counts, :seen_at, :settled_at)",
            named_params! {
                ":environment": environment.as_str(),
                ":txid": payment.txid,
                ":order_id": payment.order_id,
                ":amount": payment.amount.to_string(),
                ":currency": payment.currency,
                ":state": payment.state.as_str(),
                ":counts": i64::from(payment.counts),
                ":seen_at": payment.seen_at.as_millis(),
                ":settled_at": payment.settled_at.map(Timestamp::as_millis),
            },
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
            "UPDATE payments SET state = :state, settled_at = :at WHERE environment = :environment AND txid = :txid",
            named_params! {
                ":state": state.as_str(),
                ":at": at.as_millis(),
                ":environment": environment.as_str(),
                ":txid": txid,
            },
        )?;
        Ok(())
    }

    pub(crate) fn take_event_sequence(&self, order_id: &str) -> Result<i64> {
        self.query_opt(
            "UPDATE orders SET last_event_sequence = last_event_sequence + 1 WHERE order_id = :order_id
                 RETURNING last_event_sequence",
            named_params! {":order_id": order_id},
            |row| row.int(0),
        )?
        // The caller loaded this order earlier in the same transaction, so a missing
        // row is the database contradicting itself, not a request for an unknown order.
        .ok_or_else(|| Error::new(ErrorKind::Corrupt(format!("orders: no row {order_id:?} to number an event of"))))
    }

    // The delivery state is bound, not left to the column default, so the state a new
    // event starts in is named by DeliveryState like every other.
    pub(crate) fn insert_event(&self, event: &Event) -> Result<()> {
        self.execute(
            "INSERT INTO events (event_id, order_id, environment, sequence, type, previous_status, status,
                                     payload, created_at, delivery_state)
                 VALUES (:event_id, :order_id, :environment, :sequence, :type, :previous_status, :status,
                         :payload, :created_at, :delivery_state)",
            named_params! {
                ":event_id": event.event_id,
                ":order_id": event.order_id,
                ":environment": event.environment.as_str(),
                ":sequence": event.sequence,
                ":type": event.event_type.as_str(),
                ":previous_status": event.previous_status.as_str(),
                ":status": event.status.as_str(),
                ":payload": event.payload,
                ":created_at": event.created_at.as_millis(),
                ":delivery_state": DeliveryState::Pending.as_str(),
            },
        )?;
        Ok(())
    }

    pub(crate) fn events_for_order(&self, order_id: &str) -> Result<Vec<Event>> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE order_id = :order_id ORDER BY sequence");
        self.query(&sql, named_params! {":order_id": order_id}, rows::event)
    }

    pub(crate) fn events_since(&self, environment: Environment, since_ms: i64, limit: i64) -> Result<Vec<Event>> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE environment = :environment AND created_at >= :since
             ORDER BY created_at, event_id LIMIT :limit"
        );
        self.query(
            &sql,
            named_params! {":environment": environment.as_str(), ":since": since_ms, ":limit": limit},
            rows::event,
        )
    }

    pub(crate) fn event_by_id(&self, event_id: &str) -> Result<Option<Event>> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE event_id = :event_id");
        self.query_opt(&sql, named_params! {":event_id": event_id}, rows::event)
    }

    pub(crate) fn upsert_rate(&self, rate: &Rate) -> Result<()> {
        self.execute(
            "INSERT INTO rates (environment, crypto, fiat, rate, valid_until, updated_at)
                 VALUES (:environment, :crypto, :fiat, :rate, :valid_until, :updated_at)
                 ON CONFLICT (environment, crypto, fiat) DO UPDATE SET
                    rate = excluded.rate, valid_until = excluded.valid_until, updated_at = excluded.updated_at",
            named_params! {
                ":environment": rate.environment.as_str(),
                ":crypto": rate.crypto,
                ":fiat": rate.fiat,
                ":rate": rate.rate.to_string(),
                ":valid_until": rate.valid_until.map(Timestamp::as_millis),
                ":updated_at": rate.updated_at.as_millis(),
            },
        )?;
        Ok(())
    }

    pub(crate) fn rate(&self, environment: Environment, crypto: &str, fiat: &str) -> Result<Option<Rate>> {
        let sql = format!(
            "SELECT {RATE_COLUMNS} FROM rates WHERE environment = :environment AND crypto = :crypto AND fiat = :fiat"
        );
        self.query_opt(
            &sql,
            named_params! {":environment": environment.as_str(), ":crypto": crypto, ":fiat": fiat},
            rows::rate,
        )
    }

    pub(crate) fn rates(&self, environment: Environment) -> Result<Vec<Rate>> {
        let sql = format!("SELECT {RATE_COLUMNS} FROM rates WHERE environment = :environment ORDER BY crypto, fiat");
        self.query(&sql, named_params! {":environment": environment.as_str()}, rows::rate)
    }

    pub(crate) fn delete_rate(&self, environment: Environment, crypto: &str, fiat: &str) -> Result<bool> {
        let changed = self.execute(
            "DELETE FROM rates WHERE environment = :environment AND crypto = :crypto AND fiat = :fiat",
            named_params! {":environment": environment.as_str(), ":crypto": crypto, ":fiat": fiat},
        )?;
        Ok(changed == 1)
    }
}
