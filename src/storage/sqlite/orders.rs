//! SQLite statements for orders and invoices.
//!
//! An order's invoice lives in the order's row (schema 10): one B-tree per create fewer
//! by three than a table of its own. Its columns whose names the order uses carry an
//! `invoice_` prefix.

use const_format::concatcp;
use rusqlite::{named_params, ToSql};

use super::SqliteConn;
use crate::environment::Environment;
use crate::error::Result;
use crate::ids;
use crate::orders::{Order, OrderStatus, OrderWithInvoice};
use crate::payments::PaymentState;
use crate::storage::rows::{self, InvoiceSql, ORDER_COLUMNS, PRIOR_CREATE_COLUMNS};
use crate::storage::{DbResult, PriorCreate};

/// The invoice columns of the order row `o`, in the order [`rows::order_with_invoice`]
/// reads them after [`ORDER_COLUMNS`].
const INVOICE_COLUMNS: &str = "o.invoice_id, o.invoice_amount, o.invoice_currency, o.rate, o.invoice_status,
    o.receive_amount, o.invoice_receive_currency, o.invoice_created_at, o.expired_at, o.invoice_updated_at,
    o.address, o.payment_uri, o.derivation_index";

/// Where the statements both backends share find an invoice: in its order's row.
pub(super) const INVOICES: InvoiceSql = InvoiceSql {
    orders_with_invoices: "orders o",
    invoice_of_payment: "orders i ON i.order_id = p.order_id",
    currency: "o.invoice_currency",
    status: "o.invoice_status",
    expired_at: "o.expired_at",
    address: "o.address",
    derivation_index: "o.derivation_index",
};

/// An order with its invoice, in [`rows::order_with_invoice`]'s columns.
const ORDER_WITH_INVOICE: &str = concatcp!("SELECT ", ORDER_COLUMNS, ", ", INVOICE_COLUMNS, " FROM orders o");

/// The order `:order_id` stored under its row key `:row_key` ([`ids::row_key`]): one walk
/// down the table's B-tree. The id is matched too, as a key is only a hint.
const BY_ROW_KEY: &str = " WHERE o.rowid = :row_key AND o.order_id = :order_id";

/// The order `:order_id` found through the id's index, then the table: for rows stored
/// under another key (see [`SqliteConn::insert_order_with_invoice`]) and unknown ids.
const BY_ID: &str = " WHERE o.order_id = :order_id";

/// Get Orders, newest first: `orders_by_merchant` read backwards (it is in ascending
/// order so that new orders append to it; see migration 9).
const LIST_ALL: &str = concatcp!(
    "SELECT ",
    ORDER_COLUMNS,
    " FROM orders o
     WHERE o.user_id = :user_id AND o.environment = :environment
     ORDER BY o.created_at DESC, o.order_id DESC LIMIT :limit OFFSET :offset"
);

/// Get Orders of one status, newest first: `orders_by_merchant_status` read backwards.
const LIST_OF_STATUS: &str = concatcp!(
    "SELECT ",
    ORDER_COLUMNS,
    " FROM orders o
     WHERE o.user_id = :user_id AND o.environment = :environment AND o.status = :status
     ORDER BY o.created_at DESC, o.order_id DESC LIMIT :limit OFFSET :offset"
);

/// The SQLite side of the order methods of [`crate::storage::Conn`] (same names,
/// arguments and results).
impl SqliteConn<'_> {
    pub(crate) fn prior_create(
        &self,
        user_id: i64,
        environment: Environment,
        merchant_order_id: &str,
    ) -> Result<Option<PriorCreate>> {
        self.query_opt(
            concatcp!(
                "SELECT ",
                PRIOR_CREATE_COLUMNS,
                " FROM orders
                 WHERE user_id = :user_id AND environment = :environment AND merchant_order_id = :moid"
            ),
            named_params! {":user_id": user_id, ":environment": environment.as_str(), ":moid": merchant_order_id},
            rows::prior_create,
        )
    }

    pub(crate) fn insert_order_with_invoice(
        &self,
        created: &OrderWithInvoice,
        request_hash: &[u8],
        create_response: &str,
    ) -> Result<()> {
        // Positional parameters, in the column order: binding 35 names costs a search of
        // the statement's parameter list per name, inside the single writer.
        const INSERT: &str = "INSERT INTO orders (rowid, order_id, environment, user_id, key_id, merchant_order_id,
                title, description, callback_url, webhook_url, success_url, cancel_url, customer_email, amount,
                currency, receive_currency, status, request_hash, create_response, created_at, updated_at,
                deleted, invoice_id, invoice_amount, invoice_currency, rate, invoice_status, receive_amount,
                invoice_receive_currency, invoice_created_at, expired_at, invoice_updated_at, address,
                payment_uri, derivation_index)
             VALUES (?35, ?1, ?2, ?3, ?4, ?5, ?6, ?7,
                ?8, ?9, ?10, ?11, ?12, ?13, ?14,
                ?15, ?16, ?17, ?18, ?19, ?20, ?21,
                ?22, ?23, ?24, ?25, ?26, ?27,
                ?28, ?29, ?30, ?31, ?32,
                ?33, ?34)";
        let (order, invoice) = (&created.order, &created.invoice);
        let (amount, invoice_amount) = (order.amount.to_string(), invoice.amount.to_string());
        let (rate, receive_amount) = (invoice.rate.to_string(), invoice.receive_amount.to_string());
        let insert = |row_key: Option<i64>| -> rusqlite::Result<usize> {
            self.0.prepare_cached(INSERT)?.execute(rusqlite::params![
                order.order_id,
                order.environment.as_str(),
                order.user_id,
                order.key_id,
                order.merchant_order_id,
                order.title,
                order.description,
                order.callback_url,
                order.webhook_url,
                order.success_url,
                order.cancel_url,
                order.customer_email,
                amount,
                order.currency,
                order.receive_currency,
                order.status.as_str(),
                request_hash,
                create_response,
                order.created_at.as_millis(),
                order.updated_at.as_millis(),
                i64::from(order.deleted),
                invoice.invoice_id,
                invoice_amount,
                invoice.currency,
                rate,
                invoice.status.as_str(),
                receive_amount,
                invoice.receive_currency,
                invoice.created_at.as_millis(),
                invoice.expired_at.as_millis(),
                invoice.updated_at.as_millis(),
                invoice.address,
                invoice.payment_uri,
                invoice.derivation_index,
                row_key,
            ])
        };
        // The row goes under the id's row key. Should a row have it already (an order of
        // another process in the same millisecond), SQLite picks the key, and reads find
        // the row through the id's index; a failed statement leaves the transaction as it was.
        match insert(ids::row_key(&order.order_id)) {
            Err(rusqlite::Error::SqliteFailure(error, _))
                if error.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_ROWID =>
            {
                insert(None)
            }
            inserted => inserted,
        }
        .db()?;
        Ok(())
    }

    pub(crate) fn order_with_invoice(
        &self,
        user_id: i64,
        environment: Environment,
        order_id: &str,
    ) -> Result<Option<OrderWithInvoice>> {
        const OF_MERCHANT: &str = " AND o.user_id = :user_id AND o.environment = :environment";
        self.order_by_key_or_id(
            [concatcp!(ORDER_WITH_INVOICE, BY_ROW_KEY, OF_MERCHANT), concatcp!(ORDER_WITH_INVOICE, BY_ID, OF_MERCHANT)],
            order_id,
            &[(":user_id", &user_id), (":environment", &environment.as_str())],
        )
    }

    // No row lock to take: the caller holds SQLite's single write lock.
    pub(crate) fn order_in_environment(
        &self,
        environment: Environment,
        order_id: &str,
    ) -> Result<Option<OrderWithInvoice>> {
        const IN_ENVIRONMENT: &str = " AND o.environment = :environment";
        self.order_by_key_or_id(
            [
                concatcp!(ORDER_WITH_INVOICE, BY_ROW_KEY, IN_ENVIRONMENT),
                concatcp!(ORDER_WITH_INVOICE, BY_ID, IN_ENVIRONMENT),
            ],
            order_id,
            &[(":environment", &environment.as_str())],
        )
    }

    /// The order `order_id` with its invoice, read by `by_key_then_id[0]` (a [`BY_ROW_KEY`]
    /// read) under the id's row key, and when that finds nothing or the id has no key, by
    /// `by_key_then_id[1]` (the [`BY_ID`] read with the same further conditions, whose
    /// parameters `filter` binds).
    fn order_by_key_or_id(
        &self,
        by_key_then_id: [&str; 2],
        order_id: &str,
        filter: &[(&str, &dyn ToSql)],
    ) -> Result<Option<OrderWithInvoice>> {
        let by_id = (":order_id", &order_id as &dyn ToSql);
        if let Some(key) = ids::row_key(order_id) {
            let params: Vec<_> =
                [(":row_key", &key as &dyn ToSql), by_id].into_iter().chain(filter.iter().copied()).collect();
            if let Some(found) = self.query_opt(by_key_then_id[0], params.as_slice(), rows::order_with_invoice)? {
                return Ok(Some(found));
            }
        }
        let params: Vec<_> = std::iter::once(by_id).chain(filter.iter().copied()).collect();
        self.query_opt(by_key_then_id[1], params.as_slice(), rows::order_with_invoice)
    }

    pub(crate) fn update_order_state(&self, current: &OrderWithInvoice) -> Result<()> {
        let (order, invoice) = (&current.order, &current.invoice);
        self.execute(
            "UPDATE orders SET status = :status, receive_currency = :receive_currency,
                        marked_paid = :marked_paid, updated_at = :updated_at,
                        invoice_status = :invoice_status, receive_amount = :receive_amount,
                        invoice_receive_currency = :invoice_receive_currency, expired_at = :expired_at,
                        invoice_updated_at = :invoice_updated_at
                 WHERE order_id = :order_id",
            named_params! {
                ":status": order.status.as_str(),
                ":receive_currency": order.receive_currency,
                ":marked_paid": i64::from(order.marked_paid),
                ":updated_at": order.updated_at.as_millis(),
                ":invoice_status": invoice.status.as_str(),
                ":receive_amount": invoice.receive_amount.to_string(),
                ":invoice_receive_currency": invoice.receive_currency,
                ":expired_at": invoice.expired_at.as_millis(),
                ":invoice_updated_at": invoice.updated_at.as_millis(),
                ":order_id": order.order_id,
            },
        )?;
        Ok(())
    }

    pub(crate) fn orders_due_for_expiry(&self, environment: Environment, now: i64, limit: i64) -> Result<Vec<String>> {
        self.query(
            DUE_FOR_EXPIRY,
            named_params! {
                ":new": OrderStatus::New.as_str(),
                ":pending": OrderStatus::Pending.as_str(),
                ":unconfirmed": PaymentState::Unconfirmed.as_str(),
                ":now": now,
                ":environment": environment.as_str(),
                ":limit": limit,
            },
            rows::id,
        )
    }

    pub(crate) fn any_order_due_for_expiry(&self, environment: Environment, now: i64) -> Result<bool> {
        let params = named_params! {
            ":new": OrderStatus::New.as_str(),
            ":pending": OrderStatus::Pending.as_str(),
            ":unconfirmed": PaymentState::Unconfirmed.as_str(),
            ":now": now,
            ":environment": environment.as_str(),
        };
        self.query_one(ANY_DUE_FOR_EXPIRY, params, |row| Ok(row.int(0)? != 0))
    }

    pub(crate) fn advance_open_deadlines(&self, environment: Environment, by_ms: i64) -> Result<usize> {
        self.execute(
            "UPDATE orders SET expired_at = expired_at - :by
             WHERE invoice_status IN (:new, :pending) AND environment = :environment",
            named_params! {":by": by_ms, ":new": OrderStatus::New.as_str(), ":pending": OrderStatus::Pending.as_str(),
            ":environment": environment.as_str()},
        )
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
             WHERE o.environment = :environment AND (:user_id IS NULL OR o.user_id = :user_id)
               AND (:status IS NULL OR o.status = :status) AND o.created_at >= :since
             ORDER BY o.created_at DESC, o.order_id DESC LIMIT :limit"
        );
        self.query(
            &sql,
            named_params! {":environment": environment.as_str(), ":user_id": user_id,
            ":status": status.map(OrderStatus::as_str), ":since": since_ms, ":limit": limit},
            rows::order,
        )
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
        match status {
            Some(status) => self.query(
                LIST_OF_STATUS,
                named_params! {":user_id": user_id, ":environment": env, ":status": status.as_str(),
                ":limit": limit, ":offset": offset},
                rows::order,
            ),
            None => self.query(
                LIST_ALL,
                named_params! {":user_id": user_id, ":environment": env, ":limit": limit, ":offset": offset},
                rows::order,
            ),
        }
    }
}

/// What makes an order row `o` due for the expiry sweep, its status (NEW or PENDING)
/// bound apart: its quote ran out by `:now`, in `:environment`, and no payment it counts
/// still waits to confirm. Written once for [`DUE_FOR_EXPIRY`] and
/// [`ANY_DUE_FOR_EXPIRY`].
const DUE: &str = "o.expired_at <= :now AND o.environment = :environment
                   AND NOT EXISTS (SELECT 1 FROM payments p
                                   WHERE p.order_id = o.order_id AND p.counts = 1 AND p.state = :unconfirmed)";

/// The orders whose quote expired, oldest first. One ordered read of
/// `orders_by_expiry (invoice_status, expired_at)` per open status, merged: with
/// `status IN (NEW, PENDING)` in one query SQLite sorted every due invoice on each call,
/// so each expiry batch cost as much as the whole backlog.
const DUE_FOR_EXPIRY: &str = concatcp!(
    "SELECT order_id FROM (",
    "SELECT * FROM (SELECT o.order_id, o.expired_at FROM orders o WHERE o.invoice_status = :new AND ",
    DUE,
    " ORDER BY o.expired_at LIMIT :limit) UNION ALL ",
    "SELECT * FROM (SELECT o.order_id, o.expired_at FROM orders o WHERE o.invoice_status = :pending AND ",
    DUE,
    " ORDER BY o.expired_at LIMIT :limit)",
    ") ORDER BY expired_at LIMIT :limit"
);

/// Whether [`DUE_FOR_EXPIRY`] would find an order: each EXISTS reads the same index
/// from its status's oldest entry and stops at the first due order of the environment.
const ANY_DUE_FOR_EXPIRY: &str = concatcp!(
    "SELECT EXISTS (SELECT 1 FROM orders o WHERE o.invoice_status = :new AND ",
    DUE,
    ") OR EXISTS (SELECT 1 FROM orders o WHERE o.invoice_status = :pending AND ",
    DUE,
    ")"
);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::{Error, ErrorKind};
    use crate::storage::{DbResult, Store, StoreOptions, StoreTarget};

    // Every order query of the crate names the environment it wants, so no public call
    // reaches an order of an unknown one; this reads it without that filter to check the
    // decoder itself refuses it rather than taking it for sandbox.
    #[test]
    fn an_unknown_order_environment_is_corrupt_not_sandbox() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let path = dir.path().join("t.db");
        let store = Store::open(
            &StoreTarget::Sqlite(path.clone()),
            StoreOptions {
                sqlite: crate::config::SqliteOptions { synchronous_full: true, ..Default::default() },
                busy_timeout: Duration::from_secs(5),
            },
        )?;
        let conn = rusqlite::Connection::open(&path).db()?;
        conn.pragma_update(None, "ignore_check_constraints", true).db()?;
        conn.execute_batch(
            "INSERT INTO orders (order_id, environment, user_id, key_id, merchant_order_id, amount, currency,
                                 status, request_hash, create_response, created_at, updated_at)
             VALUES ('00000000-0000-4000-8000-000000000001', 'staging', 7, 'key_x', 'o-1', '19.99', 'USD',
                     'NEW', x'00', '{}', 1000, 1000);",
        )
        .db()?;
        let sql = format!("SELECT {ORDER_COLUMNS} FROM orders o");
        let read = store.read(|c| SqliteConn(c.sqlite_for_test(), None).query_one(&sql, [], rows::order));
        let err = read.err().map(|e| e.kind().to_string()).unwrap_or_default();
        assert_eq!(err, "stored data could not be read: orders.environment: unknown value \"staging\"");
        Ok(())
    }

    /// The `EXPLAIN QUERY PLAN` details of `sql` on a fresh database, each parameter
    /// bound to NULL (the planner's stability guarantee is on: values do not change plans).
    fn query_plan(sql: &str) -> Result<Vec<String>> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let store = Store::open(
            &StoreTarget::Sqlite(dir.path().join("t.db")),
            StoreOptions { sqlite: Default::default(), busy_timeout: Duration::from_secs(5) },
        )?;
        store.read(|db| {
            let conn = db.sqlite_for_test();
            let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).db()?;
            let unbound = vec![rusqlite::types::Value::Null; statement.parameter_count()];
            let details = statement
                .query_map(rusqlite::params_from_iter(unbound), |row| row.get::<_, String>(3))
                .db()?
                .collect::<std::result::Result<Vec<_>, _>>()
                .db()?;
            Ok(details)
        })
    }

    #[test]
    fn the_expiry_query_reads_the_expiry_index_in_order_and_sorts_one_batch_at_most() -> Result<()> {
        let plan = query_plan(DUE_FOR_EXPIRY)?;
        let text = plan.join("; ");
        let index_reads = plan.iter().filter(|d| d.contains("USING INDEX orders_by_expiry")).count();
        assert_eq!(index_reads, 2, "one ordered read of the index per status: {text}");
        // Only the outer merge of the two batches (at most 2 × limit rows) may sort.
        let sorts = plan.iter().filter(|d| d.contains("TEMP B-TREE")).count();
        assert_eq!(sorts, 1, "the backlog itself is never sorted: {text}");
        Ok(())
    }

    #[test]
    fn whether_any_order_is_due_is_read_from_the_expiry_index_without_sorting() -> Result<()> {
        let plan = query_plan(ANY_DUE_FOR_EXPIRY)?.join("; ");
        assert_eq!(plan.matches("USING INDEX orders_by_expiry").count(), 2, "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        Ok(())
    }

    #[test]
    fn get_orders_reads_its_index_backwards_without_sorting() -> Result<()> {
        for (sql, index) in [(LIST_ALL, "orders_by_merchant"), (LIST_OF_STATUS, "orders_by_merchant_status")] {
            let plan = query_plan(sql)?.join("; ");
            assert!(plan.contains(&format!("USING INDEX {index} ")), "{index}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "newest first without a sort: {plan}");
        }
        Ok(())
    }

    #[test]
    fn get_order_by_row_key_walks_the_table_alone_and_by_id_the_ids_index() -> Result<()> {
        let by_key = query_plan(concatcp!(ORDER_WITH_INVOICE, BY_ROW_KEY, " AND o.environment = :environment"))?;
        assert_eq!(by_key, ["SEARCH o USING INTEGER PRIMARY KEY (rowid=?)"]);
        let by_id = query_plan(concatcp!(ORDER_WITH_INVOICE, BY_ID, " AND o.environment = :environment"))?;
        assert_eq!(by_id, ["SEARCH o USING INDEX sqlite_autoindex_orders_1 (order_id=?)"]);
        Ok(())
    }
}
