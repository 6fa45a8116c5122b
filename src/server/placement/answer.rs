//! What every placement handler answers with: the refusals, and waiting for a write to be
//! durable. Owns no decision about a request.

use std::time::Duration;

use tokio::sync::oneshot;

use super::messages::PersistOp;
use super::state::PlacementState;
use crate::placement::{LimitError, StoreError, Version};
use crate::proto::{ErrorReply, Refusal, Response};

/// How long a request waits for an id block or a durable write before `Unavailable`.
pub(super) const WAIT: Duration = Duration::from_secs(3);

pub(super) fn invalid(why: impl Into<String>) -> Response {
    Response::Err(ErrorReply::InvalidArgument(why.into()))
}

pub(super) fn unavailable(why: impl Into<String>) -> Response {
    Response::Err(ErrorReply::Unavailable(why.into()))
}

pub(super) fn over_limit(e: LimitError) -> Response {
    Response::Err(ErrorReply::LimitExceeded(e.to_string()))
}

/// A refused store registration or heartbeat, as PD words it where PD has words for it.
pub(super) fn store_refused(e: StoreError) -> Response {
    let refusal = match e {
        StoreError::Unknown(id) => Refusal::StoreNotFound(id),
        StoreError::Tombstone(_) => Refusal::StoreTombstone,
        StoreError::Downgrade { cluster, store, .. } => Refusal::StoreVersion { cluster, store },
        StoreError::BadVersion(id, why) => Refusal::InvalidStoreVersion {
            id,
            why: why.to_string(),
        },
        StoreError::Invalid(..) => return invalid(e.to_string()),
    };
    Response::Err(ErrorReply::Refused(refusal))
}

/// The cluster version a reply carries: PD's initial `0.0.0` until a store registered.
pub(super) fn cluster_version_text(v: Option<&Version>) -> String {
    v.map_or_else(|| "0.0.0".to_string(), Version::to_string)
}

/// Waits for the persister to make `ops` durable: room in its queue and the write itself,
/// within [`WAIT`] together.
pub(super) async fn persist_now(
    state: &PlacementState,
    ops: Vec<crate::meta::WriteOp>,
) -> Result<(), Response> {
    let (reply, rx) = oneshot::channel();
    let written = tokio::time::timeout(WAIT, async {
        if state
            .persist
            .send(PersistOp::Sync { ops, reply })
            .await
            .is_err()
        {
            return None;
        }
        rx.await.ok()
    })
    .await;
    match written {
        Ok(Some(Ok(()))) => Ok(()),
        Ok(Some(Err(e))) => Err(unavailable(format!("persisting failed: {e}"))),
        Ok(None) => Err(unavailable("shutting down")),
        Err(_) => Err(unavailable("persisting timed out; retry")),
    }
}
