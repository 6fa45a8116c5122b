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
use crate::placement::schedule::{Neighbour, Neighbours};

/// `region`'s neighbours (before, after) that this shard owns.
pub(super) fn neighbours(
    region: &Region,
    index: &RangeIndex,
    (entries, in_flight): (&DenseIdMap<Entry>, &InFlight),
    recently_split: &dyn Fn(&Entry) -> bool,
) -> Neighbours {
    let snap = index.snapshot();
    let seen = |route: &std::sync::Arc<Route>| {
        let e = entries.get(&route.id())?;
        if !e.route.is_current() || recently_split(e) {
            return None;
        }
        Some(Neighbour {
            region: route.region(),
            size_mib: e.sizes.mib(),
            keys: u64::from(e.sizes.keys),
            busy: in_flight.busy(route.id()),
        })
    };
    Neighbours(snap.neighbours(region).map(|r| r.and_then(seen)))
}
