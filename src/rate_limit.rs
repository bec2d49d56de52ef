//! Per-key request rate limiting: an in-memory token bucket (DESIGN §3).
//!
//! Hand-written rather than a crate: it is a few lines, must run on the service's
//! injectable clock, and needs no async runtime.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::config::RateLimit;

/// One bucket, in thousandths of a token so refill needs no floats.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    milli_tokens: i64,
    refilled_at_ms: i64,
}

/// Token buckets keyed by API key id.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    limit: RateLimit,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    pub(crate) fn new(limit: RateLimit) -> Self {
        RateLimiter { limit, buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes one token from `key_id`'s bucket; false when the bucket is empty.
    pub(crate) fn try_acquire(&self, key_id: &str, now_ms: i64) -> bool {
        if self.limit.per_second == 0 {
            return true;
        }
        let capacity = i64::from(self.limit.burst.max(1)) * 1000;
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let bucket =
            buckets.entry(key_id.to_string()).or_insert(Bucket { milli_tokens: capacity, refilled_at_ms: now_ms });
        let elapsed_ms = (now_ms - bucket.refilled_at_ms).max(0);
        // per_second tokens per 1000 ms = per_second milli-tokens per ms.
        let refill = elapsed_ms.saturating_mul(i64::from(self.limit.per_second));
        bucket.milli_tokens = bucket.milli_tokens.saturating_add(refill).min(capacity);
        bucket.refilled_at_ms = now_ms.max(bucket.refilled_at_ms);
        if bucket.milli_tokens >= 1000 {
            bucket.milli_tokens -= 1000;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_trips_and_refills() {
        let limiter = RateLimiter::new(RateLimit { per_second: 2, burst: 2 });
        assert!(limiter.try_acquire("k", 0));
        assert!(limiter.try_acquire("k", 0));
        assert!(!limiter.try_acquire("k", 0));
        assert!(limiter.try_acquire("other", 0));
        assert!(!limiter.try_acquire("k", 400));
        assert!(limiter.try_acquire("k", 500));
        assert!(RateLimiter::new(RateLimit::OFF).try_acquire("k", 0));
    }
}
