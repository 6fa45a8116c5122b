//! PD's operator builder with joint consensus (`enable-joint-consensus`, on by default): turns a
//! plan's membership change, written step by step (add a learner, promote it, move the leader,
//! remove a peer), into PD's joint order. Owns that order and PD's rule for when joint
//! consensus is used; knows nothing of how the plan was chosen or of limits.
//!
//! PD's `buildStepsWithJointConsensus`: add every new peer as a learner; then, by where the
//! leader goes, either move the leader first (its target was a voter already), or change the
//! peers first and move the leader after (the current leader stays a voter), or move it inside
//! the joint state (the current leader is demoted and the target promoted); the change is one
//! `ChangePeerV2Enter` promoting the learners and demoting the voters, then `ChangePeerV2Leave`;
//! last, remove the demoted peers, now learners. A change of a single peer (one add, one
//! remove, one promotion) stays a plain conf change, except two voters to one (PD's rule).
//! One difference from PD: a plan that moves the leader first (off a store being drained)
//! keeps it first, so that no snapshot comes from the store that leaves.

use crate::placement::operator::{Joint, Step};
use crate::placement::region::{Peer, PeerRole, Region};

/// `steps` as PD's joint builder orders them for `region` (as last reported). Steps past the
/// membership change (a split, a merge) follow it unchanged; a plan with no membership change,
/// or PD's single change, comes back as it is.
pub fn joint_steps(region: &Region, steps: Vec<Step>) -> Vec<Step> {
    // A plan that moves the leader before anything else (off a store being drained, so the
    // new peer's snapshot comes from a store that stays) keeps that first: PD's builder would
    // move it after the learners are added, from the store that leaves.
    if let Some(Step::TransferLeader(to)) = steps.first() {
        let to_voter = region
            .peers
            .iter()
            .any(|q| q.id == to.id && q.role == PeerRole::Voter);
        if to_voter && steps.len() > 1 {
            let after = Region {
                leader: Some(to.id),
                ..region.clone()
            };
            let mut steps = steps;
            let first = steps.remove(0);
            let mut out = vec![first];
            out.extend(joint_steps(&after, steps));
            return out;
        }
    }
    let conf = steps
        .iter()
        .take_while(|s| {
            matches!(
                s,
                Step::AddLearner(_)
                    | Step::PromoteLearner(_)
                    | Step::RemovePeer(_)
                    | Step::TransferLeader(_)
            )
        })
        .count();
    let mut add: Vec<Peer> = Vec::new();
    let mut promote: Vec<Peer> = Vec::new();
    let mut remove: Vec<Peer> = Vec::new();
    let mut leader_to: Option<Peer> = None;
    for s in &steps[..conf] {
        match s {
            Step::AddLearner(p) => add.push(p.clone()),
            Step::PromoteLearner(p) => promote.push(p.clone()),
            Step::RemovePeer(p) => remove.push(p.clone()),
            Step::TransferLeader(p) => leader_to = Some(p.clone()),
            _ => {}
        }
    }
    let origin = |p: &Peer| region.peers.iter().find(|q| q.id == p.id);
    // PD's count of changes: an added peer, a removed one, an existing learner promoted.
    let promoted_learners = promote.iter().filter(|p| origin(p).is_some()).count();
    let target_peers = (region.peers.len() + add.len()).saturating_sub(remove.len());
    let single = add.len() + remove.len() + promoted_learners <= 1;
    if conf == 0 || (single && !(remove.len() == 1 && target_peers == 1)) {
        return steps;
    }
    let demote: Vec<Peer> = remove
        .iter()
        .filter(|p| origin(p).is_some_and(|o| o.role.votes_outgoing()))
        .cloned()
        .collect();
    let joint = Joint { promote, demote };
    let origin_leader = region.leader;
    let stays_voter = |id: u64| {
        joint.promote.iter().any(|p| p.id == id)
            || region
                .peers
                .iter()
                .any(|q| q.id == id && q.role == PeerRole::Voter)
                && !joint.demote.iter().any(|p| p.id == id)
    };
    let transfer = leader_to.filter(|to| Some(to.id) != origin_leader);
    let mut out: Vec<Step> = add.into_iter().map(Step::AddLearner).collect();
    let change = !(joint.promote.is_empty() && joint.demote.is_empty());
    let enter_leave = |out: &mut Vec<Step>, transfer_inside: Option<Peer>| {
        if change {
            out.push(Step::JointEnter(Box::new(joint.clone())));
        }
        if let Some(to) = transfer_inside {
            out.push(Step::TransferLeader(to));
        }
        if change {
            out.push(Step::JointLeave(Box::new(joint.clone())));
        }
    };
    match transfer {
        // The target leader is a voter already: move the leader first.
        Some(to)
            if region
                .peers
                .iter()
                .any(|q| q.id == to.id && q.role == PeerRole::Voter) =>
        {
            out.push(Step::TransferLeader(to));
            enter_leave(&mut out, None);
        }
        // The current leader stays a voter: change the peers, then move the leader.
        Some(to) if origin_leader.is_none_or(stays_voter) => {
            enter_leave(&mut out, None);
            out.push(Step::TransferLeader(to));
        }
        // The current leader is demoted and the target promoted: move it in the joint state.
        Some(to) => enter_leave(&mut out, Some(to)),
        None => enter_leave(&mut out, None),
    }
    out.extend(remove.into_iter().map(Step::RemovePeer));
    out.extend(steps.into_iter().skip(conf));
    out
}

#[cfg(test)]
mod tests {
    //! Cases from PD's `TestBuild` (`builder_test.go`, joint consensus enabled): the first peer
    //! leads; a plan is written step by step as the checkers write theirs.
    use super::*;
    use crate::placement::Epoch;

    fn voter(id: u64) -> Peer {
        Peer {
            id,
            store_id: id,
            role: PeerRole::Voter,
        }
    }

    fn learner(id: u64) -> Peer {
        Peer {
            role: PeerRole::Learner,
            ..voter(id)
        }
    }

    fn region(peers: Vec<Peer>) -> Region {
        Region {
            id: 1,
            start_key: vec![],
            end_key: vec![],
            epoch: Epoch::default(),
            leader: Some(peers[0].id),
            peers,
        }
    }

    fn joint(promote: &[u64], demote: &[u64]) -> Joint {
        Joint {
            promote: promote.iter().map(|&i| learner(i)).collect(),
            demote: demote.iter().map(|&i| voter(i)).collect(),
        }
    }

    fn enter(promote: &[u64], demote: &[u64]) -> Step {
        Step::JointEnter(Box::new(joint(promote, demote)))
    }

    fn leave(promote: &[u64], demote: &[u64]) -> Step {
        Step::JointLeave(Box::new(joint(promote, demote)))
    }

    /// PD: "(enable JointConsensus) transfer leader in joint state", 1 -> 2.
    #[test]
    fn a_lone_leader_is_moved_inside_the_joint_state() {
        let r = region(vec![voter(1)]);
        let plan = vec![
            Step::AddLearner(learner(2)),
            Step::PromoteLearner(learner(2)),
            Step::TransferLeader(voter(2)),
            Step::RemovePeer(voter(1)),
        ];
        assert_eq!(
            joint_steps(&r, plan),
            vec![
                Step::AddLearner(learner(2)),
                enter(&[2], &[1]),
                Step::TransferLeader(voter(2)),
                leave(&[2], &[1]),
                Step::RemovePeer(voter(1)),
            ]
        );
    }

    /// PD: "(enable JointConsensus) transfer leader in joint state", {1, 2, 3L} -> {4, 5L}.
    #[test]
    fn every_learner_is_added_first_and_every_voter_demoted_at_once() {
        let r = region(vec![voter(1), voter(2), learner(3)]);
        let plan = vec![
            Step::AddLearner(learner(4)),
            Step::PromoteLearner(learner(4)),
            Step::AddLearner(learner(5)),
            Step::TransferLeader(voter(4)),
            Step::RemovePeer(voter(1)),
            Step::RemovePeer(voter(2)),
            Step::RemovePeer(learner(3)),
        ];
        assert_eq!(
            joint_steps(&r, plan),
            vec![
                Step::AddLearner(learner(4)),
                Step::AddLearner(learner(5)),
                enter(&[4], &[1, 2]),
                Step::TransferLeader(voter(4)),
                leave(&[4], &[1, 2]),
                Step::RemovePeer(voter(1)),
                Step::RemovePeer(voter(2)),
                Step::RemovePeer(learner(3)),
            ]
        );
    }

    /// PD: "(enable JointConsensus) transfer leader before entering joint state".
    #[test]
    fn a_leader_going_to_a_voter_moves_before_the_change() {
        let r = region(vec![voter(1), voter(2), learner(3)]);
        let plan = vec![
            Step::PromoteLearner(learner(3)),
            Step::TransferLeader(voter(2)),
            Step::RemovePeer(voter(1)),
        ];
        assert_eq!(
            joint_steps(&r, plan),
            vec![
                Step::TransferLeader(voter(2)),
                enter(&[3], &[1]),
                leave(&[3], &[1]),
                Step::RemovePeer(voter(1)),
            ]
        );
    }

    /// PD: "(enable JointConsensus) transfer leader after leaving joint state".
    #[test]
    fn a_leader_that_stays_a_voter_moves_after_the_change() {
        let r = region(vec![voter(1), voter(2), learner(3)]);
        let plan = vec![
            Step::PromoteLearner(learner(3)),
            Step::RemovePeer(voter(2)),
            Step::TransferLeader(voter(3)),
        ];
        assert_eq!(
            joint_steps(&r, plan),
            vec![
                enter(&[3], &[2]),
                leave(&[3], &[2]),
                Step::TransferLeader(voter(3)),
                Step::RemovePeer(voter(2)),
            ]
        );
    }

    /// A replica move with the leader staying: add, enter, leave, remove the demoted learner.
    #[test]
    fn a_move_of_a_follower_is_one_joint_change() {
        let r = region(vec![voter(1), voter(2), voter(3)]);
        let plan = vec![
            Step::AddLearner(learner(4)),
            Step::PromoteLearner(learner(4)),
            Step::RemovePeer(voter(3)),
        ];
        assert_eq!(
            joint_steps(&r, plan),
            vec![
                Step::AddLearner(learner(4)),
                enter(&[4], &[3]),
                leave(&[4], &[3]),
                Step::RemovePeer(voter(3)),
            ]
        );
    }

    /// PD's rule: one peer changed is a plain conf change, except two voters to one.
    #[test]
    fn a_single_change_stays_plain_but_two_voters_to_one_is_joint() {
        let three = region(vec![voter(1), voter(2), voter(3)]);
        for plan in [
            vec![
                Step::AddLearner(learner(4)),
                Step::PromoteLearner(learner(4)),
            ],
            vec![Step::RemovePeer(voter(3))],
            vec![Step::TransferLeader(voter(2))],
        ] {
            assert_eq!(joint_steps(&three, plan.clone()), plan);
        }
        let two = region(vec![voter(1), voter(2)]);
        assert_eq!(
            joint_steps(&two, vec![Step::RemovePeer(voter(2))]),
            vec![
                enter(&[], &[2]),
                leave(&[], &[2]),
                Step::RemovePeer(voter(2))
            ]
        );
    }

    /// A leader moved off a draining store before anything else stays first.
    #[test]
    fn a_leader_moved_first_stays_first() {
        let r = region(vec![voter(1), voter(2), voter(3)]);
        let plan = vec![
            Step::TransferLeader(voter(2)),
            Step::AddLearner(learner(4)),
            Step::PromoteLearner(learner(4)),
            Step::RemovePeer(voter(1)),
        ];
        assert_eq!(
            joint_steps(&r, plan),
            vec![
                Step::TransferLeader(voter(2)),
                Step::AddLearner(learner(4)),
                enter(&[4], &[1]),
                leave(&[4], &[1]),
                Step::RemovePeer(voter(1)),
            ]
        );
    }
}
