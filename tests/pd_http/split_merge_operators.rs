//! PD's `merge-region` and `split-region` operators against the real binary: a merge is
//! checked as PD's handler checks it (both regions known and healthy, touching), runs as a
//! pair of operators (the source's, sent to its leader as PD's `Merge`, and the target's,
//! never sent), and the target's ends once it has grown over the source's range; a split by
//! each of PD's policies reaches the leader as PD's `SplitRegion` with that `CheckPolicy`.
//! How the pair ends together is `merge_pair`'s.

use super::operator_setup::{
    beat, created, expect, post, reply_where, setup, split_in_halves, Setup, OPERATORS,
};
use super::*;
use meridian::harness::{metapb_peer as peer, metapb_region};
use meridian::tls::cert::Role;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_region_is_checked_and_run_as_a_pair_as_in_pd() {
    let tmp = tempfile::tempdir().unwrap();
    // Region 10 splits at "m"; 21 is the new right half. 21's peer on store 2 catches up.
    let (
        Setup {
            n,
            data,
            addr,
            admin,
            tx,
            mut replies,
            alive,
            ..
        },
        _,
        right,
    ) = split_in_halves(&tmp, vec![peer(23, 2)]).await;
    let h = n.h();

    let merge = |source: u64, target: u64| {
        json!({"name": "merge-region", "source_region_id": source,
               "target_region_id": target})
    };
    for (body, want_status, want) in [
        (
            json!({"name": "merge-region", "target_region_id": 10}),
            400,
            "missing region id",
        ),
        (
            json!({"name": "merge-region", "source_region_id": 21, "target_region_id": "10"}),
            400,
            "invalid target region id to merge to",
        ),
        (
            merge(999, 998),
            500,
            "[PD:region:ErrRegionNotFound]region 999 not found",
        ),
        (
            merge(21, 998),
            500,
            "[PD:region:ErrRegionNotFound]region 998 not found",
        ),
        (
            merge(21, 10),
            500,
            "[PD:region:ErrRegionAbnormalPeer]region 21 has abnormal peer",
        ),
        (
            merge(10, 21),
            500,
            "[PD:region:ErrRegionAbnormalPeer]region 21 has abnormal peer",
        ),
        (
            merge(10, 10),
            500,
            "[PD:region:ErrRegionNotAdjacent]two regions are not adjacent",
        ),
    ] {
        let (status, said) = post(&addr, &admin, body.clone()).await;
        assert_eq!(
            (status.as_u16(), said.as_str()),
            (want_status, want),
            "{body}"
        );
    }
    // Merging is a change: `admin` only.
    let client = super::roles::holder(&data, "tidb", &[Role::Client]);
    let a = call(
        &addr,
        &client,
        Method::POST,
        OPERATORS,
        Some(&merge(21, 10)),
    )
    .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text());

    // Caught up: the merge of 21 into 10 runs on both, the target's half never sent.
    tx.send(beat(&h, right.clone(), vec![])).await.unwrap();
    until(&addr, &admin, "/pd/api/v1/region/id/21", |r| {
        r["pending_peers"].as_array().is_none_or(Vec::is_empty)
    })
    .await;
    created(&addr, &admin, merge(21, 10)).await;
    let listed = get_json(&addr, &admin, "/pd/api/v1/operators?object").await;
    let ops = listed.as_array().unwrap();
    assert_eq!(ops.len(), 2, "{listed}");
    for (o, region) in ops.iter().zip([10, 21]) {
        assert_eq!(o["region_id"], region, "{listed}");
        assert_eq!(o["desc"], "admin-merge-region");
        assert_eq!(o["brief"], "merge: region 21 to 10");
        assert_eq!(o["kind"], 1, "admin alone: the peers already match");
    }
    let shown = get_json(&addr, &admin, "/pd/api/v1/operators/21").await;
    assert!(
        shown
            .as_str()
            .is_some_and(|s| s.contains("steps:[0:{merge region 21 into region 10}]")),
        "{shown}"
    );
    tx.send(beat(&h, right.clone(), vec![])).await.unwrap();
    let sent = reply_where(&mut replies, |r| r.merge.is_some()).await;
    assert_eq!(sent.region_id, 21);
    let target = sent.merge.unwrap().target.unwrap();
    assert_eq!((target.id, target.end_key.as_slice()), (10, &b"m"[..]));
    // A second one on either region is refused while the pair runs.
    for (s, t) in [(21, 10), (10, 21)] {
        let (status, said) = post(&addr, &admin, merge(s, t)).await;
        assert_eq!(
            (status.as_u16(), said.as_str()),
            (
                500,
                "[PD:operator:ErrAddOperator]failed to add operator, maybe already have one"
            ),
        );
    }

    // TiKV merges: region 10 reports the whole key space at a newer version, and 21 is gone.
    let whole = metapb_region(
        10,
        b"",
        b"",
        (3, 3),
        vec![peer(11, 1), peer(12, 2), peer(13, 3)],
    );
    tx.send(beat(&h, whole, vec![])).await.unwrap();
    until(&addr, &admin, "/pd/api/v1/operators", |l| {
        l.as_array().is_some_and(Vec::is_empty)
    })
    .await;
    let shown = get_json(&addr, &admin, "/pd/api/v1/operators/10").await;
    assert!(
        shown.as_str().is_some_and(|s| s.starts_with(
            "status: SUCCESS, operator: admin-merge-region (kind:admin, region:10(2, 3)"
        )),
        "{shown}"
    );
    expect(
        &addr,
        &admin,
        Method::POST,
        OPERATORS,
        Some(&merge(21, 10)),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "[PD:region:ErrRegionNotFound]region 21 not found",
        ),
    )
    .await;
    alive.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_region_reaches_the_leader_with_each_of_pds_policies() {
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
    } = setup(&tmp, "8.5.0").await;
    let cancelled = (StatusCode::OK, "The pending operator is canceled.");
    for (policy, name, want) in [
        ("scan", "SCAN", pdpb::CheckPolicy::Scan),
        ("Approximate", "APPROXIMATE", pdpb::CheckPolicy::Approximate),
        ("USEKEY", "USEKEY", pdpb::CheckPolicy::Usekey),
    ] {
        // Keys are read for USEKEY only: a bad one beside another policy is not looked at.
        let keys = if want == pdpb::CheckPolicy::Usekey {
            json!(["6d"])
        } else {
            json!(["not hex"])
        };
        let body = json!({"name": "split-region", "region_id": 10, "policy": policy, "keys": keys});
        created(&addr, &admin, body).await;
        tx.send(beat.clone()).await.unwrap();
        // The operator just cancelled may still have replies queued: wait for this policy's.
        let sent = reply_where(&mut replies, |r| {
            r.region_id == 10
                && r.split_region
                    .as_ref()
                    .is_some_and(|s| s.policy == want as i32)
        })
        .await
        .split_region
        .unwrap();
        assert_eq!(sent.policy, want as i32, "{policy}");
        let brief = if want == pdpb::CheckPolicy::Usekey {
            assert_eq!(sent.keys, vec![b"m".to_vec()]);
            format!("split: region 10 use policy {name} and keys [6D]")
        } else {
            assert!(sent.keys.is_empty(), "{policy}: the leader picks the key");
            format!("split: region 10 use policy {name}")
        };
        let listed = get_json(&addr, &admin, "/pd/api/v1/operators?object").await;
        assert_eq!(listed[0]["brief"], json!(brief), "{listed}");
        let shown = get_json(&addr, &admin, "/pd/api/v1/operators/10").await;
        let step = format!("steps:[0:{{split region with policy {name}}}]");
        assert!(shown.as_str().is_some_and(|s| s.contains(&step)), "{shown}");
        let op_10 = "/pd/api/v1/operators/10";
        expect(&addr, &admin, Method::DELETE, op_10, None, cancelled).await;
    }
    // A policy PD does not know: its words.
    let (status, said) = post(
        &addr,
        &admin,
        json!({"name": "split-region", "region_id": 10, "policy": "middle"}),
    )
    .await;
    assert_eq!(
        (status.as_u16(), said.as_str()),
        (500, "check policy middle is not supported")
    );
    alive.abort();
}
