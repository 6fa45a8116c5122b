//! One operator as PD shows it, in its API's list and in its operator controller's log lines:
//! the region, the names the status records give it, its steps and where it stands in them,
//! and the region's size. A copy taken at a moment, owning nothing of the operator it shows.
//!
//! Must not touch: the operator it was taken from (it is a copy), any decision.

use super::operator::{Pending, Step};
use super::region::Epoch;

/// One operator as PD shows it (what Go's `Operator.String()` reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningOp {
    pub region_id: u64,
    /// The region's epoch when the operator started.
    pub epoch: Epoch,
    /// PD's description and kind flags.
    pub desc: &'static str,
    pub kind: &'static str,
    pub steps: Vec<Step>,
    /// The step being run (the number of steps once all are done).
    pub at: usize,
    /// The store the leader was on when the operator started.
    pub leader_store: u64,
    pub created_ms: u64,
    pub deadline_ms: u64,
    pub size_mib: u64,
}

impl RunningOp {
    /// `op`, region `region_id`'s operator, under the names and epoch its status record
    /// gives it, its region being `size_mib` large.
    pub fn of(
        region_id: u64,
        (desc, kind, epoch): (&'static str, &'static str, Epoch),
        op: &Pending,
        size_mib: u64,
    ) -> RunningOp {
        RunningOp {
            region_id,
            epoch,
            desc,
            kind,
            steps: op.steps.clone(),
            at: op.at,
            leader_store: op.leader_store,
            created_ms: op.created_ms,
            deadline_ms: op.deadline_ms,
            size_mib,
        }
    }
}
