//! SQL for payments, the event outbox and host-set rates.

use rusqlite::types::Type;
use rusqlite::{named_params, OptionalExtension, Row};
use rust_decimal::Decimal;

use super::Conn;
use crate::config::Environment;
use crate::error::Result;
use crate::lifecycle::EventType;
use crate::orders::OrderStatus;
use crate::payments::{Event, Payment, PaymentState, Rate};
use crate::time::Timestamp;

fn conversion_error(message: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(0, Type::Text, message.into())
}

fn decimal(row: &Row<'_>, column: usize) -> rusqlite::Result<Decimal> {
    let text: String = row.get(column)?;
    Decimal::from_str_exact(&text).map_err(|e| conversion_error(e.to_string()))
}

fn environment(row: &Row<'_>, column: usize) -> rusqlite::Result<Environment> {
    let text: String = row.get(column)?;
    Ok(if text == "live" { Environment::Live } else { Environment::Sandbox })
}

// Read by position in payment_row, in this order.
const PAYMENT_COLUMNS: &str = "txid, order_id, amount, currency, state, counts, seen_at, settled_at";

fn payment_row(row: &Row<'_>) -> rusqlite::Result<Payment> {
    let state: String = row.get(4)?;
    Ok(Payment {
        txid: row.get(0)?,
        order_id: row.get(1)?,
        amount: decimal(row, 2)?,
        currency: row.get(3)?,
        state: PaymentState::parse(&state).ok_or_else(|| conversion_error(format!("payment state {state:?}")))?,
        counts: row.get::<_, i64>(5)? != 0,
        seen_at: Timestamp(row.get(6)?),
        settled_at: row.get::<_, Option<i64>>(7)?.map(Timestamp),
    })
}

// Read by position in event_row, in this order.
const EVENT_COLUMNS: &str =
    "event_id, order_id, environment, sequence, type, previous_status, status, payload, created_at";

fn event_row(row: &Row<'_>) -> rusqlite::Result<Event> {
    let event_type: String = row.get(4)?;
    let previous: String = row.get(5)?;
    let status: String = row.get(6)?;
    let state = |text: &str| OrderStatus::parse(text).ok_or_else(|| conversion_error(format!("status {text:?}")));
    Ok(Event {
        event_id: row.get(0)?,
        order_id: row.get(1)?,
        environment: environment(row, 2)?,
        sequence: row.get(3)?,
        event_type: EventType::parse(&event_type).ok_or_else(|| conversion_error(format!("event {event_type:?}")))?,
        previous_status: state(&previous)?,
        status: state(&status)?,
        payload: row.get(7)?,
        created_at: Timestamp(row.get(8)?),
    })
}

fn rate_row(row: &Row<'_>) -> rusqlite::Result<Rate> {
    Ok(Rate {
        environment: environment(row, 0)?,
        crypto: row.get(1)?,
        fiat: row.get(2)?,
        rate: decimal(row, 3)?,
        valid_until: row.get::<_, Option<i64>>(4)?.map(Timestamp),
        updated_at: Timestamp(row.get(5)?),
    })
}

impl Conn<'_> {
    pub(crate) fn payment_by_txid(&self, environment: Environment, txid: &str) -> Result<Option<Payment>> {
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE environment = :environment AND txid = :txid");
        Ok(self
            .0
            .prepare_cached(&sql)?
            .query_row(named_params! {":environment": environment.as_str(), ":txid": txid}, payment_row)
            .optional()?)
    }

    pub(crate) fn payments_for_order(&self, order_id: &str) -> Result<Vec<Payment>> {
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE order_id = :order_id ORDER BY seen_at, txid");
        let mut stmt = self.0.prepare_cached(&sql)?;
        let rows = stmt.query_map(named_params! {":order_id": order_id}, payment_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn insert_payment(&self, environment: Environment, payment: &Payment) -> Result<()> {
        self.0
            .prepare_cached(
                "INSERT INTO payments (environment, txid, order_id, amount, currency, state, counts, seen_at, settled_at)
                 VALUES (:environment, :txid, :order_id, :amount, :currency, :state, :counts, :seen_at, :settled_at)",
            )?
            .execute(named_params! {
                ":environment": environment.as_str(),
                ":txid": payment.txid,
                ":order_id": payment.order_id,
                ":amount": payment.amount.to_string(),
                ":currency": payment.currency,
                ":state": payment.state.as_str(),
                ":counts": i64::from(payment.counts),
                ":seen_at": payment.seen_at.as_millis(),
                ":settled_at": payment.settled_at.map(Timestamp::as_millis),
            })?;
        Ok(())
    }

    pub(crate) fn settle_payment(
        &self,
        environment: Environment,
        txid: &str,
        state: PaymentState,
        at: Timestamp,
    ) -> Result<()> {
        self.0
            .prepare_cached(
                "UPDATE payments SET state = :state, settled_at = :at WHERE environment = :environment AND txid = :txid",
            )?
            .execute(named_params! {
                ":state": state.as_str(),
                ":at": at.as_millis(),
                ":environment": environment.as_str(),
                ":txid": txid,
            })?;
        Ok(())
    }

    pub(crate) fn next_event_sequence(&self, order_id: &str) -> Result<i64> {
        Ok(self
            .0
            .prepare_cached("SELECT COALESCE(MAX(sequence), 0) + 1 FROM events WHERE order_id = :order_id")?
            .query_row(named_params! {":order_id": order_id}, |row| row.get(0))?)
    }

    pub(crate) fn insert_event(&self, event: &Event) -> Result<()> {
        self.0
            .prepare_cached(
                "INSERT INTO events (event_id, order_id, environment, sequence, type, previous_status, status,
                                     payload, created_at)
                 VALUES (:event_id, :order_id, :environment, :sequence, :type, :previous_status, :status,
                         :payload, :created_at)",
            )?
            .execute(named_params! {
                ":event_id": event.event_id,
                ":order_id": event.order_id,
                ":environment": event.environment.as_str(),
                ":sequence": event.sequence,
                ":type": event.event_type.as_str(),
                ":previous_status": event.previous_status.as_str(),
                ":status": event.status.as_str(),
                ":payload": event.payload,
                ":created_at": event.created_at.as_millis(),
            })?;
        Ok(())
    }

    pub(crate) fn events_for_order(&self, order_id: &str) -> Result<Vec<Event>> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE order_id = :order_id ORDER BY sequence");
        let mut stmt = self.0.prepare_cached(&sql)?;
        let rows = stmt.query_map(named_params! {":order_id": order_id}, event_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn event_by_id(&self, event_id: &str) -> Result<Option<Event>> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE event_id = :event_id");
        Ok(self.0.prepare_cached(&sql)?.query_row(named_params! {":event_id": event_id}, event_row).optional()?)
    }

    pub(crate) fn upsert_rate(&self, rate: &Rate) -> Result<()> {
        self.0
            .prepare_cached(
                "INSERT INTO rates (environment, crypto, fiat, rate, valid_until, updated_at)
                 VALUES (:environment, :crypto, :fiat, :rate, :valid_until, :updated_at)
                 ON CONFLICT (environment, crypto, fiat) DO UPDATE SET
                    rate = excluded.rate, valid_until = excluded.valid_until, updated_at = excluded.updated_at",
            )?
            .execute(named_params! {
                ":environment": rate.environment.as_str(),
                ":crypto": rate.crypto,
                ":fiat": rate.fiat,
                ":rate": rate.rate.to_string(),
                ":valid_until": rate.valid_until.map(Timestamp::as_millis),
                ":updated_at": rate.updated_at.as_millis(),
            })?;
        Ok(())
    }

    pub(crate) fn rate(&self, environment: Environment, crypto: &str, fiat: &str) -> Result<Option<Rate>> {
        Ok(self
            .0
            .prepare_cached(
                "SELECT environment, crypto, fiat, rate, valid_until, updated_at FROM rates
                 WHERE environment = :environment AND crypto = :crypto AND fiat = :fiat",
            )?
            .query_row(named_params! {":environment": environment.as_str(), ":crypto": crypto, ":fiat": fiat}, rate_row)
            .optional()?)
    }

    pub(crate) fn rates(&self, environment: Environment) -> Result<Vec<Rate>> {
        let mut stmt = self.0.prepare_cached(
            "SELECT environment, crypto, fiat, rate, valid_until, updated_at FROM rates
             WHERE environment = :environment ORDER BY crypto, fiat",
        )?;
        let rows = stmt.query_map(named_params! {":environment": environment.as_str()}, rate_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Returns false when there was no such rate.
    pub(crate) fn delete_rate(&self, environment: Environment, crypto: &str, fiat: &str) -> Result<bool> {
        let changed = self
            .0
            .prepare_cached("DELETE FROM rates WHERE environment = :environment AND crypto = :crypto AND fiat = :fiat")?
            .execute(named_params! {":environment": environment.as_str(), ":crypto": crypto, ":fiat": fiat})?;
        Ok(changed == 1)
    }
}
