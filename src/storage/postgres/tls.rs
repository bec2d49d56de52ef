//! TLS to PostgreSQL, reading `sslmode` and `sslrootcert` as libpq does, except where
//! libpq would check less than this library always has, so a URL written for `psql` or
//! a managed database's guide works, and none connects with less checking than before.
//!
//! tokio-postgres itself knows only `disable`, `prefer` and `require`, and verifies
//! nothing: verification is the connector's. This module reads both parameters out of
//! the URL, hands tokio-postgres the mode it knows, and builds the rustls configuration
//! that checks what the URL asks:
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | - |
//! | `allow`, `prefer` (the default) | when the server offers it | not checked; with a root file, its chain |
//! | `require` | always | with a root file, its chain; else chain and host name against the public roots |
//! | `verify-ca` | always | its chain, against the root file (required) |
//! | `verify-full` | always | chain and host name, against the root file or the public roots |
//!
//! `sslrootcert` is a PEM file of CA certificates, or `system` for the public roots
//! bundled with the library (webpki-roots). `prefer` checks nothing without a file,
//! as libpq: an attacker who can tamper with the connection can make it plain anyway.
//! `require` without a file checks as `verify-full` against the public roots (libpq
//! checks nothing there; this library always checked, and a URL that asked for TLS
//! keeps it). The public roots vouch for any domain's certificate, so they serve only
//! with the host name checked: `verify-ca` needs a file, and `sslrootcert=system` means
//! `verify-full` (as libpq 16 has it) and refuses a weaker `sslmode`.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{Error, ErrorKind, Result};

/// What the URL's `sslmode` asks of the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Encrypt, check nothing (`prefer` without a root file).
    Nothing,
    /// The chain must lead to a trusted root; any host name.
    Chain,
    /// The chain, and the certificate must name the host connected to.
    ChainAndHost,
}

/// A PostgreSQL URL made ready to connect: the URL as tokio-postgres reads it, and the
/// TLS configuration its `sslmode` and `sslrootcert` call for.
pub(super) struct TlsTarget {
    /// The URL without `sslrootcert`, its `sslmode` one tokio-postgres knows.
    pub(super) url: String,
    /// The rustls client configuration for the connector.
    pub(super) config: ClientConfig,
}

/// Reads `sslmode` and `sslrootcert` out of `url` (see the module for what each means).
pub(super) fn tls_target(url: &str) -> Result<TlsTarget> {
    let (base, query) = split_query(url);
    let mut kept: Vec<&str> = Vec::new();
    let mut mode: Option<String> = None;
    let mut root_file: Option<String> = None;
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match decoded(name)?.as_str() {
            "sslmode" => mode = Some(decoded(value)?),
            "sslrootcert" => root_file = Some(decoded(value)?),
            // Every other parameter goes to tokio-postgres exactly as written.
            _ => kept.push(pair),
        }
    }
    let system_roots = root_file.as_deref() == Some("system");
    let file = root_file.as_deref().filter(|_| !system_roots);
    let mode = match (mode.as_deref(), system_roots) {
        (None, true) => "verify-full",
        (None, false) => "prefer",
        (Some(mode), _) => mode,
    };
    // The mode tokio-postgres is told: whether TLS is tried, and whether it must be had.
    let (wire_mode, check) = match mode {
        "disable" => ("sslmode=disable", Check::Nothing),
        // libpq's `allow` tries without TLS first; tokio-postgres cannot, so it prefers.
        "allow" | "prefer" => ("sslmode=prefer", if file.is_some() { Check::Chain } else { Check::Nothing }),
        "require" => ("sslmode=require", if file.is_some() { Check::Chain } else { Check::ChainAndHost }),
        "verify-ca" => ("sslmode=require", Check::Chain),
        "verify-full" => ("sslmode=require", Check::ChainAndHost),
        other => {
            return Err(config_error(format!(
                "sslmode: must be disable, allow, prefer, require, verify-ca or verify-full, not {other:?}"
            )))
        }
    };
    if system_roots && check != Check::ChainAndHost {
        return Err(config_error(format!(
            "sslrootcert=system: the public roots vouch for any domain's certificate, so they need \
             sslmode=verify-full (or no sslmode), not {mode}"
        )));
    }
    if check == Check::Chain && file.is_none() {
        return Err(config_error(
            "sslmode=verify-ca: needs sslrootcert, the PEM file of the CA to trust (with the public roots, \
             use verify-full)"
                .to_string(),
        ));
    }
    kept.push(wire_mode);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| config_error(format!("TLS setup for PostgreSQL: {e}")))?;
    // A root file named is read even where nothing is checked (`disable`), so a wrong path
    // is found when the service opens, not when the URL's mode is changed.
    let named_roots = file.map(|file| trusted_roots(Some(file))).transpose()?;
    let roots = || match named_roots.clone() {
        Some(roots) => Ok(roots),
        None => trusted_roots(None),
    };
    let config = match check {
        Check::ChainAndHost => builder.with_root_certificates(roots()?).with_no_client_auth(),
        Check::Nothing | Check::Chain => {
            let chain = match check {
                Check::Chain => Some(
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots()?), provider.clone())
                        .build()
                        .map_err(|e| config_error(format!("TLS setup for PostgreSQL: {e}")))?,
                ),
                _ => None,
            };
            let check = LooserCheck { provider, chain };
            builder.dangerous().with_custom_certificate_verifier(Arc::new(check)).with_no_client_auth()
        }
    };
    Ok(TlsTarget { url: format!("{base}?{}", kept.join("&")), config })
}

/// `url` split where its query begins: at the first `?` after the user info, as
/// tokio-postgres reads it (a `?` in a password written raw is the password's).
fn split_query(url: &str) -> (&str, &str) {
    let authority_from = url.find("://").map_or(0, |at| at + 3);
    let host_from = url[authority_from..].find('@').map_or(authority_from, |at| authority_from + at + 1);
    match url[host_from..].find('?') {
        Some(at) => (&url[..host_from + at], &url[host_from + at + 1..]),
        None => (url, ""),
    }
}

/// A URL component with its `%XX` escapes decoded (no `+` for space: libpq has none).
fn decoded(text: &str) -> Result<String> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|text| text.into_owned())
        .map_err(|_| config_error("not a PostgreSQL URL: a parameter is not UTF-8 once decoded".to_string()))
}

/// The roots certificates are checked against: the PEM file `sslrootcert` names, or the
/// public roots for none or `system`.
fn trusted_roots(root_file: Option<&str>) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match root_file {
        None | Some("system") => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) => {
            let unreadable = |reason: String| config_error(format!("sslrootcert {path}: {reason}"));
            let certificates = CertificateDer::pem_file_iter(path)
                .map_err(|e| unreadable(e.to_string()))?
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| unreadable(e.to_string()))?;
            if certificates.is_empty() {
                return Err(unreadable("holds no PEM certificate".to_string()));
            }
            for certificate in certificates {
                roots.add(certificate).map_err(|e| unreadable(format!("not a usable CA certificate: {e}")))?;
            }
        }
    }
    Ok(roots)
}

fn config_error(message: String) -> Error {
    Error::new(ErrorKind::Config(message))
}

/// The certificate check of `prefer` without a root file and of `verify-ca`, which
/// rustls's own verifier does not offer: the handshake's signatures are checked either
/// way, so the server must hold the key of the certificate it shows.
#[derive(Debug)]
struct LooserCheck {
    /// What signatures are checked with.
    provider: Arc<CryptoProvider>,
    /// `None`: any certificate, as libpq takes it for `prefer` without a root file (the
    /// connection is encrypted against a passive listener, not against a man in the
    /// middle, who could as well refuse TLS, which `prefer` then does without).
    /// `Some`: `verify-ca`, the full check except that the certificate need not name
    /// the host.
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for LooserCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(full) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        // The name is checked last, after the chain: failing only there means the chain
        // is good.
        match full.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            outcome => outcome,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_read_out_and_the_rest_is_kept_as_written() {
        let url_of = |url: &str| tls_target(url).map(|target| target.url).unwrap_or_else(|e| e.to_string());
        assert_eq!(
            url_of("postgres://u:p%40ss@db.example:5432/shop?application_name=a%20b&sslmode=verify-full"),
            "postgres://u:p%40ss@db.example:5432/shop?application_name=a%20b&sslmode=require"
        );
        assert_eq!(url_of("postgres://db/shop"), "postgres://db/shop?sslmode=prefer");
        assert_eq!(url_of("postgres://db/shop?sslmode=disable"), "postgres://db/shop?sslmode=disable");
        assert_eq!(url_of("postgres://db/shop?sslmode=allow"), "postgres://db/shop?sslmode=prefer");
        assert_eq!(url_of("postgres://db/shop?&&sslmode=require&"), "postgres://db/shop?sslmode=require");
        // A `?` written raw in a password belongs to the password, as tokio-postgres reads it.
        assert_eq!(
            url_of("postgres://app:pa?ss@db.example.com/shop?sslmode=require"),
            "postgres://app:pa?ss@db.example.com/shop?sslmode=require"
        );
        assert_eq!(
            url_of("postgres://app:pa?ss@db.example.com/shop"),
            "postgres://app:pa?ss@db.example.com/shop?sslmode=prefer"
        );
        // The public roots alone mean the host name is checked.
        assert_eq!(url_of("postgres://db/shop?sslrootcert=system"), "postgres://db/shop?sslmode=require");
        assert_eq!(
            url_of("postgres://db/shop?sslrootcert=system&sslmode=verify-full"),
            "postgres://db/shop?sslmode=require"
        );
    }

    #[test]
    fn the_public_roots_are_never_trusted_without_the_host_name() {
        let message = |url: &str| tls_target(url).err().map(|e| e.to_string()).unwrap_or_default();
        for weak in ["verify-ca", "prefer", "allow", "disable"] {
            let refused = message(&format!("postgres://db/shop?sslrootcert=system&sslmode={weak}"));
            assert!(refused.contains(&format!("need sslmode=verify-full (or no sslmode), not {weak}")), "{refused}");
        }
        let refused = message("postgres://db/shop?sslmode=verify-ca");
        assert!(refused.contains("sslmode=verify-ca: needs sslrootcert"), "{refused}");
        // `require` with the public roots checks the host name too, so it stands.
        let target = tls_target("postgres://db/shop?sslrootcert=system&sslmode=require").map(|t| t.url);
        assert_eq!(target.ok().as_deref(), Some("postgres://db/shop?sslmode=require"));
    }

    #[test]
    fn a_mode_libpq_does_not_know_or_an_unreadable_root_file_is_a_clear_error() {
        let wrong = tls_target("postgres://db/shop?sslmode=verify").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            wrong.contains("sslmode: must be disable, allow, prefer, require, verify-ca or verify-full"),
            "{wrong}"
        );
        let missing = tls_target("postgres://db/shop?sslmode=verify-full&sslrootcert=/no/such/ca.pem")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(missing.contains("sslrootcert /no/such/ca.pem: "), "{missing}");
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").expect("write");
        let url = format!("postgres://db/shop?sslrootcert={}", empty.display());
        let message = tls_target(&url).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("holds no PEM certificate"), "{message}");
    }
}
