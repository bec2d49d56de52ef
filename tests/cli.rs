//! The `coinorder` binary, run for real in temporary directories.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_coinorder");
/// Upper bound for the server to start, answer, or stop.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The binary with a clean environment: no `COINORDER_DB` from the caller's shell.
fn coinorder(dir: &Path) -> Command {
    let mut command = Command::new(BIN);
    command.current_dir(dir).env_remove("COINORDER_DB");
    command
}

fn run(dir: &Path, args: &[&str]) -> Output {
    coinorder(dir).args(args).output().expect("run coinorder")
}

/// Runs a command that must succeed and print one JSON document.
fn run_json(dir: &Path, args: &[&str]) -> Value {
    let output = run(dir, args);
    assert!(
        output.status.success(),
        "coinorder {args:?} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout of {args:?} is not JSON ({e}): {}", String::from_utf8_lossy(&output.stdout)))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn key_lifecycle() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();

    // --db before the subcommand.
    let create = ["--db", "keys.db", "keys", "create", "--user-id", "7", "--env", "sandbox"];
    let created = run_json(dir, &[&create[..], &["--webhook-url", "https://shop.example/hook"]].concat());
    let id = created["id"].as_str().expect("id").to_string();
    let plain = created["key"].as_str().expect("plain key").to_string();
    let secret = created["webhook_secret"].as_str().expect("webhook secret").to_string();
    assert!(plain.starts_with("test_") && plain.len() == 45, "{plain}");
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert_eq!(created["user_id"], json!(7));
    assert_eq!(created["environment"], json!("sandbox"));
    assert_eq!(created["status"], json!("active"));
    assert_eq!(created["webhook_url"], json!("https://shop.example/hook"));
    assert!(created["created_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{created}");
    assert!(dir.join("keys.db").exists());

    let live = run_json(dir, &["keys", "create", "--user-id", "7", "--env", "live", "--db", "keys.db"]);
    assert!(live["key"].as_str().is_some_and(|k| k.starts_with("prod_")), "{live}");
    assert_eq!(live["webhook_url"], Value::Null);

    // --db after the subcommand; list shows both keys and never a plain key or secret.
    let output = run(dir, &["keys", "list", "--db", "keys.db"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let listed_text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(!listed_text.contains(&plain) && !listed_text.contains(&secret), "{listed_text}");
    let listed: Value = serde_json::from_str(&listed_text).expect("JSON");
    let listed = listed.as_array().expect("array");
    assert_eq!(listed.len(), 2);
    let first = listed.iter().find(|k| k["id"] == json!(id)).expect("created key listed");
    assert_eq!(first.get("key"), None);
    assert_eq!(first.get("webhook_secret"), None);
    assert_eq!(first["status"], json!("active"));

    let key = run_json(dir, &["--db", "keys.db", "keys", "deactivate", &id]);
    assert_eq!((&key["id"], &key["status"]), (&json!(id), &json!("inactive")));
    let key = run_json(dir, &["--db", "keys.db", "keys", "activate", &id]);
    assert_eq!(key["status"], json!("active"));
    let key = run_json(dir, &["--db", "keys.db", "keys", "set-webhook", &id, "https://other.example/events"]);
    assert_eq!(key["webhook_url"], json!("https://other.example/events"));
    let key = run_json(dir, &["--db", "keys.db", "keys", "clear-webhook", &id]);
    assert_eq!(key["webhook_url"], Value::Null);
    let key = run_json(dir, &["--db", "keys.db", "keys", "rotate-secret", &id]);
    let rotated = key["webhook_secret"].as_str().expect("new secret");
    assert!(rotated.starts_with("whsec_") && rotated != secret, "{key}");
    assert_eq!(key.get("key"), None, "rotation never shows the plain key");

    let deleted = run_json(dir, &["--db", "keys.db", "keys", "delete", &id]);
    assert_eq!(deleted, json!({ "deleted": id }));
    let listed = run_json(dir, &["--db", "keys.db", "keys", "list"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");

    // A deleted or unknown id is an error with a message, exit status 1.
    for args in
        [["keys", "activate", id.as_str()], ["keys", "delete", "key_nope"], ["keys", "clear-webhook", "key_nope"]]
    {
        let output = coinorder(dir).arg("--db").arg("keys.db").args(args).output().expect("run");
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let message = stderr(&output);
        assert!(message.starts_with("error: ") && message.contains("not found"), "{message}");
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn invalid_input_is_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();

    // Rejected by the library: exit 1 with the field and rule.
    let output = run(dir, &["keys", "create", "--user-id", "1", "--env", "sandbox", "--webhook-url", "not a url"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.starts_with("error: webhook_url"), "{message}");
    let output = run(dir, &["keys", "set-webhook", "key_nope", "ftp://example.com"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));

    // Malformed command lines: exit 2 from the parser.
    for args in [
        &["keys", "create", "--user-id", "1", "--env", "staging"][..],
        &["keys", "create", "--env", "sandbox"],
        &["keys", "create", "--user-id", "one", "--env", "sandbox"],
        &["serve", "--env", "sandbox", "--threads", "0"],
        &["frobnicate"],
    ] {
        let output = run(dir, args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
    }

    // A database path that cannot be created.
    let output = run(dir, &["--db", "no/such/dir/x.db", "keys", "list"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).starts_with("error: "), "{}", stderr(&output));
}

#[test]
fn database_location_defaults_and_env_var() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();

    // Default: ./coinorder.db in the working directory.
    let created = run_json(dir, &["keys", "create", "--user-id", "1", "--env", "sandbox"]);
    assert!(dir.join("coinorder.db").exists());

    // COINORDER_DB picks another file; --db wins over it.
    let output = coinorder(dir)
        .env("COINORDER_DB", dir.join("env.db"))
        .args(["keys", "create", "--user-id", "2", "--env", "live"])
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(dir.join("env.db").exists());
    let in_env_db = run_json(dir, &["keys", "list", "--db", "env.db"]);
    assert_eq!(in_env_db.as_array().map(Vec::len), Some(1));
    assert_eq!(in_env_db[0]["user_id"], json!(2));

    let output = coinorder(dir)
        .env("COINORDER_DB", dir.join("env.db"))
        .args(["keys", "list", "--db", "coinorder.db"])
        .output()
        .expect("run");
    let listed: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(listed[0]["id"], created["id"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
}

#[test]
fn help_documents_every_command() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = run(dir.path(), &["--help"]);
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout);
    for word in ["keys", "serve", "--db", "COINORDER_DB", "./coinorder.db"] {
        assert!(text.contains(word), "--help lacks {word}: {text}");
    }
    let output = run(dir.path(), &["keys", "--help"]);
    let text = String::from_utf8_lossy(&output.stdout);
    for word in ["create", "list", "activate", "deactivate", "delete", "set-webhook", "clear-webhook"] {
        assert!(text.contains(word), "keys --help lacks {word}: {text}");
    }
    let output = run(dir.path(), &["serve", "--help"]);
    let text = String::from_utf8_lossy(&output.stdout);
    for word in ["--env", "--addr", "127.0.0.1:8080", "--payment-page-url", "--rate-limit", "--rate-burst", "--threads"]
    {
        assert!(text.contains(word), "serve --help lacks {word}: {text}");
    }
    for word in ["--invoice-ttl", "1800", "every second", "EXPIRED", "FAILED"] {
        assert!(text.contains(word), "serve --help lacks {word}: {text}");
    }
    let output = run(dir.path(), &["--help"]);
    let text = String::from_utf8_lossy(&output.stdout);
    for word in ["rates", "sandbox", "orders"] {
        assert!(text.contains(word), "--help lacks {word}: {text}");
    }
    for (command, words) in [
        ("rates", &["set", "list", "delete"][..]),
        ("sandbox", &["pay", "confirm", "reject", "cancel", "expire"]),
        ("orders", &["show", "mark-paid", "cancel"]),
    ] {
        let output = run(dir.path(), &[command, "--help"]);
        assert!(output.status.success(), "{command} --help");
        let text = String::from_utf8_lossy(&output.stdout);
        for word in words {
            assert!(text.contains(word), "{command} --help lacks {word}: {text}");
        }
    }
    let output = run(dir.path(), &["sandbox", "pay", "--help"]);
    let text = String::from_utf8_lossy(&output.stdout);
    for word in ["--amount", "--unconfirmed", "txid", "still due"] {
        assert!(text.contains(word), "sandbox pay --help lacks {word}: {text}");
    }
    let output = run(dir.path(), &["rates", "set", "--help"]);
    let text = String::from_utf8_lossy(&output.stdout);
    for word in ["--env", "--valid-until", "CRYPTO", "FIAT", "RATE", "ISO 8601"] {
        assert!(text.contains(word), "rates set --help lacks {word}: {text}");
    }
}

/// A running `coinorder serve`, killed if the test fails before it stops.
struct ServeProcess {
    child: Child,
}

impl ServeProcess {
    /// Starts a sandbox server and reads its listening line; returns it with the address.
    fn start(dir: &Path, extra: &[&str]) -> (ServeProcess, String) {
        ServeProcess::start_env(dir, "sandbox", extra)
    }

    /// Starts a server for `env` and reads its listening line; returns it with the address.
    fn start_env(dir: &Path, env: &str, extra: &[&str]) -> (ServeProcess, String) {
        let mut child = coinorder(dir)
            .args(["serve", "--env", env, "--addr", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut process = ServeProcess { child };
        let (line_tx, line_rx) = mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = line_tx.send(line);
        });
        let line = match line_rx.recv_timeout(TIMEOUT) {
            Ok(line) if !line.is_empty() => line,
            _ => panic!("no listening line; stderr: {}", process.stop_with_kill()),
        };
        let addr = line
            .trim_end()
            .strip_prefix("coinorder listening on http://")
            .and_then(|rest| rest.strip_suffix(&format!(" ({env})")))
            .unwrap_or_else(|| panic!("unexpected listening line {line:?}"))
            .to_string();
        (process, addr)
    }

    /// Sends SIGTERM and waits (boundedly) for the exit status.
    fn terminate(&mut self) -> ExitStatus {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let stderr = self.stop_with_kill();
                panic!("serve did not exit within {TIMEOUT:?} of SIGTERM; stderr: {stderr}");
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process and returns what it wrote to stderr.
    fn stop_with_kill(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut text = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn agent() -> ureq::Agent {
    let config = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(TIMEOUT)).build();
    ureq::Agent::new_with_config(config)
}

fn post_order(agent: &ureq::Agent, addr: &str, key: &str, body: &str) -> (u16, Value) {
    let mut response = agent
        .post(format!("http://{addr}/v1/orders"))
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .send(body)
        .expect("HTTP exchange");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().expect("body");
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")))
}

#[test]
fn serve_answers_requests_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let created = run_json(dir, &["keys", "create", "--user-id", "5", "--env", "sandbox"]);
    let key = created["key"].as_str().expect("key");

    let (mut server, addr) = ServeProcess::start(dir, &[]);
    assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "{addr}");
    let agent = agent();
    let (status, body) = post_order(&agent, &addr, key, r#"{"currency":"NGN","amount":1500.50}"#);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["data"]["user_id"], json!(5));
    let order_id = body["data"]["order_id"].as_str().expect("order_id");
    assert_eq!(body["payment_url"], json!(format!("http://{addr}/pay?id={order_id}")));

    let status = server.terminate();
    assert_eq!(status.code(), Some(0), "serve must exit 0 on SIGTERM");

    // Stopped for good, and what it stored is there for the next run.
    assert!(std::net::TcpStream::connect(addr.as_str()).is_err());
    let listed = run_json(dir, &["keys", "list"]);
    assert!(listed[0]["last_used_at"].is_string(), "the key's use was recorded: {listed}");
}

#[test]
fn serve_options_reach_the_service() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let created = run_json(dir, &["--db", "opts.db", "keys", "create", "--user-id", "9", "--env", "sandbox"]);
    let key = created["key"].as_str().expect("key");

    let (mut server, addr) = ServeProcess::start(
        dir,
        &[
            "--db",
            "opts.db",
            "--payment-page-url",
            "https://pay.example/checkout",
            "--rate-limit",
            "1",
            "--rate-burst",
            "1",
            "--threads",
            "2",
        ],
    );
    let agent = agent();
    let (status, body) = post_order(&agent, &addr, key, r#"{"currency":"USD","amount":1}"#);
    assert_eq!(status, 201, "{body}");
    let order_id = body["data"]["order_id"].as_str().expect("order_id");
    assert_eq!(body["payment_url"], json!(format!("https://pay.example/checkout?id={order_id}")));

    // One request per second with a burst of one: of three quick requests at least one
    // is over the limit whatever the machine's speed.
    let codes: Vec<Value> = (0..3)
        .map(|_| post_order(&agent, &addr, key, r#"{"currency":"USD","amount":1}"#).1["error_code"].clone())
        .collect();
    assert!(codes.contains(&json!("API_LIMIT_EXCEEDED")), "{codes:?}");

    assert_eq!(server.terminate().code(), Some(0));
}

#[test]
fn serve_reports_an_address_in_use() {
    let dir = tempfile::tempdir().expect("temp dir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let mut child = coinorder(dir.path())
        .args(["serve", "--env", "live", "--addr", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve kept running on an address in use");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let output = child.wait_with_output().expect("output");
    assert_eq!(status.code(), Some(1));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.starts_with("error: cannot listen on ") && message.contains(&addr), "{message}");
    assert!(output.stdout.is_empty(), "no listening line on failure");
}

// ----- Rates, sandbox simulation, orders (issue 3) -----

/// The library over the same database file the CLI uses, to create orders to act on.
struct Shop {
    service: coinorder::Service,
    merchant: coinorder::Merchant,
}

impl Shop {
    /// A service for `environment` over `dir/coinorder.db` with a fresh key of user 77.
    fn open(dir: &Path, environment: coinorder::Environment) -> Shop {
        let service = coinorder::Service::open(dir.join("coinorder.db"), coinorder::Config::new(environment))
            .expect("open service");
        let created = service
            .create_key(coinorder::NewApiKey { user_id: 77, environment, webhook_url: None })
            .expect("create key");
        let merchant = service.authenticate(Some(created.plain_key.expose())).expect("authenticate");
        Shop { service, merchant }
    }

    /// Creates an order of `amount` USD paid in USDT (sandbox: 1 USDT per USD) and
    /// returns its id.
    fn order(&self, amount: &str) -> String {
        let request = coinorder::CreateOrder {
            currency: "USD".into(),
            amount: amount.parse().expect("amount"),
            pay_currency: Some("USDT".into()),
            ..Default::default()
        };
        self.service.create_order(&self.merchant, &request).expect("create order").order.order.order_id
    }
}

/// Runs a command that must fail with exit status 1; returns its stderr.
fn run_fails(dir: &Path, args: &[&str]) -> String {
    let output = run(dir, args);
    assert_eq!(output.status.code(), Some(1), "{args:?} should fail: {}", String::from_utf8_lossy(&output.stdout));
    assert!(output.stdout.is_empty(), "{args:?} printed on failure");
    let message = stderr(&output);
    assert!(message.starts_with("error: "), "{message}");
    message
}

/// The exact text of a JSON number (the CLI prints decimals digit for digit).
fn number_text(value: &Value) -> String {
    assert!(value.is_number(), "not a number: {value}");
    value.to_string()
}

#[test]
fn rates_set_list_delete_round_trip() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    assert_eq!(run_json(dir, &["rates", "list", "--env", "live"]), json!([]));

    // Many digits, set and listed exactly; codes are accepted in any case.
    let set = run_json(
        dir,
        &[
            "rates",
            "set",
            "--env",
            "live",
            "btc",
            "usd",
            "64123.123456789012345678",
            "--valid-until",
            "2031-01-02T03:04:05Z",
        ],
    );
    assert_eq!(set["environment"], json!("live"));
    assert_eq!((&set["crypto"], &set["fiat"]), (&json!("BTC"), &json!("USD")));
    assert_eq!(number_text(&set["rate"]), "64123.123456789012345678");
    assert_eq!(set["valid_until"], json!("2031-01-02T03:04:05.000Z"));
    assert!(set["updated_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{set}");
    run_json(dir, &["rates", "set", "--env", "live", "ETH", "EUR", "0.000000000000000001"]);

    let listed = run_json(dir, &["rates", "list", "--env", "live"]);
    let listed = listed.as_array().expect("array");
    assert_eq!(listed.len(), 2, "{listed:?}");
    let btc = listed.iter().find(|r| r["crypto"] == json!("BTC")).expect("BTC listed");
    assert_eq!(number_text(&btc["rate"]), "64123.123456789012345678");
    assert_eq!(btc["valid_until"], json!("2031-01-02T03:04:05.000Z"));
    let eth = listed.iter().find(|r| r["crypto"] == json!("ETH")).expect("ETH listed");
    assert_eq!(number_text(&eth["rate"]), "0.000000000000000001");
    assert_eq!(eth["valid_until"], Value::Null);
    // Environments are separate.
    assert_eq!(run_json(dir, &["rates", "list", "--env", "sandbox"]), json!([]));

    // Replacing keeps one row; a time zone offset is converted to UTC.
    let replaced = run_json(
        dir,
        &["rates", "set", "--env", "live", "BTC", "USD", "65000", "--valid-until", "2031-01-02T04:04:05+01:00"],
    );
    assert_eq!(number_text(&replaced["rate"]), "65000");
    assert_eq!(replaced["valid_until"], json!("2031-01-02T03:04:05.000Z"));
    assert_eq!(run_json(dir, &["rates", "list", "--env", "live"]).as_array().map(Vec::len), Some(2));

    let deleted = run_json(dir, &["rates", "delete", "--env", "live", "BTC", "usd"]);
    assert_eq!(deleted, json!({"deleted": {"environment": "live", "crypto": "BTC", "fiat": "USD"}}));
    let listed = run_json(dir, &["rates", "list", "--env", "live"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["crypto"], json!("ETH"));
    let message = run_fails(dir, &["rates", "delete", "--env", "live", "BTC", "USD"]);
    assert!(message.contains("BTC/USD"), "{message}");

    // Rejected by the library: exit 1 naming the field.
    for (args, field) in [
        (&["rates", "set", "--env", "live", "BTC", "USD", "0"][..], "rate"),
        (&["rates", "set", "--env", "live", "DOGE", "USD", "1"], "crypto"),
        (&["rates", "set", "--env", "live", "BTC", "XYZ", "1"], "fiat"),
    ] {
        let message = run_fails(dir, args);
        assert!(message.starts_with(&format!("error: {field}")), "{args:?}: {message}");
    }
    // Malformed command lines: exit 2, nothing stored.
    for args in [
        &["rates", "set", "--env", "live", "BTC", "USD", "1.5.5"][..],
        &["rates", "set", "--env", "live", "BTC", "USD", "abc"],
        &["rates", "set", "--env", "live", "BTC", "USD", "1", "--valid-until", "tomorrow"],
        &["rates", "set", "--env", "live", "BTC", "USD", "1", "--valid-until", "2031-01-02T03:04:05"],
        &["rates", "set", "BTC", "USD", "1"],
        &["rates", "list"],
    ] {
        let output = run(dir, args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
    }
    assert_eq!(run_json(dir, &["rates", "list", "--env", "live"]).as_array().map(Vec::len), Some(1));
}

#[test]
fn live_orders_need_a_rate_set_with_the_cli() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let created = run_json(dir, &["keys", "create", "--user-id", "3", "--env", "live"]);
    let key = created["key"].as_str().expect("key");
    let (mut server, addr) = ServeProcess::start_env(dir, "live", &[]);
    let agent = agent();
    let order = r#"{"currency":"USD","amount":100,"pay_currency":"BTC"}"#;

    let (status, body) = post_order(&agent, &addr, key, order);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error_code"], json!("PARAMETERS_MISSING"));
    assert!(body.to_string().contains("BTC/USD"), "the error names the pair: {body}");

    // Set while the server runs: the next order is quoted with it.
    run_json(dir, &["rates", "set", "--env", "live", "BTC", "USD", "40000"]);
    let (status, body) = post_order(&agent, &addr, key, order);
    assert_eq!(status, 201, "{body}");
    let order_id = body["data"]["order_id"].as_str().expect("order_id");
    let shown = run_json(dir, &["orders", "show", "--env", "live", order_id]);
    assert_eq!(number_text(&shown["invoice"]["amount"]), "0.0025", "100 USD at 40000 USD/BTC: {shown}");
    assert_eq!(number_text(&shown["invoice"]["rate"]), "40000");
    assert_eq!(shown["invoice"]["currency"], json!("BTC"));

    // A sandbox rate does not make live quotes, and a deleted live rate stops them again.
    run_json(dir, &["rates", "set", "--env", "sandbox", "ETH", "USD", "2000"]);
    let (status, body) = post_order(&agent, &addr, key, r#"{"currency":"USD","amount":100,"pay_currency":"ETH"}"#);
    assert_eq!((status, &body["error_code"]), (400, &json!("PARAMETERS_MISSING")), "{body}");
    run_json(dir, &["rates", "delete", "--env", "live", "BTC", "USD"]);
    let (status, body) = post_order(&agent, &addr, key, order);
    assert_eq!((status, &body["error_code"]), (400, &json!("PARAMETERS_MISSING")), "{body}");

    assert_eq!(server.terminate().code(), Some(0));
}

#[test]
fn sandbox_pay_unconfirmed_then_confirm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let shop = Shop::open(dir, coinorder::Environment::Sandbox);
    let order_id = shop.order("10.5");

    let paid = run_json(dir, &["sandbox", "pay", &order_id, "--unconfirmed"]);
    let txid = paid["txid"].as_str().expect("txid printed").to_string();
    assert!(txid.starts_with("sandbox_tx_"), "{txid}");
    assert_eq!(paid["payment"]["txid"], json!(txid));
    assert_eq!(paid["payment"]["state"], json!("unconfirmed"));
    assert_eq!(number_text(&paid["payment"]["amount"]), "10.5", "pays what is due: {paid}");
    assert_eq!(paid["payment"]["currency"], json!("USDT"));
    assert_eq!(paid["events"][0]["type"], json!("order.pending"));
    assert_eq!(paid["order"]["order_id"], json!(order_id));
    assert_eq!(paid["order"]["status"], json!("PENDING"));
    assert_eq!(paid["invoice"]["status"], json!("PENDING"));
    assert_eq!(paid["duplicate"], json!(false));

    let confirmed = run_json(dir, &["sandbox", "confirm", &txid]);
    assert_eq!(confirmed["txid"], json!(txid));
    assert_eq!(confirmed["payment"]["state"], json!("confirmed"));
    assert_eq!(confirmed["events"][0]["type"], json!("order.paid"));
    assert_eq!(confirmed["order"]["status"], json!("PAID"));
    assert_eq!(confirmed["invoice"]["status"], json!("PAID"));
    assert_eq!(number_text(&confirmed["invoice"]["receive_amount"]), "10.5");
    assert_eq!(confirmed["invoice"]["receive_currency"], json!("USD"));
    assert_eq!(confirmed["order"]["receive_currency"], json!("USD"));

    // Confirming again is a no-op; rejecting a confirmed payment is refused.
    let again = run_json(dir, &["sandbox", "confirm", &txid]);
    assert_eq!((&again["duplicate"], &again["events"]), (&json!(true), &json!([])));
    assert_eq!(again["order"]["status"], json!("PAID"));
    let message = run_fails(dir, &["sandbox", "reject", &txid]);
    assert!(message.contains("already confirmed"), "{message}");
    // Nothing is due on a paid order unless an amount is given.
    let message = run_fails(dir, &["sandbox", "pay", &order_id]);
    assert!(message.contains("nothing is due"), "{message}");

    // The library sees the same.
    let order = shop.service.order(&order_id).expect("order");
    assert_eq!(order.order.status, coinorder::OrderStatus::Paid);
}

#[test]
fn sandbox_partial_payments_with_exact_amounts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let shop = Shop::open(dir, coinorder::Environment::Sandbox);
    let order_id = shop.order("10");

    let first = run_json(dir, &["sandbox", "pay", &order_id, "--amount", "3.333333"]);
    assert_eq!(number_text(&first["payment"]["amount"]), "3.333333");
    assert_eq!(first["payment"]["state"], json!("confirmed"));
    assert_eq!(first["order"]["status"], json!("PENDING"), "confirmed but short: {first}");
    // The rest, to the last decimal of USDT.
    let rest = run_json(dir, &["sandbox", "pay", &order_id]);
    assert_eq!(number_text(&rest["payment"]["amount"]), "6.666667");
    assert_eq!(rest["order"]["status"], json!("PAID"));
    assert_eq!(number_text(&rest["invoice"]["receive_amount"]), "10");

    // Amounts are exact decimals: more places than USDT has is refused, not rounded.
    let other = shop.order("10");
    let message = run_fails(dir, &["sandbox", "pay", &other, "--amount", "0.0000001"]);
    assert!(message.starts_with("error: amount") && message.contains("6 decimal places"), "{message}");
    let output = run(dir, &["sandbox", "pay", &other, "--amount", "1,5"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = run_fails(dir, &["sandbox", "pay", &other, "--amount", "0"]);
    assert!(message.starts_with("error: amount"), "{message}");
}

#[test]
fn sandbox_reject_fails_the_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let shop = Shop::open(dir, coinorder::Environment::Sandbox);
    let order_id = shop.order("25");

    let paid = run_json(dir, &["sandbox", "pay", &order_id, "--unconfirmed"]);
    let txid = paid["txid"].as_str().expect("txid");
    let rejected = run_json(dir, &["sandbox", "reject", txid]);
    assert_eq!(rejected["payment"]["state"], json!("rejected"));
    assert_eq!(rejected["events"][0]["type"], json!("order.failed"));
    assert_eq!(rejected["order"]["status"], json!("FAILED"));
    assert_eq!(rejected["invoice"]["status"], json!("FAILED"));
    let message = run_fails(dir, &["sandbox", "confirm", txid]);
    assert!(message.contains("already rejected"), "{message}");

    let message = run_fails(dir, &["sandbox", "reject", "sandbox_tx_nope"]);
    assert!(message.contains("no payment"), "{message}");
    let message = run_fails(dir, &["sandbox", "confirm", "sandbox_tx_nope"]);
    assert!(message.contains("no payment"), "{message}");
}

#[test]
fn sandbox_cancel_and_expire_fresh_orders() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let shop = Shop::open(dir, coinorder::Environment::Sandbox);

    let to_cancel = shop.order("5");
    let cancelled = run_json(dir, &["sandbox", "cancel", &to_cancel]);
    assert_eq!(cancelled["order"]["status"], json!("CANCELLED"));
    assert_eq!(cancelled["invoice"]["status"], json!("CANCELLED"));
    let message = run_fails(dir, &["sandbox", "cancel", &to_cancel]);
    assert!(message.contains("CANCELLED"), "{message}");

    let to_expire = shop.order("5");
    let expired = run_json(dir, &["sandbox", "expire", &to_expire]);
    assert_eq!(expired["order"]["status"], json!("EXPIRED"));
    assert_eq!(expired["invoice"]["status"], json!("EXPIRED"));
    let expired_at = expired["invoice"]["expired_at_t"].as_i64().expect("expired_at_t");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis();
    assert!(i128::from(expired_at) <= now as i128, "the quote ends now, not in 30 min: {expired}");
    let message = run_fails(dir, &["sandbox", "expire", &to_expire]);
    assert!(message.contains("EXPIRED"), "{message}");
    let message = run_fails(dir, &["sandbox", "cancel", &to_expire]);
    assert!(message.contains("EXPIRED"), "{message}");

    for events in [shop.service.order_events(&to_cancel), shop.service.order_events(&to_expire)] {
        assert_eq!(events.expect("events").len(), 1);
    }

    // Unknown and malformed ids.
    for args in [
        &["sandbox", "cancel", "00000000-0000-4000-8000-000000000000"][..],
        &["sandbox", "expire", "not-an-id"],
        &["sandbox", "pay", "00000000-0000-4000-8000-000000000000"],
    ] {
        let message = run_fails(dir, args);
        assert!(message.contains("not found"), "{args:?}: {message}");
    }
}

#[test]
fn sandbox_commands_never_touch_live_orders() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    run_json(dir, &["rates", "set", "--env", "live", "USDT", "USD", "1"]);
    let shop = Shop::open(dir, coinorder::Environment::Live);
    let order_id = shop.order("10");
    for args in [
        &["sandbox", "pay", order_id.as_str()][..],
        &["sandbox", "pay", order_id.as_str(), "--amount", "10"],
        &["sandbox", "cancel", order_id.as_str()],
        &["sandbox", "expire", order_id.as_str()],
    ] {
        let message = run_fails(dir, args);
        assert!(message.contains("not found"), "{args:?}: {message}");
    }
    // A live payment recorded by the host cannot be settled through the sandbox either.
    shop.service.record_payment(&order_id, "live_tx_1", "10".parse().expect("amount"), false).expect("record");
    let message = run_fails(dir, &["sandbox", "confirm", "live_tx_1"]);
    assert!(message.contains("no payment"), "{message}");
    let order = run_json(dir, &["orders", "show", "--env", "live", &order_id]);
    assert_eq!(order["order"]["status"], json!("PENDING"));
    assert_eq!(order["payments"][0]["state"], json!("unconfirmed"));
}

#[test]
fn orders_show_mark_paid_and_cancel() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let shop = Shop::open(dir, coinorder::Environment::Sandbox);

    // Expired, then paid late: nothing changes until the merchant marks it paid.
    let order_id = shop.order("20");
    run_json(dir, &["sandbox", "expire", &order_id]);
    let late = run_json(dir, &["sandbox", "pay", &order_id, "--amount", "20"]);
    assert_eq!(late["order"]["status"], json!("EXPIRED"));
    assert_eq!(late["events"][0]["type"], json!("order.paid_late"));
    assert_eq!(late["payment"]["counts"], json!(false));

    let marked = run_json(dir, &["orders", "mark-paid", "--env", "sandbox", &order_id]);
    assert_eq!(marked["order"]["status"], json!("PAID"));
    assert_eq!(marked["order"]["marked_paid"], json!(true));
    assert_eq!(marked["invoice"]["status"], json!("PAID"));
    let message = run_fails(dir, &["orders", "mark-paid", "--env", "sandbox", &order_id]);
    assert!(message.contains("PAID"), "{message}");

    let shown = run_json(dir, &["orders", "show", "--env", "sandbox", &order_id]);
    assert_eq!(shown["order"]["status"], json!("PAID"));
    let types: Vec<&str> =
        shown["events"].as_array().expect("events").iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types, ["order.expired", "order.paid_late", "order.paid"]);
    let sequences: Vec<i64> =
        shown["events"].as_array().expect("events").iter().filter_map(|e| e["sequence"].as_i64()).collect();
    assert_eq!(sequences, [1, 2, 3]);
    assert_eq!(shown["payments"].as_array().map(Vec::len), Some(1));
    assert_eq!(shown["payments"][0]["txid"], late["txid"]);
    // The order lives in the sandbox only.
    let message = run_fails(dir, &["orders", "show", "--env", "live", &order_id]);
    assert!(message.contains("not found"), "{message}");

    // The merchant's cancel: NEW only.
    let fresh = shop.order("1");
    let cancelled = run_json(dir, &["orders", "cancel", "--env", "sandbox", &fresh]);
    assert_eq!(cancelled["order"]["status"], json!("CANCELLED"));
    let message = run_fails(dir, &["orders", "cancel", "--env", "sandbox", &order_id]);
    assert!(message.contains("PAID"), "{message}");
    // A NEW order cannot be marked paid.
    let fresh = shop.order("1");
    let message = run_fails(dir, &["orders", "mark-paid", "--env", "sandbox", &fresh]);
    assert!(message.contains("NEW"), "{message}");
}

#[test]
fn serve_expires_orders_in_the_background() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let created = run_json(dir, &["keys", "create", "--user-id", "8", "--env", "sandbox"]);
    let key = created["key"].as_str().expect("key");
    let (mut server, addr) = ServeProcess::start(dir, &["--invoice-ttl", "1"]);
    let agent = agent();
    let (status, body) = post_order(&agent, &addr, key, r#"{"currency":"USD","amount":2}"#);
    assert_eq!(status, 201, "{body}");
    let order_id = body["data"]["order_id"].as_str().expect("order_id");

    let get = |path: &str| -> Value {
        let mut response =
            agent.get(format!("http://{addr}{path}")).header("x-api-key", key).call().expect("HTTP exchange");
        assert_eq!(response.status().as_u16(), 200);
        serde_json::from_str(&response.body_mut().read_to_string().expect("body")).expect("JSON")
    };
    let first = get(&format!("/v1/orders/{order_id}"));
    assert_eq!(first["invoice"]["expired_at_t"].as_i64(), first["invoice"]["created_at_t"].as_i64().map(|t| t + 1000));

    // Nobody asks for expiry: the worker does it within a second or two of the TTL.
    let deadline = Instant::now() + Duration::from_secs(5);
    let order = loop {
        let order = get(&format!("/v1/orders/{order_id}"));
        if order["order"]["status"] == json!("EXPIRED") || Instant::now() > deadline {
            break order;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(order["order"]["status"], json!("EXPIRED"), "not expired within 5 s: {order}");
    assert_eq!(order["invoice"]["status"], json!("EXPIRED"));
    let shown = run_json(dir, &["orders", "show", "--env", "sandbox", order_id]);
    assert_eq!(shown["events"][0]["type"], json!("order.expired"));

    // Shutdown stops the worker and still exits 0 promptly.
    let started = Instant::now();
    assert_eq!(server.terminate().code(), Some(0));
    assert!(started.elapsed() < Duration::from_secs(5), "shutdown took {:?}", started.elapsed());

    let output = run(dir, &["serve", "--env", "sandbox", "--invoice-ttl", "0"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}
