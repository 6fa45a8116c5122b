//! TiKV's side of a merge: the source's leader takes PD's `Merge` (PrepareMerge), checked
//! against the target as it stands, and after `merge_ms` the target commits it (CommitMerge):
//! the source is gone, the target's range covers both, its version is one past the larger of
//! the two (the event loop has it report at once). The safety check sees every merge TiKV is asked to make.
//!
//! Must not: call the scheduler or touch PD's region map (PD learns of the merge from the
//! target's report, in `merge`).

use meridian::placement::Region;

use super::Sim;
use crate::queue::Event;

impl Sim {
    /// The source `i`'s leader is sent a merge into `target` (PD's view of it).
    pub(super) fn prepare_merge(&mut self, i: usize, target: &Region) {
        let Some(j) = self.region_index(target.id) else {
            return;
        };
        if self.regions[i].merging || self.regions[j].gone || i == j {
            return;
        }
        // Every merge asked of TiKV is checked against the target as it is now.
        let (src, tgt) = (&self.regions[i].region, &self.regions[j].region);
        self.check.merge(self.now, src, tgt);
        // TiKV refuses a merge whose target it does not find as PD described it (a stale
        // epoch), that does not touch the source, or whose peers are not on the same stores.
        let touching = (!src.end_key.is_empty() && src.end_key == tgt.start_key)
            || (!tgt.end_key.is_empty() && tgt.end_key == src.start_key);
        let same = meridian::placement::schedule::safety::check_merge(src, tgt).is_none();
        if tgt.epoch != target.epoch || !touching || !same {
            return;
        }
        self.regions[i].merging = true;
        let at = self.now + self.scn.timing.merge_ms;
        self.q.push(
            at,
            Event::Merged {
                source: i as u32,
                target: j as u32,
            },
        );
    }

    /// The target `j` commits the merge of `i`.
    pub(super) fn commit_merge(&mut self, i: usize, j: usize) {
        self.regions[i].merging = false;
        if self.regions[i].gone || self.regions[j].gone {
            return;
        }
        let src = self.regions[i].region.clone();
        let version = src.epoch.version.max(self.regions[j].region.epoch.version) + 1;
        let size = self.regions[i].size_mib;
        self.change(j, |r| {
            if src.end_key == r.region.start_key {
                r.region.start_key = src.start_key.clone();
            } else {
                r.region.end_key = src.end_key.clone();
            }
            r.region.epoch.version = version;
            r.size_mib += size;
        });
        for p in &src.peers {
            let s = &mut self.stores[(p.store_id - 1) as usize];
            s.peers -= 1;
            if Some(p.id) == src.leader {
                s.leaders -= 1;
            }
        }
        self.change(i, |r| r.gone = true);
        self.live_regions -= 1;
        self.merges += 1;
    }

    /// The simulator's index of region `id` (ids are never reused: regions only merge).
    pub(super) fn region_index(&self, id: u64) -> Option<usize> {
        let i = usize::try_from(id.checked_sub(1)?).ok()?;
        (i < self.regions.len() && self.regions[i].region.id == id).then_some(i)
    }
}
