//! Every route's JSON against PD's shapes, on a bootstrapped node with two regions, one store
//! that has sent a heartbeat, a GC safe point and a min resolved ts.

use super::*;
use meridian::harness::{metapb_peer, metapb_region};
use meridian::kvproto::metapb;
use serde_json::json;

impl Node {
    async fn alloc_id(&mut self) -> u64 {
        meridian::harness::alloc_id(&mut self.pd, self.cluster_id)
            .await
            .unwrap()
    }

    /// Store `s` with region `r` (peer `p`) over every key, split at `m`: returns the new left
    /// region's id and its peer's.
    pub(crate) async fn populate(&mut self) -> (u64, u64, u64, u64, u64) {
        let (s, r, p) = (
            self.alloc_id().await,
            self.alloc_id().await,
            self.alloc_id().await,
        );
        let boot = self
            .pd
            .bootstrap(pdpb::BootstrapRequest {
                header: self.h(),
                store: Some(metapb::Store {
                    id: s,
                    address: "tikv-1:20160".into(),
                    version: "8.5.0".into(),
                    labels: vec![metapb::StoreLabel {
                        key: "zone".into(),
                        value: "z1".into(),
                    }],
                    ..Default::default()
                }),
                region: Some(metapb_region(r, b"", b"", (1, 1), vec![metapb_peer(p, s)])),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(boot.header.unwrap().error.is_none());
        let ask = self
            .pd
            .ask_batch_split(pdpb::AskBatchSplitRequest {
                header: self.h(),
                region: Some(metapb_region(r, b"", b"", (1, 1), vec![metapb_peer(p, s)])),
                split_count: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let ids = &ask.ids[0];
        let (left, left_peer) = (ids.new_region_id, ids.new_peer_ids[0]);
        let mut left_region =
            metapb_region(left, b"", b"m", (1, 2), vec![metapb_peer(left_peer, s)]);
        let mut right_region = metapb_region(r, b"m", b"", (1, 2), vec![metapb_peer(p, s)]);
        left_region.peers[0].role = metapb::PeerRole::Voter as i32;
        right_region.peers[0].role = metapb::PeerRole::Voter as i32;
        let split = self
            .pd
            .report_batch_split(pdpb::ReportBatchSplitRequest {
                header: self.h(),
                regions: vec![left_region, right_region],
            })
            .await
            .unwrap()
            .into_inner();
        assert!(split.header.unwrap().error.is_none());
        self.pd
            .store_heartbeat(pdpb::StoreHeartbeatRequest {
                header: self.h(),
                stats: Some(pdpb::StoreStats {
                    store_id: s,
                    capacity: 1 << 40,
                    available: 512 << 30,
                    used_size: 1536,
                    region_count: 2,
                    ..Default::default()
                }),
            })
            .await
            .unwrap();
        (s, r, p, left, left_peer)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_in_pds_shapes_over_both_http_versions_beside_grpc() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;
    let (addr, trust) = (n.addr().to_string(), n.trust.clone());
    let url = format!("https://{addr}");

    // Before bootstrap: PD's cluster middleware refuses with its words.
    for proto in BOTH {
        let a = get(&addr, &trust, proto, "/pd/api/v1/stores").await;
        assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            a.json(),
            json!("[PD:cluster:ErrNotBootstrapped]TiKV cluster not bootstrapped, please start TiKV first")
        );
    }

    let (s, r, p, left, left_peer) = n.populate().await;

    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/version").await,
        json!({"version": "v8.5.0"})
    );
    let status = get_json(&addr, &trust, "/pd/api/v1/status").await;
    assert_eq!(status["version"], "v8.5.0");
    assert_eq!(status["kernel_type"], "Classic");
    assert!(status["start_timestamp"].as_i64().unwrap() > 1_700_000_000);
    for key in ["build_ts", "git_hash"] {
        assert!(status[key].is_string(), "{key}");
    }

    let member_id = status_member_id(&mut n).await;
    let member = json!({
        "name": "harness",
        "member_id": member_id,
        "peer_urls": [format!("https://{}", n.server.admin_addr)],
        "client_urls": [url],
    });
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/health").await,
        json!([{
            "name": "harness",
            "member_id": member["member_id"],
            "client_urls": [url],
            "health": true,
        }])
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/members").await,
        json!({
            "header": {"cluster_id": n.cluster_id},
            "members": [member],
            "leader": member,
            "etcd_leader": member,
        })
    );
    assert_eq!(get_json(&addr, &trust, "/pd/api/v1/leader").await, member);
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/cluster").await,
        json!({"id": n.cluster_id, "max_peer_count": 3})
    );

    // Stores: PD's StoreInfo.
    let one = get_json(&addr, &trust, &format!("/pd/api/v1/store/{s}")).await;
    let meta = &one["store"];
    assert_eq!(meta["id"], s);
    assert_eq!(meta["address"], "tikv-1:20160");
    assert_eq!(meta["version"], "8.5.0");
    assert_eq!(meta["labels"], json!([{"key": "zone", "value": "z1"}]));
    assert_eq!(meta["state_name"], "Up");
    assert_eq!(meta.get("state"), None, "Up is kvproto's zero, left out");
    assert_eq!(meta["node_state"], 1, "Serving");
    assert!(meta["last_heartbeat"].as_i64().unwrap() > 0);
    let st = &one["status"];
    assert_eq!(st["capacity"], "1TiB");
    assert_eq!(st["available"], "512GiB");
    assert_eq!(st["used_size"], "1.5KiB");
    // Counted from the regions as their leaders report them, as PD counts them from its
    // region tree, not from the store's own report of 2: no region has reported yet (the
    // sums as regions report: `sizes`).
    for key in ["region_count", "leader_count", "region_size", "leader_size"] {
        assert_eq!(st[key], 0, "{key}");
    }
    assert_eq!(st["leader_score"], 0.0);
    assert_eq!(
        st["region_score"], 0.0,
        "no score made up without region sizes"
    );
    assert_eq!(st["leader_weight"], 1.0);
    assert_eq!(st["region_weight"], 1.0);
    assert!(st["last_heartbeat_ts"].as_str().unwrap().ends_with('Z'));
    let all = get_json(&addr, &trust, "/pd/api/v1/stores").await;
    assert_eq!(all, json!({"count": 1, "stores": [one]}));
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/stores?state=2").await,
        json!({"count": 0, "stores": []}),
        "no tombstones"
    );
    let missing = get(&addr, &trust, Proto::H1, "/pd/api/v1/store/999999").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        missing.json(),
        json!("[PD:core:ErrStoreNotFound]store 999999 not found")
    );
    assert_eq!(
        get(&addr, &trust, Proto::H2, "/pd/api/v1/store/x")
            .await
            .status,
        StatusCode::BAD_REQUEST
    );

    // Regions: PD's RegionInfo, keys in upper-case hex.
    let left_json = json!({
        "id": left,
        "start_key": "",
        "end_key": "6D",
        "epoch": {"conf_ver": 1, "version": 2},
        "peers": [{"id": left_peer, "store_id": s, "role_name": "Voter"}],
        "leader": {"role_name": "Voter"},
        "cpu_usage": 0,
        "written_bytes": 0,
        "read_bytes": 0,
        "written_keys": 0,
        "read_keys": 0,
        "approximate_size": 0,
        "approximate_keys": 0,
        "approximate_kv_size": 0,
        "approximate_columnar_kv_size": 0,
    });
    let mut right_json = left_json.clone();
    right_json["id"] = json!(r);
    right_json["start_key"] = json!("6D");
    right_json["end_key"] = json!("");
    right_json["peers"] = json!([{"id": p, "store_id": s, "role_name": "Voter"}]);
    let by_id = get_json(&addr, &trust, &format!("/pd/api/v1/region/id/{left}")).await;
    // A split report carries no leader; whatever the map holds for it is PD's MetaPeer.
    assert!(by_id["leader"]["role_name"].is_string());
    let mut expect_left = left_json.clone();
    expect_left["leader"] = by_id["leader"].clone();
    assert_eq!(by_id, expect_left);
    let by_id_right = get_json(&addr, &trust, &format!("/pd/api/v1/region/id/{r}")).await;
    right_json["leader"] = by_id_right["leader"].clone();
    assert_eq!(by_id_right, right_json);
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/regions").await,
        json!({"count": 2, "regions": [expect_left, right_json]})
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/region/key/a").await,
        expect_left
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/region/key/z%00").await,
        right_json
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/region/key/6D?format=hex").await,
        right_json
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/regions/key?key=a&end_key=n").await,
        json!({"count": 2, "regions": [expect_left, right_json]})
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/regions/key?key=a&limit=1").await,
        json!({"count": 1, "regions": [expect_left]})
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/regions/key?key=6D&format=hex").await,
        json!({"count": 1, "regions": [right_json]})
    );
    for (path, status, body) in [
        (
            "/pd/api/v1/region/id/0",
            StatusCode::BAD_REQUEST,
            json!("[PD:region:ErrRegionInvalidID]invalid region id"),
        ),
        (
            "/pd/api/v1/region/id/999999",
            StatusCode::NOT_FOUND,
            json!("[PD:region:ErrRegionNotFound]region 999999 not found"),
        ),
        (
            "/pd/api/v1/region/key/%ZZ",
            StatusCode::BAD_REQUEST,
            json!("invalid URL escape \"%ZZ\""),
        ),
        (
            "/pd/api/v1/regions/key?key=zz&format=hex",
            StatusCode::BAD_REQUEST,
            json!("encoding/hex: invalid byte"),
        ),
        (
            "/pd/api/v1/regions/key?limit=x",
            StatusCode::BAD_REQUEST,
            json!("strconv.Atoi: parsing \"x\": invalid syntax"),
        ),
    ] {
        let a = get(&addr, &trust, Proto::H1, path).await;
        assert_eq!((a.status, a.json()), (status, body), "{path}");
    }

    // GC: gc_worker at the GC safe point when no service set one.
    n.pd.update_gc_safe_point(pdpb::UpdateGcSafePointRequest {
        header: n.h(),
        safe_point: 100,
    })
    .await
    .unwrap();
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/gc/safepoint").await,
        json!({
            "service_gc_safe_points": [
                {"service_id": "gc_worker", "expired_at": i64::MAX, "safe_point": 100}
            ],
            "min_service_gc_safe_point": 100,
            "gc_safe_point": 100,
        })
    );

    // Min resolved ts: two regions led... by no reported leader yet, so the cluster's value
    // stays where PD starts it; the store's own report is read with a scope.
    n.pd.report_min_resolved_ts(pdpb::ReportMinResolvedTsRequest {
        header: n.h(),
        store_id: s,
        min_resolved_ts: 42,
    })
    .await
    .unwrap();
    let resolved = get_json(&addr, &trust, "/pd/api/v1/min-resolved-ts").await;
    assert_eq!(resolved["is_real_time"], true);
    assert_eq!(resolved["persist_interval"], "1s");
    assert!(resolved["min_resolved_ts"].is_u64());
    assert_eq!(resolved["stores_min_resolved_ts"], serde_json::Value::Null);
    let scoped = get_json(
        &addr,
        &trust,
        &format!("/pd/api/v1/min-resolved-ts?scope={s}"),
    )
    .await;
    let each = scoped["stores_min_resolved_ts"].as_object().unwrap();
    assert_eq!(each.keys().collect::<Vec<_>>(), vec![&s.to_string()]);
    let cluster = get_json(&addr, &trust, "/pd/api/v1/min-resolved-ts?scope=cluster").await;
    assert_eq!(
        cluster["stores_min_resolved_ts"],
        scoped["stores_min_resolved_ts"]
    );
    assert_eq!(
        get(
            &addr,
            &trust,
            Proto::H1,
            "/pd/api/v1/min-resolved-ts?scope=x"
        )
        .await
        .status,
        StatusCode::BAD_REQUEST
    );

    // Config, under PD's names and encodings.
    let replicate = get_json(&addr, &trust, "/pd/api/v1/config/replicate").await;
    assert_eq!(
        replicate,
        json!({
            "max-replicas": 3,
            "location-labels": "",
            "strictly-match-label": "false",
            "enable-placement-rules": "true",
            "enable-placement-rules-cache": "false",
            "isolation-level": "",
        })
    );
    let schedule = get_json(&addr, &trust, "/pd/api/v1/config/schedule").await;
    assert_eq!(schedule["max-store-down-time"], "30m0s");
    assert_eq!(schedule["leader-schedule-limit"], 4);
    // PD's default, written as PD's `,string` boolean.
    assert_eq!(schedule["enable-joint-consensus"], "true");
    let config = get_json(&addr, &trust, "/pd/api/v1/config").await;
    assert_eq!(config["replication"], replicate);
    assert_eq!(config["schedule"], schedule);

    // An unknown route: Go's NotFound, as PD's router answers it, over both versions.
    for proto in BOTH {
        for path in [
            "/pd/api/v1/no-such-route",
            "/elsewhere",
            "/pd/api/v2/keyspaces",
        ] {
            let a = get(&addr, &trust, proto, path).await;
            assert_eq!(a.status, StatusCode::NOT_FOUND, "{path}");
            assert_eq!(a.text(), "404 page not found\n");
            assert_eq!(a.content_type, "text/plain; charset=utf-8");
        }
    }

    // HTTP/2 with gRPC's content type goes to gRPC, whatever the path: an unknown method is
    // gRPC's UNIMPLEMENTED, not the HTTP API's 404.
    let a = send(
        &addr,
        &trust,
        Proto::H2,
        Method::POST,
        "/pd/api/v1/version",
        &[("content-type", "application/grpc"), ("te", "trailers")],
        "",
    )
    .await
    .unwrap();
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.content_type.starts_with("application/grpc"), "{a:?}");
    // And gRPC still serves on the port after all of this.
    let members =
        n.pd.get_members(pdpb::GetMembersRequest::default())
            .await
            .unwrap()
            .into_inner();
    assert_eq!(members.header.unwrap().cluster_id, n.cluster_id);
    n.server.stop().unwrap();
}

async fn status_member_id(n: &mut Node) -> u64 {
    n.pd.get_members(pdpb::GetMembersRequest::default())
        .await
        .unwrap()
        .into_inner()
        .leader
        .unwrap()
        .member_id
}
