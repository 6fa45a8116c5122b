//! Operators: the one change Meridian asks of a region's leader in a heartbeat reply.

use rkyv::{Archive, Deserialize, Serialize};

use super::region::{Peer, PeerRole, Region};

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    AddPeer(Peer),
    RemovePeer(Peer),
    TransferLeader(Peer),
    /// Split the region (PD's `SplitRegion`). Boxed: splits are rare, and every reply carries
    /// an `Option<Operator>`.
    Split(Box<Split>),
    /// Merge this region into `target` (PD's `Merge`, sent to the source region only): the
    /// target as PD last saw it, whose epoch TiKV checks before it merges.
    Merge(Box<Region>),
    /// A joint-consensus membership change (PD's `ChangePeerV2`): each peer with the role it
    /// goes to (`Voter` promotes a learner, `Learner` demotes a voter). With changes, the
    /// region enters the joint state; with none, it leaves it. Boxed, as `Split`.
    ChangePeerV2(Box<Vec<Peer>>),
}

/// How the leader finds where to split (PD's `CheckPolicy`).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitPolicy {
    /// TiKV scans the region for the key at half its size.
    Scan,
    /// TiKV estimates the middle key from its files' properties.
    Approximate,
    /// At the keys given.
    UseKey,
}

impl SplitPolicy {
    /// PD's name (`pdpb.CheckPolicy`'s).
    pub fn name(self) -> &'static str {
        match self {
            SplitPolicy::Scan => "SCAN",
            SplitPolicy::Approximate => "APPROXIMATE",
            SplitPolicy::UseKey => "USEKEY",
        }
    }

    /// The policy PD names `name` (any case, as PD upper-cases it).
    pub fn parse(name: &str) -> Option<SplitPolicy> {
        match name.to_ascii_uppercase().as_str() {
            "SCAN" => Some(SplitPolicy::Scan),
            "APPROXIMATE" => Some(SplitPolicy::Approximate),
            "USEKEY" => Some(SplitPolicy::UseKey),
            _ => None,
        }
    }
}

/// A split as the leader is asked it: by `policy`, at `keys` (in order) for `UseKey`; with
/// the others the leader picks the key and `keys` is empty.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub policy: SplitPolicy,
    pub keys: Vec<Vec<u8>>,
}

impl Split {
    /// A split at `keys` (PD's USEKEY).
    pub fn at(keys: Vec<Vec<u8>>) -> Split {
        Split {
            policy: SplitPolicy::UseKey,
            keys,
        }
    }
}

impl Operator {
    /// Whether `region`, as its leader reports it, shows the change made.
    pub fn is_done(&self, region: &Region) -> bool {
        match self {
            Operator::AddPeer(p) => region.peers.iter().any(|q| q.id == p.id),
            Operator::RemovePeer(p) => !region.peers.iter().any(|q| q.id == p.id),
            Operator::TransferLeader(p) => region.leader == Some(p.id),
            // Done once no key lies strictly inside the region: each is some region's start.
            // A keyless split's key is the leader's to pick, and its report alone does not
            // show it: its operator's step (PD's, by the range) says when it is made.
            Operator::Split(split) => {
                !split.keys.is_empty()
                    && !split.keys.iter().any(|k| {
                        k.as_slice() > region.start_key.as_slice()
                            && (region.end_key.is_empty()
                                || k.as_slice() < region.end_key.as_slice())
                    })
            }
            // Done once the reporting region is the target grown over the source's range
            // (the source itself is never reported again).
            Operator::Merge(target) => {
                region.id == target.id && region.epoch.version > target.epoch.version
            }
            // Entering: every change shows, in the joint state or past it (a single change
            // is applied at once). Leaving: no peer is left in a joint role.
            Operator::ChangePeerV2(changes) if changes.is_empty() => {
                !region.peers.iter().any(|p| p.role.is_joint())
            }
            Operator::ChangePeerV2(changes) => changes.iter().all(|c| {
                region.peers.iter().any(|p| {
                    p.id == c.id
                        && match c.role {
                            PeerRole::Voter => p.role.votes_incoming(),
                            _ => matches!(p.role, PeerRole::Learner | PeerRole::DemotingVoter),
                        }
                })
            }),
        }
    }

    pub fn is_leader_move(&self) -> bool {
        matches!(self, Operator::TransferLeader(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Epoch;

    #[test]
    fn a_split_is_done_once_no_key_lies_inside_the_region() {
        let region = |start: &[u8], end: &[u8]| Region {
            id: 1,
            start_key: start.to_vec(),
            end_key: end.to_vec(),
            epoch: Epoch::default(),
            peers: vec![],
            leader: None,
        };
        let split = Operator::Split(Box::new(Split::at(vec![b"c".to_vec(), b"f".to_vec()])));
        assert!(!split.is_done(&region(b"", b"")));
        assert!(!split.is_done(&region(b"a", b"d")));
        assert!(!split.is_done(&region(b"c", b"")));
        assert!(split.is_done(&region(b"c", b"f")));
        assert!(split.is_done(&region(b"f", b"")));
        assert!(split.is_done(&region(b"", b"c")));
        assert!(!split.is_leader_move());
        let scan = Operator::Split(Box::new(Split {
            policy: SplitPolicy::Scan,
            keys: vec![],
        }));
        assert!(!scan.is_done(&region(b"c", b"f")));
    }

    #[test]
    fn split_policies_are_named_as_pd_names_them() {
        for p in [
            SplitPolicy::Scan,
            SplitPolicy::Approximate,
            SplitPolicy::UseKey,
        ] {
            assert_eq!(SplitPolicy::parse(p.name()), Some(p));
            assert_eq!(SplitPolicy::parse(&p.name().to_lowercase()), Some(p));
        }
        assert_eq!(SplitPolicy::parse("middle"), None);
    }

    #[test]
    fn a_merge_is_done_once_the_target_reports_a_newer_version() {
        let target = Region {
            id: 2,
            start_key: b"c".to_vec(),
            end_key: b"f".to_vec(),
            epoch: crate::placement::Epoch {
                conf_ver: 1,
                version: 3,
            },
            peers: vec![],
            leader: None,
        };
        let op = Operator::Merge(Box::new(target.clone()));
        assert!(!op.is_done(&target));
        let mut grown = target.clone();
        grown.start_key = b"a".to_vec();
        grown.epoch.version = 4;
        assert!(op.is_done(&grown));
        grown.id = 1;
        assert!(!op.is_done(&grown), "another region is not the target");
    }
}
