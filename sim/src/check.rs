//! Violations, checked on every simulated step: rules 1 to 3 on each step TiKV carries out
//! (`schedule::safety`, independent of the scheduler's own guards), rule 4 on each operator
//! that starts (operators in flight per kind against their cap; each store's adds and charged
//! removes in any trailing minute, every one an operator makes (a merge's alignment may make
//! several), against what its token bucket can give: one bucket's capacity plus a minute's
//! refill).

use std::collections::VecDeque;

use meridian::placement::schedule::safety::{self, Rule};
use meridian::placement::schedule::{capacity, OpKind, REGION_INFLUENCE};
use meridian::placement::{Operator, Peer, Region, ScheduleConfig};

/// How many violations are described in the report.
const SAMPLES: usize = 5;

#[derive(Default)]
pub struct Checker {
    pub count: u64,
    pub samples: Vec<String>,
    /// Per store index: (time, cost) of adds, and of charged removes, in the last minute.
    adds: Vec<VecDeque<(u64, f64)>>,
    removes: Vec<VecDeque<(u64, f64)>>,
}

impl Checker {
    fn record(&mut self, now_ms: u64, rule: Rule, what: String) {
        self.count += 1;
        if self.samples.len() < SAMPLES {
            self.samples.push(format!(
                "at {:.3} s: {rule:?}: {what}",
                now_ms as f64 / 1000.0
            ));
        }
    }

    /// A step about to be carried out on `region`.
    pub fn step(
        &mut self,
        now_ms: u64,
        region: &Region,
        op: &Operator,
        healthy: &dyn Fn(&Peer) -> bool,
    ) {
        if let Some(rule) = safety::check(region, op, healthy) {
            self.record(
                now_ms,
                rule,
                format!("{op:?} on region {} {:?}", region.id, region.peers),
            );
        }
    }

    /// A merge of `source` into `target` (each as it stands) that TiKV is asked to make.
    pub fn merge(&mut self, now_ms: u64, source: &Region, target: &Region) {
        if let Some(rule) = safety::check_merge(source, target) {
            self.record(
                now_ms,
                rule,
                format!(
                    "merge of region {} {:?} into {} {:?}",
                    source.id, source.peers, target.id, target.peers
                ),
            );
        }
    }

    /// An operator started. `live` is how many of its kind are in flight, itself included.
    pub fn started(
        &mut self,
        now_ms: u64,
        cfg: &ScheduleConfig,
        kind: OpKind,
        live: usize,
        adds: &[(usize, f64)],
        removes: &[(usize, f64)],
    ) {
        if live > cfg.cap(kind) {
            self.record(
                now_ms,
                Rule::PastLimit,
                format!("{live} {kind:?} operators in flight, cap {}", cfg.cap(kind)),
            );
        }
        let mut breaches = Vec::new();
        for (log, charges, rate, what) in [
            (&mut self.adds, adds, cfg.store_limit_add_per_min, "add"),
            (
                &mut self.removes,
                removes,
                cfg.store_limit_remove_per_min,
                "remove",
            ),
        ] {
            for &(store, cost) in charges {
                if log.len() <= store {
                    log.resize_with(store + 1, VecDeque::new);
                }
                let window = &mut log[store];
                while window.front().is_some_and(|(t, _)| *t + 60_000 <= now_ms) {
                    window.pop_front();
                }
                window.push_back((now_ms, cost));
                let spent: f64 = window.iter().map(|e| e.1).sum();
                let bound = capacity(rate) + rate * REGION_INFLUENCE + 1e-6;
                if spent > bound {
                    breaches.push(format!(
                        "store index {store}: {what} {spent} in a minute, bound {bound}"
                    ));
                }
            }
        }
        for b in breaches {
            self.record(now_ms, Rule::PastLimit, b);
        }
    }
}
