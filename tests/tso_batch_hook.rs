//! The client's batch hook (`client/src/client/tso/batch_hook.rs`) against the real server: each batch is
//! reported once, before any of its callers holds a timestamp from it, and the batches account
//! for every timestamp handed out, no more and no fewer.

use std::sync::{Arc, Mutex};

use meridian::client::{BatchHook, Client, ClientOptions};
use meridian::harness::{test_binary, ServerProcess};
use meridian::tls::Trust;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_timestamp_is_in_a_batch_reported_before_its_caller_got_it() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let batches: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let mut opts = ClientOptions::new(
        vec![server.client_addr.clone()],
        Trust::Ca(data.join("tls/ca.pem")),
    );
    opts.tso_streams = 2;
    opts.tso_batch_hook = Some(BatchHook::new({
        let batches = batches.clone();
        move |first, count| {
            let first = first.as_u64();
            batches
                .lock()
                .unwrap()
                .push((first, first + u64::from(count)));
        }
    }));
    let client = Client::connect(opts).await.unwrap();

    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..256 {
        let (client, batches) = (client.clone(), batches.clone());
        callers.spawn(async move {
            let mut got = Vec::new();
            for _ in 0..50 {
                let ts = client.get_ts().await.unwrap().as_u64();
                // Reported already: the hook runs before the batch's callers are woken.
                let covered = batches
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|&(first, end)| first <= ts && ts < end);
                assert!(covered, "{ts} was handed out before its batch was reported");
                got.push(ts);
            }
            got
        });
    }
    let mut all = Vec::new();
    while let Some(got) = callers.join_next().await {
        all.extend(got.unwrap());
    }
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 256 * 50, "a timestamp was handed out twice");

    let mut batches = batches.lock().unwrap().clone();
    batches.sort_unstable();
    let reported: u64 = batches.iter().map(|&(first, end)| end - first).sum();
    assert_eq!(
        reported,
        all.len() as u64,
        "the batches hold exactly the calls"
    );
    assert!(
        batches.len() < all.len(),
        "{} batches for {} calls: nothing was batched",
        batches.len(),
        all.len()
    );
    // Each batch once: no two overlap.
    assert!(batches.windows(2).all(|w| w[0].1 <= w[1].0), "{batches:?}");
    server.stop().unwrap();
}
