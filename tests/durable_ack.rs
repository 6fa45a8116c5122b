//! Placement changes are durable before they are acknowledged: a split report answered
//! `Done`, then the node SIGKILLed at once, is in the map after a restart, every time.

use std::time::Duration;

use meridian::client::{Client, ClientOptions};
use meridian::harness::{bootstrap_one_region, test_binary, ServerProcess};
use meridian::placement::{Epoch, Peer, PeerRole, Region};

async fn connect(server: &ServerProcess) -> Client {
    let mut opts = ClientOptions::new(vec![server.client_addr.clone()], server.trust());
    opts.retry_budget = Duration::from_secs(15);
    Client::connect(opts).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_split_survives_a_sigkill_right_after_the_ack() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("node");
    let mut server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let client = connect(&server).await;
    let mut last = bootstrap_one_region(&client, "127.0.0.1:20160")
        .await
        .unwrap();
    let s1 = last.peers[0].store_id;
    let peer = |id| Peer {
        id,
        store_id: s1,
        role: PeerRole::Voter,
    };
    drop(client);

    // Each round: split the rightmost region once, and kill the node the moment the report
    // is acknowledged; the restarted node must hold the split.
    for round in 0..5u8 {
        let client = connect(&server).await;
        let split = client.ask_batch_split(last.clone(), 1).await.unwrap();
        let at = vec![b'k', round];
        let epoch = Epoch {
            conf_ver: 1,
            version: last.epoch.version + 1,
        };
        let left = Region {
            id: split[0].region_id,
            end_key: at.clone(),
            epoch,
            peers: vec![peer(split[0].peer_ids[0])],
            leader: Some(split[0].peer_ids[0]),
            ..last.clone()
        };
        let right = Region {
            start_key: at,
            epoch,
            ..last.clone()
        };
        client
            .report_batch_split(vec![left.clone(), right.clone()])
            .await
            .unwrap();
        server.kill().unwrap();
        server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
        let client = connect(&server).await;
        let map = client.scan_regions(b"", b"", 0).await.unwrap();
        assert!(
            map.contains(&left) && map.contains(&right),
            "round {round}: the acknowledged split is gone after SIGKILL: {map:?}"
        );
        last = right;
    }
    server.stop().unwrap();
}
