//! A node's life seen from outside: the admin API while it serves, graceful shutdown under
//! load (exit 0, replies already read are answered), and `ctl` against it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use meridian::client::{Client, ClientOptions};
use meridian::harness::{test_binary, ServerProcess};
use meridian::proto::{self, FrameDecoder, Reply, Request, Response};
use meridian::tls::Trust;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_reports_membership_health_and_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let ca = Trust::Ca(data.join("tls/ca.pem"));
    let client = Client::connect(ClientOptions::new(vec![server.client_addr.clone()], ca))
        .await
        .unwrap();
    for _ in 0..10 {
        client.get_ts().await.unwrap();
    }
    // Long enough for the control loop to renew the 3 s window at least once.
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    let admin = server.admin().unwrap();
    let (health, ready, members, leader, metrics) = tokio::task::spawn_blocking(move || {
        (
            admin.get_json("/health").unwrap(),
            admin.get_json("/ready").unwrap(),
            admin.get_json("/api/v1/members").unwrap(),
            admin.get_json("/api/v1/leader").unwrap(),
            admin.get("/metrics").unwrap(),
        )
    })
    .await
    .unwrap();
    assert_eq!(health.0, 200);
    assert_eq!(health.1["healthy"], true);
    assert_eq!(ready.0, 200);
    assert_eq!(members.0, 200);
    let m = &members.1;
    assert!(m["cluster_id"].as_u64().unwrap() > 0);
    assert_eq!(m["leader"]["name"], "harness");
    assert_eq!(m["members"].as_array().unwrap().len(), 1);
    assert_eq!(m["members"][0]["is_leader"], true);
    assert_eq!(m["members"][0]["client_url"], server.client_addr.as_str());
    assert_eq!(leader.1["id"], m["members"][0]["id"]);

    // The same member id and cluster id over the QUIC API.
    let over_quic = client.members().await.unwrap();
    assert_eq!(Some(over_quic.cluster_id), m["cluster_id"].as_u64());

    let text = metrics.1;
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
            .unwrap_or_else(|| panic!("{name} missing from /metrics:\n{text}"))
    };
    assert_eq!(value("meridian_requests_total{kind=\"tso\"}"), 10.0);
    assert_eq!(value("meridian_tso_timestamps_total"), 10.0);
    assert_eq!(value("meridian_tso_batch_size_bucket{le=\"1\"}"), 10.0);
    assert!(value("meridian_tso_window_renewals_total") >= 1.0);
    assert_eq!(value("meridian_tso_serving"), 1.0);
    assert!(value("meridian_request_duration_seconds_count") >= 10.0);

    // `ctl` wraps the same API, and asks for a timestamp over QUIC.
    let ctl = |args: &[&str]| {
        let out = std::process::Command::new(test_binary())
            .arg("ctl")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let ca_path = data.join("tls/ca.pem");
    let ca = ca_path.to_str().unwrap();
    assert!(ctl(&["--admin", &server.admin_addr, "--ca", ca, "members"])
        .contains("\"is_leader\": true"));
    assert!(ctl(&["--admin", &server.admin_addr, "--ca", ca, "leader"])
        .contains("\"name\": \"harness\""));
    let tso = ctl(&[
        "--endpoints",
        &server.client_addr,
        "--ca",
        ca_path.to_str().unwrap(),
        "tso",
    ]);
    assert!(tso.contains("system:") && tso.contains("logical:"), "{tso}");
    server.stop().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_answers_what_was_read_and_exits_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let ca = Trust::Ca(data.join("tls/ca.pem"));
    let mut opts = ClientOptions::new(vec![server.client_addr.clone()], ca.clone());
    opts.retry_budget = Duration::from_millis(300);
    let client = Client::connect(opts).await.unwrap();

    // Callers that keep asking until the server goes away; each sees increasing timestamps.
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..16)
        .map(|_| {
            let (client, stop) = (client.clone(), stop.clone());
            tokio::spawn(async move {
                let (mut last, mut ok) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    match client.get_ts().await {
                        Ok(ts) => {
                            assert!(ts.as_u64() > last);
                            last = ts.as_u64();
                            ok += 1;
                        }
                        Err(_) => break,
                    }
                }
                ok
            })
        })
        .collect();

    // A pipelined stream: 200 requests written before the signal are all answered, in order.
    let mut stream = client.open_stream().await.unwrap();
    assert_eq!(
        stream.call(&Request::Ping).await.unwrap(),
        Response::Ok(Reply::Pong)
    );
    let conn = client.connector().connection().await.unwrap().1;
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let mut out = Vec::new();
    let mut scratch = rkyv::util::AlignedVec::new();
    for _ in 0..200 {
        proto::encode(&Request::Tso { count: 1 }, &mut scratch, &mut out).unwrap();
    }
    send.write_all(&out).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let stopped = tokio::task::spawn_blocking(move || server.stop());
    let mut decoder = FrameDecoder::new();
    let mut answered = Vec::new();
    loop {
        while let Some(r) = decoder.next_response().unwrap() {
            answered.push(r);
        }
        match recv.read_chunk(65536, true).await {
            Ok(Some(chunk)) => decoder.extend(&chunk.bytes),
            Ok(None) => break,
            Err(e) => panic!("the stream must end cleanly after its replies, got {e}"),
        }
    }
    assert_eq!(answered.len(), 200);
    let firsts: Vec<u64> = answered
        .iter()
        .map(|r| match r {
            Response::Ok(Reply::Tso { first, .. }) => *first,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(firsts.windows(2).all(|w| w[1] > w[0]));

    stopped.await.unwrap().expect("graceful shutdown exits 0");
    stop.store(true, Ordering::Relaxed);
    let mut served = 0;
    for c in callers {
        served += c.await.unwrap();
    }
    assert!(served > 0);
}

#[test]
fn advertised_addresses_are_what_members_publish_and_the_certificate_names() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let args: Vec<String> = [
        "--advertise-client",
        "pd-0.pd-peer.db.svc:2379",
        "--advertise-admin",
        "pd-0.pd-peer.db.svc:2380",
    ]
    .map(String::from)
    .to_vec();
    let server = ServerProcess::start_with(test_binary(), &data, "127.0.0.1:0", &args).unwrap();
    let (status, members) = server.admin().unwrap().get_json("/api/v1/members").unwrap();
    assert_eq!(status, 200);
    let me = &members["members"][0];
    assert_eq!(me["client_url"], "pd-0.pd-peer.db.svc:2379", "{members}");
    assert_eq!(
        me["admin_url"], "https://pd-0.pd-peer.db.svc:2380",
        "{members}"
    );
    // The self-signed certificate names the advertised host, which is what peers dial.
    let cert = std::fs::read(data.join("tls/cert.pem")).unwrap();
    let der = rustls_pemfile::certs(&mut cert.as_slice())
        .next()
        .unwrap()
        .unwrap();
    assert!(
        der.windows(b"pd-0.pd-peer.db.svc".len())
            .any(|w| w == b"pd-0.pd-peer.db.svc"),
        "the certificate does not name the advertised host"
    );
    server.stop().unwrap();
}
