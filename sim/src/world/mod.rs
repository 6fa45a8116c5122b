//! The simulated cluster and its run: the [`Sim`] (TiKV's side, PD's side and the accounting,
//! joined by the event queue), how it is built from a scenario and a seed, the event loop, and
//! PD's side: the store map, the scheduler's view, its operators. PD's side is the scheduling
//! core itself, called as the server's shards call it: a region heartbeat, a store heartbeat, a
//! patrol pass.
//!
//! - `tikv`: the simulated stores and regions, and how a leader carries out a step.
//! - `actions`: what the scenario does to the cluster, and the floor it is measured against.
//! - `hot`: the hot write load, the flow each leader reports, PD's hot cache fed it.
//! - `merge`: PD's region map, the merge checker's neighbours and a merge pair's operators.
//! - `tikv_merge`: how TiKV carries out a merge.
//! - `audit`: the once-a-second check (Down marks, samples, convergence) and the report.
//!
//! Must not: carry out a step (that is TiKV's side, in `tikv`), decide what the scheduler
//! decides, or change the cluster outside an event.

mod actions;
mod audit;
mod hot;
mod merge;
mod tikv;
mod tikv_merge;

use meridian::placement::schedule::{
    self, influence, Cluster, Ended, HotCache, InFlight, MergeInput, Neighbours, Pending,
    RegionInput, Side, StoreView, Sweep,
};
use meridian::placement::{
    Epoch, Peer, PeerRole, RangeIndex, Region, ScheduleConfig, StoreMap, StoreStats,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::check::Checker;
use crate::liveness::Liveness;
use crate::queue::{Event, Queue};
use crate::report::{Report, Series};
use crate::scenario::Scenario;

use actions::Rolling;
use tikv::{store_record, SimRegion, SimStore};

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
    /// PD's region map: the server's range index, fed the leaders' changed reports.
    index: RangeIndex,
    view: StoreView,
    in_flight: InFlight,
    next_id: u64,
    cursor: usize,
    /// The patrol batch under way's memo of the stores.
    sweep: Sweep,
    /// PD's hot peer cache, fed every leader's report of what it wrote.
    hot: HotCache,
    /// The regions running the hot write load.
    hot_regions: Vec<usize>,
    // Accounting.
    check: Checker,
    liveness: Liveness,
    live: [usize; schedule::OpKind::ALL.len()],
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
    /// Regions not merged away; how many there were when keys were deleted; merges made.
    live_regions: u64,
    merge_start_regions: Option<u64>,
    merges: u64,
    /// Keys were deleted: convergence waits for the merge checker's chance to act.
    keys_deleted: bool,
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
        enable_joint_consensus: scn.enable_joint_consensus,
        ..ScheduleConfig::default()
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
                    started_ms: 0,
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
                size_mib: scn.region_size_mib,
                gone: false,
                merging: false,
                write_bps: 0,
                reported_ms: 0,
                reported_by: 0,
            });
        }
        let mut map = StoreMap::new();
        for s in &stores {
            // Registration of a fresh store with a valid record cannot fail.
            let _ = map.put(store_record(s.id, s.zone), 0);
        }
        let index = RangeIndex::new();
        index.reset(regions.iter().map(|r| r.region.clone()).collect());
        let live_regions = regions.len() as u64;
        let mut sim = Sim {
            index,
            live_regions,
            merge_start_regions: None,
            merges: 0,
            keys_deleted: false,
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
            sweep: Sweep::default(),
            hot: HotCache::new(),
            hot_regions: Vec::new(),
            check: Checker::default(),
            liveness: Liveness::default(),
            live: [0; schedule::OpKind::ALL.len()],
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
                // A periodic report repeats what the leader last reported (every change is
                // reported at once, `beat_now`); as on the server, only a changed report runs
                // the checker.
                self.region_beat(region as usize, !periodic);
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
            Event::Merged { source, target } => {
                self.commit_merge(source as usize, target as usize);
                // The target reports its grown range before anything else happens at this
                // instant: the patrol reads regions as TiKV holds them, so PD's region map
                // must not lag behind (it drops the source from this report).
                self.region_beat(target as usize, true);
            }
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

    /// One call into the scheduler for region `i`: the patrol's, or a heartbeat's that
    /// `changed` the region or not.
    fn schedule(&mut self, i: usize, call: Call) {
        let seen = match call {
            Call::Patrol => self.neighbours(i),
            Call::Heartbeat { .. } => Neighbours::default(),
        };
        let adjacent = |s: Side| seen.adjacent(s);
        let size_mib = self.regions[i].size_mib;
        let merge = MergeInput {
            keys: merge::keys_of(size_mib),
            recently_split: false,
            // The simulated PD starts scheduling at time 0.
            started_ms: 0,
            adjacent: &adjacent,
        };
        let mut slot = self.regions[i].slot.take();
        // An operator at its deadline may time out in this call: kept to judge it then.
        let due = slot
            .as_deref()
            .filter(|p| self.now >= p.deadline_ms)
            .cloned();
        let mut next_id = self.next_id;
        let mut sweep = std::mem::take(&mut self.sweep);
        let mut d = {
            let r = &self.regions[i];
            let input = RegionInput {
                region: &r.region,
                pending_peers: &r.pending,
                size_mib,
                hot: self.hot.get(&r.region),
            };
            let c = self.cluster();
            let mut ids = || {
                next_id += 1;
                Some(next_id)
            };
            match call {
                Call::Patrol => {
                    schedule::patrol(&c, &mut sweep, &input, Some(&merge), &mut slot, &mut ids)
                }
                Call::Heartbeat { changed } => {
                    schedule::on_heartbeat(&c, &input, changed, &mut slot, &mut ids)
                }
            }
        };
        self.next_id = next_id;
        self.sweep = sweep;
        if let Some((kind, how)) = d.ended {
            self.live[kind.index()] -= 1;
            if let (Ended::TimedOut, Some(op)) = (how, &due) {
                let stores = &self.stores;
                let alive = |id: u64| {
                    let s = id.checked_sub(1).and_then(|s| stores.get(s as usize));
                    s.is_some_and(|s| s.alive)
                };
                let region = self.regions[i].region.id;
                self.liveness.timed_out(self.now, region, op, &alive);
            }
        }
        if let Some(flow) = d.hot_ended {
            self.hot
                .hot_op_ended(self.regions[i].region.id, flow, self.now);
        }
        if d.started {
            if let Some(p) = slot.as_deref() {
                self.started(p, size_mib);
            }
        }
        self.regions[i].slot = slot;
        self.merge_pair(&mut d);
        if let Some(op) = d.step {
            self.carry_out(i, op);
        }
    }

    /// An operator started: count it and check rule 4.
    fn started(&mut self, p: &Pending, size_mib: u64) {
        self.operators += 1;
        self.last_op_ms = self.now;
        self.live[p.kind.index()] += 1;
        let cost = influence(size_mib);
        let adds: Vec<_> = p.adds().map(|s| ((s - 1) as usize, cost)).collect();
        let c = self.cluster();
        let removes: Vec<_> = p
            .removes()
            .filter(|s| !c.health(*s).is_free_to_remove())
            .map(|s| ((s - 1) as usize, cost))
            .collect();
        let live = self.live[p.kind.index()];
        self.check
            .started(self.now, &self.cfg, p.kind, live, &adds, &removes);
        if self.zone_down.is_some() && !adds.is_empty() {
            self.repairs_during_loss += 1;
        }
    }

    fn region_beat(&mut self, i: usize, changed: bool) {
        if !self.leader_alive(i) {
            return;
        }
        if changed {
            self.pd_apply(i);
        }
        self.report_flow(i);
        self.schedule(i, Call::Heartbeat { changed });
    }

    fn patrol(&mut self) {
        self.sweep = Sweep::default();
        // The hot scheduler's candidates, ranked as PD's are before it schedules.
        let c = Cluster {
            cfg: &self.cfg,
            stores: &self.view,
            in_flight: &self.in_flight,
            now_ms: self.now,
        };
        self.hot.rank(&c);
        let n = self.regions.len();
        for _ in 0..self.cfg.patrol_batch_for(n).min(n) {
            if self.cursor >= n {
                self.cursor = 0;
            }
            let i = self.cursor;
            self.cursor += 1;
            if self.leader_alive(i) {
                self.schedule(i, Call::Patrol);
            }
        }
    }
}

/// Which of the scheduler's entry points a call is.
#[derive(Clone, Copy)]
enum Call {
    Patrol,
    Heartbeat { changed: bool },
}

fn key(i: u64) -> Vec<u8> {
    format!("t{i:010}").into_bytes()
}
