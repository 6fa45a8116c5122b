//! One process per address and per data dir: a second `meridian serve` on a served address,
//! or on a data dir in use, exits non-zero at once with an error that says why, and the
//! first node's clients see every timestamp once and in order.

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use meridian::client::{Client, ClientOptions};
use meridian::harness::{test_binary, ServerProcess};
use meridian::tls::Trust;

/// Runs a second `meridian serve` and waits (at most 20 s) for it to exit.
fn second_serve(data: &Path, listen: &str) -> Output {
    let mut child = Command::new(test_binary())
        .args(["serve", "--name", "second", "--listen", listen])
        .args(["--admin-listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("the second process is still running after 20 s: it serves");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `clients` connections (each its own QUIC connection), each taking `per_client` timestamps
/// one after another; returns them per client in the order received.
async fn take_timestamps(
    addr: &str,
    ca: &Path,
    clients: usize,
    per_client: usize,
) -> Vec<Vec<u64>> {
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let options = ClientOptions::new(vec![addr.to_string()], Trust::Ca(ca.to_path_buf()));
        tasks.push(tokio::spawn(async move {
            let client = Client::connect(options).await.unwrap();
            let mut got = Vec::with_capacity(per_client);
            for _ in 0..per_client {
                got.push(client.get_ts().await.unwrap().as_u64());
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.push(t.await.unwrap());
    }
    all
}

fn assert_unique_and_ordered(runs: &[Vec<Vec<u64>>]) {
    let mut seen = HashSet::new();
    for per_client in runs.iter().flatten() {
        assert!(
            per_client.windows(2).all(|w| w[0] < w[1]),
            "a client saw a timestamp go backwards"
        );
        for ts in per_client {
            assert!(seen.insert(*ts), "timestamp {ts} handed out twice");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_on_the_same_address_or_data_dir_exits_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("first");
    let first = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let ca = data.join("tls/ca.pem");
    let before = take_timestamps(&first.client_addr, &ca, 4, 200).await;

    // Same address, its own data dir.
    let other_dir = tmp.path().join("second");
    let out = second_serve(&other_dir, &first.client_addr);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "second process on the address exited 0"
    );
    assert!(stderr.contains("already served"), "stderr: {stderr}");
    assert!(stderr.contains(&first.client_addr), "stderr: {stderr}");

    // Same data dir, another address.
    let out = second_serve(&data, "127.0.0.1:0");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "second process on the data dir exited 0"
    );
    assert!(stderr.contains("in use by process"), "stderr: {stderr}");
    assert!(
        stderr.contains(&data.display().to_string()),
        "stderr: {stderr}"
    );

    // New connections after both attempts: had the second process joined the reuseport group,
    // the kernel would hand some of them to it.
    let after = take_timestamps(&first.client_addr, &ca, 8, 200).await;
    assert_unique_and_ordered(&[before.clone(), after.clone()]);
    let last_before = before.iter().flatten().max().unwrap();
    assert!(after.iter().flatten().all(|ts| ts > last_before));
    first.stop().unwrap();
}
