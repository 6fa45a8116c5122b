//! ReportMinResolvedTS: a store's smallest resolved ts, kept for the cluster's.

use super::*;

impl PdService {
    /// PD answers an unknown store with a plain error (gRPC UNKNOWN carrying its error code),
    /// not a header; TiKV sends this every second without retrying and only logs a failure.
    pub(super) async fn report_min_resolved_ts(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::ReportMinResolvedTsRequest>,
    ) -> Result<GrpcResponse<pdpb::ReportMinResolvedTsResponse>, Status> {
        let caller = ConnectionGrants::caller_of(&request);
        let req = self.admit(request, Call::ReportMinResolvedTs)?;
        let report = Request::ReportMinResolvedTs {
            store_id: req.store_id,
            min_resolved_ts: req.min_resolved_ts,
        };
        let header = match self.call_as(&caller, report).await {
            Response::Ok(Reply::Done) => self.header(),
            Response::Ok(other) => return Err(unexpected(other)),
            Response::Err(ErrorReply::Refused(Refusal::StoreNotFound(id))) => {
                return Err(Status::unknown(format!(
                    "[PD:core:ErrStoreNotFound]store {id} not found"
                )))
            }
            Response::Err(e) => self.refusal(e)?,
        };
        Ok(GrpcResponse::new(pdpb::ReportMinResolvedTsResponse {
            header,
        }))
    }
}
