//! The checks a step passes again, against the leader's latest report, before it is sent: the
//! safety rules (never two peers of a region on one store, never the leader's peer removed,
//! never fewer than two healthy voters) and PD's `CheckInProgress` of each step kind, with
//! PD's error text for a step found stale.
//!
//! Owns: the verdict on one step. Must not touch: the operator itself (the scheduler advances,
//! holds or cancels it on the verdict), budgets, I/O or the clock.

use super::cluster::{Cluster, RegionInput};
use super::merge;
use super::replica::may_remove;
use crate::placement::cancel_reason::CancelReason;
use crate::placement::operator::{Joint, Step};
use crate::placement::region::{Epoch, Peer, PeerRole};

/// Why a step was found stale, as PD's `operator is stale` line tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    /// The step's own check failed (PD's `CheckInProgress`): PD's error text.
    Step(&'static str),
    /// Another peer is on the store a learner was to be added to (PD's `AddLearner` check,
    /// whose error names them).
    PeerExists {
        existing: u64,
        store: u64,
        adding: u64,
    },
    /// The region's peers changed under the operator: its epoch now (PD's `latest-epoch`).
    Epoch(Epoch),
}

impl Stale {
    /// PD's error for a failed step check; none for a changed epoch, which PD logs by its
    /// numbers instead.
    pub fn error(&self) -> Option<String> {
        match *self {
            Stale::Step(error) => Some(error.to_string()),
            Stale::PeerExists {
                existing,
                store,
                adding,
            } => Some(format!(
                "peer {existing} has already existed in store {store}, \
                 the timeout is trying to add peer {adding} on the same store"
            )),
            Stale::Epoch(_) => None,
        }
    }
}

pub(super) enum Verdict {
    Send,
    /// Not now (a removal would leave too few healthy voters); the operator may time out.
    Hold,
    /// The step can never be made as planned, for PD's reason: `stale status` for a step
    /// whose peers are no longer as it needs them (PD's `CheckInProgress` failing), `epoch
    /// not match` for a merge whose source changed under it (PD's check of a merge's epoch);
    /// with what PD's `operator is stale` line says of it, where PD writes one.
    Cancel(CancelReason, Option<Stale>),
}

/// A step that can no longer be made as planned, with PD's error for it.
fn stale(error: &'static str) -> Verdict {
    Verdict::Cancel(CancelReason::StaleStatus, Some(Stale::Step(error)))
}

/// PD's error for a step to a store that no longer serves (its `validateStore`).
fn store_gone(c: &Cluster, store: u64) -> &'static str {
    if c.store(store).is_none() {
        "target store does not exist"
    } else {
        "target store is down"
    }
}

/// The safety rules, checked against the latest report before a step is sent.
pub(super) fn check_step(c: &Cluster, r: &RegionInput, step: &Step) -> Verdict {
    let peers = &r.region.peers;
    match step {
        Step::AddLearner(p) => {
            let taken = peers
                .iter()
                .find(|q| q.store_id == p.store_id && q.id != p.id);
            if let Some(q) = taken {
                Verdict::Cancel(
                    CancelReason::StaleStatus,
                    Some(Stale::PeerExists {
                        existing: q.id,
                        store: p.store_id,
                        adding: p.id,
                    }),
                )
            } else if !c.health(p.store_id).is_serving() {
                stale(store_gone(c, p.store_id))
            } else {
                Verdict::Send
            }
        }
        Step::PromoteLearner(p) => {
            if peers
                .iter()
                .any(|q| q.id == p.id && q.role == PeerRole::Learner)
            {
                Verdict::Send
            } else {
                stale("peer does not exist")
            }
        }
        // An incoming voter may take the lead inside a joint state, as PD moves it there.
        // PD writes its errors here as a list.
        Step::TransferLeader(p) => match peers.iter().find(|q| q.id == p.id) {
            None => stale("[peer does not existed]"),
            Some(q) if !q.role.votes_incoming() => stale("[peer already is a learner]"),
            Some(_) if !c.health(p.store_id).is_serving() => {
                if c.store(p.store_id).is_none() {
                    stale("[target store does not exist]")
                } else {
                    stale("[target store is down]")
                }
            }
            // Beyond PD, which would send it: a peer still catching up does not lead.
            Some(_) if r.pending_peers.contains(&p.id) => stale("[peer is pending]"),
            Some(_) => Verdict::Send,
        },
        // The leader checks the keys against its own range; a stale one is refused there.
        Step::Split(_) => Verdict::Send,
        // The target's part is never sent; it waits for the target's range to change.
        Step::Merge(m) if m.passive => Verdict::Hold,
        // Only a source whose peers sit where the target's do, all caught up, is merged. A
        // source whose range changed is dropped as PD's light check drops it (no stale line);
        // one whose peers changed, as PD's heartbeat check finds its epoch stale.
        Step::Merge(m) => {
            if r.region.start_key != m.source.start_key || r.region.end_key != m.source.end_key {
                Verdict::Cancel(CancelReason::EpochNotMatch, None)
            } else if !merge::peers_match(r.region, &m.target) {
                let latest = Stale::Epoch(r.region.epoch);
                Verdict::Cancel(CancelReason::EpochNotMatch, Some(latest))
            } else if !r.pending_peers.is_empty() {
                Verdict::Hold
            } else {
                Verdict::Send
            }
        }
        Step::JointEnter(j) => check_enter(c, r, j),
        // TiKV refuses to leave a joint state that demotes its leader: the leader moves first.
        Step::JointLeave(_) => match r.leader() {
            Some(l) if l.role == PeerRole::DemotingVoter => stale("cannot demote leader peer"),
            _ => Verdict::Send,
        },
        // The peer as it is now: a voter when planned, it may have been demoted to a learner
        // since (a joint change), and a learner's removal takes no vote away.
        Step::RemovePeer(p) => {
            let now = peers.iter().find(|q| q.id == p.id).unwrap_or(p);
            if Some(p.id) == r.region.leader {
                stale("cannot remove leader peer")
            } else if !may_remove(c, r, now) {
                Verdict::Hold
            } else {
                Verdict::Send
            }
        }
    }
}

/// Why a joint change can no longer be entered, in PD's words (`ChangePeerV2Enter`'s
/// `CheckInProgress`, promotions first): a learner to promote is there (or already incoming),
/// a voter to demote is there (or already demoting).
fn enter_error(peers: &[Peer], j: &Joint) -> Option<&'static str> {
    let role = |p: &Peer| {
        peers
            .iter()
            .find(|q| q.id == p.id && q.store_id == p.store_id)
            .map(|q| q.role)
    };
    let promote = j.promote.iter().find_map(|p| match role(p) {
        None => Some("peer does not exist"),
        Some(PeerRole::Learner | PeerRole::IncomingVoter) => None,
        Some(PeerRole::DemotingVoter) => Some("cannot promote a demoting voter"),
        Some(PeerRole::Voter) => Some("unexpected peer role"),
    });
    promote.or_else(|| {
        j.demote.iter().find_map(|p| match role(p) {
            None => Some("peer does not exist"),
            Some(PeerRole::Voter | PeerRole::DemotingVoter) => None,
            Some(PeerRole::IncomingVoter) => Some("cannot demote a incoming voter"),
            Some(PeerRole::Learner) => Some("unexpected peer role"),
        })
    })
}

/// Entering a joint state: the learners to promote are there and caught up, the voters to
/// demote are voters, and the incoming configuration keeps two healthy voters where the
/// region had two (the outgoing one is the region's voters as they are).
fn check_enter(c: &Cluster, r: &RegionInput, j: &Joint) -> Verdict {
    let peers = &r.region.peers;
    if let Some(error) = enter_error(peers, j) {
        return stale(error);
    }
    let healthy = |p: &Peer| c.health(p.store_id).is_serving() && !r.pending_peers.contains(&p.id);
    let incoming = peers
        .iter()
        .filter(|p| {
            let promoted = j.promote.iter().any(|q| q.id == p.id);
            let demoted = j.demote.iter().any(|q| q.id == p.id);
            promoted || (p.role.votes_incoming() && !demoted)
        })
        .filter(|p| healthy(p))
        .count();
    if r.healthy_voters(c) >= 2 && incoming < 2 {
        Verdict::Hold
    } else {
        Verdict::Send
    }
}
