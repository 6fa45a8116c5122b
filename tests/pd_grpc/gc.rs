//! `GetGCState` over Meridian's GC safe points.

use super::*;

/// `GetGCState` over Meridian's GC state: the GC safe point reported as both safe points, the
/// null keyspace's scope, service safe points as GC barriers (without gc_worker's), global
/// barriers present-empty only when asked for, and PD's errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_state_reports_the_gc_safe_point_and_service_barriers() {
    const NULL_KEYSPACE: u32 = 0xFFFF_FFFF;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;
    let scope = |id: u32| {
        Some(pdpb::KeyspaceScope {
            keyspace: Some(pdpb::keyspace_scope::Keyspace::KeyspaceId(id)),
        })
    };

    let r = n
        .gc_state(pdpb::GetGcStateRequest {
            header: n.h(),
            ..Default::default()
        })
        .await;
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );
    assert!(r.gc_state.is_none());
    let err =
        n.pd.get_gc_state(pdpb::GetGcStateRequest {
            header: pd_header(n.cluster_id + 1),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);

    n.bootstrap().await;
    let r = n
        .gc_state(pdpb::GetGcStateRequest {
            header: n.h(),
            exclude_gc_barriers: true,
            ..Default::default()
        })
        .await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    let state = r.gc_state.unwrap();
    assert_eq!((state.gc_safe_point, state.txn_safe_point), (0, 0));

    let r = n.gc_safe_point(100).await;
    assert_eq!(r.new_safe_point, 100);
    let r = n.service_safe_point(b"br", 3600, 120).await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);

    // Barriers excluded, globals not asked for (client-go's defaults).
    let r = n
        .gc_state(pdpb::GetGcStateRequest {
            header: n.h(),
            keyspace_scope: scope(NULL_KEYSPACE),
            exclude_gc_barriers: true,
            include_global_gc_barriers: false,
        })
        .await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(r.header.unwrap().cluster_id, n.cluster_id);
    assert!(r.global_gc_barriers.is_none());
    let state = r.gc_state.unwrap();
    assert_eq!(state.gc_safe_point, 100);
    assert_eq!(state.txn_safe_point, 100);
    assert!(!state.is_keyspace_level_gc);
    assert_eq!(state.keyspace_scope, scope(NULL_KEYSPACE));
    assert!(state.gc_barriers.is_empty());

    // Barriers and globals asked for; no scope, the DEFAULT keyspace and an id outside the
    // keyspace range all read the null keyspace's state.
    for keyspace_scope in [None, scope(0), scope(0x0100_0000)] {
        let r = n
            .gc_state(pdpb::GetGcStateRequest {
                header: n.h(),
                keyspace_scope,
                exclude_gc_barriers: false,
                include_global_gc_barriers: true,
            })
            .await;
        assert_eq!(error_type(&r.header), None, "{keyspace_scope:?}");
        assert_eq!(
            r.global_gc_barriers,
            Some(pdpb::GlobalGcBarriersInfo::default()),
            "asked for: present, and empty"
        );
        let state = r.gc_state.unwrap();
        assert_eq!((state.gc_safe_point, state.txn_safe_point), (100, 100));
        assert_eq!(state.keyspace_scope, scope(NULL_KEYSPACE));
        assert_eq!(state.gc_barriers.len(), 1, "{:?}", state.gc_barriers);
        let br = &state.gc_barriers[0];
        assert_eq!((br.barrier_id.as_str(), br.barrier_ts), ("br", 120));
        assert!(
            br.ttl_seconds > 3500 && br.ttl_seconds <= 3600,
            "{}",
            br.ttl_seconds
        );
    }

    // A keyspace that does not exist: PD's UNKNOWN error in the header.
    let r = n
        .gc_state(pdpb::GetGcStateRequest {
            header: n.h(),
            keyspace_scope: scope(7),
            ..Default::default()
        })
        .await;
    assert_eq!(error_type(&r.header), Some(pdpb::ErrorType::Unknown));
    assert!(r.gc_state.is_none());

    // The GC safe point moves on; GetGCState follows.
    n.gc_safe_point(150).await;
    let r = n
        .gc_state(pdpb::GetGcStateRequest {
            header: n.h(),
            exclude_gc_barriers: true,
            ..Default::default()
        })
        .await;
    let state = r.gc_state.unwrap();
    assert_eq!((state.gc_safe_point, state.txn_safe_point), (150, 150));
    n.server.stop().unwrap();
}
