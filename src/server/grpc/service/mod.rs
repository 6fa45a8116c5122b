//! `pdpb.PD` on Meridian's engine: each RPC checks its header as PD does (cluster id, then
//! leadership), becomes one Meridian `Request` through `service::execute`, and its `Response`
//! becomes the kvproto reply. Owns PD's error conventions; holds no placement or TSO logic.
//! This file holds what every RPC shares (the header checks, the error mapping, streams) and
//! the `Pd` trait, each method handing over to its group's file: `members`, `tso`, `stores`,
//! `heartbeat`, `routing`, `splits`, `gc`.

// Replies end in `..Default::default()` even where the proto subset has no other field yet, so
// a field added to `proto/kvproto` later defaults instead of breaking the build.
#![allow(clippy::needless_update)]

mod gc;
mod heartbeat;
mod members;
mod routing;
mod splits;
mod stores;
mod tso;

use std::collections::hash_map::{Entry, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream as _;
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status, Streaming};

use super::connection::ConnectionGrants;
use super::convert::{self, Malformed};
use crate::admin::{CoreMetrics, RequestKind};
use crate::auth::{Call, Grants};
use crate::kvproto::metapb;
use crate::kvproto::pdpb::{self, pd_server::Pd};
use crate::placement::{Region, RegionStats};
use crate::proto::{ErrorReply, MemberInfo, Reply, Request, Response, MAX_BATCH_SCAN_REGIONS};
use crate::server::placement::{get_regions, heartbeats};
use crate::server::service::{execute, Op};
use crate::server::Shared;
use crate::tso::{Timestamp, MAX_COUNT};

/// Replies a stream may have queued before its reader waits for the client to take them.
const STREAM_BACKLOG: usize = 64;

pub struct PdService {
    shared: Arc<Shared>,
    /// Metrics slot of the gRPC front end (one past the cores').
    metrics_slot: usize,
}

impl PdService {
    /// Refuses the call, counted and changing nothing, unless the connection's certificate
    /// carries the role it needs. A request that did not come through the front end's
    /// acceptor carries no grants and is refused.
    fn authorize<T>(&self, request: &GrpcRequest<T>, call: Call) -> Result<(), Status> {
        let grants = request
            .extensions()
            .get::<ConnectionGrants>()
            .map_or(Grants::NONE, |g| g.0);
        call.permitted(grants).map_err(|denied| {
            let reply = ErrorReply::PermissionDenied(denied.to_string());
            self.metrics().error(&reply);
            Status::permission_denied(denied.to_string())
        })
    }

    pub fn new(shared: Arc<Shared>, metrics_slot: usize) -> PdService {
        PdService {
            shared,
            metrics_slot,
        }
    }

    fn metrics(&self) -> &CoreMetrics {
        self.shared.metrics.core(self.metrics_slot)
    }

    fn cluster_id(&self) -> u64 {
        self.shared.membership.cluster_id
    }

    fn header(&self) -> Option<pdpb::ResponseHeader> {
        Some(pdpb::ResponseHeader {
            cluster_id: self.cluster_id(),
            error: None,
        })
    }

    fn error_header(&self, kind: pdpb::ErrorType, message: String) -> Option<pdpb::ResponseHeader> {
        Some(pdpb::ResponseHeader {
            cluster_id: self.cluster_id(),
            error: Some(pdpb::Error {
                r#type: kind as i32,
                message,
            }),
        })
    }

    /// PD's request check: a follower refuses with "not leader" (clients then ask `GetMembers`
    /// for the leader); a header for another cluster is a failed precondition.
    fn check(&self, header: Option<&pdpb::RequestHeader>) -> Result<(), Status> {
        if !self.shared.membership.is_leader() {
            return Err(not_leader());
        }
        self.check_cluster(header)
    }

    fn check_cluster(&self, header: Option<&pdpb::RequestHeader>) -> Result<(), Status> {
        let got = header.map(|h| h.cluster_id).unwrap_or(0);
        if got != self.cluster_id() {
            return Err(Status::failed_precondition(format!(
                "mismatch cluster id, need {} but got {got}",
                self.cluster_id()
            )));
        }
        Ok(())
    }

    async fn call(&self, req: Request) -> Response {
        execute(Op::of(req), &self.shared, self.metrics()).await
    }

    /// Runs a placement request. `Ok(Err(header))` is an answer PD gives in the response header
    /// (not bootstrapped); `Err(status)` is one PD gives as a gRPC status.
    async fn placement(
        &self,
        req: Request,
    ) -> Result<Result<Reply, Option<pdpb::ResponseHeader>>, Status> {
        let response = self.call(req).await;
        self.answer(response)
    }

    /// A placement `Response` the way `placement` reports it.
    fn answer(
        &self,
        response: Response,
    ) -> Result<Result<Reply, Option<pdpb::ResponseHeader>>, Status> {
        match response {
            Response::Ok(reply) => Ok(Ok(reply)),
            Response::Err(e) => self.refusal(e).map(Err),
        }
    }

    /// How PD reports each of Meridian's errors.
    fn refusal(&self, e: ErrorReply) -> Result<Option<pdpb::ResponseHeader>, Status> {
        match e {
            ErrorReply::NotBootstrapped => Ok(self.error_header(
                pdpb::ErrorType::NotBootstrapped,
                "cluster is not bootstrapped".into(),
            )),
            ErrorReply::NotLeader { .. } => Err(not_leader()),
            ErrorReply::StaleEpoch(m) => Ok(self.error_header(pdpb::ErrorType::Unknown, m)),
            ErrorReply::InvalidArgument(m) => Err(Status::invalid_argument(m)),
            ErrorReply::Unavailable(m) => Err(Status::unavailable(m)),
            ErrorReply::Internal(m) => Err(Status::internal(m)),
            ErrorReply::PermissionDenied(m) => Err(Status::permission_denied(m)),
            ErrorReply::LimitExceeded(m) => Err(Status::resource_exhausted(m)),
        }
    }

    fn member(&self, m: &MemberInfo) -> pdpb::Member {
        let client_urls = if m.grpc_url.is_empty() {
            Vec::new()
        } else {
            vec![m.grpc_url.clone()]
        };
        pdpb::Member {
            name: m.name.clone(),
            member_id: m.id,
            peer_urls: vec![m.admin_url.clone()],
            client_urls,
            ..Default::default()
        }
    }

    /// PD's leader answers a key no region holds with a plain header and no region.
    fn region_reply(&self, found: Option<Region>) -> pdpb::GetRegionResponse {
        pdpb::GetRegionResponse {
            header: self.header(),
            leader: found.as_ref().and_then(convert::leader_to),
            region: found.as_ref().map(convert::region_to),
            ..Default::default()
        }
    }

    fn scan_entry(r: &Region) -> pdpb::Region {
        pdpb::Region {
            region: Some(convert::region_to(r)),
            leader: convert::leader_to(r),
            ..Default::default()
        }
    }
}

fn not_leader() -> Status {
    Status::unavailable("not leader")
}

fn bad(e: Malformed) -> Status {
    Status::invalid_argument(e.0)
}

fn unexpected(reply: Reply) -> Status {
    Status::internal(format!("unexpected reply {reply:?}"))
}

type Stream<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

/// Answers a bidi stream one request at a time, in order, until the client closes it, an
/// answer is an error (sent, then the stream ends), or the node stops: then the stream ends, so
/// the client reconnects to whoever leads next.
fn answer_each<Q, A, F, Fut>(
    service: Arc<PdService>,
    mut inbound: Streaming<Q>,
    what: &'static str,
    answer: F,
) -> Stream<A>
where
    Q: Send + 'static,
    A: Send + 'static,
    F: Fn(Arc<PdService>, Q) -> Fut + Send + 'static,
    Fut: Future<Output = Result<A, Status>> + Send,
{
    let (tx, rx) = mpsc::channel(STREAM_BACKLOG);
    let mut shutdown = service.shared.shutdown.clone();
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                next = inbound.message() => next,
                _ = shutdown.wait_for(|s| *s) => return,
            };
            let req = match next {
                Ok(Some(req)) => req,
                Ok(None) => return,
                Err(status) => {
                    tracing::debug!("{what} stream ended: {status}");
                    return;
                }
            };
            let reply = answer(service.clone(), req).await;
            let end = reply.is_err();
            if tx.send(reply).await.is_err() || end {
                return;
            }
        }
    });
    Box::pin(ReceiverStream::new(rx))
}

#[tonic::async_trait]
impl Pd for Arc<PdService> {
    async fn get_members(
        &self,
        request: GrpcRequest<pdpb::GetMembersRequest>,
    ) -> Result<GrpcResponse<pdpb::GetMembersResponse>, Status> {
        PdService::get_members(self, request).await
    }

    type TsoStream = Stream<pdpb::TsoResponse>;

    async fn tso(
        &self,
        request: GrpcRequest<Streaming<pdpb::TsoRequest>>,
    ) -> Result<GrpcResponse<Self::TsoStream>, Status> {
        PdService::tso(self, request).await
    }

    async fn bootstrap(
        &self,
        request: GrpcRequest<pdpb::BootstrapRequest>,
    ) -> Result<GrpcResponse<pdpb::BootstrapResponse>, Status> {
        PdService::bootstrap(self, request).await
    }

    async fn is_bootstrapped(
        &self,
        request: GrpcRequest<pdpb::IsBootstrappedRequest>,
    ) -> Result<GrpcResponse<pdpb::IsBootstrappedResponse>, Status> {
        PdService::is_bootstrapped(self, request).await
    }

    async fn alloc_id(
        &self,
        request: GrpcRequest<pdpb::AllocIdRequest>,
    ) -> Result<GrpcResponse<pdpb::AllocIdResponse>, Status> {
        PdService::alloc_id(self, request).await
    }

    async fn get_store(
        &self,
        request: GrpcRequest<pdpb::GetStoreRequest>,
    ) -> Result<GrpcResponse<pdpb::GetStoreResponse>, Status> {
        PdService::get_store(self, request).await
    }

    async fn put_store(
        &self,
        request: GrpcRequest<pdpb::PutStoreRequest>,
    ) -> Result<GrpcResponse<pdpb::PutStoreResponse>, Status> {
        PdService::put_store(self, request).await
    }

    async fn get_all_stores(
        &self,
        request: GrpcRequest<pdpb::GetAllStoresRequest>,
    ) -> Result<GrpcResponse<pdpb::GetAllStoresResponse>, Status> {
        PdService::get_all_stores(self, request).await
    }

    async fn store_heartbeat(
        &self,
        request: GrpcRequest<pdpb::StoreHeartbeatRequest>,
    ) -> Result<GrpcResponse<pdpb::StoreHeartbeatResponse>, Status> {
        PdService::store_heartbeat(self, request).await
    }

    type RegionHeartbeatStream = Stream<pdpb::RegionHeartbeatResponse>;

    async fn region_heartbeat(
        &self,
        request: GrpcRequest<Streaming<pdpb::RegionHeartbeatRequest>>,
    ) -> Result<GrpcResponse<Self::RegionHeartbeatStream>, Status> {
        PdService::region_heartbeat(self, request).await
    }

    async fn get_region(
        &self,
        request: GrpcRequest<pdpb::GetRegionRequest>,
    ) -> Result<GrpcResponse<pdpb::GetRegionResponse>, Status> {
        PdService::get_region(self, request).await
    }

    async fn get_prev_region(
        &self,
        request: GrpcRequest<pdpb::GetRegionRequest>,
    ) -> Result<GrpcResponse<pdpb::GetRegionResponse>, Status> {
        PdService::get_prev_region(self, request).await
    }

    async fn get_region_by_id(
        &self,
        request: GrpcRequest<pdpb::GetRegionByIdRequest>,
    ) -> Result<GrpcResponse<pdpb::GetRegionResponse>, Status> {
        PdService::get_region_by_id(self, request).await
    }

    type QueryRegionStream = Stream<pdpb::QueryRegionResponse>;

    /// The router client's batched lookups (keys, previous keys and ids in one message), one
    /// response per request message; see `query_one`.
    async fn query_region(
        &self,
        request: GrpcRequest<Streaming<pdpb::QueryRegionRequest>>,
    ) -> Result<GrpcResponse<Self::QueryRegionStream>, Status> {
        PdService::query_region(self, request).await
    }

    async fn scan_regions(
        &self,
        request: GrpcRequest<pdpb::ScanRegionsRequest>,
    ) -> Result<GrpcResponse<pdpb::ScanRegionsResponse>, Status> {
        PdService::scan_regions(self, request).await
    }

    async fn batch_scan_regions(
        &self,
        request: GrpcRequest<pdpb::BatchScanRegionsRequest>,
    ) -> Result<GrpcResponse<pdpb::BatchScanRegionsResponse>, Status> {
        PdService::batch_scan_regions(self, request).await
    }

    async fn ask_batch_split(
        &self,
        request: GrpcRequest<pdpb::AskBatchSplitRequest>,
    ) -> Result<GrpcResponse<pdpb::AskBatchSplitResponse>, Status> {
        PdService::ask_batch_split(self, request).await
    }

    async fn report_batch_split(
        &self,
        request: GrpcRequest<pdpb::ReportBatchSplitRequest>,
    ) -> Result<GrpcResponse<pdpb::ReportBatchSplitResponse>, Status> {
        PdService::report_batch_split(self, request).await
    }

    async fn get_gc_safe_point(
        &self,
        request: GrpcRequest<pdpb::GetGcSafePointRequest>,
    ) -> Result<GrpcResponse<pdpb::GetGcSafePointResponse>, Status> {
        PdService::get_gc_safe_point(self, request).await
    }

    async fn update_gc_safe_point(
        &self,
        request: GrpcRequest<pdpb::UpdateGcSafePointRequest>,
    ) -> Result<GrpcResponse<pdpb::UpdateGcSafePointResponse>, Status> {
        PdService::update_gc_safe_point(self, request).await
    }

    async fn update_service_gc_safe_point(
        &self,
        request: GrpcRequest<pdpb::UpdateServiceGcSafePointRequest>,
    ) -> Result<GrpcResponse<pdpb::UpdateServiceGcSafePointResponse>, Status> {
        PdService::update_service_gc_safe_point(self, request).await
    }

    /// PD's `GetGCState` (tikv/pd server/gc_service.go) over Meridian's v1 GC state. Meridian has
    /// no keyspaces, so every request reads the null keyspace's ("unified") state, as PD does for
    /// a request without a keyspace, for an id outside the keyspace id range, and for the
    /// DEFAULT keyspace (0, which PD GCs with the unified state); any other keyspace id does not
    /// exist here, which PD answers with an UNKNOWN error in the header.
    ///
    /// Meridian keeps no txn safe point apart from the GC safe point (no `AdvanceTxnSafePoint`;
    /// `gc_worker`'s service safe point is an ordinary one), so the GC safe point is reported as
    /// both. PD keeps `gc_safe_point <= txn_safe_point`, so this is the lowest txn safe point its
    /// invariant allows: clients refuse reads below the txn safe point, and below this one is
    /// exactly what GC may already have collected.
    ///
    /// Service safe points (`UpdateServiceGCSafePoint`) are what PD now keeps as GC barriers
    /// (its compatible path turns them into `SetGCBarrier`), so they are the reported barriers,
    /// without `gc_worker`'s, as PD leaves it out. Global GC barriers cannot be set here
    /// (`SetGlobalGCBarrier` is not served): when asked for, the answer is PD's "fulfilled, none
    /// stored", an empty list.
    async fn get_gc_state(
        &self,
        request: GrpcRequest<pdpb::GetGcStateRequest>,
    ) -> Result<GrpcResponse<pdpb::GetGcStateResponse>, Status> {
        PdService::get_gc_state(self, request).await
    }

    async fn get_cluster_info(
        &self,
        request: GrpcRequest<pdpb::GetClusterInfoRequest>,
    ) -> Result<GrpcResponse<pdpb::GetClusterInfoResponse>, Status> {
        PdService::get_cluster_info(self, request).await
    }
}

/// Records a region a `QueryRegion` lookup found in `regions_by_id` (once) and returns its id;
/// 0 for none (PD's `sortOutKeyIDMap`).
fn add_found(
    regions_by_id: &mut HashMap<u64, pdpb::RegionResponse>,
    found: Option<&Region>,
) -> u64 {
    let Some(region) = found else { return 0 };
    let entry = pdpb::RegionResponse {
        region: Some(convert::region_to(region)),
        leader: convert::leader_to(region),
        ..Default::default()
    };
    match regions_by_id.entry(region.id) {
        Entry::Occupied(mut slot) => {
            if slot.get().region.is_none() {
                slot.insert(entry);
            }
        }
        Entry::Vacant(slot) => {
            slot.insert(entry);
        }
    }
    region.id
}
