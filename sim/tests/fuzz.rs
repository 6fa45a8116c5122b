//! Random mixed scenarios (`loadgen sim --fuzz`) break no safety rule and heal, at a small size
//! and a fixed budget of seeds; the full run of 1,000 seeds is a benchmark
//! (`loadgen sim --fuzz 1000`).

use meridian_sim::fuzz::{scenario, Summary};
use meridian_sim::Action;

#[test]
fn fuzzed_runs_break_no_rule_and_heal() {
    let mut summary = Summary::default();
    for seed in 1..=2 {
        let report = meridian_sim::run(scenario(seed, 9, 150), seed);
        summary.add(seed, &report);
    }
    assert_eq!(summary.violations, 0, "{:?}", summary.violating);
    assert_eq!(summary.not_converged, Vec::<u64>::new());
    assert!(summary.operators > 0, "the events caused no operator");
}

/// Keys deleted while stores are lost or drained: the merge checker merges the emptied
/// regions amid the repairs (joint consensus on, as in every fuzzed run), breaking no rule,
/// and the run heals.
#[test]
fn fuzzed_deletes_merge_amid_faults() {
    let seeds: Vec<u64> = (1..)
        .filter(|&seed| {
            let s = scenario(seed, 9, 150);
            let has = |f: fn(&Action) -> bool| s.actions.iter().any(f);
            s.enable_joint_consensus
                && has(|a| matches!(a, Action::DeleteRange { .. }))
                && has(|a| matches!(a, Action::Kill { .. } | Action::Decommission { .. }))
        })
        .take(2)
        .collect();
    let mut summary = Summary::default();
    for &seed in &seeds {
        let report = meridian_sim::run(scenario(seed, 9, 150), seed);
        summary.add(seed, &report);
    }
    assert_eq!(summary.violations, 0, "{:?}", summary.violating);
    assert_eq!(summary.not_converged, Vec::<u64>::new(), "seeds {seeds:?}");
    assert!(summary.merges > 0, "seeds {seeds:?} merged nothing");
}
