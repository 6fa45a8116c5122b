//! The stores Meridian knows: what each storage node says of itself and reports in its
//! heartbeats, and the state Meridian decides for it (Up, Offline, Down, Tombstone); the types
//! are the frames' (`meridian-client`). Owns the store rules: heartbeats only from known, live
//! stores; Down after `max-store-down-time` without one. Knows nothing of regions. Pure: time
//! is passed in.

use std::collections::BTreeMap;

pub use meridian_client::placement::{Label, Store, StoreState, StoreStats, StoreStatus};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("store {0} is not known")]
    Unknown(u64),
    #[error("store {0} is a tombstone")]
    Tombstone(u64),
    #[error("store {0}: {1}")]
    Invalid(u64, String),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreMap {
    stores: BTreeMap<u64, StoreStatus>,
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

    /// Registers or updates a store. A store cannot make itself a tombstone or come back
    /// from one; a Down store that registers again is Up. Returns what to persist.
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
        self.stores.get(&id).ok_or(StoreError::Unknown(id))
    }

    /// Records a heartbeat. Returns whether the state changed (a Down store is Up again).
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
        let revived = s.store.state == StoreState::Down;
        if revived {
            s.store.state = StoreState::Up;
        }
        Ok(revived)
    }

    /// Marks Down every live store silent for longer than `max_down_ms`; returns their ids.
    pub fn mark_down(&mut self, now_ms: u64, max_down_ms: u64) -> Vec<u64> {
        let mut changed = Vec::new();
        for s in self.stores.values_mut() {
            let live = matches!(s.store.state, StoreState::Up | StoreState::Offline);
            if live && now_ms.saturating_sub(s.last_heartbeat_ms) > max_down_ms {
                s.store.state = StoreState::Down;
                changed.push(s.store.id);
            }
        }
        changed
    }

    /// Replaces everything (a new leader's load); the heartbeat clock restarts at `now_ms`
    /// so stores are not declared Down for the time no leader listened.
    pub fn reset(&mut self, stores: Vec<StoreStatus>, now_ms: u64) {
        self.stores = stores
            .into_iter()
            .map(|mut s| {
                s.last_heartbeat_ms = now_ms;
                (s.store.id, s)
            })
            .collect();
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
        }
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
