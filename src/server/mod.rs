//! The built-in HTTP/1.1 server: [`Service::handle`] mounted on hyper.
//!
//! This is what `coinorder serve` runs. Connections are served by hyper on a small tokio
//! runtime that lives inside the server (the library and the bindings stay synchronous);
//! each request is read in full, bounded by [`ServerLimits`], and answered by the
//! service's wire layer on a bounded pool of blocking threads. Reads (`GET`) and writes
//! have threads of their own, so reads and the payment page keep being answered while
//! writes wait for a database that another process has locked. A read is answered in
//! place on a runtime thread when one is free (SQLite readers never wait for a lock). `GET /openapi.yaml`
//! answers with the OpenAPI 3.1 document of all of it (no key needed).
//!
//! Every answer carries an `x-request-id` header; every 5xx answer, caught panic, refused
//! overload and accept failure is logged on stderr with that id.

mod io;
mod limits;

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{watch, Semaphore};

use crate::config::{Clock, SystemClock};
use crate::error::{Error, ErrorCode, ErrorKind, Result};
use crate::service::Service;
use crate::time::Timestamp;
use crate::wire::{WireRequest, WireResponse, MAX_BODY_BYTES};

pub use limits::ServerLimits;

/// An HTTP/1.1 server bound to an address, not yet answering.
///
/// Connections that arrive between [`Server::bind`] and [`Server::spawn`] wait in the
/// listen queue and are answered once the server runs.
///
/// ```no_run
/// use std::sync::Arc;
/// use coinorder::{Config, Environment, Server, ServerLimits, Service};
///
/// # fn main() -> coinorder::Result<()> {
/// let service = Arc::new(Service::open("coinorder.db", Config::new(Environment::Sandbox))?);
/// let server = Server::bind(service, "127.0.0.1:0")?.with_limits(ServerLimits::default());
/// let handle = server.spawn(8);
/// println!("listening on http://{}", handle.local_addr());
/// // ... later:
/// handle.shutdown();
/// # Ok(()) }
/// ```
pub struct Server {
    listener: TcpListener,
    service: Arc<Service>,
    addr: SocketAddr,
    limits: ServerLimits,
    request_log: RequestLog,
}

/// Whether and how a [`Server`] logs each request it answers, one line on stderr: time,
/// request id, method, path (never the query, which may carry ids), status, latency and
/// the API key's hint (`test_…AbCd`; never the key). Answers of 500 and above are logged
/// with their cause in every mode, `Off` included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestLog {
    /// Only failures (5xx).
    #[default]
    Off,
    /// `coinorder: <time> <request id> GET /v1/orders -> 200 in 0.4 ms key=test_…AbCd`.
    Text,
    /// One JSON object per line: `{"time", "kind": "request", "request_id", "method",
    /// "path", "status", "latency_ms", "key"}` (and `"detail"` on a 5xx).
    Json,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl Server {
    /// Binds to `addr` (`"127.0.0.1:8080"`; port 0 picks a free port, see
    /// [`Server::local_addr`]), with the default [`ServerLimits`].
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

    /// Serves on an already bound TCP listener.
    ///
    /// Useful when the address must be known before the [`Service`] is opened, for
    /// example to point `payment_page_url` at the server itself when binding port 0.
    pub fn from_listener(service: Arc<Service>, listener: TcpListener) -> Result<Server> {
        let addr =
            listener.local_addr().map_err(|e| config_error(format!("cannot read the listening address: {e}")))?;
        listener.set_nonblocking(true).map_err(|e| config_error(format!("cannot serve on {addr}: {e}")))?;
        // Listening again on a listening socket only changes its backlog.
        let _ = socket2::SockRef::from(&listener).listen(LISTEN_BACKLOG);
        Ok(Server { listener, service, addr, limits: ServerLimits::default(), request_log: RequestLog::Off })
    }

    /// Replaces the default [`ServerLimits`].
    pub fn with_limits(mut self, limits: ServerLimits) -> Server {
        self.limits = limits;
        self
    }

    /// Logs every request as `log` says (default [`RequestLog::Off`]).
    pub fn with_request_log(mut self, log: RequestLog) -> Server {
        self.request_log = log;
        self
    }

    /// The limits this server will enforce.
    pub fn limits(&self) -> &ServerLimits {
        &self.limits
    }

    /// The address the server listens on, with the actual port when bound to port 0.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts answering: `threads` threads (at least one) answer reads, and
    /// [`ServerLimits::write_threads`] more answer writes, until
    /// [`ServerHandle::shutdown`] is called or the handle is dropped.
    pub fn spawn(self, threads: usize) -> ServerHandle {
        let (stop_tx, stop_rx) = watch::channel(None);
        let addr = self.addr;
        let thread = std::thread::Builder::new()
            .name("coinorder-http".to_string())
            .spawn(move || run(self, threads.max(1), stop_rx))
            .map_err(|e| log_line("-", &format!("cannot start the HTTP server thread: {e}")))
            .ok();
        ServerHandle { addr, stop: stop_tx, thread }
    }
}

/// A running [`Server`]. Dropping it shuts the server down like [`ServerHandle::shutdown`].
pub struct ServerHandle {
    addr: SocketAddr,
    /// `Some(grace)` once shutdown is asked for.
    stop: watch::Sender<Option<Duration>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the server: the listening socket is closed at once (new connections are
    /// refused), requests already being read or answered are finished and idle
    /// keep-alive connections are closed, waiting at most
    /// [`ServerLimits::shutdown_grace`]. Connections still busy after that are dropped.
    ///
    /// Once it returns, the server holds the service no more unless a request outlived
    /// the grace: a host holding the last other reference closes the database by dropping it.
    pub fn shutdown(mut self) {
        self.stop_and_join(None);
    }

    /// Like [`ServerHandle::shutdown`], waiting at most `grace` for requests in flight.
    pub fn shutdown_timeout(mut self, grace: Duration) {
        self.stop_and_join(Some(grace));
    }

    fn stop_and_join(&mut self, grace: Option<Duration>) {
        let Some(thread) = self.thread.take() else { return };
        // `Duration::MAX` stands for "the configured grace", which only the server knows.
        let _ = self.stop.send(Some(grace.unwrap_or(Duration::MAX)));
        let _ = thread.join();
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_and_join(None);
    }
}

/// What every connection task shares.
struct Shared {
    service: Arc<Service>,
    limits: ServerLimits,
    request_log: RequestLog,
    /// One permit per request waiting for a thread or being answered.
    in_flight: Arc<Semaphore>,
    /// One permit per thread answering reads.
    read_lane: Arc<Semaphore>,
    /// One permit per thread answering writes.
    write_lane: Arc<Semaphore>,
    /// Reads answered on the runtime's own threads, one per thread: a SQLite read never
    /// waits for a lock (WAL) and takes tens of microseconds, and answering it in place
    /// saves the two thread wake-ups of a hand-off, most of a small request's cost. Reads
    /// beyond these go to the read threads, and so do all PostgreSQL reads (a network
    /// round trip must not hold a runtime thread, and the blocking client may not run
    /// inside the runtime).
    inline_reads: Semaphore,
    http: hyper::server::conn::http1::Builder,
}

/// The server thread: a tokio runtime accepting connections until shutdown, then
/// draining them.
fn run(server: Server, threads: usize, mut stop: watch::Receiver<Option<Duration>>) {
    let limits = server.limits.clone();
    let write_threads = limits.write_threads.max(1);
    let io_threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(io_threads)
        .max_blocking_threads(threads + write_threads)
        .thread_name("coinorder-http")
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            log_line("-", &format!("cannot start the HTTP runtime: {e}"));
            return;
        }
    };
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.head_buffer())
        .max_headers(limits.max_headers)
        // One buffer per answer: head and body leave in one write (no delayed-ACK stall).
        .writev(false)
        .keep_alive(true);
    let cap = limits.connection_cap();
    let inline_reads = if server.service.reads_are_local() { io_threads } else { 0 };
    let shared = Arc::new(Shared {
        service: server.service,
        in_flight: Arc::new(Semaphore::new(limits.max_in_flight.max(1))),
        read_lane: Arc::new(Semaphore::new(threads)),
        write_lane: Arc::new(Semaphore::new(write_threads)),
        inline_reads: Semaphore::new(inline_reads),
        limits,
        request_log: server.request_log,
        http,
    });
    let connections = Arc::new(Semaphore::new(cap));
    runtime.block_on(async {
        let listener = match tokio::net::TcpListener::from_std(server.listener) {
            Ok(listener) => listener,
            Err(e) => {
                log_line("-", &format!("cannot listen: {e}"));
                return;
            }
        };
        let grace = accept_until_stopped(&listener, &shared, &connections, &mut stop).await;
        drop(listener);
        let grace = if grace == Duration::MAX { shared.limits.shutdown_grace } else { grace };
        // Every connection returns its permit when it ends: all of them back = drained.
        let all = u32::try_from(cap).unwrap_or(u32::MAX);
        if tokio::time::timeout(grace, connections.acquire_many(all)).await.is_err() {
            log_line(
                "-",
                &format!(
                    "shutdown: connections still busy after {} s were closed unanswered (a request among them \
                     may still finish its write: a client retries with its merchant_order_id)",
                    grace.as_secs()
                ),
            );
        }
    });
    // Threads still answering a request (a write waiting on the database) finish it on
    // their own; nothing waits for them.
    runtime.shutdown_background();
}

/// Accepts connections until shutdown is asked for; returns the grace asked for.
async fn accept_until_stopped(
    listener: &tokio::net::TcpListener,
    shared: &Arc<Shared>,
    connections: &Arc<Semaphore>,
    stop: &mut watch::Receiver<Option<Duration>>,
) -> Duration {
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let accepted = tokio::select! {
            changed = stop.changed() => match (changed, *stop.borrow()) {
                (Ok(()), Some(grace)) => return grace,
                (Ok(()), None) => continue,
                // The handle is gone without a word: stop like a shutdown.
                (Err(_), _) => return Duration::MAX,
            },
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                backoff = ACCEPT_BACKOFF_MIN;
                let _ = stream.set_nodelay(true);
                // A client that never reads can make the kernel queue megabytes of answers
                // before a write even blocks (and the write timeout starts): keep it small.
                let _ = socket2::SockRef::from(&stream).set_send_buffer_size(SEND_BUFFER_BYTES);
                match Arc::clone(connections).try_acquire_owned() {
                    Ok(permit) => {
                        let shared = Arc::clone(shared);
                        let stop = stop.clone();
                        tokio::spawn(async move {
                            serve_connection(shared, stream, peer, stop).await;
                            // The slot goes back only once this task's reference to the
                            // service is gone: shutdown waits for every slot, so the
                            // service is dropped by the server thread when `shutdown`
                            // returns, not by a runtime thread some time after it.
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        tokio::spawn(refuse_connection(stream));
                    }
                }
            }
            // The client gave up before we took the connection: nothing to do.
            Err(e)
                if matches!(e.kind(), std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset) => {}
            Err(e) => {
                // Out of file descriptors (EMFILE/ENFILE) or memory: the listener stays,
                // and accepting resumes after a pause that grows while the error lasts.
                log_line("-", &format!("accept failed: {e}; retrying in {} ms", backoff.as_millis()));
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => {}
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
            }
        }
    }
}

/// The kernel's send buffer per connection (Linux doubles it): several answers of the
/// largest kind, a list page of 50 orders being about 17 KiB.
const SEND_BUFFER_BYTES: usize = 128 * 1024;

/// Connections the kernel queues before `accept` (std's default is 128, which makes
/// clients of a burst retry their connection after a second).
const LISTEN_BACKLOG: i32 = 1024;

/// First pause after a failed accept.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest pause after failed accepts.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Serves one connection until it closes, times out, or the server shuts down.
async fn serve_connection(
    shared: Arc<Shared>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    mut stop: watch::Receiver<Option<Duration>>,
) {
    let io = TokioIo::new(io::TimedStream::new(stream, shared.limits.write_timeout));
    let handler = Arc::clone(&shared);
    let service = hyper::service::service_fn(move |request| {
        let shared = Arc::clone(&handler);
        async move { Ok::<_, Infallible>(answer(&shared, peer.ip(), request).await) }
    });
    let connection = shared.http.serve_connection(io, service);
    tokio::pin!(connection);
    let stopping = async {
        let _ = stop.wait_for(Option::is_some).await;
    };
    tokio::select! {
        // Errors are the clients' (a reset, a timeout, a malformed request hyper answered
        // with 400 or 431 itself): nothing the operator must act on.
        _ = connection.as_mut() => return,
        () = stopping => connection.as_mut().graceful_shutdown(),
    }
    // Finishes the request in progress; the server thread bounds the wait.
    let _ = connection.await;
}

/// Answers a connection over [`ServerLimits::max_connections`] with a 503 and closes it.
async fn refuse_connection(mut stream: tokio::net::TcpStream) {
    let request_id = request_id();
    log_line(&request_id, "503: connection refused, max_connections reached");
    let body = refusal_body(503, ErrorCode::ServiceUnavailable.as_str(), "Too many connections; retry later");
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncache-control: no-store\r\n\
         x-content-type-options: nosniff\r\nretry-after: 1\r\nx-request-id: {request_id}\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let exchange = async {
        // Take what the client sent first, so closing does not reset the connection and
        // destroy the answer before the client reads it.
        let mut scratch = [0u8; 4096];
        let _ = tokio::time::timeout(Duration::from_millis(50), stream.read(&mut scratch)).await;
        let mut answer = head.into_bytes();
        answer.extend_from_slice(body.as_bytes());
        let _ = stream.write_all(&answer).await;
        let _ = stream.shutdown().await;
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), exchange).await;
}

/// Answers one request: the checks of [`ServerLimits`], then the wire layer on a thread.
async fn answer(shared: &Shared, client: IpAddr, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let request_id = request_id();
    let started = Instant::now();
    let method = request.method().as_str().to_string();
    // A client may paste its key into the path: the log shows the key's hint there too.
    let path = crate::keys::hide_keys_in(request.uri().path()).into_owned();
    let key = (shared.request_log != RequestLog::Off).then(|| key_shown(&request));
    let outcome = answer_inner(shared, client, request).await;
    let (response, close) = match outcome {
        Answer::Done(response) => (response, false),
        Answer::Close(response) => (response, true),
    };
    let status = response.status;
    let detail = response.internal_detail.as_deref().filter(|_| status >= 500);
    let millis = started.elapsed().as_secs_f64() * 1000.0;
    match shared.request_log {
        RequestLog::Off if status >= 500 => {
            log_line(&request_id, &format!("{method} {path} -> {status} in {millis:.0} ms {}", detail.unwrap_or("")))
        }
        RequestLog::Off => {}
        RequestLog::Text => {
            let key = key.unwrap_or_default();
            let detail = detail.map_or(String::new(), |d| format!(" {d}"));
            log_line(&request_id, &format!("{method} {path} -> {status} in {millis:.1} ms key={key}{detail}"))
        }
        RequestLog::Json => {
            let line = serde_json::json!({
                "time": Timestamp(SystemClock.now_ms()).to_iso(),
                "kind": "request",
                "request_id": request_id,
                "method": method,
                "path": path,
                "status": status,
                "latency_ms": (millis * 1000.0).round() / 1000.0,
                "key": key,
                "detail": detail,
            });
            write_log_line(&mut std::io::stderr().lock(), line.to_string());
        }
    }
    to_hyper(response, &request_id, close)
}

/// The request's API key as logs may show it: its hint (`test_…AbCd`) when it is well
/// formed, else `malformed`, or `-` without one. Never the key.
fn key_shown(request: &Request<Incoming>) -> String {
    match request.headers().get("x-api-key").map(|value| value.to_str()) {
        None => "-".to_string(),
        Some(Ok(key)) if crate::keys::key_environment(key.trim_ascii()).is_some() => {
            crate::keys::key_hint(key.trim_ascii())
        }
        Some(_) => "malformed".to_string(),
    }
}

/// What to answer, and whether the connection must close afterwards (the request was
/// not read to its end, so the next bytes are not a request).
enum Answer {
    Done(WireResponse),
    Close(WireResponse),
}

async fn answer_inner(shared: &Shared, client: IpAddr, request: Request<Incoming>) -> Answer {
    let limits = &shared.limits;
    let target_len = request.uri().path_and_query().map_or(0, |target| target.as_str().len());
    // The server's own limits answer as the API's other failures do (DESIGN §5: 400 but
    // for 401, 404 and 500), and close the connection, whose next bytes are unread.
    if target_len > limits.max_request_target_bytes {
        let rule = format!("at most {} bytes", limits.max_request_target_bytes);
        return Answer::Close(WireResponse::from_error(&Error::invalid("request target", rule)));
    }
    // hyper bounds the head by its read buffer, which a head arriving in one piece can
    // overshoot; the limit is the head's own size, counted as sent.
    if head_bytes(&request) > limits.max_header_bytes {
        let rule = format!("at most {} bytes", limits.max_header_bytes);
        return Answer::Close(WireResponse::from_error(&Error::invalid("request head", rule)));
    }
    let declared = request.headers().get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
    if declared.and_then(|v| v.trim().parse::<u64>().ok()).is_some_and(|n| n > limits.max_body_bytes as u64) {
        return Answer::Close(too_large());
    }
    let (parts, body) = request.into_parts();
    let body = match read_body(limits, body).await {
        Ok(body) => body,
        Err(refused) => return Answer::Close(refused),
    };
    // A value with bytes beyond visible ASCII is passed on, not dropped: an `x-api-key`
    // such as `test_é` is a malformed key (401), not a missing one.
    let headers = parts
        .headers
        .iter()
        .map(|(name, value)| (name.as_str().to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect();
    let wire = WireRequest {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path_and_query().map_or("/", |target| target.as_str()).to_string(),
        headers,
        body,
        client: Some(client),
    };
    if is_openapi_request(&wire) {
        return Answer::Done(openapi_response());
    }
    let Ok(_in_flight) = Arc::clone(&shared.in_flight).try_acquire_owned() else {
        return Answer::Done(busy("Too many requests in flight; retry later"));
    };
    let reads = matches!(parts.method, hyper::Method::GET | hyper::Method::HEAD);
    if reads {
        if let Ok(_inline) = shared.inline_reads.try_acquire() {
            let service = &shared.service;
            return Answer::Done(match std::panic::catch_unwind(AssertUnwindSafe(|| service.handle(&wire))) {
                Ok(response) => response,
                Err(payload) => panicked(panic_text(payload)),
            });
        }
    }
    let lane = if reads { &shared.read_lane } else { &shared.write_lane };
    let free = Arc::clone(lane).try_acquire_owned().ok();
    let waited = match free {
        Some(permit) => Ok(Ok(permit)),
        None => tokio::time::timeout(limits.queue_timeout, Arc::clone(lane).acquire_owned()).await,
    };
    let thread = match waited {
        Ok(Ok(permit)) => permit,
        _ => {
            let what = if reads { "read" } else { "write" };
            let mut response = busy(&format!("No {what} thread free; retry later"));
            response.internal_detail =
                Some(format!("waited {} s for a {what} thread (queue_timeout)", limits.queue_timeout.as_secs()));
            return Answer::Done(response);
        }
    };
    let service = Arc::clone(&shared.service);
    let handled = tokio::task::spawn_blocking(move || {
        let _thread = thread;
        service.handle(&wire)
    })
    .await;
    match handled {
        Ok(response) => Answer::Done(response),
        Err(join) => {
            let cause = if join.is_panic() { panic_text(join.into_panic()) } else { "cancelled".to_string() };
            Answer::Done(panicked(cause))
        }
    }
}

/// The 500 for a request whose handling panicked; the cause goes to the log only.
fn panicked(cause: String) -> WireResponse {
    let mut response = WireResponse::from_error(&Error::new(ErrorKind::Internal(cause.clone())));
    response.internal_detail = Some(format!("panic: {cause}"));
    response
}

/// The size of a request's head as sent: request line, header lines, blank line.
fn head_bytes(request: &Request<Incoming>) -> usize {
    let target = request.uri().path_and_query().map_or(1, |target| target.as_str().len());
    let line = request.method().as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    let headers: usize = request.headers().iter().map(|(name, value)| name.as_str().len() + 2 + value.len() + 2).sum();
    line + headers + 2
}

/// Reads the body, keeping at most what the wire layer needs to see that it is too large
/// (`MAX_BODY_BYTES + 1`), and refusing bodies over the cap or slower than the minimum
/// rate.
async fn read_body(limits: &ServerLimits, mut body: Incoming) -> std::result::Result<Vec<u8>, WireResponse> {
    let started = tokio::time::Instant::now();
    let rate = u64::from(limits.min_body_rate.max(1));
    let mut kept = Vec::new();
    let mut received: u64 = 0;
    loop {
        // After the grace period, the body must keep up with the minimum rate: the next
        // bytes are due by the time the ones received so far would have taken.
        let due = started + limits.body_grace + Duration::from_millis(received.saturating_mul(1000) / rate);
        let frame = match tokio::time::timeout_at(due, body.frame()).await {
            Err(_) => {
                let rule = format!("arrived slower than {} bytes per second", limits.min_body_rate);
                return Err(WireResponse::from_error(&Error::invalid("body", rule)));
            }
            Ok(None) => return Ok(kept),
            Ok(Some(Err(_))) => {
                return Err(WireResponse::from_error(&Error::invalid("body", "ended before its Content-Length")))
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else { continue };
        received += data.len() as u64;
        if received > limits.max_body_bytes as u64 {
            return Err(too_large());
        }
        let room = (MAX_BODY_BYTES + 1).saturating_sub(kept.len());
        kept.extend_from_slice(&data[..data.len().min(room)]);
    }
}

/// A body over the bytes the server reads at all: the API's own rule for a body too
/// large, answered before the rest of it is read.
fn too_large() -> WireResponse {
    WireResponse::from_error(&crate::wire::body_too_large())
}

/// A 503 `ServiceUnavailable` with `Retry-After`.
fn busy(message: &str) -> WireResponse {
    let mut response = refusal(503, ErrorCode::ServiceUnavailable.as_str(), message);
    response.headers.push(("retry-after".to_string(), "1".to_string()));
    response
}

/// A refusal by the server itself (before the API sees the request), in the error shape
/// of DESIGN §5. The codes are the HTTP reason phrases, as for `InternalServerError`.
fn refusal(status: u16, code: &str, message: &str) -> WireResponse {
    WireResponse::json_body(status, refusal_body(status, code, message))
}

fn refusal_body(status: u16, code: &str, message: &str) -> String {
    serde_json::json!({ "status": status, "error_code": code, "error": message }).to_string()
}

fn to_hyper(response: WireResponse, request_id: &str, close: bool) -> Response<Full<Bytes>> {
    let status = response.status;
    let mut builder = Response::builder().status(status);
    for (name, value) in &response.headers {
        // The length is hyper's to set from the body it sends.
        if !name.eq_ignore_ascii_case("content-length") {
            builder = builder.header(name.as_str(), value.as_str());
        }
    }
    builder = builder.header("x-request-id", request_id);
    if close {
        builder = builder.header(hyper::header::CONNECTION, "close");
    }
    builder.body(Full::new(Bytes::from(response.body))).unwrap_or_else(|e| {
        // Only a header the wire layer built wrongly gets here.
        log_line(request_id, &format!("cannot send a {status} answer: {e}"));
        let mut fallback = Response::new(Full::new(Bytes::from_static(b"")));
        *fallback.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
        fallback
    })
}

/// A fresh request id: `req_` and 16 hex digits.
fn request_id() -> String {
    format!("req_{:016x}", crate::random::random::<u64>())
}

/// One line on stderr: time, request id (`-` when there is none), message.
fn log_line(request_id: &str, message: &str) {
    write_log_line(&mut std::io::stderr().lock(), text_log_line(SystemClock.now_ms(), request_id, message));
}

/// The text of a [`log_line`] at `now_ms`, without its newline.
fn text_log_line(now_ms: i64, request_id: &str, message: &str) -> String {
    let message = message.trim_end();
    let mut line = String::with_capacity(64 + request_id.len() + message.len());
    line.push_str("coinorder: ");
    Timestamp(now_ms).push_iso(&mut line);
    line.push(' ');
    line.push_str(request_id);
    line.push(' ');
    line.push_str(message);
    line
}

/// Writes `line` and a newline to `out` (stderr) in one `write`. `eprintln!` makes one
/// per piece of its format (stderr has no buffer): five to seven per request line, which
/// cost a fifth of `serve`'s throughput on small reads, and which let lines of other
/// processes sharing the stream cut into ours.
fn write_log_line(out: &mut dyn std::io::Write, mut line: String) {
    line.push('\n');
    // A closed or full stderr must not fail the request the line is about.
    let _ = out.write_all(line.as_bytes());
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(text) => *text,
        Err(payload) => payload.downcast_ref::<&str>().map_or("(no message)", |text| text).to_string(),
    }
}

/// The OpenAPI 3.1 document of what this server answers (`openapi.yaml` at the repository
/// root), served at `GET /openapi.yaml` without an API key.
const OPENAPI_YAML: &str = include_str!("../../openapi.yaml");

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

fn config_error(message: String) -> Error {
    Error::new(ErrorKind::Config(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records each `write` call it gets.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl std::io::Write for Writes {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.push(bytes.to_vec());
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_log_line_leaves_in_one_write_with_its_newline() {
        let mut out = Writes::default();
        let line = text_log_line(1_764_043_200_123, "req_00000000000000ff", "GET /v1/orders -> 200 in 0.1 ms  \n");
        write_log_line(&mut out, line);
        assert_eq!(out.0.len(), 1, "one write per line");
        assert_eq!(
            String::from_utf8_lossy(&out.0[0]),
            "coinorder: 2025-11-25T04:00:00.123Z req_00000000000000ff GET /v1/orders -> 200 in 0.1 ms\n"
        );
    }
}
