//! The table every per-identity limit keeps its state in, the login
//! throttle's included: a hash map split into shards, each behind its own
//! lock, so that callers of different identities rarely wait for each
//! other. Lookups take a borrowed key ([`Equivalent`]), so a request whose
//! identity is already known allocates nothing. A bounded table drops the
//! entries its owner calls idle when a shard fills up, so memory stays
//! bounded however many identities come by.

use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard, PoisonError};

use hashbrown::{DefaultHashBuilder, HashMap};

/// How many shards a table has.
const SHARDS: usize = 16;

/// Keys `K` to states `V`, in [`SHARDS`] locked maps.
pub(crate) struct Shards<K, V> {
    shards: Box<[Mutex<HashMap<K, V>>]>,
    /// Chooses a key's shard; the maps hash with hashers of their own.
    hasher: DefaultHashBuilder,
    /// The most keys one shard holds; `usize::MAX` when unbounded.
    per_shard: usize,
}

impl<K: Hash + Eq, V> Shards<K, V> {
    /// A table of at most about `capacity` keys (rounded up to a multiple
    /// of the shard count); `usize::MAX` for no bound.
    pub(crate) fn new(capacity: usize) -> Shards<K, V> {
        let shards = (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect();
        let per_shard = if capacity == usize::MAX { usize::MAX } else { capacity.div_ceil(SHARDS).max(1) };
        Shards { shards, hasher: DefaultHashBuilder::default(), per_shard }
    }

    /// The shard of `key`, locked. A poisoned lock is taken over: the
    /// states are counters and times, each consistent on its own.
    pub(crate) fn lock<Q: Hash + ?Sized>(&self, key: &Q) -> MutexGuard<'_, HashMap<K, V>> {
        let index = (self.hasher.hash_one(key) as usize) % self.shards.len();
        self.shards[index].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `shard` (one of this table's, locked) has room for one more
    /// key, after dropping the entries that `idle` says may go.
    pub(crate) fn room(&self, shard: &mut HashMap<K, V>, idle: impl Fn(&V) -> bool) -> bool {
        if shard.len() < self.per_shard {
            return true;
        }
        shard.retain(|_, state| !idle(state));
        shard.len() < self.per_shard
    }

    /// How many keys the table holds, for tests.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().unwrap_or_else(PoisonError::into_inner).len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_shard_drops_idle_entries_and_no_others() {
        let table: Shards<u32, bool> = Shards::new(SHARDS);
        let mut shard = table.lock(&1);
        shard.insert(1, true);
        assert!(!table.room(&mut shard, |busy| !busy), "one key per shard, and it is busy");
        assert_eq!(shard.len(), 1, "a busy entry stays");
        shard.insert(1, false);
        assert!(table.room(&mut shard, |busy| !busy), "an idle entry makes room");
        assert!(shard.is_empty());
    }

    #[test]
    fn borrowed_keys_find_owned_ones() {
        let table: Shards<Box<str>, u32> = Shards::new(usize::MAX);
        table.lock("alice").insert("alice".into(), 3);
        assert_eq!(table.lock("alice").get("alice"), Some(&3));
        assert_eq!(table.len(), 1);
    }
}
