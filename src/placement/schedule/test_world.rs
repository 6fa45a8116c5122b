//! For the scheduler's tests: a small simulated world that stands in for TiKV around the
//! scheduling core. It owns random worlds (stores with a zone and a fate, regions, which are
//! small enough to merge, events) and their simulation: store heartbeats with true counts,
//! region heartbeats and patrols through the core, leader elections, store failures and time.
//! Every step sent is checked by `safety` against the region before it, then applied; a merge
//! is checked against its target as it stands, then committed as TiKV commits it; and every
//! operator started is checked against the caps and store limits. Once the events are over,
//! `settle` checks liveness: with the stores' fates fixed, no operator stays in flight for
//! long (none is stuck). Must not touch: what the tests assert beyond those checks (the tests
//! in `tests.rs` own that).

use proptest::prelude::*;

use super::*;
use crate::placement::{
    Epoch, Label, Peer, PeerRole, Region, Store, StoreMap, StoreState, StoreStats,
};

#[derive(Debug, Clone, Copy)]
pub(super) enum Fate {
    Up,
    Offline,
    Disconnected,
    Down,
}

#[derive(Debug, Clone)]
pub(super) enum Event {
    Heartbeat(usize),
    Patrol(usize),
    /// The region's leadership moves to its n-th voter (TiKV elects on its own).
    Elect(usize, usize),
    Store(usize, Fate),
    Wait(u64),
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        4 => Just(Fate::Up),
        1 => Just(Fate::Offline),
        1 => Just(Fate::Disconnected),
        1 => Just(Fate::Down),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        6 => (0usize..8).prop_map(Event::Heartbeat),
        6 => (0usize..8).prop_map(Event::Patrol),
        1 => (0usize..8, 0usize..4).prop_map(|(r, v)| Event::Elect(r, v)),
        1 => (0usize..9, fate()).prop_map(|(s, f)| Event::Store(s, f)),
        2 => (0u64..20_000).prop_map(Event::Wait),
    ]
}

/// Stores (zone of each, fate), regions (peer stores as indexes, learner flags), which
/// regions are small enough to merge, whether isolation is at zone level, events.
#[derive(Debug, Clone)]
pub(super) struct World {
    stores: Vec<(u8, Fate)>,
    isolated: bool,
    /// `enable_joint_consensus`.
    joint: bool,
    regions: Vec<Vec<(usize, bool)>>,
    /// Region i's size (MiB) if `small[i]` holds one, small enough to merge (empty, small or
    /// not, by PD's store-limit cost); else 96 MiB.
    small: Vec<Option<u64>>,
    pub(super) events: Vec<Event>,
}

/// A region's size when it is not small: as large as TiKV splits them.
const LARGE_MIB: u64 = 96;

pub(super) fn world() -> impl Strategy<Value = World> {
    (3usize..9)
        .prop_flat_map(|n| {
            let stores = proptest::collection::vec((0u8..3, fate()), n);
            let region = proptest::sample::subsequence((0..n).collect::<Vec<_>>(), 1..=n.min(4))
                .prop_flat_map(|on| {
                    let k = on.len();
                    (
                        Just(on),
                        proptest::collection::vec(prop::bool::weighted(0.2), k),
                    )
                })
                .prop_map(|(on, learner)| on.into_iter().zip(learner).collect::<Vec<_>>());
            let regions = proptest::collection::vec(region, 1..8);
            (
                stores,
                regions,
                any::<bool>(),
                proptest::collection::vec(event(), 1..120),
                any::<bool>(),
                proptest::collection::vec(
                    prop::option::weighted(0.6, prop_oneof![0u64..=1, 2u64..=20, 21u64..=40]),
                    8,
                ),
            )
        })
        .prop_map(|(stores, regions, isolated, events, joint, small)| World {
            stores,
            isolated,
            joint,
            regions,
            small,
            events,
        })
}

/// A world with no events: `stores` (zone, fate), `regions` (peer stores as indexes, learner
/// flags), isolation at zone level or not; simulated from its start.
pub(super) fn fixed(
    stores: &[(u8, Fate)],
    regions: Vec<Vec<(usize, bool)>>,
    isolated: bool,
) -> Sim {
    Sim::new(&World {
        stores: stores.to_vec(),
        isolated,
        joint: true,
        regions,
        small: vec![],
        events: vec![],
    })
}

/// When the world starts: stores registered at 0 and silent since are Down by then.
const START: u64 = 100_000;

/// Rounds of [`Sim::settle`] within which an operator must end: a move's five steps, a call
/// each, take three rounds of two calls, a merge's alignment a few more; 10 rounds (20 s) is
/// still short of the operator timeout (30 s), so a held step is caught before it times out.
const STUCK_ROUNDS: u64 = 10;

pub(super) struct Sim {
    cfg: ScheduleConfig,
    map: StoreMap,
    fates: Vec<Fate>,
    pub(super) view: StoreView,
    in_flight: InFlight,
    pub(super) regions: Vec<Region>,
    /// Each region's size (MiB), and whether it was merged away.
    sizes: Vec<u64>,
    gone: Vec<bool>,
    pub(super) merges: u64,
    pub(super) slots: Vec<Option<Box<Pending>>>,
    now: u64,
    next_id: u64,
    /// (store, time, cost) of every add started.
    adds: Vec<(u64, u64, f64)>,
    removes: Vec<(u64, u64, f64)>,
}

impl Sim {
    pub(super) fn new(w: &World) -> Sim {
        let cfg = ScheduleConfig {
            location_labels: vec!["zone".into(), "host".into()],
            // Without isolation, only the scheduler's own rule keeps two peers off one store.
            isolation_level: if w.isolated {
                "zone".into()
            } else {
                String::new()
            },
            leader_schedule_limit: 1,
            replica_schedule_limit: 2,
            region_schedule_limit: 2,
            store_limit_add_per_min: 2.0,
            store_limit_remove_per_min: 3.0,
            operator_timeout_ms: 30_000,
            max_store_down_time_ms: 60_000,
            enable_joint_consensus: w.joint,
            // Merges from the start, at most one pair in flight (PD counts both regions).
            split_merge_interval_ms: 0,
            merge_schedule_limit: 2,
            ..ScheduleConfig::default()
        };
        let mut map = StoreMap::new();
        for (i, (zone, _)) in w.stores.iter().enumerate() {
            let id = i as u64 + 1;
            let store = Store {
                id,
                address: format!("s{id}:1"),
                labels: vec![
                    Label {
                        key: "zone".into(),
                        value: format!("z{zone}"),
                    },
                    Label {
                        key: "host".into(),
                        value: format!("h{id}"),
                    },
                ],
                state: StoreState::Up,
                details: crate::placement::schedule::details(),
            };
            map.put(store, 0).unwrap();
        }
        let regions: Vec<Region> = w
            .regions
            .iter()
            .enumerate()
            .map(|(i, on)| {
                let mut peers: Vec<Peer> = on
                    .iter()
                    .enumerate()
                    .map(|(j, (s, learner))| Peer {
                        id: 1000 + (i * 10 + j) as u64,
                        store_id: *s as u64 + 1,
                        role: if *learner {
                            PeerRole::Learner
                        } else {
                            PeerRole::Voter
                        },
                    })
                    .collect();
                peers[0].role = PeerRole::Voter;
                Region {
                    id: i as u64 + 1,
                    start_key: vec![i as u8],
                    end_key: vec![i as u8 + 1],
                    epoch: Epoch {
                        conf_ver: 1,
                        version: 1,
                    },
                    leader: Some(peers[0].id),
                    peers,
                }
            })
            .collect();
        let sizes = (0..regions.len())
            .map(|i| match w.small.get(i) {
                Some(Some(mib)) => *mib,
                _ => LARGE_MIB,
            })
            .collect();
        let mut sim = Sim {
            slots: vec![None; regions.len()],
            gone: vec![false; regions.len()],
            sizes,
            merges: 0,
            regions,
            cfg,
            map,
            fates: w.stores.iter().map(|s| s.1).collect(),
            view: StoreView::default(),
            in_flight: InFlight::default(),
            now: START,
            next_id: 100_000,
            adds: Vec::new(),
            removes: Vec::new(),
        };
        // A store Disconnected at the start last heartbeated 30 s ago; a Down one, never since
        // it registered.
        for (i, f) in sim.fates.iter().enumerate() {
            if matches!(f, Fate::Disconnected) {
                sim.map
                    .heartbeat(i as u64 + 1, StoreStats::default(), START - 30_000)
                    .unwrap();
            }
        }
        sim.store_heartbeats();
        sim
    }

    pub(super) fn cluster(&self) -> Cluster<'_> {
        Cluster {
            cfg: &self.cfg,
            stores: &self.view,
            in_flight: &self.in_flight,
            now_ms: self.now,
        }
    }

    /// Every store that still heartbeats does so now, with its true counts.
    fn store_heartbeats(&mut self) {
        for (i, fate) in self.fates.clone().into_iter().enumerate() {
            let id = i as u64 + 1;
            let count = |leaders: bool| {
                self.regions
                    .iter()
                    .zip(&self.gone)
                    .filter(|(_, gone)| !**gone)
                    .map(|(r, _)| r)
                    .filter(|r| {
                        if leaders {
                            r.leader_peer().is_some_and(|p| p.store_id == id)
                        } else {
                            r.peers.iter().any(|p| p.store_id == id)
                        }
                    })
                    .count() as u64
            };
            let stats = StoreStats {
                region_count: count(false),
                leader_count: count(true),
                ..StoreStats::default()
            };
            match fate {
                Fate::Up => {
                    let _ = self.map.heartbeat(id, stats, self.now);
                }
                Fate::Offline => {
                    let _ = self.map.decommission(id);
                    let _ = self.map.heartbeat(id, stats, self.now);
                }
                // Silent: Disconnected after 20 s, Down after `max_store_down_time_ms`.
                Fate::Disconnected | Fate::Down => {}
            }
        }
        self.map
            .mark_down(self.now, self.cfg.max_store_down_time_ms);
        self.view = StoreView::of(&self.map, &self.cfg, &self.view, self.now);
    }

    fn healthy(&self, p: &Peer) -> bool {
        p.role != PeerRole::Learner && self.cluster().health(p.store_id).is_serving()
    }

    /// Checks the step, applies it as TiKV would, and checks the limits of what started.
    fn deliver(&mut self, i: usize, op: Option<crate::placement::Operator>, started: bool) {
        if started {
            let p = self.slots[i].as_ref().expect("an operator started");
            let cost = influence(self.sizes[i]);
            // Every peer an operator adds or removes is charged (a merge may move several).
            for s in p.adds() {
                self.adds.push((s, self.now, cost));
            }
            for s in p.removes() {
                if !self.cluster().health(s).is_free_to_remove() {
                    self.removes.push((s, self.now, cost));
                }
            }
        }
        for kind in OpKind::ALL {
            let live = self
                .slots
                .iter()
                .flatten()
                .filter(|p| p.kind == kind)
                .count();
            // PD's checker admits a merge pair while fewer than the cap are in flight (both
            // are added together), so a pair may go one past it while one operator of an
            // earlier pair waits for its region's report.
            let cap = self.cfg.cap(kind) + usize::from(kind == OpKind::Merge);
            assert!(live <= cap, "{kind:?}: {live} in flight");
        }
        for (log, rate) in [
            (&self.adds, self.cfg.store_limit_add_per_min),
            (&self.removes, self.cfg.store_limit_remove_per_min),
        ] {
            // A bucket holds `capacity` and refills `rate` regions a minute: no trailing minute
            // ever sees more.
            let bound = capacity(rate) + rate * REGION_INFLUENCE + 1e-6;
            for &(store, at, _) in log.iter() {
                let spent: f64 = log
                    .iter()
                    .filter(|(s, t, _)| *s == store && *t >= at && *t < at + 60_000)
                    .map(|e| e.2)
                    .sum();
                assert!(spent <= bound, "store {store}: {spent} in a minute");
            }
        }
        let Some(op) = op else { return };
        if let crate::placement::Operator::Merge(target) = &op {
            self.merge(i, target);
            return;
        }
        let before = self.regions[i].clone();
        let broken = safety::check(&before, &op, &|p| self.healthy(p));
        assert_eq!(broken, None, "{op:?} on {before:?}");
        let mut after = safety::apply(&before, &op);
        if after.peers != before.peers {
            after.epoch.conf_ver += 1;
        }
        self.regions[i] = after;
    }

    /// The source `i`'s leader is sent a merge into `target` (PD's view of it): checked
    /// against the target as it stands, refused as TiKV refuses a stale or distant target,
    /// else committed at once: the target covers both ranges, the source is gone and PD drops
    /// its operator (the target's ends on the target's next report).
    fn merge(&mut self, i: usize, target: &Region) {
        let Some(j) = (0..self.regions.len()).find(|&j| self.regions[j].id == target.id) else {
            return;
        };
        if self.gone[j] || i == j {
            return;
        }
        let (src, tgt) = (self.regions[i].clone(), self.regions[j].clone());
        assert_eq!(
            safety::check_merge(&src, &tgt),
            None,
            "merge of {src:?} into {tgt:?}"
        );
        let touching = src.end_key == tgt.start_key || tgt.end_key == src.start_key;
        if tgt.epoch != target.epoch || !touching {
            return;
        }
        let t = &mut self.regions[j];
        if src.end_key == t.start_key {
            t.start_key = src.start_key.clone();
        } else {
            t.end_key = src.end_key.clone();
        }
        t.epoch.version = src.epoch.version.max(t.epoch.version) + 1;
        self.sizes[j] += self.sizes[i];
        self.gone[i] = true;
        self.merges += 1;
        let mut slot = self.slots[i].take();
        cancel(&self.cluster(), &mut slot);
    }

    /// Region `i`'s live neighbours in the key space, as a shard reads them from its map.
    fn neighbours(&self, i: usize) -> Neighbours {
        let r = &self.regions[i];
        let seen = |j: usize| Neighbour {
            region: self.regions[j].clone(),
            size_mib: self.sizes[j],
            keys: self.sizes[j] * 10_000,
            busy: self.slots[j].is_some(),
        };
        let find = |touches: &dyn Fn(&Region) -> bool| {
            (0..self.regions.len())
                .find(|&j| j != i && !self.gone[j] && touches(&self.regions[j]))
                .map(seen)
        };
        Neighbours([
            find(&|o| o.end_key == r.start_key),
            find(&|o| o.start_key == r.end_key),
        ])
    }

    /// What a patrol call did to a merge pair: the target's operator goes in its slot, and a
    /// merge that ended undone takes its partner's operator with it.
    fn merge_pair(&mut self, d: &mut Dispatch) {
        if let Some((id, op)) = d.merge_target.take() {
            let j = (0..self.regions.len()).find(|&j| self.regions[j].id == id);
            match j.filter(|&j| self.slots[j].is_none() && !self.gone[j]) {
                Some(j) => self.slots[j] = Some(op),
                None => {
                    cancel(&self.cluster(), &mut Some(op));
                }
            }
        }
        let partner = d
            .merge_partner
            .and_then(|id| (0..self.regions.len()).find(|&j| self.regions[j].id == id));
        if let Some(j) = partner {
            if self.slots[j]
                .as_ref()
                .is_some_and(|p| p.kind == OpKind::Merge)
            {
                let mut slot = self.slots[j].take();
                cancel(&self.cluster(), &mut slot);
            }
        }
    }

    /// The patrol skips a balancer when [`Sources`] says it has nothing to act on: that must
    /// hold of every region, so that skipping changes no decision.
    fn check_sources(&self) {
        let c = self.cluster();
        let can = balance::Sources::of(&c);
        for (i, region) in self.regions.iter().enumerate() {
            if self.gone[i] {
                continue;
            }
            let r = RegionInput {
                region,
                pending_peers: &[],
                size_mib: self.sizes[i],
                hot: None,
            };
            if !can.evict {
                assert_eq!(balance::evict_leader(&c, &r), None, "evict on {region:?}");
            }
            if !balance::is_settled(&c, &r) {
                continue;
            }
            if !can.region {
                let plan = balance::balance_region(&c, &r);
                assert_eq!(plan, None, "balance-region on {region:?}");
            }
            if !can.leader {
                let plan = balance::balance_leader(&c, &r);
                assert_eq!(plan, None, "balance-leader on {region:?}");
            }
        }
    }

    /// Liveness once the stores settle: no store changes its fate any more, and a silent store
    /// is left to be marked Down (every operator of before then has timed out too). Then, every
    /// round, each live region reports and is patrolled, and 2 s pass. TiKV here makes each
    /// step at once, so an operator whose stores keep their health sends its next step on each
    /// call and ends within a few rounds. One still in flight [`STUCK_ROUNDS`] rounds after it
    /// started is stuck: a step the scheduler holds, or sends and sees refused, for ever (it
    /// would time out at 30 s and be planned again).
    pub(super) fn settle(&mut self) {
        self.step(&Event::Wait(self.cfg.max_store_down_time_ms + 1_000));
        let n = self.regions.len();
        for i in 0..n {
            self.step(&Event::Heartbeat(i));
        }
        let round_ms = 2_000;
        for _ in 0..STUCK_ROUNDS + 2 {
            for i in 0..n {
                self.step(&Event::Heartbeat(i));
                self.step(&Event::Patrol(i));
            }
            for (i, slot) in self.slots.iter().enumerate() {
                let Some(op) = slot.as_ref().filter(|_| !self.gone[i]) else {
                    continue;
                };
                let rounds = self.now.saturating_sub(op.created_ms) / round_ms;
                assert!(
                    rounds < STUCK_ROUNDS,
                    "stuck: {op:?} on {:?}, {rounds} rounds after it started",
                    self.regions[i]
                );
            }
            self.step(&Event::Wait(round_ms));
        }
    }

    pub(super) fn step(&mut self, e: &Event) {
        let n = self.regions.len();
        match *e {
            Event::Heartbeat(i) | Event::Patrol(i) => {
                let i = i % n;
                if self.gone[i] {
                    return;
                }
                let region = self.regions[i].clone();
                let size_mib = self.sizes[i];
                let input = RegionInput {
                    region: &region,
                    pending_peers: &[],
                    size_mib,
                    hot: None,
                };
                if matches!(e, Event::Patrol(_)) {
                    self.check_sources();
                }
                let seen = self.neighbours(i);
                let adjacent = |s: Side| seen.adjacent(s);
                let merge = MergeInput {
                    keys: size_mib * 10_000,
                    recently_split: false,
                    started_ms: 0,
                    adjacent: &adjacent,
                };
                let mut slot = self.slots[i].take();
                let mut next = self.next_id;
                let mut d = {
                    let c = self.cluster();
                    let mut ids = || {
                        next += 1;
                        Some(next)
                    };
                    if matches!(e, Event::Heartbeat(_)) {
                        on_heartbeat(&c, &input, true, &mut slot, &mut ids)
                    } else {
                        let m = Some(&merge);
                        patrol(&c, &mut Sweep::default(), &input, m, &mut slot, &mut ids)
                    }
                };
                self.next_id = next;
                self.slots[i] = slot;
                self.merge_pair(&mut d);
                self.deliver(i, d.step, d.started);
            }
            Event::Elect(i, v) => {
                if self.gone[i % n] {
                    return;
                }
                let r = &mut self.regions[i % n];
                let voters: Vec<u64> = r
                    .peers
                    .iter()
                    .filter(|p| p.role == PeerRole::Voter)
                    .map(|p| p.id)
                    .collect();
                if !voters.is_empty() {
                    r.leader = Some(voters[v % voters.len()]);
                }
            }
            Event::Store(s, f) => {
                let s = s % self.fates.len();
                // A decommission or a Down mark is not undone by the store alone.
                if matches!(self.fates[s], Fate::Up | Fate::Disconnected) {
                    self.fates[s] = f;
                }
            }
            Event::Wait(ms) => {
                self.now += ms;
                self.store_heartbeats();
            }
        }
    }
}
