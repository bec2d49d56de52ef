//! Per-key request rate limiting: an in-memory token bucket (DESIGN §3).
//!
//! Hand-written rather than a crate: it is a few lines, must run on the service's
//! injectable clock, and needs no async runtime.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

use crate::config::RateLimit;

/// One bucket, in thousandths of a token so refill needs no floats.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    milli_tokens: i64,
    refilled_at_ms: i64,
}

/// Token buckets keyed by API key id (`K = String`) or by client address.
#[derive(Debug)]
pub(crate) struct RateLimiter<K = String> {
    limit: RateLimit,
    buckets: Mutex<HashMap<K, Bucket>>,
}

impl<K: Hash + Eq> RateLimiter<K> {
    pub(crate) fn new(limit: RateLimit) -> Self {
        RateLimiter { limit, buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes one token from `key_id`'s bucket. When the bucket is empty, says in how many
    /// milliseconds (at least 1) the next whole token will be there, so the refusal can
    /// tell the client when to come back.
    pub(crate) fn try_acquire<Q>(&self, key_id: &Q, now_ms: i64) -> Result<(), u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.take(key_id, now_ms, true)
    }

    /// Like [`RateLimiter::try_acquire`] without taking the token: whether one is there.
    /// For limits charged after the fact (a failed authentication costs a token; asking
    /// whether the client may try again must not).
    pub(crate) fn check<Q>(&self, key_id: &Q, now_ms: i64) -> Result<(), u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.take(key_id, now_ms, false)
    }

    fn take<Q>(&self, key_id: &Q, now_ms: i64, consume: bool) -> Result<(), u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if self.limit.per_second == 0 {
            return Ok(());
        }
        let per_ms = i64::from(self.limit.per_second);
        // The clock counts whole milliseconds, so requests within one millisecond see no
        // refill: a bucket smaller than one millisecond's tokens would cap the rate at
        // 1000 × burst per second, below the rate configured.
        let capacity = i64::from(self.limit.burst.max(1)).max((per_ms + 999) / 1000) * 1000;
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !buckets.contains_key(key_id) {
            if !consume {
                return Ok(());
            }
            if buckets.len() >= MAX_BUCKETS {
                // Keys are few, but client addresses are many: forget the buckets that
                // have refilled (they behave exactly like a new one) before growing.
                buckets.retain(|_, bucket| {
                    bucket.milli_tokens.saturating_add((now_ms - bucket.refilled_at_ms).max(0).saturating_mul(per_ms))
                        < capacity
                });
            }
            // Only a new bucket needs an owned key (an allocation for a key id); every
            // other request looks its bucket up by reference.
            buckets.insert(key_id.to_owned(), Bucket { milli_tokens: capacity, refilled_at_ms: now_ms });
        }
        let Some(bucket) = buckets.get_mut(key_id) else {
            // Unreachable: a missing bucket was inserted just above.
            return Ok(());
        };
        let elapsed_ms = (now_ms - bucket.refilled_at_ms).max(0);
        // per_second tokens per 1000 ms = per_second milli-tokens per ms.
        let refill = elapsed_ms.saturating_mul(per_ms);
        bucket.milli_tokens = bucket.milli_tokens.saturating_add(refill).min(capacity);
        // After the clock was set back (an NTP step) the refill goes on from the new time:
        // keeping the later one would refill nothing until the clock caught up, locking
        // the client out for as long as the step. A smaller step back is only requests
        // of several threads arriving out of order: moving back for those would refill
        // the same milliseconds twice.
        if now_ms > bucket.refilled_at_ms || now_ms < bucket.refilled_at_ms - CLOCK_STEP_BACK_MS {
            bucket.refilled_at_ms = now_ms;
        }
        if bucket.milli_tokens >= 1000 {
            if consume {
                bucket.milli_tokens -= 1000;
            }
            Ok(())
        } else {
            // Refill adds per_second milli-tokens per ms; round up so that a client
            // waiting this long finds the token there.
            let missing = 1000 - bucket.milli_tokens;
            let wait_ms = (missing + per_ms - 1) / per_ms;
            Err(u64::try_from(wait_ms).unwrap_or(1).max(1))
        }
    }
}

/// How far behind a bucket's last refill the clock must be to count as set back, not
/// as requests of several threads arriving a little out of order.
const CLOCK_STEP_BACK_MS: i64 = 1_000;

/// How many buckets are kept before the full ones are forgotten.
const MAX_BUCKETS: usize = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_above_a_thousand_bursts_a_second_is_honoured_by_a_millisecond_clock() {
        // 5,000 a second with a burst of 1: five tokens come due every millisecond.
        let limiter = RateLimiter::new(RateLimit { per_second: 5_000, burst: 1 });
        let mut granted = 0;
        for ms in 0..1_000 {
            while limiter.try_acquire("k", ms).is_ok() {
                granted += 1;
            }
        }
        assert_eq!(granted, 5_000, "one second of requests as fast as they come");
        // A rate within a thousand bursts a second keeps its burst exactly.
        let limiter = RateLimiter::new(RateLimit { per_second: 100, burst: 3 });
        assert_eq!((0..10).filter(|_| limiter.try_acquire("k", 0).is_ok()).count(), 3);
    }

    #[test]
    fn bucket_trips_and_refills() {
        let limiter = RateLimiter::new(RateLimit { per_second: 2, burst: 2 });
        assert_eq!(limiter.try_acquire("k", 0), Ok(()));
        assert_eq!(limiter.try_acquire("k", 0), Ok(()));
        assert_eq!(limiter.try_acquire("k", 0), Err(500), "two tokens a second: the next in 500 ms");
        assert_eq!(limiter.try_acquire("other", 0), Ok(()));
        assert_eq!(limiter.try_acquire("k", 400), Err(100));
        assert_eq!(limiter.try_acquire("k", 500), Ok(()));
        assert_eq!(RateLimiter::new(RateLimit::OFF).try_acquire("k", 0), Ok(()));
    }

    #[test]
    fn a_clock_set_back_refills_from_its_new_time_instead_of_locking_the_client_out() {
        let limiter = RateLimiter::new(RateLimit { per_second: 100, burst: 100 });
        let hour = 3_600_000;
        assert_eq!((0..100).filter(|_| limiter.try_acquire("k", hour).is_ok()).count(), 100, "the burst");
        // An hour back, then 10 requests a second, a tenth of the rate: only the first
        // is refused, finding the bucket the burst emptied (before: all but 99 of 600).
        let refused: Vec<i64> =
            (1..=600).map(|n| n * 100).filter(|ms| limiter.try_acquire("k", *ms).is_err()).collect();
        assert_eq!(refused, [100]);
    }

    #[test]
    fn requests_a_little_out_of_order_are_not_refilled_twice() {
        // Two tokens a second, burst 1. Threads read the clock before they take the
        // limiter's lock, so one at 1,000 ms may come after one at 1,400 ms.
        let limiter = RateLimiter::new(RateLimit { per_second: 2, burst: 1 });
        assert_eq!(limiter.try_acquire("k", 0), Ok(()));
        assert_eq!(limiter.try_acquire("k", 1_400), Ok(()));
        assert!(limiter.try_acquire("k", 1_000).is_err(), "no token: 1,000 ms was refilled already");
        assert!(limiter.try_acquire("k", 1_500).is_err(), "only 100 ms since the last refill");
    }

    #[test]
    fn the_wait_is_rounded_up_and_never_zero() {
        // 3 tokens a second: 1000 milli-tokens take 333.3 ms, so 334 ms.
        let limiter = RateLimiter::new(RateLimit { per_second: 3, burst: 1 });
        assert_eq!(limiter.try_acquire("k", 0), Ok(()));
        assert_eq!(limiter.try_acquire("k", 0), Err(334));
        assert_eq!(limiter.try_acquire("k", 333), Err(1));
        assert_eq!(limiter.try_acquire("k", 334), Ok(()));
        // A slow limit: one token a second, so a client just refused waits a whole second.
        let slow = RateLimiter::new(RateLimit { per_second: 1, burst: 1 });
        assert_eq!(slow.try_acquire("k", 0), Ok(()));
        assert_eq!(slow.try_acquire("k", 1), Err(999));
    }

    #[test]
    fn check_tells_without_taking() {
        let limiter = RateLimiter::new(RateLimit { per_second: 1, burst: 2 });
        assert_eq!(limiter.check("a", 0), Ok(()));
        assert_eq!(limiter.check("a", 0), Ok(()), "checking takes nothing");
        assert_eq!(limiter.try_acquire("a", 0), Ok(()));
        assert_eq!(limiter.try_acquire("a", 0), Ok(()));
        assert_eq!(limiter.check("a", 0), Err(1000));
        assert_eq!(limiter.check("a", 1000), Ok(()));
    }

    #[test]
    fn full_buckets_are_forgotten_when_there_are_too_many() {
        let limiter = RateLimiter::new(RateLimit { per_second: 1, burst: 1 });
        for n in 0..MAX_BUCKETS {
            assert_eq!(limiter.try_acquire(&n.to_string(), 0), Ok(()));
        }
        // All of them refill within a second; the next new client prunes them.
        assert_eq!(limiter.try_acquire("late", 5_000), Ok(()));
        let kept = limiter.buckets.lock().map(|b| b.len()).unwrap_or(0);
        assert_eq!(kept, 1);
        assert_eq!(limiter.try_acquire("late", 5_000), Err(1000), "the new bucket is kept");
    }
}
