//! A node killed with SIGKILL and restarted on the same data dir never hands out a timestamp at
//! or below one handed out before the kill (T2 + T3), checked by the loadgen checker running
//! across the restarts. A second stream asks for 2^18 timestamps per request, which keeps the
//! physical part ahead of the clock by `max_lead`: a restart that ignored the persisted limit
//! and started at the clock would step back, and the checker would see it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loadgen::args::TsoArgs;
use loadgen::run;

use meridian::client::{Client, ClientOptions};
use meridian::harness::{on_a_free_port, test_binary, ServerProcess};
use meridian::proto::{Reply, Request};
use meridian::tls::Trust;
use meridian::tso::MAX_COUNT;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_and_restart_never_steps_back() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let bin = test_binary();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut server =
        on_a_free_port(|listen| ServerProcess::start(bin, &data, listen, Some(2))).unwrap();
    let listen = server.client_addr.clone();
    let ca = data.join("tls").join("ca.pem");

    let args = TsoArgs::checked(vec![listen.clone()], ca.clone(), Duration::from_secs(8), 32);
    let load = tokio::spawn(async move { run::run(&args).await });

    // Big requests push the physical part ahead of the clock; each reply must exceed the last.
    let stop = Arc::new(AtomicBool::new(false));
    let pusher = {
        let (stop, listen, ca) = (stop.clone(), listen.clone(), ca.clone());
        tokio::spawn(async move {
            let client = Client::connect(ClientOptions::new(vec![listen], Trust::Ca(ca)))
                .await
                .unwrap();
            let mut stream = client.open_stream().await.unwrap();
            let (mut last, mut replies) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                match stream
                    .call_with_retry(&Request::Tso { count: MAX_COUNT })
                    .await
                {
                    Ok(Reply::Tso { first, count }) => {
                        assert!(first > last, "stepped back: {first} after {last}");
                        last = first + u64::from(count) - 1;
                        replies += 1;
                    }
                    other => panic!("{other:?}"),
                }
            }
            replies
        })
    };

    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        server.kill().unwrap();
        server = ServerProcess::start(bin, &data, &listen, Some(2)).unwrap();
    }
    let report = load.await.unwrap().unwrap();
    stop.store(true, Ordering::Relaxed);
    let replies = pusher.await.unwrap();
    report.print();
    assert_eq!(report.violations, 0, "{report:?}");
    assert!(report.ops > 1_000, "{report:?}");
    assert!(replies > 100, "the pusher only got {replies} replies");
    server.stop().unwrap();
}
