//! The outbox engine both senders share, seen from outside: e-mails are leased like
//! webhooks (two senders never send the same e-mail, and a lease lasts exactly ten
//! timeouts plus 30 s before another sender may take the e-mail over, whose record then
//! stands), and redelivering a webhook whose attempt is in flight keeps that attempt's
//! lease, then sends it again once the attempt is over.

// `common` and `support` both include the backend switch; two copies of it are harmless.
#![allow(clippy::duplicate_mod)]

mod common;
mod smtp_support;
mod support;

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::mpsc;
use std::sync::Barrier;
use std::time::Duration;

use coinorder::{DeliveryState, EmailState, Environment, Service, SmtpConfig};
use serde_json::json;

use smtp_support::SmtpSink;
use support::{Receiver, Reply};

const WAIT: Duration = Duration::from_secs(10);

fn smtp(url: String) -> Option<SmtpConfig> {
    Some(SmtpConfig { url, from: "coinorder <noreply@localhost>".to_string() })
}

/// A second service over the harness's file and clock, sending through `smtp_url`.
fn mailer(h: &common::Harness, smtp_url: String, timeout: Duration) -> Service {
    let mut config = common::config(Environment::Sandbox, &h.clock);
    config.smtp = smtp(smtp_url);
    config.webhook_timeout = timeout;
    Service::open(h.db(), config).expect("open a mailer")
}

/// Creates an order whose payment link is e-mailed; returns its id.
fn order_with_email(h: &common::Harness, merchant_order_id: &str) -> String {
    let body = json!({
        "currency": "USD",
        "amount": 12.5,
        "merchant_order_id": merchant_order_id,
        "customer_email": "alice@customer.example",
    });
    h.create(&body)["data"]["order_id"].as_str().expect("order_id").to_string()
}

#[test]
fn two_services_sending_emails_at_once_send_each_exactly_once() {
    let mut sink = SmtpSink::start();
    let h = common::harness();
    let orders: BTreeSet<String> = (0..8).map(|n| order_with_email(&h, &format!("mug-{n}"))).collect();
    let first = mailer(&h, sink.url(), Duration::from_secs(5));
    let second = mailer(&h, sink.url(), Duration::from_secs(5));

    let barrier = Barrier::new(2);
    let (mine, theirs) = std::thread::scope(|scope| {
        let theirs = scope.spawn(|| {
            barrier.wait();
            second.send_due_emails(100).expect("send (second service)")
        });
        barrier.wait();
        let mine = first.send_due_emails(100).expect("send (first service)");
        (mine, theirs.join().expect("join"))
    });
    assert_eq!(mine.attempted + theirs.attempted, 8, "{mine:?} + {theirs:?}");
    assert_eq!(mine.sent + theirs.sent, 8, "{mine:?} + {theirs:?}");

    let received = sink.wait_for(8, WAIT);
    assert_eq!(received.len(), 8, "{received:?}");
    // Nothing more arrives (a ninth message would have come within this wait).
    assert_eq!(sink.wait_for(9, Duration::from_millis(500)).len(), 8);
    let emails = h.svc.emails(None, 100).expect("emails");
    assert_eq!(emails.iter().map(|e| e.order_id.clone()).collect::<BTreeSet<_>>(), orders);
    assert!(emails.iter().all(|e| (e.state, e.attempts) == (EmailState::Sent, 1)), "{emails:?}");
    sink.stop();
}

#[test]
fn an_email_lease_lasts_ten_timeouts_and_30_s_then_another_sender_takes_over() {
    // The first sender's SMTP server accepts the connection and then says nothing, so
    // its e-mail stays in flight, leased, until the test lets the connection go.
    let stall = TcpListener::bind("127.0.0.1:0").expect("bind");
    let stall_url = format!("smtp://127.0.0.1:{}", stall.local_addr().expect("addr").port());
    let (connected, in_flight) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (connection, _) = stall.accept().expect("accept");
        connected.send(()).expect("report the connection");
        // Returns when the test releases (or drops) its end: then the connection closes.
        let _ = released.recv_timeout(WAIT);
        drop(connection);
    });

    let mut sink = SmtpSink::start();
    let h = common::harness();
    let order_id = order_with_email(&h, "mug-lease");
    let timeout = Duration::from_secs(5);
    let first = mailer(&h, stall_url, timeout);
    let second = mailer(&h, sink.url(), timeout);
    let lease_ms = 10 * 5_000 + 30_000;

    std::thread::scope(|scope| {
        let stuck = scope.spawn(|| first.send_due_emails(1).expect("send (first service)"));
        in_flight.recv_timeout(WAIT).expect("the first sender connects");
        h.clock.advance_ms(lease_ms - 1);
        let report = second.send_due_emails(100).expect("send (second service)");
        assert_eq!(report.attempted, 0, "the lease still holds 1 ms before it ends: {report:?}");
        h.clock.advance_ms(1);
        let report = second.send_due_emails(100).expect("send (second service)");
        assert_eq!((report.attempted, report.sent), (1, 1), "the lease has run out: {report:?}");
        drop(release);
        assert_eq!(stuck.join().expect("join").attempted, 1);
    });
    server.join().expect("stalling server");

    assert_eq!(sink.wait_for(1, WAIT).len(), 1);
    // The first sender's failure came after its lease had passed on: the second
    // sender's record stands.
    let email = h.svc.emails(Some(&order_id), 10).expect("emails").remove(0);
    assert_eq!((email.state, email.attempts, email.last_error.as_deref()), (EmailState::Sent, 2, None), "{email:?}");
    assert_eq!(email.sent_at.map(|t| t.as_millis()), Some(common::T0_MS + lease_ms));
    sink.stop();
}

#[test]
fn redelivering_an_event_in_flight_keeps_its_lease_then_sends_it_again() {
    let rx = Receiver::start();
    rx.push(Reply::slow(Duration::from_millis(1_000), 200));
    let env = support::manual(|_| {});
    let other = Service::open(env.db_path(), env.svc.config().clone()).expect("second service");
    let (order_id, event) = env.paid_order(Some(&rx.url()));

    std::thread::scope(|scope| {
        let first = scope.spawn(|| env.svc.deliver_due(100).expect("deliver (first service)"));
        assert_eq!(rx.wait_for(1, WAIT)[0].webhook_id(), event.event_id, "the event is being sent");
        other.redeliver(&event.event_id).expect("redeliver");
        let meanwhile = other.deliver_due(100).expect("deliver (second service)");
        assert_eq!(meanwhile.attempted, 0, "the attempt in flight still holds the lease: {meanwhile:?}");
        // The redelivery asked for during the attempt still stands once the attempt is
        // over: the event is due again, and the first deliverer, still at work, sends it.
        assert_eq!(first.join().expect("join").delivered, 2);
    });
    let requests = rx.wait_for(2, WAIT);
    assert_eq!(requests.len(), 2, "sent a second time, as asked, only after the first attempt");
    assert!(requests[1].at >= requests[0].at + Duration::from_millis(1_000), "not while the first was in flight");
    let delivery = env.deliveries(&order_id).remove(0);
    assert_eq!(delivery.log.len(), 2, "{delivery:?}");
    assert_eq!((delivery.state, delivery.attempts), (DeliveryState::Delivered, 1), "{delivery:?}");
}
