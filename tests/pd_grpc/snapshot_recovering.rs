//! IsSnapshotRecovering, the first call a starting TiKV makes: never marked, answered before
//! bootstrap and whatever cluster id the header carries, as PD reads its mark without checks.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_recovery_is_never_marked_and_asks_nothing_of_the_caller() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;
    let ask = |header| pdpb::IsSnapshotRecoveringRequest { header };

    // Before bootstrap, with the right header, another cluster's, and none: PD checks none.
    for h in [n.h(), pd_header(n.cluster_id + 1), None] {
        let r =
            n.pd.is_snapshot_recovering(ask(h))
                .await
                .unwrap()
                .into_inner();
        assert_eq!(error_type(&r.header), None, "{:?}", r.header);
        assert_eq!(r.header.unwrap().cluster_id, n.cluster_id);
        assert!(!r.marked);
    }

    n.bootstrap().await;
    let r =
        n.pd.is_snapshot_recovering(ask(n.h()))
            .await
            .unwrap()
            .into_inner();
    assert_eq!(error_type(&r.header), None);
    assert!(!r.marked);
    n.server.stop().unwrap();
}
