//! The messages of placement's tasks, in one place: what a core sends another core's shard
//! task ([`ShardMsg`], answered with [`Beats`] for heartbeats) and what a request sends the
//! term's persister ([`PersistOp`]). Owns only their shapes; the tasks that receive them are
//! `shard_task` and `persist`.

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::meta::{MetaError, WriteOp};
use crate::placement::schedule::{AdminAsk, AdminRefused, MergeTarget};
use crate::placement::MergeStep;
use crate::placement::{
    OpRecord, Operator, OrderRefused, Ordered, PartnerEnd, Region, RegionReport, RegionStats,
    RunningOp, Snapshot, StoreTotal,
};
use crate::proto::{ErrorReply, Reply, Response};

/// A region heartbeat on its way to its shard. The region stays boxed, as the request
/// decoder made it, so that handing it from the stream to a shard's queue moves a pointer and
/// not the region.
pub type Beat = (Box<Region>, RegionStats);

/// To a core's shard task, from the other cores and the term's loader.
pub enum ShardMsg {
    /// Heartbeats forwarded from another core, answered together in order.
    Heartbeats {
        items: Vec<Beat>,
        reply: oneshot::Sender<Beats>,
    },
    GetById {
        id: u64,
        reply: oneshot::Sender<Option<Region>>,
    },
    /// Operators asked for from outside the scheduler (ScatterRegion, SplitRegions), one per
    /// region, carried out in order and answered together.
    Orders {
        orders: Vec<(u64, OrderOp)>,
        reply: oneshot::Sender<Vec<Result<Ordered, OrderRefused>>>,
    },
    /// The sizes and pending peers the regions asked for last reported, for those this shard
    /// owns (PD's HTTP API's region JSON).
    Sizes {
        ids: Vec<u64>,
        reply: oneshot::Sender<Vec<(u64, RegionReport)>>,
    },
    /// What this shard's regions put on each store (PD's store status).
    StoreTotals {
        reply: oneshot::Sender<Vec<(u64, StoreTotal)>>,
    },
    /// A region's operator status (GetOperator).
    OperatorStatus {
        id: u64,
        reply: oneshot::Sender<Option<OpRecord>>,
    },
    /// An admin operator asked for through PD's HTTP API (`POST /operators`).
    Admin {
        id: u64,
        ask: AdminAsk,
        reply: oneshot::Sender<Result<(), AdminRefused>>,
    },
    /// A region as an admin merge's target, as this shard last saw it.
    MergeTarget {
        id: u64,
        reply: oneshot::Sender<Option<MergeTarget>>,
    },
    /// The source's half of an admin merge (`merge-region`), started held (nothing sent),
    /// answered with the target's half and its kind flags.
    AdminMerge {
        id: u64,
        target: Box<MergeTarget>,
        reply: oneshot::Sender<Result<(MergeStep, &'static str), AdminRefused>>,
    },
    /// The target's half of an admin merge.
    AdminMergeTarget {
        id: u64,
        step: Box<MergeStep>,
        kind: &'static str,
        reply: oneshot::Sender<Result<(), AdminRefused>>,
    },
    /// The source's half of an admin merge, held until now: with the target's half
    /// `placed`, its first step is sent; otherwise it is cancelled. Refused when the held half
    /// is gone.
    ReleaseMerge {
        id: u64,
        partner: u64,
        placed: bool,
        reply: oneshot::Sender<Result<(), AdminRefused>>,
    },
    /// Merge halves to end, each `(region, partner)`, because their partners (another shard's)
    /// ended undone; answered, when asked, once they are ended, with the regions whose half
    /// was still running and is now ended.
    EndMergeHalves {
        ends: Vec<PartnerEnd>,
        reply: Option<oneshot::Sender<Vec<u64>>>,
    },
    /// Cancels the running operator of one region, or of all (`DELETE /operators`);
    /// answered with the regions whose operator was cancelled, and the merge halves of other
    /// shards to end with them.
    CancelOperators {
        region: Option<u64>,
        reply: oneshot::Sender<(Vec<u64>, Vec<PartnerEnd>)>,
    },
    /// The records of the operators that ended since a time (`GET /operators/records`).
    EndedOperators {
        from_ms: u64,
        reply: oneshot::Sender<Vec<(u64, OpRecord)>>,
    },
    /// The operators running on one region, or on all (`GET /operators`).
    RunningOperators {
        region: Option<u64>,
        reply: oneshot::Sender<Vec<RunningOp>>,
    },
    /// Regions another shard's change displaced.
    Forget(Vec<u64>),
    /// Everything this shard owns from now on: its share (by region id) of a new term's index,
    /// or nothing on stepping down. The shard takes its share itself, so that a term whose
    /// index is already whole (a synced copy) serves routing before every region is handed
    /// out: at 10M regions the hand-out is most of a second.
    Reset(Option<Arc<Snapshot>>),
}

/// One operator asked of a shard (`placement::Order` without what the shard holds).
#[derive(Debug, Clone)]
pub enum OrderOp {
    Scatter {
        group: Arc<str>,
        skip_store_limit: bool,
    },
    Split(Vec<Vec<u8>>),
}

/// A heartbeat's answer as the shard gives it: the operator to send, or the refusal. A
/// fifth of a [`Response`]'s size, so that a read's few hundred of them stay within the
/// allocator's small classes: pages freed read after read go back to the kernel, and each
/// `madvise` flushes every core's TLB.
pub type BeatReply = Result<Option<Operator>, Box<ErrorReply>>;

/// The reply a heartbeat's answer is sent as.
pub fn beat_response(reply: BeatReply) -> Response {
    match reply {
        Ok(operator) => Response::Ok(Reply::RegionHeartbeat { operator }),
        Err(e) => Response::Err(*e),
    }
}

/// Replies to heartbeats, in order, and the dirty generation that must be durable before any
/// of them is sent (0: none changed what is persisted).
#[derive(Default)]
pub struct Beats {
    pub replies: Vec<BeatReply>,
    pub durable_at: u64,
}

/// Writes a request waits for (bootstrap, store registration). Changes the map made on its
/// own are marked in the dirty set instead.
pub enum PersistOp {
    Sync {
        ops: Vec<WriteOp>,
        reply: oneshot::Sender<Result<(), MetaError>>,
    },
}
