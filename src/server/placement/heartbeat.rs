//! Region heartbeats: one alone, or a batch fanned out by owning core. Those for the calling
//! core's own shard are handled inline; the rest go as one batch per owning core through its
//! bounded queue (waiting for room when it is full) while this core does its own. A reply
//! whose heartbeat changed what is persisted waits until that change is durable.

use tokio::sync::oneshot;

use super::answer::{unavailable, WAIT};
use super::messages::{beat_response, Beat, BeatReply, Beats, ShardMsg};
use super::shard_task::heartbeat_local;
use super::state::{PlacementState, RECONCILING};
use crate::placement::{Region, RegionStats};
use crate::proto::{ErrorReply, Response};

/// One heartbeat, through its shard's queue like a forwarded one.
pub async fn one(state: &PlacementState, region: Box<Region>, stats: RegionStats) -> Response {
    let mut replies = Vec::with_capacity(1);
    batch(state, None, vec![(region, stats)], &mut replies).await;
    replies
        .pop()
        .unwrap_or_else(|| unavailable("shutting down"))
}

/// Where one heartbeat of a batch is answered.
#[derive(Clone, Copy)]
enum Slot {
    /// Inline, on the calling core's shard: the n-th of those.
    Local(usize),
    /// By core `shard`'s task: the `pos`-th of its batch.
    Remote { shard: usize, pos: usize },
    /// Refused before any shard saw it: the n-th refusal.
    Refused(usize),
}

/// Heartbeats answered in order, onto `out` (the caller's, reused batch after batch). `core`
/// is the calling core, whose own shard is handled inline; `None` from a thread that is no
/// core (the gRPC front end), which forwards all.
pub async fn batch(
    state: &PlacementState,
    core: Option<usize>,
    items: Vec<Beat>,
    out: &mut Vec<Response>,
) {
    if !state.writes_open().await {
        out.extend(items.iter().map(|_| unavailable(RECONCILING)));
        return;
    }
    let n = state.shards.len();
    let mut slots = Vec::with_capacity(items.len());
    let mut local = Vec::new();
    let mut remote: Vec<Vec<Beat>> = vec![Vec::new(); n];
    let mut refused: Vec<BeatReply> = Vec::new();
    for (region, stats) in items {
        let shard = crate::placement::owner(region.id, n);
        if let Err(e) = state.limits.check_region(&region) {
            slots.push(Slot::Refused(refused.len()));
            refused.push(Err(Box::new(ErrorReply::LimitExceeded(e.to_string()))));
        } else if Some(shard) == core {
            slots.push(Slot::Local(local.len()));
            local.push((region, stats));
        } else {
            slots.push(Slot::Remote {
                shard,
                pos: remote[shard].len(),
            });
            remote[shard].push((region, stats));
        }
    }
    let mut waiting: Vec<Option<oneshot::Receiver<Beats>>> = Vec::with_capacity(n);
    for (shard, items) in remote.into_iter().enumerate() {
        if items.is_empty() {
            waiting.push(None);
            continue;
        }
        let (reply, rx) = oneshot::channel();
        let sent = state.shards[shard]
            .send(ShardMsg::Heartbeats { items, reply })
            .await;
        waiting.push(sent.ok().map(|_| rx));
    }
    let mut local_beats = Beats {
        replies: Vec::with_capacity(local.len()),
        durable_at: 0,
    };
    if let Some(core) = core.filter(|_| !local.is_empty()) {
        heartbeat_local(state, core, local, &mut local_beats);
    }
    let mut durable_at = local_beats.durable_at;
    let mut done_local = local_beats.replies;
    let mut done_remote: Vec<Vec<BeatReply>> = Vec::with_capacity(n);
    for rx in waiting {
        let beats = match rx {
            Some(rx) => rx.await.unwrap_or_default(),
            None => Beats::default(),
        };
        durable_at = durable_at.max(beats.durable_at);
        done_remote.push(beats.replies);
    }
    // A heartbeat that changed what is persisted (an epoch, a displaced region) is answered
    // once the change is durable. If it is not in time, the replies say so: stores heartbeat
    // again, and the change, still in the map, is persisted meanwhile.
    let durable = durable_at == 0 || state.dirty.wait(durable_at, WAIT).await;
    out.extend(slots.into_iter().map(|slot| {
        let done = match slot {
            Slot::Local(pos) => done_local.get_mut(pos),
            Slot::Refused(pos) => refused.get_mut(pos),
            Slot::Remote { shard, pos } => done_remote.get_mut(shard).and_then(|d| d.get_mut(pos)),
        };
        match done.map(|r| std::mem::replace(r, Ok(None))) {
            Some(Ok(_)) if !durable => unavailable("a change is not yet durable; heartbeat again"),
            Some(r) => beat_response(r),
            None => unavailable("shutting down"),
        }
    }));
}
