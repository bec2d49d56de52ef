//! The Ethereum watcher never skips a block: a node that answers a tip it cannot serve
//! yet (one backend of a load-balanced provider behind another) leaves the scan where
//! it stopped, and the payment in the missing block is found once the node has it.
//! A scripted JSON-RPC server on loopback plays that node.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use coinorder::{CreateOrder, Environment, EthereumWatch, OrderStatus};
use common::harness_with;
use common::scripted_node::{self, block, block_hash, block_param, hex};
use common::wallets::ethereum_account_xpub;
use serde_json::{json, Value};

/// Answers one JSON-RPC request: the tip is block 5; blocks 3 to 5 are missing until
/// `caught_up`, and block 4 then holds a 0.01 ETH transfer to `payee`.
fn answer(request: &Value, caught_up: bool, payee: &str) -> Value {
    let tx = format!("0x{:064x}", 0xbeef);
    match request["method"].as_str().unwrap_or("") {
        "eth_blockNumber" => json!(hex(5)),
        "eth_getBlockByNumber" => {
            let number = block_param(request);
            if number >= 3 && !caught_up {
                Value::Null
            } else if number == 4 {
                block(number, json!([{"hash": tx, "to": payee, "value": hex(10_000_000_000_000_000)}]))
            } else {
                block(number, json!([]))
            }
        }
        "eth_getLogs" => json!([]),
        "eth_getTransactionReceipt" if caught_up => {
            json!({"blockNumber": hex(4), "blockHash": block_hash(4), "status": "0x1"})
        }
        "eth_getTransactionReceipt" => Value::Null,
        "eth_getTransactionByHash" => json!({"hash": tx}),
        other => panic!("unexpected method {other}"),
    }
}

#[test]
fn a_block_the_node_lacks_is_scanned_once_it_has_it() {
    let caught_up = Arc::new(AtomicBool::new(false));
    let payee_cell = Arc::new(std::sync::OnceLock::<String>::new());
    let url = {
        let (caught_up, payee_cell) = (Arc::clone(&caught_up), Arc::clone(&payee_cell));
        scripted_node::start(move |request| {
            answer(request, caught_up.load(Ordering::SeqCst), payee_cell.get().map_or("", String::as_str))
        })
    };
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

    payee_cell.set(payee).expect("payee set once");

    let first = shop.svc.watch_chain_due().expect("watch");
    assert!(first.errors.is_empty(), "{first:?}");
    assert_eq!(first.recorded, 0, "block 4 is not there yet");
    caught_up.store(true, Ordering::SeqCst);
    let second = shop.svc.watch_chain_due().expect("watch");
    assert!(second.errors.is_empty(), "{second:?}");
    assert_eq!((second.recorded, second.confirmed), (1, 1), "{second:?}");
    assert_eq!(shop.svc.order(&order.order.order_id).expect("order").order.status, OrderStatus::Paid);
}
