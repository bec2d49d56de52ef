//! Payments and the order lifecycle (DESIGN §6): recording, confirming and rejecting
//! payments, expiry, cancellation, `mark_paid`, rates and sandbox simulation.
//!
//! Every state change goes through [`crate::lifecycle::next_state`] and writes its event
//! row in the same transaction (the transactional outbox that webhooks deliver from).

use std::fmt;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::environment::Environment;
use crate::error::{Error, Result};
use crate::lifecycle::EventType;
use crate::orders::{OrderStatus, OrderWithInvoice};
use crate::time::Timestamp;

/// Most orders moved per expiry transaction, so a large backlog never holds the write
/// lock long (a full batch takes a few milliseconds). On SQLite a batch also ends early,
/// after [`EXPIRY_MIN_BATCH`] orders, as soon as an API write waits for the writer.
pub const EXPIRY_BATCH: usize = 100;

/// Orders an expiry transaction moves before it gives way to a waiting API write: enough
/// that a backlog keeps shrinking under constant API load.
pub const EXPIRY_MIN_BATCH: usize = 4;

/// The pause between two expiry batches: long enough for API writes waiting on the write
/// lock to take it (neither SQLite's busy handler nor a mutex hands it over fairly, so a
/// loop that re-takes it at once starves them), short enough that 100,000 due orders
/// cost under a second of pauses.
pub const EXPIRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);

/// Most characters in a transaction id.
pub(crate) const TXID_MAX_CHARS: usize = 256;

/// Where a payment stands on its chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PaymentState {
    /// Seen, not yet final.
    Unconfirmed,
    /// Final.
    Confirmed,
    /// Will never be final (double spend, reorg, ...).
    Rejected,
}

impl PaymentState {
    /// `unconfirmed`, `confirmed` or `rejected`.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentState::Unconfirmed => "unconfirmed",
            PaymentState::Confirmed => "confirmed",
            PaymentState::Rejected => "rejected",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        [PaymentState::Unconfirmed, PaymentState::Confirmed, PaymentState::Rejected]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

impl fmt::Display for PaymentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A payment toward an invoice, in the invoice's crypto currency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Payment {
    /// The chain transaction id; unique per environment.
    pub txid: String,
    /// The order paid.
    pub order_id: String,
    /// Amount, in `currency`.
    pub amount: Decimal,
    /// The invoice's crypto currency.
    pub currency: String,
    /// Unconfirmed, confirmed or rejected.
    pub state: PaymentState,
    /// True when first seen while the quote was open and the order not yet finished: only
    /// such payments pay the invoice automatically. A payment first seen later is
    /// `order.paid_late`, but on a PAID order, where it is excess (shown in
    /// `receive_amount`, no event: nothing changes state).
    pub counts: bool,
    /// When it was first recorded.
    pub seen_at: Timestamp,
    /// When it was confirmed or rejected.
    pub settled_at: Option<Timestamp>,
}

/// A state change of an order, as stored in the outbox and sent as a webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Stable id; the webhook's `webhook-id`.
    pub event_id: String,
    /// The order it is about.
    pub order_id: String,
    /// The order's environment.
    pub environment: Environment,
    /// 1, 2, 3... per order, so receivers can drop stale events.
    pub sequence: i64,
    /// What happened.
    pub event_type: EventType,
    /// The state before.
    pub previous_status: OrderStatus,
    /// The state after (equal to `previous_status` for `order.paid_late`).
    pub status: OrderStatus,
    /// The exact JSON body sent to the merchant.
    pub payload: String,
    /// When it happened.
    pub created_at: Timestamp,
}

/// A host-set exchange rate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rate {
    /// The environment it applies to.
    #[serde(serialize_with = "serialize_environment")]
    pub environment: Environment,
    /// Coin code, e.g. `BTC`.
    pub crypto: String,
    /// Fiat code, e.g. `USD`.
    pub fiat: String,
    /// Fiat units per one coin.
    pub rate: Decimal,
    /// After this time the rate is not used; `None`: until replaced.
    pub valid_until: Option<Timestamp>,
    /// When it was set.
    pub updated_at: Timestamp,
}

fn serialize_environment<S: serde::Serializer>(env: &Environment, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(env.as_str())
}

/// What a payment call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentOutcome {
    /// The payment as stored now.
    pub payment: Payment,
    /// The order and invoice after the call.
    pub order: OrderWithInvoice,
    /// Events the call emitted, in order (empty for a no-op).
    pub events: Vec<Event>,
    /// True when nothing changed because the call repeated an earlier one.
    pub duplicate: bool,
}

/// What [`Service::expire_due`](crate::Service::expire_due) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExpiryReport {
    /// NEW orders that became EXPIRED.
    pub expired: usize,
    /// PENDING orders that became FAILED (paid short).
    pub failed: usize,
}

/// A sandbox simulation step (`POST /v1/orders/<id>/simulate`, CLI `sandbox`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimulateAction {
    /// A confirmed payment of `amount` (crypto), or of what is still due.
    Pay {
        /// Crypto amount; `None`: what is still due.
        amount: Option<Decimal>,
        /// False leaves the payment unconfirmed.
        confirmed: bool,
    },
    /// A payment of `amount`, or of half of what is still due.
    Partial {
        /// Crypto amount; `None`: half of what is due.
        amount: Option<Decimal>,
        /// False leaves the payment unconfirmed.
        confirmed: bool,
    },
    /// Confirms every unconfirmed payment of the order.
    Confirm,
    /// Rejects the order's unconfirmed payments.
    Reject,
    /// The customer cancels.
    Cancel,
    /// The quote expires now.
    Expire,
}

impl SimulateAction {
    /// The step named `name` (`pay`, `partial`, `confirm`, `reject`, `cancel`, `expire`);
    /// `amount` and `confirmed` apply to the payment steps. An unknown name is refused
    /// naming the `action` field.
    pub fn from_name(name: &str, amount: Option<Decimal>, confirmed: bool) -> Result<SimulateAction> {
        Ok(match name {
            "pay" => SimulateAction::Pay { amount, confirmed },
            "partial" => SimulateAction::Partial { amount, confirmed },
            "confirm" => SimulateAction::Confirm,
            "reject" => SimulateAction::Reject,
            "cancel" => SimulateAction::Cancel,
            "expire" => SimulateAction::Expire,
            other => {
                return Err(Error::invalid(
                    "action",
                    format!("must be one of pay, partial, confirm, reject, cancel, expire, got {other:?}"),
                ))
            }
        })
    }
}

/// What one sandbox simulation step did ([`Service::simulate`](crate::Service::simulate)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Simulation {
    /// The order and invoice after the step.
    pub order: OrderWithInvoice,
    /// The payments the step made (`pay`, `partial`) or settled (`confirm`, `reject`), as
    /// stored now; empty for `cancel` and `expire`.
    pub payments: Vec<Payment>,
    /// Events the step emitted, in order.
    pub events: Vec<Event>,
}

/// Largest single payment accepted, in coins: far above any real transfer, and low
/// enough that sums of many never leave exact decimal range.
pub const MAX_PAYMENT_AMOUNT: Decimal = Decimal::from_parts(2_808_348_672, 232_830_643, 0, false, 0); // 1e18

/// Sums the amounts of the payments that match `keep`.
pub(crate) fn sum(payments: &[Payment], keep: impl Fn(&Payment) -> bool) -> Result<Decimal> {
    payments
        .iter()
        .filter(|p| keep(p))
        .try_fold(Decimal::ZERO, |total, p| total.checked_add(p.amount))
        .ok_or_else(|| Error::invalid("amount", "the payments of this order add up to more than can be counted"))
}

/// How much a payment being recorded is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PaidAmount {
    /// Exactly this, in the invoice's coin.
    Exact(Decimal),
    /// What is still due.
    Due,
    /// Half of what is still due (rounded down to the coin's decimals).
    HalfDue,
}

/// What is still due on an order, in its invoice's coin: the invoice amount less the
/// payments that count toward it and were not rejected (never below 0); nothing on a PAID
/// order, which the merchant may have marked paid after a late or short payment that
/// does not count.
pub(crate) fn due_on(current: &OrderWithInvoice, payments: &[Payment]) -> Result<Decimal> {
    if current.order.status == OrderStatus::Paid {
        return Ok(Decimal::ZERO);
    }
    let paid = sum(payments, |p| p.counts && p.state != PaymentState::Rejected)?;
    Ok(current.invoice.amount.checked_sub(paid).unwrap_or(Decimal::ZERO).max(Decimal::ZERO).normalize())
}
