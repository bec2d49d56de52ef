//! A small scriptable HTTP/1.1 receiver for the webhook tests, on `127.0.0.1`.
//!
//! Built on `std::net::TcpListener` (not an HTTP server crate, which answers a dropped
//! request where we want to close the connection without a word). It records every
//! request (method, target, headers, exact body bytes, arrival order) as soon as the
//! request has been read, then answers per a programmable plan: queued [`Reply`]s first,
//! then the default reply (200 unless changed). Connections are kept alive, so the
//! service's keep-alive HTTP agent is exercised too.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long an idle kept-alive connection is held before the receiver drops it.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How the receiver answers one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Answer at once.
    Respond {
        /// HTTP status.
        status: u16,
        /// Extra response headers.
        headers: Vec<(String, String)>,
        /// Response body.
        body: Vec<u8>,
    },
    /// Wait `delay`, then answer `status` (the client has usually given up by then).
    Slow {
        /// How long to wait before answering.
        delay: Duration,
        /// The status answered afterwards.
        status: u16,
    },
    /// Close the connection without answering anything.
    Close,
    /// Answer `status` (keep-alive, no `connection: close`), then close the connection at
    /// once, as a server whose idle keep-alive timeout ran out does.
    RespondThenClose {
        /// HTTP status.
        status: u16,
    },
}

impl Reply {
    /// `status` with an empty body.
    pub fn status(status: u16) -> Reply {
        Reply::Respond { status, headers: Vec::new(), body: Vec::new() }
    }

    /// Adds a response header (only for [`Reply::Respond`]).
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Respond { headers, .. } = &mut self {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }

    /// Sets the response body (only for [`Reply::Respond`]).
    pub fn body(mut self, bytes: impl Into<Vec<u8>>) -> Reply {
        if let Reply::Respond { body, .. } = &mut self {
            *body = bytes.into();
        }
        self
    }

    /// A 301 redirect to `location`.
    pub fn redirect(location: &str) -> Reply {
        Reply::status(301).header("location", location)
    }

    /// Answers `status` after `delay`.
    pub fn slow(delay: Duration, status: u16) -> Reply {
        Reply::Slow { delay, status }
    }
}

/// One request the receiver read.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// 0, 1, 2... in arrival order across all connections.
    pub index: usize,
    /// `POST`, ...
    pub method: String,
    /// The request target, e.g. `/hook?x=1`.
    pub target: String,
    /// Headers in the order received, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The exact body bytes.
    pub body: Vec<u8>,
    /// When it had been read completely.
    pub at: Instant,
    /// When the reply started going out (or the connection was closed): stamped before
    /// the first byte is written, so the client cannot have seen it earlier. `None` until then.
    pub answered: Option<Instant>,
}

impl Recorded {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    /// The `webhook-id` header (panics when absent).
    pub fn webhook_id(&self) -> &str {
        self.header("webhook-id").unwrap_or_else(|| panic!("no webhook-id header on {self:?}"))
    }
}

#[derive(Debug)]
struct Shared {
    requests: Mutex<Vec<Recorded>>,
    arrived: Condvar,
    plan: Mutex<VecDeque<Reply>>,
    default: Mutex<Reply>,
    stop: AtomicBool,
    connections: Mutex<Vec<TcpStream>>,
    accepted: AtomicUsize,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running receiver; stopped (listener closed, open connections shut) on drop.
#[derive(Debug)]
pub struct Receiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Starts a receiver on a free port of 127.0.0.1.
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        Receiver::run(listener)
    }

    /// Starts a receiver on `port` of 127.0.0.1 (e.g. one that was down), retrying the
    /// bind for up to five seconds.
    pub fn start_on(port: u16) -> Receiver {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match TcpListener::bind(("127.0.0.1", port)) {
                Ok(listener) => return Receiver::run(listener),
                Err(e) if Instant::now() < deadline => {
                    eprintln!("rebinding 127.0.0.1:{port}: {e}; retrying");
                    thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("cannot bind 127.0.0.1:{port}: {e}"),
            }
        }
    }

    fn run(listener: TcpListener) -> Receiver {
        let addr = listener.local_addr().expect("local addr");
        listener.set_nonblocking(true).expect("nonblocking listener");
        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            arrived: Condvar::new(),
            plan: Mutex::new(VecDeque::new()),
            default: Mutex::new(Reply::status(200)),
            stop: AtomicBool::new(false),
            connections: Mutex::new(Vec::new()),
            accepted: AtomicUsize::new(0),
        });
        let accept_shared = shared.clone();
        let accept = thread::Builder::new()
            .name(format!("receiver-{}", addr.port()))
            .spawn(move || accept_loop(listener, accept_shared))
            .expect("spawn receiver");
        Receiver { addr, shared, accept: Some(accept) }
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT/hook`.
    pub fn url(&self) -> String {
        self.url_with_path("/hook")
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url_with_path(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.addr.port(), path)
    }

    /// Queues a reply; queued replies are used in order before the default one.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared.plan).push_back(reply);
    }

    /// Queues `reply` `times` times.
    pub fn push_n(&self, reply: Reply, times: usize) {
        for _ in 0..times {
            self.push(reply.clone());
        }
    }

    /// The reply used once the queue is empty (initially 200 with an empty body).
    pub fn set_default(&self, reply: Reply) {
        *lock(&self.shared.default) = reply;
    }

    /// Every request read so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// How many requests were read so far.
    pub fn count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// How many TCP connections were accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Waits up to `timeout` until at least `n` requests were read; returns them all.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Recorded> {
        let deadline = Instant::now() + timeout;
        let mut requests = lock(&self.shared.requests);
        while requests.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!("waited {timeout:?} for {n} requests, got {}: {:?}", requests.len(), *requests);
            }
            requests = self.shared.arrived.wait_timeout(requests, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        requests.clone()
    }

    /// Stops listening and shuts every open connection, so the port is down.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        for stream in lock(&self.shared.connections).drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                shared.accepted.fetch_add(1, Ordering::SeqCst);
                if stream.set_nonblocking(false).is_err() {
                    continue;
                }
                let _ = stream.set_nodelay(true);
                let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
                if let Ok(clone) = stream.try_clone() {
                    lock(&shared.connections).push(clone);
                }
                let conn_shared = shared.clone();
                let _ = thread::Builder::new().name("receiver-conn".into()).spawn(move || {
                    let _ = serve_connection(stream, &conn_shared);
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => thread::sleep(Duration::from_millis(2)),
            Err(_) => thread::sleep(Duration::from_millis(2)),
        }
    }
    // The listener is dropped here: the port refuses connections from now on.
}

/// A parsed request head.
struct Head {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
}

fn read_head(reader: &mut BufReader<TcpStream>) -> io::Result<Option<Head>> {
    let mut line = String::new();
    // Skip blank lines between requests; EOF before a request line ends the connection.
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "eof in headers"));
        }
        let header = header.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    Ok(Some(Head { method, target, headers }))
}

fn read_body(reader: &mut BufReader<TcpStream>, head: &Head) -> io::Result<Vec<u8>> {
    let header = |name: &str| head.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut body = Vec::new();
        loop {
            let mut size_line = String::new();
            reader.read_line(&mut size_line)?;
            let size_text = size_line.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if size == 0 {
                // Trailers, up to the blank line.
                loop {
                    let mut trailer = String::new();
                    if reader.read_line(&mut trailer)? == 0 || trailer.trim().is_empty() {
                        return Ok(body);
                    }
                }
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            let mut crlf = [0u8; 2];
            reader.read_exact(&mut crlf)?;
        }
    }
    let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    Ok(body)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        400 => "Bad Request",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn write_response(stream: &mut TcpStream, status: u16, headers: &[(String, String)], body: &[u8]) -> io::Result<()> {
    let mut out = format!("HTTP/1.1 {status} {}\r\ncontent-length: {}\r\n", reason(status), body.len());
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes)?;
    stream.flush()
}

fn serve_connection(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let Some(head) = read_head(&mut reader)? else { return Ok(()) };
        let body = read_body(&mut reader, &head)?;
        let (index, reply) = {
            let mut requests = lock(&shared.requests);
            let index = requests.len();
            requests.push(Recorded {
                index,
                method: head.method,
                target: head.target,
                headers: head.headers,
                body,
                at: Instant::now(),
                answered: None,
            });
            shared.arrived.notify_all();
            // Take the reply under the requests lock, so replies go in arrival order.
            let queued = lock(&shared.plan).pop_front();
            (index, queued.unwrap_or_else(|| lock(&shared.default).clone()))
        };
        let answered = |shared: &Shared| {
            if let Some(request) = lock(&shared.requests).get_mut(index) {
                request.answered = Some(Instant::now());
            }
        };
        match reply {
            Reply::Respond { status, headers, body } => {
                answered(shared);
                write_response(&mut writer, status, &headers, &body)?;
            }
            Reply::Slow { delay, status } => {
                thread::sleep(delay);
                answered(shared);
                write_response(&mut writer, status, &[], b"slow")?;
            }
            Reply::RespondThenClose { status } => {
                answered(shared);
                write_response(&mut writer, status, &[], b"")?;
                let _ = writer.shutdown(Shutdown::Both);
                return Ok(());
            }
            Reply::Close => {
                answered(shared);
                let _ = writer.shutdown(Shutdown::Both);
                return Ok(());
            }
        }
        if shared.stop.load(Ordering::SeqCst) {
            let _ = writer.shutdown(Shutdown::Both);
            return Ok(());
        }
    }
}
