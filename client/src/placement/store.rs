//! Stores: what a storage node says of itself (address, labels) and reports in its heartbeats
//! (capacity, counts), and the state Meridian decides for it (Up, Offline, Down, Tombstone).
//! Data only: the rules that move a store between states are the server's.

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
