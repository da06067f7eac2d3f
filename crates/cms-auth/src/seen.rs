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
//! never later. Only local users' login tokens and API tokens are kept: a
//! sign-in's role follows the current group mapping, and a workload's token
//! is checked at its issuer.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hashbrown::HashMap;
use thread_local::ThreadLocal;

use crate::identity::Caller;

/// How many tokens one thread keeps at most; it forgets them all past that.
const MOST: usize = 1024;

/// Until when a caller may be reused: the earliest of the times its parts
/// stay good, or never.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reuse {
    until: Option<Instant>,
}

impl Reuse {
    /// Reusable until `until`, until a part says otherwise.
    pub(crate) fn until(until: Instant) -> Reuse {
        Reuse { until: Some(until) }
    }

    /// A part that stays good until `until`.
    pub(crate) fn by(&mut self, until: Instant) {
        self.until = self.until.map(|current| current.min(until));
    }

    /// A part that must be checked on every request.
    pub(crate) fn never(&mut self) {
        self.until = None;
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
    until: Instant,
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

    /// The caller `bearer` proved on this thread, while it is still good at `now`.
    pub(crate) fn get(&self, bearer: &str, now: Instant) -> Option<Caller> {
        let callers = self.callers.get()?.borrow();
        let entry = callers.get(bearer)?;
        (entry.generation == self.generation() && now < entry.until).then(|| entry.caller.clone())
    }

    /// Keeps `caller` for `bearer` on this thread, as of `generation`, when
    /// `reuse` allows.
    pub(crate) fn keep(&self, bearer: &str, caller: &Caller, generation: u64, reuse: Reuse, now: Instant) {
        let Some(until) = reuse.until.filter(|until| *until > now) else { return };
        let mut callers = self.callers.get_or_default().borrow_mut();
        if callers.len() >= MOST && !callers.contains_key(bearer) {
            let current = self.generation();
            callers.retain(|_, entry| entry.generation == current && entry.until > now);
            if callers.len() >= MOST {
                callers.clear();
            }
        }
        callers.insert(bearer.into(), Entry { generation, until, caller: caller.clone() });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
        let mut reuse = Reuse::until(now + Duration::from_secs(2));
        reuse.by(now + Duration::from_secs(1));
        seen.keep("token", &alice(), seen.generation(), reuse, now);
        assert_eq!(seen.get("token", now).map(|caller| caller.user), Some("alice".into()));
        assert!(seen.get("token", now + Duration::from_millis(1500)).is_none());
        assert!(seen.get("other", now).is_none());
    }

    #[test]
    fn a_caller_that_must_be_checked_each_time_is_not_kept() {
        let seen = Seen::default();
        let now = Instant::now();
        let mut reuse = Reuse::until(now + Duration::from_secs(2));
        reuse.never();
        reuse.by(now + Duration::from_secs(1));
        seen.keep("token", &alice(), seen.generation(), reuse, now);
        assert!(seen.get("token", now).is_none());
    }

    #[test]
    fn a_write_makes_every_thread_forget() {
        let seen = Seen::default();
        let now = Instant::now();
        let reuse = Reuse::until(now + Duration::from_secs(2));
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
        seen.keep("token", &alice(), before, Reuse::until(now + Duration::from_secs(2)), now);
        assert!(seen.get("token", now).is_none());
    }

    #[test]
    fn a_thread_keeps_a_bounded_number() {
        let seen = Seen::default();
        let now = Instant::now();
        let reuse = Reuse::until(now + Duration::from_secs(2));
        for index in 0..=MOST {
            seen.keep(&format!("token-{index}"), &alice(), seen.generation(), reuse, now);
        }
        let kept = seen.callers.get().map_or(0, |callers| callers.borrow().len());
        assert!(kept <= MOST, "{kept} kept");
        assert!(seen.get(&format!("token-{MOST}"), now).is_some(), "the newest is kept");
    }
}
