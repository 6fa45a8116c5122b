//! Every metric the Grafana dashboard in `dashboards/` queries exists in a live server's
//! `/metrics`, so renaming a metric cannot silently blank a panel. The server gets a little
//! traffic first (timestamps, a bootstrap, a heartbeat, an error) so that labelled series
//! (per store, per error kind) are present too.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use meridian::client::{Client, ClientOptions};
use meridian::harness::{bootstrap_one_region, test_binary, ServerProcess};
use meridian::tls::Trust;

/// The `meridian_*` metric names a dashboard's queries use.
fn queried(dashboard: &serde_json::Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find("meridian_") {
                let tail = &rest[at..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                names.insert(tail[..end].to_string());
                rest = &tail[end..];
            }
        }
    }
    names
}

/// Sample names in Prometheus text format.
fn exposed(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_queries_is_exposed() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let client = Client::connect(ClientOptions::new(
        vec![server.client_addr.clone()],
        Trust::Ca(data.join("tls/ca.pem")),
    ))
    .await
    .unwrap();
    for _ in 0..10 {
        client.get_ts().await.unwrap();
    }
    let region = bootstrap_one_region(&client, "tikv-1:20160").await.unwrap();
    let s = region.peers[0].store_id;
    client
        .region_heartbeat(region, Default::default())
        .await
        .unwrap();
    assert!(client.get_store(424242).await.unwrap().is_none());
    assert!(client.alloc_id().await.is_ok());

    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards/meridian-server.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let wanted = queried(&dashboard);
    assert!(wanted.len() >= 12, "{wanted:?}");
    // Placement gauges are published once a second.
    let deadline = Instant::now() + Duration::from_secs(10);
    let admin = server.admin().unwrap();
    loop {
        let text = tokio::task::block_in_place(|| admin.get("/metrics"))
            .unwrap()
            .1;
        let have = exposed(&text);
        let missing: Vec<&String> = wanted.iter().filter(|n| !have.contains(*n)).collect();
        if missing.is_empty() {
            assert!(
                text.contains(&format!("meridian_store_regions{{store=\"{s}\"}}")),
                "{text}"
            );
            assert!(text.contains("meridian_regions 1"), "{text}");
            assert!(text.contains("meridian_is_leader 1"), "{text}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "missing from /metrics: {missing:?}\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    server.stop().unwrap();
}
