//! The QUIC port's bounds on a real node, each crossed: connections per core (refused beyond
//! it, the held ones keep serving), address validation with Retry above a handshake threshold
//! (the client still gets in, one round trip later), the idle timeout (a silent connection
//! is closed and the client reconnects), the handshake rate (refused beyond it, cheaply),
//! streams per connection, and the stream and connection receive windows (what a client that
//! never reads its replies can make the server hold).
//! The values are `[server]` config knobs (tuning.md).

use std::path::Path;
use std::time::Duration;

use meridian::client::{Client, ClientOptions};
use meridian::harness::{test_binary, ServerProcess};

fn node(dir: &Path, config: &str) -> ServerProcess {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("meridian.toml");
    std::fs::write(&file, format!("[server]\n{config}\n")).unwrap();
    ServerProcess::start_with(
        test_binary(),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshakes_beyond_the_rate_are_refused_before_any_cryptography() {
    let tmp = tempfile::tempdir().unwrap();
    // One handshake per second: the first client gets in, a second right after is refused
    // (counted), and once a second has passed another gets in.
    let n = node(tmp.path(), "handshakes_per_sec = 1");
    let admin = n.admin().unwrap();
    let limited = || {
        admin
            .metric("meridian_quic_handshakes_limited_total")
            .unwrap()
    };
    let first = client(&n, Duration::from_secs(5)).await.unwrap();
    assert_eq!(limited(), 0.0);
    let second = client(&n, Duration::from_millis(300)).await;
    assert!(
        second.is_err(),
        "a second handshake within the second got in"
    );
    assert!(limited() >= 1.0);
    first.get_ts().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    client(&n, Duration::from_secs(5))
        .await
        .expect("the rate lets one more in each second");
    n.stop().unwrap();
}

/// An authenticated raw QUIC connection whose own receive window per stream is `window`.
async fn raw(node: &ServerProcess, window: u32) -> (quinn::Endpoint, quinn::Connection) {
    let mut config = meridian::tls::client_config(&node.trust()).unwrap();
    let mut transport = quinn::TransportConfig::default();
    transport.stream_receive_window(window.into());
    config.transport_config(std::sync::Arc::new(transport));
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(config);
    let addr = node.client_addr.parse().unwrap();
    let conn = endpoint.connect(addr, "localhost").unwrap().await.unwrap();
    (endpoint, conn)
}

fn ping_frames(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut scratch = rkyv::util::AlignedVec::new();
    for _ in 0..n {
        meridian::proto::encode(&meridian::proto::Request::Ping, &mut scratch, &mut out).unwrap();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_opens_at_most_its_streams_and_a_finished_one_frees_a_slot() {
    let tmp = tempfile::tempdir().unwrap();
    let n = node(tmp.path(), "max_streams_per_connection = 4");
    let (_endpoint, conn) = raw(&n, 1 << 20).await;
    let mut open = Vec::new();
    for _ in 0..4 {
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&ping_frames(1)).await.unwrap();
        let mut reply = [0u8; 4];
        recv.read_exact(&mut reply).await.unwrap();
        open.push((send, recv));
    }
    let fifth = tokio::time::timeout(Duration::from_millis(500), conn.open_bi()).await;
    assert!(fifth.is_err(), "a fifth stream was granted");
    // Ending one stream both ways gives its slot back.
    let (mut send, mut recv) = open.pop().unwrap();
    send.finish().unwrap();
    recv.read_to_end(1 << 16).await.unwrap();
    let (mut send, mut recv) = tokio::time::timeout(Duration::from_secs(5), conn.open_bi())
        .await
        .expect("the freed slot was granted")
        .unwrap();
    send.write_all(&ping_frames(1)).await.unwrap();
    send.finish().unwrap();
    assert!(!recv.read_to_end(1 << 16).await.unwrap().is_empty());
    n.stop().unwrap();
}

/// Pings written on one stream by a client that never reads the replies, until the writes
/// stall: the server stops reading once its replies fill the client's window, and then
/// holds at most its own stream window of unread requests.
async fn written_before_stall(n: &ServerProcess) -> usize {
    let (_endpoint, conn) = raw(n, 16 * 1024).await;
    let (mut send, _recv) = conn.open_bi().await.unwrap();
    let chunk = ping_frames(1024);
    let mut written = 0;
    while let Ok(Ok(())) =
        tokio::time::timeout(Duration::from_millis(500), send.write_all(&chunk)).await
    {
        written += chunk.len();
        assert!(
            written < 64 << 20,
            "the server never stopped taking requests"
        );
    }
    written
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_receive_windows_bound_what_a_client_that_never_reads_can_make_the_server_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let small = node(&tmp.path().join("small"), "stream_receive_window = 65536");
    let large = node(&tmp.path().join("large"), "stream_receive_window = 4194304");
    let (held_small, held_large) = (
        written_before_stall(&small).await,
        written_before_stall(&large).await,
    );
    // What the server read before its replies stalled is the same for both (the client's
    // 16 KiB window of replies); the rest is the server's window.
    assert!(
        held_small < 512 * 1024,
        "64 KiB window: {held_small} bytes taken"
    );
    assert!(
        held_large > 4 * 1024 * 1024 - 512 * 1024 && held_large < 4 * 1024 * 1024 + 512 * 1024,
        "4 MiB window: {held_large} bytes taken"
    );
    // The connection's window binds below a larger stream window.
    let capped = node(
        &tmp.path().join("capped"),
        "stream_receive_window = 4194304\nconnection_receive_window = 1048576",
    );
    let held_capped = written_before_stall(&capped).await;
    assert!(
        held_capped > 1024 * 1024 - 512 * 1024 && held_capped < 1024 * 1024 + 512 * 1024,
        "1 MiB connection window: {held_capped} bytes taken"
    );
    small.stop().unwrap();
    large.stop().unwrap();
    capped.stop().unwrap();
}
