//! Every RPC a PD client calls, answered as PD answers it, and state that survives a SIGKILL.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_answers_as_pd_does() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;

    // GetMembers: this member, leading, with its gRPC URL.
    let members =
        n.pd.get_members(pdpb::GetMembersRequest::default())
            .await
            .unwrap()
            .into_inner();
    let url = format!("https://{}", n.server.client_addr);
    assert_eq!(members.members.len(), 1);
    assert_eq!(members.members[0].client_urls, vec![url.clone()]);
    let leader = members.leader.unwrap();
    assert_eq!(leader.client_urls, vec![url]);
    assert_eq!(leader.member_id, members.members[0].member_id);
    assert_eq!(members.etcd_leader.unwrap().member_id, leader.member_id);

    // A header for another cluster is a failed precondition; so is none at all.
    let err =
        n.pd.is_bootstrapped(pdpb::IsBootstrappedRequest {
            header: pd_header(n.cluster_id + 1),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("mismatch cluster id"),
        "{}",
        err.message()
    );
    let err =
        n.pd.alloc_id(pdpb::AllocIdRequest {
            header: None,
            count: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);

    // Before bootstrap.
    let r =
        n.pd.is_bootstrapped(pdpb::IsBootstrappedRequest { header: n.h() })
            .await
            .unwrap()
            .into_inner();
    assert!(!r.bootstrapped);
    assert_eq!(
        error_type(&n.get_region(b"k").await.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );
    let r =
        n.pd.get_gc_safe_point(pdpb::GetGcSafePointRequest { header: n.h() })
            .await
            .unwrap()
            .into_inner();
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );

    // Bootstrap with allocated ids; a second bootstrap is refused.
    let (s1, r1, p1) = (n.alloc_id().await, n.alloc_id().await, n.alloc_id().await);
    assert!(s1 < r1 && r1 < p1, "ids increase");
    let boot = pdpb::BootstrapRequest {
        header: n.h(),
        store: Some(store(s1, "tikv-1:20160")),
        region: Some(region(r1, b"", b"", (1, 1), vec![peer(p1, s1)])),
    };
    let r = n.pd.bootstrap(boot.clone()).await.unwrap().into_inner();
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    let r = n.pd.bootstrap(boot).await.unwrap().into_inner();
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::AlreadyBootstrapped)
    );

    // Stores.
    let (s2, s3) = (n.alloc_id().await, n.alloc_id().await);
    for (id, addr) in [(s2, "tikv-2:20160"), (s3, "tikv-3:20160")] {
        let r =
            n.pd.put_store(pdpb::PutStoreRequest {
                header: n.h(),
                store: Some(store(id, addr)),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&r.header), None);
    }
    let r =
        n.pd.get_store(pdpb::GetStoreRequest {
            header: n.h(),
            store_id: s2,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.store.unwrap().address, "tikv-2:20160");
    let r =
        n.pd.get_store(pdpb::GetStoreRequest {
            header: n.h(),
            store_id: 999_999,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.store.is_none());
    assert_eq!(error_type(&r.header), Some(pdpb::ErrorType::Unknown));
    let r =
        n.pd.get_all_stores(pdpb::GetAllStoresRequest {
            header: n.h(),
            exclude_tombstone_stores: true,
        })
        .await
        .unwrap()
        .into_inner();
    let mut ids: Vec<u64> = r.stores.iter().map(|s| s.id).collect();
    ids.sort();
    assert_eq!(ids, vec![s1, s2, s3]);
    let r =
        n.pd.store_heartbeat(pdpb::StoreHeartbeatRequest {
            header: n.h(),
            stats: Some(pdpb::StoreStats {
                store_id: s2,
                capacity: 100,
                available: 50,
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(error_type(&r.header), None);

    // Routing.
    let r = n.get_region(b"any key").await;
    assert_eq!(error_type(&r.header), None);
    assert_eq!(r.region.as_ref().unwrap().id, r1);
    let r =
        n.pd.get_region_by_id(pdpb::GetRegionByIdRequest {
            header: n.h(),
            region_id: r1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.region.unwrap().id, r1);
    let r =
        n.pd.get_region_by_id(pdpb::GetRegionByIdRequest {
            header: n.h(),
            region_id: 424242,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    // PD's leader: a plain header and no region.
    assert!(r.region.is_none());
    assert_eq!(error_type(&r.header), None);

    // Split at "m": ask for ids, report the two halves with the version bumped.
    let ask =
        n.pd.ask_batch_split(pdpb::AskBatchSplitRequest {
            header: n.h(),
            region: Some(region(r1, b"", b"", (1, 1), vec![peer(p1, s1)])),
            split_count: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ask.ids.len(), 1);
    let split = &ask.ids[0];
    assert_eq!(split.new_peer_ids.len(), 1);
    let left = region(
        split.new_region_id,
        b"",
        b"m",
        (1, 2),
        vec![peer(split.new_peer_ids[0], s1)],
    );
    let right = region(r1, b"m", b"", (1, 2), vec![peer(p1, s1)]);
    let r =
        n.pd.report_batch_split(pdpb::ReportBatchSplitRequest {
            header: n.h(),
            regions: vec![left.clone(), right.clone()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(n.get_region(b"a").await.region.unwrap().id, left.id);
    assert_eq!(n.get_region(b"z").await.region.unwrap().id, r1);
    let prev =
        n.pd.get_prev_region(pdpb::GetRegionRequest {
            header: n.h(),
            region_key: b"z".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(prev.region.unwrap().id, left.id);
    let scan =
        n.pd.scan_regions(pdpb::ScanRegionsRequest {
            header: n.h(),
            start_key: vec![],
            end_key: vec![],
            limit: 10,
        })
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<u64> = scan
        .regions
        .iter()
        .map(|r| r.region.as_ref().unwrap().id)
        .collect();
    assert_eq!(ids, vec![left.id, r1]);
    assert_eq!(scan.region_metas.len(), 2);
    let batch =
        n.pd.batch_scan_regions(pdpb::BatchScanRegionsRequest {
            header: n.h(),
            ranges: vec![
                pdpb::KeyRange {
                    start_key: b"a".to_vec(),
                    end_key: b"b".to_vec(),
                },
                pdpb::KeyRange {
                    start_key: b"x".to_vec(),
                    end_key: b"y".to_vec(),
                },
            ],
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<u64> = batch
        .regions
        .iter()
        .map(|r| r.region.as_ref().unwrap().id)
        .collect();
    assert_eq!(ids, vec![left.id, r1]);
    let err =
        n.pd.batch_scan_regions(pdpb::BatchScanRegionsRequest {
            header: n.h(),
            ranges: vec![
                pdpb::KeyRange {
                    start_key: b"x".to_vec(),
                    end_key: b"y".to_vec(),
                },
                pdpb::KeyRange {
                    start_key: b"a".to_vec(),
                    end_key: b"b".to_vec(),
                },
            ],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    // Region heartbeats: the right half with one peer and two empty stores gets an AddPeer of
    // a learner (to be promoted once it has caught up, as PD adds peers) pushed back on the
    // stream; a stale report of the old whole range changes nothing.
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let mut replies =
        n.pd.region_heartbeat(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
    let stale = region(r1, b"", b"", (1, 1), vec![peer(p1, s1)]);
    for r in [stale, right.clone()] {
        tx.send(pdpb::RegionHeartbeatRequest {
            header: n.h(),
            leader: Some(peer(p1, s1)),
            region: Some(r),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let refused = next_reply(&mut replies).await;
    assert_eq!(
        error_type(&refused.header),
        Some(pdpb::ErrorType::Unknown),
        "the stale report"
    );
    assert_eq!(refused.target_peer.unwrap().id, p1);
    assert!(refused.change_peer.is_none());
    let op = next_reply(&mut replies).await;
    assert_eq!(error_type(&op.header), None);
    assert_eq!(op.region_id, r1);
    assert_eq!(op.region_epoch.unwrap().version, 2);
    let change = op.change_peer.expect("AddPeer");
    assert_eq!(
        change.change_type,
        meridian::kvproto::eraftpb::ConfChangeType::AddLearnerNode as i32
    );
    assert_eq!(change.peer.unwrap().store_id, s2, "ties break by store id");
    assert_eq!(
        n.get_region(b"a").await.region.unwrap().id,
        left.id,
        "the stale report changed nothing"
    );
    drop(tx);

    // TSO: the reply carries the last timestamp of each batch; batches never overlap.
    let replies = n.tso(&[1, 10, 1000, 1]).await.unwrap();
    assert_eq!(
        replies.iter().map(|r| r.count).collect::<Vec<_>>(),
        vec![1, 10, 1000, 1]
    );
    let mut prev_last = 0;
    for r in &replies {
        let (last, first) = last_and_first(r);
        assert!(first > prev_last, "batches overlap or go backwards");
        prev_last = last;
    }
    let err = n.tso(&[0]).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = n.tso(&[(1 << 18) + 1]).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    // GC safe points never move back, and survive a SIGKILL.
    let r = n.gc_safe_point(100).await;
    assert_eq!(r.new_safe_point, 100);
    let r = n.gc_safe_point(50).await;
    assert_eq!(r.new_safe_point, 100);
    let r = n.service_safe_point(b"br", 3600, 120).await;
    // gc_worker's entry (at the GC safe point, 100) is the minimum.
    assert_eq!(r.service_id, b"gc_worker");
    assert_eq!(r.min_safe_point, 100);
    let r = n.service_safe_point(b"gc_worker", i64::MAX, 130).await;
    assert_eq!(
        (r.service_id.as_slice(), r.min_safe_point),
        (&b"br"[..], 120)
    );
    assert!(r.ttl > 3500 && r.ttl <= 3600, "ttl {}", r.ttl);

    let cluster_id = n.cluster_id;
    let last_ts = prev_last;
    n.server.kill().unwrap();
    let mut n = start(&data).await;
    assert_eq!(n.cluster_id, cluster_id);
    let r =
        n.pd.get_gc_safe_point(pdpb::GetGcSafePointRequest { header: n.h() })
            .await
            .unwrap()
            .into_inner();
    assert_eq!(r.safe_point, 100);
    let r = n.service_safe_point(b"cdc", 60, 110).await;
    assert_eq!(
        (r.service_id.as_slice(), r.min_safe_point),
        (&b"br"[..], 120),
        "110 < 120 is refused"
    );
    let (_, first) = last_and_first(&n.tso(&[5]).await.unwrap()[0]);
    assert!(first > last_ts, "TSO went back across the restart");
    let r = n.get_region(b"a").await;
    assert_eq!(
        r.region.unwrap().id,
        left.id,
        "the split survived the restart"
    );
    n.server.stop().unwrap();
}
