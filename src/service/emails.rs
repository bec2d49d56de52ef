//! The service's payment-link e-mails: listing and sending them, over the outbox engine
//! of [`crate::delivery`] and the messages of [`crate::mail`].

use crate::delivery::{Outbox, Outcome, Settled};
use crate::error::Result;
use crate::keys;
use crate::orders::OrderStatus;
use lettre::SmtpTransport;

use super::Service;
use crate::mail::*;

impl Service {
    /// Payment-link e-mails of this environment, newest first; of one order when given.
    pub fn emails(&self, order_id: Option<&str>, limit: usize) -> Result<Vec<Email>> {
        self.store.read(|db| db.emails(self.environment(), order_id, limit as i64))
    }

    /// Sends up to `limit` due e-mails over the configured SMTP server. Without SMTP
    /// configured it sends nothing and the e-mails stay pending.
    ///
    /// Each e-mail is leased on its own, just before it is sent, for as long as one SMTP
    /// exchange can take (ten timeouts plus 30 s): however slow the
    /// server and however large `limit`, no lease runs out while its e-mail still waits
    /// in this call, so two workers or processes never send the same e-mail at once.
    pub fn send_due_emails(&self, limit: usize) -> Result<EmailReport> {
        self.send_due_emails_unless(limit, &|| false)
    }

    /// [`Service::send_due_emails`] that stops between e-mails once `stopped()` says so
    /// (the background worker's stop).
    pub(crate) fn send_due_emails_unless(&self, limit: usize, stopped: &dyn Fn() -> bool) -> Result<EmailReport> {
        let Some(smtp) = self.config().smtp.clone() else { return Ok(EmailReport::default()) };
        self.follow_clock_set_back(Outbox::Emails)?;
        let token = keys::random_id(24);
        let lease_ms = Outbox::Emails.lease_ms(self.config().webhook_timeout);
        let transport = SmtpTransport::from_url(&smtp.url)
            .map(|builder| builder.timeout(Some(self.config().webhook_timeout)).build())
            .map_err(|e| e.to_string());
        let mut report = EmailReport::default();
        while report.attempted < limit && !stopped() {
            let now = self.now();
            let Some(email) = self.store.write_outbox(|db| {
                let ids = db.claim_due(Outbox::Emails, self.environment(), now, now.plus_ms(lease_ms), &token, 1)?;
                ids.first().map(|id| db.email(id)).transpose()
            })?
            else {
                break;
            };
            report.attempted += 1;
            // A payment link for an order that is already paid, cancelled or expired, or
            // whose quote ran out, would only ask the customer to pay again: it is
            // dropped, not sent. The order is read as stored: moving it is the expiry
            // sweep's work, not this sender's. One unreadable order costs its own e-mail a
            // retry, not the whole run.
            let stored = self.store.read(|db| db.order_in_environment(self.environment(), &email.order_id));
            let status = stored.map(|order| match order {
                Some(order) if order.order.status == OrderStatus::New && now >= order.invoice.expired_at => {
                    Some(OrderStatus::Expired)
                }
                other => other.map(|order| order.order.status),
            });
            // SMTP is spoken here, outside any transaction: the lease just taken keeps
            // every other sender off this e-mail for longer than the exchange can take.
            let outcome = match (&transport, status) {
                (_, Err(error)) => {
                    Outcome::Retry { error: format!("cannot read the order: {error}"), retry_after: None }
                }
                (_, Ok(None)) => Outcome::GiveUp("not sent: the order is gone".into()),
                (_, Ok(Some(status))) if status.is_terminal() => {
                    Outcome::GiveUp(format!("not sent: the order is {status}"))
                }
                // Queued before such addresses were refused: no retry would send it.
                (_, Ok(Some(_))) if !crate::orders::is_sendable_address(&email.recipient) => {
                    Outcome::GiveUp("not sent: the mailer cannot send to this address (a quoted local part)".into())
                }
                (Ok(transport), Ok(Some(_))) => match send_one(transport, &smtp.from, &email) {
                    Ok(()) => Outcome::Sent,
                    Err(NotSent::Retry(error)) => Outcome::Retry { error, retry_after: None },
                    Err(NotSent::Never(error)) => Outcome::GiveUp(error),
                },
                (Err(e), Ok(Some(_))) => {
                    Outcome::Retry { error: format!("bad SMTP configuration: {e}"), retry_after: None }
                }
            };
            let result =
                self.settle_attempt(Outbox::Emails, &email.email_id, &token, email.attempts, outcome, self.now());
            let recorded = self.store.write_outbox(|db| db.finish_attempt(&result));
            if let Some(observer) = &self.config().observer {
                // Told even when the outcome could not be written: the attempt was made.
                let outcome = match (&recorded, &result.settled) {
                    (Err(_), _) => "unrecorded",
                    (Ok(_), Settled::Done) => "sent",
                    (Ok(_), Settled::Retry { .. }) => "retrying",
                    (Ok(_), Settled::Failed(_) | Settled::NoTarget) => "failed",
                };
                observer.email_attempted(
                    &email.email_id,
                    &email.order_id,
                    email.attempts,
                    outcome,
                    result.settled.error(),
                );
            }
            recorded?;
            report.count(&result.settled);
        }
        Ok(report)
    }
}
