//! `coinorder`: manage API keys and run the order service's HTTP API locally.
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

use clap::{Args, Parser, Subcommand, ValueEnum};
use coinorder::{Config, CreatedApiKey, Environment, NewApiKey, RateLimit, Server, Service};
use serde_json::{json, Value};

/// Crypto-payment order service: API keys and a local HTTP server for `/v1/orders`.
#[derive(Debug, Parser)]
#[command(name = "coinorder", version, propagate_version = true)]
#[command(after_help = "Examples:
  coinorder keys create --user-id 42 --env sandbox
  coinorder keys list
  coinorder serve --env sandbox --addr 127.0.0.1:8080
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
    /// Serve the HTTP API (`POST /v1/orders`, `GET /v1/orders`, `GET /v1/orders/<id>`).
    ///
    /// Prints `coinorder listening on http://<addr> (<env>)` once listening, then serves
    /// until interrupted (Ctrl-C or SIGTERM), answers the requests in flight (waiting up
    /// to 10 s) and exits 0. A second interrupt exits at once, with status 1.
    Serve(ServeArgs),
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
    Ok(())
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
