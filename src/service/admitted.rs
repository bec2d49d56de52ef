//! Creates that authenticate without a read snapshot of their own.
//!
//! `POST /v1/orders` authenticated its key in a read snapshot and then wrote the order in
//! a transaction of its own: on SQLite that snapshot is locks, and after every commit a
//! remap of the file and a fresh page cache, about a fifth of a create's time. Instead a
//! key admitted once is remembered here by its hash, and a create presenting it again is
//! admitted from memory (active, this environment, within its rate, as always) and
//! confirmed inside its own write transaction: if the stored key is no longer exactly the
//! one remembered (deactivated, deleted, moved), nothing is written, the key is forgotten,
//! and the request is authenticated afresh, with the error a fresh lookup gives.

use std::collections::HashMap;
use std::sync::Mutex;

use super::Service;
use crate::error::{Error, ErrorKind, Result};
use crate::keys::KeyStatus;
use crate::orders::{CreateOrder, CreatedOrder};
use crate::storage::KeyCredential;

/// Most keys remembered; past it the memory starts over.
const MAX_ADMITTED: usize = 1_024;

/// Keys admitted before, by hash.
#[derive(Default)]
pub(crate) struct AdmittedKeys {
    by_hash: Mutex<HashMap<[u8; 32], KeyCredential>>,
}

impl std::fmt::Debug for AdmittedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.by_hash.lock().map(|keys| keys.len()).unwrap_or(0);
        f.debug_struct("AdmittedKeys").field("keys", &count).finish_non_exhaustive()
    }
}

impl AdmittedKeys {
    fn get(&self, hash: &[u8; 32]) -> Option<KeyCredential> {
        self.by_hash.lock().unwrap_or_else(|p| p.into_inner()).get(hash).cloned()
    }

    fn remember(&self, hash: [u8; 32], key: KeyCredential) {
        let mut keys = self.by_hash.lock().unwrap_or_else(|p| p.into_inner());
        if keys.len() >= MAX_ADMITTED {
            keys.clear();
        }
        keys.insert(hash, key);
    }

    fn forget(&self, hash: &[u8; 32]) {
        self.by_hash.lock().unwrap_or_else(|p| p.into_inner()).remove(hash);
    }
}

impl Service {
    /// Authenticates `api_key` (as [`Service::authenticate_client`]) and creates the order
    /// `parse` reads from the request body (as [`Service::create_order`]): the way the
    /// wire layer answers `POST /v1/orders`, with the key confirmed inside the create's
    /// write transaction rather than looked up in a snapshot of its own once it is known.
    pub(crate) fn create_as(
        &self,
        client: Option<std::net::IpAddr>,
        api_key: Option<&str>,
        parse: impl Fn() -> Result<CreateOrder>,
    ) -> Result<CreatedOrder> {
        let now = self.now();
        let hash = self.presented_key_hash(api_key).ok();
        let known = hash.as_ref().and_then(|hash| Some((hash, self.admitted_keys.get(hash)?)));
        if let (Some((hash, known)), true) = (known, self.failed_auths_allow(client, now).is_ok()) {
            let merchant = self.admit_key(Some(known.clone()), hash, now)?;
            let request = parse()?;
            match self.create_order_confirming(&merchant, &request, Some(&known)) {
                Ok(None) => self.admitted_keys.forget(hash),
                created => {
                    self.note_key_used(&merchant.key_id, now)?;
                    return created?.ok_or_else(|| Error::new(ErrorKind::Unauthorized));
                }
            }
        }
        let merchant = self.authenticate_client(client, api_key)?;
        if let Some(hash) = hash {
            let admitted = KeyCredential {
                id: merchant.key_id.clone(),
                user_id: merchant.user_id,
                environment: merchant.environment,
                status: KeyStatus::Active,
                key_hash: hash.to_vec(),
            };
            self.admitted_keys.remember(hash, admitted);
        }
        self.create_order(&merchant, &parse()?)
    }
}
