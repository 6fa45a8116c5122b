//! Slowloris on the admin port, against a real node: more idle TCP connections than the admin
//! listener admits, none starting TLS, and authenticated connections that trickle a request
//! header a byte at a time. The TSO keeps serving throughout, the trickling connections are
//! closed by the header-read timeout, and an operator's request still gets through once the
//! handshake timeout has cleared the idle ones.

use std::io::Read;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use meridian::admin::AdminClient;
use meridian::client::{Client, ClientOptions};
use meridian::harness::{test_binary, ServerProcess};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// More than the admin listener's 256 connections.
const IDLE: usize = 300;
const TRICKLING: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_on_admin_neither_stops_the_tso_nor_locks_out_an_operator() {
    let tmp = tempfile::tempdir().unwrap();
    let node = ServerProcess::start(
        test_binary(),
        &tmp.path().join("node"),
        "127.0.0.1:0",
        Some(1),
    )
    .unwrap();
    let trust = node.trust();
    let started = Instant::now();

    // Authenticated, then a header that never ends: a byte per 500 ms.
    let tls = Arc::new(
        meridian::tls::client_tls(meridian::tls::client_builder().unwrap(), &trust).unwrap(),
    );
    let mut trickling = Vec::new();
    for _ in 0..TRICKLING {
        let tcp = tokio::net::TcpStream::connect(&node.admin_addr)
            .await
            .unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .unwrap();
        trickling.push(tokio::spawn(async move {
            let header = b"GET /api/v1/members HTTP/1.1\r\nHost: x\r\nX-Slow: ";
            stream.write_all(header).await.unwrap();
            let begun = Instant::now();
            loop {
                if stream.write_all(b"a").await.is_err() {
                    return begun.elapsed();
                }
                let mut byte = [0u8; 1];
                // The server closing the connection shows as end of stream (or an error).
                match tokio::time::timeout(Duration::from_millis(500), stream.read(&mut byte)).await
                {
                    Ok(Ok(0)) | Ok(Err(_)) => return begun.elapsed(),
                    Ok(Ok(_)) | Err(_) => {}
                }
                assert!(begun.elapsed() < Duration::from_secs(30), "never closed");
            }
        }));
    }
    // Idle TCP connections that never say a word.
    let idle: Vec<TcpStream> = (0..IDLE)
        .filter_map(|_| TcpStream::connect(&node.admin_addr).ok())
        .collect();
    assert!(
        idle.len() > 256,
        "only {} idle connections opened",
        idle.len()
    );

    // The TSO serves all along, on its own port and cores.
    let mut opts = ClientOptions::new(vec![node.client_addr.clone()], trust.clone());
    opts.retry_budget = Duration::from_secs(2);
    let client = Client::connect(opts).await.unwrap();
    let mut last = meridian::tso::Timestamp::ZERO;
    let mut served = 0u64;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let ts = client.get_ts().await.unwrap();
        assert!(ts > last);
        last = ts;
        served += 1;
    }
    assert!(served > 0);

    // Every trickling connection is cut by the header-read timeout (5 s), not left open.
    for t in trickling {
        let lived = t.await.unwrap();
        assert!(lived < Duration::from_secs(20), "held {lived:?}");
    }
    // An operator gets in once the handshake timeout (5 s) has dropped the idle ones.
    let admin =
        AdminClient::with_timeout(&node.admin_addr, &trust, Duration::from_secs(20)).unwrap();
    let mut answered = None;
    while started.elapsed() < Duration::from_secs(40) {
        if let Ok((200, _)) = admin.get("/api/v1/members") {
            answered = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        answered.is_some(),
        "the admin API never answered during the attack"
    );
    // The idle sockets were closed by the server, not by us.
    for mut s in idle.into_iter().take(256) {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 16];
        match s.read(&mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("an idle connection was left open: {other:?}"),
        }
    }
    node.stop().unwrap();
}
