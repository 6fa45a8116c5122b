//! The simulated cluster and its run: TiKV's side (stores that heartbeat, die and return;
//! regions whose leaders carry out steps with the timing model's delays) and PD's side (the
//! store map, the scheduler's view, its operators), joined by the event queue. PD's side is
//! the scheduling core itself, called as the server's shards call it: a region heartbeat, a
//! store heartbeat, a patrol pass.

use meridian::placement::schedule::{
    self, influence, Cluster, InFlight, Pending, RegionInput, StoreView,
};
use meridian::placement::{
    Epoch, Label, Operator, Peer, PeerRole, Region, ScheduleConfig, Store, StoreDetails, StoreMap,
    StoreState, StoreStats,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::check::Checker;
use crate::queue::{Event, Queue};
use crate::report::{Report, Series};
use crate::scenario::{Action, Goal, Scenario};

struct SimStore {
    id: u64,
    zone: u32,
    alive: bool,
    joined: bool,
    decommissioned: bool,
    peers: u64,
    leaders: u64,
    /// When its snapshot link is free again, each way.
    send_free_ms: u64,
    recv_free_ms: u64,
}

struct SimRegion {
    region: Region,
    /// Learners still catching up (TiKV's `pending_peers`).
    pending: Vec<u64>,
    /// PD's operator for the region.
    slot: Option<Box<Pending>>,
    good: bool,
}

struct Rolling {
    order: Vec<u64>,
    next: usize,
    down_ms: u64,
    /// The store being evicted and since when, or stopped and until when.
    evicting: Option<(u64, u64)>,
    stopped: Option<(u64, u64)>,
    longest_evict_ms: u64,
}

pub struct Sim {
    scn: Scenario,
    cfg: ScheduleConfig,
    now: u64,
    q: Queue,
    rng: ChaCha8Rng,
    stores: Vec<SimStore>,
    regions: Vec<SimRegion>,
    // PD's side.
    map: StoreMap,
    view: StoreView,
    in_flight: InFlight,
    next_id: u64,
    cursor: usize,
    // Accounting.
    check: Checker,
    live: [usize; 4],
    bad: u64,
    last_op_ms: u64,
    trigger_ms: Option<u64>,
    converged_ms: Option<u64>,
    moves: u64,
    leader_transfers: u64,
    operators: u64,
    rolling: Option<Rolling>,
    zone_down: Option<u32>,
    repairs_during_loss: u64,
    floor_s: f64,
    min_moves: u64,
    series: Series,
}

/// The configuration the simulator runs the scheduler with: PD's defaults, location labels
/// zone and host, isolation at zone level.
pub fn schedule_config(scn: &Scenario) -> ScheduleConfig {
    ScheduleConfig {
        location_labels: vec!["zone".into(), "host".into()],
        isolation_level: "zone".into(),
        max_store_down_time_ms: scn.max_store_down_s * 1000,
        patrol_interval_ms: scn.timing.patrol_tick_ms,
        patrol_period_ms: scn.timing.patrol_period_ms,
        ..ScheduleConfig::default()
    }
}

fn store_record(id: u64, zone: u32) -> Store {
    Store {
        id,
        address: format!("store{id}:20160"),
        labels: vec![
            Label {
                key: "zone".into(),
                value: format!("z{}", zone + 1),
            },
            Label {
                key: "host".into(),
                value: format!("h{id}"),
            },
        ],
        state: StoreState::Up,
        details: std::sync::Arc::new(StoreDetails {
            version: "8.5.0".into(),
            ..StoreDetails::default()
        }),
    }
}

impl Sim {
    pub fn new(scn: Scenario, seed: u64) -> Sim {
        let cfg = schedule_config(&scn);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut stores = Vec::new();
        let mut by_zone: Vec<Vec<u64>> = Vec::new();
        for (z, &n) in scn.zones.iter().enumerate() {
            let mut ids = Vec::new();
            for _ in 0..n {
                let id = stores.len() as u64 + 1;
                ids.push(id);
                stores.push(SimStore {
                    id,
                    zone: z as u32,
                    alive: true,
                    joined: true,
                    decommissioned: false,
                    peers: 0,
                    leaders: 0,
                    send_free_ms: 0,
                    recv_free_ms: 0,
                });
            }
            // A shuffled round robin: every store of a zone holds the same number of peers,
            // in an order the seed decides.
            for i in (1..ids.len()).rev() {
                let j = rng.gen_range(0..=i);
                ids.swap(i, j);
            }
            by_zone.push(ids);
        }
        let mut next_id = scn.regions + stores.len() as u64 + 1;
        let mut regions = Vec::with_capacity(scn.regions as usize);
        for i in 0..scn.regions {
            let peers: Vec<Peer> = by_zone
                .iter()
                .filter(|ids| !ids.is_empty())
                .map(|ids| {
                    next_id += 1;
                    Peer {
                        id: next_id,
                        store_id: ids[(i % ids.len() as u64) as usize],
                        role: PeerRole::Voter,
                    }
                })
                .collect();
            let leader = peers[rng.gen_range(0..peers.len())].id;
            let region = Region {
                id: i + 1,
                start_key: if i == 0 { vec![] } else { key(i) },
                end_key: if i + 1 == scn.regions {
                    vec![]
                } else {
                    key(i + 1)
                },
                epoch: Epoch {
                    conf_ver: 1,
                    version: 1,
                },
                peers,
                leader: Some(leader),
            };
            for p in &region.peers {
                stores[(p.store_id - 1) as usize].peers += 1;
                if Some(p.id) == region.leader {
                    stores[(p.store_id - 1) as usize].leaders += 1;
                }
            }
            regions.push(SimRegion {
                region,
                pending: Vec::new(),
                slot: None,
                good: true,
            });
        }
        let mut map = StoreMap::new();
        for s in &stores {
            // Registration of a fresh store with a valid record cannot fail.
            let _ = map.put(store_record(s.id, s.zone), 0);
        }
        let mut sim = Sim {
            view: StoreView::default(),
            in_flight: InFlight::default(),
            cfg,
            now: 0,
            q: Queue::default(),
            rng,
            stores,
            regions,
            map,
            next_id,
            cursor: 0,
            check: Checker::default(),
            live: [0; 4],
            bad: 0,
            last_op_ms: 0,
            trigger_ms: None,
            converged_ms: None,
            moves: 0,
            leader_transfers: 0,
            operators: 0,
            rolling: None,
            zone_down: None,
            repairs_during_loss: 0,
            floor_s: 0.0,
            min_moves: 0,
            series: Series::default(),
            scn,
        };
        let t = sim.scn.timing.clone();
        // Heartbeats start at phases the seed picks, as stores started at different times.
        for s in 0..sim.stores.len() {
            let at = sim.rng.gen_range(0..t.store_heartbeat_ms);
            sim.q.push(at, Event::StoreBeat { store: s as u32 });
        }
        for r in 0..sim.regions.len() {
            let at = sim.rng.gen_range(0..t.region_heartbeat_ms);
            sim.q.push(
                at,
                Event::RegionBeat {
                    region: r as u32,
                    periodic: true,
                },
            );
        }
        for (i, a) in sim.scn.actions.iter().enumerate() {
            sim.q.push(a.at_s() * 1000, Event::Action(i as u32));
        }
        sim.q.push(t.patrol_tick_ms, Event::Patrol);
        sim.q.push(1000, Event::Second);
        sim.store_beats_all();
        sim
    }

    /// Every store heartbeats once at time 0, so PD knows their counts before anything runs.
    fn store_beats_all(&mut self) {
        for s in 0..self.stores.len() {
            self.store_beat(s);
        }
    }

    fn cluster(&self) -> Cluster<'_> {
        Cluster {
            cfg: &self.cfg,
            stores: &self.view,
            in_flight: &self.in_flight,
            now_ms: self.now,
        }
    }

    /// Runs to convergence or the scenario's end.
    pub fn run(mut self, seed: u64) -> Report {
        let end = self.scn.max_sim_s * 1000;
        while let Some((at, e)) = self.q.pop() {
            if at > end || self.converged_ms.is_some() {
                break;
            }
            self.now = at;
            self.handle(e);
        }
        self.report(seed)
    }

    fn handle(&mut self, e: Event) {
        let t = &self.scn.timing;
        match e {
            Event::RegionBeat { region, periodic } => {
                if periodic {
                    let next = self.now + t.region_heartbeat_ms;
                    self.q.push(next, e);
                }
                self.region_beat(region as usize);
            }
            Event::StoreBeat { store } => {
                let s = store as usize;
                if self.stores[s].alive && self.stores[s].joined {
                    let next = self.now + t.store_heartbeat_ms;
                    self.q.push(next, e);
                    self.store_beat(s);
                }
            }
            Event::Patrol => {
                let next = self.now + t.patrol_tick_ms;
                self.q.push(next, Event::Patrol);
                self.patrol();
            }
            Event::SnapshotApplied { region, peer } => {
                let r = &self.regions[region as usize];
                let on = r
                    .region
                    .peers
                    .iter()
                    .find(|p| p.id == peer)
                    .map(|p| p.store_id);
                if on.is_some_and(|s| self.stores[(s - 1) as usize].alive) {
                    let at = self.now + self.scn.timing.catch_up_ms;
                    self.q.push(at, Event::CaughtUp { region, peer });
                }
            }
            Event::CaughtUp { region, peer } => {
                let i = region as usize;
                self.change(i, |r| r.pending.retain(|p| *p != peer));
                self.beat_now(i);
            }
            Event::LeaderMoved { region, peer } => self.leader_moved(region as usize, peer),
            Event::Elect { region } => self.elect(region as usize),
            Event::Action(i) => self.act(i as usize),
            Event::Second => {
                self.q.push(self.now + 1000, Event::Second);
                self.second();
            }
        }
    }

    // ---- PD's side --------------------------------------------------------------------

    fn store_beat(&mut self, s: usize) {
        let st = &self.stores[s];
        let used = (st.peers * self.scn.region_size_mib) << 20;
        let stats = StoreStats {
            capacity: 4 << 40,
            available: (4u64 << 40).saturating_sub(used),
            used_size: used,
            region_count: st.peers,
            leader_count: st.leaders,
        };
        // A Tombstone's heartbeats are refused, as PD refuses them.
        let _ = self.map.heartbeat(st.id, stats, self.now);
        self.republish();
    }

    fn republish(&mut self) {
        self.view = StoreView::of(&self.map, &self.cfg, &self.view, self.now);
    }

    /// One call into the scheduler for region `i`; `patrol` picks the entry point.
    fn schedule(&mut self, i: usize, patrol: bool) {
        let mut slot = self.regions[i].slot.take();
        let mut next_id = self.next_id;
        let d = {
            let r = &self.regions[i];
            let input = RegionInput {
                region: &r.region,
                pending_peers: &r.pending,
                size_mib: self.scn.region_size_mib,
            };
            let c = self.cluster();
            let mut ids = || {
                next_id += 1;
                Some(next_id)
            };
            if patrol {
                schedule::patrol(&c, &input, &mut slot, &mut ids)
            } else {
                schedule::on_heartbeat(&c, &input, &mut slot, &mut ids)
            }
        };
        self.next_id = next_id;
        if let Some((kind, _)) = d.ended {
            self.live[kind.index()] -= 1;
        }
        if d.started {
            if let Some(p) = slot.as_deref() {
                self.started(p);
            }
        }
        self.regions[i].slot = slot;
        if let Some(op) = d.step {
            self.carry_out(i, op);
        }
    }

    /// An operator started: count it and check rule 4.
    fn started(&mut self, p: &Pending) {
        self.operators += 1;
        self.last_op_ms = self.now;
        self.live[p.kind.index()] += 1;
        let cost = influence(self.scn.region_size_mib);
        let add = p.adds_to().map(|s| ((s - 1) as usize, cost));
        let c = self.cluster();
        let remove = p
            .removes_from()
            .filter(|s| !c.health(*s).is_free_to_remove())
            .map(|s| ((s - 1) as usize, cost));
        let live = self.live[p.kind.index()];
        self.check
            .started(self.now, &self.cfg, p.kind, live, add, remove);
        if self.zone_down.is_some() && add.is_some() {
            self.repairs_during_loss += 1;
        }
    }

    fn region_beat(&mut self, i: usize) {
        if !self.leader_alive(i) {
            return;
        }
        self.schedule(i, false);
    }

    fn patrol(&mut self) {
        let n = self.regions.len();
        for _ in 0..self.cfg.patrol_batch_for(n).min(n) {
            if self.cursor >= n {
                self.cursor = 0;
            }
            let i = self.cursor;
            self.cursor += 1;
            if self.leader_alive(i) {
                self.schedule(i, true);
            }
        }
    }

    // ---- TiKV's side ------------------------------------------------------------------

    fn leader_alive(&self, i: usize) -> bool {
        self.regions[i]
            .region
            .leader_peer()
            .is_some_and(|p| self.stores[(p.store_id - 1) as usize].alive)
    }

    /// Changes region `i`, keeping the count of regions that are not healed.
    fn change(&mut self, i: usize, f: impl FnOnce(&mut SimRegion)) {
        f(&mut self.regions[i]);
        let good = self.is_good(&self.regions[i]);
        let r = &mut self.regions[i];
        if r.good != good {
            if good {
                self.bad -= 1;
            } else {
                self.bad += 1;
            }
            r.good = good;
        }
    }

    fn is_good(&self, r: &SimRegion) -> bool {
        let peers = &r.region.peers;
        if peers.len() != self.cfg.max_replicas
            || !r.pending.is_empty()
            || peers.iter().any(|p| p.role != PeerRole::Voter)
        {
            return false;
        }
        for (k, p) in peers.iter().enumerate() {
            let s = &self.stores[(p.store_id - 1) as usize];
            if !s.alive || s.decommissioned {
                return false;
            }
            if peers[..k]
                .iter()
                .any(|q| self.stores[(q.store_id - 1) as usize].zone == s.zone)
            {
                return false;
            }
        }
        true
    }

    /// Recounts every region (after a store's state changed).
    fn recount(&mut self) {
        let mut bad = 0;
        for i in 0..self.regions.len() {
            let good = self.is_good(&self.regions[i]);
            self.regions[i].good = good;
            bad += u64::from(!good);
        }
        self.bad = bad;
    }

    /// The leader heartbeats at once, as TiKV does after a conf change or a leader change.
    fn beat_now(&mut self, i: usize) {
        self.q.push(
            self.now,
            Event::RegionBeat {
                region: i as u32,
                periodic: false,
            },
        );
    }

    /// The leader of region `i` carries out `op` (checked against the safety rules first).
    fn carry_out(&mut self, i: usize, op: Operator) {
        if !self.leader_alive(i) {
            return;
        }
        {
            let r = &self.regions[i];
            let input = RegionInput {
                region: &r.region,
                pending_peers: &r.pending,
                size_mib: self.scn.region_size_mib,
            };
            let c = Cluster {
                cfg: &self.cfg,
                stores: &self.view,
                in_flight: &self.in_flight,
                now_ms: self.now,
            };
            let healthy = |p: &Peer| input.is_healthy(&c, p);
            self.check.step(self.now, &r.region, &op, &healthy);
        }
        let size = self.scn.region_size_mib;
        match op {
            Operator::AddPeer(p) => {
                let existing = self.regions[i]
                    .region
                    .peers
                    .iter()
                    .find(|q| q.id == p.id)
                    .map(|q| q.role);
                match (existing, p.role) {
                    (None, _) => {
                        // A new learner (or voter): it waits for a snapshot.
                        let store = (p.store_id - 1) as usize;
                        let leader = self.regions[i]
                            .region
                            .leader_peer()
                            .map(|l| (l.store_id - 1) as usize)
                            .unwrap_or(store);
                        let peer = p.id;
                        self.change(i, |r| {
                            r.region.peers.push(p);
                            r.region.epoch.conf_ver += 1;
                            r.pending.push(peer);
                        });
                        self.stores[store].peers += 1;
                        let ms = size * 1000 / self.scn.timing.snapshot_mib_per_s.max(1);
                        let start = self
                            .now
                            .max(self.stores[store].recv_free_ms)
                            .max(self.stores[leader].send_free_ms);
                        self.stores[store].recv_free_ms = start + ms;
                        self.stores[leader].send_free_ms = start + ms;
                        self.q.push(
                            start + ms,
                            Event::SnapshotApplied {
                                region: i as u32,
                                peer,
                            },
                        );
                        self.beat_now(i);
                    }
                    (Some(PeerRole::Learner), PeerRole::Voter) => {
                        self.change(i, |r| {
                            if let Some(q) = r.region.peers.iter_mut().find(|q| q.id == p.id) {
                                q.role = PeerRole::Voter;
                            }
                            r.region.epoch.conf_ver += 1;
                        });
                        self.moves += 1;
                        self.beat_now(i);
                    }
                    // Sent again while it is in progress, or done: nothing new.
                    _ => {}
                }
            }
            Operator::RemovePeer(p) => {
                let r = &self.regions[i].region;
                // TiKV refuses to remove its own leader.
                if r.leader == Some(p.id) || !r.peers.iter().any(|q| q.id == p.id) {
                    return;
                }
                self.change(i, |r| {
                    r.region.peers.retain(|q| q.id != p.id);
                    r.region.epoch.conf_ver += 1;
                    r.pending.retain(|q| *q != p.id);
                });
                self.stores[(p.store_id - 1) as usize].peers -= 1;
                self.beat_now(i);
            }
            Operator::TransferLeader(p) => {
                let at = self.now + self.scn.timing.transfer_leader_ms;
                self.q.push(
                    at,
                    Event::LeaderMoved {
                        region: i as u32,
                        peer: p.id,
                    },
                );
            }
            // The scheduler never asks for a split; only SplitRegions does, which the
            // simulator does not drive.
            Operator::Split(_) => {}
        }
    }

    fn leader_moved(&mut self, i: usize, peer: u64) {
        let r = &self.regions[i].region;
        if r.leader == Some(peer) || !self.leader_alive(i) {
            return;
        }
        let Some(to) = r
            .peers
            .iter()
            .find(|p| p.id == peer && p.role == PeerRole::Voter)
            .map(|p| p.store_id)
        else {
            return;
        };
        if !self.stores[(to - 1) as usize].alive {
            return;
        }
        self.set_leader(i, peer);
        self.leader_transfers += 1;
        self.beat_now(i);
    }

    fn set_leader(&mut self, i: usize, peer: u64) {
        if let Some(old) = self.regions[i].region.leader_peer().map(|p| p.store_id) {
            self.stores[(old - 1) as usize].leaders -= 1;
        }
        let r = &mut self.regions[i].region;
        r.leader = Some(peer);
        if let Some(new) = r.leader_peer().map(|p| p.store_id) {
            self.stores[(new - 1) as usize].leaders += 1;
        }
    }

    /// A region that lost its leader elects a live voter, if it has one.
    fn elect(&mut self, i: usize) {
        if self.leader_alive(i) {
            return;
        }
        let live: Vec<u64> = self.regions[i]
            .region
            .peers
            .iter()
            .filter(|p| p.role == PeerRole::Voter && self.stores[(p.store_id - 1) as usize].alive)
            .map(|p| p.id)
            .collect();
        // A majority of voters must be alive to elect.
        let voters = self.regions[i]
            .region
            .peers
            .iter()
            .filter(|p| p.role == PeerRole::Voter)
            .count();
        if live.len() < voters / 2 + 1 {
            return;
        }
        let peer = live[self.rng.gen_range(0..live.len())];
        self.set_leader(i, peer);
        self.beat_now(i);
    }

    // ---- The scenario -----------------------------------------------------------------

    fn kill(&mut self, id: u64) {
        let s = (id - 1) as usize;
        if !self.stores[s].alive {
            return;
        }
        self.stores[s].alive = false;
        let at = self.now + self.scn.timing.election_ms;
        for i in 0..self.regions.len() {
            if self.regions[i]
                .region
                .leader_peer()
                .is_some_and(|p| p.store_id == id)
            {
                self.q.push(at, Event::Elect { region: i as u32 });
            }
        }
    }

    fn revive(&mut self, id: u64) {
        let s = (id - 1) as usize;
        if self.stores[s].alive {
            return;
        }
        self.stores[s].alive = true;
        self.q.push(self.now, Event::StoreBeat { store: s as u32 });
        let at = self.now + self.scn.timing.election_ms;
        for i in 0..self.regions.len() {
            if !self.leader_alive(i) {
                self.q.push(at, Event::Elect { region: i as u32 });
            }
        }
    }

    fn act(&mut self, n: usize) {
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
    fn roll(&mut self) {
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

    fn second(&mut self) {
        if !self
            .map
            .mark_down(self.now, self.cfg.max_store_down_time_ms)
            .is_empty()
        {
            self.republish();
        }
        self.roll();
        if self.now % 60_000 == 0 {
            self.series
                .sample(self.now, self.stores.iter().map(|s| (s.peers, s.leaders)));
        }
        let Some(trigger) = self.trigger_ms else {
            return;
        };
        if self.now < trigger {
            return;
        }
        let quiet = self.now.saturating_sub(self.last_op_ms) >= self.scn.timing.patrol_period_ms;
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

    fn report(&self, seed: u64) -> Report {
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
            longest_evict_s: self
                .rolling
                .as_ref()
                .map(|r| r.longest_evict_ms as f64 / 1000.0),
            repairs_during_loss: self.repairs_during_loss,
            simulated_s: self.now as f64 / 1000.0,
            series: self.series.clone(),
            wall_s: 0.0,
        }
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("t{i:010}").into_bytes()
}
