//! A decision before it is charged: the operator's kind and steps, with the new peer (if any)
//! not yet given an id. The checkers and balance make plans; `scheduler.rs` starts them.

use crate::placement::operator::{OpKind, Step};
use crate::placement::region::{Peer, PeerRole};

/// The id a planned new peer carries until it is given one.
pub const NEW_PEER: u64 = 0;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub kind: OpKind,
    pub steps: Vec<Step>,
    /// The write byte rate a hot-region plan moves; 0 for others.
    pub flow: u64,
}

impl Plan {
    /// Adds a learner on `store`, then promotes it.
    pub fn add_voter(kind: OpKind, store: u64) -> Plan {
        let p = Peer {
            id: NEW_PEER,
            store_id: store,
            role: PeerRole::Learner,
        };
        Plan {
            kind,
            steps: vec![Step::AddLearner(p.clone()), Step::PromoteLearner(p)],
            flow: 0,
        }
    }

    /// Replaces `old` with a new voter on `store`: add a learner, promote it, move the leader
    /// off `old` first if it leads (to `leader_to`), then remove `old`.
    pub fn move_peer(kind: OpKind, old: &Peer, store: u64, leader_to: Option<&Peer>) -> Plan {
        let mut plan = Plan::add_voter(kind, store);
        if let Some(to) = leader_to {
            plan.steps.push(Step::TransferLeader(to.clone()));
        }
        plan.steps.push(Step::RemovePeer(old.clone()));
        plan
    }

    /// Replaces `old` with a new voter on `store`, the leader moving to `leader_to` before
    /// anything else: the new peer's snapshot then comes from `leader_to`'s store. Then add a
    /// learner, promote it, remove `old`.
    pub fn move_peer_leader_first(kind: OpKind, old: &Peer, store: u64, leader_to: &Peer) -> Plan {
        let mut steps = vec![Step::TransferLeader(leader_to.clone())];
        steps.extend(Plan::add_voter(kind, store).steps);
        steps.push(Step::RemovePeer(old.clone()));
        Plan {
            kind,
            steps,
            flow: 0,
        }
    }

    /// Removes `old`, moving the leader to `leader_to` first if it leads.
    pub fn remove(kind: OpKind, old: &Peer, leader_to: Option<&Peer>) -> Plan {
        let mut steps = Vec::with_capacity(2);
        if let Some(to) = leader_to {
            steps.push(Step::TransferLeader(to.clone()));
        }
        steps.push(Step::RemovePeer(old.clone()));
        Plan {
            kind,
            steps,
            flow: 0,
        }
    }

    pub fn transfer(kind: OpKind, to: &Peer) -> Plan {
        Plan {
            kind,
            steps: vec![Step::TransferLeader(to.clone())],
            flow: 0,
        }
    }

    pub fn needs_new_peer(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s, Step::AddLearner(p) if p.id == NEW_PEER))
    }
}
