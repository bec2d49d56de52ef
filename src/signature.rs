//! Webhook signatures per the Standard Webhooks specification.
//!
//! A message is signed as `v1,<base64 HMAC-SHA256>` over `"{id}.{timestamp}.{body}"` with
//! the key's secret (`whsec_` + base64 of the key bytes). [`sign`] is what coinorder
//! sends; [`verify`] is for merchants receiving our webhooks (and our own tests).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// How far a webhook's timestamp may be from the receiver's clock.
pub const TIMESTAMP_TOLERANCE_SECS: i64 = 5 * 60;

/// Why a webhook failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The secret is not `whsec_` + base64.
    #[error("the webhook secret is not whsec_ followed by base64")]
    BadSecret,
    /// A `webhook-id`, `webhook-timestamp` or `webhook-signature` header is missing.
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    /// `webhook-timestamp` is not an integer.
    #[error("webhook-timestamp is not a Unix time in seconds")]
    BadTimestamp,
    /// The timestamp is more than five minutes from now.
    #[error("webhook-timestamp is more than 5 minutes from now")]
    StaleTimestamp,
    /// No `v1` signature matched.
    #[error("no matching signature")]
    NoMatch,
}

/// Decodes a `whsec_...` secret into key bytes.
fn secret_key(secret: &str) -> Result<Vec<u8>, VerifyError> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    match BASE64.decode(encoded) {
        Ok(key) if !key.is_empty() => Ok(key),
        _ => Err(VerifyError::BadSecret),
    }
}

fn mac(key: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> Result<Vec<u8>, VerifyError> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).map_err(|_| VerifyError::BadSecret)?;
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(mac.finalize().into_bytes().to_vec())
}

/// The `webhook-signature` header value for a message: `v1,<base64>`.
pub fn sign(secret: &str, msg_id: &str, timestamp: i64, body: &[u8]) -> Result<String, VerifyError> {
    let digest = mac(&secret_key(secret)?, msg_id, timestamp, body)?;
    Ok(format!("v1,{}", BASE64.encode(digest)))
}

/// The `webhook-signature` header value signed by each of `secrets`, space-separated
/// (`v1,<a> v1,<b>`), as Standard Webhooks sends it while a secret is being rotated: a
/// receiver that knows any one of them accepts the message.
pub fn sign_with_each<S: AsRef<str>>(
    secrets: &[S],
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, VerifyError> {
    let signatures =
        secrets.iter().map(|secret| sign(secret.as_ref(), msg_id, timestamp, body)).collect::<Result<Vec<_>, _>>()?;
    Ok(signatures.join(" "))
}

/// Verifies a received webhook: the headers' id, timestamp and signature against the
/// exact body bytes, at `now` (Unix seconds).
///
/// Accepts any of several space-separated signatures (secret rotation), compares in
/// constant time after checking lengths, ignores other versions than `v1`, rejects an
/// empty `v1,` and timestamps more than five minutes from `now`.
pub fn verify(
    secret: &str,
    msg_id: Option<&str>,
    timestamp: Option<&str>,
    signatures: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), VerifyError> {
    let key = secret_key(secret)?;
    let msg_id = msg_id.ok_or(VerifyError::MissingHeader("webhook-id"))?;
    let timestamp = timestamp.ok_or(VerifyError::MissingHeader("webhook-timestamp"))?;
    let signatures = signatures.ok_or(VerifyError::MissingHeader("webhook-signature"))?;
    let timestamp: i64 = timestamp.trim().parse().map_err(|_| VerifyError::BadTimestamp)?;
    // abs_diff: a hostile timestamp such as i64::MIN must neither overflow nor wrap into range.
    if now.abs_diff(timestamp) > TIMESTAMP_TOLERANCE_SECS.unsigned_abs() {
        return Err(VerifyError::StaleTimestamp);
    }
    let expected = mac(&key, msg_id, timestamp, body)?;
    for candidate in signatures.split(' ') {
        let Some(encoded) = candidate.strip_prefix("v1,") else { continue };
        let Ok(given) = BASE64.decode(encoded) else { continue };
        if given.len() == expected.len() && bool::from(given.ct_eq(&expected)) {
            return Ok(());
        }
    }
    Err(VerifyError::NoMatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The Standard Webhooks specification's published test vector.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: i64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn check(signature: &str, now: i64) -> Result<(), VerifyError> {
        verify(SECRET, Some(MSG_ID), Some(&TIMESTAMP.to_string()), Some(signature), BODY, now)
    }

    #[test]
    fn published_test_vector_signs_and_verifies() {
        assert_eq!(sign(SECRET, MSG_ID, TIMESTAMP, BODY).as_deref(), Ok(SIGNATURE));
        assert_eq!(check(SIGNATURE, TIMESTAMP), Ok(()));
        assert_eq!(check(&format!("v1,bm9wZQ== {SIGNATURE}"), TIMESTAMP + 10), Ok(()));
    }

    #[test]
    fn bad_signatures_are_rejected() {
        assert_eq!(check("v1,", TIMESTAMP), Err(VerifyError::NoMatch));
        assert_eq!(check(&SIGNATURE[..SIGNATURE.len() - 4], TIMESTAMP), Err(VerifyError::NoMatch));
        assert_eq!(check("v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", TIMESTAMP), Err(VerifyError::NoMatch));
        assert_eq!(check(SIGNATURE, TIMESTAMP + TIMESTAMP_TOLERANCE_SECS + 1), Err(VerifyError::StaleTimestamp));
        assert_eq!(check(SIGNATURE, TIMESTAMP - TIMESTAMP_TOLERANCE_SECS - 1), Err(VerifyError::StaleTimestamp));
        let other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx";
        let wrong = verify(other, Some(MSG_ID), Some(&TIMESTAMP.to_string()), Some(SIGNATURE), BODY, TIMESTAMP);
        assert_eq!(wrong, Err(VerifyError::NoMatch));
        let tampered = verify(SECRET, Some(MSG_ID), Some(&TIMESTAMP.to_string()), Some(SIGNATURE), b"{}", TIMESTAMP);
        assert_eq!(tampered, Err(VerifyError::NoMatch));
        assert_eq!(
            verify(SECRET, None, Some("1"), Some(SIGNATURE), BODY, TIMESTAMP),
            Err(VerifyError::MissingHeader("webhook-id"))
        );
    }

    #[test]
    fn extreme_timestamps_are_stale_not_a_panic_or_a_wrap() {
        for (timestamp, now) in [(i64::MIN, TIMESTAMP), (i64::MAX, TIMESTAMP), (i64::MIN, 0), (TIMESTAMP, i64::MIN)] {
            let result = verify(SECRET, Some(MSG_ID), Some(&timestamp.to_string()), Some(SIGNATURE), BODY, now);
            assert_eq!(result, Err(VerifyError::StaleTimestamp), "timestamp {timestamp} at {now}");
        }
    }
}
