//! One consistent view of the range index: the segments and their first starts, read without
//! locks (`locate`, `locate_many`, `prev`, `neighbours`, `scan`), and the copy-on-write edits
//! the writer (`super::RangeIndex`) makes to a copy before publishing it.
//!
//! Owns: the layout and its invariants (no segment empty or over twice the target length,
//! `firsts` and `len` in step). Must not touch: the heartbeat rules or the change log, which
//! are the writer's.

use std::sync::Arc;

use super::super::prefix_search::{count_le, narrow, prefetch_line, prefix, settle};
use super::super::region::Region;
use super::super::route::Route;
use super::super::segment::{Block, Entries, Segment};
use super::{LANES, SEGMENT};

/// One consistent view of the index. No segment is empty.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Target segment length (a segment splits at twice this).
    pub(super) segment: usize,
    pub(super) firsts: Vec<u128>,
    pub(super) segments: Vec<Segment>,
    pub(super) len: usize,
}

/// A position: segment and index in it.
pub(super) type Pos = (usize, usize);

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
    pub(super) fn segment_of(&self, key: &[u8], kp: u128) -> Option<usize> {
        count_le(&self.firsts, kp, |i| self.segments[i].start_le(0, key)).checked_sub(1)
    }

    /// The entry that starts last at or before `key`.
    pub(super) fn floor(&self, key: &[u8], kp: u128) -> Option<Pos> {
        let s = self.segment_of(key, kp)?;
        let i = self.segments[s].count_le(key, kp).checked_sub(1)?;
        Some((s, i))
    }

    pub(super) fn route(&self, (s, i): Pos) -> &Arc<Route> {
        self.segments[s].route(i)
    }

    pub(super) fn next(&self, (s, i): Pos) -> Option<Pos> {
        if i + 1 < self.segments[s].len() {
            Some((s, i + 1))
        } else if s + 1 < self.segments.len() {
            Some((s + 1, 0))
        } else {
            None
        }
    }

    pub(super) fn prev_pos(&self, (s, i): Pos) -> Option<Pos> {
        if i > 0 {
            Some((s, i - 1))
        } else if s > 0 {
            Some((s - 1, self.segments[s - 1].len() - 1))
        } else {
            None
        }
    }

    pub(super) fn first(&self) -> Option<Pos> {
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
    pub(super) fn overlap_run(&self, region: &Region) -> Option<(Pos, Pos)> {
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
    pub(super) fn edit(&mut self, s: usize, f: impl FnOnce(&mut Entries)) {
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
    pub(super) fn push(&mut self, entries: Entries) {
        self.len += entries.len();
        let seg = entries.pack();
        self.firsts.push(seg.first());
        self.segments.push(seg);
    }

    /// Removes the entries from `a` through `b` inclusive.
    pub(super) fn remove_run(&mut self, a: Pos, b: Pos) {
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

    pub(super) fn count_between(&self, a: Pos, b: Pos) -> usize {
        if a.0 == b.0 {
            return b.1 - a.1 + 1;
        }
        let middle: usize = (a.0 + 1..b.0).map(|s| self.segments[s].len()).sum();
        (self.segments[a.0].len() - a.1) + middle + b.1 + 1
    }

    /// Inserts a route whose range overlaps nothing in the snapshot.
    pub(super) fn insert(&mut self, route: Arc<Route>) {
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
    pub(super) fn disjoint_from_neighbours(&self, route: &Arc<Route>) -> bool {
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
    pub(super) fn disjoint(&self) -> bool {
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
    pub(super) fn remove_route(&mut self, route: &Arc<Route>) {
        let start = route.start_key();
        if let Some(p) = self.floor(start, prefix(start)) {
            if Arc::ptr_eq(self.route(p), route) {
                self.remove_run(p, p);
            }
        }
    }
}
