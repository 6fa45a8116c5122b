//! Failpoints on the leader of a real three-node cluster on a real etcd, under TSO load judged
//! by the loadgen checker (src/failpoint.rs; the `failpoints` feature, which the test command
//! turns on). One fault after another, each on whichever member leads at the time:
//! - its etcd transactions hang, then its single-key puts hang: the window cannot be renewed,
//!   so once it runs out the leader steps down and another member serves;
//! - its window renewals fail with EIO: the same;
//! - its lease keepalives hang: the lease runs out and it stops serving before a successor
//!   can be elected (T4).
//!
//! Each time a successor serves, the faulty member says why in its log and does not serve, and
//! over the whole run no timestamp is out of order or handed out twice.

use std::time::{Duration, Instant};

use loadgen::args::TsoArgs;
use loadgen::run;
use meridian::failpoint::points;
use meridian::harness::Cluster;

const CONFIG: &str = "[election]\nlease_ttl_secs = 2\nsafety_margin_ms = 300\n";

/// Each fault: the failpoint, its actions, and what the faulty leader's log must say.
const FAULTS: [(&str, &str, &str); 4] = [
    (points::ETCD_TXN, "return(hang)", "stepping down"),
    (points::ETCD_PUT, "return(hang)", "stepping down"),
    (points::WINDOW_RENEW, "return(eio)", "stepping down"),
    (
        points::LEASE_KEEPALIVE,
        "return(hang)",
        "lease no longer provable",
    ),
];

/// How long each fault's turn lasts, hand-over included.
const TURN: Duration = Duration::from_secs(9);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaders_whose_etcd_writes_or_keepalives_fail_hand_over_and_nothing_steps_back() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cluster =
        tokio::task::block_in_place(|| Cluster::start(tmp.path(), 3, CONFIG)).unwrap();
    let warmup = Duration::from_secs(2);
    let args = TsoArgs::checked(
        cluster.endpoints(),
        cluster.ca.clone(),
        warmup + TURN * FAULTS.len() as u32 + Duration::from_secs(2),
        32,
    );
    let load = tokio::spawn(async move { run::run(&args).await });
    tokio::time::sleep(warmup).await;

    for (point, actions, says) in FAULTS {
        let turn = Instant::now();
        let leader =
            tokio::task::block_in_place(|| cluster.leader_within(None, Duration::from_secs(15)))
                .expect("a serving leader");
        let faulty = &cluster.nodes[leader];
        let logged_before = faulty.process().log_text().matches(says).count();
        cluster
            .admin(leader)
            .unwrap()
            .failpoint(point, actions)
            .unwrap();
        let armed = Instant::now();
        let successor = tokio::task::block_in_place(|| {
            cluster.leader_within(Some(leader), Duration::from_secs(20))
        })
        .unwrap_or_else(|| panic!("{point}: no other member took over"));
        let handed_over = armed.elapsed();
        let faulty = &cluster.nodes[leader];
        let log = faulty.process().log_text();
        assert!(
            log.matches(says).count() > logged_before,
            "{point}: n{leader}'s log does not say {says:?}"
        );
        let (_, health) = cluster.admin(leader).unwrap().get_json("/health").unwrap();
        assert_eq!(health["serving"], false, "{point}: n{leader} still serves");
        println!("{point}={actions} on n{leader}: n{successor} serving after {handed_over:?}");
        cluster.admin(leader).unwrap().failpoint(point, "").unwrap();
        tokio::time::sleep(TURN.saturating_sub(turn.elapsed())).await;
    }

    let report = load.await.unwrap().unwrap();
    report.print();
    assert_eq!(report.violations, 0, "{report:?}");
    assert!(report.checked > 0, "{report:?}");
    cluster.stop_all().unwrap();
}
