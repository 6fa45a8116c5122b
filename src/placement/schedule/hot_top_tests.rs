//! PD's `max-peer-number` in the hot-write scheduler: of a store with more hot peers than the
//! cap, only the hottest are candidates for a move off it, ranked by the hot cache as PD's
//! `filterHotPeers` and `sortHotPeers` rank them.

use super::hot_tests::{patrol_drawn, patrol_once, region, world, NOW, RATE, ZONES};
use super::*;
use crate::placement::Region;

/// Feeds `regions` to the cache at `(bytes, keys)` a second for the cache-hits threshold's
/// full intervals, then ranks the candidates.
fn heat_and_rank(w: &TestCluster, cache: &mut HotCache, regions: &[(Region, (u64, u64))]) {
    let c = w.at(NOW);
    for _ in 0..c.cfg.hot_region_cache_hits_threshold {
        for (r, (bytes, keys)) in regions {
            let flow = WriteFlow {
                bytes: bytes * REPORT_INTERVAL_S,
                keys: keys * REPORT_INTERVAL_S,
                interval_s: REPORT_INTERVAL_S,
            };
            cache.observe(&c, r, flow);
        }
    }
    cache.rank(&c);
}

/// With room for three of a store's four hot peers, the candidates are taken one from each
/// ranking in turn: as peer the hottest by bytes, by keys, then the next by bytes; as leader
/// (keys first) the hottest by keys, by bytes, then the next by keys. So region 2 (second by
/// bytes) is a candidate as peer and not as leader, region 3 (second by keys) the other way
/// round, on every store they share. A store with no more hot peers than the cap keeps them
/// all.
#[test]
fn a_store_over_the_cap_ranks_its_hot_peers_by_each_rate_in_turn() {
    let mut w = world(&ZONES);
    w.cfg.hot_max_peer_number = 3;
    let mut cache = HotCache::new();
    // By bytes 1, 2, 3, 4; by keys 4, 3, 2, 1; all led from store 1. Region 5 alone on
    // stores 4 to 6, the coolest.
    let regions: Vec<(Region, (u64, u64))> = vec![
        (region(1, &[1, 2, 3]), (4 * RATE, 10)),
        (region(2, &[1, 2, 3]), (3 * RATE, 20)),
        (region(3, &[1, 2, 3]), (2 * RATE, 30)),
        (region(4, &[1, 2, 3]), (RATE, 4000)),
        (region(5, &[4, 5, 6]), (RATE / 2, 5)),
    ];
    heat_and_rank(&w, &mut cache, &regions);
    let top: Vec<(bool, u16)> = regions
        .iter()
        .map(|(r, _)| {
            let h = cache.get(r).expect("hot");
            (h.top_leader, h.top_peers & 0b111)
        })
        .collect();
    assert_eq!(
        top,
        vec![
            (true, 0b111),
            (false, 0b111),
            (true, 0),
            (true, 0b111),
            (true, 0b111)
        ]
    );
}

/// Store 1 leads four hot regions (4, 3, 2 and 1 MiB/s) whose followers are on cool stores:
/// without the cap any of them would hand its lead to a follower. With room for two, the two
/// coolest are not candidates, as leader or as peer, and get no operator; the hottest, drawn
/// for a leader transfer, does.
#[test]
fn only_a_stores_hottest_peers_move_off_it() {
    let mut w = world(&ZONES);
    w.cfg.hot_max_peer_number = 2;
    let mut cache = HotCache::new();
    let regions: Vec<(Region, (u64, u64))> = (1..=4u64)
        .map(|i| {
            let bytes = (5 - i) * RATE;
            (region(i, &[1, 2, 3]), (bytes, bytes / 1024))
        })
        .collect();
    heat_and_rank(&w, &mut cache, &regions);
    for (r, _) in &regions[2..] {
        assert_eq!(patrol_once(&w, &cache, r), None, "region {}", r.id);
    }
    let op = patrol_drawn(&w, &cache, &regions[0].0, false).expect("a hot operator");
    assert_eq!(op.kind, OpKind::Hot);
    assert!(
        matches!(op.steps.as_slice(), [Step::TransferLeader(p)] if p.store_id == 2 || p.store_id == 3),
        "{:?}",
        op.steps
    );
}
