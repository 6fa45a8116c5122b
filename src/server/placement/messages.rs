//! The messages of placement's tasks, in one place: what a core sends another core's shard
//! task ([`ShardMsg`], answered with [`Beats`] for heartbeats) and what a request sends the
//! term's persister ([`PersistOp`]). Owns only their shapes; the tasks that receive them are
//! `shard_task` and `persist`.

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::meta::{MetaError, WriteOp};
use crate::placement::schedule::{AdminAsk, AdminRefused};
use crate::placement::{OpRecord, OrderRefused, Ordered, Region, RegionStats, Route, RunningOp};
use crate::proto::Response;

/// To a core's shard task, from the other cores and the term's loader.
pub enum ShardMsg {
    /// Heartbeats forwarded from another core, answered together in order.
    Heartbeats {
        items: Vec<(Region, RegionStats)>,
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
    /// Cancels the running operator of one region, or of all (`DELETE /operators`);
    /// answered with the regions whose operator was cancelled.
    CancelOperators {
        region: Option<u64>,
        reply: oneshot::Sender<Vec<u64>>,
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
    /// Everything this shard owns from now on (a new term's load; empty on stepping down).
    Reset(Vec<Arc<Route>>),
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

/// Replies to heartbeats, in order, and the dirty generation that must be durable before any
/// of them is sent (0: none changed what is persisted).
#[derive(Default)]
pub struct Beats {
    pub replies: Vec<Response>,
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
