//! A tiny HTTP/1.1 webhook receiver on 127.0.0.1 for the crash test and the webhook
//! benchmark: one thread per connection, real keep-alive (many requests per connection),
//! every request recorded with its arrival time.
//!
//! In [`Mode::Accept`] it answers `200 ok` at once. In [`Mode::Fail`] it still records
//! the request, then either answers `500` or drops the connection without an answer,
//! after a short random pause, so a sender sees both HTTP and transport failures.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Largest request the receiver accepts (headers plus body).
const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// How the receiver answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `200 ok`, at once.
    Accept,
    /// `500` or a dropped connection, after up to `FAIL_PAUSE_MS`.
    Fail,
}

/// Longest pause before a failing answer.
const FAIL_PAUSE_MS: u64 = 5;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The request path.
    pub path: String,
    /// `webhook-id`, `webhook-timestamp` and `webhook-signature` (empty when absent).
    pub id: String,
    /// See `id`.
    pub timestamp: String,
    /// See `id`.
    pub signature: String,
    /// The exact body bytes.
    pub body: Vec<u8>,
    /// When the whole request had arrived.
    pub at: Instant,
    /// Which accepted connection carried it (1, 2, ...).
    pub connection: u64,
    /// Whether it was answered 200.
    pub accepted: bool,
}

#[derive(Default)]
struct Shared {
    hits: Mutex<Vec<Hit>>,
    requests: AtomicU64,
    connections: AtomicU64,
    mode: AtomicU8,
    stop: AtomicBool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running receiver; stops (and unblocks its accept loop) when dropped.
pub struct Receiver {
    port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Binds 127.0.0.1 on a free port and starts accepting in `mode`.
    pub fn start(mode: Mode) -> io::Result<Receiver> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared::default());
        shared.mode.store(mode as u8, Ordering::SeqCst);
        let accept = {
            let shared = Arc::clone(&shared);
            thread::Builder::new().name("receiver-accept".into()).spawn(move || accept_loop(&listener, &shared))?
        };
        Ok(Receiver { port, shared, accept: Some(accept) })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Changes how later requests are answered.
    pub fn set_mode(&self, mode: Mode) {
        self.shared.mode.store(mode as u8, Ordering::SeqCst);
    }

    /// Requests received so far.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// A copy of every request received so far, in arrival order.
    pub fn hits(&self) -> Vec<Hit> {
        lock(&self.shared.hits).clone()
    }

    /// Forgets the requests received so far (the counters keep counting).
    pub fn clear(&self) {
        lock(&self.shared.hits).clear();
    }

    /// Arrival time of the first copy of each `webhook-id` received so far.
    pub fn first_arrivals(&self) -> HashMap<String, Instant> {
        let mut out = HashMap::new();
        for hit in lock(&self.shared.hits).iter() {
            out.entry(hit.id.clone()).or_insert(hit.at);
        }
        out
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Unblock accept().
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let connection = shared.connections.fetch_add(1, Ordering::SeqCst) + 1;
        let shared = Arc::clone(shared);
        let _ = thread::Builder::new().name("receiver-conn".into()).spawn(move || {
            let _ = serve_connection(stream, &shared, connection);
        });
    }
}

/// A parsed request head.
struct Head {
    path: String,
    headers: Vec<(String, String)>,
    content_length: usize,
    close: bool,
}

fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next()?;
    let mut parts = request_line.split(' ');
    let _method = parts.next()?;
    let path = parts.next()?.to_string();
    let version = parts.next().unwrap_or("HTTP/1.1");
    let mut headers = Vec::new();
    let mut content_length = 0;
    let mut close = version == "HTTP/1.0";
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':')?;
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim().to_string();
        match name.as_str() {
            "content-length" => content_length = value.parse().ok()?,
            "connection" => close = value.eq_ignore_ascii_case("close"),
            "transfer-encoding" => return None, // not needed: senders here give a length
            _ => {}
        }
        headers.push((name, value));
    }
    Some(Head { path, headers, content_length, close })
}

fn header(head: &Head, name: &str) -> String {
    head.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap_or_default()
}

fn find_head_end(buffer: &[u8]) -> Option<usize> {
    buffer.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn serve_connection(mut stream: TcpStream, shared: &Shared, connection: u64) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    let mut buffer: Vec<u8> = Vec::with_capacity(8 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        // One whole request: head, then content-length bytes of body.
        let request = loop {
            if let Some(end) = find_head_end(&buffer) {
                let Some(head) = parse_head(&buffer[..end]) else {
                    stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")?;
                    return Ok(());
                };
                if buffer.len() >= end + head.content_length {
                    let body = buffer[end..end + head.content_length].to_vec();
                    buffer.drain(..end + head.content_length);
                    break (head, body);
                }
            }
            if buffer.len() > MAX_REQUEST_BYTES {
                return Ok(());
            }
            match stream.read(&mut chunk) {
                Ok(0) => return Ok(()),
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    if shared.stop.load(Ordering::SeqCst) {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e),
            }
        };
        let (head, body) = request;
        let at = Instant::now();
        let accept = shared.mode.load(Ordering::SeqCst) == Mode::Accept as u8;
        shared.requests.fetch_add(1, Ordering::SeqCst);
        lock(&shared.hits).push(Hit {
            path: head.path.clone(),
            id: header(&head, "webhook-id"),
            timestamp: header(&head, "webhook-timestamp"),
            signature: header(&head, "webhook-signature"),
            body,
            at,
            connection,
            accepted: accept,
        });
        if accept {
            let close = head.close || shared.stop.load(Ordering::SeqCst);
            let connection_header = if close { "connection: close\r\n" } else { "" };
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n{connection_header}\r\nok"
            );
            stream.write_all(response.as_bytes())?;
            if close {
                return Ok(());
            }
        } else {
            thread::sleep(Duration::from_millis(rand::random_range(0..=FAIL_PAUSE_MS)));
            if rand::random_bool(0.5) {
                let _ = stream.shutdown(Shutdown::Both);
                return Ok(());
            }
            stream.write_all(
                b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: 4\r\n\r\nnope",
            )?;
        }
    }
}
