//! A shard: the regions one core owns (by [`owner`]) with what only heartbeats change:
//! sizes, and the one pending operator (beside the entries, in `in_flight`). A heartbeat that repeats the current route touches
//! nothing shared; one that changes the route goes through the shared index (P1, P2). The
//! scheduling decisions are `schedule`'s, called on each heartbeat and by the patrol, which
//! passes over a bounded number of regions per call, and every operator's status is tracked
//! for GetOperator (`op_status`). Operators asked for from outside the scheduler are started
//! in `orders`. The patrol hands the merge checker a region's neighbours (`neighbours`: those
//! this shard owns) and puts a merge's target operator in the target's slot; a merge's source
//! is dropped when the target's report covers its range. Pure: the caller passes the clock, the
//! stores and the id source.
//!
//! Must not touch: I/O, the OS clock, persistence (it says what to persist in [`Outcome`]).

mod admin_operator;
mod cancel;
#[cfg(test)]
mod hot_feed_tests;
mod in_flight;
mod merge_pair;
#[cfg(test)]
mod merge_pair_tests;
mod neighbours;
mod orders;
mod owner;
mod store_totals;
#[cfg(test)]
mod store_totals_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use super::dense_map::DenseIdMap;
use super::op_status::{CancelReason, OpRecord, OpStatus, OpStatusTracker};
use super::operator::{Operator, Pending};
use super::range_index::{RangeIndex, Route};
use super::region::{Epoch, Region, RegionError, RegionStats};
use super::schedule::{
    self, Cluster, Dispatch, HotCache, HotStat, MergeInput, Neighbours, RegionInput, Side,
    WriteFlow,
};
use in_flight::InFlight;

pub use super::running_op::RunningOp;
pub use merge_pair::PartnerEnd;
pub use orders::{Order, OrderRefused, Ordered, SPLIT_DESC};
pub use owner::owner;
pub use store_totals::{StoreTotal, StoreTotals};

/// What the shard keeps of every region. Its operator, when one runs, is kept beside it
/// (`Shard::in_flight`): few regions have one at a time.
#[derive(Debug)]
struct Entry {
    route: Arc<Route>,
    sizes: Sizes,
    /// When the region last split or was made by a split (seconds of the caller's clock,
    /// 0 for never seen): no merge within split-merge-interval of it.
    split_s: u32,
    /// When its leader last reported (seconds of the caller's clock, 0 for never): the
    /// interval a report's written bytes and keys cover when the report does not say.
    reported_s: u32,
}

// One entry per region: each 8 bytes more is 8 MB more at 1M regions and 80 MB at 10M (the
// split time took the server from 286 to 294 B per region before the operator moved out).
const _: () = assert!(std::mem::size_of::<Entry>() == 32);

impl Entry {
    /// `region` (this entry's, as last reported, with `pending_peers` still catching up) as
    /// the scheduler reads it.
    fn input<'a>(&self, region: &'a Region, pending_peers: &'a [u64]) -> RegionInput<'a> {
        RegionInput {
            region,
            pending_peers,
            size_mib: self.sizes.mib(),
            // The caller sets it from the shard's hot cache where a decision reads it.
            hot: None,
        }
    }
}

/// A region's reported sizes in half the bytes of [`RegionStats`]: one of these per region
/// at 1M regions counts against the goal of ~300 B per region. Sizes in KiB and
/// counts saturating at `u32::MAX` (4 TiB, 4 billion keys) keep what balancing by size needs.
/// The size is kept in whole KiB rounded down, except that any data at all is at least 1 KiB,
/// so that 0 means only "not measured" and whole MiB read back as PD computes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Sizes {
    size_kib: u32,
    keys: u32,
    written_kib: u32,
    written_keys: u32,
}

/// PD's size of a region whose size is not known: what a first report of size 0 counts as
/// (PD's `EmptyRegionApproximateSize`, 1 MiB).
const EMPTY_REGION_KIB: u32 = 1024;

impl Sizes {
    /// The size in whole MiB as PD's `RegionFromHeartbeat` computes it: the bytes over 1 MiB,
    /// rounded down, with a region that has data but less than 1 MiB counted as 1.
    fn mib(&self) -> u64 {
        match self.size_kib {
            0 => 0,
            kib => (u64::from(kib) / 1024).max(1),
        }
    }

    /// What a heartbeat's `stats` leave of a region's sizes, with PD's `RegionInfo.Inherit`:
    /// TiKV reports a size of 0 when it has not measured the region yet (a new leader's first
    /// report, or after a range was destroyed), never for an empty region. Such a report keeps
    /// the size and keys last reported (`previous`), or counts as 1 MiB and no keys for a
    /// region with no report before it. The flow figures are always the heartbeat's own.
    fn reported(stats: RegionStats, previous: Option<Sizes>) -> Sizes {
        let mut s = Sizes::from(stats);
        if s.size_kib == 0 {
            match previous {
                Some(p) => {
                    s.size_kib = p.size_kib;
                    s.keys = p.keys;
                }
                None => s.size_kib = EMPTY_REGION_KIB,
            }
        }
        s
    }
}

impl From<RegionStats> for Sizes {
    fn from(s: RegionStats) -> Sizes {
        let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Sizes {
            size_kib: match s.approximate_size {
                0 => 0,
                bytes => narrow(bytes / 1024).max(1),
            },
            keys: narrow(s.approximate_keys),
            written_kib: narrow(s.written_bytes.div_ceil(1024)),
            written_keys: narrow(s.written_keys),
        }
    }
}

/// A region's sizes as its leader last reported them, as PD's HTTP API shows a region's:
/// the size in whole MiB (a region with data but under 1 MiB counts as 1, as PD's
/// `RegionFromHeartbeat` rounds it, and a report of 0 keeps the size before it), keys, and the bytes and keys written in the last
/// interval. Kept in KiB here, so bytes written read back in whole KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReportedSizes {
    pub approximate_size_mib: u64,
    pub approximate_keys: u64,
    pub written_bytes: u64,
    pub written_keys: u64,
}

impl From<Sizes> for ReportedSizes {
    fn from(s: Sizes) -> ReportedSizes {
        ReportedSizes {
            approximate_size_mib: s.mib(),
            approximate_keys: u64::from(s.keys),
            written_bytes: u64::from(s.written_kib) * 1024,
            written_keys: u64::from(s.written_keys),
        }
    }
}

/// What PD's HTTP API shows of a region's last report: its sizes and the ids of the peers its
/// leader reports still catching up (PD's `pending_peers`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionReport {
    pub sizes: ReportedSizes,
    pub pending_peers: Box<[u64]>,
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
    /// When this term's scheduling began (its reset, or else the first patrol): no merge
    /// within split-merge-interval of it.
    started_ms: Option<u64>,
    /// Each region's operator status, for GetOperator.
    ops: OpStatusTracker,
    /// The operator each region runs, of those that run one.
    in_flight: InFlight,
    /// Merge halves to end because their partners ended undone (`merge_pair`).
    partner_ends: Vec<PartnerEnd>,
    /// The peers still catching up, of the regions whose leader last reported any: few at a
    /// time (those adding a peer), so kept beside the entries rather than in each.
    catching_up: HashMap<u64, Box<[u64]>>,
    /// What the entries put on each store, moved with every change to an entry's route or
    /// size.
    totals: StoreTotals,
    /// The write rates of this shard's hot regions, and their share of the stores' sums.
    hot: HotCache,
}

/// One scheduling call (`call`, a heartbeat's or the patrol's) on region `id`, `region` being
/// its entry's route as reported; `ops` learns what the call did to the region's operator.
/// The step to send the leader.
fn decide(
    (ops, in_flight): (&mut OpStatusTracker, &mut InFlight),
    id: u64,
    (entry, hot): (&Entry, Option<HotStat>),
    (region, pending_peers): (&Region, &[u64]),
    now_ms: u64,
    call: impl FnOnce(&RegionInput, &mut Option<Box<Pending>>) -> Dispatch,
) -> Dispatch {
    let mut input = entry.input(region, pending_peers);
    input.hot = hot;
    in_flight.with_slot(id, |slot| {
        let d = call(&input, slot);
        ops.observe(id, &d, slot, (region.epoch, entry.sizes.mib()), now_ms);
        d
    })
}

/// Records which of region `id`'s peers its leader reports still catching up; whether a peer
/// that was catching up no longer is.
fn catch_up(
    catching_up: &mut HashMap<u64, Box<[u64]>>,
    id: u64,
    region: &Region,
    stats: RegionStats,
) -> bool {
    if stats.pending == 0 {
        // Most reports, with nothing recorded anywhere: no lookup at all.
        return !catching_up.is_empty() && catching_up.remove(&id).is_some();
    }
    let now: Box<[u64]> = stats.pending_peers(region).collect();
    let before = catching_up.insert(id, now);
    before.is_some_and(|b| {
        let now = &catching_up[&id];
        b.iter().any(|p| !now.contains(p))
    })
}

/// How the status records name an operator asked for from outside the scheduler.
struct Names {
    desc: &'static str,
    kind: &'static str,
    /// The scatter group, for an admin scatter.
    group: Option<Box<str>>,
    /// Recorded but not yet logged as added: an admin merge's source half, added (and
    /// announced) with its target's.
    held: bool,
}

/// Starts an operator asked for from outside the scheduler (`call` starts its plan) on region
/// `id`, `region` being its entry's route as reported: the operator running there, which the
/// caller's rule let it replace, is cancelled first and its status ends as replaced (a merge
/// half's partner is noted in `ends`, to end with it); the new
/// one, once started, is recorded as running under `names`. The step to send the leader, or
/// `None` when it did not start.
fn start(
    (ops, in_flight, ends): (&mut OpStatusTracker, &mut InFlight, &mut Vec<PartnerEnd>),
    id: u64,
    entry: &Entry,
    (region, pending_peers): (&Region, &[u64]),
    c: &Cluster,
    names: Names,
    call: impl FnOnce(&RegionInput, &mut Option<Box<Pending>>) -> Dispatch,
) -> Option<Option<Operator>> {
    let size_mib = entry.sizes.mib();
    let d = in_flight.with_slot(id, |slot| {
        if let Some(old) = slot.as_deref() {
            merge_pair::half_ended(ends, id, old);
            let old = schedule::cancel(c, slot);
            let shown = old.as_deref().map(|p| (p, size_mib));
            ops.end(id, OpStatus::Replace, c.now_ms, shown);
        }
        call(&entry.input(region, pending_peers), slot)
    });
    if !d.started {
        return None;
    }
    let op = in_flight.get(id);
    let record = OpRecord {
        desc: names.desc,
        kind: names.kind,
        status: OpStatus::Running,
        group: names.group,
        epoch: region.epoch,
        at_ms: c.now_ms,
        started_ms: c.now_ms,
        related_merge: op.and_then(Pending::merge_partner),
        cancel_reason: None,
        size_mib: Some(size_mib),
    };
    if names.held {
        ops.hold(id, record);
    } else {
        ops.start(id, record, op.map(|p| (p, size_mib)));
    }
    Some(d.step)
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

    /// Reads what a heartbeat of region `id` reads first and nothing else: its slot in the
    /// map, its entry, its route and the route's keys. With a million regions each of these is
    /// a cache miss, and one heartbeat waits on them one after another. Touched for a whole
    /// batch first, in a loop that does nothing else, they are fetched side by side.
    pub fn touch(&self, id: u64) -> Option<u8> {
        let route = &self.regions.get(&id)?.route;
        route.start_key().first().copied()
    }

    /// The sizes and the peers still catching up region `id` last reported, when this shard
    /// owns its current route.
    pub fn report(&self, id: u64) -> Option<RegionReport> {
        self.regions
            .get(&id)
            .filter(|e| e.route.is_current())
            .map(|e| RegionReport {
                sizes: e.sizes.into(),
                pending_peers: self.catching_up.get(&id).cloned().unwrap_or_default(),
            })
    }

    /// A leader's heartbeat. On error nothing changed, here or in the index.
    pub fn heartbeat(
        &mut self,
        region: &Region,
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
        if u32::from(stats.pending) >> region.peers.len().min(16) != 0 {
            return bad(format!(
                "pending peers {:#b} name more than its {} peers",
                stats.pending,
                region.peers.len()
            ));
        }
        let id = region.id;
        let mut outcome = Outcome::default();
        // What PD calls the origin: this region as this shard last knew it, whose size an
        // unmeasured report keeps.
        let previous = self.regions.get(&id).map(|e| e.sizes);
        let unchanged = self
            .regions
            .get(&region.id)
            .is_some_and(|e| e.route.is_current() && e.route.is(region));
        // A region this shard has not seen yet (a split reported it, or a new term loaded
        // it) whose report matches the index is adopted without writing the index.
        let adopted = !unchanged
            && !self.regions.contains_key(&region.id)
            && index
                .snapshot()
                .locate(&region.start_key)
                .filter(|r| r.is(region))
                .map(|route| {
                    self.regions.insert(
                        id,
                        Entry {
                            route: route.clone(),
                            sizes: stats.into(),
                            split_s: secs(c.now_ms),
                            reported_s: 0,
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
                Some(e) => {
                    // Counted again below, on its new route and size.
                    self.totals.remove(&e.route, e.sizes.mib());
                    // A narrower range under a newer version: the region split.
                    let old = (e.route.start_key(), e.route.end_key());
                    let new = (change.route.start_key(), change.route.end_key());
                    let end_before = |a: &[u8], b: &[u8]| !a.is_empty() && (b.is_empty() || a < b);
                    if old != new && (new.0 > old.0 || end_before(new.1, old.1)) {
                        e.split_s = secs(c.now_ms);
                    }
                    e.route = change.route;
                }
                None => {
                    self.regions.insert(
                        id,
                        Entry {
                            route: change.route,
                            sizes: stats.into(),
                            split_s: secs(c.now_ms),
                            reported_s: 0,
                        },
                    );
                }
            }
            for removed in &outcome.removed {
                self.drop_region(*removed, c);
            }
        }
        let Some(entry) = self.regions.get_mut(&id) else {
            return Ok(outcome);
        };
        entry.sizes = Sizes::reported(stats, previous);
        // The report's own interval (TiKV's start and end) when it gives one; else the time
        // since the last one this shard took, the first one's unknown and too short to count
        // (as PD passes over a report under 3 s).
        let now_s = secs(c.now_ms);
        let since_last_s = match entry.reported_s {
            0 => None,
            before => Some(u64::from(now_s.saturating_sub(before))),
        };
        entry.reported_s = now_s;
        let flow = WriteFlow::reported(&stats, since_last_s);
        let hot = self.hot.observe(c, region, flow);
        let entry = &*entry;
        match previous.filter(|_| unchanged) {
            // The same route: only a size that changed in whole MiB moves the totals.
            Some(before) => self
                .totals
                .resize(&entry.route, before.mib(), entry.sizes.mib()),
            // A new entry, or one whose old route was uncounted above.
            None => self.totals.add(&entry.route, entry.sizes.mib()),
        }
        let caught_up = catch_up(&mut self.catching_up, id, region, stats);
        let pending = self.catching_up.get(&id).map_or(&[][..], |p| &p[..]);
        // The report is the route now (unchanged, adopted or just applied), unpacked. A peer
        // that caught up is news to the checker as much as a new peer is.
        let changed = !unchanged || caught_up;
        let mut d = decide(
            (&mut self.ops, &mut self.in_flight),
            id,
            (entry, hot),
            (region, pending),
            c.now_ms,
            |input, slot| schedule::on_heartbeat(c, input, changed, slot, new_peer_id),
        );
        self.merge_pair(id, &mut d, c);
        outcome.operator = d.step.take();
        self.hot_ended(id, &d, c);
        // After the call: a target that grew over its source is done before the source's
        // end (its range gone) could cancel it.
        self.settle_pairs(c);
        Ok(outcome)
    }

    /// The patrol: checks up to `budget` regions from where the last pass stopped, and returns
    /// the steps to push to their leaders (the region as reported, the step): the first step of
    /// each operator it started, and pending operators' steps again.
    /// With the range `index`, the merge checker runs too, on neighbours this shard owns.
    pub fn patrol(
        &mut self,
        c: &Cluster,
        budget: usize,
        index: Option<&RangeIndex>,
        new_peer_id: &mut dyn FnMut() -> Option<u64>,
    ) -> Vec<(Region, Operator)> {
        let mut started = Vec::new();
        // One region unpacked at a time into the same room; the few acted on are copied out.
        let mut region = Region {
            id: 0,
            start_key: Vec::new(),
            end_key: Vec::new(),
            epoch: Epoch::default(),
            peers: Vec::new(),
            leader: None,
        };
        let mut sweep = schedule::Sweep::default();
        // The hot scheduler's candidates, ranked as PD's are before it schedules.
        self.hot.rank(c);
        let started_ms = *self.started_ms.get_or_insert(c.now_ms);
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
            entry.route.region_into(&mut region);
            let (small, keys, split_s, idle) = (
                entry.sizes.mib() <= c.cfg.max_merge_region_size_mib,
                u64::from(entry.sizes.keys),
                entry.split_s,
                !self.in_flight.busy(id),
            );
            let recent =
                |s: u32| s != 0 && u64::from(s) * 1000 + c.cfg.split_merge_interval_ms > c.now_ms;
            let seen = match index {
                Some(index) if small && idle => {
                    let entries = (&self.regions, &self.in_flight);
                    neighbours::neighbours(&region, index, entries, &|e| recent(e.split_s))
                }
                _ => Neighbours::default(),
            };
            let adjacent = |s: Side| seen.adjacent(s);
            let merge = MergeInput {
                keys,
                recently_split: recent(split_s),
                started_ms,
                adjacent: &adjacent,
            };
            let merge = index.map(|_| &merge);
            let Some(entry) = self.regions.get(&id) else {
                continue;
            };
            let pending = self.catching_up.get(&id).map_or(&[][..], |p| &p[..]);
            let mut d = decide(
                (&mut self.ops, &mut self.in_flight),
                id,
                (entry, self.hot.get(&region)),
                (&region, pending),
                c.now_ms,
                |input, slot| schedule::patrol(c, &mut sweep, input, merge, slot, new_peer_id),
            );
            self.merge_pair(id, &mut d, c);
            if let Some(op) = d.step.take() {
                started.push((region.clone(), op));
            }
            self.hot_ended(id, &d, c);
            self.settle_pairs(c);
        }
        started
    }

    /// Drops a region another change displaced (or that left the index); a merge half it ran
    /// ends its partner.
    pub fn forget(&mut self, id: u64, c: &Cluster) {
        self.drop_region(id, c);
        self.settle_pairs(c);
    }

    /// A hot-region operator of region `id` ended in the call: the hot cache dates it, and the
    /// hot scheduler leaves the region alone for a while.
    fn hot_ended(&mut self, id: u64, d: &Dispatch, c: &Cluster) {
        if let Some(flow) = d.hot_ended {
            self.hot.hot_op_ended(id, flow, c.now_ms);
        }
    }

    /// [`Shard::forget`], the partner of a merge half it ran noted but not yet ended.
    fn drop_region(&mut self, id: u64, c: &Cluster) {
        if let Some(e) = self.regions.get(&id) {
            if e.route.is_current() {
                return;
            }
        }
        self.catching_up.remove(&id);
        self.hot.forget(c, id);
        // Its operator first, while its size is still there for the log.
        if self.regions.contains_key(&id) {
            if let Some(op) = self.in_flight.take(id) {
                self.cancel_for(id, op, CancelReason::RegionNotFound, c);
            }
        }
        if let Some(e) = self.regions.remove(&id) {
            self.totals.remove(&e.route, e.sizes.mib());
        }
    }

    /// Region `id`'s operator as GetOperator reports it: running, or how the last one ended
    /// (for a while).
    pub fn operator_status(&self, id: u64, now_ms: u64) -> Option<OpRecord> {
        self.ops.get(id, now_ms).cloned()
    }

    /// Replaces everything with `routes` (a new leader's load, or nothing on stepping down).
    /// Operators of the last term are dropped and their charges released.
    pub fn reset(&mut self, routes: impl IntoIterator<Item = Arc<Route>>, c: &Cluster) {
        for (_, op) in self.in_flight.drain() {
            schedule::cancel(c, &mut Some(op));
        }
        // Every shard starts over: no partner is left to end, and the operators dropped are
        // not logged (PD's new coordinator logs nothing of the old one's).
        self.partner_ends.clear();
        self.ops.clear();
        self.catching_up.clear();
        self.hot.clear(c);
        self.started_ms = Some(c.now_ms);
        self.regions.clear();
        self.totals.clear();
        self.cursor = 0;
        self.take_in(routes);
    }

    /// Room for `more` regions, so that taking a share in chunks does not rehash midway.
    pub fn reserve(&mut self, more: usize) {
        self.regions.reserve(more);
    }

    /// Takes `routes` in beside the regions held (a new term's share, a chunk at a time after
    /// a `reset`); a region held already is replaced, counted once.
    pub fn take_in(&mut self, routes: impl IntoIterator<Item = Arc<Route>>) {
        for route in routes {
            let entry = Entry {
                route,
                sizes: Sizes::default(),
                split_s: 0,
                reported_s: 0,
            };
            self.totals.add(&entry.route, entry.sizes.mib());
            if let Some(old) = self.regions.insert(entry.route.id(), entry) {
                self.totals.remove(&old.route, old.sizes.mib());
            }
        }
    }

    /// What this shard's regions put on each store (PD's counts and sizes per store).
    pub fn store_totals(&self) -> &StoreTotals {
        &self.totals
    }
}

/// `now_ms` in whole seconds, at least 1 (0 is "never").
fn secs(now_ms: u64) -> u32 {
    u32::try_from(now_ms / 1000).unwrap_or(u32::MAX).max(1)
}
