//! The built-in HTTP/1.1 server: [`Service::handle`] mounted on `tiny_http`.
//!
//! This is what `coinorder serve` runs. Each request is turned into a [`WireRequest`]
//! (method, path with query, every header, the body), answered by the service's wire
//! layer, and the [`WireResponse`] is written back. Connections are kept alive between
//! requests, and a pool of worker threads answers requests concurrently. `GET
//! /openapi.yaml` answers with the OpenAPI 3.1 document of all of it (no key needed).
//!
//! The server is meant for a local or otherwise trusted network (DESIGN §10: it listens
//! on 127.0.0.1 by default). `tiny_http` has no read timeouts, so a client that opens a
//! connection and stalls holds one connection thread (and, while a body larger than
//! 1 KiB is being read, one worker) until it goes away. Put a reverse proxy in front of
//! it before exposing it to the internet.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};
use crate::service::Service;
use crate::wire::{WireRequest, WireResponse, MAX_BODY_BYTES};

/// Bodies declaring a `Content-Length` above this are never touched (see [`serve_one`]).
///
/// Far above [`MAX_BODY_BYTES`], so every real client still gets its 400 answer.
const MAX_DECLARED_BODY_BYTES: usize = 16 * 1024 * 1024;

/// How long [`ServerHandle::shutdown`] waits for the requests in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long shutdown waits for the listening socket to close.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// How often an idle worker looks up from the queue to check for shutdown.
const WORKER_POLL: Duration = Duration::from_millis(100);

/// An HTTP/1.1 server bound to an address, not yet answering.
///
/// Connections that arrive between [`Server::bind`] and [`Server::spawn`] wait in the
/// queue and are answered once the workers run.
///
/// ```no_run
/// use std::sync::Arc;
/// use coinorder::{Config, Environment, Server, Service};
///
/// # fn main() -> coinorder::Result<()> {
/// let service = Arc::new(Service::open("coinorder.db", Config::new(Environment::Sandbox))?);
/// let server = Server::bind(service, "127.0.0.1:0")?;
/// let handle = server.spawn(8);
/// println!("listening on http://{}", handle.local_addr());
/// // ... later:
/// handle.shutdown();
/// # Ok(()) }
/// ```
pub struct Server {
    http: Arc<tiny_http::Server>,
    service: Arc<Service>,
    addr: SocketAddr,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Server {
    /// Binds to `addr` (`"127.0.0.1:8080"`; port 0 picks a free port, see
    /// [`Server::local_addr`]).
    ///
    /// A failure to resolve or bind the address is an [`ErrorKind::Config`] error naming
    /// the address and the reason.
    pub fn bind(service: Arc<Service>, addr: &str) -> Result<Server> {
        let addrs: Vec<SocketAddr> =
            addr.to_socket_addrs().map_err(|e| config_error(format!("cannot listen on {addr:?}: {e}")))?.collect();
        let listener =
            TcpListener::bind(&addrs[..]).map_err(|e| config_error(format!("cannot listen on {addr:?}: {e}")))?;
        Server::from_listener(service, listener)
    }

    /// Serves on an already bound TCP listener (in blocking mode, the default).
    ///
    /// Useful when the address must be known before the [`Service`] is opened, for
    /// example to point `payment_page_url` at the server itself when binding port 0.
    pub fn from_listener(service: Arc<Service>, listener: TcpListener) -> Result<Server> {
        let addr =
            listener.local_addr().map_err(|e| config_error(format!("cannot read the listening address: {e}")))?;
        let http = tiny_http::Server::from_listener(listener, None)
            .map_err(|e| config_error(format!("cannot serve on {addr}: {e}")))?;
        Ok(Server { http: Arc::new(http), service, addr })
    }

    /// The address the server listens on, with the actual port when bound to port 0.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts `threads` worker threads (at least one) that answer requests until
    /// [`ServerHandle::shutdown`] is called or the handle is dropped.
    pub fn spawn(self, threads: usize) -> ServerHandle {
        let flags = Arc::new(Flags::default());
        let workers = (0..threads.max(1))
            .map(|_| {
                // Workers hold the server only while waiting for a request, so that once
                // shutdown drops its reference a worker still busy with a request cannot
                // keep the listening socket open.
                let http = Arc::downgrade(&self.http);
                let service = Arc::clone(&self.service);
                let flags = Arc::clone(&flags);
                std::thread::spawn(move || worker(&http, &service, &flags))
            })
            .collect();
        ServerHandle { http: Some(self.http), workers, flags, addr: self.addr }
    }
}

/// A running [`Server`]. Dropping it shuts the server down like [`ServerHandle::shutdown`].
pub struct ServerHandle {
    http: Option<Arc<tiny_http::Server>>,
    workers: Vec<JoinHandle<()>>,
    flags: Arc<Flags>,
    addr: SocketAddr,
}

/// What shutdown tells the workers.
#[derive(Debug, Default)]
struct Flags {
    /// Answer what is queued, then stop.
    stop: AtomicBool,
    /// The grace period is over: stop after the current request, touch the queue no more.
    abandoned: AtomicBool,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("addr", &self.addr)
            .field("workers", &self.workers.len())
            .finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the server: requests already received are answered, the worker threads
    /// are joined and the listening socket is closed, so new connections are refused.
    ///
    /// Waits at most 10 seconds for requests in flight (see
    /// [`ServerHandle::shutdown_timeout`]). Requests still queued when the workers have
    /// stopped get a 500 `InternalServerError` saying the request was not processed. A
    /// keep-alive connection that a client holds open stays open until the client closes
    /// it (a `tiny_http` limitation); a request sent on it after shutdown gets no answer.
    pub fn shutdown(self) {
        self.shutdown_timeout(SHUTDOWN_GRACE);
    }

    /// Like [`ServerHandle::shutdown`], waiting at most `grace` for requests in flight.
    ///
    /// A worker still busy after `grace` (say, with a client that stopped sending its
    /// body) is left to finish that one request on its own thread, then ends; the
    /// listening socket is closed either way.
    pub fn shutdown_timeout(mut self, grace: Duration) {
        self.stop_and_join(grace);
    }

    fn stop_and_join(&mut self, grace: Duration) {
        let Some(http) = self.http.take() else {
            return;
        };
        self.flags.stop.store(true, Ordering::SeqCst);
        // Each unblock wakes one waiting worker; it is queued behind the requests already
        // received, so those are answered first.
        for _ in 0..self.workers.len() {
            http.unblock();
        }
        let deadline = Instant::now() + grace;
        while self.workers.iter().any(|w| !w.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.flags.abandoned.store(true, Ordering::SeqCst);
        let markers = self.workers.len();
        for worker in self.workers.drain(..) {
            if worker.is_finished() {
                // A worker only ends by returning: request panics are caught inside it.
                let _ = worker.join();
            }
            // else detached: it ends after its current request.
        }
        // Answer what arrived too late. Unblock markers not taken by a worker (one that
        // is busy, or that stopped on a poll timeout) may still be queued, and `try_recv`
        // reports a marker like an empty queue: look past as many as were sent.
        let mut empty_seen = 0;
        while empty_seen <= markers {
            match http.try_recv() {
                Ok(Some(request)) => {
                    respond(request, internal_error("Server is shutting down; the request was not processed"))
                }
                _ => empty_seen += 1,
            }
        }
        // The last strong reference (or, within one poll, a busy worker's): tiny_http stops
        // its accept thread, which closes the socket.
        drop(http);
        wait_until_closed(self.addr);
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_and_join(SHUTDOWN_GRACE);
    }
}

/// A 500 `InternalServerError` answer in the DESIGN §5 error shape.
fn internal_error(message: &str) -> WireResponse {
    let body = serde_json::json!({
        "status": 500,
        "error_code": "InternalServerError",
        "error": message,
    });
    WireResponse::json_body(500, body.to_string())
}

fn config_error(message: String) -> Error {
    Error::new(ErrorKind::Config(message))
}

/// One worker: answers requests until told to stop.
fn worker(http: &Weak<tiny_http::Server>, service: &Service, flags: &Flags) {
    loop {
        if flags.abandoned.load(Ordering::SeqCst) {
            return;
        }
        let Some(server) = http.upgrade() else {
            return;
        };
        // `None` after an unblock (shutdown) or a poll timeout; `Err` when tiny_http's
        // accept loop failed, in which case the connections still open are served on.
        let received = server.recv_timeout(WORKER_POLL);
        drop(server);
        match received {
            Ok(Some(request)) => {
                // A panic while answering must not take the worker down with it; the
                // request (moved into the closure) is dropped during unwinding, which makes
                // tiny_http answer it with an empty 500.
                let _ = catch_unwind(AssertUnwindSafe(|| serve_one(service, request)));
            }
            Ok(None) | Err(_) if flags.stop.load(Ordering::SeqCst) => return,
            Ok(None) | Err(_) => {}
        }
    }
}

/// Answers one request.
fn serve_one(service: &Service, mut request: tiny_http::Request) {
    if request.body_length().is_some_and(|declared| declared > MAX_DECLARED_BODY_BYTES) {
        // tiny_http 0.12 drains an unread body on drop into `vec![0; remaining]`, sized by
        // the client's Content-Length: a request declaring a terabyte would abort the whole
        // process on the failed allocation, even after a 400 answer. Such a request is
        // never dropped: it is leaked with its connection (no answer, socket held until the
        // process exits), which costs what one stalled client costs anyway.
        std::mem::forget(request);
        return;
    }
    let response = match wire_request(&mut request) {
        Ok(wire) if is_openapi_request(&wire) => openapi_response(),
        Ok(wire) => match catch_unwind(AssertUnwindSafe(|| service.handle(&wire))) {
            Ok(response) => response,
            Err(_) => internal_error("Server error"),
        },
        Err(error) => WireResponse::from_error(&error),
    };
    respond(request, response);
}

/// The OpenAPI 3.1 document of what this server answers (`openapi.yaml` at the repository
/// root), served at `GET /openapi.yaml` without an API key.
const OPENAPI_YAML: &str = include_str!("../openapi.yaml");

/// Where [`OPENAPI_YAML`] is served.
const OPENAPI_PATH: &str = "/openapi.yaml";

/// `GET /openapi.yaml` (a trailing `/` and any query string are ignored, as on every route).
fn is_openapi_request(request: &WireRequest) -> bool {
    let path = request.path.split_once('?').map_or(request.path.as_str(), |(path, _)| path);
    let path = path.strip_suffix('/').unwrap_or(path);
    request.method.eq_ignore_ascii_case("GET") && path == OPENAPI_PATH
}

/// The document, with the headers every answer carries (built where all the others are).
fn openapi_response() -> WireResponse {
    WireResponse::with_content_type(200, "application/yaml", OPENAPI_YAML.as_bytes().to_vec())
}

/// Converts a tiny_http request into a [`WireRequest`], reading at most
/// `MAX_BODY_BYTES + 1` bytes of body so the wire layer sees an oversized body as such.
fn wire_request(request: &mut tiny_http::Request) -> Result<WireRequest> {
    let headers = request
        .headers()
        .iter()
        .map(|h| (h.field.as_str().as_str().to_ascii_lowercase(), h.value.as_str().to_string()))
        .collect();
    let limit = MAX_BODY_BYTES + 1;
    let declared = request.body_length();
    let mut body = Vec::with_capacity(declared.unwrap_or(0).min(limit));
    request
        .as_reader()
        .take(limit as u64)
        .read_to_end(&mut body)
        .map_err(|e| Error::invalid("body", format!("could not be read: {e}")))?;
    if declared.is_some_and(|declared| body.len() < declared.min(limit)) {
        return Err(Error::invalid("body", "ended before its Content-Length"));
    }
    Ok(WireRequest {
        method: request.method().as_str().to_string(),
        path: origin_form(request.url()).to_string(),
        headers,
        body,
    })
}

/// The path and query of a request target, also when a client sent the absolute form
/// (`http://host:port/v1/orders?limit=5`).
fn origin_form(target: &str) -> &str {
    for scheme in ["http://", "https://"] {
        if let Some(rest) = target.strip_prefix(scheme) {
            return match rest.find('/') {
                Some(start) => &rest[start..],
                None => "/",
            };
        }
    }
    target
}

/// Writes `response` back; a client that went away is not an error worth reporting.
fn respond(request: tiny_http::Request, response: WireResponse) {
    let mut out = tiny_http::Response::from_data(response.body)
        .with_status_code(response.status)
        // Always send Content-Length rather than switching to chunked for large bodies.
        .with_chunked_threshold(usize::MAX);
    for (name, value) in &response.headers {
        // The length is tiny_http's to set from the body it sends.
        if name.eq_ignore_ascii_case("content-length") {
            continue;
        }
        if let Ok(header) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            out.add_header(header);
        }
    }
    let _ = request.respond(out);
}

/// Waits (boundedly) until nothing accepts connections on `addr` any more: tiny_http
/// closes its listener from its own accept thread, moments after the server is dropped.
fn wait_until_closed(addr: SocketAddr) {
    let mut probe = addr;
    if probe.ip().is_unspecified() {
        probe.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let deadline = Instant::now() + CLOSE_WAIT;
    while Instant::now() < deadline {
        match TcpStream::connect_timeout(&probe, Duration::from_millis(100)) {
            Ok(stream) => {
                drop(stream);
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::origin_form;

    #[test]
    fn origin_form_strips_scheme_and_authority() {
        assert_eq!(origin_form("/v1/orders?limit=5"), "/v1/orders?limit=5");
        assert_eq!(origin_form("http://127.0.0.1:8080/v1/orders?x=1"), "/v1/orders?x=1");
        assert_eq!(origin_form("https://example.com"), "/");
        assert_eq!(origin_form("*"), "*");
    }
}
