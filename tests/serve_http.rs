//! The built-in HTTP server against real sockets on 127.0.0.1 (port 0).
//!
//! Every test starts its own server over its own temporary database and ends by itself:
//! clients have timeouts and shutdowns run under a watchdog.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use coinorder::{Config, Environment, ErrorKind, NewApiKey, RateLimit, Server, ServerHandle, Service};
use serde_json::{json, Value};

#[path = "common/backend.rs"]
mod backend;

/// Upper bound for anything a healthy server does in these tests.
const TIMEOUT: Duration = Duration::from_secs(10);

struct Fixture {
    _dir: tempfile::TempDir,
    service: Arc<Service>,
    handle: Option<ServerHandle>,
    addr: SocketAddr,
    key: String,
}

impl Fixture {
    fn start(threads: usize) -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = Config::new(Environment::Sandbox);
        // The concurrency tests send far more than the default 100 requests per second.
        config.rate_limit = RateLimit::OFF;
        // A SQLite file in `dir`, or with COINORDER_TEST_POSTGRES a PostgreSQL database of its own.
        config.secret_key_path = backend::shared_key_file();
        let db = backend::db_named(dir.path(), "orders.db");
        let service = Arc::new(Service::open(db, config).expect("open service"));
        let created = service
            .create_key(NewApiKey { user_id: 42, environment: Environment::Sandbox, webhook_url: None })
            .expect("create key");
        let server = Server::bind(Arc::clone(&service), "127.0.0.1:0").expect("bind");
        let addr = server.local_addr();
        assert_eq!(addr.ip().to_string(), "127.0.0.1");
        assert_ne!(addr.port(), 0, "local_addr must report the actual port");
        let handle = server.spawn(threads);
        assert_eq!(handle.local_addr(), addr);
        Fixture { _dir: dir, service, handle: Some(handle), addr, key: created.plain_key.expose().to_string() }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Shuts the server down under a watchdog, so a hang fails the test instead.
    fn shutdown(&mut self) {
        let handle = self.handle.take().expect("server running");
        let (done_tx, done_rx) = mpsc::channel();
        thread::spawn(move || {
            handle.shutdown();
            let _ = done_tx.send(());
        });
        done_rx.recv_timeout(TIMEOUT).expect("shutdown finished in time");
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if self.handle.is_some() && !thread::panicking() {
            self.shutdown();
        }
    }
}

fn agent() -> ureq::Agent {
    let config = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(TIMEOUT)).build();
    ureq::Agent::new_with_config(config)
}

/// Status, content type and JSON body of a response.
fn parts(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, String, Value) {
    let mut response = response.expect("HTTP exchange");
    let status = response.status().as_u16();
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let text = response.body_mut().read_to_string().expect("body");
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("body is not JSON ({e}): {text:?}"));
    (status, content_type, body)
}

fn post_order(agent: &ureq::Agent, fx: &Fixture, key: Option<&str>, body: &str) -> (u16, Value) {
    let mut request = agent.post(fx.url("/v1/orders")).header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let (status, content_type, body) = parts(request.send(body));
    assert_eq!(content_type, "application/json");
    (status, body)
}

fn get(agent: &ureq::Agent, fx: &Fixture, key: Option<&str>, path: &str) -> (u16, Value) {
    let mut request = agent.get(fx.url(path));
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let (status, content_type, body) = parts(request.call());
    assert_eq!(content_type, "application/json");
    (status, body)
}

fn assert_error(status: u16, body: &Value, want_status: u16, want_code: &str) {
    assert_eq!(status, want_status, "body: {body}");
    assert_eq!(body["status"], json!(want_status), "body: {body}");
    assert_eq!(body["error_code"], json!(want_code), "body: {body}");
    let message = body["error"].as_str().unwrap_or("");
    assert!(!message.is_empty(), "error message missing: {body}");
}

/// A raw HTTP/1.1 connection, to check what clients libraries hide (keep-alive, framing).
struct RawConn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl RawConn {
    fn open(addr: SocketAddr) -> RawConn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(TIMEOUT)).expect("read timeout");
        let writer = stream.try_clone().expect("clone stream");
        RawConn { reader: BufReader::new(stream), writer }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("send");
        self.writer.flush().expect("flush");
    }

    fn request(&mut self, method: &str, path: &str, key: &str, body: &[u8]) {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: test\r\nx-api-key: {key}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        self.send(head.as_bytes());
        self.send(body);
    }

    /// Reads one response framed by its Content-Length; returns status, headers, body.
    fn response(&mut self) -> (u16, Vec<(String, String)>, Value) {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("status line");
        let status: u16 =
            line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("header line");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap_or_else(|| panic!("bad header {line:?}"));
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .expect("every response carries content-length");
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).expect("body");
        let body = serde_json::from_slice(&body).expect("JSON body");
        (status, headers, body)
    }
}

#[test]
fn create_get_and_list_orders_over_http() {
    let fx = Fixture::start(4);
    let agent = agent();
    let (status, created) = post_order(
        &agent,
        &fx,
        Some(&fx.key),
        r#"{"currency":"USD","amount":19.99,"title":"Blue mug","merchant_order_id":"cart-1"}"#,
    );
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["status"], json!(201));
    assert_eq!(created["message"], json!("Order created successfully"));
    let data = &created["data"];
    let order_id = data["order_id"].as_str().expect("order_id").to_string();
    assert_eq!(data["user_id"], json!(42));
    assert_eq!(data["merchant_order_id"], json!("cart-1"));
    assert_eq!(data["title"], json!("Blue mug"));
    assert_eq!(data["description"], Value::Null);
    assert_eq!(data["currency"], json!("USD"));
    assert_eq!(data["amount"].to_string(), "19.99", "money stays exact on the wire");
    assert_eq!(data["status"], json!("NEW"));
    let payment_url = created["payment_url"].as_str().expect("payment_url");
    assert!(payment_url.ends_with(&format!("?id={order_id}")), "{payment_url}");

    let (status, got) = get(&agent, &fx, Some(&fx.key), &format!("/v1/orders/{order_id}"));
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["status"], json!(200));
    assert_eq!(got["order"]["order_id"], json!(order_id));
    assert_eq!(got["order"]["price_amount"].to_string(), "19.99");
    assert_eq!(got["order"]["price_currency"], json!("USD"));
    assert_eq!(got["invoice"]["order_id"], json!(order_id));
    assert_eq!(got["invoice"]["currency"], json!("USDT"));

    let (status, second) = post_order(&agent, &fx, Some(&fx.key), r#"{"currency":"EUR","amount":"5"}"#);
    assert_eq!(status, 201, "{second}");
    let second_id = second["data"]["order_id"].as_str().expect("order_id").to_string();

    // The query string reaches the service: limit=1 returns one order, newest first.
    let (status, page) = get(&agent, &fx, Some(&fx.key), "/v1/orders?limit=1");
    assert_eq!(status, 200, "{page}");
    let orders = page["orders"].as_array().expect("orders array");
    assert_eq!(orders.len(), 1, "{page}");
    assert_eq!(orders[0]["order_id"], json!(second_id));
    let (status, page) = get(&agent, &fx, Some(&fx.key), "/v1/orders?limit=1&offset=1");
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["orders"][0]["order_id"], json!(order_id));
}

#[test]
fn errors_have_the_design_shape() {
    let fx = Fixture::start(2);
    let agent = agent();

    let (status, body) = get(&agent, &fx, Some(&fx.key), "/v1/nothing-here");
    assert_error(status, &body, 404, "Not Found");
    let (status, body) = get(&agent, &fx, None, "/");
    assert_error(status, &body, 404, "Not Found");
    let (status, content_type, body) = parts(agent.delete(fx.url("/v1/orders")).header("x-api-key", &fx.key).call());
    assert_eq!(content_type, "application/json");
    assert_error(status, &body, 404, "Not Found");

    let (status, body) = get(&agent, &fx, None, "/v1/orders");
    assert_error(status, &body, 400, "AUTHENTICATION_FAILED");
    let (status, body) = get(&agent, &fx, Some(""), "/v1/orders");
    assert_error(status, &body, 400, "AUTHENTICATION_FAILED");
    let unknown = format!("test_{}", "A".repeat(40));
    let (status, body) = get(&agent, &fx, Some(&unknown), "/v1/orders");
    assert_error(status, &body, 401, "Unauthorized");
    let live = fx
        .service
        .create_key(NewApiKey { user_id: 42, environment: Environment::Live, webhook_url: None })
        .expect("live key");
    let (status, body) = get(&agent, &fx, Some(live.plain_key.expose()), "/v1/orders");
    assert_error(status, &body, 401, "Unauthorized");

    let (status, body) = get(&agent, &fx, Some(&fx.key), "/v1/orders/does-not-exist");
    assert_error(status, &body, 400, "ORDER_NOT_VALID");
    assert_eq!(body["eror"], body["error"], "the spec's misspelt member is present too");

    let (status, body) = post_order(&agent, &fx, Some(&fx.key), "not json");
    assert_error(status, &body, 400, "PARAMETERS_MISSING");
    let (status, body) = get(&agent, &fx, Some(&fx.key), "/v1/orders?limit=zero");
    assert_error(status, &body, 400, "PARAMETERS_MISSING");

    // Deactivating takes effect on the next request, over the same keep-alive agent.
    let other = fx
        .service
        .create_key(NewApiKey { user_id: 7, environment: Environment::Sandbox, webhook_url: None })
        .expect("key");
    let (status, _) = get(&agent, &fx, Some(other.plain_key.expose()), "/v1/orders");
    assert_eq!(status, 200);
    fx.service.deactivate_key(&other.key.id).expect("deactivate");
    let (status, body) = get(&agent, &fx, Some(other.plain_key.expose()), "/v1/orders");
    assert_error(status, &body, 400, "AUTHENTICATION_FAILED");
    fx.service.delete_key(&other.key.id).expect("delete");
    let (status, body) = get(&agent, &fx, Some(other.plain_key.expose()), "/v1/orders");
    assert_error(status, &body, 401, "Unauthorized");
}

#[test]
fn the_openapi_document_is_served_without_a_key() {
    let fx = Fixture::start(2);
    let agent = agent();
    let document = include_str!("../openapi.yaml");
    for path in ["/openapi.yaml", "/openapi.yaml?x=1", "/openapi.yaml/"] {
        let mut response = agent.get(fx.url(path)).call().expect("HTTP exchange");
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
        assert_eq!(content_type, "application/yaml", "{path}");
        for (name, value) in [("cache-control", "no-store"), ("x-content-type-options", "nosniff")] {
            assert_eq!(response.headers().get(name).and_then(|v| v.to_str().ok()), Some(value), "{path}: {name}");
        }
        let text = response.body_mut().read_to_string().expect("body");
        assert_eq!(text, document, "{path}: the repository's openapi.yaml, byte for byte");
    }
    // It parses as the OpenAPI 3.1 document of this server: its top-level keys, and every
    // route the wire layer answers.
    let top: Vec<&str> = document.lines().filter(|l| !l.starts_with([' ', '#', '-']) && !l.is_empty()).collect();
    assert_eq!(top, ["openapi: 3.1.0", "info:", "servers:", "security:", "tags:", "paths:", "components:"]);
    let routes = [
        "/v1/orders",
        "/v1/orders/{order_id}",
        "/v1/orders/{order_id}/simulate",
        "/pay",
        "/pay/status",
        "/pay/cancel",
        "/pay/simulate",
        "/openapi.yaml",
    ];
    for route in routes {
        assert!(document.lines().any(|l| l == format!("  {route}:")), "{route} is documented");
    }
    // Only GET: anything else there is the wire layer's 404, as for any unknown route.
    let (status, content_type, body) = parts(agent.post(fx.url("/openapi.yaml")).send(""));
    assert_eq!(content_type, "application/json");
    assert_error(status, &body, 404, "Not Found");
}

#[test]
fn one_connection_serves_many_requests() {
    let fx = Fixture::start(2);
    let mut conn = RawConn::open(fx.addr);
    for i in 0..3 {
        let body = format!(r#"{{"currency":"USD","amount":{}.5}}"#, i + 1);
        conn.request("POST", "/v1/orders", &fx.key, body.as_bytes());
        let (status, headers, created) = conn.response();
        assert_eq!(status, 201, "{created}");
        assert!(headers.iter().any(|(n, v)| n == "content-type" && v == "application/json"), "{headers:?}");
        let order_id = created["data"]["order_id"].as_str().expect("order_id").to_string();
        conn.request("GET", &format!("/v1/orders/{order_id}"), &fx.key, b"");
        let (status, _, got) = conn.response();
        assert_eq!(status, 200, "{got}");
        assert_eq!(got["order"]["price_amount"].to_string(), format!("{}.5", i + 1));
    }
}

#[test]
fn a_key_with_bytes_beyond_ascii_is_a_malformed_key_not_a_missing_one() {
    let fx = Fixture::start(2);
    let mut conn = RawConn::open(fx.addr);
    for key in [format!("{}\u{e9}", fx.key).into_bytes(), b"test_\xe9".to_vec()] {
        let mut head = b"GET /v1/orders HTTP/1.1\r\nHost: test\r\nx-api-key: ".to_vec();
        head.extend_from_slice(&key);
        head.extend_from_slice(b"\r\n\r\n");
        conn.send(&head);
        let (status, _, body) = conn.response();
        assert_eq!((status, &body["error_code"]), (401, &json!("Unauthorized")), "{body}");
    }
}

#[test]
fn oversized_body_is_rejected_and_the_connection_stays_usable() {
    let fx = Fixture::start(2);
    let mut conn = RawConn::open(fx.addr);
    // A valid JSON object padded past 64 KiB: too big however well-formed.
    let padding = "x".repeat(64 * 1024);
    let body = format!(r#"{{"currency":"USD","amount":1,"description":"{padding}"}}"#);
    conn.request("POST", "/v1/orders", &fx.key, body.as_bytes());
    let (status, _, error) = conn.response();
    assert_error(status, &error, 400, "PARAMETERS_MISSING");

    // The unread rest of that body was drained: the next request on the connection works.
    conn.request("POST", "/v1/orders", &fx.key, br#"{"currency":"USD","amount":1}"#);
    let (status, _, created) = conn.response();
    assert_eq!(status, 201, "{created}");
}

#[test]
fn a_body_cut_short_is_a_400() {
    let fx = Fixture::start(2);
    let mut conn = RawConn::open(fx.addr);
    let head =
        format!("POST /v1/orders HTTP/1.1\r\nHost: test\r\nx-api-key: {}\r\ncontent-length: 5000\r\n\r\n", fx.key);
    conn.send(head.as_bytes());
    conn.send(br#"{"currency":"USD","#);
    conn.writer.shutdown(std::net::Shutdown::Write).expect("half-close");
    let (status, _, error) = conn.response();
    assert_error(status, &error, 400, "PARAMETERS_MISSING");
    assert!(error["error"].as_str().unwrap_or("").starts_with("body"), "{error}");
}

#[test]
fn a_huge_declared_body_does_not_take_the_server_down() {
    let fx = Fixture::start(2);
    // A declared terabyte must neither be allocated nor read: the API's 400 for a body too
    // large at once, then the connection is closed.
    for sent in [70_000, 10] {
        let mut stream = TcpStream::connect(fx.addr).expect("connect");
        // The server may leave the bytes unread: never block on a full socket buffer.
        stream.set_write_timeout(Some(Duration::from_secs(2))).expect("write timeout");
        let head = format!(
            "POST /v1/orders HTTP/1.1\r\nHost: test\r\nx-api-key: {}\r\ncontent-length: 1000000000000\r\n\r\n",
            fx.key
        );
        stream.write_all(head.as_bytes()).expect("send head");
        let _ = stream.write_all(&vec![b' '; sent]);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        stream.set_read_timeout(Some(TIMEOUT)).expect("read timeout");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        // The server may reset a connection it closes with unread bytes; when the answer
        // arrives first, it is the 400.
        if !answer.is_empty() {
            assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
            assert!(answer.contains(r#""error":"body: at most 65536 bytes""#), "{answer}");
            assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
        }
    }
    let agent = agent();
    let (status, body) = get(&agent, &fx, Some(&fx.key), "/v1/orders");
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_stalled_request_does_not_block_the_others() {
    let fx = Fixture::start(4);
    // A request whose body stops half way (padded with JSON whitespace) must not hold up
    // the requests of other connections.
    let body = format!(r#"{{"currency":"USD","amount":3}}{}"#, " ".repeat(1500));
    let (first, rest) = body.as_bytes().split_at(100);
    let mut stalled = RawConn::open(fx.addr);
    let head = format!(
        "POST /v1/orders HTTP/1.1\r\nHost: test\r\nx-api-key: {}\r\ncontent-length: {}\r\n\r\n",
        fx.key,
        body.len()
    );
    stalled.send(head.as_bytes());
    stalled.send(first);

    // Meanwhile other clients are answered.
    let agent = agent();
    for _ in 0..5 {
        let (status, page) = get(&agent, &fx, Some(&fx.key), "/v1/orders");
        assert_eq!(status, 200, "{page}");
    }

    stalled.send(rest);
    let (status, _, created) = stalled.response();
    assert_eq!(status, 201, "{created}");
}

#[test]
fn concurrent_clients_with_keep_alive_agents() {
    const CLIENTS: usize = 8;
    const ORDERS_EACH: usize = 10;
    let fx = Arc::new(Fixture::start(8));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let fx = Arc::clone(&fx);
            thread::spawn(move || {
                let agent = agent();
                let mut ids = Vec::new();
                for n in 0..ORDERS_EACH {
                    let body = format!(r#"{{"currency":"USD","amount":"1.25","merchant_order_id":"c{client}-{n}"}}"#);
                    let (status, created) = post_order(&agent, &fx, Some(&fx.key), &body);
                    assert_eq!(status, 201, "{created}");
                    let id = created["data"]["order_id"].as_str().expect("order_id").to_string();
                    let (status, got) = get(&agent, &fx, Some(&fx.key), &format!("/v1/orders/{id}"));
                    assert_eq!(status, 200, "{got}");
                    assert_eq!(got["order"]["merchant_order_id"], json!(format!("c{client}-{n}")));
                    ids.push(id);
                }
                ids
            })
        })
        .collect();
    let mut created = HashSet::new();
    for worker in workers {
        created.extend(worker.join().expect("client thread"));
    }
    assert_eq!(created.len(), CLIENTS * ORDERS_EACH);

    // Every order is listed exactly once across the pages.
    let agent = agent();
    let mut listed = HashSet::new();
    for offset in (0..).step_by(50) {
        let (status, page) = get(&agent, &fx, Some(&fx.key), &format!("/v1/orders?limit=50&offset={offset}"));
        assert_eq!(status, 200, "{page}");
        let orders = page["orders"].as_array().expect("orders");
        if orders.is_empty() {
            break;
        }
        for order in orders {
            assert!(listed.insert(order["order_id"].as_str().expect("order_id").to_string()));
        }
    }
    assert_eq!(listed, created);
}

#[test]
fn shutdown_answers_in_flight_requests_then_refuses_connections() {
    let mut fx = Fixture::start(3);
    let agent = agent();
    let (status, _) = get(&agent, &fx, Some(&fx.key), "/v1/orders");
    assert_eq!(status, 200);
    drop(agent); // closes its idle keep-alive connection

    // A request whose body is still arriving when shutdown starts.
    let body = format!(r#"{{"currency":"USD","amount":2}}{}"#, " ".repeat(1500));
    let (first, rest) = body.as_bytes().split_at(10);
    let mut in_flight = RawConn::open(fx.addr);
    let head = format!(
        "POST /v1/orders HTTP/1.1\r\nHost: test\r\nx-api-key: {}\r\ncontent-length: {}\r\n\r\n",
        fx.key,
        body.len()
    );
    in_flight.send(head.as_bytes());
    in_flight.send(first);
    // Let a worker pick the request up before shutdown starts.
    thread::sleep(Duration::from_millis(100));

    let handle = fx.handle.take().expect("running");
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        handle.shutdown();
        let _ = done_tx.send(());
    });
    assert!(done_rx.recv_timeout(Duration::from_millis(200)).is_err(), "shutdown must wait for the request in flight");
    in_flight.send(rest);
    let (status, _, created) = in_flight.response();
    assert_eq!(status, 201, "{created}");
    done_rx.recv_timeout(TIMEOUT).expect("shutdown finished in time");

    let refused = TcpStream::connect_timeout(&fx.addr, Duration::from_secs(1));
    assert!(refused.is_err(), "the listening socket is closed after shutdown");
}

#[test]
fn dropping_the_handle_stops_the_server() {
    let mut fx = Fixture::start(2);
    let handle = fx.handle.take().expect("running");
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        drop(handle);
        let _ = done_tx.send(());
    });
    done_rx.recv_timeout(TIMEOUT).expect("drop finished in time");
    assert!(TcpStream::connect_timeout(&fx.addr, Duration::from_secs(1)).is_err());
}

/// `shutdown` returns only once the server has let go of the service: the host holding
/// the last reference closes the database right then, and no runtime thread drops the
/// service later (on PostgreSQL that panicked: the `postgres` crate cannot close a
/// connection on a thread that drives async tasks).
#[test]
fn shutdown_lets_go_of_the_service_before_it_returns() {
    for round in 0..20 {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = Config::new(Environment::Sandbox);
        config.secret_key_path = backend::shared_key_file();
        let service = Arc::new(Service::open(backend::db_named(dir.path(), "orders.db"), config).expect("open"));
        let key = service
            .create_key(NewApiKey { user_id: 42, environment: Environment::Sandbox, webhook_url: None })
            .expect("create key");
        let server = Server::bind(Arc::clone(&service), "127.0.0.1:0").expect("bind");
        let addr = server.local_addr();
        let weak = Arc::downgrade(&service);
        drop(service);
        let handle = server.spawn(2);
        // Keep-alive connections still open when shutdown starts, each with a task that
        // holds the service: with 32 of them, a task letting go of its connection slot
        // before its reference showed up within 20 rounds.
        let mut connections: Vec<RawConn> = (0..32).map(|_| RawConn::open(addr)).collect();
        for connection in &mut connections {
            let request =
                format!("GET /v1/orders HTTP/1.1\r\nHost: test\r\nx-api-key: {}\r\n\r\n", key.plain_key.expose());
            connection.send(request.as_bytes());
            let (status, _, body) = connection.response();
            assert_eq!(status, 200, "{body}");
        }
        let (done_tx, done_rx) = mpsc::channel();
        thread::spawn(move || {
            handle.shutdown();
            let _ = done_tx.send(());
        });
        done_rx.recv_timeout(TIMEOUT).expect("shutdown finished in time");
        assert!(weak.upgrade().is_none(), "round {round}: the service outlived shutdown");
    }
}

/// A host may drop its service anywhere, a tokio task included; on PostgreSQL the last
/// write and the closing of the connections then run on threads of their own (the
/// `postgres` crate panics when it blocks on a runtime thread).
#[test]
fn a_service_dropped_inside_an_async_task_closes_quietly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = backend::db_named(dir.path(), "orders.db");
    let open = || {
        let mut config = Config::new(Environment::Sandbox);
        config.secret_key_path = backend::shared_key_file();
        Service::open(db.clone(), config).expect("open")
    };
    let service = open();
    let created = service
        .create_key(NewApiKey { user_id: 7, environment: Environment::Sandbox, webhook_url: None })
        .expect("key");
    // A use of the key the service cannot write now (its table is locked), so dropping
    // the service has a write to do.
    let mut holder = backend::RawDb::open(&db);
    match backend::on_postgres() {
        true => holder.batch("BEGIN; LOCK TABLE api_keys IN EXCLUSIVE MODE"),
        false => holder.hold_write_lock(),
    }
    service.authenticate(Some(created.plain_key.expose())).expect("authenticate");
    holder.batch("ROLLBACK");
    assert_eq!(service.list_keys().expect("keys")[0].last_used_at_ms, None, "the use was kept, not written");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().expect("runtime");
    let dropped = runtime.block_on(async move { tokio::spawn(async move { drop(service) }).await });
    assert!(dropped.is_ok(), "dropping the service inside a task panicked: {dropped:?}");
    drop(runtime);
    // Nothing was left half-closed: the database opens again, with the kept use written.
    let keys = open().list_keys().expect("list keys");
    assert_eq!(keys.len(), 1);
    assert!(keys[0].last_used_at_ms.is_some(), "dropping the service wrote the kept use");
}

#[test]
fn bind_errors_are_config_errors() {
    let fx = Fixture::start(1);
    let taken = fx.addr.to_string();
    let error = Server::bind(Arc::clone(&fx.service), &taken).expect_err("address in use");
    assert!(matches!(error.kind(), ErrorKind::Config(_)), "{error:?}");
    assert!(error.to_string().contains(&taken), "{error}");

    let error = Server::bind(Arc::clone(&fx.service), "not an address").expect_err("bad address");
    assert!(matches!(error.kind(), ErrorKind::Config(_)), "{error:?}");
    assert!(error.to_string().contains("not an address"), "{error}");
}

#[test]
fn a_stalled_client_cannot_hold_shutdown_hostage() {
    let mut fx = Fixture::start(2);
    let body = format!(r#"{{"currency":"USD","amount":4}}{}"#, " ".repeat(1500));
    let (first, rest) = body.as_bytes().split_at(10);
    let mut stalled = RawConn::open(fx.addr);
    let head = format!(
        "POST /v1/orders HTTP/1.1\r\nHost: test\r\nx-api-key: {}\r\ncontent-length: {}\r\n\r\n",
        fx.key,
        body.len()
    );
    stalled.send(head.as_bytes());
    stalled.send(first);
    // Let the server start reading the body.
    thread::sleep(Duration::from_millis(100));

    let handle = fx.handle.take().expect("running");
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        handle.shutdown_timeout(Duration::from_millis(300));
        let _ = done_tx.send(());
    });
    done_rx.recv_timeout(TIMEOUT).expect("shutdown gave up waiting after its grace period");
    assert!(
        TcpStream::connect_timeout(&fx.addr, Duration::from_secs(1)).is_err(),
        "the listening socket is closed although a worker is still busy"
    );

    // Past the grace period, the connection still reading its body was dropped.
    let _ = stalled.writer.write_all(rest);
    let mut line = String::new();
    let read = stalled.reader.read_line(&mut line);
    assert!(matches!(read, Ok(0) | Err(_)), "the stalled connection got an answer after the grace period: {line:?}");
}
