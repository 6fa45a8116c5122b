//! Splits: AskBatchSplit and ReportBatchSplit, and the single-split AskSplit and ReportSplit
//! that TiKV falls back to against an old PD: the same requests with one split (same role).

use super::*;

impl PdService {
    pub(super) async fn ask_batch_split(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::AskBatchSplitRequest>,
    ) -> Result<GrpcResponse<pdpb::AskBatchSplitResponse>, Status> {
        if request.get_ref().region.is_none() {
            return self.missing_region(request, Call::AskBatchSplit).await;
        }
        self.unary(
            request,
            Call::AskBatchSplit,
            |req| ask(req.region.as_ref(), req.split_count),
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
            |req| report(req.regions.iter()),
            |_, _| Ok(pdpb::ReportBatchSplitResponse::default()),
        )
        .await
    }

    /// One new region's ids: AskBatchSplit with one split, answered in AskSplit's shape.
    pub(super) async fn ask_split(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::AskSplitRequest>,
    ) -> Result<GrpcResponse<pdpb::AskSplitResponse>, Status> {
        if request.get_ref().region.is_none() {
            return self.missing_region(request, Call::AskBatchSplit).await;
        }
        self.unary(
            request,
            Call::AskBatchSplit,
            |req| ask(req.region.as_ref(), 1),
            |_, reply| match reply {
                Reply::Splits(splits) => {
                    let split = splits
                        .into_iter()
                        .next()
                        .ok_or_else(|| Status::internal("a split of one was answered with none"))?;
                    Ok(pdpb::AskSplitResponse {
                        new_region_id: split.region_id,
                        new_peer_ids: split.peer_ids,
                        ..Default::default()
                    })
                }
                other => Err(unexpected(other)),
            },
        )
        .await
    }

    /// The two halves of a split: ReportBatchSplit of `[left, right]`. A half that is missing
    /// leaves a report PD calls an invalid split.
    pub(super) async fn report_split(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::ReportSplitRequest>,
    ) -> Result<GrpcResponse<pdpb::ReportSplitResponse>, Status> {
        self.unary(
            request,
            Call::ReportBatchSplit,
            |req| {
                report(
                    [req.left.as_ref(), req.right.as_ref()]
                        .into_iter()
                        .flatten(),
                )
            },
            |_, _| Ok(pdpb::ReportSplitResponse::default()),
        )
        .await
    }

    /// PD's answer to a split request without a region, after the checks PD makes first.
    async fn missing_region<Q: PdRequest, A: PdResponse>(
        &self,
        request: GrpcRequest<Q>,
        call: Call,
    ) -> Result<GrpcResponse<A>, Status> {
        self.admit(request, call)?;
        let header = match self.placement(Request::IsBootstrapped).await? {
            Ok(Reply::Bootstrapped(true)) => self.error_header(
                pdpb::ErrorType::RegionNotFound,
                "missing region for split".into(),
            ),
            Ok(Reply::Bootstrapped(false)) => self.refusal(ErrorReply::NotBootstrapped)?,
            Ok(other) => return Err(unexpected(other)),
            Err(header) => header,
        };
        let mut reply = A::default();
        *reply.header_mut() = header;
        Ok(GrpcResponse::new(reply))
    }
}

/// A request for `count` new regions' ids out of `region`.
fn ask(region: Option<&metapb::Region>, count: u32) -> Result<Request, Status> {
    let region = region.ok_or_else(|| Status::invalid_argument("no region"))?;
    Ok(Request::AskBatchSplit {
        region: convert::region_from(region, None).map_err(bad)?,
        count,
    })
}

/// A report of a split's regions. It names no leader; the regions' leaders say who leads in
/// their next heartbeats.
fn report<'a>(regions: impl Iterator<Item = &'a metapb::Region>) -> Result<Request, Status> {
    let regions = regions
        .map(|r| convert::region_from(r, None))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    Ok(Request::ReportBatchSplit { regions })
}
