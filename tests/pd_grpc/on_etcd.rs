//! The same surface on etcd, across a leader's SIGKILL: the cluster version, the cluster
//! record, the external timestamp and the global config a leader persisted are what the next
//! leader answers with; a follower answers IsSnapshotRecovering (PD reads that mark on any
//! member) and refuses the rest with "not leader", as PD's followers do.

use meridian::harness::Cluster;

use super::versions::tikv;
use super::*;

pub(super) async fn client(c: &Cluster, i: usize) -> PdClient<Channel> {
    let addr = c.nodes[i].process().grpc_addr.clone().unwrap();
    pd_grpc::connect(&addr, &c.trust()).await.unwrap()
}

pub(super) fn leader(c: &Cluster, except: Option<usize>) -> usize {
    tokio::task::block_in_place(|| c.leader_within(except, Duration::from_secs(20)))
        .expect("a leader within 20 s")
}

fn ok<T: std::fmt::Debug>(header: &Option<pdpb::ResponseHeader>, what: T) {
    assert_eq!(error_type(header), None, "{what:?}: {header:?}");
}

fn not_leader(err: tonic::Status) {
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert_eq!(err.message(), "not leader");
}

async fn heartbeat(
    pd: &mut PdClient<Channel>,
    h: &Option<pdpb::RequestHeader>,
    store_id: u64,
) -> Result<pdpb::StoreHeartbeatResponse, tonic::Status> {
    pd.store_heartbeat(pdpb::StoreHeartbeatRequest {
        header: h.clone(),
        stats: Some(pdpb::StoreStats {
            store_id,
            ..Default::default()
        }),
    })
    .await
    .map(|r| r.into_inner())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_answers_with_what_the_last_one_persisted_and_followers_refuse() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(tmp.path(), 2, "[election]\nlease_ttl_secs = 2\n").unwrap();
    let first = leader(&c, None);
    let other = 1 - first;
    let mut pd = client(&c, first).await;
    let cluster_id = pd_grpc::cluster_id(&mut pd).await.unwrap();
    let h = pd_header(cluster_id);
    let mut ids = Vec::new();
    while ids.len() < 5 {
        match pd
            .alloc_id(pdpb::AllocIdRequest {
                header: h.clone(),
                count: 1,
            })
            .await
        {
            Ok(r) => ids.push(r.into_inner().id),
            // Placement loads a moment after the node leads.
            Err(e) if e.code() == Code::Unavailable => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    let (s1, r1, p1, s2, s3) = (ids[0], ids[1], ids[2], ids[3], ids[4]);
    let r = pd
        .bootstrap(pdpb::BootstrapRequest {
            header: h.clone(),
            store: Some(tikv(s1, "tikv-1:20160", "8.5.7")),
            region: Some(region(r1, b"", b"", (1, 1), vec![peer(p1, s1)])),
        })
        .await
        .unwrap()
        .into_inner();
    ok(&r.header, "bootstrap");
    let r = pd
        .put_store(pdpb::PutStoreRequest {
            header: h.clone(),
            store: Some(tikv(s2, "tikv-2:20160", "8.5.2")),
        })
        .await
        .unwrap()
        .into_inner();
    ok(&r.header, "put store");
    // Two regions: the cluster is initialized, so it takes an external timestamp.
    let ask = pd
        .ask_batch_split(pdpb::AskBatchSplitRequest {
            header: h.clone(),
            region: Some(region(r1, b"", b"", (1, 1), vec![peer(p1, s1)])),
            split_count: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    ok(&ask.header, "ask split");
    let split = &ask.ids[0];
    let r = pd
        .report_batch_split(pdpb::ReportBatchSplitRequest {
            header: h.clone(),
            regions: vec![
                region(
                    split.new_region_id,
                    b"",
                    b"m",
                    (1, 2),
                    vec![peer(split.new_peer_ids[0], s1)],
                ),
                region(r1, b"m", b"", (1, 2), vec![peer(p1, s1)]),
            ],
        })
        .await
        .unwrap()
        .into_inner();
    ok(&r.header, "report split");
    let r = pd
        .put_cluster_config(pdpb::PutClusterConfigRequest {
            header: h.clone(),
            cluster: Some(metapb::Cluster {
                id: cluster_id,
                max_peer_count: 5,
            }),
        })
        .await
        .unwrap()
        .into_inner();
    ok(&r.header, "put cluster config");
    let tso = pd
        .get_min_ts(pdpb::GetMinTsRequest { header: h.clone() })
        .await
        .unwrap()
        .into_inner()
        .timestamp
        .unwrap();
    let external = ((tso.physical as u64) << 18) | tso.logical as u64;
    let r = pd
        .set_external_timestamp(pdpb::SetExternalTimestampRequest {
            header: h.clone(),
            timestamp: external,
        })
        .await
        .unwrap()
        .into_inner();
    ok(&r.header, "set external timestamp");
    pd.store_global_config(pdpb::StoreGlobalConfigRequest {
        changes: vec![pdpb::GlobalConfigItem {
            name: "source_id".into(),
            value: "7".into(),
            kind: pdpb::EventType::Put as i32,
            ..Default::default()
        }],
        config_path: String::new(),
    })
    .await
    .unwrap();
    let revision = pd
        .load_global_config(pdpb::LoadGlobalConfigRequest::default())
        .await
        .unwrap()
        .into_inner()
        .revision;

    // The follower: the recovery mark from any member; everything else from the leader.
    let mut follower = client(&c, other).await;
    let r = follower
        .is_snapshot_recovering(pdpb::IsSnapshotRecoveringRequest { header: h.clone() })
        .await
        .unwrap()
        .into_inner();
    ok(&r.header, "follower recovery mark");
    assert!(!r.marked);
    not_leader(heartbeat(&mut follower, &h, s1).await.unwrap_err());
    not_leader(
        follower
            .get_cluster_config(pdpb::GetClusterConfigRequest { header: h.clone() })
            .await
            .unwrap_err(),
    );
    not_leader(
        follower
            .get_external_timestamp(pdpb::GetExternalTimestampRequest { header: h.clone() })
            .await
            .unwrap_err(),
    );
    not_leader(
        follower
            .get_min_ts(pdpb::GetMinTsRequest { header: h.clone() })
            .await
            .unwrap_err(),
    );
    not_leader(
        follower
            .report_min_resolved_ts(pdpb::ReportMinResolvedTsRequest {
                header: h.clone(),
                store_id: s1,
                min_resolved_ts: 1,
            })
            .await
            .unwrap_err(),
    );
    not_leader(
        follower
            .load_global_config(pdpb::LoadGlobalConfigRequest::default())
            .await
            .unwrap_err(),
    );

    // SIGKILL the leader: the other member leads and answers with what was persisted.
    c.nodes[first].process.take().unwrap().kill().unwrap();
    assert_eq!(leader(&c, Some(first)), other);
    let mut pd = follower;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let beat = loop {
        match heartbeat(&mut pd, &h, s1).await {
            Ok(r) => break r,
            Err(e) if e.code() == Code::Unavailable && std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("{e}"),
        }
    };
    ok(&beat.header, "heartbeat on the new leader");
    assert_eq!(beat.cluster_version, "8.5.2");
    let cluster = pd
        .get_cluster_config(pdpb::GetClusterConfigRequest { header: h.clone() })
        .await
        .unwrap()
        .into_inner()
        .cluster
        .unwrap();
    assert_eq!(cluster.max_peer_count, 5);
    let got = pd
        .get_external_timestamp(pdpb::GetExternalTimestampRequest { header: h.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.timestamp, external);
    let loaded = pd
        .load_global_config(pdpb::LoadGlobalConfigRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(loaded.revision, revision);
    assert_eq!(loaded.items[0].name, "/global/config/source_id");
    assert_eq!(loaded.items[0].payload, b"7");
    let refused = pd
        .put_store(pdpb::PutStoreRequest {
            header: h.clone(),
            store: Some(tikv(s3, "tikv-3:20160", "8.4.0")),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(error_type(&refused.header), Some(pdpb::ErrorType::Unknown));
    c.stop_all().unwrap();
}
