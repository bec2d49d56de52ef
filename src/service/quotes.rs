//! The rate a create quotes at, without a read snapshot of its own.
//!
//! Reading the rate table in a snapshot of its own cost each create about a quarter of its
//! time on SQLite: the snapshot's locks, and, after every commit, SQLite unmapping the
//! file and dropping the reader's page cache. Instead a create quotes at the table row
//! this service saw last ([`RateMemo`]), and its own write transaction reads the row again
//! and refuses to commit a quote the table no longer gives (another service or program
//! changed the rate): the create then quotes again at the row just read. So every order
//! is stored with the rate the table held when it was written, as before, and in the usual
//! case at no extra snapshot.

use std::sync::Mutex;

use rust_decimal::Decimal;

use super::Service;
use crate::error::{Error, Result};
use crate::payments::Rate;
use crate::storage::Conn;
use crate::time::Timestamp;

/// The rate table's row per (coin, fiat) as this service last read it; `None`: no row.
#[derive(Debug, Default)]
pub(crate) struct RateMemo {
    rows: Mutex<Vec<(String, String, Option<Rate>)>>,
}

impl RateMemo {
    /// The row remembered for `crypto`/`fiat`, if that pair was read before.
    fn get(&self, crypto: &str, fiat: &str) -> Option<Option<Rate>> {
        let rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        rows.iter().find(|(c, f, _)| c == crypto && f == fiat).map(|(_, _, row)| row.clone())
    }

    /// Remembers `row` as the table's row for `crypto`/`fiat`.
    pub(crate) fn remember(&self, crypto: &str, fiat: &str, row: Option<Rate>) {
        let mut rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        match rows.iter_mut().find(|(c, f, _)| c == crypto && f == fiat) {
            Some(entry) => entry.2 = row,
            None => rows.push((crypto.to_string(), fiat.to_string(), row)),
        }
    }
}

/// Where a quote's rate came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RateOrigin {
    /// The host's rate source, which answers for the moment it is asked.
    Host,
    /// The rate table as it was (the row, or none) when the rate was worked out.
    Table(Option<Rate>),
}

/// The rate a create quotes at, and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct QuotedRate {
    /// Fiat units per one coin.
    pub rate: Decimal,
    /// Where it came from, for the write to check.
    pub origin: RateOrigin,
}

impl Service {
    /// The rate to quote `crypto` in `fiat` at `now`, as [`Service::current_rate`] gives it,
    /// but with the table's row as this service last saw it (read once if never seen).
    pub(crate) fn quoted_rate(&self, crypto: &str, fiat: &str, now: Timestamp) -> Result<QuotedRate> {
        if let Some(rate) = self.host_rate(crypto, fiat) {
            return Ok(QuotedRate { rate, origin: RateOrigin::Host });
        }
        if let Some(row) = self.rate_memo.get(crypto, fiat) {
            if let Ok(rate) = self.table_rate(row.as_ref(), crypto, fiat, now) {
                return Ok(QuotedRate { rate, origin: RateOrigin::Table(row) });
            }
        }
        // Never read, or no rate by the row last seen: a refusal is not checked by any
        // write, so it is decided on the table as it is now.
        let row = self.store.read(|db| db.rate(self.environment(), crypto, fiat))?;
        self.rate_memo.remember(crypto, fiat, row.clone());
        let rate = self.table_rate(row.as_ref(), crypto, fiat, now)?;
        Ok(QuotedRate { rate, origin: RateOrigin::Table(row) })
    }

    /// Inside a create's write transaction: whether the rate table still gives `quoted`
    /// at `now`. Reads the row again and remembers it.
    pub(crate) fn quote_holds(
        &self,
        db: &Conn<'_>,
        crypto: &str,
        fiat: &str,
        quoted: &QuotedRate,
        now: Timestamp,
    ) -> Result<bool> {
        let RateOrigin::Table(seen) = &quoted.origin else {
            return Ok(true);
        };
        let row = db.rate(self.environment(), crypto, fiat)?;
        if row == *seen {
            return Ok(true);
        }
        let holds = self.table_rate(row.as_ref(), crypto, fiat, now).ok() == Some(quoted.rate);
        self.rate_memo.remember(crypto, fiat, row);
        Ok(holds)
    }

    /// The host's rate source's rate, when it has a usable one.
    pub(crate) fn host_rate(&self, crypto: &str, fiat: &str) -> Option<Decimal> {
        let source = self.config().rate_source.as_ref()?;
        // Normalized as a stored rate is, so `900.0` from a feed shows as `900`.
        source.rate(crypto, fiat).filter(|r| *r > Decimal::ZERO).map(|r| r.normalize())
    }

    /// The rate the table's `row` gives at `now` (unless expired), else the sandbox's
    /// built-in test rate.
    pub(crate) fn table_rate(&self, row: Option<&Rate>, crypto: &str, fiat: &str, now: Timestamp) -> Result<Decimal> {
        if let Some(row) = row.filter(|row| row.valid_until.is_none_or(|until| until > now)) {
            return Ok(row.rate);
        }
        crate::rates::builtin_rate(self.environment(), crypto, fiat)
            .ok_or_else(|| Error::invalid("pay_currency", format!("no rate for {crypto}/{fiat}")))
    }
}
