//! `coinorder`: manage API keys, exchange rates and orders, simulate sandbox payments,
//! and run the order service's HTTP API locally.
//!
//! Every command works on one SQLite database (`--db`, `COINORDER_DB`, default
//! `./coinorder.db`) and prints JSON on stdout; failures print `error: <message>` on
//! stderr and exit with status 1 (2 for a malformed command line).

use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use coinorder::money::{to_json_number, Decimal};
use coinorder::{
    Config, CreatedApiKey, Environment, Event, Merchant, NewApiKey, OrderWithInvoice, Payment, PaymentOutcome,
    RateLimit, Server, Service, SimulateAction, Timestamp,
};
use serde_json::{json, Value};

/// How often `serve` moves orders whose quote ran out.
const EXPIRY_INTERVAL: Duration = Duration::from_secs(1);

/// Crypto-payment order service: API keys, rates, orders, sandbox simulation and a local
/// HTTP server for `/v1/orders` and the hosted payment page.
#[derive(Debug, Parser)]
#[command(name = "coinorder", version, propagate_version = true)]
#[command(after_help = "Examples:
  coinorder keys create --user-id 42 --env sandbox
  coinorder keys list
  coinorder rates set --env live BTC USD 64250.5 --valid-until 2026-12-01T00:00:00Z
  coinorder serve --env sandbox --addr 127.0.0.1:8080
  coinorder sandbox pay 7d1f0c9e-8a53-4a57-9d61-3f0f3c2b8e11 --unconfirmed
  coinorder sandbox confirm sandbox_tx_0123456789abcdef0123456789abcdef
  COINORDER_DB=/var/lib/coinorder/orders.db coinorder serve --env live")]
struct Cli {
    /// SQLite database file; created (with its `<PATH>.key` secret file) if missing.
    ///
    /// Accepted before or after the subcommand.
    #[arg(long, global = true, value_name = "PATH", env = "COINORDER_DB", default_value = "./coinorder.db")]
    db: PathBuf,

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
    /// to 10 s) and exits 0. A second interrupt exits at once, with status 1.
    ///
    /// While serving, a background worker checks every second for invoices whose quote
    /// ran out: NEW orders become EXPIRED, PENDING orders whose confirmed payments fall
    /// short (with none awaiting confirmation) become FAILED. It stops on shutdown.
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
    /// visible to these commands.
    ///
    /// Each command prints the order with its invoice as JSON after the step.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Inspect and settle orders by hand, as the host (any merchant's orders).
    #[command(subcommand)]
    Orders(OrdersCommand),
}

#[derive(Debug, Subcommand)]
enum RatesCommand {
    /// Set or replace the rate of CRYPTO priced in FIAT, and print it.
    Set {
        /// The environment the rate applies to.
        #[arg(long, value_name = "ENV")]
        env: EnvArg,
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
    /// List the rates set for an environment (built-in sandbox rates are not listed).
    List {
        /// The environment whose rates are listed.
        #[arg(long, value_name = "ENV")]
        env: EnvArg,
    },
    /// Delete the rate of CRYPTO priced in FIAT (in sandbox the built-in rate applies again).
    Delete {
        /// The environment the rate belongs to.
        #[arg(long, value_name = "ENV")]
        env: EnvArg,
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
}

#[derive(Debug, Subcommand)]
enum OrdersCommand {
    /// Print an order with its invoice, payments and events.
    Show {
        /// The environment the order belongs to.
        #[arg(long, value_name = "ENV")]
        env: EnvArg,
        /// The order's id (`order_id`).
        order_id: String,
    },
    /// Accept a late or short payment by hand: an EXPIRED or FAILED order becomes PAID
    /// (its `order.paid` event says it was marked paid).
    MarkPaid {
        /// The environment the order belongs to.
        #[arg(long, value_name = "ENV")]
        env: EnvArg,
        /// The order's id (`order_id`).
        order_id: String,
    },
    /// Cancel an order on behalf of its merchant (NEW orders only).
    Cancel {
        /// The environment the order belongs to.
        #[arg(long, value_name = "ENV")]
        env: EnvArg,
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
        /// The environment the key works in; fixed for the key's life.
        #[arg(long, value_name = "ENV")]
        env: EnvArg,
        /// Default webhook URL for the key's orders (an absolute http(s) URL).
        #[arg(long, value_name = "URL")]
        webhook_url: Option<String>,
    },
    /// List every key of every environment (never plain keys or secrets).
    List,
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
    /// Remove the key's default webhook URL.
    ClearWebhook {
        /// The key's id (`key_...`), as shown by `keys list`.
        id: String,
    },
    /// Replace the key's webhook signing secret and print the key with the new
    /// `webhook_secret`.
    RotateSecret {
        /// The key's id (`key_...`), as shown by `keys list`.
        id: String,
    },
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// The environment served; only keys of this environment are accepted.
    #[arg(long, value_name = "ENV")]
    env: EnvArg,
    /// Address to listen on; port 0 picks a free port (printed in the listening line).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080")]
    addr: String,
    /// Base URL of the hosted payment page; `payment_url` is this plus `?id=<order_id>`.
    /// Default: `http://<listening address>/pay`.
    #[arg(long, value_name = "URL")]
    payment_page_url: Option<String>,
    /// Requests per second allowed per API key; 0 turns the limit off. Default 100.
    #[arg(long, value_name = "N")]
    rate_limit: Option<u32>,
    /// Largest burst of requests allowed per API key. Default: the --rate-limit value.
    #[arg(long, value_name = "N")]
    rate_burst: Option<u32>,
    /// Worker threads answering requests concurrently.
    #[arg(long, value_name = "N", default_value_t = 8,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: u16,
    /// How long a new invoice's quote stays valid, in seconds; after that the order
    /// expires (checked every second while serving).
    #[arg(long, value_name = "SECONDS", default_value_t = 1800,
          value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    invoice_ttl: u64,
}

/// `sandbox` or `live` on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
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
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> CliResult<()> {
    match cli.command {
        Command::Keys(command) => keys(&cli.db, command),
        Command::Serve(args) => serve(&cli.db, args),
        Command::Rates(command) => rates(&cli.db, command),
        Command::Sandbox(command) => sandbox(&cli.db, command),
        Command::Orders(command) => orders(&cli.db, command),
    }
}

fn open(db: &Path, config: Config) -> CliResult<Service> {
    Service::open(db, config).map_err(|e| format!("cannot open database {}: {e}", db.display()))
}

fn keys(db: &Path, command: KeysCommand) -> CliResult<()> {
    // Key management works on keys of both environments whatever the service's own.
    let environment = match &command {
        KeysCommand::Create { env, .. } => Environment::from(*env),
        _ => Environment::Sandbox,
    };
    let service = open(db, Config::new(environment))?;
    let output = match command {
        KeysCommand::Create { user_id, env, webhook_url } => {
            let created = service
                .create_key(NewApiKey { user_id, environment: env.into(), webhook_url })
                .map_err(|e| e.to_string())?;
            created_key_json(&created)?
        }
        KeysCommand::List => {
            let keys = service.list_keys().map_err(|e| e.to_string())?;
            to_json(&keys)?
        }
        KeysCommand::Activate { id } => key_json(service.activate_key(&id))?,
        KeysCommand::Deactivate { id } => key_json(service.deactivate_key(&id))?,
        KeysCommand::Delete { id } => {
            service.delete_key(&id).map_err(|e| e.to_string())?;
            json!({ "deleted": id })
        }
        KeysCommand::SetWebhook { id, url } => key_json(service.set_key_webhook_url(&id, Some(&url)))?,
        KeysCommand::ClearWebhook { id } => key_json(service.set_key_webhook_url(&id, None))?,
        KeysCommand::RotateSecret { id } => {
            let secret = service.rotate_key_webhook_secret(&id).map_err(|e| e.to_string())?;
            let mut value = key_json(service.get_key(&id))?;
            value["webhook_secret"] = Value::from(secret.expose());
            value
        }
    };
    print_json(&output)
}

fn to_json<T: serde::Serialize>(value: &T) -> CliResult<Value> {
    serde_json::to_value(value).map_err(|e| format!("cannot render JSON: {e}"))
}

fn key_json(key: coinorder::Result<coinorder::ApiKey>) -> CliResult<Value> {
    to_json(&key.map_err(|e| e.to_string())?)
}

/// The stored key plus, this once, the plain key and the webhook signing secret.
fn created_key_json(created: &CreatedApiKey) -> CliResult<Value> {
    let mut value = to_json(&created.key)?;
    value["key"] = Value::from(created.plain_key.expose());
    value["webhook_secret"] = Value::from(created.webhook_secret.expose());
    Ok(value)
}

fn print_json(value: &Value) -> CliResult<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| format!("cannot render JSON: {e}"))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}").and_then(|()| stdout.flush()).map_err(|e| format!("cannot write to stdout: {e}"))
}

fn serve(db: &Path, args: ServeArgs) -> CliResult<()> {
    let environment = Environment::from(args.env);
    // Bind first: the payment page URL defaults to this very server, whose port is only
    // known once bound (`--addr 127.0.0.1:0`).
    let listener = bind(&args.addr)?;
    let addr = listener.local_addr().map_err(|e| format!("cannot read the listening address: {e}"))?;

    let mut config = Config::new(environment);
    config.invoice_ttl = Duration::from_secs(args.invoice_ttl);
    config.payment_page_url = args.payment_page_url.unwrap_or_else(|| format!("http://{}/pay", reachable(addr)));
    if let Some(per_second) = args.rate_limit {
        config.rate_limit = if per_second == 0 {
            RateLimit::OFF
        } else {
            RateLimit { per_second, burst: args.rate_burst.unwrap_or(per_second) }
        };
    } else if let Some(burst) = args.rate_burst {
        config.rate_limit.burst = burst;
    }
    let service = Arc::new(open(db, config)?);

    // Install the signal handler before announcing the address, so that a SIGTERM sent
    // as soon as the line is read already means "shut down cleanly".
    // A second signal quits at once instead of waiting for requests in flight.
    let (stop_tx, stop_rx) = mpsc::channel();
    let signals = AtomicUsize::new(0);
    ctrlc::set_handler(move || {
        if signals.fetch_add(1, Ordering::SeqCst) == 0 {
            let _ = stop_tx.send(());
        } else {
            eprintln!("error: interrupted again; exiting without waiting for requests in flight");
            std::process::exit(1);
        }
    })
    .map_err(|e| format!("cannot install the signal handler: {e}"))?;

    let mut expiry =
        service.start_expiry_worker(EXPIRY_INTERVAL).map_err(|e| format!("cannot start the expiry worker: {e}"))?;
    let server = Server::from_listener(service, listener).map_err(|e| e.to_string())?;
    let handle = server.spawn(usize::from(args.threads));

    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "coinorder listening on http://{addr} ({environment})")
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot write to stdout: {e}"))?;
    drop(stdout);

    // Returns on the first signal; an error means the handler is gone, so stop as well.
    let _ = stop_rx.recv();
    eprintln!("coinorder: shutting down (waiting up to 10 s for requests in flight)");
    handle.shutdown();
    expiry.stop();
    Ok(())
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

fn rates(db: &Path, command: RatesCommand) -> CliResult<()> {
    let env = match &command {
        RatesCommand::Set { env, .. } | RatesCommand::List { env } | RatesCommand::Delete { env, .. } => *env,
    };
    let service = open(db, Config::new(env.into()))?;
    let output = match command {
        RatesCommand::Set { crypto, fiat, rate, valid_until, .. } => {
            let set = service
                .set_rate(&crypto.to_ascii_uppercase(), &fiat.to_ascii_uppercase(), rate, valid_until)
                .map_err(fail)?;
            rate_json(&set)
        }
        RatesCommand::List { .. } => Value::Array(service.list_rates().map_err(fail)?.iter().map(rate_json).collect()),
        RatesCommand::Delete { crypto, fiat, .. } => {
            let (crypto, fiat) = (crypto.to_ascii_uppercase(), fiat.to_ascii_uppercase());
            service.delete_rate(&crypto, &fiat).map_err(fail)?;
            json!({ "deleted": { "environment": service.environment().as_str(), "crypto": crypto, "fiat": fiat } })
        }
    };
    print_json(&output)
}

fn rate_json(rate: &coinorder::Rate) -> Value {
    json!({
        "environment": rate.environment.as_str(),
        "crypto": rate.crypto,
        "fiat": rate.fiat,
        "rate": to_json_number(rate.rate),
        "valid_until": rate.valid_until.map(Timestamp::to_iso),
        "updated_at": rate.updated_at.to_iso(),
    })
}

fn sandbox(db: &Path, command: SandboxCommand) -> CliResult<()> {
    let service = open(db, Config::new(Environment::Sandbox))?;
    let output = match command {
        SandboxCommand::Pay { order_id, amount, unconfirmed } => {
            let amount = match amount {
                Some(amount) => amount,
                None => amount_due(&service, &order_id)?,
            };
            let txid = format!("sandbox_tx_{}", uuid::Uuid::new_v4().simple());
            outcome_json(&service.record_payment(&order_id, &txid, amount, !unconfirmed).map_err(fail)?)
        }
        SandboxCommand::Confirm { txid } => outcome_json(&service.confirm_payment(&txid).map_err(fail)?),
        SandboxCommand::Reject { txid } => outcome_json(&service.reject_payment(&txid).map_err(fail)?),
        SandboxCommand::Cancel { order_id } => order_json(&service.customer_cancel(&order_id).map_err(fail)?),
        SandboxCommand::Expire { order_id } => {
            order_json(&service.simulate(&order_id, &SimulateAction::Expire).map_err(fail)?)
        }
    };
    print_json(&output)
}

/// What is still due on an order (see `Service::amount_due`); an error when nothing is.
fn amount_due(service: &Service, order_id: &str) -> CliResult<Decimal> {
    let current = service.order(order_id).map_err(fail)?;
    let due = service.amount_due(order_id).map_err(fail)?;
    if due <= Decimal::ZERO {
        return Err(format!(
            "nothing is due on order {order_id} (it is {}); pass --amount to pay anyway",
            current.order.status
        ));
    }
    Ok(due)
}

fn orders(db: &Path, command: OrdersCommand) -> CliResult<()> {
    let env = match &command {
        OrdersCommand::Show { env, .. } | OrdersCommand::MarkPaid { env, .. } | OrdersCommand::Cancel { env, .. } => {
            *env
        }
    };
    let service = open(db, Config::new(env.into()))?;
    let output = match command {
        OrdersCommand::Show { order_id, .. } => {
            let mut value = order_json(&service.order(&order_id).map_err(fail)?);
            let payments = service.order_payments(&order_id).map_err(fail)?;
            let events = service.order_events(&order_id).map_err(fail)?;
            value["payments"] = payments.iter().map(payment_json).collect();
            value["events"] = events.iter().map(event_json).collect();
            value
        }
        OrdersCommand::MarkPaid { order_id, .. } => order_json(&service.mark_paid(&order_id).map_err(fail)?),
        OrdersCommand::Cancel { order_id, .. } => {
            let current = service.order(&order_id).map_err(fail)?;
            // The host acts for the order's own merchant.
            let merchant = Merchant {
                key_id: current.order.key_id.clone(),
                user_id: current.order.user_id,
                environment: current.order.environment,
            };
            order_json(&service.cancel_order(&merchant, &order_id).map_err(fail)?)
        }
    };
    print_json(&output)
}

/// An order with its invoice: the members of Get Order (spec §2.3, §2.4) plus what the
/// host may see (environment, marked_paid, the quoted rate and deposit address).
fn order_json(current: &OrderWithInvoice) -> Value {
    let (order, invoice) = (&current.order, &current.invoice);
    json!({
        "order": {
            "order_id": order.order_id,
            "user_id": order.user_id,
            "environment": order.environment.as_str(),
            "merchant_order_id": order.merchant_order_id,
            "title": order.title,
            "description": order.description,
            "callback_url": order.callback_url,
            "price_amount": to_json_number(order.amount),
            "price_currency": order.currency,
            "receive_currency": order.receive_currency,
            "status": order.status.as_str(),
            "marked_paid": order.marked_paid,
            "created_at": order.created_at.to_iso(),
            "updated_at": order.updated_at.to_iso(),
        },
        "invoice": {
            "invoice_id": invoice.invoice_id,
            "order_id": invoice.order_id,
            "amount": to_json_number(invoice.amount),
            "currency": invoice.currency,
            "rate": to_json_number(invoice.rate),
            "status": invoice.status.as_str(),
            "address": invoice.address,
            "payment_uri": invoice.payment_uri,
            "created_at": invoice.created_at.to_iso(),
            "expired_at": invoice.expired_at.to_iso(),
            "expired_at_t": invoice.expired_at.as_millis(),
            "updated_at": invoice.updated_at.to_iso(),
            "receive_amount": to_json_number(invoice.receive_amount),
            "receive_currency": invoice.receive_currency,
        },
    })
}

fn payment_json(payment: &Payment) -> Value {
    json!({
        "txid": payment.txid,
        "amount": to_json_number(payment.amount),
        "currency": payment.currency,
        "state": payment.state.as_str(),
        "counts": payment.counts,
        "seen_at": payment.seen_at.to_iso(),
        "settled_at": payment.settled_at.map(Timestamp::to_iso),
    })
}

fn event_json(event: &Event) -> Value {
    json!({
        "event_id": event.event_id,
        "type": event.event_type.as_str(),
        "sequence": event.sequence,
        "previous_status": event.previous_status.as_str(),
        "status": event.status.as_str(),
        "created_at": event.created_at.to_iso(),
    })
}

/// A payment step: the `txid` first (what `sandbox confirm`/`reject` take), the payment,
/// the events it emitted, and the order after it.
fn outcome_json(outcome: &PaymentOutcome) -> Value {
    let mut value = json!({
        "txid": outcome.payment.txid,
        "duplicate": outcome.duplicate,
        "payment": payment_json(&outcome.payment),
        "events": outcome.events.iter().map(event_json).collect::<Vec<_>>(),
    });
    let order = order_json(&outcome.order);
    value["order"] = order["order"].clone();
    value["invoice"] = order["invoice"].clone();
    value
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
    fn wildcard_addresses_become_loopback() {
        let addr: SocketAddr = "0.0.0.0:8080".parse().expect("valid address");
        assert_eq!(reachable(addr).to_string(), "127.0.0.1:8080");
        let addr: SocketAddr = "[::]:80".parse().expect("valid address");
        assert_eq!(reachable(addr).to_string(), "[::1]:80");
        let addr: SocketAddr = "10.0.0.1:80".parse().expect("valid address");
        assert_eq!(reachable(addr), addr);
    }
}
