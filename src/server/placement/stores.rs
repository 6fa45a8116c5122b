//! Stores: PutStore (registration, durable with the cluster version it changes before it is
//! acknowledged), GetStore, GetAllStores (one page at a time) and StoreHeartbeat (answered
//! with the cluster version).

use super::answer::{cluster_version_text, over_limit, persist_now, store_refused};
use super::persist::encode_store;
use super::state::PlacementState;
use crate::mutation::{self, Mutation};
use crate::placement::{
    page_len, store_wire_size, LimitError, Limits, Store, StoreMap, StoreState, StoreStats,
};
use crate::proto::{ErrorReply, Reply, Response, StoreBeat};

#[derive(Debug)]
pub enum StoreOp {
    Put(Store),
    Get(u64),
    /// Stores with ids above `after_id`, in id order, one page.
    GetAll {
        after_id: u64,
    },
    Heartbeat {
        store_id: u64,
        stats: StoreStats,
    },
}

pub async fn serve(state: &PlacementState, op: StoreOp) -> Response {
    match op {
        StoreOp::Put(store) => put_store(state, store).await,
        StoreOp::Get(id) => {
            Response::Ok(Reply::Store(state.stores().get(id).cloned().map(Box::new)))
        }
        StoreOp::GetAll { after_id } => {
            let map = state.stores();
            let after: Vec<_> = map.iter().filter(|s| s.store.id > after_id).collect();
            let n = page_len(after.iter().map(|s| store_wire_size(s)));
            Response::Ok(Reply::Stores {
                stores: after[..n].iter().map(|s| (*s).clone()).collect(),
                more: n < after.len(),
            })
        }
        StoreOp::Heartbeat { store_id, stats } => {
            let now = state.clock.now_ms();
            let mut map = state.stores();
            // PD answers with the state the store had before this heartbeat.
            let before = map.get(store_id).map(|s| s.store.state);
            match (map.heartbeat(store_id, stats, now), before) {
                (Ok(revived), Some(before)) => {
                    state.publish_stores(&map);
                    if revived {
                        state.dirty.store(store_id);
                    }
                    Response::Ok(Reply::StoreHeartbeat(StoreBeat {
                        cluster_version: cluster_version_text(map.cluster_version()),
                        state: before,
                    }))
                }
                (Err(e), _) => store_refused(e),
                (Ok(_), None) => store_refused(crate::placement::StoreError::Unknown(store_id)),
            }
        }
    }
}

/// The sizes the request carries against `[limits]`; the store count is checked where a
/// store registers.
pub fn check_limits(op: &StoreOp, limits: &Limits) -> Result<(), LimitError> {
    match op {
        StoreOp::Put(store) => limits.check_store(store),
        StoreOp::Get(_) | StoreOp::GetAll { .. } | StoreOp::Heartbeat { .. } => Ok(()),
    }
}

async fn put_store(state: &PlacementState, store: Store) -> Response {
    if !state.ids.may_exist(store.id) {
        return super::answer::invalid(format!("store id {} was never allocated", store.id));
    }
    // One registration at a time: each is checked against the cluster version the one before
    // it left, and the version it leaves is persisted with it.
    let _one_at_a_time = state.bootstrap_lock.lock().await;
    let now = state.clock.now_ms();
    let mut staged = state.stores().clone();
    if let Err(e) = admit_store(&state.limits, &staged, store.id) {
        return over_limit(e);
    }
    let version_before = staged.cluster_version().cloned();
    let status = match staged.put(store, now) {
        Ok(s) => s.store.clone(),
        Err(e) => return store_refused(e),
    };
    let value = match encode_store(&status) {
        Ok(v) => v,
        Err(e) => return Response::Err(ErrorReply::Internal(e.to_string())),
    };
    let mut ops = vec![(state.keys.store(status.id), Some(value))];
    if let Some(v) = staged
        .cluster_version()
        .filter(|v| Some(*v) != version_before.as_ref())
    {
        ops.push((
            state.keys.cluster_version(),
            Some(v.to_string().into_bytes()),
        ));
    }
    let deferred = mutation::on(Mutation::AckBeforeDurable);
    if !deferred {
        if let Err(r) = persist_now(state, ops).await {
            return r;
        }
    }
    let id = status.id;
    let mut map = state.stores();
    // Heartbeats may have changed the live map meanwhile (a Down store back Up); registrations
    // cannot, so this applies as the staged copy did. The store count is not checked again:
    // this one is durable now.
    match map.put(status, now) {
        Ok(_) => {
            state.publish_stores(&map);
            if deferred {
                state.dirty.store(id);
            }
            Response::Ok(Reply::Done)
        }
        Err(e) => store_refused(e),
    }
}

fn admit_store(limits: &Limits, stores: &StoreMap, id: u64) -> Result<(), LimitError> {
    let live = stores
        .iter()
        .filter(|s| s.store.state != StoreState::Tombstone)
        .count();
    limits.admit_store(id, stores.get(id).is_some(), live)
}
