//! MetaStorage's Watch: one watch, opened at etcd inside the namespace, its events passed on
//! as PD passes them (an answer only when there are events; each key's revisions, version
//! and lease kept; a previous key and value when asked for). When etcd cancels the watch,
//! because its start revision was compacted or for another reason, the client gets PD's
//! `DATA_COMPACTED` or `UNKNOWN` answer and the stream ends with the reason.
//!
//! Bounded as the etcd proxy's streams are: `STREAM_BACKLOG` answers queued, after which etcd's
//! stream is not read (and etcd's sends stop, by HTTP/2 flow control). The watch ends when the
//! client goes away (dropping etcd's stream cancels it there) or the node stops.

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use super::{Admitted, MetaStorageService, Stream};
use crate::etcdpb::etcdserverpb::{
    self as etcd, watch_client::WatchClient, watch_request::RequestUnion, WatchCreateRequest,
};
use crate::etcdpb::mvccpb;
use crate::kvproto::meta_storagepb::{
    event::EventType, Error, ErrorType, Event, KeyValue, ResponseHeader, WatchRequest,
    WatchResponse,
};

/// Answers a watch may have queued before etcd's stream waits for the client.
const STREAM_BACKLOG: usize = 64;

/// The status a client sees on a watch cut by the node stopping: retry elsewhere.
fn stopping() -> Status {
    Status::unavailable("this Meridian node is stopping; reconnect to another member")
}

fn event(e: mvccpb::Event) -> Event {
    let r#type = if e.r#type == mvccpb::event::EventType::Delete as i32 {
        EventType::Delete
    } else {
        EventType::Put
    };
    Event {
        r#type: r#type as i32,
        kv: e.kv.map(|kv| KeyValue {
            key: kv.key,
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            version: kv.version,
            value: kv.value,
            lease: kv.lease,
        }),
        prev_kv: e.prev_kv.map(|kv| KeyValue {
            key: kv.key,
            value: kv.value,
            ..Default::default()
        }),
    }
}

/// What one answer from etcd becomes: an answer for the client (or none), and whether the
/// watch ends after it (with the status to end it with).
fn translate(
    service: &MetaStorageService,
    start_revision: i64,
    mut reply: etcd::WatchResponse,
) -> (Option<WatchResponse>, Option<Status>) {
    let revision = reply.header.as_ref().map_or(0, |h| h.revision);
    if reply.canceled {
        let (kind, message) =
            if reply.compact_revision > 0 && start_revision < reply.compact_revision {
                (
                    ErrorType::DataCompacted,
                    format!(
                        "required watch revision: {start_revision} is smaller than current \
                     compact/min revision {}.",
                        reply.compact_revision
                    ),
                )
            } else {
                (
                    ErrorType::Unknown,
                    format!("watch channel meet other error {}.", reply.cancel_reason),
                )
            };
        let answer = WatchResponse {
            header: Some(ResponseHeader {
                cluster_id: service.cluster_id(),
                revision,
                error: Some(Error {
                    r#type: kind as i32,
                    message: message.clone(),
                }),
            }),
            compact_revision: reply.compact_revision,
            events: Vec::new(),
        };
        return (Some(answer), Some(Status::unknown(message)));
    }
    service.namespace.watch_response(&mut reply);
    if reply.events.is_empty() {
        return (None, None);
    }
    let answer = WatchResponse {
        header: service.header(revision),
        compact_revision: reply.compact_revision,
        events: reply.events.into_iter().map(event).collect(),
    };
    (Some(answer), None)
}

pub(super) async fn open(
    service: &MetaStorageService,
    call: Admitted<WatchRequest>,
) -> Result<Stream<WatchResponse>, Status> {
    let req = call.message;
    let start_revision = req.start_revision;
    let mut create = WatchCreateRequest {
        key: req.key,
        range_end: req.range_end,
        start_revision,
        prev_kv: req.prev_kv,
        ..Default::default()
    };
    service.namespace.watch_create(&mut create);
    // The request side stays open for the watch's life: etcd ends a watch stream whose
    // client side has closed.
    let (requests, inbound) = mpsc::channel(1);
    requests
        .send(etcd::WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(create)),
        })
        .await
        .map_err(|_| Status::internal("the watch request was not queued"))?;
    let upstream = call.upstream.clone();
    let request = upstream
        .stream_request(ReceiverStream::new(inbound), call.hints)
        .await?;
    let opened = WatchClient::new(upstream.channel())
        .max_decoding_message_size(super::MAX_RESPONSE)
        .watch(request)
        .await;
    let replies = match opened {
        Ok(replies) => replies.into_inner(),
        Err(status) => {
            if upstream.refused_token(&status) {
                upstream.forget_token();
                return Err(Status::unavailable(format!(
                    "etcd refused Meridian's token; retry: {status}"
                )));
            }
            return Err(status);
        }
    };
    let (to_client, answers) = mpsc::channel(STREAM_BACKLOG);
    tokio::spawn(relay(
        service.clone(),
        start_revision,
        replies,
        requests,
        to_client,
    ));
    Ok(Box::pin(ReceiverStream::new(answers)))
}

async fn relay(
    service: MetaStorageService,
    start_revision: i64,
    mut replies: Streaming<etcd::WatchResponse>,
    _requests: mpsc::Sender<etcd::WatchRequest>,
    to_client: mpsc::Sender<Result<WatchResponse, Status>>,
) {
    let mut shutdown = service.shared.shutdown.clone();
    loop {
        let next = tokio::select! {
            next = replies.message() => next,
            // Returning drops etcd's stream, which cancels the watch there.
            _ = to_client.closed() => return,
            _ = shutdown.wait_for(|s| *s) => {
                let _ = to_client.try_send(Err(stopping()));
                return;
            }
        };
        let reply = match next {
            Ok(Some(reply)) => reply,
            Ok(None) => {
                let _ = to_client.try_send(Err(Status::unavailable(
                    "etcd ended the watch; watch again",
                )));
                return;
            }
            Err(status) => {
                tracing::debug!("MetaStorage watch stream from etcd ended: {status}");
                let _ = to_client.try_send(Err(status));
                return;
            }
        };
        if reply.canceled && service.upstream_refused(&reply.cancel_reason) {
            // etcd checks the token per watch: log in afresh for the client's next attempt.
            if let Some(upstream) = &service.upstream {
                upstream.forget_token();
            }
        }
        let (answer, end) = translate(&service, start_revision, reply);
        if let Some(answer) = answer {
            tokio::select! {
                sent = to_client.send(Ok(answer)) => if sent.is_err() { return },
                _ = shutdown.wait_for(|s| *s) => return,
            }
        }
        if let Some(status) = end {
            let _ = to_client.send(Err(status)).await;
            return;
        }
    }
}

impl MetaStorageService {
    /// Whether a watch canceled with `reason` was refused for etcd's token.
    fn upstream_refused(&self, reason: &str) -> bool {
        self.upstream
            .as_ref()
            .is_some_and(|u| u.refused_token(&Status::unknown(reason.to_string())))
    }
}
