//! A real local Ethereum chain for integration tests: anvil (from `@foundry-rs/anvil` in
//! package.json, installed by `npm ci`) on 127.0.0.1 and a free port, with its funded,
//! unlocked dev accounts and a test ERC-20 (tests/fixtures/erc20).
//!
//! Mining is anvil's default automine: every transaction is mined at once in a block of
//! its own, and more (empty) blocks come from [`Anvil::mine`]. [`Anvil::set_automine`]
//! turns it off to leave transactions pending.
//!
//! Include it with `#[path = "support/anvil.rs"] mod anvil;`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long anvil gets to print its address and answer its first request.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running anvil, stopped (and waited for) on drop.
pub struct Anvil {
    child: Child,
    /// Closing it tells the wrapper shell to stop anvil (see [`Anvil::start`]).
    stdin: Option<ChildStdin>,
    url: String,
    agent: ureq::Agent,
    output: Arc<Mutex<String>>,
    /// Whether sent transactions are mined at once, so the senders wait for it.
    automine: AtomicBool,
}

impl Anvil {
    /// Starts anvil on 127.0.0.1 and a port of its choosing, and waits until it answers
    /// `eth_blockNumber`.
    ///
    /// Panics with "anvil not found: run `npm ci` at the repository root" when
    /// node_modules has no anvil.
    pub fn start() -> Anvil {
        let binary = anvil_binary();
        // anvil runs under a shell that stops it (SIGTERM, then waits) as soon as its
        // stdin reaches end of file. That happens when Drop closes it, but also when this
        // test process dies without unwinding (a SIGKILL from a CI timeout, a double
        // panic): the kernel closes the pipe and no anvil is left orphaned.
        // `--port 0` lets anvil pick a free port (no race with other tests picking one);
        // it prints "Listening on 127.0.0.1:PORT", which --silent would suppress.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#""$0" "$@" </dev/null & pid=$!; read _ignored; kill "$pid" 2>/dev/null; wait "$pid""#)
            .arg(&binary)
            .args(["--host", "127.0.0.1", "--port", "0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let stdin = child.stdin.take();
        let output = Arc::new(Mutex::new(String::new()));
        let (address_tx, address_rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        let log = Arc::clone(&output);
        // anvil logs every RPC call on stdout: it is drained for as long as anvil runs so
        // a full pipe never blocks it.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(address) = line.trim().strip_prefix("Listening on ") {
                    let _ = address_tx.send(address.trim().to_string());
                }
                keep_tail(&log, &line);
            }
        });
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::clone(&output);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                keep_tail(&log, &line);
            }
        });
        // A local node is never reached through a proxy, whatever HTTP_PROXY says.
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(START_TIMEOUT))
            .proxy(None)
            .build();
        let mut anvil = Anvil {
            child,
            stdin,
            url: String::new(),
            agent: ureq::Agent::new_with_config(config),
            output,
            automine: AtomicBool::new(true),
        };
        let address = match address_rx.recv_timeout(START_TIMEOUT) {
            Ok(address) => address,
            Err(_) => panic!("anvil printed no address within {START_TIMEOUT:?}; its output:\n{}", anvil.output()),
        };
        anvil.url = format!("http://{address}");
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match anvil.try_rpc("eth_blockNumber", json!([])) {
                Ok(_) => return anvil,
                Err(e) if Instant::now() > deadline => panic!("anvil at {} does not answer: {e}", anvil.url),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The JSON-RPC URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The last lines anvil printed, for failure messages.
    pub fn output(&self) -> String {
        self.output.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// One JSON-RPC call's result; panics on a transport or JSON-RPC error.
    pub fn rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc(method, params).unwrap_or_else(|e| panic!("anvil {method}: {e}"))
    }

    /// One JSON-RPC call: its result, or the error object / transport failure as text.
    pub fn try_rpc(&self, method: &str, params: Value) -> Result<Value, String> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let mut response = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json")
            .send(body.as_bytes())
            .map_err(|e| e.to_string())?;
        let text = response.body_mut().read_to_string().map_err(|e| e.to_string())?;
        let mut value: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            return Err(error.to_string());
        }
        value.get_mut("result").map(Value::take).ok_or_else(|| format!("no result: {text}"))
    }

    /// anvil's funded dev accounts (`eth_accounts`), lowercase; unlocked, so
    /// `eth_sendTransaction` works from them without signing.
    pub fn accounts(&self) -> Vec<String> {
        let accounts = self.rpc("eth_accounts", json!([]));
        accounts
            .as_array()
            .expect("eth_accounts is an array")
            .iter()
            .map(|a| a.as_str().expect("an account is a string").to_ascii_lowercase())
            .collect()
    }

    /// Sends `wei` from `from` (an unlocked account) to `to`; returns the transaction hash.
    /// With automine on, returns once the transaction is mined.
    pub fn send_eth(&self, from: &str, to: &str, wei: u128) -> String {
        self.send(json!({"from": from, "to": to, "value": format!("{wei:#x}")}))
    }

    /// `eth_sendTransaction` of `transaction`; with automine on, waits for its receipt.
    pub fn send(&self, transaction: Value) -> String {
        let hash = self.rpc("eth_sendTransaction", json!([transaction]));
        let hash = hash.as_str().expect("a transaction hash").to_string();
        if self.automine.load(Ordering::SeqCst) {
            self.wait_for_receipt(&hash);
        }
        hash
    }

    /// The receipt of `tx_hash`, waiting for it (up to a minute).
    ///
    /// anvil answers `eth_sendTransaction` as soon as the transaction is in its pool and
    /// automine mines it a moment later, so a receipt asked for at once can be `null`.
    pub fn wait_for_receipt(&self, tx_hash: &str) -> Value {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let receipt = self.receipt(tx_hash);
            if !receipt.is_null() {
                return receipt;
            }
            assert!(Instant::now() < deadline, "{tx_hash} was not mined within {START_TIMEOUT:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Deploys tests/fixtures/erc20/TestToken.bin ("Test Tether", USDT, 6 decimals as
    /// USDT has, the whole supply of 10^15 units to `from`); returns the contract
    /// address, lowercase. Needs automine on (the address comes from the receipt).
    pub fn deploy_token(&self, from: &str) -> String {
        self.deploy_token_with_decimals(from, 6)
    }

    /// [`Anvil::deploy_token`] with `decimals` of its own (the supply is one billion
    /// tokens, 10^(9 + decimals) units).
    pub fn deploy_token_with_decimals(&self, from: &str, decimals: u8) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/erc20/TestToken.bin");
        let code = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // The constructor's one argument, ABI-encoded as a 32-byte word after the code.
        let data = format!("0x{}{decimals:064x}", code.trim());
        let hash = self.rpc("eth_sendTransaction", json!([{"from": from, "data": data}]));
        let receipt = self.wait_for_receipt(hash.as_str().expect("a transaction hash"));
        assert_eq!(receipt["status"], json!("0x1"), "deployment reverted: {receipt}");
        receipt["contractAddress"].as_str().expect("a contract address").to_ascii_lowercase()
    }

    /// Sends `units` of `token` from `from` to `to` (`transfer(address,uint256)`); returns
    /// the transaction hash. With automine on, returns once the transaction is mined.
    pub fn send_token(&self, token: &str, from: &str, to: &str, units: u128) -> String {
        let to = to.trim_start_matches("0x").to_ascii_lowercase();
        assert_eq!(to.len(), 40, "not an address: {to}");
        // transfer(address,uint256): selector 0xa9059cbb, then both arguments as 32-byte words.
        let data = format!("0xa9059cbb{to:0>64}{units:064x}");
        self.send(json!({"from": from, "to": token, "data": data}))
    }

    /// The raw receipt of `tx_hash`, `null` when there is none.
    pub fn receipt(&self, tx_hash: &str) -> Value {
        self.rpc("eth_getTransactionReceipt", json!([tx_hash]))
    }

    /// Mines `blocks` blocks (`anvil_mine`), with the pending transactions in the first.
    pub fn mine(&self, blocks: u64) {
        self.rpc("anvil_mine", json!([format!("{blocks:#x}")]));
    }

    /// Saves the chain state (`evm_snapshot`); returns the id for [`Anvil::revert`].
    pub fn snapshot(&self) -> String {
        self.rpc("evm_snapshot", json!([])).as_str().expect("a snapshot id").to_string()
    }

    /// Returns to the state saved by `snapshot` (`evm_revert`): later blocks are gone and
    /// the height goes back.
    pub fn revert(&self, id: &str) {
        assert_eq!(self.rpc("evm_revert", json!([id])), json!(true), "evm_revert {id} failed");
    }

    /// Replaces the last `depth` blocks with as many new, empty ones (`anvil_reorg` with
    /// `[depth, []]` in anvil 1.7): the height stays, the hashes change and the replaced
    /// blocks' transactions are dropped, not re-queued. `depth` may not exceed the height.
    pub fn reorg(&self, depth: u64) {
        self.rpc("anvil_reorg", json!([depth, []]));
    }

    /// The latest block height.
    pub fn block_number(&self) -> u64 {
        let number = self.rpc("eth_blockNumber", json!([]));
        let hex = number.as_str().expect("a hex quantity").trim_start_matches("0x");
        u64::from_str_radix(hex, 16).expect("a hex quantity")
    }

    /// Turns automatic mining on or off (`evm_setAutomine`); off, sent transactions wait
    /// in the pool for [`Anvil::mine`].
    pub fn set_automine(&self, on: bool) {
        self.rpc("evm_setAutomine", json!([on]));
        self.automine.store(on, Ordering::SeqCst);
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        // End of file on the shell's stdin: it sends anvil SIGTERM and waits for it.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The anvil to run: the platform binary npm installed next to the `.bin/anvil` wrapper.
///
/// The wrapper is a Node script that spawns that binary and only forwards SIGINT and
/// SIGTERM; running the binary directly leaves one process to stop instead of two. The
/// wrapper itself is the fallback when the layout is not the expected one.
fn anvil_binary() -> PathBuf {
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("node_modules");
    let wrapper = modules.join(".bin/anvil");
    if !wrapper.exists() {
        panic!("anvil not found: run `npm ci` at the repository root ({} is missing)", wrapper.display());
    }
    let scope = modules.join("@foundry-rs");
    let platform_binary = std::fs::read_dir(&scope).ok().and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .filter(|entry| entry.file_name().to_string_lossy().starts_with("anvil-"))
            .map(|entry| entry.path().join("bin/anvil"))
            .find(|path| path.is_file())
    });
    platform_binary.unwrap_or(wrapper)
}

/// Appends `line` to `log`, keeping only the last 200 lines or so.
fn keep_tail(log: &Mutex<String>, line: &str) {
    if let Ok(mut log) = log.lock() {
        log.push_str(line);
        log.push('\n');
        if log.len() > 32 * 1024 {
            let cut = log.len() - 16 * 1024;
            let cut = (cut..log.len()).find(|&i| log.is_char_boundary(i)).unwrap_or(0);
            log.replace_range(..cut, "");
        }
    }
}
