//! Each core's shard lives in that core's thread (a thread-local): heartbeats that arrive on
//! the owning core are handled inline, with no queue and no wake-up; those for another core's
//! shard are forwarded in one batch per read through that core's bounded queue, and its shard
//! task handles them on its own thread. The shard task also runs the patrol on a timer, a
//! bounded batch of regions per tick. What the shard's calls leave for outside it (the merge
//! halves of other shards to end, the operators started and ended, to log) is taken after each batch of
//! calls. Nothing else ever touches a shard.

use std::cell::RefCell;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::messages::{Beat, BeatReply, Beats, OrderOp, ShardMsg};
use super::state::PlacementState;
use crate::placement::{Cluster, Order, PartnerEnd, Region, RegionError, RegionStats, Shard};
use crate::proto::ErrorReply;

thread_local! {
    /// This core's shard; `None` on threads that are not cores.
    static SHARD: RefCell<Option<Shard>> = const { RefCell::new(None) };
}

/// Handles heartbeats for this core's own shard, in order.
pub fn heartbeat_local(state: &PlacementState, core: usize, items: Vec<Beat>, out: &mut Beats) {
    let now = state.clock.now_ms();
    let view = state.view.load();
    let c = state.cluster(&view, now);
    SHARD.with(|cell| {
        let mut cell = cell.borrow_mut();
        let shard = cell.get_or_insert_with(Shard::new);
        // The batch's cache misses overlapped, before each heartbeat meets its own in turn.
        for (region, _) in &items {
            std::hint::black_box(shard.touch(region.id));
        }
        for (region, stats) in items {
            let reply = heartbeat(shard, state, &c, core, &region, stats, out);
            out.replies.push(reply);
        }
        after_calls(state, core, shard);
    })
}

/// One patrol tick on this core's shard. The steps it starts, and those still pending, are
/// pushed at once to the stream of the region leader's store (`push`); a step that cannot be
/// pushed goes with the region's next heartbeat reply. The tick's regions and time are
/// counted on `core`'s metrics: the patrol's share of a core is a figure of its own.
fn patrol(state: &PlacementState, core: usize) {
    if !state.is_ready() {
        return;
    }
    let began = std::time::Instant::now();
    let now = state.clock.now_ms();
    let view = state.view.load();
    let c = state.cluster(&view, now);
    let (checked, steps) = with_shard(|s| {
        let batch = state.cfg.patrol_batch_for(s.len());
        let checked = batch.min(s.len()) as u64;
        let steps = s.patrol(&c, batch, Some(&state.index), &mut || state.ids.try_alloc());
        after_calls(state, core, s);
        (checked, steps)
    });
    for (region, op) in steps {
        let leader_store = region.leader_peer().map(|p| p.store_id);
        if let Some(store) = leader_store {
            state.pushes.push(store, region, op);
        }
    }
    state
        .core_metrics(core)
        .patrol_tick(checked, began.elapsed());
}

/// Routes a shard takes in at a time from a new term's index before it yields its core (about
/// 10 ms of work on this machine's cores at 1 us a route).
const SHARE_CHUNK: usize = 8192;

/// Runs on core `index`: serves the messages other cores (and the control side) send to this
/// core's shard.
pub async fn run_shard(
    mut rx: mpsc::Receiver<ShardMsg>,
    state: Arc<PlacementState>,
    index: usize,
    mut shutdown: watch::Receiver<bool>,
) {
    SHARD.with(|cell| *cell.borrow_mut() = Some(Shard::new()));
    let mut batch = Vec::with_capacity(64);
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(
        state.cfg.patrol_interval_ms.max(1),
    ));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, 64) => if n == 0 { return },
            _ = tick.tick() => {
                patrol(&state, index);
                continue;
            }
            _ = shutdown.wait_for(|s| *s) => return,
        }
        for msg in batch.drain(..) {
            match msg {
                ShardMsg::Heartbeats { items, reply } => {
                    let mut out = Beats {
                        replies: Vec::with_capacity(items.len()),
                        durable_at: 0,
                    };
                    heartbeat_local(&state, index, items, &mut out);
                    let _ = reply.send(out);
                }
                ShardMsg::GetById { id, reply } => {
                    let found = with_shard(|s| s.get(id).map(|r| r.region()));
                    let _ = reply.send(found);
                }
                ShardMsg::Orders { orders, reply } => {
                    let view = state.view.load();
                    let c = state.cluster(&view, state.clock.now_ms());
                    let done = with_shard(|s| {
                        orders
                            .into_iter()
                            .map(|(id, op)| order(s, state.as_ref(), &c, id, op))
                            .collect()
                    });
                    let _ = reply.send(done);
                }
                ShardMsg::Sizes { ids, reply } => {
                    let found = with_shard(|s| {
                        ids.into_iter()
                            .filter_map(|id| s.report(id).map(|report| (id, report)))
                            .collect()
                    });
                    let _ = reply.send(found);
                }
                ShardMsg::StoreTotals { reply } => {
                    let _ = reply.send(with_shard(|s| s.store_totals().iter().collect()));
                }
                ShardMsg::OperatorStatus { id, reply } => {
                    let now = state.clock.now_ms();
                    let _ = reply.send(with_shard(|s| s.operator_status(id, now)));
                }
                ShardMsg::Admin { id, ask, reply } => {
                    let view = state.view.load();
                    let c = state.cluster(&view, state.clock.now_ms());
                    let started =
                        with_shard(|s| s.start_admin(id, &ask, &c, &mut || state.ids.try_alloc()));
                    let _ = reply.send(started.map(|step| push_first(&state, id, step)));
                }
                ShardMsg::MergeTarget { id, reply } => {
                    let now = state.clock.now_ms();
                    let _ = reply.send(with_shard(|s| s.merge_target(id, now)));
                }
                ShardMsg::AdminMerge { id, target, reply } => {
                    let view = state.view.load();
                    let c = state.cluster(&view, state.clock.now_ms());
                    let started = with_shard(|s| {
                        s.start_admin_merge(id, *target, &c, &mut || state.ids.try_alloc())
                    });
                    let _ = reply.send(started);
                }
                ShardMsg::ReleaseMerge {
                    id,
                    partner,
                    placed,
                    reply,
                } => {
                    let view = state.view.load();
                    let c = state.cluster(&view, state.clock.now_ms());
                    let released = with_shard(|s| s.release_admin_merge(id, partner, placed, &c));
                    let _ = reply.send(released.map(|step| push_first(&state, id, step)));
                }
                ShardMsg::EndMergeHalves { ends, reply } => {
                    let view = state.view.load();
                    let c = state.cluster(&view, state.clock.now_ms());
                    let ended: Vec<u64> = with_shard(|s| {
                        ends.into_iter()
                            .filter(|(id, partner)| s.end_merge_half(*id, *partner, &c))
                            .map(|(id, _)| id)
                            .collect()
                    });
                    if let Some(reply) = reply {
                        let _ = reply.send(ended);
                    }
                }
                ShardMsg::AdminMergeTarget {
                    id,
                    step,
                    kind,
                    reply,
                } => {
                    let view = state.view.load();
                    let c = state.cluster(&view, state.clock.now_ms());
                    let _ = reply.send(with_shard(|s| s.start_merge_target(id, *step, kind, &c)));
                }
                ShardMsg::CancelOperators { region, reply } => {
                    let view = state.view.load();
                    let c = state.cluster(&view, state.clock.now_ms());
                    // The partners of other shards' are ended by the caller, which waits for
                    // them, so that the cancel's answer is seen with both halves ended.
                    let _ = reply.send(with_shard(|s| {
                        (s.cancel_operators(region, &c), s.take_partner_ends())
                    }));
                }
                ShardMsg::EndedOperators { from_ms, reply } => {
                    let now = state.clock.now_ms();
                    let _ = reply.send(with_shard(|s| s.ended_operators(from_ms, now)));
                }
                ShardMsg::RunningOperators { region, reply } => {
                    let now = state.clock.now_ms();
                    let _ = reply.send(with_shard(|s| s.running_operators(region, now)));
                }
                ShardMsg::Forget(ids) => {
                    let view = state.view.load();
                    let c = state.cluster(&view, state.clock.now_ms());
                    with_shard(|s| ids.into_iter().for_each(|id| s.forget(id, &c)))
                }
                ShardMsg::Reset(snapshot) => {
                    let began = std::time::Instant::now();
                    let view = state.view.load();
                    let c = state.cluster(&view, state.clock.now_ms());
                    let n = state.shards.len();
                    let expected = snapshot.as_ref().map_or(0, |s| s.len() / n.max(1));
                    with_shard(|s| {
                        s.reset(std::iter::empty(), &c);
                        s.reserve(expected);
                    });
                    let Some(snapshot) = snapshot else { continue };
                    // In chunks, yielding the core between them: the core's endpoints serve
                    // routing (from the shared index) and timestamps meanwhile, so a new
                    // term's first answers do not wait for its shards. This shard's own
                    // messages wait until its share is in.
                    let mut mine = snapshot
                        .iter()
                        .filter(|r| crate::placement::owner(r.id(), n) == index);
                    let mut longest = std::time::Duration::ZERO;
                    loop {
                        let chunk_began = std::time::Instant::now();
                        let chunk: Vec<_> = mine.by_ref().take(SHARE_CHUNK).cloned().collect();
                        if chunk.is_empty() {
                            break;
                        }
                        with_shard(|s| s.take_in(chunk));
                        longest = longest.max(chunk_began.elapsed());
                        tokio::task::yield_now().await;
                    }
                    tracing::info!(
                        core = index,
                        regions = with_shard(|s| s.len()),
                        took_ms = began.elapsed().as_millis() as u64,
                        longest_chunk_ms = longest.as_millis() as u64,
                        "the shard took its share of the index"
                    );
                }
            }
        }
        with_shard(|s| after_calls(&state, index, s));
    }
}

/// What calls on core `core`'s shard left to do outside it: the merge halves of other shards
/// to end, and PD's lines in the log for each operator started or ended (`op_log`).
fn after_calls(state: &PlacementState, core: usize, shard: &mut Shard) {
    if shard.has_partner_ends() {
        end_partners_elsewhere(state, core, shard.take_partner_ends());
    }
    let events = shard.take_op_events();
    if !events.is_empty() {
        super::op_log::log(events);
    }
}

/// One order on this core's shard; a scatter counts its picks in the term's groups.
fn order(
    shard: &mut Shard,
    state: &PlacementState,
    c: &Cluster,
    id: u64,
    op: OrderOp,
) -> Result<crate::placement::Ordered, crate::placement::OrderRefused> {
    let mut new_peer_id = || state.ids.try_alloc();
    let ordered = match op {
        OrderOp::Scatter {
            group,
            skip_store_limit,
        } => {
            let mut groups = state.scatter_groups();
            let order = Order::Scatter {
                group: &group,
                groups: &mut groups,
                skip_store_limit,
            };
            shard.order_beside_admin(id, order, c, &mut new_peer_id)
        }
        OrderOp::Split(keys) => {
            shard.order_beside_admin(id, Order::Split { keys }, c, &mut new_peer_id)
        }
    };
    if let Ok(crate::placement::Ordered::Started(step)) = &ordered {
        push_first(state, id, step.clone());
    }
    ordered
}

/// An operator's first step goes to the leader's stream at once, as PD dispatches an operator
/// it creates; it also goes with the region's next heartbeat reply.
fn push_first(state: &PlacementState, id: u64, step: Option<crate::placement::Operator>) {
    let (Some(step), Some(route)) = (step, state.index.get(id)) else {
        return;
    };
    let region = route.region();
    if let Some(store) = region.leader_peer().map(|p| p.store_id) {
        state.pushes.push(store, region, step);
    }
}

fn with_shard<T>(f: impl FnOnce(&mut Shard) -> T) -> T {
    SHARD.with(|cell| f(cell.borrow_mut().get_or_insert_with(Shard::new)))
}

fn heartbeat(
    shard: &mut Shard,
    state: &PlacementState,
    c: &Cluster,
    index: usize,
    region: &Region,
    stats: RegionStats,
    beats: &mut Beats,
) -> BeatReply {
    if !state.is_ready() {
        return Err(Box::new(ErrorReply::Unavailable(
            "placement is not being served here now".into(),
        )));
    }
    if let Some(id) = std::iter::once(region.id)
        .chain(region.peers.iter().map(|p| p.id))
        .find(|id| !state.ids.may_exist(*id))
    {
        return Err(Box::new(ErrorReply::InvalidArgument(format!(
            "region {}: id {id} was never allocated",
            region.id
        ))));
    }
    match shard.heartbeat(region, stats, c, &state.index, &mut || {
        state.ids.try_alloc()
    }) {
        Ok(outcome) => {
            // A change to what is persisted is acknowledged once it is durable (the caller
            // waits for `durable_at` before replying).
            if let Some(route) = &outcome.persist {
                beats.durable_at = beats.durable_at.max(state.dirty.region(route.id()));
            }
            if !outcome.removed.is_empty() {
                for id in &outcome.removed {
                    beats.durable_at = beats.durable_at.max(state.dirty.region(*id));
                }
                forget_elsewhere(state, Some(index), outcome.removed);
            }
            Ok(outcome.operator)
        }
        Err(e) => Err(Box::new(region_error(e))),
    }
}

pub fn region_error(e: RegionError) -> ErrorReply {
    match e {
        RegionError::StaleEpoch { .. } => ErrorReply::StaleEpoch(e.to_string()),
        RegionError::Invalid(..) => ErrorReply::InvalidArgument(e.to_string()),
    }
}

/// Tells the owners of the merge halves in `ends` (each `(region, partner)`) to end them,
/// their partners having ended undone on core `done`, which ended its own. Never waits: a full
/// queue gets them from a task.
pub fn end_partners_elsewhere(state: &PlacementState, done: usize, ends: Vec<PartnerEnd>) {
    for (i, ends) in by_shard(state, ends).into_iter().enumerate() {
        if i == done || ends.is_empty() {
            continue;
        }
        let msg = ShardMsg::EndMergeHalves { ends, reply: None };
        if let Err(mpsc::error::TrySendError::Full(msg)) = state.shards[i].try_send(msg) {
            let tx = state.shards[i].clone();
            tokio::spawn(async move {
                let _ = tx.send(msg).await;
            });
        }
    }
}

/// `ends` by the shard that owns each region to end.
pub fn by_shard(state: &PlacementState, ends: Vec<PartnerEnd>) -> Vec<Vec<PartnerEnd>> {
    let n = state.shards.len();
    let mut by_shard: Vec<Vec<PartnerEnd>> = vec![Vec::new(); n];
    for (id, partner) in ends {
        by_shard[crate::placement::owner(id, n)].push((id, partner));
    }
    by_shard
}

/// Tells the owners of displaced regions (other than shard `done`, which already forgot them)
/// to drop them. The index no longer holds them either way; this frees their memory.
pub fn forget_elsewhere(state: &PlacementState, done: Option<usize>, mut removed: Vec<u64>) {
    // A region a batch displaced and then applied again (a split's original region, which
    // keeps part of its range) is not gone: its owner keeps it, and the operator it runs.
    removed.retain(|id| state.index.get(*id).is_none());
    let n = state.shards.len();
    let mut by_shard: Vec<Vec<u64>> = vec![Vec::new(); n];
    for id in removed {
        by_shard[crate::placement::owner(id, n)].push(id);
    }
    for (i, ids) in by_shard.into_iter().enumerate() {
        if Some(i) == done || ids.is_empty() {
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
