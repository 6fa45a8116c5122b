//! The hot-write scheduler (PD's hot-region scheduler for write: `balanceHotWriteRegions`
//! with its two solvers), decided one hot region at a time as the patrol passes it.
//! A store is a source when its write byte rate (as leader for a leader move, as any peer for a
//! peer move) is above `hot_src_tolerance_ratio` times the mean over the serving stores, and a
//! target while its rate times `hot_dst_tolerance_ratio` is below the mean; both counted with
//! the flow that hot operators in flight move (PD's pending influence: the source by the
//! lesser of now and after, the target by the greater). A move must leave the target cooler
//! than the source was, so no flow moves back and forth. The two flows are balanced apart, as
//! PD's write-leader and write-peer resource types are, and PD's draw picks the order
//! ([`peer_first`]): two passes in three try a peer move and then a leader transfer, the rest
//! only a leader transfer. A leader transfer goes from a store that is a source as leader to a
//! follower on a store cool as leader; a peer moves off a store that is a source as peer, to a
//! cool store chosen as balance-region chooses one (a target that keeps isolation, scores no
//! lower and has room in its add limit), and a leader's peer takes its lead along (PD's
//! move-leader). Only regions hot for
//! `hot_region_cache_hits_threshold` intervals move, only settled ones (as balance), and none
//! whose leader moved within that many report intervals (PD's cool-down after a transfer),
//! nor one whose hot operator ended within PD's zombie rounds (3 store report intervals after
//! a peer move, 3 region report intervals after a leader transfer). Of a source store's hot
//! regions only those its hot cache ranked among the store's hottest (PD's `max-peer-number`,
//! `HotStat::top_leader` and `top_peers`) move off it.
//!
//! Must not touch: the hot cache itself (`hot_cache` keeps the rates), the budgets (the
//! scheduler charges a started plan).

use super::budget::REGION_INFLUENCE;
use super::cluster::{Cluster, HotMove, HotStat, RegionInput};
use super::hot_cache::REPORT_INTERVAL_S;
use super::location::{distinct_score, isolated};
use super::plan::{Plan, NEW_PEER};
use super::replica::may_remove;
use super::select::{others, score_of};
use super::view::StoreLoad;
use crate::placement::operator::{OpKind, Pending};
use crate::placement::region::{Peer, PeerRole};

/// The mean write byte rates over the serving stores, as leader and as peer, and whether any
/// store is a source for a leader or a peer move: the cheap first test, O(stores), taken once
/// per patrol batch (and again after an operator starts or ends in it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HotLoads {
    pub mean_leader: f64,
    pub mean_peer: f64,
    pub leader_src: bool,
    pub peer_src: bool,
}

/// The store's write byte rate as leader (or peer): now, and with operators in flight done.
fn load(s: &StoreLoad, leader: bool) -> (f64, f64) {
    let now = s.budget.flow.bytes(leader) as f64;
    (now, now + s.budget.flow.pending_bytes(leader) as f64)
}

/// What a source store weighs: the lesser of now and after.
fn src_load(s: &StoreLoad, leader: bool) -> f64 {
    let (now, after) = load(s, leader);
    now.min(after)
}

/// What a target store weighs: the greater of now and after.
fn dst_load(s: &StoreLoad, leader: bool) -> f64 {
    let (now, after) = load(s, leader);
    now.max(after)
}

fn is_src(c: &Cluster, s: &StoreLoad, leader: bool, mean: f64) -> bool {
    mean > 0.0 && src_load(s, leader) > c.cfg.hot_src_tolerance_ratio * mean
}

fn is_dst(c: &Cluster, s: &StoreLoad, leader: bool, mean: f64) -> bool {
    dst_load(s, leader) * c.cfg.hot_dst_tolerance_ratio < mean
}

impl HotLoads {
    pub fn of(c: &Cluster) -> HotLoads {
        let (mut n, mut leader, mut peer) = (0usize, 0.0, 0.0);
        let serving = || {
            c.stores
                .iter()
                .filter(|s| s.health(c.now_ms, c.cfg).is_serving())
        };
        for s in serving() {
            n += 1;
            leader += s.budget.flow.bytes(true) as f64;
            peer += s.budget.flow.bytes(false) as f64;
        }
        let n = n.max(1) as f64;
        let (mean_leader, mean_peer) = (leader / n, peer / n);
        HotLoads {
            mean_leader,
            mean_peer,
            leader_src: serving().any(|s| is_src(c, s, true, mean_leader)),
            peer_src: serving().any(|s| is_src(c, s, false, mean_peer)),
        }
    }

    pub fn any(&self) -> bool {
        self.leader_src || self.peer_src
    }
}

/// hot-write for a region the caller found settled: a peer move or a leader transfer, in the
/// order [`peer_first`] draws.
pub fn hot_write(c: &Cluster, loads: &HotLoads, r: &RegionInput) -> Option<Plan> {
    let hot = r.hot?;
    if hot.degree < c.cfg.hot_region_cache_hits_threshold || cooling(c, hot) || pending(c, hot) {
        return None;
    }
    let rate = hot.byte_rate;
    let leader = || {
        (loads.leader_src && hot.top_leader)
            .then(|| move_leader(c, loads, r, rate))
            .flatten()
    };
    let peer = || {
        loads
            .peer_src
            .then(|| move_peer(c, loads, r, hot, rate))
            .flatten()
    };
    let plan = if peer_first(r.region.id, c.now_ms) {
        peer().or_else(leader)
    } else {
        leader()
    };
    plan.map(|mut p| {
        p.flow = rate.round() as u64;
        p
    })
}

/// PD's `schedulePeerPr`: the share, in hundredths, of hot-write passes that try a peer move
/// before a leader transfer. The others try only the leader transfer.
pub const PEER_FIRST_PERCENT: u64 = 66;

/// PD's draw between the two write solvers (`balanceHotWriteRegions`): with
/// [`PEER_FIRST_PERCENT`] a peer move is tried first and a leader transfer if none is found,
/// else only a leader transfer. Peers go first more often because a leader transfer cannot
/// lower a store's flow as peer, and a store hot as peer stays hot until a peer leaves it.
/// The draw is a hash of the region and the time rather than a generator's next number, so
/// the decision stays a pure function of its inputs (the simulator replays it from a seed,
/// and a test can pick a time for either answer); it changes every millisecond, so a region
/// the patrol passes again is drawn afresh.
pub fn peer_first(region_id: u64, now_ms: u64) -> bool {
    let (_, draw) = crate::entropy::splitmix64(region_id.rotate_left(32) ^ now_ms);
    draw % 100 < PEER_FIRST_PERCENT
}

/// PD's `IsNeedCoolDownTransferLeader`: a region whose leader moved less than the cache-hits
/// threshold's report intervals ago is left alone, by the leader and the peer moves alike, so
/// that its rates are measured where it now is before it moves again.
fn cooling(c: &Cluster, hot: HotStat) -> bool {
    let threshold = u64::try_from(c.cfg.hot_region_cache_hits_threshold).unwrap_or(0);
    let cool_ms = threshold * REPORT_INTERVAL_S * 1000;
    hot.leader_moved_ms
        .is_some_and(|t| c.now_ms.saturating_sub(t) < cool_ms)
}

/// PD's `max-zombie-rounds` (3): the report rounds a hot operator's region stays in
/// `regionPendings` after the operator ends.
pub const MAX_ZOMBIE_ROUNDS: u64 = 3;
/// PD's `StoreHeartBeatReportInterval` (s): the round of the flow as peer, which TiKV's store
/// heartbeats report.
pub const STORE_REPORT_INTERVAL_S: u64 = 10;

/// How long after a hot operator that moved `flow` ends its region is not picked again (PD's
/// `calcMaxZombieDur`): the flow as leader is the sum of the regions' reports, so its rounds
/// are region report intervals (3 x 60 s); the flow as peer TiKV's store reports, so its rounds
/// are store report intervals (3 x 10 s).
pub fn pending_ms(flow: HotMove) -> u64 {
    let round_s = match flow {
        HotMove::Leader => REPORT_INTERVAL_S,
        HotMove::Peer => STORE_REPORT_INTERVAL_S,
    };
    MAX_ZOMBIE_ROUNDS * round_s * 1000
}

/// Which flow the hot operator `op` moves: one that adds no peer only transfers the lead.
pub fn moved_flow(op: &Pending) -> HotMove {
    match op.adds_to() {
        Some(_) => HotMove::Peer,
        None => HotMove::Leader,
    }
}

/// PD's `regionPendings` after the operator ends (`summaryPendingInfluence` drops a region
/// only once `calcPendingInfluence` finds it ended `maxZombieDur` ago, and `filterHotPeers`
/// passes over a region it holds): a region whose hot operator ended less than
/// [`pending_ms`] ago is left alone, whether the operator was done, cancelled or timed out,
/// so that the stores' reports show where its flow now is before it moves again.
fn pending(c: &Cluster, hot: HotStat) -> bool {
    hot.hot_op_ended
        .is_some_and(|(flow, t)| c.now_ms.saturating_sub(t) < pending_ms(flow))
}

fn move_leader(c: &Cluster, loads: &HotLoads, r: &RegionInput, rate: f64) -> Option<Plan> {
    let leader = r.leader()?;
    let src = c.store(leader.store_id)?;
    if !is_src(c, src, true, loads.mean_leader) {
        return None;
    }
    let from = src_load(src, true);
    r.voters()
        .filter(|p| p.id != leader.id && r.is_healthy(c, p))
        .filter(|p| c.health(p.store_id).is_target() && !c.stores.is_evicting(p.store_id))
        .filter_map(|p| c.store(p.store_id).map(|s| (p, s)))
        .filter(|(_, s)| is_dst(c, s, true, loads.mean_leader))
        .map(|(p, s)| (p, dst_load(s, true)))
        .filter(|(_, to)| to + rate < from)
        .min_by(|a, b| {
            (a.1, a.0.store_id)
                .partial_cmp(&(b.1, b.0.store_id))
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .map(|(p, _)| Plan::transfer(OpKind::Hot, p))
}

fn move_peer(
    c: &Cluster,
    loads: &HotLoads,
    r: &RegionInput,
    hot: HotStat,
    rate: f64,
) -> Option<Plan> {
    let top = |p: &Peer| {
        let at = r.region.peers.iter().position(|q| q.id == p.id);
        at.is_some_and(|i| hot.top_peer(i))
    };
    let mut sources: Vec<(&Peer, f64)> = r
        .voters()
        .filter(|&p| top(p))
        .filter_map(|p| c.store(p.store_id).map(|s| (p, s)))
        .filter(|(_, s)| is_src(c, s, false, loads.mean_peer))
        .map(|(p, s)| (p, src_load(s, false)))
        .collect();
    sources.sort_by(|a, b| {
        (b.1, a.0.store_id)
            .partial_cmp(&(a.1, b.0.store_id))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    sources.into_iter().find_map(|(src, from)| {
        if !may_remove(c, r, src) {
            return None;
        }
        let to = coolest_target(c, loads, r, src, from, rate)?;
        // PD's move-leader (`createOperator` in `hot_region_solver.go`): the leader's peer
        // moves with its lead, so its flow as leader lands on the cool target too. Handing
        // the lead to a follower instead puts that flow on a store chosen by neither
        // dimension, and the leader flow piles up where no follower is cool enough to take
        // it back.
        let leader_to = (Some(src.id) == r.region.leader).then_some(Peer {
            id: NEW_PEER,
            store_id: to,
            role: PeerRole::Voter,
        });
        Some(Plan::move_peer(OpKind::Hot, src, to, leader_to.as_ref()))
    })
}

/// The coolest store that may take `src`'s place in `r`: a target holding no peer of it, that
/// keeps isolation, scores no lower than `src` and has a whole region's room in its add limit
/// (as balance-region's target), a hot target by the tolerance, and cooler after the move than
/// the source (`from`) was.
fn coolest_target(
    c: &Cluster,
    loads: &HotLoads,
    r: &RegionInput,
    src: &Peer,
    from: f64,
    rate: f64,
) -> Option<u64> {
    let rest = others(c, r, Some(src.store_id));
    let level = c.cfg.isolation_index();
    let min_score = score_of(c, r, src.store_id);
    let mut best: Option<(f64, u64)> = None;
    for s in c.stores.iter() {
        if !s.health(c.now_ms, c.cfg).is_target() || r.has_store(s.id) {
            continue;
        }
        if !is_dst(c, s, false, loads.mean_peer) {
            continue;
        }
        let to = dst_load(s, false);
        if to + rate >= from {
            continue;
        }
        if !isolated(rest.clone(), &s.location, level)
            || distinct_score(rest.clone(), &s.location) < min_score
        {
            continue;
        }
        if !s
            .budget
            .has(true, REGION_INFLUENCE, c.rate(s.id, true), c.now_ms)
        {
            continue;
        }
        if best.is_none_or(|(b, id)| (to, s.id) < (b, id)) {
            best = Some((to, s.id));
        }
    }
    best.map(|(_, id)| id)
}
