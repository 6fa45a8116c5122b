//! The key-range index every core routes with: start key -> region, read without locks and
//! written one change set at a time under the heartbeat rules P1 and P2.
//!
//! Readers load one immutable [`Snapshot`] through an atomic pointer (`arc-swap`), so a reader
//! sees either all of a change set or none of it: never two regions for one key, never a gap a
//! split did not create. The writer copies the snapshot's spine (per segment of up to 2 *
//! [`SEGMENT`] regions a first start and a one-line `Segment`), edits only the segments a
//! change touches (copy-on-write), and publishes. Lookups search 16-byte big-endian key
//! prefixes without data-dependent branches: the segments' first starts (a dense array, 1 MB
//! at 1M regions), then the segment's line (its group pivots and blocks pointer), then
//! one group's block (8 starts and their route pointers), then the route, whose end prefix it
//! carries. Memory is what a lookup waits on (a cache miss costs 100-215 ns on the machines
//! this runs on, and a core has about ten misses in flight at most: tuning.md), so past
//! the spine a lookup reads five cache lines in three dependent steps, each requested whole;
//! full keys are compared only when prefixes tie.
//!
//! Owns: the range -> region mapping and P1/P2. Must not hold per-region statistics, pending
//! operators or anything a heartbeat changes without changing the route: those belong to the
//! owning shard, so the index is written only when a route changes.

use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;

use super::change_log::{ChangeLog, Since};
use super::dense_map::DenseIdMap;
use super::prefix_search::{count_le, narrow, prefetch_line, prefix, settle};
use super::region::{Region, RegionError, RegionShape};
pub use super::route::Route;
use super::segment::{Block, Entries, Segment, MAX_SEGMENT};

/// Regions per segment; a segment splits at twice this.
pub const SEGMENT: usize = 16;
const _: () = assert!(SEGMENT <= MAX_SEGMENT);

/// Keys searched in lockstep by `locate_many`: a lookup reads 5 lines past the spine, and 12
/// keys keep more of those misses in flight than 8 (measured: docs/tuning-history.md).
pub const LANES: usize = 12;

/// What a change did.
#[derive(Debug, Clone)]
pub struct Change {
    /// The route now in the index.
    pub route: Arc<Route>,
    /// Regions displaced (overlapped by a newer report), other than the region itself.
    pub removed: Vec<u64>,
    /// Whether range or epoch changed (what must be persisted), as opposed to the leader or
    /// peer roles under the same epoch.
    pub epoch_changed: bool,
}

/// One consistent view of the index. No segment is empty.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Target segment length (a segment splits at twice this).
    segment: usize,
    firsts: Vec<u128>,
    segments: Vec<Segment>,
    len: usize,
}

/// A position: segment and index in it.
type Pos = (usize, usize);

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            segment: SEGMENT,
            firsts: Vec::new(),
            segments: Vec::new(),
            len: 0,
        }
    }
}

impl Snapshot {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segment holding the entry that starts last at or before `key`.
    fn segment_of(&self, key: &[u8], kp: u128) -> Option<usize> {
        count_le(&self.firsts, kp, |i| self.segments[i].start_le(0, key)).checked_sub(1)
    }

    /// The entry that starts last at or before `key`.
    fn floor(&self, key: &[u8], kp: u128) -> Option<Pos> {
        let s = self.segment_of(key, kp)?;
        let i = self.segments[s].count_le(key, kp).checked_sub(1)?;
        Some((s, i))
    }

    fn route(&self, (s, i): Pos) -> &Arc<Route> {
        self.segments[s].route(i)
    }

    fn next(&self, (s, i): Pos) -> Option<Pos> {
        if i + 1 < self.segments[s].len() {
            Some((s, i + 1))
        } else if s + 1 < self.segments.len() {
            Some((s + 1, 0))
        } else {
            None
        }
    }

    fn prev_pos(&self, (s, i): Pos) -> Option<Pos> {
        if i > 0 {
            Some((s, i - 1))
        } else if s > 0 {
            Some((s - 1, self.segments[s - 1].len() - 1))
        } else {
            None
        }
    }

    fn first(&self) -> Option<Pos> {
        (!self.segments.is_empty()).then_some((0, 0))
    }

    /// The region whose range holds `key`.
    pub fn locate(&self, key: &[u8]) -> Option<&Arc<Route>> {
        let kp = prefix(key);
        let (s, i) = self.floor(key, kp)?;
        let seg = &self.segments[s];
        seg.covers(i, key, kp).then(|| seg.route(i))
    }

    /// `locate` for many keys at once, answers in order. [`LANES`] keys advance through the
    /// searches together, one halving step for all of them before the next, so the cache
    /// misses of different keys are in flight at the same time instead of one after another.
    pub fn locate_many<'a, K: AsRef<[u8]>>(
        &'a self,
        keys: &[K],
        out: &mut Vec<Option<&'a Arc<Route>>>,
    ) {
        if self.segments.is_empty() {
            out.extend(keys.iter().map(|_| None));
            return;
        }
        for chunk in keys.chunks(LANES) {
            let lanes = 0..chunk.len();
            let mut kp = [0u128; LANES];
            for (p, key) in kp.iter_mut().zip(chunk) {
                *p = prefix(key.as_ref());
            }
            // The segment: the same sequence of step sizes for every key.
            let mut base = [0usize; LANES];
            let mut size = self.firsts.len();
            while size > 1 {
                let next = size - size / 2;
                for i in lanes.clone() {
                    narrow(&self.firsts, kp[i], &mut base[i], size);
                    prefetch_line(self.firsts.as_ptr().wrapping_add(base[i] + next / 2));
                }
                size = next;
            }
            let mut seg: [Option<&Segment>; LANES] = [None; LANES];
            for i in lanes.clone() {
                let key = chunk[i].as_ref();
                let n = settle(&self.firsts, kp[i], base[i], |j| {
                    self.segments[j].start_le(0, key)
                });
                seg[i] = n.checked_sub(1).map(|s| &self.segments[s]);
                if let Some(segment) = seg[i] {
                    prefetch_line(segment);
                }
            }
            // Within the segment: the group's block, then the entry, every key a step at a
            // time. A key here is at or after its segment's first start.
            let mut block: [Option<&Block>; LANES] = [None; LANES];
            for i in lanes.clone() {
                block[i] = seg[i].map(|s| s.block(s.group_of(chunk[i].as_ref(), kp[i])));
                if let Some(b) = block[i] {
                    b.prefetch();
                }
            }
            let mut route = [None; LANES];
            for i in lanes.clone() {
                if let Some(b) = block[i] {
                    let n = b.count_le(chunk[i].as_ref(), kp[i]);
                    route[i] = n.checked_sub(1).and_then(|j| b.route(j));
                    if let Some(r) = route[i] {
                        // The caller reads the route found: have it on the way too.
                        prefetch_line(Arc::as_ptr(r));
                    }
                }
            }
            for i in lanes {
                out.push(route[i].filter(|r| r.covers(chunk[i].as_ref(), kp[i])));
            }
        }
    }

    /// The region just before the one holding `key`, when the two are adjacent.
    pub fn prev(&self, key: &[u8]) -> Option<&Arc<Route>> {
        let kp = prefix(key);
        let pos = self.floor(key, kp)?;
        if !self.segments[pos.0].covers(pos.1, key, kp) {
            return None;
        }
        let current = self.route(pos);
        let before = self.route(self.prev_pos(pos)?);
        (before.end_key() == current.start_key()).then_some(before)
    }

    /// The regions right before and right after `region`'s range (the merge checker's
    /// neighbours), each when adjacent to it.
    pub fn neighbours(&self, region: &Region) -> [Option<&Arc<Route>>; 2] {
        let next = if region.end_key.is_empty() {
            None
        } else {
            self.locate(&region.end_key)
                .filter(|r| r.start_key() == region.end_key.as_slice())
        };
        [self.prev(&region.start_key), next]
    }

    /// Regions overlapping `[start, end)` (empty `end`: to the end) in key order, at most
    /// `limit` (0: no limit).
    pub fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Vec<Arc<Route>> {
        let limit = if limit == 0 { usize::MAX } else { limit };
        let mut out = Vec::new();
        if !end.is_empty() && end <= start {
            return out;
        }
        let mut pos = match self.floor(start, prefix(start)) {
            Some(p) if self.route(p).contains(start) => Some(p),
            Some(p) => self.next(p),
            None => self.first(),
        };
        while let Some(p) = pos {
            let r = self.route(p);
            if out.len() >= limit || (!end.is_empty() && r.start_key() >= end) {
                break;
            }
            out.push(r.clone());
            pos = self.next(p);
        }
        out
    }

    /// Every route in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Route>> {
        self.segments.iter().flat_map(|s| s.routes())
    }

    /// Positions of the entries overlapping `region`'s range, first and last.
    fn overlap_run(&self, region: &Region) -> Option<(Pos, Pos)> {
        let start = &region.start_key;
        let mut pos = match self.floor(start, prefix(start)) {
            Some(p) if self.route(p).overlaps(region) => Some(p),
            Some(p) => self.next(p),
            None => self.first(),
        };
        let mut run = None;
        while let Some(p) = pos {
            if !self.route(p).overlaps(region) {
                break;
            }
            run = Some((run.map_or(p, |(a, _)| a), p));
            pos = self.next(p);
        }
        run
    }

    // ---- writer-side edits; they keep `firsts` and `len` in step ----

    /// Edits segment `s` (a copy: readers may hold the old one) and restores the segment
    /// invariants: none empty, none over twice the target length, `firsts` in step.
    fn edit(&mut self, s: usize, f: impl FnOnce(&mut Entries)) {
        let mut entries = self.segments[s].unpack();
        f(&mut entries);
        if entries.len() == 0 {
            self.segments.remove(s);
            self.firsts.remove(s);
            return;
        }
        if entries.len() > 2 * self.segment {
            let tail = entries.split_off(self.segment).pack();
            self.firsts.insert(s + 1, tail.first());
            self.segments.insert(s + 1, tail);
        }
        let seg = entries.pack();
        self.firsts[s] = seg.first();
        self.segments[s] = seg;
    }

    /// Appends a full run of entries (a load builds the snapshot in key order).
    fn push(&mut self, entries: Entries) {
        self.len += entries.len();
        let seg = entries.pack();
        self.firsts.push(seg.first());
        self.segments.push(seg);
    }

    /// Removes the entries from `a` through `b` inclusive.
    fn remove_run(&mut self, a: Pos, b: Pos) {
        self.len -= self.count_between(a, b);
        if a.0 == b.0 {
            self.edit(a.0, |e| e.drain(a.1..b.1 + 1));
            return;
        }
        // Tail of the last segment first, so earlier indices stay valid.
        self.edit(b.0, |e| e.drain(0..b.1 + 1));
        self.segments.drain(a.0 + 1..b.0);
        self.firsts.drain(a.0 + 1..b.0);
        self.edit(a.0, |e| {
            let len = e.len();
            e.drain(a.1..len)
        });
    }

    fn count_between(&self, a: Pos, b: Pos) -> usize {
        if a.0 == b.0 {
            return b.1 - a.1 + 1;
        }
        let middle: usize = (a.0 + 1..b.0).map(|s| self.segments[s].len()).sum();
        (self.segments[a.0].len() - a.1) + middle + b.1 + 1
    }

    /// Inserts a route whose range overlaps nothing in the snapshot.
    fn insert(&mut self, route: Arc<Route>) {
        if self.segments.is_empty() {
            let mut entries = Entries::default();
            entries.insert(0, route);
            self.push(entries);
            return;
        }
        self.len += 1;
        let start = route.start_key();
        let kp = prefix(start);
        let s = self.segment_of(start, kp).unwrap_or(0);
        let i = self.segments[s].count_le(start, kp);
        self.edit(s, |e| e.insert(i, route));
    }

    /// P2 around `route`, just inserted: the entries on either side of it end at or before
    /// its start and start at or after its end.
    fn disjoint_from_neighbours(&self, route: &Arc<Route>) -> bool {
        let start = route.start_key();
        let Some(at) = self.floor(start, prefix(start)) else {
            return false;
        };
        if !Arc::ptr_eq(self.route(at), route) {
            return false;
        }
        let before_ok = self.prev_pos(at).is_none_or(|p| {
            let end = self.route(p).end_key();
            !end.is_empty() && end <= start
        });
        let after_ok = self.next(at).is_none_or(|n| {
            !route.end_key().is_empty() && route.end_key() <= self.route(n).start_key()
        });
        before_ok && after_ok
    }

    /// Every entry ends at or before the next one starts (P2 over the whole snapshot).
    fn disjoint(&self) -> bool {
        let mut routes = self.iter();
        let Some(mut before) = routes.next() else {
            return true;
        };
        for route in routes {
            let end = before.end_key();
            if end.is_empty() || end > route.start_key() {
                return false;
            }
            before = route;
        }
        true
    }

    /// Removes the entry holding exactly `route`, if the snapshot holds it.
    fn remove_route(&mut self, route: &Arc<Route>) {
        let start = route.start_key();
        if let Some(p) = self.floor(start, prefix(start)) {
            if Arc::ptr_eq(self.route(p), route) {
                self.remove_run(p, p);
            }
        }
    }
}

#[derive(Default)]
struct Writer {
    by_id: DenseIdMap<Arc<Route>>,
    /// Every route published, numbered in publishing order (what followers replay).
    log: ChangeLog,
}

/// The shared index. Reads never block; writes are serialized among themselves.
#[derive(Default)]
pub struct RangeIndex {
    current: ArcSwap<Snapshot>,
    writer: Mutex<Writer>,
}

impl RangeIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// An index with segments of `segment` regions, at most [`MAX_SEGMENT`] (tests use small
    /// ones to exercise segment boundaries).
    pub fn with_segment_size(segment: usize) -> Self {
        let index = Self::default();
        index.current.store(Arc::new(Snapshot {
            segment: segment.clamp(1, MAX_SEGMENT),
            ..Snapshot::default()
        }));
        index
    }

    /// A consistent view for a series of reads.
    pub fn snapshot(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.current.load()
    }

    pub fn locate(&self, key: &[u8]) -> Option<Arc<Route>> {
        self.current.load().locate(key).cloned()
    }

    pub fn len(&self) -> usize {
        self.current.load().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The current route of region `id`: one hash lookup, but under the writer's (blocking)
    /// lock, so it waits while a change set is built (a copy of the spine, 5 MB at 1M regions,
    /// and its edits) or the persister reads a bucket, and stalls the calling core meanwhile.
    /// Routing by key never comes here (`snapshot` does not block). Request handlers call it
    /// only on rare paths, where an occasional wait costs little: GetRegionById when the
    /// owning shard has not seen the region since this leader loaded, and AskBatchSplit, once
    /// per split.
    pub fn get(&self, id: u64) -> Option<Arc<Route>> {
        self.writer().by_id.get(&id).cloned()
    }

    /// The current regions with ids in `ids`, in id order (the persister's view of a bucket).
    pub fn regions_in(&self, ids: std::ops::Range<u64>) -> Vec<Region> {
        let writer = self.writer();
        ids.filter_map(|id| writer.by_id.get(&id).map(|r| r.region()))
            .collect()
    }

    fn writer(&self) -> MutexGuard<'_, Writer> {
        // A panic while holding the lock happens before anything is published (edits go to
        // a private draft), so the state behind a poisoned lock is still the published one.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one leader's report (P1, P2). On error nothing changed.
    pub fn apply(&self, region: Region) -> Result<Change, RegionError> {
        self.apply_batch(vec![region])
            .pop()
            .unwrap_or_else(|| Err(RegionError::Invalid(0, "empty batch".into())))
    }

    /// Applies reports in order, as if one by one, and publishes once: readers see the whole
    /// batch or none of it. Each report succeeds or fails on its own.
    pub fn apply_batch(&self, regions: Vec<Region>) -> Vec<Result<Change, RegionError>> {
        let mut writer = self.writer();
        let mut draft: Snapshot = Snapshot::clone(&self.current.load());
        let mut retired = Vec::new();
        let results: Vec<_> = regions
            .into_iter()
            .map(|r| apply_one(&mut writer, &mut draft, r, &mut retired))
            .collect();
        if !retired.is_empty() || results.iter().any(|r| r.is_ok()) {
            for route in &retired {
                route.retire();
            }
            self.current.store(Arc::new(draft));
            for change in results.iter().flatten() {
                writer.log.record(change.route.clone());
            }
        }
        results
    }

    /// Applies, of `regions` (a store's copy), those the index does not know or knows under an
    /// older epoch, by the heartbeat rules; one it knows at the same or a newer epoch is left
    /// as the index has it (its leader may be newer than the store's). Returns how many were
    /// applied.
    pub fn apply_newer(&self, regions: Vec<Region>) -> usize {
        let mut writer = self.writer();
        let mut draft: Snapshot = Snapshot::clone(&self.current.load());
        let mut retired = Vec::new();
        let mut applied = Vec::new();
        for region in regions {
            let newer = match writer.by_id.get(&region.id) {
                Some(known) => {
                    let known = known.epoch();
                    region.epoch != known && !region.epoch.is_stale_against(&known)
                }
                None => true,
            };
            if newer {
                if let Ok(change) = apply_one(&mut writer, &mut draft, region, &mut retired) {
                    applied.push(change.route);
                }
            }
        }
        if !applied.is_empty() {
            for route in &retired {
                route.retire();
            }
            self.current.store(Arc::new(draft));
            for route in &applied {
                writer.log.record(route.clone());
            }
        }
        applied.len()
    }

    /// The published snapshot with the change log's stream and next index, read together:
    /// the snapshot holds every record before that index and none from it.
    pub fn snapshot_at(&self) -> (Arc<Snapshot>, u64, u64) {
        let writer = self.writer();
        (
            self.current.load_full(),
            writer.log.stream(),
            writer.log.next_index(),
        )
    }

    /// The change log's stream and next index.
    pub fn log_position(&self) -> (u64, u64) {
        let writer = self.writer();
        (writer.log.stream(), writer.log.next_index())
    }

    /// Up to `max` routes published from index `from` of log `stream` on.
    pub fn changes_since(&self, stream: u64, from: u64, max: usize) -> Since {
        self.writer().log.since(stream, from, max)
    }

    /// Starts a new change log numbered `stream` (a new term: followers of an earlier log
    /// start again from a snapshot).
    pub fn restart_log(&self, stream: u64) {
        self.writer().log.restart(stream);
    }

    /// Replaces everything with `regions` (a new leader's load). Overlapping or malformed
    /// entries are resolved by the heartbeat rules; the count of refused ones is returned.
    pub fn reset(&self, mut regions: Vec<Region>) -> usize {
        let mut writer = self.writer();
        for route in writer.by_id.values() {
            route.retire();
        }
        writer.by_id.clear();
        let stream = writer.log.stream().wrapping_add(1);
        writer.log.restart(stream);
        regions.sort_by(|a, b| a.start_key.cmp(&b.start_key));
        // Fast path: build sorted segments directly from the disjoint, well-formed prefix;
        // anything else goes through the rules one by one.
        let segment = self.current.load().segment;
        let mut draft = Snapshot {
            segment,
            ..Snapshot::default()
        };
        let mut seg = Entries::default();
        let mut rest = Vec::new();
        let mut last_end: Option<Vec<u8>> = None;
        for region in regions {
            let disjoint = match &last_end {
                None => true,
                Some(end) => !end.is_empty() && end.as_slice() <= region.start_key.as_slice(),
            };
            if region.validate().is_err() || !disjoint || writer.by_id.contains_key(&region.id) {
                rest.push(region);
                continue;
            }
            last_end = Some(region.end_key.clone());
            let route = Route::new(region);
            writer.by_id.insert(route.id(), route.clone());
            let at = seg.len();
            seg.insert(at, route);
            if seg.len() == segment {
                draft.push(std::mem::take(&mut seg));
            }
        }
        if seg.len() > 0 {
            draft.push(seg);
        }
        let mut retired = Vec::new();
        let refused = rest
            .into_iter()
            .filter(|r| apply_one(&mut writer, &mut draft, r.clone(), &mut retired).is_err())
            .count();
        for route in &retired {
            route.retire();
        }
        debug_assert!(draft.disjoint(), "P2: the loaded index covers a key twice");
        self.current.store(Arc::new(draft));
        refused
    }
}

fn apply_one(
    writer: &mut Writer,
    draft: &mut Snapshot,
    region: Region,
    retired: &mut Vec<Arc<Route>>,
) -> Result<Change, RegionError> {
    region.validate()?;
    let known = writer.by_id.get(&region.id).cloned();
    if let Some(known) = &known {
        if region.epoch.is_stale_against(&known.epoch()) {
            return Err(RegionError::StaleEpoch {
                id: region.id,
                got: region.epoch,
                known: known.epoch(),
            });
        }
    }
    let run = draft.overlap_run(&region);
    let mut removed = Vec::new();
    if let Some((a, b)) = run {
        let mut p = a;
        loop {
            let other = draft.route(p);
            if other.id() != region.id {
                if region.epoch.version < other.epoch().version {
                    return Err(RegionError::StaleEpoch {
                        id: region.id,
                        got: region.epoch,
                        known: other.epoch(),
                    });
                }
                removed.push(other.id());
            }
            if p == b {
                break;
            }
            match draft.next(p) {
                Some(n) => p = n,
                None => break,
            }
        }
    }
    let epoch_changed = known.as_ref().is_none_or(|k| {
        k.epoch() != region.epoch
            || k.start_key() != region.start_key.as_slice()
            || k.end_key() != region.end_key.as_slice()
    });
    if let Some((a, b)) = run {
        draft.remove_run(a, b);
    }
    if let Some(known) = known {
        // Its old range may lie outside the new one (a merge reported by the survivor).
        draft.remove_route(&known);
        retired.push(known);
    }
    for id in &removed {
        if let Some(old) = writer.by_id.remove(id) {
            retired.push(old);
        }
    }
    let route = Route::new(region);
    writer.by_id.insert(route.id(), route.clone());
    draft.insert(route.clone());
    debug_assert!(
        draft.disjoint_from_neighbours(&route),
        "P2: region {} overlaps a neighbour once applied",
        route.id()
    );
    Ok(Change {
        route,
        removed,
        epoch_changed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Epoch, Peer, PeerRole};

    fn route(id: u64, start: &[u8], end: &[u8]) -> Arc<Route> {
        Route::new(Region {
            id,
            start_key: start.to_vec(),
            end_key: end.to_vec(),
            epoch: Epoch {
                conf_ver: 1,
                version: 1,
            },
            peers: vec![Peer {
                id: id * 10,
                store_id: 1,
                role: PeerRole::Voter,
            }],
            leader: Some(id * 10),
        })
    }

    /// The P2 checks `apply` and `reset` assert see an overlap that an edit let through
    /// (`insert` itself trusts its caller to have removed what overlaps).
    #[test]
    fn the_p2_checks_see_two_regions_covering_one_key() {
        let mut snapshot = Snapshot::default();
        let (a, b) = (route(1, b"", b"m"), route(2, b"m", b""));
        snapshot.insert(a.clone());
        snapshot.insert(b.clone());
        assert!(snapshot.disjoint());
        assert!(snapshot.disjoint_from_neighbours(&a) && snapshot.disjoint_from_neighbours(&b));

        let c = route(3, b"k", b"p");
        snapshot.insert(c.clone());
        assert!(!snapshot.disjoint());
        assert!(!snapshot.disjoint_from_neighbours(&c));
    }
}
