//! AcquireTokenBuckets: each message a client sends is answered, in order, with one message
//! holding a grant for each RU item of each group it names (PD skips a group that does not
//! exist, and a background request). The whole message is served under one hold of the
//! registry, with one reading of the clock. A member that does not serve ends the stream with
//! PD's "not leader", so the client reconnects to the leader; so does a stopping node.
//!
//! Bounded as the other streams are: `STREAM_BACKLOG` answers queued, after which the stream
//! is not read until the client takes them.

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use super::{not_leader, ResourceManagerService, Stream};
use crate::kvproto::resource_manager::{TokenBucketsRequest, TokenBucketsResponse};

/// Answers a stream may have queued before its reader waits for the client.
const STREAM_BACKLOG: usize = 64;

/// Most group requests one message may carry (a TiDB sends one per active group).
const MAX_REQUESTS: usize = 4096;

/// The answer to one message.
fn answer(
    service: &ResourceManagerService,
    message: &TokenBucketsRequest,
) -> Result<TokenBucketsResponse, Status> {
    if message.requests.len() > MAX_REQUESTS {
        return Err(Status::invalid_argument(format!(
            "a TokenBucketsRequest names {} groups, more than {MAX_REQUESTS}",
            message.requests.len()
        )));
    }
    let groups = service.groups();
    let responses = service.serving(|registry| {
        let now = groups.now();
        message
            .requests
            .iter()
            .filter_map(|r| registry.acquire(r, message.target_request_period_ms, now))
            .collect()
    })?;
    Ok(TokenBucketsResponse {
        error: None,
        responses,
    })
}

pub(super) fn serve(
    service: ResourceManagerService,
    mut inbound: Streaming<TokenBucketsRequest>,
) -> Stream<TokenBucketsResponse> {
    let (tx, rx) = mpsc::channel(STREAM_BACKLOG);
    let mut shutdown = service.shared.shutdown.clone();
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                next = inbound.message() => next,
                _ = shutdown.wait_for(|s| *s) => {
                    let _ = tx.try_send(Err(not_leader()));
                    return;
                }
            };
            let message = match next {
                Ok(Some(message)) => message,
                Ok(None) => return,
                Err(status) => {
                    tracing::debug!("AcquireTokenBuckets stream ended: {status}");
                    return;
                }
            };
            let reply = answer(&service, &message);
            let end = reply.is_err();
            if tx.send(reply).await.is_err() || end {
                return;
            }
        }
    });
    Box::pin(ReceiverStream::new(rx))
}
