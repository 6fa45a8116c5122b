//! The operators in flight in a shard: at most one per region, kept beside the entries rather
//! than in each, since few run at a time (the schedule limits bound them) while an entry is
//! paid for by every region. Each key is a region the shard holds an entry for; the shard
//! drops a region's operator with its entry.
//!
//! Must not touch: the entries, the operators' charges (the scheduler releases those), the
//! status records.

use std::collections::HashMap;

use crate::placement::operator::Pending;

#[derive(Debug, Default)]
pub(super) struct InFlight {
    ops: HashMap<u64, Box<Pending>>,
}

impl InFlight {
    /// Region `id`'s operator.
    pub(super) fn get(&self, id: u64) -> Option<&Pending> {
        // Most calls, with nothing in flight anywhere: no hashing at all.
        if self.ops.is_empty() {
            return None;
        }
        self.ops.get(&id).map(|p| &**p)
    }

    /// Whether region `id` runs an operator.
    pub(super) fn busy(&self, id: u64) -> bool {
        self.get(id).is_some()
    }

    /// Region `id`'s slot, as the scheduler's calls take it: `call` may empty it, fill it or
    /// change it, and what it holds after is kept.
    pub(super) fn with_slot<R>(
        &mut self,
        id: u64,
        call: impl FnOnce(&mut Option<Box<Pending>>) -> R,
    ) -> R {
        let mut slot = if self.ops.is_empty() {
            None
        } else {
            self.ops.remove(&id)
        };
        let r = call(&mut slot);
        if let Some(op) = slot {
            self.ops.insert(id, op);
        }
        r
    }

    /// Puts `op` in region `id`'s slot, which is empty.
    pub(super) fn put(&mut self, id: u64, op: Box<Pending>) {
        let before = self.ops.insert(id, op);
        debug_assert!(before.is_none(), "region {id} already ran an operator");
    }

    /// Region `id`'s operator, taken out (the region is dropped, or its operator cancelled).
    pub(super) fn take(&mut self, id: u64) -> Option<Box<Pending>> {
        if self.ops.is_empty() {
            return None;
        }
        self.ops.remove(&id)
    }

    /// Every operator, taken out.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = (u64, Box<Pending>)> + '_ {
        self.ops.drain()
    }

    /// The operators in flight, in no order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &Pending)> {
        self.ops.iter().map(|(id, p)| (*id, &**p))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}
