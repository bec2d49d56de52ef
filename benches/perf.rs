//! coinorder against its baselines, in one run: what the engine costs next to the least a
//! hand-written program would do on the same machine. Prints numbers; asserts nothing.
//!
//! ```sh
//! cargo bench --bench perf -- [--sizes 10000,100000,1000000] [--rounds 3] [--duration 1]
//!                             [--expiry-backlog 20000] [--delivery-backlog N]
//!                             [--dir DIR] [--only GROUPS]
//!                             [--json | --markdown]
//! scripts/bench-perf [options]     # the same with --markdown, written into README.md
//! ```
//!
//! For every store size (`--sizes`, default 10k, 100k and 1M orders) it fills one
//! coinorder SQLite file through the typed API (`create_order`, `synchronous=NORMAL`,
//! two threads) and one raw rusqlite file with the same number of rows, then measures,
//! on those two stores:
//!
//! | row | coinorder | baseline |
//! |---|---|---|
//! | create NORMAL / FULL | `Service::create_order`, 1 thread | raw: one `INSERT` per transaction into a one-table schema with the columns a create stores (order, invoice, stored 201 body, kept in every raw row; coinorder keeps it only for a create with a `merchant_order_id`, which these are not), WAL, the same `synchronous` |
//! | get_order | `Service::get_order` of a random stored order | raw `SELECT … WHERE id = ?`, cached statement |
//! | list 50 | `Service::list_orders` (limit 50, offset 0) | raw `SELECT … ORDER BY created_at DESC LIMIT 50` (index on `created_at`) |
//! | handle GET order / GET list 50 | `Service::handle` with `x-api-key` | the typed call |
//! | create, 4 threads, FULL | `create_order` on 4 threads | the same on 1 thread |
//! | HTTP GET list 50 (1, 8, 64 conns), GET order (64), POST create (64) | `coinorder serve` (its defaults: 8 read threads, default limits; `--quiet`, `--rate-limit 0`), the binary built with this bench, in a process of its own on 127.0.0.1 | a minimal std HTTP/1.1 responder in this process answering the same paths with the same bytes (captured from coinorder): the HTTP ceiling of the machine; and, when `nginx` is installed (`/usr/sbin` is searched too), nginx with the same bodies, the GETs as static files (a second row each) |
//! | delivery | `deliver_due` of a fresh backlog each round (10 % of the store's orders paid, at most 100k new `order.paid` events) to a local keep-alive receiver answering 200, synchronous=FULL | none: deliveries/s |
//! | one claim | `deliver_due(1)` with that backlog present, 20 calls a round | none: its time |
//! | POST create during expiry | `handle` POST on 1 thread while another thread runs `expire_due` through a backlog of due invoices (short `invoice_ttl`, a `ManualClock` moved past it) | the same POSTs without the expiry |
//! | bytes per order | (database + WAL after a checkpoint) ÷ orders | the raw file's bytes per row |
//!
//! How to read it. The machine is shared and noisy, so every ratio comes from runs
//! interleaved in this process: each row runs its two sides alternately (A B, B A, A B …)
//! for `--rounds` rounds of `--duration` seconds each, after a short unmeasured warm-up.
//! A rate cell is the median of the rounds with their min–max; the ratio is the median of
//! the per-round ratios (coinorder's rate ÷ the baseline's rate, so below 1 means slower
//! than the baseline; for bytes, coinorder's size ÷ raw's, so above 1 means bigger) with
//! the min–max of the per-round ratios; p50/p99 are the medians over the rounds of each
//! round's latency percentiles (per call, or per request for HTTP, as the client saw it).
//! HTTP clients, servers and the engine all share the machine's cores.
//!
//! Rows that write make the stores grow while they run: the size column is the size the
//! store had when the read rows ran, and the notes give the coinorder store's size at the
//! start and end of every write row. Read rows run first, on the exact sizes.
//!
//! Progress goes to stderr; the table (text by default, `--markdown`, or one JSON
//! document with `--json`) to stdout.

#[path = "support/mod.rs"]
mod support;

use std::error::Error;
use std::hint::black_box;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use coinorder::{
    Config, CreateOrder, Environment, ListOrders, ManualClock, Merchant, NewApiKey, RateLimit, Service, SimulateAction,
    WireRequest, MAX_INVOICE_TTL_SECS,
};
use rusqlite::{params, Connection};
use serde_json::{json, Value};
use support::{cpu_model, load_average, Rng};

type BoxError = Box<dyn Error + Send + Sync>;
type Res<T> = Result<T, BoxError>;

const USAGE: &str = "usage: cargo bench --bench perf -- [options]
  --sizes LIST           store sizes in orders (default 10000,100000,1000000)
  --rounds N             interleaved rounds per row (default 3)
  --duration SECS        measuring time per side and round (default 1)
  --expiry-backlog N     due invoices per round of the expiry row (default 20000)
  --delivery-backlog N   orders paid per round of the delivery rows (default: a tenth
                         of the store, at most 100000)
  --dir DIR              where the stores go (default: a temporary directory)
  --only LIST            run only these groups of rows: bytes, reads, http, creates,
                         http-post, delivery, expiry (default: all)
  --json                 print one JSON document instead of the text table
  --markdown             print a Markdown table instead of the text table";

/// Unmeasured run of each side before a row's rounds: fills caches and pools.
const WARMUP: Duration = Duration::from_millis(200);
/// The create request of every create row (the README's example order).
const AMOUNT: &str = "19.99";
/// The JSON body of every POST create.
const CREATE_BODY: &str = r#"{"currency":"USD","amount":19.99}"#;
/// The `coinorder` binary the HTTP rows run, built with this bench.
const COINORDER_BIN: &str = env!("CARGO_BIN_EXE_coinorder");
/// `deliver_due(limit)` in the delivery loop.
const DELIVERY_LIMIT: usize = 1_000;
/// `deliver_due(1)` calls timed per round for the claim row.
const CLAIMS_PER_ROUND: usize = 20;
/// Largest delivery backlog (events), whatever the store size.
const MAX_BACKLOG: usize = 100_000;

// ---- options ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Markdown,
    Json,
}

struct Options {
    sizes: Vec<usize>,
    rounds: usize,
    duration: Duration,
    expiry_backlog: usize,
    /// Orders paid per delivery round (`--delivery-backlog`); `None`: a tenth of the store.
    delivery_backlog: Option<usize>,
    dir: Option<PathBuf>,
    format: Format,
    /// The groups of rows to run (`--only`); empty runs them all.
    only: Vec<String>,
}

/// The names `--only` takes, one per group of rows, in the order they run.
const GROUPS: [&str; 7] = ["bytes", "reads", "http", "creates", "http-post", "delivery", "expiry"];

impl Options {
    fn runs(&self, group: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|g| g == group)
    }
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        sizes: vec![10_000, 100_000, 1_000_000],
        rounds: 3,
        duration: Duration::from_secs(1),
        expiry_backlog: 20_000,
        delivery_backlog: None,
        dir: None,
        format: Format::Text,
        only: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // `cargo bench` passes `--bench` to every benchmark binary.
            "--bench" => continue,
            "--help" | "-h" => return Err(USAGE.into()),
            "--json" | "--markdown" => {
                let format = if arg == "--json" { Format::Json } else { Format::Markdown };
                if options.format != Format::Text && options.format != format {
                    return Err(format!("--json and --markdown exclude each other\n{USAGE}"));
                }
                options.format = format;
                continue;
            }
            _ => {}
        }
        let value = args.next().ok_or_else(|| format!("{arg} needs a value\n{USAGE}"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{arg} {value}: {e}\n{USAGE}");
        match arg.as_str() {
            "--sizes" => {
                options.sizes = value
                    .split(',')
                    .map(|n| n.trim().replace('_', "").parse::<usize>())
                    .collect::<Result<_, _>>()
                    .map_err(|e| bad(&e))?
            }
            "--rounds" => options.rounds = value.parse().map_err(|e| bad(&e))?,
            "--duration" => {
                let secs: f64 = value.parse().map_err(|e| bad(&e))?;
                if !(secs > 0.0 && secs < 600.0) {
                    return Err(bad(&"must be a number of seconds above 0"));
                }
                options.duration = Duration::from_secs_f64(secs);
            }
            "--expiry-backlog" => options.expiry_backlog = value.parse().map_err(|e| bad(&e))?,
            "--delivery-backlog" => options.delivery_backlog = Some(value.parse().map_err(|e| bad(&e))?),
            "--dir" => options.dir = Some(PathBuf::from(value)),
            "--only" => {
                options.only = value.split(',').map(|g| g.trim().to_string()).collect();
                if let Some(unknown) = options.only.iter().find(|g| !GROUPS.contains(&g.as_str())) {
                    return Err(bad(&format!("no group of rows {unknown:?}; groups: {}", GROUPS.join(", "))));
                }
            }
            _ => return Err(format!("unknown argument {arg}\n{USAGE}")),
        }
    }
    // A store needs at least a page of 50 orders for the list rows.
    if options.rounds == 0 || options.expiry_backlog == 0 || options.sizes.is_empty() {
        return Err(format!("--rounds, --expiry-backlog and --sizes must be positive\n{USAGE}"));
    }
    if options.sizes.iter().any(|&size| size < 100) {
        return Err(format!("every store size must be at least 100 orders\n{USAGE}"));
    }
    Ok(options)
}

// ---- measuring -------------------------------------------------------------------------

/// One side of one round: how many calls, in how long, and each call's latency.
struct Run {
    elapsed: Duration,
    latencies_ns: Vec<u64>,
}

impl Run {
    fn rate(&self) -> f64 {
        self.latencies_ns.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn calls(&self) -> u64 {
        self.latencies_ns.len() as u64
    }

    /// p50 and p99 in milliseconds.
    fn percentiles(&mut self) -> Option<(f64, f64)> {
        if self.latencies_ns.is_empty() {
            return None;
        }
        self.latencies_ns.sort_unstable();
        let at = |p: f64| {
            let rank = ((p / 100.0) * self.latencies_ns.len() as f64).ceil() as usize;
            self.latencies_ns[rank.clamp(1, self.latencies_ns.len()) - 1] as f64 / 1e6
        };
        Some((at(50.0), at(99.0)))
    }
}

/// A closed loop: `threads` workers call their worker back to back for `duration` (or
/// until `stop` is set), each call timed. `make(i)` builds worker `i` (connects,
/// authenticates) before the clock starts.
fn closed_loop<W, M>(threads: usize, duration: Duration, stop: Option<&AtomicBool>, make: M) -> Res<Run>
where
    M: Fn(usize) -> Res<W> + Sync,
    W: FnMut() -> Res<()>,
{
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, make) = (&barrier, &make);
                scope.spawn(move || -> Res<Vec<u64>> {
                    let worker = make(i);
                    // Everyone reaches the barrier, even a worker that failed to start.
                    barrier.wait();
                    let mut worker = worker?;
                    let end = Instant::now() + duration;
                    let mut latencies = Vec::with_capacity(4096);
                    loop {
                        let start = Instant::now();
                        if start >= end || stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
                            return Ok(latencies);
                        }
                        worker()?;
                        latencies.push(start.elapsed().as_nanos() as u64);
                    }
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        let mut latencies_ns = Vec::new();
        let mut failure = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(mine)) => latencies_ns.extend(mine),
                Ok(Err(e)) => failure = Some(e),
                Err(_) => failure = Some("a worker thread panicked".into()),
            }
        }
        let elapsed = started.elapsed();
        match failure {
            Some(e) => Err(e),
            None => Ok(Run { elapsed, latencies_ns }),
        }
    })
}

/// What one side of a row measured, one entry per round.
#[derive(Default, Clone)]
struct Side {
    values: Vec<f64>,
    p50_ms: Vec<f64>,
    p99_ms: Vec<f64>,
}

impl Side {
    fn push(&mut self, run: &mut Run) {
        self.values.push(run.rate());
        if let Some((p50, p99)) = run.percentiles() {
            self.p50_ms.push(p50);
            self.p99_ms.push(p99);
        }
    }

    fn of(values: Vec<f64>) -> Side {
        Side { values, ..Side::default() }
    }
}

/// Runs `a` and `b` alternately (A B, B A, A B …) for `rounds` rounds after a warm-up of
/// each; returns both sides and the per-round ratios a ÷ b.
fn interleave(
    label: &str,
    options: &Options,
    mut a: impl FnMut(Duration) -> Res<Run>,
    mut b: impl FnMut(Duration) -> Res<Run>,
) -> Res<(Side, Side, Vec<f64>)> {
    a(WARMUP)?;
    b(WARMUP)?;
    let (mut side_a, mut side_b, mut ratios) = (Side::default(), Side::default(), Vec::new());
    for round in 0..options.rounds {
        let (mut run_a, mut run_b) = if round % 2 == 0 {
            let run_a = a(options.duration)?;
            (run_a, b(options.duration)?)
        } else {
            let run_b = b(options.duration)?;
            (a(options.duration)?, run_b)
        };
        let ratio = run_a.rate() / run_b.rate().max(1e-9);
        eprintln!(
            "  {label}: round {}/{}  {} vs {}  ratio {ratio:.2}",
            round + 1,
            options.rounds,
            per_second(run_a.rate()),
            per_second(run_b.rate())
        );
        ratios.push(ratio);
        side_a.push(&mut run_a);
        side_b.push(&mut run_b);
    }
    Ok((side_a, side_b, ratios))
}

// ---- rows and output -------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    PerSecond,
    Bytes,
    Millis,
}

/// The rows of the table, in the order they are printed.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    CreateNormal,
    CreateFull,
    Get,
    List,
    HandleGet,
    HandleList,
    Threads,
    HttpList1,
    HttpList8,
    HttpList64,
    HttpGet64,
    HttpPost64,
    Delivery,
    Claim,
    Expiry,
    Bytes,
}

impl Kind {
    /// A stable name for the JSON output.
    fn id(self) -> &'static str {
        match self {
            Kind::CreateNormal => "create_normal",
            Kind::CreateFull => "create_full",
            Kind::Get => "get_order",
            Kind::List => "list_50",
            Kind::HandleGet => "handle_get_order",
            Kind::HandleList => "handle_list_50",
            Kind::Threads => "create_full_threads",
            Kind::HttpList1 => "http_list_50_c1",
            Kind::HttpList8 => "http_list_50_c8",
            Kind::HttpList64 => "http_list_50_c64",
            Kind::HttpGet64 => "http_get_order_c64",
            Kind::HttpPost64 => "http_post_create_c64",
            Kind::Delivery => "delivery",
            Kind::Claim => "delivery_claim",
            Kind::Expiry => "create_during_expiry",
            Kind::Bytes => "bytes_per_order",
        }
    }
}

struct Row {
    kind: Kind,
    /// Store size (orders) the row belongs to.
    size: usize,
    what: String,
    unit: Unit,
    ours: Side,
    baseline: String,
    base: Option<Side>,
    ratios: Vec<f64>,
    note: String,
}

impl Row {
    fn new(kind: Kind, size: usize, what: impl Into<String>, unit: Unit, ours: Side) -> Row {
        Row {
            kind,
            size,
            what: what.into(),
            unit,
            ours,
            baseline: "–".into(),
            base: None,
            ratios: Vec::new(),
            note: String::new(),
        }
    }

    fn against(mut self, baseline: impl Into<String>, base: Side, ratios: Vec<f64>) -> Row {
        self.baseline = baseline.into();
        self.base = Some(base);
        self.ratios = ratios;
        self
    }

    fn note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }
}

fn median(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    Some(if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 })
}

fn min_max(samples: &[f64]) -> Option<(f64, f64)> {
    let min = samples.iter().copied().reduce(f64::min)?;
    let max = samples.iter().copied().reduce(f64::max)?;
    Some((min, max))
}

/// `12 345`: a whole number, thousands apart.
fn grouped(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn per_second(rate: f64) -> String {
    // A starved row must not read as zero.
    if rate < 10.0 {
        format!("{rate:.2}/s")
    } else {
        format!("{}/s", grouped(rate))
    }
}

fn ms(value: f64) -> String {
    if value < 0.1 {
        format!("{value:.3}")
    } else if value < 10.0 {
        format!("{value:.2}")
    } else if value < 100.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

fn size_label(size: usize) -> String {
    match size {
        s if s >= 1_000_000 && s % 1_000_000 == 0 => format!("{}M", s / 1_000_000),
        s if s >= 1_000 && s % 1_000 == 0 => format!("{}k", s / 1_000),
        s => grouped(s as f64),
    }
}

fn value_text(unit: Unit, value: f64) -> String {
    match unit {
        Unit::PerSecond => per_second(value),
        Unit::Bytes => format!("{} B", grouped(value)),
        Unit::Millis => format!("{} ms", ms(value)),
    }
}

/// `9 200/s (8 800–9 500)`: the median with the spread of the rounds.
fn side_cell(unit: Unit, side: &Side) -> String {
    let (Some(mid), Some((min, max))) = (median(&side.values), min_max(&side.values)) else {
        return "–".into();
    };
    if side.values.len() == 1 {
        return value_text(unit, mid);
    }
    let bare = |v: f64| match unit {
        Unit::PerSecond => per_second(v).trim_end_matches("/s").to_string(),
        Unit::Bytes => grouped(v),
        Unit::Millis => ms(v),
    };
    format!("{} ({}–{})", value_text(unit, mid), bare(min), bare(max))
}

fn latency_cell(side: Option<&Side>) -> String {
    match side.and_then(|side| Some((median(&side.p50_ms)?, median(&side.p99_ms)?))) {
        Some((p50, p99)) => format!("{} / {} ms", ms(p50), ms(p99)),
        None => "–".into(),
    }
}

fn ratio_cell(ratios: &[f64]) -> String {
    match (median(ratios), min_max(ratios)) {
        (Some(mid), Some((min, max))) if ratios.len() > 1 => format!("{mid:.2} ({min:.2}–{max:.2})"),
        (Some(mid), _) => format!("{mid:.2}"),
        _ => "–".into(),
    }
}

const HEADER: [&str; 9] = [
    "orders",
    "what",
    "coinorder",
    "baseline",
    "baseline value",
    "ratio (min–max)",
    "p50 / p99",
    "baseline p50 / p99",
    "notes",
];

fn cells(row: &Row) -> [String; 9] {
    [
        size_label(row.size),
        row.what.clone(),
        side_cell(row.unit, &row.ours),
        row.baseline.clone(),
        row.base.as_ref().map_or_else(|| "–".into(), |base| side_cell(row.unit, base)),
        ratio_cell(&row.ratios),
        latency_cell(Some(&row.ours)),
        latency_cell(row.base.as_ref()),
        if row.note.is_empty() { "–".into() } else { row.note.clone() },
    ]
}

fn side_json(unit: Unit, side: &Side) -> Value {
    json!({
        "median": median(&side.values),
        "min": min_max(&side.values).map(|(min, _)| min),
        "max": min_max(&side.values).map(|(_, max)| max),
        "rounds": side.values,
        "unit": match unit { Unit::PerSecond => "per_second", Unit::Bytes => "bytes", Unit::Millis => "ms" },
        "p50_ms": median(&side.p50_ms),
        "p99_ms": median(&side.p99_ms),
    })
}

struct Machine {
    cpu: String,
    cores: usize,
    kernel: String,
    date: String,
}

impl Machine {
    fn read() -> Machine {
        let cpu = cpu_model();
        let proc_text = |path: &str| std::fs::read_to_string(path).map(|s| s.trim().to_string()).ok();
        let kernel = match (proc_text("/proc/sys/kernel/ostype"), proc_text("/proc/sys/kernel/osrelease")) {
            (Some(os), Some(release)) => format!("{os} {release}"),
            _ => std::env::consts::OS.to_string(),
        };
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kernel,
            date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        }
    }

    fn describe(&self) -> String {
        format!("{}, {} cores, {}, {}", self.cpu, self.cores, self.kernel, self.date)
    }
}

struct Report<'a> {
    options: &'a Options,
    machine: Machine,
    load_before: String,
    load_after: String,
    elapsed: Duration,
    nginx: bool,
    rows: Vec<Row>,
}

impl Report<'_> {
    fn caption(&self) -> String {
        let sizes: Vec<String> = self.options.sizes.iter().map(|&s| size_label(s)).collect();
        let missing: Vec<&str> = [(10_000, "10k"), (100_000, "100k"), (1_000_000, "1M")]
            .into_iter()
            .filter(|(size, _)| !self.options.sizes.contains(size))
            .map(|(_, label)| label)
            .collect();
        let skipped = if missing.is_empty() { String::new() } else { format!(" ({} not run)", missing.join(", ")) };
        format!(
            "Machine: {}; load average {} before, {} after; the run took {} min {} s. Store sizes {}{skipped}; \
             {} interleaved rounds of {:.1} s per side; cells are medians (min–max of the rounds); ratio = \
             coinorder ÷ baseline per round (rates; sizes for bytes), median (min–max); p50 / p99 per call, or per \
             request as the client saw it; {}.",
            self.machine.describe(),
            self.load_before,
            self.load_after,
            self.elapsed.as_secs() / 60,
            self.elapsed.as_secs() % 60,
            sizes.join(", "),
            self.options.rounds,
            self.options.duration.as_secs_f64(),
            if self.nginx { "nginx rows included" } else { "nginx not installed, its rows skipped" },
        )
    }

    fn print(&self) {
        match self.options.format {
            Format::Json => {
                let rows: Vec<Value> = self
                    .rows
                    .iter()
                    .map(|row| {
                        json!({
                            "row": row.kind.id(),
                            "size": row.size,
                            "what": row.what,
                            "coinorder": side_json(row.unit, &row.ours),
                            "baseline": row.baseline,
                            "baseline_value": row.base.as_ref().map(|base| side_json(row.unit, base)),
                            "ratio": {
                                "median": median(&row.ratios),
                                "min": min_max(&row.ratios).map(|(min, _)| min),
                                "max": min_max(&row.ratios).map(|(_, max)| max),
                                "rounds": row.ratios,
                            },
                            "note": row.note,
                        })
                    })
                    .collect();
                let document = json!({
                    "machine": {
                        "cpu": self.machine.cpu,
                        "cores": self.machine.cores,
                        "kernel": self.machine.kernel,
                        "date": self.machine.date,
                        "load_average_before": self.load_before,
                        "load_average_after": self.load_after,
                    },
                    "options": {
                        "sizes": self.options.sizes,
                        "rounds": self.options.rounds,
                        "duration_s": self.options.duration.as_secs_f64(),
                        "expiry_backlog": self.options.expiry_backlog,
                    },
                    "elapsed_s": self.elapsed.as_secs_f64(),
                    "nginx": self.nginx,
                    "rows": rows,
                });
                println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
            }
            Format::Markdown => {
                println!("{}", self.caption());
                println!();
                println!("| {} |", HEADER.join(" | "));
                println!("|{}", "---|".repeat(HEADER.len()));
                for row in &self.rows {
                    // A `|` inside a cell would end it.
                    let cells: Vec<String> = cells(row).iter().map(|cell| cell.replace('|', "\\|")).collect();
                    println!("| {} |", cells.join(" | "));
                }
            }
            Format::Text => {
                let table: Vec<[String; 9]> = self.rows.iter().map(cells).collect();
                let mut widths = HEADER.map(|h| h.chars().count());
                for row in &table {
                    for (width, cell) in widths.iter_mut().zip(row) {
                        *width = (*width).max(cell.chars().count());
                    }
                }
                let line = |cells: &[String]| {
                    let padded: Vec<String> =
                        cells.iter().zip(widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
                    println!("{}", padded.join("  ").trim_end());
                };
                println!();
                line(&HEADER.map(String::from));
                for row in &table {
                    line(row);
                }
                println!();
                println!("{}", self.caption());
            }
        }
    }
}

// ---- the raw rusqlite baseline ---------------------------------------------------------

/// One table with the columns a create stores (the order, its invoice's quote and
/// address, the stored 201 body and request fingerprint for replays), a primary key and
/// the one index the list needs: what a small hand-written shop would have. The body is
/// in every raw row, as issue 12 set the baseline; coinorder keeps it only where a replay
/// can ask for it (a create with a `merchant_order_id`; the bench's creates have none).
const RAW_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS orders (
    id                TEXT PRIMARY KEY,
    environment       TEXT NOT NULL,
    user_id           INTEGER NOT NULL,
    key_id            TEXT NOT NULL,
    merchant_order_id TEXT NOT NULL,
    title             TEXT,
    description       TEXT,
    customer_email    TEXT,
    webhook_url       TEXT,
    amount            TEXT NOT NULL,
    currency          TEXT NOT NULL,
    status            TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    invoice_id        TEXT NOT NULL,
    pay_amount        TEXT NOT NULL,
    pay_currency      TEXT NOT NULL,
    rate              TEXT NOT NULL,
    expired_at        INTEGER NOT NULL,
    address           TEXT NOT NULL,
    payment_uri       TEXT NOT NULL,
    request_hash      BLOB NOT NULL,
    create_response   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS orders_by_time ON orders (created_at);";

const RAW_INSERT: &str = "INSERT INTO orders (id, environment, user_id, key_id, merchant_order_id, title,
    description, customer_email, webhook_url, amount, currency, status, created_at, updated_at, invoice_id,
    pay_amount, pay_currency, rate, expired_at, address, payment_uri, request_hash, create_response)
 VALUES (?1, ?2, ?3, ?4, ?5, NULL, NULL, NULL, NULL, ?6, ?7, 'NEW', ?8, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,
    ?16, ?17)";

/// Everything get_order shows, without the stored body.
const RAW_GET: &str = "SELECT id, environment, user_id, key_id, merchant_order_id, title, description,
    customer_email, webhook_url, amount, currency, status, created_at, updated_at, invoice_id, pay_amount,
    pay_currency, rate, expired_at, address, payment_uri
 FROM orders WHERE id = ?1";

/// The order columns a list item shows.
const RAW_LIST: &str = "SELECT id, environment, user_id, key_id, merchant_order_id, title, description,
    customer_email, webhook_url, amount, currency, status, created_at, updated_at
 FROM orders ORDER BY created_at DESC LIMIT 50";

/// The values every raw row copies from a real coinorder order.
struct Template {
    environment: String,
    user_id: i64,
    key_id: String,
    amount: String,
    currency: String,
    pay_amount: String,
    pay_currency: String,
    rate: String,
    address: String,
    payment_uri: String,
    create_response: String,
}

/// A raw order as read back: owned values, like coinorder's typed result.
#[allow(dead_code)] // read to be paid for, never looked at
struct RawOrder {
    order: RawListItem,
    invoice_id: String,
    pay_amount: String,
    pay_currency: String,
    rate: String,
    expired_at: i64,
    address: String,
    payment_uri: String,
}

#[allow(dead_code)] // read to be paid for, never looked at
struct RawListItem {
    id: String,
    environment: String,
    user_id: i64,
    key_id: String,
    merchant_order_id: String,
    title: Option<String>,
    description: Option<String>,
    customer_email: Option<String>,
    webhook_url: Option<String>,
    amount: String,
    currency: String,
    status: String,
    created_at: i64,
    updated_at: i64,
}

fn raw_list_item(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawListItem> {
    Ok(RawListItem {
        id: row.get(0)?,
        environment: row.get(1)?,
        user_id: row.get(2)?,
        key_id: row.get(3)?,
        merchant_order_id: row.get(4)?,
        title: row.get(5)?,
        description: row.get(6)?,
        customer_email: row.get(7)?,
        webhook_url: row.get(8)?,
        amount: row.get(9)?,
        currency: row.get(10)?,
        status: row.get(11)?,
        created_at: row.get(12)?,
        updated_at: row.get(13)?,
    })
}

fn raw_order(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawOrder> {
    Ok(RawOrder {
        order: raw_list_item(row)?,
        invoice_id: row.get(14)?,
        pay_amount: row.get(15)?,
        pay_currency: row.get(16)?,
        rate: row.get(17)?,
        expired_at: row.get(18)?,
        address: row.get(19)?,
        payment_uri: row.get(20)?,
    })
}

/// A connection to the raw file: WAL, the given `synchronous`.
fn raw_open(path: &Path, synchronous_full: bool) -> Res<Connection> {
    let conn = Connection::open(path)?;
    let _mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    conn.pragma_update(None, "synchronous", if synchronous_full { "FULL" } else { "NORMAL" })?;
    conn.busy_timeout(Duration::from_secs(30))?;
    Ok(conn)
}

/// Inserts one raw order (in its own transaction unless the caller holds one).
fn raw_insert(conn: &Connection, template: &Template, id: &str, created_at: i64) -> Res<()> {
    let t = template;
    let merchant_order_id = format!("ord_{}", uuid::Uuid::now_v7().simple());
    let invoice_id = uuid::Uuid::now_v7().to_string();
    conn.prepare_cached(RAW_INSERT)?.execute(params![
        id,
        t.environment,
        t.user_id,
        t.key_id,
        merchant_order_id,
        t.amount,
        t.currency,
        created_at,
        invoice_id,
        t.pay_amount,
        t.pay_currency,
        t.rate,
        created_at + 30 * 60 * 1000,
        t.address,
        t.payment_uri,
        [0xA5u8; 32],
        t.create_response,
    ])?;
    Ok(())
}

/// File size of a SQLite database with its WAL, after a checkpoint.
fn checkpointed_bytes(path: &Path) -> Res<f64> {
    let conn = Connection::open(path)?;
    let (busy, _, _): (i64, i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
    if busy != 0 {
        eprintln!("  (checkpoint of {} was blocked; the WAL is counted as it is)", path.display());
    }
    drop(conn);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal_bytes = std::fs::metadata(PathBuf::from(wal)).map_or(0, |m| m.len());
    Ok((std::fs::metadata(path)?.len() + wal_bytes) as f64)
}

// ---- HTTP: a closed-loop client and a minimal responder -------------------------------

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

/// The Content-Length of a message head (0 when absent).
fn content_length(head: &[u8]) -> Res<usize> {
    let text = std::str::from_utf8(head)?;
    for line in text.split("\r\n").skip(1) {
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                return Ok(value.trim().parse()?);
            }
        }
    }
    Ok(0)
}

/// Reads one whole HTTP/1.1 message (head and Content-Length body) from `stream` into
/// `buf`; returns its length, or `None` when the peer closed before a new message.
fn read_message(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Res<Option<usize>> {
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(at) = find(buf, b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return if buf.is_empty() { Ok(None) } else { Err("connection closed mid-message".into()) };
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let total = head_end + content_length(&buf[..head_end])?;
    while buf.len() < total {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err("connection closed mid-body".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(total))
}

/// One keep-alive connection of the load client.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Res<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Client { stream, buf: Vec::with_capacity(32 * 1024) })
    }

    /// Sends `request` and reads the whole answer; returns its status and bytes.
    fn exchange(&mut self, request: &[u8]) -> Res<(u16, Vec<u8>)> {
        let len = self.send(request)?;
        let response: Vec<u8> = self.buf.drain(..len).collect();
        Ok((status_of(&response)?, response))
    }

    /// Sends `request`, reads the whole answer and returns its status only.
    fn status(&mut self, request: &[u8]) -> Res<u16> {
        let len = self.send(request)?;
        let status = status_of(&self.buf[..len])?;
        self.buf.drain(..len);
        Ok(status)
    }

    fn send(&mut self, request: &[u8]) -> Res<usize> {
        self.stream.write_all(request)?;
        read_message(&mut self.stream, &mut self.buf)?.ok_or_else(|| "the server closed the connection".into())
    }
}

fn status_of(response: &[u8]) -> Res<u16> {
    let status = response.get(9..12).and_then(|digits| std::str::from_utf8(digits).ok());
    Ok(status.ok_or("not an HTTP answer")?.parse()?)
}

fn get_request(target: &str, key: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: {key}\r\n\r\n").into_bytes()
}

fn post_request(key: &str) -> Vec<u8> {
    format!(
        "POST /v1/orders HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: {key}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{CREATE_BODY}",
        CREATE_BODY.len()
    )
    .into_bytes()
}

/// Builds the next request of a load client.
type RequestFn<'a> = dyn Fn(&mut Rng) -> Vec<u8> + Sync + 'a;

/// `conns` keep-alive connections sending `request(rng)` back to back, each answer read
/// in full and checked for `expect`.
fn http_load(addr: SocketAddr, conns: usize, duration: Duration, expect: u16, request: &RequestFn<'_>) -> Res<Run> {
    closed_loop(conns, duration, None, |i| {
        let mut client = Client::connect(addr)?;
        let mut rng = Rng::new(i as u64 + 7);
        Ok(move || -> Res<()> {
            let status = client.status(&request(&mut rng))?;
            if status != expect {
                return Err(format!("HTTP {status} from {addr}, expected {expect}").into());
            }
            Ok(())
        })
    })
}

/// What the minimal responder answers: the first route whose method matches and whose
/// path (without the query) equals `path`, or starts with it when `prefix`.
struct Route {
    method: &'static str,
    path: String,
    prefix: bool,
    response: Vec<u8>,
}

/// A minimal HTTP/1.1 server: std `TcpListener`, one thread per connection, keep-alive,
/// each request read in full (head and Content-Length body) and answered with fixed
/// bytes. It is the ceiling for the HTTP rows and the webhook receiver of the delivery
/// row.
struct Responder {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicU64>,
    accept: Option<JoinHandle<()>>,
}

impl Responder {
    fn start(routes: Vec<Route>, fallback: Vec<u8>) -> Res<Responder> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let table = Arc::new((routes, fallback));
        let accept = {
            let (stop, requests) = (Arc::clone(&stop), Arc::clone(&requests));
            std::thread::Builder::new().name("perf-responder".into()).spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (table, requests) = (Arc::clone(&table), Arc::clone(&requests));
                    // A connection ends when its client closes it; nothing waits for it.
                    let _ = std::thread::Builder::new()
                        .name("perf-responder-conn".into())
                        .spawn(move || answer_connection(stream, &table.0, &table.1, &requests));
                }
            })?
        };
        Ok(Responder { addr, stop, requests, accept: Some(accept) })
    }

    fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the stop.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn answer_connection(mut stream: TcpStream, routes: &[Route], fallback: &[u8], requests: &AtomicU64) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(16 * 1024);
    while let Ok(Some(len)) = read_message(&mut stream, &mut buf) {
        let response = {
            let line_end = find(&buf[..len], b"\r\n").unwrap_or(len);
            let line = std::str::from_utf8(&buf[..line_end]).unwrap_or("");
            let mut parts = line.split(' ');
            let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let path = target.split('?').next().unwrap_or("");
            routes
                .iter()
                .find(|r| r.method == method && (path == r.path || (r.prefix && path.starts_with(&r.path))))
                .map_or(fallback, |r| r.response.as_slice())
        };
        buf.drain(..len);
        requests.fetch_add(1, Ordering::Relaxed);
        if stream.write_all(response).is_err() {
            break;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// The answers coinorder gave, captured once per store, for the responder to repeat.
struct Canned {
    order: Vec<u8>,
    list: Vec<u8>,
    create: Vec<u8>,
}

impl Canned {
    fn routes(&self) -> Vec<Route> {
        vec![
            Route { method: "GET", path: "/v1/orders".into(), prefix: false, response: self.list.clone() },
            Route { method: "POST", path: "/v1/orders".into(), prefix: false, response: self.create.clone() },
            Route { method: "GET", path: "/v1/orders/".into(), prefix: true, response: self.order.clone() },
        ]
    }
}

/// An answer to anything else (and the webhook receiver's 200).
fn plain_response(status: &str, body: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}", body.len())
        .into_bytes()
}

fn body_of(response: &[u8]) -> &[u8] {
    find(response, b"\r\n\r\n").map_or(&[], |at| &response[at + 4..])
}

/// nginx answering the same paths with the same bodies (`return` with the captured
/// text; its own headers), when `nginx` is installed. Stopped when dropped.
struct Nginx {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Nginx {
    fn find() -> Option<PathBuf> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain(["/usr/sbin".into(), "/usr/local/sbin".into(), "/usr/local/nginx/sbin".into()])
            .map(|dir| dir.join("nginx"))
            .find(|candidate| candidate.is_file())
    }

    fn start(binary: &Path, canned: &Canned) -> Res<Nginx> {
        // The GET bodies are served as static files, the way nginx serves best; a list
        // page is also longer than the 4 KiB nginx allows a word of its configuration.
        // The create body goes in a `return`: a quoted string, backslash and quote
        // escaped, and `$` would start a variable.
        let quote = |response: &[u8]| -> Res<String> {
            let body = std::str::from_utf8(body_of(response))?;
            if body.contains('$') {
                return Err("a captured body holds `$`, which nginx would expand".into());
            }
            Ok(format!("'{}'", body.replace('\\', "\\\\").replace('\'', "\\'")))
        };
        let dir = tempfile::tempdir()?;
        // Run as root, nginx's workers drop to an unprivileged user, which must read these.
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        std::fs::write(dir.path().join("list.json"), body_of(&canned.list))?;
        std::fs::write(dir.path().join("order.json"), body_of(&canned.order))?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let prefix = dir.path().display().to_string();
        let config = format!(
            "worker_processes {cores};\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {prefix}/body;\n  proxy_temp_path {prefix}/proxy;\n  \
             fastcgi_temp_path {prefix}/fastcgi;\n  uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;\n  \
             keepalive_requests 100000000;\n  sendfile on;\n  tcp_nodelay on;\n  default_type application/json;\n  \
             root {prefix};\n  \
             server {{\n    listen 127.0.0.1:{port};\n    \
             location = /v1/orders {{\n      if ($request_method = POST) {{ return 201 {create}; }}\n      \
             try_files /list.json =404;\n    }}\n    location /v1/orders/ {{ try_files /order.json =404; }}\n  }}\n}}\n",
            cores = std::thread::available_parallelism().map_or(2, |n| n.get()),
            create = quote(&canned.create)?,
        );
        let config_path = dir.path().join("nginx.conf");
        std::fs::write(&config_path, config)?;
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&config_path)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("stderr.log"))?)
            .spawn()?;
        let mut nginx = Nginx { child, addr, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(addr).is_err() {
            if Instant::now() > deadline || nginx.child.try_wait()?.is_some() {
                let said = std::fs::read_to_string(nginx._dir.path().join("stderr.log")).unwrap_or_default();
                return Err(format!("nginx did not start: {}", said.trim()).into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(nginx)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // Our own child, by its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- the stores ------------------------------------------------------------------------

fn base_config(synchronous_full: bool) -> Config {
    let mut config = Config::new(Environment::Sandbox);
    config.rate_limit = RateLimit::OFF;
    config.sqlite.synchronous_full = synchronous_full;
    // The store's orders must never fall due in the expiry row, however long a run takes
    // (its clock starts at the real time): their quotes last a year. Only the value
    // stored in `expired_at` changes.
    config.invoice_ttl = Duration::from_secs(MAX_INVOICE_TTL_SECS);
    config
}

fn create_request() -> Res<CreateOrder> {
    Ok(CreateOrder { currency: "USD".into(), amount: AMOUNT.parse()?, ..Default::default() })
}

/// One store size: the coinorder file with its services, and the raw file.
struct Store {
    size: usize,
    path: PathBuf,
    /// `synchronous=NORMAL`: setup and the NORMAL create row.
    normal: Service,
    /// The default `synchronous=FULL`: every other row, and the HTTP server.
    full: Arc<Service>,
    key: String,
    key_id: String,
    merchant: Merchant,
    /// The orders of the setup, for gets.
    ids: Vec<String>,
    /// Orders in the coinorder store now.
    orders: AtomicU64,
    raw_path: PathBuf,
    raw_ids: Vec<String>,
    raw_rows: AtomicU64,
    template: Template,
}

impl Store {
    fn build(dir: &Path, size: usize) -> Res<Store> {
        let path = dir.join(format!("coinorder-{size}.db"));
        let raw_path = dir.join(format!("raw-{size}.db"));
        for file in [&path, &raw_path] {
            for suffix in ["", "-wal", "-shm", ".key"] {
                let mut name = file.as_os_str().to_owned();
                name.push(suffix);
                let _ = std::fs::remove_file(PathBuf::from(name));
            }
        }
        let normal = Service::open(&path, base_config(false))?;
        let full = Arc::new(Service::open(&path, base_config(true))?);
        let created =
            normal.create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None })?;
        let key = created.plain_key.expose().to_string();
        let merchant = normal.authenticate(Some(&key))?;

        // coinorder: through the typed API, one transaction per order; two threads so the
        // work outside the write lock (validation, ids, the 201 body) overlaps the commits.
        eprintln!(
            "[{}] creating {size} orders through Service::create_order (synchronous=NORMAL) ...",
            size_label(size)
        );
        let started = Instant::now();
        let done = AtomicU64::new(0);
        let request = create_request()?;
        let ids = std::thread::scope(|scope| -> Res<Vec<String>> {
            let threads = 2;
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (normal, merchant, request, done) = (&normal, &merchant, &request, &done);
                    scope.spawn(move || -> Res<Vec<String>> {
                        let share = size / threads + usize::from(t < size % threads);
                        let mut ids = Vec::with_capacity(share);
                        for _ in 0..share {
                            ids.push(normal.create_order(merchant, request)?.order.order.order_id);
                            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                            if n % 100_000 == 0 {
                                eprintln!("  {n} orders ({:.0} s)", started.elapsed().as_secs_f64());
                            }
                        }
                        Ok(ids)
                    })
                })
                .collect();
            let mut ids = Vec::with_capacity(size);
            for handle in handles {
                ids.extend(handle.join().map_err(|_| "a setup thread panicked")??);
            }
            Ok(ids)
        })?;
        let setup = started.elapsed();
        eprintln!(
            "  {} orders in {:.1} s ({})",
            ids.len(),
            setup.as_secs_f64(),
            per_second(ids.len() as f64 / setup.as_secs_f64())
        );

        let sample = full.get_order(&merchant, &ids[0])?;
        let sample_created = full.create_order(&merchant, &create_request()?)?;
        let template = Template {
            environment: sample.order.environment.as_str().to_string(),
            user_id: sample.order.user_id,
            key_id: sample.order.key_id.clone(),
            amount: sample.order.amount.to_string(),
            currency: sample.order.currency.clone(),
            pay_amount: sample.invoice.amount.to_string(),
            pay_currency: sample.invoice.currency.clone(),
            rate: sample.invoice.rate.to_string(),
            address: sample.invoice.address.clone(),
            payment_uri: sample.invoice.payment_uri.clone(),
            create_response: sample_created.response_body,
        };

        // raw: the same number of rows in large transactions (the cheapest way to fill it).
        let started = Instant::now();
        let mut raw = raw_open(&raw_path, false)?;
        raw.execute_batch(RAW_SCHEMA)?;
        let mut raw_ids = Vec::with_capacity(size);
        let base = chrono::Utc::now().timestamp_millis() - size as i64;
        for chunk in 0..size.div_ceil(10_000) {
            let tx = raw.transaction()?;
            for i in chunk * 10_000..((chunk + 1) * 10_000).min(size) {
                let id = uuid::Uuid::now_v7().to_string();
                raw_insert(&tx, &template, &id, base + i as i64)?;
                raw_ids.push(id);
            }
            tx.commit()?;
        }
        drop(raw);
        eprintln!("  raw: {size} rows in {:.1} s", started.elapsed().as_secs_f64());

        Ok(Store {
            size,
            path,
            normal,
            full,
            key,
            key_id: created.key.id,
            merchant,
            orders: AtomicU64::new(ids.len() as u64 + 1),
            ids,
            raw_path,
            raw_rows: AtomicU64::new(size as u64),
            raw_ids,
            template,
        })
    }

    fn orders(&self) -> u64 {
        self.orders.load(Ordering::SeqCst)
    }

    fn random_id(&self, rng: &mut Rng) -> &str {
        &self.ids[rng.below(self.ids.len())]
    }
}

// ---- the rows of one store size --------------------------------------------------------

struct Bench<'a> {
    options: &'a Options,
    store: &'a Store,
    nginx: Option<&'a Path>,
    rows: Vec<Row>,
}

impl Bench<'_> {
    fn label(&self, what: &str) -> String {
        format!("[{}] {what}", size_label(self.store.size))
    }

    fn push(&mut self, row: Row) {
        self.rows.push(row);
    }

    /// A note on how the coinorder store grew during a write row.
    fn growth(&self, before: u64) -> String {
        format!("store {} → {} orders", grouped(before as f64), grouped(self.store.orders() as f64))
    }

    fn bytes(&mut self) -> Res<()> {
        let store = self.store;
        let ours = checkpointed_bytes(&store.path)? / store.orders() as f64;
        let raw = checkpointed_bytes(&store.raw_path)? / store.raw_rows.load(Ordering::SeqCst) as f64;
        eprintln!("{}: {ours:.0} B per order, raw {raw:.0} B per row", self.label("bytes"));
        let row = Row::new(Kind::Bytes, store.size, "bytes per stored order", Unit::Bytes, Side::of(vec![ours]))
            .against("raw: bytes per row", Side::of(vec![raw]), vec![ours / raw])
            .note("file + WAL after a checkpoint ÷ orders");
        self.push(row);
        Ok(())
    }

    fn reads(&mut self) -> Res<()> {
        let store = self.store;
        let (service, merchant) = (&*store.full, &store.merchant);

        let typed_get = |d| {
            closed_loop(1, d, None, |i| {
                let mut rng = Rng::new(i as u64 + 1);
                Ok(move || -> Res<()> {
                    black_box(service.get_order(merchant, store.random_id(&mut rng))?);
                    Ok(())
                })
            })
        };
        let raw_get = |d| {
            closed_loop(1, d, None, |i| {
                let conn = raw_open(&store.raw_path, true)?;
                let mut rng = Rng::new(i as u64 + 1);
                Ok(move || -> Res<()> {
                    let id = &store.raw_ids[rng.below(store.raw_ids.len())];
                    black_box(conn.prepare_cached(RAW_GET)?.query_row([id], raw_order)?);
                    Ok(())
                })
            })
        };
        let (ours, base, ratios) = interleave(&self.label("get_order vs raw"), self.options, typed_get, raw_get)?;
        self.push(
            Row::new(Kind::Get, store.size, "`get_order` (typed)", Unit::PerSecond, ours)
                .against("raw `SELECT … WHERE id = ?`", base, ratios)
                .note("a random order of the store each call"),
        );

        let query = ListOrders { limit: 50, ..Default::default() };
        let typed_list = |d| {
            closed_loop(1, d, None, |_| {
                Ok(|| -> Res<()> {
                    let page = service.list_orders(merchant, &query)?;
                    if page.orders.len() != 50 {
                        return Err(format!("list_orders gave {} orders", page.orders.len()).into());
                    }
                    black_box(page);
                    Ok(())
                })
            })
        };
        let raw_list = |d| {
            closed_loop(1, d, None, |_| {
                let conn = raw_open(&store.raw_path, true)?;
                Ok(move || -> Res<()> {
                    let mut stmt = conn.prepare_cached(RAW_LIST)?;
                    let page = stmt.query_map([], raw_list_item)?.collect::<rusqlite::Result<Vec<_>>>()?;
                    if page.len() != 50 {
                        return Err(format!("raw list gave {} rows", page.len()).into());
                    }
                    black_box(page);
                    Ok(())
                })
            })
        };
        let (ours, base, ratios) = interleave(&self.label("list 50 vs raw"), self.options, typed_list, raw_list)?;
        self.push(Row::new(Kind::List, store.size, "`list_orders`, 50 (typed)", Unit::PerSecond, ours).against(
            "raw `SELECT … ORDER BY created_at DESC LIMIT 50`",
            base,
            ratios,
        ));

        let key = store.key.as_str();
        let handle_get = |d| {
            closed_loop(1, d, None, |i| {
                let mut rng = Rng::new(i as u64 + 1);
                Ok(move || -> Res<()> {
                    let request = WireRequest::new("GET", &format!("/v1/orders/{}", store.random_id(&mut rng)))
                        .header("x-api-key", key);
                    let response = service.handle(&request);
                    if response.status != 200 {
                        return Err(format!("handle GET order: {}", response.status).into());
                    }
                    black_box(response);
                    Ok(())
                })
            })
        };
        let (ours, base, ratios) =
            interleave(&self.label("handle GET order vs typed"), self.options, handle_get, typed_get)?;
        self.push(
            Row::new(Kind::HandleGet, store.size, "`handle`: `GET /v1/orders/<id>`", Unit::PerSecond, ours)
                .against("typed `get_order`", base, ratios)
                .note("`handle` authenticates the key and renders JSON each call"),
        );

        let handle_list = |d| {
            closed_loop(1, d, None, |_| {
                let request = WireRequest::new("GET", "/v1/orders?limit=50").header("x-api-key", key);
                Ok(move || -> Res<()> {
                    let response = service.handle(&request);
                    if response.status != 200 {
                        return Err(format!("handle GET list: {}", response.status).into());
                    }
                    black_box(response);
                    Ok(())
                })
            })
        };
        let (ours, base, ratios) =
            interleave(&self.label("handle GET list vs typed"), self.options, handle_list, typed_list)?;
        self.push(
            Row::new(Kind::HandleList, store.size, "`handle`: `GET /v1/orders?limit=50`", Unit::PerSecond, ours)
                .against("typed `list_orders`", base, ratios),
        );
        Ok(())
    }

    /// The HTTP rows on `coinorder serve` and the minimal responder (and
    /// nginx when installed). GETs here; the POST row runs with the other writes.
    fn http(&mut self, server: SocketAddr, canned: &Canned) -> Res<()> {
        let store = self.store;
        let responder = Responder::start(canned.routes(), plain_response("404 Not Found", "not found"))?;
        let nginx = match self.nginx {
            Some(binary) => match Nginx::start(binary, canned) {
                Ok(nginx) => Some(nginx),
                Err(e) => {
                    eprintln!("  nginx skipped: {e}");
                    None
                }
            },
            None => None,
        };
        let key = store.key.as_str();
        let list = get_request("/v1/orders?limit=50", key);
        let list = |_: &mut Rng| list.clone();
        let order = |rng: &mut Rng| get_request(&format!("/v1/orders/{}", store.random_id(rng)), key);
        let workloads: [(Kind, &str, usize, &RequestFn<'_>); 4] = [
            (Kind::HttpList1, "HTTP GET list 50, 1 connection", 1, &list),
            (Kind::HttpList8, "HTTP GET list 50, 8 connections", 8, &list),
            (Kind::HttpList64, "HTTP GET list 50, 64 connections", 64, &list),
            (Kind::HttpGet64, "HTTP GET order, 64 connections", 64, &order),
        ];
        for (kind, what, conns, request) in workloads {
            let ours = |d| http_load(server, conns, d, 200, request);
            let ceiling = |d| http_load(responder.addr, conns, d, 200, request);
            let (side, base, ratios) =
                interleave(&self.label(&format!("{what} vs std responder")), self.options, ours, ceiling)?;
            self.push(Row::new(kind, store.size, what, Unit::PerSecond, side).against(
                "minimal std HTTP/1.1 responder, same bytes",
                base,
                ratios,
            ));
            if let Some(nginx) = &nginx {
                let nginx_load = |d| http_load(nginx.addr, conns, d, 200, request);
                let (side, base, ratios) =
                    interleave(&self.label(&format!("{what} vs nginx")), self.options, ours, nginx_load)?;
                self.push(Row::new(kind, store.size, what, Unit::PerSecond, side).against(
                    "nginx, same bodies",
                    base,
                    ratios,
                ));
            }
        }
        Ok(())
    }

    fn creates(&mut self) -> Res<()> {
        let store = self.store;
        let request = create_request()?;
        let now_ms = || chrono::Utc::now().timestamp_millis();
        for (kind, synchronous_full) in [(Kind::CreateNormal, false), (Kind::CreateFull, true)] {
            let sync = if synchronous_full { "FULL" } else { "NORMAL" };
            let service: &Service = if synchronous_full { &store.full } else { &store.normal };
            let before = store.orders();
            let typed = |d| {
                let run = closed_loop(1, d, None, |_| {
                    Ok(|| -> Res<()> {
                        black_box(service.create_order(&store.merchant, &request)?);
                        Ok(())
                    })
                })?;
                store.orders.fetch_add(run.calls(), Ordering::SeqCst);
                Ok(run)
            };
            let raw = |d| {
                let run = closed_loop(1, d, None, |_| {
                    let conn = raw_open(&store.raw_path, synchronous_full)?;
                    Ok(move || -> Res<()> {
                        raw_insert(&conn, &store.template, &uuid::Uuid::now_v7().to_string(), now_ms())
                    })
                })?;
                store.raw_rows.fetch_add(run.calls(), Ordering::SeqCst);
                Ok(run)
            };
            let (ours, base, ratios) =
                interleave(&self.label(&format!("create {sync} vs raw")), self.options, typed, raw)?;
            let note = self.growth(before);
            self.push(
                Row::new(kind, store.size, format!("`create_order`, synchronous={sync}"), Unit::PerSecond, ours)
                    .against(format!("raw `INSERT`, one per transaction, {sync}"), base, ratios)
                    .note(note),
            );
        }

        let before = store.orders();
        let request = &request;
        let threads = |n: usize| {
            move |d| {
                let run = closed_loop(n, d, None, |_| {
                    let merchant = store.full.authenticate(Some(&store.key))?;
                    Ok(move || -> Res<()> {
                        black_box(store.full.create_order(&merchant, request)?);
                        Ok(())
                    })
                })?;
                store.orders.fetch_add(run.calls(), Ordering::SeqCst);
                Ok(run)
            }
        };
        let (ours, base, ratios) =
            interleave(&self.label("create FULL 4 threads vs 1"), self.options, threads(4), threads(1))?;
        let note = self.growth(before);
        self.push(
            Row::new(Kind::Threads, store.size, "`create_order` FULL, 4 threads", Unit::PerSecond, ours)
                .against("the same, 1 thread", base, ratios)
                .note(note),
        );
        Ok(())
    }

    fn http_post(&mut self, server: SocketAddr, canned: &Canned) -> Res<()> {
        let store = self.store;
        let responder = Responder::start(canned.routes(), plain_response("404 Not Found", "not found"))?;
        let post = post_request(&store.key);
        let post = |_: &mut Rng| post.clone();
        let before = store.orders();
        let ours = |d| {
            let run = http_load(server, 64, d, 201, &post)?;
            store.orders.fetch_add(run.calls(), Ordering::SeqCst);
            Ok(run)
        };
        let ceiling = |d| http_load(responder.addr, 64, d, 201, &post);
        let (side, base, ratios) =
            interleave(&self.label("HTTP POST create 64 vs std responder"), self.options, ours, ceiling)?;
        let note = format!("synchronous=FULL; {}", self.growth(before));
        self.push(
            Row::new(Kind::HttpPost64, store.size, "HTTP POST create, 64 connections", Unit::PerSecond, side)
                .against("minimal std HTTP/1.1 responder, same bytes", base, ratios)
                .note(note),
        );
        if let Some(binary) = self.nginx {
            match Nginx::start(binary, canned) {
                Ok(nginx) => {
                    let nginx_load = |d| http_load(nginx.addr, 64, d, 201, &post);
                    let (side, base, ratios) =
                        interleave(&self.label("HTTP POST create 64 vs nginx"), self.options, ours, nginx_load)?;
                    self.push(
                        Row::new(
                            Kind::HttpPost64,
                            store.size,
                            "HTTP POST create, 64 connections",
                            Unit::PerSecond,
                            side,
                        )
                        .against("nginx, same bodies", base, ratios),
                    );
                }
                Err(e) => eprintln!("  nginx skipped: {e}"),
            }
        }
        Ok(())
    }

    /// `deliver_due` through a backlog of `order.paid` events to a local receiver.
    fn delivery(&mut self) -> Res<()> {
        let store = self.store;
        let receiver = Responder::start(Vec::new(), plain_response("200 OK", "ok"))?;
        let url = format!("http://{}/webhook", receiver.addr);
        // Every event of the key's orders goes to the receiver (sandbox allows loopback).
        store.full.set_key_webhook_url(&store.key_id, Some(&url))?;
        let backlog = self.options.delivery_backlog.unwrap_or((store.size / 10).clamp(1, MAX_BACKLOG)).max(1);
        let label = self.label("delivery");
        let pay = SimulateAction::Pay { amount: None, confirmed: true };
        let (mut rates, mut claims, mut next) = (Vec::new(), Side::default(), 0);
        for round in 0..self.options.rounds {
            // A fresh backlog every round, as a burst of state changes leaves it: new
            // events, never attempted. (Requeued ones, `redeliver`, are not the same: they
            // carry their own due times, which the claim's ordering can use.)
            eprintln!("{label}: paying {backlog} orders (simulate pay, synchronous=NORMAL) ...");
            let started = Instant::now();
            let mut events = 0;
            for _ in 0..backlog {
                let id = match store.ids.get(next) {
                    Some(id) => id.clone(),
                    // More rounds than unpaid orders of the setup: new ones.
                    None => store.normal.create_order(&store.merchant, &create_request()?)?.order.order.order_id,
                };
                next += 1;
                events += store.normal.simulate(&id, &pay)?.events.len();
            }
            eprintln!("  {events} events pending ({:.1} s)", started.elapsed().as_secs_f64());
            let requests_before = receiver.requests();
            // One claim with the backlog present: the lease query, one request, the record.
            let mut claim = Run { elapsed: Duration::ZERO, latencies_ns: Vec::with_capacity(CLAIMS_PER_ROUND) };
            let mut delivered = 0;
            for _ in 0..CLAIMS_PER_ROUND {
                let started = Instant::now();
                let report = store.full.deliver_due(1)?;
                claim.latencies_ns.push(started.elapsed().as_nanos() as u64);
                claim.elapsed += started.elapsed();
                delivered += report.delivered;
            }
            let (p50, p99) = claim.percentiles().unwrap_or_default();
            claims.values.push(p50);
            claims.p50_ms.push(p50);
            claims.p99_ms.push(p99);

            let started = Instant::now();
            let mut other = 0;
            let (mut rest, mut calls) = (0, 0);
            loop {
                let report = store.full.deliver_due(DELIVERY_LIMIT)?;
                calls += 1;
                rest += report.delivered;
                other += report.retrying + report.failed + report.no_target;
                if report.attempted == 0 {
                    break;
                }
            }
            let elapsed = started.elapsed();
            let rate = rest as f64 / elapsed.as_secs_f64();
            delivered += rest;
            eprintln!(
                "{label}: round {}/{}  {} delivered ({other} not) in {:.2} s, {}; deliver_due(1) p50 {} ms; \
                 {} requests received; {calls} calls",
                round + 1,
                self.options.rounds,
                delivered,
                elapsed.as_secs_f64(),
                per_second(rate),
                ms(p50),
                receiver.requests() - requests_before,
            );
            if other > 0 {
                return Err(format!("{other} deliveries failed against a receiver that answers 200").into());
            }
            rates.push(rate);
        }
        store.full.set_key_webhook_url(&store.key_id, None)?;
        let backlog_text = grouped(backlog as f64);
        self.push(
            Row::new(
                Kind::Delivery,
                store.size,
                format!("`deliver_due`, {backlog_text} events pending"),
                Unit::PerSecond,
                Side::of(rates),
            )
            .note("deliveries/s to a local keep-alive receiver (200), delivery_concurrency 8, FULL"),
        );
        self.push(
            Row::new(
                Kind::Claim,
                store.size,
                format!("one claim: `deliver_due(1)`, {backlog_text} pending"),
                Unit::Millis,
                claims,
            )
            .note(format!("{CLAIMS_PER_ROUND} calls a round, each delivers one event")),
        );
        Ok(())
    }

    /// POST creates through `handle` while `expire_due` works through due invoices on
    /// another thread, against the same POSTs alone.
    fn expiry(&mut self) -> Res<()> {
        let store = self.store;
        let backlog = self.options.expiry_backlog;
        let clock = Arc::new(ManualClock::new(chrono::Utc::now().timestamp_millis()));
        let manual = |synchronous_full: bool| -> Res<Service> {
            let mut config = base_config(synchronous_full);
            config.invoice_ttl = Duration::from_secs(1);
            config.clock = clock.clone();
            Ok(Service::open(&store.path, config)?)
        };
        // Measured creates and the expiry run with the default FULL; the backlog is setup.
        let service = Arc::new(manual(true)?);
        // As `coinorder serve` does: checkpoints in the background, not in a commit.
        let mut checkpoints = service.start_checkpoint_worker(Duration::from_millis(500))?;
        let setup = manual(false)?;
        let merchant = setup.authenticate(Some(&store.key))?;
        let request = create_request()?;
        let post = WireRequest::new("POST", "/v1/orders")
            .header("x-api-key", &store.key)
            .header("content-type", "application/json")
            .body(CREATE_BODY);
        let label = self.label("POST during expiry");
        let before = store.orders();
        let mut busy = Vec::new();
        let mut expired_rates = Vec::new();
        let creates = |d: Duration, stop: Option<&AtomicBool>| -> Res<Run> {
            let run = closed_loop(1, d, stop, |_| {
                Ok(|| -> Res<()> {
                    let response = service.handle(&post);
                    if response.status != 201 {
                        return Err(format!("handle POST: {}", response.status).into());
                    }
                    Ok(())
                })
            })?;
            store.orders.fetch_add(run.calls(), Ordering::SeqCst);
            Ok(run)
        };
        // `interleave` calls each side once to warm up before the rounds.
        let mut warming_up = true;
        let mut with_expiry = |d: Duration| -> Res<Run> {
            let measured = !std::mem::replace(&mut warming_up, false);
            let started = Instant::now();
            // The warm-up only needs a taste of the backlog.
            let count = if measured { backlog } else { backlog.div_ceil(20) };
            for _ in 0..count {
                setup.create_order(&merchant, &request)?;
            }
            store.orders.fetch_add(count as u64, Ordering::SeqCst);
            // Every invoice made so far (this backlog and earlier rounds' creates) is due.
            clock.advance_ms(2_000);
            if measured {
                eprintln!("  {label}: {backlog} due invoices made ({:.1} s)", started.elapsed().as_secs_f64());
            }
            let drained = AtomicBool::new(false);
            let now = service.now();
            std::thread::scope(|scope| -> Res<Run> {
                let expiring = scope.spawn(|| -> Res<(usize, Duration)> {
                    let started = Instant::now();
                    let mut moved = 0;
                    // `expire_due` works through everything due in batches; a call
                    // that moves nothing means the backlog is gone.
                    let result = loop {
                        match service.expire_due(now) {
                            Ok(report) if report.expired + report.failed == 0 => break Ok((moved, started.elapsed())),
                            Ok(report) => moved += report.expired + report.failed,
                            Err(e) => break Err(e.into()),
                        }
                    };
                    drained.store(true, Ordering::SeqCst);
                    result
                });
                let run = creates(d, Some(&drained));
                let (moved, took) = expiring.join().map_err(|_| "the expiry thread panicked")??;
                let run = run?;
                if measured {
                    busy.push(took.as_secs_f64());
                    expired_rates.push(moved as f64 / took.as_secs_f64());
                }
                Ok(run)
            })
        };
        let without = |d: Duration| creates(d, None);
        let (ours, base, ratios) = interleave(&label, self.options, &mut with_expiry, without)?;
        checkpoints.stop();
        let note = format!(
            "1 client thread; each with-round `expire_due` works through {} due invoices ({:.1} s, {} \
             expired, medians) and creates are measured until it is done or for the round's time; FULL; {}",
            grouped(backlog as f64),
            median(&busy).unwrap_or(0.0),
            per_second(median(&expired_rates).unwrap_or(0.0)),
            self.growth(before)
        );
        self.push(
            Row::new(Kind::Expiry, store.size, "`handle` POST create during `expire_due`", Unit::PerSecond, ours)
                .against("the same POSTs, no expiry running", base, ratios)
                .note(note),
        );
        Ok(())
    }
}

/// `coinorder serve` on a store, as a merchant runs it (its defaults: 8 read threads,
/// default limits, the binary's allocator), in a process of its own on 127.0.0.1: what
/// the HTTP rows measure. Logs only failures (`--quiet`), takes any rate
/// (`--rate-limit 0`), and quotes for a year, like the store's own orders.
struct Served {
    child: Child,
    addr: SocketAddr,
    _stdout: Option<std::io::BufReader<std::process::ChildStdout>>,
}

impl Served {
    fn start(db: &Path) -> Res<Served> {
        let mut child = Command::new(COINORDER_BIN)
            .arg("serve")
            .arg("--db")
            .arg(db)
            .args(["--env", "sandbox", "--addr", "127.0.0.1:0", "--rate-limit", "0", "--quiet"])
            .args(["--invoice-ttl", &MAX_INVOICE_TTL_SECS.to_string()])
            // The store is in a temporary directory of this run.
            .arg("--allow-open-permissions")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        // `coinorder listening on http://<addr> (sandbox)` once it listens. The pipe stays
        // open while it runs: a write to a closed stdout would fail in the server.
        let mut said = String::new();
        let mut stdout = child.stdout.take().map(std::io::BufReader::new);
        if let Some(stdout) = &mut stdout {
            std::io::BufRead::read_line(stdout, &mut said)?;
        }
        let addr =
            said.split_whitespace().find_map(|word| word.strip_prefix("http://")).and_then(|addr| addr.parse().ok());
        match addr {
            Some(addr) => Ok(Served { child, addr, _stdout: stdout }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("`coinorder serve` did not start: {said:?}").into())
            }
        }
    }

    /// Stops the server as an operator would (SIGTERM), and waits for it to exit.
    fn stop(mut self) -> Res<()> {
        let asked = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status()?;
        if !asked.success() {
            return Err("could not send SIGTERM to `coinorder serve`".into());
        }
        let status = self.child.wait()?;
        if !status.success() {
            return Err(format!("`coinorder serve` exited with {status}").into());
        }
        Ok(())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // Only when a row failed before `stop`: our own child, by its handle.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The three answers the responder repeats, from the real server.
fn capture(server: SocketAddr, store: &Store) -> Res<Canned> {
    let mut client = Client::connect(server)?;
    let mut fetch = |request: Vec<u8>, expect: u16| -> Res<Vec<u8>> {
        let (status, response) = client.exchange(&request)?;
        if status != expect {
            return Err(format!("capturing a coinorder answer: HTTP {status}, expected {expect}").into());
        }
        Ok(response)
    };
    let order = fetch(get_request(&format!("/v1/orders/{}", store.ids[0]), &store.key), 200)?;
    let list = fetch(get_request("/v1/orders?limit=50", &store.key), 200)?;
    let create = fetch(post_request(&store.key), 201)?;
    store.orders.fetch_add(1, Ordering::SeqCst);
    Ok(Canned { order, list, create })
}

fn bench_size(options: &Options, dir: &Path, size: usize, nginx: Option<&Path>) -> Res<Vec<Row>> {
    let store = Store::build(dir, size)?;
    // Both files start with their write-ahead log copied back, as the setup's writes
    // leave them (whichever rows run, `--only`): a reader finds every page in the file.
    checkpointed_bytes(&store.path)?;
    checkpointed_bytes(&store.raw_path)?;
    let mut bench = Bench { options, store: &store, nginx, rows: Vec::new() };
    // Bytes and reads first, on the exact size; then the HTTP reads; then the rows that
    // write (creates, POSTs, deliveries, expiry), each noting how the store grew.
    if options.runs("bytes") {
        bench.bytes()?;
    }
    if options.runs("reads") {
        bench.reads()?;
    }
    // `serve` runs only while HTTP rows do: its background workers (checkpoints, expiry,
    // deliveries) would otherwise share the file with the create rows.
    let mut canned = None;
    if options.runs("http") {
        let server = Served::start(&store.path)?;
        let answers = capture(server.addr, &store)?;
        bench.http(server.addr, &answers)?;
        server.stop()?;
        canned = Some(answers);
    }
    if options.runs("creates") {
        bench.creates()?;
    }
    if options.runs("http-post") {
        let server = Served::start(&store.path)?;
        let answers = match canned {
            Some(answers) => answers,
            None => capture(server.addr, &store)?,
        };
        bench.http_post(server.addr, &answers)?;
        server.stop()?;
    }
    if options.runs("delivery") {
        bench.delivery()?;
    }
    if options.runs("expiry") {
        bench.expiry()?;
    }
    Ok(bench.rows)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("perf: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let options = options()?;
    let started = Instant::now();
    let machine = Machine::read();
    let load_before = load_average();
    let temp;
    let dir = match &options.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir.clone()
        }
        None => {
            temp = tempfile::tempdir()?;
            temp.path().to_path_buf()
        }
    };
    let nginx = Nginx::find();
    eprintln!("perf: {}; stores in {}", machine.describe(), dir.display());
    let mut rows = Vec::new();
    for &size in &options.sizes {
        rows.extend(bench_size(&options, &dir, size, nginx.as_deref())?);
        // The next size's store replaces this one on disk.
        for name in [format!("coinorder-{size}.db"), format!("raw-{size}.db")] {
            for suffix in ["", "-wal", "-shm", ".key"] {
                let _ = std::fs::remove_file(dir.join(format!("{name}{suffix}")));
            }
        }
    }
    // Each row next to the same row at the other sizes.
    rows.sort_by_key(|row| (row.kind, row.size));
    let report = Report {
        options: &options,
        machine,
        load_before,
        load_after: load_average(),
        elapsed: started.elapsed(),
        nginx: nginx.is_some(),
        rows,
    };
    report.print();
    Ok(())
}
