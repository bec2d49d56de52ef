//! The payment state machine (DESIGN §6): every order and invoice transition there is.
//!
//! [`next_state`] is the only place that decides whether a transition is allowed; the
//! service calls it for every change and writes the resulting event in the same
//! transaction as the change.

use std::fmt;

use crate::orders::OrderStatus;

/// What happened to an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// A payment was seen that does not (yet) cover the invoice, or is unconfirmed.
    PaymentSeen,
    /// Confirmed payments now cover the invoice amount.
    PaymentsCover,
    /// The quote expired and nothing was paid.
    ExpiredUnpaid,
    /// The quote expired and confirmed payments fall short, with none left to confirm.
    ExpiredShort,
    /// A payment toward the invoice was rejected (double spend, reorg, ...).
    PaymentRejected,
    /// The customer (payment page) or the merchant cancelled.
    Cancelled,
    /// The merchant accepted a late or short payment by hand.
    MarkedPaid,
}

/// The kinds of event sent to the merchant (DESIGN §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// NEW → PENDING.
    Pending,
    /// → PAID: the spec's "success".
    Paid,
    /// → FAILED: the spec's "failure".
    Failed,
    /// → CANCELLED: the spec's "cancellation".
    Cancelled,
    /// → EXPIRED.
    Expired,
    /// A payment arrived after the quote expired; nothing changes until `mark_paid`.
    PaidLate,
}

impl EventType {
    /// Every event type.
    pub const ALL: [EventType; 6] = [
        EventType::Pending,
        EventType::Paid,
        EventType::Failed,
        EventType::Cancelled,
        EventType::Expired,
        EventType::PaidLate,
    ];

    /// The wire name, e.g. `order.paid`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Pending => "order.pending",
            EventType::Paid => "order.paid",
            EventType::Failed => "order.failed",
            EventType::Cancelled => "order.cancelled",
            EventType::Expired => "order.expired",
            EventType::PaidLate => "order.paid_late",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        EventType::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

use OrderStatus::{Cancelled, Expired, Failed, New, Paid, Pending};

/// The transition table of DESIGN §6: (from, trigger, to, event). Nothing else is allowed.
pub const TRANSITIONS: &[(OrderStatus, Trigger, OrderStatus, EventType)] = &[
    (New, Trigger::PaymentSeen, Pending, EventType::Pending),
    (New, Trigger::PaymentsCover, Paid, EventType::Paid),
    (Pending, Trigger::PaymentsCover, Paid, EventType::Paid),
    (New, Trigger::ExpiredUnpaid, Expired, EventType::Expired),
    (Pending, Trigger::ExpiredShort, Failed, EventType::Failed),
    (Pending, Trigger::PaymentRejected, Failed, EventType::Failed),
    (New, Trigger::Cancelled, Cancelled, EventType::Cancelled),
    (Expired, Trigger::MarkedPaid, Paid, EventType::Paid),
    (Failed, Trigger::MarkedPaid, Paid, EventType::Paid),
];

/// Where `trigger` takes an order in state `from`, with the event it emits; `None`
/// when the transition is not allowed.
pub fn next_state(from: OrderStatus, trigger: Trigger) -> Option<(OrderStatus, EventType)> {
    TRANSITIONS.iter().find(|(f, t, _, _)| *f == from && *t == trigger).map(|(_, _, to, event)| (*to, *event))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_only_leave_by_mark_paid() {
        for (from, trigger, _, _) in TRANSITIONS {
            if from.is_terminal() {
                assert_eq!(*trigger, Trigger::MarkedPaid);
            }
        }
        assert_eq!(next_state(Paid, Trigger::Cancelled), None);
        assert_eq!(next_state(Pending, Trigger::Cancelled), None);
        assert_eq!(next_state(Cancelled, Trigger::MarkedPaid), None);
        assert_eq!(next_state(Expired, Trigger::MarkedPaid), Some((Paid, EventType::Paid)));
    }

    #[test]
    fn event_names_round_trip() {
        for event in EventType::ALL {
            assert_eq!(EventType::parse(event.as_str()), Some(event));
        }
    }
}
