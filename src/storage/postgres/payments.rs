//! PostgreSQL twins of the methods in `storage/payments.rs`.

use postgres::Row;
use rust_decimal::Decimal;

use super::super::payments::{EVENT_COLUMNS, PAYMENT_COLUMNS};
use super::{decode, PgConn};
use crate::environment::Environment;
use crate::error::{Error, ErrorKind, Result};
use crate::lifecycle::EventType;
use crate::orders::OrderStatus;
use crate::payments::{Event, Payment, PaymentState, Rate};
use crate::time::Timestamp;

/// The columns `rate_row` reads, in its order (the SQLite module spells them out in
/// each statement).
const RATE_COLUMNS: &str = "environment, crypto, fiat, rate, valid_until, updated_at";

fn decimal(row: &Row, column: usize, what: &str) -> Result<Decimal> {
    decode(row, column, what, |text| Decimal::from_str_exact(text).ok())
}

fn environment(row: &Row, column: usize, what: &str) -> Result<Environment> {
    decode(row, column, what, |text| text.parse::<Environment>().ok())
}

fn payment_row(row: &Row) -> Result<Payment> {
    Ok(Payment {
        txid: row.try_get(0)?,
        order_id: row.try_get(1)?,
        amount: decimal(row, 2, "payments.amount")?,
        currency: row.try_get(3)?,
        state: decode(row, 4, "payments.state", PaymentState::parse)?,
        counts: row.try_get::<_, i64>(5)? != 0,
        seen_at: Timestamp(row.try_get(6)?),
        settled_at: row.try_get::<_, Option<i64>>(7)?.map(Timestamp),
    })
}

fn event_row(row: &Row) -> Result<Event> {
    Ok(Event {
        event_id: row.try_get(0)?,
        order_id: row.try_get(1)?,
        environment: environment(row, 2, "events.environment")?,
        sequence: row.try_get(3)?,
        event_type: decode(row, 4, "events.type", EventType::parse)?,
        previous_status: decode(row, 5, "events.previous_status", OrderStatus::parse)?,
        status: decode(row, 6, "events.status", OrderStatus::parse)?,
        payload: row.try_get(7)?,
        created_at: Timestamp(row.try_get(8)?),
    })
}

fn rate_row(row: &Row) -> Result<Rate> {
    Ok(Rate {
        environment: environment(row, 0, "rates.environment")?,
        crypto: row.try_get(1)?,
        fiat: row.try_get(2)?,
        rate: decimal(row, 3, "rates.rate")?,
        valid_until: row.try_get::<_, Option<i64>>(4)?.map(Timestamp),
        updated_at: Timestamp(row.try_get(5)?),
    })
}

/// PostgreSQL twins of the payment, event and rate methods of [`super::super::Conn`].
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
        self.query_opt(&sql, &[&environment.as_str(), &txid])?.as_ref().map(payment_row).transpose()
    }

    pub(crate) fn payments_for_order(&self, order_id: &str) -> Result<Vec<Payment>> {
        let sql =
            format!("SELECT {PAYMENT_COLUMNS} FROM payments WHERE order_id = $1 ORDER BY seen_at, txid COLLATE \"C\"");
        self.query(&sql, &[&order_id])?.iter().map(payment_row).collect()
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
        let row = self.query_opt(
            "UPDATE orders SET last_event_sequence = last_event_sequence + 1 WHERE order_id = $1
             RETURNING last_event_sequence",
            &[&order_id],
        )?;
        match row {
            Some(row) => Ok(row.try_get(0)?),
            None => Err(Error::new(ErrorKind::Corrupt(format!("orders: no row {order_id:?} to number an event of")))),
        }
    }

    pub(crate) fn insert_event(&self, event: &Event) -> Result<()> {
        self.execute(
            "INSERT INTO events (event_id, order_id, environment, sequence, type, previous_status, status,
                                 payload, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
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
            ],
        )?;
        Ok(())
    }

    pub(crate) fn events_for_order(&self, order_id: &str) -> Result<Vec<Event>> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE order_id = $1 ORDER BY sequence");
        self.query(&sql, &[&order_id])?.iter().map(event_row).collect()
    }

    pub(crate) fn event_by_id(&self, event_id: &str) -> Result<Option<Event>> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE event_id = $1");
        self.query_opt(&sql, &[&event_id])?.as_ref().map(event_row).transpose()
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
        self.query_opt(&sql, &[&environment.as_str(), &crypto, &fiat])?.as_ref().map(rate_row).transpose()
    }

    pub(crate) fn rates(&self, environment: Environment) -> Result<Vec<Rate>> {
        let sql = format!(
            "SELECT {RATE_COLUMNS} FROM rates WHERE environment = $1 ORDER BY crypto COLLATE \"C\", fiat COLLATE \"C\""
        );
        self.query(&sql, &[&environment.as_str()])?.iter().map(rate_row).collect()
    }

    pub(crate) fn delete_rate(&self, environment: Environment, crypto: &str, fiat: &str) -> Result<bool> {
        let changed = self.execute(
            "DELETE FROM rates WHERE environment = $1 AND crypto = $2 AND fiat = $3",
            &[&environment.as_str(), &crypto, &fiat],
        )?;
        Ok(changed == 1)
    }
}
