//! kvproto's records as a test sends them to PD (Bootstrap, PutStore, heartbeats, splits,
//! ReportBuckets): a store, a peer, a region and a buckets report with the fields PD reads set
//! and the rest at their defaults. Owns only
//! their shape; which ids and keys a test uses is the test's.

use crate::kvproto::{metapb, pdpb};

/// TiKV store `id` as it registers: at `127.0.0.1:{20160 + id}`, version 8.5.0.
pub fn metapb_store(id: u64) -> metapb::Store {
    metapb::Store {
        id,
        address: format!("127.0.0.1:{}", 20160 + id),
        version: "8.5.0".into(),
        ..Default::default()
    }
}

/// A voter `id` on store `store_id`.
pub fn metapb_peer(id: u64, store_id: u64) -> metapb::Peer {
    metapb::Peer {
        id,
        store_id,
        ..Default::default()
    }
}

/// Region `id` over `start..end` (empty: unbounded) at epoch `(conf_ver, version)`.
pub fn metapb_region(
    id: u64,
    start: &[u8],
    end: &[u8],
    (conf_ver, version): (u64, u64),
    peers: Vec<metapb::Peer>,
) -> metapb::Region {
    metapb::Region {
        id,
        start_key: start.to_vec(),
        end_key: end.to_vec(),
        region_epoch: Some(metapb::RegionEpoch { conf_ver, version }),
        peers,
        ..Default::default()
    }
}

/// A store's report of region `region_id`'s buckets at `version`, split at `keys` (the first
/// and last are the region's bounds), with TiKV's 10 s period.
pub fn buckets_report(
    header: Option<pdpb::RequestHeader>,
    region_id: u64,
    version: u64,
    keys: &[&[u8]],
) -> pdpb::ReportBucketsRequest {
    pdpb::ReportBucketsRequest {
        header,
        region_epoch: None,
        buckets: Some(metapb::Buckets {
            region_id,
            version,
            keys: keys.iter().map(|k| k.to_vec()).collect(),
            period_in_ms: 10_000,
            ..Default::default()
        }),
    }
}
