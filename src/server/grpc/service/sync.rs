//! SyncRegions: the region syncer's stream to a follower member (`grpc::region_sync`).

use super::*;

impl PdService {
    pub(super) async fn sync_regions(
        self: &Arc<Self>,
        request: GrpcRequest<Streaming<pdpb::SyncRegionRequest>>,
    ) -> Result<GrpcResponse<Stream<pdpb::SyncRegionResponse>>, Status> {
        self.authorize(&request, Call::SyncRegions)?;
        super::super::region_sync::sync_regions(self.shared.clone(), request).await
    }
}
