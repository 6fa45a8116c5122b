//! A region's buckets: the keys that cut it into ranges of about one size, which its leader
//! reports and readers use to split scans (kvproto's `metapb.Buckets`, without the statistics
//! that come with a report). Data only.

use rkyv::{Archive, Deserialize, Serialize};

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Buckets {
    pub region_id: u64,
    /// Grows whenever the keys change; a report at or below the known version is stale.
    pub version: u64,
    /// The region's start key, the cuts, then its end key, in order, as the leader sent them.
    pub keys: Vec<Vec<u8>>,
}
