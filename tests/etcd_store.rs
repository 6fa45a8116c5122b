//! The etcd meta store against a real etcd: round trips, guarded writes that refuse once the
//! leader key changed, and errors (not hangs) while etcd is down.

use std::time::{Duration, Instant};

use meridian::harness::EtcdProcess;
use meridian::meta::{EtcdStore, LeaderGuard, MetaError, MetaStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_and_guarded_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    let store = EtcdStore::connect(&[etcd.endpoint()]).await.unwrap();

    assert_eq!(store.get(b"/t/a").await.unwrap(), None);
    store.put(b"/t/a", b"1").await.unwrap();
    assert_eq!(store.get(b"/t/a").await.unwrap(), Some(b"1".to_vec()));
    store.delete(b"/t/a").await.unwrap();
    assert_eq!(store.get(b"/t/a").await.unwrap(), None);

    // create: the first value wins, later ones read it back.
    assert_eq!(store.create(b"/t/id", b"first").await.unwrap(), b"first");
    assert_eq!(store.create(b"/t/id", b"second").await.unwrap(), b"first");

    store.put(b"/t/leader", b"node-1").await.unwrap();
    let leader = store.guarded(LeaderGuard {
        key: b"/t/leader".to_vec(),
        value: b"node-1".to_vec(),
    });
    leader.put(b"/t/limit", b"100").await.unwrap();
    assert_eq!(store.get(b"/t/limit").await.unwrap(), Some(b"100".to_vec()));

    // Another node takes over: the old leader's writes are refused and change nothing.
    store.put(b"/t/leader", b"node-2").await.unwrap();
    assert_eq!(
        leader.put(b"/t/limit", b"50").await,
        Err(MetaError::NotLeader)
    );
    assert_eq!(leader.delete(b"/t/limit").await, Err(MetaError::NotLeader));
    assert_eq!(store.get(b"/t/limit").await.unwrap(), Some(b"100".to_vec()));
    // No leader key at all is no leadership either.
    store.delete(b"/t/leader").await.unwrap();
    assert_eq!(
        leader.put(b"/t/limit", b"50").await,
        Err(MetaError::NotLeader)
    );
}

/// A flush of many region buckets is one batch of several MiB; etcd refuses any request over
/// its `--max-request-bytes` (1.5 MiB by default), so the batch must reach it in pieces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_larger_than_etcds_request_limit_is_written_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    let store = EtcdStore::connect(&[etcd.endpoint()]).await.unwrap();
    store.put(b"/t/leader", b"node-1").await.unwrap();
    let leader = store.guarded(LeaderGuard {
        key: b"/t/leader".to_vec(),
        value: b"node-1".to_vec(),
    });
    let value = |i: u32| vec![(i % 251) as u8; 40 << 10];
    let ops = (0..128u32)
        .map(|i| (format!("/t/bucket/{i:04}").into_bytes(), Some(value(i))))
        .collect();
    leader.batch(ops).await.unwrap();
    let kept = store.scan(b"/t/bucket/", 1000).await.unwrap();
    assert_eq!(kept.len(), 128);
    for (i, (key, v)) in kept.iter().enumerate() {
        assert_eq!(key, format!("/t/bucket/{i:04}").as_bytes());
        assert_eq!(v, &value(i as u32), "bucket {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_down_is_an_error_within_the_timeout_and_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let mut etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    let store = EtcdStore::connect(&[etcd.endpoint()]).await.unwrap();
    store.put(b"/t/k", b"v").await.unwrap();

    etcd.stop().unwrap();
    let started = Instant::now();
    assert!(matches!(
        store.put(b"/t/k", b"w").await,
        Err(MetaError::Io(_))
    ));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );

    etcd.resume().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match store.get(b"/t/k").await {
            Ok(v) => {
                assert_eq!(v, Some(b"v".to_vec()), "data survives the restart");
                break;
            }
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("etcd did not come back: {e}"),
        }
    }
}
