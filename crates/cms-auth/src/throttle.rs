//! Login throttling: more than 5 failed logins for one user within 60 s
//! are answered with 429 until the window passes. The failures are kept in
//! the same sharded, bounded table as the limits per identity.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::limits::Shards;

/// Failed logins per user name, over a sliding window.
pub struct LoginThrottle {
    failures: Shards<Box<str>, VecDeque<Instant>>,
    limit: usize,
    window: Duration,
}

impl std::fmt::Debug for LoginThrottle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginThrottle").field("limit", &self.limit).field("window", &self.window).finish()
    }
}

/// How many user names are tracked at most; the oldest are dropped first.
const MAX_TRACKED: usize = 10_000;

impl Default for LoginThrottle {
    fn default() -> LoginThrottle {
        LoginThrottle::new(5, Duration::from_secs(60))
    }
}

impl LoginThrottle {
    pub fn new(limit: usize, window: Duration) -> LoginThrottle {
        LoginThrottle { failures: Shards::new(MAX_TRACKED), limit, window }
    }

    /// `Some(seconds to wait)` when `user` has used up its failures.
    pub fn check(&self, user: &str, now: Instant) -> Option<u64> {
        let mut failures = self.failures.lock(user);
        let recent = failures.get_mut(user)?;
        self.expire(recent, now);
        if recent.len() < self.limit {
            return None;
        }
        let oldest = *recent.front()?;
        let wait = self.window.saturating_sub(now.duration_since(oldest));
        Some(wait.as_secs().max(1))
    }

    /// Records a failed login.
    pub fn fail(&self, user: &str, now: Instant) {
        let mut failures = self.failures.lock(user);
        let idle =
            |recent: &VecDeque<Instant>| recent.back().is_none_or(|t| now.duration_since(*t) >= self.window);
        if !failures.contains_key(user) && !self.failures.room(&mut failures, idle) {
            return;
        }
        let recent = failures.entry_ref(user).or_default();
        self.expire(recent, now);
        recent.push_back(now);
    }

    /// Forgets a user's failures after a successful login.
    pub fn succeed(&self, user: &str) {
        self.failures.lock(user).remove(user);
    }

    fn expire(&self, recent: &mut VecDeque<Instant>, now: Instant) {
        while recent.front().is_some_and(|t| now.duration_since(*t) >= self.window) {
            recent.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_lock_one_user_for_the_window() {
        let throttle = LoginThrottle::default();
        let start = Instant::now();
        for i in 0..5 {
            assert_eq!(throttle.check("alice", start), None, "attempt {i}");
            throttle.fail("alice", start);
        }
        assert_eq!(throttle.check("alice", start + Duration::from_secs(10)), Some(50));
        assert_eq!(throttle.check("bob", start), None, "other users are not affected");
        assert_eq!(throttle.check("alice", start + Duration::from_secs(60)), None, "the window passes");
    }

    #[test]
    fn success_clears_failures() {
        let throttle = LoginThrottle::default();
        let now = Instant::now();
        for _ in 0..4 {
            throttle.fail("alice", now);
        }
        throttle.succeed("alice");
        throttle.fail("alice", now);
        assert_eq!(throttle.check("alice", now), None);
    }
}
