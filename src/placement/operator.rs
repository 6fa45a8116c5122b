//! Operators: what scheduling asks of one region, as a short list of steps run one at a time
//! (PD's operator), and the wire operator each step is sent as. Owns the step rules: when the
//! leader's report shows a step done, and what each step asks of TiKV. Knows nothing of
//! stores, limits or how an operator was chosen.

/// One step as the frames carry it: the one change a heartbeat reply asks of a region's leader.
pub use meridian_client::placement::{Operator, Split, SplitPolicy};

use super::region::{Peer, PeerRole, Region};

/// One step of an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A new learner on `peer.store_id`: TiKV sends it a snapshot, then it follows the log.
    AddLearner(Peer),
    /// The learner becomes a voter (PD sends AddNode for the learner's id).
    PromoteLearner(Peer),
    RemovePeer(Peer),
    TransferLeader(Peer),
    /// The leader splits the region at `keys` (SplitRegions); boxed, being rare.
    Split(Box<SplitStep>),
    /// The region merges into another (PD's `MergeRegion`); boxed, being rare.
    Merge(Box<MergeStep>),
    /// Enter the joint state (PD's `ChangePeerV2Enter`): the learners become incoming voters
    /// and the voters demoting ones, in one conf change.
    JointEnter(Box<Joint>),
    /// Leave the joint state (PD's `ChangePeerV2Leave`): the incoming voters become voters and
    /// the demoting ones learners.
    JointLeave(Box<Joint>),
}

/// The peers a joint-consensus change promotes (learners to voters) and demotes (voters to
/// learners), each as it was before the change.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Joint {
    pub promote: Vec<Peer>,
    pub demote: Vec<Peer>,
}

impl Joint {
    /// The changes as the wire carries them: each peer with the role it goes to.
    fn changes(&self) -> Vec<Peer> {
        let to = |p: &Peer, role| Peer { role, ..p.clone() };
        self.promote
            .iter()
            .map(|p| to(p, PeerRole::Voter))
            .chain(self.demote.iter().map(|p| to(p, PeerRole::Learner)))
            .collect()
    }

    /// The role `region` gives the peer with `id` on `store` (PD matches a step's peers by
    /// store, then checks the id).
    fn role_of(region: &Region, p: &Peer) -> Option<PeerRole> {
        region
            .peers
            .iter()
            .find(|q| q.store_id == p.store_id && q.id == p.id)
            .map(|q| q.role)
    }

    /// PD's `ChangePeerV2Enter.IsFinish`: every promoted peer votes in the incoming
    /// configuration, every demoted one no longer does (a single change TiKV applies at once,
    /// so the final roles count too).
    fn entered(&self, region: &Region) -> bool {
        self.promote
            .iter()
            .all(|p| Joint::role_of(region, p).is_some_and(PeerRole::votes_incoming))
            && self.demote.iter().all(|p| {
                matches!(
                    Joint::role_of(region, p),
                    Some(PeerRole::Learner | PeerRole::DemotingVoter)
                )
            })
    }

    /// PD's `ChangePeerV2Leave.IsFinish`: the promoted peers are voters, the demoted ones
    /// learners (or gone), and no peer is left in a joint role.
    fn left(&self, region: &Region) -> bool {
        self.promote
            .iter()
            .all(|p| Joint::role_of(region, p) == Some(PeerRole::Voter))
            && self
                .demote
                .iter()
                .all(|p| matches!(Joint::role_of(region, p), None | Some(PeerRole::Learner)))
            && !region.peers.iter().any(|p| p.role.is_joint())
    }
}

/// A merge as both its regions' operators carry it. The source's step is sent (as PD's, to
/// the source only) and never shows done in a report: the source is not reported again, and
/// its operator ends when the region is dropped. The target's (`passive`) is never sent: it
/// keeps other operators off the target and is done once the target's range changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeStep {
    pub source: Region,
    pub target: Region,
    pub passive: bool,
}

/// The range a split was asked of, how the leader finds where to cut it, and where (`keys`,
/// for `UseKey`): done once the region's range differs (PD's `SplitRegion.IsFinish`), so a
/// split whose key the leader picks is seen made as one at given keys is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitStep {
    pub start_key: Vec<u8>,
    pub end_key: Vec<u8>,
    pub policy: SplitPolicy,
    pub keys: Vec<Vec<u8>>,
}

impl Step {
    /// Whether `region`, as its leader reports it, shows the step made. A learner counts as
    /// added only once it has caught up (it is not among `pending` peers), as PD has it.
    pub fn is_done(&self, region: &Region, pending: &[u64]) -> bool {
        match self {
            Step::AddLearner(p) => {
                region.peers.iter().any(|q| q.id == p.id) && !pending.contains(&p.id)
            }
            Step::PromoteLearner(p) => region
                .peers
                .iter()
                .any(|q| q.id == p.id && q.role == PeerRole::Voter),
            Step::RemovePeer(p) => !region.peers.iter().any(|q| q.id == p.id),
            Step::TransferLeader(p) => region.leader == Some(p.id),
            Step::Split(s) => region.start_key != s.start_key || region.end_key != s.end_key,
            Step::Merge(m) => {
                m.passive
                    && (region.start_key != m.target.start_key
                        || region.end_key != m.target.end_key)
            }
            Step::JointEnter(j) => j.entered(region),
            Step::JointLeave(j) => j.left(region),
        }
    }

    /// What the leader is sent for this step.
    pub fn wire(&self) -> Operator {
        match self {
            Step::AddLearner(p) => Operator::AddPeer(Peer {
                role: PeerRole::Learner,
                ..p.clone()
            }),
            Step::PromoteLearner(p) => Operator::AddPeer(Peer {
                role: PeerRole::Voter,
                ..p.clone()
            }),
            Step::RemovePeer(p) => Operator::RemovePeer(p.clone()),
            Step::TransferLeader(p) => Operator::TransferLeader(p.clone()),
            Step::Split(s) => Operator::Split(Box::new(Split {
                policy: s.policy,
                keys: s.keys.clone(),
            })),
            Step::Merge(m) => Operator::Merge(Box::new(m.target.clone())),
            Step::JointEnter(j) => Operator::ChangePeerV2(Box::new(j.changes())),
            // As PD's: an empty change list, which TiKV reads as "leave the joint state".
            Step::JointLeave(_) => Operator::ChangePeerV2(Box::default()),
        }
    }

    /// The peer the step concerns; a split concerns none.
    pub fn peer(&self) -> Option<&Peer> {
        match self {
            Step::AddLearner(p)
            | Step::PromoteLearner(p)
            | Step::RemovePeer(p)
            | Step::TransferLeader(p) => Some(p),
            Step::Split(_) | Step::Merge(_) | Step::JointEnter(_) | Step::JointLeave(_) => None,
        }
    }
}

/// Which cluster-wide cap an operator counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpKind {
    /// balance-leader and evict-leader: leader transfers only.
    Leader,
    /// The replica and location checkers' repairs.
    Replica,
    /// balance-region moves.
    Region,
    Merge,
    /// The hot-write scheduler's leader transfers and peer moves (PD's `OpHotRegion`), capped
    /// by `hot-region-schedule-limit`.
    Hot,
    /// Asked for by an operator of the cluster through PD's HTTP API (`POST /operators`):
    /// PD's admin operators, which no schedule limit caps.
    Admin,
}

impl OpKind {
    pub const ALL: [OpKind; 6] = [
        OpKind::Leader,
        OpKind::Replica,
        OpKind::Region,
        OpKind::Merge,
        OpKind::Hot,
        OpKind::Admin,
    ];

    pub fn index(self) -> usize {
        self as usize
    }
}

/// An operator handed out and not yet seen done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub kind: OpKind,
    pub steps: Vec<Step>,
    /// The step being run.
    pub at: usize,
    /// The store the leader was on when the operator was made (a transfer's source).
    pub leader_store: u64,
    pub created_ms: u64,
    pub deadline_ms: u64,
    /// The write byte rate a hot-region operator moves (PD's pending influence); 0 for others.
    pub flow: u64,
    /// Not to be sent yet: the source's half of an admin merge whose target's half is not yet
    /// placed (PD adds the pair at once, so that TiKV never gets a merge whose partner was
    /// refused). It advances and times out as any other.
    pub held: bool,
}

/// Where an operator stands after a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// This step is to be run (sent again while it is not done).
    Running(Step),
    Done,
}

impl Pending {
    /// Moves past every step the report shows done.
    pub fn advance(&mut self, region: &Region, pending: &[u64]) -> Progress {
        while let Some(step) = self.steps.get(self.at) {
            if !step.is_done(region, pending) {
                return Progress::Running(step.clone());
            }
            self.at += 1;
        }
        Progress::Done
    }

    pub fn current(&self) -> Option<&Step> {
        self.steps.get(self.at)
    }

    /// The store a peer is added to, if the operator adds one.
    pub fn adds_to(&self) -> Option<u64> {
        self.steps.iter().find_map(|s| match s {
            Step::AddLearner(p) => Some(p.store_id),
            _ => None,
        })
    }

    /// The store a peer is removed from, if the operator removes one.
    pub fn removes_from(&self) -> Option<u64> {
        self.steps.iter().find_map(|s| match s {
            Step::RemovePeer(p) => Some(p.store_id),
            _ => None,
        })
    }

    /// Every store a peer is added to: one for a replica move, several when a merge first
    /// moves the source's peers to the target's stores.
    pub fn adds(&self) -> impl Iterator<Item = u64> + '_ {
        self.steps.iter().filter_map(|s| match s {
            Step::AddLearner(p) => Some(p.store_id),
            _ => None,
        })
    }

    /// Every store a peer is removed from.
    pub fn removes(&self) -> impl Iterator<Item = u64> + '_ {
        self.steps.iter().filter_map(|s| match s {
            Step::RemovePeer(p) => Some(p.store_id),
            _ => None,
        })
    }

    /// Where the leader goes, if the operator moves it.
    pub fn leader_to(&self) -> Option<u64> {
        self.steps.iter().rev().find_map(|s| match s {
            Step::TransferLeader(p) => Some(p.store_id),
            _ => None,
        })
    }

    /// Whether the operator is a leader move alone.
    pub fn is_leader_move(&self) -> bool {
        self.kind == OpKind::Leader
    }

    /// The other region of the merge this operator is a half of (PD's related merge region).
    pub fn merge_partner(&self) -> Option<u64> {
        self.steps.iter().find_map(|s| match s {
            Step::Merge(m) if m.passive => Some(m.source.id),
            Step::Merge(m) => Some(m.target.id),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Epoch;

    fn peer(id: u64, store_id: u64, role: PeerRole) -> Peer {
        Peer { id, store_id, role }
    }

    fn region(peers: Vec<Peer>, leader: u64) -> Region {
        Region {
            id: 1,
            start_key: vec![],
            end_key: vec![],
            epoch: Epoch::default(),
            peers,
            leader: Some(leader),
        }
    }

    #[test]
    fn a_move_advances_step_by_step_as_the_reports_show() {
        let new = peer(9, 4, PeerRole::Learner);
        let old = peer(3, 3, PeerRole::Voter);
        let mut op = Pending {
            kind: OpKind::Replica,
            steps: vec![
                Step::AddLearner(new.clone()),
                Step::PromoteLearner(new.clone()),
                Step::TransferLeader(peer(2, 2, PeerRole::Voter)),
                Step::RemovePeer(old.clone()),
            ],
            at: 0,
            leader_store: 3,
            created_ms: 0,
            deadline_ms: 1,
            flow: 0,
            held: false,
        };
        let mut r = region(
            vec![
                peer(1, 1, PeerRole::Voter),
                peer(2, 2, PeerRole::Voter),
                old,
            ],
            3,
        );
        assert_eq!(op.advance(&r, &[]), Progress::Running(op.steps[0].clone()));
        r.peers.push(new.clone());
        // Not caught up: still adding.
        assert_eq!(op.advance(&r, &[9]), Progress::Running(op.steps[0].clone()));
        assert_eq!(op.advance(&r, &[]), Progress::Running(op.steps[1].clone()));
        assert_eq!(
            op.steps[1].wire(),
            Operator::AddPeer(peer(9, 4, PeerRole::Voter))
        );
        r.peers[3].role = PeerRole::Voter;
        r.leader = Some(2);
        assert_eq!(op.advance(&r, &[]), Progress::Running(op.steps[3].clone()));
        r.peers.remove(2);
        assert_eq!(op.advance(&r, &[]), Progress::Done);
        assert_eq!(
            (op.adds_to(), op.removes_from(), op.leader_to()),
            (Some(4), Some(3), Some(2))
        );
    }

    #[test]
    fn a_joint_change_is_entered_then_left_as_the_reports_show() {
        let joint = Joint {
            promote: vec![peer(4, 4, PeerRole::Learner)],
            demote: vec![peer(3, 3, PeerRole::Voter)],
        };
        let enter = Step::JointEnter(Box::new(joint.clone()));
        let leave = Step::JointLeave(Box::new(joint));
        // As PD sends them: AddNode for the learner, AddLearnerNode for the voter; then none.
        assert_eq!(
            enter.wire(),
            Operator::ChangePeerV2(Box::new(vec![
                peer(4, 4, PeerRole::Voter),
                peer(3, 3, PeerRole::Learner)
            ]))
        );
        assert_eq!(leave.wire(), Operator::ChangePeerV2(Box::default()));
        let mut r = region(
            vec![
                peer(1, 1, PeerRole::Voter),
                peer(3, 3, PeerRole::Voter),
                peer(4, 4, PeerRole::Learner),
            ],
            1,
        );
        assert!(!enter.is_done(&r, &[]) && !leave.is_done(&r, &[]));
        r.peers[1].role = PeerRole::DemotingVoter;
        r.peers[2].role = PeerRole::IncomingVoter;
        assert!(enter.is_done(&r, &[]), "in the joint state");
        assert!(!leave.is_done(&r, &[]), "still in the joint state");
        assert!(enter.wire().is_done(&r) && !leave.wire().is_done(&r));
        r.peers[1].role = PeerRole::Learner;
        r.peers[2].role = PeerRole::Voter;
        assert!(enter.is_done(&r, &[]) && leave.is_done(&r, &[]));
        assert!(leave.wire().is_done(&r));
        // A peer of the change in the wrong role is not done.
        r.peers[2].role = PeerRole::Learner;
        assert!(!enter.is_done(&r, &[]) && !leave.is_done(&r, &[]));
    }
}
