//! Login throttling, counted where the failures come from. Each failed
//! login counts in three sliding windows of 60 s:
//!
//! - **the user name from the address**: 5 failures refuse that user's
//!   logins from that address until the window passes;
//! - **the address**: 20 failures, whatever user names they try, refuse
//!   every login from that address;
//! - **the user name**: past 30 failures from all addresses together, the
//!   user is under attack, and an address with a failure for it within the
//!   window is refused until that failure passes, while an address without
//!   one still gets its try. This slows a guesser spread over many
//!   addresses to one guess per address per window, and never locks the
//!   user out from an address that has not failed.
//!
//! So a stranger hammering `admin` locks out their own address, not
//! `admin`'s logins from elsewhere. An address is the peer's IP as the
//! server sees it; an IPv6 address counts by its /64, which one host
//! commonly holds whole. Logins with no known address share one. A
//! success clears its user name's failures from its address only. Each
//! window keeps at most its limit of failure times per key, in the
//! sharded, bounded table of the limits per identity.

use std::collections::VecDeque;
use std::hash::Hash;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use hashbrown::Equivalent;

use crate::limits::Shards;

/// Failures of a user name from an address before that pair is refused.
pub(crate) const PER_USER_AND_ADDRESS: usize = 5;
/// Failures from an address, whatever the user names, before it is refused.
pub(crate) const PER_ADDRESS: usize = 20;
/// Failures of a user name from all addresses before each address that
/// failed for it is refused.
pub(crate) const PER_USER: usize = 30;
/// The span of every window.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// How many keys each window tracks at most; idle ones are dropped first.
const MAX_TRACKED: usize = 10_000;

/// Where a login comes from: its peer's IP, an IPv6 one by its /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Address(Option<IpAddr>);

impl Address {
    fn of(from: Option<IpAddr>) -> Address {
        Address(from.map(|ip| match ip.to_canonical() {
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
            v4 => v4,
        }))
    }
}

/// Failed logins, over a sliding window, per user name and address.
pub struct LoginThrottle {
    pairs: Window<(Box<str>, Address)>,
    addresses: Window<Address>,
    users: Window<Box<str>>,
}

impl std::fmt::Debug for LoginThrottle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginThrottle")
            .field("per_user_and_address", &self.pairs.limit)
            .field("per_address", &self.addresses.limit)
            .field("per_user", &self.users.limit)
            .finish()
    }
}

impl Default for LoginThrottle {
    fn default() -> LoginThrottle {
        LoginThrottle {
            pairs: Window::new(PER_USER_AND_ADDRESS),
            addresses: Window::new(PER_ADDRESS),
            users: Window::new(PER_USER),
        }
    }
}

impl LoginThrottle {
    /// `Some(seconds to wait)` when a login of `user` from `from` is to be
    /// refused without checking its password.
    pub fn check(&self, user: &str, from: Option<IpAddr>, now: Instant) -> Option<u64> {
        let address = Address::of(from);
        if let Some(wait) = self.addresses.refusal(&address, now) {
            return Some(wait);
        }
        let pair = (Box::from(user), address);
        if let Some(wait) = self.pairs.refusal(&pair, now) {
            return Some(wait);
        }
        if self.users.refusal(user, now).is_some() {
            return self.pairs.until_all_pass(&pair, now);
        }
        None
    }

    /// Records a failed login of `user` from `from`.
    pub fn fail(&self, user: &str, from: Option<IpAddr>, now: Instant) {
        let address = Address::of(from);
        self.pairs.record((user.into(), address), now);
        self.addresses.record(address, now);
        self.users.record(user.into(), now);
    }

    /// Forgets the failures of `user` from `from` after a successful login.
    /// Those of the address and of the user stay: a login that succeeds
    /// does not buy more guesses at other names, nor from elsewhere.
    pub fn succeed(&self, user: &str, from: Option<IpAddr>) {
        self.pairs.clear(&(Box::from(user), Address::of(from)));
    }
}

/// The failure times of each key within the last [`WINDOW`], at most
/// `limit` of them per key.
struct Window<K> {
    failures: Shards<K, VecDeque<Instant>>,
    limit: usize,
}

impl<K: Hash + Eq> Window<K> {
    fn new(limit: usize) -> Window<K> {
        Window { failures: Shards::new(MAX_TRACKED), limit }
    }

    /// `Some(seconds until the oldest counted failure passes)` when `key`
    /// has `limit` failures within the window.
    fn refusal<Q: Hash + Equivalent<K> + ?Sized>(&self, key: &Q, now: Instant) -> Option<u64> {
        let mut shard = self.failures.lock(key);
        let recent = shard.get_mut(key)?;
        expire(recent, now);
        if recent.len() < self.limit {
            return None;
        }
        recent.front().map(|oldest| seconds_until_passed(*oldest, now))
    }

    /// `Some(seconds until every failure of `key` passes)` when it has any
    /// within the window.
    fn until_all_pass<Q: Hash + Equivalent<K> + ?Sized>(&self, key: &Q, now: Instant) -> Option<u64> {
        let mut shard = self.failures.lock(key);
        let recent = shard.get_mut(key)?;
        expire(recent, now);
        recent.back().map(|newest| seconds_until_passed(*newest, now))
    }

    fn record(&self, key: K, now: Instant) {
        let mut shard = self.failures.lock(&key);
        let idle =
            |recent: &VecDeque<Instant>| recent.back().is_none_or(|t| now.duration_since(*t) >= WINDOW);
        if !shard.contains_key(&key) && !self.failures.room(&mut shard, idle) {
            return;
        }
        let recent = shard.entry(key).or_default();
        expire(recent, now);
        recent.push_back(now);
        while recent.len() > self.limit {
            recent.pop_front();
        }
    }

    fn clear<Q: Hash + Equivalent<K> + ?Sized>(&self, key: &Q) {
        self.failures.lock(key).remove(key);
    }
}

fn expire(recent: &mut VecDeque<Instant>, now: Instant) {
    while recent.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
        recent.pop_front();
    }
}

/// Whole seconds, at least 1, until a failure at `at` leaves the window.
fn seconds_until_passed(at: Instant, now: Instant) -> u64 {
    let wait = WINDOW.saturating_sub(now.duration_since(at));
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOME: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 10)));
    const STRANGER: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(198, 51, 100, 7)));

    fn address(i: usize) -> Option<IpAddr> {
        Some(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i as u32)))
    }

    #[test]
    fn five_failures_lock_one_user_from_one_address_for_the_window() {
        let throttle = LoginThrottle::default();
        let start = Instant::now();
        for i in 0..5 {
            assert_eq!(throttle.check("alice", STRANGER, start), None, "attempt {i}");
            throttle.fail("alice", STRANGER, start);
        }
        assert_eq!(throttle.check("alice", STRANGER, start + Duration::from_secs(10)), Some(50));
        assert_eq!(throttle.check("alice", HOME, start), None, "alice still logs in from home");
        assert_eq!(throttle.check("bob", STRANGER, start), None, "other users are not affected");
        assert_eq!(throttle.check("alice", STRANGER, start + WINDOW), None, "the window passes");
    }

    #[test]
    fn an_address_that_sprays_user_names_is_refused_for_all_of_them() {
        let throttle = LoginThrottle::default();
        let now = Instant::now();
        for i in 0..PER_ADDRESS {
            let user = format!("user{i}");
            assert_eq!(throttle.check(&user, STRANGER, now), None, "attempt {i}");
            throttle.fail(&user, STRANGER, now);
        }
        assert_eq!(throttle.check("alice", STRANGER, now), Some(60), "a name it never tried");
        assert_eq!(throttle.check("alice", HOME, now), None, "other addresses go on");
    }

    #[test]
    fn a_user_under_attack_from_everywhere_is_slowed_not_locked() {
        let throttle = LoginThrottle::default();
        let start = Instant::now();
        for i in 0..PER_USER {
            throttle.fail("admin", address(i), start + Duration::from_secs(i as u64));
        }
        let now = start + Duration::from_secs(40);
        assert_eq!(throttle.check("admin", address(0), now), Some(20), "an address that failed waits");
        assert_eq!(throttle.check("admin", address(29), now), Some(49));
        assert_eq!(throttle.check("admin", HOME, now), None, "an address that did not still tries");
        assert_eq!(throttle.check("bob", address(0), now), None, "other users are not affected");
        throttle.fail("admin", HOME, now);
        assert_eq!(throttle.check("admin", HOME, now), Some(60), "one guess per address per window");
        assert_eq!(throttle.check("admin", address(0), start + WINDOW), None, "the window passes");
    }

    #[test]
    fn success_clears_only_its_own_failures() {
        let throttle = LoginThrottle::default();
        let now = Instant::now();
        for _ in 0..4 {
            throttle.fail("alice", HOME, now);
        }
        throttle.succeed("alice", HOME);
        throttle.fail("alice", HOME, now);
        assert_eq!(throttle.check("alice", HOME, now), None);
        for i in 0..PER_ADDRESS - 5 {
            throttle.fail(&format!("user{i}"), HOME, now);
        }
        throttle.succeed("alice", HOME);
        assert_eq!(throttle.check("bob", HOME, now), Some(60), "the address keeps its count");
    }

    #[test]
    fn ipv6_addresses_count_by_their_slash_64_and_mapped_ipv4_as_ipv4() {
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let other: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let next: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(Address::of(Some(one)), Address::of(Some(other)));
        assert_ne!(Address::of(Some(one)), Address::of(Some(next)));
        let mapped: IpAddr = "::ffff:192.0.2.10".parse().unwrap();
        assert_eq!(Address::of(Some(mapped)), Address::of(HOME));
    }

    #[test]
    fn memory_stays_bounded() {
        let throttle = LoginThrottle::default();
        let start = Instant::now();
        for i in 0..3 * MAX_TRACKED {
            let now = start + Duration::from_secs(i as u64);
            throttle.fail(&format!("user{i}"), address(i), now);
        }
        assert!(throttle.pairs.failures.len() <= MAX_TRACKED + 16, "{}", throttle.pairs.failures.len());
        assert!(throttle.users.failures.len() <= MAX_TRACKED + 16);
        assert!(throttle.addresses.failures.len() <= MAX_TRACKED + 16);
    }
}
