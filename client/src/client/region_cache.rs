//! The client's region cache: regions by start key, so most `get_region` calls never leave
//! the process. An entry goes when the cluster says it is stale (StaleEpoch), when the leader
//! changes (NotLeader: the new leader's view is reloaded), or when the caller says so.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Mutex;

use crate::placement::Region;

#[derive(Default)]
pub(crate) struct RegionCache {
    by_start: Mutex<BTreeMap<Vec<u8>, Region>>,
}

impl RegionCache {
    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<u8>, Region>> {
        self.by_start.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn locate(&self, key: &[u8]) -> Option<Region> {
        let map = self.map();
        let (_, r) = map
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()?;
        r.contains(key).then(|| r.clone())
    }

    /// Caches `region`, dropping every cached region it overlaps.
    pub fn insert(&self, region: Region) {
        let mut map = self.map();
        let start = region.start_key.as_slice();
        let mut overlapping: Vec<Vec<u8>> = map
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(start)))
            .next_back()
            .filter(|(_, r)| r.overlaps(&region))
            .map(|(k, _)| vec![k.clone()])
            .unwrap_or_default();
        let end = if region.end_key.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(region.end_key.as_slice())
        };
        overlapping.extend(
            map.range::<[u8], _>((Bound::Excluded(start), end))
                .map(|(k, _)| k.clone()),
        );
        for k in overlapping {
            map.remove(&k);
        }
        map.insert(region.start_key.clone(), region);
    }

    pub fn invalidate(&self, id: u64) {
        self.map().retain(|_, r| r.id != id);
    }

    pub fn clear(&self) {
        self.map().clear();
    }
}
