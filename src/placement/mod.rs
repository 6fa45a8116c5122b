//! Placement's pure core: regions, their epochs, and the key-range map that routes a key to its
//! region. No I/O, no clock: the server shell feeds heartbeats in and persists what changed.

mod id_alloc;
mod range_index;
mod region;
mod region_map;

pub use id_alloc::IdAllocator;
pub use range_index::{Change, RangeIndex, Route, Snapshot, SEGMENT};
pub use region::{Epoch, Peer, PeerRole, Region, RegionError, RegionStats, MAX_PEERS};
pub use region_map::{Applied, RegionMap};

#[cfg(test)]
mod tests;
