//! `loadgen etcd` end to end, at small rates: straight at a TLS etcd with a client certificate,
//! and through a node's etcd endpoint on that etcd. Every operation is answered, and every put
//! comes back on the watch.

use std::time::Duration;

use loadgen::etcd_load::{self, EtcdLoadArgs, EtcdLoadReport};
use meridian::harness::{EtcdProcess, ServerProcess};

fn assert_clean(r: &EtcdLoadReport, puts_per_sec: u64, secs: u64) {
    assert_eq!(r.errors, 0, "{r:?}");
    // Every slot is offered and answered, whatever the machine's load (the last slot of a
    // connection may fall either side of the deadline).
    let offered = puts_per_sec * secs;
    assert!(r.puts.abs_diff(offered) <= 2, "{offered} offered: {r:?}");
    assert!(r.ranges >= r.puts, "{r:?}");
    assert_eq!(
        r.watch_events, r.puts,
        "every put is seen on the watch: {r:?}"
    );
    assert!(r.put_us.p99 > 0.0 && r.watch_us.p99 > 0.0, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_load_runs_straight_and_through_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start_tls(&dir.path().join("etcd")).unwrap();
    let files = etcd.tls().unwrap().clone();
    let (cert, key) = files.client("bench").unwrap();
    let node =
        ServerProcess::start_on_etcd(&etcd, &dir.path().join("n0"), &files.serve_flags()).unwrap();
    let tls = dir.path().join("n0/tls");
    let straight = EtcdLoadArgs {
        endpoint: etcd.endpoint(),
        ca: files.ca.clone(),
        cert,
        key,
        server_name: "localhost".into(),
        prefix: "/bench/straight/".into(),
        puts_per_sec: 100,
        ranges_per_sec: 200,
        keys: 50,
        connections: 2,
        duration: Duration::from_secs(2),
        json: None,
    };
    let through = EtcdLoadArgs {
        endpoint: format!("https://{}", node.grpc_addr.clone().unwrap()),
        ca: tls.join("ca.pem"),
        cert: tls.join("client.pem"),
        key: tls.join("client-key.pem"),
        prefix: "/bench/through/".into(),
        ..straight.clone()
    };
    for args in [straight, through] {
        let r = etcd_load::run(&args).await.unwrap();
        assert_clean(&r, 100, 2);
    }
    node.stop().unwrap();
}
