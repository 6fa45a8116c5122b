//! The hot-write scheduler through the patrol, with the hot cache fed as a shard feeds it:
//! a store whose write flow is far above the mean sheds leaders (to followers on cool stores)
//! or peers (to cool stores of the same zone), as PD's draw picks (`hot_type_tests` checks the
//! draw itself); a cluster whose flow is even gets no hot operator; and over random hot worlds no step breaks a safety rule and no more hot
//! operators run than `hot-region-schedule-limit`.

use proptest::prelude::*;

use super::test_cluster::TestCluster;
use super::*;
use crate::placement::schedule::Ended;
use crate::placement::test_region::{self, Keys, PeerIds};
use crate::placement::{
    Label, Operator, Peer, PeerRole, Region, Store, StoreMap, StoreState, StoreStats,
};

/// The regions report after the stores' first heartbeat at 0, while they are still Up.
pub(super) const NOW: u64 = 1_000;
/// One hot region's write rate: 1 MiB/s.
pub(super) const RATE: u64 = 1 << 20;

/// Stores 1..=n, store i in zone `zones[i-1]`, each on its own host, under PD's defaults with
/// location labels zone and host and isolation at zone level.
pub(super) fn world(zones: &[u8]) -> TestCluster {
    let mut map = StoreMap::new();
    for (i, z) in zones.iter().enumerate() {
        let id = i as u64 + 1;
        let label = |key: &str, value: String| Label {
            key: key.into(),
            value,
        };
        let store = Store {
            id,
            address: format!("s{id}:1"),
            labels: vec![
                label("zone", format!("z{z}")),
                label("host", format!("h{id}")),
            ],
            state: StoreState::Up,
            details: super::details(),
        };
        map.put(store, 0).unwrap();
        map.heartbeat(id, StoreStats::default(), 0).unwrap();
    }
    let cfg = ScheduleConfig {
        location_labels: vec!["zone".into(), "host".into()],
        isolation_level: "zone".into(),
        ..ScheduleConfig::default()
    };
    TestCluster::new(&map, cfg)
}

/// Region `id` over `[id, id + 1)` (big-endian) with voters on `stores` (peer ids
/// `id*100 + store`), led by the first.
pub(super) fn region(id: u64, stores: &[u64]) -> Region {
    test_region::build(id, stores, PeerIds::Hundreds, Keys::BigEndian)
}

/// A full report interval of `rate` bytes a second.
fn minute(rate: u64) -> WriteFlow {
    WriteFlow {
        bytes: rate * REPORT_INTERVAL_S,
        keys: 0,
        interval_s: REPORT_INTERVAL_S,
    }
}

/// Feeds `regions` to the cache as hot for the cache-hits threshold's full intervals.
pub(super) fn heat(w: &TestCluster, cache: &mut HotCache, regions: &[(Region, u64)]) {
    let c = w.at(NOW);
    for _ in 0..c.cfg.hot_region_cache_hits_threshold {
        for (r, rate) in regions {
            cache.observe(&c, r, minute(*rate));
        }
    }
}

/// The patrol's plan for `r`: the operator it starts, if any.
pub(super) fn patrol_once(w: &TestCluster, cache: &HotCache, r: &Region) -> Option<Box<Pending>> {
    patrol_at(w, cache, r, NOW)
}

/// The first millisecond from `from` at which PD's draw for region `id` tries a peer move
/// first (`peer_first`) or only a leader transfer (not): a test that means one of the two
/// runs its patrol then.
pub(super) fn draw_time(id: u64, from: u64, peer_first: bool) -> u64 {
    (from..)
        .find(|&t| hot::peer_first(id, t) == peer_first)
        .expect("either answer comes within a few milliseconds")
}

/// The patrol's plan for `r` soon after [`NOW`], at a time whose draw tries a peer move first
/// (`peer_first`) or only a leader transfer (not).
pub(super) fn patrol_drawn(
    w: &TestCluster,
    cache: &HotCache,
    r: &Region,
    peer_first: bool,
) -> Option<Box<Pending>> {
    patrol_at(w, cache, r, draw_time(r.id, NOW, peer_first))
}

/// Zones 0, 1, 2 with two stores each: stores 1, 4 in zone 0; 2, 5 in zone 1; 3, 6 in zone 2.
pub(super) const ZONES: [u8; 6] = [0, 1, 2, 0, 1, 2];

#[test]
fn a_hot_store_drawn_for_a_leader_sheds_it_to_a_cool_follower() {
    let w = world(&ZONES);
    let mut cache = HotCache::new();
    // Store 1 leads four hot regions whose followers are on stores 2 and 3: its flow as
    // leader is 4 MiB/s against a mean of 2/3.
    let hot: Vec<(Region, u64)> = (1..=4).map(|i| (region(i, &[1, 2, 3]), RATE)).collect();
    heat(&w, &mut cache, &hot);
    let op = patrol_drawn(&w, &cache, &hot[0].0, false).expect("a hot operator");
    assert_eq!(op.kind, OpKind::Hot);
    assert!(
        matches!(op.steps.as_slice(), [Step::TransferLeader(p)] if p.store_id == 2 || p.store_id == 3),
        "{:?}",
        op.steps
    );
    assert_eq!(op.flow, RATE);
}

#[test]
fn a_hot_store_whose_followers_are_as_hot_sheds_a_peer_within_its_zone() {
    let w = world(&ZONES);
    let mut cache = HotCache::new();
    // Stores 1, 2 and 3 each lead two hot regions and follow four: as leaders they are all
    // above the mean (stores 4 to 6 lead none), but no follower's store is cool enough to
    // take a lead. As peers they carry 6 MiB/s each, the mean 3: a peer moves to the cool
    // store of its zone.
    let hot: Vec<(Region, u64)> = (0..6u64)
        .map(|i| {
            let on = match i % 3 {
                0 => [1, 2, 3],
                1 => [2, 3, 1],
                _ => [3, 1, 2],
            };
            (region(i + 1, &on), RATE)
        })
        .collect();
    heat(&w, &mut cache, &hot);
    let op = patrol_drawn(&w, &cache, &hot[0].0, true).expect("a hot operator");
    assert_eq!(op.kind, OpKind::Hot);
    let added = op.adds_to().expect("a peer added");
    let removed = op.removes_from().expect("a peer removed");
    // Store 4 is zone 0's other store, as store 1 is; 5 and 6 likewise for 2 and 3.
    assert_eq!(added, removed + 3, "{:?}", op.steps);
}

#[test]
fn a_cluster_with_even_flow_gets_no_hot_operator() {
    let w = world(&ZONES);
    let mut cache = HotCache::new();
    // Each store leads one hot region and holds three: every store at the mean.
    let hot: Vec<(Region, u64)> = (0..6u64)
        .map(|i| {
            let s = i + 1;
            let on = if s <= 3 {
                [s, s % 3 + 4, (s + 1) % 3 + 1]
            } else {
                [s, (s - 3) % 3 + 1, (s - 2) % 3 + 4]
            };
            (region(i + 1, &on), RATE)
        })
        .collect();
    heat(&w, &mut cache, &hot);
    for (r, _) in &hot {
        assert_eq!(patrol_once(&w, &cache, r), None, "{r:?}");
    }
}

#[test]
fn a_region_is_hot_only_after_the_cache_hits_threshold() {
    let w = world(&ZONES);
    let c = w.at(NOW);
    let mut cache = HotCache::new();
    let r = region(1, &[1, 2, 3]);
    // Below PD's least hot rate (1 KiB/s): not recorded at all.
    assert_eq!(cache.observe(&c, &r, minute(1023)), None);
    assert!(cache.is_empty());
    let flow = |s: u64, leader: bool| c.store(s).map(|l| l.budget.flow.bytes(leader));
    // Counted on its stores only from the third interval: leader on 1, peers on 1, 2, 3.
    let seen: Vec<(i32, Option<i64>)> = (0..3)
        .map(|_| {
            let degree = cache.observe(&c, &r, minute(RATE)).map_or(0, |h| h.degree);
            (degree, flow(2, false))
        })
        .collect();
    let counted = Some(RATE as i64);
    assert_eq!(seen, vec![(1, Some(0)), (2, Some(0)), (3, counted)]);
    assert_eq!(flow(1, true), Some(RATE as i64));
    assert_eq!(flow(2, true), Some(0));
    assert_eq!(flow(3, false), Some(RATE as i64));
    // Cold intervals cool it, and it is dropped when its anti-count runs out.
    cache.observe(&c, &r, minute(0));
    assert_eq!(flow(1, true), Some(0), "degree 2 is not counted");
    cache.observe(&c, &r, minute(0));
    assert!(cache.is_empty());
    assert_eq!(flow(3, false), Some(0));
}

#[derive(Debug, Clone)]
struct HotWorld {
    /// Per region: its stores (distinct indexes into the six), its rate in KiB/s.
    regions: Vec<([usize; 3], u64)>,
    /// Patrol or heartbeat of region n, or a leader change to its n-th voter.
    events: Vec<(u8, usize, usize)>,
}

fn hot_world() -> impl Strategy<Value = HotWorld> {
    let stores = proptest::sample::subsequence((0..6usize).collect::<Vec<_>>(), 3)
        .prop_shuffle()
        .prop_map(|v| [v[0], v[1], v[2]]);
    let regions = proptest::collection::vec((stores, 0u64..4096), 1..12);
    let events = proptest::collection::vec((0u8..3, 0usize..12, 0usize..3), 1..150);
    (regions, events).prop_map(|(regions, events)| HotWorld { regions, events })
}

/// Random hot regions on six stores (no isolation: any store may take a peer), driven by
/// patrols, heartbeats that feed the cache, and leader changes: every step sent keeps the
/// safety rules, and at most `hot-region-schedule-limit` hot operators run at once; and the
/// worlds do start hot operators, so the hot scheduler is among what is checked.
#[test]
fn hot_moves_never_break_a_safety_rule() {
    let started = std::cell::Cell::new(0u64);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(256));
    let run = runner.run(&hot_world(), |hw| {
        let mut w = world(&ZONES);
        w.cfg.isolation_level = String::new();
        w.cfg.hot_region_schedule_limit = 2;
        let mut cache = HotCache::new();
        let mut regions: Vec<Region> = hw
            .regions
            .iter()
            .enumerate()
            .map(|(i, (on, _))| {
                let stores: Vec<u64> = on.iter().map(|s| *s as u64 + 1).collect();
                region(i as u64 + 1, &stores)
            })
            .collect();
        let rates: Vec<u64> = hw.regions.iter().map(|(_, kib)| kib * 1024).collect();
        let all: Vec<(Region, u64)> = regions.iter().cloned().zip(rates.clone()).collect();
        heat(&w, &mut cache, &all);
        let mut slots: Vec<Option<Box<Pending>>> = vec![None; regions.len()];
        let mut next = 1_000_000;
        for (kind, n, v) in hw.events {
            let i = n % regions.len();
            let c = w.at(NOW);
            if kind == 2 {
                let voters: Vec<u64> = regions[i]
                    .peers
                    .iter()
                    .filter(|p| p.role == PeerRole::Voter)
                    .map(|p| p.id)
                    .collect();
                regions[i].leader = Some(voters[v % voters.len()]);
                continue;
            }
            if kind == 1 {
                cache.observe(&c, &regions[i], minute(rates[i]));
            }
            let input = RegionInput {
                region: &regions[i],
                pending_peers: &[],
                size_mib: 96,
                hot: cache.get(&regions[i]),
            };
            let mut ids = || {
                next += 1;
                Some(next)
            };
            let d = if kind == 0 {
                patrol(
                    &c,
                    &mut Sweep::default(),
                    &input,
                    None,
                    &mut slots[i],
                    &mut ids,
                )
            } else {
                on_heartbeat(&c, &input, true, &mut slots[i], &mut ids)
            };
            let live = slots
                .iter()
                .flatten()
                .filter(|p| p.kind == OpKind::Hot)
                .count();
            prop_assert!(
                live <= w.cfg.hot_region_schedule_limit,
                "{live} hot operators"
            );
            if d.started && slots[i].as_ref().is_some_and(|p| p.kind == OpKind::Hot) {
                started.set(started.get() + 1);
            }
            if let Some(op) = d.step {
                let before = regions[i].clone();
                let healthy = |p: &Peer| p.role != PeerRole::Learner;
                prop_assert_eq!(
                    safety::check(&before, &op, &healthy),
                    None,
                    "{:?} on {:?}",
                    op,
                    before
                );
                let mut after = safety::apply(&before, &op);
                if !matches!(op, Operator::TransferLeader(_)) {
                    after.epoch.conf_ver += 1;
                }
                regions[i] = after;
            }
        }
        Ok(())
    });
    if let Err(e) = run {
        panic!("{e}");
    }
    assert!(started.get() > 0, "no world started a hot operator");
}

/// The patrol's plan for `r` at `now_ms` in `w`: the operator it starts, if any.
fn patrol_at(w: &TestCluster, cache: &HotCache, r: &Region, now_ms: u64) -> Option<Box<Pending>> {
    let c = w.at(now_ms);
    let input = RegionInput {
        region: r,
        pending_peers: &[],
        size_mib: 96,
        hot: cache.get(r),
    };
    let mut slot = None;
    let mut next = 1_000_000;
    let mut ids = || {
        next += 1;
        Some(next)
    };
    patrol(&c, &mut Sweep::default(), &input, None, &mut slot, &mut ids);
    slot
}

/// PD balances the flow as leader apart from the flow as peer: with every store holding three
/// hot peers (the total even) but store 1 leading three of the six hot regions, the leaders
/// move to followers that lead none, and no peer moves.
#[test]
fn even_total_flow_with_the_leaders_on_one_store_moves_leaders_only() {
    let w = world(&ZONES);
    let mut cache = HotCache::new();
    // Each store holds three of the six regions; store 1 leads regions 1, 2 and 6, and
    // stores 2 and 6 lead none.
    let on: [[u64; 3]; 6] = [
        [1, 5, 3],
        [1, 2, 6],
        [3, 4, 2],
        [4, 2, 6],
        [5, 3, 4],
        [1, 6, 5],
    ];
    let hot: Vec<(Region, u64)> = on
        .iter()
        .enumerate()
        .map(|(i, s)| (region(i as u64 + 1, s), RATE))
        .collect();
    heat(&w, &mut cache, &hot);
    let c = w.at(NOW);
    let total: Vec<i64> = (1..=6)
        .map(|s| c.store(s).map_or(0, |l| l.budget.flow.bytes(false)))
        .collect();
    assert_eq!(total, vec![3 * RATE as i64; 6], "the total flow is even");
    // Whichever solver the draw tries first, as no store is a source as peer. Each draw in a
    // world of its own: a started operator counts against the hot limit of the world's next.
    for peer_first in [false, true] {
        let w = world(&ZONES);
        let mut cache = HotCache::new();
        heat(&w, &mut cache, &hot);
        for (i, want) in [(1, [2, 6]), (5, [6, 5])] {
            let op = patrol_drawn(&w, &cache, &hot[i].0, peer_first);
            let op = op.unwrap_or_else(|| panic!("region {}, peer first {peer_first}", i + 1));
            assert_eq!(op.kind, OpKind::Hot);
            assert!(
                matches!(op.steps.as_slice(), [Step::TransferLeader(p)] if want.contains(&p.store_id)),
                "region {}, peer first {peer_first}: {:?}",
                i + 1,
                op.steps
            );
        }
        // A region led by a store at the mean stays.
        assert_eq!(patrol_drawn(&w, &cache, &hot[2].0, peer_first), None);
    }
}

/// A peer move off the leader's store takes the lead with it (PD's move-leader), so the flow
/// as leader lands on the cool target, not on a follower that already leads hot regions.
#[test]
fn a_hot_leader_whose_followers_lead_hot_regions_moves_with_its_peer() {
    let w = world(&ZONES);
    let mut cache = HotCache::new();
    // Stores 1, 2 and 3 hold every hot region (4 MiB/s each, the mean 2); store 1 leads two,
    // stores 2 and 3 one each: no follower of region 1 is cool enough as a leader.
    let on: [[u64; 3]; 4] = [[1, 2, 3], [1, 2, 3], [2, 3, 1], [3, 1, 2]];
    let hot: Vec<(Region, u64)> = on
        .iter()
        .enumerate()
        .map(|(i, s)| (region(i as u64 + 1, s), RATE))
        .collect();
    heat(&w, &mut cache, &hot);
    let op = patrol_drawn(&w, &cache, &hot[0].0, true).expect("a hot operator");
    assert_eq!(op.kind, OpKind::Hot);
    // Store 4 is zone 0's cool store, as store 1 is.
    assert_eq!(
        (op.adds_to(), op.removes_from(), op.leader_to()),
        (Some(4), Some(1), Some(4)),
        "{:?}",
        op.steps
    );
    assert_eq!(hot::moved_flow(&op), HotMove::Peer);
}

/// PD's cool-down after a leader transfer: a hot region whose leader changed stores is left
/// alone for the cache-hits threshold's report intervals (3 x 60 s), then scheduled again.
#[test]
fn a_hot_region_whose_leader_just_moved_cools_down_first() {
    // Stores up and heartbeating at `now`, late enough to date a leader move 180 s before,
    // and a time whose draw takes a leader transfer.
    let now = draw_time(1, 1_000_000, false);
    let w = TestCluster::up_at(&[1, 2, 3, 4, 5, 6], now);
    let cool_ms = 3 * REPORT_INTERVAL_S * 1000;
    assert_eq!(w.cfg.hot_region_cache_hits_threshold, 3);
    let plan = |moved_ms: u64| {
        let mut cache = HotCache::new();
        // Store 1 leads four hot regions with followers on 2 and 3; region 1 was led by
        // store 2 until `moved_ms`.
        let mut hot: Vec<(Region, u64)> = (2..=4).map(|i| (region(i, &[1, 2, 3]), RATE)).collect();
        hot.push((region(1, &[2, 1, 3]), RATE));
        let c = w.at(moved_ms - 1_000);
        for _ in 0..3 {
            for (r, rate) in &hot {
                cache.observe(&c, r, minute(*rate));
            }
        }
        // The leader's report at once after the transfer: too short to measure.
        let r1 = region(1, &[1, 2, 3]);
        let moved = WriteFlow {
            bytes: 0,
            keys: 0,
            interval_s: 0,
        };
        cache.observe(&w.at(moved_ms), &r1, moved);
        patrol_at(&w, &cache, &r1, now).map(|op| op.steps)
    };
    assert_eq!(plan(now - 1_000), None, "moved 1 s ago");
    assert_eq!(plan(now - cool_ms + 1), None, "moved just under 180 s ago");
    let steps = plan(now - cool_ms).expect("a hot operator once cooled");
    assert!(
        matches!(steps.as_slice(), [Step::TransferLeader(p)] if p.store_id == 2 || p.store_id == 3),
        "{steps:?}"
    );
}

/// A world whose store 1 leads four hot regions with followers on stores 2 and 3, at `now`,
/// with region 1's hot operator ended at `ended` (if any): the patrol's plan for region 1.
fn plan_after_hot_op(now: u64, ended: Option<(HotMove, u64)>) -> Option<Vec<Step>> {
    let w = TestCluster::up_at(&[1, 2, 3, 4, 5, 6], now);
    let mut cache = HotCache::new();
    let hot: Vec<(Region, u64)> = (1..=4).map(|i| (region(i, &[1, 2, 3]), RATE)).collect();
    let c = w.at(now);
    for _ in 0..c.cfg.hot_region_cache_hits_threshold {
        for (r, rate) in &hot {
            cache.observe(&c, r, minute(*rate));
        }
    }
    if let Some((flow, at)) = ended {
        cache.hot_op_ended(1, flow, at);
    }
    patrol_at(&w, &cache, &hot[0].0, now).map(|op| op.steps)
}

/// PD keeps a region in `regionPendings` for `max-zombie-rounds` after its hot operator ends:
/// 3 x 60 s after a leader transfer (write-leader), 3 x 10 s after a peer move (write-peer).
/// Until then the hot scheduler does not pick it again.
#[test]
fn a_hot_region_whose_hot_operator_just_ended_is_not_picked_again() {
    let now = draw_time(1, 1_000_000, false);
    let transfer = |steps: Option<Vec<Step>>| {
        let steps = steps.expect("a hot operator");
        assert!(
            matches!(steps.as_slice(), [Step::TransferLeader(p)] if p.store_id == 2 || p.store_id == 3),
            "{steps:?}"
        );
    };
    transfer(plan_after_hot_op(now, None));
    for (flow, wait_ms) in [(HotMove::Leader, 180_000), (HotMove::Peer, 30_000)] {
        assert_eq!(hot::pending_ms(flow), wait_ms);
        let at = |ago: u64| plan_after_hot_op(now, Some((flow, now - ago)));
        assert_eq!(at(0), None, "{flow:?} ended just now");
        assert_eq!(
            at(wait_ms - 1),
            None,
            "{flow:?} ended just under {wait_ms} ms ago"
        );
        transfer(at(wait_ms));
    }
}

/// The scheduler tells its caller which flow a hot operator moved when it ends, done or not,
/// so that the caller's hot cache dates the end.
#[test]
fn a_hot_operator_that_ends_says_which_flow_it_moved() {
    let now = draw_time(1, 1_000_000, false);
    let w = TestCluster::up_at(&[1, 2, 3, 4, 5, 6], now);
    let mut cache = HotCache::new();
    let hot: Vec<(Region, u64)> = (1..=4).map(|i| (region(i, &[1, 2, 3]), RATE)).collect();
    let c = w.at(now);
    for _ in 0..c.cfg.hot_region_cache_hits_threshold {
        for (r, rate) in &hot {
            cache.observe(&c, r, minute(*rate));
        }
    }
    let op = patrol_at(&w, &cache, &hot[0].0, now).expect("a hot operator");
    let Some(Step::TransferLeader(to)) = op.steps.first().cloned() else {
        panic!("{:?}", op.steps);
    };
    let heartbeat = |r: &Region, at_ms: u64, op: &Pending| {
        let input = RegionInput {
            region: r,
            pending_peers: &[],
            size_mib: 96,
            hot: cache.get(r),
        };
        let mut slot = Some(Box::new(op.clone()));
        on_heartbeat(&w.at(at_ms), &input, true, &mut slot, &mut || None)
    };
    // Not yet done: nothing ended.
    let d = heartbeat(&hot[0].0, now, &op);
    assert_eq!((d.ended, d.hot_ended), (None, None));
    // Done: the lead is on the target.
    let mut moved = hot[0].0.clone();
    moved.leader = Some(to.id);
    let d = heartbeat(&moved, now, &op);
    assert_eq!(d.ended, Some((OpKind::Hot, Ended::Done)));
    assert_eq!(d.hot_ended, Some(HotMove::Leader));
    // Timed out: ended too.
    let d = heartbeat(&hot[0].0, op.deadline_ms, &op);
    assert_eq!(d.ended, Some((OpKind::Hot, Ended::TimedOut)));
    assert_eq!(d.hot_ended, Some(HotMove::Leader));
}
