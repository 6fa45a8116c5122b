//! GetMembers, GetClusterInfo and IsSnapshotRecovering: answered by every member, leader or not.

use super::*;

impl PdService {
    pub(super) async fn get_members(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetMembersRequest>,
    ) -> Result<GrpcResponse<pdpb::GetMembersResponse>, Status> {
        self.authorize(&request, Call::GetMembers)?;
        self.metrics().request(RequestKind::GetMembers);
        // Every member answers, and clients discover the cluster id here: the header's cluster
        // id is not checked (PD does not either).
        let _ = request;
        let reply = self.shared.membership.reply();
        let leader = reply.leader.as_ref().map(|l| self.member(l));
        Ok(GrpcResponse::new(pdpb::GetMembersResponse {
            header: self.header(),
            members: reply.members.iter().map(|m| self.member(m)).collect(),
            etcd_leader: leader.clone(),
            leader,
            ..Default::default()
        }))
    }

    pub(super) async fn get_cluster_info(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetClusterInfoRequest>,
    ) -> Result<GrpcResponse<pdpb::GetClusterInfoResponse>, Status> {
        self.authorize(&request, Call::GetClusterInfo)?;
        // Like GetMembers, any member answers and the cluster id is not checked: a client asks
        // this before it knows the id (kvproto even types this request's header as a response
        // header). One service mode: this process serves TSO itself.
        let _ = request;
        Ok(GrpcResponse::new(pdpb::GetClusterInfoResponse {
            header: self.header(),
            service_modes: vec![pdpb::ServiceMode::PdSvcMode as i32],
            ..Default::default()
        }))
    }

    /// PD reads its recovery mark from etcd on whichever member is asked, checking neither
    /// leadership nor the cluster id nor bootstrap: the first thing a starting TiKV asks.
    pub(super) async fn is_snapshot_recovering(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::IsSnapshotRecoveringRequest>,
    ) -> Result<GrpcResponse<pdpb::IsSnapshotRecoveringResponse>, Status> {
        self.authorize(&request, Call::IsSnapshotRecovering)?;
        match self.call(Request::IsSnapshotRecovering).await {
            Response::Ok(Reply::SnapshotRecovering(marked)) => {
                Ok(GrpcResponse::new(pdpb::IsSnapshotRecoveringResponse {
                    header: self.header(),
                    marked,
                }))
            }
            Response::Ok(other) => Err(unexpected(other)),
            Response::Err(e) => Err(Status::internal(e.to_string())),
        }
    }
}
