//! `/stores` and `/store/{id}`: the stores the leader knows, read page by page through the
//! request service (`GetAllStores`, `GetStore`), in PD's `StoreInfo` shape, with the regions
//! and leaders each holds and their sizes summed by the shards (the service's views).

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::Json;

use super::json::{self, StoreJson, StoresJson};
use super::reply::Failure;
use super::{query_values, Api};
use crate::placement::{StoreState, StoreStatus};
use crate::proto::{Reply, Request, Response};
use crate::server::service::views;

/// The store states `?state=` names, as kvproto numbers them (0 Up, 1 Offline, 2 Tombstone);
/// without it, PD lists every store that is not a tombstone.
fn accepted_states(uri: &Uri) -> Result<Vec<i32>, Failure> {
    let asked = query_values(uri, "state")?;
    if asked.is_empty() {
        return Ok(vec![0, 1]);
    }
    asked
        .iter()
        .map(|raw| {
            let text = String::from_utf8_lossy(raw);
            match text.parse::<i32>() {
                Ok(n @ 0..=2) => Ok(n),
                Ok(n) => Err(Failure::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    format!("unknown StoreState: {n}"),
                )),
                Err(_) => Err(Failure::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    format!("strconv.Atoi: parsing {text:?}: invalid syntax"),
                )),
            }
        })
        .collect()
}

/// kvproto's number for a store's state (a down store is Up to kvproto, as to PD).
fn kvproto_state(state: StoreState) -> i32 {
    match state {
        StoreState::Up | StoreState::Down => 0,
        StoreState::Offline => 1,
        StoreState::Tombstone => 2,
    }
}

pub async fn all(State(api): State<Api>, uri: Uri) -> Result<Json<StoresJson>, Failure> {
    let accepted = accepted_states(&uri)?;
    let mut listed: Vec<StoreStatus> = Vec::new();
    let mut after_id = 0;
    loop {
        let page: Vec<StoreStatus> = match api.call(Request::GetAllStores { after_id }).await {
            Response::Ok(Reply::Stores { stores, more }) => {
                after_id = match stores.last() {
                    Some(last) if more => last.store.id,
                    _ => 0,
                };
                stores
            }
            Response::Ok(other) => return Err(super::unexpected(other)),
            Response::Err(e) => return Err(e.into()),
        };
        listed.extend(
            page.into_iter()
                .filter(|s| accepted.contains(&kvproto_state(s.store.state))),
        );
        if after_id == 0 {
            break;
        }
    }
    let held = views::store_totals(&api.shared).await?;
    let stores: Vec<StoreJson> = listed
        .iter()
        .map(|s| json::store(s, held.get(&s.store.id).copied().unwrap_or_default()))
        .collect();
    Ok(Json(StoresJson {
        count: stores.len(),
        stores,
    }))
}

pub async fn one(
    State(api): State<Api>,
    Path(id): Path<String>,
) -> Result<Json<StoreJson>, Failure> {
    let id: u64 = id.parse().map_err(|_| {
        Failure::bad_request(format!(
            "[PD:apiutil:ErrInvalidInput]invalid input: parse id: strconv.ParseUint: parsing {id:?}: invalid syntax"
        ))
    })?;
    match api.call(Request::GetStore { id }).await {
        Response::Ok(Reply::Store(Some(s))) => {
            let held = views::store_totals(&api.shared).await?;
            let on_it = held.get(&s.store.id).copied().unwrap_or_default();
            Ok(Json(json::store(&s, on_it)))
        }
        Response::Ok(Reply::Store(None)) => Err(store_not_found(id)),
        Response::Ok(other) => Err(super::unexpected(other)),
        Response::Err(crate::proto::ErrorReply::Refused(crate::proto::Refusal::StoreNotFound(
            _,
        ))) => Err(store_not_found(id)),
        Response::Err(e) => Err(e.into()),
    }
}

fn store_not_found(id: u64) -> Failure {
    Failure::not_found(format!("[PD:core:ErrStoreNotFound]store {id} not found"))
}
