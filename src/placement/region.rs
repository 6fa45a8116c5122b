//! The shape rules of a region report, checked where a report enters placement: a range, peers
//! and a leader that a store could report. What a region is belongs to the frames
//! (`meridian-client`); this knows nothing of other regions.

pub use meridian_client::placement::{Epoch, Peer, PeerRole, Region, RegionStats, TimeInterval};

/// Most peers a region may have; more is a malformed report, not a placement.
pub const MAX_PEERS: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegionError {
    #[error("region {0}: {1}")]
    Invalid(u64, String),
    #[error("region {id}: epoch {got:?} is older than {known:?}")]
    StaleEpoch { id: u64, got: Epoch, known: Epoch },
}

/// The shape rules, as a method of the region (which the client crate defines).
pub trait RegionShape {
    /// Rejects shapes no store can report: an empty or inverted range, no peers, too many,
    /// two peers on one store or with one id, a leader that is not a voter of the region (in a
    /// joint state, an incoming or a demoting voter leads too).
    fn validate(&self) -> Result<(), RegionError>;
}

impl RegionShape for Region {
    fn validate(&self) -> Result<(), RegionError> {
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
                    .any(|p| p.id == leader && p.role != PeerRole::Learner) =>
            {
                bad("leader is not a voter of the region")
            }
            _ => Ok(()),
        }
    }
}
