//! SQLite statements for watch-only wallets and the chain watcher's bookkeeping.

use rusqlite::named_params;

use super::SqliteConn;
use crate::environment::Environment;
use crate::error::{Error, ErrorKind, Result};
use crate::payments::{Payment, PaymentState};
use crate::storage::rows::{self, WALLET_COLUMNS};
use crate::storage::{WalletRow, WatchedInvoice};
use crate::time::Timestamp;

/// The SQLite side of the wallet methods of [`crate::storage::Conn`] (same names,
/// arguments and results).
impl SqliteConn<'_> {
    pub(crate) fn upsert_wallet(
        &self,
        environment: Environment,
        coin: &str,
        descriptor: &str,
        account_id: &str,
        now: Timestamp,
    ) -> Result<()> {
        self.execute(
            "INSERT INTO wallets (environment, coin, descriptor, account_id, created_at, updated_at)
                 VALUES (:environment, :coin, :descriptor, :account_id, :now, :now)
                 ON CONFLICT (environment, coin) DO UPDATE
                 SET descriptor = excluded.descriptor, account_id = excluded.account_id, updated_at = excluded.updated_at",
            named_params! {
                ":environment": environment.as_str(),
                ":coin": coin,
                ":descriptor": descriptor,
                ":account_id": account_id,
                ":now": now.as_millis(),
            },
        )?;
        self.execute(
            "INSERT INTO wallet_accounts (environment, account_id) VALUES (:environment, :account_id)
                 ON CONFLICT (environment, account_id) DO NOTHING",
            named_params! {":environment": environment.as_str(), ":account_id": account_id},
        )?;
        Ok(())
    }

    pub(crate) fn wallets(&self, environment: Environment) -> Result<Vec<WalletRow>> {
        let sql = format!(
            "SELECT {WALLET_COLUMNS} FROM wallets w
             LEFT JOIN wallet_accounts a ON a.environment = w.environment AND a.account_id = w.account_id
             WHERE w.environment = :environment ORDER BY w.coin"
        );
        self.query(&sql, named_params! {":environment": environment.as_str()}, rows::wallet)
    }

    pub(crate) fn wallet(&self, environment: Environment, coin: &str) -> Result<Option<WalletRow>> {
        let sql = format!(
            "SELECT {WALLET_COLUMNS} FROM wallets w
             LEFT JOIN wallet_accounts a ON a.environment = w.environment AND a.account_id = w.account_id
             WHERE w.environment = :environment AND w.coin = :coin"
        );
        self.query_opt(&sql, named_params! {":environment": environment.as_str(), ":coin": coin}, rows::wallet)
    }

    pub(crate) fn delete_wallet(&self, environment: Environment, coin: &str) -> Result<bool> {
        let deleted = self.execute(
            "DELETE FROM wallets WHERE environment = :environment AND coin = :coin",
            named_params! {":environment": environment.as_str(), ":coin": coin},
        )?;
        Ok(deleted == 1)
    }

    pub(crate) fn wallet_account_ids(&self, environment: Environment) -> Result<Vec<String>> {
        self.query(
            "SELECT account_id FROM wallet_accounts WHERE environment = :environment ORDER BY account_id",
            named_params! {":environment": environment.as_str()},
            |row| row.text(0),
        )
    }

    pub(crate) fn take_derivation_index(&self, environment: Environment, account_id: &str) -> Result<i64> {
        self.query_opt(
            "UPDATE wallet_accounts SET next_index = next_index + 1
                 WHERE environment = :environment AND account_id = :account_id
                 RETURNING next_index - 1",
            named_params! {":environment": environment.as_str(), ":account_id": account_id},
            |row| row.int(0),
        )?
        .ok_or_else(|| Error::new(ErrorKind::Corrupt(format!("wallet_accounts: no counter for {account_id:?}"))))
    }

    pub(crate) fn watched_invoices(&self, environment: Environment, late_since_ms: i64) -> Result<Vec<WatchedInvoice>> {
        let sql = rows::watched_invoices_sql(&super::orders::INVOICES, ":environment", ":late_since");
        self.query(
            &sql,
            named_params! {":environment": environment.as_str(), ":late_since": late_since_ms},
            rows::watched_invoice,
        )
    }

    pub(crate) fn watched_unconfirmed_payments(&self, environment: Environment) -> Result<Vec<Payment>> {
        let sql = rows::watched_unconfirmed_payments_sql(&super::orders::INVOICES, ":environment", "p.txid");
        self.query(&sql, named_params! {":environment": environment.as_str()}, rows::payment)
    }

    pub(crate) fn mark_payment_vanished(&self, environment: Environment, txid: &str) -> Result<()> {
        self.execute(
            "UPDATE payments SET vanished = 1 WHERE environment = :environment AND txid = :txid AND state = :rejected",
            named_params! {
                ":environment": environment.as_str(),
                ":txid": txid,
                ":rejected": PaymentState::Rejected.as_str(),
            },
        )?;
        Ok(())
    }

    pub(crate) fn payment_vanished(&self, environment: Environment, txid: &str) -> Result<bool> {
        let vanished = self.query_opt(
            "SELECT vanished FROM payments WHERE environment = :environment AND txid = :txid",
            named_params! {":environment": environment.as_str(), ":txid": txid},
            |row| row.int(0),
        )?;
        Ok(vanished == Some(1))
    }

    pub(crate) fn chain_cursor(&self, environment: Environment, chain: &str) -> Result<Option<i64>> {
        self.query_opt(
            "SELECT next_block FROM chain_cursors WHERE environment = :environment AND chain = :chain",
            named_params! {":environment": environment.as_str(), ":chain": chain},
            |row| row.int(0),
        )
    }

    pub(crate) fn set_chain_cursor(&self, environment: Environment, chain: &str, next_block: i64) -> Result<()> {
        self.execute(
            "INSERT INTO chain_cursors (environment, chain, next_block) VALUES (:environment, :chain, :next_block)
                 ON CONFLICT (environment, chain) DO UPDATE SET next_block = excluded.next_block",
            named_params! {":environment": environment.as_str(), ":chain": chain, ":next_block": next_block},
        )?;
        Ok(())
    }
}
