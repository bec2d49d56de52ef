//! Deposit addresses and payment URIs shown on the payment page.
//!
//! Live addresses come from the host's wallet through an [`AddressSource`]; the sandbox
//! makes clearly fake testnet-style addresses derived from the invoice id.

use bitcoin::hex::DisplayHex;
use rust_decimal::{Decimal, RoundingStrategy};
use sha2::{Digest, Sha256};

use crate::environment::Environment;
use crate::money::coin_decimals;

/// Where a customer sends the coins for one invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepositAddress {
    /// The address.
    pub address: String,
    /// The payment URI for wallets (shown as the QR code); `None` builds the usual one
    /// (`bitcoin:<address>?amount=<amount>` and the like).
    pub payment_uri: Option<String>,
}

/// The host's wallet: hands out a deposit address per invoice.
pub trait AddressSource: Send + Sync + std::fmt::Debug {
    /// A fresh address to receive `amount` of `currency` for the order `order_id`.
    fn deposit_address(&self, order_id: &str, currency: &str, amount: Decimal) -> Result<DepositAddress, String>;
}

/// Ethereum mainnet, the chain live `ethereum:` URIs name (EIP-155 chain id).
pub(crate) const ETHEREUM_CHAIN_ID: u64 = 1;

/// Sepolia, the test network sandbox `ethereum:` URIs name, so a real wallet scanning a
/// sandbox QR code can never move mainnet funds to a fake address.
pub const SANDBOX_ETHEREUM_CHAIN_ID: u64 = 11_155_111;

/// ERC-20 tokens we quote, with their contract on each chain (EIP-55 checksummed):
/// (token, chain id, contract). On Sepolia, USDC is Circle's own test token; Tether
/// publishes no Sepolia USDT, so sandbox USDT URIs keep the mainnet address, which on
/// Sepolia holds no token: a wallet can move nothing of value with them.
const ERC20_CONTRACTS: &[(&str, u64, &str)] = &[
    ("USDT", ETHEREUM_CHAIN_ID, "0xdAC17F958D2ee523a2206206994597C13D831ec7"),
    ("USDC", ETHEREUM_CHAIN_ID, "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"),
    ("USDT", SANDBOX_ETHEREUM_CHAIN_ID, "0xdAC17F958D2ee523a2206206994597C13D831ec7"),
    ("USDC", SANDBOX_ETHEREUM_CHAIN_ID, "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238"),
];

/// The ERC-20 tokens a service in `environment` quotes, as (coin, contract): what the
/// Ethereum chain watcher looks for by default.
pub(crate) fn token_contracts(environment: Environment) -> Vec<(String, String)> {
    let chain = match environment {
        Environment::Live => ETHEREUM_CHAIN_ID,
        Environment::Sandbox => SANDBOX_ETHEREUM_CHAIN_ID,
    };
    ERC20_CONTRACTS
        .iter()
        .filter(|(_, on, _)| *on == chain)
        .map(|(coin, _, contract)| (coin.to_string(), contract.to_string()))
        .collect()
}

/// The payment URI for `address` and `amount` of `currency`, the QR code and "Open in
/// wallet" link of the payment page.
///
/// - BTC: `bitcoin:<address>?amount=<BTC>` (BIP-21, amount in coins); LTC the same with
///   `litecoin:`; SOL `solana:<address>?amount=<SOL>` (Solana Pay); TRX
///   `tron:<address>?amount=<TRX>`.
/// - ETH: `ethereum:<address>@1?value=<wei>` (EIP-681). The amount goes in `value`, an
///   integer count of wei, rather than the widespread but non-standard
///   `amount=<ETH>`: `value` is what EIP-681 defines and what EIP-681 wallets read
///   (MetaMask fills the amount from `value` and ignores `amount`), and its unit is
///   never in doubt; a wallet that knows neither leaves the amount for the customer to
///   type instead of guessing.
/// - USDT, USDC (ERC-20 tokens on Ethereum): an EIP-681 call of the token contract's
///   `transfer`, `ethereum:<contract>@1/transfer?address=<address>&uint256=<base
///   units>`. A plain `ethereum:<address>?amount=…` would ask the wallet for that many
///   ether, not tokens.
///
/// Base units (wei, the token's 10⁻⁶ units) are `amount × 10^decimals` computed exactly on
/// the decimal and written as a plain integer, never in scientific notation. An amount that is not positive leaves the amount out (the wallet asks for
/// it); an unknown coin gets its bare address, which any wallet can scan.
pub fn payment_uri(currency: &str, address: &str, amount: Decimal) -> String {
    payment_uri_on_chain(ETHEREUM_CHAIN_ID, currency, address, amount)
}

/// [`payment_uri`] for `environment`: the sandbox names the Sepolia test network
/// ([`SANDBOX_ETHEREUM_CHAIN_ID`]) in `ethereum:` URIs; its Bitcoin-style addresses are
/// testnet ones already.
pub fn payment_uri_for(environment: Environment, currency: &str, address: &str, amount: Decimal) -> String {
    let chain = match environment {
        Environment::Live => ETHEREUM_CHAIN_ID,
        Environment::Sandbox => SANDBOX_ETHEREUM_CHAIN_ID,
    };
    payment_uri_on_chain(chain, currency, address, amount)
}

fn payment_uri_on_chain(chain: u64, currency: &str, address: &str, amount: Decimal) -> String {
    let positive = amount > Decimal::ZERO;
    let coins = |scheme: &str| {
        if positive {
            format!("{scheme}:{address}?amount={}", amount.normalize())
        } else {
            format!("{scheme}:{address}")
        }
    };
    let units = |decimals: u32| base_units(amount, decimals).filter(|_| positive);
    match currency {
        "BTC" => coins("bitcoin"),
        "LTC" => coins("litecoin"),
        "SOL" => coins("solana"),
        "TRX" => coins("tron"),
        "ETH" => match units(coin_decimals("ETH").unwrap_or(18)) {
            Some(wei) => format!("ethereum:{address}@{chain}?value={wei}"),
            None => format!("ethereum:{address}@{chain}"),
        },
        token => {
            match (ERC20_CONTRACTS.iter().find(|(code, on, _)| *code == token && *on == chain), coin_decimals(token)) {
                (Some((_, _, contract)), Some(decimals)) => {
                    let call = format!("ethereum:{contract}@{chain}/transfer?address={address}");
                    match units(decimals) {
                        Some(units) => format!("{call}&uint256={units}"),
                        None => call,
                    }
                }
                _ => address.to_string(),
            }
        }
    }
}

/// `amount` in the coin's smallest unit (`amount × 10^decimals`) as a decimal integer,
/// exactly: the digits of the decimal's mantissa followed by the zeros its scale lacks,
/// so even amounts whose base units exceed what a `Decimal` or `u128` holds come out
/// right. An amount with more places than the coin has is rounded up to the coin's
/// precision first, as invoice amounts are (the customer is never asked for less).
/// `None` for a negative amount.
pub(crate) fn base_units(amount: Decimal, decimals: u32) -> Option<String> {
    if amount < Decimal::ZERO {
        return None;
    }
    let rounded = amount.round_dp_with_strategy(decimals, RoundingStrategy::AwayFromZero);
    let mantissa = rounded.mantissa().unsigned_abs();
    if mantissa == 0 {
        return Some("0".to_string());
    }
    let zeros = decimals.saturating_sub(rounded.scale()) as usize;
    Some(format!("{mantissa}{}", "0".repeat(zeros)))
}

/// A fake, testnet-style address for a sandbox invoice, in the coin's own form: a
/// bech32-looking `tb1q…` (BTC) or `tltc1q…` (LTC), a TRON `T…` (base58check of 0x41 and
/// 20 bytes), a Solana base58 public key, otherwise (ether and its tokens) a `0x…` hex
/// address. The bech32 ones are never valid on a main network; no key behind any of
/// them is known.
pub fn sandbox_address(invoice_id: &str, currency: &str) -> String {
    let digest = Sha256::digest(format!("coinorder-sandbox:{invoice_id}:{currency}").as_bytes());
    const BECH32: &[u8] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";
    match currency {
        "BTC" | "LTC" => {
            let body: String =
                digest.iter().chain(digest.iter()).take(38).map(|b| BECH32[(*b & 31) as usize] as char).collect();
            let prefix = if currency == "BTC" { "tb1q" } else { "tltc1q" };
            format!("{prefix}{body}")
        }
        "TRX" => {
            let mut payload = vec![0x41];
            payload.extend_from_slice(&digest[..20]);
            bitcoin::base58::encode_check(&payload)
        }
        "SOL" => bitcoin::base58::encode(&digest),
        _ => {
            format!("0x{}", digest[..20].to_lower_hex_string())
        }
    }
}

/// The default address when no source is configured: fake in sandbox, none in live.
pub(crate) fn default_address(environment: Environment, invoice_id: &str, currency: &str) -> Option<String> {
    (environment == Environment::Sandbox).then(|| sandbox_address(invoice_id, currency))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(text: &str) -> Decimal {
        text.parse().expect("decimal")
    }

    const TO: &str = "0x1111111111111111111111111111111111111111";

    #[test]
    fn sandbox_addresses_look_like_testnet_and_are_stable() {
        let btc = sandbox_address("inv-1", "BTC");
        assert!(btc.starts_with("tb1q") && btc.len() == 42, "{btc}");
        assert_eq!(btc, sandbox_address("inv-1", "BTC"));
        assert_ne!(btc, sandbox_address("inv-2", "BTC"));
        let eth = sandbox_address("inv-1", "USDT");
        assert!(eth.starts_with("0x") && eth.len() == 42, "{eth}");
        // The first 20 bytes of SHA-256("coinorder-sandbox:inv-1:USDT"), in lowercase hex.
        assert_eq!(eth, "0xf62403c601d5f3994516c5b698fab9e6a62c5e7b");
        assert_eq!(payment_uri("BTC", &btc, Decimal::new(150, 2)), format!("bitcoin:{btc}?amount=1.5"));
        assert_eq!(default_address(Environment::Live, "inv-1", "BTC"), None);
    }

    #[test]
    fn sandbox_addresses_of_tron_and_solana_have_their_chains_own_form() {
        // Not `0x…`: a wallet app of either chain would refuse that as no address at all.
        let tron = sandbox_address("inv-1", "TRX");
        assert!(tron.starts_with('T') && tron.len() == 34, "{tron}");
        let decoded = bitcoin::base58::decode_check(&tron).expect("base58check");
        assert_eq!((decoded.len(), decoded[0]), (21, 0x41), "{tron}");
        let solana = sandbox_address("inv-1", "SOL");
        let key = bitcoin::base58::decode(&solana).expect("base58");
        assert_eq!(key.len(), 32, "{solana}");
        assert_ne!(solana, sandbox_address("inv-2", "SOL"));
        assert_eq!(payment_uri("SOL", &solana, dec("1.5")), format!("solana:{solana}?amount=1.5"));
        let ltc = sandbox_address("inv-1", "LTC");
        assert!(ltc.starts_with("tltc1q"), "{ltc}");
    }

    #[test]
    fn coins_keep_their_bip21_style_uris() {
        assert_eq!(payment_uri("BTC", "bc1qx", dec("0.00012345")), "bitcoin:bc1qx?amount=0.00012345");
        assert_eq!(payment_uri("BTC", "bc1qx", dec("2.50000000")), "bitcoin:bc1qx?amount=2.5");
        assert_eq!(payment_uri("LTC", "ltc1qx", dec("3")), "litecoin:ltc1qx?amount=3");
        assert_eq!(payment_uri("SOL", "So1", dec("0.000000001")), "solana:So1?amount=0.000000001");
        assert_eq!(payment_uri("TRX", "T9y", dec("12.5")), "tron:T9y?amount=12.5");
    }

    #[test]
    fn sandbox_uris_name_the_test_network() {
        let sandbox = payment_uri_for(Environment::Sandbox, "ETH", TO, dec("0.5"));
        assert_eq!(sandbox, format!("ethereum:{TO}@11155111?value=500000000000000000"));
        assert!(payment_uri_for(Environment::Sandbox, "USDT", TO, dec("1")).contains("@11155111/transfer"));
        // Sandbox USDC is Circle's Sepolia test token, not the mainnet contract.
        assert_eq!(
            payment_uri_for(Environment::Sandbox, "USDC", TO, dec("1")),
            format!(
                "ethereum:0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238@11155111/transfer?address={TO}&uint256=1000000"
            )
        );
        assert_eq!(payment_uri_for(Environment::Live, "ETH", TO, dec("0.5")), payment_uri("ETH", TO, dec("0.5")));
    }

    #[test]
    fn ether_is_requested_in_wei() {
        assert_eq!(payment_uri("ETH", TO, dec("0.5")), format!("ethereum:{TO}@1?value=500000000000000000"));
        assert_eq!(payment_uri("ETH", TO, dec("0.000000000000000001")), format!("ethereum:{TO}@1?value=1"));
        assert_eq!(
            payment_uri("ETH", TO, dec("0.049975012493753123")),
            format!("ethereum:{TO}@1?value=49975012493753123")
        );
        assert_eq!(payment_uri("ETH", TO, dec("2")), format!("ethereum:{TO}@1?value=2000000000000000000"));
    }

    #[test]
    fn tokens_are_erc20_transfer_calls_in_base_units() {
        assert_eq!(
            payment_uri("USDT", TO, dec("19.99")),
            format!("ethereum:0xdAC17F958D2ee523a2206206994597C13D831ec7@1/transfer?address={TO}&uint256=19990000")
        );
        assert_eq!(
            payment_uri("USDC", TO, dec("0.000001")),
            format!("ethereum:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48@1/transfer?address={TO}&uint256=1")
        );
        assert_eq!(
            payment_uri("USDC", TO, dec("1000000.000000")),
            format!(
                "ethereum:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48@1/transfer?address={TO}&uint256=1000000000000"
            )
        );
        // Never the old form that wallets read as ether.
        for token in ["USDT", "USDC"] {
            let uri = payment_uri(token, TO, dec("19.99"));
            assert!(!uri.contains("amount=") && !uri.contains("value="), "{uri}");
        }
    }

    #[test]
    fn base_units_are_exact_integers() {
        // Agrees with exact decimal multiplication wherever that fits in a Decimal.
        for (amount, decimals) in [
            ("19.99", 6),
            ("0.000001", 6),
            ("123456.789", 6),
            ("0.00012345", 8),
            ("1.000000000000000001", 18),
            ("7922816251.426433759354395033", 18),
            ("1", 0),
        ] {
            let amount = dec(amount);
            let scale = Decimal::from_i128_with_scale(10_i128.pow(decimals), 0);
            let product = amount.checked_mul(scale).expect("fits").normalize();
            assert_eq!(product.scale(), 0, "{amount}");
            assert_eq!(base_units(amount, decimals), Some(product.to_string()), "{amount} x 10^{decimals}");
        }
        // Beyond what a Decimal (or u128) holds, still exact.
        assert!(Decimal::MAX.checked_mul(dec("1000000000000000000")).is_none());
        assert_eq!(base_units(Decimal::MAX, 18), Some(format!("{}{}", Decimal::MAX, "0".repeat(18))));
        // Trailing zeros of the scale and zero itself.
        assert_eq!(base_units(dec("1.500"), 6).as_deref(), Some("1500000"));
        assert_eq!(base_units(Decimal::ZERO, 18).as_deref(), Some("0"));
        // More places than the coin has: rounded up, never down.
        assert_eq!(base_units(dec("0.0000001"), 6).as_deref(), Some("1"));
        assert_eq!(base_units(dec("1.0000011"), 6).as_deref(), Some("1000002"));
        assert_eq!(base_units(dec("-1"), 6), None);
    }

    #[test]
    fn no_amount_without_a_positive_one_and_bare_address_for_unknown_coins() {
        assert_eq!(payment_uri("BTC", "bc1qx", Decimal::ZERO), "bitcoin:bc1qx");
        assert_eq!(payment_uri("ETH", TO, dec("-1")), format!("ethereum:{TO}@1"));
        assert_eq!(
            payment_uri("USDT", TO, Decimal::ZERO),
            format!("ethereum:0xdAC17F958D2ee523a2206206994597C13D831ec7@1/transfer?address={TO}")
        );
        assert_eq!(payment_uri("DOGE", "D8x", dec("5")), "D8x");
    }
}
