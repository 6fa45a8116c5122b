//! The `pdpb_request` target: gRPC request bodies as tonic decodes them and `grpc::convert`
//! turns them into Meridian requests, which then go through [`super::model`].

use std::fmt::Debug;

use prost::Message;

use crate::auth::Call;
use crate::kvproto::{metapb, pdpb};
use crate::placement::{Region, RegionStats, Store, StoreStats, StoreStatus};
use crate::proto::{Request, MAX_BATCH_SCAN_REGIONS, MAX_SCAN_REGIONS};
use crate::server::grpc::convert;
use crate::tso::MAX_COUNT;

use super::frame::wire_round_trip;
use super::model::{authorize_every_role_set, serve, Model, NOW_MS};

/// The pdpb request messages the gRPC front end decodes, by the first byte of a
/// `pdpb_request` input (modulo their number). The names are the seeds'.
pub const PDPB_KINDS: [&str; 23] = [
    "get_members",
    "tso",
    "bootstrap",
    "is_bootstrapped",
    "alloc_id",
    "get_store",
    "put_store",
    "get_all_stores",
    "store_heartbeat",
    "region_heartbeat",
    "get_region",
    "get_prev_region",
    "get_region_by_id",
    "query_region",
    "scan_regions",
    "batch_scan_regions",
    "ask_batch_split",
    "report_batch_split",
    "get_gc_safe_point",
    "update_gc_safe_point",
    "update_service_gc_safe_point",
    "get_gc_state",
    "get_cluster_info",
];

/// A gRPC request body: `data[0]` picks the message ([`PDPB_KINDS`]), the rest is its
/// protobuf encoding. It is decoded as tonic does (prost), converted as `grpc::service` does
/// (`grpc::convert`, header-free argument checks), and every Meridian request it becomes goes
/// through the same checks and model as a QUIC one.
pub fn pdpb_request(data: &[u8]) {
    let Some((&kind, body)) = data.split_first() else {
        return;
    };
    let Some((call, requests)) = pdpb_to_requests(usize::from(kind) % PDPB_KINDS.len(), body)
    else {
        return;
    };
    authorize_every_role_set(call);
    let mut model = Model::new(2);
    for req in &requests {
        serve(&mut model, req);
        wire_round_trip(req);
    }
}

/// Decodes a message as tonic does; one that decodes encodes to bytes that decode to it again.
/// Compared as values, not bytes: `StoreStats` holds a map, which prost keeps in a `HashMap`
/// and encodes in no fixed order.
fn decode<M: Message + Default + PartialEq + Debug>(body: &[u8]) -> Option<M> {
    let msg = M::decode(body).ok()?;
    let encoded = msg.encode_to_vec();
    assert_eq!(encoded.len(), msg.encoded_len());
    let again = M::decode(encoded.as_slice())
        .unwrap_or_else(|e| panic!("{msg:?} re-encoded does not decode: {e}"));
    if equals_itself(&msg) {
        assert_eq!(again, msg, "a message changes across a round trip");
    } else {
        // A NaN double (`SlowTrend`) makes a message unequal to itself; its size still holds.
        assert_eq!(again.encoded_len(), encoded.len(), "{msg:?}");
    }
    Some(msg)
}

/// False only for a value holding a NaN.
#[allow(clippy::eq_op)] // Comparing a value with itself is the point: NaN is not equal to NaN.
fn equals_itself<T: PartialEq>(x: &T) -> bool {
    x == x
}

/// A region converted from kvproto converts back to the same kvproto region and again to
/// itself (a leader the report names must be one of its peers to survive, as `leader_to`
/// takes it from the peers).
fn region_from(r: &metapb::Region, leader: Option<&metapb::Peer>) -> Option<Region> {
    let region = convert::region_from(r, leader).ok()?;
    if region.leader.is_none() || region.leader_peer().is_some() {
        let back = convert::region_from(
            &convert::region_to(&region),
            convert::leader_to(&region).as_ref(),
        );
        assert_eq!(back.as_ref(), Ok(&region), "kvproto round trip");
    }
    Some(region)
}

/// A store converted from kvproto survives the way back.
fn store_from(s: &metapb::Store) -> Option<Store> {
    let store = convert::store_from(s).ok()?;
    let status = StoreStatus {
        store: store.clone(),
        stats: StoreStats::default(),
        last_heartbeat_ms: NOW_MS,
    };
    assert_eq!(
        convert::store_from(&convert::store_to(&status)).as_ref(),
        Ok(&store),
        "kvproto round trip"
    );
    Some(store)
}

/// The call a message is authorized as and the Meridian requests the service makes of it, or
/// `None` when it does not decode or the service refuses it before any request (no store, no
/// region, a malformed one, a bad count, ...).
pub(super) fn pdpb_to_requests(kind: usize, body: &[u8]) -> Option<(Call, Vec<Request>)> {
    Some(match PDPB_KINDS[kind] {
        "get_members" => {
            decode::<pdpb::GetMembersRequest>(body)?;
            (Call::GetMembers, vec![Request::GetMembers])
        }
        "tso" => {
            let r = decode::<pdpb::TsoRequest>(body)?;
            if r.count == 0 || r.count > MAX_COUNT {
                return None;
            }
            (Call::Tso, vec![Request::Tso { count: r.count }])
        }
        "bootstrap" => {
            let r = decode::<pdpb::BootstrapRequest>(body)?;
            let store = store_from(r.store.as_ref()?)?;
            let region_pb = r.region.as_ref()?;
            let region = region_from(region_pb, region_pb.peers.first())?;
            (
                Call::Bootstrap,
                vec![Request::Bootstrap {
                    store: Box::new(store),
                    region,
                }],
            )
        }
        "is_bootstrapped" => {
            decode::<pdpb::IsBootstrappedRequest>(body)?;
            (Call::IsBootstrapped, vec![Request::IsBootstrapped])
        }
        "alloc_id" => {
            decode::<pdpb::AllocIdRequest>(body)?;
            (Call::AllocId, vec![Request::AllocId])
        }
        "get_store" => {
            let r = decode::<pdpb::GetStoreRequest>(body)?;
            (Call::GetStore, vec![Request::GetStore { id: r.store_id }])
        }
        "put_store" => {
            let r = decode::<pdpb::PutStoreRequest>(body)?;
            let store = store_from(r.store.as_ref()?)?;
            (
                Call::PutStore,
                vec![Request::PutStore {
                    store: Box::new(store),
                }],
            )
        }
        "get_all_stores" => {
            decode::<pdpb::GetAllStoresRequest>(body)?;
            (
                Call::GetAllStores,
                vec![Request::GetAllStores { after_id: 0 }],
            )
        }
        "store_heartbeat" => {
            let r = decode::<pdpb::StoreHeartbeatRequest>(body)?;
            let stats = r.stats.as_ref()?;
            let converted = convert::store_stats_from(stats);
            assert_eq!(converted.region_count, u64::from(stats.region_count));
            let req = Request::StoreHeartbeat {
                store_id: stats.store_id,
                stats: converted,
            };
            (Call::StoreHeartbeat, vec![req])
        }
        "region_heartbeat" => {
            let r = decode::<pdpb::RegionHeartbeatRequest>(body)?;
            let region = region_from(r.region.as_ref()?, r.leader.as_ref())?;
            let stats: RegionStats = convert::region_stats_from(&r, &region);
            (
                Call::RegionHeartbeat,
                vec![Request::RegionHeartbeat { region, stats }],
            )
        }
        "get_region" => {
            let r = decode::<pdpb::GetRegionRequest>(body)?;
            let req = Request::GetRegion { key: r.region_key };
            (Call::GetRegion, vec![req])
        }
        "get_prev_region" => {
            let r = decode::<pdpb::GetRegionRequest>(body)?;
            let req = Request::GetPrevRegion { key: r.region_key };
            (Call::GetPrevRegion, vec![req])
        }
        "get_region_by_id" => {
            let r = decode::<pdpb::GetRegionByIdRequest>(body)?;
            let req = Request::GetRegionById { id: r.region_id };
            (Call::GetRegionById, vec![req])
        }
        "query_region" => {
            // `query_one`: each key, each previous key, each id but 0, one lookup apiece.
            let r = decode::<pdpb::QueryRegionRequest>(body)?;
            let keys = r.keys.into_iter().map(|key| Request::GetRegion { key });
            let prev = r
                .prev_keys
                .into_iter()
                .map(|key| Request::GetPrevRegion { key });
            let ids = r
                .ids
                .into_iter()
                .filter(|&id| id != 0)
                .map(|id| Request::GetRegionById { id });
            (Call::QueryRegion, keys.chain(prev).chain(ids).collect())
        }
        "scan_regions" => {
            let r = decode::<pdpb::ScanRegionsRequest>(body)?;
            let limit = u32::try_from(r.limit.max(0)).unwrap_or(u32::MAX);
            let req = Request::ScanRegions {
                start: r.start_key,
                end: r.end_key,
                limit,
            };
            (Call::ScanRegions, vec![req])
        }
        "batch_scan_regions" => {
            // `batch_scan_regions`: the ranges checked in order and apart, then the first
            // page of each.
            let r = decode::<pdpb::BatchScanRegionsRequest>(body)?;
            let limit = match u32::try_from(r.limit) {
                Ok(n) if n > 0 => n.min(MAX_BATCH_SCAN_REGIONS),
                _ => MAX_BATCH_SCAN_REGIONS,
            };
            assert!((1..=MAX_BATCH_SCAN_REGIONS).contains(&limit));
            let mut last_end: Option<&Vec<u8>> = None;
            let mut scans = Vec::with_capacity(r.ranges.len());
            for range in &r.ranges {
                if !range.end_key.is_empty() && range.end_key < range.start_key {
                    return None;
                }
                if let Some(prev_end) = last_end {
                    if prev_end.is_empty() || range.start_key < *prev_end {
                        return None;
                    }
                }
                last_end = Some(&range.end_key);
                scans.push(Request::ScanRegions {
                    start: range.start_key.clone(),
                    end: range.end_key.clone(),
                    limit: limit.min(MAX_SCAN_REGIONS),
                });
            }
            (Call::ScanRegions, scans)
        }
        "ask_batch_split" => {
            let r = decode::<pdpb::AskBatchSplitRequest>(body)?;
            let region = region_from(r.region.as_ref()?, None)?;
            let req = Request::AskBatchSplit {
                region,
                count: r.split_count,
            };
            (Call::AskBatchSplit, vec![req])
        }
        "report_batch_split" => {
            let r = decode::<pdpb::ReportBatchSplitRequest>(body)?;
            let regions = r
                .regions
                .iter()
                .map(|region| region_from(region, None))
                .collect::<Option<Vec<_>>>()?;
            (
                Call::ReportBatchSplit,
                vec![Request::ReportBatchSplit { regions }],
            )
        }
        "get_gc_safe_point" => {
            decode::<pdpb::GetGcSafePointRequest>(body)?;
            (Call::GetGcSafePoint, vec![Request::GetGcSafePoint])
        }
        "update_gc_safe_point" => {
            let r = decode::<pdpb::UpdateGcSafePointRequest>(body)?;
            let req = Request::UpdateGcSafePoint {
                safe_point: r.safe_point,
            };
            (Call::UpdateGcSafePoint, vec![req])
        }
        "update_service_gc_safe_point" => {
            let r = decode::<pdpb::UpdateServiceGcSafePointRequest>(body)?;
            // A service id that is not UTF-8 is an invalid argument.
            let service_id = String::from_utf8(r.service_id).ok()?;
            let req = Request::UpdateServiceGcSafePoint {
                service_id,
                ttl_secs: r.ttl,
                safe_point: r.safe_point,
            };
            (Call::UpdateServiceGcSafePoint, vec![req])
        }
        "get_gc_state" => {
            // The keyspace only chooses between the unified state and "not found"; the
            // request path reads the GC safe point either way.
            decode::<pdpb::GetGcStateRequest>(body)?;
            (Call::GetGcState, vec![Request::GetGcSafePoint])
        }
        "get_cluster_info" => {
            decode::<pdpb::GetClusterInfoRequest>(body)?;
            (Call::GetClusterInfo, Vec::new())
        }
        other => unreachable!("PDPB_KINDS names {other} without a decoder"),
    })
}
