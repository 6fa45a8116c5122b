//! A follower's HTTP API, on a cluster of three on etcd, as PD's redirector serves it: PD's
//! local-only routes (version, status, health, ping, GET config) it answers itself; every
//! other request, read or change, it sends on to the leader and answers with the leader's
//! answer (members and leader included, as PD does). The caller's role is checked at the
//! follower before anything is sent on, and the leader acts with the caller's roles, never the
//! follower's: a role claimed in a header by anyone but a member counts for nothing.

use super::*;
use meridian::harness::{bootstrap_over_grpc, Cluster};
use meridian::tls::cert::Role;
use serde_json::json;

/// The count of `meridian_request_errors_total{kind="permission_denied"}` on member `i`.
fn denied_on(c: &Cluster, i: usize) -> u64 {
    let a = c.admin(i).unwrap().send("GET", "/metrics", None).unwrap();
    let text = a.body;
    text.lines()
        .find(|l| l.starts_with("meridian_request_errors_total{kind=\"permission_denied\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no permission_denied count in {text}"))
}

/// A GET with PD's follower header, as PD's HTTP client spells it.
async fn from_copy(addr: &str, trust: &Trust, path: &str) -> Answer {
    send(
        addr,
        trust,
        Proto::H1,
        Method::GET,
        path,
        &[("PD-Allow-Follower-Handle", "true")],
        "",
    )
    .await
    .unwrap()
}

/// A store and one region over every key, bootstrapped through the leader's gRPC.
async fn bootstrap(addr: &str, trust: &Trust) {
    let (mut pd, cluster_id) = connect_when_placement_loads(addr, trust, Duration::from_secs(20))
        .await
        .unwrap();
    bootstrap_over_grpc(&mut pd, cluster_id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_answers_pds_local_routes_and_sends_the_rest_to_the_leader() {
    let tmp = tempfile::tempdir().unwrap();
    let (c, leader) = Cluster::start_led(
        tmp.path(),
        3,
        "[election]\nlease_ttl_secs = 2\n",
        Duration::from_secs(20),
    )
    .unwrap();
    let follower = (leader + 1) % 3;
    let trust = c.trust();
    let at = |i: usize| c.nodes[i].process().client_addr.clone();
    bootstrap(&at(leader), &trust).await;
    // The leader lists the members it has read from etcd's registry, which a member joins as
    // it starts: wait until all three are there, so every answer below lists the same three.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while get(&at(leader), &trust, Proto::H1, "/pd/api/v1/members")
        .await
        .json()["members"]
        .as_array()
        .map_or(0, Vec::len)
        < 3
    {
        assert!(
            std::time::Instant::now() < deadline,
            "three members registered within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    for proto in BOTH {
        // What PD answers on every member.
        for path in [
            "/pd/api/v1/version",
            "/pd/api/v1/status",
            "/pd/api/v1/health",
            "/pd/api/v1/ping",
            "/pd/api/v1/config",
        ] {
            let a = get(&at(follower), &trust, proto, path).await;
            assert_eq!(a.status, StatusCode::OK, "{path}: {}", a.text());
        }
        // The follower's status is its own: its start, not the leader's.
        let mine = get(&at(follower), &trust, proto, "/pd/api/v1/status").await;
        assert!(mine.json()["start_timestamp"].as_i64().unwrap() > 0);
    }
    // The rest is the leader's answer, over either HTTP, whoever is asked.
    for path in [
        "/pd/api/v1/leader",
        "/pd/api/v1/members",
        "/pd/api/v1/stores",
        "/pd/api/v1/regions",
        "/pd/api/v1/config/rules",
    ] {
        let direct = get_json(&at(leader), &trust, path).await;
        let sent_on = get_json(&at(follower), &trust, path).await;
        assert_eq!(sent_on, direct, "{path}");
    }
    let regions = get_json(&at(follower), &trust, "/pd/api/v1/regions").await;
    assert_eq!(regions["count"], 1);
    assert_eq!(
        get_json(&at(follower), &trust, "/pd/api/v1/leader").await["name"],
        format!("n{leader}")
    );
    // An unknown region is the leader's 404, as PD words it.
    let a = get(
        &at(follower),
        &trust,
        Proto::H1,
        "/pd/api/v1/region/id/999999",
    )
    .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(
        a.json(),
        json!("[PD:region:ErrRegionNotFound]region 999999 not found")
    );

    // With PD's follower header (as PD's HTTP client spells it), the follower answers region
    // reads itself, from its region syncer's copy: the same regions, and counted among the
    // follower's own placement requests, which a request sent on to the leader is not.
    let copy_reads = [
        "/pd/api/v1/regions",
        "/pd/api/v1/regions/key?key=&limit=10",
        "/pd/api/v1/region/key/a",
    ];
    let ids = |v: &serde_json::Value| -> Vec<serde_json::Value> {
        match v["regions"].as_array() {
            Some(all) => all.iter().map(|r| r["id"].clone()).collect(),
            None => vec![v["id"].clone()],
        }
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while from_copy(&at(follower), &trust, copy_reads[0]).await.status != StatusCode::OK {
        assert!(
            std::time::Instant::now() < deadline,
            "the follower's copy in sync within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for path in copy_reads {
        let before = c.requests_handled(follower, "placement").unwrap();
        let a = from_copy(&at(follower), &trust, path).await;
        assert_eq!(a.status, StatusCode::OK, "{path}: {}", a.text());
        assert_eq!(
            ids(&a.json()),
            ids(&get_json(&at(leader), &trust, path).await)
        );
        assert!(
            c.requests_handled(follower, "placement").unwrap() > before,
            "{path}: answered here"
        );
        let before = c.requests_handled(follower, "placement").unwrap();
        get_json(&at(follower), &trust, path).await;
        assert_eq!(
            c.requests_handled(follower, "placement").unwrap(),
            before,
            "{path}: sent on"
        );
    }
    let boot = ids(&get_json(&at(leader), &trust, "/pd/api/v1/regions").await)[0].clone();
    let path = format!("/pd/api/v1/region/id/{boot}");
    let a = from_copy(&at(follower), &trust, &path).await;
    assert_eq!(a.json()["id"], boot, "{}", a.text());

    // A change sent to the follower is made on the leader, for an admin.
    let admin = c.nodes[0]
        .process()
        .role_cert(Role::Admin, "admin")
        .unwrap();
    let rule = json!({
        "id": "follower-test", "index": 0, "rule_type": "key-range",
        "labels": [{"key": "merge_option", "value": "deny"}],
        "data": [{"start_key": "7480", "end_key": "7481"}],
    });
    for proto in BOTH {
        let a = send(
            &at(follower),
            &admin,
            proto,
            Method::POST,
            "/pd/api/v1/config/region-label/rule",
            &[("content-type", "application/json")],
            &rule.to_string(),
        )
        .await
        .unwrap();
        assert_eq!(a.status, StatusCode::OK, "{proto:?}: {}", a.text());
    }
    let on_leader = get_json(
        &at(leader),
        &trust,
        "/pd/api/v1/config/region-label/rule/follower-test",
    )
    .await;
    assert_eq!(on_leader["labels"], rule["labels"]);

    // Refusals come from the follower, before anything goes on: the follower counts them and
    // the leader sees none.
    let client = c.nodes[0]
        .process()
        .role_cert(Role::Client, "reader")
        .unwrap();
    let no_role = super::roles::holder(&c.nodes[0].data, "nobody", &[]);
    let (leader_before, follower_before) = (denied_on(&c, leader), denied_on(&c, follower));
    for proto in BOTH {
        let a = get(&at(follower), &no_role, proto, "/pd/api/v1/regions").await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text());
        assert!(a.text().contains("role"), "{}", a.text());
        // A client may read but not change; naming a role in the forwarding headers, as
        // only a member may, gains nothing.
        for headers in [
            &[][..],
            &[("PD-Redirector", "n9"), ("Meridian-Caller-Roles", "admin")][..],
        ] {
            let a = send(
                &at(follower),
                &client,
                proto,
                Method::POST,
                "/pd/api/v1/config/region-label/rule",
                headers,
                &rule.to_string(),
            )
            .await
            .unwrap();
            assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text());
            assert!(a.text().contains("`admin`"), "{}", a.text());
        }
    }
    assert_eq!(denied_on(&c, follower), follower_before + 6);
    assert_eq!(denied_on(&c, leader), leader_before);

    // A request marked as sent on is never sent on again: PD's refusal at a non-leader.
    let a = send(
        &at(follower),
        &trust,
        Proto::H1,
        Method::GET,
        "/pd/api/v1/regions",
        &[("PD-Redirector", "n9")],
        "",
    )
    .await
    .unwrap();
    assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        a.text(),
        "[PD:apiutil:ErrRedirectToNotLeader]redirect to not leader\n"
    );
}
