//! A shard: the regions one core owns (`region_id % cores`) with what only heartbeats change:
//! sizes, and the one pending operator. A heartbeat that repeats the current route touches
//! nothing shared; one that changes the route goes through the shared index (P1, P2). The
//! scheduling decisions are `schedule`'s, called on each heartbeat and by the patrol, which
//! passes over a bounded number of regions per call. Operators asked for from outside the
//! scheduler (ScatterRegion, SplitRegions) are started here too ([`Shard::order`]), under PD's
//! rule for an operator already running, and every operator's status is tracked for
//! GetOperator (`op_status`). Pure: the caller passes the clock, the stores and the id source.

use std::sync::Arc;

mod admin_operator;

pub use admin_operator::RunningOp;

use super::dense_map::DenseIdMap;
use super::op_status::{OpRecord, OpStatus, OpStatusTracker};
use super::operator::{OpKind, Operator, Pending, SplitStep, Step};
use super::range_index::{RangeIndex, Route};
use super::region::{Epoch, Region, RegionError, RegionStats};
use super::schedule::{self, Cluster, Dispatch, Groups, Plan, RegionInput, SCATTER_DESC};

/// The description PD's splitter gives its operators.
pub const SPLIT_DESC: &str = "region-splitter";

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
    /// Each region's operator status, for GetOperator.
    ops: OpStatusTracker,
}

/// An operator asked for from outside the scheduler.
pub enum Order<'a> {
    /// PD's admin scatter within `group`, counted in `groups`.
    Scatter {
        group: &'a str,
        groups: &'a mut Groups,
        skip_store_limit: bool,
    },
    /// PD's splitter: split at the keys that lie inside the region.
    Split { keys: Vec<Vec<u8>> },
}

/// What an order did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ordered {
    /// Started; its first step, to send the leader.
    Started(Option<Operator>),
    /// The same scatter already runs on the region.
    AlreadyRunning,
    /// The region already is where the scatter puts it.
    Unneeded,
}

/// Why an order was not carried out (PD's errors, which make the region a failed one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderRefused {
    #[error("region {0} not found")]
    NotFound(u64),
    #[error("the operator of region {0} already exists")]
    Running(u64),
    #[error("the operator of region {0} already exists with a different epoch")]
    RunningOtherEpoch(u64),
    #[error(transparent)]
    Scatter(#[from] schedule::Refused),
    #[error("region {0}: no split key lies inside it")]
    NoSplitKey(u64),
    #[error("region {0}: cannot add the operator now (operator cap, store limit or ids)")]
    NotStarted(u64),
}

/// Tells `ops` what a scheduling call did to region `id`'s operator: an end (done, past its
/// deadline, or cancelled) and a start.
fn observe(
    ops: &mut OpStatusTracker,
    id: u64,
    d: &Dispatch,
    deadline_ms: Option<u64>,
    slot: &Option<Box<Pending>>,
    epoch: Epoch,
    now_ms: u64,
) {
    if let Some((_, done)) = d.ended {
        let status = if done {
            OpStatus::Success
        } else if deadline_ms.is_some_and(|t| now_ms >= t) {
            OpStatus::Timeout
        } else {
            OpStatus::Cancel
        };
        ops.end(id, status, now_ms);
    }
    if d.started {
        if let Some(p) = slot {
            ops.start(id, OpRecord::scheduled(p.kind, epoch, now_ms));
        }
    }
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
        let deadline = entry.pending.as_ref().map(|p| p.deadline_ms);
        let d = schedule::on_heartbeat(c, &input, !unchanged, &mut entry.pending, new_peer_id);
        observe(
            &mut self.ops,
            id,
            &d,
            deadline,
            &entry.pending,
            region.epoch,
            c.now_ms,
        );
        outcome.operator = d.step;
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
            let Some((id, entry)) = self.regions.at_mut(self.cursor) else {
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
            let deadline = entry.pending.as_ref().map(|p| p.deadline_ms);
            let d = schedule::patrol(c, &input, &mut entry.pending, new_peer_id);
            observe(
                &mut self.ops,
                id,
                &d,
                deadline,
                &entry.pending,
                region.epoch,
                c.now_ms,
            );
            if let Some(op) = d.step {
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
            if e.pending.is_some() {
                self.ops.end(id, OpStatus::Cancel, c.now_ms);
            }
            schedule::cancel(c, &mut e.pending);
        }
    }

    /// Region `id`'s operator as GetOperator reports it: running, or how the last one ended
    /// (for a while).
    pub fn operator_status(&self, id: u64, now_ms: u64) -> Option<OpRecord> {
        self.ops.get(id, now_ms).cloned()
    }

    /// Starts an operator asked for from outside the scheduler on region `id`, as last
    /// reported. PD's rule for one already running: the same scatter (same group) is left to
    /// run; a scatter replaces a balance operator (lower priority), never a repair, another
    /// scatter or a split; a split replaces nothing.
    pub fn order(
        &mut self,
        id: u64,
        order: Order,
        c: &Cluster,
        new_peer_id: &mut dyn FnMut() -> Option<u64>,
    ) -> Result<Ordered, OrderRefused> {
        let entry = self
            .regions
            .get_mut(&id)
            .filter(|e| e.route.is_current())
            .ok_or(OrderRefused::NotFound(id))?;
        let region = entry.route.region();
        let input = RegionInput {
            region: &region,
            pending_peers: &[],
            size_mib: u64::from(entry.sizes.size_kib) / 1024,
        };
        let running = entry.pending.as_ref().map(|p| p.kind);
        let record = self
            .ops
            .get(id, c.now_ms)
            .filter(|r| r.is_running() && running.is_some());
        let (plan, desc, kind, group) = match order {
            Order::Scatter {
                group,
                groups,
                skip_store_limit,
            } => {
                if let Some(kind) = running {
                    if let Some(r) = record.filter(|r| r.desc == SCATTER_DESC) {
                        if r.group.as_deref() != Some(group) {
                            return Err(OrderRefused::Running(id));
                        }
                        if r.epoch != region.epoch {
                            return Err(OrderRefused::RunningOtherEpoch(id));
                        }
                        return Ok(Ordered::AlreadyRunning);
                    }
                    let admin = record.is_some_and(|r| r.desc == SPLIT_DESC);
                    if admin || kind == OpKind::Replica {
                        return Err(OrderRefused::Running(id));
                    }
                }
                let Some(target) = schedule::scatter(c, &input, group, groups, skip_store_limit)?
                else {
                    return Ok(Ordered::Unneeded);
                };
                let mut ids = Vec::with_capacity(target.moves.len());
                for _ in &target.moves {
                    ids.push(new_peer_id().ok_or(OrderRefused::NotStarted(id))?);
                }
                (
                    target.plan(&input, &ids),
                    SCATTER_DESC,
                    target.kind_name(&input),
                    Some(group.into()),
                )
            }
            Order::Split { mut keys } => {
                if running.is_some() {
                    return Err(OrderRefused::Running(id));
                }
                keys.retain(|k| {
                    k.as_slice() > region.start_key.as_slice()
                        && (region.end_key.is_empty() || k.as_slice() < region.end_key.as_slice())
                });
                keys.sort_unstable();
                keys.dedup();
                if keys.is_empty() {
                    return Err(OrderRefused::NoSplitKey(id));
                }
                let step = SplitStep {
                    start_key: region.start_key.clone(),
                    end_key: region.end_key.clone(),
                    keys,
                };
                let plan = Plan {
                    kind: OpKind::Region,
                    steps: vec![Step::Split(Box::new(step))],
                };
                (plan, SPLIT_DESC, "split", None)
            }
        };
        if running.is_some() {
            schedule::cancel(c, &mut entry.pending);
            self.ops.end(id, OpStatus::Replace, c.now_ms);
        }
        let d = schedule::start_plan(c, &input, plan, &mut entry.pending, &mut || None);
        if !d.started {
            return Err(OrderRefused::NotStarted(id));
        }
        self.ops.start(
            id,
            OpRecord {
                desc,
                kind,
                status: OpStatus::Running,
                group,
                epoch: region.epoch,
                at_ms: c.now_ms,
            },
        );
        Ok(Ordered::Started(d.step))
    }

    /// Replaces everything with `routes` (a new leader's load, or nothing on stepping down).
    /// Operators of the last term are dropped and their charges released.
    pub fn reset(&mut self, routes: impl IntoIterator<Item = Arc<Route>>, c: &Cluster) {
        for (_, e) in self.regions.iter_mut() {
            schedule::cancel(c, &mut e.pending);
        }
        self.ops.clear();
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
        // Timed out: dropped. The report is unchanged, so the heartbeat decides nothing new;
        // the patrol decides afresh (a new peer id).
        let dropped = shard
            .heartbeat(short.clone(), stats, &stores.at(150), &index, &mut || {
                ids.next()
            })
            .unwrap();
        assert_eq!(dropped.operator, None);
        let fresh = shard.patrol(&stores.at(150), 1, &mut || ids.next());
        assert!(
            matches!(fresh.as_slice(), [(r, Operator::AddPeer(p))] if r.id == 1 && p.id == 501),
            "{fresh:?}"
        );
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
    fn orders_start_operators_and_their_statuses_follow_them() {
        use crate::placement::OpStatus;
        let index = RangeIndex::new();
        let stores = view(&[(1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0)]);
        let mut shard = Shard::new();
        let stats = RegionStats::default();
        let left = region(1, b"", b"m", 1, &[1, 2, 3]);
        let right = region(2, b"m", b"", 1, &[1, 2, 3]);
        for r in [&left, &right] {
            shard
                .heartbeat(r.clone(), stats, &stores.at(0), &index, &mut || None)
                .unwrap();
        }
        let c = stores.at(10);
        let mut groups = Groups::default();
        let mut ids = 100..;
        let mut scatter = |shard: &mut Shard, id: u64, group: &str, groups: &mut Groups| {
            let order = Order::Scatter {
                group,
                groups,
                skip_store_limit: false,
            };
            shard.order(id, order, &c, &mut || ids.next())
        };
        // The group's first region stays; the second moves to the stores not picked.
        assert_eq!(
            scatter(&mut shard, 1, "g", &mut groups),
            Ok(Ordered::Unneeded)
        );
        let started = scatter(&mut shard, 2, "g", &mut groups);
        let Ok(Ordered::Started(Some(Operator::AddPeer(p)))) = started else {
            panic!("{started:?}")
        };
        assert_eq!((p.store_id, p.role, p.id), (4, PeerRole::Learner, 100));
        let record = shard.operator_status(2, 10).unwrap();
        assert_eq!(
            (record.desc, record.kind, record.status),
            (SCATTER_DESC, "admin,region,leader", OpStatus::Running)
        );
        // Running: the same scatter is left alone, another group's and a split are refused.
        assert_eq!(
            scatter(&mut shard, 2, "g", &mut groups),
            Ok(Ordered::AlreadyRunning)
        );
        assert_eq!(
            scatter(&mut shard, 2, "h", &mut groups),
            Err(OrderRefused::Running(2))
        );
        let split = |keys: &[&[u8]]| Order::Split {
            keys: keys.iter().map(|k| k.to_vec()).collect(),
        };
        assert_eq!(
            shard.order(2, split(&[b"x"]), &c, &mut || None),
            Err(OrderRefused::Running(2))
        );
        assert_eq!(
            shard.order(9, split(&[b"x"]), &c, &mut || None),
            Err(OrderRefused::NotFound(9))
        );
        // A split takes the keys inside the region, sorted, once each.
        assert_eq!(
            shard.order(1, split(&[b"z", b"m"]), &c, &mut || None),
            Err(OrderRefused::NoSplitKey(1))
        );
        let started = shard.order(1, split(&[b"c", b"a", b"c", b"", b"q"]), &c, &mut || None);
        let want = Operator::Split(Box::new(vec![b"a".to_vec(), b"c".to_vec()]));
        assert_eq!(started, Ok(Ordered::Started(Some(want.clone()))));
        // Sent again until the leader reports another range; then it succeeded.
        let again = shard
            .heartbeat(left.clone(), stats, &stores.at(20), &index, &mut || None)
            .unwrap();
        assert_eq!(again.operator, Some(want));
        assert_eq!(
            shard.operator_status(1, 20).map(|r| (r.desc, r.status)),
            Some((SPLIT_DESC, OpStatus::Running))
        );
        index.apply(region(7, b"", b"c", 2, &[1, 2, 3])).unwrap();
        let done = shard
            .heartbeat(
                region(1, b"c", b"m", 2, &[1, 2, 3]),
                stats,
                &stores.at(30),
                &index,
                &mut || None,
            )
            .unwrap();
        assert_eq!(done.operator, None);
        assert_eq!(
            shard.operator_status(1, 30).map(|r| r.status),
            Some(OpStatus::Success)
        );
        // The scatter not seen done by its deadline timed out.
        let late = stores.cfg.operator_timeout_ms + 10;
        shard
            .heartbeat(right, stats, &stores.at(late), &index, &mut || None)
            .unwrap();
        assert_eq!(
            shard.operator_status(2, late).map(|r| r.status),
            Some(OpStatus::Timeout)
        );
        assert_eq!(stores.in_flight.get(OpKind::Region), 0);
        // Records of ended operators are forgotten after a while.
        let later = late + crate::placement::RECORD_TTL_MS;
        assert_eq!(shard.operator_status(2, later), None);
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
