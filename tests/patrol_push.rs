//! Operators reach TiKV as PD sends them, against the real binary: when a store goes Down, the
//! patrol makes the repair and pushes it at once on the region heartbeat stream of the region
//! leader's store, with no region heartbeat to answer (TiKV sends one a minute). The stream is
//! bound to a store only by heartbeats accepted for it.

use std::time::{Duration, Instant};

use meridian::harness::{
    metapb_peer as peer, metapb_region, metapb_store as store, pd_header as header,
};
use meridian::harness::{test_binary, ServerProcess};
use meridian::kvproto::metapb;
use meridian::kvproto::pdpb::{self, pd_client::PdClient};
use meridian::pd_grpc;
use meridian::tls::Trust;
use tokio_stream::StreamExt;
use tonic::transport::Channel;

async fn store_beat(pd: &mut PdClient<Channel>, cluster_id: u64, id: u64) {
    let stats = pdpb::StoreStats {
        store_id: id,
        region_count: 1,
        capacity: 100 << 30,
        available: 90 << 30,
        ..Default::default()
    };
    pd.store_heartbeat(pdpb::StoreHeartbeatRequest {
        header: header(cluster_id),
        stats: Some(stats),
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_stores_repair_is_pushed_to_the_leaders_stream_without_a_heartbeat() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = tmp.path().join("meridian.toml");
    // A store silent for 3 s is Down; the others stay Up as long as they heartbeat.
    std::fs::write(&config, "[schedule]\nmax_store_down_time_ms = 3000\n").unwrap();
    let server = ServerProcess::start_with(
        test_binary(),
        &data,
        "127.0.0.1:0",
        &[
            "--cores".into(),
            "2".into(),
            "--config".into(),
            config.to_str().unwrap().into(),
        ],
    )
    .unwrap();
    let grpc = server.grpc_addr.clone().unwrap();
    let mut pd = pd_grpc::connect(&grpc, &Trust::Ca(data.join("tls/ca.pem")))
        .await
        .unwrap();
    let cluster_id = pd_grpc::cluster_id(&mut pd).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pd
        .is_bootstrapped(pdpb::IsBootstrappedRequest {
            header: header(cluster_id),
        })
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "placement did not come up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Ids as a store takes them; every id below the last one is then known to the server.
    for _ in 0..20 {
        pd.alloc_id(pdpb::AllocIdRequest {
            header: header(cluster_id),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    // Stores 1-4; region 10 with voters on stores 1-3, led on store 1.
    let bootstrap_region = metapb::Region {
        id: 10,
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: 1,
            version: 1,
        }),
        peers: vec![peer(11, 1)],
        ..Default::default()
    };
    pd.bootstrap(pdpb::BootstrapRequest {
        header: header(cluster_id),
        store: Some(store(1)),
        region: Some(bootstrap_region),
    })
    .await
    .unwrap();
    for id in 2..=4 {
        pd.put_store(pdpb::PutStoreRequest {
            header: header(cluster_id),
            store: Some(store(id)),
        })
        .await
        .unwrap();
    }
    // Store 3 is Down 3 s after the server takes its last heartbeat, which is after this.
    let store_3_silent = Instant::now();
    for id in 1..=4 {
        store_beat(&mut pd, cluster_id, id).await;
    }
    // Stores 1, 2 and 4 go on heartbeating; store 3 falls silent.
    let mut beating = pd.clone();
    let alive = tokio::spawn(async move {
        loop {
            for id in [1, 2, 4] {
                store_beat(&mut beating, cluster_id, id).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });

    let peers = vec![peer(11, 1), peer(12, 2), peer(13, 3)];
    let region = metapb_region(10, b"", b"", (3, 1), peers);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(pdpb::RegionHeartbeatRequest {
        header: header(cluster_id),
        region: Some(region),
        leader: Some(peer(11, 1)),
        approximate_size: 96,
        ..Default::default()
    })
    .await
    .unwrap();
    let mut replies = pd
        .region_heartbeat(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();

    // No heartbeat is sent from here on: what comes is pushed. The first thing is the repair
    // of the peer on store 3, a learner added on store 4.
    let pushed = tokio::time::timeout(Duration::from_secs(20), replies.next())
        .await
        .expect("the repair is pushed without a heartbeat")
        .expect("the stream stays open")
        .unwrap();
    let waited = store_3_silent.elapsed();
    assert!(
        waited >= Duration::from_secs(3),
        "not before store 3 is Down: {waited:?}"
    );
    assert_eq!(pushed.region_id, 10);
    assert!(pushed.header.unwrap().error.is_none());
    // The stores are at 8.5.0: the one change goes alone in a ChangePeerV2, as PD sends it.
    assert!(pushed.change_peer.is_none(), "{:?}", pushed.change_peer);
    let mut changes = pushed
        .change_peer_v2
        .clone()
        .expect("a conf change")
        .changes;
    assert_eq!(changes.len(), 1, "{changes:?}");
    let change = changes.remove(0);
    assert_eq!(
        change.change_type,
        meridian::kvproto::eraftpb::ConfChangeType::AddLearnerNode as i32
    );
    assert_eq!(change.peer.unwrap().store_id, 4, "the one Up store left");
    assert_eq!(pushed.target_peer.unwrap().store_id, 1, "to the leader");
    alive.abort();
    drop(tx);
}
