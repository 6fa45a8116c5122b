//! The QUIC port's bounds on a real node, each crossed: connections per core (refused beyond
//! it, the held ones keep serving), address validation with Retry above a handshake threshold
//! (the client still gets in, one round trip later), and the idle timeout (a silent connection
//! is closed and the client reconnects). The values are `[server]` config knobs (tuning.md).

use std::path::Path;
use std::time::Duration;

use meridian::client::{Client, ClientOptions};
use meridian::harness::ServerProcess;

fn node(dir: &Path, config: &str) -> ServerProcess {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("meridian.toml");
    std::fs::write(&file, format!("[server]\n{config}\n")).unwrap();
    ServerProcess::start_with(
        env!("CARGO_BIN_EXE_meridian").as_ref(),
        &dir.join("data"),
        "127.0.0.1:0",
        &[
            "--cores".into(),
            "1".into(),
            "--config".into(),
            file.display().to_string(),
        ],
    )
    .unwrap()
}

async fn client(node: &ServerProcess, budget: Duration) -> Result<Client, String> {
    let mut opts = ClientOptions::new(vec![node.client_addr.clone()], node.trust());
    opts.retry_budget = budget;
    let client = Client::connect(opts).await.map_err(|e| e.to_string())?;
    client.get_ts().await.map_err(|e| e.to_string())?;
    Ok(client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_core_limit_are_refused_and_the_held_ones_keep_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let n = node(tmp.path(), "max_connections_per_core = 2");
    let admin = n.admin().unwrap();
    let first = client(&n, Duration::from_secs(5)).await.unwrap();
    let second = client(&n, Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        admin
            .metric("meridian_quic_connections_refused_total")
            .unwrap(),
        0.0
    );
    let third = client(&n, Duration::from_millis(500)).await;
    assert!(third.is_err(), "a third connection was served");
    assert!(
        admin
            .metric("meridian_quic_connections_refused_total")
            .unwrap()
            >= 1.0
    );
    for c in [&first, &second] {
        c.get_ts().await.unwrap();
    }
    // A freed slot is taken again.
    drop(first);
    let mut again = None;
    for _ in 0..50 {
        if let Ok(c) = client(&n, Duration::from_millis(300)).await {
            again = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(again.is_some(), "the freed slot was never given out");
    n.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn above_the_handshake_threshold_clients_prove_their_address_first() {
    let tmp = tempfile::tempdir().unwrap();
    // Threshold 0: every new address gets a Retry.
    let strict = node(&tmp.path().join("strict"), "retry_above_handshakes = 0");
    let relaxed = node(&tmp.path().join("relaxed"), "");
    for _ in 0..3 {
        client(&strict, Duration::from_secs(5)).await.unwrap();
        client(&relaxed, Duration::from_secs(5)).await.unwrap();
    }
    let retries = |n: &ServerProcess| {
        n.admin()
            .unwrap()
            .metric("meridian_quic_retries_total")
            .unwrap()
    };
    assert_eq!(retries(&strict), 3.0, "one Retry per new connection");
    assert_eq!(retries(&relaxed), 0.0, "no Retry below the threshold");
    strict.stop().unwrap();
    relaxed.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_after_the_idle_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    // The client pings every 5 s: a 300 ms server timeout closes its connection between
    // calls; the default (30 s) does not.
    let short = node(&tmp.path().join("short"), "idle_timeout_ms = 300");
    let default = node(&tmp.path().join("default"), "");
    let mut clients = Vec::new();
    for n in [&short, &default] {
        clients.push(client(n, Duration::from_secs(5)).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for c in &clients {
        c.get_ts().await.unwrap();
    }
    let opened = |n: &ServerProcess| {
        n.admin()
            .unwrap()
            .metric("meridian_connections_total")
            .unwrap()
    };
    assert_eq!(
        opened(&short),
        2.0,
        "the idle connection was closed and made again"
    );
    assert_eq!(opened(&default), 1.0);
    short.stop().unwrap();
    default.stop().unwrap();
}
