//! SQL for payments, the event outbox and host-set rates.

use rusqlite::{named_params, OptionalExtension, Row};
use rust_decimal::Decimal;

use super::{decode, Conn};
use crate::environment::Environment;
use crate::error::{Error, ErrorKind, Result};
use crate::lifecycle::EventType;
use crate::orders::OrderStatus;
use crate::payments::{Event, Payment, PaymentState, Rate};
use crate::time::Timestamp;

fn decimal(row: &Row<'_>, column: usize, what: &str) -> rusqlite::Result<Decimal> {
    decode(row, column, what, |text| Decimal::from_str_exact(text).ok())
}

fn environment(row: &Row<'_>, column: usize, what: &str) -> rusqlite::Result<Environment> {
    decode(row, column, what, |text| text.parse::<Environment>().ok())
}

// Read by position in payment_row, in this order.
pub(super) const PAYMENT_COLUMNS: &str = "txid, order_id, amount, currency, state, counts, seen_at, settled_at";

fn payment_row(row: &Row<'_>) -> rusqlite::Result<Payment> {
    Ok(Payment {
        txid: row.get(0)?,
        order_id: row.get(1)?,
        amount: decimal(row, 2, "payments.amount")?,
        currency: row.get(3)?,
        state: decode(row, 4, "payments.state", PaymentState::parse)?,
        counts: row.get::<_, i64>(5)? != 0,
        seen_at: Timestamp(row.get(6)?),
        settled_at: row.get::<_, Option<i64>>(7)?.map(Timestamp),
    })
}

// Read by position in event_row, in this order.
pub(super) const EVENT_COLUMNS: &str =
    "event_id, order_id, environment, sequence, type, previous_status, status, payload, created_at";

fn event_row(row: &Row<'_>) -> rusqlite::Result<Event> {
    Ok(Event {
        event_id: row.get(0)?,
        order_id: row.get(1)?,
        environment: environment(row, 2, "events.environment")?,
        sequence: row.get(3)?,
        event_type: decode(row, 4, "events.type", EventType::parse)?,
        previous_status: decode(row, 5, "events.previous_status", OrderStatus::parse)?,
        status: decode(row, 6, "events.status", OrderStatus::parse)?,
        payload: row.get(7)?,
        created_at: Timestamp(row.get(8)?),
    })
}

fn rate_row(row: &Row<'_>) -> rusqlite::Result<Rate> {
    Ok(Rate {
        environment: environment(row, 0, "rates.environment")?,
        crypto: row.get(1)?,
        fiat: row.get(2)?,
        rate: decimal(row, 3, "rates.rate")?,
        valid_until: row.get::<_, Option<i64>>(4)?.map(Timestamp),
        updated_at: Timestamp(row.get(5)?),
    })
}

impl Conn<'_> {
    pub(crate) fn payment_by_txid(&self, environment: Environment, txid: &str) -> Result<Option<Payment>> {
        let c = sqlite_or!(self, pg => pg.payment_by_txid(environment, txid));
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE environment = :environment AND txid = :txid");
        Ok(c.prepare_cached(&sql)?
            .query_row(named_params! {":environment": environment.as_str(), ":txid": txid}, payment_row)
            .optional()?)
    }

    pub(crate) fn payments_for_order(&self, order_id: &str) -> Result<Vec<Payment>> {
        let c = sqlite_or!(self, pg => pg.payments_for_order(order_id));
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE order_id = :order_id ORDER BY seen_at, txid");
        let mut stmt = c.prepare_cached(&sql)?;
        let rows = stmt.query_map(named_params! {":order_id": order_id}, payment_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn insert_payment(&self, environment: Environment, payment: &Payment) -> Result<()> {
        let c = sqlite_or!(self, pg => pg.insert_payment(environment, payment));
        c.prepare_cached(
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
        let c = sqlite_or!(self, pg => pg.settle_payment(environment, txid, state, at));
        c.prepare_cached(
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

    /// Takes the order's next event number (1, 2, 3...): a write, so call it once per
    /// event, in the transaction that inserts that event.
    ///
    /// A counter on the order row rather than `MAX(sequence) + 1` over its events: with
    /// several writers two transactions could read the same maximum, while this UPDATE
    /// makes the second wait for the first's row lock and then see its number.
    pub(crate) fn take_event_sequence(&self, order_id: &str) -> Result<i64> {
        let c = sqlite_or!(self, pg => pg.take_event_sequence(order_id));
        c.prepare_cached(
            "UPDATE orders SET last_event_sequence = last_event_sequence + 1 WHERE order_id = :order_id
                 RETURNING last_event_sequence",
        )?
        .query_row(named_params! {":order_id": order_id}, |row| row.get(0))
        .optional()?
        // The caller loaded this order earlier in the same transaction, so a missing
        // row is the database contradicting itself, not a request for an unknown order.
        .ok_or_else(|| Error::new(ErrorKind::Corrupt(format!("orders: no row {order_id:?} to number an event of"))))
    }

    pub(crate) fn insert_event(&self, event: &Event) -> Result<()> {
        let c = sqlite_or!(self, pg => pg.insert_event(event));
        c.prepare_cached(
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
        let c = sqlite_or!(self, pg => pg.events_for_order(order_id));
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE order_id = :order_id ORDER BY sequence");
        let mut stmt = c.prepare_cached(&sql)?;
        let rows = stmt.query_map(named_params! {":order_id": order_id}, event_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub(crate) fn event_by_id(&self, event_id: &str) -> Result<Option<Event>> {
        let c = sqlite_or!(self, pg => pg.event_by_id(event_id));
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE event_id = :event_id");
        Ok(c.prepare_cached(&sql)?.query_row(named_params! {":event_id": event_id}, event_row).optional()?)
    }

    pub(crate) fn upsert_rate(&self, rate: &Rate) -> Result<()> {
        let c = sqlite_or!(self, pg => pg.upsert_rate(rate));
        c.prepare_cached(
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
        let c = sqlite_or!(self, pg => pg.rate(environment, crypto, fiat));
        Ok(c.prepare_cached(
            "SELECT environment, crypto, fiat, rate, valid_until, updated_at FROM rates
                 WHERE environment = :environment AND crypto = :crypto AND fiat = :fiat",
        )?
        .query_row(named_params! {":environment": environment.as_str(), ":crypto": crypto, ":fiat": fiat}, rate_row)
        .optional()?)
    }

    pub(crate) fn rates(&self, environment: Environment) -> Result<Vec<Rate>> {
        let c = sqlite_or!(self, pg => pg.rates(environment));
        let mut stmt = c.prepare_cached(
            "SELECT environment, crypto, fiat, rate, valid_until, updated_at FROM rates
             WHERE environment = :environment ORDER BY crypto, fiat",
        )?;
        let rows = stmt.query_map(named_params! {":environment": environment.as_str()}, rate_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Returns false when there was no such rate.
    pub(crate) fn delete_rate(&self, environment: Environment, crypto: &str, fiat: &str) -> Result<bool> {
        let c = sqlite_or!(self, pg => pg.delete_rate(environment, crypto, fiat));
        let changed = c
            .prepare_cached("DELETE FROM rates WHERE environment = :environment AND crypto = :crypto AND fiat = :fiat")?
            .execute(named_params! {":environment": environment.as_str(), ":crypto": crypto, ":fiat": fiat})?;
        Ok(changed == 1)
    }
}
