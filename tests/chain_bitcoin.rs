//! The Bitcoin chain watcher against an Esplora API (issue 14): a loopback server answers
//! from tests/fixtures/esplora (their README says where each answer's shape comes from),
//! for live orders whose addresses are BIP84's published test-vector addresses, derived
//! from BIP84's zpub. The chain moves forward by switching the fixture phase: a payment
//! goes unconfirmed → confirmed, and a transaction replaced by fee (RBF) is taken back
//! without failing the order its replacement pays.

mod common;
#[path = "support/esplora_fixtures.rs"]
mod esplora_fixtures;

use std::path::Path;

use coinorder::{
    BitcoinWatch, ChainWatchReport, CreateOrder, Environment, OrderStatus, PaymentState, MISSING_FOR, MISSING_PASSES,
};
use common::wallets::{BIP84_ADDRESSES, BIP84_ZPUB};
use common::{harness_with, Harness};
use serde_json::{json, Value};

/// Pays address 0 (outputs 0 and 2, 60,000 + 40,000 sat); confirmed at 870001 in phase 2.
const T0: &str = "d753c6698431aeba44a28e1ceae2108080c1cbf4a15ca732ac37d7ecc3541057";
/// Pays address 1 50,000 sat at output 1; replaced by B in phase 2.
const A: &str = "523af6cda38be88be420bcd4fa0aecdb2620907e667092d79b30c64927088786";
/// A's replacement, paying address 1 the same 50,000 sat at output 1.
const B: &str = "1f25f83595bd44e33ccc09005a159f0991821a1b3ea6ffb4826fd0e912c281cb";

fn shop(esplora_url: String) -> Harness {
    let shop = harness_with(Environment::Live, |config| {
        config.bitcoin_watch = Some(BitcoinWatch { esplora_url, confirmations: 2 });
    });
    shop.svc.set_rate("BTC", "USD", "50000".parse().expect("rate"), None).expect("rate");
    shop.svc.set_wallet("BTC", BIP84_ZPUB).expect("wallet");
    shop
}

fn order(shop: &Harness, usd: &str) -> String {
    order_in(shop, "BTC", usd)
}

/// A live order of `usd` paid in `coin`; returns its id.
fn order_in(shop: &Harness, coin: &str, usd: &str) -> String {
    let merchant = shop.svc.authenticate(Some(&shop.key)).expect("authenticate");
    let request = CreateOrder {
        currency: "USD".into(),
        amount: usd.parse().expect("amount"),
        pay_currency: Some(coin.into()),
        ..Default::default()
    };
    shop.svc.create_order(&merchant, &request).expect("create").order.order.order_id
}

fn status(shop: &Harness, order_id: &str) -> OrderStatus {
    shop.svc.order(order_id).expect("order").order.status
}

fn watch(shop: &Harness) -> ChainWatchReport {
    let report = shop.svc.watch_chain_due().expect("watch");
    assert!(report.errors.is_empty(), "{report:?}");
    report
}

/// Phase 3, built from phase 2 in `dir`: B mined at 870002, the tip at 870003.
fn phase3(dir: &Path) -> std::path::PathBuf {
    let from = esplora_fixtures::phase("phase2");
    let to = dir.join("phase3");
    copy_tree(&from, &to);
    std::fs::write(to.join("blocks/tip/height.txt"), "870003").expect("tip");
    std::fs::write(to.join("block-height/870003.txt"), format!("{:064x}", 870_003)).expect("tip's block");
    let mined = json!({"confirmed": true, "block_height": 870002,
        "block_hash": "00000000000000000001c1a1e7bd9fd8b0b3c0a7b6c8d2e2f4a6b8c0d2e4f6a8", "block_time": 1795330000});
    let history = to.join(format!("address/{}/txs.json", BIP84_ADDRESSES[1]));
    let mut txs: Value = serde_json::from_str(&std::fs::read_to_string(&history).expect("read")).expect("json");
    for tx in txs.as_array_mut().expect("array") {
        if tx["txid"] == B {
            tx["status"] = mined.clone();
        }
    }
    std::fs::write(&history, txs.to_string()).expect("write");
    std::fs::create_dir_all(to.join(format!("tx/{B}"))).expect("dir");
    std::fs::write(to.join(format!("tx/{B}/status.json")), mined.to_string()).expect("status");
    to
}

/// Moves the clock on by [`MISSING_FOR`] with a pass half-way, which rejects nothing: a
/// payment unknown to the chain on enough passes is rejected only once it was unknown
/// that long, and one pass counts for at most half of it.
fn advance_past_missing_for(shop: &Harness) {
    let half = i64::try_from(MISSING_FOR.as_millis() / 2).expect("ms");
    shop.clock.advance_ms(half);
    assert_eq!(watch(shop).rejected, 0, "half the wait");
    shop.clock.advance_ms(half);
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[test]
fn payments_go_unconfirmed_to_confirmed_and_a_replaced_one_never_fails_its_order() {
    let server = esplora_fixtures::start(esplora_fixtures::phase("phase1"));
    let shop = shop(server.url());
    let paid = order(&shop, "50"); // 0.001 BTC to address 0
    let replaced = order(&shop, "25"); // 0.0005 BTC to address 1
    let unpaid = order(&shop, "10"); // address 2, which nothing pays
    for (index, id) in [&paid, &replaced, &unpaid].into_iter().enumerate() {
        assert_eq!(shop.svc.order(id).expect("order").invoice.address, BIP84_ADDRESSES[index]);
    }

    // Phase 1: both transactions in the mempool.
    let seen = watch(&shop);
    assert_eq!((seen.recorded, seen.confirmed, seen.rejected), (2, 0, 0), "{seen:?}");
    let t0 = shop.svc.payment(&format!("{T0}:0")).expect("T0 as its first output to the address");
    assert_eq!((t0.amount.to_string().as_str(), t0.state), ("0.001", PaymentState::Unconfirmed));
    assert_eq!(status(&shop, &paid), OrderStatus::Pending);
    assert_eq!(status(&shop, &replaced), OrderStatus::Pending);
    assert_eq!(status(&shop, &unpaid), OrderStatus::New);
    assert_eq!(watch(&shop), ChainWatchReport::default(), "the same chain again changes nothing");

    // Phase 2: T0 two blocks deep; A replaced by B.
    server.set_phase(esplora_fixtures::phase("phase2"));
    let moved = watch(&shop);
    assert_eq!((moved.recorded, moved.confirmed, moved.rejected), (1, 1, 0), "{moved:?}");
    assert_eq!(status(&shop, &paid), OrderStatus::Paid);
    assert_eq!(shop.svc.payment(&format!("{B}:1")).expect("B").state, PaymentState::Unconfirmed);
    for _ in 1..MISSING_PASSES + 2 {
        assert_eq!(watch(&shop).rejected, 0, "A's replacement is on its way: the order waits");
    }
    assert_eq!(status(&shop, &replaced), OrderStatus::Pending);
    assert_eq!(shop.svc.payment(&format!("{A}:1")).expect("A").state, PaymentState::Unconfirmed);

    // Phase 3: B mined and two blocks deep: the order is paid, and A is taken back.
    advance_past_missing_for(&shop);
    let dir = tempfile::tempdir().expect("tempdir");
    server.set_phase(phase3(dir.path()));
    let settled = watch(&shop);
    assert_eq!((settled.confirmed, settled.rejected), (1, 1), "{settled:?}");
    assert_eq!(status(&shop, &replaced), OrderStatus::Paid);
    assert_eq!(shop.svc.payment(&format!("{A}:1")).expect("A").state, PaymentState::Rejected);
    assert_eq!(status(&shop, &unpaid), OrderStatus::New);
}

#[test]
fn a_dropped_payment_fails_its_order_after_several_looks_and_is_recorded_late_when_it_comes_back() {
    let server = esplora_fixtures::start(esplora_fixtures::phase("phase1"));
    let shop = shop(server.url());
    let _paid = order(&shop, "50");
    let dropped = order(&shop, "25");
    assert_eq!(watch(&shop).recorded, 2);
    // An API that knows neither A nor anything else for address 1: A was dropped.
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("dropped");
    copy_tree(&esplora_fixtures::phase("phase2"), &empty);
    std::fs::write(empty.join(format!("address/{}/txs.json", BIP84_ADDRESSES[1])), "[]").expect("write");
    server.set_phase(empty);
    for pass in 1..=MISSING_PASSES {
        assert_eq!(watch(&shop).rejected, 0, "pass {pass}: unknown for too short a time");
        assert_eq!(status(&shop, &dropped), OrderStatus::Pending);
    }
    advance_past_missing_for(&shop);
    assert_eq!(watch(&shop).rejected, 1);
    assert_eq!(status(&shop, &dropped), OrderStatus::Failed);

    // A comes back (the customer's wallet broadcast it again; or this API was behind):
    // money that came is recorded anew, for the merchant to see, not ignored. Seen by
    // another process on the database, or this one after a restart: the mark that it
    // vanished is stored.
    server.set_phase(esplora_fixtures::phase("phase1"));
    let mut config = common::config(Environment::Live, &shop.clock);
    config.bitcoin_watch = Some(BitcoinWatch { esplora_url: server.url(), confirmations: 2 });
    let another = coinorder::Service::open(common::db_path(&shop.dir), config).expect("another process");
    let report = another.watch_chain_due().expect("watch");
    assert_eq!((report.recorded, report.errors.len()), (1, 0), "{report:?}");
    let again = shop.svc.payment(&format!("{A}:1:again-2")).expect("recorded anew");
    assert_eq!((again.amount.to_string().as_str(), again.state), ("0.0005", PaymentState::Unconfirmed));
    assert_eq!(shop.svc.payment(&format!("{A}:1")).expect("A").state, PaymentState::Rejected);
    assert_eq!(status(&shop, &dropped), OrderStatus::Failed, "FAILED stays until the merchant marks it paid");
    let types: Vec<String> =
        shop.svc.order_events(&dropped).expect("events").iter().map(|e| e.event_type.as_str().to_string()).collect();
    assert_eq!(types, ["order.pending", "order.failed", "order.paid_late"]);
    assert_eq!(watch(&shop), ChainWatchReport::default(), "recorded once");
}

#[test]
fn an_unreachable_api_is_reported_without_its_secrets_and_backed_off() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = unused.local_addr().expect("addr").port();
    drop(unused);
    let shop = shop(format!("http://user:hunter2@127.0.0.1:{port}/api/KEY123"));
    order(&shop, "50");
    let report = shop.svc.watch_chain_due().expect("an endpoint failure is no Err");
    assert_eq!(report.errors.len(), 1, "{report:?}");
    let text = format!("{report:?}");
    assert!(!text.contains("hunter2") && !text.contains("KEY123"), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert_eq!(shop.svc.watch_chain_due().expect("watch").backing_off, vec!["bitcoin".to_string()]);
    let debug = format!("{:?}", shop.svc.config().bitcoin_watch);
    assert!(!debug.contains("hunter2") && !debug.contains("KEY123"), "{debug}");
}

#[test]
fn a_payment_mined_before_its_address_was_handed_out_does_not_pay_the_order() {
    // Phase 2, with T0 (0.001 BTC to address 0) mined three days before the shop's
    // clock: the key had received on that address before coinorder handed it out.
    let dir = tempfile::tempdir().expect("tempdir");
    let before = dir.path().join("before");
    copy_tree(&esplora_fixtures::phase("phase2"), &before);
    let history = before.join(format!("address/{}/txs.json", BIP84_ADDRESSES[0]));
    let mut txs: Value = serde_json::from_str(&std::fs::read_to_string(&history).expect("read")).expect("json");
    let three_days_before = common::T0_MS / 1000 - 3 * 24 * 3600;
    for tx in txs.as_array_mut().expect("array") {
        if tx["txid"] == T0 {
            tx["status"]["block_time"] = json!(three_days_before);
        }
    }
    std::fs::write(&history, txs.to_string()).expect("write");
    let server = esplora_fixtures::start(before);
    let shop = shop(server.url());
    let reused = order(&shop, "50");
    assert_eq!(shop.svc.order(&reused).expect("order").invoice.address, BIP84_ADDRESSES[0]);

    let report = shop.svc.watch_chain_due().expect("watch");
    assert_eq!(report.recorded, 0, "{report:?}");
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(report.errors[0].contains(&format!("payment {T0}:0 to {}", BIP84_ADDRESSES[0])), "{report:?}");
    assert!(report.errors[0].contains("was mined before order"), "{report:?}");
    assert_eq!(status(&shop, &reused), OrderStatus::New);
    assert!(shop.svc.payment(&format!("{T0}:0")).is_err(), "not recorded");
    // Told once, not on every pass.
    assert_eq!(watch(&shop), ChainWatchReport::default());
    assert_eq!(status(&shop, &reused), OrderStatus::New);
}

#[test]
fn a_replacement_paying_less_fails_the_order_instead_of_leaving_it_pending() {
    // Phase 1: A (50,000 sat, the whole invoice) in the mempool. Then A is gone and its
    // replacement B pays only 25,000 sat, mined two blocks deep. Before, A's rejection
    // waited for B forever once B was confirmed: the order stayed PENDING, counting
    // 50,000 sat that never arrived.
    let server = esplora_fixtures::start(esplora_fixtures::phase("phase1"));
    let shop = shop(server.url());
    let _paid = order(&shop, "50");
    let short = order(&shop, "25"); // 0.0005 BTC to address 1
    assert_eq!(watch(&shop).recorded, 2);
    let dir = tempfile::tempdir().expect("tempdir");
    let smaller = phase3(dir.path());
    let history = smaller.join(format!("address/{}/txs.json", BIP84_ADDRESSES[1]));
    let mut txs: Value = serde_json::from_str(&std::fs::read_to_string(&history).expect("read")).expect("json");
    for tx in txs.as_array_mut().expect("array") {
        if tx["txid"] == B {
            tx["vout"][1]["value"] = json!(25_000);
        }
    }
    std::fs::write(&history, txs.to_string()).expect("write");
    server.set_phase(smaller);
    for _ in 0..MISSING_PASSES {
        watch(&shop);
    }
    advance_past_missing_for(&shop);
    watch(&shop);
    let b = shop.svc.payment(&format!("{B}:1")).expect("B");
    assert_eq!((b.amount.to_string().as_str(), b.state), ("0.00025", PaymentState::Confirmed));
    assert_eq!(shop.svc.payment(&format!("{A}:1")).expect("A").state, PaymentState::Rejected);
    assert_eq!(status(&shop, &short), OrderStatus::Failed);
}

#[test]
fn a_bitcoin_payment_is_followed_up_however_many_other_payments_wait_before_it() {
    let server = esplora_fixtures::start(esplora_fixtures::phase("phase1"));
    let shop = shop(server.url());
    // T0 pays it in phase 1, and confirms in phase 2.
    let paid = order(&shop, "50");
    // 1,001 live ETH orders, each with an unconfirmed payment its host recorded first:
    // more than one pass follows up, all older than T0.
    shop.svc.set_rate("ETH", "USD", "2500".parse().expect("rate"), None).expect("rate");
    shop.svc.set_wallet("ETH", &common::wallets::ethereum_account_xpub()).expect("ETH wallet");
    for n in 0..1001 {
        let order_id = order_in(&shop, "ETH", "25");
        let invoice = shop.svc.order(&order_id).expect("order").invoice;
        assert!(invoice.derivation_index.is_some(), "a derived address, which the watcher follows up");
        let id = format!("0x{n:064x}");
        shop.svc.record_payment(&order_id, &id, "0.001".parse().expect("amount"), false).expect("record");
    }
    shop.clock.advance_ms(1);
    assert_eq!(watch(&shop).recorded, 1, "T0");
    server.set_phase(esplora_fixtures::phase("phase2"));
    assert_eq!(watch(&shop).confirmed, 1, "T0 is two blocks deep");
    assert_eq!(status(&shop, &paid), OrderStatus::Paid);
}

#[test]
fn a_payment_the_host_rejected_stays_rejected_though_the_chain_shows_it() {
    let server = esplora_fixtures::start(esplora_fixtures::phase("phase1"));
    let shop = shop(server.url());
    let refused = order(&shop, "50"); // T0 pays it
    assert_eq!(watch(&shop).recorded, 1);
    // The merchant refuses the payment (say, from an address it may not take money from).
    shop.svc.reject_payment(&format!("{T0}:0")).expect("reject");
    assert_eq!(status(&shop, &refused), OrderStatus::Failed);
    for _ in 0..MISSING_PASSES {
        assert_eq!(watch(&shop), ChainWatchReport::default(), "not recorded anew");
    }
    assert!(shop.svc.payment(&format!("{T0}:0:again-2")).is_err());
}

#[test]
fn a_tip_the_api_does_not_serve_confirms_nothing() {
    let server = esplora_fixtures::start(esplora_fixtures::phase("phase1"));
    let shop = shop(server.url());
    let paid = order(&shop, "50");
    assert_eq!(watch(&shop).recorded, 1);
    // Phase 2 (T0 mined at 870001), from an API that names a tip far ahead of its blocks.
    let dir = tempfile::tempdir().expect("tempdir");
    let ahead = dir.path().join("ahead");
    copy_tree(&esplora_fixtures::phase("phase2"), &ahead);
    std::fs::write(ahead.join("blocks/tip/height.txt"), "99999999").expect("tip");
    server.set_phase(ahead);
    let report = shop.svc.watch_chain_due().expect("watch");
    assert_eq!(report.confirmed, 0, "{report:?}");
    assert!(report.errors.iter().any(|e| e.contains("block 99999999, is not a block it serves")), "{report:?}");
    assert_eq!(shop.svc.payment(&format!("{T0}:0")).expect("T0").state, PaymentState::Unconfirmed);
    assert_eq!(status(&shop, &paid), OrderStatus::Pending);
}

#[test]
fn a_payment_the_api_answers_badly_about_holds_up_no_other() {
    let server = esplora_fixtures::start(esplora_fixtures::phase("phase1"));
    let shop = shop(server.url());
    let paid = order(&shop, "50");
    let replaced = order(&shop, "25");
    assert_eq!(watch(&shop).recorded, 2);
    server.set_phase(esplora_fixtures::phase("phase2"));
    watch(&shop);
    assert_eq!(status(&shop, &paid), OrderStatus::Paid);
    // Phase 3 (B two blocks deep), where A's status, followed up first, is confirmed
    // without a block height: A is reported, B is confirmed all the same.
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = phase3(dir.path());
    std::fs::write(broken.join(format!("tx/{A}/status.json")), r#"{"confirmed":true}"#).expect("status");
    server.set_phase(broken);
    let report = shop.svc.watch_chain_due().expect("watch");
    assert_eq!(report.confirmed, 1, "{report:?}");
    assert_eq!(shop.svc.payment(&format!("{B}:1")).expect("B").state, PaymentState::Confirmed);
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(report.errors[0].contains(&format!("{A}:1")) && report.errors[0].contains(&replaced), "{report:?}");
    assert!(report.backing_off.is_empty(), "{report:?}");
    assert_eq!(status(&shop, &replaced), OrderStatus::Paid);
}

#[test]
fn an_api_that_fails_for_address_after_address_ends_the_pass_and_backs_off() {
    // Each address answering an error (or waiting out its timeout) is the endpoint
    // failing: the reading of addresses ends at the third in a row instead of trying every
    // invoice; the payments seen before are followed up all the same.
    let server = esplora_fixtures::start(esplora_fixtures::phase("phase1"));
    let shop = shop(server.url());
    let paid = order(&shop, "50");
    order(&shop, "25");
    order(&shop, "10");
    assert_eq!(watch(&shop).recorded, 2);
    // Phase 2 (T0 two blocks deep), where every address's history answers 500.
    let dir = tempfile::tempdir().expect("tempdir");
    let failing = dir.path().join("failing");
    copy_tree(&esplora_fixtures::phase("phase2"), &failing);
    for address in BIP84_ADDRESSES {
        let history = failing.join(format!("address/{address}"));
        std::fs::create_dir_all(&history).expect("dir");
        let _ = std::fs::remove_file(history.join("txs.json"));
        std::fs::write(history.join("txs.500.txt"), "Internal Server Error").expect("500");
    }
    server.set_phase(failing);
    let report = shop.svc.watch_chain_due().expect("watch");
    assert_eq!(report.errors.len(), 3, "two addresses, then the pass: {report:?}");
    assert_eq!(report.confirmed, 1, "T0 is followed up all the same: {report:?}");
    assert_eq!(status(&shop, &paid), OrderStatus::Paid);
    assert_eq!(shop.svc.watch_chain_due().expect("watch").backing_off, vec!["bitcoin".to_string()]);
}
