//! # coinorder
//!
//! An embeddable crypto-payment order engine: the `/v1/orders` order service of the
//! spec (orders priced in fiat and paid in crypto, invoices with quotes and expiry, API
//! keys, and the HTTP API) running in-process over one SQLite file.
//!
//! Two layers share one code path:
//! - the typed API on [`Service`]: [`Service::create_order`], [`Service::get_order`],
//!   [`Service::list_orders`], key management ([`Service::create_key`] and friends);
//! - the wire layer [`Service::handle`], which takes an HTTP-shaped [`WireRequest`] and
//!   returns the exact status and JSON body of the spec, for any HTTP server to mount
//!   (the bundled `Server`, behind the `server` feature, is one).
//!
//! ```no_run
//! use coinorder::{Config, CreateOrder, Environment, NewApiKey, Service, WireRequest};
//!
//! # fn main() -> coinorder::Result<()> {
//! let service = Service::open("coinorder.db", Config::new(Environment::Sandbox))?;
//! let key = service.create_key(NewApiKey { user_id: 42, environment: Environment::Sandbox, webhook_url: None })?;
//! let merchant = service.authenticate(Some(key.plain_key.expose()))?;
//! let order = service.create_order(&merchant, &CreateOrder {
//!     currency: "USD".into(),
//!     amount: "19.99".parse().map_err(|_| coinorder::Error::invalid("amount", "bad"))?,
//!     ..Default::default()
//! })?;
//! println!("pay at {}", order.payment_url);
//!
//! let response = service.handle(
//!     &WireRequest::new("GET", &format!("/v1/orders/{}", order.order.order.order_id))
//!         .header("x-api-key", key.plain_key.expose()),
//! );
//! assert_eq!(response.status, 200);
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod addresses;
pub mod chain;
mod config;
mod delivery;
mod environment;
mod error;
mod http_client;
mod ids;
mod keys;
mod lifecycle;
mod mail;
pub mod money;
mod orders;
mod page;
mod payments;
mod random;
mod rate_limit;
mod rates;
pub mod render;
mod secrets;
#[cfg(feature = "server")]
mod server;
mod service;
pub mod signature;
mod storage;
mod time;
mod wallets;
mod wire;
mod worker;

pub use addresses::{
    payment_uri, payment_uri_for, sandbox_address, AddressSource, DepositAddress, SANDBOX_ETHEREUM_CHAIN_ID,
};
pub use config::{
    unanswered_page_path, BitcoinWatch, Clock, Config, EthereumWatch, ManualClock, Observer, RateLimit, SmtpConfig,
    SqliteOptions, SystemClock, MAX_INVOICE_TTL_SECS,
};
pub use delivery::{DeliveryReport, DeliveryState, EventDelivery, WebhookAttempt, RESPONSE_EXCERPT_BYTES};
pub use environment::Environment;
pub use error::{Error, ErrorCode, ErrorKind, Result, StorageError};
pub use keys::{
    user_id_refused, ApiKey, CreatedApiKey, KeyStatus, Merchant, NewApiKey, RotatedSecret, DISPLAY_NAME_MAX_CHARS,
    MAX_SECRET_OVERLAP, USER_ID_RULE,
};
pub use lifecycle::{next_state, EventType, Trigger, TRANSITIONS};
pub use mail::{Email, EmailReport, EmailState};
/// The exact decimal type of every amount and rate (rust_decimal's), so a host needs no
/// version of its own.
pub use money::Decimal;
pub use orders::{
    callback_redirect_url, CreateOrder, CreatedOrder, HostOrderQuery, Invoice, ListOrders, Order, OrderPage,
    OrderStatus, OrderWithInvoice, DESCRIPTION_MAX_CHARS, HOST_LIST_MAX_LIMIT, LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT,
    TITLE_MAX_CHARS,
};
pub use payments::{
    Event, ExpiryReport, Payment, PaymentOutcome, PaymentState, Rate, SimulateAction, Simulation, EXPIRY_BATCH,
    EXPIRY_MIN_BATCH, EXPIRY_PAUSE,
};
pub use rates::RateSource;
pub use secrets::{redact_url, SecretString};
#[cfg(feature = "server")]
pub use server::{RequestLog, Server, ServerHandle, ServerLimits};
pub use service::{ChainWatchReport, EventFollower, Service, SignedWebhook, MISSING_FOR, MISSING_PASSES};
pub use storage::{Checkpoint, StoreTarget, SCHEMA_VERSION};
pub use time::Timestamp;
pub use wallets::Wallet;
pub use wire::{
    client_address, parse_create_order, parse_list_query, parse_simulate, JsonMembers, WireRequest, WireResponse,
    MAX_BODY_BYTES,
};
pub use worker::{ServiceWorkers, Worker, CHAIN_WATCH_INTERVAL, MAX_WORKER_BATCH, MAX_WORKER_INTERVAL};

/// Compiles the README's Rust example as a doctest, so the README cannot drift from the API.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
