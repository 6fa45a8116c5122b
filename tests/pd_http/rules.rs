//! Placement rules and region label rules over the HTTP API: PD's default rule, rules and
//! label rules checked as PD checks them (a bad one refused with PD's message and nothing
//! changed), admin-only edits, and everything still there after a restart.

use super::*;
use meridian::placement_rules::{encode_table_key, upper_hex};
use serde_json::json;

fn table_key(raw: &[u8]) -> String {
    upper_hex(&encode_table_key(raw))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_are_checked_as_pd_checks_them_and_survive_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;
    let (addr, trust) = (n.addr().to_string(), n.trust.clone());
    n.populate().await;

    let default = json!({
        "group_id": "pd", "id": "default", "start_key": "", "end_key": "",
        "role": "voter", "is_witness": false, "count": 3,
    });
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/config/rules").await,
        json!([default])
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/config/placement-rule").await,
        json!([{"group_id": "pd", "group_index": 0, "group_override": false, "rules": [default]}])
    );

    // A rule PD refuses, in PD's words; nothing changes.
    let bad = json!([{"group_id": "tidb", "id": "t1", "start_key": "", "end_key": "", "role": "voter", "count": 0}]);
    let a = call(
        &addr,
        &trust,
        Method::POST,
        "/pd/api/v1/config/rules",
        Some(&bad),
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        a.json(),
        json!("[PD:placement:ErrRuleContent]invalid rule content, invalid count 0")
    );
    let raw_key = json!([{"group_id": "tidb", "id": "t1", "start_key": "74", "end_key": "", "role": "voter", "count": 1}]);
    let a = call(
        &addr,
        &trust,
        Method::POST,
        "/pd/api/v1/config/rules",
        Some(&raw_key),
    )
    .await;
    assert_eq!(
        a.json(),
        json!("[PD:placement:ErrRuleContent]invalid rule content, start key should be encoded in table mode: insufficient bytes to decode value")
    );
    let a = call(
        &addr,
        &trust,
        Method::POST,
        "/pd/api/v1/config/rules",
        Some(&json!({"not": "a list"})),
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    // Deleting the last rule leaves keys unplaced: PD answers 500 for a rule list it cannot build.
    let del = json!([{"group_id": "pd", "id": "default", "action": "del"}]);
    let a = call(
        &addr,
        &trust,
        Method::POST,
        "/pd/api/v1/config/rules/batch",
        Some(&del),
    )
    .await;
    assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        a.json(),
        json!("[PD:placement:ErrBuildRuleList]build rule list failed, no rule left")
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/config/rules").await,
        json!([default])
    );

    // A client may read but not write.
    let client = roles::holder(&data, "client-rules", &[meridian::tls::cert::Role::Client]);
    let learner = json!({
        "group_id": "tiflash", "id": "table-1", "start_key": table_key(b"t1"), "end_key": table_key(b"t2"),
        "role": "learner", "count": 1,
        "label_constraints": [{"key": "engine", "op": "in", "values": ["tiflash"]}],
    });
    let a = call(
        &addr,
        &client,
        Method::POST,
        "/pd/api/v1/config/rules",
        Some(&json!([learner])),
    )
    .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);

    // Admin writes: a learner rule, stamped when stored.
    let a = call(
        &addr,
        &trust,
        Method::POST,
        "/pd/api/v1/config/rules",
        Some(&json!([learner])),
    )
    .await;
    assert_eq!(
        (a.status, a.json()),
        (StatusCode::OK, json!("Update rules successfully."))
    );
    let listed = get_json(&addr, &trust, "/pd/api/v1/config/rules").await;
    let stored = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["group_id"] == "tiflash")
        .unwrap()
        .clone();
    assert!(stored["create_timestamp"].as_u64().unwrap() > 1_700_000_000);
    assert_eq!(stored.get("version"), None, "version 0 is left out");
    assert_eq!(stored["label_constraints"], learner["label_constraints"]);

    // Region labels.
    let label = json!({
        "id": "schema/test/t1", "index": 0, "rule_type": "key-range",
        "labels": [{"key": "merge_option", "value": "allow"}],
        "data": [{"start_key": table_key(b"t1"), "end_key": table_key(b"t2")}],
    });
    let a = call(
        &addr,
        &trust,
        Method::PATCH,
        "/pd/api/v1/config/region-label/rules",
        Some(&json!({"sets": [label], "deletes": []})),
    )
    .await;
    assert_eq!(
        (a.status, a.json()),
        (
            StatusCode::OK,
            json!("Update region label rules successfully.")
        )
    );
    let no_id = json!({"sets": [{"labels": [{"key": "k", "value": "v"}], "rule_type": "key-range", "data": []}]});
    let a = call(
        &addr,
        &trust,
        Method::PATCH,
        "/pd/api/v1/config/region-label/rules",
        Some(&no_id),
    )
    .await;
    assert_eq!(
        (a.status, a.json()),
        (
            StatusCode::BAD_REQUEST,
            json!("[PD:region:ErrRegionRuleContent]invalid region rule content, empty rule id")
        )
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/config/region-label/rules").await,
        json!([label])
    );
    assert_eq!(
        get_json(
            &addr,
            &trust,
            "/pd/api/v1/config/region-label/rule/schema%2Ftest%2Ft1"
        )
        .await,
        label
    );
    let by_ids = send(
        &addr,
        &trust,
        Proto::H1,
        Method::GET,
        "/pd/api/v1/config/region-label/rules/ids",
        &[("content-type", "application/json")],
        r#"["nope", "schema/test/t1"]"#,
    )
    .await
    .unwrap();
    assert_eq!(
        (by_ids.status, by_ids.json()),
        (StatusCode::OK, json!([label]))
    );
    let missing = get(
        &addr,
        &trust,
        Proto::H2,
        "/pd/api/v1/config/region-label/rule/nope",
    )
    .await;
    assert_eq!(
        (missing.status, missing.json()),
        (
            StatusCode::NOT_FOUND,
            json!("[PD:region:ErrRegionRuleNotFound]region label rule not found for id nope")
        )
    );
    // A partial bundle replaces only its group: TiDB's placement policies.
    let bundle = json!([{
        "group_id": "TiDB_DDL_70", "group_index": 40, "group_override": true,
        "rules": [{
            "id": "table_rule_70_0", "start_key": table_key(b"t3"), "end_key": table_key(b"t4"),
            "role": "voter", "count": 3,
        }],
    }]);
    let a = call(
        &addr,
        &trust,
        Method::POST,
        "/pd/api/v1/config/placement-rule?partial=true",
        Some(&bundle),
    )
    .await;
    assert_eq!(
        (a.status, a.json()),
        (
            StatusCode::OK,
            json!("Update rules and groups successfully.")
        )
    );
    let ddl = get_json(
        &addr,
        &trust,
        "/pd/api/v1/config/placement-rule/TiDB_DDL_70",
    )
    .await;
    assert_eq!(
        (ddl["group_index"].clone(), ddl["group_override"].clone()),
        (json!(40), json!(true))
    );
    assert_eq!(
        ddl["rules"][0]["group_id"], "TiDB_DDL_70",
        "the bundle names the group"
    );
    let all = get_json(&addr, &trust, "/pd/api/v1/config/rules").await;
    assert_eq!(
        all.as_array().unwrap().len(),
        3,
        "the default and tiflash rules stay: {all}"
    );

    // One group's bundle, and one nobody named.
    let tiflash = get_json(&addr, &trust, "/pd/api/v1/config/placement-rule/tiflash").await;
    assert_eq!(tiflash["group_id"], "tiflash");
    assert_eq!(tiflash["rules"].as_array().unwrap().len(), 1);
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/config/placement-rule/none").await,
        json!({"group_id": "none", "group_index": 0, "group_override": false, "rules": null})
    );

    // After a restart, everything is as it was.
    let rules_before = get_json(&addr, &trust, "/pd/api/v1/config/rules").await;
    let bundles_before = get_json(&addr, &trust, "/pd/api/v1/config/placement-rule").await;
    n.server.stop().unwrap();
    let n = start(&data).await;
    let addr = n.addr().to_string();
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/config/rules").await,
        rules_before
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/config/placement-rule").await,
        bundles_before
    );
    assert_eq!(
        get_json(&addr, &trust, "/pd/api/v1/config/region-label/rules").await,
        json!([label])
    );
    n.server.stop().unwrap();
}
