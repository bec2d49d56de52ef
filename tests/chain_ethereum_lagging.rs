//! The Ethereum watcher never skips a block: a node that answers a tip it cannot serve
//! yet (one backend of a load-balanced provider behind another) leaves the scan where
//! it stopped, and the payment in the missing block is found once the node has it.
//! A scripted JSON-RPC server on loopback plays that node.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use coinorder::{CreateOrder, Environment, EthereumWatch, OrderStatus};
use common::harness_with;
use common::wallets::ethereum_account_xpub;
use serde_json::{json, Value};

/// Answers one JSON-RPC request: the tip is block 5; blocks 3 to 5 are missing until
/// `caught_up`, and block 4 then holds a 0.01 ETH transfer to `payee`.
fn answer(request: &Value, caught_up: bool, payee: &str) -> Value {
    let hex = |n: u64| format!("{n:#x}");
    let hash = |n: u64| format!("0x{n:064x}");
    let tx = format!("0x{:064x}", 0xbeef);
    let result = match request["method"].as_str().unwrap_or("") {
        "eth_blockNumber" => json!(hex(5)),
        "eth_getBlockByNumber" => {
            let number =
                u64::from_str_radix(request["params"][0].as_str().unwrap_or("0x0").trim_start_matches("0x"), 16)
                    .expect("block number");
            if number >= 3 && !caught_up {
                Value::Null
            } else {
                let transactions = if number == 4 {
                    json!([{"hash": tx, "to": payee, "value": hex(10_000_000_000_000_000)}])
                } else {
                    json!([])
                };
                json!({"number": hex(number), "hash": hash(number), "transactions": transactions})
            }
        }
        "eth_getLogs" => json!([]),
        "eth_getTransactionReceipt" if caught_up => {
            json!({"blockNumber": hex(4), "blockHash": hash(4), "status": "0x1"})
        }
        "eth_getTransactionReceipt" => Value::Null,
        "eth_getTransactionByHash" => json!({"hash": tx}),
        other => panic!("unexpected method {other}"),
    };
    json!({"jsonrpc": "2.0", "id": request["id"], "result": result})
}

#[test]
fn a_block_the_node_lacks_is_scanned_once_it_has_it() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let caught_up = Arc::new(AtomicBool::new(false));
    let shop = harness_with(Environment::Live, |config| {
        let mut watch = EthereumWatch::new(Environment::Live, url);
        watch.confirmations = 1;
        watch.tokens.clear();
        config.ethereum_watch = Some(watch);
    });
    shop.svc.set_rate("ETH", "USD", "2500".parse().expect("rate"), None).expect("rate");
    shop.svc.set_wallet("ETH", &ethereum_account_xpub()).expect("wallet");
    let merchant = shop.svc.authenticate(Some(&shop.key)).expect("authenticate");
    let request = CreateOrder {
        currency: "USD".into(),
        amount: "25".parse().expect("amount"),
        pay_currency: Some("ETH".into()),
        ..Default::default()
    };
    let order = shop.svc.create_order(&merchant, &request).expect("create").order;
    let payee = order.invoice.address.to_ascii_lowercase();

    // Detached: it ends with the test process.
    {
        let caught_up = Arc::clone(&caught_up);
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
                let reply = answer(&request, caught_up.load(Ordering::SeqCst), &payee).to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            }
        });
    }

    let first = shop.svc.watch_chain_due().expect("watch");
    assert!(first.errors.is_empty(), "{first:?}");
    assert_eq!(first.recorded, 0, "block 4 is not there yet");
    caught_up.store(true, Ordering::SeqCst);
    let second = shop.svc.watch_chain_due().expect("watch");
    assert!(second.errors.is_empty(), "{second:?}");
    assert_eq!((second.recorded, second.confirmed), (1, 1), "{second:?}");
    assert_eq!(shop.svc.order(&order.order.order_id).expect("order").order.status, OrderStatus::Paid);
}
