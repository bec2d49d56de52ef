//! PostgreSQL twins of the methods in `storage/keys.rs`.

use postgres::Row;

use super::PgConn;
use crate::environment::Environment;
use crate::error::Result;
use crate::keys::{ApiKey, KeyStatus};
use crate::storage::keys::KEY_COLUMNS;
use crate::storage::KeyRow;
use crate::time::Timestamp;

/// The PostgreSQL twin of the SQLite `key_row`: a row of [`KEY_COLUMNS`], by position.
fn key_row(row: &Row) -> Result<KeyRow> {
    Ok(KeyRow {
        key: ApiKey {
            id: row.try_get(0)?,
            user_id: row.try_get(1)?,
            environment: super::decode(row, 2, "api_keys.environment", |text| text.parse::<Environment>().ok())?,
            status: super::decode(row, 3, "api_keys.status", KeyStatus::parse)?,
            webhook_url: row.try_get(4)?,
            key_hint: row.try_get(5)?,
            created_at_ms: Timestamp(row.try_get(6)?),
            last_used_at_ms: row.try_get::<_, Option<i64>>(7)?.map(Timestamp),
        },
        key_hash: row.try_get(8)?,
        webhook_secret_enc: row.try_get(9)?,
    })
}

/// PostgreSQL twins of the key methods of [`crate::storage::Conn`]: same names, arguments
/// and results.
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
        self.query_opt(&sql, &[&id])?.map(|row| key_row(&row)).transpose()
    }

    pub(crate) fn key_by_hash(&self, key_hash: &[u8]) -> Result<Option<KeyRow>> {
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE key_hash = $1");
        self.query_opt(&sql, &[&key_hash])?.map(|row| key_row(&row)).transpose()
    }

    pub(crate) fn all_keys(&self) -> Result<Vec<ApiKey>> {
        // COLLATE "C": ties on created_at break by byte order of the id, as in SQLite
        // (ids mix upper and lower case, which a locale collation would interleave).
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id COLLATE \"C\"");
        self.query(&sql, &[])?.iter().map(|row| Ok(key_row(row)?.key)).collect()
    }

    pub(crate) fn set_key_status(&self, id: &str, status: KeyStatus) -> Result<bool> {
        let changed = self.execute("UPDATE api_keys SET status = $1 WHERE id = $2", &[&status.as_str(), &id])?;
        Ok(changed == 1)
    }

    pub(crate) fn set_key_webhook_url(&self, id: &str, url: Option<&str>) -> Result<bool> {
        let changed = self.execute("UPDATE api_keys SET webhook_url = $1 WHERE id = $2", &[&url, &id])?;
        Ok(changed == 1)
    }

    pub(crate) fn set_key_webhook_secret(&self, id: &str, sealed: &str) -> Result<bool> {
        let changed = self.execute("UPDATE api_keys SET webhook_secret_enc = $1 WHERE id = $2", &[&sealed, &id])?;
        Ok(changed == 1)
    }

    pub(crate) fn touch_key(&self, id: &str, now: Timestamp) -> Result<()> {
        self.execute("UPDATE api_keys SET last_used_at = $1 WHERE id = $2", &[&now.as_millis(), &id])?;
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

    pub(crate) fn signing_key(&self, id: &str) -> Result<Option<(Option<String>, String)>> {
        // An explicit order: PostgreSQL does not promise that UNION ALL keeps its
        // branches' order, so the live key is preferred by `pick`, not by position.
        let row = self.query_opt(
            "SELECT webhook_url, webhook_secret_enc FROM (
                 SELECT 0 AS pick, webhook_url, webhook_secret_enc FROM api_keys WHERE id = $1
                 UNION ALL
                 SELECT 1 AS pick, webhook_url, webhook_secret_enc FROM retired_keys WHERE id = $1
             ) AS signing ORDER BY pick LIMIT 1",
            &[&id],
        )?;
        row.map(|row| Ok((row.try_get(0)?, row.try_get(1)?))).transpose()
    }
}
