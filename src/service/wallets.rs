//! Watch-only wallets: the merchant's extended public key per coin, and the deposit
//! address each new invoice gets from it (issue 14; the derivation rules are in
//! `crate::wallets`).

use std::collections::HashMap;
use std::sync::Mutex;

use super::Service;
use crate::addresses;
use crate::error::{Error, ErrorKind, Result};
use crate::orders::CreatedOrder;
use crate::storage::{Conn, WalletRow};
use crate::wallets::{Wallet, WatchOnlyWallet, WALLET_COINS};

/// Parsed wallets by their stored descriptor, so a create parses a key once per
/// process rather than once per order.
#[derive(Debug, Default)]
pub(crate) struct WalletCache(Mutex<HashMap<(String, String), WatchOnlyWallet>>);

impl WalletCache {
    fn get(&self, service: &Service, coin: &str, descriptor: &str) -> Result<WatchOnlyWallet> {
        let key = (coin.to_string(), descriptor.to_string());
        let mut cache = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(wallet) = cache.get(&key) {
            return Ok(wallet.clone());
        }
        let wallet = WatchOnlyWallet::parse(coin, descriptor, service.environment()).map_err(|e| {
            Error::new(ErrorKind::Corrupt(format!("wallets: the stored {coin} wallet no longer parses: {e}")))
        })?;
        cache.insert(key, wallet.clone());
        Ok(wallet)
    }
}

/// The coin code as stored: upper case, one of [`WALLET_COINS`].
fn wallet_coin(coin: &str) -> Result<String> {
    let coin = coin.trim().to_ascii_uppercase();
    if WALLET_COINS.contains(&coin.as_str()) {
        Ok(coin)
    } else {
        Err(Error::invalid("coin", format!("must be one of {}", WALLET_COINS.join(", "))))
    }
}

impl Service {
    /// Sets (or replaces) the watch-only wallet of `coin` in this environment: from then
    /// on, each new invoice in `coin` gets the next address derived from it, unless the
    /// host plugged in an [`AddressSource`](crate::AddressSource), which gives every
    /// address.
    ///
    /// `key` is an extended public key (never a private one, which is refused):
    /// - BTC, BIP84 native segwit: a `zpub` or `xpub` account key, or a descriptor
    ///   `wpkh([fingerprint/84'/0'/0']xpub.../0/*)`; in the sandbox a `vpub` or `tpub`.
    /// - ETH, USDT, USDC: the account `xpub` at `m/44'/60'/0'`; addresses are
    ///   `m/44'/60'/0'/0/i`, EIP-55 checksummed.
    ///
    /// Replacing a key never reuses an index: the counter belongs to the key and only
    /// ever grows, and coins set to the same key share it.
    pub fn set_wallet(&self, coin: &str, key: &str) -> Result<Wallet> {
        let coin = wallet_coin(coin)?;
        let wallet = WatchOnlyWallet::parse(&coin, key, self.environment())?;
        let now = self.now();
        let environment = self.environment();
        let row = self.store.write(|db| {
            // The same key under another text keeps the counter it has, so no address is
            // handed out twice.
            let existing = db.wallet_account_ids(environment)?;
            let account_id = wallet.same_key_account(&existing).cloned().unwrap_or_else(|| wallet.account_id());
            db.upsert_wallet(environment, &coin, wallet.descriptor(), &account_id, now)?;
            db.wallet(environment, &coin)
        })?;
        let row = row.ok_or_else(|| Error::new(ErrorKind::Corrupt(format!("wallets: {coin} vanished after set"))))?;
        self.wallet_info(row)
    }

    /// Every watch-only wallet of this environment, by coin.
    pub fn wallets(&self) -> Result<Vec<Wallet>> {
        let rows = self.store.read(|db| db.wallets(self.environment()))?;
        rows.into_iter().map(|row| self.wallet_info(row)).collect()
    }

    /// Removes the wallet of `coin`: new invoices in it get no derived address. Invoices
    /// made before keep theirs and are still watched. False when none was set.
    pub fn remove_wallet(&self, coin: &str) -> Result<bool> {
        let coin = wallet_coin(coin)?;
        self.store.write(|db| db.delete_wallet(self.environment(), &coin))
    }

    /// The address of `coin`'s wallet at `index`, to check against the merchant's own
    /// wallet software (`coinorder wallets show-address`).
    pub fn wallet_address(&self, coin: &str, index: u32) -> Result<String> {
        let coin = wallet_coin(coin)?;
        let row = self.store.read(|db| db.wallet(self.environment(), &coin))?.ok_or_else(|| {
            Error::invalid("coin", format!("has no wallet in {} (set one first)", self.environment()))
        })?;
        self.wallets.get(self, &coin, &row.descriptor)?.address(index)
    }

    fn wallet_info(&self, row: WalletRow) -> Result<Wallet> {
        let wallet = self.wallets.get(self, &row.coin, &row.descriptor)?;
        Ok(Wallet {
            environment: self.environment(),
            first_address: wallet.address(0)?,
            next_index: u32::try_from(row.next_index).unwrap_or(u32::MAX),
            coin: row.coin,
            descriptor: row.descriptor,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }

    /// Inside the create's write transaction: when the invoice's coin has a wallet, the
    /// order as it will be stored, with the next derived address and its index; `None`
    /// when there is no wallet for the coin.
    pub(super) fn with_derived_address(&self, db: &Conn<'_>, created: &CreatedOrder) -> Result<Option<CreatedOrder>> {
        let invoice = &created.order.invoice;
        let Some(row) = db.wallet(self.environment(), &invoice.currency)? else {
            return Ok(None);
        };
        let wallet = self.wallets.get(self, &row.coin, &row.descriptor)?;
        let index = db.take_derivation_index(self.environment(), &row.account_id)?;
        let index = u32::try_from(index)
            .map_err(|_| Error::new(ErrorKind::Corrupt(format!("wallet_accounts: index {index} out of range"))))?;
        let address = wallet.address(index)?;
        let mut derived = created.clone();
        derived.order.invoice.payment_uri =
            addresses::payment_uri_for(self.environment(), &invoice.currency, &address, invoice.amount);
        derived.order.invoice.address = address;
        derived.order.invoice.derivation_index = Some(index);
        // The stored 201 body (spec §4.1) shows no invoice, so it stands as rendered.
        Ok(Some(derived))
    }
}
