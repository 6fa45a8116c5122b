//! The seed corpus: valid inputs for every target, so fuzzing starts past the decoders'
//! first checks (`fuzz/corpus/<target>/`, written by `tests/fuzz_corpus.rs`).

use std::fmt::Debug;

use prost::Message;
use rkyv::util::AlignedVec;

use crate::election::encode_member;
use crate::kvproto::pdpb;
use crate::meta::local::parse_records;
use crate::placement::{
    Epoch, Label, Peer, PeerRole, Region, RegionStats, Store, StoreDetails, StoreState, StoreStats,
    StoreStatus, MAX_PEERS,
};
use crate::proto::{self, Request};
use crate::server::grpc::convert;
use crate::server::placement::persist::{encode_regions, encode_store};

use super::pdpb::PDPB_KINDS;

/// One committed seed: `fuzz/corpus/<target>/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    pub target: &'static str,
    pub name: String,
    pub bytes: Vec<u8>,
}

fn peers(first_id: u64, stores: &[u64]) -> Vec<Peer> {
    stores
        .iter()
        .enumerate()
        .map(|(i, &store_id)| Peer {
            id: first_id + i as u64,
            store_id,
            role: if i < 3 {
                PeerRole::Voter
            } else {
                PeerRole::Learner
            },
        })
        .collect()
}

fn region(id: u64, start: &[u8], end: &[u8], version: u64) -> Region {
    let peers = peers(id * 10, &[1, 2, 3]);

    Region {
        id,
        start_key: start.to_vec(),
        end_key: end.to_vec(),
        epoch: Epoch {
            conf_ver: 1,
            version,
        },
        leader: Some(peers[0].id),
        peers,
    }
}

fn store(id: u64) -> Store {
    Store {
        id,
        address: format!("10.0.0.{id}:20160"),
        labels: vec![Label {
            key: "zone".into(),
            value: format!("z{id}"),
        }],
        state: StoreState::Up,
        details: StoreDetails {
            version: "8.5.7".into(),
            git_hash: "3f446cfa9eb1".into(),
            peer_address: format!("10.0.0.{id}:20161"),
            status_address: format!("10.0.0.{id}:20180"),
            start_timestamp: 1_700_000_000,
            deploy_path: "/opt/tikv".into(),
        }
        .into(),
    }
}

/// Small valid inputs for every target, encoded from real messages: every request kind framed,
/// a request stream that bootstraps, splits and looks up, a log with a few records (whole,
/// torn, damaged), region buckets and a store record, member records, and every pdpb request.
/// `tests/fuzz_corpus.rs` writes them to `fuzz/corpus/` and checks the committed ones match.
pub fn seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    let mut add = |target: &'static str, name: &str, bytes: Vec<u8>| {
        out.push(Seed {
            target,
            name: name.to_string(),
            bytes,
        })
    };

    // frame_to_request: [ctl] ++ frames.
    let frame = |ctl: u8, reqs: &[Request]| {
        let (mut scratch, mut bytes) = (AlignedVec::new(), vec![ctl]);
        for r in reqs {
            // A seed is a small literal message; it always fits a frame.
            proto::encode(r, &mut scratch, &mut bytes).expect("a seed request encodes");
        }
        bytes
    };
    let everything = region(1, b"", b"", 1);
    let whole_store = Store { id: 1, ..store(1) };
    let first = Region {
        peers: vec![Peer {
            id: 2,
            store_id: 1,
            role: PeerRole::Voter,
        }],
        leader: Some(2),
        ..region(3, b"", b"", 1)
    };
    let each_kind: Vec<(&str, Request)> = vec![
        ("ping", Request::Ping),
        ("tso", Request::Tso { count: 10 }),
        ("get_members", Request::GetMembers),
        (
            "bootstrap",
            Request::Bootstrap {
                store: Box::new(whole_store),
                region: first,
            },
        ),
        ("is_bootstrapped", Request::IsBootstrapped),
        ("alloc_id", Request::AllocId),
        (
            "put_store",
            Request::PutStore {
                store: Box::new(store(4)),
            },
        ),
        ("get_store", Request::GetStore { id: 4 }),
        ("get_all_stores", Request::GetAllStores { after_id: 0 }),
        (
            "store_heartbeat",
            Request::StoreHeartbeat {
                store_id: 4,
                stats: StoreStats {
                    capacity: 1 << 40,
                    available: 1 << 39,
                    used_size: 1 << 30,
                    region_count: 3,
                    leader_count: 1,
                },
            },
        ),
        (
            "region_heartbeat",
            Request::RegionHeartbeat {
                region: everything.clone(),
                stats: RegionStats {
                    approximate_size: 96 << 20,
                    approximate_keys: 1_000_000,
                    written_bytes: 4096,
                    written_keys: 16,
                    pending: 0,
                    interval: crate::placement::TimeInterval {
                        start_s: 1_700_000_000,
                        end_s: 1_700_000_060,
                    },
                },
            },
        ),
        (
            "get_region",
            Request::GetRegion {
                key: b"k1".to_vec(),
            },
        ),
        (
            "get_prev_region",
            Request::GetPrevRegion { key: b"m".to_vec() },
        ),
        ("get_region_by_id", Request::GetRegionById { id: 1 }),
        (
            "scan_regions",
            Request::ScanRegions {
                start: b"a".to_vec(),
                end: b"z".to_vec(),
                limit: 10,
            },
        ),
        (
            "ask_batch_split",
            Request::AskBatchSplit {
                region: everything.clone(),
                count: 2,
            },
        ),
        (
            "report_batch_split",
            Request::ReportBatchSplit {
                regions: vec![region(2, b"", b"m", 2), region(1, b"m", b"", 2)],
            },
        ),
        ("get_gc_safe_point", Request::GetGcSafePoint),
        (
            "update_gc_safe_point",
            Request::UpdateGcSafePoint { safe_point: 42 },
        ),
        (
            "update_service_gc_safe_point",
            Request::UpdateServiceGcSafePoint {
                service_id: "cdc".into(),
                ttl_secs: 60,
                safe_point: 41,
            },
        ),
    ];
    for (name, req) in &each_kind {
        add(
            "frame_to_request",
            name,
            frame(0, std::slice::from_ref(req)),
        );
    }
    // A leader's life: the first region, splits reported as heartbeats and as a batch, a
    // merge, lookups at the new edges; cut into 7-byte reads over a one-region segment.
    let history = [
        Request::RegionHeartbeat {
            region: everything.clone(),
            stats: RegionStats::default(),
        },
        Request::RegionHeartbeat {
            region: region(2, b"", b"g", 2),
            stats: RegionStats::default(),
        },
        Request::RegionHeartbeat {
            region: region(1, b"g", b"", 2),
            stats: RegionStats::default(),
        },
        Request::ReportBatchSplit {
            regions: vec![region(4, b"g", b"p", 3), region(1, b"p", b"", 3)],
        },
        Request::GetRegion { key: b"h".to_vec() },
        Request::GetPrevRegion { key: b"p".to_vec() },
        Request::ScanRegions {
            start: Vec::new(),
            end: Vec::new(),
            limit: 0,
        },
        // A stale replay, then a merge of [g, p) into [p, ..).
        Request::RegionHeartbeat {
            region: everything.clone(),
            stats: RegionStats::default(),
        },
        Request::RegionHeartbeat {
            region: region(1, b"g", b"", 4),
            stats: RegionStats::default(),
        },
        Request::GetRegionById { id: 4 },
    ];
    add(
        "frame_to_request",
        "history_in_7_byte_reads",
        frame(7, &history),
    );
    add(
        "frame_to_request",
        "history_segment_of_4",
        frame(0xc0, &history),
    );
    // A malformed frame between two good ones, and a header over the limit.
    let mut bad = frame(0, &[Request::Ping]);
    bad.extend_from_slice(&5u32.to_le_bytes());
    bad.extend_from_slice(b"junk!");
    bad.extend_from_slice(&frame(0, &[Request::Tso { count: 1 }])[1..]);
    bad.extend_from_slice(&(proto::MAX_FRAME_LEN as u32 + 1).to_le_bytes());
    add("frame_to_request", "malformed_then_oversized", bad);

    // wal_records: the log `LocalStore` writes.
    let record = |op: u8, key: &[u8], value: &[u8], out: &mut Vec<u8>| {
        let mut body = vec![op];
        body.extend_from_slice(&(key.len() as u32).to_le_bytes());
        body.extend_from_slice(key);
        body.extend_from_slice(value);
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
    };
    let mut wal = Vec::new();
    record(1, b"/meridian/1/tso/limit", b"1735689600000", &mut wal);
    record(1, b"/meridian/1/id/end", b"4096", &mut wal);
    record(2, b"/meridian/1/tso/limit", b"", &mut wal);
    record(1, b"/meridian/1/bootstrapped", b"1", &mut wal);
    // The parser's own encoder agrees with the layout written out above.
    let (parsed, good) = parse_records(&wal);
    assert_eq!((parsed.len(), good), (4, wal.len()));
    add("wal_records", "four_records", wal.clone());
    let mut torn = wal.clone();
    torn.truncate(wal.len() - 3);
    add("wal_records", "torn_tail", torn);
    let mut damaged = wal.clone();
    damaged[12] ^= 0xff;
    add("wal_records", "damaged_first_record", damaged);
    let mut zeros = wal;
    zeros.extend_from_slice(&[0; 64]);
    add("wal_records", "zero_filled_tail", zeros);

    // region_bucket: buckets as the persister writes them, and a store record.
    let bucket = |regions: &[Region]| encode_regions(regions).expect("a seed bucket encodes");
    add(
        "region_bucket",
        "one_region",
        bucket(std::slice::from_ref(&everything)),
    );
    add(
        "region_bucket",
        "three_adjacent",
        bucket(&[
            region(2, b"", b"g", 2),
            region(4, b"g", b"p", 3),
            region(1, b"p", b"", 3),
        ]),
    );
    add(
        "region_bucket",
        "overlapping_and_malformed",
        bucket(&[
            region(1, b"a", b"m", 1),
            region(2, b"f", b"z", 2),
            Region {
                peers: Vec::new(),
                ..region(3, b"x", b"y", 1)
            },
            Region {
                peers: peers(70, &(1..=MAX_PEERS as u64).collect::<Vec<_>>()),
                ..region(7, b"z", b"", 1)
            },
        ]),
    );
    add("region_bucket", "empty_bucket", bucket(&[]));
    add(
        "region_bucket",
        "store_record",
        encode_store(&store(4)).expect("a seed store encodes"),
    );

    // member_record: what a node publishes, one from before the gRPC front end, a bad address.
    let member = |grpc: &str, admin: &str| crate::proto::MemberInfo {
        name: "m0".into(),
        id: 7_131_642_219_453_013_345,
        client_url: "10.0.0.1:2379".into(),
        admin_url: admin.into(),
        grpc_url: grpc.into(),
    };
    add(
        "member_record",
        "with_grpc",
        encode_member(&member("https://10.0.0.1:2379", "https://10.0.0.1:2380")),
    );
    add(
        "member_record",
        "before_grpc",
        br#"{"admin_url":"https://[::1]:2380","client_url":"[::1]:2379","id":1,"name":"m1"}"#
            .to_vec(),
    );
    add(
        "member_record",
        "bad_admin_url",
        encode_member(&member("", "ftp://h:1/x")),
    );

    // pdpb_request: [kind] ++ protobuf body, every kind.
    let header = || {
        Some(pdpb::RequestHeader {
            cluster_id: 7,
            sender_id: 1,
            ..Default::default()
        })
    };
    let meta_region = |r: &Region| convert::region_to(r);
    let meta_store = |s: &Store| {
        convert::store_to(&StoreStatus {
            store: s.clone(),
            stats: StoreStats::default(),
            last_heartbeat_ms: 0,
        })
    };
    let bodies: Vec<Vec<u8>> = vec![
        pdpb::GetMembersRequest { header: header() }.encode_to_vec(),
        pdpb::TsoRequest {
            header: header(),
            count: 10,
            dc_location: String::new(),
        }
        .encode_to_vec(),
        pdpb::BootstrapRequest {
            header: header(),
            store: Some(meta_store(&store(1))),
            region: Some(meta_region(&Region {
                peers: vec![Peer {
                    id: 2,
                    store_id: 1,
                    role: PeerRole::Voter,
                }],
                leader: Some(2),
                ..region(3, b"", b"", 1)
            })),
        }
        .encode_to_vec(),
        pdpb::IsBootstrappedRequest { header: header() }.encode_to_vec(),
        pdpb::AllocIdRequest {
            header: header(),
            count: 1,
        }
        .encode_to_vec(),
        pdpb::GetStoreRequest {
            header: header(),
            store_id: 1,
        }
        .encode_to_vec(),
        pdpb::PutStoreRequest {
            header: header(),
            store: Some(meta_store(&store(4))),
        }
        .encode_to_vec(),
        pdpb::GetAllStoresRequest {
            header: header(),
            exclude_tombstone_stores: true,
        }
        .encode_to_vec(),
        pdpb::StoreHeartbeatRequest {
            header: header(),
            stats: Some(pdpb::StoreStats {
                store_id: 4,
                capacity: 1 << 40,
                available: 1 << 39,
                used_size: 1 << 30,
                region_count: 3,
                ..Default::default()
            }),
        }
        .encode_to_vec(),
        pdpb::RegionHeartbeatRequest {
            header: header(),
            leader: convert::leader_to(&everything),
            region: Some(meta_region(&everything)),
            bytes_written: 4096,
            approximate_size: 96 << 20,
            interval: Some(pdpb::TimeInterval {
                start_timestamp: 1_700_000_000,
                end_timestamp: 1_700_000_060,
            }),
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::GetRegionRequest {
            header: header(),
            region_key: b"k1".to_vec(),
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::GetRegionRequest {
            header: header(),
            region_key: b"m".to_vec(),
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::GetRegionByIdRequest {
            header: header(),
            region_id: 1,
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::QueryRegionRequest {
            header: header(),
            need_buckets: false,
            ids: vec![0, 1, 4],
            keys: vec![b"a".to_vec(), b"q".to_vec()],
            prev_keys: vec![b"g".to_vec()],
        }
        .encode_to_vec(),
        pdpb::ScanRegionsRequest {
            header: header(),
            start_key: b"a".to_vec(),
            limit: 10,
            end_key: b"z".to_vec(),
        }
        .encode_to_vec(),
        pdpb::BatchScanRegionsRequest {
            header: header(),
            ranges: vec![
                pdpb::KeyRange {
                    start_key: b"a".to_vec(),
                    end_key: b"c".to_vec(),
                },
                pdpb::KeyRange {
                    start_key: b"m".to_vec(),
                    end_key: Vec::new(),
                },
            ],
            limit: 0,
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::AskBatchSplitRequest {
            header: header(),
            region: Some(meta_region(&everything)),
            split_count: 2,
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::ReportBatchSplitRequest {
            header: header(),
            regions: vec![
                meta_region(&region(2, b"", b"m", 2)),
                meta_region(&region(1, b"m", b"", 2)),
            ],
        }
        .encode_to_vec(),
        pdpb::GetGcSafePointRequest { header: header() }.encode_to_vec(),
        pdpb::UpdateGcSafePointRequest {
            header: header(),
            safe_point: 42,
        }
        .encode_to_vec(),
        pdpb::UpdateServiceGcSafePointRequest {
            header: header(),
            service_id: b"cdc".to_vec(),
            ttl: 60,
            safe_point: 41,
        }
        .encode_to_vec(),
        pdpb::GetGcStateRequest {
            header: header(),
            keyspace_scope: Some(pdpb::KeyspaceScope {
                keyspace: Some(pdpb::keyspace_scope::Keyspace::KeyspaceId(0)),
            }),
            exclude_gc_barriers: false,
            include_global_gc_barriers: true,
        }
        .encode_to_vec(),
        pdpb::GetClusterInfoRequest {
            header: Some(pdpb::ResponseHeader {
                cluster_id: 7,
                error: None,
            }),
        }
        .encode_to_vec(),
    ];
    assert_eq!(bodies.len(), PDPB_KINDS.len(), "one seed per pdpb kind");
    for (kind, (name, body)) in PDPB_KINDS.iter().zip(bodies).enumerate() {
        let mut bytes = vec![kind as u8];
        bytes.extend_from_slice(&body);
        add("pdpb_request", name, bytes);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::frame::{drain, Refusal};
    use super::super::model::{serve, Model};
    use super::super::pdpb::pdpb_to_requests;
    use super::super::TARGETS;
    use super::*;
    use crate::election::decode_member;
    use crate::meta::local::next_valid_record;
    use crate::proto::FrameDecoder;
    use crate::server::placement::persist::{decode_regions, decode_store};

    fn seed(target: &str, name: &str) -> Vec<u8> {
        seeds()
            .into_iter()
            .find(|s| s.target == target && s.name == name)
            .unwrap_or_else(|| panic!("no seed {target}/{name}"))
            .bytes
    }

    /// The seeds are valid inputs, so fuzzing starts past the decoders' first checks.
    #[test]
    fn seeds_decode_to_what_they_were_made_of() {
        for s in seeds() {
            let input = &s.bytes;
            match s.target {
                "frame_to_request" => {
                    let mut decoder = FrameDecoder::new();
                    decoder.extend(&input[1..]);
                    let mut out = Vec::new();
                    drain(&mut decoder, &mut out);
                    if s.name == "malformed_then_oversized" {
                        assert!(out.contains(&Err(Refusal::Frame)), "{out:?}");
                    } else {
                        assert!(!out.is_empty() && out.iter().all(Result::is_ok), "{s:?}");
                    }
                }
                "wal_records" => {
                    // Whole records, or damage with a whole record after it.
                    let (records, good) = parse_records(input);
                    let found = !records.is_empty() || next_valid_record(input, good).is_some();
                    assert!(found, "{}", s.name);
                }
                "region_bucket" => assert!(
                    decode_regions(input).is_ok() || decode_store(input).is_ok(),
                    "{}",
                    s.name
                ),
                "member_record" => assert!(decode_member(input).is_some(), "{}", s.name),
                "pdpb_request" => {
                    let kind = usize::from(input[0]);
                    assert_eq!(PDPB_KINDS[kind], s.name);
                    let converted = pdpb_to_requests(kind, &input[1..]);
                    assert!(converted.is_some(), "{}", s.name);
                }
                other => panic!("a seed for an unknown target {other}"),
            }
            TARGETS
                .iter()
                .find(|(n, _)| *n == s.target)
                .map(|(_, f)| f(input))
                .expect("a target for every seed");
        }
    }

    /// The history seed reaches the map: splits, a batch split and a merge are applied.
    #[test]
    fn the_history_seed_builds_a_map() {
        let input = seed("frame_to_request", "history_in_7_byte_reads");
        let mut decoder = FrameDecoder::new();
        decoder.extend(&input[1..]);
        let mut out = Vec::new();
        drain(&mut decoder, &mut out);
        let mut model = Model::new(1);
        for req in out.iter().flatten() {
            serve(&mut model, req);
        }
        let ids: Vec<u64> = model.map.iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![2, 1]);
        assert_eq!(model.index.len(), 2);
    }
}
