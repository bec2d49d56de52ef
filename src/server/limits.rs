//! What one client may cost the server: every bound of [`Server`](super::Server), in one
//! place, with defaults modelled on Kestrel's and nginx's.

use std::time::Duration;

/// The limits the built-in server enforces, so that no client, however slow, large or
/// numerous its requests, can take the server off the network.
///
/// Every field has a safe default ([`ServerLimits::default`]); `coinorder serve` reads
/// them from the `[limits]` section of its settings file. What a refused client sees:
///
/// | limit | answer |
/// |---|---|
/// | request target, header bytes | 400 `PARAMETERS_MISSING` naming `request target` or `request head`, connection closed |
/// | header count, or a head too large for the HTTP layer to buffer | a bare 431 from the HTTP layer, connection closed |
/// | body above `max_body_bytes` (declared or sent) | 400 `PARAMETERS_MISSING`, `body: at most 65536 bytes` (the API's rule), connection closed unread |
/// | body slower than `min_body_rate` after `body_grace` | 400 `PARAMETERS_MISSING` naming `body`, connection closed |
/// | head not complete within `header_timeout` | connection closed |
/// | client not reading answers for `write_timeout` | connection closed |
/// | `max_connections` open | 503 + `Retry-After`, connection closed |
/// | `max_in_flight` requests waiting or running | 503 + `Retry-After` |
/// | no thread free within `queue_timeout` | 503 + `Retry-After` |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Longest request target (path and query) in bytes. Default 8 KiB.
    pub max_request_target_bytes: usize,
    /// Largest request head (request line and all headers) in bytes; at least 8 KiB.
    /// Default 32 KiB.
    pub max_header_bytes: usize,
    /// Most header lines in one request. Default 100.
    pub max_headers: usize,
    /// Largest body read, in bytes. Default 1 MiB. The API itself refuses bodies over
    /// 64 KiB with its own 400 answer; this bound only stops a client from making the
    /// server read without end.
    pub max_body_bytes: usize,
    /// A request head must be complete within this long of the connection opening or of
    /// the previous answer; so it is also how long an idle keep-alive connection stays
    /// open. Default 20 s.
    pub header_timeout: Duration,
    /// How long a body may take before `min_body_rate` applies. Default 5 s.
    pub body_grace: Duration,
    /// Slowest acceptable body upload, in bytes per second, after `body_grace`. Default
    /// 240 (Kestrel's).
    pub min_body_rate: u32,
    /// A client that reads nothing of an answer for this long is cut off. Default 30 s.
    pub write_timeout: Duration,
    /// Most connections open at once. The server also keeps below the process's
    /// open-file limit, with descriptors to spare; under a flood of connections an accept
    /// may still fail for want of one, which is logged, and the listener backs off and
    /// recovers. Default 1024.
    pub max_connections: usize,
    /// Most requests waiting for a thread or being answered at once. Default 256.
    pub max_in_flight: usize,
    /// Threads answering requests that write (`POST`...). They are apart from the ones
    /// that answer reads (the `threads` of [`Server::spawn`](super::Server::spawn)), so
    /// reads and the payment page go on while writes wait for the database. Default 32:
    /// writes that wait together share one commit (group commit), so more of them in
    /// flight means more orders per fsync. POSTs from 64 connections measured 1.5–1.7k/s
    /// with 2 threads, 2.7–3.0k/s with 8, 4.0–4.4k/s with 16, 4.8–5.1k/s with 32 and
    /// 5.0–5.1k/s with 64 (2 cores, wrk on the same machine).
    pub write_threads: usize,
    /// Longest wait of a request for a free thread. Default 10 s.
    pub queue_timeout: Duration,
    /// On shutdown, how long requests in flight may take to finish. Default 10 s.
    pub shutdown_grace: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_request_target_bytes: 8 * 1024,
            max_header_bytes: 32 * 1024,
            max_headers: 100,
            max_body_bytes: 1024 * 1024,
            header_timeout: Duration::from_secs(20),
            body_grace: Duration::from_secs(5),
            min_body_rate: 240,
            write_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_in_flight: 256,
            write_threads: 32,
            queue_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// File descriptors kept free for everything but client connections: the database and
/// its -wal/-shm files on every pooled connection, the key file, outgoing webhooks and
/// SMTP, the 503 answers of refused connections.
const RESERVED_FILES: usize = 128;

impl ServerLimits {
    /// `max_connections`, lowered to stay clear of the process's open-file limit.
    pub(super) fn connection_cap(&self) -> usize {
        let cap = self.max_connections.max(1);
        match open_file_limit() {
            Some(files) => cap.min(files.saturating_sub(RESERVED_FILES).max(16)),
            None => cap,
        }
    }

    /// The head buffer hyper accepts (it refuses less than 8 KiB).
    pub(super) fn head_buffer(&self) -> usize {
        self.max_header_bytes.max(8 * 1024)
    }
}

/// The soft limit on open files (`ulimit -n`), where the system tells it without
/// `unsafe` code (Linux's `/proc`).
fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files").split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_stays_below_the_open_file_limit() {
        let limits = ServerLimits { max_connections: usize::MAX, ..ServerLimits::default() };
        match open_file_limit() {
            Some(files) => assert!(limits.connection_cap() <= files.saturating_sub(RESERVED_FILES).max(16)),
            None => assert_eq!(limits.connection_cap(), usize::MAX),
        }
        let small = ServerLimits { max_connections: 3, ..ServerLimits::default() };
        assert_eq!(small.connection_cap(), 3);
        assert_eq!(ServerLimits { max_header_bytes: 100, ..ServerLimits::default() }.head_buffer(), 8192);
    }
}
