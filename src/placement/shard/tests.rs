//! The shard against its callers' view: heartbeats that repeat, change or displace routes,
//! bad reports, one pending operator per region, the patrol's round, and orders with the
//! statuses GetOperator reports.

use super::*;
use crate::placement::schedule::{up_stores, Groups, TestCluster, SCATTER_DESC};
use crate::placement::test_region::{self, Keys, PeerIds};
use crate::placement::{OpKind, Peer, PeerRole, ScheduleConfig, Split, StoreStats, TimeInterval};

#[test]
fn sizes_keep_whole_kib_and_saturate() {
    let s = Sizes::from(RegionStats {
        approximate_size: 96 * 1024 * 1024 + 1023,
        approximate_keys: 1 << 40,
        written_bytes: 1,
        written_keys: 7,
        pending: 0,
        interval: TimeInterval::default(),
    });
    assert_eq!(
        s,
        Sizes {
            size_kib: 96 * 1024,
            keys: u32::MAX,
            written_kib: 1,
            written_keys: 7,
        }
    );
    assert_eq!(Sizes::from(RegionStats::default()), Sizes::default());
    // Any data at all is kept apart from "not measured" (0).
    let tiny = |bytes| {
        Sizes::from(RegionStats {
            approximate_size: bytes,
            ..RegionStats::default()
        })
        .size_kib
    };
    assert_eq!(tiny(1), 1);
    assert_eq!(tiny(u64::MAX), u32::MAX);
}

/// PD's HTTP API and scheduler read whole MiB, rounded down (PD's `RegionFromHeartbeat`:
/// `approximate_size / units.MiB`), with a region that has data but less than 1 MiB as 1
/// (`EmptyRegionApproximateSize`).
#[test]
fn reported_sizes_read_in_mib_as_pd_computes_them() {
    let shown = |bytes: u64| {
        ReportedSizes::from(Sizes::from(RegionStats {
            approximate_size: bytes,
            ..RegionStats::default()
        }))
        .approximate_size_mib
    };
    let pd = |bytes: u64| match bytes / (1 << 20) {
        0 if bytes > 0 => 1,
        mib => mib,
    };
    for bytes in [
        0,
        1,
        1023,
        1024,
        (1 << 20) - 1,
        1 << 20,
        (1 << 20) + 1,
        (2 << 20) - 1,
        2 << 20,
        (96 << 20) + (512 << 10),
        (97 << 20) - 1,
        (4u64 << 40) - 1,
    ] {
        assert_eq!(shown(bytes), pd(bytes), "{bytes} bytes");
    }
    let r = ReportedSizes::from(Sizes::from(RegionStats {
        approximate_size: 3 << 20,
        approximate_keys: 30_000,
        written_bytes: 8192,
        written_keys: 12,
        pending: 0,
        interval: TimeInterval::default(),
    }));
    assert_eq!(
        r,
        ReportedSizes {
            approximate_size_mib: 3,
            approximate_keys: 30_000,
            written_bytes: 8192,
            written_keys: 12,
        }
    );
}

/// PD's `RegionInfo.Inherit`: a report of size 0 (TiKV has not measured the region) keeps the
/// size and keys reported before it, or counts as 1 MiB for a region never reported; the
/// flow figures are the report's own. The scheduler reads the same sizes the HTTP API shows.
#[test]
fn an_unmeasured_report_keeps_the_size_before_it_or_counts_as_one_mib() {
    let stores = view(&[(1, 0), (2, 0), (3, 0)]);
    let index = RangeIndex::new();
    let mut shard = Shard::new();
    let mut ids = 900..;
    let stats = |bytes: u64, keys: u64, written: u64| RegionStats {
        approximate_size: bytes,
        approximate_keys: keys,
        written_bytes: written,
        ..RegionStats::default()
    };
    let a = region(1, b"", b"m", 1, &[1, 2, 3]);
    let mut beat = |s: RegionStats| {
        shard
            .heartbeat(&a, s, &stores.at(0), &index, &mut || ids.next())
            .unwrap();
        let sizes = shard.regions.get(&1).unwrap().sizes;
        let shown = shard.report(1).unwrap().sizes;
        assert_eq!(sizes.mib(), shown.approximate_size_mib);
        shown
    };
    let first = beat(stats(0, 0, 4096));
    assert_eq!((first.approximate_size_mib, first.approximate_keys), (1, 0));
    assert_eq!(first.written_bytes, 4096);
    let measured = beat(stats((96 << 20) + 5, 960_000, 0));
    assert_eq!(
        (measured.approximate_size_mib, measured.approximate_keys),
        (96, 960_000)
    );
    let unmeasured = beat(stats(0, 0, 8192));
    assert_eq!(
        unmeasured,
        ReportedSizes {
            written_bytes: 8192,
            ..measured
        }
    );
    // A truly empty region is reported with a size of 1 byte and no keys: 1 MiB, 0 keys.
    let empty = beat(stats(1, 0, 0));
    assert_eq!((empty.approximate_size_mib, empty.approximate_keys), (1, 0));
}

pub(super) fn view(loads: &[(u64, u64)]) -> TestCluster {
    world(loads, ScheduleConfig::default())
}

fn world(loads: &[(u64, u64)], cfg: ScheduleConfig) -> TestCluster {
    let map = up_stores(loads.iter().map(|&(id, leaders)| {
        let stats = StoreStats {
            leader_count: leaders,
            ..Default::default()
        };
        (id, stats)
    }));
    TestCluster::new(&map, cfg)
}

/// Region `id` over `[start, end)` at `version` with a voter `id * 10 + s` on each store `s`,
/// led by the first.
pub(super) fn region(id: u64, start: &[u8], end: &[u8], version: u64, stores: &[u64]) -> Region {
    let mut r = test_region::build(id, stores, PeerIds::Tens, Keys::Range(start, end));
    r.epoch.version = version;
    r
}

/// Region 1 over `["", "m")` and region 2 over `["m", "")`, each on stores 1-3 led from
/// store 1: the two halves of a merge.
pub(super) fn halves() -> [Region; 2] {
    [
        region(1, b"", b"m", 1, &[1, 2, 3]),
        region(2, b"m", b"", 1, &[1, 2, 3]),
    ]
}

/// A shard that took the heartbeats of `regions` at time 0.
pub(super) fn shard_with(w: &TestCluster, index: &RangeIndex, regions: &[Region]) -> Shard {
    let mut shard = Shard::new();
    for r in regions {
        shard
            .heartbeat(r, RegionStats::default(), &w.at(0), index, &mut || None)
            .unwrap();
    }
    shard
}

/// The operators `shard` cancelled for a reason since last asked, each `(region, reason,
/// related merge region)`, as the server logs them.
pub(super) fn cancels(shard: &mut Shard) -> Vec<(u64, Option<CancelReason>, Option<u64>)> {
    let taken = shard.take_op_events();
    taken
        .into_iter()
        .filter(|e| e.record.status == OpStatus::Cancel)
        .map(|e| (e.region, e.record.cancel_reason, e.record.related_merge))
        .collect()
}

/// One shard holding both [`halves`], heartbeated at time 0, in a cluster of `stores`.
pub(super) fn halves_on(stores: &[u64]) -> (TestCluster, RangeIndex, Shard) {
    let w = TestCluster::up(stores);
    let index = RangeIndex::new();
    let shard = shard_with(&w, &index, &halves());
    (w, index, shard)
}

#[test]
fn repeats_touch_nothing_shared_and_changes_are_persisted() {
    let index = RangeIndex::new();
    let stores = view(&[(1, 0), (2, 0), (3, 0)]);
    let mut shard = Shard::new();
    let r = region(1, b"", b"", 1, &[1, 2, 3]);
    let stats = RegionStats::default();
    let first = shard
        .heartbeat(&r, stats, &stores.at(0), &index, &mut || None)
        .unwrap();
    assert!(first.persist.is_some());
    let route = index.locate(b"k").unwrap();
    let again = shard
        .heartbeat(&r, stats, &stores.at(1), &index, &mut || None)
        .unwrap();
    assert!(again.persist.is_none() && again.operator.is_none());
    assert!(
        Arc::ptr_eq(&route, &index.locate(b"k").unwrap()),
        "a repeat republished the route"
    );
    // Split: the right half keeps id 1; region 2 (another shard's) took the left.
    let left = region(2, b"", b"m", 2, &[1, 2, 3]);
    let change = index.apply(left).unwrap();
    assert_eq!(change.removed, vec![1]);
    assert!(shard.get(1).is_none(), "displaced region still served");
    // The old report of region 1 is now stale against region 2.
    let stale = shard.heartbeat(&r, stats, &stores.at(2), &index, &mut || None);
    assert!(
        matches!(stale, Err(RegionError::StaleEpoch { .. })),
        "{stale:?}"
    );
    let right = region(1, b"m", b"", 2, &[1, 2, 3]);
    let out = shard
        .heartbeat(&right, stats, &stores.at(3), &index, &mut || None)
        .unwrap();
    assert!(out.persist.is_some());
    assert_eq!(index.len(), 2);
}

#[test]
fn forgetting_regions_in_the_middle_keeps_the_rest_reachable() {
    // Entries are dense and a removal moves the last one into the hole: the moved
    // region must still be found under its id, with its own route.
    let index = RangeIndex::new();
    let stores = view(&[(1, 0), (2, 0), (3, 0)]);
    let mut shard = Shard::new();
    let stats = RegionStats::default();
    let bounds: [&[u8]; 5] = [b"", b"b", b"c", b"d", b""];
    let first: Vec<Region> = (1..=4u64)
        .map(|id| {
            region(
                id,
                bounds[id as usize - 1],
                bounds[id as usize],
                1,
                &[1, 2, 3],
            )
        })
        .collect();
    for r in &first {
        shard
            .heartbeat(r, stats, &stores.at(0), &index, &mut || None)
            .unwrap();
    }
    let merged = region(5, b"b", b"d", 2, &[1, 2, 3]);
    let out = shard
        .heartbeat(&merged, stats, &stores.at(1), &index, &mut || None)
        .unwrap();
    let mut removed = out.removed.clone();
    removed.sort_unstable();
    assert_eq!(removed, vec![2, 3]);
    assert_eq!(shard.len(), 3);
    assert!(shard.get(2).is_none() && shard.get(3).is_none());
    for want in [&first[0], &first[3], &merged] {
        let got = shard.get(want.id).map(|r| r.region());
        assert_eq!(
            got.as_ref(),
            Some(want),
            "region {} after the merge",
            want.id
        );
    }
}

#[test]
fn bad_reports_change_nothing() {
    let index = RangeIndex::new();
    let stores = view(&[(1, 0), (2, 0), (3, 0)]);
    let mut shard = Shard::new();
    let stats = RegionStats::default();
    let good = region(1, b"", b"", 1, &[1, 2, 3]);
    shard
        .heartbeat(&good, stats, &stores.at(0), &index, &mut || None)
        .unwrap();
    let before: Vec<Region> = index.snapshot().iter().map(|r| r.region()).collect();
    let mut unknown_store = region(1, b"", b"", 2, &[1, 2, 9]);
    unknown_store.leader = Some(11);
    let mut no_leader = good.clone();
    no_leader.leader = None;
    no_leader.epoch.version = 5;
    for bad in [
        unknown_store,
        no_leader,
        region(1, b"z", b"a", 3, &[1, 2, 3]),
        region(1, b"", b"", 0, &[1, 2, 3]),
    ] {
        assert!(
            shard
                .heartbeat(&bad, stats, &stores.at(1), &index, &mut || None)
                .is_err(),
            "{bad:?}"
        );
        let after: Vec<Region> = index.snapshot().iter().map(|r| r.region()).collect();
        assert_eq!(after, before);
        assert_eq!(shard.get(1).map(|r| r.region()), Some(good.clone()));
    }
}

#[test]
fn one_pending_operator_resent_until_done_or_timed_out() {
    let index = RangeIndex::new();
    let cfg = ScheduleConfig {
        operator_timeout_ms: 100,
        ..ScheduleConfig::default()
    };
    let stores = world(&[(1, 0), (2, 0), (3, 0), (4, 0)], cfg);
    let mut shard = Shard::new();
    let stats = RegionStats::default();
    let mut ids = 500..;
    let short = region(1, b"", b"", 1, &[1, 2]);
    let op = shard
        .heartbeat(&short, stats, &stores.at(0), &index, &mut || ids.next())
        .unwrap()
        .operator;
    let Some(Operator::AddPeer(peer)) = op.clone() else {
        panic!("{op:?}")
    };
    assert_eq!(peer.id, 500);
    // Resent while pending, with no new id taken.
    let again = shard
        .heartbeat(&short, stats, &stores.at(50), &index, &mut || ids.next())
        .unwrap();
    assert_eq!(again.operator, op);
    // Timed out: dropped. The report is unchanged, so the heartbeat decides nothing new;
    // the patrol decides afresh (a new peer id).
    let dropped = shard
        .heartbeat(&short, stats, &stores.at(150), &index, &mut || ids.next())
        .unwrap();
    assert_eq!(dropped.operator, None);
    let fresh = shard.patrol(&stores.at(150), 1, None, &mut || ids.next());
    assert!(
        matches!(fresh.as_slice(), [(r, Operator::AddPeer(p))] if r.id == 1 && p.id == 501),
        "{fresh:?}"
    );
    // Done: the leader reports the new peer; nothing more to do.
    let mut done = short.clone();
    done.epoch.conf_ver += 1;
    done.peers.push(Peer {
        id: 501,
        store_id: peer.store_id,
        role: PeerRole::Voter,
    });
    let out = shard
        .heartbeat(&done, stats, &stores.at(160), &index, &mut || ids.next())
        .unwrap();
    assert_eq!(out.operator, None);
    assert!(out.persist.is_some());
    assert_eq!(stores.in_flight.get(crate::placement::OpKind::Replica), 0);
}

#[test]
fn orders_start_operators_and_their_statuses_follow_them() {
    use crate::placement::OpStatus;
    let index = RangeIndex::new();
    let stores = view(&[(1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0)]);
    let mut shard = Shard::new();
    let stats = RegionStats::default();
    let left = region(1, b"", b"m", 1, &[1, 2, 3]);
    let right = region(2, b"m", b"", 1, &[1, 2, 3]);
    for r in [&left, &right] {
        shard
            .heartbeat(r, stats, &stores.at(0), &index, &mut || None)
            .unwrap();
    }
    let c = stores.at(10);
    let mut groups = Groups::default();
    let mut ids = 100..;
    let mut scatter = |shard: &mut Shard, id: u64, group: &str, groups: &mut Groups| {
        let order = Order::Scatter {
            group,
            groups,
            skip_store_limit: false,
        };
        shard.order(id, order, &c, &mut || ids.next())
    };
    // The group's first region stays; the second moves to the stores not picked.
    assert_eq!(
        scatter(&mut shard, 1, "g", &mut groups),
        Ok(Ordered::Unneeded)
    );
    let started = scatter(&mut shard, 2, "g", &mut groups);
    let Ok(Ordered::Started(Some(Operator::AddPeer(p)))) = started else {
        panic!("{started:?}")
    };
    assert_eq!((p.store_id, p.role, p.id), (4, PeerRole::Learner, 100));
    let record = shard.operator_status(2, 10).unwrap();
    assert_eq!(
        (record.desc, record.kind, record.status),
        (SCATTER_DESC, "admin,region,leader", OpStatus::Running)
    );
    // Running: the same scatter is left alone, another group's and a split are refused.
    assert_eq!(
        scatter(&mut shard, 2, "g", &mut groups),
        Ok(Ordered::AlreadyRunning)
    );
    assert_eq!(
        scatter(&mut shard, 2, "h", &mut groups),
        Err(OrderRefused::Running(2))
    );
    let split = |keys: &[&[u8]]| Order::Split {
        keys: keys.iter().map(|k| k.to_vec()).collect(),
    };
    assert_eq!(
        shard.order(2, split(&[b"x"]), &c, &mut || None),
        Err(OrderRefused::Running(2))
    );
    assert_eq!(
        shard.order(9, split(&[b"x"]), &c, &mut || None),
        Err(OrderRefused::NotFound(9))
    );
    // A split takes the keys inside the region, sorted, once each.
    assert_eq!(
        shard.order(1, split(&[b"z", b"m"]), &c, &mut || None),
        Err(OrderRefused::NoSplitKey(1))
    );
    let started = shard.order(1, split(&[b"c", b"a", b"c", b"", b"q"]), &c, &mut || None);
    let want = Operator::Split(Box::new(Split::at(vec![b"a".to_vec(), b"c".to_vec()])));
    assert_eq!(started, Ok(Ordered::Started(Some(want.clone()))));
    // Sent again until the leader reports another range; then it succeeded.
    let again = shard
        .heartbeat(&left, stats, &stores.at(20), &index, &mut || None)
        .unwrap();
    assert_eq!(again.operator, Some(want));
    assert_eq!(
        shard.operator_status(1, 20).map(|r| (r.desc, r.status)),
        Some((SPLIT_DESC, OpStatus::Running))
    );
    index.apply(region(7, b"", b"c", 2, &[1, 2, 3])).unwrap();
    let done = shard
        .heartbeat(
            &region(1, b"c", b"m", 2, &[1, 2, 3]),
            stats,
            &stores.at(30),
            &index,
            &mut || None,
        )
        .unwrap();
    assert_eq!(done.operator, None);
    assert_eq!(
        shard.operator_status(1, 30).map(|r| r.status),
        Some(OpStatus::Success)
    );
    // The scatter not seen done by its deadline timed out.
    let late = stores.cfg.operator_timeout_ms + 10;
    shard
        .heartbeat(&right, stats, &stores.at(late), &index, &mut || None)
        .unwrap();
    assert_eq!(
        shard.operator_status(2, late).map(|r| r.status),
        Some(OpStatus::Timeout)
    );
    assert_eq!(stores.in_flight.get(OpKind::Region), 0);
    // Records of ended operators are forgotten after a while.
    let later = late + crate::placement::RECORD_TTL_MS;
    assert_eq!(shard.operator_status(2, later), None);
}

#[test]
fn the_patrol_starts_what_heartbeats_would_and_goes_round() {
    let index = RangeIndex::new();
    let stores = view(&[(1, 0), (2, 0), (3, 0)]);
    let mut shard = Shard::new();
    let stats = RegionStats::default();
    let bounds: [&[u8]; 4] = [b"", b"b", b"c", b""];
    for id in 1..=3u64 {
        let r = region(id, bounds[id as usize - 1], bounds[id as usize], 1, &[1, 2]);
        shard
            .heartbeat(&r, stats, &stores.at(0), &index, &mut || None)
            .unwrap();
    }
    let mut ids = 900..;
    let first = shard.patrol(&stores.at(1), 2, None, &mut || ids.next());
    assert_eq!(first.len(), 2, "{first:?}");
    // The third region starts; round again, the first two are pushed again.
    let second = shard.patrol(&stores.at(2), 3, None, &mut || ids.next());
    assert_eq!(second.len(), 3, "{second:?}");
    assert_eq!(second[1..], first[..], "pending steps pushed again");
    assert_eq!(stores.in_flight.get(crate::placement::OpKind::Replica), 3);
}

/// A learner its leader reports still catching up is not promoted (its add is not done, and is
/// sent again, as PD does) until a report says it caught up; a pending mark past the report's
/// peers is refused and changes nothing. The report shows the learner pending until then.
#[test]
fn a_learner_catching_up_is_promoted_only_once_caught_up() {
    let index = RangeIndex::new();
    let stores = view(&[(1, 0), (2, 0), (3, 0)]);
    let mut shard = Shard::new();
    let mut ids = 700..;
    let short = region(1, b"", b"", 1, &[1, 2]);
    let stats = RegionStats::default();
    let op = shard
        .heartbeat(&short, stats, &stores.at(0), &index, &mut || ids.next())
        .unwrap()
        .operator;
    let Some(Operator::AddPeer(learner)) = op.clone() else {
        panic!("{op:?}")
    };
    assert_eq!(learner.role, PeerRole::Learner);
    let mut added = short.clone();
    added.epoch.conf_ver += 1;
    added.peers.push(learner.clone());
    let catching_up = RegionStats {
        pending: RegionStats::pending_mask(&added, [learner.id]),
        ..stats
    };
    assert_eq!(catching_up.pending, 0b100);
    for at in [10, 20] {
        let out = shard
            .heartbeat(&added, catching_up, &stores.at(at), &index, &mut || {
                ids.next()
            })
            .unwrap();
        assert_eq!(out.operator, op, "promoted while catching up");
    }
    let shown = shard.report(1).unwrap().pending_peers;
    assert_eq!(&shown[..], &[learner.id], "PD's HTTP API shows it pending");
    let beyond = RegionStats {
        pending: 0b1000,
        ..stats
    };
    let refused = shard.heartbeat(&added, beyond, &stores.at(25), &index, &mut || ids.next());
    assert!(
        matches!(refused, Err(RegionError::Invalid(1, _))),
        "{refused:?}"
    );
    let out = shard
        .heartbeat(&added, stats, &stores.at(30), &index, &mut || ids.next())
        .unwrap();
    let promote = Operator::AddPeer(Peer {
        role: PeerRole::Voter,
        ..learner
    });
    assert_eq!(out.operator, Some(promote));
    assert!(shard.report(1).unwrap().pending_peers.is_empty());
}

#[test]
fn the_patrol_merges_a_small_region_and_the_targets_report_drops_the_source() {
    let cfg = ScheduleConfig {
        split_merge_interval_ms: 1_000,
        ..ScheduleConfig::default()
    };
    let stores = world(&[(1, 0), (2, 0), (3, 0)], cfg);
    let index = RangeIndex::new();
    let mut shard = Shard::new();
    let mut ids = 900..;
    let small = RegionStats {
        approximate_size: 1 << 20,
        approximate_keys: 10,
        ..RegionStats::default()
    };
    let a = region(1, b"", b"b", 1, &[1, 2, 3]);
    let b = region(2, b"b", b"c", 1, &[1, 2, 3]);
    let c = region(3, b"c", b"", 1, &[1, 2, 3]);
    for r in [&a, &b, &c] {
        shard
            .heartbeat(r, small, &stores.at(0), &index, &mut || ids.next())
            .unwrap();
    }
    // Within split-merge-interval of the regions' first reports: nothing.
    assert!(shard
        .patrol(&stores.at(900), 3, Some(&index), &mut || ids.next())
        .is_empty());
    // Without the index (no neighbours), nothing either.
    assert!(shard
        .patrol(&stores.at(5_000), 3, None, &mut || ids.next())
        .is_empty());
    let got = shard.patrol(&stores.at(5_000), 3, Some(&index), &mut || ids.next());
    assert_eq!(got, vec![(a.clone(), Operator::Merge(Box::new(b.clone())))]);
    assert_eq!(stores.in_flight.get(OpKind::Merge), 2);
    // Logged as PD adds the pair: the source's half, then the target's, each with its
    // steps; none before the target's half was placed.
    let added: Vec<_> = shard
        .take_op_events()
        .into_iter()
        .map(|e| {
            let steps = e.op.map(|op| op.steps.len());
            (e.region, e.record.status, e.record.related_merge, steps)
        })
        .collect();
    assert_eq!(
        added,
        vec![
            (1, OpStatus::Running, Some(2), Some(1)),
            (2, OpStatus::Running, Some(1), Some(1))
        ]
    );
    // The target's report of its grown range drops the source and ends the pair.
    let mut grown = b.clone();
    grown.start_key = Vec::new();
    grown.epoch.version = 2;
    let out = shard
        .heartbeat(&grown, small, &stores.at(5_500), &index, &mut || ids.next())
        .unwrap();
    assert_eq!(out.removed, vec![1]);
    assert_eq!(out.operator, None);
    assert!(shard.get(1).is_none());
    assert_eq!(stores.in_flight.get(OpKind::Merge), 0);
}
