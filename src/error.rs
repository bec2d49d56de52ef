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
    RateLimited {
        /// Whole seconds (at least 1) until the key may make a request again; the wire
        /// layer sends it as `Retry-After`.
        retry_after_secs: u64,
    },
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
    /// No API key with that id exists. A plain key given instead of an id is held as
    /// its hint (`test_…wxyz`), never in full.
    #[error("api key {0:?} not found{note}", note = crate::keys::plain_key_note(.0))]
    KeyNotFound(String),
    /// No event with that id exists in this environment (spec-style `EVENT_NOT_FOUND`).
    #[error("event_id: no event {0:?}")]
    EventNotFound(String),
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
    /// The database behind the service failed.
    #[error("storage error: {0}")]
    Storage(#[source] StorageError),
    /// A received webhook failed signature verification ([`crate::signature::verify`]).
    #[error("webhook signature: {0}")]
    Signature(#[from] crate::signature::VerifyError),
    /// A value read from the database is not one this library knows (an environment,
    /// status, state, event type or amount it cannot decode): the file was changed by
    /// hand, by another tool or by a newer library that did not bump the schema version.
    /// Reported rather than guessed, because a guess (say, reading an unknown environment
    /// as sandbox) would act on someone else's data. A 500 whose text is not shown to
    /// clients: it names tables and stored values.
    #[error("stored data could not be read: {0}")]
    Corrupt(String),
    /// A callback the host supplied (an [`AddressSource`](crate::AddressSource) or
    /// [`RateSource`](crate::RateSource)) failed. A 500 whose text is not shown to
    /// clients: it is whatever the host's wallet or price feed said.
    #[error("host callback failed: {0}")]
    HostCallback(String),
    /// A bug inside coinorder (for example a panic caught at a binding's boundary).
    #[error("internal error: {0}")]
    Internal(String),
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

    /// The stable code of this error: the spec's `error_code` string
    /// ([`ErrorCode::as_str`]), its HTTP status and a number for the C ABI.
    pub fn code(&self) -> ErrorCode {
        match &*self.kind {
            ErrorKind::InvalidParameter { .. } => ErrorCode::ParametersMissing,
            ErrorKind::LimitExceeded { .. } | ErrorKind::RateLimited { .. } => ErrorCode::ApiLimitExceeded,
            ErrorKind::AuthenticationFailed(_) => ErrorCode::AuthenticationFailed,
            ErrorKind::Unauthorized => ErrorCode::Unauthorized,
            ErrorKind::OrderNotFound => ErrorCode::OrderNotValid,
            ErrorKind::DuplicateOrder(_) => ErrorCode::OrderDuplicate,
            ErrorKind::KeyNotFound(_) => ErrorCode::KeyNotFound,
            ErrorKind::EventNotFound(_) => ErrorCode::EventNotFound,
            ErrorKind::InvalidTransition { .. } | ErrorKind::PaymentSettled { .. } => ErrorCode::OrderStateInvalid,
            ErrorKind::PaymentNotFound(_) => ErrorCode::PaymentNotFound,
            ErrorKind::Signature(_) => ErrorCode::SignatureInvalid,
            // Simulation does not exist on a live service, like an unknown route.
            ErrorKind::SandboxOnly | ErrorKind::NotFound => ErrorCode::NotFound,
            // Lock contention outlasting the busy timeout: the request did nothing and may
            // simply be sent again, which a 500 would not tell the client.
            ErrorKind::Storage(storage) if storage.is_busy() => ErrorCode::ServiceUnavailable,
            ErrorKind::SchemaTooNew { .. }
            | ErrorKind::Config(_)
            | ErrorKind::Storage(_)
            | ErrorKind::Corrupt(_)
            | ErrorKind::HostCallback(_)
            | ErrorKind::Internal(_)
            | ErrorKind::SecretStore(_) => ErrorCode::InternalServerError,
        }
    }

    /// The spec's `error_code` string for this error.
    pub fn error_code(&self) -> &'static str {
        self.code().as_str()
    }

    /// The HTTP status the wire layer answers with for this error.
    pub fn http_status(&self) -> u16 {
        self.code().http_status()
    }

    /// How many seconds the caller should wait before making the refused call again:
    /// the key's rate limit, or a database busy past its timeout; `None` when waiting
    /// would not help. The wire layer sends it as `Retry-After`.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self.kind() {
            ErrorKind::RateLimited { retry_after_secs } => Some(*retry_after_secs),
            _ => self.code().retry_after_secs(),
        }
    }

    /// True for failures of the service itself rather than of the request; their text
    /// is never shown to an HTTP client.
    pub fn is_internal(&self) -> bool {
        self.http_status() >= 500
    }

    /// The message shown to API clients: internal details are replaced by a generic text.
    pub fn public_message(&self) -> String {
        if self.code() == ErrorCode::ServiceUnavailable {
            ErrorCode::ServiceUnavailable.default_message().to_string()
        } else if self.is_internal() {
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

/// So `?` on [`crate::signature::verify`] works in a function returning [`Result`].
impl From<crate::signature::VerifyError> for Error {
    fn from(error: crate::signature::VerifyError) -> Self {
        Error::new(ErrorKind::Signature(error))
    }
}

/// The stable identity of an error, shared by every surface: the spec's `error_code`
/// string, the HTTP status and a number that never changes meaning (the C ABI's
/// `coinorder_error_number`). A retired number is never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `PARAMETERS_MISSING`: a request field is missing or breaks a rule (400).
    ParametersMissing = 1,
    /// `API_LIMIT_EXCEEDED`: a size limit or the key's rate limit was exceeded (400).
    ApiLimitExceeded = 2,
    /// `AUTHENTICATION_FAILED`: no key was sent, or the key is inactive (400).
    AuthenticationFailed = 3,
    /// `Unauthorized`: the key is unknown, deleted, malformed or of the other environment (401).
    Unauthorized = 4,
    /// `ORDER_NOT_VALID`: no such order for this merchant and environment (400).
    OrderNotValid = 5,
    /// `ORDER_DUPLICATE`: the merchant_order_id is used by a different order (400).
    OrderDuplicate = 6,
    /// `ORDER_STATE_INVALID`: the state machine refuses the change (400).
    OrderStateInvalid = 7,
    /// `KEY_NOT_FOUND`: no API key with that id (400).
    KeyNotFound = 8,
    /// `PAYMENT_NOT_FOUND`: no payment with that transaction id (400).
    PaymentNotFound = 9,
    /// `Not Found`: no such path or method, or simulation on a live service (404).
    NotFound = 10,
    /// `InternalServerError`: the service itself failed; details are not shown to clients (500).
    InternalServerError = 11,
    /// `SIGNATURE_INVALID`: a received webhook failed verification (coinorder's own code,
    /// not the spec's: only webhook receivers see it) (400).
    SignatureInvalid = 12,
    /// `ServiceUnavailable`: the service is overloaded or its database stayed locked past
    /// the busy timeout; nothing was done and the request may be sent again after the
    /// `Retry-After` seconds (503). coinorder's own code, like `SIGNATURE_INVALID`.
    ServiceUnavailable = 13,
    /// `EVENT_NOT_FOUND`: no event with that id in this environment (coinorder's own code,
    /// like `SIGNATURE_INVALID`: only the host's event calls return it) (400).
    EventNotFound = 14,
}

impl ErrorCode {
    /// Every code, in numeric order.
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::ParametersMissing,
        ErrorCode::ApiLimitExceeded,
        ErrorCode::AuthenticationFailed,
        ErrorCode::Unauthorized,
        ErrorCode::OrderNotValid,
        ErrorCode::OrderDuplicate,
        ErrorCode::OrderStateInvalid,
        ErrorCode::KeyNotFound,
        ErrorCode::PaymentNotFound,
        ErrorCode::NotFound,
        ErrorCode::InternalServerError,
        ErrorCode::SignatureInvalid,
        ErrorCode::ServiceUnavailable,
        ErrorCode::EventNotFound,
    ];

    /// The spec's `error_code` string (DESIGN §5).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ParametersMissing => "PARAMETERS_MISSING",
            ErrorCode::ApiLimitExceeded => "API_LIMIT_EXCEEDED",
            ErrorCode::AuthenticationFailed => "AUTHENTICATION_FAILED",
            ErrorCode::Unauthorized => "Unauthorized",
            ErrorCode::OrderNotValid => "ORDER_NOT_VALID",
            ErrorCode::OrderDuplicate => "ORDER_DUPLICATE",
            ErrorCode::OrderStateInvalid => "ORDER_STATE_INVALID",
            ErrorCode::KeyNotFound => "KEY_NOT_FOUND",
            ErrorCode::PaymentNotFound => "PAYMENT_NOT_FOUND",
            ErrorCode::NotFound => "Not Found",
            ErrorCode::InternalServerError => "InternalServerError",
            ErrorCode::SignatureInvalid => "SIGNATURE_INVALID",
            ErrorCode::ServiceUnavailable => "ServiceUnavailable",
            ErrorCode::EventNotFound => "EVENT_NOT_FOUND",
        }
    }

    /// The HTTP status for this code. DESIGN §5: every refusal is a 400 except an unknown
    /// key (401), a path or method that does not exist (404) and the service's own
    /// failures (500); coinorder adds 503 for a moment of overload (retry later).
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::Unauthorized => 401,
            ErrorCode::NotFound => 404,
            ErrorCode::InternalServerError => 500,
            ErrorCode::ServiceUnavailable => 503,
            _ => 400,
        }
    }

    /// What a client is told for this code when the detail must stay inside (the codes
    /// of the service's own failures), and a plain description otherwise.
    pub fn default_message(self) -> &'static str {
        match self {
            ErrorCode::ServiceUnavailable => "Service temporarily unavailable; retry after the Retry-After seconds",
            ErrorCode::InternalServerError => "Server error",
            ErrorCode::NotFound => "Page or action not found",
            _ => self.as_str(),
        }
    }

    /// How many seconds a client should wait before sending a refused request again, for
    /// the codes that mean "not now" rather than "not this" (`ServiceUnavailable`).
    pub fn retry_after_secs(self) -> Option<u64> {
        match self {
            ErrorCode::ServiceUnavailable => Some(1),
            _ => None,
        }
    }

    /// The stable number of this code (never 0, never reused).
    pub fn number(self) -> u32 {
        self as u32
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of the database behind the service.
///
/// Opaque on purpose: no database crate's error type is part of coinorder's public API,
/// so the backends (SQLite, PostgreSQL) can change without breaking callers.
/// The underlying error stays reachable through [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct StorageError {
    message: String,
    busy: bool,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl StorageError {
    /// Wraps a backend's error; `busy` marks lock contention that a retry may cure.
    pub(crate) fn new(busy: bool, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        StorageError { message: with_causes(&source), busy, source: Some(Box::new(source)) }
    }

    /// The same error with `hint`, what to check, after its message.
    pub(crate) fn with_hint(mut self, hint: &str) -> Self {
        self.message = format!("{} ({hint})", self.message);
        self
    }

    /// True when the database was busy or locked by another connection.
    pub fn is_busy(&self) -> bool {
        self.busy
    }
}

/// An error and its causes on one line (`db error: ERROR: canceling statement due to
/// lock timeout`): some database crates' own text names only the outermost layer.
pub(crate) fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let inner_text = inner.to_string();
        if !text.ends_with(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        cause = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_number_string_and_consistent_status() {
        let mut numbers: Vec<u32> = ErrorCode::ALL.iter().map(|c| c.number()).collect();
        numbers.dedup();
        assert_eq!(numbers, (1..=14).collect::<Vec<u32>>());
        let mut strings: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        strings.sort_unstable();
        strings.dedup();
        assert_eq!(strings.len(), ErrorCode::ALL.len());
        let duplicate = Error::new(ErrorKind::DuplicateOrder("cart-1".into()));
        assert_eq!(
            (duplicate.code(), duplicate.code().number(), duplicate.http_status()),
            (ErrorCode::OrderDuplicate, 6, 400)
        );
        let internal = Error::new(ErrorKind::Config("x".into()));
        assert_eq!(
            (internal.code().number(), internal.http_status(), internal.error_code()),
            (11, 500, "InternalServerError")
        );
    }

    #[test]
    fn a_busy_database_is_a_503_that_hides_the_detail_and_asks_for_a_retry() {
        let busy = Error::new(ErrorKind::Storage(StorageError::new(true, std::fmt::Error)));
        assert_eq!((busy.http_status(), busy.error_code()), (503, "ServiceUnavailable"));
        assert_eq!(busy.code().retry_after_secs(), Some(1));
        assert!(busy.is_internal());
        assert!(busy.public_message().contains("Retry-After"), "{}", busy.public_message());
        let broken = Error::new(ErrorKind::Storage(StorageError::new(false, std::fmt::Error)));
        assert_eq!((broken.http_status(), broken.public_message().as_str()), (500, "Server error"));
        assert_eq!(broken.code().retry_after_secs(), None);
    }

    #[test]
    fn only_a_missing_route_or_sandbox_only_call_is_a_404() {
        assert_eq!(Error::new(ErrorKind::NotFound).http_status(), 404);
        assert_eq!(Error::new(ErrorKind::SandboxOnly).http_status(), 404);
        let key = Error::new(ErrorKind::KeyNotFound("key_x".into()));
        assert_eq!((key.http_status(), key.error_code()), (400, "KEY_NOT_FOUND"));
        assert_eq!(Error::new(ErrorKind::PaymentNotFound("tx".into())).http_status(), 400);
        assert_eq!(Error::new(ErrorKind::Unauthorized).http_status(), 401);
        let event = Error::new(ErrorKind::EventNotFound("msg_x".into()));
        assert_eq!((event.http_status(), event.error_code(), event.code().number()), (400, "EVENT_NOT_FOUND", 14));
        assert_eq!(event.public_message(), "event_id: no event \"msg_x\"");
    }

    #[test]
    fn unreadable_data_and_host_callback_failures_are_500s_that_hide_their_detail() {
        let corrupt = Error::new(ErrorKind::Corrupt("orders.environment: unknown value \"staging\"".into()));
        assert_eq!((corrupt.code(), corrupt.http_status()), (ErrorCode::InternalServerError, 500));
        assert!(corrupt.to_string().starts_with("stored data could not be read: "), "{corrupt}");
        assert_eq!(corrupt.public_message(), "Server error");
        assert_eq!(corrupt.code().retry_after_secs(), None);
        let callback = Error::new(ErrorKind::HostCallback("wallet offline".into()));
        assert_eq!((callback.code(), callback.http_status()), (ErrorCode::InternalServerError, 500));
        assert_eq!(callback.public_message(), "Server error");
    }
}
