//! `pdpb.PD` on Meridian's engine: each RPC checks its header as PD does (cluster id, then
//! leadership), becomes Meridian `Request`s served by `server::service` (`execute`, or
//! `execute_batch` for a stream's heartbeats and a QueryRegion's lookups), and the `Response`
//! becomes the kvproto reply. Owns PD's error conventions; holds no placement or TSO logic.
//! This file holds what every RPC shares (the header checks, the error mapping, the unary
//! shape in [`PdService::unary`], streams) and the `Pd` trait, each method handing over to its
//! group's file: `members`, `tso`, `stores`, `cluster_config`, `heartbeat`, `routing`,
//! `buckets`, `splits`, `gc`, `resolved_ts`, `external_ts`, `global_config`, `operators`,
//! `sync` (the region syncer's stream, `grpc::region_sync`).

// Replies end in `..Default::default()` even where the proto subset has no other field yet, so
// a field added to `proto/kvproto` later defaults instead of breaking the build.
#![allow(clippy::needless_update)]

mod buckets;
mod cluster_config;
mod external_ts;
mod gc;
mod global_config;
mod heartbeat;
mod members;
mod operators;
mod resolved_ts;
mod routing;
mod splits;
mod stores;
mod sync;
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
use crate::auth::{Call, Caller};
use crate::kvproto::metapb;
use crate::kvproto::pdpb::{self, pd_server::Pd};
use crate::placement::{ClusterMeta, Region, RegionStats};
use crate::proto::{
    ErrorReply, MemberInfo, Refusal, Reply, Request, Response, MAX_BATCH_SCAN_REGIONS,
};
use crate::server::placement::push::PushStream;
use crate::server::placement::{PlacementOp, RouteOp};
use crate::server::service::{
    admit as admit_store, execute, execute_batch, locate_many_from_copy, BatchRoom, Op,
};
use crate::server::Shared;
use crate::tso::{Timestamp, MAX_COUNT};

/// PD's metadata key by which a client lets a follower answer a routing read (its Go client's
/// `EnableFollowerHandle`, client-go's follower handle). PD looks at the key, not its value.
pub const FOLLOWER_HANDLE: &str = "pd-allow-follower-handle";

/// PD's refusal of a routing read at a follower when the caller did not send
/// [`FOLLOWER_HANDLE`] (`errs.ErrFollowerHandlingNotAllowed`). Clients read it as they read
/// "not leader", which it contains: they ask `GetMembers` for the leader.
const FOLLOWER_HANDLING_NOT_ALLOWED: &str = "not leader and follower handling not allowed";

/// Whether a follower answers an RPC (PD's `allowFollower` in `validateRoleInRequest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FollowerHandle {
    /// Only the leader answers; a follower says "not leader".
    Never,
    /// A routing read the caller did not let a follower answer; a follower says
    /// [`FOLLOWER_HANDLING_NOT_ALLOWED`].
    NotAllowed,
    /// A routing read the caller lets a follower in sync answer.
    Allowed,
}

impl FollowerHandle {
    /// What a routing read's caller allows: PD looks at the key, not its value.
    fn of<T>(request: &GrpcRequest<T>) -> FollowerHandle {
        if request.metadata().contains_key(FOLLOWER_HANDLE) {
            FollowerHandle::Allowed
        } else {
            FollowerHandle::NotAllowed
        }
    }
}

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
        ConnectionGrants::authorize(request, call, self.metrics())
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

    /// PD's answer from a follower that cannot answer a routing read from its copy.
    fn region_not_found(&self) -> Option<pdpb::ResponseHeader> {
        self.error_header(pdpb::ErrorType::RegionNotFound, "region not found".into())
    }

    /// Whether this member answers a read as a follower.
    fn by_follower(&self, handle: FollowerHandle) -> bool {
        handle == FollowerHandle::Allowed && !self.shared.membership.is_leader()
    }

    /// PD's request check: a follower refuses with "not leader" (clients then ask `GetMembers`
    /// for the leader); a header for another cluster is a failed precondition.
    fn check(&self, header: Option<&pdpb::RequestHeader>) -> Result<(), Status> {
        self.check_role(header, FollowerHandle::Never).map(|_| ())
    }

    /// PD's `validateRoleInRequest`: the leader answers; a follower answers a routing read its
    /// caller allowed (`Ok(true)`: by a follower) and refuses the rest in PD's words; then the
    /// cluster id.
    fn check_role(
        &self,
        header: Option<&pdpb::RequestHeader>,
        handle: FollowerHandle,
    ) -> Result<bool, Status> {
        let by_follower = !self.shared.membership.is_leader();
        if by_follower {
            match handle {
                FollowerHandle::Never => return Err(not_leader()),
                FollowerHandle::NotAllowed => {
                    return Err(Status::unavailable(FOLLOWER_HANDLING_NOT_ALLOWED))
                }
                FollowerHandle::Allowed => {}
            }
        }
        self.check_cluster(header)?;
        Ok(by_follower)
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

    /// [`call`](Self::call) for a request that may name a store: checked first against the
    /// store the caller's certificate speaks for (bind-store-identity).
    async fn call_as(&self, caller: &Caller, req: Request) -> Response {
        self.execute_as(caller, Op::of(req)).await
    }

    /// [`call_as`](Self::call_as) for a request already sorted.
    async fn execute_as(&self, caller: &Caller, op: Op) -> Response {
        match admit_store(op, caller, &self.shared) {
            Ok(op) => execute(op, &self.shared, self.metrics()).await,
            Err(refused) => {
                self.metrics().error(&refused);
                Response::Err(refused)
            }
        }
    }

    /// Authorizes the call and checks the request's header: the request, or PD's refusal.
    fn admit<Q: PdRequest>(&self, request: GrpcRequest<Q>, call: Call) -> Result<Q, Status> {
        self.authorize(&request, call)?;
        let req = request.into_inner();
        self.check(req.header())?;
        Ok(req)
    }

    /// The shape of every unary placement RPC: admitted as [`admit`](Self::admit) says, turned
    /// into one `Request` and served, and answered by `answer` with this node's header (unless
    /// `answer` set an error header); a refusal PD reports in the header is a response that is
    /// only that header, and the rest are gRPC statuses.
    async fn unary<Q: PdRequest, A: PdResponse>(
        &self,
        request: GrpcRequest<Q>,
        call: Call,
        to_request: impl FnOnce(Q) -> Result<Request, Status>,
        answer: impl FnOnce(&Self, Reply) -> Result<A, Status>,
    ) -> Result<GrpcResponse<A>, Status> {
        self.unary_read(request, call, FollowerHandle::Never, to_request, answer)
            .await
    }

    /// [`unary`](Self::unary) for a routing read, which a follower in sync answers too when
    /// `handle` allows it (the caller sent [`FOLLOWER_HANDLE`]). A follower that is not in sync
    /// answers as PD's follower whose syncer is not running: REGION_NOT_FOUND in the header.
    async fn unary_read<Q: PdRequest, A: PdResponse>(
        &self,
        request: GrpcRequest<Q>,
        call: Call,
        handle: FollowerHandle,
        to_request: impl FnOnce(Q) -> Result<Request, Status>,
        answer: impl FnOnce(&Self, Reply) -> Result<A, Status>,
    ) -> Result<GrpcResponse<A>, Status> {
        let caller = ConnectionGrants::caller_of(&request);
        self.authorize(&request, call)?;
        let req = request.into_inner();
        let by_follower = self.check_role(req.header(), handle)?;
        let mut op = Op::of(to_request(req)?);
        if by_follower {
            op = op.allowing_follower();
        }
        let response = self.execute_as(&caller, op).await;
        if by_follower && matches!(response, Response::Err(ErrorReply::NotLeader { .. })) {
            let mut refused = A::default();
            *refused.header_mut() = self.region_not_found();
            return Ok(GrpcResponse::new(refused));
        }
        let mut reply = match self.answer(response)? {
            Ok(reply) => answer(self, reply)?,
            Err(header) => {
                let mut refused = A::default();
                *refused.header_mut() = header;
                return Ok(GrpcResponse::new(refused));
            }
        };
        let header = reply.header_mut();
        if header.is_none() {
            *header = self.header();
        }
        Ok(GrpcResponse::new(reply))
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

    /// [`placement`](Self::placement) for a request that may name a store.
    async fn placement_as(
        &self,
        caller: &Caller,
        req: Request,
    ) -> Result<Result<Reply, Option<pdpb::ResponseHeader>>, Status> {
        let response = self.call_as(caller, req).await;
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
            // A call the role allows, for a store the certificate does not speak for
            // (bind-store-identity): PD has no such check and so no error type for it; the
            // refusal comes in PD's error header, as PD refuses a store it will not serve.
            // Calls the role does not allow are refused before this, with PERMISSION_DENIED.
            ErrorReply::PermissionDenied(m) => {
                Ok(self.error_header(pdpb::ErrorType::Unknown, format!("permission denied: {m}")))
            }
            ErrorReply::LimitExceeded(m) => Err(Status::resource_exhausted(m)),
            ErrorReply::Refused(r) => {
                let kind = match r {
                    Refusal::Compacted { .. } => pdpb::ErrorType::DataCompacted,
                    Refusal::ExternalTsAboveTso
                    | Refusal::ExternalTsNotBootstrapped
                    | Refusal::ExternalTsNotIncreasing => pdpb::ErrorType::InvalidValue,
                    Refusal::StoreTombstone => pdpb::ErrorType::StoreTombstone,
                    Refusal::StoreVersion { .. }
                    | Refusal::InvalidStoreVersion { .. }
                    | Refusal::StoreNotFound(_)
                    | Refusal::ClusterMismatch { .. }
                    | Refusal::InvalidSplit
                    | Refusal::RegionNotFound(_) => pdpb::ErrorType::Unknown,
                };
                Ok(self.error_header(kind, r.to_string()))
            }
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
    fn region_reply(&self, reply: Reply) -> Result<pdpb::GetRegionResponse, Status> {
        match reply {
            Reply::Region(found) => Ok(pdpb::GetRegionResponse {
                header: self.header(),
                leader: found.as_ref().and_then(convert::leader_to),
                region: found.as_ref().map(convert::region_to),
                ..Default::default()
            }),
            other => Err(unexpected(other)),
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

/// A kvproto request that carries PD's request header.
trait PdRequest {
    fn header(&self) -> Option<&pdpb::RequestHeader>;
}

/// A kvproto response that carries PD's response header.
trait PdResponse: Default {
    fn header_mut(&mut self) -> &mut Option<pdpb::ResponseHeader>;
}

/// The `header` field of each message the unary RPCs take and give.
macro_rules! pd_headers {
    (requests: $($request:ident),*; responses: $($response:ident),* $(,)?) => {
        $(
            impl PdRequest for pdpb::$request {
                fn header(&self) -> Option<&pdpb::RequestHeader> {
                    self.header.as_ref()
                }
            }
        )*
        $(
            impl PdResponse for pdpb::$response {
                fn header_mut(&mut self) -> &mut Option<pdpb::ResponseHeader> {
                    &mut self.header
                }
            }
        )*
    };
}

pd_headers! {
    requests: BootstrapRequest, IsBootstrappedRequest, AllocIdRequest, GetStoreRequest,
        PutStoreRequest, GetAllStoresRequest, StoreHeartbeatRequest, GetRegionRequest,
        GetRegionByIdRequest, ScanRegionsRequest, BatchScanRegionsRequest, AskBatchSplitRequest,
        ReportBatchSplitRequest, GetGcSafePointRequest, UpdateGcSafePointRequest,
        UpdateServiceGcSafePointRequest, GetGcStateRequest, ReportMinResolvedTsRequest,
        GetClusterConfigRequest, PutClusterConfigRequest, AskSplitRequest, ReportSplitRequest,
        SetExternalTimestampRequest, GetExternalTimestampRequest, GetMinTsRequest,
        ScatterRegionRequest, GetOperatorRequest, SplitRegionsRequest,
        SplitAndScatterRegionsRequest;
    responses: BootstrapResponse, IsBootstrappedResponse, AllocIdResponse, GetStoreResponse,
        PutStoreResponse, GetAllStoresResponse, StoreHeartbeatResponse, GetRegionResponse,
        ScanRegionsResponse, BatchScanRegionsResponse, AskBatchSplitResponse,
        ReportBatchSplitResponse, GetGcSafePointResponse, UpdateGcSafePointResponse,
        UpdateServiceGcSafePointResponse, GetGcStateResponse, GetClusterConfigResponse,
        PutClusterConfigResponse, AskSplitResponse, ReportSplitResponse,
        SetExternalTimestampResponse, GetExternalTimestampResponse, GetMinTsResponse,
        ScatterRegionResponse, GetOperatorResponse, SplitRegionsResponse,
        SplitAndScatterRegionsResponse,
}

/// `impl Pd`: each served RPC handed to the `PdService` method of the same name in its group's
/// file. An RPC of the kvproto subset not listed here answers UNIMPLEMENTED.
macro_rules! pd_service {
    (
        unary { $($unary:ident($uq:ident) -> $ua:ident;)* }
        streams { $($stream:ident($sq:ident) -> $sa:ident;)* }
        client_streams { $($cstream:ident($cq:ident) -> $ca:ident;)* }
        server_streams { $($sstream:ident($ssq:ident) -> $ssa:ident;)* }
    ) => {
        #[tonic::async_trait]
        impl Pd for Arc<PdService> {
            $(
                async fn $unary(
                    &self,
                    request: GrpcRequest<pdpb::$uq>,
                ) -> Result<GrpcResponse<pdpb::$ua>, Status> {
                    PdService::$unary(self, request).await
                }
            )*
            $(
                async fn $stream(
                    &self,
                    request: GrpcRequest<Streaming<pdpb::$sq>>,
                ) -> Result<GrpcResponse<Stream<pdpb::$sa>>, Status> {
                    PdService::$stream(self, request).await
                }
            )*
            $(
                async fn $cstream(
                    &self,
                    request: GrpcRequest<Streaming<pdpb::$cq>>,
                ) -> Result<GrpcResponse<pdpb::$ca>, Status> {
                    PdService::$cstream(self, request).await
                }
            )*
            $(
                async fn $sstream(
                    &self,
                    request: GrpcRequest<pdpb::$ssq>,
                ) -> Result<GrpcResponse<Stream<pdpb::$ssa>>, Status> {
                    PdService::$sstream(self, request).await
                }
            )*
        }
    };
}

pd_service! {
    unary {
        get_members(GetMembersRequest) -> GetMembersResponse;
        get_cluster_info(GetClusterInfoRequest) -> GetClusterInfoResponse;
        bootstrap(BootstrapRequest) -> BootstrapResponse;
        is_bootstrapped(IsBootstrappedRequest) -> IsBootstrappedResponse;
        alloc_id(AllocIdRequest) -> AllocIdResponse;
        is_snapshot_recovering(IsSnapshotRecoveringRequest) -> IsSnapshotRecoveringResponse;
        get_store(GetStoreRequest) -> GetStoreResponse;
        put_store(PutStoreRequest) -> PutStoreResponse;
        get_all_stores(GetAllStoresRequest) -> GetAllStoresResponse;
        store_heartbeat(StoreHeartbeatRequest) -> StoreHeartbeatResponse;
        get_region(GetRegionRequest) -> GetRegionResponse;
        get_prev_region(GetRegionRequest) -> GetRegionResponse;
        get_region_by_id(GetRegionByIdRequest) -> GetRegionResponse;
        scan_regions(ScanRegionsRequest) -> ScanRegionsResponse;
        batch_scan_regions(BatchScanRegionsRequest) -> BatchScanRegionsResponse;
        ask_batch_split(AskBatchSplitRequest) -> AskBatchSplitResponse;
        report_batch_split(ReportBatchSplitRequest) -> ReportBatchSplitResponse;
        ask_split(AskSplitRequest) -> AskSplitResponse;
        report_split(ReportSplitRequest) -> ReportSplitResponse;
        get_gc_safe_point(GetGcSafePointRequest) -> GetGcSafePointResponse;
        update_gc_safe_point(UpdateGcSafePointRequest) -> UpdateGcSafePointResponse;
        update_service_gc_safe_point(UpdateServiceGcSafePointRequest)
            -> UpdateServiceGcSafePointResponse;
        get_gc_state(GetGcStateRequest) -> GetGcStateResponse;
        report_min_resolved_ts(ReportMinResolvedTsRequest) -> ReportMinResolvedTsResponse;
        get_cluster_config(GetClusterConfigRequest) -> GetClusterConfigResponse;
        put_cluster_config(PutClusterConfigRequest) -> PutClusterConfigResponse;
        set_external_timestamp(SetExternalTimestampRequest) -> SetExternalTimestampResponse;
        get_external_timestamp(GetExternalTimestampRequest) -> GetExternalTimestampResponse;
        get_min_ts(GetMinTsRequest) -> GetMinTsResponse;
        store_global_config(StoreGlobalConfigRequest) -> StoreGlobalConfigResponse;
        load_global_config(LoadGlobalConfigRequest) -> LoadGlobalConfigResponse;
        scatter_region(ScatterRegionRequest) -> ScatterRegionResponse;
        get_operator(GetOperatorRequest) -> GetOperatorResponse;
        split_regions(SplitRegionsRequest) -> SplitRegionsResponse;
        split_and_scatter_regions(SplitAndScatterRegionsRequest)
            -> SplitAndScatterRegionsResponse;
    }
    streams {
        tso(TsoRequest) -> TsoResponse;
        region_heartbeat(RegionHeartbeatRequest) -> RegionHeartbeatResponse;
        query_region(QueryRegionRequest) -> QueryRegionResponse;
        sync_regions(SyncRegionRequest) -> SyncRegionResponse;
    }
    client_streams {
        report_buckets(ReportBucketsRequest) -> ReportBucketsResponse;
    }
    server_streams {
        watch_global_config(WatchGlobalConfigRequest) -> WatchGlobalConfigResponse;
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
