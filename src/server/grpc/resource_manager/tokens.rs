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
use crate::kvproto::resource_manager::{
    token_bucket_request, TokenBucketsRequest, TokenBucketsResponse,
};

/// Answers a stream may have queued before its reader waits for the client.
const STREAM_BACKLOG: usize = 64;

/// Most group requests one message may carry (a TiDB sends one per active group).
const MAX_REQUESTS: usize = 4096;

/// Most RU items one message may carry over all its group requests (a TiDB sends one per
/// group: RU is the only kind). Each is answered with a grant about three times its size, so
/// without this bound a 4 MiB message of items would be answered with some 12 MiB, and a
/// client that does not read would have `STREAM_BACKLOG` such answers held per stream.
const MAX_ITEMS: usize = MAX_REQUESTS;

/// A message's size against the bounds, before anything is granted.
fn check_size(message: &TokenBucketsRequest) -> Result<(), Status> {
    if message.requests.len() > MAX_REQUESTS {
        return Err(Status::invalid_argument(format!(
            "a TokenBucketsRequest names {} groups, more than {MAX_REQUESTS}",
            message.requests.len()
        )));
    }
    let items: usize = message
        .requests
        .iter()
        .map(|r| match &r.request {
            Some(token_bucket_request::Request::RuItems(ru)) => ru.request_r_u.len(),
            _ => 0,
        })
        .sum();
    if items > MAX_ITEMS {
        return Err(Status::invalid_argument(format!(
            "a TokenBucketsRequest asks for {items} RU items, more than {MAX_ITEMS}"
        )));
    }
    Ok(())
}

/// The answer to one message.
fn answer(
    service: &ResourceManagerService,
    message: &TokenBucketsRequest,
) -> Result<TokenBucketsResponse, Status> {
    check_size(message)?;
    let groups = service.groups();
    let responses = service.serving(|registry| {
        let now = groups.now();
        message
            .requests
            .iter()
            .filter_map(|r| {
                registry.acquire(
                    r,
                    message.target_request_period_ms,
                    message.client_unique_id,
                    now,
                )
            })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvproto::resource_manager::token_bucket_request::RequestRu;
    use crate::kvproto::resource_manager::{RequestUnitItem, TokenBucketRequest};

    fn asking(groups: usize, items_each: usize) -> TokenBucketsRequest {
        let request = TokenBucketRequest {
            resource_group_name: "default".into(),
            request: Some(token_bucket_request::Request::RuItems(RequestRu {
                request_r_u: vec![RequestUnitItem::default(); items_each],
            })),
            ..Default::default()
        };
        TokenBucketsRequest {
            requests: vec![request; groups],
            target_request_period_ms: 5000,
            ..Default::default()
        }
    }

    #[test]
    fn a_message_is_bounded_in_groups_and_in_items() {
        assert!(check_size(&asking(MAX_REQUESTS, 1)).is_ok(), "a TiDB's");
        let groups = check_size(&asking(MAX_REQUESTS + 1, 1)).unwrap_err();
        assert_eq!(groups.code(), tonic::Code::InvalidArgument);
        // One group asking for many items: what a 4 MiB message holds.
        let items = check_size(&asking(1, 300_000)).unwrap_err();
        assert_eq!(items.code(), tonic::Code::InvalidArgument);
        assert!(
            items.message().contains("300000 RU items"),
            "{}",
            items.message()
        );
        assert!(check_size(&asking(2, MAX_ITEMS / 2 + 1)).is_err());
    }
}
