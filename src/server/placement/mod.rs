//! The placement shell: runs the pure `placement` cores for the server. `state` is what every
//! core shares, `shard_task` the per-core owner of a shard, `handler` turns placement requests
//! into replies, `persist` writes changes and loads them when a leader starts. Decisions stay
//! in `placement`; nothing here decides what a heartbeat means.

mod dirty;
mod handler;
// `pub(crate)` for `crate::fuzzing`.
pub(crate) mod persist;
mod shard_task;
mod state;

pub use handler::{get_regions, handle, heartbeats};
pub use persist::{abandon_term, serve_term};
pub use shard_task::{run_shard, ShardMsg};
pub use state::PlacementState;
