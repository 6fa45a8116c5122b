//! The one transport-neutral service under both front ends. Every request, single or batched,
//! from QUIC or gRPC, enters here: [`Op::of`] sorts it once by what serving it takes (no
//! catch-all arm, so a new request fails to compile until it is given its place; placement
//! requests are sorted on into their own [`PlacementOp`] groups), [`execute`] serves one, and
//! [`execute_batch`] serves a read's worth together where that pays (a batch's region
//! heartbeats fanned out by owning core, its lookups from one snapshot). The front ends only
//! decode, authorize (the role, then [`admit`]: the store a request names against the one the
//! caller's certificate speaks for), call and encode. The only waiting done here is for the TSO
//! window or the clock when the allocator says the window is used up, and in placement for
//! durability (and a store binding's, `Op::Claim`).

mod batch;
mod identity;
mod recovery;
mod tso;
pub mod views;

pub use batch::{execute_batch, locate_many_from_copy, BatchRoom, Replies};
pub use identity::admit;

use crate::admin::{CoreMetrics, RequestKind};
use crate::auth::{Call, RequestCall};
use crate::placement::{Region, RegionStats};
use crate::proto::{ArchivedRequest, Reply, Request, Response};

use super::placement::{
    self, BucketsOp, ClusterConfigOp, ClusterOp, ExternalTsOp, GcOp, GlobalConfigOp, PlacementOp,
    ResolvedTsOp, RouteOp, SplitOp, StoreOp,
};
use super::Shared;

/// A request, sorted by what serving it takes.
#[derive(Debug)]
pub enum Op {
    Ping,
    Tso(u32),
    Members,
    /// Whether the cluster is marked for snapshot recovery: any member answers.
    SnapshotRecovering,
    /// A new external timestamp: checked against a timestamp handed out for it, then
    /// placement's (`ExternalTsOp::Set`).
    SetExternalTs(u64),
    Placement(PlacementOp),
    /// A routing read the caller lets a follower answer (PD's `pd-allow-follower-handle`):
    /// a follower in sync answers from its copy of the index, the leader as always.
    FollowerRead(RouteOp),
    /// From here on, this QUIC stream's routing reads are ones a follower may answer
    /// ([`Op::allowing_follower`]); the stream keeps the mark, the answer is `Done`.
    AllowFollowerHandle,
    /// A placement request by a certificate bound to no store yet, for the store it is to be
    /// bound to (bind-store-identity): the binding is made durable, then the request served.
    Claim {
        seat: std::sync::Arc<crate::auth::StoreSeat>,
        store_id: u64,
        op: PlacementOp,
    },
}

impl Op {
    /// This request, answerable by a follower in sync when it is a routing read.
    pub fn allowing_follower(self) -> Op {
        match self {
            Op::Placement(PlacementOp::Routing(op)) => Op::FollowerRead(op),
            other => other,
        }
    }

    /// The one place a request is sorted. Every variant is named: a new request is a
    /// compile error here until it has a place.
    pub fn of(req: Request) -> Op {
        use PlacementOp as P;
        let placement = match req {
            Request::Ping => return Op::Ping,
            Request::Tso { count } => return Op::Tso(count),
            Request::GetMembers => return Op::Members,
            Request::AllowFollowerHandle => return Op::AllowFollowerHandle,
            Request::IsSnapshotRecovering => return Op::SnapshotRecovering,
            Request::ReportMinResolvedTs {
                store_id,
                min_resolved_ts,
            } => P::ResolvedTs(ResolvedTsOp::Report {
                store_id,
                ts: min_resolved_ts,
            }),
            Request::GetClusterConfig => P::ClusterConfig(ClusterConfigOp::Get),
            Request::PutClusterConfig { cluster } => {
                P::ClusterConfig(ClusterConfigOp::Put(cluster))
            }
            Request::SetExternalTimestamp { timestamp } => return Op::SetExternalTs(timestamp),
            Request::GetExternalTimestamp => P::ExternalTs(ExternalTsOp::Get),
            Request::ReportBuckets { buckets } => P::Buckets(BucketsOp::Report(buckets)),
            Request::GetRegionBuckets { region_id } => P::Buckets(BucketsOp::Get(region_id)),
            Request::StoreGlobalConfig {
                config_path,
                changes,
            } => P::GlobalConfig(GlobalConfigOp::Store {
                config_path,
                changes,
            }),
            Request::LoadGlobalConfig { config_path, names } => {
                P::GlobalConfig(GlobalConfigOp::Load { config_path, names })
            }
            Request::WatchGlobalConfig {
                config_path,
                revision,
                wait_ms,
            } => P::GlobalConfig(GlobalConfigOp::Watch {
                config_path,
                revision,
                wait: std::time::Duration::from_millis(u64::from(wait_ms)),
            }),
            Request::IsBootstrapped => P::Cluster(ClusterOp::IsBootstrapped),
            Request::AllocId => P::Cluster(ClusterOp::AllocId),
            Request::Bootstrap { store, region } => P::Cluster(ClusterOp::Bootstrap {
                store: *store,
                region: Box::new(region),
            }),
            Request::PutStore { store } => P::Stores(StoreOp::Put(*store)),
            Request::GetStore { id } => P::Stores(StoreOp::Get(id)),
            Request::GetAllStores { after_id } => P::Stores(StoreOp::GetAll { after_id }),
            Request::StoreHeartbeat { store_id, stats } => {
                P::Stores(StoreOp::Heartbeat { store_id, stats })
            }
            Request::RegionHeartbeat { region, stats } => P::Heartbeat(Box::new(region), stats),
            Request::GetRegion { key } => P::Routing(RouteOp::Region(key)),
            Request::GetPrevRegion { key } => P::Routing(RouteOp::PrevRegion(key)),
            Request::GetRegionById { id } => P::Routing(RouteOp::ById(id)),
            Request::ScanRegions { start, end, limit } => {
                P::Routing(RouteOp::Scan { start, end, limit })
            }
            Request::AskBatchSplit { region, count } => P::Splits(SplitOp::Ask {
                region: Box::new(region),
                count,
            }),
            Request::ReportBatchSplit { regions } => P::Splits(SplitOp::Report(regions)),
            Request::GetGcSafePoint => P::Gc(GcOp::Get),
            Request::UpdateGcSafePoint { safe_point } => P::Gc(GcOp::Update(safe_point)),
            Request::UpdateServiceGcSafePoint {
                service_id,
                ttl_secs,
                safe_point,
            } => P::Gc(GcOp::UpdateService {
                service_id,
                ttl_secs,
                safe_point,
            }),
        };
        Op::Placement(placement)
    }

    /// From a validated archive: the call to authorize and the op. TSO, ping and members are
    /// read without deserialising (the hot path); every other request is deserialised, its
    /// call read from the role table, and sorted by [`Op::of`].
    pub fn of_archived(req: &ArchivedRequest) -> Result<(Call, Op), rkyv::rancor::Error> {
        Ok(match req {
            ArchivedRequest::Ping => (Call::Ping, Op::Ping),
            ArchivedRequest::Tso { count } => (Call::Tso, Op::Tso(count.to_native())),
            ArchivedRequest::GetMembers => (Call::GetMembers, Op::Members),
            // Placement's hot path: the region is decoded into its box directly, not through
            // a `Request` it would be moved out of.
            ArchivedRequest::RegionHeartbeat { region, stats } => {
                let region = rkyv::deserialize::<Region, rkyv::rancor::Error>(region)?;
                let stats = rkyv::deserialize::<RegionStats, rkyv::rancor::Error>(stats)?;
                (
                    Call::RegionHeartbeat,
                    Op::Placement(PlacementOp::Heartbeat(Box::new(region), stats)),
                )
            }
            // Routing's hot path: the key is copied out of the archive once, with no `Request`
            // built around it to be taken apart again.
            ArchivedRequest::GetRegion { key } => (
                Call::GetRegion,
                Op::Placement(PlacementOp::Routing(RouteOp::Region(
                    key.as_slice().to_vec(),
                ))),
            ),
            other => {
                let req = rkyv::deserialize::<Request, rkyv::rancor::Error>(other)?;
                (req.call(), Op::of(req))
            }
        })
    }

    /// What the metrics count it as.
    fn kind(&self) -> RequestKind {
        match self {
            Op::Ping => RequestKind::Ping,
            Op::Tso(_) => RequestKind::Tso,
            Op::Members => RequestKind::GetMembers,
            Op::AllowFollowerHandle => RequestKind::Ping,
            Op::SnapshotRecovering | Op::SetExternalTs(_) | Op::Claim { .. } => {
                RequestKind::Placement
            }
            Op::Placement(PlacementOp::Heartbeat(..)) => RequestKind::RegionHeartbeat,
            Op::Placement(_) | Op::FollowerRead(_) => RequestKind::Placement,
        }
    }
}

/// Serves one request, counted in `metrics`.
pub async fn execute(op: Op, shared: &Shared, metrics: &CoreMetrics) -> Response {
    metrics.request(op.kind());
    let response = match op {
        Op::Ping => return Response::Ok(Reply::Pong),
        Op::AllowFollowerHandle => return Response::Ok(Reply::Done),
        Op::Members => return Response::Ok(Reply::Members(shared.membership.reply())),
        Op::SnapshotRecovering => {
            return Response::Ok(Reply::SnapshotRecovering(recovery::is_marked()))
        }
        Op::Tso(count) => {
            let response = tso::tso(count, shared).await;
            if let Response::Ok(_) = &response {
                metrics.tso_batch(count);
            }
            response
        }
        Op::SetExternalTs(timestamp) => match tso::tso(1, shared).await {
            Response::Ok(Reply::Tso { first, .. }) => {
                let op = ExternalTsOp::Set {
                    timestamp,
                    now: first,
                };
                placement::handle(PlacementOp::ExternalTs(op), shared).await
            }
            Response::Ok(other) => Response::Err(crate::proto::ErrorReply::Internal(format!(
                "a timestamp was answered with {other:?}"
            ))),
            refused @ Response::Err(_) => refused,
        },
        Op::Placement(op) => placement::handle(op, shared).await,
        Op::FollowerRead(op) => placement::follower_read(op, shared).await,
        Op::Claim { .. } if !shared.placement.is_ready() => {
            Response::Err(shared.membership.not_serving())
        }
        Op::Claim { seat, store_id, op } => {
            match placement::claim_store(&shared.placement, &seat, store_id).await {
                Ok(()) => placement::handle(op, shared).await,
                Err(refused) => refused,
            }
        }
    };
    if let Response::Err(e) = &response {
        metrics.error(e);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Epoch, Peer, PeerRole};

    fn region() -> Region {
        Region {
            id: 7,
            start_key: b"a".to_vec(),
            end_key: b"m".to_vec(),
            epoch: Epoch {
                conf_ver: 3,
                version: 5,
            },
            peers: vec![Peer {
                id: 8,
                store_id: 2,
                role: PeerRole::Voter,
            }],
            leader: Some(8),
        }
    }

    /// Every request a front end reads from an archive, on a direct path or the general one,
    /// gets the call and the op that sorting the deserialised request gives.
    #[test]
    fn an_archive_is_sorted_exactly_as_its_request() {
        let stats = RegionStats {
            approximate_size: 1 << 20,
            approximate_keys: 9,
            written_bytes: 10,
            written_keys: 11,
            pending: 1,
            interval: crate::placement::TimeInterval {
                start_s: 100,
                end_s: 160,
            },
        };
        let requests = [
            Request::Ping,
            Request::Tso { count: 3 },
            Request::GetMembers,
            Request::RegionHeartbeat {
                region: region(),
                stats,
            },
            Request::GetRegion {
                key: b"k\x00\xff".to_vec(),
            },
            Request::GetRegion { key: Vec::new() },
            Request::GetPrevRegion { key: b"k".to_vec() },
            Request::GetRegionById { id: 7 },
            Request::AllocId,
        ];
        for req in requests {
            let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&req).expect("encode");
            let archived =
                rkyv::access::<ArchivedRequest, rkyv::rancor::Error>(&bytes).expect("archived");
            let (call, op) = Op::of_archived(archived).expect("decoded");
            assert_eq!(call, req.call(), "{req:?}");
            // `Op` is compared through its full debug form: it holds no float or address.
            assert_eq!(format!("{op:?}"), format!("{:?}", Op::of(req.clone())));
        }
    }
}
