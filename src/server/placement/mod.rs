//! The placement shell: runs the pure `placement` cores for the server. `state` is what every
//! core shares, `shard_task` the per-core owner of a shard, `handler` turns placement requests
//! into replies, `persist` writes changes and loads them when a leader starts, `messages` are
//! what those tasks are sent. Decisions stay in `placement`; nothing here decides what a
//! heartbeat means.

mod dirty;
mod handler;
mod messages;
// `pub(crate)` for `crate::fuzzing`.
pub(crate) mod persist;
mod shard_task;
mod state;

pub use handler::{get_regions, handle, heartbeats};
pub use messages::ShardMsg;
pub use persist::{abandon_term, serve_term};
pub use shard_task::run_shard;
pub use state::PlacementState;
