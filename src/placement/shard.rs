//! A shard: the regions one core owns (`region_id % cores`) with what only heartbeats change:
//! sizes, and the one pending operator. A heartbeat that repeats the current route touches
//! nothing shared; one that changes the route goes through the shared index (P1, P2). The
//! scheduling decisions are `schedule`'s, called on each heartbeat and by the patrol, which
//! passes over a bounded number of regions per call. Pure: the caller passes the clock, the
//! stores and the id source.

use std::sync::Arc;

use super::dense_map::DenseIdMap;
use super::operator::{Operator, Pending};
use super::range_index::{RangeIndex, Route};
use super::region::{Region, RegionError, RegionStats};
use super::schedule::{self, Cluster, RegionInput};

#[derive(Debug)]
struct Entry {
    route: Arc<Route>,
    sizes: Sizes,
    pending: Option<Box<Pending>>,
}

/// A region's reported sizes in half the bytes of [`RegionStats`]: one of these per region
/// at 1M regions counts against the goal of ~300 B per region. Sizes in KiB and
/// counts saturating at `u32::MAX` (4 TiB, 4 billion keys) keep what balancing by size needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Sizes {
    size_kib: u32,
    keys: u32,
    written_kib: u32,
    written_keys: u32,
}

impl From<RegionStats> for Sizes {
    fn from(s: RegionStats) -> Sizes {
        let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Sizes {
            size_kib: narrow(s.approximate_size.div_ceil(1024)),
            keys: narrow(s.approximate_keys),
            written_kib: narrow(s.written_bytes.div_ceil(1024)),
            written_keys: narrow(s.written_keys),
        }
    }
}

/// What a heartbeat did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The operator the leader should run (a pending one is sent again until done).
    pub operator: Option<Operator>,
    /// The route to persist, when its range or epoch changed.
    pub persist: Option<Arc<Route>>,
    /// Regions the change displaced; their owners forget them and persistence deletes them.
    pub removed: Vec<u64>,
}

#[derive(Debug, Default)]
pub struct Shard {
    regions: DenseIdMap<Entry>,
    /// Where the patrol goes on.
    cursor: usize,
}

impl Shard {
    pub fn new() -> Self {
        Shard::default()
    }

    pub fn len(&self) -> usize {
        self.regions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// The current route of a region this shard owns.
    pub fn get(&self, id: u64) -> Option<&Arc<Route>> {
        self.regions
            .get(&id)
            .map(|e| &e.route)
            .filter(|r| r.is_current())
    }

    /// A leader's heartbeat. On error nothing changed, here or in the index.
    pub fn heartbeat(
        &mut self,
        region: Region,
        stats: RegionStats,
        c: &Cluster,
        index: &RangeIndex,
        new_peer_id: &mut dyn FnMut() -> Option<u64>,
    ) -> Result<Outcome, RegionError> {
        let stores = c.stores;
        let bad = |why: String| Err(RegionError::Invalid(region.id, why));
        if region.leader.is_none() {
            return bad("only a region's leader reports it, and this report names none".into());
        }
        if let Some(p) = region
            .peers
            .iter()
            .find(|p| stores.get(p.store_id).is_none())
        {
            return bad(format!("peer {} is on unknown store {}", p.id, p.store_id));
        }
        let id = region.id;
        let mut outcome = Outcome::default();
        let unchanged = self
            .regions
            .get(&region.id)
            .is_some_and(|e| e.route.is_current() && e.route.is(&region));
        // A region this shard has not seen yet (a split reported it, or a new term loaded
        // it) whose report matches the index is adopted without writing the index.
        let adopted = !unchanged
            && !self.regions.contains_key(&region.id)
            && index
                .snapshot()
                .locate(&region.start_key)
                .filter(|r| r.is(&region))
                .map(|route| {
                    self.regions.insert(
                        id,
                        Entry {
                            route: route.clone(),
                            sizes: stats.into(),
                            pending: None,
                        },
                    )
                })
                .is_some();
        if !unchanged && !adopted {
            let change = index.apply(region.clone())?;
            if change.epoch_changed {
                outcome.persist = Some(change.route.clone());
            }
            outcome.removed = change.removed;
            match self.regions.get_mut(&id) {
                Some(e) => e.route = change.route,
                None => {
                    self.regions.insert(
                        id,
                        Entry {
                            route: change.route,
                            sizes: stats.into(),
                            pending: None,
                        },
                    );
                }
            }
            for removed in &outcome.removed {
                self.forget(*removed, c);
            }
        }
        let Some(entry) = self.regions.get_mut(&id) else {
            return Ok(outcome);
        };
        entry.sizes = stats.into();
        // The report is the route now (unchanged, adopted or just applied), unpacked.
        let input = RegionInput {
            region: &region,
            // TiKV's pending peers are not carried in the report yet: a learner counts as
            // caught up once it is reported.
            pending_peers: &[],
            size_mib: u64::from(entry.sizes.size_kib) / 1024,
        };
        outcome.operator =
            schedule::on_heartbeat(c, &input, !unchanged, &mut entry.pending, new_peer_id).step;
        Ok(outcome)
    }

    /// The patrol: checks up to `budget` regions from where the last pass stopped, and returns
    /// the steps to push to their leaders (the region as reported, the step): the first step of
    /// each operator it started, and pending operators' steps again.
    pub fn patrol(
        &mut self,
        c: &Cluster,
        budget: usize,
        new_peer_id: &mut dyn FnMut() -> Option<u64>,
    ) -> Vec<(Region, Operator)> {
        let mut started = Vec::new();
        let n = self.regions.len();
        for _ in 0..budget.min(n) {
            if self.cursor >= n {
                self.cursor = 0;
            }
            let Some((_, entry)) = self.regions.at_mut(self.cursor) else {
                break;
            };
            self.cursor += 1;
            if !entry.route.is_current() {
                continue;
            }
            let region = entry.route.region();
            let input = RegionInput {
                region: &region,
                pending_peers: &[],
                size_mib: u64::from(entry.sizes.size_kib) / 1024,
            };
            if let Some(op) = schedule::patrol(c, &input, &mut entry.pending, new_peer_id).step {
                started.push((region, op));
            }
        }
        started
    }

    /// Drops a region another change displaced (or that left the index).
    pub fn forget(&mut self, id: u64, c: &Cluster) {
        if let Some(e) = self.regions.get(&id) {
            if e.route.is_current() {
                return;
            }
        }
        if let Some(mut e) = self.regions.remove(&id) {
            schedule::cancel(c, &mut e.pending);
        }
    }

    /// Replaces everything with `routes` (a new leader's load, or nothing on stepping down).
    /// Operators of the last term are dropped and their charges released.
    pub fn reset(&mut self, routes: impl IntoIterator<Item = Arc<Route>>, c: &Cluster) {
        for (_, e) in self.regions.iter_mut() {
            schedule::cancel(c, &mut e.pending);
        }
        self.regions = routes
            .into_iter()
            .map(|route| {
                (
                    route.id(),
                    Entry {
                        route,
                        sizes: Sizes::default(),
                        pending: None,
                    },
                )
            })
            .collect();
        self.cursor = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_up_to_kib_and_saturate() {
        let s = Sizes::from(RegionStats {
            approximate_size: 96 * 1024 * 1024 + 1,
            approximate_keys: 1 << 40,
            written_bytes: 1,
            written_keys: 7,
        });
        assert_eq!(
            s,
            Sizes {
                size_kib: 96 * 1024 + 1,
                keys: u32::MAX,
                written_kib: 1,
                written_keys: 7,
            }
        );
        assert_eq!(Sizes::from(RegionStats::default()), Sizes::default());
        assert_eq!(
            Sizes::from(RegionStats {
                approximate_size: u64::MAX,
                ..RegionStats::default()
            })
            .size_kib,
            u32::MAX
        );
    }
    use crate::placement::{
        Epoch, InFlight, Peer, PeerRole, ScheduleConfig, Store, StoreMap, StoreState, StoreStats,
        StoreView,
    };

    /// What the shard's callers lend it: configuration, stores, operators in flight.
    struct World {
        cfg: ScheduleConfig,
        view: StoreView,
        in_flight: InFlight,
    }

    impl World {
        fn at(&self, now_ms: u64) -> Cluster<'_> {
            Cluster {
                cfg: &self.cfg,
                stores: &self.view,
                in_flight: &self.in_flight,
                now_ms,
            }
        }
    }

    fn view(loads: &[(u64, u64)]) -> World {
        world(loads, ScheduleConfig::default())
    }

    fn world(loads: &[(u64, u64)], cfg: ScheduleConfig) -> World {
        let mut map = StoreMap::new();
        for &(id, leaders) in loads {
            let store = Store {
                id,
                address: format!("s{id}:1"),
                labels: vec![],
                state: StoreState::Up,
                details: Default::default(),
            };
            map.put(store, 0).unwrap();
            let stats = StoreStats {
                leader_count: leaders,
                ..Default::default()
            };
            map.heartbeat(id, stats, 0).unwrap();
        }
        World {
            view: StoreView::of(&map, &cfg, &StoreView::default(), 0),
            cfg,
            in_flight: InFlight::default(),
        }
    }

    fn region(id: u64, start: &[u8], end: &[u8], version: u64, stores: &[u64]) -> Region {
        let peers: Vec<Peer> = stores
            .iter()
            .map(|&s| Peer {
                id: id * 10 + s,
                store_id: s,
                role: PeerRole::Voter,
            })
            .collect();
        Region {
            id,
            start_key: start.to_vec(),
            end_key: end.to_vec(),
            epoch: Epoch {
                conf_ver: 1,
                version,
            },
            leader: Some(peers[0].id),
            peers,
        }
    }

    #[test]
    fn repeats_touch_nothing_shared_and_changes_are_persisted() {
        let index = RangeIndex::new();
        let stores = view(&[(1, 0), (2, 0), (3, 0)]);
        let mut shard = Shard::new();
        let r = region(1, b"", b"", 1, &[1, 2, 3]);
        let stats = RegionStats::default();
        let first = shard
            .heartbeat(r.clone(), stats, &stores.at(0), &index, &mut || None)
            .unwrap();
        assert!(first.persist.is_some());
        let route = index.locate(b"k").unwrap();
        let again = shard
            .heartbeat(r.clone(), stats, &stores.at(1), &index, &mut || None)
            .unwrap();
        assert!(again.persist.is_none() && again.operator.is_none());
        assert!(
            Arc::ptr_eq(&route, &index.locate(b"k").unwrap()),
            "a repeat republished the route"
        );
        // Split: the right half keeps id 1; region 2 (another shard's) took the left.
        let left = region(2, b"", b"m", 2, &[1, 2, 3]);
        let change = index.apply(left).unwrap();
        assert_eq!(change.removed, vec![1]);
        assert!(shard.get(1).is_none(), "displaced region still served");
        // The old report of region 1 is now stale against region 2.
        let stale = shard.heartbeat(r, stats, &stores.at(2), &index, &mut || None);
        assert!(
            matches!(stale, Err(RegionError::StaleEpoch { .. })),
            "{stale:?}"
        );
        let right = region(1, b"m", b"", 2, &[1, 2, 3]);
        let out = shard
            .heartbeat(right, stats, &stores.at(3), &index, &mut || None)
            .unwrap();
        assert!(out.persist.is_some());
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn forgetting_regions_in_the_middle_keeps_the_rest_reachable() {
        // Entries are dense and a removal moves the last one into the hole: the moved
        // region must still be found under its id, with its own route.
        let index = RangeIndex::new();
        let stores = view(&[(1, 0), (2, 0), (3, 0)]);
        let mut shard = Shard::new();
        let stats = RegionStats::default();
        let bounds: [&[u8]; 5] = [b"", b"b", b"c", b"d", b""];
        let first: Vec<Region> = (1..=4u64)
            .map(|id| {
                region(
                    id,
                    bounds[id as usize - 1],
                    bounds[id as usize],
                    1,
                    &[1, 2, 3],
                )
            })
            .collect();
        for r in &first {
            shard
                .heartbeat(r.clone(), stats, &stores.at(0), &index, &mut || None)
                .unwrap();
        }
        let merged = region(5, b"b", b"d", 2, &[1, 2, 3]);
        let out = shard
            .heartbeat(merged.clone(), stats, &stores.at(1), &index, &mut || None)
            .unwrap();
        let mut removed = out.removed.clone();
        removed.sort_unstable();
        assert_eq!(removed, vec![2, 3]);
        assert_eq!(shard.len(), 3);
        assert!(shard.get(2).is_none() && shard.get(3).is_none());
        for want in [&first[0], &first[3], &merged] {
            let got = shard.get(want.id).map(|r| r.region());
            assert_eq!(
                got.as_ref(),
                Some(want),
                "region {} after the merge",
                want.id
            );
        }
    }

    #[test]
    fn bad_reports_change_nothing() {
        let index = RangeIndex::new();
        let stores = view(&[(1, 0), (2, 0), (3, 0)]);
        let mut shard = Shard::new();
        let stats = RegionStats::default();
        let good = region(1, b"", b"", 1, &[1, 2, 3]);
        shard
            .heartbeat(good.clone(), stats, &stores.at(0), &index, &mut || None)
            .unwrap();
        let before: Vec<Region> = index.snapshot().iter().map(|r| r.region()).collect();
        let mut unknown_store = region(1, b"", b"", 2, &[1, 2, 9]);
        unknown_store.leader = Some(11);
        let mut no_leader = good.clone();
        no_leader.leader = None;
        no_leader.epoch.version = 5;
        for bad in [
            unknown_store,
            no_leader,
            region(1, b"z", b"a", 3, &[1, 2, 3]),
            region(1, b"", b"", 0, &[1, 2, 3]),
        ] {
            assert!(
                shard
                    .heartbeat(bad.clone(), stats, &stores.at(1), &index, &mut || None)
                    .is_err(),
                "{bad:?}"
            );
            let after: Vec<Region> = index.snapshot().iter().map(|r| r.region()).collect();
            assert_eq!(after, before);
            assert_eq!(shard.get(1).map(|r| r.region()), Some(good.clone()));
        }
    }

    #[test]
    fn one_pending_operator_resent_until_done_or_timed_out() {
        let index = RangeIndex::new();
        let cfg = ScheduleConfig {
            operator_timeout_ms: 100,
            ..ScheduleConfig::default()
        };
        let stores = world(&[(1, 0), (2, 0), (3, 0), (4, 0)], cfg);
        let mut shard = Shard::new();
        let stats = RegionStats::default();
        let mut ids = 500..;
        let short = region(1, b"", b"", 1, &[1, 2]);
        let op = shard
            .heartbeat(short.clone(), stats, &stores.at(0), &index, &mut || {
                ids.next()
            })
            .unwrap()
            .operator;
        let Some(Operator::AddPeer(peer)) = op.clone() else {
            panic!("{op:?}")
        };
        assert_eq!(peer.id, 500);
        // Resent while pending, with no new id taken.
        let again = shard
            .heartbeat(short.clone(), stats, &stores.at(50), &index, &mut || {
                ids.next()
            })
            .unwrap();
        assert_eq!(again.operator, op);
        // Timed out: decided afresh (a new peer id).
        let fresh = shard
            .heartbeat(short.clone(), stats, &stores.at(150), &index, &mut || {
                ids.next()
            })
            .unwrap();
        assert!(matches!(fresh.operator, Some(Operator::AddPeer(ref p)) if p.id == 501));
        // Done: the leader reports the new peer; nothing more to do.
        let mut done = short.clone();
        done.epoch.conf_ver += 1;
        done.peers.push(Peer {
            id: 501,
            store_id: peer.store_id,
            role: PeerRole::Voter,
        });
        let out = shard
            .heartbeat(done, stats, &stores.at(160), &index, &mut || ids.next())
            .unwrap();
        assert_eq!(out.operator, None);
        assert!(out.persist.is_some());
        assert_eq!(stores.in_flight.get(crate::placement::OpKind::Replica), 0);
    }

    #[test]
    fn the_patrol_starts_what_heartbeats_would_and_goes_round() {
        let index = RangeIndex::new();
        let stores = view(&[(1, 0), (2, 0), (3, 0)]);
        let mut shard = Shard::new();
        let stats = RegionStats::default();
        let bounds: [&[u8]; 4] = [b"", b"b", b"c", b""];
        for id in 1..=3u64 {
            let r = region(id, bounds[id as usize - 1], bounds[id as usize], 1, &[1, 2]);
            shard
                .heartbeat(r, stats, &stores.at(0), &index, &mut || None)
                .unwrap();
        }
        let mut ids = 900..;
        let first = shard.patrol(&stores.at(1), 2, &mut || ids.next());
        assert_eq!(first.len(), 2, "{first:?}");
        // The third region starts; round again, the first two are pushed again.
        let second = shard.patrol(&stores.at(2), 3, &mut || ids.next());
        assert_eq!(second.len(), 3, "{second:?}");
        assert_eq!(second[1..], first[..], "pending steps pushed again");
        assert_eq!(stores.in_flight.get(crate::placement::OpKind::Replica), 3);
    }
}
