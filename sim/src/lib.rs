//! A deterministic cluster simulator for Meridian's scheduler, as PD has
//! `tools/pd-simulator`. It runs the scheduling core itself
//! (`meridian::placement::schedule`), called as the server's shards call it, against
//! simulated TiKV stores, in simulated time: one scenario and one seed always give the same
//! run and the same report (every field but `wall_s`).
//!
//! # The timing model
//!
//! Defaults are in [`Timing`]; a scenario file may change any of them.
//!
//! - **Heartbeats.** Each region's leader heartbeats every 60 s, each store every 10 s, at
//!   phases the seed picks. A leader also heartbeats at once after every conf change it
//!   applies, every caught-up learner and every leader change, as TiKV does. A region whose
//!   leader's store is stopped does not heartbeat; after 10 s (the election timeout) a live
//!   voter, if a majority of the voters is alive, becomes leader.
//! - **Adding a peer.** The conf change applies at once and the learner is reported pending;
//!   its snapshot (the region's size, 96 MiB by default) crosses at the store bandwidth,
//!   100 MiB/s each way, one snapshot at a time per store and direction (the sender is the
//!   leader's store); the learner then catches up in 1 s and is reported caught up. The
//!   scheduler promotes it only then.
//! - **Promotion and removal** apply at once. TiKV refuses to remove its own leader.
//! - **Leader transfer** takes 30 ms.
//! - **Merge.** The source's leader, sent PD's `Merge`, checks the target as it stands (its
//!   epoch as PD described it, adjacent, peers on the same stores) or refuses; 500 ms later
//!   the target commits it: the source is gone, the target covers both ranges with version
//!   max(source, target) + 1, and reports at once. PD's region map is the server's range
//!   index, which drops the source on that report.
//! - **Write flow.** A region under the hot write load (`hot-write`: 1 MiB/s each, a
//!   thousandth as many keys) has its leader report, with every heartbeat, the bytes and keys
//!   written over the whole seconds since its last report (TiKV's `bytes_written`,
//!   `keys_written` and `interval`); the rest report nothing written. PD's hot cache takes
//!   each report in (a report under 3 s only says where the region is now), and a region
//!   counts as hot once it has been for three full 60 s intervals
//!   (`hot-region-cache-hits-threshold`): that is the hot-write scenario's floor.
//! - **The patrol** ticks every 100 ms and passes over every region in 10 s.
//! - **Store states**, on PD's side, are the scheduler's own: Disconnected after 20 s without a
//!   store heartbeat, Down after `max-store-down-time` (30 min), Offline from a decommission
//!   until the store reports no region, then Tombstone.
//! - PD's view of a region is what its leader reports; since the leader reports every change
//!   at once, the simulator hands the scheduler the region as it is.
//!
//! # What is checked
//!
//! On every step a leader carries out, the safety rules (`schedule::safety`; for a merge,
//! the source's peers against the target's as it stands), and on every
//! operator that starts, the caps and store limits (`check.rs`). The report counts
//! violations and describes the first few.
//!
//! Liveness, on every operator that ends (`liveness.rs`): none is stuck, that is, none times
//! out unless a store it names stopped or started while it ran (why this rule and not a bound
//! on the time to heal: that module's docs). The report counts stuck operators apart from the
//! violations and describes the first few; a run is also judged by whether it converged.
//!
//! Owns: the simulated cluster, scenarios, the report. Must not: decide anything the
//! scheduler decides, read the OS clock or touch the network.

mod check;
pub mod fuzz;
mod liveness;
mod model;
mod queue;
mod report;
pub mod scenario;
mod world;

pub use model::Timing;
pub use report::{HotFlow, Report, Series};
pub use scenario::{named, Action, Goal, Scenario, NAMES};
pub use world::schedule_config;

/// Runs `scenario` with `seed` to convergence or its end.
pub fn run(scenario: Scenario, seed: u64) -> Report {
    world::Sim::new(scenario, seed).run(seed)
}

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("scenario file: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("scenario {0:?}: {1}")]
    Invalid(String, String),
}

impl Scenario {
    /// A scenario from a TOML file's text, checked for what would make the run meaningless.
    pub fn from_toml(text: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = toml::from_str(text)?;
        let bad = |why: &str| Err(ScenarioError::Invalid(s.name.clone(), why.to_string()));
        let stores: u64 = s.zones.iter().map(|z| u64::from(*z)).sum();
        if s.zones.is_empty() || stores == 0 {
            return bad("no stores");
        }
        if s.regions == 0 {
            return bad("no regions");
        }
        if s.trigger >= s.actions.len() {
            return bad("the trigger names no action");
        }
        let known = stores
            + s.actions
                .iter()
                .map(|a| match a {
                    Action::AddStores { per_zone, .. } => {
                        per_zone.iter().map(|n| u64::from(*n)).sum()
                    }
                    _ => 0,
                })
                .sum::<u64>();
        for a in &s.actions {
            match a {
                Action::Kill { store, .. }
                | Action::Revive { store, .. }
                | Action::Decommission { store, .. }
                    if *store == 0 || *store > known =>
                {
                    return bad(&format!("no store {store}"));
                }
                Action::HotWrite { leaders_on, .. }
                    if leaders_on.iter().any(|s| *s == 0 || *s > known) =>
                {
                    return bad("a hot write led by a store that does not exist");
                }
                Action::KillZone { zone, .. } | Action::ReviveZone { zone, .. }
                    if *zone as usize >= s.zones.len() =>
                {
                    return bad(&format!("no zone {zone}"));
                }
                Action::DeleteRange { from, to, .. }
                    if *from == 0 || from > to || *to > s.regions =>
                {
                    return bad(&format!("no regions {from} to {to}"));
                }
                Action::AddStores { per_zone, .. } if per_zone.len() > s.zones.len() => {
                    return bad("stores added to a zone that does not exist");
                }
                _ => {}
            }
        }
        if s.timing.patrol_tick_ms == 0
            || s.timing.region_heartbeat_ms == 0
            || s.timing.store_heartbeat_ms == 0
        {
            return bad("a period of 0");
        }
        Ok(s)
    }
}
