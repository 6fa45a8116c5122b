//! Scheduling: PD's checkers and schedulers as a pure core, driven by the same three inputs in
//! the server's shards and in the simulator (`sim/`): a region heartbeat, a store heartbeat
//! (which rebuilds the [`StoreView`]) and the patrol's pass over a region, each with the clock
//! passed in. The outputs are operators: steps for a region's leader.
//!
//! - `config`: what scheduling may do (PD's defaults).
//! - `view`: the stores, their health in time (Up, Disconnected, Down; Offline being drained)
//!   and locations.
//! - `budget`: store limits, operators in flight per store and per kind.
//! - `location`: distinct score and isolation.
//! - `select`: target stores and leader targets.
//! - `replica`, `balance`: the checkers and schedulers, each a [`Plan`] or nothing.
//! - `hot_cache`: each region's write rates while it is hot, and the stores' sums of them
//!   (PD's hot peer cache); `hot`: the hot-write scheduler that moves leaders, then peers,
//!   off a store whose write flow is above the mean by the tolerance.
//! - `merge`: the merge checker, a pair of operators (source and target) or nothing, and the
//!   neighbours it reads as the shards and the simulator hand them over.
//! - `admin`: the operators an operator of the cluster asks for by name (PD's `POST
//!   /operators`: transfer-leader, transfer-region, transfer-peer, add-peer, add-learner,
//!   remove-peer, split-region), checked and planned as PD's handler and operator builder do.
//! - `scatter`: PD's region scatterer (ScatterRegion), spreading a group's peers and leaders.
//! - `joint`: PD's operator builder with joint consensus, reordering a plan's membership change
//!   into `ChangePeerV2` enter and leave steps when `enable_joint_consensus` is on and the
//!   cluster version takes `ChangePeerV2` (5.0 and later).
//! - `scheduler`: the entry points; starts plans within budget, runs operators step by step.
//! - `step_check`: the safety rules and PD's step checks, run on a step before it is sent.
//! - `settings`: what an operator changes while the cluster runs (evict-leader's stores,
//!   per-store limits) and PD's check before a store is decommissioned.
//! - `safety`: the four rules as an independent check, for the simulator and tests.
//!
//! Must not touch: I/O, the OS clock, the range index, persistence.

mod admin;
mod balance;
mod budget;
mod cluster;
mod config;
mod hot;
mod hot_cache;
#[cfg(test)]
mod hot_tests;
#[cfg(test)]
mod hot_top_tests;
#[cfg(test)]
mod hot_type_tests;
mod joint;
#[cfg(test)]
mod limit_tests;
mod location;
mod merge;
mod plan;
mod replica;
pub mod safety;
mod scatter;
mod scheduler;
mod select;
mod settings;
mod step_check;
#[cfg(test)]
mod test_cluster;
#[cfg(test)]
mod test_world;
mod view;

#[cfg(test)]
mod tests;

pub use admin::{admin_plan, AdminAsk, AdminPlan, AdminRefused, AskedRole, MergeTarget};
pub use budget::{capacity, influence, Flow, InFlight, StoreBudget, REGION_INFLUENCE};
pub use cluster::{Cluster, HotMove, HotStat, RegionInput};
pub use config::ScheduleConfig;
pub use hot::HotLoads;
pub use hot_cache::{
    HotCache, WriteFlow, MIN_HOT_WRITE_BYTES_PER_S, MIN_HOT_WRITE_KEYS_PER_S, REPORT_INTERVAL_S,
};
pub use joint::joint_steps;
pub use location::{distinct_score, isolated};
pub use merge::{peers_match, Adjacent, MergeInput, MergePlan, Neighbour, Neighbours, Side};
pub use plan::{Plan, NEW_PEER};
pub use scatter::{scatter, Groups, Refused, Target, SCATTER_DESC};
pub use scheduler::{
    cancel, let_go, on_heartbeat, patrol, start_admin_plan, start_passive, start_plan, Dispatch,
    Ended, Sweep,
};
pub use settings::{check_decommission, LimitType, Settings, SettingsError, StoreLimit};
pub use step_check::Stale;
#[cfg(test)]
pub(crate) use test_cluster::{details, up_stores, TestCluster};
pub use view::{Health, StoreLoad, StoreView};

pub use crate::placement::operator::{Joint, OpKind, Pending, Progress, Step};
