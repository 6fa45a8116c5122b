use proptest::prelude::*;

use super::*;
use crate::placement::schedule::safety;
use crate::placement::schedule::test_cluster::{region, TestCluster};
use crate::placement::schedule::{patrol, Dispatch, Ended, Sweep};
use crate::placement::CancelReason;
use crate::placement::{Operator, Pending};

/// Past split-merge-interval from a start at 0.
const NOW: u64 = 4_000_000;

type World = TestCluster;

/// `stores` stores up and idle, heartbeating at `NOW`.
fn world(stores: u64) -> World {
    TestCluster::up_at(&(1..=stores).collect::<Vec<_>>(), NOW)
}

fn input(r: &Region, size_mib: u64) -> RegionInput<'_> {
    RegionInput {
        region: r,
        pending_peers: &[],
        size_mib,
        hot: None,
    }
}

fn adj(r: &Region, size_mib: u64) -> Adjacent<'_> {
    Adjacent {
        input: input(r, size_mib),
        keys: size_mib * 1000,
        busy: false,
        recently_split: false,
    }
}

/// Checks region 2 (`size` MiB) between regions 1 and 3.
fn check_mid(
    w: &World,
    now: u64,
    src: &Region,
    size: u64,
    prev: Option<Adjacent>,
    next: Option<Adjacent>,
) -> Option<MergePlan> {
    let lookup = move |s: Side| match s {
        Side::Prev => prev,
        Side::Next => next,
    };
    let m = MergeInput {
        keys: size * 1000,
        recently_split: false,
        started_ms: 0,
        adjacent: &lookup,
    };
    check(&w.at(now), &input(src, size), &m)
}

fn target_of(p: &MergePlan) -> u64 {
    match p.source.steps.last() {
        Some(Step::Merge(m)) if !m.passive => m.target.id,
        other => panic!("last step {other:?}"),
    }
}

#[test]
fn a_small_region_merges_into_the_next_unless_the_previous_is_smaller() {
    let w = world(3);
    let (a, b, c) = (
        region(1, &[1, 2, 3]),
        region(2, &[2, 3, 1]),
        region(3, &[3, 1, 2]),
    );
    let got = check_mid(&w, NOW, &b, 1, Some(adj(&a, 5)), Some(adj(&c, 5))).unwrap();
    assert_eq!(target_of(&got), 3);
    assert_eq!(got.source.steps.len(), 1, "peers match: the merge alone");
    assert_eq!(got.target_id, 3);
    assert!(matches!(&got.target.steps[..], [Step::Merge(m)] if m.passive && m.source.id == 2));
    assert_eq!(
        got.source.steps[0].wire(),
        Operator::Merge(Box::new(c.clone()))
    );
    let got = check_mid(&w, NOW, &b, 1, Some(adj(&a, 4)), Some(adj(&c, 5))).unwrap();
    assert_eq!(target_of(&got), 1);
    // One-way merge: only the next.
    let mut w1 = world(3);
    w1.cfg.enable_one_way_merge = true;
    let got = check_mid(&w1, NOW, &b, 1, Some(adj(&a, 4)), Some(adj(&c, 5))).unwrap();
    assert_eq!(target_of(&got), 3);
    assert!(check_mid(&w1, NOW, &b, 1, Some(adj(&a, 4)), None).is_none());
    let got = check_mid(&w, NOW, &b, 1, Some(adj(&a, 130)), None).unwrap();
    assert_eq!(target_of(&got), 1);
}

#[test]
fn no_merge_when_pd_would_not_merge() {
    let w = world(4);
    let (a, b, c) = (
        region(1, &[1, 2, 3]),
        region(2, &[1, 2, 3]),
        region(3, &[1, 2, 3]),
    );
    let both = || (Some(adj(&a, 1)), Some(adj(&c, 1)));
    let (p, n) = both();
    assert!(check_mid(&w, NOW, &b, 1, p, n).is_some());
    // Within split-merge-interval of the start.
    let (p, n) = both();
    assert!(check_mid(&w, 3_599_999, &b, 1, p, n).is_none());
    // Too large, by size or by keys.
    let (p, n) = both();
    assert!(check_mid(&w, NOW, &b, 55, p, n).is_none());
    // A target too large, or one the merged region would split off a mergeable piece of.
    assert!(check_mid(&w, NOW, &b, 1, Some(adj(&a, 577)), None).is_none());
    // 50 + 100 = 150 MiB splits into 96 and 54, which would merge again.
    assert!(check_mid(&w, NOW, &b, 50, None, Some(adj(&c, 100))).is_none());
    assert!(check_mid(&w, NOW, &b, 50, None, Some(adj(&c, 90))).is_some());
    // Busy or recently split neighbours are no targets.
    let mut busy = adj(&a, 1);
    busy.busy = true;
    let mut split = adj(&c, 1);
    split.recently_split = true;
    assert!(check_mid(&w, NOW, &b, 1, Some(busy), Some(split)).is_none());
    // A learner, a missing voter, or a neighbour that does not touch.
    let mut learner = b.clone();
    learner.peers[2].role = PeerRole::Learner;
    let (p, n) = both();
    assert!(check_mid(&w, NOW, &learner, 1, p, n).is_none());
    let two = region(2, &[1, 2]);
    let (p, n) = both();
    assert!(check_mid(&w, NOW, &two, 1, p, n).is_none());
    let far = region(5, &[1, 2, 3]);
    assert!(check_mid(&w, NOW, &b, 1, Some(adj(&far, 1)), None).is_none());
    // Merging turned off.
    let mut off = world(4);
    off.cfg.max_merge_region_size_mib = 0;
    let (p, n) = both();
    assert!(check_mid(&off, NOW, &b, 0, p, n).is_none());
}

#[test]
fn unmatched_peers_move_to_the_targets_stores_first() {
    let w = world(5);
    let b = region(2, &[4, 2, 5]);
    let c = region(3, &[1, 2, 3]);
    let got = check_mid(&w, NOW, &b, 1, None, Some(adj(&c, 1))).unwrap();
    let kinds: Vec<String> = got
        .source
        .steps
        .iter()
        .map(|s| match s {
            Step::AddLearner(p) => format!("add {}", p.store_id),
            Step::PromoteLearner(p) => format!("promote {}", p.store_id),
            Step::TransferLeader(p) => format!("leader {}", p.store_id),
            Step::RemovePeer(p) => format!("remove {}", p.store_id),
            other => format!("{other:?}").chars().take(5).collect(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "add 1",
            "promote 1",
            "add 3",
            "promote 3",
            "leader 2",
            "remove 4",
            "remove 5",
            "Merge"
        ]
    );
}

/// As PD's operator controller charges a merge: each alignment move's add to the store that
/// receives it and its removal to the store that loses it, the merge itself nothing; and if
/// one store's limit cannot pay, nothing starts and no store pays.
#[test]
fn a_merge_charges_every_alignment_move_to_its_store() {
    let w = world(5);
    let b = region(2, &[4, 2, 5]);
    let c = region(3, &[1, 2, 3]);
    let cost = crate::placement::schedule::influence(SIZE_MIB);
    let full = crate::placement::schedule::capacity(w.cfg.store_limit_add_per_min);
    let cl = w.at(NOW);
    let budget = |s: u64| &cl.store(s).expect("a store").budget;
    let d = patrol_once(&w, &b, &c, &mut None);
    assert!(d.started);
    for s in [1, 3] {
        assert!(
            !budget(s).has(true, full - cost + 1.0, cl.rate(s, true), NOW),
            "store {s}"
        );
        assert_eq!(budget(s).delta().0, 1, "store {s} counts the peer it gains");
    }
    for s in [4, 5] {
        let rate = cl.rate(s, false);
        assert!(
            !budget(s).has(false, full - cost + 1.0, rate, NOW),
            "store {s}"
        );
        assert_eq!(
            budget(s).delta().0,
            -1,
            "store {s} counts the peer it loses"
        );
    }
    assert!(budget(2).has(true, full, cl.rate(2, true), NOW));
    assert!(budget(2).has(false, full, cl.rate(2, false), NOW));

    // Store 3 cannot receive now: the merge does not start, and store 1 is not charged.
    let w = world(5);
    let cl = w.at(NOW);
    let budget = |s: u64| &cl.store(s).expect("a store").budget;
    assert!(budget(3).take(true, full, cl.rate(3, true), NOW));
    let mut slot = None;
    let d = patrol_once(&w, &b, &c, &mut slot);
    assert!(!d.started && slot.is_none(), "{d:?}");
    assert_eq!(w.in_flight.get(OpKind::Merge), 0);
    assert!(budget(1).has(true, full, cl.rate(1, true), NOW));
    for s in [4, 5] {
        assert!(
            budget(s).has(false, full, cl.rate(s, false), NOW),
            "store {s}"
        );
    }
}

/// The size of both regions [`patrol_once`] merges: small enough to merge, large enough that
/// its alignment moves cost a store limit something (an empty region's cost nothing).
const SIZE_MIB: u64 = 10;

/// Runs the patrol on `src` with `next` as its only neighbour.
fn patrol_once(
    w: &World,
    src: &Region,
    next: &Region,
    slot: &mut Option<Box<Pending>>,
) -> Dispatch {
    let lookup = |s: Side| (s == Side::Next).then(|| adj(next, SIZE_MIB));
    let m = MergeInput {
        keys: 1,
        recently_split: false,
        started_ms: 0,
        adjacent: &lookup,
    };
    let mut id = 100;
    patrol(
        &w.at(NOW),
        &mut Sweep::default(),
        &input(src, SIZE_MIB),
        Some(&m),
        slot,
        &mut || {
            id += 1;
            Some(id)
        },
    )
}

#[test]
fn the_patrol_starts_a_pair_within_the_merge_cap() {
    let mut w = world(3);
    w.cfg.merge_schedule_limit = 2;
    let mut slot = None;
    let (b, c) = (region(2, &[1, 2, 3]), region(3, &[1, 2, 3]));
    let d = patrol_once(&w, &b, &c, &mut slot);
    assert!(d.started);
    assert_eq!(d.step, Some(Operator::Merge(Box::new(c.clone()))));
    let (tid, target_op) = d.merge_target.expect("the target's operator");
    assert_eq!(tid, 3);
    assert_eq!(w.in_flight.get(OpKind::Merge), 2, "PD counts both");
    // The cap is reached: the next region gets nothing.
    let (d2, e) = (region(4, &[1, 2, 3]), region(5, &[1, 2, 3]));
    let mut other = None;
    assert_eq!(patrol_once(&w, &d2, &e, &mut other), Dispatch::default());
    // The target's operator is never sent, and is done once the target's range grows.
    let mut tslot = Some(target_op);
    let cl = w.at(NOW);
    assert_eq!(
        crate::placement::schedule::on_heartbeat(&cl, &input(&c, 1), true, &mut tslot, &mut || {
            None
        })
        .step,
        None
    );
    let mut grown = c.clone();
    grown.start_key = b.start_key.clone();
    grown.epoch.version = 2;
    let done = crate::placement::schedule::on_heartbeat(
        &cl,
        &input(&grown, 1),
        true,
        &mut tslot,
        &mut || None,
    );
    assert_eq!(done.ended, Some((OpKind::Merge, Ended::Done)));
    // The source's is sent again while the region is as planned; once its peers differ from
    // the target's it is cancelled, naming the target to cancel with it.
    let again = patrol_once(&w, &b, &c, &mut slot);
    assert_eq!(again.step, Some(Operator::Merge(Box::new(c.clone()))));
    let moved = region(2, &[1, 2, 4]);
    let lookup = |_| None;
    let m = MergeInput {
        keys: 1,
        recently_split: false,
        started_ms: 0,
        adjacent: &lookup,
    };
    let gone = patrol(
        &w.at(NOW),
        &mut Sweep::default(),
        &input(&moved, 1),
        Some(&m),
        &mut slot,
        &mut || None,
    );
    // Its peers moved under it: PD's epoch check of a merge.
    let stale = Ended::Cancelled(CancelReason::EpochNotMatch);
    assert_eq!(gone.ended, Some((OpKind::Merge, stale)));
    assert_eq!(gone.merge_partner, Some(3));
    assert_eq!(gone.step, None);
    assert_eq!(w.in_flight.get(OpKind::Merge), 0);
}

proptest! {
    /// Whatever the two regions' stores, carrying out the source's steps in order (each
    /// checked against the safety rules) leaves its peers where the target's are before the
    /// merge is sent.
    #[test]
    fn the_merge_is_sent_only_once_the_peers_match(
        src in proptest::sample::subsequence((1u64..=7).collect::<Vec<_>>(), 3),
        dst in proptest::sample::subsequence((1u64..=7).collect::<Vec<_>>(), 3),
        lead in 0usize..3,
    ) {
        let w = world(7);
        let mut b = region(2, &src);
        b.leader = Some(b.peers[lead].id);
        let c = region(3, &dst);
        let got = check_mid(&w, NOW, &b, 1, None, Some(adj(&c, 1))).expect("a merge");
        let mut r = b.clone();
        let mut next = 500;
        for mut step in got.source.steps {
            match &mut step {
                Step::AddLearner(p) => {
                    next += 1;
                    p.id = next;
                }
                Step::PromoteLearner(p) | Step::TransferLeader(p) if p.id == 0 => {
                    p.id = r.peers.iter().find(|q| q.store_id == p.store_id).unwrap().id;
                }
                _ => {}
            }
            if let Step::Merge(_) = step {
                prop_assert!(peers_match(&r, &c), "{r:?} vs {c:?}");
            }
            let op = step.wire();
            prop_assert_eq!(safety::check(&r, &op, &|_| true), None, "{:?} on {:?}", op, r);
            r = safety::apply(&r, &op);
        }
    }
}
