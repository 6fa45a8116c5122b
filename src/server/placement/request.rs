//! The placement requests, sorted by concern: [`PlacementOp`] names one group per handler file
//! (`cluster`, `cluster_config`, `stores`, `heartbeat`, `routing`, `buckets`, `splits`, `gc`,
//! `resolved_ts`, `external_ts`, `global_config`), and
//! [`handle`] is the one match that sends each to its file, after the checks every placement
//! request shares (this node serves placement; the cluster is bootstrapped where the request
//! needs it). Owns no decision about a request's content: each handler checks its own sizes
//! and arguments.

use std::sync::atomic::Ordering;

use super::buckets::{self, BucketsOp};
use super::cluster::{self, ClusterOp};
use super::cluster_config::{self, ClusterConfigOp};
use super::external_ts::{self, ExternalTsOp};
use super::gc::{self, GcOp};
use super::global_config::{self, GlobalConfigOp};
use super::heartbeat;
use super::resolved_ts::{self, ResolvedTsOp};
use super::routing::{self, RouteOp};
use super::splits::{self, SplitOp};
use super::stores::{self, StoreOp};
use crate::placement::{LimitError, Limits, Region, RegionStats};
use crate::proto::{ErrorReply, Response};
use crate::server::Shared;

/// A placement request, by the file that serves it.
#[derive(Debug)]
pub enum PlacementOp {
    /// Bootstrap, IsBootstrapped, AllocId: served before the cluster is bootstrapped.
    Cluster(ClusterOp),
    ClusterConfig(ClusterConfigOp),
    Stores(StoreOp),
    /// A region heartbeat: to the region's shard.
    Heartbeat(Box<Region>, RegionStats),
    Routing(RouteOp),
    Buckets(BucketsOp),
    Splits(SplitOp),
    Gc(GcOp),
    ResolvedTs(ResolvedTsOp),
    /// Answered before bootstrap too, as PD answers it (0, or a refusal in its words).
    ExternalTs(ExternalTsOp),
    /// Answered before bootstrap too, as PD answers it.
    GlobalConfig(GlobalConfigOp),
}

impl PlacementOp {
    /// Whether the request is refused with `NotBootstrapped` before the cluster is.
    fn needs_bootstrap(&self) -> bool {
        match self {
            PlacementOp::Cluster(_) | PlacementOp::ExternalTs(_) | PlacementOp::GlobalConfig(_) => {
                false
            }
            PlacementOp::ClusterConfig(_)
            | PlacementOp::Stores(_)
            | PlacementOp::Heartbeat(..)
            | PlacementOp::Routing(_)
            | PlacementOp::Buckets(_)
            | PlacementOp::Splits(_)
            | PlacementOp::Gc(_)
            | PlacementOp::ResolvedTs(_) => true,
        }
    }

    /// The sizes the request carries against `[limits]`, checked before anything else so a
    /// request over a limit changes nothing; each handler file knows its own.
    fn check_limits(&self, limits: &Limits) -> Result<(), LimitError> {
        match self {
            PlacementOp::Cluster(op) => cluster::check_limits(op, limits),
            PlacementOp::Stores(op) => stores::check_limits(op, limits),
            PlacementOp::Heartbeat(region, _) => limits.check_region(region),
            PlacementOp::Routing(op) => routing::check_limits(op, limits),
            PlacementOp::Splits(op) => splits::check_limits(op, limits),
            // What these carry is bounded where they are served (buckets, global config
            // items) or is fixed-size.
            PlacementOp::ClusterConfig(_)
            | PlacementOp::Buckets(_)
            | PlacementOp::Gc(_)
            | PlacementOp::ResolvedTs(_)
            | PlacementOp::ExternalTs(_)
            | PlacementOp::GlobalConfig(_) => Ok(()),
        }
    }
}

/// Serves a routing read the caller lets a follower answer: the leader serves it as any other;
/// a follower in sync (`sync_status`) answers from its copy of the index, which may be older
/// than the leader's, never other than a state the leader held; any other member refuses as
/// a follower does.
pub async fn follower_read(op: RouteOp, shared: &Shared) -> Response {
    let state = &*shared.placement;
    if state.is_ready() || !state.sync.serves_reads(state.clock.now_ms()) {
        return handle(PlacementOp::Routing(op), shared).await;
    }
    if let Err(e) = routing::check_limits(&op, &state.limits) {
        return Response::Err(ErrorReply::LimitExceeded(e.to_string()));
    }
    routing::serve(state, op).await
}

/// Serves one placement request.
pub async fn handle(op: PlacementOp, shared: &Shared) -> Response {
    let state = &*shared.placement;
    if !state.is_ready() {
        return Response::Err(shared.membership.not_serving());
    }
    if let Err(e) = op.check_limits(&state.limits) {
        return Response::Err(ErrorReply::LimitExceeded(e.to_string()));
    }
    if op.needs_bootstrap() && !state.bootstrapped.load(Ordering::Acquire) {
        return Response::Err(ErrorReply::NotBootstrapped);
    }
    match op {
        PlacementOp::Cluster(op) => cluster::serve(state, op).await,
        PlacementOp::ClusterConfig(op) => cluster_config::serve(state, op).await,
        PlacementOp::Stores(op) => stores::serve(state, op).await,
        PlacementOp::Heartbeat(region, stats) => heartbeat::one(state, region, stats).await,
        PlacementOp::Routing(op) => routing::serve(state, op).await,
        PlacementOp::Buckets(op) => buckets::serve(state, op),
        PlacementOp::Splits(op) => splits::serve(state, op).await,
        PlacementOp::Gc(op) => gc::serve(state, op).await,
        PlacementOp::ResolvedTs(op) => resolved_ts::serve(state, op),
        PlacementOp::ExternalTs(op) => external_ts::serve(state, op).await,
        PlacementOp::GlobalConfig(op) => global_config::serve(state, op).await,
    }
}
