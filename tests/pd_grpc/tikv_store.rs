//! A TiKV 8.5 store's life against Meridian, emulated from tikv/tikv's own code: the calls in
//! `components/pd_client` (`client.rs`, `util.rs`), `components/server/src/server.rs` (start),
//! the raftstore's pd worker (store heartbeats every 10 s, region heartbeats on one stream,
//! buckets on another, the min resolved ts every second, `AskBatchSplit` then
//! `ReportBatchSplit`), the resolver (`GetStore` for a peer's address) and the GC worker
//! (`GetGCSafePoint`), in TiKV's order and with its retry rule: any failed unary call makes
//! TiKV reconnect to PD by force (`util.rs`, `Request::execute` and `sync_request`), and a
//! header error is an error (`check_resp_header`). The emulation therefore fails on any
//! UNIMPLEMENTED, on any call that would have forced a reconnect while the leader stood, and on
//! an empty `cluster_version` (TiKV's feature gate would stay at 0.0.0). Run on a 3-member
//! cluster on etcd, across a SIGKILL of the leader: the store reconnects as TiKV does (members
//! from any endpoint, then the leader's client URL) and its session goes on where it was.

use meridian::harness::Cluster;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::*;

/// What TiKV 8.5.x reports of itself in `PutStore`.
const VERSION: &str = "8.5.4";

/// One emulated store: its PD connection as TiKV's `RpcClient` holds it.
struct Tikv {
    endpoints: Vec<String>,
    trust: meridian::tls::Trust,
    pd: PdClient<Channel>,
    cluster_id: u64,
    store: metapb::Store,
    /// Reconnects a failed call forced; TiKV would have torn its streams down for each.
    forced_reconnects: Vec<String>,
    heartbeats: Option<mpsc::Sender<pdpb::RegionHeartbeatRequest>>,
    replies: Option<tonic::Streaming<pdpb::RegionHeartbeatResponse>>,
}

impl Tikv {
    /// `RpcClient::new`: GetMembers from every endpoint (one cluster id), then a channel to the
    /// leader's first client URL.
    async fn connect(endpoints: Vec<String>, trust: meridian::tls::Trust) -> Tikv {
        let (pd, cluster_id) = leader_of(&endpoints, &trust).await;
        Tikv {
            endpoints,
            trust,
            pd,
            cluster_id,
            store: metapb::Store::default(),
            forced_reconnects: Vec::new(),
            heartbeats: None,
            replies: None,
        }
    }

    fn h(&self) -> Option<pdpb::RequestHeader> {
        pd_header(self.cluster_id)
    }

    /// A unary call as TiKV makes it: an UNIMPLEMENTED is fatal; any other failure, or an
    /// error in the answer's header, is recorded as a forced reconnect.
    fn check<T>(
        &mut self,
        what: &str,
        answer: Result<tonic::Response<T>, tonic::Status>,
        header: impl Fn(&T) -> &Option<pdpb::ResponseHeader>,
    ) -> Option<T> {
        match answer {
            Ok(r) => {
                let r = r.into_inner();
                if let Some(e) = header(&r).as_ref().and_then(|h| h.error.as_ref()) {
                    self.forced_reconnects.push(format!("{what}: header {e:?}"));
                    return None;
                }
                Some(r)
            }
            Err(s) => {
                assert_ne!(s.code(), Code::Unimplemented, "{what}: {s}");
                self.forced_reconnects.push(format!("{what}: {s}"));
                None
            }
        }
    }

    /// `server.rs`: the snapshot-recovery mark comes first; TiKV retries it 10 times with
    /// forced reconnects when PD does not answer it.
    async fn is_recovering_marked(&mut self) -> bool {
        let answer = self
            .pd
            .is_snapshot_recovering(pdpb::IsSnapshotRecoveringRequest { header: self.h() })
            .await;
        self.check("IsSnapshotRecovering", answer, |r| &r.header)
            .expect("IsSnapshotRecovering")
            .marked
    }

    /// `server.rs` takes one timestamp from the TSO stream before it starts its engines.
    async fn get_tso(&mut self) -> u64 {
        let request = pdpb::TsoRequest {
            header: self.h(),
            count: 1,
            ..Default::default()
        };
        let mut stream = self
            .pd
            .tso(tokio_stream::iter([request]))
            .await
            .expect("Tso stream")
            .into_inner();
        let reply = stream.message().await.expect("Tso").expect("one reply");
        let ts = reply.timestamp.expect("a timestamp");
        ((ts.physical as u64) << 18) | ts.logical as u64
    }

    async fn alloc_id(&mut self) -> u64 {
        let answer = self
            .pd
            .alloc_id(pdpb::AllocIdRequest {
                header: self.h(),
                count: 0,
            })
            .await;
        self.check("AllocID", answer, |r| &r.header)
            .expect("AllocID")
            .id
    }

    /// `Node::start`: a store id from AllocID; the first store bootstraps the cluster with its
    /// first region (after `IsBootstrapped`), every store then registers with PutStore.
    async fn start_node(&mut self, address: &str) -> Option<(u64, u64)> {
        let id = self.alloc_id().await;
        self.store = metapb::Store {
            id,
            address: address.into(),
            version: VERSION.into(),
            git_hash: "7d8b7ef3a1c5".into(),
            peer_address: address.into(),
            status_address: address.replace(":20160", ":20180"),
            start_timestamp: 1_764_000_000,
            deploy_path: "/tikv/bin".into(),
            labels: vec![metapb::StoreLabel {
                key: "zone".into(),
                value: "z1".into(),
            }],
            ..Default::default()
        };
        let bootstrapped = self
            .pd
            .is_bootstrapped(pdpb::IsBootstrappedRequest { header: self.h() })
            .await;
        let bootstrapped = self
            .check("IsBootstrapped", bootstrapped, |r| &r.header)
            .expect("IsBootstrapped")
            .bootstrapped;
        let mut first = None;
        if !bootstrapped {
            let (region_id, peer_id) = (self.alloc_id().await, self.alloc_id().await);
            let answer = self
                .pd
                .bootstrap(pdpb::BootstrapRequest {
                    header: self.h(),
                    store: Some(self.store.clone()),
                    region: Some(region(region_id, b"", b"", (1, 1), vec![peer(peer_id, id)])),
                })
                .await;
            self.check("Bootstrap", answer, |r| &r.header)
                .expect("Bootstrap");
            first = Some((region_id, peer_id));
        }
        let answer = self
            .pd
            .put_store(pdpb::PutStoreRequest {
                header: self.h(),
                store: Some(self.store.clone()),
            })
            .await;
        self.check("PutStore", answer, |r| &r.header)
            .expect("PutStore");
        first
    }

    /// The pd worker's store heartbeat: its answer's `cluster_version` feeds TiKV's feature
    /// gate.
    async fn store_heartbeat(&mut self, region_count: u32) -> Option<pdpb::StoreHeartbeatResponse> {
        let answer = self
            .pd
            .store_heartbeat(pdpb::StoreHeartbeatRequest {
                header: self.h(),
                stats: Some(pdpb::StoreStats {
                    store_id: self.store.id,
                    capacity: 1 << 40,
                    available: 1 << 39,
                    used_size: 1 << 30,
                    region_count,
                    start_time: 1_764_000_000,
                    is_busy: false,
                    ..Default::default()
                }),
            })
            .await;
        self.check("StoreHeartbeat", answer, |r| &r.header)
    }

    /// The region heartbeat stream, opened once (TiKV opens it again only on reconnect).
    async fn open_heartbeats(&mut self) {
        let (tx, rx) = mpsc::channel(64);
        let replies = self
            .pd
            .region_heartbeat(ReceiverStream::new(rx))
            .await
            .expect("RegionHeartbeat stream")
            .into_inner();
        self.heartbeats = Some(tx);
        self.replies = Some(replies);
    }

    async fn region_heartbeat(&mut self, region: &metapb::Region, leader: &metapb::Peer) {
        let request = pdpb::RegionHeartbeatRequest {
            header: self.h(),
            region: Some(region.clone()),
            leader: Some(*leader),
            approximate_size: 96 << 20,
            approximate_keys: 960_000,
            term: 6,
            interval: Some(pdpb::TimeInterval {
                start_timestamp: 1_764_000_000,
                end_timestamp: 1_764_000_060,
            }),
            ..Default::default()
        };
        let sent = self
            .heartbeats
            .as_ref()
            .expect("stream opened")
            .send(request)
            .await;
        assert!(sent.is_ok(), "the heartbeat stream closed");
    }

    /// The buckets stream: TiKV reports each region's buckets every 10 s.
    async fn report_buckets(&mut self, region: &metapb::Region, keys: &[&[u8]]) {
        let request = pdpb::ReportBucketsRequest {
            header: self.h(),
            region_epoch: region.region_epoch,
            buckets: Some(metapb::Buckets {
                region_id: region.id,
                version: 1,
                keys: keys.iter().map(|k| k.to_vec()).collect(),
                period_in_ms: 10_000,
                ..Default::default()
            }),
        };
        let answer = self.pd.report_buckets(tokio_stream::iter([request])).await;
        self.check("ReportBuckets", answer, |r| &r.header);
    }

    async fn report_min_resolved_ts(&mut self, ts: u64) {
        let answer = self
            .pd
            .report_min_resolved_ts(pdpb::ReportMinResolvedTsRequest {
                header: self.h(),
                store_id: self.store.id,
                min_resolved_ts: ts,
            })
            .await;
        self.check("ReportMinResolvedTS", answer, |r| &r.header);
    }

    async fn gc_safe_point(&mut self) -> Option<u64> {
        let answer = self
            .pd
            .get_gc_safe_point(pdpb::GetGcSafePointRequest { header: self.h() })
            .await;
        self.check("GetGCSafePoint", answer, |r| &r.header)
            .map(|r| r.safe_point)
    }

    /// The resolver: a peer's store address by id.
    async fn get_store(&mut self, id: u64) -> Option<metapb::Store> {
        let answer = self
            .pd
            .get_store(pdpb::GetStoreRequest {
                header: self.h(),
                store_id: id,
            })
            .await;
        self.check("GetStore", answer, |r| &r.header)?.store
    }

    /// A split as the raftstore asks for it: ids from AskBatchSplit, the result reported with
    /// ReportBatchSplit, then both halves heartbeated at once.
    async fn split(
        &mut self,
        region: &metapb::Region,
        at: &[u8],
    ) -> (metapb::Region, metapb::Region) {
        let answer = self
            .pd
            .ask_batch_split(pdpb::AskBatchSplitRequest {
                header: self.h(),
                region: Some(region.clone()),
                split_count: 1,
                ..Default::default()
            })
            .await;
        let ids = self
            .check("AskBatchSplit", answer, |r| &r.header)
            .expect("AskBatchSplit")
            .ids;
        assert_eq!(ids.len(), 1);
        let epoch = region.region_epoch.unwrap();
        let epoch = metapb::RegionEpoch {
            version: epoch.version + 1,
            ..epoch
        };
        let left = metapb::Region {
            id: ids[0].new_region_id,
            end_key: at.to_vec(),
            region_epoch: Some(epoch),
            peers: region
                .peers
                .iter()
                .zip(&ids[0].new_peer_ids)
                .map(|(p, &id)| peer(id, p.store_id))
                .collect(),
            ..region.clone()
        };
        let right = metapb::Region {
            start_key: at.to_vec(),
            region_epoch: Some(epoch),
            ..region.clone()
        };
        let answer = self
            .pd
            .report_batch_split(pdpb::ReportBatchSplitRequest {
                header: self.h(),
                regions: vec![left.clone(), right.clone()],
            })
            .await;
        self.check("ReportBatchSplit", answer, |r| &r.header)
            .expect("ReportBatchSplit");
        (left, right)
    }

    /// One steady-state round of the pd worker, compressed in time: store heartbeat, a region
    /// heartbeat per region led, buckets, min resolved ts, the GC safe point. Returns the
    /// cluster version the store heartbeat carried.
    async fn steady(&mut self, led: &[metapb::Region], resolved_ts: u64) -> Option<String> {
        let version = self
            .store_heartbeat(led.len() as u32)
            .await
            .map(|r| r.cluster_version);
        for region in led {
            let leader = region.peers[0];
            self.region_heartbeat(region, &leader).await;
        }
        if let Some(first) = led.first() {
            let end: &[u8] = &first.end_key;
            self.report_buckets(first, &[&first.start_key, b"g", end])
                .await;
        }
        self.report_min_resolved_ts(resolved_ts).await;
        self.gc_safe_point().await;
        version
    }

    /// After the connection failed: members from any endpoint, a new channel to the leader,
    /// the heartbeat stream opened again (TiKV's `reconnect` and its `on_reconnect` hooks).
    async fn reconnect(&mut self) {
        let (pd, cluster_id) = leader_of(&self.endpoints, &self.trust).await;
        assert_eq!(cluster_id, self.cluster_id, "the cluster id never changes");
        self.pd = pd;
        self.open_heartbeats().await;
    }
}

/// GetMembers from the endpoints until one names a leader that answers; its channel and the
/// cluster id. Every endpoint that answers must name the same cluster.
async fn leader_of(endpoints: &[String], trust: &meridian::tls::Trust) -> (PdClient<Channel>, u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut cluster = None;
        let mut leader = None;
        for e in endpoints {
            let Ok(mut pd) = pd_grpc::connect(e, trust).await else {
                continue;
            };
            let Ok(m) = pd.get_members(pdpb::GetMembersRequest::default()).await else {
                continue;
            };
            let m = m.into_inner();
            let id = m.header.as_ref().map(|h| h.cluster_id).unwrap_or(0);
            assert!(
                cluster.is_none_or(|c| c == id),
                "members answer for one cluster"
            );
            cluster = Some(id);
            if let Some(url) = m.leader.and_then(|l| l.client_urls.into_iter().next()) {
                leader = Some(url);
            }
        }
        if let (Some(id), Some(url)) = (cluster, leader) {
            let addr = url.trim_start_matches("https://").to_string();
            if let Ok(mut pd) = pd_grpc::connect(&addr, trust).await {
                // A leader that answers placement: loaded, not a stale member list.
                if pd
                    .is_bootstrapped(pdpb::IsBootstrappedRequest {
                        header: pd_header(id),
                    })
                    .await
                    .is_ok()
                {
                    return (pd, id);
                }
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no leader within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tikv_store_lives_against_meridian_without_unimplemented_or_reconnects() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(tmp.path(), 3, "[election]\nlease_ttl_secs = 2\n").unwrap();
    let endpoints: Vec<String> = (0..3)
        .map(|i| c.nodes[i].process().grpc_addr.clone().unwrap())
        .collect();

    // Two stores start: the first bootstraps the cluster, the second joins it.
    let mut a = Tikv::connect(endpoints.clone(), c.trust()).await;
    let mut b = Tikv::connect(endpoints.clone(), c.trust()).await;
    for s in [&mut a, &mut b] {
        assert!(!s.is_recovering_marked().await, "no snapshot recovery");
        assert!(s.get_tso().await > 0);
    }
    let (region_id, peer_id) = a.start_node("tikv-a:20160").await.expect("a bootstraps");
    assert_eq!(b.start_node("tikv-b:20160").await, None, "b joins");
    a.open_heartbeats().await;
    b.open_heartbeats().await;

    // The resolver finds the other store's address.
    let found = a.get_store(b.store.id).await.expect("store b");
    assert_eq!(found.address, "tikv-b:20160");
    assert_eq!(found.version, VERSION);

    // Steady state on one region, then a split, then steady state on both halves.
    let first = region(region_id, b"", b"", (1, 1), vec![peer(peer_id, a.store.id)]);
    let mut ts = a.get_tso().await;
    for _ in 0..3 {
        let version = a.steady(std::slice::from_ref(&first), ts).await;
        assert_eq!(version.as_deref(), Some(VERSION), "a's cluster_version");
        let version = b.steady(&[], ts).await;
        assert_eq!(version.as_deref(), Some(VERSION), "b's cluster_version");
        ts += 1 << 18;
    }
    let (left, right) = a.split(&first, b"m").await;
    let halves = [left.clone(), right.clone()];
    for r in &halves {
        a.region_heartbeat(r, &r.peers[0]).await;
    }
    for _ in 0..3 {
        a.steady(&halves, ts).await;
        b.steady(&[], ts).await;
        ts += 1 << 18;
    }
    for s in [&a, &b] {
        assert_eq!(
            s.forced_reconnects,
            Vec::<String>::new(),
            "store {}: calls that would force TiKV to reconnect",
            s.store.id
        );
    }
    // Nothing on the heartbeat stream was refused: no error header came back.
    for s in [&mut a, &mut b] {
        let replies = s.replies.as_mut().unwrap();
        while let Ok(Some(reply)) =
            tokio::time::timeout(Duration::from_millis(200), replies.message())
                .await
                .map(|m| m.unwrap())
        {
            assert_eq!(error_type(&reply.header), None, "{reply:?}");
        }
    }
    let mut router = Tikv::connect(endpoints.clone(), c.trust()).await;
    let routed = router
        .pd
        .get_region(pdpb::GetRegionRequest {
            header: router.h(),
            region_key: b"a".to_vec(),
            need_buckets: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(routed.region.as_ref(), Some(&left));
    assert_eq!(routed.leader.as_ref(), Some(&left.peers[0]));
    assert!(routed.buckets.is_some(), "the buckets a reported");

    // The leader dies by SIGKILL. Both stores lose their connection, reconnect as TiKV does,
    // and go on: the new leader has the stores, the regions and the cluster version.
    let leader = tokio::task::block_in_place(|| c.leader_within(None, Duration::from_secs(20)))
        .expect("a leader");
    c.nodes[leader].process.take().unwrap().kill().unwrap();
    for s in [&mut a, &mut b] {
        s.reconnect().await;
        s.forced_reconnects.clear();
    }
    // The first round on the new leader may still race its placement load: TiKV retries.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let version = a.steady(&halves, ts).await;
        if version.as_deref() == Some(VERSION) && a.forced_reconnects.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "after failover: {:?} {:?}",
            version,
            a.forced_reconnects
        );
        a.forced_reconnects.clear();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for _ in 0..3 {
        ts += 1 << 18;
        let version = a.steady(&halves, ts).await;
        assert_eq!(version.as_deref(), Some(VERSION));
        let version = b.steady(&[], ts).await;
        assert_eq!(version.as_deref(), Some(VERSION));
    }
    assert!(!a.is_recovering_marked().await);
    let found = b
        .get_store(a.store.id)
        .await
        .expect("store a after failover");
    assert_eq!(found.address, "tikv-a:20160");
    for s in [&a, &b] {
        assert_eq!(s.forced_reconnects, Vec::<String>::new(), "after failover");
    }
    c.stop_all().unwrap();
}
