//! The `region_bucket` target: placement's persisted region buckets and store records.

use crate::placement::{RangeIndex, Region, RegionShape, StoreMap, StoreStats, StoreStatus};
use crate::server::placement::persist::{
    decode_regions, decode_store, encode_regions, encode_store,
};

use super::model::NOW_MS;

/// A persisted value as a new leader's load reads it: a region bucket (then the index is
/// rebuilt from whatever it holds, resolving overlaps and malformed entries by the heartbeat
/// rules) and, from the same bytes, a store record (then the store map is reset to it).
pub fn region_bucket(data: &[u8]) {
    if let Ok(regions) = decode_regions(data) {
        let encoded = encode_regions(&regions)
            .unwrap_or_else(|e| panic!("decoded regions do not encode: {e}"));
        assert_eq!(decode_regions(&encoded).as_ref(), Ok(&regions));

        let index = RangeIndex::with_segment_size(2);
        let refused = index.reset(regions.clone());
        let snapshot = index.snapshot();

        assert!(snapshot.len() + refused <= regions.len());
        let held: Vec<Region> = snapshot.iter().map(|r| r.region()).collect();
        for pair in held.windows(2) {
            assert!(
                !pair[0].end_key.is_empty() && pair[0].end_key <= pair[1].start_key,
                "loaded overlap: {:?} {:?}",
                pair[0],
                pair[1]
            );
        }
        for r in &held {
            assert!(r.validate().is_ok(), "loaded a malformed region {r:?}");
            assert_eq!(snapshot.locate(&r.start_key).map(|x| x.id()), Some(r.id));
            assert_eq!(index.get(r.id).map(|x| x.region()).as_ref(), Some(r));
        }
    }
    if let Ok(store) = decode_store(data) {
        let encoded =
            encode_store(&store).unwrap_or_else(|e| panic!("a decoded store does not encode: {e}"));
        assert_eq!(decode_store(&encoded).as_ref(), Ok(&store));
        let mut map = StoreMap::new();
        let id = store.id;
        map.reset(
            vec![StoreStatus {
                store,
                stats: StoreStats::default(),
                last_heartbeat_ms: NOW_MS,
            }],
            None,
            NOW_MS,
        );
        assert!(map.get(id).is_some());
    }
}
