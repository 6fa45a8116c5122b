//! The shard's running store totals (PD's store status counts) against a count made afresh,
//! through every change a heartbeat makes.

use super::tests::{region, view};
use super::*;
use crate::placement::{Peer, PeerRole, Region};

/// What the shard's entries put on each store, counted afresh: what the running totals must
/// always equal.
fn recount(shard: &Shard) -> StoreTotals {
    let mut t = StoreTotals::default();
    for e in shard.regions.values() {
        t.add(&e.route, e.sizes.mib());
    }
    t
}

/// PD's store status counts, from its region tree: every region with a peer on a store, and
/// those it leads, with their sizes in MiB. Kept as running sums through every change a
/// heartbeat makes (size, leader, peers, split, merge) and a reset, and always equal to a
/// count made afresh.
#[test]
fn store_totals_follow_every_change_to_the_regions() {
    let stores = view(&[(1, 0), (2, 0), (3, 0), (4, 0)]);
    let index = RangeIndex::new();
    let mut shard = Shard::new();
    let mut ids = 900..;
    let sized = |mib: u64| RegionStats {
        approximate_size: mib << 20,
        approximate_keys: mib * 1000,
        ..RegionStats::default()
    };
    let mut beat = |shard: &mut Shard, r: &Region, s: RegionStats| {
        shard
            .heartbeat(r, s, &stores.at(0), &index, &mut || ids.next())
            .unwrap();
        assert_eq!(shard.totals, recount(shard), "after {r:?}");
    };
    let total = |regions, leaders, region_size_mib, leader_size_mib| StoreTotal {
        regions,
        leaders,
        region_size_mib,
        leader_size_mib,
    };
    let mut left = region(1, b"", b"m", 1, &[1, 2, 3]);
    let mut right = region(2, b"m", b"", 1, &[2, 3, 4]);
    beat(&mut shard, &left, sized(96));
    beat(&mut shard, &right, sized(10));
    let t = shard.store_totals();
    assert_eq!(t.get(1), total(1, 1, 96, 96));
    assert_eq!(t.get(2), total(2, 1, 106, 10));
    assert_eq!(t.get(3), total(2, 0, 106, 0));
    assert_eq!(t.get(4), total(1, 0, 10, 0));

    // The size grows; an unmeasured report keeps it.
    beat(&mut shard, &left, sized(100));
    beat(&mut shard, &left, RegionStats::default());
    assert_eq!(shard.store_totals().get(1), total(1, 1, 100, 100));

    // The leader moves to store 2.
    left.leader = Some(left.peers[1].id);
    beat(&mut shard, &left, RegionStats::default());
    assert_eq!(shard.store_totals().get(1), total(1, 0, 100, 0));
    assert_eq!(shard.store_totals().get(2), total(2, 2, 110, 110));

    // A peer moves from store 3 to store 4.
    left.epoch.conf_ver += 1;
    left.peers[2] = Peer {
        id: 14,
        store_id: 4,
        role: PeerRole::Voter,
    };
    beat(&mut shard, &left, sized(100));
    assert_eq!(shard.store_totals().get(3), total(1, 0, 10, 0));
    assert_eq!(shard.store_totals().get(4), total(2, 0, 110, 0));

    // The right region takes in the left (a merge): the left is gone from every store.
    right.start_key = Vec::new();
    right.epoch.version += 2;
    beat(&mut shard, &right, sized(110));
    assert!(shard.get(1).is_none());
    assert_eq!(shard.store_totals().get(1), StoreTotal::default());
    assert_eq!(shard.store_totals().get(2), total(1, 1, 110, 110));
    assert_eq!(shard.store_totals().iter().count(), 3, "stores 2, 3 and 4");

    // It splits again, as its leader reports: two regions on the same stores.
    let mut split_left = region(3, b"", b"f", right.epoch.version + 1, &[2, 3, 4]);
    split_left.epoch.conf_ver = right.epoch.conf_ver;
    right.start_key = b"f".to_vec();
    right.epoch.version += 1;
    beat(&mut shard, &right, sized(60));
    beat(&mut shard, &split_left, sized(50));
    assert_eq!(shard.store_totals().get(2), total(2, 2, 110, 110));

    // A new term's load: the routes count on their stores, sizes not yet reported.
    let routes: Vec<_> = [1u64, 2, 3]
        .iter()
        .filter_map(|id| index.get(*id))
        .collect();
    shard.reset(routes.clone(), &stores.at(0));
    assert_eq!(shard.totals, recount(&shard));
    assert_eq!(shard.store_totals().get(3), total(2, 0, 0, 0));

    // The same load a chunk at a time, as a term's shard takes it (yielding its core between
    // chunks), one route taken twice: the same regions, each counted once.
    let mut chunked = Shard::new();
    chunked.reset(std::iter::empty(), &stores.at(0));
    chunked.reserve(routes.len());
    chunked.take_in(routes[..1].to_vec());
    chunked.take_in(routes.clone());
    assert_eq!(chunked.len(), shard.len());
    assert_eq!(chunked.totals, recount(&chunked));
    assert_eq!(chunked.totals, shard.totals);
}
