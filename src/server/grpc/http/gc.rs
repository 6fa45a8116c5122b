//! `/gc/safepoint` (PD's `ListServiceGCSafepoint`) and `/min-resolved-ts` (PD's
//! `MinResolvedTS`, with `?scope=cluster` or `?scope=1,2`), read through the request service's
//! views.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::Uri;
use axum::Json;
use serde::Serialize;

use super::reply::Failure;
use super::{query_value, Api};
use crate::gc::GC_WORKER;
use crate::placement::StoreStatus;
use crate::proto::{Reply, Request, Response};
use crate::server::service::views;

#[derive(Serialize)]
pub struct ServiceSafePointJson {
    service_id: String,
    expired_at: i64,
    safe_point: u64,
}

#[derive(Serialize)]
pub struct SafePointsJson {
    service_gc_safe_points: Vec<ServiceSafePointJson>,
    #[serde(skip_serializing_if = "is_zero")]
    min_service_gc_safe_point: u64,
    gc_safe_point: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// PD's listing: every service safe point, `gc_worker`'s added at the GC safe point with no
/// expiry when it has none, and the smallest of those not expired.
pub async fn safe_points(State(api): State<Api>) -> Result<Json<SafePointsJson>, Failure> {
    let listed = views::gc_safe_points(&api.shared).await?;
    let now = listed.now_secs;
    let mut services: Vec<ServiceSafePointJson> = listed
        .services
        .into_iter()
        .map(|s| ServiceSafePointJson {
            service_id: s.service_id,
            expired_at: s.expired_at,
            safe_point: s.safe_point,
        })
        .collect();
    if !services.iter().any(|s| s.service_id == GC_WORKER) {
        services.push(ServiceSafePointJson {
            service_id: GC_WORKER.into(),
            expired_at: i64::MAX,
            safe_point: listed.gc_safe_point,
        });
    }
    let min = services
        .iter()
        .filter(|s| s.expired_at > now || s.service_id == GC_WORKER)
        .map(|s| s.safe_point)
        .min()
        .unwrap_or(0);
    Ok(Json(SafePointsJson {
        service_gc_safe_points: services,
        min_service_gc_safe_point: min,
        gc_safe_point: listed.gc_safe_point,
    }))
}

#[derive(Serialize)]
pub struct MinResolvedTsJson {
    is_real_time: bool,
    min_resolved_ts: u64,
    persist_interval: &'static str,
    stores_min_resolved_ts: Option<BTreeMap<u64, u64>>,
}

pub async fn min_resolved_ts(
    State(api): State<Api>,
    uri: Uri,
) -> Result<Json<MinResolvedTsJson>, Failure> {
    let scope = query_value(&uri, "scope")?.filter(|s| !s.is_empty());
    let ids: Option<Vec<u64>> = match scope.as_deref() {
        None => None,
        Some(b"cluster") => Some(all_store_ids(&api).await?),
        Some(list) => Some(
            String::from_utf8_lossy(list)
                .split(',')
                .map(|id| {
                    id.parse::<u64>().map_err(|_| {
                        Failure::bad_request(format!(
                            "strconv.ParseUint: parsing {id:?}: invalid syntax"
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
        ),
    };
    let read = views::min_resolved_ts(&api.shared, ids.as_deref())?;
    Ok(Json(MinResolvedTsJson {
        // The persister raises and persists the cluster's value once a second (PD's default
        // `min-resolved-ts-persistence-interval`).
        is_real_time: true,
        min_resolved_ts: read.min_resolved_ts,
        persist_interval: "1s",
        stores_min_resolved_ts: read.stores.map(|each| each.into_iter().collect()),
    }))
}

/// Every store the leader knows, tombstones too (PD's `GetMetaStores`).
async fn all_store_ids(api: &Api) -> Result<Vec<u64>, Failure> {
    let mut ids = Vec::new();
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
        ids.extend(page.iter().map(|s| s.store.id));
        if after_id == 0 {
            return Ok(ids);
        }
    }
}
