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
}

/// A running `coinorder serve`, killed if the test fails before it stops.
struct ServeProcess {
    child: Child,
}

impl ServeProcess {
    /// Starts the server and reads its listening line; returns it with the address.
    fn start(dir: &Path, extra: &[&str]) -> (ServeProcess, String) {
        let mut child = coinorder(dir)
            .args(["serve", "--env", "sandbox", "--addr", "127.0.0.1:0"])
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
            .and_then(|rest| rest.strip_suffix(" (sandbox)"))
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
