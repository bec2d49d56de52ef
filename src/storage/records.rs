//! The records the typed queries take and return beyond the crate's domain types: rows
//! with columns only the library itself may see, and the outbox's bookkeeping. Both
//! backends build the same ones, defined once here.

use crate::delivery::{DeliveryState, Outbox, Settled};
use crate::keys::ApiKey;
use crate::time::Timestamp;

/// What an earlier Create Order with the same merchant reference stored.
pub(crate) struct PriorCreate {
    /// The fingerprint of the request that created the order.
    pub request_hash: Vec<u8>,
    /// Its 201 body; empty when that request sent no `merchant_order_id`, whose
    /// fingerprint no later request can match (`service::replayable_body`).
    pub create_response: String,
}

/// What signing a key's webhooks needs, of a live or a deleted key: its webhook URL, its
/// sealed secret, and the sealed secret it replaced with the moment that one stops
/// signing too (epoch milliseconds), while a rotation keeps it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SigningKey {
    /// The key's webhook URL, if it has one.
    pub webhook_url: Option<String>,
    /// The current secret, sealed.
    pub sealed_secret: String,
    /// The previous secret, sealed, and until when it signs as well.
    pub previous: Option<(String, i64)>,
}

/// What authenticating a request needs of a stored key, and nothing more: read on every
/// API request, so it leaves out the sealed secret, hint, URL and times.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeyCredential {
    pub id: String,
    pub user_id: i64,
    pub environment: crate::Environment,
    pub status: crate::keys::KeyStatus,
    pub key_hash: Vec<u8>,
}

/// A stored key with the columns only the library itself may see.
pub(crate) struct KeyRow {
    pub key: ApiKey,
    pub key_hash: Vec<u8>,
    pub webhook_secret_enc: String,
}

/// An event leased to this worker for one attempt.
pub(crate) struct ClaimedEvent {
    pub event_id: String,
    pub payload: String,
    /// Attempts including this one.
    pub attempt: i64,
    pub order_webhook_url: Option<String>,
    pub key_id: String,
}

/// How one leased attempt ended, to write back.
pub(crate) struct AttemptResult<'a> {
    pub outbox: Outbox,
    pub id: &'a str,
    pub lease_token: &'a str,
    pub settled: Settled,
    pub finished_at: Timestamp,
}

/// Delivery columns of one event, for listings.
pub(crate) struct DeliveryRow {
    pub event_id: String,
    pub state: DeliveryState,
    pub attempts: i64,
    pub next_attempt_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
    pub last_error: Option<String>,
}

/// A watch-only wallet as stored, with the next index of its key.
pub(crate) struct WalletRow {
    pub coin: String,
    pub descriptor: String,
    pub account_id: String,
    /// The index the next invoice of any coin on this key gets.
    pub next_index: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// An invoice with a derived address that the chain watcher looks at.
pub(crate) struct WatchedInvoice {
    pub order_id: String,
    pub currency: String,
    pub address: String,
    /// When the order (and its address) was made, epoch milliseconds.
    pub created_at_ms: i64,
}
