//! balance-region, balance-leader and evict-leader, decided one region at a time as the patrol
//! passes it (PD picks a source store and then a region on it; checking every region in turn
//! against its stores reaches the same moves, and needs no per-store region lists across
//! cores). A region moves off its busiest store when that store holds at least the tolerance
//! more regions than the least loaded target of its isolation domain, to a target whose
//! distinct score is no lower; a leader moves to the voter whose store leads fewest when the
//! gap is at least the tolerance. Counts include operators in flight, so targets fill once.
//! Only healthy regions move (every voter serving and caught up, no learner).

use super::cluster::{Cluster, RegionInput};
use super::plan::Plan;
use super::replica::may_remove;
use super::select::{leader_target, score_of, store_to_add};
use super::view::StoreLoad;
use crate::placement::operator::OpKind;
use crate::placement::region::{Peer, PeerRole, MAX_PEERS};

/// Whether `r` may be balanced: every voter serving and caught up, no learner, no peer
/// missing or extra. The caller checks it once for both balancers.
pub fn is_settled(c: &Cluster, r: &RegionInput) -> bool {
    r.region.peers.len() == c.cfg.max_replicas
        && r.region
            .peers
            .iter()
            .all(|p| p.role == PeerRole::Voter && r.is_healthy(c, p))
}

/// Which balancers could act on any region at this moment, judged from the stores alone
/// (O(stores)): balance-region needs a store above its domain's mean by the tolerance over the
/// domain's least loaded store, balance-leader a leader gap of the tolerance between two stores,
/// evict-leader a store being evicted. Each is the cheap first test the balancer itself makes of
/// a region's stores, taken over every store, so a `false` here means the balancer would find
/// nothing in any region: skipping it changes no decision. The patrol asks this once per batch
/// and again after any operator starts or ends, as those move the counts it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sources {
    pub region: bool,
    pub leader: bool,
    pub evict: bool,
}

impl Sources {
    pub fn of(c: &Cluster) -> Sources {
        let region = c.stores.iter().any(|s| {
            let mean = s.domain_mean_regions;
            (s.regions() as f64) > mean
                && s.regions() - (s.domain_min_regions as i64) >= tolerance(c, mean, 2)
        });
        let (least, most) = c
            .stores
            .iter()
            .map(StoreLoad::leaders)
            .fold((i64::MAX, i64::MIN), |(lo, hi), n| (lo.min(n), hi.max(n)));
        let leader = most > least
            && most - least
                >= tolerance(
                    c,
                    c.stores.mean_leaders(),
                    c.cfg.leader_balance_threshold.max(2),
                );
        Sources {
            region,
            leader,
            evict: !c.stores.evicting().is_empty(),
        }
    }
}

/// The least gap that makes a move worth it, given a mean.
fn tolerance(c: &Cluster, mean: f64, least: u64) -> i64 {
    ((mean * c.cfg.tolerant_ratio).ceil() as i64).max(least as i64)
}

/// evict-leader: the leader leaves a store being evicted.
pub fn evict_leader(c: &Cluster, r: &RegionInput) -> Option<Plan> {
    let leader = r.leader()?;
    if !c.stores.is_evicting(leader.store_id) {
        return None;
    }
    let to = leader_target(c, r, leader.store_id)?;
    Some(Plan::transfer(OpKind::Leader, to))
}

/// balance-leader, for a region [`is_settled`].
pub fn balance_leader(c: &Cluster, r: &RegionInput) -> Option<Plan> {
    let leader = r.leader()?;
    let from = c.store(leader.store_id)?;
    let to = leader_target(c, r, leader.store_id)?;
    let to_load = c.store(to.store_id)?;
    let tol = tolerance(
        c,
        c.stores.mean_leaders(),
        c.cfg.leader_balance_threshold.max(2),
    );
    (from.leaders() - to_load.leaders() >= tol).then(|| Plan::transfer(OpKind::Leader, to))
}

/// balance-region: each voter is a candidate source, busiest first (stores of different
/// domains hold different counts, and a peer only moves within its own); for a region
/// [`is_settled`].
pub fn balance_region(c: &Cluster, r: &RegionInput) -> Option<Plan> {
    let mut sources: [Option<(&Peer, &StoreLoad)>; MAX_PEERS] = [None; MAX_PEERS];
    let mut n = 0;
    for p in r.voters() {
        if let (Some(s), Some(slot)) = (c.store(p.store_id), sources.get_mut(n)) {
            *slot = Some((p, s));
            n += 1;
        }
    }
    let sources = &mut sources[..n];
    sources.sort_by_key(|e| e.map(|(p, s)| (std::cmp::Reverse(s.regions()), p.store_id)));
    sources
        .iter()
        .flatten()
        .find_map(|(src, load)| move_from(c, r, src, load))
}

/// Moves a peer off a store above its domain's mean onto one below it, with at least the
/// tolerance between them: a store between the two neither gives nor takes, so no peer moves
/// twice on the way to the mean.
fn move_from(c: &Cluster, r: &RegionInput, src: &Peer, load: &StoreLoad) -> Option<Plan> {
    let mean = load.domain_mean_regions;
    let tol = tolerance(c, mean, 2);
    // Cheap first: the store is not above the mean, or nothing in its domain is far enough below.
    if (load.regions() as f64) <= mean || load.regions() - (load.domain_min_regions as i64) < tol {
        return None;
    }
    if !may_remove(c, r, src) {
        return None;
    }
    let (to, _) = store_to_add(c, r, Some(src.store_id), score_of(c, r, src.store_id))?;
    let to_load = c.store(to)?;
    if load.regions() - to_load.regions() < tol || to_load.regions() as f64 >= mean {
        return None;
    }
    let leader_to = if Some(src.id) == r.region.leader {
        Some(leader_target(c, r, src.store_id)?)
    } else {
        None
    };
    Some(Plan::move_peer(OpKind::Region, src, to, leader_to))
}
