//! API keys (spec §2.6, §5; DESIGN §3): generation, hashing and the key types.
//!
//! A key is `test_` (sandbox) or `prod_` (live) followed by 40 random base62 characters
//! from the OS RNG. Only its SHA-256 hash is stored; the plain key is returned once, at
//! creation. Lookups go by hash and the final comparison is constant-time.

use std::fmt;

use rand::distr::{Alphanumeric, SampleString};
use rand::rngs::OsRng;
use rand::TryRngCore;
use serde::Serialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::environment::Environment;
pub use crate::secrets::SecretString;
use crate::secrets::ShownUrl;
use crate::time::Timestamp;

/// Random characters after the environment prefix.
const KEY_RANDOM_LEN: usize = 40;

/// Whether a key may be used (spec §3: Active and Inactive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyStatus {
    /// Requests with the key are accepted.
    Active,
    /// Every request with the key is rejected with `AUTHENTICATION_FAILED`; the key is kept.
    Inactive,
}

impl KeyStatus {
    /// `active` or `inactive`, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyStatus::Active => "active",
            KeyStatus::Inactive => "inactive",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "active" => Some(KeyStatus::Active),
            "inactive" => Some(KeyStatus::Inactive),
            _ => None,
        }
    }
}

/// An API key as listed: everything but the key itself and its signing secret.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct ApiKey {
    /// Stable identifier used to manage the key (`key_` + 16 base62 characters).
    pub id: String,
    /// The host application's merchant account id.
    pub user_id: i64,
    /// The environment the key works in.
    #[serde(serialize_with = "serialize_environment")]
    pub environment: Environment,
    /// Active or inactive.
    pub status: KeyStatus,
    /// Where events of this key's orders go when an order names no `webhook_url`.
    pub webhook_url: Option<String>,
    /// The prefix and last four characters, so a person can tell keys apart.
    pub key_hint: String,
    /// When the key was created.
    #[serde(rename = "created_at")]
    pub created_at_ms: Timestamp,
    /// When the key last authenticated a request (updated at most once a minute).
    #[serde(rename = "last_used_at")]
    pub last_used_at_ms: Option<Timestamp>,
    /// The merchant's name as the payment page shows it above the order's title; `None`
    /// shows none.
    pub display_name: Option<String>,
}

impl fmt::Debug for ApiKey {
    // The webhook URL may carry credentials (`https://user:pass@…`, `?token=…`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("id", &self.id)
            .field("user_id", &self.user_id)
            .field("environment", &self.environment)
            .field("status", &self.status)
            .field("webhook_url", &ShownUrl(&self.webhook_url))
            .field("key_hint", &self.key_hint)
            .field("created_at_ms", &self.created_at_ms)
            .field("last_used_at_ms", &self.last_used_at_ms)
            .field("display_name", &self.display_name)
            .finish()
    }
}

fn serialize_environment<S: serde::Serializer>(env: &Environment, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(env.as_str())
}

/// Most characters in a key's display name.
pub const DISPLAY_NAME_MAX_CHARS: usize = 80;

/// What to create a key with.
#[derive(Clone, PartialEq, Eq)]
pub struct NewApiKey {
    /// The host application's merchant account id the key acts for.
    pub user_id: i64,
    /// Sandbox or live, fixed for the key's life.
    pub environment: Environment,
    /// Optional default webhook URL for the key's orders.
    pub webhook_url: Option<String>,
}

impl fmt::Debug for NewApiKey {
    // As [`ApiKey`]'s: never the webhook URL's credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewApiKey")
            .field("user_id", &self.user_id)
            .field("environment", &self.environment)
            .field("webhook_url", &ShownUrl(&self.webhook_url))
            .finish()
    }
}

/// A freshly created key: the only time the plain key is available.
#[derive(Debug, Clone)]
pub struct CreatedApiKey {
    /// The stored key record.
    pub key: ApiKey,
    /// The key to send in `x-api-key`; shown once, never stored.
    pub plain_key: SecretString,
    /// The `whsec_` secret webhooks of this key are signed with.
    pub webhook_secret: SecretString,
}

/// The authenticated caller of an API request.
///
/// An identity, not a capability the service checks again: the typed calls trust it as
/// the host hands it over (a host with its own sign-in may build one). So
/// [`Service::authenticate`](crate::Service::authenticate) belongs to each request, as
/// [`Service::handle`](crate::Service::handle) does it: a `Merchant` kept past its request
/// still acts after its key is deactivated or deleted.
///
/// A host that builds one must give it the id of a key it made with
/// [`Service::create_key`](crate::Service::create_key) for that merchant (deleted
/// later or not): the order's webhooks are signed with that key's secret and sent to its
/// URL when the order has none, so an order made under an id that never was a key's has
/// its events kept undelivered (`no_target`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merchant {
    /// The key that authenticated the request (an id from [`crate::ApiKey::id`]).
    pub key_id: String,
    /// The merchant account the key belongs to.
    pub user_id: i64,
    /// The environment of the key (always the service's own).
    pub environment: Environment,
}

/// A key's new webhook signing secret, from
/// [`Service::rotate_key_webhook_secret_keeping_old`](crate::Service::rotate_key_webhook_secret_keeping_old).
#[derive(Debug, Clone)]
pub struct RotatedSecret {
    /// The new secret (`whsec_…`), shown this once.
    pub secret: SecretString,
    /// Until when the replaced secret signs too; `None` when it stopped at once.
    pub old_secret_signs_until: Option<crate::Timestamp>,
}

/// The longest a replaced webhook secret may go on signing beside its successor
/// ([`Service::rotate_key_webhook_secret_keeping_old`](crate::Service::rotate_key_webhook_secret_keeping_old)):
/// 30 days, time enough for any receiver's deployment, short enough that a secret
/// thought retired does not sign for long.
pub const MAX_SECRET_OVERLAP: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// What a merchant account id (`user_id`) must be, for every surface's refusal: the
/// host's own account ids, never negative (they must fit a signed 64-bit column).
pub const USER_ID_RULE: &str = "an integer from 0 to 9223372036854775807";

/// The refusal of a `user_id` outside [`USER_ID_RULE`], or of none at all.
pub fn user_id_refused(missing: bool) -> crate::Error {
    let rule = if missing { format!("required; {USER_ID_RULE}") } else { format!("must be {USER_ID_RULE}") };
    crate::Error::invalid("user_id", rule)
}

/// `len` random base62 characters from the operating system's RNG: for secrets (API keys).
/// Each character is its own `getrandom` call, which is fine for something made rarely.
pub(crate) fn random_base62(len: usize) -> String {
    Alphanumeric.sample_string(&mut OsRng.unwrap_err(), len)
}

/// `len` random base62 characters for ids that must be unguessable but are made on every
/// request (event, e-mail and default merchant-order ids, lease tokens): from the
/// thread's CSPRNG (ChaCha, seeded from the OS in this process: [`crate::random`]), with
/// no system call per character. Profiling `serve` under POSTs found the OS-RNG
/// version's `getrandom` calls at about 5 % of the CPU.
pub(crate) fn random_id(len: usize) -> String {
    crate::random::with_generator(|generator| Alphanumeric.sample_string(generator, len))
}

/// A new plain API key for `environment`.
pub(crate) fn generate_key(environment: Environment) -> SecretString {
    SecretString::new(format!("{}{}", environment.key_prefix(), random_base62(KEY_RANDOM_LEN)))
}

/// A new webhook signing secret: `whsec_` + base64 of 32 random bytes.
pub(crate) fn generate_webhook_secret() -> SecretString {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    rand::RngCore::fill_bytes(&mut OsRng.unwrap_err(), &mut bytes);
    SecretString::new(format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(bytes)))
}

/// A new key id.
pub(crate) fn generate_key_id() -> String {
    format!("key_{}", random_base62(16))
}

/// The stored form of a key.
pub(crate) fn hash_key(plain: &str) -> [u8; 32] {
    Sha256::digest(plain.as_bytes()).into()
}

/// `test_ab…wxyz`-style hint showing the prefix and the last four characters.
pub(crate) fn key_hint(plain: &str) -> String {
    let tail: String = plain.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
    let prefix = plain.get(..5).unwrap_or("");
    format!("{prefix}…{tail}")
}

/// The environment a well-formed key belongs to, or `None` for a malformed key.
pub(crate) fn key_environment(plain: &str) -> Option<Environment> {
    let env = [Environment::Sandbox, Environment::Live].into_iter().find(|env| plain.starts_with(env.key_prefix()))?;
    let rest = &plain[env.key_prefix().len()..];
    (rest.len() == KEY_RANDOM_LEN && rest.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(env)
}

/// `text` with every well-formed key in it shown as its [`key_hint`]: for a log line
/// holding what a client sent, such as a path with the key pasted into it. Only the
/// built-in server logs such lines, and a "key not found" message names the id so.
pub(crate) fn hide_keys_in(text: &str) -> std::borrow::Cow<'_, str> {
    let prefixes = [Environment::Sandbox.key_prefix(), Environment::Live.key_prefix()];
    if !prefixes.iter().any(|prefix| text.contains(prefix)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let key_len = prefixes[0].len() + KEY_RANDOM_LEN;
    let mut shown = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = prefixes.iter().filter_map(|prefix| rest.find(prefix)).min() {
        match rest.get(at..at + key_len).filter(|candidate| key_environment(candidate).is_some()) {
            Some(key) => {
                shown.push_str(&rest[..at]);
                shown.push_str(&key_hint(key));
                rest = &rest[at + key_len..];
            }
            None => {
                shown.push_str(&rest[..at + 1]);
                rest = &rest[at + 1..];
            }
        }
    }
    shown.push_str(rest);
    std::borrow::Cow::Owned(shown)
}

/// The refusal of a key id that names no key. A plain key passed where its id belongs
/// (an easy slip: both are strings) is shown only as its [`key_hint`], so the secret
/// never reaches an error message or the log it lands in.
pub(crate) fn key_not_found(id: &str) -> crate::Error {
    // Whatever is around it (a space or quote pasted along, `Bearer `), a key inside is
    // shown as its hint; text that begins as a key and is none (cut short) as its hint
    // too, as part of a secret is still secret.
    let trimmed = id.trim_matches(|c: char| c.is_whitespace() || c == '"' || c == '\'');
    let shown = match starts_as_plain_key(trimmed) {
        true => key_hint(trimmed),
        false => hide_keys_in(id).into_owned(),
    };
    crate::Error::new(crate::ErrorKind::KeyNotFound(shown))
}

/// True when `text` begins as a plain key does (`test_` or `prod_`), well-formed or not.
fn starts_as_plain_key(text: &str) -> bool {
    [Environment::Sandbox, Environment::Live].iter().any(|env| text.starts_with(env.key_prefix()))
}

/// What a "key not found" message adds when the id given held a plain key (shown as its
/// hint, `test_…wxyz`).
pub(crate) fn plain_key_note(shown_id: &str) -> &'static str {
    let hinted = [Environment::Sandbox, Environment::Live]
        .iter()
        .any(|env| shown_id.contains(&format!("{}…", env.key_prefix())));
    match hinted {
        true => " (that is a plain key: pass the key's id, `key_…`, as `keys list` shows it)",
        false => "",
    }
}

/// Constant-time equality of two key hashes.
pub(crate) fn hashes_match(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_in_a_text_show_as_their_hints() {
        let key = format!("test_{}", "a".repeat(39) + "Z");
        let live = format!("prod_{}", "b".repeat(36) + "WXYZ");
        assert_eq!(hide_keys_in(&format!("/v1/orders/{key}")), "/v1/orders/test_…aaaZ");
        assert_eq!(hide_keys_in(&format!("/{key}/x/{live}")), "/test_…aaaZ/x/prod_…WXYZ");
        // Not keys: a prefix without 40 characters after it, and text without a prefix.
        assert_eq!(hide_keys_in("/v1/orders/test_short"), "/v1/orders/test_short");
        assert!(matches!(hide_keys_in("/v1/orders"), std::borrow::Cow::Borrowed("/v1/orders")));
    }

    #[test]
    fn keys_have_the_environment_prefix_and_40_base62() {
        let key = generate_key(Environment::Sandbox);
        assert!(key.expose().starts_with("test_"));
        assert_eq!(key.expose().len(), 45);
        assert_eq!(key_environment(key.expose()), Some(Environment::Sandbox));
        let live = generate_key(Environment::Live);
        assert_eq!(key_environment(live.expose()), Some(Environment::Live));
        assert_eq!(key_environment("test_short"), None);
        assert_eq!(key_environment(&format!("test_{}", "!".repeat(40))), None);
        assert_ne!(generate_key(Environment::Live), live);
    }

    #[test]
    fn secrets_are_whsec_base64_of_32_bytes() {
        use base64::Engine;
        let secret = generate_webhook_secret();
        let encoded = secret.expose().strip_prefix("whsec_").unwrap_or("");
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap_or_default();
        assert_eq!(decoded.len(), 32);
        assert!(decoded.iter().any(|b| *b != 0));
    }
}
