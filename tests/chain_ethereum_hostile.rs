//! The Ethereum watcher against answers a healthy node rarely gives: one backend of a
//! load-balanced provider ahead of the blocks it serves, a log listed twice, a receipt
//! without its status, a token's `decimals()` answered empty once. None may count money
//! twice, confirm a payment early, fail a paid order or pass over a payment for good.
//! A scripted JSON-RPC node on loopback plays the endpoint; each scenario sets what it
//! answers.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use coinorder::{ChainWatchReport, CreateOrder, Environment, EthereumWatch, OrderStatus, OrderWithInvoice};
use common::scripted_node::{self, block, block_hash, block_param, hex};
use common::wallets::ethereum_account_xpub;
use common::{harness_with, Harness};
use serde_json::{json, Value};

/// The token contract the scripted chain knows as USDT.
const CONTRACT: &str = "0x00000000000000000000000000000000000000c0";
const TRANSFER_TOPIC: &str = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

/// What the scripted node knows: its blocks `0..=served`, the tip it claims, the token
/// logs of its blocks, and how it answers receipts and `decimals()`.
struct Chain {
    served: u64,
    claimed_tip: u64,
    logs: Vec<Value>,
    receipts: Vec<(String, Value)>,
    decimals: Value,
    /// Ether transfers, by block.
    ether: Vec<(u64, Value)>,
}

impl Chain {
    fn answer(&self, request: &Value) -> Value {
        match request["method"].as_str().unwrap_or("") {
            "eth_blockNumber" => json!(hex(self.claimed_tip)),
            "eth_getBlockByNumber" => {
                let number = block_param(request);
                if number <= self.served {
                    let transactions: Vec<Value> =
                        self.ether.iter().filter(|(at, _)| *at == number).map(|(_, tx)| tx.clone()).collect();
                    block(number, json!(transactions))
                } else {
                    Value::Null
                }
            }
            "eth_getLogs" => {
                let filter = &request["params"][0];
                let bound = |name: &str| {
                    u64::from_str_radix(filter[name].as_str().unwrap_or("0x0").trim_start_matches("0x"), 16)
                        .expect("block bound")
                };
                let range = bound("fromBlock")..=bound("toBlock").min(self.served);
                let logs: Vec<Value> = self
                    .logs
                    .iter()
                    .filter(|log| range.contains(&block_param(&json!({"params": [log["blockNumber"]]}))))
                    .cloned()
                    .collect();
                json!(logs)
            }
            // The configured token answers `decimals`; any other address has no code.
            "eth_call" if request["params"][0]["to"] == CONTRACT => self.decimals.clone(),
            "eth_call" => json!("0x"),
            "eth_getTransactionReceipt" => {
                let hash = request["params"][0].as_str().unwrap_or("");
                self.receipts.iter().find(|(h, _)| h == hash).map_or(Value::Null, |(_, r)| r.clone())
            }
            "eth_getTransactionByHash" => json!({"hash": request["params"][0]}),
            other => panic!("unexpected method {other}"),
        }
    }
}

/// A transfer log of `units` USDT base units to `payee` in block `number`.
fn transfer_log(tx: &str, log_index: u64, payee: &str, units: u64, number: u64) -> Value {
    json!({
        "transactionHash": tx, "logIndex": hex(log_index), "address": CONTRACT,
        "topics": [TRANSFER_TOPIC, format!("0x{:064x}", 0xfeed), format!("0x{:0>64}", payee.trim_start_matches("0x"))],
        "data": format!("0x{units:064x}"), "blockNumber": hex(number), "blockHash": block_hash(number),
    })
}

/// A mined receipt of block `number`.
fn receipt(number: u64) -> Value {
    json!({"blockNumber": hex(number), "blockHash": block_hash(number), "status": "0x1"})
}

fn tx(n: u64) -> String {
    format!("0x{n:064x}")
}

/// A live shop watching the scripted node for USDT at `confirmations`, and its chain.
struct Scenario {
    shop: Harness,
    chain: Arc<Mutex<Chain>>,
    calls: Arc<AtomicU64>,
}

impl Scenario {
    fn new(confirmations: u32) -> Scenario {
        Scenario::watching(confirmations, CONTRACT)
    }

    /// [`Scenario::new`] with USDT configured at `contract`.
    fn watching(confirmations: u32, contract: &str) -> Scenario {
        let chain = Arc::new(Mutex::new(Chain {
            served: 10,
            claimed_tip: 10,
            logs: Vec::new(),
            receipts: Vec::new(),
            decimals: json!(format!("0x{:064x}", 6)),
            ether: Vec::new(),
        }));
        let calls = Arc::new(AtomicU64::new(0));
        let url = {
            let (chain, calls) = (Arc::clone(&chain), Arc::clone(&calls));
            scripted_node::start(move |request| {
                calls.fetch_add(1, Ordering::SeqCst);
                chain.lock().expect("chain").answer(request)
            })
        };
        let shop = harness_with(Environment::Live, |config| {
            config.ethereum_watch =
                Some(EthereumWatch { rpc_url: url, confirmations, tokens: vec![("USDT".into(), contract.into())] });
        });
        shop.svc.set_rate("USDT", "USD", "1".parse().expect("rate"), None).expect("rate");
        shop.svc.set_rate("ETH", "USD", "2500".parse().expect("rate"), None).expect("rate");
        shop.svc.set_wallet("USDT", &ethereum_account_xpub()).expect("wallet");
        shop.svc.set_wallet("ETH", &ethereum_account_xpub()).expect("wallet");
        Scenario { shop, chain, calls }
    }

    /// A USDT order of `usd` dollars, and its payee address in lower case.
    fn order(&self, usd: &str) -> (OrderWithInvoice, String) {
        self.order_in("USDT", usd)
    }

    /// An order of `usd` dollars paid in `coin`, and its payee address in lower case.
    fn order_in(&self, coin: &str, usd: &str) -> (OrderWithInvoice, String) {
        let merchant = self.shop.svc.authenticate(Some(&self.shop.key)).expect("authenticate");
        let request = CreateOrder {
            currency: "USD".into(),
            amount: usd.parse().expect("amount"),
            pay_currency: Some(coin.into()),
            ..Default::default()
        };
        let order = self.shop.svc.create_order(&merchant, &request).expect("create").order;
        let payee = order.invoice.address.to_ascii_lowercase();
        (order, payee)
    }

    fn watch(&self) -> ChainWatchReport {
        self.shop.svc.watch_chain_due().expect("watch")
    }

    fn status(&self, order: &OrderWithInvoice) -> OrderStatus {
        self.shop.svc.order(&order.order.order_id).expect("order").order.status
    }

    fn received(&self, order: &OrderWithInvoice) -> String {
        let payments = self.shop.svc.order_payments(&order.order.order_id).expect("payments");
        payments.iter().map(|p| format!("{}={}:{:?}", p.txid, p.amount, p.state)).collect::<Vec<_>>().join(",")
    }
}

#[test]
fn a_log_listed_twice_is_counted_once() {
    let s = Scenario::new(1);
    let (order, payee) = s.order("10");
    {
        let mut chain = s.chain.lock().expect("chain");
        // Half the order, listed twice: the same block, the same index.
        let log = transfer_log(&tx(1), 0, &payee, 5_000_000, 8);
        chain.logs = vec![log.clone(), log];
        chain.receipts = vec![(tx(1), receipt(8))];
    }
    let report = s.watch();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(s.received(&order), format!("{}=5:Confirmed", tx(1)));
    assert_eq!(s.status(&order), OrderStatus::Pending, "5 of 10 USDT paid");
}

#[test]
fn one_transaction_reported_in_two_blocks_counts_the_later_ones_logs_only() {
    let s = Scenario::new(1);
    let (order, payee) = s.order("10");
    {
        let mut chain = s.chain.lock().expect("chain");
        // Answered across a reorganisation: the transaction in block 7, then again in 9.
        chain.logs = vec![transfer_log(&tx(2), 0, &payee, 6_000_000, 7), transfer_log(&tx(2), 3, &payee, 6_000_000, 9)];
        chain.receipts = vec![(tx(2), receipt(9))];
    }
    s.watch();
    assert_eq!(s.received(&order), format!("{}=6:Confirmed", tx(2)));
    assert_eq!(s.status(&order), OrderStatus::Pending);
}

#[test]
fn a_tip_ahead_of_the_blocks_served_neither_skips_blocks_nor_confirms_early() {
    let s = Scenario::new(3);
    let (order, payee) = s.order("10");
    {
        let mut chain = s.chain.lock().expect("chain");
        // One backend claims a tip far ahead; the node serves blocks up to 10 only, and
        // the payment is in block 12, which it serves later.
        chain.claimed_tip = 1_000_000;
        chain.logs = vec![transfer_log(&tx(3), 0, &payee, 10_000_000, 12)];
        chain.receipts = vec![(tx(3), receipt(12))];
    }
    let first = s.watch();
    assert!(first.errors.is_empty(), "{first:?}");
    assert_eq!(first.recorded, 0, "block 12 is not served yet");

    s.chain.lock().expect("chain").served = 12;
    let second = s.watch();
    assert_eq!((second.recorded, second.confirmed), (1, 0), "1 confirmation of 3: {second:?}");
    assert_eq!(s.status(&order), OrderStatus::Pending);

    s.chain.lock().expect("chain").served = 14;
    let third = s.watch();
    assert_eq!(third.confirmed, 1, "{third:?}");
    assert_eq!(s.status(&order), OrderStatus::Paid);
}

#[test]
fn a_receipt_without_status_is_reported_and_holds_up_no_other_payment() {
    let s = Scenario::new(1);
    let (first, first_payee) = s.order("10");
    let (second, second_payee) = s.order("10");
    {
        let mut chain = s.chain.lock().expect("chain");
        chain.logs = vec![
            transfer_log(&tx(4), 0, &first_payee, 10_000_000, 5),
            transfer_log(&tx(5), 0, &second_payee, 10_000_000, 6),
        ];
        // The first payment's receipt comes back without its status: an incomplete answer.
        chain.receipts = vec![(tx(4), json!({"blockNumber": hex(5), "blockHash": block_hash(5)})), (tx(5), receipt(6))];
    }
    let report = s.watch();
    assert_eq!((report.recorded, report.confirmed, report.rejected), (2, 1, 0), "{report:?}");
    let reported = report.errors.join("\n");
    assert!(reported.contains(&tx(4)) && reported.contains(&first.order.order_id), "{reported}");
    assert_eq!(s.status(&second), OrderStatus::Paid, "the other payment is not held up");
    assert_eq!(s.status(&first), OrderStatus::Pending, "not failed: the answer was incomplete, not a revert");

    // Answered whole next pass, it confirms.
    s.chain.lock().expect("chain").receipts[0].1 = receipt(5);
    let next = s.watch();
    assert_eq!(next.confirmed, 1, "{next:?}");
    assert_eq!(s.status(&first), OrderStatus::Paid);
}

#[test]
fn a_token_whose_decimals_read_empty_once_is_scanned_again_once_they_read() {
    let s = Scenario::new(1);
    let (order, payee) = s.order("10");
    {
        let mut chain = s.chain.lock().expect("chain");
        chain.decimals = json!("0x");
        chain.logs = vec![transfer_log(&tx(6), 0, &payee, 10_000_000, 7)];
        chain.receipts = vec![(tx(6), receipt(7))];
    }
    let first = s.watch();
    assert_eq!(first.recorded, 0);
    assert!(first.errors.iter().any(|e| e.contains("declares no decimals()")), "{first:?}");

    // The chain moves on while the token cannot be read; then it answers.
    let mut chain = s.chain.lock().expect("chain");
    chain.served = 20;
    chain.claimed_tip = 20;
    chain.decimals = json!(format!("0x{:064x}", 6));
    drop(chain);
    let calls_before = s.calls.load(Ordering::SeqCst);
    let second = s.watch();
    assert!(s.calls.load(Ordering::SeqCst) > calls_before);
    assert_eq!((second.recorded, second.confirmed), (1, 1), "{second:?}");
    assert_eq!(s.status(&order), OrderStatus::Paid);
}

#[test]
fn ether_is_watched_past_a_token_that_cannot_be_read_and_the_token_catches_up_once_it_reads() {
    let s = Scenario::new(1);
    let (token_order, token_payee) = s.order("10");
    let (ether_order, ether_payee) = s.order_in("ETH", "25");
    {
        let mut chain = s.chain.lock().expect("chain");
        chain.decimals = json!("0x");
        chain.logs = vec![transfer_log(&tx(7), 0, &token_payee, 10_000_000, 7)];
        chain.receipts = vec![(tx(7), receipt(7)), (tx(8), receipt(550))];
    }
    s.watch();
    // The chain moves on 600 blocks, three passes' worth, with 0.01 ETH paid in block 550.
    {
        let mut chain = s.chain.lock().expect("chain");
        (chain.served, chain.claimed_tip) = (600, 600);
        chain.ether = vec![(550, json!({"hash": tx(8), "to": ether_payee, "value": hex(10_000_000_000_000_000)}))];
    }
    for _ in 0..4 {
        let report = s.watch();
        assert!(report.errors.iter().all(|e| e.contains("declares no decimals()")), "{report:?}");
    }
    assert_eq!(s.status(&ether_order), OrderStatus::Paid, "Ether is not held up by the token");
    assert_eq!(s.status(&token_order), OrderStatus::New);

    // The token reads again: its blocks from where it was left out are read.
    s.chain.lock().expect("chain").decimals = json!(format!("0x{:064x}", 6));
    for _ in 0..4 {
        let report = s.watch();
        assert!(report.errors.is_empty(), "{report:?}");
    }
    assert_eq!(s.status(&token_order), OrderStatus::Paid, "{}", s.received(&token_order));
}

#[test]
fn one_transaction_paying_ether_and_a_token_to_two_invoices_pays_both() {
    let s = Scenario::new(1);
    let (token_order, token_payee) = s.order("10");
    let (ether_order, ether_payee) = s.order_in("ETH", "25");
    {
        let mut chain = s.chain.lock().expect("chain");
        // A contract call that sends 0.01 ETH to one invoice and 10 USDT to another.
        chain.ether = vec![(5, json!({"hash": tx(9), "to": ether_payee, "value": hex(10_000_000_000_000_000)}))];
        chain.logs = vec![transfer_log(&tx(9), 0, &token_payee, 10_000_000, 5)];
        chain.receipts = vec![(tx(9), receipt(5))];
    }
    let report = s.watch();
    assert_eq!((report.recorded, report.confirmed), (2, 2), "{report:?}");
    assert_eq!(s.received(&ether_order), format!("{}=0.01:Confirmed", tx(9)));
    assert_eq!(s.received(&token_order), format!("{}:{token_payee}=10:Confirmed", tx(9)));
    assert_eq!((s.status(&ether_order), s.status(&token_order)), (OrderStatus::Paid, OrderStatus::Paid));
}

#[test]
fn a_token_contract_corrected_in_the_settings_reads_the_blocks_left_out_while_it_was_wrong() {
    let wrong = "0x00000000000000000000000000000000000000bb";
    let s = Scenario::watching(1, wrong);
    let (order, payee) = s.order("10");
    let first = s.watch();
    assert!(first.errors.iter().any(|e| e.contains("declares no decimals()")), "{first:?}");
    // The customer pays with the real contract at block 550; the scan moves on past it.
    {
        let mut chain = s.chain.lock().expect("chain");
        (chain.served, chain.claimed_tip) = (600, 600);
        chain.logs = vec![transfer_log(&tx(10), 0, &payee, 10_000_000, 550)];
        chain.receipts = vec![(tx(10), receipt(550))];
    }
    for _ in 0..4 {
        s.watch();
    }
    assert_eq!(s.status(&order), OrderStatus::New);

    // The operator corrects the contract and starts again.
    let watch = s.shop.svc.config().ethereum_watch.clone().map(|mut watch| {
        watch.tokens = vec![("USDT".into(), CONTRACT.into())];
        watch
    });
    let mut config = common::config(Environment::Live, &s.shop.clock);
    config.ethereum_watch = watch;
    let corrected = coinorder::Service::open(common::db_path(&s.shop.dir), config).expect("reopen");
    for _ in 0..4 {
        let report = corrected.watch_chain_due().expect("watch");
        assert!(report.errors.is_empty(), "{report:?}");
    }
    assert_eq!(corrected.order(&order.order.order_id).expect("order").order.status, OrderStatus::Paid);
}
