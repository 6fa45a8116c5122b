//! The task that owns one core's shard. Every message for a region of this shard arrives on
//! its bounded queue, from this core or forwarded from another, and is handled in arrival
//! order; nothing else ever touches the shard.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use super::persist::PersistOp;
use super::state::PlacementState;
use crate::placement::{Region, RegionError, RegionStats, Route, Shard, StoreView};
use crate::proto::{ErrorReply, Reply, Response};

pub enum ShardMsg {
    Heartbeat {
        region: Region,
        stats: RegionStats,
        reply: oneshot::Sender<Response>,
    },
    GetById {
        id: u64,
        reply: oneshot::Sender<Option<Region>>,
    },
    /// Regions another shard's change displaced.
    Forget(Vec<u64>),
    /// Everything this shard owns from now on (a new term's load; empty on stepping down).
    Reset(Vec<Arc<Route>>),
}

/// Messages handled per wake-up; the clock and store view are read once per batch.
const BATCH: usize = 256;

pub async fn run_shard(
    mut rx: mpsc::Receiver<ShardMsg>,
    state: Arc<PlacementState>,
    index: usize,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut shard = Shard::new(state.cfg);
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, BATCH) => if n == 0 { return },
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let now = state.clock.now_ms();
        let view = state.view.load();
        for msg in batch.drain(..) {
            match msg {
                ShardMsg::Heartbeat {
                    region,
                    stats,
                    reply,
                } => {
                    let response = heartbeat(&mut shard, &state, &view, index, region, stats, now);
                    let _ = reply.send(response);
                }
                ShardMsg::GetById { id, reply } => {
                    let _ = reply.send(shard.get(id).map(|r| r.region.clone()));
                }
                ShardMsg::Forget(ids) => ids.into_iter().for_each(|id| shard.forget(id)),
                ShardMsg::Reset(routes) => shard.reset(routes),
            }
        }
    }
}

fn heartbeat(
    shard: &mut Shard,
    state: &PlacementState,
    view: &StoreView,
    index: usize,
    region: Region,
    stats: RegionStats,
    now: u64,
) -> Response {
    if !state.is_ready() {
        return Response::Err(ErrorReply::Unavailable(
            "placement is not being served here now".into(),
        ));
    }
    if let Some(id) = std::iter::once(region.id)
        .chain(region.peers.iter().map(|p| p.id))
        .find(|id| !state.ids.may_exist(*id))
    {
        return Response::Err(ErrorReply::InvalidArgument(format!(
            "region {}: id {id} was never allocated",
            region.id
        )));
    }
    match shard.heartbeat(region, stats, now, &state.index, view, &mut || {
        state.ids.try_alloc()
    }) {
        Ok(outcome) => {
            if let Some(route) = &outcome.persist {
                let _ = state.persist.send(PersistOp::Region(route.region.id));
            }
            if !outcome.removed.is_empty() {
                for id in &outcome.removed {
                    let _ = state.persist.send(PersistOp::Region(*id));
                }
                forget_elsewhere(state, index, outcome.removed);
            }
            Response::Ok(Reply::RegionHeartbeat {
                operator: outcome.operator,
            })
        }
        Err(e) => Response::Err(region_error(e)),
    }
}

pub fn region_error(e: RegionError) -> ErrorReply {
    match e {
        RegionError::StaleEpoch { .. } => ErrorReply::StaleEpoch(e.to_string()),
        RegionError::Invalid(..) => ErrorReply::InvalidArgument(e.to_string()),
    }
}

/// Tells the owners of displaced regions (other than shard `index`, which already forgot
/// them) to drop them. The index no longer holds them either way; this frees their memory.
pub fn forget_elsewhere(state: &PlacementState, index: usize, removed: Vec<u64>) {
    let n = state.shards.len();
    let mut by_shard: Vec<Vec<u64>> = vec![Vec::new(); n];
    for id in removed {
        by_shard[(id % n as u64) as usize].push(id);
    }
    for (i, ids) in by_shard.into_iter().enumerate() {
        if i == index || ids.is_empty() {
            continue;
        }
        if let Err(mpsc::error::TrySendError::Full(msg)) =
            state.shards[i].try_send(ShardMsg::Forget(ids))
        {
            let tx = state.shards[i].clone();
            tokio::spawn(async move {
                let _ = tx.send(msg).await;
            });
        }
    }
}
