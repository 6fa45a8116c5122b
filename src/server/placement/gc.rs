//! GC safe points: the cluster's (only ever raised) and each service's with a TTL, decided by
//! the pure `gc` rules and made durable before the new value is answered or read.

use super::answer::{invalid, persist_now};
use super::state::PlacementState;
use crate::gc::{encode_service, GcUpdate, ServiceChange};
use crate::proto::{Reply, Response};

#[derive(Debug)]
pub enum GcOp {
    Get,
    Update(u64),
    UpdateService {
        service_id: String,
        ttl_secs: i64,
        safe_point: u64,
    },
}

pub async fn serve(state: &PlacementState, op: GcOp) -> Response {
    match op {
        GcOp::Get => Response::Ok(Reply::GcSafePoint(state.gc.lock().await.gc())),
        GcOp::Update(safe_point) => update_gc_safe_point(state, safe_point).await,
        GcOp::UpdateService {
            service_id,
            ttl_secs,
            safe_point,
        } => update_service_safe_point(state, &service_id, ttl_secs, safe_point).await,
    }
}

async fn update_gc_safe_point(state: &PlacementState, proposed: u64) -> Response {
    let mut gc = state.gc.lock().await;
    let decision = gc.update_gc(proposed);
    if let GcUpdate::Advanced(value) = decision {
        let op = (
            state.keys.gc_safe_point(),
            Some(value.to_string().into_bytes()),
        );
        if let Err(r) = persist_now(state, vec![op]).await {
            return r;
        }
    }
    gc.apply_gc(decision);
    Response::Ok(Reply::GcSafePoint(gc.gc()))
}

async fn update_service_safe_point(
    state: &PlacementState,
    service_id: &str,
    ttl_secs: i64,
    safe_point: u64,
) -> Response {
    let now = (state.clock.now_ms() / 1000) as i64;
    let mut gc = state.gc.lock().await;
    let update = match gc.update_service(service_id, ttl_secs, safe_point, now) {
        Ok(u) => u,
        Err(why) => return invalid(why.to_string()),
    };
    let ops = update
        .changes
        .iter()
        .map(|c| match c {
            ServiceChange::Put(s) => (
                state.keys.service_safe_point(&s.service_id),
                Some(encode_service(s)),
            ),
            ServiceChange::Remove(id) => (state.keys.service_safe_point(id), None),
        })
        .collect::<Vec<_>>();
    if !ops.is_empty() {
        if let Err(r) = persist_now(state, ops).await {
            return r;
        }
    }
    gc.apply_service(&update);
    Response::Ok(Reply::ServiceSafePoint {
        ttl_secs: update.min.expired_at.saturating_sub(now),
        service_id: update.min.service_id,
        safe_point: update.min.safe_point,
    })
}
