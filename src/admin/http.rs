//! Admin API routes: health, readiness, membership and leader as this node knows them, and
//! Prometheus metrics; and which of them a client certificate may reach (probes and reads: any
//! role, or no certificate at all for probes with `--admin-open-probes`; anything that is not
//! a GET: `admin`). The transport and its limits are `listener`'s.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use super::state::{member_json, AdminState};
use crate::auth::Call;
use crate::failpoint::ArmError;

/// How long a member list with health is answered from the cache.
const MEMBERS_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/api/v1/members", get(members))
        .route("/api/v1/leader", get(leader))
        .route("/api/v1/leader/resign", post(super::leadership::resign))
        .route("/api/v1/debug/clock/shift/{ms}", post(shift_clock))
        .route("/api/v1/debug/failpoints", get(failpoints))
        .route(
            "/api/v1/debug/failpoints/{name}",
            axum::routing::put(arm_failpoint).delete(disarm_failpoint),
        )
        .route(
            "/api/v1/members/{name}",
            axum::routing::delete(super::leadership::delete_member),
        )
        .route(
            "/api/v1/leader/transfer/{name}",
            post(super::leadership::transfer),
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), authorize))
        .with_state(state)
}

/// Serves the admin API over HTTPS on its own thread until `shutdown` turns true.
pub fn spawn(
    setup: super::listener::AdminListener,
    state: AdminState,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    super::listener::spawn(setup, router(state))
}

/// Runs the route only if the connection's certificate allows it; a refusal is 403 with the
/// missing role named, and the route does not run.
async fn authorize(State(s): State<AdminState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let call = match (req.method(), route.as_str()) {
        (&Method::GET, "/health" | "/ready" | "/metrics") => Call::AdminProbe,
        (&Method::GET | &Method::HEAD, _) => Call::AdminRead,
        _ => Call::AdminChange,
    };
    if call == Call::AdminProbe && s.open_probes {
        return next.run(req).await;
    }
    match call.permitted(super::listener::grants_of(&req)) {
        Ok(()) if call == Call::AdminChange => {
            let answer = next.run(req).await;
            // Whatever changed, the next member list is made anew.
            *s.members_cache.lock().await = None;
            answer
        }
        Ok(()) => next.run(req).await,
        Err(denied) => {
            s.metrics.core(s.metrics.cores() - 1).error(
                &crate::proto::ErrorReply::PermissionDenied(denied.to_string()),
            );
            (
                StatusCode::FORBIDDEN,
                Json(json!({"error": format!("permission denied: {denied}")})),
            )
                .into_response()
        }
    }
}

async fn health(State(s): State<AdminState>) -> Json<serde_json::Value> {
    Json(json!({
        "healthy": true,
        "name": s.membership.me.name,
        "serving": s.allocator.is_serving(),
        "is_leader": s.membership.is_leader(),
        "removed": s.membership.is_removed(),
    }))
}

/// Ready: the leader while it serves, or a follower that knows the leader.
async fn ready(State(s): State<AdminState>) -> Response {
    let leader = s.membership.leader();
    // A leader is ready once it serves both timestamps and placement: a probe that passed
    // before the regions were loaded would send routing traffic to a member that refuses it.
    let not_ready = if s.membership.is_leader() {
        if !s.allocator.is_serving() {
            Some("leader not serving yet")
        } else if !(s.placement_ready)() {
            Some("leader has not loaded placement yet")
        } else {
            None
        }
    } else if leader.is_none() {
        Some("no known leader")
    } else {
        None
    };
    match not_ready {
        None => (StatusCode::OK, Json(json!({"ready": true}))).into_response(),
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"ready": false, "reason": reason})),
        )
            .into_response(),
    }
}

async fn metrics(State(s): State<AdminState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics
            .render(s.allocator.is_serving(), s.membership.is_leader()),
    )
        .into_response()
}

async fn members(State(s): State<AdminState>) -> Json<serde_json::Value> {
    if let Some(control) = &s.control {
        let mut cache = s.members_cache.lock().await;
        if let Some((made, listed)) = cache.as_ref() {
            if made.elapsed() < MEMBERS_FRESH {
                return Json(listed.clone());
            }
        }
        if let Ok(listed) =
            super::leadership::registered_members(control, &s.membership, s.peers.as_ref()).await
        {
            *cache = Some((std::time::Instant::now(), listed.clone()));
            return Json(listed);
        }
    }
    let reply = s.membership.reply();
    let leader_id = reply.leader.as_ref().map(|l| l.id);
    let members: Vec<_> = reply
        .members
        .iter()
        .map(|m| {
            let mut j = member_json(m);
            // Health as this node sees it: itself, and a leader that holds its key.
            j["healthy"] = json!(true);
            j["is_leader"] = json!(Some(m.id) == leader_id);
            j
        })
        .collect();
    Json(json!({
        "cluster_id": reply.cluster_id,
        "leader": reply.leader.as_ref().map(member_json),
        "members": members,
    }))
}

async fn leader(State(s): State<AdminState>) -> Response {
    match s.membership.leader() {
        Some(l) => Json(member_json(&l)).into_response(),
        None => (StatusCode::NOT_FOUND, Json(json!({"error": "no leader"}))).into_response(),
    }
}

/// The armed failpoints (src/failpoint.rs); empty in a build without them.
async fn failpoints() -> Json<serde_json::Value> {
    let armed: serde_json::Map<String, serde_json::Value> = crate::failpoint::armed()
        .into_iter()
        .map(|(name, actions)| (name, actions.into()))
        .collect();
    Json(json!({"compiled_in": crate::failpoint::compiled_in(), "armed": armed}))
}

/// Arms a failpoint with the body's actions (`fail`'s syntax, e.g. `return(eio)`).
async fn arm_failpoint(
    axum::extract::Path(name): axum::extract::Path<String>,
    body: String,
) -> Response {
    match crate::failpoint::arm(&name, body.trim()) {
        Ok(()) => Json(json!({"armed": name, "actions": body.trim()})).into_response(),
        Err(e) => refused_failpoint(e),
    }
}

async fn disarm_failpoint(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    match crate::failpoint::arm(&name, "") {
        Ok(()) => Json(json!({"disarmed": name})).into_response(),
        Err(e) => refused_failpoint(e),
    }
}

fn refused_failpoint(e: ArmError) -> Response {
    let status = match e {
        ArmError::NotCompiledIn => StatusCode::FORBIDDEN,
        ArmError::Unknown(_) | ArmError::NotAnEntry(_) | ArmError::BadActions { .. } => {
            StatusCode::BAD_REQUEST
        }
    };
    (status, Json(json!({"error": e.to_string()}))).into_response()
}

async fn shift_clock(
    State(s): State<AdminState>,
    axum::extract::Path(ms): axum::extract::Path<i64>,
) -> Response {
    match &s.clock {
        Some(clock) => {
            clock.shift(ms);
            Json(json!({"shifted_ms": ms, "now_ms": clock.now_ms()})).into_response()
        }
        None => (
            StatusCode::FORBIDDEN,
            Json(json!({"error": "clock injection is off ([debug] clock_injection)"})),
        )
            .into_response(),
    }
}
