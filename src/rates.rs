//! Exchange rates used to quote an order's fiat amount in the pay currency.
//!
//! A rate is "fiat per one coin". The sandbox ships fixed, deliberately round and
//! obviously fake test rates; live has none until the host sets them.

use rust_decimal::Decimal;

use crate::config::Environment;

/// Fake US dollars per coin used by the sandbox. Not market prices.
const SANDBOX_USD_PER_COIN: &[(&str, i64)] =
    &[("USDT", 1), ("USDC", 1), ("BTC", 10_000), ("ETH", 1_000), ("LTC", 100), ("SOL", 100)];

/// Fake fiat units per US dollar used by the sandbox, as (code, mantissa, scale).
const SANDBOX_FIAT_PER_USD: &[(&str, i64, u32)] = &[
    ("USD", 1, 0),
    ("EUR", 9, 1),
    ("GBP", 8, 1),
    ("CHF", 9, 1),
    ("CAD", 14, 1),
    ("AUD", 15, 1),
    ("JPY", 150, 0),
    ("KWD", 3, 1),
    ("NGN", 1500, 0),
    ("KES", 130, 0),
    ("ZAR", 18, 0),
    ("LRD", 190, 0),
    ("GHS", 15, 0),
    ("UGX", 3700, 0),
    ("TZS", 2600, 0),
    ("XOF", 600, 0),
    ("EGP", 50, 0),
    ("INR", 85, 0),
    ("BRL", 5, 0),
];

/// The built-in rate for `coin` priced in `fiat`, or `None` when there is none.
///
/// Only the sandbox has built-in rates; live rates always come from the host.
pub fn builtin_rate(environment: Environment, coin: &str, fiat: &str) -> Option<Decimal> {
    if environment != Environment::Sandbox {
        return None;
    }
    let usd_per_coin = SANDBOX_USD_PER_COIN.iter().find(|(c, _)| *c == coin)?.1;
    let (_, mantissa, scale) = SANDBOX_FIAT_PER_USD.iter().find(|(f, _, _)| *f == fiat)?;
    Decimal::from(usd_per_coin).checked_mul(Decimal::new(*mantissa, *scale))
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
        assert_eq!(builtin_rate(Environment::Sandbox, "USDT", "MXN"), None);
    }
}
