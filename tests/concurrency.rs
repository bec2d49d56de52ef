//! Several threads and a second OS process create orders in one SQLite file at the same
//! time (DESIGN §8): no request fails (`SQLITE_BUSY` never reaches a caller), and
//! afterwards every order exists exactly once with distinct ids.
//!
//! The second process is this test binary itself, re-executed to run the ignored
//! `child_writer` test with the database path and key in environment variables.

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::thread;

use coinorder::{Config, Environment, RateLimit, Service};
use common::*;
use serde_json::json;

const ENV_DB: &str = "COINORDER_CONCURRENCY_CHILD_DB";
const ENV_KEY: &str = "COINORDER_CONCURRENCY_CHILD_KEY";
const THREADS: usize = 4;
const PER_THREAD: usize = 500;
const CHILD_ORDERS: usize = 300;

fn config() -> Config {
    let mut config = Config::new(Environment::Sandbox);
    config.rate_limit = RateLimit::OFF;
    config.secret_key_path = shared_key_file();
    config
}

/// The second writer process. Does nothing unless started by the parent test.
#[test]
#[ignore = "run as a child process by threads_and_a_second_process_share_one_file"]
fn child_writer() {
    let (Ok(db), Ok(key)) = (std::env::var(ENV_DB), std::env::var(ENV_KEY)) else {
        return;
    };
    let svc = Service::open(&db, config()).expect("child: open service");
    println!("CHILD_READY");
    let mut failures = Vec::new();
    for i in 0..CHILD_ORDERS {
        let body = json!({
            "currency": "USD",
            "amount": format!("{}.{:02}", i + 1, i % 100),
            "merchant_order_id": format!("child-{i}"),
        });
        let resp = post_json(&svc, &key, &body);
        if resp.status != 201 {
            failures.push(format!("child-{i}: {} {}", resp.status, text(&resp)));
        }
    }
    assert!(failures.is_empty(), "child failures: {failures:#?}");
    println!("CHILD_DONE {CHILD_ORDERS}");
}

#[test]
fn threads_and_a_second_process_share_one_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_path(&dir);
    let svc = Arc::new(Service::open(&db, config()).expect("open service"));
    let (key, _) = new_key(&svc, 1, Environment::Sandbox);

    let mut child = Command::new(std::env::current_exe().expect("current exe"))
        .args(["child_writer", "--exact", "--nocapture", "--ignored"])
        .env(ENV_DB, &db)
        .env(ENV_KEY, &key)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child process");

    // Wait until the child has its service open, so both processes write together.
    let mut child_stdout = BufReader::new(child.stdout.take().expect("child stdout"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        let n = child_stdout.read_line(&mut line).expect("read child stdout");
        seen.push_str(&line);
        if n == 0 || line.contains("CHILD_READY") {
            break;
        }
    }
    assert!(seen.contains("CHILD_READY"), "child did not start: {seen}");
    let stdout_drain = thread::spawn(move || {
        let mut rest = String::new();
        child_stdout.read_to_string(&mut rest).expect("drain child stdout");
        rest
    });
    let mut child_stderr = child.stderr.take().expect("child stderr");
    let stderr_drain = thread::spawn(move || {
        let mut rest = String::new();
        child_stderr.read_to_string(&mut rest).expect("drain child stderr");
        rest
    });

    let barrier = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let svc = Arc::clone(&svc);
            let key = key.clone();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                let mut created = Vec::with_capacity(PER_THREAD);
                let mut failures = Vec::new();
                for i in 0..PER_THREAD {
                    // Half the orders name their merchant_order_id, half get a generated one.
                    let body = if i % 2 == 0 {
                        json!({"currency": "USD", "amount": i + 1, "merchant_order_id": format!("t{t}-{i}")})
                    } else {
                        json!({"currency": "EUR", "amount": i + 1, "title": format!("thread {t} order {i}")})
                    };
                    let resp = post_json(&svc, &key, &body);
                    if resp.status == 201 {
                        let v = resp.json();
                        created.push((
                            string(&v["data"], "order_id").to_string(),
                            string(&v["data"], "merchant_order_id").to_string(),
                        ));
                    } else {
                        failures.push(format!("t{t}-{i}: {} {}", resp.status, text(&resp)));
                    }
                }
                (created, failures)
            })
        })
        .collect();

    let mut created = Vec::new();
    let mut failures = Vec::new();
    for worker in workers {
        let (c, f) = worker.join().expect("worker thread panicked");
        created.extend(c);
        failures.extend(f);
    }
    let status = child.wait().expect("wait for child");
    let child_out = stdout_drain.join().expect("stdout drain");
    let child_err = stderr_drain.join().expect("stderr drain");

    assert!(
        failures.is_empty(),
        "{} of {} thread requests failed, first: {:#?}",
        failures.len(),
        THREADS * PER_THREAD,
        &failures[..failures.len().min(5)]
    );
    assert!(status.success(), "child process failed ({status}):\n{child_out}\n{child_err}");
    assert!(
        child_out.contains(&format!("CHILD_DONE {CHILD_ORDERS}")) && child_out.contains("1 passed"),
        "child did not run its writer test:\n{child_out}\n{child_err}"
    );
    assert_eq!(created.len(), THREADS * PER_THREAD);

    // Count through a fresh service, as another process would.
    drop(svc);
    let fresh = Service::open(&db, config()).expect("reopen");
    let all = list_all(&fresh, &key);
    let expected = THREADS * PER_THREAD + CHILD_ORDERS;
    assert_eq!(all.len(), expected, "orders in the file");

    let order_ids: HashSet<String> = all.iter().map(|o| string(o, "order_id").to_string()).collect();
    assert_eq!(order_ids.len(), expected, "order_ids must be distinct");
    let merchant_ids: HashSet<String> = all.iter().map(|o| string(o, "merchant_order_id").to_string()).collect();
    assert_eq!(merchant_ids.len(), expected, "merchant_order_ids must be distinct");

    for (order_id, merchant_order_id) in &created {
        assert!(order_ids.contains(order_id), "{order_id} missing from the list");
        assert!(merchant_ids.contains(merchant_order_id));
    }
    for i in 0..CHILD_ORDERS {
        assert!(merchant_ids.contains(&format!("child-{i}")), "child-{i} missing");
    }
    for t in 0..THREADS {
        for i in (0..PER_THREAD).step_by(2) {
            assert!(merchant_ids.contains(&format!("t{t}-{i}")), "t{t}-{i} missing");
        }
    }
    let generated = merchant_ids.iter().filter(|m| m.starts_with("ord_")).count();
    assert_eq!(generated, THREADS * PER_THREAD / 2);

    // The two processes really wrote at the same time: their creation times interleave.
    let span = |child: bool| {
        let stamps: Vec<&str> = all
            .iter()
            .filter(|o| string(o, "merchant_order_id").starts_with("child-") == child)
            .map(|o| string(o, "created_at"))
            .collect();
        let min = stamps.iter().min().copied().unwrap_or_default().to_string();
        let max = stamps.iter().max().copied().unwrap_or_default().to_string();
        (min, max)
    };
    let (child_first, child_last) = span(true);
    let (threads_first, threads_last) = span(false);
    assert!(
        child_first <= threads_last && threads_first <= child_last,
        "no overlap: child {child_first}..{child_last}, threads {threads_first}..{threads_last}"
    );

    // Newest first holds across everything that was written concurrently.
    let stamps: Vec<&str> = all.iter().map(|o| string(o, "created_at")).collect();
    assert!(stamps.windows(2).all(|w| w[0] >= w[1]), "list not newest first");

    // Spot-check that orders written by each side can be read back individually.
    for (order_id, _) in created.iter().step_by(250) {
        let resp = get(&fresh, &key, &format!("/v1/orders/{order_id}"));
        assert_eq!(resp.status, 200, "{}", text(&resp));
    }
}

/// Identical retries racing from several connections (one `Service` per thread, as
/// separate processes would) create each order once and all get the original 201.
#[test]
fn racing_identical_retries_create_each_order_once() {
    const RACERS: usize = 4;
    const REFS: usize = 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_path(&dir);
    let first = Service::open(&db, config()).expect("open service");
    let (key, _) = new_key(&first, 5, Environment::Sandbox);
    let barrier = Arc::new(Barrier::new(RACERS));
    let racers: Vec<_> = (0..RACERS)
        .map(|_| {
            let db = db.clone();
            let key = key.clone();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                let svc = Service::open(&db, config()).expect("open racer service");
                barrier.wait();
                (0..REFS)
                    .map(|r| {
                        let body = format!(r#"{{"merchant_order_id":"race-{r}","currency":"USD","amount":12.34}}"#);
                        let resp = post_raw(&svc, &key, body.into_bytes());
                        (r, resp.status, text(&resp))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut bodies: Vec<Vec<String>> = vec![Vec::new(); REFS];
    for racer in racers {
        for (r, status, body) in racer.join().expect("racer panicked") {
            assert_eq!(status, 201, "race-{r}: {body}");
            bodies[r].push(body);
        }
    }
    for (r, seen) in bodies.iter().enumerate() {
        assert!(seen.windows(2).all(|w| w[0] == w[1]), "race-{r}: every racer must get the original body: {seen:#?}");
    }
    let all = list_all(&first, &key);
    assert_eq!(all.len(), REFS, "one order per merchant_order_id");
    let distinct: HashSet<String> = all.iter().map(|o| string(o, "order_id").to_string()).collect();
    assert_eq!(distinct.len(), REFS);
}

/// Several services opening the same new file at once all succeed and share one
/// secret-encryption key: every one of them can read every key's webhook secret.
#[test]
fn concurrent_first_opens_of_a_new_file_agree() {
    const OPENERS: usize = 6;
    for round in 0..5 {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = db_path(&dir);
        let barrier = Arc::new(Barrier::new(OPENERS));
        let openers: Vec<_> = (0..OPENERS)
            .map(|i| {
                let db = db.clone();
                let barrier = Arc::clone(&barrier);
                thread::spawn(move || {
                    barrier.wait();
                    let svc = Service::open(&db, config())
                        .unwrap_or_else(|e| panic!("round {round}: opener {i} failed: {e}"));
                    let created = svc
                        .create_key(coinorder::NewApiKey {
                            user_id: i64::try_from(i).expect("small"),
                            environment: Environment::Sandbox,
                            webhook_url: None,
                        })
                        .unwrap_or_else(|e| panic!("round {round}: opener {i} create_key: {e}"));
                    (svc, created)
                })
            })
            .collect();
        let opened: Vec<_> = openers.into_iter().map(|t| t.join().expect("opener panicked")).collect();
        for (svc, _) in &opened {
            for (_, created) in &opened {
                let secret = svc
                    .key_webhook_secret(&created.key.id)
                    .unwrap_or_else(|e| panic!("round {round}: secret unreadable from another service: {e}"));
                assert_eq!(secret.expose(), created.webhook_secret.expose());
                let resp = get(svc, created.plain_key.expose(), "/v1/orders");
                assert_eq!(resp.status, 200, "{}", text(&resp));
            }
        }
    }
}
