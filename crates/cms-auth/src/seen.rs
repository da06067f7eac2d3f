//! The callers that bearer tokens proved lately, kept by each thread, so
//! that a request whose token was seen before takes no shared lock and
//! writes no memory another core reads: the remembered logins, the roles,
//! the token records and the grants each sit behind one mutex, whose lines
//! the workers would pass back and forth on every request.
//!
//! An entry is used only while what it was made from would still be used:
//! until the token expires, until the shared caches it was read from would
//! read the store again (`cache_ttl` after they did), until an API token's
//! use is due to be recorded again, and only while no user, token or grant
//! was written through the authenticator since (a generation count that
//! every such write moves on). So it answers as the shared caches would,
//! never later; the token's expiry and an API token's next recorded use are
//! read against the wall clock on every use. Only local users' login tokens
//! and API tokens are kept: a sign-in's role follows the current group
//! mapping, and a workload's token is checked at its issuer. A thread drops
//! the tokens it kept once they are no longer good, when it next meets them
//! or keeps another, so that revoked and expired ones do not pile up.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use hashbrown::HashMap;
use thread_local::ThreadLocal;

use crate::identity::Caller;

/// How many tokens one thread keeps at most; it forgets them all past that.
const MOST: usize = 1024;

/// Until when a caller may be reused: the earliest of the times its parts
/// stay good, by the monotonic clock (the caches' times) and by the wall
/// clock (the token's expiry, an API token's next recorded use), or never.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reuse {
    never: bool,
    until: Option<Instant>,
    expires: Option<DateTime<Utc>>,
}

impl Reuse {
    /// Reusable for `ttl` from `now`, until a part says otherwise.
    pub(crate) fn within(now: Instant, ttl: Duration) -> Reuse {
        Reuse { never: false, until: now.checked_add(ttl), expires: None }
    }

    /// A part read from a cache at `at`, good for `ttl` from then.
    pub(crate) fn read_at(&mut self, at: Instant, ttl: Duration) {
        if let Some(until) = at.checked_add(ttl) {
            self.until = Some(self.until.map_or(until, |current| current.min(until)));
        }
    }

    /// A part good until the wall-clock time `at`.
    pub(crate) fn expires(&mut self, at: DateTime<Utc>) {
        self.expires = Some(self.expires.map_or(at, |current| current.min(at)));
    }

    /// A part that must be checked on every request.
    pub(crate) fn never(&mut self) {
        self.never = true;
    }

    fn allows(&self, now: Instant, wall: DateTime<Utc>) -> bool {
        !self.never && self.until.is_none_or(|until| now < until) && self.expires.is_none_or(|at| wall < at)
    }
}

/// The callers each thread has seen, and the generation they belong to.
#[derive(Default)]
pub(crate) struct Seen {
    generation: AtomicU64,
    callers: ThreadLocal<RefCell<HashMap<Box<str>, Entry>>>,
}

struct Entry {
    generation: u64,
    reuse: Reuse,
    caller: Caller,
}

impl Seen {
    /// The current generation: read before a caller is worked out, and
    /// given with it to [`Seen::keep`].
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Makes every kept caller stale, on every thread.
    pub(crate) fn forget_all(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The caller `bearer` proved on this thread, while it is still good at
    /// `now`; a kept caller no longer good is dropped, token and all.
    pub(crate) fn get(&self, bearer: &str, now: Instant) -> Option<Caller> {
        let mut callers = self.callers.get()?.borrow_mut();
        let entry = callers.get(bearer)?;
        if entry.generation == self.generation() && entry.reuse.allows(now, Utc::now()) {
            return Some(entry.caller.clone());
        }
        callers.remove(bearer);
        None
    }

    /// Keeps `caller` for `bearer` on this thread, as of `generation`, when
    /// `reuse` allows; first drops what the thread kept that is no longer
    /// good, so that tokens revoked or expired do not stay in memory.
    pub(crate) fn keep(&self, bearer: &str, caller: &Caller, generation: u64, reuse: Reuse, now: Instant) {
        let wall = Utc::now();
        if !reuse.allows(now, wall) {
            return;
        }
        let mut callers = self.callers.get_or_default().borrow_mut();
        let current = self.generation();
        callers.retain(|_, entry| entry.generation == current && entry.reuse.allows(now, wall));
        if callers.len() >= MOST {
            callers.clear();
        }
        callers.insert(bearer.into(), Entry { generation, reuse, caller: caller.clone() });
    }
}

#[cfg(test)]
mod tests {
    use cms_model::UserRole;

    use super::*;
    use crate::identity::Credential;

    fn alice() -> Caller {
        Caller::local("alice", UserRole::View, Credential::Login)
    }

    #[test]
    fn a_kept_caller_lasts_until_the_earliest_part_says() {
        let seen = Seen::default();
        let now = Instant::now();
        let mut reuse = Reuse::within(now, Duration::from_secs(2));
        reuse.read_at(now, Duration::from_secs(1));
        seen.keep("token", &alice(), seen.generation(), reuse, now);
        assert_eq!(seen.get("token", now).map(|caller| caller.user), Some("alice".into()));
        assert!(seen.get("token", now + Duration::from_millis(1500)).is_none());
        assert!(seen.get("other", now).is_none());
        assert!(seen.callers.get().is_some_and(|callers| callers.borrow().is_empty()), "dropped once stale");
    }

    #[test]
    fn a_caller_that_must_be_checked_each_time_is_not_kept() {
        let seen = Seen::default();
        let now = Instant::now();
        let mut reuse = Reuse::within(now, Duration::from_secs(2));
        reuse.never();
        reuse.read_at(now, Duration::from_secs(1));
        seen.keep("token", &alice(), seen.generation(), reuse, now);
        assert!(seen.get("token", now).is_none());
    }

    #[test]
    fn an_expired_token_is_not_answered_whatever_the_monotonic_clock_says() {
        let seen = Seen::default();
        let now = Instant::now();
        let mut reuse = Reuse::within(now, Duration::from_secs(2));
        reuse.expires(Utc::now() + chrono::TimeDelta::milliseconds(50));
        seen.keep("token", &alice(), seen.generation(), reuse, now);
        assert!(seen.get("token", now).is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert!(seen.get("token", now).is_none(), "the wall clock passed the token's expiry");
        let mut expired = Reuse::within(now, Duration::from_secs(2));
        expired.expires(Utc::now());
        seen.keep("expired", &alice(), seen.generation(), expired, now);
        assert!(seen.get("expired", now).is_none());
    }

    #[test]
    fn an_unbounded_time_to_live_keeps_to_the_other_parts() {
        let seen = Seen::default();
        let now = Instant::now();
        let mut reuse = Reuse::within(now, Duration::MAX);
        reuse.read_at(now, Duration::MAX);
        reuse.read_at(now, Duration::from_secs(1));
        seen.keep("token", &alice(), seen.generation(), reuse, now);
        assert!(seen.get("token", now).is_some());
        assert!(seen.get("token", now + Duration::from_secs(1)).is_none());
    }

    #[test]
    fn a_write_makes_every_thread_forget() {
        let seen = Seen::default();
        let now = Instant::now();
        let reuse = Reuse::within(now, Duration::from_secs(2));
        seen.keep("token", &alice(), seen.generation(), reuse, now);
        std::thread::scope(|scope| {
            scope.spawn(|| seen.keep("token", &alice(), seen.generation(), reuse, now));
        });
        seen.forget_all();
        assert!(seen.get("token", now).is_none());
        std::thread::scope(|scope| {
            scope.spawn(|| assert!(seen.get("token", now).is_none(), "another thread forgot too"));
        });
    }

    #[test]
    fn a_caller_worked_out_before_a_write_is_stale_when_kept_after_it() {
        let seen = Seen::default();
        let now = Instant::now();
        let before = seen.generation();
        seen.forget_all();
        seen.keep("token", &alice(), before, Reuse::within(now, Duration::from_secs(2)), now);
        assert!(seen.get("token", now).is_none());
    }

    #[test]
    fn a_thread_keeps_a_bounded_number() {
        let seen = Seen::default();
        let now = Instant::now();
        let reuse = Reuse::within(now, Duration::from_secs(2));
        for index in 0..=MOST {
            seen.keep(&format!("token-{index}"), &alice(), seen.generation(), reuse, now);
        }
        let kept = seen.callers.get().map_or(0, |callers| callers.borrow().len());
        assert!(kept <= MOST, "{kept} kept");
        assert!(seen.get(&format!("token-{MOST}"), now).is_some(), "the newest is kept");
    }
}
