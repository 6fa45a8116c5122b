//! P1 and P2 as properties: random histories of splits, merges and conf changes, with every
//! report delivered and old reports replayed at random. The map never covers a key twice,
//! every stale report is refused without a change, and the current reports rebuild the truth.

use proptest::prelude::*;

use super::*;

fn peers(stores: &[u64], first_peer: u64) -> Vec<Peer> {
    stores
        .iter()
        .enumerate()
        .map(|(i, &s)| Peer {
            id: first_peer + i as u64,
            store_id: s,
            role: PeerRole::Voter,
        })
        .collect()
}

fn region(id: u64, start: &[u8], end: &[u8], epoch: Epoch, stores: &[u64]) -> Region {
    let peers = peers(stores, id * 100);
    Region {
        id,
        start_key: start.to_vec(),
        end_key: end.to_vec(),
        epoch,
        leader: Some(peers[0].id),
        peers,
    }
}

#[derive(Debug, Clone)]
enum Op {
    Split(usize, u8),
    Merge(usize),
    ConfChange(usize, u64),
    Replay(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<usize>(), 1u8..255).prop_map(|(i, k)| Op::Split(i, k)),
        1 => any::<usize>().prop_map(Op::Merge),
        1 => (any::<usize>(), 4u64..9).prop_map(|(i, s)| Op::ConfChange(i, s)),
        3 => any::<usize>().prop_map(Op::Replay),
    ]
}

fn assert_no_overlap(map: &RegionMap) -> Result<(), TestCaseError> {
    let regions: Vec<_> = map.iter().collect();
    for pair in regions.windows(2) {
        prop_assert!(
            !pair[0].end_key.is_empty() && pair[0].end_key <= pair[1].start_key,
            "overlap: {:?} {:?}",
            pair[0],
            pair[1]
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn histories_keep_p1_and_p2(
        ops in proptest::collection::vec(op(), 1..80),
        split_right_first in any::<bool>(),
        segment in 1usize..20,
        probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3), 8),
        follow_from in 0usize..80,
    ) {
        let mut truth = vec![region(1, b"", b"", Epoch { conf_ver: 1, version: 1 }, &[1, 2, 3])];
        let mut history = truth.clone();
        let mut map = RegionMap::new();
        map.apply(truth[0].clone()).unwrap();
        // The shared index must agree with the model map at every step; tiny segments put
        // segment boundaries everywhere.
        let index = RangeIndex::with_segment_size(segment);
        index.apply(truth[0].clone()).unwrap();
        let mut next_id = 2u64;
        // Followers as the region syncer makes them: one starts from a snapshot taken at step
        // `follow_from` and replays the log at the end, one replays it after every step.
        let late = RangeIndex::with_segment_size(segment);
        let mut late_from = None;
        let eager = RangeIndex::with_segment_size(segment);
        let mut eager_at = follow(&index, &eager, None);

        for (step, op) in ops.into_iter().enumerate() {
            if step == follow_from {
                let (snap, stream, next) = index.snapshot_at();
                late.reset(snap.iter().map(|r| r.region()).collect());
                late_from = Some((stream, next));
            }
            let mut reports = Vec::new();
            match op {
                Op::Split(i, k) => {
                    let i = i % truth.len();
                    let r = truth[i].clone();
                    let key = vec![k];
                    if !(r.contains(&key) && key > r.start_key) {
                        continue;
                    }
                    let epoch = Epoch { conf_ver: r.epoch.conf_ver, version: r.epoch.version + 1 };
                    let left = region(next_id, &r.start_key, &key, epoch, &[1, 2, 3]);
                    let right = region(r.id, &key, &r.end_key, epoch, &[1, 2, 3]);
                    next_id += 1;
                    truth.splice(i..=i, [left.clone(), right.clone()]);
                    reports = if split_right_first { vec![right, left] } else { vec![left, right] };
                }
                Op::Merge(i) => {
                    if truth.len() < 2 {
                        continue;
                    }
                    let i = i % (truth.len() - 1);
                    let (a, b) = (truth[i].clone(), truth[i + 1].clone());
                    let version = a.epoch.version.max(b.epoch.version) + 1;
                    let merged = region(b.id, &a.start_key, &b.end_key, Epoch { conf_ver: b.epoch.conf_ver, version }, &[1, 2, 3]);
                    truth.splice(i..=i + 1, [merged.clone()]);
                    reports = vec![merged];
                }
                Op::ConfChange(i, store) => {
                    let i = i % truth.len();
                    let mut r = truth[i].clone();
                    r.epoch.conf_ver += 1;
                    r.peers[2].store_id = store;
                    truth[i] = r.clone();
                    reports = vec![r];
                }
                Op::Replay(j) => {
                    let old = history[j % history.len()].clone();
                    let current = truth.contains(&old);
                    let before = map.clone();
                    let index_result = index.apply(old.clone());
                    prop_assert_eq!(index_result.is_ok(), map.clone().apply(old.clone()).is_ok());
                    let result = map.apply(old);
                    if current {
                        prop_assert!(result.is_ok(), "{result:?}");
                        prop_assert_eq!(&map, &before, "a repeat of the current state changes nothing");
                    } else {
                        prop_assert!(matches!(result, Err(RegionError::StaleEpoch { .. })), "stale replay accepted: {result:?}");
                        prop_assert_eq!(&map, &before, "a refused report changed the map");
                    }
                }
            }
            for r in reports {
                history.push(r.clone());
                let in_index = index.apply(r.clone());
                prop_assert!(in_index.is_ok(), "{in_index:?}");
                let applied = map.apply(r);
                prop_assert!(applied.is_ok(), "{applied:?}");
                prop_assert_eq!(&in_index.unwrap().removed, &applied.unwrap().removed);
                assert_no_overlap(&map)?;
            }
            assert_same(&index, &map, &probes)?;
            eager_at = follow(&index, &eager, eager_at);
            assert_same(&eager, &map, &probes)?;
        }
        if let Some(from) = late_from {
            // A stale copy taken over by a new leader and reconciled with the stored regions
            // (the newer ones applied) reads as the truth...
            let stale = RangeIndex::with_segment_size(segment);
            stale.reset(late.snapshot().iter().map(|r| r.region()).collect());
            stale.apply_newer(index.snapshot().iter().map(|r| r.region()).collect());
            assert_same(&stale, &map, &probes)?;
            // ...and so does the copy brought up by the log.
            follow(&index, &late, Some(from));
            assert_same(&late, &map, &probes)?;
        }
        // Every current state delivered once more: the map is the truth.
        for r in &truth {
            map.apply(r.clone()).unwrap();
        }
        assert_no_overlap(&map)?;
        prop_assert_eq!(map.iter().cloned().collect::<Vec<_>>(), truth.clone());
        for r in &truth {
            let key = r.start_key.clone();
            prop_assert_eq!(map.locate(&key).map(|x| x.id), Some(r.id));
        }
        // A new leader's load rebuilds the same index from the stored regions in any order.
        let reloaded = RangeIndex::with_segment_size(segment);
        let mut stored: Vec<Region> = index.snapshot().iter().map(|r| r.region()).collect();
        stored.reverse();
        prop_assert_eq!(reloaded.reset(stored), 0);
        assert_same(&reloaded, &map, &probes)?;
    }
}

/// Brings `follower` up to `leader` as the region syncer does: from a snapshot when `at` (the
/// leader's log stream and the follower's next index) is not in the leader's log, then by
/// applying the logged routes in order. Returns where the follower is now.
fn follow(
    leader: &RangeIndex,
    follower: &RangeIndex,
    at: Option<(u64, u64)>,
) -> Option<(u64, u64)> {
    let records =
        at.map(|(stream, next)| (stream, next, leader.changes_since(stream, next, usize::MAX)));
    match records {
        Some((stream, next, Since::Records(routes))) => {
            let n = routes.len() as u64;
            for route in routes {
                // The leader's order of acceptance is the follower's: each applies.
                follower
                    .apply(route.region())
                    .expect("a logged route applies in order");
            }
            Some((stream, next + n))
        }
        _ => {
            let (snap, stream, next) = leader.snapshot_at();
            follower.reset(snap.iter().map(|r| r.region()).collect());
            Some((stream, next))
        }
    }
}

/// The index answers every read exactly as the model map does.
fn assert_same(
    index: &RangeIndex,
    map: &RegionMap,
    probes: &[Vec<u8>],
) -> Result<(), TestCaseError> {
    let snap = index.snapshot();
    let ids: Vec<u64> = snap.iter().map(|r| r.id()).collect();
    let model: Vec<u64> = map.iter().map(|r| r.id).collect();
    prop_assert_eq!(&ids, &model);
    prop_assert_eq!(snap.len(), map.len());
    for r in map.iter() {
        prop_assert_eq!(index.get(r.id).map(|x| x.region()), Some(r.clone()));
    }
    let mut many = Vec::new();
    let doubled: Vec<&Vec<u8>> = probes.iter().chain(probes.iter()).collect();
    snap.locate_many(&doubled, &mut many);
    let one_by_one: Vec<_> = doubled
        .iter()
        .map(|k| snap.locate(k).map(|r| r.id()))
        .collect();
    prop_assert_eq!(
        many.iter().map(|r| r.map(|r| r.id())).collect::<Vec<_>>(),
        one_by_one
    );
    for key in probes {
        prop_assert_eq!(
            snap.locate(key).map(|r| r.id()),
            map.locate(key).map(|r| r.id),
            "locate {:?}",
            key
        );
        prop_assert_eq!(
            snap.prev(key).map(|r| r.id()),
            map.prev(key).map(|r| r.id),
            "prev {:?}",
            key
        );
        let mut upper = key.clone();
        upper.push(0x40);
        for (end, limit) in [
            (&b""[..], 0),
            (&upper[..], 0),
            (&b""[..], 2),
            (&b"\x01"[..], 0),
        ] {
            let got: Vec<u64> = snap.scan(key, end, limit).iter().map(|r| r.id()).collect();
            let want: Vec<u64> = map.scan(key, end, limit).iter().map(|r| r.id).collect();
            prop_assert_eq!(got, want, "scan {:?}..{:?}", key, end);
        }
    }
    Ok(())
}

#[test]
fn malformed_reports_are_refused_and_change_nothing() {
    let mut map = RegionMap::new();
    map.apply(region(
        1,
        b"",
        b"m",
        Epoch {
            conf_ver: 1,
            version: 1,
        },
        &[1, 2, 3],
    ))
    .unwrap();
    map.apply(region(
        2,
        b"m",
        b"",
        Epoch {
            conf_ver: 1,
            version: 1,
        },
        &[1, 2, 3],
    ))
    .unwrap();
    let before = map.clone();
    let good = region(
        3,
        b"x",
        b"y",
        Epoch {
            conf_ver: 1,
            version: 5,
        },
        &[1, 2, 3],
    );
    let mut learner_leader = good.clone();
    learner_leader.peers[0].role = PeerRole::Learner;
    let bad = vec![
        // end before start
        Region {
            end_key: b"a".to_vec(),
            start_key: b"b".to_vec(),
            ..good.clone()
        },
        // empty range
        Region {
            end_key: b"x".to_vec(),
            ..good.clone()
        },
        Region {
            peers: vec![],
            leader: None,
            ..good.clone()
        },
        // an absurd peer count
        Region {
            peers: peers(&(1..=17).collect::<Vec<_>>(), 500),
            leader: None,
            ..good.clone()
        },
        // two peers on one store
        Region {
            peers: peers(&[1, 1, 2], 500),
            leader: None,
            ..good.clone()
        },
        // an id never allocated
        Region {
            id: 0,
            ..good.clone()
        },
        // a leader that is not a peer, and one that is a learner
        Region {
            leader: Some(999),
            ..good.clone()
        },
        learner_leader,
    ];
    for r in bad {
        assert!(
            matches!(map.apply(r.clone()), Err(RegionError::Invalid(..))),
            "{r:?}"
        );
        assert_eq!(map, before);
    }
    // Stale: lower version than a region it overlaps, and lower conf_ver than itself.
    let stale = region(
        9,
        b"a",
        b"c",
        Epoch {
            conf_ver: 1,
            version: 0,
        },
        &[1, 2, 3],
    );
    assert!(matches!(
        map.apply(stale),
        Err(RegionError::StaleEpoch { .. })
    ));
    let older_conf = region(
        2,
        b"m",
        b"",
        Epoch {
            conf_ver: 0,
            version: 1,
        },
        &[1, 2, 3],
    );
    assert!(matches!(
        map.apply(older_conf),
        Err(RegionError::StaleEpoch { .. })
    ));
    assert_eq!(map, before);
}

#[test]
fn routing_lookups() {
    let mut map = RegionMap::new();
    let e = Epoch {
        conf_ver: 1,
        version: 1,
    };
    map.apply(region(1, b"", b"g", e, &[1, 2, 3])).unwrap();
    map.apply(region(2, b"g", b"p", e, &[1, 2, 3])).unwrap();
    map.apply(region(3, b"p", b"", e, &[1, 2, 3])).unwrap();
    assert_eq!(map.locate(b"").map(|r| r.id), Some(1));
    assert_eq!(map.locate(b"g").map(|r| r.id), Some(2));
    assert_eq!(map.locate(b"zzz").map(|r| r.id), Some(3));
    assert_eq!(map.prev(b"h").map(|r| r.id), Some(1));
    assert_eq!(map.prev(b"a").map(|r| r.id), None);
    let ids: Vec<_> = map.scan(b"h", b"q", 0).iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![2, 3]);
    let ids: Vec<_> = map.scan(b"", b"", 2).iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![1, 2]);
}

/// Readers on other threads, while one writer splits regions over and over, always see a
/// whole key space: every key in exactly one region, each region ending where the next starts.
#[test]
fn readers_never_see_a_gap_or_an_overlap_during_splits() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    let index = Arc::new(RangeIndex::with_segment_size(4));
    let e = Epoch {
        conf_ver: 1,
        version: 1,
    };
    index.apply(region(1, b"", b"", e, &[1, 2, 3])).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (index, stop, checks) = (index.clone(), stop.clone(), checks.clone());
            std::thread::spawn(move || {
                let mut checked = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let snap = index.snapshot();
                    let all: Vec<_> = snap.iter().map(|r| r.region()).collect();
                    assert!(all[0].start_key.is_empty());
                    assert!(all[all.len() - 1].end_key.is_empty());
                    for pair in all.windows(2) {
                        assert_eq!(pair[0].end_key, pair[1].start_key, "gap or overlap");
                    }
                    for k in 0..=255u8 {
                        assert!(snap.locate(&[k, 1]).is_some(), "no region for {k}");
                    }
                    checked += 1;
                    checks.fetch_add(1, Ordering::Relaxed);
                }
                checked
            })
        })
        .collect();
    // Split every region at its midpoint byte until 200 exist.
    let mut next = 2u64;
    while index.len() < 200 {
        // Each pass of splits starts only after a reader finished a check since the last one,
        // however the threads are scheduled, so reads and writes interleave.
        let seen = checks.load(Ordering::Relaxed);
        while checks.load(Ordering::Relaxed) == seen {
            std::thread::yield_now();
        }
        let snap = index.snapshot();
        let regions: Vec<Region> = snap.iter().map(|r| r.region()).collect();
        drop(snap);
        for r in regions {
            let lo = r.start_key.first().copied().unwrap_or(0) as u16;
            let hi = r.end_key.first().copied().map_or(256, |b| b as u16);
            let mid = (lo + hi) / 2;
            let key = if mid as u8 > lo as u8 && hi - lo >= 2 {
                vec![mid as u8]
            } else {
                let mut k = r.start_key.clone();
                k.push(128);
                k
            };
            if !r.contains(&key) || key <= r.start_key {
                continue;
            }
            let epoch = Epoch {
                conf_ver: 1,
                version: r.epoch.version + 1,
            };
            let left = region(next, &r.start_key, &key, epoch, &[1, 2, 3]);
            let right = region(r.id, &key, &r.end_key, epoch, &[1, 2, 3]);
            next += 1;
            // Both halves in one change set: readers see the split whole.
            for result in index.apply_batch(vec![right, left]) {
                result.unwrap();
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
}
