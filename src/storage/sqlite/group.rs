//! Group commit for SQLite's one writer.
//!
//! A SQLite file has one writer at a time, and under `synchronous=FULL` each commit waits
//! for its own fsync, so writes from many threads queue one fsync each. Here the writes
//! that arrive while another one holds the writer join its transaction: each after the
//! first runs its work in a savepoint of its own (a failing or panicking one is rolled
//! back alone; a failing first one rolls back the transaction, which holds only it), and
//! the last of the group commits once, with one fsync, for all of them. Every member
//! returns only after that commit, so a write that returned `Ok` is durable as before;
//! when the commit fails, every member sees it (and a busy one runs its work again).
//!
//! A group commits when no write waits for the writer any more. Writers that take turns
//! (each back with its next write while the other's commit is in flight) would then
//! split into alternating groups of about half of them each. So when the last group had
//! more members than this one, its last member waits a little for the rest before
//! committing: at most as long as the last commit took, so a lone writer never waits and
//! a wait costs at most one commit's time (PostgreSQL's `commit_delay`, made adaptive).
//! Waits that find nobody (the last group's other member was background work, or a
//! client that paused) make later groups wait only now and then: one in 2, 4, ... 64.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::{is_busy, SqliteConn, BUSY_RETRIES};
use crate::error::{Error, ErrorKind, Result};
use crate::storage::{Conn, DbResult};

/// Most writes sharing one commit: a bound on how long the first of them waits.
const MAX_MEMBERS: usize = 64;

/// How often a member waiting for its group's commit checks that someone is still going
/// to commit it (a member that panicked could have been the last).
const STALE_CHECK: Duration = Duration::from_millis(5);

/// Failed commits remembered for the members still to read them.
const FAILURES_KEPT: usize = 64;

/// The longest a group's last member waits for more members, whatever the last commit
/// took: a slow disk should not make every group slow to close.
const MAX_COMMIT_DELAY: Duration = Duration::from_millis(2);

/// After waits for more members that found nobody, one group in 2, 4, ... up to 2 to
/// this power waits.
const MAX_BACKOFF_SHIFT: u32 = 6;

/// The writer connection and the group whose transaction is open on it, if any.
pub(super) struct Writer {
    pub(super) conn: Connection,
    /// The open group's number.
    open: Option<u64>,
    /// Writes that joined the open group so far.
    members: usize,
    /// The number the next group gets.
    next: u64,
    /// Members of the last group that committed: how many writes take turns.
    last_members: usize,
    /// How long the last commit took: what waiting for more members may cost.
    last_commit: Duration,
    /// Until when the open group's last member waits for more members, once one waited.
    delay_until: Option<Instant>,
    /// The longest that wait may be ([`MAX_COMMIT_DELAY`]; tests lengthen it).
    max_delay: Duration,
    /// Waits for more members in a row that ended with nobody come.
    missed_in_row: u32,
}

/// How the groups ended: every group up to `through` has ended; the failed ones are in
/// `failures` with their error (and whether it was busy).
#[derive(Default)]
struct Ended {
    through: u64,
    failures: VecDeque<(u64, bool, String)>,
    /// Members asleep on `ended_changed`: with none, ending a group wakes no one (a
    /// writer alone would otherwise pay a futex system call per write).
    sleepers: usize,
}

/// The writer, shared by group commit.
pub(super) struct GroupWriter {
    writer: Mutex<Writer>,
    /// Threads waiting for the writer: while there are some, a member leaves the group's
    /// transaction open for them rather than committing.
    waiting: AtomicUsize,
    /// Members that ran their work and wait for their group's commit: while there are
    /// some, the member holding the writer is keeping them waiting too.
    awaiting_commit: AtomicUsize,
    ended: Mutex<Ended>,
    ended_changed: Condvar,
    /// Groups committed by a member that found them left behind ([`STALE_CHECK`]).
    #[cfg(test)]
    left_behind: AtomicUsize,
}

impl std::fmt::Debug for GroupWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupWriter").finish_non_exhaustive()
    }
}

/// Rolls a member's savepoint back if its work unwinds, so a panic never leaves half of
/// a write in the group's transaction. A member alone in its group rolls the whole
/// transaction back instead: no one else would come to end it, and it holds the file's
/// write lock against other processes.
struct MemberGuard<'a> {
    conn: &'a Connection,
    alone: bool,
    armed: bool,
}

impl Drop for MemberGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let undo = if self.alone { "ROLLBACK" } else { "ROLLBACK TO member; RELEASE member" };
            let _ = self.conn.execute_batch(undo);
        }
    }
}

impl GroupWriter {
    /// The writer over `conn`, with no group open.
    pub(super) fn new(conn: Connection) -> GroupWriter {
        GroupWriter {
            writer: Mutex::new(Writer {
                conn,
                open: None,
                members: 0,
                next: 1,
                last_members: 0,
                last_commit: Duration::ZERO,
                delay_until: None,
                max_delay: MAX_COMMIT_DELAY,
                missed_in_row: 0,
            }),
            waiting: AtomicUsize::new(0),
            awaiting_commit: AtomicUsize::new(0),
            ended: Mutex::new(Ended::default()),
            ended_changed: Condvar::new(),
            #[cfg(test)]
            left_behind: AtomicUsize::new(0),
        }
    }

    /// True while another write of this process waits for the writer, or for the commit
    /// of the group open on it: background work holding the writer should end its part
    /// soon so that the group commits (or the waiting write gets in).
    pub(super) fn wanted(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0 || self.awaiting_commit.load(Ordering::SeqCst) > 0
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `work` as a member of a group's transaction and returns once that
    /// transaction committed (or `work` failed, its own changes rolled back). A database
    /// busy past `busy_timeout` is reported; short of that, busy groups are tried again.
    pub(super) fn write<T>(&self, busy_timeout: Duration, mut work: impl FnMut(&Conn<'_>) -> Result<T>) -> Result<T> {
        let deadline = Instant::now() + busy_timeout;
        loop {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let mut writer = self.lock();
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            if let (Some(group), true) = (writer.open, writer.conn.is_autocommit()) {
                // The group's transaction is gone: its only member unwound and rolled it
                // back. It ended without committing anything.
                let _nothing_to_report = self.end(&mut writer, group, Ok(()));
            }
            let group = match writer.open {
                Some(group) => group,
                None => begin(&mut writer, busy_timeout, deadline)?,
            };
            writer.members += 1;
            let alone = writer.members == 1;
            let outcome = run_member(&writer.conn, alone, &mut work);
            // Work that met a busy database (its changes rolled back) runs again.
            let run_again = matches!(&outcome, Err(error) if is_busy(error)) && Instant::now() < deadline;
            if alone && outcome.is_err() {
                // The group's first member failed and rolled the whole transaction back:
                // the group ended with nothing in it, and the next write opens another.
                if !writer.conn.is_autocommit() {
                    let _ = writer.conn.execute_batch("ROLLBACK");
                }
                let _nothing_to_report = self.end(&mut writer, group, Ok(()));
                drop(writer);
                if run_again {
                    continue;
                }
                return outcome;
            }
            let others_queued = self.waiting.load(Ordering::SeqCst) > 0 && writer.members < MAX_MEMBERS;
            // Others are queued for the writer: the last of them commits for all. Or the
            // writes that took turns with this group's are likely on their way: wait a
            // little for them, and commit only if none came.
            let delay = if others_queued || outcome.is_err() || writer.members >= writer.last_members {
                None
            } else {
                commit_delay(&mut writer)
            };
            if others_queued || delay.is_some() {
                let members = writer.members;
                drop(writer);
                if run_again {
                    continue;
                }
                let value = outcome?;
                self.awaiting_commit.fetch_add(1, Ordering::SeqCst);
                let ended = match delay {
                    Some(until) => self.wait_for_more(group, members, until),
                    None => self.wait_for(group),
                };
                self.awaiting_commit.fetch_sub(1, Ordering::SeqCst);
                match ended {
                    Ok(()) => return Ok(value),
                    Err(error) if is_busy(&error) && Instant::now() < deadline => continue,
                    Err(error) => return Err(error),
                }
            }
            let committed = self.commit(&mut writer, group);
            drop(writer);
            if run_again {
                continue;
            }
            let value = outcome?;
            match committed {
                Ok(()) => return Ok(value),
                Err(error) if is_busy(&error) && Instant::now() < deadline => continue,
                Err(error) => return Err(error),
            }
        }
    }

    /// Runs `work` on the writer connection outside any transaction, between two groups:
    /// a group open now is committed first (its members have all run their work, since
    /// they run while holding the writer). Writes wait meanwhile, so `work` must be short.
    pub(super) fn between_groups<T>(&self, work: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let mut writer = self.lock();
        if let Some(group) = writer.open {
            if writer.conn.is_autocommit() {
                // Its only member unwound and rolled it back.
                let _nothing_to_report = self.end(&mut writer, group, Ok(()));
            } else {
                // A failed commit is reported to the group's members, who try again.
                let _reported_to_members = self.commit(&mut writer, group);
            }
        }
        work(&mut writer.conn)
    }

    /// Runs `work` alone in a transaction if the writer is free right now, else `None`.
    pub(super) fn try_write<T>(
        &self,
        busy_timeout: Duration,
        work: impl FnOnce(&Conn<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        let writer = match self.writer.try_lock() {
            Ok(writer) => writer,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(None),
        };
        if writer.open.is_some() {
            // A group is between members: not free right now.
            return Ok(None);
        }
        let conn = &writer.conn;
        conn.busy_timeout(Duration::ZERO).db()?;
        let outcome = (|| {
            conn.prepare_cached("BEGIN IMMEDIATE").db()?.execute([]).db()?;
            match work(&Conn::Sqlite(SqliteConn(conn, None))) {
                Ok(value) => {
                    conn.prepare_cached("COMMIT").db()?.execute([]).db()?;
                    Ok(value)
                }
                Err(error) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    Err(error)
                }
            }
        })();
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        conn.busy_timeout(busy_timeout).db()?;
        drop(writer);
        match outcome {
            Err(error) if is_busy(&error) => Ok(None),
            other => other.map(Some),
        }
    }

    /// Commits group `group` (open on `writer`) and tells its members how it ended.
    fn commit(&self, writer: &mut Writer, group: u64) -> Result<()> {
        let started = Instant::now();
        let committed = writer.conn.prepare_cached("COMMIT").db().and_then(|mut commit| commit.execute([]).db());
        writer.last_commit = started.elapsed();
        writer.last_members = writer.members;
        if committed.is_err() && !writer.conn.is_autocommit() {
            let _ = writer.conn.execute_batch("ROLLBACK");
        }
        self.end(writer, group, committed.map(|_| ()))
    }

    /// Closes group `group` on `writer` and tells its members how it ended.
    fn end(&self, writer: &mut Writer, group: u64, committed: Result<()>) -> Result<()> {
        writer.open = None;
        writer.members = 0;
        writer.delay_until = None;
        let mut ended = self.ended.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        ended.through = ended.through.max(group);
        if let Err(error) = &committed {
            ended.failures.push_back((group, is_busy(error), error.to_string()));
            if ended.failures.len() > FAILURES_KEPT {
                ended.failures.pop_front();
            }
        }
        let sleepers = ended.sleepers;
        drop(ended);
        if sleepers > 0 {
            self.ended_changed.notify_all();
        }
        committed
    }

    /// Waits, as the last of group `group`'s `members` so far, until `until` for more
    /// members; then commits the group, unless it ended meanwhile or a write queued for
    /// the writer will join it (the last to join commits).
    fn wait_for_more(&self, group: u64, members: usize, until: Instant) -> Result<()> {
        let mut ended = self.ended.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while ended.through < group {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            ended.sleepers += 1;
            let (next, _) =
                self.ended_changed.wait_timeout(ended, left).unwrap_or_else(|poisoned| poisoned.into_inner());
            ended = next;
            ended.sleepers -= 1;
        }
        drop(ended);
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut writer = self.lock();
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        let still_open = writer.open == Some(group);
        let nobody_came = still_open && writer.members == members;
        writer.missed_in_row = if nobody_came { writer.missed_in_row.saturating_add(1) } else { 0 };
        // Commits whether or not others came: one that came while this member queued for
        // the writer saw it queued (in `waiting`) and left the group open for it.
        if still_open && self.waiting.load(Ordering::SeqCst) == 0 && !writer.conn.is_autocommit() {
            return self.commit(&mut writer, group);
        }
        // One queued now commits the group, or the group already ended: read how.
        drop(writer);
        self.wait_for(group)
    }

    /// Waits until group `group` ended; its commit's outcome.
    fn wait_for(&self, group: u64) -> Result<()> {
        let mut ended = self.ended.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        loop {
            if ended.through >= group {
                return match ended.failures.iter().find(|(failed, ..)| *failed == group) {
                    None => Ok(()),
                    Some((_, busy, text)) => Err(group_failed(*busy, text)),
                };
            }
            ended.sleepers += 1;
            let (next, timeout) =
                self.ended_changed.wait_timeout(ended, STALE_CHECK).unwrap_or_else(|poisoned| poisoned.into_inner());
            ended = next;
            ended.sleepers -= 1;
            if timeout.timed_out() {
                // Nobody took the writer since: the member that was to commit is gone
                // (it panicked). Commit the group from here.
                drop(ended);
                let writer = match self.writer.try_lock() {
                    Ok(writer) => Some(writer),
                    Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
                    Err(std::sync::TryLockError::WouldBlock) => None,
                };
                if let Some(mut writer) = writer {
                    if writer.open == Some(group) && self.waiting.load(Ordering::SeqCst) == 0 {
                        #[cfg(test)]
                        self.left_behind.fetch_add(1, Ordering::SeqCst);
                        let _ = self.commit(&mut writer, group);
                    }
                }
                ended = self.ended.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        }
    }
}

/// Opens a group: `BEGIN IMMEDIATE`, waiting for another process's lock up to
/// `deadline`. Its number.
fn begin(writer: &mut Writer, busy_timeout: Duration, deadline: Instant) -> Result<u64> {
    let mut attempt = 0;
    loop {
        let begun = writer.conn.prepare_cached("BEGIN IMMEDIATE").db().and_then(|mut begin| begin.execute([]).db());
        match begun {
            Ok(_) => break,
            Err(error) if is_busy(&error) && attempt < BUSY_RETRIES && Instant::now() < deadline => {
                attempt += 1;
                let left = deadline.saturating_duration_since(Instant::now());
                writer.conn.busy_timeout(left.max(Duration::from_millis(1))).db()?;
            }
            Err(error) => {
                if attempt > 0 {
                    writer.conn.busy_timeout(busy_timeout).db()?;
                }
                return Err(error);
            }
        }
    }
    if attempt > 0 {
        writer.conn.busy_timeout(busy_timeout).db()?;
    }
    let group = writer.next;
    writer.next += 1;
    writer.open = Some(group);
    writer.members = 0;
    Ok(group)
}

/// Until when the open group's last member waits for more members, if it should wait:
/// one deadline per group, at most the last commit's time after the first wait began,
/// and fewer groups wait while waits find nobody.
fn commit_delay(writer: &mut Writer) -> Option<Instant> {
    let group = writer.open?;
    // After waits that found nobody, only every 2nd, 4th, ... group waits: the writes
    // that shared the last group were not taking turns (a background batch, a client
    // that paused).
    if group % (1 << writer.missed_in_row.min(MAX_BACKOFF_SHIFT)) != 0 {
        return None;
    }
    let now = Instant::now();
    let until = *writer.delay_until.get_or_insert_with(|| now + writer.last_commit.min(writer.max_delay));
    (until > now).then_some(until)
}

/// Runs one member's `work` in the open transaction: kept if it succeeds, rolled back
/// alone if it fails or unwinds.
///
/// A member after the first runs in a savepoint of its own, so that undoing it keeps the
/// members before it. The first (`alone`) runs without one: the transaction holds nothing
/// else, so rolling all of it back undoes exactly this member's work. So each group's
/// first write (with one client thread, every write) is spared the savepoint's cost:
/// SQLite copies every page the work changes a first time into the savepoint's journal
/// (about 6 % of a create's instructions).
fn run_member<T>(conn: &Connection, alone: bool, work: &mut impl FnMut(&Conn<'_>) -> Result<T>) -> Result<T> {
    if !alone {
        conn.prepare_cached("SAVEPOINT member").db()?.execute([]).db()?;
    }
    let mut guard = MemberGuard { conn, alone, armed: true };
    let outcome = work(&Conn::Sqlite(SqliteConn(conn, None)));
    guard.armed = false;
    match (outcome, alone) {
        (Ok(value), true) => Ok(value),
        (Ok(value), false) => {
            conn.prepare_cached("RELEASE member").db()?.execute([]).db()?;
            Ok(value)
        }
        (Err(error), true) => {
            if !conn.is_autocommit() {
                conn.execute_batch("ROLLBACK").db()?;
            }
            Err(error)
        }
        (Err(error), false) => {
            conn.execute_batch("ROLLBACK TO member; RELEASE member").db()?;
            Err(error)
        }
    }
}

/// The error a member of a failed group returns: busy ones may be tried again.
fn group_failed(busy: bool, text: &str) -> Error {
    Error::new(ErrorKind::Storage(crate::error::StorageError::new(busy, GroupCommitFailed(text.to_string()))))
}

/// The commit of a write's group failed (the write did not happen).
#[derive(Debug, thiserror::Error)]
#[error("the shared commit failed: {0}")]
struct GroupCommitFailed(String);

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};

    use super::*;

    /// A group writer over a fresh file with one table, `synchronous=FULL`.
    fn writer() -> (tempfile::TempDir, Arc<GroupWriter>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let conn = Connection::open(dir.path().join("g.db")).expect("open");
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; CREATE TABLE t (n INTEGER)")
            .expect("schema");
        (dir, Arc::new(GroupWriter::new(conn)))
    }

    fn insert(conn: &Conn<'_>, n: i64) -> Result<()> {
        let Conn::Sqlite(sqlite) = conn else { return Err(Error::new(ErrorKind::Internal("not SQLite".into()))) };
        sqlite.0.execute("INSERT INTO t (n) VALUES (?1)", [n]).db().map(|_| ())
    }

    fn stored(writer: &GroupWriter) -> Vec<i64> {
        let guard = writer.lock();
        let mut statement = guard.conn.prepare("SELECT n FROM t ORDER BY n").expect("prepare");
        let rows = statement.query_map([], |row| row.get(0)).expect("query");
        rows.collect::<std::result::Result<_, _>>().expect("rows")
    }

    /// `threads` threads each write `per_thread` times at once; what each write returned.
    fn race(
        writer: &Arc<GroupWriter>,
        threads: usize,
        per_thread: usize,
        work: impl Fn(&Conn<'_>, i64) -> Result<()> + Send + Sync + 'static,
    ) -> Vec<(i64, bool)> {
        let work = Arc::new(work);
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (writer, work, barrier) = (Arc::clone(writer), Arc::clone(&work), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    (0..per_thread)
                        .map(|i| {
                            let n = (t * per_thread + i) as i64;
                            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                writer.write(Duration::from_secs(5), |conn| work(conn, n))
                            }));
                            (n, matches!(outcome, Ok(Ok(()))))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("thread")).collect()
    }

    /// Polls `wanted` from inside a write until it holds or a few seconds pass.
    fn becomes_wanted(writer: &GroupWriter) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if writer.wanted() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    #[test]
    fn a_write_holding_the_writer_sees_another_one_wait_for_it() {
        let (_dir, writer) = writer();
        assert!(!writer.wanted(), "nobody waits yet");
        let started = Arc::new(Barrier::new(2));
        let other = {
            let (writer, started) = (Arc::clone(&writer), Arc::clone(&started));
            std::thread::spawn(move || {
                started.wait();
                writer.write(Duration::from_secs(5), |conn| insert(conn, 2))
            })
        };
        let saw_it = writer.write(Duration::from_secs(5), |conn| {
            insert(conn, 1)?;
            started.wait();
            Ok(becomes_wanted(&writer))
        });
        assert!(matches!(saw_it, Ok(true)), "the other write waiting for the writer: {saw_it:?}");
        assert!(matches!(other.join().expect("thread"), Ok(())));
        assert_eq!(stored(&writer), vec![1, 2]);
        assert!(!writer.wanted(), "nobody waits any more");
    }

    /// Starts a write of `n` on a thread of its own that holds the writer until another
    /// write waits for it, and returns once it holds it: the next write joins its group.
    fn first_of_a_group(writer: &Arc<GroupWriter>, n: i64) -> std::thread::JoinHandle<Result<()>> {
        let holding = Arc::new(Barrier::new(2));
        let first = {
            let (writer, holding) = (Arc::clone(writer), Arc::clone(&holding));
            std::thread::spawn(move || {
                writer.write(Duration::from_secs(5), |conn| {
                    insert(conn, n)?;
                    holding.wait();
                    if !becomes_wanted(&writer) {
                        return Err(Error::new(ErrorKind::Internal("the second write never waited".into())));
                    }
                    Ok(())
                })
            })
        };
        holding.wait();
        first
    }

    #[test]
    fn a_write_that_joined_a_group_sees_its_members_wait_for_the_commit() {
        let (_dir, writer) = writer();
        // The first write keeps the writer until the second waits for it, so the second
        // joins the first's group, and the first waits for that group's commit.
        let first = first_of_a_group(&writer, 1);
        let saw_it = writer.write(Duration::from_secs(5), |conn| {
            insert(conn, 2)?;
            Ok(becomes_wanted(&writer))
        });
        assert!(matches!(saw_it, Ok(true)), "the first write waiting for the group's commit: {saw_it:?}");
        assert!(matches!(first.join().expect("thread"), Ok(())));
        assert_eq!(stored(&writer), vec![1, 2]);
    }

    #[test]
    fn concurrent_writes_all_commit_and_share_commits() {
        let (_dir, writer) = writer();
        let outcomes = race(&writer, 8, 40, insert);
        assert!(outcomes.iter().all(|(_, ok)| *ok), "every write succeeds");
        assert_eq!(stored(&writer), (0..320).collect::<Vec<i64>>());
        let groups = writer.lock().next - 1;
        assert!(groups < 320, "writes queued behind a commit join the next one: {groups} commits for 320 writes");
    }

    /// Makes the next group's last member wait up to `delay` for more members, as after
    /// a group of `members` whose commit took `delay`.
    fn after_a_group_of(writer: &GroupWriter, members: usize, delay: Duration) {
        let mut guard = writer.lock();
        (guard.last_members, guard.last_commit, guard.max_delay) = (members, delay, delay);
    }

    /// A write waits for more members, another comes: one commit for both.
    fn a_write_arriving_joins(writer: &Arc<GroupWriter>) {
        after_a_group_of(writer, 2, Duration::from_secs(30));
        let groups_before = writer.lock().next;
        let first = {
            let writer = Arc::clone(writer);
            std::thread::spawn(move || writer.write(Duration::from_secs(5), |conn| insert(conn, 101)))
        };
        // The first write ran and now waits for a second member, its transaction open.
        let deadline = Instant::now() + Duration::from_secs(10);
        while writer.awaiting_commit.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(writer.awaiting_commit.load(Ordering::SeqCst), 1, "the first write waits for more members");
        let started = Instant::now();
        writer.write(Duration::from_secs(5), |conn| insert(conn, 102)).expect("the second write");
        assert!(matches!(first.join().expect("thread"), Ok(())));
        assert!(started.elapsed() < Duration::from_secs(10), "the group of two commits at once, not after the wait");
        assert_eq!(writer.lock().next, groups_before + 1, "one commit for both writes");
        assert_eq!(writer.lock().last_members, 2);
    }

    #[test]
    fn a_write_arriving_while_the_last_member_waits_for_more_shares_its_commit() {
        let (_dir, writer) = writer();
        a_write_arriving_joins(&writer);
        assert_eq!(stored(&writer), vec![101, 102]);
    }

    #[test]
    fn a_member_waiting_for_more_commits_the_group_one_joined_while_it_queued() {
        let (_dir, writer) = writer();
        after_a_group_of(&writer, 3, Duration::from_millis(100));
        let first = {
            let writer = Arc::clone(&writer);
            std::thread::spawn(move || writer.write(Duration::from_secs(5), |conn| insert(conn, 1)))
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while writer.awaiting_commit.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(writer.awaiting_commit.load(Ordering::SeqCst), 1, "the first write waits for more members");
        // The second write joins, and holds the writer until the first one's wait ended
        // and it queued for the writer: the second then leaves the group to it.
        writer
            .write(Duration::from_secs(5), |conn| {
                insert(conn, 2)?;
                while writer.waiting.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            })
            .expect("the second write");
        assert!(matches!(first.join().expect("thread"), Ok(())));
        assert_eq!(stored(&writer), vec![1, 2]);
        assert_eq!(writer.lock().last_members, 2, "one commit for both");
        assert_eq!(writer.left_behind.load(Ordering::SeqCst), 0, "the group was committed, not left behind");
    }

    #[test]
    fn a_member_waiting_for_more_commits_alone_when_none_come() {
        let (_dir, writer) = writer();
        after_a_group_of(&writer, 3, Duration::from_millis(300));
        let started = Instant::now();
        writer.write(Duration::from_secs(5), |conn| insert(conn, 1)).expect("the write");
        assert!(started.elapsed() >= Duration::from_millis(300), "it waited for the others first");
        assert_eq!(stored(&writer), vec![1]);
        assert_eq!(writer.lock().last_members, 1, "the next group expects one member");
        // A lone writer then never waits: each write commits at once.
        writer.lock().max_delay = Duration::from_secs(30);
        let started = Instant::now();
        for n in 2..=5 {
            writer.write(Duration::from_secs(5), |conn| insert(conn, n)).expect("a lone write");
        }
        assert!(started.elapsed() < Duration::from_secs(10), "lone writes commit without waiting");
        assert_eq!(stored(&writer), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn after_waits_that_found_nobody_fewer_and_fewer_groups_wait() {
        let (_dir, writer) = writer();
        let delay = Duration::from_millis(200);
        // Each write follows a group of three, as if two others took turns with it; none
        // comes. A write alone is group n, n = 1, 2, ...
        let waited: Vec<bool> = (1..=8)
            .map(|n| {
                after_a_group_of(&writer, 3, delay);
                let started = Instant::now();
                writer.write(Duration::from_secs(5), |conn| insert(conn, n)).expect("the write");
                started.elapsed() >= delay
            })
            .collect();
        // Group 1 waits in vain, then only even groups wait (2, in vain), then every
        // fourth (4, in vain), then every eighth (8).
        assert_eq!(waited, vec![true, true, false, true, false, false, false, true]);
        assert_eq!(writer.lock().missed_in_row, 4);
        assert_eq!(stored(&writer), (1..=8).collect::<Vec<i64>>());
        assert_eq!(writer.lock().last_members, 1);
        // A wait that someone joins starts over: every group may wait again. (Lone
        // writes, which do not wait, bring the groups up to 16, the next to wait.)
        while writer.lock().next % 16 != 0 {
            writer.write(Duration::from_secs(5), |conn| insert(conn, 0)).expect("a lone write");
        }
        a_write_arriving_joins(&writer);
        assert_eq!(writer.lock().missed_in_row, 0);
    }

    #[test]
    fn a_failing_write_is_rolled_back_alone() {
        let (_dir, writer) = writer();
        let outcomes = race(&writer, 6, 30, |conn, n| {
            insert(conn, n)?;
            if n % 3 == 0 {
                return Err(Error::invalid("n", "a multiple of 3"));
            }
            Ok(())
        });
        let expected: Vec<i64> = (0..180).filter(|n| n % 3 != 0).collect();
        assert_eq!(outcomes.iter().filter(|(_, ok)| *ok).count(), expected.len());
        assert_eq!(stored(&writer), expected);
    }

    /// Whether `conn` is inside the savepoint a member after a group's first runs in.
    fn in_member_savepoint(conn: &Conn<'_>) -> bool {
        let Conn::Sqlite(sqlite) = conn else { return false };
        // Rolling back to a savepoint that holds no changes yet changes nothing.
        sqlite.0.execute_batch("ROLLBACK TO member").is_ok()
    }

    #[test]
    fn a_groups_first_write_runs_without_a_savepoint_and_a_failing_one_ends_the_group() {
        let (_dir, writer) = writer();
        // Alone: no savepoint, and its failure rolls back the whole (its own) transaction.
        let failed = writer.write(Duration::from_secs(5), |conn| -> Result<()> {
            assert!(!in_member_savepoint(conn), "the first member needs no savepoint");
            insert(conn, 1)?;
            Err(Error::invalid("n", "refused after its insert"))
        });
        assert!(failed.is_err());
        {
            let guard = writer.lock();
            assert!(guard.open.is_none(), "the failed group ended");
            assert!(guard.conn.is_autocommit(), "its transaction is gone");
        }
        writer.write(Duration::from_secs(5), |conn| insert(conn, 2)).expect("the next write");
        assert_eq!(stored(&writer), vec![2]);

        // A second member of a group runs in a savepoint: the first keeps the group open
        // (a member waits to join), and undoing the second keeps the first's work.
        let first = first_of_a_group(&writer, 3);
        let second = writer.write(Duration::from_secs(5), |conn| -> Result<()> {
            assert!(in_member_savepoint(conn), "a later member runs in a savepoint");
            insert(conn, 4)?;
            Err(Error::invalid("n", "refused after its insert"))
        });
        assert!(second.is_err());
        first.join().expect("first thread").expect("the first write");
        assert_eq!(stored(&writer), vec![2, 3]);
    }

    #[test]
    fn a_write_that_panics_alone_releases_the_file_at_once() {
        let (dir, writer) = writer();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            writer.write(Duration::from_secs(5), |conn| -> Result<()> {
                insert(conn, 1)?;
                panic!("a bug halfway through a write");
            })
        }));
        assert!(panicked.is_err());
        // Another process can take the write lock right away.
        let other = Connection::open(dir.path().join("g.db")).expect("open");
        other.execute_batch("BEGIN IMMEDIATE; ROLLBACK").expect("the write lock is free");
        writer.write(Duration::from_secs(5), |conn| insert(conn, 2)).expect("the next write");
        assert_eq!(stored(&writer), vec![2]);
    }

    #[test]
    fn a_panicking_write_leaves_nothing_and_blocks_no_one() {
        let (_dir, writer) = writer();
        let outcomes = race(&writer, 4, 25, |conn, n| {
            insert(conn, n)?;
            assert!(n % 10 != 7, "write {n} panics halfway");
            Ok(())
        });
        let expected: Vec<i64> = (0..100).filter(|n| n % 10 != 7).collect();
        assert_eq!(outcomes.iter().filter(|(_, ok)| *ok).count(), expected.len());
        assert_eq!(stored(&writer), expected);
        assert!(writer.lock().open.is_none(), "no group left open");
    }
}
