//! The placement client: bootstraps the cluster, then registers stores and splits regions
//! through the members' request path as TiKV stores do, one request at a time, asking again
//! until a member acknowledges it. Each acknowledged registration or split goes to the
//! checker, and the client reads acknowledged ones back from whichever member answers as
//! leader, now and then while faults run and all of them at the end: none may be missing.
//! Owns the client's program and its view of the regions; the verdicts are the checker's.

use std::rc::Rc;
use std::time::Duration;

use meridian::placement::{Epoch, Peer, Region, Store, StoreState};
use meridian::proto::{ErrorReply, Reply, Request, Response};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::cluster::{sim_ms, Cluster, MEMBERS};

/// How long the final read-back keeps asking for a leader once the run's load has stopped.
const SWEEP_MS: u64 = 5_000;
/// How long the client waits for an answer, as a store's client gives up on a request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What the client has asked and not yet had acknowledged: it asks again until it is.
enum Pending {
    Bootstrap(Store, Region),
    Store(Store),
    /// The regions of one split: the new one, then the one split (it keeps the right part).
    Split(Vec<Region>),
}

/// Until `until_ms`, every few tens of milliseconds: the pending request asked again, or a
/// new one drawn (a store, a split of a region drawn from `rng`, or a read of something
/// acknowledged); then every acknowledged store and region read back.
pub async fn client(cluster: Rc<Cluster>, mut rng: ChaCha8Rng, until_ms: u64) -> turmoil::Result {
    // The regions as last acknowledged, by id.
    let mut regions: Vec<Region> = Vec::new();
    let mut pending: Option<Pending> = None;
    let mut next_store = 0u64;
    while sim_ms() < until_ms {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(10..=100))).await;
        if let Some(p) = pending.take() {
            pending = ask_again(&cluster, &mut rng, p, &mut regions).await;
            continue;
        }
        if regions.is_empty() {
            pending = bootstrap(&cluster, &mut rng, &mut regions).await;
            continue;
        }
        match rng.gen_range(0..4) {
            0 => {
                let Some(Reply::Id(id)) = call(&cluster, &mut rng, Request::AllocId).await else {
                    continue;
                };
                next_store += 1;
                pending = Some(Pending::Store(store(id, next_store)));
            }
            1 | 2 => {
                let region = regions[rng.gen_range(0..regions.len())].clone();
                pending = split(&cluster, &mut rng, region).await.map(Pending::Split);
            }
            _ => read_back_one(&cluster, &mut rng).await,
        }
    }
    // Faults stopped long ago: whoever leads must have everything acknowledged.
    let stores = cluster.checker.borrow().acknowledged_stores();
    let ids = cluster.checker.borrow().acknowledged_regions();
    let deadline = until_ms + SWEEP_MS;
    for id in stores {
        while !read_store(&cluster, &mut rng, id).await && sim_ms() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for id in ids {
        while !read_region(&cluster, &mut rng, id).await && sim_ms() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Store `id`, the `n`th the client registers (its address is its own).
fn store(id: u64, n: u64) -> Store {
    Store {
        id,
        address: format!("store{n}:20160"),
        labels: Vec::new(),
        state: StoreState::Up,
        details: Default::default(),
    }
}

/// Asks `req` of the members, starting at one drawn from `rng`, until one answers other than
/// "not the leader" (or "not serving yet"); its answer and name. `None` if none does.
async fn ask(cluster: &Cluster, rng: &mut ChaCha8Rng, req: Request) -> Option<(usize, Response)> {
    let start = rng.gen_range(0..cluster.size());
    for k in 0..cluster.size() {
        let i = (start + k) % cluster.size();
        let Some(member) = cluster.member(i) else {
            continue;
        };
        // A member crashed mid-request never answers it.
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, member.request(req.clone())).await;
        match answer.ok()? {
            Response::Err(ErrorReply::NotLeader { .. }) => continue,
            Response::Err(ErrorReply::Unavailable(m)) if m.contains("not serving") => continue,
            response => return Some((i, response)),
        }
    }
    None
}

/// [`ask`], keeping only a successful reply.
async fn call(cluster: &Cluster, rng: &mut ChaCha8Rng, req: Request) -> Option<Reply> {
    match ask(cluster, rng, req).await {
        Some((_, Response::Ok(reply))) => Some(reply),
        _ => None,
    }
}

/// The first store and the region over every key, on ids the members hand out; `None` (and
/// the region taken from the leader) if the cluster turns out bootstrapped already, by an
/// earlier try whose acknowledgement was lost.
async fn bootstrap(
    cluster: &Cluster,
    rng: &mut ChaCha8Rng,
    regions: &mut Vec<Region>,
) -> Option<Pending> {
    let mut ids = [0u64; 3];
    for id in &mut ids {
        let Some(Reply::Id(got)) = call(cluster, rng, Request::AllocId).await else {
            return None;
        };
        *id = got;
    }
    let [store_id, region_id, peer_id] = ids;
    let region = Region::bootstrap(region_id, peer_id, store_id);
    ask_again(
        cluster,
        rng,
        Pending::Bootstrap(store(store_id, 0), region),
        regions,
    )
    .await
}

/// Asks `pending` again; `None` once acknowledged (the checker told) or given up on.
async fn ask_again(
    cluster: &Cluster,
    rng: &mut ChaCha8Rng,
    pending: Pending,
    regions: &mut Vec<Region>,
) -> Option<Pending> {
    let req = match &pending {
        Pending::Bootstrap(store, region) => Request::Bootstrap {
            store: Box::new(store.clone()),
            region: region.clone(),
        },
        Pending::Store(store) => Request::PutStore {
            store: Box::new(store.clone()),
        },
        Pending::Split(split) => Request::ReportBatchSplit {
            regions: split.clone(),
        },
    };
    let Some((i, response)) = ask(cluster, rng, req).await else {
        return Some(pending);
    };
    let at = sim_ms();
    let member = MEMBERS[i];
    match (response, pending) {
        (Response::Ok(_), Pending::Bootstrap(store, region)) => {
            cluster.note(at, format!("{member} acknowledged the bootstrap"));
            let mut checker = cluster.checker.borrow_mut();
            checker.store_acknowledged(at, member, store.id);
            checker.region_acknowledged(at, member, region.id, region.epoch.version);
            regions.push(region);
            None
        }
        (Response::Ok(_), Pending::Store(store)) => {
            cluster.note(at, format!("{member} acknowledged store {}", store.id));
            cluster
                .checker
                .borrow_mut()
                .store_acknowledged(at, member, store.id);
            None
        }
        (Response::Ok(_), Pending::Split(split)) => {
            let ids: Vec<String> = split.iter().map(|r| r.id.to_string()).collect();
            cluster.note(
                at,
                format!("{member} acknowledged the split into {}", ids.join(",")),
            );
            let mut checker = cluster.checker.borrow_mut();
            for r in split {
                checker.region_acknowledged(at, member, r.id, r.epoch.version);
                match regions.iter_mut().find(|known| known.id == r.id) {
                    Some(known) => *known = r,
                    None => regions.push(r),
                }
            }
            None
        }
        // An earlier try was applied and its answer lost: take the region as the leader has it.
        (Response::Err(ErrorReply::InvalidArgument(m)), Pending::Bootstrap(..))
            if m.contains("already bootstrapped") =>
        {
            let key = Vec::new();
            if let Some(Reply::Region(Some(r))) =
                call(cluster, rng, Request::GetRegion { key }).await
            {
                cluster.note(at, format!("bootstrapped already: region {}", r.id));
                regions.push(r);
            }
            None
        }
        // "Not durable yet", "no leader", a timeout: the same request again.
        (Response::Err(ErrorReply::Unavailable(_) | ErrorReply::Internal(_)), pending) => {
            Some(pending)
        }
        (Response::Err(e), _) => {
            // Refused for good: the client's view may be behind, so it drops the request.
            cluster.note(at, format!("{member} refused a placement request: {e}"));
            None
        }
    }
}

/// A key the client splits at: a number's big-endian bytes (ordered as the numbers are).
fn key(n: u64) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

/// A region's key range as numbers, the open ends as 0 and `u64::MAX`.
fn bounds(r: &Region) -> Option<(u64, u64)> {
    let number = |k: &[u8], open: u64| match k {
        [] => Some(open),
        k => k.try_into().ok().map(u64::from_be_bytes),
    };
    Some((number(&r.start_key, 0)?, number(&r.end_key, u64::MAX)?))
}

/// The report of splitting `region` in two at its middle, on ids the leader hands out for it
/// (`AskBatchSplit`); `None` if it cannot be split or no ids came.
async fn split(cluster: &Cluster, rng: &mut ChaCha8Rng, region: Region) -> Option<Vec<Region>> {
    let (lo, hi) = bounds(&region)?;
    if hi - lo < 2 {
        return None;
    }
    let at = key(lo + (hi - lo) / 2);
    let ask = Request::AskBatchSplit {
        region: region.clone(),
        count: 1,
    };
    let Some(Reply::Splits(ids)) = call(cluster, rng, ask).await else {
        return None;
    };
    let ids = ids.into_iter().next()?;
    let epoch = Epoch {
        conf_ver: region.epoch.conf_ver,
        version: region.epoch.version + 1,
    };
    let left = Region {
        id: ids.region_id,
        start_key: region.start_key.clone(),
        end_key: at.clone(),
        epoch,
        peers: region
            .peers
            .iter()
            .zip(&ids.peer_ids)
            .map(|(p, id)| Peer { id: *id, ..*p })
            .collect(),
        leader: ids.peer_ids.first().copied(),
    };
    let right = Region {
        start_key: at,
        epoch,
        ..region
    };
    Some(vec![left, right])
}

/// Reads one acknowledged store or region back from the leader.
async fn read_back_one(cluster: &Cluster, rng: &mut ChaCha8Rng) {
    let (stores, regions) = {
        let checker = cluster.checker.borrow();
        (
            checker.acknowledged_stores(),
            checker.acknowledged_regions(),
        )
    };
    if rng.gen_bool(0.5) && !stores.is_empty() {
        let id = stores[rng.gen_range(0..stores.len())];
        read_store(cluster, rng, id).await;
    } else if !regions.is_empty() {
        let id = regions[rng.gen_range(0..regions.len())];
        read_region(cluster, rng, id).await;
    }
}

/// Asks the leader for store `id` and tells the checker what it has; `false` if no member
/// answered.
async fn read_store(cluster: &Cluster, rng: &mut ChaCha8Rng, id: u64) -> bool {
    let Some((i, Response::Ok(Reply::Store(found)))) =
        ask(cluster, rng, Request::GetStore { id }).await
    else {
        return false;
    };
    let at = sim_ms();
    cluster
        .checker
        .borrow_mut()
        .store_read(at, MEMBERS[i], id, found.is_some());
    true
}

/// Asks the leader for region `id` and tells the checker what it has; `false` if no member
/// answered.
async fn read_region(cluster: &Cluster, rng: &mut ChaCha8Rng, id: u64) -> bool {
    let Some((i, Response::Ok(Reply::Region(found)))) =
        ask(cluster, rng, Request::GetRegionById { id }).await
    else {
        return false;
    };
    let at = sim_ms();
    let version = found.map(|r| r.epoch.version);
    cluster
        .checker
        .borrow_mut()
        .region_read(at, MEMBERS[i], id, version);
    true
}
