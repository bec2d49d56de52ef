//! Timestamps: Unix epoch milliseconds, rendered as ISO 8601 UTC with milliseconds.

use std::fmt;

use chrono::{DateTime, Datelike, SecondsFormat, Timelike};
use serde::Serialize;

/// A point in time, in milliseconds since the Unix epoch (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// Milliseconds since the Unix epoch.
    pub fn as_millis(self) -> i64 {
        self.0
    }

    /// ISO 8601 UTC with milliseconds, e.g. `2026-11-22T05:51:22.123Z`.
    pub fn to_iso(self) -> String {
        self.to_string()
    }

    /// Appends the ISO form (as [`Timestamp::to_iso`]) to `out`, without a `String` of its own.
    pub(crate) fn push_iso(self, out: &mut String) {
        match iso_bytes(self.0) {
            // The 24 bytes are ASCII digits and separators.
            Some(bytes) => out.push_str(std::str::from_utf8(&bytes).unwrap_or_default()),
            None => {
                use fmt::Write as _;
                // Writing into a `String` cannot fail.
                let _ = write!(out, "{self}");
            }
        }
    }

    /// This timestamp moved by `ms` milliseconds.
    pub fn plus_ms(self, ms: i64) -> Timestamp {
        Timestamp(self.0.saturating_add(ms))
    }
}

/// The ISO 8601 form of a timestamp in years 0000–9999, as its 24 ASCII bytes, written
/// digit by digit: every API body carries several timestamps, and going through
/// `core::fmt` (or chrono's general RFC 3339 writer) for each of their seven fields cost
/// more than the rest of a Get Order body's rendering.
fn iso_bytes(millis: i64) -> Option<[u8; 24]> {
    // The naive UTC form: `DateTime<Utc>`'s accessors each add the (zero) offset again.
    let dt = DateTime::from_timestamp_millis(millis)?.naive_utc();
    let year = u32::try_from(dt.year()).ok().filter(|year| *year <= 9999)?;
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut value: u32| {
        for slot in out[at..at + width].iter_mut().rev() {
            // `value % 10` is a single decimal digit, so the cast cannot truncate.
            *slot = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, dt.month());
    put(8, 2, dt.day());
    put(11, 2, dt.hour());
    put(14, 2, dt.minute());
    put(17, 2, dt.second());
    put(20, 3, u32::try_from(millis.rem_euclid(1000)).ok()?);
    Some(out)
}

/// ISO 8601 UTC with milliseconds; years outside 0000–9999, which no order has, go
/// through chrono's RFC 3339 writer.
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match iso_bytes(self.0) {
            Some(bytes) => f.write_str(std::str::from_utf8(&bytes).map_err(|_| fmt::Error)?),
            None => match DateTime::from_timestamp_millis(self.0) {
                Some(dt) => f.write_str(&dt.to_rfc3339_opts(SecondsFormat::Millis, true)),
                None => Ok(()),
            },
        }
    }
}

/// Written into the serializer's output as one string (no intermediate `String`, and one
/// escaping pass instead of one per field).
impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match iso_bytes(self.0) {
            Some(bytes) => s.serialize_str(std::str::from_utf8(&bytes).map_err(serde::ser::Error::custom)?),
            None => s.collect_str(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_has_milliseconds_and_z() {
        assert_eq!(Timestamp(1_795_326_682_123).to_iso(), "2026-11-22T05:51:22.123Z");
        assert_eq!(Timestamp(0).to_iso(), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn the_fast_writer_agrees_with_chrono() {
        let mut ms: i64 = -62_167_219_200_000; // 0000-01-01
        while ms < 253_402_300_800_000 {
            let expected = DateTime::from_timestamp_millis(ms)
                .map(|dt| dt.to_rfc3339_opts(SecondsFormat::Millis, true))
                .unwrap_or_default();
            assert_eq!(Timestamp(ms).to_iso(), expected, "{ms}");
            ms += 7_654_321_987; // about 89 days, odd milliseconds
        }
        assert_eq!(Timestamp(253_402_300_800_000).to_iso(), "+10000-01-01T00:00:00.000Z");
        assert_eq!(
            serde_json::to_string(&Timestamp(1_795_326_682_123)).ok().as_deref(),
            Some("\"2026-11-22T05:51:22.123Z\"")
        );
    }
}
