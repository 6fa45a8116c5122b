//! Follower reads of routing over QUIC, on a cluster of three on etcd: a stream marked with
//! `AllowFollowerHandle` (the QUIC spelling of PD's `pd-allow-follower-handle`) has its routing
//! reads answered by a follower in sync from its copy; an unmarked stream is refused with
//! `NotLeader`, as before. The Rust client with `follower_reads` spreads its routing reads
//! over every member, each answer a region the leader had, and the followers serve a share.
//! The routing changes are made through the leader's gRPC (`follower_reads::Splitter`).

use std::collections::HashSet;

use meridian::client::{Client, ClientOptions};
use meridian::harness::Cluster;
use meridian::placement::Region;
use meridian::proto::{ErrorReply, Reply, Request, Response};

use super::follower_reads::{bootstrapped, Seen};
use super::*;

fn seen(r: &Region) -> Seen {
    Seen::Region(
        r.id,
        r.start_key.clone(),
        r.end_key.clone(),
        r.epoch.version,
    )
}

/// A client of member `i` alone, which it asks first.
async fn client_of(c: &Cluster, i: usize, follower_reads: bool) -> Client {
    let mut opts = ClientOptions::new(vec![c.nodes[i].process().client_addr.clone()], c.trust());
    opts.follower_reads = follower_reads;
    Client::connect(opts).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_quic_stream_is_answered_by_a_follower_in_sync() {
    let tmp = tempfile::tempdir().unwrap();
    let (c, first, mut pd, _, mut splitter) = bootstrapped(tmp.path()).await;
    let follower = (0..3).find(|i| *i != first).unwrap();

    let mut had: HashSet<Seen> = HashSet::new();
    had.insert(splitter.rightmost());
    had.extend(splitter.split(&mut pd, 0..10).await);

    // Unmarked, the follower refuses a routing read with NotLeader, as it always did.
    let direct = client_of(&c, follower, false).await;
    let mut stream = direct.open_stream().await.unwrap();
    let get = |key: &[u8]| Request::GetRegion { key: key.to_vec() };
    match stream.call(&get(b"k0003")).await.unwrap() {
        Response::Err(ErrorReply::NotLeader { .. }) => {}
        other => panic!("an unmarked read was answered by a follower: {other:?}"),
    }

    // Marked, the same stream's reads are answered from the follower's copy once it is in
    // sync; every answer is a region the leader had, never one it did not.
    assert_eq!(
        stream.call(&Request::AllowFollowerHandle).await.unwrap(),
        Response::Ok(Reply::Done)
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let answered = loop {
        match stream.call(&get(b"k0003")).await.unwrap() {
            Response::Ok(Reply::Region(Some(r))) => break r,
            Response::Err(ErrorReply::NotLeader { .. }) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => panic!("a marked read on a follower: {other:?}"),
        }
    };
    assert!(had.contains(&seen(&answered)), "invented: {answered:?}");
    let before = c.requests_handled(follower, "placement").unwrap();
    had.extend(splitter.split(&mut pd, 10..30).await);
    for key in [&b""[..], b"k0005", b"k0020", b"zz"] {
        for req in [get(key), Request::GetPrevRegion { key: key.to_vec() }] {
            match stream.call(&req).await.unwrap() {
                Response::Ok(Reply::Region(Some(r))) => {
                    assert!(had.contains(&seen(&r)), "invented: {r:?}")
                }
                Response::Ok(Reply::Region(None)) => {}
                other => panic!("{req:?} on a follower in sync: {other:?}"),
            }
        }
    }
    match stream
        .call(&Request::ScanRegions {
            start: Vec::new(),
            end: Vec::new(),
            limit: 0,
        })
        .await
        .unwrap()
    {
        Response::Ok(Reply::Regions(rs)) => {
            assert!(!rs.is_empty());
            for r in &rs {
                assert!(had.contains(&seen(r)), "invented: {r:?}");
            }
        }
        other => panic!("a scan on a follower in sync: {other:?}"),
    }
    assert!(
        c.requests_handled(follower, "placement").unwrap() >= before + 9,
        "the follower served the marked reads itself"
    );
    // A write on a marked stream is still the leader's: the follower refuses it.
    match stream.call(&Request::AllocId).await.unwrap() {
        Response::Err(ErrorReply::NotLeader { .. }) => {}
        other => panic!("a follower answered AllocId: {other:?}"),
    }

    // The client spreads its routing reads: every member serves some, every answer is a
    // region the leader had, and once the copies caught up each answer is the leader's. The
    // other follower may still be catching up (then it refuses, and the client asks the
    // leader): the reads go on until it serves its share too.
    let spread = client_of(&c, first, true).await;
    let leader_client = client_of(&c, first, false).await;
    let served_before: Vec<u64> = (0..3)
        .map(|i| c.requests_handled(i, "placement").unwrap())
        .collect();
    let keys: Vec<Vec<u8>> = (0..30u32)
        .map(|n| format!("k{n:04}").into_bytes())
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut same = true;
        for k in &keys {
            let got = spread.get_region_uncached(k).await.unwrap().unwrap();
            assert!(had.contains(&seen(&got)), "invented: {got:?}");
            let want = leader_client.get_region_uncached(k).await.unwrap().unwrap();
            same &= got == want;
        }
        let idle: Vec<usize> = (0..3)
            .filter(|i| *i != first)
            .filter(|&i| c.requests_handled(i, "placement").unwrap() <= served_before[i] + 5)
            .collect();
        if same && idle.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the copies did not catch up ({}), or members {idle:?} served none of the spread reads",
            if same { "they did" } else { "they did not" }
        );
    }
}
