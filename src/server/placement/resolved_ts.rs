//! Min resolved ts: ReportMinResolvedTS keeps each store's report in memory (as PD keeps it on
//! the store), the term's persister raises the cluster's value once a second and persists it
//! (`advance_min_resolved_ts`), and the values are read here as PD's HTTP API reads them
//! (`min_resolved_ts`, `stores_min_resolved_ts`). The rules are `placement::ResolvedTs`'s; this
//! file finds which stores lead a region, which PD learns from its store statistics.

use std::collections::BTreeSet;

use super::answer::store_refused;
use super::state::PlacementState;
use crate::placement::{may_resolve, PeerRole, ResolvedTs, StoreError};
use crate::proto::{Reply, Response};

#[derive(Debug)]
pub enum ResolvedTsOp {
    Report { store_id: u64, ts: u64 },
}

pub fn serve(state: &PlacementState, op: ResolvedTsOp) -> Response {
    match op {
        ResolvedTsOp::Report { store_id, ts } => {
            // Any store PD knows, tombstones too; an unknown one is refused and changes nothing.
            if state.stores().get(store_id).is_none() {
                return store_refused(StoreError::Unknown(store_id));
            }
            state.resolved_ts().report(store_id, ts);
            Response::Ok(Reply::Done)
        }
    }
}

impl PlacementState {
    fn resolved_ts(&self) -> std::sync::MutexGuard<'_, ResolvedTs> {
        // Each edit is one call on the pure value, which leaves it valid.
        self.resolved_ts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A term's start (the persisted cluster value) or end (0, no reports).
    pub(super) fn reset_resolved_ts(&self, persisted: u64) {
        *self.resolved_ts() = ResolvedTs::new(persisted);
    }

    /// PD's `isInitialized`: more than one region, or the only one has as many voters as it
    /// should. Before that, PD reports no resolved ts (u64::MAX) and refuses external
    /// timestamps. (PD also waits for the region's pending peers; Meridian does not track them.)
    pub fn is_initialized(&self) -> bool {
        let snapshot = self.index.snapshot();
        match snapshot.len() {
            0 => false,
            1 => snapshot.iter().next().is_some_and(|r| {
                r.peers().filter(|p| p.role == PeerRole::Voter).count() >= self.cfg.max_replicas
            }),
            _ => true,
        }
    }

    /// The cluster's min resolved ts, as PD's `GetMinResolvedTS` answers: u64::MAX until the
    /// cluster is initialized, then the value the last recomputation raised it to.
    pub fn min_resolved_ts(&self) -> u64 {
        if !self.is_initialized() {
            return u64::MAX;
        }
        self.resolved_ts().cluster()
    }

    /// PD's `GetMinResolvedTSByStoreIDs`: each store's last report, u64::MAX for one that is
    /// unknown or cannot resolve (no leader, a tombstone, TiFlash) or while the cluster is not
    /// initialized; and the smallest of them (u64::MAX for none).
    pub fn stores_min_resolved_ts(&self, ids: &[u64]) -> (u64, Vec<(u64, u64)>) {
        let initialized = self.is_initialized();
        let candidates: BTreeSet<u64> = {
            let map = self.stores();
            ids.iter()
                .copied()
                .filter(|id| map.get(*id).is_some_and(|s| may_resolve(&s.store)))
                .collect()
        };
        let able = if initialized {
            self.stores_leading(&candidates)
        } else {
            BTreeSet::new()
        };
        let resolved = self.resolved_ts();
        let each: Vec<(u64, u64)> = ids
            .iter()
            .map(|id| {
                let ts = if able.contains(id) {
                    resolved.of_store(*id)
                } else {
                    u64::MAX
                };
                (*id, ts)
            })
            .collect();
        let low = each.iter().map(|(_, ts)| *ts).min().unwrap_or(u64::MAX);
        (low, each)
    }

    /// Raises the cluster's value to the lowest report of the stores able to resolve, if that
    /// is higher (PD's `CheckAndUpdateMinResolvedTS`, run by the persister once a second);
    /// returns the value to persist, if one is not yet durable.
    pub(super) fn advance_min_resolved_ts(&self) -> Option<u64> {
        if self.resolved_ts().reporters().next().is_none() || !self.is_initialized() {
            return self.resolved_ts().to_persist();
        }
        let candidates: BTreeSet<u64> = self
            .stores()
            .iter()
            .filter(|s| may_resolve(&s.store))
            .map(|s| s.store.id)
            .collect();
        let able = self.stores_leading(&candidates);
        let mut resolved = self.resolved_ts();
        resolved.advance(able);
        resolved.to_persist()
    }

    /// Records that the cluster's value `ts` is durable.
    pub(super) fn min_resolved_ts_persisted(&self, ts: u64) {
        self.resolved_ts().persisted(ts);
    }

    /// Which of `wanted` lead at least one region. The scan of the map stops once every wanted
    /// store has been seen leading, which in a balanced cluster is within the first few
    /// regions; only a store that leads nothing makes it read the whole map.
    fn stores_leading(&self, wanted: &BTreeSet<u64>) -> BTreeSet<u64> {
        let mut found = BTreeSet::new();
        if wanted.is_empty() {
            return found;
        }
        for route in self.index.snapshot().iter() {
            if let Some(store) = route.leader_store().filter(|s| wanted.contains(s)) {
                found.insert(store);
                if found.len() == wanted.len() {
                    break;
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::admin::Metrics;
    use crate::clock::WallClock;
    use crate::meta::Keys;
    use crate::placement::{Epoch, Label, Limits, Peer, Region, ScheduleConfig, Store, StoreState};

    fn state(max_replicas: usize) -> Arc<PlacementState> {
        let cfg = ScheduleConfig {
            max_replicas,
            ..ScheduleConfig::default()
        };
        let (state, _shards) = PlacementState::new(
            7,
            1,
            cfg,
            Limits::default(),
            Arc::new(WallClock::default()),
            Keys::new(1),
            Arc::new(Metrics::new(1)),
        );
        state
    }

    fn store(id: u64, labels: Vec<Label>) -> Store {
        Store {
            id,
            address: format!("s{id}:1"),
            labels,
            state: StoreState::Up,
            details: Default::default(),
        }
    }

    /// Region `id` over `[start, end)` with one voter per store in `stores`, led by the first.
    fn region(id: u64, start: &[u8], end: &[u8], stores: &[u64]) -> Region {
        Region {
            id,
            start_key: start.to_vec(),
            end_key: end.to_vec(),
            epoch: Epoch {
                conf_ver: 1,
                version: 1,
            },
            peers: stores
                .iter()
                .map(|s| Peer {
                    id: id * 100 + s,
                    store_id: *s,
                    role: PeerRole::Voter,
                })
                .collect(),
            leader: stores.first().map(|s| id * 100 + s),
        }
    }

    /// PD's rules end to end on the state: nothing before the cluster is initialized; then the
    /// lowest report of the stores that lead, TiFlash and stores without leaders left out; and
    /// never lower.
    #[test]
    fn the_cluster_value_follows_the_stores_that_lead() {
        let state = state(3);
        {
            let mut map = state.stores();
            map.put(store(1, vec![]), 0).unwrap();
            map.put(store(2, vec![]), 0).unwrap();
            map.put(store(3, vec![]), 0).unwrap();
            let tiflash = Label {
                key: "engine".into(),
                value: "tiflash".into(),
            };
            map.put(store(4, vec![tiflash]), 0).unwrap();
        }
        state.index.apply(region(10, b"", b"", &[1])).unwrap();
        for (id, ts) in [(1, 500), (2, 10), (3, 7), (4, 1)] {
            state.serve_report(id, ts);
        }
        assert!(
            !state.is_initialized(),
            "one region with one of three voters"
        );
        assert_eq!(state.advance_min_resolved_ts(), None);
        assert_eq!(state.min_resolved_ts(), u64::MAX);
        assert_eq!(state.stores_min_resolved_ts(&[1]).0, u64::MAX);

        // A split: two regions, led by stores 1 and 2. Store 3 leads nothing, store 4 is
        // TiFlash: neither counts.
        state.index.apply(region(10, b"m", b"", &[1])).unwrap();
        state.index.apply(region(11, b"", b"m", &[2, 1])).unwrap();
        assert!(state.is_initialized());
        assert_eq!(state.advance_min_resolved_ts(), Some(10));
        state.min_resolved_ts_persisted(10);
        assert_eq!(state.min_resolved_ts(), 10);
        let (low, each) = state.stores_min_resolved_ts(&[1, 3, 4, 99]);
        assert_eq!(low, 500);
        assert_eq!(
            each,
            vec![(1, 500), (3, u64::MAX), (4, u64::MAX), (99, u64::MAX)]
        );

        // A lower report never lowers the cluster's value; a higher one raises it.
        state.serve_report(2, 5);
        assert_eq!(state.advance_min_resolved_ts(), None);
        assert_eq!(state.min_resolved_ts(), 10);
        state.serve_report(2, 600);
        assert_eq!(state.advance_min_resolved_ts(), Some(500));

        assert!(matches!(
            serve(
                &state,
                ResolvedTsOp::Report {
                    store_id: 99,
                    ts: 1
                }
            ),
            Response::Err(_)
        ));
    }

    impl PlacementState {
        fn serve_report(&self, store_id: u64, ts: u64) {
            assert_eq!(
                serve(self, ResolvedTsOp::Report { store_id, ts }),
                Response::Ok(Reply::Done)
            );
        }
    }
}
