//! API keys and webhook secrets are never stored in plaintext (DESIGN §3): the raw bytes
//! of the database file, its `-wal` and every other file beside it contain neither the
//! plain key nor the webhook secret (in any plain encoding), and no `Debug` or JSON
//! rendering of key records reveals them.

mod common;

use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use coinorder::{CreatedApiKey, Environment, ManualClock, NewApiKey, Service};
use common::*;
use serde_json::json;

/// Every secret representation that must not appear at rest.
fn needles(created: &CreatedApiKey) -> Vec<(String, Vec<u8>)> {
    let key = created.plain_key.expose().to_string();
    let secret = created.webhook_secret.expose().to_string();
    let secret_b64 = secret
        .strip_prefix("whsec_")
        .unwrap_or_else(|| panic!("webhook secret must start with whsec_: {}", secret.len()))
        .to_string();
    let secret_raw = base64::engine::general_purpose::STANDARD.decode(&secret_b64).expect("webhook secret is base64");
    assert_eq!(secret_raw.len(), 32, "whsec_ + base64 of 32 bytes");
    let key_random = key[5..].to_string();
    vec![
        ("plain key".to_string(), key.clone().into_bytes()),
        ("plain key without prefix".to_string(), key_random.into_bytes()),
        ("plain key as UTF-16LE".to_string(), utf16le(&key)),
        ("webhook secret".to_string(), secret.clone().into_bytes()),
        ("webhook secret base64 part".to_string(), secret_b64.into_bytes()),
        ("webhook secret raw bytes".to_string(), secret_raw),
        ("webhook secret as UTF-16LE".to_string(), utf16le(&secret)),
    ]
}

fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Greps every file in `dir` (the database, `-wal`, `-shm`, key file...) for every needle;
/// on PostgreSQL, a full `pg_dump` of the test's database instead.
fn assert_not_at_rest(dir: &Path, keys: &[CreatedApiKey], moment: &str) {
    if on_postgres() {
        let url = backend::db_in(dir);
        let dump = std::process::Command::new("pg_dump").arg("--dbname").arg(&url).output().expect("run pg_dump");
        assert!(dump.status.success(), "pg_dump: {}", String::from_utf8_lossy(&dump.stderr));
        assert!(contains(&dump.stdout, b"COPY public.api_keys"), "{moment}: the dump has no api_keys data");
        for created in keys {
            for (what, needle) in needles(created) {
                assert!(
                    !contains(&dump.stdout, &needle),
                    "{moment}: {what} of key {} found in the database",
                    created.key.id
                );
            }
        }
        return;
    }
    let mut scanned = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if !path.is_file() {
            continue;
        }
        let bytes = std::fs::read(&path).expect("read file");
        scanned.push(format!(
            "{} ({} bytes)",
            path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            bytes.len()
        ));
        for created in keys {
            for (what, needle) in needles(created) {
                assert!(
                    !contains(&bytes, &needle),
                    "{moment}: {what} of key {} found in {}",
                    created.key.id,
                    path.display()
                );
            }
        }
    }
    assert!(scanned.iter().any(|s| s.starts_with("coinorder.db ")), "{moment}: database file not scanned: {scanned:?}");
}

fn wal_exists(dir: &Path) -> bool {
    dir.join("coinorder.db-wal").exists()
}

#[test]
fn keys_and_webhook_secrets_are_not_stored_in_plaintext() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(T0_MS));
    let svc = Service::open(db_path(&dir), config(Environment::Sandbox, &clock)).expect("open");

    let mut keys = Vec::new();
    for (user_id, environment, webhook_url) in [
        (1, Environment::Sandbox, Some("https://merchant.example.com/hooks")),
        (1, Environment::Live, Some("https://merchant.example.com/live-hooks")),
        (2, Environment::Sandbox, None),
        (3, Environment::Live, None),
    ] {
        let created = svc
            .create_key(NewApiKey { user_id, environment, webhook_url: webhook_url.map(str::to_string) })
            .expect("create key");
        let prefix = match environment {
            Environment::Sandbox => "test_",
            Environment::Live => "prod_",
        };
        let plain = created.plain_key.expose();
        assert!(plain.starts_with(prefix), "key prefix for {environment:?}");
        assert_eq!(plain.len(), prefix.len() + 40, "prefix + 40 chars");
        assert!(is_base62(&plain[prefix.len()..]), "40 base62 chars");
        keys.push(created);
    }
    let mut plains: Vec<&str> = keys.iter().map(|k| k.plain_key.expose()).collect();
    plains.sort_unstable();
    plains.dedup();
    assert_eq!(plains.len(), keys.len(), "keys are unique");
    let mut secrets: Vec<&str> = keys.iter().map(|k| k.webhook_secret.expose()).collect();
    secrets.sort_unstable();
    secrets.dedup();
    assert_eq!(secrets.len(), keys.len(), "webhook secrets are unique");

    // The secret can still be read back through the API (it is encrypted, not lost).
    for created in &keys {
        let secret = svc.key_webhook_secret(&created.key.id).expect("secret");
        assert_eq!(secret.expose(), created.webhook_secret.expose());
    }

    // Use the sandbox keys so requests, orders and last-used updates are written too.
    for created in keys.iter().filter(|k| k.key.environment == Environment::Sandbox) {
        let key = created.plain_key.expose();
        create_ok(
            &svc,
            key,
            &json!({"currency": "USD", "amount": 10, "webhook_url": "https://merchant.example.com/o"}),
        );
        assert_eq!(get(&svc, key, "/v1/orders").status, 200);
    }
    svc.set_key_webhook_url(&keys[2].key.id, Some("https://merchant.example.com/new")).expect("set webhook url");
    svc.deactivate_key(&keys[3].key.id).expect("deactivate");

    // While the service is open (the WAL holds the recent writes).
    let had_wal = wal_exists(dir.path());
    assert_not_at_rest(dir.path(), &keys, "service open");

    // After the service is closed (checkpointed into the main file).
    drop(svc);
    assert_not_at_rest(dir.path(), &keys, "service closed");

    // A fresh service still authenticates the keys (the hashes are what is stored).
    let svc = Service::open(db_path(&dir), config(Environment::Sandbox, &clock)).expect("reopen");
    assert_eq!(get(&svc, keys[0].plain_key.expose(), "/v1/orders").status, 200);
    assert_eq!(get(&svc, keys[2].plain_key.expose(), "/v1/orders").status, 200);
    assert_not_at_rest(dir.path(), &keys, "reopened");
    eprintln!("WAL present while open: {had_wal}");
}

#[test]
fn debug_output_hides_a_webhook_urls_credentials_and_a_requests_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(T0_MS));
    let svc = Service::open(db_path(&dir), config(Environment::Sandbox, &clock)).expect("open");
    let url = "https://hookuser:HookPassw0rd@hooks.example/in?token=HookToken123";
    let new = NewApiKey { user_id: 9, environment: Environment::Sandbox, webhook_url: Some(url.to_string()) };
    let created = svc.create_key(new.clone()).expect("create key");
    let merchant = svc.authenticate(Some(created.plain_key.expose())).expect("authenticate");
    let order = coinorder::CreateOrder {
        currency: "USD".into(),
        amount: "5".parse().expect("amount"),
        webhook_url: Some(url.to_string()),
        ..Default::default()
    };
    let request_made = format!("{order:?}");
    let created_order = svc.create_order(&merchant, &order).expect("create order");
    let created_order_shown = format!("{created_order:?}");
    let order = created_order.order.order;
    let request = coinorder::WireRequest::new("GET", "/v1/orders")
        .header("X-Api-Key", created.plain_key.expose())
        .header("Cookie", "session=CookieSecret1")
        .header("Proxy-Authorization", "Basic ProxySecret1");
    let renderings = [
        ("CreateOrder", request_made),
        ("CreatedOrder", created_order_shown),
        ("NewApiKey", format!("{new:?}")),
        ("CreatedApiKey", format!("{created:#?}")),
        ("ApiKey", format!("{:?}", created.key)),
        ("Order", format!("{order:?}")),
        ("WireRequest", format!("{request:?}")),
    ];
    for (what, rendered) in renderings {
        for secret in ["HookPassw0rd", "HookToken123", "CookieSecret1", "ProxySecret1", created.plain_key.expose()] {
            assert!(!rendered.contains(secret), "Debug of {what} shows {secret}: {rendered}");
        }
    }
    assert!(format!("{order:?}").contains("https://hookuser:***@hooks.example/in?token=***"), "{order:?}");
    assert!(format!("{request:?}").contains(r#"("X-Api-Key", "[redacted]")"#), "{request:?}");
}

#[test]
fn a_plain_key_passed_where_its_id_belongs_is_never_echoed_in_the_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(T0_MS));
    let svc = Service::open(db_path(&dir), config(Environment::Sandbox, &clock)).expect("open");
    let new = NewApiKey { user_id: 3, environment: Environment::Sandbox, webhook_url: None };
    let plain = svc.create_key(new).expect("create key").plain_key.expose().to_string();
    let attempts: Vec<(&str, coinorder::Error)> = vec![
        ("get_key", svc.get_key(&plain).expect_err("no key has that id")),
        ("activate_key", svc.activate_key(&plain).expect_err("no key has that id")),
        ("deactivate_key", svc.deactivate_key(&plain).expect_err("no key has that id")),
        ("set_key_webhook_url", svc.set_key_webhook_url(&plain, None).expect_err("no key has that id")),
        ("delete_key", svc.delete_key(&plain).expect_err("no key has that id")),
        ("rotate_key_webhook_secret", svc.rotate_key_webhook_secret(&plain).expect_err("no key has that id")),
    ];
    let tail = &plain[plain.len() - 4..];
    for (call, error) in attempts {
        let shown = format!("{error} {error:?} {}", error.public_message());
        assert_eq!(error.error_code(), "KEY_NOT_FOUND", "{call}");
        assert!(!shown.contains(&plain[5..]), "{call} echoes the plain key: {shown}");
        assert!(
            error.to_string().starts_with(&format!("api key \"test_…{tail}\" not found (that is a plain key")),
            "{call}: {error}"
        );
    }
    // Pasted with something around it, or cut short: still never in full.
    for slip in [format!(" {plain}"), format!("\"{plain}\""), format!("Bearer {plain}"), plain[..30].to_string()] {
        let error = svc.get_key(&slip).expect_err("no key has that id");
        let shown = format!("{error} {error:?}");
        assert!(!shown.contains(&plain[5..30]), "{slip:?} is echoed: {shown}");
        assert!(shown.contains("(that is a plain key"), "{shown}");
    }
    // An id that is not a plain key is named as given.
    let unknown = svc.get_key("key_nothere").expect_err("unknown id");
    assert_eq!(unknown.to_string(), "api key \"key_nothere\" not found");
}

#[test]
fn debug_and_json_renderings_do_not_reveal_secrets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(T0_MS));
    let svc = Service::open(db_path(&dir), config(Environment::Sandbox, &clock)).expect("open");
    let created = svc
        .create_key(NewApiKey {
            user_id: 9,
            environment: Environment::Sandbox,
            webhook_url: Some("https://merchant.example.com/hooks".to_string()),
        })
        .expect("create key");
    let key = created.plain_key.expose().to_string();
    let secret = created.webhook_secret.expose().to_string();
    let secret_b64 = secret.trim_start_matches("whsec_").to_string();

    let assert_clean = |what: &str, rendered: &str| {
        assert!(!rendered.contains(&key), "{what} reveals the plain key: {rendered}");
        assert!(!rendered.contains(&key[5..]), "{what} reveals the key body");
        assert!(!rendered.contains(&secret_b64), "{what} reveals the webhook secret");
    };
    assert_clean("Debug of CreatedApiKey", &format!("{created:?}"));
    assert_clean("pretty Debug of CreatedApiKey", &format!("{created:#?}"));
    assert_clean("Debug of plain_key", &format!("{:?}", created.plain_key));
    assert_clean("Debug of webhook_secret", &format!("{:?}", created.webhook_secret));
    let fetched = svc.key_webhook_secret(&created.key.id).expect("secret");
    assert_clean("Debug of fetched secret", &format!("{fetched:?}"));
    assert_clean("Debug of ApiKey", &format!("{:?}", created.key));
    let listed = svc.list_keys().expect("list keys");
    assert_clean("Debug of list_keys", &format!("{listed:?}"));
    let one = svc.get_key(&created.key.id).expect("get key");
    assert_clean("Debug of get_key", &format!("{one:?}"));
    let as_json = serde_json::to_string(&one).expect("serialize key");
    assert_clean("JSON of ApiKey", &as_json);

    let v: serde_json::Value = serde_json::from_str(&as_json).expect("json");
    assert_eq!(
        keys_of(&v),
        sorted(&[
            "id",
            "user_id",
            "environment",
            "status",
            "webhook_url",
            "key_hint",
            "created_at",
            "last_used_at",
            "display_name"
        ])
    );
    assert_eq!(v["created_at"].as_str(), Some(T0_ISO));
    let hint = string(&v, "key_hint");
    assert!(hint.len() < key.len() && hint.starts_with("test_"), "key_hint: {hint}");

    // Failed authentication never echoes the submitted key back.
    let last = if key.ends_with('X') { 'Y' } else { 'X' };
    let wrong = format!("{}{last}", &key[..key.len() - 1]);
    let resp = get(&svc, &wrong, "/v1/orders");
    assert_eq!(resp.status, 401);
    assert!(!text(&resp).contains(&wrong), "{}", text(&resp));
}

#[cfg(unix)]
#[test]
fn a_new_database_and_its_key_file_are_private_to_their_owner() {
    use std::os::unix::fs::PermissionsExt;
    if on_postgres() {
        return; // file modes: PostgreSQL's files belong to its server, the key file to the operator
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("private.db");
    let svc = coinorder::Service::open(&db, coinorder::Config::new(coinorder::Environment::Sandbox)).expect("open");
    svc.create_key(coinorder::NewApiKey {
        user_id: 1,
        environment: coinorder::Environment::Sandbox,
        webhook_url: None,
    })
    .expect("key");
    for path in [db.clone(), dir.path().join("private.db.key")] {
        let mode = std::fs::metadata(&path).expect("metadata").permissions().mode();
        assert_eq!(mode & 0o077, 0, "{} is mode {:o}", path.display(), mode & 0o777);
    }
}

#[test]
fn a_database_with_secrets_refuses_a_missing_or_foreign_key_file_and_links_share_the_file() {
    if on_postgres() {
        return; // the key file of PostgreSQL is named by the operator and never created
    }
    let config = || coinorder::Config::new(Environment::Sandbox);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("shop.db");
    let key_file = dir.path().join("shop.db.key");
    let svc = Service::open(&db, config()).expect("open");
    let created =
        svc.create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None }).expect("key");
    drop(svc);
    let original = std::fs::read(&key_file).expect("key file");

    // Missing: refused, and no new key file is made (it could not read the secrets).
    std::fs::remove_file(&key_file).expect("remove key file");
    let missing = Service::open(&db, config()).expect_err("a missing key file is refused");
    assert!(matches!(missing.kind(), coinorder::ErrorKind::SecretStore(_)), "{missing:?}");
    assert!(missing.to_string().contains("is missing, but this database holds webhook secrets"), "{missing}");
    assert!(!key_file.exists(), "no key file was made");

    // Another database's key file: refused too.
    let other = dir.path().join("other.db");
    drop(Service::open(&other, config()).expect("other"));
    std::fs::copy(dir.path().join("other.db.key"), &key_file).expect("copy the other key file");
    let foreign = Service::open(&db, config()).expect_err("a foreign key file is refused");
    assert!(foreign.to_string().contains("opens none of this database's webhook secrets"), "{foreign}");

    // The right one back: open, and the secret is the one shown at creation.
    std::fs::write(&key_file, &original).expect("restore key file");
    let svc = Service::open(&db, config()).expect("reopen with the right key file");
    let rotated = svc.rotate_key_webhook_secret(&created.key.id).expect("secrets readable and writable");
    assert!(rotated.expose().starts_with("whsec_"));
    drop(svc);

    // Through a symbolic link: the key file beside the real file, not a new one per link.
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).expect("symlink");
    drop(Service::open(&link, config()).expect("open through the link"));
    assert!(!dir.path().join("link.db.key").exists(), "no key file for the link");
}
