//! The cluster's own requests, served before it is bootstrapped: IsBootstrapped, AllocId and
//! Bootstrap (the first store and the first region, once, durably).

use std::sync::atomic::Ordering;

use super::answer::{cluster_version_text, invalid, persist_now, store_refused, unavailable, WAIT};
use super::cluster_config::encode_cluster_meta;
use super::persist::{encode_regions, encode_store, BUCKET_IDS};
use super::shard_task::region_error;
use super::state::PlacementState;
use crate::placement::{LimitError, Limits, Region, RegionShape, Store};
use crate::proto::{ErrorReply, Reply, Response};

#[derive(Debug)]
pub enum ClusterOp {
    IsBootstrapped,
    /// A new id, unique forever (P3).
    AllocId,
    Bootstrap {
        store: Store,
        region: Box<Region>,
    },
}

pub async fn serve(state: &PlacementState, op: ClusterOp) -> Response {
    match op {
        ClusterOp::IsBootstrapped => Response::Ok(Reply::Bootstrapped(
            state.bootstrapped.load(Ordering::Acquire),
        )),
        ClusterOp::AllocId => match state.ids.alloc(WAIT).await {
            Some(id) => Response::Ok(Reply::Id(id)),
            None => unavailable("no id block persisted in time; retry"),
        },
        ClusterOp::Bootstrap { store, region } => bootstrap(state, store, *region).await,
    }
}

/// The sizes the request carries against `[limits]`.
pub fn check_limits(op: &ClusterOp, limits: &Limits) -> Result<(), LimitError> {
    match op {
        ClusterOp::Bootstrap { store, region } => {
            limits.check_store(store)?;
            limits.check_region(region)
        }
        ClusterOp::IsBootstrapped | ClusterOp::AllocId => Ok(()),
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
        Err(e) => return store_refused(e),
    };
    let keys = &state.keys;
    // The first store sets the cluster version (PD waits for its PutStore; TiKV sends one
    // right after, and a heartbeat must never carry an empty version).
    let version = cluster_version_text(staged.cluster_version());
    let meta = state.first_cluster_meta();
    let mut cluster_meta = state.cluster_meta.lock().await;
    let ops = match (
        encode_store(&status),
        encode_regions(std::slice::from_ref(&region)),
    ) {
        (Ok(s), Ok(r)) => vec![
            (keys.store(status.id), Some(s)),
            (keys.cluster_version(), Some(version.into_bytes())),
            (keys.cluster_meta(), Some(encode_cluster_meta(&meta))),
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
    *cluster_meta = Some(meta);
    state.bootstrapped.store(true, Ordering::Release);
    Response::Ok(Reply::Done)
}
