//! The region syncer, as PD's (`pkg/syncer`), over `pdpb.PD/SyncRegions` between members: the
//! leader streams every route its range index publishes (`feed`), and each follower keeps a
//! copy of the index from that stream (`follow`), from which it answers routing reads while it
//! is in sync (`server::placement::sync_status`).
//!
//! The stream: the follower names the leader's log it last followed ([`STREAM_KEY`]) and its
//! next index (`start_index`, 0 for none). The leader answers with its log's stream in the
//! response's metadata and either goes on from that index, when its log still holds it, or
//! sends a snapshot first ([`SNAPSHOT_KEY`]): messages of regions with `start_index` 0, then
//! an empty message whose `start_index` is the index the records go on from. Records follow,
//! each message's `start_index` the index of its first region. An empty message after the
//! snapshot is a keepalive naming the end of the leader's log, sent at least every
//! [`KEEPALIVE`]. The leader ends the stream when it stops leading, or when the follower falls
//! out of its log's window (the follower then starts again from a snapshot).
//!
//! Owns: the syncer's stream, both ends. Must not touch: what a route means (the index's
//! rules apply on both sides), persistence (the follower marks what it applies, and loads
//! what is on disk, through `placement::region_copy`).

mod feed;
mod follow;

use std::time::Duration;

pub use feed::sync_regions;
pub use follow::follow;

/// Request and response metadata: the leader's change log stream.
pub const STREAM_KEY: &str = "meridian-sync-stream";
/// Response metadata: "1" when a snapshot comes first.
pub const SNAPSHOT_KEY: &str = "meridian-sync-snapshot";
/// Regions per message (PD's `maxSyncRegionBatchSize`).
pub const BATCH: usize = 1000;
/// How often the leader looks for new records.
pub const POLL: Duration = Duration::from_millis(5);
/// The longest the leader stays silent: well under the follower's 1 s bound.
pub const KEEPALIVE: Duration = Duration::from_millis(200);
