//! The first placement a test or a load run needs: one store and one region covering every
//! key, made through the client as a first TiKV store makes it (ids from `AllocId`, then
//! `Bootstrap`). Owns only that recipe; what is done with the region afterwards is the
//! caller's.

use crate::client::Client;
use crate::placement::{Region, Store, StoreState};

/// The region a first store bootstraps with: ids from `AllocId` (the store's, the region's,
/// the peer's, in that order), epoch 1/1, a single voter that leads it, over the whole key
/// space. The store's id is `peers[0].store_id`.
pub async fn first_region(client: &Client) -> anyhow::Result<Region> {
    let (store_id, region_id, peer_id) = (
        client.alloc_id().await?,
        client.alloc_id().await?,
        client.alloc_id().await?,
    );
    Ok(one_voter_region(region_id, peer_id, store_id))
}

/// Region `id` over the whole key space at epoch 1/1, with a single voter `peer_id` on
/// `store_id` that leads it: the region a cluster is bootstrapped with.
pub fn one_voter_region(id: u64, peer_id: u64, store_id: u64) -> Region {
    Region::bootstrap(id, peer_id, store_id)
}

/// Bootstraps the cluster with one store at `store_address` holding [`first_region`]; returns
/// that region.
pub async fn bootstrap_one_region(client: &Client, store_address: &str) -> anyhow::Result<Region> {
    let region = first_region(client).await?;
    let store = up_store(region.peers[0].store_id, store_address);
    client.bootstrap(store, region.clone()).await?;
    Ok(region)
}

/// Store `id` at `address`, Up, with no labels: a TiKV store as it registers, with its version
/// (a release that takes `ChangePeerV2`, as [`metapb_store`](super::metapb_store)'s).
pub fn up_store(id: u64, address: &str) -> Store {
    Store {
        id,
        address: address.into(),
        labels: vec![],
        state: StoreState::Up,
        details: std::sync::Arc::new(crate::placement::StoreDetails {
            version: "8.5.0".into(),
            ..Default::default()
        }),
    }
}
