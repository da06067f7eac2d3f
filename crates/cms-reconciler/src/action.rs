//! What a reconcile asks for next, and the error policy: exponential
//! backoff with jitter.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// The outcome of a successful reconcile, as in kube-runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Reconcile again after this long (the periodic resync).
    Requeue(Duration),
    /// Nothing to do until the tenant changes.
    AwaitChange,
}

/// The error policy's backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { base: Duration::from_secs(1), max: Duration::from_secs(300) }
    }
}

impl Backoff {
    /// The delay before retry number `failures` (1 for the first failure):
    /// `base * 2^(failures-1)`, capped at `max`, then a random part of up to
    /// a quarter of it added (but never past `max`).
    pub fn delay(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(20);
        let delay = self.base.saturating_mul(1 << exponent).min(self.max);
        let spread = delay.as_millis() as u64 / 4;
        let jitter = if spread == 0 { 0 } else { random() % (spread + 1) };
        (delay + Duration::from_millis(jitter)).min(self.max.max(self.base))
    }
}

fn random() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_caps() {
        let backoff = Backoff { base: Duration::from_millis(100), max: Duration::from_secs(2) };
        for failures in 1..6 {
            let delay = backoff.delay(failures);
            let floor = Duration::from_millis(100 << (failures - 1)).min(backoff.max);
            assert!(delay >= floor && delay <= floor + floor / 4, "{failures}: {delay:?}");
        }
        assert_eq!(backoff.delay(30), Duration::from_secs(2));
        let delays: std::collections::BTreeSet<_> = (0..20).map(|_| backoff.delay(3)).collect();
        assert!(delays.len() > 1, "jitter varies the delay");
    }
}
