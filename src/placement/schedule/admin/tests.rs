use super::*;
use crate::placement::schedule::{up_stores, TestCluster};
use crate::placement::{Epoch, MergeStep, Region, ScheduleConfig, StoreStats};

/// Stores `stores` up, heartbeating at time 0, then those in `tombstones` decommissioned.
fn world(stores: &[u64], tombstones: &[u64]) -> TestCluster {
    let mut map = up_stores(stores.iter().map(|&id| (id, StoreStats::default())));
    for &id in tombstones {
        map.decommission(id).unwrap();
        map.heartbeat(id, StoreStats::default(), 0).unwrap();
    }
    TestCluster::new(&map, ScheduleConfig::default())
}

/// Region 1 over `[a, z)` with a peer `10 + s` on each store, led by the first.
fn region(stores: &[(u64, PeerRole)]) -> Region {
    let peers: Vec<Peer> = stores
        .iter()
        .map(|&(s, role)| Peer {
            id: 10 + s,
            store_id: s,
            role,
        })
        .collect();
    Region {
        id: 1,
        start_key: b"a".to_vec(),
        end_key: b"z".to_vec(),
        epoch: Epoch {
            conf_ver: 3,
            version: 2,
        },
        leader: Some(peers[0].id),
        peers,
    }
}

fn voters(stores: &[u64]) -> Region {
    let v: Vec<(u64, PeerRole)> = stores.iter().map(|s| (*s, PeerRole::Voter)).collect();
    region(&v)
}

fn plan(w: &TestCluster, r: &Region, ask: AdminAsk) -> Result<AdminPlan, AdminRefused> {
    let input = RegionInput {
        region: r,
        pending_peers: &[],
        size_mib: 1,
        hot: None,
    };
    admin_plan(&w.at(1000), &input, &ask)
}

fn p(id: u64, store_id: u64, role: PeerRole) -> Peer {
    Peer { id, store_id, role }
}

const V: PeerRole = PeerRole::Voter;
const L: PeerRole = PeerRole::Learner;

fn refused(why: &str) -> Result<AdminPlan, AdminRefused> {
    Err(AdminRefused::Build(why.into()))
}

#[test]
fn transfer_leader_as_pd_checks_it() {
    let w = world(&[1, 2, 3, 4], &[]);
    let r = region(&[(1, V), (2, V), (3, L)]);
    let got = plan(&w, &r, AdminAsk::TransferLeader { store: 2 }).unwrap();
    assert_eq!(got.desc, "admin-transfer-leader");
    assert_eq!(got.kind, "admin,leader");
    assert_eq!(got.plan.kind, OpKind::Admin);
    assert_eq!(got.plan.steps, vec![Step::TransferLeader(p(12, 2, V))]);
    for (store, why) in [
        (3, "region has no voter in store 3"),
        (4, "region has no voter in store 4"),
        (1, "no operator step is built"),
    ] {
        assert_eq!(
            plan(&w, &r, AdminAsk::TransferLeader { store }),
            refused(why)
        );
    }
}

#[test]
fn adding_a_peer_checks_the_store_as_pd_does() {
    let w = world(&[1, 2, 3, 4, 5], &[5]);
    let r = voters(&[1, 2, 3]);
    let got = plan(&w, &r, AdminAsk::AddPeer { store: 4 }).unwrap();
    let new = p(NEW_PEER, 4, L);
    assert_eq!(
        got.plan.steps,
        vec![
            Step::AddLearner(new.clone()),
            Step::PromoteLearner(new.clone())
        ]
    );
    assert_eq!((got.desc, got.kind), ("admin-add-peer", "admin,region"));
    let got = plan(&w, &r, AdminAsk::AddLearner { store: 4 }).unwrap();
    assert_eq!(got.plan.steps, vec![Step::AddLearner(new)]);
    assert_eq!(got.desc, "admin-add-learner");
    assert_eq!(
        plan(&w, &r, AdminAsk::AddPeer { store: 2 }),
        refused("region already has peer in store 2")
    );
    assert_eq!(
        plan(&w, &r, AdminAsk::AddLearner { store: 9 }),
        Err(AdminRefused::StoreNotFound(9))
    );
    assert_eq!(
        plan(&w, &r, AdminAsk::AddPeer { store: 5 }),
        Err(AdminRefused::StoreRemoved(5))
    );
    // Silent for more than ten minutes: unhealthy.
    let input = RegionInput {
        region: &r,
        pending_peers: &[],
        size_mib: 1,
        hot: None,
    };
    let late = admin_plan(
        &w.at(STORE_UNHEALTHY_MS + 1),
        &input,
        &AdminAsk::AddPeer { store: 4 },
    );
    assert_eq!(late, Err(AdminRefused::StoreUnhealthy(4)));
}

#[test]
fn removing_the_leaders_peer_moves_the_leader_first() {
    let w = world(&[1, 2, 3], &[]);
    let r = voters(&[1, 2, 3]);
    let got = plan(&w, &r, AdminAsk::RemovePeer { store: 1 }).unwrap();
    assert_eq!(
        got.plan.steps,
        vec![
            Step::TransferLeader(p(12, 2, V)),
            Step::RemovePeer(p(11, 1, V))
        ]
    );
    assert_eq!(
        (got.desc, got.kind),
        ("admin-remove-peer", "admin,region,leader")
    );
    let got = plan(&w, &r, AdminAsk::RemovePeer { store: 3 }).unwrap();
    assert_eq!(got.plan.steps, vec![Step::RemovePeer(p(13, 3, V))]);
    assert_eq!(got.kind, "admin,region");
    assert_eq!(
        plan(&w, &r, AdminAsk::RemovePeer { store: 4 }),
        refused("region has no peer in store 4")
    );
    assert_eq!(
        plan(&w, &voters(&[1]), AdminAsk::RemovePeer { store: 1 }),
        refused("cannot create operator: target peers have no voter")
    );
}

#[test]
fn moving_a_peer_adds_before_it_removes() {
    let w = world(&[1, 2, 3, 4], &[]);
    let r = voters(&[1, 2, 3]);
    let new = p(NEW_PEER, 4, L);
    let got = plan(&w, &r, AdminAsk::TransferPeer { from: 3, to: 4 }).unwrap();
    assert_eq!(
        got.plan.steps,
        vec![
            Step::AddLearner(new.clone()),
            Step::PromoteLearner(new.clone()),
            Step::RemovePeer(p(13, 3, V)),
        ]
    );
    assert_eq!((got.desc, got.kind), ("admin-move-peer", "admin,region"));
    let got = plan(&w, &r, AdminAsk::TransferPeer { from: 1, to: 4 }).unwrap();
    assert_eq!(got.plan.steps[2], Step::TransferLeader(p(12, 2, V)));
    assert_eq!(got.kind, "admin,region,leader");
    assert_eq!(
        plan(&w, &r, AdminAsk::TransferPeer { from: 2, to: 3 }),
        refused("cannot add peer store_id:3 : already have peer id:13 store_id:3 ")
    );
    assert_eq!(
        plan(&w, &r, AdminAsk::TransferPeer { from: 4, to: 3 }),
        refused("region has no peer in store 4")
    );
    assert_eq!(
        plan(&w, &r, AdminAsk::TransferPeer { from: 1, to: 7 }),
        Err(AdminRefused::StoreNotFound(7))
    );
}

#[test]
fn transfer_region_ends_with_the_stores_and_roles_asked() {
    let w = world(&[1, 2, 3, 4, 5], &[]);
    let r = voters(&[1, 2, 3]);
    let ask = |pairs: &[(u64, Option<AskedRole>)]| AdminAsk::TransferRegion {
        stores: pairs.iter().copied().collect(),
    };
    use AskedRole::*;
    assert_eq!(
        plan(&w, &r, ask(&[(2, Some(Voter)), (4, None)])),
        refused("transfer region without peer role is not supported when placement rules enabled")
    );
    assert_eq!(
        plan(&w, &r, ask(&[(2, Some(Leader)), (4, Some(Leader))])),
        refused("region cannot have multiple leaders")
    );
    assert_eq!(
        plan(&w, &r, ask(&[(2, Some(Learner))])),
        refused("region need at least 1 voter or leader")
    );
    assert_eq!(
        plan(&w, &r, ask(&[(2, Some(Voter)), (9, Some(Voter))])),
        Err(AdminRefused::StoreNotFound(9))
    );
    // Stores 1, 2, 3 to 2, 4 (leader), 5 (learner): add 4 and 5, move the leader off 1
    // to 4, remove 1 and 3.
    let got = plan(
        &w,
        &r,
        ask(&[(2, Some(Follower)), (4, Some(Leader)), (5, Some(Learner))]),
    )
    .unwrap();
    let four = p(NEW_PEER, 4, L);
    assert_eq!(
        got.plan.steps,
        vec![
            Step::AddLearner(four.clone()),
            Step::PromoteLearner(four),
            Step::AddLearner(p(NEW_PEER, 5, L)),
            Step::TransferLeader(p(NEW_PEER, 4, V)),
            Step::RemovePeer(p(11, 1, V)),
            Step::RemovePeer(p(13, 3, V)),
        ]
    );
    assert_eq!(
        (got.desc, got.kind),
        ("admin-move-region", "admin,region,leader")
    );
    // The same stores, the leader asked elsewhere: a transfer alone.
    let got = plan(
        &w,
        &r,
        ask(&[(1, Some(Voter)), (2, Some(Voter)), (3, Some(Leader))]),
    )
    .unwrap();
    assert_eq!(got.plan.steps, vec![Step::TransferLeader(p(13, 3, V))]);
    assert_eq!(got.kind, "admin,leader");
    assert_eq!(
        plan(
            &w,
            &r,
            ask(&[(1, Some(Leader)), (2, Some(Voter)), (3, Some(Voter))])
        ),
        refused("no operator step is built")
    );
}

#[test]
fn a_split_keeps_the_keys_inside_the_region() {
    let w = world(&[1, 2, 3], &[]);
    let r = voters(&[1, 2, 3]);
    let keys = |ks: &[&[u8]]| AdminAsk::Split {
        policy: SplitPolicy::UseKey,
        keys: ks.iter().map(|k| k.to_vec()).collect(),
    };
    let got = plan(&w, &r, keys(&[b"m", b"c", b"m", b"a", b"zz"])).unwrap();
    let Step::Split(s) = &got.plan.steps[0] else {
        panic!("{got:?}")
    };
    assert_eq!(s.keys, vec![b"c".to_vec(), b"m".to_vec()]);
    assert_eq!(
        (s.start_key.as_slice(), s.end_key.as_slice()),
        (&b"a"[..], &b"z"[..])
    );
    assert_eq!((got.desc, got.kind), ("admin-split-region", "admin"));
    assert_eq!(s.policy, SplitPolicy::UseKey);
    assert_eq!(
        plan(&w, &r, keys(&[b"a", b"z"])),
        refused("no split key lies inside region 1")
    );
}

#[test]
fn a_split_by_scan_or_approximate_leaves_the_key_to_the_leader() {
    let w = world(&[1, 2, 3], &[]);
    let r = voters(&[1, 2, 3]);
    for policy in [SplitPolicy::Scan, SplitPolicy::Approximate] {
        // Keys given with these policies are not read, as PD reads them for USEKEY only.
        let ask = AdminAsk::Split {
            policy,
            keys: vec![b"zz".to_vec()],
        };
        let got = plan(&w, &r, ask).unwrap();
        let want = SplitStep {
            start_key: b"a".to_vec(),
            end_key: b"z".to_vec(),
            policy,
            keys: vec![],
        };
        assert_eq!(got.plan.steps, vec![Step::Split(Box::new(want))]);
        assert_eq!((got.desc, got.kind), ("admin-split-region", "admin"));
    }
}

/// Region `id` over `[start, end)` with voters `10 * id + s` on `stores`, led by the first.
fn ranged(id: u64, (start, end): (&[u8], &[u8]), stores: &[u64]) -> Region {
    let peers: Vec<Peer> = stores.iter().map(|&s| p(10 * id + s, s, V)).collect();
    Region {
        id,
        start_key: start.to_vec(),
        end_key: end.to_vec(),
        epoch: Epoch {
            conf_ver: 3,
            version: 2,
        },
        leader: Some(peers[0].id),
        peers,
    }
}

fn merge_into(target: &Region, pending: &[u64]) -> AdminAsk {
    AdminAsk::Merge {
        target: Box::new(MergeTarget {
            region: target.clone(),
            pending: pending.to_vec(),
            size_mib: 1,
            runs_admin: false,
        }),
    }
}

fn merge_step(source: &Region, target: &Region) -> Step {
    Step::Merge(Box::new(MergeStep {
        source: source.clone(),
        target: target.clone(),
        passive: false,
    }))
}

#[test]
fn a_merge_needs_healthy_adjacent_regions_as_pd_checks_them() {
    let w = world(&[1, 2, 3, 4], &[]);
    let source = ranged(2, (b"a", b"m"), &[1, 2, 3]);
    let target = ranged(3, (b"m", b""), &[1, 2, 3]);
    // Peers on the same stores: the merge alone.
    let got = plan(&w, &source, merge_into(&target, &[])).unwrap();
    assert_eq!(got.desc, "admin-merge-region");
    assert_eq!(got.kind, "admin");
    assert_eq!(got.plan.kind, OpKind::Admin);
    assert_eq!(got.plan.steps, vec![merge_step(&source, &target)]);
    // Into the region before it, too.
    let before = ranged(4, (b"", b"a"), &[1, 2, 3]);
    assert!(plan(&w, &source, merge_into(&before, &[])).is_ok());

    // Not touching; the first and the last region meet at no key.
    let apart = ranged(5, (b"n", b""), &[1, 2, 3]);
    let first = ranged(6, (b"", b"c"), &[1, 2, 3]);
    let last = ranged(7, (b"x", b""), &[1, 2, 3]);
    for (s, t) in [(&source, &apart), (&first, &last), (&last, &first)] {
        assert_eq!(
            plan(&w, s, merge_into(t, &[])),
            Err(AdminRefused::NotAdjacent)
        );
    }
    // A pending peer, a learner, a missing replica: the source is checked first.
    assert_eq!(
        plan(&w, &source, merge_into(&target, &[32])),
        Err(AdminRefused::AbnormalPeer(3))
    );
    let mut learner = source.clone();
    learner.peers[2].role = L;
    assert_eq!(
        plan(&w, &learner, merge_into(&target, &[32])),
        Err(AdminRefused::AbnormalPeer(2))
    );
    let two = ranged(3, (b"m", b""), &[1, 2]);
    assert_eq!(
        plan(&w, &source, merge_into(&two, &[])),
        Err(AdminRefused::AbnormalPeer(3))
    );
}

#[test]
fn a_merge_moves_the_sources_peers_onto_the_targets_stores_first() {
    let w = world(&[1, 2, 3, 4], &[3]);
    let source = ranged(2, (b"a", b"m"), &[1, 2, 4]);
    let target = ranged(3, (b"m", b""), &[1, 2, 4]);
    let w_up = world(&[1, 2, 3, 4], &[]);
    let moved = ranged(2, (b"a", b"m"), &[3, 1, 2]);
    let got = plan(&w_up, &moved, merge_into(&target, &[])).unwrap();
    assert_eq!(got.kind, "admin,region,leader");
    let new = p(NEW_PEER, 4, L);
    assert_eq!(
        got.plan.steps,
        vec![
            Step::AddLearner(new.clone()),
            Step::PromoteLearner(new),
            Step::TransferLeader(p(21, 1, V)),
            Step::RemovePeer(p(23, 3, V)),
            merge_step(&moved, &target),
        ]
    );
    // A target with a peer on a removed store is not healthy.
    let on_3 = ranged(3, (b"m", b""), &[1, 2, 3]);
    assert_eq!(
        plan(&w, &source, merge_into(&on_3, &[])),
        Err(AdminRefused::AbnormalPeer(3))
    );
}
