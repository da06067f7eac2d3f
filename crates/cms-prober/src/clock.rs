//! The clock the cache reads, so that tests move time instead of sleeping.

use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// Wall-clock time in UTC.
#[cfg_attr(any(test, feature = "testsuite"), mockall::automock)]
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that stands still until a test moves it.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock that starts at `start`.
    pub fn new(start: DateTime<Utc>) -> ManualClock {
        ManualClock { now: Mutex::new(start) }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        let mut now = self.now.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *now = now.checked_add_signed(by).unwrap_or(*now);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let start = Utc::now();
        let clock = ManualClock::new(start);
        assert_eq!(clock.now(), start);
        clock.advance(Duration::from_secs(15));
        assert_eq!(clock.now() - start, chrono::Duration::seconds(15));
    }
}
