//! A region: a key range `[start, end)` (an empty `end` reaches to the end of the key space),
//! its epoch, its peers and leader, and the sizes a store reports. Owns what a region answers
//! about itself; knows nothing of other regions, and does not validate shapes (the server does,
//! where a report enters).

use std::cmp::Ordering;

use rkyv::{Archive, Deserialize, Serialize};

/// `conf_ver` grows with membership changes, `version` with splits and merges.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Epoch {
    pub conf_ver: u64,
    pub version: u64,
}

impl Epoch {
    /// Whether `self` is older than `other` in either dimension (P1).
    pub fn is_stale_against(&self, other: &Epoch) -> bool {
        self.version < other.version || self.conf_ver < other.conf_ver
    }
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerRole {
    Voter,
    Learner,
    /// A learner being promoted in a joint-consensus change (kvproto's `IncomingVoter`): it
    /// votes in the incoming configuration only, until the region leaves the joint state.
    IncomingVoter,
    /// A voter being demoted in a joint-consensus change (kvproto's `DemotingVoter`): it votes
    /// in the outgoing configuration only, until the region leaves the joint state.
    DemotingVoter,
}

impl PeerRole {
    /// Whether the peer votes in the configuration a region is entering (the only one outside
    /// a joint state).
    pub fn votes_incoming(self) -> bool {
        matches!(self, PeerRole::Voter | PeerRole::IncomingVoter)
    }

    /// Whether the peer votes in the configuration a region in a joint state is leaving (the
    /// only one outside it).
    pub fn votes_outgoing(self) -> bool {
        matches!(self, PeerRole::Voter | PeerRole::DemotingVoter)
    }

    /// Whether the role exists only in a joint state.
    pub fn is_joint(self) -> bool {
        matches!(self, PeerRole::IncomingVoter | PeerRole::DemotingVoter)
    }
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Hash)]
pub struct Peer {
    pub id: u64,
    pub store_id: u64,
    pub role: PeerRole,
}

/// What routing needs of a region; the sizes a leader reports travel beside it as
/// [`RegionStats`] and never enter the shared index.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub id: u64,
    pub start_key: Vec<u8>,
    /// Exclusive; empty means unbounded.
    pub end_key: Vec<u8>,
    pub epoch: Epoch,
    pub peers: Vec<Peer>,
    /// The leader peer's id.
    pub leader: Option<u64>,
}

/// Sizes and traffic a region's leader reports with each heartbeat.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegionStats {
    pub approximate_size: u64,
    pub approximate_keys: u64,
    pub written_bytes: u64,
    pub written_keys: u64,
    /// The peers still catching up (TiKV's `pending_peers`): bit `i` stands for the report's
    /// `peers[i]`. A bit past the last peer makes the report malformed. A mask keeps the stats
    /// a fixed size on the heartbeat path, and a region has at most 16 peers.
    pub pending: u16,
    /// What the written bytes and keys cover (TiKV's `interval`): 0/0 when the sender does not
    /// say, and the server then takes the time since it took the region's last report.
    pub interval: TimeInterval,
}

/// A report's interval as TiKV sends it (pdpb's `TimeInterval`): Unix seconds, from the
/// leader's last report of the region (or its store's start) to this one.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeInterval {
    pub start_s: u64,
    pub end_s: u64,
}

impl TimeInterval {
    /// Its length in seconds, as PD reads it (end minus start; an end before the start is an
    /// interval of 0), or None for one not given (0/0).
    pub fn secs(&self) -> Option<u64> {
        if self.start_s == 0 && self.end_s == 0 {
            return None;
        }
        Some(self.end_s.saturating_sub(self.start_s))
    }
}

impl RegionStats {
    /// The ids of the peers of `region` that `pending` marks.
    pub fn pending_peers<'a>(&self, region: &'a Region) -> impl Iterator<Item = u64> + 'a {
        let mask = self.pending;
        region
            .peers
            .iter()
            .enumerate()
            .filter(move |(i, _)| *i < 16 && mask & (1 << i) != 0)
            .map(|(_, p)| p.id)
    }

    /// The mask that marks those of `region`'s peers whose ids `pending` lists; ids of no peer
    /// of the region mark nothing.
    pub fn pending_mask(region: &Region, pending: impl IntoIterator<Item = u64>) -> u16 {
        pending.into_iter().fold(0, |mask, id| {
            match region.peers.iter().take(16).position(|p| p.id == id) {
                Some(i) => mask | (1 << i),
                None => mask,
            }
        })
    }
}

impl Region {
    /// Region `id` over the whole key space at epoch 1/1, with a single voter `peer_id` on
    /// `store_id` that leads it: the region a cluster is bootstrapped with.
    pub fn bootstrap(id: u64, peer_id: u64, store_id: u64) -> Region {
        Region {
            id,
            start_key: Vec::new(),
            end_key: Vec::new(),
            epoch: Epoch {
                conf_ver: 1,
                version: 1,
            },
            peers: vec![Peer {
                id: peer_id,
                store_id,
                role: PeerRole::Voter,
            }],
            leader: Some(peer_id),
        }
    }

    /// The leader peer, if the report names one.
    pub fn leader_peer(&self) -> Option<&Peer> {
        let leader = self.leader?;
        self.peers.iter().find(|p| p.id == leader)
    }

    /// Whether `key` falls in `[start, end)`.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start_key.as_slice()
            && (self.end_key.is_empty() || key < self.end_key.as_slice())
    }

    /// Whether the ranges of `self` and `other` share a key.
    pub fn overlaps(&self, other: &Region) -> bool {
        end_after(&self.end_key, &other.start_key) && end_after(&other.end_key, &self.start_key)
    }
}

/// Whether an exclusive `end` (empty = unbounded) lies after `key`.
fn end_after(end: &[u8], key: &[u8]) -> bool {
    end.is_empty() || end.cmp(key) == Ordering::Greater
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn region(start: u8, end: Option<u8>) -> Region {
        Region {
            id: 1,
            start_key: vec![start],
            end_key: end.map(|e| vec![e]).unwrap_or_default(),
            epoch: Epoch::default(),
            peers: vec![],
            leader: None,
        }
    }

    proptest! {
        /// Two ranges overlap exactly when some key is in both; an empty end is unbounded.
        #[test]
        fn overlaps_is_a_shared_key(a in 0u8..8, la in 1u8..4, open_a: bool,
                                    b in 0u8..8, lb in 1u8..4, open_b: bool) {
            let x = region(a, (!open_a).then_some(a + la));
            let y = region(b, (!open_b).then_some(b + lb));
            let shared = (0u8..=16).any(|k| x.contains(&[k]) && y.contains(&[k]));
            prop_assert_eq!(x.overlaps(&y), shared);
        }
    }
}
