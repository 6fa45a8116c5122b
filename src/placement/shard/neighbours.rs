//! The merge checker's view from a shard: a region's neighbours in the range index, with the
//! sizes, key counts and operators this shard holds for them. A neighbour another shard owns
//! is not offered: its sizes and its operator slot are that shard's, and the target's half of
//! a merge must be put in the target's slot in the same call.
//!
//! Must not: write the index or any entry.

use super::in_flight::InFlight;
use super::Entry;
use crate::placement::dense_map::DenseIdMap;
use crate::placement::range_index::{RangeIndex, Route};
use crate::placement::region::Region;
use crate::placement::schedule::{Adjacent, RegionInput, Side};

/// A neighbour as last reported, owned for one call.
pub(super) struct Seen {
    region: Region,
    size_mib: u64,
    keys: u64,
    busy: bool,
}

impl Seen {
    pub(super) fn adjacent(&self) -> Adjacent<'_> {
        Adjacent {
            input: RegionInput {
                region: &self.region,
                pending_peers: &[],
                size_mib: self.size_mib,
            },
            keys: self.keys,
            busy: self.busy,
            // The split record is the region's own (its entry), checked when it is the source;
            // a neighbour new from a split is recorded the same way.
            recently_split: false,
        }
    }
}

/// `region`'s neighbours (before, after) that this shard owns.
pub(super) fn neighbours(
    region: &Region,
    index: &RangeIndex,
    (entries, in_flight): (&DenseIdMap<Entry>, &InFlight),
    recently_split: &dyn Fn(&Entry) -> bool,
) -> [Option<Seen>; 2] {
    let snap = index.snapshot();
    let seen = |route: &std::sync::Arc<Route>| {
        let e = entries.get(&route.id())?;
        if !e.route.is_current() || recently_split(e) {
            return None;
        }
        Some(Seen {
            region: route.region(),
            size_mib: u64::from(e.sizes.size_kib) / 1024,
            keys: u64::from(e.sizes.keys),
            busy: in_flight.busy(route.id()),
        })
    };
    let prev = snap.prev(&region.start_key).and_then(&seen);
    let next = if region.end_key.is_empty() {
        None
    } else {
        snap.locate(&region.end_key)
            .filter(|r| r.start_key() == region.end_key.as_slice())
            .and_then(&seen)
    };
    [prev, next]
}

/// Which of the two a side is.
pub(super) fn side(s: Side) -> usize {
    match s {
        Side::Prev => 0,
        Side::Next => 1,
    }
}
