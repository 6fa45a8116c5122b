//! The scheduler's entry points, shared by the server's shards and the simulator: a region
//! heartbeat (advance the region's operator by what the leader reports and send its current
//! step; with none and a changed report, run the replica checker), and the patrol (the same for a region the patrol
//! reaches, plus the location checker, evict-leader, hot-write, balance-region and
//! balance-leader). An
//! operator starts only within the cluster-wide cap of its kind and the stores' limits, and
//! counts against its stores until it is done, cancelled or timed out. Each step is checked
//! again before it is sent (`step_check`).
//!
//! Must not touch: I/O, the OS clock, the range index.

use super::balance::{balance_leader, balance_region, evict_leader, is_settled, Sources};
use super::budget::influence;
use super::cluster::{Cluster, HotMove, RegionInput};
use super::hot::{hot_write, moved_flow, HotLoads};
use super::joint::joint_steps;
use super::merge::{self, MergeInput, MergePlan};
use super::plan::{Plan, NEW_PEER};
use super::replica;
use super::step_check::{check_step, Stale, Verdict};
use crate::placement::cancel_reason::CancelReason;
use crate::placement::operator::{MergeStep, OpKind, Operator, Pending, Progress, Step};

/// How an operator ended, as PD's operator controller tells the ends apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// All its steps done.
    Done,
    /// Past its deadline.
    TimedOut,
    /// Cancelled, for the reason PD would give.
    Cancelled(CancelReason),
}

/// What one call did to a region's operator.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dispatch {
    /// The step to send to the region's leader now.
    pub step: Option<Operator>,
    /// The operator that ended in this call: its kind, and how it ended.
    pub ended: Option<(OpKind, Ended)>,
    /// That operator as it stood when it ended (its steps and the step it was at), for the
    /// line the caller logs of it.
    pub ended_op: Option<Box<Pending>>,
    /// Why that operator's step was found stale, when it was cancelled for that.
    pub stale: Option<Stale>,
    /// Whether an operator started in this call.
    pub started: bool,
    /// A merge started in this call: the target region's operator, which the caller puts in
    /// that region's slot (the checker chose a target with none).
    pub merge_target: Option<(u64, Box<Pending>)>,
    /// A merge's operator ended without being done: the other region of the pair, whose
    /// operator the caller cancels too (as PD removes a merge's related operator).
    pub merge_partner: Option<u64>,
    /// A hot-region operator ended in this call (done, cancelled or timed out), moving this
    /// flow: the caller tells its hot cache (`HotCache::hot_op_ended`), and the hot scheduler
    /// leaves the region alone for a while.
    pub hot_ended: Option<HotMove>,
}

/// A leader's report: advance the region's operator, and once it has none, run the replica
/// checker if the report `changed` the region (its peers, leader or epoch, or the region is
/// new to the caller). An unchanged report needs no decision: the patrol checks every region
/// within `patrol_period_ms`, as PD's checkers run from its patrol and not from each heartbeat,
/// and a store's change of health reaches a region through the patrol either way.
pub fn on_heartbeat(
    c: &Cluster,
    r: &RegionInput,
    changed: bool,
    slot: &mut Option<Box<Pending>>,
    new_peer_id: &mut dyn FnMut() -> Option<u64>,
) -> Dispatch {
    let mut d = Dispatch::default();
    if slot.is_some() {
        d = run(c, r, slot);
        if slot.is_some() {
            return d;
        }
    }
    if !changed {
        return d;
    }
    if let Some(plan) = room(c, OpKind::Replica)
        .then(|| replica::check(c, r, false))
        .flatten()
    {
        d.step = start(c, r, plan, slot, new_peer_id, &mut d);
    }
    d
}

/// Whether an operator of `kind` could start now: planning one that cannot is wasted work.
fn room(c: &Cluster, kind: OpKind) -> bool {
    c.in_flight.get(kind) < c.cfg.cap(kind)
}

/// One patrol batch's memo of which balancers could act ([`Sources`]): judged from the stores
/// when first needed, and again after an operator starts or ends in the batch. Lives for one
/// batch, as time and the stores' reports move between batches.
#[derive(Debug, Default)]
pub struct Sweep {
    sources: Option<Sources>,
    hot: Option<HotLoads>,
}

impl Sweep {
    fn sources(&mut self, c: &Cluster) -> Sources {
        *self.sources.get_or_insert_with(|| Sources::of(c))
    }

    fn hot(&mut self, c: &Cluster) -> HotLoads {
        *self.hot.get_or_insert_with(|| HotLoads::of(c))
    }

    /// The counts moved: judge again when next needed.
    fn reset(&mut self) {
        self.sources = None;
        self.hot = None;
    }
}

/// The patrol reaches `r` (as last reported): the operator it has runs on, its step pushed to
/// the leader again (as PD pushes a pending operator); with none, the checkers and schedulers,
/// and the first step of an operator started here is pushed at once. The merge checker runs
/// after the replica checker, as in PD's checker controller, when the caller gives the
/// region's neighbours (`merge`). `sweep` carries what the batch has judged of the stores.
pub fn patrol(
    c: &Cluster,
    sweep: &mut Sweep,
    r: &RegionInput,
    merge: Option<&MergeInput>,
    slot: &mut Option<Box<Pending>>,
    new_peer_id: &mut dyn FnMut() -> Option<u64>,
) -> Dispatch {
    let mut d = Dispatch::default();
    if slot.is_some() {
        d = run(c, r, slot);
        if d.ended.is_some() {
            sweep.reset();
        }
        if slot.is_some() {
            return d;
        }
    }
    let plan = room(c, OpKind::Replica)
        .then(|| replica::check(c, r, true))
        .flatten();
    // A region in a joint state waits for the replica checker to take it out: no merge or
    // balance plans over roles that are changing.
    if plan.is_none() && r.region.peers.iter().any(|p| p.role.is_joint()) {
        return d;
    }
    // PD's balancers and merge checker leave a hot region to the hot scheduler.
    let hot = r
        .hot
        .is_some_and(|h| h.degree >= c.cfg.hot_region_cache_hits_threshold);
    if plan.is_none() && !hot {
        if let Some(m) = merge.filter(|_| room(c, OpKind::Merge)) {
            if let Some(mp) = merge::check(c, r, m) {
                start_merge(c, r, mp, slot, new_peer_id, &mut d);
                sweep.reset();
                return d;
            }
        }
    }
    let plan = plan
        .or_else(|| {
            let can = sweep.sources(c);
            let evict = can.evict && room(c, OpKind::Leader);
            evict.then(|| evict_leader(c, r)).flatten()
        })
        .or_else(|| {
            // Only a region the hot cache holds as hot can be moved for its flow.
            if r.hot.is_none() || !room(c, OpKind::Hot) {
                return None;
            }
            let loads = sweep.hot(c);
            (loads.any() && is_settled(c, r))
                .then(|| hot_write(c, &loads, r))
                .flatten()
        })
        .or_else(|| {
            if hot {
                return None;
            }
            let can = sweep.sources(c);
            let region = can.region && room(c, OpKind::Region);
            let leader = can.leader && room(c, OpKind::Leader);
            if !(region || leader) || !is_settled(c, r) {
                return None;
            }
            region
                .then(|| balance_region(c, r))
                .flatten()
                .or_else(|| leader.then(|| balance_leader(c, r)).flatten())
        });
    if let Some(plan) = plan {
        d.step = start(c, r, plan, slot, new_peer_id, &mut d);
        sweep.reset();
    }
    d
}

/// Starts a merge: the source's operator as any other, then the target's, which counts
/// against the merge cap too (PD counts both) but is never sent.
fn start_merge(
    c: &Cluster,
    r: &RegionInput,
    mp: MergePlan,
    slot: &mut Option<Box<Pending>>,
    new_peer_id: &mut dyn FnMut() -> Option<u64>,
    d: &mut Dispatch,
) {
    d.step = start(c, r, mp.source, slot, new_peer_id, d);
    if !d.started {
        return;
    }
    // The pair was admitted together below the cap, as PD admits it.
    if !c.in_flight.try_start(OpKind::Merge, usize::MAX) {
        return;
    }
    d.merge_target = Some((
        mp.target_id,
        Box::new(Pending {
            kind: OpKind::Merge,
            steps: mp.target.steps,
            at: 0,
            leader_store: 0,
            created_ms: c.now_ms,
            deadline_ms: c.now_ms.saturating_add(c.cfg.operator_timeout_ms),
            flow: 0,
            held: false,
        }),
    ));
}

/// Drops `slot`'s operator (the region is gone, or the term ended), releasing its charges;
/// the operator, as it stood, for the caller's log.
pub fn cancel(c: &Cluster, slot: &mut Option<Box<Pending>>) -> Option<Box<Pending>> {
    let op = slot.take()?;
    release(c, &op, false);
    Some(op)
}

/// Advances the pending operator; with its step if it is to be sent.
fn run(c: &Cluster, r: &RegionInput, slot: &mut Option<Box<Pending>>) -> Dispatch {
    let mut d = Dispatch::default();
    let Some(op) = slot.as_mut() else {
        return d;
    };
    let progress = op.advance(r.region, r.pending_peers);
    let (deadline, kind, held) = (op.deadline_ms, op.kind, op.held);
    let hot = (kind == OpKind::Hot).then(|| moved_flow(op));
    let step = match progress {
        Progress::Done => {
            if let Some(op) = slot.take() {
                release(c, &op, true);
                d.ended_op = Some(op);
            }
            d.ended = Some((kind, Ended::Done));
            d.hot_ended = hot;
            return d;
        }
        Progress::Running(step) => step,
    };
    if c.now_ms >= deadline {
        d.merge_partner = slot.as_deref().and_then(Pending::merge_partner);
        d.ended_op = cancel(c, slot);
        d.ended = Some((kind, Ended::TimedOut));
        d.hot_ended = hot;
        return d;
    }
    match check_step(c, r, &step) {
        Verdict::Send if held => {}
        Verdict::Send => d.step = Some(step.wire()),
        Verdict::Hold => {}
        Verdict::Cancel(reason, why) => {
            d.merge_partner = slot.as_deref().and_then(Pending::merge_partner);
            d.ended_op = cancel(c, slot);
            d.ended = Some((kind, Ended::Cancelled(reason)));
            d.stale = why;
            d.hot_ended = hot;
        }
    }
    d
}

/// Starts `plan` if its cap and its stores' limits allow; returns its first step.
fn start(
    c: &Cluster,
    r: &RegionInput,
    mut plan: Plan,
    slot: &mut Option<Box<Pending>>,
    new_peer_id: &mut dyn FnMut() -> Option<u64>,
    d: &mut Dispatch,
) -> Option<Operator> {
    let leader_store = r.leader()?.store_id;
    let mut draft = Pending {
        kind: plan.kind,
        steps: Vec::new(),
        at: 0,
        leader_store,
        created_ms: c.now_ms,
        deadline_ms: c.now_ms.saturating_add(c.cfg.operator_timeout_ms),
        flow: plan.flow,
        held: false,
    };
    if !c.in_flight.try_start(plan.kind, c.cfg.cap(plan.kind)) {
        return None;
    }
    let cost = influence(r.size_mib);
    draft.steps = plan.steps.clone();
    // As PD's operator controller: every step that adds a peer is charged to its store's add
    // limit and every charged removal to its store's remove limit (a merge's alignment moves
    // may add and remove several; the merge itself costs nothing), all or none.
    let charges: Vec<(u64, bool)> = draft
        .adds()
        .map(|s| (s, true))
        .chain(
            draft
                .removes()
                .filter(|s| !c.health(*s).is_free_to_remove())
                .map(|s| (s, false)),
        )
        .collect();
    let mut taken = Vec::with_capacity(charges.len());
    let mut took = true;
    for (s, add) in charges {
        let Some(b) = c.store(s).map(|l| l.budget.clone()) else {
            continue;
        };
        let rate = c.rate(s, add);
        if !b.take(add, cost, rate, c.now_ms) {
            took = false;
            break;
        }
        taken.push((b, add, rate));
    }
    // One new id per store a new peer goes to (a merge may add several).
    let mut ids: Vec<(u64, u64)> = Vec::new();
    let mut got_ids = true;
    if took {
        for s in &plan.steps {
            if let Step::AddLearner(p) = s {
                if p.id == NEW_PEER && !ids.iter().any(|(st, _)| *st == p.store_id) {
                    match new_peer_id() {
                        Some(id) => ids.push((p.store_id, id)),
                        None => got_ids = false,
                    }
                }
            }
        }
    }
    if !took || !got_ids {
        for (b, add, rate) in taken {
            b.refund(add, cost, rate);
        }
        c.in_flight.finish(plan.kind);
        return None;
    }
    for s in &mut plan.steps {
        if let Step::AddLearner(p) | Step::PromoteLearner(p) | Step::TransferLeader(p) = s {
            if p.id == NEW_PEER {
                if let Some((_, id)) = ids.iter().find(|(st, _)| *st == p.store_id) {
                    p.id = *id;
                }
            }
        }
    }
    draft.steps = if c.use_joint_consensus() {
        joint_steps(r.region, plan.steps)
    } else {
        plan.steps
    };
    charge(c, &draft, 1);
    *slot = Some(Box::new(draft));
    // An operator cancelled by its first check started and ended here: to the caller it never
    // ran (its charges are released; tokens it took stay spent).
    let first = run(c, r, slot);
    d.started = first.ended.is_none();
    first.step
}

/// Starts `plan`, decided outside the checkers (ScatterRegion, SplitRegions), the way theirs
/// start: within its kind's cap and its stores' limits, its first step checked. The dispatch
/// says whether it started and carries that step.
pub fn start_plan(
    c: &Cluster,
    r: &RegionInput,
    plan: Plan,
    slot: &mut Option<Box<Pending>>,
    new_peer_id: &mut dyn FnMut() -> Option<u64>,
) -> Dispatch {
    let mut d = Dispatch::default();
    d.step = start(c, r, plan, slot, new_peer_id, &mut d);
    d
}

/// Starts an admin operator (PD's `POST /operators`): every new peer in `plan` already has its
/// id. As PD's admin operators (urgent priority) it is capped by no schedule limit and takes
/// nothing from the stores' limits; it still counts in flight and against its stores until it
/// ends, and its first step is checked against the latest report like any other's. The
/// dispatch says whether it started and carries that step.
pub fn start_admin_plan(
    c: &Cluster,
    r: &RegionInput,
    plan: Plan,
    slot: &mut Option<Box<Pending>>,
) -> Dispatch {
    let mut d = Dispatch::default();
    let Some(leader_store) = r.leader().map(|p| p.store_id) else {
        return d;
    };
    if plan.needs_new_peer() || !c.in_flight.try_start(plan.kind, c.cfg.cap(plan.kind)) {
        return d;
    }
    let steps = if c.use_joint_consensus() {
        joint_steps(r.region, plan.steps)
    } else {
        plan.steps
    };
    let op = Pending {
        kind: plan.kind,
        steps,
        at: 0,
        leader_store,
        created_ms: c.now_ms,
        deadline_ms: c.now_ms.saturating_add(c.cfg.operator_timeout_ms),
        flow: 0,
        held: false,
    };
    charge(c, &op, 1);
    *slot = Some(Box::new(op));
    let first = run(c, r, slot);
    d.started = first.ended.is_none();
    d.step = first.step;
    d
}

/// Lets `slot`'s operator, held until now, be sent (an admin merge's source half, once the
/// target's half is placed): it is run against the latest report as at its start, and the
/// dispatch carries the step to send.
pub fn let_go(c: &Cluster, r: &RegionInput, slot: &mut Option<Box<Pending>>) -> Dispatch {
    if let Some(op) = slot.as_mut() {
        op.held = false;
    }
    run(c, r, slot)
}

/// The target's half of an admin merge (`step`, passive): never sent, it keeps other
/// operators off the target until the target's range changes, and counts in flight as the
/// source's half does. `None` when no admin operator may start.
pub fn start_passive(c: &Cluster, step: MergeStep) -> Option<Box<Pending>> {
    let kind = OpKind::Admin;
    if !step.passive || !c.in_flight.try_start(kind, c.cfg.cap(kind)) {
        return None;
    }
    Some(Box::new(Pending {
        kind,
        steps: vec![Step::Merge(Box::new(step))],
        at: 0,
        leader_store: 0,
        created_ms: c.now_ms,
        deadline_ms: c.now_ms.saturating_add(c.cfg.operator_timeout_ms),
        flow: 0,
        held: false,
    }))
}

/// Adds (`sign` 1) or takes back (-1) the operator's effect on its stores' pending counts.
fn charge(c: &Cluster, op: &Pending, sign: i64) {
    use std::sync::atomic::Ordering::Relaxed;
    for s in op.adds().filter_map(|s| c.store(s)) {
        s.budget.pending.regions.fetch_add(sign, Relaxed);
    }
    for s in op.removes().filter_map(|s| c.store(s)) {
        s.budget.pending.regions.fetch_sub(sign, Relaxed);
    }
    if let Some(to) = op.leader_to() {
        if let Some(s) = c.store(to) {
            s.budget.pending.leaders.fetch_add(sign, Relaxed);
        }
        if let Some(s) = c.store(op.leader_store) {
            s.budget.pending.leaders.fetch_sub(sign, Relaxed);
        }
    }
    // PD's pending influence: the flow a hot-region operator moves counts on its stores
    // while it runs, so the next decision does not pile more onto the same target.
    if op.flow > 0 {
        let f = i64::try_from(op.flow).unwrap_or(i64::MAX) * sign;
        for s in op.adds().filter_map(|s| c.store(s)) {
            s.budget.flow.add_pending(false, f);
        }
        for s in op.removes().filter_map(|s| c.store(s)) {
            s.budget.flow.add_pending(false, -f);
        }
        if let Some(to) = op.leader_to() {
            if let Some(s) = c.store(to) {
                s.budget.flow.add_pending(true, f);
            }
            if let Some(s) = c.store(op.leader_store) {
                s.budget.flow.add_pending(true, -f);
            }
        }
    }
}

/// The operator ended: its stores no longer count it in flight; if it was done, they count
/// its effect until their next heartbeat reports it.
fn release(c: &Cluster, op: &Pending, done: bool) {
    use std::sync::atomic::Ordering::Relaxed;
    charge(c, op, -1);
    if done {
        for s in op.adds().filter_map(|s| c.store(s)) {
            s.budget.settled.regions.fetch_add(1, Relaxed);
        }
        for s in op.removes().filter_map(|s| c.store(s)) {
            s.budget.settled.regions.fetch_sub(1, Relaxed);
        }
        if let Some(to) = op.leader_to() {
            if let Some(s) = c.store(to) {
                s.budget.settled.leaders.fetch_add(1, Relaxed);
            }
            if let Some(s) = c.store(op.leader_store) {
                s.budget.settled.leaders.fetch_sub(1, Relaxed);
            }
        }
    }
    c.in_flight.finish(op.kind);
}
