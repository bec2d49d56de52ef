//! Secrets: a redacting string type, and encryption at rest for webhook signing secrets.
//!
//! API keys are stored only as SHA-256 hashes (see `keys`). Webhook signing secrets must
//! be recoverable to sign messages, so they are sealed with ChaCha20-Poly1305 under a
//! 32-byte key kept in a separate file (by default `<database>.key`, mode 0600): a copy
//! of the database alone reveals no secret.

use std::fmt;
use std::fs;
use std::io::Write;
use std::path::Path;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};

use crate::error::{Error, ErrorKind, Result};

/// `url` as it may be shown in a log or a message: a password in it becomes `***`, and so
/// does each query value (a webhook URL's `?token=` is as secret as a password). A URL
/// that does not parse is not shown at all.
pub fn redact_url(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return "(unparsable URL)".to_string();
    };
    if parsed.password().is_some() {
        // Fails only for URLs that cannot have a password, which this one had.
        let _ = parsed.set_password(Some("***"));
    }
    if parsed.query().is_some() {
        let names: Vec<String> = parsed.query_pairs().map(|(name, _)| name.into_owned()).collect();
        let mut query = parsed.query_pairs_mut();
        query.clear();
        for name in &names {
            query.append_pair(name, "***");
        }
    }
    parsed.to_string()
}

/// An optional URL as `Debug` output may show it, through [`redact_url`]: for the `Debug`
/// of the types that hold a webhook URL.
pub(crate) struct ShownUrl<'a>(pub &'a Option<String>);

impl fmt::Debug for ShownUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0.as_deref().map(redact_url), f)
    }
}

/// A secret string whose `Debug` and `Display` never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    /// Wraps a secret value.
    pub fn new(value: String) -> Self {
        SecretString(value)
    }

    /// The secret itself; call only where it must leave the library (shown once to the
    /// merchant, or used to sign).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretString([redacted])")
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Seals and opens secrets stored in the database.
pub(crate) struct SecretBox {
    cipher: ChaCha20Poly1305,
}

impl fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretBox([redacted])")
    }
}

/// Writes `bytes` to a new file at `path`, readable and writable by its owner only, and
/// syncs it.
fn write_new_owner_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes).and_then(|()| file.sync_all())
}

/// Prefix of sealed values, so the format can change without guessing.
const SEALED_PREFIX: &str = "v1:";

impl SecretBox {
    /// Loads the key file at `path`, creating it (0600) when it does not exist yet.
    ///
    /// The key is written whole to a temporary file beside it, then put in place only if
    /// no file is there yet: a full disk or a crash leaves no key file, never an empty or
    /// partial one that every later open would refuse, and of two processes creating it
    /// at once the first one's key is the one both use.
    pub(crate) fn open_or_create(path: &Path) -> Result<Self> {
        let fail = |what: &str, e: std::io::Error| {
            Error::new(ErrorKind::SecretStore(format!("{what} {}: {e}", path.display())))
        };
        if !path.exists() {
            let key = ChaCha20Poly1305::generate_key(&mut OsRng);
            let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
            let temporary = path.with_file_name(format!(".{name}.{}.tmp", crate::keys::random_id(12)));
            let encoded = BASE64.encode(key);
            let written = write_new_owner_only(&temporary, encoded.as_bytes());
            // A hard link puts the whole file in place only if none is there: of two
            // processes creating it at once, the first one's key is the one both use.
            let placed = written.and_then(|()| match fs::hard_link(&temporary, path) {
                Ok(()) => Ok(()),
                // Another process's key is there: use theirs.
                Err(_) if path.exists() => Ok(()),
                // A file system without hard links: written in place, made only if absent
                // (there a crash mid-write can leave it short, as the message below says).
                Err(_) => match write_new_owner_only(path, encoded.as_bytes()) {
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                    other => other,
                },
            });
            let _ = fs::remove_file(&temporary);
            placed.map_err(|e| fail("cannot write key file", e))?;
            // The new name itself must survive a power cut, as the database relies on it.
            #[cfg(unix)]
            if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                let _ = fs::File::open(dir).and_then(|dir| dir.sync_all());
            }
        }
        // A concurrent creator may not have written the key yet; retry briefly.
        let mut attempts = 0;
        loop {
            let text = fs::read_to_string(path).map_err(|e| fail("cannot read key file", e))?;
            match BASE64.decode(text.trim()) {
                Ok(bytes) if bytes.len() == 32 => {
                    let key = Key::from_slice(&bytes);
                    return Ok(SecretBox { cipher: ChaCha20Poly1305::new(key) });
                }
                _ if attempts < 50 && text.trim().is_empty() => {
                    attempts += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                // An empty file is what a creation in place that did not finish left: an
                // older version's, or one on a file system without hard links.
                _ if text.trim().is_empty() => {
                    return Err(Error::new(ErrorKind::SecretStore(format!(
                        "key file {} is empty, left by a creation that did not finish (a full disk, a crash): \
                         if the database holds no webhook secrets yet, delete the file and a new one is made; \
                         else restore the key file backed up with the database",
                        path.display()
                    ))))
                }
                _ => {
                    return Err(Error::new(ErrorKind::SecretStore(format!(
                        "key file {} does not hold a base64 32-byte key",
                        path.display()
                    ))))
                }
            }
        }
    }

    /// Encrypts `plain` for storage.
    pub(crate) fn seal(&self, plain: &SecretString) -> Result<String> {
        let nonce = ChaCha20Poly1305::generate_nonce(&mut OsRng);
        let sealed = self
            .cipher
            .encrypt(&nonce, plain.expose().as_bytes())
            .map_err(|_| Error::new(ErrorKind::SecretStore("encryption failed".into())))?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        Ok(format!("{SEALED_PREFIX}{}", BASE64.encode(bytes)))
    }

    /// Decrypts a value written by [`SecretBox::seal`].
    pub(crate) fn open(&self, sealed: &str) -> Result<SecretString> {
        let bad =
            || Error::new(ErrorKind::SecretStore("a stored secret cannot be decrypted with this key file".into()));
        let encoded = sealed.strip_prefix(SEALED_PREFIX).ok_or_else(bad)?;
        let bytes = BASE64.decode(encoded).map_err(|_| bad())?;
        if bytes.len() < 12 {
            return Err(bad());
        }
        let (nonce, ciphertext) = bytes.split_at(12);
        let plain = self.cipher.decrypt(Nonce::from_slice(nonce), ciphertext).map_err(|_| bad())?;
        String::from_utf8(plain).map(SecretString).map_err(|_| bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_hides_the_password_and_query_values_only() {
        assert_eq!(
            redact_url("http://shop:s3cretPW@127.0.0.1:9/hook?token=qTok123&v=2"),
            "http://shop:***@127.0.0.1:9/hook?token=***&v=***"
        );
        assert_eq!(redact_url("https://example.com/hooks/coinorder"), "https://example.com/hooks/coinorder");
        assert_eq!(redact_url("smtp://mailer@mail.example.com:587"), "smtp://mailer@mail.example.com:587");
        assert_eq!(redact_url("not a url s3cretPW"), "(unparsable URL)");
    }

    #[test]
    fn seal_round_trips_and_hides_the_value() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::SecretStore(e.to_string())))?;
        let path = dir.path().join("db.key");
        let secret_box = SecretBox::open_or_create(&path)?;
        let secret = SecretString::new("whsec_abc".into());
        let sealed = secret_box.seal(&secret)?;
        assert!(!sealed.contains("whsec_abc"));
        let reopened = SecretBox::open_or_create(&path)?;
        assert_eq!(reopened.open(&sealed)?, secret);
        assert!(!format!("{secret:?}").contains("abc"));
        Ok(())
    }

    #[test]
    fn a_key_file_is_made_whole_and_owner_only_and_an_empty_one_says_what_to_do() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::SecretStore(e.to_string())))?;
        let path = dir.path().join("db.key");
        SecretBox::open_or_create(&path)?;
        let names: Vec<String> = fs::read_dir(dir.path())
            .map_err(|e| Error::new(ErrorKind::SecretStore(e.to_string())))?
            .filter_map(|entry| entry.ok().map(|entry| entry.file_name().to_string_lossy().into_owned()))
            .collect();
        assert_eq!(names, ["db.key"], "no temporary file is left beside it");
        let text = fs::read_to_string(&path).map_err(|e| Error::new(ErrorKind::SecretStore(e.to_string())))?;
        assert_eq!(BASE64.decode(text.trim()).map(|key| key.len()).ok(), Some(32));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).map_err(|e| Error::new(ErrorKind::SecretStore(e.to_string())))?;
            assert_eq!(mode.permissions().mode() & 0o777, 0o600);
        }
        // What an older version's creation cut short by a full disk left.
        let empty = dir.path().join("empty.key");
        fs::write(&empty, "").map_err(|e| Error::new(ErrorKind::SecretStore(e.to_string())))?;
        let refused = SecretBox::open_or_create(&empty).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(refused.contains("is empty") && refused.contains("delete the file"), "{refused}");
        Ok(())
    }
}
