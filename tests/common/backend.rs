//! Which storage backend the test suite runs on, and raw access to a test's database.
//!
//! Without `COINORDER_TEST_POSTGRES` every test uses a SQLite file in its temporary
//! directory. With it set to a PostgreSQL server's URL (`scripts/test-postgres` starts
//! one), every test directory gets a fresh database of its own on that server instead,
//! and all services of the process share one secret key file (as every host of one
//! database must). [`RawDb`] lets a test reach under the service the way an operator
//! with a SQL shell would (damage a row, hold a lock) on either backend.
//!
//! Included by `tests/common` and `tests/support`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The PostgreSQL server the suite runs against instead of SQLite files, if any.
pub fn postgres_server() -> Option<String> {
    std::env::var("COINORDER_TEST_POSTGRES").ok().filter(|url| !url.is_empty())
}

/// True when the suite runs on PostgreSQL.
pub fn on_postgres() -> bool {
    postgres_server().is_some()
}

/// The database of the test owning `dir`: the SQLite file `coinorder.db` inside it, or on
/// PostgreSQL a database of its own (created on first use; the same one for every call
/// with `dir`).
pub fn db_in(dir: &Path) -> PathBuf {
    match postgres_server() {
        None => dir.join("coinorder.db"),
        Some(server) => PathBuf::from(postgres_database(&server, dir)),
    }
}

/// Creates (once per `dir`) a database named after `dir` on `server`; its URL.
fn postgres_database(server: &str, dir: &Path) -> String {
    static CREATED: OnceLock<Mutex<HashMap<PathBuf, String>>> = OnceLock::new();
    let mut created = CREATED.get_or_init(|| Mutex::new(HashMap::new())).lock().expect("lock");
    if let Some(url) = created.get(dir) {
        return url.clone();
    }
    let name: String = dir
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
        .collect();
    let name = format!("t{}_{}", std::process::id(), name.trim_start_matches('_'));
    let status = std::process::Command::new("psql")
        .args([server, "-v", "ON_ERROR_STOP=1", "-qAtc", &format!("CREATE DATABASE {name}")])
        .status()
        .expect("run psql");
    assert!(status.success(), "CREATE DATABASE {name} on {server}");
    let base = server.rsplit_once('/').map_or(server, |(base, _)| base);
    let url = format!("{base}/{name}");
    created.insert(dir.to_path_buf(), url.clone());
    url
}

/// On PostgreSQL, the secret key file all of this process's services share.
pub fn shared_key_file() -> Option<PathBuf> {
    postgres_server()?;
    static KEY: OnceLock<PathBuf> = OnceLock::new();
    Some(
        KEY.get_or_init(|| {
            let path = std::env::temp_dir().join(format!("coinorder-test-{}.key", std::process::id()));
            // 32 bytes, base64: a fixed key is fine for throwaway test databases.
            std::fs::write(&path, "Y29pbm9yZGVyLXRlc3Qta2V5LTMyLWJ5dGVzLWxvbmc=").expect("write key file");
            path
        })
        .clone(),
    )
}

/// A direct connection to a test's database, beside the service: SQLite through
/// rusqlite, PostgreSQL through the `postgres` crate.
pub enum RawDb {
    /// The SQLite file.
    Sqlite(rusqlite::Connection),
    /// The PostgreSQL database.
    Postgres(Box<postgres::Client>),
}

impl RawDb {
    /// Connects to `db` (a SQLite path or a `postgres://` URL, as [`db_in`] returns).
    pub fn open(db: &Path) -> RawDb {
        let target = db.to_string_lossy();
        if target.starts_with("postgres://") || target.starts_with("postgresql://") {
            let client = postgres::Client::connect(&target, postgres::NoTls).expect("connect to PostgreSQL");
            RawDb::Postgres(Box::new(client))
        } else {
            let conn = rusqlite::Connection::open(db).expect("open the SQLite file");
            conn.busy_timeout(std::time::Duration::from_secs(10)).expect("busy timeout");
            RawDb::Sqlite(conn)
        }
    }

    /// Runs `sql` (one or more statements, no parameters).
    pub fn batch(&mut self, sql: &str) {
        match self {
            RawDb::Sqlite(conn) => conn.execute_batch(sql).unwrap_or_else(|e| panic!("{sql}: {e}")),
            RawDb::Postgres(client) => client.batch_execute(sql).unwrap_or_else(|e| panic!("{sql}: {e}")),
        }
    }

    /// Runs one statement with text parameters written `?1`, `?2`, … (both dialects
    /// accept the SQLite form here; it is rewritten to `$1`, `$2`, … for PostgreSQL).
    /// Returns the number of rows changed.
    pub fn execute(&mut self, sql: &str, params: &[&str]) -> u64 {
        match self {
            RawDb::Sqlite(conn) => {
                let changed = conn
                    .execute(sql, rusqlite::params_from_iter(params.iter()))
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
                changed as u64
            }
            RawDb::Postgres(client) => {
                let sql = sql.replace('?', "$");
                let params: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    params.iter().map(|p| p as &(dyn postgres::types::ToSql + Sync)).collect();
                client.execute(sql.as_str(), &params).unwrap_or_else(|e| panic!("{sql}: {e}"))
            }
        }
    }

    /// The first column of every row of `sql`, read as text (`NULL` as "").
    pub fn strings(&mut self, sql: &str) -> Vec<String> {
        match self {
            RawDb::Sqlite(conn) => {
                let mut statement = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
                let rows = statement
                    .query_map([], |row| {
                        let value: rusqlite::types::Value = row.get(0)?;
                        Ok(match value {
                            rusqlite::types::Value::Null => String::new(),
                            rusqlite::types::Value::Integer(i) => i.to_string(),
                            rusqlite::types::Value::Real(f) => f.to_string(),
                            rusqlite::types::Value::Text(t) => t,
                            rusqlite::types::Value::Blob(b) => String::from_utf8_lossy(&b).into_owned(),
                        })
                    })
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
                rows.collect::<Result<_, _>>().unwrap_or_else(|e| panic!("{sql}: {e}"))
            }
            RawDb::Postgres(client) => {
                let sql = format!("SELECT coalesce(CAST(v AS text), '') FROM ({sql}) AS q(v)");
                let rows = client.query(sql.as_str(), &[]).unwrap_or_else(|e| panic!("{sql}: {e}"));
                rows.iter().map(|row| row.get::<_, String>(0)).collect()
            }
        }
    }

    /// The names of the service's tables.
    pub fn tables(&mut self) -> Vec<String> {
        match self {
            RawDb::Sqlite(_) => self.strings("SELECT name FROM sqlite_master WHERE type = 'table'"),
            RawDb::Postgres(_) => self.strings("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"),
        }
    }

    /// Starts a transaction that keeps every other writer of orders out (readers go on)
    /// until [`RawDb::batch`]`("ROLLBACK")`: SQLite's `BEGIN IMMEDIATE`, PostgreSQL's
    /// `LOCK TABLE orders IN EXCLUSIVE MODE`.
    pub fn hold_write_lock(&mut self) {
        match self {
            RawDb::Sqlite(_) => self.batch("BEGIN IMMEDIATE"),
            RawDb::Postgres(_) => self.batch("BEGIN; LOCK TABLE orders IN EXCLUSIVE MODE"),
        }
    }

    /// Lets a stored value break the schema's own checks for the rest of this
    /// connection's life where the backend allows it (SQLite's `ignore_check_constraints`);
    /// on PostgreSQL the CHECK constraints of `table` are dropped instead.
    pub fn allow_bad_values(&mut self, table: &str) {
        match self {
            RawDb::Sqlite(_) => self.batch("PRAGMA ignore_check_constraints = ON"),
            RawDb::Postgres(_) => {
                let constraints = self.strings(&format!(
                    "SELECT conname FROM pg_constraint WHERE contype = 'c' AND conrelid = '{table}'::regclass"
                ));
                for name in constraints {
                    self.batch(&format!("ALTER TABLE {table} DROP CONSTRAINT \"{name}\""));
                }
            }
        }
    }
}

/// The database called `name` of the test owning `dir`, for a test that uses several: the
/// SQLite file `dir/name`, or on PostgreSQL a database of its own for `dir/name` (created
/// on first use; the same one for every call, see [`db_in`]).
pub fn db_named(dir: &Path, name: &str) -> PathBuf {
    match postgres_server() {
        None => dir.join(name),
        Some(_) => db_in(&dir.join(name)),
    }
}

/// [`db_named`]`(dir, name)` as a `coinorder` command run in `dir` takes it in `--db`:
/// `name` itself on SQLite (a file relative to the working directory), the URL on
/// PostgreSQL.
pub fn db_arg(dir: &Path, name: &str) -> String {
    match postgres_server() {
        None => name.to_string(),
        Some(_) => db_named(dir, name).to_string_lossy().into_owned(),
    }
}

/// True once a service made its database at `db`: the SQLite file exists, or the
/// PostgreSQL database (which [`db_in`] creates empty) holds the service's tables.
pub fn database_created(db: &Path) -> bool {
    let target = db.to_string_lossy();
    if target.starts_with("postgres://") || target.starts_with("postgresql://") {
        RawDb::open(db).tables().iter().any(|table| table == "orders")
    } else {
        // Not RawDb::open: that would create the file it looks for.
        db.exists()
    }
}

/// On PostgreSQL, [`shared_key_file`] for `coinorder` processes: made readable by its
/// owner only, since `coinorder serve` refuses a key file others may read (as it should)
/// and the file is written under the process's umask.
pub fn cli_key_file() -> Option<PathBuf> {
    let path = shared_key_file()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod 600 the key file");
    }
    Some(path)
}
