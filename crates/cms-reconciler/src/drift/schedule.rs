//! When each tenant is planned next: the pure part of the drift scheduler,
//! on a clock the caller passes in.
//!
//! A tenant seen for the first time is due at a random point of the next
//! interval, so that a fleet (or a scheduler that just took over) spreads
//! its plans; after each plan it is due again one interval later, give or
//! take [`JITTER`] of it. At most `concurrency` plans run at once, and at
//! most `budget` start in any window of one interval: a fleet larger than
//! the budget is planned over several intervals, the longest-waiting first.
//! A check that ran no plan (the tenant was busy, not applied, or held by
//! another replica) gives its share of the budget back.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use tokio::time::Instant;

/// The random part of each tenant's interval: up to a tenth of it, either way.
pub const JITTER: f64 = 0.1;

/// How the drift scheduler runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriftOptions {
    /// How often each tenant is planned; zero turns drift detection off.
    pub interval: Duration,
    /// Plans at once, across the service.
    pub concurrency: usize,
    /// Plans started per interval, across the service.
    pub budget: usize,
}

impl Default for DriftOptions {
    fn default() -> DriftOptions {
        DriftOptions { interval: Duration::from_secs(30 * 60), concurrency: 2, budget: 100 }
    }
}

impl DriftOptions {
    /// Drift detection runs at all.
    pub fn enabled(&self) -> bool {
        !self.interval.is_zero() && self.concurrency > 0 && self.budget > 0
    }
}

/// The schedule of every tenant, and the plans started within the last
/// interval.
#[derive(Debug)]
pub(crate) struct Schedule {
    options: DriftOptions,
    next: HashMap<String, Instant>,
    running: HashSet<String>,
    /// When each plan of the last interval started, oldest first.
    started: VecDeque<(Instant, String)>,
}

impl Schedule {
    pub(crate) fn new(options: DriftOptions) -> Schedule {
        Schedule { options, next: HashMap::new(), running: HashSet::new(), started: VecDeque::new() }
    }

    /// The tenants to plan now, the longest-waiting first, each marked as
    /// running: those due among `tenants` (the live ones; the rest are
    /// forgotten), as many as free slots and the budget allow.
    pub(crate) fn take(&mut self, tenants: &[String], now: Instant) -> Vec<String> {
        let live: HashSet<&String> = tenants.iter().collect();
        self.next.retain(|name, _| live.contains(name));
        for name in tenants {
            if !self.next.contains_key(name) {
                let first = now + self.options.interval.mul_f64(random_fraction());
                self.next.insert(name.clone(), first);
            }
        }
        while self.started.front().is_some_and(|(at, _)| now.duration_since(*at) >= self.options.interval) {
            self.started.pop_front();
        }
        let slots = self.options.concurrency.saturating_sub(self.running.len());
        let budget = self.options.budget.saturating_sub(self.started.len());
        let mut due: Vec<(Instant, &String)> = self
            .next
            .iter()
            .filter(|(name, at)| **at <= now && !self.running.contains(*name))
            .map(|(name, at)| (*at, name))
            .collect();
        due.sort();
        let chosen: Vec<String> =
            due.into_iter().take(slots.min(budget)).map(|(_, name)| name.clone()).collect();
        for name in &chosen {
            self.running.insert(name.clone());
            self.started.push_back((now, name.clone()));
        }
        chosen
    }

    /// A check of `tenant` ended at `now`; `planned` says whether the tool
    /// planned (else its share of the budget comes back). It is due again
    /// one interval later, give or take the jitter.
    pub(crate) fn done(&mut self, tenant: &str, planned: bool, now: Instant) {
        self.running.remove(tenant);
        if !planned && let Some(index) = self.started.iter().rposition(|(_, name)| name == tenant) {
            self.started.remove(index);
        }
        let spread = 1.0 + JITTER * (2.0 * random_fraction() - 1.0);
        self.next.insert(tenant.to_string(), now + self.options.interval.mul_f64(spread));
    }

    /// When `tenant` is due next, if it is known.
    #[cfg(test)]
    pub(crate) fn next(&self, tenant: &str) -> Option<Instant> {
        self.next.get(tenant).copied()
    }

    /// Checks running now.
    pub(crate) fn running(&self) -> usize {
        self.running.len()
    }

    /// Forgets everything: another replica schedules now.
    pub(crate) fn clear(&mut self) {
        self.next.clear();
        self.running.clear();
        self.started.clear();
    }
}

/// A random number in `[0, 1)`.
fn random_fraction() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}
