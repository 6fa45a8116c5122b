//! Scheduling's run-time controls against the real binary, through `meridian ctl` as an operator
//! runs it and through PD's HTTP API as pd-ctl sends it: `store limit` (shown, set for one
//! store and for all, refused in PD's words), `scheduler add|show|remove evict-leader`,
//! `store delete` (Offline, refused while too few Up stores would be left, PD's 404 and 410),
//! all of it `admin` only, and kept across a restart of the node; `operator add|show|check|
//! remove` as pd-ctl's `operator` commands, with PD's words for a bad region id.

use std::path::Path;
use std::process::{Command, Output};

use meridian::client::{Client, ClientOptions};
use meridian::harness::{bootstrap_one_region, test_binary, up_store, ServerProcess};
use meridian::placement::{Epoch, Peer, PeerRole, Region, RegionStats, StoreStats};
use meridian::tls::cert::Role;
use meridian::tls::Trust;
use serde_json::Value;

fn run_ctl(endpoint: &str, tls: &[String], args: &[&str]) -> Output {
    Command::new(test_binary())
        .arg("ctl")
        .args(["--endpoints", endpoint])
        .args(tls)
        .args(args)
        .output()
        .unwrap()
}

/// `ctl ARGS --json` that must succeed: its JSON.
fn ctl_ok(endpoint: &str, tls: &[String], args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = run_ctl(endpoint, tls, &all);
    assert!(
        out.status.success(),
        "ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `ctl ARGS` that must fail: its error text.
fn ctl_refused(endpoint: &str, tls: &[String], args: &[&str]) -> String {
    let out = run_ctl(endpoint, tls, args);
    assert!(
        !out.status.success(),
        "ctl {args:?} succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn admin_tls(data: &Path) -> Vec<String> {
    vec![
        "--ca".into(),
        data.join("tls/ca.pem").to_str().unwrap().into(),
    ]
}

/// ctl's flags for a certificate with the `client` role only, as TiDB's.
fn client_only_tls(server: &ServerProcess) -> Vec<String> {
    let Trust::Mutual { ca, cert, key } = server.role_cert(Role::Client, "tidb").unwrap() else {
        panic!("a role certificate is a mutual trust");
    };
    [("--ca", ca), ("--cert", cert), ("--key", key)]
        .into_iter()
        .flat_map(|(flag, path)| [flag.to_string(), path.to_str().unwrap().to_string()])
        .collect()
}

/// Bootstraps with one store and registers `more` stores beside it; all ids, first one first.
async fn stores(client: &Client, more: usize) -> Vec<u64> {
    let region = bootstrap_one_region(client, "s1:20160").await.unwrap();
    let mut ids = vec![region.peers[0].store_id];
    for n in 0..more {
        let id = client.alloc_id().await.unwrap();
        client
            .put_store(up_store(id, &format!("s{}:20160", n + 2)))
            .await
            .unwrap();
        ids.push(id);
    }
    ids
}

async fn connect(server: &ServerProcess, data: &Path) -> Client {
    Client::connect(ClientOptions::new(
        vec![server.client_addr.clone()],
        Trust::Ca(data.join("tls/ca.pem")),
    ))
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_evict_leader_and_decommission_through_ctl_and_pds_http_api() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let client = connect(&server, &data).await;
    let ids = stores(&client, 3).await;
    let at = server.client_addr.clone();
    let admin = admin_tls(&data);
    let ctl = |args: &[&str]| tokio::task::block_in_place(|| ctl_ok(&at, &admin, args));
    let refused = |args: &[&str]| tokio::task::block_in_place(|| ctl_refused(&at, &admin, args));
    let (s1, s2) = (ids[0].to_string(), ids[1].to_string());

    // Store limits: every store at the configured 15 per minute, then one store's add-peer
    // raised and every store's remove-peer lowered.
    let limits = ctl(&["store", "limit"]);
    assert_eq!(limits.as_object().unwrap().len(), 4, "{limits}");
    assert_eq!(limits[&s1]["add-peer"], 15.0);
    assert_eq!(
        ctl(&["store", "limit", &s1, "30", "--type", "add-peer"]),
        "The store's limit is updated."
    );
    assert_eq!(
        ctl(&["store", "limit", "all", "5", "--type", "remove-peer"]),
        "Set store limit successfully."
    );
    let limits = ctl(&["store", "limit"]);
    assert_eq!(limits[&s1]["add-peer"], 30.0);
    assert_eq!(limits[&s1]["remove-peer"], 5.0);
    assert_eq!(limits[&s2]["add-peer"], 15.0);
    assert_eq!(limits[&s2]["remove-peer"], 5.0);
    let bad = refused(&["store", "limit", &s1, "0"]);
    assert!(
        bad.contains("invalid rate which should be larger than 0"),
        "{bad}"
    );
    let bad = refused(&["store", "limit", &s1, "3", "--type", "snapshot"]);
    assert!(bad.contains("unknown type"), "{bad}");
    let bad = refused(&["store", "limit", "99999", "3"]);
    assert!(bad.contains("store 99999 not found"), "{bad}");

    // evict-leader: added for a store, shown, removed.
    assert_eq!(
        ctl(&["scheduler", "show"]),
        serde_json::json!(["balance-leader-scheduler", "balance-region-scheduler"])
    );
    assert_eq!(
        ctl(&["scheduler", "add", "evict-leader", &s2]),
        "The scheduler is created."
    );
    let shown = ctl(&["scheduler", "show"]);
    assert!(
        shown
            .as_array()
            .unwrap()
            .contains(&"evict-leader-scheduler".into()),
        "{shown}"
    );
    let gone = refused(&["scheduler", "remove", "evict-leader", "99999"]);
    assert!(gone.contains("scheduler not found"), "{gone}");
    let bad = refused(&["scheduler", "add", "shuffle-leader"]);
    assert!(bad.contains("unknown scheduler"), "{bad}");

    // A client certificate (TiDB's role) reads but changes nothing.
    let tidb = client_only_tls(&server);
    let denied = tokio::task::block_in_place(|| ctl_refused(&at, &tidb, &["store", "delete", &s1]));
    assert!(denied.contains("403"), "{denied}");
    tokio::task::block_in_place(|| ctl_ok(&at, &tidb, &["store", "limit"]));

    // Decommission: Offline at once; deleting again changes nothing; an unknown store is PD's
    // 404. With evict-leader on s2 and s1 Offline, s3 and s4 are the Up stores left: taking s3
    // too would leave 1 Up store for 3 replicas.
    assert_eq!(
        ctl(&["store", "delete", &s1]),
        "The store is set as Offline."
    );
    assert_eq!(ctl(&["store", &s1])["state"], "Offline");
    assert_eq!(
        ctl(&["store", "delete", &s1]),
        "The store is set as Offline."
    );
    let missing = refused(&["store", "delete", "99999"]);
    assert!(
        missing.contains("404") && missing.contains("store 99999 not found"),
        "{missing}"
    );
    let s3 = ids[2].to_string();
    let few = refused(&["store", "delete", &s3]);
    assert!(
        few.contains("the number of up stores would be 2 while need 3"),
        "{few}"
    );
    assert_eq!(
        ctl(&["store", &s3])["state"],
        "Up",
        "a refusal changes nothing"
    );

    // Everything set survives a restart of the node.
    drop(client);
    server.stop().unwrap();
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let at = server.client_addr.clone();
    let ctl = |args: &[&str]| tokio::task::block_in_place(|| ctl_ok(&at, &admin, args));
    let ready = std::time::Instant::now();
    let limits = loop {
        let out =
            tokio::task::block_in_place(|| run_ctl(&at, &admin, &["store", "limit", "--json"]));
        if out.status.success() {
            break serde_json::from_slice::<Value>(&out.stdout).unwrap();
        }
        assert!(
            ready.elapsed().as_secs() < 30,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(limits[&s1]["add-peer"], 30.0);
    assert_eq!(limits[&s2]["remove-peer"], 5.0);
    assert_eq!(ctl(&["store", &s1])["state"], "Offline");
    let shown = ctl(&["scheduler", "show"]);
    assert!(
        shown
            .as_array()
            .unwrap()
            .contains(&"evict-leader-scheduler".into()),
        "{shown}"
    );
    assert_eq!(
        ctl(&["scheduler", "remove", "evict-leader", &s2]),
        "The scheduler is removed."
    );
    assert_eq!(
        ctl(&["scheduler", "show"]),
        serde_json::json!(["balance-leader-scheduler", "balance-region-scheduler"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_are_added_shown_checked_and_removed_through_ctl() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let server = ServerProcess::start(test_binary(), &data, "127.0.0.1:0", Some(2)).unwrap();
    let client = connect(&server, &data).await;
    let ids = stores(&client, 1).await;
    let (s1, s2) = (ids[0], ids[1]);
    for id in [s1, s2] {
        let stats = StoreStats {
            capacity: 100 << 30,
            available: 90 << 30,
            ..Default::default()
        };
        client.store_heartbeat(id, stats).await.unwrap();
    }
    // The first region, with a second voter on s2, as its leader on s1 reports it.
    let first = client.get_region_uncached(b"").await.unwrap().unwrap();
    let peer2 = client.alloc_id().await.unwrap();
    let region = Region {
        epoch: Epoch {
            conf_ver: first.epoch.conf_ver + 1,
            ..first.epoch
        },
        peers: vec![
            first.peers[0].clone(),
            Peer {
                id: peer2,
                store_id: s2,
                role: PeerRole::Voter,
            },
        ],
        ..first
    };
    let stats = RegionStats {
        approximate_size: 96 << 20,
        ..Default::default()
    };
    client
        .region_heartbeat(region.clone(), stats)
        .await
        .unwrap();

    let at = server.client_addr.clone();
    let admin = admin_tls(&data);
    let ctl = |args: &[&str]| tokio::task::block_in_place(|| ctl_ok(&at, &admin, args));
    let refused = |args: &[&str]| tokio::task::block_in_place(|| ctl_refused(&at, &admin, args));
    let (r, s2) = (region.id.to_string(), s2.to_string());

    assert_eq!(ctl(&["operator", "show"]), serde_json::json!([]));
    assert_eq!(
        ctl(&["operator", "add", "transfer-leader", &r, &s2]),
        "The operator is created."
    );
    let shown = ctl(&["operator", "show", "leader"]);
    let op = shown[0].as_str().unwrap_or_default();
    assert!(
        op.starts_with("admin-transfer-leader {transfer leader: store "),
        "{shown}"
    );
    assert_eq!(ctl(&["operator", "show"]), shown);
    assert_eq!(
        ctl(&["operator", "check"]),
        shown,
        "pd-ctl's check of no region"
    );
    assert_eq!(ctl(&["operator", "show", "region"]), Value::Null);
    let text = tokio::task::block_in_place(|| run_ctl(&at, &admin, &["operator", "show"]));
    assert_eq!(String::from_utf8_lossy(&text.stdout).trim_end(), op);
    let checked = ctl(&["operator", "check", &r]);
    assert!(
        checked
            .as_str()
            .unwrap_or_default()
            .starts_with("status: RUNNING, operator: admin-transfer-leader {"),
        "{checked}"
    );
    // A second one on the region: PD's refusal, and a non-zero exit.
    let busy = refused(&["operator", "add", "remove-peer", &r, &s2]);
    assert!(busy.contains("[PD:operator:ErrAddOperator]"), "{busy}");

    assert_eq!(
        ctl(&["operator", "remove", &r]),
        "The pending operator is canceled."
    );
    assert_eq!(ctl(&["operator", "show"]), serde_json::json!([]));
    let checked = ctl(&["operator", "check", &r]);
    assert!(
        checked
            .as_str()
            .unwrap_or_default()
            .starts_with("status: CANCEL, operator: admin-transfer-leader"),
        "{checked}"
    );

    // Bad region ids: PD's words, and a non-zero exit.
    let bad = refused(&["operator", "check", "x1"]);
    assert!(
        bad.contains("strconv.ParseUint: parsing \"x1\": invalid syntax"),
        "{bad}"
    );
    let gone = refused(&["operator", "remove", &r]);
    assert!(
        gone.contains("[PD:operator:ErrOperatorNotFound]operator not found"),
        "{gone}"
    );
    let unknown = refused(&["operator", "add", "transfer-leader", "999999", &s2]);
    assert!(
        unknown.contains("[PD:region:ErrRegionNotFound]region 999999 not found"),
        "{unknown}"
    );
    let unparsed = refused(&["operator", "add", "add-peer", "ten", &s2]);
    assert!(
        unparsed.contains("strconv.ParseUint: parsing \"ten\": invalid syntax"),
        "{unparsed}"
    );
    let policy = refused(&["operator", "add", "split-region", &r, "--policy=guess"]);
    assert!(policy.contains("unknown policy"), "{policy}");

    // A certificate without `admin` reads the operators but adds none.
    let tidb = client_only_tls(&server);
    let denied = tokio::task::block_in_place(|| {
        ctl_refused(&at, &tidb, &["operator", "add", "transfer-leader", &r, &s2])
    });
    assert!(denied.contains("admin"), "{denied}");
    server.stop().unwrap();
}
