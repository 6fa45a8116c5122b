//! Placement's pure core: the rules over regions and stores, and the key-range map that routes a
//! key to its region. The data types are the frames' (`meridian-client`) and are re-exported
//! here; the rules are methods of extension traits ([`RegionShape`], [`RegionWireSize`]) or of
//! this module's own types. No I/O, no clock: the server shell feeds heartbeats in and
//! persists what changed.

mod buckets;
mod cancel_reason;
mod change_log;
mod dense_map;
mod id_alloc;
mod limits;
mod op_status;
mod operator;
mod prefix_search;
mod range_index;
mod region;
#[cfg(any(test, feature = "testkit"))]
mod region_map;
mod resolved_ts;
mod route;
mod running_op;
pub mod schedule;
mod segment;
mod shard;
mod split;
mod store;
#[cfg(test)]
pub(crate) mod test_region;
mod version;

pub use buckets::{Buckets, BucketsMap};
pub use change_log::{ChangeLog, Since, CHANGE_LOG_CAPACITY};
pub use id_alloc::{check_persisted_end, IdAllocator, IdEndError, MAX_ID_END};
pub use limits::{
    page_len, store_wire_size, LimitError, Limits, RegionWireSize, KEY_LEN_CEILING, PAGE_BUDGET,
};
/// The cluster's own record: data only, no rule over it here.
pub use meridian_client::placement::ClusterMeta;
pub use operator::{
    MergeStep, OpKind, Operator, Pending, Progress, Split, SplitPolicy, SplitStep, Step,
};
pub use range_index::{Change, RangeIndex, Snapshot, SEGMENT};
pub use region::{
    Epoch, Peer, PeerRole, Region, RegionError, RegionShape, RegionStats, TimeInterval, MAX_PEERS,
};
// The reference model the property tests and the fuzzers check `RangeIndex` against; no
// request is served from it, so it is not part of the public API.
pub use op_status::{CancelReason, OpEvent, OpRecord, OpStatus, RECORD_TTL_MS};
#[cfg(any(test, feature = "testkit"))]
pub(crate) use region_map::RegionMap;
pub use resolved_ts::{may_resolve, ResolvedTs};
pub use route::Route;
pub use schedule::{
    Cluster, Health, InFlight, RegionInput, ScheduleConfig, StoreBudget, StoreLoad, StoreView,
};
pub use shard::{
    owner, Order, OrderRefused, Ordered, Outcome, PartnerEnd, RegionReport, ReportedSizes,
    RunningOp, Shard, StoreTotal, StoreTotals, SPLIT_DESC,
};
pub use split::{check_split, InvalidSplit};
pub use store::{
    Label, Store, StoreDetails, StoreError, StoreMap, StoreState, StoreStats, StoreStatus,
};
pub use version::{cluster_version, is_compatible, supports_conf_change_v2, Version, VersionError};

#[cfg(test)]
mod tests;
