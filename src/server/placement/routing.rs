//! Routing reads: GetRegion (alone, or a batch's keys from one snapshot), GetPrevRegion,
//! GetRegionById (the owning shard first, it has the freshest copy) and ScanRegions (one page).

use tokio::sync::oneshot;

use super::answer::{invalid, unavailable};
use super::messages::ShardMsg;
use super::state::PlacementState;
use crate::placement::{page_len, LimitError, Limits, Region};
use crate::proto::{ErrorReply, Reply, Response, MAX_SCAN_REGIONS};
use crate::server::Shared;

#[derive(Debug)]
pub enum RouteOp {
    /// The region holding a key.
    Region(Vec<u8>),
    /// The region just before the one holding a key.
    PrevRegion(Vec<u8>),
    ById(u64),
    Scan {
        start: Vec<u8>,
        end: Vec<u8>,
        limit: u32,
    },
}

/// The keys the request carries against `[limits]`.
pub fn check_limits(op: &RouteOp, limits: &Limits) -> Result<(), LimitError> {
    match op {
        RouteOp::Region(key) | RouteOp::PrevRegion(key) => limits.check_key("key", key),
        RouteOp::Scan { start, end, .. } => {
            limits.check_key("scan start", start)?;
            limits.check_key("scan end", end)
        }
        RouteOp::ById(_) => Ok(()),
    }
}

pub async fn serve(state: &PlacementState, op: RouteOp) -> Response {
    match op {
        RouteOp::Region(key) => found(state.index.snapshot().locate(&key).map(|r| r.region())),
        RouteOp::PrevRegion(key) => found(state.index.snapshot().prev(&key).map(|r| r.region())),
        RouteOp::ById(id) => by_id(state, id).await,
        RouteOp::Scan { start, end, limit } => scan(state, start, end, limit),
    }
}

fn found(region: Option<Region>) -> Response {
    Response::Ok(Reply::Region(region))
}

/// The region holding each key, in order, from one snapshot; the searches for all keys
/// advance together so their cache misses overlap (`Snapshot::locate_many`). Refused whole,
/// saying why, when placement does not serve reads here now or a key is over the limit.
pub fn locate_many(shared: &Shared, keys: &[Vec<u8>]) -> Result<Vec<Option<Region>>, ErrorReply> {
    let state = &*shared.placement;
    if !state.is_ready() {
        return Err(shared.membership.not_serving());
    }
    if !state.serves_bootstrapped() {
        return Err(ErrorReply::NotBootstrapped);
    }
    from_snapshot(state, keys)
}

/// [`locate_many`] from a follower's copy of the index while it serves reads
/// (`sync_status`); on the leader, `locate_many` itself.
pub fn locate_many_from_copy(
    shared: &Shared,
    keys: &[Vec<u8>],
) -> Result<Vec<Option<Region>>, ErrorReply> {
    let state = &*shared.placement;
    if state.is_ready() {
        return locate_many(shared, keys);
    }
    if !state.sync.serves_reads(state.clock.now_ms()) {
        return Err(shared.membership.not_serving());
    }
    from_snapshot(state, keys)
}

fn from_snapshot(
    state: &PlacementState,
    keys: &[Vec<u8>],
) -> Result<Vec<Option<Region>>, ErrorReply> {
    if let Some(e) = keys
        .iter()
        .find_map(|k| state.limits.check_key("key", k).err())
    {
        return Err(ErrorReply::LimitExceeded(e.to_string()));
    }
    let snapshot = state.index.snapshot();
    let mut found = Vec::with_capacity(keys.len());
    snapshot.locate_many(keys, &mut found);
    Ok(found.into_iter().map(|r| r.map(|r| r.region())).collect())
}

async fn by_id(state: &PlacementState, id: u64) -> Response {
    let (reply, rx) = oneshot::channel();
    if state
        .shard_of(id)
        .send(ShardMsg::GetById { id, reply })
        .await
        .is_err()
    {
        return unavailable("shutting down");
    }
    match rx.await {
        // A region that never heartbeated since this leader loaded is in the index only.
        Ok(None) => found(state.index.get(id).map(|r| r.region())),
        Ok(Some(region)) => found(Some(region)),
        Err(_) => unavailable("shutting down"),
    }
}

fn scan(state: &PlacementState, start: Vec<u8>, end: Vec<u8>, limit: u32) -> Response {
    if !end.is_empty() && end <= start {
        return invalid("scan end is not after its start");
    }
    let limit = if limit == 0 {
        MAX_SCAN_REGIONS
    } else {
        limit.min(MAX_SCAN_REGIONS)
    };
    let regions = state.index.snapshot().scan(&start, &end, limit as usize);
    // A page cut short by size ends before `limit`; the caller goes on from its last end
    // key, as it does after a full page.
    let n = page_len(regions.iter().map(|r| r.wire_size()));
    Response::Ok(Reply::Regions(
        regions[..n].iter().map(|r| r.region()).collect(),
    ))
}
