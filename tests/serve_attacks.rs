//! Attacks on the real `coinorder serve` binary over loopback, and proof that it survives
//! them.
//!
//! Every test starts its own `coinorder serve` (sandbox, port 0, `--rate-limit 0`) over
//! its own temporary database, with a `[limits]` section of short timeouts so that they
//! can be watched expire, and then plays one attack against it: huge declared bodies,
//! hundreds of idle connections, slow bodies, slow heads, pipelining clients that never
//! read, many keep-alive clients at once, oversized heads, an open-file limit of 256, a
//! database whose write lock another process holds, and key guessing from one address.
//!
//! What each test proves, besides what the attack itself must get (a 400 naming what was
//! too large or too slow, hyper's bare 431, a 503, a closed connection...):
//!
//! * a normal client (a fresh connection, `GET /v1/orders/<id>` with a valid key) is
//!   answered 200 in under a second while the attacker's connections are open, and after
//!   the attack;
//! * the server's resident memory (`VmRSS`, sampled every 20 ms by a thread) stays below
//!   100 MB during and after the attack;
//! * the process stays up, and a SIGTERM ends it with status 0 within the shutdown grace.
//!
//! Where a connection's end is watched from the server's side (`/proc/net/tcp`), it is
//! because reading from the client would be the very progress the server waits for.
//!
//! Every socket operation has a timeout and every server is killed when its test ends
//! (pass or fail), so a hang fails a test instead of stalling the suite. Run with
//! `--nocapture` to see what each test measured (probe latencies, peak memory, timings).

#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "common/backend.rs"]
mod backend;

use backend::{cli_key_file, db_named, RawDb};

const BIN: &str = env!("CARGO_BIN_EXE_coinorder");

// The `[limits]` every server here runs with: short, so that the tests can watch them.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
const BODY_GRACE: Duration = Duration::from_secs(1);
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);
const BUSY_TIMEOUT: Duration = Duration::from_millis(1500);
const QUEUE_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest a normal client may wait for its answer, attack or not.
const PROBE_LIMIT: Duration = Duration::from_secs(1);
/// Most resident memory the server may use, in KiB (100 MB).
const RSS_LIMIT_KIB: u64 = 100 * 1024;
/// Bound on any network wait that is not itself under test.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on the server starting.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The declared body of the huge-body attacks: 20 MB, far over `max_body_bytes` (1 MiB).
const HUGE_LENGTH: u64 = 20_000_000;

// ----- The server under attack -----

/// How to start a server.
#[derive(Default)]
struct Options {
    /// More `[limits]` lines, after the short timeouts.
    extra_limits: &'static str,
    /// Run the server under `ulimit -n` of this many files.
    open_files: Option<u32>,
}

/// A running `coinorder serve`, killed when dropped.
struct Serve {
    child: Child,
    pid: u32,
    addr: SocketAddr,
    /// The database: the SQLite file (the temporary directory lives as long as this), or
    /// with COINORDER_TEST_POSTGRES the URL of a PostgreSQL database of its own.
    db: PathBuf,
    _dir: tempfile::TempDir,
    /// A valid sandbox key.
    key: String,
    /// An order created with `key` at start.
    order_id: String,
    /// Everything the server wrote on stderr so far.
    stderr: Arc<Mutex<String>>,
    rss: RssSampler,
    /// Latency of every successful probe.
    probes: Mutex<Vec<Duration>>,
}

impl Serve {
    fn start(options: Options) -> Serve {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = db_named(dir.path(), "orders.db");
        let db_arg = db.to_str().expect("UTF-8 temp path").to_string();
        let created = Command::new(BIN)
            .current_dir(dir.path())
            .env_remove("COINORDER_DB")
            .envs(key_file_env())
            .args(["--db", &db_arg, "keys", "create", "--env", "sandbox", "--user-id", "1"])
            .output()
            .expect("run coinorder keys create");
        assert!(created.status.success(), "keys create failed: {}", String::from_utf8_lossy(&created.stderr));
        let created: Value = serde_json::from_slice(&created.stdout).expect("keys create prints JSON");
        let key = created["key"].as_str().expect("the plain key").to_string();

        let config = dir.path().join("serve.toml");
        std::fs::write(&config, config_text(options.extra_limits)).expect("write the config file");
        let config_arg = config.to_str().expect("UTF-8 temp path").to_string();
        let args = [
            "--db",
            &db_arg,
            "serve",
            "--env",
            "sandbox",
            "--addr",
            "127.0.0.1:0",
            "--config",
            &config_arg,
            "--rate-limit",
            "0",
        ];
        let mut command = match options.open_files {
            None => Command::new(BIN),
            Some(files) => {
                let mut shell = Command::new("sh");
                shell.arg("-c").arg(format!("ulimit -n {files} && exec \"$0\" \"$@\"")).arg(BIN);
                shell
            }
        };
        command
            .args(args)
            .current_dir(dir.path())
            .env_remove("COINORDER_DB")
            .envs(key_file_env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn coinorder serve");
        let stdout = child.stdout.take().expect("stdout pipe");
        let stderr_pipe = child.stderr.take().expect("stderr pipe");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).lines() {
                let Ok(line) = line else { break };
                let mut text = sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                text.push_str(&line);
                text.push('\n');
            }
        });
        let (line_tx, line_rx) = mpsc::channel();
        thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = line_tx.send(line);
            // Keep the pipe open (and empty) for as long as the server runs.
            let _ = io::copy(&mut reader, &mut io::sink());
        });
        let pid = child.id();
        let mut server = Serve {
            child,
            pid,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            db,
            _dir: dir,
            key,
            order_id: String::new(),
            stderr,
            rss: RssSampler::start(pid),
            probes: Mutex::new(Vec::new()),
        };
        let line = line_rx.recv_timeout(START_TIMEOUT).unwrap_or_default();
        server.addr = line
            .trim_end()
            .strip_prefix("coinorder listening on http://")
            .and_then(|rest| rest.strip_suffix(" (sandbox)"))
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("unexpected listening line {line:?}; stderr: {}", server.stderr_text()));

        let created = server.create_order();
        assert_eq!(created.status, 201, "create the probe's order: {}", created.text());
        server.order_id = created.json()["data"]["order_id"].as_str().expect("data.order_id").to_string();
        server
    }

    fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Waits (at most `within`) for the server's stderr to contain `needle`.
    fn stderr_contains(&self, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.stderr_text().contains(needle) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends one request on a fresh connection and reads the answer.
    fn send(&self, request: &[u8]) -> io::Result<Response> {
        let started = Instant::now();
        let mut conn = Conn::open(self.addr)?;
        conn.send(request)?;
        let mut response = conn.response()?;
        response.elapsed = started.elapsed();
        Ok(response)
    }

    /// [`Serve::send`] that must get an answer.
    fn exchange(&self, request: &[u8]) -> Response {
        self.send(request).unwrap_or_else(|e| {
            panic!(
                "no answer to {:?}: {e}; stderr: {}",
                String::from_utf8_lossy(&request[..request.len().min(200)]),
                self.stderr_text()
            )
        })
    }

    fn get_order_request(&self, extra: &[(&str, &str)]) -> Vec<u8> {
        let mut headers = vec![("x-api-key", self.key.as_str())];
        headers.extend_from_slice(extra);
        request("GET", &format!("/v1/orders/{}", self.order_id), &headers, "", true)
    }

    fn create_order_request(&self) -> Vec<u8> {
        let headers = [("x-api-key", self.key.as_str()), ("content-type", "application/json")];
        request("POST", "/v1/orders", &headers, r#"{"currency":"USD","amount":"10.00"}"#, true)
    }

    fn create_order(&self) -> Response {
        self.exchange(&self.create_order_request())
    }

    /// What a normal client gets: `GET /v1/orders/<id>` with the valid key, on a fresh
    /// connection.
    fn probe(&self) -> io::Result<Response> {
        self.send(&self.get_order_request(&[]))
    }

    /// The normal client is answered 200 within [`PROBE_LIMIT`], and memory is bounded.
    fn assert_probe(&self, when: &str) -> Duration {
        let response = self
            .probe()
            .unwrap_or_else(|e| panic!("{when}: the probe got no answer: {e}; stderr: {}", self.stderr_text()));
        assert_eq!(response.status, 200, "{when}: probe answered {}: {}", response.status, response.text());
        assert!(response.elapsed < PROBE_LIMIT, "{when}: probe took {:?}", response.elapsed);
        self.probes.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(response.elapsed);
        self.assert_memory(when);
        response.elapsed
    }

    /// The server's peak resident memory so far is below [`RSS_LIMIT_KIB`].
    fn assert_memory(&self, when: &str) {
        if let Some(now) = rss_kib(self.pid) {
            self.rss.max_kib.fetch_max(now, Ordering::SeqCst);
        }
        let peak = self.rss.max_kib();
        assert!(peak > 0, "{when}: no VmRSS for pid {}", self.pid);
        assert!(
            peak < RSS_LIMIT_KIB,
            "{when}: the server's RSS reached {} MiB; stderr: {}",
            peak / 1024,
            self.stderr_text()
        );
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM and waits for the exit, at most `within`; returns the status and how
    /// long the exit took.
    fn terminate(&mut self, within: Duration) -> (ExitStatus, Duration) {
        let started = Instant::now();
        let kill = Command::new("kill").args(["-TERM", &self.pid.to_string()]).status().expect("run kill");
        assert!(kill.success(), "kill -TERM {} failed", self.pid);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return (status, started.elapsed());
            }
            if started.elapsed() > within {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("serve did not exit within {within:?} of SIGTERM; stderr: {}", self.stderr_text());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Prints what the test measured (seen with `--nocapture`).
    fn summary(&self, test: &str, notes: &str) {
        let probes = self.probes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let slowest = probes.iter().max().copied().unwrap_or_default();
        eprintln!(
            "[{test}] probes: {} (slowest {:.1} ms); peak RSS {:.1} MiB; {notes}",
            probes.len(),
            slowest.as_secs_f64() * 1000.0,
            self.rss.max_kib() as f64 / 1024.0
        );
    }
}

impl Serve {
    /// Prints what the test measured, then checks that SIGTERM still ends the server
    /// cleanly: exit status 0 within the shutdown grace (and 2 s).
    fn finish(mut self, test: &str, notes: &str) {
        self.assert_memory("at the end");
        assert!(self.alive(), "the server died; stderr: {}", self.stderr_text());
        let (status, took) = self.terminate(SHUTDOWN_GRACE + Duration::from_secs(2));
        assert_eq!(status.code(), Some(0), "exit status on SIGTERM; stderr: {}", self.stderr_text());
        self.summary(test, &format!("{notes}; SIGTERM -> exit 0 in {}", millis(took)));
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The environment that gives `coinorder` the shared secret key file on PostgreSQL,
/// which opening a PostgreSQL database needs (none on SQLite: `<db>.key` is the default).
fn key_file_env() -> Vec<(&'static str, PathBuf)> {
    cli_key_file().map(|path| ("COINORDER_SECRET_KEY_FILE", path)).into_iter().collect()
}

fn config_text(extra_limits: &str) -> String {
    format!(
        "[limits]\n\
         header_timeout_secs = {}\n\
         body_grace_secs = {}\n\
         write_timeout_secs = {}\n\
         shutdown_grace_secs = {}\n\
         busy_timeout_ms = {}\n\
         queue_timeout_secs = {}\n\
         {extra_limits}",
        HEADER_TIMEOUT.as_secs(),
        BODY_GRACE.as_secs(),
        WRITE_TIMEOUT.as_secs(),
        SHUTDOWN_GRACE.as_secs(),
        BUSY_TIMEOUT.as_millis(),
        QUEUE_TIMEOUT.as_secs(),
    )
}

/// The peak resident memory of a process, sampled every 20 ms by a thread.
struct RssSampler {
    max_kib: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let max_kib = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (max, stopped) = (Arc::clone(&max_kib), Arc::clone(&stop));
        let thread = thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                match rss_kib(pid) {
                    Some(kib) => {
                        max.fetch_max(kib, Ordering::SeqCst);
                    }
                    // Exited (a zombie has no VmRSS line).
                    None => break,
                }
                thread::sleep(Duration::from_millis(20));
            }
        });
        RssSampler { max_kib, stop, thread: Some(thread) }
    }

    fn max_kib(&self) -> u64 {
        self.max_kib.load(Ordering::SeqCst)
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `VmRSS` of a process, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.trim_start_matches("VmRSS:").split_whitespace().next()?.parse().ok()
}

/// The soft `Max open files` limit in a `/proc/<pid>/limits` file.
fn open_file_limit(limits_file: &str) -> Option<usize> {
    let limits = std::fs::read_to_string(limits_file).ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files").split_whitespace().next()?.parse().ok()
}

// ----- Raw HTTP/1.1 -----

/// One request's bytes; `close` adds `Connection: close`, a body adds its length.
fn request(method: &str, target: &str, headers: &[(&str, &str)], body: &str, close: bool) -> Vec<u8> {
    let mut text = format!("{method} {target} HTTP/1.1\r\nhost: 127.0.0.1\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        text.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    if close {
        text.push_str("connection: close\r\n");
    }
    text.push_str("\r\n");
    text.push_str(body);
    text.into_bytes()
}

/// A parsed answer.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// From connecting (or sending) to the end of the body.
    elapsed: Duration,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }

    /// The `x-request-id` header, which must be `req_` and 16 lower-case hex digits.
    fn request_id(&self) -> String {
        let id = self.header("x-request-id").unwrap_or_else(|| panic!("no x-request-id on {self:?}"));
        let hex = id.strip_prefix("req_").unwrap_or("");
        assert!(
            hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "malformed x-request-id {id:?}"
        );
        id.to_string()
    }
}

/// How a connection ended, as the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The server closed it (FIN).
    Eof,
    /// The server reset it (RST), or the socket failed.
    Reset,
    /// Still open at the deadline.
    Open,
}

/// A client connection with a read buffer.
struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        Conn::from_stream(stream)
    }

    fn from_stream(stream: TcpStream) -> io::Result<Conn> {
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Conn { reader: BufReader::new(stream) })
    }

    fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        let stream = self.reader.get_mut();
        stream.write_all(bytes)?;
        stream.flush()
    }

    /// Reads one answer (head, then a body framed by `content-length`).
    fn response(&mut self) -> io::Result<Response> {
        let started = Instant::now();
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed before the status line"));
        }
        let status = parse_status(&line)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad status line {line:?}")))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed inside the head"));
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header
                .split_once(':')
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad header {header:?}")))?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        let length = headers.iter().find(|(name, _)| name == "content-length").map(|(_, value)| value.parse::<usize>());
        let body = match length {
            Some(Ok(length)) => {
                let mut body = vec![0; length];
                self.reader.read_exact(&mut body)?;
                body
            }
            Some(Err(_)) => return Err(io::Error::new(io::ErrorKind::InvalidData, "bad content-length")),
            None => Vec::new(),
        };
        Ok(Response { status, headers, body, elapsed: started.elapsed() })
    }

    /// The status of the next answer, or `None` when the connection is closed or reset
    /// first; an error when nothing came by `deadline`.
    fn status_by(&mut self, deadline: Instant) -> io::Result<Option<u16>> {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        self.stream().set_read_timeout(Some(left))?;
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Ok(None),
            Ok(_) => parse_status(&line)
                .map(Some)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad status line {line:?}"))),
            Err(e) if is_timeout(&e) => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// Reads and discards until the server ends the connection, or `deadline`; returns
    /// how it ended and how many bytes were discarded.
    fn wait_closed(&mut self, deadline: Instant) -> (Ending, usize) {
        let mut discarded = 0;
        let mut buf = [0u8; 64 * 1024];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return (Ending::Open, discarded);
            }
            if self.stream().set_read_timeout(Some(left)).is_err() {
                return (Ending::Reset, discarded);
            }
            match self.reader.read(&mut buf) {
                Ok(0) => return (Ending::Eof, discarded),
                Ok(n) => discarded += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return (Ending::Open, discarded),
                Err(_) => return (Ending::Reset, discarded),
            }
        }
    }
}

fn parse_status(line: &str) -> Option<u16> {
    let rest = line.strip_prefix("HTTP/1.1 ").or_else(|| line.strip_prefix("HTTP/1.0 "))?;
    rest.get(..3)?.parse().ok()
}

fn is_timeout(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// A connection whose receive buffer is a few KiB, so that a server writing to a client
/// that does not read fills it at once.
fn open_non_reader(addr: SocketAddr) -> io::Result<Conn> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_recv_buffer_size(4096)?;
    socket.connect_timeout(&addr.into(), IO_TIMEOUT)?;
    Conn::from_stream(socket.into())
}

/// The server's ends of the loopback connections to `server_port`, from `/proc/net/tcp`:
/// by client port, the TCP state (`1` is established) and the bytes queued to send.
fn server_side_sockets(server_port: u16) -> HashMap<u16, (u8, u64)> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("read /proc/net/tcp");
    let port = |address: &str| address.rsplit(':').next().and_then(|hex| u16::from_str_radix(hex, 16).ok());
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 5 || port(fields[1]) != Some(server_port) {
                return None;
            }
            let state = u8::from_str_radix(fields[3], 16).ok()?;
            let queued = u64::from_str_radix(fields[4].split(':').next()?, 16).ok()?;
            Some((port(fields[2])?, (state, queued)))
        })
        .collect()
}

fn millis(duration: Duration) -> String {
    format!("{:.0} ms", duration.as_secs_f64() * 1000.0)
}

// ----- The attacks -----

/// 600 connections declare a 20 MB body and send none: each is answered at once with the
/// API's 400 for a body too large, and closed, unread.
#[test]
fn huge_declared_bodies_are_refused_with_400_and_closed() {
    let server = Serve::start(Options::default());
    let attack = request(
        "POST",
        "/v1/orders",
        &[("content-type", "application/json"), ("content-length", &HUGE_LENGTH.to_string())],
        "",
        false,
    );
    let mut slowest_answer = Duration::ZERO;
    let mut endings = [0usize; 2];
    for batch in 0..6 {
        let mut conns = Vec::new();
        for i in 0..100 {
            let mut conn = Conn::open(server.addr).unwrap_or_else(|e| panic!("batch {batch}, connection {i}: {e}"));
            conn.send(&attack).unwrap_or_else(|e| panic!("batch {batch}, connection {i}: send: {e}"));
            conns.push((conn, Instant::now()));
        }
        server.assert_probe(&format!("batch {batch} of huge declared bodies open"));
        for (i, (conn, sent)) in conns.iter_mut().enumerate() {
            let deadline = *sent + IO_TIMEOUT;
            let status = conn.status_by(deadline).unwrap_or_else(|e| panic!("batch {batch}, connection {i}: {e}"));
            assert_eq!(status, Some(400), "batch {batch}, connection {i}");
            slowest_answer = slowest_answer.max(sent.elapsed());
            match conn.wait_closed(deadline) {
                (Ending::Eof, _) => endings[0] += 1,
                (Ending::Reset, _) => endings[1] += 1,
                (Ending::Open, _) => panic!("batch {batch}, connection {i}: still open after the 400"),
            }
        }
        drop(conns);
        server.assert_memory(&format!("after batch {batch}"));
    }
    server.assert_probe("after the huge declared bodies");
    let response = server.exchange(&attack);
    let body = response.json();
    assert_eq!((response.status, &body["error_code"]), (400, &Value::from("PARAMETERS_MISSING")), "{body}");
    assert_eq!(body["error"], "body: at most 65536 bytes", "{body}");
    assert_eq!(response.header("connection"), Some("close"));
    server.finish(
        "huge declared bodies",
        &format!(
            "600 x 400, slowest status line {}; closed by FIN {} / RST {}",
            millis(slowest_answer),
            endings[0],
            endings[1]
        ),
    );
}

/// Hundreds of connections that send nothing: the server keeps answering others, and
/// closes each idle connection after the header timeout.
#[test]
fn idle_connections_are_closed_after_the_header_timeout() {
    let server = Serve::start(Options::default());
    let count = match open_file_limit("/proc/self/limits") {
        Some(limit) if limit < 700 => limit.saturating_sub(150),
        _ => 500,
    };
    let opened = Instant::now();
    // Each with the moment it was connected: a connect whose SYN found the listen queue
    // full is retried by the kernel a second later.
    let mut conns: Vec<(Conn, Instant)> = (0..count)
        .map(|i| (Conn::open(server.addr).unwrap_or_else(|e| panic!("idle connection {i}: {e}")), Instant::now()))
        .collect();
    let open_time = opened.elapsed();
    server.assert_probe(&format!("{count} idle connections open"));
    thread::sleep(Duration::from_millis(500));
    server.assert_probe(&format!("{count} idle connections open, 0.5 s later"));

    // The first one is closed by the server after the header timeout...
    let (first, connected) = &mut conns[0];
    let (ending, bytes) = first.wait_closed(*connected + HEADER_TIMEOUT + Duration::from_secs(2));
    let closed_after = connected.elapsed();
    assert_ne!(ending, Ending::Open, "an idle connection was still open {closed_after:?} after connecting");
    assert!(
        closed_after >= HEADER_TIMEOUT.mul_f64(0.9),
        "an idle connection was closed after {closed_after:?}, before the header timeout"
    );
    // ...and so are all the others.
    let still_open = conns
        .iter_mut()
        .skip(1)
        .filter_map(|(conn, connected)| {
            (conn.wait_closed(*connected + HEADER_TIMEOUT + Duration::from_secs(2)).0 == Ending::Open).then_some(())
        })
        .count();
    assert_eq!(still_open, 0, "idle connections still open {:?} after the first connected", opened.elapsed());
    drop(conns);
    server.assert_probe("after the idle connections");
    server.finish(
        "idle connections",
        &format!(
            "{count} idle connections opened in {}; first closed after {} ({ending:?}, {bytes} bytes sent to it)",
            millis(open_time),
            millis(closed_after)
        ),
    );
}

/// Bodies that stall after 10 of 2000 bytes: answered 400 naming the body (or closed) once
/// the body grace is over.
#[test]
fn stalled_bodies_get_400() {
    let server = Serve::start(Options::default());
    let mut head = request(
        "POST",
        "/v1/orders",
        &[("x-api-key", &server.key), ("content-type", "application/json"), ("content-length", "2000")],
        "",
        false,
    );
    head.extend_from_slice(br#"{"currency"#);
    let sent = Instant::now();
    let mut conns: Vec<Conn> = (0..8)
        .map(|i| {
            let mut conn = Conn::open(server.addr).unwrap_or_else(|e| panic!("slow body {i}: {e}"));
            conn.send(&head).unwrap_or_else(|e| panic!("slow body {i}: send: {e}"));
            conn
        })
        .collect();
    server.assert_probe("8 stalled bodies open");
    let deadline = sent + BODY_GRACE + Duration::from_secs(3);
    let mut outcomes = Vec::new();
    for (i, conn) in conns.iter_mut().enumerate() {
        let status = conn.status_by(deadline).unwrap_or_else(|e| panic!("stalled body {i}: no 400 nor close: {e}"));
        let at = sent.elapsed();
        assert!(matches!(status, Some(400) | None), "stalled body {i}: answered {status:?}");
        assert!(at >= BODY_GRACE.mul_f64(0.9), "stalled body {i}: refused after {at:?}, within the grace");
        if status.is_some() {
            assert_ne!(conn.wait_closed(deadline).0, Ending::Open, "stalled body {i}: open after its 400");
        }
        outcomes.push((status, at));
    }
    drop(conns);
    server.assert_probe("after the stalled bodies");
    let answered = outcomes.iter().filter(|(status, _)| *status == Some(400)).count();
    let latest = outcomes.iter().map(|(_, at)| *at).max().unwrap_or_default();
    server.finish(
        "stalled bodies",
        &format!("{answered} of 8 answered 400 (others closed), all within {} of sending", millis(latest)),
    );
}

/// Heads that stall after half a request line: closed after the header timeout.
#[test]
fn stalled_heads_are_closed_after_the_header_timeout() {
    let server = Serve::start(Options::default());
    let sent = Instant::now();
    let mut conns: Vec<Conn> = (0..8)
        .map(|i| {
            let mut conn = Conn::open(server.addr).unwrap_or_else(|e| panic!("slow head {i}: {e}"));
            conn.send(b"GET /v1/ord").unwrap_or_else(|e| panic!("slow head {i}: send: {e}"));
            conn
        })
        .collect();
    server.assert_probe("8 stalled heads open");
    thread::sleep(Duration::from_millis(500));
    server.assert_probe("8 stalled heads open, 0.5 s later");
    let deadline = sent + HEADER_TIMEOUT + Duration::from_secs(2);
    let mut outcomes = Vec::new();
    for (i, conn) in conns.iter_mut().enumerate() {
        let (ending, bytes) = conn.wait_closed(deadline);
        let at = sent.elapsed();
        assert_ne!(ending, Ending::Open, "stalled head {i} still open after {at:?}");
        assert!(at >= HEADER_TIMEOUT.mul_f64(0.9), "stalled head {i} closed after {at:?}, before the header timeout");
        outcomes.push((ending, bytes, at));
    }
    drop(conns);
    server.assert_probe("after the stalled heads");
    server.finish(
        "stalled heads",
        &format!(
            "closed after {} ({:?}, {} bytes answered)",
            millis(outcomes[0].2),
            outcomes[0].0,
            outcomes.iter().map(|(_, bytes, _)| bytes).sum::<usize>()
        ),
    );
}

/// Clients that pipeline 200 large list requests and never read: cut off after the write
/// timeout; a SIGTERM while more of them are stuck still ends the server cleanly.
#[test]
fn pipelining_clients_that_never_read_are_cut_off() {
    let mut server = Serve::start(Options::default());
    // 50 orders in all, so that each answer is a full page.
    let mut conn = Conn::open(server.addr).expect("connect");
    let headers = [("x-api-key", server.key.as_str()), ("content-type", "application/json")];
    for i in 0..49 {
        conn.send(&request("POST", "/v1/orders", &headers, r#"{"currency":"USD","amount":"10.00"}"#, false))
            .expect("send a create");
        let created = conn.response().expect("create answered");
        assert_eq!(created.status, 201, "order {i}: {}", created.text());
    }
    let one = request("GET", "/v1/orders?limit=50", &[("x-api-key", &server.key)], "", false);
    conn.send(&one).expect("send a list");
    let page = conn.response().expect("list answered");
    assert_eq!(page.status, 200, "{}", page.text());
    drop(conn);
    // The size of one answer on the wire: status line, headers, blank line, body.
    let answer_bytes = "HTTP/1.1 200 OK\r\n\r\n".len()
        + page.headers.iter().map(|(name, value)| name.len() + value.len() + 4).sum::<usize>()
        + page.body.len();
    let pipeline: Vec<u8> = one.iter().copied().cycle().take(one.len() * 200).collect();
    let open_non_readers = |what: &str| -> Vec<Conn> {
        (0..8)
            .map(|i| {
                let mut conn = open_non_reader(server.addr).unwrap_or_else(|e| panic!("{what} {i}: {e}"));
                conn.stream().set_write_timeout(Some(Duration::from_secs(1))).expect("write timeout");
                // The server may stop reading before all 200 are in: that is its right.
                let _ = conn.send(&pipeline);
                conn
            })
            .collect()
    };
    let written = Instant::now();
    let mut conns = open_non_readers("non-reader");
    server.assert_probe("8 pipelining non-readers open");
    thread::sleep(Duration::from_millis(500));
    server.assert_probe("8 pipelining non-readers open, 0.5 s later");
    thread::sleep((WRITE_TIMEOUT + Duration::from_secs(2)).saturating_sub(written.elapsed()));
    server.assert_probe("8 pipelining non-readers after the write timeout");

    // The server answers until a connection's socket buffers are full (the kernel grows
    // them to a few MB, so that takes as long as rendering ~170 answers per connection
    // takes), then gives up on it once nothing moved for the write timeout. Watched from
    // the server's end of each connection (`/proc/net/tcp`): reading would be progress.
    let ports: Vec<u16> = conns.iter().map(|conn| conn.stream().local_addr().expect("local address").port()).collect();
    let mut closed_at: Vec<Option<Duration>> = vec![None; ports.len()];
    let mut last_probe = Instant::now();
    while closed_at.iter().any(Option::is_none) {
        let sockets = server_side_sockets(server.addr.port());
        for (port, closed) in ports.iter().zip(closed_at.iter_mut()) {
            if closed.is_none() && sockets.get(port).is_none_or(|(state, _)| *state != 1) {
                *closed = Some(written.elapsed());
            }
        }
        assert!(
            written.elapsed() < Duration::from_secs(30),
            "non-readers still served 30 s after pipelining: closed at {closed_at:?}"
        );
        if last_probe.elapsed() >= Duration::from_secs(1) {
            server.assert_probe("non-readers being answered");
            last_probe = Instant::now();
        }
        thread::sleep(Duration::from_millis(50));
    }
    // What the server had sent can be read now, then the end.
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut drained = Vec::new();
    for (i, conn) in conns.iter_mut().enumerate() {
        let (ending, bytes) = conn.wait_closed(deadline);
        assert_ne!(ending, Ending::Open, "non-reader {i}: the server closed it, the client never sees the end");
        drained.push((ending, bytes));
    }
    server.assert_memory("after the non-readers were cut off");

    // More of them, and once the server is stuck writing to them (its send queues stop
    // growing), SIGTERM: the server exits 0 within the grace all the same.
    let stuck = open_non_readers("stuck non-reader");
    let ports: Vec<u16> = stuck.iter().map(|conn| conn.stream().local_addr().expect("local address").port()).collect();
    let queued = || -> Vec<u64> {
        let sockets = server_side_sockets(server.addr.port());
        ports.iter().map(|port| sockets.get(port).map_or(0, |(_, queued)| *queued)).collect()
    };
    let waiting = Instant::now();
    let mut before = queued();
    let stuck_after = loop {
        thread::sleep(Duration::from_millis(300));
        let now = queued();
        if now == before && now.iter().any(|bytes| *bytes > 0) {
            break Some(waiting.elapsed());
        }
        if waiting.elapsed() > Duration::from_secs(15) {
            break None;
        }
        before = now;
    };
    server.assert_probe("8 more non-readers stuck");
    let (status, took) = server.terminate(SHUTDOWN_GRACE + Duration::from_secs(2));
    assert_eq!(status.code(), Some(0), "exit status on SIGTERM; stderr: {}", server.stderr_text());
    drop((conns, stuck));
    // Fewer than 200 answers delivered: the server gave up on the connection with answers
    // still to send (the write timeout), rather than closing it idle after the last one.
    let answers: Vec<usize> = drained.iter().map(|(_, bytes)| bytes / answer_bytes).collect();
    server.summary(
        "pipelining non-readers",
        &format!(
            "answer of 50 orders = {answer_bytes} bytes; {answers:?} answers of 200 delivered per connection; \
             server closed them {} to {} after the pipelining, endings {:?}; \
             8 more stuck ({}) with {} MB queued, then SIGTERM -> exit 0 in {}",
            millis(closed_at.iter().flatten().min().copied().unwrap_or_default()),
            millis(closed_at.iter().flatten().max().copied().unwrap_or_default()),
            drained.iter().map(|(ending, _)| *ending).collect::<Vec<_>>(),
            stuck_after.map_or("not within 15 s".to_string(), |after| format!("after {}", millis(after))),
            before.iter().sum::<u64>() / 1_000_000,
            millis(took)
        ),
    );
}

/// 12 keep-alive clients at once, 20 requests each: all 240 answered 200 within a second.
#[test]
fn twelve_keep_alive_clients_are_all_answered() {
    let server = Serve::start(Options::default());
    let start = Arc::new(Barrier::new(13));
    let one = request("GET", &format!("/v1/orders/{}", server.order_id), &[("x-api-key", &server.key)], "", false);
    let clients: Vec<JoinHandle<Vec<Duration>>> = (0..12)
        .map(|client| {
            let (start, addr, one) = (Arc::clone(&start), server.addr, one.clone());
            thread::spawn(move || {
                let mut conn = Conn::open(addr).unwrap_or_else(|e| panic!("client {client}: {e}"));
                start.wait();
                (0..20)
                    .map(|i| {
                        let sent = Instant::now();
                        conn.send(&one).unwrap_or_else(|e| panic!("client {client}, request {i}: send: {e}"));
                        let response = conn.response().unwrap_or_else(|e| panic!("client {client}, request {i}: {e}"));
                        let took = sent.elapsed();
                        assert_eq!(response.status, 200, "client {client}, request {i}: {}", response.text());
                        assert!(took < PROBE_LIMIT, "client {client}, request {i} took {took:?}");
                        took
                    })
                    .collect()
            })
        })
        .collect();
    start.wait();
    server.assert_probe("12 keep-alive clients running");
    let mut latencies: Vec<Duration> = Vec::new();
    for (client, handle) in clients.into_iter().enumerate() {
        latencies.extend(handle.join().unwrap_or_else(|_| panic!("client {client} failed")));
    }
    assert_eq!(latencies.len(), 240);
    server.assert_probe("after the keep-alive clients");
    latencies.sort();
    server.finish(
        "12 keep-alive clients",
        &format!(
            "240 x 200: median {}, p99 {}, max {}",
            millis(latencies[120]),
            millis(latencies[237]),
            millis(latencies[239])
        ),
    );
}

/// Oversized and ambiguous heads: a 64 MiB header line and 150 headers get hyper's 431 (or
/// a closed connection), a 9000-byte target the API's 400 naming it; two API keys and two
/// lengths get 400.
#[test]
fn oversized_and_ambiguous_heads_are_refused() {
    let server = Serve::start(Options::default());

    // One header line of 64 MiB, written until the server stops taking it.
    let mut conn = Conn::open(server.addr).expect("connect");
    let mut writer = conn.stream().try_clone().expect("clone the stream");
    writer.set_write_timeout(Some(Duration::from_secs(2))).expect("write timeout");
    let writing = thread::spawn(move || {
        let total = 64usize << 20;
        let chunk = vec![b'a'; 64 * 1024];
        let mut sent = 0;
        if writer.write_all(b"GET /v1/orders HTTP/1.1\r\nhost: 127.0.0.1\r\nx-huge: ").is_err() {
            return sent;
        }
        while sent < total {
            match writer.write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => return sent,
            }
        }
        let _ = writer.write_all(b"\r\n\r\n");
        sent
    });
    thread::sleep(Duration::from_millis(100));
    server.assert_probe("a 64 MiB header being sent");
    let status = match conn.status_by(Instant::now() + IO_TIMEOUT) {
        Ok(status) => status,
        Err(e) if is_timeout(&e) => panic!("no answer nor close for a 64 MiB header: {e}"),
        Err(e) => panic!("64 MiB header: {e}"),
    };
    assert!(matches!(status, Some(431) | None), "a 64 MiB header was answered {status:?}");
    let sent = writing.join().expect("the writer thread");
    drop(conn);
    server.assert_memory("after a 64 MiB header");
    assert!(sent < 64 << 20, "the server read all 64 MiB of one header line");

    // 150 headers.
    let many: Vec<(String, String)> = (0..150).map(|i| (format!("x-h{i}"), "v".to_string())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let response = server.exchange(&request("GET", "/v1/orders", &many, "", true));
    assert_eq!(response.status, 431, "150 headers: {}", response.text());

    // A 9000-byte request target.
    let target = format!("/v1/orders?pad={}", "a".repeat(9000 - "/v1/orders?pad=".len()));
    assert_eq!(target.len(), 9000);
    let response = server.exchange(&request("GET", &target, &[("x-api-key", &server.key)], "", true));
    assert_eq!(response.status, 400, "a 9000-byte target: {}", response.text());
    let body = response.json();
    assert_eq!(body["error_code"], "PARAMETERS_MISSING", "{body}");
    assert_eq!(body["error"], "request target: at most 8192 bytes", "{body}");
    assert_eq!(response.header("connection"), Some("close"));

    // Two API keys: which one would be checked is anyone's guess.
    let response = server.exchange(&request(
        "GET",
        &format!("/v1/orders/{}", server.order_id),
        &[("x-api-key", &server.key), ("x-api-key", "test_0000000000000000000000000000000000000000")],
        "",
        true,
    ));
    assert_eq!(response.status, 400, "two x-api-key headers: {}", response.text());
    let body = response.json();
    assert_eq!(body["error_code"], "PARAMETERS_MISSING", "{body}");
    assert_eq!(body["error"], "x-api-key: sent more than once", "{body}");

    // Two different lengths: where the body ends is anyone's guess.
    let response = server.exchange(
        b"POST /v1/orders HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 5\r\ncontent-length: 6\r\n\
          connection: close\r\n\r\n{\"a\":1}",
    );
    assert_eq!(response.status, 400, "two content-length headers: {}", response.text());

    server.assert_probe("after the oversized heads");
    server.finish(
        "oversized heads",
        &format!(
            "64 MiB header line: {} after the server took {:.1} MiB; 150 headers 431, 9000-byte target 400, \
             two keys 400, two lengths 400",
            status.map_or("connection closed".to_string(), |s| format!("status {s}")),
            sent as f64 / (1 << 20) as f64
        ),
    );
}

/// Under `ulimit -n 256`, 1000 connection attempts with up to 250 open at once: the server
/// refuses what it cannot take, stays up, and answers normally once they are gone.
#[test]
fn a_flood_of_connections_under_a_low_open_file_limit() {
    let mut server = Serve::start(Options { open_files: Some(256), ..Options::default() });
    assert_eq!(open_file_limit(&format!("/proc/{}/limits", server.pid)), Some(256), "ulimit -n applied");
    let one = request("GET", &format!("/v1/orders/{}", server.order_id), &[("x-api-key", &server.key)], "", false);
    let (mut attempts, mut connect_failures) = (0usize, 0usize);
    let mut answered: Vec<Option<u16>> = Vec::new();
    let mut probes_during = Vec::new();
    for round in 0..4 {
        // 5 attackers of 50 connections each.
        let attackers: Vec<JoinHandle<(Vec<TcpStream>, usize)>> = (0..5)
            .map(|_| {
                let (addr, one) = (server.addr, one.clone());
                thread::spawn(move || {
                    let mut open = Vec::new();
                    let mut failed = 0;
                    for _ in 0..50 {
                        match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
                            Ok(mut stream) => {
                                let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
                                let _ = stream.write_all(&one);
                                open.push(stream);
                            }
                            Err(_) => failed += 1,
                        }
                    }
                    (open, failed)
                })
            })
            .collect();
        let mut streams = Vec::new();
        for attacker in attackers {
            let (open, failed) = attacker.join().expect("attacker thread");
            attempts += open.len() + failed;
            connect_failures += failed;
            streams.extend(open);
        }
        // While the server is at its cap, a client is answered at once: 200, or a clean
        // 503 with Retry-After.
        let probe = server.probe().unwrap_or_else(|e| panic!("round {round}: probe got no answer: {e}"));
        assert!(probe.elapsed < PROBE_LIMIT, "round {round}: probe took {:?}", probe.elapsed);
        match probe.status {
            200 => {}
            503 => assert!(probe.header("retry-after").is_some(), "round {round}: 503 without Retry-After"),
            other => panic!("round {round}: probe answered {other}: {}", probe.text()),
        }
        probes_during.push((probe.status, probe.elapsed));
        server.assert_memory(&format!("round {round} of the flood"));
        for stream in streams.iter().take(20) {
            let mut conn = Conn { reader: BufReader::new(stream.try_clone().expect("clone")) };
            answered.push(conn.status_by(Instant::now() + Duration::from_millis(100)).ok().flatten());
        }
        drop(streams);
    }
    assert_eq!(attempts, 1000);

    // Once the flood is gone, a normal client gets 200 within a second (the accept
    // backoff gets up to 3 s to recover).
    let gone = Instant::now();
    let recovered = loop {
        match server.probe() {
            Ok(response) if response.status == 200 && response.elapsed < PROBE_LIMIT => break response.elapsed,
            other => {
                assert!(gone.elapsed() < Duration::from_secs(3), "not recovered 3 s after the flood: {other:?}");
                thread::sleep(Duration::from_millis(100));
            }
        }
    };
    server.probes.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(recovered);
    assert!(server.alive(), "the server died; stderr: {}", server.stderr_text());
    server.assert_probe("after the flood");
    let log = server.stderr_text();
    assert!(log.contains("max_connections reached"), "the flood never reached the connection cap: {log}");
    let count = |status: Option<u16>| answered.iter().filter(|s| **s == status).count();
    server.finish(
        "ulimit -n 256 flood",
        &format!(
            "{attempts} attempts, {connect_failures} connects failed; sampled attackers got 200 x{}, 503 x{}, \
             nothing x{}; probes during {probes_during:?}; recovered after {}; log: {} connections refused at the \
             cap, {} accept failures {:?}",
            count(Some(200)),
            count(Some(503)),
            count(None),
            millis(gone.elapsed()),
            log.matches("max_connections reached").count(),
            log.matches("accept failed").count(),
            log.lines().filter(|line| line.contains("accept failed")).take(2).collect::<Vec<_>>()
        ),
    );
}

/// Holds the database's write lock from another connection (another process, as far as
/// the server knows) until told to let go, or 4 s at most: SQLite's `BEGIN IMMEDIATE`,
/// PostgreSQL's exclusive lock on `orders` (see [`RawDb::hold_write_lock`]).
struct WriteLock {
    release: mpsc::Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl WriteLock {
    fn take(db: &std::path::Path) -> WriteLock {
        let (locked_tx, locked_rx) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let db = db.to_path_buf();
        let thread = thread::spawn(move || {
            let mut connection = RawDb::open(&db);
            connection.hold_write_lock();
            let _ = locked_tx.send(());
            let _ = release_rx.recv_timeout(Duration::from_secs(4));
            connection.batch("ROLLBACK");
        });
        locked_rx.recv_timeout(Duration::from_secs(6)).expect("the write lock taken");
        WriteLock { release, thread: Some(thread) }
    }

    fn release(mut self) {
        let _ = self.release.send(());
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the lock holder");
        }
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        let _ = self.release.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Another process holds the database's write lock: reads and the payment page go on,
/// a create answers 503 with Retry-After after the busy timeout, logged with its id.
#[test]
fn a_locked_database_slows_only_writes() {
    let server = Serve::start(Options::default());
    let lock = WriteLock::take(&server.db);
    let locked = Instant::now();
    server.assert_probe("database locked");
    let page = server.exchange(&request("GET", &format!("/pay?id={}", server.order_id), &[], "", true));
    assert_eq!(page.status, 200, "payment page while locked: {}", page.text());
    assert!(page.elapsed < PROBE_LIMIT, "payment page took {:?} while locked", page.elapsed);
    let page_took = page.elapsed;

    let refused = server.create_order();
    assert_eq!(refused.status, 503, "a create while locked: {}", refused.text());
    assert!(
        refused.elapsed < BUSY_TIMEOUT + Duration::from_secs(2),
        "the 503 took {:?} (busy timeout {BUSY_TIMEOUT:?})",
        refused.elapsed
    );
    assert_eq!(refused.json()["error_code"], "ServiceUnavailable", "{}", refused.text());
    let retry_after = refused.header("retry-after").map(str::to_string);
    assert!(retry_after.as_deref().is_some_and(|s| s.parse::<u64>().is_ok()), "Retry-After: {retry_after:?}");
    let id = refused.request_id();
    assert!(
        server.stderr_contains(&id, Duration::from_secs(2)),
        "no log line with {id}; stderr: {}",
        server.stderr_text()
    );
    server.assert_probe("database still locked");
    assert!(locked.elapsed() < Duration::from_secs(4), "the checks outlasted the lock");
    lock.release();

    let created = server.create_order();
    assert_eq!(created.status, 201, "a create after the lock: {}", created.text());
    server.assert_probe("after the lock");
    let log_line = server.stderr_text().lines().find(|line| line.contains(&id)).unwrap_or_default().to_string();
    server.finish(
        "locked database",
        &format!(
            "payment page {}; create 503 after {} (Retry-After {}), logged as {log_line:?}; create after release {}",
            millis(page_took),
            millis(refused.elapsed),
            retry_after.unwrap_or_default(),
            millis(created.elapsed)
        ),
    );
}

/// Every answer, whatever its status, carries its own `x-request-id`.
#[test]
fn every_answer_carries_a_request_id() {
    let connections = 8;
    let server = Serve::start(Options { extra_limits: "max_connections = 8\n", ..Options::default() });
    let key = server.key.clone();
    let mut seen: Vec<(u16, String)> = Vec::new();
    let mut record = |what: &str, want: u16, response: Response| {
        assert_eq!(response.status, want, "{what}: {}", response.text());
        seen.push((want, response.request_id()));
    };
    record("get order", 200, server.exchange(&server.get_order_request(&[])));
    record("get order again", 200, server.exchange(&server.get_order_request(&[])));
    let unknown = "test_0000000000000000000000000000000000000000";
    record(
        "unknown key",
        401,
        server.exchange(&request("GET", "/v1/orders?limit=1", &[("x-api-key", unknown)], "", true)),
    );
    record("unknown route", 404, server.exchange(&request("GET", "/v1/nope", &[("x-api-key", &key)], "", true)));
    record("bad body", 400, server.exchange(&request("POST", "/v1/orders", &[("x-api-key", &key)], "not json", true)));
    record(
        "huge body",
        400,
        server.exchange(&request("POST", "/v1/orders", &[("content-length", &HUGE_LENGTH.to_string())], "", false)),
    );
    let lock = WriteLock::take(&server.db);
    record("create while locked", 503, server.create_order());
    lock.release();

    // The connection cap: `connections` idle ones fill it, the next is refused. (One
    // more idle connection each time the previous connections had not quite ended.)
    let mut idle = Vec::new();
    let refused = loop {
        while idle.len() < connections {
            idle.push(Conn::open(server.addr).unwrap_or_else(|e| panic!("idle {}: {e}", idle.len())));
        }
        thread::sleep(Duration::from_millis(200));
        let response = server.exchange(&server.get_order_request(&[]));
        if response.status == 503 {
            break response;
        }
        assert!(idle.len() < connections + 5, "{} idle connections and no 503: {response:?}", idle.len());
        idle.push(Conn::open(server.addr).expect("one more idle connection"));
    };
    assert_eq!(refused.header("retry-after"), Some("1"), "{refused:?}");
    record("over max_connections", 503, refused);
    drop(idle);

    let ids: HashSet<&str> = seen.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(ids.len(), seen.len(), "request ids repeat: {seen:?}");
    // The cap frees up as the server sees the idle connections close.
    let deadline = Instant::now() + Duration::from_secs(2);
    while server.probe().map(|r| r.status).unwrap_or(0) != 200 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    server.assert_probe("after the request-id checks");

    // hyper's own refusals (malformed or oversized heads) never reach the server's code.
    let many: Vec<(String, String)> = (0..150).map(|i| (format!("x-h{i}"), "v".to_string())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let hyper_431 = server.exchange(&request("GET", "/v1/orders", &many, "", true));
    let hyper_400 = server.exchange(
        b"POST /v1/orders HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 5\r\ncontent-length: 6\r\n\
          connection: close\r\n\r\n{\"a\":1}",
    );
    server.finish(
        "request ids",
        &format!(
            "{} distinct ids on {:?}; hyper's own 431 has x-request-id: {}, hyper's own 400: {}",
            ids.len(),
            seen.iter().map(|(status, _)| *status).collect::<Vec<_>>(),
            hyper_431.header("x-request-id").is_some(),
            hyper_400.header("x-request-id").is_some()
        ),
    );
}

/// Key guessing from one address behind a local proxy: refused after the burst, without
/// locking out the proxy's other clients.
#[test]
fn failed_authentications_are_limited_per_client_address() {
    let server = Serve::start(Options::default());
    // Well formed (`test_` and 40 base62 characters), but no such key.
    let wrong = format!("test_{}", "Wr0ng".repeat(8));
    let guess = |from: &str, key: &str| {
        server.exchange(&request(
            "GET",
            "/v1/orders?limit=1",
            &[("x-api-key", key), ("x-forwarded-for", from)],
            "",
            true,
        ))
    };
    let answers: Vec<Response> = (0..25).map(|_| guess("203.0.113.7", &wrong)).collect();
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    assert!(statuses[..20].iter().all(|s| *s == 401), "the first 20 guesses: {statuses:?}");
    let first_refusal =
        statuses.iter().position(|s| *s != 401).unwrap_or_else(|| panic!("never refused: {statuses:?}"));
    for answer in &answers[first_refusal..] {
        assert_eq!(answer.status, 400, "after the burst: {statuses:?}");
        assert_eq!(answer.json()["error_code"], "API_LIMIT_EXCEEDED", "{}", answer.text());
        assert!(answer.header("retry-after").is_some_and(|s| s.parse::<u64>().is_ok()), "{answer:?}");
    }

    // The guessing address is refused even with the right key (asked at once: the
    // address earns one more try a second)...
    let guesser = guess("203.0.113.7", &server.key);
    assert_eq!(guesser.status, 400, "the guessing address with a valid key: {}", guesser.text());
    assert_eq!(guesser.json()["error_code"], "API_LIMIT_EXCEEDED", "{}", guesser.text());
    assert!(guesser.header("retry-after").is_some(), "{guesser:?}");
    // ...but another client behind the same proxy is not locked out, nor a direct client.
    let neighbour = guess("203.0.113.8", &server.key);
    assert_eq!(neighbour.status, 200, "another address behind the proxy: {}", neighbour.text());
    // A process on this host that names no forwarded client is not counted at all: its
    // failures never lock out the other local clients (the probe among them).
    for _ in 0..25 {
        let local = server.exchange(&request("GET", "/v1/orders?limit=1", &[("x-api-key", &wrong)], "", true));
        assert_eq!(local.status, 401, "a local client's failure: {}", local.text());
    }
    server.assert_probe("after the guesses");
    server.finish(
        "failed authentications",
        &format!("statuses {statuses:?}; first refusal at guess {}", first_refusal + 1),
    );
}

// ----- The head limits, exactly -----

/// `max_header_bytes` (32 KiB here) holds exactly, also for a head that arrives in one
/// piece (hyper's own check is of its read buffer, which such a head can overshoot).
#[test]
fn a_head_over_max_header_bytes_sent_at_once_gets_400_naming_the_head() {
    let server = Serve::start(Options::default());
    let mut head = request("GET", "/v1/orders?limit=1", &[("x-api-key", &server.key)], "", true);
    let padding = format!("x-pad: {}\r\n\r\n", "a".repeat(40_000));
    head.truncate(head.len() - 2);
    head.extend_from_slice(padding.as_bytes());
    assert!(head.len() > 32 * 1024);
    let response = server.exchange(&head);
    assert_eq!(response.status, 400, "a {}-byte head: {}", head.len(), response.text());
    let body = response.json();
    assert_eq!(body["error_code"], "PARAMETERS_MISSING", "{body}");
    assert_eq!(body["error"], "request head: at most 32768 bytes", "{body}");
}

/// The answers the HTTP layer writes before a request exists (a head too large to
/// buffer, too many headers, ambiguous framing) are what the README and openapi.yaml say:
/// status only, no body, no request id, and the connection closed.
#[test]
fn the_http_layers_own_refusals_are_bare_and_close_the_connection() {
    let server = Serve::start(Options::default());
    let many: Vec<(String, String)> = (0..150).map(|i| (format!("x-h{i}"), "v".to_string())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let too_many = server.exchange(&request("GET", "/v1/orders", &many, "", true));
    assert_eq!(too_many.status, 431);
    let malformed = server.exchange(
        b"POST /v1/orders HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 5\r\ncontent-length: 6\r\n\
          connection: close\r\n\r\n{\"a\":1}",
    );
    assert_eq!(malformed.status, 400);
    for response in [too_many, malformed] {
        assert_eq!(response.header("x-request-id"), None, "{response:?}");
        assert_eq!(response.header("connection"), Some("close"), "{response:?}");
        assert!(response.text().is_empty(), "{response:?}");
    }
}
