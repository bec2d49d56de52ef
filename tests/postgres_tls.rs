//! TLS to PostgreSQL with libpq's meanings of `sslmode` and `sslrootcert` (DESIGN §11),
//! against a server that offers TLS with a certificate for `localhost` from a private CA,
//! as `scripts/postgres` starts it (and as Debian's own server offers TLS out of the box,
//! with a self-signed certificate).
//!
//! They need that server: `scripts/test-postgres` runs them with `COINORDER_TEST_POSTGRES`
//! and `COINORDER_TEST_POSTGRES_CA` set (they are `#[ignore]`d in a plain `cargo test`).

use std::path::PathBuf;

use coinorder::{Config, Environment, Service};

fn server_url() -> String {
    std::env::var("COINORDER_TEST_POSTGRES").expect("COINORDER_TEST_POSTGRES: run through scripts/test-postgres")
}

fn test_ca() -> String {
    std::env::var("COINORDER_TEST_POSTGRES_CA").expect("COINORDER_TEST_POSTGRES_CA: run through scripts/test-postgres")
}

/// The test server's port.
fn port() -> String {
    let server = server_url();
    let after_host = server.rsplit_once(':').map(|(_, rest)| rest.to_string()).expect("a port in the URL");
    after_host.split('/').next().unwrap_or_default().to_string()
}

/// A database of its own for this test process, made once.
fn database() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        let name = format!("tls_{}", std::process::id());
        let mut client = postgres::Client::connect(&server_url(), postgres::NoTls).expect("connect to the test server");
        client.batch_execute(&format!("CREATE DATABASE {name}")).expect("create database");
        name
    })
}

/// A URL for the test server under `host` (`127.0.0.1` or `localhost`) with `query`.
fn url(host: &str, query: &str) -> String {
    format!("postgres://coinorder@{host}:{}/{}{query}", port(), database())
}

fn open(url: &str, dir: &tempfile::TempDir) -> coinorder::Result<Service> {
    let key = dir.path().join("shared.key");
    std::fs::write(&key, "dGxzLXRlc3Qta2V5LTMyLWJ5dGVzLWxvbmctb2theSE=").expect("write key file");
    let mut config = Config::new(Environment::Sandbox);
    config.secret_key_path = Some(PathBuf::from(&key));
    Service::open(url, config)
}

/// Opens `url`, reads through the store (listing keys) to show the connection works, and
/// returns whether each of the service's connections to the server is encrypted, as the
/// server itself reports it (`pg_stat_ssl`) while the service holds them open.
fn works(url: &str) -> Vec<bool> {
    // The tests run at once on one database: each service's connections are told apart by
    // an application name of their own (a parameter the URL passes on untouched).
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let name = format!("tls_test_{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let url = &format!("{url}{}application_name={name}", if url.contains('?') { "&" } else { "?" });
    let dir = tempfile::tempdir().expect("tempdir");
    let service = open(url, &dir).unwrap_or_else(|e| panic!("{url}: {e}"));
    service.list_keys().unwrap_or_else(|e| panic!("{url}: {e}"));
    let mut admin = postgres::Client::connect(&server_url(), postgres::NoTls).expect("connect to the test server");
    let encrypted: Vec<bool> = admin
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.datname = $1 AND a.application_name = $2",
            &[&database(), &name],
        )
        .expect("pg_stat_ssl")
        .iter()
        .map(|row| row.get(0))
        .collect();
    drop(service);
    assert!(!encrypted.is_empty(), "{url}: the service holds no connection");
    encrypted
}

/// [`works`], and every connection is encrypted.
fn works_encrypted(url: &str) {
    let encrypted = works(url);
    assert!(encrypted.iter().all(|tls| *tls), "{url}: {encrypted:?}");
}

fn refused(url: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    match open(url, &dir) {
        Ok(_) => panic!("{url} connected"),
        Err(error) => error.to_string(),
    }
}

#[test]
#[ignore = "needs the PostgreSQL server of scripts/test-postgres"]
fn the_default_encrypts_without_checking_the_certificate_and_disable_does_not_encrypt() {
    // Before: the default `prefer` took the server's offer of TLS and then refused its
    // certificate, so a stock server with a self-signed one could not be used at all.
    works_encrypted(&url("127.0.0.1", ""));
    works_encrypted(&url("127.0.0.1", "?sslmode=prefer"));
    works_encrypted(&url("127.0.0.1", "?sslmode=allow"));
    let plain = works(&url("127.0.0.1", "?sslmode=disable"));
    assert!(plain.iter().all(|tls| !*tls), "{plain:?}");
}

#[test]
#[ignore = "needs the PostgreSQL server of scripts/test-postgres"]
fn require_checks_the_chain_and_host_against_the_public_roots_or_the_chain_against_a_root_file() {
    // Stricter than libpq's `require`, and what this library always did: a URL asking for
    // TLS never takes a certificate nobody vouches for.
    let message = refused(&url("localhost", "?sslmode=require"));
    assert!(message.contains("UnknownIssuer"), "{message}");
    let ca = test_ca();
    works_encrypted(&url("127.0.0.1", &format!("?sslmode=require&sslrootcert={ca}")));
    works_encrypted(&url("127.0.0.1", &format!("?sslmode=prefer&sslrootcert={ca}")));
    // A root file of another CA (scripts/postgres makes one beside the server's): refused.
    let other = ca.replace("ca.pem", "other-ca.pem");
    assert!(std::path::Path::new(&other).exists(), "{other}");
    for mode in ["require", "prefer", "verify-ca"] {
        let message = refused(&url("127.0.0.1", &format!("?sslmode={mode}&sslrootcert={other}")));
        assert!(message.contains("UnknownIssuer"), "{mode}: {message}");
    }
}

#[test]
#[ignore = "needs the PostgreSQL server of scripts/test-postgres"]
fn verify_full_checks_the_chain_and_the_host_name() {
    let ca = test_ca();
    works_encrypted(&url("localhost", &format!("?sslmode=verify-full&sslrootcert={ca}")));
    // The certificate names `localhost`, not the address.
    let message = refused(&url("127.0.0.1", &format!("?sslmode=verify-full&sslrootcert={ca}")));
    assert!(message.contains("certificate"), "{message}");
    // Without the private CA, the public roots do not lead to it.
    for query in ["?sslmode=verify-full", "?sslmode=verify-full&sslrootcert=system", "?sslrootcert=system"] {
        let message = refused(&url("localhost", query));
        assert!(message.contains("UnknownIssuer"), "{query}: {message}");
    }
}

#[test]
#[ignore = "needs the PostgreSQL server of scripts/test-postgres"]
fn verify_ca_checks_the_chain_but_not_the_host() {
    let ca = test_ca();
    works_encrypted(&url("127.0.0.1", &format!("?sslmode=verify-ca&sslrootcert={ca}")));
}

#[test]
#[ignore = "needs the PostgreSQL server of scripts/test-postgres"]
fn an_unknown_mode_a_missing_root_file_or_public_roots_without_the_host_are_clear_errors() {
    let message = refused(&url("127.0.0.1", "?sslmode=verify_full"));
    assert!(
        message.contains("sslmode: must be disable, allow, prefer, require, verify-ca or verify-full"),
        "{message}"
    );
    let message = refused(&url("127.0.0.1", "?sslmode=verify-full&sslrootcert=/no/such/ca.pem"));
    assert!(message.contains("sslrootcert /no/such/ca.pem: "), "{message}");
    let message = refused(&url("127.0.0.1", "?sslmode=verify-ca"));
    assert!(message.contains("sslmode=verify-ca: needs sslrootcert"), "{message}");
    let message = refused(&url("127.0.0.1", "?sslmode=prefer&sslrootcert=system"));
    assert!(message.contains("sslrootcert=system: "), "{message}");
}
