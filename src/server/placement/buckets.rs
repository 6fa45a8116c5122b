//! Region buckets: ReportBuckets keeps a region's latest buckets in memory, as PD does (its
//! leader reports them again every ten seconds), under `placement::BucketsMap`'s version rule
//! and within `[limits]`; GetRegionBuckets reads them for the region lookups that ask. A report
//! for a region this leader does not know is dropped, as PD drops it; buckets of regions that
//! are gone are dropped by the term's persister (`prune_buckets`).

use super::answer::over_limit;
use super::state::PlacementState;
use crate::placement::{Buckets, BucketsMap};
use crate::proto::{Reply, Response};

#[derive(Debug)]
pub enum BucketsOp {
    Report(Buckets),
    Get(u64),
}

pub fn serve(state: &PlacementState, op: BucketsOp) -> Response {
    match op {
        BucketsOp::Report(buckets) => {
            if let Err(e) = state.limits.check_buckets(&buckets) {
                return over_limit(e);
            }
            if state.index.get(buckets.region_id).is_some() {
                state.buckets().offer(buckets);
            }
            Response::Ok(Reply::Done)
        }
        BucketsOp::Get(region_id) => Response::Ok(Reply::Buckets(
            state.buckets().get(region_id).map(|b| (*b).clone()),
        )),
    }
}

impl PlacementState {
    fn buckets(&self) -> std::sync::MutexGuard<'_, BucketsMap> {
        // Each edit is one call on the map, which leaves it valid.
        self.buckets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops the buckets of regions that are gone (merged away), when there are more regions
    /// with buckets than regions: memory stays bounded by the map's size.
    pub(super) fn prune_buckets(&self) {
        let mut buckets = self.buckets();
        if buckets.len() > self.index.len() {
            buckets.retain_regions(|id| self.index.get(id).is_some());
        }
    }

    /// A term's end: nothing is kept for a later term (leaders report again).
    pub(super) fn clear_buckets(&self) {
        self.buckets().clear();
    }
}
