//! Per store, what a shard's regions put on it, as PD's region tree counts it for a store's
//! status: the regions with a peer there (leader, follower or learner) and the sum of their
//! approximate sizes in MiB, and of those the regions it leads and their sizes. Kept as running
//! sums, moved by each change to a region's route or size, so that reading them costs one
//! entry per store and a heartbeat that changes nothing costs nothing.
//!
//! Owns: the sums and how one region adds to them. Must not touch: which regions a shard
//! holds, or when (the shard calls `add` and `remove` around each change).

use std::collections::HashMap;

use crate::placement::Route;

/// What the regions of one shard (or, summed, of all) put on one store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreTotal {
    /// Regions with a peer on the store (PD's `region_count`).
    pub regions: u64,
    /// Of them, those whose leader is on the store (PD's `leader_count`).
    pub leaders: u64,
    /// The approximate sizes of `regions`, in MiB (PD's `region_size`).
    pub region_size_mib: u64,
    /// The approximate sizes of `leaders`, in MiB (PD's `leader_size`).
    pub leader_size_mib: u64,
}

impl StoreTotal {
    fn is_empty(&self) -> bool {
        *self == StoreTotal::default()
    }

    /// `other` added in, as the totals of several shards are summed.
    pub fn merge(&mut self, other: &StoreTotal) {
        self.regions += other.regions;
        self.leaders += other.leaders;
        self.region_size_mib += other.region_size_mib;
        self.leader_size_mib += other.leader_size_mib;
    }
}

/// The totals per store of one shard's regions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreTotals {
    by_store: HashMap<u64, StoreTotal>,
}

impl StoreTotals {
    /// Counts a region on `route` whose size is `mib`.
    pub fn add(&mut self, route: &Route, mib: u64) {
        self.apply(route, mib, true);
    }

    /// Uncounts what [`add`](Self::add) counted for the same route and size.
    pub fn remove(&mut self, route: &Route, mib: u64) {
        self.apply(route, mib, false);
    }

    /// A region on `route`, counted at `from` MiB, now `to`.
    pub fn resize(&mut self, route: &Route, from: u64, to: u64) {
        if from != to {
            self.remove(route, from);
            self.add(route, to);
        }
    }

    fn apply(&mut self, route: &Route, mib: u64, add: bool) {
        let leader = route.leader();
        for peer in route.peers() {
            let leads = leader == Some(peer.id);
            let t = self.by_store.entry(peer.store_id).or_default();
            let step = |v: &mut u64, by: u64| {
                *v = if add {
                    v.saturating_add(by)
                } else {
                    v.saturating_sub(by)
                }
            };
            step(&mut t.regions, 1);
            step(&mut t.region_size_mib, mib);
            if leads {
                step(&mut t.leaders, 1);
                step(&mut t.leader_size_mib, mib);
            }
            if !add && t.is_empty() {
                self.by_store.remove(&peer.store_id);
            }
        }
    }

    /// Every store some region counts on, with its total.
    pub fn iter(&self) -> impl Iterator<Item = (u64, StoreTotal)> + '_ {
        self.by_store.iter().map(|(id, t)| (*id, *t))
    }

    pub fn get(&self, store: u64) -> StoreTotal {
        self.by_store.get(&store).copied().unwrap_or_default()
    }

    pub fn clear(&mut self) {
        self.by_store.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Epoch, Peer, PeerRole, Region};

    fn route(
        id: u64,
        peers: &[(u64, u64, PeerRole)],
        leader: Option<u64>,
    ) -> std::sync::Arc<Route> {
        Route::new(Region {
            id,
            start_key: Vec::new(),
            end_key: Vec::new(),
            epoch: Epoch::default(),
            peers: peers
                .iter()
                .map(|&(id, store_id, role)| Peer { id, store_id, role })
                .collect(),
            leader,
        })
    }

    #[test]
    fn every_peer_counts_on_its_store_and_the_leader_on_its_own() {
        let r = route(
            1,
            &[
                (11, 1, PeerRole::Voter),
                (12, 2, PeerRole::Voter),
                (13, 3, PeerRole::Learner),
            ],
            Some(12),
        );
        let mut t = StoreTotals::default();
        t.add(&r, 96);
        let follower = StoreTotal {
            regions: 1,
            leaders: 0,
            region_size_mib: 96,
            leader_size_mib: 0,
        };
        assert_eq!(t.get(1), follower);
        assert_eq!(t.get(3), follower, "a learner counts as PD's learners do");
        assert_eq!(
            t.get(2),
            StoreTotal {
                regions: 1,
                leaders: 1,
                region_size_mib: 96,
                leader_size_mib: 96,
            }
        );
        t.resize(&r, 96, 100);
        assert_eq!(t.get(2).leader_size_mib, 100);
        assert_eq!(t.get(1).region_size_mib, 100);
        t.remove(&r, 100);
        assert_eq!(t, StoreTotals::default(), "nothing left behind");
    }

    #[test]
    fn a_region_with_no_leader_counts_on_its_stores_but_leads_none() {
        let r = route(1, &[(11, 1, PeerRole::Voter)], None);
        let mut t = StoreTotals::default();
        t.add(&r, 0);
        assert_eq!(
            t.get(1),
            StoreTotal {
                regions: 1,
                ..StoreTotal::default()
            }
        );
    }
}
