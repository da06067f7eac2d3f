//! Request rates per identity, by the generic cell rate algorithm: each
//! identity has one number, the time at which its bucket would be full
//! again (its theoretical arrival time). A request moves it one interval
//! (1 / rate) on; a request that would move it more than `burst` intervals
//! past now is refused, and told how long until it would not be.
//!
//! Each identity's time is an atomic that a request moves on with a
//! compare-and-swap. The table of identities is locked only to find or add
//! one: each thread keeps the identities it has met, so that a request of
//! a known identity takes no shared lock.
//!
//! An identity whose time has passed is as good as unknown, so it may be
//! dropped: the table holds at most [`MAX_TRACKED`] identities, and drops
//! such idle ones when a shard fills up. A dropped identity's time is
//! marked retired first, so that a thread still holding it finds it again
//! in the table (or anew) rather than counting on a time nobody else sees.
//! When every tracked identity is busy, a new one is let through untracked
//! rather than refused.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hashbrown::HashMap;
use thread_local::ThreadLocal;

use super::identity::{Identity, IdentityRef};
use super::shards::Shards;

/// How many identities are tracked at most.
pub(crate) const MAX_TRACKED: usize = 16_384;

/// How many identities one thread keeps at most; it forgets them all past that.
const MAX_PER_THREAD: usize = 1024;

/// The time of an identity that was dropped from the table.
const RETIRED: u64 = u64::MAX;

/// One identity's theoretical arrival time, in nanoseconds since the epoch.
type Time = Arc<AtomicU64>;

/// Requests per second per identity, with bursts.
pub(crate) struct RequestRate {
    /// Nanoseconds between requests at the steady rate.
    interval: u64,
    /// How far, in nanoseconds, an identity's time may run ahead of now.
    tolerance: u64,
    /// Where times count from.
    epoch: Instant,
    /// Each identity's time.
    times: Shards<Identity, Time>,
    /// The times each thread has found in `times`.
    known: ThreadLocal<RefCell<HashMap<Identity, Time>>>,
}

impl RequestRate {
    /// `rate` requests per second, in bursts of up to `burst`; both at least 1.
    pub(crate) fn new(rate: u32, burst: u32, epoch: Instant) -> RequestRate {
        let interval = (1_000_000_000 / u64::from(rate.max(1))).max(1);
        let tolerance = interval.saturating_mul(u64::from(burst.max(1)));
        RequestRate { interval, tolerance, epoch, times: Shards::new(MAX_TRACKED), known: ThreadLocal::new() }
    }

    /// Counts one request of `who` at `now`: `Err(seconds to wait)` when
    /// it is over the rate.
    pub(crate) fn check(&self, who: IdentityRef<'_>, now: Instant) -> Result<(), u64> {
        let now = u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX - 1);
        let known = self.known.get_or_default();
        // Moved on in place: cloning the time would touch its shared count.
        let kept = known.borrow().get(&who).map(|time| self.advance(time, now));
        match kept {
            Some(Advance::Retired) => {
                known.borrow_mut().remove(&who);
            }
            Some(outcome) => return outcome.answer(),
            None => {}
        }
        loop {
            let Some(time) = self.find(who, now) else { return Ok(()) };
            let outcome = self.advance(&time, now);
            if !matches!(outcome, Advance::Retired) {
                let mut known = known.borrow_mut();
                if known.len() >= MAX_PER_THREAD {
                    known.clear();
                }
                known.insert(who.to_owned(), time);
                return outcome.answer();
            }
        }
    }

    /// Moves `time` one interval on from `now` (or from itself, when it is
    /// ahead), unless that runs past the tolerance.
    fn advance(&self, time: &AtomicU64, now: u64) -> Advance {
        let mut current = time.load(Ordering::Acquire);
        loop {
            if current == RETIRED {
                return Advance::Retired;
            }
            let next = current.max(now).saturating_add(self.interval).min(RETIRED - 1);
            let ahead = next - now;
            if ahead > self.tolerance {
                return Advance::Refused(Duration::from_nanos(ahead - self.tolerance));
            }
            match time.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Advance::Counted,
                Err(actual) => current = actual,
            }
        }
    }

    /// The time of `who` in the table, added when it is not there; `None`
    /// when the table is full of busy identities.
    fn find(&self, who: IdentityRef<'_>, now: u64) -> Option<Time> {
        let mut shard = self.times.lock(&who);
        if let Some(time) = shard.get(&who) {
            return Some(time.clone());
        }
        // An idle time is retired, and so dropped, only while still idle:
        // a request that moves it on first keeps it.
        let retire = |time: &Time| {
            let current = time.load(Ordering::Acquire);
            current <= now
                && time.compare_exchange(current, RETIRED, Ordering::AcqRel, Ordering::Acquire).is_ok()
        };
        if !self.times.room(&mut shard, retire) {
            return None;
        }
        let time = Time::new(AtomicU64::new(now));
        shard.insert(who.to_owned(), time.clone());
        Some(time)
    }

    /// How many identities are tracked, for tests.
    #[cfg(test)]
    pub(crate) fn tracked(&self) -> usize {
        self.times.len()
    }
}

/// What moving an identity's time did.
enum Advance {
    Counted,
    /// Over the rate, by this much past the tolerance.
    Refused(Duration),
    /// The time was dropped from the table: look again.
    Retired,
}

impl Advance {
    /// The answer of [`RequestRate::check`]: the whole seconds to wait when refused.
    fn answer(self) -> Result<(), u64> {
        match self {
            Advance::Refused(wait) => Err(wait.as_secs() + u64::from(wait.subsec_nanos() > 0)),
            Advance::Counted | Advance::Retired => Ok(()),
        }
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

    #[test]
    fn threads_together_get_the_burst_and_no_more() {
        let start = Instant::now();
        let rate = RequestRate::new(1, 100, start);
        let admitted = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..100 {
                        if rate.check(ALICE, start).is_ok() {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(admitted.into_inner(), 100, "four threads of 100 requests at one instant share one burst");
    }

    #[test]
    fn a_thread_that_kept_a_dropped_identity_counts_on_the_one_in_the_table() {
        let start = Instant::now();
        let rate = RequestRate::new(1, 2, start);
        assert_eq!(rate.check(ALICE, start), Ok(()), "this thread now keeps alice's time");
        // Alice goes idle, and other identities fill the table until hers is dropped.
        let later = start + Duration::from_secs(10);
        let names: Vec<String> = (0..2 * MAX_TRACKED).map(|i| format!("user-{i}")).collect();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for name in &names {
                    let _ = rate.check(IdentityRef::User(name), later);
                }
            });
        });
        // Once the others are idle too, another thread spends alice's
        // burst on a time new in the table.
        let last = later + Duration::from_secs(10);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                assert_eq!(rate.check(ALICE, last), Ok(()));
                assert_eq!(rate.check(ALICE, last), Ok(()));
            });
        });
        assert_eq!(rate.check(ALICE, last), Err(1), "this thread sees the burst spent, not its old time");
    }
}
