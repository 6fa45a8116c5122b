//! An operator cancelled for a reason PD tells apart (PD's `RemoveOperator` with a
//! `CancelReasonType`): its charges released, its status record ended with the reason, a merge
//! half's partner noted to end with it (`merge_pair`), and the end kept, with every other
//! start and end, until the caller takes them ([`Shard::take_op_events`]) to log them as PD's
//! operator controller does. The
//! admin stop (`DELETE /operators`) is here too: it ends a merge half's partner on this shard
//! before it goes on, so that the partner ends for its related merge region, as in PD, and
//! not as stopped in its own right.
//!
//! Must not touch: I/O (the caller logs), the scheduler's decisions.

use super::{merge_pair, Shard};
use crate::placement::op_status::{CancelReason, OpEvent};
use crate::placement::operator::Pending;
use crate::placement::schedule::{self, Cluster};

impl Shard {
    /// Ends region `id`'s operator `op`, taken out of its slot, as cancelled for `reason`.
    pub(super) fn cancel_for(
        &mut self,
        id: u64,
        op: Box<Pending>,
        reason: CancelReason,
        c: &Cluster,
    ) {
        // A half ended through its partner leaves no partner to end: a note sent back would
        // reach a new pair of the same regions, started meanwhile.
        if reason != CancelReason::RelatedMergeRegion {
            merge_pair::half_ended(&mut self.partner_ends, id, &op);
        }
        let size_mib = self.regions.get(&id).map_or(0, |e| e.sizes.mib());
        let op = schedule::cancel(c, &mut Some(op));
        let shown = op.as_deref().map(|p| (p, size_mib));
        self.ops.cancel(id, reason, c.now_ms, shown);
    }

    /// Cancels the running operator of `region`, or of every region this shard owns (PD's
    /// admin stop), a merge half with its partner; returns the regions whose operator was
    /// cancelled, a partner on this shard included (a partner of another shard's is left in
    /// [`Shard::take_partner_ends`]).
    pub fn cancel_operators(&mut self, region: Option<u64>, c: &Cluster) -> Vec<u64> {
        let mut cancelled = Vec::new();
        if self.in_flight.is_empty() {
            return cancelled;
        }
        let ids: Vec<u64> = match region {
            Some(id) => vec![id],
            // In the entries' order, as when each entry held its operator.
            None => {
                let in_flight = &self.in_flight;
                self.regions
                    .iter_mut()
                    .map(|(id, _)| id)
                    .filter(|id| in_flight.busy(*id))
                    .collect()
            }
        };
        for id in ids {
            // A partner ended with a half cancelled before it is not stopped again.
            if let Some(op) = self.in_flight.take(id) {
                self.cancel_for(id, op, CancelReason::AdminStop, c);
                cancelled.push(id);
                cancelled.extend(self.settle_pairs(c));
            }
        }
        cancelled
    }

    /// The operators started and ended since this was last called, in order, each with its
    /// record and the operator as they stood then (running for a start), for the caller's
    /// log. Taken out.
    pub fn take_op_events(&mut self) -> Vec<OpEvent> {
        self.ops.take_events()
    }
}
