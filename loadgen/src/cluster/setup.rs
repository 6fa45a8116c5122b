//! Building the simulated cluster: bootstrap if needed, the stores registered, the first
//! region split until there are as many as asked, each region's replicas spread over the
//! stores, and reading back what exists. Owns only the cluster's shape; heartbeating it is
//! `cluster`'s.

use meridian::client::Client;
use meridian::harness::{one_voter_region, up_store};
use meridian::placement::{Epoch, Peer, PeerRole, Region, RegionStats};
use meridian::proto::{MAX_BATCH_SPLIT, MAX_SCAN_REGIONS};

/// The start key of simulated region `i` of `n`: "t" and a big-endian share of the u64 space.
pub fn region_key(i: u64, n: u64) -> Vec<u8> {
    if i == 0 {
        return Vec::new();
    }
    let step = u64::MAX / n.max(1);
    let mut k = b"t".to_vec();
    k.extend_from_slice(&(i * step).to_be_bytes());
    k
}

fn peers_for(i: u64, ids: &[u64], stores: &[u64]) -> Vec<Peer> {
    ids.iter()
        .enumerate()
        .map(|(m, id)| Peer {
            id: *id,
            store_id: stores[((i + m as u64) % stores.len() as u64) as usize],
            role: PeerRole::Voter,
        })
        .collect()
}

/// Brings the cluster to `regions` regions over `stores` stores; returns them and the stores.
pub async fn setup(
    client: &Client,
    n_stores: u64,
    n_regions: u64,
) -> anyhow::Result<(Vec<u64>, Vec<Region>)> {
    anyhow::ensure!(n_stores >= 3, "at least 3 stores (regions have 3 replicas)");
    if !client.is_bootstrapped().await? {
        let mut stores = Vec::new();
        for _ in 0..n_stores {
            stores.push(client.alloc_id().await?);
        }
        let store = |id: u64| up_store(id, &format!("sim-store-{id}:20160"));
        let (rid, p0) = (client.alloc_id().await?, client.alloc_id().await?);
        let first = one_voter_region(rid, p0, stores[0]);
        client.bootstrap(store(stores[0]), first.clone()).await?;
        for id in &stores[1..] {
            client.put_store(store(*id)).await?;
        }
        // Two more replicas, as a store would after the replica checker's AddPeer operators.
        let ids = [p0, client.alloc_id().await?, client.alloc_id().await?];
        let full = Region {
            epoch: Epoch {
                conf_ver: 3,
                version: 1,
            },
            peers: peers_for(0, &ids, &stores),
            ..first
        };
        client
            .region_heartbeat(full, RegionStats::default())
            .await?;
    }
    let stores: Vec<u64> = client
        .get_all_stores()
        .await?
        .iter()
        .map(|s| s.store.id)
        .collect();
    let mut regions = scan_all(client).await?;
    anyhow::ensure!(!regions.is_empty(), "bootstrapped but no region");
    // Split the last region (which keeps its id and the range to the end) until enough exist.
    while (regions.len() as u64) < n_regions {
        let have = regions.len() as u64;
        let count = (n_regions - have).min(u64::from(MAX_BATCH_SPLIT));
        let Some(mut last) = regions.pop() else { break };
        let splits = client.ask_batch_split(last.clone(), count as u32).await?;
        let mut report = Vec::with_capacity(splits.len() + 1);
        let mut start = last.start_key.clone();
        for (k, s) in splits.iter().enumerate() {
            let i = have - 1 + k as u64;
            let end = region_key(i + 1, n_regions);
            anyhow::ensure!(
                end > start,
                "the cluster's regions were not made by `loadgen cluster --regions {n_regions}`"
            );
            let peers = peers_for(i, &s.peer_ids, &stores);
            report.push(Region {
                id: s.region_id,
                start_key: std::mem::replace(&mut start, end.clone()),
                end_key: end,
                epoch: Epoch {
                    conf_ver: last.epoch.conf_ver,
                    version: last.epoch.version + count,
                },
                leader: Some(peers[0].id),
                peers,
            });
        }
        last.start_key = start;
        last.epoch.version += count;
        report.push(last);
        client.report_batch_split(report.clone()).await?;
        regions.extend(report);
    }
    Ok((stores, regions))
}

/// Every region, in key order, read page by page.
pub async fn scan_all(client: &Client) -> anyhow::Result<Vec<Region>> {
    let mut all: Vec<Region> = Vec::new();
    let mut from = Vec::new();
    loop {
        let page = client.scan_regions(&from, b"", MAX_SCAN_REGIONS).await?;
        let Some(last) = page.last() else { break };
        let end = last.end_key.clone();
        all.extend(page);
        if end.is_empty() {
            break;
        }
        from = end;
    }
    Ok(all)
}
