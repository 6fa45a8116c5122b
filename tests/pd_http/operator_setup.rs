//! What the operator API's tests share: a node with four stores and region 10 reported on a
//! heartbeat stream (`setup`), or region 10 split in two halves for the merge tests
//! (`split_in_halves`), PD's answers to `POST /operators` checked as PD words them, and the
//! replies its leader gets, read until the one a test waits for.

use super::*;
use meridian::harness::{metapb_peer as peer, metapb_region, metapb_store as store};
use meridian::kvproto::metapb;
use serde_json::{json, Value};
use tokio_stream::StreamExt;

pub(super) async fn store_beat(
    pd: &mut PdClient<Channel>,
    h: Option<pdpb::RequestHeader>,
    id: u64,
) {
    let stats = pdpb::StoreStats {
        store_id: id,
        region_count: u32::from(id != 4),
        capacity: 100 << 30,
        available: 90 << 30,
        ..Default::default()
    };
    pd.store_heartbeat(pdpb::StoreHeartbeatRequest {
        header: h,
        stats: Some(stats),
    })
    .await
    .unwrap();
}

/// Region 10 over every key, voters on stores 1-3 (peers 11-13), led on store 1.
pub(super) fn region_10() -> metapb::Region {
    let peers = vec![peer(11, 1), peer(12, 2), peer(13, 3)];
    metapb_region(10, b"", b"", (3, 1), peers)
}

/// `POST /operators` with `body`: its status and its JSON string.
pub(super) async fn post(addr: &str, trust: &Trust, body: Value) -> (StatusCode, String) {
    let a = call(
        addr,
        trust,
        Method::POST,
        "/pd/api/v1/operators",
        Some(&body),
    )
    .await;
    let text = a
        .json()
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| a.text());
    (a.status, text)
}

/// `method path` with `body` (or none): asserts its status and that its body is the JSON string
/// `said`, as PD answers.
pub(super) async fn expect(
    addr: &str,
    trust: &Trust,
    method: Method,
    path: &str,
    body: Option<&Value>,
    (status, said): (StatusCode, &str),
) {
    let a = call(addr, trust, method.clone(), path, body).await;
    assert_eq!(
        (a.status, a.json()),
        (status, json!(said)),
        "{method} {path}: {}",
        a.text()
    );
}

/// `POST /operators` with `body`: asserts PD's word that the operator is created.
pub(super) async fn created(addr: &str, trust: &Trust, body: Value) {
    let ok = (StatusCode::OK, "The operator is created.");
    expect(addr, trust, Method::POST, OPERATORS, Some(&body), ok).await;
}

pub(super) const OPERATORS: &str = "/pd/api/v1/operators";
pub(super) const NOT_FOUND: (StatusCode, &str) = (
    StatusCode::INTERNAL_SERVER_ERROR,
    "[PD:operator:ErrOperatorNotFound]operator not found",
);

/// Reads the heartbeat stream until a reply for region 10 that `wanted` accepts.
pub(super) async fn leader_gets(
    replies: &mut tonic::Streaming<pdpb::RegionHeartbeatResponse>,
    wanted: impl Fn(&pdpb::RegionHeartbeatResponse) -> bool,
) -> pdpb::RegionHeartbeatResponse {
    reply_where(replies, |r| r.region_id == 10 && wanted(r)).await
}

/// Reads the heartbeat stream until a reply that `wanted` accepts: replies pushed for an
/// earlier operator may still be queued ahead of it.
pub(super) async fn reply_where(
    replies: &mut tonic::Streaming<pdpb::RegionHeartbeatResponse>,
    wanted: impl Fn(&pdpb::RegionHeartbeatResponse) -> bool,
) -> pdpb::RegionHeartbeatResponse {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let next = tokio::time::timeout_at(deadline, replies.next())
            .await
            .expect("the step reaches the leader")
            .expect("the stream stays open")
            .unwrap();
        if wanted(&next) {
            return next;
        }
    }
}

/// Region `region`'s heartbeat from its first peer, with `pending` catching up.
pub(super) fn beat(
    h: &Option<pdpb::RequestHeader>,
    region: metapb::Region,
    pending: Vec<metapb::Peer>,
) -> pdpb::RegionHeartbeatRequest {
    pdpb::RegionHeartbeatRequest {
        header: h.clone(),
        leader: region.peers.first().cloned(),
        region: Some(region),
        pending_peers: pending,
        approximate_size: 1 << 20,
        ..Default::default()
    }
}

/// Region 10 over `["", "m")` and region 21 over `["m", "")`, both on stores 1-3 (21's peers
/// 22-24), led on store 1.
pub(super) fn halves() -> (metapb::Region, metapb::Region) {
    let left = metapb_region(
        10,
        b"",
        b"m",
        (3, 2),
        vec![peer(11, 1), peer(12, 2), peer(13, 3)],
    );
    let right = metapb_region(
        21,
        b"m",
        b"",
        (3, 2),
        vec![peer(22, 1), peer(23, 2), peer(24, 3)],
    );
    (left, right)
}

/// [`setup`] at version 8.5.0 with region 10 split at "m": region 10 over `["", "m")` and
/// region 21 over `["m", "")` (its peers in `pending` catching up), both reported and known to
/// the node, and ids up to 30 taken. The two belong to different cores of the node's two, so
/// a merge of them runs on two shards. Returns the setup and the two halves.
pub(super) async fn split_in_halves(
    tmp: &tempfile::TempDir,
    pending: Vec<metapb::Peer>,
) -> (Setup, metapb::Region, metapb::Region) {
    let mut s = setup(tmp, "8.5.0").await;
    for _ in 0..10 {
        meridian::harness::alloc_id(&mut s.n.pd, s.n.cluster_id)
            .await
            .unwrap();
    }
    let h = s.n.h();
    let (left, right) = halves();
    let catching_up = pending.len();
    s.tx.send(beat(&h, left.clone(), vec![])).await.unwrap();
    s.tx.send(beat(&h, right.clone(), pending)).await.unwrap();
    until(&s.addr, &s.admin, "/pd/api/v1/region/id/21", |r| {
        r["start_key"] == "6D" && r["pending_peers"].as_array().map_or(0, Vec::len) == catching_up
    })
    .await;
    until(&s.addr, &s.admin, "/pd/api/v1/region/id/10", |r| {
        r["end_key"] == "6D"
    })
    .await;
    (s, left, right)
}

/// A node with stores 1-4 at `version` heartbeating, and region 10 (voters on stores 1-3, led
/// on store 1) reported on a heartbeat stream and known to the node.
pub(super) struct Setup {
    pub(super) n: Node,
    pub(super) data: std::path::PathBuf,
    pub(super) addr: String,
    pub(super) admin: Trust,
    pub(super) tx: tokio::sync::mpsc::Sender<pdpb::RegionHeartbeatRequest>,
    pub(super) replies: tonic::Streaming<pdpb::RegionHeartbeatResponse>,
    /// Region 10's heartbeat as its leader sends it.
    pub(super) beat: pdpb::RegionHeartbeatRequest,
    pub(super) alive: tokio::task::JoinHandle<()>,
}

pub(super) async fn setup(tmp: &tempfile::TempDir, version: &str) -> Setup {
    setup_with(tmp, version, &[]).await
}

/// [`setup`], the node started with `extra` `serve` flags.
pub(super) async fn setup_with(tmp: &tempfile::TempDir, version: &str, extra: &[String]) -> Setup {
    let data = tmp.path().join("data");
    let mut n = start_with(&data, extra).await;
    let addr = n.addr().to_string();
    let admin = n.trust.clone();
    let h = n.h();
    let at = |id| metapb::Store {
        version: version.into(),
        ..store(id)
    };

    // Before the cluster is bootstrapped: PD's 500.
    let a = call(&addr, &admin, Method::GET, "/pd/api/v1/operators", None).await;
    assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", a.text());
    assert!(
        a.text().contains("TiKV cluster not bootstrapped"),
        "{}",
        a.text()
    );

    // Ids as stores take them (every id up to 20 is then known), stores 1-4, region 10.
    for _ in 0..20 {
        meridian::harness::alloc_id(&mut n.pd, n.cluster_id)
            .await
            .unwrap();
    }
    let boot = metapb::Region {
        peers: vec![peer(11, 1)],
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: 1,
            version: 1,
        }),
        id: 10,
        ..Default::default()
    };
    n.pd.bootstrap(pdpb::BootstrapRequest {
        header: h.clone(),
        store: Some(at(1)),
        region: Some(boot),
    })
    .await
    .unwrap();
    for id in 2..=4 {
        n.pd.put_store(pdpb::PutStoreRequest {
            header: h.clone(),
            store: Some(at(id)),
        })
        .await
        .unwrap();
    }
    let mut beating = n.pd.clone();
    let beat_header = h.clone();
    let alive = tokio::spawn(async move {
        loop {
            for id in 1..=4 {
                store_beat(&mut beating, beat_header.clone(), id).await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let beat = pdpb::RegionHeartbeatRequest {
        header: h.clone(),
        region: Some(region_10()),
        leader: Some(peer(11, 1)),
        approximate_size: 96 << 20,
        ..Default::default()
    };
    tx.send(beat.clone()).await.unwrap();
    let replies =
        n.pd.region_heartbeat(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
    // The region is known once its route answers.
    let known = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let a = call(&addr, &admin, Method::GET, "/pd/api/v1/region/id/10", None).await;
        if a.status == StatusCode::OK && a.json()["peers"].as_array().map(Vec::len) == Some(3) {
            break;
        }
        assert!(tokio::time::Instant::now() < known, "{}", a.text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    Setup {
        n,
        data,
        addr,
        admin,
        tx,
        replies,
        beat,
        alive,
    }
}

/// The conf changes `r` carries, each `(type, peer id, store id)`, and whether they came as
/// `ChangePeerV2` (never both).
pub(super) fn conf_changes(r: &pdpb::RegionHeartbeatResponse) -> (Vec<(i32, u64, u64)>, bool) {
    assert!(
        r.change_peer.is_none() || r.change_peer_v2.is_none(),
        "{r:?}"
    );
    let each = |c: &pdpb::ChangePeer| {
        let p = c.peer.unwrap_or_default();
        (c.change_type, p.id, p.store_id)
    };
    match (&r.change_peer, &r.change_peer_v2) {
        (Some(c), _) => (vec![each(c)], false),
        (None, Some(v2)) => (v2.changes.iter().map(each).collect(), true),
        (None, None) => (vec![], false),
    }
}
