//! Webhook failures and the retry schedule (issue 4, DESIGN §7) against a real local
//! HTTP receiver, on a manual clock (no sleeping for hours): 500, a timeout, a closed
//! connection and a receiver that is down are retried after 5 s then 5 min (±20 %) and
//! delivered once it recovers; the attempt log; an exhausted schedule; 410; redirects;
//! `Retry-After`.

mod support;

use std::net::TcpListener;
use std::time::Duration;

use coinorder::{DeliveryState, WebhookAttempt, RESPONSE_EXCERPT_BYTES};
use support::*;

/// How the receiver misbehaves before it recovers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// Answers 500 with a 3 KiB body.
    Http500,
    /// Answers after the 300 ms timeout.
    Timeout,
    /// Closes the connection without answering.
    Close,
    /// Nothing listens on the port.
    Down,
}

/// A 3 KiB ASCII body.
fn big_body() -> Vec<u8> {
    (0..3 * 1024).map(|i| b"0123456789abcdefghijklmnopqrstuvwxyz"[i % 36]).collect()
}

/// A port nothing listens on (bound, then released).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// What a failed attempt of `failure` must have logged.
fn check_failed_attempt(failure: Failure, log: &WebhookAttempt) {
    let error = log.error.clone().unwrap_or_default();
    assert!(!error.is_empty(), "{failure:?}: the attempt log records the error: {log:?}");
    assert!(log.latency_ms >= 0, "{failure:?}: latency {log:?}");
    match failure {
        Failure::Http500 => {
            assert_eq!(log.status, Some(500), "{log:?}");
            assert!(error.contains("500"), "error names the status: {error}");
            let excerpt = log.response_excerpt.clone().expect("response excerpt");
            assert_eq!(RESPONSE_EXCERPT_BYTES, 1024);
            assert!(excerpt.len() <= 1024, "excerpt of {} bytes", excerpt.len());
            assert_eq!(excerpt.as_bytes(), &big_body()[..1024], "the first KiB of the response");
        }
        Failure::Timeout => {
            assert_eq!(log.status, None, "{log:?}");
            assert!(error.to_lowercase().contains("timed out"), "error says it timed out: {error}");
            assert!((250..1000).contains(&log.latency_ms), "latency {} ms for a 300 ms timeout", log.latency_ms);
        }
        Failure::Close => {
            assert_eq!(log.status, None, "{log:?}");
            assert!(log.response_excerpt.is_none(), "{log:?}");
        }
        Failure::Down => {
            assert_eq!(log.status, None, "{log:?}");
            assert!(error.to_lowercase().contains("refused"), "error says the connection was refused: {error}");
        }
    }
}

/// The failure happens twice (attempts 1 and 2), then the receiver recovers.
fn retried_on_schedule_then_delivered(failure: Failure) {
    let env = manual(|c| {
        if failure == Failure::Timeout {
            c.webhook_timeout = Duration::from_millis(300);
        }
    });
    let (port, mut rx) = if failure == Failure::Down {
        (free_port(), None)
    } else {
        let rx = Receiver::start();
        let reply = match failure {
            Failure::Http500 => Reply::status(500).body(big_body()),
            Failure::Timeout => Reply::slow(Duration::from_millis(1500), 200),
            Failure::Close => Reply::Close,
            Failure::Down => unreachable!(),
        };
        rx.push_n(reply, 2);
        (rx.port(), Some(rx))
    };
    let url = format!("http://127.0.0.1:{port}/hook");
    let (_, event) = env.paid_order(Some(&url));
    let sent = |rx: &Option<Receiver>| rx.as_ref().map_or(0, Receiver::count);

    // Attempt 1 fails: retried about 5 s later.
    let report = env.deliver();
    assert_eq!((report.attempted, report.retrying, report.delivered, report.failed), (1, 1, 0, 0), "{report:?}");
    let d = env.delivery(&event);
    assert_eq!((d.state, d.attempts), (DeliveryState::Pending, 1), "{d:?}");
    assert!(d.last_error.is_some(), "last_error set: {d:?}");
    assert_eq!(d.log.len(), 1);
    assert_eq!((d.log[0].attempt, d.log[0].url.as_str(), d.log[0].started_at.as_millis()), (1, url.as_str(), T0_MS));
    check_failed_attempt(failure, &d.log[0]);
    let first_retry = d.next_attempt_at.as_millis();
    assert_jittered(first_retry - env.now_ms(), FIVE_S_MS, "first retry");
    let after_first = if failure == Failure::Down { 0 } else { 1 };
    assert_eq!(sent(&rx), after_first, "one request per attempt");

    // Not due yet: nothing is sent.
    assert_eq!(env.deliver().attempted, 0, "nothing is due right after a failure");
    env.set_time(first_retry - 1);
    assert_eq!(env.deliver().attempted, 0, "nothing is due 1 ms before the retry time");
    assert_eq!(sent(&rx), after_first);

    // Attempt 2 at the due time fails too: retried about 5 min later.
    env.set_time(first_retry);
    let report = env.deliver();
    assert_eq!((report.attempted, report.retrying), (1, 1), "{report:?}");
    let d = env.delivery(&event);
    assert_eq!((d.state, d.attempts, d.log.len()), (DeliveryState::Pending, 2, 2), "{d:?}");
    assert_eq!(d.log[1].attempt, 2);
    check_failed_attempt(failure, &d.log[1]);
    let second_retry = d.next_attempt_at.as_millis();
    assert_jittered(second_retry - env.now_ms(), FIVE_MIN_MS, "second retry");
    env.set_time(second_retry - 1);
    assert_eq!(env.deliver().attempted, 0, "nothing is due before the second retry");

    // The receiver recovers; attempt 3 delivers.
    if failure == Failure::Down {
        rx = Some(Receiver::start_on(port));
    }
    env.set_time(second_retry);
    let report = env.deliver();
    assert_eq!((report.attempted, report.delivered), (1, 1), "{report:?}");
    let d = env.delivery(&event);
    assert_eq!((d.state, d.attempts, d.log.len()), (DeliveryState::Delivered, 3, 3), "{d:?}");
    assert_eq!(d.delivered_at.map(|t| t.as_millis()), Some(second_retry));
    assert_eq!(d.log[2].status, Some(200));
    assert_eq!(d.log[2].error, None);

    let rx = rx.expect("receiver");
    let requests = rx.requests();
    assert_eq!(requests.len(), if failure == Failure::Down { 1 } else { 3 }, "one request per attempt");
    let secret = env.secret();
    for request in &requests {
        assert_eq!(request.webhook_id(), event.event_id, "webhook-id is stable across retries");
        assert_eq!(request.body, event.payload.as_bytes(), "the same body on every attempt");
        let timestamp: i64 = request.header("webhook-timestamp").expect("timestamp").parse().expect("int");
        assert_eq!(our_verify(&secret, request, timestamp), Ok(()), "each attempt is signed");
    }
    // Delivered: nothing more is ever sent.
    env.advance(48 * 3600 * SEC_MS);
    assert_eq!(env.deliver().attempted, 0);
}

#[test]
fn http_500_is_retried_on_schedule_and_logged_then_delivered() {
    retried_on_schedule_then_delivered(Failure::Http500);
}

#[test]
fn a_timeout_is_retried_on_schedule_then_delivered() {
    retried_on_schedule_then_delivered(Failure::Timeout);
}

#[test]
fn a_closed_connection_is_retried_on_schedule_then_delivered() {
    retried_on_schedule_then_delivered(Failure::Close);
}

#[test]
fn a_receiver_that_is_down_is_retried_on_schedule_then_delivered() {
    retried_on_schedule_then_delivered(Failure::Down);
}

#[test]
fn the_default_schedule_is_followed_up_to_the_third_delay() {
    let rx = Receiver::start();
    rx.set_default(Reply::status(500));
    let env = manual(|_| {});
    let (_, event) = env.paid_order(Some(&rx.url()));
    for (attempt, base) in [(1, FIVE_S_MS), (2, FIVE_MIN_MS), (3, THIRTY_MIN_MS)] {
        assert_eq!(env.deliver().retrying, 1, "attempt {attempt}");
        let d = env.delivery(&event);
        assert_eq!(d.attempts, attempt);
        assert_jittered(d.next_attempt_at.as_millis() - env.now_ms(), base, &format!("after attempt {attempt}"));
        env.set_time(d.next_attempt_at.as_millis());
    }
    assert_eq!(rx.count(), 3);
}

#[test]
fn an_exhausted_schedule_ends_failed() {
    let rx = Receiver::start();
    rx.set_default(Reply::status(500));
    let env = manual(|c| c.retry_schedule = vec![Duration::from_secs(1), Duration::from_secs(2)]);
    let (_, event) = env.paid_order(Some(&rx.url()));
    for (attempt, base) in [(1, SEC_MS), (2, 2 * SEC_MS)] {
        let report = env.deliver();
        assert_eq!((report.attempted, report.retrying), (1, 1), "attempt {attempt}: {report:?}");
        let d = env.delivery(&event);
        assert_eq!((d.state, d.attempts), (DeliveryState::Pending, attempt));
        assert_jittered(d.next_attempt_at.as_millis() - env.now_ms(), base, &format!("after attempt {attempt}"));
        env.set_time(d.next_attempt_at.as_millis());
    }
    let report = env.deliver();
    assert_eq!((report.attempted, report.failed, report.retrying), (1, 1, 0), "last attempt: {report:?}");
    let d = env.delivery(&event);
    assert_eq!((d.state, d.attempts, d.log.len()), (DeliveryState::Failed, 3, 3), "{d:?}");
    assert!(d.last_error.as_deref().is_some_and(|e| e.contains("500")), "last error: {:?}", d.last_error);
    assert!(d.log.iter().all(|a| a.status == Some(500)));
    env.advance(7 * 24 * 3600 * SEC_MS);
    assert_eq!(env.deliver().attempted, 0, "a failed event is not retried");
    assert_eq!(rx.count(), 3);
}

#[test]
fn gone_410_fails_at_once() {
    let rx = Receiver::start();
    rx.set_default(Reply::status(410).body("gone"));
    let env = manual(|_| {});
    let (_, event) = env.paid_order(Some(&rx.url()));
    let report = env.deliver();
    assert_eq!((report.attempted, report.failed, report.retrying), (1, 1, 0), "{report:?}");
    let d = env.delivery(&event);
    assert_eq!((d.state, d.attempts, d.log.len()), (DeliveryState::Failed, 1, 1), "{d:?}");
    assert_eq!(d.log[0].status, Some(410));
    assert_eq!(d.log[0].response_excerpt.as_deref(), Some("gone"));
    assert!(d.last_error.as_deref().is_some_and(|e| e.contains("410")), "{:?}", d.last_error);
    env.advance(7 * 24 * 3600 * SEC_MS);
    assert_eq!(env.deliver().attempted, 0, "no more attempts after 410");
    assert_eq!(rx.count(), 1);
}

#[test]
fn a_redirect_is_not_followed_and_is_retried() {
    let target = Receiver::start();
    let rx = Receiver::start();
    rx.push(Reply::redirect(&target.url()));
    let env = manual(|_| {});
    let (_, event) = env.paid_order(Some(&rx.url()));
    let report = env.deliver();
    assert_eq!((report.attempted, report.retrying, report.delivered), (1, 1, 0), "{report:?}");
    let d = env.delivery(&event);
    assert_eq!((d.state, d.log.len()), (DeliveryState::Pending, 1), "{d:?}");
    assert_eq!(d.log[0].status, Some(301));
    assert!(d.log[0].error.is_some(), "a redirect is a failure: {:?}", d.log[0]);
    assert_jittered(d.next_attempt_at.as_millis() - env.now_ms(), FIVE_S_MS, "retry after a redirect");
    assert_eq!(rx.count(), 1, "one request");
    assert_eq!(target.count(), 0, "the redirect must not be followed");

    env.set_time(d.next_attempt_at.as_millis());
    assert_eq!(env.deliver().delivered, 1, "retried at the original URL");
    assert_eq!(rx.count(), 2);
    assert_eq!(target.count(), 0);
}

#[test]
fn too_many_requests_honours_retry_after_without_jitter() {
    let rx = Receiver::start();
    rx.push(Reply::status(429).header("retry-after", "120"));
    let env = manual(|_| {});
    let (_, event) = env.paid_order(Some(&rx.url()));
    let report = env.deliver();
    assert_eq!((report.attempted, report.retrying), (1, 1), "{report:?}");
    let d = env.delivery(&event);
    assert_eq!(d.log[0].status, Some(429));
    assert_eq!(d.next_attempt_at.as_millis(), env.now_ms() + 120 * SEC_MS, "Retry-After: 120, no jitter");

    env.set_time(d.next_attempt_at.as_millis() - 1);
    assert_eq!(env.deliver().attempted, 0);
    env.set_time(d.next_attempt_at.as_millis());
    assert_eq!(env.deliver().delivered, 1);
}

#[test]
fn a_short_retry_after_never_brings_the_schedule_forward() {
    let rx = Receiver::start();
    rx.push(Reply::status(500));
    rx.push(Reply::status(503).header("retry-after", "120"));
    let env = manual(|_| {});
    let (_, event) = env.paid_order(Some(&rx.url()));
    env.deliver();
    env.set_time(env.delivery(&event).next_attempt_at.as_millis());
    env.deliver();
    let d = env.delivery(&event);
    assert_eq!((d.attempts, d.log[1].status), (2, Some(503)));
    // The endpoint asked for 120 s, the schedule says 5 min ±20 %: the later one holds, so
    // an endpoint answering "Retry-After: 1" cannot burn a schedule meant to span a day.
    assert_jittered(d.next_attempt_at.as_millis() - env.now_ms(), 5 * 60 * SEC_MS, "second retry");
}

#[test]
fn a_kept_alive_connection_the_receiver_closed_meanwhile_is_not_a_failed_attempt() {
    let rx = Receiver::start();
    rx.push(Reply::RespondThenClose { status: 200 });
    let env = manual(|_| {});
    let (_, first) = env.paid_order(Some(&rx.url()));
    assert_eq!(env.deliver().delivered, 1);
    assert_eq!(env.delivery(&first).state, DeliveryState::Delivered);
    // The receiver has closed the connection the agent keeps for reuse.
    std::thread::sleep(Duration::from_millis(100));
    let (_, second) = env.paid_order(Some(&rx.url()));
    let report = env.deliver();
    let d = env.delivery(&second);
    assert_eq!(report.delivered, 1, "{report:?}: {:?}", d.log);
    assert_eq!(d.state, DeliveryState::Delivered);
    assert_eq!(rx.count(), 2);
}

#[test]
fn a_retry_goes_out_on_time_after_the_clock_is_set_back() {
    let receiver = Receiver::start();
    receiver.push(Reply::status(500));
    let env = manual(|_| {});
    let clock = env.clock.clone().expect("manual clock");
    let (_, event) = env.paid_order(Some(&receiver.url()));
    assert_eq!(env.deliver().retrying, 1, "the first attempt fails; the next is due in about 5 s");
    // An NTP step an hour back: the retry is still due about 5 s after its attempt.
    clock.advance_ms(-3_600_000);
    assert_eq!(env.deliver().attempted, 0, "not due yet");
    clock.advance_ms(6_500);
    let report = env.deliver();
    assert_eq!((report.attempted, report.delivered), (1, 1), "{report:?}");
    assert_eq!(env.delivery(&event).state, DeliveryState::Delivered);
    assert_eq!(receiver.requests().len(), 2);
}
