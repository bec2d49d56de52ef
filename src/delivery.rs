//! Webhook delivery from the event outbox (DESIGN §7), per the Standard Webhooks spec,
//! and what both senders share: [`Outbox`], the lease length, how an attempt ended
//! ([`Outcome`]) and the retry schedule that settles it ([`Service::settle_attempt`]).
//! The e-mail sender (`mail.rs`) goes through the same claim and finish.
//!
//! [`Service::deliver_due`] leases due events (so two workers or processes never send
//! the same attempt at once, and a worker that dies leaves its lease to run out), sends
//! them in parallel over one keep-alive HTTP agent, logs every attempt, and schedules
//! retries: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h (±20 % jitter;
//! `Retry-After` honoured on 429/503), then failed. 410 Gone stops at once. Delivery is at
//! least once: receivers dedupe by `webhook-id`, which is the event id.

use std::fmt;
use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;

use crate::http_client::DeadlineResolver;
use serde::Serialize;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{DefaultConnector, NextTimeout};

use crate::payments::Event;
use crate::time::Timestamp;

/// How much of a response body the attempt log keeps.
pub const RESPONSE_EXCERPT_BYTES: usize = 1024;

/// How much of a response body is read so the connection can be reused.
pub(crate) const RESPONSE_READ_LIMIT: u64 = 64 * 1024;

/// Longest wait a `Retry-After` header can ask for.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Where an event's webhook stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Waiting for its next attempt.
    Pending,
    /// A 2xx came back.
    Delivered,
    /// Given up: schedule exhausted, 410 Gone, or a refused target.
    Failed,
    /// Neither the order nor its key has a webhook URL; redeliver after setting one.
    NoTarget,
}

impl DeliveryState {
    /// `pending`, `delivered`, `failed` or `no_target`.
    pub const fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
            DeliveryState::NoTarget => "no_target",
        }
    }

    /// Every state, in the order of a delivery's life.
    pub const ALL: [DeliveryState; 4] =
        [DeliveryState::Pending, DeliveryState::Delivered, DeliveryState::Failed, DeliveryState::NoTarget];

    /// The state named `text` (as [`DeliveryState::as_str`] writes it).
    pub fn parse(text: &str) -> Option<Self> {
        DeliveryState::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

impl fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One logged webhook attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WebhookAttempt {
    /// 1 for the first attempt of the current schedule.
    pub attempt: i64,
    /// Where it was sent, with any password and query values shown as `***`
    /// ([`redact_url`](crate::redact_url)).
    pub url: String,
    /// When it started.
    pub started_at: Timestamp,
    /// The HTTP status, if a response came back.
    pub status: Option<u16>,
    /// How long it took.
    pub latency_ms: i64,
    /// The first KiB of the response body.
    pub response_excerpt: Option<String>,
    /// What went wrong, if anything.
    pub error: Option<String>,
}

/// An event with its delivery state and attempt log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventDelivery {
    /// The event.
    pub event: Event,
    /// Where its webhook stands.
    pub state: DeliveryState,
    /// Attempts made in the current schedule.
    pub attempts: i64,
    /// When the next attempt is due (if pending).
    pub next_attempt_at: Timestamp,
    /// When a 2xx came back.
    pub delivered_at: Option<Timestamp>,
    /// The last failure.
    pub last_error: Option<String>,
    /// Every attempt, oldest first.
    pub log: Vec<WebhookAttempt>,
}

/// What one [`Service::deliver_due`](crate::Service::deliver_due) call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Events leased and attempted.
    pub attempted: usize,
    /// Answered 2xx.
    pub delivered: usize,
    /// Failed this time, retried later.
    pub retrying: usize,
    /// Given up for good.
    pub failed: usize,
    /// Had no webhook URL.
    pub no_target: usize,
}

impl DeliveryReport {
    pub(crate) fn count(&mut self, settled: &Settled) {
        match settled {
            Settled::Done => self.delivered += 1,
            Settled::Retry { .. } => self.retrying += 1,
            Settled::Failed(_) => self.failed += 1,
            Settled::NoTarget => self.no_target += 1,
        }
    }
}

/// The two outboxes: the storage layer keeps each in its own table, and one engine
/// (claim, finish, requeue) works on both. It is declared here rather than beside that
/// engine because the storage module exports only what `storage/mod.rs` re-exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outbox {
    /// Webhooks on the event outbox, leased as senders come free.
    Webhooks,
    /// Payment-link e-mails, leased one at a time.
    Emails,
}

impl Outbox {
    /// How long a lease taken now must last, in milliseconds: as many timeouts as the
    /// sends it covers can take one after another, plus 30 s of margin for the work
    /// around them. A lease that ran out while its message still waits in this process
    /// would let another deliverer send it too.
    pub(crate) fn lease_ms(self, timeout: Duration) -> i64 {
        let timeouts = match self {
            // An event is leased only for a sender about to send it: at most one waits
            // behind each sender's attempt in flight.
            Outbox::Webhooks => 2,
            // An SMTP exchange is several round trips (connect, greeting, EHLO, STARTTLS,
            // AUTH, MAIL, RCPT, DATA), each with its own timeout.
            Outbox::Emails => 10,
        };
        let timeout_ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX / 64);
        timeout_ms.saturating_mul(timeouts).saturating_add(30_000)
    }
}

/// How one attempt to send a webhook or an e-mail ended.
pub(crate) enum Outcome {
    /// A 2xx came back; the SMTP server accepted the e-mail.
    Sent,
    /// Failed this time: retried on the schedule, or later if the receiver asked.
    Retry { error: String, retry_after: Option<Duration> },
    /// Not to be tried again.
    GiveUp(String),
    /// Nowhere to send it (webhooks only).
    NoTarget,
}

/// Where a message stands after an attempt, the retry schedule applied: what its
/// outbox records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settled {
    /// It went out.
    Done,
    /// Due again at `at`.
    Retry { at: Timestamp, error: String },
    /// Given up for good.
    Failed(String),
    /// Waits, with no URL, for a redelivery (webhooks only).
    NoTarget,
}

impl Settled {
    /// The error recorded with it.
    pub(crate) fn error(&self) -> Option<&str> {
        match self {
            Settled::Done => None,
            Settled::Retry { error, .. } | Settled::Failed(error) => Some(error),
            Settled::NoTarget => Some("no webhook URL on the order or its key"),
        }
    }
}

/// What one attempt produced: its outcome and, when a request was made, its log entry.
pub(crate) type Attempted = (Outcome, Option<WebhookAttempt>);

/// Builds the agent webhooks are sent with: keep-alive (an idle connection kept for
/// every concurrent sender), no redirects, a timeout. With `public_only`, every address
/// a connection is made to is checked at resolution time, so a host whose DNS answer
/// changes after [`private_target_reason`] (DNS rebinding) still cannot reach a private one.
pub(crate) fn http_agent(timeout: Duration, concurrency: usize, public_only: bool) -> ureq::Agent {
    let idle = concurrency.max(1) * 2;
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(timeout))
        .user_agent("coinorder-webhooks")
        .max_idle_connections(idle.max(64))
        .max_idle_connections_per_host(idle)
        // Through a proxy the resolver would only see the proxy's address, so a checked
        // agent connects directly and ignores HTTP(S)_PROXY.
        .proxy(if public_only { None } else { ureq::Proxy::try_from_env() })
        .build();
    if public_only {
        ureq::Agent::with_parts(config, DefaultConnector::default(), PublicOnlyResolver::default())
    } else {
        crate::http_client::agent(config)
    }
}

/// Resolves like every agent of the service ([`DeadlineResolver`]), then refuses any
/// non-public address.
#[derive(Debug, Default)]
struct PublicOnlyResolver {
    inner: DeadlineResolver,
}

impl Resolver for PublicOnlyResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> std::result::Result<ResolvedSocketAddrs, ureq::Error> {
        let addresses = self.inner.resolve(uri, config, timeout)?;
        match addresses.iter().find(|address| !is_public(address.ip())) {
            Some(address) => Err(ureq::Error::BadUri(format!(
                "webhook target resolves to non-public address {}; {REFUSED_IN_LIVE}",
                address.ip()
            ))),
            None => Ok(addresses),
        }
    }
}

pub(crate) fn transport_error(error: &ureq::Error) -> String {
    match error {
        ureq::Error::Timeout(_) => "timed out".to_string(),
        ureq::Error::Io(e) => format!("connection failed: {e}"),
        other => other.to_string(),
    }
}

/// `Retry-After` as seconds or an HTTP date.
pub(crate) fn parse_retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    if let Ok(seconds) = value.trim().parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value.trim()).ok()?.timestamp_millis();
    u64::try_from(at - now.as_millis()).ok().map(Duration::from_millis)
}

/// Ends the refusal text of [`PublicOnlyResolver`]: how a refused target (given up at
/// once) is told from a failed connection (retried).
pub(crate) const REFUSED_IN_LIVE: &str = "refused in live";

/// The reason to refuse `url` as a live webhook target when its host is, or resolves
/// to, a non-public address; `None` when it is public or cannot be resolved right now
/// (a DNS hiccup must not refuse an order: every connection is checked again).
pub(crate) fn private_target_reason(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let host = parsed.host_str()?.trim_start_matches('[').trim_end_matches(']');
    let port = parsed.port_or_known_default().unwrap_or(443);
    let mut addresses = (host, port).to_socket_addrs().ok()?;
    addresses.find(|address| !is_public(address.ip())).map(|address| {
        format!("webhook target {host} resolves to non-public address {}; {REFUSED_IN_LIVE}", address.ip())
    })
}

/// False for every address a webhook must not reach from a live service: loopback,
/// private, link-local, shared (CGNAT), multicast, reserved, documentation, benchmark
/// and protocol-assignment ranges (IANA's special-purpose registries), and IPv6 forms
/// that carry such an IPv4 address (mapped, translated, compatible, NAT64, 6to4).
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_multicast()
                || a == 0
                || a >= 240
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (18..20).contains(&b))
                || (a == 192 && b == 0 && c == 0) // IETF protocol assignments (DS-Lite, …)
                || (a == 192 && b == 88 && c == 99)) // 6to4 relay anycast
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let embedded =
                |high: u16, low: u16| IpAddr::V4(std::net::Ipv4Addr::from((u32::from(high) << 16) | u32::from(low)));
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            if s[..4] == [0; 4] && s[4] == 0xffff && s[5] == 0 {
                // IPv4-translated (SIIT, ::ffff:0:a.b.c.d): the IPv4 address decides.
                return is_public(embedded(s[6], s[7]));
            }
            if s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                // IPv4-compatible (also :: and ::1) and NAT64: the IPv4 address in the low bits decides.
                return !v6.is_loopback() && !v6.is_unspecified() && is_public(embedded(s[6], s[7]));
            }
            if s[0] == 0x2002 {
                // 6to4 relays to the IPv4 address in bits 16..48.
                return is_public(embedded(s[1], s[2]));
            }
            // The public internet is global unicast, 2000::/3; outside it are unique local,
            // link- and site-local, multicast, discard-only, local-use NAT64, SRv6 and the
            // rest. Inside it, these are not public either:
            (s[0] & 0xe000) == 0x2000
                && !(s[0] == 0x2001 && s[1] < 0x200) // IETF protocol assignments: Teredo, benchmarking, ORCHID…
                && !(s[0] == 0x2001 && s[1] == 0xdb8) // documentation
                && !(s[0] == 0x3fff && s[1] < 0x1000) // documentation (RFC 9637, 3fff::/20)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_targets_are_refused() {
        for url in [
            "http://127.0.0.1/hook",
            "http://localhost:8080/",
            "http://10.1.2.3/",
            "http://192.168.0.1/",
            "http://172.16.5.5/",
            "http://169.254.169.254/latest",
            "http://[::1]/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://224.0.0.1/",
            "http://240.0.0.1/",
            "http://198.18.0.1/",
            "http://[ff02::1]/",
            "http://[::ffff:10.0.0.1]/",
            "http://[::10.0.0.1]/",
            "http://[64:ff9b::a00:1]/", // NAT64 of 10.0.0.1
            "http://[64:ff9b:1::1]/",   // local-use NAT64
            "http://[2002:a00:1::1]/",  // 6to4 of 10.0.0.1
            "http://[2002:7f00:1::1]/", // 6to4 of 127.0.0.1
            "http://192.0.0.1/",        // IETF protocol assignments (DS-Lite)
            "http://192.0.0.170/",
            "http://192.88.99.1/",          // 6to4 relay anycast
            "http://[::ffff:0:127.0.0.1]/", // IPv4-translated
            "http://[::ffff:0:a00:1]/",
            "http://[fec0::1]/", // site-local
            "http://[fec0::a9fe:a9fe]/",
            "http://[100::1]/",  // discard-only
            "http://[2001::1]/", // Teredo
            "http://[2001:2::1]/",
            "http://[3fff::1]/", // documentation
            "http://[3fff:fff::1]/",
            "http://[5f00::1]/",      // SRv6
            "http://[100:0:0:1::1]/", // dummy prefix
            "http://[4000::1]/",      // not global unicast
        ] {
            assert!(private_target_reason(url).is_some(), "{url} allowed");
        }
        for url in [
            "http://93.184.215.14/hook",
            "http://[64:ff9b::5db8:d70e]/", // NAT64 of 93.184.215.14
            "http://[2002:5db8:d70e::1]/",  // 6to4 of 93.184.215.14
            "http://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/",
            "http://192.1.0.1/",
            "http://[2001:4860:4860::8888]/",
            "http://[2001:200::1]/",
            "http://[3fff:1000::1]/",       // past 3fff::/20
            "http://[::ffff:0:5db8:d70e]/", // IPv4-translated 93.184.215.14
            "http://no-such-host.invalid/", // unresolvable now: checked again when connecting
        ] {
            assert_eq!(private_target_reason(url), None, "{url} refused");
        }
    }

    #[test]
    fn a_public_only_agent_refuses_private_addresses_when_it_connects() {
        let agent = http_agent(Duration::from_secs(2), 1, true);
        for url in ["http://127.0.0.1:9/hook", "http://localhost:9/hook"] {
            let error = agent.post(url).send("{}").map(|_| ()).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(error.contains("non-public address"), "{url}: {error}");
        }
        let open = http_agent(Duration::from_secs(2), 1, false);
        let error = open.post("http://127.0.0.1:9/hook").send("{}").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(!error.contains("non-public"), "{error}");
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = Timestamp(1_000_000);
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Thu, 01 Jan 1970 00:17:50 GMT", now), Some(Duration::from_secs(70)));
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
