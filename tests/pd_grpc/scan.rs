//! Scans over a map larger than one answer: `BatchScanRegions` with no limit (PD's 0) or a huge
//! one is capped, so a client cannot ask for a million regions in one message.

use super::*;
use meridian::proto::MAX_BATCH_SCAN_REGIONS;

/// Splits the bootstrap region's right end into `2^32`-keyed regions 256 at a time until the
/// map holds more than `want` regions; returns how many it holds.
async fn grow(n: &mut Node, (s1, r1, p1): (u64, u64, u64), want: usize) -> usize {
    let mut regions = 1;
    let mut version = 1;
    let mut next_key = 0u32;
    while regions <= want {
        let ask =
            n.pd.ask_batch_split(pdpb::AskBatchSplitRequest {
                header: n.h(),
                region: Some(region(r1, b"", b"", (1, version), vec![peer(p1, s1)])),
                split_count: 256,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&ask.header), None, "{:?}", ask.header);
        version += 1;
        let mut report = Vec::new();
        let mut start = if next_key == 0 {
            Vec::new()
        } else {
            next_key.to_be_bytes().to_vec()
        };
        for ids in &ask.ids {
            next_key += 1;
            let end = next_key.to_be_bytes().to_vec();
            report.push(region(
                ids.new_region_id,
                &start,
                &end,
                (1, version),
                vec![peer(ids.new_peer_ids[0], s1)],
            ));
            start = end;
        }
        report.push(region(r1, &start, b"", (1, version), vec![peer(p1, s1)]));
        let r =
            n.pd.report_batch_split(pdpb::ReportBatchSplitRequest {
                header: n.h(),
                regions: report,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&r.header), None, "{:?}", r.header);
        regions += ask.ids.len();
    }
    regions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_scan_without_a_limit_is_capped_not_unbounded() {
    let tmp = tempfile::tempdir().unwrap();
    let mut n = start(&tmp.path().join("d")).await;
    let boot = n.bootstrap().await;
    let cap = MAX_BATCH_SCAN_REGIONS as usize;
    let total = grow(&mut n, boot, cap + 100).await;
    assert!(total > cap);
    for limit in [0, -1, i32::MAX] {
        let batch =
            n.pd.batch_scan_regions(pdpb::BatchScanRegionsRequest {
                header: n.h(),
                ranges: vec![pdpb::KeyRange {
                    start_key: vec![],
                    end_key: vec![],
                }],
                limit,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&batch.header), None);
        assert_eq!(batch.regions.len(), cap, "limit {limit}");
        // The answer is the map's first regions, in key order, with no gap.
        let mut end = Vec::new();
        for r in &batch.regions {
            let r = r.region.as_ref().unwrap();
            assert_eq!(r.start_key, end);
            end = r.end_key.clone();
        }
    }
    // A limit under the cap is honoured exactly.
    let batch =
        n.pd.batch_scan_regions(pdpb::BatchScanRegionsRequest {
            header: n.h(),
            ranges: vec![pdpb::KeyRange {
                start_key: vec![],
                end_key: vec![],
            }],
            limit: 1500,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(batch.regions.len(), 1500);
    n.server.stop().unwrap();
}
