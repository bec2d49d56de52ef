//! `coinorder`: manage API keys, exchange rates and orders, simulate sandbox payments,
//! and run the order service's HTTP API locally.
//!
//! Every command works on one SQLite database (`--db`, `COINORDER_DB`, default
//! `./coinorder.db`) and prints JSON on stdout; failures print `error: <message>` on
//! stderr and exit with status 1 (2 for a malformed command line). Only `keys create`,
//! `serve` and `rates set` create a missing database; the others refuse a path where
//! there is none, so a mistyped `--db` never leaves an empty database behind.
//!
//! `serve`, `webhooks` and `emails` also read a TOML settings file (`--config`, see
//! `coinorder.example.toml`); flags given on the command line win over it.

use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use coinorder::money::Decimal;
use coinorder::render;
use coinorder::{
    redact_url, Config, DeliveryState, Email, EmailReport, EmailState, Environment, ErrorKind, EventDelivery,
    EventType, HostOrderQuery, Merchant, NewApiKey, OrderStatus, RateLimit, Server, ServerLimits, Service,
    SimulateAction, SmtpConfig, StoreTarget, Timestamp, HOST_LIST_MAX_LIMIT,
};
use serde::Deserialize;
use serde_json::{json, Value};

/// mimalloc rather than the C library's allocator: `serve` allocates and frees on many
/// threads for every request, where glibc's took about 16 % of its CPU on list pages (README,
/// "Performance"). Only this binary: the library keeps its host's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How often `serve` moves orders whose quote ran out.
const EXPIRY_INTERVAL: Duration = Duration::from_secs(1);

/// How much longer than the requests' shutdown grace `serve` waits for its background
/// work to stop before it exits anyway.
const BACKGROUND_STOP_GRACE: Duration = Duration::from_secs(5);
/// How often `serve` looks for new webhooks and e-mails (a retry due sooner is sent when due).
const DELIVERY_INTERVAL: Duration = Duration::from_secs(1);
/// How often `serve` copies SQLite's write-ahead log into the database file, so that
/// requests never do it.
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(500);
/// How many webhooks (and e-mails) `serve` sends per batch.
const DELIVERY_BATCH: usize = 100;
/// How often `serve` looks for new events to log.
const EVENT_LOG_INTERVAL: Duration = Duration::from_millis(500);
/// The sender of payment-link e-mails unless `--smtp-from` says otherwise.
const DEFAULT_SMTP_FROM: &str = SmtpConfig::DEFAULT_FROM;
const DEFAULT_ADDR: &str = "127.0.0.1:8080";
const DEFAULT_THREADS: u16 = 8;
const DEFAULT_INVOICE_TTL: u64 = 1800;
const MAX_INVOICE_TTL: u64 = 31_536_000;
const MAX_WEBHOOK_TIMEOUT: u64 = 600;

/// Crypto-payment order service: API keys, rates, orders, sandbox simulation and a local
/// HTTP server for `/v1/orders` and the hosted payment page.
#[derive(Debug, Parser)]
#[command(name = "coinorder", version, propagate_version = true)]
#[command(after_help = "Examples:
  coinorder keys create --user-id 42
  coinorder keys list --format table
  coinorder orders list --status PAID --since 2026-11-01T00:00:00Z --format table
  coinorder sandbox trigger order.paid
  coinorder sandbox advance --minutes 30
  coinorder webhooks list --state failed --format table
  coinorder rates set --env live BTC USD 64250.5 --valid-until 2026-12-01T00:00:00Z
  coinorder serve --env sandbox --addr 127.0.0.1:8080
  coinorder sandbox pay 7d1f0c9e-8a53-4a57-9d61-3f0f3c2b8e11 --unconfirmed
  coinorder sandbox confirm sandbox_tx_0123456789abcdef0123456789abcdef
  coinorder payments record --env live 7d1f0c9e-8a53-4a57-9d61-3f0f3c2b8e11 \\
      4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b 0.0025 --unconfirmed
  coinorder payments confirm --env live 4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b
  coinorder serve --env sandbox --smtp-url smtp://127.0.0.1:2525
  coinorder serve --config /etc/coinorder.toml
  coinorder webhooks list --order 7d1f0c9e-8a53-4a57-9d61-3f0f3c2b8e11
  coinorder webhooks deliver --config /etc/coinorder.toml
  coinorder emails list --env live --limit 10
  COINORDER_DB=/var/lib/coinorder/orders.db coinorder serve --env live")]
struct Cli {
    /// SQLite database file, or a PostgreSQL URL (`postgres://user@host:5432/db`; for
    /// TLS to another host `?sslmode=verify-full&sslrootcert=/path/ca.pem`) for several
    /// processes and hosts on one database.
    /// `keys create`, `serve`, `rates set` and `wallets set` create a SQLite file (with its
    /// `<PATH>.key` secret file) if missing; every other command fails when it does not exist.
    ///
    /// Accepted before or after the subcommand.
    #[arg(long, global = true, value_name = "PATH|URL", env = "COINORDER_DB", default_value = "./coinorder.db")]
    db: PathBuf,

    /// The key file that seals webhook secrets (base64 of 32 random bytes). Default for
    /// SQLite: `<PATH>.key`, created on first use. Required for PostgreSQL, where every
    /// host must use the same file: create it once with
    /// `head -c 32 /dev/urandom | base64 > FILE` and copy it to each host.
    #[arg(long, global = true, value_name = "FILE", env = "COINORDER_SECRET_KEY_FILE")]
    secret_key_file: Option<PathBuf>,

    /// The environment every command works in: sandbox or live (a key's, an order's, a
    /// rate's, `serve`'s). Default: `env` in the [server] section of --config, else
    /// sandbox. Accepted before or after the subcommand.
    #[arg(long, global = true, value_name = "ENV", env = "COINORDER_ENV")]
    env: Option<EnvArg>,

    /// TOML settings file (see coinorder.example.toml): the database, the environment,
    /// `serve`'s settings, webhook and SMTP settings. Flags win over it; unknown keys are
    /// an error. Accepted before or after the subcommand.
    #[arg(long, global = true, value_name = "FILE", env = "COINORDER_CONFIG")]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Manage API keys (the spec's Merchant Portal).
    ///
    /// A key belongs to one merchant account (`--user-id`) and one environment. Plain
    /// keys are shown once, by `keys create`; only their hashes are stored.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Serve the HTTP API (`POST /v1/orders`, `GET /v1/orders`, `GET /v1/orders/<id>`,
    /// sandbox `POST /v1/orders/<id>/simulate`) and the hosted payment page (`/pay`).
    ///
    /// Prints `coinorder listening on http://<addr> (<env>)` once listening, then serves
    /// until interrupted (Ctrl-C or SIGTERM), answers the requests in flight (waiting up
    /// to 10 s; background work 5 s more) and exits 0. A second interrupt exits at once,
    /// with status 1.
    ///
    /// While serving, a background worker checks every second for invoices whose quote
    /// ran out: NEW orders become EXPIRED, PENDING orders whose confirmed payments fall
    /// short (with none awaiting confirmation) become FAILED. Another sends due webhooks
    /// (order events, signed per Standard Webhooks, retried on failure) and payment-link
    /// e-mails (with --smtp-url; without it they stay pending) every second, up to 100 at
    /// a time, at once again while more are due. A third watches the chains every 15 s
    /// for payments to invoices' derived addresses (with --esplora-url /
    /// --ethereum-rpc-url or [bitcoin] / [ethereum] in --config). All stop on shutdown.
    ///
    /// In live it refuses to start while a coin it accepts has no watch-only wallet
    /// (`coinorder wallets set`): customers would get orders with no deposit address.
    ///
    /// On Unix it refuses to start when the database or its key file is readable or
    /// writable by group or others (see --allow-open-permissions).
    ///
    /// Settings come from flags, else from the --config file, else the defaults shown.
    Serve(ServeArgs),
    /// Manage the exchange-rate table used to quote orders (fiat units per one coin).
    ///
    /// Live has no rates until set here (or by a rate source): creating a live order for
    /// a pair without a rate fails with PARAMETERS_MISSING. The sandbox has fixed,
    /// obviously fake test rates; a rate set here overrides them. Rates take effect at
    /// once, also in a running `serve`.
    #[command(subcommand)]
    Rates(RatesCommand),
    /// Simulate payments on sandbox orders (spec §1); live orders and payments are not
    /// visible to these commands (record real ones with `payments`).
    ///
    /// Each command prints the order with its invoice as JSON after the step.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Feed payments seen on chain into orders, as the host's chain watcher: for hosts
    /// that watch the chain from a script or cron job rather than through the Rust API
    /// (`record_payment`, `confirm_payment`, `reject_payment`).
    ///
    /// Works in live and sandbox (--env), on that environment's orders only. Every
    /// command is idempotent by transaction id: repeating one changes nothing and
    /// prints `"duplicate": true`. Each prints the `txid`, the payment, the events it
    /// emitted (which become webhooks) and the order with its invoice after the step.
    #[command(subcommand)]
    Payments(PaymentsCommand),
    /// Inspect and settle orders by hand, as the host (any merchant's orders).
    #[command(subcommand)]
    Orders(OrdersCommand),
    /// Inspect webhook deliveries of order events, redeliver one, or deliver what is due.
    ///
    /// Every state change of an order is an event, sent as a signed webhook to the
    /// order's `webhook_url`, else its key's. `serve` delivers them in the background;
    /// these commands work on the database directly (also while `serve` runs).
    #[command(subcommand)]
    Webhooks(WebhooksCommand),
    /// Inspect payment-link e-mails (written for orders with `customer_email`) and send
    /// the due ones, e.g. from cron on a host that runs no `serve`.
    #[command(subcommand)]
    Emails(EmailsCommand),
    /// Watch order events as they happen.
    #[command(subcommand)]
    Events(EventsCommand),
    /// Manage watch-only wallets: the extended public keys each new invoice's deposit
    /// address is derived from (one fresh address per invoice, never reused).
    ///
    /// Only public keys are accepted; a private key is refused and never stored. BTC
    /// takes a BIP84 `zpub`/`xpub` account key or a `wpkh([fp/84'/0'/0']xpub.../0/*)`
    /// descriptor (`vpub`/`tpub` in the sandbox); ETH, USDT and USDC take the account
    /// `xpub` at m/44'/60'/0' (addresses m/44'/60'/0'/0/i). Check the first address with
    /// `wallets show-address` against your own wallet before taking payments. `serve`
    /// watches the chains for payments to these addresses ([bitcoin] and [ethereum] in
    /// the settings file).
    #[command(subcommand)]
    Wallets(WalletsCommand),
}

#[derive(Debug, Subcommand)]
enum WalletsCommand {
    /// Set (or replace) the wallet of COIN and print it with its first address.
    Set {
        /// BTC, ETH, USDT or USDC (case-insensitive).
        coin: String,
        /// The extended public key or output descriptor (see `coinorder wallets --help`).
        key: String,
    },
    /// List the environment's wallets with their next derivation index.
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print the addresses of COIN's wallet from --index on, to compare with the
    /// receive addresses your own wallet software shows.
    ShowAddress {
        /// BTC, ETH, USDT or USDC (case-insensitive).
        coin: String,
        /// The first derivation index shown.
        #[arg(long, default_value_t = 0)]
        index: u32,
        /// How many addresses to show, 1 to 100.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
        count: u32,
    },
    /// Remove COIN's wallet: new invoices in COIN get no derived address. Invoices made
    /// before keep theirs and are still watched; setting the same key again goes on from
    /// the index reached, so no address is handed out twice.
    Remove {
        /// BTC, ETH, USDT or USDC (case-insensitive).
        coin: String,
    },
}

#[derive(Debug, Subcommand)]
enum EventsCommand {
    /// Follow the environment's order events as they are written (by `serve`, the
    /// library or other CLI commands) and print each, until Ctrl-C: one JSON object per
    /// line, or a line of text with --format table.
    ///
    /// With --forward-to, also POST each event to that URL exactly as a webhook delivery
    /// would (Standard Webhooks headers, signed with the webhook secret of the order's
    /// key), so a receiver under development gets real, verifiable events; the answer's
    /// status goes to stderr. This is a copy: the event's own delivery is unaffected.
    Tail {
        /// Where to POST each event (an http or https URL, e.g.
        /// http://127.0.0.1:3000/webhooks).
        #[arg(long, value_name = "URL", value_parser = parse_forward_url)]
        forward_to: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// How a listing command prints its rows.
#[derive(Debug, Args)]
struct OutputArgs {
    /// `json` (the default, for scripts: an array of objects; `events tail`, which
    /// never ends, one object per line) or `table` (aligned columns for people).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = Format::Json)]
    format: Format,
}

/// `--format` of the listing commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// An array of JSON objects (`events tail`: one object per line).
    Json,
    /// Aligned columns, one row per line, with a header.
    Table,
}

/// A command-line value parser for one of `names`, turned into its value by `parse`:
/// `--help` and errors list the names (clap's possible values), and the core's own
/// `as_str`/`parse` stay the one definition of each name.
fn one_of<T: Clone + Send + Sync + 'static>(
    names: impl IntoIterator<Item = &'static str>,
    parse: fn(&str) -> Option<T>,
) -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names)
        .try_map(move |name: String| parse(&name).ok_or_else(|| format!("unknown value {name:?}")))
}

/// `--status`: an order state (`NEW`, `PAID`...).
fn order_status() -> impl clap::builder::TypedValueParser<Value = OrderStatus> {
    one_of(OrderStatus::ALL.map(OrderStatus::as_str), OrderStatus::parse)
}

/// `--type` and `sandbox trigger`: an event type (`order.paid`...).
fn event_type() -> impl clap::builder::TypedValueParser<Value = EventType> {
    one_of(EventType::ALL.map(EventType::as_str), EventType::parse)
}

/// `--state`: a webhook delivery state (`pending`, `delivered`, `failed`, `no_target`).
fn delivery_state() -> impl clap::builder::TypedValueParser<Value = DeliveryState> {
    one_of(DeliveryState::ALL.map(DeliveryState::as_str), DeliveryState::parse)
}

/// How webhooks and e-mails are sent (`serve`, `webhooks deliver`, `emails send`).
#[derive(Debug, Args)]
struct SendArgs {
    /// SMTP server for payment-link e-mails: `smtp://HOST:PORT` (plain),
    /// `smtp://HOST:PORT?tls=opportunistic` (STARTTLS when offered),
    /// `smtp://HOST:PORT?tls=required` (STARTTLS required) or `smtps://HOST:PORT` (TLS
    /// from the start); credentials as `smtp://USER:PASSWORD@HOST:PORT` (percent-encoded).
    /// The password is never printed. Without it (and without [smtp] url in --config)
    /// e-mails stay pending.
    #[arg(long, value_name = "URL")]
    smtp_url: Option<String>,
    /// Sender of payment-link e-mails. Default: `coinorder <noreply@localhost>`.
    #[arg(long, value_name = "ADDRESS")]
    smtp_from: Option<String>,
    /// How long one webhook attempt (or SMTP exchange) may take, in seconds. Default 15.
    #[arg(long, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..=MAX_WEBHOOK_TIMEOUT))]
    webhook_timeout: Option<u64>,
    /// Let live send webhooks to loopback, private and link-local addresses (refused by
    /// default; the sandbox always allows them).
    #[arg(long)]
    allow_private_webhooks: bool,
}

#[derive(Debug, Subcommand)]
enum WebhooksCommand {
    /// List events with their delivery, one per line: time, event id, type, order,
    /// state (pending, delivered, failed, no_target), attempts and the last attempt's
    /// HTTP status. With --full, also the next attempt, the last error, every attempt
    /// logged (time, URL, status, latency, start of the response) and the exact payload.
    /// Secrets are never shown.
    ///
    /// Without --order: the events of the orders with the most recent events.
    List {
        /// Only this order's events (`order_id`), by sequence.
        #[arg(long, value_name = "ID")]
        order: Option<String>,
        /// Only events of this type.
        #[arg(long = "type", value_name = "TYPE", value_parser = event_type())]
        event_type: Option<EventType>,
        /// Only events in this delivery state.
        #[arg(long, value_name = "STATE", value_parser = delivery_state())]
        state: Option<DeliveryState>,
        /// Every detail: attempt log, payload, next attempt, last error.
        #[arg(long)]
        full: bool,
        /// How many orders' events to list (without --order).
        #[arg(long, value_name = "N", default_value_t = 20,
              value_parser = clap::value_parser!(u64).range(1..=10_000))]
        limit: u64,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Queue an event for delivery again, due now, with a fresh retry schedule (same
    /// `webhook-id` and body), and print it. `serve` sends it within a second; without
    /// `serve`, run `webhooks deliver`. An attempt already in flight finishes first; the
    /// event is then sent again.
    Redeliver {
        /// The event's id (`msg_...`), as shown by `webhooks list`.
        event_id: String,
    },
    /// Send the due webhooks and payment-link e-mails once, and print what happened
    /// (`webhooks`: attempted, delivered, retrying, failed, no_target; `emails`:
    /// attempted, sent, retrying, failed). Failures are retried on schedule by the next
    /// run.
    Deliver {
        #[command(flatten)]
        send: SendArgs,
        /// Most webhooks, and most e-mails, to send in this run.
        #[arg(long, value_name = "N", default_value_t = 100,
              value_parser = clap::value_parser!(u64).range(1..=100_000))]
        limit: u64,
    },
}

#[derive(Debug, Subcommand)]
enum EmailsCommand {
    /// List payment-link e-mails, newest first: recipient, subject, bodies, state
    /// (pending, sent, failed), attempts, next attempt and last error.
    List {
        /// Only this order's e-mail (`order_id`).
        #[arg(long, value_name = "ID")]
        order: Option<String>,
        /// Most e-mails to list.
        #[arg(long, value_name = "N", default_value_t = 50,
              value_parser = clap::value_parser!(u64).range(1..=10_000))]
        limit: u64,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Send the due payment-link e-mails once over SMTP (--smtp-url or [smtp] url in
    /// --config) and print what happened. Failures are retried on schedule by the next
    /// run.
    Send {
        #[command(flatten)]
        send: SendArgs,
        /// Most e-mails to send in this run.
        #[arg(long, value_name = "N", default_value_t = 100,
              value_parser = clap::value_parser!(u64).range(1..=100_000))]
        limit: u64,
    },
}

#[derive(Debug, Subcommand)]
enum RatesCommand {
    /// Set or replace the rate of CRYPTO priced in FIAT, and print it.
    Set {
        /// Coin code, e.g. BTC, ETH, USDT (case-insensitive).
        crypto: String,
        /// ISO 4217 fiat code, e.g. USD, EUR, NGN (case-insensitive).
        fiat: String,
        /// Fiat units per one coin, an exact decimal (e.g. 64250.5); never rounded.
        #[arg(value_parser = parse_rate)]
        rate: Decimal,
        /// Stop using the rate after this time (RFC 3339 / ISO 8601 with a time zone,
        /// e.g. 2026-12-01T00:00:00Z). Default: valid until replaced or deleted.
        #[arg(long, value_name = "ISO8601", value_parser = parse_timestamp)]
        valid_until: Option<Timestamp>,
    },
    /// List the rates set for the environment (built-in sandbox rates are not listed).
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete the rate of CRYPTO priced in FIAT (in sandbox the built-in rate applies again).
    Delete {
        /// Coin code, e.g. BTC (case-insensitive).
        crypto: String,
        /// ISO 4217 fiat code, e.g. USD (case-insensitive).
        fiat: String,
    },
}

#[derive(Debug, Subcommand)]
enum SandboxCommand {
    /// Pay a sandbox order as its customer would, and print the payment's `txid`, the
    /// payment and the order.
    ///
    /// Without --amount, pays what is still due (in the invoice's crypto currency). A
    /// confirmed payment covering the invoice makes the order PAID; with --unconfirmed
    /// the order is PENDING until `sandbox confirm <txid>` or `sandbox reject <txid>`.
    /// A payment after expiry is recorded as late (`order.paid_late`).
    Pay {
        /// The order's id (`order_id`).
        order_id: String,
        /// Crypto amount paid, an exact decimal in the invoice's currency. Default: what
        /// is still due.
        #[arg(long, value_name = "X", value_parser = parse_amount)]
        amount: Option<Decimal>,
        /// Leave the payment unconfirmed (seen on chain, not yet final).
        #[arg(long)]
        unconfirmed: bool,
    },
    /// Confirm an unconfirmed sandbox payment by its `txid` (as printed by `sandbox pay`).
    Confirm {
        /// The payment's transaction id.
        txid: String,
    },
    /// Reject an unconfirmed sandbox payment (a double spend): a PENDING order it was
    /// paying becomes FAILED.
    Reject {
        /// The payment's transaction id.
        txid: String,
    },
    /// Cancel a sandbox order as the customer would on the payment page (NEW orders only).
    Cancel {
        /// The order's id (`order_id`).
        order_id: String,
    },
    /// Make a sandbox order's quote expire now: NEW becomes EXPIRED, PENDING short of
    /// confirmed payments becomes FAILED.
    Expire {
        /// The order's id (`order_id`).
        order_id: String,
    },
    /// A test clock for expiry: every open sandbox order's quote deadline moves N
    /// minutes earlier, as if that much time had passed, and those now due expire at
    /// once (NEW → EXPIRED, PENDING short of confirmed payments → FAILED). Events carry
    /// the real time. Prints how many moved.
    Advance {
        /// Minutes to move forward (1 to 525600, a year).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=525_600))]
        minutes: u32,
    },
    /// Create a fresh sandbox order and drive it until it emits EVENT_TYPE, so a
    /// webhook receiver can be tried on each event type. Prints the order and the events
    /// it emitted (delivered by `serve`, or by `webhooks deliver`).
    ///
    /// The order belongs to the newest active sandbox key (of --user-id, if given).
    Trigger {
        /// The event type to produce.
        #[arg(value_name = "EVENT_TYPE", value_parser = event_type())]
        event_type: EventType,
        /// Use a key of this merchant (`user_id`).
        #[arg(long, value_name = "N")]
        user_id: Option<i64>,
    },
}

#[derive(Debug, Subcommand)]
enum PaymentsCommand {
    /// Record a payment to an order's deposit address, seen on chain.
    ///
    /// A confirmed payment (the default) that, with the order's other confirmed
    /// payments, covers the invoice makes the order PAID; one that falls short, or
    /// --unconfirmed, makes it PENDING. An unconfirmed payment is settled later with
    /// `payments confirm` or `payments reject`. A payment first seen after the quote
    /// expired is recorded as late (`order.paid_late`) and does not pay the order
    /// (accept it with `orders mark-paid`).
    ///
    /// Recording the same TXID again is a no-op, except that recording without
    /// --unconfirmed a payment recorded unconfirmed confirms it (so a watcher may
    /// report each transaction on every run until it is final). The same TXID with
    /// another amount or for another order is refused.
    Record {
        /// The order's id (`order_id`).
        order_id: String,
        /// The transaction id on chain (1 to 256 printable characters); it identifies
        /// the payment from now on.
        txid: String,
        /// The amount received, an exact decimal in the invoice's crypto currency (e.g.
        /// 0.0025 BTC, 19.99 USDT); never rounded: more places than the coin has is an
        /// error.
        #[arg(value_parser = parse_amount)]
        amount: Decimal,
        /// The payment is seen but not yet final (too few confirmations).
        #[arg(long)]
        unconfirmed: bool,
    },
    /// Confirm an unconfirmed payment by its TXID: the order becomes PAID once its
    /// confirmed payments cover the invoice (also after the quote expired, if the
    /// payment was seen in time).
    Confirm {
        /// The payment's transaction id, as given to `payments record`.
        txid: String,
    },
    /// Reject an unconfirmed payment that will never be final (dropped, double spent):
    /// a PENDING order it was paying becomes FAILED. A confirmed payment cannot be
    /// rejected.
    Reject {
        /// The payment's transaction id, as given to `payments record`.
        txid: String,
    },
    /// List an order's payments, oldest first: txid, amount, currency, state
    /// (unconfirmed, confirmed, rejected), whether it counts toward the invoice (first
    /// seen while the quote was open and the order not yet finished), when it was seen and
    /// settled.
    List {
        /// The order's id (`order_id`).
        order_id: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

#[derive(Debug, Subcommand)]
enum OrdersCommand {
    /// List orders of the environment, any merchant's, newest first: time, id,
    /// merchant (user id), state, price, merchant order id and title.
    List {
        /// Only orders in this state.
        #[arg(long, value_name = "STATUS", value_parser = order_status())]
        status: Option<OrderStatus>,
        /// Only this merchant's orders (the `user_id` of its keys).
        #[arg(long, value_name = "N")]
        user_id: Option<i64>,
        /// Only orders created at or after this time (RFC 3339 / ISO 8601 with a time
        /// zone, e.g. 2026-12-01T00:00:00Z).
        #[arg(long, value_name = "ISO8601", value_parser = parse_timestamp)]
        since: Option<Timestamp>,
        /// Most orders to list.
        #[arg(long, value_name = "N", default_value_t = 20,
              value_parser = clap::value_parser!(u32).range(1..=i64::from(HOST_LIST_MAX_LIMIT)))]
        limit: u32,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print an order with its invoice, payments and events.
    Show {
        /// The order's id (`order_id`).
        order_id: String,
    },
    /// Accept a late or short payment by hand: an EXPIRED or FAILED order becomes PAID
    /// (its `order.paid` event says it was marked paid). It asks for no recorded payment
    /// (the customer may have paid another way): check `orders show` first.
    MarkPaid {
        /// The order's id (`order_id`).
        order_id: String,
    },
    /// Cancel an order on behalf of its merchant (NEW orders only).
    Cancel {
        /// The order's id (`order_id`).
        order_id: String,
    },
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Create a key and print it with its plain `key` and `webhook_secret`.
    ///
    /// This is the only time the plain key is shown: store it in the merchant backend's
    /// secret store. Sandbox keys start with `test_`, live keys with `prod_`.
    Create {
        /// The merchant account the key acts for (the host application's account id).
        #[arg(long, value_name = "N")]
        user_id: i64,
        /// Default webhook URL for the key's orders (an absolute http(s) URL).
        #[arg(long, value_name = "URL")]
        webhook_url: Option<String>,
    },
    /// List every key of every environment (never plain keys or secrets).
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Make a key valid for requests again.
    Activate {
        /// The key's id (`key_...`), as shown by `keys list`.
        id: String,
    },
    /// Disable a key: requests with it are rejected with AUTHENTICATION_FAILED; it is kept.
    Deactivate {
        /// The key's id (`key_...`), as shown by `keys list`.
        id: String,
    },
    /// Delete a key for good: requests with it get 401 at once; it cannot be recovered.
    Delete {
        /// The key's id (`key_...`), as shown by `keys list`.
        id: String,
    },
    /// Set the key's default webhook URL (used when an order names none).
    SetWebhook {
        /// The key's id (`key_...`), as shown by `keys list`.
        id: String,
        /// An absolute http(s) URL receiving the key's order events.
        url: String,
    },
    /// Set the merchant's name the payment page shows above the titles of the key's
    /// orders (at most 80 characters).
    SetName {
        /// The key's id (`key_...`), as shown by `keys list`.
        id: String,
        /// The name, e.g. "Acme Coffee Roasters".
        name: String,
    },
    /// Remove the key's display name: the payment page shows none.
    ClearName {
        /// The key's id (`key_...`), as shown by `keys list`.
        id: String,
    },
    /// Remove the key's default webhook URL.
    ClearWebhook {
        /// The key's id (`key_...`), as shown by `keys list`.
        id: String,
    },
    /// Replace the key's webhook signing secret and print the key with the new
    /// `webhook_secret` (shown this once; update the merchant's receiver with it).
    ///
    /// Webhooks sent from now on are signed with the new secret, also retries of
    /// earlier events. With --keep-old-for, the old secret signs them as well until
    /// then (`webhook-signature: v1,<new> v1,<old>`), so the receiver can switch at its
    /// own pace; the output's `old_secret_signs_until` says when that ends.
    RotateSecret {
        /// The key's id (`key_...`), as shown by `keys list`.
        id: String,
        /// Seconds the old secret goes on signing beside the new one (at most 2592000,
        /// 30 days). Default 0: it stops at once, as for a secret that leaked.
        #[arg(long, value_name = "SECONDS", default_value_t = 0)]
        keep_old_for: u64,
    },
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (printed in the listening line).
    /// Default: 127.0.0.1:8080.
    #[arg(long, value_name = "HOST:PORT")]
    addr: Option<String>,
    /// Base URL of the hosted payment page; `payment_url` is this plus `?id=<order_id>`.
    /// Default: `http://<listening address>/pay`.
    #[arg(long, value_name = "URL")]
    payment_page_url: Option<String>,
    /// Requests per second allowed per API key; 0 turns the limit off. Default 100.
    #[arg(long, value_name = "N")]
    rate_limit: Option<u32>,
    /// Largest burst of requests allowed per API key (1 or more). Default: the
    /// --rate-limit value.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    rate_burst: Option<u32>,
    /// Threads answering reads (GET, the payment page) concurrently; writes have threads
    /// of their own (`write_threads` in [limits], default 32). Default 8.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,
    /// How long a new invoice's quote stays valid, in seconds; after that the order
    /// expires (checked every second while serving). Default 1800.
    #[arg(long, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..=MAX_INVOICE_TTL))]
    invoice_ttl: Option<u64>,
    /// Start even when the database file (or its -wal/-shm file) or its `<PATH>.key`
    /// file is readable or writable by group or others. Without it `serve` refuses such
    /// files, as ssh refuses an open private key: the database holds the orders and
    /// customers' e-mail addresses, the key file decrypts the webhook signing secrets.
    /// Unix only. Also `allow_open_permissions = true` in [server] of --config.
    #[arg(long)]
    allow_open_permissions: bool,
    /// How `serve` logs, on stderr: `text` (one line per request, event, webhook attempt,
    /// e-mail attempt and expiry run; default) or `json` (one JSON object per line, with
    /// `kind` set to `request`, `event`, `webhook`, `email`, `expiry`, `chain` or `notice`).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Log only failures and warnings: no line per request, event, expiry run or attempt
    /// that succeeded or will be retried; a webhook or e-mail given up on is still logged.
    #[arg(long)]
    quiet: bool,
    /// Watch Bitcoin through this Esplora-compatible API (e.g. https://blockstream.info/api
    /// or your own electrs) for payments to invoices' derived addresses. Also
    /// `esplora_url` in [bitcoin] of --config, with `confirmations` (default 2).
    #[arg(long, value_name = "URL")]
    esplora_url: Option<String>,
    /// Watch Ethereum (ETH, USDT, USDC) through this JSON-RPC node for payments to
    /// invoices' derived addresses. Also `rpc_url` in [ethereum] of --config, with
    /// `confirmations` (default 12) and `tokens` (USDT / USDC contract addresses).
    #[arg(long, value_name = "URL")]
    ethereum_rpc_url: Option<String>,
    #[command(flatten)]
    send: SendArgs,
}

/// `serve --log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// `coinorder: <time> <what happened>`.
    Text,
    /// One JSON object per line.
    Json,
}

/// `serve`'s log of what its background work does: events as they are written, webhook
/// and e-mail attempts (as the library's [`coinorder::Observer`]) and expiry runs.
/// Nothing secret is ever logged: ids, types, states, URLs and HTTP statuses (and no
/// customer's e-mail address).
#[derive(Debug, Clone, Copy)]
struct ServeLog {
    format: LogFormat,
    /// `--quiet`: of the attempts, only those given up on (a failure the host must see).
    quiet: bool,
}

impl ServeLog {
    /// One line of `kind` with `text` (text format) or `fields` (JSON format).
    fn line(&self, kind: &str, text: &str, fields: Value) {
        let time = coinorder::Timestamp(chrono::Utc::now().timestamp_millis()).to_iso();
        let line = match self.format {
            LogFormat::Text => format!("coinorder: {time} {kind} {text}\n"),
            LogFormat::Json => {
                let mut line = json!({ "time": time, "kind": kind });
                if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), fields) {
                    line.extend(fields);
                }
                format!("{line}\n")
            }
        };
        // One `write` per line, as the server's request log: `eprintln!` makes one per
        // piece of its format (stderr has no buffer), and a line per webhook attempt comes
        // thousands of times a second. A closed stderr must not stop the work logged.
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    }

    fn event(&self, event: &coinorder::Event) {
        let (id, kind, order) = (&event.event_id, event.event_type.as_str(), &event.order_id);
        let (from, to) = (event.previous_status.as_str(), event.status.as_str());
        self.line(
            "event",
            &format!("{id} {kind} order {order} {from} -> {to}"),
            json!({ "event_id": id, "type": kind, "order_id": order, "previous_status": from, "status": to }),
        );
    }

    fn expiry(&self, report: &coinorder::ExpiryReport) {
        self.line(
            "expiry",
            &format!("{} expired, {} failed", report.expired, report.failed),
            coinorder::render::expiry_report(report),
        );
    }

    fn chain(&self, report: &coinorder::ChainWatchReport) {
        self.line(
            "chain",
            &format!(
                "{} payment(s) recorded, {} confirmed, {} rejected",
                report.recorded, report.confirmed, report.rejected
            ),
            json!({ "recorded": report.recorded, "confirmed": report.confirmed, "rejected": report.rejected }),
        );
    }

    fn notice(&self, text: &str) {
        self.line("notice", text, json!({ "message": text }));
    }
}

impl coinorder::Observer for ServeLog {
    fn webhook_attempted(&self, event_id: &str, attempt: &coinorder::WebhookAttempt, outcome: &str) {
        if self.quiet && !matches!(outcome, "failed" | "unrecorded") {
            return;
        }
        // Shown as logged: credentials in the URL (`https://user:pass@…`, `?token=…`)
        // are already `***`.
        let url = &attempt.url;
        let answer = match (attempt.status, &attempt.error) {
            (Some(status), _) => status.to_string(),
            (None, Some(error)) => error.clone(),
            (None, None) => "no answer".to_string(),
        };
        self.line(
            "webhook",
            &format!(
                "{event_id} attempt {} {url} -> {answer} in {} ms ({outcome})",
                attempt.attempt, attempt.latency_ms
            ),
            json!({
                "event_id": event_id,
                "attempt": attempt.attempt,
                "url": url,
                "status": attempt.status,
                "error": attempt.error,
                "latency_ms": attempt.latency_ms,
                "outcome": outcome,
            }),
        );
    }

    fn email_attempted(&self, email_id: &str, order_id: &str, attempt: i64, outcome: &str, error: Option<&str>) {
        if self.quiet && !matches!(outcome, "failed" | "unrecorded") {
            return;
        }
        let reason = error.map(|error| format!(": {error}")).unwrap_or_default();
        self.line(
            "email",
            &format!("{email_id} attempt {attempt} for order {order_id} -> {outcome}{reason}"),
            json!({
                "email_id": email_id,
                "order_id": order_id,
                "attempt": attempt,
                "outcome": outcome,
                "error": error,
            }),
        );
    }
}

/// The chain watchers' endpoints: the flags, else the settings file's [bitcoin] and
/// [ethereum]; none, no watcher.
fn apply_chain_settings(
    config: &mut Config,
    esplora_url: Option<String>,
    ethereum_rpc_url: Option<String>,
    file: &FileConfig,
) {
    if let Some(esplora_url) = esplora_url.or_else(|| file.bitcoin.esplora_url.clone()) {
        let confirmations = file.bitcoin.confirmations.unwrap_or(coinorder::BitcoinWatch::DEFAULT_CONFIRMATIONS);
        config.bitcoin_watch = Some(coinorder::BitcoinWatch { esplora_url, confirmations });
    }
    if let Some(rpc_url) = ethereum_rpc_url.or_else(|| file.ethereum.rpc_url.clone()) {
        let mut watch = coinorder::EthereumWatch::new(config.environment, rpc_url);
        if let Some(confirmations) = file.ethereum.confirmations {
            watch.confirmations = confirmations;
        }
        if let Some(tokens) = &file.ethereum.tokens {
            watch.tokens =
                tokens.iter().map(|(coin, contract)| (coin.to_ascii_uppercase(), contract.clone())).collect();
        }
        config.ethereum_watch = Some(watch);
    }
}

/// A live `serve` with an accepted coin that has no wallet would show customers orders
/// with no deposit address; it refuses to start instead, saying what to do. (The CLI
/// has no `AddressSource`: that is for hosts embedding the library.)
fn refuse_live_without_addresses(service: &Service) -> CliResult<()> {
    let config = service.config();
    if config.environment != Environment::Live || config.address_source.is_some() {
        return Ok(());
    }
    let wallets = service.wallets().map_err(fail)?;
    let missing: Vec<&String> =
        config.pay_currencies.iter().filter(|coin| !wallets.iter().any(|wallet| &wallet.coin == *coin)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing.iter().map(|coin| coin.as_str()).collect::<Vec<_>>().join(", ");
    Err(format!(
        "live accepts {list} but has no wallet for {}: customers would get orders with no deposit address. \
         Set one per coin with `coinorder wallets set --env live <COIN> <xpub/zpub or descriptor>`, \
         or accept only the coins you have wallets for (`pay_currencies` in [server] of --config)",
        if missing.len() == 1 { "it" } else { "them" }
    ))
}

/// What a live `serve` cannot do for a coin it accepts, as warnings: no rate to quote
/// it with (and no rate source), no chain watched for payments to its addresses.
fn live_warnings(service: &Service) -> Vec<String> {
    let config = service.config();
    if config.environment != Environment::Live {
        return Vec::new();
    }
    let mut warnings: Vec<String> = service
        .coins_without_rates()
        .unwrap_or_default()
        .into_iter()
        .map(|coin| {
            format!(
                "warning: live has no rate for {coin}: orders paid in {coin} are refused until one is set \
                 (`coinorder rates set --env live {coin} USD <rate>`)"
            )
        })
        .collect();
    let watched = |coin: &str| match coin {
        "BTC" => config.bitcoin_watch.is_some(),
        _ => config.ethereum_watch.as_ref().is_some_and(|w| coin == "ETH" || w.tokens.iter().any(|(c, _)| c == coin)),
    };
    let unwatched: Vec<&str> = config.pay_currencies.iter().map(String::as_str).filter(|coin| !watched(coin)).collect();
    if !unwatched.is_empty() {
        warnings.push(format!(
            "warning: live watches no chain for {}: payments to their addresses are not seen until recorded \
             (`coinorder payments record`) or an endpoint is set (--esplora-url, --ethereum-rpc-url)",
            unwatched.join(", ")
        ));
    }
    warnings
}

/// `sandbox` or `live` on the command line and in the settings file.
#[derive(Debug, Clone, Copy, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
enum EnvArg {
    /// Test environment: no real money, `test_` keys.
    Sandbox,
    /// Production: real money, `prod_` keys.
    Live,
}

impl From<EnvArg> for Environment {
    fn from(env: EnvArg) -> Self {
        match env {
            EnvArg::Sandbox => Environment::Sandbox,
            EnvArg::Live => Environment::Live,
        }
    }
}

/// A failure reported as `error: <message>` with exit status 1.
type CliResult<T> = Result<T, String>;

fn main() -> ExitCode {
    // A write past the file size limit (`ulimit -f`) raises SIGXFSZ, whose default action
    // kills the process: `serve` would drop every connection and stop its workers. With a
    // handler in place the write fails with EFBIG instead, which SQLite reports as an
    // error: the request gets a 500 and the server stays up, as on a full disk.
    #[cfg(unix)]
    if let Err(e) = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    ) {
        eprintln!("warning: cannot handle SIGXFSZ ({e}): a write past the file size limit ends the process");
    }
    let matches = Cli::command().get_matches();
    // `db` in a settings file applies only when neither --db nor COINORDER_DB was given.
    let db_given = matches!(matches.value_source("db"), Some(ValueSource::CommandLine | ValueSource::EnvVariable));
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match run(cli, db_given) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `--secret-key-file` / `COINORDER_SECRET_KEY_FILE`, for every service the command opens.
static SECRET_KEY_FILE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

fn run(cli: Cli, db_given: bool) -> CliResult<()> {
    let _ = SECRET_KEY_FILE.set(cli.secret_key_file.clone());
    let file = load_config(cli.config.as_deref())?;
    let db = DbPath { path: cli.db, given: db_given }.resolve(&file);
    let env = cli.env.or(file.server.env).map_or(Environment::Sandbox, Environment::from);
    let ctx = Ctx { db, env, env_given: cli.env.is_some(), file };
    match cli.command {
        Command::Keys(command) => {
            let creates = matches!(command, KeysCommand::Create { .. });
            ctx.leaving_no_new_database_on_failure(creates, || keys(&ctx, command))
        }
        Command::Serve(args) => serve(&ctx, args),
        Command::Rates(command) => {
            let creates = matches!(command, RatesCommand::Set { .. });
            ctx.leaving_no_new_database_on_failure(creates, || rates(&ctx, command))
        }
        Command::Sandbox(command) => sandbox(&ctx, command),
        Command::Payments(command) => payments(&ctx, command),
        Command::Orders(command) => orders(&ctx, command),
        Command::Webhooks(command) => webhooks(&ctx, command),
        Command::Emails(command) => emails(&ctx, command),
        Command::Events(EventsCommand::Tail { forward_to, output }) => tail_events(&ctx, forward_to, output.format),
        Command::Wallets(command) => {
            let creates = matches!(command, WalletsCommand::Set { .. });
            ctx.leaving_no_new_database_on_failure(creates, || wallets(&ctx, command))
        }
    }
}

/// The `--db` value, and whether it was given (flag or `COINORDER_DB`) rather than the
/// default.
struct DbPath {
    path: PathBuf,
    given: bool,
}

impl DbPath {
    /// The database to open: --db / COINORDER_DB, else `db` from the settings file,
    /// else the default.
    fn resolve(&self, file: &FileConfig) -> PathBuf {
        match &file.db {
            Some(path) if !self.given => path.clone(),
            _ => self.path.clone(),
        }
    }
}

/// What every command works from: the database, the environment (--env, else the
/// settings file's, else sandbox) and the settings file.
struct Ctx {
    db: PathBuf,
    env: Environment,
    /// True when --env / COINORDER_ENV named the environment.
    env_given: bool,
    file: FileConfig,
}

impl Ctx {
    /// The library settings for the environment, with the file's storage settings and its
    /// `[webhooks] allow_private`: live refuses private webhook URLs on keys (`keys create`,
    /// `keys set-webhook`) as on orders, so the file's permission holds for every command.
    fn config(&self) -> Config {
        let mut config = Config::new(self.env);
        apply_storage_settings(&mut config, &self.file);
        config.allow_private_webhook_targets = self.file.webhooks.allow_private == Some(true);
        config
    }

    /// Runs a one-shot command that may create the database (`creates`: `keys create`,
    /// `rates set`, `wallets set`). If it fails, the files it created are removed again
    /// (the database, its log files and a key file that did not exist before), so a first
    /// command with a mistake in its arguments leaves no empty database behind. Not for
    /// `serve`, whose failure may come after it has taken orders.
    fn leaving_no_new_database_on_failure(
        &self,
        creates: bool,
        command: impl FnOnce() -> CliResult<()>,
    ) -> CliResult<()> {
        let mut new_files = Vec::new();
        if creates && !is_server(&self.db) {
            let config = with_command_key_file(self.config());
            let beside = |suffix: &str| {
                let mut name = self.db.as_os_str().to_owned();
                name.push(suffix);
                PathBuf::from(name)
            };
            let candidates = [self.db.clone(), beside("-wal"), beside("-shm"), config.secret_key_path_for(&self.db)];
            new_files.extend(candidates.into_iter().filter(|path| !matches!(path.try_exists(), Ok(true))));
        }
        let result = command();
        if result.is_err() && new_files.first() == Some(&self.db) {
            for path in &new_files {
                let _ = std::fs::remove_file(path);
            }
        }
        result
    }

    /// Opens the database, creating it if missing.
    fn open(&self) -> CliResult<Service> {
        open(&self.db, self.config())
    }

    /// Opens a database that must exist (see [`open_existing`]).
    fn open_existing(&self) -> CliResult<Service> {
        open_existing(&self.db, self.config())
    }

    /// The other environment.
    fn other_env(&self) -> Environment {
        match self.env {
            Environment::Sandbox => Environment::Live,
            Environment::Live => Environment::Sandbox,
        }
    }

    /// `error` as the message to print, helped along when it is about an id that is not
    /// there: for an order, a payment or an event, it says when the other environment has
    /// it (and which --env to add); otherwise it names the command that lists the right
    /// ids.
    fn explain(&self, error: coinorder::Error, id: &str) -> String {
        let env = self.env.as_str();
        let lists = match error.kind() {
            // Keys are managed across both environments.
            ErrorKind::KeyNotFound(_) => return format!("{error}; `coinorder keys list` lists the keys"),
            ErrorKind::OrderNotFound => format!("`coinorder orders list --env {env}` lists its orders"),
            ErrorKind::PaymentNotFound(_) => {
                format!("`coinorder payments list ORDER_ID --env {env}` lists an order's payments")
            }
            ErrorKind::EventNotFound(_) => format!("`coinorder webhooks list --env {env}` lists its recent events"),
            _ => return error.to_string(),
        };
        let other = self.other_env();
        let elsewhere =
            open_existing(&self.db, Config { environment: other, ..self.config() }).ok().is_some_and(|service| {
                service.order(id).is_ok() || service.payment(id).is_ok() || service.event(id).is_ok()
            });
        if elsewhere {
            format!("{error}: {id:?} is not in {env} but in {other}; add --env {other}")
        } else {
            format!("{error}: no {id:?} in {env}; {lists}")
        }
    }
}

// ----- The settings file (--config) -----

/// The `--config` TOML file; every setting is optional. See `coinorder.example.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    /// Database file or server URL; relative paths are relative to the settings file's
    /// directory.
    db: Option<PathBuf>,
    /// The key file sealing webhook secrets (required on PostgreSQL); relative to the
    /// settings file's directory. `--secret-key-file` wins over it.
    secret_key_file: Option<PathBuf>,
    #[serde(default)]
    sqlite: SqliteSection,
    #[serde(default)]
    server: ServerSection,
    #[serde(default)]
    webhooks: WebhooksSection,
    #[serde(default)]
    smtp: SmtpSection,
    #[serde(default)]
    limits: LimitsSection,
    #[serde(default)]
    bitcoin: BitcoinSection,
    #[serde(default)]
    ethereum: EthereumSection,
}

/// `[sqlite]`: what only a SQLite database file has.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SqliteSection {
    /// "full" (the default) or "normal".
    synchronous: Option<String>,
    /// `Config::sqlite.mmap_mib`.
    mmap_mib: Option<u64>,
    /// `Config::sqlite.cache_mib`.
    cache_mib: Option<u64>,
}

/// `[limits]`: the bounds of the HTTP server (`ServerLimits`), in bytes and seconds.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsSection {
    max_request_target_bytes: Option<usize>,
    max_header_bytes: Option<usize>,
    max_headers: Option<usize>,
    max_body_bytes: Option<usize>,
    header_timeout_secs: Option<u64>,
    body_grace_secs: Option<u64>,
    min_body_rate: Option<u32>,
    write_timeout_secs: Option<u64>,
    max_connections: Option<usize>,
    max_in_flight: Option<usize>,
    write_threads: Option<usize>,
    queue_timeout_secs: Option<u64>,
    shutdown_grace_secs: Option<u64>,
    busy_timeout_ms: Option<u64>,
    failed_auth_burst: Option<u32>,
}

impl LimitsSection {
    /// The server limits: the file's values over the defaults, each checked for range.
    fn server_limits(&self) -> Result<ServerLimits, String> {
        fn within<T: PartialOrd + std::fmt::Display + Copy>(name: &str, value: T, min: T, max: T) -> Result<T, String> {
            if value < min || value > max {
                return Err(format!("limits.{name} must be {min} to {max}, got {value}"));
            }
            Ok(value)
        }
        let secs = |name: &str, value: Option<u64>, default: Duration| -> Result<Duration, String> {
            value.map_or(Ok(default), |v| within(name, v, 1, 86_400).map(Duration::from_secs))
        };
        let mut limits = ServerLimits::default();
        let d = limits.clone();
        let size = |name: &str, value: Option<usize>, default: usize, min: usize, max: usize| {
            value.map_or(Ok(default), |v| within(name, v, min, max))
        };
        limits.max_request_target_bytes =
            size("max_request_target_bytes", self.max_request_target_bytes, d.max_request_target_bytes, 256, 1 << 20)?;
        limits.max_header_bytes = size("max_header_bytes", self.max_header_bytes, d.max_header_bytes, 8192, 1 << 24)?;
        limits.max_headers = size("max_headers", self.max_headers, d.max_headers, 8, 10_000)?;
        limits.max_body_bytes = size("max_body_bytes", self.max_body_bytes, d.max_body_bytes, 65_537, 1 << 30)?;
        limits.header_timeout = secs("header_timeout_secs", self.header_timeout_secs, d.header_timeout)?;
        limits.body_grace = secs("body_grace_secs", self.body_grace_secs, d.body_grace)?;
        limits.min_body_rate =
            self.min_body_rate.map_or(Ok(d.min_body_rate), |v| within("min_body_rate", v, 1, u32::MAX))?;
        limits.write_timeout = secs("write_timeout_secs", self.write_timeout_secs, d.write_timeout)?;
        limits.max_connections = size("max_connections", self.max_connections, d.max_connections, 1, 1 << 20)?;
        limits.max_in_flight = size("max_in_flight", self.max_in_flight, d.max_in_flight, 1, 1 << 20)?;
        limits.write_threads = size("write_threads", self.write_threads, d.write_threads, 1, 64)?;
        limits.queue_timeout = secs("queue_timeout_secs", self.queue_timeout_secs, d.queue_timeout)?;
        limits.shutdown_grace = secs("shutdown_grace_secs", self.shutdown_grace_secs, d.shutdown_grace)?;
        if let Some(ms) = self.busy_timeout_ms {
            within("busy_timeout_ms", ms, 1, 3_600_000)?;
        }
        Ok(limits)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerSection {
    env: Option<EnvArg>,
    addr: Option<String>,
    payment_page_url: Option<String>,
    invoice_ttl: Option<u64>,
    rate_limit: Option<u32>,
    rate_burst: Option<u32>,
    threads: Option<u16>,
    allow_open_permissions: Option<bool>,
    /// `Config::pay_currencies`.
    pay_currencies: Option<Vec<String>>,
    /// `Config::default_pay_currency`.
    default_pay_currency: Option<String>,
}

/// `[bitcoin]`: where `serve` watches for BTC payments (`Config::bitcoin_watch`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BitcoinSection {
    esplora_url: Option<String>,
    confirmations: Option<u32>,
}

/// `[ethereum]`: where `serve` watches for ETH and token payments
/// (`Config::ethereum_watch`); `tokens` maps USDT / USDC to a contract address.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EthereumSection {
    rpc_url: Option<String>,
    confirmations: Option<u32>,
    tokens: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhooksSection {
    timeout_secs: Option<u64>,
    allow_private: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SmtpSection {
    url: Option<String>,
    from: Option<String>,
}

/// Every key the settings file may have, by section ("" for the top level).
const KNOWN_KEYS: &[(&str, &[&str])] = &[
    ("", &["db", "secret_key_file", "sqlite", "server", "webhooks", "smtp", "limits", "bitcoin", "ethereum"]),
    ("bitcoin", &["esplora_url", "confirmations"]),
    ("ethereum", &["rpc_url", "confirmations", "tokens"]),
    ("sqlite", &["synchronous", "mmap_mib", "cache_mib"]),
    (
        "server",
        &[
            "env",
            "addr",
            "payment_page_url",
            "invoice_ttl",
            "rate_limit",
            "rate_burst",
            "threads",
            "allow_open_permissions",
            "pay_currencies",
            "default_pay_currency",
        ],
    ),
    ("webhooks", &["timeout_secs", "allow_private"]),
    ("smtp", &["url", "from"]),
    (
        "limits",
        &[
            "max_request_target_bytes",
            "max_header_bytes",
            "max_headers",
            "max_body_bytes",
            "header_timeout_secs",
            "body_grace_secs",
            "min_body_rate",
            "write_timeout_secs",
            "max_connections",
            "max_in_flight",
            "write_threads",
            "queue_timeout_secs",
            "shutdown_grace_secs",
            "busy_timeout_ms",
            "failed_auth_burst",
        ],
    ),
];

/// Reads the settings file, or the empty settings without one.
fn load_config(path: Option<&Path>) -> CliResult<FileConfig> {
    let Some(path) = path else { return Ok(FileConfig::default()) };
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read the config file {}: {e}", path.display()))?;
    let mut file = parse_config(&text).map_err(|e| format!("config file {}: {e}", path.display()))?;
    let base = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Some(db) = &file.db {
        // A relative file path is relative to the settings file; a server URL is not a path.
        if db.is_relative() && !is_server(db) {
            file.db = Some(base.join(db));
        }
    }
    if let Some(key_file) = &file.secret_key_file {
        if key_file.is_relative() {
            file.secret_key_file = Some(base.join(key_file));
        }
    }
    Ok(file)
}

/// Parses and checks settings-file text: unknown keys and out-of-range values are errors
/// naming the key.
fn parse_config(text: &str) -> Result<FileConfig, String> {
    // Unknown keys first, by their full name (`server.bogus`); toml's own message below
    // names the key too, but not its section.
    let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())?;
    for (key, value) in &table {
        let known = KNOWN_KEYS.iter().find(|(section, _)| section.is_empty()).map_or(&[][..], |(_, keys)| *keys);
        if !known.contains(&key.as_str()) {
            return Err(format!("unknown key `{key}` (known: {})", known.join(", ")));
        }
        if let Some((_, keys)) = KNOWN_KEYS.iter().find(|(section, _)| *section == key) {
            let section = value.as_table().ok_or_else(|| format!("`{key}` must be a section: [{key}]"))?;
            if let Some(unknown) = section.keys().find(|k| !keys.contains(&k.as_str())) {
                return Err(format!("unknown key `{key}.{unknown}` (known in [{key}]: {})", keys.join(", ")));
            }
        }
    }
    let file: FileConfig = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())?;
    if let Some(ttl) = file.server.invoice_ttl {
        if !(1..=MAX_INVOICE_TTL).contains(&ttl) {
            return Err(format!("server.invoice_ttl must be 1 to {MAX_INVOICE_TTL} seconds, got {ttl}"));
        }
    }
    if let Some(threads) = file.server.threads {
        if !(1..=1024).contains(&threads) {
            return Err(format!("server.threads must be 1 to 1024, got {threads}"));
        }
    }
    file.limits.server_limits()?;
    if let Some(timeout) = file.webhooks.timeout_secs {
        if !(1..=MAX_WEBHOOK_TIMEOUT).contains(&timeout) {
            return Err(format!("webhooks.timeout_secs must be 1 to {MAX_WEBHOOK_TIMEOUT} seconds, got {timeout}"));
        }
    }
    if let Some(synchronous) = &file.sqlite.synchronous {
        if synchronous != "full" && synchronous != "normal" {
            return Err(format!("sqlite.synchronous must be \"full\" or \"normal\", got {synchronous:?}"));
        }
    }
    if let Some(mib) = file.sqlite.mmap_mib {
        if mib > 1 << 20 {
            return Err(format!("sqlite.mmap_mib must be 0 to 1048576, got {mib}"));
        }
    }
    if let Some(mib) = file.sqlite.cache_mib {
        if !(1..=65_536).contains(&mib) {
            return Err(format!("sqlite.cache_mib must be 1 to 65536, got {mib}"));
        }
    }
    Ok(file)
}

/// The environment a `webhooks`/`emails` command works on: --env, else the file's, else
/// sandbox.
/// Applies webhook and SMTP settings (flags over the file) to `config`.
fn apply_send_settings(config: &mut Config, send: &SendArgs, file: &FileConfig) -> CliResult<()> {
    if let Some(seconds) = send.webhook_timeout.or(file.webhooks.timeout_secs) {
        config.webhook_timeout = Duration::from_secs(seconds);
    }
    config.allow_private_webhook_targets = send.allow_private_webhooks || file.webhooks.allow_private == Some(true);
    let from = send.smtp_from.clone().or_else(|| file.smtp.from.clone()).unwrap_or_else(|| DEFAULT_SMTP_FROM.into());
    if let Some(url) = send.smtp_url.clone().or_else(|| file.smtp.url.clone()) {
        let smtp = SmtpConfig { url, from };
        smtp.check().map_err(|e| format!("--smtp-url {}: {e}", redact_url(&smtp.url)))?;
        config.smtp = Some(smtp);
    } else if from.parse::<lettre::message::Mailbox>().is_err() {
        return Err(format!("smtp from: {from:?} is not an e-mail address (e.g. `Shop <pay@shop.example>`)"));
    }
    Ok(())
}

/// Refuses an SMTP URL the mailer could not use, without echoing a password.
#[cfg(test)]
fn check_smtp_url(url: &str) -> CliResult<()> {
    SmtpConfig { url: url.to_string(), from: DEFAULT_SMTP_FROM.into() }
        .check()
        .map_err(|e| format!("--smtp-url {}: {e}", redact_url(url)))
}

/// `config` with the command's `--secret-key-file` / `COINORDER_SECRET_KEY_FILE`, unless
/// it names a key file already.
fn with_command_key_file(mut config: Config) -> Config {
    if config.secret_key_path.is_none() {
        config.secret_key_path = SECRET_KEY_FILE.get().cloned().flatten();
    }
    config
}

fn open(db: &Path, config: Config) -> CliResult<Service> {
    let config = with_command_key_file(config);
    Service::open(db, config).map_err(|e| format!("cannot open database {}: {e}", shown_target(db)))
}

/// True for a PostgreSQL URL (`postgres://`, `postgresql://`) rather than a file path.
fn is_server(db: &Path) -> bool {
    StoreTarget::parse(db).is_server()
}

/// The database as messages show it: a URL without its password.
fn shown_target(db: &Path) -> String {
    StoreTarget::parse(db).to_string()
}

/// Opens a database that must already exist: every command but `keys create`, `serve`
/// and `rates set`, so that a mistyped `--db` is an error rather than a new, empty
/// database (and key file) that the command then reports nothing from.
fn open_existing(db: &Path, config: Config) -> CliResult<Service> {
    if is_server(db) {
        // A server's database exists or the connection says why not.
        return open(db, config);
    }
    match db.try_exists() {
        Ok(true) => open(db, config),
        Ok(false) => Err(format!(
            "no database at {} (create one with `coinorder keys create` or `coinorder serve`)",
            db.display()
        )),
        Err(e) => Err(format!("cannot open database {}: {e}", db.display())),
    }
}

fn keys(ctx: &Ctx, command: KeysCommand) -> CliResult<()> {
    // Key management works on keys of both environments; a new key is the --env one's.
    let service = match &command {
        KeysCommand::Create { .. } => ctx.open()?,
        _ => ctx.open_existing()?,
    };
    let output = match command {
        KeysCommand::Create { user_id, webhook_url } => {
            let created = service
                .create_key(NewApiKey { user_id, environment: ctx.env, webhook_url })
                .map_err(|e| e.to_string())?;
            render::created_key(&created).map_err(|e| format!("cannot render JSON: {e}"))?
        }
        KeysCommand::List { output } => {
            let keys = to_json(&service.list_keys().map_err(|e| e.to_string())?)?;
            return print_rows(
                &keys,
                output.format,
                &[
                    ("ID", "/id"),
                    ("USER", "/user_id"),
                    ("ENV", "/environment"),
                    ("STATUS", "/status"),
                    ("KEY", "/key_hint"),
                    ("CREATED", "/created_at"),
                    ("LAST USED", "/last_used_at"),
                    ("WEBHOOK URL", "/webhook_url"),
                ],
            );
        }
        KeysCommand::Activate { id } => key_json(ctx, &id, service.activate_key(&id))?,
        KeysCommand::Deactivate { id } => key_json(ctx, &id, service.deactivate_key(&id))?,
        KeysCommand::Delete { id } => {
            service.delete_key(&id).map_err(|e| ctx.explain(e, &id))?;
            json!({ "deleted": id })
        }
        KeysCommand::SetWebhook { id, url } => key_json(ctx, &id, service.set_key_webhook_url(&id, Some(&url)))?,
        KeysCommand::ClearWebhook { id } => key_json(ctx, &id, service.set_key_webhook_url(&id, None))?,
        KeysCommand::SetName { id, name } => key_json(ctx, &id, service.set_key_display_name(&id, Some(&name)))?,
        KeysCommand::ClearName { id } => key_json(ctx, &id, service.set_key_display_name(&id, None))?,
        KeysCommand::RotateSecret { id, keep_old_for } => {
            let keep = Duration::from_secs(keep_old_for);
            let rotated = service.rotate_key_webhook_secret_keeping_old(&id, keep).map_err(|e| ctx.explain(e, &id))?;
            let mut value = key_json(ctx, &id, service.get_key(&id))?;
            value["webhook_secret"] = Value::from(rotated.secret.expose());
            value["old_secret_signs_until"] = rotated.old_secret_signs_until.map(|until| until.to_iso()).into();
            value
        }
    };
    print_json(&output)
}

fn to_json<T: serde::Serialize>(value: &T) -> CliResult<Value> {
    serde_json::to_value(value).map_err(|e| format!("cannot render JSON: {e}"))
}

/// A key as JSON, or the error about key `id` explained ([`Ctx::explain`]).
fn key_json(ctx: &Ctx, id: &str, key: coinorder::Result<coinorder::ApiKey>) -> CliResult<Value> {
    to_json(&key.map_err(|e| ctx.explain(e, id))?)
}

fn print_json(value: &Value) -> CliResult<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| format!("cannot render JSON: {e}"))?;
    print_text(&text)
}

fn print_text(text: &str) -> CliResult<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}").and_then(|()| stdout.flush()).map_err(|e| format!("cannot write to stdout: {e}"))
}

/// A listing: `rows` (a JSON array) as JSON, or as a table of `columns` (header, JSON
/// pointer into each row).
fn print_rows(rows: &Value, format: Format, columns: &[(&str, &str)]) -> CliResult<()> {
    match format {
        Format::Json => print_json(rows),
        Format::Table => print_text(&table(rows.as_array().map_or(&[][..], Vec::as_slice), columns)),
    }
}

/// Rows as aligned columns under a header line; a missing or null cell is `-`. Widths
/// count characters, so titles in any script line up.
fn table(rows: &[Value], columns: &[(&str, &str)]) -> String {
    let cell = |row: &Value, pointer: &str| match row.pointer(pointer) {
        None | Some(Value::Null) => "-".to_string(),
        Some(Value::String(text)) if text.is_empty() => "-".to_string(),
        // One line per row, whatever the text holds.
        Some(Value::String(text)) => text.replace(['\n', '\r', '\t'], " "),
        Some(other) => other.to_string(),
    };
    let cells: Vec<Vec<String>> = rows.iter().map(|row| columns.iter().map(|(_, p)| cell(row, p)).collect()).collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (header, _))| {
            cells.iter().map(|row| row[i].chars().count()).chain([header.chars().count()]).max().unwrap_or(0)
        })
        .collect();
    let line = |values: Vec<&str>| {
        let padded: Vec<String> =
            values.iter().zip(&widths).map(|(value, width)| format!("{value:<width$}", width = *width)).collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut lines = vec![line(columns.iter().map(|(header, _)| *header).collect())];
    lines.extend(cells.iter().map(|row| line(row.iter().map(String::as_str).collect())));
    if rows.is_empty() {
        lines.push("(none)".to_string());
    }
    lines.join("\n")
}

/// The settings file's storage settings (`secret_key_file`, `[sqlite]`) on `config`;
/// `--secret-key-file` / `COINORDER_SECRET_KEY_FILE` win over the file.
fn apply_storage_settings(config: &mut Config, file: &FileConfig) {
    config.secret_key_path = SECRET_KEY_FILE.get().cloned().flatten().or_else(|| file.secret_key_file.clone());
    if let Some(synchronous) = &file.sqlite.synchronous {
        config.sqlite.synchronous_full = synchronous != "normal";
    }
    if let Some(mib) = file.sqlite.mmap_mib {
        config.sqlite.mmap_mib = mib;
    }
    if let Some(mib) = file.sqlite.cache_mib {
        config.sqlite.cache_mib = mib;
    }
}

fn serve(ctx: &Ctx, args: ServeArgs) -> CliResult<()> {
    let (file, environment, db) = (&ctx.file, ctx.env, ctx.db.clone());
    let settings = &file.server;
    let addr = args.addr.or_else(|| settings.addr.clone()).unwrap_or_else(|| DEFAULT_ADDR.to_string());
    let threads = args.threads.or(settings.threads).unwrap_or(DEFAULT_THREADS);
    // Bind first: the payment page URL defaults to this very server, whose port is only
    // known once bound (`--addr 127.0.0.1:0`).
    let listener = bind(&addr)?;
    let addr = listener.local_addr().map_err(|e| format!("cannot read the listening address: {e}"))?;

    let mut config = ctx.config();
    config.invoice_ttl = Duration::from_secs(args.invoice_ttl.or(settings.invoice_ttl).unwrap_or(DEFAULT_INVOICE_TTL));
    config.payment_page_url = args
        .payment_page_url
        .or_else(|| settings.payment_page_url.clone())
        .unwrap_or_else(|| format!("http://{}/pay", reachable(addr)));
    let rate_burst = args.rate_burst.or(settings.rate_burst);
    if rate_burst == Some(0) {
        // As the library refuses it: a bucket that holds nothing cannot let anything by.
        return Err("rate_burst: must be a whole number from 1 to 4294967295".to_string());
    }
    if let Some(per_second) = args.rate_limit.or(settings.rate_limit) {
        config.rate_limit = if per_second == 0 {
            RateLimit::OFF
        } else {
            RateLimit { per_second, burst: rate_burst.unwrap_or(per_second) }
        };
    } else if let Some(burst) = rate_burst {
        config.rate_limit.burst = burst;
    }
    apply_send_settings(&mut config, &args.send, file)?;
    apply_chain_settings(&mut config, args.esplora_url.clone(), args.ethereum_rpc_url.clone(), file);
    if let Some(coins) = &settings.pay_currencies {
        config.pay_currencies = coins.iter().map(|coin| coin.to_ascii_uppercase()).collect();
        config.default_pay_currency = config.pay_currencies.first().cloned().unwrap_or_default();
    }
    if let Some(coin) = &settings.default_pay_currency {
        config.default_pay_currency = coin.to_ascii_uppercase();
    }
    let limits = file.limits.server_limits()?;
    if let Some(ms) = file.limits.busy_timeout_ms {
        config.busy_timeout = Duration::from_millis(ms);
    }
    if let Some(burst) = file.limits.failed_auth_burst {
        config.failed_auth_limit = if burst == 0 { RateLimit::OFF } else { RateLimit { per_second: 1, burst } };
    }
    let mail_note = match &config.smtp {
        Some(smtp) => format!("sending payment-link e-mails through {} as {}", redact_url(&smtp.url), smtp.from),
        None => "no SMTP server configured (--smtp-url): payment-link e-mails stay pending".to_string(),
    };
    if !(args.allow_open_permissions || settings.allow_open_permissions == Some(true)) {
        refuse_open_permissions(&db, &config.secret_key_path_for(&db))?;
    }
    let log = ServeLog { format: args.log_format, quiet: args.quiet };
    config.observer = Some(Arc::new(log));
    let service = Arc::new(open(&db, config)?);
    refuse_live_without_addresses(&service)?;

    // Install the signal handler before announcing the address, so that a SIGTERM sent
    // as soon as the line is read already means "shut down cleanly".
    // A second signal quits at once instead of waiting for requests in flight.
    let (stop_tx, stop_rx) = mpsc::channel();
    let signals = AtomicUsize::new(0);
    ctrlc::set_handler(move || {
        if signals.fetch_add(1, Ordering::SeqCst) == 0 {
            let _ = stop_tx.send(());
        } else {
            // Not eprintln!, which panics when stderr is gone (a closed pipe) and would
            // leave the process running.
            let _ =
                writeln!(std::io::stderr(), "error: interrupted again; exiting without waiting for requests in flight");
            std::process::exit(1);
        }
    })
    .map_err(|e| format!("cannot install the signal handler: {e}"))?;

    let expiry_service = Arc::clone(&service);
    let mut expiry = coinorder::Worker::spawn("coinorder-expiry", EXPIRY_INTERVAL, move || {
        let report = expiry_service.expire_due(expiry_service.now())?;
        if !args.quiet && report.expired + report.failed > 0 {
            log.expiry(&report);
        }
        Ok::<(), coinorder::Error>(())
    })
    .map_err(|e| format!("cannot start the expiry worker: {e}"))?;
    // Events as they are written, by this process or any other on the database.
    let mut event_log = if args.quiet {
        None
    } else {
        let events_service = Arc::clone(&service);
        let mut follower = service.follow_events(service.now());
        let worker = coinorder::Worker::spawn("coinorder-event-log", EVENT_LOG_INTERVAL, move || {
            for event in follower.poll(&events_service)? {
                log.event(&event);
            }
            Ok::<(), coinorder::Error>(())
        });
        Some(worker.map_err(|e| format!("cannot start the event log: {e}"))?)
    };
    let mut delivery = service
        .start_delivery_worker(DELIVERY_INTERVAL, DELIVERY_BATCH)
        .map_err(|e| format!("cannot start the delivery worker: {e}"))?;
    let mut checkpoint = service
        .start_checkpoint_worker(CHECKPOINT_INTERVAL)
        .map_err(|e| format!("cannot start the checkpoint worker: {e}"))?;
    let chain_service = Arc::clone(&service);
    let mut chain = coinorder::Worker::spawn("coinorder-chain", coinorder::CHAIN_WATCH_INTERVAL, move || {
        let report = chain_service.watch_chain_due()?;
        if !args.quiet && report.recorded + report.confirmed + report.rejected > 0 {
            log.chain(&report);
        }
        for error in &report.errors {
            log.notice(&format!("warning: chain watcher: {error}"));
        }
        Ok::<(), coinorder::Error>(())
    })
    .map_err(|e| format!("cannot start the chain watcher: {e}"))?;
    let grace = limits.shutdown_grace;
    let mut warnings = live_warnings(&service);
    if let Some(path) = coinorder::unanswered_page_path(&service.config().payment_page_url) {
        warnings.push(format!(
            "warning: payment_page_url {} points at {}, which belongs to the API: serve answers the \
             payment page at /pay only, so its payment links work only behind a proxy that sends \
             {} to /pay",
            service.config().payment_page_url,
            if path.is_empty() { "the root" } else { &path },
            if path.is_empty() { "/" } else { &path },
        ));
    }
    let request_log = match (args.quiet, args.log_format) {
        (true, _) => coinorder::RequestLog::Off,
        (false, LogFormat::Text) => coinorder::RequestLog::Text,
        (false, LogFormat::Json) => coinorder::RequestLog::Json,
    };
    let server = Server::from_listener(Arc::clone(&service), listener)
        .map_err(|e| e.to_string())?
        .with_limits(limits)
        .with_request_log(request_log);
    let handle = server.spawn(usize::from(threads));

    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "coinorder listening on http://{addr} ({environment})")
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot write to stdout: {e}"))?;
    drop(stdout);
    log.notice(&mail_note);
    for warning in &warnings {
        log.notice(warning);
    }

    // Returns on the first signal; an error means the handler is gone, so stop as well.
    let _ = stop_rx.recv();
    log.notice(&format!("shutting down (waiting up to {} s for requests in flight)", grace.as_secs()));
    // The background workers stop while the server drains, not after it, on a thread of
    // their own: a run waiting for a database another process holds locked waits out its
    // busy timeout, and one the chain's endpoint keeps waiting its own, so the wait for
    // all of it is bounded as the requests' is, and what they did not finish is done by
    // the next start (nothing committed is lost).
    let (stopped_tx, stopped_rx) = mpsc::channel();
    std::thread::spawn(move || {
        std::thread::scope(|scope| {
            scope.spawn(|| handle.shutdown());
            expiry.stop();
            delivery.stop();
            checkpoint.stop();
            chain.stop();
            if let Some(event_log) = &mut event_log {
                event_log.stop();
            }
        });
        for worker in [&expiry, &delivery, &checkpoint, &chain] {
            if let Some(error) = worker.last_error() {
                log.notice(&format!("{} failed {} time(s); last: {error}", worker.name(), worker.failures()));
            }
        }
        // The last requests' key uses, if the writer was busy when they came.
        if let Err(error) = service.record_key_uses() {
            log.notice(&format!("could not record the keys' last use: {error}"));
        }
        // The database is closed here, before `serve` returns (SQLite checkpoints its log
        // and removes it): every other holder of the service has stopped.
        drop((expiry, delivery, checkpoint, chain, event_log));
        drop(service);
        let _ = stopped_tx.send(());
    });
    if stopped_rx.recv_timeout(grace + BACKGROUND_STOP_GRACE).is_err() {
        log.notice(&format!(
            "background work still busy {} s after the signal (a webhook receiver or mail server slow to answer, a \
             database locked by another process, or a slow chain endpoint?): exiting without it",
            (grace + BACKGROUND_STOP_GRACE).as_secs()
        ));
    }
    Ok(())
}

/// Refuses to serve from files that group or others may read or write, as OpenSSH
/// refuses an open private key: anyone who reads the database sees every order and
/// customer e-mail, anyone who reads the key file can decrypt the webhook secrets and
/// forge webhooks, and a writer can change either. Missing files pass: the library
/// creates them 0600.
#[cfg(unix)]
fn refuse_open_permissions(db: &Path, key: &Path) -> CliResult<()> {
    use std::os::unix::fs::PermissionsExt;
    // SQLite's -wal file holds the latest writes in clear until a checkpoint, and -shm
    // mirrors its index: leaving them open leaks the same data.
    let side_file = |suffix: &str| {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    let (wal, shm) = (side_file("-wal"), side_file("-shm"));
    let mut present = Vec::new();
    let mut too_open = Vec::new();
    for path in [db, key, wal.as_path(), shm.as_path()] {
        // A file that cannot be read here is reported by the open that follows.
        let Ok(metadata) = std::fs::metadata(path) else { continue };
        let mode = metadata.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            too_open.push(format!("{mode:04o} for '{}'", path.display()));
        }
        present.push(shell_word(path));
    }
    if too_open.is_empty() {
        return Ok(());
    }
    Err(format!(
        "permissions {} are too open: the database holds your orders and the key file your webhook secrets; \
         chmod 600 {}, or pass --allow-open-permissions",
        too_open.join(" and "),
        present.join(" ")
    ))
}

/// Open permissions cannot be told apart from a deliberate setup on other systems (ACLs
/// decide there), so nothing is refused.
#[cfg(not(unix))]
fn refuse_open_permissions(_db: &Path, _key: &Path) -> CliResult<()> {
    Ok(())
}

/// `path` as one word of a shell command line, quoted only when it needs to be, so the
/// suggested `chmod` can be pasted as it is.
#[cfg(unix)]
fn shell_word(path: &Path) -> String {
    let text = path.to_string_lossy();
    let plain = !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%=".contains(&b));
    if plain {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

// ----- webhooks and emails -----

fn webhooks(ctx: &Ctx, command: WebhooksCommand) -> CliResult<()> {
    let mut config = ctx.config();
    if let WebhooksCommand::Deliver { send, .. } = &command {
        apply_send_settings(&mut config, send, &ctx.file)?;
    }
    let smtp = config.smtp.as_ref().map(|smtp| redact_url(&smtp.url));
    let service = open_existing(&ctx.db, config)?;
    let output = match command {
        WebhooksCommand::List { order, event_type, state, full, limit, output } => {
            let deliveries = match &order {
                Some(order_id) => service.event_deliveries(order_id).map_err(|e| ctx.explain(e, order_id))?,
                None => service.recent_event_deliveries(count(limit)).map_err(fail)?,
            };
            let rows: Value = deliveries
                .iter()
                .filter(|d| event_type.is_none_or(|wanted| d.event.event_type == wanted))
                .filter(|d| state.is_none_or(|wanted| d.state == wanted))
                .map(|d| if full { render::event_delivery(d) } else { delivery_line(d) })
                .collect();
            return print_rows(
                &rows,
                output.format,
                &[
                    ("TIME", "/created_at"),
                    ("EVENT", "/event_id"),
                    ("TYPE", "/type"),
                    ("ORDER", "/order_id"),
                    ("STATE", "/delivery/state"),
                    ("ATTEMPTS", "/delivery/attempts"),
                    ("LAST STATUS", "/delivery/last_status"),
                ],
            );
        }
        WebhooksCommand::Redeliver { event_id } => {
            service.redeliver(&event_id).map_err(|e| ctx.explain(e, &event_id))?;
            let event = service.event(&event_id).map_err(fail)?;
            let deliveries = service.event_deliveries(&event.order_id).map_err(fail)?;
            let delivery = deliveries
                .iter()
                .find(|d| d.event.event_id == event_id)
                .ok_or_else(|| format!("event {event_id} vanished while being queued"))?;
            render::event_delivery(delivery)
        }
        WebhooksCommand::Deliver { limit, .. } => {
            let webhooks = service.deliver_due(count(limit)).map_err(fail)?;
            let emails = service.send_due_emails(count(limit)).map_err(fail)?;
            json!({ "webhooks": render::delivery_report(&webhooks), "emails": email_report_json(&emails, smtp) })
        }
    };
    print_json(&output)
}

fn emails(ctx: &Ctx, command: EmailsCommand) -> CliResult<()> {
    let mut config = ctx.config();
    if let EmailsCommand::Send { send, .. } = &command {
        apply_send_settings(&mut config, send, &ctx.file)?;
        if config.smtp.is_none() {
            return Err(
                "no SMTP server configured: pass --smtp-url, or set url in the [smtp] section of --config".to_string()
            );
        }
    }
    let smtp = config.smtp.as_ref().map(|smtp| redact_url(&smtp.url));
    let service = open_existing(&ctx.db, config)?;
    let output = match command {
        EmailsCommand::List { order, limit, output } => {
            if let Some(order_id) = &order {
                service.order(order_id).map_err(|e| ctx.explain(e, order_id))?;
            }
            let rows: Value =
                service.emails(order.as_deref(), count(limit)).map_err(fail)?.iter().map(email_json).collect();
            return print_rows(
                &rows,
                output.format,
                &[
                    ("CREATED", "/created_at"),
                    ("EMAIL", "/email_id"),
                    ("ORDER", "/order_id"),
                    ("TO", "/recipient"),
                    ("STATE", "/state"),
                    ("ATTEMPTS", "/attempts"),
                    ("LAST ERROR", "/last_error"),
                ],
            );
        }
        EmailsCommand::Send { limit, .. } => {
            email_report_json(&service.send_due_emails(count(limit)).map_err(fail)?, smtp)
        }
    };
    print_json(&output)
}

/// How often `events tail` looks for new events.
const TAIL_INTERVAL: Duration = Duration::from_millis(250);

/// How long one forwarded POST of `events tail` may take.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);

/// An http(s) URL for `--forward-to`.
fn parse_forward_url(text: &str) -> Result<String, String> {
    match url::Url::parse(text) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(text.to_string()),
        Ok(_) => Err("must be an http:// or https:// URL with a host".to_string()),
        Err(e) => Err(format!("not a URL ({e})")),
    }
}

/// `events tail`: prints (and forwards) every event written from now on, until Ctrl-C.
fn tail_events(ctx: &Ctx, forward_to: Option<String>, format: Format) -> CliResult<()> {
    let service = ctx.open_existing()?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
        .map_err(|e| format!("cannot install the signal handler: {e}"))?;
    let agent: ureq::Agent =
        ureq::Agent::config_builder().timeout_global(Some(FORWARD_TIMEOUT)).http_status_as_error(false).build().into();
    let mut follower = service.follow_events(service.now());
    let target = forward_to.as_deref().map_or(String::new(), |url| format!(", forwarding to {url}"));
    eprintln!("coinorder: following {} events{target} (Ctrl-C to stop)", ctx.env);
    while !stop.load(Ordering::SeqCst) {
        for event in follower.poll(&service).map_err(fail)? {
            let line = match format {
                Format::Json => serde_json::to_string(&render::event_with_payload(&event))
                    .map_err(|e| format!("cannot render JSON: {e}"))?,
                Format::Table => format!(
                    "{}  {}  {:<15}  {}  {} -> {}",
                    event.created_at.to_iso(),
                    event.event_id,
                    event.event_type.as_str(),
                    event.order_id,
                    event.previous_status.as_str(),
                    event.status.as_str()
                ),
            };
            print_text(&line)?;
            if let Some(url) = &forward_to {
                eprintln!("coinorder: {}", forward(&service, &agent, url, &event));
            }
        }
        std::thread::sleep(TAIL_INTERVAL);
    }
    Ok(())
}

/// POSTs `event` to `url` as its webhook delivery would; what happened, for the log.
fn forward(service: &Service, agent: &ureq::Agent, url: &str, event: &coinorder::Event) -> String {
    let signed = match service.signed_webhook(event) {
        Ok(signed) => signed,
        Err(e) => return format!("{} not forwarded: {e}", event.event_id),
    };
    let started = std::time::Instant::now();
    let sent = agent
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", &signed.webhook_id)
        .header("webhook-timestamp", &signed.timestamp.to_string())
        .header("webhook-signature", &signed.signature)
        .send(signed.body.as_bytes());
    let took = started.elapsed().as_millis();
    match sent {
        Ok(response) => format!("{} -> {url}: {} in {took} ms", event.event_id, response.status().as_u16()),
        Err(e) => format!("{} -> {url}: failed after {took} ms: {e}", event.event_id),
    }
}

/// A `--limit` as a count (the parser bounds it far below `usize::MAX`).
fn count(limit: u64) -> usize {
    usize::try_from(limit).unwrap_or(usize::MAX)
}

/// An event with the gist of its delivery, for one line of `webhooks list`: state,
/// attempts and the last attempt's HTTP status (`null` before any, or when it got none).
fn delivery_line(delivery: &EventDelivery) -> Value {
    let mut value = render::event(&delivery.event);
    value["order_id"] = Value::from(delivery.event.order_id.as_str());
    value["delivery"] = json!({
        "state": delivery.state.as_str(),
        "attempts": delivery.attempts,
        "last_status": delivery.log.last().and_then(|attempt| attempt.status),
    });
    value
}

fn email_json(email: &Email) -> Value {
    json!({
        "email_id": email.email_id,
        "order_id": email.order_id,
        "recipient": email.recipient,
        "subject": email.subject,
        "state": email.state.as_str(),
        "attempts": email.attempts,
        "next_attempt_at": (email.state == EmailState::Pending).then(|| email.next_attempt_at.to_iso()),
        "last_error": email.last_error,
        "sent_at": email.sent_at.map(Timestamp::to_iso),
        "created_at": email.created_at.to_iso(),
        "text_body": email.text_body,
        "html_body": email.html_body,
    })
}

/// What an e-mail run did, and the SMTP server used (password hidden; `null`: none
/// configured, nothing sent).
fn email_report_json(report: &EmailReport, smtp: Option<String>) -> Value {
    let mut json = render::email_report(report);
    json["smtp"] = json!(smtp);
    json
}

/// Parses an exchange rate exactly (no binary float on the way).
fn parse_rate(text: &str) -> Result<Decimal, String> {
    coinorder::money::parse_decimal("rate", text).map_err(|e| e.to_string())
}

/// Parses a crypto amount exactly (no binary float on the way).
fn parse_amount(text: &str) -> Result<Decimal, String> {
    coinorder::money::parse_decimal("amount", text).map_err(|e| e.to_string())
}

/// Parses an RFC 3339 time with a zone (`2026-12-01T00:00:00Z`, `...+01:00`).
fn parse_timestamp(text: &str) -> Result<Timestamp, String> {
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .map(|t| Timestamp(t.timestamp_millis()))
        .map_err(|e| format!("must be an ISO 8601 time with a time zone, e.g. 2026-12-01T00:00:00Z ({e})"))
}

fn fail(error: coinorder::Error) -> String {
    error.to_string()
}

fn rates(ctx: &Ctx, command: RatesCommand) -> CliResult<()> {
    let service = match &command {
        RatesCommand::Set { .. } => ctx.open()?,
        _ => ctx.open_existing()?,
    };
    let output = match command {
        RatesCommand::Set { crypto, fiat, rate, valid_until } => {
            let set = service
                .set_rate(&crypto.to_ascii_uppercase(), &fiat.to_ascii_uppercase(), rate, valid_until)
                .map_err(fail)?;
            render::rate(&set)
        }
        RatesCommand::List { output } => {
            let rates = Value::Array(service.list_rates().map_err(fail)?.iter().map(render::rate).collect());
            return print_rows(
                &rates,
                output.format,
                &[
                    ("ENV", "/environment"),
                    ("CRYPTO", "/crypto"),
                    ("FIAT", "/fiat"),
                    ("RATE", "/rate"),
                    ("VALID UNTIL", "/valid_until"),
                    ("UPDATED", "/updated_at"),
                ],
            );
        }
        RatesCommand::Delete { crypto, fiat } => {
            let (crypto, fiat) = (crypto.to_ascii_uppercase(), fiat.to_ascii_uppercase());
            service.delete_rate(&crypto, &fiat).map_err(fail)?;
            json!({ "deleted": { "environment": service.environment().as_str(), "crypto": crypto, "fiat": fiat } })
        }
    };
    print_json(&output)
}

fn wallets(ctx: &Ctx, command: WalletsCommand) -> CliResult<()> {
    let service = match &command {
        WalletsCommand::Set { .. } => ctx.open()?,
        _ => ctx.open_existing()?,
    };
    let output = match command {
        WalletsCommand::Set { coin, key } => render::wallet(&service.set_wallet(&coin, &key).map_err(fail)?),
        WalletsCommand::List { output } => {
            let wallets = service.wallets().map_err(fail)?;
            let rows = Value::Array(wallets.iter().map(render::wallet).collect());
            return print_rows(
                &rows,
                output.format,
                &[
                    ("ENV", "/environment"),
                    ("COIN", "/coin"),
                    ("NEXT INDEX", "/next_index"),
                    ("FIRST ADDRESS", "/first_address"),
                    ("KEY", "/descriptor"),
                ],
            );
        }
        WalletsCommand::ShowAddress { coin, index, count } => {
            let last = index.saturating_add(count - 1);
            let addresses = (index..=last)
                .map(|i| Ok(json!({ "index": i, "address": service.wallet_address(&coin, i).map_err(fail)? })))
                .collect::<CliResult<Vec<Value>>>()?;
            Value::Array(addresses)
        }
        WalletsCommand::Remove { coin } => {
            let removed = service.remove_wallet(&coin).map_err(fail)?;
            if !removed {
                return Err(format!(
                    "no {} wallet in {} (see `coinorder wallets list`)",
                    coin.to_ascii_uppercase(),
                    service.environment()
                ));
            }
            json!({ "removed": { "environment": service.environment().as_str(), "coin": coin.to_ascii_uppercase() } })
        }
    };
    print_json(&output)
}

fn sandbox(ctx: &Ctx, command: SandboxCommand) -> CliResult<()> {
    if ctx.env == Environment::Live {
        let source = if ctx.env_given { "--env live" } else { "`env = \"live\"` in --config" };
        return Err(format!(
            "sandbox commands work on sandbox orders only, and {source} asks for live; record real payments with \
             `coinorder payments record --env live`"
        ));
    }
    let service = ctx.open_existing()?;
    let simulate = |order_id: &str, action: SimulateAction| {
        service.simulate(order_id, &action).map(|done| render::simulation(&done)).map_err(|e| ctx.explain(e, order_id))
    };
    let output = match command {
        SandboxCommand::Pay { order_id, amount, unconfirmed } => {
            simulate(&order_id, SimulateAction::Pay { amount, confirmed: !unconfirmed })?
        }
        SandboxCommand::Confirm { txid } => {
            render::payment_outcome(&service.confirm_payment(&txid).map_err(|e| ctx.explain(e, &txid))?)
        }
        SandboxCommand::Reject { txid } => {
            render::payment_outcome(&service.reject_payment(&txid).map_err(|e| ctx.explain(e, &txid))?)
        }
        SandboxCommand::Cancel { order_id } => simulate(&order_id, SimulateAction::Cancel)?,
        SandboxCommand::Expire { order_id } => simulate(&order_id, SimulateAction::Expire)?,
        SandboxCommand::Advance { minutes } => {
            let moved = service.advance_sandbox_clock(Duration::from_secs(u64::from(minutes) * 60)).map_err(fail)?;
            json!({ "advanced_minutes": minutes, "expired": moved.expired, "failed": moved.failed })
        }
        SandboxCommand::Trigger { event_type, user_id } => trigger(&service, event_type, user_id)?,
    };
    print_json(&output)
}

/// `sandbox trigger`: [`Service::trigger_sandbox_event`] for the newest active sandbox
/// key (of `user_id`); the order and the events it emitted.
fn trigger(service: &Service, wanted: EventType, user_id: Option<i64>) -> CliResult<Value> {
    let mut keys: Vec<_> = service
        .list_keys()
        .map_err(fail)?
        .into_iter()
        .filter(|key| key.environment == Environment::Sandbox && key.status == coinorder::KeyStatus::Active)
        .filter(|key| user_id.is_none_or(|user| key.user_id == user))
        .collect();
    keys.sort_by_key(|key| key.created_at_ms);
    let Some(key) = keys.pop() else {
        let whose = user_id.map_or(String::new(), |user| format!(" of user {user}"));
        return Err(format!(
            "no active sandbox key{whose} to own the order: create one with `coinorder keys create --user-id {}`",
            user_id.unwrap_or(1)
        ));
    };
    let merchant = Merchant { key_id: key.id.clone(), user_id: key.user_id, environment: Environment::Sandbox };
    let (order, events) = service.trigger_sandbox_event(&merchant, wanted).map_err(fail)?;
    let mut value = render::host_order(&order);
    value["events"] = events.iter().map(render::event).collect();
    Ok(value)
}

/// `payments`: the host's chain watcher by hand, in either environment.
fn payments(ctx: &Ctx, command: PaymentsCommand) -> CliResult<()> {
    let service = ctx.open_existing()?;
    let output = match command {
        PaymentsCommand::Record { order_id, txid, amount, unconfirmed } => render::payment_outcome(
            &service.record_payment(&order_id, &txid, amount, !unconfirmed).map_err(|e| ctx.explain(e, &order_id))?,
        ),
        PaymentsCommand::Confirm { txid } => {
            render::payment_outcome(&service.confirm_payment(&txid).map_err(|e| ctx.explain(e, &txid))?)
        }
        PaymentsCommand::Reject { txid } => {
            render::payment_outcome(&service.reject_payment(&txid).map_err(|e| ctx.explain(e, &txid))?)
        }
        PaymentsCommand::List { order_id, output } => {
            let payments = service.order_payments(&order_id).map_err(|e| ctx.explain(e, &order_id))?;
            return print_rows(
                &payments.iter().map(render::payment).collect(),
                output.format,
                &[
                    ("TXID", "/txid"),
                    ("AMOUNT", "/amount"),
                    ("COIN", "/currency"),
                    ("STATE", "/state"),
                    ("COUNTS", "/counts"),
                    ("SEEN", "/seen_at"),
                    ("SETTLED", "/settled_at"),
                ],
            );
        }
    };
    print_json(&output)
}

fn orders(ctx: &Ctx, command: OrdersCommand) -> CliResult<()> {
    let service = ctx.open_existing()?;
    let output = match command {
        OrdersCommand::List { status, user_id, since, limit, output } => {
            let query = HostOrderQuery { status, user_id, since, limit };
            let orders = service.host_orders(&query).map_err(fail)?;
            let rows: Value = orders.iter().map(render::host_order_summary).collect();
            return print_rows(
                &rows,
                output.format,
                &[
                    ("CREATED", "/created_at"),
                    ("ORDER", "/order_id"),
                    ("USER", "/user_id"),
                    ("STATUS", "/status"),
                    ("PRICE", "/price_amount"),
                    ("", "/price_currency"),
                    ("MERCHANT ORDER", "/merchant_order_id"),
                    ("TITLE", "/title"),
                ],
            );
        }
        OrdersCommand::Show { order_id } => {
            let mut value = render::host_order(&service.order(&order_id).map_err(|e| ctx.explain(e, &order_id))?);
            let payments = service.order_payments(&order_id).map_err(fail)?;
            let events = service.order_events(&order_id).map_err(fail)?;
            value["payments"] = payments.iter().map(render::payment).collect();
            value["events"] = events.iter().map(render::event).collect();
            value
        }
        OrdersCommand::MarkPaid { order_id } => {
            render::host_order(&service.mark_paid(&order_id).map_err(|e| ctx.explain(e, &order_id))?)
        }
        OrdersCommand::Cancel { order_id } => {
            let current = service.order(&order_id).map_err(|e| ctx.explain(e, &order_id))?;
            // The host acts for the order's own merchant.
            let merchant = Merchant {
                key_id: current.order.key_id.clone(),
                user_id: current.order.user_id,
                environment: current.order.environment,
            };
            render::host_order(&service.cancel_order(&merchant, &order_id).map_err(fail)?)
        }
    };
    print_json(&output)
}

fn bind(addr: &str) -> CliResult<TcpListener> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(|e| format!("cannot listen on {addr}: {e}"))?.collect();
    TcpListener::bind(&addrs[..]).map_err(|e| format!("cannot listen on {addr}: {e}"))
}

/// The address a browser on this machine can reach: a wildcard bind becomes loopback.
fn reachable(mut addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    addr
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_example_settings_file_is_valid_and_complete() {
        let text = include_str!("../../coinorder.example.toml");
        let file = parse_config(text).expect("coinorder.example.toml parses");
        assert_eq!(file.db, Some(PathBuf::from("coinorder.db")));
        assert!(matches!(file.server.env, Some(EnvArg::Sandbox)));
        assert_eq!(file.server.addr.as_deref(), Some(DEFAULT_ADDR));
        assert_eq!(file.server.invoice_ttl, Some(DEFAULT_INVOICE_TTL));
        assert_eq!(file.server.threads, Some(DEFAULT_THREADS));
        assert_eq!(file.webhooks.timeout_secs, Some(15));
        assert_eq!(file.smtp.from.as_deref(), Some(DEFAULT_SMTP_FROM));
        assert_eq!(file.sqlite.synchronous.as_deref(), Some("full"));
        let mut config = Config::new(Environment::Sandbox);
        let normal = parse_config("secret_key_file = \"k.key\"\n[sqlite]\nsynchronous = \"normal\"").expect("parses");
        apply_storage_settings(&mut config, &normal);
        assert!(!config.sqlite.synchronous_full);
        assert_eq!(config.secret_key_path, Some(PathBuf::from("k.key")));
        // Every known key is documented in the example (set or commented out).
        for (section, keys) in KNOWN_KEYS {
            if !section.is_empty() {
                assert!(text.contains(&format!("[{section}]")), "[{section}] missing");
            }
            for key in *keys {
                assert!(text.contains(&format!("{key} =")) || text.contains(&format!("[{key}]")), "{key} undocumented");
            }
        }
    }

    #[test]
    fn settings_file_errors_name_the_key() {
        for (text, named) in [
            ("bogus = 1", "`bogus`"),
            ("[server]\nport = 80", "`server.port`"),
            ("[smtp]\nurl = \"smtp://x\"\npassword = \"p\"", "`smtp.password`"),
            ("[webhooks]\ntimeout_secs = 0", "webhooks.timeout_secs"),
            ("[server]\ninvoice_ttl = 0", "server.invoice_ttl"),
            ("[server]\nthreads = 0", "server.threads"),
            ("[server]\ninvoice_ttl = \"30m\"", "invoice_ttl"),
            ("[server]\nenv = \"staging\"", "staging"),
            ("[[server]]\nenv = \"live\"", "server"),
            ("[sqlite]\nsynchronous = \"off\"", "sqlite.synchronous"),
            ("[sqlite]\nbusy_timeout = 5", "`sqlite.busy_timeout`"),
        ] {
            let error = parse_config(text).expect_err(text);
            assert!(error.contains(named), "{text:?}: {error}");
        }
        let file = parse_config("").expect("empty file");
        assert!(file.db.is_none() && file.server.env.is_none() && file.smtp.url.is_none());
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("smtp://user:s3cret@mail.example:587?tls=required"),
            "smtp://user:***@mail.example:587?tls=***"
        );
        assert_eq!(redact_url("smtp://127.0.0.1:2525"), "smtp://127.0.0.1:2525");
        assert!(!redact_url("smtps://u:p%40ss@h").contains("p%40ss"));
        let error = check_smtp_url("smtp://user:s3cret@mail.example:587?tls=maybe").expect_err("bad tls");
        assert!(!error.contains("s3cret"), "{error}");
        let error = check_smtp_url("smtp://user:s3cret@[bad").expect_err("bad URL");
        assert!(!error.contains("s3cret"), "{error}");
        check_smtp_url("smtps://user:s3cret@mail.example").expect("smtps");
    }

    #[test]
    fn wildcard_addresses_become_loopback() {
        let addr: SocketAddr = "0.0.0.0:8080".parse().expect("valid address");
        assert_eq!(reachable(addr).to_string(), "127.0.0.1:8080");
        let addr: SocketAddr = "[::]:80".parse().expect("valid address");
        assert_eq!(reachable(addr).to_string(), "[::1]:80");
        let addr: SocketAddr = "10.0.0.1:80".parse().expect("valid address");
        assert_eq!(reachable(addr), addr);
    }
}
