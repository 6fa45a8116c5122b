//! One consistent view of the range index: chunks of segments and their first starts, read
//! without locks (`locate`, `locate_many`, `prev`, `neighbours`, `scan`), and the copy-on-write
//! edits the writer (`super::RangeIndex`) makes to a copy before publishing it.
//!
//! The spine has two levels so that a change set's copy does not grow with the index: the
//! snapshot holds per chunk a first start and a shared pointer, and a chunk holds up to
//! [`CHUNK_CAP`] segments with their first starts. A copy of the snapshot copies the chunk
//! pointers (one per `CHUNK * SEGMENT` regions, about 250 at 1M regions); an edit copies only
//! the chunks it touches (`Arc::make_mut`: once per change set, later edits find it unshared).
//!
//! Owns: the layout and its invariants (no segment or chunk empty, none over twice its target
//! length, `chunk_firsts`, each chunk's `firsts` and the lengths in step). Must not touch: the
//! heartbeat rules or the change log, which are the writer's.

use std::sync::Arc;

use super::super::prefix_search::{count_le, narrow, prefetch_line, prefix, settle};
use super::super::region::Region;
use super::super::route::Route;
use super::super::segment::{Block, Entries, Segment};
use super::{CHUNK, LANES, SEGMENT};

/// Segments a chunk holds at most: a chunk splits when it would hold more.
pub(super) const CHUNK_CAP: usize = 2 * CHUNK;

/// A run of consecutive segments. Readers may share it with older snapshots; the writer edits
/// a copy.
#[derive(Debug, Clone)]
pub(super) struct Chunk {
    /// The segments' first starts, padded with `u128::MAX` to [`CHUNK_CAP`]: every chunk is
    /// searched in the same steps, so `locate_many` keeps its keys in lockstep. Inline, so the
    /// search reads it straight from the chunk pointer.
    firsts: [u128; CHUNK_CAP],
    /// Never empty.
    segments: Vec<Segment>,
    /// Entries in all its segments.
    len: usize,
}

/// A chunk unpacked for the writer's edits: its firsts without the padding.
struct ChunkDraft {
    firsts: Vec<u128>,
    segments: Vec<Segment>,
    len: usize,
}

impl Chunk {
    /// `len`: the entries in `segments` (the caller knows it without reading every segment).
    fn from_parts(firsts: &[u128], segments: Vec<Segment>, len: usize) -> Chunk {
        debug_assert!(firsts.len() == segments.len() && firsts.len() <= CHUNK_CAP);
        let mut padded = [u128::MAX; CHUNK_CAP];
        padded[..firsts.len()].copy_from_slice(firsts);
        Chunk {
            firsts: padded,
            segments,
            len,
        }
    }

    fn first(&self) -> u128 {
        self.firsts[0]
    }

    /// How many of the chunk's segments start at or before `key`.
    fn count_le(&self, key: &[u8], kp: u128) -> usize {
        count_le(&self.firsts[..self.segments.len()], kp, |j| {
            self.segments[j].start_le(0, key)
        })
    }
}

/// One consistent view of the index. No chunk and no segment is empty.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Target segment length (a segment splits at twice this).
    pub(super) segment: usize,
    /// Target segments per chunk (a chunk splits at twice this), at most [`CHUNK`].
    pub(super) chunk: usize,
    /// Each chunk's first start (its first segment's).
    pub(super) chunk_firsts: Vec<u128>,
    pub(super) chunks: Vec<Arc<Chunk>>,
    pub(super) len: usize,
}

/// A position: chunk, segment in it and index in that.
pub(super) type Pos = (usize, usize, usize);

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            segment: SEGMENT,
            chunk: CHUNK,
            chunk_firsts: Vec::new(),
            chunks: Vec::new(),
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

    /// The chunk and segment holding the entry that starts last at or before `key`.
    pub(super) fn segment_of(&self, key: &[u8], kp: u128) -> Option<(usize, usize)> {
        let c = count_le(&self.chunk_firsts, kp, |c| {
            self.chunks[c].segments[0].start_le(0, key)
        })
        .checked_sub(1)?;
        let s = self.chunks[c].count_le(key, kp).checked_sub(1)?;
        Some((c, s))
    }

    fn segment(&self, c: usize, s: usize) -> &Segment {
        &self.chunks[c].segments[s]
    }

    /// The entry that starts last at or before `key`.
    pub(super) fn floor(&self, key: &[u8], kp: u128) -> Option<Pos> {
        let (c, s) = self.segment_of(key, kp)?;
        let i = self.segment(c, s).count_le(key, kp).checked_sub(1)?;
        Some((c, s, i))
    }

    pub(super) fn route(&self, (c, s, i): Pos) -> &Arc<Route> {
        self.segment(c, s).route(i)
    }

    pub(super) fn next(&self, (c, s, i): Pos) -> Option<Pos> {
        let chunk = &self.chunks[c];
        if i + 1 < chunk.segments[s].len() {
            Some((c, s, i + 1))
        } else if s + 1 < chunk.segments.len() {
            Some((c, s + 1, 0))
        } else if c + 1 < self.chunks.len() {
            Some((c + 1, 0, 0))
        } else {
            None
        }
    }

    pub(super) fn prev_pos(&self, (c, s, i): Pos) -> Option<Pos> {
        if i > 0 {
            Some((c, s, i - 1))
        } else if s > 0 {
            Some((c, s - 1, self.segment(c, s - 1).len() - 1))
        } else if c > 0 {
            let before = &self.chunks[c - 1].segments;
            let last = before.len() - 1;
            Some((c - 1, last, before[last].len() - 1))
        } else {
            None
        }
    }

    pub(super) fn first(&self) -> Option<Pos> {
        (!self.chunks.is_empty()).then_some((0, 0, 0))
    }

    /// The region whose range holds `key`.
    pub fn locate(&self, key: &[u8]) -> Option<&Arc<Route>> {
        let kp = prefix(key);
        let (c, s, i) = self.floor(key, kp)?;
        let seg = self.segment(c, s);
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
        if self.chunks.is_empty() {
            out.extend(keys.iter().map(|_| None));
            return;
        }
        for group in keys.chunks(LANES) {
            let lanes = 0..group.len();
            let mut kp = [0u128; LANES];
            for (p, key) in kp.iter_mut().zip(group) {
                *p = prefix(key.as_ref());
            }
            // The chunk: the same sequence of step sizes for every key.
            let mut base = [0usize; LANES];
            let mut size = self.chunk_firsts.len();
            while size > 1 {
                let next = size - size / 2;
                for i in lanes.clone() {
                    narrow(&self.chunk_firsts, kp[i], &mut base[i], size);
                    prefetch_line(self.chunk_firsts.as_ptr().wrapping_add(base[i] + next / 2));
                }
                size = next;
            }
            // A key before every chunk searches the first one, where it finds no segment: no
            // branch on it in the steps below.
            let first: &Chunk = &self.chunks[0];
            let mut chunk: [&Chunk; LANES] = [first; LANES];
            for i in lanes.clone() {
                let key = group[i].as_ref();
                let n = settle(&self.chunk_firsts, kp[i], base[i], |c| {
                    self.chunks[c].segments[0].start_le(0, key)
                });
                chunk[i] = &self.chunks[n.saturating_sub(1)];
                prefetch_line(chunk[i].firsts.as_ptr().wrapping_add(CHUNK_CAP / 2));
            }
            // The segment in the chunk: every chunk's firsts are padded to the same length,
            // so again the same steps for every key.
            let mut base = [0usize; LANES];
            let mut size = CHUNK_CAP;
            while size > 1 {
                let next = size - size / 2;
                for i in lanes.clone() {
                    let ch = chunk[i];
                    narrow(&ch.firsts, kp[i], &mut base[i], size);
                    prefetch_line(ch.firsts.as_ptr().wrapping_add(base[i] + next / 2));
                }
                size = next;
            }
            let mut seg: [Option<&Segment>; LANES] = [None; LANES];
            for i in lanes.clone() {
                let key = group[i].as_ref();
                let ch = chunk[i];
                let n = settle(&ch.firsts, kp[i], base[i], |j| {
                    ch.segments.get(j).is_some_and(|s| s.start_le(0, key))
                });
                seg[i] = n.checked_sub(1).map(|s| &ch.segments[s]);
                if let Some(segment) = seg[i] {
                    prefetch_line(segment);
                }
            }
            // Within the segment: the group's block, then the entry, every key a step at a
            // time. A key here is at or after its segment's first start.
            let mut block: [Option<&Block>; LANES] = [None; LANES];
            for i in lanes.clone() {
                block[i] = seg[i].map(|s| s.block(s.group_of(group[i].as_ref(), kp[i])));
                if let Some(b) = block[i] {
                    b.prefetch();
                }
            }
            let mut route = [None; LANES];
            for i in lanes.clone() {
                if let Some(b) = block[i] {
                    let n = b.count_le(group[i].as_ref(), kp[i]);
                    route[i] = n.checked_sub(1).and_then(|j| b.route(j));
                    if let Some(r) = route[i] {
                        // The caller reads the route found: have it on the way too.
                        prefetch_line(Arc::as_ptr(r));
                    }
                }
            }
            for i in lanes {
                out.push(route[i].filter(|r| r.covers(group[i].as_ref(), kp[i])));
            }
        }
    }

    /// The region just before the one holding `key`, when the two are adjacent.
    pub fn prev(&self, key: &[u8]) -> Option<&Arc<Route>> {
        let kp = prefix(key);
        let pos = self.floor(key, kp)?;
        if !self.segment(pos.0, pos.1).covers(pos.2, key, kp) {
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
        self.chunks
            .iter()
            .flat_map(|c| c.segments.iter())
            .flat_map(|s| s.routes())
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

    // ---- writer-side edits; they keep the firsts and the lengths in step ----

    /// Edits chunk `c` (a copy when readers may hold it) and restores the chunk invariants:
    /// none empty, none over twice the target, its first start in `chunk_firsts`.
    fn edit_chunk(&mut self, c: usize, f: impl FnOnce(&mut ChunkDraft)) {
        let target = self.chunk;
        let chunk = Arc::make_mut(&mut self.chunks[c]);
        let mut d = ChunkDraft {
            firsts: chunk.firsts[..chunk.segments.len()].to_vec(),
            segments: std::mem::take(&mut chunk.segments),
            len: chunk.len,
        };
        f(&mut d);
        if d.segments.is_empty() {
            self.chunks.remove(c);
            self.chunk_firsts.remove(c);
            return;
        }
        let tail = (d.segments.len() > 2 * target).then(|| {
            let segments = d.segments.split_off(target);
            let len: usize = segments.iter().map(Segment::len).sum();
            d.len -= len;
            Chunk::from_parts(&d.firsts.split_off(target), segments, len)
        });
        *chunk = Chunk::from_parts(&d.firsts, d.segments, d.len);
        self.chunk_firsts[c] = chunk.first();
        if let Some(tail) = tail {
            self.chunk_firsts.insert(c + 1, tail.first());
            self.chunks.insert(c + 1, Arc::new(tail));
        }
    }

    /// Edits segment `s` of chunk `c` (a copy: readers may hold the old one) and restores the
    /// segment invariants: none empty, none over twice the target length, firsts in step.
    pub(super) fn edit(&mut self, (c, s): (usize, usize), f: impl FnOnce(&mut Entries)) {
        let target = self.segment;
        self.edit_chunk(c, |d| {
            let mut entries = d.segments[s].unpack();
            let before = entries.len();
            f(&mut entries);
            d.len = d.len + entries.len() - before;
            if entries.len() == 0 {
                d.segments.remove(s);
                d.firsts.remove(s);
                return;
            }
            if entries.len() > 2 * target {
                let tail = entries.split_off(target).pack();
                d.firsts.insert(s + 1, tail.first());
                d.segments.insert(s + 1, tail);
            }
            let seg = entries.pack();
            d.firsts[s] = seg.first();
            d.segments[s] = seg;
        });
    }

    /// Removes whole segments `range` of chunk `c`.
    fn drain_segments(&mut self, c: usize, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        self.edit_chunk(c, |d| {
            d.len -= d.segments[range.clone()]
                .iter()
                .map(Segment::len)
                .sum::<usize>();
            d.segments.drain(range.clone());
            d.firsts.drain(range);
        });
    }

    /// Gives back the room the chunks this draft copied grew into, before it is published.
    /// An edit that inserts a segment doubles its chunk's vector, and a chunk that splits keeps
    /// its vector's room for the half it gave away: left as they are, a built index's vectors
    /// hold up to four times the room its segments need (measured at 1M regions: 16 MB of
    /// vectors for 4 MB of segments, 9 B a region of resident memory). Only the chunks no
    /// older snapshot shares are touched (a change set's copies, or a load's), so this costs
    /// one check per chunk pointer, as the snapshot's own copy does.
    pub(super) fn trim(&mut self) {
        for chunk in &mut self.chunks {
            if let Some(chunk) = Arc::get_mut(chunk) {
                chunk.segments.shrink_to_fit();
            }
        }
    }

    /// Appends a full run of entries (a load builds the snapshot in key order).
    pub(super) fn push(&mut self, entries: Entries) {
        let n = entries.len();
        self.len += n;
        let seg = entries.pack();
        match self.chunks.last_mut() {
            Some(last) if last.segments.len() < self.chunk => {
                let last = Arc::make_mut(last);
                last.firsts[last.segments.len()] = seg.first();
                last.segments.push(seg);
                last.len += n;
            }
            _ => {
                self.chunk_firsts.push(seg.first());
                self.chunks
                    .push(Arc::new(Chunk::from_parts(&[seg.first()], vec![seg], n)));
            }
        }
    }

    /// Removes the entries from `a` through `b` inclusive.
    pub(super) fn remove_run(&mut self, a: Pos, b: Pos) {
        self.len -= self.count_between(a, b);
        if (a.0, a.1) == (b.0, b.1) {
            self.edit((a.0, a.1), |e| e.drain(a.2..b.2 + 1));
            return;
        }
        // From the end backward, so earlier positions stay valid. The tail of b's segment
        // first: when that empties b's chunk, b is the chunk's first segment and nothing
        // else of that chunk is drained.
        self.edit((b.0, b.1), |e| e.drain(0..b.2 + 1));
        if a.0 == b.0 {
            self.drain_segments(a.0, a.1 + 1..b.1);
        } else {
            self.drain_segments(b.0, 0..b.1);
            self.chunks.drain(a.0 + 1..b.0);
            self.chunk_firsts.drain(a.0 + 1..b.0);
            let n = self.chunks[a.0].segments.len();
            self.drain_segments(a.0, a.1 + 1..n);
        }
        self.edit((a.0, a.1), |e| {
            let len = e.len();
            e.drain(a.2..len)
        });
    }

    pub(super) fn count_between(&self, a: Pos, b: Pos) -> usize {
        if (a.0, a.1) == (b.0, b.1) {
            return b.2 - a.2 + 1;
        }
        let lens = |c: usize, s: std::ops::Range<usize>| -> usize {
            self.chunks[c].segments[s].iter().map(Segment::len).sum()
        };
        let ends = (self.segment(a.0, a.1).len() - a.2) + b.2 + 1;
        if a.0 == b.0 {
            return ends + lens(a.0, a.1 + 1..b.1);
        }
        let whole: usize = (a.0 + 1..b.0).map(|c| self.chunks[c].len).sum();
        ends + lens(a.0, a.1 + 1..self.chunks[a.0].segments.len()) + whole + lens(b.0, 0..b.1)
    }

    /// Inserts a route whose range overlaps nothing in the snapshot.
    pub(super) fn insert(&mut self, route: Arc<Route>) {
        if self.chunks.is_empty() {
            let mut entries = Entries::default();
            entries.insert(0, route);
            self.push(entries);
            return;
        }
        self.len += 1;
        let start = route.start_key();
        let kp = prefix(start);
        let (c, s) = self.segment_of(start, kp).unwrap_or((0, 0));
        let i = self.segment(c, s).count_le(start, kp);
        self.edit((c, s), |e| e.insert(i, route));
    }

    /// What the layout must hold after every edit (tests check it): none empty, none over
    /// twice its target, the first starts and the lengths in step, the padding in place.
    #[cfg(test)]
    pub(super) fn layout_error(&self) -> Option<String> {
        if self.chunks.len() != self.chunk_firsts.len() {
            return Some("chunk_firsts and chunks differ in length".into());
        }
        let mut total = 0;
        for (c, chunk) in self.chunks.iter().enumerate() {
            let n = chunk.segments.len();
            if n == 0 || n > 2 * self.chunk {
                return Some(format!("chunk {c} holds {n} segments"));
            }
            if self.chunk_firsts[c] != chunk.first() {
                return Some(format!("chunk {c}: its first start is not in chunk_firsts"));
            }
            if chunk.firsts[n..].iter().any(|&f| f != u128::MAX) {
                return Some(format!("chunk {c}: padding is not u128::MAX"));
            }
            let mut len = 0;
            for (s, seg) in chunk.segments.iter().enumerate() {
                if seg.len() == 0 || seg.len() > 2 * self.segment {
                    return Some(format!("chunk {c} segment {s} holds {}", seg.len()));
                }
                if chunk.firsts[s] != seg.first() {
                    return Some(format!("chunk {c} segment {s}: first start out of step"));
                }
                len += seg.len();
            }
            if len != chunk.len {
                return Some(format!("chunk {c}: len {} but holds {len}", chunk.len));
            }
            total += len;
        }
        (total != self.len).then(|| format!("len {} but holds {total}", self.len))
    }

    /// Each chunk's segments and the room its vector holds (tests check the room is given
    /// back).
    #[cfg(test)]
    pub(super) fn chunk_room(&self) -> Vec<(usize, usize)> {
        self.chunks
            .iter()
            .map(|c| (c.segments.len(), c.segments.capacity()))
            .collect()
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
