//! Admin HTTP routes: health, readiness, membership and leader as this node knows them, and
//! Prometheus metrics.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use super::metrics::Metrics;
use crate::election::{Command, Membership};
use crate::meta::{EtcdStore, Keys};
use crate::proto::MemberInfo;
use crate::server::WallClock;
use crate::tso::Allocator;
use tokio::sync::mpsc;

#[derive(Clone)]
pub struct AdminState {
    pub membership: Membership,
    pub metrics: Arc<Metrics>,
    pub allocator: Arc<Allocator>,
    /// Leadership control and the member registry; `None` on the single embedded node.
    pub control: Option<AdminControl>,
    /// The TSO clock, when `[debug] clock_injection` is on.
    pub clock: Option<Arc<WallClock>>,
}

#[derive(Clone)]
pub struct AdminControl {
    pub commands: mpsc::Sender<Command>,
    pub store: EtcdStore,
    pub keys: Keys,
}

pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/api/v1/members", get(members))
        .route("/api/v1/leader", get(leader))
        .route("/api/v1/leader/resign", post(super::leadership::resign))
        .route("/api/v1/debug/clock/shift/{ms}", post(shift_clock))
        .route(
            "/api/v1/members/{name}",
            axum::routing::delete(super::leadership::delete_member),
        )
        .route(
            "/api/v1/leader/transfer/{name}",
            post(super::leadership::transfer),
        )
        .with_state(state)
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AdminState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

pub(super) fn member_json(m: &MemberInfo) -> serde_json::Value {
    json!({"name": m.name, "id": m.id, "client_url": m.client_url, "admin_url": m.admin_url})
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
    let ready = if s.membership.is_leader() {
        s.allocator.is_serving()
    } else {
        leader.is_some()
    };
    if ready {
        (StatusCode::OK, Json(json!({"ready": true}))).into_response()
    } else {
        let reason = if leader.is_some() {
            "leader not serving yet"
        } else {
            "no known leader"
        };
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"ready": false, "reason": reason})),
        )
            .into_response()
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
        if let Ok(listed) = super::leadership::registered_members(control, &s.membership).await {
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
