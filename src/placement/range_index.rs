//! The key-range index every core routes with: start key -> region, read without locks and
//! written one change set at a time under the heartbeat rules P1 and P2.
//!
//! Readers load one immutable [`Snapshot`] through an atomic pointer (`arc-swap`), so a reader
//! sees either all of a change set or none of it: never two regions for one key, never a gap a
//! split did not create. The writer copies the snapshot's spine (one pointer per segment of up
//! to 2 * [`SEGMENT`] regions), edits only the segments a change touches (copy-on-write), and
//! publishes. Lookups binary-search 16-byte big-endian key prefixes held inline, so a lookup
//! touches two small sorted arrays and then the one region it returns; full keys are compared
//! only when prefixes tie.
//!
//! Owns: the range -> region mapping and P1/P2. Must not hold per-region statistics, pending
//! operators or anything a heartbeat changes without changing the route: those belong to the
//! owning shard, so the index is written only when a route changes.

use std::cmp::Ordering as Cmp;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;

use super::region::{Region, RegionError};

/// Regions per segment; a segment splits at twice this.
pub const SEGMENT: usize = 64;

/// Keys searched in lockstep by `locate_many`.
pub const LANES: usize = 16;

/// A region as routing sees it, shared by the index and the shard that owns the region.
#[derive(Debug)]
pub struct Route {
    pub region: Region,
    retired: AtomicBool,
}

impl Route {
    pub fn new(region: Region) -> Arc<Route> {
        Arc::new(Route {
            region,
            retired: AtomicBool::new(false),
        })
    }

    /// False once a later change replaced or displaced this route in the index.
    pub fn is_current(&self) -> bool {
        !self.retired.load(Ordering::Acquire)
    }
}

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

fn prefix(key: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let n = key.len().min(16);
    b[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(b)
}

/// The prefix of an exclusive end; unbounded sorts after every key.
fn end_prefix(end: &[u8]) -> u128 {
    if end.is_empty() {
        u128::MAX
    } else {
        prefix(end)
    }
}

#[derive(Debug, Clone, Default)]
struct Segment {
    starts: Vec<u128>,
    ends: Vec<u128>,
    routes: Vec<Arc<Route>>,
}

impl Segment {
    fn len(&self) -> usize {
        self.routes.len()
    }

    /// How many entries start at or before `key`.
    fn count_le(&self, key: &[u8], kp: u128) -> usize {
        count_le(&self.starts, kp, |i| {
            self.routes[i].region.start_key.as_slice() <= key
        })
    }

    fn covers(&self, i: usize, key: &[u8], kp: u128) -> bool {
        match kp.cmp(&self.ends[i]) {
            Cmp::Less => true,
            Cmp::Greater => false,
            Cmp::Equal => self.routes[i].region.contains(key),
        }
    }

    fn insert(&mut self, i: usize, route: Arc<Route>) {
        self.starts.insert(i, prefix(&route.region.start_key));
        self.ends.insert(i, end_prefix(&route.region.end_key));
        self.routes.insert(i, route);
    }

    fn drain(&mut self, range: std::ops::Range<usize>) {
        self.starts.drain(range.clone());
        self.ends.drain(range.clone());
        self.routes.drain(range);
    }

    fn split_off(&mut self, at: usize) -> Segment {
        Segment {
            starts: self.starts.split_off(at),
            ends: self.ends.split_off(at),
            routes: self.routes.split_off(at),
        }
    }
}

/// Binary search for the number of sorted entries `<= key`, comparing prefixes and falling
/// back to `le_full(i)` only when a prefix ties.
fn count_le(prefixes: &[u128], kp: u128, le_full: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, prefixes.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        let le = match prefixes[mid].cmp(&kp) {
            Cmp::Less => true,
            Cmp::Greater => false,
            Cmp::Equal => le_full(mid),
        };
        if le {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// One consistent view of the index. No segment is empty.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Target segment length (a segment splits at twice this).
    segment: usize,
    firsts: Vec<u128>,
    segments: Vec<Arc<Segment>>,
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

    /// The entry that starts last at or before `key`.
    fn floor(&self, key: &[u8], kp: u128) -> Option<Pos> {
        let s = count_le(&self.firsts, kp, |i| {
            self.segments[i].routes[0].region.start_key.as_slice() <= key
        });
        let s = s.checked_sub(1)?;
        let i = self.segments[s].count_le(key, kp).checked_sub(1)?;
        Some((s, i))
    }

    fn route(&self, (s, i): Pos) -> &Arc<Route> {
        &self.segments[s].routes[i]
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
        seg.covers(i, key, kp).then(|| &seg.routes[i])
    }

    /// `locate` for many keys at once, answers in order. The searches advance in lockstep,
    /// [`LANES`] keys at a time, so the memory reads of different keys overlap instead of
    /// each key waiting out its own cache misses one after another.
    pub fn locate_many<'a, K: AsRef<[u8]>>(
        &'a self,
        keys: &[K],
        out: &mut Vec<Option<&'a Arc<Route>>>,
    ) {
        for chunk in keys.chunks(LANES) {
            let n = chunk.len();
            let mut kp = [0u128; LANES];
            let mut seg = [usize::MAX; LANES];
            for (i, k) in chunk.iter().enumerate() {
                let k = k.as_ref();
                kp[i] = prefix(k);
                let s = count_le(&self.firsts, kp[i], |j| {
                    self.segments[j].routes[0].region.start_key.as_slice() <= k
                });
                if let Some(s) = s.checked_sub(1) {
                    seg[i] = s;
                }
            }
            let mut lo = [0usize; LANES];
            let mut hi = [0usize; LANES];
            for i in 0..n {
                if seg[i] != usize::MAX {
                    hi[i] = self.segments[seg[i]].len();
                }
            }
            loop {
                let mut active = false;
                for i in 0..n {
                    if lo[i] >= hi[i] {
                        continue;
                    }
                    active = true;
                    let s = &self.segments[seg[i]];
                    let mid = (lo[i] + hi[i]) / 2;
                    let le = match s.starts[mid].cmp(&kp[i]) {
                        Cmp::Less => true,
                        Cmp::Greater => false,
                        Cmp::Equal => {
                            s.routes[mid].region.start_key.as_slice() <= chunk[i].as_ref()
                        }
                    };
                    if le {
                        lo[i] = mid + 1;
                    } else {
                        hi[i] = mid;
                    }
                }
                if !active {
                    break;
                }
            }
            for i in 0..n {
                let found = (seg[i] != usize::MAX && lo[i] > 0)
                    .then(|| {
                        let s = &self.segments[seg[i]];
                        let at = lo[i] - 1;
                        s.covers(at, chunk[i].as_ref(), kp[i])
                            .then(|| &s.routes[at])
                    })
                    .flatten();
                out.push(found);
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
        let current = &self.route(pos).region;
        let before = self.route(self.prev_pos(pos)?);
        (before.region.end_key == current.start_key).then_some(before)
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
            Some(p) if self.route(p).region.contains(start) => Some(p),
            Some(p) => self.next(p),
            None => self.first(),
        };
        while let Some(p) = pos {
            let r = self.route(p);
            if out.len() >= limit || (!end.is_empty() && r.region.start_key.as_slice() >= end) {
                break;
            }
            out.push(r.clone());
            pos = self.next(p);
        }
        out
    }

    /// Every route in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Route>> {
        self.segments.iter().flat_map(|s| s.routes.iter())
    }

    /// Positions of the entries overlapping `region`'s range, first and last.
    fn overlap_run(&self, region: &Region) -> Option<(Pos, Pos)> {
        let start = &region.start_key;
        let mut pos = match self.floor(start, prefix(start)) {
            Some(p) if self.route(p).region.overlaps(region) => Some(p),
            Some(p) => self.next(p),
            None => self.first(),
        };
        let mut run = None;
        while let Some(p) = pos {
            if !self.route(p).region.overlaps(region) {
                break;
            }
            run = Some((run.map_or(p, |(a, _)| a), p));
            pos = self.next(p);
        }
        run
    }

    // ---- writer-side edits; they keep `firsts` and `len` in step ----

    fn seg_mut(&mut self, s: usize) -> &mut Segment {
        Arc::make_mut(&mut self.segments[s])
    }

    /// Restores the segment invariants after segment `s` was edited.
    fn fix(&mut self, s: usize) {
        if self.segments[s].len() == 0 {
            self.segments.remove(s);
            self.firsts.remove(s);
            return;
        }
        self.firsts[s] = self.segments[s].starts[0];
        if self.segments[s].len() > 2 * self.segment {
            let at = self.segment;
            let tail = self.seg_mut(s).split_off(at);
            self.firsts.insert(s + 1, tail.starts[0]);
            self.segments.insert(s + 1, Arc::new(tail));
        }
    }

    /// Removes the entries from `a` through `b` inclusive.
    fn remove_run(&mut self, a: Pos, b: Pos) {
        self.len -= self.count_between(a, b);
        if a.0 == b.0 {
            self.seg_mut(a.0).drain(a.1..b.1 + 1);
            self.fix(a.0);
            return;
        }
        // Tail of the last segment first, so earlier indices stay valid.
        self.seg_mut(b.0).drain(0..b.1 + 1);
        self.fix(b.0);
        for s in (a.0 + 1..b.0).rev() {
            self.segments.remove(s);
            self.firsts.remove(s);
        }
        let len = self.segments[a.0].len();
        self.seg_mut(a.0).drain(a.1..len);
        self.fix(a.0);
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
        self.len += 1;
        let start = route.region.start_key.clone();
        let kp = prefix(&start);
        if self.segments.is_empty() {
            let mut seg = Segment::default();
            seg.insert(0, route);
            self.firsts.push(seg.starts[0]);
            self.segments.push(Arc::new(seg));
            return;
        }
        let s = count_le(&self.firsts, kp, |i| {
            self.segments[i].routes[0].region.start_key <= start
        })
        .saturating_sub(1);
        let i = self.segments[s].count_le(&start, kp);
        self.seg_mut(s).insert(i, route);
        self.fix(s);
    }

    /// Removes the entry holding exactly `route`, if the snapshot holds it.
    fn remove_route(&mut self, route: &Arc<Route>) {
        let start = &route.region.start_key;
        if let Some(p) = self.floor(start, prefix(start)) {
            if Arc::ptr_eq(self.route(p), route) {
                self.remove_run(p, p);
            }
        }
    }
}

#[derive(Default)]
struct Writer {
    by_id: HashMap<u64, Arc<Route>>,
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

    /// An index with segments of `segment` regions (tests use small ones to exercise
    /// segment boundaries).
    pub fn with_segment_size(segment: usize) -> Self {
        let index = Self::default();
        index.current.store(Arc::new(Snapshot {
            segment: segment.max(1),
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

    /// The current route of region `id`. Takes the writer's lock: for the control path and
    /// tests, not for request routing (which asks the owning shard).
    pub fn get(&self, id: u64) -> Option<Arc<Route>> {
        self.writer().by_id.get(&id).cloned()
    }

    /// The current regions with ids in `ids`, in id order (the persister's view of a bucket).
    pub fn regions_in(&self, ids: std::ops::Range<u64>) -> Vec<Region> {
        let writer = self.writer();
        ids.filter_map(|id| writer.by_id.get(&id).map(|r| r.region.clone()))
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
                route.retired.store(true, Ordering::Release);
            }
            self.current.store(Arc::new(draft));
        }
        results
    }

    /// Replaces everything with `regions` (a new leader's load). Overlapping or malformed
    /// entries are resolved by the heartbeat rules; the count of refused ones is returned.
    pub fn reset(&self, mut regions: Vec<Region>) -> usize {
        let mut writer = self.writer();
        for route in writer.by_id.values() {
            route.retired.store(true, Ordering::Release);
        }
        writer.by_id.clear();
        regions.sort_by(|a, b| a.start_key.cmp(&b.start_key));
        // Fast path: build sorted segments directly from the disjoint, well-formed prefix;
        // anything else goes through the rules one by one.
        let segment = self.current.load().segment;
        let mut draft = Snapshot {
            segment,
            ..Snapshot::default()
        };
        let mut seg = Segment::default();
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
            writer.by_id.insert(route.region.id, route.clone());
            let at = seg.len();
            seg.insert(at, route);
            if seg.len() == segment {
                draft.firsts.push(seg.starts[0]);
                draft.len += seg.len();
                draft.segments.push(Arc::new(std::mem::take(&mut seg)));
            }
        }
        if seg.len() > 0 {
            draft.firsts.push(seg.starts[0]);
            draft.len += seg.len();
            draft.segments.push(Arc::new(seg));
        }
        let mut retired = Vec::new();
        let refused = rest
            .into_iter()
            .filter(|r| apply_one(&mut writer, &mut draft, r.clone(), &mut retired).is_err())
            .count();
        for route in &retired {
            route.retired.store(true, Ordering::Release);
        }
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
        if region.epoch.is_stale_against(&known.region.epoch) {
            return Err(RegionError::StaleEpoch {
                id: region.id,
                got: region.epoch,
                known: known.region.epoch,
            });
        }
    }
    let run = draft.overlap_run(&region);
    let mut removed = Vec::new();
    if let Some((a, b)) = run {
        let mut p = a;
        loop {
            let other = &draft.route(p).region;
            if other.id != region.id {
                if region.epoch.version < other.epoch.version {
                    return Err(RegionError::StaleEpoch {
                        id: region.id,
                        got: region.epoch,
                        known: other.epoch,
                    });
                }
                removed.push(other.id);
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
        k.region.epoch != region.epoch
            || k.region.start_key != region.start_key
            || k.region.end_key != region.end_key
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
    writer.by_id.insert(route.region.id, route.clone());
    draft.insert(route.clone());
    Ok(Change {
        route,
        removed,
        epoch_changed,
    })
}
