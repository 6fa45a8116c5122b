//! A shard's part in PD's operator API (`/operators`): an admin operator started on a region
//! this shard owns, under PD's rule for one already running (an admin operator replaces any
//! operator of lower priority, the scheduler's; never another admin one or a scatter), and
//! the operators running and ended, as the API lists them (PD's admin stop is `cancel`'s). Orders from clients (scatter, split) do not replace an admin operator either
//! ([`Shard::order_beside_admin`]). Pure, as the shard is: the caller passes the clock, the
//! stores and the id source. Planning is `schedule::admin`'s.

use super::{Names, Order, OrderRefused, Ordered, Shard};
use crate::placement::op_status::{CancelReason, OpRecord, OpStatus};
use crate::placement::operator::{MergeStep, OpKind, Operator, Step};
use crate::placement::running_op::RunningOp;
use crate::placement::schedule::{
    self, admin_plan, AdminAsk, AdminPlan, AdminRefused, Cluster, MergeTarget, NEW_PEER,
    SCATTER_DESC,
};

/// PD's description of an admin merge, on both of its regions.
pub const MERGE_DESC: &str = "admin-merge-region";

impl Shard {
    /// Whether region `id` runs an operator PD gives the same priority as an admin one: an
    /// admin operator, or a scatter.
    fn runs_admin(&self, id: u64, now_ms: u64) -> bool {
        let Some(running) = self.in_flight.get(id) else {
            return false;
        };
        running.kind == OpKind::Admin
            || self
                .ops
                .get(id, now_ms)
                .is_some_and(|r| r.is_running() && r.desc == SCATTER_DESC)
    }

    /// Starts the admin operator `ask` on region `id`, as last reported: PD's checks first
    /// (the region, the stores, the builder's), then PD's `AddOperator`, which replaces an
    /// operator of lower priority. Returns its first step, to send the leader.
    pub fn start_admin(
        &mut self,
        id: u64,
        ask: &AdminAsk,
        c: &Cluster,
        new_peer_id: &mut dyn FnMut() -> Option<u64>,
    ) -> Result<Option<Operator>, AdminRefused> {
        let target_busy = matches!(ask, AdminAsk::Merge { target } if target.runs_admin);
        let blocked = self.runs_admin(id, c.now_ms) || target_busy;
        let entry = self
            .regions
            .get(&id)
            .filter(|e| e.route.is_current())
            .ok_or(AdminRefused::RegionNotFound(id))?;
        let region = entry.route.region();
        let pending = self.catching_up.get(&id).map_or(&[][..], |p| &p[..]);
        let input = entry.input(&region, pending);
        let AdminPlan {
            mut plan,
            desc,
            kind,
        } = admin_plan(c, &input, ask)?;
        if blocked {
            return Err(AdminRefused::AddOperator);
        }
        // Each new peer (one per store) gets one id, in every step that names it.
        let mut given: Vec<(u64, u64)> = Vec::new();
        for step in &mut plan.steps {
            if let Step::AddLearner(p) | Step::PromoteLearner(p) | Step::TransferLeader(p) = step {
                if p.id != NEW_PEER {
                    continue;
                }
                p.id = match given.iter().find(|(store, _)| *store == p.store_id) {
                    Some((_, id)) => *id,
                    None => {
                        let id = new_peer_id().ok_or(AdminRefused::AddOperator)?;
                        given.push((p.store_id, id));
                        id
                    }
                };
            }
        }
        let names = Names {
            desc,
            kind,
            group: None,
            held: matches!(ask, AdminAsk::Merge { .. }),
        };
        let started = super::start(
            (&mut self.ops, &mut self.in_flight, &mut self.partner_ends),
            id,
            entry,
            (&region, pending),
            c,
            names,
            |input, slot| schedule::start_admin_plan(c, input, plan, slot),
        );
        self.settle_pairs(c);
        started.ok_or(AdminRefused::AddOperator)
    }

    /// Region `id` as an admin merge's target: as last reported, with its peers catching up;
    /// and whether it runs an operator an admin one may not replace.
    pub fn merge_target(&self, id: u64, now_ms: u64) -> Option<MergeTarget> {
        let entry = self.regions.get(&id).filter(|e| e.route.is_current())?;
        Some(MergeTarget {
            region: entry.route.region(),
            pending: self.catching_up.get(&id).map_or(Vec::new(), |p| p.to_vec()),
            size_mib: entry.sizes.mib(),
            runs_admin: self.runs_admin(id, now_ms),
        })
    }

    /// Starts the source's half of an admin merge of region `id` into `target` (as
    /// [`Shard::start_admin`]), held: none of its steps is sent until the target's half is
    /// placed and [`Shard::release_admin_merge`] lets it go, as PD adds the pair at once.
    /// Returns the target's half with its kind flags, for the target's shard to start
    /// ([`Shard::start_merge_target`]).
    pub fn start_admin_merge(
        &mut self,
        id: u64,
        target: MergeTarget,
        c: &Cluster,
        new_peer_id: &mut dyn FnMut() -> Option<u64>,
    ) -> Result<(MergeStep, &'static str), AdminRefused> {
        let ask = AdminAsk::Merge {
            target: Box::new(target),
        };
        // Its first step is not sent: it is sent on release, checked again then.
        let _held = self.start_admin(id, &ask, c, new_peer_id)?;
        let kind = self.ops.get(id, c.now_ms).map_or("admin", |r| r.kind);
        let half = self.in_flight.with_slot(id, |slot| {
            let p = slot.as_mut()?;
            p.held = true;
            p.steps.iter().find_map(|s| match s {
                Step::Merge(m) => Some(MergeStep {
                    passive: true,
                    ..(**m).clone()
                }),
                _ => None,
            })
        });
        match half {
            Some(half) => Ok((half, kind)),
            // The merge is the plan's last step: an operator without it did not start.
            None => Err(AdminRefused::AddOperator),
        }
    }

    /// Ends the hold on region `id`'s half of an admin merge with `partner`: with the
    /// partner's half `placed`, the half runs and its first step is returned, to send the
    /// leader; otherwise it is cancelled, never having been sent. Refused when the held half
    /// is no longer there (it was cancelled, timed out or its region went meanwhile): the
    /// caller then ends the partner's half.
    pub fn release_admin_merge(
        &mut self,
        id: u64,
        partner: u64,
        placed: bool,
        c: &Cluster,
    ) -> Result<Option<Operator>, AdminRefused> {
        let held = self
            .in_flight
            .get(id)
            .is_some_and(|p| p.held && p.merge_partner() == Some(partner));
        if !held {
            return Err(AdminRefused::AddOperator);
        }
        let current = self.regions.get(&id).filter(|e| e.route.is_current());
        let Some(entry) = current.filter(|_| placed) else {
            let op = schedule::cancel(c, &mut self.in_flight.take(id));
            // A region gone ends it for that; else its partner was refused. Never added, it
            // is logged as cancelled only.
            let reason = if current.is_none() {
                CancelReason::RegionNotFound
            } else {
                CancelReason::RelatedMergeRegion
            };
            let size_mib = current.map_or(0, |e| e.sizes.mib());
            let shown = op.as_deref().map(|p| (p, size_mib));
            self.ops.cancel(id, reason, c.now_ms, shown);
            return if placed {
                Err(AdminRefused::AddOperator)
            } else {
                Ok(None)
            };
        };
        let region = entry.route.region();
        let pending = self.catching_up.get(&id).map_or(&[][..], |p| &p[..]);
        // The pair is added: the source's half is logged as added, then run.
        let shown = self.in_flight.get(id).map(|p| (p, entry.sizes.mib()));
        self.ops.announce(id, shown);
        let mut d = super::decide(
            (&mut self.ops, &mut self.in_flight),
            id,
            (entry, self.hot.get(&region)),
            (&region, pending),
            c.now_ms,
            |input, slot| schedule::let_go(c, input, slot),
        );
        self.merge_pair(id, &mut d, c);
        let step = d.step.take();
        self.settle_pairs(c);
        Ok(step)
    }

    /// Starts the target's half of an admin merge (`step`, passive) on region `id`, under the
    /// same rule as [`Shard::start_admin`]: it replaces a scheduler's operator, never an admin
    /// one. Refused when the target changed since it was checked (its epoch is not the
    /// step's).
    pub fn start_merge_target(
        &mut self,
        id: u64,
        step: MergeStep,
        kind: &'static str,
        c: &Cluster,
    ) -> Result<(), AdminRefused> {
        if self.runs_admin(id, c.now_ms) {
            return Err(AdminRefused::AddOperator);
        }
        let epoch = step.target.epoch;
        let current = self
            .regions
            .get(&id)
            .filter(|e| e.route.is_current() && e.route.region().epoch == epoch);
        if current.is_none() {
            return Err(AdminRefused::AddOperator);
        }
        let partner = step.source.id;
        let size_mib = current.map_or(0, |e| e.sizes.mib());
        let op = schedule::start_passive(c, step).ok_or(AdminRefused::AddOperator)?;
        let (ops, in_flight, ends) = (&mut self.ops, &mut self.in_flight, &mut self.partner_ends);
        in_flight.with_slot(id, |slot| {
            if let Some(old) = slot.as_deref() {
                super::merge_pair::half_ended(ends, id, old);
                let old = schedule::cancel(c, slot);
                let shown = old.as_deref().map(|p| (p, size_mib));
                ops.end(id, OpStatus::Replace, c.now_ms, shown);
            }
            *slot = Some(op);
        });
        ops.start(
            id,
            OpRecord {
                desc: MERGE_DESC,
                kind,
                status: OpStatus::Running,
                group: None,
                epoch,
                at_ms: c.now_ms,
                started_ms: c.now_ms,
                related_merge: Some(partner),
                cancel_reason: None,
                size_mib: None,
            },
            in_flight.get(id).map(|p| (p, size_mib)),
        );
        self.settle_pairs(c);
        Ok(())
    }

    /// The operators running on `region`, or on every region this shard owns, in region order.
    /// The list leaves out a merge's source half held for its target's: PD adds a merge's two
    /// operators at once, so its list never shows one half without the other.
    pub fn running_operators(&self, region: Option<u64>, now_ms: u64) -> Vec<RunningOp> {
        let mut running: Vec<RunningOp> = self
            .in_flight
            .iter()
            .filter(|(id, p)| region.map_or(!p.held, |r| r == *id))
            .filter_map(|(id, p)| {
                let e = self.regions.get(&id)?;
                let record = self
                    .ops
                    .get(id, now_ms)
                    .filter(|r| r.is_running())
                    .cloned()
                    .unwrap_or_else(|| OpRecord::scheduled(p.kind, e.route.region().epoch, 0));
                let names = (record.desc, record.kind, record.epoch);
                let size_mib = record.size_mib.unwrap_or_else(|| e.sizes.mib());
                Some(RunningOp::of(id, names, p, size_mib))
            })
            .collect();
        running.sort_unstable_by_key(|r| r.region_id);
        running
    }

    /// The records of the operators that ended at or after `from_ms` (PD's operator
    /// records), in region order.
    pub fn ended_operators(&self, from_ms: u64, now_ms: u64) -> Vec<(u64, OpRecord)> {
        let mut ended: Vec<(u64, OpRecord)> = self
            .ops
            .ended_since(from_ms, now_ms)
            .map(|(id, r)| (id, r.clone()))
            .collect();
        ended.sort_unstable_by_key(|(id, _)| *id);
        ended
    }

    /// [`Shard::order`], except over an admin operator, which a client's scatter or split
    /// does not replace (PD gives them no higher priority).
    pub fn order_beside_admin(
        &mut self,
        id: u64,
        order: Order,
        c: &Cluster,
        new_peer_id: &mut dyn FnMut() -> Option<u64>,
    ) -> Result<Ordered, OrderRefused> {
        let admin = self
            .in_flight
            .get(id)
            .is_some_and(|p| p.kind == OpKind::Admin);
        if admin {
            return Err(OrderRefused::Running(id));
        }
        self.order(id, order, c, new_peer_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::op_status::CancelReason;
    use crate::placement::range_index::RangeIndex;
    use crate::placement::region::{Peer, PeerRole, Region, RegionStats};
    use crate::placement::schedule::{Groups, Stale, TestCluster};
    use crate::placement::shard::tests::{cancels, halves_on, region};

    #[test]
    fn an_admin_operator_runs_is_listed_refuses_another_and_is_cancelled() {
        let (w, _, mut shard) = halves_on(&[1, 2, 3, 4]);
        let c = w.at(10);
        // Store 4's add-peer limit spent: an admin operator goes past it, as in PD.
        let budget = &w.view.get(4).unwrap().budget;
        while budget.take(true, 1000.0, w.cfg.store_limit_add_per_min, 10) {}
        let mut ids = 100..;
        let first = shard.start_admin(1, &AdminAsk::AddPeer { store: 4 }, &c, &mut || ids.next());
        let learner = Peer {
            id: 100,
            store_id: 4,
            role: PeerRole::Learner,
        };
        assert_eq!(first, Ok(Some(Operator::AddPeer(learner.clone()))));
        assert_eq!(w.in_flight.get(OpKind::Admin), 1);
        let listed = shard.running_operators(None, 10);
        assert_eq!(listed.len(), 1);
        let op = &listed[0];
        assert_eq!(
            (op.region_id, op.desc, op.kind, op.at, op.leader_store),
            (1, "admin-add-peer", "admin,region", 0, 1)
        );
        assert_eq!(
            op.steps,
            vec![
                Step::AddLearner(learner.clone()),
                Step::PromoteLearner(learner)
            ]
        );
        assert_eq!(shard.running_operators(Some(2), 10), vec![]);
        // Another admin operator, a scatter and a split are refused while it runs; the
        // builder's own refusal comes first, as in PD.
        assert_eq!(
            shard.start_admin(1, &AdminAsk::TransferLeader { store: 2 }, &c, &mut || None),
            Err(AdminRefused::AddOperator)
        );
        assert_eq!(
            shard.start_admin(1, &AdminAsk::TransferLeader { store: 4 }, &c, &mut || None),
            Err(AdminRefused::Build("region has no voter in store 4".into()))
        );
        let mut groups = Groups::default();
        let scatter = Order::Scatter {
            group: "g",
            groups: &mut groups,
            skip_store_limit: false,
        };
        assert_eq!(
            shard.order_beside_admin(1, scatter, &c, &mut || None),
            Err(OrderRefused::Running(1))
        );
        assert_eq!(
            shard.start_admin(9, &AdminAsk::AddPeer { store: 4 }, &c, &mut || None),
            Err(AdminRefused::RegionNotFound(9))
        );
        // Cancelled: gone from the list, its status kept, its count released.
        assert_eq!(shard.cancel_operators(Some(1), &c), vec![1]);
        assert_eq!(shard.cancel_operators(Some(1), &c), Vec::<u64>::new());
        assert!(shard.running_operators(None, 11).is_empty());
        assert_eq!(
            shard.operator_status(1, 11).map(|r| (r.desc, r.status)),
            Some(("admin-add-peer", OpStatus::Cancel))
        );
        let ended = shard.ended_operators(0, 11);
        assert_eq!(ended.len(), 1);
        assert_eq!((ended[0].0, ended[0].1.status), (1, OpStatus::Cancel));
        assert!(shard.ended_operators(11, 11).is_empty());
        assert_eq!(w.in_flight.get(OpKind::Admin), 0);
    }

    #[test]
    fn an_admin_operator_replaces_the_schedulers_and_runs_to_success() {
        let w = TestCluster::up(&[1, 2, 3, 4]);
        let index = RangeIndex::new();
        let mut shard = Shard::new();
        // Two voters of three: the replica checker adds one at once.
        let short = region(1, b"", b"", 1, &[1, 2]);
        let out = shard
            .heartbeat(
                &short,
                RegionStats::default(),
                &w.at(0),
                &index,
                &mut || Some(50),
            )
            .unwrap();
        assert!(out.operator.is_some());
        assert_eq!(w.in_flight.get(OpKind::Replica), 1);
        let c = w.at(5);
        let step = shard
            .start_admin(1, &AdminAsk::TransferLeader { store: 2 }, &c, &mut || None)
            .unwrap();
        let to = Peer {
            id: 12,
            store_id: 2,
            role: PeerRole::Voter,
        };
        assert_eq!(step, Some(Operator::TransferLeader(to.clone())));
        assert_eq!(
            w.in_flight.get(OpKind::Replica),
            0,
            "the repair was replaced"
        );
        // The leader reports the transfer: done.
        let mut moved = short.clone();
        moved.leader = Some(12);
        let out = shard
            .heartbeat(
                &moved,
                RegionStats::default(),
                &w.at(6),
                &index,
                &mut || None,
            )
            .unwrap();
        assert_ne!(out.operator, Some(Operator::TransferLeader(to)));
        assert_eq!(
            shard.operator_status(1, 6).map(|r| (r.desc, r.status)),
            Some(("admin-transfer-leader", OpStatus::Success))
        );
        assert_eq!(w.in_flight.get(OpKind::Admin), 0);
        // Each start and end is kept for the log, in order, as PD's controller logs them: the
        // repair added and replaced, the transfer added and finished (PD records an empty
        // cancel reason as it removes a finished operator), each with how long it ran.
        let logged: Vec<_> = shard
            .take_op_events()
            .into_iter()
            .map(|e| {
                (
                    e.region,
                    e.record.desc,
                    e.record.status,
                    e.record.cancel_reason,
                    e.record.takes_ms(),
                )
            })
            .collect();
        assert_eq!(
            logged,
            vec![
                (1, "replica-checker", OpStatus::Running, None, 0),
                (1, "replica-checker", OpStatus::Replace, None, 5),
                (1, "admin-transfer-leader", OpStatus::Running, None, 0),
                (
                    1,
                    "admin-transfer-leader",
                    OpStatus::Success,
                    Some(CancelReason::Unnamed),
                    1
                ),
            ]
        );
        assert!(shard.take_op_events().is_empty(), "taken out");
    }

    /// A step that can no longer be made ends its operator as stale (PD's `stale status`),
    /// and one past its deadline as timed out, with PD's `timeout` reason; both ends are kept
    /// for the log.
    #[test]
    fn an_operator_ends_stale_or_timed_out_for_pds_reasons() {
        let (w, index, mut shard) = halves_on(&[1, 2, 3, 4]);
        shard.take_op_events();
        let c = w.at(10);
        for id in [1, 2] {
            let step =
                shard.start_admin(id, &AdminAsk::TransferLeader { store: 2 }, &c, &mut || None);
            assert!(
                matches!(step, Ok(Some(Operator::TransferLeader(_)))),
                "{step:?}"
            );
        }
        // Region 1's peer on store 2 is gone: the transfer to it is stale.
        let mut gone = region(1, b"", b"m", 1, &[1, 3]);
        gone.epoch.conf_ver += 1;
        let beat = |shard: &mut Shard, r: &Region, at: u64| {
            shard
                .heartbeat(r, RegionStats::default(), &w.at(at), &index, &mut || None)
                .unwrap()
        };
        beat(&mut shard, &gone, 20);
        let stale = shard.operator_status(1, 20).unwrap();
        assert_eq!(
            (stale.desc, stale.status, stale.cancel_reason),
            (
                "admin-transfer-leader",
                OpStatus::Cancel,
                Some(CancelReason::StaleStatus)
            )
        );
        assert_eq!(
            stale.additional_info(),
            r#"{"cancel-reason":"stale status"}"#
        );
        // Region 2's leader reports nothing new, then its report comes at the deadline.
        let right = region(2, b"m", b"", 1, &[1, 2, 3]);
        let deadline = shard.running_operators(Some(2), 10)[0].deadline_ms;
        beat(&mut shard, &right, 20);
        assert!(shard.operator_status(2, 20).unwrap().is_running());
        beat(&mut shard, &right, deadline);
        let timed_out = shard.operator_status(2, deadline).unwrap();
        assert_eq!(
            (
                timed_out.status,
                timed_out.cancel_reason,
                timed_out.takes_ms()
            ),
            (
                OpStatus::Timeout,
                Some(CancelReason::Timeout),
                deadline - 10
            )
        );
        let ends: Vec<_> = shard
            .take_op_events()
            .into_iter()
            .filter(|e| e.record.desc == "admin-transfer-leader")
            .map(|e| {
                let at = e.op.map(|op| op.at);
                (
                    e.region,
                    e.record.status,
                    e.record.cancel_reason,
                    e.stale,
                    at,
                )
            })
            .collect();
        // The stale one with PD's error for a transfer to a peer gone (its `operator is
        // stale` line); each with the operator as it stood, at its one step.
        let gone = Some(Stale::Step("[peer does not existed]"));
        assert_eq!(
            ends,
            vec![
                (1, OpStatus::Running, None, None, Some(0)),
                (2, OpStatus::Running, None, None, Some(0)),
                (
                    1,
                    OpStatus::Cancel,
                    Some(CancelReason::StaleStatus),
                    gone,
                    Some(0)
                ),
                (
                    2,
                    OpStatus::Timeout,
                    Some(CancelReason::Timeout),
                    None,
                    Some(0)
                ),
            ]
        );
        assert_eq!(w.in_flight.get(OpKind::Admin), 0);
    }

    #[test]
    fn an_admin_merge_runs_as_a_pair_and_the_targets_half_ends_when_it_grows() {
        let (w, index, mut shard) = halves_on(&[1, 2, 3]);
        let c = w.at(10);
        assert_eq!(shard.merge_target(9, 10), None);
        let target = shard.merge_target(1, 10).unwrap();
        assert_eq!((target.region.id, target.runs_admin), (1, false));
        let (half, kind) = shard
            .start_admin_merge(2, target, &c, &mut || None)
            .unwrap();
        assert_eq!(kind, "admin");
        assert!(half.passive && half.source.id == 2 && half.target.id == 1);
        // The target changed since it was read: its half is refused.
        let mut stale = half.clone();
        stale.target.epoch.version += 1;
        assert_eq!(
            shard.start_merge_target(1, stale, kind, &c),
            Err(AdminRefused::AddOperator)
        );
        assert_eq!(shard.start_merge_target(1, half, kind, &c), Ok(()));
        assert_eq!(w.in_flight.get(OpKind::Admin), 2);
        // The target's half placed: the source's goes.
        let left = region(1, b"", b"m", 1, &[1, 2, 3]);
        assert_eq!(
            shard.release_admin_merge(2, 1, true, &c),
            Ok(Some(Operator::Merge(Box::new(left))))
        );
        let listed = shard.running_operators(None, 10);
        let shown: Vec<_> = listed.iter().map(|o| (o.region_id, o.desc)).collect();
        assert_eq!(shown, vec![(1, MERGE_DESC), (2, MERGE_DESC)]);
        // Each region of the pair now refuses another admin operator.
        let again = shard.merge_target(1, 10).unwrap();
        assert!(again.runs_admin);
        assert_eq!(
            shard.start_admin_merge(2, again, &c, &mut || None),
            Err(AdminRefused::AddOperator)
        );
        // The target grows over the source: its half is done.
        let whole = region(1, b"", b"", 2, &[1, 2, 3]);
        shard
            .heartbeat(
                &whole,
                RegionStats::default(),
                &w.at(20),
                &index,
                &mut || None,
            )
            .unwrap();
        assert_eq!(
            shard.operator_status(1, 20).map(|r| r.status),
            Some(OpStatus::Success)
        );
        // The source's region is gone: its half is cancelled for that, as PD cancels an
        // operator whose region it no longer finds.
        assert_eq!(
            cancels(&mut shard),
            vec![(2, Some(CancelReason::RegionNotFound), Some(1))]
        );
    }
}
