//! coinorder on PostgreSQL next to coinorder on SQLite, and next to a bare `postgres`
//! crate INSERT of the same kind of row: what the second backend costs, and how much of
//! that is the server itself. Prints numbers; asserts nothing. Run it through
//! `scripts/bench-postgres` (which starts a throwaway loopback server with fsync on), or
//! against a server of your own:
//!
//! ```sh
//! COINORDER_BENCH_POSTGRES=postgres://coinorder@127.0.0.1:5432/postgres \
//!     cargo bench --features postgres --bench backends -- --duration 2 --rounds 3
//! ```
//!
//! The role in the URL must be allowed to `CREATE DATABASE`: the bench creates two fresh
//! databases (`coinorder_bench_<pid>` for coinorder, `coinorder_bench_raw_<pid>` for the
//! baseline) and drops them at the end.
//!
//! Workloads, each run with 1, 4 and 16 client threads (`--threads`) sharing one
//! `Service` per backend (rate limiting off); every thread authenticates once:
//! - create: `Service::create_order` (USD 10; order + invoice in one transaction). The raw
//!   baseline is one prepared INSERT of an order-like row (21 columns, the real order's
//!   values and its stored 201 body) into a one-table database with only a primary key,
//!   in autocommit: one transaction, one commit flush per insert, one round trip.
//! - get: `Service::get_order` of a random one of the orders created before the rounds.
//! - list: `Service::list_orders`, newest first, a page of 50.
//!
//! Each cell counts calls over a fixed time (`--duration`, default 2 s) and repeats in
//! `--rounds` (default 3) interleaved rounds — round r runs every workload and thread
//! count with SQLite, PostgreSQL, then raw — so a load spike on a shared machine lands on
//! all backends alike. The table gives the median, the spread min–max, and the ratios of
//! the medians.

#[path = "support/mod.rs"]
mod support;

use std::error::Error;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use coinorder::{Config, CreateOrder, Environment, ListOrders, Merchant, NewApiKey, RateLimit, Service};
use support::{cpu_model, load_average, Rng};

/// The variable holding the server URL.
const SERVER_VAR: &str = "COINORDER_BENCH_POSTGRES";
/// A fixed secret key (32 bytes, base64): the databases are thrown away.
const SECRET_KEY: &str = "Y29pbm9yZGVyLXRlc3Qta2V5LTMyLWJ5dGVzLWxvbmc=";
/// How long each backend runs each workload at the top thread count before the rounds,
/// to fill the connection pools and caches.
const WARMUP: Duration = Duration::from_millis(300);

const USAGE: &str = "usage: cargo bench --features postgres --bench backends -- \
[--duration SECS] [--rounds N] [--threads 1,4,16] [--orders N]
  --duration SECS  measuring time per cell (default 2)
  --rounds N       interleaved rounds (default 3)
  --threads LIST   client thread counts (default 1,4,16)
  --orders N       orders created before the rounds for get and list (default 1000)
needs COINORDER_BENCH_POSTGRES=postgres://user@host:port/db (a role that may CREATE DATABASE);
scripts/bench-postgres starts a throwaway server and sets it";

struct Options {
    duration: Duration,
    rounds: usize,
    threads: Vec<usize>,
    orders: usize,
}

fn options() -> Result<Options, String> {
    let mut options = Options { duration: Duration::from_secs(2), rounds: 3, threads: vec![1, 4, 16], orders: 1_000 };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        // `cargo bench` passes `--bench` to every benchmark binary.
        if arg == "--bench" {
            continue;
        }
        if arg == "--help" || arg == "-h" {
            return Err(USAGE.into());
        }
        let value = args.next().ok_or_else(|| format!("{arg} needs a value\n{USAGE}"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{arg} {value}: {e}\n{USAGE}");
        match arg.as_str() {
            "--duration" => {
                let secs: f64 = value.parse().map_err(|e| bad(&e))?;
                if !(secs > 0.0 && secs < 3600.0) {
                    return Err(bad(&"must be a number of seconds above 0"));
                }
                options.duration = Duration::from_secs_f64(secs);
            }
            "--rounds" => options.rounds = value.parse().map_err(|e| bad(&e))?,
            "--orders" => options.orders = value.parse().map_err(|e| bad(&e))?,
            "--threads" => {
                options.threads = value
                    .split(',')
                    .map(|n| n.trim().parse::<usize>())
                    .collect::<Result<_, _>>()
                    .map_err(|e| bad(&e))?
            }
            _ => return Err(format!("unknown argument {arg}\n{USAGE}")),
        }
    }
    if options.rounds == 0 || options.orders == 0 || options.threads.is_empty() || options.threads.contains(&0) {
        return Err(format!("--rounds, --orders and every --threads count must be positive\n{USAGE}"));
    }
    Ok(options)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Workload {
    Create,
    Get,
    List,
}

impl Workload {
    const ALL: [Workload; 3] = [Workload::Create, Workload::Get, Workload::List];

    fn name(self) -> &'static str {
        match self {
            Workload::Create => "create",
            Workload::Get => "get",
            Workload::List => "list 50",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
    Raw,
}

impl Backend {
    const ALL: [Backend; 3] = [Backend::Sqlite, Backend::Postgres, Backend::Raw];

    fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::Raw => "raw",
        }
    }

    /// The raw baseline exists for creates only.
    fn runs(self, workload: Workload) -> bool {
        self != Backend::Raw || workload == Workload::Create
    }
}

type Fallible<T> = Result<T, String>;

/// Runs `threads` workers for `duration` and returns the calls per second of them all.
/// `make(i)` builds worker `i` (connect, authenticate) before the clock starts; the
/// worker is then called until its time is up.
fn measure<W>(threads: usize, duration: Duration, make: impl Fn(usize) -> Fallible<W> + Sync) -> Fallible<f64>
where
    W: FnMut() -> Fallible<()>,
{
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, make) = (&barrier, &make);
                scope.spawn(move || -> Fallible<u64> {
                    let worker = make(i);
                    // Everyone reaches the barrier, even a worker that failed to start.
                    barrier.wait();
                    let mut worker = worker?;
                    let end = Instant::now() + duration;
                    let mut calls = 0u64;
                    while Instant::now() < end {
                        worker()?;
                        calls += 1;
                    }
                    Ok(calls)
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        let mut calls = 0;
        let mut failure = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(n)) => calls += n,
                Ok(Err(e)) => failure = Some(e),
                Err(_) => failure = Some("a worker thread panicked".to_string()),
            }
        }
        let elapsed = started.elapsed();
        match failure {
            Some(e) => Err(e),
            None => Ok(calls as f64 / elapsed.as_secs_f64()),
        }
    })
}

/// One coinorder backend under test.
struct Engine {
    service: Service,
    plain_key: String,
    /// Orders created before the rounds, for get.
    ids: Vec<String>,
}

impl Engine {
    fn open(target: &str, secret_key_path: Option<PathBuf>) -> Result<Engine, Box<dyn Error>> {
        let mut config = Config::new(Environment::Sandbox);
        config.rate_limit = RateLimit::OFF;
        config.secret_key_path = secret_key_path;
        if !config.sqlite.synchronous_full {
            return Err("expected synchronous=FULL as the default".into());
        }
        let service = Service::open(target, config)?;
        let key = service.create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None })?;
        Ok(Engine { service, plain_key: key.plain_key.expose().to_string(), ids: Vec::new() })
    }

    fn merchant(&self) -> Fallible<Merchant> {
        self.service.authenticate(Some(&self.plain_key)).map_err(|e| format!("authenticate: {e}"))
    }

    /// Creates `count` orders on 4 threads and keeps their ids.
    fn preload(&mut self, count: usize) -> Fallible<()> {
        let threads = 4.min(count);
        let request = create_request();
        let this: &Engine = self;
        let ids = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|i| {
                    let request = &request;
                    scope.spawn(move || -> Fallible<Vec<String>> {
                        let merchant = this.merchant()?;
                        let share = count / threads + usize::from(i < count % threads);
                        (0..share)
                            .map(|_| {
                                this.service
                                    .create_order(&merchant, request)
                                    .map(|created| created.order.order.order_id)
                                    .map_err(|e| format!("create_order: {e}"))
                            })
                            .collect()
                    })
                })
                .collect();
            let mut ids = Vec::with_capacity(count);
            for handle in handles {
                ids.extend(handle.join().map_err(|_| "a preload thread panicked".to_string())??);
            }
            Ok::<_, String>(ids)
        })?;
        self.ids = ids;
        Ok(())
    }

    fn run(&self, workload: Workload, threads: usize, duration: Duration) -> Fallible<f64> {
        let request = create_request();
        let query = ListOrders { limit: 50, ..Default::default() };
        let (request, query) = (&request, &query);
        measure(threads, duration, |i| {
            let merchant = self.merchant()?;
            let mut rng = Rng::new(i as u64 + 1);
            Ok(move || -> Fallible<()> {
                match workload {
                    Workload::Create => {
                        let created =
                            self.service.create_order(&merchant, request).map_err(|e| format!("create_order: {e}"))?;
                        black_box(created);
                    }
                    Workload::Get => {
                        let id = &self.ids[rng.below(self.ids.len())];
                        let found = self.service.get_order(&merchant, id).map_err(|e| format!("get_order: {e}"))?;
                        black_box(found);
                    }
                    Workload::List => {
                        let page =
                            self.service.list_orders(&merchant, query).map_err(|e| format!("list_orders: {e}"))?;
                        if page.orders.len() != 50 {
                            return Err(format!("list_orders returned {} orders", page.orders.len()));
                        }
                        black_box(page);
                    }
                }
                Ok(())
            })
        })
    }
}

fn create_request() -> CreateOrder {
    CreateOrder { currency: "USD".into(), amount: 10.into(), ..Default::default() }
}

/// The baseline: the `postgres` crate alone, one INSERT per transaction.
struct Raw {
    url: String,
    /// A real order (its column values and stored 201 body) to copy into each row.
    template: RawRow,
}

struct RawRow {
    environment: String,
    user_id: i64,
    key_id: String,
    amount: String,
    currency: String,
    receive_currency: String,
    status: String,
    request_hash: Vec<u8>,
    create_response: String,
}

const RAW_SCHEMA: &str = "CREATE TABLE orders (
    order_id            TEXT PRIMARY KEY,
    environment         TEXT NOT NULL,
    user_id             BIGINT NOT NULL,
    key_id              TEXT NOT NULL,
    merchant_order_id   TEXT NOT NULL,
    title               TEXT,
    description         TEXT,
    callback_url        TEXT,
    webhook_url         TEXT,
    success_url         TEXT,
    cancel_url          TEXT,
    customer_email      TEXT,
    amount              TEXT NOT NULL,
    currency            TEXT NOT NULL,
    receive_currency    TEXT NOT NULL,
    status              TEXT NOT NULL,
    request_hash        BYTEA NOT NULL,
    create_response     TEXT NOT NULL,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    deleted             BIGINT NOT NULL DEFAULT 0
)";

const RAW_INSERT: &str = "INSERT INTO orders (order_id, environment, user_id, key_id, merchant_order_id, title,
    description, callback_url, webhook_url, success_url, cancel_url, customer_email, amount, currency,
    receive_currency, status, request_hash, create_response, created_at, updated_at, deleted)
 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)";

impl Raw {
    fn run(&self, threads: usize, duration: Duration) -> Fallible<f64> {
        measure(threads, duration, |_| {
            let mut client =
                postgres::Client::connect(&self.url, postgres::NoTls).map_err(|e| pg_error("connect (raw)", &e))?;
            let insert = client.prepare(RAW_INSERT).map_err(|e| pg_error("prepare (raw)", &e))?;
            let t = &self.template;
            let none: Option<&str> = None;
            Ok(move || -> Fallible<()> {
                let order_id = uuid::Uuid::now_v7().to_string();
                let merchant_order_id = format!("ord_{}", uuid::Uuid::now_v7().simple());
                let now = chrono::Utc::now().timestamp_millis();
                let deleted = 0i64;
                client
                    .execute(
                        &insert,
                        &[
                            &order_id,
                            &t.environment,
                            &t.user_id,
                            &t.key_id,
                            &merchant_order_id,
                            &none,
                            &none,
                            &none,
                            &none,
                            &none,
                            &none,
                            &none,
                            &t.amount,
                            &t.currency,
                            &t.receive_currency,
                            &t.status,
                            &t.request_hash,
                            &t.create_response,
                            &now,
                            &now,
                            &deleted,
                        ],
                    )
                    .map_err(|e| pg_error("insert (raw)", &e))?;
                Ok(())
            })
        })
    }
}

/// `url` with its database replaced by `database`.
fn database_url(url: &str, database: &str) -> Result<String, Box<dyn Error>> {
    let mut url = url::Url::parse(url).map_err(|e| format!("{SERVER_VAR}: not a URL: {e}"))?;
    url.set_path(&format!("/{database}"));
    Ok(url.to_string())
}

/// `what: message` with the server's own message, which `postgres::Error`'s Display leaves out.
fn pg_error(what: &str, error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{what}: {} ({})", db.message(), db.code().code()),
        None => format!("{what}: {error}"),
    }
}

fn show(client: &mut postgres::Client, setting: &str) -> String {
    client
        .query_one(&format!("SHOW {setting}"), &[])
        .ok()
        .and_then(|row| row.try_get::<_, String>(0).ok())
        .unwrap_or_else(|| "?".into())
}

/// `12 345/s`: whole calls per second, thousands apart.
fn per_second(rate: f64) -> String {
    let digits = format!("{:.0}", rate);
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(' ');
        }
        grouped.push(c);
    }
    format!("{grouped}/s")
}

fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

fn cell(samples: &[f64]) -> String {
    if samples.is_empty() {
        return "–".into();
    }
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(0.0, f64::max);
    let rate = |r: f64| per_second(r).trim_end_matches("/s").to_string();
    format!("{} ({}–{})", per_second(median(samples)), rate(min), rate(max))
}

fn ratio(numerator: &[f64], denominator: &[f64]) -> String {
    if numerator.is_empty() || denominator.is_empty() {
        return "–".into();
    }
    format!("{:.2}", median(numerator) / median(denominator))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("backends: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let options = options()?;
    let server = std::env::var(SERVER_VAR).ok().filter(|url| !url.is_empty()).ok_or_else(|| {
        format!(
            "{SERVER_VAR} is not set. It names the PostgreSQL server to compare with, as a URL whose role may \
             CREATE DATABASE (postgres://coinorder@127.0.0.1:5432/postgres); scripts/bench-postgres starts a \
             throwaway one with fsync on and sets it."
        )
    })?;
    let load_before = load_average();

    let mut admin = postgres::Client::connect(&server, postgres::NoTls)
        .map_err(|e| pg_error(&format!("cannot connect to {SERVER_VAR} ({server})"), &e))?;
    let pg_version = show(&mut admin, "server_version");
    let fsync = show(&mut admin, "fsync");
    let synchronous_commit = show(&mut admin, "synchronous_commit");
    let wal_sync_method = show(&mut admin, "wal_sync_method");
    let pid = std::process::id();
    let (engine_db, raw_db) = (format!("coinorder_bench_{pid}"), format!("coinorder_bench_raw_{pid}"));
    for name in [&engine_db, &raw_db] {
        // Two statements: CREATE DATABASE cannot share a (multi-statement) transaction.
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).map_err(|e| pg_error("DROP DATABASE", &e))?;
        admin.batch_execute(&format!("CREATE DATABASE {name}")).map_err(|e| pg_error("CREATE DATABASE", &e))?;
    }
    let outcome =
        bench(&options, &server, &engine_db, &raw_db, &pg_version, &fsync, &synchronous_commit, &wal_sync_method);
    for name in [&engine_db, &raw_db] {
        if let Err(e) = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")) {
            eprintln!("backends: could not drop database {name}: {e}");
        }
    }
    outcome?;
    println!();
    println!("load average (1, 5, 15 min): before {load_before}, after {}", load_average());
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn bench(
    options: &Options,
    server: &str,
    engine_db: &str,
    raw_db: &str,
    pg_version: &str,
    fsync: &str,
    synchronous_commit: &str,
    wal_sync_method: &str,
) -> Result<(), Box<dyn Error>> {
    if fsync != "on" || synchronous_commit == "off" {
        eprintln!(
            "backends: WARNING: the server runs with fsync={fsync}, synchronous_commit={synchronous_commit}: \
             PostgreSQL commits are not durable, unlike SQLite's synchronous=FULL"
        );
    }
    let dir = tempfile::tempdir()?;
    let key_path = dir.path().join("secret.key");
    std::fs::write(&key_path, SECRET_KEY)?;

    let sqlite_path = dir.path().join("bench.db");
    let mut sqlite = Engine::open(path_str(&sqlite_path)?, None)?;
    let mut postgres = Engine::open(&database_url(server, engine_db)?, Some(key_path))?;
    let raw_url = database_url(server, raw_db)?;
    {
        let mut client =
            postgres::Client::connect(&raw_url, postgres::NoTls).map_err(|e| pg_error("connect (raw)", &e))?;
        client.batch_execute(RAW_SCHEMA).map_err(|e| pg_error("CREATE TABLE (raw)", &e))?;
    }

    eprintln!("creating {} orders on each backend ...", options.orders);
    sqlite.preload(options.orders)?;
    postgres.preload(options.orders)?;
    let template = {
        let merchant = postgres.merchant()?;
        let created = postgres.service.create_order(&merchant, &create_request())?;
        let order = &created.order.order;
        RawRow {
            environment: order.environment.as_str().to_string(),
            user_id: order.user_id,
            key_id: order.key_id.clone(),
            amount: order.amount.to_string(),
            currency: order.currency.clone(),
            receive_currency: order.receive_currency.clone(),
            status: order.status.as_str().to_string(),
            request_hash: vec![0xA5; 32],
            create_response: created.response_body.clone(),
        }
    };
    let raw = Raw { url: raw_url, template };

    let run_cell = |backend: Backend, workload: Workload, threads: usize, duration: Duration| match backend {
        Backend::Sqlite => sqlite.run(workload, threads, duration),
        Backend::Postgres => postgres.run(workload, threads, duration),
        Backend::Raw => raw.run(threads, duration),
    };

    let top = options.threads.iter().copied().max().unwrap_or(1);
    eprintln!("warming up ({} ms per backend and workload at {top} threads) ...", WARMUP.as_millis());
    for workload in Workload::ALL {
        for backend in Backend::ALL.into_iter().filter(|b| b.runs(workload)) {
            run_cell(backend, workload, top, WARMUP)?;
        }
    }

    // results[workload][threads][backend]: one sample per round.
    let mut results = vec![vec![vec![Vec::new(); Backend::ALL.len()]; options.threads.len()]; Workload::ALL.len()];
    let started = Instant::now();
    for round in 1..=options.rounds {
        for (w, workload) in Workload::ALL.into_iter().enumerate() {
            for (t, &threads) in options.threads.iter().enumerate() {
                for (b, backend) in Backend::ALL.into_iter().enumerate() {
                    if !backend.runs(workload) {
                        continue;
                    }
                    let rate = run_cell(backend, workload, threads, options.duration)?;
                    eprintln!(
                        "round {round}/{}  {:<7} {:>2} threads  {:<8} {:>10}",
                        options.rounds,
                        workload.name(),
                        threads,
                        backend.name(),
                        per_second(rate)
                    );
                    results[w][t][b].push(rate);
                }
            }
        }
    }
    let measured = started.elapsed();

    println!();
    println!(
        "machine: {} cpus ({}), {}; SQLite file in {} (synchronous=FULL, WAL); PostgreSQL {pg_version} at \
         {} (fsync={fsync}, synchronous_commit={synchronous_commit}, wal_sync_method={wal_sync_method}, loopback TCP)",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model(),
        std::env::consts::ARCH,
        dir.path().display(),
        database_url(server, engine_db)?,
    );
    println!(
        "{} rounds of {:.1} s per cell, interleaved; {} orders created before the rounds; measured in {:.0} s; \
         median (min–max)",
        options.rounds,
        options.duration.as_secs_f64(),
        options.orders,
        measured.as_secs_f64()
    );
    println!();
    println!("| workload | threads | coinorder SQLite | coinorder PostgreSQL | raw postgres INSERT | PG / SQLite | PG / raw |");
    println!("|---|---|---|---|---|---|---|");
    for (w, workload) in Workload::ALL.into_iter().enumerate() {
        for (t, &threads) in options.threads.iter().enumerate() {
            let [sqlite, postgres, raw] = [&results[w][t][0], &results[w][t][1], &results[w][t][2]];
            println!(
                "| {} | {threads} | {} | {} | {} | {} | {} |",
                workload.name(),
                cell(sqlite),
                cell(postgres),
                cell(raw),
                ratio(postgres, sqlite),
                ratio(postgres, raw)
            );
        }
    }
    Ok(())
}

fn path_str(path: &Path) -> Result<&str, Box<dyn Error>> {
    path.to_str().ok_or_else(|| format!("not UTF-8: {}", path.display()).into())
}
