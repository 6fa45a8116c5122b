//! Failpoints on a real single-node server (the embedded store), armed through its admin API
//! (src/failpoint.rs; needs the `failpoints` feature, which the test command turns on):
//! - a disk that fails (ENOSPC on the log write, EIO on its fsync) while the TSO window and the
//!   id block are being renewed: the node stops handing out timestamps and ids once what was
//!   persisted runs out, says why in its log, and after a restart hands out nothing twice;
//! - SIGKILL at each step of compaction: every acknowledged write survives the restart, and
//!   timestamps and ids keep going up.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use meridian::client::{Client, ClientOptions};
use meridian::failpoint::points;
use meridian::harness::{bootstrap_one_region, test_binary, up_store, ServerProcess};
use meridian::placement::Region;
use meridian::proto::{Reply, Request, Response};

async fn connect(server: &ServerProcess, budget: Duration) -> Client {
    let mut opts = ClientOptions::new(vec![server.client_addr.clone()], server.trust());
    opts.retry_budget = budget;
    Client::connect(opts).await.unwrap()
}

/// Timestamps in batches of 4,096 (as PD's clients ask) from 4 streams until every stream is
/// refused (or `limit` passes): the ranges handed out, each stream's above its last. Batches,
/// so that the window's last millisecond (2^18 logical values) runs out in 64 requests
/// whatever the machine's speed.
async fn timestamps_until_refused(client: &Client, limit: Duration) -> (Vec<(u64, u64)>, bool) {
    let deadline = Instant::now() + limit;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let mut stream = client.open_stream().await.unwrap();
        tasks.push(tokio::spawn(async move {
            let mut got: Vec<(u64, u64)> = Vec::new();
            while Instant::now() < deadline {
                match stream.call(&Request::Tso { count: 4096 }).await {
                    Ok(Response::Ok(Reply::Tso { first, count })) if count > 0 => {
                        let last = first + u64::from(count) - 1;
                        if let Some(&(_, before)) = got.last() {
                            assert!(first > before, "{first} after {before}");
                        }
                        got.push((first, last));
                    }
                    _ => return (got, true),
                }
            }
            (got, false)
        }));
    }
    let mut all = Vec::new();
    let mut refused = true;
    for t in tasks {
        let (got, r) = t.await.unwrap();
        all.extend(got);
        refused &= r;
    }
    (all, refused)
}

/// Ids from 4 concurrent callers, 512 at a time (a split of `region` into 257, each new
/// region an id and its one peer another), until every caller is refused (or `limit` passes).
async fn ids_until_refused(
    client: &Arc<Client>,
    region: &Region,
    limit: Duration,
) -> (Vec<u64>, bool) {
    let deadline = Instant::now() + limit;
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (client, region) = (client.clone(), region.clone());
            tokio::spawn(async move {
                let mut got = Vec::new();
                while Instant::now() < deadline {
                    match client.ask_batch_split(region.clone(), 256).await {
                        Ok(splits) => {
                            for s in splits {
                                got.push(s.region_id);
                                got.extend(s.peer_ids);
                            }
                        }
                        Err(_) => return (got, true),
                    }
                }
                (got, false)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut refused = true;
    for t in tasks {
        let (got, r) = t.await.unwrap();
        all.extend(got);
        refused &= r;
    }
    (all, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_disk_stops_timestamps_and_ids_and_a_restart_repeats_none() {
    for (point, errno, says) in [
        (points::WAL_WRITE, "enospc", "No space left on device"),
        (points::WAL_FSYNC, "eio", "Input/output error"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("node");
        let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
        let client = Arc::new(connect(&server, Duration::from_secs(1)).await);
        let region = bootstrap_one_region(&client, "127.0.0.1:20160")
            .await
            .unwrap();
        let mut handed_ts = Vec::new();
        let mut handed_ids = Vec::new();
        for _ in 0..50 {
            let ts = client.get_ts().await.unwrap().as_u64();
            handed_ts.push((ts, ts));
            handed_ids.push(client.alloc_id().await.unwrap());
        }

        server
            .failpoint(point, &format!("return({errno})"))
            .unwrap();
        // The window (3 s) and the id block (100,000 ids) were persisted before the fault:
        // they are served to their end, and not one step further.
        let (ts, ts_refused) = timestamps_until_refused(&client, Duration::from_secs(30)).await;
        assert!(ts_refused, "{point}: timestamps never stopped");
        let (ids, ids_refused) = ids_until_refused(&client, &region, Duration::from_secs(60)).await;
        assert!(ids_refused, "{point}: ids never stopped");
        println!(
            "{point}={errno}: {} more timestamps and {} more ids before the node stopped",
            ts.iter().map(|(first, last)| last - first + 1).sum::<u64>(),
            ids.len()
        );
        handed_ts.extend(ts);
        handed_ids.extend(ids);
        let log = server.log_text();
        assert!(log.contains(says), "{point}: the log does not say {says:?}");
        assert!(
            log.contains("fail-stop"),
            "{point}: the log does not say fail-stop"
        );

        // A restart replays the log: nothing handed out before is handed out again.
        server.kill().unwrap();
        let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
        let client = connect(&server, Duration::from_secs(10)).await;
        let (max_ts, max_id) = (
            handed_ts.iter().map(|&(_, last)| last).max().unwrap(),
            *handed_ids.iter().max().unwrap(),
        );
        handed_ts.sort_unstable();
        for pair in handed_ts.windows(2) {
            assert!(
                pair[1].0 > pair[0].1,
                "{point}: a timestamp was handed out twice: {pair:?}"
            );
        }
        let unique: HashSet<u64> = handed_ids.iter().copied().collect();
        assert_eq!(
            unique.len(),
            handed_ids.len(),
            "{point}: an id was handed out twice"
        );
        for _ in 0..50 {
            let ts = client.get_ts().await.unwrap().as_u64();
            assert!(
                ts > max_ts,
                "{point}: {ts} after a restart, not above {max_ts}"
            );
            let id = client.alloc_id().await.unwrap();
            assert!(
                id > max_id,
                "{point}: id {id} after a restart, not above {max_id}"
            );
        }
        server.stop().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_each_compaction_step_loses_no_acknowledged_write() {
    for point in [
        points::SNAPSHOT_WRITE,
        points::SNAPSHOT_RENAME,
        points::WAL_TRUNCATE,
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("node");
        let mut server =
            ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
        let client = Arc::new(connect(&server, Duration::from_secs(2)).await);
        bootstrap_one_region(&client, "127.0.0.1:20160")
            .await
            .unwrap();
        let ts_before = client.get_ts().await.unwrap().as_u64();
        // Each registration is one record in the log; compaction comes at 4,096.
        let ids: Vec<u64> = {
            let mut ids = Vec::new();
            for _ in 0..6_000 {
                ids.push(client.alloc_id().await.unwrap());
            }
            ids
        };
        server.failpoint(point, "return(kill)").unwrap();
        let acked = register_until_refused(&client, &ids).await;
        let status = tokio::task::block_in_place(|| server.wait_exit(Duration::from_secs(30)))
            .unwrap()
            .unwrap_or_else(|| panic!("{point}: the node never reached the failpoint"));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{point}: {status}");
        println!(
            "{point}=kill: {} registrations acknowledged before",
            acked.len()
        );
        assert!(!acked.is_empty());

        let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
        let client = connect(&server, Duration::from_secs(10)).await;
        let stored: HashSet<u64> = client
            .get_all_stores()
            .await
            .unwrap()
            .iter()
            .map(|s| s.store.id)
            .collect();
        let lost: Vec<&u64> = acked.iter().filter(|id| !stored.contains(id)).collect();
        assert!(
            lost.is_empty(),
            "{point}: acknowledged stores lost: {lost:?}"
        );
        assert!(client.get_ts().await.unwrap().as_u64() > ts_before);
        let max_id = *ids.iter().max().unwrap();
        assert!(client.alloc_id().await.unwrap() > max_id, "{point}");
        server.stop().unwrap();
    }
}

/// Registers a store for each id, 16 at a time, until the node goes away; the ids whose
/// registration was acknowledged.
async fn register_until_refused(client: &Arc<Client>, ids: &[u64]) -> Vec<u64> {
    let chunks: Vec<Vec<u64>> = ids
        .chunks(ids.len().div_ceil(16))
        .map(<[u64]>::to_vec)
        .collect();
    let tasks: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for id in chunk {
                    let address =
                        format!("10.{}.{}.{}:20160", id >> 16 & 255, id >> 8 & 255, id & 255);
                    let store = up_store(id, &address);
                    match client.put_store(store).await {
                        Ok(()) => acked.push(id),
                        Err(_) => break,
                    }
                }
                acked
            })
        })
        .collect();
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    acked
}

/// A leader is ready (`/ready`) only once placement is loaded: while the load hangs it hands out
/// timestamps and says why it is not ready; when the load goes on, it becomes ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_is_not_ready_until_placement_is_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    let armed = format!("{}=return(hang)", points::PLACEMENT_LOAD);
    let server = ServerProcess::start_with_env(
        test_binary(),
        &tmp.path().join("data"),
        "127.0.0.1:0",
        &[],
        &[("FAILPOINTS", &armed)],
    )
    .unwrap();
    let client = connect(&server, Duration::from_secs(5)).await;
    client.get_ts().await.unwrap();
    let admin = server.admin().unwrap();
    let ready = move || admin.get_json("/ready").unwrap();
    let (code, body) = tokio::task::spawn_blocking(ready.clone()).await.unwrap();
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["reason"], "leader has not loaded placement yet");

    server.failpoint(points::PLACEMENT_LOAD, "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, body) = tokio::task::spawn_blocking(ready.clone()).await.unwrap();
        if code == 200 {
            assert_eq!(body["ready"], true);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not ready after the load: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop().unwrap();
}
