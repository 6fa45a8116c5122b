//! What an operator of the cluster changes while it runs, beside the configuration file: the
//! stores evict-leader empties of leaders, and per-store limits that override
//! `store_limit_*_per_min` (PD's `store limit`). Data, the checks on a change (PD's words for a
//! refusal), and PD's check before a store is decommissioned. The server persists these as JSON
//! and republishes them in the [`StoreView`](super::StoreView); the simulator sets them directly.
//!
//! Must not touch: I/O, the store map's state (a decommission is `StoreMap::decommission`).

use std::collections::BTreeMap;

use crate::placement::{StoreMap, StoreState};

/// The most stores evict-leader may hold, and the most per-store limits kept: one per store
/// the cluster may have, so a client cannot grow either past what the stores bound.
pub const MAX_ENTRIES: usize = 100_000;

/// A store's limits, in PD's JSON (`{"add-peer": 15, "remove-peer": 15}`), peers per minute.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoreLimit {
    #[serde(rename = "add-peer")]
    pub add_peer: f64,
    #[serde(rename = "remove-peer")]
    pub remove_peer: f64,
}

/// Which of a store's limits a change sets (PD's `storelimit.Type`); both when none is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitType {
    AddPeer,
    RemovePeer,
}

impl LimitType {
    /// PD's `parseStoreLimitType` (an empty name is add-peer, as there).
    pub fn parse(name: &str) -> Result<LimitType, SettingsError> {
        match name {
            "" | "add-peer" => Ok(LimitType::AddPeer),
            "remove-peer" => Ok(LimitType::RemovePeer),
            _ => Err(SettingsError::BadLimitType),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Stores whose leaders evict-leader moves away, in id order.
    pub evict_leader: Vec<u64>,
    /// Limits set for one store; the others have the configured rates.
    pub store_limits: BTreeMap<u64, StoreLimit>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    /// PD: 400 "invalid rate which should be larger than 0".
    #[error("invalid rate which should be larger than 0")]
    BadRate,
    /// PD's `parseStoreLimitType` refusal.
    #[error("unknown type")]
    BadLimitType,
    #[error("[PD:core:ErrStoreNotFound]store {0} not found")]
    StoreNotFound(u64),
    #[error("[PD:core:ErrStoreRemoved]store {0} has been removed")]
    StoreRemoved(u64),
    #[error("[PD:core:ErrStoresNotEnough]can not remove store {store} since the number of up stores would be {left} while need {need}")]
    StoresNotEnough {
        store: u64,
        left: usize,
        need: usize,
    },
    #[error("[PD:core:ErrNoStoreForRegionLeader]can not remove store {0} since there are no extra up store to store the leader")]
    NoStoreForLeader(u64),
    #[error("at most {MAX_ENTRIES} entries")]
    TooMany,
}

impl Settings {
    /// The limits of `store`: its own, or the configured rates.
    pub fn limit(&self, store: u64, default: StoreLimit) -> StoreLimit {
        self.store_limits.get(&store).copied().unwrap_or(default)
    }

    /// Sets `rate` for `types` (both when empty) of each of `stores`.
    pub fn set_limits(
        &mut self,
        stores: &[u64],
        rate: f64,
        types: &[LimitType],
        default: StoreLimit,
    ) -> Result<(), SettingsError> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(SettingsError::BadRate);
        }
        let new = stores
            .iter()
            .filter(|s| !self.store_limits.contains_key(s))
            .count();
        if self.store_limits.len() + new > MAX_ENTRIES {
            return Err(SettingsError::TooMany);
        }
        let types = if types.is_empty() {
            &[LimitType::AddPeer, LimitType::RemovePeer][..]
        } else {
            types
        };
        for &store in stores {
            let limit = self.store_limits.entry(store).or_insert(default);
            for t in types {
                match t {
                    LimitType::AddPeer => limit.add_peer = rate,
                    LimitType::RemovePeer => limit.remove_peer = rate,
                }
            }
        }
        Ok(())
    }

    /// Adds `store` to evict-leader; false if it was there.
    pub fn evict(&mut self, store: u64) -> Result<bool, SettingsError> {
        match self.evict_leader.binary_search(&store) {
            Ok(_) => Ok(false),
            Err(_) if self.evict_leader.len() >= MAX_ENTRIES => Err(SettingsError::TooMany),
            Err(at) => {
                self.evict_leader.insert(at, store);
                Ok(true)
            }
        }
    }

    /// Takes `store` out of evict-leader; false if it was not there.
    pub fn stop_evicting(&mut self, store: u64) -> bool {
        match self.evict_leader.binary_search(&store) {
            Ok(at) => {
                self.evict_leader.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// Read back from disk: sorted and deduplicated, so that a hand-edited record cannot break
    /// the binary searches.
    pub fn normalized(mut self) -> Settings {
        self.evict_leader.sort_unstable();
        self.evict_leader.dedup();
        self
    }
}

/// PD's `checkTikvReplicaBeforeOfflineStore` (and `RemoveStore`'s own checks): a store may be
/// decommissioned only if the Up stores left still hold `max_replicas` replicas, and at least
/// one of them is not evicting leaders. `Ok(false)`: already Offline, nothing to do.
pub fn check_decommission(
    map: &StoreMap,
    store: u64,
    max_replicas: usize,
    evicting: &[u64],
) -> Result<bool, SettingsError> {
    let s = map.get(store).ok_or(SettingsError::StoreNotFound(store))?;
    match s.store.state {
        StoreState::Offline => return Ok(false),
        StoreState::Tombstone => return Err(SettingsError::StoreRemoved(store)),
        StoreState::Up | StoreState::Down => {}
    }
    if s.store.state == StoreState::Down {
        // PD checks the replicas left only before taking a serving store away.
        return Ok(true);
    }
    let others: Vec<u64> = map
        .iter()
        .filter(|o| o.store.state == StoreState::Up && o.store.id != store)
        .map(|o| o.store.id)
        .collect();
    if others.len() < max_replicas {
        return Err(SettingsError::StoresNotEnough {
            store,
            left: others.len(),
            need: max_replicas,
        });
    }
    if others.iter().all(|o| evicting.binary_search(o).is_ok()) {
        return Err(SettingsError::NoStoreForLeader(store));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Store, StoreStats};

    const DEFAULT: StoreLimit = StoreLimit {
        add_peer: 15.0,
        remove_peer: 15.0,
    };

    fn map(states: &[(u64, StoreState)]) -> StoreMap {
        let mut m = StoreMap::new();
        for &(id, state) in states {
            m.put(
                Store {
                    id,
                    address: format!("s{id}:20160"),
                    labels: Vec::new(),
                    state: StoreState::Up,
                    details: Default::default(),
                },
                0,
            )
            .unwrap();
            m.heartbeat(id, StoreStats::default(), 0).unwrap();
            if state == StoreState::Offline {
                m.decommission(id).unwrap();
            }
        }
        m
    }

    #[test]
    fn a_limit_is_set_per_type_and_refused_when_not_positive() {
        let mut s = Settings::default();
        s.set_limits(&[1], 30.0, &[LimitType::AddPeer], DEFAULT)
            .unwrap();
        assert_eq!(
            s.limit(1, DEFAULT),
            StoreLimit {
                add_peer: 30.0,
                remove_peer: 15.0
            }
        );
        assert_eq!(s.limit(2, DEFAULT), DEFAULT);
        s.set_limits(&[1, 2], 5.0, &[], DEFAULT).unwrap();
        assert_eq!(s.limit(2, DEFAULT).remove_peer, 5.0);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                s.set_limits(&[1], bad, &[], DEFAULT),
                Err(SettingsError::BadRate)
            );
        }
        assert_eq!(
            s.limit(1, DEFAULT).add_peer,
            5.0,
            "a refusal changes nothing"
        );
        assert_eq!(LimitType::parse("add"), Err(SettingsError::BadLimitType));
        assert_eq!(LimitType::parse(""), Ok(LimitType::AddPeer));
    }

    #[test]
    fn evict_leader_holds_each_store_once_in_order() {
        let mut s = Settings::default();
        assert!(s.evict(3).unwrap());
        assert!(s.evict(1).unwrap());
        assert!(!s.evict(3).unwrap());
        assert_eq!(s.evict_leader, vec![1, 3]);
        assert!(s.stop_evicting(3));
        assert!(!s.stop_evicting(3));
        let read = Settings {
            evict_leader: vec![5, 2, 5],
            ..Settings::default()
        }
        .normalized();
        assert_eq!(read.evict_leader, vec![2, 5]);
    }

    #[test]
    fn decommission_keeps_enough_up_stores_and_a_leader_store() {
        let up = |n: u64| (1..=n).map(|i| (i, StoreState::Up)).collect::<Vec<_>>();
        assert_eq!(check_decommission(&map(&up(4)), 1, 3, &[]), Ok(true));
        assert_eq!(
            check_decommission(&map(&up(3)), 1, 3, &[]),
            Err(SettingsError::StoresNotEnough {
                store: 1,
                left: 2,
                need: 3
            })
        );
        assert_eq!(
            check_decommission(&map(&up(4)), 1, 3, &[2, 3, 4]),
            Err(SettingsError::NoStoreForLeader(1))
        );
        assert_eq!(
            check_decommission(&map(&up(4)), 9, 3, &[]),
            Err(SettingsError::StoreNotFound(9))
        );
        let mut m = map(&up(4));
        m.decommission(1).unwrap();
        assert_eq!(check_decommission(&m, 1, 3, &[]), Ok(false));
    }
}
