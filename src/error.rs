//! The one error type of the crate and its mapping to the spec's error codes.
//!
//! Every surface (Rust, wire layer, C, Python) reports failures through [`Error`]; the
//! mapping from a kind to the spec's `error_code` and HTTP status lives in
//! [`Error::error_code`] and [`Error::http_status`] and nowhere else.

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error from any coinorder operation.
///
/// Boxed so that `Result<T>` stays one pointer wide on the happy path.
#[derive(Debug)]
pub struct Error {
    kind: Box<ErrorKind>,
}

/// What went wrong. Each variant maps to exactly one spec error code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A request parameter is missing or breaks a rule (spec `PARAMETERS_MISSING`).
    #[error("{field}: {rule}")]
    InvalidParameter {
        /// The request field at fault.
        field: String,
        /// The rule it breaks, in words.
        rule: String,
    },
    /// A length or size limit of the spec §8 was exceeded (spec `API_LIMIT_EXCEEDED`).
    #[error("{field}: {rule}")]
    LimitExceeded {
        /// The request field at fault.
        field: String,
        /// The limit, in words.
        rule: String,
    },
    /// The key made more requests than its rate limit allows (spec `API_LIMIT_EXCEEDED`).
    #[error("API request limit is exceeded")]
    RateLimited,
    /// No key was sent, or the key is inactive (spec `AUTHENTICATION_FAILED`).
    #[error("{0}")]
    AuthenticationFailed(&'static str),
    /// The key is unknown, deleted, malformed or of the other environment (HTTP 401).
    #[error("API credentials are not valid")]
    Unauthorized,
    /// The order does not exist for this merchant and environment (spec `ORDER_NOT_VALID`).
    #[error("order not found")]
    OrderNotFound,
    /// The merchant_order_id is already used by a different order.
    #[error("merchant_order_id: {0:?} is already used by a different order")]
    DuplicateOrder(String),
    /// The state machine does not allow this change (DESIGN §6).
    #[error("order is {from}: {} is not allowed", trigger_words(*.trigger))]
    InvalidTransition {
        /// The order's state.
        from: crate::OrderStatus,
        /// What was attempted.
        trigger: crate::Trigger,
    },
    /// No payment with that transaction id exists in this environment.
    #[error("txid: no payment {0:?}")]
    PaymentNotFound(String),
    /// The payment is already confirmed or rejected, for good.
    #[error("txid: payment {txid:?} is already {state}")]
    PaymentSettled {
        /// The payment.
        txid: String,
        /// Its final state.
        state: crate::PaymentState,
    },
    /// Simulation exists in the sandbox only.
    #[error("simulation is available in the sandbox only")]
    SandboxOnly,
    /// No API key with that id exists.
    #[error("api key {0:?} not found")]
    KeyNotFound(String),
    /// The path or method is not part of the API (HTTP 404).
    #[error("Page or action not found")]
    NotFound,
    /// The database file was written by a newer coinorder.
    #[error("database schema version {found} is newer than this library supports ({supported}); upgrade coinorder")]
    SchemaTooNew {
        /// The `user_version` found in the file.
        found: i64,
        /// The newest version this library knows.
        supported: i64,
    },
    /// The service was configured with values it cannot use.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The storage layer failed.
    #[error("storage error: {0}")]
    Storage(#[source] rusqlite::Error),
    /// The key file holding the secret-encryption key could not be used.
    #[error("secret store error: {0}")]
    SecretStore(String),
}

impl Error {
    /// Creates an error of the given kind.
    pub fn new(kind: ErrorKind) -> Self {
        Error { kind: Box::new(kind) }
    }

    /// The kind of this error, for matching.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// A missing or invalid request parameter (`PARAMETERS_MISSING`).
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidParameter { field: field.into(), rule: rule.into() })
    }

    /// A limit of spec §8 exceeded (`API_LIMIT_EXCEEDED`).
    pub fn limit(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Error::new(ErrorKind::LimitExceeded { field: field.into(), rule: rule.into() })
    }

    /// The spec's `error_code` string for this error.
    pub fn error_code(&self) -> &'static str {
        match &*self.kind {
            ErrorKind::InvalidParameter { .. } => "PARAMETERS_MISSING",
            ErrorKind::LimitExceeded { .. } | ErrorKind::RateLimited => "API_LIMIT_EXCEEDED",
            ErrorKind::AuthenticationFailed(_) => "AUTHENTICATION_FAILED",
            ErrorKind::Unauthorized => "Unauthorized",
            ErrorKind::OrderNotFound => "ORDER_NOT_VALID",
            ErrorKind::DuplicateOrder(_) => "ORDER_DUPLICATE",
            ErrorKind::KeyNotFound(_) => "KEY_NOT_FOUND",
            ErrorKind::InvalidTransition { .. } | ErrorKind::PaymentSettled { .. } => "ORDER_STATE_INVALID",
            ErrorKind::PaymentNotFound(_) => "PAYMENT_NOT_FOUND",
            ErrorKind::SandboxOnly => "Not Found",
            ErrorKind::NotFound => "Not Found",
            ErrorKind::SchemaTooNew { .. }
            | ErrorKind::Config(_)
            | ErrorKind::Storage(_)
            | ErrorKind::SecretStore(_) => "InternalServerError",
        }
    }

    /// The HTTP status the wire layer answers with for this error.
    pub fn http_status(&self) -> u16 {
        match &*self.kind {
            ErrorKind::Unauthorized => 401,
            // DESIGN §5: 404 is only for a path or method that does not exist (and simulation
            // on a live service, which does not exist there); every other refusal is a 400.
            ErrorKind::NotFound | ErrorKind::SandboxOnly => 404,
            ErrorKind::SchemaTooNew { .. }
            | ErrorKind::Config(_)
            | ErrorKind::Storage(_)
            | ErrorKind::SecretStore(_) => 500,
            _ => 400,
        }
    }

    /// True for failures of the service itself rather than of the request; their text
    /// is never shown to an HTTP client.
    pub fn is_internal(&self) -> bool {
        self.http_status() == 500
    }

    /// The message shown to API clients: internal details are replaced by a generic text.
    pub fn public_message(&self) -> String {
        if self.is_internal() {
            "Server error".to_string()
        } else {
            self.to_string()
        }
    }
}

/// How a refused transition reads in an error message.
fn trigger_words(trigger: crate::Trigger) -> &'static str {
    use crate::Trigger;
    match trigger {
        Trigger::PaymentSeen => "a new payment",
        Trigger::PaymentsCover => "completing the payment",
        Trigger::ExpiredUnpaid | Trigger::ExpiredShort => "expiry",
        Trigger::PaymentRejected => "rejecting a payment",
        Trigger::Cancelled => "cancellation",
        Trigger::MarkedPaid => "mark_paid",
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.kind, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.kind)
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Error::new(kind)
    }
}

impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        Error::new(ErrorKind::Storage(err))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_route_or_sandbox_only_call_is_a_404() {
        assert_eq!(Error::new(ErrorKind::NotFound).http_status(), 404);
        assert_eq!(Error::new(ErrorKind::SandboxOnly).http_status(), 404);
        let key = Error::new(ErrorKind::KeyNotFound("key_x".into()));
        assert_eq!((key.http_status(), key.error_code()), (400, "KEY_NOT_FOUND"));
        assert_eq!(Error::new(ErrorKind::PaymentNotFound("tx".into())).http_status(), 400);
        assert_eq!(Error::new(ErrorKind::Unauthorized).http_status(), 401);
    }
}
