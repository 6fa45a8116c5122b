//! Random mixed scenarios (`loadgen sim --fuzz`) break no safety rule and heal, at a small size
//! and a fixed budget of seeds; the full run of 1,000 seeds is a benchmark
//! (`loadgen sim --fuzz 1000`).

use meridian_sim::fuzz::{scenario, Summary};

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
