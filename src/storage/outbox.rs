//! The two outboxes (webhooks on the event table, payment-link e-mails) as one engine
//! sees them, for both backends.
//!
//! [`super::Conn::claim_due`] leases due messages, [`super::Conn::finish_attempt`]
//! records how an attempt ended and [`super::Conn::requeue`] puts a message back. The
//! sender names the outbox ([`Outbox`]); [`table`] maps it onto the columns its table has
//! had since migration 0003, which name their id, state and sent-at columns differently.

use crate::delivery::{DeliveryState, Outbox, Settled};
use crate::error::{Error, ErrorKind, Result};
use crate::mail::EmailState;
use crate::storage::AttemptResult;
use crate::time::Timestamp;

/// Where one outbox keeps its messages. Both tables also have `environment`,
/// `order_id`, `attempts`, `next_attempt_at`, `lease_until`, `lease_token`,
/// `last_error` and `created_at`, which the engine uses under those names.
///
/// The state names come from the outbox's state enum, so the statements built from
/// them follow a renamed state.
pub(super) struct Table {
    pub(super) name: &'static str,
    pub(super) id: &'static str,
    pub(super) state: &'static str,
    /// The states of a message waiting for an attempt, sent, and given up.
    pub(super) pending: &'static str,
    pub(super) done: &'static str,
    pub(super) failed: &'static str,
    /// The column stamped with when the message went out.
    pub(super) done_at: &'static str,
    /// The state of a message with nowhere to go, in an outbox that has one.
    pub(super) no_target: Option<&'static str>,
    /// The column that orders an order's messages, in an outbox whose messages must be
    /// first attempted in that order.
    pub(super) sequence: Option<&'static str>,
}

const WEBHOOKS: Table = Table {
    name: "events",
    id: "event_id",
    state: "delivery_state",
    pending: DeliveryState::Pending.as_str(),
    done: DeliveryState::Delivered.as_str(),
    failed: DeliveryState::Failed.as_str(),
    done_at: "delivered_at",
    no_target: Some(DeliveryState::NoTarget.as_str()),
    sequence: Some("sequence"),
};

const EMAILS: Table = Table {
    name: "emails",
    id: "email_id",
    state: "state",
    pending: EmailState::Pending.as_str(),
    done: EmailState::Sent.as_str(),
    failed: EmailState::Failed.as_str(),
    done_at: "sent_at",
    no_target: None,
    sequence: None,
};

/// The table and columns of `outbox`.
pub(super) fn table(outbox: Outbox) -> &'static Table {
    match outbox {
        Outbox::Webhooks => &WEBHOOKS,
        Outbox::Emails => &EMAILS,
    }
}

/// The UPDATE, on either backend given its placeholders, that moves the due times of an
/// outbox's waiting messages back by `by` ms after the clock was set back by as much: a
/// retry due 5 s after an attempt is then due 5 s after it again, not 5 s after the clock
/// has caught up with the step. Leases stay: shortening one could hand a message still
/// being sent to a second sender (a lease is released when its attempt finishes anyway).
pub(super) fn clock_set_back_sql(t: &Table, environment: &str, now: &str, by: &str) -> String {
    let Table { name, state, pending, .. } = t;
    format!(
        "UPDATE {name} SET next_attempt_at = next_attempt_at - {by}
         WHERE environment = {environment} AND {state} = '{pending}' AND next_attempt_at > {now}"
    )
}

/// The one lease-expiry rule, for the row aliased `alias`, with the backend's
/// placeholder `now` for the current time: a lease has run out (or was never taken, or a
/// finished attempt released it) once `lease_until` is not after now. Only such a message
/// may be claimed, and only a message whose lease holds counts as in flight.
pub(super) fn lease_expired(alias: &str, now: &str) -> String {
    format!("{alias}.lease_until <= {now}")
}

/// The UPDATE, on either backend given its placeholders for the message's id and the
/// lease token, that gives back a lease whose attempt was never made (a stopping
/// worker's messages still waiting for a sender): the message is free at once, and the
/// attempt its claim counted is uncounted, so its schedule does not move on for nothing.
/// A message requeued meanwhile (`attempts` 0) stays as requeued.
pub(super) fn release_unattempted_sql(t: &Table, id: &str, token: &str) -> String {
    format!(
        "UPDATE {name} SET lease_until = 0, lease_token = NULL,
             attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END
         WHERE {id_column} = {id} AND lease_token = {token}",
        name = t.name,
        id_column = t.id,
    )
}

/// The `SET` list of a finished attempt, on either backend, given its placeholders for
/// the settled state, the next due time, the error and the sent-at time (see
/// [`settled_columns`]). The lease is released and the error kept in every case. A
/// message requeued while the attempt was in flight keeps the requeue's pending state
/// and due time, so the redelivery asked for is not overwritten by the attempt that was
/// already going: that is the one way a row still leased by the attempt can show
/// `attempts = 0`, since a claim counts its attempt (at least 1) and a requeue resets it.
pub(super) fn finished_attempt_assignments(t: &Table, state: &str, next: &str, error: &str, done_at: &str) -> String {
    format!(
        "{s} = CASE WHEN attempts = 0 THEN {s} ELSE {state} END,
         next_attempt_at = CASE WHEN attempts = 0 THEN next_attempt_at ELSE {next} END,
         lease_until = 0, lease_token = NULL, last_error = {error},
         {d} = CASE WHEN attempts = 0 THEN {d} ELSE COALESCE({done_at}, {d}) END",
        s = t.state,
        d = t.done_at,
    )
}

/// What a finished attempt writes, on either backend: the message's new state, when it
/// is next due, and when it went out (for a delivered one).
pub(super) fn settled_columns(t: &Table, result: &AttemptResult<'_>) -> Result<(&'static str, Timestamp, Option<i64>)> {
    Ok(match &result.settled {
        Settled::Done => (t.done, result.finished_at, Some(result.finished_at.as_millis())),
        Settled::Retry { at, .. } => (t.pending, *at, None),
        Settled::Failed(_) => (t.failed, result.finished_at, None),
        Settled::NoTarget => {
            let no_target = t.no_target.ok_or_else(|| {
                Error::new(ErrorKind::Internal(format!("{} has no state for a message without a target", t.name)))
            })?;
            (no_target, result.finished_at, None)
        }
    })
}

/// The earliest `next_attempt_at` after `now` of the outbox's pending messages in an
/// environment; `environment` and `now` are the backend's placeholders for them. One seek
/// of the due index (environment, state, next_attempt_at).
pub(super) fn next_due_sql(outbox: Outbox, environment: &str, now: &str) -> String {
    let Table { name, state, pending, .. } = table(outbox);
    format!(
        "SELECT MIN(next_attempt_at) FROM {name}
         WHERE environment = {environment} AND {state} = '{pending}' AND next_attempt_at > {now}"
    )
}
