//! The cluster's own record (kvproto's `metapb.Cluster`): its id and the replica count it was
//! bootstrapped with. Data only.

use rkyv::{Archive, Deserialize, Serialize};

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterMeta {
    pub id: u64,
    /// The replicas a region should have, as set at bootstrap (or by PutClusterConfig);
    /// nothing schedules by it.
    pub max_peer_count: u32,
}
