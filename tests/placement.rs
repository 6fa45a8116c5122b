//! Placement end to end on a real server over QUIC: bootstrap, stores, heartbeats with
//! operators, splits, routing reads; malformed and stale reports refused with the map left as
//! it was; everything back after a restart; followers refuse, a new leader loads from etcd.

use std::time::Duration;

use meridian::client::{Client, ClientError, ClientOptions};
use meridian::harness::{first_region, test_binary, up_store, EtcdProcess, ServerProcess};
use meridian::placement::{
    Epoch, Operator, Peer, PeerRole, Region, RegionStats, Store, StoreStats,
};
use meridian::proto::{ErrorReply, Refusal, Reply, Request, Response};
use meridian::tls::Trust;

async fn connect(addr: &str, ca: &std::path::Path) -> Client {
    let mut opts = ClientOptions::new(vec![addr.to_string()], Trust::Ca(ca.to_path_buf()));
    opts.retry_budget = Duration::from_secs(15);
    Client::connect(opts).await.unwrap()
}

fn store(id: u64) -> Store {
    up_store(id, &format!("127.0.0.1:{}", 20000 + id))
}

fn server_error(r: Result<impl std::fmt::Debug, ClientError>) -> ErrorReply {
    match r {
        Err(ClientError::Server(e)) => e,
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// The whole map, as a client sees it.
async fn all_regions(client: &Client) -> Vec<Region> {
    client.scan_regions(b"", b"", 0).await.unwrap()
}

/// Bootstraps a cluster of three stores and splits the first region into four; returns the
/// stores' ids and the regions in key order.
async fn build(client: &Client) -> (Vec<u64>, Vec<Region>) {
    assert!(!client.is_bootstrapped().await.unwrap());
    assert_eq!(
        server_error(client.get_region(b"a").await),
        ErrorReply::NotBootstrapped
    );
    let first = first_region(client).await.unwrap();
    let s1 = first.peers[0].store_id;
    client.bootstrap(store(s1), first.clone()).await.unwrap();
    assert!(client.is_bootstrapped().await.unwrap());
    assert!(matches!(
        server_error(client.bootstrap(store(s1), first.clone()).await),
        ErrorReply::InvalidArgument(_)
    ));
    let mut stores = vec![s1];
    for _ in 0..2 {
        let id = client.alloc_id().await.unwrap();
        client.put_store(store(id)).await.unwrap();
        stores.push(id);
    }
    for (i, id) in stores.iter().enumerate() {
        let stats = StoreStats {
            capacity: 100 << 30,
            available: 50 << 30,
            region_count: i as u64,
            ..Default::default()
        };
        client.store_heartbeat(*id, stats).await.unwrap();
    }
    assert_eq!(client.get_all_stores().await.unwrap().len(), 3);

    // One voter of three: the replica checker adds one on the least-loaded other store,
    // and sends the same operator again while it is pending.
    let op = client
        .region_heartbeat(first.clone(), RegionStats::default())
        .await
        .unwrap();
    let Some(Operator::AddPeer(added)) = op.clone() else {
        panic!("expected AddPeer, got {op:?}")
    };
    assert_eq!(added.store_id, stores[1], "least-loaded store");
    let again = client
        .region_heartbeat(first.clone(), RegionStats::default())
        .await
        .unwrap();
    assert_eq!(again, op);

    // Split at b, d, f: three new regions on the left, the old id keeps [f, end).
    let splits = client.ask_batch_split(first.clone(), 3).await.unwrap();
    assert_eq!(splits.len(), 3);
    let bounds: [&[u8]; 5] = [b"", b"b", b"d", b"f", b""];
    let epoch = Epoch {
        conf_ver: 1,
        version: 4,
    };
    let mut regions = Vec::new();
    for (i, s) in splits.iter().enumerate() {
        let peer = Peer {
            id: s.peer_ids[0],
            store_id: s1,
            role: PeerRole::Voter,
        };
        regions.push(Region {
            id: s.region_id,
            start_key: bounds[i].to_vec(),
            end_key: bounds[i + 1].to_vec(),
            epoch,
            leader: Some(peer.id),
            peers: vec![peer],
        });
    }
    regions.push(Region {
        start_key: b"f".to_vec(),
        epoch,
        ..first.clone()
    });
    client.report_batch_split(regions.clone()).await.unwrap();
    assert_eq!(all_regions(client).await, regions);
    (stores, regions)
}

async fn check_reads(client: &Client, regions: &[Region]) {
    let at = |key: &[u8]| regions.iter().find(|r| r.contains(key)).cloned();
    for key in [&b""[..], b"a", b"b", b"c", b"dd", b"f", b"zzz"] {
        assert_eq!(
            client.get_region_uncached(key).await.unwrap(),
            at(key),
            "{key:?}"
        );
        assert_eq!(
            client.get_region(key).await.unwrap(),
            at(key),
            "cached {key:?}"
        );
    }
    assert_eq!(
        client.get_prev_region(b"c").await.unwrap(),
        Some(regions[0].clone())
    );
    assert_eq!(client.get_prev_region(b"a").await.unwrap(), None);
    for r in regions {
        assert_eq!(
            client.get_region_by_id(r.id).await.unwrap(),
            Some(r.clone())
        );
    }
    assert_eq!(client.get_region_by_id(u64::MAX).await.unwrap(), None);
    let scanned = client.scan_regions(b"c", b"e", 0).await.unwrap();
    assert_eq!(scanned, regions[1..3].to_vec());
    assert_eq!(
        client.scan_regions(b"", b"", 2).await.unwrap(),
        regions[..2].to_vec()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_end_to_end_with_bad_input_and_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let ca = data.join("tls/ca.pem");
    let client = connect(&server.client_addr, &ca).await;
    let (stores, regions) = build(&client).await;
    check_reads(&client, &regions).await;

    // Bad input: each refused with a typed error, and the map is exactly as before.
    let before = all_regions(&client).await;
    let good = regions[1].clone();
    let on = |store_id: u64| -> Vec<Peer> {
        vec![Peer {
            store_id,
            ..good.peers[0].clone()
        }]
    };
    let mut cases: Vec<(&str, Region)> = vec![
        (
            "unknown store",
            Region {
                peers: on(424242),
                ..good.clone()
            },
        ),
        (
            "end before start",
            Region {
                start_key: b"c".to_vec(),
                end_key: b"b".to_vec(),
                ..good.clone()
            },
        ),
        (
            "empty range",
            Region {
                start_key: b"c".to_vec(),
                end_key: b"c".to_vec(),
                ..good.clone()
            },
        ),
        (
            "two peers on one store",
            Region {
                peers: vec![
                    good.peers[0].clone(),
                    Peer {
                        id: good.peers[0].id + 1,
                        ..good.peers[0].clone()
                    },
                ],
                ..good.clone()
            },
        ),
        (
            "stale epoch",
            Region {
                epoch: Epoch {
                    conf_ver: 1,
                    version: 1,
                },
                ..good.clone()
            },
        ),
        (
            "id never allocated",
            Region {
                id: 1 << 60,
                ..good.clone()
            },
        ),
        (
            "peer id never allocated",
            Region {
                peers: vec![Peer {
                    id: 1 << 60,
                    ..good.peers[0].clone()
                }],
                leader: Some(1 << 60),
                ..good.clone()
            },
        ),
        (
            "no leader",
            Region {
                leader: None,
                epoch: Epoch {
                    conf_ver: 9,
                    version: 9,
                },
                ..good.clone()
            },
        ),
    ];
    let absurd: Vec<Peer> = (0..1000)
        .map(|i| Peer {
            id: good.peers[0].id,
            store_id: stores[0] + i,
            role: PeerRole::Voter,
        })
        .collect();
    cases.push((
        "absurd peer count",
        Region {
            peers: absurd,
            ..good.clone()
        },
    ));
    for (name, bad) in cases {
        let e = server_error(client.region_heartbeat(bad, RegionStats::default()).await);
        assert!(
            matches!(
                e,
                ErrorReply::InvalidArgument(_) | ErrorReply::StaleEpoch(_)
            ),
            "{name}: {e:?}"
        );
        if name == "stale epoch" {
            assert!(matches!(e, ErrorReply::StaleEpoch(_)), "{name}: {e:?}");
        }
        assert_eq!(all_regions(&client).await, before, "{name} changed the map");
    }
    assert_eq!(
        server_error(client.store_heartbeat(999_999, StoreStats::default()).await),
        ErrorReply::Refused(Refusal::StoreNotFound(999_999))
    );
    assert!(matches!(
        server_error(client.put_store(store(1 << 60)).await),
        ErrorReply::InvalidArgument(_)
    ));
    assert!(matches!(
        server_error(client.ask_batch_split(regions[0].clone(), 0).await),
        ErrorReply::InvalidArgument(_)
    ));
    assert!(matches!(
        server_error(client.scan_regions(b"z", b"a", 0).await),
        ErrorReply::InvalidArgument(_)
    ));
    assert_eq!(client.get_all_stores().await.unwrap().len(), 3);

    // Restart: the same map and stores come back from disk, and ids never repeat.
    let last_id = client.alloc_id().await.unwrap();
    drop(client);
    server.stop().unwrap();
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let client = connect(&server.client_addr, &ca).await;
    assert!(client.is_bootstrapped().await.unwrap());
    assert_eq!(all_regions(&client).await, before);
    check_reads(&client, &regions).await;
    let stored: Vec<u64> = client
        .get_all_stores()
        .await
        .unwrap()
        .iter()
        .map(|s| s.store.id)
        .collect();
    assert_eq!(stored, stores);
    assert!(client.alloc_id().await.unwrap() > last_id);
    server.stop().unwrap();
}

/// The region each response of a pipelined exchange names.
fn located(responses: Vec<Response>) -> Vec<Option<u64>> {
    responses
        .into_iter()
        .map(|r| match r {
            Response::Ok(Reply::Region(r)) => r.map(|r| r.id),
            other => panic!("expected a region, got {other:?}"),
        })
        .collect()
}

/// Lookups sent together on one stream are answered together (one snapshot for all), yet
/// each sees every request before it on its stream: a split reported between two lookups
/// of the same key is visible to the second. A request that cannot be framed is refused by
/// the client before it is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_lookups_agree_with_single_ones_and_see_earlier_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let client = connect(&server.client_addr, &data.join("tls/ca.pem")).await;
    let (_, regions) = build(&client).await;
    let keys: Vec<&[u8]> = vec![b"", b"a", b"b", b"c", b"dd", b"f", b"zzz", b"c"];
    let mut stream = client.open_stream().await.unwrap();
    let lookups: Vec<Request> = keys
        .iter()
        .map(|k| Request::GetRegion { key: k.to_vec() })
        .collect();
    let together = located(stream.call_many(&lookups).await.unwrap());
    let mut one_by_one = Vec::new();
    for key in &keys {
        one_by_one.push(client.get_region_uncached(key).await.unwrap().map(|r| r.id));
    }
    assert_eq!(together, one_by_one);
    let expected: Vec<_> = keys
        .iter()
        .map(|k| regions.iter().find(|r| r.contains(k)).map(|r| r.id))
        .collect();
    assert_eq!(together, expected);

    // Split [b, d) at c; the report travels between two lookups of c in one write.
    let parent = regions[1].clone();
    let split = client.ask_batch_split(parent.clone(), 1).await.unwrap();
    let epoch = Epoch {
        version: parent.epoch.version + 1,
        ..parent.epoch
    };
    let left = Region {
        id: split[0].region_id,
        end_key: b"c".to_vec(),
        epoch,
        peers: vec![Peer {
            id: split[0].peer_ids[0],
            ..parent.peers[0].clone()
        }],
        leader: Some(split[0].peer_ids[0]),
        ..parent.clone()
    };
    let right = Region {
        start_key: b"c".to_vec(),
        epoch,
        ..parent.clone()
    };
    let exchange = stream
        .call_many(&[
            Request::GetRegion {
                key: b"bb".to_vec(),
            },
            Request::ReportBatchSplit {
                regions: vec![left.clone(), right.clone()],
            },
            Request::GetRegion {
                key: b"bb".to_vec(),
            },
            Request::GetRegion { key: b"c".to_vec() },
        ])
        .await
        .unwrap();
    assert!(matches!(exchange[1], Response::Ok(_)), "{:?}", exchange[1]);
    let ids = located(vec![
        exchange[0].clone(),
        exchange[2].clone(),
        exchange[3].clone(),
    ]);
    assert_eq!(ids, vec![Some(parent.id), Some(left.id), Some(right.id)]);

    // A request too large for a frame fails at once, typed, neither sent nor retried (the
    // budget is 15 s), and the stream and the client go on.
    let huge = Request::GetRegion {
        key: vec![0; meridian::proto::MAX_FRAME_LEN],
    };
    let asked = std::time::Instant::now();
    assert!(matches!(
        stream.call(&huge).await,
        Err(ClientError::Encode(_))
    ));
    assert!(matches!(
        client.call(huge).await,
        Err(ClientError::Encode(_))
    ));
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    assert!(matches!(
        stream.call(&Request::Ping).await,
        Ok(Response::Ok(Reply::Pong))
    ));
    server.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_refuse_and_a_new_leader_loads_the_map_from_etcd() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    let config = tmp.path().join("meridian.toml");
    std::fs::write(&config, "[election]\nlease_ttl_secs = 2\n").unwrap();
    let start = |name: &str| {
        let args: Vec<String> = [
            "--etcd",
            &etcd.endpoint(),
            "--name",
            name,
            "--cores",
            "2",
            "--config",
            config.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        ServerProcess::start_with(test_binary(), &tmp.path().join(name), "127.0.0.1:0", &args)
            .unwrap()
    };
    let a = start("a");
    let ca_a = tmp.path().join("a/tls/ca.pem");
    let client = connect(&a.client_addr, &ca_a).await;
    let (_, regions) = build(&client).await;
    let b = start("b");
    let ca_b = tmp.path().join("b/tls/ca.pem");

    // Straight to the follower: a typed NotLeader, naming a once b has seen the leader key
    // (a member that just started may not know it yet, and then says so with None).
    let mut raw = {
        let follower = connect(&b.client_addr, &ca_b).await;
        follower.open_stream().await.unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let resp = raw
            .call(&meridian::proto::Request::GetRegion { key: b"c".to_vec() })
            .await
            .unwrap();
        match resp {
            meridian::proto::Response::Err(ErrorReply::NotLeader { leader: Some(l) }) => {
                assert_eq!(l.name, "a");
                break;
            }
            meridian::proto::Response::Err(ErrorReply::NotLeader { leader: None })
                if std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => panic!("follower answered {other:?}"),
        }
    }
    drop(raw);

    // The leader dies; b takes over, loads the map from etcd and serves it.
    drop(client);
    a.kill().unwrap();
    let client = connect(&b.client_addr, &ca_b).await;
    assert_eq!(all_regions(&client).await, regions);
    check_reads(&client, &regions).await;
    b.stop().unwrap();
}
