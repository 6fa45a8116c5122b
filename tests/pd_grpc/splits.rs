//! The single-split AskSplit and ReportSplit, served as AskBatchSplit and ReportBatchSplit with
//! one split, and the refusals PD words for both kinds: a request without a region, a region
//! this leader does not know, halves that do not meet.

use super::*;

// kvproto marks the single-split RPCs deprecated; they are what is tested here.
#[allow(deprecated)]
impl Node {
    async fn ask_split(&mut self, region: Option<metapb::Region>) -> pdpb::AskSplitResponse {
        self.pd
            .ask_split(pdpb::AskSplitRequest {
                header: self.h(),
                region,
            })
            .await
            .unwrap()
            .into_inner()
    }

    async fn report_split(
        &mut self,
        left: Option<metapb::Region>,
        right: Option<metapb::Region>,
    ) -> pdpb::ReportSplitResponse {
        self.pd
            .report_split(pdpb::ReportSplitRequest {
                header: self.h(),
                left,
                right,
            })
            .await
            .unwrap()
            .into_inner()
    }
}

fn error(h: Option<pdpb::ResponseHeader>) -> (pdpb::ErrorType, String) {
    let e = h.and_then(|h| h.error).expect("an error header");
    (pdpb::ErrorType::try_from(e.r#type).unwrap(), e.message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_splits_are_batch_splits_of_one_and_refusals_are_pds() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;

    let whole = |id, p, s| region(id, b"", b"", (1, 1), vec![peer(p, s)]);
    let r = n.ask_split(Some(whole(1, 2, 3))).await;
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );
    let r = n.ask_split(None).await;
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );

    let (s1, r1, p1) = n.bootstrap().await;
    for r in [
        n.ask_split(None).await.header,
        n.pd.ask_batch_split(pdpb::AskBatchSplitRequest {
            header: n.h(),
            region: None,
            split_count: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .header,
    ] {
        assert_eq!(
            error(r),
            (
                pdpb::ErrorType::RegionNotFound,
                "missing region for split".to_string()
            )
        );
    }
    let (kind, message) = error(n.ask_split(Some(whole(999_999, p1, s1))).await.header);
    assert_eq!(kind, pdpb::ErrorType::Unknown);
    assert!(
        message.starts_with("region not found, request region:"),
        "{message}"
    );
    let stale = region(r1, b"", b"", (0, 0), vec![peer(p1, s1)]);
    assert_eq!(
        error_type(&n.ask_split(Some(stale)).await.header),
        Some(pdpb::ErrorType::Unknown)
    );

    // One new region id and one peer id per peer of the region.
    let ask = n.ask_split(Some(whole(r1, p1, s1))).await;
    assert_eq!(error_type(&ask.header), None, "{:?}", ask.header);
    assert!(ask.new_region_id > p1);
    assert_eq!(ask.new_peer_ids.len(), 1);
    let left = region(
        ask.new_region_id,
        b"",
        b"m",
        (1, 2),
        vec![peer(ask.new_peer_ids[0], s1)],
    );
    let right = region(r1, b"m", b"", (1, 2), vec![peer(p1, s1)]);

    // Halves that do not meet, or one missing: PD's invalid split, and nothing changes.
    let gap = region(r1, b"n", b"", (1, 2), vec![peer(p1, s1)]);
    for (l, r) in [
        (Some(left.clone()), Some(gap)),
        (Some(left.clone()), None),
        (None, Some(right.clone())),
    ] {
        assert_eq!(
            error(n.report_split(l, r).await.header),
            (pdpb::ErrorType::Unknown, "invalid split region".to_string())
        );
    }
    let r =
        n.pd.report_batch_split(pdpb::ReportBatchSplitRequest {
            header: n.h(),
            regions: vec![right.clone()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        error(r.header),
        (pdpb::ErrorType::Unknown, "invalid split region".to_string())
    );
    assert_eq!(n.get_region(b"a").await.region.unwrap().id, r1);

    let r = n.report_split(Some(left.clone()), Some(right)).await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(n.get_region(b"a").await.region.unwrap().id, left.id);
    assert_eq!(n.get_region(b"z").await.region.unwrap().id, r1);
    n.server.stop().unwrap();
}
