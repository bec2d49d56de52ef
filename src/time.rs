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

    /// This timestamp moved by `ms` milliseconds.
    pub fn plus_ms(self, ms: i64) -> Timestamp {
        Timestamp(self.0.saturating_add(ms))
    }
}

/// The ISO 8601 form, written field by field: every API body carries several timestamps,
/// and chrono's general RFC 3339 writer costs several times more (years outside
/// 0000–9999, which no order has, still go through it).
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(dt) = DateTime::from_timestamp_millis(self.0) else { return Ok(()) };
        let year = dt.year();
        if !(0..=9999).contains(&year) {
            return f.write_str(&dt.to_rfc3339_opts(SecondsFormat::Millis, true));
        }
        write!(
            f,
            "{year:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            dt.month(),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second(),
            dt.timestamp_subsec_millis()
        )
    }
}

/// Written straight into the serializer's output (no intermediate string).
impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
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
