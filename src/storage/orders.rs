//! SQL for orders and invoices.

use rusqlite::{named_params, OptionalExtension, Row};
use rust_decimal::Decimal;

use super::{decode, Conn};
use crate::environment::Environment;
use crate::error::Result;
use crate::orders::{Invoice, Order, OrderStatus, OrderWithInvoice};
use crate::time::Timestamp;

/// What an earlier Create Order with the same merchant reference stored.
pub(crate) struct PriorCreate {
    pub request_hash: Vec<u8>,
    pub create_response: String,
}

pub(super) const ORDER_COLUMNS: &str = "o.order_id, o.environment, o.user_id, o.key_id, o.merchant_order_id, o.title,
    o.description, o.callback_url, o.webhook_url, o.success_url, o.cancel_url, o.customer_email, o.amount,
    o.currency, o.receive_currency, o.status, o.created_at, o.updated_at, o.deleted, o.marked_paid";

/// How many columns ORDER_COLUMNS selects; invoice columns follow at this index.
pub(super) const ORDER_COLUMN_COUNT: usize = 20;

// Rows are read by position (a name lookup costs a scan of every column name); the
// mappers below follow the order of these lists.
pub(super) const INVOICE_COLUMNS: &str = "i.invoice_id, i.amount AS i_amount, i.currency AS i_currency, i.rate,
    i.status AS i_status, i.receive_amount, i.receive_currency AS i_receive_currency,
    i.created_at AS i_created_at, i.expired_at, i.updated_at AS i_updated_at, i.address, i.payment_uri";

fn decimal(row: &Row<'_>, column: usize, what: &str) -> rusqlite::Result<Decimal> {
    decode(row, column, what, |text| Decimal::from_str_exact(text).ok())
}

fn status(row: &Row<'_>, column: usize, what: &str) -> rusqlite::Result<OrderStatus> {
    decode(row, column, what, OrderStatus::parse)
}

fn order_row(row: &Row<'_>) -> rusqlite::Result<Order> {
    Ok(Order {
        order_id: row.get(0)?,
        user_id: row.get(2)?,
        environment: decode(row, 1, "orders.environment", |text| text.parse::<Environment>().ok())?,
        key_id: row.get(3)?,
        merchant_order_id: row.get(4)?,
        title: row.get(5)?,
        description: row.get(6)?,
        callback_url: row.get(7)?,
        webhook_url: row.get(8)?,
        success_url: row.get(9)?,
        cancel_url: row.get(10)?,
        customer_email: row.get(11)?,
        amount: decimal(row, 12, "orders.amount")?,
        currency: row.get(13)?,
        receive_currency: row.get(14)?,
        status: status(row, 15, "orders.status")?,
        created_at: Timestamp(row.get(16)?),
        updated_at: Timestamp(row.get(17)?),
        deleted: row.get::<_, i64>(18)? != 0,
        marked_paid: row.get::<_, i64>(19)? != 0,
    })
}

fn order_with_invoice_row(row: &Row<'_>) -> rusqlite::Result<OrderWithInvoice> {
    let order = order_row(row)?;
    let invoice = Invoice {
        invoice_id: row.get(ORDER_COLUMN_COUNT)?,
        order_id: order.order_id.clone(),
        merchant_order_id: order.merchant_order_id.clone(),
        amount: decimal(row, ORDER_COLUMN_COUNT + 1, "invoices.amount")?,
        currency: row.get(ORDER_COLUMN_COUNT + 2)?,
        rate: decimal(row, ORDER_COLUMN_COUNT + 3, "invoices.rate")?,
        status: status(row, ORDER_COLUMN_COUNT + 4, "invoices.status")?,
        receive_amount: decimal(row, ORDER_COLUMN_COUNT + 5, "invoices.receive_amount")?,
        receive_currency: row.get(ORDER_COLUMN_COUNT + 6)?,
        created_at: Timestamp(row.get(ORDER_COLUMN_COUNT + 7)?),
        expired_at: Timestamp(row.get(ORDER_COLUMN_COUNT + 8)?),
        updated_at: Timestamp(row.get(ORDER_COLUMN_COUNT + 9)?),
        address: row.get(ORDER_COLUMN_COUNT + 10)?,
        payment_uri: row.get(ORDER_COLUMN_COUNT + 11)?,
    };
    Ok(OrderWithInvoice { order, invoice })
}

impl Conn<'_> {
    pub(crate) fn prior_create(
        &self,
        user_id: i64,
        environment: Environment,
        merchant_order_id: &str,
    ) -> Result<Option<PriorCreate>> {
        let c = sqlite_or!(self, pg => pg.prior_create(user_id, environment, merchant_order_id));
        Ok(c.prepare_cached(
            "SELECT request_hash, create_response FROM orders
                 WHERE user_id = :user_id AND environment = :environment AND merchant_order_id = :moid",
        )?
        .query_row(
            named_params! {":user_id": user_id, ":environment": environment.as_str(), ":moid": merchant_order_id},
            |row| Ok(PriorCreate { request_hash: row.get(0)?, create_response: row.get(1)? }),
        )
        .optional()?)
    }

    pub(crate) fn insert_order_with_invoice(
        &self,
        created: &OrderWithInvoice,
        request_hash: &[u8],
        create_response: &str,
    ) -> Result<()> {
        let c = sqlite_or!(self, pg => pg.insert_order_with_invoice(created, request_hash, create_response));
        let order = &created.order;
        c.prepare_cached(
            "INSERT INTO orders (order_id, environment, user_id, key_id, merchant_order_id, title, description,
                    callback_url, webhook_url, success_url, cancel_url, customer_email, amount, currency,
                    receive_currency, status, request_hash, create_response, created_at, updated_at, deleted)
                 VALUES (:order_id, :environment, :user_id, :key_id, :merchant_order_id, :title, :description,
                    :callback_url, :webhook_url, :success_url, :cancel_url, :customer_email, :amount, :currency,
                    :receive_currency, :status, :request_hash, :create_response, :created_at, :updated_at, :deleted)",
        )?
        .execute(named_params! {
            ":order_id": order.order_id,
            ":environment": order.environment.as_str(),
            ":user_id": order.user_id,
            ":key_id": order.key_id,
            ":merchant_order_id": order.merchant_order_id,
            ":title": order.title,
            ":description": order.description,
            ":callback_url": order.callback_url,
            ":webhook_url": order.webhook_url,
            ":success_url": order.success_url,
            ":cancel_url": order.cancel_url,
            ":customer_email": order.customer_email,
            ":amount": order.amount.to_string(),
            ":currency": order.currency,
            ":receive_currency": order.receive_currency,
            ":status": order.status.as_str(),
            ":request_hash": request_hash,
            ":create_response": create_response,
            ":created_at": order.created_at.as_millis(),
            ":updated_at": order.updated_at.as_millis(),
            ":deleted": i64::from(order.deleted),
        })?;
        let invoice = &created.invoice;
        c.prepare_cached(
            "INSERT INTO invoices (invoice_id, order_id, amount, currency, rate, status, receive_amount,
                    receive_currency, created_at, expired_at, updated_at, address, payment_uri)
                 VALUES (:invoice_id, :order_id, :amount, :currency, :rate, :status, :receive_amount,
                    :receive_currency, :created_at, :expired_at, :updated_at, :address, :payment_uri)",
        )?
        .execute(named_params! {
            ":invoice_id": invoice.invoice_id,
            ":order_id": invoice.order_id,
            ":amount": invoice.amount.to_string(),
            ":currency": invoice.currency,
            ":rate": invoice.rate.to_string(),
            ":status": invoice.status.as_str(),
            ":receive_amount": invoice.receive_amount.to_string(),
            ":receive_currency": invoice.receive_currency,
            ":created_at": invoice.created_at.as_millis(),
            ":expired_at": invoice.expired_at.as_millis(),
            ":updated_at": invoice.updated_at.as_millis(),
            ":address": invoice.address,
            ":payment_uri": invoice.payment_uri,
        })?;
        Ok(())
    }

    /// The order with its invoice, only if it belongs to this merchant and environment.
    pub(crate) fn order_with_invoice(
        &self,
        user_id: i64,
        environment: Environment,
        order_id: &str,
    ) -> Result<Option<OrderWithInvoice>> {
        let c = sqlite_or!(self, pg => pg.order_with_invoice(user_id, environment, order_id));
        let sql = format!(
            "SELECT {ORDER_COLUMNS}, {INVOICE_COLUMNS} FROM orders o JOIN invoices i ON i.order_id = o.order_id
             WHERE o.order_id = :order_id AND o.user_id = :user_id AND o.environment = :environment"
        );
        Ok(c.prepare_cached(&sql)?
            .query_row(
                named_params! {":order_id": order_id, ":user_id": user_id, ":environment": environment.as_str()},
                order_with_invoice_row,
            )
            .optional()?)
    }

    /// The order with its invoice in `environment`, whoever owns it (host-level calls).
    pub(crate) fn order_in_environment(
        &self,
        environment: Environment,
        order_id: &str,
    ) -> Result<Option<OrderWithInvoice>> {
        let c = sqlite_or!(self, pg => pg.order_in_environment(environment, order_id));
        let sql = format!(
            "SELECT {ORDER_COLUMNS}, {INVOICE_COLUMNS} FROM orders o JOIN invoices i ON i.order_id = o.order_id
             WHERE o.order_id = :order_id AND o.environment = :environment"
        );
        Ok(c.prepare_cached(&sql)?
            .query_row(
                named_params! {":order_id": order_id, ":environment": environment.as_str()},
                order_with_invoice_row,
            )
            .optional()?)
    }

    /// Writes the state and received amounts of an order and its invoice.
    pub(crate) fn update_order_state(&self, current: &OrderWithInvoice) -> Result<()> {
        let c = sqlite_or!(self, pg => pg.update_order_state(current));
        let (order, invoice) = (&current.order, &current.invoice);
        c.prepare_cached(
            "UPDATE orders SET status = :status, receive_currency = :receive_currency,
                        marked_paid = :marked_paid, updated_at = :updated_at
                 WHERE order_id = :order_id",
        )?
        .execute(named_params! {
            ":status": order.status.as_str(),
            ":receive_currency": order.receive_currency,
            ":marked_paid": i64::from(order.marked_paid),
            ":updated_at": order.updated_at.as_millis(),
            ":order_id": order.order_id,
        })?;
        c.prepare_cached(
            "UPDATE invoices SET status = :status, receive_amount = :receive_amount,
                        receive_currency = :receive_currency, expired_at = :expired_at, updated_at = :updated_at
                 WHERE order_id = :order_id",
        )?
        .execute(named_params! {
            ":status": invoice.status.as_str(),
            ":receive_amount": invoice.receive_amount.to_string(),
            ":receive_currency": invoice.receive_currency,
            ":expired_at": invoice.expired_at.as_millis(),
            ":updated_at": invoice.updated_at.as_millis(),
            ":order_id": order.order_id,
        })?;
        Ok(())
    }

    /// Orders of `environment` whose quote expired by `now` and that expiry would move:
    /// NEW ones, and PENDING ones with no counted payment still waiting to confirm.
    pub(crate) fn orders_due_for_expiry(&self, environment: Environment, now: i64, limit: i64) -> Result<Vec<String>> {
        let c = sqlite_or!(self, pg => pg.orders_due_for_expiry(environment, now, limit));
        let mut stmt = c.prepare_cached(
            "SELECT o.order_id FROM invoices i JOIN orders o ON o.order_id = i.order_id
             WHERE i.status IN ('NEW', 'PENDING') AND i.expired_at <= :now AND o.environment = :environment
               AND NOT EXISTS (SELECT 1 FROM payments p
                               WHERE p.order_id = o.order_id AND p.counts = 1 AND p.state = 'unconfirmed')
             ORDER BY i.expired_at LIMIT :limit",
        )?;
        let rows = stmt
            .query_map(named_params! {":now": now, ":environment": environment.as_str(), ":limit": limit}, |row| {
                row.get::<_, String>(0)
            })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// A page of the merchant's orders, newest first (created_at, then order_id, DESC).
    pub(crate) fn list_orders(
        &self,
        user_id: i64,
        environment: Environment,
        status: Option<OrderStatus>,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<Order>> {
        let c = sqlite_or!(self, pg => pg.list_orders(user_id, environment, status, limit, offset));
        let filter = if status.is_some() { "AND o.status = :status" } else { "" };
        let sql = format!(
            "SELECT {ORDER_COLUMNS} FROM orders o
             WHERE o.user_id = :user_id AND o.environment = :environment {filter}
             ORDER BY o.created_at DESC, o.order_id DESC LIMIT :limit OFFSET :offset"
        );
        let mut stmt = c.prepare_cached(&sql)?;
        let env = environment.as_str();
        let rows = match status {
            Some(status) => stmt.query_map(
                named_params! {":user_id": user_id, ":environment": env, ":status": status.as_str(),
                ":limit": limit, ":offset": offset},
                order_row,
            )?,
            None => stmt.query_map(
                named_params! {":user_id": user_id, ":environment": env, ":limit": limit, ":offset": offset},
                order_row,
            )?,
        };
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::{Error, ErrorKind};
    use crate::storage::{Store, StoreOptions, StoreTarget};

    // Every order query of the crate names the environment it wants, so no public call
    // reaches an order of an unknown one; this reads it without that filter to check the
    // decoder itself refuses it rather than taking it for sandbox.
    #[test]
    fn an_unknown_order_environment_is_corrupt_not_sandbox() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let path = dir.path().join("t.db");
        let store = Store::open(
            &StoreTarget::Sqlite(path.clone()),
            StoreOptions { synchronous_full: true, busy_timeout: Duration::from_secs(5) },
        )?;
        let conn = rusqlite::Connection::open(&path)?;
        conn.pragma_update(None, "ignore_check_constraints", true)?;
        conn.execute_batch(
            "INSERT INTO orders (order_id, environment, user_id, key_id, merchant_order_id, amount, currency,
                                 status, request_hash, create_response, created_at, updated_at)
             VALUES ('00000000-0000-4000-8000-000000000001', 'staging', 7, 'key_x', 'o-1', '19.99', 'USD',
                     'NEW', x'00', '{}', 1000, 1000);",
        )?;
        let sql = format!("SELECT {ORDER_COLUMNS} FROM orders o");
        let read = store.read(|c| Ok(c.sqlite_for_test().query_row(&sql, [], order_row)?));
        let err = read.err().map(|e| e.kind().to_string()).unwrap_or_default();
        assert_eq!(err, "stored data could not be read: orders.environment: unknown value \"staging\"");
        Ok(())
    }
}
