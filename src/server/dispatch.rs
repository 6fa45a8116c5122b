//! Request handling: turns one archived request into one response. The only waiting it does is
//! for the TSO window or the clock when the allocator says the window is used up.

use std::time::Duration;

use crate::admin::{CoreMetrics, RequestKind};
use crate::auth::Call;
use crate::proto::{ArchivedRequest, ErrorReply, Reply, Request, Response};
use crate::tso::AllocError;

use super::Shared;

/// What a request asks for, copied out of the archive so the receive buffer can be reused while
/// a request waits.
#[derive(Debug)]
pub enum Action {
    Ping,
    Tso(u32),
    GetMembers,
    Placement(Box<Request>),
}

impl Action {
    pub fn call(&self) -> Call {
        match self {
            Action::Ping => Call::Ping,
            Action::Tso(_) => Call::Tso,
            Action::GetMembers => Call::GetMembers,
            Action::Placement(req) => req.call(),
        }
    }

    pub fn of(req: &ArchivedRequest) -> Result<Action, String> {
        Ok(match req {
            ArchivedRequest::Ping => Action::Ping,
            ArchivedRequest::Tso { count } => Action::Tso(count.to_native()),
            ArchivedRequest::GetMembers => Action::GetMembers,
            other => Action::Placement(Box::new(
                rkyv::deserialize::<Request, rkyv::rancor::Error>(other)
                    .map_err(|e| format!("request: {e}"))?,
            )),
        })
    }
}

/// How long a TSO request waits for a renewal or the clock before it is answered `Unavailable`.
const TSO_WAIT: Duration = Duration::from_secs(2);

pub async fn execute(action: Action, shared: &Shared, metrics: &CoreMetrics) -> Response {
    match action {
        Action::Ping => {
            metrics.request(RequestKind::Ping);
            Response::Ok(Reply::Pong)
        }
        Action::Tso(count) => {
            metrics.request(RequestKind::Tso);
            let response = tso(count, shared).await;
            match &response {
                Response::Ok(_) => metrics.tso_batch(count),
                Response::Err(e) => metrics.error(e),
            }
            response
        }
        Action::GetMembers => {
            metrics.request(RequestKind::GetMembers);
            Response::Ok(Reply::Members(shared.membership.reply()))
        }
        Action::Placement(req) => {
            metrics.request(match *req {
                Request::RegionHeartbeat { .. } => RequestKind::RegionHeartbeat,
                _ => RequestKind::Placement,
            });
            let response = super::placement::handle(*req, shared).await;
            if let Response::Err(e) = &response {
                metrics.error(e);
            }
            response
        }
    }
}

async fn tso(count: u32, shared: &Shared) -> Response {
    let deadline = tokio::time::Instant::now() + TSO_WAIT;
    loop {
        match shared.allocator.allocate(count) {
            Ok(range) => {
                return Response::Ok(Reply::Tso {
                    first: range.first.as_u64(),
                    count,
                })
            }
            Err(AllocError::InvalidCount) => {
                return Response::Err(ErrorReply::InvalidArgument(format!(
                    "tso count {count} outside 1..={}",
                    crate::tso::MAX_COUNT
                )))
            }
            Err(AllocError::NotServing) => return not_serving(shared),
            Err(AllocError::Exhausted) => {
                // Wait without touching the allocator's state so a stalled window is not
                // pushed further ahead by retries.
                while shared.allocator.is_serving() && !shared.allocator.can_fit(count) {
                    if tokio::time::Instant::now() >= deadline {
                        return Response::Err(ErrorReply::Unavailable(
                            "timestamp window exhausted; retry".into(),
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
    }
}

/// A node that does not serve is a follower (say who leads, if known) or a leader still
/// starting or stepping down (retry).
pub fn not_serving(shared: &Shared) -> Response {
    if shared.membership.is_leader() {
        Response::Err(ErrorReply::Unavailable("leader not serving yet".into()))
    } else {
        Response::Err(ErrorReply::NotLeader {
            leader: shared.membership.leader(),
        })
    }
}
