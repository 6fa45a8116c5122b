//! Store identity at the door: a request that names a store (registration, store and region
//! heartbeats, min-resolved-ts and split reports, bootstrap) or a region only its stores speak
//! of (bucket reports, split requests) is checked against the store the caller's certificate
//! speaks for, before it touches any state, whichever front end brought it.
//! A connection that already knows its store compares one id per item (an atomic load, no lock,
//! no allocation: the region heartbeat path); one that does not looks its certificate up in the
//! records once, and a registration by a certificate bound to nothing becomes a claim, made
//! durable before the registration runs. The rules are `auth`'s; the records are placement's.

use crate::auth::{check, judge, Caller, StoreDenied, Verdict};
use crate::placement::Region;
use crate::proto::ErrorReply;

use super::super::placement::{
    BucketsOp, ClusterConfigOp, ClusterOp, ExternalTsOp, GcOp, GlobalConfigOp, PlacementOp,
    ResolvedTsOp, RouteOp, SplitOp, StoreOp,
};
use super::super::Shared;
use super::Op;

/// Which store a request acts for.
enum Target<'a> {
    /// None: it acts for no store.
    Nobody,
    /// This store, and it may bind an unbound certificate to it (it registers or reports the
    /// store itself).
    MayBind(u64),
    /// This store, which must be the caller's.
    Store(u64),
    /// A region heartbeat: the store of the leader peer it reports, which must be the caller's.
    Leader(&'a Region),
    /// Regions a split report brings: each must have a peer on the caller's store.
    Peers(&'a [Region]),
    /// A report only a region's leader makes (its buckets): the region, as this leader knows
    /// it, must be led on the caller's store.
    LedRegion(u64),
    /// A split asked for: the region, as this leader knows it, must have a peer on the
    /// caller's store (the request's own peers are the caller's word, not evidence).
    HeldRegion(u64),
}

fn target(op: &Op) -> Target<'_> {
    let Op::Placement(op) = op else {
        // Ping, TSO, members, recovery, a new external timestamp: no store in them.
        return Target::Nobody;
    };
    match op {
        PlacementOp::Cluster(ClusterOp::Bootstrap { store, .. }) => Target::MayBind(store.id),
        PlacementOp::Cluster(ClusterOp::IsBootstrapped | ClusterOp::AllocId) => Target::Nobody,
        PlacementOp::Stores(StoreOp::Put(store)) => Target::MayBind(store.id),
        PlacementOp::Stores(StoreOp::Heartbeat { store_id, .. }) => Target::MayBind(*store_id),
        PlacementOp::Stores(StoreOp::Get(_) | StoreOp::GetAll { .. }) => Target::Nobody,
        PlacementOp::Heartbeat(region, _) => Target::Leader(region),
        PlacementOp::ResolvedTs(ResolvedTsOp::Report { store_id, .. }) => Target::Store(*store_id),
        PlacementOp::Splits(SplitOp::Report(regions)) => Target::Peers(regions),
        PlacementOp::Splits(SplitOp::Ask { region, .. }) => Target::HeldRegion(region.id),
        PlacementOp::Buckets(BucketsOp::Report(buckets)) => Target::LedRegion(buckets.region_id),
        PlacementOp::ClusterConfig(ClusterConfigOp::Get | ClusterConfigOp::Put(_))
        | PlacementOp::Routing(RouteOp::Region(_) | RouteOp::PrevRegion(_))
        | PlacementOp::Routing(RouteOp::ById(_) | RouteOp::Scan { .. })
        | PlacementOp::Buckets(BucketsOp::Get(_))
        | PlacementOp::Gc(GcOp::Get | GcOp::Update(_) | GcOp::UpdateService { .. })
        | PlacementOp::ExternalTs(ExternalTsOp::Get | ExternalTsOp::Set { .. })
        | PlacementOp::GlobalConfig(
            GlobalConfigOp::Store { .. }
            | GlobalConfigOp::Load { .. }
            | GlobalConfigOp::Watch { .. },
        ) => Target::Nobody,
    }
}

fn denied(d: StoreDenied) -> ErrorReply {
    ErrorReply::PermissionDenied(d.to_string())
}

/// `op` as it may go on for `caller`, or the refusal. Without a store seat (binding off, no
/// `store` role) every op goes on as it is.
/// Inlined into the front ends so that the common case, a caller with no seat, costs one
/// test and leaves the op where it is.
#[inline(always)]
pub fn admit(op: Op, caller: &Caller, shared: &Shared) -> Result<Op, ErrorReply> {
    match &caller.store {
        None => Ok(op),
        Some(seat) => admit_seated(op, seat, shared),
    }
}

fn admit_seated(
    op: Op,
    seat: &std::sync::Arc<crate::auth::StoreSeat>,
    shared: &Shared,
) -> Result<Op, ErrorReply> {
    let bindings = &shared.placement.bindings;
    let verdict = {
        let target = target(&op);
        if let Target::Nobody = target {
            return Ok(op);
        }
        // A seat that knows its store needs no records: the hot path is this one load.
        let bound = match seat.bound() {
            Some(id) => Some(id),
            // The records are loaded only where placement is served: elsewhere placement
            // would refuse the call anyway, and says why.
            None if !shared.placement.is_ready() => return Err(shared.membership.not_serving()),
            None => bindings.resolve(seat),
        };
        match target {
            Target::Nobody => Ok(None),
            Target::Store(id) => check(seat, bound, id).map(|()| None),
            Target::Leader(region) => {
                let leader = region
                    .leader
                    .and_then(|peer| region.peers.iter().find(|p| p.id == peer));
                match leader {
                    Some(peer) => check(seat, bound, peer.store_id).map(|()| None),
                    None => Err(StoreDenied::NoLeader {
                        cert: seat.name().to_string(),
                    }),
                }
            }
            Target::Peers(regions) => {
                let stranger = regions
                    .iter()
                    .find(|r| !bound.is_some_and(|b| r.peers.iter().any(|p| p.store_id == b)));
                match stranger {
                    None => Ok(None),
                    Some(r) => {
                        let on = r.peers.first().map_or(0, |p| p.store_id);
                        let cert = seat.name().to_string();
                        Err(match bound {
                            Some(b) => StoreDenied::OtherStore {
                                cert,
                                bound: b,
                                target: on,
                            },
                            None => StoreDenied::Unbound { cert, target: on },
                        })
                    }
                }
            }
            Target::LedRegion(id) | Target::HeldRegion(id) => {
                // A region this leader does not know is placement's to refuse (a split) or
                // drop (buckets), as PD does; nothing of another store's is touched.
                match shared.placement.index.get(id) {
                    None => Ok(None),
                    Some(route) => {
                        let by_leader = matches!(target, Target::LedRegion(_));
                        let leader = route.leader_store();
                        let allowed = bound.is_some_and(|b| {
                            if by_leader {
                                leader == Some(b)
                            } else {
                                route.peers().any(|p| p.store_id == b)
                            }
                        });
                        if allowed {
                            Ok(None)
                        } else {
                            let cert = seat.name().to_string();
                            Err(match bound {
                                None => StoreDenied::Unbound {
                                    cert,
                                    target: leader
                                        .or_else(|| route.peers().next().map(|p| p.store_id))
                                        .unwrap_or(0),
                                },
                                Some(bound) if by_leader => StoreDenied::NotLeader {
                                    cert,
                                    bound,
                                    region: id,
                                },
                                Some(bound) => StoreDenied::NoPeer {
                                    cert,
                                    bound,
                                    region: id,
                                },
                            })
                        }
                    }
                }
            }
            Target::MayBind(id) => match judge(seat, bound, bindings.owner_of(id), id) {
                Verdict::Allow => Ok(None),
                Verdict::Claim => Ok(Some(id)),
                Verdict::Deny(d) => Err(d),
            },
        }
    };
    match verdict {
        Ok(None) => Ok(op),
        Ok(Some(store_id)) => match op {
            Op::Placement(op) => Ok(Op::Claim {
                seat: seat.clone(),
                store_id,
                op,
            }),
            other => Ok(other),
        },
        Err(d) => Err(denied(d)),
    }
}
