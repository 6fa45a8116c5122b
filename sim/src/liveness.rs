//! Liveness, checked on every operator that ends: **no operator is stuck**. An operator that
//! times out is a finding unless one of the stores it names (a store it adds a peer to,
//! removes one from, moves the leader to or from, or a merge's peers sit on) stopped or started
//! again while it ran, or is stopped when it ends.
//!
//! # Why this rule, from the timing model
//!
//! Under the timing model (crate docs) an operator whose stores all keep serving ends in well
//! under a minute: each step is sent as soon as it is planned and again on every patrol pass
//! (10 s) and on each report the leader sends at once after a change; a learner's snapshot
//! takes the region's size over the store bandwidth (96 MiB at 100 MiB/s: about 1 s), queued at
//! most behind the other snapshots its receiver's add limit lets start (15 a minute and one
//! bucket's burst) and its sender's; it catches up in 1 s; a promotion, a joint change and a
//! removal apply at once; a leader transfer takes 30 ms; a merge 500 ms. The operator timeout is
//! 10 minutes, an order of magnitude past that. So when no store an operator names stopped,
//! its timeout means the scheduler itself held a step it could have sent, or kept sending one
//! TiKV refuses: a stuck operator. One such operator leaves its region unhealed for 10 minutes
//! and blocks every other operator on it meanwhile.
//!
//! The alternative, a bound on the time to heal after the last fault (the peers to place over
//! the receiving stores' add limit, as `floor_s` is), is weaker for this: the bound must carry
//! the 30-minute Down mark, the limits' floor for every fault that overlaps and slack for
//! queueing, and one region held for 10 minutes hides inside that slack when other repairs run
//! longer; nor does it say which operator or step was at fault. The run's convergence (healed
//! before `max_sim_s`) still stands beside this check, for a scheduler that plans nothing.
//!
//! Owns: the findings and when each store last stopped or started. Must not: judge an
//! operator by the scheduler's own guards (only by its end and the stores' fates, which the
//! scenario decides), or change anything in the run.

use meridian::placement::schedule::{Pending, Step};

/// How many findings are described in the report.
const SAMPLES: usize = 5;

#[derive(Default)]
pub struct Liveness {
    pub count: u64,
    pub samples: Vec<String>,
    /// Per store index: when it last stopped or started, if it has.
    changed_ms: Vec<Option<u64>>,
}

impl Liveness {
    /// Store index `s` stopped or started at `now_ms`.
    pub fn store_changed(&mut self, s: usize, now_ms: u64) {
        if self.changed_ms.len() <= s {
            self.changed_ms.resize(s + 1, None);
        }
        self.changed_ms[s] = Some(now_ms);
    }

    /// `op`, on region `region`, timed out at `now_ms`; `alive` says whether a store (by id)
    /// runs now.
    pub fn timed_out(
        &mut self,
        now_ms: u64,
        region: u64,
        op: &Pending,
        alive: &dyn Fn(u64) -> bool,
    ) {
        let excused = stores_of(op).into_iter().any(|id| {
            let changed = usize::try_from(id)
                .ok()
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| self.changed_ms.get(i).copied().flatten())
                .is_some_and(|t| t >= op.created_ms);
            changed || !alive(id)
        });
        if excused {
            return;
        }
        self.count += 1;
        if self.samples.len() < SAMPLES {
            self.samples.push(format!(
                "at {:.3} s: {:?} operator on region {region}, started at {:.3} s, timed out at step {} of {:?} with every store it names serving",
                now_ms as f64 / 1000.0,
                op.kind,
                op.created_ms as f64 / 1000.0,
                op.at,
                op.steps,
            ));
        }
    }
}

/// Every store an operator names: the leader's when it was made, and each its steps touch.
fn stores_of(op: &Pending) -> Vec<u64> {
    let mut ids = vec![op.leader_store];
    for s in &op.steps {
        match s {
            Step::AddLearner(p)
            | Step::PromoteLearner(p)
            | Step::RemovePeer(p)
            | Step::TransferLeader(p) => ids.push(p.store_id),
            Step::JointEnter(j) | Step::JointLeave(j) => {
                ids.extend(j.promote.iter().chain(&j.demote).map(|p| p.store_id));
            }
            Step::Merge(m) => {
                ids.extend(
                    m.source
                        .peers
                        .iter()
                        .chain(&m.target.peers)
                        .map(|p| p.store_id),
                );
            }
            Step::Split(_) => {}
        }
    }
    ids.retain(|id| *id != 0);
    ids.sort_unstable();
    ids.dedup();
    ids
}
