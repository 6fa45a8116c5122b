//! An admin merge's two halves on two shards, as the server runs them when the source and the
//! target belong to different cores: the source's half sends nothing until the target's is
//! placed, and either half ending undone (cancelled, timed out) ends the other, as PD's
//! operator controller removes a merge's related operator.

use super::tests::{cancels, halves, halves_on, shard_with};
use super::*;
use crate::placement::op_status::CancelReason;
use crate::placement::operator::OpKind;
use crate::placement::range_index::RangeIndex;
use crate::placement::schedule::{AdminRefused, TestCluster};

/// Region 1 over `["", "m")` on its own shard (the target's) and region 2 over `["m", "")` on
/// another (the source's), each on stores 1-3 led from store 1, heartbeated at time 0.
fn two_shards() -> (TestCluster, RangeIndex, Shard, Shard) {
    let w = TestCluster::up(&[1, 2, 3]);
    let index = RangeIndex::new();
    let [left, right] = halves();
    let target = shard_with(&w, &index, &[left]);
    let source = shard_with(&w, &index, &[right]);
    (w, index, target, source)
}

/// What region `id`'s leader gets on a heartbeat at `now_ms` reporting `r`.
fn beat(
    shard: &mut Shard,
    w: &TestCluster,
    index: &RangeIndex,
    r: &Region,
    now_ms: u64,
) -> Option<Operator> {
    shard
        .heartbeat(r, RegionStats::default(), &w.at(now_ms), index, &mut || {
            None
        })
        .unwrap()
        .operator
}

/// Starts the merge of region 2 into 1 across the two shards, as the server's `merge` does:
/// the source's half (held), the target's, then the source's let go; returns its first step.
fn merge(w: &TestCluster, target: &mut Shard, source: &mut Shard, now_ms: u64) -> Option<Operator> {
    let c = w.at(now_ms);
    let t = target.merge_target(1, now_ms).unwrap();
    let (half, kind) = source.start_admin_merge(2, t, &c, &mut || None).unwrap();
    assert_eq!(target.start_merge_target(1, half, kind, &c), Ok(()));
    source.release_admin_merge(2, 1, true, &c).unwrap()
}

fn status(shard: &Shard, id: u64, now_ms: u64) -> Option<OpStatus> {
    shard.operator_status(id, now_ms).map(|r| r.status)
}

/// The admin merge's starts and ends `shard` kept for the log since last asked, each
/// `(region, status, never added)`; each with the operator as it stood.
fn merge_lines(shard: &mut Shard) -> Vec<(u64, OpStatus, bool)> {
    shard
        .take_op_events()
        .into_iter()
        .filter(|e| e.record.desc == super::admin_operator::MERGE_DESC)
        .inspect(|e| assert!(e.op.is_some(), "{e:?}"))
        .map(|e| (e.region, e.record.status, e.refused))
        .collect()
}

const STOP: Option<CancelReason> = Some(CancelReason::AdminStop);
const RELATED: Option<CancelReason> = Some(CancelReason::RelatedMergeRegion);

#[test]
fn the_sources_half_sends_nothing_until_the_targets_half_is_placed() {
    let (w, index, mut target, mut source) = two_shards();
    let [left, right] = halves();
    let merge_step = Some(Operator::Merge(Box::new(left)));
    let c = w.at(10);
    let t = target.merge_target(1, 10).unwrap();
    let (half, kind) = source.start_admin_merge(2, t, &c, &mut || None).unwrap();
    // Held: the source's leader gets nothing, on a heartbeat or from the patrol, and the
    // list leaves it out until its target's half is placed, as PD lists the pair together.
    assert_eq!(beat(&mut source, &w, &index, &right, 11), None);
    assert!(source.running_operators(None, 11).is_empty());
    assert_eq!(
        source.running_operators(Some(2), 11).len(),
        1,
        "asked for by id"
    );
    assert!(source
        .patrol(&w.at(12), 10, Some(&index), &mut || None)
        .is_empty());
    // The target changed meanwhile: its half is refused, and the held one is cancelled
    // without ever having been sent.
    let mut stale = half.clone();
    stale.target.epoch.version += 1;
    assert_eq!(
        target.start_merge_target(1, stale, kind, &c),
        Err(AdminRefused::AddOperator)
    );
    assert_eq!(source.release_admin_merge(2, 1, false, &c), Ok(None));
    assert_eq!(status(&source, 2, 13), Some(OpStatus::Cancel));
    // Never added: PD logs the refused half's cancel alone, with no add before it.
    assert_eq!(merge_lines(&mut source), vec![(2, OpStatus::Cancel, true)]);
    assert_eq!(beat(&mut source, &w, &index, &right, 13), None);
    assert_eq!(w.in_flight.get(OpKind::Admin), 0);
    // A release with nothing held is refused (the caller then ends the target's half).
    assert_eq!(
        source.release_admin_merge(2, 1, true, &c),
        Err(AdminRefused::AddOperator)
    );
    // Placed: the pair runs, and the source's Merge goes to its leader from then on. Each
    // half is logged as added, the source's once its target's is placed.
    assert_eq!(merge(&w, &mut target, &mut source, 20), merge_step);
    assert_eq!(
        merge_lines(&mut target),
        vec![(1, OpStatus::Running, false)]
    );
    assert_eq!(
        merge_lines(&mut source),
        vec![(2, OpStatus::Running, false)]
    );
    assert_eq!(beat(&mut source, &w, &index, &right, 21), merge_step);
    assert_eq!(w.in_flight.get(OpKind::Admin), 2);
    assert_eq!(
        source.running_operators(None, 21).len(),
        1,
        "let go: listed"
    );
}

#[test]
fn either_half_ending_undone_ends_its_partner_on_the_other_shard() {
    let (w, index, mut target, mut source) = two_shards();
    let [left, right] = halves();
    let merge_step = Some(Operator::Merge(Box::new(left)));

    // The target's half cancelled (PD's DELETE): the source's ends with it.
    assert_eq!(merge(&w, &mut target, &mut source, 10), merge_step);
    assert_eq!(target.cancel_operators(Some(1), &w.at(11)), vec![1]);
    assert_eq!(target.take_partner_ends(), vec![(2, 1)]);
    assert!(!target.has_partner_ends());
    assert_eq!(cancels(&mut target), vec![(1, STOP, Some(2))]);
    // Only the half paired with the one that ended.
    assert!(!source.end_merge_half(2, 9, &w.at(12)));
    assert!(cancels(&mut source).is_empty());
    assert!(source.end_merge_half(2, 1, &w.at(12)));
    assert_eq!(status(&source, 2, 12), Some(OpStatus::Cancel));
    assert_eq!(cancels(&mut source), vec![(2, RELATED, Some(1))]);
    assert!(
        !source.has_partner_ends(),
        "a half ended through its partner sends nothing back"
    );
    assert!(source.running_operators(None, 12).is_empty());
    assert_eq!(beat(&mut source, &w, &index, &right, 13), None);
    assert_eq!(w.in_flight.get(OpKind::Admin), 0);

    // The source's half cancelled: the target's ends with it.
    assert_eq!(merge(&w, &mut target, &mut source, 20), merge_step);
    assert_eq!(source.cancel_operators(Some(2), &w.at(21)), vec![2]);
    assert_eq!(source.take_partner_ends(), vec![(1, 2)]);
    assert!(target.end_merge_half(1, 2, &w.at(22)));
    assert_eq!(status(&target, 1, 22), Some(OpStatus::Cancel));
    assert_eq!(cancels(&mut source), vec![(2, STOP, Some(1))]);
    assert_eq!(cancels(&mut target), vec![(1, RELATED, Some(2))]);
    assert!(target.running_operators(None, 22).is_empty());
    assert_eq!(w.in_flight.get(OpKind::Admin), 0);

    // The source's half timed out on a heartbeat: the target's ends with it.
    assert_eq!(merge(&w, &mut target, &mut source, 30), merge_step);
    let late = 30 + w.cfg.operator_timeout_ms;
    assert_eq!(beat(&mut source, &w, &index, &right, late), None);
    assert_eq!(status(&source, 2, late), Some(OpStatus::Timeout));
    assert_eq!(source.take_partner_ends(), vec![(1, 2)]);
    assert!(target.end_merge_half(1, 2, &w.at(late)));
    assert_eq!(status(&target, 1, late), Some(OpStatus::Cancel));
    assert!(cancels(&mut source).is_empty(), "a timeout is no cancel");
    assert_eq!(cancels(&mut target), vec![(1, RELATED, Some(2))]);
    assert_eq!(w.in_flight.get(OpKind::Admin), 0);
}

#[test]
fn on_one_shard_cancelling_either_half_ends_both_at_once() {
    let (w, _, mut shard) = halves_on(&[1, 2, 3]);
    // Either half cancelled, then every operator (the entries' first, 1, stopped first): the
    // partner ends at once, for its related merge region, and is reported with it.
    for (at, cancelled, partner) in [(10, Some(1), 2), (20, Some(2), 1), (30, None, 2)] {
        let c = w.at(at);
        let t = shard.merge_target(1, at).unwrap();
        let (half, kind) = shard.start_admin_merge(2, t, &c, &mut || None).unwrap();
        assert_eq!(shard.start_merge_target(1, half, kind, &c), Ok(()));
        assert!(shard.release_admin_merge(2, 1, true, &c).unwrap().is_some());
        let stopped = cancelled.unwrap_or(1);
        assert_eq!(
            shard.cancel_operators(cancelled, &c),
            vec![stopped, partner]
        );
        assert_eq!(status(&shard, stopped, at), Some(OpStatus::Cancel));
        assert_eq!(status(&shard, partner, at), Some(OpStatus::Cancel));
        assert_eq!(
            cancels(&mut shard),
            vec![
                (stopped, STOP, Some(partner)),
                (partner, RELATED, Some(stopped))
            ]
        );
        assert!(shard.running_operators(None, at).is_empty());
        assert!(!shard.has_partner_ends(), "nothing for another shard");
        assert_eq!(w.in_flight.get(OpKind::Admin), 0);
    }
}
