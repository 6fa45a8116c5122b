//! A merge's two operators as one, against the real binary, as PD's operator controller keeps
//! them: regions 10 and 21 belong to different cores of the node's two, so the pair runs on
//! two shards. Either half cancelled ends the other, for PD's reasons (`admin stop`, then
//! `related merge region` for the partner, in PD's `operator canceled` log line), by
//! `DELETE /operators/{id}` and by `DELETE /operators`; and, with the failpoints compiled in,
//! nothing of a merge reaches the source's leader until the target's half is placed.

use super::operator_setup::{
    beat, created, expect, reply_where, split_in_halves, Setup, OPERATORS,
};
use super::*;
use serde_json::json;
use tokio_stream::StreamExt;

/// The merge of region 21 into 10.
fn merge() -> serde_json::Value {
    json!({"name": "merge-region", "source_region_id": 21, "target_region_id": 10})
}

/// PD's additional infos of a merge half cancelled for `reason` whose partner is `partner`.
fn infos(reason: &str, partner: u64) -> String {
    format!(r#"{{"cancel-reason":"{reason}","related merge region":"{partner}"}}"#)
}

/// The additional infos of every operator the node has logged as cancelled (PD's `operator
/// canceled` line, whose last field they are), once there are `n` of them, sorted.
async fn logged_cancels(node: &Node, n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut got: Vec<String> = node
            .server
            .log_text()
            .lines()
            .filter(|l| l.contains("operator canceled"))
            .map(|l| l.find("{\"").map_or("", |i| l[i..].trim()).to_string())
            .collect();
        if got.len() >= n {
            got.sort();
            return got;
        }
        assert!(tokio::time::Instant::now() < deadline, "{got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What both tests of a cancelled pair check: neither half is listed, both are shown
/// cancelled, and the source's leader reports again and gets no Merge: once what was pushed
/// before the stop has arrived (the patrol pushes a running operator's step again every
/// 100 ms, so a Merge may be on its way as the stop answers), the next thing it gets is a
/// transfer-leader asked after (which its half, still running, would have refused), which is
/// then cancelled.
async fn both_ended(s: &mut Setup, right: &meridian::kvproto::metapb::Region, what: &str) {
    let listed = get_json(&s.addr, &s.admin, OPERATORS).await;
    assert_eq!(listed, json!([]), "{what}");
    for id in [10, 21] {
        let shown = get_json(&s.addr, &s.admin, &format!("{OPERATORS}/{id}")).await;
        assert!(
            shown.as_str().is_some_and(
                |s| s.starts_with("status: CANCEL, operator: admin-merge-region (kind:admin")
            ),
            "{what}: {id}: {shown}"
        );
    }
    let settled = tokio::time::Instant::now() + Duration::from_millis(300);
    while let Ok(Some(_)) = tokio::time::timeout_at(settled, s.replies.next()).await {}
    s.tx.send(beat(&s.n.h(), right.clone(), vec![]))
        .await
        .unwrap();
    let moved = json!({"name": "transfer-leader", "region_id": 21, "to_store_id": 2});
    created(&s.addr, &s.admin, moved).await;
    reply_where(&mut s.replies, |r| {
        assert!(r.region_id != 21 || r.merge.is_none(), "{what}: {r:?}");
        r.region_id == 21 && r.transfer_leader.is_some()
    })
    .await;
    let cancelled = (StatusCode::OK, "The pending operator is canceled.");
    let op_21 = format!("{OPERATORS}/21");
    expect(&s.addr, &s.admin, Method::DELETE, &op_21, None, cancelled).await;
}

/// Starts the merge of 21 into 10 and waits for its Merge to reach 21's leader.
async fn merge_running(s: &mut Setup) {
    created(&s.addr, &s.admin, merge()).await;
    let listed = get_json(&s.addr, &s.admin, OPERATORS).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    // The pair placed, the source's Merge is pushed to its leader.
    reply_where(&mut s.replies, |r| r.region_id == 21 && r.merge.is_some()).await;
}

/// Either half of a merge cancelled ends both, as PD removes a merge's related operator with
/// it, by the time the DELETE answers; the one deleted is logged stopped by the admin, its
/// partner cancelled for its related merge region.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_either_half_of_a_merge_ends_both_as_in_pd() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut s, _, right) = split_in_halves(&tmp, vec![]).await;
    let cancelled = (StatusCode::OK, "The pending operator is canceled.");
    let admin_stop = r#"{"cancel-reason":"admin stop"}"#.to_string();
    let mut logged = Vec::new();
    // The target's half cancelled first, then, in a second merge, the source's.
    for (deleted, partner) in [(10, 21), (21, 10)] {
        merge_running(&mut s).await;
        let path = format!("{OPERATORS}/{deleted}");
        expect(&s.addr, &s.admin, Method::DELETE, &path, None, cancelled).await;
        both_ended(&mut s, &right, &format!("{deleted} cancelled")).await;
        logged.extend([
            infos("admin stop", partner),
            infos("related merge region", deleted),
            admin_stop.clone(),
        ]);
        logged.sort();
        assert_eq!(logged_cancels(&s.n, logged.len()).await, logged);
    }
    s.alive.abort();
}

/// `DELETE /operators` ends a pair running on two shards as PD's `RemoveOperators` does: the
/// half it stops first (region 10's: the first core is asked first) is stopped by the admin,
/// and its partner is ended through it, for its related merge region, before the second core
/// is asked, so that it is not stopped in its own right. Both are recorded cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_every_operator_ends_a_pair_on_two_shards_as_in_pd() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut s, _, right) = split_in_halves(&tmp, vec![]).await;
    merge_running(&mut s).await;
    let all = (StatusCode::OK, "All pending operators are canceled.");
    expect(&s.addr, &s.admin, Method::DELETE, OPERATORS, None, all).await;
    let records = get_json(&s.addr, &s.admin, &format!("{OPERATORS}/records")).await;
    for id in [10, 21] {
        let record = format!("admin-merge-region (kind:admin, region:{id}(");
        let shown = records
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r.as_str());
        let ended: Vec<&str> = shown.filter(|r| r.starts_with(&record)).collect();
        assert_eq!(ended.len(), 1, "{id}: {records}");
        assert!(ended[0].ends_with(", status:CANCEL)"), "{id}: {records}");
    }
    let mut logged = vec![infos("admin stop", 21), infos("related merge region", 10)];
    logged.sort();
    assert_eq!(logged_cancels(&s.n, 2).await, logged);
    both_ended(&mut s, &right, "all cancelled").await;
    s.alive.abort();
}

/// The source's half is held until the target's half is placed, as PD adds the pair at once:
/// with the window between the two held open (the failpoint), the source's leader reports
/// and gets no Merge, nor does the patrol push one; let go, the merge is created and its Merge
/// reaches the leader.
#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_of_a_merge_reaches_the_source_until_the_targets_half_is_placed() {
    use super::operator_setup::post;
    use meridian::failpoint::points::MERGE_HELD;

    let tmp = tempfile::tempdir().unwrap();
    let (mut s, _, right) = split_in_halves(&tmp, vec![]).await;
    let arm = |actions: &str| {
        tokio::task::block_in_place(|| s.n.server.failpoint(MERGE_HELD, actions)).unwrap()
    };
    arm("return(hang)");
    let asked = {
        let (addr, admin) = (s.addr.clone(), s.admin.clone());
        tokio::spawn(async move { post(&addr, &admin, merge()).await })
    };
    // The source's half has started (held) once it is shown running: the merge waits at the
    // failpoint, or is about to. The list leaves it out, as PD lists a merge's halves together.
    until(&s.addr, &s.admin, &format!("{OPERATORS}/21"), |o| {
        o.as_str().is_some_and(|o| o.starts_with("status: RUNNING"))
    })
    .await;
    assert_eq!(get_json(&s.addr, &s.admin, OPERATORS).await, json!([]));
    // The source's leader reports, with a size that shows when the report has been handled.
    let mut grown = beat(&s.n.h(), right.clone(), vec![]);
    grown.approximate_size = 2 << 20;
    s.tx.send(grown).await.unwrap();
    until(&s.addr, &s.admin, "/pd/api/v1/region/id/21", |r| {
        r["approximate_size"] == 2
    })
    .await;
    // A few patrol rounds (every 100 ms) pass too; then nothing of the merge has been sent.
    tokio::time::sleep(Duration::from_millis(500)).await;
    while let Ok(Some(reply)) =
        tokio::time::timeout(Duration::from_millis(200), s.replies.next()).await
    {
        let reply = reply.unwrap();
        assert!(reply.merge.is_none(), "sent while held: {reply:?}");
    }
    assert!(!asked.is_finished(), "the merge waits at the failpoint");

    arm("");
    let (status, said) = asked.await.unwrap();
    assert_eq!(
        (status, said.as_str()),
        (StatusCode::OK, "The operator is created.")
    );
    reply_where(&mut s.replies, |r| r.region_id == 21 && r.merge.is_some()).await;
    s.alive.abort();
}
