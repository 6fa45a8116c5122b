//! PD's region scatterer (`RegionScatterer`, the admin `ScatterRegion` path): for one region,
//! a target store for each peer and a target leader, so that the regions scattered in one
//! group spread their peers and leaders evenly over the stores. PD remembers, per group, how
//! many peers and leaders each store was picked for ([`Groups`], forgotten three minutes after
//! the group's last scatter, as PD's TTL cache has it); a peer moves only to a store picked
//! fewer times than every store picked the most, and stays where it is when its own store is
//! among the least picked. A target must be a store that takes new peers, hold no other
//! target of the region, keep isolation and not lower the peer's distinct score (PD's
//! placement safeguard). The result is a [`Target`]: the moves and the leader's store, turned
//! into steps once the new peers have ids. Owns no operator state, limits or I/O.

use std::collections::HashMap;

use super::cluster::{Cluster, RegionInput};
use super::location::{distinct_score, isolated};
use super::plan::Plan;
use crate::placement::operator::{OpKind, Step};
use crate::placement::region::{Peer, PeerRole};

/// The description PD gives an admin scatter's operator; client-go waits for a region while
/// GetOperator reports it running.
pub const SCATTER_DESC: &str = "scatter-region";
/// A group's picks are forgotten this long after its last scatter (PD's `gcTTL`).
pub const GROUP_TTL_MS: u64 = 3 * 60 * 1000;
/// The most groups remembered at once: past it the least recently scattered is forgotten, so
/// callers naming a new group each time cannot grow this without end.
pub const MAX_GROUPS: usize = 4096;

/// How often each store was picked, for one group.
#[derive(Debug, Clone, Default)]
struct Picks {
    peers: HashMap<u64, u64>,
    leaders: HashMap<u64, u64>,
    touched_ms: u64,
}

/// Every group's picks (PD's `selectedPeer` and `selectedLeader`); the group "" is the
/// cluster-level scatter.
#[derive(Debug, Default)]
pub struct Groups {
    by_group: HashMap<String, Picks>,
}

impl Groups {
    pub fn len(&self) -> usize {
        self.by_group.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_group.is_empty()
    }

    /// How often `store` was picked for a peer of `group`.
    pub fn peers(&self, group: &str, store: u64) -> u64 {
        self.by_group
            .get(group)
            .and_then(|p| p.peers.get(&store))
            .copied()
            .unwrap_or(0)
    }

    /// How often `store` was picked for a leader of `group`.
    pub fn leaders(&self, group: &str, store: u64) -> u64 {
        self.by_group
            .get(group)
            .and_then(|p| p.leaders.get(&store))
            .copied()
            .unwrap_or(0)
    }

    /// Forgets the groups not scattered for [`GROUP_TTL_MS`].
    fn expire(&mut self, now_ms: u64) {
        self.by_group
            .retain(|_, p| now_ms.saturating_sub(p.touched_ms) < GROUP_TTL_MS);
    }

    /// Counts a scatter's result: each final store of the region once, and its leader.
    fn record(&mut self, group: &str, stores: &[u64], leader: u64, now_ms: u64) {
        if !self.by_group.contains_key(group) && self.by_group.len() >= MAX_GROUPS {
            if let Some(oldest) = self
                .by_group
                .iter()
                .min_by_key(|(_, p)| p.touched_ms)
                .map(|(g, _)| g.clone())
            {
                self.by_group.remove(&oldest);
            }
        }
        let picks = self.by_group.entry(group.to_string()).or_default();
        picks.touched_ms = now_ms;
        for s in stores {
            *picks.peers.entry(*s).or_insert(0) += 1;
        }
        *picks.leaders.entry(leader).or_insert(0) += 1;
    }
}

/// Why a region is not scattered (PD's errors, which put it in `failed_regions_id`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("region {0} is not fully replicated")]
    NotReplicated(u64),
    #[error("region {0} has no leader")]
    NoLeader(u64),
    #[error("no target leader store found for region {0}")]
    NoLeaderTarget(u64),
    #[error("store {1} has no room in its store limit for region {0}")]
    StoreLimit(u64, u64),
}

/// Where a region's peers and leader go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Each peer that moves, and the store it moves to, in the region's peer order.
    pub moves: Vec<(Peer, u64)>,
    /// The store the leader ends on.
    pub leader_store: u64,
    /// The region's stores afterwards, in the region's peer order then the new ones.
    pub stores: Vec<u64>,
}

impl Target {
    /// The operator: each new peer added as a learner and promoted, the leader moved off a
    /// peer being removed first, the old peers removed, and the leader moved to its target
    /// last. `ids` are the new peers' ids, one per move in order.
    pub fn plan(&self, r: &RegionInput, ids: &[u64]) -> Plan {
        let new: Vec<Peer> = self
            .moves
            .iter()
            .zip(ids)
            .map(|((_, store), id)| Peer {
                id: *id,
                store_id: *store,
                role: PeerRole::Learner,
            })
            .collect();
        let mut steps = Vec::with_capacity(3 * new.len() + 2);
        for p in &new {
            steps.push(Step::AddLearner(p.clone()));
            steps.push(Step::PromoteLearner(p.clone()));
        }
        let target_leader = r
            .region
            .peers
            .iter()
            .chain(&new)
            .find(|p| {
                p.store_id == self.leader_store && !self.moves.iter().any(|(o, _)| o.id == p.id)
            })
            .map(|p| Peer {
                role: PeerRole::Voter,
                ..p.clone()
            });
        let leader = r.leader().map(|p| p.id);
        let mut moved = false;
        if let Some(to) = &target_leader {
            let leader_leaves = self.moves.iter().any(|(o, _)| Some(o.id) == leader);
            if leader_leaves && Some(to.id) != leader {
                steps.push(Step::TransferLeader(to.clone()));
                moved = true;
            }
        }
        for (old, _) in &self.moves {
            steps.push(Step::RemovePeer(old.clone()));
        }
        if let Some(to) = target_leader.filter(|to| !moved && Some(to.id) != leader) {
            steps.push(Step::TransferLeader(to));
        }
        Plan {
            kind: OpKind::Region,
            steps,
            flow: 0,
        }
    }

    /// PD's operator kind for it, as GetOperator reports it.
    pub fn kind_name(&self, r: &RegionInput) -> &'static str {
        let leader_moves = r.leader().map(|p| p.store_id) != Some(self.leader_store);
        match (self.moves.is_empty(), leader_moves) {
            (false, true) => "admin,region,leader",
            (false, false) => "admin,region",
            (true, _) => "admin,leader",
        }
    }
}

/// Scatters `r` within `group`: its target, or `None` when it already is where the scatter
/// would put it (counted all the same, as PD counts it). `skip_store_limit` is the caller's
/// PD option of the same name.
pub fn scatter(
    c: &Cluster,
    r: &RegionInput,
    group: &str,
    groups: &mut Groups,
    skip_store_limit: bool,
) -> Result<Option<Target>, Refused> {
    let id = r.region.id;
    groups.expire(c.now_ms);
    // PD's `IsRegionReplicated` without placement rules: as many voters as configured and no
    // learner.
    let learners = r.region.peers.iter().any(|p| p.role == PeerRole::Learner);
    if learners || r.voters().count() != c.cfg.max_replicas {
        return Err(Refused::NotReplicated(id));
    }
    let Some(leader) = r.leader() else {
        return Err(Refused::NoLeader(id));
    };
    let own: Vec<u64> = r.region.peers.iter().map(|p| p.store_id).collect();
    // Stores chosen as a target, or kept by a peer that was placed.
    let mut selected: Vec<u64> = Vec::with_capacity(2 * own.len());
    let mut moves = Vec::new();
    let mut leader_candidates = Vec::with_capacity(own.len());
    for peer in &r.region.peers {
        if selected.contains(&peer.store_id) {
            // Another peer picked this store: the peer stays.
            leader_candidates.push(peer.store_id);
            continue;
        }
        loop {
            let to = select_new_peer(c, r, group, groups, peer, &selected);
            if !selected.contains(&to) {
                selected.push(to);
            }
            if !own.contains(&to) || to == peer.store_id {
                if !selected.contains(&peer.store_id) {
                    selected.push(peer.store_id);
                }
                leader_candidates.push(to);
                if to != peer.store_id {
                    moves.push((peer.clone(), to));
                }
                break;
            }
            // The pick holds another peer of the region, which now stays: pick again.
        }
    }
    let leader_store = leader_candidates
        .iter()
        .filter(|s| c.store(**s).is_some())
        .min_by_key(|s| groups.leaders(group, **s))
        .copied()
        .ok_or(Refused::NoLeaderTarget(id))?;
    let stores: Vec<u64> = own
        .iter()
        .filter(|s| !moves.iter().any(|(o, _): &(Peer, u64)| o.store_id == **s))
        .copied()
        .chain(moves.iter().map(|(_, to)| *to))
        .collect();
    groups.record(group, &stores, leader_store, c.now_ms);
    if moves.is_empty() && leader_store == leader.store_id {
        return Ok(None);
    }
    if !skip_store_limit {
        let cost = super::budget::influence(r.size_mib);
        for (old, to) in &moves {
            let add = c.store(*to).is_some_and(|s| {
                s.budget
                    .has(true, cost, c.cfg.store_limit_add_per_min, c.now_ms)
            });
            if !add {
                return Err(Refused::StoreLimit(id, *to));
            }
            let free = c.health(old.store_id).is_free_to_remove();
            let remove = free
                || c.store(old.store_id).is_some_and(|s| {
                    s.budget
                        .has(false, cost, c.cfg.store_limit_remove_per_min, c.now_ms)
                });
            if !remove {
                return Err(Refused::StoreLimit(id, old.store_id));
            }
        }
    }
    Ok(Some(Target {
        moves,
        leader_store,
        stores,
    }))
}

/// The locations of `r`'s stores but for the peer `except`'s.
fn others<'a>(
    c: &'a Cluster<'a>,
    r: &'a RegionInput<'a>,
    except: u64,
) -> impl Iterator<Item = &'a [String]> + Clone {
    r.region
        .peers
        .iter()
        .filter(move |p| p.id != except)
        .filter_map(|p| c.store(p.store_id))
        .map(|s| s.location.as_slice())
}

/// PD's `selectNewPeer`: among the stores that pass the filters and were not picked the most
/// (unless all were picked alike), the least picked, first in id order; the peer's own store
/// when it is among the least picked, or when no store qualifies.
fn select_new_peer(
    c: &Cluster,
    r: &RegionInput,
    group: &str,
    groups: &Groups,
    peer: &Peer,
    selected: &[u64],
) -> u64 {
    let counts: Vec<u64> = c.stores.iter().map(|s| groups.peers(group, s.id)).collect();
    let max = counts.iter().copied().max().unwrap_or(0);
    let min = counts.iter().copied().min().unwrap_or(0);
    let level = c.cfg.isolation_index();
    let rest = others(c, r, peer.id);
    let source_score = c
        .store(peer.store_id)
        .map_or(0.0, |s| distinct_score(rest.clone(), &s.location));
    let mut best: Option<(u64, u64)> = None;
    let mut origin = u64::MAX;
    for s in c.stores.iter() {
        let count = groups.peers(group, s.id);
        if s.id == peer.store_id {
            origin = count;
        }
        if count >= max && max != min {
            continue;
        }
        if selected.contains(&s.id) || !s.health(c.now_ms, c.cfg).is_target() {
            continue;
        }
        // PD's placement safeguard: isolation kept, distinct score not lowered.
        if s.id != peer.store_id
            && (!isolated(rest.clone(), &s.location, level)
                || distinct_score(rest.clone(), &s.location) < source_score)
        {
            continue;
        }
        if best.is_none_or(|(_, n)| count < n) {
            best = Some((s.id, count));
        }
    }
    match best {
        Some((id, n)) if origin > n => id,
        _ => peer.store_id,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::placement::schedule::{ScheduleConfig, TestCluster};
    use crate::placement::test_region::{self, Keys, PeerIds};
    use crate::placement::{Label, Region, Store, StoreMap, StoreState, StoreStats};

    /// Stores 1..=n, store i in zone `zones[i - 1]` when zones are given.
    fn world(n: u64, zones: &[&str], isolation: bool) -> TestCluster {
        let mut cfg = ScheduleConfig::default();
        if !zones.is_empty() {
            cfg.location_labels = vec!["zone".into()];
            if isolation {
                cfg.isolation_level = "zone".into();
            }
        }
        let mut map = StoreMap::new();
        for id in 1..=n {
            let labels = zones
                .get(id as usize - 1)
                .map(|z| {
                    vec![Label {
                        key: "zone".into(),
                        value: z.to_string(),
                    }]
                })
                .unwrap_or_default();
            let store = Store {
                id,
                address: format!("s{id}:1"),
                labels,
                state: StoreState::Up,
                details: crate::placement::schedule::details(),
            };
            map.put(store, 0).unwrap();
            map.heartbeat(id, StoreStats::default(), 0).unwrap();
        }
        TestCluster::new(&map, cfg)
    }

    /// Region `id` over every key with voters on `stores` (peer ids `id*100 + store`), led
    /// by the one on `stores[leader]`.
    fn region(id: u64, stores: &[u64], leader: usize) -> Region {
        let mut r = test_region::build(id, stores, PeerIds::Hundreds, Keys::Range(b"", b""));
        r.leader = Some(r.peers[leader].id);
        r
    }

    fn input(r: &Region) -> RegionInput<'_> {
        RegionInput {
            region: r,
            pending_peers: &[],
            size_mib: 10,
            hot: None,
        }
    }

    /// The region after its scatter, as its target says.
    fn after(r: &Region, t: &Option<Target>) -> (Vec<u64>, u64) {
        match t {
            Some(t) => (t.stores.clone(), t.leader_store),
            None => {
                let leader = r.leader_peer().map(|p| p.store_id).unwrap_or(0);
                (r.peers.iter().map(|p| p.store_id).collect(), leader)
            }
        }
    }

    #[test]
    fn regions_on_the_same_stores_spread_over_every_store() {
        let w = world(6, &[], false);
        let mut groups = Groups::default();
        let mut peers = [0u64; 7];
        let mut leaders = [0u64; 7];
        for id in 1..=6 {
            let r = region(id, &[1, 2, 3], 0);
            let t = scatter(&w.at(0), &input(&r), "t1", &mut groups, true).unwrap();
            let (stores, leader) = after(&r, &t);
            assert_eq!(stores.len(), 3);
            for s in stores {
                peers[s as usize] += 1;
            }
            leaders[leader as usize] += 1;
        }
        assert_eq!(&peers[1..], &[3, 3, 3, 3, 3, 3], "peers per store");
        assert_eq!(&leaders[1..], &[1, 1, 1, 1, 1, 1], "leaders per store");
        // Another group starts from nothing.
        assert_eq!(groups.peers("t2", 4), 0);
        assert_eq!(groups.peers("t1", 4), 3);
    }

    #[test]
    fn a_move_adds_then_removes_and_moves_the_leader_before_removing_its_peer() {
        let w = world(6, &[], false);
        let mut groups = Groups::default();
        // Stores 1-3 picked once already: the next region on them moves every peer.
        let first = region(1, &[1, 2, 3], 0);
        assert_eq!(
            scatter(&w.at(0), &input(&first), "", &mut groups, true),
            Ok(None)
        );
        let r = region(2, &[1, 2, 3], 0);
        let t = scatter(&w.at(0), &input(&r), "", &mut groups, true)
            .unwrap()
            .expect("a move");
        assert_eq!(t.moves.len(), 3);
        assert!(t.moves.iter().all(|(_, to)| *to >= 4));
        let plan = t.plan(&input(&r), &[901, 902, 903]);
        let kinds: Vec<&str> = plan
            .steps
            .iter()
            .map(|s| match s {
                Step::AddLearner(_) => "add",
                Step::PromoteLearner(_) => "promote",
                Step::TransferLeader(_) => "transfer",
                Step::RemovePeer(_) => "remove",
                Step::Split(_) => "split",
                Step::Merge(_) => "merge",
                Step::JointEnter(_) => "enter",
                Step::JointLeave(_) => "leave",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "add", "promote", "add", "promote", "add", "promote", "transfer", "remove",
                "remove", "remove"
            ]
        );
        let Step::TransferLeader(to) = &plan.steps[6] else {
            unreachable!()
        };
        assert_eq!(to.store_id, t.leader_store);
        assert!([901, 902, 903].contains(&to.id));
        assert_eq!(t.kind_name(&input(&r)), "admin,region,leader");
    }

    #[test]
    fn refused_when_not_replicated_or_leaderless() {
        let w = world(4, &[], false);
        let mut groups = Groups::default();
        let short = region(1, &[1, 2], 0);
        assert_eq!(
            scatter(&w.at(0), &input(&short), "", &mut groups, true),
            Err(Refused::NotReplicated(1))
        );
        let mut headless = region(2, &[1, 2, 3], 0);
        headless.leader = None;
        assert_eq!(
            scatter(&w.at(0), &input(&headless), "", &mut groups, true),
            Err(Refused::NoLeader(2))
        );
    }

    #[test]
    fn isolation_holds_and_groups_expire() {
        // Two stores per zone: a peer may only move within its own zone.
        let w = world(6, &["a", "a", "b", "b", "c", "c"], true);
        let mut groups = Groups::default();
        for id in 1..=4 {
            let r = region(id, &[1, 3, 5], 0);
            let t = scatter(&w.at(0), &input(&r), "g", &mut groups, true).unwrap();
            let (stores, _) = after(&r, &t);
            let zones: Vec<u64> = stores.iter().map(|s| (s - 1) / 2).collect();
            let mut sorted = zones.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 3, "one peer per zone: {stores:?}");
        }
        assert_eq!(groups.peers("g", 2), 2);
        // Three minutes on, the group starts over.
        let r = region(9, &[1, 3, 5], 0);
        scatter(&w.at(GROUP_TTL_MS), &input(&r), "other", &mut groups, true).unwrap();
        assert_eq!(groups.peers("g", 2), 0);
        assert_eq!(groups.len(), 1);
    }

    #[test]
    fn store_limits_hold_unless_skipped() {
        let w = world(6, &[], false);
        let mut groups = Groups::default();
        let first = region(1, &[1, 2, 3], 0);
        scatter(&w.at(0), &input(&first), "", &mut groups, false).unwrap();
        // Store 4's add bucket is empty.
        let cost = super::super::budget::influence(10);
        let b = &w.view.get(4).unwrap().budget;
        while b.take(true, cost, w.cfg.store_limit_add_per_min, 0) {}
        let r = region(2, &[1, 2, 3], 0);
        let mut again = Groups::default();
        scatter(&w.at(0), &input(&first), "", &mut again, false).unwrap();
        assert_eq!(
            scatter(&w.at(0), &input(&r), "", &mut again, false),
            Err(Refused::StoreLimit(2, 4))
        );
        let mut skipped = Groups::default();
        scatter(&w.at(0), &input(&first), "", &mut skipped, true).unwrap();
        assert!(scatter(&w.at(0), &input(&r), "", &mut skipped, true)
            .unwrap()
            .is_some());
    }

    #[test]
    fn groups_are_bounded() {
        let w = world(3, &[], false);
        let mut groups = Groups::default();
        let r = region(1, &[1, 2, 3], 0);
        for g in 0..MAX_GROUPS + 10 {
            scatter(
                &w.at(g as u64),
                &input(&r),
                &g.to_string(),
                &mut groups,
                true,
            )
            .unwrap();
        }
        assert_eq!(groups.len(), MAX_GROUPS);
        assert_eq!(groups.peers("0", 1), 0, "the oldest group went first");
        assert_eq!(groups.peers(&(MAX_GROUPS + 9).to_string(), 1), 1);
    }

    proptest! {
        /// N regions of a group, each on some three of M stores, scattered one after another
        /// onto where their targets say: per store, the group's peers differ by at most one.
        #[test]
        fn a_group_spreads_evenly(
            m in 3u64..9,
            placements in proptest::collection::vec(
                (any::<prop::sample::Index>(), any::<prop::sample::Index>(), 0usize..3), 1..40),
        ) {
            let w = world(m, &[], false);
            let mut groups = Groups::default();
            let mut per_store = vec![0u64; m as usize + 1];
            let mut per_leader = vec![0u64; m as usize + 1];
            for (i, (a, b, leader)) in placements.iter().enumerate() {
                // Three distinct stores from two indexes.
                let first = a.index(m as usize) as u64 + 1;
                let mut stores = vec![first];
                let mut next = b.index(m as usize) as u64 + 1;
                while stores.len() < 3 {
                    if !stores.contains(&next) {
                        stores.push(next);
                    }
                    next = next % m + 1;
                }
                let r = region(i as u64 + 1, &stores, *leader);
                let t = scatter(&w.at(0), &input(&r), "g", &mut groups, true).unwrap();
                let (after, leader) = after(&r, &t);
                let mut distinct = after.clone();
                distinct.sort_unstable();
                distinct.dedup();
                prop_assert_eq!(distinct.len(), 3, "{:?}", after);
                for s in after {
                    per_store[s as usize] += 1;
                }
                per_leader[leader as usize] += 1;
                let counts = &per_store[1..];
                let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
                prop_assert!(hi - lo <= 1, "after region {}: {:?}", i + 1, counts);
            }
            // Picks match what was placed.
            for s in 1..=m {
                prop_assert_eq!(groups.peers("g", s), per_store[s as usize]);
                prop_assert_eq!(groups.leaders("g", s), per_leader[s as usize]);
            }
        }
    }
}
