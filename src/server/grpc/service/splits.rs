//! Splits: AskBatchSplit and ReportBatchSplit.

use super::*;

impl PdService {
    pub(super) async fn ask_batch_split(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::AskBatchSplitRequest>,
    ) -> Result<GrpcResponse<pdpb::AskBatchSplitResponse>, Status> {
        self.authorize(&request, Call::AskBatchSplit)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        let region_pb = req
            .region
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("no region"))?;
        let region = convert::region_from(region_pb, None).map_err(bad)?;
        match self
            .placement(Request::AskBatchSplit {
                region,
                count: req.split_count,
            })
            .await?
        {
            Ok(Reply::Splits(splits)) => Ok(GrpcResponse::new(pdpb::AskBatchSplitResponse {
                header: self.header(),
                ids: splits
                    .into_iter()
                    .map(|s| pdpb::SplitId {
                        new_region_id: s.region_id,
                        new_peer_ids: s.peer_ids,
                    })
                    .collect(),
            })),
            Ok(other) => Err(unexpected(other)),
            Err(header) => Ok(GrpcResponse::new(pdpb::AskBatchSplitResponse {
                header,
                ..Default::default()
            })),
        }
    }

    pub(super) async fn report_batch_split(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::ReportBatchSplitRequest>,
    ) -> Result<GrpcResponse<pdpb::ReportBatchSplitResponse>, Status> {
        self.authorize(&request, Call::ReportBatchSplit)?;
        let req = request.into_inner();
        self.check(req.header.as_ref())?;
        // A split report names no leader; the regions' leaders say who leads in their next
        // heartbeats.
        let regions = req
            .regions
            .iter()
            .map(|r| convert::region_from(r, None))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        let header = match self
            .placement(Request::ReportBatchSplit { regions })
            .await?
        {
            Ok(_) => self.header(),
            Err(header) => header,
        };
        Ok(GrpcResponse::new(pdpb::ReportBatchSplitResponse { header }))
    }
}
