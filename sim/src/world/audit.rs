//! The audit of a run: once a simulated second, the Down marks, the rolling restart's next
//! move, a sample every minute and whether the scenario's predicate holds (convergence); at the
//! end, the report.
//!
//! Must not: change regions or stores itself (the rolling restart's moves are `actions`'),
//! or start anything the scheduler decides.

use meridian::placement::StoreState;

use super::tikv::SimStore;
use super::Sim;
use crate::report::Report;
use crate::scenario::Goal;

impl Sim {
    pub(super) fn second(&mut self) {
        if !self
            .map
            .mark_down(self.now, self.cfg.max_store_down_time_ms)
            .is_empty()
        {
            self.republish();
        }
        self.roll();
        if self.now % 60_000 == 0 {
            self.series.sample(
                self.now,
                self.stores.iter().map(|s| (s.peers, s.leaders, s.zone)),
            );
        }
        let Some(trigger) = self.trigger_ms else {
            return;
        };
        if self.now < trigger {
            return;
        }
        let period = self.scn.timing.patrol_period_ms;
        // After a deletion, quiet means the merge checker, once allowed to act, has passed
        // over every region and found nothing more to merge.
        if self.keys_deleted && self.now < self.cfg.split_merge_interval_ms + period {
            return;
        }
        let quiet = self.now.saturating_sub(self.last_op_ms) >= period;
        if quiet && self.holds() {
            self.converged_ms = Some(self.now);
        }
    }

    /// The scenario's predicate.
    fn holds(&self) -> bool {
        if self.bad > 0 {
            return false;
        }
        let tombstones = self.stores.iter().filter(|s| s.decommissioned).all(|s| {
            self.map
                .get(s.id)
                .is_some_and(|m| m.store.state == StoreState::Tombstone)
        });
        if !tombstones {
            return false;
        }
        let live: Vec<&SimStore> = self
            .stores
            .iter()
            .filter(|s| s.alive && s.joined && !s.decommissioned)
            .collect();
        let within = |v: u64, mean: f64| (v as f64 - mean).abs() <= (mean * 0.05).max(1.0);
        match self.scn.goal {
            Goal::Healed => true,
            Goal::HotBalanced => self.hot_balanced(),
            Goal::Merged => self
                .merge_start_regions
                .is_some_and(|n| self.live_regions as f64 <= n as f64 * 0.55),
            Goal::LeadersBalanced => {
                let mean =
                    live.iter().map(|s| s.leaders).sum::<u64>() as f64 / live.len().max(1) as f64;
                live.iter().all(|s| within(s.leaders, mean))
            }
            Goal::Balanced => live.iter().all(|s| {
                let same: Vec<&&SimStore> = live.iter().filter(|o| o.zone == s.zone).collect();
                let n = same.len().max(1) as f64;
                let peers = same.iter().map(|o| o.peers).sum::<u64>() as f64 / n;
                let leaders = same.iter().map(|o| o.leaders).sum::<u64>() as f64 / n;
                within(s.peers, peers) && within(s.leaders, leaders)
            }),
        }
    }

    pub(super) fn report(&self, seed: u64) -> Report {
        let converged_after_s = match (self.trigger_ms, self.converged_ms) {
            (Some(t), Some(c)) => Some((c.saturating_sub(t)) as f64 / 1000.0),
            _ => None,
        };
        Report {
            scenario: self.scn.name.clone(),
            seed,
            stores: self.stores.len() as u64,
            regions: self.regions.len() as u64,
            converged: converged_after_s.is_some(),
            converged_after_s,
            floor_s: self.floor_s,
            moves: self.moves,
            min_moves: self.min_moves,
            leader_transfers: self.leader_transfers,
            operators: self.operators,
            violations: self.check.count,
            violation_samples: self.check.samples.clone(),
            stuck_operators: self.liveness.count,
            stuck_samples: self.liveness.samples.clone(),
            longest_evict_s: self
                .rolling
                .as_ref()
                .map(|r| r.longest_evict_ms as f64 / 1000.0),
            repairs_during_loss: self.repairs_during_loss,
            regions_at_end: self.live_regions,
            merges: self.merges,
            simulated_s: self.now as f64 / 1000.0,
            hot_flow: self.hot_flow(),
            series: self.series.clone(),
            wall_s: 0.0,
        }
    }
}
