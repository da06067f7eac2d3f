//! Limits per identity ([`Limits`]): how many watch streams an identity
//! may hold open, and how many requests per second it may make. The
//! identity is the caller's (`identity.rs`): a login's user, an API token,
//! a workload; an API token's requests count against its user's rate too. Both keep their state in the sharded, bounded table of
//! `shards.rs` that the login throttle uses too; `rate.rs` is the request
//! rate, `watches.rs` the watch slots with their guard.

mod identity;
mod rate;
mod shards;
mod watches;

use std::sync::Arc;
use std::time::Instant;

pub(crate) use shards::Shards;
pub use watches::WatchSlot;

use crate::error::AuthError;
use crate::identity::Caller;
use identity::IdentityRef;
use rate::RequestRate;
use watches::WatchSlots;

/// How long a caller refused a watch stream is told to wait: a slot frees
/// when one of its streams ends, which nothing here can foresee.
pub const WATCH_RETRY_AFTER: u64 = 5;

/// The limits per identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitOptions {
    /// How many watch streams one identity may hold open; at least 1.
    pub watches_per_identity: usize,
    /// Requests per second one identity may make, steadily; 0 for no limit.
    pub requests_per_second: u32,
    /// How many requests one identity may make at once, above the steady
    /// rate; at least 1 when there is a rate.
    pub request_burst: u32,
}

impl LimitOptions {
    /// 32 streams.
    pub const DEFAULT_WATCHES_PER_IDENTITY: usize = 32;
    /// 200 requests per second.
    pub const DEFAULT_REQUESTS_PER_SECOND: u32 = 200;
    /// 400 requests.
    pub const DEFAULT_REQUEST_BURST: u32 = 400;
}

impl Default for LimitOptions {
    fn default() -> LimitOptions {
        LimitOptions {
            watches_per_identity: LimitOptions::DEFAULT_WATCHES_PER_IDENTITY,
            requests_per_second: LimitOptions::DEFAULT_REQUESTS_PER_SECOND,
            request_burst: LimitOptions::DEFAULT_REQUEST_BURST,
        }
    }
}

/// The watch streams and request rates of every identity.
pub struct Limits {
    options: LimitOptions,
    rate: Option<RequestRate>,
    watches: Arc<WatchSlots>,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits").field("options", &self.options).finish_non_exhaustive()
    }
}

impl Limits {
    pub fn new(options: LimitOptions) -> Limits {
        let rate = (options.requests_per_second > 0)
            .then(|| RequestRate::new(options.requests_per_second, options.request_burst, Instant::now()));
        Limits { options, rate, watches: Arc::new(WatchSlots::new(options.watches_per_identity.max(1))) }
    }

    pub fn options(&self) -> LimitOptions {
        self.options
    }

    /// Counts one request of `caller`; [`AuthError::TooManyRequests`] when
    /// its identity is over the rate. An API token's request counts against
    /// its user's rate as well as its own, so that a user's logins and
    /// tokens together are held to one rate, however many tokens it makes.
    pub fn admit(&self, caller: &Caller) -> Result<(), AuthError> {
        self.admit_at(caller, Instant::now())
    }

    fn admit_at(&self, caller: &Caller, now: Instant) -> Result<(), AuthError> {
        let Some(rate) = &self.rate else { return Ok(()) };
        let refused = |retry_after| AuthError::TooManyRequests {
            rate: self.options.requests_per_second,
            burst: self.options.request_burst,
            retry_after,
        };
        // The user first: a request its user may not make is not counted
        // against the token.
        if let Some(owner) = IdentityRef::owner(caller) {
            rate.check(owner, now).map_err(refused)?;
        }
        rate.check(IdentityRef::of(caller), now).map_err(refused)
    }

    /// A slot for one more watch stream of `caller`, held until dropped;
    /// [`AuthError::TooManyWatches`] when its identity has the most open.
    pub fn open_watch(&self, caller: &Caller) -> Result<WatchSlot, AuthError> {
        self.watches
            .acquire(IdentityRef::of(caller))
            .ok_or(AuthError::TooManyWatches { bound: self.watches.bound(), retry_after: WATCH_RETRY_AFTER })
    }

    /// How many watch streams `caller`'s identity holds open.
    pub fn open_watches(&self, caller: &Caller) -> usize {
        self.watches.open(IdentityRef::of(caller))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use cms_model::UserRole;

    use super::*;
    use crate::identity::Credential;

    fn limits(watches: usize, rate: u32, burst: u32) -> Limits {
        Limits::new(LimitOptions {
            watches_per_identity: watches,
            requests_per_second: rate,
            request_burst: burst,
        })
    }

    #[test]
    fn refusals_name_the_bound_and_the_wait() {
        let limits = limits(1, 1, 2);
        let viewer = Caller::local("viewer", UserRole::View, Credential::Login);
        let slot = limits.open_watch(&viewer).expect("first stream");
        let refused = limits.open_watch(&viewer).expect_err("second stream");
        assert_eq!(
            refused.to_string(),
            "too many open watch streams: at most 1 per identity; close one and retry"
        );
        assert!(matches!(refused, AuthError::TooManyWatches { retry_after: WATCH_RETRY_AFTER, .. }));
        drop(slot);
        assert_eq!(limits.open_watches(&viewer), 0);

        let now = Instant::now();
        limits.admit_at(&viewer, now).expect("first");
        limits.admit_at(&viewer, now).expect("second, in the burst");
        let refused = limits.admit_at(&viewer, now).expect_err("past the burst");
        assert_eq!(
            refused.to_string(),
            "too many requests: at most 1 per second per identity, in bursts of 2; retry in 1 s"
        );
        limits.admit_at(&viewer, now + Duration::from_secs(1)).expect("a second later");
    }

    #[test]
    fn a_user_s_tokens_and_logins_share_its_rate_but_hold_watches_apart() {
        let limits = limits(1, 1, 2);
        let login = Caller::local("alice", UserRole::View, Credential::Login);
        let first = Caller::local("alice", UserRole::View, Credential::ApiToken { id: "t1".into() });
        let second = Caller::local("alice", UserRole::View, Credential::ApiToken { id: "t2".into() });
        let _slot = limits.open_watch(&login).expect("the login's stream");
        let _other = limits.open_watch(&first).expect("the token's stream");
        let now = Instant::now();
        limits.admit_at(&first, now).expect("the first token");
        limits.admit_at(&second, now).expect("the second token, the user's burst of 2 used up");
        let refused = limits.admit_at(&first, now).expect_err("the user's burst is spent");
        assert!(matches!(refused, AuthError::TooManyRequests { retry_after: 1, .. }), "{refused:?}");
        limits.admit_at(&second, now).expect_err("by either token");
        limits.admit_at(&login, now).expect_err("and by its login");
        let bob = Caller::local("bob", UserRole::View, Credential::ApiToken { id: "t3".into() });
        limits.admit_at(&bob, now).expect("other users go on");
        let later = now + Duration::from_secs(1);
        limits.admit_at(&second, later).expect("a second later, one more");
        limits.admit_at(&first, later).expect_err("one more only, whichever token");
    }

    #[test]
    fn a_zero_rate_admits_everything() {
        let limits = limits(1, 0, 0);
        let caller = Caller::local("alice", UserRole::Admin, Credential::Login);
        let now = Instant::now();
        for _ in 0..10_000 {
            limits.admit_at(&caller, now).expect("no rate");
        }
    }
}
