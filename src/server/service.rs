//! The one transport-neutral service under both front ends: every request is sorted here,
//! once, by what serving it takes ([`Op::of`], with no catch-all arm, so a new request fails
//! to compile until it is given its place), and [`execute`] serves it. QUIC streams
//! (`server::stream`) and the gRPC service (`server::grpc`) are thin adapters onto it; they
//! batch only where it pays (a read's heartbeats and lookups on a QUIC stream, using
//! [`Op::Heartbeat`] and [`Op::Locate`]). The only waiting done here is for the TSO window
//! or the clock when the allocator says the window is used up.

use std::time::Duration;

use crate::admin::{CoreMetrics, RequestKind};
use crate::auth::Call;
use crate::placement::{Region, RegionStats};
use crate::proto::{ArchivedRequest, ErrorReply, Reply, Request, Response};
use crate::tso::AllocError;

use super::Shared;

/// A request, sorted by what serving it takes. Built from the archive for the three that
/// need no deserialising, and for the rest from the owned request, so the receive buffer can
/// be reused while a request waits.
#[derive(Debug)]
pub enum Op {
    Ping,
    Tso(u32),
    Members,
    /// GetRegion: answered from the index's snapshot (on a QUIC stream, a read's lookups
    /// together, `placement::get_regions`).
    Locate(Vec<u8>),
    /// A region heartbeat: to the region's shard (on a QUIC stream, a read's heartbeats
    /// together, `placement::heartbeats`).
    Heartbeat(Box<Region>, RegionStats),
    /// Every other placement read or write, through `placement::handle`.
    Placement(Box<Request>),
}

impl Op {
    /// The one place a request is sorted. Every variant is named: a new request is a
    /// compile error here until it has a place.
    pub fn of(req: Request) -> Op {
        match req {
            Request::Ping => Op::Ping,
            Request::Tso { count } => Op::Tso(count),
            Request::GetMembers => Op::Members,
            Request::GetRegion { key } => Op::Locate(key),
            Request::RegionHeartbeat { region, stats } => Op::Heartbeat(Box::new(region), stats),
            req @ (Request::Bootstrap { .. }
            | Request::IsBootstrapped
            | Request::AllocId
            | Request::PutStore { .. }
            | Request::GetStore { .. }
            | Request::GetAllStores { .. }
            | Request::StoreHeartbeat { .. }
            | Request::GetPrevRegion { .. }
            | Request::GetRegionById { .. }
            | Request::ScanRegions { .. }
            | Request::AskBatchSplit { .. }
            | Request::ReportBatchSplit { .. }
            | Request::GetGcSafePoint
            | Request::UpdateGcSafePoint { .. }
            | Request::UpdateServiceGcSafePoint { .. }) => Op::Placement(Box::new(req)),
        }
    }

    /// From a validated archive: the TSO, ping and members requests without deserialising
    /// (the hot path), every other one deserialised and sorted by [`Op::of`].
    pub fn of_archived(req: &ArchivedRequest) -> Result<Op, String> {
        Ok(match req {
            ArchivedRequest::Ping => Op::Ping,
            ArchivedRequest::Tso { count } => Op::Tso(count.to_native()),
            ArchivedRequest::GetMembers => Op::Members,
            other => Op::of(
                rkyv::deserialize::<Request, rkyv::rancor::Error>(other)
                    .map_err(|e| format!("request: {e}"))?,
            ),
        })
    }

    /// What the call needs to be authorized.
    pub fn call(&self) -> Call {
        match self {
            Op::Ping => Call::Ping,
            Op::Tso(_) => Call::Tso,
            Op::Members => Call::GetMembers,
            Op::Locate(_) => Call::GetRegion,
            Op::Heartbeat(..) => Call::RegionHeartbeat,
            Op::Placement(req) => req.call(),
        }
    }

    /// The request again, whole (the frame fuzzer checks that sorting it again agrees).
    #[cfg(feature = "testkit")]
    pub fn into_request(self) -> Request {
        match self {
            Op::Ping => Request::Ping,
            Op::Tso(count) => Request::Tso { count },
            Op::Members => Request::GetMembers,
            Op::Locate(key) => Request::GetRegion { key },
            Op::Heartbeat(region, stats) => Request::RegionHeartbeat {
                region: *region,
                stats,
            },
            Op::Placement(req) => *req,
        }
    }
}

/// How long a TSO request waits for a renewal or the clock before it is answered `Unavailable`.
const TSO_WAIT: Duration = Duration::from_secs(2);

pub async fn execute(op: Op, shared: &Shared, metrics: &CoreMetrics) -> Response {
    let response = match op {
        Op::Ping => {
            metrics.request(RequestKind::Ping);
            return Response::Ok(Reply::Pong);
        }
        Op::Tso(count) => {
            metrics.request(RequestKind::Tso);
            let response = tso(count, shared).await;
            if let Response::Ok(_) = &response {
                metrics.tso_batch(count);
            }
            response
        }
        Op::Members => {
            metrics.request(RequestKind::GetMembers);
            return Response::Ok(Reply::Members(shared.membership.reply()));
        }
        Op::Locate(key) => {
            metrics.request(RequestKind::Placement);
            super::placement::handle(Request::GetRegion { key }, shared).await
        }
        Op::Heartbeat(region, stats) => {
            metrics.request(RequestKind::RegionHeartbeat);
            let req = Request::RegionHeartbeat {
                region: *region,
                stats,
            };
            super::placement::handle(req, shared).await
        }
        Op::Placement(req) => {
            metrics.request(RequestKind::Placement);
            super::placement::handle(*req, shared).await
        }
    };
    if let Response::Err(e) = &response {
        metrics.error(e);
    }
    response
}

async fn tso(count: u32, shared: &Shared) -> Response {
    let deadline = tokio::time::Instant::now() + TSO_WAIT;
    loop {
        match shared.allocator.allocate(count) {
            Ok(range) => {
                return Response::Ok(Reply::Tso {
                    first: range.first.as_u64(),
                    count,
                })
            }
            Err(AllocError::InvalidCount) => {
                return Response::Err(ErrorReply::InvalidArgument(format!(
                    "tso count {count} outside 1..={}",
                    crate::tso::MAX_COUNT
                )))
            }
            Err(AllocError::NotServing) => return Response::Err(shared.membership.not_serving()),
            Err(AllocError::Exhausted) => {
                // Wait without touching the allocator's state so a stalled window is not
                // pushed further ahead by retries.
                while shared.allocator.is_serving() && !shared.allocator.can_fit(count) {
                    if tokio::time::Instant::now() >= deadline {
                        return Response::Err(ErrorReply::Unavailable(
                            "timestamp window exhausted; retry".into(),
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
    }
}
