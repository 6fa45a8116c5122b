//! Every named scenario at a small size (10 stores, 1,000 regions): it converges with no
//! violation and no operator stuck, and one seed gives the same report twice.

use meridian_sim::{named, run, Report, NAMES};

fn small(name: &str, seed: u64) -> Report {
    let scn = named(name, 10, 1_000).expect("a named scenario");
    run(scn, seed)
}

#[test]
fn every_scenario_converges_safely_at_a_small_size() {
    for name in NAMES {
        let r = small(name, 7);
        eprintln!(
            "{name}: converged {} after {:?} s (floor {:.0} s), moves {} (min {}), leader transfers {}, operators {}, evict {:?} s, simulated {} s",
            r.converged, r.converged_after_s, r.floor_s, r.moves, r.min_moves, r.leader_transfers, r.operators, r.longest_evict_s, r.simulated_s
        );
        assert!(
            r.converged && r.violations == 0,
            "{name}: converged {} after {:?} s (floor {} s), {} violations: {:?}",
            r.converged,
            r.converged_after_s,
            r.floor_s,
            r.violations,
            r.violation_samples
        );
        assert_eq!(r.stuck_operators, 0, "{name}: {:?}", r.stuck_samples);
        assert_eq!(r.repairs_during_loss, 0, "{name}");
    }
}

/// With joint consensus off, every move is made one peer at a time, as PD makes it then: the
/// scenarios converge as safely.
#[test]
fn every_scenario_converges_safely_without_joint_consensus() {
    for name in NAMES {
        let mut scn = named(name, 10, 1_000).expect("a named scenario");
        scn.enable_joint_consensus = false;
        let r = run(scn, 7);
        assert!(
            r.converged && r.violations == 0,
            "{name}: converged {} after {:?} s, {} violations: {:?}",
            r.converged,
            r.converged_after_s,
            r.violations,
            r.violation_samples
        );
        assert_eq!(r.stuck_operators, 0, "{name}: {:?}", r.stuck_samples);
        assert_eq!(r.repairs_during_loss, 0, "{name}");
    }
}

#[test]
fn one_seed_gives_a_byte_identical_report() {
    for name in NAMES {
        let a = serde_json::to_string(&small(name, 42)).unwrap();
        let b = serde_json::to_string(&small(name, 42)).unwrap();
        assert!(a == b, "{name}: two runs of seed 42 differ");
    }
}

#[test]
fn scenario_files_are_checked() {
    let ok = r#"
        name = "mine"
        zones = [2, 2, 2]
        regions = 60
        trigger = 0
        goal = "healed"
        max_sim_s = 7200
        [[actions]]
        do = "kill"
        at_s = 30
        store = 2
    "#;
    let scn = meridian_sim::Scenario::from_toml(ok).unwrap();
    let r = run(scn, 1);
    assert_eq!(r.violations, 0, "{:?}", r.violation_samples);
    for bad in [
        ok.replace("store = 2", "store = 9"),
        ok.replace("trigger = 0", "trigger = 1"),
        ok.replace("regions = 60", "regions = 0"),
        ok.replace("goal = \"healed\"", "goal = \"other\""),
    ] {
        assert!(meridian_sim::Scenario::from_toml(&bad).is_err(), "{bad}");
    }
}
