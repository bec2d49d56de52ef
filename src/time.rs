//! Timestamps: Unix epoch milliseconds, rendered as ISO 8601 UTC with milliseconds.

use std::fmt;

use chrono::{DateTime, SecondsFormat};
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
        match DateTime::from_timestamp_millis(self.0) {
            Some(dt) => dt.to_rfc3339_opts(SecondsFormat::Millis, true),
            None => String::new(),
        }
    }

    /// This timestamp moved by `ms` milliseconds.
    pub fn plus_ms(self, ms: i64) -> Timestamp {
        Timestamp(self.0.saturating_add(ms))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_iso())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_iso())
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
}
