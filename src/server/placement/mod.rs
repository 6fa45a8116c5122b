//! The placement shell: runs the pure `placement` cores for the server. `state` is what every
//! core shares, `shard_task` the per-core owner of a shard, `request` sorts placement requests
//! by concern into one handler file each (`cluster`, `cluster_config`, `stores`, `heartbeat`,
//! `routing`, `buckets`, `splits`, `gc`, `resolved_ts`, `external_ts`, `global_config`, all
//! answering through `answer`), `resource_groups` holds the term's resource groups for the
//! `ResourceManager` service, `persist` writes changes and loads them when a leader starts
//! (`store_record`: a store's bytes; `store_bindings` and `store_identity`: which certificate
//! owns which store), `messages` are what those tasks are sent; `operators` serves the
//! operators a client asks for (ScatterRegion, GetOperator, SplitRegions), `admin_operators`
//! those PD's HTTP API asks for and lists (`/operators`), `region_sizes` the sizes regions
//! last reported, for its region JSON, `store_totals` what the regions put on each store, for
//! its store JSON; `rules` keeps PD's
//! placement and region label rules for the HTTP API, `scheduling` what an operator changes in
//! scheduling while the cluster runs (decommission, evict-leader, store limits), `push` the
//! heartbeat streams operators are pushed to as soon as they are made, `region_copy` a
//! follower's copy of the region index on its own disk. Decisions stay in
//! `placement` (and `gc`,
//! `global_config`); nothing here decides what a heartbeat means.

pub mod admin_operators;
mod answer;
mod buckets;
mod cluster;
mod cluster_config;
mod dirty;
mod external_ts;
mod gc;
mod global_config;
mod heartbeat;
mod messages;
mod op_log;
pub mod operators;
// `pub(crate)` for `crate::fuzzing`.
pub(crate) mod persist;
pub mod push;
pub mod region_copy;
pub mod region_sizes;
mod request;
mod resolved_ts;
mod resource_groups;
mod routing;
pub mod rules;
pub mod scheduling;
mod shard_task;
mod splits;
mod state;
mod store_bindings;
mod store_identity;
mod store_record;
pub mod store_totals;
mod stores;
pub mod sync_status;

pub use buckets::BucketsOp;
pub use cluster::ClusterOp;
pub use cluster_config::ClusterConfigOp;
pub use external_ts::ExternalTsOp;
pub use gc::GcOp;
pub use global_config::GlobalConfigOp;
pub use heartbeat::batch as heartbeats;
pub use messages::ShardMsg;
pub use persist::{abandon_term, serve_term};
pub use request::{follower_read, handle, PlacementOp};
pub use resolved_ts::ResolvedTsOp;
pub use resource_groups::{ResourceGroups, WriteError as ResourceGroupWriteError};
pub use routing::{locate_many, locate_many_from_copy, RouteOp};
pub use shard_task::run_shard;
pub use splits::SplitOp;
pub use state::PlacementState;
pub use store_identity::claim as claim_store;
pub use stores::StoreOp;
