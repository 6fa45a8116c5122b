//! Each deliberate bug is found by the simulation within a small seed budget: the checks that
//! pass on the shipped code fail on the mutated one.

use cluster_sim::{run, Mutation, SimConfig};

/// Runs seeds until one finds a violation; returns that seed and its violations.
fn first_failing(mutation: Mutation, budget: u64) -> Option<(u64, Vec<String>)> {
    (0..budget).find_map(|seed| {
        let outcome = run(&SimConfig {
            mutation: Some(mutation),
            ..SimConfig::seed(seed)
        });
        (!outcome.violations.is_empty()).then_some((seed, outcome.violations))
    })
}

#[test]
fn serving_before_the_lease_proof_is_found() {
    let found = first_failing(Mutation::ServeBeforeLeaseProof, 10);
    let Some((seed, violations)) = found else {
        panic!("10 seeds did not find serve-before-lease-proof");
    };
    eprintln!("serve-before-lease-proof found by seed {seed}: {violations:?}");
    assert!(
        violations
            .iter()
            .any(|v| v.contains("served at once") || v.contains("also served")),
        "seed {seed} should show two members serving: {violations:?}"
    );
}

/// Asserts `mutation` is found within `budget` seeds by a violation containing one of `shows`.
fn found_as(mutation: Mutation, budget: u64, shows: &[&str]) {
    let Some((seed, violations)) = first_failing(mutation, budget) else {
        panic!("{budget} seeds did not find {}", mutation.name());
    };
    eprintln!("{} found by seed {seed}: {violations:?}", mutation.name());
    assert!(
        violations
            .iter()
            .any(|v| shows.iter().any(|s| v.contains(s))),
        "seed {seed} should show {shows:?}: {violations:?}"
    );
}

#[test]
fn serving_past_the_persisted_window_is_found() {
    found_as(Mutation::SkipWindowPersist, 10, &["persisted limit"]);
}
