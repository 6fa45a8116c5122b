//! The PD-compatible gRPC front end against the real binary, with kvproto's generated client:
//! every RPC, PD's error conventions (cluster id, not bootstrapped, already bootstrapped,
//! region not found, invalid counts, unimplemented methods, malformed protobuf), operators
//! pushed back on the heartbeat stream, GC safe points that survive a SIGKILL, the router
//! client's batched `QueryRegion` stream, `GetGCState`, and the standard gRPC health service;
//! and the rest of what TiKV and client-go call, one file per concern (snapshot recovery, store
//! versions, min resolved ts, the cluster record, single splits, external timestamps, buckets,
//! global config), a TiKV store's life emulated from TiKV's code (`tikv_store`), on etcd and
//! across a leader's SIGKILL (`on_etcd`), follower reads of routing from the region syncer's
//! copy (`follower_reads`, and over QUIC `quic_follower_reads`), and on a data dir of the previous release (`previous_release`).

mod buckets;
mod cluster_config;
mod errors;
mod external_ts;
mod follower_reads;
mod front_end;
mod gc;
mod global_config;
mod on_etcd;
mod previous_release;
mod query;
mod quic_follower_reads;
mod resolved_ts;
mod rpcs;
mod scan;
mod scatter;
mod snapshot_recovering;
mod splits;
#[cfg(feature = "failpoints")]
mod sync_faults;
mod tikv_store;
mod versions;

use std::path::Path;
use std::time::Duration;

// The records every file here sends, under short names.
use meridian::harness::{
    self, connect_when_placement_loads, pd_header, test_binary, ServerProcess,
};
use meridian::harness::{metapb_peer as peer, metapb_region as region};
use meridian::kvproto::metapb;
use meridian::kvproto::pdpb::{self, pd_client::PdClient};
use meridian::pd_grpc;
use tonic::transport::Channel;
use tonic::Code;

struct Node {
    server: ServerProcess,
    pd: PdClient<Channel>,
    cluster_id: u64,
}

async fn start(data: &Path) -> Node {
    let server = ServerProcess::start(test_binary(), data, "127.0.0.1:0", Some(2)).unwrap();
    let grpc = server.grpc_addr.clone().expect("gRPC is on by default");
    assert_eq!(
        grpc, server.client_addr,
        "gRPC serves TCP at the client address"
    );
    // The node is up before placement has loaded; tests start once it has.
    let (pd, cluster_id) =
        connect_when_placement_loads(&grpc, &server.trust(), Duration::from_secs(10))
            .await
            .unwrap();
    Node {
        server,
        pd,
        cluster_id,
    }
}

fn error_type(h: &Option<pdpb::ResponseHeader>) -> Option<pdpb::ErrorType> {
    h.as_ref()?
        .error
        .as_ref()
        .map(|e| pdpb::ErrorType::try_from(e.r#type).unwrap())
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
        pd_header(self.cluster_id)
    }

    async fn alloc_id(&mut self) -> u64 {
        harness::alloc_id(&mut self.pd, self.cluster_id)
            .await
            .unwrap()
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

    /// UpdateGCSafePoint to `safe_point`.
    async fn gc_safe_point(&mut self, safe_point: u64) -> pdpb::UpdateGcSafePointResponse {
        let request = pdpb::UpdateGcSafePointRequest {
            header: self.h(),
            safe_point,
        };
        self.pd
            .update_gc_safe_point(request)
            .await
            .unwrap()
            .into_inner()
    }

    /// UpdateServiceGCSafePoint of `service_id` to `safe_point` for `ttl` seconds.
    async fn service_safe_point(
        &mut self,
        service_id: &[u8],
        ttl: i64,
        safe_point: u64,
    ) -> pdpb::UpdateServiceGcSafePointResponse {
        let request = pdpb::UpdateServiceGcSafePointRequest {
            header: self.h(),
            service_id: service_id.to_vec(),
            ttl,
            safe_point,
        };
        self.pd
            .update_service_gc_safe_point(request)
            .await
            .unwrap()
            .into_inner()
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
