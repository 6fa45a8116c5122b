//! The latest buckets of each region, as PD keeps them: in memory only (a leader reports its
//! region's again every ten seconds), replaced only by a strictly newer version, kept by region
//! id across heartbeats, splits and merges until a newer report comes (as PD's
//! `RegionInfo.Inherit` keeps them), and dropped with the region. Sizes are `Limits`', checked
//! where a report enters. Pure.

use std::collections::HashMap;
use std::sync::Arc;

pub use meridian_client::placement::Buckets;

#[derive(Debug, Default)]
pub struct BucketsMap {
    by_region: HashMap<u64, Arc<Buckets>>,
}

impl BucketsMap {
    /// Keeps `buckets` unless the known ones are as new or newer (PD's version rule); returns
    /// whether they were kept. A report without keys is no report.
    pub fn offer(&mut self, buckets: Buckets) -> bool {
        if buckets.keys.is_empty() {
            return false;
        }
        if let Some(known) = self.by_region.get(&buckets.region_id) {
            if buckets.version <= known.version {
                return false;
            }
        }
        self.by_region.insert(buckets.region_id, Arc::new(buckets));
        true
    }

    pub fn get(&self, region_id: u64) -> Option<Arc<Buckets>> {
        self.by_region.get(&region_id).cloned()
    }

    pub fn len(&self) -> usize {
        self.by_region.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_region.is_empty()
    }

    /// Drops the buckets of every region `exists` no longer knows.
    pub fn retain_regions(&mut self, exists: impl Fn(u64) -> bool) {
        self.by_region.retain(|id, _| exists(*id));
    }

    pub fn clear(&mut self) {
        self.by_region.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(region_id: u64, version: u64, keys: &[&[u8]]) -> Buckets {
        Buckets {
            region_id,
            version,
            keys: keys.iter().map(|k| k.to_vec()).collect(),
        }
    }

    #[test]
    fn only_a_newer_version_replaces_and_gone_regions_are_dropped() {
        let mut m = BucketsMap::default();
        assert!(!m.offer(b(1, 5, &[])), "no keys: no report");
        assert!(m.offer(b(1, 5, &[b"", b"m", b""])));
        assert!(!m.offer(b(1, 5, &[b"", b"x", b""])), "same version");
        assert!(!m.offer(b(1, 4, &[b"", b"x", b""])), "older");
        assert_eq!(m.get(1).unwrap().keys[1], b"m");
        assert!(m.offer(b(1, 6, &[b"", b"x", b""])));
        assert_eq!(m.get(1).unwrap().keys[1], b"x");
        assert!(m.offer(b(2, 1, &[b"a", b"b"])));
        m.retain_regions(|id| id == 2);
        assert_eq!((m.get(1), m.len()), (None, 1));
    }
}
