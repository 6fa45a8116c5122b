//! Admin HTTP routes. Single-node membership for now: this node is the only member and leads
//! whenever its allocator serves.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::metrics::Metrics;
use crate::proto::MemberInfo;
use crate::tso::Allocator;

#[derive(Clone)]
pub struct AdminState {
    pub cluster_id: u64,
    pub member: MemberInfo,
    pub metrics: Arc<Metrics>,
    pub allocator: Arc<Allocator>,
}

pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/api/v1/members", get(members))
        .route("/api/v1/leader", get(leader))
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

fn member_json(m: &MemberInfo) -> serde_json::Value {
    json!({"name": m.name, "id": m.id, "client_url": m.client_url, "admin_url": m.admin_url})
}

async fn health(State(s): State<AdminState>) -> Json<serde_json::Value> {
    Json(json!({"healthy": true, "name": s.member.name, "serving": s.allocator.is_serving()}))
}

async fn ready(State(s): State<AdminState>) -> Response {
    if s.allocator.is_serving() {
        (StatusCode::OK, Json(json!({"ready": true}))).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"ready": false, "reason": "not serving timestamps"})),
        )
            .into_response()
    }
}

async fn metrics(State(s): State<AdminState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(s.allocator.is_serving()),
    )
        .into_response()
}

async fn members(State(s): State<AdminState>) -> Json<serde_json::Value> {
    let leading = s.allocator.is_serving();
    let mut me = member_json(&s.member);
    me["healthy"] = json!(true);
    me["is_leader"] = json!(leading);
    Json(json!({
        "cluster_id": s.cluster_id,
        "leader": leading.then(|| member_json(&s.member)),
        "members": [me],
    }))
}

async fn leader(State(s): State<AdminState>) -> Response {
    if s.allocator.is_serving() {
        Json(member_json(&s.member)).into_response()
    } else {
        (StatusCode::NOT_FOUND, Json(json!({"error": "no leader"}))).into_response()
    }
}
