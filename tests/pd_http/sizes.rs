//! A region's sizes in PD's `RegionInfo`: what its leader's heartbeat reported (approximate
//! size in whole MiB, keys, bytes and keys written), read from the shard that owns the region,
//! on every region route; a region whose leader has not reported shows PD's zeros; a caller
//! with no role reads none of it. The peers a leader reports still catching up show as PD's
//! `pending_peers`, rendered as `peers` renders them, and are gone once reported caught up.

use super::roles::holder;
use super::*;
use meridian::harness::{metapb_peer, metapb_region, metapb_store};
use meridian::kvproto::metapb;
use meridian::tls::cert::Role;
use serde_json::json;

/// A node on `data` with two regions (`populate`'s), and its address and trust.
async fn populated(data: &std::path::Path) -> (Node, Populated, String, Trust) {
    let mut n = start(data).await;
    let (addr, trust) = (n.addr().to_string(), n.trust.clone());
    let populated = n.populate().await;
    (n, populated, addr, trust)
}

/// What `populate` made: the store, the right region, its peer, the left region, its peer.
type Populated = (u64, u64, u64, u64, u64);

/// Opens a region heartbeat stream that sends `first`; the sender, for more, and the replies,
/// which must be kept for the stream to stay open.
async fn heartbeats(
    n: &mut Node,
    first: pdpb::RegionHeartbeatRequest,
) -> (
    tokio::sync::mpsc::Sender<pdpb::RegionHeartbeatRequest>,
    tonic::Streaming<pdpb::RegionHeartbeatResponse>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(first).await.unwrap();
    let replies =
        n.pd.region_heartbeat(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
    (tx, replies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regions_reported_sizes_show_on_every_region_route() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (mut n, (s, r, _p, left, left_peer), addr, trust) = populated(&data).await;

    // The left region's leader reports its sizes.
    let leader = metapb_peer(left_peer, s);
    let beat = pdpb::RegionHeartbeatRequest {
        header: n.h(),
        region: Some(metapb_region(left, b"", b"m", (1, 2), vec![leader])),
        leader: Some(leader),
        approximate_size: (96 << 20) + 4096,
        approximate_keys: 960_000,
        bytes_written: 64 << 10,
        keys_written: 640,
        ..Default::default()
    };
    let beat0 = beat.clone();
    let (tx, _replies) = heartbeats(&mut n, beat).await;

    let path = format!("/pd/api/v1/region/id/{left}");
    let by_id = until_both(&addr, &trust, &path, |v| v["approximate_size"] != 0).await;
    let reported = json!({
        "cpu_usage": 0,
        "written_bytes": 64 << 10,
        "read_bytes": 0,
        "written_keys": 640,
        "read_keys": 0,
        "approximate_size": 96,
        "approximate_keys": 960_000,
        "approximate_kv_size": 0,
        "approximate_columnar_kv_size": 0,
    });
    let fields = |v: &serde_json::Value| {
        let mut only = serde_json::Map::new();
        for k in reported.as_object().unwrap().keys() {
            only.insert(k.clone(), v[k].clone());
        }
        serde_json::Value::Object(only)
    };
    assert_eq!(fields(&by_id), reported);
    assert_eq!(
        by_id["leader"],
        json!({"id": left_peer, "store_id": s, "role_name": "Voter"})
    );
    // PD leaves out empty peer lists.
    assert!(by_id.get("down_peers").is_none() && by_id.get("pending_peers").is_none());

    let by_key = get_json(&addr, &trust, "/pd/api/v1/region/key/a").await;
    assert_eq!(by_key, by_id);
    let unreported = json!({
        "cpu_usage": 0, "written_bytes": 0, "read_bytes": 0, "written_keys": 0, "read_keys": 0,
        "approximate_size": 0, "approximate_keys": 0, "approximate_kv_size": 0,
        "approximate_columnar_kv_size": 0,
    });
    for path in ["/pd/api/v1/regions", "/pd/api/v1/regions/key?key=&limit=10"] {
        let all = get_json(&addr, &trust, path).await;
        assert_eq!(all["count"], 2, "{path}");
        let regions = all["regions"].as_array().unwrap();
        assert_eq!(regions[0], by_id, "{path}");
        assert_eq!(regions[1]["id"], r, "{path}");
        assert_eq!(fields(&regions[1]), unreported, "{path}");
    }

    // PD's size rules (`RegionFromHeartbeat`, `Inherit`): a report of size 0 (not measured
    // yet) keeps the size and keys before it; any data under 1 MiB shows as 1; whole MiB
    // round down.
    for (bytes, keys, written, shown) in [
        (0, 0, 1024, (96, 960_000)),
        (100, 3, 2048, (1, 3)),
        ((2 << 20) - 1, 5, 4096, (1, 5)),
        (0, 0, 8192, (1, 5)),
    ] {
        let mut again = beat0.clone();
        again.approximate_size = bytes;
        again.approximate_keys = keys;
        again.bytes_written = written;
        tx.send(again).await.unwrap();
        let v = until_both(&addr, &trust, &path, |v| v["written_bytes"] == written).await;
        assert_eq!(
            (v["approximate_size"].clone(), v["approximate_keys"].clone()),
            (json!(shown.0), json!(shown.1)),
            "{bytes} bytes reported"
        );
    }
    let mut again = beat0.clone();
    again.approximate_size = (96 << 20) + 4096;
    again.approximate_keys = 960_000;
    again.bytes_written = 64 << 10;
    tx.send(again).await.unwrap();
    assert_eq!(
        until_both(&addr, &trust, &path, |v| v["written_bytes"] == 64 << 10).await,
        by_id
    );

    // Any role reads the sizes; a certificate with none reads nothing.
    let store = holder(&data, "store", &[Role::Store]);
    assert_eq!(get_json(&addr, &store, &path).await, by_id);
    let nobody = holder(&data, "nobody", &[]);
    for proto in BOTH {
        let a = get(&addr, &nobody, proto, &path).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text());
        assert!(a.text().contains("role"), "{}", a.text());
    }
}

/// [`until`](super::until), then the same answer over both protocols: one protocol while the
/// change is on its way (two reads may straddle it), then both once it is there, to hold them
/// to the same answer.
async fn until_both(
    addr: &str,
    trust: &Trust,
    path: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    super::until(addr, trust, path, done).await;
    get_json(addr, trust, path).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_peers_show_until_reported_caught_up() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (mut n, (s, _r, _p, left, left_peer), addr, trust) = populated(&data).await;
    let s2 = meridian::harness::alloc_id(&mut n.pd, n.cluster_id)
        .await
        .unwrap();
    let learner_id = meridian::harness::alloc_id(&mut n.pd, n.cluster_id)
        .await
        .unwrap();
    n.pd.put_store(pdpb::PutStoreRequest {
        header: n.h(),
        store: Some(metapb_store(s2)),
    })
    .await
    .unwrap();

    // The left region's leader reports a learner added on the second store, still catching up.
    let leader = metapb_peer(left_peer, s);
    let learner = metapb::Peer {
        role: metapb::PeerRole::Learner as i32,
        ..metapb_peer(learner_id, s2)
    };
    let region = metapb_region(left, b"", b"m", (2, 2), vec![leader, learner]);
    let beat = pdpb::RegionHeartbeatRequest {
        header: n.h(),
        region: Some(region),
        leader: Some(leader),
        pending_peers: vec![learner],
        ..Default::default()
    };
    let (tx, _replies) = heartbeats(&mut n, beat.clone()).await;

    let path = format!("/pd/api/v1/region/id/{left}");
    let by_id = until_both(&addr, &trust, &path, |v| v.get("pending_peers").is_some()).await;
    let shown = json!({"id": learner_id, "store_id": s2, "role": 1, "role_name": "Learner",
        "is_learner": true});
    assert_eq!(by_id["pending_peers"], json!([shown]));
    assert_eq!(by_id["peers"][1], shown, "rendered as peers are");
    let all = get_json(&addr, &trust, "/pd/api/v1/regions").await;
    assert_eq!(all["regions"][0], by_id);
    assert!(all["regions"][1].get("pending_peers").is_none(), "{all}");

    // Caught up: PD leaves the empty list out.
    tx.send(pdpb::RegionHeartbeatRequest {
        pending_peers: vec![],
        ..beat
    })
    .await
    .unwrap();
    let caught_up = until_both(&addr, &trust, &path, |v| v.get("pending_peers").is_none()).await;
    assert_eq!(caught_up["peers"], by_id["peers"]);
    let all = get_json(&addr, &trust, "/pd/api/v1/regions").await;
    assert_eq!(all["regions"][0], caught_up);
}

/// A store's status as PD builds it from its region tree: the regions with a peer on the
/// store and those it leads, with their approximate sizes summed in MiB, on `/store/{id}` and
/// `/stores` alike; moved by each report that changes a size, a leader or the peers, and read
/// with any role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stores_status_sums_the_regions_it_holds_and_leads() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let (mut n, (s, r, p, left, left_peer), addr, trust) = populated(&data).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(
            meridian::harness::alloc_id(&mut n.pd, n.cluster_id)
                .await
                .unwrap(),
        );
    }
    let (s2, s3, q, q2, q3) = (ids[0], ids[1], ids[2], ids[3], ids[4]);
    for store in [s2, s3] {
        n.pd.put_store(pdpb::PutStoreRequest {
            header: n.h(),
            store: Some(metapb_store(store)),
        })
        .await
        .unwrap();
    }

    // Each region gains a peer on the second store; the left is led from the first store,
    // the right from the second.
    let header = n.h();
    let beat =
        |region: metapb::Region, leader: metapb::Peer, bytes: u64| pdpb::RegionHeartbeatRequest {
            header: header.clone(),
            region: Some(region),
            leader: Some(leader),
            approximate_size: bytes,
            approximate_keys: bytes >> 10,
            ..Default::default()
        };
    let left_peers = vec![metapb_peer(left_peer, s), metapb_peer(q, s2)];
    let right_peers = vec![metapb_peer(p, s), metapb_peer(q2, s2)];
    let left_region = metapb_region(left, b"", b"m", (2, 2), left_peers.clone());
    let right_region = metapb_region(r, b"m", b"", (2, 2), right_peers.clone());
    let (tx, _replies) = heartbeats(
        &mut n,
        beat(left_region.clone(), left_peers[0], (96 << 20) + 4096),
    )
    .await;
    tx.send(beat(right_region.clone(), right_peers[1], 10 << 20))
        .await
        .unwrap();

    let status = |regions: u64, leaders: u64, region_size: u64, leader_size: u64| {
        json!({
            "region_count": regions, "leader_count": leaders,
            "region_size": region_size, "leader_size": leader_size,
            "leader_score": leaders as f64,
        })
    };
    let fields = |v: &serde_json::Value| {
        let st = &v["status"];
        json!({
            "region_count": st["region_count"], "leader_count": st["leader_count"],
            "region_size": st["region_size"], "leader_size": st["leader_size"],
            "leader_score": st["leader_score"],
        })
    };
    let store_path = |id: u64| format!("/pd/api/v1/store/{id}");
    let settle = |id: u64, want: serde_json::Value| {
        let (addr, trust) = (addr.clone(), trust.clone());
        async move {
            let path = store_path(id);
            let got = until_both(&addr, &trust, &path, |v| fields(v) == want).await;
            assert_eq!(fields(&got), want, "store {id}");
            got
        }
    };
    let one = settle(s, status(2, 1, 106, 96)).await;
    let two = settle(s2, status(2, 1, 106, 10)).await;
    let none = settle(s3, status(0, 0, 0, 0)).await;
    let all = get_json(&addr, &trust, "/pd/api/v1/stores").await;
    assert_eq!(all["count"], 3);
    let listed = all["stores"].as_array().unwrap();
    for shown in [&one, &two, &none] {
        let id = &shown["store"]["id"];
        let same = listed.iter().find(|v| &v["store"]["id"] == id).unwrap();
        assert_eq!(fields(same), fields(shown), "store {id} on /stores");
    }

    // The left region grows; an unmeasured report keeps the size.
    tx.send(beat(left_region.clone(), left_peers[0], 200 << 20))
        .await
        .unwrap();
    tx.send(beat(left_region.clone(), left_peers[0], 0))
        .await
        .unwrap();
    settle(s, status(2, 1, 210, 200)).await;
    // Its leader moves to the second store.
    tx.send(beat(left_region.clone(), left_peers[1], 0))
        .await
        .unwrap();
    settle(s, status(2, 0, 210, 0)).await;
    settle(s2, status(2, 2, 210, 210)).await;
    // The right region's first-store peer moves to the third store.
    let moved = vec![metapb_peer(q2, s2), metapb_peer(q3, s3)];
    let moved_region = metapb_region(r, b"m", b"", (3, 2), moved.clone());
    tx.send(beat(moved_region, moved[0], 10 << 20))
        .await
        .unwrap();
    settle(s, status(1, 0, 200, 0)).await;
    settle(s3, status(1, 0, 10, 0)).await;

    // Any role reads it; a certificate with none is refused.
    let store = holder(&data, "store", &[Role::Store]);
    let path = store_path(s2);
    assert_eq!(
        fields(&get_json(&addr, &store, &path).await),
        status(2, 2, 210, 210)
    );
    let nobody = holder(&data, "nobody", &[]);
    for proto in BOTH {
        let a = get(&addr, &nobody, proto, "/pd/api/v1/stores").await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text());
    }

    // A restarted node's shards take their regions from the load: before any heartbeat,
    // each store holds what the persisted regions put on it (sizes are reported, not kept).
    drop((tx, _replies));
    n.server.stop().unwrap();
    let n = start(&data).await;
    let addr = n.addr().to_string();
    for (store, regions) in [(s, 1), (s2, 2), (s3, 1)] {
        let got = get_json(&addr, &trust, &store_path(store)).await;
        assert_eq!(
            got["status"]["region_count"], regions,
            "store {store} after a restart: {got}"
        );
    }
    n.server.stop().unwrap();
}
