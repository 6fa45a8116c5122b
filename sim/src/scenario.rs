//! Scenarios: the cluster at the start (stores per zone, regions and their size), what
//! happens and when, when the clock for convergence starts, and what convergence means. The
//! named ones are built here at any size; others come from a TOML file of the same shape.

use serde::{Deserialize, Serialize};

use crate::model::Timing;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    /// Stores in each zone at the start; store ids run from 1 in zone order.
    pub zones: Vec<u32>,
    pub regions: u64,
    #[serde(default = "default_size")]
    pub region_size_mib: u64,
    #[serde(default)]
    pub timing: Timing,
    /// PD's `max-store-down-time`, in seconds (30 min by default).
    #[serde(default = "default_down")]
    pub max_store_down_s: u64,
    pub actions: Vec<Action>,
    /// The convergence clock starts this long after the `trigger`-th action: after a kill,
    /// after the Down mark (the store's last heartbeat plus `max_store_down_s`); after a
    /// rolling restart, when its last store has returned.
    pub trigger: usize,
    #[serde(default)]
    pub trigger_delay_s: u64,
    pub goal: Goal,
    /// The run stops here, converged or not.
    pub max_sim_s: u64,
    /// PD's `enable-joint-consensus` (on by default, as in PD): a replica move is one joint
    /// change (`ChangePeerV2`) rather than a promotion and a removal.
    #[serde(default = "default_joint")]
    pub enable_joint_consensus: bool,
}

fn default_joint() -> bool {
    true
}

fn default_size() -> u64 {
    96
}

fn default_down() -> u64 {
    30 * 60
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Action {
    /// The store stops (no heartbeats, no leaders) and never returns.
    Kill {
        at_s: u64,
        store: u64,
    },
    /// A stopped store starts again.
    Revive {
        at_s: u64,
        store: u64,
    },
    /// `ctl store delete`: Offline, drained, then Tombstone.
    Decommission {
        at_s: u64,
        store: u64,
    },
    /// New stores join, `per_zone[z]` of them in zone z.
    AddStores {
        at_s: u64,
        per_zone: Vec<u32>,
    },
    KillZone {
        at_s: u64,
        zone: u32,
    },
    ReviveZone {
        at_s: u64,
        zone: u32,
    },
    /// Each store in turn: evict-leader until it leads nothing, stop for `down_s`, start
    /// again and end the eviction.
    RollingRestart {
        at_s: u64,
        down_s: u64,
    },
    /// The keys of the first half of the key space are deleted: those regions empty.
    DeleteHalf {
        at_s: u64,
    },
    /// The keys of the starting regions `from` to `to` (ids, both included) are deleted:
    /// each region loses the share of its size that lies in that range.
    DeleteRange {
        at_s: u64,
        from: u64,
        to: u64,
    },
    /// The first `regions` regions in key order whose leader is on one of `leaders_on`
    /// write `bytes_per_s` each (a thousandth as many keys) from then on.
    HotWrite {
        at_s: u64,
        leaders_on: Vec<u64>,
        regions: u64,
        bytes_per_s: u64,
    },
}

impl Action {
    pub fn at_s(&self) -> u64 {
        match self {
            Action::Kill { at_s, .. }
            | Action::Revive { at_s, .. }
            | Action::Decommission { at_s, .. }
            | Action::AddStores { at_s, .. }
            | Action::KillZone { at_s, .. }
            | Action::ReviveZone { at_s, .. }
            | Action::RollingRestart { at_s, .. }
            | Action::DeleteHalf { at_s }
            | Action::DeleteRange { at_s, .. }
            | Action::HotWrite { at_s, .. } => *at_s,
        }
    }
}

/// What convergence means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Goal {
    /// Every region has `max-replicas` voters, no learner, all on live Up stores, one per zone
    /// and host; every decommissioned store is a Tombstone.
    Healed,
    /// Healed, and every store's region and leader counts within 5% of its zone's mean.
    Balanced,
    /// Healed, and every store's leader count within 5% of the mean.
    LeadersBalanced,
    /// Every region healed and the region count at most 0.55 of what it was when keys were
    /// deleted.
    Merged,
    /// Healed, and every live store's write flow, as leader and as peer, within the hot
    /// scheduler's source tolerance (1.05) of the mean, or within one hot region's rate of it.
    HotBalanced,
}

/// The named scenarios.
pub const NAMES: [&str; 7] = [
    "lost-store",
    "decommission",
    "scale-out",
    "zone-loss",
    "rolling-restart",
    "merge",
    "hot-write",
];

/// Stores per zone: `stores` over three zones, the first zones taking the remainder
/// (100 gives 34/33/33).
pub fn zones_of(stores: u32) -> Vec<u32> {
    (0..3)
        .map(|z| stores / 3 + u32::from(z < stores % 3))
        .collect()
}

/// A named scenario at `stores` stores and `regions` regions (the base case is 100 and 1M).
pub fn named(name: &str, stores: u32, regions: u64) -> Option<Scenario> {
    let zones = zones_of(stores);
    let base = |actions, trigger, trigger_delay_s, goal, max_sim_s| Scenario {
        name: name.to_string(),
        zones: zones.clone(),
        regions,
        region_size_mib: default_size(),
        timing: Timing::default(),
        max_store_down_s: default_down(),
        actions,
        trigger,
        trigger_delay_s,
        goal,
        max_sim_s,
        enable_joint_consensus: default_joint(),
    };
    let hour = 3600;
    Some(match name {
        "lost-store" => base(
            vec![Action::Kill { at_s: 60, store: 1 }],
            0,
            0,
            Goal::Healed,
            8 * hour,
        ),
        "decommission" => base(
            vec![Action::Decommission { at_s: 60, store: 1 }],
            0,
            0,
            Goal::Healed,
            8 * hour,
        ),
        "scale-out" => {
            // A tenth more stores, spread over the zones as the first ones are (4/3/3 for 10).
            let per_zone = zones_of((stores / 10).max(1));
            base(
                vec![Action::AddStores { at_s: 60, per_zone }],
                0,
                0,
                Goal::Balanced,
                8 * hour,
            )
        }
        "zone-loss" => base(
            vec![
                Action::KillZone { at_s: 60, zone: 2 },
                Action::ReviveZone {
                    at_s: 60 + hour,
                    zone: 2,
                },
            ],
            1,
            0,
            Goal::Healed,
            4 * hour,
        ),
        "rolling-restart" => base(
            vec![Action::RollingRestart {
                at_s: 60,
                down_s: 300,
            }],
            0,
            0,
            Goal::LeadersBalanced,
            (u64::from(stores) * 12 * 60).max(hour) + 2 * hour,
        ),
        // Merges may start only split-merge-interval (an hour) after the scheduler's start.
        "merge" => base(
            vec![Action::DeleteHalf { at_s: 60 }],
            0,
            0,
            Goal::Merged,
            4 * hour,
        ),
        // As many hot regions as stores, 1 MiB/s each, all led at first by two stores of the
        // first zone: those two carry all the write flow as leaders, and their peers' flow
        // sits on them and on the other zones' stores the regions share.
        "hot-write" => base(
            vec![Action::HotWrite {
                at_s: 60,
                leaders_on: vec![1, 2],
                regions: u64::from(stores),
                bytes_per_s: 1 << 20,
            }],
            0,
            0,
            Goal::HotBalanced,
            2 * hour,
        ),
        _ => return None,
    })
}
