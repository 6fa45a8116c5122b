//! Store versions and the cluster version: what a store registers comes back as PD returns it,
//! every StoreHeartbeat answer carries the lowest version of the live stores, a store older than
//! the cluster by major.minor is refused with PD's words, and the version survives a SIGKILL.

use super::*;

fn tikv(id: u64, addr: &str, version: &str) -> metapb::Store {
    metapb::Store {
        version: version.into(),
        git_hash: "3f446cfa9eb1".into(),
        peer_address: format!("{addr}-peer"),
        status_address: format!("{addr}-status"),
        start_timestamp: 1_700_000_000,
        deploy_path: "/opt/tikv/bin".into(),
        ..store(id, addr)
    }
}

impl Node {
    async fn store_heartbeat(&mut self, store_id: u64) -> pdpb::StoreHeartbeatResponse {
        self.pd
            .store_heartbeat(pdpb::StoreHeartbeatRequest {
                header: self.h(),
                stats: Some(pdpb::StoreStats {
                    store_id,
                    capacity: 1 << 40,
                    available: 1 << 39,
                    ..Default::default()
                }),
            })
            .await
            .unwrap()
            .into_inner()
    }

    async fn put_store(&mut self, store: metapb::Store) -> pdpb::PutStoreResponse {
        self.pd
            .put_store(pdpb::PutStoreRequest {
                header: self.h(),
                store: Some(store),
            })
            .await
            .unwrap()
            .into_inner()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_version_is_the_lowest_store_version_and_refuses_downgrades() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;

    let r = n.store_heartbeat(1).await;
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );

    // The first store sets the version, with PD's leading `v` dropped.
    let (s1, r1, p1) = (n.alloc_id().await, n.alloc_id().await, n.alloc_id().await);
    let boot =
        n.pd.bootstrap(pdpb::BootstrapRequest {
            header: n.h(),
            store: Some(tikv(s1, "tikv-1:20160", "v8.5.7")),
            region: Some(region(r1, b"", b"", (1, 1), vec![peer(p1, s1)])),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(error_type(&boot.header), None, "{:?}", boot.header);
    let beat = n.store_heartbeat(s1).await;
    assert_eq!(error_type(&beat.header), None, "{:?}", beat.header);
    assert_eq!(beat.cluster_version, "8.5.7");
    assert_eq!(beat.state, metapb::NodeState::Serving as i32);

    // PutStore as TiKV sends it; GetStore returns what it registered.
    assert_eq!(
        error_type(&n.put_store(tikv(s1, "tikv-1:20160", "8.5.7")).await.header),
        None
    );
    let got =
        n.pd.get_store(pdpb::GetStoreRequest {
            header: n.h(),
            store_id: s1,
        })
        .await
        .unwrap()
        .into_inner()
        .store
        .unwrap();
    let sent = tikv(s1, "tikv-1:20160", "8.5.7");
    assert_eq!(
        (
            &got.version,
            &got.git_hash,
            &got.peer_address,
            &got.status_address,
            got.start_timestamp,
            &got.deploy_path
        ),
        (
            &sent.version,
            &sent.git_hash,
            &sent.peer_address,
            &sent.status_address,
            sent.start_timestamp,
            &sent.deploy_path
        )
    );
    assert!(got.last_heartbeat > 0);

    // A newer store leaves it; a patch behind lowers it; a minor behind is refused, as is a
    // version that is none, and neither changes it.
    let s2 = n.alloc_id().await;
    assert_eq!(
        error_type(&n.put_store(tikv(s2, "tikv-2:20160", "9.0.0")).await.header),
        None
    );
    assert_eq!(n.store_heartbeat(s2).await.cluster_version, "8.5.7");
    let s3 = n.alloc_id().await;
    assert_eq!(
        error_type(&n.put_store(tikv(s3, "tikv-3:20160", "8.5.2")).await.header),
        None
    );
    assert_eq!(n.store_heartbeat(s1).await.cluster_version, "8.5.2");
    let s4 = n.alloc_id().await;
    let refused = n.put_store(tikv(s4, "tikv-4:20160", "8.4.0")).await;
    let error = refused.header.unwrap().error.unwrap();
    assert_eq!(error.r#type, pdpb::ErrorType::Unknown as i32);
    assert_eq!(
        error.message,
        "version should compatible with version  8.5.2, got 8.4.0"
    );
    let bad = n.put_store(tikv(s4, "tikv-4:20160", "8.x")).await;
    assert_eq!(error_type(&bad.header), Some(pdpb::ErrorType::Unknown));
    let r =
        n.pd.get_store(pdpb::GetStoreRequest {
            header: n.h(),
            store_id: s4,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::Unknown),
        "refused stores are not registered"
    );
    assert_eq!(n.store_heartbeat(s1).await.cluster_version, "8.5.2");

    // An unknown store's heartbeat: PD's UNKNOWN header, not a status TiKV would retry.
    let r = n.store_heartbeat(999_999).await;
    let error = r.header.unwrap().error.unwrap();
    assert_eq!(error.r#type, pdpb::ErrorType::Unknown as i32);
    assert_eq!(error.message, "store 999999 not found");

    // Persisted: after a SIGKILL the first heartbeat already carries it.
    n.server.kill().unwrap();
    let mut n = start(&data).await;
    assert_eq!(n.store_heartbeat(s2).await.cluster_version, "8.5.2");
    let refused = n.put_store(tikv(s4, "tikv-4:20160", "8.4.0")).await;
    assert_eq!(error_type(&refused.header), Some(pdpb::ErrorType::Unknown));
    n.server.stop().unwrap();
}

/// The embedded store's log of a data dir the previous release made (bootstrapped with store 1
/// at `tikv-1.example:20160`, zone=z1, region 2 with peer 3), before stores kept details.
const DATA_DIR_BEFORE: &str = "\
    d48c3f272c00000001140000002f6d6572696469616e2f636c75737465725f69643131313139323432313631\
    3333393539343830080aaf7e4900000001300000002f6d6572696469616e2f31313131393234323136313333\
    3935393438302f6d656d626572732f6861726e6573732f696431373735383430353338333035393833343137\
    34e042eb9d3900000001270000002f6d6572696469616e2f313131313932343231363133333935393438302f\
    74736f2f6c696d697431373935363330323235323032d8fc830d39000000012e0000002f6d6572696469616e\
    2f313131313932343231363133333935393438302f706c6163656d656e742f69645f656e64313030303031c8\
    f4a9099000000001430000002f6d6572696469616e2f313131313932343231363133333935393438302f706c\
    6163656d656e742f73746f7265732f303030303030303030303030303030303030303174696b762d312e6578\
    616d706c653a32303136307a6f6e65ffffffff7a31ffffffffffff00000000010000000000000094000000d0\
    ffffffdcffffff010000000000000000000000bcce89bea900000001440000002f6d6572696469616e2f3131\
    31313932343231363133333935393438302f706c6163656d656e742f726567696f6e732f3030303030303030\
    3030303030303030303030300300000000000000010000000000000000000000000000000200000000000000\
    e0ffffff00000000d8ffffff0000000001000000000000000100000000000000c0ffffff0100000001000000\
    000000000300000000000000c0ffffff01000000a6fe02253a00000001340000002f6d6572696469616e2f31\
    3131313932343231363133333935393438302f706c6163656d656e742f626f6f74737472617070656431";

fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// That data dir starts: its store is back with no version (PD's base version, 1.0.0, until
/// it registers again), and its next registration sets the cluster version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_from_before_store_details_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(data.join("meta")).unwrap();
    std::fs::write(data.join("meta/meta.wal"), unhex(DATA_DIR_BEFORE)).unwrap();
    let mut n = start(&data).await;
    let got =
        n.pd.get_store(pdpb::GetStoreRequest {
            header: n.h(),
            store_id: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(error_type(&got.header), None, "{:?}", got.header);
    let store = got.store.unwrap();
    assert_eq!(store.address, "tikv-1.example:20160");
    assert_eq!(store.labels[0].value, "z1");
    assert_eq!(store.version, "");
    assert_eq!(n.get_region(b"k").await.region.unwrap().id, 2);
    assert_eq!(n.store_heartbeat(1).await.cluster_version, "1.0.0");
    let r = n.put_store(tikv(1, "tikv-1.example:20160", "8.5.7")).await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(n.store_heartbeat(1).await.cluster_version, "8.5.7");
    n.server.stop().unwrap();
}
