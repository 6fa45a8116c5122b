//! The placement data the frames carry: regions with their epochs and peers, stores with their
//! labels, stats and states, and the operators a heartbeat reply hands a region's leader. It
//! owns what these types are and the questions a region answers about itself (does it hold a
//! key, does it overlap another, which peer leads, is its epoch older); it must not hold
//! placement rules (shape validation, the region map, scheduling, limits), which stay in the
//! server crate that enforces them.

mod buckets;
mod cluster;
mod operator;
mod region;
mod store;

pub use buckets::Buckets;
pub use cluster::ClusterMeta;
pub use operator::{Operator, Split, SplitPolicy};
pub use region::{Epoch, Peer, PeerRole, Region, RegionStats, TimeInterval};
pub use store::{Label, Store, StoreDetails, StoreState, StoreStats, StoreStatus};
