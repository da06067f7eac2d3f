//! Request rates per identity, by the generic cell rate algorithm: each
//! identity has one number, the time at which its bucket would be full
//! again (its theoretical arrival time). A request moves it one interval
//! (1 / rate) on; a request that would move it more than `burst` intervals
//! past now is refused, and told how long until it would not be.
//!
//! An identity whose time has passed is as good as unknown, so it may be
//! dropped: the table holds at most [`MAX_TRACKED`] identities, and drops
//! such idle ones when a shard fills up. When every tracked identity is
//! busy, a new one is let through untracked rather than refused.

use std::time::{Duration, Instant};

use super::identity::{Identity, IdentityRef};
use super::shards::Shards;

/// How many identities are tracked at most.
pub(crate) const MAX_TRACKED: usize = 16_384;

/// Requests per second per identity, with bursts.
pub(crate) struct RequestRate {
    /// Nanoseconds between requests at the steady rate.
    interval: u64,
    /// How far, in nanoseconds, an identity's time may run ahead of now.
    tolerance: u64,
    /// Where times count from.
    epoch: Instant,
    /// Each identity's theoretical arrival time, in nanoseconds since `epoch`.
    times: Shards<Identity, u64>,
}

impl RequestRate {
    /// `rate` requests per second, in bursts of up to `burst`; both at least 1.
    pub(crate) fn new(rate: u32, burst: u32, epoch: Instant) -> RequestRate {
        let interval = (1_000_000_000 / u64::from(rate.max(1))).max(1);
        let tolerance = interval.saturating_mul(u64::from(burst.max(1)));
        RequestRate { interval, tolerance, epoch, times: Shards::new(MAX_TRACKED) }
    }

    /// Counts one request of `who` at `now`: `Err(seconds to wait)` when
    /// it is over the rate.
    pub(crate) fn check(&self, who: IdentityRef<'_>, now: Instant) -> Result<(), u64> {
        let now = u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        let mut shard = self.times.lock(&who);
        let next = shard.get(&who).map_or(now, |time| (*time).max(now)).saturating_add(self.interval);
        let ahead = next - now;
        if ahead > self.tolerance {
            let wait = Duration::from_nanos(ahead - self.tolerance);
            return Err(wait.as_secs() + u64::from(wait.subsec_nanos() > 0));
        }
        match shard.get_mut(&who) {
            Some(time) => *time = next,
            None => {
                if self.times.room(&mut shard, |time| *time <= now) {
                    shard.insert(who.to_owned(), next);
                }
            }
        }
        Ok(())
    }

    /// How many identities are tracked, for tests.
    #[cfg(test)]
    pub(crate) fn tracked(&self) -> usize {
        self.times.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: IdentityRef<'static> = IdentityRef::User("alice");
    const BOB: IdentityRef<'static> = IdentityRef::User("bob");

    #[test]
    fn a_burst_then_the_steady_rate() {
        let start = Instant::now();
        let rate = RequestRate::new(2, 3, start);
        for i in 0..3 {
            assert_eq!(rate.check(ALICE, start), Ok(()), "request {i} of the burst");
        }
        assert_eq!(rate.check(ALICE, start), Err(1), "past the burst: half a second to wait, rounded up");
        assert_eq!(rate.check(BOB, start), Ok(()), "others are not affected");
        let later = start + Duration::from_millis(500);
        assert_eq!(rate.check(ALICE, later), Ok(()), "one interval later, one more");
        assert_eq!(rate.check(ALICE, later), Err(1));
        let rested = start + Duration::from_secs(10);
        for i in 0..3 {
            assert_eq!(rate.check(ALICE, rested), Ok(()), "a full burst again after a rest, {i}");
        }
    }

    #[test]
    fn the_wait_names_whole_seconds() {
        let start = Instant::now();
        let rate = RequestRate::new(1, 1, start);
        assert_eq!(rate.check(ALICE, start), Ok(()));
        assert_eq!(rate.check(ALICE, start), Err(1));
        assert_eq!(rate.check(ALICE, start + Duration::from_millis(999)), Err(1));
        assert_eq!(rate.check(ALICE, start + Duration::from_secs(1)), Ok(()));
    }

    #[test]
    fn idle_identities_are_dropped_and_memory_stays_bounded() {
        let start = Instant::now();
        let rate = RequestRate::new(1000, 10, start);
        let names: Vec<String> = (0..3 * MAX_TRACKED).map(|i| format!("user-{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            let now = start + Duration::from_millis(i as u64);
            assert_eq!(rate.check(IdentityRef::User(name), now), Ok(()));
        }
        assert!(rate.tracked() <= MAX_TRACKED + 16, "{} tracked", rate.tracked());
        let busy = RequestRate::new(1, 1, start);
        for name in &names {
            let _ = busy.check(IdentityRef::Token(name), start);
        }
        assert!(busy.tracked() <= MAX_TRACKED + 16, "busy identities are bounded too: {}", busy.tracked());
    }
}
