//! The external timestamp: GetExternalTimestamp reads it as PD does (0 before bootstrap,
//! u64::MAX until the cluster is initialized), SetExternalTimestamp raises it under
//! `tso::check_external_ts` against a timestamp the service layer has just handed out, durable
//! before it is answered. Loaded with the term.

use std::sync::atomic::Ordering;

use super::answer::persist_now;
use super::state::PlacementState;
use crate::proto::{ErrorReply, Refusal, Reply, Response};
use crate::tso::{check_external_ts, ExternalTsError};

#[derive(Debug)]
pub enum ExternalTsOp {
    Get,
    /// `now`: a timestamp handed out for this request.
    Set {
        timestamp: u64,
        now: u64,
    },
}

pub async fn serve(state: &PlacementState, op: ExternalTsOp) -> Response {
    // Held across the durable write: values are persisted in the order they are accepted.
    let mut stored = state.external_ts.lock().await;
    let bootstrapped = state.bootstrapped.load(Ordering::Acquire);
    // PD's `GetExternalTS`: what a reader gets, and what a new value must exceed.
    let current = if !bootstrapped {
        0
    } else if !state.is_initialized() {
        u64::MAX
    } else {
        *stored
    };
    match op {
        ExternalTsOp::Get => Response::Ok(Reply::ExternalTimestamp(current)),
        ExternalTsOp::Set { timestamp, now } => {
            if let Err(e) = check_external_ts(timestamp, now, bootstrapped, current) {
                let refusal = match e {
                    ExternalTsError::AboveTso => Refusal::ExternalTsAboveTso,
                    ExternalTsError::NotBootstrapped => Refusal::ExternalTsNotBootstrapped,
                    ExternalTsError::NotIncreasing => Refusal::ExternalTsNotIncreasing,
                };
                return Response::Err(ErrorReply::Refused(refusal));
            }
            let op = (
                state.keys.external_ts(),
                Some(timestamp.to_string().into_bytes()),
            );
            if let Err(r) = persist_now(state, vec![op]).await {
                return r;
            }
            *stored = timestamp;
            Response::Ok(Reply::Done)
        }
    }
}
