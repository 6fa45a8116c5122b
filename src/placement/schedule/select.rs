//! Target and source choices shared by the checkers and balance: the best store to receive a
//! region's new peer (PD's `SelectStoreToAdd`: a store that is a target, holds no peer of the
//! region, keeps isolation and has room in its add limit, ranked by distinct score and then by
//! fewest regions counting operators in flight), and the best voter to take a leader.

use super::budget::REGION_INFLUENCE;
use super::cluster::{Cluster, RegionInput};
use super::location::{distinct_score, isolated};
use crate::placement::region::Peer;

/// The locations of the region's stores other than `except`.
pub(super) fn others<'a>(
    c: &'a Cluster<'a>,
    r: &'a RegionInput<'a>,
    except: Option<u64>,
) -> impl Iterator<Item = &'a [String]> + Clone {
    r.region
        .peers
        .iter()
        .filter(move |p| Some(p.store_id) != except)
        .filter_map(|p| c.store(p.store_id))
        .map(|s| s.location.as_slice())
}

/// The best distinct score a peer of `r` can have: every other peer differs at the widest label.
pub fn best_score(c: &Cluster, r: &RegionInput) -> f64 {
    let labels = c.cfg.location_labels.len();
    if labels == 0 {
        return 0.0;
    }
    (r.region.peers.len().saturating_sub(1)) as f64 * 100f64.powi(labels as i32 - 1)
}

/// The distinct score the peer on `store` has against the rest of the region.
pub fn score_of(c: &Cluster, r: &RegionInput, store: u64) -> f64 {
    match c.store(store) {
        Some(s) => distinct_score(others(c, r, Some(store)), &s.location),
        None => 0.0,
    }
}

/// The best store for a new peer of `r`, replacing the one on `replacing` if set. Only stores
/// scoring at least `min_score` qualify.
pub fn store_to_add(
    c: &Cluster,
    r: &RegionInput,
    replacing: Option<u64>,
    min_score: f64,
) -> Option<(u64, f64)> {
    let rest = others(c, r, replacing);
    let level = c.cfg.isolation_index();
    let mut best: Option<(u64, f64, i64)> = None;
    for s in c.stores.iter() {
        if !s.health(c.now_ms, c.cfg).is_target() || r.has_store(s.id) {
            continue;
        }
        if !isolated(rest.clone(), &s.location, level) {
            continue;
        }
        let score = distinct_score(rest.clone(), &s.location);
        if score < min_score {
            continue;
        }
        // PD's target filter (`exceedAddLimit`): a store takes a new peer only while its add
        // limit holds a whole region's influence, whatever this region's size; starting the
        // operator then charges the region's own cost.
        if !s
            .budget
            .has(true, REGION_INFLUENCE, c.rate(s.id, true), c.now_ms)
        {
            continue;
        }
        let regions = s.regions();
        let better = match best {
            None => true,
            Some((_, bs, br)) => score > bs || (score == bs && regions < br),
        };
        if better {
            best = Some((s.id, score, regions));
        }
    }
    best.map(|(id, score, _)| (id, score))
}

/// The voter of `r` (other than on `except`) that should lead: healthy, on a target store not
/// being evicted, with the fewest leaders.
pub fn leader_target<'a>(c: &Cluster, r: &RegionInput<'a>, except: u64) -> Option<&'a Peer> {
    r.voters()
        .filter(|p| p.store_id != except && Some(p.id) != r.region.leader)
        .filter(|p| r.is_healthy(c, p))
        .filter(|p| c.health(p.store_id).is_target() && !c.stores.is_evicting(p.store_id))
        .filter_map(|p| c.store(p.store_id).map(|s| (p, s.leaders())))
        .min_by_key(|(p, n)| (*n, p.store_id))
        .map(|(p, _)| p)
}
