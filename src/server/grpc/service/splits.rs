//! Splits: AskBatchSplit and ReportBatchSplit.

use super::*;

impl PdService {
    pub(super) async fn ask_batch_split(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::AskBatchSplitRequest>,
    ) -> Result<GrpcResponse<pdpb::AskBatchSplitResponse>, Status> {
        self.unary(
            request,
            Call::AskBatchSplit,
            |req| {
                let region_pb = req
                    .region
                    .as_ref()
                    .ok_or_else(|| Status::invalid_argument("no region"))?;
                Ok(Request::AskBatchSplit {
                    region: convert::region_from(region_pb, None).map_err(bad)?,
                    count: req.split_count,
                })
            },
            |_, reply| match reply {
                Reply::Splits(splits) => Ok(pdpb::AskBatchSplitResponse {
                    ids: splits
                        .into_iter()
                        .map(|s| pdpb::SplitId {
                            new_region_id: s.region_id,
                            new_peer_ids: s.peer_ids,
                        })
                        .collect(),
                    ..Default::default()
                }),
                other => Err(unexpected(other)),
            },
        )
        .await
    }

    pub(super) async fn report_batch_split(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::ReportBatchSplitRequest>,
    ) -> Result<GrpcResponse<pdpb::ReportBatchSplitResponse>, Status> {
        self.unary(
            request,
            Call::ReportBatchSplit,
            // A split report names no leader; the regions' leaders say who leads in their
            // next heartbeats.
            |req| {
                let regions = req
                    .regions
                    .iter()
                    .map(|r| convert::region_from(r, None))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(bad)?;
                Ok(Request::ReportBatchSplit { regions })
            },
            |_, _| Ok(pdpb::ReportBatchSplitResponse::default()),
        )
        .await
    }
}
