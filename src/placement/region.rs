//! A region: a key range `[start, end)` (an empty `end` reaches to the end of the key space),
//! its epoch, its peers and leader, and the sizes a store reports. Owns shape validation; knows
//! nothing of other regions.

use std::cmp::Ordering;

use rkyv::{Archive, Deserialize, Serialize};

/// Most peers a region may have; more is a malformed report, not a placement.
pub const MAX_PEERS: usize = 16;

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
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegionError {
    #[error("region {0}: {1}")]
    Invalid(u64, String),
    #[error("region {id}: epoch {got:?} is older than {known:?}")]
    StaleEpoch { id: u64, got: Epoch, known: Epoch },
}

impl Region {
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

    /// Rejects shapes no store can report: an empty or inverted range, no peers, too many,
    /// two peers on one store or with one id, a leader that is not a voter of the region.
    pub fn validate(&self) -> Result<(), RegionError> {
        let bad = |why: &str| Err(RegionError::Invalid(self.id, why.to_string()));
        if self.id == 0 {
            return bad("region id 0 is never allocated");
        }
        if !self.end_key.is_empty() && self.end_key <= self.start_key {
            return bad("end key is not after start key");
        }
        if self.peers.is_empty() {
            return bad("no peers");
        }
        if self.peers.len() > MAX_PEERS {
            return bad(&format!("{} peers, at most {MAX_PEERS}", self.peers.len()));
        }
        for (i, p) in self.peers.iter().enumerate() {
            if p.id == 0 || p.store_id == 0 {
                return bad("peer or store id 0 is never allocated");
            }
            if self.peers[..i].iter().any(|q| q.store_id == p.store_id) {
                return bad(&format!("two peers on store {}", p.store_id));
            }
            if self.peers[..i].iter().any(|q| q.id == p.id) {
                return bad(&format!("two peers with id {}", p.id));
            }
        }
        match self.leader {
            Some(leader)
                if !self
                    .peers
                    .iter()
                    .any(|p| p.id == leader && p.role == PeerRole::Voter) =>
            {
                bad("leader is not a voter of the region")
            }
            _ => Ok(()),
        }
    }
}

/// Whether an exclusive `end` (empty = unbounded) lies after `key`.
fn end_after(end: &[u8], key: &[u8]) -> bool {
    end.is_empty() || end.cmp(key) == Ordering::Greater
}
