//! The scheduler against the four safety rules, over random clusters and random sequences of
//! heartbeats, patrols (with the merge checker, small regions beside each other), leader
//! elections, store failures and time. A small world stands in for TiKV: every step sent is
//! checked by `safety` against the region before it, then applied; a merge is checked against
//! its target as it stands, then committed as TiKV commits it.

use proptest::prelude::*;

use super::*;
use crate::placement::{
    Epoch, Label, Peer, PeerRole, Region, Store, StoreMap, StoreState, StoreStats,
};

#[derive(Debug, Clone, Copy)]
enum Fate {
    Up,
    Offline,
    Disconnected,
    Down,
}

#[derive(Debug, Clone)]
enum Event {
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
struct World {
    stores: Vec<(u8, Fate)>,
    isolated: bool,
    /// `enable_joint_consensus`.
    joint: bool,
    regions: Vec<Vec<(usize, bool)>>,
    /// Region i's size (MiB) if `small[i]` holds one, small enough to merge (empty, small or
    /// not, by PD's store-limit cost); else 96 MiB.
    small: Vec<Option<u64>>,
    events: Vec<Event>,
}

/// A region's size when it is not small: as large as TiKV splits them.
const LARGE_MIB: u64 = 96;

fn world() -> impl Strategy<Value = World> {
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
fn fixed(stores: &[(u8, Fate)], regions: Vec<Vec<(usize, bool)>>, isolated: bool) -> Sim {
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

struct Sim {
    cfg: ScheduleConfig,
    map: StoreMap,
    fates: Vec<Fate>,
    view: StoreView,
    in_flight: InFlight,
    regions: Vec<Region>,
    /// Each region's size (MiB), and whether it was merged away.
    sizes: Vec<u64>,
    gone: Vec<bool>,
    merges: u64,
    slots: Vec<Option<Box<Pending>>>,
    now: u64,
    next_id: u64,
    /// (store, time, cost) of every add started.
    adds: Vec<(u64, u64, f64)>,
    removes: Vec<(u64, u64, f64)>,
}

impl Sim {
    fn new(w: &World) -> Sim {
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

    fn cluster(&self) -> Cluster<'_> {
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
                None => cancel(&self.cluster(), &mut Some(op)),
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

    fn step(&mut self, e: &Event) {
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

/// No step breaks a safety rule, no merge is sent while its peers differ from its target's,
/// and nothing starts past a cap or a store limit; and the worlds do merge regions, so the
/// merge checker is among what is checked.
#[test]
fn no_step_breaks_a_safety_rule() {
    let merges = std::cell::Cell::new(0u64);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(512));
    let run = runner.run(&world(), |w| {
        let mut sim = Sim::new(&w);
        for e in &w.events {
            sim.step(e);
        }
        merges.set(merges.get() + sim.merges);
        Ok(())
    });
    if let Err(e) = run {
        panic!("{e}");
    }
    assert!(merges.get() > 0, "no world merged a region");
}

/// A region on a Down store is repaired as PD does: a learner on the best-separated store,
/// promoted, and only then the old peer removed.
#[test]
fn a_down_peer_is_replaced_by_learner_promotion_then_removal() {
    let mut sim = fixed(
        &[
            (0, Fate::Up),
            (1, Fate::Up),
            (2, Fate::Down),
            (2, Fate::Up),
            (0, Fate::Up),
        ],
        vec![vec![(0, false), (1, false), (2, false)]],
        true,
    );
    let mut steps = Vec::new();
    // Joint consensus (the default) adds an enter and a leave step to the move.
    for _ in 0..6 {
        sim.step(&Event::Heartbeat(0));
        if let Some(p) = &sim.slots[0] {
            steps.push(p.current().cloned());
        }
    }
    let r = &sim.regions[0];
    let mut stores: Vec<u64> = r.peers.iter().map(|p| p.store_id).collect();
    stores.sort_unstable();
    // Store 4 is the Down store's zone's other store: isolation keeps the zones distinct.
    assert_eq!(stores, vec![1, 2, 4], "{r:?} after {steps:?}");
    assert!(r.peers.iter().all(|p| p.role == PeerRole::Voter));
    assert!(sim.slots[0].is_none());
}

/// With isolation at zone level and a zone gone, nothing goes into the surviving zones.
#[test]
fn a_lost_zone_is_not_repaired_into_the_others() {
    let mut sim = fixed(
        &[
            (0, Fate::Up),
            (1, Fate::Up),
            (2, Fate::Down),
            (0, Fate::Up),
            (1, Fate::Up),
        ],
        vec![vec![(0, false), (1, false), (2, false)]],
        true,
    );
    for e in [Event::Heartbeat(0), Event::Patrol(0)] {
        sim.step(&e);
    }
    assert!(sim.slots[0].is_none());
    assert_eq!(sim.regions[0].peers.len(), 3);
}

/// A store silent past 20 s is Disconnected: its peers still count, but nothing new goes there.
#[test]
fn a_disconnected_store_is_no_target() {
    let mut sim = fixed(
        &[
            (0, Fate::Up),
            (1, Fate::Up),
            (2, Fate::Disconnected),
            (2, Fate::Up),
        ],
        vec![vec![(0, false), (1, false)]],
        true,
    );
    assert_eq!(
        sim.cluster().health(3),
        Health::Disconnected { removing: false }
    );
    sim.step(&Event::Heartbeat(0));
    let target = sim.slots[0].as_ref().and_then(|p| p.adds_to());
    assert_eq!(target, Some(4));
}

/// evict-leader moves leaders off the store, to the voter whose store leads fewest.
#[test]
fn evict_leader_empties_the_store() {
    let mut sim = fixed(
        &[(0, Fate::Up), (1, Fate::Up), (2, Fate::Up)],
        vec![vec![(0, false), (1, false), (2, false)]; 3],
        true,
    );
    sim.view.set_evicting(vec![1]);
    // One leader move in flight at a time: each region's report completes its move.
    for i in 0..3 {
        sim.step(&Event::Patrol(i));
        sim.step(&Event::Heartbeat(i));
    }
    for r in &sim.regions {
        assert_ne!(r.leader_peer().map(|p| p.store_id), Some(1), "{r:?}");
    }
}

/// A leader on a store being drained is replaced as PD's operator builder orders it: the leader
/// moves to a healthy follower first, so the learner's snapshot does not come from the store
/// that leaves; then the learner is added, promoted as the old peer is demoted (one joint
/// change), and the old peer removed.
#[test]
fn a_draining_leader_moves_before_its_replacement_is_added() {
    let mut sim = fixed(
        &[
            (2, Fate::Offline),
            (0, Fate::Up),
            (1, Fate::Up),
            (2, Fate::Up),
        ],
        // The first peer leads: the one on the Offline store.
        vec![vec![(0, false), (1, false), (2, false)]],
        true,
    );
    assert_eq!(sim.cluster().health(1), Health::Serving { removing: true });
    let mut steps = None;
    // The store leading when the learner was added: the one that sends its snapshot.
    let mut sender = None;
    for _ in 0..6 {
        let leader = sim.regions[0].leader_peer().map(|p| p.store_id);
        sim.step(&Event::Heartbeat(0));
        if steps.is_none() {
            steps = sim.slots[0].as_ref().map(|p| p.steps.clone());
        }
        if sender.is_none() && sim.regions[0].peers.iter().any(|p| p.store_id == 4) {
            sender = leader;
        }
    }
    let steps = steps.expect("a replacement started");
    assert!(
        matches!(
            steps.as_slice(),
            // Joint consensus is on by default: the learner is promoted and the old voter
            // demoted in one joint change.
            [
                Step::TransferLeader(to),
                Step::AddLearner(add),
                Step::JointEnter(enter),
                Step::JointLeave(_),
                Step::RemovePeer(old),
            ] if to.store_id != 1 && add.store_id == 4 && old.store_id == 1
                && enter.promote.len() == 1 && enter.demote.len() == 1
        ),
        "{steps:?}"
    );
    assert!(matches!(sender, Some(2 | 3)), "sent from {sender:?}");
    let r = &sim.regions[0];
    let mut stores: Vec<u64> = r.peers.iter().map(|p| p.store_id).collect();
    stores.sort_unstable();
    assert_eq!(stores, vec![2, 3, 4], "{r:?}");
    assert!(r.peers.iter().all(|p| p.role == PeerRole::Voter));
    assert!(sim.slots[0].is_none());
}

/// The patrol's test of the stores alone: nothing to balance in an even cluster, a leader to
/// evict once a store is evicted, and regions to move once an empty store joins.
#[test]
fn the_stores_alone_tell_when_no_balancer_can_act() {
    let turn = |k: usize| vec![(k % 3, false), ((k + 1) % 3, false), ((k + 2) % 3, false)];
    let mut sim = fixed(
        &[(0, Fate::Up), (1, Fate::Up), (2, Fate::Up)],
        (0..6).map(turn).collect(),
        false,
    );
    let none = balance::Sources {
        region: false,
        leader: false,
        evict: false,
    };
    assert_eq!(balance::Sources::of(&sim.cluster()), none);
    sim.view.set_evicting(vec![2]);
    let can = balance::Sources::of(&sim.cluster());
    assert_eq!(
        can,
        balance::Sources {
            evict: true,
            ..none
        }
    );

    let sim = fixed(
        &[(0, Fate::Up), (1, Fate::Up), (2, Fate::Up), (0, Fate::Up)],
        vec![vec![(0, false), (1, false), (2, false)]; 8],
        false,
    );
    let can = balance::Sources::of(&sim.cluster());
    assert!(can.region && can.leader, "{can:?}");
}

/// A region on two stores being drained, one of them leading, and one store that is gone: the
/// leader has no voter to move to, so the gone peer is replaced first (PD's order: down before
/// offline), rather than the region waiting for ever on its leader's replacement.
#[test]
fn a_gone_peer_is_replaced_first_when_the_draining_leader_cannot_move() {
    let mut sim = fixed(
        &[
            (0, Fate::Offline),
            (1, Fate::Offline),
            (2, Fate::Down),
            (0, Fate::Up),
            (1, Fate::Up),
            (2, Fate::Up),
        ],
        // The first peer leads: the one on store 1, being drained.
        vec![vec![(0, false), (1, false), (2, false)]],
        true,
    );
    assert_eq!(sim.cluster().health(3), Health::Down);
    sim.step(&Event::Heartbeat(0));
    let target = sim.slots[0].as_ref().and_then(|p| p.adds_to());
    assert_eq!(target, Some(6), "{:?}", sim.slots[0]);
    // Once repaired, the leader moves to the new voter and the drained ones are replaced.
    for _ in 0..30 {
        sim.step(&Event::Heartbeat(0));
    }
    let mut stores: Vec<u64> = sim.regions[0].peers.iter().map(|p| p.store_id).collect();
    stores.sort_unstable();
    assert_eq!(stores, vec![4, 5, 6], "{:?}", sim.regions[0]);
}
