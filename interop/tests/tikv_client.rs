//! The `tikv-client` crate (0.4, as published on crates.io, unchanged) against the real
//! `meridian` binary over the PD-compatible gRPC front end:
//! - `TransactionClient::current_timestamp()` is strictly increasing, on one node and across
//!   SIGKILLs of the leader of a three-node etcd-backed cluster;
//! - `RawClient::get` resolves key -> region -> leader's store -> address through Meridian and
//!   dials that address (a TCP listener this test owns, standing in for a TiKV store).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use meridian::harness::{
    connect_when_placement_loads, on_a_free_port, test_binary, EtcdProcess, ServerProcess,
};
use meridian::kvproto::{metapb, pdpb};
use meridian::pd_grpc;
use meridian::tls::Trust;
use tikv_client::{Config, RawClient, TimestampExt, TransactionClient};

/// tikv-client's TLS always presents a client certificate: the one a node makes for local use
/// beside its CA, under the names PD clients' TLS settings use.
fn config(tls_dir: &Path) -> Config {
    Config::default()
        .with_security(
            tls_dir.join("ca.pem"),
            tls_dir.join("client.pem"),
            tls_dir.join("client-key.pem"),
        )
        .with_timeout(Duration::from_secs(5))
}

fn header(cluster_id: u64) -> Option<pdpb::RequestHeader> {
    Some(pdpb::RequestHeader {
        cluster_id,
        ..Default::default()
    })
}

/// Bootstraps the cluster with one store at `store_addr` and one region over every key.
async fn bootstrap(grpc: &str, ca: &Path, store_addr: &str) {
    // A node reports ready once it listens; placement serves once its term has loaded.
    let (mut pd, cluster_id) =
        connect_when_placement_loads(grpc, &Trust::Ca(ca.to_path_buf()), Duration::from_secs(20))
            .await
            .unwrap();
    let h = header(cluster_id);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let r = pd
            .alloc_id(pdpb::AllocIdRequest {
                header: h.clone(),
                count: 1,
            })
            .await
            .unwrap()
            .into_inner();
        ids.push(r.id);
    }
    let r = pd
        .bootstrap(pdpb::BootstrapRequest {
            header: h,
            store: Some(metapb::Store {
                id: ids[0],
                address: store_addr.to_string(),
                ..Default::default()
            }),
            region: Some(metapb::Region {
                id: ids[1],
                region_epoch: Some(metapb::RegionEpoch {
                    conf_ver: 1,
                    version: 1,
                }),
                peers: vec![metapb::Peer {
                    id: ids[2],
                    store_id: ids[0],
                    ..Default::default()
                }],
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.header.unwrap().error.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_and_routing_through_tikv_client() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let grpc = server.grpc_addr.clone().unwrap();
    let tls = data.join("tls");

    // A stand-in for a TiKV store: the client must find this address through Meridian alone.
    let store = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let store_addr = store.local_addr().unwrap().to_string();
    bootstrap(&grpc, &tls.join("ca.pem"), &store_addr).await;

    let txn = TransactionClient::new_with_config(vec![grpc.clone()], config(&tls))
        .await
        .unwrap();
    let mut last = 0;
    for _ in 0..1000 {
        let ts = txn.current_timestamp().await.unwrap().version();
        assert!(ts > last, "timestamp {ts} after {last}");
        last = ts;
    }

    let raw = RawClient::new_with_config(vec![grpc.clone()], config(&tls))
        .await
        .unwrap();
    let get = tokio::spawn(async move { raw.get(b"some key".to_vec()).await });
    let accepted = tokio::time::timeout(Duration::from_secs(10), store.accept()).await;
    assert!(
        accepted.is_ok(),
        "tikv-client never dialled the store Meridian routes the key to"
    );
    get.abort();
    server.stop().unwrap();
}

struct Node {
    name: String,
    data: PathBuf,
    listen: String,
    args: Vec<String>,
    process: Option<ServerProcess>,
}

impl Node {
    fn start(&mut self) -> anyhow::Result<()> {
        let mut args = vec!["--name".to_string(), self.name.clone()];
        args.extend(self.args.iter().cloned());
        self.process = Some(ServerProcess::start_with(
            test_binary(),
            &self.data,
            &self.listen,
            &args,
        )?);
        Ok(())
    }

    /// The first start, on a port chosen now, which it keeps across restarts.
    fn start_first(&mut self) {
        on_a_free_port(|listen| {
            self.listen = listen.to_string();
            self.start()
        })
        .unwrap();
    }
}

/// Whether `node` says it leads and serves (its admin API, trusted through node 0's CA, which
/// signed every node's certificate).
fn serves(node: &Node, ca: &Path) -> bool {
    let Some(p) = &node.process else { return false };
    matches!(
        meridian::admin::AdminClient::new(&p.admin_addr, &Trust::Ca(ca.to_path_buf()))
            .and_then(|a| a.get_json("/health")),
        Ok((200, body)) if body["is_leader"] == true && body["serving"] == true
    )
}

fn leader(nodes: &[Node]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let ca = nodes[0].data.join("tls").join("ca.pem");
        if let Some(i) = nodes.iter().position(|n| serves(n, &ca)) {
            return i;
        }
        assert!(Instant::now() < deadline, "no leader within 15 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tikv_client_timestamps_never_step_back_across_leader_sigkills() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    let config_file = tmp.path().join("meridian.toml");
    std::fs::write(
        &config_file,
        "[election]\nlease_ttl_secs = 2\nsafety_margin_ms = 300\n",
    )
    .unwrap();
    let base = vec![
        "--etcd".to_string(),
        etcd.endpoint(),
        "--config".into(),
        config_file.display().to_string(),
        "--cores".into(),
        "1".into(),
    ];
    let mut nodes: Vec<Node> = (0..3)
        .map(|i| Node {
            name: format!("n{i}"),
            data: tmp.path().join(format!("n{i}")),
            listen: String::new(),
            args: base.clone(),
            process: None,
        })
        .collect();
    // Every node shares node 0's certificate, so one CA verifies them all.
    tokio::task::block_in_place(|| nodes[0].start_first());
    let tls = nodes[0].data.join("tls");
    for node in nodes.iter_mut().skip(1) {
        node.args.extend([
            "--tls-cert".to_string(),
            tls.join("cert.pem").display().to_string(),
            "--tls-key".into(),
            tls.join("key.pem").display().to_string(),
        ]);
        tokio::task::block_in_place(|| node.start_first());
    }
    let endpoints: Vec<String> = nodes.iter().map(|n| n.listen.clone()).collect();
    let first = tokio::task::block_in_place(|| leader(&nodes));
    // tikv-client learns the members once, when it connects: wait until the leader lists all
    // three (members register in etcd as they start; the leader's view follows within 500 ms).
    let ca = tls.join("ca.pem");
    let mut pd = pd_grpc::connect(&nodes[first].listen, &Trust::Ca(ca))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let members = pd
            .get_members(pdpb::GetMembersRequest::default())
            .await
            .unwrap()
            .into_inner();
        if members.members.len() == 3 && members.members.iter().all(|m| !m.client_urls.is_empty()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the leader never listed all three members"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A follower answers GetMembers with the leader, and refuses the rest as PD's followers do.
    let leader_id = pd
        .get_members(pdpb::GetMembersRequest::default())
        .await
        .unwrap()
        .into_inner()
        .leader
        .unwrap()
        .member_id;
    let follower = &nodes[(first + 1) % 3];
    let mut to_follower = pd_grpc::connect(&follower.listen, &Trust::Ca(tls.join("ca.pem")))
        .await
        .unwrap();
    let seen = to_follower
        .get_members(pdpb::GetMembersRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(seen.leader.unwrap().member_id, leader_id);
    let refused = to_follower
        .is_bootstrapped(pdpb::IsBootstrappedRequest {
            header: header(seen.header.unwrap().cluster_id),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable);
    assert_eq!(refused.message(), "not leader");

    let txn = TransactionClient::new_with_config(endpoints, config(&tls))
        .await
        .unwrap();
    let mut last = 0u64;
    let mut taken = 0usize;
    let mut take = |ts: u64| {
        assert!(ts > last, "timestamp {ts} after {last}: stepped back");
        last = ts;
        taken += 1;
    };
    for round in 0..2 {
        for _ in 0..200 {
            take(txn.current_timestamp().await.unwrap().version());
        }
        let old = tokio::task::block_in_place(|| leader(&nodes));
        nodes[old].process.take().unwrap().kill().unwrap();
        // The client is unchanged: it finds the new leader through GetMembers on its own. A
        // call may fail while no member leads; the next ones must succeed.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut after = 0;
        while after < 200 {
            match txn.current_timestamp().await {
                Ok(ts) => {
                    take(ts.version());
                    after += 1;
                }
                Err(e) => assert!(
                    Instant::now() < deadline,
                    "round {round}: no timestamp within 30 s of the kill: {e}"
                ),
            }
        }
        tokio::task::block_in_place(|| nodes[old].start()).unwrap();
    }
    assert!(taken >= 800);
    for node in nodes.iter_mut() {
        if let Some(p) = node.process.take() {
            p.stop().unwrap();
        }
    }
}
