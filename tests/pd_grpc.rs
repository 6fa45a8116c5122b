//! The PD-compatible gRPC front end against the real binary, with kvproto's generated client:
//! every RPC, PD's error conventions (cluster id, not bootstrapped, already bootstrapped,
//! region not found, invalid counts, unimplemented methods, malformed protobuf), operators
//! pushed back on the heartbeat stream, GC safe points that survive a SIGKILL, the router
//! client's batched `QueryRegion` stream, `GetGCState`, and the standard gRPC health service.

use std::path::Path;
use std::time::Duration;

use meridian::client::pd_grpc;
use meridian::harness::ServerProcess;
use meridian::kvproto::metapb;
use meridian::kvproto::pdpb::{self, pd_client::PdClient};
use meridian::tls::Trust;
use tonic::transport::Channel;
use tonic::Code;

fn bin() -> &'static Path {
    env!("CARGO_BIN_EXE_meridian").as_ref()
}

struct Node {
    server: ServerProcess,
    pd: PdClient<Channel>,
    cluster_id: u64,
}

async fn start(data: &Path) -> Node {
    let server = ServerProcess::start(bin(), data, "127.0.0.1:0", Some(2)).unwrap();
    let grpc = server.grpc_addr.clone().expect("gRPC is on by default");
    assert_eq!(
        grpc, server.client_addr,
        "gRPC serves TCP at the client address"
    );
    let mut pd = pd_grpc::connect(&grpc, &Trust::Ca(data.join("tls/ca.pem")))
        .await
        .unwrap();
    let members = pd
        .get_members(pdpb::GetMembersRequest::default())
        .await
        .unwrap()
        .into_inner();
    let cluster_id = members.header.unwrap().cluster_id;
    Node {
        server,
        pd,
        cluster_id,
    }
}

fn header(cluster_id: u64) -> Option<pdpb::RequestHeader> {
    Some(pdpb::RequestHeader {
        cluster_id,
        ..Default::default()
    })
}

fn error_type(h: &Option<pdpb::ResponseHeader>) -> Option<pdpb::ErrorType> {
    h.as_ref()?
        .error
        .as_ref()
        .map(|e| pdpb::ErrorType::try_from(e.r#type).unwrap())
}

fn peer(id: u64, store_id: u64) -> metapb::Peer {
    metapb::Peer {
        id,
        store_id,
        ..Default::default()
    }
}

fn region(
    id: u64,
    start: &[u8],
    end: &[u8],
    ver: (u64, u64),
    peers: Vec<metapb::Peer>,
) -> metapb::Region {
    metapb::Region {
        id,
        start_key: start.to_vec(),
        end_key: end.to_vec(),
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: ver.0,
            version: ver.1,
        }),
        peers,
        ..Default::default()
    }
}

fn store(id: u64, addr: &str) -> metapb::Store {
    metapb::Store {
        id,
        address: addr.into(),
        ..Default::default()
    }
}

impl Node {
    fn h(&self) -> Option<pdpb::RequestHeader> {
        header(self.cluster_id)
    }

    async fn alloc_id(&mut self) -> u64 {
        let r = self
            .pd
            .alloc_id(pdpb::AllocIdRequest {
                header: self.h(),
                count: 0,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&r.header), None);
        assert_eq!(r.count, 0, "PD sets count only for batches");
        r.id
    }

    async fn get_region(&mut self, key: &[u8]) -> pdpb::GetRegionResponse {
        self.pd
            .get_region(pdpb::GetRegionRequest {
                header: self.h(),
                region_key: key.to_vec(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
    }

    async fn tso(&mut self, counts: &[u32]) -> Result<Vec<pdpb::TsoResponse>, tonic::Status> {
        let reqs: Vec<pdpb::TsoRequest> = counts
            .iter()
            .map(|&count| pdpb::TsoRequest {
                header: self.h(),
                count,
                ..Default::default()
            })
            .collect();
        let mut replies = self.pd.tso(tokio_stream::iter(reqs)).await?.into_inner();
        let mut out = Vec::new();
        while let Some(r) = replies.message().await? {
            out.push(r);
        }
        Ok(out)
    }
}

async fn next_reply(
    replies: &mut tonic::Streaming<pdpb::RegionHeartbeatResponse>,
) -> pdpb::RegionHeartbeatResponse {
    tokio::time::timeout(Duration::from_secs(10), replies.message())
        .await
        .expect("a reply within 10 s")
        .unwrap()
        .expect("the stream goes on")
}

/// The packed timestamp of a reply's last and first timestamps.
fn last_and_first(r: &pdpb::TsoResponse) -> (u64, u64) {
    let ts = r.timestamp.unwrap();
    assert_eq!(ts.suffix_bits, 0);
    assert!(
        ts.logical + 1 >= i64::from(r.count),
        "a batch spans one millisecond"
    );
    let last = ((ts.physical as u64) << 18) | ts.logical as u64;
    (last, last + 1 - u64::from(r.count))
}

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
            header: header(n.cluster_id + 1),
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

    // Region heartbeats: the right half with one peer and two empty stores gets an AddPeer
    // pushed back on the stream; a stale report of the old whole range changes nothing.
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
        meridian::kvproto::eraftpb::ConfChangeType::AddNode as i32
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
    let r =
        n.pd.update_gc_safe_point(pdpb::UpdateGcSafePointRequest {
            header: n.h(),
            safe_point: 100,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.new_safe_point, 100);
    let r =
        n.pd.update_gc_safe_point(pdpb::UpdateGcSafePointRequest {
            header: n.h(),
            safe_point: 50,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.new_safe_point, 100);
    let r =
        n.pd.update_service_gc_safe_point(pdpb::UpdateServiceGcSafePointRequest {
            header: n.h(),
            service_id: b"br".to_vec(),
            ttl: 3600,
            safe_point: 120,
        })
        .await
        .unwrap()
        .into_inner();
    // gc_worker's entry (at the GC safe point, 100) is the minimum.
    assert_eq!(r.service_id, b"gc_worker");
    assert_eq!(r.min_safe_point, 100);
    let r =
        n.pd.update_service_gc_safe_point(pdpb::UpdateServiceGcSafePointRequest {
            header: n.h(),
            service_id: b"gc_worker".to_vec(),
            ttl: i64::MAX,
            safe_point: 130,
        })
        .await
        .unwrap()
        .into_inner();
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
    let r =
        n.pd.update_service_gc_safe_point(pdpb::UpdateServiceGcSafePointRequest {
            header: n.h(),
            service_id: b"cdc".to_vec(),
            ttl: 60,
            safe_point: 110,
        })
        .await
        .unwrap()
        .into_inner();
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

/// A method kvproto has and Meridian does not serve, and bytes that are not the message the
/// method takes: `UNIMPLEMENTED` and a decode error, and the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_methods_and_malformed_messages_get_errors_not_hangs() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let n = start(&data).await;
    let channel = pd_grpc::channel(
        n.server.grpc_addr.as_deref().unwrap(),
        &Trust::Ca(data.join("tls/ca.pem")),
    )
    .await
    .unwrap();
    let mut raw = tonic::client::Grpc::new(channel.clone());
    raw.ready().await.unwrap();

    /// Field 1 (the header, a message) as a varint: not decodable as any PD request.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Garbled {
        #[prost(uint64, tag = "1")]
        header: u64,
    }
    let codec = tonic_prost::ProstCodec::<Garbled, pdpb::GetMembersResponse>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/pdpb.PD/GetOperator");
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        raw.unary(
            tonic::Request::new(Garbled { header: 1 }),
            path,
            codec.clone(),
        ),
    )
    .await
    .expect("no hang")
    .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);

    raw.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/pdpb.PD/GetMembers");
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        raw.unary(tonic::Request::new(Garbled { header: 7 }), path, codec),
    )
    .await
    .expect("no hang")
    .unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err}");

    // Still serving.
    let mut pd = PdClient::new(channel);
    pd.get_members(pdpb::GetMembersRequest::default())
        .await
        .unwrap();
    n.server.stop().unwrap();
}

/// `--grpc-listen off`: nothing serves gRPC (the ready line says so, members advertise no URL)
/// and a TCP connection to the client port is closed, not left hanging. `--grpc-listen ADDR`:
/// gRPC serves there and members advertise it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_end_can_be_turned_off_or_moved() {
    use tokio::io::AsyncReadExt;

    let tmp = tempfile::tempdir().unwrap();
    let off = ServerProcess::start_with(
        bin(),
        &tmp.path().join("off"),
        "127.0.0.1:0",
        &["--grpc-listen".into(), "off".into()],
    )
    .unwrap();
    assert_eq!(off.grpc_addr, None);
    let mut conn = tokio::net::TcpStream::connect(&off.client_addr)
        .await
        .unwrap();
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf))
        .await
        .expect("closed, not hanging");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    off.stop().unwrap();

    let data = tmp.path().join("moved");
    let moved = ServerProcess::start_with(
        bin(),
        &data,
        "127.0.0.1:0",
        &["--grpc-listen".into(), "127.0.0.1:0".into()],
    )
    .unwrap();
    let grpc = moved.grpc_addr.clone().unwrap();
    assert_ne!(grpc, moved.client_addr);
    let mut pd = pd_grpc::connect(&grpc, &Trust::Ca(data.join("tls/ca.pem")))
        .await
        .unwrap();
    let members = pd
        .get_members(pdpb::GetMembersRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        members.leader.unwrap().client_urls,
        vec![format!("https://{grpc}")]
    );
    moved.stop().unwrap();
}

impl Node {
    /// Bootstraps with one store and one region over every key; returns (store, region, peer).
    async fn bootstrap(&mut self) -> (u64, u64, u64) {
        let (s1, r1, p1) = (
            self.alloc_id().await,
            self.alloc_id().await,
            self.alloc_id().await,
        );
        let r = self
            .pd
            .bootstrap(pdpb::BootstrapRequest {
                header: self.h(),
                store: Some(store(s1, "tikv-1:20160")),
                region: Some(region(r1, b"", b"", (1, 1), vec![peer(p1, s1)])),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&r.header), None, "{:?}", r.header);
        (s1, r1, p1)
    }

    /// Splits the bootstrap region at `at`: returns the new left half's id (the right half
    /// keeps the old id).
    async fn split(&mut self, (s1, r1, p1): (u64, u64, u64), at: &[u8]) -> u64 {
        let ask = self
            .pd
            .ask_batch_split(pdpb::AskBatchSplitRequest {
                header: self.h(),
                region: Some(region(r1, b"", b"", (1, 1), vec![peer(p1, s1)])),
                split_count: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let split = &ask.ids[0];
        let left = region(
            split.new_region_id,
            b"",
            at,
            (1, 2),
            vec![peer(split.new_peer_ids[0], s1)],
        );
        let right = region(r1, at, b"", (1, 2), vec![peer(p1, s1)]);
        let r = self
            .pd
            .report_batch_split(pdpb::ReportBatchSplitRequest {
                header: self.h(),
                regions: vec![left, right],
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&r.header), None, "{:?}", r.header);
        split.new_region_id
    }

    async fn gc_state(&mut self, req: pdpb::GetGcStateRequest) -> pdpb::GetGcStateResponse {
        self.pd.get_gc_state(req).await.unwrap().into_inner()
    }
}

async fn next_query(
    replies: &mut tonic::Streaming<pdpb::QueryRegionResponse>,
) -> pdpb::QueryRegionResponse {
    tokio::time::timeout(Duration::from_secs(10), replies.message())
        .await
        .expect("a reply within 10 s")
        .unwrap()
        .expect("the stream goes on")
}

/// `QueryRegion`, the router client's batched lookups, as PD answers it: ids in request order
/// for keys and previous keys (0 for none), each region found once in `regions_by_id`, an empty
/// entry for an id not found, one reply per message on a stream that outlives a header error;
/// a header for another cluster ends the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_region_answers_keys_prev_keys_and_ids_as_pd_does() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;

    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let mut replies =
        n.pd.query_region(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();

    // Not bootstrapped yet: PD's leader says so in the header, and the stream goes on.
    tx.send(pdpb::QueryRegionRequest {
        header: n.h(),
        keys: vec![b"a".to_vec()],
        ..Default::default()
    })
    .await
    .unwrap();
    let r = next_query(&mut replies).await;
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );
    assert!(r.key_id_map.is_empty() && r.regions_by_id.is_empty());

    // Two regions: left = ["", "m"), right = ["m", "") (the bootstrap region's id).
    let boot = n.bootstrap().await;
    let right_id = boot.1;
    let left_id = n.split(boot, b"m").await;
    let left = n.get_region(b"a").await;
    let right = n.get_region(b"z").await;
    assert_eq!(left.region.as_ref().unwrap().id, left_id);
    assert_eq!(right.region.as_ref().unwrap().id, right_id);

    let missing = 424_242;
    tx.send(pdpb::QueryRegionRequest {
        header: n.h(),
        need_buckets: true,
        keys: vec![b"a".to_vec(), b"z".to_vec(), b"m".to_vec(), b"".to_vec()],
        // "z" and "m" are in the right region, whose previous is the left one; "a" is in the
        // first region, which has none.
        prev_keys: vec![b"z".to_vec(), b"a".to_vec(), b"m".to_vec()],
        ids: vec![right_id, missing, 0, left_id],
    })
    .await
    .unwrap();
    let r = next_query(&mut replies).await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(r.header.as_ref().unwrap().cluster_id, n.cluster_id);
    assert_eq!(r.key_id_map, vec![left_id, right_id, right_id, left_id]);
    assert_eq!(r.prev_key_id_map, vec![left_id, 0, left_id]);
    let mut ids: Vec<u64> = r.regions_by_id.keys().copied().collect();
    ids.sort();
    let mut want = vec![left_id, right_id, missing];
    want.sort();
    assert_eq!(ids, want, "each region once, the missing id, no id 0");
    for (id, unary) in [(left_id, &left), (right_id, &right)] {
        let found = &r.regions_by_id[&id];
        assert_eq!(
            found.region, unary.region,
            "region {id} as GetRegion has it"
        );
        assert_eq!(
            found.leader, unary.leader,
            "leader of {id} as GetRegion has it"
        );
        assert!(found.buckets.is_none(), "Meridian keeps no buckets");
    }
    assert_eq!(
        r.regions_by_id[&left_id].region.as_ref().unwrap().end_key,
        b"m"
    );
    assert_eq!(
        r.regions_by_id[&right_id]
            .region
            .as_ref()
            .unwrap()
            .start_key,
        b"m"
    );
    let absent = &r.regions_by_id[&missing];
    assert!(
        absent.region.is_none() && absent.leader.is_none(),
        "{absent:?}"
    );

    // One reply per message, in order; ids alone.
    for ids in [vec![left_id], vec![missing]] {
        tx.send(pdpb::QueryRegionRequest {
            header: n.h(),
            ids: ids.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let r = next_query(&mut replies).await;
    assert!(r.key_id_map.is_empty() && r.prev_key_id_map.is_empty());
    assert_eq!(r.regions_by_id.len(), 1);
    assert_eq!(r.regions_by_id[&left_id].region, left.region);
    let r = next_query(&mut replies).await;
    assert_eq!(r.regions_by_id.len(), 1);
    assert!(r.regions_by_id[&missing].region.is_none());

    // Another cluster's header: the stream ends with a failed precondition.
    tx.send(pdpb::QueryRegionRequest {
        header: header(n.cluster_id + 1),
        keys: vec![b"a".to_vec()],
        ..Default::default()
    })
    .await
    .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), replies.message())
        .await
        .expect("an answer within 10 s")
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("mismatch cluster id"), "{err}");
    drop(tx);
    n.server.stop().unwrap();
}

/// `GetGCState` over Meridian's GC state: the GC safe point reported as both safe points, the
/// null keyspace's scope, service safe points as GC barriers (without gc_worker's), global
/// barriers present-empty only when asked for, and PD's errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_state_reports_the_gc_safe_point_and_service_barriers() {
    const NULL_KEYSPACE: u32 = 0xFFFF_FFFF;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;
    let scope = |id: u32| {
        Some(pdpb::KeyspaceScope {
            keyspace: Some(pdpb::keyspace_scope::Keyspace::KeyspaceId(id)),
        })
    };

    let r = n
        .gc_state(pdpb::GetGcStateRequest {
            header: n.h(),
            ..Default::default()
        })
        .await;
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );
    assert!(r.gc_state.is_none());
    let err =
        n.pd.get_gc_state(pdpb::GetGcStateRequest {
            header: header(n.cluster_id + 1),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);

    n.bootstrap().await;
    let r = n
        .gc_state(pdpb::GetGcStateRequest {
            header: n.h(),
            exclude_gc_barriers: true,
            ..Default::default()
        })
        .await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    let state = r.gc_state.unwrap();
    assert_eq!((state.gc_safe_point, state.txn_safe_point), (0, 0));

    let r =
        n.pd.update_gc_safe_point(pdpb::UpdateGcSafePointRequest {
            header: n.h(),
            safe_point: 100,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.new_safe_point, 100);
    let r =
        n.pd.update_service_gc_safe_point(pdpb::UpdateServiceGcSafePointRequest {
            header: n.h(),
            service_id: b"br".to_vec(),
            ttl: 3600,
            safe_point: 120,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);

    // Barriers excluded, globals not asked for (client-go's defaults).
    let r = n
        .gc_state(pdpb::GetGcStateRequest {
            header: n.h(),
            keyspace_scope: scope(NULL_KEYSPACE),
            exclude_gc_barriers: true,
            include_global_gc_barriers: false,
        })
        .await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(r.header.unwrap().cluster_id, n.cluster_id);
    assert!(r.global_gc_barriers.is_none());
    let state = r.gc_state.unwrap();
    assert_eq!(state.gc_safe_point, 100);
    assert_eq!(state.txn_safe_point, 100);
    assert!(!state.is_keyspace_level_gc);
    assert_eq!(state.keyspace_scope, scope(NULL_KEYSPACE));
    assert!(state.gc_barriers.is_empty());

    // Barriers and globals asked for; no scope, the DEFAULT keyspace and an id outside the
    // keyspace range all read the null keyspace's state.
    for keyspace_scope in [None, scope(0), scope(0x0100_0000)] {
        let r = n
            .gc_state(pdpb::GetGcStateRequest {
                header: n.h(),
                keyspace_scope,
                exclude_gc_barriers: false,
                include_global_gc_barriers: true,
            })
            .await;
        assert_eq!(error_type(&r.header), None, "{keyspace_scope:?}");
        assert_eq!(
            r.global_gc_barriers,
            Some(pdpb::GlobalGcBarriersInfo::default()),
            "asked for: present, and empty"
        );
        let state = r.gc_state.unwrap();
        assert_eq!((state.gc_safe_point, state.txn_safe_point), (100, 100));
        assert_eq!(state.keyspace_scope, scope(NULL_KEYSPACE));
        assert_eq!(state.gc_barriers.len(), 1, "{:?}", state.gc_barriers);
        let br = &state.gc_barriers[0];
        assert_eq!((br.barrier_id.as_str(), br.barrier_ts), ("br", 120));
        assert!(
            br.ttl_seconds > 3500 && br.ttl_seconds <= 3600,
            "{}",
            br.ttl_seconds
        );
    }

    // A keyspace that does not exist: PD's UNKNOWN error in the header.
    let r = n
        .gc_state(pdpb::GetGcStateRequest {
            header: n.h(),
            keyspace_scope: scope(7),
            ..Default::default()
        })
        .await;
    assert_eq!(error_type(&r.header), Some(pdpb::ErrorType::Unknown));
    assert!(r.gc_state.is_none());

    // The GC safe point moves on; GetGCState follows.
    n.pd.update_gc_safe_point(pdpb::UpdateGcSafePointRequest {
        header: n.h(),
        safe_point: 150,
    })
    .await
    .unwrap();
    let r = n
        .gc_state(pdpb::GetGcStateRequest {
            header: n.h(),
            exclude_gc_barriers: true,
            ..Default::default()
        })
        .await;
    let state = r.gc_state.unwrap();
    assert_eq!((state.gc_safe_point, state.txn_safe_point), (150, 150));
    n.server.stop().unwrap();
}

/// The standard gRPC health service: SERVING for the whole server (service ""), which pd's Go
/// client checks before it uses a member; a service never registered is NOT_FOUND.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_health_check_reports_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;

    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let n = start(&data).await;
    let channel = pd_grpc::channel(
        n.server.grpc_addr.as_deref().unwrap(),
        &Trust::Ca(data.join("tls/ca.pem")),
    )
    .await
    .unwrap();
    let mut health = HealthClient::new(channel);
    let r = health
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        ServingStatus::try_from(r.status).unwrap(),
        ServingStatus::Serving
    );
    let err = health
        .check(HealthCheckRequest {
            service: "no.such.Service".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    n.server.stop().unwrap();
}
