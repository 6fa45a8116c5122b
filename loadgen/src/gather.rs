//! What the PD-style gRPC clients (`grpc_tso`, `grpc_router`) share: gathering the callers
//! queued while the last batch was in flight into the next batch, as PD's own client does, and
//! reading a batch's reply without waiting forever on a leader that went silent. It owns no
//! stream and no retry policy; each client keeps its own.

use std::time::Duration;

use tokio::sync::mpsc;

/// A leader that sends nothing for this long while a batch waits is taken for paused or cut
/// off, as the QUIC client's `silence_timeout` does: the batch fails and the next one finds
/// the leader again.
pub const SILENCE: Duration = Duration::from_millis(2500);

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
pub async fn reply<T>(replies: &mut tonic::Streaming<T>, what: &str) -> Result<T, String> {
    match tokio::time::timeout(SILENCE, replies.message()).await {
        Ok(Ok(Some(r))) => Ok(r),
        Ok(Ok(None)) => Err(format!("{what} stream ended")),
        Ok(Err(status)) => Err(status.to_string()),
        Err(_) => Err(format!("{what} stream silent for {SILENCE:?}")),
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
