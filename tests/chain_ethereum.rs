//! The Ethereum chain watcher against a real local chain (issue 14): anvil, started by
//! the test from node_modules (`npm ci`), a test ERC-20 deployed from its checked-in
//! bytecode, live orders with addresses derived from a watch-only xpub, and payments
//! sent from anvil's funded accounts. Each order must go NEW → PENDING → PAID after the
//! configured confirmations; an underpayment stays PENDING, then FAILED at expiry; a
//! reorganisation that drops a payment takes it back.

#[path = "support/anvil.rs"]
mod anvil;
mod common;

use anvil::Anvil;
use coinorder::{
    ChainWatchReport, CreateOrder, Environment, EthereumWatch, OrderStatus, OrderWithInvoice, PaymentState,
    MISSING_FOR, MISSING_PASSES,
};
use common::wallets::ethereum_account_xpub;
use common::{harness_with, Harness, THIRTY_MIN_MS};

/// Blocks deep a payment must be, in these tests.
const CONFIRMATIONS: u32 = 3;
/// One ether, in wei.
const ETHER: u128 = 1_000_000_000_000_000_000;

struct Chain {
    anvil: Anvil,
    shop: Harness,
    merchant: coinorder::Merchant,
    /// anvil's first funded account, which pays.
    payer: String,
    token: String,
}

/// anvil with the test token, and a live shop watching it: ETH at 2,500 USD, the token
/// as USDT at 1 USD, both with wallets from one xpub.
fn chain() -> Chain {
    chain_with_token_decimals(6)
}

/// [`chain`] with a token of `decimals` places watched as USDT.
fn chain_with_token_decimals(decimals: u8) -> Chain {
    chain_with(decimals, CONFIRMATIONS)
}

/// [`chain`] with a token of `decimals` places and payments confirmed `confirmations` deep.
fn chain_with(decimals: u8, confirmations: u32) -> Chain {
    let anvil = Anvil::start();
    let payer = anvil.accounts()[0].clone();
    let token = anvil.deploy_token_with_decimals(&payer, decimals);
    let (url, contract) = (anvil.url(), token.clone());
    let shop = harness_with(Environment::Live, move |config| {
        config.ethereum_watch =
            Some(EthereumWatch { rpc_url: url, confirmations, tokens: vec![("USDT".to_string(), contract)] });
    });
    shop.svc.set_rate("ETH", "USD", "2500".parse().expect("rate"), None).expect("rate");
    shop.svc.set_rate("USDT", "USD", "1".parse().expect("rate"), None).expect("rate");
    let xpub = ethereum_account_xpub();
    shop.svc.set_wallet("ETH", &xpub).expect("ETH wallet");
    shop.svc.set_wallet("USDT", &xpub).expect("USDT wallet");
    let merchant = shop.svc.authenticate(Some(&shop.key)).expect("authenticate");
    Chain { anvil, shop, merchant, payer, token }
}

impl Chain {
    /// A live order of `usd` paid in `coin`.
    fn order(&self, coin: &str, usd: &str) -> OrderWithInvoice {
        let request = CreateOrder {
            currency: "USD".into(),
            amount: usd.parse().expect("amount"),
            pay_currency: Some(coin.into()),
            ..Default::default()
        };
        let created = self.shop.svc.create_order(&self.merchant, &request).expect("create").order;
        assert!(created.invoice.derivation_index.is_some(), "a derived address");
        assert!(created.invoice.address.starts_with("0x"), "{}", created.invoice.address);
        created
    }

    fn watch(&self) -> ChainWatchReport {
        let report = self.shop.svc.watch_chain_due().expect("watch");
        assert!(report.errors.is_empty(), "{report:?}");
        report
    }

    fn status(&self, order: &OrderWithInvoice) -> OrderStatus {
        self.shop.svc.order(&order.order.order_id).expect("order").order.status
    }
}

#[test]
fn eth_and_token_payments_go_pending_then_paid_after_the_confirmations() {
    let chain = chain();
    let eth = chain.order("ETH", "25"); // 0.01 ETH
    let usdt = chain.order("USDT", "12.5"); // 12.5 USDT
    assert_eq!(eth.invoice.amount.to_string(), "0.01");
    assert_eq!(chain.watch(), ChainWatchReport::default(), "nothing paid yet");

    let eth_tx = chain.anvil.send_eth(&chain.payer, &eth.invoice.address, ETHER / 100);
    let token_tx = chain.anvil.send_token(&chain.token, &chain.payer, &usdt.invoice.address, 12_500_000);
    let seen = chain.watch();
    assert_eq!((seen.recorded, seen.confirmed), (2, 0), "{seen:?}");
    assert_eq!(chain.status(&eth), OrderStatus::Pending);
    assert_eq!(chain.status(&usdt), OrderStatus::Pending);
    let payment = chain.shop.svc.payment(&eth_tx).expect("recorded by its hash");
    assert_eq!((payment.amount.to_string().as_str(), payment.state), ("0.01", PaymentState::Unconfirmed));
    assert_eq!(chain.shop.svc.payment(&token_tx).expect("token payment").amount.to_string(), "12.5");

    // The token transfer is 1 block deep, the ETH one 2: one more block makes the ETH
    // payment 3 deep, the token one only 2.
    chain.anvil.mine(1);
    let report = chain.watch();
    assert_eq!((report.recorded, report.confirmed), (0, 1), "{report:?}");
    assert_eq!(chain.status(&eth), OrderStatus::Paid);
    assert_eq!(chain.status(&usdt), OrderStatus::Pending);
    chain.anvil.mine(1);
    assert_eq!(chain.watch().confirmed, 1);
    assert_eq!(chain.status(&usdt), OrderStatus::Paid);
    let types: Vec<String> = chain
        .shop
        .svc
        .order_events(&usdt.order.order_id)
        .expect("events")
        .iter()
        .map(|e| e.event_type.as_str().to_string())
        .collect();
    assert_eq!(types, ["order.pending", "order.paid"]);
    assert_eq!(chain.watch(), ChainWatchReport::default(), "a second look changes nothing");
}

#[test]
fn an_underpayment_stays_pending_then_fails_at_expiry() {
    let chain = chain();
    let order = chain.order("USDT", "25");
    chain.anvil.send_token(&chain.token, &chain.payer, &order.invoice.address, 10_000_000);
    // A transfer to an address that is no invoice's is not ours.
    chain.anvil.send_token(&chain.token, &chain.payer, &chain.payer, 5_000_000);
    assert_eq!(chain.watch().recorded, 1);
    chain.anvil.mine(u64::from(CONFIRMATIONS));
    assert_eq!(chain.watch().confirmed, 1);
    assert_eq!(chain.status(&order), OrderStatus::Pending, "10 of 25 USDT confirmed");
    chain.shop.clock.advance_ms(THIRTY_MIN_MS + 1);
    chain.shop.svc.expire_due(chain.shop.svc.now()).expect("expire");
    assert_eq!(chain.status(&order), OrderStatus::Failed);
}

#[test]
fn a_reorganisation_that_drops_a_payment_takes_it_back_and_its_return_is_recorded_late() {
    let chain = chain();
    let order = chain.order("ETH", "25");
    let tx = chain.anvil.send_eth(&chain.payer, &order.invoice.address, ETHER / 100);
    let raw = chain.anvil.rpc("eth_getRawTransactionByHash", serde_json::json!([tx]));
    assert_eq!(chain.watch().recorded, 1);
    assert_eq!(chain.status(&order), OrderStatus::Pending);
    // anvil replaces the payment's block with an empty one: the transaction is gone.
    chain.anvil.reorg(1);
    assert!(chain.anvil.receipt(&tx).is_null(), "the reorg dropped the transaction");
    for pass in 1..=MISSING_PASSES {
        assert_eq!(chain.watch().rejected, 0, "pass {pass}: one look, or a short time, is not enough to give up");
        assert_eq!(chain.status(&order), OrderStatus::Pending);
    }
    // A pass counts for at most half the wait.
    let half = i64::try_from(MISSING_FOR.as_millis() / 2).expect("ms");
    chain.shop.clock.advance_ms(half);
    assert_eq!(chain.watch().rejected, 0, "half the wait");
    chain.shop.clock.advance_ms(half);
    assert_eq!(chain.watch().rejected, 1);
    assert_eq!(chain.shop.svc.payment(&tx).expect("payment").state, PaymentState::Rejected);
    assert_eq!(chain.status(&order), OrderStatus::Failed);

    // The same signed transaction broadcast again and mined: the money came after all.
    let again = chain.anvil.rpc("eth_sendRawTransaction", serde_json::json!([raw]));
    assert_eq!(again.as_str(), Some(tx.as_str()), "the same transaction");
    chain.anvil.mine(1);
    assert_eq!(chain.watch().recorded, 1);
    let revived = chain.shop.svc.payment(&format!("{tx}:again-2")).expect("recorded anew");
    assert_eq!(revived.amount.to_string(), "0.01");
    assert_eq!(chain.status(&order), OrderStatus::Failed, "FAILED stays until the merchant marks it paid");
    let last = chain.shop.svc.order_events(&order.order.order_id).expect("events").pop().expect("an event");
    assert_eq!(last.event_type.as_str(), "order.paid_late");
    chain.anvil.mine(u64::from(CONFIRMATIONS));
    assert_eq!(chain.watch().confirmed, 1);
    assert_eq!(chain.shop.svc.payment(&format!("{tx}:again-2")).expect("again").state, PaymentState::Confirmed);
}

#[test]
fn a_payment_after_expiry_is_recorded_late_and_an_endpoint_down_backs_off() {
    let chain = chain();
    let order = chain.order("ETH", "25");
    chain.shop.clock.advance_ms(THIRTY_MIN_MS + 1);
    chain.shop.svc.expire_due(chain.shop.svc.now()).expect("expire");
    assert_eq!(chain.status(&order), OrderStatus::Expired);
    let tx = chain.anvil.send_eth(&chain.payer, &order.invoice.address, ETHER / 100);
    assert_eq!(chain.watch().recorded, 1);
    assert!(!chain.shop.svc.payment(&tx).expect("payment").counts, "late: the merchant decides");
    let last = chain.shop.svc.order_events(&order.order.order_id).expect("events");
    assert_eq!(last.last().map(|e| e.event_type.as_str()), Some("order.paid_late"));
    assert_eq!(chain.status(&order), OrderStatus::Expired);

    // The node goes away: the pass reports it, without the URL's path, then backs off.
    drop(chain.anvil);
    let report = chain.shop.svc.watch_chain_due().expect("a failing endpoint is no Err");
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(report.errors[0].starts_with("ethereum: "), "{report:?}");
    let again = chain.shop.svc.watch_chain_due().expect("watch");
    assert_eq!((again.errors.len(), again.backing_off.as_slice()), (0, &["ethereum".to_string()][..]));
}

/// `coinorder serve` runs the watcher itself: an order paid before it starts is PAID
/// once it is up, from its first pass, with nothing but the settings file.
#[test]
fn serve_watches_the_chain_given_in_its_settings_file() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let anvil = Anvil::start();
    let payer = anvil.accounts()[0].clone();
    // A SQLite file of its own on either suite: the binary is what is under test here.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("shop.db");
    let order = {
        let mut config = coinorder::Config::new(Environment::Live);
        config.rate_limit = coinorder::RateLimit::OFF;
        let service = coinorder::Service::open(&db, config).expect("open");
        service.set_rate("ETH", "USD", "2500".parse().expect("rate"), None).expect("rate");
        service.set_wallet("ETH", &ethereum_account_xpub()).expect("wallet");
        let key = service
            .create_key(coinorder::NewApiKey { user_id: 5, environment: Environment::Live, webhook_url: None })
            .expect("key");
        let merchant = service.authenticate(Some(key.plain_key.expose())).expect("authenticate");
        let request = CreateOrder {
            currency: "USD".into(),
            amount: "25".parse().expect("amount"),
            pay_currency: Some("ETH".into()),
            ..Default::default()
        };
        service.create_order(&merchant, &request).expect("create").order
    };
    anvil.send_eth(&payer, &order.invoice.address, ETHER / 100);
    let settings = dir.path().join("coinorder.toml");
    let text =
        format!("[server]\npay_currencies = [\"ETH\"]\n[ethereum]\nrpc_url = \"{}\"\nconfirmations = 1\n", anvil.url());
    std::fs::write(&settings, text).expect("settings");

    let mut serve = Command::new(env!("CARGO_BIN_EXE_coinorder"))
        .args(["serve", "--env", "live", "--addr", "127.0.0.1:0", "--allow-open-permissions"])
        .arg("--db")
        .arg(&db)
        .arg("--config")
        .arg(&settings)
        .env_remove("COINORDER_DB")
        .env_remove("COINORDER_SECRET_KEY_FILE")
        .env_remove("COINORDER_ENV")
        .env_remove("COINORDER_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    let mut line = String::new();
    BufReader::new(serve.stdout.take().expect("stdout")).read_line(&mut line).expect("listening line");
    assert!(line.starts_with("coinorder listening on http://"), "{line:?}");

    let mut config = coinorder::Config::new(Environment::Live);
    config.rate_limit = coinorder::RateLimit::OFF;
    let service = coinorder::Service::open(&db, config).expect("reopen");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        let status = service.order(&order.order.order_id).expect("order").order.status;
        if status == OrderStatus::Paid || Instant::now() > deadline {
            break status;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = Command::new("kill").args(["-TERM", &serve.id().to_string()]).status();
    let output = serve.wait_with_output().expect("serve exits");
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(status, OrderStatus::Paid, "serve's log: {log}");
    assert!(log.contains(" chain 1 payment(s) recorded, 1 confirmed, 0 rejected"), "{log}");
    assert_eq!(output.status.code(), Some(0), "{log}");
}

/// The event types of an order, in order.
fn event_types(chain: &Chain, order: &OrderWithInvoice) -> Vec<String> {
    let events = chain.shop.svc.order_events(&order.order.order_id).expect("events");
    events.iter().map(|e| e.event_type.as_str().to_string()).collect()
}

#[test]
fn the_newest_invoice_is_watched_however_many_are_open() {
    // Before, a pass read the 1,000 invoices expiring first: a shop with more open
    // invoices than that never looked at its newest ones in the blocks it scanned.
    let chain = chain();
    for _ in 0..1_000 {
        chain.order("ETH", "1");
    }
    let newest = chain.order("ETH", "25");
    chain.anvil.send_eth(&chain.payer, &newest.invoice.address, ETHER / 100);
    assert_eq!(chain.watch().recorded, 1);
    assert_eq!(chain.status(&newest), OrderStatus::Pending);
}

#[test]
fn a_payment_to_a_paid_or_cancelled_orders_address_is_recorded_for_the_merchant() {
    let chain = chain();
    let paid = chain.order("ETH", "25");
    chain.anvil.send_eth(&chain.payer, &paid.invoice.address, ETHER / 100);
    chain.watch();
    chain.anvil.mine(u64::from(CONFIRMATIONS));
    chain.watch();
    assert_eq!(chain.status(&paid), OrderStatus::Paid);
    let cancelled = chain.order("USDT", "5");
    chain.shop.svc.cancel_order(&chain.merchant, &cancelled.order.order_id).expect("cancel");

    // One more payment to the paid order (the customer paid twice), and one to the
    // cancelled order (the wallet was already sending when the customer pressed Cancel).
    let again = chain.anvil.send_eth(&chain.payer, &paid.invoice.address, ETHER / 200);
    let late = chain.anvil.send_token(&chain.token, &chain.payer, &cancelled.invoice.address, 5_000_000);
    assert_eq!(chain.watch().recorded, 2);
    let excess = chain.shop.svc.payment(&again).expect("recorded");
    assert_eq!((excess.amount.to_string().as_str(), excess.counts), ("0.005", false));
    assert_eq!(chain.status(&paid), OrderStatus::Paid);
    let refund = chain.shop.svc.payment(&late).expect("recorded");
    assert_eq!((refund.amount.to_string().as_str(), refund.counts), ("5", false));
    assert_eq!(chain.status(&cancelled), OrderStatus::Cancelled);
    assert_eq!(event_types(&chain, &cancelled), ["order.cancelled", "order.paid_late"]);
}

#[test]
fn one_token_transaction_paying_two_invoices_pays_both() {
    // A contract that, called, emits two `Transfer` logs of one token in one transaction,
    // as an exchange's batch payout does: 10 units to one address, 20 to another.
    let chain = chain();
    let first = chain.order("USDT", "10");
    let second = chain.order("USDT", "20");
    let word = |hex: &str| format!("{:0>64}", hex.trim_start_matches("0x"));
    let transfer = |to: &str, units: u64| {
        format!(
            "7f{amount}600052 7f{to} 7f{from} 7f{topic} 6020 6000 a3",
            amount = word(&format!("{units:x}")),
            to = word(&to.to_ascii_lowercase()),
            from = word(&chain.payer),
            topic = word(coinorder::chain::ethereum::TRANSFER_TOPIC),
        )
        .replace(' ', "")
    };
    let code = format!(
        "0x{}{}00",
        transfer(&first.invoice.address, 10_000_000),
        transfer(&second.invoice.address, 20_000_000)
    );
    // The watcher asks the token's decimals once: while it is still the token.
    assert_eq!(chain.watch(), ChainWatchReport::default());
    // The token's own address now runs that code: the watcher knows it as USDT.
    chain.anvil.rpc("anvil_setCode", serde_json::json!([chain.token, code]));
    let tx = chain.anvil.send(serde_json::json!({"from": chain.payer, "to": chain.token}));
    assert_eq!(chain.watch().recorded, 2);
    assert_eq!(chain.status(&first), OrderStatus::Pending);
    assert_eq!(chain.status(&second), OrderStatus::Pending);
    let payments: Vec<(String, String)> = [&first, &second]
        .iter()
        .flat_map(|order| chain.shop.svc.order_payments(&order.order.order_id).expect("payments"))
        .map(|payment| (payment.txid, payment.amount.to_string()))
        .collect();
    assert_eq!(payments.len(), 2, "{payments:?}");
    assert!(payments.iter().any(|(_, amount)| amount == "10") && payments.iter().any(|(_, amount)| amount == "20"));
    assert!(payments.iter().all(|(txid, _)| txid.starts_with(&tx)), "{payments:?}");
    chain.anvil.mine(u64::from(CONFIRMATIONS));
    assert_eq!(chain.watch().confirmed, 2);
    assert_eq!(chain.status(&first), OrderStatus::Paid);
    assert_eq!(chain.status(&second), OrderStatus::Paid);
}

#[test]
fn a_token_whose_contract_has_other_decimals_than_its_coin_is_read_in_the_contracts() {
    // USDT with 18 decimals, as on BNB Smart Chain: 12.5 tokens are 12.5 × 10^18 units.
    let chain = chain_with_token_decimals(18);
    let usdt = chain.order("USDT", "12.5");
    // 12,500,000 units: 12.5 USDT if read with the coin's 6 places, a dust of
    // 0.0000000000125 tokens in truth, cut to nothing.
    chain.anvil.send_token(&chain.token, &chain.payer, &usdt.invoice.address, 12_500_000);
    assert_eq!(chain.watch(), ChainWatchReport::default(), "dust records nothing");
    assert_eq!(chain.status(&usdt), OrderStatus::New);
    // 12.5 tokens and one unit: the unit is beyond USDT's places and is cut.
    let paid = chain.anvil.send_token(&chain.token, &chain.payer, &usdt.invoice.address, 12_500_000_000_000_000_001);
    assert_eq!(chain.watch().recorded, 1);
    let payment = chain.shop.svc.payment(&paid).expect("recorded");
    assert_eq!(payment.amount, "12.5".parse().expect("decimal"), "{}", payment.amount);
    chain.anvil.mine(u64::from(CONFIRMATIONS));
    assert_eq!(chain.watch().confirmed, 1);
    assert_eq!(chain.status(&usdt), OrderStatus::Paid);
}

#[test]
fn a_token_contract_that_declares_no_decimals_is_reported_and_ether_is_still_watched() {
    let chain = chain();
    let eth = chain.order("ETH", "25"); // 0.01 ETH
    chain.order("USDT", "10");
    // The token's address now holds a contract that stops at once: no `decimals()`.
    chain.anvil.rpc("anvil_setCode", serde_json::json!([chain.token, "0x00"]));
    chain.anvil.send_eth(&chain.payer, &eth.invoice.address, ETHER / 100);
    let report = chain.shop.svc.watch_chain_due().expect("watch");
    assert_eq!(report.recorded, 1, "{report:?}");
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(report.errors[0].contains(&format!("token USDT at {} declares no decimals()", chain.token)), "{report:?}");
    assert!(report.backing_off.is_empty(), "the endpoint did not fail: {report:?}");
    assert_eq!(chain.status(&eth), OrderStatus::Pending);
}

#[test]
fn a_depth_beyond_one_passs_blocks_still_moves_the_scan_on() {
    // 250 confirmations: each pass scans at most 200 blocks, and used to rescan all 250,
    // so the cursor never moved and no payment was ever seen.
    let chain = chain_with(6, 250);
    chain.anvil.rpc("anvil_mine", serde_json::json!(["0x3e8", "0xc"])); // 1,000 blocks, 12 s apart
                                                                        // The shop's clock where the chain's is, as on a real host: the first scan starts
                                                                        // at the block of the oldest invoice.
    chain.shop.clock.set_ms(i64::try_from(latest_block_secs(&chain.anvil) * 1000).expect("ms"));
    let eth = chain.order("ETH", "25");
    assert_eq!(chain.watch(), ChainWatchReport::default());
    chain.anvil.send_eth(&chain.payer, &eth.invoice.address, ETHER / 100);
    chain.anvil.mine(300);
    let mut recorded = 0;
    for _ in 0..5 {
        recorded += chain.watch().recorded;
    }
    assert_eq!(recorded, 1);
    assert_eq!(chain.status(&eth), OrderStatus::Paid, "300 blocks deep, confirmed at 250");
}

#[test]
fn the_first_scan_reaches_back_to_the_oldest_watched_invoice() {
    // A shop took a live ETH order and was paid before any watcher ran; then its
    // endpoint is set. The payment is 150 blocks back: more than the 64 a first scan
    // looks back when no invoice is older.
    let anvil = Anvil::start();
    let payer = anvil.accounts()[0].clone();
    let shop = harness_with(Environment::Live, |_| {});
    shop.svc.set_rate("ETH", "USD", "2500".parse().expect("rate"), None).expect("rate");
    shop.svc.set_wallet("ETH", &ethereum_account_xpub()).expect("ETH wallet");
    let merchant = shop.svc.authenticate(Some(&shop.key)).expect("authenticate");
    // An hour of blocks before the order (12 s apart), then the order and its payment.
    anvil.rpc("anvil_mine", serde_json::json!(["0x12c", "0xc"]));
    let t0_secs = latest_block_secs(&anvil) + 12;
    shop.clock.set_ms(i64::try_from(t0_secs * 1000).expect("ms"));
    let request = CreateOrder {
        currency: "USD".into(),
        amount: "25".parse().expect("amount"),
        pay_currency: Some("ETH".into()),
        ..Default::default()
    };
    let order = shop.svc.create_order(&merchant, &request).expect("create").order;
    anvil.rpc("evm_setNextBlockTimestamp", serde_json::json!([t0_secs + 12]));
    let tx = anvil.send_eth(&payer, &order.invoice.address, ETHER / 100);
    anvil.rpc("anvil_mine", serde_json::json!(["0x96", "0xc"]));

    let mut config = common::config(Environment::Live, &shop.clock);
    config.ethereum_watch =
        Some(EthereumWatch { rpc_url: anvil.url(), confirmations: CONFIRMATIONS, tokens: Vec::new() });
    let watching = coinorder::Service::open(common::db_path(&shop.dir), config).expect("open with the endpoint");
    let mut recorded = 0;
    for _ in 0..3 {
        let report = watching.watch_chain_due().expect("watch");
        assert!(report.errors.is_empty(), "{report:?}");
        recorded += report.recorded;
    }
    assert_eq!(recorded, 1);
    assert_eq!(watching.payment(&tx).expect("recorded").amount.to_string(), "0.01");
    assert_eq!(watching.order(&order.order.order_id).expect("order").order.status, OrderStatus::Paid);
}

/// When anvil made its latest block, in Unix seconds.
fn latest_block_secs(anvil: &Anvil) -> u64 {
    let latest = anvil.rpc("eth_getBlockByNumber", serde_json::json!(["latest", false]));
    let hex = latest["timestamp"].as_str().expect("a timestamp").trim_start_matches("0x");
    u64::from_str_radix(hex, 16).expect("hex")
}

#[test]
fn a_token_with_more_decimals_than_an_amount_holds_is_reported_not_read() {
    let chain = chain_with_token_decimals(30);
    let usdt = chain.order("USDT", "10");
    chain.anvil.send_token(&chain.token, &chain.payer, &usdt.invoice.address, 10u128.pow(31));
    let report = chain.shop.svc.watch_chain_due().expect("watch");
    assert_eq!(report.recorded, 0, "{report:?}");
    assert!(report.errors.iter().any(|e| e.contains("declares no decimals() (or more than 28)")), "{report:?}");
    assert_eq!(chain.status(&usdt), OrderStatus::New);
}
