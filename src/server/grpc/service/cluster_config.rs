//! GetClusterConfig and PutClusterConfig: the cluster's `metapb.Cluster` record.

use super::*;

impl PdService {
    pub(super) async fn get_cluster_config(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetClusterConfigRequest>,
    ) -> Result<GrpcResponse<pdpb::GetClusterConfigResponse>, Status> {
        self.unary(
            request,
            Call::GetClusterConfig,
            |_| Ok(Request::GetClusterConfig),
            |_, reply| match reply {
                Reply::ClusterConfig(meta) => Ok(pdpb::GetClusterConfigResponse {
                    cluster: Some(metapb::Cluster {
                        id: meta.id,
                        max_peer_count: meta.max_peer_count,
                    }),
                    ..Default::default()
                }),
                other => Err(unexpected(other)),
            },
        )
        .await
    }

    /// A request without a record puts an empty one, which PD refuses as another cluster's.
    pub(super) async fn put_cluster_config(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::PutClusterConfigRequest>,
    ) -> Result<GrpcResponse<pdpb::PutClusterConfigResponse>, Status> {
        self.unary(
            request,
            Call::PutClusterConfig,
            |req| {
                let cluster = req.cluster.unwrap_or_default();
                Ok(Request::PutClusterConfig {
                    cluster: ClusterMeta {
                        id: cluster.id,
                        max_peer_count: cluster.max_peer_count,
                    },
                })
            },
            |_, _| Ok(pdpb::PutClusterConfigResponse::default()),
        )
        .await
    }
}
