//! The operators an operator of the cluster asks for by name (PD's `POST /operators`), checked
//! and planned as PD's handler (`pkg/schedule/handler`) and operator builder
//! (`pkg/schedule/operator/builder.go`) do: the same refusals, in the same order, and the
//! same description and kind flags, so that `GET /operators` and GetOperator show what PD
//! shows. The steps are Meridian's (a learner added then promoted, the leader moved off a peer
//! before it is removed), as PD builds them without joint consensus. New peers carry
//! [`NEW_PEER`] as their id until the caller gives them one; a region has at most one peer per
//! store, so a new peer is told apart by its store. A merge's target is checked from what its
//! own shard last saw ([`MergeTarget`]). Owns no operator state, limits or I/O.

use std::collections::BTreeMap;

use super::cluster::{Cluster, RegionInput};
use super::merge::{self, peers_match};
use super::plan::{Plan, NEW_PEER};
use crate::placement::operator::{MergeStep, OpKind, SplitPolicy, SplitStep, Step};
use crate::placement::region::{Peer, PeerRole, Region};
use crate::placement::store::StoreState;

/// PD's `storeUnhealthyDuration`: a store silent this long is refused as a target.
pub const STORE_UNHEALTHY_MS: u64 = 10 * 60 * 1000;

/// A role asked for a store in transfer-region (PD's `PeerRoleType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskedRole {
    Voter,
    Leader,
    Follower,
    Learner,
    /// A name PD does not know: a voter's peer, counted as neither voter nor leader.
    Other,
}

impl AskedRole {
    pub fn parse(name: &str) -> AskedRole {
        match name {
            "voter" => AskedRole::Voter,
            "leader" => AskedRole::Leader,
            "follower" => AskedRole::Follower,
            "learner" => AskedRole::Learner,
            _ => AskedRole::Other,
        }
    }

    fn peer_role(self) -> PeerRole {
        match self {
            AskedRole::Learner => PeerRole::Learner,
            _ => PeerRole::Voter,
        }
    }
}

/// One operator asked for by name, with its inputs as PD's handler reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminAsk {
    TransferLeader {
        store: u64,
    },
    /// Each store and its role (`None`: none given).
    TransferRegion {
        stores: BTreeMap<u64, Option<AskedRole>>,
    },
    TransferPeer {
        from: u64,
        to: u64,
    },
    AddPeer {
        store: u64,
    },
    AddLearner {
        store: u64,
    },
    RemovePeer {
        store: u64,
    },
    /// PD's split: at `keys` (USEKEY), or where the leader finds the middle (SCAN,
    /// APPROXIMATE; `keys` are not read).
    Split {
        policy: SplitPolicy,
        keys: Vec<Vec<u8>>,
    },
    /// PD's merge-region: this region (the source) into `target`.
    Merge {
        target: Box<MergeTarget>,
    },
}

/// A merge's target as the shard that holds it last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeTarget {
    pub region: Region,
    /// Its peers still catching up.
    pub pending: Vec<u64>,
    pub size_mib: u64,
    /// It runs an operator an admin one may not replace (the shard's rule, checked after
    /// the plan as PD's `addOperator` checks it).
    pub runs_admin: bool,
}

/// What an admin operator is to do, and how PD names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminPlan {
    pub plan: Plan,
    /// PD's description (`admin-transfer-leader`, ...).
    pub desc: &'static str,
    /// PD's kind flags, in PD's order (`admin,region,leader`).
    pub kind: &'static str,
}

/// Why an admin operator is refused, in PD's words (the HTTP layer adds PD's error codes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminRefused {
    #[error("region {0} not found")]
    RegionNotFound(u64),
    #[error("store {0} not found")]
    StoreNotFound(u64),
    #[error("store {0} has been removed")]
    StoreRemoved(u64),
    #[error("store {0} is unhealthy")]
    StoreUnhealthy(u64),
    /// A merge's region with a down, pending or missing peer, or a learner.
    #[error("region {0} has abnormal peer")]
    AbnormalPeer(u64),
    #[error("two regions are not adjacent")]
    NotAdjacent,
    /// The region runs an operator PD would not replace (another admin one, or a scatter), or
    /// the operator could not start.
    #[error("failed to add operator, maybe already have one")]
    AddOperator,
    /// The handler's and the builder's own refusals (`region has no voter in store 4`).
    #[error("{0}")]
    Build(String),
}

fn build(why: impl Into<String>) -> AdminRefused {
    AdminRefused::Build(why.into())
}

/// PD's `checkStoreState`: the store exists, is not a tombstone, and was heard from lately.
fn check_store(c: &Cluster, id: u64) -> Result<(), AdminRefused> {
    let Some(s) = c.store(id) else {
        return Err(AdminRefused::StoreNotFound(id));
    };
    if s.state == StoreState::Tombstone {
        return Err(AdminRefused::StoreRemoved(id));
    }
    if c.now_ms.saturating_sub(s.last_heartbeat_ms) > STORE_UNHEALTHY_MS {
        return Err(AdminRefused::StoreUnhealthy(id));
    }
    Ok(())
}

/// PD's `allowLeader` for a target that is not forced: the current leader's store, or a store
/// that takes new leaders.
fn may_lead(c: &Cluster, r: &RegionInput, p: &Peer) -> bool {
    p.role == PeerRole::Voter
        && (r.leader().is_some_and(|l| l.store_id == p.store_id)
            || (c.health(p.store_id).is_target() && !c.stores.is_evicting(p.store_id)))
}

fn new_peer(store: u64, role: PeerRole) -> Peer {
    Peer {
        id: NEW_PEER,
        store_id: store,
        role,
    }
}

/// PD's kind flags for steps: `admin`, then `region` if peers change, `leader` if the leader
/// moves.
fn kind_of(steps: &[Step]) -> &'static str {
    let region = steps
        .iter()
        .any(|s| matches!(s, Step::AddLearner(_) | Step::RemovePeer(_)));
    let leader = steps.iter().any(|s| matches!(s, Step::TransferLeader(_)));
    match (region, leader) {
        (true, true) => "admin,region,leader",
        (true, false) => "admin,region",
        (false, true) => "admin,leader",
        (false, false) => "admin",
    }
}

fn admin(desc: &'static str, steps: Vec<Step>) -> Result<AdminPlan, AdminRefused> {
    if steps.is_empty() {
        return Err(build("no operator step is built"));
    }
    Ok(AdminPlan {
        kind: kind_of(&steps),
        plan: Plan {
            kind: OpKind::Admin,
            steps,
            flow: 0,
        },
        desc,
    })
}

/// Checks `ask` against the region as last reported and the stores, as PD's handler and
/// builder check it, and plans it.
pub fn admin_plan(c: &Cluster, r: &RegionInput, ask: &AdminAsk) -> Result<AdminPlan, AdminRefused> {
    // PD checks a merge's regions before it builds anything.
    if let AdminAsk::Merge { target } = ask {
        return merge_plan(c, r, target);
    }
    let region = r.region;
    let on = |store: u64| region.peers.iter().find(|p| p.store_id == store);
    let leader_store = r.leader().map(|p| p.store_id);
    if leader_store.is_none() {
        return Err(build("cannot build operator for region with no leader"));
    }
    match ask {
        AdminAsk::TransferLeader { store } => {
            let Some(voter) = on(*store).filter(|p| p.role == PeerRole::Voter) else {
                return Err(build(format!("region has no voter in store {store}")));
            };
            if leader_store == Some(*store) {
                return admin("admin-transfer-leader", Vec::new());
            }
            if !may_lead(c, r, voter) {
                return Err(build(
                    "cannot create operator: target leader is not allowed",
                ));
            }
            admin(
                "admin-transfer-leader",
                vec![Step::TransferLeader(voter.clone())],
            )
        }
        AdminAsk::AddPeer { store } | AdminAsk::AddLearner { store } => {
            if on(*store).is_some() {
                return Err(build(format!("region already has peer in store {store}")));
            }
            check_store(c, *store)?;
            let learner = new_peer(*store, PeerRole::Learner);
            if matches!(ask, AdminAsk::AddLearner { .. }) {
                return admin("admin-add-learner", vec![Step::AddLearner(learner)]);
            }
            admin(
                "admin-add-peer",
                vec![
                    Step::AddLearner(learner.clone()),
                    Step::PromoteLearner(learner),
                ],
            )
        }
        AdminAsk::RemovePeer { store } => {
            let Some(old) = on(*store) else {
                return Err(build(format!("region has no peer in store {store}")));
            };
            let mut steps = Vec::with_capacity(2);
            if leader_store == Some(*store) {
                steps.push(Step::TransferLeader(leader_elsewhere(c, r, old, &[])?));
            } else if !r.voters().any(|p| p.id != old.id) {
                return Err(build("cannot create operator: target peers have no voter"));
            }
            steps.push(Step::RemovePeer(old.clone()));
            admin("admin-remove-peer", steps)
        }
        AdminAsk::TransferPeer { from, to } => {
            let Some(old) = on(*from) else {
                return Err(build(format!("region has no peer in store {from}")));
            };
            check_store(c, *to)?;
            if from == to {
                return admin("admin-move-peer", Vec::new());
            }
            let added = new_peer(*to, old.role);
            if let Some(there) = on(*to) {
                return Err(build(format!(
                    "cannot add peer {}: already have peer {}",
                    peer_text(&added),
                    peer_text(there)
                )));
            }
            let learner = new_peer(*to, PeerRole::Learner);
            let mut steps = vec![Step::AddLearner(learner.clone())];
            if old.role == PeerRole::Voter {
                steps.push(Step::PromoteLearner(learner));
            }
            if leader_store == Some(*from) {
                let promoted = new_peer(*to, PeerRole::Voter);
                steps.push(Step::TransferLeader(leader_elsewhere(
                    c,
                    r,
                    old,
                    &[promoted],
                )?));
            }
            steps.push(Step::RemovePeer(old.clone()));
            admin("admin-move-peer", steps)
        }
        AdminAsk::TransferRegion { stores } => transfer_region(c, r, stores),
        AdminAsk::Split { policy, .. } if *policy != SplitPolicy::UseKey => {
            let step = SplitStep {
                start_key: region.start_key.clone(),
                end_key: region.end_key.clone(),
                policy: *policy,
                keys: Vec::new(),
            };
            admin("admin-split-region", vec![Step::Split(Box::new(step))])
        }
        AdminAsk::Split { keys, .. } => {
            let mut keys: Vec<Vec<u8>> = keys
                .iter()
                .filter(|k| region.contains(k) && k.as_slice() != region.start_key.as_slice())
                .cloned()
                .collect();
            keys.sort_unstable();
            keys.dedup();
            if keys.is_empty() {
                return Err(build(format!(
                    "no split key lies inside region {}",
                    region.id
                )));
            }
            let step = SplitStep {
                start_key: region.start_key.clone(),
                end_key: region.end_key.clone(),
                policy: SplitPolicy::UseKey,
                keys,
            };
            admin("admin-split-region", vec![Step::Split(Box::new(step))])
        }
        AdminAsk::Merge { target } => merge_plan(c, r, target),
    }
}

/// PD's `AddMergeRegionOperator` and `CreateMergeRegionOperator`: both regions healthy and
/// fully replicated, touching, then the source's peers moved onto the target's stores (as
/// PD's builder sets them, each in the target's role) when they are elsewhere, then the merge.
/// The target's half of the pair is the caller's to start ([`MergeStep`] with `passive`).
fn merge_plan(c: &Cluster, r: &RegionInput, t: &MergeTarget) -> Result<AdminPlan, AdminRefused> {
    let target = RegionInput {
        region: &t.region,
        pending_peers: &t.pending,
        size_mib: t.size_mib,
        hot: None,
    };
    if !merge::healthy(c, r) {
        return Err(AdminRefused::AbnormalPeer(r.region.id));
    }
    if !merge::healthy(c, &target) {
        return Err(AdminRefused::AbnormalPeer(t.region.id));
    }
    let (s, t) = (r.region, &t.region);
    // An empty key is the key space's edge, never a meeting point: the first region and the
    // last do not touch.
    let after = !s.start_key.is_empty() && s.start_key == t.end_key;
    let before = !s.end_key.is_empty() && s.end_key == t.start_key;
    if !after && !before {
        return Err(AdminRefused::NotAdjacent);
    }
    let mut steps = Vec::new();
    if !peers_match(s, t) {
        let stores: BTreeMap<u64, Option<AskedRole>> = t
            .peers
            .iter()
            .map(|p| {
                let role = match p.role {
                    PeerRole::Learner => AskedRole::Learner,
                    _ => AskedRole::Voter,
                };
                (p.store_id, Some(role))
            })
            .collect();
        steps = transfer_region(c, r, &stores)?.plan.steps;
    }
    steps.push(Step::Merge(Box::new(MergeStep {
        source: s.clone(),
        target: t.clone(),
        passive: false,
    })));
    admin("admin-merge-region", steps)
}

/// A voter other than `leaving` to take the leadership before it goes: an old voter that may
/// lead first (PD's builder prefers keeping the old peers as leaders), else one of `added`.
fn leader_elsewhere(
    c: &Cluster,
    r: &RegionInput,
    leaving: &Peer,
    added: &[Peer],
) -> Result<Peer, AdminRefused> {
    let other_voters = r.voters().any(|p| p.id != leaving.id) || !added.is_empty();
    if !other_voters {
        return Err(build("cannot create operator: target peers have no voter"));
    }
    r.voters()
        .filter(|p| p.id != leaving.id)
        .find(|p| may_lead(c, r, p))
        .cloned()
        .or_else(|| {
            added
                .iter()
                .find(|p| p.role == PeerRole::Voter && c.health(p.store_id).is_target())
                .cloned()
        })
        .ok_or_else(|| build("fail to build operator: plan is empty, maybe no valid leader"))
}

/// PD's transfer-region: the region ends with exactly the stores asked for, each in its role.
/// Placement rules are on (as `/config/replicate` says), so PD wants every store's role.
fn transfer_region(
    c: &Cluster,
    r: &RegionInput,
    asked: &BTreeMap<u64, Option<AskedRole>>,
) -> Result<AdminPlan, AdminRefused> {
    if asked.values().any(Option::is_none) {
        return Err(build(
            "transfer region without peer role is not supported when placement rules enabled",
        ));
    }
    for store in asked.keys() {
        check_store(c, *store)?;
    }
    let roles: BTreeMap<u64, AskedRole> = asked
        .iter()
        .map(|(s, role)| (*s, role.unwrap_or(AskedRole::Voter)))
        .collect();
    let leaders: Vec<u64> = roles
        .iter()
        .filter(|(_, r)| **r == AskedRole::Leader)
        .map(|(s, _)| *s)
        .collect();
    if leaders.len() > 1 {
        return Err(build("region cannot have multiple leaders"));
    }
    // PD counts the roles `voter` and `leader` only, not `follower`.
    if !roles
        .values()
        .any(|r| matches!(r, AskedRole::Voter | AskedRole::Leader))
    {
        return Err(build("region need at least 1 voter or leader"));
    }
    let region = r.region;
    let on = |store: u64| region.peers.iter().find(|p| p.store_id == store);
    let mut steps = Vec::new();
    // New stores first: a learner, promoted when it is to vote.
    for (store, role) in &roles {
        if on(*store).is_none() {
            let learner = new_peer(*store, PeerRole::Learner);
            steps.push(Step::AddLearner(learner.clone()));
            if role.peer_role() == PeerRole::Voter {
                steps.push(Step::PromoteLearner(learner));
            }
        }
    }
    // Learners that are to vote.
    for p in &region.peers {
        let wanted = roles.get(&p.store_id).map(|r| r.peer_role());
        if p.role == PeerRole::Learner && wanted == Some(PeerRole::Voter) {
            steps.push(Step::PromoteLearner(p.clone()));
        }
    }
    // The voters at the end, as peers (new ones with their placeholder id).
    let voters_after: Vec<Peer> = roles
        .iter()
        .filter(|(_, r)| r.peer_role() == PeerRole::Voter)
        .map(|(s, _)| match on(*s) {
            Some(p) => Peer {
                role: PeerRole::Voter,
                ..p.clone()
            },
            None => new_peer(*s, PeerRole::Voter),
        })
        .collect();
    let Some(leader) = r.leader() else {
        return Err(build("cannot build operator for region with no leader"));
    };
    let mut leader_at = leader.store_id;
    let target = leaders
        .first()
        .and_then(|s| voters_after.iter().find(|p| p.store_id == *s));
    let leader_stays = voters_after
        .iter()
        .any(|p| p.store_id == leader.store_id && p.id == leader.id);
    if !leader_stays {
        // The leader's peer goes or stops voting: the leadership moves before any removal.
        let to = target
            .filter(|p| p.id != NEW_PEER || c.health(p.store_id).is_target())
            .cloned()
            .or_else(|| {
                voters_after
                    .iter()
                    .filter(|p| p.id != NEW_PEER)
                    .find(|p| may_lead(c, r, p))
                    .cloned()
            })
            .or_else(|| {
                voters_after
                    .iter()
                    .find(|p| c.health(p.store_id).is_target())
                    .cloned()
            })
            .ok_or_else(|| build("fail to build operator: plan is empty, maybe no valid leader"))?;
        leader_at = to.store_id;
        steps.push(Step::TransferLeader(to));
    }
    // Peers that go, and voters that are to be learners (removed, then added back as one).
    let mut relearn = Vec::new();
    for p in &region.peers {
        match roles.get(&p.store_id) {
            None => steps.push(Step::RemovePeer(p.clone())),
            Some(role) if p.role == PeerRole::Voter && role.peer_role() == PeerRole::Learner => {
                steps.push(Step::RemovePeer(p.clone()));
                relearn.push(new_peer(p.store_id, PeerRole::Learner));
            }
            Some(_) => {}
        }
    }
    steps.extend(relearn.into_iter().map(Step::AddLearner));
    if let Some(to) = target.filter(|p| p.store_id != leader_at) {
        if p_may_lead(c, r, to) {
            steps.push(Step::TransferLeader(to.clone()));
        } else {
            return Err(build(
                "cannot create operator: target leader is not allowed",
            ));
        }
    }
    admin("admin-move-region", steps)
}

/// [`may_lead`] for a peer that may not be the region's yet.
fn p_may_lead(c: &Cluster, r: &RegionInput, p: &Peer) -> bool {
    may_lead(c, r, p) || (p.id == NEW_PEER && c.health(p.store_id).is_target())
}

/// gogoproto's compact text of a `metapb.Peer`, as PD's error messages print one
/// (`id:12 store_id:2 role:Learner `).
pub fn peer_text(p: &Peer) -> String {
    let mut s = String::new();
    if p.id != 0 {
        s.push_str(&format!("id:{} ", p.id));
    }
    if p.store_id != 0 {
        s.push_str(&format!("store_id:{} ", p.store_id));
    }
    if p.role == PeerRole::Learner {
        s.push_str("role:Learner ");
    }
    s
}

#[cfg(test)]
mod tests;
