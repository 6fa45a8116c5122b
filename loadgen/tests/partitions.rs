//! Network faults between real `meridian` processes and a real etcd, each member reaching etcd
//! through a TCP proxy of its own (harness::FaultProxy), under TSO load judged by the loadgen
//! checker:
//! - the leader alone cut off from etcd while the other members still reach it;
//! - every path to etcd slowed to 200 ms per call;
//! - a partition that heals in the middle of a leader transfer to the cut-off member.
//!
//! Whichever member can prove its lease serves, never two at once: zero violations.

use std::time::{Duration, Instant};

use loadgen::args::TsoArgs;
use loadgen::run;
use meridian::harness::{Cluster, LinkFault};

const CONFIG: &str = "[election]\nlease_ttl_secs = 2\nsafety_margin_ms = 300\n";

/// The members that say they serve right now.
fn serving(cluster: &Cluster) -> Vec<usize> {
    (0..cluster.nodes.len())
        .filter(|&i| {
            cluster
                .admin(i)
                .ok()
                .and_then(|a| a.get_json("/health").ok())
                .is_some_and(|(_, h)| h["serving"] == true)
        })
        .collect()
}

fn start(dir: &std::path::Path) -> Cluster {
    tokio::task::block_in_place(|| Cluster::start_proxied(dir, 3, CONFIG)).unwrap()
}

fn leader(cluster: &Cluster, except: Option<usize>) -> usize {
    tokio::task::block_in_place(|| cluster.leader_within(except, Duration::from_secs(20)))
        .expect("a serving leader")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_cut_off_from_etcd_stops_serving_and_a_member_that_reaches_it_takes_over() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cluster = start(tmp.path());
    let first = leader(&cluster, None);
    let (warmup, cut, after) = (
        Duration::from_secs(2),
        Duration::from_secs(8),
        Duration::from_secs(4),
    );
    let args = TsoArgs::checked(
        cluster.endpoints(),
        cluster.ca.clone(),
        warmup + cut + after,
        32,
    );
    let load = tokio::spawn(async move { run::run(&args).await });
    tokio::time::sleep(warmup).await;

    cluster.proxies[first].partition();
    let cut_at = Instant::now();
    let successor = leader(&cluster, Some(first));
    let took_over = cut_at.elapsed();
    assert_eq!(
        serving(&cluster),
        vec![successor],
        "n{first} is cut off from etcd and must not serve"
    );
    tokio::time::sleep(cut.saturating_sub(cut_at.elapsed())).await;
    cluster.proxies[first].heal();
    // Healed, the old leader finds the key held and follows.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(serving(&cluster), vec![successor]);

    let report = load.await.unwrap().unwrap();
    report.print();
    println!(
        "n{first} cut off from etcd: n{successor} serving after {took_over:?}; longest \
         stretch without a timestamp {:.0} ms",
        report.longest_stall_ms
    );
    assert_eq!(report.violations, 0, "{report:?}");
    assert_eq!(report.errors, 0, "the client rides out the cut: {report:?}");
    cluster.stop_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_at_200_ms_per_call_keeps_one_leader_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cluster = start(tmp.path());
    let first = leader(&cluster, None);
    for proxy in &cluster.proxies {
        proxy.set(LinkFault::Delay(Duration::from_millis(100)));
    }
    let args = TsoArgs::checked(
        cluster.endpoints(),
        cluster.ca.clone(),
        Duration::from_secs(10),
        32,
    );
    let report = run::run(&args).await.unwrap();
    report.print();
    // Renewals (one a second) and keepalives (every 667 ms) take 200 ms: well inside the
    // window and the lease, so the leader never changes and never stops.
    assert_eq!(leader(&cluster, None), first, "the leader changed");
    assert_eq!(report.violations, 0, "{report:?}");
    assert_eq!(report.errors, 0, "{report:?}");
    // How long the longest stretch without a timestamp was is a measurement (printed above,
    // in tuning.md), not asserted: a loaded machine must not fail a correct cluster.
    for proxy in &cluster.proxies {
        proxy.heal();
    }
    cluster.stop_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_healing_in_the_middle_of_a_transfer_leaves_exactly_one_leader() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cluster = start(tmp.path());
    let first = leader(&cluster, None);
    let target = (first + 1) % 3;
    let args = TsoArgs::checked(
        cluster.endpoints(),
        cluster.ca.clone(),
        Duration::from_secs(12),
        32,
    );
    let load = tokio::spawn(async move { run::run(&args).await });
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The target cannot see the hand-over until the partition heals, a second into it.
    cluster.proxies[target].partition();
    let admin = cluster.admin(first).unwrap();
    let name = cluster.nodes[target].name.clone();
    let transfer =
        std::thread::spawn(move || admin.post(&format!("/api/v1/leader/transfer/{name}")));
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.proxies[target].heal();
    let answer = tokio::task::block_in_place(|| transfer.join().unwrap());
    let now_leading = leader(&cluster, None);
    println!("transfer to n{target} across a healing partition: {answer:?}; n{now_leading} leads");
    // Either the target took over once it could, or the marker ran out and another member
    // won: one serves, whichever it is.
    assert_eq!(serving(&cluster), vec![now_leading]);

    let report = load.await.unwrap().unwrap();
    report.print();
    assert_eq!(report.violations, 0, "{report:?}");
    assert_eq!(report.errors, 0, "{report:?}");
    cluster.stop_all().unwrap();
}
