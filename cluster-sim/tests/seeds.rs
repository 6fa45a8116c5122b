//! The cluster simulation end to end: a healthy cluster elects one leader and serves; seeds
//! under the nemesis keep every promise; a seed replays byte for byte, in this process and in
//! separate ones; five-member clusters keep them too.

use cluster_sim::{run, SimConfig};

#[test]
fn a_healthy_cluster_elects_one_leader_and_serves() {
    let outcome = run(&SimConfig {
        faults: false,
        placement: true,
        ..SimConfig::seed(0)
    });
    assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    let lines = outcome.trace.lines();
    let up = lines.iter().filter(|l| l.contains(" up id=")).count();
    assert_eq!(up, 3, "every member starts:\n{}", outcome.trace.text());
    let leaders: Vec<&String> = lines.iter().filter(|l| l.contains(" serving ")).collect();
    assert_eq!(leaders.len(), 1, "one leader, never changed: {leaders:?}");
    // A request every 10 ms on average for 20 s, to a member drawn at random: the leader's
    // third are answered with timestamps, the followers' refused.
    assert!(
        outcome.handed_out > 500,
        "handed out {}",
        outcome.handed_out
    );
    // The id client asks every 55 ms on average, a third of the time the leader.
    assert!(
        outcome.ids_handed_out > 50,
        "ids handed out {}",
        outcome.ids_handed_out
    );
    // The placement client bootstraps, registers stores and splits regions (one request every
    // 55 ms on average, a quarter of them reads), and reads back everything at the end.
    assert!(
        outcome.placement_acknowledged > 50,
        "placement acknowledged {}",
        outcome.placement_acknowledged
    );
    assert!(
        outcome.placement_reads > outcome.placement_acknowledged / 3,
        "placement reads {} of {} acknowledged",
        outcome.placement_reads,
        outcome.placement_acknowledged
    );
}

#[test]
fn twenty_seeds_under_the_nemesis_keep_every_promise() {
    let mut leader_changes = 0;
    for seed in 0..20 {
        let outcome = run(&SimConfig::seed(seed));
        assert!(
            outcome.violations.is_empty(),
            "seed {seed}: {:?}\n{}",
            outcome.violations,
            outcome.trace.text()
        );
        assert!(
            outcome.handed_out > 100,
            "seed {seed}: {}",
            outcome.handed_out
        );
        leader_changes += outcome
            .trace
            .lines()
            .iter()
            .filter(|l| l.contains(" serving m"))
            .count()
            - 1;
    }
    // The nemesis does reach the leader: leadership moves in these seeds.
    assert!(
        leader_changes >= 20,
        "only {leader_changes} leader changes in 20 seeds"
    );
}

#[test]
fn a_seed_replays_byte_for_byte_in_this_process() {
    let a = run(&SimConfig::seed(7)).trace.text();
    let b = run(&SimConfig::seed(7)).trace.text();
    assert!(a.lines().count() > 100);
    assert_eq!(a, b);
    let other = run(&SimConfig::seed(8)).trace.text();
    assert_ne!(a, other, "another seed, another run");
}

#[test]
fn a_seed_replays_byte_for_byte_in_two_processes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let trace = |name: &str| {
        let path = dir.path().join(name);
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_cluster-sim"))
            .args(["--seed", "11", "--trace"])
            .arg(&path)
            .status()
            .expect("run cluster-sim");
        assert!(status.success(), "{status}");
        std::fs::read(&path).expect("the trace")
    };
    let a = trace("a.trace");
    let b = trace("b.trace");
    assert!(a.len() > 1_000);
    assert!(a == b, "two processes wrote different traces for seed 11");
}

/// The traces `runs` processes of `cluster-sim --seed ... --trace F` (with `args`) write,
/// all started at once: a race showed most under load.
fn traces_in_separate_processes(args: &[&str], runs: usize) -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let children: Vec<_> = (0..runs)
        .map(|i| {
            let path = dir.path().join(format!("{i}.trace"));
            let child = std::process::Command::new(env!("CARGO_BIN_EXE_cluster-sim"))
                .args(args)
                .arg("--trace")
                .arg(&path)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("run cluster-sim");
            (path, child)
        })
        .collect();
    children
        .into_iter()
        .map(|(path, mut child)| {
            // A mutation may make the run report a violation; only the trace matters here.
            child.wait().expect("cluster-sim ends");
            std::fs::read(&path).expect("the trace")
        })
        .collect()
}

/// A command that arrives on the very tick the control loop wakes used to end the term before
/// or after that tick's work by chance (tokio's select! order, drawn from an unseeded
/// generator): this seed's transfer at 7,580 ms wrote one of two traces.
#[test]
fn a_transfer_on_a_tick_replays_byte_for_byte_in_separate_processes() {
    let traces = traces_in_separate_processes(
        &["--seed", "3", "--mutation", "transfer-before-stopping"],
        6,
    );
    assert!(traces[0].len() > 1_000);
    let differ = traces.iter().filter(|t| **t != traces[0]).count();
    assert_eq!(
        differ, 0,
        "{differ} of 5 processes wrote another trace than the first"
    );
}

/// A seed whose run crossed a race tokio settled at random: on the build before each host's
/// runtime was seeded, 10 of 20 processes of this seed wrote one trace and 10 another (from
/// 15,432 ms on, m1's timestamps 1 ms of physical time apart and its placement
/// acknowledgements up to 7 ms). Its graceful stop and resignations also cross the selects
/// that race a stop against a pause or a watch (the campaign, the sit-out, the registry poll).
#[test]
fn a_seed_that_raced_replays_byte_for_byte_in_separate_processes() {
    let traces = traces_in_separate_processes(&["--seed", "81"], 6);
    let text = String::from_utf8_lossy(&traces[0]);
    assert!(text.contains("nemesis Stop("), "a graceful stop:\n{text}");
    assert!(
        text.contains("asked to resign sent=true"),
        "a resignation:\n{text}"
    );
    let differ = traces.iter().filter(|t| **t != traces[0]).count();
    assert_eq!(
        differ, 0,
        "{differ} of 5 processes wrote another trace than the first"
    );
}

#[test]
fn five_member_seeds_keep_every_promise() {
    for seed in 0..3 {
        let outcome = run(&SimConfig {
            members: 5,
            ..SimConfig::seed(seed)
        });
        assert!(
            outcome.violations.is_empty(),
            "seed {seed}: {:?}\n{}",
            outcome.violations,
            outcome.trace.text()
        );
        let up = outcome
            .trace
            .lines()
            .iter()
            .filter(|l| l.contains(" up id="))
            .count();
        assert!(up >= 5, "every member starts:\n{}", outcome.trace.text());
        assert!(
            outcome.handed_out > 100,
            "seed {seed}: {}",
            outcome.handed_out
        );
    }
}
