//! Id allocation (P3): ids are handed out from blocks whose end is persisted before any id in
//! the block is used, so after a crash or a leader change the next leader starts at the
//! persisted end and never hands out an id twice. Pure: the shell persists `plan_block()` and
//! then calls `install`, and checks a persisted end it reads back with `check_persisted_end`.

/// The largest persisted id end trusted when read back: `i64::MAX`. Ids are `u64` on the wire,
/// but tools around a cluster (Go code with `int64`, SQL without unsigned types) hold them as
/// signed 64-bit numbers, and no cluster gets near 2^63 ids; an end above it is corruption. It
/// also leaves 2^63 of room, so `end + block` can never overflow.
pub const MAX_ID_END: u64 = i64::MAX as u64;

/// Why a persisted id end is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("above the largest id end accepted ({MAX_ID_END}): ids this high are corruption")]
pub struct IdEndError;

/// `end` if an allocator may start from it: its next blocks cannot overflow.
pub fn check_persisted_end(end: u64) -> Result<u64, IdEndError> {
    if end > MAX_ID_END {
        return Err(IdEndError);
    }
    Ok(end)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdAllocator {
    next: u64,
    /// Exclusive end of the persisted block.
    end: u64,
    block: u64,
}

impl IdAllocator {
    /// Starts above everything a previous leader may have used: `persisted_end` is the end of
    /// the last block it persisted (`None` on a new cluster; id 0 is never handed out).
    pub fn new(persisted_end: Option<u64>, block: u64) -> Self {
        let start = persisted_end.unwrap_or(1).max(1);
        IdAllocator {
            next: start,
            end: start,
            block: block.max(1),
        }
    }

    /// The next id, or `None` when a new block must be persisted first.
    pub fn alloc(&mut self) -> Option<u64> {
        (self.next < self.end).then(|| {
            self.next += 1;
            self.next - 1
        })
    }

    /// Ids left in the persisted block.
    pub fn remaining(&self) -> u64 {
        self.end.saturating_sub(self.next)
    }

    /// The end to persist for the next block.
    pub fn plan_block(&self) -> u64 {
        self.end.max(self.next) + self.block
    }

    /// The planned end is on disk: its ids may be handed out.
    pub fn install(&mut self, persisted_end: u64) {
        self.end = self.end.max(persisted_end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Alloc,
        Persist,
        Restart,
    }

    proptest! {
        /// No id is handed out twice, none is 0, and each is below the persisted end when it
        /// is handed out, across restarts from what was persisted.
        #[test]
        fn ids_are_unique_and_persisted_before_use(
            block in 1u64..50,
            ops in proptest::collection::vec(prop_oneof![6 => Just(Op::Alloc), 2 => Just(Op::Persist), 1 => Just(Op::Restart)], 1..300),
        ) {
            let mut persisted: Option<u64> = None;
            let mut a = IdAllocator::new(persisted, block);
            let mut seen = std::collections::HashSet::new();
            for op in ops {
                match op {
                    Op::Alloc => {
                        if let Some(id) = a.alloc() {
                            prop_assert!(id > 0);
                            prop_assert!(id < persisted.unwrap_or(0), "{id} handed out before its block was persisted");
                            prop_assert!(seen.insert(id), "{id} handed out twice");
                        }
                    }
                    Op::Persist => {
                        let end = a.plan_block();
                        persisted = Some(end);
                        a.install(end);
                    }
                    Op::Restart => a = IdAllocator::new(persisted, block),
                }
            }
        }
    }

    proptest! {
        /// An accepted end leaves room for any sane block after it; a refused one is above the
        /// bound. Nothing panics on any stored value.
        #[test]
        fn an_accepted_end_never_overflows_the_next_block(
            end in prop_oneof![any::<u64>(), (MAX_ID_END - 10)..=(MAX_ID_END + 10), 0u64..1_000_000],
            block in 1u64..=(1 << 32),
        ) {
            match check_persisted_end(end) {
                Ok(e) => {
                    prop_assert_eq!(e, end);
                    let a = IdAllocator::new(Some(e), block);
                    prop_assert!(a.end.checked_add(block).is_some());
                    prop_assert!(a.plan_block() > e);
                }
                Err(IdEndError) => prop_assert!(end > MAX_ID_END),
            }
        }
    }

    #[test]
    fn ends_at_the_top_of_the_id_space_are_refused() {
        assert_eq!(check_persisted_end(0), Ok(0));
        assert_eq!(check_persisted_end(MAX_ID_END), Ok(MAX_ID_END));
        assert_eq!(check_persisted_end(MAX_ID_END + 1), Err(IdEndError));
        assert_eq!(check_persisted_end(u64::MAX), Err(IdEndError));
    }

    #[test]
    fn needs_a_block_first_then_counts_through_it() {
        let mut a = IdAllocator::new(None, 3);
        assert_eq!(a.alloc(), None);
        let end = a.plan_block();
        assert_eq!(end, 4);
        a.install(end);
        assert_eq!(
            (a.alloc(), a.alloc(), a.alloc(), a.alloc()),
            (Some(1), Some(2), Some(3), None)
        );
    }
}
