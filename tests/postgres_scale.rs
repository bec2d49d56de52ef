//! Scale-out on PostgreSQL (DESIGN §11), tried as a merchant runs it: two `coinorder
//! serve` processes on one database, each with its own delivery worker, taking creates
//! and payments from eight client threads at once, and two processes starting together
//! on an empty database.
//!
//! These tests need a PostgreSQL server: `scripts/test-postgres` starts one and runs
//! them with `COINORDER_TEST_POSTGRES` set (they are `#[ignore]`d in a plain
//! `cargo test`). Every test creates a database of its own on that server.

#[path = "support/receiver.rs"]
#[allow(dead_code)]
mod receiver;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use receiver::Receiver;
use serde_json::Value;

/// Orders each client thread creates (and pays) in the scale test.
fn orders_per_thread() -> usize {
    std::env::var("COINORDER_SCALE_ORDERS").ok().and_then(|n| n.parse().ok()).unwrap_or(500)
}

fn server_url() -> String {
    std::env::var("COINORDER_TEST_POSTGRES").expect("COINORDER_TEST_POSTGRES: run through scripts/test-postgres")
}

/// A fresh database on the test server; its URL.
fn fresh_database(tag: &str) -> String {
    let server = server_url();
    let name = format!("scale_{tag}_{}_{}", std::process::id(), rand_suffix());
    let mut client = postgres::Client::connect(&server, postgres::NoTls).expect("connect to the test server");
    client.batch_execute(&format!("CREATE DATABASE {name}")).expect("create database");
    let base = server.rsplit_once('/').map_or(server.as_str(), |(base, _)| base);
    format!("{base}/{name}")
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() % 1_000_000).unwrap_or(0)
}

/// The secret key file every process of one database shares.
fn shared_key(dir: &Path) -> PathBuf {
    let path = dir.join("shared.key");
    std::fs::write(&path, "c2NhbGUtb3V0LXRlc3Qta2V5LTMyLWJ5dGVzLWxvbmc=").expect("write key file");
    // `serve` refuses a key file others may read, as it should.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
    path
}

fn coinorder(db: &str, key: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_coinorder"));
    command.env("COINORDER_DB", db).env("COINORDER_SECRET_KEY_FILE", key);
    command
}

/// A running `coinorder serve`, killed when dropped.
struct Serve {
    child: Child,
    addr: SocketAddr,
}

impl Serve {
    fn start(db: &str, key: &Path) -> Serve {
        let mut child = coinorder(db, key)
            .args(["serve", "--env", "sandbox", "--addr", "127.0.0.1:0", "--rate-limit", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("listening line");
        let stderr = child.stderr.take().expect("stderr");
        thread::spawn(move || {
            // Drained so the server never blocks on a full pipe; shown on failure.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[serve] {line}");
            }
        });
        let addr = line
            .trim()
            .strip_prefix("coinorder listening on http://")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Serve { child, addr }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One keep-alive HTTP/1.1 client connection.
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    key: String,
}

impl Client {
    fn connect(addr: SocketAddr, key: &str) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        let writer = stream.try_clone().expect("clone");
        Client { reader: BufReader::new(stream), writer, key: key.to_string() }
    }

    fn call(&mut self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: test\r\nx-api-key: {}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            self.key,
            body.len()
        );
        self.writer.write_all(request.as_bytes()).expect("send");
        let mut status_line = String::new();
        self.reader.read_line(&mut status_line).expect("status line");
        let status: u16 = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
        let mut length = 0;
        loop {
            let mut header = String::new();
            self.reader.read_line(&mut header).expect("header");
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().expect("length");
                }
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).expect("body");
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }
}

#[test]
#[ignore = "needs a PostgreSQL server: scripts/test-postgres runs it"]
fn two_processes_on_one_database_lose_nothing_and_deliver_every_event_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = fresh_database("two");
    let key_file = shared_key(dir.path());
    let receiver = Receiver::start();
    let created = coinorder(&db, &key_file)
        .args(["keys", "create", "--user-id", "1", "--env", "sandbox", "--webhook-url", &receiver.url()])
        .output()
        .expect("keys create");
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let created: Value = serde_json::from_slice(&created.stdout).expect("key json");
    let api_key = created["key"].as_str().expect("plain key").to_string();

    let servers = [Serve::start(&db, &key_file), Serve::start(&db, &key_file)];
    let per_thread = orders_per_thread();
    let barrier = Arc::new(Barrier::new(8));
    let started = Instant::now();
    let handles: Vec<_> = (0..8)
        .map(|n| {
            let addr = servers[n % 2].addr;
            let (api_key, barrier) = (api_key.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                let mut client = Client::connect(addr, &api_key);
                barrier.wait();
                let mut ids = Vec::with_capacity(per_thread);
                for i in 0..per_thread {
                    // Every third order is created twice (an identical retry, possibly on
                    // the other process) and must replay, not duplicate.
                    let body =
                        format!(r#"{{"currency":"USD","amount":"{}.25","merchant_order_id":"t{n}-{i}"}}"#, i + 1);
                    let (status, created) = client.call("POST", "/v1/orders", &body);
                    assert_eq!(status, 201, "create t{n}-{i}: {created}");
                    let order_id = created["data"]["order_id"].as_str().expect("order id").to_string();
                    if i % 3 == 0 {
                        let (status, again) = client.call("POST", "/v1/orders", &body);
                        assert_eq!((status, again["data"]["order_id"].as_str()), (201, Some(order_id.as_str())));
                    }
                    let (status, paid) =
                        client.call("POST", &format!("/v1/orders/{order_id}/simulate"), r#"{"action":"pay"}"#);
                    assert_eq!(status, 200, "pay {order_id}: {paid}");
                    assert_eq!(paid["order"]["status"], "PAID", "{paid}");
                    ids.push(order_id);
                }
                ids
            })
        })
        .collect();
    let mut all_ids = HashSet::new();
    for handle in handles {
        for id in handle.join().expect("client thread") {
            assert!(all_ids.insert(id), "an order id was handed out twice");
        }
    }
    let elapsed = started.elapsed();
    let total = 8 * per_thread;
    assert_eq!(all_ids.len(), total);
    eprintln!("{total} orders created and paid through two processes in {elapsed:?}");

    let mut check = postgres::Client::connect(&db, postgres::NoTls).expect("connect");
    let orders: i64 = check.query_one("SELECT COUNT(*) FROM orders", &[]).expect("count").get(0);
    assert_eq!(orders, i64::try_from(total).expect("count"), "no lost and no duplicated order");
    let gaps: i64 = check
        .query_one(
            "SELECT COUNT(*) FROM (SELECT order_id FROM events GROUP BY order_id
               HAVING MIN(sequence) <> 1 OR MAX(sequence) <> COUNT(*) OR COUNT(DISTINCT sequence) <> COUNT(*)) g",
            &[],
        )
        .expect("gaps")
        .get(0);
    assert_eq!(gaps, 0, "per-order event sequences are 1..n without gaps or duplicates");
    let events: i64 = check.query_one("SELECT COUNT(*) FROM events", &[]).expect("events").get(0);
    assert!(events >= i64::try_from(total).expect("count"), "every paid order has events: {events}");

    // Both processes' delivery workers share the outbox: every event arrives, once.
    let deadline = Instant::now() + Duration::from_secs(120);
    let want = usize::try_from(events).expect("events");
    while receiver.count() < want && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(200));
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    for request in receiver.requests() {
        *seen.entry(request.webhook_id().to_string()).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "events sent twice in a run without failures: {twice:?}");
    assert_eq!(seen.len(), want, "every event delivered ({} of {want})", seen.len());
    // A deliverer records the outcome just after the receiver answers.
    let mut undelivered = || -> i64 {
        check.query_one("SELECT COUNT(*) FROM events WHERE delivery_state <> 'delivered'", &[]).expect("states").get(0)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while undelivered() > 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(undelivered(), 0, "every event recorded as delivered");
}

#[test]
#[ignore = "needs a PostgreSQL server: scripts/test-postgres runs it"]
fn two_processes_starting_together_on_an_empty_database_both_come_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = fresh_database("start");
    let key_file = shared_key(dir.path());
    let barrier = Arc::new(Barrier::new(2));
    let starters: Vec<_> = (0..2)
        .map(|_| {
            let (db, key_file, barrier) = (db.clone(), key_file.clone(), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                Serve::start(&db, &key_file)
            })
        })
        .collect();
    let servers: Vec<Serve> = starters.into_iter().map(|s| s.join().expect("start")).collect();
    let mut check = postgres::Client::connect(&db, postgres::NoTls).expect("connect");
    let versions: Vec<i64> =
        check.query("SELECT version FROM coinorder_schema", &[]).expect("schema").iter().map(|r| r.get(0)).collect();
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres"))
        .expect("migrations/postgres")
        .filter(|entry| entry.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|ext| ext == "sql")))
        .count();
    assert_eq!(versions, vec![i64::try_from(migrations).expect("few")], "one schema row, migrated once");
    for server in &servers {
        let mut stream = TcpStream::connect(server.addr).expect("connect");
        stream.write_all(b"GET /openapi.yaml HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n").expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        assert!(answer.starts_with("HTTP/1.1 200 "), "{}", &answer[..answer.len().min(200)]);
    }
}

#[test]
#[ignore = "needs a PostgreSQL server: scripts/test-postgres runs it"]
fn without_the_shared_key_file_a_postgres_database_is_refused() {
    let db = fresh_database("nokey");
    let output = Command::new(env!("CARGO_BIN_EXE_coinorder"))
        .args(["--db", &db, "keys", "create", "--user-id", "1", "--env", "sandbox"])
        .env_remove("COINORDER_SECRET_KEY_FILE")
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("secret key file every host shares"), "{stderr}");
}

#[test]
#[ignore = "needs a PostgreSQL server: scripts/test-postgres runs it"]
fn a_server_that_says_no_is_a_configuration_error_and_one_out_of_reach_a_storage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = coinorder::Config::new(coinorder::Environment::Sandbox);
    config.secret_key_path = Some(shared_key(dir.path()));
    let open_error = |url: &str| match coinorder::Service::open(url, config.clone()) {
        Ok(_) => panic!("{url} opened"),
        Err(error) => error,
    };

    // The server answers and refuses: the settings are wrong, and say why.
    let server = server_url();
    let base = server.rsplit_once('/').map_or(server.as_str(), |(base, _)| base);
    let missing = open_error(&format!("{base}/no_such_database_{}", std::process::id()));
    assert!(matches!(missing.kind(), coinorder::ErrorKind::Config(_)), "{missing:?}");
    assert!(missing.to_string().contains("does not exist"), "{missing}");

    // The server answers, but for now: a database at its connection limit (53300, as a
    // full server answers) is the storage, which opening again later may cure, not settings.
    let full_db = format!("full_{}", std::process::id());
    let mut admin = postgres::Client::connect(&server, postgres::NoTls).expect("connect");
    admin.batch_execute(&format!("CREATE DATABASE {full_db} CONNECTION LIMIT 0")).expect("create database");
    let full = open_error(&format!("{base}/{full_db}"));
    match full.kind() {
        coinorder::ErrorKind::Storage(_) => {}
        other => panic!("a full server is not a configuration error: {other:?}"),
    }
    assert!(full.to_string().contains("too many connections"), "{full}");

    // Nothing answers: the storage is down, which opening again later may cure.
    let down = open_error("postgres://coinorder:hunter2@127.0.0.1:1/nowhere");
    match down.kind() {
        coinorder::ErrorKind::Storage(storage) => assert!(!storage.is_busy(), "{down:?}"),
        other => panic!("not a storage error: {other:?}"),
    }
    let text = down.to_string();
    assert!(text.starts_with("storage error: cannot connect to PostgreSQL at 127.0.0.1:1/nowhere: "), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

/// A sandbox service on `db` with `busy_timeout`, a key's merchant, and one order of it.
fn service_with_order(
    db: &str,
    dir: &Path,
    busy_timeout: Duration,
) -> (coinorder::Service, coinorder::Merchant, String) {
    let mut config = coinorder::Config::new(coinorder::Environment::Sandbox);
    config.secret_key_path = Some(shared_key(dir));
    config.busy_timeout = busy_timeout;
    config.rate_limit = coinorder::RateLimit { per_second: 0, burst: 0 };
    let svc = coinorder::Service::open(db, config).expect("open");
    let key = svc
        .create_key(coinorder::NewApiKey {
            user_id: 1,
            environment: coinorder::Environment::Sandbox,
            webhook_url: None,
        })
        .expect("key");
    let merchant = svc.authenticate(Some(key.plain_key.expose())).expect("merchant");
    let request =
        coinorder::CreateOrder { currency: "USD".into(), amount: coinorder::Decimal::TEN, ..Default::default() };
    let order_id = svc.create_order(&merchant, &request).expect("create").order.order.order_id;
    (svc, merchant, order_id)
}

#[test]
#[ignore = "needs a PostgreSQL server: scripts/test-postgres runs it"]
fn pooled_connections_the_server_ended_are_replaced_without_an_error() {
    // A restart, or pg_terminate_backend, ends every pooled connection; the service only
    // finds out by using them. The database is back: no request may fail for it.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = fresh_database("ended");
    let (svc, merchant, order_id) = service_with_order(&db, dir.path(), Duration::from_secs(10));
    // The pool opens its connections in the background: let it finish.
    thread::sleep(Duration::from_millis(500));
    let mut admin = postgres::Client::connect(&db, postgres::NoTls).expect("connect");
    let ended = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .expect("terminate");
    assert!(ended.len() >= 8, "{} connections ended", ended.len());
    let request =
        coinorder::CreateOrder { currency: "USD".into(), amount: coinorder::Decimal::ONE, ..Default::default() };
    thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                for _ in 0..5 {
                    svc.get_order(&merchant, &order_id).expect("a read after the connections ended");
                    svc.create_order(&merchant, &request).expect("a write after the connections ended");
                }
            });
        }
    });
}

#[test]
#[ignore = "needs a PostgreSQL server: scripts/test-postgres runs it"]
fn a_read_waits_for_a_table_lock_at_most_the_busy_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = fresh_database("tablelock");
    let (svc, merchant, order_id) = service_with_order(&db, dir.path(), Duration::from_secs(1));
    // An operator's session holds the table for 8 s (a migration, VACUUM FULL).
    let (locked_tx, locked) = std::sync::mpsc::channel();
    let holder = {
        let db = db.clone();
        thread::spawn(move || {
            let mut admin = postgres::Client::connect(&db, postgres::NoTls).expect("connect");
            let mut locking = admin.transaction().expect("begin");
            locking.batch_execute("LOCK TABLE orders IN ACCESS EXCLUSIVE MODE").expect("lock");
            locked_tx.send(()).expect("send");
            thread::sleep(Duration::from_secs(8));
            locking.rollback().expect("unlock");
        })
    };
    locked.recv().expect("locked");
    let started = Instant::now();
    let outcome = svc.get_order(&merchant, &order_id);
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    let error = outcome.expect_err("the table is locked");
    holder.join().expect("holder");
    match error.kind() {
        coinorder::ErrorKind::Storage(storage) => assert!(storage.is_busy(), "{error:?}"),
        other => panic!("not a busy storage error: {other:?}"),
    }
    svc.get_order(&merchant, &order_id).expect("read once the lock is gone");
}
