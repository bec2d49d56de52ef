//! Payment-link e-mails (spec §4.1: "if customer_email was given, the payment link is
//! e-mailed to it"): an outbox row written with the order, sent over SMTP when SMTP is
//! configured (retried like webhooks), kept pending otherwise.

use std::fmt;

use lettre::message::header::ContentType;
use lettre::message::{Mailbox, MultiPart, SinglePart};
use lettre::{Message, SmtpTransport, Transport};
use serde::Serialize;

use crate::delivery::Settled;
use crate::keys;
use crate::money::fiat_text;
use crate::orders::Order;
use crate::time::Timestamp;

/// Where an e-mail stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EmailState {
    /// Waiting to be sent (or for SMTP to be configured).
    Pending,
    /// The SMTP server accepted it.
    Sent,
    /// Given up after the retry schedule.
    Failed,
}

impl EmailState {
    /// `pending`, `sent` or `failed`.
    pub const fn as_str(self) -> &'static str {
        match self {
            EmailState::Pending => "pending",
            EmailState::Sent => "sent",
            EmailState::Failed => "failed",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        [EmailState::Pending, EmailState::Sent, EmailState::Failed].into_iter().find(|s| s.as_str() == text)
    }
}

impl fmt::Display for EmailState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A payment-link e-mail in the outbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Email {
    /// Id of the outbox row.
    pub email_id: String,
    /// The order whose payment link it carries.
    pub order_id: String,
    /// The customer's address.
    pub recipient: String,
    /// Subject line.
    pub subject: String,
    /// Plain-text body.
    pub text_body: String,
    /// HTML body.
    pub html_body: String,
    /// Pending, sent or failed.
    pub state: EmailState,
    /// Send attempts so far.
    pub attempts: i64,
    /// When the next attempt is due.
    pub next_attempt_at: Timestamp,
    /// The last failure.
    pub last_error: Option<String>,
    /// When the SMTP server accepted it.
    pub sent_at: Option<Timestamp>,
    /// When the order was created.
    pub created_at: Timestamp,
}

/// What one [`Service::send_due_emails`](crate::Service::send_due_emails) call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmailReport {
    /// E-mails attempted.
    pub attempted: usize,
    /// Accepted by the SMTP server.
    pub sent: usize,
    /// Failed this time, retried later.
    pub retrying: usize,
    /// Given up.
    pub failed: usize,
}

impl EmailReport {
    pub(crate) fn count(&mut self, settled: &Settled) {
        match settled {
            Settled::Done => self.sent += 1,
            Settled::Retry { .. } => self.retrying += 1,
            Settled::Failed(_) | Settled::NoTarget => self.failed += 1,
        }
    }
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// The payment-link e-mail for a new order.
pub(crate) fn payment_link_email(order: &Order, recipient: &str, payment_url: &str) -> Email {
    // A blank title names nothing; the payment page falls back the same way.
    let what = match order.title.as_deref().map(str::trim) {
        Some(title) if !title.is_empty() => title.to_string(),
        _ => format!("order {}", order.merchant_order_id),
    };
    // As the payment page shows it: `5.00 USD`, `1,500 JPY`.
    let amount = format!("{} {}", fiat_text(order.amount, &order.currency), order.currency);
    let subject = format!("Your payment link: {what}");
    let text_body = format!(
        "Hello,\n\nplease pay {amount} for {what} here:\n\n{payment_url}\n\n\
         The link shows the amount in crypto and the deposit address. The quote is valid for a limited time.\n"
    );
    let html_body = format!(
        "<!doctype html><html><body style=\"font-family:sans-serif\"><p>Hello,</p>\
         <p>please pay <strong>{}</strong> for {}.</p>\
         <p><a href=\"{}\" style=\"display:inline-block;padding:10px 16px;background:#1d4ed8;color:#fff;\
         border-radius:6px;text-decoration:none\">Pay now</a></p>\
         <p style=\"color:#555\">Or open {}</p></body></html>",
        escape_html(&amount),
        escape_html(&what),
        escape_html(payment_url),
        escape_html(payment_url)
    );
    Email {
        email_id: format!("eml_{}", keys::random_id(24)),
        order_id: order.order_id.clone(),
        recipient: recipient.to_string(),
        subject,
        text_body,
        html_body,
        state: EmailState::Pending,
        attempts: 0,
        next_attempt_at: order.created_at,
        last_error: None,
        sent_at: None,
        created_at: order.created_at,
    }
}

/// `text` with every word that holds an `@` shown as `<address>`: an SMTP server's reply
/// often echoes the customer's address ("550 5.1.1 <alice@…>: Recipient address
/// rejected"), and the reason a send failed ends up in logs, which must never show it.
fn without_addresses(text: &str) -> String {
    text.split_inclusive(char::is_whitespace)
        .map(|piece| {
            let word = piece.trim_end_matches(char::is_whitespace);
            match word.contains('@') {
                true => format!("<address>{}", &piece[word.len()..]),
                false => piece.to_string(),
            }
        })
        .collect()
}

/// Why an e-mail was not sent, without any e-mail address in the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotSent {
    /// Worth another attempt on the retry schedule (the server down, busy, refusing).
    Retry(String),
    /// No attempt through this mail server can send it: give up at once.
    Never(String),
}

/// Sends one payment-link e-mail.
pub(crate) fn send_one(transport: &SmtpTransport, from: &str, email: &Email) -> std::result::Result<(), NotSent> {
    send_with_addresses(transport, from, email).map_err(|not_sent| match not_sent {
        NotSent::Retry(reason) => NotSent::Retry(without_addresses(&reason)),
        NotSent::Never(reason) => NotSent::Never(without_addresses(&reason)),
    })
}

/// Whether an SMTP reply's text holds an enhanced status code (RFC 3463) saying the
/// recipient's mailbox does not exist: 5.1.1 (bad mailbox), 5.1.2 (bad system), 5.1.3
/// (bad address syntax), 5.1.6 (moved), 5.1.10 (null MX). Every other permanent refusal
/// (a relay that wants a login, a sender or policy refusal, a full mailbox, a reply
/// without such a code) may pass once the mail server or its settings change, so it is
/// retried on the schedule.
fn names_a_mailbox_that_is_not(reply: &str) -> bool {
    const NO_SUCH_MAILBOX: [&str; 5] = ["5.1.1", "5.1.2", "5.1.3", "5.1.6", "5.1.10"];
    reply
        .split(|c: char| c.is_whitespace() || matches!(c, ':' | ',' | ';' | '(' | ')'))
        .any(|word| NO_SUCH_MAILBOX.contains(&word))
}

/// `address` with its domain in ASCII (IDNA: `shöp.example` → `xn--shp-tna.example`), so
/// that a mail server without SMTPUTF8 (RFC 6531) takes it when its local part is
/// ASCII; an address whose domain does not convert is left as it is.
fn with_ascii_domain(address: &str) -> String {
    match address.rsplit_once('@') {
        Some((local, domain)) if !domain.is_ascii() => match url::Host::parse(domain) {
            Ok(url::Host::Domain(ascii)) => format!("{local}@{ascii}"),
            _ => address.to_string(),
        },
        _ => address.to_string(),
    }
}

fn send_with_addresses(transport: &SmtpTransport, from: &str, email: &Email) -> std::result::Result<(), NotSent> {
    let from: Mailbox = from.parse().map_err(|e| NotSent::Retry(format!("bad sender: {e}")))?;
    let recipient = with_ascii_domain(&email.recipient);
    let to: Mailbox = recipient.parse().map_err(|e| NotSent::Never(format!("bad recipient: {e}")))?;
    // The boundary and the Message-ID are ours rather than lettre's: lettre draws both from
    // `fastrand`, whose first use on a thread gives it std's thread handle, and a C or
    // Python host's main thread never frees that (valgrind counts it as possibly lost).
    // The Message-ID is the e-mail's own id, the same on every retry, so a mail system
    // that sees a retry of a message it took can drop it.
    let content_type = ContentType::parse(&format!("multipart/alternative; boundary=\"{}\"", keys::random_id(40)))
        .map_err(|e| NotSent::Retry(format!("cannot build message: {e}")))?;
    let body = MultiPart::builder()
        .header(content_type)
        .singlepart(SinglePart::plain(email.text_body.clone()))
        .singlepart(SinglePart::html(email.html_body.clone()));
    let message = Message::builder()
        .message_id(Some(format!("<{}@coinorder>", email.email_id)))
        .from(from)
        .to(to)
        .subject(email.subject.clone())
        .multipart(body)
        .map_err(|e| NotSent::Retry(format!("cannot build message: {e}")))?;
    transport.send(&message).map(|_| ()).map_err(|e| {
        let refused_address = e.is_permanent() && names_a_mailbox_that_is_not(&e.to_string());
        if !recipient.is_ascii() && e.is_client() && e.to_string().contains("SMTPUTF8") {
            // lettre refuses, before sending a byte, a non-ASCII address to a server that
            // does not announce SMTPUTF8; that server never will for a retry.
            NotSent::Never(format!(
                "not sent: the mail server does not take addresses with non-ASCII characters (no SMTPUTF8): {e}"
            ))
        } else if refused_address {
            // The mailbox itself does not exist: like a webhook's 410, asking again
            // changes nothing.
            NotSent::Never(format!("not sent: the mail server refused the address: {e}"))
        } else {
            NotSent::Retry(format!("SMTP: {e}"))
        }
    })
}
