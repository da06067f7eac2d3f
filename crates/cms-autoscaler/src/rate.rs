//! How fast one tenant's autoscaler may call: a token bucket per tenant,
//! so that a leaked identity can neither flood the service nor the audit
//! log. The upstream autoscaler makes a handful of calls per group every
//! ten seconds, far below the rate.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Calls per second one tenant's autoscaler may make, steadily.
pub(crate) const CALLS_PER_SECOND: f64 = 50.0;
/// How many calls it may make at once above the steady rate.
pub(crate) const BURST: f64 = 200.0;
/// Buckets idle this long are forgotten once the table grows.
const IDLE: Duration = Duration::from_secs(600);
/// The table is swept of idle buckets when it holds this many.
const SWEEP_AT: usize = 10_000;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets, by tenant.
#[derive(Debug, Default)]
pub(crate) struct Rate {
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl Rate {
    /// Takes a token of `tenant`'s bucket at `now`; `false` when it is empty.
    pub(crate) fn admit(&self, tenant: &str, now: Instant) -> bool {
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() >= SWEEP_AT {
            buckets.retain(|_, bucket| now.duration_since(bucket.at) < IDLE);
        }
        let bucket = buckets.entry(tenant.to_string()).or_insert(Bucket { tokens: BURST, at: now });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * CALLS_PER_SECOND).min(BURST);
        bucket.at = now;
        if bucket.tokens < 1.0 {
            return false;
        }
        bucket.tokens -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_gets_its_burst_then_its_rate_and_others_are_apart() {
        let rate = Rate::default();
        let start = Instant::now();
        let admitted = (0..300).filter(|_| rate.admit("acme", start)).count();
        assert_eq!(admitted, BURST as usize);
        assert!(rate.admit("other", start), "another tenant has a bucket of its own");
        assert!(!rate.admit("acme", start + Duration::from_millis(10)), "half a token is none");
        let later = start + Duration::from_millis(100);
        let refilled = (0..300).filter(|_| rate.admit("acme", later)).count();
        assert_eq!(refilled, 5, "a tenth of a second at 50 calls a second");
    }
}
