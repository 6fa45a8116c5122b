//! Three nodes on one real etcd, under continuous TSO load with the loadgen checker: the leader
//! is SIGKILLed and restarted several times; a follower refuses TSO with NotLeader naming the
//! leader; a leader paused (SIGSTOP) past its lease is left for its successor by the client.
//! Zero violations, and the client never surfaces an error.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loadgen::run::{self, TsoArgs};

use meridian::admin::AdminClient;
use meridian::client::{Client, ClientOptions, RpcStream};
use meridian::harness::{free_udp_port, test_binary, EtcdProcess, ServerProcess};
use meridian::proto::{ErrorReply, Request, Response};
use meridian::tls::Trust;

struct Node {
    name: String,
    data: PathBuf,
    listen: String,
    args: Vec<String>,
    process: Option<ServerProcess>,
}

impl Node {
    fn start(&mut self) {
        let mut args = vec!["--name".to_string(), self.name.clone()];
        args.extend(self.args.iter().cloned());
        self.process = Some(
            ServerProcess::start_with(&test_binary(), &self.data, &self.listen, &args).unwrap(),
        );
    }

    fn admin(&self) -> String {
        self.process.as_ref().unwrap().admin_addr.clone()
    }
}

/// etcd and three nodes; the temp dir lives as long as the first element.
fn start_cluster() -> (tempfile::TempDir, EtcdProcess, Vec<Node>, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    let nodes = cluster(tmp.path(), &etcd);
    let ca = nodes[0].data.join("tls").join("ca.pem");
    (tmp, etcd, nodes, ca)
}

/// A request stream to exactly `node`, never redirected: what that node itself answers.
async fn direct_stream(node: &Node, ca: &Path) -> RpcStream {
    let mut opts = ClientOptions::new(vec![node.listen.clone()], Trust::Ca(ca.to_path_buf()));
    opts.retry_budget = Duration::from_secs(1);
    let client = Client::connect(opts).await.unwrap();
    client.open_stream().await.unwrap()
}

/// SIGTERM to every running node; each must exit cleanly.
fn stop_all(nodes: &mut [Node]) {
    for node in nodes.iter_mut() {
        if let Some(p) = node.process.take() {
            p.stop().unwrap();
        }
    }
}

/// Three nodes sharing node 0's certificate, so one CA file verifies them all.
fn cluster(dir: &Path, etcd: &EtcdProcess) -> Vec<Node> {
    let config = dir.join("meridian.toml");
    std::fs::write(
        &config,
        "[election]\nlease_ttl_secs = 2\nsafety_margin_ms = 300\n[debug]\nclock_injection = true\n",
    )
    .unwrap();
    let base = vec![
        "--etcd".to_string(),
        etcd.endpoint(),
        "--config".into(),
        config.display().to_string(),
        "--cores".into(),
        "1".into(),
    ];
    let mut nodes: Vec<Node> = (0..3)
        .map(|i| Node {
            name: format!("n{i}"),
            data: dir.join(format!("n{i}")),
            listen: format!("127.0.0.1:{}", free_udp_port()),
            args: base.clone(),
            process: None,
        })
        .collect();
    nodes[0].start();
    let tls = nodes[0].data.join("tls");
    for node in nodes.iter_mut().skip(1) {
        node.args.extend([
            "--tls-cert".to_string(),
            tls.join("cert.pem").display().to_string(),
            "--tls-key".into(),
            tls.join("key.pem").display().to_string(),
        ]);
        node.start();
    }
    nodes
}

/// The index of the node every member agrees leads, waiting up to 15 s.
fn leader(nodes: &[Node]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        for (i, node) in nodes.iter().enumerate() {
            if node.process.is_none() {
                continue;
            }
            if let Ok((200, body)) = admin_of(nodes, i).get_json("/health") {
                if body["is_leader"] == true && body["serving"] == true {
                    return i;
                }
            }
        }
        assert!(Instant::now() < deadline, "no leader within 15 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_sigkilled_repeatedly_never_steps_back() {
    let (_tmp, _etcd, mut nodes, ca) = tokio::task::block_in_place(start_cluster);
    let first = tokio::task::block_in_place(|| leader(&nodes));

    // A follower refuses TSO and names the leader.
    let follower = (first + 1) % 3;
    match direct_stream(&nodes[follower], &ca)
        .await
        .call(&Request::Tso { count: 1 })
        .await
        .unwrap()
    {
        Response::Err(ErrorReply::NotLeader { leader: Some(l) }) => {
            assert_eq!(l.name, nodes[first].name)
        }
        other => panic!("a follower answered {other:?}"),
    }

    let kills = 5;
    // Only the first leader's address: the client must learn the others from it, since that
    // node is the first to die.
    let args = TsoArgs::checked(
        vec![nodes[first].listen.clone()],
        ca,
        Duration::from_secs(4 + 5 * kills),
        32,
    );
    let load = tokio::spawn(async move { run::run(&args).await });
    let mut failovers = Vec::new();
    for _ in 0..kills {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let old = tokio::task::block_in_place(|| leader(&nodes));
        let killed = Instant::now();
        nodes[old].process.take().unwrap().kill().unwrap();
        let new = tokio::task::block_in_place(|| leader(&nodes));
        failovers.push(killed.elapsed());
        assert_ne!(new, old);
        tokio::task::block_in_place(|| nodes[old].start());
    }
    let report = load.await.unwrap().unwrap();
    report.print();
    println!("failovers (SIGKILL to a new leader serving): {failovers:?}");
    assert_eq!(report.violations, 0, "{report:?}");
    assert_eq!(
        report.errors, 0,
        "the client must ride out each failover: {report:?}"
    );
    assert!(report.ops > 1_000);
    // The figures are measurements (printed, recorded in tuning.md), not asserted: a loaded
    // machine must not fail a correct cluster. Liveness is asserted: each failover finished
    // (`leader` waits at most 15 s) and the client never gave up.
    stop_all(&mut nodes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_transfer_to_each_member_in_turn() {
    let (_tmp, _etcd, mut nodes, ca) = tokio::task::block_in_place(start_cluster);
    tokio::task::block_in_place(|| leader(&nodes));

    let args = TsoArgs::checked(
        nodes.iter().map(|n| n.listen.clone()).collect(),
        ca,
        Duration::from_secs(9),
        32,
    );
    let load = tokio::spawn(async move { run::run(&args).await });
    let mut transfers = Vec::new();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let current = tokio::task::block_in_place(|| leader(&nodes));
        let target = (current + 1) % 3;
        let started = Instant::now();
        let admin = admin_of(&nodes, current);
        let path = format!("/api/v1/leader/transfer/{}", nodes[target].name);
        let (status, body) = tokio::task::block_in_place(|| admin.post(&path)).unwrap();
        let took = started.elapsed();
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains(&format!("\"name\":\"{}\"", nodes[target].name)),
            "{body}"
        );
        assert_eq!(tokio::task::block_in_place(|| leader(&nodes)), target);
        transfers.push(took);
    }
    // A follower refuses to transfer, and so does a leader asked for an unknown member.
    let current = tokio::task::block_in_place(|| leader(&nodes));
    let follower = admin_of(&nodes, (current + 1) % 3);
    let (status, _) =
        tokio::task::block_in_place(|| follower.post("/api/v1/leader/transfer/n0")).unwrap();
    assert_eq!(status, 409);
    let admin = admin_of(&nodes, current);
    let (status, _) =
        tokio::task::block_in_place(|| admin.post("/api/v1/leader/transfer/nobody")).unwrap();
    assert_eq!(status, 404);

    let report = load.await.unwrap().unwrap();
    report.print();
    println!("transfers (request to the target leading, verified): {transfers:?}");
    assert_eq!(report.violations, 0, "{report:?}");
    assert_eq!(report.errors, 0, "{report:?}");
    // Measured, not asserted (see the failover test); each transfer did complete and verify.
    // The members API lists all three, all healthy, one leader.
    let (status, members) =
        tokio::task::block_in_place(|| admin.get_json("/api/v1/members")).unwrap();
    assert_eq!(status, 200);
    let list = members["members"].as_array().unwrap();
    assert_eq!(list.len(), 3, "{members}");
    assert!(list.iter().all(|m| m["healthy"] == true), "{members}");
    assert_eq!(list.iter().filter(|m| m["is_leader"] == true).count(), 1);
    stop_all(&mut nodes);
}

/// Node `i`'s admin API, with the client certificate beside node 0's CA (roles client, store
/// and admin), which every node of [`cluster`] trusts.
fn admin_of(nodes: &[Node], i: usize) -> AdminClient {
    let ca = nodes[0].data.join("tls").join("ca.pem");
    AdminClient::new(&nodes[i].admin(), &Trust::Ca(ca)).unwrap()
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
    let (_tmp, etcd, mut nodes, ca) = tokio::task::block_in_place(start_cluster);
    let leader_admin = admin_of(&nodes, tokio::task::block_in_place(|| leader(&nodes)));
    let etcd_metrics = AdminClient::plain(&etcd.endpoint());
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
    let args = TsoArgs::checked(
        nodes.iter().map(|n| n.listen.clone()).collect(),
        ca,
        Duration::from_secs(4),
        64,
    );
    let report = run::run(&args).await.unwrap();
    assert_eq!(report.violations, 0);
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
    stop_all(&mut nodes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_gone_longer_than_the_lease_stops_the_leader_then_service_resumes() {
    let (_tmp, mut etcd, mut nodes, ca) = tokio::task::block_in_place(start_cluster);
    let old = tokio::task::block_in_place(|| leader(&nodes));

    // A stream straight to the leader, never redirected, to see what it hands out.
    let mut stream = direct_stream(&nodes[old], &ca).await;

    let args = TsoArgs::checked(
        nodes.iter().map(|n| n.listen.clone()).collect(),
        ca,
        Duration::from_secs(10),
        16,
    );
    let load = tokio::spawn(async move { run::run(&args).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    etcd.stop().unwrap();
    let down = Instant::now();
    // Lease TTL 2 s minus the 300 ms margin: past it the old leader must hand out nothing.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    match stream.call(&Request::Tso { count: 1 }).await {
        Ok(Response::Err(_)) | Err(_) => {}
        Ok(other) => panic!(
            "{:?} after {:?} without etcd: {other:?}",
            nodes[old].name,
            down.elapsed()
        ),
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    tokio::task::block_in_place(|| etcd.resume()).unwrap();
    let back = tokio::task::block_in_place(|| leader(&nodes));
    println!(
        "etcd down {:?}; leader after: {}",
        down.elapsed(),
        nodes[back].name
    );

    let report = load.await.unwrap().unwrap();
    report.print();
    assert_eq!(report.violations, 0, "{report:?}");
    assert_eq!(
        report.errors, 0,
        "the client rides out the outage within its budget: {report:?}"
    );
    stop_all(&mut nodes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_member_refuses_tso_and_never_campaigns() {
    let (_tmp, _etcd, mut nodes, ca) = tokio::task::block_in_place(start_cluster);
    let first = tokio::task::block_in_place(|| leader(&nodes));
    let (removed, other) = ((first + 1) % 3, (first + 2) % 3);
    let admin = admin_of(&nodes, first);
    let (status, _) = tokio::task::block_in_place(|| {
        admin.delete(&format!("/api/v1/members/{}", nodes[first].name))
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
        admin.delete(&format!("/api/v1/members/{}", nodes[removed].name))
    })
    .unwrap();
    assert_eq!(status, 200, "{body}");

    let removed_admin = admin_of(&nodes, removed);
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
    match direct_stream(&nodes[removed], &ca)
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
    nodes[first].process.take().unwrap().kill().unwrap();
    assert_eq!(tokio::task::block_in_place(|| leader(&nodes)), other);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, health) = tokio::task::block_in_place(|| removed_admin.get_json("/health")).unwrap();
    assert_eq!(health["is_leader"], false);

    // The same name started again (a replaced pod, a re-added ordinal) is a new member with a
    // new id: it is listed, not removed, and may lead.
    nodes[removed].process.take().unwrap().stop().unwrap();
    tokio::task::block_in_place(|| nodes[removed].start());
    let rejoined_admin = admin_of(&nodes, removed);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, listed) =
            tokio::task::block_in_place(|| rejoined_admin.get_json("/api/v1/members")).unwrap();
        let (_, health) =
            tokio::task::block_in_place(|| rejoined_admin.get_json("/health")).unwrap();
        let back = listed["members"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["name"] == nodes[removed].name.as_str()));
        if back && health["removed"] == false {
            let new = listed["members"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == nodes[removed].name.as_str())
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
    stop_all(&mut nodes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_clock_jumping_back_10s_never_steps_back() {
    let (_tmp, _etcd, mut nodes, ca) = tokio::task::block_in_place(start_cluster);
    let first = tokio::task::block_in_place(|| leader(&nodes));
    let args = TsoArgs::checked(
        nodes.iter().map(|n| n.listen.clone()).collect(),
        ca,
        Duration::from_secs(7),
        16,
    );
    let load = tokio::spawn(async move { run::run(&args).await });
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let admin = admin_of(&nodes, first);
    let (status, body) =
        tokio::task::block_in_place(|| admin.post("/api/v1/debug/clock/shift/-10000")).unwrap();
    assert_eq!(status, 200, "{body}");
    // The leader, 10 s ahead of its own clock, hands the term to a member with a sane clock.
    let deadline = Instant::now() + Duration::from_secs(5);
    let next = loop {
        let l = tokio::task::block_in_place(|| leader(&nodes));
        if l != first {
            break l;
        }
        assert!(
            Instant::now() < deadline,
            "the leader with the clock 10 s behind kept the term"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let report = load.await.unwrap().unwrap();
    report.print();
    println!(
        "leader {} -> {} after its clock jumped back 10 s",
        nodes[first].name, nodes[next].name
    );
    assert_eq!(report.violations, 0, "{report:?}");
    assert_eq!(report.errors, 0, "{report:?}");
    stop_all(&mut nodes);
}

/// The serving leader among `nodes` other than `except` (a paused node's admin port would
/// not answer), waiting up to 15 s.
fn leader_other_than(nodes: &[Node], except: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        for (i, node) in nodes.iter().enumerate() {
            if i == except || node.process.is_none() {
                continue;
            }
            if let Ok((200, body)) = admin_of(nodes, i).get_json("/health") {
                if body["is_leader"] == true && body["serving"] == true {
                    return i;
                }
            }
        }
        assert!(Instant::now() < deadline, "no other leader within 15 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_is_left_for_its_successor_and_never_serves_stale_after_it_resumes() {
    let (_tmp, _etcd, mut nodes, ca) = tokio::task::block_in_place(start_cluster);
    let first = tokio::task::block_in_place(|| leader(&nodes));
    // A client connecting now learns every member (the registry is read every 500 ms).
    let mut probe = direct_stream(&nodes[first], &ca).await;
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
    let args = TsoArgs::checked(
        vec![nodes[first].listen.clone()],
        ca,
        Duration::from_secs(2) + pause + Duration::from_secs(4),
        32,
    );
    let load = tokio::spawn(async move { run::run(&args).await });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let paused = Instant::now();
    nodes[first]
        .process
        .as_ref()
        .unwrap()
        .signal(libc::SIGSTOP)
        .unwrap();
    let successor = tokio::task::block_in_place(|| leader_other_than(&nodes, first));
    let elected = paused.elapsed();
    tokio::time::sleep(pause.saturating_sub(paused.elapsed())).await;
    // It wakes up believing it leads; it must prove its lease again before serving, and it
    // cannot: the successor holds the key.
    nodes[first]
        .process
        .as_ref()
        .unwrap()
        .signal(libc::SIGCONT)
        .unwrap();
    let report = load.await.unwrap().unwrap();
    report.print();
    println!(
        "SIGSTOP of the leader for {pause:?}: n{successor} serving after {elected:?}, \
         longest stretch without a timestamp {:.0} ms",
        report.longest_stall_ms
    );
    assert_eq!(report.violations, 0, "{report:?}");
    assert_eq!(
        report.errors, 0,
        "the client rides out the pause: {report:?}"
    );
    // The client left the silent leader for its successor instead of waiting out the pause.
    // (How soon is a measurement, printed and in tuning.md; this bound is the behaviour.)
    assert!(
        report.longest_stall_ms < pause.as_millis() as f64 - 1000.0,
        "the client waited for the paused leader: {report:?}"
    );
    stop_all(&mut nodes);
}
