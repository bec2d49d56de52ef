//! Exchange rates used to quote an order's fiat amount in the pay currency.
//!
//! A rate is "fiat per one coin". The sandbox ships fixed, deliberately round and
//! obviously fake test rates; live has none until the host sets them.

use rust_decimal::Decimal;

use crate::environment::Environment;

/// Fake US dollars per coin used by the sandbox. Not market prices.
const SANDBOX_USD_PER_COIN: &[(&str, i64)] =
    &[("USDT", 1), ("USDC", 1), ("BTC", 10_000), ("ETH", 1_000), ("LTC", 100), ("TRX", 1), ("SOL", 100)];

/// Fake fiat units per US dollar used by the sandbox, as (code, mantissa, scale): round
/// numbers in the right order of magnitude, not market prices.
const SANDBOX_FIAT_PER_USD: &[(&str, i64, u32)] = &[
    ("USD", 1, 0),
    ("EUR", 9, 1),
    ("GBP", 8, 1),
    ("CHF", 9, 1),
    ("CAD", 14, 1),
    ("AUD", 15, 1),
    ("NZD", 17, 1),
    ("JPY", 150, 0),
    ("CNY", 7, 0),
    ("HKD", 8, 0),
    ("SGD", 13, 1),
    ("KRW", 1400, 0),
    ("INR", 85, 0),
    ("IDR", 16000, 0),
    ("PHP", 58, 0),
    ("THB", 35, 0),
    ("MYR", 45, 1),
    ("VND", 25000, 0),
    ("PKR", 280, 0),
    ("BDT", 120, 0),
    ("AED", 37, 1),
    ("SAR", 38, 1),
    ("QAR", 36, 1),
    ("KWD", 3, 1),
    ("BHD", 4, 1),
    ("OMR", 4, 1),
    ("ILS", 37, 1),
    ("TRY", 40, 0),
    ("EGP", 50, 0),
    ("MAD", 10, 0),
    ("TND", 3, 0),
    ("NGN", 1500, 0),
    ("KES", 130, 0),
    ("ZAR", 18, 0),
    ("LRD", 190, 0),
    ("GHS", 15, 0),
    ("UGX", 3700, 0),
    ("TZS", 2600, 0),
    ("RWF", 1400, 0),
    ("ETB", 130, 0),
    ("XOF", 600, 0),
    ("XAF", 600, 0),
    ("ZMW", 27, 0),
    ("BWP", 14, 0),
    ("MXN", 18, 0),
    ("BRL", 5, 0),
    ("ARS", 1000, 0),
    ("CLP", 950, 0),
    ("COP", 4000, 0),
    ("PEN", 37, 1),
    ("SEK", 10, 0),
    ("NOK", 10, 0),
    ("DKK", 7, 0),
    ("PLN", 4, 0),
    ("CZK", 23, 0),
    ("HUF", 360, 0),
    ("RON", 46, 1),
    ("UAH", 41, 0),
];

/// The fake rate any other fiat currency gets in the sandbox: one unit per US dollar.
const SANDBOX_OTHER_FIAT_PER_USD: i64 = 1;

/// The built-in rate for `coin` priced in `fiat` (a fiat code already checked against
/// ISO 4217), or `None` when there is none.
///
/// Only the sandbox has built-in rates, for every coin it knows and every fiat currency
/// (the common ones at plausible magnitudes, any other at one unit per US dollar); live
/// rates always come from the host.
pub fn builtin_rate(environment: Environment, coin: &str, fiat: &str) -> Option<Decimal> {
    if environment != Environment::Sandbox {
        return None;
    }
    let usd_per_coin = SANDBOX_USD_PER_COIN.iter().find(|(c, _)| *c == coin)?.1;
    let fiat_per_usd = match SANDBOX_FIAT_PER_USD.iter().find(|(f, _, _)| *f == fiat) {
        Some((_, mantissa, scale)) => Decimal::new(*mantissa, *scale),
        None => Decimal::from(SANDBOX_OTHER_FIAT_PER_USD),
    };
    // Normalized as a stored rate is (`1000 × 0.9` is `900`, not `900.0`).
    Decimal::from(usd_per_coin).checked_mul(fiat_per_usd).map(|rate| rate.normalize())
}

/// A live source of exchange rates the host plugs in (a price feed, its own cache...).
///
/// Consulted first, before the rate table; return `None` to fall through to the table.
pub trait RateSource: Send + Sync + std::fmt::Debug {
    /// Fiat units per one `crypto` coin, or `None` when this source has no rate.
    fn rate(&self, crypto: &str, fiat: &str) -> Option<Decimal>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_has_rates_and_live_has_none() {
        assert_eq!(builtin_rate(Environment::Sandbox, "BTC", "NGN"), Some(Decimal::from(15_000_000)));
        assert_eq!(builtin_rate(Environment::Sandbox, "USDT", "EUR"), Some(Decimal::new(9, 1)));
        assert_eq!(builtin_rate(Environment::Live, "USDT", "USD"), None);
        assert_eq!(builtin_rate(Environment::Sandbox, "USDT", "MXN"), Some(Decimal::from(18)));
        assert_eq!(builtin_rate(Environment::Sandbox, "BTC", "ISK"), Some(Decimal::from(10_000)));
        assert_eq!(builtin_rate(Environment::Sandbox, "XYZ", "USD"), None);
        // Shown as stored rates are: no trailing zeros from the product's scale.
        let eth_eur = builtin_rate(Environment::Sandbox, "ETH", "EUR").map(|rate| rate.to_string());
        assert!(eth_eur.as_deref().is_some_and(|text| !text.ends_with(".0")), "{eth_eur:?}");
    }

    #[test]
    fn the_sandbox_quotes_every_coin_it_knows() {
        for (coin, _) in crate::money::COINS {
            assert!(builtin_rate(Environment::Sandbox, coin, "USD").is_some_and(|r| r > Decimal::ZERO), "{coin}");
        }
    }
}
