//! The `coinorder` binary, run for real in temporary directories.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "common/backend.rs"]
mod backend;
mod smtp_support;
#[path = "common/wallets.rs"]
mod wallets;

use backend::{cli_key_file, database_created, db_arg, db_named, on_postgres, postgres_server, shared_key_file};
use smtp_support::SmtpSink;

const BIN: &str = env!("CARGO_BIN_EXE_coinorder");
/// Upper bound for the server to start, answer, or stop.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The binary run in `dir` with a clean environment: no `COINORDER_DB` or
/// `COINORDER_SECRET_KEY_FILE` from the caller's shell.
///
/// On PostgreSQL both name the test's own: `COINORDER_DB` the directory's default
/// database ([`default_db`]), so that a command without `--db` works on it as it works on
/// `./coinorder.db` on SQLite (`--db` still wins), and the shared key file that opening
/// PostgreSQL needs.
fn coinorder(dir: &Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .current_dir(dir)
        .env_remove("COINORDER_DB")
        .env_remove("COINORDER_SECRET_KEY_FILE")
        .env_remove("COINORDER_ENV")
        .env_remove("COINORDER_CONFIG");
    if let Some(key_file) = cli_key_file() {
        command.env("COINORDER_DB", default_db(dir)).env("COINORDER_SECRET_KEY_FILE", key_file);
    }
    command
}

/// [`coinorder`] without `COINORDER_DB` on either backend: the database comes from `--db`,
/// the settings file's `db`, or the default `./coinorder.db`, for the tests of that choice.
fn coinorder_without_db_env(dir: &Path) -> Command {
    let mut command = coinorder(dir);
    command.env_remove("COINORDER_DB");
    command
}

/// The database a command run in `dir` without `--db` uses: `dir/coinorder.db`, or on
/// PostgreSQL the one [`coinorder`] names in `COINORDER_DB`.
fn default_db(dir: &Path) -> PathBuf {
    db_named(dir, "coinorder.db")
}

/// Opens the library on the directory's default database (see [`default_db`]) with
/// `config`, sharing the CLI's key file on PostgreSQL.
fn open_service(dir: &Path, mut config: coinorder::Config) -> coinorder::Service {
    config.secret_key_path = shared_key_file();
    coinorder::Service::open(default_db(dir), config).expect("open service")
}

fn run(dir: &Path, args: &[&str]) -> Output {
    coinorder(dir).args(args).output().expect("run coinorder")
}

/// Runs a command that must succeed and print one JSON document.
fn run_json(dir: &Path, args: &[&str]) -> Value {
    json_output(run(dir, args), args)
}

/// The one JSON document a command printed; it must have succeeded.
fn json_output(output: Output, args: &[&str]) -> Value {
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
    let keys_db = db_arg(dir, "keys.db");

    // --db before the subcommand.
    let create = ["--db", keys_db.as_str(), "keys", "create", "--user-id", "7", "--env", "sandbox"];
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
    assert!(database_created(&db_named(dir, "keys.db")));

    let live = run_json(dir, &["keys", "create", "--user-id", "7", "--env", "live", "--db", &keys_db]);
    assert!(live["key"].as_str().is_some_and(|k| k.starts_with("prod_")), "{live}");
    assert_eq!(live["webhook_url"], Value::Null);

    // --db after the subcommand; list shows both keys and never a plain key or secret.
    let output = run(dir, &["keys", "list", "--db", &keys_db]);
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

    let key = run_json(dir, &["--db", &keys_db, "keys", "deactivate", &id]);
    assert_eq!((&key["id"], &key["status"]), (&json!(id), &json!("inactive")));
    let key = run_json(dir, &["--db", &keys_db, "keys", "activate", &id]);
    assert_eq!(key["status"], json!("active"));
    let key = run_json(dir, &["--db", &keys_db, "keys", "set-webhook", &id, "https://other.example/events"]);
    assert_eq!(key["webhook_url"], json!("https://other.example/events"));
    let key = run_json(dir, &["--db", &keys_db, "keys", "clear-webhook", &id]);
    assert_eq!(key["webhook_url"], Value::Null);
    let key = run_json(dir, &["--db", &keys_db, "keys", "rotate-secret", &id]);
    let rotated = key["webhook_secret"].as_str().expect("new secret");
    assert!(rotated.starts_with("whsec_") && rotated != secret, "{key}");
    assert_eq!(key.get("key"), None, "rotation never shows the plain key");

    let deleted = run_json(dir, &["--db", &keys_db, "keys", "delete", &id]);
    assert_eq!(deleted, json!({ "deleted": id }));
    let listed = run_json(dir, &["--db", &keys_db, "keys", "list"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");

    // A deleted or unknown id is an error with a message, exit status 1.
    for args in
        [["keys", "activate", id.as_str()], ["keys", "delete", "key_nope"], ["keys", "clear-webhook", "key_nope"]]
    {
        let output = coinorder(dir).arg("--db").arg(&keys_db).args(args).output().expect("run");
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let message = stderr(&output);
        assert!(message.starts_with("error: ") && message.contains("not found"), "{message}");
        assert!(message.contains("`coinorder keys list` lists the keys"), "the next command: {message}");
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
        &["serve", "--env", "sandbox", "--rate-burst", "0"],
        &["frobnicate"],
    ] {
        let output = run(dir, args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
    }

    // A burst of 0 in the settings file is refused as the library refuses it, not run
    // as a burst of 1.
    std::fs::write(dir.join("no-burst.toml"), "[server]\nrate_burst = 0\n").expect("write config");
    let message = run_fails(dir, &["--config", "no-burst.toml", "serve", "--addr", "127.0.0.1:0"]);
    assert!(message.contains("rate_burst: must be a whole number from 1 to 4294967295"), "{message}");

    // A database path that cannot be created.
    let output = run(dir, &["--db", "no/such/dir/x.db", "keys", "list"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).starts_with("error: "), "{}", stderr(&output));

    // A PostgreSQL server that cannot be reached: an error naming it without its password,
    // after the busy timeout (short here: only `serve` reads `limits.busy_timeout_ms`).
    // It needs no server, so it runs on either backend.
    write_key_file(&dir.join("shared.key"));
    std::fs::write(dir.join("fast.toml"), "[limits]\nbusy_timeout_ms = 1000\n").expect("write config");
    let unreachable = "postgres://coinorder:hunter2@127.0.0.1:1/nowhere";
    let output =
        serve_until_exit(dir, &["--db", unreachable, "--secret-key-file", "shared.key", "--config", "fast.toml"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.starts_with("error: cannot open database postgres://coinorder:***@127.0.0.1:1/nowhere: "),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "the password was printed: {message}");
}

/// Writes a secret key file (32 bytes, base64) at `path`, readable by its owner only.
fn write_key_file(path: &Path) {
    std::fs::write(path, "Y29pbm9yZGVyLWNsaS10ZXN0LWtleS0zMi1ieXRlcyE=").expect("write key file");
    #[cfg(unix)]
    set_mode(path, 0o600);
}

#[test]
fn database_location_defaults_and_env_var() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();

    // Default: ./coinorder.db in the working directory. (A server has no default: on
    // PostgreSQL `coinorder` names the directory's database in COINORDER_DB instead.)
    let created = run_json(dir, &["keys", "create", "--user-id", "1", "--env", "sandbox"]);
    assert!(database_created(&default_db(dir)));

    // COINORDER_DB picks another database; --db wins over it.
    let env_db = db_named(dir, "env.db");
    let output = coinorder(dir)
        .env("COINORDER_DB", &env_db)
        .args(["keys", "create", "--user-id", "2", "--env", "live"])
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(database_created(&env_db));
    let in_env_db = run_json(dir, &["keys", "list", "--db", &db_arg(dir, "env.db")]);
    assert_eq!(in_env_db.as_array().map(Vec::len), Some(1));
    assert_eq!(in_env_db[0]["user_id"], json!(2));

    let output = coinorder(dir)
        .env("COINORDER_DB", &env_db)
        .args(["keys", "list", "--db", &db_arg(dir, "coinorder.db")])
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
        ServeProcess::start_command(coinorder(dir), env, extra)
    }

    /// Starts a sandbox server under a file size limit of `kib` KiB (`ulimit -f`, through
    /// the shell, whose `exec` keeps the process and its limit).
    fn start_limited(dir: &Path, kib: u64, extra: &[&str]) -> (ServeProcess, String) {
        let mut command = coinorder(dir);
        let mut shell = Command::new("sh");
        shell.current_dir(dir).args(["-c", &format!("ulimit -f {kib} && exec \"$0\" \"$@\""), BIN]);
        for (name, value) in command.get_envs() {
            match value {
                Some(value) => shell.env(name, value),
                None => shell.env_remove(name),
            };
        }
        command = shell;
        ServeProcess::start_command(command, "sandbox", extra)
    }

    fn start_command(mut command: Command, env: &str, extra: &[&str]) -> (ServeProcess, String) {
        let mut child = command
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

    /// What the process wrote to stderr; call after it exited.
    fn stderr_text(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
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
fn serve_exits_within_its_grace_while_another_process_holds_the_database() {
    // SQLite's write lock, held by another process: what serve still has to write at
    // shutdown (the keys' last use, a worker's run) would wait out the busy timeout.
    if on_postgres() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let created = run_json(dir, &["keys", "create", "--user-id", "5", "--env", "sandbox"]);
    let key = created["key"].as_str().expect("key");
    std::fs::write(dir.join("slow.toml"), "[limits]\nbusy_timeout_ms = 30000\nshutdown_grace_secs = 1\n")
        .expect("write config");
    let (mut server, addr) = ServeProcess::start(dir, &["--config", "slow.toml"]);
    let holder = rusqlite::Connection::open(dir.join("coinorder.db")).expect("open");
    holder.execute_batch("BEGIN IMMEDIATE").expect("hold the write lock");
    // A request whose key use cannot be written while the lock is held.
    let response = agent().get(format!("http://{addr}/v1/orders")).header("x-api-key", key).call().expect("GET");
    assert_eq!(response.status().as_u16(), 200);
    let started = Instant::now();
    let status = server.terminate();
    let waited = started.elapsed();
    assert_eq!(status.code(), Some(0));
    assert!(waited < Duration::from_secs(8), "1 s of grace and 5 for background work; waited {waited:?}");
    assert!(server.stderr_text().contains("exiting without it"));
    holder.execute_batch("ROLLBACK").expect("release");
}

#[test]
fn a_write_past_the_file_size_limit_fails_its_request_and_serve_stays_up() {
    if on_postgres() {
        return; // the limit is on this process's files: PostgreSQL's are the server's
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let created = run_json(dir, &["keys", "create", "--user-id", "5", "--env", "sandbox"]);
    let key = created["key"].as_str().expect("key");
    let size = |name: &str| std::fs::metadata(dir.join(name)).map_or(0, |m| m.len());
    // Room for the files as they are and 2 MiB more (SQLite's shared-memory file is
    // 32 KiB; a create adds about 40 KiB of log): some dozens of orders.
    let kib = (size("coinorder.db").max(32 * 1024) + 2048 * 1024) / 1024;
    let (mut server, addr) = ServeProcess::start_limited(dir, kib, &["--rate-limit", "0"]);
    let agent = agent();
    let body = format!(r#"{{"currency":"USD","amount":1,"description":"{}"}}"#, "x".repeat(700));
    let mut created = 0;
    let refused = loop {
        let (status, answer) = post_order(&agent, &addr, key, &body);
        match status {
            201 => created += 1,
            _ => break (status, answer),
        }
        assert!(created < 5_000, "the limit was never reached");
    };
    assert_eq!(refused.0, 500, "{}", refused.1);
    assert_eq!(refused.1["error_code"], json!("InternalServerError"), "{}", refused.1);
    assert!(created > 20, "only {created} orders before the limit");
    // Still up: reads answer, and it stops cleanly.
    let listed = agent.get(format!("http://{addr}/v1/orders?limit=1")).header("x-api-key", key).call();
    assert_eq!(listed.expect("HTTP exchange").status().as_u16(), 200);
    let status = server.terminate();
    assert_eq!(status.code(), Some(0), "stderr: {}", server.stderr_text());
}

#[test]
fn serve_options_reach_the_service() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let opts_db = db_arg(dir, "opts.db");
    let created = run_json(dir, &["--db", &opts_db, "keys", "create", "--user-id", "9", "--env", "sandbox"]);
    let key = created["key"].as_str().expect("key");

    let (mut server, addr) = ServeProcess::start(
        dir,
        &[
            "--db",
            &opts_db,
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

/// The library over the same database the CLI uses, to create orders to act on.
struct Shop {
    service: coinorder::Service,
    merchant: coinorder::Merchant,
}

impl Shop {
    /// A service for `environment` over the directory's default database (`coinorder.db`)
    /// with a fresh key of user 77.
    fn open(dir: &Path, environment: coinorder::Environment) -> Shop {
        let service = open_service(dir, coinorder::Config::new(environment));
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
#[test]
fn live_keys_take_a_private_webhook_url_only_when_the_settings_file_allows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dir = dir.path();
    let create = ["keys", "create", "--env", "live", "--user-id", "9", "--webhook-url", "http://127.0.0.1:9/x"];
    let refused = run_fails(dir, &create);
    assert!(refused.contains("webhook_url") && refused.contains("refused in live"), "{refused}");

    std::fs::write(dir.join("allow.toml"), "[webhooks]\nallow_private = true\n").expect("write settings");
    let created = run_json(dir, &[&["--config", "allow.toml"][..], &create[..]].concat());
    assert_eq!(created["webhook_url"], json!("http://127.0.0.1:9/x"));
    let id = created["id"].as_str().expect("id").to_string();
    let key =
        run_json(dir, &["--config", "allow.toml", "--env", "live", "keys", "set-webhook", &id, "http://10.0.0.1/hook"]);
    assert_eq!(key["webhook_url"], json!("http://10.0.0.1/hook"));
    let refused = run_fails(dir, &["--env", "live", "keys", "set-webhook", &id, "http://10.0.0.2/hook"]);
    assert!(refused.contains("refused in live"), "{refused}");
}

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
fn wallets_set_list_show_and_remove_through_the_cli() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let set = run_json(dir, &["wallets", "set", "--env", "live", "btc", wallets::BIP84_ZPUB]);
    assert_eq!(set["coin"], json!("BTC"));
    assert_eq!(set["environment"], json!("live"));
    assert_eq!(set["first_address"], json!(wallets::BIP84_ADDRESSES[0]));
    assert_eq!(set["next_index"], json!(0));
    let shown = run_json(dir, &["wallets", "show-address", "--env", "live", "BTC", "--index", "1", "--count", "2"]);
    assert_eq!(
        shown,
        json!([
            {"index": 1, "address": wallets::BIP84_ADDRESSES[1]},
            {"index": 2, "address": wallets::BIP84_ADDRESSES[2]},
        ])
    );
    let listed = run_json(dir, &["wallets", "list", "--env", "live"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(run_json(dir, &["wallets", "list"]), json!([]), "the sandbox has none");
    let table = String::from_utf8_lossy(&run(dir, &["wallets", "list", "--env", "live", "--format", "table"]).stdout)
        .into_owned();
    assert!(table.starts_with("ENV") && table.contains(wallets::BIP84_ADDRESSES[0]), "{table}");

    // A private key is refused and never echoed; so are the other network's keys.
    let xprv = "xprv9s21ZrQH143K3GJpoapnV8SFfukcVBSfeCficPSGfubmSFDxo1kuHnLisriDvSnRRuL2Qrg5ggqHKNVpxR86QEC8w35uxmGoggxtQTPvfUu";
    let message = run_fails(dir, &["wallets", "set", "--env", "live", "BTC", xprv]);
    assert!(
        message.contains("wallet") && message.contains("private key") && !message.contains(&xprv[8..40]),
        "{message}"
    );
    let message = run_fails(dir, &["wallets", "set", "BTC", wallets::BIP84_ZPUB]);
    assert!(message.contains("wallet"), "a mainnet key in the sandbox: {message}");
    let message = run_fails(dir, &["wallets", "set", "--env", "live", "DOGE", wallets::BIP84_ZPUB]);
    assert!(message.contains("coin") && message.contains("BTC, ETH, USDT, USDC"), "{message}");

    let removed = run_json(dir, &["wallets", "remove", "--env", "live", "BTC"]);
    assert_eq!(removed, json!({"removed": {"environment": "live", "coin": "BTC"}}));
    let message = run_fails(dir, &["wallets", "remove", "--env", "live", "BTC"]);
    assert!(message.contains("no BTC wallet in live"), "{message}");
    let message = run_fails(dir, &["wallets", "show-address", "--env", "live", "BTC"]);
    assert!(message.contains("no wallet"), "{message}");
}

#[test]
fn a_first_command_that_fails_leaves_no_database_behind() {
    if on_postgres() {
        return; // a server's database exists before any command
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let files = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    for args in [
        &["rates", "set", "BTC", "USD", "0"][..],
        &["wallets", "set", "BTC", "not-a-key"],
        &["keys", "create", "--user-id", "1", "--webhook-url", "ftp://hooks.example/x"],
    ] {
        run_fails(dir, args);
        assert_eq!(files(), Vec::<String>::new(), "{args:?} left files behind");
    }
    // Once the database exists, a failing command leaves it as it was.
    run_json(dir, &["keys", "create", "--user-id", "1"]);
    let before = files();
    assert!(before.contains(&"coinorder.db".to_string()) && before.contains(&"coinorder.db.key".to_string()));
    run_fails(dir, &["rates", "set", "BTC", "USD", "0"]);
    assert_eq!(files(), before);
}

#[test]
fn rates_set_list_delete_round_trip() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    // Only `rates set` creates the database file; listing before it is an error. A
    // database on a server exists before any command, so there listing finds nothing.
    if on_postgres() {
        assert_eq!(run_json(dir, &["rates", "list", "--env", "live"]), json!([]));
    } else {
        let message = run_fails(dir, &["rates", "list", "--env", "live"]);
        assert!(message.starts_with("error: no database at ./coinorder.db"), "{message}");
    }

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
    assert_eq!(run_json(dir, &["rates", "list", "--env", "live"]).as_array().map(Vec::len), Some(1));
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
        &["rates", "set", "--env", "staging", "BTC", "USD", "1"],
        &["rates", "list", "--format", "yaml"],
    ] {
        let output = run(dir, args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
    }
    assert_eq!(run_json(dir, &["rates", "list", "--env", "live"]).as_array().map(Vec::len), Some(1));
}

/// Live watch-only wallets for every coin live accepts by default (BTC from BIP84's zpub,
/// ETH, USDT and USDC from one BIP44 account xpub), so a live `serve` starts.
fn live_wallets(dir: &Path) {
    run_json(dir, &["wallets", "set", "--env", "live", "BTC", wallets::BIP84_ZPUB]);
    let xpub = wallets::ethereum_account_xpub();
    for coin in ["ETH", "USDT", "USDC"] {
        run_json(dir, &["wallets", "set", "--env", "live", coin, &xpub]);
    }
}

#[test]
fn live_orders_need_a_rate_set_with_the_cli() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    live_wallets(dir);
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
    assert_eq!(shown["invoice"]["address"], json!(wallets::BIP84_ADDRESSES[0]), "derived from the wallet: {shown}");
    assert_eq!(shown["invoice"]["derivation_index"], json!(0), "{shown}");

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
        // The error says where the order is, and echoes the id given.
        assert!(message.contains("add --env live") && message.contains(order_id.as_str()), "{args:?}: {message}");
    }
    let message = run_fails(dir, &["sandbox", "--env", "live", "pay", order_id.as_str()]);
    assert!(message.contains("sandbox orders only") && message.contains("payments record"), "{message}");
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
    // Its webhook names the late payment: txid and exact amount.
    let events = run_json(dir, &["webhooks", "list", "--full", "--type", "order.paid_late", "--order", &order_id]);
    let data = &events[0]["payload"]["data"];
    assert_eq!(data["payment"]["txid"], late["payment"]["txid"], "{data}");
    assert_eq!(number_text(&data["payment"]["amount"]), "20");
    assert_eq!(data["payment"]["currency"], late["payment"]["currency"]);

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

// ----- Webhooks and e-mail (issue 4) -----

/// One request a [`Receiver`] got.
#[derive(Debug, Clone)]
struct Hit {
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Hit {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("webhook body is JSON")
    }
}

/// A tiny webhook receiver on 127.0.0.1: answers every request `200 ok` (and closes the
/// connection), recording it. Stopped and joined on drop.
struct Receiver {
    addr: std::net::SocketAddr,
    hits: std::sync::Arc<std::sync::Mutex<Vec<Hit>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Receiver {
    fn start() -> Receiver {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind receiver");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let hits = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (hits, stop) = (Arc::clone(&hits), Arc::clone(&stop));
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            if let Some(hit) = Receiver::answer(stream) {
                                hits.lock().expect("hits").push(hit);
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            thread::sleep(Duration::from_millis(5));
                        }
                        Err(_) => thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        Receiver { addr, hits, stop, thread: Some(thread) }
    }

    /// Reads one request and answers 200, or `410 Gone` to a path ending in `/gone` (a
    /// receiver that wants no more webhooks: given up at once).
    fn answer(mut stream: std::net::TcpStream) -> Option<Hit> {
        use std::io::Write;
        stream.set_nonblocking(false).ok()?;
        stream.set_read_timeout(Some(TIMEOUT)).ok()?;
        let mut data = Vec::new();
        let mut buf = [0u8; 8192];
        let head_end = loop {
            if let Some(pos) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                break pos + 4;
            }
            let n = stream.read(&mut buf).ok()?;
            if n == 0 {
                return None;
            }
            data.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let path = lines.next()?.split(' ').nth(1)?.to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
            .collect();
        let length: usize =
            headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
        while data.len() < head_end + length {
            let n = stream.read(&mut buf).ok()?;
            if n == 0 {
                return None;
            }
            data.extend_from_slice(&buf[..n]);
        }
        let body = data[head_end..head_end + length].to_vec();
        let reply: &[u8] = match path.ends_with("/gone") {
            true => b"HTTP/1.1 410 Gone\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            false => b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
        };
        let _ = stream.write_all(reply);
        Some(Hit { path, headers, body })
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().expect("hits").clone()
    }

    /// Waits up to `timeout` for a request matching `wanted`.
    fn wait_for(&self, timeout: Duration, wanted: impl Fn(&Hit) -> bool) -> Option<Hit> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(hit) = self.hits().into_iter().find(&wanted) {
                return Some(hit);
            }
            if Instant::now() > deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() as i64
}

/// Checks a webhook's Standard Webhooks signature with our own verifier.
fn assert_signed(hit: &Hit, secret: &str) {
    coinorder::signature::verify(
        secret,
        hit.header("webhook-id"),
        hit.header("webhook-timestamp"),
        hit.header("webhook-signature"),
        &hit.body,
        unix_now(),
    )
    .unwrap_or_else(|e| panic!("signature of {hit:?} does not verify: {e}"));
}

/// Creates an order of 10 USD with `customer_email` through the library; returns its id.
fn order_with_email(service: &coinorder::Service, key: &str, email: &str) -> String {
    let merchant = service.authenticate(Some(key)).expect("authenticate");
    let request = coinorder::CreateOrder {
        currency: "USD".into(),
        amount: "10".parse().expect("amount"),
        title: Some("Blue mug".into()),
        customer_email: Some(email.into()),
        ..Default::default()
    };
    service.create_order(&merchant, &request).expect("create order").order.order.order_id
}

#[test]
fn webhooks_and_emails_commands_print_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let receiver = Receiver::start();
    let created =
        run_json(dir, &["keys", "create", "--user-id", "4", "--env", "sandbox", "--webhook-url", &receiver.url()]);
    let (key, secret) = (created["key"].as_str().expect("key"), created["webhook_secret"].as_str().expect("secret"));
    let service = open_service(dir, coinorder::Config::new(coinorder::Environment::Sandbox));
    let order_id = order_with_email(&service, key, "bob@customer.example");
    let paid = run_json(dir, &["sandbox", "pay", &order_id]);
    let event_id = paid["events"][0]["event_id"].as_str().expect("event id").to_string();
    assert_eq!(paid["events"][0]["type"], json!("order.paid"));

    // Listed with its delivery: pending, never attempted; the exact payload; no secrets.
    for args in [
        &["webhooks", "list", "--full"][..],
        &["webhooks", "list", "--full", "--order", &order_id],
        &["webhooks", "list", "--full", "--env", "sandbox", "--limit", "1"],
    ] {
        let output = run(dir, args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(!text.contains(secret) && !text.contains("whsec_") && !text.contains(key), "{text}");
        let listed: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
        let event = &listed[0];
        assert_eq!((&event["event_id"], &event["order_id"]), (&json!(event_id), &json!(order_id)));
        assert_eq!((&event["type"], &event["sequence"]), (&json!("order.paid"), &json!(1)));
        assert_eq!(event["delivery"]["state"], json!("pending"));
        assert_eq!(event["delivery"]["attempts"], json!(0));
        assert!(event["delivery"]["next_attempt_at"].is_string(), "{event}");
        assert_eq!(event["delivery"]["log"], json!([]));
        assert_eq!(event["payload"]["type"], json!("order.paid"));
        assert_eq!(event["payload"]["data"]["order"]["order_id"], json!(order_id));
    }
    assert_eq!(run_json(dir, &["webhooks", "list", "--env", "live"]), json!([]));
    let message = run_fails(dir, &["webhooks", "list", "--order", "00000000-0000-4000-8000-000000000000"]);
    assert!(message.contains("not found"), "{message}");

    // The e-mail waits: no SMTP configured anywhere yet.
    let emails = run_json(dir, &["emails", "list"]);
    assert_eq!(emails.as_array().map(Vec::len), Some(1), "{emails}");
    let email = &emails[0];
    assert_eq!((&email["order_id"], &email["recipient"]), (&json!(order_id), &json!("bob@customer.example")));
    assert_eq!((&email["state"], &email["attempts"]), (&json!("pending"), &json!(0)));
    let payment_url = service.payment_url(&order_id);
    assert!(email["text_body"].as_str().is_some_and(|t| t.contains(&payment_url)), "{email}");
    assert!(email["subject"].as_str().is_some_and(|s| s.contains("Blue mug")), "{email}");
    assert_eq!(run_json(dir, &["emails", "list", "--order", &order_id]).as_array().map(Vec::len), Some(1));
    assert_eq!(run_json(dir, &["emails", "list", "--env", "live"]), json!([]));
    let message = run_fails(dir, &["emails", "list", "--order", "00000000-0000-4000-8000-000000000000"]);
    assert!(message.contains("not found"), "{message}");

    // Deliver once: the webhook goes out, signed; without SMTP no e-mail is attempted.
    let report = run_json(dir, &["webhooks", "deliver"]);
    assert_eq!(
        report,
        json!({
            "webhooks": {"attempted": 1, "delivered": 1, "retrying": 0, "failed": 0, "no_target": 0},
            "emails": {"attempted": 0, "sent": 0, "retrying": 0, "failed": 0, "smtp": null},
        })
    );
    let hits = receiver.hits();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].path, "/hook");
    assert_eq!(hits[0].header("webhook-id"), Some(event_id.as_str()));
    assert_eq!(hits[0].json()["type"], json!("order.paid"));
    assert_signed(&hits[0], secret);
    let listed = run_json(dir, &["webhooks", "list", "--full", "--order", &order_id]);
    let delivery = &listed[0]["delivery"];
    assert_eq!((&delivery["state"], &delivery["attempts"]), (&json!("delivered"), &json!(1)), "{listed}");
    assert!(delivery["delivered_at"].is_string() && delivery["next_attempt_at"].is_null(), "{delivery}");
    assert_eq!(delivery["log"].as_array().map(Vec::len), Some(1));
    let attempt = &delivery["log"][0];
    assert_eq!((&attempt["status"], &attempt["url"]), (&json!(200), &json!(receiver.url())), "{attempt}");
    assert_eq!((&attempt["response_excerpt"], &attempt["error"]), (&json!("ok"), &Value::Null));
    assert!(attempt["latency_ms"].is_i64() && attempt["started_at"].is_string(), "{attempt}");

    // Redeliver: queued at once, with the same webhook-id and body.
    let requeued = run_json(dir, &["webhooks", "redeliver", &event_id]);
    assert_eq!(requeued["event_id"], json!(event_id));
    assert_eq!((&requeued["delivery"]["state"], &requeued["delivery"]["attempts"]), (&json!("pending"), &json!(0)));
    assert_eq!(requeued["delivery"]["log"].as_array().map(Vec::len), Some(1), "the log is kept: {requeued}");
    let report = run_json(dir, &["webhooks", "deliver", "--limit", "5"]);
    assert_eq!(report["webhooks"]["delivered"], json!(1), "{report}");
    let hits = receiver.hits();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[1].header("webhook-id"), Some(event_id.as_str()));
    assert_eq!(hits[1].body, hits[0].body);
    assert_signed(&hits[1], secret);
    let message = run_fails(dir, &["webhooks", "redeliver", "msg_nope"]);
    assert!(message.contains("no event") && message.contains("`coinorder webhooks list --env sandbox`"), "{message}");
    // Events of the other environment are not visible; the error says where it is.
    let message = run_fails(dir, &["webhooks", "redeliver", "--env", "live", &event_id]);
    assert!(
        message.contains("no event") && message.contains("not in live but in sandbox; add --env sandbox"),
        "{message}"
    );
    let message = run_fails(dir, &["payments", "confirm", "no-such-txid"]);
    assert!(message.contains("`coinorder payments list ORDER_ID --env sandbox`"), "{message}");

    // A rotated secret is printed once and signs from then on.
    let key_id = created["id"].as_str().expect("id");
    let rotated = run_json(dir, &["keys", "rotate-secret", key_id]);
    let new_secret = rotated["webhook_secret"].as_str().expect("new secret");
    assert!(new_secret.starts_with("whsec_") && new_secret != secret, "{rotated}");
    let listed = run(dir, &["keys", "list"]);
    assert!(!String::from_utf8_lossy(&listed.stdout).contains(new_secret));
    run_json(dir, &["webhooks", "redeliver", &event_id]);
    assert_eq!(run_json(dir, &["webhooks", "deliver"])["webhooks"]["delivered"], json!(1));
    let hits = receiver.hits();
    assert_eq!(hits.len(), 3);
    assert_signed(&hits[2], new_secret);
    assert_eq!(rotated["old_secret_signs_until"], Value::Null, "no overlap asked for");

    // Rotating with --keep-old-for: the next delivery verifies with either secret.
    let kept = run_json(dir, &["keys", "rotate-secret", key_id, "--keep-old-for", "600"]);
    let newest = kept["webhook_secret"].as_str().expect("new secret");
    let until = kept["old_secret_signs_until"].as_str().expect("until when the old one signs");
    assert!(until.ends_with('Z') && until.len() == 24, "{kept}");
    run_json(dir, &["webhooks", "redeliver", &event_id]);
    assert_eq!(run_json(dir, &["webhooks", "deliver"])["webhooks"]["delivered"], json!(1));
    let hits = receiver.hits();
    assert_eq!(hits.len(), 4);
    assert_signed(&hits[3], newest);
    assert_signed(&hits[3], new_secret);
    let message = run_fails(dir, &["keys", "rotate-secret", key_id, "--keep-old-for", "2592001"]);
    assert!(message.contains("keep_old_for: at most 2592000 seconds (30 days)"), "{message}");

    // E-mails: `emails send` needs SMTP; with it the e-mail of an open order goes out,
    // and the link to the order already paid is dropped, not sent.
    let message = run_fails(dir, &["emails", "send"]);
    assert!(message.contains("--smtp-url"), "{message}");
    let open_order = order_with_email(&service, key, "carol@customer.example");
    let open_url = service.payment_url(&open_order);
    let mut sink = SmtpSink::start();
    let sent = run_json(dir, &["emails", "send", "--smtp-url", &sink.url(), "--smtp-from", "Shop <shop@shop.example>"]);
    assert_eq!(sent, json!({"attempted": 2, "sent": 1, "retrying": 0, "failed": 1, "smtp": sink.url()}));
    let received = sink.wait_for(1, TIMEOUT);
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(received[0]["rcpt_tos"], json!(["carol@customer.example"]));
    assert_eq!(received[0]["mail_from"], json!("shop@shop.example"));
    assert!(received[0]["text"].as_str().is_some_and(|t| t.contains(&open_url)), "{:?}", received[0]);
    assert!(received[0]["html"].as_str().is_some_and(|t| t.contains(&open_url)), "{:?}", received[0]);
    let email = &run_json(dir, &["emails", "list", "--order", &open_order])[0];
    assert_eq!((&email["state"], &email["attempts"]), (&json!("sent"), &json!(1)), "{email}");
    assert!(email["sent_at"].is_string() && email["next_attempt_at"].is_null(), "{email}");
    let dropped = &run_json(dir, &["emails", "list", "--order", &order_id])[0];
    assert_eq!((&dropped["state"], &dropped["sent_at"]), (&json!("failed"), &Value::Null), "{dropped}");
    assert!(dropped["last_error"].as_str().is_some_and(|e| e.contains("PAID")), "{dropped}");
    // Nothing due any more.
    let report = run_json(dir, &["webhooks", "deliver", "--smtp-url", &sink.url()]);
    assert_eq!(report["emails"], json!({"attempted": 0, "sent": 0, "retrying": 0, "failed": 0, "smtp": sink.url()}));
    assert_eq!(report["webhooks"]["attempted"], json!(0));
    sink.stop();

    // Bad SMTP settings are refused before anything is sent.
    for (args, expected) in [
        (&["emails", "send", "--smtp-url", "http://127.0.0.1:25"][..], "smtp://"),
        (&["emails", "send", "--smtp-url", "smtp://u:hunter2@127.0.0.1:25?tls=maybe"], "tls"),
        (&["webhooks", "deliver", "--smtp-url", "smtp://127.0.0.1:25", "--smtp-from", "nobody"], "nobody"),
    ] {
        let message = run_fails(dir, args);
        assert!(message.contains(expected) && !message.contains("hunter2"), "{args:?}: {message}");
    }
    for args in [
        &["webhooks", "list", "--limit", "0"][..],
        &["webhooks", "deliver", "--webhook-timeout", "0"],
        &["webhooks", "redeliver"],
    ] {
        let output = run(dir, args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
    }
}

#[test]
fn serve_sends_webhooks_and_emails_in_the_background() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let receiver = Receiver::start();
    let mut sink = SmtpSink::start_with(0, Some("shop:p@ss w0rd"));
    let created =
        run_json(dir, &["keys", "create", "--user-id", "6", "--env", "sandbox", "--webhook-url", &receiver.url()]);
    let (key, secret) = (created["key"].as_str().expect("key"), created["webhook_secret"].as_str().expect("secret"));
    // Credentials in the URL, percent-encoded; the password is never printed.
    let smtp_url = format!("smtp://shop:p%40ss%20w0rd@127.0.0.1:{}", sink.port());
    let (mut server, addr) = ServeProcess::start(dir, &["--smtp-url", &smtp_url, "--webhook-timeout", "5"]);
    let agent = agent();

    let (status, body) = post_order(
        &agent,
        &addr,
        key,
        r#"{"currency":"USD","amount":3,"title":"Blue mug","customer_email":"carol@customer.example"}"#,
    );
    assert_eq!(status, 201, "{body}");
    let order_id = body["data"]["order_id"].as_str().expect("order_id").to_string();
    let payment_url = body["payment_url"].as_str().expect("payment_url").to_string();

    // The delivery worker e-mails the link within a bounded wait, logged in as `shop`.
    let received = sink.wait_for(1, TIMEOUT);
    assert_eq!(received.len(), 1, "no e-mail within {TIMEOUT:?}: {received:?}");
    assert_eq!(received[0]["rcpt_tos"], json!(["carol@customer.example"]));
    assert_eq!(received[0]["login"], json!("shop"));
    assert_eq!(received[0]["mail_from"], json!("noreply@localhost"));
    assert!(received[0]["text"].as_str().is_some_and(|t| t.contains(&payment_url)), "{:?}", received[0]);
    assert!(received[0]["html"].as_str().is_some_and(|t| t.contains(&payment_url)), "{:?}", received[0]);

    // Paid through the sandbox API: the order.paid webhook arrives, signed.
    let mut response = agent
        .post(format!("http://{addr}/v1/orders/{order_id}/simulate"))
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .send(r#"{"action":"pay"}"#)
        .expect("HTTP exchange");
    let text = response.body_mut().read_to_string().expect("body");
    assert_eq!(response.status().as_u16(), 200, "{text}");
    let hit = receiver
        .wait_for(TIMEOUT, |hit| hit.json()["type"] == json!("order.paid"))
        .unwrap_or_else(|| panic!("no order.paid webhook within {TIMEOUT:?}: {:?}", receiver.hits()));
    let event = hit.json();
    assert_eq!(event["data"]["order"]["order_id"], json!(order_id));
    assert_eq!(event["data"]["order"]["status"], json!("PAID"));
    assert_signed(&hit, secret);
    let listed = run_json(dir, &["webhooks", "list", "--order", &order_id]);
    let paid = listed.as_array().expect("array").iter().find(|e| e["type"] == json!("order.paid")).expect("listed");
    assert_eq!(paid["event_id"].as_str(), hit.header("webhook-id"));

    assert_eq!(server.terminate().code(), Some(0));
    let stderr = server.stderr_text();
    assert!(stderr.contains("smtp://shop:***@127.0.0.1:"), "{stderr}");
    assert!(!stderr.contains("p%40ss") && !stderr.contains("w0rd"), "the password was printed: {stderr}");
    sink.stop();
}

#[test]
fn serve_reads_a_config_file_and_flags_win() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let mut sink = SmtpSink::start();
    std::fs::create_dir(dir.join("conf")).expect("mkdir");
    let shop_db = db_arg(dir, "conf/shop.db");
    let created = run_json(dir, &["--db", &shop_db, "keys", "create", "--user-id", "3", "--env", "live"]);
    let key = created["key"].as_str().expect("key");
    run_json(dir, &["--db", &shop_db, "rates", "set", "--env", "live", "USDT", "USD", "1"]);
    let xpub = wallets::ethereum_account_xpub();
    run_json(dir, &["--db", &shop_db, "wallets", "set", "--env", "live", "USDT", &xpub]);
    // The file's `db`: a file relative to it, or on PostgreSQL the server URL.
    let file_db = if on_postgres() { shop_db.clone() } else { "shop.db".to_string() };
    let config = format!(
        "# test settings\n\
         db = \"{file_db}\"\n\
         [server]\n\
         env = \"live\"\n\
         addr = \"127.0.0.1:0\"\n\
         payment_page_url = \"https://pay.example/from-file\"\n\
         invoice_ttl = 600\n\
         threads = 2\n\
         pay_currencies = [\"usdt\"]\n\
         [webhooks]\n\
         timeout_secs = 3\n\
         allow_private = true\n\
         [smtp]\n\
         url = \"{}\"\n\
         from = \"Shop <shop@shop.example>\"\n",
        sink.url()
    );
    std::fs::write(dir.join("conf/coinorder.toml"), config).expect("write config");

    // The file names env, addr and db (relative to the file); one flag overrides it.
    let mut child = coinorder_without_db_env(dir)
        .args(["serve", "--config", "conf/coinorder.toml", "--payment-page-url", "https://pay.example/flag"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut server = ServeProcess { child };
    let (line_tx, line_rx) = mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = line_tx.send(line);
    });
    let line = line_rx.recv_timeout(TIMEOUT).unwrap_or_default();
    let addr = line
        .trim_end()
        .strip_prefix("coinorder listening on http://")
        .and_then(|rest| rest.strip_suffix(" (live)"))
        .unwrap_or_else(|| panic!("unexpected listening line {line:?}; stderr: {}", server.stop_with_kill()))
        .to_string();
    let agent = agent();
    let (status, body) = post_order(
        &agent,
        &addr,
        key,
        r#"{"currency":"USD","amount":4,"pay_currency":"USDT","title":"Blue mug","customer_email":"dan@customer.example"}"#,
    );
    assert_eq!(status, 201, "the key in conf/shop.db is accepted: {body}");
    let order_id = body["data"]["order_id"].as_str().expect("order_id");
    assert_eq!(body["payment_url"], json!(format!("https://pay.example/flag?id={order_id}")));
    let order = run_json(dir, &["--db", &shop_db, "orders", "show", "--env", "live", order_id]);
    let ttl = order["invoice"]["expired_at_t"].as_i64().expect("expiry")
        - chrono_ms(order["invoice"]["created_at"].as_str().expect("created_at"));
    assert_eq!(ttl, 600_000, "invoice_ttl from the file: {order}");
    assert_eq!(order["invoice"]["address"], json!(wallets::BIP44_ETH_ADDRESS_0), "from the USDT wallet: {order}");
    // SMTP from the file.
    let received = sink.wait_for(1, TIMEOUT);
    assert_eq!(received.len(), 1, "no e-mail within {TIMEOUT:?}");
    assert_eq!(received[0]["mail_from"], json!("shop@shop.example"));
    assert_eq!(received[0]["rcpt_tos"], json!(["dan@customer.example"]));
    assert_eq!(server.terminate().code(), Some(0));
    sink.stop();

    // The other commands read db and env from the same file.
    let from_file =
        |args: &[&str]| json_output(coinorder_without_db_env(dir).args(args).output().expect("run coinorder"), args);
    let emails = from_file(&["emails", "list", "--config", "conf/coinorder.toml"]);
    assert_eq!(emails.as_array().map(Vec::len), Some(1), "{emails}");
    assert_eq!(emails[0]["state"], json!("sent"));
    assert_eq!(from_file(&["emails", "list", "--config", "conf/coinorder.toml", "--env", "sandbox"]), json!([]));

    // Unknown keys and bad values are errors naming the key; nothing starts.
    std::fs::write(dir.join("bad.toml"), "[server]\nenv = \"live\"\nlisten = \"127.0.0.1:0\"\n").expect("write");
    for args in [
        &["serve", "--config", "bad.toml"][..],
        &["webhooks", "list", "--config", "bad.toml"],
        &["emails", "send", "--config", "bad.toml"],
    ] {
        let message = run_fails(dir, args);
        assert!(message.contains("bad.toml") && message.contains("`server.listen`"), "{args:?}: {message}");
    }
    std::fs::write(dir.join("bad.toml"), "[webhooks]\ntimeout_secs = \"soon\"\n").expect("write");
    let message = run_fails(dir, &["webhooks", "deliver", "--config", "bad.toml"]);
    assert!(message.contains("timeout_secs"), "{message}");
    let message = run_fails(dir, &["serve", "--config", "missing.toml", "--env", "sandbox"]);
    assert!(message.contains("missing.toml"), "{message}");
    // An unknown environment is a command-line error that lists the valid ones.
    let output = run(dir, &["serve", "--env", "staging"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("sandbox, live"), "{}", stderr(&output));
}

/// Milliseconds of an ISO 8601 time printed by the CLI.
fn chrono_ms(iso: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(iso).expect("ISO time").timestamp_millis()
}

#[test]
fn help_documents_webhooks_emails_and_serve_settings() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (args, words) in [
        (&["--help"][..], &["webhooks", "emails", "--smtp-url"][..]),
        (&["webhooks", "--help"], &["list", "redeliver", "deliver"]),
        (&["webhooks", "list", "--help"], &["--order", "--limit", "--env", "--config", "attempt", "last error"]),
        (&["webhooks", "deliver", "--help"], &["--limit", "--smtp-url", "--smtp-from", "--config"]),
        (&["emails", "--help"], &["list", "send"]),
        (&["emails", "list", "--help"], &["--order", "--limit", "--env"]),
        (&["emails", "send", "--help"], &["--smtp-url", "--smtp-from", "--limit"]),
        (&["keys", "rotate-secret", "--help"], &["webhook_secret", "once"]),
        (
            &["serve", "--help"],
            &[
                "--config",
                "--smtp-url",
                "smtps://",
                "tls=required",
                "--smtp-from",
                "coinorder <noreply@localhost>",
                "--webhook-timeout",
                "--allow-private-webhooks",
                "--allow-open-permissions",
                "webhooks",
                "e-mails",
            ],
        ),
    ] {
        let output = run(dir.path(), args);
        assert!(output.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&output.stdout);
        for word in words {
            assert!(text.contains(word), "{args:?} lacks {word}: {text}");
        }
    }
}

#[test]
fn live_refuses_private_webhook_targets_unless_allowed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let receiver = Receiver::start();
    // Refused up front in live: a key naming 127.0.0.1.
    let message =
        run_fails(dir, &["keys", "create", "--user-id", "2", "--env", "live", "--webhook-url", &receiver.url()]);
    assert!(message.starts_with("error: webhook_url") && message.contains("non-public"), "{message}");
    let created = run_json(dir, &["keys", "create", "--user-id", "2", "--env", "live"]);
    let (key, key_id) = (created["key"].as_str().expect("key"), created["id"].as_str().expect("id"));
    let message = run_fails(dir, &["keys", "set-webhook", key_id, &receiver.url()]);
    assert!(message.contains("non-public"), "{message}");
    // A host that allows private targets sets it (as if its DNS answer changed later).
    let mut lenient = coinorder::Config::new(coinorder::Environment::Live);
    lenient.allow_private_webhook_targets = true;
    let service = open_service(dir, lenient);
    service.set_key_webhook_url(key_id, Some(&receiver.url())).expect("lenient service sets the target");
    run_json(dir, &["rates", "set", "--env", "live", "USDT", "USD", "1"]);
    let order_id = order_with_email(&service, key, "erin@customer.example");
    let merchant = service.authenticate(Some(key)).expect("authenticate");
    service.cancel_order(&merchant, &order_id).expect("cancel");
    let event_id = service.order_events(&order_id).expect("events")[0].event_id.clone();

    // 127.0.0.1 is refused in live: given up at once, nothing sent.
    let report = run_json(dir, &["webhooks", "deliver", "--env", "live"]);
    assert_eq!(report["webhooks"], json!({"attempted": 1, "delivered": 0, "retrying": 0, "failed": 1, "no_target": 0}));
    assert!(receiver.hits().is_empty());
    let listed = run_json(dir, &["webhooks", "list", "--full", "--env", "live", "--order", &order_id]);
    assert_eq!(listed[0]["delivery"]["state"], json!("failed"), "{listed}");
    let error = listed[0]["delivery"]["last_error"].as_str().expect("last_error");
    assert!(error.contains("refused"), "{error}");

    // Allowed by the flag: redelivered and received.
    run_json(dir, &["webhooks", "redeliver", "--env", "live", &event_id]);
    let report = run_json(dir, &["webhooks", "deliver", "--env", "live", "--allow-private-webhooks"]);
    assert_eq!(report["webhooks"]["delivered"], json!(1), "{report}");
    let hits = receiver.hits();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].json()["type"], json!("order.cancelled"));
    assert_signed(&hits[0], created["webhook_secret"].as_str().expect("secret"));
}

// ----- Payments fed in by the host, and no accidental databases -----

#[test]
fn payments_commands_feed_live_orders() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    run_json(dir, &["rates", "set", "--env", "live", "USDT", "USD", "1"]);
    let shop = Shop::open(dir, coinorder::Environment::Live);
    let order_id = shop.order("19.99");
    let txid = "0x5c504ed432cb51138bcf09aa5e8a410dd4a1e204ef84bfed1be16dfba1b22060";
    assert_eq!(run_json(dir, &["payments", "list", "--env", "live", &order_id]), json!([]));

    // Seen on chain, not yet final: PENDING.
    let record = ["payments", "record", "--env", "live", order_id.as_str(), txid, "19.99", "--unconfirmed"];
    let seen = run_json(dir, &record);
    assert_eq!((&seen["txid"], &seen["duplicate"]), (&json!(txid), &json!(false)), "{seen}");
    assert_eq!(seen["payment"]["state"], json!("unconfirmed"));
    assert_eq!(number_text(&seen["payment"]["amount"]), "19.99");
    assert_eq!(seen["payment"]["currency"], json!("USDT"));
    assert_eq!(seen["payment"]["counts"], json!(true));
    assert_eq!(seen["events"].as_array().map(Vec::len), Some(1), "{seen}");
    assert_eq!(seen["events"][0]["type"], json!("order.pending"));
    assert_eq!((&seen["order"]["order_id"], &seen["order"]["status"]), (&json!(order_id), &json!("PENDING")));
    assert_eq!(seen["order"]["environment"], json!("live"));

    // The watcher reports it again on its next run: a no-op.
    let again = run_json(dir, &record);
    assert_eq!((&again["duplicate"], &again["events"]), (&json!(true), &json!([])), "{again}");
    assert_eq!(again["order"]["status"], json!("PENDING"));
    assert_eq!(again["payment"]["state"], json!("unconfirmed"));

    let listed = run_json(dir, &["payments", "list", "--env", "live", &order_id]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!((&listed[0]["txid"], &listed[0]["state"]), (&json!(txid), &json!("unconfirmed")));
    assert_eq!(number_text(&listed[0]["amount"]), "19.99");
    assert_eq!(listed[0]["settled_at"], Value::Null);

    // Final on chain: PAID.
    let confirmed = run_json(dir, &["payments", "confirm", "--env", "live", txid]);
    assert_eq!((&confirmed["txid"], &confirmed["duplicate"]), (&json!(txid), &json!(false)));
    assert_eq!(confirmed["payment"]["state"], json!("confirmed"));
    assert_eq!(confirmed["events"][0]["type"], json!("order.paid"));
    assert_eq!((&confirmed["order"]["status"], &confirmed["invoice"]["status"]), (&json!("PAID"), &json!("PAID")));
    assert_eq!(number_text(&confirmed["invoice"]["receive_amount"]), "19.99");
    assert_eq!(confirmed["invoice"]["receive_currency"], json!("USD"));

    // Repeats are no-ops; contradictions are refused.
    let again = run_json(dir, &["payments", "confirm", "--env", "live", txid]);
    assert_eq!((&again["duplicate"], &again["events"]), (&json!(true), &json!([])));
    let again = run_json(dir, &["payments", "record", "--env", "live", &order_id, txid, "19.99"]);
    assert_eq!((&again["duplicate"], &again["events"]), (&json!(true), &json!([])), "{again}");
    assert_eq!(again["order"]["status"], json!("PAID"));
    let message = run_fails(dir, &["payments", "record", "--env", "live", &order_id, txid, "20"]);
    assert!(message.starts_with("error: amount") && message.contains("already recorded"), "{message}");
    let message = run_fails(dir, &["payments", "reject", "--env", "live", txid]);
    assert!(message.contains("already confirmed"), "{message}");

    let listed = run_json(dir, &["payments", "list", "--env", "live", &order_id]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "still one payment: {listed}");
    assert_eq!(listed[0]["state"], json!("confirmed"));
    assert!(listed[0]["settled_at"].is_string(), "{listed}");
    let shown = run_json(dir, &["orders", "show", "--env", "live", &order_id]);
    let types: Vec<&str> =
        shown["events"].as_array().expect("events").iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types, ["order.pending", "order.paid"]);
    assert_eq!(shop.service.order(&order_id).expect("order").order.status, coinorder::OrderStatus::Paid);

    // The live payment is invisible to the sandbox.
    let message = run_fails(dir, &["payments", "list", "--env", "sandbox", &order_id]);
    assert!(message.contains("not found"), "{message}");
    let message = run_fails(dir, &["payments", "confirm", "--env", "sandbox", txid]);
    assert!(message.contains("no payment"), "{message}");

    // A rejected payment fails the order; a confirmed one pays at once.
    let failing = shop.order("5");
    run_json(dir, &["payments", "record", "--env", "live", &failing, "tx-dropped", "5", "--unconfirmed"]);
    let rejected = run_json(dir, &["payments", "reject", "--env", "live", "tx-dropped"]);
    assert_eq!(rejected["payment"]["state"], json!("rejected"));
    assert_eq!(
        (&rejected["events"][0]["type"], &rejected["order"]["status"]),
        (&json!("order.failed"), &json!("FAILED"))
    );
    let direct = shop.order("5");
    let paid = run_json(dir, &["payments", "record", "--env", "live", &direct, "tx-final", "5"]);
    assert_eq!(paid["payment"]["state"], json!("confirmed"));
    assert_eq!((&paid["events"][0]["type"], &paid["order"]["status"]), (&json!("order.paid"), &json!("PAID")));

    // Amounts are exact decimals in the invoice's coin; unknown ids and txids are errors.
    let other = shop.order("5");
    let message = run_fails(dir, &["payments", "record", "--env", "live", &other, "tx-x", "0.0000001"]);
    assert!(message.starts_with("error: amount") && message.contains("6 decimal places"), "{message}");
    for args in [
        &["payments", "record", "--env", "live", other.as_str(), "tx-x", "1,5"][..],
        &["payments", "record", "--env", "live", other.as_str(), "tx-x", "abc"],
        &["payments", "record", "--env", "live", other.as_str(), "tx-x"],
        &["payments", "confirm", "--env", "live"],
    ] {
        let output = run(dir, args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
    }
    let message = run_fails(dir, &["payments", "record", "--env", "live", &other, "tx-x", "0"]);
    assert!(message.starts_with("error: amount"), "{message}");
    let message = run_fails(dir, &["payments", "confirm", "--env", "live", "tx-nope"]);
    assert!(message.contains("no payment"), "{message}");
    let message =
        run_fails(dir, &["payments", "record", "--env", "live", "00000000-0000-4000-8000-000000000000", "tx-y", "1"]);
    assert!(message.contains("not found"), "{message}");
    assert_eq!(run_json(dir, &["payments", "list", "--env", "live", &other]), json!([]));
}

#[test]
fn payments_commands_work_in_the_sandbox_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let shop = Shop::open(dir, coinorder::Environment::Sandbox);
    let order_id = shop.order("10");
    let part = run_json(dir, &["payments", "record", "--env", "sandbox", &order_id, "tx-1", "4"]);
    assert_eq!(part["order"]["status"], json!("PENDING"), "confirmed but short: {part}");
    let rest = run_json(dir, &["payments", "record", "--env", "sandbox", &order_id, "tx-2", "6"]);
    assert_eq!(rest["order"]["status"], json!("PAID"));
    let listed = run_json(dir, &["payments", "list", "--env", "sandbox", &order_id]);
    let txids: Vec<&str> = listed.as_array().expect("array").iter().filter_map(|p| p["txid"].as_str()).collect();
    assert_eq!(txids, ["tx-1", "tx-2"]);
    let message = run_fails(dir, &["payments", "list", "--env", "live", &order_id]);
    assert!(message.contains("not found"), "{message}");
}

#[test]
fn help_documents_payments() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (args, words) in [
        (&["--help"][..], &["payments", "payments record"][..]),
        (&["payments", "--help"], &["record", "confirm", "reject", "list", "idempotent", "live"]),
        (
            &["payments", "record", "--help"],
            &["--env", "--unconfirmed", "ORDER_ID", "TXID", "AMOUNT", "exact decimal", "PENDING", "PAID", "no-op"],
        ),
        (&["payments", "confirm", "--help"], &["--env", "TXID", "PAID"]),
        (&["payments", "reject", "--help"], &["--env", "TXID", "FAILED"]),
        (&["payments", "list", "--help"], &["--env", "ORDER_ID", "state"]),
    ] {
        let output = run(dir.path(), args);
        assert!(output.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&output.stdout);
        for word in words {
            assert!(text.contains(word), "{args:?} lacks {word}: {text}");
        }
    }
}

#[test]
fn commands_never_create_a_database_by_accident() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let expected = |path: &str| {
        format!("error: no database at {path} (create one with `coinorder keys create` or `coinorder serve`)\n")
    };
    let id = "00000000-0000-4000-8000-000000000000";
    for args in [
        &["keys", "list"][..],
        &["keys", "activate", "key_x"],
        &["keys", "deactivate", "key_x"],
        &["keys", "delete", "key_x"],
        &["keys", "set-webhook", "key_x", "https://shop.example/hook"],
        &["keys", "clear-webhook", "key_x"],
        &["keys", "rotate-secret", "key_x"],
        &["rates", "list", "--env", "live"],
        &["rates", "delete", "--env", "live", "BTC", "USD"],
        &["sandbox", "pay", id],
        &["sandbox", "confirm", "tx"],
        &["sandbox", "reject", "tx"],
        &["sandbox", "cancel", id],
        &["sandbox", "expire", id],
        &["orders", "show", "--env", "live", id],
        &["orders", "mark-paid", "--env", "live", id],
        &["orders", "cancel", "--env", "live", id],
        &["payments", "record", "--env", "live", id, "tx", "1"],
        &["payments", "confirm", "--env", "live", "tx"],
        &["payments", "reject", "--env", "live", "tx"],
        &["payments", "list", "--env", "live", id],
        &["webhooks", "list"],
        &["webhooks", "redeliver", "msg_x"],
        &["webhooks", "deliver"],
        &["emails", "list"],
        &["emails", "send", "--smtp-url", "smtp://127.0.0.1:9"],
    ] {
        let output = run(dir, &[&["--db", "shpo.db"][..], args].concat());
        assert_eq!(output.status.code(), Some(1), "{args:?}: {}", stderr(&output));
        assert_eq!(stderr(&output), expected("shpo.db"), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
    // The default path, COINORDER_DB, and `db` from a settings file alike (files on
    // either backend: nothing here names a server).
    let output = coinorder_without_db_env(dir).args(["keys", "list"]).output();
    assert_eq!(stderr(&output.expect("run")), expected("./coinorder.db"));
    let output = coinorder(dir).env("COINORDER_DB", "env.db").args(["orders", "show", "--env", "live", id]).output();
    assert_eq!(stderr(&output.expect("run")), expected("env.db"));
    std::fs::write(dir.join("settings.toml"), "db = \"from-file.db\"\n").expect("write settings");
    let output = coinorder_without_db_env(dir).args(["webhooks", "list", "--config", "settings.toml"]).output();
    assert_eq!(stderr(&output.expect("run")), expected("./from-file.db"), "relative to the settings file");
    // Nothing was created: neither a database nor its key file.
    let mut left: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["settings.toml"], "files created by read-only commands");

    // A server's database is never created either, not even by `serve`: a mistyped name
    // is an error naming it (quickly: only `serve` reads `limits.busy_timeout_ms`).
    if let Some(server) = postgres_server() {
        let base = server.rsplit_once('/').map_or(server.as_str(), |(base, _)| base);
        let name = format!("t{}_mistyped", std::process::id());
        let mistyped = format!("{base}/{name}");
        std::fs::write(dir.join("fast.toml"), "[limits]\nbusy_timeout_ms = 1000\n").expect("write config");
        let output = serve_until_exit(dir, &["--db", &mistyped, "--config", "fast.toml"]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        assert!(
            stderr(&output).starts_with(&format!("error: cannot open database {mistyped}: ")),
            "{}",
            stderr(&output)
        );
        let found = backend::RawDb::open(Path::new(&server))
            .strings(&format!("SELECT datname FROM pg_database WHERE datname = '{name}'"));
        assert_eq!(found, Vec::<String>::new(), "serve created {mistyped}");
    }

    // The commands that make a database still do, and then the others work on it.
    run_json(dir, &["--db", &db_arg(dir, "rates.db"), "rates", "set", "--env", "live", "BTC", "USD", "1"]);
    assert!(database_created(&db_named(dir, "rates.db")));
    // On PostgreSQL the key file is the shared one, which coinorder never creates.
    assert!(on_postgres() || dir.join("rates.db.key").exists());
    assert_eq!(run_json(dir, &["--db", &db_arg(dir, "rates.db"), "keys", "list"]), json!([]));
    run_json(dir, &["--db", &db_arg(dir, "keys.db"), "keys", "create", "--user-id", "1", "--env", "sandbox"]);
    assert_eq!(run_json(dir, &["--db", &db_arg(dir, "keys.db"), "rates", "list", "--env", "live"]), json!([]));
    let (mut server, _addr) = ServeProcess::start(dir, &["--db", &db_arg(dir, "served.db")]);
    assert!(database_created(&db_named(dir, "served.db")), "serve creates its database");
    assert_eq!(server.terminate().code(), Some(0));
    assert_eq!(run_json(dir, &["--db", &db_arg(dir, "served.db"), "webhooks", "list"]), json!([]));
}

// ----- File permissions (serve refuses an open database or key file) -----

/// Runs `serve` with `args`, which must exit on its own within [`TIMEOUT`] (a refusal
/// must not hang the test if the server starts after all); returns its output.
fn serve_until_exit(dir: &Path, args: &[&str]) -> Output {
    let mut child = coinorder(dir)
        .args(["serve", "--env", "sandbox", "--addr", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    let deadline = Instant::now() + TIMEOUT;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().expect("output");
            panic!("serve {args:?} kept running; stdout: {}", String::from_utf8_lossy(&output.stdout));
        }
        thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[cfg(unix)]
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("metadata").permissions().mode() & 0o777
}

#[cfg(unix)]
#[test]
fn serve_refuses_a_database_open_to_others() {
    if on_postgres() {
        return; // file modes: a database on a server has none (its key file's: the next test)
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    // A fresh database and key file are private, so serve starts on them.
    let (mut server, _addr) = ServeProcess::start(dir, &["--db", "shop.db"]);
    assert_eq!(server.terminate().code(), Some(0));
    assert_eq!((mode_of(&dir.join("shop.db")), mode_of(&dir.join("shop.db.key"))), (0o600, 0o600));

    set_mode(&dir.join("shop.db"), 0o644);
    let output = serve_until_exit(dir, &["--db", "shop.db"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(output.stdout.is_empty(), "no listening line: {}", String::from_utf8_lossy(&output.stdout));
    assert_eq!(
        stderr(&output),
        "error: permissions 0644 for 'shop.db' are too open: the database holds your orders and the key \
         file your webhook secrets; chmod 600 shop.db shop.db.key, or pass --allow-open-permissions\n"
    );
    // Refused before opening: the mode is as the user left it, nothing was repaired behind
    // their back.
    assert_eq!(mode_of(&dir.join("shop.db")), 0o644);

    // The opt-out, as a flag or in the settings file.
    let (mut server, _addr) = ServeProcess::start(dir, &["--db", "shop.db", "--allow-open-permissions"]);
    assert_eq!(server.terminate().code(), Some(0));
    std::fs::write(dir.join("open.toml"), "[server]\nallow_open_permissions = true\n").expect("write config");
    let (mut server, _addr) = ServeProcess::start(dir, &["--db", "shop.db", "--config", "open.toml"]);
    assert_eq!(server.terminate().code(), Some(0));
    std::fs::write(dir.join("closed.toml"), "[server]\nallow_open_permissions = false\n").expect("write config");
    let output = serve_until_exit(dir, &["--db", "shop.db", "--config", "closed.toml"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("too open"), "{}", stderr(&output));

    // Group access alone is too much as well; owner-only read is fine.
    set_mode(&dir.join("shop.db"), 0o640);
    let message = stderr(&serve_until_exit(dir, &["--db", "shop.db"]));
    assert!(message.starts_with("error: permissions 0640 for 'shop.db' are too open"), "{message}");
    set_mode(&dir.join("shop.db"), 0o600);
    let (mut server, _addr) = ServeProcess::start(dir, &["--db", "shop.db"]);
    assert_eq!(server.terminate().code(), Some(0));
}

#[cfg(unix)]
#[test]
fn serve_refuses_a_key_file_open_to_others() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    run_json(dir, &["keys", "create", "--user-id", "1", "--env", "sandbox"]);
    if on_postgres() {
        // The shared key file (a copy: others use it) is checked alone: the database is
        // no file. A path with a space is quoted so the chmod can be pasted.
        std::fs::create_dir(dir.join("my keys")).expect("mkdir");
        for (name, shown) in [("shared.key", "shared.key"), ("my keys/shared", "'my keys/shared'")] {
            std::fs::copy(cli_key_file().expect("key file"), dir.join(name)).expect("copy the key file");
            set_mode(&dir.join(name), 0o644);
            let output = serve_until_exit(dir, &["--secret-key-file", name]);
            assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
            let message = stderr(&output);
            assert!(message.starts_with(&format!("error: permissions 0644 for '{name}' are too open: ")), "{message}");
            assert!(message.contains(&format!("chmod 600 {shown}, or pass --allow-open-permissions")), "{message}");
            // Private again, it serves.
            set_mode(&dir.join(name), 0o600);
            let (mut server, _addr) = ServeProcess::start(dir, &["--secret-key-file", name]);
            assert_eq!(server.terminate().code(), Some(0));
        }
        return;
    }
    set_mode(&dir.join("coinorder.db.key"), 0o644);
    let output = serve_until_exit(dir, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.starts_with("error: permissions 0644 for './coinorder.db.key' are too open: "),
        "names the key file, as the database is fine: {message}"
    );
    assert!(message.contains("chmod 600 ./coinorder.db ./coinorder.db.key,"), "{message}");
    assert!(message.contains("--allow-open-permissions"), "{message}");

    // Both open: both named. A path with a space is quoted so the chmod can be pasted.
    std::fs::create_dir(dir.join("my shop")).expect("mkdir");
    run_json(dir, &["--db", "my shop/db", "keys", "create", "--user-id", "1", "--env", "sandbox"]);
    set_mode(&dir.join("my shop/db"), 0o666);
    set_mode(&dir.join("my shop/db.key"), 0o604);
    let message = stderr(&serve_until_exit(dir, &["--db", "my shop/db"]));
    assert!(
        message.starts_with(
            "error: permissions 0666 for 'my shop/db' and 0604 for 'my shop/db.key' are too open: the database"
        ),
        "{message}"
    );
    assert!(message.contains("chmod 600 'my shop/db' 'my shop/db.key', or pass"), "{message}");
}

/// The rows of a `--format table` listing: its lines split on runs of two spaces.
fn table_rows(dir: &Path, args: &[&str]) -> Vec<Vec<String>> {
    let output = run(dir, args);
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| line.split("  ").map(str::trim).filter(|cell| !cell.is_empty()).map(String::from).collect())
        .collect()
}

#[test]
fn operators_list_orders_and_webhooks_and_trigger_every_event_type() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    // No --env anywhere: the sandbox is the default of every command.
    let first = run_json(dir, &["keys", "create", "--user-id", "1"]);
    assert_eq!(first["environment"], json!("sandbox"));
    run_json(dir, &["keys", "create", "--user-id", "2"]);
    let mut emitted = std::collections::BTreeMap::new();
    for (event_type, user) in [
        ("order.pending", "2"),
        ("order.paid", "1"),
        ("order.failed", "1"),
        ("order.cancelled", "1"),
        ("order.expired", "1"),
        ("order.paid_late", "1"),
    ] {
        let triggered = run_json(dir, &["sandbox", "trigger", event_type, "--user-id", user]);
        let types: Vec<&str> =
            triggered["events"].as_array().expect("events").iter().filter_map(|e| e["type"].as_str()).collect();
        assert!(types.contains(&event_type), "{event_type}: {types:?}");
        assert_eq!(triggered["order"]["user_id"], json!(user.parse::<i64>().expect("user")));
        emitted.insert(event_type, triggered["order"]["order_id"].as_str().expect("id").to_string());
    }
    let message = run_fails(dir, &["sandbox", "trigger", "order.paid", "--user-id", "9"]);
    assert!(message.contains("keys create --user-id 9"), "the next command: {message}");
    let output = run(dir, &["sandbox", "trigger", "order.refunded"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("order.paid_late"), "lists the valid types: {}", stderr(&output));

    // orders list: every merchant's, newest first, with filters.
    let all = run_json(dir, &["orders", "list"]);
    let ids: Vec<&str> = all.as_array().expect("array").iter().filter_map(|o| o["order_id"].as_str()).collect();
    assert_eq!(ids.len(), 6, "{all}");
    assert_eq!(ids[0], emitted["order.paid_late"], "newest first");
    assert_eq!(ids[5], emitted["order.pending"]);
    let paid = run_json(dir, &["orders", "list", "--status", "PAID"]);
    assert_eq!(paid.as_array().map(Vec::len), Some(1), "{paid}");
    assert_eq!(paid[0]["order_id"], json!(emitted["order.paid"]));
    let of_two = run_json(dir, &["orders", "list", "--user-id", "2"]);
    assert_eq!(of_two.as_array().map(Vec::len), Some(1));
    assert_eq!(of_two[0]["status"], json!("PENDING"));
    assert_eq!(run_json(dir, &["orders", "list", "--limit", "2"]).as_array().map(Vec::len), Some(2));
    let future = run_json(dir, &["orders", "list", "--since", "2999-01-01T00:00:00Z"]);
    assert_eq!(future, json!([]));
    let output = run(dir, &["orders", "list", "--status", "SHIPPED"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("CANCELLED"), "lists the valid states: {}", stderr(&output));
    let rows = table_rows(dir, &["orders", "list", "--format", "table"]);
    assert_eq!(rows.len(), 7, "a header and a line per order: {rows:?}");
    assert!(rows[0].contains(&"STATUS".to_string()) && rows[0].contains(&"ORDER".to_string()), "{:?}", rows[0]);
    assert!(rows[1].contains(&emitted["order.paid_late"]) && rows[1].contains(&"EXPIRED".to_string()), "{:?}", rows[1]);

    // webhooks list: one compact line per event, the payload only with --full.
    let events = run_json(dir, &["webhooks", "list"]);
    let events = events.as_array().expect("array");
    assert!(events.len() >= 7, "{events:?}");
    for event in events {
        assert!(event.get("payload").is_none() && event["delivery"].get("log").is_none(), "compact: {event}");
        assert_eq!(event["delivery"]["state"], json!("pending"), "not attempted yet: {event}");
        assert!(event["delivery"].get("last_status").is_some(), "{event}");
    }
    let full = run_json(dir, &["webhooks", "list", "--full", "--type", "order.paid"]);
    let full = full.as_array().expect("array");
    assert_eq!(full.len(), 1, "{full:?}");
    assert_eq!(full[0]["payload"]["type"], json!("order.paid"));
    assert_eq!(full[0]["order_id"], json!(emitted["order.paid"]));
    assert_eq!(run_json(dir, &["webhooks", "list", "--state", "delivered"]), json!([]));
    let rows = table_rows(dir, &["webhooks", "list", "--format", "table", "--type", "order.paid_late"]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0], ["TIME", "EVENT", "TYPE", "ORDER", "STATE", "ATTEMPTS", "LAST STATUS"]);
    assert_eq!(rows[1][2..], ["order.paid_late", &emitted["order.paid_late"], "pending", "0", "-"]);
    for listing in [&["keys", "list"][..], &["rates", "list"], &["emails", "list"]] {
        let mut args = listing.to_vec();
        args.extend(["--format", "table"]);
        let rows = table_rows(dir, &args);
        assert!(
            !rows.is_empty() && rows[0].iter().all(|h| h.chars().all(|c| c.is_ascii_uppercase() || c == ' ')),
            "{args:?}: {rows:?}"
        );
    }
}

#[test]
fn sandbox_advance_expires_what_falls_due_and_env_comes_from_one_place() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let shop = Shop::open(dir, coinorder::Environment::Sandbox);
    let order_id = shop.order("10");
    let early = run_json(dir, &["sandbox", "advance", "--minutes", "5"]);
    assert_eq!((early["expired"].clone(), early["failed"].clone()), (json!(0), json!(0)), "{early}");
    assert_eq!(run_json(dir, &["orders", "show", &order_id])["order"]["status"], json!("NEW"));
    // The default quote lasts 30 minutes.
    let late = run_json(dir, &["sandbox", "advance", "--minutes", "31"]);
    assert_eq!(late["expired"], json!(1), "{late}");
    assert_eq!(run_json(dir, &["orders", "show", &order_id])["order"]["status"], json!("EXPIRED"));

    // --env, COINORDER_ENV and the settings file's env all choose the same thing, with
    // the flag first; every command takes it before or after its name.
    std::fs::write(dir.join("live.toml"), "[server]\nenv = \"live\"\n").expect("write");
    let set = run_json(dir, &["rates", "set", "--config", "live.toml", "USDT", "USD", "1"]);
    assert_eq!(set["environment"], json!("live"));
    assert_eq!(run_json(dir, &["--config", "live.toml", "orders", "list"]), json!([]));
    assert_eq!(
        run_json(dir, &["orders", "list", "--config", "live.toml", "--env", "sandbox"]).as_array().map(Vec::len),
        Some(1)
    );
    let output = coinorder(dir).args(["orders", "list"]).env("COINORDER_ENV", "live").output().expect("run");
    assert_eq!(json_output(output, &["orders", "list"]), json!([]));
    let message = run_fails(dir, &["orders", "show", "--config", "live.toml", &order_id]);
    assert!(message.contains("add --env sandbox") && message.contains(&order_id), "{message}");

    // The merchant's display name, per key, for the payment page.
    let key_id = run_json(dir, &["keys", "list"])[0]["id"].as_str().expect("key id").to_string();
    let named = run_json(dir, &["keys", "set-name", &key_id, "Acme Coffee"]);
    assert_eq!(named["display_name"], json!("Acme Coffee"));
    let message = run_fails(dir, &["keys", "set-name", &key_id, " "]);
    assert!(message.contains("display_name"), "{message}");
    assert_eq!(run_json(dir, &["keys", "clear-name", &key_id])["display_name"], json!(null));
}

/// Waits until `order_id`'s event of `event_type` shows in the event log (the log polls
/// every 500 ms), then stops `serve`; its stderr.
fn serve_log_after(mut server: ServeProcess, wait: Duration) -> String {
    thread::sleep(wait);
    assert_eq!(server.terminate().code(), Some(0));
    server.stderr_text()
}

#[test]
fn serve_logs_requests_events_attempts_and_expiry_never_a_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let created = run_json(dir, &["keys", "create", "--user-id", "4"]);
    let key = created["key"].as_str().expect("key").to_string();
    let hint = created["key_hint"].as_str().expect("hint").to_string();
    let key_id = created["id"].as_str().expect("id").to_string();
    // Webhooks go to a port nothing listens on: each attempt fails and is logged, without
    // the credentials the URL carries.
    run_json(dir, &["keys", "set-webhook", &key_id, "http://shop:s3cretPW@127.0.0.1:9/hook?token=qTok123"]);

    // So does the payment-link e-mail, to an SMTP port nothing listens on either.
    let (server, addr) = ServeProcess::start(dir, &["--invoice-ttl", "1", "--smtp-url", "smtp://127.0.0.1:9"]);
    let agent = agent();
    let order = r#"{"currency":"USD","amount":5,"customer_email":"buyer@shop.example"}"#;
    let (status, body) = post_order(&agent, &addr, &key, order);
    assert_eq!(status, 201, "{body}");
    let order_id = body["data"]["order_id"].as_str().expect("id").to_string();
    let listed = agent.get(&format!("http://{addr}/v1/orders?limit=1")).header("x-api-key", &key).call();
    assert!(listed.is_ok());
    let refused = agent.get(&format!("http://{addr}/v1/orders")).header("x-api-key", "not-a-key").call();
    assert!(refused.is_ok(), "an answer, 401");
    // A client that pastes its key into the path: the log shows the key's hint there.
    let pasted = agent.get(&format!("http://{addr}/v1/orders/{key}")).header("x-api-key", &key).call();
    assert!(pasted.is_ok(), "an answer, 400");
    // The order expires after a second; its order.expired event is logged and sent.
    let log = serve_log_after(server, Duration::from_millis(3_500));

    assert!(!log.contains(&key), "the key itself is never logged: {log}");
    assert!(log.contains(&format!("GET /v1/orders/{hint} -> 400 in ")), "{log}");
    assert!(log.contains("POST /v1/orders -> 201 in ") && log.contains(&format!("key={hint}")), "{log}");
    assert!(log.contains("GET /v1/orders -> 200 in "), "the path without its query: {log}");
    assert!(!log.contains("limit=1"), "{log}");
    assert!(log.contains("GET /v1/orders -> 401 in ") && log.contains("key=malformed"), "{log}");
    assert!(log.contains("event ") && log.contains(&format!("order.expired order {order_id} NEW -> EXPIRED")), "{log}");
    assert!(log.contains("expiry 1 expired, 0 failed"), "{log}");
    assert!(
        log.contains("webhook msg_")
            && log.contains("attempt 1 http://shop:***@127.0.0.1:9/hook?token=*** ->")
            && log.contains("(retrying)"),
        "{log}"
    );
    assert!(!log.contains("s3cretPW") && !log.contains("qTok123"), "{log}");
    // The e-mail's attempt, with the reason it was not sent, never the customer's address.
    assert!(log.contains(" email ") && log.contains(&format!("attempt 1 for order {order_id} -> ")), "{log}");
    assert!(!log.contains("buyer@shop.example"), "{log}");
}

#[test]
fn serve_logs_json_lines_or_nothing_with_quiet() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let created = run_json(dir, &["keys", "create", "--user-id", "4"]);
    let key = created["key"].as_str().expect("key").to_string();

    let (server, addr) = ServeProcess::start(dir, &["--log-format", "json"]);
    let (status, _) = post_order(&agent(), &addr, &key, r#"{"currency":"USD","amount":5}"#);
    assert_eq!(status, 201);
    run_json(dir, &["sandbox", "trigger", "order.paid"]);
    let log = serve_log_after(server, Duration::from_millis(1_500));
    // Every line, the shutdown's included, is one JSON object.
    let lines: Vec<Value> =
        log.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"))).collect();
    assert!(
        lines
            .iter()
            .any(|l| l["kind"] == "notice" && l["message"].as_str().is_some_and(|m| m.starts_with("shutting down"))),
        "{log}"
    );
    let request = lines.iter().find(|l| l["kind"] == "request").unwrap_or_else(|| panic!("{log}"));
    assert_eq!(
        (&request["method"], &request["path"], &request["status"]),
        (&json!("POST"), &json!("/v1/orders"), &json!(201))
    );
    assert!(
        request["latency_ms"].is_number() && request["request_id"].as_str().is_some_and(|id| id.starts_with("req_"))
    );
    assert_eq!(request["key"], created["key_hint"]);
    let event =
        lines.iter().find(|l| l["kind"] == "event" && l["type"] == "order.paid").unwrap_or_else(|| panic!("{log}"));
    assert_eq!(event["status"], json!("PAID"));
    assert!(lines.iter().any(|l| l["kind"] == "notice"), "{log}");
    assert!(!log.contains(&key));

    // --quiet: no request or event, nor an attempt delivered; a webhook given up on is
    // a failure, and is logged.
    let receiver = Receiver::start();
    let (server, addr) = ServeProcess::start(dir, &["--quiet"]);
    let (status, _) = post_order(&agent(), &addr, &key, r#"{"currency":"USD","amount":5}"#);
    assert_eq!(status, 201);
    run_json(dir, &["sandbox", "trigger", "order.paid"]);
    let gone = format!("http://{}/hook/gone", receiver.addr);
    let (status, body) =
        post_order(&agent(), &addr, &key, &json!({"currency": "USD", "amount": 5, "webhook_url": gone}).to_string());
    assert_eq!(status, 201, "{body}");
    let order_id = body["data"]["order_id"].as_str().expect("order id");
    run_json(dir, &["sandbox", "cancel", order_id]);
    let log = serve_log_after(server, Duration::from_millis(2_500));
    assert!(!log.contains("POST /v1/orders") && !log.contains(" event "), "--quiet: {log}");
    assert!(
        log.contains(" webhook msg_") && log.contains("/hook/gone -> 410 in ") && log.contains("(failed)"),
        "{log}"
    );
    assert!(!log.contains("(delivered)") && !log.contains("(retrying)"), "--quiet: {log}");
}

#[test]
fn live_serve_refuses_coins_without_a_wallet_and_warns_about_rates_and_chains() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    run_json(dir, &["rates", "set", "--env", "live", "USDT", "USD", "1"]);
    let message = run_fails(dir, &["serve", "--env", "live", "--addr", "127.0.0.1:0"]);
    assert!(message.contains("live accepts USDT, USDC, BTC, ETH but has no wallet"), "{message}");
    assert!(message.contains("coinorder wallets set --env live"), "{message}");
    run_json(dir, &["wallets", "set", "--env", "live", "BTC", wallets::BIP84_ZPUB]);
    let message = run_fails(dir, &["serve", "--env", "live", "--addr", "127.0.0.1:0"]);
    assert!(message.contains("live accepts USDT, USDC, ETH but has no wallet"), "{message}");
    // Accepting only the coins with wallets is the other way to start.
    let settings = dir.join("btc-only.toml");
    std::fs::write(&settings, "[server]\npay_currencies = [\"BTC\"]\n").expect("write settings");
    let settings = settings.to_string_lossy().to_string();
    let (server, _) = ServeProcess::start_env(dir, "live", &["--config", &settings]);
    let log = serve_log_after(server, Duration::from_millis(200));
    assert!(log.contains("warning: live has no rate for BTC"), "{log}");
    assert!(log.contains("warning: live watches no chain for BTC"), "{log}");
    live_wallets(dir);
    let (server, _) = ServeProcess::start_env(dir, "live", &["--esplora-url", "http://127.0.0.1:9/api"]);
    let log = serve_log_after(server, Duration::from_millis(200));
    assert!(log.contains("warning: live has no rate for BTC"), "{log}");
    assert!(!log.contains("no rate for USDT"), "USDT has a rate: {log}");
    assert!(log.contains("warning: live watches no chain for USDT, USDC, ETH"), "{log}");
    assert!(log.contains("warning: chain watcher: bitcoin: Esplora at http://127.0.0.1:9"), "{log}");
    let (server, _) = ServeProcess::start(dir, &[]);
    let log = serve_log_after(server, Duration::from_millis(200));
    assert!(!log.contains("warning"), "the sandbox has test rates and addresses: {log}");
}

#[test]
fn serve_warns_of_a_payment_page_url_at_a_path_of_the_api() {
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    for (url, said) in
        [("https://pay.shop.example/", "points at the root"), ("https://shop.example/v1/pay", "points at /v1/pay")]
    {
        let (server, _) = ServeProcess::start(dir, &["--payment-page-url", url]);
        let log = serve_log_after(server, Duration::from_millis(200));
        assert!(log.contains(&format!("warning: payment_page_url {url} {said}, which belongs to the API")), "{log}");
    }
    let (server, _) = ServeProcess::start(dir, &["--payment-page-url", "https://shop.example/checkout"]);
    let log = serve_log_after(server, Duration::from_millis(200));
    assert!(!log.contains("warning"), "{log}");
}

/// A database file the user may read but not write is refused when it is opened, naming
/// the file, rather than opened read-only and failing every write later (`serve` would
/// otherwise start and answer 500 to every request). As root, whom file modes do not
/// bind, the command runs as the unprivileged user 65534 (`setpriv`, util-linux).
#[test]
fn a_read_only_database_file_is_refused_when_opened() {
    if on_postgres() {
        return; // a server's permissions are its own
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    run_json(dir, &["keys", "create", "--user-id", "1"]);
    let db = dir.join("coinorder.db");
    let as_root = String::from_utf8_lossy(&Command::new("id").arg("-u").output().expect("id -u").stdout).trim() == "0";
    let mut command = if as_root {
        use std::os::unix::fs::{chown, PermissionsExt};
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
        for entry in std::fs::read_dir(dir).expect("read dir") {
            chown(entry.expect("entry").path(), Some(65534), Some(65534)).expect("chown file");
        }
        chown(dir, Some(65534), Some(65534)).expect("chown dir");
        // A copy the user can run, wherever the build directory is.
        let bin = dir.join("coinorder-bin");
        std::fs::copy(BIN, &bin).expect("copy the binary");
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod binary");
        let mut command = Command::new("setpriv");
        command.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&bin).current_dir(dir);
        command.env_remove("COINORDER_DB").env_remove("COINORDER_CONFIG").env_remove("COINORDER_ENV");
        command
    } else {
        coinorder(dir)
    };
    // Before: the same user lists the keys.
    let listed = command.args(["keys", "list"]).output().expect("run coinorder");
    assert!(listed.status.success(), "{}", stderr(&listed));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o400)).expect("chmod 400");
    let refused = command.output().expect("run coinorder");
    assert_eq!(refused.status.code(), Some(1), "{}", String::from_utf8_lossy(&refused.stdout));
    let message = stderr(&refused);
    assert!(message.contains("the database file ./coinorder.db is read-only for this user"), "{message}");
}
