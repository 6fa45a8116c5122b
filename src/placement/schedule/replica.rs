//! The replica and location checkers (PD's `ReplicaChecker` and its location replacement):
//! keep `max_replicas` voters, on stores that serve, as well separated as the stores allow.
//! In order: a region left in a joint state leaves it (PD's joint state checker); an orphaned learner is promoted or removed; a voter on a Down, Tombstone,
//! unknown or Offline store is replaced; a missing voter is added; an extra one is removed;
//! the worst-placed voter moves where its distinct score is higher. Every plan keeps two
//! healthy voters and never removes the leader's peer without moving the leader first. A
//! replacement whose leader is on a store being drained moves the leader to a healthy follower
//! before anything else, so the new peer's snapshot does not come from the store that leaves.

use super::cluster::{Cluster, RegionInput};
use super::plan::Plan;
use super::select::{best_score, leader_target, score_of, store_to_add};
use crate::placement::operator::{Joint, OpKind, Step};
use crate::placement::region::{Peer, PeerRole};

const KIND: OpKind = OpKind::Replica;

/// The repair `r` needs, if any.
/// `thorough` adds the location checker, whose search costs a pass over the stores.
pub fn check(c: &Cluster, r: &RegionInput, thorough: bool) -> Option<Plan> {
    if r.region.peers.iter().any(|p| p.role.is_joint()) {
        return leave_joint(c, r);
    }
    let max = c.cfg.max_replicas;
    let voters = r.voters().count();
    // Without a quorum of healthy voters no conf change can commit: nothing to do.
    if r.healthy_voters(c) < voters / 2 + 1 {
        return None;
    }
    if let Some(learner) = r.region.peers.iter().find(|p| p.role == PeerRole::Learner) {
        let health = c.health(learner.store_id);
        if voters < max && health.is_target() && !r.pending_peers.contains(&learner.id) {
            return Some(Plan {
                kind: KIND,
                steps: vec![crate::placement::operator::Step::PromoteLearner(
                    learner.clone(),
                )],
                flow: 0,
            });
        }
        if voters >= max || health.must_drain() {
            return Some(Plan::remove(KIND, learner, None));
        }
        // A learner still catching up, or on a Disconnected store: wait for it.
        return None;
    }
    if r.voters().any(|p| c.health(p.store_id).must_drain()) {
        // PD's order: a peer on a store that is gone before one on a store being drained, and
        // one that cannot be replaced yet (say, it leads and no other voter may take the lead)
        // leaves the next its turn instead of holding the region up.
        let mut gone: Vec<&Peer> = r
            .voters()
            .filter(|p| c.health(p.store_id).must_drain())
            .collect();
        gone.sort_by_key(|p| (c.health(p.store_id).is_serving(), p.store_id));
        return gone.into_iter().find_map(|p| replace(c, r, p, voters));
    }
    if voters < max {
        let (store, _) = store_to_add(c, r, None, f64::MIN)?;
        return Some(Plan::add_voter(KIND, store));
    }
    if voters > max {
        return remove_extra(c, r);
    }
    if thorough {
        return improve_location(c, r);
    }
    None
}

/// Replaces a voter on a store that is gone or going.
fn replace(c: &Cluster, r: &RegionInput, gone: &Peer, voters: usize) -> Option<Plan> {
    let leads = Some(gone.id) == r.region.leader;
    let leader_to = if leads {
        Some(leader_target(c, r, gone.store_id)?)
    } else {
        None
    };
    match store_to_add(c, r, Some(gone.store_id), f64::MIN) {
        Some((store, _)) => Some(replacement(c, r, gone, store, leader_to)),
        // Nowhere to put a replacement: an extra voter may still simply go.
        None if voters > c.cfg.max_replicas && may_remove(c, r, gone) => {
            Some(Plan::remove(KIND, gone, leader_to))
        }
        None => None,
    }
}

/// Moves `gone` to `store`. The new peer's snapshot comes from the leader's store: a leader on
/// a store being drained moves to a healthy follower before the add, as PD's operator builder
/// prefers an Up store as the leader before an add (to keep snapshots off offline stores, which
/// would otherwise send the snapshots of every region they lead). Any other leader of `gone`
/// (`leader_to` set) moves only before the removal.
fn replacement(
    c: &Cluster,
    r: &RegionInput,
    gone: &Peer,
    store: u64,
    leader_to: Option<&Peer>,
) -> Plan {
    let draining = r
        .leader()
        .is_some_and(|l| c.health(l.store_id).is_removing());
    let to = leader_to.or_else(|| {
        draining
            .then(|| leader_target(c, r, gone.store_id))
            .flatten()
    });
    match to {
        Some(to) if draining => Plan::move_peer_leader_first(KIND, gone, store, to),
        to => Plan::move_peer(KIND, gone, store, to),
    }
}

/// Whether removing `p` leaves at least two healthy voters (or `p` is not one).
/// PD's joint state checker: a region left in a joint state (its operator lost, say to a
/// leader change) leaves it, its leader first moved off a demoting voter to a serving
/// incoming-config voter, since TiKV cannot leave with its leader demoted.
fn leave_joint(c: &Cluster, r: &RegionInput) -> Option<Plan> {
    let peers = &r.region.peers;
    let of = |role: PeerRole| peers.iter().filter(move |p| p.role == role).cloned();
    let joint = Joint {
        promote: of(PeerRole::IncomingVoter).collect(),
        demote: of(PeerRole::DemotingVoter).collect(),
    };
    let mut steps = Vec::with_capacity(2);
    if r.leader()
        .is_some_and(|l| l.role == PeerRole::DemotingVoter)
    {
        let to = peers.iter().find(|p| {
            p.role.votes_incoming()
                && c.health(p.store_id).is_serving()
                && !r.pending_peers.contains(&p.id)
        })?;
        steps.push(Step::TransferLeader(to.clone()));
    }
    steps.push(Step::JointLeave(Box::new(joint)));
    Some(Plan {
        kind: KIND,
        steps,
        flow: 0,
    })
}

pub fn may_remove(c: &Cluster, r: &RegionInput, p: &Peer) -> bool {
    !r.is_healthy(c, p) || r.healthy_voters(c) > 2
}

fn remove_extra(c: &Cluster, r: &RegionInput) -> Option<Plan> {
    // The worst voter: unhealthy first, then the least separated, then the busiest store.
    let worst = r
        .voters()
        .filter(|p| may_remove(c, r, p))
        .map(|p| {
            let busy = c.store(p.store_id).map_or(i64::MAX, |s| s.regions());
            (r.is_healthy(c, p), score_of(c, r, p.store_id), -busy, p)
        })
        .min_by(|a, b| {
            (a.0, a.1, a.2, a.3.store_id)
                .partial_cmp(&(b.0, b.1, b.2, b.3.store_id))
                .unwrap_or(std::cmp::Ordering::Equal)
        })?
        .3;
    let leader_to = if Some(worst.id) == r.region.leader {
        Some(leader_target(c, r, worst.store_id)?)
    } else {
        None
    };
    Some(Plan::remove(KIND, worst, leader_to))
}

/// Moves the worst-separated voter where it scores higher (PD's location replacement).
fn improve_location(c: &Cluster, r: &RegionInput) -> Option<Plan> {
    if c.cfg.location_labels.is_empty() {
        return None;
    }
    let (worst, score) = r
        .voters()
        .map(|p| (p, score_of(c, r, p.store_id)))
        .min_by(|a, b| {
            (a.1, a.0.store_id)
                .partial_cmp(&(b.1, b.0.store_id))
                .unwrap_or(std::cmp::Ordering::Equal)
        })?;
    if score >= best_score(c, r) {
        return None;
    }
    let (store, better) = store_to_add(c, r, Some(worst.store_id), score)?;
    if better <= score {
        return None;
    }
    let leader_to = if Some(worst.id) == r.region.leader {
        Some(leader_target(c, r, worst.store_id)?)
    } else {
        None
    };
    Some(Plan::move_peer(KIND, worst, store, leader_to))
}
