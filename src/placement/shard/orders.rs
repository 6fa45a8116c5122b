//! Operators asked for from outside the scheduler (ScatterRegion, SplitRegions): PD's rule for
//! an operator already running on the region, the plan each order makes, and its start, with
//! the status GetOperator reports. Must not touch: the range index, the scheduler's own
//! decisions (a scatter's targets are `schedule::scatter`'s).

use super::{Names, Shard};
use crate::placement::operator::{OpKind, Operator, SplitPolicy, SplitStep, Step};
use crate::placement::region::Region;
use crate::placement::schedule::{self, Cluster, Groups, Plan, SCATTER_DESC};

/// The description PD's splitter gives its operators.
pub const SPLIT_DESC: &str = "region-splitter";

/// An operator asked for from outside the scheduler.
pub enum Order<'a> {
    /// PD's admin scatter within `group`, counted in `groups`.
    Scatter {
        group: &'a str,
        groups: &'a mut Groups,
        skip_store_limit: bool,
    },
    /// PD's splitter: split at the keys that lie inside the region.
    Split { keys: Vec<Vec<u8>> },
}

/// What an order did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ordered {
    /// Started; its first step, to send the leader.
    Started(Option<Operator>),
    /// The same scatter already runs on the region.
    AlreadyRunning,
    /// The region already is where the scatter puts it.
    Unneeded,
}

/// Why an order was not carried out (PD's errors, which make the region a failed one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderRefused {
    #[error("region {0} not found")]
    NotFound(u64),
    #[error("the operator of region {0} already exists")]
    Running(u64),
    #[error("the operator of region {0} already exists with a different epoch")]
    RunningOtherEpoch(u64),
    #[error(transparent)]
    Scatter(#[from] schedule::Refused),
    #[error("region {0}: no split key lies inside it")]
    NoSplitKey(u64),
    #[error("region {0}: cannot add the operator now (operator cap, store limit or ids)")]
    NotStarted(u64),
}

impl Shard {
    /// Starts an operator asked for from outside the scheduler on region `id`, as last
    /// reported. PD's rule for one already running: the same scatter (same group) is left to
    /// run; a scatter replaces a balance operator (lower priority), never a repair, another
    /// scatter or a split; a split replaces nothing.
    pub fn order(
        &mut self,
        id: u64,
        order: Order,
        c: &Cluster,
        new_peer_id: &mut dyn FnMut() -> Option<u64>,
    ) -> Result<Ordered, OrderRefused> {
        let entry = self
            .regions
            .get(&id)
            .filter(|e| e.route.is_current())
            .ok_or(OrderRefused::NotFound(id))?;
        let region = entry.route.region();
        let pending = self.catching_up.get(&id).map_or(&[][..], |p| &p[..]);
        let input = entry.input(&region, pending);
        let running = self.in_flight.get(id).map(|p| p.kind);
        let record = self
            .ops
            .get(id, c.now_ms)
            .filter(|r| r.is_running() && running.is_some());
        let (plan, desc, kind, group) = match order {
            Order::Scatter {
                group,
                groups,
                skip_store_limit,
            } => {
                if let Some(kind) = running {
                    if let Some(r) = record.filter(|r| r.desc == SCATTER_DESC) {
                        if r.group.as_deref() != Some(group) {
                            return Err(OrderRefused::Running(id));
                        }
                        if r.epoch != region.epoch {
                            return Err(OrderRefused::RunningOtherEpoch(id));
                        }
                        return Ok(Ordered::AlreadyRunning);
                    }
                    let admin = record.is_some_and(|r| r.desc == SPLIT_DESC);
                    if admin || kind == OpKind::Replica {
                        return Err(OrderRefused::Running(id));
                    }
                }
                let Some(target) = schedule::scatter(c, &input, group, groups, skip_store_limit)?
                else {
                    return Ok(Ordered::Unneeded);
                };
                let mut ids = Vec::with_capacity(target.moves.len());
                for _ in &target.moves {
                    ids.push(new_peer_id().ok_or(OrderRefused::NotStarted(id))?);
                }
                (
                    target.plan(&input, &ids),
                    SCATTER_DESC,
                    target.kind_name(&input),
                    Some(group.into()),
                )
            }
            Order::Split { keys } => {
                if running.is_some() {
                    return Err(OrderRefused::Running(id));
                }
                (split_plan(&region, keys)?, SPLIT_DESC, "split", None)
            }
        };
        let names = Names {
            desc,
            kind,
            group,
            held: false,
        };
        let started = super::start(
            (&mut self.ops, &mut self.in_flight, &mut self.partner_ends),
            id,
            entry,
            (&region, pending),
            c,
            names,
            |input, slot| schedule::start_plan(c, input, plan, slot, &mut || None),
        );
        self.settle_pairs(c);
        started
            .map(Ordered::Started)
            .ok_or(OrderRefused::NotStarted(id))
    }
}

/// PD's splitter's plan for `region`: one split at the keys that lie strictly inside it,
/// sorted, once each.
fn split_plan(region: &Region, mut keys: Vec<Vec<u8>>) -> Result<Plan, OrderRefused> {
    keys.retain(|k| {
        k.as_slice() > region.start_key.as_slice()
            && (region.end_key.is_empty() || k.as_slice() < region.end_key.as_slice())
    });
    keys.sort_unstable();
    keys.dedup();
    if keys.is_empty() {
        return Err(OrderRefused::NoSplitKey(region.id));
    }
    let step = SplitStep {
        start_key: region.start_key.clone(),
        end_key: region.end_key.clone(),
        policy: SplitPolicy::UseKey,
        keys,
    };
    Ok(Plan {
        kind: OpKind::Region,
        steps: vec![Step::Split(Box::new(step))],
        flow: 0,
    })
}
