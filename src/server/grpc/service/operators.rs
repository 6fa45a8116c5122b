//! The operators a client asks for, as PD's `grpc_service.go` answers them: ScatterRegion
//! (by `regions_id`, or the deprecated single `region_id`), GetOperator, SplitRegions and
//! SplitAndScatterRegions (split, then scatter the regions the split made). Served by
//! `server::placement::operators`; this file owns only PD's answer shapes and errors.

use super::*;
use crate::placement::{OpRecord, OpStatus};
use crate::server::placement::operators;

impl PdService {
    /// A refusal in the shape PD gives it: an error header, or a gRPC status.
    fn refused<A: PdResponse>(&self, e: ErrorReply) -> Result<GrpcResponse<A>, Status> {
        self.metrics().error(&e);
        let mut reply = A::default();
        *reply.header_mut() = self.refusal(e)?;
        Ok(GrpcResponse::new(reply))
    }

    pub(super) async fn scatter_region(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::ScatterRegionRequest>,
    ) -> Result<GrpcResponse<pdpb::ScatterRegionResponse>, Status> {
        let req = self.admit(request, Call::ScatterRegion)?;
        self.metrics().request(RequestKind::Placement);
        #[allow(deprecated)]
        let single = req.region_id;
        if req.regions_id.is_empty() {
            return self
                .scatter_one(single, &req.group, req.skip_store_limit)
                .await;
        }
        // PD: one region named alone and unknown is an error, not a failed region.
        if req.regions_id.len() == 1 && !operators::is_known(&self.shared, req.regions_id[0]) {
            if !self.shared.placement.serves_bootstrapped() {
                return self.refused(ErrorReply::NotBootstrapped);
            }
            return Err(Status::unknown("region not found"));
        }
        let scattered = match operators::scatter(
            &self.shared,
            req.regions_id,
            req.group,
            req.retry_limit,
            req.skip_store_limit,
        )
        .await
        {
            Ok(s) => s,
            Err(e) => return self.refused(e),
        };
        Ok(GrpcResponse::new(pdpb::ScatterRegionResponse {
            header: self.header(),
            finished_percentage: scattered.finished_percentage,
            failed_regions_id: scattered.failed.into_iter().map(|(id, _)| id).collect(),
        }))
    }

    /// The deprecated single-region form: an unknown region is PD's REGION_NOT_FOUND header;
    /// a region the scatterer refuses is an error; otherwise 100 %.
    async fn scatter_one(
        &self,
        id: u64,
        group: &str,
        skip_store_limit: bool,
    ) -> Result<GrpcResponse<pdpb::ScatterRegionResponse>, Status> {
        if self.shared.placement.serves_bootstrapped() && !operators::is_known(&self.shared, id) {
            return Ok(GrpcResponse::new(pdpb::ScatterRegionResponse {
                header: self.error_header(
                    pdpb::ErrorType::RegionNotFound,
                    format!("region {id} not found"),
                ),
                ..Default::default()
            }));
        }
        let scattered =
            match operators::scatter(&self.shared, vec![id], group.into(), 0, skip_store_limit)
                .await
            {
                Ok(s) => s,
                Err(e) => return self.refused(e),
            };
        if let Some((_, why)) = scattered.failed.first() {
            return Err(Status::unknown(why.clone()));
        }
        Ok(GrpcResponse::new(pdpb::ScatterRegionResponse {
            header: self.header(),
            finished_percentage: 100,
            ..Default::default()
        }))
    }

    pub(super) async fn get_operator(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetOperatorRequest>,
    ) -> Result<GrpcResponse<pdpb::GetOperatorResponse>, Status> {
        let req = self.admit(request, Call::GetOperator)?;
        self.metrics().request(RequestKind::Placement);
        let record = match operators::operator_status(&self.shared, req.region_id).await {
            Ok(r) => r,
            Err(e) => return self.refused(e),
        };
        let Some(record) = record else {
            return Ok(GrpcResponse::new(pdpb::GetOperatorResponse {
                header: self.error_header(pdpb::ErrorType::RegionNotFound, "Not Found".into()),
                ..Default::default()
            }));
        };
        Ok(GrpcResponse::new(operator_reply(
            self.header(),
            req.region_id,
            &record,
        )))
    }

    pub(super) async fn split_regions(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::SplitRegionsRequest>,
    ) -> Result<GrpcResponse<pdpb::SplitRegionsResponse>, Status> {
        let req = self.admit(request, Call::SplitRegions)?;
        self.metrics().request(RequestKind::Placement);
        let split = match operators::split(&self.shared, req.split_keys, req.retry_limit).await {
            Ok(s) => s,
            Err(e) => return self.refused(e),
        };
        Ok(GrpcResponse::new(pdpb::SplitRegionsResponse {
            header: self.header(),
            finished_percentage: split.finished_percentage,
            regions_id: split.regions,
        }))
    }

    /// Split, then scatter what the split made, as PD does: nothing split is PD's "empty
    /// region" error.
    pub(super) async fn split_and_scatter_regions(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::SplitAndScatterRegionsRequest>,
    ) -> Result<GrpcResponse<pdpb::SplitAndScatterRegionsResponse>, Status> {
        let req = self.admit(request, Call::SplitAndScatterRegions)?;
        self.metrics().request(RequestKind::Placement);
        let split = match operators::split(&self.shared, req.split_keys, req.retry_limit).await {
            Ok(s) => s,
            Err(e) => return self.refused(e),
        };
        if split.regions.is_empty() {
            return Err(Status::unknown("empty region"));
        }
        let scattered = match operators::scatter(
            &self.shared,
            split.regions.clone(),
            req.group,
            req.retry_limit,
            false,
        )
        .await
        {
            Ok(s) => s,
            Err(e) => return self.refused(e),
        };
        Ok(GrpcResponse::new(pdpb::SplitAndScatterRegionsResponse {
            header: self.header(),
            split_finished_percentage: split.finished_percentage,
            scatter_finished_percentage: scattered.finished_percentage,
            regions_id: split.regions,
        }))
    }
}

/// PD's `GetOperatorResponse` for a record.
fn operator_reply(
    header: Option<pdpb::ResponseHeader>,
    region_id: u64,
    r: &OpRecord,
) -> pdpb::GetOperatorResponse {
    let status = match r.status {
        OpStatus::Success => pdpb::OperatorStatus::Success,
        OpStatus::Timeout => pdpb::OperatorStatus::Timeout,
        OpStatus::Cancel => pdpb::OperatorStatus::Cancel,
        OpStatus::Replace => pdpb::OperatorStatus::Replace,
        OpStatus::Running => pdpb::OperatorStatus::Running,
    };
    pdpb::GetOperatorResponse {
        header,
        region_id,
        desc: r.desc.as_bytes().to_vec(),
        status: status as i32,
        kind: r.kind.as_bytes().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Epoch;

    #[test]
    fn a_record_becomes_pds_reply() {
        let r = OpRecord {
            desc: "scatter-region",
            kind: "admin,region,leader",
            status: OpStatus::Running,
            group: None,
            epoch: Epoch::default(),
            at_ms: 0,
            started_ms: 0,
            related_merge: None,
            cancel_reason: None,
            size_mib: None,
        };
        let reply = operator_reply(None, 7, &r);
        assert_eq!(reply.region_id, 7);
        assert_eq!(reply.desc, b"scatter-region");
        assert_eq!(reply.kind, b"admin,region,leader");
        assert_eq!(reply.status, pdpb::OperatorStatus::Running as i32);
        for (s, want) in [
            (OpStatus::Success, 0),
            (OpStatus::Timeout, 1),
            (OpStatus::Cancel, 2),
            (OpStatus::Replace, 3),
        ] {
            let reply = operator_reply(
                None,
                7,
                &OpRecord {
                    status: s,
                    ..r.clone()
                },
            );
            assert_eq!(reply.status, want);
        }
    }
}
