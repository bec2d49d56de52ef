//! SQLite statements for API keys.

use const_format::concatcp;
use rusqlite::named_params;

use super::SqliteConn;
use crate::error::Result;
use crate::keys::{ApiKey, KeyStatus};
use crate::storage::rows::{self, KEY_COLUMNS, KEY_CREDENTIAL_COLUMNS};
use crate::storage::{KeyCredential, KeyRow};
use crate::time::Timestamp;

/// The SQLite side of the key methods of [`crate::storage::Conn`] (same names, arguments
/// and results).
impl SqliteConn<'_> {
    pub(crate) fn insert_key(&self, row: &KeyRow) -> Result<()> {
        let key = &row.key;
        self.execute(
            "INSERT INTO api_keys (id, user_id, environment, key_hash, key_hint, status, webhook_url,
                                       webhook_secret_enc, created_at, last_used_at)
                 VALUES (:id, :user_id, :environment, :key_hash, :key_hint, :status, :webhook_url,
                         :webhook_secret_enc, :created_at, NULL)",
            named_params! {
                ":id": key.id,
                ":user_id": key.user_id,
                ":environment": key.environment.as_str(),
                ":key_hash": row.key_hash,
                ":key_hint": key.key_hint,
                ":status": key.status.as_str(),
                ":webhook_url": key.webhook_url,
                ":webhook_secret_enc": row.webhook_secret_enc,
                ":created_at": key.created_at_ms.as_millis(),
            },
        )?;
        Ok(())
    }

    pub(crate) fn key_by_id(&self, id: &str) -> Result<Option<KeyRow>> {
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = :id");
        self.query_opt(&sql, named_params! {":id": id}, rows::key)
    }

    pub(crate) fn key_by_hash(&self, key_hash: &[u8]) -> Result<Option<KeyCredential>> {
        const SQL: &str = concatcp!("SELECT ", KEY_CREDENTIAL_COLUMNS, " FROM api_keys WHERE key_hash = ?1");
        self.query_opt(SQL, [key_hash], rows::key_credential)
    }

    pub(crate) fn all_keys(&self) -> Result<Vec<ApiKey>> {
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id");
        self.query(&sql, [], |row| Ok(rows::key(row)?.key))
    }

    pub(crate) fn set_key_status(&self, id: &str, status: KeyStatus) -> Result<bool> {
        let changed = self.execute(
            "UPDATE api_keys SET status = :status WHERE id = :id",
            named_params! {":status": status.as_str(), ":id": id},
        )?;
        Ok(changed == 1)
    }

    pub(crate) fn set_key_webhook_url(&self, id: &str, url: Option<&str>) -> Result<bool> {
        let changed = self
            .execute("UPDATE api_keys SET webhook_url = :url WHERE id = :id", named_params! {":url": url, ":id": id})?;
        Ok(changed == 1)
    }

    pub(crate) fn set_key_display_name(&self, id: &str, name: Option<&str>) -> Result<bool> {
        let changed = self.execute(
            "UPDATE api_keys SET display_name = :name WHERE id = :id",
            named_params! {":name": name, ":id": id},
        )?;
        Ok(changed == 1)
    }

    pub(crate) fn set_key_webhook_secret(&self, id: &str, sealed: &str) -> Result<bool> {
        let changed = self.execute(
            "UPDATE api_keys SET webhook_secret_enc = :sealed WHERE id = :id",
            named_params! {":sealed": sealed, ":id": id},
        )?;
        Ok(changed == 1)
    }

    pub(crate) fn touch_key(&self, id: &str, now: Timestamp) -> Result<()> {
        self.execute(
            // Never back in time: a use kept while the writer was busy can be written after a
            // later one.
            "UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, :now), :now) WHERE id = :id",
            named_params! {":now": now.as_millis(), ":id": id},
        )?;
        Ok(())
    }

    pub(crate) fn delete_key(&self, id: &str, now: Timestamp) -> Result<bool> {
        self.execute(
            "INSERT INTO retired_keys (id, user_id, environment, webhook_url, webhook_secret_enc, retired_at)
                 SELECT id, user_id, environment, webhook_url, webhook_secret_enc, :now FROM api_keys WHERE id = :id",
            named_params! {":id": id, ":now": now.as_millis()},
        )?;
        let changed = self.execute("DELETE FROM api_keys WHERE id = :id", named_params! {":id": id})?;
        Ok(changed == 1)
    }

    pub(crate) fn signing_key(&self, id: &str) -> Result<Option<(Option<String>, String)>> {
        self.query_opt(
            "SELECT webhook_url, webhook_secret_enc FROM api_keys WHERE id = :id
                 UNION ALL
                 SELECT webhook_url, webhook_secret_enc FROM retired_keys WHERE id = :id
                 LIMIT 1",
            named_params! {":id": id},
            rows::signing_key,
        )
    }
}
