//! The four safety rules as an independent check of one step against the region it is applied
//! to, for the simulator and the property tests (the scheduler's own guards are in
//! `scheduler.rs`; this must not share them, so that a broken guard is caught): a step must not
//! leave fewer than two healthy voters where there were at least two (in a joint state, in the
//! incoming and the outgoing configuration both); must not put two peers
//! of a region on one store; must not remove the leader's peer, nor leave a joint state that
//! demotes it. The fourth rule (limits and
//! caps) is counted by whoever sees operators start, over time.

use crate::placement::operator::Operator;
use crate::placement::region::{Peer, PeerRole, Region};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    FewerThanTwoHealthyVoters,
    TwoPeersOnOneStore,
    RemovesLeader,
    PastLimit,
    /// A merge sent while the source's peers are not where the target's are.
    MergePeersDiffer,
    /// A joint state left while its leader is a demoting voter (TiKV refuses it; the leader
    /// moves first).
    DemotesLeader,
}

/// `region` after the leader carries out `op`, as TiKV would.
pub fn apply(region: &Region, op: &Operator) -> Region {
    let mut r = region.clone();
    match op {
        Operator::AddPeer(p) => match r.peers.iter_mut().find(|q| q.id == p.id) {
            Some(q) => q.role = p.role,
            None => r.peers.push(p.clone()),
        },
        Operator::RemovePeer(p) => r.peers.retain(|q| q.id != p.id),
        Operator::TransferLeader(p) => r.leader = Some(p.id),
        // The split region keeps its peers; the new regions report themselves. A merge
        // leaves the source's peers as they are until the source is gone.
        Operator::Split(_) | Operator::Merge(_) => {}
        // Leave the joint state: the incoming voters vote, the demoting ones learn.
        Operator::ChangePeerV2(changes) if changes.is_empty() => {
            for q in &mut r.peers {
                q.role = match q.role {
                    PeerRole::IncomingVoter => PeerRole::Voter,
                    PeerRole::DemotingVoter => PeerRole::Learner,
                    role => role,
                };
            }
        }
        // One change is made at once, as raft's simple conf change; more enter a joint state.
        Operator::ChangePeerV2(changes) => {
            let simple = changes.len() == 1;
            for ch in changes.iter() {
                if let Some(q) = r.peers.iter_mut().find(|q| q.id == ch.id) {
                    q.role = match (ch.role, simple) {
                        (PeerRole::Voter, true) => PeerRole::Voter,
                        (PeerRole::Voter, false) => PeerRole::IncomingVoter,
                        (_, true) => PeerRole::Learner,
                        (_, false) => PeerRole::DemotingVoter,
                    };
                }
            }
        }
    }
    r
}

/// The first rule `op` breaks on `region`; `healthy` says whether a voter serves and has
/// caught up.
pub fn check(region: &Region, op: &Operator, healthy: &dyn Fn(&Peer) -> bool) -> Option<Rule> {
    if let Operator::Merge(target) = op {
        return check_merge(region, target);
    }
    if let Operator::RemovePeer(p) = op {
        if region.leader == Some(p.id) {
            return Some(Rule::RemovesLeader);
        }
    }
    if matches!(op, Operator::ChangePeerV2(c) if c.is_empty()) {
        let leader = region.peers.iter().find(|p| Some(p.id) == region.leader);
        if leader.is_some_and(|l| l.role == PeerRole::DemotingVoter) {
            return Some(Rule::DemotesLeader);
        }
    }
    let after = apply(region, op);
    if healthy_quorum(region, healthy) >= 2 && healthy_quorum(&after, healthy) < 2 {
        return Some(Rule::FewerThanTwoHealthyVoters);
    }
    for (i, p) in after.peers.iter().enumerate() {
        if after.peers[..i].iter().any(|q| q.store_id == p.store_id) {
            return Some(Rule::TwoPeersOnOneStore);
        }
    }
    None
}

/// The healthy voters of `region`'s weaker configuration: in a joint state a change commits
/// only with a quorum of both the incoming and the outgoing voters, so each must keep two;
/// outside it, both are the region's voters.
pub fn healthy_quorum(region: &Region, healthy: &dyn Fn(&Peer) -> bool) -> usize {
    let count = |votes: fn(PeerRole) -> bool| {
        region
            .peers
            .iter()
            .filter(|p| votes(p.role) && healthy(p))
            .count()
    };
    count(PeerRole::votes_incoming).min(count(PeerRole::votes_outgoing))
}

/// A merge of `source` into `target` (each as it stands) breaks a rule unless every peer of
/// one has a peer of the same role on the same store in the other.
pub fn check_merge(source: &Region, target: &Region) -> Option<Rule> {
    let covered = |a: &Region, b: &Region| {
        a.peers.iter().all(|p| {
            b.peers
                .iter()
                .any(|q| q.store_id == p.store_id && q.role == p.role)
        })
    };
    if covered(source, target) && covered(target, source) {
        None
    } else {
        Some(Rule::MergePeersDiffer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Epoch;

    fn peer(id: u64, role: PeerRole) -> Peer {
        Peer {
            id,
            store_id: id,
            role,
        }
    }

    fn region(peers: Vec<Peer>) -> Region {
        Region {
            id: 1,
            start_key: vec![],
            end_key: vec![],
            epoch: Epoch::default(),
            leader: Some(1),
            peers,
        }
    }

    /// In a joint state a change needs both configurations: entering one whose incoming
    /// voters are not two healthy ones breaks rule 1, though the outgoing ones are three.
    #[test]
    fn a_joint_state_needs_two_healthy_voters_in_each_configuration() {
        let r = region(vec![
            peer(1, PeerRole::Voter),
            peer(2, PeerRole::Voter),
            peer(3, PeerRole::Voter),
            peer(4, PeerRole::Learner),
        ]);
        let healthy = |p: &Peer| p.id != 4;
        let demote_two = Operator::ChangePeerV2(Box::new(vec![
            peer(4, PeerRole::Voter),
            peer(2, PeerRole::Learner),
            peer(3, PeerRole::Learner),
        ]));
        let entered = apply(&r, &demote_two);
        assert_eq!(
            entered.peers.iter().map(|p| p.role).collect::<Vec<_>>(),
            [
                PeerRole::Voter,
                PeerRole::DemotingVoter,
                PeerRole::DemotingVoter,
                PeerRole::IncomingVoter
            ]
        );
        assert_eq!(healthy_quorum(&entered, &healthy), 1);
        assert_eq!(
            check(&r, &demote_two, &healthy),
            Some(Rule::FewerThanTwoHealthyVoters)
        );
        let swap = Operator::ChangePeerV2(Box::new(vec![
            peer(4, PeerRole::Voter),
            peer(3, PeerRole::Learner),
        ]));
        assert_eq!(check(&r, &swap, &|_| true), None);
        let left = apply(&apply(&r, &swap), &Operator::ChangePeerV2(Box::default()));
        assert_eq!(left.peers[2].role, PeerRole::Learner);
        assert_eq!(left.peers[3].role, PeerRole::Voter);
    }

    /// TiKV cannot leave a joint state that demotes its leader.
    #[test]
    fn leaving_with_the_leader_demoted_breaks_a_rule() {
        let r = region(vec![
            peer(1, PeerRole::DemotingVoter),
            peer(2, PeerRole::Voter),
            peer(3, PeerRole::IncomingVoter),
        ]);
        let leave = Operator::ChangePeerV2(Box::default());
        assert_eq!(check(&r, &leave, &|_| true), Some(Rule::DemotesLeader));
        let moved = Region {
            leader: Some(3),
            ..r
        };
        assert_eq!(check(&moved, &leave, &|_| true), None);
    }
}
