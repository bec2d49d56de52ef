//! SQL for API keys.

use rusqlite::{named_params, OptionalExtension, Row};

use super::{decode, Conn};
use crate::environment::Environment;
use crate::error::Result;
use crate::keys::{ApiKey, KeyStatus};
use crate::time::Timestamp;

/// A stored key with the columns only the library itself may see.
pub(crate) struct KeyRow {
    pub key: ApiKey,
    pub key_hash: Vec<u8>,
    pub webhook_secret_enc: String,
}

// Read by position in key_row, in this order.
pub(super) const KEY_COLUMNS: &str =
    "id, user_id, environment, status, webhook_url, key_hint, created_at, last_used_at, key_hash, webhook_secret_enc";

fn key_row(row: &Row<'_>) -> rusqlite::Result<KeyRow> {
    Ok(KeyRow {
        key: ApiKey {
            id: row.get(0)?,
            user_id: row.get(1)?,
            environment: decode(row, 2, "api_keys.environment", |text| text.parse::<Environment>().ok())?,
            status: decode(row, 3, "api_keys.status", KeyStatus::parse)?,
            webhook_url: row.get(4)?,
            key_hint: row.get(5)?,
            created_at_ms: Timestamp(row.get(6)?),
            last_used_at_ms: row.get::<_, Option<i64>>(7)?.map(Timestamp),
        },
        key_hash: row.get(8)?,
        webhook_secret_enc: row.get(9)?,
    })
}

impl Conn<'_> {
    pub(crate) fn insert_key(&self, row: &KeyRow) -> Result<()> {
        let c = sqlite_or!(self, pg => pg.insert_key(row));
        let key = &row.key;
        c.prepare_cached(
            "INSERT INTO api_keys (id, user_id, environment, key_hash, key_hint, status, webhook_url,
                                       webhook_secret_enc, created_at, last_used_at)
                 VALUES (:id, :user_id, :environment, :key_hash, :key_hint, :status, :webhook_url,
                         :webhook_secret_enc, :created_at, NULL)",
        )?
        .execute(named_params! {
            ":id": key.id,
            ":user_id": key.user_id,
            ":environment": key.environment.as_str(),
            ":key_hash": row.key_hash,
            ":key_hint": key.key_hint,
            ":status": key.status.as_str(),
            ":webhook_url": key.webhook_url,
            ":webhook_secret_enc": row.webhook_secret_enc,
            ":created_at": key.created_at_ms.as_millis(),
        })?;
        Ok(())
    }

    pub(crate) fn key_by_id(&self, id: &str) -> Result<Option<KeyRow>> {
        let c = sqlite_or!(self, pg => pg.key_by_id(id));
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = :id");
        Ok(c.prepare_cached(&sql)?.query_row(named_params! {":id": id}, key_row).optional()?)
    }

    pub(crate) fn key_by_hash(&self, key_hash: &[u8]) -> Result<Option<KeyRow>> {
        let c = sqlite_or!(self, pg => pg.key_by_hash(key_hash));
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE key_hash = :key_hash");
        Ok(c.prepare_cached(&sql)?.query_row(named_params! {":key_hash": key_hash}, key_row).optional()?)
    }

    pub(crate) fn all_keys(&self) -> Result<Vec<ApiKey>> {
        let c = sqlite_or!(self, pg => pg.all_keys());
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id");
        let mut stmt = c.prepare_cached(&sql)?;
        let rows = stmt.query_map([], key_row)?;
        let mut keys = Vec::new();
        for row in rows {
            keys.push(row?.key);
        }
        Ok(keys)
    }

    /// Returns false when no key has that id.
    pub(crate) fn set_key_status(&self, id: &str, status: KeyStatus) -> Result<bool> {
        let c = sqlite_or!(self, pg => pg.set_key_status(id, status));
        let changed = c
            .prepare_cached("UPDATE api_keys SET status = :status WHERE id = :id")?
            .execute(named_params! {":status": status.as_str(), ":id": id})?;
        Ok(changed == 1)
    }

    /// Returns false when no key has that id.
    pub(crate) fn set_key_webhook_url(&self, id: &str, url: Option<&str>) -> Result<bool> {
        let c = sqlite_or!(self, pg => pg.set_key_webhook_url(id, url));
        let changed = c
            .prepare_cached("UPDATE api_keys SET webhook_url = :url WHERE id = :id")?
            .execute(named_params! {":url": url, ":id": id})?;
        Ok(changed == 1)
    }

    /// Returns false when no key has that id.
    pub(crate) fn set_key_webhook_secret(&self, id: &str, sealed: &str) -> Result<bool> {
        let c = sqlite_or!(self, pg => pg.set_key_webhook_secret(id, sealed));
        let changed = c
            .prepare_cached("UPDATE api_keys SET webhook_secret_enc = :sealed WHERE id = :id")?
            .execute(named_params! {":sealed": sealed, ":id": id})?;
        Ok(changed == 1)
    }

    pub(crate) fn touch_key(&self, id: &str, now: Timestamp) -> Result<()> {
        let c = sqlite_or!(self, pg => pg.touch_key(id, now));
        c.prepare_cached("UPDATE api_keys SET last_used_at = :now WHERE id = :id")?
            .execute(named_params! {":now": now.as_millis(), ":id": id})?;
        Ok(())
    }

    /// Deletes the key, keeping only what signing its orders' pending webhooks needs.
    /// Returns false when no key has that id.
    pub(crate) fn delete_key(&self, id: &str, now: Timestamp) -> Result<bool> {
        let c = sqlite_or!(self, pg => pg.delete_key(id, now));
        c.prepare_cached(
            "INSERT INTO retired_keys (id, user_id, environment, webhook_url, webhook_secret_enc, retired_at)
                 SELECT id, user_id, environment, webhook_url, webhook_secret_enc, :now FROM api_keys WHERE id = :id",
        )?
        .execute(named_params! {":id": id, ":now": now.as_millis()})?;
        let changed = c.prepare_cached("DELETE FROM api_keys WHERE id = :id")?.execute(named_params! {":id": id})?;
        Ok(changed == 1)
    }

    /// The webhook URL and sealed signing secret of a live or deleted key.
    pub(crate) fn signing_key(&self, id: &str) -> Result<Option<(Option<String>, String)>> {
        let c = sqlite_or!(self, pg => pg.signing_key(id));
        Ok(c.prepare_cached(
            "SELECT webhook_url, webhook_secret_enc FROM api_keys WHERE id = :id
                 UNION ALL
                 SELECT webhook_url, webhook_secret_enc FROM retired_keys WHERE id = :id
                 LIMIT 1",
        )?
        .query_row(named_params! {":id": id}, |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?)
    }
}
