//! Operators asked for by a client, for the gRPC front end: ScatterRegion (PD's
//! `scatterRegions`: each region's owning shard scatters it, failed ones are tried again after
//! a pause), GetOperator (the owning shard's status record) and SplitRegions (PD's
//! `RegionSplitter`: the keys grouped by the region holding them, each region's shard given a
//! split operator its leader gets with its next heartbeat, then the index watched for regions
//! starting at the keys). Nothing here persists: PD keeps operators and their statuses in
//! memory too.
//!
//! PD blocks a call for up to a minute per split round and sleeps 100 ms × 2^i between
//! retries. Here a call answers within [`ROUND`] × (1 + its retries, at most
//! [`MAX_RETRIES`]) with what is done by then: a client that needs more asks again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::messages::{OrderOp, ShardMsg};
use super::state::PlacementState;
use crate::placement::{OpRecord, OrderRefused, Ordered, PeerRole};
use crate::proto::ErrorReply;
use crate::server::Shared;

/// What one round of a call may wait for its splits.
pub const ROUND: Duration = Duration::from_secs(1);
/// The most retries a call makes, whatever it asks (PD allows 30, each up to a minute).
pub const MAX_RETRIES: u64 = 4;
/// The most regions or keys one call may name.
pub const MAX_PER_CALL: usize = 16 * 1024;
/// Between two looks at the index for a split's regions (PD's `watchInterval`).
const WATCH: Duration = Duration::from_millis(100);
/// PD's first pause between retries, doubled each time.
const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// A scatter's answer (PD's `ScatterRegionResponse` fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scattered {
    pub finished_percentage: u64,
    /// The regions not scattered, in id order, with why.
    pub failed: Vec<(u64, String)>,
}

/// A split's answer (PD's `SplitRegionsResponse` fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub finished_percentage: u64,
    /// The regions that start at one of the keys.
    pub regions: Vec<u64>,
}

/// The checks every call here shares: placement served here, the cluster bootstrapped.
fn serving(shared: &Shared) -> Result<&PlacementState, ErrorReply> {
    let state = &*shared.placement;
    if !state.is_ready() {
        return Err(shared.membership.not_serving());
    }
    if !state.serves_bootstrapped() {
        return Err(ErrorReply::NotBootstrapped);
    }
    Ok(state)
}

fn over(what: &str, n: usize) -> Result<(), ErrorReply> {
    if n > MAX_PER_CALL {
        return Err(ErrorReply::LimitExceeded(format!(
            "{n} {what} in one call, at most {MAX_PER_CALL}"
        )));
    }
    Ok(())
}

fn deadline_for(retry_limit: u64) -> Instant {
    Instant::now() + ROUND * (1 + retry_limit.min(MAX_RETRIES) as u32)
}

/// Sends each shard its orders and collects the answers by region.
async fn order(
    state: &PlacementState,
    orders: Vec<(u64, OrderOp)>,
) -> Result<HashMap<u64, Result<Ordered, OrderRefused>>, ErrorReply> {
    let n = state.shards.len();
    let mut by_shard: BTreeMap<usize, Vec<(u64, OrderOp)>> = BTreeMap::new();
    for (id, op) in orders {
        by_shard
            .entry(crate::placement::owner(id, n))
            .or_default()
            .push((id, op));
    }
    let mut answers = HashMap::new();
    for (shard, orders) in by_shard {
        let ids: Vec<u64> = orders.iter().map(|(id, _)| *id).collect();
        let (reply, rx) = oneshot::channel();
        let shut = || ErrorReply::Unavailable("shutting down".into());
        state.shards[shard]
            .send(ShardMsg::Orders { orders, reply })
            .await
            .map_err(|_| shut())?;
        let done = rx.await.map_err(|_| shut())?;
        answers.extend(ids.into_iter().zip(done));
    }
    Ok(answers)
}

/// ScatterRegion with `ids`: PD's percentage of regions scattered (or found in place, or
/// already being scattered in this group) and the ids of the rest.
pub async fn scatter(
    shared: &Shared,
    ids: Vec<u64>,
    group: String,
    retry_limit: u64,
    skip_store_limit: bool,
) -> Result<Scattered, ErrorReply> {
    let state = serving(shared)?;
    over("regions", ids.len())?;
    let deadline = deadline_for(retry_limit);
    let group: Arc<str> = group.into();
    let mut left: Vec<u64> = ids;
    left.sort_unstable();
    left.dedup();
    let mut failed: HashMap<u64, OrderRefused> = HashMap::new();
    let mut done = 0usize;
    let mut pause = FIRST_PAUSE;
    for round in 0..=retry_limit.min(MAX_RETRIES) {
        let orders = left
            .iter()
            .map(|id| {
                let op = OrderOp::Scatter {
                    group: group.clone(),
                    skip_store_limit,
                };
                (*id, op)
            })
            .collect();
        let answers = order(state, orders).await?;
        let mut again = Vec::new();
        for id in left {
            match answers.get(&id) {
                Some(Ok(_)) => {
                    failed.remove(&id);
                    done += 1;
                }
                Some(Err(e)) => {
                    failed.insert(id, e.clone());
                    again.push(id);
                }
                None => {
                    failed.insert(id, OrderRefused::NotFound(id));
                    again.push(id);
                }
            }
        }
        left = again;
        if left.is_empty() || round == retry_limit.min(MAX_RETRIES) {
            break;
        }
        if Instant::now() + pause > deadline {
            break;
        }
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
    let mut failed: Vec<(u64, String)> = failed
        .into_iter()
        .map(|(id, why)| (id, why.to_string()))
        .collect();
    failed.sort_unstable();
    for (id, why) in &failed {
        tracing::debug!(region = id, "not scattered: {why}");
    }
    let finished_percentage = if failed.is_empty() {
        100
    } else {
        100 - (100 * failed.len() / (done + failed.len())) as u64
    };
    Ok(Scattered {
        finished_percentage,
        failed,
    })
}

/// Whether a single region named alone is unknown (PD answers that with an error, not a
/// failed region).
pub fn is_known(shared: &Shared, id: u64) -> bool {
    shared.placement.index.get(id).is_some()
}

/// GetOperator: region `id`'s operator status, from its owning shard.
pub async fn operator_status(shared: &Shared, id: u64) -> Result<Option<OpRecord>, ErrorReply> {
    let state = serving(shared)?;
    let (reply, rx) = oneshot::channel();
    let shut = || ErrorReply::Unavailable("shutting down".into());
    state
        .shard_of(id)
        .send(ShardMsg::OperatorStatus { id, reply })
        .await
        .map_err(|_| shut())?;
    rx.await.map_err(|_| shut())
}

/// The keys one region is to be split at.
struct SplitGroup {
    start: Vec<u8>,
    end: Vec<u8>,
    keys: Vec<Vec<u8>>,
}

/// PD's `groupKeysByRegion`: each key under the region holding it, unless it already starts
/// one, or the region is not fully replicated or has no leader (PD's `checkRegionValid`).
fn group_keys(state: &PlacementState, keys: &[Vec<u8>]) -> BTreeMap<u64, SplitGroup> {
    let snapshot = state.index.snapshot();
    let mut groups: BTreeMap<u64, SplitGroup> = BTreeMap::new();
    for key in keys {
        let Some(route) = snapshot.locate(key) else {
            continue;
        };
        if route.start_key() == key.as_slice() {
            continue;
        }
        let region = route.region();
        let voters = region
            .peers
            .iter()
            .filter(|p| p.role == PeerRole::Voter)
            .count();
        let replicated = voters == state.cfg.max_replicas && voters == region.peers.len();
        if !replicated || region.leader.is_none() {
            continue;
        }
        let group = groups.entry(region.id).or_insert_with(|| SplitGroup {
            start: region.start_key.clone(),
            end: region.end_key.clone(),
            keys: Vec::new(),
        });
        if !group.keys.contains(key) {
            group.keys.push(key.clone());
        }
    }
    groups
}

/// The regions within `group`'s range that start at one of its keys, and whether there is one
/// for every key (PD's `ScanRegionsByKeyRange`).
fn found(state: &PlacementState, group: &SplitGroup, into: &mut HashMap<u64, Vec<u8>>) -> bool {
    let limit = group.keys.len().saturating_mul(4).saturating_add(16);
    let routes = state.index.snapshot().scan(&group.start, &group.end, limit);
    let mut n = 0;
    for r in routes {
        if let Some(k) = group.keys.iter().find(|k| k.as_slice() == r.start_key()) {
            into.insert(r.id(), k.clone());
            n += 1;
        }
    }
    n >= group.keys.len()
}

/// SplitRegions: PD's percentage of keys some region now starts at, and those regions.
pub async fn split(
    shared: &Shared,
    keys: Vec<Vec<u8>>,
    retry_limit: u64,
) -> Result<Split, ErrorReply> {
    let state = serving(shared)?;
    over("split keys", keys.len())?;
    if let Some(e) = keys
        .iter()
        .find_map(|k| state.limits.check_key("split key", k).err())
    {
        return Err(ErrorReply::LimitExceeded(e.to_string()));
    }
    if keys.is_empty() {
        return Ok(Split {
            finished_percentage: 0,
            regions: Vec::new(),
        });
    }
    let deadline = deadline_for(retry_limit);
    let mut unprocessed = keys.clone();
    let mut new_regions: BTreeSet<u64> = BTreeSet::new();
    let mut pause = FIRST_PAUSE;
    for round in 0..=retry_limit.min(MAX_RETRIES) {
        let mut groups = group_keys(state, &unprocessed);
        let orders = groups
            .iter()
            .map(|(id, g)| (*id, OrderOp::Split(g.keys.clone())))
            .collect();
        let answers = order(state, orders).await?;
        groups.retain(|id, _| matches!(answers.get(id), Some(Ok(_))));
        let mut created: HashMap<u64, Vec<u8>> = HashMap::new();
        let mut finished: Vec<bool> = vec![false; groups.len()];
        loop {
            for (i, g) in groups.values().enumerate() {
                if !finished[i] {
                    finished[i] = found(state, g, &mut created);
                }
            }
            if finished.iter().all(|f| *f) || Instant::now() + WATCH > deadline {
                break;
            }
            tokio::time::sleep(WATCH).await;
        }
        new_regions.extend(created.keys().copied());
        unprocessed.retain(|k| !created.values().any(|c| c == k));
        if unprocessed.is_empty() || round == retry_limit.min(MAX_RETRIES) {
            break;
        }
        if Instant::now() + pause > deadline {
            break;
        }
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
    let finished_percentage = 100 - (unprocessed.len() * 100 / keys.len()) as u64;
    Ok(Split {
        finished_percentage,
        regions: new_regions.into_iter().collect(),
    })
}
