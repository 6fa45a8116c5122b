//! The timing model of a simulated TiKV store and its defaults (the crate's docs explain each).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Timing {
    /// Between a region leader's periodic heartbeats (TiKV's `pd-heartbeat-tick-interval`).
    pub region_heartbeat_ms: u64,
    /// Between a store's heartbeats (TiKV's `pd-store-heartbeat-tick-interval`).
    pub store_heartbeat_ms: u64,
    /// A store's snapshot bandwidth, each way (TiKV's `snap-io-max-bytes-per-sec`, 100 MiB/s).
    pub snapshot_mib_per_s: u64,
    /// From an applied snapshot until the learner has caught up with the log.
    pub catch_up_ms: u64,
    /// A leader transfer, from the request to the new leader's heartbeat.
    pub transfer_leader_ms: u64,
    /// From a leader's loss until its region has elected another (TiKV: 10 ticks of 1 s).
    pub election_ms: u64,
    /// How often the patrol ticks, and the period in which it passes over every region.
    pub patrol_tick_ms: u64,
    pub patrol_period_ms: u64,
    /// A merge, from the source leader's receiving it (PrepareMerge) until the target has
    /// committed it and reports its grown range.
    pub merge_ms: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            region_heartbeat_ms: 60_000,
            store_heartbeat_ms: 10_000,
            snapshot_mib_per_s: 100,
            catch_up_ms: 1_000,
            transfer_leader_ms: 30,
            election_ms: 10_000,
            patrol_tick_ms: 100,
            patrol_period_ms: 10_000,
            merge_ms: 500,
        }
    }
}
