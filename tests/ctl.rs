//! `meridian ctl`'s pd-ctl-level verbs against the real binary: region by key, id and range,
//! store, stores, member, leader, cluster and `tso decode`, as JSON (`--json`) and as tables.

use std::process::Command;

use meridian::client::{Client, ClientOptions};
use meridian::harness::{test_binary, ServerProcess};
use meridian::placement::{Epoch, Peer, PeerRole, Region, Store, StoreState};
use meridian::tls::Trust;
use serde_json::Value;

/// Runs `meridian ctl ARGS`; its stdout, after checking it succeeded.
fn ctl(args: &[&str]) -> String {
    let out = Command::new(test_binary())
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
}

fn ctl_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    serde_json::from_str(&ctl(&all)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_reads_regions_stores_members_and_timestamps() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let ca = data.join("tls/ca.pem");
    let client = Client::connect(ClientOptions::new(
        vec![server.client_addr.clone()],
        Trust::Ca(ca.clone()),
    ))
    .await
    .unwrap();
    let ca = ca.to_str().unwrap().to_string();
    let base = [
        "--endpoints",
        server.client_addr.as_str(),
        "--ca",
        ca.as_str(),
    ];
    let with = |rest: &[&'static str]| -> Vec<String> {
        base.iter()
            .map(|s| s.to_string())
            .chain(rest.iter().map(|s| s.to_string()))
            .collect()
    };
    let run = |rest: &[&'static str]| {
        let args = with(rest);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        tokio::task::block_in_place(|| ctl(&args))
    };
    let run_json = |rest: &[&'static str]| {
        let args = with(rest);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        tokio::task::block_in_place(|| ctl_json(&args))
    };

    let c = run_json(&["cluster"]);
    assert_eq!(c["bootstrapped"], false);
    assert_eq!(c["members"], 1);
    assert!(c["cluster_id"].as_u64().unwrap() > 0);

    // One store; the key space split at "m" into two regions.
    let s1 = client.alloc_id().await.unwrap();
    let (r1, p1, r2, p2) = (
        client.alloc_id().await.unwrap(),
        client.alloc_id().await.unwrap(),
        client.alloc_id().await.unwrap(),
        client.alloc_id().await.unwrap(),
    );
    let store = Store {
        id: s1,
        address: "tikv-1:20160".into(),
        labels: vec![],
        state: StoreState::Up,
        details: Default::default(),
    };
    let region = |id, peer, start: &[u8], end: &[u8], version| Region {
        id,
        start_key: start.to_vec(),
        end_key: end.to_vec(),
        epoch: Epoch {
            conf_ver: 1,
            version,
        },
        peers: vec![Peer {
            id: peer,
            store_id: s1,
            role: PeerRole::Voter,
        }],
        leader: Some(peer),
    };
    client
        .bootstrap(store, region(r1, p1, b"", b"", 1))
        .await
        .unwrap();
    client
        .report_batch_split(vec![
            region(r2, p2, b"", b"m", 2),
            region(r1, p1, b"m", b"", 2),
        ])
        .await
        .unwrap();

    let by_key = run_json(&["region", "apple"]);
    assert_eq!(by_key["id"], r2);
    assert_eq!(by_key["end_key"], "m");
    assert_eq!(by_key["leader"]["store_id"], s1);
    assert_eq!(run_json(&["region", "zebra"])["id"], r1);
    // 0x7a = "z".
    assert_eq!(run_json(&["region", "--hex", "7a"])["id"], r1);
    let by_id = run_json(&["region", "id", &*Box::leak(r2.to_string().into_boxed_str())]);
    assert_eq!(by_id["start_key"], "");
    let scan = run_json(&["region", "scan", "", "", "--limit", "10"]);
    assert_eq!(scan["count"], 2);
    assert_eq!(scan["regions"][0]["id"], r2);
    assert_eq!(scan["regions"][1]["id"], r1);
    let one = run_json(&["region", "scan", "", "", "--limit", "1"]);
    assert_eq!(one["count"], 1);
    let table = run(&["region", "scan", "a", "z"]);
    assert!(table.starts_with("ID"), "{table}");
    assert_eq!(table.lines().count(), 3, "{table}");

    let st = run_json(&["store", &*Box::leak(s1.to_string().into_boxed_str())]);
    assert_eq!(st["address"], "tikv-1:20160");
    assert_eq!(st["state"], "Up");
    assert_eq!(run_json(&["stores"])["count"], 1);
    assert!(run(&["stores"]).contains("tikv-1:20160"));

    let m = run_json(&["member"]);
    assert_eq!(m["leader"]["name"], "harness");
    assert_eq!(m["members"][0]["is_leader"], true);
    assert_eq!(run_json(&["leader"])["name"], "harness");

    let c = run_json(&["cluster"]);
    assert_eq!(c["bootstrapped"], true);
    assert_eq!(
        (c["stores"].as_u64(), c["regions"].as_u64()),
        (Some(1), Some(2))
    );

    // A timestamp taken, then decoded offline.
    let taken = run_json(&["tso"]);
    let ts = taken["timestamp"].as_u64().unwrap();
    let decoded = tokio::task::block_in_place(|| ctl_json(&["tso", "decode", &ts.to_string()]));
    assert_eq!(decoded, taken);
    assert_eq!(decoded["physical_ms"].as_u64().unwrap(), ts >> 18);
    assert!(decoded["system"].as_str().unwrap().ends_with("UTC"));

    // Unknown ids are errors, not empty output.
    let out = Command::new(test_binary())
        .arg("ctl")
        .args(base)
        .args(["store", "999999"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not known"));
    server.stop().unwrap();
}
