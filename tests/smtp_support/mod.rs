//! A real SMTP server for the e-mail tests: `smtp_sink.py` (Python's `aiosmtpd`) run as a
//! child process on 127.0.0.1, reporting every accepted message as a JSON line.
//!
//! The interpreter is `$PYTHON`, else `python3`; `aiosmtpd` must be installed
//! (`pip install aiosmtpd`, done by the project's test script). The sink is stopped when
//! the [`SmtpSink`] is stopped or dropped: its stdin is closed (it exits by itself) and,
//! should it linger, it is killed.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long the sink may take to start or to exit.
const START_TIMEOUT: Duration = Duration::from_secs(20);

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/smtp_support/smtp_sink.py");

/// A running SMTP sink.
pub struct SmtpSink {
    child: Child,
    stdin: Option<ChildStdin>,
    port: u16,
    lines: Receiver<Value>,
    reader: Option<JoinHandle<()>>,
    received: Vec<Value>,
}

impl SmtpSink {
    /// Starts a sink on a free port.
    pub fn start() -> SmtpSink {
        SmtpSink::start_with(0, None)
    }

    /// Starts a sink on `port` (0: a free one), requiring `user:password` when `auth` is
    /// given.
    pub fn start_with(port: u16, auth: Option<&str>) -> SmtpSink {
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
        let mut command = Command::new(&python);
        command.arg(SCRIPT).arg("--port").arg(port.to_string());
        if let Some(auth) = auth {
            command.arg("--auth").arg(auth);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {python} {SCRIPT} (the SMTP sink needs aiosmtpd): {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("sink stdout");
        let (tx, lines) = mpsc::channel();
        let reader = thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(value) => {
                        if tx.send(value).is_err() {
                            break;
                        }
                    }
                    Err(e) => eprintln!("smtp sink printed a non-JSON line ({e}): {line}"),
                }
            }
        });
        let mut sink = SmtpSink { child, stdin, port: 0, lines, reader: Some(reader), received: Vec::new() };
        match sink.lines.recv_timeout(START_TIMEOUT) {
            Ok(ready) if ready["ready"] == Value::Bool(true) => {
                sink.port = ready["port"].as_u64().and_then(|p| u16::try_from(p).ok()).expect("port in ready line");
            }
            other => {
                sink.stop();
                panic!("the SMTP sink did not start (is aiosmtpd installed for {python}?): {other:?}");
            }
        }
        sink
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `smtp://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Every message received so far (without waiting).
    pub fn received(&mut self) -> &[Value] {
        while let Ok(message) = self.lines.try_recv() {
            self.received.push(message);
        }
        &self.received
    }

    /// Waits up to `timeout` until `count` messages in all have arrived; returns them all
    /// (fewer if the time ran out).
    pub fn wait_for(&mut self, count: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        self.received();
        while self.received.len() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(message) => self.received.push(message),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        self.received.clone()
    }

    /// Stops the sink and waits (boundedly) for it to exit; killed if it does not.
    /// Calling it again does nothing.
    pub fn stop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                Ok(None) => thread::sleep(Duration::from_millis(10)),
            }
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        // Do not wait on a panicking test's sink: kill it.
        if thread::panicking() {
            let _ = self.child.kill();
        }
        self.stop();
    }
}
