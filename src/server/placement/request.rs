//! The placement requests, sorted by concern: [`PlacementOp`] names one group per handler file
//! (`cluster`, `stores`, `heartbeat`, `routing`, `splits`, `gc`), and [`handle`] is the one
//! match that sends each to its file, after the checks every placement request shares (this
//! node serves placement; the cluster is bootstrapped where the request needs it). Owns no
//! decision about a request's content: each handler checks its own sizes and arguments.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::oneshot;

use super::cluster::{self, ClusterOp};
use super::gc::{self, GcOp};
use super::heartbeat;
use super::messages::PersistOp;
use super::routing::{self, RouteOp};
use super::splits::{self, SplitOp};
use super::state::PlacementState;
use super::stores::{self, StoreOp};
use crate::placement::{LimitError, Region, RegionStats};
use crate::proto::{ErrorReply, Response};
use crate::server::Shared;

/// How long a request waits for an id block or a durable write before `Unavailable`.
pub(super) const WAIT: Duration = Duration::from_secs(3);

/// A placement request, by the file that serves it.
#[derive(Debug)]
pub enum PlacementOp {
    /// Bootstrap, IsBootstrapped, AllocId: served before the cluster is bootstrapped.
    Cluster(ClusterOp),
    Stores(StoreOp),
    /// A region heartbeat: to the region's shard.
    Heartbeat(Box<Region>, RegionStats),
    Routing(RouteOp),
    Splits(SplitOp),
    Gc(GcOp),
}

impl PlacementOp {
    /// Whether the request is refused with `NotBootstrapped` before the cluster is.
    fn needs_bootstrap(&self) -> bool {
        match self {
            PlacementOp::Cluster(_) => false,
            PlacementOp::Stores(_)
            | PlacementOp::Heartbeat(..)
            | PlacementOp::Routing(_)
            | PlacementOp::Splits(_)
            | PlacementOp::Gc(_) => true,
        }
    }
}

/// Serves one placement request.
pub async fn handle(op: PlacementOp, shared: &Shared) -> Response {
    let state = &*shared.placement;
    if !state.is_ready() {
        return Response::Err(shared.membership.not_serving());
    }
    if op.needs_bootstrap() && !state.bootstrapped.load(Ordering::Acquire) {
        return Response::Err(ErrorReply::NotBootstrapped);
    }
    match op {
        PlacementOp::Cluster(op) => cluster::serve(state, op).await,
        PlacementOp::Stores(op) => stores::serve(state, op).await,
        PlacementOp::Heartbeat(region, stats) => heartbeat::one(state, *region, stats).await,
        PlacementOp::Routing(op) => routing::serve(state, op).await,
        PlacementOp::Splits(op) => splits::serve(state, op).await,
        PlacementOp::Gc(op) => gc::serve(state, op).await,
    }
}

/// Whether placement answers requests that need a bootstrapped cluster right now: the batched
/// paths go around [`handle`] only then, and otherwise let it say why not.
pub fn serves_bootstrapped(state: &PlacementState) -> bool {
    state.is_ready() && state.bootstrapped.load(Ordering::Acquire)
}

pub(super) fn invalid(why: impl Into<String>) -> Response {
    Response::Err(ErrorReply::InvalidArgument(why.into()))
}

pub(super) fn unavailable(why: impl Into<String>) -> Response {
    Response::Err(ErrorReply::Unavailable(why.into()))
}

pub(super) fn over_limit(e: LimitError) -> Response {
    Response::Err(ErrorReply::LimitExceeded(e.to_string()))
}

/// Waits for the persister to make `ops` durable: room in its queue and the write itself,
/// within [`WAIT`] together.
pub(super) async fn persist_now(
    state: &PlacementState,
    ops: Vec<crate::meta::WriteOp>,
) -> Result<(), Response> {
    let (reply, rx) = oneshot::channel();
    let written = tokio::time::timeout(WAIT, async {
        if state
            .persist
            .send(PersistOp::Sync { ops, reply })
            .await
            .is_err()
        {
            return None;
        }
        rx.await.ok()
    })
    .await;
    match written {
        Ok(Some(Ok(()))) => Ok(()),
        Ok(Some(Err(e))) => Err(unavailable(format!("persisting failed: {e}"))),
        Ok(None) => Err(unavailable("shutting down")),
        Err(_) => Err(unavailable("persisting timed out; retry")),
    }
}
