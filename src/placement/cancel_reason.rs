//! Why an operator was cancelled, in PD's words (its `CancelReasonType`, kept in an operator's
//! additional infos under `cancel-reason`). Shared by the scheduler, which cancels for the
//! reasons it finds, and the status records, which keep and log them; a type of its own so
//! that neither depends on the other for it.
//!
//! Must not touch: any decision; it only names them.

/// A reason PD records when it removes an operator, for the removals Meridian makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReason {
    /// Removed with no reason given: PD's `RemoveOperator(op)` of a finished operator still
    /// records an empty one.
    Unnamed,
    /// Cancelled through the operator API (`DELETE /operators`).
    AdminStop,
    /// The other half of its merge ended undone.
    RelatedMergeRegion,
    /// Its region is gone.
    RegionNotFound,
    /// Its step can no longer be made as planned (PD's `CheckInProgress` failing).
    StaleStatus,
    /// Its region changed under it (a merge's source whose range or peers moved).
    EpochNotMatch,
    /// Another operator runs there and may not be replaced.
    AlreadyExist,
    /// It ran past its deadline (PD removes a timed-out operator with this reason).
    Timeout,
}

impl CancelReason {
    /// PD's words for it.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::Unnamed => "",
            CancelReason::AdminStop => "admin stop",
            CancelReason::RelatedMergeRegion => "related merge region",
            CancelReason::RegionNotFound => "region not found",
            CancelReason::StaleStatus => "stale status",
            CancelReason::EpochNotMatch => "epoch not match",
            CancelReason::AlreadyExist => "already exist",
            CancelReason::Timeout => "timeout",
        }
    }
}
