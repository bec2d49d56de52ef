//! A loopback HTTP/1.1 server answering `GET`s from a directory of Esplora answers
//! (`tests/fixtures/esplora/<phase>/`, see its README), for integration tests of the
//! chain watcher. The crate's unit tests include this same file as
//! `coinorder::chain::esplora::fixture_server` (`#[path]`), so there is one copy.
//!
//! A request for `/a/b` is answered from `a/b.json` (200, JSON), else `a/b.txt` (200, plain
//! text), else `a/b.<status>.txt` (that status), else 404 `Transaction not found` (electrs's
//! answer for an unknown transaction). The phase directory can be switched between
//! requests to move the chain forward. Every connection is closed after one answer, and
//! dropping the [`FixtureServer`] stops its thread.
//!
//! ```ignore
//! let server = esplora_fixtures::start(esplora_fixtures::phase("phase1"));
//! let client = EsploraClient::new(&server.url(), Duration::from_secs(10))?;
//! // ... then server.set_phase(esplora_fixtures::phase("phase2"));
//! ```

#![allow(dead_code)]

use std::ffi::OsString;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// `tests/fixtures/esplora` of this crate.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures").join("esplora")
}

/// A phase directory of the fixtures, e.g. `phase("phase1")`.
pub fn phase(name: &str) -> PathBuf {
    fixtures_dir().join(name)
}

/// One request as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Method, e.g. `GET`.
    pub method: String,
    /// The request target: path and query.
    pub target: String,
    /// Header names in lowercase, with their values.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

struct Shared {
    phase: Mutex<PathBuf>,
    requests: Mutex<Vec<Request>>,
    stop: AtomicBool,
}

/// The running server; dropping it stops its thread.
pub struct FixtureServer {
    url: String,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Starts a server on `127.0.0.1:0` answering from `phase_dir`.
pub fn start(phase_dir: PathBuf) -> FixtureServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    // Non-blocking so the accept loop can notice the stop flag without a last connection.
    listener.set_nonblocking(true).expect("non-blocking listener");
    let url = format!("http://{}", listener.local_addr().expect("local address"));
    let shared = Arc::new(Shared {
        phase: Mutex::new(phase_dir),
        requests: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
    });
    let thread = thread::spawn({
        let shared = Arc::clone(&shared);
        move || serve(&listener, &shared)
    });
    FixtureServer { url, shared, thread: Some(thread) }
}

impl FixtureServer {
    /// `http://127.0.0.1:<port>`, the base URL to give the client.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Answers the next requests from `dir`.
    pub fn set_phase(&self, dir: PathBuf) {
        *lock(&self.shared.phase) = dir;
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared.requests).clone()
    }
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

// A test that panicked while holding a lock must not hide its own failure behind a
// poisoned mutex here.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn serve(listener: &TcpListener, shared: &Shared) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => answer(stream, shared),
            Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(Duration::from_millis(2)),
            Err(_) => thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn answer(mut stream: TcpStream, shared: &Shared) {
    // Accepted sockets may inherit the listener's non-blocking mode on some platforms.
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let Some(head) = read_head(&mut stream) else { return };
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or("").split(' ');
    let method = request_line.next().unwrap_or("").to_string();
    let target = request_line.next().unwrap_or("").to_string();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    lock(&shared.requests).push(Request { method: method.clone(), target: target.clone(), headers });
    let phase = lock(&shared.phase).clone();
    let (status, content_type, body) =
        if method == "GET" { resolve(&phase, &target) } else { (405, "text/plain", b"Method Not Allowed".to_vec()) };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Write);
}

/// The request line and headers (a GET has no body).
fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 * 1024 || stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    String::from_utf8(head).ok()
}

fn resolve(phase: &Path, target: &str) -> (u16, &'static str, Vec<u8>) {
    let path = target.split(['?', '#']).next().unwrap_or("");
    let relative = path.trim_start_matches('/');
    let traversal = relative.split('/').any(|segment| segment.is_empty() || segment == "." || segment == "..");
    if traversal || relative.contains('\\') {
        return not_found();
    }
    let file = phase.join(relative);
    if let Ok(body) = std::fs::read(with_suffix(&file, ".json")) {
        return (200, "application/json", body);
    }
    if let Ok(body) = std::fs::read(with_suffix(&file, ".txt")) {
        return (200, "text/plain", body);
    }
    let (Some(dir), Some(name)) = (file.parent(), file.file_name().and_then(|n| n.to_str())) else {
        return not_found();
    };
    let Ok(entries) = std::fs::read_dir(dir) else { return not_found() };
    for entry in entries.flatten() {
        let status = entry
            .file_name()
            .to_str()
            .and_then(|file| file.strip_prefix(name)?.strip_prefix('.')?.strip_suffix(".txt")?.parse::<u16>().ok());
        if let (Some(status), Ok(body)) = (status, std::fs::read(entry.path())) {
            return (status, "text/plain", body);
        }
    }
    not_found()
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

fn not_found() -> (u16, &'static str, Vec<u8>) {
    (404, "text/plain", b"Transaction not found".to_vec())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
