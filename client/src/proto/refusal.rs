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
}
