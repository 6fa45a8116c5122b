//! Stores: what a storage node says of itself (address, labels, its build and other addresses)
//! and reports in its heartbeats (capacity, counts), and the state Meridian decides for it (Up,
//! Offline, Down, Tombstone). Data only: the rules that move a store between states, and the
//! cluster version derived from the stores' versions, are the server's.

use std::sync::Arc;

use rkyv::{Archive, Deserialize, Serialize};

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub key: String,
    pub value: String,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreState {
    Up,
    /// Being drained on request; still serving.
    Offline,
    /// No heartbeat for `max-store-down-time`; its peers are replaced.
    Down,
    /// Gone for good; never comes back.
    Tombstone,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Store {
    pub id: u64,
    pub address: String,
    pub labels: Vec<Label>,
    pub state: StoreState,
    /// Behind a pointer because it is read rarely, and inline it would double the size of
    /// every request and reply in memory (`Store` travels in both), and with them the heartbeat
    /// path's buffers. Archived inline (`Unshare`): the bytes on the wire and on disk are the
    /// same as for the value itself.
    #[rkyv(with = rkyv::with::Unshare)]
    pub details: Arc<StoreDetails>,
}

/// What a store says of its build and its other addresses when it registers (TiKV's
/// `metapb.Store` fields), kept and handed back as PD does; empty when a store sends none.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct StoreDetails {
    /// The store's release, a semantic version (`8.5.7`, PD also takes `v8.5.7`); the cluster
    /// version is the lowest of them.
    pub version: String,
    pub git_hash: String,
    /// Where the store's peers reach it; empty means `address`.
    pub peer_address: String,
    /// Its HTTP status and metrics address.
    pub status_address: String,
    /// When the store process started, in seconds since the Unix epoch.
    pub start_timestamp: i64,
    pub deploy_path: String,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    pub capacity: u64,
    pub available: u64,
    pub used_size: u64,
    pub region_count: u64,
    pub leader_count: u64,
}

/// A store with what it last reported.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct StoreStatus {
    pub store: Store,
    pub stats: StoreStats,
    pub last_heartbeat_ms: u64,
}
