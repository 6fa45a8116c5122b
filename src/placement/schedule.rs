//! Scheduling decisions for one region, from its leader's report and the stores' last
//! heartbeats: the replica checker (keep `max_replicas` voters on live stores) first, then
//! leader balance. Pure and deterministic: ties break by store id; new peer ids come from the
//! caller.

use super::id_hash::IdMap;
use super::operator::Operator;
use super::region::{Peer, PeerRole, Region};
use super::store::{StoreMap, StoreState};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScheduleConfig {
    pub max_replicas: usize,
    /// A leader moves when its store leads this many more regions than the follower's store.
    pub leader_balance_threshold: u64,
    /// Leader moves in flight per shard.
    pub leader_schedule_limit: usize,
    /// Peer additions and removals in flight per shard.
    pub replica_schedule_limit: usize,
    /// A pending operator not seen done within this is dropped (and may be decided again).
    pub operator_timeout_ms: u64,
    pub max_store_down_time_ms: u64,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            max_replicas: 3,
            leader_balance_threshold: 10,
            leader_schedule_limit: 4,
            replica_schedule_limit: 64,
            operator_timeout_ms: 60_000,
            max_store_down_time_ms: 30 * 60 * 1000,
        }
    }
}

/// What scheduling needs of one store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLoad {
    pub state: StoreState,
    pub region_count: u64,
    pub leader_count: u64,
}

/// The stores as the scheduler sees them; rebuilt when a store changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreView {
    stores: IdMap<StoreLoad>,
}

impl StoreView {
    pub fn of(map: &StoreMap) -> StoreView {
        StoreView {
            stores: map
                .iter()
                .map(|s| {
                    (
                        s.store.id,
                        StoreLoad {
                            state: s.store.state,
                            region_count: s.stats.region_count,
                            leader_count: s.stats.leader_count,
                        },
                    )
                })
                .collect(),
        }
    }

    pub fn get(&self, id: u64) -> Option<&StoreLoad> {
        self.stores.get(&id)
    }

    fn is_up(&self, id: u64) -> bool {
        self.get(id).is_some_and(|s| s.state == StoreState::Up)
    }
}

/// Which kinds of operator the caller may still start (its in-flight limits).
#[derive(Debug, Clone, Copy)]
pub struct Allowance {
    pub replica: bool,
    pub leader: bool,
}

/// The operator `region` needs now, if any.
pub fn decide(
    region: &Region,
    stores: &StoreView,
    cfg: &ScheduleConfig,
    allow: Allowance,
    new_peer_id: &mut dyn FnMut() -> Option<u64>,
) -> Option<Operator> {
    if allow.replica {
        if let Some(op) = check_replicas(region, stores, cfg, new_peer_id) {
            return Some(op);
        }
    }
    if allow.leader {
        return balance_leader(region, stores, cfg);
    }
    None
}

fn check_replicas(
    region: &Region,
    stores: &StoreView,
    cfg: &ScheduleConfig,
    new_peer_id: &mut dyn FnMut() -> Option<u64>,
) -> Option<Operator> {
    let leader = region.leader;
    // A peer on a dead store is replaced: removed first, then the count check adds one.
    if let Some(dead) = region.peers.iter().find(|p| {
        Some(p.id) != leader
            && stores
                .get(p.store_id)
                .is_none_or(|s| matches!(s.state, StoreState::Down | StoreState::Tombstone))
    }) {
        return Some(Operator::RemovePeer(dead.clone()));
    }
    let voters: Vec<&Peer> = region
        .peers
        .iter()
        .filter(|p| p.role == PeerRole::Voter)
        .collect();
    if voters.len() < cfg.max_replicas {
        let target = stores
            .stores
            .iter()
            .filter(|(id, s)| {
                s.state == StoreState::Up && !region.peers.iter().any(|p| p.store_id == **id)
            })
            .min_by_key(|(id, s)| (s.region_count, **id))
            .map(|(id, _)| *id)?;
        let id = new_peer_id()?;
        return Some(Operator::AddPeer(Peer {
            id,
            store_id: target,
            role: PeerRole::Voter,
        }));
    }
    if voters.len() > cfg.max_replicas {
        let extra = voters
            .iter()
            .filter(|p| Some(p.id) != leader)
            .max_by_key(|p| {
                (
                    stores.get(p.store_id).map_or(u64::MAX, |s| s.region_count),
                    p.store_id,
                )
            })?;
        return Some(Operator::RemovePeer((*extra).clone()));
    }
    None
}

fn balance_leader(region: &Region, stores: &StoreView, cfg: &ScheduleConfig) -> Option<Operator> {
    let leader = region.leader_peer()?;
    let from = stores.get(leader.store_id)?;
    let (to, load) = region
        .peers
        .iter()
        .filter(|p| p.id != leader.id && p.role == PeerRole::Voter && stores.is_up(p.store_id))
        .filter_map(|p| stores.get(p.store_id).map(|s| (p, s)))
        .min_by_key(|(p, s)| (s.leader_count, p.store_id))?;
    (from.leader_count > load.leader_count + cfg.leader_balance_threshold)
        .then(|| Operator::TransferLeader(to.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Epoch, Store, StoreStats};

    fn stores(loads: &[(u64, StoreState, u64, u64)]) -> StoreView {
        let mut map = StoreMap::new();
        for &(id, state, regions, leaders) in loads {
            map.put(
                Store {
                    id,
                    address: format!("s{id}:1"),
                    labels: vec![],
                    state: StoreState::Up,
                    details: Default::default(),
                },
                0,
            )
            .unwrap();
            map.heartbeat(
                id,
                StoreStats {
                    region_count: regions,
                    leader_count: leaders,
                    ..Default::default()
                },
                0,
            )
            .unwrap();
            if state == StoreState::Down {
                map.mark_down(0, 0);
            }
        }
        let mut view = StoreView::of(&map);
        for &(id, state, ..) in loads {
            if let Some(s) = view.stores.get_mut(&id) {
                s.state = state;
            }
        }
        view
    }

    fn region(on: &[u64], leader_at: usize) -> Region {
        let peers: Vec<Peer> = on
            .iter()
            .map(|&s| Peer {
                id: 100 + s,
                store_id: s,
                role: PeerRole::Voter,
            })
            .collect();
        Region {
            id: 7,
            start_key: vec![],
            end_key: vec![],
            epoch: Epoch::default(),
            leader: Some(peers[leader_at].id),
            peers,
        }
    }

    /// Name, stores (id, state, regions, leaders), the peers' stores, the leader's index,
    /// the operator expected.
    type Case = (
        &'static str,
        Vec<(u64, StoreState, u64, u64)>,
        Vec<u64>,
        usize,
        Option<Operator>,
    );

    const ALL: Allowance = Allowance {
        replica: true,
        leader: true,
    };
    use StoreState::*;

    #[test]
    fn table() {
        let cfg = ScheduleConfig::default();
        // (stores: id, state, regions, leaders), region peers' stores, leader index, expected
        let cases: Vec<Case> = vec![
            (
                "healthy and balanced",
                vec![(1, Up, 5, 2), (2, Up, 5, 2), (3, Up, 5, 2)],
                vec![1, 2, 3],
                0,
                None,
            ),
            (
                "missing replica goes to the least-loaded up store",
                vec![
                    (1, Up, 5, 2),
                    (2, Up, 5, 2),
                    (3, Up, 9, 2),
                    (4, Up, 3, 0),
                    (5, Down, 0, 0),
                ],
                vec![1, 2],
                0,
                Some(Operator::AddPeer(Peer {
                    id: 1000,
                    store_id: 4,
                    role: PeerRole::Voter,
                })),
            ),
            (
                "peer on a down store is removed",
                vec![(1, Up, 5, 2), (2, Up, 5, 2), (3, Down, 5, 2), (4, Up, 0, 0)],
                vec![1, 2, 3],
                0,
                Some(Operator::RemovePeer(Peer {
                    id: 103,
                    store_id: 3,
                    role: PeerRole::Voter,
                })),
            ),
            (
                "peer on an unknown store is removed",
                vec![(1, Up, 5, 2), (2, Up, 5, 2)],
                vec![1, 2, 9],
                0,
                Some(Operator::RemovePeer(Peer {
                    id: 109,
                    store_id: 9,
                    role: PeerRole::Voter,
                })),
            ),
            (
                "extra replica on the busiest store is removed, never the leader",
                vec![(1, Up, 50, 2), (2, Up, 5, 2), (3, Up, 7, 2), (4, Up, 6, 0)],
                vec![1, 2, 3, 4],
                0,
                Some(Operator::RemovePeer(Peer {
                    id: 103,
                    store_id: 3,
                    role: PeerRole::Voter,
                })),
            ),
            (
                "leader moves when the gap is over the threshold",
                vec![(1, Up, 5, 30), (2, Up, 5, 3), (3, Up, 5, 1)],
                vec![1, 2, 3],
                0,
                Some(Operator::TransferLeader(Peer {
                    id: 103,
                    store_id: 3,
                    role: PeerRole::Voter,
                })),
            ),
            (
                "leader stays within the threshold",
                vec![(1, Up, 5, 11), (2, Up, 5, 3), (3, Up, 5, 1)],
                vec![1, 2, 3],
                0,
                None,
            ),
            (
                "no up store to add to: nothing",
                vec![(1, Up, 5, 2), (2, Up, 5, 2), (3, Down, 0, 0)],
                vec![1, 2],
                0,
                None,
            ),
        ];
        for (name, loads, on, leader_at, want) in cases {
            let mut ids = 1000..;
            let got = decide(
                &region(&on, leader_at),
                &stores(&loads),
                &cfg,
                ALL,
                &mut || ids.next(),
            );
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn limits_and_id_exhaustion_hold_operators_back() {
        let cfg = ScheduleConfig::default();
        let view = stores(&[(1, Up, 5, 30), (2, Up, 5, 0), (3, Up, 5, 0), (4, Up, 0, 0)]);
        let short = region(&[1, 2], 0);
        let none = Allowance {
            replica: false,
            leader: false,
        };
        assert_eq!(decide(&short, &view, &cfg, none, &mut || Some(1)), None);
        // Without an id the replica checker waits; leader balance still runs.
        let got = decide(&short, &view, &cfg, ALL, &mut || None);
        assert!(matches!(got, Some(Operator::TransferLeader(_))), "{got:?}");
    }
}
