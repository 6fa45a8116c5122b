//! Store versions and the cluster version: what a store registers comes back as PD returns it,
//! every StoreHeartbeat answer carries the lowest version of the live stores, a store older than
//! the cluster by major.minor is refused with PD's words, and the version survives a SIGKILL.

use super::*;

pub(super) fn tikv(id: u64, addr: &str, version: &str) -> metapb::Store {
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
    pub(super) async fn store_heartbeat(&mut self, store_id: u64) -> pdpb::StoreHeartbeatResponse {
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

    pub(super) async fn put_store(&mut self, store: metapb::Store) -> pdpb::PutStoreResponse {
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
