//! Store bindings' durable side (bind-store-identity): loading the records with a term, and a
//! claim (the first registration of a store by a certificate), judged again under one lock and
//! written to the meta store, in either backend, before the call that made it goes on. The
//! records in memory are `store_bindings`'; the rules are `auth::judge`'s.

use super::answer::{invalid, persist_now};
use super::state::PlacementState;
use super::store_bindings::{decode_binding, encode_binding};
use crate::auth::{judge, StoreSeat, Verdict};
use crate::meta::MetaError;
use crate::proto::{ErrorReply, Response};

/// Records that `seat`'s certificate owns `store`, durably, after judging it again under the
/// claim lock (another claim may have landed since the front end judged it). `Err` is the
/// refusal to answer with.
pub async fn claim(state: &PlacementState, seat: &StoreSeat, store: u64) -> Result<(), Response> {
    let _one_at_a_time = state.bindings.claims.lock().await;
    let bindings = &state.bindings;
    let bound = bindings.resolve(seat);
    match judge(seat, bound, bindings.owner_of(store), store) {
        Verdict::Allow => {
            seat.learn(store);
            return Ok(());
        }
        Verdict::Deny(denied) => {
            return Err(Response::Err(ErrorReply::PermissionDenied(
                denied.to_string(),
            )))
        }
        Verdict::Claim => {}
    }
    if !state.ids.may_exist(store) {
        return Err(invalid(format!("store id {store} was never allocated")));
    }
    let value = encode_binding(seat.identity());
    persist_now(state, vec![(state.keys.store_binding(store), Some(value))]).await?;
    bindings.insert(store, seat.identity());
    seat.learn(store);
    tracing::info!(
        store,
        cert = seat.name(),
        named = seat.named().is_some(),
        "store bound to its certificate (bind-store-identity)"
    );
    Ok(())
}

/// Loads the records of a term.
pub async fn load<M: crate::meta::MetaStore>(
    state: &PlacementState,
    store: &M,
) -> Result<(), MetaError> {
    let prefix = state.keys.store_bindings_prefix();
    let loaded = store
        .scan(&prefix, 10_000)
        .await?
        .into_iter()
        .filter_map(|(key, value)| decode_binding(&prefix, &key, &value))
        .collect();
    state.bindings.reset(loaded);
    Ok(())
}
