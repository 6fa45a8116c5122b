//! `loadgen cluster` and `loadgen route` against a real server: the simulated cluster is built
//! (bootstrap, batch splits), heartbeated without errors, found again by a second run, routes
//! every random key; and once the simulated stores fall silent past max-store-down-time, they
//! are Down and a heartbeat gets a RemovePeer operator.

mod common;

use std::time::Duration;

use loadgen::args::Protocol;
use loadgen::cluster::{self, ClusterArgs};
use loadgen::route::{self, RouteArgs, Rpc};
use meridian::placement::{RegionStats, StoreState};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_cluster_heartbeats_routes_and_sees_stores_go_down() {
    let tmp = tempfile::tempdir().unwrap();
    let config = "[schedule]\nmax_store_down_time_ms = 1500\n";
    let (server, target) = common::start_server(tmp.path(), config);
    let mut args = ClusterArgs {
        target: target.clone(),
        stores: 6,
        regions: 3_000,
        duration: Duration::from_secs(1),
        rate: None,
        connections: 2,
        streams: 2,
        depth: 32,
        protocol: Protocol::Quic,
        json: None,
        plot: None,
        no_pin: false,
        carry_out_operators: false,
        splits_per_sec: None,
        store_heartbeat_interval: Duration::from_secs(1),
        catch_up: Duration::from_millis(200),
    };
    let first = cluster::run(&args).await.unwrap();
    assert_eq!((first.stores, first.regions), (6, 3_000));
    assert_eq!(first.errors, 0);
    assert!(first.heartbeats >= 3_000, "{first:?}");

    // A second run finds the same cluster instead of building another, and paces itself.
    args.rate = Some(2_000);
    let second = cluster::run(&args).await.unwrap();
    assert_eq!((second.regions, second.errors), (3_000, 0));
    assert!(second.heartbeats_per_sec < 3_000.0, "{second:?}");

    // The same heartbeats on kvproto's RegionHeartbeat stream, as a TiKV store sends them.
    // PD answers only operators and refusals, so the run ends by closing each stream and
    // waiting for the server to end its side: every heartbeat counted was handled.
    let admin = server.admin().unwrap();
    let handled = || {
        let (_, text) = tokio::task::block_in_place(|| admin.get("/metrics")).unwrap();
        text.lines()
            .filter_map(|l| l.strip_prefix("meridian_requests_total{"))
            .filter(|l| l.contains("kind=\"region_heartbeat\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let before = handled();
    args.rate = None;
    args.protocol = Protocol::Grpc;
    args.duration = Duration::from_millis(500);
    let over_grpc = cluster::run(&args).await.unwrap();
    assert_eq!(
        (over_grpc.regions, over_grpc.errors),
        (3_000, 0),
        "{over_grpc:?}"
    );
    assert!(over_grpc.heartbeats > 0, "{over_grpc:?}");
    let after = handled();
    assert!(
        after - before >= over_grpc.heartbeats as f64,
        "{} heartbeats sent over gRPC, {} handled",
        over_grpc.heartbeats,
        after - before
    );
    args.protocol = Protocol::Quic;

    let routed = route::run(&RouteArgs {
        target: target.clone(),
        duration: Duration::from_millis(500),
        connections: 1,
        streams: 2,
        depth: 16,
        json: None,
        protocol: Protocol::Quic,
        rpc: Rpc::GetRegion,
        plot: None,
        follower_reads: false,
    })
    .await
    .unwrap();
    assert!(routed.lookups > 0);
    assert_eq!((routed.misses, routed.errors), (0, 0), "{routed:?}");
    // The same lookups through the PD-compatible gRPC front end (same address, over TCP).
    let over_grpc = route::run(&RouteArgs {
        target: target.clone(),
        duration: Duration::from_millis(500),
        connections: 1,
        streams: 1,
        depth: 8,
        json: None,
        protocol: Protocol::Grpc,
        rpc: Rpc::GetRegion,
        plot: None,
        follower_reads: false,
    })
    .await
    .unwrap();
    assert!(over_grpc.lookups > 0);
    assert_eq!(
        (over_grpc.misses, over_grpc.errors),
        (0, 0),
        "{over_grpc:?}"
    );
    // The same lookups as PD's own client sends GetRegion by default: batched into QueryRegion
    // messages on one stream, every reply checked to route each key to a region holding it.
    let batched = route::run(&RouteArgs {
        target: target.clone(),
        duration: Duration::from_millis(500),
        connections: 1,
        streams: 2,
        depth: 32,
        json: None,
        protocol: Protocol::Grpc,
        rpc: Rpc::QueryRegion,
        plot: None,
        follower_reads: false,
    })
    .await
    .unwrap();
    assert!(batched.lookups > 0);
    assert_eq!((batched.misses, batched.errors), (0, 0), "{batched:?}");
    // The transport's floor: GetMembers, answered with almost no work, over the same calls.
    let members = route::run(&RouteArgs {
        target: target.clone(),
        duration: Duration::from_millis(300),
        connections: 1,
        streams: 1,
        depth: 8,
        json: None,
        protocol: Protocol::Grpc,
        rpc: Rpc::GetMembers,
        plot: None,
        follower_reads: false,
    })
    .await
    .unwrap();
    assert!(members.lookups > 0);
    assert_eq!((members.misses, members.errors), (0, 0), "{members:?}");

    // Splits beside the heartbeats, each acknowledged, at the pace asked; the next run finds
    // the regions they made.
    args.rate = Some(2_000);
    args.splits_per_sec = Some(300.0);
    args.duration = Duration::from_secs(1);
    let split = cluster::run(&args).await.unwrap();
    assert_eq!(split.errors, 0, "{split:?}");
    assert!((150..=330).contains(&split.splits), "{split:?}");
    args.splits_per_sec = None;
    args.duration = Duration::from_millis(200);
    let after = cluster::run(&args).await.unwrap();
    assert_eq!(after.regions, 3_000 + split.splits, "{after:?}");

    // The simulated stores are silent now: Down after 1.5 s. With every store Down there is
    // nowhere to put a replacement, and a peer is never removed before its replacement is in
    // (PD's replica checker): no operator.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let client = target.connect().await.unwrap();
    let stores = client.get_all_stores().await.unwrap();
    assert!(
        stores.iter().all(|s| s.store.state == StoreState::Down),
        "{stores:?}"
    );
    let region = client.get_region(b"t\x10").await.unwrap().unwrap();
    let op = client
        .region_heartbeat(region.clone(), RegionStats::default())
        .await
        .unwrap();
    assert_eq!(op, None, "{region:?}");
    server.stop().unwrap();
}
