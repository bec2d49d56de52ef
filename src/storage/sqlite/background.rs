//! The thread that keeps an open SQLite file's write-ahead log short, so that no
//! committing request copies it back into the database file itself.
//!
//! Without it SQLite checkpoints inside the commit that takes the log past 1,000 pages:
//! about one create in 90 then copied the log and waited for the file's fsync, the
//! 14–20 ms p99 of creates. Every host gets it (Rust, C, Python), not only
//! `coinorder serve`; [`crate::config::SqliteOptions::background_checkpoints`] turns it
//! off.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::SqliteStore;

/// How often the thread checkpoints when no commit calls for it sooner (see
/// [`LogBell`]): at idle, the last few writes reach the database file within this time.
const INTERVAL: Duration = Duration::from_millis(500);

/// Rung by a commit that leaves the write-ahead log past [`super::RESTART_PAGES`]: it
/// wakes the checkpoint thread at once rather than at the end of its [`INTERVAL`].
///
/// Creates under NORMAL write about 200,000 log pages a second here (22,000 creates of
/// nine pages each); on a fixed 500 ms interval the log passed the 16,384-page cap
/// ([`super::WAL_CAP_PAGES`]) between two runs, and a commit then copied the whole log
/// itself: 11 % of a create's time (a native profile of 60,000 creates), the very cost
/// the thread is there to take off requests.
#[derive(Debug, Default)]
pub(crate) struct LogBell {
    /// Rung since the thread last woke: ringing again costs a commit one atomic swap, no
    /// lock and no system call.
    rung: AtomicBool,
    /// Whether the thread is to stop; the lock a ring takes so that the thread, between
    /// looking at `rung` and falling asleep, cannot miss it.
    stopped: Mutex<bool>,
    wake: Condvar,
    /// Runs the thread has finished, for tests to count.
    #[cfg(test)]
    runs: std::sync::atomic::AtomicUsize,
}

impl LogBell {
    /// Wakes the checkpoint thread, unless it was woken already and has not run since.
    pub(crate) fn ring(&self) {
        if !self.rung.swap(true, Ordering::AcqRel) {
            let _no_missed_wakeup = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
            self.wake.notify_one();
        }
    }

    /// Tells the thread to stop.
    fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.wake.notify_all();
    }

    /// Waits `timeout`, or until the bell rings if `heeded`: `false` once told to stop.
    fn wait(&self, timeout: Duration, heeded: bool) -> bool {
        let stopped = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        let woken = |stopped: &mut bool| *stopped || (heeded && self.rung.load(Ordering::Acquire));
        let (stopped, _) = self
            .wake
            .wait_timeout_while(stopped, timeout, |stopped| !woken(stopped))
            .unwrap_or_else(|p| p.into_inner());
        if *stopped {
            return false;
        }
        // Cleared before the run: a commit that passes the mark during it rings again.
        self.rung.store(false, Ordering::Release);
        true
    }
}

/// A SQLite store as the service holds it: the store, and its checkpoint thread if any.
#[derive(Debug)]
pub(crate) struct OpenSqlite {
    /// Stopped (and joined) before the store is let go, so the store's last reference,
    /// and with it the closing of its connections, stays with its owner.
    background: Option<BackgroundCheckpoints>,
    store: Arc<SqliteStore>,
}

impl OpenSqlite {
    /// Holds `store`, with its checkpoint thread when `background` is set: checkpoints
    /// are then the thread's from the start, so commits copy the log only past the cap.
    pub(crate) fn new(store: SqliteStore, background: bool) -> crate::error::Result<OpenSqlite> {
        let store = Arc::new(store);
        let background = if background {
            store.hand_checkpoints_over()?;
            let thread = BackgroundCheckpoints::start(Arc::downgrade(&store), store.log_bell(), INTERVAL);
            Some(thread.map_err(|e| {
                crate::error::Error::new(crate::error::ErrorKind::Config(format!(
                    "cannot start the SQLite checkpoint thread: {e}"
                )))
            })?)
        } else {
            None
        };
        Ok(OpenSqlite { background, store })
    }
}

impl Drop for OpenSqlite {
    fn drop(&mut self) {
        self.background.take();
    }
}

impl Deref for OpenSqlite {
    type Target = SqliteStore;

    fn deref(&self) -> &SqliteStore {
        &self.store
    }
}

/// The checkpoint thread: runs [`SqliteStore::checkpoint`] when the log's bell rings, and
/// at least every `interval`, until dropped.
#[derive(Debug)]
struct BackgroundCheckpoints {
    bell: Arc<LogBell>,
    thread: Option<JoinHandle<()>>,
    /// The process the thread runs in: a child forked after the start has no such
    /// thread, and joining its handle there would fail.
    started_by: u32,
}

impl BackgroundCheckpoints {
    fn start(store: Weak<SqliteStore>, bell: Arc<LogBell>, interval: Duration) -> std::io::Result<Self> {
        let signal = Arc::clone(&bell);
        let thread = std::thread::Builder::new().name("coinorder-wal".into()).spawn(move || {
            let mut heed_bell = true;
            while signal.wait(interval, heed_bell) {
                let Some(store) = store.upgrade() else { return };
                // A checkpoint that fails (another process holding the file, a full disk)
                // loses nothing: the log keeps every page, and the next run tries again.
                // One that a reader kept from starting the log over would be kept from it
                // again by the next ring, with writes held up each time: after either,
                // the thread waits its whole interval.
                heed_bell = matches!(store.checkpoint_run(), Ok(run) if !run.held_off);
                #[cfg(test)]
                signal.runs.fetch_add(1, Ordering::SeqCst);
            }
        })?;
        Ok(BackgroundCheckpoints { bell, thread: Some(thread), started_by: std::process::id() })
    }
}

impl Drop for BackgroundCheckpoints {
    fn drop(&mut self) {
        self.bell.stop();
        match self.thread.take() {
            Some(thread) if self.started_by == std::process::id() => {
                let _ = thread.join();
            }
            // A forked child's copy of the service: the thread is the parent's.
            Some(thread) => std::mem::forget(thread),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::error::{Error, ErrorKind, Result};
    use crate::storage::sqlite::tests::{filler_rows, log_pages};
    use crate::storage::{DbResult, StoreOptions};

    /// A store in `dir` (NORMAL, a `filler` table) with checkpoints handed over to a
    /// thread whose interval no test waits for: only the bell can start a run in time.
    fn store_with_thread(dir: &tempfile::TempDir) -> Result<(Arc<SqliteStore>, BackgroundCheckpoints)> {
        let options = StoreOptions {
            sqlite: crate::config::SqliteOptions { synchronous_full: false, ..Default::default() },
            busy_timeout: Duration::from_secs(5),
        };
        let store = Arc::new(SqliteStore::open(&dir.path().join("t.db"), options)?);
        store.write(|c| c.sqlite_for_test().execute_batch("CREATE TABLE filler (bytes BLOB)").db())?;
        store.hand_checkpoints_over()?;
        let thread = BackgroundCheckpoints::start(Arc::downgrade(&store), store.log_bell(), Duration::from_secs(600))
            .map_err(|e| Error::new(ErrorKind::Internal(e.to_string())))?;
        Ok((store, thread))
    }

    #[test]
    fn a_commit_past_the_restart_mark_wakes_the_thread_before_its_interval() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let path = dir.path().join("t.db");
        let (store, thread) = store_with_thread(&dir)?;
        store.write(|c| c.sqlite_for_test().execute(&filler_rows(1_000), []).db())?;
        assert!(!store.log_bell.rung.load(Ordering::SeqCst), "about 2,000 pages: below the mark, no ring");
        store.write(|c| c.sqlite_for_test().execute(&filler_rows(2_500), []).db())?;
        // The thread copies the log and has the next write start it over.
        let started = Instant::now();
        let mut log = i64::MAX;
        while log >= 10 && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(20));
            store.write(|c| c.sqlite_for_test().execute("INSERT INTO filler VALUES (x'00')", []).db())?;
            log = log_pages(&path)?;
        }
        assert!(log < 10, "the thread ran on the bell and the log started over: {log} pages");
        drop(thread);
        Ok(())
    }

    #[test]
    fn after_a_run_a_reader_held_off_the_thread_waits_its_interval_whatever_rings() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::new(ErrorKind::Config(e.to_string())))?;
        let path = dir.path().join("t.db");
        let (store, thread) = store_with_thread(&dir)?;
        let bell = store.log_bell();
        // A reader's snapshot in the log, below the mark; then writes past it ring.
        store.write(|c| c.sqlite_for_test().execute(&filler_rows(1_000), []).db())?;
        let reader = rusqlite::Connection::open(&path).db()?;
        reader.execute_batch("BEGIN").db()?;
        let _rows: i64 = reader.query_row("SELECT count(*) FROM filler", [], |r| r.get(0)).db()?;
        store.write(|c| c.sqlite_for_test().execute(&filler_rows(1_500), []).db())?;
        let started = Instant::now();
        while bell.runs.load(Ordering::SeqCst) == 0 && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(bell.runs.load(Ordering::SeqCst), 1, "the ring started a run, which the reader held off");
        // Every commit past the mark rings again; the thread does not answer before its
        // interval is up (a run now would hold the writes up for the same reader).
        for _ in 0..20 {
            store.write(|c| c.sqlite_for_test().execute("INSERT INTO filler VALUES (x'00')", []).db())?;
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(bell.rung.load(Ordering::SeqCst), "the commits rang");
        assert_eq!(bell.runs.load(Ordering::SeqCst), 1, "and no run answered");
        reader.execute_batch("COMMIT").db()?;
        drop(thread);
        Ok(())
    }
}
