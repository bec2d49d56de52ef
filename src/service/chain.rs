//! The chain watcher: what a payment seen on chain means for its order.
//!
//! One pass ([`Service::watch_chain_due`]) per configured chain:
//! 1. **Discovery.** Payments to the derived addresses of invoices that may still be paid
//!    (open ones, and for a day after expiry, when a payment is `order.paid_late`) are
//!    recorded unconfirmed, which moves a NEW order to PENDING. Bitcoin asks the Esplora
//!    API for each address's transactions; Ethereum scans new blocks for ETH transfers
//!    and asks the node for the token contracts' `Transfer` logs, going on from a stored
//!    cursor so that nothing mined while the watcher was down is missed. A token's
//!    values are read in the decimals its contract declares, not the coin's.
//! 2. **Follow-up.** Each unconfirmed payment to a derived address is looked up again
//!    (at most [`FOLLOW_UP_LIMIT`] a pass, each pass going on after the last):
//!    deep enough (the configured confirmations) → confirmed, which pays the order once
//!    confirmed payments cover it; gone from the chain and the mempool (replaced, dropped,
//!    or reorganised away) on [`MISSING_PASSES`] passes in a row over [`MISSING_FOR`] →
//!    rejected, which fails a PENDING order (DESIGN §6); seen on the chain again later,
//!    it is recorded anew ([`Service::sighting_id`]). A vanished payment whose order has another payment
//!    still on its way (a replacement by fee bump pays the same address) is rejected
//!    only once that one is no longer unconfirmed, so a replacement never fails the
//!    order it pays in full.
//!
//! Everything goes through [`Service::record_payment`], [`Service::confirm_payment`] and
//! [`Service::reject_payment`]: the watcher adds no rule of its own to the state machine.
//!
//! Payment ids: an Ethereum payment is its transaction hash; a Bitcoin payment is the
//! outpoint `txid:vout` of its first output to the address, so one transaction paying
//! several invoices (an exchange's batch payout) is several payments.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;

use super::Service;
use crate::chain::esplora::{sats_to_btc, EsploraClient, TransactionStatus};
use crate::chain::ethereum::{units_to_decimal, EthereumClient, TokenTransfer};
use crate::config::{BitcoinWatch, EthereumWatch};
use crate::error::{Error, ErrorKind, Result};
use crate::money;
use crate::payments::{Payment, PaymentState};
use crate::storage::WatchedInvoice;
use crate::time::Timestamp;

/// How long one request to a chain endpoint may take.
const CHAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long after its quote expired an invoice's address is still watched, whatever the
/// order's state, so a late payment (`order.paid_late`), a payment to a cancelled order
/// or one more to a paid order is recorded for the merchant to decide on.
const LATE_WATCH: Duration = Duration::from_secs(24 * 3600);
/// Most unconfirmed payments one pass of a chain follows up (a request or two each): the
/// next pass goes on after the last one followed, and wraps around, so each is followed
/// at least once every ⌈n / 1,000⌉ passes however many wait. (Every watched invoice is
/// read each pass: an Ethereum block scanned without an invoice's address is never
/// scanned for it again.)
const FOLLOW_UP_LIMIT: usize = 1000;
/// How far a block's time may trail the moment it was mined: miners stamp blocks
/// loosely, and the network accepts times well behind real time (consensus only asks
/// for more than the median of the 11 blocks before). A payment in a block stamped
/// this long before its invoice was made was made before, to an address used earlier.
const BLOCK_TIME_SLACK: Duration = Duration::from_secs(2 * 3600);
/// Most Ethereum blocks one pass scans; a watcher that was down catches up over passes.
const MAX_BLOCKS_PER_PASS: u64 = 200;
/// Where the first Ethereum scan starts, in blocks before the tip, when none ran before
/// and no watched invoice is older.
const FIRST_SCAN_LOOKBACK: u64 = 64;
/// How far before the tip the first Ethereum scan may start for the oldest watched
/// invoice: about 33 hours of Ethereum's 12-second blocks, more than an invoice stays
/// watched ([`LATE_WATCH`] after its quote ends).
const FIRST_SCAN_MAX: u64 = 10_000;
/// How much earlier than the oldest watched invoice the first scan starts: the block
/// times and this host's clock may disagree a little.
const FIRST_SCAN_SLACK_SECS: u64 = 120;
/// Passes in a row a payment must be unknown to the chain before it is rejected: one
/// backend of a load-balanced API that has not seen a transaction yet must not fail an
/// order for good.
pub const MISSING_PASSES: u32 = 3;
/// How long, by the service's clock, a payment must have been unknown to the chain, on
/// top of [`MISSING_PASSES`] passes, before it is rejected: an endpoint some blocks
/// behind another process's, or a mempool that refused what another accepted, does not
/// know a payment for minutes, and a rejection fails its order. Nothing waits on a
/// rejection, so waiting costs nothing. Each pass counts for at most half of it (the
/// time since the pass before, none if the clock went back), so one step of the clock
/// cannot reject a payment early, nor put its rejection off.
pub const MISSING_FOR: Duration = Duration::from_secs(10 * 60);
/// How many times a payment rejected as vanished is recorded anew when it is seen on the
/// chain again (`id:again-2`, `id:again-3`, …).
const MAX_REAPPEARANCES: u32 = 10;
/// The first pause after a chain endpoint failed; it doubles with each failure in a row.
const FIRST_BACKOFF: Duration = Duration::from_secs(5);
/// The longest pause between tries of a failing endpoint.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// What one pass of [`Service::watch_chain_due`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChainWatchReport {
    /// Payments seen for the first time and recorded (unconfirmed).
    pub recorded: usize,
    /// Payments that became deep enough and were confirmed.
    pub confirmed: usize,
    /// Payments that vanished from the chain and were rejected.
    pub rejected: usize,
    /// Chains skipped this pass because their endpoint failed recently (`bitcoin`,
    /// `ethereum`); they are tried again after a pause that doubles up to five minutes.
    pub backing_off: Vec<String>,
    /// What went wrong, one line each, naming the chain; endpoints appear only as
    /// scheme, host and port. Nothing is lost: what failed is tried again next pass.
    pub errors: Vec<String>,
}

/// What the watcher makes of a payment it followed up.
#[derive(Debug, Clone, Copy)]
enum Settlement {
    /// Deep enough: confirmed.
    Confirm,
    /// Mined but reverted: rejected, for good.
    Reject,
    /// Gone from the chain: rejected, and marked so, to be recorded anew if it comes back.
    RejectVanished,
}

/// Why a chain's pass stopped early.
enum PassFailure {
    /// The endpoint failed: back off, try again later.
    Endpoint(String),
    /// The database failed: the caller hears of it.
    Store(Error),
}

impl From<Error> for PassFailure {
    fn from(error: Error) -> Self {
        PassFailure::Store(error)
    }
}

/// What the watcher remembers between passes, in memory: the backoff of each chain and
/// how many passes in a row each unconfirmed payment was unknown to its chain.
#[derive(Debug, Default)]
pub(crate) struct WatchState {
    backoff: Mutex<HashMap<&'static str, (u32, Instant)>>,
    /// By payment id: passes in a row it was unknown, for how long it counts as unknown
    /// (ms), and the clock at the last of those passes.
    missing: Mutex<HashMap<String, (u32, i64, Timestamp)>>,
    /// Payments already reported as older than their invoice: told once per process.
    told_older: Mutex<std::collections::HashSet<String>>,
    /// The decimals each token contract declared, by lower-case address: asked once per
    /// process, as a contract's decimals do not change (a contract that declared none
    /// is asked again each pass, and is not kept here).
    token_decimals: Mutex<HashMap<String, Option<u32>>>,
    /// Where the next Bitcoin pass begins reading addresses, in the list of watched
    /// invoices: after the one a pass that gave up on the API stopped at, so an API that
    /// answers only so many requests a pass cannot keep the later invoices unread.
    addresses_from: Mutex<usize>,
    /// By chain, the last unconfirmed payment followed up (first seen, id): where the
    /// next pass's follow-up goes on.
    followed_up_to: Mutex<HashMap<&'static str, (Timestamp, String)>>,
}

impl WatchState {
    /// True the first time `payment_id` is given: whether to report it.
    fn first_telling(&self, payment_id: &str) -> bool {
        self.told_older.lock().unwrap_or_else(|p| p.into_inner()).insert(payment_id.to_string())
    }

    /// Whether `chain` may be tried now.
    fn ready(&self, chain: &'static str) -> bool {
        let backoff = self.backoff.lock().unwrap_or_else(|p| p.into_inner());
        backoff.get(chain).is_none_or(|(_, retry_at)| Instant::now() >= *retry_at)
    }

    fn failed(&self, chain: &'static str) {
        let mut backoff = self.backoff.lock().unwrap_or_else(|p| p.into_inner());
        let failures = backoff.get(chain).map_or(0, |(failures, _)| *failures).saturating_add(1);
        let pause = FIRST_BACKOFF.saturating_mul(1u32 << failures.saturating_sub(1).min(16)).min(MAX_BACKOFF);
        backoff.insert(chain, (failures, Instant::now() + pause));
    }

    fn succeeded(&self, chain: &'static str) {
        self.backoff.lock().unwrap_or_else(|p| p.into_inner()).remove(chain);
    }

    /// Counts one more pass, at `now`, on which `txid` was unknown; true once that made
    /// [`MISSING_PASSES`] in a row over at least [`MISSING_FOR`].
    fn missing_again(&self, txid: &str, now: Timestamp) -> bool {
        let missing_for_ms = i64::try_from(MISSING_FOR.as_millis()).unwrap_or(i64::MAX);
        let mut missing = self.missing.lock().unwrap_or_else(|p| p.into_inner());
        let (passes, waited_ms, last) = missing.entry(txid.to_string()).or_insert((0, 0, now));
        let step = now.as_millis().saturating_sub(last.as_millis()).clamp(0, missing_for_ms / 2);
        *passes += 1;
        *waited_ms = waited_ms.saturating_add(step);
        *last = now;
        *passes >= MISSING_PASSES && *waited_ms >= missing_for_ms
    }

    /// Notes `payment` as the last one `chain` followed up: the next pass goes on after
    /// it. Noted once its follow-up is done, so a pass cut short by a failing endpoint
    /// goes on next time from where it stopped, not after a window it did not finish.
    fn followed(&self, chain: &'static str, payment: &Payment) {
        let mut followed_up_to = self.followed_up_to.lock().unwrap_or_else(|p| p.into_inner());
        followed_up_to.insert(chain, (payment.seen_at, payment.txid.clone()));
    }

    /// Whether `txid` was unknown on the last pass that looked.
    fn is_missing(&self, txid: &str) -> bool {
        self.missing.lock().unwrap_or_else(|p| p.into_inner()).contains_key(txid)
    }

    /// Stops counting `txid` as missing: it was seen again, or it is settled.
    fn seen(&self, txid: &str) {
        self.missing.lock().unwrap_or_else(|p| p.into_inner()).remove(txid);
    }
}

/// The block the first Ethereum scan starts at: the first one made since the oldest
/// watched invoice (`oldest_invoice_ms`, less [`FIRST_SCAN_SLACK_SECS`]), found by its
/// time between [`FIRST_SCAN_MAX`] and [`FIRST_SCAN_LOOKBACK`] blocks before the tip, so
/// a payment made before any watcher ran (the endpoint set on a shop already taking
/// orders) is seen. Block times only rise, so a binary search asks about 14 headers.
fn first_scan_start(
    client: &EthereumClient,
    tip: u64,
    oldest_invoice_ms: Option<i64>,
) -> std::result::Result<u64, crate::chain::ethereum::RpcError> {
    let latest_start = tip.saturating_sub(FIRST_SCAN_LOOKBACK);
    let Some(oldest_ms) = oldest_invoice_ms else { return Ok(latest_start) };
    let target = u64::try_from(oldest_ms / 1000).unwrap_or(0).saturating_sub(FIRST_SCAN_SLACK_SECS);
    // The first block in low..=high made at or after `target`; `high` when none before it is.
    let (mut low, mut high) = (tip.saturating_sub(FIRST_SCAN_MAX), latest_start);
    while low < high {
        let middle = low + (high - low) / 2;
        // A block the node lacks counts as too early: a scan starting at a block the
        // node does not have would never move on.
        match client.block_timestamp(middle)? {
            Some(time) if time >= target => high = middle,
            _ => low = middle + 1,
        }
    }
    Ok(low)
}

/// The highest block the node serves at or below the `claimed` tip: `claimed` itself when
/// the node has it (one call), else found by halving down to `floor` (taken as served).
/// A tip read from one backend of several, or a lying one, may name a block no one
/// serves yet: scanning up to it moved the cursor past blocks never read, and counting
/// confirmations from it confirmed a payment one block deep.
fn served_tip<E>(
    claimed: u64,
    floor: u64,
    mut served_at: impl FnMut(u64) -> std::result::Result<bool, E>,
) -> std::result::Result<u64, E> {
    if claimed <= floor || served_at(claimed)? {
        return Ok(claimed);
    }
    let (mut served, mut missing) = (floor, claimed);
    while missing - served > 1 {
        let middle = served + (missing - served) / 2;
        if served_at(middle)? {
            served = middle;
        } else {
            missing = middle;
        }
    }
    Ok(served)
}

/// What came of one call about a payment or an address, judged by [`FailuresInARow`].
enum Judged<T, E> {
    /// The endpoint answered.
    Answered(T),
    /// It failed about this one: report it and go on with the next.
    PassedOver(E),
    /// It failed [`FOLLOW_UP_FAILURES_IN_A_ROW`] times in a row: the endpoint is failing.
    EndpointFailing(E),
}

/// Counts an endpoint's failures in a row over one pass's calls about payments or
/// addresses.
#[derive(Default)]
struct FailuresInARow(usize);

impl FailuresInARow {
    fn judge<T, E>(&mut self, outcome: std::result::Result<T, E>) -> Judged<T, E> {
        match outcome {
            Ok(answer) => {
                self.0 = 0;
                Judged::Answered(answer)
            }
            Err(error) => {
                self.0 += 1;
                match self.0 >= FOLLOW_UP_FAILURES_IN_A_ROW {
                    true => Judged::EndpointFailing(error),
                    false => Judged::PassedOver(error),
                }
            }
        }
    }
}

/// How many calls about payments or addresses in a row may fail before a pass gives up
/// on the endpoint: one payment the endpoint answers badly about is reported and passed
/// over, so it never holds up the others; an endpoint that answers nothing (each call
/// waiting out its timeout) ends the pass, which backs off.
const FOLLOW_UP_FAILURES_IN_A_ROW: usize = 3;

/// `units` of a token whose contract declares `decimals`, in `coin`: exact when the
/// contract has no more decimals than the coin (USDT and USDC have 6 on Ethereum), else
/// cut to the coin's places, so a digit the invoice cannot hold never pays for the
/// merchant. The same coin has other decimals elsewhere (18 for USDT on BNB Smart
/// Chain); reading its values with the coin's would count 10^12 times what was paid.
/// `None` for an unknown coin or an amount beyond a [`Decimal`].
fn token_amount(units: u128, decimals: u32, coin: &str) -> Option<Decimal> {
    let places = money::coin_decimals(coin)?;
    let amount = units_to_decimal(units, decimals)?;
    Some(match decimals > places {
        true => amount.round_dp_with_strategy(places, rust_decimal::RoundingStrategy::ToZero),
        false => amount,
    })
}

/// At most `limit` of `payments` (ordered by first seen, then id), starting with the
/// first after `after` and wrapping around to the start: a window that moves on each
/// pass, so a long queue of payments that stay unconfirmed (a fee too low to be mined
/// soon) cannot keep later ones from being followed.
fn follow_up_window(payments: Vec<Payment>, after: Option<&(Timestamp, String)>, limit: usize) -> Vec<Payment> {
    let start = after.map_or(0, |(seen_at, txid)| {
        payments.partition_point(|payment| (payment.seen_at, payment.txid.as_str()) <= (*seen_at, txid.as_str()))
    });
    let start = if start >= payments.len() { 0 } else { start };
    let mut payments = payments;
    payments.rotate_left(start);
    payments.truncate(limit);
    payments
}

/// The transaction hash or id a payment id starts with (`txid:vout` → `txid`).
fn chain_txid(payment_id: &str) -> &str {
    payment_id.split(':').next().unwrap_or(payment_id)
}

/// Whether `text` is `0x` and 64 hex digits (an Ethereum transaction hash).
fn is_ethereum_hash(text: &str) -> bool {
    text.strip_prefix("0x").is_some_and(|hex| hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Whether `text` is 64 hex digits (a Bitcoin transaction id).
fn is_bitcoin_txid(text: &str) -> bool {
    text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit())
}

/// Confirmations of a transaction in block `height` when the tip is `tip` (1 = in the
/// tip block).
fn confirmations(tip: u64, height: u64) -> u64 {
    (tip + 1).saturating_sub(height)
}

impl Service {
    /// One pass of the chain watcher over every chain configured
    /// ([`crate::Config::bitcoin_watch`], [`crate::Config::ethereum_watch`]): records
    /// new payments to invoices' derived addresses, confirms those deep enough and
    /// rejects those that vanished (the module `chain` of the service explains the
    /// rules). `coinorder serve` runs it every 15 seconds; a host runs it on a
    /// [`crate::Worker`] (or [`Service::start_chain_worker`]) like the delivery.
    ///
    /// A chain whose endpoint fails is skipped for a pause that doubles up to five
    /// minutes ([`ChainWatchReport::backing_off`]); nothing is lost, since what was not
    /// seen is seen on a later pass. Only a database failure is an `Err`.
    pub fn watch_chain_due(&self) -> Result<ChainWatchReport> {
        let mut report = ChainWatchReport::default();
        if let Some(watch) = &self.config.bitcoin_watch {
            self.watch_one("bitcoin", &mut report, |report| self.watch_bitcoin(watch, report))?;
        }
        if let Some(watch) = &self.config.ethereum_watch {
            self.watch_one("ethereum", &mut report, |report| self.watch_ethereum(watch, report))?;
        }
        Ok(report)
    }

    fn watch_one(
        &self,
        chain: &'static str,
        report: &mut ChainWatchReport,
        pass: impl FnOnce(&mut ChainWatchReport) -> std::result::Result<(), PassFailure>,
    ) -> Result<()> {
        if !self.chain_state.ready(chain) {
            report.backing_off.push(chain.to_string());
            return Ok(());
        }
        match pass(report) {
            Ok(()) => {
                self.chain_state.succeeded(chain);
                Ok(())
            }
            Err(PassFailure::Endpoint(message)) => {
                self.chain_state.failed(chain);
                report.errors.push(format!("{chain}: {message}"));
                Ok(())
            }
            Err(PassFailure::Store(error)) => Err(error),
        }
    }

    /// The decimals `contract` declares, asked of the node the first time; `None` when it
    /// declares none, or more than 28 (its transfers cannot be read as amounts).
    fn token_decimals(&self, client: &EthereumClient, contract: &str) -> std::result::Result<Option<u32>, PassFailure> {
        if let Some(&decimals) = self.chain_state.token_decimals.lock().unwrap_or_else(|p| p.into_inner()).get(contract)
        {
            return Ok(decimals);
        }
        let declared = client.token_decimals(contract).map_err(|e| PassFailure::Endpoint(e.to_string()))?;
        // More than 28 places is beyond what a decimal amount holds: none usable.
        let decimals = declared.map(u32::from).filter(|places| *places <= 28);
        // Only an answer is kept: "none" may be one bad answer, or a contract the
        // operator is about to correct, and is asked again next pass.
        if decimals.is_some() {
            self.chain_state
                .token_decimals
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(contract.to_string(), decimals);
        }
        Ok(decimals)
    }

    /// The invoices with derived addresses in `coin` that may still be paid.
    fn watched(&self, coins: &[&str]) -> Result<Vec<WatchedInvoice>> {
        let late_ms = i64::try_from(LATE_WATCH.as_millis()).unwrap_or(i64::MAX);
        let since = self.now().as_millis().saturating_sub(late_ms);
        let invoices = self.store.read(|db| db.watched_invoices(self.environment(), since))?;
        Ok(invoices.into_iter().filter(|invoice| coins.contains(&invoice.currency.as_str())).collect())
    }

    /// The id a payment seen on chain as `payment_id` is to be recorded under: that one
    /// if it is new; `None` if it is recorded already. A payment a watcher rejected as
    /// vanished (a dropped transaction broadcast again, one its endpoint did not know)
    /// that is on the chain after all is money that came: it is recorded anew, as
    /// `payment_id:again-2` and so on, which a FAILED order reports as `order.paid_late`
    /// and an open one counts. Any other rejected payment (reverted, or rejected by the
    /// host) stays as it is.
    fn sighting_id(&self, payment_id: &str) -> Result<Option<String>> {
        let mut id = payment_id.to_string();
        for again in 2..=MAX_REAPPEARANCES + 1 {
            match self.payment(&id) {
                Err(error) if matches!(error.kind(), ErrorKind::PaymentNotFound(_)) => return Ok(Some(id)),
                Err(error) => return Err(error),
                Ok(payment) if payment.state != PaymentState::Rejected => return Ok(None),
                // Rejected by the host or as reverted: it stays so.
                Ok(_) if !self.store.read(|db| db.payment_vanished(self.environment(), &id))? => return Ok(None),
                Ok(_) => id = format!("{payment_id}:again-{again}"),
            }
        }
        Ok(None)
    }

    /// Records a payment seen on chain as `payment_id`, unconfirmed, unless it is recorded
    /// already ([`Service::sighting_id`]); a refusal (say, the id recorded for another
    /// order) is reported, not fatal.
    ///
    /// An Ethereum transaction may pay several invoices (Ether and a token, or two tokens,
    /// each to its own invoice): when its bare hash is recorded for another order already,
    /// this one is `hash:recipient`, whatever was scanned first.
    fn record_sighting(
        &self,
        chain: &str,
        report: &mut ChainWatchReport,
        order_id: &str,
        payment_id: &str,
        amount: Decimal,
        recipient: Option<&str>,
    ) -> Result<()> {
        if amount <= Decimal::ZERO {
            return Ok(());
        }
        let payment_id = match (recipient, self.payment(payment_id)) {
            (Some(recipient), Ok(existing)) if existing.order_id != order_id && !payment_id.contains(':') => {
                format!("{payment_id}:{recipient}")
            }
            _ => payment_id.to_string(),
        };
        let Some(payment_id) = self.sighting_id(&payment_id)? else { return Ok(()) };
        let payment_id = payment_id.as_str();
        match self.record_payment(order_id, payment_id, amount, false) {
            Ok(outcome) if !outcome.duplicate => report.recorded += 1,
            Ok(_) => {}
            Err(error) if matches!(error.kind(), ErrorKind::Storage(_) | ErrorKind::Corrupt(_)) => return Err(error),
            Err(error) => report.errors.push(format!("{chain}: payment {payment_id} to order {order_id}: {error}")),
        }
        Ok(())
    }

    /// Passes over a payment whose follow-up call failed: reported naming it and its order
    /// (so that an operator can find it), and followed, so the next pass goes on after it.
    fn pass_over(&self, chain: &'static str, report: &mut ChainWatchReport, payment: &Payment, error: &str) {
        report
            .errors
            .push(format!("{chain}: following up payment {} to order {}: {error}", payment.txid, payment.order_id));
        self.chain_state.followed(chain, payment);
    }

    /// Rejects a payment that vanished from the chain, marked so in the database for every
    /// process and after restarts ([`Service::sighting_id`]); only when this call rejects
    /// it: one the host rejected meanwhile stays the host's.
    fn reject_vanished(&self, chain: &str, report: &mut ChainWatchReport, txid: &str) -> Result<()> {
        self.settle_sighting(chain, report, txid, Settlement::RejectVanished)
    }

    /// Confirms or rejects a followed-up payment; refusals are reported.
    fn settle_sighting(&self, chain: &str, report: &mut ChainWatchReport, txid: &str, how: Settlement) -> Result<()> {
        let settled = match how {
            Settlement::Confirm => self.confirm_payment(txid),
            Settlement::Reject => self.reject_payment(txid),
            Settlement::RejectVanished => self.reject_vanished_payment(txid),
        };
        // Settled either way: nothing more to count for it.
        self.chain_state.seen(txid);
        match settled {
            Ok(outcome) if !outcome.duplicate => match how {
                Settlement::Confirm => report.confirmed += 1,
                Settlement::Reject | Settlement::RejectVanished => report.rejected += 1,
            },
            Ok(_) => {}
            Err(error) if matches!(error.kind(), ErrorKind::Storage(_) | ErrorKind::Corrupt(_)) => return Err(error),
            Err(error) => report.errors.push(format!("{chain}: settling payment {txid}: {error}")),
        }
        Ok(())
    }

    /// Whether a vanished payment has a replacement still on its way: another payment of
    /// its open order, seen in time, unconfirmed and not itself missing (RBF: the
    /// customer's wallet replaced the transaction with one paying the same address).
    /// Rejecting the first would fail the order (DESIGN §6) while the money is coming,
    /// so its rejection waits for that one. A confirmed payment is no reason to wait: had
    /// it covered the order, the order would be PAID; if it does not (a replacement paying
    /// less), the vanished payment is gone for good, and waiting would leave the order
    /// PENDING forever with money counted that never arrived.
    fn replaced_in_flight(&self, vanished: &Payment) -> Result<bool> {
        let order = self.order(&vanished.order_id)?;
        if order.order.status.is_terminal() {
            return Ok(false);
        }
        let payments = self.order_payments(&vanished.order_id)?;
        Ok(payments.iter().any(|other| {
            other.txid != vanished.txid
                && other.counts
                && match other.state {
                    PaymentState::Unconfirmed => !self.chain_state.is_missing(&other.txid),
                    PaymentState::Confirmed | PaymentState::Rejected => false,
                }
        }))
    }

    /// The unconfirmed payments to derived addresses in one of `coins` that `chain`
    /// follows up this pass: those whose id is of the chain's form (`ours`; a host may
    /// record payments under ids of its own), at most [`FOLLOW_UP_LIMIT`], going on
    /// after the last pass's.
    fn unconfirmed(&self, chain: &'static str, coins: &[&str], ours: fn(&str) -> bool) -> Result<Vec<Payment>> {
        let payments = self.store.read(|db| db.watched_unconfirmed_payments(self.environment()))?;
        let payments: Vec<Payment> = payments
            .into_iter()
            .filter(|payment| coins.contains(&payment.currency.as_str()) && ours(chain_txid(&payment.txid)))
            .collect();
        let mut followed_up_to = self.chain_state.followed_up_to.lock().unwrap_or_else(|p| p.into_inner());
        let window = follow_up_window(payments, followed_up_to.get(chain), FOLLOW_UP_LIMIT);
        if window.is_empty() {
            followed_up_to.remove(chain);
        }
        Ok(window)
    }

    fn watch_bitcoin(
        &self,
        watch: &BitcoinWatch,
        report: &mut ChainWatchReport,
    ) -> std::result::Result<(), PassFailure> {
        let endpoint = |e: crate::chain::esplora::ChainError| PassFailure::Endpoint(e.to_string());
        let client = EsploraClient::new(&watch.esplora_url, CHAIN_TIMEOUT).map_err(endpoint)?;
        let tip = client.tip_height().map_err(endpoint)?;
        // A tip the API does not serve (one backend ahead of another, or a false answer)
        // would count confirmations no block has: the pass waits for one it serves.
        if client.block_at(tip).map_err(endpoint)?.is_none() {
            return Err(PassFailure::Endpoint(format!(
                "the tip the API gives, block {tip}, is not a block it serves (GET /block-height/{tip} answered 404)"
            )));
        }
        let mut failures = FailuresInARow::default();
        let mut discovery_failed = None;
        let invoices = self.watched(&["BTC"])?;
        let first = *self.chain_state.addresses_from.lock().unwrap_or_else(|p| p.into_inner()) % invoices.len().max(1);
        for at in (first..invoices.len()).chain(0..first) {
            let invoice = &invoices[at];
            // One address the API answers badly about is reported and passed over; an API
            // that answers none (each request waiting out its timeout) ends the reading of
            // addresses, and the next pass begins where this one stopped.
            let payments = match failures.judge(client.payments_to(&invoice.address)) {
                Judged::Answered(payments) => payments,
                Judged::PassedOver(error) => {
                    report.errors.push(format!("bitcoin: {}: {error}", invoice.address));
                    continue;
                }
                Judged::EndpointFailing(error) => {
                    *self.chain_state.addresses_from.lock().unwrap_or_else(|p| p.into_inner()) = at;
                    discovery_failed = Some(error);
                    break;
                }
            };
            for payment in payments {
                let Some(amount) = sats_to_btc(payment.sats) else { continue };
                let id = format!("{}:{}", payment.txid, payment.vout);
                // Esplora lists the address's whole history: a payment mined before the
                // address was handed out (a key that received before, or a counter that
                // started again) paid someone else, not this invoice.
                let slack_ms = i64::try_from(BLOCK_TIME_SLACK.as_millis()).unwrap_or(i64::MAX);
                let mined_ms = payment.block_time.and_then(|t| i64::try_from(t).ok()).map(|t| t.saturating_mul(1000));
                if mined_ms.is_some_and(|mined| mined.saturating_add(slack_ms) < invoice.created_at_ms) {
                    if self.chain_state.first_telling(&id) {
                        report.errors.push(format!(
                            "bitcoin: payment {id} to {} was mined before order {} was made: not counted \
                             (the address received before; use a key that never did)",
                            invoice.address, invoice.order_id
                        ));
                    }
                    continue;
                }
                self.record_sighting("bitcoin", report, &invoice.order_id, &id, amount, None)?;
            }
        }
        let mut failures = FailuresInARow::default();
        for payment in self.unconfirmed("bitcoin", &["BTC"], is_bitcoin_txid)? {
            let status = match failures.judge(client.transaction_status(chain_txid(&payment.txid))) {
                Judged::Answered(status) => status,
                Judged::PassedOver(error) => {
                    self.pass_over("bitcoin", report, &payment, &error.to_string());
                    continue;
                }
                Judged::EndpointFailing(error) => return Err(endpoint(error)),
            };
            match status {
                TransactionStatus::Missing => {
                    if self.chain_state.missing_again(&payment.txid, self.now())
                        && !self.replaced_in_flight(&payment)?
                    {
                        self.reject_vanished("bitcoin", report, &payment.txid)?;
                    }
                }
                TransactionStatus::Unconfirmed => self.chain_state.seen(&payment.txid),
                TransactionStatus::Confirmed { block_height } => {
                    self.chain_state.seen(&payment.txid);
                    if confirmations(tip, block_height) >= u64::from(watch.confirmations) {
                        self.settle_sighting("bitcoin", report, &payment.txid, Settlement::Confirm)?;
                    }
                }
            }
            self.chain_state.followed("bitcoin", &payment);
        }
        // The payments seen before were followed up all the same; the API's failure ends
        // the pass now, and backs off.
        match discovery_failed {
            Some(error) => Err(endpoint(error)),
            None => Ok(()),
        }
    }

    fn watch_ethereum(
        &self,
        watch: &EthereumWatch,
        report: &mut ChainWatchReport,
    ) -> std::result::Result<(), PassFailure> {
        let endpoint = |e: crate::chain::ethereum::RpcError| PassFailure::Endpoint(e.to_string());
        let client = EthereumClient::new(&watch.rpc_url, CHAIN_TIMEOUT).map_err(endpoint)?;
        // The tip first, then the invoices: a payment in a block up to this tip was mined
        // after its address was shown, so its invoice is in the list read next.
        let claimed_tip = client.block_number().map_err(endpoint)?;
        let mut coins = vec!["ETH"];
        coins.extend(watch.tokens.iter().map(|(coin, _)| coin.as_str()));
        let invoices = self.watched(&coins)?;
        // By coin, then lower-case address.
        let mut open: HashMap<&str, HashMap<String, &str>> = HashMap::new();
        for invoice in &invoices {
            open.entry(invoice.currency.as_str())
                .or_default()
                .insert(invoice.address.to_ascii_lowercase(), invoice.order_id.as_str());
        }

        let environment = self.environment();
        let cursor = self.store.read(|db| db.chain_cursor(environment, "ethereum"))?;
        let cursor = cursor.and_then(|n| u64::try_from(n).ok());
        let tip = served_tip(claimed_tip, cursor.unwrap_or(0).saturating_sub(1), |number| {
            client.block_timestamp(number).map(|header| header.is_some())
        })
        .map_err(endpoint)?;
        let next = match cursor {
            Some(next) => next,
            None => first_scan_start(&client, tip, invoices.iter().map(|i| i.created_at_ms).min()).map_err(endpoint)?,
        };
        // Scan again the blocks not yet final: a reorganisation may have replaced them.
        // At most half a pass of them, so a pass always moves on (a depth of 200 or more
        // stalled the cursor); Ethereum's blocks are final within about 64 anyway.
        let from = next.saturating_sub(u64::from(watch.confirmations).min(MAX_BLOCKS_PER_PASS / 2));
        let mut to = tip.min(from.saturating_add(MAX_BLOCKS_PER_PASS - 1));
        if let Some(eth) = open.get("ETH").filter(|_| from <= to) {
            for number in from..=to {
                let Some(block) = client.block(number).map_err(endpoint)? else {
                    // A node behind the tip it just gave (one backend of several): scan
                    // what it has and go on from here next pass, skipping nothing.
                    to = number.wrapping_sub(1);
                    break;
                };
                for transfer in block.transfers {
                    let Some(order_id) = eth.get(&transfer.to) else { continue };
                    let Some(amount) = units_to_decimal(transfer.wei, 18) else { continue };
                    self.record_sighting("ethereum", report, order_id, &transfer.tx_hash, amount, Some(&transfer.to))?;
                }
            }
        }
        if from <= to && to != u64::MAX {
            self.scan_tokens(&client, watch, &open, from, to, report)?;
            let stored = i64::try_from(to.saturating_add(1).max(next)).unwrap_or(i64::MAX);
            self.store.write(|db| db.set_chain_cursor(environment, "ethereum", stored))?;
        }

        let mut failures = FailuresInARow::default();
        for payment in self.unconfirmed("ethereum", &coins, is_ethereum_hash)? {
            let hash = chain_txid(&payment.txid);
            let receipt = match failures.judge(client.receipt(hash)) {
                Judged::Answered(receipt) => receipt,
                Judged::PassedOver(error) => {
                    self.pass_over("ethereum", report, &payment, &error.to_string());
                    continue;
                }
                Judged::EndpointFailing(error) => return Err(endpoint(error)),
            };
            match receipt {
                Some(receipt) if !receipt.succeeded => {
                    // Reverted: mined, but it moved nothing.
                    self.settle_sighting("ethereum", report, &payment.txid, Settlement::Reject)?;
                }
                Some(receipt) => {
                    self.chain_state.seen(&payment.txid);
                    if confirmations(tip, receipt.block_number) >= u64::from(watch.confirmations) {
                        self.settle_sighting("ethereum", report, &payment.txid, Settlement::Confirm)?;
                    }
                }
                None => {
                    // Not in a canonical block: back in the mempool after a reorg (it
                    // stays pending) or gone for good (rejected).
                    if client.transaction_known(hash).map_err(endpoint)? {
                        self.chain_state.seen(&payment.txid);
                    } else if self.chain_state.missing_again(&payment.txid, self.now())
                        && !self.replaced_in_flight(&payment)?
                    {
                        self.reject_vanished("ethereum", report, &payment.txid)?;
                    }
                }
            }
            self.chain_state.followed("ethereum", &payment);
        }
        Ok(())
    }

    /// Records the token `Transfer`s to watched invoices' addresses in blocks `from..=to`,
    /// one payment per transaction and recipient (its transfers summed).
    ///
    /// A token that cannot be read (its `decimals()` unknown: a wrong contract in the
    /// settings, or one bad answer) is left out, and the block it was left out from is
    /// kept in the database as its own cursor (`ethereum-token:<coin>`); once it
    /// reads, its transfers from there on are read, a pass's worth of blocks at a time,
    /// until it has caught up. So its payments are found late rather than never, and Ether
    /// and the other tokens go on as usual meanwhile.
    fn scan_tokens(
        &self,
        client: &EthereumClient,
        watch: &EthereumWatch,
        open: &HashMap<&str, HashMap<String, &str>>,
        from: u64,
        to: u64,
        report: &mut ChainWatchReport,
    ) -> std::result::Result<(), PassFailure> {
        let environment = self.environment();
        let endpoint = |e: crate::chain::ethereum::RpcError| PassFailure::Endpoint(e.to_string());
        // By lower-case contract: the coin, and the decimals its `Transfer` values are in.
        let mut coin_of: HashMap<String, (&str, u32)> = HashMap::new();
        let mut recipients = Vec::new();
        for (coin, contract) in &watch.tokens {
            let Some(addresses) = open.get(coin.as_str()) else { continue };
            let contract = contract.to_ascii_lowercase();
            // By coin, not contract: correcting a wrong contract in the settings must
            // read the blocks left out while it was wrong.
            let behind_cursor = format!("ethereum-token:{coin}");
            // A negative value is a token that has caught up.
            let behind = self
                .store
                .read(|db| db.chain_cursor(environment, &behind_cursor))?
                .and_then(|block| u64::try_from(block).ok());
            let Some(decimals) = self.token_decimals(client, &contract)? else {
                let unread_from = behind.unwrap_or(from);
                report.errors.push(format!(
                    "ethereum: token {coin} at {contract} declares no decimals() (or more than 28): its transfers \
                     from block {unread_from} on are read once it does (check the contract in the settings)"
                ));
                if behind.is_none() {
                    let unread_from = i64::try_from(from).unwrap_or(i64::MAX);
                    self.store.write(|db| db.set_chain_cursor(environment, &behind_cursor, unread_from))?;
                }
                continue;
            };
            let recipients_of_coin: Vec<String> = addresses.keys().cloned().collect();
            if let Some(behind) = behind {
                let caught_up_to = match behind < from {
                    true => {
                        let end = from.saturating_sub(1).min(behind.saturating_add(MAX_BLOCKS_PER_PASS - 1));
                        let transfers = client
                            .token_transfers(behind, end, std::slice::from_ref(&contract), &recipients_of_coin)
                            .map_err(endpoint)?;
                        let only: HashMap<String, (&str, u32)> =
                            HashMap::from([(contract.clone(), (coin.as_str(), decimals))]);
                        self.record_token_transfers(transfers, &only, open, report)?;
                        end.saturating_add(1)
                    }
                    false => from,
                };
                let stored = if caught_up_to >= from { -1 } else { i64::try_from(caught_up_to).unwrap_or(i64::MAX) };
                self.store.write(|db| db.set_chain_cursor(environment, &behind_cursor, stored))?;
            }
            coin_of.insert(contract, (coin.as_str(), decimals));
            recipients.extend(recipients_of_coin);
        }
        if coin_of.is_empty() {
            return Ok(());
        }
        let contracts: Vec<String> = coin_of.keys().cloned().collect();
        let transfers = client.token_transfers(from, to, &contracts, &recipients).map_err(endpoint)?;
        self.record_token_transfers(transfers, &coin_of, open, report)
    }

    /// Records `transfers` of the contracts in `coin_of` (coin and decimals by contract)
    /// to the open invoices' addresses, one payment per transaction and recipient (its
    /// transfers summed).
    fn record_token_transfers(
        &self,
        transfers: Vec<TokenTransfer>,
        coin_of: &HashMap<String, (&str, u32)>,
        open: &HashMap<&str, HashMap<String, &str>>,
        report: &mut ChainWatchReport,
    ) -> std::result::Result<(), PassFailure> {
        let mut summed: BTreeMap<(String, String, &str), (u128, u32)> = BTreeMap::new();
        for transfer in distinct_logs(transfers) {
            let Some(&(coin, decimals)) = coin_of.get(&transfer.contract) else { continue };
            let (units, _) = summed.entry((transfer.tx_hash, transfer.to, coin)).or_insert((0, decimals));
            *units = units.saturating_add(transfer.units);
        }
        // One transaction may pay several invoices (an exchange's batch payout): the first
        // of them, in this order, is recorded under the bare hash (as every token payment
        // was before, so none is recorded twice across an upgrade), each other one under
        // `hash:recipient`, as Bitcoin's are under `txid:vout`.
        let mut previous_hash: Option<String> = None;
        for ((tx_hash, to, coin), (units, decimals)) in summed {
            let Some(order_id) = open.get(coin).and_then(|addresses| addresses.get(&to)) else { continue };
            let Some(amount) = token_amount(units, decimals, coin) else { continue };
            let id = match previous_hash.as_deref() == Some(tx_hash.as_str()) {
                true => format!("{tx_hash}:{to}"),
                false => tx_hash.clone(),
            };
            self.record_sighting("ethereum", report, order_id, &id, amount, Some(&to))?;
            previous_hash = Some(tx_hash);
        }
        Ok(())
    }
}

/// `transfers` with each log once: a node may list one log twice (the same block and
/// index), or one transaction's logs from two blocks when it answers across a
/// reorganisation; summed as they came, either counted money twice. Of a transaction
/// seen in two blocks only the logs of the highest are kept: the chain's latest word.
fn distinct_logs(transfers: Vec<TokenTransfer>) -> Vec<TokenTransfer> {
    let mut block_of: HashMap<String, (u64, String)> = HashMap::new();
    for transfer in &transfers {
        let latest =
            block_of.entry(transfer.tx_hash.clone()).or_insert((transfer.block_number, transfer.block_hash.clone()));
        if transfer.block_number > latest.0 {
            *latest = (transfer.block_number, transfer.block_hash.clone());
        }
    }
    let mut seen = std::collections::HashSet::new();
    transfers
        .into_iter()
        .filter(|transfer| block_of.get(&transfer.tx_hash).is_some_and(|(_, hash)| *hash == transfer.block_hash))
        .filter(|transfer| seen.insert((transfer.block_hash.clone(), transfer.log_index)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payment_id_names_its_transaction() {
        assert_eq!(chain_txid("ab:3"), "ab");
        assert_eq!(chain_txid("0xabc"), "0xabc");
        assert!(is_ethereum_hash(&format!("0x{}", "a".repeat(64))));
        assert!(!is_ethereum_hash("0xabc"));
        assert!(is_bitcoin_txid(&"f".repeat(64)));
        assert!(!is_bitcoin_txid("manual-1"));
        assert_eq!(confirmations(100, 100), 1);
        assert_eq!(confirmations(100, 98), 3);
        assert_eq!(confirmations(100, 101), 0);
    }

    #[test]
    fn the_follow_up_window_moves_on_each_pass_and_wraps_around() {
        let payment = |seen_at: i64, txid: &str| Payment {
            txid: txid.to_string(),
            order_id: "o".to_string(),
            amount: Decimal::ONE,
            currency: "BTC".to_string(),
            state: PaymentState::Unconfirmed,
            counts: true,
            seen_at: Timestamp(seen_at),
            settled_at: None,
        };
        let all = || vec![payment(1, "a"), payment(1, "b"), payment(2, "a"), payment(3, "c"), payment(4, "d")];
        let ids = |window: &[Payment]| window.iter().map(|p| format!("{}{}", p.seen_at.0, p.txid)).collect::<Vec<_>>();
        let first = follow_up_window(all(), None, 2);
        assert_eq!(ids(&first), ["1a", "1b"]);
        let cursor = |window: &[Payment]| window.last().map(|p| (p.seen_at, p.txid.clone())).expect("a last");
        let second = follow_up_window(all(), Some(&cursor(&first)), 2);
        assert_eq!(ids(&second), ["2a", "3c"], "after (1, b), not from the start again");
        let third = follow_up_window(all(), Some(&cursor(&second)), 2);
        assert_eq!(ids(&third), ["4d", "1a"], "wraps around without repeating within the window");
        let gone = (Timestamp(2), "b".to_string()); // settled since: the next one after it
        assert_eq!(ids(&follow_up_window(all(), Some(&gone), 1)), ["3c"]);
        let past_the_end = (Timestamp(9), "z".to_string());
        assert_eq!(ids(&follow_up_window(all(), Some(&past_the_end), 2)), ["1a", "1b"]);
        assert_eq!(follow_up_window(all(), None, 10).len(), 5, "all of them when they fit");

        // A pass cut short after two follow-ups (its endpoint began refusing): the next
        // goes on with the third, not after the window it did not finish.
        let state = WatchState::default();
        let window = follow_up_window(all(), None, 10);
        for payment in &window[..2] {
            state.followed("bitcoin", payment);
        }
        let next = follow_up_window(all(), state.followed_up_to.lock().expect("lock").get("bitcoin"), 10);
        assert_eq!(ids(&next)[..2], ["2a", "3c"]);
    }

    #[test]
    fn a_token_amount_is_read_in_its_contracts_decimals_and_never_rounded_up() {
        // USDT has 6 places: a contract with 6 gives the exact amount.
        assert_eq!(token_amount(12_500_000, 6, "USDT"), Some("12.5".parse().expect("decimal")));
        // A contract with 18 (USDT on BNB Smart Chain): the same 12.5 tokens, not 12.5 × 10^12.
        assert_eq!(token_amount(12_500_000_000_000_000_000, 18, "USDT"), Some("12.5".parse().expect("decimal")));
        // Digits beyond the coin's places are cut, never rounded up.
        assert_eq!(token_amount(1_999_999_999_999_999_999, 18, "USDT"), Some("1.999999".parse().expect("decimal")));
        assert_eq!(token_amount(999_999_999_999, 18, "USDT"), Some(Decimal::ZERO), "dust pays nothing");
        // Fewer decimals than the coin: exact.
        assert_eq!(token_amount(125, 2, "USDT"), Some("1.25".parse().expect("decimal")));
        assert_eq!(token_amount(1, 6, "NOPE"), None);
    }

    #[test]
    fn a_failing_chain_backs_off_longer_each_time_and_resets_on_success() {
        let state = WatchState::default();
        assert!(state.ready("bitcoin"));
        state.failed("bitcoin");
        assert!(!state.ready("bitcoin"));
        assert!(state.ready("ethereum"));
        let first = state.backoff.lock().map(|b| b["bitcoin"].1).expect("lock");
        state.failed("bitcoin");
        let second = state.backoff.lock().map(|b| b["bitcoin"].1).expect("lock");
        assert!(second > first + FIRST_BACKOFF / 2, "the pause doubles");
        for _ in 0..30 {
            state.failed("bitcoin");
        }
        let capped = state.backoff.lock().map(|b| b["bitcoin"].1).expect("lock");
        assert!(capped <= Instant::now() + MAX_BACKOFF);
        state.succeeded("bitcoin");
        assert!(state.ready("bitcoin"));
    }

    #[test]
    fn a_payment_is_rejected_only_after_missing_several_passes_in_a_row_for_some_minutes() {
        let state = WatchState::default();
        let half = i64::try_from(MISSING_FOR.as_millis() / 2).unwrap_or(i64::MAX);
        for _ in 1..MISSING_PASSES {
            assert!(!state.missing_again("tx", Timestamp(0)));
        }
        state.seen("tx");
        assert!(!state.missing_again("tx", Timestamp(half)), "seeing it again starts the count over");
        assert!(!state.missing_again("tx", Timestamp(2 * half)), "neither enough passes nor long enough");
        assert!(!state.missing_again("tx", Timestamp(3 * half - 1)), "enough passes, not yet long enough");
        assert!(state.missing_again("tx", Timestamp(3 * half)));
        for _ in 0..MISSING_PASSES + 5 {
            assert!(!state.missing_again("still", Timestamp(5)), "long enough needs the clock to move");
        }
        // One step of the clock a year forward counts for half the wait; one back, for none.
        let year = 365 * 24 * 3_600_000;
        for (pass, now) in [(1, 0), (2, year), (3, year + 1)] {
            assert!(!state.missing_again("stepped", Timestamp(now)), "pass {pass}");
        }
        assert!(state.missing_again("stepped", Timestamp(year + half)));
        for now in [year, 0, half - 1] {
            assert!(!state.missing_again("back", Timestamp(now)));
        }
        assert!(!state.missing_again("back", Timestamp(half)), "the step back counted for nothing");
    }
}
