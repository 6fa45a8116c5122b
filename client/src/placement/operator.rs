//! Operators: the one change Meridian asks of a region's leader in a heartbeat reply.

use rkyv::{Archive, Deserialize, Serialize};

use super::region::{Peer, Region};

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    AddPeer(Peer),
    RemovePeer(Peer),
    TransferLeader(Peer),
}

impl Operator {
    /// Whether `region`, as its leader reports it, shows the change made.
    pub fn is_done(&self, region: &Region) -> bool {
        match self {
            Operator::AddPeer(p) => region.peers.iter().any(|q| q.id == p.id),
            Operator::RemovePeer(p) => !region.peers.iter().any(|q| q.id == p.id),
            Operator::TransferLeader(p) => region.leader == Some(p.id),
        }
    }

    pub fn is_leader_move(&self) -> bool {
        matches!(self, Operator::TransferLeader(_))
    }
}
