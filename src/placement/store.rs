//! The stores Meridian knows: what each storage node says of itself and reports in its
//! heartbeats, and the state Meridian decides for it (Up, Offline, Down, Tombstone); the types
//! are the frames' (`meridian-client`). Owns the store rules: heartbeats only from known, live
//! stores; Down after `max-store-down-time` without one; decommission (Offline, then
//! Tombstone once its heartbeat reports no region left, as PD buries a drained store); no
//! registration that downgrades the cluster version, which it keeps as the lowest store
//! version (`version`'s rules) after every registration. Knows nothing of regions beyond a
//! store's own count. Pure: time is passed in. (Disconnected, which depends only on time, is
//! the scheduler's view: `schedule/view.rs`.)

use std::collections::BTreeMap;

pub use meridian_client::placement::{
    Label, Store, StoreDetails, StoreState, StoreStats, StoreStatus,
};

use super::version::{cluster_version, is_compatible, Version, VersionError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("store {0} is not known")]
    Unknown(u64),
    #[error("store {0} is a tombstone")]
    Tombstone(u64),
    #[error("store {0}: {1}")]
    Invalid(u64, String),
    /// The store's version (as printed) is older than the cluster's by major.minor.
    #[error("store {id}: version {store} is a downgrade of the cluster version {cluster}")]
    Downgrade {
        id: u64,
        cluster: String,
        store: String,
    },
    #[error("store {0}: {1}")]
    BadVersion(u64, VersionError),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreMap {
    stores: BTreeMap<u64, StoreStatus>,
    /// The lowest version among the stores that are not tombstones, as of the last
    /// registration (or as persisted); `None` before the first store.
    cluster_version: Option<Version>,
}

impl StoreMap {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, id: u64) -> Option<&StoreStatus> {
        self.stores.get(&id)
    }

    pub fn iter(&self) -> impl Iterator<Item = &StoreStatus> {
        self.stores.values()
    }

    pub fn len(&self) -> usize {
        self.stores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stores.is_empty()
    }

    /// The cluster version: what a store heartbeat is answered with, and what a registering
    /// store must not downgrade.
    pub fn cluster_version(&self) -> Option<&Version> {
        self.cluster_version.as_ref()
    }

    /// The lowest version of the stores that are not tombstones, as PD recomputes it after a
    /// registration or a tombstoning. A version that does not parse (only a damaged record
    /// can hold one: registration refuses them) is left out.
    fn lowest_version(&self) -> Option<Version> {
        let versions: Vec<Version> = self
            .stores
            .values()
            .filter(|s| s.store.state != StoreState::Tombstone)
            .filter_map(|s| Version::parse(&s.store.details.version).ok())
            .collect();
        cluster_version(&versions)
    }

    /// Registers or updates a store. A store cannot make itself a tombstone or come back
    /// from one; a Down store that registers again is Up. A store already known keeps the
    /// state Meridian holds for it, whatever the registration says (PD's `putStoreImpl`
    /// updates only addresses, version, labels and times): a registration cannot start a
    /// decommission, which a heartbeat reporting no region would finish as a tombstone, nor
    /// undo one. Returns what to persist.
    pub fn put(&mut self, mut store: Store, now_ms: u64) -> Result<&StoreStatus, StoreError> {
        let bad = |why: &str| Err(StoreError::Invalid(store.id, why.to_string()));
        if store.id == 0 {
            return bad("store id 0 is never allocated");
        }
        // Lengths and counts are `Limits`, checked where a request enters.
        if store.address.is_empty() {
            return bad("empty address");
        }
        if store.state == StoreState::Tombstone {
            return bad("a store cannot register as a tombstone");
        }
        let version = Version::parse(&store.details.version)
            .map_err(|e| StoreError::BadVersion(store.id, e))?;
        if let Some(cluster) = &self.cluster_version {
            if !is_compatible(cluster, &version) {
                return Err(StoreError::Downgrade {
                    id: store.id,
                    cluster: cluster.to_string(),
                    store: version.to_string(),
                });
            }
        }
        if self.stores.values().any(|s| {
            s.store.id != store.id
                && s.store.address == store.address
                && s.store.state != StoreState::Tombstone
        }) {
            return bad("another live store has this address");
        }
        if store.state == StoreState::Down {
            store.state = StoreState::Up;
        }
        let id = store.id;
        match self.stores.get_mut(&id) {
            Some(s) if s.store.state == StoreState::Tombstone => {
                return Err(StoreError::Tombstone(id))
            }
            Some(s) => {
                store.state = match s.store.state {
                    StoreState::Down => StoreState::Up,
                    kept => kept,
                };
                s.store = store;
                s.last_heartbeat_ms = now_ms;
            }
            None => {
                self.stores.insert(
                    id,
                    StoreStatus {
                        store,
                        stats: StoreStats::default(),
                        last_heartbeat_ms: now_ms,
                    },
                );
            }
        }
        self.cluster_version = self.lowest_version();
        self.stores.get(&id).ok_or(StoreError::Unknown(id))
    }

    /// Records a heartbeat. Returns whether the state changed (a Down store is Up again; an
    /// Offline store that reports no region left is a Tombstone).
    pub fn heartbeat(
        &mut self,
        id: u64,
        stats: StoreStats,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        let s = self.stores.get_mut(&id).ok_or(StoreError::Unknown(id))?;
        if s.store.state == StoreState::Tombstone {
            return Err(StoreError::Tombstone(id));
        }
        s.stats = stats;
        s.last_heartbeat_ms = now_ms;
        let changed = match s.store.state {
            StoreState::Down => {
                s.store.state = StoreState::Up;
                true
            }
            StoreState::Offline if stats.region_count == 0 => {
                s.store.state = StoreState::Tombstone;
                true
            }
            _ => false,
        };
        if changed && s.store.state == StoreState::Tombstone {
            self.cluster_version = self.lowest_version();
        }
        Ok(changed)
    }

    /// Starts decommissioning a store (PD's `DELETE /store/{id}`): Offline, so that its peers
    /// are moved away; it becomes a Tombstone once it reports none. Returns whether the state
    /// changed (deleting an Offline store again changes nothing).
    pub fn decommission(&mut self, id: u64) -> Result<bool, StoreError> {
        let s = self.stores.get_mut(&id).ok_or(StoreError::Unknown(id))?;
        match s.store.state {
            StoreState::Tombstone => Err(StoreError::Tombstone(id)),
            StoreState::Offline => Ok(false),
            StoreState::Up | StoreState::Down => {
                s.store.state = StoreState::Offline;
                Ok(true)
            }
        }
    }

    /// Marks Down every Up store silent for longer than `max_down_ms`; returns their ids. An
    /// Offline store stays Offline: its drain goes on either way (scheduling reads its silence
    /// as Down health), and a Down mark would let its next heartbeat make it Up again and
    /// forget the decommission.
    pub fn mark_down(&mut self, now_ms: u64, max_down_ms: u64) -> Vec<u64> {
        let mut changed = Vec::new();
        for s in self.stores.values_mut() {
            let up = s.store.state == StoreState::Up;
            if up && now_ms.saturating_sub(s.last_heartbeat_ms) > max_down_ms {
                s.store.state = StoreState::Down;
                changed.push(s.store.id);
            }
        }
        changed
    }

    /// Replaces everything (a new leader's load) with `stores` and the persisted cluster
    /// version (PD keeps the persisted one until the next registration); without one, the
    /// lowest store version. The heartbeat clock restarts at `now_ms` so stores are not
    /// declared Down for the time no leader listened.
    pub fn reset(
        &mut self,
        stores: Vec<StoreStatus>,
        cluster_version: Option<Version>,
        now_ms: u64,
    ) {
        self.stores = stores
            .into_iter()
            .map(|mut s| {
                s.last_heartbeat_ms = now_ms;
                (s.store.id, s)
            })
            .collect();
        self.cluster_version = cluster_version.or_else(|| self.lowest_version());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(id: u64, addr: &str) -> Store {
        Store {
            id,
            address: addr.into(),
            labels: vec![],
            state: StoreState::Up,
            details: Default::default(),
        }
    }

    fn at(id: u64, version: &str) -> Store {
        let mut s = store(id, &format!("s{id}:1"));
        std::sync::Arc::make_mut(&mut s.details).version = version.into();
        s
    }

    #[test]
    fn the_cluster_version_is_the_lowest_and_refuses_downgrades() {
        let mut m = StoreMap::new();
        assert_eq!(m.cluster_version(), None);
        m.put(at(1, "v8.5.7"), 0).unwrap();
        assert_eq!(m.cluster_version().unwrap().to_string(), "8.5.7");
        m.put(at(2, "9.0.0"), 0).unwrap();
        assert_eq!(m.cluster_version().unwrap().to_string(), "8.5.7");
        // A patch behind joins and lowers it; a minor behind is refused and changes nothing.
        m.put(at(3, "8.5.2"), 0).unwrap();
        assert_eq!(m.cluster_version().unwrap().to_string(), "8.5.2");
        let before = m.clone();
        let err = m.put(at(4, "8.4.0"), 0).unwrap_err();
        assert!(matches!(err, StoreError::Downgrade { .. }), "{err}");
        assert!(matches!(
            m.put(at(4, "8.x"), 0),
            Err(StoreError::BadVersion(..))
        ));
        assert_eq!(m, before);
        // The lowest store upgrades: the cluster version follows.
        m.put(at(3, "8.5.7"), 0).unwrap();
        assert_eq!(m.cluster_version().unwrap().to_string(), "8.5.7");
        // A load keeps the persisted version, or finds the lowest.
        let all: Vec<StoreStatus> = m.iter().cloned().collect();
        m.reset(all.clone(), None, 0);
        assert_eq!(m.cluster_version().unwrap().to_string(), "8.5.7");
        m.reset(all, Some(Version::parse("8.5.0").unwrap()), 0);
        assert_eq!(m.cluster_version().unwrap().to_string(), "8.5.0");
    }

    #[test]
    fn down_after_silence_and_up_on_heartbeat() {
        let mut m = StoreMap::new();
        m.put(store(1, "a:1"), 0).unwrap();
        m.put(store(2, "b:1"), 0).unwrap();
        m.heartbeat(2, StoreStats::default(), 900).unwrap();
        assert_eq!(m.mark_down(1001, 1000), vec![1]);
        assert_eq!(m.get(1).unwrap().store.state, StoreState::Down);
        assert_eq!(m.mark_down(1002, 1000), Vec::<u64>::new());
        assert_eq!(m.heartbeat(1, StoreStats::default(), 1003), Ok(true));
        assert_eq!(m.get(1).unwrap().store.state, StoreState::Up);
    }

    #[test]
    fn a_registration_keeps_the_state_of_a_known_store() {
        let offline = |id, addr| Store {
            state: StoreState::Offline,
            ..store(id, addr)
        };
        let mut m = StoreMap::new();
        m.put(store(1, "a:1"), 0).unwrap();
        // A registration saying Offline neither decommissions the store nor, with a heartbeat
        // reporting no region, buries it.
        assert_eq!(
            m.put(offline(1, "a:2"), 1).unwrap().store.state,
            StoreState::Up
        );
        assert_eq!(
            m.get(1).unwrap().store.address,
            "a:2",
            "the rest is updated"
        );
        assert_eq!(m.heartbeat(1, StoreStats::default(), 2), Ok(false));
        assert_eq!(m.get(1).unwrap().store.state, StoreState::Up);
        // Nor does one saying Up undo a decommission.
        assert_eq!(m.decommission(1), Ok(true));
        assert_eq!(
            m.put(store(1, "a:2"), 3).unwrap().store.state,
            StoreState::Offline
        );
        // A Down store that registers again is Up; a new store is what it says.
        let mut m = StoreMap::new();
        m.put(store(2, "b:1"), 0).unwrap();
        assert_eq!(m.mark_down(5000, 1000), vec![2]);
        assert_eq!(
            m.put(store(2, "b:1"), 5001).unwrap().store.state,
            StoreState::Up
        );
        assert_eq!(
            m.put(offline(3, "c:1"), 0).unwrap().store.state,
            StoreState::Offline
        );
    }

    #[test]
    fn a_decommissioned_store_is_offline_until_it_reports_no_region() {
        let mut m = StoreMap::new();
        m.put(store(1, "a:1"), 0).unwrap();
        let some = StoreStats {
            region_count: 2,
            ..StoreStats::default()
        };
        m.heartbeat(1, some, 1).unwrap();
        assert_eq!(m.decommission(1), Ok(true));
        assert_eq!(m.decommission(1), Ok(false));
        assert_eq!(m.heartbeat(1, some, 2), Ok(false));
        assert_eq!(m.get(1).unwrap().store.state, StoreState::Offline);
        assert_eq!(m.heartbeat(1, StoreStats::default(), 3), Ok(true));
        assert_eq!(m.get(1).unwrap().store.state, StoreState::Tombstone);
        assert_eq!(m.decommission(1), Err(StoreError::Tombstone(1)));
        assert_eq!(m.decommission(9), Err(StoreError::Unknown(9)));
    }

    #[test]
    fn a_silent_decommissioned_store_stays_offline_through_its_return() {
        let mut m = StoreMap::new();
        m.put(store(1, "a:1"), 0).unwrap();
        let some = StoreStats {
            region_count: 2,
            ..StoreStats::default()
        };
        m.heartbeat(1, some, 1).unwrap();
        m.decommission(1).unwrap();
        assert_eq!(m.mark_down(5000, 1000), Vec::<u64>::new());
        m.heartbeat(1, some, 5001).unwrap();
        assert_eq!(m.get(1).unwrap().store.state, StoreState::Offline);
    }

    #[test]
    fn bad_stores_are_refused_and_change_nothing() {
        let mut m = StoreMap::new();
        m.put(store(1, "a:1"), 0).unwrap();
        let before = m.clone();
        assert!(m.put(store(0, "z:1"), 0).is_err());
        assert!(m.put(store(2, ""), 0).is_err());
        assert!(m.put(store(2, "a:1"), 0).is_err(), "address taken");
        let mut t = store(3, "c:1");
        t.state = StoreState::Tombstone;
        assert!(m.put(t, 0).is_err());
        assert_eq!(
            m.heartbeat(9, StoreStats::default(), 1),
            Err(StoreError::Unknown(9))
        );
        assert_eq!(m, before);
    }
}
