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
//! region (a write lands on every peer alike), and the peer sum stands for the store's
//! reported write rate.
//!
//! The candidates, as PD's `max-peer-number` bounds them (`rank`, PD's `filterHotPeers` and
//! `sortHotPeers`): of a store with more counted hot peers than `hot_max_peer_number`, only
//! that many are candidates for a move off it, the union of the hottest by the first priority
//! and by the second taken one from each in turn (as leader keys then bytes, as peer bytes
//! then keys: PD's priorities where stores report no query rates). Ranked at most once a
//! second (PD summarises the stores' hot peers once per `statisticsInterval`) and only when
//! the cache holds more regions than that, so a cache of few hot regions costs nothing. On the
//! server each core's shard ranks its own regions, so a store may have that many candidates
//! per core; the simulator's one cache ranks as PD does.
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
/// PD's hot scheduler `statisticsInterval`: how often the candidates are ranked again.
pub const RANK_INTERVAL_MS: u64 = 1000;

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
    /// When the candidates were last ranked (`rank`), and whether that left any out.
    ranked_ms: Option<u64>,
    left_out: bool,
}

fn is_hot(bytes_per_s: f64, keys_per_s: f64) -> bool {
    bytes_per_s >= MIN_HOT_WRITE_BYTES_PER_S || keys_per_s >= MIN_HOT_WRITE_KEYS_PER_S
}

impl HotCache {
    pub fn new() -> HotCache {
        HotCache::default()
    }

    /// Region `r`'s hot stat, if it is hot, its `top_peers` read against `r`'s peers.
    pub fn get(&self, r: &Region) -> Option<HotStat> {
        self.regions.get(&r.id).map(|e| stat_for(e, r))
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
            return Some(stat_for(e, r));
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
                    // Not ranked yet: a candidate, as every hot peer of a store with few.
                    top_leader: true,
                    top_peers: u16::MAX,
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
            let stat = stat_for(&e, r);
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
        Some(stat_for(e, r))
    }

    /// PD's `max-peer-number` (`filterHotPeers`): marks, of each store's counted hot peers,
    /// as leader and as peer, those the hot scheduler may move off it: all of them while the
    /// store has at most `hot_max_peer_number`, else that many by `sortHotPeers`. At most
    /// once per [`RANK_INTERVAL_MS`] of the caller's clock; the patrol calls it before a batch.
    pub fn rank(&mut self, c: &Cluster) {
        if self
            .ranked_ms
            .is_some_and(|t| c.now_ms >= t && c.now_ms - t < RANK_INTERVAL_MS)
        {
            return;
        }
        self.ranked_ms = Some(c.now_ms);
        let n = c.cfg.hot_max_peer_number;
        if std::mem::take(&mut self.left_out) {
            for e in self.regions.values_mut() {
                e.stat.top_leader = true;
                e.stat.top_peers = u16::MAX;
            }
        }
        // No store can have more hot peers than the cache has regions.
        if self.regions.len() <= n {
            return;
        }
        let min_degree = c.cfg.hot_region_cache_hits_threshold;
        let mut leaders: HashMap<u64, Vec<Ranked>> = HashMap::new();
        let mut peers: HashMap<u64, Vec<Ranked>> = HashMap::new();
        for (&id, e) in &self.regions {
            if e.stat.degree < min_degree {
                continue;
            }
            let ranked = |pos: usize| Ranked {
                id,
                pos,
                bytes: e.stat.byte_rate,
                keys: e.stat.key_rate,
            };
            if e.leader != 0 {
                leaders.entry(e.leader).or_default().push(ranked(0));
            }
            for (pos, &s) in e.stores.iter().enumerate() {
                peers.entry(s).or_default().push(ranked(pos));
            }
        }
        let mut out: Vec<(u64, Option<usize>)> = Vec::new();
        for list in leaders.into_values() {
            out.extend(left_out(list, n, Dim::Keys).map(|r| (r.id, None)));
        }
        for list in peers.into_values() {
            out.extend(left_out(list, n, Dim::Bytes).map(|r| (r.id, Some(r.pos))));
        }
        self.left_out = !out.is_empty();
        for (id, pos) in out {
            if let Some(e) = self.regions.get_mut(&id) {
                match pos {
                    None => e.stat.top_leader = false,
                    Some(p) => e.stat.top_peers &= !(1u16 << p),
                }
            }
        }
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
/// `now_ms` (PD's `justTransferLeader`). The ranks follow their stores: a rank as peer moves
/// with its store, and a new leader's store has not ranked the region yet.
fn place(e: &mut Entry, r: &Region, now_ms: u64) {
    let leader = r.leader_peer().map_or(0, |p| p.store_id);
    if e.leader != 0 && leader != 0 && leader != e.leader {
        e.stat.leader_moved_ms = Some(now_ms);
    }
    if leader != e.leader {
        e.stat.top_leader = true;
    }
    e.leader = leader;
    let stores = || r.peers.iter().take(MAX_PEERS).map(|p| p.store_id);
    // Most reports name the same stores: no allocation then.
    if !e.stores.iter().copied().eq(stores()) {
        let before = std::mem::take(&mut e.stores);
        e.stores = stores().collect();
        e.stat.top_peers = remask(&before, e.stat.top_peers, stores());
    }
}

/// `e`'s stat, its `top_peers` read against `r`'s peers.
fn stat_for(e: &Entry, r: &Region) -> HotStat {
    let top_peers = remask(
        &e.stores,
        e.stat.top_peers,
        r.peers.iter().take(MAX_PEERS).map(|p| p.store_id),
    );
    HotStat {
        top_peers,
        ..e.stat
    }
}

/// `mask` (a bit per store of `from`) as a bit per store of `to`: a store `from` does not
/// hold is not ranked yet, and a candidate.
fn remask(from: &[u64], mask: u16, to: impl Iterator<Item = u64>) -> u16 {
    if mask == u16::MAX {
        return mask;
    }
    to.enumerate()
        .fold(0, |out, (j, s)| match from.iter().position(|&f| f == s) {
            Some(k) if mask & (1 << k) == 0 => out,
            _ => out | (1 << j),
        })
}

/// One hot peer of a store, as ranked: its region, its place among the region's stores, its
/// rates.
struct Ranked {
    id: u64,
    pos: usize,
    bytes: f64,
    keys: f64,
}

#[derive(Clone, Copy, PartialEq)]
enum Dim {
    Bytes,
    Keys,
}

/// PD's `sortHotPeers` over one store's hot peers: sorted by `first` and by the other rate,
/// hottest first, the candidates are taken one from each list in turn until they are `n`;
/// returns those left out (none of a list of at most `n`). Equal rates go to the lower region
/// id first, where PD's sort leaves them in no set order.
fn left_out(list: Vec<Ranked>, n: usize, first: Dim) -> impl Iterator<Item = Ranked> {
    let mut inside = vec![list.len() <= n; list.len()];
    if list.len() > n {
        let by = |dim: Dim| {
            let rate = |r: &Ranked| if dim == Dim::Bytes { r.bytes } else { r.keys };
            let mut order: Vec<usize> = (0..list.len()).collect();
            order.sort_by(|&a, &b| {
                let (x, y) = (&list[a], &list[b]);
                rate(y).total_cmp(&rate(x)).then(x.id.cmp(&y.id))
            });
            order
        };
        let second = if first == Dim::Bytes {
            Dim::Keys
        } else {
            Dim::Bytes
        };
        let (mut one, mut two) = (by(first).into_iter(), by(second).into_iter());
        let mut taken = 0;
        let take = |from: &mut std::vec::IntoIter<usize>, inside: &mut [bool]| match from
            .find(|&i| !inside[i])
        {
            Some(i) => {
                inside[i] = true;
                true
            }
            None => false,
        };
        while taken < n {
            let mut more = false;
            if take(&mut one, &mut inside[..]) {
                taken += 1;
                more = true;
            }
            if taken < n && take(&mut two, &mut inside[..]) {
                taken += 1;
                more = true;
            }
            if !more {
                break;
            }
        }
    }
    list.into_iter()
        .zip(inside)
        .filter(|(_, inside)| !inside)
        .map(|(r, _)| r)
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
