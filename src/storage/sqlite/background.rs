//! The thread that keeps an open SQLite file's write-ahead log short, so that no
//! committing request copies it back into the database file itself.
//!
//! Without it SQLite checkpoints inside the commit that takes the log past 1,000 pages:
//! about one create in 90 then copied the log and waited for the file's fsync, the
//! 14–20 ms p99 of creates. Every host gets it (Rust, C, Python), not only
//! `coinorder serve`; [`crate::config::SqliteOptions::background_checkpoints`] turns it
//! off.

use std::ops::Deref;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::SqliteStore;

/// How often the thread checkpoints: as `coinorder serve`'s checkpoint worker. Creates
/// under FULL (about 2,000/s here, 11.6 log pages each) write about 12,000 pages in that
/// time, below the 16,384-page cap past which a commit checkpoints itself; the fastest
/// NORMAL bursts (about 5,000/s) pass it, so there one commit in a few thousand still
/// does.
const INTERVAL: Duration = Duration::from_millis(500);

/// A SQLite store as the service holds it: the store, and its checkpoint thread if any.
#[derive(Debug)]
pub(crate) struct OpenSqlite {
    /// Stopped (and joined) before the store is let go, so the store's last reference,
    /// and with it the closing of its connections, stays with its owner.
    background: Option<BackgroundCheckpoints>,
    store: Arc<SqliteStore>,
}

impl OpenSqlite {
    /// Holds `store`, with its checkpoint thread when `background` is set.
    pub(crate) fn new(store: SqliteStore, background: bool) -> std::io::Result<OpenSqlite> {
        let store = Arc::new(store);
        let background = if background { Some(BackgroundCheckpoints::start(Arc::downgrade(&store))?) } else { None };
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

/// The checkpoint thread: runs [`SqliteStore::checkpoint`] every [`INTERVAL`] until
/// dropped.
#[derive(Debug)]
struct BackgroundCheckpoints {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundCheckpoints {
    fn start(store: Weak<SqliteStore>) -> std::io::Result<BackgroundCheckpoints> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("coinorder-wal".into()).spawn(move || {
            let (stopped, wake) = &*signal;
            loop {
                let guard = stopped.lock().unwrap_or_else(|p| p.into_inner());
                let (guard, _) =
                    wake.wait_timeout_while(guard, INTERVAL, |stop| !*stop).unwrap_or_else(|p| p.into_inner());
                if *guard {
                    return;
                }
                drop(guard);
                let Some(store) = store.upgrade() else { return };
                // A checkpoint that fails (another process holding the file, a full disk)
                // loses nothing: the log keeps every page, and the next run tries again.
                let _ = store.checkpoint();
            }
        })?;
        Ok(BackgroundCheckpoints { stop, thread: Some(thread) })
    }
}

impl Drop for BackgroundCheckpoints {
    fn drop(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
