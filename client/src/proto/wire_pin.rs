//! The wire format, pinned to the ALPN id. A frame is an rkyv archive whose root is read at the
//! end of the bytes by the archived type's size, so a build whose `Request` or `Response` lays
//! out differently does not refuse another build's frames: it reads them as other messages (a
//! client of an older layout had its `IsBootstrapped` answered as a `Ping`). The ALPN id is what
//! keeps two layouts apart, by failing the handshake; this test fails when the layout changes
//! and the id does not.

use std::sync::Arc;

use super::*;
use crate::placement::{
    Epoch, Operator, Peer, PeerRole, Region, RegionStats, Split, SplitPolicy, Store, StoreDetails,
    StoreState, StoreStats, TimeInterval,
};

/// The ALPN id and the digest of the layout it names. When the digest changes, the layout did:
/// give the ALPN id a new number and pin both.
const PINNED: (&[u8], u64) = (b"meridian/5", 0x3959_cc4a_e2ec_ef56);

/// FNV-1a, 64 bits: enough to notice a change, with no dependency.
fn fnv1a(bytes: &[u8], mut hash: u64) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn region() -> Region {
    Region {
        id: 7,
        start_key: b"a".to_vec(),
        end_key: b"b".to_vec(),
        epoch: Epoch {
            conf_ver: 2,
            version: 3,
        },
        peers: vec![Peer {
            id: 8,
            store_id: 1,
            role: PeerRole::Voter,
        }],
        leader: Some(8),
    }
}

fn store() -> Store {
    Store {
        id: 1,
        address: "127.0.0.1:20160".into(),
        labels: Vec::new(),
        state: StoreState::Up,
        details: Arc::new(StoreDetails {
            version: "8.5.0".into(),
            ..StoreDetails::default()
        }),
    }
}

/// The layout's fingerprint: the archived sizes and alignments of the messages, and the bytes
/// of the requests and replies every client sends and reads.
fn digest() -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325;
    for n in [
        std::mem::size_of::<ArchivedRequest>(),
        std::mem::align_of::<ArchivedRequest>(),
        std::mem::size_of::<ArchivedResponse>(),
        std::mem::align_of::<ArchivedResponse>(),
    ] {
        hash = fnv1a(&(n as u64).to_le_bytes(), hash);
    }
    let requests = [
        Request::Ping,
        Request::Tso { count: 3 },
        Request::GetMembers,
        Request::IsBootstrapped,
        Request::PutStore {
            store: Box::new(store()),
        },
        Request::StoreHeartbeat {
            store_id: 1,
            stats: StoreStats::default(),
        },
        Request::RegionHeartbeat {
            region: region(),
            stats: RegionStats {
                written_bytes: 4096,
                interval: TimeInterval {
                    start_s: 1_700_000_000,
                    end_s: 1_700_000_060,
                },
                ..RegionStats::default()
            },
        },
        Request::GetRegion { key: b"k".to_vec() },
        Request::GetRegionById { id: 7 },
        Request::ScanRegions {
            start: Vec::new(),
            end: Vec::new(),
            limit: 10,
        },
    ];
    let replies = [
        Response::Ok(Reply::Pong),
        Response::Ok(Reply::Tso { first: 1, count: 3 }),
        Response::Ok(Reply::Bootstrapped(true)),
        Response::Ok(Reply::Region(Some(region()))),
        Response::Ok(Reply::RegionHeartbeat {
            operator: Some(Operator::TransferLeader(Peer {
                id: 9,
                store_id: 2,
                role: PeerRole::Voter,
            })),
        }),
        // The rarer steps' layouts are the wire's too.
        Response::Ok(Reply::RegionHeartbeat {
            operator: Some(Operator::Split(Box::new(Split {
                policy: SplitPolicy::Approximate,
                keys: vec![b"m".to_vec()],
            }))),
        }),
        Response::Err(ErrorReply::NotBootstrapped),
    ];
    let mut scratch = rkyv::util::AlignedVec::new();
    let mut frames = Vec::new();
    for r in &requests {
        encode(r, &mut scratch, &mut frames).expect("a sample request encodes");
    }
    for r in &replies {
        encode(r, &mut scratch, &mut frames).expect("a sample reply encodes");
    }
    fnv1a(&frames, hash)
}

#[test]
fn the_wire_layout_is_the_one_its_alpn_id_names() {
    let now = digest();
    assert_eq!(
        (ALPN, now),
        PINNED,
        "the wire layout changed (digest {now:#018x}): give ALPN a new number and pin both"
    );
}
