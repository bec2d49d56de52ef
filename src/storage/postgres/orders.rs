//! PostgreSQL statements for orders and invoices: those of `sqlite/orders.rs`, with
//! the same order columns and row builders (`storage/rows.rs`) and positional `$n`
//! parameters. Invoices are a table of their own here (on SQLite they live in the
//! order's row): PostgreSQL writes no log of pages per B-tree for it to save.

use const_format::concatcp;
use postgres::types::ToSql;

use super::PgConn;
use crate::environment::Environment;
use crate::error::Result;
use crate::orders::{Order, OrderStatus, OrderWithInvoice};
use crate::payments::PaymentState;
use crate::storage::rows::{self, InvoiceSql, ORDER_COLUMNS, PRIOR_CREATE_COLUMNS};
use crate::storage::PriorCreate;

/// The invoice columns, aliased `i`, in the order [`rows::order_with_invoice`] reads
/// them after [`ORDER_COLUMNS`].
const INVOICE_COLUMNS: &str = "i.invoice_id, i.amount AS i_amount, i.currency AS i_currency, i.rate,
    i.status AS i_status, i.receive_amount, i.receive_currency AS i_receive_currency,
    i.created_at AS i_created_at, i.expired_at, i.updated_at AS i_updated_at, i.address, i.payment_uri,
    i.derivation_index";

/// Where the statements both backends share find an invoice: the `invoices` table.
pub(super) const INVOICES: InvoiceSql = InvoiceSql {
    orders_with_invoices: "invoices i JOIN orders o ON o.order_id = i.order_id",
    invoice_of_payment: "invoices i ON i.order_id = p.order_id",
    currency: "i.currency",
    status: "i.status",
    expired_at: "i.expired_at",
    address: "i.address",
    derivation_index: "i.derivation_index",
};

/// The order row of `insert_order_with_invoice`.
const INSERT_ORDER: &str =
    "INSERT INTO orders (order_id, environment, user_id, key_id, merchant_order_id, title, description,
        callback_url, webhook_url, success_url, cancel_url, customer_email, amount, currency,
        receive_currency, status, request_hash, create_response, created_at, updated_at, deleted)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)";

/// The PostgreSQL side of the order methods of [`crate::storage::Conn`] (same names,
/// arguments and results).
impl PgConn {
    // No row lock: the row, if any, is returned, not changed. A concurrent create with
    // the same reference is settled by the UNIQUE (user_id, environment,
    // merchant_order_id) constraint: under SERIALIZABLE, the loser's insert after this
    // read fails as a serialization failure, and PgStore::write's retry finds the
    // winner's row here.
    pub(crate) fn prior_create(
        &self,
        user_id: i64,
        environment: Environment,
        merchant_order_id: &str,
    ) -> Result<Option<PriorCreate>> {
        self.query_opt(
            &format!(
                "SELECT {PRIOR_CREATE_COLUMNS} FROM orders
                 WHERE user_id = $1 AND environment = $2 AND merchant_order_id = $3"
            ),
            &[&user_id, &environment.as_str(), &merchant_order_id],
            rows::prior_create,
        )
    }

    pub(crate) fn insert_order_with_invoice(
        &self,
        created: &OrderWithInvoice,
        request_hash: &[u8],
        create_response: &str,
    ) -> Result<()> {
        let order = &created.order;
        let amount = order.amount.to_string();
        let created_at = order.created_at.as_millis();
        let updated_at = order.updated_at.as_millis();
        let deleted = i64::from(order.deleted);
        let params: [&(dyn ToSql + Sync); 21] = [
            &order.order_id,
            &order.environment.as_str(),
            &order.user_id,
            &order.key_id,
            &order.merchant_order_id,
            &order.title,
            &order.description,
            &order.callback_url,
            &order.webhook_url,
            &order.success_url,
            &order.cancel_url,
            &order.customer_email,
            &amount,
            &order.currency,
            &order.receive_currency,
            &order.status.as_str(),
            &request_hash,
            &create_response,
            &created_at,
            &updated_at,
            &deleted,
        ];
        // SQLite's single writer makes `prior_create` + this insert atomic. Here a
        // concurrent create with the same merchant reference may commit between the two,
        // and PostgreSQL reports the plain insert's unique violation as such (not as a
        // serialization failure) unless the earlier read went through that unique index,
        // which the planner does not promise (on small tables it picks
        // orders_by_merchant_status, and racing identical creates got 500s). ON CONFLICT
        // DO NOTHING on that key is exact: under SERIALIZABLE, a conflicting row this
        // snapshot cannot see (the racing winner's) raises a serialization failure, so
        // PgStore::write retries and `prior_create` then finds the winner; a row this
        // snapshot can see skips the insert, and the plain insert below then fails with
        // the same unique violation SQLite reports.
        let inserted = self.execute(
            &format!("{INSERT_ORDER} ON CONFLICT (user_id, environment, merchant_order_id) DO NOTHING"),
            &params,
        )?;
        if inserted == 0 {
            self.execute(INSERT_ORDER, &params)?;
        }
        let invoice = &created.invoice;
        let amount = invoice.amount.to_string();
        let rate = invoice.rate.to_string();
        let receive_amount = invoice.receive_amount.to_string();
        let created_at = invoice.created_at.as_millis();
        let expired_at = invoice.expired_at.as_millis();
        let updated_at = invoice.updated_at.as_millis();
        let derivation_index = invoice.derivation_index.map(i64::from);
        self.execute(
            "INSERT INTO invoices (invoice_id, order_id, amount, currency, rate, status, receive_amount,
                receive_currency, created_at, expired_at, updated_at, address, payment_uri, derivation_index)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            &[
                &invoice.invoice_id,
                &invoice.order_id,
                &amount,
                &invoice.currency,
                &rate,
                &invoice.status.as_str(),
                &receive_amount,
                &invoice.receive_currency,
                &created_at,
                &expired_at,
                &updated_at,
                &invoice.address,
                &invoice.payment_uri,
                &derivation_index,
            ],
        )?;
        Ok(())
    }

    pub(crate) fn order_with_invoice(
        &self,
        user_id: i64,
        environment: Environment,
        order_id: &str,
    ) -> Result<Option<OrderWithInvoice>> {
        let sql = format!(
            "SELECT {ORDER_COLUMNS}, {INVOICE_COLUMNS} FROM orders o JOIN invoices i ON i.order_id = o.order_id
             WHERE o.order_id = $1 AND o.user_id = $2 AND o.environment = $3"
        );
        self.query_opt(&sql, &[&order_id, &user_id, &environment.as_str()], rows::order_with_invoice)
    }

    // The read before a state change (`load_for_update`): in a write transaction it locks
    // the order and invoice rows (FOR UPDATE on a join locks the rows of both tables).
    pub(crate) fn order_in_environment(
        &self,
        environment: Environment,
        order_id: &str,
    ) -> Result<Option<OrderWithInvoice>> {
        let sql = format!(
            "SELECT {ORDER_COLUMNS}, {INVOICE_COLUMNS} FROM orders o JOIN invoices i ON i.order_id = o.order_id
             WHERE o.order_id = $1 AND o.environment = $2{}",
            self.for_update()
        );
        self.query_opt(&sql, &[&order_id, &environment.as_str()], rows::order_with_invoice)
    }

    pub(crate) fn update_order_state(&self, current: &OrderWithInvoice) -> Result<()> {
        let (order, invoice) = (&current.order, &current.invoice);
        let marked_paid = i64::from(order.marked_paid);
        let updated_at = order.updated_at.as_millis();
        self.execute(
            "UPDATE orders SET status = $1, receive_currency = $2, marked_paid = $3, updated_at = $4
             WHERE order_id = $5",
            &[&order.status.as_str(), &order.receive_currency, &marked_paid, &updated_at, &order.order_id],
        )?;
        let receive_amount = invoice.receive_amount.to_string();
        let expired_at = invoice.expired_at.as_millis();
        let updated_at = invoice.updated_at.as_millis();
        self.execute(
            "UPDATE invoices SET status = $1, receive_amount = $2, receive_currency = $3, expired_at = $4,
                    updated_at = $5
             WHERE order_id = $6",
            &[
                &invoice.status.as_str(),
                &receive_amount,
                &invoice.receive_currency,
                &expired_at,
                &updated_at,
                &order.order_id,
            ],
        )?;
        Ok(())
    }

    pub(crate) fn any_order_due_for_expiry(&self, environment: Environment, now: i64) -> Result<bool> {
        let (new, pending, unconfirmed) =
            (OrderStatus::New.as_str(), OrderStatus::Pending.as_str(), PaymentState::Unconfirmed.as_str());
        self.query_one(ANY_DUE_FOR_EXPIRY, &[&new, &pending, &now, &environment.as_str(), &unconfirmed], |row| {
            Ok(row.int(0)? != 0)
        })
    }

    // A plain read: each order it names is then locked by `order_in_environment`.
    pub(crate) fn orders_due_for_expiry(&self, environment: Environment, now: i64, limit: i64) -> Result<Vec<String>> {
        let (new, pending, unconfirmed) =
            (OrderStatus::New.as_str(), OrderStatus::Pending.as_str(), PaymentState::Unconfirmed.as_str());
        self.query(DUE_FOR_EXPIRY, &[&new, &pending, &now, &environment.as_str(), &unconfirmed, &limit], rows::id)
    }

    // order_id is a lowercase hyphenated UUID, so its order is the same under any
    // collation as under SQLite's BINARY one; no COLLATE "C", which would keep the
    // orders_by_merchant indexes from giving the order.
    pub(crate) fn advance_open_deadlines(&self, environment: Environment, by_ms: i64) -> Result<usize> {
        self.execute(
            "UPDATE invoices SET expired_at = expired_at - $1
             WHERE status IN ($2, $3)
               AND order_id IN (SELECT order_id FROM orders WHERE environment = $4)",
            &[&by_ms, &OrderStatus::New.as_str(), &OrderStatus::Pending.as_str(), &environment.as_str()],
        )
        .map(|rows| usize::try_from(rows).unwrap_or(usize::MAX))
    }

    pub(crate) fn host_orders(
        &self,
        environment: Environment,
        user_id: Option<i64>,
        status: Option<OrderStatus>,
        since_ms: i64,
        limit: i64,
    ) -> Result<Vec<Order>> {
        let sql = format!(
            "SELECT {ORDER_COLUMNS} FROM orders o
             WHERE o.environment = $1 AND ($2::BIGINT IS NULL OR o.user_id = $2)
               AND ($3::TEXT IS NULL OR o.status = $3) AND o.created_at >= $4
             ORDER BY o.created_at DESC, o.order_id DESC LIMIT $5"
        );
        let status = status.map(OrderStatus::as_str);
        self.query(&sql, &[&environment.as_str(), &user_id, &status, &since_ms, &limit], rows::order)
    }

    pub(crate) fn list_orders(
        &self,
        user_id: i64,
        environment: Environment,
        status: Option<OrderStatus>,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<Order>> {
        let env = environment.as_str();
        let status = status.map(OrderStatus::as_str);
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&user_id, &env];
        let filter = match &status {
            Some(status) => {
                params.push(status);
                "AND o.status = $3"
            }
            None => "",
        };
        let (limit_at, offset_at) = (params.len() + 1, params.len() + 2);
        params.push(&limit);
        params.push(&offset);
        let sql = format!(
            "SELECT {ORDER_COLUMNS} FROM orders o
             WHERE o.user_id = $1 AND o.environment = $2 {filter}
             ORDER BY o.created_at DESC, o.order_id DESC LIMIT ${limit_at} OFFSET ${offset_at}"
        );
        self.query(&sql, &params, rows::order)
    }
}

/// What makes an order due for the expiry sweep, its invoice's status ($1 NEW or $2
/// PENDING) bound apart: its quote ran out by $3, in environment $4, and no payment it
/// counts ($5: the unconfirmed state) still waits to confirm. Written once for
/// [`DUE_FOR_EXPIRY`] and [`ANY_DUE_FOR_EXPIRY`].
const DUE: &str = "i.expired_at <= $3 AND o.environment = $4
                   AND NOT EXISTS (SELECT 1 FROM payments p
                                   WHERE p.order_id = o.order_id AND p.counts = 1 AND p.state = $5)";

/// The orders whose quote expired, oldest first: one ordered index read per open
/// status, merged (see the SQLite side); $6 the batch.
const DUE_FOR_EXPIRY: &str = concatcp!(
    "SELECT order_id FROM (",
    "(SELECT o.order_id, i.expired_at FROM invoices i JOIN orders o ON o.order_id = i.order_id WHERE i.status = $1 AND ",
    DUE,
    " ORDER BY i.expired_at LIMIT $6) UNION ALL ",
    "(SELECT o.order_id, i.expired_at FROM invoices i JOIN orders o ON o.order_id = i.order_id WHERE i.status = $2 AND ",
    DUE,
    " ORDER BY i.expired_at LIMIT $6)",
    ") due ORDER BY expired_at LIMIT $6"
);

/// Whether [`DUE_FOR_EXPIRY`] would find an order.
const ANY_DUE_FOR_EXPIRY: &str = concatcp!(
    "SELECT CASE WHEN EXISTS (SELECT 1 FROM invoices i JOIN orders o ON o.order_id = i.order_id WHERE i.status = $1 AND ",
    DUE,
    ") OR EXISTS (SELECT 1 FROM invoices i JOIN orders o ON o.order_id = i.order_id WHERE i.status = $2 AND ",
    DUE,
    ") THEN 1::BIGINT ELSE 0::BIGINT END"
);
