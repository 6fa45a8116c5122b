//! What an operator of the cluster changes in scheduling while it runs, on the leader, for PD's
//! HTTP API and `meridian ctl`: decommissioning a store (PD's `DELETE /store/{id}`),
//! evict-leader's stores and per-store limits. Each change is checked by the pure core
//! (`placement::schedule::settings`, PD's words for a refusal), made durable in one write, and
//! only then applied to the store map and republished in the scheduler's view. The settings are
//! loaded with the term from the embedded store or etcd alike; a follower holds none and refuses.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::answer::persist_now;
use super::state::PlacementState;
use super::store_record::encode_store;
use crate::meta::{Keys, MetaError, MetaStore};
use crate::placement::schedule::{
    check_decommission, LimitType, Settings, SettingsError, StoreLimit,
};
use crate::placement::StoreState;
use crate::proto::{ErrorReply, Response};

/// A read or a change: `Err` is the service's refusal (not the leader, a failed write), `Ok`
/// holds PD's answer, which may itself be PD's refusal of the input.
pub type Answer<T> = Result<Result<T, SettingsError>, ErrorReply>;

fn not_held() -> ErrorReply {
    ErrorReply::Unavailable(
        "scheduling settings are not loaded on this node (not the leader, or starting)".into(),
    )
}

fn write_failed(r: Response) -> ErrorReply {
    match r {
        Response::Err(e) => e,
        Response::Ok(_) => ErrorReply::Internal("a write answered without an error".into()),
    }
}

/// The configured rates, as a store's limits.
fn default_limit(state: &PlacementState) -> StoreLimit {
    StoreLimit {
        add_peer: state.cfg.store_limit_add_per_min,
        remove_peer: state.cfg.store_limit_remove_per_min,
    }
}

/// Makes `settings` the scheduler's. Under the store map's lock, as every republish of the
/// view is, so that a store change republished meanwhile cannot bring back the settings before.
fn publish(state: &PlacementState, settings: &Settings) {
    let _stores = state.stores();
    let mut next = (**state.view.load()).clone();
    next.apply(settings);
    state.view.store(Arc::new(next));
}

pub async fn settings(state: &PlacementState) -> Result<Settings, ErrorReply> {
    let held = state.schedule_settings.lock().await;
    held.clone().ok_or_else(not_held)
}

/// Every store's limits that is not a Tombstone (PD's `GET /stores/limit`).
pub async fn store_limits(state: &PlacementState) -> Result<BTreeMap<u64, StoreLimit>, ErrorReply> {
    let settings = settings(state).await?;
    let default = default_limit(state);
    Ok(state
        .stores()
        .iter()
        .filter(|s| s.store.state != StoreState::Tombstone)
        .map(|s| (s.store.id, settings.limit(s.store.id, default)))
        .collect())
}

/// Makes `next` durable, then the term's and the scheduler's.
async fn commit(
    state: &PlacementState,
    held: &mut Option<Settings>,
    next: Settings,
) -> Result<(), ErrorReply> {
    let value = serde_json::to_vec(&next)
        .map_err(|e| ErrorReply::Internal(format!("encoding the scheduling settings: {e}")))?;
    persist_now(state, vec![(state.keys.schedule_settings(), Some(value))])
        .await
        .map_err(write_failed)?;
    publish(state, &next);
    *held = Some(next);
    Ok(())
}

/// Sets `rate` for `types` (both when empty) of one store, or of every store that is not a
/// Tombstone with `None`.
pub async fn set_store_limit(
    state: &PlacementState,
    store: Option<u64>,
    rate: f64,
    types: &[LimitType],
) -> Answer<()> {
    let mut held = state.schedule_settings.lock().await;
    let mut next = held.clone().ok_or_else(not_held)?;
    let stores: Vec<u64> = {
        let map = state.stores();
        match store {
            Some(id) => match map.get(id) {
                Some(_) => vec![id],
                None => return Ok(Err(SettingsError::StoreNotFound(id))),
            },
            None => map
                .iter()
                .filter(|s| s.store.state != StoreState::Tombstone)
                .map(|s| s.store.id)
                .collect(),
        }
    };
    if let Err(e) = next.set_limits(&stores, rate, types, default_limit(state)) {
        return Ok(Err(e));
    }
    commit(state, &mut held, next).await.map(Ok)
}

/// Adds `store` to evict-leader (`evict`) or takes it out; `Ok(false)`: nothing changed.
pub async fn evict_leader(state: &PlacementState, store: u64, evict: bool) -> Answer<bool> {
    let mut held = state.schedule_settings.lock().await;
    let mut next = held.clone().ok_or_else(not_held)?;
    let changed = if evict {
        if state.stores().get(store).is_none() {
            return Ok(Err(SettingsError::StoreNotFound(store)));
        }
        match next.evict(store) {
            Ok(changed) => changed,
            Err(e) => return Ok(Err(e)),
        }
    } else {
        next.stop_evicting(store)
    };
    if changed {
        commit(state, &mut held, next).await?;
    }
    Ok(Ok(changed))
}

/// Starts decommissioning `store`: Offline (durable first), so that scheduling drains it; it
/// becomes a Tombstone once its heartbeat reports no region left.
pub async fn decommission(state: &PlacementState, store: u64) -> Answer<()> {
    let held = state.schedule_settings.lock().await;
    let evicting = held.as_ref().ok_or_else(not_held)?.evict_leader.clone();
    // Serialized with store registrations, which also write store records.
    let _one_at_a_time = state.bootstrap_lock.lock().await;
    let mut staged = state.stores().clone();
    match check_decommission(&staged, store, state.cfg.max_replicas, &evicting) {
        Ok(true) => {}
        Ok(false) => return Ok(Ok(())),
        Err(e) => return Ok(Err(e)),
    }
    // The check above found it, and neither unknown nor a Tombstone.
    staged
        .decommission(store)
        .map_err(|e| ErrorReply::Internal(e.to_string()))?;
    let record = staged
        .get(store)
        .map(|s| s.store.clone())
        .ok_or_else(|| ErrorReply::Internal(format!("store {store} left the staged map")))?;
    let value = encode_store(&record).map_err(|e| ErrorReply::Internal(e.to_string()))?;
    persist_now(state, vec![(state.keys.store(store), Some(value))])
        .await
        .map_err(write_failed)?;
    let mut map = state.stores();
    // Heartbeats may have changed the live map meanwhile (a Down store back Up); the record is
    // durable as Offline, and the live map follows it.
    if map.decommission(store).is_ok() {
        state.publish_stores(&map);
    }
    tracing::warn!(store, "store set Offline: its peers are moved away");
    Ok(Ok(()))
}

/// A term's settings, from the store. A record that does not decode stops the load: scheduling
/// with evict-leader or a limit silently dropped would undo what an operator set.
pub(super) async fn load<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
) -> Result<(), MetaError> {
    let key = keys.schedule_settings();
    let settings = match store.get(&key).await? {
        Some(bytes) => serde_json::from_slice::<Settings>(&bytes)
            .map_err(|e| MetaError::Corrupt(format!("{}: {e}", String::from_utf8_lossy(&key))))?
            .normalized(),
        None => Settings::default(),
    };
    publish(state, &settings);
    *state.schedule_settings.lock().await = Some(settings);
    Ok(())
}

/// Drops the term's settings (stepping down).
pub(super) async fn clear(state: &PlacementState) {
    *state.schedule_settings.lock().await = None;
    publish(state, &Settings::default());
}
