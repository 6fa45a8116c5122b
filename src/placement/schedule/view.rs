//! The stores as scheduling sees them: each store's recorded state, when it last heartbeated,
//! its counts, its location (the values of the location labels, widest first) and its budget
//! (`budget.rs`), which carries over from one view to the next. Rebuilt when a store changes;
//! read lock-free by every core. Owns the store health rules that depend on time: Up,
//! Disconnected after `store_disconnect_ms` of silence (no longer a target), Down after
//! `max_store_down_time_ms`, as PD has them. Also carries whether the cluster version takes
//! `ChangePeerV2`, which decides how a membership change is built and sent.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::budget::StoreBudget;
use super::config::ScheduleConfig;
use super::settings::{Settings, StoreLimit};
use crate::placement::store::{StoreMap, StoreState};
use crate::placement::version::supports_conf_change_v2;

/// A store's health at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Heartbeating; `removing` when it is Offline (being drained: serves, takes nothing new).
    Serving {
        removing: bool,
    },
    /// Silent past `store_disconnect_ms`: its peers still count, but it takes nothing new.
    Disconnected {
        removing: bool,
    },
    /// Silent past `max_store_down_time_ms`, or marked Down: its peers are replaced.
    Down,
    Tombstone,
}

impl Health {
    /// Whether a peer here may be counted on (it serves, or only missed a few heartbeats).
    pub fn is_serving(self) -> bool {
        matches!(self, Health::Serving { .. })
    }

    /// Whether a new peer or leader may go here.
    pub fn is_target(self) -> bool {
        self == Health::Serving { removing: false }
    }

    /// Whether peers here are to be replaced (the store is gone or going).
    pub fn must_drain(self) -> bool {
        matches!(
            self,
            Health::Down
                | Health::Tombstone
                | Health::Serving { removing: true }
                | Health::Disconnected { removing: true }
        )
    }

    /// Whether the store is Offline (being drained), whether or not it still heartbeats.
    pub fn is_removing(self) -> bool {
        matches!(
            self,
            Health::Serving { removing: true } | Health::Disconnected { removing: true }
        )
    }

    /// Whether removing a peer here serves nothing and so is not charged to its limit.
    pub fn is_free_to_remove(self) -> bool {
        self.must_drain()
    }
}

/// What scheduling needs of one store.
#[derive(Debug, Clone)]
pub struct StoreLoad {
    pub id: u64,
    pub state: StoreState,
    pub last_heartbeat_ms: u64,
    pub region_count: u64,
    pub leader_count: u64,
    /// The location label values, in `location_labels` order ("" where the store has none).
    pub location: Vec<String>,
    pub budget: Arc<StoreBudget>,
    /// Among the target stores of this store's isolation domain (the whole cluster without
    /// one) at the view's making: the fewest regions, and the mean.
    pub domain_min_regions: u64,
    pub domain_mean_regions: f64,
}

impl StoreLoad {
    pub fn health(&self, now_ms: u64, cfg: &ScheduleConfig) -> Health {
        let silent = now_ms.saturating_sub(self.last_heartbeat_ms);
        let removing = self.state == StoreState::Offline;
        match self.state {
            StoreState::Tombstone => Health::Tombstone,
            StoreState::Down => Health::Down,
            _ if silent > cfg.max_store_down_time_ms => Health::Down,
            _ if silent > cfg.store_disconnect_ms => Health::Disconnected { removing },
            _ => Health::Serving { removing },
        }
    }

    /// Region count with operators in flight and not yet reported counted.
    pub fn regions(&self) -> i64 {
        self.region_count as i64 + self.budget.delta().0
    }

    /// Leader count likewise.
    pub fn leaders(&self) -> i64 {
        self.leader_count as i64 + self.budget.delta().1
    }
}

/// The stores, in id order.
#[derive(Debug, Clone, Default)]
pub struct StoreView {
    stores: Vec<StoreLoad>,
    /// Stores whose leaders evict-leader moves away, in id order.
    evicting: Vec<u64>,
    /// Limits set for one store (`ctl store limit`); the others have the configured rates.
    limits: Arc<BTreeMap<u64, StoreLimit>>,
    mean_leaders: f64,
    /// Whether the cluster version takes `ChangePeerV2` (5.0 and later), at the view's making.
    conf_change_v2: bool,
}

impl StoreView {
    /// The view of `map`, keeping `prev`'s budgets. A store whose heartbeat is newer than in
    /// `prev` reports counts that include what settled before it: that is cleared.
    pub fn of(map: &StoreMap, cfg: &ScheduleConfig, prev: &StoreView, now_ms: u64) -> StoreView {
        let stores = map
            .iter()
            .map(|s| {
                let old = prev.get(s.store.id);
                let budget = match old {
                    Some(o) => {
                        if s.last_heartbeat_ms > o.last_heartbeat_ms {
                            o.budget.heartbeat();
                        }
                        o.budget.clone()
                    }
                    None => Arc::new(StoreBudget::new(cfg, now_ms)),
                };
                let location = cfg
                    .location_labels
                    .iter()
                    .map(|k| {
                        s.store
                            .labels
                            .iter()
                            .find(|l| l.key == *k)
                            .map(|l| l.value.clone())
                            .unwrap_or_default()
                    })
                    .collect();
                StoreLoad {
                    id: s.store.id,
                    state: s.store.state,
                    last_heartbeat_ms: s.last_heartbeat_ms,
                    region_count: s.stats.region_count,
                    leader_count: s.stats.leader_count,
                    location,
                    budget,
                    domain_min_regions: 0,
                    domain_mean_regions: 0.0,
                }
            })
            .collect();
        let mut view = StoreView {
            stores,
            evicting: prev.evicting.clone(),
            limits: prev.limits.clone(),
            mean_leaders: 0.0,
            conf_change_v2: supports_conf_change_v2(map.cluster_version()),
        };
        view.measure(cfg, now_ms);
        view
    }

    /// Fills in the domain figures and the mean leader count over target stores.
    fn measure(&mut self, cfg: &ScheduleConfig, now_ms: u64) {
        let level = cfg.isolation_index();
        let domain = |s: &StoreLoad| -> Vec<String> {
            level.map_or_else(Vec::new, |l| s.location[..=l].to_vec())
        };
        let targets: Vec<(Vec<String>, u64, u64)> = self
            .stores
            .iter()
            .filter(|s| s.health(now_ms, cfg).is_target())
            .map(|s| (domain(s), s.region_count, s.leader_count))
            .collect();
        self.mean_leaders = if targets.is_empty() {
            0.0
        } else {
            targets.iter().map(|t| t.2 as f64).sum::<f64>() / targets.len() as f64
        };
        // Per domain: the fewest regions, their sum and the count of target stores, in one
        // pass, so that a view of many stores is not quadratic in them.
        let mut domains: HashMap<Vec<String>, (u64, u64, u64)> = HashMap::new();
        for (d, regions, _) in targets {
            let e = domains.entry(d).or_insert((u64::MAX, 0, 0));
            e.0 = e.0.min(regions);
            e.1 += regions;
            e.2 += 1;
        }
        for s in &mut self.stores {
            match domains.get(&domain(s)) {
                Some(&(min, sum, n)) => {
                    s.domain_min_regions = min;
                    s.domain_mean_regions = sum as f64 / n as f64;
                }
                None => {
                    s.domain_min_regions = 0;
                    s.domain_mean_regions = 0.0;
                }
            }
        }
    }

    /// Whether conf changes go to TiKV as `ChangePeerV2`, and joint consensus may be used: the
    /// cluster version (the lowest store's) is 5.0 or later, as PD checks it before building an
    /// operator and again before sending each step.
    pub fn conf_change_v2(&self) -> bool {
        self.conf_change_v2
    }

    /// The mean leader count over target stores at the view's making.
    pub fn mean_leaders(&self) -> f64 {
        self.mean_leaders
    }

    pub fn get(&self, id: u64) -> Option<&StoreLoad> {
        self.stores
            .binary_search_by_key(&id, |s| s.id)
            .ok()
            .map(|i| &self.stores[i])
    }

    pub fn iter(&self) -> impl Iterator<Item = &StoreLoad> {
        self.stores.iter()
    }

    pub fn health(&self, id: u64, now_ms: u64, cfg: &ScheduleConfig) -> Health {
        self.get(id)
            .map_or(Health::Tombstone, |s| s.health(now_ms, cfg))
    }

    /// Sets the stores evict-leader empties of leaders.
    pub fn set_evicting(&mut self, mut ids: Vec<u64>) {
        ids.sort_unstable();
        ids.dedup();
        self.evicting = ids;
    }

    pub fn is_evicting(&self, id: u64) -> bool {
        self.evicting.binary_search(&id).is_ok()
    }

    pub fn evicting(&self) -> &[u64] {
        &self.evicting
    }

    /// Takes on what an operator set at run time: evict-leader's stores and per-store limits.
    pub fn apply(&mut self, settings: &Settings) {
        self.set_evicting(settings.evict_leader.clone());
        self.limits = Arc::new(settings.store_limits.clone());
    }

    /// Peers per minute `store` may gain (`add`) or lose: its own limit, or the configured one.
    pub fn rate(&self, store: u64, add: bool, cfg: &ScheduleConfig) -> f64 {
        match (self.limits.get(&store), add) {
            (Some(l), true) => l.add_peer,
            (Some(l), false) => l.remove_peer,
            (None, true) => cfg.store_limit_add_per_min,
            (None, false) => cfg.store_limit_remove_per_min,
        }
    }
}
