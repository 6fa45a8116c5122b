//! A PD gRPC client to a harness node as PD's own clients hold one: the request header that
//! carries the cluster id, a connection that waits until placement has loaded (a node serves
//! before it has, and answers `Unavailable` until then), and the one id a TiKV store asks
//! `AllocId` for. Owns only reaching the node and that call; what else is called on it, and
//! what the answers must be, is the test's.

use std::time::{Duration, Instant};

use tonic::transport::Channel;
use tonic::Code;

use crate::kvproto::pdpb::{self, pd_client::PdClient};
use crate::pd_grpc;
use crate::tls::Trust;

/// The header of every PD request: the cluster id, and nothing else set.
pub fn pd_header(cluster_id: u64) -> Option<pdpb::RequestHeader> {
    Some(pdpb::RequestHeader {
        cluster_id,
        ..Default::default()
    })
}

/// A PD client to `addr` with `trust`, and the cluster id the member answers GetMembers
/// with, once IsBootstrapped answers: retried while it is `Unavailable`, up to `timeout`.
pub async fn connect_when_placement_loads(
    addr: &str,
    trust: &Trust,
    timeout: Duration,
) -> anyhow::Result<(PdClient<Channel>, u64)> {
    let mut pd = pd_grpc::connect(addr, trust).await?;
    let cluster_id = pd_grpc::cluster_id(&mut pd).await?;
    let deadline = Instant::now() + timeout;
    while let Err(e) = pd
        .is_bootstrapped(pdpb::IsBootstrappedRequest {
            header: pd_header(cluster_id),
        })
        .await
    {
        anyhow::ensure!(
            e.code() == Code::Unavailable && Instant::now() < deadline,
            "placement did not come up at {addr}: {e}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok((pd, cluster_id))
}

/// One id from `AllocId`, asked for as a TiKV store asks (count 0): an error when the call
/// fails, its reply has no header or PD's error in it, or it sets the count, which PD sets only
/// for batches.
pub async fn alloc_id(pd: &mut PdClient<Channel>, cluster_id: u64) -> anyhow::Result<u64> {
    let r = pd
        .alloc_id(pdpb::AllocIdRequest {
            header: pd_header(cluster_id),
            count: 0,
        })
        .await?
        .into_inner();
    let header = r
        .header
        .ok_or_else(|| anyhow::anyhow!("AllocId: no reply header"))?;
    if let Some(e) = header.error {
        anyhow::bail!("AllocId: PD's error {e:?}");
    }
    anyhow::ensure!(
        r.count == 0,
        "AllocId: count {} for one id (PD sets it only for batches)",
        r.count
    );
    Ok(r.id)
}

/// Bootstraps the cluster through `pd` as a TiKV store does: a store and one region over every
/// key with one voter on it, from three ids AllocId hands out. Returns the store and the region.
pub async fn bootstrap_over_grpc(
    pd: &mut PdClient<Channel>,
    cluster_id: u64,
) -> anyhow::Result<(
    crate::kvproto::metapb::Store,
    crate::kvproto::metapb::Region,
)> {
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(alloc_id(pd, cluster_id).await?);
    }
    let store = crate::kvproto::metapb::Store {
        id: ids[0],
        address: "tikv-1:20160".into(),
        version: "8.5.0".into(),
        ..Default::default()
    };
    let region = super::metapb_region(
        ids[1],
        b"",
        b"",
        (1, 1),
        vec![super::metapb_peer(ids[2], ids[0])],
    );
    let boot = pd
        .bootstrap(pdpb::BootstrapRequest {
            header: pd_header(cluster_id),
            store: Some(store.clone()),
            region: Some(region.clone()),
        })
        .await?
        .into_inner();
    if let Some(e) = boot.header.and_then(|h| h.error) {
        anyhow::bail!("Bootstrap: PD's error {e:?}");
    }
    Ok((store, region))
}
