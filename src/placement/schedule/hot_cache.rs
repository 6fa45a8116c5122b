//! PD's hot peer cache for write flow, simplified: each region's write rates as its leader
//! reports them (bytes and keys written over the report's interval), kept only for regions
//! that are hot, with PD's hot degree and anti-count; and, per store, the sums of the hot
//! regions' rates that the hot-write scheduler weighs the stores by (in each store's budget,
//! shared across cores as the budgets are).
//!
//! As PD (`pkg/statistics/hot_peer_cache.go`, `utils/constant.go`): a region is recorded
//! when one report's rate reaches the least hot rate (1 KiB/s or 32 keys/s written); reports
//! add up until they cover a full report interval (60 s), and each full interval makes the
//! region hotter (degree + 1, anti-count up to 2) or colder (both - 1; it is dropped when its
//! anti-count reaches 0). A report under 3 s is noise and is passed over. The stores count a
//! region once its degree reaches `hot_region_cache_hits_threshold` (PD's `GetHotPeerStats`
//! with the min hot degree): the leader's store in its leader sum, every peer's store in its
//! peer sum. A report whose leader is on another store than the last one's dates a leader
//! move (PD's `lastTransferLeaderTime`), by the time the caller lends with the report: the
//! scheduler leaves the region alone for a while after it, as after the end of a hot operator,
//! which the caller passes on from the scheduler's dispatch. Simplified from PD: one entry per
//! region (a write lands on every peer alike), no per-store top-N threshold, and the peer sum
//! stands for the store's reported write rate.
//!
//! Owns: the per-region entries (the caller keeps one cache per set of regions it owns: a
//! shard, the simulator) and their share of the store sums. Must not touch: decisions, I/O,
//! a clock of its own (reports carry their interval; the caller's `Cluster` the time).

use std::collections::HashMap;

use super::cluster::{Cluster, HotMove, HotStat};
use crate::placement::region::{Region, RegionStats, MAX_PEERS};

/// PD's `MinHotThresholds[RegionWriteBytes]`: 1 KiB/s.
pub const MIN_HOT_WRITE_BYTES_PER_S: f64 = 1024.0;
/// PD's `MinHotThresholds[RegionWriteKeys]`.
pub const MIN_HOT_WRITE_KEYS_PER_S: f64 = 32.0;
/// PD's `RegionHeartBeatReportInterval` (s): the rolling window of a region's write rate.
pub const REPORT_INTERVAL_S: u64 = 60;
/// PD's `HotRegionReportMinInterval` (s): a shorter report is noise.
pub const MIN_REPORT_INTERVAL_S: u64 = 3;
/// PD's `HotRegionAntiCount`.
pub const ANTI_COUNT: i32 = 2;

/// What a leader reports written since its last report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteFlow {
    pub bytes: u64,
    pub keys: u64,
    /// The report's interval (TiKV's `interval`, end minus start), in seconds.
    pub interval_s: u64,
}

impl WriteFlow {
    /// What a leader's report `stats` says was written, over the interval the report gives
    /// (PD divides by TiKV's end minus start, whenever it arrived); a report that gives none
    /// (0/0) is taken over `since_last_s`, the time since its owner took the region's last
    /// report, and a first such report over 0 s, too short to count.
    pub fn reported(stats: &RegionStats, since_last_s: Option<u64>) -> WriteFlow {
        WriteFlow {
            bytes: stats.written_bytes,
            keys: stats.written_keys,
            interval_s: stats.interval.secs().or(since_last_s).unwrap_or(0),
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    stat: HotStat,
    anti: i32,
    /// Reports not yet making a full interval.
    acc_bytes: u64,
    acc_keys: u64,
    acc_s: u64,
    /// Where its rates are counted in the store sums (when `counted`): its leader's store and
    /// its peers' stores. Boxed to their number, not an array of [`MAX_PEERS`]: with every
    /// region hot, the entries are as many as the regions, and an array of 16 doubled each.
    leader: u64,
    stores: Box<[u64]>,
    counted: bool,
}

// An entry's size is paid once per hot region, and every region may be hot.
const _: () = assert!(std::mem::size_of::<Entry>() <= 112);

/// The write rates of one set of regions' hot ones.
#[derive(Debug, Default)]
pub struct HotCache {
    regions: HashMap<u64, Entry>,
}

fn is_hot(bytes_per_s: f64, keys_per_s: f64) -> bool {
    bytes_per_s >= MIN_HOT_WRITE_BYTES_PER_S || keys_per_s >= MIN_HOT_WRITE_KEYS_PER_S
}

impl HotCache {
    pub fn new() -> HotCache {
        HotCache::default()
    }

    /// The region's hot stat, if it is hot.
    pub fn get(&self, region_id: u64) -> Option<HotStat> {
        self.regions.get(&region_id).map(|e| e.stat)
    }

    pub fn len(&self) -> usize {
        self.regions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// A leader's report `flow` of `r`: updates its entry and the store sums; returns its
    /// stat if it is hot. A cold region not recorded costs one lookup and no allocation.
    pub fn observe(&mut self, c: &Cluster, r: &Region, flow: WriteFlow) -> Option<HotStat> {
        let min_degree = c.cfg.hot_region_cache_hits_threshold;
        // The common case on the heartbeat path, no hot region at all: not even a lookup.
        if self.regions.is_empty() && flow.bytes == 0 && flow.keys == 0 {
            return None;
        }
        if flow.interval_s < MIN_REPORT_INTERVAL_S {
            // Too short to measure, but it says where the region is now: a hot region's
            // flow follows its leader and peers at once, so that a store a move relieved
            // is not judged by its old flow once the move's pending influence is gone.
            let e = self.regions.get_mut(&r.id)?;
            uncount(c, e);
            place(e, r, c.now_ms);
            count(c, e, min_degree);
            return Some(e.stat);
        }
        let secs = flow.interval_s as f64;
        let (bytes, keys) = (flow.bytes as f64 / secs, flow.keys as f64 / secs);
        if self.regions.is_empty() && !is_hot(bytes, keys) {
            return None;
        }
        let Some(e) = self.regions.get_mut(&r.id) else {
            if !is_hot(bytes, keys) {
                return None;
            }
            let full = flow.interval_s >= REPORT_INTERVAL_S;
            let mut e = Entry {
                stat: HotStat {
                    byte_rate: bytes,
                    key_rate: keys,
                    degree: i32::from(full),
                    leader_moved_ms: None,
                    hot_op_ended: None,
                },
                anti: if full { ANTI_COUNT } else { 0 },
                acc_bytes: if full { 0 } else { flow.bytes },
                acc_keys: if full { 0 } else { flow.keys },
                acc_s: if full { 0 } else { flow.interval_s },
                leader: 0,
                stores: Box::default(),
                counted: false,
            };
            place(&mut e, r, c.now_ms);
            count(c, &mut e, min_degree);
            let stat = e.stat;
            self.regions.insert(r.id, e);
            return Some(stat);
        };
        uncount(c, e);
        e.acc_bytes = e.acc_bytes.saturating_add(flow.bytes);
        e.acc_keys = e.acc_keys.saturating_add(flow.keys);
        e.acc_s = e.acc_s.saturating_add(flow.interval_s);
        if e.acc_s >= REPORT_INTERVAL_S {
            let secs = e.acc_s as f64;
            let (bytes, keys) = (e.acc_bytes as f64 / secs, e.acc_keys as f64 / secs);
            e.stat.byte_rate = bytes;
            e.stat.key_rate = keys;
            (e.acc_bytes, e.acc_keys, e.acc_s) = (0, 0, 0);
            if is_hot(bytes, keys) {
                e.stat.degree += 1;
                e.anti = (e.anti + 1).min(ANTI_COUNT);
            } else {
                e.stat.degree -= 1;
                e.anti -= 1;
                if e.anti <= 0 {
                    self.regions.remove(&r.id);
                    return None;
                }
            }
        }
        place(e, r, c.now_ms);
        count(c, e, min_degree);
        Some(e.stat)
    }

    /// A hot-region operator that moved `flow` ended on region `region_id` at `now_ms` (the
    /// scheduler's [`Dispatch::hot_ended`](super::Dispatch)): the scheduler leaves the region
    /// alone for a while after. A region the cache no longer holds is not hot, and has nothing
    /// to wait for.
    pub fn hot_op_ended(&mut self, region_id: u64, flow: HotMove, now_ms: u64) {
        if let Some(e) = self.regions.get_mut(&region_id) {
            e.stat.hot_op_ended = Some((flow, now_ms));
        }
    }

    /// The region is gone from this set (merged away, moved to another owner, a new term):
    /// its rates leave the store sums.
    pub fn forget(&mut self, c: &Cluster, region_id: u64) {
        if let Some(mut e) = self.regions.remove(&region_id) {
            uncount(c, &mut e);
        }
    }

    /// Forgets every region.
    pub fn clear(&mut self, c: &Cluster) {
        for (_, mut e) in self.regions.drain() {
            uncount(c, &mut e);
        }
    }
}

/// Where `e`'s region is now; a leader on another store than before is a leader move, dated
/// `now_ms` (PD's `justTransferLeader`).
fn place(e: &mut Entry, r: &Region, now_ms: u64) {
    let leader = r.leader_peer().map_or(0, |p| p.store_id);
    if e.leader != 0 && leader != 0 && leader != e.leader {
        e.stat.leader_moved_ms = Some(now_ms);
    }
    e.leader = leader;
    let stores = || r.peers.iter().take(MAX_PEERS).map(|p| p.store_id);
    // Most reports name the same stores: no allocation then.
    if !e.stores.iter().copied().eq(stores()) {
        e.stores = stores().collect();
    }
}

fn count(c: &Cluster, e: &mut Entry, min_degree: i32) {
    if e.stat.degree < min_degree {
        return;
    }
    shift(c, e, 1);
    e.counted = true;
}

fn uncount(c: &Cluster, e: &mut Entry) {
    if e.counted {
        shift(c, e, -1);
        e.counted = false;
    }
}

fn shift(c: &Cluster, e: &Entry, sign: i64) {
    let bytes = e.stat.byte_rate.round() as i64 * sign;
    let keys = e.stat.key_rate.round() as i64 * sign;
    for &s in e.stores.iter() {
        if let Some(load) = c.store(s) {
            load.budget.flow.add(false, bytes, keys);
        }
    }
    if let Some(load) = c.store(e.leader) {
        load.budget.flow.add(true, bytes, keys);
    }
}
