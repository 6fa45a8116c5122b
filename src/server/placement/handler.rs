//! Placement requests: checks what only the shell can (leader and loaded, bootstrapped, ids
//! ever allocated), then asks the pure cores, persists through the persister, and replies.
//! Region heartbeats and reads by id go to the owning shard's queue.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::oneshot;

use super::messages::{Beats, PersistOp, ShardMsg};
use super::persist::{encode_regions, encode_store, BUCKET_IDS};
use super::shard_task::{forget_elsewhere, heartbeat_local, region_error};
use super::state::PlacementState;
use crate::gc::{encode_service, GcUpdate, ServiceChange};
use crate::placement::{
    page_len, store_wire_size, LimitError, Limits, Region, RegionStats, Store, StoreMap, StoreState,
};
use crate::proto::{
    ErrorReply, Reply, Request, Response, SplitIds, MAX_BATCH_SPLIT, MAX_SCAN_REGIONS,
};
use crate::server::Shared;

/// How long a request waits for an id block or a durable write before `Unavailable`.
const WAIT: Duration = Duration::from_secs(3);

fn invalid(why: impl Into<String>) -> Response {
    Response::Err(ErrorReply::InvalidArgument(why.into()))
}

fn over_limit(e: LimitError) -> Response {
    Response::Err(ErrorReply::LimitExceeded(e.to_string()))
}

/// The sizes a request carries against `[limits]`; checked before anything else, so a
/// request over a limit changes nothing. The store count is checked where a store registers.
fn check_limits(limits: &Limits, req: &Request) -> Result<(), LimitError> {
    match req {
        Request::Bootstrap { store, region } => {
            limits.check_store(store)?;
            limits.check_region(region)
        }
        Request::PutStore { store } => limits.check_store(store),
        Request::RegionHeartbeat { region, .. } | Request::AskBatchSplit { region, .. } => {
            limits.check_region(region)
        }
        Request::ReportBatchSplit { regions } => {
            regions.iter().try_for_each(|r| limits.check_region(r))
        }
        Request::GetRegion { key } | Request::GetPrevRegion { key } => limits.check_key("key", key),
        Request::ScanRegions { start, end, .. } => {
            limits.check_key("scan start", start)?;
            limits.check_key("scan end", end)
        }
        Request::Ping
        | Request::Tso { .. }
        | Request::GetMembers
        | Request::IsBootstrapped
        | Request::AllocId
        | Request::GetStore { .. }
        | Request::GetAllStores { .. }
        | Request::StoreHeartbeat { .. }
        | Request::GetRegionById { .. }
        | Request::GetGcSafePoint
        | Request::UpdateGcSafePoint { .. }
        | Request::UpdateServiceGcSafePoint { .. } => Ok(()),
    }
}

fn unavailable(why: impl Into<String>) -> Response {
    Response::Err(ErrorReply::Unavailable(why.into()))
}

/// GetRegion for the keys of one read, answered in order: one snapshot, and the searches
/// for all keys advance together so their cache misses overlap (`Snapshot::locate_many`).
/// `None` when placement does not serve reads yet or a key is over the limit (the caller
/// answers each request alone, which says why).
pub fn get_regions(state: &PlacementState, keys: &[Vec<u8>]) -> Option<Vec<Response>> {
    if !state.is_ready() || !state.bootstrapped.load(Ordering::Acquire) {
        return None;
    }
    if keys
        .iter()
        .any(|k| state.limits.check_key("key", k).is_err())
    {
        // Rare: answered one by one through the request path, which refuses the long ones.
        return None;
    }
    let snapshot = state.index.snapshot();
    let mut found = Vec::with_capacity(keys.len());
    snapshot.locate_many(keys, &mut found);
    Some(
        found
            .into_iter()
            .map(|r| Response::Ok(Reply::Region(r.map(|r| r.region()))))
            .collect(),
    )
}

/// Where a heartbeat's reply is, besides a remote shard's index.
const LOCAL: usize = usize::MAX;
const REFUSED: usize = usize::MAX - 1;

/// Region heartbeats from one read, answered in order: those for this core's shard inline,
/// the rest forwarded as one batch per owning core (waiting for room when a queue is full),
/// handled there while this core does its own.
pub async fn heartbeats(
    state: &PlacementState,
    core: usize,
    items: Vec<(Region, RegionStats)>,
) -> Vec<Response> {
    let n = state.shards.len();
    let mut slots = Vec::with_capacity(items.len());
    let mut local = Vec::new();
    let mut remote: Vec<Vec<(Region, RegionStats)>> = vec![Vec::new(); n];
    let mut refused = Vec::new();
    for (region, stats) in items {
        let shard = (region.id % n as u64) as usize;
        if let Err(e) = state.limits.check_region(&region) {
            slots.push((REFUSED, refused.len()));
            refused.push(over_limit(e));
        } else if shard == core {
            slots.push((LOCAL, local.len()));
            local.push((region, stats));
        } else {
            slots.push((shard, remote[shard].len()));
            remote[shard].push((region, stats));
        }
    }
    let mut waiting: Vec<Option<oneshot::Receiver<Beats>>> = Vec::with_capacity(n);
    for (shard, items) in remote.into_iter().enumerate() {
        if items.is_empty() {
            waiting.push(None);
            continue;
        }
        let (reply, rx) = oneshot::channel();
        let sent = state.shards[shard]
            .send(ShardMsg::Heartbeats { items, reply })
            .await;
        waiting.push(sent.ok().map(|_| rx));
    }
    let mut local_beats = Beats {
        replies: Vec::with_capacity(local.len()),
        durable_at: 0,
    };
    heartbeat_local(state, core, local, &mut local_beats);
    let mut durable_at = local_beats.durable_at;
    let mut done_local = local_beats.replies;
    let mut done_remote: Vec<Vec<Response>> = Vec::with_capacity(n);
    for rx in waiting {
        let beats = match rx {
            Some(rx) => rx.await.unwrap_or_default(),
            None => Beats::default(),
        };
        durable_at = durable_at.max(beats.durable_at);
        done_remote.push(beats.replies);
    }
    // A heartbeat that changed what is persisted (an epoch, a displaced region) is answered
    // once the change is durable. If it is not in time, the read's replies say so: stores
    // heartbeat again, and the change, still in the map, is persisted meanwhile.
    let durable = durable_at == 0 || state.dirty.wait(durable_at, WAIT).await;
    slots
        .into_iter()
        .map(|(shard, pos)| {
            let done = if shard == LOCAL {
                done_local.get_mut(pos)
            } else if shard == REFUSED {
                refused.get_mut(pos)
            } else {
                done_remote.get_mut(shard).and_then(|d| d.get_mut(pos))
            };
            match done.map(|r| std::mem::replace(r, Response::Ok(Reply::Done))) {
                Some(Response::Ok(_)) if !durable => {
                    unavailable("a change is not yet durable; heartbeat again")
                }
                Some(r) => r,
                None => unavailable("shutting down"),
            }
        })
        .collect()
}

pub async fn handle(req: Request, shared: &Shared) -> Response {
    let state = &*shared.placement;
    if !state.is_ready() {
        return Response::Err(shared.membership.not_serving());
    }
    if let Err(e) = check_limits(&state.limits, &req) {
        return over_limit(e);
    }
    let bootstrapped = state.bootstrapped.load(Ordering::Acquire);
    match req {
        Request::IsBootstrapped => return Response::Ok(Reply::Bootstrapped(bootstrapped)),
        Request::AllocId => {
            return match state.ids.alloc(WAIT).await {
                Some(id) => Response::Ok(Reply::Id(id)),
                None => unavailable("no id block persisted in time; retry"),
            }
        }
        Request::Bootstrap { store, region } => return bootstrap(state, store, region).await,
        _ if !bootstrapped => return Response::Err(ErrorReply::NotBootstrapped),
        _ => {}
    }
    match req {
        Request::PutStore { store } => put_store(state, store).await,
        Request::GetStore { id } => Response::Ok(Reply::Store(state.stores().get(id).cloned())),
        Request::GetAllStores { after_id } => {
            let map = state.stores();
            let after: Vec<_> = map.iter().filter(|s| s.store.id > after_id).collect();
            let n = page_len(after.iter().map(|s| store_wire_size(s)));
            Response::Ok(Reply::Stores {
                stores: after[..n].iter().map(|s| (*s).clone()).collect(),
                more: n < after.len(),
            })
        }
        Request::StoreHeartbeat { store_id, stats } => {
            let now = state.clock.now_ms();
            let mut map = state.stores();
            match map.heartbeat(store_id, stats, now) {
                Ok(revived) => {
                    state.publish_stores(&map);
                    if revived {
                        state.dirty.store(store_id);
                    }
                    Response::Ok(Reply::Done)
                }
                Err(e) => invalid(e.to_string()),
            }
        }
        Request::RegionHeartbeat { region, stats } => {
            // Streams hand heartbeats to `heartbeats` directly; one reaching here goes to
            // its shard's queue like any forwarded one.
            let (reply, rx) = oneshot::channel();
            let shard = state.shard_of(region.id);
            let items = vec![(region, stats)];
            if shard
                .send(ShardMsg::Heartbeats { items, reply })
                .await
                .is_err()
            {
                return unavailable("shutting down");
            }
            match rx.await {
                Ok(mut beats) => match beats.replies.pop() {
                    Some(Response::Ok(_))
                        if beats.durable_at > 0
                            && !state.dirty.wait(beats.durable_at, WAIT).await =>
                    {
                        unavailable("a change is not yet durable; heartbeat again")
                    }
                    Some(r) => r,
                    None => unavailable("shutting down"),
                },
                Err(_) => unavailable("shutting down"),
            }
        }
        Request::GetRegion { key } => Response::Ok(Reply::Region(
            state.index.snapshot().locate(&key).map(|r| r.region()),
        )),
        Request::GetPrevRegion { key } => Response::Ok(Reply::Region(
            state.index.snapshot().prev(&key).map(|r| r.region()),
        )),
        Request::GetRegionById { id } => {
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
                Ok(None) => Response::Ok(Reply::Region(state.index.get(id).map(|r| r.region()))),
                Ok(found) => Response::Ok(Reply::Region(found)),
                Err(_) => unavailable("shutting down"),
            }
        }
        Request::ScanRegions { start, end, limit } => {
            if !end.is_empty() && end <= start {
                return invalid("scan end is not after its start");
            }
            let limit = if limit == 0 {
                MAX_SCAN_REGIONS
            } else {
                limit.min(MAX_SCAN_REGIONS)
            };
            let regions = state.index.snapshot().scan(&start, &end, limit as usize);
            // A page cut short by size ends before `limit`; the caller goes on from its
            // last end key, as it does after a full page.
            let n = page_len(regions.iter().map(|r| r.wire_size()));
            Response::Ok(Reply::Regions(
                regions[..n].iter().map(|r| r.region()).collect(),
            ))
        }
        Request::AskBatchSplit { region, count } => ask_batch_split(state, region, count).await,
        Request::ReportBatchSplit { regions } => report_batch_split(state, regions).await,
        Request::GetGcSafePoint => Response::Ok(Reply::GcSafePoint(state.gc.lock().await.gc())),
        Request::UpdateGcSafePoint { safe_point } => update_gc_safe_point(state, safe_point).await,
        Request::UpdateServiceGcSafePoint {
            service_id,
            ttl_secs,
            safe_point,
        } => update_service_safe_point(state, &service_id, ttl_secs, safe_point).await,
        Request::Ping
        | Request::Tso { .. }
        | Request::GetMembers
        | Request::IsBootstrapped
        | Request::AllocId
        | Request::Bootstrap { .. } => invalid("not a placement request"),
    }
}

/// Waits for the persister to make `ops` durable.
async fn persist_now(
    state: &PlacementState,
    ops: Vec<crate::meta::WriteOp>,
) -> Result<(), Response> {
    let (reply, rx) = oneshot::channel();
    state
        .persist
        .send(PersistOp::Sync { ops, reply })
        .map_err(|_| unavailable("shutting down"))?;
    match tokio::time::timeout(WAIT, rx).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(unavailable(format!("persisting failed: {e}"))),
        _ => Err(unavailable("persisting timed out; retry")),
    }
}

async fn bootstrap(state: &PlacementState, store: Store, region: Region) -> Response {
    let _one_at_a_time = state.bootstrap_lock.lock().await;
    if state.bootstrapped.load(Ordering::Acquire) {
        return invalid("the cluster is already bootstrapped");
    }
    if !region.start_key.is_empty() || !region.end_key.is_empty() {
        return invalid("the first region must cover every key");
    }
    if let Err(e) = region.validate() {
        return invalid(e.to_string());
    }
    if region.peers.iter().any(|p| p.store_id != store.id) {
        return invalid("the first region's peers must be on the first store");
    }
    if let Some(id) = [store.id, region.id]
        .into_iter()
        .chain(region.peers.iter().map(|p| p.id))
        .find(|id| !state.ids.may_exist(*id))
    {
        return invalid(format!("id {id} was never allocated"));
    }
    let now = state.clock.now_ms();
    let mut staged = state.stores().clone();
    let status = match staged.put(store, now) {
        Ok(s) => s.store.clone(),
        Err(e) => return invalid(e.to_string()),
    };
    let keys = &state.keys;
    let ops = match (
        encode_store(&status),
        encode_regions(std::slice::from_ref(&region)),
    ) {
        (Ok(s), Ok(r)) => vec![
            (keys.store(status.id), Some(s)),
            (keys.region_bucket(region.id / BUCKET_IDS), Some(r)),
            (keys.bootstrapped(), Some(b"1".to_vec())),
        ],
        _ => return Response::Err(ErrorReply::Internal("encoding the bootstrap".into())),
    };
    if let Err(r) = persist_now(state, ops).await {
        return r;
    }
    {
        let mut map = state.stores();
        *map = staged;
        state.publish_stores(&map);
    }
    if let Err(e) = state.index.apply(region) {
        return Response::Err(region_error(e));
    }
    state.bootstrapped.store(true, Ordering::Release);
    Response::Ok(Reply::Done)
}

async fn put_store(state: &PlacementState, store: Store) -> Response {
    if !state.ids.may_exist(store.id) {
        return invalid(format!("store id {} was never allocated", store.id));
    }
    let now = state.clock.now_ms();
    let mut staged = state.stores().clone();
    if let Err(e) = admit_store(&state.limits, &staged, store.id) {
        return over_limit(e);
    }
    let status = match staged.put(store, now) {
        Ok(s) => s.store.clone(),
        Err(e) => return invalid(e.to_string()),
    };
    let value = match encode_store(&status) {
        Ok(v) => v,
        Err(e) => return Response::Err(ErrorReply::Internal(e.to_string())),
    };
    if let Err(r) = persist_now(state, vec![(state.keys.store(status.id), Some(value))]).await {
        return r;
    }
    let mut map = state.stores();
    // Another registration may have landed meanwhile; apply this one to the live map. The
    // store count is not checked again: this one is durable now, and registrations racing
    // at the limit can pass it only by the few that were in flight together.
    match map.put(status, now) {
        Ok(_) => {
            state.publish_stores(&map);
            Response::Ok(Reply::Done)
        }
        Err(e) => invalid(e.to_string()),
    }
}

fn admit_store(limits: &Limits, stores: &StoreMap, id: u64) -> Result<(), LimitError> {
    let live = stores
        .iter()
        .filter(|s| s.store.state != StoreState::Tombstone)
        .count();
    limits.admit_store(id, stores.get(id).is_some(), live)
}

async fn ask_batch_split(state: &PlacementState, region: Region, count: u32) -> Response {
    if count == 0 || count > MAX_BATCH_SPLIT {
        return invalid(format!("split count {count} outside 1..={MAX_BATCH_SPLIT}"));
    }
    let Some(known) = state.index.get(region.id) else {
        return invalid(format!("region {} is not known", region.id));
    };
    if region.epoch.is_stale_against(&known.epoch()) {
        return Response::Err(ErrorReply::StaleEpoch(format!(
            "region {}: epoch {:?} is older than {:?}",
            region.id,
            region.epoch,
            known.epoch()
        )));
    }
    let mut splits = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let mut ids = Vec::with_capacity(1 + known.peers().len());
        for _ in 0..=known.peers().len() {
            match state.ids.alloc(WAIT).await {
                Some(id) => ids.push(id),
                None => return unavailable("no id block persisted in time; retry"),
            }
        }
        splits.push(SplitIds {
            region_id: ids[0],
            peer_ids: ids[1..].to_vec(),
        });
    }
    Response::Ok(Reply::Splits(splits))
}

async fn update_gc_safe_point(state: &PlacementState, proposed: u64) -> Response {
    let mut gc = state.gc.lock().await;
    let decision = gc.update_gc(proposed);
    if let GcUpdate::Advanced(value) = decision {
        let op = (
            state.keys.gc_safe_point(),
            Some(value.to_string().into_bytes()),
        );
        if let Err(r) = persist_now(state, vec![op]).await {
            return r;
        }
    }
    gc.apply_gc(decision);
    Response::Ok(Reply::GcSafePoint(gc.gc()))
}

async fn update_service_safe_point(
    state: &PlacementState,
    service_id: &str,
    ttl_secs: i64,
    safe_point: u64,
) -> Response {
    let now = (state.clock.now_ms() / 1000) as i64;
    let mut gc = state.gc.lock().await;
    let update = match gc.update_service(service_id, ttl_secs, safe_point, now) {
        Ok(u) => u,
        Err(why) => return invalid(why.to_string()),
    };
    let ops = update
        .changes
        .iter()
        .map(|c| match c {
            ServiceChange::Put(s) => (
                state.keys.service_safe_point(&s.service_id),
                Some(encode_service(s)),
            ),
            ServiceChange::Remove(id) => (state.keys.service_safe_point(id), None),
        })
        .collect::<Vec<_>>();
    if !ops.is_empty() {
        if let Err(r) = persist_now(state, ops).await {
            return r;
        }
    }
    gc.apply_service(&update);
    Response::Ok(Reply::ServiceSafePoint {
        ttl_secs: update.min.expired_at.saturating_sub(now),
        service_id: update.min.service_id,
        safe_point: update.min.safe_point,
    })
}

async fn report_batch_split(state: &PlacementState, regions: Vec<Region>) -> Response {
    if regions.is_empty() || regions.len() > MAX_BATCH_SPLIT as usize + 1 {
        return invalid(format!("{} regions in one split report", regions.len()));
    }
    // Every report checked before any is applied: a malformed batch changes nothing.
    let view = state.view.load();
    for r in &regions {
        if let Err(e) = r.validate() {
            return invalid(e.to_string());
        }
        if let Some(id) = std::iter::once(r.id)
            .chain(r.peers.iter().map(|p| p.id))
            .find(|id| !state.ids.may_exist(*id))
        {
            return invalid(format!("region {}: id {id} was never allocated", r.id));
        }
        if let Some(p) = r.peers.iter().find(|p| view.get(p.store_id).is_none()) {
            return invalid(format!(
                "region {}: store {} is not known",
                r.id, p.store_id
            ));
        }
    }
    let mut first_error = None;
    let mut removed = Vec::new();
    let mut durable_at = 0;
    for result in state.index.apply_batch(regions) {
        match result {
            Ok(change) => {
                if change.epoch_changed {
                    durable_at = durable_at.max(state.dirty.region(change.route.id()));
                }
                for id in &change.removed {
                    durable_at = durable_at.max(state.dirty.region(*id));
                }
                removed.extend(change.removed);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if !removed.is_empty() {
        forget_elsewhere(state, usize::MAX, removed);
    }
    // Acknowledged only once durable: a store that hears Done may forget its report.
    if durable_at > 0 && !state.dirty.wait(durable_at, WAIT).await {
        return unavailable("the split is applied but not yet durable; report it again");
    }
    match first_error {
        None => Response::Ok(Reply::Done),
        Some(e) => Response::Err(region_error(e)),
    }
}
