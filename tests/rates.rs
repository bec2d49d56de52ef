//! Acceptance tests of rates and deposit addresses (DESIGN §6, issue 3): the host's rate
//! table and rate-source callback, exact crypto amounts rounded up to the coin's
//! decimals, expiry of a rate, no default rates in live, the sandbox's fixed test rates,
//! and the address-source callback.

mod common;
mod lifecycle_common;

use std::sync::{Arc, Mutex};

use coinorder::money::Decimal;
use coinorder::{AddressSource, DepositAddress, Environment, RateSource, Service, Timestamp};
use common::*;
use lifecycle_common::*;
use serde_json::json;

/// Creates an order of `amount` `fiat` paid in `crypto`; returns its id.
fn order_in(h: &Harness, fiat: &str, amount: &str, crypto: &str) -> String {
    let created = h.create(&json!({"currency": fiat, "amount": dec(amount).to_string().parse::<serde_json::Number>().expect("number"), "pay_currency": crypto}));
    string(&created["data"], "order_id").to_string()
}

/// The invoice amount Get Order shows, as exact text.
fn quoted(h: &Harness, order_id: &str) -> String {
    num_text(&get_order(h, order_id)["invoice"]["amount"])
}

#[test]
fn a_host_set_rate_changes_the_invoice_amount_exactly() {
    let h = harness();
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        // crypto, fiat, rate (fiat per coin), fiat amount, expected crypto (rounded UP)
        ("USDT", "USD", "1.25", "10", "8"),
        ("USDT", "USD", "3", "10", "3.333334"),
        ("USDC", "EUR", "0.92", "19.99", "21.728261"), // 21.72826086...
        ("BTC", "USD", "30000", "10", "0.00033334"),   // 0.000333333...
        ("BTC", "NGN", "97000000", "1500.5", "0.00001547"), // 0.0000154690...
        ("ETH", "USD", "3000", "10", "0.003333333333333334"),
        ("ETH", "JPY", "450000", "1", "0.000002222222222223"),
        ("USDT", "KWD", "0.307", "1.001", "3.260587"), // 3.26058631...
        ("USDT", "USD", "0.999999", "1000000", "1000001.000002"), // 1000001.0000010000010...
    ];
    for (crypto, fiat, rate, amount, expected) in cases {
        let set = h.svc.set_rate(crypto, fiat, dec(rate), None).expect("set_rate");
        assert_eq!((set.crypto.as_str(), set.fiat.as_str(), set.rate), (*crypto, *fiat, dec(rate)));
        assert_eq!(h.svc.current_rate(crypto, fiat).expect("current_rate"), dec(rate));
        let id = order_in(&h, fiat, amount, crypto);
        assert_eq!(quoted(&h, &id), *expected, "{amount} {fiat} at {rate} {fiat}/{crypto}");
        let invoice = h.svc.order(&id).expect("order").invoice;
        assert_eq!(invoice.rate, dec(rate), "the invoice keeps its quoted rate");
        // Rounded up: covers the fiat amount, and one unit less would not.
        let unit = Decimal::new(1, coinorder::money::coin_decimals(crypto).expect("coin"));
        assert!(invoice.amount * dec(rate) >= dec(amount), "{crypto}: {} covers {amount}", invoice.amount);
        assert!((invoice.amount - unit) * dec(rate) < dec(amount), "{crypto}: {} is the smallest", invoice.amount);
    }
}

#[test]
fn a_rate_change_does_not_touch_existing_invoices() {
    let h = harness();
    h.svc.set_rate("USDT", "USD", dec("2"), None).expect("set_rate");
    let mut o = create_usd10(&h);
    assert_eq!(quoted(&h, &o.id), "5");
    h.svc.set_rate("USDT", "USD", dec("4"), None).expect("set_rate");
    assert_eq!(quoted(&h, &o.id), "5");
    tick(&h);
    // Payments are valued at the quoted rate: 5 USDT × 2 = 10 USD.
    pay(&h, &o.id, "tx-1", "5", true);
    step(&h, &mut o, Expect::received("PAID", "10", "USD"), &[("order.paid", "NEW")]);
    let fresh = order_in(&h, "USD", "10", "USDT");
    assert_eq!(quoted(&h, &fresh), "2.5");
}

#[test]
fn a_rate_changed_by_another_service_or_program_is_quoted_by_the_next_create() {
    // A create quotes at the rate row this service saw last and checks it inside its own
    // write; a row changed elsewhere is found there and the create quotes again.
    let h = harness();
    h.svc.set_rate("USDT", "USD", dec("2"), None).expect("set_rate");
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "USDT")), "5");

    // Another service on the same database.
    let other = Service::open(h.db(), config(Environment::Sandbox, &h.clock)).expect("open another service");
    other.set_rate("USDT", "USD", dec("4"), None).expect("set_rate elsewhere");
    let id = order_in(&h, "USD", "10", "USDT");
    assert_eq!(quoted(&h, &id), "2.5");
    assert_eq!(h.svc.order(&id).expect("order").invoice.rate, dec("4"));

    // Another program, in SQL: the rate raised, then removed (the sandbox's built-in
    // USDT/USD rate of 1 applies again), then set to expire before the order is made.
    let mut raw = RawDb::open(&h.db());
    raw.execute("UPDATE rates SET rate = ?1 WHERE crypto = 'USDT' AND fiat = 'USD'", &["8"]);
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "USDT")), "1.25");
    raw.execute("DELETE FROM rates WHERE crypto = ?1", &["USDT"]);
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "USDT")), "10");
    other.set_rate("USDT", "USD", dec("5"), Some(Timestamp(now_ms(&h) + 1_000))).expect("set_rate elsewhere");
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "USDT")), "2");
    raw.batch(&format!("UPDATE rates SET valid_until = {}", now_ms(&h) - 1));
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "USDT")), "10");

    // In live there is no built-in rate: one removed elsewhere is refused, naming the field.
    let live = harness_with(Environment::Live, |_| {});
    live.svc.set_rate("BTC", "EUR", dec("50000"), None).expect("set_rate");
    assert_eq!(quoted(&live, &order_in(&live, "EUR", "10", "BTC")), "0.0002");
    RawDb::open(&live.db()).execute("DELETE FROM rates WHERE crypto = ?1", &["BTC"]);
    let refused = live.post(&json!({"currency": "EUR", "amount": 10, "pay_currency": "BTC"}));
    assert_invalid(&refused, "pay_currency");
    // And one set elsewhere after a refusal is quoted at once.
    let other = Service::open(live.db(), config(Environment::Live, &live.clock)).expect("open another service");
    other.set_rate("BTC", "EUR", dec("40000"), None).expect("set_rate elsewhere");
    assert_eq!(quoted(&live, &order_in(&live, "EUR", "10", "BTC")), "0.00025");
}

#[test]
fn a_rate_that_would_never_be_used_or_shown_is_refused() {
    let h = harness();
    let now = now_ms(&h);
    for (until, rule) in [
        (now, "valid_until: must be in the future (a rate past it is never used)"),
        (-5_000, "valid_until: must be in the future (a rate past it is never used)"),
        (i64::MIN, "valid_until: must be in the future (a rate past it is never used)"),
        (253_402_300_800_000, "valid_until: must be before the year 10000"),
        (i64::MAX, "valid_until: must be before the year 10000"),
    ] {
        let refused = h.svc.set_rate("USDT", "USD", dec("2"), Some(Timestamp(until))).expect_err("refused");
        assert_eq!((refused.error_code(), refused.to_string()), ("PARAMETERS_MISSING", rule.to_string()), "{until}");
    }
    assert!(h.svc.list_rates().expect("list").is_empty(), "nothing stored");
    let last = h.svc.set_rate("USDT", "USD", dec("2"), Some(Timestamp(253_402_300_799_999))).expect("the last ms");
    assert_eq!(last.valid_until.map(Timestamp::to_iso).as_deref(), Some("9999-12-31T23:59:59.999Z"));
}

#[test]
fn an_expired_rate_falls_back() {
    // Sandbox: back to the built-in test rate.
    let h = harness();
    let until = now_ms(&h) + 60_000;
    let rate = h.svc.set_rate("USDT", "USD", dec("2"), Some(Timestamp(until))).expect("set_rate");
    assert_eq!(rate.valid_until, Some(Timestamp(until)));
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "USDT")), "5");
    h.clock.set_ms(until - 1);
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "USDT")), "5");
    h.clock.set_ms(until);
    assert_eq!(h.svc.current_rate("USDT", "USD").expect("rate"), dec("1"));
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "USDT")), "10", "expired rate: sandbox rate 1 again");
    // The expired row is still listed (the host sees what it set).
    assert_eq!(h.svc.list_rates().expect("list").len(), 1);

    // Live: nothing to fall back to.
    let live = harness_with(Environment::Live, |_| {});
    let until = now_ms(&live) + 60_000;
    live.svc.set_rate("USDT", "USD", dec("1"), Some(Timestamp(until))).expect("set_rate");
    live.create(&json!({"currency": "USD", "amount": 10}));
    live.clock.set_ms(until + 1);
    let resp = live.post(&json!({"currency": "USD", "amount": 10}));
    let message = assert_error(&resp, 400, "PARAMETERS_MISSING");
    assert!(message.contains("USDT/USD"), "names the pair: {message}");
}

#[derive(Debug)]
struct Feed {
    calls: Mutex<Vec<(String, String)>>,
}

impl RateSource for Feed {
    fn rate(&self, crypto: &str, fiat: &str) -> Option<Decimal> {
        self.calls.lock().expect("lock").push((crypto.to_string(), fiat.to_string()));
        match (crypto, fiat) {
            ("BTC", "USD") => Some(dec("40000")),
            ("ETH", "USD") => Some(dec("0")), // nonsense: ignored
            _ => None,
        }
    }
}

#[test]
fn a_rate_source_wins_over_the_table() {
    let feed = Arc::new(Feed { calls: Mutex::new(Vec::new()) });
    let source: Arc<dyn RateSource> = feed.clone();
    let h = harness_with(Environment::Sandbox, |c| c.rate_source = Some(source));
    h.svc.set_rate("BTC", "USD", dec("20000"), None).expect("set_rate");
    h.svc.set_rate("USDT", "USD", dec("2"), None).expect("set_rate");
    // The feed has BTC/USD: it wins over the table.
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "BTC")), "0.00025");
    assert!(feed.calls.lock().expect("lock").contains(&("BTC".to_string(), "USD".to_string())));
    // The feed has no USDT/USD: the table answers.
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "USDT")), "5");
    // A non-positive feed rate is not used: the sandbox rate (1000) answers.
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "ETH")), "0.01");
}

#[test]
fn a_rate_source_serves_live() {
    let feed: Arc<dyn RateSource> = Arc::new(Feed { calls: Mutex::new(Vec::new()) });
    let h = harness_with(Environment::Live, |c| c.rate_source = Some(feed));
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "BTC")), "0.00025");
    let resp = h.post(&json!({"currency": "USD", "amount": 10, "pay_currency": "USDT"}));
    let message = assert_error(&resp, 400, "PARAMETERS_MISSING");
    assert!(message.contains("USDT/USD"), "{message}");
}

#[test]
fn live_has_no_default_rates_until_one_is_set() {
    let h = harness_with(Environment::Live, |_| {});
    assert!(h.svc.list_rates().expect("list").is_empty());
    for (fiat, crypto) in [("USD", "USDT"), ("EUR", "BTC"), ("NGN", "USDC")] {
        let resp = h.post(&json!({"currency": fiat, "amount": 10, "pay_currency": crypto}));
        let message = assert_error(&resp, 400, "PARAMETERS_MISSING");
        assert!(message.contains(&format!("{crypto}/{fiat}")), "names the pair {crypto}/{fiat}: {message}");
        let err = h.svc.current_rate(crypto, fiat).expect_err("no live rate");
        assert_eq!(err.error_code(), "PARAMETERS_MISSING");
    }
    assert!(list_all(&h.svc, &h.key).is_empty(), "a refused create stores nothing");

    h.svc.set_rate("BTC", "EUR", dec("50000"), None).expect("set_rate");
    let created = h.create(&json!({"currency": "EUR", "amount": 10, "pay_currency": "BTC"}));
    let id = string(&created["data"], "order_id").to_string();
    assert_eq!(quoted(&h, &id), "0.0002");
    // Live orders have no fake address: without an address source the address is empty.
    assert_eq!(h.svc.order(&id).expect("order").invoice.address, "");
    // Only the pair that was set works.
    let resp = h.post(&json!({"currency": "USD", "amount": 10, "pay_currency": "BTC"}));
    assert_error(&resp, 400, "PARAMETERS_MISSING");
}

#[test]
fn sandbox_keeps_its_fixed_rates_unless_overridden() {
    let h = harness();
    let cases: &[(&str, &str, &str, &str)] = &[
        ("USD", "10", "USDT", "10"),
        ("USD", "10", "BTC", "0.001"),
        ("EUR", "10", "ETH", "0.011111111111111112"), // 900 EUR per ETH
        ("NGN", "15000", "USDC", "10"),               // 1500 NGN per USDC
    ];
    for (fiat, amount, crypto, expected) in cases {
        assert_eq!(quoted(&h, &order_in(&h, fiat, amount, crypto)), *expected, "{amount} {fiat} in {crypto}");
    }
    assert!(h.svc.list_rates().expect("list").is_empty(), "built-in rates are not rows of the table");

    h.svc.set_rate("BTC", "USD", dec("20000"), None).expect("override");
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "BTC")), "0.0005");
    let listed = h.svc.list_rates().expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].crypto.as_str(), listed[0].fiat.as_str(), listed[0].rate), ("BTC", "USD", dec("20000")));
    assert_eq!(listed[0].environment, Environment::Sandbox);

    h.svc.delete_rate("BTC", "USD").expect("delete");
    assert_eq!(quoted(&h, &order_in(&h, "USD", "10", "BTC")), "0.001", "the built-in rate applies again");
    assert_code(h.svc.delete_rate("BTC", "USD"), "PARAMETERS_MISSING", "delete a rate that is not set");
    // Every ISO 4217 fiat has a fake sandbox rate: common ones at a plausible magnitude
    // (18 MXN per USD), any other at one unit per USD (ISK).
    assert_eq!(quoted(&h, &order_in(&h, "MXN", "18", "USDT")), "1");
    assert_eq!(quoted(&h, &order_in(&h, "ISK", "10", "USDT")), "10");
}

#[test]
fn rates_are_per_environment() {
    let h = harness();
    let live = Service::open(h.db(), config(Environment::Live, &h.clock)).expect("live");
    live.set_rate("USDT", "USD", dec("2"), None).expect("live rate");
    assert!(h.svc.list_rates().expect("sandbox list").is_empty());
    assert_eq!(h.svc.current_rate("USDT", "USD").expect("sandbox rate"), dec("1"));
    assert_eq!(live.list_rates().expect("live list").len(), 1);
    assert_eq!(live.list_rates().expect("live list")[0].environment, Environment::Live);
}

#[test]
fn set_rate_validates_its_input() {
    let h = harness();
    for (crypto, fiat, rate, what) in [
        ("DOGE", "USD", "1", "unknown coin"),
        ("BTC", "usd", "1", "lower-case fiat"),
        ("BTC", "XYZ", "1", "unknown fiat"),
        ("BTC", "USD", "0", "zero rate"),
        ("BTC", "USD", "-5", "negative rate"),
    ] {
        assert_code(h.svc.set_rate(crypto, fiat, dec(rate), None), "PARAMETERS_MISSING", what);
    }
    assert!(h.svc.list_rates().expect("list").is_empty());
}

#[derive(Debug, Default)]
struct Wallet {
    calls: Mutex<Vec<(String, String, Decimal)>>,
    custom_uri: bool,
}

impl AddressSource for Wallet {
    fn deposit_address(&self, order_id: &str, currency: &str, amount: Decimal) -> Result<DepositAddress, String> {
        let mut calls = self.calls.lock().map_err(|e| e.to_string())?;
        calls.push((order_id.to_string(), currency.to_string(), amount));
        let address = format!("wallet-{currency}-{}", calls.len());
        let payment_uri = self.custom_uri.then(|| format!("custom:{address}?value={amount}"));
        Ok(DepositAddress { address, payment_uri })
    }
}

#[test]
fn an_address_source_supplies_the_invoice_address() {
    let wallet = Arc::new(Wallet::default());
    let source: Arc<dyn AddressSource> = wallet.clone();
    let h = harness_with(Environment::Sandbox, |c| c.address_source = Some(source));
    let id = order_in(&h, "EUR", "100", "BTC");
    let invoice = h.svc.order(&id).expect("order").invoice;
    assert_eq!(invoice.address, "wallet-BTC-1");
    assert_eq!(invoice.payment_uri, format!("bitcoin:wallet-BTC-1?amount={}", invoice.amount));
    assert_eq!(invoice.payment_uri, coinorder::payment_uri("BTC", "wallet-BTC-1", invoice.amount));
    assert_eq!(*wallet.calls.lock().expect("lock"), vec![(id.clone(), "BTC".to_string(), dec("0.01111112"))]);

    let resp = page(&h.svc, "GET", &format!("/pay/status?id={id}"));
    assert_eq!(resp.status, 200, "{}", text(&resp));
    let status = resp.json();
    assert_eq!(status["address"], json!("wallet-BTC-1"));
    assert_eq!(status["payment_uri"], json!(invoice.payment_uri));

    // A wallet that gives its own URI keeps it; in live too.
    let wallet: Arc<dyn AddressSource> = Arc::new(Wallet { custom_uri: true, ..Wallet::default() });
    let live = harness_with(Environment::Live, |c| c.address_source = Some(wallet));
    live.svc.set_rate("USDT", "USD", dec("1"), None).expect("rate");
    let id = order_in(&live, "USD", "10", "USDT");
    let invoice = live.svc.order(&id).expect("order").invoice;
    assert_eq!(invoice.address, "wallet-USDT-1");
    assert_eq!(invoice.payment_uri, "custom:wallet-USDT-1?value=10");
    let status = page(&live.svc, "GET", &format!("/pay/status?id={id}")).json();
    assert_eq!(status["address"], json!("wallet-USDT-1"));
    assert_eq!(status["payment_uri"], json!("custom:wallet-USDT-1?value=10"));
}

/// A wallet that, each time it is asked for an address (between a create's quote and its
/// write), changes the USDT/USD rate behind the service's back, `moves` times in all:
/// to 2, then 3, then 4, ...
#[derive(Debug)]
struct RateMover {
    db: std::sync::OnceLock<std::path::PathBuf>,
    moves: usize,
    calls: Mutex<usize>,
}

impl AddressSource for RateMover {
    fn deposit_address(&self, _: &str, currency: &str, _: Decimal) -> Result<DepositAddress, String> {
        let mut calls = self.calls.lock().map_err(|e| e.to_string())?;
        *calls += 1;
        if *calls <= self.moves {
            let db = self.db.get().ok_or("no database yet")?;
            let rate = (*calls + 1).to_string();
            RawDb::open(db).execute("UPDATE rates SET rate = ?1 WHERE crypto = 'USDT' AND fiat = 'USD'", &[&rate]);
        }
        Ok(DepositAddress { address: format!("moved-{currency}-{calls}"), payment_uri: None })
    }
}

/// A harness whose address source moves the rate `moves` times, and that source.
fn rate_moving_harness(moves: usize) -> (Harness, Arc<RateMover>) {
    let mover = Arc::new(RateMover { db: std::sync::OnceLock::new(), moves, calls: Mutex::new(0) });
    let source: Arc<dyn AddressSource> = mover.clone();
    let h = harness_with(Environment::Sandbox, |c| c.address_source = Some(source));
    mover.db.set(h.db()).expect("set once");
    h.svc.set_rate("USDT", "USD", dec("1"), None).expect("set_rate");
    (h, mover)
}

#[test]
fn a_create_quotes_again_while_the_rate_moves_and_gives_up_after_four_quotes() {
    // Moved three times: the fourth quote holds, at the rate the third move set.
    let (h, mover) = rate_moving_harness(3);
    let id = order_in(&h, "USD", "12", "USDT");
    let invoice = h.svc.order(&id).expect("order").invoice;
    assert_eq!((invoice.rate, invoice.amount), (dec("4"), dec("3")));
    assert_eq!(invoice.address, "moved-USDT-4", "one address asked for per quote");
    assert_eq!(*mover.calls.lock().expect("lock"), 4);

    // Moving every time: after four quotes the create gives up, writing nothing, with a
    // busy storage error (503, to retry) rather than a quote the table no longer gives.
    let (h, mover) = rate_moving_harness(usize::MAX);
    let resp = h.post(&json!({"currency": "USD", "amount": 12, "pay_currency": "USDT"}));
    assert_error(&resp, 503, "ServiceUnavailable");
    assert_eq!(resp.header_value("retry-after"), Some("1"));
    assert_eq!(*mover.calls.lock().expect("lock"), 4);
    assert!(list_all(&h.svc, &h.key).is_empty(), "no order written");
}

#[derive(Debug)]
struct BrokenWallet;

impl AddressSource for BrokenWallet {
    fn deposit_address(&self, _: &str, _: &str, _: Decimal) -> Result<DepositAddress, String> {
        Err("wallet offline at 10.0.0.5".to_string())
    }
}

#[test]
fn a_failing_address_source_fails_the_create_without_leaking_or_storing() {
    let h = harness_with(Environment::Sandbox, |c| c.address_source = Some(Arc::new(BrokenWallet)));
    let resp = h.post(&json!({"currency": "USD", "amount": 10}));
    let message = assert_error(&resp, 500, "InternalServerError");
    assert!(!message.contains("10.0.0.5"), "internal detail leaked: {message}");
    assert!(list_all(&h.svc, &h.key).is_empty());
}

#[test]
fn sandbox_addresses_are_fake_testnet_ones() {
    let h = harness();
    let btc = h.svc.order(&order_in(&h, "USD", "10", "BTC")).expect("order").invoice;
    assert!(btc.address.starts_with("tb1q"), "{}", btc.address);
    assert_eq!(btc.payment_uri, format!("bitcoin:{}?amount=0.001", btc.address));
    let usdt = h.svc.order(&order_in(&h, "USD", "10", "USDT")).expect("order").invoice;
    assert!(usdt.address.starts_with("0x") && usdt.address.len() == 42, "{}", usdt.address);
    assert_ne!(usdt.address, h.svc.order(&order_in(&h, "USD", "10", "USDT")).expect("order").invoice.address);
}

/// `amount × rate >= fiat`, computed exactly on the decimals' integer mantissas.
fn covers_exactly(amount: Decimal, rate: Decimal, fiat: Decimal) -> bool {
    let pow = |n: u32| 10u128.checked_pow(n).expect("power of ten");
    let (a, r, f) = (amount.mantissa() as u128, rate.mantissa() as u128, fiat.mantissa() as u128);
    // a/10^sa × r/10^sr >= f/10^sf  <=>  a×r×10^sf >= f×10^(sa+sr)
    let left = a.checked_mul(r).and_then(|x| x.checked_mul(pow(fiat.scale()))).expect("no overflow");
    let right = f.checked_mul(pow(amount.scale() + rate.scale())).expect("no overflow");
    left >= right
}

#[test]
fn the_crypto_amount_is_never_rounded_down_even_at_the_largest_amounts() {
    // 1e12 USD at 3 USD per ETH is 333333333333.333...: rounded up to 18 decimals it
    // needs 30 significant digits. Either it is quoted so that it covers the fiat amount,
    // or the order is refused; a quote that falls short is wrong.
    let h = harness();
    h.svc.set_rate("ETH", "USD", dec("3"), None).expect("set_rate");
    h.svc.set_rate("BTC", "USD", dec("3"), None).expect("set_rate");
    for crypto in ["BTC", "ETH"] {
        let resp = h.post(&json!({"currency": "USD", "amount": 1_000_000_000_000_i64, "pay_currency": crypto}));
        if resp.status == 201 {
            let id = string(&resp.json()["data"], "order_id").to_string();
            let invoice = h.svc.order(&id).expect("order").invoice;
            assert!(
                covers_exactly(invoice.amount, invoice.rate, dec("1000000000000")),
                "{crypto}: {} × {} is short of 1e12",
                invoice.amount,
                invoice.rate
            );
        } else {
            assert_invalid(&resp, "amount");
        }
    }
}

#[test]
fn an_order_too_large_to_quote_is_refused_with_the_limit_it_passed() {
    // At the sandbox's 1,000 USD per ETH, the largest order, 1e12 USD, is 1e9 ETH: 28
    // digits with ETH's 18 decimal places, which an exact invoice amount holds.
    let h = harness();
    let largest = h.post(&json!({"currency": "USD", "amount": 1_000_000_000_000_i64, "pay_currency": "ETH"}));
    assert_eq!(largest.status, 201, "{}", text(&largest));
    assert_eq!(largest.json()["data"]["amount"].to_string(), "1000000000000");
    // At 100 USD per ETH it would be 1e10 ETH: 29 digits, one more than it holds.
    h.svc.set_rate("ETH", "USD", dec("100"), None).expect("set_rate");
    let under = h.post(&json!({"currency": "USD", "amount": "999999999999.99", "pay_currency": "ETH"}));
    assert_eq!(under.status, 201, "{}", text(&under));
    let over = h.post(&json!({"currency": "USD", "amount": 1_000_000_000_000_i64, "pay_currency": "ETH"}));
    assert_invalid(&over, "amount");
    let message = string(&over.json(), "error").to_string();
    assert!(message.starts_with("amount: is too large to pay in ETH"), "{message}");
    assert!(message.contains("below 10000000000 ETH"), "{message}");
    assert!(message.contains("18 decimal places"), "{message}");
}

#[test]
fn a_replayed_or_duplicate_create_does_not_cost_the_wallet_an_address() {
    let wallet = Arc::new(Wallet::default());
    let source: Arc<dyn AddressSource> = wallet.clone();
    let h = harness_with(Environment::Sandbox, |c| c.address_source = Some(source));
    let body = json!({"currency": "USD", "amount": 10, "merchant_order_id": "cart-9"});
    let first = h.post(&body);
    assert_eq!(first.status, 201, "{}", text(&first));
    let replay = h.post(&body);
    assert_eq!(replay.status, 201, "{}", text(&replay));
    assert_eq!(replay.body, first.body, "an identical retry replays the first answer");
    let other = h.post(&json!({"currency": "USD", "amount": 11, "merchant_order_id": "cart-9"}));
    assert_error(&other, 400, "ORDER_DUPLICATE");
    assert_eq!(wallet.calls.lock().expect("lock").len(), 1, "only the first create asked the wallet");
    // A new merchant_order_id asks again.
    assert_eq!(h.post(&json!({"currency": "USD", "amount": 10, "merchant_order_id": "cart-10"})).status, 201);
    assert_eq!(wallet.calls.lock().expect("lock").len(), 2);

    // The replay is looked for before the write, with the key the request was admitted
    // by confirmed there too: a key deactivated by another program replays nothing.
    RawDb::open(&h.db()).batch("UPDATE api_keys SET status = 'inactive'");
    assert_error(&h.post(&body), 400, "AUTHENTICATION_FAILED");
    assert_eq!(wallet.calls.lock().expect("lock").len(), 2, "nor did it ask the wallet");
}
