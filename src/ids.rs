//! Order and invoice ids: time-ordered UUIDv7s, and the row key an order id implies.
//!
//! An id is RFC 9562's UUIDv7: 48 bits of Unix milliseconds, the version, 74 further bits,
//! the variant. Of those 74, coinorder makes the top [`COUNTER_BITS`] a counter of the ids
//! this process made in that millisecond (§6.2, method 1: a fixed-length dedicated counter,
//! seeded at random with its top bit clear as the rollover guard) and the rest random. So
//! the millisecond and the counter together name one id of this process: they are the key
//! under which SQLite stores the order's row ([`row_key`]), and Get Order reads one B-tree
//! instead of the id's index and then the table.

use crate::time::Timestamp;

/// The bits of a UUIDv7 after its millisecond stamp that are neither version nor variant:
/// `rand_a` (12) then `rand_b` (62).
const RANDOM_BITS: u32 = 74;

/// The top bits of the 74: the per-millisecond counter.
const COUNTER_BITS: u32 = 15;

/// The random bits below the counter: what keeps an id unguessable from its neighbours.
const TAIL_BITS: u32 = RANDOM_BITS - COUNTER_BITS;

/// The largest counter value.
const MAX_COUNTER: u32 = (1 << COUNTER_BITS) - 1;

/// A new order or invoice id: a UUIDv7 stamped with `now`, the service's clock.
///
/// Ids made later sort later, so each insert lands at the right edge of the B-trees keyed
/// by them instead of on a random page (fewer pages touched and written per create).
/// Within one millisecond they sort in the order this process made them (Get Orders
/// breaks ties of `created_at` by id, newest first): each takes the counter of the one
/// before plus one, and 59 fresh random bits. Each millisecond keeps its own counter, so
/// threads whose clocks were read a moment apart (or services on clocks of their own)
/// interleave without breaking one another's order. A first counter is below 2^14, so at
/// least 16,384 ids fit in a millisecond before one is drawn afresh, out of order.
pub(crate) fn time_ordered_id(now: Timestamp) -> String {
    /// The last counter given out in each of the latest milliseconds seen: far more than
    /// threads can be making ids in at once. When all are taken, the earliest millisecond
    /// is forgotten, one a clock that moves forward has left behind.
    /// An array in place, not a map: nothing on the heap for the life of the process (a C
    /// host's leak checker would report a static map's table).
    static LAST: std::sync::Mutex<[(u64, u32); 32]> = std::sync::Mutex::new([(0, 0); 32]);
    let ms = u64::try_from(now.as_millis()).unwrap_or(0);
    let first = crate::random::random::<u32>() >> (32 - (COUNTER_BITS - 1));
    let counter = {
        let mut last = LAST.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match last.iter().position(|(seen, _)| *seen == ms) {
            Some(slot) => {
                let next = if last[slot].1 < MAX_COUNTER { last[slot].1 + 1 } else { first };
                last[slot].1 = next;
                next
            }
            // The first id of its millisecond takes the place of the oldest one remembered.
            None => {
                let oldest = last.iter().enumerate().min_by_key(|(_, (seen, _))| *seen).map_or(0, |(slot, _)| slot);
                last[oldest] = (ms, first);
                first
            }
        }
    };
    let random = (u128::from(counter) << TAIL_BITS) | (crate::random::random::<u128>() & ((1 << TAIL_BITS) - 1));
    // rand_a (12 bits) then rand_b (62 bits), where `Builder` puts them, most significant first.
    let rand_a = (random >> 62) as u16;
    let rand_b = (random & ((1 << 62) - 1)) as u64;
    let mut bytes = [0_u8; 10];
    bytes[..2].copy_from_slice(&rand_a.to_be_bytes());
    bytes[2..].copy_from_slice(&rand_b.to_be_bytes());
    uuid::Builder::from_unix_timestamp_millis(ms, &bytes).into_uuid().to_string()
}

/// The SQLite row key of the order `order_id`: its millisecond, then its counter
/// (`ms << 15 | counter`, below 2^63). `None` for an id that is not a UUIDv7, such as
/// one made before ids were time-ordered; such rows are found by the id's index alone.
///
/// A key is a hint, never an identity: ids of two processes in one millisecond may share
/// one, and a row keeps the key it was stored under only until something renumbers the
/// table (`VACUUM` may). So a read by key also matches the id, and falls back to the id's
/// index when that finds nothing.
pub(crate) fn row_key(order_id: &str) -> Option<i64> {
    let id = uuid::Uuid::try_parse(order_id).ok()?;
    if id.get_version_num() != 7 || id.get_variant() != uuid::Variant::RFC4122 {
        return None;
    }
    let bytes = id.as_bytes();
    let ms = bytes[..6].iter().fold(0_i64, |ms, byte| (ms << 8) | i64::from(*byte));
    // rand_a is the low nibble of byte 6 and byte 7; rand_b begins after the variant's two
    // bits at the top of byte 8, and its first 3 bits end the counter.
    let rand_a = (i64::from(bytes[6] & 0x0f) << 8) | i64::from(bytes[7]);
    let counter = (rand_a << 3) | i64::from((bytes[8] >> 3) & 0x07);
    Some((ms << COUNTER_BITS) | counter)
}

#[cfg(test)]
mod tests {
    use super::*;

    // These tests stamp ids in the year 2100: later than any other test's clock in this
    // process, so their milliseconds are never the earliest remembered, never forgotten
    // between two ids, and the counters they check run on unbroken.

    #[test]
    fn ids_are_uuid_v7_and_sort_by_the_service_clock() {
        let earlier = time_ordered_id(Timestamp(4_102_444_800_123));
        let later = time_ordered_id(Timestamp(4_102_444_800_124));
        let same_ms = time_ordered_id(Timestamp(4_102_444_800_123));
        for id in [&earlier, &later, &same_ms] {
            let parsed = uuid::Uuid::parse_str(id).expect("a UUID");
            assert_eq!(parsed.get_version_num(), 7, "{id}");
        }
        assert!(earlier < later, "{earlier} < {later}");
        assert_ne!(earlier, same_ms, "random bits keep ids of one millisecond apart");
        // Ids of one millisecond sort in the order they were made, and never repeat, also
        // when ids of other milliseconds are made in between.
        let ms = Timestamp(4_102_444_800_200);
        let made: Vec<String> = (0..1000)
            .map(|n| {
                let _between = time_ordered_id(Timestamp(4_102_444_800_200 + (n % 3) - 1));
                time_ordered_id(ms)
            })
            .collect();
        assert!(made.windows(2).all(|pair| pair[0] < pair[1]), "ids of one millisecond out of order");
        let parsed = uuid::Uuid::parse_str(&made[999]).expect("a UUID");
        assert_eq!(parsed.get_version_num(), 7);
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(parsed.get_timestamp().map(|t| t.to_unix()), Some((4_102_444_800, 200_000_000)));
        // The first 48 bits are the milliseconds, as RFC 9562 lays them out.
        assert!(earlier.starts_with(&format!(
            "{:08x}-{:04x}",
            4_102_444_800_123_u64 >> 16,
            4_102_444_800_123_u64 & 0xffff
        )));
    }

    #[test]
    fn the_earliest_millisecond_is_forgotten_first_never_a_later_one_still_in_use() {
        let key_at = |ms: i64| row_key(&time_ordered_id(Timestamp(ms))).expect("a UUIDv7 has a row key");
        let late = 4_102_444_820_000_i64;
        let first = key_at(late);
        // Many more earlier milliseconds than are remembered come and go in between (what
        // a busy real clock does beside a service on a clock of its own)...
        let early = 1_795_326_682_000_i64;
        for n in 0..100 {
            key_at(early + n);
        }
        // ...and the later millisecond's counter runs on: its next id is the next key.
        assert_eq!(key_at(late), first + 1);
    }

    #[test]
    fn ids_of_one_millisecond_have_distinct_rising_row_keys_under_their_millisecond() {
        let ms = 4_102_444_810_000_i64;
        let keys: Vec<i64> = (0..2000)
            .map(|n| {
                let _between = time_ordered_id(Timestamp(ms + if n % 2 == 0 { -1 } else { 1 }));
                row_key(&time_ordered_id(Timestamp(ms))).expect("a UUIDv7 has a row key")
            })
            .collect();
        assert!(keys.windows(2).all(|pair| pair[1] == pair[0] + 1), "each id of a millisecond is the next key");
        assert!(keys.iter().all(|key| key >> COUNTER_BITS == ms), "the key begins with the millisecond");
        // The first counter is drawn below 2^14, so 2,000 more still fit under 2^15.
        assert!(keys[0] & i64::from(MAX_COUNTER) < 1 << (COUNTER_BITS - 1));
        // The next millisecond's keys are all greater: rows append.
        let next = row_key(&time_ordered_id(Timestamp(ms + 1))).expect("a key");
        assert!(keys.iter().all(|key| *key < next));
        // Ids still differ in their random tail, not only in the counter.
        let tails: std::collections::HashSet<String> =
            (0..50).map(|_| time_ordered_id(Timestamp(ms + 7))[24..].to_owned()).collect();
        assert_eq!(tails.len(), 50);
    }

    #[test]
    fn the_row_key_is_read_from_where_rfc_9562_puts_the_bits() {
        // ms 0x0123456789ab; rand_a 0xcde; rand_b starts 0b101 after the variant (0x8 | …).
        assert_eq!(
            row_key("01234567-89ab-7cde-a9ff-ffffffffffff"),
            Some((0x0123_4567_89ab << 15) | (0xcde << 3) | 0b101)
        );
        assert_eq!(row_key("01234567-89AB-7CDE-A9FF-FFFFFFFFFFFF"), row_key("01234567-89ab-7cde-a9ff-ffffffffffff"));
        assert_eq!(row_key("ffffffff-ffff-7fff-bfff-ffffffffffff"), Some(i64::MAX));
        // Not a UUIDv7, or not a UUID at all: no key, found by the id's index instead.
        assert_eq!(row_key("00000000-0000-4000-8000-000000000001"), None);
        assert_eq!(row_key("01234567-89ab-7cde-29ff-ffffffffffff"), None);
        assert_eq!(row_key("order-1"), None);
    }
}
