//! Stores: PutStore (registration, durable before it is acknowledged), GetStore, GetAllStores
//! (one page at a time) and StoreHeartbeat.

use super::answer::{invalid, over_limit, persist_now};
use super::persist::encode_store;
use super::state::PlacementState;
use crate::placement::{
    page_len, store_wire_size, LimitError, Limits, Store, StoreMap, StoreState, StoreStats,
};
use crate::proto::{ErrorReply, Reply, Response};

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
        StoreOp::Get(id) => Response::Ok(Reply::Store(state.stores().get(id).cloned())),
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
