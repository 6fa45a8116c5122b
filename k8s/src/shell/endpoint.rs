//! The operator's own HTTP endpoint, plain HTTP for the kubelet and Prometheus: `/metrics`
//! (the registry), `/healthz` (liveness) and `/readyz` (readiness), and the readiness state
//! the elector and the controller report into.
//!
//! Liveness asks only that the process answers: tying it to the API server would have the
//! kubelet restart every replica during an API outage, which fixes nothing. Readiness asks
//! that the replica can do its part: a follower has reached the API server (its last Lease
//! round got an answer), the leader has also listed MeridianClusters once (the watch it runs
//! has what it needs: the CRD installed, the RBAC to read it). A follower must be able to be
//! ready, or a Deployment rollout would wait forever on a replica that never leads.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::metrics::Metrics;

/// What readiness depends on, set as it happens.
#[derive(Debug, Default)]
pub struct Probes {
    api_reached: AtomicBool,
    leading: AtomicBool,
    listed: AtomicBool,
}

impl Probes {
    /// The outcome of a Lease round: whether the API server answered (a lost race answers).
    pub fn api_reached(&self, reached: bool) {
        self.api_reached.store(reached, Relaxed);
    }

    /// This replica took the Lease and starts the controller.
    pub fn leading(&self) {
        self.leading.store(true, Relaxed);
    }

    /// The controller's first list of MeridianClusters came back.
    pub fn listed(&self) {
        self.listed.store(true, Relaxed);
    }

    /// `Err` says why not ready.
    pub fn ready(&self) -> Result<(), &'static str> {
        if !self.api_reached.load(Relaxed) {
            return Err("the API server has not answered the last Lease round");
        }
        if self.leading.load(Relaxed) && !self.listed.load(Relaxed) {
            return Err("leading; the first list of MeridianClusters has not come back");
        }
        Ok(())
    }
}

/// What the endpoint serves.
#[derive(Clone, Default)]
pub struct Endpoint {
    pub metrics: Arc<Metrics>,
    pub probes: Arc<Probes>,
}

pub fn router(endpoint: Endpoint) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(endpoint)
}

/// Serves until the listener fails.
pub async fn serve(listener: tokio::net::TcpListener, endpoint: Endpoint) -> std::io::Result<()> {
    axum::serve(listener, router(endpoint)).await
}

async fn metrics(State(e): State<Endpoint>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        e.metrics.render(),
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(e): State<Endpoint>) -> Response {
    match e.probes.ready() {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_is_ready_once_the_api_answers_and_a_leader_once_it_has_listed() {
        let p = Probes::default();
        assert!(p.ready().is_err(), "nothing reached yet");
        p.api_reached(true);
        assert_eq!(p.ready(), Ok(()), "a follower standing by");
        p.leading();
        assert!(
            p.ready().is_err_and(|why| why.contains("first list")),
            "{:?}",
            p.ready()
        );
        p.listed();
        assert_eq!(p.ready(), Ok(()));
        p.api_reached(false);
        assert!(
            p.ready().is_err(),
            "a renewal that did not reach the API server"
        );
    }

    #[tokio::test]
    async fn readyz_answers_503_with_the_reason_then_200() {
        let e = Endpoint::default();
        let r = readyz(State(e.clone())).await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        e.probes.api_reached(true);
        assert_eq!(readyz(State(e.clone())).await.status(), StatusCode::OK);
        let r = metrics(State(e)).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers().get(header::CONTENT_TYPE).map(|v| v.as_bytes()),
            Some(&b"text/plain; version=0.0.4"[..])
        );
    }
}
