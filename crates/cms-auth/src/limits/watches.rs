//! Open watch streams per identity: a count per identity, and a
//! [`WatchSlot`] that holds one of them until it is dropped, with the
//! stream it was taken for. An identity's entry goes with its last slot,
//! so the table holds only identities with streams open.

use std::sync::Arc;

use super::identity::{Identity, IdentityRef};
use super::shards::Shards;

/// How many streams each identity may have open.
pub(crate) struct WatchSlots {
    bound: usize,
    open: Shards<Identity, usize>,
}

impl WatchSlots {
    pub(crate) fn new(bound: usize) -> WatchSlots {
        // Entries live only as long as their streams, which are bounded
        // by the connections the server takes.
        WatchSlots { bound, open: Shards::new(usize::MAX) }
    }

    pub(crate) fn bound(&self) -> usize {
        self.bound
    }

    /// A slot for one more stream of `who`, unless it has `bound` open.
    pub(crate) fn acquire(self: &Arc<Self>, who: IdentityRef<'_>) -> Option<WatchSlot> {
        let mut shard = self.open.lock(&who);
        match shard.get_mut(&who) {
            Some(open) if *open >= self.bound => return None,
            Some(open) => *open += 1,
            None => {
                shard.insert(who.to_owned(), 1);
            }
        }
        drop(shard);
        Some(WatchSlot { slots: self.clone(), identity: who.to_owned() })
    }

    /// How many streams `who` has open.
    pub(crate) fn open(&self, who: IdentityRef<'_>) -> usize {
        self.open.lock(&who).get(&who).copied().unwrap_or(0)
    }

    fn release(&self, who: IdentityRef<'_>) {
        let mut shard = self.open.lock(&who);
        if let Some(open) = shard.get_mut(&who) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                shard.remove(&who);
            }
        }
    }
}

/// One open watch stream of an identity; dropping it frees the slot.
/// Keep it in the stream, so that it goes when the client does.
#[must_use = "the slot is freed when this is dropped"]
pub struct WatchSlot {
    slots: Arc<WatchSlots>,
    identity: Identity,
}

impl std::fmt::Debug for WatchSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchSlot").field("identity", &self.identity).finish()
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        self.slots.release(self.identity.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: IdentityRef<'static> = IdentityRef::User("alice");
    const BOB: IdentityRef<'static> = IdentityRef::User("bob");

    #[test]
    fn slots_are_bounded_per_identity_and_freed_on_drop() {
        let slots = Arc::new(WatchSlots::new(2));
        let first = slots.acquire(ALICE).expect("first");
        let second = slots.acquire(ALICE).expect("second");
        assert!(slots.acquire(ALICE).is_none(), "past the bound");
        let bobs = slots.acquire(BOB).expect("another identity is not affected");
        assert_eq!(slots.open(ALICE), 2);
        drop(first);
        assert_eq!(slots.open(ALICE), 1, "dropping a slot frees it");
        let third = slots.acquire(ALICE).expect("a freed slot is taken again");
        drop((second, third, bobs));
        assert_eq!(slots.open(ALICE), 0);
        assert_eq!(slots.open.len(), 0, "identities with no stream are forgotten");
    }

    #[test]
    fn a_slot_dropped_with_its_stream_is_freed() {
        let slots = Arc::new(WatchSlots::new(1));
        let slot = slots.acquire(ALICE).expect("slot");
        let stream = stream_owning(slot);
        assert!(slots.acquire(ALICE).is_none());
        drop(stream);
        assert!(slots.acquire(ALICE).is_some(), "the client went away with the stream");
    }

    /// A stand-in for a response stream that owns its slot.
    fn stream_owning(slot: WatchSlot) -> impl Iterator<Item = u8> {
        std::iter::repeat(0).inspect(move |_| {
            let _held = &slot;
        })
    }
}
