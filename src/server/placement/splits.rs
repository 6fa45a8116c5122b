//! Splits: AskBatchSplit hands out the new regions' and peers' ids; ReportBatchSplit applies
//! the regions a split made, all checked before any is applied (each on its own, and together
//! as PD checks a split), acknowledged once durable. PD's single-region AskSplit and
//! ReportSplit are these with one split.

use super::answer::{invalid, unavailable, WAIT};
use super::shard_task::{forget_elsewhere, region_error};
use super::state::PlacementState;
use crate::mutation::{self, Mutation};
use crate::placement::{check_split, LimitError, Limits, Region, RegionShape};
use crate::proto::{ErrorReply, Refusal, Reply, Response, SplitIds, MAX_BATCH_SPLIT};

#[derive(Debug)]
pub enum SplitOp {
    Ask { region: Box<Region>, count: u32 },
    Report(Vec<Region>),
}

pub async fn serve(state: &PlacementState, op: SplitOp) -> Response {
    match op {
        SplitOp::Ask { region, count } => ask_batch_split(state, *region, count).await,
        SplitOp::Report(regions) => report_batch_split(state, regions).await,
    }
}

/// The regions the request carries against `[limits]`.
pub fn check_limits(op: &SplitOp, limits: &Limits) -> Result<(), LimitError> {
    match op {
        SplitOp::Ask { region, .. } => limits.check_region(region),
        SplitOp::Report(regions) => regions.iter().try_for_each(|r| limits.check_region(r)),
    }
}

async fn ask_batch_split(state: &PlacementState, region: Region, count: u32) -> Response {
    if count == 0 || count > MAX_BATCH_SPLIT {
        return invalid(format!("split count {count} outside 1..={MAX_BATCH_SPLIT}"));
    }
    // PD's words, in the header: a store only logs it and asks again at its next split check.
    let Some(known) = state.index.get(region.id) else {
        return Response::Err(ErrorReply::Refused(Refusal::RegionNotFound(region.id)));
    };
    if region.epoch.is_stale_against(&known.epoch()) {
        return Response::Err(ErrorReply::StaleEpoch(format!(
            "region {}: epoch {:?} is older than {:?}",
            region.id,
            region.epoch,
            known.epoch()
        )));
    }
    let mut splits = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let mut ids = Vec::with_capacity(1 + known.peers().len());
        for _ in 0..=known.peers().len() {
            match state.ids.alloc(WAIT).await {
                Some(id) => ids.push(id),
                None => return unavailable("no id block persisted in time; retry"),
            }
        }
        splits.push(SplitIds {
            region_id: ids[0],
            peer_ids: ids[1..].to_vec(),
        });
    }
    Response::Ok(Reply::Splits(splits))
}

async fn report_batch_split(state: &PlacementState, regions: Vec<Region>) -> Response {
    if !state.writes_open().await {
        return unavailable(super::state::RECONCILING);
    }
    if regions.is_empty() || regions.len() > MAX_BATCH_SPLIT as usize + 1 {
        return invalid(format!("{} regions in one split report", regions.len()));
    }
    if check_split(&regions).is_err() {
        return Response::Err(ErrorReply::Refused(Refusal::InvalidSplit));
    }
    // Every report checked before any is applied: a malformed batch changes nothing.
    let view = state.view.load();
    for r in &regions {
        if let Err(e) = r.validate() {
            return invalid(e.to_string());
        }
        if let Some(id) = std::iter::once(r.id)
            .chain(r.peers.iter().map(|p| p.id))
            .find(|id| !state.ids.may_exist(*id))
        {
            return invalid(format!("region {}: id {id} was never allocated", r.id));
        }
        if let Some(p) = r.peers.iter().find(|p| view.get(p.store_id).is_none()) {
            return invalid(format!(
                "region {}: store {} is not known",
                r.id, p.store_id
            ));
        }
    }
    let mut first_error = None;
    let mut removed = Vec::new();
    let mut durable_at = 0;
    for result in state.index.apply_batch(regions) {
        match result {
            Ok(change) => {
                if change.epoch_changed {
                    durable_at = durable_at.max(state.dirty.region(change.route.id()));
                }
                for id in &change.removed {
                    durable_at = durable_at.max(state.dirty.region(*id));
                }
                removed.extend(change.removed);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if !removed.is_empty() {
        forget_elsewhere(state, None, removed);
    }
    // Acknowledged only once durable: a store that hears Done may forget its report. A report
    // that changes nothing repeats a change that may itself be unwritten (a retry whose first
    // try was applied, or one a term took over from its syncer's copy), so it waits too.
    let durable_at = durable_at.max(state.dirty.settled());
    let skip_wait = mutation::on(Mutation::AckBeforeDurable);
    if durable_at > 0 && !skip_wait && !state.dirty.wait(durable_at, WAIT).await {
        return unavailable("the split is applied but not yet durable; report it again");
    }
    match first_error {
        None => Response::Ok(Reply::Done),
        Some(e) => Response::Err(region_error(e)),
    }
}
