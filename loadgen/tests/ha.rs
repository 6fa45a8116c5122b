//! Three nodes on one real etcd, under continuous TSO load with the loadgen checker: the leader
//! is SIGKILLed and restarted several times; a follower refuses TSO with NotLeader naming the
//! leader; a leader paused (SIGSTOP) past its lease is left for its successor by the client.
//! Zero violations, and the client never surfaces an error.

use std::path::Path;
use std::time::{Duration, Instant};

use loadgen::args::TsoArgs;
use loadgen::report::Report;
use loadgen::run;
use tokio::task::JoinHandle;

use meridian::admin::AdminClient;
use meridian::client::{Client, ClientOptions, RpcStream};
use meridian::harness::{Cluster, ClusterNode};
use meridian::proto::{ErrorReply, Request, Response};
use meridian::tls::Trust;

/// etcd and three members sharing one CA; the temp dir lives as long as the first element.
fn start_cluster() -> (tempfile::TempDir, Cluster) {
    let tmp = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(
        tmp.path(),
        3,
        "[election]\nlease_ttl_secs = 2\nsafety_margin_ms = 300\n[debug]\nclock_injection = true\n",
    )
    .unwrap();
    (tmp, cluster)
}

/// A request stream to exactly `node`, never redirected: what that node itself answers.
async fn direct_stream(node: &ClusterNode, ca: &Path) -> RpcStream {
    let mut opts = ClientOptions::new(vec![node.listen.clone()], Trust::Ca(ca.to_path_buf()));
    opts.retry_budget = Duration::from_secs(1);
    let client = Client::connect(opts).await.unwrap();
    client.open_stream().await.unwrap()
}

/// Member `i`'s admin API, as an administrator.
fn admin_of(c: &Cluster, i: usize) -> AdminClient {
    c.admin(i).unwrap()
}

/// The serving leader other than `except` (a paused member's admin port would not answer),
/// waiting up to 15 s.
fn leader_other_than(c: &Cluster, except: usize) -> usize {
    c.leader_within(Some(except), Duration::from_secs(15))
        .expect("no other leader within 15 s")
}

/// The member every member agrees leads, waiting up to 15 s.
fn leader(c: &Cluster) -> usize {
    c.leader_within(None, Duration::from_secs(15))
        .expect("no leader within 15 s")
}

/// TSO load with the checker on, in the background, for `duration` with `callers`
/// concurrent callers, against `endpoints` (the client learns the other members from them).
fn tso_load(
    endpoints: Vec<String>,
    c: &Cluster,
    duration: Duration,
    callers: usize,
) -> JoinHandle<anyhow::Result<Report>> {
    let args = TsoArgs::checked(endpoints, c.ca.clone(), duration, callers);
    tokio::spawn(async move { run::run(&args).await })
}

/// Every member's client address.
fn every_member(c: &Cluster) -> Vec<String> {
    c.nodes.iter().map(|n| n.listen.clone()).collect()
}

/// Waits for the load and asserts what every fault here must leave: no timestamp out of
/// order or handed out twice, and no error surfaced to a caller (the client rides the
/// fault out within its retry budget).
async fn rode_it_out(load: JoinHandle<anyhow::Result<Report>>) -> Report {
    let report = load.await.unwrap().unwrap();
    report.print();
    assert_eq!(report.violations, 0, "{report:?}");
    assert_eq!(
        report.errors, 0,
        "the client must ride the fault out: {report:?}"
    );
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_sigkilled_repeatedly_never_steps_back() {
    let (_tmp, mut c) = tokio::task::block_in_place(start_cluster);
    let ca = c.ca.clone();
    let first = tokio::task::block_in_place(|| leader(&c));

    // A follower refuses TSO and names the leader.
    let follower = (first + 1) % 3;
    match direct_stream(&c.nodes[follower], &ca)
        .await
        .call(&Request::Tso { count: 1 })
        .await
        .unwrap()
    {
        Response::Err(ErrorReply::NotLeader { leader: Some(l) }) => {
            assert_eq!(l.name, c.nodes[first].name)
        }
        other => panic!("a follower answered {other:?}"),
    }

    let kills = 5;
    // Only the first leader's address: the client must learn the others from it, since that
    // node is the first to die.
    let load = tso_load(
        vec![c.nodes[first].listen.clone()],
        &c,
        Duration::from_secs(4 + 5 * kills),
        32,
    );
    let mut failovers = Vec::new();
    for _ in 0..kills {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let old = tokio::task::block_in_place(|| leader(&c));
        let killed = Instant::now();
        c.nodes[old].process.take().unwrap().kill().unwrap();
        let new = tokio::task::block_in_place(|| leader(&c));
        failovers.push(killed.elapsed());
        assert_ne!(new, old);
        tokio::task::block_in_place(|| c.nodes[old].start()).unwrap();
    }
    let report = rode_it_out(load).await;
    println!("failovers (SIGKILL to a new leader serving): {failovers:?}");
    assert!(report.ops > 1_000);
    // The figures are measurements (printed, recorded in tuning.md), not asserted: a loaded
    // machine must not fail a correct cluster. Liveness is asserted: each failover finished
    // (`leader` waits at most 15 s) and the client never gave up.
    c.stop_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_transfer_to_each_member_in_turn() {
    let (_tmp, mut c) = tokio::task::block_in_place(start_cluster);
    tokio::task::block_in_place(|| leader(&c));

    let load = tso_load(every_member(&c), &c, Duration::from_secs(9), 32);
    let mut transfers = Vec::new();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let current = tokio::task::block_in_place(|| leader(&c));
        let target = (current + 1) % 3;
        let started = Instant::now();
        let admin = admin_of(&c, current);
        let path = format!("/api/v1/leader/transfer/{}", c.nodes[target].name);
        let (status, body) = tokio::task::block_in_place(|| admin.post(&path)).unwrap();
        let took = started.elapsed();
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains(&format!("\"name\":\"{}\"", c.nodes[target].name)),
            "{body}"
        );
        assert_eq!(tokio::task::block_in_place(|| leader(&c)), target);
        transfers.push(took);
    }
    // A follower refuses to transfer, and so does a leader asked for an unknown member.
    let current = tokio::task::block_in_place(|| leader(&c));
    let follower = admin_of(&c, (current + 1) % 3);
    let (status, _) =
        tokio::task::block_in_place(|| follower.post("/api/v1/leader/transfer/n0")).unwrap();
    assert_eq!(status, 409);
    let admin = admin_of(&c, current);
    let (status, _) =
        tokio::task::block_in_place(|| admin.post("/api/v1/leader/transfer/nobody")).unwrap();
    assert_eq!(status, 404);

    rode_it_out(load).await;
    println!("transfers (request to the target leading, verified): {transfers:?}");
    // Measured, not asserted (see the failover test); each transfer did complete and verify.
    // The members API lists all three, all healthy, one leader.
    let (status, members) =
        tokio::task::block_in_place(|| admin.get_json("/api/v1/members")).unwrap();
    assert_eq!(status, 200);
    let list = members["members"].as_array().unwrap();
    assert_eq!(list.len(), 3, "{members}");
    assert!(list.iter().all(|m| m["healthy"] == true), "{members}");
    assert_eq!(list.iter().filter(|m| m["is_leader"] == true).count(), 1);
    c.stop_all().unwrap();
}

/// One counter from the Prometheus text `client` answers (etcd's or a node's).
fn counter(client: &AdminClient, name: &str) -> f64 {
    let (_, text) = client.get("/metrics").unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("{name} missing from /metrics"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_state_writes_etcd_once_per_window_renewal_and_never_per_request() {
    let (_tmp, mut c) = tokio::task::block_in_place(start_cluster);
    let leader_admin = admin_of(&c, tokio::task::block_in_place(|| leader(&c)));
    let etcd_metrics = AdminClient::plain(&c.etcd.endpoint());
    let writes = || {
        counter(&etcd_metrics, "etcd_mvcc_put_total")
            + counter(&etcd_metrics, "etcd_mvcc_txn_total")
    };
    let (writes_before, renewals_before, requests_before) = tokio::task::block_in_place(|| {
        (
            writes(),
            counter(&leader_admin, "meridian_tso_window_renewals_total"),
            counter(&leader_admin, "meridian_requests_total{kind=\"tso\"}"),
        )
    });
    rode_it_out(tso_load(every_member(&c), &c, Duration::from_secs(4), 64)).await;
    let (writes_after, renewals_after, requests_after) = tokio::task::block_in_place(|| {
        (
            writes(),
            counter(&leader_admin, "meridian_tso_window_renewals_total"),
            counter(&leader_admin, "meridian_requests_total{kind=\"tso\"}"),
        )
    });
    let (writes, renewals, requests) = (
        writes_after - writes_before,
        renewals_after - renewals_before,
        requests_after - requests_before,
    );
    println!("{requests} TSO requests, {renewals} window renewals, {writes} etcd writes");
    assert!(requests > 1_000.0, "{requests}");
    assert!(renewals >= 2.0, "{renewals}");
    // Each txn/put counter may include the write of a renewal that was in flight at a read.
    assert!(
        (writes - renewals).abs() <= 1.0,
        "{writes} etcd writes for {renewals} renewals"
    );
    c.stop_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_gone_longer_than_the_lease_stops_the_leader_then_service_resumes() {
    let (_tmp, mut c) = tokio::task::block_in_place(start_cluster);
    let ca = c.ca.clone();
    let old = tokio::task::block_in_place(|| leader(&c));

    // A stream straight to the leader, never redirected, to see what it hands out.
    let mut stream = direct_stream(&c.nodes[old], &ca).await;

    let load = tso_load(every_member(&c), &c, Duration::from_secs(10), 16);
    tokio::time::sleep(Duration::from_secs(1)).await;
    c.etcd.stop().unwrap();
    let down = Instant::now();
    // Lease TTL 2 s minus the 300 ms margin: past it the old leader must hand out nothing.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    match stream.call(&Request::Tso { count: 1 }).await {
        Ok(Response::Err(_)) | Err(_) => {}
        Ok(other) => panic!(
            "{:?} after {:?} without etcd: {other:?}",
            c.nodes[old].name,
            down.elapsed()
        ),
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    tokio::task::block_in_place(|| c.etcd.resume()).unwrap();
    let back = tokio::task::block_in_place(|| leader(&c));
    println!(
        "etcd down {:?}; leader after: {}",
        down.elapsed(),
        c.nodes[back].name
    );

    rode_it_out(load).await;
    c.stop_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_member_refuses_tso_and_never_campaigns() {
    let (_tmp, mut c) = tokio::task::block_in_place(start_cluster);
    let ca = c.ca.clone();
    let first = tokio::task::block_in_place(|| leader(&c));
    let (removed, other) = ((first + 1) % 3, (first + 2) % 3);
    let admin = admin_of(&c, first);
    let (status, _) = tokio::task::block_in_place(|| {
        admin.delete(&format!("/api/v1/members/{}", c.nodes[first].name))
    })
    .unwrap();
    assert_eq!(
        status, 409,
        "the leader cannot be removed before a transfer"
    );
    let (status, _) =
        tokio::task::block_in_place(|| admin.delete("/api/v1/members/nobody")).unwrap();
    assert_eq!(status, 404);
    let (_, before) = tokio::task::block_in_place(|| admin.get_json("/api/v1/members")).unwrap();
    let old_ids: Vec<serde_json::Value> = before["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(old_ids.len(), 3, "{before}");
    let (status, body) = tokio::task::block_in_place(|| {
        admin.delete(&format!("/api/v1/members/{}", c.nodes[removed].name))
    })
    .unwrap();
    assert_eq!(status, 200, "{body}");

    let removed_admin = admin_of(&c, removed);
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (_, health) =
            tokio::task::block_in_place(|| removed_admin.get_json("/health")).unwrap();
        if health["removed"] == true {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the removed member does not say so: {health}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    match direct_stream(&c.nodes[removed], &ca)
        .await
        .call(&Request::Tso { count: 1 })
        .await
        .unwrap()
    {
        Response::Err(ErrorReply::NotLeader { .. }) => {}
        other => panic!("a removed member answered {other:?}"),
    }
    let (_, members) = tokio::task::block_in_place(|| admin.get_json("/api/v1/members")).unwrap();
    assert_eq!(members["members"].as_array().unwrap().len(), 2, "{members}");

    // With the leader gone, only the remaining member may take over.
    c.nodes[first].process.take().unwrap().kill().unwrap();
    assert_eq!(tokio::task::block_in_place(|| leader(&c)), other);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, health) = tokio::task::block_in_place(|| removed_admin.get_json("/health")).unwrap();
    assert_eq!(health["is_leader"], false);

    // The same name started again (a replaced pod, a re-added ordinal) is a new member with a
    // new id: it is listed, not removed, and may lead.
    c.nodes[removed].process.take().unwrap().stop().unwrap();
    tokio::task::block_in_place(|| c.nodes[removed].start()).unwrap();
    let rejoined_admin = admin_of(&c, removed);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, listed) =
            tokio::task::block_in_place(|| rejoined_admin.get_json("/api/v1/members")).unwrap();
        let (_, health) =
            tokio::task::block_in_place(|| rejoined_admin.get_json("/health")).unwrap();
        let back = listed["members"].as_array().is_some_and(|m| {
            m.iter()
                .any(|m| m["name"] == c.nodes[removed].name.as_str())
        });
        if back && health["removed"] == false {
            let new = listed["members"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == c.nodes[removed].name.as_str())
                .unwrap()["id"]
                .clone();
            assert!(!old_ids.contains(&new), "a rejoined member reuses an id");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted member did not rejoin: {listed} {health}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    c.stop_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_clock_jumping_back_10s_never_steps_back() {
    let (_tmp, mut c) = tokio::task::block_in_place(start_cluster);
    let first = tokio::task::block_in_place(|| leader(&c));
    let load = tso_load(every_member(&c), &c, Duration::from_secs(7), 16);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let admin = admin_of(&c, first);
    let (status, body) =
        tokio::task::block_in_place(|| admin.post("/api/v1/debug/clock/shift/-10000")).unwrap();
    assert_eq!(status, 200, "{body}");
    // The leader, 10 s ahead of its own clock, hands the term to a member with a sane clock.
    let deadline = Instant::now() + Duration::from_secs(5);
    let next = loop {
        let l = tokio::task::block_in_place(|| leader(&c));
        if l != first {
            break l;
        }
        assert!(
            Instant::now() < deadline,
            "the leader with the clock 10 s behind kept the term"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    rode_it_out(load).await;
    println!(
        "leader {} -> {} after its clock jumped back 10 s",
        c.nodes[first].name, c.nodes[next].name
    );
    c.stop_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_clock_jumping_forward_5s_keeps_the_term_and_serves_on() {
    let (_tmp, mut c) = tokio::task::block_in_place(start_cluster);
    let first = tokio::task::block_in_place(|| leader(&c));
    let load = tso_load(every_member(&c), &c, Duration::from_secs(6), 16);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let admin = admin_of(&c, first);
    let (status, body) =
        tokio::task::block_in_place(|| admin.post("/api/v1/debug/clock/shift/5000")).unwrap();
    assert_eq!(status, 200, "{body}");
    // Its clock is now past the end of its window: the renewal that follows covers it, and a
    // window run out for a moment is not a stuck one, so the term is kept.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        tokio::task::block_in_place(|| leader(&c)),
        first,
        "a forward clock jump cost the leader its term"
    );
    rode_it_out(load).await;
    c.stop_all().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_is_left_for_its_successor_and_never_serves_stale_after_it_resumes() {
    let (_tmp, mut c) = tokio::task::block_in_place(start_cluster);
    let ca = c.ca.clone();
    let first = tokio::task::block_in_place(|| leader(&c));
    // A client connecting now learns every member (the registry is read every 500 ms).
    let mut probe = direct_stream(&c.nodes[first], &ca).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match probe.call(&Request::GetMembers).await.unwrap() {
            Response::Ok(meridian::proto::Reply::Members(m)) if m.members.len() == 3 => break,
            other => assert!(Instant::now() < deadline, "members never listed: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pause = Duration::from_secs(8);
    // Only the leader's address: the client learns the others from it.
    let load = tso_load(
        vec![c.nodes[first].listen.clone()],
        &c,
        Duration::from_secs(2) + pause + Duration::from_secs(4),
        32,
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let paused = Instant::now();
    c.nodes[first]
        .process
        .as_ref()
        .unwrap()
        .signal(libc::SIGSTOP)
        .unwrap();
    let successor = tokio::task::block_in_place(|| leader_other_than(&c, first));
    let elected = paused.elapsed();
    tokio::time::sleep(pause.saturating_sub(paused.elapsed())).await;
    // It wakes up believing it leads; it must prove its lease again before serving, and it
    // cannot: the successor holds the key.
    c.nodes[first]
        .process
        .as_ref()
        .unwrap()
        .signal(libc::SIGCONT)
        .unwrap();
    let report = rode_it_out(load).await;
    println!(
        "SIGSTOP of the leader for {pause:?}: n{successor} serving after {elected:?}, \
         longest stretch without a timestamp {:.0} ms",
        report.longest_stall_ms
    );
    // The client left the silent leader for its successor instead of waiting out the pause.
    // (How soon is a measurement, printed and in tuning.md; this bound is the behaviour.)
    assert!(
        report.longest_stall_ms < pause.as_millis() as f64 - 1000.0,
        "the client waited for the paused leader: {report:?}"
    );
    c.stop_all().unwrap();
}

/// `loadgen route --follower-reads` spreads its lookups over every member (PD's follower
/// handle): each member answers its share from its own copy of the index, every answer is a
/// region that holds its key (the route checks each), and none is refused once the followers
/// are in sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_with_follower_reads_is_answered_by_every_member() {
    let (_tmp, c) = start_cluster();
    let first = leader(&c);
    let mut opts = ClientOptions::new(every_member(&c), Trust::Ca(c.ca.clone()));
    opts.retry_budget = Duration::from_secs(10);
    let client = Client::connect(opts).await.unwrap();
    meridian::harness::bootstrap_one_region(&client, "tikv-1:20160")
        .await
        .unwrap();
    let placement = "meridian_requests_total{kind=\"placement\"}";
    let served = |c: &Cluster| -> Vec<f64> {
        (0..3)
            .map(|i| counter(&admin_of(c, i), placement))
            .collect()
    };
    // Each member answers a follower read before the load starts: the followers have synced.
    for node in &c.nodes {
        let trust = Trust::Ca(c.ca.clone());
        let mut pd = meridian::pd_grpc::connect(&node.listen, &trust)
            .await
            .unwrap();
        let cluster_id = meridian::pd_grpc::cluster_id(&mut pd).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut ask = tonic::Request::new(meridian::kvproto::pdpb::GetRegionRequest {
                header: meridian::harness::pd_header(cluster_id),
                region_key: b"t".to_vec(),
                ..Default::default()
            });
            ask.metadata_mut().insert(
                "pd-allow-follower-handle",
                tonic::metadata::MetadataValue::from_static("true"),
            );
            if pd
                .get_region(ask)
                .await
                .is_ok_and(|r| r.into_inner().region.is_some())
            {
                break;
            }
            assert!(Instant::now() < deadline, "{} never synced", node.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Over gRPC (PD's metadata key), then over QUIC (three streams, one per member, each
    // marked with `AllowFollowerHandle`).
    for (protocol, streams) in [
        (loadgen::args::Protocol::Grpc, 1),
        (loadgen::args::Protocol::Quic, 3),
    ] {
        let before = served(&c);
        let report = loadgen::route::run(&loadgen::route::RouteArgs {
            target: loadgen::target::TargetArgs {
                endpoints: every_member(&c),
                ca: Some(c.ca.clone()),
                insecure: false,
            },
            duration: Duration::from_secs(2),
            connections: 1,
            streams,
            depth: 6,
            json: None,
            protocol,
            rpc: match protocol {
                loadgen::args::Protocol::Grpc => loadgen::route::Rpc::QueryRegion,
                loadgen::args::Protocol::Quic => loadgen::route::Rpc::GetRegion,
            },
            plot: None,
            follower_reads: true,
        })
        .await
        .unwrap();
        assert_eq!(report.errors, 0, "{protocol:?}: {report:?}");
        assert_eq!(report.misses, 0, "one region holds every key: {report:?}");
        assert!(report.lookups > 0);
        let after = served(&c);
        for i in 0..3 {
            let share = after[i] - before[i];
            assert!(
                share > 0.0,
                "{protocol:?}: member {i} (leader {first}) answered no lookup: {before:?} -> {after:?}"
            );
        }
    }
}
