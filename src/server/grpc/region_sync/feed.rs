//! The leader's end of the region syncer: one follower's stream, from a snapshot or from an
//! index of this term's change log, then the log as it grows.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status, Streaming};

use super::{BATCH, KEEPALIVE, POLL, SNAPSHOT_KEY, STREAM_KEY};
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
    tokio::spawn(feed(shared, header, snapshot, stream, next, tx));
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

fn message(header: &pdpb::ResponseHeader, start: u64, routes: &[Arc<Route>]) -> Out {
    let regions: Vec<_> = routes.iter().map(|r| r.region()).collect();
    Ok(pdpb::SyncRegionResponse {
        header: Some(header.clone()),
        regions: regions.iter().map(convert::region_to).collect(),
        start_index: start,
        region_leaders: regions
            .iter()
            .map(|r| convert::leader_to(r).unwrap_or_default())
            .collect(),
    })
}

async fn feed(
    shared: Arc<Shared>,
    header: pdpb::ResponseHeader,
    snapshot: Option<Arc<Snapshot>>,
    stream: u64,
    mut next: u64,
    tx: mpsc::Sender<Out>,
) {
    if let Some(snapshot) = snapshot {
        let mut routes = snapshot.iter();
        loop {
            let chunk: Vec<Arc<Route>> = routes.by_ref().take(BATCH).cloned().collect();
            if chunk.is_empty() {
                break;
            }
            if tx.send(message(&header, 0, &chunk)).await.is_err() {
                return;
            }
        }
        // The snapshot is whole: records go on from `next`.
        if tx.send(message(&header, next, &[])).await.is_err() {
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
        match state.index.changes_since(stream, next, BATCH) {
            Since::Records(routes) if !routes.is_empty() => {
                let n = routes.len() as u64;
                if tx.send(message(&header, next, &routes)).await.is_err() {
                    return;
                }
                next += n;
                sent = Instant::now();
            }
            Since::Records(_) => {
                if sent.elapsed() >= KEEPALIVE {
                    if tx.send(message(&header, next, &[])).await.is_err() {
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
