//! What the PD-style gRPC clients (`grpc_tso`, `grpc_router`) share: one dispatcher per
//! client that gathers the callers queued while the last batch was in flight into the next
//! batch (up to [`MAX_BATCH`]), as PD's own client does; opens the stream again after a batch
//! failed; and reads a batch's reply without waiting forever on a leader that went silent.
//! What a batch asks and how its callers are answered belongs to each client ([`BatchStream`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use meridian::kvproto::{metapb, pdpb};
use meridian::tls::Trust;

/// Most callers merged into one request (PD's client caps both its TSO and router batches at
/// 10,000).
pub const MAX_BATCH: usize = 10_000;

/// A leader that sends nothing for this long while a batch waits is taken for paused or cut
/// off, as the QUIC client's `silence_timeout` does: the batch fails and the next one finds
/// the leader again.
pub const SILENCE: Duration = Duration::from_millis(2500);

/// Why a caller of a PD-style gRPC client got no answer. A failed batch fails each of its
/// callers with the same error, hence `Clone`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The client's dispatcher is gone (the client was dropped, or its runtime stopped).
    #[error("dispatcher stopped")]
    Stopped,
    /// The last batch failed and no stream on a leader could be opened for this one.
    #[error("reconnecting: {0:#}")]
    Reconnecting(Arc<anyhow::Error>),
    /// The request could not be sent: the stream (named) is closed on our side.
    #[error("{0} stream closed")]
    Closed(&'static str),
    /// The server ended the stream (named).
    #[error("{0} stream ended")]
    Ended(&'static str),
    /// The stream (named) failed with a gRPC status.
    #[error("{what} stream failed: {status}")]
    Failed {
        what: &'static str,
        status: tonic::Status,
    },
    /// Nothing came on the stream (named) for [`SILENCE`] while a batch waited.
    #[error("{0} stream silent for {SILENCE:?}")]
    Silent(&'static str),
    /// The server refused the batch (the reply header's error).
    #[error("refused: {kind:?}: {message}")]
    Refused {
        kind: pdpb::ErrorType,
        message: String,
    },
    /// The reply does not answer what was asked (what is wrong with it, in words).
    #[error("malformed reply: {0}")]
    Malformed(String),
    /// A region lookup's answer does not hold the key: a wrong route, counted, never used.
    #[error("key {key:x?} routed to region {region:?} under id {id}")]
    Misrouted {
        key: Vec<u8>,
        id: u64,
        region: Box<metapb::Region>,
    },
}

/// A stream that answers a whole batch of callers in one round trip.
pub trait BatchStream: Sized + Send + 'static {
    /// A caller's question and where its answer goes.
    type Caller: Send + 'static;

    /// A stream on the leader, found through `GetMembers` on the endpoints.
    fn open(
        endpoints: &[String],
        trust: &Trust,
    ) -> impl Future<Output = anyhow::Result<Self>> + Send;

    /// Answers every caller of `batch` (leaving it empty); `false` if the stream failed or was
    /// refused, so the next batch opens a new one.
    fn serve(&mut self, batch: &mut Vec<Self::Caller>) -> impl Future<Output = bool> + Send;

    /// Answers a caller that no stream could serve.
    fn fail(caller: Self::Caller, why: CallError);
}

/// Starts `stream`'s dispatcher on the current runtime; callers are sent to the returned end.
pub fn start<S: BatchStream>(
    stream: S,
    endpoints: Vec<String>,
    trust: Trust,
) -> mpsc::UnboundedSender<S::Caller> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(dispatch(rx, stream, endpoints, trust));
    tx
}

async fn dispatch<S: BatchStream>(
    mut callers: mpsc::UnboundedReceiver<S::Caller>,
    mut stream: S,
    endpoints: Vec<String>,
    trust: Trust,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut healthy = true;
    while gather(&mut callers, &mut batch, MAX_BATCH).await {
        if !healthy {
            match S::open(&endpoints, &trust).await {
                Ok(s) => stream = s,
                Err(e) => {
                    let why = CallError::Reconnecting(Arc::new(e));
                    for caller in batch.drain(..) {
                        S::fail(caller, why.clone());
                    }
                    continue;
                }
            }
        }
        healthy = stream.serve(&mut batch).await;
    }
}

/// Waits for one caller, then takes every caller already queued, up to `max` in all; `false`
/// once every sender is gone and nothing is queued.
pub async fn gather<T>(
    callers: &mut mpsc::UnboundedReceiver<T>,
    batch: &mut Vec<T>,
    max: usize,
) -> bool {
    let Some(first) = callers.recv().await else {
        return false;
    };
    batch.push(first);
    while batch.len() < max {
        match callers.try_recv() {
            Ok(caller) => batch.push(caller),
            Err(_) => break,
        }
    }
    true
}

/// The next message on a reply stream; an error once the stream fails, ends or stays silent
/// for [`SILENCE`].
pub async fn reply<T>(
    replies: &mut tonic::Streaming<T>,
    what: &'static str,
) -> Result<T, CallError> {
    match tokio::time::timeout(SILENCE, replies.message()).await {
        Ok(Ok(Some(r))) => Ok(r),
        Ok(Ok(None)) => Err(CallError::Ended(what)),
        Ok(Err(status)) => Err(CallError::Failed { what, status }),
        Err(_) => Err(CallError::Silent(what)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn takes_what_is_queued_up_to_max_then_ends_with_the_senders() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        for i in 0..5 {
            tx.send(i).unwrap();
        }
        let mut batch = Vec::new();
        assert!(gather(&mut rx, &mut batch, 3).await);
        assert_eq!(batch, [0, 1, 2]);
        batch.clear();
        assert!(gather(&mut rx, &mut batch, 3).await);
        assert_eq!(batch, [3, 4]);
        drop(tx);
        batch.clear();
        assert!(!gather(&mut rx, &mut batch, 3).await);
        assert!(batch.is_empty());
    }
}
