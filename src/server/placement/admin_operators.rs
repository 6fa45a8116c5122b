//! PD's operator API for the HTTP front end (`/operators`): an admin operator started on a
//! region by its owning shard (its first step pushed to the leader's stream at once, by the
//! shard task), a region's operator or every operator cancelled, and the operators running
//! and those that ended lately, gathered from every shard. Nothing here persists: PD keeps
//! operators in memory too. The checks and the plans are `placement::schedule::admin`'s; the
//! shard's rule for an operator already running is `placement::shard`'s.

use tokio::sync::{mpsc, oneshot};

use super::messages::ShardMsg;
use super::shard_task::by_shard;
use super::state::PlacementState;
use crate::failpoint::{self, points};
use crate::placement::schedule::{AdminAsk, AdminRefused};
use crate::placement::{OpRecord, PartnerEnd, RunningOp};
use crate::proto::ErrorReply;

fn shut() -> ErrorReply {
    ErrorReply::Unavailable("shutting down".into())
}

/// Sends one shard a message and waits for its answer.
async fn ask<T>(
    shard: &mpsc::Sender<ShardMsg>,
    msg: impl FnOnce(oneshot::Sender<T>) -> ShardMsg,
) -> Result<T, ErrorReply> {
    let (reply, rx) = oneshot::channel();
    shard.send(msg(reply)).await.map_err(|_| shut())?;
    rx.await.map_err(|_| shut())
}

/// Starts the admin operator `what` on region `id`, or says why not in PD's words.
pub async fn create(
    state: &PlacementState,
    id: u64,
    what: AdminAsk,
) -> Result<Result<(), AdminRefused>, ErrorReply> {
    ask(state.shard_of(id), |reply| ShardMsg::Admin {
        id,
        ask: what,
        reply,
    })
    .await
}

/// Starts an admin merge of region `source` into `target` (PD's `merge-region`), the pair
/// added as one as PD adds it: the target read from its shard; the source's half started by
/// the source's shard (which checks both, as PD's handler does; with the target gone, the
/// source is looked up first, as PD does), held there so that none of its steps reaches TiKV;
/// the target's half placed by the target's shard; and only then the source's half let go.
/// Should the target's half be refused (the target changed in between), the held half is
/// cancelled unsent and the merge refused as PD refuses an operator it cannot add; should the
/// held half have ended meanwhile, the placed target's half is ended too. Once both run,
/// either ending undone ends the other, across shards too (`Shard::end_merge_half`).
pub async fn merge(
    state: &PlacementState,
    source: u64,
    target: u64,
) -> Result<Result<(), AdminRefused>, ErrorReply> {
    let Some(t) = ask(state.shard_of(target), |reply| ShardMsg::MergeTarget {
        id: target,
        reply,
    })
    .await?
    else {
        // PD looks the source up first: with both gone, the source is the one named.
        let source_known = ask(state.shard_of(source), |reply| ShardMsg::MergeTarget {
            id: source,
            reply,
        })
        .await?
        .is_some();
        let missing = if source_known { target } else { source };
        return Ok(Err(AdminRefused::RegionNotFound(missing)));
    };
    let started = ask(state.shard_of(source), |reply| ShardMsg::AdminMerge {
        id: source,
        target: Box::new(t),
        reply,
    })
    .await?;
    let (half, kind) = match started {
        Ok(started) => started,
        Err(why) => return Ok(Err(why)),
    };
    let placed = match failpoint::step(points::MERGE_HELD).await {
        Ok(()) => {
            ask(state.shard_of(target), |reply| ShardMsg::AdminMergeTarget {
                id: target,
                step: Box::new(half),
                kind,
                reply,
            })
            .await?
        }
        Err(_) => Err(AdminRefused::AddOperator),
    };
    let released = ask(state.shard_of(source), |reply| ShardMsg::ReleaseMerge {
        id: source,
        partner: target,
        placed: placed.is_ok(),
        reply,
    })
    .await?;
    if placed.is_ok() && released.is_err() {
        end_halves(state, vec![(target, source)]).await?;
    }
    Ok(placed.and(released))
}

/// Ends the merge halves in `ends` (each `(region, partner)`), whose partners ended undone,
/// and waits until their shards have; the regions whose half was still running and is now
/// ended.
async fn end_halves(state: &PlacementState, ends: Vec<PartnerEnd>) -> Result<Vec<u64>, ErrorReply> {
    let mut ended = Vec::new();
    for (i, ends) in by_shard(state, ends).into_iter().enumerate() {
        if ends.is_empty() {
            continue;
        }
        ended.extend(
            ask(&state.shards[i], |reply| ShardMsg::EndMergeHalves {
                ends,
                reply: Some(reply),
            })
            .await?,
        );
    }
    Ok(ended)
}

/// The shard that owns region `id`, or every shard.
fn shards_of(state: &PlacementState, region: Option<u64>) -> Vec<&mpsc::Sender<ShardMsg>> {
    match region {
        Some(id) => vec![state.shard_of(id)],
        None => state.shards.iter().collect(),
    }
}

/// Cancels region `id`'s running operator, or every running operator (PD's admin stop);
/// returns the regions whose operator was cancelled, the partners of merge halves included. A
/// half's partner ends with it, on any shard, before this answers (as PD removes the related
/// merge operator in the same call), and before the next shard is asked: a partner ended so
/// is cancelled for its related merge region, as in PD, not stopped in its own right.
pub async fn cancel(state: &PlacementState, region: Option<u64>) -> Result<Vec<u64>, ErrorReply> {
    let mut cancelled = Vec::new();
    for shard in shards_of(state, region) {
        let (ids, ends) = ask(shard, |reply| ShardMsg::CancelOperators { region, reply }).await?;
        cancelled.extend(ids);
        cancelled.extend(end_halves(state, ends).await?);
    }
    cancelled.sort_unstable();
    Ok(cancelled)
}

/// The operators running on region `id`, or on every region, in region order.
pub async fn running(
    state: &PlacementState,
    region: Option<u64>,
) -> Result<Vec<RunningOp>, ErrorReply> {
    let mut all = Vec::new();
    for shard in shards_of(state, region) {
        all.extend(ask(shard, |reply| ShardMsg::RunningOperators { region, reply }).await?);
    }
    all.sort_unstable_by_key(|op| op.region_id);
    Ok(all)
}

/// The records of the operators that ended at or after `from_ms`, in region order.
pub async fn ended(
    state: &PlacementState,
    from_ms: u64,
) -> Result<Vec<(u64, OpRecord)>, ErrorReply> {
    let mut all = Vec::new();
    for shard in &state.shards {
        all.extend(ask(shard, |reply| ShardMsg::EndedOperators { from_ms, reply }).await?);
    }
    all.sort_unstable_by_key(|(id, _)| *id);
    Ok(all)
}

/// Region `id`'s operator as PD's `GET /operators/{id}` shows it: the running one with its
/// steps, and the status record (running, or how the last one ended).
pub async fn status(
    state: &PlacementState,
    id: u64,
) -> Result<(Option<RunningOp>, Option<OpRecord>), ErrorReply> {
    let shard = state.shard_of(id);
    let record = ask(shard, |reply| ShardMsg::OperatorStatus { id, reply }).await?;
    let running = ask(shard, |reply| ShardMsg::RunningOperators {
        region: Some(id),
        reply,
    })
    .await?
    .into_iter()
    .next();
    Ok((running, record))
}

/// The ids of the regions overlapping `[start, end)` (an empty end: to the end of the key
/// space), at most `limit`.
pub fn regions_in(state: &PlacementState, start: &[u8], end: &[u8], limit: usize) -> Vec<u64> {
    state
        .index
        .snapshot()
        .scan(start, end, limit)
        .into_iter()
        .map(|r| r.id())
        .collect()
}
