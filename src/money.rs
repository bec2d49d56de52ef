//! Exact money: fiat currency rules (ISO 4217), crypto coin precision, parsing and
//! rounding. Amounts are [`Decimal`] from parsing to storage to rendering; no binary
//! float ever holds money.

use std::str::FromStr;

pub use rust_decimal::Decimal;

use crate::error::{Error, Result};

/// The largest fiat amount an order may carry (DESIGN §4).
pub const MAX_FIAT_AMOUNT: Decimal = Decimal::from_parts(3_567_587_328, 232, 0, false, 0); // 1e12

/// Coins we know how to quote, with the number of decimals each is divisible into.
pub(crate) const COINS: &[(&str, u32)] =
    &[("USDT", 6), ("USDC", 6), ("BTC", 8), ("ETH", 18), ("LTC", 8), ("TRX", 6), ("SOL", 9)];

/// The number of decimals a crypto coin is divisible into, or `None` for an unknown coin.
pub fn coin_decimals(code: &str) -> Option<u32> {
    COINS.iter().find(|(c, _)| *c == code).map(|(_, d)| *d)
}

/// Checks a fiat currency code and returns its minor-unit count (USD 2, JPY 0, KWD 3).
///
/// Accepts only upper-case ISO 4217 codes of real currencies (not funds, metals or the
/// test code `XXX`, which have no minor unit).
pub fn fiat_minor_units(field: &str, code: &str) -> Result<u32> {
    let rule = || Error::invalid(field, format!("must be an upper-case ISO 4217 currency code, got {code:?}"));
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(rule());
    }
    let currency = iso_currency::Currency::from_code(code).ok_or_else(rule)?;
    // Funds (BOV, CLF, USN, …) are units of account of a currency, not the currency a
    // price is paid in; some have a minor unit, so they are refused by name.
    currency.exponent().filter(|_| !currency.is_fund()).map(u32::from).ok_or_else(|| {
        Error::invalid(
            field,
            format!("must be the ISO 4217 code of a currency with a minor unit, not of a metal, fund or test unit, got {code:?}"),
        )
    })
}

/// The ISO 4217 minor-unit count of any currency code with one, funds included: for
/// amounts already stored in it (an order priced in a fund before funds were refused
/// keeps its places), not for checking a new price ([`fiat_minor_units`]).
pub(crate) fn stored_minor_units(code: &str) -> Option<u32> {
    iso_currency::Currency::from_code(code)?.exponent().map(u32::from)
}

/// Parses a decimal amount from its text (`"19.99"`, `"1e3"`), exactly.
///
/// The text must be a plain JSON-style number: optional `-`, digits, an optional
/// fraction, an optional exponent. No spaces, `+`, `_` or bare `.` — a typo must never
/// become a different price.
pub fn parse_decimal(field: &str, text: &str) -> Result<Decimal> {
    let bad = || Error::invalid(field, format!("must be a decimal number, got {text:?}"));
    if text.is_empty() || text.len() > 64 || !is_plain_number(text) {
        return Err(bad());
    }
    let negative = text.starts_with('-');
    let (mantissa, exponent) = match text.trim_start_matches('-').split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (text.trim_start_matches('-'), None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    // The value is `digits × 10^shift`, with the digits' zeros at either end taken off:
    // only the significant digits must fit, wherever the text put its point or exponent
    // (`19990000e-6` and `0.0001999e5` are both 19.99).
    let digits = [whole, fraction].concat();
    let leading = digits.trim_start_matches('0');
    let significant = leading.trim_end_matches('0');
    if significant.is_empty() {
        return Ok(Decimal::ZERO);
    }
    let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let too_large = || Error::invalid(field, "is too large (at most 28 digits before the decimal point)");
    let too_fine = || Error::invalid(field, "has too many decimal places (at most 28)");
    // An exponent too long for an i64 is too large or too small beyond any doubt.
    let exponent = match exponent.map(str::parse::<i64>) {
        None => 0,
        Some(Ok(exponent)) => exponent,
        Some(Err(_)) if exponent.is_some_and(|e| e.starts_with('-')) => return Err(too_fine()),
        Some(Err(_)) => return Err(too_large()),
    };
    // Place of the last significant digit: 0 the units, -1 the first decimal place.
    let last =
        exponent.saturating_sub(as_i64(fraction.len())).saturating_add(as_i64(leading.len() - significant.len()));
    let first = last.saturating_add(as_i64(significant.len()) - 1);
    // A Decimal holds a whole number of up to 96 bits (28 digits, some of 29) with at
    // most 28 of them after the point: whatever fits is taken, exactly.
    let fits = || -> Option<Decimal> {
        let units: i128 = significant.parse().ok()?;
        let units = if negative { -units } else { units };
        match u32::try_from(-last) {
            Ok(scale) => Decimal::try_from_i128_with_scale(units, scale).ok(),
            Err(_) => {
                let shifted = units.checked_mul(10i128.checked_pow(u32::try_from(last).ok()?)?)?;
                Decimal::try_from_i128_with_scale(shifted, 0).ok()
            }
        }
    };
    match fits() {
        Some(value) => Ok(value.normalize()),
        None if first >= 28 => Err(too_large()),
        None if last < -28 => Err(too_fine()),
        None => Err(Error::invalid(field, "has too many digits (at most 28 significant digits)")),
    }
}

/// `-?digits(.digits)?([eE][+-]?digits)?`, the JSON number grammar (leading zeros aside).
fn is_plain_number(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = usize::from(bytes.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return false;
    }
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == bytes.len()
}

/// Checks a fiat amount against DESIGN §4: greater than 0, at most 1e12, and no more
/// decimals than the currency's minor unit.
pub fn check_fiat_amount(field: &str, amount: Decimal, minor_units: u32, currency: &str) -> Result<Decimal> {
    let amount = amount.normalize();
    if amount <= Decimal::ZERO {
        return Err(Error::invalid(field, "must be greater than 0"));
    }
    if amount > MAX_FIAT_AMOUNT {
        return Err(Error::invalid(field, "must be at most 1000000000000"));
    }
    if amount.scale() > minor_units {
        return Err(Error::invalid(field, format!("{currency} allows at most {minor_units} decimal places")));
    }
    Ok(amount)
}

/// The most digits an invoice amount has, before and after the point: the 28 a
/// [`Decimal`] holds whatever its digits are.
pub const QUOTE_DIGITS: u32 = 28;

/// The power of ten an invoice amount of a coin with `decimals` places stays below:
/// [`crypto_amount`] quotes nothing larger (`10000000000` for ETH's 18 places).
pub fn largest_quotable_coins(decimals: u32) -> Decimal {
    Decimal::from_i128_with_scale(10i128.pow(QUOTE_DIGITS.saturating_sub(decimals)), 0)
}

/// The crypto amount that pays `fiat` at `rate` (fiat per coin), rounded *up* to the
/// coin's `decimals` so the merchant is never short: the least whole number of the coin's
/// smallest units whose value at `rate` is at least `fiat`, found by exact integer long
/// division (a [`Decimal`] division keeps only 28 significant digits, which can hide a
/// remainder, or the whole quotient under a huge rate). `None` when that amount has more
/// than [`QUOTE_DIGITS`] digits (absurdly large amounts of fine coins).
pub fn crypto_amount(fiat: Decimal, rate: Decimal, decimals: u32) -> Option<Decimal> {
    if rate <= Decimal::ZERO || fiat <= Decimal::ZERO {
        return None;
    }
    let (fiat, rate) = (fiat.normalize(), rate.normalize());
    // units = ceil(fiat × 10^decimals ÷ rate) = ceil(f × 10^(decimals + rs − fs) ÷ r) for
    // fiat = f ÷ 10^fs and rate = r ÷ 10^rs; a negative power moves to the divisor.
    let (f, r) = (fiat.mantissa().unsigned_abs(), rate.mantissa().unsigned_abs());
    let shift = i64::from(decimals) + i64::from(rate.scale()) - i64::from(fiat.scale());
    let divisor = match shift {
        0.. => r,
        _ => r.checked_mul(10u128.checked_pow(u32::try_from(-shift).ok()?)?)?,
    };
    let limit = 10u128.pow(QUOTE_DIGITS);
    // Long division, nine decimal digits of the dividend at a time: when there are any
    // (`shift` > 0) the divisor is the rate's digits, under 2^96, and so is the
    // remainder, which times 10^9 (under 2^30) stays under 2^126.
    let (mut units, mut remainder) = (f / divisor, f % divisor);
    let mut digits_left = u32::try_from(shift.max(0)).ok()?;
    while digits_left > 0 {
        let step = digits_left.min(9);
        let scale = 10u128.pow(step);
        remainder *= scale;
        units = units.checked_mul(scale)?.checked_add(remainder / divisor)?;
        remainder %= divisor;
        if units >= limit {
            return None;
        }
        digits_left -= step;
    }
    if remainder > 0 {
        units += 1;
    }
    if units >= limit {
        return None;
    }
    Decimal::try_from_i128_with_scale(i128::try_from(units).ok()?, decimals).ok().map(|amount| amount.normalize())
}

/// The fiat value of `coins` at `rate` (fiat per coin), rounded *down* to `minor_units`
/// places: what a customer's payment is shown to be worth. Exact whatever the digits: a
/// [`Decimal`] product keeps at most 28 decimal places and rounds to nearest first, so a
/// value a hair under a cent would be cut from a value rounded up to it. `None` when a
/// factor is negative or the value does not fit a [`Decimal`].
pub fn fiat_value_floor(coins: Decimal, rate: Decimal, minor_units: u32) -> Option<Decimal> {
    if coins.is_sign_negative() && !coins.is_zero() || rate.is_sign_negative() && !rate.is_zero() {
        return None;
    }
    // coins × rate = (c × r) ÷ 10^(cs + rs) for coins = c ÷ 10^cs and rate = r ÷ 10^rs:
    // the mantissas' product, under 2^192, in three 64-bit limbs (most significant first).
    let (c, r) = (coins.mantissa().unsigned_abs(), rate.mantissa().unsigned_abs());
    let mut limbs = product_limbs(c, r);
    let places = coins.scale() + rate.scale();
    let mut digits_to_cut = places.saturating_sub(minor_units);
    while digits_to_cut > 0 {
        let step = digits_to_cut.min(19);
        divide_limbs(&mut limbs, 10u64.pow(step));
        digits_to_cut -= step;
    }
    if limbs[0] != 0 {
        return None;
    }
    let cut = (u128::from(limbs[1]) << 64) | u128::from(limbs[2]);
    let value = cut.checked_mul(10u128.checked_pow(minor_units.saturating_sub(places))?)?;
    Decimal::try_from_i128_with_scale(i128::try_from(value).ok()?, minor_units).ok()
}

/// `a × b` as three 64-bit limbs, most significant first.
fn product_limbs(a: u128, b: u128) -> [u64; 3] {
    let split = |x: u128| (x >> 64, x & u128::from(u64::MAX));
    let ((a1, a0), (b1, b0)) = (split(a), split(b));
    // a, b < 2^96 (Decimal mantissas), so a1, b1 < 2^32 and each partial product below
    // fits a u128 with room for the carries added to it.
    let low = a0 * b0;
    let middle = a1 * b0 + a0 * b1 + (low >> 64);
    let high = a1 * b1 + (middle >> 64);
    [high as u64, middle as u64, low as u64]
}

/// Divides the number in `limbs` (most significant first) by `divisor`, dropping the
/// remainder.
fn divide_limbs(limbs: &mut [u64; 3], divisor: u64) {
    let mut remainder = 0u128;
    for limb in limbs.iter_mut() {
        let current = remainder << 64 | u128::from(*limb);
        *limb = (current / u128::from(divisor)) as u64;
        remainder = current % u128::from(divisor);
    }
}

/// The decimal as a JSON number with exactly its digits (no float round trip).
pub fn to_json_number(amount: Decimal) -> serde_json::Value {
    let text = amount.normalize().to_string();
    match serde_json::Number::from_str(&text) {
        Ok(number) => serde_json::Value::Number(number),
        // A normalized Decimal always prints as a valid JSON number.
        Err(_) => serde_json::Value::String(text),
    }
}

/// A fiat amount for people, with its currency's minor unit (`10` USD -> `10.00`) and
/// thousands separators: the payment page and the payment-link e-mail show the same text.
pub(crate) fn fiat_text(amount: Decimal, currency: &str) -> String {
    let mut amount = amount;
    if let Some(minor) = stored_minor_units(currency) {
        if amount.scale() < minor {
            amount.rescale(minor);
        }
    }
    let text = amount.to_string();
    let (sign, digits) = text.strip_prefix('-').map_or(("", text.as_str()), |rest| ("-", rest));
    let (whole, fraction) = digits.split_once('.').map_or((digits, ""), |(w, f)| (w, f));
    let mut grouped = String::with_capacity(whole.len() + whole.len() / 3);
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    if fraction.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{fraction}")
    }
}

#[cfg(test)]
mod tests {
    use rust_decimal::RoundingStrategy;

    use super::*;

    #[test]
    fn a_fiat_value_is_cut_from_the_exact_product_never_rounded_up_first() {
        let d = |text: &str| text.parse::<Decimal>().unwrap_or_default();
        // 9 wei at this rate is worth 0.009999999999999999999999999999 USD: 30 places,
        // which a Decimal product rounds to 0.01 before any cut.
        let (wei_9, rate) = (d("0.000000000000000009"), d("1111111111111111.111111111111"));
        assert_eq!(
            wei_9.checked_mul(rate).map(|v| v.round_dp_with_strategy(2, RoundingStrategy::ToZero)),
            Some(d("0.01"))
        );
        assert_eq!(fiat_value_floor(wei_9, rate, 2), Some(d("0.00")));
        assert_eq!(fiat_value_floor(d("0.00000000000000001"), rate, 2), Some(d("0.01")));
        // Both mantissas at their largest: a product of 192 bits, cut to what fits.
        let max = d("7.9228162514264337593543950335");
        assert_eq!(fiat_value_floor(max, max, 2), Some(d("62.77")));
        assert_eq!(fiat_value_floor(Decimal::MAX, Decimal::ONE, 0), Some(Decimal::MAX));
        assert_eq!(fiat_value_floor(Decimal::MAX, Decimal::TWO, 0), None, "too large for a Decimal");
        assert_eq!(fiat_value_floor(d("12.5"), d("3"), 3), Some(d("37.500")), "more places than the product");
        assert_eq!(fiat_value_floor(Decimal::ZERO, rate, 2), Some(Decimal::ZERO));
        assert_eq!(fiat_value_floor(d("-1"), rate, 2), None);
        // Wherever a Decimal holds the product exactly, the two agree.
        for coins in ["0.00000001", "0.001999", "1", "19.99", "0.123456789012345678", "250000"] {
            for rate in ["0.3", "1", "7", "64250.5", "0.000009267794", "123456789.123"] {
                for minor in [0, 2, 3] {
                    let (coins, rate) = (d(coins), d(rate));
                    let Some(product) = coins.checked_mul(rate) else { continue };
                    if product.scale() != coins.scale() + rate.scale() {
                        continue;
                    }
                    let expected = product.round_dp_with_strategy(minor, RoundingStrategy::ToZero);
                    assert_eq!(fiat_value_floor(coins, rate, minor), Some(expected), "{coins} × {rate} to {minor}");
                }
            }
        }
    }

    #[test]
    fn fiat_amounts_use_the_minor_unit_and_group_thousands() {
        assert_eq!(fiat_text(Decimal::new(10, 0), "USD"), "10.00");
        assert_eq!(fiat_text(Decimal::new(123_456_789, 1), "USD"), "12,345,678.90");
        assert_eq!(fiat_text(Decimal::new(1500, 0), "JPY"), "1,500");
        assert_eq!(fiat_text(Decimal::new(1, 3), "KWD"), "0.001");
        assert_eq!(fiat_text(Decimal::new(100, 0), "USD"), "100.00");
    }

    #[test]
    fn max_amount_is_one_trillion() {
        assert_eq!(MAX_FIAT_AMOUNT, Decimal::from(1_000_000_000_000_i64));
    }

    #[test]
    fn minor_units_follow_iso_4217() {
        assert_eq!(fiat_minor_units("currency", "NGN").ok(), Some(2));
        assert_eq!(fiat_minor_units("currency", "JPY").ok(), Some(0));
        assert_eq!(fiat_minor_units("currency", "KWD").ok(), Some(3));
        assert!(fiat_minor_units("currency", "usd").is_err());
        let metal = fiat_minor_units("currency", "XAU").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(metal.contains("minor unit") && metal.contains("XAU"), "{metal}");
        assert!(fiat_minor_units("currency", "ABC").is_err());
    }

    #[test]
    fn amounts_are_exact() {
        let amount = parse_decimal("amount", "19.99").unwrap_or_default();
        assert_eq!(to_json_number(amount).to_string(), "19.99");
        assert_eq!(parse_decimal("amount", "1e3").unwrap_or_default(), Decimal::from(1000));
        for bad in ["NaN", "1.2.3", "1_000", " 5", "5 ", "+5", "5.", ".5", "", "1e", "0x10", "Infinity"] {
            assert!(parse_decimal("amount", bad).is_err(), "{bad:?} accepted");
        }
        let tenth = format!("0.1{}", "0".repeat(40));
        assert_eq!(parse_decimal("amount", &tenth).unwrap_or_default(), Decimal::new(1, 1));
        let long = format!("1.{}1", "0".repeat(40));
        let message = parse_decimal("amount", &long).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("too many decimal places"), "{message}");
        let rule = |text: &str| parse_decimal("amount", text).err().map(|e| e.to_string()).unwrap_or_default();
        for large in ["1e30", "1e400", "100000000000000000000000000000", "-1E+29", "12.5e28", "1e99999999999999999999"]
        {
            assert!(rule(large).contains("too large"), "{large}: {}", rule(large));
        }
        for fine in ["1e-30", "0.00000000000000000000000000001", "5E-400", "1e-99999999999999999999"] {
            assert!(rule(fine).contains("decimal places"), "{fine}: {}", rule(fine));
        }
        assert!(rule("1234567890.12345678901234567891").contains("significant digits"));
        // Only the significant digits must fit, wherever the point or the exponent puts them.
        let value = |text: &str| parse_decimal("amount", text).ok();
        assert_eq!(value("19990000000000000000000000000000e-30"), Some(Decimal::new(1999, 2)));
        assert_eq!(value("0.00000000000000000000000000001999e30"), Some(Decimal::new(1999, 2)));
        assert_eq!(value("0e99999999999999999999"), Some(Decimal::ZERO));
        assert_eq!(value("-0.000"), Some(Decimal::ZERO));
        assert_eq!(value("9999999999999999999999999999"), Decimal::from_str_exact("9999999999999999999999999999").ok());
        assert_eq!(value("0.0000000000000000000000000001"), Some(Decimal::new(1, 28)));
        assert_eq!(value("123e-2"), Some(Decimal::new(123, 2)));
        assert_eq!(value("1.5E+3"), Some(Decimal::from(1500)));
        // 29 digits where their whole number fits a Decimal's 96 bits, as before.
        assert_eq!(
            value("1.2345678901234567890123456789"),
            Decimal::from_str_exact("1.2345678901234567890123456789").ok()
        );
        assert_eq!(
            value("50000000000000000000000000000"),
            Decimal::from_str_exact("50000000000000000000000000000").ok()
        );
        assert!(rule("90000000000000000000000000000").contains("too large"));
        // Plain decimals: exactly what rust_decimal's own exact parser makes of them.
        let mut digits = String::new();
        for step in 0..40 {
            digits.push(char::from(b'0' + (step * 7 % 10) as u8));
            for text in [
                digits.clone(),
                format!("0.{digits}"),
                format!("-{digits}.5"),
                format!("{}.{}", &digits[..digits.len() / 2], &digits[digits.len() / 2..]),
            ] {
                let theirs = Decimal::from_str_exact(&text).ok().map(|d| d.normalize());
                // Whatever theirs takes, ours takes as the same value (theirs also takes a
                // bare ".5", which a price may not be written as; ours also takes zeros at
                // either end beyond 28 digits, which carry no value).
                if is_plain_number(&text) && theirs.is_some() {
                    assert_eq!(value(&text).map(|d| d.normalize()), theirs, "{text}");
                }
            }
        }
        assert_eq!(parse_decimal("amount", "-2.50").unwrap_or_default(), Decimal::new(-25, 1));
    }

    #[test]
    fn funds_metals_and_test_units_are_not_prices() {
        for code in ["BOV", "CHE", "CHW", "CLF", "COU", "MXV", "USN", "UYI", "UYW", "XAU", "XDR", "XTS", "XXX"] {
            let error = fiat_minor_units("currency", code).expect_err(code).to_string();
            assert!(error.contains("not of a metal, fund or test unit"), "{code}: {error}");
        }
        assert_eq!(fiat_minor_units("currency", "CLP").ok(), Some(0));
        assert_eq!(fiat_minor_units("currency", "CHF").ok(), Some(2));
        assert_eq!(fiat_minor_units("currency", "UYU").ok(), Some(2));
    }

    #[test]
    fn crypto_amounts_are_exact_where_a_decimal_division_is_not() {
        let d = |text: &str| Decimal::from_str_exact(text).unwrap_or_default();
        // Exact quotients with more digits than a division keeps; the old check took the
        // product it could not hold for a shortfall and refused them as too large.
        assert_eq!(crypto_amount(d("999999.99"), d("476837158.203125"), 18), Some(d("0.00209715197902848")));
        assert_eq!(crypto_amount(d("6023447.52"), d("476837158.203125"), 18), Some(d("0.01263208501346304")));
        assert_eq!(crypto_amount(d("2307"), d("0.000009267794"), 18), Some(d("248926551.453344776545529605")));
        // A quotient below one smallest unit is one unit, never 0.
        assert_eq!(crypto_amount(d("0.01"), d("100000000000000000000000000.5"), 8), Some(d("0.00000001")));
        // The largest fiat amount at the sandbox's ETH rate: 1e9 ETH, 28 digits.
        assert_eq!(crypto_amount(d("1000000000000"), d("1000"), 18), Some(d("1000000000")));
        // Beyond 28 digits: not quotable.
        assert_eq!(crypto_amount(d("1000000000000"), d("100"), 18), None);
        assert_eq!(largest_quotable_coins(18), d("10000000000"));
        // Each result is the least whole number of units covering the fiat: a grid of
        // amounts and rates, checked wherever a Decimal holds the products exactly.
        for fiat in ["0.01", "1", "19.99", "123.456", "999999.99", "1000000000000"] {
            for rate in ["0.3", "1", "3", "7", "64250.5", "0.000009267794", "123456789.123"] {
                for decimals in [0, 2, 6, 8, 18] {
                    let (fiat, rate) = (d(fiat), d(rate));
                    let Some(amount) = crypto_amount(fiat, rate, decimals) else {
                        // Refused only when the quotient reaches the limit of 28 digits.
                        let quotient = fiat.checked_div(rate).unwrap_or(Decimal::MAX);
                        assert!(quotient >= largest_quotable_coins(decimals) * Decimal::new(99, 2), "{fiat} at {rate}");
                        continue;
                    };
                    let unit = Decimal::new(1, decimals);
                    assert!(amount.scale() <= decimals, "{amount} has at most {decimals} places");
                    let covers = amount.checked_mul(rate);
                    let short = amount.checked_sub(unit).and_then(|less| less.checked_mul(rate));
                    let exact = |product: Decimal, a: Decimal| product.scale() == a.scale() + rate.scale();
                    if let (Some(covers), Some(short)) = (covers, short) {
                        if exact(covers, amount) && exact(short, amount - unit) {
                            assert!(covers >= fiat && short < fiat, "{fiat} at {rate} in {decimals}: {amount}");
                        }
                    }
                }
            }
        }
        for (fiat, rate, decimals) in [("19.99", "3", 6), ("0.01", "64250.5", 8), ("1", "7", 18), ("123.456", "0.3", 6)]
        {
            let amount = crypto_amount(d(fiat), d(rate), decimals).unwrap_or_default();
            let unit = Decimal::new(1, decimals);
            assert!(amount * d(rate) >= d(fiat), "{amount} × {rate} covers {fiat}");
            assert!((amount - unit) * d(rate) < d(fiat), "{amount} is the least that covers {fiat}");
        }
    }

    #[test]
    fn crypto_amount_rounds_up() {
        let fiat = Decimal::from(100);
        let rate = Decimal::from(3);
        assert_eq!(crypto_amount(fiat, rate, 6), Some(Decimal::from_str_exact("33.333334").unwrap_or_default()));
        assert_eq!(
            crypto_amount(Decimal::from(10), Decimal::from(4), 8),
            Some(Decimal::from_str_exact("2.5").unwrap_or_default())
        );
    }
}
