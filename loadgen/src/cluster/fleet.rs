//! The simulated stores of a `loadgen cluster` run that carries out operators: which stores
//! run (a store can stop, or join later), the regions and leaders each holds as the changes
//! carried out moved them (what its store heartbeat reports, so a drained store reports none
//! and PD buries it), the broken safety rules seen, and the order to end the run. Shared by
//! every stream and the store heartbeat task; touched only when a store changes or an operator
//! was carried out, never per heartbeat. Owns no I/O.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use meridian::placement::Region;

use super::carry_out::Change;

/// The violations described in full; past these only the count grows.
const DESCRIBED: usize = 20;

#[derive(Debug)]
struct SimStore {
    live: AtomicBool,
    regions: AtomicI64,
    leaders: AtomicI64,
}

impl SimStore {
    fn new(live: bool) -> SimStore {
        SimStore {
            live: AtomicBool::new(live),
            regions: AtomicI64::new(0),
            leaders: AtomicI64::new(0),
        }
    }
}

#[derive(Debug, Default)]
pub struct Fleet {
    stores: RwLock<BTreeMap<u64, Arc<SimStore>>>,
    /// Grows each time a store stops: each stream then looks for the regions whose leader it lost.
    stops: AtomicU64,
    ended: AtomicBool,
    changes: AtomicU64,
    violations: AtomicU64,
    described: Mutex<Vec<String>>,
    /// How long a new peer takes to catch up (its snapshot sent and applied): until then its
    /// leader reports it pending, as TiKV does.
    catch_up: Duration,
}

impl Fleet {
    /// `stores`, all running, holding `regions` as reported; a new peer catches up in
    /// `catch_up`.
    pub fn new(stores: &[u64], regions: &[Region], catch_up: Duration) -> Arc<Fleet> {
        let fleet = Fleet {
            catch_up,
            ..Fleet::default()
        };
        {
            let mut map = fleet.write();
            for id in stores {
                map.insert(*id, Arc::new(SimStore::new(true)));
            }
        }
        for r in regions {
            fleet.count_region(r, 1);
        }
        Arc::new(fleet)
    }

    pub fn catch_up(&self) -> Duration {
        self.catch_up
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<u64, Arc<SimStore>>> {
        // The map only gains entries; a panic elsewhere cannot leave it half-changed.
        self.stores.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<u64, Arc<SimStore>>> {
        self.stores.write().unwrap_or_else(|e| e.into_inner())
    }

    fn store(&self, id: u64) -> Option<Arc<SimStore>> {
        self.read().get(&id).cloned()
    }

    fn count_region(&self, r: &Region, sign: i64) {
        let map = self.read();
        for p in &r.peers {
            if let Some(s) = map.get(&p.store_id) {
                s.regions.fetch_add(sign, Relaxed);
            }
        }
        if let Some(s) = r.leader_peer().and_then(|p| map.get(&p.store_id)) {
            s.leaders.fetch_add(sign, Relaxed);
        }
    }

    /// Whether `store` runs (an unknown store does not).
    pub fn is_live(&self, store: u64) -> bool {
        self.store(store).is_some_and(|s| s.live.load(Relaxed))
    }

    /// The store falls silent: no more store heartbeats, and the regions it led elect a leader
    /// among their live voters.
    pub fn stop(&self, store: u64) {
        if let Some(s) = self.store(store) {
            s.live.store(false, Relaxed);
            self.stops.fetch_add(1, Relaxed);
        }
    }

    /// A new store (registered with the cluster by the caller) starts, holding nothing.
    pub fn join(&self, store: u64) {
        self.write()
            .entry(store)
            .or_insert_with(|| Arc::new(SimStore::new(true)));
    }

    /// How many stores have stopped so far.
    pub fn stops(&self) -> u64 {
        self.stops.load(Relaxed)
    }

    /// The running stores with what each holds: (id, regions, leaders).
    pub fn live_stores(&self) -> Vec<(u64, u64, u64)> {
        self.read()
            .iter()
            .filter(|(_, s)| s.live.load(Relaxed))
            .map(|(id, s)| {
                let n = |a: &AtomicI64| a.load(Relaxed).max(0) as u64;
                (*id, n(&s.regions), n(&s.leaders))
            })
            .collect()
    }

    /// Regions and leaders `store` holds as far as the changes carried out tell.
    pub fn holds(&self, store: u64) -> Option<(i64, i64)> {
        self.store(store)
            .map(|s| (s.regions.load(Relaxed), s.leaders.load(Relaxed)))
    }

    /// Counts what a change did to its stores.
    pub fn record(&self, change: &Change) {
        let add = |store: u64, regions: i64, leaders: i64| {
            if let Some(s) = self.store(store) {
                s.regions.fetch_add(regions, Relaxed);
                s.leaders.fetch_add(leaders, Relaxed);
            }
        };
        match change {
            Change::None => return,
            Change::Added(p) => add(p.store_id, 1, 0),
            Change::Promoted(_) | Change::Joint => {}
            Change::Removed(p) => add(p.store_id, -1, 0),
            Change::Leader { from, to } => {
                add(*from, 0, -1);
                add(*to, 0, 1);
            }
            // The new regions are counted when made (`split_made`).
            Change::Split(_) => {}
        }
        self.changes.fetch_add(1, Relaxed);
    }

    /// Regions a split made, each now held by its stores.
    pub fn split_made(&self, new: &[Region]) {
        for r in new {
            self.count_region(r, 1);
        }
    }

    /// Changes carried out so far.
    pub fn changes(&self) -> u64 {
        self.changes.load(Relaxed)
    }

    pub fn violation(&self, what: String) {
        tracing::error!("{what}");
        self.violations.fetch_add(1, Relaxed);
        let mut d = self.described.lock().unwrap_or_else(|e| e.into_inner());
        if d.len() < DESCRIBED {
            d.push(what);
        }
    }

    /// Broken safety rules seen: how many, and the first few.
    pub fn violations(&self) -> (u64, Vec<String>) {
        let d = self.described.lock().unwrap_or_else(|e| e.into_inner());
        (self.violations.load(Relaxed), d.clone())
    }

    /// Ends the run before its duration: each stream stops after its batch in flight.
    pub fn end(&self) {
        self.ended.store(true, Relaxed);
    }

    pub fn is_ended(&self) -> bool {
        self.ended.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian::placement::{Epoch, Peer, PeerRole};

    fn region(id: u64, stores: [u64; 3]) -> Region {
        Region {
            id,
            start_key: vec![],
            end_key: vec![],
            epoch: Epoch::default(),
            peers: stores
                .iter()
                .enumerate()
                .map(|(m, s)| Peer {
                    id: id * 10 + m as u64,
                    store_id: *s,
                    role: PeerRole::Voter,
                })
                .collect(),
            leader: Some(id * 10),
        }
    }

    #[test]
    fn stores_report_what_the_changes_left_them() {
        let regions = [region(1, [1, 2, 3]), region(2, [2, 3, 4])];
        let fleet = Fleet::new(&[1, 2, 3, 4], &regions, Duration::ZERO);
        assert_eq!(fleet.holds(1), Some((1, 1)));
        assert_eq!(fleet.holds(2), Some((2, 1)));
        fleet.record(&Change::Removed(Peer {
            id: 10,
            store_id: 1,
            role: PeerRole::Voter,
        }));
        fleet.record(&Change::Leader { from: 1, to: 3 });
        assert_eq!(fleet.holds(1), Some((0, 0)));
        assert_eq!(fleet.holds(3), Some((2, 1)));
        fleet.stop(4);
        fleet.join(5);
        assert_eq!(fleet.stops(), 1);
        assert!(!fleet.is_live(4) && fleet.is_live(5) && !fleet.is_live(6));
        let live: Vec<u64> = fleet.live_stores().iter().map(|s| s.0).collect();
        assert_eq!(live, [1, 2, 3, 5]);
        assert_eq!(fleet.changes(), 2);
    }
}
