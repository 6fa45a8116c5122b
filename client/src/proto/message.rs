//! The messages. Every request gets exactly one `Response`, in request order on its stream.
//!
//! An archived enum is as large as its largest variant, and every frame carries one: a
//! region heartbeat and its reply pay for the rarest, largest message. So a variant that would
//! be larger than a heartbeat (a `Store`, 80 bytes archived, or a `StoreStatus`) holds it
//! behind a `Box`, which is archived as a 4-byte relative pointer: 40 bytes less on every
//! heartbeat and 64 on every reply.

use rkyv::{Archive, Deserialize, Serialize};

use super::global_config::{ConfigChange, ConfigEvent, ConfigItem};
use super::refusal::Refusal;
use crate::placement::{
    Buckets, ClusterMeta, Operator, Region, RegionStats, Store, StoreState, StoreStats, StoreStatus,
};

/// Most regions one `ScanRegions` reply carries (more is asked again from the last end).
pub const MAX_SCAN_REGIONS: u32 = 1024;
/// The most regions one gRPC `BatchScanRegions` answer carries, whatever limit was asked (PD's
/// "no limit", 0, included): a map of millions is never sent in one message.
pub const MAX_BATCH_SCAN_REGIONS: u32 = 4 * MAX_SCAN_REGIONS;
/// Most splits one `AskBatchSplit` may ask for.
pub const MAX_BATCH_SPLIT: u32 = 256;

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Bare round trip through the same path as every other request.
    Ping,
    /// `count` consecutive timestamps, `1..=2^18`.
    Tso {
        count: u32,
    },
    /// The cluster's members and its leader.
    GetMembers,
    /// Creates the cluster's first store and first region (covering every key), once.
    Bootstrap {
        store: Box<Store>,
        region: Region,
    },
    IsBootstrapped,
    /// A new id, unique forever (P3), for a store, region or peer.
    AllocId,
    PutStore {
        store: Box<Store>,
    },
    GetStore {
        id: u64,
    },
    /// Stores with ids above `after_id`, in id order, one page at a time (see `Reply::Stores`).
    GetAllStores {
        after_id: u64,
    },
    StoreHeartbeat {
        store_id: u64,
        stats: StoreStats,
    },
    /// Sent by a region's leader; the reply may carry an operator to run.
    RegionHeartbeat {
        region: Region,
        stats: RegionStats,
    },
    GetRegion {
        key: Vec<u8>,
    },
    GetPrevRegion {
        key: Vec<u8>,
    },
    GetRegionById {
        id: u64,
    },
    /// Regions overlapping `[start, end)` (empty end: to the end), at most `limit`
    /// (0 or above [`MAX_SCAN_REGIONS`]: that many).
    ScanRegions {
        start: Vec<u8>,
        end: Vec<u8>,
        limit: u32,
    },
    /// Ids for `count` new regions split off `region` (one region id and one peer id per
    /// existing peer each).
    AskBatchSplit {
        region: Region,
        count: u32,
    },
    /// The regions a split produced, as their leader sees them.
    ReportBatchSplit {
        regions: Vec<Region>,
    },
    GetGcSafePoint,
    /// Moves the GC safe point forward; a smaller value leaves it (answered with the current).
    UpdateGcSafePoint {
        safe_point: u64,
    },
    /// Sets (TTL > 0) or removes (TTL <= 0) a service's safe point; answered with the minimum.
    UpdateServiceGcSafePoint {
        service_id: String,
        ttl_secs: i64,
        safe_point: u64,
    },
    /// Whether the cluster is marked for BR's snapshot recovery (a TiKV asks before it starts).
    IsSnapshotRecovering,
    /// The smallest resolved ts of the regions a store holds (TiKV reports it every second).
    ReportMinResolvedTs {
        store_id: u64,
        min_resolved_ts: u64,
    },
    GetClusterConfig,
    /// Replaces the cluster's record; its id must be this cluster's.
    PutClusterConfig {
        cluster: ClusterMeta,
    },
    /// Raises the external timestamp: strictly, and never above the oracle.
    SetExternalTimestamp {
        timestamp: u64,
    },
    GetExternalTimestamp,
    /// A leader's buckets for its region; kept while newer than the ones known.
    ReportBuckets {
        buckets: Buckets,
    },
    /// The latest buckets known for a region.
    GetRegionBuckets {
        region_id: u64,
    },
    /// One transaction of global config changes under `config_path` (empty: PD's default).
    StoreGlobalConfig {
        config_path: String,
        changes: Vec<ConfigChange>,
    },
    /// Global config items by name under `config_path`, or (no names) every item whose key
    /// starts with it.
    LoadGlobalConfig {
        config_path: String,
        names: Vec<String>,
    },
    /// The global config changes under `config_path` from `revision` on (0: from now),
    /// waiting up to `wait_ms` (at most a second) for one when none is there yet.
    WatchGlobalConfig {
        config_path: String,
        revision: i64,
        wait_ms: u32,
    },
    /// Marks the rest of this stream's routing reads (`GetRegion`, `GetPrevRegion`,
    /// `GetRegionById`, `ScanRegions`) as reads a follower may answer, as PD's
    /// `pd-allow-follower-handle` marks a gRPC call: a follower in sync answers them from its
    /// copy of the leader's index (possibly older, never invented), one that is not refuses
    /// with `NotLeader`. Answered with `Done` by every member.
    AllowFollowerHandle,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Ok(Reply),
    Err(ErrorReply),
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Pong,
    /// The timestamps `first .. first + count`.
    Tso {
        first: u64,
        count: u32,
    },
    Members(MembersReply),
    Bootstrapped(bool),
    Id(u64),
    /// The request was carried out; nothing to return.
    Done,
    Store(Option<Box<StoreStatus>>),
    /// One page: `more` says whether stores follow the last one (ask again after its id).
    Stores {
        stores: Vec<StoreStatus>,
        more: bool,
    },
    RegionHeartbeat {
        operator: Option<Operator>,
    },
    Region(Option<Region>),
    Regions(Vec<Region>),
    Splits(Vec<SplitIds>),
    GcSafePoint(u64),
    /// The smallest live service safe point after an update, and how long it has to live.
    ServiceSafePoint {
        service_id: String,
        ttl_secs: i64,
        safe_point: u64,
    },
    /// Whether the cluster is marked for snapshot recovery.
    SnapshotRecovering(bool),
    StoreHeartbeat(StoreBeat),
    ClusterConfig(ClusterMeta),
    ExternalTimestamp(u64),
    Buckets(Option<Buckets>),
    /// Items, and the revision they were read at (0 for a load by names, as PD answers).
    GlobalConfig {
        items: Vec<ConfigItem>,
        revision: i64,
    },
    /// Changes in revision order; `next` is the revision to watch from next.
    GlobalConfigChanges {
        changes: Vec<ConfigEvent>,
        next: i64,
    },
}

/// What a store hears back from its heartbeat.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct StoreBeat {
    /// The lowest version among the stores that are not tombstones (`8.5.7`): the features a
    /// store may turn on.
    pub cluster_version: String,
    /// The store's state before this heartbeat (PD's `NodeState`).
    pub state: StoreState,
}

/// Ids for one new region of a batch split.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SplitIds {
    pub region_id: u64,
    /// One per peer of the region being split, in its order.
    pub peer_ids: Vec<u64>,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    pub name: String,
    pub id: u64,
    pub client_url: String,
    pub admin_url: String,
    /// The PD-compatible gRPC front end (`https://host:port`); empty when it is off.
    pub grpc_url: String,
}

#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct MembersReply {
    pub cluster_id: u64,
    pub leader: Option<MemberInfo>,
    pub members: Vec<MemberInfo>,
}

/// Typed errors; a client can act on each without parsing text.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorReply {
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<MemberInfo> },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("stale epoch: {0}")]
    StaleEpoch(String),
    #[error("cluster not bootstrapped")]
    NotBootstrapped,
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
    /// The connection's certificate lacks the role the request needs; nothing was changed.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The request is over a configured size or count limit (`[limits]`); nothing was changed.
    #[error("limit exceeded: {0}")]
    LimitExceeded(String),
    /// The cluster's state turns the request down (an old store version, a tombstone, ...);
    /// nothing was changed.
    #[error("{0}")]
    Refused(Refusal),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server holds requests and replies by the hundred per read (a batch of heartbeats and
    /// its replies, fanned out to the cores and back). Past about 14 KiB a buffer leaves the
    /// allocator's small classes, and its churn turns into page faults: at 240 bytes a
    /// `Response`, heartbeats fell by a quarter. A variant that grows these types goes behind
    /// a pointer, as `Store::details` does.
    #[test]
    fn requests_and_replies_stay_small_in_memory() {
        assert!(
            std::mem::size_of::<Request>() <= 184,
            "{}",
            std::mem::size_of::<Request>()
        );
        assert!(
            std::mem::size_of::<Response>() <= 136,
            "{}",
            std::mem::size_of::<Response>()
        );
    }

    /// Every frame carries the archived size of its enum's largest variant (the module's
    /// doc): a rare message that grows past a heartbeat would make every heartbeat and its
    /// reply larger on the wire, to encrypt, send and copy. With a `Store` inline in `PutStore`
    /// and a `StoreStatus` in `Reply::Store`, these were 252 and 156 bytes. The heartbeat's
    /// own interval (TiKV's start and end, 16 bytes) took it from 212 to 228.
    #[test]
    fn a_heartbeat_and_its_reply_stay_small_on_the_wire() {
        use crate::placement::{Epoch, Peer, PeerRole};
        let peer = |id, store_id| Peer {
            id,
            store_id,
            role: PeerRole::Voter,
        };
        let region = Region {
            id: 7,
            start_key: b"t\0\0\0\0\0\0\x01\x02".to_vec(),
            end_key: b"t\0\0\0\0\0\0\x01\x03".to_vec(),
            epoch: Epoch {
                conf_ver: 1,
                version: 5,
            },
            peers: vec![peer(8, 1), peer(9, 2), peer(10, 3)],
            leader: Some(8),
        };
        let mut scratch = rkyv::util::AlignedVec::new();
        let mut frame = Vec::new();
        let heartbeat = Request::RegionHeartbeat {
            region,
            stats: RegionStats::default(),
        };
        crate::proto::encode(&heartbeat, &mut scratch, &mut frame).unwrap();
        assert!(frame.len() <= 228, "a heartbeat is {} bytes", frame.len());
        frame.clear();
        let reply = Response::Ok(Reply::RegionHeartbeat { operator: None });
        crate::proto::encode(&reply, &mut scratch, &mut frame).unwrap();
        assert!(
            frame.len() <= 92,
            "a heartbeat's reply is {} bytes",
            frame.len()
        );
    }
}
