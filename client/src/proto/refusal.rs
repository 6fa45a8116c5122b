//! Refusals: well-formed requests that the cluster's state turns down, each typed so a front
//! end can report it the way PD does (in a response header or as a status, with PD's type), and
//! worded in PD's own messages, which its clients log and some of them match. Data only: the
//! rules that refuse are the server's.

use rkyv::{Archive, Deserialize, Serialize};

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A store may not register with a version older than the cluster version by major.minor:
    /// a downgrade. (PD's message, with its two spaces.)
    #[error("version should compatible with version  {cluster}, got {store}")]
    StoreVersion { cluster: String, store: String },
    /// A store version that is not a semantic version.
    #[error("invalid put store {id}, error: {why}")]
    InvalidStoreVersion { id: u64, why: String },
    /// The store was removed for good; it may neither heartbeat nor register again.
    #[error("store is tombstone")]
    StoreTombstone,
    #[error("store {0} not found")]
    StoreNotFound(u64),
    /// A split report whose regions do not follow one another.
    #[error("invalid split region")]
    InvalidSplit,
    /// A split asked for a region this leader does not know.
    #[error("region not found, request region: id:{0}")]
    RegionNotFound(u64),
    /// An external timestamp above a timestamp just handed out.
    #[error("the external timestamp should not be larger than global ts")]
    ExternalTsAboveTso,
    /// An external timestamp set before the cluster is bootstrapped.
    #[error(
        "[PD:cluster:ErrNotBootstrapped]TiKV cluster not bootstrapped, please start TiKV first"
    )]
    ExternalTsNotBootstrapped,
    /// An external timestamp not above the current one.
    #[error("the external timestamp should be larger than current external timestamp")]
    ExternalTsNotIncreasing,
    /// A watch from a revision whose changes are no longer held: load again, then watch.
    #[error(
        "required watch revision: {required} is smaller than current compact/min revision {compact_revision}."
    )]
    Compacted {
        required: i64,
        compact_revision: i64,
    },
    /// A cluster record for another cluster (PD prints the record as protobuf's compact text).
    #[error(
        "invalid cluster {}, mismatch cluster id {cluster}",
        compact_text(*.asked, *.max_peer_count)
    )]
    ClusterMismatch {
        asked: u64,
        max_peer_count: u32,
        cluster: u64,
    },
}

/// A `metapb.Cluster` as Go's protobuf prints it with `%v`: each field that is not zero as
/// `name:value` and a space.
fn compact_text(id: u64, max_peer_count: u32) -> String {
    let mut out = String::new();
    if id != 0 {
        out.push_str(&format!("id:{id} "));
    }
    if max_peer_count != 0 {
        out.push_str(&format!("max_peer_count:{max_peer_count} "));
    }
    out
}
