//! The merge checker (PD's `MergeChecker` and `CreateMergeRegionOperator`): a region small in
//! both size and keys, healthy and fully replicated, not split lately, is merged into an
//! adjacent region: the next one if it may be a target, the previous one instead when it is
//! smaller (or the only one), unless merges go one way. If the two regions' peers are not on
//! the same stores, the source's peers first move to the target's stores (PD's `matchPeers`);
//! then the source is sent the merge. The target gets an operator of its own that is never
//! sent, keeping other operators off it until its range changes.
//!
//! Reads the neighbours through [`MergeInput`], which the caller fills from its own region
//! map; must not touch the range index, the caller's slots or the clock.

use super::cluster::{Cluster, RegionInput};
use super::plan::{Plan, NEW_PEER};
use crate::placement::operator::{MergeStep, OpKind, Step};
use crate::placement::region::{Peer, PeerRole, Region};

const KIND: OpKind = OpKind::Merge;

/// PD's `maxTargetRegionSize` (MiB) and `maxTargetRegionFactor`: a target larger than the
/// larger of this and four times TiKV's region-max-size is not merged into.
const MAX_TARGET_MIB: u64 = 500;
const MAX_TARGET_FACTOR: u64 = 4;
/// TiKV's default region-max-size and region-split-size (MiB), and their key counterparts,
/// as PD's store config assumes them when a store reports none.
pub const REGION_MAX_MIB: u64 = 144;
pub const REGION_SPLIT_MIB: u64 = 96;
pub const REGION_MAX_KEYS: u64 = 1_440_000;
pub const REGION_SPLIT_KEYS: u64 = 960_000;

/// Which neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Prev,
    Next,
}

/// A neighbour as last reported.
#[derive(Clone, Copy)]
pub struct Adjacent<'a> {
    pub input: RegionInput<'a>,
    pub keys: u64,
    /// It has an operator already (PD would refuse a second one on it).
    pub busy: bool,
    /// It split (or was made by a split) within split-merge-interval.
    pub recently_split: bool,
}

/// A neighbour as last reported, owned for one call: what the server's shards and the
/// simulator read from their region maps, lent to the checker as an [`Adjacent`].
pub struct Neighbour {
    pub region: Region,
    pub size_mib: u64,
    pub keys: u64,
    pub busy: bool,
}

impl Neighbour {
    pub fn adjacent(&self) -> Adjacent<'_> {
        Adjacent {
            input: RegionInput {
                region: &self.region,
                pending_peers: &[],
                size_mib: self.size_mib,
                hot: None,
            },
            keys: self.keys,
            busy: self.busy,
            // The split record is the region's own (its entry), checked when it is the source;
            // a neighbour new from a split is recorded the same way.
            recently_split: false,
        }
    }
}

/// A region's neighbours, before and after (none where the caller has none to offer).
#[derive(Default)]
pub struct Neighbours(pub [Option<Neighbour>; 2]);

impl Neighbours {
    /// The neighbour on side `s`, as the checker reads it ([`MergeInput::adjacent`]).
    pub fn adjacent(&self, s: Side) -> Option<Adjacent<'_>> {
        let i = match s {
            Side::Prev => 0,
            Side::Next => 1,
        };
        self.0[i].as_ref().map(Neighbour::adjacent)
    }
}

/// What the merge checker needs beyond the region itself.
pub struct MergeInput<'a> {
    /// The region's approximate key count.
    pub keys: u64,
    pub recently_split: bool,
    /// When this scheduler began (its leader term): no merge within split-merge-interval of
    /// it, as PD's checker waits after start for the split records it does not have.
    pub started_ms: u64,
    /// The region right before (`Prev`) or after (`Next`) the checked one, if the caller has
    /// it.
    pub adjacent: &'a dyn Fn(Side) -> Option<Adjacent<'a>>,
}

/// A merge decided: the source's operator (match peers, then merge) and the target's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergePlan {
    pub source: Plan,
    pub target_id: u64,
    pub target: Plan,
}

/// The merge `r` should make, if any.
pub fn check(c: &Cluster, r: &RegionInput, m: &MergeInput) -> Option<MergePlan> {
    let cfg = c.cfg;
    if cfg.max_merge_region_size_mib == 0
        || c.now_ms < m.started_ms.saturating_add(cfg.split_merge_interval_ms)
        || m.recently_split
        || r.leader().is_none()
        || r.size_mib > cfg.max_merge_region_size_mib
        || m.keys > cfg.max_merge_region_keys
        || !healthy(c, r)
    {
        return None;
    }
    let next = (m.adjacent)(Side::Next).filter(|a| may_target(c, r, a));
    let prev = if cfg.enable_one_way_merge {
        None
    } else {
        (m.adjacent)(Side::Prev).filter(|a| may_target(c, r, a))
    };
    let target = match (prev, next) {
        (Some(p), Some(n)) if p.input.size_mib < n.input.size_mib => p,
        (_, Some(n)) => n,
        (Some(p), None) => p,
        (None, None) => return None,
    };
    let max_target = (REGION_MAX_MIB * MAX_TARGET_FACTOR).max(MAX_TARGET_MIB);
    if target.input.size_mib > max_target
        || merges_again(
            target.input.size_mib + r.size_mib,
            cfg.max_merge_region_size_mib,
            REGION_MAX_MIB,
            REGION_SPLIT_MIB,
        )
        || merges_again(
            target.keys + m.keys,
            cfg.max_merge_region_keys,
            REGION_MAX_KEYS,
            REGION_SPLIT_KEYS,
        )
    {
        return None;
    }
    let t = target.input.region;
    let mut steps = if peers_match(r.region, t) {
        Vec::new()
    } else {
        match_peers(c, r, t)?
    };
    let step = |passive| {
        Step::Merge(Box::new(MergeStep {
            source: r.region.clone(),
            target: t.clone(),
            passive,
        }))
    };
    steps.push(step(false));
    Some(MergePlan {
        source: Plan {
            kind: KIND,
            steps,
            flow: 0,
        },
        target_id: t.id,
        target: Plan {
            kind: KIND,
            steps: vec![step(true)],
            flow: 0,
        },
    })
}

/// PD's store-config check: the merged region would be split again, its smallest part small
/// enough to merge again (the two would loop).
fn merges_again(total: u64, merge_max: u64, region_max: u64, split: u64) -> bool {
    if total < region_max || split == 0 {
        return false;
    }
    let small = total % split;
    small != 0 && small <= merge_max
}

/// No pending or down peer, exactly `max_replicas` voters and no learner (PD's
/// `IsRegionHealthy` and `IsRegionReplicated`).
pub(super) fn healthy(c: &Cluster, r: &RegionInput) -> bool {
    r.pending_peers.is_empty()
        && r.region
            .peers
            .iter()
            .all(|p| p.role == PeerRole::Voter && c.health(p.store_id).is_serving())
        && r.region.peers.len() == c.cfg.max_replicas
}

/// PD's `checkTarget`.
fn may_target(c: &Cluster, r: &RegionInput, a: &Adjacent) -> bool {
    let (s, t) = (r.region, a.input.region);
    let touching = (!s.end_key.is_empty() && s.end_key == t.start_key)
        || (!t.end_key.is_empty() && t.end_key == s.start_key);
    touching
        && !a.busy
        && !a.recently_split
        && t.leader.is_some()
        && peer_stores_ok(c, s, t)
        && healthy(c, &a.input)
}

/// A target peer on a store that is unknown or being drained, where the source has none,
/// would bring a new peer there (PD's `checkPeerStore`).
fn peer_stores_ok(c: &Cluster, source: &Region, target: &Region) -> bool {
    target.peers.iter().all(|p| {
        let known = c.store(p.store_id).is_some() && !c.health(p.store_id).is_removing();
        known || source.peers.iter().any(|q| q.store_id == p.store_id)
    })
}

/// Whether `a`'s and `b`'s peers are on the same stores with the same roles (PD's
/// `isRegionMatch`): the one shape TiKV merges.
pub fn peers_match(a: &Region, b: &Region) -> bool {
    a.peers.len() == b.peers.len()
        && a.peers.iter().all(|p| {
            b.peers
                .iter()
                .any(|q| q.store_id == p.store_id && q.role == p.role)
        })
}

/// Steps that move `r`'s peers onto `target`'s stores: a voter added on each store the target
/// has and `r` lacks, the leader moved to a kept (or new) voter if its store is not the
/// target's, then every peer on other stores removed. Each new peer carries [`NEW_PEER`]
/// until it is given an id (one per store).
fn match_peers(c: &Cluster, r: &RegionInput, target: &Region) -> Option<Vec<Step>> {
    let adds: Vec<u64> = target
        .peers
        .iter()
        .map(|p| p.store_id)
        .filter(|s| !r.has_store(*s))
        .collect();
    if adds.iter().any(|s| !c.health(*s).is_target()) {
        return None;
    }
    let keeps = |p: &Peer| target.peers.iter().any(|q| q.store_id == p.store_id);
    let mut steps = Vec::new();
    for &store in &adds {
        let p = Peer {
            id: NEW_PEER,
            store_id: store,
            role: PeerRole::Learner,
        };
        steps.push(Step::AddLearner(p.clone()));
        steps.push(Step::PromoteLearner(p));
    }
    let leader = r.leader()?;
    if !keeps(leader) {
        let to = r
            .voters()
            .find(|p| keeps(p) && r.is_healthy(c, p))
            .cloned()
            .or_else(|| {
                adds.first().map(|&store_id| Peer {
                    id: NEW_PEER,
                    store_id,
                    role: PeerRole::Voter,
                })
            })?;
        steps.push(Step::TransferLeader(to));
    }
    for p in r.region.peers.iter().filter(|p| !keeps(p)) {
        steps.push(Step::RemovePeer(p.clone()));
    }
    Some(steps)
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
