//! `[limits]` on a real server, over QUIC and the PD-compatible gRPC front end: each size and
//! count limit is crossed by one byte or one item and refused with a typed error that names
//! the knob, changing nothing; replies that would not fit one frame come in pages that
//! together hold everything.

use std::time::Duration;

use meridian::client::{Client, ClientError, ClientOptions};
use meridian::harness::{first_region, test_binary, ServerProcess};
use meridian::kvproto::pdpb;
use meridian::pd_grpc;
use meridian::placement::{
    Epoch, Label, Limits, Peer, PeerRole, Region, RegionStats, Store, StoreState,
};
use meridian::proto::{ErrorReply, MAX_FRAME_LEN};
use meridian::tls::Trust;

fn store(id: u64, labels: usize) -> Store {
    let l = Limits::default();
    Store {
        id,
        address: format!("127.0.0.1:{}", 20000 + id),
        labels: (0..labels)
            .map(|i| Label {
                key: format!("{i:0>width$}", width = l.max_label_len),
                value: "v".repeat(l.max_label_len),
            })
            .collect(),
        state: StoreState::Up,
        details: Default::default(),
    }
}

fn limit_exceeded(r: Result<impl std::fmt::Debug, ClientError>, knob: &str) {
    match r {
        Err(ClientError::Server(ErrorReply::LimitExceeded(m))) => {
            assert!(m.contains(knob), "{m} should name {knob}")
        }
        other => panic!("expected LimitExceeded naming {knob}, got {other:?}"),
    }
}

/// A key of exactly `len` bytes that sorts by `i`.
fn key(i: usize, len: usize) -> Vec<u8> {
    let mut k = format!("{i:06}").into_bytes();
    k.resize(len, b'x');
    k
}

const STORES: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_limit_is_refused_at_the_boundary_and_large_replies_are_paged() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node");
    let config = dir.path().join("meridian.toml");
    std::fs::write(&config, format!("[limits]\nmax_stores = {STORES}\n")).unwrap();
    let server = ServerProcess::start_with(
        test_binary(),
        &data,
        "127.0.0.1:0",
        &[
            "--cores".into(),
            "2".into(),
            "--config".into(),
            config.display().to_string(),
        ],
    )
    .unwrap();
    let ca = data.join("tls/ca.pem");
    let mut opts = ClientOptions::new(vec![server.client_addr.clone()], Trust::Ca(ca.clone()));
    opts.retry_budget = Duration::from_secs(15);
    let client = Client::connect(opts).await.unwrap();
    let l = Limits::default();

    let first = first_region(&client).await.unwrap();
    let s1 = first.peers[0].store_id;
    client
        .bootstrap(store(s1, l.max_labels), first.clone())
        .await
        .unwrap();

    // Keys: a lookup, a scan bound, a reported region's keys.
    assert_eq!(
        client
            .get_region_uncached(&key(1, l.max_key_len))
            .await
            .unwrap(),
        Some(first.clone())
    );
    let long = key(1, l.max_key_len + 1);
    limit_exceeded(client.get_region_uncached(&long).await, "max_key_len");
    limit_exceeded(client.get_prev_region(&long).await, "max_key_len");
    limit_exceeded(client.scan_regions(&long, b"", 0).await, "max_key_len");
    let forged = Region {
        end_key: long.clone(),
        epoch: Epoch {
            conf_ver: 9,
            version: 9,
        },
        ..first.clone()
    };
    limit_exceeded(
        client
            .region_heartbeat(forged, RegionStats::default())
            .await,
        "max_key_len",
    );
    assert_eq!(
        client.scan_regions(b"", b"", 0).await.unwrap(),
        vec![first.clone()],
        "the map is unchanged"
    );

    // A store's shape.
    let s2 = client.alloc_id().await.unwrap();
    let mut bad = store(s2, l.max_labels + 1);
    limit_exceeded(client.put_store(bad.clone()).await, "max_labels");
    bad.labels.truncate(1);
    bad.labels[0].value.push('v');
    limit_exceeded(client.put_store(bad.clone()).await, "max_label_len");
    bad.labels.clear();
    bad.address = format!("{}:1", "h".repeat(l.max_address_len));
    limit_exceeded(client.put_store(bad).await, "max_address_len");
    assert_eq!(client.get_all_stores().await.unwrap().len(), 1);

    // The store count: up to the limit, each with the most labels, so the list takes
    // several frames.
    let mut ids = vec![s1];
    while ids.len() < STORES {
        let id = client.alloc_id().await.unwrap();
        client.put_store(store(id, l.max_labels)).await.unwrap();
        ids.push(id);
    }
    let extra = client.alloc_id().await.unwrap();
    limit_exceeded(client.put_store(store(extra, 0)).await, "max_stores");
    client
        .put_store(store(ids[1], 1))
        .await
        .expect("a registered store may still update itself at the limit");
    let listed = client.get_all_stores().await.unwrap();
    let listed_ids: Vec<u64> = listed.iter().map(|s| s.store.id).collect();
    assert_eq!(
        listed_ids, ids,
        "every store once, in id order, over several pages"
    );
    let list_bytes: usize = listed
        .iter()
        .map(|s| {
            s.store
                .labels
                .iter()
                .map(|l| l.key.len() + l.value.len())
                .sum::<usize>()
        })
        .sum();
    assert!(
        list_bytes > MAX_FRAME_LEN,
        "the list must not fit one frame"
    );

    // Regions with the longest keys, more than one frame of them: split the first into 50 (a report of 51 fits one request frame).
    let n = 50;
    let splits = client
        .ask_batch_split(first.clone(), n as u32)
        .await
        .unwrap();
    let epoch = Epoch {
        conf_ver: 1,
        version: 1 + n as u64,
    };
    let bound = |i: usize| {
        if i == 0 {
            Vec::new()
        } else {
            key(i, l.max_key_len)
        }
    };
    let mut regions: Vec<Region> = splits
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let peer = Peer {
                id: s.peer_ids[0],
                store_id: s1,
                role: PeerRole::Voter,
            };
            Region {
                id: s.region_id,
                start_key: bound(i),
                end_key: bound(i + 1),
                epoch,
                leader: Some(peer.id),
                peers: vec![peer],
            }
        })
        .collect();
    regions.push(Region {
        start_key: bound(n),
        epoch,
        ..first.clone()
    });
    client.report_batch_split(regions.clone()).await.unwrap();

    let page = client.scan_regions(b"", b"", 0).await.unwrap();
    assert!(
        !page.is_empty() && page.len() < regions.len(),
        "one reply holds a page, not all {}: {}",
        regions.len(),
        page.len()
    );
    let mut scanned = page;
    while let Some(next) = scanned.last().map(|r| r.end_key.clone()) {
        if next.is_empty() {
            break;
        }
        scanned.extend(client.scan_regions(&next, b"", 0).await.unwrap());
    }
    assert_eq!(scanned, regions, "the pages together hold the whole map");

    // The same limits and pages over gRPC.
    let mut pd = pd_grpc::connect(server.grpc_addr.as_ref().unwrap(), &Trust::Ca(ca))
        .await
        .unwrap();
    let cluster_id = pd_grpc::cluster_id(&mut pd).await.unwrap();
    let header = Some(pdpb::RequestHeader {
        cluster_id,
        ..Default::default()
    });
    let refused = pd
        .get_region(pdpb::GetRegionRequest {
            header: header.clone(),
            region_key: long.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(refused.message().contains("max_key_len"), "{refused:?}");
    let stores = pd
        .get_all_stores(pdpb::GetAllStoresRequest {
            header: header.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        stores.stores.iter().map(|s| s.id).collect::<Vec<_>>(),
        ids,
        "GetAllStores gathers every page into PD's one reply"
    );
    let batch = pd
        .batch_scan_regions(pdpb::BatchScanRegionsRequest {
            header,
            ranges: vec![pdpb::KeyRange::default()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let ids_of = |rs: &[Region]| rs.iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(
        batch
            .regions
            .iter()
            .map(|r| r.region.as_ref().unwrap().id)
            .collect::<Vec<_>>(),
        ids_of(&regions),
        "BatchScanRegions goes on past short pages"
    );
    server.stop().unwrap();
}
