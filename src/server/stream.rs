//! One long-lived bidirectional stream: read whatever frames have arrived, answer each in order,
//! write all the answers with one write. Pipelined requests thereby share one write and one
//! packet; a lone request is answered as soon as it is read.
//!
//! Bad input costs only this stream: a malformed frame gets an `InvalidArgument` reply and the
//! stream goes on; an oversized frame or a stream ended mid-frame resets it with a code.

use std::time::Instant;

use rkyv::util::AlignedVec;

use crate::admin::RequestKind;
use crate::auth::{Denied, Grants};
use crate::proto::{self, ErrorReply, FrameDecoder, FrameError, Request, Response, StreamCode};

use super::placement::{get_regions, handle, heartbeats};
use super::service::{execute, Op};
use super::Shared;

enum DecodeFailure {
    Frame(FrameError),
    Request(String),
    /// Read well, but the connection's certificate does not allow it.
    Denied(Denied),
}

impl std::fmt::Display for DecodeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeFailure::Frame(e) => write!(f, "{e}"),
            DecodeFailure::Request(e) => write!(f, "{e}"),
            DecodeFailure::Denied(e) => write!(f, "{e}"),
        }
    }
}

/// A request on its way to a reply.
enum Pending {
    Now(Response),
    Later(Op),
    /// The next of the read's heartbeat replies.
    Beat,
    /// The next of the read's GetRegion replies.
    Located,
}

const READ_CHUNK: usize = 64 * 1024;

pub async fn serve_stream(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    shared: std::sync::Arc<Shared>,
    core: usize,
    grants: Grants,
) {
    let metrics = shared.metrics.core(core);
    let mut shutdown = shared.shutdown.clone();
    let mut decoder = FrameDecoder::new();
    let mut scratch = AlignedVec::new();
    let mut out = Vec::with_capacity(4096);
    let mut actions = Vec::new();
    let mut pending = Vec::new();
    loop {
        let chunk = tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => {
                let _ = send.finish();
                let _ = recv.stop(StreamCode::ShuttingDown.code().into());
                return;
            }
            chunk = recv.read_chunk(READ_CHUNK, true) => chunk,
        };
        let chunk = match chunk {
            Ok(Some(chunk)) => chunk,
            Ok(None) => {
                if decoder.has_partial() {
                    let _ = send.reset(StreamCode::Truncated.code().into());
                } else {
                    let _ = send.finish();
                }
                return;
            }
            Err(e) => {
                tracing::debug!(core, "stream read ended: {e}");
                return;
            }
        };
        let arrived = Instant::now();
        decoder.extend(&chunk.bytes);
        let mut fatal = None;
        loop {
            match decoder.next_request() {
                Ok(None) => break,
                Ok(Some(Ok(req))) => actions.push(
                    Op::of_archived(req)
                        .map_err(DecodeFailure::Request)
                        .and_then(|a| match a.call().permitted(grants) {
                            Ok(()) => Ok(a),
                            Err(denied) => Err(DecodeFailure::Denied(denied)),
                        }),
                ),
                Ok(Some(Err(e))) => actions.push(Err(DecodeFailure::Frame(e))),
                Err(e) => {
                    fatal = Some(e);
                    break;
                }
            }
        }
        let answered = actions.len() as u64;
        // A read's region heartbeats are handled together (their own shard inline, the
        // others forwarded in one batch per core); replies still go out in request order.
        let mut beats = Vec::new();
        let mut keys = Vec::new();
        for action in actions.drain(..) {
            pending.push(match action {
                // Batched only once placement serves; before that each is answered alone
                // through `execute`, which says why it is not served.
                Ok(Op::Heartbeat(region, stats)) if shared.placement.is_ready() => {
                    metrics.request(RequestKind::RegionHeartbeat);
                    beats.push((*region, stats));
                    Pending::Beat
                }
                Ok(Op::Locate(key)) if shared.placement.is_ready() => {
                    metrics.request(RequestKind::Placement);
                    keys.push(key);
                    Pending::Located
                }
                Ok(op) => Pending::Later(op),
                Err(DecodeFailure::Denied(denied)) => {
                    let reply = ErrorReply::PermissionDenied(denied.to_string());
                    metrics.error(&reply);
                    Pending::Now(Response::Err(reply))
                }
                Err(e) => {
                    metrics.request(RequestKind::Malformed);
                    let reply = ErrorReply::InvalidArgument(e.to_string());
                    metrics.error(&reply);
                    Pending::Now(Response::Err(reply))
                }
            });
        }
        let mut beat_replies = if beats.is_empty() {
            Vec::new()
        } else {
            heartbeats(&shared.placement, core, beats).await
        }
        .into_iter();
        // Lookups are answered together from one snapshot, taken at the first of them and
        // again after any other request ran (it may have changed a route: a lookup sees
        // every request before it on its stream). Placement that does not serve reads yet
        // answers each one through the request path, which says why.
        let mut located: Option<std::vec::IntoIter<Response>> = None;
        let mut next_key = 0;
        for p in pending.drain(..) {
            let response = match p {
                Pending::Now(r) => r,
                Pending::Later(action) => {
                    located = None;
                    execute(action, &shared, metrics).await
                }
                Pending::Beat => {
                    let r = beat_replies.next().unwrap_or_else(|| {
                        Response::Err(ErrorReply::Unavailable("shutting down".into()))
                    });
                    if let Response::Err(e) = &r {
                        metrics.error(e);
                    }
                    r
                }
                Pending::Located => {
                    if located.is_none() {
                        located =
                            get_regions(&shared.placement, &keys[next_key..]).map(Vec::into_iter);
                    }
                    let key = std::mem::take(&mut keys[next_key]);
                    next_key += 1;
                    match located.as_mut().and_then(Iterator::next) {
                        Some(r) => r,
                        None => {
                            let r = handle(Request::GetRegion { key }, &shared).await;
                            if let Response::Err(e) = &r {
                                metrics.error(e);
                            }
                            r
                        }
                    }
                }
            };
            if let Err(e) = proto::encode(&response, &mut scratch, &mut out) {
                tracing::error!(core, "encoding a response failed: {e}");
                let _ = send.reset(StreamCode::Truncated.code().into());
                return;
            }
        }
        if !out.is_empty() {
            if send.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
            metrics.latency(arrived.elapsed(), answered);
        }
        decoder.trim();
        proto::trim(&mut out);
        proto::trim_aligned(&mut scratch);
        if let Some(e) = fatal {
            tracing::debug!(core, "closing a stream: {e}");
            let _ = send.reset(StreamCode::FrameTooLarge.code().into());
            let _ = recv.stop(StreamCode::FrameTooLarge.code().into());
            return;
        }
    }
}
