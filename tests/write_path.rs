//! What a create costs the SQLite file: the pages each B-tree appends to the write-ahead
//! log per order, read from the log itself (each frame names its page; SQLite's `dbstat`
//! table names the B-tree a page belongs to), and the Get Orders queries reading their
//! index in order, with no sort.
//!
//! Under `synchronous=FULL` a commit waits until its log pages are on disk, so the pages
//! per create are what a create costs; an index that rewrites more pages than it appends
//! to is found here.
//!
//! And what keeps the log short: the service's own checkpoint thread copies it into the
//! database file, so no committing request has to.
//!
//! SQLite only: PostgreSQL writes no such log of pages per B-tree.

mod common;

use std::collections::HashMap;
use std::path::Path;

use coinorder::{Config, CreateOrder, Environment, Merchant, NewApiKey, RateLimit, Service};
use rusqlite::Connection;

/// SQLite's log: a 32-byte header, then frames of a 24-byte header and one page.
const LOG_HEADER: usize = 32;
const FRAME_HEADER: usize = 24;

/// Orders created before the measured ones, so the B-trees have inner pages.
const WARM_UP: usize = 1_500;
/// Orders whose log pages are counted.
const MEASURED: usize = 500;

/// The page numbers of the log's frames from the `skip`-th on.
fn logged_pages(log: &Path, skip: usize) -> Vec<u32> {
    let bytes = std::fs::read(log).expect("read the log");
    let frame = FRAME_HEADER + page_size(log);
    let mut pages = Vec::new();
    let mut at = LOG_HEADER + skip * frame;
    while at + frame <= bytes.len() {
        pages.push(u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]));
        at += frame;
    }
    pages
}

fn frames_in(log: &Path) -> usize {
    let len = std::fs::metadata(log).map(|m| m.len() as usize).unwrap_or(0);
    len.saturating_sub(LOG_HEADER) / (FRAME_HEADER + page_size(log))
}

/// The database's page size, as the log's header gives it (bytes 8 to 11).
fn page_size(log: &Path) -> usize {
    let bytes = std::fs::read(log).expect("read the log");
    let size = u32::from_be_bytes(bytes[8..12].try_into().expect("a log header"));
    size as usize
}

/// A sandbox service on `path` (synchronous=NORMAL, rate limit off, the checkpoint
/// thread as `background` says) and the merchant of a fresh key.
fn open_shop(path: &Path, background: bool) -> (Service, Merchant) {
    let mut config = Config::new(Environment::Sandbox);
    config.rate_limit = RateLimit::OFF;
    config.sqlite.synchronous_full = false;
    config.sqlite.background_checkpoints = background;
    let service = Service::open(path, config).expect("open");
    let key = service
        .create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None })
        .expect("key");
    let merchant = service.authenticate(Some(key.plain_key.expose())).expect("authenticate");
    (service, merchant)
}

/// Log pages per create of each B-tree (table or index, by name) over `MEASURED`
/// creates on a store of `WARM_UP` orders, with the real clock (orders arrive in time
/// order, as in production).
fn log_pages_per_create() -> (HashMap<String, f64>, usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("shop.db");
    // No checkpoint may start the log over while the creates are counted.
    let (service, merchant) = open_shop(&path, false);
    let order = CreateOrder {
        currency: "USD".into(),
        amount: "19.99".parse().expect("amount"),
        title: Some("Mug".into()),
        description: Some("A mug with the shop's logo, 350 ml".into()),
        ..Default::default()
    };
    for _ in 0..WARM_UP {
        service.create_order(&merchant, &order).expect("create");
    }
    // From here on no commit copies the log back (the first checkpoint call hands that to
    // background checkpoints, and none runs), so the log keeps every page the measured
    // creates write.
    service.checkpoint().expect("checkpoint");
    let raw = Connection::open(&path).expect("open raw");
    raw.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).expect("truncate the log");
    let log = dir.path().join("shop.db-wal");
    service.create_order(&merchant, &order).expect("create"); // starts the log over
    let skip = frames_in(&log);
    for _ in 0..MEASURED {
        service.create_order(&merchant, &order).expect("create");
    }
    let mut owner = HashMap::new();
    let mut statement = raw.prepare("SELECT name, pageno FROM dbstat").expect("dbstat");
    let rows = statement.query_map([], |row| Ok((row.get::<_, u32>(1)?, row.get::<_, String>(0)?))).expect("query");
    for row in rows {
        let (page, name) = row.expect("row");
        owner.insert(page, name);
    }
    let mut per_tree: HashMap<String, f64> = HashMap::new();
    for page in logged_pages(&log, skip) {
        let name = owner.get(&page).cloned().unwrap_or_else(|| format!("page {page}"));
        *per_tree.entry(name).or_default() += 1.0 / MEASURED as f64;
    }
    (per_tree, page_size(&log))
}

#[test]
fn a_create_writes_one_table_and_appends_to_the_get_orders_indexes() {
    if common::on_postgres() {
        return;
    }
    let (pages, page_size) = log_pages_per_create();
    let mut listed: Vec<_> = pages.iter().map(|(name, n)| format!("{name} {n:.2}")).collect();
    listed.sort();
    let listed = listed.join(", ");
    let total: f64 = pages.values().sum();
    // Appended, an index writes its last leaf once per create and a new page and its
    // parent now and then (about 1.45 pages of 2 KiB, 1.25 of 4 KiB); a newest-first
    // index took each order at its first leaf and wrote about 2 of 4 KiB.
    for index in ["orders_by_merchant", "orders_by_merchant_status"] {
        let written = pages.get(index).copied().unwrap_or(0.0);
        assert!((0.9..1.75).contains(&written), "{index}: {written:.2} pages per create ({listed})");
    }
    // The table's own leaf once per create, and a new leaf (with its parent and the
    // file's first page) every few creates: about 1.3 pages for rows without the stored
    // 201 body, which no replay can ask for here (no merchant_order_id); 1.58 with it.
    let table = pages.get("orders").copied().unwrap_or(0.0);
    assert!(table < 1.45, "orders: {table:.2} pages per create ({listed})");
    // One table and five indexes, the invoice in the order's row, in 2 KiB pages: about
    // 8.7 pages, 17.4 KiB, in all (9.2 pages with the body kept; with 4 KiB pages 7.7
    // pages, 31 KiB; 12.7 pages before schema 9, 11.2 before schema 10 with invoices a
    // table of their own).
    assert_eq!(page_size, 2048, "a new file's page size");
    let kib = total * page_size as f64 / 1024.0;
    assert!(kib < 20.0, "{kib:.1} KiB ({total:.2} log pages) per create: {listed}");
    assert!(!listed.contains("invoices"), "no invoices table: {listed}");
}

/// Orders in a copy of the database file alone, without its log: what checkpoints have
/// copied into the file so far.
fn orders_in_the_file_itself(path: &Path, dir: &Path) -> i64 {
    let copy = dir.join("file-only.db");
    std::fs::copy(path, &copy).expect("copy the database file");
    let conn = Connection::open(&copy).expect("open the copy");
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_schema WHERE name = 'orders'", [], |row| row.get(0))
        .expect("schema");
    if tables == 0 {
        return 0; // not even the schema has left the log yet
    }
    conn.query_row("SELECT count(*) FROM orders", [], |row| row.get(0)).expect("count")
}

#[test]
fn the_service_copies_its_log_into_the_database_file_by_itself() {
    if common::on_postgres() {
        return;
    }
    for background in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("shop.db");
        let (service, merchant) = open_shop(&path, background);
        let order =
            CreateOrder { currency: "USD".into(), amount: "19.99".parse().expect("amount"), ..Default::default() };
        // 20 orders are about 250 log pages: far below the 1,000 at which a commit would
        // checkpoint by itself.
        for _ in 0..20 {
            service.create_order(&merchant, &order).expect("create");
        }
        let in_file = || orders_in_the_file_itself(&path, dir.path());
        if background {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while in_file() < 20 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            assert_eq!(in_file(), 20, "the thread copied the log into the file");
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1_200));
            assert_eq!(in_file(), 0, "turned off, nothing copies the log before it reaches 1,000 pages");
        }
    }
}

/// The row key coinorder stores an order under, worked out here from RFC 9562's layout
/// rather than by the crate: the id's 48 bits of milliseconds, then the top 15 of its 74
/// further bits (`rand_a`, then the first 3 bits of `rand_b` after the variant).
fn expected_row_key(order_id: &str) -> i64 {
    let hex: String = order_id.chars().filter(|c| *c != '-').collect();
    let ms = i64::from_str_radix(&hex[..12], 16).expect("hex");
    let rand_a = i64::from_str_radix(&hex[13..16], 16).expect("hex");
    let byte8 = i64::from_str_radix(&hex[16..18], 16).expect("hex");
    (ms << 15) | (rand_a << 3) | ((byte8 >> 3) & 0x07)
}

fn rowid_of(conn: &Connection, order_id: &str) -> i64 {
    conn.query_row("SELECT rowid FROM orders WHERE order_id = ?1", [order_id], |row| row.get(0)).expect("the row")
}

/// A copy of the order `order_id`'s row as the order `copy_id` (its `merchant_order_id`
/// too) under `rowid`: what an order of another process in the same millisecond could
/// look like.
fn copy_order_row(conn: &Connection, order_id: &str, copy_id: &str, rowid: i64) {
    let mut statement = conn.prepare("SELECT name FROM pragma_table_info('orders')").expect("columns");
    let columns: Vec<String> =
        statement.query_map([], |row| row.get(0)).expect("columns").collect::<Result<_, _>>().expect("columns");
    let rest: Vec<&str> =
        columns.iter().map(String::as_str).filter(|c| *c != "order_id" && *c != "merchant_order_id").collect();
    let rest = rest.join(", ");
    conn.execute(
        &format!(
            "INSERT INTO orders (rowid, order_id, merchant_order_id, {rest})
             SELECT ?1, ?3, ?3, {rest} FROM orders WHERE order_id = ?2"
        ),
        rusqlite::params![rowid, order_id, copy_id],
    )
    .expect("copy the row");
}

#[test]
fn an_order_is_stored_under_its_ids_row_key_and_found_when_it_is_not() {
    if common::on_postgres() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("shop.db");
    // A clock standing still: every id below is of one millisecond, so each create's
    // order id is two counter steps after the last (its invoice id takes the one between).
    // It stands in the year 2100, later than the clocks of the tests running beside this
    // one: the id maker forgets the earliest millisecond it remembers first, so this one's
    // counter is never forgotten (and redrawn) between two creates.
    let clock = std::sync::Arc::new(coinorder::ManualClock::new(4_102_444_800_000));
    let mut config = Config::new(Environment::Sandbox);
    config.rate_limit = RateLimit::OFF;
    config.clock = clock;
    let service = Service::open(&path, config).expect("open");
    let key = service
        .create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None })
        .expect("key");
    let merchant = service.authenticate(Some(key.plain_key.expose())).expect("authenticate");
    let request =
        CreateOrder { currency: "USD".into(), amount: "19.99".parse().expect("amount"), ..Default::default() };
    let create = || service.create_order(&merchant, &request).expect("create").order.order.order_id;
    let conn = Connection::open(&path).expect("open the file");

    // Stored under its key: Get Order walks the table's B-tree alone.
    let first = create();
    let first_key = expected_row_key(&first);
    assert_eq!(rowid_of(&conn, &first), first_key, "{first}");

    // A row already under the next order's key (another process's order of the same
    // millisecond): the create still succeeds, under a key SQLite picks, and both are
    // found by their own ids, neither taken for the other.
    let blocker = "00000000-0000-4000-8000-00000000abcd";
    copy_order_row(&conn, &first, blocker, first_key + 2);
    let second = create();
    assert_eq!(expected_row_key(&second), first_key + 2, "{second}");
    assert_ne!(rowid_of(&conn, &second), first_key + 2);
    assert_eq!(service.get_order(&merchant, &second).expect("found by its id").order.order_id, second);
    assert_eq!(rowid_of(&conn, blocker), first_key + 2, "the other row is untouched");

    // A row renumbered (as VACUUM may), and another order's row under its key: the id
    // is matched, not only the key, and the id's index finds the order.
    conn.execute("UPDATE orders SET rowid = 7 WHERE order_id = ?1", [&first]).expect("renumber");
    copy_order_row(&conn, &second, "00000000-0000-4000-8000-00000000abce", first_key);
    for id in [&first, &second] {
        let found = service.get_order(&merchant, id).expect("found");
        assert_eq!(&found.order.order_id, id);
        // The writes that read the order first find it too.
        let paid = service.customer_simulate_payment(id).expect("paid");
        assert_eq!(&paid.order.order_id, id);
        assert_eq!(paid.order.status, coinorder::OrderStatus::Paid);
    }
    let copy: String =
        conn.query_row("SELECT status FROM orders WHERE rowid = ?1", [first_key], |row| row.get(0)).expect("the copy");
    assert_eq!(copy, "NEW", "the row under the key was not the one paid");
}

/// The `create_response` a create stored for `order_id`.
fn stored_body(path: &Path, order_id: &str) -> String {
    let conn = Connection::open(path).expect("open raw");
    conn.query_row("SELECT create_response FROM orders WHERE order_id = ?1", [order_id], |row| row.get(0))
        .expect("the order's row")
}

#[test]
fn a_create_keeps_its_201_body_only_when_a_replay_can_find_it() {
    if common::on_postgres() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("shop.db");
    let (service, merchant) = open_shop(&path, false);
    let anonymous =
        CreateOrder { currency: "USD".into(), amount: "19.99".parse().expect("amount"), ..Default::default() };
    let named = CreateOrder { merchant_order_id: Some("cart-9".into()), ..anonymous.clone() };

    // Without a merchant_order_id nothing can ever replay the create: no body is kept.
    let created = service.create_order(&merchant, &anonymous).expect("create");
    assert!(!created.response_body.is_empty(), "the caller still gets the body");
    assert_eq!(stored_body(&path, &created.order.order.order_id), "");
    // A request naming the generated id differs from the stored fingerprint in that very
    // field: it is a duplicate, never a replay of the body not kept.
    let generated = CreateOrder { merchant_order_id: Some(created.order.order.merchant_order_id.clone()), ..anonymous };
    let refused = service.create_order(&merchant, &generated).expect_err("a duplicate");
    assert_eq!(refused.code().as_str(), "ORDER_DUPLICATE", "{refused}");

    // With one, the body is kept whole, and a retry gets it back byte for byte.
    let first = service.create_order(&merchant, &named).expect("create");
    assert_eq!(stored_body(&path, &first.order.order.order_id), first.response_body);
    let again = service.create_order(&merchant, &named).expect("replay");
    assert!(again.replayed);
    assert_eq!(again.response_body, first.response_body);
}
