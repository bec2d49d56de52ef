//! A scripted Ethereum JSON-RPC node on loopback: each request is answered by a function
//! of the test (what a lagging, lying or broken endpoint would say), so the watcher's
//! handling of answers a real node rarely gives can be shown.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use serde_json::{json, Value};

/// Serves JSON-RPC on 127.0.0.1, answering each request's `result` with `answer` (or its
/// whole response when `answer` returns an object with `error`); returns the URL. The
/// server thread is detached and ends with the test process.
pub fn start(answer: impl Fn(&Value) -> Value + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).expect("read") == 0 {
                    break;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().expect("length");
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).expect("body");
            let request: Value = serde_json::from_slice(&body).expect("json");
            let answered = answer(&request);
            let reply = match answered.get("error") {
                Some(error) => json!({"jsonrpc": "2.0", "id": request["id"], "error": error}),
                None => json!({"jsonrpc": "2.0", "id": request["id"], "result": answered}),
            }
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    url
}

/// `n` as a JSON-RPC quantity.
pub fn hex(n: u64) -> String {
    format!("{n:#x}")
}

/// The block number a request's first parameter names.
pub fn block_param(request: &Value) -> u64 {
    u64::from_str_radix(request["params"][0].as_str().unwrap_or("0x0").trim_start_matches("0x"), 16)
        .expect("block number")
}

/// A block header or full block `number` with `transactions`, as `eth_getBlockByNumber`
/// gives it.
pub fn block(number: u64, transactions: Value) -> Value {
    json!({"number": hex(number), "hash": block_hash(number), "timestamp": hex(1_795_000_000 + number * 12),
           "transactions": transactions})
}

/// The hash of block `number` on the scripted chain.
pub fn block_hash(number: u64) -> String {
    format!("0x{number:064x}")
}
