//! The merge scenario at a small size (9 stores, 2,000 regions): after half the key space is
//! deleted, the merge checker takes the region count to at most 0.55 of what it was, with no
//! violation of the safety rules (a merge is checked against its target's peers as TiKV is
//! asked to make it), within 1.25 times the floor the merge cap and split-merge-interval
//! allow.

use meridian_sim::{named, run};

#[test]
fn half_the_key_space_deleted_merges_away_safely() {
    let scn = named("merge", 9, 2_000).expect("the merge scenario");
    let r = run(scn, 7);
    eprintln!(
        "merge: converged {} after {:?} s (floor {:.0} s), regions {} -> {}, merges {}, moves {}, operators {}, violations {} {:?}, simulated {} s",
        r.converged, r.converged_after_s, r.floor_s, r.regions, r.regions_at_end, r.merges, r.moves, r.operators, r.violations, r.violation_samples, r.simulated_s
    );
    assert_eq!(r.violations, 0, "{:?}", r.violation_samples);
    assert!(
        r.converged,
        "not converged: {} regions left",
        r.regions_at_end
    );
    assert!(
        r.regions_at_end as f64 <= r.regions as f64 * 0.55,
        "{} of {} regions left",
        r.regions_at_end,
        r.regions
    );
    let after = r.converged_after_s.unwrap_or(f64::MAX);
    assert!(
        after <= 1.25 * r.floor_s,
        "converged after {after} s, floor {} s",
        r.floor_s
    );
}
