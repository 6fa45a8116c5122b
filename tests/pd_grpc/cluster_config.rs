//! GetClusterConfig and PutClusterConfig as PD answers them: NOT_BOOTSTRAPPED before
//! bootstrap; the record bootstrap wrote (the cluster id, 3 replicas); another cluster's record
//! refused with PD's words; a put that survives a SIGKILL.

use super::*;

impl Node {
    async fn get_cluster_config(&mut self) -> pdpb::GetClusterConfigResponse {
        self.pd
            .get_cluster_config(pdpb::GetClusterConfigRequest { header: self.h() })
            .await
            .unwrap()
            .into_inner()
    }

    async fn put_cluster_config(
        &mut self,
        cluster: Option<metapb::Cluster>,
    ) -> pdpb::PutClusterConfigResponse {
        self.pd
            .put_cluster_config(pdpb::PutClusterConfigRequest {
                header: self.h(),
                cluster,
            })
            .await
            .unwrap()
            .into_inner()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_record_is_bootstraps_until_replaced_by_this_clusters_own() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;
    let id = n.cluster_id;
    let record = |max_peer_count| Some(metapb::Cluster { id, max_peer_count });

    let r = n.get_cluster_config().await;
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );
    assert_eq!(r.cluster, None);
    let r = n.put_cluster_config(record(5)).await;
    assert_eq!(
        error_type(&r.header),
        Some(pdpb::ErrorType::NotBootstrapped)
    );

    n.bootstrap().await;
    let r = n.get_cluster_config().await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(r.cluster, record(3), "bootstrap records max-replicas");

    for wrong in [
        Some(metapb::Cluster {
            id: id + 1,
            max_peer_count: 5,
        }),
        None,
    ] {
        let r = n.put_cluster_config(wrong).await;
        let error = r.header.unwrap().error.unwrap();
        assert_eq!(error.r#type, pdpb::ErrorType::Unknown as i32);
        assert!(
            error
                .message
                .ends_with(&format!(", mismatch cluster id {id}")),
            "{}",
            error.message
        );
        if wrong.is_some() {
            assert_eq!(
                error.message,
                format!(
                    "invalid cluster id:{} max_peer_count:5 , mismatch cluster id {id}",
                    id + 1
                )
            );
        }
    }
    assert_eq!(n.get_cluster_config().await.cluster, record(3));

    let r = n.put_cluster_config(record(5)).await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(n.get_cluster_config().await.cluster, record(5));
    n.server.kill().unwrap();
    let mut n = start(&data).await;
    assert_eq!(n.get_cluster_config().await.cluster, record(5));
    n.server.stop().unwrap();
}
