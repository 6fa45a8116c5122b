//! ReportMinResolvedTS as PD answers it: NOT_BOOTSTRAPPED in the header before bootstrap, an
//! unknown store as a plain UNKNOWN error with PD's error code, a known store's report taken
//! (the cluster's value that follows is checked on the state, `server::placement::resolved_ts`).

use super::*;

impl Node {
    async fn report_resolved(
        &mut self,
        store_id: u64,
        min_resolved_ts: u64,
    ) -> Result<pdpb::ReportMinResolvedTsResponse, tonic::Status> {
        self.pd
            .report_min_resolved_ts(pdpb::ReportMinResolvedTsRequest {
                header: self.h(),
                store_id,
                min_resolved_ts,
            })
            .await
            .map(|r| r.into_inner())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_resolved_ts_reports_are_taken_from_known_stores() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;

    let r = n.report_resolved(1, 100).await.unwrap();
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );

    let (s1, _, _) = n.bootstrap().await;
    for ts in [100, 90, 200] {
        let r = n.report_resolved(s1, ts).await.unwrap();
        assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    }
    let err = n.report_resolved(999_999, 1).await.unwrap_err();
    assert_eq!(err.code(), Code::Unknown);
    assert_eq!(
        err.message(),
        "[PD:core:ErrStoreNotFound]store 999999 not found"
    );
    let err =
        n.pd.report_min_resolved_ts(pdpb::ReportMinResolvedTsRequest {
            header: pd_header(n.cluster_id + 1),
            store_id: s1,
            min_resolved_ts: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    n.server.stop().unwrap();
}
