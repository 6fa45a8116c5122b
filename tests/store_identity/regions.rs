//! bind-store-identity for what a store says of a region it does not send a heartbeat for:
//! buckets (only the region's leader reports them) and splits asked for (only a store with a
//! peer of the region asks). A `store` certificate bound to one store may not report buckets
//! for a region led on another, which would replace what lookups are answered with, and pin it
//! with a high version against the real leader's reports; nor ask for a split of a region it
//! holds no peer of. The region is judged as the leader knows it, not as the request says.

use super::*;

/// The error in a reply's header, if any.
fn error_of(header: Option<pdpb::ResponseHeader>) -> Option<pdpb::Error> {
    header.and_then(|h| h.error)
}

impl Pd {
    async fn report_buckets(&mut self, region_id: u64, version: u64, keys: &[&[u8]]) {
        let report = harness::buckets_report(self.h(), region_id, version, keys);
        let answer = self
            .pd
            .report_buckets(tokio_stream::iter([report]))
            .await
            .expect("a refused report is dropped and the stream goes on")
            .into_inner();
        assert!(error_of(answer.header).is_none());
    }

    async fn buckets(&mut self) -> Option<metapb::Buckets> {
        self.pd
            .get_region(pdpb::GetRegionRequest {
                header: self.h(),
                region_key: b"k".to_vec(),
                need_buckets: true,
            })
            .await
            .unwrap()
            .into_inner()
            .buckets
    }

    /// AskBatchSplit of one, and AskSplit (deprecated in kvproto, still sent by TiKV).
    #[allow(deprecated)]
    async fn ask_split(&mut self, region: metapb::Region) -> Option<pdpb::Error> {
        let batch = self
            .pd
            .ask_batch_split(pdpb::AskBatchSplitRequest {
                header: self.h(),
                region: Some(region.clone()),
                split_count: 1,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let single = self
            .pd
            .ask_split(pdpb::AskSplitRequest {
                header: self.h(),
                region: Some(region),
            })
            .await
            .unwrap()
            .into_inner();
        let (batch, single) = (error_of(batch.header), error_of(single.header));
        assert_eq!(
            batch.as_ref().map(|e| &e.message),
            single.as_ref().map(|e| &e.message),
            "AskSplit is AskBatchSplit of one"
        );
        batch
    }
}

fn keys(b: &metapb::Buckets) -> Vec<&[u8]> {
    b.keys.iter().map(Vec::as_slice).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_store_speaks_only_of_regions_on_its_store() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::new(&tmp.path().join("certs"));
    let node = pki.start_node(tmp.path(), "[security]\nbind-store-identity = true\n");
    let mut a = Pd::connect(&node, &pki.store("tikv-a", None)).await;
    let mut b = Pd::connect(&node, &pki.store("tikv-b", None)).await;

    // A bootstraps with its store and the one region, led by its peer; B registers its store.
    let (sa, r1, p1) = (a.alloc_id().await, a.alloc_id().await, a.alloc_id().await);
    let boot = a
        .bootstrap(sa, region_pb(r1, 1, vec![peer_pb(p1, sa)]))
        .await;
    assert!(boot.is_none(), "{boot:?}");
    let sb = b.alloc_id().await;
    let pb_peer = b.alloc_id().await;
    assert!(b.put_store(sb).await.is_none());

    // The leader's buckets are taken.
    a.report_buckets(r1, 2, &[b"", b"g", b""]).await;
    let held = a.buckets().await.expect("the leader's buckets");
    assert_eq!((held.region_id, held.version), (r1, 2));

    // B's report for the region A leads, with a version far above, is dropped: lookups keep
    // the leader's buckets, and the leader's next report is still taken.
    b.report_buckets(r1, u64::MAX, &[b"", b"forged", b""]).await;
    let after = b.buckets().await.expect("still the leader's buckets");
    assert_eq!(
        (after.version, keys(&after)),
        (2, vec![&b""[..], b"g", b""])
    );
    a.report_buckets(r1, 3, &[b"", b"t", b""]).await;
    assert_eq!(a.buckets().await.unwrap().version, 3);

    // B may not ask for a split of A's region, even naming a peer of its own in the request;
    // A may. The refusal is PD's error header, naming the region.
    let claimed = region_pb(r1, 1, vec![peer_pb(p1, sa), peer_pb(pb_peer, sb)]);
    let refused = b.ask_split(claimed).await.expect("refused");
    assert_eq!(refused.r#type, pdpb::ErrorType::Unknown as i32);
    assert!(
        refused.message.contains("permission denied")
            && refused.message.contains(&format!("no peer of region {r1}")),
        "{}",
        refused.message
    );
    let allowed = a.ask_split(region_pb(r1, 1, vec![peer_pb(p1, sa)])).await;
    assert!(allowed.is_none(), "{allowed:?}");
}
