//! The store limit through the scheduler, as PD charges it: a store that receives a new peer
//! pays PD's step cost for the region's size (nothing for an empty region, a small region's
//! influence up to 20 MiB, a whole region's above), and is a target only while its limit holds
//! a whole region's influence, whatever the region's size; and a serving store that loses a peer
//! pays its remove limit.

use proptest::prelude::*;

use super::test_cluster::{region, TestCluster};
use super::{capacity, on_heartbeat, RegionInput};
use crate::placement::region::Region;

/// When the regions report: the stores heartbeated at 0 and are still Up.
const NOW: u64 = 1_000;

/// PD's `AdjustStepCost` for an add-peer step, written out from PD's source (`regionSize >
/// SmallRegionThreshold` (20) costs `influence` (1000); `> EmptyRegionApproximateSize` (1),
/// `smallInfluence` (200); else nothing) rather than taken from the code under test.
fn pd_step_cost(size_mib: u64) -> f64 {
    if size_mib > 20 {
        1000.0
    } else if size_mib > 1 {
        200.0
    } else {
        0.0
    }
}

/// Region `id` with voters on stores 1 and 2 only (one short of three), led on store 1: the
/// replica checker adds its third peer on store 3, the one store left.
fn short_region(id: u64) -> Region {
    region(id, &[1, 2])
}

proptest! {
    /// A region of any size gets its missing peer on store 3, whose add limit pays exactly
    /// PD's step cost for that size. A second region reporting at the same instant gets one
    /// there only if the first cost nothing: PD's target filter wants a whole region's worth.
    #[test]
    fn a_new_peer_costs_its_store_pds_step_cost(size in 0u64..200, second in 0u64..200) {
        let w = TestCluster::up(&[1, 2, 3]);
        let c = w.at(NOW);
        let full = capacity(w.cfg.store_limit_add_per_min);
        let mut next_id = 100;
        let mut ids = || {
            next_id += 1;
            Some(next_id)
        };
        let first = short_region(1);
        let input = RegionInput {
            region: &first,
            pending_peers: &[],
            size_mib: size,
            hot: None,
        };
        let d = on_heartbeat(&c, &input, true, &mut None, &mut ids);
        prop_assert!(d.started, "{d:?}");
        let budget = &c.store(3).expect("store 3").budget;
        let rate = c.rate(3, true);
        let cost = pd_step_cost(size);
        prop_assert!(budget.has(true, full - cost, rate, NOW));
        prop_assert!(!budget.has(true, full - cost + 1.0, rate, NOW));
        let other = short_region(2);
        let input = RegionInput {
            region: &other,
            pending_peers: &[],
            size_mib: second,
            hot: None,
        };
        let d = on_heartbeat(&c, &input, true, &mut None, &mut ids);
        prop_assert_eq!(d.started, cost == 0.0, "{:?}", d);
    }
}

/// Many moves out of the same serving stores at one instant: balance-region finds forty
/// regions on stores 1 to 3 and three empty stores. Adds are plentiful (600 a minute), but
/// each serving store may lose one region's worth a minute: every removal from a serving store
/// is charged to it, so at most one move starts per source store.
#[test]
fn removals_from_a_serving_store_are_charged_to_its_limit() {
    use super::{patrol, ScheduleConfig, Sweep};
    use crate::placement::StoreStats;
    let full = |n: u64| StoreStats {
        region_count: n,
        ..StoreStats::default()
    };
    let map = super::up_stores((1..=6).map(|id| (id, full(if id <= 3 { 40 } else { 0 }))));
    let cfg = ScheduleConfig {
        store_limit_add_per_min: 600.0,
        store_limit_remove_per_min: 1.0,
        ..ScheduleConfig::default()
    };
    let w = TestCluster::new(&map, cfg);
    let c = w.at(NOW);
    let mut next_id = 1_000;
    let mut ids = || {
        next_id += 1;
        Some(next_id)
    };
    let mut removed = [0u32; 7];
    let mut sweep = Sweep::default();
    for i in 1..=40 {
        let r = region(i, &[1, 2, 3]);
        let input = RegionInput {
            region: &r,
            pending_peers: &[],
            size_mib: 96,
            hot: None,
        };
        let mut slot = None;
        let d = patrol(&c, &mut sweep, &input, None, &mut slot, &mut ids);
        if let Some(op) = slot.filter(|_| d.started) {
            for s in op.removes() {
                removed[s as usize] += 1;
            }
        }
    }
    // A remove bucket of 1 a minute holds one region's worth (PD's `limit.Reset`).
    let cap = (capacity(1.0) / 1000.0) as u32;
    assert!(removed.iter().sum::<u32>() > 0, "no move started");
    for (s, n) in removed.iter().enumerate() {
        assert!(
            *n <= cap,
            "store {s}: {n} removals at one instant, {cap} allowed"
        );
    }
}
