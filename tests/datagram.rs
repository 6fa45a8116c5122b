//! Datagram size end to end: a client and a server on one host discover datagrams larger than
//! Ethernet's, and a server configured with a smaller `server.max_udp_payload` caps what its
//! clients send (the transport parameter it advertises bounds their discovery).

use std::time::{Duration, Instant};

use meridian::client::{Client, ClientOptions};
use meridian::harness::{test_binary, ServerProcess};
use meridian::tls::Trust;

/// quinn's own discovery bound, and Ethernet's payload: what a path settles at without ours.
const ETHERNET_PAYLOAD: u16 = 1452;

/// Starts a one-core server with `config` (TOML) and returns it with a connected client.
async fn serve(dir: &std::path::Path, config: &str) -> (ServerProcess, Client) {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("meridian.toml");
    std::fs::write(&file, config).unwrap();
    let data = dir.join("data");
    let extra = [
        "--cores".to_string(),
        "1".to_string(),
        "--config".to_string(),
        file.display().to_string(),
    ];
    let server = ServerProcess::start_with(test_binary(), &data, "127.0.0.1:0", &extra).unwrap();
    let ca = Trust::Ca(data.join("tls/ca.pem"));
    let client = Client::connect(ClientOptions::new(vec![server.client_addr.clone()], ca))
        .await
        .unwrap();
    (server, client)
}

/// Keeps timestamps flowing until the client's path MTU passes `above` or `within` is over;
/// returns the largest path MTU seen. Every timestamp must be larger than the one before.
async fn traffic_until(client: &Client, above: u16, within: Duration) -> u16 {
    let (_, conn) = client.connector().connection().await.unwrap();
    let deadline = Instant::now() + within;
    let mut last = client.get_ts().await.unwrap();
    let mut largest = conn.stats().path.current_mtu;
    while largest <= above && Instant::now() < deadline {
        let ts = client.get_ts().await.unwrap();
        assert!(ts > last, "timestamp went backwards: {ts:?} after {last:?}");
        last = ts;
        largest = largest.max(conn.stats().path.current_mtu);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    largest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_paths_grow_past_ethernet_and_the_server_cap_holds() {
    let tmp = tempfile::tempdir().unwrap();

    // Defaults: discovery may go to the UDP maximum, and loopback carries it.
    let (server, client) = serve(&tmp.path().join("default"), "").await;
    let grown = traffic_until(&client, ETHERNET_PAYLOAD, Duration::from_secs(20)).await;
    assert!(
        grown > ETHERNET_PAYLOAD,
        "path MTU stayed at {grown} on loopback with the default settings"
    );
    server.stop().unwrap();

    // A server capped below Ethernet: its clients never send larger datagrams, and requests
    // still go through. The wait is as long as the uncapped path needed to grow, and more.
    let (server, client) = serve(
        &tmp.path().join("capped"),
        "[server]\nmax_udp_payload = 1300\n",
    )
    .await;
    let capped = traffic_until(&client, 1300, Duration::from_secs(3)).await;
    assert!(
        capped <= 1300,
        "path MTU {capped} exceeds the server's cap of 1300"
    );
    server.stop().unwrap();
}
