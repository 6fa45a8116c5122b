//! ReportBuckets and the buckets region lookups carry: the latest report of each region is
//! kept (an older or equal version changes nothing, a report over `limits.max_region_buckets`
//! is dropped and the stream goes on), returned by GetRegion, GetPrevRegion, GetRegionByID and
//! QueryRegion when they ask, kept across a split of the region; the stream is answered once,
//! when the store closes it, and refused as PD refuses it.

use super::*;
use meridian::harness::buckets_report as report;

impl Node {
    async fn report_buckets(
        &mut self,
        reports: Vec<pdpb::ReportBucketsRequest>,
    ) -> Result<pdpb::ReportBucketsResponse, tonic::Status> {
        self.pd
            .report_buckets(tokio_stream::iter(reports))
            .await
            .map(|r| r.into_inner())
    }

    async fn region_buckets(&mut self, key: &[u8], need_buckets: bool) -> Option<metapb::Buckets> {
        self.pd
            .get_region(pdpb::GetRegionRequest {
                header: self.h(),
                region_key: key.to_vec(),
                need_buckets,
            })
            .await
            .unwrap()
            .into_inner()
            .buckets
    }
}

fn keys(b: &metapb::Buckets) -> Vec<&[u8]> {
    b.keys.iter().map(Vec::as_slice).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latest_buckets_are_kept_and_returned_to_lookups_that_ask() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;

    let r = n
        .report_buckets(vec![report(n.h(), 1, 1, &[b"", b""])])
        .await
        .unwrap();
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );

    let boot = n.bootstrap().await;
    let r1 = boot.1;
    let limit = meridian::placement::Limits::default().max_region_buckets;
    let too_many: Vec<Vec<u8>> = (0..=limit)
        .map(|i| format!("k{i:05}").into_bytes())
        .collect();
    let too_many: Vec<&[u8]> = too_many.iter().map(Vec::as_slice).collect();
    let r = n
        .report_buckets(vec![
            report(n.h(), r1, 2, &[b"", b"g", b"t", b""]),
            report(n.h(), r1, 1, &[b"", b"stale", b""]),
            report(n.h(), r1, 2, &[b"", b"same", b""]),
            report(n.h(), r1, 9, &too_many),
            report(n.h(), 999_999, 1, &[b"", b""]),
            pdpb::ReportBucketsRequest {
                header: n.h(),
                ..Default::default()
            },
        ])
        .await
        .unwrap();
    assert_eq!(
        error_type(&r.header),
        None,
        "answered once, when the stream closes"
    );
    let b = n
        .region_buckets(b"k", true)
        .await
        .expect("buckets asked for");
    assert_eq!((b.region_id, b.version), (r1, 2));
    assert_eq!(keys(&b), vec![&b""[..], b"g", b"t", b""]);
    assert_eq!(n.region_buckets(b"k", false).await, None, "not asked for");

    // A newer version replaces them; the region keeps them across its split.
    n.report_buckets(vec![report(n.h(), r1, 3, &[b"", b"p", b""])])
        .await
        .unwrap();
    let left = n.split(boot, b"m").await;
    assert_eq!(n.region_buckets(b"z", true).await.unwrap().version, 3);
    assert_eq!(
        n.region_buckets(b"a", true).await,
        None,
        "the new region has none yet"
    );
    let prev =
        n.pd.get_prev_region(pdpb::GetRegionRequest {
            header: n.h(),
            region_key: b"z".to_vec(),
            need_buckets: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(prev.region.unwrap().id, left);
    assert_eq!(prev.buckets, None);
    let by_id =
        n.pd.get_region_by_id(pdpb::GetRegionByIdRequest {
            header: n.h(),
            region_id: r1,
            need_buckets: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(keys(&by_id.buckets.unwrap()), vec![&b""[..], b"p", b""]);

    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut replies =
        n.pd.query_region(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
    for need_buckets in [true, false] {
        tx.send(pdpb::QueryRegionRequest {
            header: n.h(),
            need_buckets,
            keys: vec![b"z".to_vec(), b"a".to_vec()],
            ..Default::default()
        })
        .await
        .unwrap();
        let q = next_query(&mut replies).await;
        assert_eq!(q.key_id_map, vec![r1, left]);
        let found = q.regions_by_id[&r1].buckets.as_ref().map(|b| b.version);
        assert_eq!(found, need_buckets.then_some(3));
        assert_eq!(q.regions_by_id[&left].buckets, None);
    }
    drop(tx);

    // Another cluster's header ends the stream with PD's status.
    let err = n
        .report_buckets(vec![report(
            pd_header(n.cluster_id + 1),
            r1,
            4,
            &[b"", b""],
        )])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(n.region_buckets(b"z", true).await.unwrap().version, 3);
    n.server.stop().unwrap();
}
