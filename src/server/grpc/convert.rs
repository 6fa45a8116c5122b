//! Translation between kvproto's messages and Meridian's placement types, both ways. Pure.
//! Owns the mapping choices (which kvproto states Meridian keeps, which it folds); must not
//! touch the engine.

use crate::kvproto::{eraftpb, metapb, pdpb};
use crate::placement::{
    Buckets, Epoch, Label, Operator, Peer, PeerRole, Region, RegionStats, SplitPolicy, Store,
    StoreDetails, StoreState, StoreStats, StoreStatus, TimeInterval,
};

/// A kvproto message that cannot be a Meridian one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

fn malformed(why: impl Into<String>) -> Malformed {
    Malformed(why.into())
}

pub fn peer_from(p: &metapb::Peer) -> Result<Peer, Malformed> {
    let role = match metapb::PeerRole::try_from(p.role) {
        Ok(metapb::PeerRole::Voter) => PeerRole::Voter,
        Ok(metapb::PeerRole::Learner) => PeerRole::Learner,
        Ok(metapb::PeerRole::IncomingVoter) => PeerRole::IncomingVoter,
        Ok(metapb::PeerRole::DemotingVoter) => PeerRole::DemotingVoter,
        Err(_) => return Err(malformed(format!("peer {}: unknown role {}", p.id, p.role))),
    };
    Ok(Peer {
        id: p.id,
        store_id: p.store_id,
        role,
    })
}

pub fn peer_to(p: &Peer) -> metapb::Peer {
    metapb::Peer {
        id: p.id,
        store_id: p.store_id,
        role: match p.role {
            PeerRole::Voter => metapb::PeerRole::Voter,
            PeerRole::Learner => metapb::PeerRole::Learner,
            PeerRole::IncomingVoter => metapb::PeerRole::IncomingVoter,
            PeerRole::DemotingVoter => metapb::PeerRole::DemotingVoter,
        } as i32,
        ..Default::default()
    }
}

/// A region as a store reports it; `leader` is the peer the report names as leader (a region
/// heartbeat's `leader` field), if any.
pub fn region_from(r: &metapb::Region, leader: Option<&metapb::Peer>) -> Result<Region, Malformed> {
    let epoch = r
        .region_epoch
        .as_ref()
        .map(|e| Epoch {
            conf_ver: e.conf_ver,
            version: e.version,
        })
        .ok_or_else(|| malformed(format!("region {}: no epoch", r.id)))?;
    let peers = r
        .peers
        .iter()
        .map(peer_from)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Region {
        id: r.id,
        start_key: r.start_key.clone(),
        end_key: r.end_key.clone(),
        epoch,
        peers,
        leader: leader.map(|l| l.id).filter(|id| *id != 0),
    })
}

pub fn region_to(r: &Region) -> metapb::Region {
    metapb::Region {
        id: r.id,
        start_key: r.start_key.clone(),
        end_key: r.end_key.clone(),
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: r.epoch.conf_ver,
            version: r.epoch.version,
        }),
        peers: r.peers.iter().map(peer_to).collect(),
        ..Default::default()
    }
}

/// The leader peer of `r` in kvproto form, if it has one.
pub fn leader_to(r: &Region) -> Option<metapb::Peer> {
    r.leader_peer().map(peer_to)
}

/// The sizes of a heartbeat whose region converted to `region`. A pending peer that is not
/// one of the region's peers cannot be caught up to anything and is passed over. The
/// report's `interval` is what its written bytes and keys cover; none is 0/0.
pub fn region_stats_from(req: &pdpb::RegionHeartbeatRequest, region: &Region) -> RegionStats {
    RegionStats {
        approximate_size: req.approximate_size,
        approximate_keys: req.approximate_keys,
        written_bytes: req.bytes_written,
        written_keys: req.keys_written,
        pending: RegionStats::pending_mask(region, req.pending_peers.iter().map(|p| p.id)),
        interval: req
            .interval
            .as_ref()
            .map(|i| TimeInterval {
                start_s: i.start_timestamp,
                end_s: i.end_timestamp,
            })
            .unwrap_or_default(),
    }
}

pub fn store_from(s: &metapb::Store) -> Result<Store, Malformed> {
    let state = match metapb::StoreState::try_from(s.state) {
        Ok(metapb::StoreState::Up) => StoreState::Up,
        Ok(metapb::StoreState::Offline) => StoreState::Offline,
        Ok(metapb::StoreState::Tombstone) => StoreState::Tombstone,
        Err(_) => {
            return Err(malformed(format!(
                "store {}: unknown state {}",
                s.id, s.state
            )))
        }
    };
    Ok(Store {
        id: s.id,
        address: s.address.clone(),
        labels: s
            .labels
            .iter()
            .map(|l| Label {
                key: l.key.clone(),
                value: l.value.clone(),
            })
            .collect(),
        state,
        details: StoreDetails {
            version: s.version.clone(),
            git_hash: s.git_hash.clone(),
            peer_address: s.peer_address.clone(),
            status_address: s.status_address.clone(),
            start_timestamp: s.start_timestamp,
            deploy_path: s.deploy_path.clone(),
        }
        .into(),
    })
}

pub fn store_to(s: &StoreStatus) -> metapb::Store {
    let store = &s.store;
    metapb::Store {
        id: store.id,
        address: store.address.clone(),
        // kvproto has no Down state: PD reports a down store as Up with an old heartbeat.
        state: match store.state {
            StoreState::Up | StoreState::Down => metapb::StoreState::Up,
            StoreState::Offline => metapb::StoreState::Offline,
            StoreState::Tombstone => metapb::StoreState::Tombstone,
        } as i32,
        labels: store
            .labels
            .iter()
            .map(|l| metapb::StoreLabel {
                key: l.key.clone(),
                value: l.value.clone(),
            })
            .collect(),
        version: store.details.version.clone(),
        git_hash: store.details.git_hash.clone(),
        peer_address: store.details.peer_address.clone(),
        status_address: store.details.status_address.clone(),
        start_timestamp: store.details.start_timestamp,
        deploy_path: store.details.deploy_path.clone(),
        last_heartbeat: (s.last_heartbeat_ms as i64).saturating_mul(1_000_000),
        node_state: node_state(store.state) as i32,
        ..Default::default()
    }
}

/// PD's `NodeState` for a store state: a store being drained is Removing, a tombstone Removed,
/// any other store Serving (kvproto, like PD, has no Down: a down store is one that is silent).
pub fn node_state(state: StoreState) -> metapb::NodeState {
    match state {
        StoreState::Up | StoreState::Down => metapb::NodeState::Serving,
        StoreState::Offline => metapb::NodeState::Removing,
        StoreState::Tombstone => metapb::NodeState::Removed,
    }
}

pub fn store_stats_from(s: &pdpb::StoreStats) -> StoreStats {
    StoreStats {
        capacity: s.capacity,
        available: s.available,
        used_size: s.used_size,
        region_count: u64::from(s.region_count),
        // kvproto's StoreStats carries no leader count; PD counts leaders from region heartbeats.
        leader_count: 0,
    }
}

pub fn store_stats_to(s: &StoreStatus) -> pdpb::StoreStats {
    pdpb::StoreStats {
        store_id: s.store.id,
        capacity: s.stats.capacity,
        available: s.stats.available,
        used_size: s.stats.used_size,
        region_count: u32::try_from(s.stats.region_count).unwrap_or(u32::MAX),
        ..Default::default()
    }
}

/// What PD keeps of a bucket report: the keys and their version (the statistics go to its
/// hot-spot tracking, which Meridian has not).
pub fn buckets_from(b: &metapb::Buckets) -> Buckets {
    Buckets {
        region_id: b.region_id,
        version: b.version,
        keys: b.keys.clone(),
    }
}

pub fn buckets_to(b: &Buckets) -> metapb::Buckets {
    metapb::Buckets {
        region_id: b.region_id,
        version: b.version,
        keys: b.keys.clone(),
        ..Default::default()
    }
}

/// The conf change that gives a peer `role`: a voter's is AddNode, a learner's AddLearnerNode.
fn change_type(role: PeerRole) -> eraftpb::ConfChangeType {
    match role {
        PeerRole::Voter | PeerRole::IncomingVoter => eraftpb::ConfChangeType::AddNode,
        PeerRole::Learner | PeerRole::DemotingVoter => eraftpb::ConfChangeType::AddLearnerNode,
    }
}

/// The heartbeat reply that asks `region`'s leader to carry out `op`, as PD words it for a
/// cluster that takes `ChangePeerV2` (`conf_change_v2`, cluster version 5.0 or later) or not.
/// `None` where PD sends nothing: a joint step below 5.0, which PD neither builds nor sends
/// (its `GetCmd` returns nil).
pub fn operator_to(
    region: &Region,
    op: &Operator,
    conf_change_v2: bool,
) -> Option<pdpb::RegionHeartbeatResponse> {
    let mut resp = pdpb::RegionHeartbeatResponse {
        region_id: region.id,
        region_epoch: Some(metapb::RegionEpoch {
            conf_ver: region.epoch.conf_ver,
            version: region.epoch.version,
        }),
        target_peer: leader_to(region),
        ..Default::default()
    };
    // PD's `createResponse`: one change, as `ChangePeerV2` holding just it from 5.0 (PD's
    // AddLearner, AddPeer, PromoteLearner and RemovePeer steps), else as `ChangePeer`.
    let mut one_change = |change: pdpb::ChangePeer| {
        if conf_change_v2 {
            resp.change_peer_v2 = Some(pdpb::ChangePeerV2 {
                changes: vec![change],
            });
        } else {
            resp.change_peer = Some(change);
        }
    };
    match op {
        Operator::AddPeer(p) => one_change(pdpb::ChangePeer {
            peer: Some(peer_to(p)),
            change_type: change_type(p.role) as i32,
        }),
        // As PD's `ChangePeerV2Enter`/`Leave`: AddNode promotes a learner, AddLearnerNode
        // demotes a voter, each peer with its final role; no change leaves the joint state.
        // PD's `GetCmd` sends neither below 5.0.
        Operator::ChangePeerV2(_) if !conf_change_v2 => return None,
        Operator::ChangePeerV2(changes) => {
            resp.change_peer_v2 = Some(pdpb::ChangePeerV2 {
                changes: changes
                    .iter()
                    .map(|p| pdpb::ChangePeer {
                        peer: Some(peer_to(p)),
                        change_type: change_type(p.role) as i32,
                    })
                    .collect(),
            })
        }
        Operator::RemovePeer(p) => one_change(pdpb::ChangePeer {
            peer: Some(peer_to(p)),
            change_type: eraftpb::ConfChangeType::RemoveNode as i32,
        }),
        Operator::TransferLeader(p) => {
            resp.transfer_leader = Some(pdpb::TransferLeader {
                peer: Some(peer_to(p)),
                ..Default::default()
            })
        }
        // As PD's `SplitRegion.GetCmd` sends it: the policy, and the keys given (none when the
        // leader is to pick).
        Operator::Split(split) => {
            let policy = match split.policy {
                SplitPolicy::Scan => pdpb::CheckPolicy::Scan,
                SplitPolicy::Approximate => pdpb::CheckPolicy::Approximate,
                SplitPolicy::UseKey => pdpb::CheckPolicy::Usekey,
            };
            resp.split_region = Some(pdpb::SplitRegion {
                policy: policy as i32,
                keys: split.keys.clone(),
            })
        }
        // As PD sends it, to the source region only: the target as PD last saw it.
        Operator::Merge(target) => {
            resp.merge = Some(pdpb::Merge {
                target: Some(region_to(target)),
            })
        }
    }
    Some(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Split;
    use proptest::prelude::*;

    fn arb_region() -> impl Strategy<Value = Region> {
        (
            1u64..u64::MAX,
            proptest::collection::vec(any::<u8>(), 0..8),
            proptest::collection::vec(any::<u8>(), 0..8),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec((1u64..1000, 1u64..1000, any::<bool>()), 1..5),
            any::<Option<prop::sample::Index>>(),
        )
            .prop_map(|(id, start, end, conf_ver, version, peers, leader)| {
                let peers: Vec<Peer> = peers
                    .into_iter()
                    .map(|(id, store_id, learner)| Peer {
                        id,
                        store_id,
                        role: if learner {
                            PeerRole::Learner
                        } else {
                            PeerRole::Voter
                        },
                    })
                    .collect();
                let leader = leader.map(|i| peers[i.index(peers.len())].id);
                Region {
                    id,
                    start_key: start,
                    end_key: end,
                    epoch: Epoch { conf_ver, version },
                    peers,
                    leader,
                }
            })
    }

    proptest! {
        #[test]
        fn a_region_survives_the_round_trip_through_kvproto(r in arb_region()) {
            let wire = region_to(&r);
            let leader = r.leader.and_then(|id| wire.peers.iter().find(|p| p.id == id).cloned());
            let back = region_from(&wire, leader.as_ref()).unwrap();
            prop_assert_eq!(back, r);
        }
    }

    #[test]
    fn a_region_without_an_epoch_or_with_an_unknown_role_is_malformed() {
        let mut r = region_to(&Region {
            id: 2,
            start_key: vec![],
            end_key: vec![],
            epoch: Epoch::default(),
            peers: vec![Peer {
                id: 3,
                store_id: 1,
                role: PeerRole::Voter,
            }],
            leader: None,
        });
        r.peers[0].role = 99;
        assert!(region_from(&r, None).is_err());
        r.peers[0].role = 0;
        r.region_epoch = None;
        assert!(region_from(&r, None).unwrap_err().0.contains("no epoch"));
    }

    #[test]
    fn operators_become_pd_replies_for_their_region() {
        let region = Region {
            id: 9,
            start_key: b"a".to_vec(),
            end_key: b"b".to_vec(),
            epoch: Epoch {
                conf_ver: 3,
                version: 4,
            },
            peers: vec![Peer {
                id: 10,
                store_id: 1,
                role: PeerRole::Voter,
            }],
            leader: Some(10),
        };
        let add = Peer {
            id: 11,
            store_id: 2,
            role: PeerRole::Learner,
        };
        // Below 5.0 a single change goes as `ChangePeer`.
        let r = operator_to(&region, &Operator::AddPeer(add.clone()), false).unwrap();
        assert_eq!(r.region_id, 9);
        assert_eq!(r.region_epoch.unwrap().version, 4);
        assert_eq!(r.target_peer.unwrap().id, 10);
        assert!(r.change_peer_v2.is_none());
        let cp = r.change_peer.unwrap();
        assert_eq!(
            cp.change_type,
            eraftpb::ConfChangeType::AddLearnerNode as i32
        );
        assert_eq!(cp.peer.unwrap().id, 11);
        let r = operator_to(&region, &Operator::RemovePeer(add.clone()), false).unwrap();
        assert_eq!(
            r.change_peer.unwrap().change_type,
            eraftpb::ConfChangeType::RemoveNode as i32
        );
        let r = operator_to(
            &region,
            &Operator::TransferLeader(region.peers[0].clone()),
            false,
        );
        let r = r.unwrap();
        assert_eq!(r.transfer_leader.unwrap().peer.unwrap().id, 10);
        assert!(r.change_peer.is_none());
        let keys = vec![b"a5".to_vec(), b"a7".to_vec()];
        let r = operator_to(
            &region,
            &Operator::Split(Box::new(Split::at(keys.clone()))),
            false,
        );
        let r = r.unwrap();
        let split = r.split_region.unwrap();
        assert_eq!(split.policy, pdpb::CheckPolicy::Usekey as i32);
        assert_eq!(split.keys, keys);
        for (policy, want) in [
            (SplitPolicy::Scan, pdpb::CheckPolicy::Scan),
            (SplitPolicy::Approximate, pdpb::CheckPolicy::Approximate),
        ] {
            let op = Operator::Split(Box::new(Split {
                policy,
                keys: vec![],
            }));
            let split = operator_to(&region, &op, false)
                .unwrap()
                .split_region
                .unwrap();
            assert_eq!(split.policy, want as i32, "{policy:?}");
            assert!(split.keys.is_empty());
        }
        assert_eq!(r.region_id, 9);
        assert!(r.change_peer.is_none() && r.transfer_leader.is_none());
        // A merge goes to the source with the target's meta, and nothing else.
        let mut target = region.clone();
        target.id = 10;
        let r = operator_to(&region, &Operator::Merge(Box::new(target.clone())), false).unwrap();
        assert_eq!(r.merge.unwrap().target, Some(region_to(&target)));
        assert_eq!(r.region_id, 9);
        assert!(r.change_peer.is_none() && r.transfer_leader.is_none() && r.split_region.is_none());
    }

    /// PD's `createResponse` and `GetCmd(region, useConfChangeV2)`: from 5.0 every single
    /// change (add a learner, add or promote a voter, remove) goes as a `ChangePeerV2` holding
    /// just it, and `ChangePeer` is never set; below 5.0 it goes as `ChangePeer`, and the joint
    /// steps (which PD does not build there) are not sent at all. Other operators do not
    /// depend on the version.
    #[test]
    fn single_changes_go_as_change_peer_v2_from_5_0_as_pd_sends_them() {
        let region = Region {
            id: 9,
            start_key: vec![],
            end_key: vec![],
            epoch: Epoch {
                conf_ver: 3,
                version: 4,
            },
            peers: vec![
                Peer {
                    id: 10,
                    store_id: 1,
                    role: PeerRole::Voter,
                },
                Peer {
                    id: 12,
                    store_id: 3,
                    role: PeerRole::Voter,
                },
            ],
            leader: Some(10),
        };
        let peer = |id, store_id, role| Peer { id, store_id, role };
        let add_node = eraftpb::ConfChangeType::AddNode as i32;
        let add_learner = eraftpb::ConfChangeType::AddLearnerNode as i32;
        let remove = eraftpb::ConfChangeType::RemoveNode as i32;
        let singles = [
            (
                Operator::AddPeer(peer(11, 2, PeerRole::Learner)),
                add_learner,
                11,
                metapb::PeerRole::Learner,
            ),
            (
                Operator::AddPeer(peer(11, 2, PeerRole::Voter)),
                add_node,
                11,
                metapb::PeerRole::Voter,
            ),
            (
                Operator::RemovePeer(peer(12, 3, PeerRole::Voter)),
                remove,
                12,
                metapb::PeerRole::Voter,
            ),
        ];
        for (op, change_type, id, role) in singles {
            let v2 = operator_to(&region, &op, true).unwrap();
            assert!(v2.change_peer.is_none(), "{op:?}");
            let changes = v2.change_peer_v2.unwrap().changes;
            assert_eq!(changes.len(), 1, "{op:?}");
            let p = changes[0].peer.unwrap();
            assert_eq!(
                (changes[0].change_type, p.id, p.role),
                (change_type, id, role as i32),
                "{op:?}"
            );
            let v1 = operator_to(&region, &op, false).unwrap();
            assert!(v1.change_peer_v2.is_none(), "{op:?}");
            let change = v1.change_peer.unwrap();
            assert_eq!(
                (change.change_type, change.peer.unwrap().id),
                (change_type, id)
            );
            // Everything but the change itself is the same either way.
            let strip = |mut r: pdpb::RegionHeartbeatResponse| {
                r.change_peer = None;
                r.change_peer_v2 = None;
                r
            };
            assert_eq!(
                strip(operator_to(&region, &op, true).unwrap()),
                strip(operator_to(&region, &op, false).unwrap())
            );
        }
        // The joint steps: sent from 5.0 only.
        let enter = Operator::ChangePeerV2(Box::new(vec![
            peer(11, 2, PeerRole::Voter),
            peer(12, 3, PeerRole::Learner),
        ]));
        let changes = operator_to(&region, &enter, true)
            .unwrap()
            .change_peer_v2
            .unwrap()
            .changes;
        let got: Vec<(i32, u64)> = changes
            .iter()
            .map(|c| (c.change_type, c.peer.as_ref().unwrap().id))
            .collect();
        assert_eq!(got, vec![(add_node, 11), (add_learner, 12)]);
        let leave = Operator::ChangePeerV2(Box::default());
        let left = operator_to(&region, &leave, true).unwrap();
        assert_eq!(left.change_peer_v2, Some(pdpb::ChangePeerV2::default()));
        assert!(left.change_peer.is_none());
        assert_eq!(operator_to(&region, &enter, false), None);
        assert_eq!(operator_to(&region, &leave, false), None);
        // A leader transfer, a split and a merge do not depend on the version.
        let keys = vec![b"a5".to_vec()];
        let mut target = region.clone();
        target.id = 20;
        for op in [
            Operator::TransferLeader(region.peers[1].clone()),
            Operator::Split(Box::new(Split::at(keys))),
            Operator::Merge(Box::new(target)),
        ] {
            let v2 = operator_to(&region, &op, true).unwrap();
            assert!(
                v2.change_peer.is_none() && v2.change_peer_v2.is_none(),
                "{op:?}"
            );
            assert_eq!(Some(v2), operator_to(&region, &op, false), "{op:?}");
        }
    }

    /// A heartbeat's `interval` (TiKV's start and end, Unix seconds) is what its written
    /// bytes and keys cover, carried as sent; a heartbeat without one carries 0/0, which the
    /// shard reads as none given.
    #[test]
    fn a_heartbeats_interval_is_carried_into_its_stats() {
        let region = Region::bootstrap(2, 3, 1);
        let mut req = pdpb::RegionHeartbeatRequest {
            region: Some(region_to(&region)),
            bytes_written: 10 << 20,
            keys_written: 100,
            interval: Some(pdpb::TimeInterval {
                start_timestamp: 1_700_000_000,
                end_timestamp: 1_700_000_010,
            }),
            ..Default::default()
        };
        let stats = region_stats_from(&req, &region);
        assert_eq!(
            stats.interval,
            TimeInterval {
                start_s: 1_700_000_000,
                end_s: 1_700_000_010,
            }
        );
        assert_eq!(stats.interval.secs(), Some(10));
        assert_eq!((stats.written_bytes, stats.written_keys), (10 << 20, 100));
        req.interval = None;
        let stats = region_stats_from(&req, &region);
        assert_eq!(stats.interval, TimeInterval::default());
        assert_eq!(stats.interval.secs(), None);
    }
}
