//! Min resolved timestamps, as PD keeps them: each store reports the smallest resolved ts of the
//! regions it holds (the last report wins, up or down), and the cluster's is the minimum over
//! the stores able to report one, recomputed periodically, and only ever raised (stale reads at
//! the cluster's value must stay safe). A store is able when it is no tombstone, no TiFlash,
//! and leads a region (a store without leaders resolves nothing); one that never reported
//! counts as 0, holding the cluster back until it does. Pure; which stores lead is found by
//! the caller.

use std::collections::BTreeMap;

use super::Store;
use super::StoreState;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedTs {
    /// The last report of each store, since this leader's term began.
    per_store: BTreeMap<u64, u64>,
    /// The cluster's value: never lowered.
    cluster: u64,
    /// The largest cluster value known to be durable.
    durable: u64,
}

impl ResolvedTs {
    /// A term's start: the cluster value as persisted, no store reports yet.
    pub fn new(persisted: u64) -> ResolvedTs {
        ResolvedTs {
            per_store: BTreeMap::new(),
            cluster: persisted,
            durable: persisted,
        }
    }

    /// A store's report; the last one wins, lower or not (PD checks no order per store).
    pub fn report(&mut self, store_id: u64, ts: u64) {
        self.per_store.insert(store_id, ts);
    }

    /// What store `id` last reported, 0 if nothing.
    pub fn of_store(&self, id: u64) -> u64 {
        self.per_store.get(&id).copied().unwrap_or(0)
    }

    /// Stores that reported, in id order.
    pub fn reporters(&self) -> impl Iterator<Item = u64> + '_ {
        self.per_store.keys().copied()
    }

    pub fn cluster(&self) -> u64 {
        self.cluster
    }

    /// Recomputes the cluster value over the `able` stores: their minimum, if that is above the
    /// current value; returns the new value when it rose. No able store changes nothing.
    pub fn advance(&mut self, able: impl IntoIterator<Item = u64>) -> Option<u64> {
        let low = able.into_iter().map(|id| self.of_store(id)).min()?;
        if low <= self.cluster {
            return None;
        }
        self.cluster = low;
        Some(low)
    }

    /// The cluster value when it is above what is durable.
    pub fn to_persist(&self) -> Option<u64> {
        (self.cluster > self.durable).then_some(self.cluster)
    }

    /// Records that `value` is durable.
    pub fn persisted(&mut self, value: u64) {
        self.durable = self.durable.max(value);
    }
}

/// Whether a store may count toward the cluster's resolved ts, leaders aside: PD's
/// `IsAvailableForMinResolvedTS` leaves out tombstones and TiFlash stores (which hold learners
/// only and report no resolved ts of their own).
pub fn may_resolve(store: &Store) -> bool {
    store.state != StoreState::Tombstone
        && !store
            .labels
            .iter()
            .any(|l| l.key == "engine" && l.value == "tiflash")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_cluster_value_is_the_minimum_and_only_rises() {
        let mut r = ResolvedTs::new(100);
        r.report(1, 150);
        assert_eq!(
            r.advance([1, 2]),
            None,
            "store 2 never reported: 0 holds it back"
        );
        r.report(2, 120);
        assert_eq!(r.advance([1, 2]), Some(120));
        assert_eq!(r.to_persist(), Some(120));
        r.persisted(120);
        assert_eq!(r.to_persist(), None);
        r.report(2, 90);
        assert_eq!(r.of_store(2), 90, "the last report wins");
        assert_eq!(r.advance([1, 2]), None, "the cluster value never goes down");
        assert_eq!(r.cluster(), 120);
        assert_eq!(r.advance([]), None, "no able store changes nothing");
    }

    proptest! {
        /// Whatever the reports and whichever stores are able, the cluster value never goes
        /// down, and after each advance it is the larger of before and the able stores' minimum.
        #[test]
        fn never_lowered(steps in prop::collection::vec(
            (0u64..4, 0u64..1000, prop::collection::vec(0u64..4, 0..4)), 1..40)
        ) {
            let mut r = ResolvedTs::new(0);
            for (store, ts, able) in steps {
                r.report(store, ts);
                let before = r.cluster();
                let low = able.iter().map(|id| r.of_store(*id)).min();
                r.advance(able.iter().copied());
                prop_assert!(r.cluster() >= before);
                if let Some(low) = low {
                    prop_assert_eq!(r.cluster(), before.max(low));
                }
            }
        }
    }
}
