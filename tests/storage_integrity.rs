//! What the storage layer does with data it did not write itself: a stored value it does
//! not know is an error (`ErrorKind::Corrupt`, a 500 that hides its detail), never a
//! guess; the per-order event counter keeps `sequence` 1..n, also across the upgrade of
//! a schema-version-4 database; an unknown event id is `EVENT_NOT_FOUND`.
//!
//! Bad values are written straight into the service's database (rusqlite on the SQLite
//! file, the `postgres` crate on PostgreSQL), the way a hand edit or another tool would.
//! The schema's CHECK constraints would refuse most of them, so they are turned off
//! first (`PRAGMA ignore_check_constraints` on SQLite, dropped on PostgreSQL): the
//! library must not rely on every writer of the database having kept them.

mod common;
mod lifecycle_common;

use std::path::Path;

use coinorder::{Environment, ErrorKind, Service, WireRequest};
use common::*;
use lifecycle_common::*;
use serde_json::json;

/// Runs `sql` on the service's database from a connection of its own, with the CHECK
/// constraints off.
fn tamper(db: &Path, sql: &str) {
    let mut raw = RawDb::open(db);
    for table in raw.tables() {
        raw.allow_bad_values(&table);
    }
    raw.batch(sql);
}

/// Asserts `result` failed with `ErrorKind::Corrupt` naming `column`, and that the error
/// is a 500 whose message stays inside.
fn assert_corrupt<T: std::fmt::Debug>(result: coinorder::Result<T>, column: &str) {
    let err = result.expect_err(&format!("reading an unknown {column} must fail"));
    match err.kind() {
        ErrorKind::Corrupt(detail) => assert!(detail.contains(column), "{column}: {detail}"),
        other => panic!("{column}: expected ErrorKind::Corrupt, got {other:?} ({err})"),
    }
    assert_eq!((err.http_status(), err.error_code()), (500, "InternalServerError"), "{err}");
    assert!(err.to_string().starts_with("stored data could not be read: "), "{err}");
    assert_eq!(err.public_message(), "Server error");
}

/// Asserts the wire layer answered a 500 that does not show what was stored.
fn assert_hidden_500(resp: &coinorder::WireResponse, stored: &str) {
    let message = assert_error(resp, 500, "InternalServerError");
    assert_eq!(message, "Server error");
    assert!(!text(resp).contains(stored), "the stored value leaked: {}", text(resp));
}

fn get_order_path(order_id: &str) -> String {
    format!("/v1/orders/{order_id}")
}

#[test]
fn a_key_of_an_unknown_environment_does_not_authenticate_as_sandbox() {
    let h = harness();
    assert_eq!(h.get("/v1/orders").status, 200);
    // Before: read as sandbox, so a sandbox service took the key and answered 200.
    tamper(&h.db(), &format!("UPDATE api_keys SET environment = 'staging' WHERE id = '{}'", h.key_id));
    assert_corrupt(h.svc.authenticate(Some(&h.key)), "api_keys.environment");
    assert_hidden_500(&h.get("/v1/orders"), "staging");
    assert_corrupt(h.svc.list_keys(), "api_keys.environment");
}

#[test]
fn a_key_of_an_unknown_status_is_an_error_not_an_inactive_key() {
    let h = harness();
    // Before: read as inactive, so the client was told AUTHENTICATION_FAILED (a 400 that
    // blames the key) for what is a fault of the service's data.
    tamper(&h.db(), &format!("UPDATE api_keys SET status = 'bogus' WHERE id = '{}'", h.key_id));
    assert_corrupt(h.svc.authenticate(Some(&h.key)), "api_keys.status");
    assert_hidden_500(&h.get("/v1/orders"), "bogus");
    assert_corrupt(h.svc.get_key(&h.key_id), "api_keys.status");
}

#[test]
fn an_order_or_invoice_with_an_unknown_status_or_amount_is_corrupt() {
    // PostgreSQL keeps invoices in a table of their own; SQLite in the order's row.
    let (invoice_status, invoice_rate) = if on_postgres() {
        ("UPDATE invoices SET status = 'ARCHIVED'", "UPDATE invoices SET rate = '1,0'")
    } else {
        ("UPDATE orders SET invoice_status = 'ARCHIVED'", "UPDATE orders SET rate = '1,0'")
    };
    for (sql, column, stored) in [
        ("UPDATE orders SET status = 'ARCHIVED'", "orders.status", "ARCHIVED"),
        (invoice_status, "invoice.status", "ARCHIVED"),
        ("UPDATE orders SET amount = 'ten'", "orders.amount", "ten"),
        (invoice_rate, "invoice.rate", "1,0"),
    ] {
        let h = harness();
        let order = create_usd10(&h);
        tamper(&h.db(), sql);
        assert_corrupt(h.svc.order(&order.id), column);
        assert_hidden_500(&h.get(&get_order_path(&order.id)), stored);
        if column.starts_with("orders.") {
            assert_hidden_500(&h.get("/v1/orders"), stored);
        }
    }
}

#[test]
fn an_order_of_an_unknown_environment_belongs_to_no_service() {
    // Every order query names the service's environment, so an order whose environment
    // is unknown is not this service's order: ORDER_NOT_VALID, as for any other
    // environment's, and it is never listed. (The decoder refuses it too; nothing
    // reaches that today.)
    let h = harness();
    let order = create_usd10(&h);
    tamper(&h.db(), "UPDATE orders SET environment = 'staging'");
    assert_error(&h.get(&get_order_path(&order.id)), 400, "ORDER_NOT_VALID");
    assert_eq!(list_all(&h.svc, &h.key), Vec::<serde_json::Value>::new());
}

#[test]
fn events_and_payments_with_unknown_values_are_corrupt() {
    for (sql, column) in [
        // Before: read as sandbox, so the event was returned as a sandbox event.
        ("UPDATE events SET environment = 'staging'", "events.environment"),
        ("UPDATE events SET type = 'order.refunded'", "events.type"),
        ("UPDATE events SET previous_status = 'DRAFT'", "events.previous_status"),
        ("UPDATE events SET status = 'DRAFT'", "events.status"),
    ] {
        let h = harness();
        let order = create_usd10(&h);
        let event = pay(&h, &order.id, "tx-1", "4", true).events.pop().expect("an event");
        tamper(&h.db(), sql);
        assert_corrupt(h.svc.order_events(&order.id), column);
        assert_corrupt(h.svc.event(&event.event_id), column);
    }
    let h = harness();
    let order = create_usd10(&h);
    pay(&h, &order.id, "tx-1", "4", false);
    tamper(&h.db(), "UPDATE payments SET state = 'pending'");
    assert_corrupt(h.svc.order_payments(&order.id), "payments.state");
    tamper(&h.db(), "UPDATE payments SET state = 'unconfirmed', amount = '4 USDT'");
    assert_corrupt(h.svc.order_payments(&order.id), "payments.amount");
}

#[test]
fn a_rate_of_an_unknown_value_is_corrupt() {
    let h = harness();
    h.svc.set_rate("BTC", "USD", dec("65000"), None).expect("set rate");
    tamper(&h.db(), "UPDATE rates SET rate = 'lots'");
    assert_corrupt(h.svc.list_rates(), "rates.rate");
}

#[test]
fn an_unknown_event_id_is_event_not_found() {
    let h = harness();
    let order = create_usd10(&h);
    let event = pay(&h, &order.id, "tx-1", "4", true).events.pop().expect("an event");
    let err = h.svc.event("msg_nope").expect_err("no such event");
    assert!(matches!(err.kind(), ErrorKind::EventNotFound(id) if id == "msg_nope"), "{err:?}");
    assert_eq!((err.error_code(), err.http_status(), err.code().number()), ("EVENT_NOT_FOUND", 400, 14));
    assert_eq!(err.to_string(), "event_id: no event \"msg_nope\"");
    // An event of the other environment is not visible either.
    let live = Service::open(h.db(), config(Environment::Live, &h.clock)).expect("open live");
    let err = live.event(&event.event_id).expect_err("a sandbox event from live");
    assert_eq!(err.error_code(), "EVENT_NOT_FOUND");
}

/// The order's counter as stored.
fn stored_counter(db: &Path, order_id: &str) -> i64 {
    let sql = format!("SELECT last_event_sequence FROM orders WHERE order_id = '{order_id}'");
    let counter = RawDb::open(db).strings(&sql);
    counter[0].parse().expect("counter")
}

fn sequences(svc: &Service, order_id: &str) -> Vec<i64> {
    svc.order_events(order_id).expect("events").iter().map(|e| e.sequence).collect()
}

#[test]
fn event_sequences_stay_consecutive_through_a_lifecycle() {
    let h = harness();
    let order = create_usd10(&h);
    let other = create_usd10(&h);
    assert_eq!(stored_counter(&h.db(), &order.id), 0);
    tick(&h);
    pay(&h, &order.id, "tx-short", "4", true); // NEW → PENDING
    pay(&h, &other.id, "tx-other", "10", true); // another order's own 1
    pay(&h, &order.id, "tx-rest", "6", false);
    tick(&h);
    h.svc.reject_payment("tx-rest").expect("reject"); // PENDING → FAILED
    tick(&h);
    h.svc.mark_paid(&order.id).expect("mark paid"); // FAILED → PAID
    let seen = sequences(&h.svc, &order.id);
    assert!(seen.len() >= 3, "{seen:?}");
    assert_eq!(seen, (1..=seen.len() as i64).collect::<Vec<_>>());
    assert_eq!(stored_counter(&h.db(), &order.id), seen.len() as i64);
    assert_eq!(sequences(&h.svc, &other.id), vec![1]);
    assert_eq!(stored_counter(&h.db(), &other.id), 1);
}

/// Takes a current SQLite database back to schema version 4: invoices in a table of
/// their own again (schema 10 moved them into the order's row), and no event counter,
/// key display name (5, 7), wallets (8), previous webhook secret (11) or vanished mark (12).
const SCHEMA_12_TO_4: &str = "
    CREATE TABLE invoices (
        invoice_id       TEXT PRIMARY KEY,
        order_id         TEXT NOT NULL UNIQUE REFERENCES orders (order_id),
        amount           TEXT NOT NULL,
        currency         TEXT NOT NULL,
        rate             TEXT NOT NULL,
        status           TEXT NOT NULL,
        receive_amount   TEXT NOT NULL DEFAULT '0',
        receive_currency TEXT NOT NULL DEFAULT '',
        created_at       INTEGER NOT NULL,
        expired_at       INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL,
        address          TEXT NOT NULL DEFAULT '',
        payment_uri      TEXT NOT NULL DEFAULT ''
    ) STRICT;
    INSERT INTO invoices
        SELECT invoice_id, order_id, invoice_amount, invoice_currency, rate, invoice_status, receive_amount,
               invoice_receive_currency, invoice_created_at, expired_at, invoice_updated_at, address, payment_uri
          FROM orders;
    CREATE INDEX invoices_by_expiry ON invoices (status, expired_at);
    DROP INDEX orders_by_expiry; DROP INDEX orders_watched;
    ALTER TABLE orders DROP COLUMN invoice_id; ALTER TABLE orders DROP COLUMN invoice_amount;
    ALTER TABLE orders DROP COLUMN invoice_currency; ALTER TABLE orders DROP COLUMN rate;
    ALTER TABLE orders DROP COLUMN invoice_status; ALTER TABLE orders DROP COLUMN receive_amount;
    ALTER TABLE orders DROP COLUMN invoice_receive_currency; ALTER TABLE orders DROP COLUMN invoice_created_at;
    ALTER TABLE orders DROP COLUMN expired_at; ALTER TABLE orders DROP COLUMN invoice_updated_at;
    ALTER TABLE orders DROP COLUMN address; ALTER TABLE orders DROP COLUMN payment_uri;
    ALTER TABLE orders DROP COLUMN derivation_index;
    ALTER TABLE orders DROP COLUMN last_event_sequence; ALTER TABLE api_keys DROP COLUMN display_name;
    ALTER TABLE api_keys DROP COLUMN previous_secret_enc; ALTER TABLE api_keys DROP COLUMN previous_secret_until;
    ALTER TABLE payments DROP COLUMN vanished;
    DROP TABLE wallets; DROP TABLE wallet_accounts; DROP TABLE chain_cursors;
    DROP INDEX payments_unconfirmed;
    PRAGMA user_version = 4;";

#[test]
fn a_schema_version_4_database_continues_its_sequences_after_the_upgrade() {
    assert_eq!(coinorder::SCHEMA_VERSION, 12);
    if on_postgres() {
        return; // PostgreSQL support began with the version-5 schema: no older database exists
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_path(&dir);
    let clock = std::sync::Arc::new(coinorder::ManualClock::new(T0_MS));
    let (key, busy, quiet, fresh) = {
        let svc = Service::open(&db, config(Environment::Sandbox, &clock)).expect("open");
        let (key, _) = new_key(&svc, 42, Environment::Sandbox);
        let create = || {
            let body = create_ok(&svc, &key, &json!({"currency": "USD", "amount": 10, "pay_currency": "USDT"}));
            body["data"]["order_id"].as_str().expect("order_id").to_string()
        };
        let (busy, quiet, fresh) = (create(), create(), create());
        svc.record_payment(&busy, "tx-1", dec("4"), true).expect("pay busy");
        svc.record_payment(&busy, "tx-2", dec("6"), false).expect("pay busy");
        svc.reject_payment("tx-2").expect("reject"); // PENDING → FAILED
        svc.record_payment(&quiet, "tx-3", dec("10"), true).expect("pay quiet");
        (key, busy, quiet, fresh)
    };
    let get_order = |svc: &Service, id: &str| {
        let response = svc.handle(&WireRequest::new("GET", &format!("/v1/orders/{id}")).header("x-api-key", &key));
        assert_eq!(response.status, 200, "{}", String::from_utf8_lossy(&response.body));
        String::from_utf8(response.body).expect("utf-8")
    };
    let (before_busy, shown_before) = {
        let svc = Service::open(&db, config(Environment::Sandbox, &clock)).expect("reopen");
        (sequences(&svc, &busy), [&busy, &quiet, &fresh].map(|id| get_order(&svc, id)))
    };
    assert_eq!(before_busy, vec![1, 2]);

    // Back to what schema version 4 wrote: no counter column at all (nor the later
    // display_name of keys, nor version 8's wallets, nor version 10's invoice in the
    // order's row, nor version 11's previous webhook secret, nor version 12's mark).
    tamper(&db, SCHEMA_12_TO_4);
    {
        let conn = rusqlite::Connection::open(&db).expect("open");
        let columns: i64 = conn
            .query_row("SELECT COUNT(*) FROM pragma_table_info('orders') WHERE name = 'last_event_sequence'", [], |r| {
                r.get(0)
            })
            .expect("table info");
        assert_eq!(columns, 0);
    }

    let svc = Service::open(&db, config(Environment::Sandbox, &clock)).expect("open upgrades to the current version");
    let version: i64 = rusqlite::Connection::open(&db)
        .and_then(|c| c.pragma_query_value(None, "user_version", |r| r.get(0)))
        .expect("user_version");
    assert_eq!(version, coinorder::SCHEMA_VERSION);
    // Every order and invoice field came through both upgrades: each Get Order answers
    // byte for byte what it did before.
    assert_eq!([&busy, &quiet, &fresh].map(|id| get_order(&svc, id)), shown_before);
    assert_eq!(stored_counter(&db, &busy), before_busy.len() as i64);
    assert_eq!(stored_counter(&db, &quiet), 1);
    assert_eq!(stored_counter(&db, &fresh), 0);

    // The next events continue where the old ones stopped (and do not collide with them
    // on UNIQUE (order_id, sequence)).
    let paid = svc.mark_paid(&busy).expect("mark paid"); // FAILED → PAID
    assert_eq!(paid.order.status, coinorder::OrderStatus::Paid);
    svc.record_payment(&fresh, "tx-4", dec("10"), true).expect("pay fresh");
    assert_eq!(sequences(&svc, &busy), vec![1, 2, 3]);
    assert_eq!(stored_counter(&db, &busy), 3);
    assert_eq!(sequences(&svc, &quiet), vec![1]);
    assert_eq!(sequences(&svc, &fresh), vec![1]);
    assert!(get_order(&svc, &busy).contains("\"status\":\"PAID\""));
}
