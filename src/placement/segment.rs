//! A segment of the range index: up to 2 * `SEGMENT` consecutive routes packed for reading
//! (group pivots, then groups of 8 start prefixes, the route pointers beside them), the
//! searches inside one, and its unpacked form for the writer's copy-on-write edits. It knows
//! nothing of the spine, snapshots or the heartbeat rules (those are `range_index`).

use std::sync::Arc;

use super::prefix_search::{count_le, prefetch, prefetch_line, prefix};
use super::range_index::Route;

/// Entries per group: a group's starts are 128 contiguous bytes.
pub(super) const GROUP: usize = 8;

/// Up to 2 * segment consecutive entries, packed for reading in groups of [`GROUP`]. One
/// allocation holds the first start of every group (the pivots), then each group's starts;
/// the routes are in a second one. A lookup reads the pivots, then one group and the route
/// pointers beside it, both requested at once: two waits on memory inside the segment
/// however long it is, where a binary search over its starts waits once for every cache
/// line it lands on.
#[derive(Debug, Clone)]
pub(super) struct Segment {
    /// `groups` pivots, then per group `GROUP` starts (a short last group padded with
    /// `u128::MAX`, which no search reads).
    pub(super) keys: Arc<[u128]>,
    pub(super) routes: Arc<[Arc<Route>]>,
}

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
        self.starts.insert(i, prefix(&route.region.start_key));
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

    pub(super) fn pack(self) -> Segment {
        let groups = self.len().div_ceil(GROUP);
        let mut keys = Vec::with_capacity(groups * (1 + GROUP));
        keys.extend(self.starts.iter().step_by(GROUP));
        for g in 0..groups {
            let run = g * GROUP..self.len().min((g + 1) * GROUP);
            let pad = GROUP - run.len();
            keys.extend_from_slice(&self.starts[run]);
            keys.extend(std::iter::repeat_n(u128::MAX, pad));
        }
        Segment {
            keys: keys.into(),
            routes: self.routes.into(),
        }
    }
}

impl Segment {
    pub(super) fn len(&self) -> usize {
        self.routes.len()
    }

    pub(super) fn groups(&self) -> usize {
        self.len().div_ceil(GROUP)
    }

    pub(super) fn pivots(&self) -> &[u128] {
        &self.keys[..self.groups()]
    }

    /// Group `g`'s starts.
    pub(super) fn group(&self, g: usize) -> &[u128] {
        let at = self.groups() + g * GROUP;
        &self.keys[at..at + GROUP.min(self.len() - g * GROUP)]
    }

    pub(super) fn first(&self) -> u128 {
        self.keys[0]
    }

    pub(super) fn unpack(&self) -> Entries {
        let mut entries = Entries {
            routes: self.routes.to_vec(),
            ..Entries::default()
        };
        for g in 0..self.groups() {
            entries.starts.extend_from_slice(self.group(g));
        }
        entries
    }

    pub(super) fn start_le(&self, i: usize, key: &[u8]) -> bool {
        self.routes[i].region.start_key.as_slice() <= key
    }

    /// The group holding the entry that starts last at or before `key`.
    pub(super) fn group_of(&self, key: &[u8], kp: u128) -> Option<usize> {
        count_le(self.pivots(), kp, |g| self.start_le(g * GROUP, key)).checked_sub(1)
    }

    /// How many entries of group `g` start at or before `key` (all of the group's entries
    /// before it do).
    pub(super) fn count_le_in(&self, g: usize, key: &[u8], kp: u128) -> usize {
        g * GROUP + count_le(self.group(g), kp, |i| self.start_le(g * GROUP + i, key))
    }

    /// How many entries start at or before `key`.
    pub(super) fn count_le(&self, key: &[u8], kp: u128) -> usize {
        prefetch(self.pivots());
        let Some(g) = self.group_of(key, kp) else {
            return 0;
        };
        self.prefetch_group(g);
        self.count_le_in(g, key, kp)
    }

    /// Requests group `g`'s starts and route pointers, all of which a lookup in it may read.
    pub(super) fn prefetch_group(&self, g: usize) {
        prefetch(self.group(g));
        let routes = &self.routes[g * GROUP..self.len().min((g + 1) * GROUP)];
        if let (Some(first), Some(last)) = (routes.first(), routes.last()) {
            prefetch_line(first);
            prefetch_line(last);
        }
    }

    pub(super) fn covers(&self, i: usize, key: &[u8], kp: u128) -> bool {
        self.routes[i].covers(key, kp)
    }
}
