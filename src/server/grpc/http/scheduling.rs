//! Scheduling's run-time controls, with PD's routes, bodies and words: `DELETE /store/{id}`
//! (decommission), `GET /stores/limit`, `POST /stores/limit` and `POST /store/{id}/limit`,
//! and `/schedulers` (list; add evict-leader for a store; remove it). Read and changed through
//! the request service's scheduling view; a change needs `admin` (`auth.rs`).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{Map, Value};

use super::reply::Failure;
use super::Api;
use crate::placement::schedule::{LimitType, SettingsError};
use crate::server::service::views::scheduling as view;

/// evict-leader's name, and the prefix of one store's part of it (`evict-leader-scheduler-4`).
const EVICT_LEADER: &str = "evict-leader-scheduler";
/// The schedulers that always run here; PD runs these by default too.
const ALWAYS: [&str; 2] = ["balance-leader-scheduler", "balance-region-scheduler"];
/// PD's error when a scheduler is not running.
const NOT_FOUND: &str = "[PD:scheduler:ErrSchedulerNotFound]scheduler not found";

/// PD's status for each refusal of a store change (`responseStoreErr` and the limit routes).
fn refusal(e: &SettingsError) -> Failure {
    let status = match e {
        SettingsError::StoreNotFound(_) => StatusCode::NOT_FOUND,
        SettingsError::StoreRemoved(_) => StatusCode::GONE,
        _ => StatusCode::BAD_REQUEST,
    };
    Failure::new(status, e.to_string())
}

fn answered<T>(answer: view::Answer<T>, done: &str) -> Response {
    match answer {
        Ok(Ok(_)) => Json(done).into_response(),
        Ok(Err(refused)) => refusal(&refused).into_response(),
        Err(e) => Failure::from(e).into_response(),
    }
}

fn store_id(raw: &str) -> Result<u64, Failure> {
    raw.parse()
        .map_err(|_| Failure::bad_request(format!("invalid store id {raw:?}")))
}

/// PD reads these bodies as `map[string]any`: a body that is not a JSON object is 400.
fn object(bytes: &Bytes) -> Result<Map<String, Value>, Failure> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Failure::bad_request("the body is not a JSON object")),
        Err(e) => Err(Failure::bad_request(e.to_string())),
    }
}

/// PD's `ttlSecond` refusal, shared by both limit routes.
fn no_ttl(uri: &Uri) -> Result<(), Failure> {
    let ttl = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p.starts_with("ttlSecond=")));
    if ttl {
        return Err(Failure::bad_request("ttlSecond is deprecated"));
    }
    Ok(())
}

/// The rate and types of a limit body, refused in PD's words.
fn limit_input(input: &Map<String, Value>) -> Result<(f64, Vec<LimitType>), Failure> {
    let rate = input
        .get("rate")
        .ok_or_else(|| Failure::bad_request("rate unset"))?;
    let rate = rate
        .as_f64()
        .filter(|r| *r > 0.0)
        .ok_or_else(|| Failure::bad_request(SettingsError::BadRate.to_string()))?;
    let types = match input.get("type") {
        None => Vec::new(),
        Some(Value::String(name)) => {
            vec![LimitType::parse(name).map_err(|e| Failure::bad_request(e.to_string()))?]
        }
        Some(_) => return Err(Failure::bad_request("bad format type")),
    };
    Ok((rate, types))
}

/// `DELETE /store/{id}`: the store is set Offline and drained. PD's `?force` (a store
/// physically destroyed, buried without draining) is refused: Meridian always drains.
pub async fn delete_store(State(api): State<Api>, Path(id): Path<String>, uri: Uri) -> Response {
    let id = match store_id(&id) {
        Ok(id) => id,
        Err(f) => return f.into_response(),
    };
    if uri.query().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "force" || p.starts_with("force="))
    }) {
        return Failure::bad_request(
            "removing a store without draining it (force) is not supported; \
             delete it without force and let it drain",
        )
        .into_response();
    }
    answered(
        view::decommission(&api.shared, id).await,
        "The store is set as Offline.",
    )
}

pub async fn get_limits(State(api): State<Api>) -> Response {
    match view::store_limits(&api.shared).await {
        Ok(limits) => Json(limits).into_response(),
        Err(e) => Failure::from(e).into_response(),
    }
}

/// `POST /stores/limit`: every store's limits.
pub async fn set_all_limits(State(api): State<Api>, uri: Uri, bytes: Bytes) -> Response {
    let parsed = no_ttl(&uri)
        .and_then(|()| object(&bytes))
        .and_then(|input| {
            if input.contains_key("labels") {
                return Err(Failure::bad_request(
                    "store limits by label are not supported; set them per store",
                ));
            }
            limit_input(&input)
        });
    match parsed {
        Ok((rate, types)) => answered(
            view::set_store_limit(&api.shared, None, rate, &types).await,
            "Set store limit successfully.",
        ),
        Err(f) => f.into_response(),
    }
}

/// `POST /store/{id}/limit`: one store's limits. PD answers an unknown store 500.
pub async fn set_limit(
    State(api): State<Api>,
    Path(id): Path<String>,
    uri: Uri,
    bytes: Bytes,
) -> Response {
    let parsed = no_ttl(&uri)
        .and_then(|()| store_id(&id))
        .and_then(|id| Ok((id, limit_input(&object(&bytes)?)?)));
    let (id, (rate, types)) = match parsed {
        Ok(p) => p,
        Err(f) => return f.into_response(),
    };
    match view::set_store_limit(&api.shared, Some(id), rate, &types).await {
        Ok(Ok(())) => Json("The store's limit is updated.").into_response(),
        Ok(Err(e @ SettingsError::StoreNotFound(_))) => {
            Failure::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
        }
        Ok(Err(e)) => refusal(&e).into_response(),
        Err(e) => Failure::from(e).into_response(),
    }
}

/// `GET /schedulers`: the names of the schedulers running.
pub async fn schedulers(State(api): State<Api>) -> Response {
    match view::settings(&api.shared).await {
        Ok(settings) => {
            let mut names: Vec<&str> = ALWAYS.to_vec();
            if !settings.evict_leader.is_empty() {
                names.push(EVICT_LEADER);
            }
            names.sort_unstable();
            Json(names).into_response()
        }
        Err(e) => Failure::from(e).into_response(),
    }
}

/// `POST /schedulers` with `{"name": "evict-leader-scheduler", "store_id": N}`. The others
/// that run here always run; what Meridian does not run is refused.
pub async fn add_scheduler(State(api): State<Api>, bytes: Bytes) -> Response {
    let input = match object(&bytes) {
        Ok(i) => i,
        Err(f) => return f.into_response(),
    };
    let Some(name) = input.get("name").and_then(Value::as_str) else {
        return Failure::bad_request("missing scheduler name").into_response();
    };
    if ALWAYS.contains(&name) {
        return Failure::bad_request("[PD:scheduler:ErrSchedulerExisted]scheduler existed")
            .into_response();
    }
    if name != EVICT_LEADER {
        return Failure::bad_request("unknown scheduler").into_response();
    }
    let Some(store) = input.get("store_id") else {
        return Failure::bad_request("missing store id").into_response();
    };
    let Some(store) = store
        .as_f64()
        .filter(|s| *s >= 0.0 && s.fract() == 0.0 && *s <= u64::MAX as f64)
    else {
        return Failure::bad_request("please input a right store id").into_response();
    };
    let running = match view::settings(&api.shared).await {
        Ok(s) => !s.evict_leader.is_empty(),
        Err(e) => return Failure::from(e).into_response(),
    };
    let done = if running {
        "The scheduler has been applied to the store."
    } else {
        "The scheduler is created."
    };
    answered(
        view::evict_leader(&api.shared, store as u64, true).await,
        done,
    )
}

/// `DELETE /schedulers/{name}`: `evict-leader-scheduler-N` stops evicting store N;
/// `evict-leader-scheduler` stops evicting every store.
pub async fn remove_scheduler(State(api): State<Api>, Path(name): Path<String>) -> Response {
    if ALWAYS.contains(&name.as_str()) {
        return Failure::bad_request(format!("{name} always runs on Meridian")).into_response();
    }
    let stores = if name == EVICT_LEADER {
        match view::settings(&api.shared).await {
            Ok(s) => s.evict_leader,
            Err(e) => return Failure::from(e).into_response(),
        }
    } else {
        match name
            .strip_prefix(EVICT_LEADER)
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|id| id.parse::<u64>().ok())
        {
            Some(id) => vec![id],
            None => return Failure::not_found(NOT_FOUND).into_response(),
        }
    };
    let mut removed = false;
    for store in stores {
        match view::evict_leader(&api.shared, store, false).await {
            Ok(Ok(changed)) => removed |= changed,
            Ok(Err(e)) => return refusal(&e).into_response(),
            Err(e) => return Failure::from(e).into_response(),
        }
    }
    if !removed {
        return Failure::not_found(NOT_FOUND).into_response();
    }
    Json("The scheduler is removed.").into_response()
}
