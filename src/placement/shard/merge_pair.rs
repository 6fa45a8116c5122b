//! A merge's two operators as one, as PD's operator controller keeps them: the target's half
//! placed beside the source's when the checker starts a merge, and, when either half ends
//! without being done (cancelled, timed out, replaced, its region gone), its partner ended
//! with it (PD's `removeRelatedMergeOperator`). A partner this shard owns is ended here, at the
//! end of the call that ended the first half; one another shard owns is handed to the caller
//! ([`Shard::take_partner_ends`]), which tells that shard ([`Shard::end_merge_half`]).
//!
//! Must not touch: the scheduler's decisions (it only carries out what a call decided), I/O.

use super::{Pending, Shard};
use crate::placement::op_status::{CancelReason, OpRecord};
use crate::placement::operator::OpKind;
use crate::placement::schedule::{self, Cluster, Dispatch};

/// A merge half that ended undone: `(partner, ended)`, the partner's region to end and the
/// region whose half ended.
pub type PartnerEnd = (u64, u64);

/// Notes that region `id`'s operator `op` ended without being done: if it was a merge's half,
/// its partner is to end too.
pub(super) fn half_ended(ends: &mut Vec<PartnerEnd>, id: u64, op: &Pending) {
    if let Some(partner) = op.merge_partner() {
        ends.push((partner, id));
    }
}

impl Shard {
    /// What a call on region `id` did to a merge pair: the target's operator goes in its slot
    /// (the checker chose a target of this shard's with none), and a merge that ended undone
    /// takes its partner's operator with it. A target that cannot be placed ends the source's
    /// half too, before its step goes anywhere.
    pub(super) fn merge_pair(&mut self, id: u64, d: &mut Dispatch, c: &Cluster) {
        if let Some((target, op)) = d.merge_target.take() {
            let size = |e: &super::Entry| e.sizes.mib();
            let source_mib = self.regions.get(&id).map_or(0, size);
            let known = self
                .regions
                .get(&target)
                .map(|e| (e.route.epoch(), size(e)));
            if let Some((epoch, target_mib)) = known.filter(|_| !self.in_flight.busy(target)) {
                // Recorded as PD adds the pair: both halves running, each naming the other,
                // the source's start logged first.
                self.ops
                    .announce(id, self.in_flight.get(id).map(|p| (p, source_mib)));
                let record = OpRecord {
                    related_merge: Some(id),
                    ..OpRecord::scheduled(OpKind::Merge, epoch, c.now_ms)
                };
                self.ops.start(target, record, Some((&*op, target_mib)));
                self.in_flight.put(target, op);
            } else {
                schedule::cancel(c, &mut Some(op));
                let source = schedule::cancel(c, &mut self.in_flight.take(id));
                if let Some(source) = source {
                    // PD refuses the pair together, for the target's reason: the source's
                    // half, never added, is logged as cancelled only.
                    let reason = if known.is_some() {
                        CancelReason::AlreadyExist
                    } else {
                        CancelReason::RegionNotFound
                    };
                    let shown = Some((&*source, source_mib));
                    self.ops.cancel(id, reason, c.now_ms, shown);
                    d.step = None;
                }
            }
        }
        if let Some(partner) = d.merge_partner {
            self.partner_ends.push((partner, id));
        }
    }

    /// Ends the partners of the merge halves that ended in this call and that this shard
    /// owns; those of other shards stay for [`Shard::take_partner_ends`]. The regions whose
    /// half it ended.
    pub(super) fn settle_pairs(&mut self, c: &Cluster) -> Vec<u64> {
        let mut settled = Vec::new();
        if self.partner_ends.is_empty() {
            return settled;
        }
        let ends = std::mem::take(&mut self.partner_ends);
        for (partner, ended) in ends {
            if !self.regions.contains_key(&partner) {
                self.partner_ends.push((partner, ended));
            } else if self.end_merge_half(partner, ended, c) {
                settled.push(partner);
            }
        }
        settled
    }

    /// Ends region `id`'s operator if it is the half of a merge with region `partner`, whose
    /// half ended undone: cancelled for its related merge region, as PD cancels it. Any other
    /// operator `id` runs (the pair's half already ended, and another started) is left alone.
    /// Whether a half was ended.
    pub fn end_merge_half(&mut self, id: u64, partner: u64, c: &Cluster) -> bool {
        let paired = self
            .in_flight
            .get(id)
            .and_then(Pending::merge_partner)
            .is_some_and(|p| p == partner);
        if !paired {
            return false;
        }
        let Some(op) = self.in_flight.take(id) else {
            return false;
        };
        self.cancel_for(id, op, CancelReason::RelatedMergeRegion, c);
        true
    }

    /// The merge halves of other shards' regions to end, because their partners here ended
    /// undone; each `(partner, ended)`. Taken out: the caller tells their shards.
    pub fn take_partner_ends(&mut self) -> Vec<PartnerEnd> {
        std::mem::take(&mut self.partner_ends)
    }

    /// Whether [`Shard::take_partner_ends`] has anything: most calls end no merge half.
    pub fn has_partner_ends(&self) -> bool {
        !self.partner_ends.is_empty()
    }
}
