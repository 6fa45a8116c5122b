//! The scenario's actions: a store killed, revived or decommissioned, stores added, a zone
//! lost and returned, a rolling restart (evict-leader, stop, start, one store at a time), each
//! when its time comes; and the floor and the fewest moves each is measured against.
//!
//! Must not: carry out steps or elect leaders itself (it stops and starts stores through
//! `tikv`), or judge convergence (that is `audit`'s).

use super::tikv::{store_record, SimStore};
use super::Sim;
use crate::queue::Event;
use crate::scenario::Action;

pub(super) struct Rolling {
    pub(super) order: Vec<u64>,
    pub(super) next: usize,
    pub(super) down_ms: u64,
    /// The store being evicted and since when, or stopped and until when.
    pub(super) evicting: Option<(u64, u64)>,
    pub(super) stopped: Option<(u64, u64)>,
    pub(super) longest_evict_ms: u64,
}

impl Sim {
    pub(super) fn act(&mut self, n: usize) {
        let action = self.scn.actions[n].clone();
        match action {
            Action::Kill { store, .. } => {
                self.kill(store);
                self.lost_floor(store);
            }
            Action::Revive { store, .. } => self.revive(store),
            Action::Decommission { store, .. } => {
                self.lost_floor(store);
                self.stores[(store - 1) as usize].decommissioned = true;
                let _ = self.map.decommission(store);
                self.republish();
            }
            Action::AddStores { per_zone, .. } => self.add_stores(&per_zone),
            Action::KillZone { zone, .. } => {
                self.zone_down = Some(zone);
                let ids: Vec<u64> = self.zone(zone);
                for id in ids {
                    self.kill(id);
                }
            }
            Action::ReviveZone { zone, .. } => {
                self.zone_down = None;
                let ids: Vec<u64> = self.zone(zone);
                for id in ids {
                    self.revive(id);
                }
            }
            Action::RollingRestart { down_s, .. } => {
                let order: Vec<u64> = self
                    .stores
                    .iter()
                    .filter(|s| s.alive)
                    .map(|s| s.id)
                    .collect();
                self.rolling = Some(Rolling {
                    order,
                    next: 0,
                    down_ms: down_s * 1000,
                    evicting: None,
                    stopped: None,
                    longest_evict_ms: 0,
                });
                self.roll();
            }
            Action::DeleteHalf { .. } => self.delete_half(),
            Action::DeleteRange { from, to, .. } => self.delete_range(from, to),
            Action::HotWrite {
                leaders_on,
                regions,
                bytes_per_s,
                ..
            } => self.start_hot_write(&leaders_on, regions, bytes_per_s),
        }
        self.recount();
        if n == self.scn.trigger {
            let delay = self.scn.trigger_delay_s * 1000;
            self.trigger_ms = match &self.scn.actions[n] {
                // When its last heartbeat is `max-store-down-time` old: the Down mark.
                Action::Kill { store, .. } => self
                    .map
                    .get(*store)
                    .map(|s| s.last_heartbeat_ms + self.cfg.max_store_down_time_ms + delay),
                // Set when its last store has returned.
                Action::RollingRestart { .. } => self.trigger_ms,
                _ => Some(self.now + delay),
            };
        }
    }

    fn zone(&self, zone: u32) -> Vec<u64> {
        self.stores
            .iter()
            .filter(|s| s.zone == zone && s.joined)
            .map(|s| s.id)
            .collect()
    }

    /// The floor and fewest moves for replacing every peer of store `id` inside its zone.
    fn lost_floor(&mut self, id: u64) {
        let s = &self.stores[(id - 1) as usize];
        let receivers = self
            .stores
            .iter()
            .filter(|o| o.zone == s.zone && o.id != id && o.alive && !o.decommissioned)
            .count()
            .max(1);
        self.min_moves = s.peers;
        self.floor_s =
            s.peers as f64 / (receivers as f64 * self.cfg.store_limit_add_per_min) * 60.0;
    }

    fn add_stores(&mut self, per_zone: &[u32]) {
        let mut floor: f64 = 0.0;
        let mut min_moves = 0;
        for (z, &n) in per_zone.iter().enumerate() {
            for _ in 0..n {
                let id = self.stores.len() as u64 + 1;
                self.stores.push(SimStore {
                    id,
                    zone: z as u32,
                    alive: true,
                    joined: true,
                    decommissioned: false,
                    peers: 0,
                    leaders: 0,
                    send_free_ms: 0,
                    recv_free_ms: 0,
                    started_ms: self.now,
                });
                let _ = self.map.put(store_record(id, z as u32), self.now);
                self.q.push(
                    self.now,
                    Event::StoreBeat {
                        store: (id - 1) as u32,
                    },
                );
            }
            // Each new store ends with its zone's mean.
            let in_zone = self.zone(z as u32).len() as u64;
            let zone_peers: u64 = self
                .stores
                .iter()
                .filter(|s| s.zone == z as u32)
                .map(|s| s.peers)
                .sum();
            let share = zone_peers / in_zone.max(1);
            min_moves += share * u64::from(n);
            if n > 0 {
                floor = floor.max(share as f64 / self.cfg.store_limit_add_per_min * 60.0);
            }
        }
        self.min_moves = min_moves;
        self.floor_s = floor;
        self.republish();
    }

    /// The rolling restart's next move, checked every second.
    pub(super) fn roll(&mut self) {
        let Some(mut r) = self.rolling.take() else {
            return;
        };
        if let Some((store, since)) = r.evicting {
            let leaders = self.stores[(store - 1) as usize].leaders;
            // Leaders gone, or ten minutes spent: stop the store.
            if leaders == 0 || self.now - since >= 600_000 {
                r.longest_evict_ms = r.longest_evict_ms.max(self.now - since);
                r.evicting = None;
                self.kill(store);
                self.recount();
                r.stopped = Some((store, self.now + r.down_ms));
            }
        } else if let Some((store, until)) = r.stopped {
            if self.now >= until {
                self.revive(store);
                r.stopped = None;
                self.view.set_evicting(Vec::new());
                self.recount();
                if r.next >= r.order.len() {
                    self.trigger_ms = Some(self.now);
                }
            }
        } else if r.next < r.order.len() {
            let store = r.order[r.next];
            r.next += 1;
            self.view.set_evicting(vec![store]);
            r.evicting = Some((store, self.now));
        }
        self.rolling = Some(r);
    }
}
