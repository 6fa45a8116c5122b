//! `pdpb.PD` on Meridian's engine: each RPC checks its header as PD does (cluster id, then
//! leadership), becomes one Meridian `Request` through `service::execute`, and its `Response`
//! becomes the kvproto reply. Owns PD's error conventions; holds no placement or TSO logic.

// Replies end in `..Default::default()` even where the proto subset has no other field yet, so
// a field added to `proto/kvproto` later defaults instead of breaking the build.
#![allow(clippy::needless_update)]

use std::collections::hash_map::{Entry, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream as _;
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status, Streaming};

use super::convert::{self, Malformed};
use crate::admin::{CoreMetrics, RequestKind};
use crate::auth::Call;
use crate::kvproto::metapb;
use crate::kvproto::pdpb::{self, pd_server::Pd};
use crate::placement::{Region, RegionStats};
use crate::proto::{ErrorReply, MemberInfo, Reply, Request, Response, MAX_BATCH_SCAN_REGIONS};
use crate::server::placement::{get_regions, heartbeats};
use crate::server::service::{execute, Op};
use crate::server::Shared;
use crate::tso::{Timestamp, MAX_COUNT};

/// Most heartbeats taken from one stream before they are handed to the shards as one batch.
const HEARTBEAT_BATCH: usize = 256;
/// Replies a stream may have queued before its reader waits for the client to take them.
const STREAM_BACKLOG: usize = 64;

/// PD's `NullKeyspaceID`: the keyspace of a request that names none, whose GC state is the
/// cluster-wide ("unified") one (tikv/pd pkg/keyspace/constant/constant.go).
const NULL_KEYSPACE: u32 = 0xFFFF_FFFF;
/// Keyspace ids PD can hold; an id with higher bits set is taken as the null keyspace.
const VALID_KEYSPACE_ID_MASK: u32 = 0x00FF_FFFF;
/// PD's `DefaultKeyspaceID`: the DEFAULT keyspace PD creates at bootstrap, GC'd cluster-wide.
const DEFAULT_KEYSPACE: u32 = 0;

pub struct PdService {
    shared: Arc<Shared>,
    /// Metrics slot of the gRPC front end (one past the cores').
    metrics_slot: usize,
}

impl PdService {
    /// Refuses the call, counted and changing nothing, unless the connection's certificate
    /// carries the role it needs.
    fn authorize<T>(&self, request: &GrpcRequest<T>, call: Call) -> Result<(), Status> {
        let chain = request.peer_certs();
        let grants = self
            .shared
            .client_auth
            .grants(chain.as_deref().map(Vec::as_slice));
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
        self.authorize(&request, Call::GetMembers)?;
        self.metrics().request(RequestKind::GetMembers);
        // Every member answers, and clients discover the cluster id here: the header's cluster
        // id is not checked (PD does not either).
        let _ = request;
        let reply = self.shared.membership.reply();
        let leader = reply.leader.as_ref().map(|l| self.member(l));
        Ok(GrpcResponse::new(pdpb::GetMembersResponse {
            header: self.header(),
            members: reply.members.iter().map(|m| self.member(m)).collect(),
            etcd_leader: leader.clone(),
            leader,
            ..Default::default()
        }))
    }

    type TsoStream = Stream<pdpb::TsoResponse>;

    async fn tso(
        &self,
        request: GrpcRequest<Streaming<pdpb::TsoRequest>>,
    ) -> Result<GrpcResponse<Self::TsoStream>, Status> {
        self.authorize(&request, Call::Tso)?;
        Ok(GrpcResponse::new(answer_each(
            self.clone(),
            request.into_inner(),
            "tso",
            |this, req| async move { this.tso_one(&req).await },
        )))
    }

    async fn bootstrap(
        &self,
        request: GrpcRequest<pdpb::BootstrapRequest>,
    ) -> Result<GrpcResponse<pdpb::BootstrapResponse>, Status> {
        self.authorize(&request, Call::Bootstrap)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let store = convert::store_from(
            req.store
                .as_ref()
                .ok_or_else(|| Status::invalid_argument("no store"))?,
        )
        .map_err(bad)?;
        let region_pb = req
            .region
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("no region"))?;
        let region = convert::region_from(region_pb, region_pb.peers.first()).map_err(bad)?;
        let bootstrapped = match self.placement(Request::IsBootstrapped).await? {
            Ok(Reply::Bootstrapped(b)) => b,
            Ok(other) => return Err(unexpected(other)),
            Err(header) => {
                return Ok(GrpcResponse::new(pdpb::BootstrapResponse {
                    header,
                    ..Default::default()
                }))
            }
        };
        if bootstrapped {
            return Ok(GrpcResponse::new(pdpb::BootstrapResponse {
                header: self.error_header(
                    pdpb::ErrorType::AlreadyBootstrapped,
                    "cluster is already bootstrapped".into(),
                ),
                ..Default::default()
            }));
        }
        let header = match self.placement(Request::Bootstrap { store, region }).await? {
            Ok(_) => self.header(),
            Err(header) => header,
        };
        Ok(GrpcResponse::new(pdpb::BootstrapResponse {
            header,
            ..Default::default()
        }))
    }

    async fn is_bootstrapped(
        &self,
        request: GrpcRequest<pdpb::IsBootstrappedRequest>,
    ) -> Result<GrpcResponse<pdpb::IsBootstrappedResponse>, Status> {
        self.authorize(&request, Call::IsBootstrapped)?;
        self.check(request.get_ref().header.as_ref())?;
        match self.placement(Request::IsBootstrapped).await? {
            Ok(Reply::Bootstrapped(bootstrapped)) => {
                Ok(GrpcResponse::new(pdpb::IsBootstrappedResponse {
                    header: self.header(),
                    bootstrapped,
                }))
            }
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(GrpcResponse::new(pdpb::IsBootstrappedResponse {
                header,
                bootstrapped: false,
            })),
        }
    }

    async fn alloc_id(
        &self,
        request: GrpcRequest<pdpb::AllocIdRequest>,
    ) -> Result<GrpcResponse<pdpb::AllocIdResponse>, Status> {
        self.authorize(&request, Call::AllocId)?;
        self.check(request.get_ref().header.as_ref())?;
        let request_count = request.get_ref().count;
        // One id per call whatever `count` asks for: the reply's `count` says how many were
        // given, and ids are not promised consecutive across concurrent callers.
        match self.placement(Request::AllocId).await? {
            Ok(Reply::Id(id)) => Ok(GrpcResponse::new(pdpb::AllocIdResponse {
                header: self.header(),
                id,
                // PD sets `count` only for a batch; a batch asked for gets one id here.
                count: u32::from(request_count > 1),
            })),
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(GrpcResponse::new(pdpb::AllocIdResponse {
                header,
                ..Default::default()
            })),
        }
    }

    async fn get_store(
        &self,
        request: GrpcRequest<pdpb::GetStoreRequest>,
    ) -> Result<GrpcResponse<pdpb::GetStoreResponse>, Status> {
        self.authorize(&request, Call::GetStore)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let header = match self
            .placement(Request::GetStore { id: req.store_id })
            .await?
        {
            Ok(Reply::Store(Some(s))) => {
                return Ok(GrpcResponse::new(pdpb::GetStoreResponse {
                    header: self.header(),
                    store: Some(convert::store_to(&s)),
                    stats: Some(convert::store_stats_to(&s)),
                }))
            }
            Ok(Reply::Store(None)) => self.error_header(
                pdpb::ErrorType::Unknown,
                format!("invalid store ID {}, not found", req.store_id),
            ),
            Ok(other) => return Err(unexpected(other)),
            Err(header) => header,
        };
        Ok(GrpcResponse::new(pdpb::GetStoreResponse {
            header,
            ..Default::default()
        }))
    }

    async fn put_store(
        &self,
        request: GrpcRequest<pdpb::PutStoreRequest>,
    ) -> Result<GrpcResponse<pdpb::PutStoreResponse>, Status> {
        self.authorize(&request, Call::PutStore)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let store = convert::store_from(
            req.store
                .as_ref()
                .ok_or_else(|| Status::invalid_argument("no store"))?,
        )
        .map_err(bad)?;
        let header = match self.placement(Request::PutStore { store }).await? {
            Ok(_) => self.header(),
            Err(header) => header,
        };
        Ok(GrpcResponse::new(pdpb::PutStoreResponse {
            header,
            ..Default::default()
        }))
    }

    async fn get_all_stores(
        &self,
        request: GrpcRequest<pdpb::GetAllStoresRequest>,
    ) -> Result<GrpcResponse<pdpb::GetAllStoresResponse>, Status> {
        self.authorize(&request, Call::GetAllStores)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        // PD's reply has no paging: the pages are gathered into one message.
        let mut stores = Vec::new();
        let mut after_id = 0;
        loop {
            match self.placement(Request::GetAllStores { after_id }).await? {
                Ok(Reply::Stores { stores: page, more }) => {
                    let last = page.last().map_or(after_id, |s| s.store.id);
                    stores.extend(page.iter().map(convert::store_to).filter(|s| {
                        !req.exclude_tombstone_stores
                            || s.state != metapb::StoreState::Tombstone as i32
                    }));
                    if !more || last == after_id {
                        break;
                    }
                    after_id = last;
                }
                Ok(other) => return Err(unexpected(other)),
                Err(header) => {
                    return Ok(GrpcResponse::new(pdpb::GetAllStoresResponse {
                        header,
                        ..Default::default()
                    }))
                }
            }
        }
        Ok(GrpcResponse::new(pdpb::GetAllStoresResponse {
            header: self.header(),
            stores,
        }))
    }

    async fn store_heartbeat(
        &self,
        request: GrpcRequest<pdpb::StoreHeartbeatRequest>,
    ) -> Result<GrpcResponse<pdpb::StoreHeartbeatResponse>, Status> {
        self.authorize(&request, Call::StoreHeartbeat)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let stats = req
            .stats
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("no stats"))?;
        let header = match self
            .placement(Request::StoreHeartbeat {
                store_id: stats.store_id,
                stats: convert::store_stats_from(stats),
            })
            .await?
        {
            Ok(_) => self.header(),
            Err(header) => header,
        };
        Ok(GrpcResponse::new(pdpb::StoreHeartbeatResponse {
            header,
            ..Default::default()
        }))
    }

    type RegionHeartbeatStream = Stream<pdpb::RegionHeartbeatResponse>;

    async fn region_heartbeat(
        &self,
        request: GrpcRequest<Streaming<pdpb::RegionHeartbeatRequest>>,
    ) -> Result<GrpcResponse<Self::RegionHeartbeatStream>, Status> {
        self.authorize(&request, Call::RegionHeartbeat)?;
        let inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(STREAM_BACKLOG);
        tokio::spawn(self.clone().heartbeat_stream(inbound, tx));
        Ok(GrpcResponse::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn get_region(
        &self,
        request: GrpcRequest<pdpb::GetRegionRequest>,
    ) -> Result<GrpcResponse<pdpb::GetRegionResponse>, Status> {
        self.authorize(&request, Call::GetRegion)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        self.found(Request::GetRegion {
            key: req.region_key,
        })
        .await
    }

    async fn get_prev_region(
        &self,
        request: GrpcRequest<pdpb::GetRegionRequest>,
    ) -> Result<GrpcResponse<pdpb::GetRegionResponse>, Status> {
        self.authorize(&request, Call::GetPrevRegion)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        self.found(Request::GetPrevRegion {
            key: req.region_key,
        })
        .await
    }

    async fn get_region_by_id(
        &self,
        request: GrpcRequest<pdpb::GetRegionByIdRequest>,
    ) -> Result<GrpcResponse<pdpb::GetRegionResponse>, Status> {
        self.authorize(&request, Call::GetRegionById)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        self.found(Request::GetRegionById { id: req.region_id })
            .await
    }

    type QueryRegionStream = Stream<pdpb::QueryRegionResponse>;

    /// The router client's batched lookups (keys, previous keys and ids in one message), one
    /// response per request message; see `query_one`.
    async fn query_region(
        &self,
        request: GrpcRequest<Streaming<pdpb::QueryRegionRequest>>,
    ) -> Result<GrpcResponse<Self::QueryRegionStream>, Status> {
        self.authorize(&request, Call::QueryRegion)?;
        Ok(GrpcResponse::new(answer_each(
            self.clone(),
            request.into_inner(),
            "query region",
            |this, req| async move { this.query_one(req).await },
        )))
    }

    async fn scan_regions(
        &self,
        request: GrpcRequest<pdpb::ScanRegionsRequest>,
    ) -> Result<GrpcResponse<pdpb::ScanRegionsResponse>, Status> {
        self.authorize(&request, Call::ScanRegions)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let limit = u32::try_from(req.limit.max(0)).unwrap_or(u32::MAX);
        match self
            .placement(Request::ScanRegions {
                start: req.start_key,
                end: req.end_key,
                limit,
            })
            .await?
        {
            Ok(Reply::Regions(regions)) => Ok(GrpcResponse::new(pdpb::ScanRegionsResponse {
                header: self.header(),
                region_metas: regions.iter().map(convert::region_to).collect(),
                leaders: regions
                    .iter()
                    .map(|r| convert::leader_to(r).unwrap_or_default())
                    .collect(),
                regions: regions.iter().map(PdService::scan_entry).collect(),
            })),
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(GrpcResponse::new(pdpb::ScanRegionsResponse {
                header,
                ..Default::default()
            })),
        }
    }

    async fn batch_scan_regions(
        &self,
        request: GrpcRequest<pdpb::BatchScanRegionsRequest>,
    ) -> Result<GrpcResponse<pdpb::BatchScanRegionsResponse>, Status> {
        self.authorize(&request, Call::ScanRegions)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        // PD reads a limit of 0 as "no limit"; here it is the most one answer carries, so a
        // million-region map cannot be asked for in one message.
        let mut limit = match u32::try_from(req.limit) {
            Ok(n) if n > 0 => n.min(MAX_BATCH_SCAN_REGIONS),
            _ => MAX_BATCH_SCAN_REGIONS,
        };
        let mut out: Vec<Region> = Vec::new();
        let mut last_end: Option<Vec<u8>> = None;
        for range in &req.ranges {
            if !range.end_key.is_empty() && range.end_key < range.start_key {
                return Err(Status::invalid_argument(
                    "a range's end key is before its start key",
                ));
            }
            // PD requires the ranges in order and apart; an overlap would answer a region twice.
            if let Some(prev_end) = &last_end {
                if prev_end.is_empty() || range.start_key < *prev_end {
                    return Err(Status::invalid_argument(
                        "ranges overlap or are out of order",
                    ));
                }
            }
            last_end = Some(range.end_key.clone());
            let mut start = range.start_key.clone();
            // One range may cover more regions than one scan answers: continue from the last end.
            while limit > 0 {
                let got = match self
                    .placement(Request::ScanRegions {
                        start: start.clone(),
                        end: range.end_key.clone(),
                        limit: limit.min(crate::proto::MAX_SCAN_REGIONS),
                    })
                    .await?
                {
                    Ok(Reply::Regions(regions)) => regions,
                    Ok(other) => return Err(unexpected(other)),
                    Err(header) => {
                        return Ok(GrpcResponse::new(pdpb::BatchScanRegionsResponse {
                            header,
                            ..Default::default()
                        }))
                    }
                };
                let Some(last) = got.last() else { break };
                let next = last.end_key.clone();
                limit -= got.len() as u32;
                for r in got {
                    if out.last().is_none_or(|p| p.id != r.id) {
                        out.push(r);
                    }
                }
                // A page may be short because of its size, not only because the range ran
                // out: go on until the range or the key space ends.
                if next.is_empty() || (!range.end_key.is_empty() && next >= range.end_key) {
                    break;
                }
                start = next;
            }
        }
        Ok(GrpcResponse::new(pdpb::BatchScanRegionsResponse {
            header: self.header(),
            regions: out.iter().map(PdService::scan_entry).collect(),
        }))
    }

    async fn ask_batch_split(
        &self,
        request: GrpcRequest<pdpb::AskBatchSplitRequest>,
    ) -> Result<GrpcResponse<pdpb::AskBatchSplitResponse>, Status> {
        self.authorize(&request, Call::AskBatchSplit)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let region_pb = req
            .region
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("no region"))?;
        let region = convert::region_from(region_pb, None).map_err(bad)?;
        match self
            .placement(Request::AskBatchSplit {
                region,
                count: req.split_count,
            })
            .await?
        {
            Ok(Reply::Splits(splits)) => Ok(GrpcResponse::new(pdpb::AskBatchSplitResponse {
                header: self.header(),
                ids: splits
                    .into_iter()
                    .map(|s| pdpb::SplitId {
                        new_region_id: s.region_id,
                        new_peer_ids: s.peer_ids,
                    })
                    .collect(),
            })),
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(GrpcResponse::new(pdpb::AskBatchSplitResponse {
                header,
                ..Default::default()
            })),
        }
    }

    async fn report_batch_split(
        &self,
        request: GrpcRequest<pdpb::ReportBatchSplitRequest>,
    ) -> Result<GrpcResponse<pdpb::ReportBatchSplitResponse>, Status> {
        self.authorize(&request, Call::ReportBatchSplit)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        // A split report names no leader; the regions' leaders say who leads in their next
        // heartbeats.
        let regions = req
            .regions
            .iter()
            .map(|r| convert::region_from(r, None))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        let header = match self
            .placement(Request::ReportBatchSplit { regions })
            .await?
        {
            Ok(_) => self.header(),
            Err(header) => header,
        };
        Ok(GrpcResponse::new(pdpb::ReportBatchSplitResponse { header }))
    }

    async fn get_gc_safe_point(
        &self,
        request: GrpcRequest<pdpb::GetGcSafePointRequest>,
    ) -> Result<GrpcResponse<pdpb::GetGcSafePointResponse>, Status> {
        self.authorize(&request, Call::GetGcSafePoint)?;
        self.check(request.get_ref().header.as_ref())?;
        match self.placement(Request::GetGcSafePoint).await? {
            Ok(Reply::GcSafePoint(safe_point)) => {
                Ok(GrpcResponse::new(pdpb::GetGcSafePointResponse {
                    header: self.header(),
                    safe_point,
                }))
            }
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(GrpcResponse::new(pdpb::GetGcSafePointResponse {
                header,
                safe_point: 0,
            })),
        }
    }

    async fn update_gc_safe_point(
        &self,
        request: GrpcRequest<pdpb::UpdateGcSafePointRequest>,
    ) -> Result<GrpcResponse<pdpb::UpdateGcSafePointResponse>, Status> {
        self.authorize(&request, Call::UpdateGcSafePoint)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        match self
            .placement(Request::UpdateGcSafePoint {
                safe_point: req.safe_point,
            })
            .await?
        {
            Ok(Reply::GcSafePoint(new_safe_point)) => {
                Ok(GrpcResponse::new(pdpb::UpdateGcSafePointResponse {
                    header: self.header(),
                    new_safe_point,
                }))
            }
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(GrpcResponse::new(pdpb::UpdateGcSafePointResponse {
                header,
                new_safe_point: 0,
            })),
        }
    }

    async fn update_service_gc_safe_point(
        &self,
        request: GrpcRequest<pdpb::UpdateServiceGcSafePointRequest>,
    ) -> Result<GrpcResponse<pdpb::UpdateServiceGcSafePointResponse>, Status> {
        self.authorize(&request, Call::UpdateServiceGcSafePoint)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let service_id = String::from_utf8(req.service_id)
            .map_err(|_| Status::invalid_argument("service id is not UTF-8"))?;
        match self
            .placement(Request::UpdateServiceGcSafePoint {
                service_id,
                ttl_secs: req.ttl,
                safe_point: req.safe_point,
            })
            .await?
        {
            Ok(Reply::ServiceSafePoint {
                service_id,
                ttl_secs,
                safe_point,
            }) => Ok(GrpcResponse::new(pdpb::UpdateServiceGcSafePointResponse {
                header: self.header(),
                service_id: service_id.into_bytes(),
                ttl: ttl_secs,
                min_safe_point: safe_point,
            })),
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(GrpcResponse::new(pdpb::UpdateServiceGcSafePointResponse {
                header,
                ..Default::default()
            })),
        }
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
        self.authorize(&request, Call::GetGcState)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        // The placement path first: it answers a cluster not bootstrapped as PD does, before
        // the keyspace is looked at.
        let mut gc_safe_point = match self.placement(Request::GetGcSafePoint).await? {
            Ok(Reply::GcSafePoint(safe_point)) => safe_point,
            Ok(other) => return Err(unexpected(other)),
            Err(header) => {
                return Ok(GrpcResponse::new(pdpb::GetGcStateResponse {
                    header,
                    ..Default::default()
                }))
            }
        };
        // PD's `getKeyspaceID`: no scope is the null keyspace; a scope whose oneof holds no
        // `keyspace_id` reads as id 0.
        let keyspace =
            req.keyspace_scope
                .as_ref()
                .map_or(NULL_KEYSPACE, |scope| match scope.keyspace {
                    Some(pdpb::keyspace_scope::Keyspace::KeyspaceId(id)) => id,
                    None => DEFAULT_KEYSPACE,
                });
        if keyspace & !VALID_KEYSPACE_ID_MASK == 0 && keyspace != DEFAULT_KEYSPACE {
            // PD's message for `errs.ErrKeyspaceNotFound`, with the id.
            let message = format!(
                "[PD:keyspace:ErrKeyspaceNotFound]keyspace does not exist (keyspace id {keyspace})"
            );
            return Ok(GrpcResponse::new(pdpb::GetGcStateResponse {
                header: self.error_header(pdpb::ErrorType::Unknown, message),
                ..Default::default()
            }));
        }
        let mut gc_barriers = Vec::new();
        if !req.exclude_gc_barriers {
            let state = &*self.shared.placement;
            let now_secs = (state.clock.now_ms() / 1000) as i64;
            let gc = state.gc.lock().await;
            // The safe point and the barriers from one look at the state.
            gc_safe_point = gc.gc();
            gc_barriers = gc
                .services()
                .filter(|s| s.service_id != crate::gc::GC_WORKER)
                .map(|s| pdpb::GcBarrierInfo {
                    barrier_id: s.service_id.clone(),
                    barrier_ts: s.safe_point,
                    // PD: the seconds left, rounded down, never below 0; i64::MAX never expires.
                    ttl_seconds: if s.expired_at == i64::MAX {
                        i64::MAX
                    } else {
                        s.expired_at.saturating_sub(now_secs).max(0)
                    },
                })
                .collect();
        }
        Ok(GrpcResponse::new(pdpb::GetGcStateResponse {
            header: self.header(),
            gc_state: Some(pdpb::GcState {
                keyspace_scope: Some(pdpb::KeyspaceScope {
                    keyspace: Some(pdpb::keyspace_scope::Keyspace::KeyspaceId(NULL_KEYSPACE)),
                }),
                is_keyspace_level_gc: false,
                txn_safe_point: gc_safe_point,
                gc_safe_point,
                gc_barriers,
            }),
            global_gc_barriers: req
                .include_global_gc_barriers
                .then(pdpb::GlobalGcBarriersInfo::default),
        }))
    }

    async fn get_cluster_info(
        &self,
        request: GrpcRequest<pdpb::GetClusterInfoRequest>,
    ) -> Result<GrpcResponse<pdpb::GetClusterInfoResponse>, Status> {
        self.authorize(&request, Call::GetClusterInfo)?;
        // Like GetMembers, any member answers and the cluster id is not checked: a client asks
        // this before it knows the id (kvproto even types this request's header as a response
        // header). One service mode: this process serves TSO itself.
        let _ = request;
        Ok(GrpcResponse::new(pdpb::GetClusterInfoResponse {
            header: self.header(),
            service_modes: vec![pdpb::ServiceMode::PdSvcMode as i32],
            ..Default::default()
        }))
    }
}

impl PdService {
    async fn found(&self, req: Request) -> Result<GrpcResponse<pdpb::GetRegionResponse>, Status> {
        match self.placement(req).await? {
            Ok(Reply::Region(found)) => Ok(GrpcResponse::new(self.region_reply(found))),
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(GrpcResponse::new(pdpb::GetRegionResponse {
                header,
                ..Default::default()
            })),
        }
    }

    /// One `QueryRegion` message, answered as PD does (tikv/pd server/grpc_service.go
    /// `QueryRegion`; pkg/core/region.go `QueryRegions`): `key_id_map` and `prev_key_id_map`
    /// hold, in request order, the id of the region holding each key (of the region just before
    /// it, adjacent, for each previous key), or 0 when there is none; `regions_by_id` holds each
    /// region found once, and an entry for every requested id not found (PD's nil entry).
    /// Meridian keeps no buckets, so `need_buckets` is answered like PD with region buckets off.
    async fn query_one(
        &self,
        req: pdpb::QueryRegionRequest,
    ) -> Result<pdpb::QueryRegionResponse, Status> {
        // PD checks the cluster id of every message first; a mismatch ends the stream.
        self.check_cluster(req.header.as_ref())?;
        if !self.shared.membership.is_leader() {
            // A PD follower answers from the regions its region syncer copied, and with
            // REGION_NOT_FOUND in the header while the syncer is not running. A Meridian follower
            // keeps no regions: it is the latter, and the stream goes on (the client asks the
            // members for the leader and reconnects).
            return Ok(self.query_refused(
                self.error_header(pdpb::ErrorType::RegionNotFound, "region not found".into()),
            ));
        }
        let keys = &req.keys;
        // Every key from one snapshot; placement that does not serve reads says why through the
        // request path (PD's leader answers a cluster not bootstrapped with NOT_BOOTSTRAPPED).
        let by_key = match get_regions(&self.shared.placement, keys) {
            Some(found) => {
                for _ in keys {
                    self.metrics().request(RequestKind::Placement);
                }
                found
            }
            None => {
                match self.placement(Request::IsBootstrapped).await? {
                    Ok(Reply::Bootstrapped(true)) => {}
                    Ok(Reply::Bootstrapped(false)) => {
                        return Ok(self.query_refused(self.refusal(ErrorReply::NotBootstrapped)?))
                    }
                    Ok(other) => return Err(unexpected(other)),
                    Err(header) => return Ok(self.query_refused(header)),
                }
                let mut found = Vec::with_capacity(keys.len());
                for key in keys {
                    found.push(self.call(Request::GetRegion { key: key.clone() }).await);
                }
                found
            }
        };
        let mut out = pdpb::QueryRegionResponse {
            header: self.header(),
            key_id_map: Vec::with_capacity(keys.len()),
            prev_key_id_map: Vec::with_capacity(req.prev_keys.len()),
            ..Default::default()
        };
        for response in by_key {
            match self.region_of(response)? {
                Ok(found) => out
                    .key_id_map
                    .push(add_found(&mut out.regions_by_id, found.as_ref())),
                Err(header) => return Ok(self.query_refused(header)),
            }
        }
        for key in &req.prev_keys {
            let response = self.call(Request::GetPrevRegion { key: key.clone() }).await;
            match self.region_of(response)? {
                Ok(found) => out
                    .prev_key_id_map
                    .push(add_found(&mut out.regions_by_id, found.as_ref())),
                Err(header) => return Ok(self.query_refused(header)),
            }
        }
        for &id in &req.ids {
            // PD skips id 0 and ids already found through a key.
            if id == 0
                || out
                    .regions_by_id
                    .get(&id)
                    .is_some_and(|r| r.region.is_some())
            {
                continue;
            }
            let response = self.call(Request::GetRegionById { id }).await;
            match self.region_of(response)? {
                Ok(Some(region)) => {
                    add_found(&mut out.regions_by_id, Some(&region));
                }
                // PD puts a nil value under the id, which gogoproto sends as a map entry with
                // no value; prost cannot leave a message value out, so it is an empty
                // `RegionResponse`. Go decodes either as a response without a region, which
                // pd's router client turns into "not found".
                Ok(None) => {
                    out.regions_by_id.entry(id).or_default();
                }
                Err(header) => return Ok(self.query_refused(header)),
            }
        }
        Ok(out)
    }

    /// A `QueryRegion` answer that is only its header.
    fn query_refused(&self, header: Option<pdpb::ResponseHeader>) -> pdpb::QueryRegionResponse {
        pdpb::QueryRegionResponse {
            header,
            ..Default::default()
        }
    }

    /// A region lookup's `Response`: the region (or none), or a header-only refusal.
    fn region_of(
        &self,
        response: Response,
    ) -> Result<Result<Option<Region>, Option<pdpb::ResponseHeader>>, Status> {
        match self.answer(response)? {
            Ok(Reply::Region(found)) => Ok(Ok(found)),
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(Err(header)),
        }
    }

    /// One TSO request: `count` timestamps, answered with the last of them as PD does.
    async fn tso_one(&self, req: &pdpb::TsoRequest) -> Result<pdpb::TsoResponse, Status> {
        self.check(req.header.as_ref())?;
        if req.count == 0 || req.count > MAX_COUNT {
            return Err(Status::invalid_argument(format!(
                "tso count {} outside 1..={MAX_COUNT}",
                req.count
            )));
        }
        // PD never splits one batch across two physical milliseconds, and clients rebuild the
        // first timestamp as `last.logical - count + 1` within one: a range that carried into
        // the next millisecond is skipped (never handed out again, T1) and asked for anew.
        for _ in 0..4 {
            match execute(Op::Tso(req.count), &self.shared, self.metrics()).await {
                Response::Ok(Reply::Tso { first, count }) => {
                    let first = Timestamp::from_u64(first);
                    let last = Timestamp::from_u64(first.as_u64() + u64::from(count) - 1);
                    if first.physical_ms() != last.physical_ms() {
                        continue;
                    }
                    return Ok(pdpb::TsoResponse {
                        header: self.header(),
                        count,
                        timestamp: Some(pdpb::Timestamp {
                            physical: last.physical_ms() as i64,
                            logical: last.logical() as i64,
                            suffix_bits: 0,
                        }),
                    });
                }
                Response::Ok(other) => return Err(unexpected(other)),
                Response::Err(e) => {
                    return Err(match self.refusal(e) {
                        Err(status) => status,
                        Ok(_) => Status::unavailable("tso not available"),
                    })
                }
            }
        }
        Err(Status::unavailable(
            "tso batch kept crossing a millisecond; retry",
        ))
    }

    /// Reads heartbeats as they come, hands whatever has arrived to the shards as one batch,
    /// and pushes an operator back on the stream for each region that got one.
    async fn heartbeat_stream(
        self: Arc<Self>,
        mut inbound: Streaming<pdpb::RegionHeartbeatRequest>,
        tx: mpsc::Sender<Result<pdpb::RegionHeartbeatResponse, Status>>,
    ) {
        let mut shutdown = self.shared.shutdown.clone();
        loop {
            let next_batch = std::future::poll_fn(|cx| {
                let mut batch = Vec::new();
                loop {
                    match Pin::new(&mut inbound).poll_next(cx) {
                        Poll::Ready(Some(item)) => {
                            batch.push(item);
                            if batch.len() >= HEARTBEAT_BATCH {
                                return Poll::Ready((batch, false));
                            }
                        }
                        Poll::Ready(None) => return Poll::Ready((batch, true)),
                        Poll::Pending if batch.is_empty() => return Poll::Pending,
                        Poll::Pending => return Poll::Ready((batch, false)),
                    }
                }
            });
            let (batch, ended) = tokio::select! {
                next = next_batch => next,
                _ = shutdown.wait_for(|s| *s) => return,
            };
            let mut items: Vec<(Region, RegionStats)> = Vec::with_capacity(batch.len());
            for item in batch {
                let req = match item {
                    Ok(req) => req,
                    Err(status) => {
                        tracing::debug!("region heartbeat stream ended: {status}");
                        return;
                    }
                };
                if let Err(status) = self.check(req.header.as_ref()) {
                    let _ = tx.send(Err(status)).await;
                    return;
                }
                let Some(region_pb) = req.region.as_ref() else {
                    let _ = tx
                        .send(Err(Status::invalid_argument("heartbeat without a region")))
                        .await;
                    return;
                };
                match convert::region_from(region_pb, req.leader.as_ref()) {
                    Ok(region) => items.push((region, convert::region_stats_from(&req))),
                    Err(e) => {
                        let _ = tx.send(Err(bad(e))).await;
                        return;
                    }
                }
            }
            if !items.is_empty() && !self.beat(items, &tx).await {
                return;
            }
            if ended {
                return;
            }
        }
    }

    /// One batch through the shards; false when the stream is to end.
    async fn beat(
        &self,
        items: Vec<(Region, RegionStats)>,
        tx: &mpsc::Sender<Result<pdpb::RegionHeartbeatResponse, Status>>,
    ) -> bool {
        let state = &*self.shared.placement;
        let metrics = self.metrics();
        for _ in 0..items.len() {
            metrics.request(RequestKind::RegionHeartbeat);
        }
        // Leadership and bootstrap first, as for any placement request.
        if !state.is_ready()
            || !state
                .bootstrapped
                .load(std::sync::atomic::Ordering::Acquire)
        {
            let probe = self.call(Request::IsBootstrapped).await;
            let header = match probe {
                Response::Ok(Reply::Bootstrapped(true)) => None,
                Response::Ok(_) => self.refusal(ErrorReply::NotBootstrapped).ok().flatten(),
                Response::Err(e) => match self.refusal(e) {
                    Ok(h) => h,
                    Err(status) => {
                        let _ = tx.send(Err(status)).await;
                        return false;
                    }
                },
            };
            // PD answers once with the header and closes the stream; the store reconnects.
            if let Some(header) = header {
                let reply = pdpb::RegionHeartbeatResponse {
                    header: Some(header),
                    ..Default::default()
                };
                let _ = tx.send(Ok(reply)).await;
                return false;
            }
        }
        let regions: Vec<Region> = items.iter().map(|(r, _)| r.clone()).collect();
        let replies = heartbeats(state, usize::MAX, items).await;
        for (region, reply) in regions.iter().zip(replies) {
            match reply {
                Response::Ok(Reply::RegionHeartbeat { operator: Some(op) }) => {
                    let mut resp = convert::operator_to(region, &op);
                    resp.header = self.header();
                    if tx.send(Ok(resp)).await.is_err() {
                        return false;
                    }
                }
                Response::Ok(_) => {}
                // A stale or malformed report changes nothing (P1). PD answers it with an UNKNOWN
                // error header addressed to the reporting leader, and the stream goes on.
                Response::Err(e @ (ErrorReply::StaleEpoch(_) | ErrorReply::InvalidArgument(_))) => {
                    metrics.error(&e);
                    let m = e.to_string();
                    tracing::debug!(region = region.id, "region heartbeat refused: {m}");
                    let reply = pdpb::RegionHeartbeatResponse {
                        header: self.error_header(pdpb::ErrorType::Unknown, m),
                        region_id: region.id,
                        target_peer: convert::leader_to(region),
                        ..Default::default()
                    };
                    if tx.send(Ok(reply)).await.is_err() {
                        return false;
                    }
                }
                Response::Err(e) => {
                    metrics.error(&e);
                    if let Err(status) = self.refusal(e) {
                        let _ = tx.send(Err(status)).await;
                        return false;
                    }
                }
            }
        }
        true
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
