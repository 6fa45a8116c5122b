//! The router client's batched `QueryRegion` stream.

use super::*;

/// `QueryRegion`, the router client's batched lookups, as PD answers it: ids in request order
/// for keys and previous keys (0 for none), each region found once in `regions_by_id`, an empty
/// entry for an id not found, one reply per message on a stream that outlives a header error;
/// a header for another cluster ends the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_region_answers_keys_prev_keys_and_ids_as_pd_does() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;

    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let mut replies =
        n.pd.query_region(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();

    // Not bootstrapped yet: PD's leader says so in the header, and the stream goes on.
    tx.send(pdpb::QueryRegionRequest {
        header: n.h(),
        keys: vec![b"a".to_vec()],
        ..Default::default()
    })
    .await
    .unwrap();
    let r = next_query(&mut replies).await;
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );
    assert!(r.key_id_map.is_empty() && r.regions_by_id.is_empty());

    // Two regions: left = ["", "m"), right = ["m", "") (the bootstrap region's id).
    let boot = n.bootstrap().await;
    let right_id = boot.1;
    let left_id = n.split(boot, b"m").await;
    let left = n.get_region(b"a").await;
    let right = n.get_region(b"z").await;
    assert_eq!(left.region.as_ref().unwrap().id, left_id);
    assert_eq!(right.region.as_ref().unwrap().id, right_id);

    let missing = 424_242;
    tx.send(pdpb::QueryRegionRequest {
        header: n.h(),
        need_buckets: true,
        keys: vec![b"a".to_vec(), b"z".to_vec(), b"m".to_vec(), b"".to_vec()],
        // "z" and "m" are in the right region, whose previous is the left one; "a" is in the
        // first region, which has none.
        prev_keys: vec![b"z".to_vec(), b"a".to_vec(), b"m".to_vec()],
        ids: vec![right_id, missing, 0, left_id],
    })
    .await
    .unwrap();
    let r = next_query(&mut replies).await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(r.header.as_ref().unwrap().cluster_id, n.cluster_id);
    assert_eq!(r.key_id_map, vec![left_id, right_id, right_id, left_id]);
    assert_eq!(r.prev_key_id_map, vec![left_id, 0, left_id]);
    let mut ids: Vec<u64> = r.regions_by_id.keys().copied().collect();
    ids.sort();
    let mut want = vec![left_id, right_id, missing];
    want.sort();
    assert_eq!(ids, want, "each region once, the missing id, no id 0");
    for (id, unary) in [(left_id, &left), (right_id, &right)] {
        let found = &r.regions_by_id[&id];
        assert_eq!(
            found.region, unary.region,
            "region {id} as GetRegion has it"
        );
        assert_eq!(
            found.leader, unary.leader,
            "leader of {id} as GetRegion has it"
        );
        assert!(found.buckets.is_none(), "Meridian keeps no buckets");
    }
    assert_eq!(
        r.regions_by_id[&left_id].region.as_ref().unwrap().end_key,
        b"m"
    );
    assert_eq!(
        r.regions_by_id[&right_id]
            .region
            .as_ref()
            .unwrap()
            .start_key,
        b"m"
    );
    let absent = &r.regions_by_id[&missing];
    assert!(
        absent.region.is_none() && absent.leader.is_none(),
        "{absent:?}"
    );

    // One reply per message, in order; ids alone.
    for ids in [vec![left_id], vec![missing]] {
        tx.send(pdpb::QueryRegionRequest {
            header: n.h(),
            ids: ids.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let r = next_query(&mut replies).await;
    assert!(r.key_id_map.is_empty() && r.prev_key_id_map.is_empty());
    assert_eq!(r.regions_by_id.len(), 1);
    assert_eq!(r.regions_by_id[&left_id].region, left.region);
    let r = next_query(&mut replies).await;
    assert_eq!(r.regions_by_id.len(), 1);
    assert!(r.regions_by_id[&missing].region.is_none());

    // Another cluster's header: the stream ends with a failed precondition.
    tx.send(pdpb::QueryRegionRequest {
        header: pd_header(n.cluster_id + 1),
        keys: vec![b"a".to_vec()],
        ..Default::default()
    })
    .await
    .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), replies.message())
        .await
        .expect("an answer within 10 s")
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("mismatch cluster id"), "{err}");
    drop(tx);
    n.server.stop().unwrap();
}
