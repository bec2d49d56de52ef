//! Reading rows, once for both backends: the column lists the statements select and the
//! builders that turn a row of them into a record.
//!
//! Both schemas store the same values (text, 64-bit integers, bytes; amounts as exact
//! decimal text, times as epoch milliseconds), so a builder needs only to read column
//! `i` as one of those, which [`RowValues`] offers over a `rusqlite::Row` and a
//! `postgres::Row` alike. Rows are read by position (a name lookup costs a scan of every
//! column name); each builder follows the order of its column list.

use const_format::concatcp;
use rust_decimal::Decimal;

use super::records::{
    ClaimedEvent, DeliveryRow, KeyCredential, KeyRow, PriorCreate, SigningKey, WalletRow, WatchedInvoice,
};
use crate::delivery::{DeliveryState, WebhookAttempt};
use crate::environment::Environment;
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{ApiKey, KeyStatus};
use crate::lifecycle::EventType;
use crate::mail::{Email, EmailState};
use crate::orders::{Invoice, Order, OrderStatus, OrderWithInvoice};
use crate::payments::{Event, Payment, PaymentState, Rate};
use crate::time::Timestamp;

/// Column `i` of a result row, as one of the value types both schemas store; a value of
/// another type is the backend's storage error.
pub(super) trait RowValues {
    /// A `TEXT` column.
    fn text(&self, column: usize) -> Result<String>;
    /// A `TEXT` column, borrowed from the row: for values that are decoded rather than
    /// kept, so that reading them allocates nothing.
    fn str(&self, column: usize) -> Result<&str>;
    /// A `TEXT` column that may be `NULL`.
    fn opt_text(&self, column: usize) -> Result<Option<String>>;
    /// An `INTEGER` (SQLite) or `BIGINT` (PostgreSQL) column.
    fn int(&self, column: usize) -> Result<i64>;
    /// An integer column that may be `NULL`.
    fn opt_int(&self, column: usize) -> Result<Option<i64>>;
    /// A `BLOB` (SQLite) or `BYTEA` (PostgreSQL) column.
    fn bytes(&self, column: usize) -> Result<Vec<u8>>;
}

/// How much of an unreadable stored value an error message quotes: enough to recognise
/// it, not so much that a stray blob floods the log.
const QUOTED_VALUE_CHARS: usize = 64;

/// Reads the text column `column` and decodes it with `parse`; a value `parse` refuses
/// is an [`ErrorKind::Corrupt`] error naming `what` (`table.column`), never a default.
///
/// One path for every decoder of stored enums and amounts, on both backends, so that no
/// backend (and no new column) can quietly read an unknown value as some other one.
pub(super) fn decode<T>(
    row: &dyn RowValues,
    column: usize,
    what: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<T> {
    let text = row.str(column)?;
    parse(text).ok_or_else(|| {
        let quoted: String = text.chars().take(QUOTED_VALUE_CHARS).collect();
        Error::new(ErrorKind::Corrupt(format!("{what}: unknown value {quoted:?}")))
    })
}

fn decimal(row: &dyn RowValues, column: usize, what: &str) -> Result<Decimal> {
    decode(row, column, what, |text| Decimal::from_str_exact(text).ok())
}

fn environment(row: &dyn RowValues, column: usize, what: &str) -> Result<Environment> {
    decode(row, column, what, |text| text.parse::<Environment>().ok())
}

fn status(row: &dyn RowValues, column: usize, what: &str) -> Result<OrderStatus> {
    decode(row, column, what, OrderStatus::parse)
}

fn time(row: &dyn RowValues, column: usize) -> Result<Timestamp> {
    Ok(Timestamp(row.int(column)?))
}

fn opt_time(row: &dyn RowValues, column: usize) -> Result<Option<Timestamp>> {
    Ok(row.opt_int(column)?.map(Timestamp))
}

/// A 0/1 integer column (both schemas store flags as integers).
fn flag(row: &dyn RowValues, column: usize) -> Result<bool> {
    Ok(row.int(column)? != 0)
}

/// The order columns, aliased `o`; [`order`] reads them.
pub(super) const ORDER_COLUMNS: &str = "o.order_id, o.environment, o.user_id, o.key_id, o.merchant_order_id, o.title,
    o.description, o.callback_url, o.webhook_url, o.success_url, o.cancel_url, o.customer_email, o.amount,
    o.currency, o.receive_currency, o.status, o.created_at, o.updated_at, o.deleted, o.marked_paid";

/// How many columns ORDER_COLUMNS selects; invoice columns follow at this index.
const ORDER_COLUMN_COUNT: usize = 20;

/// Where a backend's schema keeps an order's invoice, for the statements both backends
/// share: PostgreSQL has an `invoices` table, SQLite the order's own row (schema 10).
pub(super) struct InvoiceSql {
    /// A `FROM` clause with each order as `o`, joined with its invoice if that is elsewhere.
    pub orders_with_invoices: &'static str,
    /// A join target giving the invoice of payment `p` as `i`, with `i.derivation_index`.
    pub invoice_of_payment: &'static str,
    /// The invoice's coin, in `orders_with_invoices`.
    pub currency: &'static str,
    /// The invoice's status, in `orders_with_invoices`.
    pub status: &'static str,
    /// The quote's deadline, in `orders_with_invoices`.
    pub expired_at: &'static str,
    /// The deposit address, in `orders_with_invoices`.
    pub address: &'static str,
    /// The address's derivation index, in `orders_with_invoices`.
    pub derivation_index: &'static str,
}

/// A row of [`ORDER_COLUMNS`].
pub(super) fn order(row: &dyn RowValues) -> Result<Order> {
    Ok(Order {
        order_id: row.text(0)?,
        user_id: row.int(2)?,
        environment: environment(row, 1, "orders.environment")?,
        key_id: row.text(3)?,
        merchant_order_id: row.text(4)?,
        title: row.opt_text(5)?,
        description: row.opt_text(6)?,
        callback_url: row.opt_text(7)?,
        webhook_url: row.opt_text(8)?,
        success_url: row.opt_text(9)?,
        cancel_url: row.opt_text(10)?,
        customer_email: row.opt_text(11)?,
        amount: decimal(row, 12, "orders.amount")?,
        currency: row.text(13)?,
        receive_currency: row.text(14)?,
        status: status(row, 15, "orders.status")?,
        created_at: time(row, 16)?,
        updated_at: time(row, 17)?,
        deleted: flag(row, 18)?,
        marked_paid: flag(row, 19)?,
    })
}

/// A row of [`ORDER_COLUMNS`], then each backend's invoice columns (id, amount, currency,
/// rate, status, receive amount and currency, created, expired and updated times,
/// address, payment URI, derivation index).
pub(super) fn order_with_invoice(row: &dyn RowValues) -> Result<OrderWithInvoice> {
    let order = order(row)?;
    let at = ORDER_COLUMN_COUNT;
    let invoice = Invoice {
        invoice_id: row.text(at)?,
        order_id: order.order_id.clone(),
        merchant_order_id: order.merchant_order_id.clone(),
        amount: decimal(row, at + 1, "invoice.amount")?,
        currency: row.text(at + 2)?,
        rate: decimal(row, at + 3, "invoice.rate")?,
        status: status(row, at + 4, "invoice.status")?,
        receive_amount: decimal(row, at + 5, "invoice.receive_amount")?,
        receive_currency: row.text(at + 6)?,
        created_at: time(row, at + 7)?,
        expired_at: time(row, at + 8)?,
        updated_at: time(row, at + 9)?,
        address: row.text(at + 10)?,
        payment_uri: row.text(at + 11)?,
        derivation_index: match row.opt_int(at + 12)? {
            None => None,
            Some(index) => Some(u32::try_from(index).map_err(|_| {
                Error::new(ErrorKind::Corrupt(format!("invoice.derivation_index: {index} is out of range")))
            })?),
        },
    };
    Ok(OrderWithInvoice { order, invoice })
}

/// The columns of an order that [`prior_create`] reads.
pub(super) const PRIOR_CREATE_COLUMNS: &str = "request_hash, create_response";

/// A row of [`PRIOR_CREATE_COLUMNS`].
pub(super) fn prior_create(row: &dyn RowValues) -> Result<PriorCreate> {
    Ok(PriorCreate { request_hash: row.bytes(0)?, create_response: row.text(1)? })
}

/// The key columns authentication checks; [`key_credential`] reads them. They lead
/// [`KEY_COLUMNS`], so [`key`] reads them the same way.
pub(super) const KEY_CREDENTIAL_COLUMNS: &str = "id, user_id, environment, status, key_hash";

/// A row of [`KEY_CREDENTIAL_COLUMNS`] (or one starting with them).
pub(super) fn key_credential(row: &dyn RowValues) -> Result<KeyCredential> {
    Ok(KeyCredential {
        id: row.text(0)?,
        user_id: row.int(1)?,
        environment: environment(row, 2, "api_keys.environment")?,
        status: decode(row, 3, "api_keys.status", KeyStatus::parse)?,
        key_hash: row.bytes(4)?,
    })
}

/// The key columns; [`key`] reads them.
pub(super) const KEY_COLUMNS: &str = concatcp!(
    KEY_CREDENTIAL_COLUMNS,
    ", webhook_url, key_hint, created_at, last_used_at, webhook_secret_enc, display_name"
);

/// A row of [`KEY_COLUMNS`].
pub(super) fn key(row: &dyn RowValues) -> Result<KeyRow> {
    let KeyCredential { id, user_id, environment, status, key_hash } = key_credential(row)?;
    Ok(KeyRow {
        key: ApiKey {
            id,
            user_id,
            environment,
            status,
            webhook_url: row.opt_text(5)?,
            key_hint: row.text(6)?,
            created_at_ms: time(row, 7)?,
            last_used_at_ms: opt_time(row, 8)?,
            display_name: row.opt_text(10)?,
        },
        key_hash,
        webhook_secret_enc: row.text(9)?,
    })
}

/// A row of `webhook_secret_enc`.
pub(super) fn sealed_secret(row: &dyn RowValues) -> Result<String> {
    row.text(0)
}

/// A row of `webhook_url, webhook_secret_enc, previous_secret_enc, previous_secret_until`
/// (of a live or a retired key; a retired key has no previous secret).
pub(super) fn signing_key(row: &dyn RowValues) -> Result<SigningKey> {
    let previous = match (row.opt_text(2)?, row.opt_int(3)?) {
        (Some(sealed), Some(until)) => Some((sealed, until)),
        _ => None,
    };
    Ok(SigningKey { webhook_url: row.opt_text(0)?, sealed_secret: row.text(1)?, previous })
}

/// The payment columns; [`payment`] reads them.
pub(super) const PAYMENT_COLUMNS: &str = "txid, order_id, amount, currency, state, counts, seen_at, settled_at";

/// A row of [`PAYMENT_COLUMNS`].
pub(super) fn payment(row: &dyn RowValues) -> Result<Payment> {
    Ok(Payment {
        txid: row.text(0)?,
        order_id: row.text(1)?,
        amount: decimal(row, 2, "payments.amount")?,
        currency: row.text(3)?,
        state: decode(row, 4, "payments.state", PaymentState::parse)?,
        counts: flag(row, 5)?,
        seen_at: time(row, 6)?,
        settled_at: opt_time(row, 7)?,
    })
}

/// The event columns; [`event`] reads them.
pub(super) const EVENT_COLUMNS: &str =
    "event_id, order_id, environment, sequence, type, previous_status, status, payload, created_at";

/// A row of [`EVENT_COLUMNS`].
pub(super) fn event(row: &dyn RowValues) -> Result<Event> {
    Ok(Event {
        event_id: row.text(0)?,
        order_id: row.text(1)?,
        environment: environment(row, 2, "events.environment")?,
        sequence: row.int(3)?,
        event_type: decode(row, 4, "events.type", EventType::parse)?,
        previous_status: status(row, 5, "events.previous_status")?,
        status: status(row, 6, "events.status")?,
        payload: row.text(7)?,
        created_at: time(row, 8)?,
    })
}

/// The rate columns; [`rate`] reads them.
pub(super) const RATE_COLUMNS: &str = "environment, crypto, fiat, rate, valid_until, updated_at";

/// A row of [`RATE_COLUMNS`].
pub(super) fn rate(row: &dyn RowValues) -> Result<Rate> {
    Ok(Rate {
        environment: environment(row, 0, "rates.environment")?,
        crypto: row.text(1)?,
        fiat: row.text(2)?,
        rate: decimal(row, 3, "rates.rate")?,
        valid_until: opt_time(row, 4)?,
        updated_at: time(row, 5)?,
    })
}

/// The columns of an event and its order that sending it needs, aliased `e` and `o`;
/// [`claimed_event`] reads them.
pub(super) const CLAIMED_EVENT_COLUMNS: &str = "e.event_id, e.payload, e.attempts, o.webhook_url, o.key_id";

/// A row of [`CLAIMED_EVENT_COLUMNS`].
pub(super) fn claimed_event(row: &dyn RowValues) -> Result<ClaimedEvent> {
    Ok(ClaimedEvent {
        event_id: row.text(0)?,
        payload: row.text(1)?,
        attempt: row.int(2)?,
        order_webhook_url: row.opt_text(3)?,
        key_id: row.text(4)?,
    })
}

/// The delivery columns of an event; [`delivery`] reads them.
pub(super) const DELIVERY_COLUMNS: &str =
    "event_id, delivery_state, attempts, next_attempt_at, delivered_at, last_error";

/// A row of [`DELIVERY_COLUMNS`].
pub(super) fn delivery(row: &dyn RowValues) -> Result<DeliveryRow> {
    Ok(DeliveryRow {
        event_id: row.text(0)?,
        state: decode(row, 1, "events.delivery_state", DeliveryState::parse)?,
        attempts: row.int(2)?,
        next_attempt_at: time(row, 3)?,
        delivered_at: opt_time(row, 4)?,
        last_error: row.opt_text(5)?,
    })
}

/// The columns of a logged webhook request; [`attempt`] reads them.
pub(super) const ATTEMPT_COLUMNS: &str = "attempt, url, started_at, status, latency_ms, response_excerpt, error";

/// A row of [`ATTEMPT_COLUMNS`].
pub(super) fn attempt(row: &dyn RowValues) -> Result<WebhookAttempt> {
    Ok(WebhookAttempt {
        attempt: row.int(0)?,
        url: row.text(1)?,
        started_at: time(row, 2)?,
        status: row.opt_int(3)?.and_then(|status| u16::try_from(status).ok()),
        latency_ms: row.int(4)?,
        response_excerpt: row.opt_text(5)?,
        error: row.opt_text(6)?,
    })
}

/// The e-mail columns; [`email`] reads them.
pub(super) const EMAIL_COLUMNS: &str =
    "email_id, order_id, recipient, subject, text_body, html_body, state, attempts, \
                                        next_attempt_at, last_error, sent_at, created_at";

/// A row of [`EMAIL_COLUMNS`].
pub(super) fn email(row: &dyn RowValues) -> Result<Email> {
    Ok(Email {
        email_id: row.text(0)?,
        order_id: row.text(1)?,
        recipient: row.text(2)?,
        subject: row.text(3)?,
        text_body: row.text(4)?,
        html_body: row.text(5)?,
        state: decode(row, 6, "emails.state", EmailState::parse)?,
        attempts: row.int(7)?,
        next_attempt_at: time(row, 8)?,
        last_error: row.opt_text(9)?,
        sent_at: opt_time(row, 10)?,
        created_at: time(row, 11)?,
    })
}

/// A one-column row of text (an id).
pub(super) fn id(row: &dyn RowValues) -> Result<String> {
    row.text(0)
}

/// The wallet columns, `w` joined with its counter `a`; [`wallet`] reads them.
pub(super) const WALLET_COLUMNS: &str =
    "w.coin, w.descriptor, w.account_id, COALESCE(a.next_index, 0), w.created_at, w.updated_at";

/// A row of [`WALLET_COLUMNS`].
pub(super) fn wallet(row: &dyn RowValues) -> Result<WalletRow> {
    Ok(WalletRow {
        coin: row.text(0)?,
        descriptor: row.text(1)?,
        account_id: row.text(2)?,
        next_index: row.int(3)?,
        created_at: time(row, 4)?,
        updated_at: time(row, 5)?,
    })
}

/// The chain watcher's invoices (`watched_invoices`) on either backend, given where its
/// schema keeps invoices and its placeholders for the environment, the earliest expiry
/// still watched: open invoices with a derived address, and any whose quote
/// ran out since then, whatever their state (a payment to an expired, failed, paid or
/// cancelled order is recorded for the merchant to see, DESIGN §6). [`watched_invoice`]
/// reads the rows.
pub(super) fn watched_invoices_sql(invoices: &InvoiceSql, environment: &str, late_since: &str) -> String {
    let InvoiceSql { orders_with_invoices, currency, status, expired_at, address, derivation_index, .. } = invoices;
    format!(
        "SELECT o.order_id, {currency}, {address}, o.created_at FROM {orders_with_invoices}
         WHERE {derivation_index} IS NOT NULL AND o.environment = {environment}
           AND ({status} IN ('{new}', '{pending}') OR {expired_at} >= {late_since})
         ORDER BY {expired_at}",
        new = OrderStatus::New.as_str(),
        pending = OrderStatus::Pending.as_str(),
    )
}

/// The unconfirmed payments the chain watcher follows up (`watched_unconfirmed_payments`)
/// on either backend, given where its schema keeps invoices, its placeholders and how it
/// orders txids in byte order.
pub(super) fn watched_unconfirmed_payments_sql(
    invoices: &InvoiceSql,
    environment: &str,
    txid_in_byte_order: &str,
) -> String {
    let columns = PAYMENT_COLUMNS.split(", ").map(|c| format!("p.{c}")).collect::<Vec<_>>().join(", ");
    format!(
        "SELECT {columns} FROM payments p JOIN {invoice_of_payment}
         WHERE p.environment = {environment} AND p.state = '{unconfirmed}' AND i.derivation_index IS NOT NULL
         ORDER BY p.seen_at, {txid_in_byte_order}",
        invoice_of_payment = invoices.invoice_of_payment,
        unconfirmed = PaymentState::Unconfirmed.as_str(),
    )
}

/// A row of [`watched_invoices_sql`]: order id, coin, address, when the order was made.
pub(super) fn watched_invoice(row: &dyn RowValues) -> Result<WatchedInvoice> {
    Ok(WatchedInvoice {
        order_id: row.text(0)?,
        currency: row.text(1)?,
        address: row.text(2)?,
        created_at_ms: row.int(3)?,
    })
}
