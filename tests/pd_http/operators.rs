//! PD's operator API against the real binary: an admin operator created by `POST /operators`
//! is listed (`GET /operators`, by kind, as objects), shown by region, reaches the region's
//! leader on its heartbeat stream as PD's `RegionHeartbeatResponse`, refuses a second one and
//! is cancelled by `DELETE` (and then found in `/operators/records`); bad input gets PD's
//! status and words; only `admin` may change anything. A replica move reaches the leader as
//! PD's joint-consensus `change_peer_v2` steps. How a step is worded follows the cluster
//! version as PD's `GetCmd(region, useConfChangeV2)` has it: from 5.0 a single conf change
//! goes as a `change_peer_v2` holding just it; below, as `change_peer`, and a replica move is
//! made one peer at a time (PD builds no joint step there).

use super::operator_setup::*;
use super::*;
use meridian::harness::{metapb_peer as peer, metapb_region};
use meridian::kvproto::{eraftpb, metapb};
use meridian::tls::cert::Role;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_are_created_listed_sent_to_the_leader_and_cancelled_as_in_pd() {
    let tmp = tempfile::tempdir().unwrap();
    // From 5.0 a single conf change reaches the leader as a `ChangePeerV2` holding just it.
    let Setup {
        n: _node,
        data,
        addr,
        admin,
        tx,
        mut replies,
        beat,
        alive,
    } = setup(&tmp, "8.5.0").await;

    // Nothing runs yet: an empty list, and PD's 500 for a region without an operator.
    assert_eq!(
        get_json(&addr, &admin, "/pd/api/v1/operators").await,
        json!([])
    );
    let op_10 = "/pd/api/v1/operators/10";
    expect(&addr, &admin, Method::GET, op_10, None, NOT_FOUND).await;
    // None ended yet: PD's 500.
    let records = "/pd/api/v1/operators/records";
    expect(&addr, &admin, Method::GET, records, None, NOT_FOUND).await;

    // transfer-leader to store 2: created, listed, shown, and sent to the leader.
    let body = json!({"name": "transfer-leader", "region_id": 10, "to_store_id": 2});
    created(&addr, &admin, body).await;
    let listed = get_json(&addr, &admin, "/pd/api/v1/operators").await;
    let ops = listed.as_array().unwrap();
    assert_eq!(ops.len(), 1, "{listed}");
    let shown = ops[0].as_str().unwrap();
    assert!(
        shown.starts_with(
            "admin-transfer-leader {transfer leader: store 1 to 2} (kind:admin,leader, \
             region:10(1, 3), createAt:"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("currentStep:0, size:96, steps:[0:{transfer leader from store 1 to store 2}], timeout:["),
        "{shown}"
    );
    let by_kind = get_json(&addr, &admin, "/pd/api/v1/operators?kind=admin").await;
    assert_eq!(by_kind, listed);
    let leader_and_admin =
        get_json(&addr, &admin, "/pd/api/v1/operators?kind=admin&kind=leader").await;
    assert_eq!(
        leader_and_admin.as_array().unwrap().len(),
        2,
        "PD appends per kind"
    );
    assert_eq!(
        get_json(&addr, &admin, "/pd/api/v1/operators?kind=region").await,
        Value::Null,
        "PD lists no match as null"
    );
    let objects = get_json(&addr, &admin, "/pd/api/v1/operators?object").await;
    let o = &objects[0];
    assert_eq!(o["desc"], "admin-transfer-leader");
    assert_eq!(o["brief"], "transfer leader: store 1 to 2");
    assert_eq!(o["region_id"], 10);
    assert_eq!(o["region_epoch"], json!({"conf_ver": 3, "version": 1}));
    assert_eq!(o["kind"], 1 | 256, "admin and leader, PD's bits");
    assert_eq!(o["status"], 1, "PD's STARTED");
    assert!(o["timeout"].as_str().unwrap().ends_with('s'), "{o}");
    let status = get_json(&addr, &admin, "/pd/api/v1/operators/10").await;
    assert!(
        status
            .as_str()
            .unwrap()
            .starts_with("status: RUNNING, operator: admin-transfer-leader {"),
        "{status}"
    );
    tx.send(beat.clone()).await.unwrap();
    let sent = leader_gets(&mut replies, |r| r.transfer_leader.is_some()).await;
    let to = sent.transfer_leader.unwrap().peer.unwrap();
    assert_eq!((to.id, to.store_id), (12, 2));
    assert_eq!(sent.target_peer.unwrap().store_id, 1, "to the leader");

    // A second admin operator on the region is refused while the first runs.
    let body = json!({"name": "add-peer", "region_id": 10, "store_id": 4});
    let refused = (
        StatusCode::INTERNAL_SERVER_ERROR,
        "[PD:operator:ErrAddOperator]failed to add operator, maybe already have one",
    );
    expect(&addr, &admin, Method::POST, OPERATORS, Some(&body), refused).await;

    // A client certificate reads but changes nothing.
    let client = super::roles::holder(&data, "tidb", &[Role::Client]);
    let a = call(&addr, &client, Method::GET, "/pd/api/v1/operators", None).await;
    assert_eq!(a.status, StatusCode::OK);
    for (method, path) in [
        (Method::POST, "/pd/api/v1/operators"),
        (Method::DELETE, "/pd/api/v1/operators/10"),
        (Method::DELETE, "/pd/api/v1/operators"),
    ] {
        let body = json!({"name": "add-peer", "region_id": 10, "store_id": 4});
        let a = call(&addr, &client, method, path, Some(&body)).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{path}");
        assert!(a.text().contains("`admin`"), "{}", a.text());
    }
    assert_eq!(
        get_json(&addr, &admin, "/pd/api/v1/operators").await,
        listed
    );

    // DELETE cancels it: gone from the list, its status kept; a second DELETE finds nothing.
    let cancelled = (StatusCode::OK, "The pending operator is canceled.");
    expect(&addr, &admin, Method::DELETE, op_10, None, cancelled).await;
    assert_eq!(
        get_json(&addr, &admin, "/pd/api/v1/operators").await,
        json!([])
    );
    let status = get_json(&addr, &admin, "/pd/api/v1/operators/10").await;
    assert!(
        status
            .as_str()
            .unwrap()
            .starts_with("status: CANCEL, operator: admin-transfer-leader"),
        "{status}"
    );
    expect(&addr, &admin, Method::DELETE, op_10, None, NOT_FOUND).await;
    let records = get_json(&addr, &admin, "/pd/api/v1/operators/records?from=0").await;
    let first = records[0].as_str().unwrap();
    assert!(
        first.starts_with("admin-transfer-leader (kind:admin,leader, region:10(1, 3)) (finishAt:"),
        "{records}"
    );
    assert!(first.ends_with("status:CANCEL)"), "{first}");
    let bad = (
        StatusCode::BAD_REQUEST,
        "strconv.ParseInt: parsing \"x\": invalid syntax",
    );
    let from_x = "/pd/api/v1/operators/records?from=x";
    expect(&addr, &admin, Method::GET, from_x, None, bad).await;

    // add-peer: a learner on store 4 first, sent to the leader as PD's AddLearnerNode, alone
    // in a ChangePeerV2 (the cluster is at 8.5.0).
    let body = json!({"name": "add-peer", "region_id": 10, "store_id": 4});
    created(&addr, &admin, body).await;
    tx.send(beat.clone()).await.unwrap();
    let sent = leader_gets(&mut replies, |r| !conf_changes(r).0.is_empty()).await;
    let (changes, v2) = conf_changes(&sent);
    assert!(v2, "{sent:?}");
    let [(change_type, _, to)] = changes[..] else {
        panic!("{sent:?}")
    };
    assert_eq!(
        (change_type, to),
        (eraftpb::ConfChangeType::AddLearnerNode as i32, 4)
    );
    let listed = get_json(&addr, &admin, "/pd/api/v1/operators?kind=region").await;
    assert!(
        listed[0]
            .as_str()
            .unwrap()
            .starts_with("admin-add-peer {add peer: store [4]} (kind:admin,region,"),
        "{listed}"
    );
    let all_cancelled = (StatusCode::OK, "All pending operators are canceled.");
    expect(
        &addr,
        &admin,
        Method::DELETE,
        OPERATORS,
        None,
        all_cancelled,
    )
    .await;
    assert_eq!(
        get_json(&addr, &admin, "/pd/api/v1/operators").await,
        json!([])
    );

    // split-region with policy usekey: the leader is asked to split at "m".
    let body = json!({"name": "split-region", "region_id": 10, "policy": "usekey", "keys": ["6d"]});
    created(&addr, &admin, body).await;
    tx.send(beat.clone()).await.unwrap();
    let sent = leader_gets(&mut replies, |r| r.split_region.is_some()).await;
    assert_eq!(sent.split_region.unwrap().keys, vec![b"m".to_vec()]);
    let listed = get_json(&addr, &admin, "/pd/api/v1/operators").await;
    assert!(
        listed[0].as_str().unwrap().starts_with(
            "admin-split-region {split: region 10 use policy USEKEY and keys [6D]} (kind:admin,"
        ),
        "{listed}"
    );
    expect(&addr, &admin, Method::DELETE, op_10, None, cancelled).await;

    // transfer-region with every store's role: store 3's peer moves to store 4, leader kept.
    let body = json!({"name": "transfer-region", "region_id": 10, "to_store_ids": [1, 2, 4],
                      "peer_roles": ["leader", "voter", "voter"]});
    created(&addr, &admin, body).await;
    let listed = get_json(&addr, &admin, "/pd/api/v1/operators?object").await;
    assert_eq!(listed[0]["brief"], "mv peer: store [3] to [4]", "{listed}");
    assert_eq!(listed[0]["desc"], "admin-move-region");
    expect(
        &addr,
        &admin,
        Method::DELETE,
        OPERATORS,
        None,
        all_cancelled,
    )
    .await;

    // Bad input: PD's status and words.
    for (body, want_status, want) in [
        (json!({"name": "no-such"}), 400, "unknown operator"),
        (json!({}), 400, "missing operator name"),
        (json!({"name": 5}), 400, "missing operator name"),
        (json!({"name": "transfer-leader"}), 400, "missing region id"),
        (
            json!({"name": "transfer-leader", "region_id": "10", "to_store_id": 2}),
            400,
            "missing region id",
        ),
        (
            json!({"name": "transfer-leader", "region_id": 10}),
            400,
            "missing store id to transfer leader to",
        ),
        (
            json!({"name": "transfer-peer", "region_id": 10, "to_store_id": 4}),
            400,
            "invalid store id to transfer peer from",
        ),
        (
            json!({"name": "add-learner", "region_id": 10}),
            400,
            "invalid store id to transfer peer to",
        ),
        (
            json!({"name": "transfer-region", "region_id": 10, "to_store_ids": [1, "x"]}),
            400,
            "invalid store ids to transfer region to",
        ),
        (
            json!({"name": "transfer-region", "region_id": 10, "to_store_ids": []}),
            400,
            "missing store ids to transfer region to",
        ),
        (
            json!({"name": "split-region", "region_id": 10}),
            400,
            "missing split policy",
        ),
        (
            json!({"name": "split-region", "region_id": 10, "policy": "usekey", "keys": [1]}),
            400,
            "bad format keys",
        ),
        (
            json!({"name": "transfer-leader", "region_id": 999, "to_store_id": 2}),
            500,
            "[PD:region:ErrRegionNotFound]region 999 not found",
        ),
        (
            json!({"name": "split-region", "region_id": 999, "policy": "usekey"}),
            500,
            "[PD:region:ErrRegionNotFound]region 999 not found",
        ),
        (
            json!({"name": "add-peer", "region_id": 10, "store_id": 99}),
            500,
            "[PD:core:ErrStoreNotFound]store 99 not found",
        ),
        (
            json!({"name": "transfer-peer", "region_id": 10, "from_store_id": 3, "to_store_id": 99}),
            500,
            "[PD:core:ErrStoreNotFound]store 99 not found",
        ),
        (
            json!({"name": "add-peer", "region_id": 10, "store_id": 2}),
            500,
            "region already has peer in store 2",
        ),
        (
            json!({"name": "transfer-leader", "region_id": 10, "to_store_id": 4}),
            500,
            "region has no voter in store 4",
        ),
        (
            json!({"name": "transfer-leader", "region_id": 10, "to_store_id": 1}),
            500,
            "no operator step is built",
        ),
        (
            json!({"name": "remove-peer", "region_id": 10, "store_id": 4}),
            500,
            "region has no peer in store 4",
        ),
        (
            json!({"name": "transfer-region", "region_id": 10, "to_store_ids": [1, 2, 4]}),
            500,
            "transfer region without peer role is not supported when placement rules enabled",
        ),
        (
            json!({"name": "split-region", "region_id": 10, "policy": "usekey", "keys": ["zz"]}),
            500,
            "split key zz is not in hex format",
        ),
        (
            json!({"name": "split-region", "region_id": 10, "policy": "middle"}),
            500,
            "check policy middle is not supported",
        ),
        (
            json!({"name": "scatter-region", "region_id": 999}),
            500,
            "[PD:region:ErrRegionNotFound]region 999 not found",
        ),
        (
            json!({"name": "scatter-regions", "start_key": "", "end_key": ""}),
            400,
            "region_ids is invalid",
        ),
    ] {
        let (status, said) = post(&addr, &admin, body.clone()).await;
        assert_eq!(
            (status.as_u16(), said.as_str()),
            (want_status, want),
            "{body}"
        );
    }
    let a = call(&addr, &admin, Method::POST, "/pd/api/v1/operators", None).await;
    assert_eq!(
        a.status,
        StatusCode::BAD_REQUEST,
        "an empty body is not JSON"
    );
    let bad = (
        StatusCode::BAD_REQUEST,
        "strconv.ParseUint: parsing \"abc\": invalid syntax",
    );
    expect(
        &addr,
        &admin,
        Method::GET,
        "/pd/api/v1/operators/abc",
        None,
        bad,
    )
    .await;
    let a = call(&addr, &admin, Method::GET, "/pd/api/v1/operators/999", None).await;
    assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
    // A refusal started nothing.
    assert_eq!(
        get_json(&addr, &admin, "/pd/api/v1/operators").await,
        json!([])
    );

    // transfer-peer 3 -> 4: a replica move, made with joint consensus as PD's default has it.
    // The learner first (AddLearnerNode), then one ChangePeerV2 promoting it and demoting
    // peer 13, then an empty ChangePeerV2 to leave the joint state, then peer 13 removed.
    let body =
        json!({"name": "transfer-peer", "region_id": 10, "from_store_id": 3, "to_store_id": 4});
    created(&addr, &admin, body).await;
    let listed = get_json(&addr, &admin, OPERATORS).await;
    let shown = listed[0].as_str().unwrap();
    // The new peer's id, from the first step's words (earlier operators' pushes may still be
    // queued on the stream).
    let new: u64 = shown
        .split("0:{add learner peer ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("{shown}"));
    tx.send(beat.clone()).await.unwrap();
    let sent = leader_gets(&mut replies, |r| {
        conf_changes(r).0.iter().any(|&(_, id, _)| id == new)
    })
    .await;
    assert_eq!(
        conf_changes(&sent),
        (
            vec![(eraftpb::ConfChangeType::AddLearnerNode as i32, new, 4)],
            true
        )
    );
    let enter = format!(
        "use joint consensus, promote learner peer {new} on store 4 to voter, \
         demote voter peer 13 on store 3 to learner"
    );
    let leave = format!(
        "leave joint state, promote learner peer {new} on store 4 to voter, \
         demote voter peer 13 on store 3 to learner"
    );
    let steps = format!(
        "steps:[0:{{add learner peer {new} on store 4}}, 1:{{{enter}}}, 2:{{{leave}}}, \
         3:{{remove peer on store 3}}]"
    );
    assert!(shown.contains(&steps), "{shown}");
    let role = |p: metapb::Peer, role: metapb::PeerRole| metapb::Peer {
        role: role as i32,
        ..p
    };
    let report = |conf_ver, peers| pdpb::RegionHeartbeatRequest {
        region: Some(metapb_region(10, b"", b"", (conf_ver, 1), peers)),
        ..beat.clone()
    };
    let learning = role(peer(new, 4), metapb::PeerRole::Learner);
    tx.send(report(
        4,
        vec![peer(11, 1), peer(12, 2), peer(13, 3), learning],
    ))
    .await
    .unwrap();
    let sent = leader_gets(&mut replies, |r| conf_changes(r).0.len() == 2).await;
    assert_eq!(
        conf_changes(&sent),
        (
            vec![
                (eraftpb::ConfChangeType::AddNode as i32, new, 4),
                (eraftpb::ConfChangeType::AddLearnerNode as i32, 13, 3),
            ],
            true
        )
    );
    let joint = vec![
        peer(11, 1),
        peer(12, 2),
        role(peer(13, 3), metapb::PeerRole::DemotingVoter),
        role(peer(new, 4), metapb::PeerRole::IncomingVoter),
    ];
    tx.send(report(6, joint)).await.unwrap();
    let leaving = |r: &pdpb::RegionHeartbeatResponse| {
        r.change_peer_v2
            .as_ref()
            .is_some_and(|c| c.changes.is_empty())
    };
    leader_gets(&mut replies, leaving).await;
    let left = vec![
        peer(11, 1),
        peer(12, 2),
        role(peer(13, 3), metapb::PeerRole::Learner),
        peer(new, 4),
    ];
    tx.send(report(8, left)).await.unwrap();
    let removes = |r: &pdpb::RegionHeartbeatResponse| {
        conf_changes(r)
            .0
            .iter()
            .any(|c| c.0 == eraftpb::ConfChangeType::RemoveNode as i32)
    };
    let sent = leader_gets(&mut replies, removes).await;
    assert_eq!(
        conf_changes(&sent),
        (
            vec![(eraftpb::ConfChangeType::RemoveNode as i32, 13, 3)],
            true
        )
    );

    alive.abort();
    drop(tx);
}

/// Below 5.0 (PD's `IsFeatureSupported(version, ConfChangeV2)` is false) a step goes as
/// `change_peer`, and a replica move is made one peer at a time even with
/// `enable-joint-consensus` on: PD's builder uses joint consensus only where the cluster
/// version takes `ChangePeerV2`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_5_0_steps_go_as_change_peer_and_moves_are_not_joint() {
    let tmp = tempfile::tempdir().unwrap();
    let Setup {
        n: _node,
        addr,
        admin,
        tx,
        mut replies,
        beat,
        alive,
        ..
    } = setup(&tmp, "4.0.16").await;
    let body =
        json!({"name": "transfer-peer", "region_id": 10, "from_store_id": 3, "to_store_id": 4});
    created(&addr, &admin, body).await;
    let listed = get_json(&addr, &admin, OPERATORS).await;
    let shown = listed[0].as_str().unwrap();
    let new: u64 = shown
        .split("0:{add learner peer ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("{shown}"));
    let steps = format!(
        "steps:[0:{{add learner peer {new} on store 4}}, \
         1:{{promote learner peer {new} on store 4 to voter}}, 2:{{remove peer on store 3}}]"
    );
    assert!(shown.contains(&steps), "{shown}");
    let report = |conf_ver, peers| pdpb::RegionHeartbeatRequest {
        region: Some(metapb_region(10, b"", b"", (conf_ver, 1), peers)),
        ..beat.clone()
    };
    // The first reply that carries `change` for peer `id` (a step may be sent more than once:
    // when the operator starts, and on each heartbeat).
    let carries = |change: eraftpb::ConfChangeType, id: u64| {
        move |r: &pdpb::RegionHeartbeatResponse| {
            conf_changes(r)
                .0
                .iter()
                .any(|&(t, p, _)| (t, p) == (change as i32, id))
        }
    };
    tx.send(beat.clone()).await.unwrap();
    let add_learner = carries(eraftpb::ConfChangeType::AddLearnerNode, new);
    let sent = leader_gets(&mut replies, add_learner).await;
    assert_eq!(
        conf_changes(&sent),
        (
            vec![(eraftpb::ConfChangeType::AddLearnerNode as i32, new, 4)],
            false
        )
    );
    let learning = metapb::Peer {
        role: metapb::PeerRole::Learner as i32,
        ..peer(new, 4)
    };
    tx.send(report(
        4,
        vec![peer(11, 1), peer(12, 2), peer(13, 3), learning],
    ))
    .await
    .unwrap();
    let promote = carries(eraftpb::ConfChangeType::AddNode, new);
    let sent = leader_gets(&mut replies, promote).await;
    assert_eq!(
        conf_changes(&sent),
        (
            vec![(eraftpb::ConfChangeType::AddNode as i32, new, 4)],
            false
        )
    );
    let promoted = vec![peer(11, 1), peer(12, 2), peer(13, 3), peer(new, 4)];
    tx.send(report(5, promoted)).await.unwrap();
    let remove = carries(eraftpb::ConfChangeType::RemoveNode, 13);
    let sent = leader_gets(&mut replies, remove).await;
    assert_eq!(
        conf_changes(&sent),
        (
            vec![(eraftpb::ConfChangeType::RemoveNode as i32, 13, 3)],
            false
        )
    );

    alive.abort();
    drop(tx);
}
