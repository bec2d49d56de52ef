//! Deposit addresses and payment URIs shown on the payment page.
//!
//! Live addresses come from the host's wallet through an [`AddressSource`]; the sandbox
//! makes clearly fake testnet-style addresses derived from the invoice id.

use rust_decimal::Decimal;
use sha2::{Digest, Sha256};

use crate::config::Environment;

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

/// The URI scheme wallets understand for a coin; tokens travel on Ethereum here.
fn uri_scheme(currency: &str) -> &'static str {
    match currency {
        "BTC" => "bitcoin",
        "LTC" => "litecoin",
        "SOL" => "solana",
        "TRX" => "tron",
        _ => "ethereum",
    }
}

/// The payment URI for `address` and `amount` of `currency`.
pub fn payment_uri(currency: &str, address: &str, amount: Decimal) -> String {
    format!("{}:{address}?amount={}", uri_scheme(currency), amount.normalize())
}

/// A fake, testnet-style address for a sandbox invoice: a BTC/LTC bech32-looking `tb1q…`
/// / `tltc1q…`, otherwise a `0x…` hex address. Never valid on a main network.
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
        _ => {
            let hex: String = digest.iter().take(20).map(|b| format!("{b:02x}")).collect();
            format!("0x{hex}")
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

    #[test]
    fn sandbox_addresses_look_like_testnet_and_are_stable() {
        let btc = sandbox_address("inv-1", "BTC");
        assert!(btc.starts_with("tb1q") && btc.len() == 42, "{btc}");
        assert_eq!(btc, sandbox_address("inv-1", "BTC"));
        assert_ne!(btc, sandbox_address("inv-2", "BTC"));
        let eth = sandbox_address("inv-1", "USDT");
        assert!(eth.starts_with("0x") && eth.len() == 42, "{eth}");
        assert_eq!(payment_uri("BTC", &btc, Decimal::new(150, 2)), format!("bitcoin:{btc}?amount=1.5"));
        assert_eq!(default_address(Environment::Live, "inv-1", "BTC"), None);
    }
}
