//! kvproto's `metapb` records as a test sends them to PD (Bootstrap, PutStore, heartbeats,
//! splits): a store, a peer and a region with the fields PD reads set and the rest at their
//! defaults. Owns only
//! their shape; which ids and keys a test uses is the test's.

use crate::kvproto::metapb;

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
