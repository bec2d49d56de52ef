//! The service's payment and lifecycle calls: recording, confirming and rejecting
//! payments, expiry, cancellation, `mark_paid`, rates and sandbox simulation, over the
//! rules of [`crate::payments`] and [`crate::lifecycle`].

use crate::environment::Environment;
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{self, Merchant};
use crate::lifecycle::{self, EventType, Trigger};
use crate::money;
use crate::orders::{OrderStatus, OrderWithInvoice};
use crate::render;
use crate::storage::Conn;
use crate::time::Timestamp;
use rust_decimal::{Decimal, RoundingStrategy};

use super::Service;
use crate::payments::*;

impl Service {
    fn require_sandbox(&self) -> Result<()> {
        if self.environment() == Environment::Sandbox {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::SandboxOnly))
        }
    }

    /// The order with its invoice in this service's environment, whoever owns it. For
    /// the host (chain watcher, payment page, CLI); merchants use [`Service::get_order`].
    pub fn order(&self, order_id: &str) -> Result<OrderWithInvoice> {
        let order_id = crate::service::canonical_order_id(order_id)?;
        let read = self
            .store
            .read(|db| db.order_in_environment(self.environment(), &order_id))?
            .ok_or_else(|| Error::new(ErrorKind::OrderNotFound))?;
        self.as_it_stands(read, self.now())
    }

    /// Orders of this service's environment of any merchant (or one, `user_id`), newest
    /// first: for the host's operators (`coinorder orders list`), not for merchants.
    /// Orders past their deadline are moved first, as for [`Service::list_orders`].
    pub fn host_orders(&self, query: &crate::HostOrderQuery) -> Result<Vec<crate::Order>> {
        if query.limit == 0 || query.limit > crate::HOST_LIST_MAX_LIMIT {
            return Err(Error::invalid(
                "limit",
                format!("must be an integer from 1 to {}", crate::HOST_LIST_MAX_LIMIT),
            ));
        }
        let since = query.since.map_or(i64::MIN, Timestamp::as_millis);
        // As a merchant's list: no state, and no status filter, shows an order still
        // open after its deadline.
        let now = self.now();
        let read = || {
            self.store.read(|db| {
                let orders =
                    db.host_orders(self.environment(), query.user_id, query.status, since, i64::from(query.limit))?;
                Ok((orders, db.any_order_due_for_expiry(self.environment(), now.as_millis())?))
            })
        };
        self.page_as_it_stands(now, read()?, || Ok(read()?.0))
    }

    /// Sandbox only, a test clock for expiry: every open (NEW, PENDING) invoice's quote
    /// deadline moves `by` earlier, as if that much time had passed for it, and whatever
    /// is due now expires at once ([`Service::expire_due`]). Events and `updated_at` keep
    /// the real time.
    pub fn advance_sandbox_clock(&self, by: std::time::Duration) -> Result<ExpiryReport> {
        self.require_sandbox()?;
        let by_ms = i64::try_from(by.as_millis())
            .ok()
            .filter(|ms| *ms <= i64::from(u32::MAX) * 1000)
            .ok_or_else(|| Error::invalid("minutes", "is too large"))?;
        self.store.write(|db| db.advance_open_deadlines(self.environment(), by_ms))?;
        self.expire_due(self.now())
    }

    /// The payment with transaction id `txid` in this environment, or `PAYMENT_NOT_FOUND`.
    pub fn payment(&self, txid: &str) -> Result<Payment> {
        self.store
            .read(|db| db.payment_by_txid(self.environment(), txid))?
            .ok_or_else(|| Error::new(ErrorKind::PaymentNotFound(txid.to_string())))
    }

    /// Every event of an order, by sequence.
    pub fn order_events(&self, order_id: &str) -> Result<Vec<Event>> {
        let order_id = self.order(order_id)?.order.order_id;
        self.store.read(|db| db.events_for_order(&order_id))
    }

    /// One event by id.
    pub fn event(&self, event_id: &str) -> Result<Event> {
        self.store
            .read(|db| db.event_by_id(event_id))?
            .filter(|event| event.environment == self.environment())
            .ok_or_else(|| Error::new(ErrorKind::EventNotFound(event_id.to_string())))
    }

    /// Every payment recorded for an order, oldest first.
    pub fn order_payments(&self, order_id: &str) -> Result<Vec<Payment>> {
        let order_id = self.order(order_id)?.order.order_id;
        self.store.read(|db| db.payments_for_order(&order_id))
    }

    fn load_for_update(&self, db: &Conn<'_>, order_id: &str) -> Result<OrderWithInvoice> {
        let order_id = crate::service::canonical_order_id(order_id)?;
        db.order_in_environment(self.environment(), &order_id)?.ok_or_else(|| Error::new(ErrorKind::OrderNotFound))
    }

    /// Applies `trigger` to the order through the state machine, stores the new state and
    /// writes its event, all inside the caller's transaction.
    ///
    /// With the order's `payments`, the received amounts are brought up to date for the
    /// new state too (see [`Service::refresh_received`]).
    fn apply(
        &self,
        db: &Conn<'_>,
        current: &mut OrderWithInvoice,
        trigger: Trigger,
        now: Timestamp,
        payments: Option<&[Payment]>,
    ) -> Result<Event> {
        let previous = current.order.status;
        let (next, event_type) = lifecycle::next_state(previous, trigger)
            .ok_or_else(|| Error::new(ErrorKind::InvalidTransition { from: previous, trigger }))?;
        current.order.status = next;
        current.invoice.status = next;
        current.order.updated_at = now;
        current.invoice.updated_at = now;
        if trigger == Trigger::MarkedPaid {
            current.order.marked_paid = true;
        }
        if let Some(payments) = payments {
            Self::refresh_received(current, payments)?;
        }
        db.update_order_state(current)?;
        self.emit(db, current, event_type, previous, now, None)
    }

    /// Writes an event for the order's current state.
    fn emit(
        &self,
        db: &Conn<'_>,
        current: &OrderWithInvoice,
        event_type: EventType,
        previous: OrderStatus,
        now: Timestamp,
        late_payment: Option<&Payment>,
    ) -> Result<Event> {
        let sequence = db.take_event_sequence(&current.order.order_id)?;
        let mut payload = render::event_payload(event_type, now, current, sequence, previous);
        if let (Some(payment), Some(data)) = (late_payment, payload.get_mut("data")) {
            // order.paid_late names the money that came late: the merchant decides on it.
            data["payment"] = render::late_payment(payment);
        }
        let payload = payload.to_string();
        let event = Event {
            event_id: format!("msg_{}", keys::random_id(24)),
            order_id: current.order.order_id.clone(),
            environment: current.order.environment,
            sequence,
            event_type,
            previous_status: previous,
            status: current.order.status,
            payload,
            created_at: now,
        };
        db.insert_event(&event)?;
        Ok(event)
    }

    /// Re-reads the order's payments, updates the received amounts and moves the order
    /// where its payments now put it.
    fn reevaluate(
        &self,
        db: &Conn<'_>,
        current: &mut OrderWithInvoice,
        now: Timestamp,
        just_rejected: bool,
    ) -> Result<Vec<Event>> {
        let payments = db.payments_for_order(&current.order.order_id)?;
        let confirmed = sum(&payments, |p| p.counts && p.state == PaymentState::Confirmed)?;
        let seen = payments.iter().any(|p| p.counts && p.state != PaymentState::Rejected);
        let awaiting = payments.iter().any(|p| p.counts && p.state == PaymentState::Unconfirmed);

        let status = current.order.status;
        let expired = now >= current.invoice.expired_at;
        let trigger = if status.is_terminal() {
            None
        } else if confirmed >= current.invoice.amount {
            Some(Trigger::PaymentsCover)
        } else if status == OrderStatus::Pending && just_rejected {
            Some(Trigger::PaymentRejected)
        } else if status == OrderStatus::New && seen {
            Some(Trigger::PaymentSeen)
        } else if status == OrderStatus::Pending && expired && !awaiting {
            Some(Trigger::ExpiredShort)
        } else if status == OrderStatus::New && expired && !seen {
            Some(Trigger::ExpiredUnpaid)
        } else {
            None
        };
        match trigger {
            Some(trigger) => Ok(vec![self.apply(db, current, trigger, now, Some(&payments))?]),
            None => {
                if Self::refresh_received(current, &payments)? {
                    current.order.updated_at = now;
                    current.invoice.updated_at = now;
                    db.update_order_state(current)?;
                }
                Ok(Vec::new())
            }
        }
    }

    /// Sets the order's `receive_amount` and `receive_currency` from its `payments` and
    /// its state; true if they changed.
    ///
    /// The amount is the fiat value, at the quoted rate, of the payments not rejected; the
    /// currency is `""` until a payment is seen, then the order's fiat code (DESIGN §5), a
    /// payment rejected later included. A payment first seen after the order ended
    /// (`counts` false) "changes nothing until the merchant calls `mark_paid`" (DESIGN §6):
    /// it is left out of both until the order is PAID.
    fn refresh_received(current: &mut OrderWithInvoice, payments: &[Payment]) -> Result<bool> {
        let paid = current.order.status == OrderStatus::Paid;
        let shown = |payment: &Payment| payment.counts || paid;
        let received = sum(payments, |p| shown(p) && p.state != PaymentState::Rejected)?;
        let receive_currency = if payments.iter().any(shown) { current.order.currency.clone() } else { String::new() };
        let minor_units = money::stored_minor_units(&current.order.currency).unwrap_or(2);
        let receive_amount = money::fiat_value_floor(received, current.invoice.rate, minor_units)
            .map(|fiat| fiat.normalize())
            .ok_or_else(|| Error::invalid("amount", "the payments of this order are worth more than can be counted"))?;
        let changed =
            receive_currency != current.order.receive_currency || receive_amount != current.invoice.receive_amount;
        current.order.receive_currency = receive_currency.clone();
        current.invoice.receive_currency = receive_currency;
        current.invoice.receive_amount = receive_amount;
        Ok(changed)
    }

    /// Records a payment seen on chain for an order (the host's chain watcher calls this).
    ///
    /// Idempotent by `txid`: recording it again changes nothing, except that a repeat
    /// with `confirmed = true` confirms a payment recorded unconfirmed. A payment first
    /// seen after the quote expired is recorded, emits `order.paid_late` and changes
    /// nothing until [`Service::mark_paid`].
    pub fn record_payment(
        &self,
        order_id: &str,
        txid: &str,
        amount: Decimal,
        confirmed: bool,
    ) -> Result<PaymentOutcome> {
        if amount <= Decimal::ZERO {
            return Err(Error::invalid("amount", "must be greater than 0"));
        }
        if amount > MAX_PAYMENT_AMOUNT {
            return Err(Error::invalid("amount", format!("must be at most {MAX_PAYMENT_AMOUNT}")));
        }
        self.record(order_id, txid, PaidAmount::Exact(amount), confirmed, false)
    }

    /// [`Service::record_payment`] with the amount decided inside the write transaction
    /// (so two simulated "pay what is due" calls can never both pay in full); with
    /// `open_orders_only`, an order that is already finished is refused instead of paid late.
    fn record(
        &self,
        order_id: &str,
        txid: &str,
        requested: PaidAmount,
        confirmed: bool,
        open_orders_only: bool,
    ) -> Result<PaymentOutcome> {
        let txid = txid.trim();
        if txid.is_empty() || txid.chars().count() > TXID_MAX_CHARS || txid.chars().any(char::is_control) {
            return Err(Error::invalid("txid", format!("must be 1 to {TXID_MAX_CHARS} printable characters")));
        }
        let environment = self.environment();
        let now = self.now();
        self.store.write(|db| {
            let mut current = self.load_for_update(db, order_id)?;
            if open_orders_only && current.order.status.is_terminal() {
                return Err(Error::new(ErrorKind::InvalidTransition {
                    from: current.order.status,
                    trigger: Trigger::PaymentSeen,
                }));
            }
            let decimals = money::coin_decimals(&current.invoice.currency).unwrap_or(18);
            let amount = match requested {
                PaidAmount::Exact(amount) => amount.normalize(),
                PaidAmount::Due | PaidAmount::HalfDue => {
                    let payments = db.payments_for_order(&current.order.order_id)?;
                    let due = due_on(&current, &payments)?;
                    if due <= Decimal::ZERO {
                        return Err(Error::invalid(
                            "amount",
                            format!("nothing is due on this order (it is {})", current.order.status),
                        ));
                    }
                    let half = (due / Decimal::TWO).round_dp_with_strategy(decimals, RoundingStrategy::ToZero);
                    // The smallest unit cannot be halved: pay it whole.
                    if requested == PaidAmount::HalfDue && !half.is_zero() { half } else { due }.normalize()
                }
            };
            if let Some(existing) = db.payment_by_txid(environment, txid)? {
                if existing.order_id != current.order.order_id {
                    return Err(Error::invalid("txid", "is already recorded for another order"));
                }
                if existing.amount != amount {
                    return Err(Error::invalid(
                        "amount",
                        format!("txid {txid:?} is already recorded with amount {}", existing.amount),
                    ));
                }
                if confirmed && existing.state != PaymentState::Confirmed {
                    // A watcher reporting the payment final: the same as confirm_payment.
                    return self.settle(db, existing, PaymentState::Confirmed, now);
                }
                return Ok(PaymentOutcome { payment: existing, order: current, events: Vec::new(), duplicate: true });
            }
            if amount.scale() > decimals {
                return Err(Error::invalid(
                    "amount",
                    format!("{} allows at most {decimals} decimal places", current.invoice.currency),
                ));
            }
            let mut events = Vec::new();
            let quote_open = now < current.invoice.expired_at;
            if current.order.status == OrderStatus::New && !quote_open {
                events.push(self.apply(db, &mut current, Trigger::ExpiredUnpaid, now, None)?);
            }
            let counts = quote_open && !current.order.status.is_terminal();
            let state = if confirmed { PaymentState::Confirmed } else { PaymentState::Unconfirmed };
            let payment = Payment {
                txid: txid.to_string(),
                order_id: current.order.order_id.clone(),
                amount,
                currency: current.invoice.currency.clone(),
                state,
                counts,
                seen_at: now,
                settled_at: confirmed.then_some(now),
            };
            db.insert_payment(environment, &payment)?;
            // Keep the received amounts true (and move the order if the payment counts; a
            // late one changes nothing).
            events.extend(self.reevaluate(db, &mut current, now, false)?);
            if !counts && current.order.status != OrderStatus::Paid {
                // Money came after the quote: tell the merchant, who decides (mark_paid).
                let status = current.order.status;
                events.push(self.emit(db, &current, EventType::PaidLate, status, now, Some(&payment))?);
            }
            Ok(PaymentOutcome { payment, order: current, events, duplicate: false })
        })
    }

    /// Marks a recorded payment final. Confirming twice is a no-op; a rejected payment
    /// cannot be confirmed.
    pub fn confirm_payment(&self, txid: &str) -> Result<PaymentOutcome> {
        self.settle_txid(txid, PaymentState::Confirmed)
    }

    /// Marks a recorded payment as never final; a PENDING order it was paying fails.
    /// Rejecting twice is a no-op; a confirmed payment cannot be rejected.
    pub fn reject_payment(&self, txid: &str) -> Result<PaymentOutcome> {
        self.settle_txid(txid, PaymentState::Rejected)
    }

    fn settle_txid(&self, txid: &str, to: PaymentState) -> Result<PaymentOutcome> {
        self.settle_txid_marking(txid, to, false)
    }

    /// [`Service::reject_payment`] by the chain watcher of a payment that vanished from
    /// the chain: marked so in the same transaction, so the mark is never lost between
    /// the two (the watcher records such a payment anew if it comes back).
    pub(crate) fn reject_vanished_payment(&self, txid: &str) -> Result<PaymentOutcome> {
        self.settle_txid_marking(txid, PaymentState::Rejected, true)
    }

    fn settle_txid_marking(&self, txid: &str, to: PaymentState, vanished: bool) -> Result<PaymentOutcome> {
        let now = self.now();
        self.store.write(|db| {
            let payment = db
                .payment_by_txid(self.environment(), txid.trim())?
                .ok_or_else(|| Error::new(ErrorKind::PaymentNotFound(txid.to_string())))?;
            let outcome = self.settle(db, payment, to, now)?;
            if vanished && !outcome.duplicate {
                db.mark_payment_vanished(self.environment(), &outcome.payment.txid)?;
            }
            Ok(outcome)
        })
    }

    fn settle(&self, db: &Conn<'_>, payment: Payment, to: PaymentState, now: Timestamp) -> Result<PaymentOutcome> {
        let mut current = self.load_for_update(db, &payment.order_id)?;
        if payment.state == to {
            return Ok(PaymentOutcome { payment, order: current, events: Vec::new(), duplicate: true });
        }
        if payment.state != PaymentState::Unconfirmed {
            return Err(Error::new(ErrorKind::PaymentSettled { txid: payment.txid, state: payment.state }));
        }
        db.settle_payment(self.environment(), &payment.txid, to, now)?;
        let payment = Payment { state: to, settled_at: Some(now), ..payment };
        let mut events = self.reevaluate(db, &mut current, now, to == PaymentState::Rejected && payment.counts)?;
        let status = current.order.status;
        let final_on_a_dead_order = payment.counts && to == PaymentState::Confirmed && events.is_empty();
        if final_on_a_dead_order && status.is_terminal() && status != OrderStatus::Paid {
            // Money seen in time became final after the order failed (another of its
            // payments was rejected): nothing moves by itself, so tell the merchant, who
            // may accept it with mark_paid. Like any late payment it changes nothing else.
            events.push(self.emit(db, &current, EventType::PaidLate, status, now, Some(&payment))?);
        } else if !payment.counts && (status != OrderStatus::Paid || announced_late(db, &payment)?) {
            // A late payment the merchant was told of (`order.paid_late`, state
            // unconfirmed) became final or was rejected: they may have accepted it with
            // mark_paid, or be about to, so the news goes out the same way, with its state.
            // (One first seen on an order already PAID was excess, announced by nothing.)
            events.push(self.emit(db, &current, EventType::PaidLate, status, now, Some(&payment))?);
        }
        Ok(PaymentOutcome { payment, order: current, events, duplicate: false })
    }

    /// Accepts a late or short payment by hand: EXPIRED or FAILED → PAID, with an
    /// `order.paid` event saying it was marked by the merchant. Payments that came late
    /// count in `receive_amount` from then on.
    ///
    /// It is the merchant's word and asks for no recorded payment (a customer may have
    /// paid another way): an order marked paid with nothing received shows
    /// `receive_amount` 0. Check [`Service::order_payments`] first.
    pub fn mark_paid(&self, order_id: &str) -> Result<OrderWithInvoice> {
        let now = self.now();
        self.store.write(|db| {
            let mut current = self.load_for_update(db, order_id)?;
            // The payments it accepts now count as received.
            let payments = db.payments_for_order(&current.order.order_id)?;
            self.apply(db, &mut current, Trigger::MarkedPaid, now, Some(&payments))?;
            Ok(current)
        })
    }

    /// The merchant cancels an order of theirs (only a NEW order can be cancelled).
    pub fn cancel_order(&self, merchant: &Merchant, order_id: &str) -> Result<OrderWithInvoice> {
        self.get_order(merchant, order_id)?;
        Ok(self.cancel(order_id)?.0)
    }

    /// The customer cancels on the payment page (only a NEW order can be cancelled).
    pub fn customer_cancel(&self, order_id: &str) -> Result<OrderWithInvoice> {
        Ok(self.cancel(order_id)?.0)
    }

    /// Cancels a NEW order; returns it with the `order.cancelled` event.
    fn cancel(&self, order_id: &str) -> Result<(OrderWithInvoice, Event)> {
        let now = self.now();
        let cancelled = self.store.write(|db| {
            let mut current = self.load_for_update(db, order_id)?;
            if current.order.status == OrderStatus::New && now >= current.invoice.expired_at {
                // The quote ran out before the cancel arrived: record the expiry (that is
                // what happened), then refuse the cancel below, outside this transaction.
                self.apply(db, &mut current, Trigger::ExpiredUnpaid, now, None)?;
                return Ok(None);
            }
            let event = self.apply(db, &mut current, Trigger::Cancelled, now, None)?;
            Ok(Some((current, event)))
        })?;
        cancelled.ok_or_else(|| {
            Error::new(ErrorKind::InvalidTransition { from: OrderStatus::Expired, trigger: Trigger::Cancelled })
        })
    }

    /// Moves every order of this environment whose quote expired by `now`: NEW →
    /// EXPIRED, PENDING with confirmed payments short and none awaiting confirmation →
    /// FAILED. Works in transactions of at most [`EXPIRY_BATCH`] orders with a pause of
    /// [`EXPIRY_PAUSE`] between them, so API writes keep flowing while a backlog clears;
    /// on SQLite a transaction ends after [`EXPIRY_MIN_BATCH`] orders when an API write
    /// is waiting, which then waits for a few orders' work rather than a whole batch.
    pub fn expire_due(&self, now: Timestamp) -> Result<ExpiryReport> {
        let mut report = ExpiryReport::default();
        loop {
            let (batch, changed, moved, gave_way) = self.store.write(|db| {
                let due = db.orders_due_for_expiry(self.environment(), now.as_millis(), EXPIRY_BATCH as i64)?;
                let mut moved = ExpiryReport::default();
                let mut changed = 0;
                for (done, order_id) in due.iter().enumerate() {
                    if done >= EXPIRY_MIN_BATCH && self.store.writer_wanted() {
                        return Ok((due.len(), changed, moved, true));
                    }
                    let (_, events) = self.expire_one(db, order_id, now)?;
                    changed += usize::from(!events.is_empty());
                    for event in events {
                        match event.status {
                            OrderStatus::Expired => moved.expired += 1,
                            OrderStatus::Failed => moved.failed += 1,
                            _ => {}
                        }
                    }
                }
                Ok((due.len(), changed, moved, false))
            })?;
            report.expired += moved.expired;
            report.failed += moved.failed;
            // A full batch, or one that gave way, may mean more are due; a batch that
            // moved nothing would only be selected again, so it ends the call.
            if (batch < EXPIRY_BATCH && !gave_way) || changed == 0 {
                return Ok(report);
            }
            std::thread::sleep(EXPIRY_PAUSE);
        }
    }

    /// `read` as it stands at `now`. An open order whose quote ran out is moved by the
    /// next expiry sweep ([`Service::expire_due`], the worker `serve` runs); read before
    /// that sweep (or in a host that runs none) it is moved first, here, as the sweep
    /// would move it, with its event (DESIGN §6), so that a read does not show it still
    /// open.
    ///
    /// Only when the writer is free right now: a read never waits for a write (another
    /// process may hold the writer for long), so while one is in progress the order is
    /// returned as read, and the sweep, or a later read, moves it. A PENDING order still
    /// waiting for a payment to confirm stays as it is (the sweep leaves it too), found
    /// by a read, so that polling it never takes the writer.
    pub(crate) fn as_it_stands(&self, read: OrderWithInvoice, now: Timestamp) -> Result<OrderWithInvoice> {
        if read.order.status.is_terminal() || now < read.invoice.expired_at {
            return Ok(read);
        }
        let order_id = read.order.order_id.clone();
        if read.order.status == OrderStatus::Pending {
            let payments = self.store.read(|db| db.payments_for_order(&order_id))?;
            if payments.iter().any(|p| p.counts && p.state == PaymentState::Unconfirmed) {
                return Ok(read);
            }
        }
        let moved = self.store.try_write(|db| self.expire_one(db, &order_id, now));
        Ok(match moved {
            Ok(Some((current, _))) => current,
            // Busy, or failed: the read did not, and the sweep moves the order later.
            Ok(None) | Err(_) => read,
        })
    }

    /// A page of orders as it stands at `now`, from a page `read` with whether any open
    /// order of the environment was past its deadline then (looked up in the same
    /// snapshot). When one was and the writer is free right now, one batch of the sweep
    /// ([`EXPIRY_BATCH`] orders, oldest deadline first) runs first and the page is read
    /// again (`read_again`), so that no state, and no status filter, shows an order still
    /// open after its deadline. Otherwise, as for [`Service::as_it_stands`], the page is
    /// returned as read: a read never waits for a write, nor pays for a whole backlog.
    pub(crate) fn page_as_it_stands<T>(
        &self,
        now: Timestamp,
        (page, overdue): (T, bool),
        read_again: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        if overdue && self.sweep_once_if_free(now) {
            read_again()
        } else {
            Ok(page)
        }
    }

    /// One batch of [`Service::expire_due`] if the writer is free right now; true when
    /// it ran.
    fn sweep_once_if_free(&self, now: Timestamp) -> bool {
        let swept = self.store.try_write(|db| {
            for order_id in db.orders_due_for_expiry(self.environment(), now.as_millis(), EXPIRY_BATCH as i64)? {
                self.expire_one(db, &order_id, now)?;
            }
            Ok(())
        });
        matches!(swept, Ok(Some(())))
    }

    /// Moves one order past its deadline as the sweep does (inside the caller's
    /// transaction): the order as it is then, and the events written.
    fn expire_one(&self, db: &Conn<'_>, order_id: &str, now: Timestamp) -> Result<(OrderWithInvoice, Vec<Event>)> {
        let mut current = self.load_for_update(db, order_id)?;
        let events = self.reevaluate(db, &mut current, now, false)?;
        Ok((current, events))
    }

    // ----- Rates -----

    /// The accepted coins (`Config::pay_currencies`) that orders cannot be quoted in yet:
    /// no rate source and no rate set for any fiat currency. Empty in the sandbox, which
    /// has built-in test rates.
    pub fn coins_without_rates(&self) -> Result<Vec<String>> {
        if self.environment() == Environment::Sandbox || self.config().rate_source.is_some() {
            return Ok(Vec::new());
        }
        let rates = self.list_rates()?;
        let config = self.config();
        Ok(config
            .pay_currencies
            .iter()
            .filter(|coin| !rates.iter().any(|rate| &rate.crypto == *coin))
            .cloned()
            .collect())
    }

    /// Sets (or replaces) the rate for `crypto` priced in `fiat` in this environment:
    /// fiat units per one coin, valid until `valid_until` when given.
    pub fn set_rate(&self, crypto: &str, fiat: &str, rate: Decimal, valid_until: Option<Timestamp>) -> Result<Rate> {
        if money::coin_decimals(crypto).is_none() {
            return Err(Error::invalid("crypto", format!("unknown coin {crypto:?}")));
        }
        money::fiat_minor_units("fiat", fiat)?;
        if rate <= Decimal::ZERO {
            return Err(Error::invalid("rate", "must be greater than 0"));
        }
        // A rate past its end is never used: setting one is a mistake to report, not a
        // row to keep. Past the year 9999 a time has no ISO 8601 form to show.
        const LAST_SHOWN_MS: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
        match valid_until {
            Some(until) if until <= self.now() => {
                return Err(Error::invalid("valid_until", "must be in the future (a rate past it is never used)"))
            }
            Some(until) if until.as_millis() > LAST_SHOWN_MS => {
                return Err(Error::invalid("valid_until", "must be before the year 10000"))
            }
            _ => {}
        }
        let rate = Rate {
            environment: self.environment(),
            crypto: crypto.to_string(),
            fiat: fiat.to_string(),
            rate: rate.normalize(),
            valid_until,
            updated_at: self.now(),
        };
        self.store.write(|db| db.upsert_rate(&rate))?;
        self.rate_memo.remember(crypto, fiat, Some(rate.clone()));
        Ok(rate)
    }

    /// The host-set rates of this environment.
    pub fn list_rates(&self) -> Result<Vec<Rate>> {
        self.store.read(|db| db.rates(self.environment()))
    }

    /// Removes a host-set rate (the sandbox's built-in rate, if any, applies again).
    pub fn delete_rate(&self, crypto: &str, fiat: &str) -> Result<()> {
        if self.store.write(|db| db.delete_rate(self.environment(), crypto, fiat))? {
            self.rate_memo.remember(crypto, fiat, None);
            Ok(())
        } else {
            Err(Error::invalid("rate", format!("no rate set for {crypto}/{fiat}")))
        }
    }

    /// The rate to quote `crypto` in `fiat` now: the host's rate source first, then the
    /// rate table (unless expired), then the sandbox's built-in test rates.
    pub fn current_rate(&self, crypto: &str, fiat: &str) -> Result<Decimal> {
        if let Some(rate) = self.host_rate(crypto, fiat) {
            return Ok(rate);
        }
        let now = self.now();
        let row = self.store.read(|db| db.rate(self.environment(), crypto, fiat))?;
        self.table_rate(row.as_ref(), crypto, fiat, now)
    }

    /// What is still due on an order, in its invoice's crypto currency: the invoice
    /// amount less the payments that count toward it and were not rejected (never < 0);
    /// 0 once the order is PAID, marked paid by hand included.
    pub fn amount_due(&self, order_id: &str) -> Result<Decimal> {
        let order_id = crate::service::canonical_order_id(order_id)?;
        self.store.read(|db| {
            let current = db
                .order_in_environment(self.environment(), &order_id)?
                .ok_or_else(|| Error::new(ErrorKind::OrderNotFound))?;
            due_on(&current, &db.payments_for_order(&order_id)?)
        })
    }

    // ----- Sandbox simulation -----

    /// The sandbox payment page's "Simulate payment" button: the customer pays what is
    /// still due, confirmed. Only an open order (NEW or PENDING) is paid; a finished one is
    /// refused with `ORDER_STATE_INVALID`, decided in the same transaction as the payment.
    pub fn customer_simulate_payment(&self, order_id: &str) -> Result<OrderWithInvoice> {
        self.require_sandbox()?;
        let txid = format!("sandbox_tx_{}", keys::random_id(24));
        Ok(self.record(order_id, &txid, PaidAmount::Due, true, true)?.order)
    }

    /// Sandbox only: creates a fresh order of 19.99 USD for `merchant` and drives it with
    /// simulation steps until it emits `wanted` (`order.failed`: an unconfirmed payment,
    /// then rejected; `order.paid_late`: expiry, then a payment), so a webhook receiver
    /// can be tried on every event type. Returns the order after the last step with every
    /// event it emitted (`coinorder sandbox trigger`).
    pub fn trigger_sandbox_event(
        &self,
        merchant: &Merchant,
        wanted: EventType,
    ) -> Result<(OrderWithInvoice, Vec<Event>)> {
        self.require_sandbox()?;
        let request = crate::CreateOrder {
            currency: "USD".into(),
            amount: Decimal::new(1999, 2),
            title: Some(format!("sandbox trigger {}", wanted.as_str())),
            ..Default::default()
        };
        let order_id = self.create_order(merchant, &request)?.order.order.order_id;
        let pay = |confirmed| SimulateAction::Pay { amount: None, confirmed };
        let steps = match wanted {
            EventType::Pending => vec![SimulateAction::Partial { amount: None, confirmed: true }],
            EventType::Paid => vec![pay(true)],
            EventType::Failed => vec![pay(false), SimulateAction::Reject],
            EventType::Cancelled => vec![SimulateAction::Cancel],
            EventType::Expired => vec![SimulateAction::Expire],
            EventType::PaidLate => vec![SimulateAction::Expire, pay(true)],
        };
        let mut events = Vec::new();
        let mut order = None;
        for step in &steps {
            let done = self.simulate(&order_id, step)?;
            events.extend(done.events);
            order = Some(done.order);
        }
        match order {
            Some(order) if events.iter().any(|event| event.event_type == wanted) => Ok((order, events)),
            _ => Err(Error::new(ErrorKind::Internal(format!("order {order_id} did not emit {}", wanted.as_str())))),
        }
    }

    /// Runs one sandbox simulation step on an order (sandbox only) and reports what it
    /// did: the payments it made or settled and the events it emitted, with the order
    /// after the step.
    pub fn simulate(&self, order_id: &str, action: &SimulateAction) -> Result<Simulation> {
        self.require_sandbox()?;
        let txid = || format!("sandbox_tx_{}", keys::random_id(24));
        // An explicit amount is checked like any chain watcher's; a derived one is
        // decided inside the payment's own transaction.
        let pay = |amount: Option<Decimal>, derived: PaidAmount, confirmed: bool| -> Result<Simulation> {
            let outcome = match amount {
                Some(amount) => self.record_payment(order_id, &txid(), amount, confirmed)?,
                None => self.record(order_id, &txid(), derived, confirmed, false)?,
            };
            Ok(Simulation { order: outcome.order, payments: vec![outcome.payment], events: outcome.events })
        };
        match action {
            SimulateAction::Pay { amount, confirmed } => pay(*amount, PaidAmount::Due, *confirmed),
            SimulateAction::Partial { amount, confirmed } => pay(*amount, PaidAmount::HalfDue, *confirmed),
            SimulateAction::Confirm | SimulateAction::Reject => {
                let to =
                    if *action == SimulateAction::Confirm { PaymentState::Confirmed } else { PaymentState::Rejected };
                let waiting: Vec<Payment> = self
                    .order_payments(order_id)?
                    .into_iter()
                    .filter(|p| p.state == PaymentState::Unconfirmed)
                    .collect();
                if waiting.is_empty() {
                    return Err(Error::invalid("action", "the order has no unconfirmed payment"));
                }
                let mut done = Simulation { order: self.order(order_id)?, payments: Vec::new(), events: Vec::new() };
                for payment in waiting {
                    let outcome = self.settle_txid(&payment.txid, to)?;
                    done.order = outcome.order;
                    done.payments.push(outcome.payment);
                    done.events.extend(outcome.events);
                }
                Ok(done)
            }
            SimulateAction::Cancel => {
                let (order, event) = self.cancel(order_id)?;
                Ok(Simulation { order, payments: Vec::new(), events: vec![event] })
            }
            SimulateAction::Expire => {
                let now = self.now();
                self.store.write(|db| {
                    let mut current = self.load_for_update(db, order_id)?;
                    if current.order.status.is_terminal() {
                        return Err(Error::new(ErrorKind::InvalidTransition {
                            from: current.order.status,
                            trigger: Trigger::ExpiredUnpaid,
                        }));
                    }
                    current.invoice.expired_at = current.invoice.expired_at.min(now);
                    current.order.updated_at = now;
                    current.invoice.updated_at = now;
                    db.update_order_state(&current)?;
                    let events = self.reevaluate(db, &mut current, now, false)?;
                    Ok(Simulation { order: current, payments: Vec::new(), events })
                })
            }
        }
    }
}

/// Whether an `order.paid_late` event of its order already named `payment`.
fn announced_late(db: &Conn<'_>, payment: &Payment) -> Result<bool> {
    let named = format!("\"txid\":{}", serde_json::Value::from(payment.txid.as_str()));
    Ok(db
        .events_for_order(&payment.order_id)?
        .iter()
        .any(|event| event.event_type == EventType::PaidLate && event.payload.contains(&named)))
}
