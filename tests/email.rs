//! Payment-link e-mails sent to a real SMTP server (Python's aiosmtpd, started by each
//! test on a free 127.0.0.1 port and stopped at its end): the outbox row written with the
//! order, nothing sent without SMTP, the message's recipient, subject and both bodies,
//! no second e-mail on an idempotent replay, retries while the server is down, and the
//! background delivery worker draining a backlog.

mod common;
mod smtp_support;

use std::sync::Arc;
use std::time::Duration;

use coinorder::{Config, EmailState, Environment, Service, SmtpConfig, WireResponse};
use serde_json::{json, Value};

use common::{harness_with, post_json, text, Harness};
use smtp_support::SmtpSink;

/// Upper bound for a message to reach the sink.
const WAIT: Duration = Duration::from_secs(10);

const PAGE: &str = "https://pay.example/checkout";
const CUSTOMER: &str = "alice@customer.example";
const FROM: &str = "coinorder <noreply@localhost>";

fn smtp(url: String) -> Option<SmtpConfig> {
    Some(SmtpConfig { url, from: FROM.to_string() })
}

/// A sandbox harness (manual clock) whose payment page is [`PAGE`], with `smtp`.
fn harness(smtp: Option<SmtpConfig>) -> Harness {
    harness_with(Environment::Sandbox, |config| {
        config.payment_page_url = PAGE.to_string();
        config.smtp = smtp;
    })
}

/// A second service over the harness's database and clock, with another SMTP setting.
fn reopen(h: &Harness, smtp: Option<SmtpConfig>) -> Service {
    let mut config = common::config(Environment::Sandbox, &h.clock);
    config.payment_page_url = PAGE.to_string();
    config.smtp = smtp;
    Service::open(h.db(), config).expect("open a second service")
}

fn order_body(merchant_order_id: &str) -> Value {
    json!({
        "currency": "USD",
        "amount": 12.5,
        "title": "Blue mug",
        "merchant_order_id": merchant_order_id,
        "customer_email": CUSTOMER,
    })
}

/// Creates an order over the wire layer; returns (order_id, payment_url).
fn create(h: &Harness, body: &Value) -> (String, String) {
    let response = post_json(&h.svc, &h.key, body);
    created(&response)
}

fn created(response: &WireResponse) -> (String, String) {
    assert!(matches!(response.status, 200 | 201), "create -> {} {}", response.status, text(response));
    let body: Value = response.json();
    let order_id = body["data"]["order_id"].as_str().expect("order_id").to_string();
    let payment_url = body["payment_url"].as_str().expect("payment_url").to_string();
    (order_id, payment_url)
}

/// Checks a received message: to the customer, from the configured sender, with a
/// subject naming the order and the exact payment link in both parts.
fn assert_payment_link_message(message: &Value, payment_url: &str) {
    assert_eq!(message["rcpt_tos"], json!([CUSTOMER]), "{message}");
    assert!(message["to"].as_str().is_some_and(|to| to.contains(CUSTOMER)), "{message}");
    assert_eq!(message["mail_from"], json!("noreply@localhost"), "{message}");
    assert!(message["from"].as_str().is_some_and(|from| from.contains("noreply@localhost")), "{message}");
    assert_eq!(message["content_type"], json!("multipart/alternative"), "{message}");
    let subject = message["subject"].as_str().expect("subject");
    assert!(subject.to_lowercase().contains("payment") && subject.contains("Blue mug"), "subject {subject:?}");
    let text = message["text"].as_str().expect("a text/plain part");
    assert!(text.contains(payment_url), "text part lacks {payment_url}: {text}");
    assert!(text.contains("12.50 USD"), "text part names the amount as the page shows it: {text}");
    let html = message["html"].as_str().expect("a text/html part");
    assert!(html.contains(&format!("href=\"{payment_url}\"")), "html part lacks a link to {payment_url}: {html}");
}

#[test]
fn a_blank_title_is_not_the_subject_of_the_e_mail() {
    let h = harness(None);
    for (n, title) in [json!(""), json!("   "), Value::Null].into_iter().enumerate() {
        let merchant_order_id = format!("blank-{n}");
        let mut body = order_body(&merchant_order_id);
        body["title"] = title.clone();
        body["amount"] = json!(1500);
        let (order_id, _) = create(&h, &body);
        let email = &h.svc.emails(Some(&order_id), 10).expect("emails")[0];
        let named = format!("order {merchant_order_id}");
        assert_eq!(email.subject, format!("Your payment link: {named}"), "title {title}");
        assert!(email.text_body.contains(&format!("please pay 1,500.00 USD for {named} here")), "{}", email.text_body);
        assert!(email.html_body.contains(&format!("for {named}.")), "{}", email.html_body);
    }
}

#[test]
fn payment_link_is_emailed_once_smtp_is_configured() {
    let mut sink = SmtpSink::start();
    let h = harness(None);
    let request = order_body("mug-1");
    let (order_id, payment_url) = create(&h, &request);
    assert_eq!(payment_url, format!("{PAGE}?id={order_id}"));

    // The outbox row is written with the order.
    let emails = h.svc.emails(Some(&order_id), 10).expect("emails");
    assert_eq!(emails.len(), 1, "{emails:?}");
    let email = &emails[0];
    assert_eq!((email.state, email.attempts), (EmailState::Pending, 0));
    assert_eq!((email.order_id.as_str(), email.recipient.as_str()), (order_id.as_str(), CUSTOMER));
    assert!(email.text_body.contains(&payment_url) && email.html_body.contains(&payment_url), "{email:?}");
    assert_eq!((email.last_error.as_deref(), email.sent_at), (None, None));

    // No SMTP configured: nothing is sent, nothing is counted, the e-mail waits.
    assert_eq!(h.svc.send_due_emails(100).expect("send"), coinorder::EmailReport::default());
    let email = &h.svc.emails(Some(&order_id), 10).expect("emails")[0];
    assert_eq!((email.state, email.attempts), (EmailState::Pending, 0));

    // With SMTP: sent, and received as the customer would.
    let mailer = reopen(&h, smtp(sink.url()));
    let report = mailer.send_due_emails(100).expect("send");
    assert_eq!((report.attempted, report.sent, report.retrying, report.failed), (1, 1, 0, 0), "{report:?}");
    let received = sink.wait_for(1, WAIT);
    assert_eq!(received.len(), 1, "{received:?}");
    assert_payment_link_message(&received[0], &payment_url);
    let email = &h.svc.emails(Some(&order_id), 10).expect("emails")[0];
    assert_eq!((email.state, email.attempts, email.last_error.as_deref()), (EmailState::Sent, 1, None));
    assert_eq!(email.sent_at.map(|t| t.as_millis()), Some(common::T0_MS));

    // An identical replay of the create returns the same order and sends nothing more.
    let replay = post_json(&h.svc, &h.key, &request);
    assert_eq!(created(&replay), (order_id.clone(), payment_url.clone()));
    assert_eq!(h.svc.emails(None, 100).expect("emails").len(), 1);
    assert_eq!(mailer.send_due_emails(100).expect("send").attempted, 0);
    // Nothing else arrives (a second message would have come within this wait).
    assert_eq!(sink.wait_for(2, Duration::from_millis(500)).len(), 1);

    // An order without customer_email has no e-mail.
    let (other, _) = create(&h, &json!({"currency": "USD", "amount": 1}));
    assert!(h.svc.emails(Some(&other), 10).expect("emails").is_empty());
    // E-mails belong to their environment.
    let mut live_config = Config::new(Environment::Live);
    live_config.secret_key_path = common::shared_key_file();
    let live = Service::open(h.db(), live_config).expect("open live");
    assert!(live.emails(None, 100).expect("emails").is_empty());
    sink.stop();
}

#[test]
fn smtp_down_is_retried_on_schedule() {
    // Learn a free port, then leave nothing listening on it.
    let mut sink = SmtpSink::start();
    let port = sink.port();
    let url = sink.url();
    sink.stop();

    let h = harness(smtp(url));
    let (order_id, payment_url) = create(&h, &order_body("mug-down"));
    let report = h.svc.send_due_emails(100).expect("send");
    assert_eq!((report.attempted, report.sent, report.retrying, report.failed), (1, 0, 1, 0), "{report:?}");
    let email = &h.svc.emails(Some(&order_id), 10).expect("emails")[0];
    assert_eq!((email.state, email.attempts), (EmailState::Pending, 1));
    let error = email.last_error.as_deref().expect("last_error recorded");
    assert!(error.contains("SMTP"), "{error}");
    // First retry after 5 s, jittered by ±20 %.
    let delay = email.next_attempt_at.as_millis() - common::T0_MS;
    assert!((4_000..=6_000).contains(&delay), "retry in {delay} ms");

    // Not due yet: not attempted again, even once the server is back.
    assert_eq!(h.svc.send_due_emails(100).expect("send").attempted, 0);
    let mut sink = SmtpSink::start_with(port, None);
    assert_eq!(h.svc.send_due_emails(100).expect("send").attempted, 0);
    assert!(sink.received().is_empty());

    // Due: sent.
    h.clock.advance_ms(delay);
    let report = h.svc.send_due_emails(100).expect("send");
    assert_eq!((report.attempted, report.sent), (1, 1), "{report:?}");
    let received = sink.wait_for(1, WAIT);
    assert_eq!(received.len(), 1, "{received:?}");
    assert_payment_link_message(&received[0], &payment_url);
    let email = &h.svc.emails(Some(&order_id), 10).expect("emails")[0];
    assert_eq!((email.state, email.attempts, email.last_error.as_deref()), (EmailState::Sent, 2, None));
    assert_eq!(email.sent_at.map(|t| t.as_millis()), Some(common::T0_MS + delay));
    sink.stop();
}

#[test]
fn a_refusal_that_echoes_the_address_is_recorded_without_it() {
    let mut sink = SmtpSink::start();
    let h = harness(smtp(sink.url()));
    let mut body = order_body("mug-refused");
    body["customer_email"] = json!("rejected.customer@customer.example");
    let (order_id, _) = create(&h, &body);
    let report = h.svc.send_due_emails(100).expect("send");
    // A 550 refusal of the mailbox is final, like a webhook's 410: not retried for days.
    assert_eq!((report.attempted, report.retrying, report.failed), (1, 0, 1), "{report:?}");
    let email = &h.svc.emails(Some(&order_id), 10).expect("emails")[0];
    assert_eq!((email.state, email.attempts), (EmailState::Failed, 1));
    let error = email.last_error.as_deref().expect("last_error recorded");
    // The sink's reply was "550 5.1.1 <rejected.customer@…>: Recipient address rejected".
    assert!(error.contains("refused the address"), "{error}");
    assert!(error.contains("550") && error.contains("<address> Recipient address rejected"), "{error}");
    assert!(!error.contains("customer.example"), "{error}");
    assert!(sink.received().is_empty());
    sink.stop();
}

#[test]
fn a_relay_that_refuses_to_relay_is_asked_again_on_the_schedule() {
    // 550 5.7.1: the relay's settings (a login, the sender) may be fixed meanwhile.
    let mut sink = SmtpSink::start();
    let h = harness(smtp(sink.url()));
    let mut body = order_body("mug-relay");
    body["customer_email"] = json!("relaydenied@customer.example");
    let (order_id, _) = create(&h, &body);
    let report = h.svc.send_due_emails(100).expect("send");
    assert_eq!((report.attempted, report.retrying, report.failed), (1, 1, 0), "{report:?}");
    let email = &h.svc.emails(Some(&order_id), 10).expect("emails")[0];
    assert_eq!((email.state, email.attempts), (EmailState::Pending, 1));
    assert!(email.last_error.as_deref().unwrap_or_default().contains("5.7.1 Relaying denied"), "{email:?}");
    sink.stop();
}

#[test]
fn an_exhausted_schedule_fails_the_email() {
    let mut sink = SmtpSink::start();
    let url = sink.url();
    sink.stop();
    let h = harness_with(Environment::Sandbox, |config| {
        config.smtp = smtp(url);
        config.retry_schedule = vec![Duration::from_secs(10)];
    });
    let (order_id, _) = create(&h, &order_body("mug-fail"));
    assert_eq!(h.svc.send_due_emails(100).expect("send").retrying, 1);
    h.clock.advance_ms(13_000);
    let report = h.svc.send_due_emails(100).expect("send");
    assert_eq!((report.attempted, report.failed), (1, 1), "{report:?}");
    let email = &h.svc.emails(Some(&order_id), 10).expect("emails")[0];
    assert_eq!((email.state, email.attempts), (EmailState::Failed, 2));
    assert!(email.last_error.as_deref().is_some_and(|e| e.starts_with("gave up")), "{email:?}");
    // Failed for good: never picked up again.
    h.clock.advance_ms(86_400_000);
    assert_eq!(h.svc.send_due_emails(100).expect("send").attempted, 0);
}

#[test]
fn the_delivery_worker_drains_a_backlog_in_one_run() {
    let mut sink = SmtpSink::start();
    let h = harness(smtp(sink.url()));
    let mut links = Vec::new();
    for n in 0..5 {
        links.push(create(&h, &order_body(&format!("mug-worker-{n}"))).1);
    }
    let Harness { svc, clock, dir, .. } = h;
    let service = Arc::new(svc);

    // A batch of 2 and an interval of an hour: all five go out in the first run only if
    // full batches are followed at once by the next.
    let mut worker = service.start_delivery_worker(Duration::from_secs(3600), 2).expect("start worker");
    assert_eq!(worker.name(), "coinorder-delivery");
    let received = sink.wait_for(5, WAIT);
    assert_eq!(received.len(), 5, "{received:?}");
    for link in &links {
        let message = received.iter().find(|m| m["text"].as_str().is_some_and(|t| t.contains(link.as_str())));
        assert_payment_link_message(message.unwrap_or_else(|| panic!("no e-mail with {link}")), link);
    }
    worker.stop();
    assert!(!worker.is_running());
    // One run of the e-mail thread sent all five; the webhook thread's one run, if it
    // came before the stop, found nothing.
    assert!((1..=2).contains(&worker.runs()), "{} runs", worker.runs());
    assert_eq!(worker.failures(), 0, "{:?}", worker.last_error());
    let emails = service.emails(None, 100).expect("emails");
    assert!(emails.iter().all(|e| e.state == EmailState::Sent), "{emails:?}");

    // A later e-mail waits for the next tick: woken, the worker sends it.
    let mut worker = service.start_delivery_worker(Duration::from_secs(3600), 2).expect("start worker");
    let (key, _) = common::new_key(&service, 9, Environment::Sandbox);
    let response = post_json(&service, &key, &order_body("mug-late"));
    let (_, link) = created(&response);
    worker.wake();
    let received = sink.wait_for(6, WAIT);
    assert_eq!(received.len(), 6, "{received:?}");
    assert_payment_link_message(&received[5], &link);
    worker.stop();
    assert_eq!(worker.failures(), 0, "{:?}", worker.last_error());
    drop((clock, dir));
    sink.stop();
}

#[test]
fn without_smtp_the_worker_leaves_emails_pending() {
    let h = harness(None);
    create(&h, &order_body("mug-x"));
    let Harness { svc, dir, .. } = h;
    let service = Arc::new(svc);
    let mut worker = service.start_delivery_worker(Duration::from_millis(5), 10).expect("start worker");
    std::thread::sleep(Duration::from_millis(50));
    worker.stop();
    assert!(worker.runs() >= 1);
    assert_eq!(worker.failures(), 0, "{:?}", worker.last_error());
    let email = &service.emails(None, 10).expect("emails")[0];
    assert_eq!((email.state, email.attempts), (EmailState::Pending, 0));
    drop(dir);
}

#[test]
fn an_unusable_smtp_url_is_refused_when_the_service_opens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = coinorder::Config::new(coinorder::Environment::Sandbox);
    config.smtp = Some(coinorder::SmtpConfig {
        url: "smtp://127.0.0.1:25?tls=maybe".into(),
        from: "shop <pay@shop.example>".into(),
    });
    let err = coinorder::Service::open(dir.path().join("t.db"), config).expect_err("bad tls mode");
    assert!(err.to_string().contains("smtp_url: tls must be required or opportunistic"), "{err}");
}

#[test]
fn a_payment_link_for_an_order_already_paid_is_dropped_not_sent() {
    let mut sink = SmtpSink::start();
    let h = harness(None);
    let (order_id, _) = create(&h, &order_body("mug-paid"));
    h.svc.simulate(&order_id, &coinorder::SimulateAction::Pay { amount: None, confirmed: true }).expect("pay");
    let with_smtp = reopen(&h, smtp(sink.url()));
    let report = with_smtp.send_due_emails(10).expect("send");
    assert_eq!((report.attempted, report.sent, report.failed), (1, 0, 1), "{report:?}");
    let email = with_smtp.emails(Some(&order_id), 10).expect("emails").remove(0);
    assert_eq!(email.state, EmailState::Failed);
    assert_eq!(email.last_error.as_deref(), Some("not sent: the order is PAID"));
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(sink.received().is_empty(), "nothing reached SMTP");
}

#[test]
fn an_email_whose_order_cannot_be_read_is_retried_without_stopping_the_others() {
    let mut sink = SmtpSink::start();
    let h = harness(None);
    let (broken, _) = create(&h, &order_body("mug-broken"));
    let (fine, fine_url) = create(&h, &order_body("mug-fine"));
    // The first order's stored status becomes one this library does not know.
    let mut raw = common::RawDb::open(&h.db());
    raw.allow_bad_values("orders");
    raw.execute("UPDATE orders SET status = 'ARCHIVED' WHERE order_id = ?1", &[&broken]);

    let mailer = reopen(&h, smtp(sink.url()));
    let report = mailer.send_due_emails(100).expect("one unreadable order does not end the run");
    assert_eq!((report.attempted, report.sent, report.retrying), (2, 1, 1), "{report:?}");
    let received = sink.wait_for(1, WAIT);
    assert_eq!(received.len(), 1, "{received:?}");
    assert_payment_link_message(&received[0], &fine_url);
    let email = &h.svc.emails(Some(&broken), 10).expect("emails")[0];
    assert_eq!((email.state, email.attempts), (EmailState::Pending, 1), "{email:?}");
    assert!(email.last_error.as_deref().unwrap_or("").contains("cannot read the order"), "{email:?}");
    assert_eq!(h.svc.emails(Some(&fine), 10).expect("emails")[0].state, EmailState::Sent);
    sink.stop();
}

#[test]
fn an_email_queued_to_an_address_the_mailer_cannot_take_fails_at_once() {
    // Queued by an older version, which took a quoted local part: no retry would send it.
    let mut sink = SmtpSink::start();
    let h = harness(None);
    let (order_id, _) = create(&h, &order_body("mug-quoted"));
    let mut raw = common::RawDb::open(&h.db());
    raw.execute("UPDATE emails SET recipient = '\"a b\"@example.com' WHERE order_id = ?1", &[&order_id]);
    let mailer = reopen(&h, smtp(sink.url()));
    let report = mailer.send_due_emails(10).expect("send");
    assert_eq!((report.attempted, report.sent, report.failed, report.retrying), (1, 0, 1, 0), "{report:?}");
    let email = mailer.emails(Some(&order_id), 10).expect("emails").remove(0);
    assert_eq!(email.state, EmailState::Failed);
    assert!(email.last_error.as_deref().unwrap_or("").contains("cannot send to this address"), "{email:?}");
    assert!(!email.last_error.as_deref().unwrap_or("").contains("a b"), "no address in the error: {email:?}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(sink.received().is_empty(), "nothing reached SMTP");
    sink.stop();
}

#[test]
fn an_international_domain_is_sent_in_ascii_to_a_server_without_smtputf8() {
    // The sink, like many relays, does not announce SMTPUTF8.
    let mut sink = SmtpSink::start();
    let h = harness(smtp(sink.url()));
    let mut body = order_body("mug-idn");
    body["customer_email"] = json!("bob@shöp.example");
    let (order_id, _) = create(&h, &body);
    let report = h.svc.send_due_emails(100).expect("send");
    assert_eq!((report.attempted, report.sent), (1, 1), "{report:?}");
    let received = sink.wait_for(1, WAIT);
    assert_eq!(received[0]["rcpt_tos"], json!(["bob@xn--shp-tna.example"]), "{:?}", received[0]);
    // Stored as the customer wrote it.
    assert_eq!(h.svc.emails(Some(&order_id), 10).expect("emails")[0].recipient, "bob@shöp.example");
    sink.stop();
}

#[test]
fn a_non_ascii_local_part_fails_at_once_on_a_server_without_smtputf8() {
    let mut sink = SmtpSink::start();
    let h = harness(smtp(sink.url()));
    let mut body = order_body("mug-utf8");
    body["customer_email"] = json!("jürgen@shop.example");
    let (order_id, _) = create(&h, &body);
    let report = h.svc.send_due_emails(100).expect("send");
    // Not retried for days: no attempt through this server can send it.
    assert_eq!((report.attempted, report.sent, report.failed, report.retrying), (1, 0, 1, 0), "{report:?}");
    let email = h.svc.emails(Some(&order_id), 10).expect("emails").remove(0);
    assert_eq!((email.state, email.attempts), (EmailState::Failed, 1));
    let error = email.last_error.as_deref().unwrap_or_default();
    assert!(error.contains("no SMTPUTF8") && !error.contains("jürgen"), "{error}");
    assert!(sink.received().is_empty());
    sink.stop();
}
