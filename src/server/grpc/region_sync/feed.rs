//! The leader's end of the region syncer: one follower's stream, from a snapshot or from an
//! index of this term's change log, then the log as it grows.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status, Streaming};

use super::{BATCH, KEEPALIVE, POLL, SNAPSHOT_KEY, STREAM_KEY};
use crate::failpoint::{self, points};
use crate::kvproto::pdpb;
use crate::placement::{Route, Since, Snapshot};
use crate::server::grpc::convert;
use crate::server::Shared;

type Out = Result<pdpb::SyncRegionResponse, Status>;
pub type SyncStream = std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Out> + Send>>;

/// Serves one follower's `SyncRegions` (the caller checked its role): reads its one request,
/// then streams until this node stops leading, the follower falls out of the log's window,
/// the follower goes away or the node stops.
pub async fn sync_regions(
    shared: Arc<Shared>,
    request: GrpcRequest<Streaming<pdpb::SyncRegionRequest>>,
) -> Result<GrpcResponse<SyncStream>, Status> {
    let asked_stream = request
        .metadata()
        .get(STREAM_KEY)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let mut inbound = request.into_inner();
    let first = inbound
        .message()
        .await?
        .ok_or_else(|| Status::invalid_argument("no sync request"))?;
    let cluster_id = first.header.as_ref().map_or(0, |h| h.cluster_id);
    if cluster_id != shared.membership.cluster_id {
        return Err(Status::failed_precondition(format!(
            "mismatch cluster id, need {} but got {cluster_id}",
            shared.membership.cluster_id
        )));
    }
    serving(&shared)?;
    let state = &shared.placement;
    let from = first.start_index;
    let resumes = from != 0
        && matches!(
            state.index.changes_since(asked_stream, from, 0),
            Since::Records(_)
        );
    // Read before the snapshot: every record after it was published later.
    let taken_ms = state.clock.now_ms();
    let (snapshot, stream, next) = if resumes {
        (None, asked_stream, from)
    } else {
        let (snapshot, stream, next) = state.index.snapshot_at();
        (Some(snapshot), stream, next)
    };
    tracing::info!(
        follower = first.member.as_ref().map_or("", |m| m.name.as_str()),
        from,
        next,
        snapshot = snapshot.is_some(),
        "a follower syncs regions"
    );
    let (tx, rx) = mpsc::channel(16);
    let header = pdpb::ResponseHeader {
        cluster_id: shared.membership.cluster_id,
        ..Default::default()
    };
    let snapshotting = snapshot.is_some();
    tokio::spawn(feed(shared, header, (snapshot, taken_ms), stream, next, tx));
    let mut response = GrpcResponse::new(Box::pin(ReceiverStream::new(rx)) as SyncStream);
    response
        .metadata_mut()
        .insert(STREAM_KEY, MetadataValue::from(stream));
    if snapshotting {
        response
            .metadata_mut()
            .insert(SNAPSHOT_KEY, MetadataValue::from_static("1"));
    }
    Ok(response)
}

/// Only a leader that has loaded its term feeds followers.
fn serving(shared: &Shared) -> Result<(), Status> {
    if !shared.membership.is_leader() || !shared.placement.is_ready() {
        return Err(Status::unavailable("not leader"));
    }
    Ok(())
}

/// One message of the stream; `after_ms` is when the log was last seen without its records.
fn message(header: &pdpb::ResponseHeader, start: u64, routes: &[Arc<Route>], after_ms: u64) -> Out {
    let regions: Vec<_> = routes.iter().map(|r| r.region()).collect();
    Ok(pdpb::SyncRegionResponse {
        published_after_unix_ms: after_ms,
        header: Some(header.clone()),
        regions: regions.iter().map(convert::region_to).collect(),
        start_index: start,
        region_leaders: regions
            .iter()
            .map(|r| convert::leader_to(r).unwrap_or_default())
            .collect(),
    })
}

/// Streams the snapshot, if any, then the log from `next`. Each message of records carries the
/// last time the log was read with nothing past what was sent (the snapshot's, at first): its
/// records were all published after it, so the follower's lag figure is an upper bound. A
/// stream resumed from an index has no such time until it first catches up.
async fn feed(
    shared: Arc<Shared>,
    header: pdpb::ResponseHeader,
    (snapshot, taken_ms): (Option<Arc<Snapshot>>, u64),
    stream: u64,
    mut next: u64,
    tx: mpsc::Sender<Out>,
) {
    let mut caught_up_ms = if snapshot.is_some() { taken_ms } else { 0 };
    if let Some(snapshot) = snapshot {
        let mut routes = snapshot.iter();
        loop {
            let chunk: Vec<Arc<Route>> = routes.by_ref().take(BATCH).cloned().collect();
            if chunk.is_empty() {
                break;
            }
            if tx.send(message(&header, 0, &chunk, 0)).await.is_err() {
                return;
            }
        }
        // The snapshot is whole: records go on from `next`.
        if let Err(e) = failpoint::step(points::SYNC_SNAPSHOT_END).await {
            let _ = tx
                .send(Err(Status::unavailable(format!("snapshot cut: {e}"))))
                .await;
            return;
        }
        if tx.send(message(&header, next, &[], 0)).await.is_err() {
            return;
        }
    }
    let state = &shared.placement;
    let mut shutdown = shared.shutdown.clone();
    let mut sent = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = tx.closed() => return,
            _ = shutdown.wait_for(|s| *s) => return,
        }
        if let Err(status) = serving(&shared) {
            let _ = tx.send(Err(status)).await;
            return;
        }
        let polled_ms = state.clock.now_ms();
        match state.index.changes_since(stream, next, BATCH) {
            Since::Records(routes) if !routes.is_empty() => {
                let n = routes.len() as u64;
                let at = message(&header, next, &routes, caught_up_ms);
                if tx.send(at).await.is_err() {
                    return;
                }
                next += n;
                sent = Instant::now();
                // A short batch took all there was when the log was read.
                if routes.len() < BATCH {
                    caught_up_ms = polled_ms;
                }
            }
            Since::Records(_) => {
                caught_up_ms = polled_ms;
                if sent.elapsed() >= KEEPALIVE {
                    if tx.send(message(&header, next, &[], 0)).await.is_err() {
                        return;
                    }
                    sent = Instant::now();
                }
            }
            Since::Gone => {
                let _ = tx
                    .send(Err(Status::aborted(
                        "the follower fell out of the change log's window; sync again",
                    )))
                    .await;
                return;
            }
        }
    }
}
