//! One long-lived bidirectional stream: read whatever frames have arrived, answer each in order,
//! write all the answers with one write. Pipelined requests thereby share one write and one
//! packet; a lone request is answered as soon as it is read.
//!
//! Bad input costs only this stream: a malformed frame gets an `InvalidArgument` reply and the
//! stream goes on; an oversized frame or a stream ended mid-frame resets it with a code.

use std::time::Instant;

use rkyv::util::AlignedVec;

use crate::admin::RequestKind;
use crate::auth::Caller;
use crate::proto::{self, ErrorReply, FrameDecoder, StreamCode};

use super::service::{admit, execute_batch, BatchRoom, Op, Replies};
use super::Shared;

const READ_CHUNK: usize = 64 * 1024;

pub async fn serve_stream(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    shared: std::sync::Arc<Shared>,
    core: usize,
    caller: Caller,
) {
    let metrics = shared.metrics.core(core);
    let mut shutdown = shared.shutdown.clone();
    let mut decoder = FrameDecoder::new();
    let mut scratch = AlignedVec::new();
    let mut out = Vec::with_capacity(4096);
    let mut batch = Vec::new();
    let mut room = BatchRoom::default();
    // Set by `AllowFollowerHandle`: the stream's routing reads after it may be answered by a
    // follower in sync, as a gRPC call carrying PD's `pd-allow-follower-handle` may.
    let mut follower_handle = false;
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
                Ok(Some(Ok(req))) => batch.push(match Op::of_archived(req) {
                    Ok((call, op)) => call
                        .permitted(caller.grants)
                        .map_err(|denied| ErrorReply::PermissionDenied(denied.to_string()))
                        .and_then(|()| {
                            follower_handle |= matches!(op, Op::AllowFollowerHandle);
                            let op = if follower_handle {
                                op.allowing_follower()
                            } else {
                                op
                            };
                            admit(op, &caller, &shared)
                        }),
                    Err(e) => {
                        metrics.request(RequestKind::Malformed);
                        Err(ErrorReply::InvalidArgument(format!("request: {e}")))
                    }
                }),
                Ok(Some(Err(e))) => {
                    metrics.request(RequestKind::Malformed);
                    batch.push(Err(ErrorReply::InvalidArgument(e.to_string())));
                }
                Err(e) => {
                    fatal = Some(e);
                    break;
                }
            }
        }
        let answered = batch.len() as u64;
        let mut encoder = Encoder {
            scratch: &mut scratch,
            out: &mut out,
            failed: None,
        };
        execute_batch(
            &mut batch,
            &mut encoder,
            &mut room,
            &shared,
            Some(core),
            metrics,
        )
        .await;
        if let Some(e) = encoder.failed {
            tracing::error!(core, "encoding a response failed: {e}");
            let _ = send.reset(StreamCode::Truncated.code().into());
            return;
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

/// A batch's replies encoded onto the stream's write as they come; the first failure ends
/// the stream, and nothing after it is encoded.
struct Encoder<'a> {
    scratch: &'a mut AlignedVec,
    out: &'a mut Vec<u8>,
    failed: Option<proto::FrameError>,
}

impl Replies for Encoder<'_> {
    fn reply(&mut self, response: proto::Response) {
        if self.failed.is_none() {
            if let Err(e) = proto::encode(&response, self.scratch, self.out) {
                self.failed = Some(e);
            }
        }
    }
}
