//! The reference model of the range index: every known region by id and an ordered map from
//! start key to region, applying the heartbeat rules P1 and P2 (ARCHITECTURE.md) in the
//! plainest form: a report older than what it would replace changes nothing; a newer one
//! replaces every region it overlaps, so no key is ever covered twice. The property tests
//! check `RangeIndex` against it, and the lookup bench times it as the one-mutex baseline.
//! Serves no request: the server routes with `RangeIndex`, which owns P1 and P2.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use super::region::{Region, RegionError, RegionShape};

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RegionMap {
    by_start: BTreeMap<Vec<u8>, u64>,
    regions: HashMap<u64, Region>,
}

/// What a heartbeat changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Regions it displaced (overlapped and older), other than itself.
    pub removed: Vec<u64>,
    /// Whether its range or epoch is new (what must be persisted), as opposed to a refresh of
    /// leader, peers' stats or sizes.
    pub epoch_changed: bool,
}

impl RegionMap {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.regions.len()
    }

    pub fn get(&self, id: u64) -> Option<&Region> {
        self.regions.get(&id)
    }

    /// Regions in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Region> {
        self.by_start.values().filter_map(|id| self.regions.get(id))
    }

    /// The region whose range holds `key`.
    pub fn locate(&self, key: &[u8]) -> Option<&Region> {
        let (_, id) = self
            .by_start
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()?;
        self.regions.get(id).filter(|r| r.contains(key))
    }

    /// The region just before the one holding `key` (adjacent: its end is that one's start).
    pub fn prev(&self, key: &[u8]) -> Option<&Region> {
        let current = self.locate(key)?;
        let (_, id) = self
            .by_start
            .range::<[u8], _>((
                Bound::Unbounded,
                Bound::Excluded(current.start_key.as_slice()),
            ))
            .next_back()?;
        self.regions
            .get(id)
            .filter(|r| r.end_key == current.start_key)
    }

    /// Regions overlapping `[start, end)` (empty `end`: to the end) in key order; `limit` 0 means
    /// no limit.
    pub fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Vec<&Region> {
        if !end.is_empty() && end <= start {
            return Vec::new();
        }
        let probe = Region {
            id: 0,
            start_key: start.to_vec(),
            end_key: end.to_vec(),
            epoch: Default::default(),
            peers: Vec::new(),
            leader: None,
        };
        let ids = self.overlapping(&probe);
        let take = if limit == 0 { ids.len() } else { limit };
        ids.into_iter()
            .take(take)
            .filter_map(|id| self.regions.get(&id))
            .collect()
    }

    /// Applies a leader's heartbeat (P1, P2). On error nothing changed.
    pub fn apply(&mut self, region: Region) -> Result<Applied, RegionError> {
        region.validate()?;
        let known = self.regions.get(&region.id);
        if let Some(known) = known {
            if region.epoch.is_stale_against(&known.epoch) {
                return Err(RegionError::StaleEpoch {
                    id: region.id,
                    got: region.epoch,
                    known: known.epoch,
                });
            }
        }
        let overlapping = self.overlapping(&region);
        for id in &overlapping {
            if *id == region.id {
                continue;
            }
            let other = &self.regions[id];
            if region.epoch.version < other.epoch.version {
                return Err(RegionError::StaleEpoch {
                    id: region.id,
                    got: region.epoch,
                    known: other.epoch,
                });
            }
        }
        let epoch_changed = known.is_none_or(|k| {
            k.epoch != region.epoch
                || k.start_key != region.start_key
                || k.end_key != region.end_key
        });
        let mut removed = Vec::new();
        for id in overlapping.into_iter().chain(std::iter::once(region.id)) {
            if let Some(old) = self.regions.remove(&id) {
                if self.by_start.get(&old.start_key) == Some(&id) {
                    self.by_start.remove(&old.start_key);
                }
                if id != region.id {
                    removed.push(id);
                }
            }
        }
        self.by_start.insert(region.start_key.clone(), region.id);
        self.regions.insert(region.id, region);
        Ok(Applied {
            removed,
            epoch_changed,
        })
    }

    /// Ids of the regions overlapping `region`'s range, in key order.
    fn overlapping(&self, region: &Region) -> Vec<u64> {
        let mut ids = Vec::new();
        // The region starting at or before `start` may reach into the range.
        if let Some((_, id)) = self
            .by_start
            .range::<[u8], _>((
                Bound::Unbounded,
                Bound::Included(region.start_key.as_slice()),
            ))
            .next_back()
        {
            if self.regions.get(id).is_some_and(|r| r.overlaps(region)) {
                ids.push(*id);
            }
        }
        let upper = if region.end_key.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(region.end_key.as_slice())
        };
        for (_, id) in self
            .by_start
            .range::<[u8], _>((Bound::Excluded(region.start_key.as_slice()), upper))
        {
            ids.push(*id);
        }
        ids
    }
}
