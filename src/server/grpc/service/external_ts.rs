//! The external timestamp (SetExternalTimestamp, GetExternalTimestamp) and GetMinTS, which a
//! PD that serves TSO itself answers with one fresh timestamp.

use super::*;

impl PdService {
    pub(super) async fn set_external_timestamp(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::SetExternalTimestampRequest>,
    ) -> Result<GrpcResponse<pdpb::SetExternalTimestampResponse>, Status> {
        self.unary(
            request,
            Call::SetExternalTimestamp,
            |req| {
                Ok(Request::SetExternalTimestamp {
                    timestamp: req.timestamp,
                })
            },
            |_, _| Ok(pdpb::SetExternalTimestampResponse::default()),
        )
        .await
    }

    pub(super) async fn get_external_timestamp(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetExternalTimestampRequest>,
    ) -> Result<GrpcResponse<pdpb::GetExternalTimestampResponse>, Status> {
        self.unary(
            request,
            Call::GetExternalTimestamp,
            |_| Ok(Request::GetExternalTimestamp),
            |_, reply| match reply {
                Reply::ExternalTimestamp(timestamp) => Ok(pdpb::GetExternalTimestampResponse {
                    timestamp,
                    ..Default::default()
                }),
                other => Err(unexpected(other)),
            },
        )
        .await
    }

    /// The smallest timestamp any TSO server may still hand out: with one oracle, a fresh one
    /// (PD in its own TSO mode does the same). PD answers a failed allocation with a zero
    /// timestamp and no error; here the failure is reported, as a zero is no timestamp.
    pub(super) async fn get_min_ts(
        self: &Arc<Self>,
        request: GrpcRequest<pdpb::GetMinTsRequest>,
    ) -> Result<GrpcResponse<pdpb::GetMinTsResponse>, Status> {
        self.unary(
            request,
            Call::Tso,
            |_| Ok(Request::Tso { count: 1 }),
            |_, reply| match reply {
                Reply::Tso { first, .. } => {
                    let ts = Timestamp::from_u64(first);
                    Ok(pdpb::GetMinTsResponse {
                        timestamp: Some(pdpb::Timestamp {
                            physical: ts.physical_ms() as i64,
                            logical: ts.logical() as i64,
                            suffix_bits: 0,
                        }),
                        ..Default::default()
                    })
                }
                other => Err(unexpected(other)),
            },
        )
        .await
    }
}
