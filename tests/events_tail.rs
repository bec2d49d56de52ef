//! `coinorder events tail`: follows events as other processes write them, prints each
//! once, forwards each signed so that the public `standardwebhooks` package verifies it,
//! and stops cleanly on SIGTERM / Ctrl-C.

#[allow(unused_imports)]
mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::backend::{cli_key_file, db_named};
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_coinorder");

/// The CLI on the test's own database (SQLite file, or a fresh PostgreSQL database).
fn coinorder(dir: &Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .current_dir(dir)
        .env("COINORDER_DB", db_named(dir, "tail.db"))
        .env_remove("COINORDER_ENV")
        .env_remove("COINORDER_CONFIG")
        .env_remove("COINORDER_SECRET_KEY_FILE");
    if let Some(key_file) = cli_key_file() {
        command.env("COINORDER_SECRET_KEY_FILE", key_file);
    }
    command
}

fn run_json(dir: &Path, args: &[&str]) -> Value {
    let output = coinorder(dir).args(args).output().expect("run coinorder");
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

#[test]
fn tail_prints_and_forwards_signed_events_until_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let created = run_json(dir, &["keys", "create", "--user-id", "5"]);
    let secret = created["webhook_secret"].as_str().expect("secret").to_string();
    // An event from before the tail starts is not printed.
    run_json(dir, &["sandbox", "trigger", "order.cancelled"]);

    let receiver = Receiver::start();
    let mut tail = coinorder(dir)
        .args(["events", "tail", "--forward-to", &receiver.url_with_path("/dev-hook")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start events tail");
    let mut stderr = BufReader::new(tail.stderr.take().expect("stderr"));
    let mut first = String::new();
    stderr.read_line(&mut first).expect("read stderr");
    assert!(first.contains("following sandbox events") && first.contains("/dev-hook"), "{first}");

    let triggered = run_json(dir, &["sandbox", "trigger", "order.failed"]);
    let order_id = triggered["order"]["order_id"].as_str().expect("order id").to_string();
    // order.pending then order.failed, forwarded in that order.
    let requests = receiver.wait_for(2, Duration::from_secs(20));
    for request in &requests {
        assert_eq!(request.target, "/dev-hook");
        python_verify(&secret, request).unwrap_or_else(|e| panic!("standardwebhooks rejected it: {e}"));
        let body: Value = serde_json::from_slice(&request.body).expect("JSON body");
        assert_eq!(body["data"]["order"]["order_id"].as_str(), Some(order_id.as_str()));
    }
    let types: Vec<Value> =
        requests.iter().map(|r| serde_json::from_slice::<Value>(&r.body).expect("JSON")["type"].clone()).collect();
    assert_eq!(types, [Value::from("order.pending"), Value::from("order.failed")]);

    // SIGTERM ends it with status 0; it printed exactly the two new events, once each.
    let killed = Command::new("kill").args(["-TERM", &tail.id().to_string()]).status().expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = tail.try_wait().expect("try_wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "events tail did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    let mut printed = String::new();
    std::io::Read::read_to_string(&mut tail.stdout.take().expect("stdout"), &mut printed).expect("read stdout");
    let lines: Vec<Value> =
        printed.lines().map(|line| serde_json::from_str(line).expect("one JSON per line")).collect();
    assert_eq!(lines.len(), 2, "{printed}");
    assert_eq!(lines[0]["type"], "order.pending");
    assert_eq!(lines[1]["type"], "order.failed");
    assert_eq!(lines[1]["order_id"].as_str(), Some(order_id.as_str()));
    assert_eq!(lines[1]["payload"]["type"], "order.failed");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).expect("read stderr");
    assert_eq!(rest.matches("-> http://").count(), 2, "each forward is logged with its status: {rest}");
    assert!(rest.contains(": 200 in "), "{rest}");
}

#[test]
fn forward_to_must_be_an_http_url() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = coinorder(dir.path()).args(["events", "tail", "--forward-to", "ftp://x"]).output().expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("http://"), "{}", String::from_utf8_lossy(&output.stderr));
}
