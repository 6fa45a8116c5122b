//! Persistence of placement, one leader term at a time: load everything before serving, then
//! write what changed in batches through the term's guarded store (region routes on an epoch
//! change, stores on a change, id blocks before use), and mark silent stores Down.
//!
//! Changes are queued as ids, not values: a flush writes what the index and store map hold at
//! that moment (or deletes what they no longer hold), so writes from different cores can never
//! land in the wrong order.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rkyv::util::AlignedVec;
use tokio::sync::watch;

use super::cluster_config::decode_cluster_meta;
use super::messages::{PersistOp, ShardMsg};
use super::state::PlacementState;
pub use super::store_record::{decode_store, encode_store};
use crate::failpoint::{self, points};
use crate::meta::{load_decimal, Keys, MetaError, MetaStore, WriteOp};
use crate::placement::{Region, StoreStats, StoreStatus, Version};

/// Longest pause between attempts to load placement after a failure.
const LOAD_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Serves placement for one term: loads, then persists until `stop`, and leaves the node not
/// serving placement (and holding nothing) when it returns. With `controller_key` (on etcd),
/// the load also writes PD's resource controller config there unless a loadable one is kept.
///
/// Only a lost leadership (`NotLeader`: the term's guard no longer holds) ends it early.
/// Any other failure leaves placement down or behind while the TSO keeps serving: a load that
/// fails is tried again with backoff (placement answers `Unavailable` meanwhile); a write that
/// fails stays marked and is written by a later flush, and what waits for it waits longer.
pub async fn serve_term<M: MetaStore + Clone>(
    state: Arc<PlacementState>,
    store: M,
    keys: Keys,
    controller_key: Option<Vec<u8>>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), MetaError> {
    let mut rx = state.persist_rx.lock().await;
    // Anything queued or marked belongs to an earlier term, whose state this term reloads.
    while rx.try_recv().is_ok() {}
    state.dirty.clear();
    let result = async {
        // A follower's syncer writes the index until it sees this member lead; the load waits
        // for the write it may be in and then replaces everything.
        let _syncer_out = state.sync.gate.lock().await;
        state.sync.lost();
        let mut backoff = Duration::from_millis(100);
        let from_copy = loop {
            match load(&state, &store, &keys, controller_key.as_deref()).await {
                Ok(from_copy) => break from_copy,
                Err(MetaError::NotLeader) => return Err(MetaError::NotLeader),
                Err(e) => {
                    tracing::error!(
                        "placement is not served: loading it failed ({e}); retrying in \
                         {backoff:?}, the TSO serves meanwhile"
                    );
                    clear(&state).await;
                    // Stop first: a term that ends as the backoff does loads nothing more.
                    tokio::select! {
                        biased;
                        _ = stop.wait_for(|s| *s) => return Ok(()),
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(LOAD_BACKOFF_MAX);
                }
            }
        };
        // A copy's region writes wait for the reconciliation below.
        state.set_reconciled(!from_copy);
        state.set_ready(true);
        drop(_syncer_out);
        // Routing is served from the copy at once, but nothing is flushed until the store's
        // regions are in the index: a flush rewrites whole buckets from the index, and one
        // written from a copy that lacks an acknowledged split would delete it.
        let mut backoff = Duration::from_millis(100);
        if from_copy {
            loop {
                match reconcile(&state, &store, &keys).await {
                    Ok(()) => {
                        state.set_reconciled(true);
                        break;
                    }
                    Err(MetaError::NotLeader) => return Err(MetaError::NotLeader),
                    Err(e) => {
                        tracing::warn!(
                            "the synced copy is not reconciled yet ({e}); retrying in {backoff:?}"
                        );
                        // Stop first, as for the load above.
                        tokio::select! {
                            biased;
                            _ = stop.wait_for(|s| *s) => return Ok(()),
                            _ = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(LOAD_BACKOFF_MAX);
                    }
                }
            }
        }
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            let mut sync = Vec::new();
            let mut stopping = false;
            let mut ticked = false;
            // Not biased, on purpose: under load the dirty set's wake is ready at almost
            // every poll (every region change), and after flushes slower than a second so is
            // the tick, so any fixed order would starve a branch (no store marked Down, or
            // acknowledged writes waiting out their timeout). tokio's random order is fair;
            // the simulation seeds it per host, so its runs still replay.
            tokio::select! {
                _ = stop.wait_for(|s| *s) => stopping = true,
                op = rx.recv() => {
                    let Some(op) = op else { return Ok(()) };
                    let PersistOp::Sync { ops, reply } = op;
                    sync.push((ops, reply));
                    while let Ok(PersistOp::Sync { ops, reply }) = rx.try_recv() {
                        sync.push((ops, reply));
                    }
                }
                _ = state.dirty.wake.notified() => {}
                _ = state.ids.want_block.notified() => {}
                _ = tick.tick() => {
                    for id in mark_down(&state) {
                        state.dirty.store(id);
                    }
                    state.publish_gauges(state.dirty.len());
                    state.prune_buckets();
                    ticked = true;
                }
            }
            for (ops, reply) in sync {
                let result = store.batch(ops).await;
                let lost = result == Err(MetaError::NotLeader);
                let _ = reply.send(result);
                if lost {
                    return Err(MetaError::NotLeader);
                }
            }
            if ticked || stopping {
                let groups = state.resource_groups();
                match super::resource_groups::persist_states(groups, &store, &keys).await {
                    Err(MetaError::NotLeader) => return Err(MetaError::NotLeader),
                    Err(e) => tracing::warn!("persisting resource group states failed: {e}"),
                    Ok(()) => {}
                }
            }
            if ticked {
                match persist_min_resolved_ts(&state, &store, &keys).await {
                    Err(MetaError::NotLeader) => return Err(MetaError::NotLeader),
                    Err(e) => {
                        tracing::warn!("persisting the min resolved ts failed (will retry): {e}")
                    }
                    Ok(()) => {}
                }
            }
            match persist_id_block(&state, &store, &keys).await {
                Err(MetaError::NotLeader) => return Err(MetaError::NotLeader),
                Err(e) => tracing::warn!("persisting an id block failed (will retry): {e}"),
                Ok(()) => {}
            }
            match flush(&state, &store, &keys).await {
                Err(MetaError::NotLeader) => return Err(MetaError::NotLeader),
                Err(e) if stopping => return Err(e),
                Err(e) => tracing::warn!("persisting placement failed (will retry): {e}"),
                Ok(()) if stopping => return Ok(()),
                Ok(()) => {}
            }
        }
    }
    .await;
    state.set_ready(false);
    state.set_reconciled(true);
    clear(&state).await;
    state.dirty.clear();
    state.publish_gauges(0);
    result
}

/// Persists the next id block when the allocator wants one, then lets it hand the ids out (P3).
async fn persist_id_block<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
) -> Result<(), MetaError> {
    if let Some(end) = state.ids.plan() {
        store
            .put(&keys.id_end(), end.to_string().as_bytes())
            .await?;
        state.ids.install(end);
    }
    Ok(())
}

/// Raises the cluster's min resolved ts from the stores' reports (PD does it on a timer of
/// `min-resolved-ts-persistence-interval`, one second by default, as here) and persists it when
/// it rose.
async fn persist_min_resolved_ts<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
) -> Result<(), MetaError> {
    if let Some(ts) = state.advance_min_resolved_ts() {
        store
            .put(&keys.min_resolved_ts(), ts.to_string().as_bytes())
            .await?;
        state.min_resolved_ts_persisted(ts);
    }
    Ok(())
}

/// Marks silent stores Down; returns them (to persist).
fn mark_down(state: &PlacementState) -> Vec<u64> {
    let now = state.clock.now_ms();
    let mut map = state.stores();
    let down = map.mark_down(now, state.cfg.max_store_down_time_ms);
    if !down.is_empty() {
        tracing::warn!(
            ?down,
            "stores marked down: no heartbeat for max-store-down-time"
        );
        state.publish_stores(&map);
    }
    down
}

/// Writes what is marked, as the index and the store map hold it now; on failure the marks
/// go back for the next flush.
async fn flush<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
) -> Result<(), MetaError> {
    let Some(taken) = state.dirty.take() else {
        return Ok(());
    };
    let written = async {
        failpoint::step(points::PERSIST_FLUSH).await?;
        let buckets: BTreeSet<u64> = taken.regions.iter().map(|id| id / BUCKET_IDS).collect();
        let mut ops: Vec<WriteOp> = Vec::with_capacity(buckets.len() + taken.stores.len());
        for b in buckets {
            let current = state.index.regions_in(b * BUCKET_IDS..(b + 1) * BUCKET_IDS);
            let value = if current.is_empty() {
                None
            } else {
                Some(encode_regions(&current)?)
            };
            ops.push((keys.region_bucket(b), value));
        }
        {
            let map = state.stores();
            for id in taken.stores.iter() {
                let value = map.get(*id).map(|s| encode_store(&s.store));
                ops.push((keys.store(*id), value.transpose()?));
            }
        }
        store.batch(ops).await
    }
    .await;
    match written {
        Ok(()) => {
            state.dirty.durable(taken.generation);
            Ok(())
        }
        Err(e) => {
            state.dirty.put_back(taken);
            Err(e)
        }
    }
}

/// Loads a term's state: bootstrap flag, id block, stores, regions; then hands each shard
/// its regions. Records that cannot be decoded are skipped with a warning (their leaders
/// report them again). A member whose syncer holds a copy of the last leader's index takes
/// the copy over instead of reading every region (`true`: the copy was taken, and the store's
/// regions are to be reconciled with it once the term serves).
///
/// The term's records do not depend on each other, so they are read at once: a takeover
/// waits about as long as the slowest of them, not for one round trip to the store per
/// record (two dozen of them, two of them writes), while routing from the copy waits too.
async fn load<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
    controller_key: Option<&[u8]>,
) -> Result<bool, MetaError> {
    failpoint::step(points::PLACEMENT_LOAD).await?;
    let started = std::time::Instant::now();
    tokio::try_join!(
        load_bootstrap(state, store, keys),
        load_ids(state, store, keys),
        load_safe_points(state, store, keys),
        async {
            let resolved = load_decimal(store, &keys.min_resolved_ts()).await?;
            state.reset_resolved_ts(resolved.unwrap_or(0));
            Ok::<(), MetaError>(())
        },
        async {
            let (items, revision, last) = load_global_config(store, keys).await?;
            state.reset_global_config(items, revision, last).await;
            Ok::<(), MetaError>(())
        },
        super::rules::load(state, store, keys),
        super::scheduling::load(state, store, keys),
        load_resource_groups(state, store, keys, controller_key),
        async {
            let external = load_decimal(store, &keys.external_ts()).await?;
            *state.external_ts.lock().await = external.unwrap_or(0);
            Ok::<(), MetaError>(())
        },
        super::store_identity::load(state, store),
        load_stores(state, store, keys),
    )?;

    let from_copy = state.sync.holds_copy();
    let (count, refused, corrupt, scanned_ms, decoded_ms) = if from_copy {
        let n = state.index.len();
        (n, 0, 0, 0, 0)
    } else {
        let (regions, corrupt) = scan_regions(store, keys).await?;
        let scanned_ms = started.elapsed().as_millis() as u64;
        let count = regions.len();
        let refused = state.index.reset(regions);
        (count, refused, corrupt, scanned_ms, scanned_ms)
    };
    // A log of its own for this term: a follower's index from another leader's log (or an
    // earlier term's) is never taken for one of this log's.
    state.index.restart_log(new_log_stream());
    let indexed_ms = started.elapsed().as_millis() as u64;
    // Each shard takes its share of the index on its own core; its heartbeats queue behind.
    let snapshot = Arc::clone(&state.index.snapshot());
    for tx in &state.shards {
        let _ = tx.send(ShardMsg::Reset(Some(snapshot.clone()))).await;
    }
    tracing::info!(
        regions = count,
        refused,
        corrupt,
        scanned_ms,
        decoded_ms,
        indexed_ms,
        stores = state.stores().len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        from_copy,
        "placement loaded"
    );
    Ok(from_copy)
}

/// The bootstrap flag, and the cluster record (bootstrap's, for a cluster bootstrapped
/// before the record was kept).
async fn load_bootstrap<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
) -> Result<(), MetaError> {
    let (flag_key, meta_key) = (keys.bootstrapped(), keys.cluster_meta());
    let (flag, meta) = tokio::try_join!(store.get(&flag_key), store.get(&meta_key))?;
    let bootstrapped = flag.is_some();
    state
        .bootstrapped
        .store(bootstrapped, std::sync::atomic::Ordering::Release);
    *state.cluster_meta.lock().await = match meta {
        Some(bytes) => match decode_cluster_meta(&bytes) {
            Ok(meta) => Some(meta),
            Err(e) => {
                tracing::warn!("the cluster record does not decode ({e}); using bootstrap's");
                Some(state.first_cluster_meta())
            }
        },
        None if bootstrapped => Some(state.first_cluster_meta()),
        None => None,
    };
    Ok(())
}

/// The persisted end of the ids handed out, and a new block past it, written before any id
/// of it is handed out.
async fn load_ids<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
) -> Result<(), MetaError> {
    let id_end = match load_decimal(store, &keys.id_end()).await? {
        // Checked before use: a corrupt end must stop this term, not overflow the next block.
        Some(end) => Some(
            crate::placement::check_persisted_end(end)
                .map_err(|why| MetaError::out_of_range(&keys.id_end(), end, why))?,
        ),
        None => None,
    };
    state.ids.reset(Some(id_end));
    persist_id_block(state, store, keys).await
}

/// The GC safe point and the services' safe points.
async fn load_safe_points<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
) -> Result<(), MetaError> {
    let (gc_key, services_prefix) = (keys.gc_safe_point(), keys.service_safe_points_prefix());
    let (gc, scanned) = tokio::try_join!(
        load_decimal(store, &gc_key),
        store.scan(&services_prefix, 1024)
    )?;
    let mut services = Vec::new();
    for (key, value) in scanned {
        match crate::gc::decode_service(&value) {
            Ok(s) => services.push(s),
            Err(e) => {
                tracing::warn!(key = %String::from_utf8_lossy(&key), "skipping a service safe point: {e}")
            }
        }
    }
    *state.gc.lock().await = crate::gc::SafePoints::new(gc.unwrap_or(0), services);
    Ok(())
}

/// The resource groups and their token states, and PD's resource controller config, written
/// when missing.
async fn load_resource_groups<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
    controller_key: Option<&[u8]>,
) -> Result<(), MetaError> {
    let (groups, group_states) = tokio::try_join!(
        super::resource_groups::load(store, keys),
        super::resource_groups::load_states(store, keys)
    )?;
    state.resource_groups().reset(groups, group_states);
    if let Some(key) = controller_key {
        // TiDB's controller falls back to its own defaults without it, so a write the etcd
        // user may not make (no access to the clients' namespace) must not keep placement
        // down; a lost leadership still ends the load.
        match super::resource_groups::init_controller_config(store, key).await {
            Ok(()) => {}
            Err(MetaError::NotLeader) => return Err(MetaError::NotLeader),
            Err(e) => tracing::warn!("PD's resource controller config was not written: {e}"),
        }
    }
    Ok(())
}

/// The stores and the cluster version, published.
async fn load_stores<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
) -> Result<(), MetaError> {
    let (prefix, version_key) = (keys.stores_prefix(), keys.cluster_version());
    let (scanned, version) =
        tokio::try_join!(store.scan(&prefix, 10_000), store.get(&version_key))?;
    let now = state.clock.now_ms();
    let mut stores = Vec::new();
    for (key, value) in scanned {
        match decode_store(&value) {
            Ok(s) => stores.push(StoreStatus {
                store: s,
                stats: StoreStats::default(),
                last_heartbeat_ms: now,
            }),
            Err(e) => tracing::warn!(key = %String::from_utf8_lossy(&key), "skipping a store: {e}"),
        }
    }
    let cluster_version = match version {
        Some(bytes) => match std::str::from_utf8(&bytes).map(Version::parse) {
            Ok(Ok(v)) => Some(v),
            // Recomputed from the stores instead: they hold what it was computed from.
            _ => {
                tracing::warn!("the persisted cluster version is no version; recomputing it");
                None
            }
        },
        None => None,
    };
    let mut map = state.stores();
    map.reset(stores, cluster_version, now);
    state.publish_stores(&map);
    Ok(())
}

/// Every region the store holds, and how many buckets of them could not be decoded (skipped
/// with a warning: their leaders report them again).
async fn scan_regions<M: MetaStore>(
    store: &M,
    keys: &Keys,
) -> Result<(Vec<Region>, usize), MetaError> {
    // Buckets are up to BUCKET_IDS regions of ~150 bytes: 64 a page keeps pages near 2 MiB.
    let listed = store.scan(&keys.regions_prefix(), 64).await?;
    let mut regions = Vec::with_capacity(listed.len() * 64);
    let mut corrupt = 0usize;
    for (key, value) in listed {
        match decode_regions(&value) {
            Ok(r) => regions.extend(r),
            Err(e) => {
                corrupt += 1;
                tracing::warn!(key = %String::from_utf8_lossy(&key), "skipping a region bucket: {e}");
            }
        }
    }
    Ok((regions, corrupt))
}

/// After a term took over its syncer's copy: what the store holds that the copy does not (a
/// change the last leader made durable in its last moments, which the stream had not brought),
/// applied where it is newer. Routing is served from the copy meanwhile, as a follower serves
/// it; the term flushes nothing until this is done.
async fn reconcile<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
) -> Result<(), MetaError> {
    let started = std::time::Instant::now();
    failpoint::step(points::RECONCILE).await?;
    let (regions, _) = scan_regions(store, keys).await?;
    let scanned = regions.len();
    let stored: std::collections::HashMap<u64, crate::placement::Epoch> =
        regions.iter().map(|r| (r.id, r.epoch)).collect();
    let _gate = state.sync.gate.lock().await;
    let applied = state.index.apply_newer(regions);
    // The copy also holds what the old leader published and never made durable (the syncer
    // streams a change as soon as it is in the index): a route the store does not hold at its
    // epoch is this term's to write, or a later term that loads from the store loses it.
    let mut unwritten = 0usize;
    for route in state.index.snapshot().iter() {
        if stored.get(&route.id()) != Some(&route.epoch()) {
            state.dirty.region(route.id());
            unwritten += 1;
        }
    }
    tracing::info!(
        scanned,
        applied,
        unwritten,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "placement reconciled the synced copy with the store"
    );
    Ok(())
}

/// The global config items (by full key), the revision of the last transaction and its
/// changes.
async fn load_global_config<M: MetaStore>(
    store: &M,
    keys: &Keys,
) -> Result<(Vec<(String, Vec<u8>)>, i64, Vec<crate::proto::ConfigEvent>), MetaError> {
    let prefix = keys.global_config_items_prefix();
    let mut items = Vec::new();
    for (key, value) in store.scan(&prefix, 256).await? {
        match std::str::from_utf8(&key[prefix.len()..]) {
            Ok(name) => items.push((name.to_string(), value)),
            Err(_) => tracing::warn!(
                key = %String::from_utf8_lossy(&key),
                "skipping a global config item whose key is not UTF-8"
            ),
        }
    }
    let revision = load_decimal(store, &keys.global_config_revision())
        .await?
        .unwrap_or(0);
    // Checked before use: a revision counter near the top would overflow on the next write.
    let revision = i64::try_from(revision)
        .ok()
        .filter(|r| *r < i64::MAX / 2)
        .ok_or_else(|| {
            MetaError::out_of_range(
                &keys.global_config_revision(),
                revision,
                "a revision this high is corruption",
            )
        })?;
    // The last transaction's changes, checked before use; without them (written by a release
    // that did not keep them, or unreadable) nothing before the load is held, which is safe:
    // a watch from the loaded revision is told it was compacted and loads again.
    let last = match store.get(&keys.global_config_last_txn()).await? {
        Some(bytes) => {
            let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
            aligned.extend_from_slice(&bytes);
            rkyv::from_bytes::<Vec<crate::proto::ConfigEvent>, rkyv::rancor::Error>(&aligned)
                .unwrap_or_else(|e| {
                    tracing::warn!("the last global config transaction does not read back: {e}");
                    Vec::new()
                })
        }
        None => Vec::new(),
    };
    Ok((items, revision, last))
}

/// What `serve_term` does as it returns, for a term whose task was aborted in a write that
/// did not return: nothing of the term stays served or marked.
pub async fn abandon_term(state: &PlacementState) {
    state.set_ready(false);
    clear(state).await;
    state.dirty.clear();
    state.publish_gauges(0);
}

/// Drops a term's state so a follower holds (and serves) nothing stale.
async fn clear(state: &PlacementState) {
    state.ids.reset(None);
    *state.gc.lock().await = crate::gc::SafePoints::default();
    state.reset_resolved_ts(0);
    *state.cluster_meta.lock().await = None;
    *state.external_ts.lock().await = 0;
    state.bindings.reset(Vec::new());
    state.clear_buckets();
    state.clear_global_config().await;
    *state.rules.lock().await = None;
    super::scheduling::clear(state).await;
    state.resource_groups().clear();
    state.index.reset(Vec::new());
    state.sync.forget_copy();
    {
        let mut map = state.stores();
        map.reset(Vec::new(), None, 0);
        state.publish_stores(&map);
    }
    for tx in &state.shards {
        let _ = tx.send(ShardMsg::Reset(None)).await;
    }
}

/// A number for a new change log, random (the OS's randomness, or a simulation's seed) so that
/// two terms' logs, of this member or another, are told apart.
fn new_log_stream() -> u64 {
    crate::entropy::random_u64()
}

/// Ids per persisted bucket of regions (region, store and peer ids share one space, so a
/// bucket holds about a quarter as many regions).
pub const BUCKET_IDS: u64 = 256;

pub fn encode_regions(regions: &[Region]) -> Result<Vec<u8>, MetaError> {
    rkyv::to_bytes::<rkyv::rancor::Error>(&regions.to_vec())
        .map(|b| b.to_vec())
        .map_err(|e| MetaError::Io(format!("encoding regions: {e}")))
}

fn aligned(bytes: &[u8]) -> AlignedVec {
    let mut v = AlignedVec::with_capacity(bytes.len());
    v.extend_from_slice(bytes);
    v
}

pub fn decode_regions(bytes: &[u8]) -> Result<Vec<Region>, MetaError> {
    rkyv::from_bytes::<Vec<Region>, rkyv::rancor::Error>(&aligned(bytes))
        .map_err(|e| MetaError::Corrupt(format!("region bucket: {e}")))
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod load_tests;
