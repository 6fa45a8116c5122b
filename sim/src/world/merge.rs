//! PD's side of merging: the region map PD keeps from the leaders' reports (the server's own
//! range index, which drops a region once a newer report covers its range, as it drops a
//! merge's source on the target's report), the neighbours the merge checker reads from it,
//! the target's operator of a merge pair, the keys a scenario deletes (which shrink regions)
//! and the floor a merge scenario is measured against.
//!
//! Must not: carry out a merge (that is TiKV's side, in `tikv_merge`), or decide one (the
//! scheduler does).

use meridian::placement::schedule::{self, Dispatch, Neighbour, Neighbours, Pending};
use meridian::placement::OpKind;

use super::Sim;

/// Approximate keys for a size: TiKV's defaults put 960,000 keys in a 96 MiB region.
pub(super) fn keys_of(size_mib: u64) -> u64 {
    size_mib * 10_000
}

impl Sim {
    /// A changed report of region `i` reaches PD's region map; regions it covers are dropped,
    /// their operators with them.
    pub(super) fn pd_apply(&mut self, i: usize) {
        let Ok(change) = self.index.apply(self.regions[i].region.clone()) else {
            return;
        };
        for id in change.removed {
            if let Some(j) = self.region_index(id) {
                self.drop_operator(j);
                self.forget_flow(j);
            }
        }
    }

    fn drop_operator(&mut self, j: usize) {
        if let Some(kind) = self.regions[j].slot.as_ref().map(|p| p.kind) {
            let mut slot = self.regions[j].slot.take();
            schedule::cancel(&self.cluster(), &mut slot);
            self.live[kind.index()] -= 1;
        }
    }

    /// Region `i`'s neighbours (before, after) in PD's region map, when they are small
    /// enough to matter: the checker reads them only for a small region.
    pub(super) fn neighbours(&self, i: usize) -> Neighbours {
        let r = &self.regions[i];
        if r.size_mib > self.cfg.max_merge_region_size_mib {
            return Neighbours::default();
        }
        let snap = self.index.snapshot();
        let seen = |route: &meridian::placement::Route| {
            let j = self.region_index(route.id())?;
            let size_mib = self.regions[j].size_mib;
            Some(Neighbour {
                region: route.region(),
                size_mib,
                keys: keys_of(size_mib),
                busy: self.regions[j].slot.is_some(),
            })
        };
        Neighbours(snap.neighbours(&r.region).map(|x| x.and_then(|x| seen(x))))
    }

    /// What a patrol call did to a merge pair: the target's operator goes in its slot, and
    /// a merge that ended undone takes its partner's operator with it.
    pub(super) fn merge_pair(&mut self, d: &mut Dispatch) {
        if let Some((id, op)) = d.merge_target.take() {
            self.start_target(id, op);
        }
        if let Some(j) = d.merge_partner.and_then(|id| self.region_index(id)) {
            let merge = self.regions[j]
                .slot
                .as_ref()
                .is_some_and(|p| p.kind == OpKind::Merge);
            if merge {
                self.drop_operator(j);
            }
        }
    }

    fn start_target(&mut self, id: u64, op: Box<Pending>) {
        let Some(j) = self
            .region_index(id)
            .filter(|j| self.regions[*j].slot.is_none())
        else {
            // The checker chose a target with no operator; should one have come since, the
            // target's operator is not started and its count is given back.
            let c = self.cluster();
            schedule::cancel(&c, &mut Some(op));
            return;
        };
        self.started(&op, 0);
        self.regions[j].slot = Some(op);
    }

    /// Keys of the first half of the key space are deleted: those regions' sizes drop to
    /// nothing. The floor: every emptied region but one merged away, as many at once as the
    /// merge cap allows (a pair counts twice, as PD counts it), each taking at least the
    /// moves that match its peers to its neighbour's and the merge itself; and none before
    /// split-merge-interval from the scheduler's start.
    pub(super) fn delete_half(&mut self) {
        let half = self.regions.len() / 2;
        self.delete_range(1, half as u64);
        let mut differing = 0usize;
        for i in 0..half {
            if i + 1 < self.regions.len() {
                let (a, b) = (&self.regions[i].region, &self.regions[i + 1].region);
                differing += a
                    .peers
                    .iter()
                    .filter(|p| !b.peers.iter().any(|q| q.store_id == p.store_id))
                    .count();
            }
        }
        let merges = half.saturating_sub(1) as f64;
        let t = &self.scn.timing;
        let moves = differing as f64 / half.max(1) as f64;
        let one_ms = moves * t.catch_up_ms as f64 + (t.transfer_leader_ms + t.merge_ms) as f64;
        let pairs = (self.cfg.merge_schedule_limit / 2).max(1) as f64;
        let wait_ms = self.cfg.split_merge_interval_ms.saturating_sub(self.now) as f64;
        self.floor_s = (merges / pairs * one_ms + wait_ms) / 1000.0;
        self.min_moves = 0;
        self.merge_start_regions = Some(self.live_regions);
    }

    /// Keys of the starting regions `from` to `to` (ids, both included) are deleted: each
    /// region keeps the share of its size outside that range. The run is not judged
    /// converged before the merge checker may act and has passed over every region once.
    pub(super) fn delete_range(&mut self, from: u64, to: u64) {
        let n = self.regions.len() as u64;
        let (lo, hi) = (from.saturating_sub(1), to.min(n));
        for i in 0..self.regions.len() {
            let r = &self.regions[i];
            if r.gone {
                continue;
            }
            let (a, b) = (unit(&r.region.start_key, 0), unit(&r.region.end_key, n));
            let overlap = hi.min(b).saturating_sub(lo.max(a));
            if overlap == 0 || b <= a {
                continue;
            }
            let size = r.size_mib - r.size_mib * overlap / (b - a);
            self.change(i, |r| r.size_mib = size);
        }
        self.keys_deleted = true;
    }
}

/// Where `key` falls in the starting regions' numbering: `key(i)` (`mod.rs`) starts the
/// region of index i; an empty key is `empty` (the key space's start or end).
fn unit(key: &[u8], empty: u64) -> u64 {
    if key.is_empty() {
        return empty;
    }
    std::str::from_utf8(&key[1..])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(empty)
}
