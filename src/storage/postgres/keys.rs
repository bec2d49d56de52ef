//! PostgreSQL statements for API keys: those of `sqlite/keys.rs`, with the same column
//! lists and row builders (`storage/rows.rs`).

use const_format::concatcp;

use super::PgConn;
use crate::error::Result;
use crate::keys::{ApiKey, KeyStatus};
use crate::storage::rows::{self, KEY_COLUMNS, KEY_CREDENTIAL_COLUMNS};
use crate::storage::{KeyCredential, KeyRow, SigningKey};
use crate::time::Timestamp;

/// The PostgreSQL side of the key methods of [`crate::storage::Conn`] (same names,
/// arguments and results).
impl PgConn {
    pub(crate) fn insert_key(&self, row: &KeyRow) -> Result<()> {
        let key = &row.key;
        self.execute(
            "INSERT INTO api_keys (id, user_id, environment, key_hash, key_hint, status, webhook_url,
                                   webhook_secret_enc, created_at, last_used_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL)",
            &[
                &key.id,
                &key.user_id,
                &key.environment.as_str(),
                &row.key_hash,
                &key.key_hint,
                &key.status.as_str(),
                &key.webhook_url,
                &row.webhook_secret_enc,
                &key.created_at_ms.as_millis(),
            ],
        )?;
        Ok(())
    }

    pub(crate) fn key_by_id(&self, id: &str) -> Result<Option<KeyRow>> {
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1");
        self.query_opt(&sql, &[&id], rows::key)
    }

    pub(crate) fn key_by_hash(&self, key_hash: &[u8]) -> Result<Option<KeyCredential>> {
        const SQL: &str = concatcp!("SELECT ", KEY_CREDENTIAL_COLUMNS, " FROM api_keys WHERE key_hash = $1");
        self.query_opt(SQL, &[&key_hash], rows::key_credential)
    }

    pub(crate) fn cached_key(&self, _key_hash: &[u8]) -> Option<KeyCredential> {
        None
    }

    pub(crate) fn key_cache_current(&self) -> Result<bool> {
        Ok(false)
    }

    pub(crate) fn all_keys(&self) -> Result<Vec<ApiKey>> {
        // COLLATE "C": ties on created_at break by byte order of the id, as in SQLite
        // (ids mix upper and lower case, which a locale collation would interleave).
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id COLLATE \"C\"");
        self.query(&sql, &[], |row| Ok(rows::key(row)?.key))
    }

    pub(crate) fn set_key_status(&self, id: &str, status: KeyStatus) -> Result<bool> {
        let changed = self.execute("UPDATE api_keys SET status = $1 WHERE id = $2", &[&status.as_str(), &id])?;
        Ok(changed == 1)
    }

    pub(crate) fn set_key_webhook_url(&self, id: &str, url: Option<&str>) -> Result<bool> {
        let changed = self.execute("UPDATE api_keys SET webhook_url = $1 WHERE id = $2", &[&url, &id])?;
        Ok(changed == 1)
    }

    pub(crate) fn set_key_display_name(&self, id: &str, name: Option<&str>) -> Result<bool> {
        let changed = self.execute("UPDATE api_keys SET display_name = $1 WHERE id = $2", &[&name, &id])?;
        Ok(changed == 1)
    }

    pub(crate) fn set_key_webhook_secret(
        &self,
        id: &str,
        sealed: &str,
        keep_previous_until: Option<i64>,
    ) -> Result<bool> {
        // As on SQLite: the replaced secret is kept only when it is to go on signing.
        let changed = self.execute(
            "UPDATE api_keys SET
                 previous_secret_enc = CASE WHEN $2::BIGINT IS NULL THEN NULL ELSE webhook_secret_enc END,
                 previous_secret_until = $2::BIGINT,
                 webhook_secret_enc = $1
             WHERE id = $3",
            &[&sealed, &keep_previous_until, &id],
        )?;
        Ok(changed == 1)
    }

    pub(crate) fn touch_key(&self, id: &str, now: Timestamp) -> Result<()> {
        // Never back in time, as on SQLite.
        self.execute(
            "UPDATE api_keys SET last_used_at = GREATEST(COALESCE(last_used_at, $1), $1) WHERE id = $2",
            &[&now.as_millis(), &id],
        )?;
        Ok(())
    }

    pub(crate) fn delete_key(&self, id: &str, now: Timestamp) -> Result<bool> {
        // The same two statements as SQLite, in this transaction; the read of the row
        // about to be deleted locks it.
        self.execute(
            &format!(
                "INSERT INTO retired_keys (id, user_id, environment, webhook_url, webhook_secret_enc, retired_at)
                 SELECT id, user_id, environment, webhook_url, webhook_secret_enc, $2::BIGINT
                 FROM api_keys WHERE id = $1{}",
                self.for_update()
            ),
            &[&id, &now.as_millis()],
        )?;
        let changed = self.execute("DELETE FROM api_keys WHERE id = $1", &[&id])?;
        Ok(changed == 1)
    }

    pub(crate) fn sealed_secrets(&self, limit: i64) -> Result<Vec<String>> {
        self.query(
            "SELECT webhook_secret_enc FROM api_keys
                 UNION ALL
                 SELECT webhook_secret_enc FROM retired_keys
                 LIMIT $1",
            &[&limit],
            rows::sealed_secret,
        )
    }

    pub(crate) fn signing_key(&self, id: &str) -> Result<Option<SigningKey>> {
        // An explicit order: PostgreSQL does not promise that UNION ALL keeps its
        // branches' order, so the live key is preferred by `pick`, not by position.
        self.query_opt(
            "SELECT webhook_url, webhook_secret_enc, previous_secret_enc, previous_secret_until FROM (
                 SELECT 0 AS pick, webhook_url, webhook_secret_enc, previous_secret_enc, previous_secret_until
                 FROM api_keys WHERE id = $1
                 UNION ALL
                 SELECT 1 AS pick, webhook_url, webhook_secret_enc, NULL, NULL::BIGINT FROM retired_keys WHERE id = $1
             ) AS signing ORDER BY pick LIMIT 1",
            &[&id],
            rows::signing_key,
        )
    }
}
