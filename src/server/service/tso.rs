//! Timestamps for one request: a range from the allocator, waiting (without touching the
//! allocator's state) for a renewal or the clock when the window is used up.

use std::time::Duration;

use crate::proto::{ErrorReply, Reply, Response};
use crate::server::Shared;
use crate::tso::AllocError;

/// How long a TSO request waits for a renewal or the clock before it is answered `Unavailable`.
const TSO_WAIT: Duration = Duration::from_secs(2);

pub async fn tso(count: u32, shared: &Shared) -> Response {
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
            Err(AllocError::NotServing) => return Response::Err(shared.membership.not_serving()),
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
