//! Random mixed scenarios, for `loadgen sim --fuzz`: from one seed, a cluster of the given size
//! and a few events at random times in its first two hours: stores lost (some return later),
//! stores decommissioned, stores added, the keys of a run of regions deleted (so the merge
//! checker runs amid the faults, once split-merge-interval allows it). Each starting store has at most one event, every zone
//! keeps at least two of its starting stores untouched, and the stores lost are all in one zone
//! (with isolation at zone level a region has one replica there, so no region loses its
//! quorum: two zones down at once would lose regions for good, which no scheduler can heal).
//! So a run can always heal; what a run must never do is break a safety rule or leave an
//! operator stuck (`liveness`), whatever the schedule of events. The run is judged healed
//! after the last event, as the named scenarios are (after a deletion, not before the merge
//! checker has passed once over every region).
//!
//! Owns: the making of such scenarios and the summary of many runs. Must not: run the
//! cluster (the world does) or decide anything the scheduler decides.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::report::Report;
use crate::scenario::{zones_of, Action, Goal, Scenario};

/// Stores a fuzzed cluster starts with at the least: two per zone stay untouched, and one more
/// per zone may take an event.
pub const MIN_STORES: u32 = 9;

/// The scenario seed `seed` makes, with `stores` (at least [`MIN_STORES`]) and `regions`.
pub fn scenario(seed: u64, stores: u32, regions: u64) -> Scenario {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let zones = zones_of(stores.max(MIN_STORES));
    // The starting stores that may take an event: all but two of each zone's; those of one
    // zone may be lost, the others only decommissioned.
    let lossy = rng.gen_range(0..zones.len());
    let (mut losable, mut open) = (Vec::new(), Vec::new());
    let mut first = 1u64;
    for (z, &n) in zones.iter().enumerate() {
        let ids = first + 2..first + u64::from(n);
        if z == lossy {
            losable.extend(ids);
        } else {
            open.extend(ids);
        }
        first += u64::from(n);
    }
    losable.shuffle(&mut rng);
    open.shuffle(&mut rng);
    let hour = 3600;
    let mut actions = Vec::new();
    for _ in 0..rng.gen_range(1..=5) {
        let at_s = rng.gen_range(60..=2 * hour);
        match rng.gen_range(0..5) {
            0 | 1 => {
                let Some(store) = losable.pop() else { continue };
                actions.push(Action::Kill { at_s, store });
                if rng.gen_bool(0.5) {
                    let back = at_s + rng.gen_range(5 * 60..=90 * 60);
                    actions.push(Action::Revive { at_s: back, store });
                }
            }
            2 => {
                let Some(store) = open.pop().or_else(|| losable.pop()) else {
                    continue;
                };
                actions.push(Action::Decommission { at_s, store });
            }
            3 => {
                // From a twentieth to half of the regions, anywhere in the key space.
                let n = regions.max(1);
                let len = rng.gen_range((n / 20).max(1)..=(n / 2).max(1));
                let from = rng.gen_range(1..=n - len + 1);
                actions.push(Action::DeleteRange {
                    at_s,
                    from,
                    to: from + len - 1,
                });
            }
            _ => {
                let mut per_zone: Vec<u32> = zones.iter().map(|_| rng.gen_range(0..=1)).collect();
                if per_zone.iter().all(|n| *n == 0) {
                    per_zone[rng.gen_range(0..zones.len())] = 1;
                }
                actions.push(Action::AddStores { at_s, per_zone });
            }
        }
    }
    if actions.is_empty() {
        actions.push(Action::AddStores {
            at_s: 60,
            per_zone: vec![1; zones.len()],
        });
    }
    actions.sort_by_key(Action::at_s);
    let last = actions.last().map_or(0, Action::at_s);
    Scenario {
        name: format!("fuzz-{seed}"),
        zones,
        regions,
        region_size_mib: 96,
        timing: Default::default(),
        max_store_down_s: 30 * 60,
        trigger: actions.len() - 1,
        actions,
        trigger_delay_s: 0,
        goal: Goal::Healed,
        // Past the last event, a Down mark and a repair of everything it held.
        max_sim_s: last + 10 * hour,
        enable_joint_consensus: true,
    }
}

/// Many fuzzed runs, summed up.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub seeds: u64,
    pub stores: u32,
    pub regions: u64,
    pub violations: u64,
    /// The seeds whose run broke a safety rule, with the first violation of each.
    pub violating: Vec<(u64, String)>,
    /// Operators stuck (timed out though every store they name kept serving), in all runs.
    pub stuck_operators: u64,
    /// The seeds whose run had a stuck operator, with the first of each.
    pub stuck: Vec<(u64, String)>,
    pub converged: u64,
    /// The seeds whose run did not heal before its end.
    pub not_converged: Vec<u64>,
    pub operators: u64,
    /// Regions merged away, in all runs.
    pub merges: u64,
    pub wall_s: f64,
}

impl Summary {
    pub fn add(&mut self, seed: u64, r: &Report) {
        self.seeds += 1;
        self.violations += r.violations;
        if r.violations > 0 {
            let first = r.violation_samples.first().cloned().unwrap_or_default();
            self.violating.push((seed, first));
        }
        self.stuck_operators += r.stuck_operators;
        if r.stuck_operators > 0 {
            let first = r.stuck_samples.first().cloned().unwrap_or_default();
            self.stuck.push((seed, first));
        }
        if r.converged {
            self.converged += 1;
        } else {
            self.not_converged.push(seed);
        }
        self.operators += r.operators;
        self.merges += r.merges;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every scenario is valid, touches each starting store at most once, leaves two untouched
    /// in every zone and loses stores of one zone only, deletes keys of regions that exist, and
    /// one seed always makes the same one; some delete keys.
    #[test]
    fn scenarios_are_valid_and_leave_every_zone_healable() {
        let mut deleting = 0;
        for seed in 0..500 {
            let s = scenario(seed, 12, 100);
            assert_eq!(s, scenario(seed, 12, 100));
            let text = toml::to_string(&s).expect("a scenario serializes");
            assert_eq!(Scenario::from_toml(&text).expect("valid"), s);
            let mut touched: Vec<u64> = s
                .actions
                .iter()
                .filter_map(|a| match a {
                    Action::Kill { store, .. } | Action::Decommission { store, .. } => Some(*store),
                    _ => None,
                })
                .collect();
            let zone_of = |id: u64| {
                let mut first = 1;
                s.zones.iter().position(|&n| {
                    first += u64::from(n);
                    id < first
                })
            };
            let mut lost: Vec<_> = s
                .actions
                .iter()
                .filter_map(|a| match a {
                    Action::Kill { store, .. } => Some(zone_of(*store)),
                    _ => None,
                })
                .collect();
            lost.sort_unstable();
            lost.dedup();
            for a in &s.actions {
                if let Action::DeleteRange { from, to, .. } = *a {
                    assert!(1 <= from && from <= to && to <= s.regions, "{s:?}");
                }
            }
            assert!(lost.len() <= 1, "stores lost in two zones: {s:?}");
            let n = touched.len();
            touched.sort_unstable();
            touched.dedup();
            assert_eq!(touched.len(), n, "a store with two events: {s:?}");
            let mut first = 1;
            for &size in &s.zones {
                let untouched = (first..first + u64::from(size))
                    .filter(|id| !touched.contains(id))
                    .count();
                assert!(untouched >= 2, "{s:?}");
                first += u64::from(size);
            }
            let deletes = |a: &Action| matches!(a, Action::DeleteRange { .. });
            deleting += usize::from(s.actions.iter().any(deletes));
        }
        assert!(deleting > 100, "{deleting} of 500 scenarios delete keys");
    }
}
