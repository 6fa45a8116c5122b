//! A segment of the range index: up to [`MAX_GROUPS`] groups of [`GROUP`] consecutive routes,
//! packed so that a lookup inside one reads three places, each requested whole: the segment's
//! own cache line, one group's block, and the route found. Also the searches inside a segment
//! and its unpacked form for the writer's copy-on-write edits. It knows nothing of the spine,
//! snapshots or the heartbeat rules (those are `range_index`).

use std::sync::Arc;

use super::prefix_search::{count_le, prefetch_line, prefix};
use super::route::Route;

/// Entries per group: a group's starts are two cache lines, its route pointers a third.
pub(super) const GROUP: usize = 8;

/// Groups per segment: the first starts of all but the first fill the segment's line beside
/// the pointer to its blocks (the first group's is the spine's copy of the segment's first).
pub(super) const MAX_GROUPS: usize = 4;

/// The largest target segment length: a segment splits at twice its target.
pub const MAX_SEGMENT: usize = GROUP * MAX_GROUPS / 2;

/// One group: its starts (a short last group padded with `u128::MAX`) and, beside them, its
/// routes (padding: `None`). Starts and route pointers share one allocation, aligned so the
/// 192 bytes are exactly three cache lines (two of starts, one of pointers): a lookup that
/// reaches the group requests those three lines whole and reads no fourth.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct Block {
    starts: [u128; GROUP],
    routes: [Option<Arc<Route>>; GROUP],
}

/// A segment as the spine holds it: exactly one cache line.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub(super) struct Segment {
    /// The first starts of groups 1.. (`u128::MAX` past the last group).
    pivots: [u128; MAX_GROUPS - 1],
    /// Never empty.
    blocks: Arc<[Block]>,
}

const _: () = assert!(std::mem::size_of::<Segment>() == 64);
const _: () = assert!(std::mem::size_of::<Block>() == 192);

/// A segment unpacked for the writer's edits.
#[derive(Debug, Default)]
pub(super) struct Entries {
    pub(super) starts: Vec<u128>,
    pub(super) routes: Vec<Arc<Route>>,
}

impl Entries {
    pub(super) fn len(&self) -> usize {
        self.routes.len()
    }

    pub(super) fn insert(&mut self, i: usize, route: Arc<Route>) {
        self.starts.insert(i, prefix(route.start_key()));
        self.routes.insert(i, route);
    }

    pub(super) fn drain(&mut self, range: std::ops::Range<usize>) {
        self.starts.drain(range.clone());
        self.routes.drain(range);
    }

    pub(super) fn split_off(&mut self, at: usize) -> Entries {
        Entries {
            starts: self.starts.split_off(at),
            routes: self.routes.split_off(at),
        }
    }

    /// Packs one to `GROUP * MAX_GROUPS` entries (the caller splits longer runs).
    pub(super) fn pack(self) -> Segment {
        debug_assert!((1..=GROUP * MAX_GROUPS).contains(&self.len()));
        let blocks: Vec<Block> = self
            .starts
            .chunks(GROUP)
            .zip(self.routes.chunks(GROUP))
            .map(|(starts, routes)| Block {
                starts: std::array::from_fn(|i| starts.get(i).copied().unwrap_or(u128::MAX)),
                routes: std::array::from_fn(|i| routes.get(i).cloned()),
            })
            .collect();
        Segment {
            pivots: std::array::from_fn(|g| blocks.get(g + 1).map_or(u128::MAX, |b| b.starts[0])),
            blocks: blocks.into(),
        }
    }
}

impl Block {
    /// How many of the group's entries start at or before `key`, whose prefix is `kp`.
    #[inline]
    pub(super) fn count_le(&self, key: &[u8], kp: u128) -> usize {
        count_le(&self.starts, kp, |i| self.start_le(i, key))
    }

    /// Whether entry `i` exists and starts at or before `key`.
    fn start_le(&self, i: usize, key: &[u8]) -> bool {
        self.routes[i]
            .as_ref()
            .is_some_and(|r| r.start_key() <= key)
    }

    pub(super) fn route(&self, i: usize) -> Option<&Arc<Route>> {
        self.routes.get(i)?.as_ref()
    }

    /// Requests the whole block: a lookup reads a start in either line and a route pointer.
    pub(super) fn prefetch(&self) {
        let at = self as *const Block as *const u8;
        for line in 0..3 {
            prefetch_line(at.wrapping_add(line * 64));
        }
    }
}

impl Segment {
    pub(super) fn len(&self) -> usize {
        let full = (self.blocks.len() - 1) * GROUP;
        full + self.blocks[self.blocks.len() - 1]
            .routes
            .iter()
            .flatten()
            .count()
    }

    pub(super) fn first(&self) -> u128 {
        self.blocks[0].starts[0]
    }

    pub(super) fn block(&self, g: usize) -> &Block {
        &self.blocks[g]
    }

    /// Entry `i`. Positions come from `len` and the searches, which count only entries.
    pub(super) fn route(&self, i: usize) -> &Arc<Route> {
        self.blocks[i / GROUP]
            .route(i % GROUP)
            .expect("a position counts only entries, never padding")
    }

    pub(super) fn routes(&self) -> impl Iterator<Item = &Arc<Route>> {
        self.blocks.iter().flat_map(|b| b.routes.iter().flatten())
    }

    pub(super) fn unpack(&self) -> Entries {
        let mut entries = Entries::default();
        for block in self.blocks.iter() {
            for (start, route) in block.starts.iter().zip(&block.routes) {
                if let Some(route) = route {
                    entries.starts.push(*start);
                    entries.routes.push(route.clone());
                }
            }
        }
        entries
    }

    pub(super) fn start_le(&self, i: usize, key: &[u8]) -> bool {
        self.blocks[i / GROUP].start_le(i % GROUP, key)
    }

    /// The group holding the entry that starts last at or before `key`, for a key at or
    /// after the segment's first start.
    #[inline]
    pub(super) fn group_of(&self, key: &[u8], kp: u128) -> usize {
        let later = &self.pivots[..self.blocks.len() - 1];
        count_le(later, kp, |g| self.blocks[g + 1].start_le(0, key))
    }

    /// How many entries start at or before `key`.
    pub(super) fn count_le(&self, key: &[u8], kp: u128) -> usize {
        let first = self.first();
        if kp < first || (kp == first && !self.start_le(0, key)) {
            return 0;
        }
        let g = self.group_of(key, kp);
        g * GROUP + self.blocks[g].count_le(key, kp)
    }

    pub(super) fn covers(&self, i: usize, key: &[u8], kp: u128) -> bool {
        self.route(i).covers(key, kp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Epoch, Region};

    fn route(start: &[u8]) -> Arc<Route> {
        Route::new(Region {
            id: 1,
            start_key: start.to_vec(),
            end_key: Vec::new(),
            epoch: Epoch {
                conf_ver: 1,
                version: 1,
            },
            peers: Vec::new(),
            leader: None,
        })
    }

    /// Every length a segment can have: the count of starts at or before a key matches a
    /// plain count, including keys on the padding's `u128::MAX` prefix, and unpack undoes pack.
    #[test]
    fn packed_counts_match_a_plain_count() {
        for len in 1..=GROUP * MAX_GROUPS {
            // Pairs of entries share a 16-byte prefix, so ties go to full keys; the last
            // ones sit on the all-ones prefix the padding uses.
            let starts: Vec<Vec<u8>> = (0..len)
                .map(|i| {
                    let mut k = if i + 2 >= len {
                        vec![0xff; 16]
                    } else {
                        vec![i as u8 / 2; 16]
                    };
                    k.push(i as u8);
                    k
                })
                .collect();
            let mut entries = Entries::default();
            for (i, s) in starts.iter().enumerate() {
                entries.insert(i, route(s));
            }
            let segment = entries.pack();
            assert_eq!(segment.len(), len);
            let back = segment.unpack();
            assert_eq!(back.len(), len);
            assert!(back
                .routes
                .iter()
                .zip(segment.routes())
                .all(|(a, b)| Arc::ptr_eq(a, b)));
            let mut probes = starts.clone();
            probes.extend(starts.iter().map(|s| [s.as_slice(), &[0]].concat()));
            probes.extend([vec![], vec![0xff; 20], vec![0xff; 16]]);
            for probe in probes {
                let want = starts
                    .iter()
                    .filter(|s| s.as_slice() <= probe.as_slice())
                    .count();
                assert_eq!(
                    segment.count_le(&probe, prefix(&probe)),
                    want,
                    "len {len}, {probe:?}"
                );
            }
        }
    }
}
