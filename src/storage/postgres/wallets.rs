//! PostgreSQL statements for watch-only wallets and the chain watcher's bookkeeping:
//! those of `sqlite/wallets.rs` with positional `$n` parameters.

use super::PgConn;
use crate::environment::Environment;
use crate::error::{Error, ErrorKind, Result};
use crate::payments::{Payment, PaymentState};
use crate::storage::rows::{self, WALLET_COLUMNS};
use crate::storage::{WalletRow, WatchedInvoice};
use crate::time::Timestamp;

/// The PostgreSQL side of the wallet methods of [`crate::storage::Conn`] (same names,
/// arguments and results).
impl PgConn {
    pub(crate) fn upsert_wallet(
        &self,
        environment: Environment,
        coin: &str,
        descriptor: &str,
        account_id: &str,
        now: Timestamp,
    ) -> Result<()> {
        let now = now.as_millis();
        self.execute(
            "INSERT INTO wallets (environment, coin, descriptor, account_id, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $5)
             ON CONFLICT (environment, coin) DO UPDATE
             SET descriptor = excluded.descriptor, account_id = excluded.account_id, updated_at = excluded.updated_at",
            &[&environment.as_str(), &coin, &descriptor, &account_id, &now],
        )?;
        self.execute(
            "INSERT INTO wallet_accounts (environment, account_id) VALUES ($1, $2)
             ON CONFLICT (environment, account_id) DO NOTHING",
            &[&environment.as_str(), &account_id],
        )?;
        Ok(())
    }

    pub(crate) fn wallets(&self, environment: Environment) -> Result<Vec<WalletRow>> {
        let sql = format!(
            "SELECT {WALLET_COLUMNS} FROM wallets w
             LEFT JOIN wallet_accounts a ON a.environment = w.environment AND a.account_id = w.account_id
             WHERE w.environment = $1 ORDER BY w.coin COLLATE \"C\""
        );
        self.query(&sql, &[&environment.as_str()], rows::wallet)
    }

    pub(crate) fn wallet(&self, environment: Environment, coin: &str) -> Result<Option<WalletRow>> {
        let sql = format!(
            "SELECT {WALLET_COLUMNS} FROM wallets w
             LEFT JOIN wallet_accounts a ON a.environment = w.environment AND a.account_id = w.account_id
             WHERE w.environment = $1 AND w.coin = $2"
        );
        self.query_opt(&sql, &[&environment.as_str(), &coin], rows::wallet)
    }

    pub(crate) fn delete_wallet(&self, environment: Environment, coin: &str) -> Result<bool> {
        let deleted =
            self.execute("DELETE FROM wallets WHERE environment = $1 AND coin = $2", &[&environment.as_str(), &coin])?;
        Ok(deleted == 1)
    }

    pub(crate) fn wallet_account_ids(&self, environment: Environment) -> Result<Vec<String>> {
        self.query(
            "SELECT account_id FROM wallet_accounts WHERE environment = $1 ORDER BY account_id",
            &[&environment.as_str()],
            |row| row.text(0),
        )
    }

    // The UPDATE takes the counter's row lock until commit: a concurrent create waits,
    // then (SERIALIZABLE) fails as a serialization failure and PgStore::write runs it
    // again, when it reads the winner's number.
    pub(crate) fn take_derivation_index(&self, environment: Environment, account_id: &str) -> Result<i64> {
        self.query_opt(
            "UPDATE wallet_accounts SET next_index = next_index + 1
             WHERE environment = $1 AND account_id = $2
             RETURNING next_index - 1",
            &[&environment.as_str(), &account_id],
            |row| row.int(0),
        )?
        .ok_or_else(|| Error::new(ErrorKind::Corrupt(format!("wallet_accounts: no counter for {account_id:?}"))))
    }

    pub(crate) fn watched_invoices(&self, environment: Environment, late_since_ms: i64) -> Result<Vec<WatchedInvoice>> {
        let sql = rows::watched_invoices_sql(&super::orders::INVOICES, "$1", "$2");
        self.query(&sql, &[&environment.as_str(), &late_since_ms], rows::watched_invoice)
    }

    pub(crate) fn watched_unconfirmed_payments(&self, environment: Environment) -> Result<Vec<Payment>> {
        let sql = rows::watched_unconfirmed_payments_sql(&super::orders::INVOICES, "$1", "p.txid COLLATE \"C\"");
        self.query(&sql, &[&environment.as_str()], rows::payment)
    }

    pub(crate) fn mark_payment_vanished(&self, environment: Environment, txid: &str) -> Result<()> {
        self.execute(
            "UPDATE payments SET vanished = TRUE WHERE environment = $1 AND txid = $2 AND state = $3",
            &[&environment.as_str(), &txid, &PaymentState::Rejected.as_str()],
        )?;
        Ok(())
    }

    pub(crate) fn payment_vanished(&self, environment: Environment, txid: &str) -> Result<bool> {
        let vanished = self.query_opt(
            "SELECT CASE WHEN vanished THEN 1 ELSE 0 END::BIGINT FROM payments WHERE environment = $1 AND txid = $2",
            &[&environment.as_str(), &txid],
            |row| row.int(0),
        )?;
        Ok(vanished == Some(1))
    }

    pub(crate) fn chain_cursor(&self, environment: Environment, chain: &str) -> Result<Option<i64>> {
        self.query_opt(
            "SELECT next_block FROM chain_cursors WHERE environment = $1 AND chain = $2",
            &[&environment.as_str(), &chain],
            |row| row.int(0),
        )
    }

    pub(crate) fn set_chain_cursor(&self, environment: Environment, chain: &str, next_block: i64) -> Result<()> {
        self.execute(
            "INSERT INTO chain_cursors (environment, chain, next_block) VALUES ($1, $2, $3)
             ON CONFLICT (environment, chain) DO UPDATE SET next_block = excluded.next_block",
            &[&environment.as_str(), &chain, &next_block],
        )?;
        Ok(())
    }
}
