//! SQLite statements for API keys.

use std::collections::HashMap;

use const_format::concatcp;
use rusqlite::{named_params, FileControl, TransactionState};

use super::SqliteConn;
use crate::error::Result;
use crate::keys::{ApiKey, KeyStatus};
use crate::storage::rows::{self, KEY_COLUMNS, KEY_CREDENTIAL_COLUMNS};
use crate::storage::{DbResult, KeyCredential, KeyRow, SigningKey};
use crate::time::Timestamp;

/// Most credentials one reader keeps; past it the cache starts over.
const CACHED_KEYS: usize = 1_024;

/// The key credentials a pooled read connection has looked up, valid while the file's
/// data version stays what it was in the snapshots they were read in.
///
/// SQLite changes that number, for a connection, whenever any other connection (the
/// writer of this process, or another process) has committed to the file when the
/// connection starts its next read snapshot; `SQLITE_FCNTL_DATA_VERSION` reads it without
/// a statement, and it is current once the read's snapshot has started. A read admits the
/// key it finds here, runs, and then compares the number (`Service::read_as`): on a
/// change the key is looked up again in the same snapshot. So a revoked or deleted key is
/// never taken from the cache after the revocation committed. Under steady writes the
/// cache rarely holds; then a read costs the key's lookup, as without a cache.
#[derive(Default)]
pub(crate) struct KeyCache {
    data_version: u32,
    by_hash: HashMap<Vec<u8>, KeyCredential>,
}

impl std::fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyCache").field("keys", &self.by_hash.len()).finish_non_exhaustive()
    }
}

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
        // The lookup starts the read's snapshot, if nothing before it did.
        let found = self.query_opt(SQL, [key_hash], rows::key_credential)?;
        let (Some(cache), Some(version)) = (self.1, self.snapshot_data_version()?) else {
            return Ok(found);
        };
        let mut cache = cache.borrow_mut();
        if cache.data_version != version || cache.by_hash.len() >= CACHED_KEYS {
            cache.by_hash.clear();
            cache.data_version = version;
        }
        if let Some(found) = &found {
            cache.by_hash.insert(key_hash.to_vec(), found.clone());
        }
        Ok(found)
    }

    pub(crate) fn cached_key(&self, key_hash: &[u8]) -> Option<KeyCredential> {
        self.1?.borrow().by_hash.get(key_hash).cloned()
    }

    pub(crate) fn key_cache_current(&self) -> Result<bool> {
        let (Some(cache), Some(version)) = (self.1, self.snapshot_data_version()?) else {
            return Ok(false);
        };
        Ok(cache.borrow().data_version == version)
    }

    /// The file's data version as this connection's read snapshot saw it; `None` before
    /// a snapshot has started (after `BEGIN`, before the first statement), when the number
    /// may predate commits the snapshot will see.
    fn snapshot_data_version(&self) -> Result<Option<u32>> {
        if self.0.transaction_state(Some(c"main")).db()? == TransactionState::None {
            return Ok(None);
        }
        let mut version = 0;
        self.0.file_control(Some(c"main"), FileControl::DataVersion(&mut version)).db()?;
        Ok(Some(version))
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

    pub(crate) fn set_key_webhook_secret(
        &self,
        id: &str,
        sealed: &str,
        keep_previous_until: Option<i64>,
    ) -> Result<bool> {
        // The secret being replaced becomes the previous one when it is to go on signing;
        // otherwise no previous secret is left (a rotation without overlap ends any other).
        let changed = self.execute(
            "UPDATE api_keys SET
                 previous_secret_enc = CASE WHEN :until IS NULL THEN NULL ELSE webhook_secret_enc END,
                 previous_secret_until = :until,
                 webhook_secret_enc = :sealed
             WHERE id = :id",
            named_params! {":sealed": sealed, ":until": keep_previous_until, ":id": id},
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

    pub(crate) fn sealed_secrets(&self, limit: i64) -> Result<Vec<String>> {
        self.query(
            "SELECT webhook_secret_enc FROM api_keys
                 UNION ALL
                 SELECT webhook_secret_enc FROM retired_keys
                 LIMIT :limit",
            named_params! {":limit": limit},
            rows::sealed_secret,
        )
    }

    pub(crate) fn signing_key(&self, id: &str) -> Result<Option<SigningKey>> {
        self.query_opt(
            "SELECT webhook_url, webhook_secret_enc, previous_secret_enc, previous_secret_until
                 FROM api_keys WHERE id = :id
                 UNION ALL
                 SELECT webhook_url, webhook_secret_enc, NULL, NULL FROM retired_keys WHERE id = :id
                 LIMIT 1",
            named_params! {":id": id},
            rows::signing_key,
        )
    }
}
